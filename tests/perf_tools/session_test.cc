// The pattern side of session.h without namespaces: the words, the flows of each pattern, the
// ideal goodput of the host ports, the default port rate, and the errors.
#include "session.h"

#include <gtest/gtest.h>

#include <set>

namespace mrc::perf {
namespace {

srv6::Fabric fabric(uint32_t hosts, uint32_t planes, uint32_t per_t0) {
  srv6::FabricConfig c;
  c.hosts = hosts;
  c.planes = planes;
  c.spines = 2;
  c.hosts_per_t0 = per_t0;
  auto f = srv6::Fabric::make(c);
  EXPECT_TRUE(f.ok()) << f.error();
  return std::move(f).value();
}

TEST(ParsePattern, TheThreeWordsAndBadOnesAreNamed) {
  for (const char* w : {"alltoall", "permutation", "incast"}) {
    auto p = parse_pattern(w);
    ASSERT_TRUE(p.ok()) << w;
    EXPECT_STREQ(msim::to_string(*p), w);
  }
  for (const char* w : {"foo", "ring-allreduce", ""}) {
    auto p = parse_pattern(w);
    ASSERT_FALSE(p.ok()) << w;
    EXPECT_NE(p.error().find("'" + std::string(w) + "'"), std::string::npos) << p.error();
    EXPECT_NE(p.error().find("alltoall, permutation or incast"), std::string::npos);
  }
}

TEST(PlanPattern, AlltoallEveryOrderedPairOnceIdealEveryPort) {
  const srv6::Fabric f = fabric(8, 2, 2);
  auto p = plan_pattern(f, {msim::Pattern::kAlltoall, 8, 1}, 0.25);
  ASSERT_TRUE(p.ok()) << p.error();
  const std::set<std::pair<uint32_t, uint32_t>> pairs(p->pairs.begin(), p->pairs.end());
  EXPECT_EQ(p->pairs.size(), 56u);
  EXPECT_EQ(pairs.size(), 56u);
  for (const auto& [a, b] : pairs) EXPECT_NE(a, b);
  // Every host sends and receives at its 2 ports' rate: 8 x 2 x 0.25 Gbit/s.
  EXPECT_NEAR(p->ideal_gbps, 4.0, 1e-9);
}

TEST(PlanPattern, PermutationIsASeededDerangement) {
  const srv6::Fabric f = fabric(8, 2, 2);
  auto a = plan_pattern(f, {msim::Pattern::kPermutation, 6, 7}, 1);
  auto b = plan_pattern(f, {msim::Pattern::kPermutation, 6, 7}, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->pairs, b->pairs);
  ASSERT_EQ(a->pairs.size(), 6u);
  std::set<uint32_t> src, dst;
  for (const auto& [s, d] : a->pairs) {
    EXPECT_NE(s, d);
    EXPECT_LT(d, 6u);
    src.insert(s);
    dst.insert(d);
  }
  EXPECT_EQ(src.size(), 6u);
  EXPECT_EQ(dst.size(), 6u);
  EXPECT_NEAR(a->ideal_gbps, 6 * 2 * 1.0, 1e-9);
}

TEST(PlanPattern, IncastToHostZeroIdealIsItsPorts) {
  const srv6::Fabric f = fabric(4, 2, 2);
  auto p = plan_pattern(f, {msim::Pattern::kIncast, 4, 1}, 0.5);
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->pairs.size(), 3u);
  for (const auto& [s, d] : p->pairs) {
    EXPECT_EQ(d, 0u);
    EXPECT_NE(s, 0u);
  }
  EXPECT_NEAR(p->ideal_gbps, 2 * 0.5, 1e-9);
  // Unshaped ports: no ideal.
  auto u = plan_pattern(f, {msim::Pattern::kIncast, 4, 1}, 0);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->ideal_gbps, 0);
}

TEST(PlanPattern, TooFewOrTooManyHostsAreNamed) {
  const srv6::Fabric f = fabric(4, 2, 2);
  auto one = plan_pattern(f, {msim::Pattern::kAlltoall, 1, 1}, 1);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().find("at least 2 hosts"), std::string::npos) << one.error();
  auto many = plan_pattern(f, {msim::Pattern::kAlltoall, 8, 1}, 1);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.error().find("8 hosts"), std::string::npos) << many.error();
  EXPECT_NE(many.error().find("has 4"), std::string::npos) << many.error();
}

TEST(PatternPortGbps, AllPortsAddUpToTheBudgetAtMostTwoEach) {
  EXPECT_NEAR(pattern_port_gbps(8, 2) * 8 * 2, kPatternBudgetGbps, 1e-12);
  EXPECT_NEAR(pattern_port_gbps(4, 4) * 4 * 4, kPatternBudgetGbps, 1e-12);
  EXPECT_LE(pattern_port_gbps(2, 1), 2.0);
}

TEST(FormatHosts, EveryHostTheTotalAndTheEfficiency) {
  HostsSummary h;
  h.pattern = "incast";
  h.pairs = {{1, 0}, {2, 0}};
  h.tx_gbps = {0, 0.45, 0.45};
  h.rx_gbps = {0.9, 0, 0};
  h.total_gbps = 0.9;
  h.ideal_gbps = 1.0;
  const std::string s = format_hosts(h, 0.95);
  EXPECT_NE(s.find("incast between 3 hosts, 2 flows"), std::string::npos) << s;
  EXPECT_NE(s.find("host 2"), std::string::npos) << s;
  EXPECT_NE(s.find("efficiency 0.900 (healthy 0.950)"), std::string::npos) << s;
  h.ideal_gbps = 0;
  EXPECT_NE(format_hosts(h, 0.95).find("no ideal"), std::string::npos);
}

}  // namespace
}  // namespace mrc::perf
