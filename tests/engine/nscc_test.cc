// Nscc: UEC NSCC window rules case by case, OCP config defaults and validation, and a
// closed-loop toy bottleneck (one queue: ECN ramp and trimming, or drop-tail without ECN) for
// convergence and fairness.
#include "mrc/engine/nscc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <queue>
#include <string>
#include <vector>

namespace mrc::engine {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

constexpr uint32_t kMtu = 4096;
constexpr uint64_t k100G = 100'000'000'000;
constexpr Duration kBase = microseconds{12};
constexpr Duration kTarget = nanoseconds{9000};  // 0.75 x 12 us with trimming

Time at_us(double us) { return Time{static_cast<int64_t>(std::llround(us * 1000))}; }

// A reference config (100 Gb/s, 12 us, 4096, trimming) whose window starts below its ceiling:
// built at the default max_cwnd, then given room above it.
Nscc with_headroom(NsccConfig c = {}) {
  Nscc n(c, kMtu);
  c.max_cwnd *= 4;
  n.set_config(c);
  return n;
}

// Acks `bytes` in MTU-sized ACKs spaced `gap_us` apart from `*t_us`, all with the same RTT and
// ECN mark; advances *t_us.
void ack_bytes(Nscc& n, double* t_us, uint64_t bytes, Duration rtt, bool ecn, double gap_us,
               uint64_t in_flight = 100000) {
  for (uint64_t done = 0; done < bytes; done += kMtu) {
    n.on_ack(at_us(*t_us), kMtu, rtt, ecn, in_flight);
    *t_us += gap_us;
  }
}

constexpr double kAckGapUs = 4096.0 / 12.5 / 1000;  // one MTU at 100 Gb/s: 0.328 us

// The reference config without eta and quick adapt: only the rule under test moves the window.
NsccConfig only_the_rule() {
  NsccConfig c;
  c.eta = 0;
  c.disable_qa = 1;
  return c;
}

TEST(Nscc, Defaults_MatchUecFormulasAt100G12us) {
  const NsccConfig c = NsccConfig::defaults(k100G, kBase, kMtu, /*trimming=*/true);
  // BDP = 12.5 GB/s x 12 us = 150,000 bytes: a = 1; target = 9 us; b = 0.75.
  EXPECT_EQ(c.base_rtt, 12000u);
  EXPECT_EQ(c.target_delay, 9000u);
  EXPECT_EQ(c.max_cwnd, 225000u);
  EXPECT_DOUBLE_EQ(c.alpha, 4.0 * kMtu * 1.0 * 0.75 / 9000);
  EXPECT_DOUBLE_EQ(c.fi, 5.0 * kMtu);
  EXPECT_DOUBLE_EQ(c.eta, 0.15 * kMtu);
  EXPECT_DOUBLE_EQ(c.fi_scale, 0.25);
  EXPECT_DOUBLE_EQ(c.gamma, 0.8);
  EXPECT_DOUBLE_EQ(c.max_md_jump, 0.5);
  EXPECT_EQ(c.qa_threshold, 36000u);
  EXPECT_EQ(c.qa_gate, 3);
  EXPECT_EQ(c.adjust_period_threshold, 12000u);
  EXPECT_EQ(c.adjust_bytes_threshold, 8 * kMtu);
  EXPECT_EQ(c.disable_qa, 0);
  EXPECT_EQ(validate(c), nullptr);
  EXPECT_EQ(NsccConfig{}, c);  // the default-constructed config is this reference network
}

TEST(Nscc, Defaults_ScaleWithRateAndTrimming) {
  // 400 Gb/s, 8 us, no trimming: BDP = 50 GB/s x 8 us = 400,000 bytes.
  const NsccConfig c = NsccConfig::defaults(4 * k100G, microseconds{8}, kMtu, false);
  const double a = 400000.0 / 150000;
  const double b = 8000.0 / 12000;
  EXPECT_EQ(c.target_delay, 8000u);  // 1.0 x base RTT without trimming
  EXPECT_EQ(c.max_cwnd, 600000u);
  EXPECT_NEAR(c.alpha, 4.0 * kMtu * a * b / 8000, 1e-12);
  EXPECT_NEAR(c.alpha, 4.0 * kMtu * a / 12000, 1e-12);  // alpha does not depend on the target
  EXPECT_NEAR(c.fi, 5.0 * kMtu * a, 1e-9);
  EXPECT_NEAR(c.eta, 0.15 * kMtu * a, 1e-9);
  EXPECT_NEAR(c.fi_scale, 0.25 * a, 1e-12);
  EXPECT_EQ(c.qa_threshold, 32000u);
  EXPECT_EQ(c.adjust_period_threshold, 8000u);
  EXPECT_EQ(c.base_rtt, 8000u);
  EXPECT_EQ(validate(c), nullptr);
  // Same link with trimming: only the target-derived values move.
  const NsccConfig t = NsccConfig::defaults(4 * k100G, microseconds{8}, kMtu, true);
  EXPECT_EQ(t.target_delay, 6000u);
  EXPECT_EQ(t.qa_threshold, 24000u);
  EXPECT_NEAR(t.alpha, c.alpha, 1e-12);
}

TEST(Nscc, Start_AtMaxCwnd) {
  Nscc n(NsccConfig{}, kMtu);
  EXPECT_EQ(n.cwnd(), 225000u);
  EXPECT_EQ(n.stats().min_cwnd, 225000u);
  EXPECT_TRUE(n.can_send(225000 - kMtu));
  EXPECT_FALSE(n.can_send(225000 - kMtu + 1));
}

TEST(Nscc, Start_AtInitCwnd_NeverBelowFloor) {
  NsccConfig c;
  c.init_cwnd = 64 * 1024;
  c.cwnd_floor = 6 * kMtu;
  Nscc n(c, kMtu);
  EXPECT_EQ(n.cwnd(), 64u * 1024);
  for (int i = 0; i < 100; ++i) n.on_loss(at_us(i));
  EXPECT_EQ(n.cwnd(), 6u * kMtu);
  EXPECT_EQ(n.stats().losses, 100u);

  c.init_cwnd = 10 * 225000;  // above the ceiling: starts at the ceiling
  EXPECT_EQ(Nscc(c, kMtu).cwnd(), 225000u);
}

// The first trim within the first window cuts cwnd to what is in flight (then takes the
// trimmed packet off, as every trim does); later trims take one packet each.
TEST(Nscc, Start_FirstTrimCutsTheWindowToWhatIsInFlight) {
  Nscc n(NsccConfig{}, kMtu);
  double t = 0;
  ack_bytes(n, &t, 10 * kMtu, kBase, false, kAckGapUs, 150000);
  ASSERT_EQ(n.cwnd(), 225000u);  // still the start: nothing cut, too little acked to grow
  n.on_nack_trim(at_us(t), kMtu, 120000);
  EXPECT_EQ(n.stats().start_exits, 1u);
  EXPECT_EQ(n.cwnd(), 120000u - kMtu);
  n.on_nack_trim(at_us(t + 0.1), kMtu, 100000);
  EXPECT_EQ(n.stats().start_exits, 1u);
  EXPECT_EQ(n.cwnd(), 120000u - 2 * kMtu);
}

// Once a window's worth of bytes is acked the start is over: a trim takes one packet. CE
// marks, even above target, never end the start.
TEST(Nscc, Start_OverAfterAWindowAcked_CeMarksDoNotEndIt) {
  Nscc n(NsccConfig{}, kMtu);
  double t = 0;
  ack_bytes(n, &t, 20 * kMtu, kBase + 2 * kTarget, true, kAckGapUs, 10000);
  EXPECT_EQ(n.stats().start_exits, 0u);
  EXPECT_GT(n.cwnd(), 10000u);
  ack_bytes(n, &t, 40 * kMtu, kBase, false, kAckGapUs);  // 60 MTU > 225,000 bytes in all
  const uint64_t w0 = n.cwnd();
  n.on_nack_trim(at_us(t), kMtu, 50000);
  EXPECT_EQ(n.stats().start_exits, 0u);
  EXPECT_EQ(n.cwnd(), w0 - kMtu);
}

TEST(Nscc, ProportionalIncreaseBelowTarget) {
  Nscc n = with_headroom();
  const uint64_t w0 = n.cwnd();
  double t = 0;
  // One window of ACKs at half the target: about alpha x (target - delay) bytes per RTT.
  ack_bytes(n, &t, w0, kBase + kTarget / 2, false, kAckGapUs);
  const double expected = NsccConfig{}.alpha * 4500;  // 6144 bytes
  const double grown = static_cast<double>(n.cwnd()) - static_cast<double>(w0);
  EXPECT_GT(grown, 0.8 * expected);
  EXPECT_LT(grown, 1.2 * expected + 2 * NsccConfig{}.eta);
  EXPECT_GT(n.stats().proportional_increases, 0u);
  EXPECT_EQ(n.stats().fast_increases, 0u);
  EXPECT_EQ(n.stats().fair_increases, 0u);

  // Further below the target grows faster.
  Nscc low = with_headroom();
  t = 0;
  ack_bytes(low, &t, w0, kBase + kTarget / 4, false, kAckGapUs);
  EXPECT_GT(low.cwnd(), n.cwnd());
}

TEST(Nscc, FastIncreaseAfterAWindowAtZeroDelay) {
  Nscc n = with_headroom();
  const uint64_t w0 = n.cwnd();
  double t = 0;
  uint64_t acked = 0;
  while (n.stats().fast_increases == 0 && acked < 4 * w0) {
    n.on_ack(at_us(t), kMtu, kBase, false, 100000);
    acked += kMtu;
    t += kAckGapUs;
  }
  EXPECT_GT(acked, w0);  // more than a window at delay ~0 before it starts
  const uint64_t w1 = n.cwnd();
  ack_bytes(n, &t, 10 * kMtu, kBase, false, kAckGapUs);
  EXPECT_EQ(n.stats().fast_increases, 11u);
  // fi_scale (0.25) of each acked byte goes straight into cwnd, plus any adjustment.
  EXPECT_GE(n.cwnd(), w1 + 10 * kMtu / 4);
  // A delay sample of 1 us or more ends it.
  n.on_ack(at_us(t), kMtu, kBase + microseconds{2}, false, 100000);
  EXPECT_EQ(n.stats().fast_increases, 11u);
}

TEST(Nscc, FairIncreaseAboveTargetWithoutEcn) {
  Nscc n = with_headroom();
  const uint64_t w0 = n.cwnd();
  double t = 0;
  // Delay twice the target (below the quick-adapt threshold), no ECN: queues draining.
  ack_bytes(n, &t, w0, kBase + 2 * kTarget, false, kAckGapUs);
  const double grown = static_cast<double>(n.cwnd()) - static_cast<double>(w0);
  const NsccConfig c;
  EXPECT_GT(grown, 0.8 * c.fi);  // about fi bytes per window acked
  EXPECT_LT(grown, 1.2 * c.fi + 2 * c.eta);
  EXPECT_EQ(n.stats().fair_increases, w0 / kMtu + (w0 % kMtu != 0));
  EXPECT_EQ(n.stats().decreases, 0u);
}

TEST(Nscc, DelayDecrease_AfterAWindowAboveTargetWithoutEcn) {
  const NsccConfig c = only_the_rule();
  Nscc n(c, kMtu);
  const double w0 = static_cast<double>(n.cwnd());
  // A queue of 3x target stands (a port that marks nothing): the first window of ACKs is fair
  // increase, then one decrease by the excess of the smallest delay of the run, max_md_jump
  // at most. (ACKs 1 us apart: the window takes longer than the 39 us round trip.)
  const Duration q = 3 * kTarget;
  const Duration rtt = kBase + q;
  double t = 0;
  uint64_t acked = 0;
  while (n.stats().delay_decreases == 0 && t < 200) {
    n.on_ack(at_us(t), kMtu, rtt, false, 100000);
    acked += kMtu;
    t += 1;
  }
  ASSERT_EQ(n.stats().delay_decreases, 1u);
  EXPECT_GE(acked, static_cast<uint64_t>(w0));  // a whole window first
  EXPECT_LT(acked, static_cast<uint64_t>(w0) + 2 * kMtu);
  EXPECT_EQ(n.stats().decreases, 0u);
  const double factor = 1 - 0.8 * (3.0 - 1.0) / 3.0;  // 0.467 -> max_md_jump 0.5
  EXPECT_NEAR(static_cast<double>(n.cwnd()), w0 * std::max(factor, 0.5), 2.0 * c.fi / 55);
  // The next one waits a round trip (the latest RTT sample) and another window.
  const uint64_t w1 = n.cwnd();
  const double cut_at = t;
  while (n.stats().delay_decreases == 1 && t < 400) {
    n.on_ack(at_us(t), kMtu, rtt, false, 100000);
    t += 1;
  }
  ASSERT_EQ(n.stats().delay_decreases, 2u);
  const double rtt_us = std::chrono::duration<double, std::micro>(rtt).count();
  EXPECT_GE(t - cut_at, rtt_us);
  EXPECT_LT(n.cwnd(), w1);
}

TEST(Nscc, DelayDecrease_ScaledByTheSmallestDelayOfTheRun) {
  const NsccConfig c = only_the_rule();
  Nscc n(c, kMtu);
  const double w0 = static_cast<double>(n.cwnd());
  // Spikes of 10x target among samples of 1.25x: the cut follows the queue that stood
  // (1.25x: 1 - 0.8 x 0.25 / 1.25 = 0.84), not the spikes.
  double t = 0;
  for (int i = 0; n.stats().delay_decreases == 0 && t < 200; ++i) {
    const Duration q = i % 4 == 0 ? 10 * kTarget : kTarget * 5 / 4;
    n.on_ack(at_us(t), kMtu, kBase + q, false, 100000);
    t += kAckGapUs;
  }
  ASSERT_EQ(n.stats().delay_decreases, 1u);
  EXPECT_NEAR(static_cast<double>(n.cwnd()), w0 * 0.84, 2.0 * c.fi / 55);
}

TEST(Nscc, DelayDecrease_NotWhenEcnMarksOrDelayDips) {
  const NsccConfig c = only_the_rule();
  for (const bool ecn : {true, false}) {
    Nscc n(c, kMtu);
    // Above target without a mark, but every 4th ACK is marked (a port that marks: the ECN
    // quadrants act) or sees the queue drained below target: no run of a window (>= 8 MTU).
    double t = 0;
    for (int i = 0; t < 300; ++i) {
      const bool other = i % 4 == 3;
      const Duration q = other && !ecn ? kTarget / 2 : 2 * kTarget;
      n.on_ack(at_us(t), kMtu, kBase + q, other && ecn, 100000);
      t += kAckGapUs;
    }
    EXPECT_EQ(n.stats().delay_decreases, 0u) << (ecn ? "ecn" : "dips");
    EXPECT_GT(n.stats().fair_increases, 0u);
  }
}

// delay_decrease = 0 (NsccConfig): a standing queue without marks is fair increase, as in
// UEC 1.0, and the window never shrinks.
TEST(Nscc, DelayDecrease_OffLeavesUecFairIncrease) {
  NsccConfig c = only_the_rule();
  c.delay_decrease = 0;
  Nscc n = with_headroom(c);
  const uint64_t w0 = n.cwnd();
  double t = 0;
  for (int i = 0; i < 2000; ++i) {
    n.on_ack(at_us(t), kMtu, kBase + 3 * kTarget, false, 100000);
    t += 1;
  }
  EXPECT_EQ(n.stats().delay_decreases, 0u);
  EXPECT_EQ(n.stats().fair_increases, 2000u);
  EXPECT_GT(n.cwnd(), w0);
}

TEST(Nscc, HoldOnEcnBelowTarget) {
  NsccConfig c;
  c.eta = 0;  // no periodic bonus, so a hold is visible as "no change"
  Nscc n = with_headroom(c);
  const uint64_t w0 = n.cwnd();
  double t = 0;
  ack_bytes(n, &t, 4 * w0, kBase + kTarget / 2, true, kAckGapUs);
  EXPECT_EQ(n.cwnd(), w0);
  EXPECT_EQ(n.stats().holds, 4 * w0 / kMtu + 1);
  EXPECT_EQ(n.stats().decreases, 0u);
}

TEST(Nscc, MultiplicativeDecreaseOnEcnAboveTarget) {
  const NsccConfig c = only_the_rule();
  Nscc n(c, kMtu);
  const double w0 = static_cast<double>(n.cwnd());
  // ECN with 3x target: the average climbs (weight 0.0125) and, once above the target and a
  // base RTT after start, one decrease scaled by the average's excess applies.
  const Duration rtt = kBase + 3 * kTarget;
  double t = 0;
  while (n.stats().decreases == 0 && t < 100) {
    n.on_ack(at_us(t), kMtu, rtt, true, 100000);
    t += kAckGapUs;
  }
  ASSERT_EQ(n.stats().decreases, 1u);
  EXPECT_GT(t, 12.0);  // not within the first base RTT
  const double avg = static_cast<double>(n.avg_delay().count());
  EXPECT_GT(avg, 9000);
  const double factor = std::max(1 - 0.8 * (avg - 9000) / avg, 0.5);
  EXPECT_NEAR(static_cast<double>(n.cwnd()), w0 * factor, 20.0);  // avg_delay() is whole ns
  EXPECT_LT(n.cwnd(), w0);
}

TEST(Nscc, MultiplicativeDecreaseBoundedByMaxMdJumpOncePerBaseRtt) {
  for (const double jump : {0.5, 0.7}) {
    NsccConfig c = only_the_rule();
    c.gamma = 1.0;
    c.max_md_jump = jump;
    Nscc n(c, kMtu);
    const Duration huge = kBase + 100 * kTarget;  // would cut ~90%
    n.on_ack(at_us(0), kMtu, huge, true, 100000);
    EXPECT_EQ(n.stats().decreases, 0u);  // within the first base RTT
    const double w0 = static_cast<double>(n.cwnd());
    n.on_ack(at_us(13), kMtu, huge, true, 100000);
    ASSERT_EQ(n.stats().decreases, 1u);
    EXPECT_NEAR(static_cast<double>(n.cwnd()), w0 * jump, 1.0) << "jump " << jump;
    // More marks within a base RTT of that decrease change nothing...
    const uint64_t w1 = n.cwnd();
    for (double t = 14; t < 25; t += 1) n.on_ack(at_us(t), kMtu, huge, true, 100000);
    EXPECT_EQ(n.cwnd(), w1);
    EXPECT_EQ(n.stats().decreases, 1u);
    // ...and the next base RTT allows one more.
    n.on_ack(at_us(25.5), kMtu, huge, true, 100000);
    EXPECT_EQ(n.stats().decreases, 2u);
    EXPECT_NEAR(static_cast<double>(n.cwnd()), static_cast<double>(w1) * jump, 1.0);
  }
}

TEST(Nscc, TrimRemovesOnePacket) {
  Nscc n(NsccConfig{}, kMtu);
  double t = 0;
  ack_bytes(n, &t, 64 * kMtu, kBase, false, kAckGapUs);  // quick adapt armed, plenty achieved
  const uint64_t w0 = n.cwnd();
  n.on_nack_trim(at_us(t), kMtu, 100000);
  EXPECT_EQ(n.cwnd(), w0 - kMtu);
  n.on_nack_trim(at_us(t + 0.1), 1000, 100000);  // the trimmed packet's nominal size
  EXPECT_EQ(n.cwnd(), w0 - kMtu - 1000);
  EXPECT_EQ(n.stats().trims, 2u);
  EXPECT_EQ(n.stats().quick_adapts, 0u);
  EXPECT_EQ(n.stats().min_cwnd, w0 - kMtu - 1000);
}

TEST(Nscc, TrimFeedsOneBaseRttOfDelayToTheAverage) {
  Nscc n(NsccConfig{}, kMtu);
  n.on_nack_trim(at_us(0), kMtu, 100000);
  EXPECT_EQ(n.avg_delay(), Duration{static_cast<int64_t>(0.0125 * 12000)});
}

TEST(Nscc, LossRemovesOneMtu) {
  Nscc n(NsccConfig{}, kMtu);
  const uint64_t w0 = n.cwnd();
  n.on_loss(at_us(0));
  n.on_loss(at_us(1));
  EXPECT_EQ(n.cwnd(), w0 - 2 * kMtu);
  EXPECT_EQ(n.stats().losses, 2u);
  EXPECT_EQ(n.stats().quick_adapts, 0u);
}

TEST(Nscc, SpuriousLossGivesBackWhatTheLossTook) {
  Nscc n(NsccConfig{}, kMtu);
  const uint64_t w0 = n.cwnd();
  for (int i = 0; i < 3; ++i) n.on_loss(at_us(i));
  ASSERT_EQ(n.cwnd(), w0 - 3 * kMtu);
  n.on_spurious_loss();
  n.on_spurious_loss();
  EXPECT_EQ(n.cwnd(), w0 - kMtu);
  n.on_spurious_loss();
  EXPECT_EQ(n.cwnd(), w0);
  // Never more than the losses took: a fourth undo (no loss left to undo) changes nothing.
  n.on_spurious_loss();
  EXPECT_EQ(n.cwnd(), w0);
  EXPECT_EQ(n.stats().losses, 3u);
  EXPECT_EQ(n.stats().losses_undone, 4u);
}

TEST(Nscc, SpuriousLossAtTheFloorGivesBackOnlyWhatWasTaken) {
  NsccConfig c;
  c.init_cwnd = 2 * kMtu;
  Nscc n(c, kMtu);
  ASSERT_EQ(n.cwnd(), 2u * kMtu);
  n.on_loss(at_us(0));  // 2 MTU -> 1 MTU (the floor)
  n.on_loss(at_us(1));  // at the floor: takes nothing
  ASSERT_EQ(n.cwnd(), uint64_t{kMtu});
  n.on_spurious_loss();
  n.on_spurious_loss();
  EXPECT_EQ(n.cwnd(), 2u * kMtu);
}

// Arms quick adapt at t = 0 (period 12 + 9 = 21 us), acks 3 MTU during it, then at 22 us an
// ACK with 5x target delay (above qa_threshold = 36 us) closes the period.
Nscc stalled_then_slow_ack(const NsccConfig& c) {
  Nscc n(c, kMtu);
  n.on_ack(at_us(0), kMtu, kBase, false, 200000);
  for (double t : {5.0, 10.0, 15.0}) n.on_ack(at_us(t), kMtu, kBase, false, 200000);
  n.on_ack(at_us(22), kMtu, kBase + 5 * kTarget, false, 150000);
  return n;
}

TEST(Nscc, QuickAdaptSetsCwndFromAchievedBytes) {
  Nscc n = stalled_then_slow_ack(NsccConfig{});
  EXPECT_EQ(n.stats().quick_adapts, 1u);
  EXPECT_EQ(n.cwnd(), 4u * kMtu);  // 4 MTU achieved in the period (< 225000 >> 3)
  // The ECN-marked ACKs of the 150000 bytes then in flight are ignored: no decrease.
  for (int i = 0; i < 30; ++i) {
    n.on_ack(at_us(23 + i * 0.3), kMtu, kBase + 5 * kTarget, true, 100000);
  }
  EXPECT_EQ(n.cwnd(), 4u * kMtu);
  EXPECT_EQ(n.stats().ignored_acks, 30u);
  EXPECT_EQ(n.stats().decreases, 0u);
}

TEST(Nscc, QuickAdaptNotWhenDisabled) {
  NsccConfig c;
  c.disable_qa = 1;
  Nscc n = stalled_then_slow_ack(c);
  EXPECT_EQ(n.stats().quick_adapts, 0u);
  EXPECT_GE(n.cwnd(), 225000u - kMtu);
}

TEST(Nscc, QuickAdaptNotWhenAchievedAboveGate) {
  Nscc n(NsccConfig{}, kMtu);
  double t = 0;
  ack_bytes(n, &t, 16 * kMtu, kBase, false, 1.0);  // 16 MTU = 65536 > 225000 >> 3 in a period
  n.on_ack(at_us(22), kMtu, kBase + 5 * kTarget, false, 100000);
  EXPECT_EQ(n.stats().quick_adapts, 0u);
  EXPECT_GT(n.cwnd(), 200000u);
}

TEST(Nscc, QuickAdaptOnTrimWhenStalled) {
  Nscc n(NsccConfig{}, kMtu);
  n.on_ack(at_us(0), kMtu, kBase, false, 200000);  // arms; nothing else arrives
  n.on_nack_trim(at_us(22), kMtu, 200000);         // a trim at the end of the period
  EXPECT_EQ(n.stats().quick_adapts, 1u);
  EXPECT_EQ(n.cwnd(), kMtu);  // nothing achieved: floor of one MTU
}

TEST(Nscc, WindowStaysWithinMtuAndMaxCwnd) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  Nscc n(NsccConfig{}, kMtu);
  double t = 0;
  for (int i = 0; i < 200000; ++i) {
    // Mostly back-to-back events, now and then an idle gap longer than a quick-adapt period.
    t += next() % 50 == 0 ? 30.0 + static_cast<double>(next() % 30)
                          : static_cast<double>(next() % 1000) / 1000.0;
    const uint64_t r = next();
    switch (r % 8) {
      case 0:
        n.on_nack_trim(at_us(t), kMtu, 100000);
        break;
      case 1:
        if (r % 64 == 1) n.on_loss(at_us(t));
        break;
      default: {
        const Duration rtt = kBase + nanoseconds{static_cast<int64_t>((r >> 8) % 60000)};
        n.on_ack(at_us(t), kMtu, rtt, (r >> 40) % 3 == 0, (r >> 20) % 300000);
      }
    }
    ASSERT_GE(n.cwnd(), kMtu);
    ASSERT_LE(n.cwnd(), 225000u);
  }
  EXPECT_GT(n.stats().increases(), 0u);
  EXPECT_GT(n.stats().decreases, 0u);
  EXPECT_GT(n.stats().quick_adapts, 0u);

