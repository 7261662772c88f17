// RttEstimator: RFC 6298 smoothing, the minimum, seeding and the RTO floor.
#include "engine/rtt.h"

#include <gtest/gtest.h>

namespace mrc::engine {
namespace {

TEST(RttEstimator, OnSample_FirstSetsSrttAndHalfOfItAsRttvar) {
  RttEstimator r;
  EXPECT_FALSE(r.has_sample());
  EXPECT_EQ(r.rto_floor(Duration{500}), Duration{0});  // no sample: no floor
  r.on_sample(Duration{8000});
  EXPECT_TRUE(r.has_sample());
  EXPECT_EQ(r.srtt(), Duration{8000});
  EXPECT_EQ(r.rttvar(), Duration{4000});
  EXPECT_EQ(r.min_rtt(), Duration{8000});
}

TEST(RttEstimator, OnSample_SmoothsWithGainsOneEighthAndOneQuarter) {
  RttEstimator r;
  r.on_sample(Duration{8000});
  r.on_sample(
      Duration{16000});  // err 8000: rttvar (3 x 4000 + 8000) / 4, srtt (7 x 8000 + 16000) / 8
  EXPECT_EQ(r.rttvar(), Duration{5000});
  EXPECT_EQ(r.srtt(), Duration{9000});
  EXPECT_EQ(r.min_rtt(), Duration{8000});
  r.on_sample(Duration{1000});  // err 8000 again: rttvar 5750, srtt 8000; new minimum
  EXPECT_EQ(r.rttvar(), Duration{5750});
  EXPECT_EQ(r.srtt(), Duration{8000});
  EXPECT_EQ(r.min_rtt(), Duration{1000});
}

TEST(RttEstimator, Seed_IsSmoothedLikeAnOwnSample) {
  RttEstimator r;
  r.seed(Duration{8000}, Duration{4000}, Duration{6000});
  EXPECT_TRUE(r.has_sample());
  r.on_sample(Duration{16000});
  EXPECT_EQ(r.srtt(), Duration{9000});  // smoothed, not replaced
  EXPECT_EQ(r.rttvar(), Duration{5000});
  EXPECT_EQ(r.min_rtt(), Duration{6000});
}

TEST(RttEstimator, RtoFloor_IsSrttPlusFourRttvarPlusAckDelay) {
  RttEstimator r;
  r.on_sample(Duration{8000});
  EXPECT_EQ(r.rto_floor(Duration{500}), Duration{8000 + 4 * 4000 + 500});
}

TEST(RttEstimator, TlpTimeout_TwoSrttPlusTheLargestOfAckDelayFourRttvarAndMinSlack) {
  RttEstimator r;
  const Duration slack = RttEstimator::kTlpMinSlack;
  EXPECT_EQ(r.tlp_timeout(Duration{8000}), Duration{0});  // no sample: no probe
  r.on_sample(Duration{8000});  // rttvar 4000: 4 x 4000 and 8000 both below the slack
  EXPECT_EQ(r.tlp_timeout(Duration{8000}), Duration{2 * 8000} + slack);
  EXPECT_EQ(r.tlp_timeout(slack + Duration{1}), Duration{2 * 8000} + slack + Duration{1});
  r.on_sample(Duration{200'000});  // a spike: rttvar (3 x 4000 + 192000) / 4 = 51000
  ASSERT_EQ(r.rttvar(), Duration{51'000});
  EXPECT_EQ(r.tlp_timeout(Duration{8000}), 2 * r.srtt() + Duration{4 * 51'000});
}

}  // namespace
}  // namespace mrc::engine
