// Hostile peers on the namespace fabric: while host 0 streams verified RDMA WRITEs to host 1,
// host 2 sprays both of them with junk and with well-formed MRC packets (valid CRCs) of every
// kind carrying guessed QPNs and wrong tokens, truncated and oversized datagrams. The transfer
// must complete with every byte intact and no error, and each endpoint must have counted
// what it dropped, by reason. Skips (saying why) where namespaces cannot be made.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "mrc/common/netns.h"
#include "mrc/engine/stats.h"
#include "mrc/wire/wire.h"
#include "ns_handle.h"
#include "ns_test_fabric.h"

namespace mrc::perf {
namespace {

using engine::Drop;

sockaddr_in6 to(const srv6::Ipv6& a) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(io::kDefaultUdpPort);
  std::memcpy(&s.sin6_addr, a.data(), a.size());
  return s;
}

// Sends forged datagrams to the targets until `stop`, about 25 k per second; target i goes out
// of fds[i % fds.size()] (a socket bound to the attacker's port in the target's plane).
void attack(std::vector<int> fds, std::vector<sockaddr_in6> targets, std::atomic<bool>& stop,
            uint64_t* sent) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(9000);
  static constexpr wire::Kind kKinds[] = {
      wire::Kind::kWrite,   wire::Kind::kWriteImm, wire::Kind::kSend, wire::Kind::kSendImm,
      wire::Kind::kReadReq, wire::Kind::kReadResp, wire::Kind::kAck,  wire::Kind::kNack,
      wire::Kind::kProbe,   wire::Kind::kProbeReply};
  while (!stop.load()) {
    for (int burst = 0; burst < 50; ++burst) {
      size_t len = 0;
      const uint64_t r = rng();
      switch (r % 4) {
        case 0:  // junk of any length, also past the largest MRC packet
          len = rng() % buf.size();
          for (size_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(rng());
          break;
        case 1:
        case 2: {  // well-formed, guessed QPN, wrong token; sometimes truncated
          wire::Packet p;
          p.common.kind = kKinds[rng() % std::size(kKinds)];
          p.common.dst_qpn = 1 + rng() % 8;
          p.common.token = static_cast<uint32_t>(rng());
          p.common.psn = static_cast<uint32_t>(rng() % 4096);
          p.common.ev = static_cast<uint32_t>(rng() % 4) << 8;
          std::vector<uint8_t> payload;
          if (wire::is_data(p.common.kind)) {
            payload.resize(rng() % 4097);
            p.data.payload_len = static_cast<uint16_t>(payload.size());
            p.data.msg_len = static_cast<uint32_t>(payload.size());
            p.data.rkey = static_cast<uint32_t>(rng());
          }
          p.ack.cum_psn = static_cast<uint32_t>(rng());
          p.nack.nack_psn = static_cast<uint32_t>(rng());
          const size_t h = wire::encode_header(p, payload, buf);
          std::copy(payload.begin(), payload.end(), buf.begin() + h);
          len = h + payload.size();
          if (r % 4 == 2) len = rng() % (len + 1);  // truncated
          break;
        }
        case 3:  // a valid header whose CRC is broken by one flipped bit
          len = wire::encode_header(wire::Packet{}, {}, buf);
          buf[rng() % len] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
      }
      const size_t t = rng() % targets.size();
      const sockaddr_in6& dst = targets[t];
      if (::sendto(fds[t % fds.size()], buf.data(), len, 0, reinterpret_cast<const sockaddr*>(&dst),
                   sizeof dst) >= 0)
        ++*sent;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // ~25 k datagrams/s
  }
}

TEST(NsHostile, ForgedAndJunkDatagrams_TransferIntactDropsCounted) {
  if (auto ok = mrc::netns_supported(); !ok.ok()) GTEST_SKIP() << ok.error();
  auto up = make_test_fabric("mrch", 3, /*gso=*/true);
  ASSERT_TRUE(up.ok()) << up.error();
  nsfabric::NsFabric fab = std::move(up).value();
  struct Down {
    nsfabric::NsFabric& f;
    ~Down() { EXPECT_TRUE(f.down().ok()); }
  } down{fab};

  // The attacker: host 2, a socket on each of its plane ports (a plane's addresses are reached
  // only through that plane), aiming at both endpoints' plane 0 and 1 ports.
  std::vector<int> fds;
  for (uint32_t p = 0; p < 2; ++p) {
    auto fd = mrc::in_netns(fab.host_netns(2), [&]() -> Result<int, std::string> {
      const int s = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (s < 0) return Err(std::string("socket failed"));
      sockaddr_in6 me = to(fab.fabric().host_address(2, p));
      me.sin6_port = 0;
      for (int tries = 0; ::bind(s, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0; ++tries) {
        if (tries == 100) return Err("bind to plane " + std::to_string(p) + " failed");
        ::usleep(10'000);  // the address may still be tentative
      }
      return s;
    });
    ASSERT_TRUE(fd.ok()) << fd.error();
    fds.push_back(*fd);
  }
  std::vector<sockaddr_in6> targets;
  for (uint32_t h : {0u, 1u})
    for (uint32_t p = 0; p < 2; ++p) targets.push_back(to(fab.fabric().host_address(h, p)));
  std::atomic<bool> stop{false};
  uint64_t sent = 0;
  std::thread attacker(attack, fds, targets, std::ref(stop), &sent);

  const FabricHandle h = fabric_handle(fab);
  SessionOptions so;
  so.msg_bytes = 256 << 10;
  so.duration_s = 2.5;
  so.quiet = true;
  auto r = run_session(h, so);
  stop = true;
  attacker.join();
  for (int fd : fds) ::close(fd);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->mrc.has_value());
  const MrcRunResult& m = *r->mrc;
  EXPECT_TRUE(r->data_ok) << r->first_error;
  EXPECT_GT(m.messages, 20u);
  EXPECT_EQ(m.mismatches, 0u);
  EXPECT_EQ(m.errors, 0u) << m.first_error;
  EXPECT_GT(sent, 10000u);
  for (const engine::EngineStats* st : {&m.client_engine, &m.server_engine}) {
    EXPECT_GT(st->dropped(Drop::kMalformed), 0u);
    EXPECT_GT(st->dropped(Drop::kBadToken) + st->dropped(Drop::kUnknownQp), 0u);
  }
  // Every hostile datagram that arrived is counted once, by what rejected it: the engine's
  // malformed / bad-token / unknown-QP drops, or the driver's truncation (too large for any
  // MRC packet). UDP may lose some on the way (a full socket), never invent any.
  uint64_t counted = 0;
  for (const engine::EngineStats* st : {&m.client_engine, &m.server_engine})
    counted += st->dropped(Drop::kMalformed) + st->dropped(Drop::kBadToken) +
               st->dropped(Drop::kUnknownQp);
  counted += m.client_counters.recv_truncated + m.server_counters.recv_truncated;
  std::printf("attacker sent %llu datagrams; counted as dropped: %llu (server: %llu malformed, "
              "%llu bad token, %llu unknown QP; truncated %llu + %llu)\n",
              (unsigned long long)sent, (unsigned long long)counted,
              (unsigned long long)m.server_engine.dropped(Drop::kMalformed),
              (unsigned long long)m.server_engine.dropped(Drop::kBadToken),
              (unsigned long long)m.server_engine.dropped(Drop::kUnknownQp),
              (unsigned long long)m.client_counters.recv_truncated,
              (unsigned long long)m.server_counters.recv_truncated);
  EXPECT_LE(counted, sent) << "more drops counted than hostile datagrams sent";
  EXPECT_GE(counted, sent * 9 / 10) << "hostile datagrams that arrived went uncounted";
}

}  // namespace
}  // namespace mrc::perf
