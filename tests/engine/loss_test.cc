// LossDetector: RACK's reorder window and spread, their adaptation to spurious losses, and
// what progress resets.
#include "engine/loss.h"

#include <gtest/gtest.h>

namespace mrc::engine {
namespace {

RttEstimator rtt_of(Duration sample) {
  RttEstimator r;
  r.on_sample(sample);
  return r;
}

TEST(LossDetector, RackSrtt_SendToAckTimeBeforeTheFirstSample) {
  LossDetector l;
  l.rack_rtt = Duration{30000};
  EXPECT_EQ(l.rack_srtt(RttEstimator{}), Duration{30000});
  EXPECT_EQ(l.rack_srtt(rtt_of(Duration{100000})), Duration{100000});
}

TEST(LossDetector, ReorderWindow_QuarterMinRttTimesMultBoundedBySrtt) {
  LossDetector l;
  const RttEstimator r = rtt_of(Duration{100000});
  EXPECT_EQ(l.reorder_window(r), Duration{25000});
  l.reorder_mult = 3;
  EXPECT_EQ(l.reorder_window(r), Duration{75000});
  l.reorder_mult = 64;
  EXPECT_EQ(l.reorder_window(r), Duration{100000});  // never past the RTT
  l.reorder_mult = 1;
  EXPECT_EQ(l.reorder_window(rtt_of(Duration{4000})), LossDetector::kMinReorder);  // 2 us floor
}

TEST(LossDetector, Spread_SrttPlusFourRttvarAtMostTwoSrtt) {
  LossDetector l;
  RttEstimator r = rtt_of(Duration{100000});  // rttvar 50000: 100000 + 200000 capped at 200000
  EXPECT_EQ(l.spread(r), Duration{200000});
  for (int i = 0; i < 40; ++i) r.on_sample(Duration{100000});  // rttvar decays towards 0
  EXPECT_LT(l.spread(r), Duration{110000});
  EXPECT_GE(l.spread(r), l.reorder_window(r));
}

TEST(LossDetector, OnSpurious_WidensUpToTheCapAndCleanAcksHalveIt) {
  LossDetector l;
  for (int i = 0; i < 100; ++i) l.on_spurious();
  EXPECT_EQ(l.reorder_mult, LossDetector::kMaxReorderMult);
  for (uint32_t i = 0; i + 1 < LossDetector::kReorderDecay; ++i) l.on_clean_ack();
  EXPECT_EQ(l.reorder_mult, LossDetector::kMaxReorderMult);  // one short
  l.on_clean_ack();
  EXPECT_EQ(l.reorder_mult, LossDetector::kMaxReorderMult / 2);
  l.on_spurious();  // starts the count over
  EXPECT_EQ(l.since_spurious, 0u);
}

TEST(LossDetector, OnProgress_ResetsRetriesAndProbe) {
  LossDetector l;
  l.rto_retries = 3;
  l.tlp_sent = true;
  l.on_delivered(7);
  l.on_delivered(5);  // older: the newest delivered stays
  l.on_progress();
  EXPECT_EQ(l.rto_retries, 0u);
  EXPECT_FALSE(l.tlp_sent);
  EXPECT_EQ(l.rack_xseq, 7u);
}

}  // namespace
}  // namespace mrc::engine
