// Tests of io/udp/poller_hold.h: the grace a poll gives, from the pollers' rhythm.
#include "io/udp/poller_hold.h"

#include <gtest/gtest.h>

namespace mrc::io {
namespace {

// A poller that polls back to back keeps the least grace.
TEST(PollerHold, TightPolling_KeepsTheLeastGrace) {
  PollerHold h;
  int64_t t = 1'000'000;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(h.on_poll_start(t), t + PollerHold::kMinGrace);
    t += 200;
    h.on_poll_end(t);
    t += 300;  // 0.3 us to the next poll
  }
  EXPECT_EQ(h.grace(), PollerHold::kMinGrace);
}

// mrc-perf --latency's rhythm: every other gap holds a post whose send crosses the fabric in
// the poller's softirq (~9 us) and the other host's turn: the grace grows past those gaps, so
// the loop keeps away (with kMinGrace alone it took the sockets back about once a round trip).
TEST(PollerHold, GapsOfItsOwnSends_GraceOutlastsThem) {
  PollerHold h;
  int64_t t = 1'000'000;
  for (int i = 0; i < 200; ++i) {
    h.on_poll_start(t);
    t += 1'000;
    h.on_poll_end(t);
    t += i % 2 == 0 ? 14'000 : 1'000;  // 14 us with a post between, 1 us without
  }
  EXPECT_GT(h.grace(), 14'000);
  EXPECT_LE(h.grace(), PollerHold::kMaxGrace);
}

// A poller that lost its core for milliseconds counts as kMaxGrace, and the grace comes back
// down once it polls tightly again; the grace never passes kMaxGrace.
TEST(PollerHold, LongPause_CappedAndForgotten) {
  PollerHold h;
  int64_t t = 1'000'000;
  h.on_poll_start(t);
  h.on_poll_end(t += 1'000);
  for (int i = 0; i < 50; ++i) {  // 5 ms away each time
    h.on_poll_start(t += 5'000'000);
    h.on_poll_end(t += 1'000);
  }
  EXPECT_EQ(h.grace(), PollerHold::kMaxGrace);
  for (int i = 0; i < 100; ++i) {
    h.on_poll_start(t += 300);
    h.on_poll_end(t += 200);
  }
  EXPECT_EQ(h.grace(), PollerHold::kMinGrace);
}

// The hold runs from the end of a poll too, and a first poll has no gap to learn from.
TEST(PollerHold, EndExtendsTheHold) {
  PollerHold h;
  EXPECT_EQ(h.on_poll_start(5'000), 5'000 + PollerHold::kMinGrace);
  EXPECT_EQ(h.smoothed_gap(), 0);
  EXPECT_EQ(h.on_poll_end(25'000), 25'000 + PollerHold::kMinGrace);
}

}  // namespace
}  // namespace mrc::io