  // A ceiling under one MTU still leaves one MTU.
  NsccConfig tiny;
  tiny.max_cwnd = 1000;
  Nscc m(tiny, kMtu);
  EXPECT_EQ(m.cwnd(), kMtu);
  m.on_loss(at_us(0));
  EXPECT_EQ(m.cwnd(), kMtu);
}

TEST(Nscc, Validate_NamesTheBadField) {
  struct Case {
    void (*mutate)(NsccConfig&);
    const char* field;
  };
  const Case cases[] = {
      {[](NsccConfig& c) { c.target_delay = 0; }, "target_delay"},
      {[](NsccConfig& c) { c.adjust_period_threshold = 0; }, "adjust_period_threshold"},
      {[](NsccConfig& c) { c.max_cwnd = 0; }, "max_cwnd"},
      {[](NsccConfig& c) { c.eta = -1; }, "eta"},
      {[](NsccConfig& c) { c.fi = NAN; }, "fi"},
      {[](NsccConfig& c) { c.fi_scale = INFINITY; }, "fi_scale"},
      {[](NsccConfig& c) { c.gamma = 1.5; }, "gamma"},
      {[](NsccConfig& c) { c.max_md_jump = 0; }, "max_md_jump"},
      {[](NsccConfig& c) { c.max_md_jump = 1.01; }, "max_md_jump"},
      {[](NsccConfig& c) { c.qa_gate = 32; }, "qa_gate"},
      {[](NsccConfig& c) { c.alpha = -0.5; }, "alpha"},
  };
  for (const Case& k : cases) {
    NsccConfig c;
    k.mutate(c);
    const char* msg = validate(c);
    ASSERT_NE(msg, nullptr) << k.field;
    EXPECT_NE(std::string(msg).find(std::string("nscc.") + k.field + ":"), std::string::npos)
        << msg;
  }
  EXPECT_EQ(validate(NsccConfig{}), nullptr);
  NsccConfig measure;
  measure.base_rtt = 0;  // measured instead
  measure.alpha = 0;     // derived instead
  EXPECT_EQ(validate(measure), nullptr);
  // defaults() with no link to size the window is caught.
  EXPECT_NE(validate(NsccConfig::defaults(k100G, Duration{0}, kMtu, true)), nullptr);
}

