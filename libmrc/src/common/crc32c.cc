// CRC32C (Castagnoli): the SSE4.2 crc32 instruction when the CPU has it, slice-by-8 otherwise.
// Threading: pure functions; the tables are compile-time constants, the CPU check a static.
#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define MRC_CRC32C_X86 1
#endif

namespace mrc {
namespace {

// The functions below work on the raw CRC register; crc32c() applies the
// standard pre- and post-inversion around them.

constexpr uint32_t kPoly = 0x82F63B78;  // Castagnoli polynomial, bit-reflected

using Table = std::array<uint32_t, 256>;

// kSlice[k][b]: register after byte b followed by k zero bytes, from a zero register.
constexpr std::array<Table, 8> make_slice_tables() {
  std::array<Table, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (size_t k = 1; k < t.size(); ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}
constexpr std::array<Table, 8> kSlice = make_slice_tables();

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint32_t sw_update(uint32_t crc, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t lo = crc ^ load_le32(p);
    const uint32_t hi = load_le32(p + 4);
    crc = kSlice[7][lo & 0xFF] ^ kSlice[6][(lo >> 8) & 0xFF] ^ kSlice[5][(lo >> 16) & 0xFF] ^
          kSlice[4][lo >> 24] ^ kSlice[3][hi & 0xFF] ^ kSlice[2][(hi >> 8) & 0xFF] ^
          kSlice[1][(hi >> 16) & 0xFF] ^ kSlice[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) crc = (crc >> 8) ^ kSlice[0][(crc ^ *p) & 0xFF];
  return crc;
}

#if MRC_CRC32C_X86

// Three-way interleaving: the crc32 instruction has a latency of 3 cycles and a
// throughput of 1, so three independent streams over consecutive blocks run at
// full speed; the block CRCs are then joined by "appending" kBlock zero bytes to
// the earlier one (a linear map over GF(2), applied with four byte tables) and
// xoring in the later one. After M. Adler's crc32c.c.

using Gf2Matrix = std::array<uint32_t, 32>;  // column i: image of bit i

constexpr uint32_t gf2_times(const Gf2Matrix& m, uint32_t v) {
  uint32_t sum = 0;
  for (size_t i = 0; v != 0; ++i, v >>= 1) {
    if (v & 1u) sum ^= m[i];
  }
  return sum;
}

constexpr Gf2Matrix gf2_square(const Gf2Matrix& m) {
  Gf2Matrix sq{};
  for (size_t i = 0; i < 32; ++i) sq[i] = gf2_times(m, m[i]);
  return sq;
}

// Tables applying `bytes` zero bytes (a power of two) to a register, one per register byte.
constexpr std::array<Table, 4> make_shift_tables(size_t bytes) {
  Gf2Matrix op{};  // one zero bit
  op[0] = kPoly;
  for (size_t i = 1; i < 32; ++i) op[i] = 1u << (i - 1);
  for (int i = 0; i < 3; ++i) op = gf2_square(op);  // one zero byte
  for (; bytes > 1; bytes >>= 1) op = gf2_square(op);
  std::array<Table, 4> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    for (size_t k = 0; k < 4; ++k) t[k][b] = gf2_times(op, b << (8 * k));
  }
  return t;
}

inline uint32_t shift(const std::array<Table, 4>& t, uint32_t crc) {
  return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

// Block sizes of the interleaved loops (powers of two, multiples of 8): payloads
// are at most a few KiB, headers under 100 bytes go through the plain loop.
constexpr size_t kLongBlock = 512;
constexpr size_t kShortBlock = 64;
constexpr std::array<Table, 4> kShiftLong = make_shift_tables(kLongBlock);
constexpr std::array<Table, 4> kShiftShort = make_shift_tables(kShortBlock);

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);  // x86 is little-endian, as crc32 expects
  return v;
}

// CRC of 3 * kBlock bytes at p, continuing from register c0.
template <size_t kBlock>
__attribute__((target("sse4.2"))) inline uint64_t hw_3way(uint64_t c0, const uint8_t* p,
                                                          const std::array<Table, 4>& shift_table) {
  uint64_t c1 = 0;
  uint64_t c2 = 0;
  for (size_t i = 0; i < kBlock; i += 8) {
    c0 = _mm_crc32_u64(c0, load64(p + i));
    c1 = _mm_crc32_u64(c1, load64(p + kBlock + i));
    c2 = _mm_crc32_u64(c2, load64(p + 2 * kBlock + i));
  }
  c0 = shift(shift_table, static_cast<uint32_t>(c0)) ^ c1;
  return shift(shift_table, static_cast<uint32_t>(c0)) ^ c2;
}

__attribute__((target("sse4.2"))) uint32_t hw_update(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = crc;
  for (; n >= 3 * kLongBlock; p += 3 * kLongBlock, n -= 3 * kLongBlock) {
    c = hw_3way<kLongBlock>(c, p, kShiftLong);
  }
  for (; n >= 3 * kShortBlock; p += 3 * kShortBlock, n -= 3 * kShortBlock) {
    c = hw_3way<kShortBlock>(c, p, kShiftShort);
  }
  for (; n >= 8; p += 8, n -= 8) c = _mm_crc32_u64(c, load64(p));
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

bool cpu_has_sse42() {
  __builtin_cpu_init();  // crc32c may run from a static initializer, before the runtime's own
  return __builtin_cpu_supports("sse4.2");
}

#endif  // MRC_CRC32C_X86

}  // namespace

namespace detail {
uint32_t crc32c_sw(uint32_t crc, const void* data, size_t n) {
  return ~sw_update(~crc, static_cast<const uint8_t*>(data), n);
}
}  // namespace detail

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
#if MRC_CRC32C_X86
  static const bool kHardware = cpu_has_sse42();
  if (kHardware) return ~hw_update(~crc, static_cast<const uint8_t*>(data), n);
#endif
  return detail::crc32c_sw(crc, data, n);
}

}  // namespace mrc
