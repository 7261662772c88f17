// Peer addresses learnt on the wire (ADDR_QUERY / ADDR_REPLY): the asker's and answerer's
// rules on their own, then UdpDriver pairs on IPv4 loopback addresses (127.0.0.0/8 is all
// loopback, so each plane gets an address of its own; the planes are UDP/IPv4 through
// IPv4-mapped dual-stack sockets). Threading: the test thread talks to drivers through
// with_engine and their public calls only.
#include "mrc/io/udp/peer_addresses.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "mrc/io/udp/udp_driver.h"

namespace mrc::io {
namespace {

using namespace engine;
using namespace std::chrono_literals;

sockaddr_in6 addr(const char* text, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  EXPECT_EQ(::inet_pton(AF_INET6, text, &a.sin6_addr), 1) << text;
  return a;
}

std::string text_of(const sockaddr_in6& a) {
  char s[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, &a.sin6_addr, s, sizeof s);
  return std::string(s) + "/" + std::to_string(ntohs(a.sin6_port));
}

constexpr PeerAddresses::Binding kBinding{/*qpn=*/7, /*dest_qpn=*/9, /*remote_token=*/0xAAAA0001,
                                          /*local_token=*/0xBBBB0002};

// The reply the peer's driver would send to `query`: from QP 9, which expects the query's
// token and sends with kBinding.local_token.
std::vector<uint8_t> reply_to(const wire::Packet& query, std::vector<sockaddr_in6> planes) {
  QpAttr qp;
  qp.state = QpState::kRts;
  qp.local_token = kBinding.remote_token;
  qp.remote_token = kBinding.local_token;
  qp.dest_qpn = kBinding.qpn;
  EXPECT_TRUE(PeerAddresses::matches(query, qp));
  std::vector<uint8_t> b(wire::kAddrReplySize);
  b.resize(PeerAddresses::build_reply(Time{5}, query, qp, kBinding.dest_qpn, planes, b));
  return b;
}

TEST(PeerAddresses, Start_QueryCarriesTheBindingAndANonce) {
  PeerAddresses pa;
  const std::vector<sockaddr_in6> known = {addr("2001:db8::2", 4791), addr("2001:db8::2", 4792)};
  ASSERT_TRUE(pa.start(Time{1000}, 3, known, kBinding));
  EXPECT_FALSE(pa.start(Time{1000}, 3, known, kBinding)) << "one learning per peer at a time";
  EXPECT_EQ(pa.next_deadline(), Time{1000});
  uint64_t gave_up = 0;
  auto q = pa.due(Time{1000}, &gave_up);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].peer, 3u);
  EXPECT_EQ(q[0].plane, 0);
  EXPECT_EQ(text_of(q[0].to), "2001:db8::2/4791");
  auto p = wire::decode(q[0].bytes);
  ASSERT_TRUE(p.ok()) << wire::to_string(p.error());
  EXPECT_EQ(p->common.kind, wire::Kind::kAddrQuery);
  EXPECT_EQ(p->common.dst_qpn, 0u);
  EXPECT_EQ(p->common.token, kBinding.remote_token);
  EXPECT_EQ(p->addr.target_qpn, kBinding.dest_qpn);
  EXPECT_EQ(p->addr.src_qpn, kBinding.qpn);
  EXPECT_EQ(pa.next_deadline(), Time{1000} + PeerAddresses::kFirstRetry);
  EXPECT_TRUE(pa.due(Time{1001}, &gave_up).empty()) << "not before the retry time";
}

TEST(PeerAddresses, Retries_DoubleOnThePlanesInTurnThenGiveUp) {
  PeerAddresses pa;
  const std::vector<sockaddr_in6> known = {addr("2001:db8::2", 4791), addr("2001:db8::2", 4792)};
  ASSERT_TRUE(pa.start(Time{0}, 0, known, kBinding));
  uint64_t gave_up = 0;
  Time t{0};
  std::vector<Duration> gaps;
  for (uint32_t i = 0; i < PeerAddresses::kTries; ++i) {
    const Time at = pa.next_deadline();
    gaps.push_back(at - t);
    t = at;
    auto q = pa.due(t, &gave_up);
    ASSERT_EQ(q.size(), 1u) << "try " << i;
    EXPECT_EQ(q[0].plane, i % 2);
    EXPECT_EQ(ntohs(q[0].to.sin6_port), 4791 + i % 2);
  }
  for (size_t i = 2; i < gaps.size(); ++i) EXPECT_EQ(gaps[i], 2 * gaps[i - 1]);
  EXPECT_EQ(gave_up, 0u);
  EXPECT_TRUE(pa.due(pa.next_deadline(), &gave_up).empty());
  EXPECT_EQ(gave_up, 1u);
  EXPECT_EQ(pa.next_deadline(), kNever);
  EXPECT_FALSE(pa.learned(0));
  EXPECT_TRUE(pa.start(t, 0, known, kBinding)) << "a learning that gave up may start again";
}

