// Loss detection when a QP's EVs queue differently, on the simulated two-tier fabric (2 hosts
// under different T0s, 2 planes x 2 spines, one EV per spine as on the namespace fabric,
// 10 Gb/s ports and uplinks, 40 us per link: an unloaded RTT of ~340 us). No ECN, no
// trimming, deep buffers, as on the namespace fabric: queues only delay, nothing is dropped,
// so every packet declared lost is a spurious loss and every resend is wasted.
//  - A standing queue: spine 1 of each plane slower than its share (4 Gb/s uplinks): its
//    EVs wait a few hundred us longer than spine 0's all the time.
//  - Queueing episodes: every 10 ms spine 1 of plane 0 carries 0.5 Gb/s for 1 ms (as if
//    another flow took its link), so its queue grows to ~1 ms and drains, while the other
//    spines stay near empty: what a loaded software fabric's slower spine does.
//    The cross-EV rule declares that spine's late packets lost; their echoes prove those
//    losses spurious (spurious_cross_ev) and give the window back. A rule that waits out a
//    learned lateness (tried, perf/RESULTS.md "(evloss)") cut those resends ~60x here but cost goodput on
//    the loaded namespace fabric, and was left out.
//  - A packet really lost on that spine, after such episodes, is still found by the per-EV
//    rule within a round trip of that EV; a spine that dies after them is still found by the
//    cross-EV rule, with no RTO.
// Deterministic (virtual time, fixed seed).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "mrc/io/sim/fabric.h"
#include "mrc/testing/bulk.h"
#include "mrc/testing/testbed.h"