TEST(Nscc, BaseRtt_ConfiguredOrSmallestSample) {
  NsccConfig c;
  c.base_rtt = 0;
  Nscc n(c, kMtu);
  EXPECT_EQ(n.base_rtt(), Duration{0});
  n.on_ack(at_us(0), kMtu, microseconds{15}, false, 0);
  EXPECT_EQ(n.base_rtt(), microseconds{15});
  EXPECT_EQ(n.avg_delay(), Duration{0});
  n.on_ack(at_us(1), kMtu, microseconds{13}, false, 0);
  n.on_ack(at_us(2), kMtu, microseconds{20}, false, 0);
  EXPECT_EQ(n.base_rtt(), microseconds{13});
  EXPECT_EQ(n.avg_delay(), Duration{static_cast<int64_t>(0.0125 * 7000)});
  n.on_ack(at_us(3), kMtu, Duration{0}, false, 0);  // no sample: nothing measured
  EXPECT_EQ(n.base_rtt(), microseconds{13});
  EXPECT_EQ(n.stats().acks, 3u);

  Nscc configured(NsccConfig{}, kMtu);
  EXPECT_EQ(configured.base_rtt(), kBase);
  configured.on_ack(at_us(0), kMtu, microseconds{20}, false, 0);
  EXPECT_EQ(configured.base_rtt(), kBase);
  configured.on_ack(at_us(1), kMtu, microseconds{10}, false, 0);  // UEC: a smaller sample wins
  EXPECT_EQ(configured.base_rtt(), microseconds{10});
}

