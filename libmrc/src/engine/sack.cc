#include "engine/sack.h"

#include <algorithm>
#include <cassert>

namespace mrc::engine {

void RecvScoreboard::reset(uint32_t first_psn, uint32_t window) {
  assert(window >= 64 && (window & (window - 1)) == 0);
  big_.reset();
  small_ = 0;
  words_ = 0;
  mask_ = 0;
  window_ = window;
  cum_ = first_psn;
  highest_ = first_psn;
}

RecvScoreboard::Mark RecvScoreboard::mark(uint32_t psn) {
  const int32_t d = psn_diff(psn, cum_);
  if (d < 0) return Mark::kDuplicate;
  if (static_cast<uint32_t>(d) >= window_) return Mark::kOutOfWindow;
  if (words_ == 0 || static_cast<uint32_t>(d) > mask_) grow(static_cast<uint32_t>(d));
  if (test(psn)) return Mark::kDuplicate;
  word((psn & mask_) >> 6) |= uint64_t{1} << (psn & 63);
  if (psn_diff(psn + 1, highest_) > 0) highest_ = psn + 1;
  return Mark::kNew;
}

bool RecvScoreboard::received(uint32_t psn) const {
  const int32_t d = psn_diff(psn, cum_);
  if (d < 0) return true;
  if (words_ == 0 || static_cast<uint32_t>(d) > mask_) return false;
  return test(psn);
}

void RecvScoreboard::grow(uint32_t ahead) {
  size_t n = words_ == 0 ? 64 : 2 * (size_t{mask_} + 1);
  while (n <= ahead) n *= 2;
  if (n == 64) {  // the first ring: the inline word
    small_ = 0;
    words_ = 1;
    mask_ = 63;
    return;
  }
  auto bigger = std::make_unique<uint64_t[]>(n / 64);  // zeroed
  // Every set bit is a PSN in [cum, cum + old ring): place it by its PSN.
  for (uint32_t k = 0; k < words_ * 64u; ++k) {
    const uint32_t psn = cum_ + k;
    if (test(psn)) bigger[(psn & (n - 1)) >> 6] |= uint64_t{1} << (psn & 63);
  }
  big_ = std::move(bigger);
  words_ = static_cast<uint32_t>(n / 64);
  mask_ = static_cast<uint32_t>(n - 1);
}

uint64_t RecvScoreboard::bits64(uint32_t psn) const {
  if (words_ == 0) return 0;
  const uint32_t i = psn & mask_;
  const size_t w = i >> 6, sh = i & 63;
  const uint64_t lo = word(w) >> sh;
  if (sh == 0) return lo;
  return lo | (word((w + 1) % words_) << (64 - sh));
}

std::array<uint64_t, wire::kSackBits / 64> RecvScoreboard::sack(uint32_t base) const {
  std::array<uint64_t, wire::kSackBits / 64> out{};
  // First PSN past the ring: later ones in the window have not arrived.
  const uint32_t end = cum_ + words_ * 64u;
  for (size_t k = 0; k < out.size(); ++k) {
    const uint32_t p = base + static_cast<uint32_t>(64 * k);
    uint64_t v = 0;
    // PSNs before cum have arrived; the ring holds [cum, end).
    const int32_t below = psn_diff(cum_, p);
    if (below >= 64) {
      out[k] = ~uint64_t{0};
      continue;
    }
    const int32_t room = psn_diff(end, p);  // PSNs of this word inside the window
    if (room <= 0) continue;
    v = bits64(p);
    if (below > 0) v |= (uint64_t{1} << below) - 1;
    if (room < 64) v &= (uint64_t{1} << room) - 1;
    out[k] = v;
  }
  return out;
}

}  // namespace mrc::engine
