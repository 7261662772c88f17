// Multicast member records (libmrc/src/verbs/mcast_record.cc) without a device: the text form
// and its parsing (round trip, refusals naming the problem), file names, and which records a
// sender takes: a record of its own host by its process, another host's by its lease alone.
#include "verbs/mcast_record.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace mrc::verbs {
namespace {

sockaddr_in6 at(const char* addr, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  EXPECT_EQ(::inet_pton(AF_INET6, addr, &a.sin6_addr), 1) << addr;
  return a;
}

McastRecord sample() {
  McastRecord r;
  r.host = "5b0c1f0e-8f0a-4c47-9d1e-2a7c5d6e9f10.4026531836";
  r.node = "n017";
  r.pid = 4242;
  r.expires_ms = 1795000000123;
  ::inet_pton(AF_INET6, "fcbb:bbbb:100:0:24d:5243:0:7", r.gid.raw);
  r.planes = {at("2001:db8:1::17", 4791), at("::ffff:10.0.2.17", 4792)};
  return r;
}

TEST(McastRecord, EncodeParse_RoundTripAsText) {
  const McastRecord r = sample();
  const std::string text = encode_mcast_record(r);
  EXPECT_EQ(text,
            "mrc-mcast-member 2\n"
            "host 5b0c1f0e-8f0a-4c47-9d1e-2a7c5d6e9f10.4026531836\n"
            "node n017\n"
            "pid 4242\n"
            "expires 1795000000123\n"
            "gid fcbb:bbbb:100:0:24d:5243:0:7\n"
            "plane [2001:db8:1::17]:4791\n"
            "plane [::ffff:10.0.2.17]:4792\n");
  auto p = parse_mcast_record(text);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->host, r.host);
  EXPECT_EQ(p->node, r.node);
  EXPECT_EQ(p->pid, r.pid);
  EXPECT_EQ(p->expires_ms, r.expires_ms);
  EXPECT_EQ(std::memcmp(p->gid.raw, r.gid.raw, 16), 0);
  ASSERT_EQ(p->planes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(p->planes[i].sin6_family, AF_INET6);
    EXPECT_EQ(p->planes[i].sin6_port, r.planes[i].sin6_port) << i;
    EXPECT_EQ(std::memcmp(&p->planes[i].sin6_addr, &r.planes[i].sin6_addr, 16), 0) << i;
  }
  EXPECT_EQ(mcast_record_name(r), r.host + ".4242.4791");
}

TEST(McastRecord, Parse_UnknownKeysIgnoredNodeOptional) {
  auto p = parse_mcast_record(
      "mrc-mcast-member 2\nhost b\npid 1\nexpires 5\nweight 3\ngid ::1\nplane [::1]:9\n");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->node, "");
  EXPECT_EQ(p->planes.size(), 1u);
}

TEST(McastRecord, Parse_RefusalsNameTheProblem) {
  struct Case {
    const char* text;
    const char* says;
  };
  const std::string ok_tail = "pid 1\nexpires 5\ngid ::1\nplane [::1]:9\n";
  const Case cases[] = {
      {"MRCMCAS1\x01\x02", "not a member record"},  // the format before version 2
      {"mrc-mcast-member 3\nhost b\n", "another version"},
      {"mrc-mcast-member 2\npid 1\nexpires 5\ngid ::1\nplane [::1]:9\n", "no host line"},
      {"mrc-mcast-member 2\nhost b\nexpires 5\ngid ::1\nplane [::1]:9\n", "no pid line"},
      {"mrc-mcast-member 2\nhost b\npid 1\ngid ::1\nplane [::1]:9\n", "no expires line"},
      {"mrc-mcast-member 2\nhost b\npid 1\nexpires 5\nplane [::1]:9\n", "no gid line"},
      {"mrc-mcast-member 2\nhost b\npid 1\nexpires 5\ngid ::1\n", "no plane line"},
      {"mrc-mcast-member 2\nhost a/b\npid 1\n", "bad host line"},
      {"mrc-mcast-member 2\nhost b\npid -1\n", "bad pid line"},
      {"mrc-mcast-member 2\nhost b\npid 1\nexpires soon\n", "bad expires line"},
      {"mrc-mcast-member 2\nhost b\npid 1\nexpires 5\ngid 1.2.3.4\n", "bad gid line"},
      {"mrc-mcast-member 2\nhost b\npid 1\nexpires 5\ngid ::1\nplane ::1:9\n", "bad plane line"},
      {"mrc-mcast-member 2\nhost b\npid 1\nexpires 5\ngid ::1\nplane [::1]:0\n", "bad plane line"},
      {"mrc-mcast-member 2\nhost b\npid 1\nexpires 5\ngid ::1\nplane [::1]:65536\n",
       "bad plane line"},
      {"", "not a member record"},
  };
  for (const Case& c : cases) {
    auto p = parse_mcast_record(c.text);
    ASSERT_FALSE(p) << c.text;
    EXPECT_NE(p.error().find(c.says), std::string::npos) << c.text << " -> " << p.error();
  }
}

TEST(McastRecord, ValidHostId_SafeInAFileName) {
  EXPECT_TRUE(valid_mcast_host_id("5b0c1f0e-8f0a.4026531836"));
  EXPECT_TRUE(valid_mcast_host_id("node_17"));
  EXPECT_FALSE(valid_mcast_host_id(""));
  EXPECT_FALSE(valid_mcast_host_id("a/b"));
  EXPECT_FALSE(valid_mcast_host_id("a b"));
  EXPECT_FALSE(valid_mcast_host_id(std::string(129, 'a')));
  EXPECT_TRUE(valid_mcast_host_id(std::string(128, 'a')));
}

bool always_alive(int64_t) { return true; }
bool never_alive(int64_t) { return false; }

TEST(McastRecord, Liveness_OwnHostByProcessAndLeaseOtherHostByLeaseAlone) {
  McastRecord r = sample();
  const std::string here = r.host;
  const std::string elsewhere = "another-machine.4026531836";
  const int64_t now = r.expires_ms - 1;
  // This host: the pid decides at once (a member killed without leaving is dropped).
  EXPECT_EQ(mcast_record_liveness(r, here, now, always_alive), McastLiveness::kLive);
  EXPECT_EQ(mcast_record_liveness(r, here, now, never_alive), McastLiveness::kStale);
  // Another host: its pid names no process here; the lease decides.
  EXPECT_EQ(mcast_record_liveness(r, elsewhere, now, never_alive), McastLiveness::kLive);
  EXPECT_EQ(mcast_record_liveness(r, elsewhere, r.expires_ms, always_alive), McastLiveness::kStale);
  EXPECT_EQ(mcast_record_liveness(r, elsewhere, r.expires_ms + 60'000, never_alive),
            McastLiveness::kStale);
  // This host past its lease (a reused pid of a member gone long ago): stale too.
  EXPECT_EQ(mcast_record_liveness(r, here, r.expires_ms, always_alive), McastLiveness::kStale);
  // The lease outlives several missed renewals, and tolerates that much clock skew.
  EXPECT_GE(kMcastLease, 3 * kMcastRefresh);
}

}  // namespace
}  // namespace mrc::verbs
