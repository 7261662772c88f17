#include "engine/sack.h"

#include <algorithm>
#include <cassert>

namespace mrc::engine {

void RecvScoreboard::reset(uint32_t first_psn, uint32_t window) {
  assert(window >= 64 && (window & (window - 1)) == 0);
  bits_.assign(window / 64, 0);
  mask_ = window - 1;
  cum_ = first_psn;
  highest_ = first_psn;
}

RecvScoreboard::Mark RecvScoreboard::mark(uint32_t psn) {
  const int32_t d = psn_diff(psn, cum_);
  if (d < 0) return Mark::kDuplicate;
  if (static_cast<uint32_t>(d) > mask_) return Mark::kOutOfWindow;
  if (test(psn)) return Mark::kDuplicate;
  bits_[(psn & mask_) >> 6] |= uint64_t{1} << (psn & 63);
  if (psn_diff(psn + 1, highest_) > 0) highest_ = psn + 1;
  return Mark::kNew;
}

bool RecvScoreboard::received(uint32_t psn) const {
  const int32_t d = psn_diff(psn, cum_);
  if (d < 0) return true;
  if (static_cast<uint32_t>(d) > mask_) return false;
  return test(psn);
}

uint64_t RecvScoreboard::bits64(uint32_t psn) const {
  const uint32_t i = psn & mask_;
  const size_t w = i >> 6, sh = i & 63;
  const uint64_t lo = bits_[w] >> sh;
  if (sh == 0) return lo;
  return lo | (bits_[(w + 1) % bits_.size()] << (64 - sh));
}

std::array<uint64_t, wire::kSackBits / 64> RecvScoreboard::sack(uint32_t base) const {
  std::array<uint64_t, wire::kSackBits / 64> out{};
  const uint32_t end = cum_ + mask_ + 1;  // first PSN past the window
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
