// RecvState: the ring of pending in-order actions, indexed by PSN, grows to cover the
// farthest PSN ahead and keeps every pending action at its PSN.
#include "engine/recv_state.h"

#include <gtest/gtest.h>

namespace mrc::engine {
namespace {

TEST(RecvState, GrowActs_CoversThePsnAhead) {
  RecvState r;
  r.grow_acts(0);
  EXPECT_EQ(r.acts.size(), 16u);
  r.grow_acts(100);  // doubles past 100: 128 slots
  EXPECT_EQ(r.acts.size(), 128u);
}

TEST(RecvState, GrowActs_KeepsPendingActionsAtTheirPsns) {
  RecvState r;
  r.grow_acts(0);
  const uint32_t base = UINT32_MAX - 3;  // PSNs wrap
  for (uint32_t k = 0; k < 16; k += 5) {
    Action& a = r.act(base + k);
    a.kind = Action::kRecv;
    a.psn = base + k;
    a.msn = k;
  }
  r.grow_acts(40);
  ASSERT_EQ(r.acts.size(), 64u);
  size_t pending = 0;
  for (const Action& a : r.acts) pending += a.kind != Action::kNone;
  EXPECT_EQ(pending, 4u);
  for (uint32_t k = 0; k < 16; k += 5) {
    EXPECT_EQ(r.act(base + k).kind, Action::kRecv);
    EXPECT_EQ(r.act(base + k).msn, k);
  }
}

}  // namespace
}  // namespace mrc::engine
