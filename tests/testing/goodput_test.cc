// Tests of the goodput meter and Jain's fairness index (testing/goodput.h) on a bare SimNet
// with synthetic byte counters. Threading: single-threaded tests.
#include "mrc/testing/goodput.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mrc::sim {
namespace {

using namespace std::chrono_literals;

TEST(GoodputMeter, Rates_StallsAndWindowsOnSyntheticCounter) {
  SimNet net;
  // 1 byte/ns until 10 ms, nothing until 15 ms, then 0.5 byte/ns.
  auto counter = [&net]() -> uint64_t {
    const int64_t t = net.now().count();
    const int64_t a = std::min<int64_t>(t, 10'000'000);
    const int64_t b = std::max<int64_t>(0, t - 15'000'000) / 2;
    return static_cast<uint64_t>(a + b);
  };
  GoodputMeter m(net, counter, 1ms);
  m.start(Time{0});
  net.run_until(Time{30ms});
  ASSERT_EQ(m.intervals().size(), 30u);
  EXPECT_EQ(m.intervals()[0].end, Time{1ms});
  EXPECT_EQ(m.intervals()[0].bytes, 1'000'000u);
  EXPECT_DOUBLE_EQ(m.rate_bps(Time{0}, Time{10ms}), 8e9);
  EXPECT_DOUBLE_EQ(m.rate_bps(Time{15ms}, Time{30ms}), 4e9);
  EXPECT_DOUBLE_EQ(m.rate_bps(Time{0}, Time{20ms}), (10e6 + 2.5e6) * 8 / 20e-3);
  // Partial intervals at the edges are left out.
  EXPECT_DOUBLE_EQ(m.rate_bps(Time{500us}, Time{3500us}), 8e9);
  EXPECT_EQ(m.longest_stall(Time{0}, Time{30ms}), 5ms);
  EXPECT_EQ(m.longest_stall(Time{0}, Time{12ms}), 2ms);
  EXPECT_EQ(m.longest_stall(Time{15ms}, Time{30ms}), 0ms);
  EXPECT_DOUBLE_EQ(m.min_rate_bps(Time{0}, Time{30ms}, 2ms), 0);
  EXPECT_DOUBLE_EQ(m.min_rate_bps(Time{16ms}, Time{30ms}, 2ms), 4e9);
  // A window across the edge of the stall: 9..13 ms holds 1 ms at 8 Gb/s out of 4.
  EXPECT_DOUBLE_EQ(m.min_rate_bps(Time{9ms}, Time{13ms}, 4ms), 2e9);
  // A window longer than the range: the whole range.
  EXPECT_DOUBLE_EQ(m.min_rate_bps(Time{0}, Time{3ms}, 10ms), 8e9);
  EXPECT_DOUBLE_EQ(m.rate_bps(Time{40ms}, Time{50ms}), 0);
  const std::string csv = m.csv();
  EXPECT_EQ(csv.rfind("time_s,gbps\n0.001000,8.000\n", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 31);

  m.stop();
  net.run_until(Time{40ms});
  EXPECT_EQ(m.intervals().size(), 30u);
}

TEST(GoodputMeter, Start_LaterAndDestroyedSafely) {
  SimNet net;
  uint64_t bytes = 0;
  auto m = std::make_unique<GoodputMeter>(
      net, [&] { return bytes += 100; }, 10us);
  m->start(Time{1ms});
  net.run_until(Time{1ms + 35us});
  ASSERT_EQ(m->intervals().size(), 3u);
  EXPECT_EQ(m->intervals()[0].end, Time{1ms + 10us});
  EXPECT_EQ(m->intervals()[0].bytes, 100u);
  EXPECT_EQ(m->interval(), 10us);
  m.reset();  // its pending sample must not touch it
  net.run_until(Time{2ms});
}

TEST(JainFairness, KnownValues) {
  EXPECT_DOUBLE_EQ(jain_fairness(std::vector<double>{1, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jain_fairness(std::vector<double>{1, 0, 0, 0}), 0.25);
  EXPECT_DOUBLE_EQ(jain_fairness(std::vector<double>{1, 2}), 0.9);
  EXPECT_DOUBLE_EQ(jain_fairness(std::vector<double>{3, 3, 0}), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(jain_fairness({}), 1.0);
  EXPECT_DOUBLE_EQ(jain_fairness(std::vector<double>{0, 0}), 1.0);
}

}  // namespace
}  // namespace mrc::sim
