// Byte verification of mrc-sim at the receivers, at cluster scale: a checking sink in place
// of receive memory. Threading: single-threaded; one sink is active per thread at a time.
//
// A run of 1,024 hosts moves tens of GB; holding every destination buffer would not fit, so
// the receivers' memory regions lie in a reserved, inaccessible address range (mmap
// PROT_NONE: a stray access crashes, it cannot pass silently) and the engines place payload
// through EngineConfig::copy = VerifySink::copy. For a destination inside the active sink,
// copy checks instead of storing:
//   - the bytes equal the source bytes of that message at that offset (every message reads
//     its own random offset of one shared random source buffer, so a byte of another
//     message, another offset or another host does not match);
//   - the range lies within one message;
//   - and it tallies per message: bytes placed, and the sums of their offsets and squared
//     offsets.
// When the receiver's completion of a message arrives, check() compares the tallies with
// the message's length: every byte placed exactly once gives bytes = len, sum = sum of
// 0..len-1, squares alike. A lost byte, a byte placed twice (a duplicate) and a corrupted or
// misplaced byte each fail it. Destinations outside the sink are copied (memcpy) as usual.
//
// Each receiving host has one window of the range (its messages side by side); it
// registers only its window, so the engine itself refuses a write meant for another host.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mrc::msim {

class VerifySink {
 public:
  /// `source`: the random bytes every sender reads from (outlives the sink).
  explicit VerifySink(std::span<const uint8_t> source);
  ~VerifySink();
  VerifySink(const VerifySink&) = delete;
  VerifySink& operator=(const VerifySink&) = delete;

  /// Lays out the messages: message i (bytes[i] long, read at src_offset[i] of the
  /// source) into the window of host dst[i]. Call once, before activate().
  void layout(uint32_t hosts, std::span<const uint32_t> dst, std::span<const uint64_t> bytes,
              std::span<const uint64_t> src_offset);

  /// Makes this sink the one copy() checks (until destroyed or another is activated).
  void activate();
  /// The engines' PayloadCopy (EngineConfig::copy).
  static void copy(void* dst, const void* src, size_t n);

  /// Host h's window: where its MR lies (register with iova == addr).
  uint8_t* window(uint32_t h) const { return base_ + win_start_[h]; }
  uint64_t window_bytes(uint32_t h) const { return win_start_[h + 1] - win_start_[h]; }
  /// Where message i lands (inside its host's window).
  uint64_t dst_addr(uint64_t i) const { return reinterpret_cast<uint64_t>(base_ + start_[i]); }

  enum class Verdict : uint8_t { kOk, kLost, kDuplicated, kCorrupted };
  /// The verdict on message i now (call at its receive completion).
  Verdict check(uint64_t i) const;

  uint64_t placed_bytes() const { return placed_; }  // bytes that matched, all messages
  uint64_t bad_writes() const { return bad_; }       // writes that did not match or fit

 private:
  void verify(uint8_t* dst, const uint8_t* src, size_t n);

  struct Tally {
    uint64_t bytes = 0;
    uint64_t sum = 0;   // of offsets placed, mod 2^64
    uint64_t sum2 = 0;  // of squared offsets, mod 2^64
    uint32_t bad = 0;
  };
  std::span<const uint8_t> source_;
  uint8_t* base_ = nullptr;
  uint64_t reserved_ = 0;
  std::vector<uint64_t> win_start_;  // per host, and the end
  std::vector<uint64_t> start_;      // per message, offset in the range (increasing by host)
  std::vector<uint64_t> order_;      // message indices sorted by start_
  std::vector<uint64_t> sorted_start_;
  std::vector<uint64_t> len_, src_off_;
  std::vector<Tally> tally_;
  uint64_t placed_ = 0, bad_ = 0;
};

const char* to_string(VerifySink::Verdict v);

}  // namespace mrc::msim