TEST(PeerAddresses, Reply_AcceptedOnlyWhenEveryBoundFieldMatches) {
  const sockaddr_in6 known = addr("2001:db8::2", 4791);
  const std::vector<sockaddr_in6> planes = {known, addr("2001:db8:1::2", 4791)};
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>&, sockaddr_in6&)> spoil;
    bool accepted;
  };
  auto patch32 = [](std::vector<uint8_t>& b, size_t off, uint32_t v) {
    auto p = wire::decode(b);
    ASSERT_TRUE(p.ok());
    wire::Packet q = *p;
    if (off == 8) q.common.token = v;
    if (off == 16) q.common.psn = v;
    if (off == 32) q.addr.target_qpn = v;
    if (off == 36) q.addr.src_qpn = v;
    wire::encode_header(q, {}, b);
  };
  const Case cases[] = {
      {"as sent", [](auto&, auto&) {}, true},
      {"another token", [&](auto& b, auto&) { patch32(b, 8, 0xBBBB0003); }, false},
      {"another nonce", [&](auto& b, auto&) { patch32(b, 16, 0); }, false},
      {"another asking QP", [&](auto& b, auto&) { patch32(b, 32, 8); }, false},
      {"another answering QP", [&](auto& b, auto&) { patch32(b, 36, 10); }, false},
      {"from another address", [](auto&, auto& from) { from = addr("2001:db8::66", 4791); }, false},
      {"from another port", [](auto&, auto& from) { from.sin6_port = htons(4700); }, false},
  };
  for (const Case& c : cases) {
    PeerAddresses pa;
    ASSERT_TRUE(pa.start(Time{0}, 4, {known}, kBinding));
    uint64_t gave_up = 0;
    auto q = pa.due(Time{0}, &gave_up);
    ASSERT_EQ(q.size(), 1u);
    auto query = wire::decode(q[0].bytes);
    ASSERT_TRUE(query.ok());
    std::vector<uint8_t> b = reply_to(*query, planes);
    sockaddr_in6 from = known;
    c.spoil(b, from);
    auto r = wire::decode(b);
    ASSERT_TRUE(r.ok()) << c.what;
    auto got = pa.on_reply(*r, from);
    EXPECT_EQ(got.has_value(), c.accepted) << c.what;
    EXPECT_EQ(pa.learned(4), c.accepted) << c.what;
    if (got) {
      EXPECT_EQ(got->peer, 4u);
      ASSERT_EQ(got->planes.size(), 2u);
      EXPECT_EQ(std::memcmp(got->planes[1].addr.data(), &planes[1].sin6_addr, 16), 0);
      EXPECT_EQ(got->planes[1].port, 4791);
      EXPECT_FALSE(pa.on_reply(*r, from)) << "a learning takes one reply";
      EXPECT_EQ(pa.next_deadline(), kNever);
    }
  }
}

TEST(PeerAddresses, Matches_OnlyAConnectedQpExpectingTheTokenFromTheAskingQp) {
  wire::Packet q;
  q.common.kind = wire::Kind::kAddrQuery;
  q.common.token = 0x1234;
  q.addr.src_qpn = 5;
  QpAttr qp;
  qp.state = QpState::kRtr;
  qp.local_token = 0x1234;
  qp.dest_qpn = 5;
  EXPECT_TRUE(PeerAddresses::matches(q, qp));
  QpAttr other = qp;
  other.local_token = 0x1235;
  EXPECT_FALSE(PeerAddresses::matches(q, other)) << "a stranger's token";
  other = qp;
  other.dest_qpn = 6;
  EXPECT_FALSE(PeerAddresses::matches(q, other)) << "connected to another QP";
  for (QpState s : {QpState::kReset, QpState::kInit, QpState::kError}) {
    other = qp;
    other.state = s;
    EXPECT_FALSE(PeerAddresses::matches(q, other)) << "state " << static_cast<int>(s);
  }
  other = qp;
  other.state = QpState::kRts;
  EXPECT_TRUE(PeerAddresses::matches(q, other));
}