TEST(Nscc, SetConfig_KeepsWindowClampedToNewCeiling) {
  Nscc n(NsccConfig{}, kMtu);
  NsccConfig c;
  c.max_cwnd = 100000;
  n.set_config(c);
  EXPECT_EQ(n.cwnd(), 100000u);
  c.max_cwnd = 400000;
  n.set_config(c);
  EXPECT_EQ(n.cwnd(), 100000u);
  EXPECT_EQ(n.config().max_cwnd, 400000u);
}

// ---- Closed loop: flows through one bottleneck queue --------------------------------------
//
// Rate R, base RTT B. A packet sent at t waits q = the queue's backlog / R and is acked at
// t + B + q with that RTT. The queue marks CE with probability rising from 0 at 0.2 BDP of
// backlog to 1 at 0.8 BDP, and trims packets arriving over 1 BDP (their NACK comes back after
// B, the header skipping the queue). Flows always have data; a trimmed packet is simply sent
// again as new bytes. A drop-tail variant (marks = false, trims = false): no CE ever, and a
// packet arriving over `buffer_bdp` BDP of backlog is dropped, its loss noticed (on_loss) when
// the packets behind it are acked: after B plus the full queue.
struct ToyNet {
  struct Flow {
    Nscc cc;
    double start_ns;
    uint64_t in_flight = 0;
    uint64_t delivered = 0;  // bytes acked inside the measurement window
  };
  struct Event {
    double t;
    uint64_t seq;
    size_t flow;
    double sent;
    bool trimmed;
    bool ecn;
    bool lost = false;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  double rate = 12.5;  // bytes per ns (100 Gb/s)
  double base_ns = 12000;
  double bdp = 150000;
  bool marks = true;      // the queue marks CE (the ramp above)
  bool trims = true;      // over the buffer: trim; else drop
  double buffer_bdp = 1;  // buffer, BDPs
  double busy_until = 0;  // when the link drains what is queued
  uint64_t seq = 0;
  uint64_t rng = 0x243f6a8885a308d3ull;
  std::vector<Flow> flows;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  double measure_from = 0;
  double qdelay_sum = 0;
  uint64_t qdelay_n = 0;
  uint64_t overflows = 0;  // packets trimmed or dropped inside the measurement window
  uint64_t sent = 0;       // packets sent inside the measurement window

