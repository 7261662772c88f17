// RttEstimator: RFC 6298 smoothing, the minimum, seeding and the RTO floor.
#include "engine/rtt.h"

#include <gtest/gtest.h>

#include "mrc/engine/engine.h"

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
  const Duration slack = kDefaultTlpMinSlack;
  EXPECT_EQ(r.tlp_timeout(Duration{8000}, slack), Duration{0});  // no sample: no probe
  r.on_sample(Duration{8000});  // rttvar 4000: 4 x 4000 and 8000 both below the slack
  EXPECT_EQ(r.tlp_timeout(Duration{8000}, slack), Duration{2 * 8000} + slack);
  EXPECT_EQ(r.tlp_timeout(slack + Duration{1}, slack), Duration{2 * 8000} + slack + Duration{1});
  r.on_sample(Duration{200'000});  // a spike: rttvar (3 x 4000 + 192000) / 4 = 51000
  ASSERT_EQ(r.rttvar(), Duration{51'000});
  EXPECT_EQ(r.tlp_timeout(Duration{8000}, slack), 2 * r.srtt() + Duration{4 * 51'000});
}

// The probe's time: since + tlp_timeout while that leaves the probe's ACK a round trip (the
// RTO floor) before the RTO; past that, clamped to rto_at - floor (a small ack timeout used to
// drop the probe and leave a tail loss to the RTO); none when the RTO is under two round trips
// away, and none before a sample.
TEST(RttEstimator, TlpAt_ClampedBeforeTheRto) {
  const Duration ack{8'000}, slack = kDefaultTlpMinSlack;
  const Time since{1'000'000};
  RttEstimator r;
  EXPECT_EQ(r.tlp_at(since, since + Duration{1'000'000}, ack, slack), kNever);  // no sample
  r.on_sample(Duration{100'000});  // srtt 100 us, rttvar 50 us
  const Duration natural = r.tlp_timeout(ack, slack);  // 200 + 200 us (4 RTTVAR)
  const Duration floor = r.rto_floor(ack);             // 100 + 200 + 8 us
  ASSERT_EQ(natural, Duration{400'000});
  ASSERT_EQ(floor, Duration{308'000});
  EXPECT_EQ(r.tlp_at(since, kNever, ack, slack), since + natural);  // no RTO (timeout 0)
  EXPECT_EQ(r.tlp_at(since, since + Duration{10'000'000}, ack, slack), since + natural);
  // The RTO 620 us after `since`: 400 us would leave the probe's ACK 220 us, under a floor.
  const Time rto_at = since + Duration{620'000};
  EXPECT_EQ(r.tlp_at(since, rto_at, ack, slack), rto_at - floor);
  EXPECT_GE(r.tlp_at(since, rto_at, ack, slack), since + floor);
  // The natural time at or past the RTO (the case that used to be dropped): clamped as long
  // as the clamp is not before the tail's own ACK is overdue (since + floor).
  EXPECT_EQ(r.tlp_at(since, since + natural, ack, slack), kNever);  // would be since + 92 us
  EXPECT_EQ(r.tlp_at(since, since + 2 * floor, ack, slack), since + floor);
  EXPECT_EQ(r.tlp_at(since, since + 2 * floor - Duration{1}, ack, slack), kNever);
  // A smaller slack moves the natural time only.
  EXPECT_EQ(r.tlp_at(since, kNever, ack, Duration{0}), since + 2 * r.srtt() + 4 * r.rttvar());
}

}  // namespace
}  // namespace mrc::engine
