// The soak run, short (CI's version of `mrc-perf --soak 30`): WRITE, SEND and READ QPs in both
// directions on a namespace fabric with trimming on, while random faults of every kind come
// and go one at a time for 25 s. Zero bytes lost, duplicated or corrupted, zero error
// completions (a path always stays), every fault applied, memory flat. Skips, saying why,
// where namespaces cannot be made; no namespace is left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "io/netns.h"
#include "ns_handle.h"
#include "ns_test_fabric.h"
#include "session.h"
#include "soak.h"

namespace mrc::perf {
namespace {

TEST(NsSoak, RandomFaultsEveryKind_NoErrorNoCorruptionFlatMemory) {
  if (auto ok = io::netns_supported(); !ok.ok()) GTEST_SKIP() << ok.error();
  auto up = make_test_fabric("mrcs", 2, /*gso=*/false);
  ASSERT_TRUE(up.ok()) << up.error();
  nsfabric::NsFabric fab = std::move(up).value();
  const std::string prefix = fab.options().prefix;

  SoakPlan plan;
  plan.duration_s = 25;
  plan.first_s = 1;
  plan.gap_min_s = 0.5;
  plan.gap_max_s = 1.5;
  plan.hold_min_s = 0.5;
  plan.hold_max_s = 1.5;
  plan.seed = 2026;
  SessionOptions o;
  o.faults = soak_schedule(fab.fabric(), 0, 1, plan);
  o.ops.assign(std::begin(kAllOps), std::end(kAllOps));  // every kind, a QP pair each
  o.qps = static_cast<uint32_t>(o.ops.size());
  o.bidirectional = true;
  o.trimming = true;
  o.msg_bytes = 256 << 10;
  o.duration_s = plan.duration_s;
  o.quiet = true;
  auto r = run_session(fabric_handle(fab), o);
  EXPECT_TRUE(fab.down().ok());
  EXPECT_EQ(namespaces_left(prefix), std::vector<std::string>{}) << "namespaces left behind";

  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->mrc.has_value());
  const MrcRunResult& m = *r->mrc;
  EXPECT_GE(o.faults.size(), 16u);
  for (const auto& f : m.faults) EXPECT_EQ(f.error, "") << f.fault;
  EXPECT_EQ(m.faults.size(), o.faults.size());
  EXPECT_EQ(m.mismatches, 0u);
  EXPECT_EQ(m.errors, 0u) << m.first_error;
  EXPECT_TRUE(r->data_ok) << r->first_error;
  EXPECT_GT(m.messages, 1000u);
#ifndef MRC_TEST_ASAN
  EXPECT_LT(m.rss_max_kib, m.rss_start_kib + 64 * 1024) << "memory grew";
#else
  std::printf("soak: VmRSS not checked under ASan (its quarantine grows it)\n");
#endif
  std::printf("soak: %lu messages, %.2f GB, %lu retransmits, RSS %lu -> %lu KiB, %zu faults\n",
              static_cast<unsigned long>(m.messages), static_cast<double>(m.bytes) / 1e9,
              static_cast<unsigned long>(m.retransmits),
              static_cast<unsigned long>(m.rss_start_kib),
              static_cast<unsigned long>(m.rss_max_kib), m.faults.size());
}

}  // namespace
}  // namespace mrc::perf
