// Connectionless probes (mrc/io/udp/probes.h): the session and rate-limit logic in
// virtual time, then two UdpDrivers on ::1 with no QP at all probing each other, a forger
// whose replies are dropped, and a flood the answerer rate-limits.
// Threading: the test thread talks to the drivers through with_probes / counters.
#include "mrc/io/udp/probes.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "mrc/common/fd.h"
#include "mrc/io/udp/udp_driver.h"

namespace mrc::io {
namespace {

using namespace std::chrono_literals;
using engine::Duration;
using engine::Path;
using engine::Time;

wire::Packet decoded(std::span<const uint8_t> b) {
  auto p = wire::decode(b);
  EXPECT_TRUE(p.ok());
  return p.ok() ? *p : wire::Packet{};
}

// A Probes whose sends are kept, to be answered by hand.
struct Captured {
  std::vector<std::vector<uint8_t>> sent;
  std::vector<uint8_t> tclass;
  Probes probes{[this](engine::PeerId, Path, std::span<const uint8_t> b, uint8_t tc) {
    tclass.push_back(tc);
    sent.emplace_back(b.begin(), b.end());
    return true;
  }};
};

TEST(Probes, Session_ReplyWithItsTokenKeptOthersDropped) {
  Captured c;
  const uint32_t t1 = c.probes.open(), t2 = c.probes.open();
  EXPECT_NE(t1, 0u);
  EXPECT_NE(t1, t2);
  ASSERT_TRUE(c.probes.send(Time{1'000'000}, t1, 0, Path{0x10200, 1}, 7, 0xb8));
  EXPECT_FALSE(c.probes.send(Time{1'000'000}, 12345, 0, Path{0x10200, 1}, 7));  // no session
  ASSERT_EQ(c.sent.size(), 1u);
  EXPECT_EQ(c.tclass[0], 0xb8);  // its own traffic class (an OCP probe's req_tc, EF)
  const wire::Packet probe = decoded(c.sent[0]);
  EXPECT_EQ(probe.common.kind, wire::Kind::kProbe);
  EXPECT_EQ(probe.common.dst_qpn, 0u);
  EXPECT_EQ(probe.common.token, t1);
  EXPECT_EQ(probe.common.ev, 0x10200u);
  EXPECT_EQ(probe.common.psn, 7u);
  ASSERT_TRUE(Probes::is_connectionless(probe));

  uint8_t buf[wire::kMaxHeaderSize];
  const size_t n = Probes::build_answer(Time{5'000'000}, probe, true, buf, Duration{1500});
  const wire::Packet answer = decoded({buf, n});
  EXPECT_EQ(answer.probe_reply.svc_ns, 1500u);  // the answerer's service time
  EXPECT_EQ(answer.common.kind, wire::Kind::kProbeReply);
  EXPECT_TRUE(Probes::is_connectionless(answer));
  EXPECT_EQ(answer.common.token, t1);
  EXPECT_EQ(answer.probe_reply.echo_ev, 0x10200u);

  EXPECT_TRUE(c.probes.on_reply(Time{1'250'000}, answer, 1));
  wire::Packet other = answer;
  other.common.token = t1 ^ 1;  // a guess
  EXPECT_FALSE(c.probes.on_reply(Time{1'250'000}, other, 1));
  wire::Packet twisted = answer;
  twisted.probe_reply.echo_ev = 0x10300;  // claims another EV than the one it names
  EXPECT_FALSE(c.probes.on_reply(Time{1'250'000}, twisted, 1));

  const auto got = c.probes.take(t1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, 7u);
  EXPECT_EQ(got[0].path.ev, 0x10200u);
  EXPECT_EQ(got[0].path.plane, 1);
  EXPECT_EQ(got[0].rtt, Duration{250'000});
  EXPECT_EQ(got[0].svc, Duration{1500});
  EXPECT_TRUE(got[0].ecn);
  EXPECT_TRUE(c.probes.take(t1).empty());  // taken once
  EXPECT_TRUE(c.probes.take(t2).empty());
  c.probes.close(t1);
  EXPECT_FALSE(c.probes.on_reply(Time{1'300'000}, answer, 1));  // closed: late replies dropped
}

TEST(Probes, RateLimit_BurstThenSteadyRate) {
  Captured c;
  const Time t0{1'000'000'000};
  uint32_t answered = 0;
  for (uint32_t i = 0; i < 3 * Probes::kAnswerBurst; ++i) answered += c.probes.may_answer(t0);
  EXPECT_EQ(answered, Probes::kAnswerBurst);
  // 1 ms later: 20 more (kAnswersPerSecond), not a new burst.
  answered = 0;
  for (int i = 0; i < 1000; ++i) answered += c.probes.may_answer(t0 + 1ms);
  EXPECT_EQ(answered, Probes::kAnswersPerSecond / 1000);
  // Idle for a second: the burst is back, no more.
  answered = 0;
  for (uint32_t i = 0; i < 3 * Probes::kAnswerBurst; ++i) answered += c.probes.may_answer(t0 + 2s);
  EXPECT_EQ(answered, Probes::kAnswerBurst);
}

// Two drivers with 2 planes on ::1 and no QP: each answers the other's probes.
class ProbePair : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto& d : drv_) {
      UdpConfig cfg;
      cfg.planes = {PlaneConfig{"::1", 0}, PlaneConfig{"::1", 0}};
      auto r = UdpDriver::create(cfg);
      ASSERT_TRUE(r.ok()) << r.error();
      d = std::move(r).value();
    }
    b_ = drv_[0]->add_peer({drv_[1]->local_address(0), drv_[1]->local_address(1)});
    for (auto& d : drv_) d->start();
  }
  void TearDown() override {
    for (auto& d : drv_)
      if (d) d->stop();
  }

  // Probes every spray path of A toward B `rounds` times; the replies, after `wait`.
  std::vector<ProbeReply> probe_b(uint32_t rounds, std::chrono::milliseconds wait,
                                  uint32_t* token_out = nullptr) {
    const auto paths = drv_[0]->spray_paths(0);
    const uint32_t token = drv_[0]->with_probes([&](Probes& p) {
      const uint32_t t = p.open();
      for (uint32_t r = 0; r < rounds; ++r)
        for (size_t i = 0; i < paths.size(); ++i)
          EXPECT_TRUE(p.send(drv_[0]->now(), t, b_, paths[i], r << 16 | static_cast<uint32_t>(i)));
      return t;
    });
    std::vector<ProbeReply> got;
    const auto end = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < end &&
           got.size() < static_cast<size_t>(rounds) * paths.size()) {
      for (auto& r : drv_[0]->with_probes([&](Probes& p) { return p.take(token); }))
        got.push_back(r);
      std::this_thread::sleep_for(1ms);
    }
    if (token_out)
      *token_out = token;
    else
      drv_[0]->with_probes([&](Probes& p) { p.close(token); });
    return got;
  }

