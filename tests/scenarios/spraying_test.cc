// Loss detection under spraying and path health shared across QPs, on the simulated
// two-tier fabric (2 hosts under different T0s, 4 planes x 4 spines, 10 Gb/s):
//  - paths of very different delay reorder sprayed packets; nothing is dropped, so
//    nothing may be declared lost (short QPs, as an all-to-all makes them);
//  - a plane whose far T0 is down, found by one QP, is not rediscovered by the next QP
//    to the same peer;
//  - a dead spine (one EV value per plane and spine here), found by the first QPs, is not
//    sprayed on by the next QPs, while the rest of its plane still is; once the hold runs
//    out it is tested with probes, not data, and used again when a probe is answered.
// Deterministic (virtual time, fixed seed).
#include <gtest/gtest.h>

#include <memory>

#include "mrc/testing/bulk.h"
#include "two_hosts.h"

namespace mrc {
namespace {

using namespace engine;
using namespace sim;
using namespace std::chrono_literals;

struct SprayRun : TwoHosts {
  SprayRun() : TwoHosts(11) {}
  /// One verified WRITE of `bytes` from host 0 on `qp`, run to its completion.
  void one_write(const Testbed::QpPair& qp, uint32_t bytes) {
    BulkWrite w(tb, 0, 1, qp, BulkWrite::Config{bytes, 1, 1});
    w.pump();
    w.stop_posting();
    w.run_until(tb.net().now() + 5ms, 10us);
    ASSERT_EQ(w.verified(), 1u) << w.first_error();
    ASSERT_TRUE(w.ok());
  }
};

TEST(Spraying, ReorderAcrossPathsIsNoLoss) {
  SprayRun r;
  // Two spines of planes 0 and 2 are 30 us further away (towards host 1): packets sprayed
  // on them arrive 30 us after packets sent later on the others (the unloaded RTT is ~20
  // us), as behind a deep queue.
  for (uint16_t plane : {0, 2})
    for (uint32_t spine : {0u, 1u}) {
      const LinkId l = r.fab->link(plane, 0, spine, Dir::kUp);
      LinkConfig c = r.tb.net().link_config(l);
      c.latency += 30us;
      r.tb.net().set_link_config(l, c);
    }
  // The first QP to the peer learns its RTTs from nothing (an RTT spread of 2.5x can
  // still fool it); every later one starts from what the QPs before it measured.
  r.one_write(r.connect(), 64 << 10);
  uint64_t spurious = 0, retx = 0, lost = 0, probes = 0, packets = 0, slow = 0;
  for (int i = 0; i < 24; ++i) {  // short QPs, as an all-to-all makes them
    const auto qp = r.connect();
    r.one_write(qp, 64 << 10);
    const QpStats* s = r.tb.engine(0).qp_stats(qp.a);
    spurious += s->spurious_losses;
    retx += s->tx_retransmits;
    lost += s->fast_losses + s->rto_fired;
    probes += s->tail_probes;
    packets += s->tx_data_packets;
    const PathSet* ps = r.tb.engine(0).paths(qp.a);
    const auto st = r.tb.engine(0).path_stats(qp.a);
    for (size_t k = 0; k < ps->size(); ++k) {
      const uint32_t spine = ps->ev(k).path.ev >> 8 & 0xFF;
      const uint16_t plane = ps->ev(k).path.plane;
      if ((plane == 0 || plane == 2) && spine < 2) slow += st[k].tx_packets;
    }
  }
  EXPECT_EQ(packets, 24u * 16);
  EXPECT_GT(slow, packets / 8) << "the slow paths carried too little to reorder";
  EXPECT_EQ(r.tb.net().link_stats(r.fab->link(0, 0, 0, Dir::kUp)).dropped(), 0u);
  EXPECT_EQ(spurious, 0u);
  EXPECT_EQ(lost, 0u);
  // A tail loss probe may resend the newest packet when it sits on a slow path: a
  // probe, not a loss (no blame, no window cut), and nothing else is resent.
  EXPECT_EQ(retx, probes);
  EXPECT_LE(probes, 24u / 4);
}

TEST(SharedHealth, NewQpStartsWithoutThePlaneOthersFoundDead) {
  SprayRun r;
  r.fab->t0_down(2, 1);  // host 1 loses plane 2: what is sent to it there is dropped
  const auto first = r.connect();
  {
    BulkWrite w(r.tb, 0, 1, first, BulkWrite::Config{64 << 10, 4, 1});
    w.run_until(Time{3ms}, 10us);
    w.stop_posting();
    w.run_until(r.tb.net().now() + 1ms, 10us);
    ASSERT_TRUE(w.ok()) << w.first_error();
    ASSERT_EQ(w.in_flight(), 0u);
    EXPECT_GT(r.sent_on(first.a, 2), 0u) << "the first QP never tried plane 2";
  }
  EXPECT_GT(r.tb.engine(0).stats().plane_holds, 0u);
  ASSERT_EQ(r.tb.engine(0).held_planes(1, r.tb.net().now()), 1u << 2)
      << "plane 2 is not held towards host 1";
  // A new QP to the same peer: no packet on plane 2, nothing lost, while the hold lasts.
  const auto second = r.connect();
  for (int i = 0; i < 4; ++i) r.one_write(second, 32 << 10);
  const QpStats* s = r.tb.engine(0).qp_stats(second.a);
  EXPECT_EQ(r.sent_on(second.a, 2), 0u);
  EXPECT_EQ(s->tx_retransmits, 0u);
  EXPECT_EQ(s->rto_fired, 0u);
  for (uint16_t p : {0, 1, 3}) EXPECT_GT(r.sent_on(second.a, p), 0u) << p;
}

// On a fabric whose round trip is above 1 ms (a long or loaded one), a drained plane's probe
// may go unanswered for twice the EV's round trip before it counts as lost (probe_wait), longer
// than the 2 ms the shared hold was renewed by at each probe. The hold must still last until
// the QP's next probe, or the peer's other QPs spray onto the dead plane in between.
TEST(SharedHealth, DrainedPlaneStaysHeldBetweenProbesOnALongFabric) {
  SprayRun r;
  for (uint16_t plane = 0; plane < 4; ++plane)  // +400 us each way through a spine: RTT ~1.6 ms
    for (uint32_t t0 = 0; t0 < 2; ++t0)
      for (uint32_t spine = 0; spine < 4; ++spine)
        for (Dir d : {Dir::kUp, Dir::kDown}) {
          const LinkId l = r.fab->link(plane, t0, spine, d);
          LinkConfig c = r.tb.net().link_config(l);
          c.latency += 400us;
          r.tb.net().set_link_config(l, c);
        }
  const auto first = r.connect();
  BulkWrite w(r.tb, 0, 1, first, BulkWrite::Config{64 << 10, 4, 1});
  w.run_until(Time{10ms}, 10us);  // every EV has round trip samples
  r.fab->t0_down(2, 1);           // host 1 loses plane 2
  w.run_until(Time{20ms}, 10us);
  w.stop_posting();
  w.run_until(r.tb.net().now() + 10ms, 10us);
  ASSERT_TRUE(w.ok()) << w.first_error();
  ASSERT_TRUE(r.tb.engine(0).paths(first.a)->plane_drained(2)) << "plane 2 never drained";
  // The QP keeps probing the dead plane (unanswered); for 30 ms the plane is held towards
  // host 1 at every instant.
  Duration unheld{0};
  const Time until = r.tb.net().now() + 30ms;
  while (r.tb.net().now() < until) {
    r.tb.net().run_until(r.tb.net().now() + 50us);
    if (!(r.tb.engine(0).held_planes(1, r.tb.net().now()) & (1u << 2))) unheld += 50us;
  }
  EXPECT_EQ(unheld, Duration{0}) << "the dead plane was not held for " << unheld.count() << " ns";
  EXPECT_GT(r.tb.engine(0).qp_stats(first.a)->tx_data_packets, 0u);
}

TEST(SharedHealth, NewQpsPassOverTheEvOthersFoundDead) {
  SprayRun r;
  r.fab->t1_down(1, 2);  // spine 2 of plane 1: what is sprayed through it is dropped
  const auto on_spine = [&r](Qpn qpn, uint16_t plane, uint32_t spine) {
    const PathSet* ps = r.tb.engine(0).paths(qpn);
    const auto st = r.tb.engine(0).path_stats(qpn);
    uint64_t n = 0;
    for (size_t k = 0; k < ps->size(); ++k)
      if (ps->ev(k).path.plane == plane && (ps->ev(k).path.ev >> 8 & 0xFF) == spine)
        n += st[k].tx_packets;
    return n;
  };
  // One verified 64 KiB WRITE, run only until it is verified (a hold lasts 100 us).
  const auto write = [&r](const Testbed::QpPair& qp) {
    BulkWrite w(r.tb, 0, 1, qp, BulkWrite::Config{64 << 10, 1, 1});
    w.pump();
    w.stop_posting();
    const Time limit = r.tb.net().now() + 5ms;
    while (w.verified() == 0 && w.ok() && r.tb.net().now() < limit)
      w.run_until(r.tb.net().now() + 2us, 2us);
    ASSERT_EQ(w.verified(), 1u) << w.first_error();
  };
  // Short QPs (16 packets over 64 EVs: each sees the dead EVs once or twice) until the
  // engine holds the dead spine's EVs.
  uint64_t found_by = 0;
  for (int i = 0; i < 16 && r.tb.engine(0).stats().ev_holds == 0; ++i, ++found_by)
    write(r.connect());
  ASSERT_GT(r.tb.engine(0).stats().ev_holds, 0u) << "the dead spine's EVs were never held";
  EXPECT_EQ(r.tb.engine(0).stats().plane_holds, 0u) << "a dead spine held its whole plane";
  // The next QP: nothing through spine 2 of plane 1, nothing lost, plane 1 still used.
  const auto next = r.connect();
  write(next);
  const QpStats* s = r.tb.engine(0).qp_stats(next.a);
  EXPECT_EQ(on_spine(next.a, 1, 2), 0u);
  EXPECT_EQ(s->tx_retransmits, 0u);
  EXPECT_GT(r.sent_on(next.a, 1), 0u);
  EXPECT_LE(found_by, 8u);
}

TEST(SharedHealth, HeldEvIsProbedNotSprayedOnUntilItAnswers) {
  SprayRun r;
  r.fab->t1_down(1, 2);  // spine 2 of plane 1
  // Packets sent by `qpn` through spine `spine` of `plane`, and probes on those EVs.
  const auto on_spine = [&r](Qpn qpn, uint16_t plane, uint32_t spine, bool probes) {
    const PathSet* ps = r.tb.engine(0).paths(qpn);
    const auto st = r.tb.engine(0).path_stats(qpn);
    uint64_t n = 0;
    for (size_t k = 0; k < ps->size(); ++k)
      if (ps->ev(k).path.plane == plane && (ps->ev(k).path.ev >> 8 & 0xFF) == spine)
        n += probes ? st[k].probes : st[k].tx_packets;
    return n;
  };
  const auto write = [&r](const Testbed::QpPair& qp) {
    BulkWrite w(r.tb, 0, 1, qp, BulkWrite::Config{64 << 10, 1, 1});
    w.pump();
    w.stop_posting();
    const Time limit = r.tb.net().now() + 5ms;
    while (w.verified() == 0 && w.ok() && r.tb.net().now() < limit)
      w.run_until(r.tb.net().now() + 2us, 2us);
    ASSERT_EQ(w.verified(), 1u) << w.first_error();
  };
  for (int i = 0; i < 16 && r.tb.engine(0).stats().ev_holds == 0; ++i) write(r.connect());
  ASSERT_GT(r.tb.engine(0).stats().ev_holds, 0u) << "the dead spine's EVs were never held";
  // 2 ms of short QPs, far past the first holds (100 us, doubling): the dead spine is tested
  // with probes, never with data, and nothing is lost.
  uint64_t data = 0, probes = 0, retx = 0;
  const Time dead_until = r.tb.net().now() + 2ms;
  while (r.tb.net().now() < dead_until) {
    const auto qp = r.connect();
    write(qp);
    data += on_spine(qp.a, 1, 2, false);
    probes += on_spine(qp.a, 1, 2, true);
    retx += r.tb.engine(0).qp_stats(qp.a)->tx_retransmits;
    r.tb.net().run_until(r.tb.net().now() + 20us);
  }
  EXPECT_EQ(data, 0u) << "a held EV was tested with data";
  EXPECT_GT(probes, 0u) << "the held EVs were never probed";
  EXPECT_EQ(retx, 0u);
  // The spine comes back: a probe's reply ends the hold, and QPs spray on it again.
  r.fab->t1_up(1, 2);
  data = 0;
  const Time back_until = r.tb.net().now() + 6ms;
  while (data == 0 && r.tb.net().now() < back_until) {
    const auto qp = r.connect();
    write(qp);
    data += on_spine(qp.a, 1, 2, false);
    r.tb.net().run_until(r.tb.net().now() + 20us);
  }
  EXPECT_GT(data, 0u) << "the spine was not used again after it came back";
}

}  // namespace
}  // namespace mrc
