// Tests of stream_copy (libmrc/src/common/stream_copy.cc): every length and alignment around
// the non-temporal path's edges copies exactly the bytes asked, and nothing outside them.
#include "common/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace mrc {
namespace {

// Copies n bytes from src + s_off to dst + d_off inside guard bytes and checks the result
// byte for byte, and that the guards around the destination are untouched.
void check_copy(std::mt19937& rng, size_t n, size_t s_off, size_t d_off) {
  constexpr size_t kGuard = 64;
  constexpr uint8_t kFill = 0xA5;
  std::vector<uint8_t> src(n + s_off);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> dst(kGuard + d_off + n + kGuard, kFill);
  stream_copy(dst.data() + kGuard + d_off, src.data() + s_off, n);
  for (size_t i = 0; i < kGuard + d_off; ++i)
    ASSERT_EQ(dst[i], kFill) << "n " << n << " s_off " << s_off << " d_off " << d_off
                             << ": wrote before the destination at " << i;
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(dst[kGuard + d_off + i], src[s_off + i])
        << "n " << n << " s_off " << s_off << " d_off " << d_off << ": byte " << i;
  for (size_t i = kGuard + d_off + n; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], kFill) << "n " << n << " s_off " << s_off << " d_off " << d_off
                             << ": wrote past the destination at " << i - (kGuard + d_off + n);
}

TEST(StreamCopy, ShortCopies_EveryLengthBelowTheThreshold) {
  std::mt19937 rng(1);
  for (size_t n = 0; n < kStreamCopyMin; n += 7) check_copy(rng, n, 3, 5);
  check_copy(rng, kStreamCopyMin - 1, 0, 0);
}

TEST(StreamCopy, LongCopies_EveryAlignmentAndTail) {
  std::mt19937 rng(2);
  // Every destination alignment in a 16-byte block (the head), source alignments that differ
  // from it (unaligned loads), and tails of 0..79 bytes past the 64- and 16-byte steps.
  for (size_t d_off = 0; d_off < 16; ++d_off)
    for (size_t s_off : {0, 1, 8, 15})
      for (size_t tail = 0; tail < 80; tail += 13)
        check_copy(rng, kStreamCopyMin + tail, s_off, d_off);
}

TEST(StreamCopy, LongCopies_PacketSizes) {
  std::mt19937 rng(3);
  for (size_t n : {size_t{1400}, size_t{4096}, size_t{8192}, size_t{8936}, size_t{65536}})
    check_copy(rng, n, 2, 9);
}

}  // namespace
}  // namespace mrc