  double uniform() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return static_cast<double>(rng >> 11) * 0x1p-53;
  }

  void send(size_t f, double now) {
    Flow& fl = flows[f];
    while (fl.cc.can_send(fl.in_flight)) {
      fl.in_flight += kMtu;
      const double backlog = std::max(0.0, busy_until - now) * rate;
      if (now >= measure_from) ++sent;
      if (backlog > buffer_bdp * bdp) {
        if (now >= measure_from) ++overflows;
        if (trims) {
          events.push({now + base_ns, seq++, f, now, true, false});
        } else {
          events.push({now + base_ns + backlog / rate, seq++, f, now, false, false, true});
        }
        continue;
      }
      const bool ecn = marks && uniform() < (backlog - 0.2 * bdp) / (0.6 * bdp);
      const double q = backlog / rate;
      busy_until = std::max(busy_until, now) + kMtu / rate;
      events.push({now + base_ns + q, seq++, f, now, false, ecn});
    }
  }

  void run(double until_ns) {
    for (size_t f = 0; f < flows.size(); ++f) {
      events.push({flows[f].start_ns, seq++, f, -1, false, false});  // start marker
    }
    while (!events.empty() && events.top().t < until_ns) {
      const Event e = events.top();
      events.pop();
      Flow& fl = flows[e.flow];
      const Time now{static_cast<int64_t>(std::llround(e.t))};
      if (e.sent >= 0) {
        fl.in_flight -= kMtu;
        if (e.trimmed) {
          fl.cc.on_nack_trim(now, kMtu, fl.in_flight);
        } else if (e.lost) {
          fl.cc.on_loss(now);
        } else {
          const double rtt = e.t - e.sent;
          fl.cc.on_ack(now, kMtu, Duration{static_cast<int64_t>(std::llround(rtt))}, e.ecn,
                       fl.in_flight);
          if (e.t >= measure_from) {
            fl.delivered += kMtu;
            qdelay_sum += rtt - base_ns;
            ++qdelay_n;
          }
        }
      }
      send(e.flow, e.t);
    }
  }
};

