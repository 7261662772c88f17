// Tests of tools/mrc-sim/pattern.h: the flows and messages of each pattern, and the ideal time.
#include "pattern.h"

#include <gtest/gtest.h>

#include <set>

namespace mrc::msim {
namespace {

WorkloadSpec spec(Pattern p, uint32_t hosts, uint64_t bytes) {
  WorkloadSpec s;
  s.pattern = p;
  s.hosts = hosts;
  s.bytes = bytes;
  return s;
}

TEST(Derangement, NoFixedPointAndAPermutation) {
  for (uint32_t n : {2u, 3u, 17u, 1024u}) {
    for (uint64_t seed : {1ull, 2ull, 99ull}) {
      const auto p = derangement(n, seed);
      std::set<uint32_t> seen(p.begin(), p.end());
      EXPECT_EQ(seen.size(), n);
      for (uint32_t i = 0; i < n; ++i) EXPECT_NE(p[i], i);
    }
  }
}

TEST(Derangement, SameSeedSameResultOtherSeedOther) {
  EXPECT_EQ(derangement(64, 7), derangement(64, 7));
  EXPECT_NE(derangement(64, 7), derangement(64, 8));
}

TEST(MakeWorkload, PermutationEveryHostSendsAndReceivesOnce) {
  auto w = make_workload(spec(Pattern::kPermutation, 32, 3 << 20)).value();
  ASSERT_EQ(w.flows.size(), 32u);
  std::set<uint32_t> src, dst;
  for (const Flow& f : w.flows) src.insert(f.src), dst.insert(f.dst);
  EXPECT_EQ(src.size(), 32u);
  EXPECT_EQ(dst.size(), 32u);
  EXPECT_EQ(w.messages.size(), 3u * 32);  // 3 MiB in 1 MiB messages
  EXPECT_EQ(w.total_bytes(), 32ull * (3 << 20));
}

TEST(MakeWorkload, AlltoallEveryOrderedPair) {
  WorkloadSpec s = spec(Pattern::kAlltoall, 5, 1000);
  s.msg_bytes = 300;
  auto w = make_workload(s).value();
  EXPECT_EQ(w.flows.size(), 20u);
  EXPECT_EQ(w.messages.size(), 20u * 4);  // 300, 300, 300, 100
  EXPECT_EQ(w.messages[3].bytes, 100u);
}

TEST(MakeWorkload, RingAllreduceGatesEachSliceOnThePreviousStep) {
  WorkloadSpec s = spec(Pattern::kRingAllreduce, 4, 4 * 2 * 1000);
  s.slices = 2;
  auto w = make_workload(s).value();
  ASSERT_EQ(w.flows.size(), 4u);
  const uint64_t steps = 2 * 3;
  ASSERT_EQ(w.messages.size(), 4 * steps * 2);
  for (uint64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(w.flows[r].dst, (r + 1) % 4);
    for (uint64_t k = 0; k < steps; ++k) {
      for (uint64_t j = 0; j < 2; ++j) {
        const Message& m = w.messages[(r * steps + k) * 2 + j];
        EXPECT_EQ(m.flow, r);
        EXPECT_EQ(m.bytes, 1000u);
        if (k == 0) {
          EXPECT_EQ(m.after, -1);
        } else {
          // Slice j of step k-1 sent by r-1 (to r).
          const Message& g = w.messages[static_cast<size_t>(m.after)];
          EXPECT_EQ(w.flows[g.flow].dst, r);
          EXPECT_EQ(static_cast<uint64_t>(m.after), (((r + 3) % 4) * steps + k - 1) * 2 + j);
        }
      }
    }
  }
}

TEST(MakeWorkload, IncastSendersDistinctAndNotTheReceiver) {
  WorkloadSpec s = spec(Pattern::kIncast, 16, 1000);
  s.incast_senders = 7;
  auto w = make_workload(s).value();
  ASSERT_EQ(w.flows.size(), 7u);
  std::set<uint32_t> src;
  for (const Flow& f : w.flows) {
    EXPECT_EQ(f.dst, 0u);
    EXPECT_NE(f.src, 0u);
    src.insert(f.src);
  }
  EXPECT_EQ(src.size(), 7u);
}

TEST(MakeWorkload, BadSpecsNameTheProblem) {
  EXPECT_NE(make_workload(spec(Pattern::kPermutation, 1, 100)).error().find("2 hosts"),
            std::string::npos);
  EXPECT_NE(make_workload(spec(Pattern::kPermutation, 4, 0)).error().find("--bytes"),
            std::string::npos);
  EXPECT_NE(make_workload(spec(Pattern::kRingAllreduce, 8, 10)).error().find("hosts x slices"),
            std::string::npos);
  WorkloadSpec s = spec(Pattern::kIncast, 4, 100);
  s.incast_senders = 4;
  EXPECT_NE(make_workload(s).error().find("--incast-senders"), std::string::npos);
}

TEST(IdealSeconds, PermutationIsBytesOverTheHostPorts) {
  auto w = make_workload(spec(Pattern::kPermutation, 16, 1 << 20)).value();
  const Capacity c{4, 8, 8, 10'000'000'000, 10'000'000'000};
  EXPECT_DOUBLE_EQ(ideal_seconds(w, c), (1 << 20) * 8.0 / 40e9);
}

TEST(IdealSeconds, OversubscribedUplinksAreTheCut) {
  // 8 hosts per T0 but 2 spines: uplinks carry 1/4 of what the hosts can send.
  auto w = make_workload(spec(Pattern::kAlltoall, 16, 1000)).value();
  const Capacity c{1, 2, 8, 10'000'000'000, 10'000'000'000};
  // Each T0 sends 8 hosts x 8 remote peers x 1000 bytes over 2 uplinks.
  EXPECT_DOUBLE_EQ(ideal_seconds(w, c), 64 * 1000 * 8.0 / 20e9);
}

TEST(IdealSeconds, RingAllreduceIsTwiceTheBufferScaled) {
  WorkloadSpec s = spec(Pattern::kRingAllreduce, 8, 8 << 20);
  auto w = make_workload(s).value();
  const Capacity c{4, 8, 8, 10'000'000'000, 10'000'000'000};
  EXPECT_NEAR(ideal_seconds(w, c), 2.0 * 7 / 8 * (8 << 20) * 8 / 40e9, 1e-12);
}

}  // namespace
}  // namespace mrc::msim
