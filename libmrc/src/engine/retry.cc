#include "engine/retry.h"

#include <algorithm>

namespace mrc::engine {

Duration RetryPolicy::base() const {
  if (timeout == 0) return kNever;
  return Duration{int64_t{1024} << std::min<uint8_t>(timeout, 31)};
}

Duration RetryPolicy::rto(uint32_t retries) const {
  const Duration b = base();
  if (b == kNever || retries < linear) return b;
  const uint32_t doublings = retries - linear + 1;
  const int64_t cap = int64_t{1024} << 31;
  if (doublings >= 31 || b.count() > (cap >> doublings)) return Duration{cap};
  return Duration{b.count() << doublings};
}

bool RetryPolicy::exhausted(uint32_t retries) const {
  if (exp >= kRetryForever) return false;
  return retries > uint32_t{linear} + exp;
}

}  // namespace mrc::engine
