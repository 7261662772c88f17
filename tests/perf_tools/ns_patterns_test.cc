// Traffic patterns between several hosts of a namespace fabric (session.h PatternOptions,
// mrc-perf --pattern): 4 hosts, 2 under each T0, 2 planes x 2 spines, 0.25 Gbit/s ports.
// Every host runs its own driver; every byte is verified and every host's goodput reported.
// And mrc-perf's errors for bad pattern arguments. Skips (saying why) where namespaces cannot
// be made; the argument checks that need no fabric run everywhere.
#include <gtest/gtest.h>

#include <optional>

#include "mrc/common/netns.h"
#include "ns_handle.h"
#include "ns_test_fabric.h"
#include "run_cli.h"

namespace mrc::perf {
namespace {

using mrcctl::testing::run_program;

class NsPatterns : public NsFabricSuite<NsPatterns> {
 public:
  static constexpr uint32_t kHosts = 4;
  static constexpr double kPortGbps = 0.25;
  static constexpr TestFabricSpec kFabric{"mrcq", kHosts, /*gso=*/true, /*hosts_per_t0=*/2,
                                          kPortGbps};

 protected:
  // A 2 s WRITE run of `p` between all 4 hosts, checked: every byte verified, no error, one
  // figure per host that adds up to the total.
  static SessionResult run(msim::Pattern p, std::vector<Baseline> baselines = {}) {
    SessionOptions o;
    o.pattern = PatternOptions{p, kHosts, 1};
    o.baselines = std::move(baselines);
    o.msg_bytes = 64 << 10;
    o.outstanding = 4;
    o.duration_s = 2;
    o.quiet = true;
    auto r = run_session(fabric_handle(*fab_), o);
    EXPECT_TRUE(r.ok()) << r.error();
    if (!r.ok()) return {};
    SessionResult s = std::move(r).value();
    EXPECT_TRUE(s.data_ok) << s.first_error;
    EXPECT_TRUE(s.mrc.has_value() && s.hosts.has_value());
    if (!s.mrc || !s.hosts) return s;
    EXPECT_EQ(s.mrc->mismatches, 0u);
    EXPECT_EQ(s.mrc->errors, 0u) << s.mrc->first_error;
    EXPECT_GE(s.mrc->messages, s.hosts->pairs.size()) << "some flow hardly moved";
    EXPECT_EQ(s.hosts->tx_gbps.size(), kHosts);
    EXPECT_EQ(s.hosts->rx_gbps.size(), kHosts);
    double tx = 0, rx = 0;
    for (uint32_t h = 0; h < kHosts; ++h) tx += s.hosts->tx_gbps[h], rx += s.hosts->rx_gbps[h];
    EXPECT_NEAR(tx, rx, 1e-9 * (tx + rx));
    EXPECT_GT(s.hosts->total_gbps, 0);
    // The sampled bytes (engine counters) against the verified completions counted apart:
    // apart by at most what was in flight when the run ended.
    const double in_flight =
        static_cast<double>(s.hosts->pairs.size()) * 2 * o.outstanding * o.msg_bytes;
    EXPECT_NEAR(static_cast<double>(s.mrc->sampled_bytes), static_cast<double>(s.mrc->bytes),
                in_flight);
    return s;
  }
};

TEST_F(NsPatterns, Alltoall_EveryHostSendsAndReceivesVerified) {
  const SessionResult s = run(msim::Pattern::kAlltoall);
  ASSERT_TRUE(s.hosts.has_value());
  EXPECT_EQ(s.hosts->pairs.size(), kHosts * (kHosts - 1));
  for (uint32_t h = 0; h < kHosts; ++h) {
    EXPECT_GT(s.hosts->tx_gbps[h], 0) << "host " << h << " sent nothing";
    EXPECT_GT(s.hosts->rx_gbps[h], 0) << "host " << h << " received nothing";
  }
  EXPECT_NEAR(s.hosts->ideal_gbps, kHosts * 2 * kPortGbps, 1e-9);  // every host's 2 ports
}

TEST_F(NsPatterns, Incast_OnlyHostZeroReceivesVerified) {
  const SessionResult s = run(msim::Pattern::kIncast);
  ASSERT_TRUE(s.hosts.has_value());
  EXPECT_EQ(s.hosts->pairs.size(), kHosts - 1);
  EXPECT_GT(s.hosts->rx_gbps[0], 0);
  EXPECT_EQ(s.hosts->tx_gbps[0], 0);
  for (uint32_t h = 1; h < kHosts; ++h) {
    EXPECT_GT(s.hosts->tx_gbps[h], 0) << "sender " << h << " sent nothing";
    EXPECT_EQ(s.hosts->rx_gbps[h], 0) << "host " << h;
  }
  EXPECT_NEAR(s.hosts->ideal_gbps, 2 * kPortGbps, 1e-9);  // the receiver's 2 ports
}

// --baseline tcp with a pattern: an iperf3 per flow at once, summed into one series, with its
// own per-host figures.
TEST_F(NsPatterns, TcpBaseline_AnIperf3PerFlow) {
  const SessionResult s = run(msim::Pattern::kIncast, {Baseline::kTcp});
  ASSERT_EQ(s.series.size(), 2u);
  EXPECT_EQ(s.series[1].name, "tcp");
  EXPECT_FALSE(s.series[1].intervals.empty());
  ASSERT_EQ(s.baseline_hosts.size(), 1u);
  const HostsSummary& tcp = s.baseline_hosts[0];
  EXPECT_EQ(tcp.pairs.size(), kHosts - 1);
  ASSERT_EQ(tcp.rx_gbps.size(), kHosts);
  EXPECT_GT(tcp.rx_gbps[0], 0);
  for (uint32_t h = 1; h < kHosts; ++h) {
    EXPECT_GT(tcp.tx_gbps[h], 0) << "tcp sender " << h;
    EXPECT_EQ(tcp.rx_gbps[h], 0) << "host " << h;
  }
  EXPECT_NEAR(tcp.total_gbps, tcp.rx_gbps[0], 1e-9);
}

TEST_F(NsPatterns, Cli_MoreHostsThanTheFabricIsNamed) {
  const std::string prefix = fab_->options().prefix;
  auto r =
      run_program(MRC_PERF_PATH, {"--prefix", prefix, "--pattern", "alltoall", "--hosts", "8"});
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--hosts 8: the fabric " + prefix + " has only 4 hosts"), std::string::npos)
      << r.err;
}

// No fabric needed: refused before anything is built.
TEST(MrcPerfCli, BadPatternArgumentsAreNamed) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const Case cases[] = {
      {{"--planes", "2", "--pattern", "alltoall", "--hosts", "1"},
       "--hosts must be at least 2, got 1"},
      {{"--planes", "2", "--pattern", "foo"},
       "pattern must be alltoall, permutation or incast, got 'foo'"},
      {{"--planes", "2", "--pattern", "incast", "--baseline", "mptcp"},
       "--baseline mptcp: with --pattern only the tcp baseline runs (an iperf3 per flow)"},
      {{"--planes", "2", "--pattern", "incast", "--client", "1"}, "--client does not go with it"},
      {{"--planes", "2", "--pattern", "alltoall", "--bidir"}, "--bidir does not go with it"},
  };
  for (const Case& c : cases) {
    auto r = run_program(MRC_PERF_PATH, c.args);
    EXPECT_EQ(r.rc, 2) << c.says << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace mrc::perf
