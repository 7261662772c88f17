// Timers: one slot per kind, next() is the minimum.
#include "engine/timers.h"

#include <gtest/gtest.h>

namespace mrc::engine {
namespace {

TEST(Timers, Next_IsEarliestSet) {
  Timers t;
  EXPECT_EQ(t.next(), kNever);
  t.set(Timer::kRto, Time{500});
  t.set(Timer::kAck, Time{200});
  EXPECT_EQ(t.next(), Time{200});
  t.cancel(Timer::kAck);
  EXPECT_EQ(t.next(), Time{500});
  EXPECT_TRUE(t.expired(Timer::kRto, Time{500}));
  EXPECT_FALSE(t.expired(Timer::kRto, Time{499}));
  t.cancel_all();
  EXPECT_EQ(t.next(), kNever);
}

}  // namespace
}  // namespace mrc::engine