  std::unique_ptr<UdpDriver> drv_[2];
  engine::PeerId b_ = 0;
};

TEST_F(ProbePair, EveryPathAnsweredWithoutAQp) {
  const auto paths = drv_[0]->spray_paths(0);
  ASSERT_EQ(paths.size(), 8u);  // direct mode: 4 EVs on each of 2 planes
  const auto got = probe_b(2, 10s);
  ASSERT_EQ(got.size(), 16u);
  std::set<uint32_t> seqs;
  for (const ProbeReply& r : got) {
    ASSERT_LT(r.seq & 0xFFFF, paths.size());
    EXPECT_EQ(r.path.ev, paths[r.seq & 0xFFFF].ev);
    EXPECT_EQ(r.path.plane, paths[r.seq & 0xFFFF].plane) << "answered on another plane";
    EXPECT_GT(r.rtt.count(), 0);
    EXPECT_LT(r.rtt, Duration{5s});
    seqs.insert(r.seq);
  }
  EXPECT_EQ(seqs.size(), 16u) << "a probe answered twice, or another one not at all";
  EXPECT_EQ(drv_[1]->counters().probes_answered, 16u);
  EXPECT_EQ(drv_[0]->counters().probe_replies_dropped, 0u);
  // Neither engine saw any of it: no QP, no drop counted.
  for (auto& d : drv_) {
    const auto st = d->peek_engine([](engine::Engine& e) { return e.stats(); });
    EXPECT_EQ(st.rx_datagrams, 0u);
  }
}

TEST_F(ProbePair, ForgedRepliesDroppedAndCounted) {
  uint32_t token = 0;
  ASSERT_EQ(probe_b(1, 10s, &token).size(), 8u);  // a session is open: forgers guess its token
  UniqueFd s(::socket(AF_INET6, SOCK_DGRAM, 0));
  ASSERT_GE(s.get(), 0);
  const sockaddr_in6 a = drv_[0]->local_address(0);
  for (uint32_t guess = 1; guess <= 100; ++guess) {
    wire::Packet r;
    r.common.kind = wire::Kind::kProbeReply;
    r.common.token = token + guess;  // every token but the right one
    r.common.ev = 0;
    r.probe_reply.echo_ev = 0;
    uint8_t buf[wire::kMaxHeaderSize];
    const size_t n = wire::encode_header(r, {}, buf);
    ASSERT_EQ(::sendto(s.get(), buf, n, 0, reinterpret_cast<const sockaddr*>(&a), sizeof a),
              static_cast<ssize_t>(n));
  }
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (drv_[0]->counters().probe_replies_dropped < 100 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(drv_[0]->counters().probe_replies_dropped, 100u);
  EXPECT_TRUE(drv_[0]->with_probes([&](Probes& p) { return p.take(token); }).empty());
  drv_[0]->with_probes([&](Probes& p) { p.close(token); });
}

TEST_F(ProbePair, FloodOfProbes_AnswersRateLimited) {
  // 8 x 2000 probes sent as fast as the socket takes them: far more than the burst.
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = probe_b(2000, 1s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const UdpCounters c = drv_[1]->counters();
  EXPECT_GT(c.probes_rate_limited, 0u);
  EXPECT_EQ(got.size(), c.probes_answered);
  EXPECT_LE(c.probes_answered, Probes::kAnswerBurst + Probes::kAnswersPerSecond * secs + 1);
  EXPECT_LE(c.probes_answered + c.probes_rate_limited, 8u * 2000u);
}

// The service time an answer reports starts at the kernel's receive time of the probe
// (SO_TIMESTAMPNS), not at the driver's read: a probe left 8 ms in the answerer's socket
// (its loop not running) reports at least that, and never more than the RTT. The answerer's
// sockets stamp datagrams only from the first probe they answer on (a receive without the
// timestamp costs less, perf/recv_cost): that first one reports from the driver's read.
TEST(ProbeService, IncludesTheSocketsQueueing) {
  std::unique_ptr<UdpDriver> a, b;
  for (auto* d : {&a, &b}) {
    UdpConfig cfg;
    cfg.planes = {PlaneConfig{"::1", 0}};
    auto r = UdpDriver::create(cfg);
    ASSERT_TRUE(r.ok()) << r.error();
    *d = std::move(r).value();
  }
  const engine::PeerId peer = a->add_peer({b->local_address(0)});
  a->start();
  const Path path = a->spray_paths(0).at(0);
  const uint32_t token = a->with_probes([](Probes& p) { return p.open(); });
  const auto end = std::chrono::steady_clock::now() + 5s;
  // Probe `seq`, left 8 ms in b's socket before b's loop reads and answers it; its reply.
  const auto probe = [&](uint32_t seq) {
    EXPECT_TRUE(a->with_probes([&](Probes& p) { return p.send(a->now(), token, peer, path, seq); }));
    std::this_thread::sleep_for(8ms);  // the probe waits in b's socket
    const uint64_t answered = b->counters().probes_answered;
    while (b->counters().probes_answered == answered && std::chrono::steady_clock::now() < end)
      b->step(Duration{1'000'000});
    std::vector<ProbeReply> got;
    while (got.empty() && std::chrono::steady_clock::now() < end) {
      got = a->with_probes([&](Probes& p) { return p.take(token); });
      std::this_thread::sleep_for(1ms);
    }
    return got;
  };
  const std::vector<ProbeReply> first = probe(1);
  const std::vector<ProbeReply> second = probe(2);
  a->stop();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_LT(first[0].svc, Duration{8ms}) << "b's socket stamped before any probe";
  ASSERT_EQ(second.size(), 1u);
  EXPECT_GE(second[0].svc, Duration{8ms}) << "the queueing before the read is in it";
  EXPECT_LE(second[0].svc, second[0].rtt);
}

}  // namespace
}  // namespace mrc::io
