// The dissector on a real capture: tcpdump in the sending host's namespace of a namespace
// fabric (2 hosts, 2 planes x 2 spines, 0.2 Gbit/s ports) during a 1 s mrc-perf WRITE run,
// decoded by tshark with tools/wireshark/mrc.lua: every MRC packet decodes without error, and
// what the capture saw leave the host equals, kind by kind, what the client's engine counted
// sent (EngineStats::tx_by_kind, read after the drivers stopped), less what the host's own
// port qdiscs dropped; and what arrived equals what the server's engine sent when no qdisc of
// the fabric dropped anything (else at most that; also "at most" where tcpdump itself lost
// packets, which it reports). Skips, saying why, without root (namespaces) or
// without tshark/tcpdump.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <filesystem>
#include <regex>
#include <set>

#include "ns_handle.h"
#include "ns_test_fabric.h"
#include "session.h"
#include "tshark.h"
#include "wire/wire.h"

namespace mrc::wireshark {
namespace {

using namespace mrc::wireshark::testing;
using mrc::mrcctl::testing::run_program;
using mrc::mrcctl::testing::spawn_program;

class NsCapture : public perf::NsFabricSuite<NsCapture> {
 public:
  static constexpr perf::TestFabricSpec kFabric{"mrcw", 2, /*gso=*/true, 1, /*port_gbps=*/0.2};

 protected:
  void SetUp() override {
    perf::NsFabricSuite<NsCapture>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const char* p : {"tshark", "tcpdump", "ip", "tc"})
      if (find_program(p).empty()) GTEST_SKIP() << p << " is not installed (scripts/deps.sh)";
    dir_ = std::filesystem::temp_directory_path() / ("mrc-capture-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  /// Packets the qdiscs of `netns` dropped so far (tc -s qdisc: every "dropped N").
  static uint64_t qdisc_drops(const std::string& netns) {
    const auto r =
        run_program(find_program("ip"), {"netns", "exec", netns, "tc", "-s", "qdisc", "show"});
    EXPECT_EQ(r.rc, 0) << r.err;
    uint64_t n = 0;
    static const std::regex kDropped("dropped ([0-9]+)");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), kDropped);
         it != std::sregex_iterator(); ++it)
      n += std::stoull((*it)[1]);
    return n;
  }

  /// Qdisc drops in every switch and in host 1: where a packet toward host 0 can be lost.
  static uint64_t fabric_drops() {
    const srv6::Fabric& f = fab_->fabric();
    uint64_t n = qdisc_drops(fab_->host_netns(1));
    for (uint32_t p = 0; p < f.config().planes; ++p) {
      for (uint32_t t = 0; t < f.t0s(); ++t)
        n += qdisc_drops(fab_->switch_netns({srv6::Tier::kT0, p, t}));
      for (uint32_t s = 0; s < f.config().spines; ++s)
        n += qdisc_drops(fab_->switch_netns({srv6::Tier::kT1, p, s}));
    }
    return n;
  }

  std::filesystem::path dir_;
};

