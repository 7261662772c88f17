// CRC32C (Castagnoli), the checksum of MRC headers and payloads.
// Threading: pure function. Uses the SSE4.2 crc32 instruction when the CPU has
// it (checked once), a table otherwise; both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mrc {

/// CRC32C of n bytes, continuing from `crc` (0 to start). Standard init and
/// final xor are applied inside: crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

namespace detail {
/// The table implementation crc32c falls back to; same contract. For tests.
uint32_t crc32c_sw(uint32_t crc, const void* data, size_t n);
}  // namespace detail

}  // namespace mrc
