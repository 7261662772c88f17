// run_mrc over loopback (two planes on ::1, direct path mode): every operation, both
// directions, verified; several hosts by pairs; and the timed-fault parser.
#include "mrc_run.h"

#include <gtest/gtest.h>

namespace mrc::perf {
namespace {

MrcRunSpec loopback(Op op) {
  MrcRunSpec s;
  for (io::UdpConfig* c : {&s.client, &s.server}) {
    c->planes = {io::PlaneConfig{"::1", 0}, io::PlaneConfig{"::1", 0}};
  }
  s.op = op;
  s.msg_bytes = 256 << 10;
  s.duration_s = 0.5;
  return s;
}

class RunMrc : public ::testing::TestWithParam<Op> {};

TEST_P(RunMrc, Loopback_VerifiedAndMeasured) {
  MrcRunSpec s = loopback(GetParam());
  s.bidirectional = true;
  s.qps = 2;
  auto r = run_mrc(s);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->ok()) << r->first_error;
  EXPECT_GT(r->messages, 4u);
  EXPECT_EQ(r->mismatches, 0u);
  // 10 ms samples over 0.5 s: fewer when the machine (or a sanitizer) slows the sampler down,
  // which then skips ahead; in time order, the last one ending the sampled time (the tail is
  // sampled when the run's loop ends, however late a slow machine makes that), not all zero.
  ASSERT_FALSE(r->intervals.empty());
  double total = 0, last = 0;
  for (const Sample& i : r->intervals) {
    total += i.gbps;
    EXPECT_GT(i.t_s, last);
    last = i.t_s;
  }
  EXPECT_DOUBLE_EQ(last, r->sampled_s);
  EXPECT_GE(r->sampled_s, s.duration_s - 1e-3);  // the tail is not sampled under 0.1 ms
  EXPECT_GT(total, 0);
}

// The samples tile the run: their duration-weighted mean is exactly the bytes received while
// sampling over the time sampled, and within 1% of the verified messages' bytes over the run
// (which differ only by what was in flight at the end). Small messages keep that share small.
TEST(RunMrc, Samples_WeightedMeanIsBytesOverDuration) {
  MrcRunSpec s = loopback(Op::kWrite);
  s.msg_bytes = 16 << 10;
  s.duration_s = 1.5;
  auto r = run_mrc(s);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->ok()) << r->first_error;
  ASSERT_FALSE(r->intervals.empty());
  double bits = 0, secs = 0, prev = 0;
  for (const Sample& i : r->intervals) {
    EXPECT_NEAR(i.t_s - prev, i.dur_s, 1e-9) << "intervals must tile the run, t=" << i.t_s;
    prev = i.t_s;
    bits += i.gbps * 1e9 * i.dur_s;
    secs += i.dur_s;
  }
  EXPECT_NEAR(secs, r->sampled_s, 1e-9);
  EXPECT_NEAR(r->sampled_s, s.duration_s, 0.05);
  EXPECT_NEAR(bits / 8, static_cast<double>(r->sampled_bytes), 1e-6 * r->sampled_bytes + 1);
  ASSERT_GT(r->bytes, 0u);
  const double verified_gbps = r->bytes * 8.0 / r->sampled_s / 1e9;
  EXPECT_NEAR(bits / secs / 1e9, verified_gbps, 0.01 * verified_gbps);
}

INSTANTIATE_TEST_SUITE_P(Ops, RunMrc, ::testing::ValuesIn(kAllOps),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The soak's memory verdict: the least-squares slope of RSS over the chosen span, so a run that
// climbed at its start and then stayed flat reads ~0, and steady growth reads as its rate.
TEST(RssSlope, FlatAfterStartIsZero_SteadyGrowthIsItsRate) {
  std::vector<std::pair<double, uint64_t>> flat = {{0, 1000}, {1, 50000}, {2, 80000}};
  for (int t = 3; t <= 60; ++t) flat.emplace_back(t, 80000 + (t % 2) * 8);  // allocator noise
  EXPECT_NEAR(rss_slope_kib_per_min(flat, 30), 0, 10);
  EXPECT_GT(rss_slope_kib_per_min(flat, 0), 100);  // the climb, if counted, is not flat
  std::vector<std::pair<double, uint64_t>> leak;
  for (int t = 0; t <= 60; ++t) leak.emplace_back(t, 80000 + 100 * t);  // 100 KiB a second
  EXPECT_NEAR(rss_slope_kib_per_min(leak, 30), 6000, 1e-6);
  EXPECT_EQ(rss_slope_kib_per_min({}, 0), 0);
  EXPECT_EQ(rss_slope_kib_per_min(leak, 59.5), 0);  // fewer than 3 samples
}

TEST(ParseOp, EveryKindRoundTripsAndBadOnesAreNamed) {
  for (Op op : kAllOps) {
    auto r = parse_op(to_string(op));
    ASSERT_TRUE(r.ok()) << to_string(op);
    EXPECT_EQ(*r, op);
  }
  auto bad = parse_op("atomic");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("'atomic'"), std::string::npos) << bad.error();
}