ToyNet make_net(std::vector<double> starts_ns) {
  ToyNet net;
  for (double s : starts_ns) net.flows.push_back({Nscc(NsccConfig{}, kMtu), s});
  return net;
}

TEST(Nscc, ClosedLoop_OneFlowFillsTheLinkNearTarget) {
  ToyNet net = make_net({0});
  net.measure_from = 2e6;
  net.run(6e6);
  const double seconds_ns = 4e6;
  const double throughput = net.flows[0].delivered / seconds_ns;  // bytes per ns
  const double mean_q = net.qdelay_sum / net.qdelay_n;
  EXPECT_GT(throughput, 0.95 * net.rate);
  EXPECT_LT(mean_q, 1.5 * 9000);
  EXPECT_GT(mean_q, 0.25 * 9000);
  std::printf("one flow: %.1f%% of R, mean queueing delay %.2f us, cwnd %llu\n",
              100 * throughput / net.rate, mean_q / 1000,
              static_cast<unsigned long long>(net.flows[0].cc.cwnd()));
}

TEST(Nscc, ClosedLoop_TwoFlowsShareFairlyNearTarget) {
  ToyNet net = make_net({0, 1e6});  // the second flow arrives at 1 ms into a full queue
  net.measure_from = 4e6;
  net.run(10e6);
  const double span_ns = 6e6;
  const double x1 = net.flows[0].delivered / span_ns;
  const double x2 = net.flows[1].delivered / span_ns;
  const double jain = (x1 + x2) * (x1 + x2) / (2 * (x1 * x1 + x2 * x2));
  const double mean_q = net.qdelay_sum / net.qdelay_n;
  std::printf("two flows: %.1f%% + %.1f%% of R, Jain %.3f, mean queueing delay %.2f us\n",
              100 * x1 / net.rate, 100 * x2 / net.rate, jain, mean_q / 1000);
  EXPECT_GE(jain, 0.95);
  EXPECT_GT(x1 + x2, 0.9 * net.rate);
  EXPECT_LT(mean_q, 1.5 * 9000);
  EXPECT_GT(mean_q, 0.25 * 9000);
  for (const auto& f : net.flows) {
    EXPECT_GT(f.cc.stats().increases(), 0u);
    EXPECT_GT(f.cc.stats().decreases + f.cc.stats().quick_adapts + f.cc.stats().trims, 0u);
  }
}

