// Tests of crc32c (libmrc/src/common/crc32c.cc): known answers, continuation, hardware vs table.
#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace mrc {
namespace {

// Bit-at-a-time CRC32C, the definition the fast versions must agree with.
uint32_t crc32c_reference(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32c, KnownAnswerCheckString) {
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(detail::crc32c_sw(0, "123456789", 9), 0xE3069283u);
}

// RFC 3720 (iSCSI) appendix B.4.
TEST(Crc32c, KnownAnswerRfc3720Vectors) {
  uint8_t buf[32];
  std::memset(buf, 0x00, sizeof buf);
  EXPECT_EQ(crc32c(0, buf, sizeof buf), 0x8A9136AAu);
  EXPECT_EQ(detail::crc32c_sw(0, buf, sizeof buf), 0x8A9136AAu);
  std::memset(buf, 0xFF, sizeof buf);
  EXPECT_EQ(crc32c(0, buf, sizeof buf), 0x62A8AB43u);
  EXPECT_EQ(detail::crc32c_sw(0, buf, sizeof buf), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(0, buf, sizeof buf), 0x46DD794Eu);
  EXPECT_EQ(detail::crc32c_sw(0, buf, sizeof buf), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(crc32c(0, buf, sizeof buf), 0x113FDB5Cu);
  EXPECT_EQ(detail::crc32c_sw(0, buf, sizeof buf), 0x113FDB5Cu);
}

TEST(Crc32c, EmptyInputReturnsCrcUnchanged) {
  EXPECT_EQ(crc32c(0, nullptr, 0), 0u);
  EXPECT_EQ(crc32c(0xDEADBEEF, nullptr, 0), 0xDEADBEEFu);
  EXPECT_EQ(detail::crc32c_sw(0xDEADBEEF, nullptr, 0), 0xDEADBEEFu);
}

TEST(Crc32c, MatchesBitwiseReferenceForEveryLengthAndAlignment) {
  std::mt19937 rng(1);
  const std::vector<uint8_t> buf = random_bytes(rng, 5200);
  for (size_t align = 0; align < 8; ++align) {
    for (size_t n = 0; n + align <= 5100; n += (n < 700 ? 1 : 37)) {
      const uint8_t* p = buf.data() + align;
      const uint32_t want = crc32c_reference(0, p, n);
      ASSERT_EQ(crc32c(0, p, n), want) << "align " << align << " n " << n;
      ASSERT_EQ(detail::crc32c_sw(0, p, n), want) << "align " << align << " n " << n;
    }
  }
}

// Lengths at and around the interleaved block sizes (3 x 64 and 3 x 512 bytes).
TEST(Crc32c, HardwareMatchesSoftwareAroundBlockBoundaries) {
  std::mt19937 rng(2);
  const std::vector<uint8_t> buf = random_bytes(rng, 20000);
  for (size_t base : {size_t{192}, size_t{384}, size_t{1536}, size_t{3072}, size_t{4096},
                      size_t{4608}, size_t{9000}, size_t{16384}}) {
    for (size_t n = base - 9; n <= base + 9; ++n) {
      const uint32_t seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(crc32c(seed, buf.data() + 3, n), detail::crc32c_sw(seed, buf.data() + 3, n))
          << "n " << n;
      ASSERT_EQ(crc32c(seed, buf.data() + 3, n), crc32c_reference(seed, buf.data() + 3, n))
          << "n " << n;
    }
  }
}

TEST(Crc32c, ContinuationEqualsOneShot) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 2000; ++iter) {
    const size_t n = rng() % 6000;
    const std::vector<uint8_t> buf = random_bytes(rng, n);
    const size_t split = n == 0 ? 0 : rng() % (n + 1);
    const uint32_t whole = crc32c(0, buf.data(), n);
    ASSERT_EQ(crc32c(crc32c(0, buf.data(), split), buf.data() + split, n - split), whole);
    ASSERT_EQ(
        detail::crc32c_sw(detail::crc32c_sw(0, buf.data(), split), buf.data() + split, n - split),
        whole);
  }
}

TEST(Crc32c, ByteAtATimeEqualsOneShot) {
  const char* s = "123456789";
  uint32_t crc = 0;
  for (int i = 0; i < 9; ++i) crc = crc32c(crc, s + i, 1);
  EXPECT_EQ(crc, 0xE3069283u);
}

TEST(Crc32c, SingleBitFlipChangesCrc) {
  std::mt19937 rng(4);
  std::vector<uint8_t> buf = random_bytes(rng, 4096);
  const uint32_t base = crc32c(0, buf.data(), buf.size());
  for (size_t bit = 0; bit < buf.size() * 8; bit += 13) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_NE(crc32c(0, buf.data(), buf.size()), base) << "bit " << bit;
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace mrc