namespace mrc {
namespace {

using namespace engine;
using namespace sim;
using namespace std::chrono_literals;

constexpr Duration kLinkLatency = 40us;
constexpr uint64_t kPortBps = 10'000'000'000;

struct QueueingRun {
  static EngineConfig engine_config() {
    EngineConfig c;
    c.nic_bps = 2 * kPortBps;
    c.base_rtt = 20us + 8 * kLinkLatency;  // the fabric's unloaded RTT: CC's base
    return c;
  }
  static FabricConfig fabric_config() {
    FabricConfig fc;
    fc.hosts = 2;
    fc.planes = 2;
    fc.spines = 2;
    fc.host_port_bps = kPortBps;
    fc.uplink_bps = kPortBps;
    fc.host_latency = kLinkLatency;
    fc.uplink_latency = kLinkLatency;
    fc.capacity_bytes = 8 << 20;
    fc.ecn_threshold_bytes = kUnlimited;
    fc.trim_threshold_bytes = kUnlimited;
    fc.trimming = false;
    return fc;
  }
  QueueingRun() : tb(SimConfig{5}, engine_config()) {
    tb.add_host();
    tb.add_host();
    fab = std::make_unique<Fabric>(tb.net(), fabric_config());
    qp = tb.connect(0, 1, fab->paths(0, 1, 2), bulk_stream_attr());  // one EV per spine and plane
    BulkWrite::Config bc;
    bc.msg_bytes = 256 << 10;
    w = std::make_unique<BulkWrite>(tb, 0, 1, qp, bc);
  }
  /// The sender's T0's uplink to spine 1 of `plane`: where the slow EVs queue.
  LinkId slow_link(uint16_t plane) const { return fab->link(plane, fab->t0_of(0), 1, Dir::kUp); }
  void set_rate(LinkId l, uint64_t bps) {
    LinkConfig c = tb.net().link_config(l);
    c.rate_bps = bps;
    tb.net().set_link_config(l, c);
  }
  /// Every 10 ms from 10 ms to `until`: spine 1 of plane 0 at 0.5 Gb/s for 1 ms.
  void queueing_episodes(Time until) {
    const LinkId l = slow_link(0);
    for (Time t = Time{10ms}; t < until; t += 10ms) {
      tb.net().at(t, [this, l] { set_rate(l, 500'000'000); });
      tb.net().at(t + 1ms, [this, l] { set_rate(l, kPortBps); });
    }
  }
  uint64_t dropped() {
    uint64_t n = 0;
    for (LinkId l = 0; l < tb.net().link_count(); ++l) n += tb.net().link_stats(l).dropped();
    return n;
  }
  double gbps(Duration over) const {
    return double(w->completed_bytes()) * 8 / (double(over.count()) / 1e9) / 1e9;
  }
  const QpStats& stats() { return *tb.engine(0).qp_stats(qp.a); }
  void print(const char* name, Duration over) {
    const QpStats& s = stats();
    std::printf(
        "FIGURES %s: %.2f Gbit/s verified, losses declared %llu (cross-EV %llu), retransmits "
        "%llu, spurious found %llu (cross-EV %llu), duplicates received %llu, tail probes %llu, "
        "RTOs %llu; spine 1 p0 queue up to %llu B\n",
        name, gbps(over), (unsigned long long)s.fast_losses,
        (unsigned long long)s.cross_ev_losses, (unsigned long long)s.tx_retransmits,
        (unsigned long long)s.spurious_losses, (unsigned long long)s.spurious_cross_ev,
        (unsigned long long)tb.engine(1).stats().dropped(Drop::kDuplicate),
        (unsigned long long)s.tail_probes, (unsigned long long)s.rto_fired,
        (unsigned long long)tb.net().link_stats(slow_link(0)).max_queued_bytes);
  }
  Testbed tb;
  std::unique_ptr<Fabric> fab;
  Testbed::QpPair qp;
  std::unique_ptr<BulkWrite> w;
};

// A standing difference of a few hundred us: nothing is declared lost (the cross-EV rule
// waits for each EV's own send-to-ACK time). A guard.
TEST(EvQueueing, StandingQueueOnOneSpine_NothingDeclaredLost) {
  QueueingRun r;
  for (uint16_t p = 0; p < 2; ++p) r.set_rate(r.slow_link(p), 4'000'000'000);
  r.w->run_until(Time{100ms}, 10us);
  r.print("ev_queueing_standing", 100ms);
  const QpStats& s = r.stats();
  EXPECT_EQ(r.dropped(), 0u) << "the scenario is meant to drop nothing";
  EXPECT_GE(r.tb.net().link_stats(r.slow_link(0)).max_queued_bytes, 100'000u)
      << "spine 1 must queue (100 KB = 200 us at 4 Gb/s)";
  EXPECT_EQ(s.fast_losses, 0u);
  EXPECT_EQ(s.tx_retransmits, 0u);
  EXPECT_EQ(s.rto_fired, 0u);
  EXPECT_TRUE(r.w->ok()) << r.w->first_error();
  EXPECT_GT(r.w->verified(), 0u);
}

// After queueing episodes on spine 1 of plane 0 (~1 ms late; the spurious losses they cause are
// found from the echoes: the ASSERT below), packets really lost there are still found fast:
//  - while the spine delivers (a few packets dropped at 55 ms, no episode running): by the
//    per-EV rule, once a later packet on the same EV is acknowledged, so within that EV's
//    round trip plus min RTT and the reorder window (<= SRTT): bound 1 ms after the drops,
//    against the 16.8 ms RTO; and no resend may be spurious;
//  - the spine dying silently (a blackhole from 75 ms): by the cross-EV rule: the first packet
//    declared lost within 8 SRTT, no RTO, every
//    byte delivered.
TEST(EvQueueing, RealLossOnTheLateSpine_StillFoundFast) {
  QueueingRun r;
  r.queueing_episodes(Time{50ms});
  r.w->run_until(Time{55ms}, 10us);
  ASSERT_GT(r.stats().spurious_cross_ev, 0u)
      << "the episodes' late packets, declared lost, were not proved spurious by their echoes";
  const uint64_t declared = r.stats().fast_losses;
  const uint64_t per_ev = declared - r.stats().cross_ev_losses;
  const uint64_t spurious = r.stats().spurious_losses;
  const LinkId l = r.slow_link(0);
  Impairments drop_all;
  drop_all.loss = 1.0;
  const Time t_drop = r.tb.net().now();
  r.tb.net().set_impairments(l, drop_all);
  r.w->run_until(t_drop + 20us, 1us);  // 4 KiB at 5 Gb/s: one every ~6.5 us
  r.tb.net().set_impairments(l, Impairments{});
  const uint64_t lost = r.tb.net().link_stats(l).dropped_loss;
  ASSERT_GE(lost, 1u);
  Time found = kNever;
  while (r.tb.net().now() < t_drop + 5ms) {
    r.w->run_until(r.tb.net().now() + 10us, 10us);
    if (found == kNever && r.stats().fast_losses >= declared + lost) found = r.tb.net().now();
  }
  ASSERT_NE(found, kNever) << "the dropped packets were not declared lost by RACK in 5 ms";
  std::printf("FIGURES ev_queueing_real_loss: %llu dropped on the late spine, all declared lost "
              "%.0f us after the drops began (per-EV rule: %llu)\n",
              (unsigned long long)lost, double((found - t_drop).count()) / 1e3,
              (unsigned long long)(r.stats().fast_losses - r.stats().cross_ev_losses - per_ev));
  EXPECT_LE(found - t_drop, 1ms);
  EXPECT_GE(r.stats().fast_losses - r.stats().cross_ev_losses - per_ev, lost);
  EXPECT_EQ(r.stats().spurious_losses, spurious) << "a resend of the drops proved spurious";

  r.w->run_until(Time{75ms}, 10us);
  const uint64_t cross = r.stats().cross_ev_losses;
  const double srtt_us = double(r.stats().srtt_ns) / 1e3;
  r.fab->blackhole_t1(0, 1, true);
  Time dead_found = kNever;
  while (r.tb.net().now() < Time{100ms}) {
    r.w->run_until(r.tb.net().now() + 10us, 10us);
    if (dead_found == kNever && r.stats().cross_ev_losses > cross) dead_found = r.tb.net().now();
  }
  ASSERT_NE(dead_found, kNever) << "the dead spine's packets were never declared lost";
  r.print("ev_queueing_real_loss", 100ms);
  // Bound: a packet sent just before the blackhole, its RTT + the EVs' spread + the next
  // ACK: 8 SRTT (SRTT ~0.4 ms here) against the 16.8 ms RTO.
  std::printf("FIGURES ev_queueing_dead_spine: first packet declared lost %.0f us after the "
              "blackhole (SRTT %.0f us)\n",
              double((dead_found - Time{75ms}).count()) / 1e3, srtt_us);
  EXPECT_LE(double((dead_found - Time{75ms}).count()) / 1e3, 8 * srtt_us);
  EXPECT_EQ(r.stats().rto_fired, 0u);
  EXPECT_GT(r.stats().cross_ev_losses, 0u);
  EXPECT_TRUE(r.w->ok()) << r.w->first_error();
  EXPECT_GT(r.w->verified(), 0u);
}

}  // namespace
}  // namespace mrc