TEST(PeerAddresses, MayAnswer_BurstThenRate) {
  PeerAddresses pa;
  const Time t{1'000'000'000};
  uint32_t n = 0;
  while (pa.may_answer(t)) ++n;
  EXPECT_EQ(n, PeerAddresses::kAnswerBurst);
  EXPECT_FALSE(pa.may_answer(t + 500us));
  EXPECT_TRUE(pa.may_answer(t + 1ms)) << "kAnswersPerSecond = 1000: one a millisecond";
}

// ---- Two drivers on IPv4 loopback addresses ----------------------------------------------

// Host i's plane p is at 127.0.(10 + i).(1 + p), an ephemeral port each.
UdpConfig ipv4_config(int host, PathMode mode) {
  UdpConfig cfg;
  cfg.path_mode = mode;
  cfg.ecmp_source_ports = 4;
  for (int p = 0; p < 2; ++p)
    cfg.planes.push_back(
        PlaneConfig{"::ffff:127.0." + std::to_string(10 + host) + "." + std::to_string(1 + p), 0});
  return cfg;
}

bool wait_for(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

class PeerAddressesPair : public ::testing::TestWithParam<PathMode> {
 protected:
  struct Host {
    std::unique_ptr<UdpDriver> drv;
    CqId cq = 0;
    Qpn qpn = 0;
    PeerId peer = 0;
  };
  static constexpr uint32_t kToken[2] = {0x51515151, 0x62626262};

  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      auto d = UdpDriver::create(ipv4_config(i, GetParam()));
      ASSERT_TRUE(d.ok()) << d.error();
      h_[i].drv = std::move(d).value();
      auto cq = h_[i].drv->with_engine([](Engine& e) { return e.create_cq(1024); });
      ASSERT_TRUE(cq.ok());
      h_[i].cq = *cq;
      QpInit init;
      init.send_cq = init.recv_cq = h_[i].cq;
      init.local_token = kToken[i];
      auto q = h_[i].drv->with_engine([&](Engine& e) { return e.create_qp(init); });
      ASSERT_TRUE(q.ok());
      h_[i].qpn = *q;
      h_[i].drv->start();
    }
  }
  void TearDown() override {
    for (auto& h : h_)
      if (h.drv) h.drv->stop();
  }

  // Host i knows host 1-i only by its plane-0 address (a GID), at each plane's port there.
  PeerId known_by_plane0(int i) {
    const UdpDriver& other = *h_[1 - i].drv;
    const sockaddr_in6 a0 = other.local_address(0);
    const uint16_t ports[2] = {ntohs(a0.sin6_port), ntohs(other.local_address(1).sin6_port)};
    return h_[i].drv->add_peer_at(a0.sin6_addr, ports);
  }

  void connect(int i) {
    Host& h = h_[i];
    auto r = h.drv->with_engine([&](Engine& e) {
      QpAttr at;
      at.state = QpState::kInit;
      if (auto s = e.modify_qp(h.qpn, at, attr::kState); !s) return s;
      at.state = QpState::kRtr;
      at.peer = h.peer;
      at.dest_qpn = h_[1 - i].qpn;
      at.remote_token = kToken[1 - i];
      at.paths = h.drv->spray_paths(0);
      if (auto s = e.modify_qp(h.qpn, at, attr::kState | attr::kDest | attr::kPaths); !s) return s;
      at.state = QpState::kRts;
      return e.modify_qp(h.qpn, at, attr::kState);
    });
    ASSERT_TRUE(r.ok());
  }

  // A 1 MiB WRITE from host 0 to host 1, completed and checked.
  void write_and_check() {
    std::vector<uint8_t> src(1 << 20), dst(1 << 20, 0);
    for (size_t k = 0; k < src.size(); ++k) src[k] = static_cast<uint8_t>(k * 13 + 5);
    auto reg = [](UdpDriver& d, std::vector<uint8_t>& m) {
      return d.with_engine([&](Engine& e) {
        return e.register_mr(m.data(), m.size(), reinterpret_cast<uint64_t>(m.data()),
                             access::kLocalWrite | access::kRemoteWrite);
      });
    };
    auto lkey = reg(*h_[0].drv, src);
    auto rkey = reg(*h_[1].drv, dst);
    ASSERT_TRUE(lkey.ok() && rkey.ok());
    const Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), *lkey};
    SendWr wr;
    wr.wr_id = 77;
    wr.opcode = Opcode::kWrite;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    wr.rkey = *rkey;
    ASSERT_TRUE(h_[0].drv->with_engine([&](Engine& e) { return e.post_send(h_[0].qpn, wr); }).ok());
    Completion c{};
    ASSERT_TRUE(wait_for([&] {
      return h_[0].drv->with_engine(
                 [&](Engine& e) { return e.poll_cq(h_[0].cq, std::span<Completion>(&c, 1)); }) == 1;
    }));
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(c.wr_id, 77u);
    EXPECT_EQ(dst, src);
  }

  Host h_[2];
};

