// Blackholed paths on the simulated network: some paths lost -> the transfer
// still completes intact; every path lost -> error completions within the
// retry budget, never a hang.
#include <gtest/gtest.h>

#include <vector>

#include "mrc/testing/testbed.h"

namespace mrc {
namespace {

using namespace engine;
using namespace std::chrono_literals;

class Blackhole : public ::testing::Test {
 protected:
  sim::Testbed tb{sim::SimConfig{7}};
  PeerId a = tb.add_host();
  PeerId b = tb.add_host();
  std::vector<sim::SimNet::PathLinks> links;
  sim::Testbed::QpPair qp;
  std::vector<uint8_t> src = std::vector<uint8_t>(8 << 20), dst = std::vector<uint8_t>(8 << 20);
  uint32_t skey = 0, dkey = 0;

  void SetUp() override {
    std::vector<Path> paths;
    for (uint16_t i = 0; i < 4; ++i) {
      sim::LinkConfig lc;
      lc.latency = 5us;
      lc.rate_bps = 25'000'000'000ull;
      lc.capacity_bytes = 4 << 20;
      links.push_back(tb.net().add_path(a, b, i, lc));
      paths.push_back(Path{i, i});
    }
    QpAttr at;
    at.timeout = 10;  // 1.048576 ms
    at.retry_cnt_linear = 3;
    at.retry_cnt_exp = 2;
    qp = tb.connect(a, b, paths, at);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
    skey = tb.register_mr(a, src);
    dkey = tb.register_mr(b, dst);
  }
  void write(uint64_t id, uint64_t off, uint32_t len) {
    Sge s{reinterpret_cast<uint64_t>(src.data()) + off, len, skey};
    SendWr wr;
    wr.wr_id = id;
    wr.sg = {&s, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + off;
    wr.rkey = dkey;
    ASSERT_TRUE(tb.engine(a).post_send(qp.a, wr).ok());
    tb.net().wake(a);
  }
  std::vector<Completion> poll() {
    std::vector<Completion> out(64);
    out.resize(tb.engine(a).poll_cq(tb.cq(a), out));
    return out;
  }
};

TEST_F(Blackhole, SomePaths_TransferCompletesIntact) {
  tb.net().set_blackhole(links[1].forward, true);
  tb.net().set_blackhole(links[3].reverse, true);  // ACKs on this path vanish
  write(1, 0, 8 << 20);
  std::vector<Completion> c;
  ASSERT_TRUE(tb.net().run_until([&] { return !(c = poll()).empty(); }, tb.net().now() + 10s));
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(tb.engine(a).qp_stats(qp.a)->rto_fired, 0u);  // found from SACKs, not timeouts
}

TEST_F(Blackhole, AllPaths_ErrorCompletionsWithinRetryBudget) {
  write(1, 0, 1 << 20);
  tb.net().run_for(1ms);  // this one gets through
  for (auto& l : links) tb.net().set_blackhole(l.forward, true);
  const Time fault = tb.net().now();
  write(2, 1 << 20, 1 << 20);
  write(3, 2 << 20, 100);
  std::vector<Completion> got;
  ASSERT_TRUE(tb.net().run_until(
      [&] {
        for (auto& c : poll()) got.push_back(c);
        return got.size() >= 3;
      },
      fault + 60s));
  // Budget: 3 linear timeouts at 1.05 ms, then 2 doubling (2.1, 4.2 ms), failing on the 6th.
  const Duration budget = 1048576ns * (1 + 3 + 2 + 4 + 8);
  EXPECT_LE(tb.net().now() - fault, budget);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[1].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(got[2].wr_id, 3u);
  EXPECT_EQ(got[2].status, WcStatus::kWrFlushErr);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + (1 << 20), dst.begin()));
  EXPECT_EQ(tb.engine(a).query_qp(qp.a)->state, QpState::kError);
  std::optional<Event> fatal;
  uint32_t bad = 0, drained = 0;
  while (auto e = tb.engine(a).poll_event()) {
    if (e->type == EventType::kQpFatal) fatal = e;
    if (e->type != EventType::kEvState) continue;
    if (e->reason == uint8_t(EvReason::kPlaneDrained))
      ++drained;
    else if (e->to == uint8_t(EvState::kAssumedBad))
      ++bad;
  }
  EXPECT_EQ(drained, 4u);  // one EV per plane here
  ASSERT_TRUE(fatal.has_value());
  EXPECT_EQ(fatal->cause, WcStatus::kRetryExcErr);
  EXPECT_EQ(bad, 4u);  // every path was declared bad on the way
}

TEST_F(Blackhole, AllPathsForever_Retry25KeepsTryingThenRecovers) {
  QpAttr at;
  at.retry_cnt_linear = 7;
  at.retry_cnt_exp = kRetryForever;
  ASSERT_TRUE(tb.engine(a).modify_qp(qp.a, at, attr::kRetry).ok());
  for (auto& l : links) tb.net().set_blackhole(l.forward, true);
  write(1, 0, 1 << 20);
  tb.net().run_for(2s);
  EXPECT_TRUE(poll().empty());
  EXPECT_EQ(tb.engine(a).query_qp(qp.a)->state, QpState::kRts);
  for (auto& l : links) tb.net().set_blackhole(l.forward, false);
  std::vector<Completion> c;
  ASSERT_TRUE(tb.net().run_until([&] { return !(c = poll()).empty(); }, tb.net().now() + 60s));
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + (1 << 20), dst.begin()));
}

}  // namespace
}  // namespace mrc