// Four flows through a drop-tail port that marks nothing, with a deep buffer (3 BDP: a
// switch or tbf queue of several round trips). Their ceilings (1.5 BDP each) add up to 6 BDP:
// without a decrease on delay they stay there by fair increase, keep the buffer full and lose
// packets every round trip. With it the queue stays near the target, nothing overflows once
// the flows have settled, and the AIMD of delay decreases and fair increase shares the port.
TEST(Nscc, ClosedLoop_DropTailWithoutEcn_QueueBoundedFairFull) {
  ToyNet net = make_net({0, 0.5e6, 1e6, 1.5e6});
  net.marks = false;
  net.trims = false;
  net.buffer_bdp = 3;
  net.measure_from = 4e6;
  net.run(10e6);
  const double span_ns = 6e6;
  std::vector<double> x;
  double total = 0, sq = 0;
  for (const auto& f : net.flows) {
    x.push_back(f.delivered / span_ns);
    total += x.back();
    sq += x.back() * x.back();
  }
  const double jain = total * total / (x.size() * sq);
  const double mean_q = net.qdelay_sum / net.qdelay_n;
  uint64_t cuts = 0;
  for (const auto& f : net.flows) cuts += f.cc.stats().delay_decreases;
  std::printf(
      "drop-tail, no ECN, 4 flows: %.1f%% of R, Jain %.3f, mean queueing delay %.2f us, "
      "%llu of %llu packets dropped, %llu delay decreases\n",
      100 * total / net.rate, jain, mean_q / 1000, static_cast<unsigned long long>(net.overflows),
      static_cast<unsigned long long>(net.sent), static_cast<unsigned long long>(cuts));
  EXPECT_GT(total, 0.9 * net.rate);
  EXPECT_GE(jain, 0.95);
  EXPECT_LT(mean_q, 2 * 9000.0);  // the full buffer would be 36 us
  EXPECT_LE(net.overflows, net.sent / 1000);
  for (const auto& f : net.flows) EXPECT_GT(f.cc.stats().delay_decreases, 0u);
}

}  // namespace
}  // namespace mrc::engine