TEST_P(PeerAddressesPair, LearnsThePeersPlaneAddressesThenSpraysOnThem) {
  for (int i = 0; i < 2; ++i) h_[i].peer = known_by_plane0(i);
  // Before learning every plane sends to the one known address.
  auto before = h_[0].drv->peer_addresses(h_[0].peer);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(text_of(before[1]).substr(0, 17), "::ffff:127.0.11.1");
  connect(1);
  connect(0);
  ASSERT_TRUE(h_[0].drv->learn_addresses(h_[0].peer, h_[0].qpn));
  EXPECT_FALSE(h_[0].drv->learn_addresses(h_[0].peer, h_[0].qpn)) << "already learning";
  ASSERT_TRUE(wait_for([&] { return h_[0].drv->counters().addr_replies_accepted == 1; }));
  const auto after = h_[0].drv->peer_addresses(h_[0].peer);
  ASSERT_EQ(after.size(), 2u);
  for (uint16_t p = 0; p < 2; ++p)
    EXPECT_EQ(text_of(after[p]), text_of(h_[1].drv->local_address(p))) << "plane " << p;
  EXPECT_EQ(h_[1].drv->counters().addr_queries_answered, 1u);
  EXPECT_EQ(h_[0].drv->counters().addr_replies_dropped, 0u);
  EXPECT_FALSE(h_[0].drv->learn_addresses(h_[0].peer, h_[0].qpn)) << "learnt: nothing to ask";
  // Data goes over both planes to the learnt addresses, over IPv4.
  const uint64_t rx1 = h_[1].drv->counters().datagrams_received;
  write_and_check();
  EXPECT_GT(h_[1].drv->counters().datagrams_received, rx1 + 256);
}

TEST_P(PeerAddressesPair, TableEntryGivesEveryPlaneAtOnceAndIsNotQueried) {
  // Host 0's config names host 1's plane addresses; the table is consulted by any of them.
  UdpConfig cfg = ipv4_config(0, GetParam());
  h_[0].drv->stop();
  h_[0].drv.reset();
  // Ports are ephemeral here: the table holds the real ones.
  cfg.known_peers = {{h_[1].drv->local_address(0), h_[1].drv->local_address(1)}};
  auto d = UdpDriver::create(cfg);
  ASSERT_TRUE(d.ok()) << d.error();
  h_[0].drv = std::move(d).value();
  auto cq = h_[0].drv->with_engine([](Engine& e) { return e.create_cq(1024); });
  QpInit init;
  init.send_cq = init.recv_cq = *cq;
  init.local_token = kToken[0];
  h_[0].cq = *cq;
  h_[0].qpn = *h_[0].drv->with_engine([&](Engine& e) { return e.create_qp(init); });
  h_[0].drv->start();
  const sockaddr_in6 by_plane1 = h_[1].drv->local_address(1);  // known by its plane-1 address
  const uint16_t ports[2] = {ntohs(by_plane1.sin6_port), ntohs(by_plane1.sin6_port)};
  h_[0].peer = h_[0].drv->add_peer_at(by_plane1.sin6_addr, ports);
  EXPECT_EQ(h_[0].drv->add_peer_at(by_plane1.sin6_addr, ports), h_[0].peer) << "same peer";
  const auto got = h_[0].drv->peer_addresses(h_[0].peer);
  ASSERT_EQ(got.size(), 2u);
  for (uint16_t p = 0; p < 2; ++p) EXPECT_EQ(text_of(got[p]), text_of(h_[1].drv->local_address(p)));
  h_[1].peer = known_by_plane0(1);
  connect(1);
  connect(0);
  EXPECT_FALSE(h_[0].drv->learn_addresses(h_[0].peer, h_[0].qpn)) << "from the table";
  write_and_check();
  EXPECT_EQ(h_[0].drv->counters().addr_queries_sent, 0u);
}