TEST_F(NsCapture, WriteRun_EveryPacketDecodedAndCountsEqualEngineCounters) {
  const std::string ns0 = fab_->host_netns(0);
  const std::string pcap = (dir_ / "h0.pcap").string();
  const uint64_t drops_before = qdisc_drops(ns0);
  const uint64_t fabric_drops_before = fabric_drops();

  // tcpdump in host 0's namespace, on every interface (both planes), MRC's port only.
  int out = -1, err = -1;
  const pid_t dump = spawn_program(
      find_program("ip"),
      {"netns", "exec", ns0, find_program("tcpdump"), "-i", "any", "-n", "--immediate-mode", "-U",
       "-B", "32768", "-w", pcap, "udp", "port", std::to_string(wire::kDefaultUdpPort)},
      &out, &err);
  ASSERT_GT(dump, 0);
  std::string dump_err;
  auto read_err = [&](int ms, const std::string& until) {
    char buf[4096];
    for (int waited = 0; waited < ms && dump_err.find(until) == std::string::npos; waited += 50) {
      pollfd p{err, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::read(err, buf, sizeof buf);
      if (n <= 0) break;
      dump_err.append(buf, static_cast<size_t>(n));
    }
  };
  read_err(10000, "listening on");
  ASSERT_NE(dump_err.find("listening on"), std::string::npos) << dump_err;

  perf::SessionOptions o;
  o.msg_bytes = 64 << 10;
  o.outstanding = 4;
  o.duration_s = 1;
  o.quiet = true;
  auto run = perf::run_session(perf::fabric_handle(*fab_), o);

  // What the host's port queues still hold leaves within a few ms at 0.2 Gbit/s.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(dump, SIGINT);
  read_err(10000, "dropped by kernel");
  int status = 0;
  ::waitpid(dump, &status, 0);
  ::close(out);
  ::close(err);
  ASSERT_TRUE(run.ok()) << run.error();
  ASSERT_TRUE(run.value().mrc.has_value());
  const perf::MrcRunResult& mrc = *run.value().mrc;
  ASSERT_TRUE(mrc.ok()) << mrc.first_error;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dump_err, m, std::regex("([0-9]+) packets dropped by kernel")))
      << dump_err;
  // A capture that lost packets (a starved tcpdump) still must decode all it has, but can only
  // be compared as "at most".
  const uint64_t capture_drops = std::stoull(m[1]);
  const uint64_t host_drops = qdisc_drops(ns0) - drops_before;
  const uint64_t path_drops = fabric_drops() - fabric_drops_before;

  const Fields f = tshark_fields(pcap, {"ipv6.src", "mrc.kind", "mrc.flags.retransmit", "mrc.error",
                                        "_ws.malformed", "mrc.trimmed"});
  ASSERT_EQ(f.rc, 0) << f.err;
  ASSERT_FALSE(f.rows.empty()) << "nothing captured: " << dump_err;
  std::set<std::string> h0;
  for (uint32_t p = 0; p < fab_->fabric().config().planes; ++p)
    h0.insert(srv6::format(fab_->fabric().host_address(0, p)));
  std::array<uint64_t, 64> sent{}, received{};
  uint64_t sent_total = 0, sent_retransmits = 0, frames_without_mrc = 0;
  for (const Row& r : f.rows) {
    EXPECT_TRUE(r.at("mrc.error").empty()) << r.at("mrc.error")[0];
    EXPECT_TRUE(r.at("_ws.malformed").empty()) << "malformed frame";
    EXPECT_TRUE(r.at("mrc.trimmed").empty()) << "no switch trims here";
    const auto& kinds = r.at("mrc.kind");
    frames_without_mrc += kinds.empty();
    const auto& src = r.at("ipv6.src");
    const bool from_h0 = !src.empty() && h0.count(src.back()) > 0;
    for (const auto& k : kinds) {
      const auto kind = static_cast<size_t>(std::stoul(k));
      ASSERT_LT(kind, 64u);
      ++(from_h0 ? sent : received)[kind];
      sent_total += from_h0;
    }
    if (from_h0)
      for (const auto& x : r.at("mrc.flags.retransmit")) sent_retransmits += x == "1";
  }
  EXPECT_EQ(frames_without_mrc, 0u) << "frames on MRC's port the dissector did not decode";

  // Sent: the capture sees what leaves the host's ports, after their qdiscs.
  const engine::EngineStats& c = mrc.client_engine;
  EXPECT_EQ(c.tx_datagrams, mrc.client_counters.datagrams_sent)
      << "the driver sent all the engine made";
  const bool exact_sent = host_drops == 0 && capture_drops == 0;
  const bool exact_received = path_drops == 0 && capture_drops == 0;
  if (capture_drops == 0) {
    EXPECT_EQ(sent_total + host_drops, mrc.client_counters.datagrams_sent)
        << host_drops << " qdisc drops";
  } else {
    EXPECT_LE(sent_total + host_drops, mrc.client_counters.datagrams_sent);
  }
  const auto write = static_cast<size_t>(wire::Kind::kWrite);
  const auto ack = static_cast<size_t>(wire::Kind::kAck);
  EXPECT_GT(sent[write], 100u);
  for (size_t k = 0; k < 64; ++k) {
    if (exact_sent) {
      EXPECT_EQ(sent[k], c.tx_by_kind[k]) << "kind " << k;
    } else {
      EXPECT_LE(sent[k], c.tx_by_kind[k]) << "kind " << k;
    }
    // Received: what the server's engine sent, less what the fabric dropped on the way.
    if (exact_received) {
      EXPECT_EQ(received[k], mrc.server_engine.tx_by_kind[k]) << "kind " << k;
    } else {
      EXPECT_LE(received[k], mrc.server_engine.tx_by_kind[k]) << "kind " << k;
    }
  }
  if (exact_sent) {
    EXPECT_EQ(sent_retransmits, c.tx_retransmit_flagged);
  } else {
    EXPECT_LE(sent_retransmits, c.tx_retransmit_flagged);
  }
  EXPECT_GT(received[ack], 0u);
  EXPECT_EQ(sent[ack] + received[write], 0u) << "a WRITE run: data one way, ACKs the other";
  std::printf(
      "capture at h0: %llu sent (%llu WRITE, %llu retransmitted, %llu probes), %llu ACKs "
      "received of %llu the server sent; qdisc drops: host 0 %llu, fabric %llu; capture drops "
      "%llu (%s)\n",
      (unsigned long long)sent_total, (unsigned long long)sent[write],
      (unsigned long long)sent_retransmits,
      (unsigned long long)sent[static_cast<size_t>(wire::Kind::kProbe)],
      (unsigned long long)received[ack], (unsigned long long)mrc.server_engine.tx_by_kind[ack],
      (unsigned long long)host_drops, (unsigned long long)path_drops,
      (unsigned long long)capture_drops, exact_sent && exact_received ? "exact" : "at most");
}

}  // namespace
}  // namespace mrc::wireshark
