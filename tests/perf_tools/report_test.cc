// summarize() on synthetic series: healthy level, phases, the 50 ms and 100 ms figures, detect
// time and stalls; CSV layout.
#include "report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace mrc::perf {
namespace {

Series t0_down_series() {
  Series s;
  s.name = "mrc";
  // 10 ms intervals for 3 s: 8 Gbit/s, a T0 down at 1.0 s: 20 ms at 2, then 6; up at 2.0 s.
  for (int i = 1; i <= 300; ++i) {
    const double t = i * 0.01;
    double g = 8;
    if (t > 1.0 && t <= 1.02) g = 2;
    else if (t > 1.02 && t <= 2.0) g = 6;
    s.intervals.push_back({t, g, 0.01});
  }
  s.faults = {{1.0, "down t0 h0 p2", ""}, {2.0, "up t0 h0 p2", ""}};
  s.path_events = {{1.004, 0x20000, 2, "GOOD", "ASSUMED_BAD", "LOSS"},
                   {2.3, 0x20000, 2, "ASSUMED_BAD", "GOOD", "PROBE_CLEAN"}};
  return s;
}

TEST(Summarize, T0DownPhases) {
  const Series s = t0_down_series();
  const Summary sum = summarize(s);
  EXPECT_NEAR(sum.healthy_gbps, 8, 1e-9);
  ASSERT_EQ(sum.phases.size(), 3u);
  const PhaseSummary& down = sum.phases[1];
  EXPECT_EQ(down.fault, "down t0 h0 p2");
  EXPECT_NEAR(down.detect_ms, 4, 1e-6);
  EXPECT_NEAR(down.min_interval_gbps, 2, 1e-9);
  EXPECT_NEAR(down.min_100ms_gbps, (2 * 2 + 6 * 8) / 10.0, 1e-9);
  EXPECT_NEAR(down.at_50ms_gbps, 6, 1e-9);  // settled by 50 ms
  EXPECT_NEAR(sum.phases[2].min_100ms_gbps, 8, 1e-9);
  EXPECT_LT(sum.phases[2].detect_ms, 0);  // no EV went bad after "up"
  EXPECT_EQ(sum.longest_stall_ms, 0);
  EXPECT_NE(format_summary(s, sum).find("down t0 h0 p2"), std::string::npos);
}

TEST(Summarize, LongestStall) {
  Series s;
  for (int i = 1; i <= 200; ++i) s.intervals.push_back({i * 0.01, (i > 100 && i <= 107) ? 0.0 : 5.0, 0.01});
  EXPECT_NEAR(summarize(s).longest_stall_ms, 70, 1e-6);
}

// A trim fault whose ECN threshold is 0 is a fault, not a repair: its detect time is measured.
TEST(Summarize, TrimWithEcnZero_NotARepair) {
  Series s = t0_down_series();
  s.faults = {{1.0, "trim link h0 p2 1 64 0", ""}, {2.0, "untrim link h0 p2", ""}};
  const Summary sum = summarize(s);
  ASSERT_EQ(sum.phases.size(), 3u);
  EXPECT_NEAR(sum.phases[1].detect_ms, 4, 1e-6);
  EXPECT_LT(sum.phases[2].detect_ms, 0);
}

// A fault whose apply took 300 ms (a slow `tc` on a loaded host): the phase's goodput counts
// from when the apply returned, its detection time from when it began.
TEST(Summarize, SlowApply_PhaseCountsFromApplied) {
  Series s;
  s.name = "mrc";
  for (int i = 1; i <= 300; ++i) {
    const double t = i * 0.01;
    s.intervals.push_back({t, t > 1.3 && t <= 2.0 ? 1.0 : 8.0, 0.01});
  }
  s.faults = {{1.0, "degrade link h1 p0 0.1", "", 1.3}, {2.0, "degrade link h1 p0 0", ""}};
  s.path_events = {{1.35, 0x20000, 2, "GOOD", "DEGRADED", "DELAY"}};
  const Summary sum = summarize(s, 0);
  ASSERT_EQ(sum.phases.size(), 3u);
  EXPECT_NEAR(sum.phases[1].start_s, 1.0, 1e-9);
  EXPECT_NEAR(sum.phases[1].mean_gbps, 1.0, 1e-9);  // not (0.3 x 8 + 0.7 x 1) / 1.0
  EXPECT_NEAR(sum.phases[1].detect_ms, 350, 1e-6);
  EXPECT_NE(format_summary(s, sum).find("took 300 ms to apply"), std::string::npos);
}

// Rates that cancel in the running sum (0.1 + 0.2 - 0.3 ...) leave the idle window at 0, never
// at a negative rounding residue that would print as -0.00.
TEST(Summarize, IdleWindowAfterTraffic_NeverNegative) {
  Series s;
  const double rates[] = {0.1, 0.7, 0.3, 0.9, 0.2, 0.6};
  for (int i = 1; i <= 200; ++i) {
    s.intervals.push_back({i * 0.01, i > 120 && i <= 160 ? 0.0 : rates[i % 6], 0.01});
  }
  s.faults = {{1.0, "down t0 h0 p2", ""}};
  const Summary sum = summarize(s, 0);
  ASSERT_EQ(sum.phases.size(), 2u);
  EXPECT_EQ(sum.phases[1].min_100ms_gbps, 0.0);
  EXPECT_FALSE(std::signbit(sum.phases[1].min_100ms_gbps));
  EXPECT_EQ(sum.phases[1].min_interval_gbps, 0.0);
}

// A sampler that runs late takes uneven intervals; the means are still bytes / time.
TEST(Summarize, UnevenIntervals_MeanIsBytesOverTime) {
  Series s;
  double t = 0, bits = 0;
  for (int i = 0; i < 400; ++i) {
    const double dur = (i % 7 == 3) ? 0.031 : 0.0095 + 0.0001 * (i % 5);
    const double gbps = 6 + (i % 3);
    t += dur;
    bits += gbps * dur;
    s.intervals.push_back({t, gbps, dur});
  }
  const Summary sum = summarize(s, /*warmup_s=*/0);
  EXPECT_NEAR(sum.mean_gbps, bits / t, 1e-9);
  EXPECT_NEAR(sum.healthy_gbps, bits / t, 1e-9);
  ASSERT_EQ(sum.phases.size(), 1u);
  EXPECT_NEAR(sum.phases[0].mean_gbps, bits / t, 1e-9);
}

TEST(WriteCsv, ColumnsAndFaultMarks) {
  Series a = t0_down_series();
  Series b;
  b.name = "tcp";
  b.intervals = {{0.01, 1.5, 0.01}};
  const std::string path = testing::TempDir() + "report_test.csv";
  ASSERT_TRUE(write_csv(path, {a, b}).ok());
  std::ifstream in(path);
  std::string header, row1;
  std::getline(in, header);
  std::getline(in, row1);
  EXPECT_EQ(header, "mrc_t_s,mrc_gbps,tcp_t_s,tcp_gbps,fault");
  EXPECT_EQ(row1, "0.010,8.0000,0.010,1.5000,");
  std::stringstream all;
  all << in.rdbuf();
  EXPECT_NE(all.str().find("1.000,8.0000,,,down t0 h0 p2"), std::string::npos);
  EXPECT_FALSE(write_csv("/nonexistent/dir/x.csv", {a}).ok());
}

}  // namespace
}  // namespace mrc::perf
