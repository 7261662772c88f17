// RecvScoreboard: marking, advancing, windows, wrap-around, SACK bitmaps.
#include "engine/sack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace mrc::engine {
namespace {

std::vector<uint32_t> advance(RecvScoreboard& sb) {
  std::vector<uint32_t> passed;
  sb.advance([&](uint32_t p) { passed.push_back(p); });
  return passed;
}

TEST(Scoreboard, InOrderAdvancesOneByOne) {
  RecvScoreboard sb;
  sb.reset(10, 64);
  EXPECT_EQ(sb.mark(10), RecvScoreboard::Mark::kNew);
  EXPECT_EQ(advance(sb), std::vector<uint32_t>{10});
  EXPECT_EQ(sb.cum(), 11u);
  EXPECT_FALSE(sb.has_holes());
}

TEST(Scoreboard, HoleHoldsCumUntilFilled) {
  RecvScoreboard sb;
  sb.reset(0, 64);
  (void)sb.mark(1);
  (void)sb.mark(2);
  EXPECT_TRUE(advance(sb).empty());
  EXPECT_TRUE(sb.has_holes());
  (void)sb.mark(0);
  EXPECT_EQ(advance(sb), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(sb.cum(), 3u);
  EXPECT_FALSE(sb.has_holes());
}

TEST(Scoreboard, DuplicateAndOutOfWindow) {
  RecvScoreboard sb;
  sb.reset(100, 64);
  EXPECT_EQ(sb.mark(105), RecvScoreboard::Mark::kNew);
  EXPECT_EQ(sb.mark(105), RecvScoreboard::Mark::kDuplicate);
  EXPECT_EQ(sb.mark(99), RecvScoreboard::Mark::kDuplicate);
  EXPECT_EQ(sb.mark(163), RecvScoreboard::Mark::kNew);
  EXPECT_EQ(sb.mark(164), RecvScoreboard::Mark::kOutOfWindow);
  EXPECT_TRUE(sb.received(99));
  EXPECT_FALSE(sb.received(164));
}

TEST(Scoreboard, HoleAfterWrap) {
  RecvScoreboard sb;
  sb.reset(0xFFFFFFF0u, 128);
  for (uint32_t i = 0; i < 40; ++i)
    if (i != 20) (void)sb.mark(0xFFFFFFF0u + i);
  EXPECT_EQ(advance(sb).size(), 20u);
  EXPECT_EQ(sb.cum(), 0x4u);
  (void)sb.mark(0x4u);
  EXPECT_EQ(advance(sb).size(), 20u);
  EXPECT_EQ(sb.cum(), 0x18u);
}

TEST(Scoreboard, WindowSlotsReusedAfterAdvance) {
  RecvScoreboard sb;
  sb.reset(0, 64);
  for (uint32_t p = 0; p < 1000; ++p) {
    ASSERT_EQ(sb.mark(p), RecvScoreboard::Mark::kNew) << p;
    ASSERT_EQ(advance(sb).size(), 1u);
  }
  EXPECT_EQ(sb.cum(), 1000u);
}

TEST(Scoreboard, SackBitmapMatchesReceived) {
  RecvScoreboard sb;
  sb.reset(1000, 512);
  std::vector<uint32_t> got = {1001, 1003, 1064, 1127, 1128, 1200, 1255, 1256, 1400};
  for (uint32_t p : got) (void)sb.mark(p);
  for (uint32_t base : {990u, 1000u, 1001u, 1063u, 1150u, 1300u}) {
    auto bits = sb.sack(base);
    for (uint32_t i = 0; i < wire::kSackBits; ++i) {
      const bool set = (bits[i / 64] >> (i % 64)) & 1;
      EXPECT_EQ(set, sb.received(base + i)) << "base " << base << " bit " << i;
    }
  }
}

TEST(Scoreboard, SackBeyondWindowIsEmpty) {
  RecvScoreboard sb;
  sb.reset(0, 64);
  for (uint32_t p = 0; p < 64; ++p) (void)sb.mark(p);  // fills the whole window, cum still 0
  auto bits = sb.sack(32);
  EXPECT_EQ(bits[0], ~uint64_t{0} >> 32);  // PSNs 32..63 inside, 64..95 outside
  EXPECT_EQ(bits[1], 0u);
}

TEST(Scoreboard, RingGrowsOnDemandAndKeepsMarks) {
  RecvScoreboard sb;
  sb.reset(0xFFFFFF00u, 16384);
  EXPECT_EQ(sb.ring_bits(), 0u);  // nothing received: no bitmap
  EXPECT_FALSE(sb.received(0xFFFFFF05u));
  EXPECT_EQ(sb.sack(0xFFFFFF00u)[0], 0u);
  for (uint32_t p = 0xFFFFFF00u; p != 0xFFFFFF10u; ++p) (void)sb.mark(p);
  EXPECT_EQ(advance(sb).size(), 16u);
  EXPECT_EQ(sb.ring_bits(), 64u);  // in order: one word
  EXPECT_FALSE(sb.ring_allocated());  // inside the scoreboard
  // Holes, then PSNs ever farther ahead (across the 2^32 wrap): the ring doubles to
  // cover each, every earlier mark stays where its PSN says.
  const uint32_t cum = sb.cum();
  std::vector<uint32_t> got = {cum + 3, cum + 70, cum + 200, cum + 1000, cum + 5000, cum + 16383};
  for (uint32_t p : got) ASSERT_EQ(sb.mark(p), RecvScoreboard::Mark::kNew) << p - cum;
  EXPECT_EQ(sb.ring_bits(), 16384u);
  EXPECT_TRUE(sb.ring_allocated());
  EXPECT_EQ(sb.mark(cum + 16384), RecvScoreboard::Mark::kOutOfWindow);  // the window, not the ring
  for (uint32_t d = 0; d < 16384; ++d) {
    const bool want = std::find(got.begin(), got.end(), cum + d) != got.end();
    ASSERT_EQ(sb.received(cum + d), want) << d;
  }
  auto bits = sb.sack(cum);
  EXPECT_EQ(bits[0], uint64_t{1} << 3);
  EXPECT_EQ(bits[1], uint64_t{1} << 6);
  for (uint32_t p = cum; p != cum + 3; ++p) (void)sb.mark(p);
  EXPECT_EQ(advance(sb).size(), 4u);  // cum..cum+3
  EXPECT_EQ(sb.cum(), cum + 4);
}

// The 64-bit ring inside the scoreboard (RecvScoreboard::ring_allocated false) is a ring like
// the allocated ones: holes, SACK words read across its end, cum going round it many times
// across the 2^32 wrap, and the move to an allocated ring keeping every mark.
TEST(Scoreboard, InlineRingWrapsAndGrowsKeepingMarks) {
  RecvScoreboard sb;
  sb.reset(0xFFFFFFC0u, 1024);
  uint32_t psn = 0xFFFFFFC0u;
  for (int round = 0; round < 10; ++round) {  // 10 x 48 PSNs: cum goes round the word 7 times
    for (uint32_t k = 0; k < 48; k += 2) ASSERT_EQ(sb.mark(psn + k), RecvScoreboard::Mark::kNew);
    ASSERT_FALSE(sb.ring_allocated());
    ASSERT_EQ(sb.ring_bits(), 64u);
    EXPECT_EQ(advance(sb).size(), 1u) << round;  // psn only: psn + 1 is a hole
    // From cum = psn + 1: bit j is psn + 1 + j, arrived for odd j up to 45 (even offsets
    // from psn), holes between; nothing past psn + 46.
    const auto bits = sb.sack(psn + 1);
    EXPECT_EQ(bits[0], 0xAAAAAAAAAAAAAAAAull & ((uint64_t{1} << 46) - 1)) << round;
    EXPECT_EQ(sb.mark(psn + 2), RecvScoreboard::Mark::kDuplicate);
    for (uint32_t k = 1; k < 48; k += 2) ASSERT_EQ(sb.mark(psn + k), RecvScoreboard::Mark::kNew);
    EXPECT_EQ(advance(sb).size(), 47u) << round;
    psn += 48;
    ASSERT_EQ(sb.cum(), psn);
  }
  // Beyond the word: the ring is allocated, the marks inside the old word stay.
  ASSERT_EQ(sb.mark(psn + 5), RecvScoreboard::Mark::kNew);
  ASSERT_EQ(sb.mark(psn + 63), RecvScoreboard::Mark::kNew);
  ASSERT_FALSE(sb.ring_allocated());
  ASSERT_EQ(sb.mark(psn + 64), RecvScoreboard::Mark::kNew);
  EXPECT_TRUE(sb.ring_allocated());
  EXPECT_EQ(sb.ring_bits(), 128u);
  for (uint32_t d = 0; d < 128; ++d)
    EXPECT_EQ(sb.received(psn + d), d == 5 || d == 63 || d == 64) << d;
  // A reset gives the allocation back: the next ring is the inline word again.
  sb.reset(7, 1024);
  EXPECT_EQ(sb.ring_bits(), 0u);
  ASSERT_EQ(sb.mark(8), RecvScoreboard::Mark::kNew);
  EXPECT_FALSE(sb.ring_allocated());
  EXPECT_FALSE(sb.received(7));
  EXPECT_TRUE(sb.received(8));
}

}  // namespace
}  // namespace mrc::engine
