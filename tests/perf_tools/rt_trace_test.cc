// Tests of tools/mrc-perf/rt_trace: per-round-trip records and the slow ones' causes.
#include "rt_trace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace mrc::perf {
namespace {

TEST(RoundTripBetween, DeltasOfEveryCounterAndTimeOffCpu) {
  RtSnapshot a, b;
  a.mono_ns = 1'000;
  b.mono_ns = 51'000;  // 50 us round trip
  a.thread_cpu_ns = 500;
  b.thread_cpu_ns = 20'500;  // 20 us on a CPU: 30 us off it
  a.tail_probes = 3;
  b.tail_probes = 4;
  b.rtos = 0;
  a.host[0].loop_iterations = 10;
  b.host[0].loop_iterations = 12;
  a.host[1].timeouts = 5;
  b.host[1].timeouts = 8;
  b.host[1].poller_timeouts = 1;  // 3 timeouts: 1 by a poller, 2 by the loop
  b.host[1].loop_woke_poller_end = 1;
  b.host[0].loop_rx_rounds = 1;
  const RoundTrip r = round_trip_between(a, b);
  EXPECT_EQ(r.ns, 50'000);
  EXPECT_EQ(r.off_cpu_ns, 30'000);
  EXPECT_EQ(r.tail_probes, 1u);
  EXPECT_EQ(r.rtos, 0u);
  EXPECT_EQ(r.host[0].loop_wakes, 2u);
  EXPECT_EQ(r.host[0].loop_rx, 1u);
  EXPECT_EQ(r.host[1].poller_timeouts, 1u);
  EXPECT_EQ(r.host[1].loop_timeouts, 2u);
  EXPECT_EQ(r.host[1].woke_poller_end, 1u);
}

TEST(RtCause, FirstThatHoldsInOrder) {
  RoundTrip r;
  r.ns = 100'000;
  const int64_t median = 20'000;  // 80 us beyond it
  EXPECT_EQ(rt_cause(r, median), RtCause::kNone);
  r.host[1].loop_wakes = 1;
  EXPECT_EQ(rt_cause(r, median), RtCause::kLoopWoke);
  r.host[0].loop_rx = 1;
  EXPECT_EQ(rt_cause(r, median), RtCause::kLoopRx);
  r.off_cpu_ns = 39'000;  // less than half the excess
  EXPECT_EQ(rt_cause(r, median), RtCause::kLoopRx);
  r.off_cpu_ns = 40'000;
  EXPECT_EQ(rt_cause(r, median), RtCause::kAppOffCpu);
  r.tail_probes = 1;
  EXPECT_EQ(rt_cause(r, median), RtCause::kTailProbe);
  r.rtos = 1;
  EXPECT_EQ(rt_cause(r, median), RtCause::kRto);
  // A round trip at the median is off CPU for no excess: not that bucket.
  RoundTrip fast;
  fast.ns = median;
  fast.off_cpu_ns = 5'000;
  EXPECT_EQ(rt_cause(fast, median), RtCause::kNone);
}

TEST(BucketRoundTrips, OnlyThoseAboveTheQuantileCount) {
  std::vector<RoundTrip> rts(100);
  for (size_t i = 0; i < rts.size(); ++i) rts[i].ns = static_cast<int64_t>(10'000 + i * 100);
  // The two slowest: one with a probe, one descheduled for most of its time.
  rts[99].ns = 200'000;
  rts[99].tail_probes = 1;
  rts[98].ns = 150'000;
  rts[98].off_cpu_ns = 120'000;
  rts[10].tail_probes = 1;  // a fast one with a probe: in "all" only
  static constexpr double kQ[] = {0, 0.98};
  const std::vector<RtBuckets> b = bucket_round_trips(rts, kQ);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].count, 100u);
  EXPECT_EQ(b[0].tlp, 2u);
  EXPECT_EQ(b[1].count, 1u);  // above the 98th of 100 (150 us): the 200 us one
  EXPECT_EQ(b[1].above_ns, 150'000);
  EXPECT_EQ(b[1].by_cause[static_cast<size_t>(RtCause::kTailProbe)], 1u);
  EXPECT_EQ(b[1].tlp, 1u);
  EXPECT_EQ(b[1].off_cpu, 0u);
  const std::vector<std::string> lines = format_buckets(b);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[2].find("> p98"), std::string::npos) << lines[2];
}

TEST(WriteRoundTrips, HeaderAndOneRowEachAndBadPathNamed) {
  const std::string path = ::testing::TempDir() + "rt_trace_test.csv";
  std::vector<RoundTrip> rts(3);
  rts[1].ns = 42;
  ASSERT_TRUE(write_round_trips(path, rts).ok());
  std::ifstream in(path);
  std::string line;
  int n = 0;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("ns,off_cpu_ns,tail_probes,rtos,h0_loop_wakes", 0), 0u) << line;
  while (std::getline(in, line)) ++n;
  EXPECT_EQ(n, 3);
  std::remove(path.c_str());
  auto bad = write_round_trips("/nonexistent-dir/x.csv", rts);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("/nonexistent-dir/x.csv"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace mrc::perf
