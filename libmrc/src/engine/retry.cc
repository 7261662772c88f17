#include "mrc/engine/retry.h"

namespace mrc::engine {

Duration RetryPolicy::backed_off(Duration b, uint32_t doublings) {
  const int64_t cap = int64_t{1024} << 31;
  if (doublings >= 31 || b.count() > (cap >> doublings)) return Duration{cap};
  return Duration{b.count() << doublings};
}

bool RetryPolicy::exhausted(uint32_t retries) const {
  if (exp >= kRetryForever) return false;
  return retries > uint32_t{linear} + exp;
}

}  // namespace mrc::engine
