// Receiver-side scoreboard: which PSNs of a QP have arrived.
// Threading: owned by its QP (engine thread).
//
// Holds the cumulative PSN `cum` (every PSN before it has arrived) and a
// bitmap ring of PSNs starting at cum. PSN arithmetic is modulo 2^32
// (serial numbers): a PSN less than 2^31 behind cum is old, one at most
// window - 1 ahead is in the window, anything else is out of it.
// The ring covers [cum, cum + ring bits) and grows on demand (64 bits, then
// doubling, up to the window) when a PSN beyond it arrives, so a QP that
// receives nothing holds no bitmap and one that receives in order holds 8 bytes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "mrc/wire/wire.h"

namespace mrc::engine {

/// a - b as a signed distance in PSN space.
inline int32_t psn_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }

class RecvScoreboard {
 public:
  enum class Mark : uint8_t { kNew, kDuplicate, kOutOfWindow };

  /// Starts empty at `first_psn`; `window` is a power of two, at least 64.
  void reset(uint32_t first_psn, uint32_t window);

  /// Records that `psn` arrived. Does not move cum; call advance().
  Mark mark(uint32_t psn);
  bool received(uint32_t psn) const;

  /// Moves cum past every consecutively received PSN, calling on_psn(psn) for
  /// each in order. Returns how many PSNs it passed.
  template <typename F>
  uint32_t advance(F&& on_psn) {
    uint32_t n = 0;
    while (test(cum_)) {
      clear(cum_);
      on_psn(cum_);
      ++cum_;
      ++n;
    }
    return n;
  }

  uint32_t cum() const { return cum_; }
  uint32_t window() const { return window_; }
  /// Bits the ring holds now (memory accounting; 0 until the first mark).
  size_t ring_bits() const { return bits_.size() * 64; }
  /// True while some PSN after cum has arrived (a hole is open).
  bool has_holes() const { return psn_diff(highest_, cum_) > 0; }
  /// Bitmap of PSNs [base, base + wire::kSackBits): bit set = arrived.
  std::array<uint64_t, wire::kSackBits / 64> sack(uint32_t base) const;

 private:
  // test/clear: psn within [cum, cum + ring bits), or the ring empty (test: false).
  bool test(uint32_t psn) const {
    return !bits_.empty() && (bits_[(psn & mask_) >> 6] >> (psn & 63)) & 1;
  }
  void clear(uint32_t psn) { bits_[(psn & mask_) >> 6] &= ~(uint64_t{1} << (psn & 63)); }
  uint64_t bits64(uint32_t psn) const;  // raw ring bits for psn .. psn + 63
  void grow(uint32_t ahead);            // ring covers at least cum + ahead

  std::vector<uint64_t> bits_;
  uint32_t mask_ = 0;    // ring bits - 1 (ring non-empty)
  uint32_t window_ = 0;  // PSNs past cum that may arrive (power of two)
  uint32_t cum_ = 0;
  uint32_t highest_ = 0;  // one past the highest PSN marked
};

}  // namespace mrc::engine