TEST(RunMrc, Latency_OneInFlightMeasured) {
  MrcRunSpec s = loopback(Op::kWrite);
  s.msg_bytes = 8;
  s.outstanding = 1;
  s.spin = true;
  s.duration_s = 0.3;
  auto r = run_mrc(s);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->ok()) << r->first_error;
  EXPECT_GT(r->latency.samples, 10u);
  EXPECT_GT(r->latency.p50_us, 0);
  EXPECT_LE(r->latency.p50_us, r->latency.p99_us);
  EXPECT_LE(r->latency.p99_us, r->latency.max_us);
  // The polling thread received (poll_progress), not only the progress threads.
  EXPECT_GT(r->client_counters.poller_rounds + r->server_counters.poller_rounds, 0u);
  // Its own work is measured: its CPU time over the run (not above the run's length, with
  // the drain) and its polls of each host, each of which made a readiness check (two planes).
  EXPECT_GT(r->latency.poll_thread_cpu_ns, 0);
  EXPECT_LT(r->latency.poll_thread_cpu_ns, 5'000'000'000);
  for (const io::UdpCounters* c : {&r->client_counters, &r->server_counters}) {
    EXPECT_GT(c->poller_polls, 0u);
    EXPECT_GE(c->poller_ready_checks + c->poller_recvmmsg, c->poller_polls);
  }
}

TEST(RunMrc, Setup_ErrorsNameTheProblem) {
  MrcRunSpec s = loopback(Op::kWrite);
  s.outstanding = 0;
  auto r = run_mrc(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("outstanding"), std::string::npos);
  s = loopback(Op::kWrite);
  s.schedule.push_back({1.0, "down t1 p0 s0"});
  r = run_mrc(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("fabric"), std::string::npos);
  s = loopback(Op::kWrite);
  s.client.planes[0].address = "fd00::zz";
  r = run_mrc(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("client: "), std::string::npos) << r.error();
}

// Many hosts (MrcRunSpec::hosts and pairs): four drivers on loopback, every host to every
// other at once; every stream verified, and the per-host figures add up to what was sampled.
TEST(RunMrc, Hosts_AlltoallEveryHostSendsAndReceives) {
  MrcRunSpec s = loopback(Op::kWrite);
  s.hosts.assign(4, s.client);
  for (uint32_t a = 0; a < 4; ++a)
    for (uint32_t b = 0; b < 4; ++b)
      if (a != b) s.pairs.emplace_back(a, b);
  s.msg_bytes = 64 << 10;
  s.outstanding = 2;
  auto r = run_mrc(s);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->ok()) << r->first_error;
  EXPECT_GE(r->messages, 12u) << "fewer messages than streams";
  ASSERT_EQ(r->host_tx_bytes.size(), 4u);
  ASSERT_EQ(r->host_rx_bytes.size(), 4u);
  uint64_t tx = 0, rx = 0;
  for (uint32_t h = 0; h < 4; ++h) {
    EXPECT_GT(r->host_tx_bytes[h], 0u) << "host " << h << " sent nothing";
    EXPECT_GT(r->host_rx_bytes[h], 0u) << "host " << h << " received nothing";
    tx += r->host_tx_bytes[h];
    rx += r->host_rx_bytes[h];
  }
  EXPECT_EQ(tx, rx);
  // The sampled bytes (the engines' received payload counters) against the completions
  // counted apart: they differ by at most the messages still in flight when the run ended.
  const double in_flight = 12.0 * 2 * s.outstanding * s.msg_bytes;
  EXPECT_NEAR(static_cast<double>(r->sampled_bytes), static_cast<double>(r->bytes), in_flight);
}

// Incast by pairs: only host 0 receives, and only the others send (READ: host 0 pulls, so
// the bytes' source is the target of each pair).
TEST(RunMrc, Hosts_IncastOnlyTheReceiverReceives) {
  for (Op op : {Op::kWrite, Op::kRead}) {
    MrcRunSpec s = loopback(op);
    s.hosts.assign(3, s.client);
    s.pairs = op == Op::kRead ? std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}, {0, 2}}
                              : std::vector<std::pair<uint32_t, uint32_t>>{{1, 0}, {2, 0}};
    s.msg_bytes = 64 << 10;
    s.duration_s = 0.3;
    auto r = run_mrc(s);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_TRUE(r->ok()) << r->first_error;
    ASSERT_EQ(r->host_rx_bytes.size(), 3u);
    EXPECT_GT(r->host_rx_bytes[0], 0u) << to_string(op);
    EXPECT_EQ(r->host_tx_bytes[0], 0u) << to_string(op);
    for (uint32_t h : {1u, 2u}) {
      EXPECT_EQ(r->host_rx_bytes[h], 0u) << to_string(op) << " host " << h;
      EXPECT_GT(r->host_tx_bytes[h], 0u) << to_string(op) << " host " << h;
    }
  }
}

TEST(RunMrc, Hosts_BadPairsAreNamed) {
  MrcRunSpec s = loopback(Op::kWrite);
  s.hosts.assign(2, s.client);
  auto r = run_mrc(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("without pairs"), std::string::npos) << r.error();
  s.pairs = {{0, 2}};
  r = run_mrc(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("pair (0, 2)"), std::string::npos) << r.error();
  s.pairs = {{1, 1}};
  r = run_mrc(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("two different hosts"), std::string::npos) << r.error();
}

TEST(ParseTimedFault, UnitsAndErrors) {
  auto a = parse_timed_fault("5s down t0 h0 p2");
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_DOUBLE_EQ(a->t_s, 5.0);
  EXPECT_EQ(a->fault, "down t0 h0 p2");
  auto b = parse_timed_fault("250ms  up t1 p0 s1");
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_DOUBLE_EQ(b->t_s, 0.25);
  EXPECT_EQ(b->fault, "up t1 p0 s1");
  EXPECT_FALSE(parse_timed_fault("5 down t0 h0 p2").ok());
  EXPECT_FALSE(parse_timed_fault("xs down").ok());
  EXPECT_FALSE(parse_timed_fault("5s").ok());
  EXPECT_NE(parse_timed_fault("-1s up x").error().find(">= 0"), std::string::npos);
}

}  // namespace
}  // namespace mrc::perf