TEST_P(PeerAddressesPair, StrangersQueryIsRefusedCountedAndUnanswered) {
  for (int i = 0; i < 2; ++i) h_[i].peer = known_by_plane0(i);
  connect(1);
  connect(0);
  // A stranger (a plain socket) asks host 1 about its QP with a guessed token.
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in6 me = addr("::ffff:127.0.12.1", 0);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me), 0) << std::strerror(errno);
  wire::Packet q;
  q.common.kind = wire::Kind::kAddrQuery;
  q.common.token = kToken[1] ^ 1;  // one bit off
  q.common.psn = 42;
  q.addr.target_qpn = h_[1].qpn;
  q.addr.src_qpn = h_[0].qpn;
  uint8_t b[64];
  const size_t n = wire::encode_header(q, {}, b);
  const sockaddr_in6 to = h_[1].drv->local_address(0);
  ASSERT_EQ(::sendto(fd, b, n, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(n));
  q.common.token = kToken[1];  // the right token, from a QP host 1's QP is not connected to
  q.addr.src_qpn = h_[0].qpn + 100;
  wire::encode_header(q, {}, b);
  ASSERT_EQ(::sendto(fd, b, n, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(n));
  ASSERT_TRUE(wait_for([&] { return h_[1].drv->counters().addr_queries_refused == 2; }));
  EXPECT_EQ(h_[1].drv->counters().addr_queries_answered, 0u);
  // A forged reply to host 0 (no query open) is dropped and changes nothing.
  wire::Packet r;
  r.common.kind = wire::Kind::kAddrReply;
  r.common.token = kToken[0];
  r.addr.target_qpn = h_[0].qpn;
  r.addr.src_qpn = h_[1].qpn;
  r.addr.planes = 2;
  std::vector<uint8_t> rb(wire::kAddrReplySize);
  wire::encode_header(r, {}, rb);
  const sockaddr_in6 to0 = h_[0].drv->local_address(0);
  ASSERT_EQ(
      ::sendto(fd, rb.data(), rb.size(), 0, reinterpret_cast<const sockaddr*>(&to0), sizeof to0),
      static_cast<ssize_t>(rb.size()));
  ASSERT_TRUE(wait_for([&] { return h_[0].drv->counters().addr_replies_dropped == 1; }));
  EXPECT_EQ(text_of(h_[0].drv->peer_addresses(h_[0].peer)[1]).substr(0, 17), "::ffff:127.0.11.1");
  ::close(fd);
}

TEST_P(PeerAddressesPair, PeerThatNeverAnswersKeepsItsOneAddressAndWorks) {
  for (int i = 0; i < 2; ++i) h_[i].peer = known_by_plane0(i);
  connect(1);
  connect(0);
  // Host 1's loop is stopped while host 0 asks: silence, as from a peer without the feature
  // or a fabric that drops the query.
  h_[1].drv->stop();
  ASSERT_TRUE(h_[0].drv->learn_addresses(h_[0].peer, h_[0].qpn));
  ASSERT_TRUE(wait_for([&] { return h_[0].drv->counters().addr_peers_unanswered == 1; }));
  EXPECT_EQ(h_[0].drv->counters().addr_queries_sent, PeerAddresses::kTries);
  const auto still = h_[0].drv->peer_addresses(h_[0].peer);
  for (const auto& a : still) EXPECT_EQ(text_of(a).substr(0, 17), "::ffff:127.0.11.1");
  // The peer's loop comes back and answers the queries it finds queued: too late, the
  // learning gave up, so the replies are dropped and the QP works on the one address.
  h_[1].drv->start();
  write_and_check();
  for (const auto& a : h_[0].drv->peer_addresses(h_[0].peer))
    EXPECT_EQ(text_of(a).substr(0, 17), "::ffff:127.0.11.1");
  EXPECT_EQ(h_[0].drv->counters().addr_replies_accepted, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, PeerAddressesPair,
                         ::testing::Values(PathMode::kEcmp, PathMode::kDirect),
                         [](const auto& info) {
                           return info.param == PathMode::kEcmp ? std::string("Ecmp")
                                                                : std::string("Direct");
                         });

TEST(PeerAddressesDriver, Srv6RefusesATableAndIpv4Planes) {
  srv6::FabricConfig fc;
  fc.hosts = 2;
  fc.planes = 2;
  fc.spines = 2;
  fc.hosts_per_t0 = 1;
  auto f = srv6::Fabric::make(fc);
  ASSERT_TRUE(f.ok()) << f.error();
  UdpConfig cfg = ipv4_config(0, PathMode::kSrv6);
  cfg.fabric = std::make_shared<const srv6::Fabric>(std::move(f).value());
  auto r = UdpDriver::create(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("IPv4 planes are for the direct and ecmp modes"), std::string::npos)
      << r.error();
  cfg.planes = {PlaneConfig{"::1", 0}};
  cfg.known_peers = {{addr("::1", 1)}};
  r = UdpDriver::create(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("known_peers is for the direct and ecmp path modes"), std::string::npos)
      << r.error();
}

}  // namespace
}  // namespace mrc::io
