// The connection policy (engine/policy.h): QP transitions, the effective NSCC constants, rate
// hints, and the learned base RTT.
#include "mrc/engine/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <utility>

#include "mrc/engine/engine.h"
#include "mrc/wire/wire.h"

namespace mrc::engine {
namespace {

using namespace std::chrono_literals;

// Every allowed (from, to) pair, written out (IB spec 10.3.1, the MRC subset); all others
// are refused.
TEST(QpTransitionOk, Table) {
  using enum QpState;
  constexpr QpState kAll[] = {kReset, kInit, kRtr, kRts, kSqd, kError};
  const std::set<std::pair<QpState, QpState>> allowed = {
      {kReset, kReset}, {kReset, kInit}, {kReset, kError}, {kInit, kReset},  {kInit, kInit},
      {kInit, kRtr},    {kInit, kError}, {kRtr, kReset},   {kRtr, kRts},     {kRtr, kError},
      {kRts, kReset},   {kRts, kRts},    {kRts, kSqd},     {kRts, kError},   {kSqd, kReset},
      {kSqd, kRts},     {kSqd, kSqd},    {kSqd, kError},   {kError, kReset}, {kError, kError}};
  for (QpState f : kAll)
    for (QpState t : kAll)
      EXPECT_EQ(qp_transition_ok(f, t), allowed.contains({f, t}))
          << to_string(f) << " -> " << to_string(t);
}

TEST(CcStartBaseRtt, ConfiguredElseFlooredStart) {
  EngineConfig c;
  EXPECT_EQ(cc_start_base_rtt(c), kBaseRttStart);
  c.min_base_rtt = 300us;
  EXPECT_EQ(cc_start_base_rtt(c), 300us);
  c.min_base_rtt = 5us;
  EXPECT_EQ(cc_start_base_rtt(c), 12us);
  c.base_rtt = 40us;
  EXPECT_EQ(cc_start_base_rtt(c), 40us);
}

TEST(EffectiveCc, DefaultsProfileAndOff) {
  EngineConfig c;
  c.nic_bps = 8'000'000'000;
  c.min_base_rtt = 100us;
  auto learned = effective_cc(c, 4096);
  ASSERT_TRUE(learned);
  NsccConfig want = NsccConfig::defaults(c.nic_bps, 100us, 4096, true);
  want.base_rtt = 0;  // learned
  EXPECT_EQ(*learned, want);
  EXPECT_EQ(derived_cc(c, 4096, 100us), NsccConfig::defaults(c.nic_bps, 100us, 4096, true));

  c.base_rtt = 300us;
  EXPECT_EQ(*effective_cc(c, 2048), NsccConfig::defaults(c.nic_bps, 300us, 2048, true));

  NsccConfig own;
  own.max_cwnd = 12345;
  EXPECT_EQ(*effective_cc(c, 4096, own), own);
  c.congestion_control = false;
  EXPECT_FALSE(effective_cc(c, 4096));
  EXPECT_EQ(*effective_cc(c, 4096, own), own);  // a profile turns it on for its QP
}

TEST(WithRates, WindowsOfRateTimesBaseRtt) {
  EngineConfig c;
  c.base_rtt = 100us;
  const NsccConfig base = *effective_cc(c, 4096);
  // 8000 Mbit/s x 100 us = 100,000 B; 800 -> 10,000; 80 -> 1,000 (max_cwnd: at least an MTU).
  const NsccConfig r = with_rates(base, c, 4096, CcRates{800, 80, 8000});
  EXPECT_EQ(r.max_cwnd, 100'000u);
  EXPECT_EQ(r.init_cwnd, 10'000u);
  EXPECT_EQ(r.cwnd_floor, 1'000u);
  EXPECT_EQ(with_rates(base, c, 4096, CcRates{0, 0, 8}).max_cwnd, 4096u);
  // Untouched fields and no rates: the config as given.
  EXPECT_EQ(with_rates(base, c, 4096, CcRates{}), base);
  // A learned base RTT: the windows use where learning starts (min_base_rtt here).
  EngineConfig l;
  l.min_base_rtt = 200us;
  EXPECT_EQ(with_rates(*effective_cc(l, 4096), l, 4096, CcRates{0, 0, 8000}).max_cwnd, 200'000u);
  EXPECT_FALSE(CcRates{}.any());
  EXPECT_TRUE(CcRates{.min_mbps = 1}.any());
}

// Samples every `step` from `t`, each `rtt`; returns the time after the last.
Time feed(BaseRttFilter& f, Time t, Duration span, Duration step, Duration rtt) {
  for (const Time end = t + span; t < end; t += step) f.on_sample(t, rtt);
  return t;
}

constexpr Duration kWindow = BaseRttFilter::kEpoch * (BaseRttFilter::kEpochs + 1);

TEST(BaseRttFilter, NothingBeforeASample) {
  BaseRttFilter f(100us);
  EXPECT_EQ(f.estimate(), Duration{0});
  EXPECT_FALSE(f.moved(Duration{0}));
  f.on_sample(Time{0}, Duration{0});  // not a sample
  EXPECT_EQ(f.estimate(), Duration{0});
  f.on_sample(Time{0}, 20us);
  EXPECT_EQ(f.estimate(), 100us);  // floored
  EXPECT_TRUE(f.moved(Duration{0}));
  EXPECT_FALSE(f.moved(100us));
}

TEST(BaseRttFilter, BurstIsAddedToTheMinimum) {
  BaseRttFilter f(100us, 260us);
  f.on_sample(Time{0}, 45us);
  f.on_sample(Time{1'000}, 400us);
  EXPECT_EQ(f.estimate(), 305us);
  BaseRttFilter floored(400us, 260us);
  floored.on_sample(Time{0}, 45us);
  EXPECT_EQ(floored.estimate(), 400us);
}

// One packet of MTU + data header per hop of the longest path (kSprayHops), at a plane port's
// rate: 40 Gb/s over 4 planes, 4096 B: 4 x 4160 x 8 / 10 Gb/s = 13.3 us.
TEST(SprayAllowance, OnePacketPerHopAtAPlanePort) {
  EngineConfig c;
  c.nic_bps = 40'000'000'000;
  const double bits = (4096.0 + wire::kDataHeaderSize) * 8;
  EXPECT_EQ(spray_allowance(c, 4096, 4), Duration{std::llround(kSprayHops * bits / 10.0)});
  EXPECT_GT(spray_allowance(c, 4096, 4), 13us);
  EXPECT_LT(spray_allowance(c, 4096, 4), 14us);
  EXPECT_EQ(spray_allowance(c, 4096, 1), Duration{std::llround(kSprayHops * bits / 40.0)});
  EXPECT_EQ(spray_allowance(c, 4096, 0), spray_allowance(c, 4096, 1));  // no paths yet: one
  EXPECT_LT(spray_allowance(c, 1024, 4), spray_allowance(c, 4096, 4));
  c.nic_bps = 0;
  EXPECT_EQ(spray_allowance(c, 4096, 4), Duration{0});
}

// A lucky minimum (a sample that met no other QP's packet) is not the base: the spray
// allowance is added to it, at most the minimum itself (a shorter path, a slower NIC), and
// the driver's burst on top. Before, the estimate was the minimum alone (21.6 us here).
TEST(BaseRttFilter, SprayIsAddedToTheMinimumUpToTheMinimum) {
  BaseRttFilter f(Duration{0}, Duration{0}, 13us);
  f.on_sample(Time{0}, 30us);
  f.on_sample(Time{1'000}, 21600ns);
  EXPECT_EQ(f.estimate(), 34600ns);
  BaseRttFilter short_path(Duration{0}, Duration{0}, 13us);  // two hosts under one T0
  short_path.on_sample(Time{0}, 10us);
  EXPECT_EQ(short_path.estimate(), 20us);
  BaseRttFilter burst(100us, 260us, 66us);  // a software datapath: burst and floor as before
  burst.on_sample(Time{0}, 45us);
  EXPECT_EQ(burst.estimate(), 350us);
  burst.on_sample(Time{1'000}, 5us);
  EXPECT_EQ(burst.estimate(), 270us);
}

TEST(BaseRttFilter, LuckyMinimumAgesOut) {
  BaseRttFilter f;
  f.on_sample(Time{0}, 200us);  // one lucky sample
  Time t = feed(f, Time{1'000}, BaseRttFilter::kEpoch * BaseRttFilter::kEpochs, 1ms, 300us);
  EXPECT_EQ(f.estimate(), 200us);  // still within the window
  t = feed(f, t, kWindow, 1ms, 300us);
  EXPECT_EQ(f.estimate(), 300us);  // gone: the path's own minimum
  EXPECT_TRUE(f.moved(200us));
}

TEST(BaseRttFilter, FollowsAPathThatGetsShorterAtOnceAndLongerAfterTheWindow) {
  BaseRttFilter f;
  Time t = feed(f, Time{0}, 3s, 1ms, 50us);
  f.on_sample(t, 30us);
  EXPECT_EQ(f.estimate(), 30us);  // a lower minimum counts at once
  t = feed(f, t, kWindow - BaseRttFilter::kEpoch, 1ms, 55us);
  EXPECT_EQ(f.estimate(), 30us);
  t = feed(f, t, 2 * BaseRttFilter::kEpoch, 1ms, 55us);
  EXPECT_EQ(f.estimate(), 55us);
}

TEST(BaseRttFilter, StandingQueueRisesNoHigherThanTwiceTheSmallestSample) {
  // QPs that never let a shared port's queue drain: every sample after the first carries it.
  BaseRttFilter f(100us, 260us);
  f.on_sample(Time{0}, 300us);
  Time t = feed(f, Time{1'000}, 3 * kWindow, 1ms, 7800us);
  EXPECT_EQ(f.estimate(), 2 * 300us + 260us);
  EXPECT_FALSE(f.moved(2 * 300us + 260us));
  (void)t;
}

TEST(BaseRttFilter, PeerAnchorBoundsAQpThatStartedBehindAQueue) {
  BaseRttFilter f;
  f.set_anchor(Duration{0});  // none: no bound yet
  f.on_sample(Time{0}, 4ms);
  EXPECT_EQ(f.estimate(), 4ms);
  f.set_anchor(300us);  // another QP to the peer saw the empty queue
  EXPECT_EQ(f.estimate(), 600us);
  f.set_anchor(500us);  // a larger one never raises it
  EXPECT_EQ(f.estimate(), 600us);
}

TEST(BaseRttFilter, IdleLongerThanTheWindowForgetsTheWindow) {
  BaseRttFilter f;
  f.on_sample(Time{0}, 300us);
  f.on_sample(Time{0} + 60s, 500us);
  EXPECT_EQ(f.estimate(), 500us);
  f.on_sample(Time{0} + 60s + 1ms, 450us);
  EXPECT_EQ(f.estimate(), 450us);
}

TEST(BaseRttFilter, MovedMeansMoreThanTenPercent) {
  BaseRttFilter f;
  f.on_sample(Time{0}, 100us);
  EXPECT_FALSE(f.moved(91us));
  EXPECT_FALSE(f.moved(109us));
  EXPECT_TRUE(f.moved(90us));
  EXPECT_TRUE(f.moved(112us));
}

}  // namespace
}  // namespace mrc::engine
