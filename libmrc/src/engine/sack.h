// Receiver-side scoreboard: which PSNs of a QP have arrived.
// Threading: owned by its QP (engine thread).
//
// Holds the cumulative PSN `cum` (every PSN before it has arrived) and a
// bitmap ring of PSNs starting at cum. PSN arithmetic is modulo 2^32
// (serial numbers): a PSN less than 2^31 behind cum is old, one at most
// window - 1 ahead is in the window, anything else is out of it.
// The ring covers [cum, cum + ring bits) and grows on demand (64 bits, then
// doubling, up to the window) when a PSN beyond it arrives, so a QP that
// receives nothing holds no bitmap and one that receives in order holds 8 bytes,
// inside the scoreboard: only a ring past 64 bits is an allocation of its own (with
// thousands of QPs, each cold when its turn comes, a bitmap elsewhere is one more miss per
// message, fetched only once the scoreboard's own line is there).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

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
  size_t ring_bits() const { return size_t{words_} * 64; }
  /// Whether the ring is an allocation of its own (more than 64 bits), else inside the
  /// scoreboard (memory accounting, tests).
  bool ring_allocated() const { return words_ > 1; }
  /// True while some PSN after cum has arrived (a hole is open).
  bool has_holes() const { return psn_diff(highest_, cum_) > 0; }
  /// Asks the CPU to fetch, for writing, the bitmap word of cum (the next in-order PSN's: what
  /// mark, received and advance touch first). A hint only: no state changes.
  void prefetch() const {
    if (words_ > 1) __builtin_prefetch(&big_[(cum_ & mask_) >> 6], 1);
  }
  /// Bitmap of PSNs [base, base + wire::kSackBits): bit set = arrived.
  std::array<uint64_t, wire::kSackBits / 64> sack(uint32_t base) const;

 private:
  // test/clear: psn within [cum, cum + ring bits), or the ring empty (test: false).
  bool test(uint32_t psn) const {
    return words_ != 0 && (word((psn & mask_) >> 6) >> (psn & 63)) & 1;
  }
  void clear(uint32_t psn) { word((psn & mask_) >> 6) &= ~(uint64_t{1} << (psn & 63)); }
  uint64_t bits64(uint32_t psn) const;  // raw ring bits for psn .. psn + 63
  void grow(uint32_t ahead);            // ring covers at least cum + ahead
  // Word i of the ring (i < words_): the inline word while the ring is 64 bits.
  uint64_t& word(size_t i) { return words_ > 1 ? big_[i] : small_; }
  uint64_t word(size_t i) const { return words_ > 1 ? big_[i] : small_; }

  uint64_t small_ = 0;                // the ring while words_ is 1
  std::unique_ptr<uint64_t[]> big_;   // the ring while words_ > 1
  uint32_t words_ = 0;                // ring words: 0 (none yet), 1 (small_), or more (big_)
  uint32_t mask_ = 0;    // ring bits - 1 (ring non-empty)
  uint32_t window_ = 0;  // PSNs past cum that may arrive (power of two)
  uint32_t cum_ = 0;
  uint32_t highest_ = 0;  // one past the highest PSN marked
};

}  // namespace mrc::engine
