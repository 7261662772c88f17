// The in-process verbs tests' first step: open the process's one verbs device (mrc0, configured
// by loopback_env.h). Threading: test thread.
#pragma once

#include "mrc/verbs/verbs.h"

namespace mrc::verbs::testing {

/// A new context of the one device the process lists; null if it lists not exactly one or the
/// open fails (the caller asserts).
inline ibv_context* open_the_device() {
  int n = 0;
  ibv_device** list = get_device_list(&n);
  ibv_context* ctx = n == 1 ? open_device(list[0]) : nullptr;
  free_device_list(list);
  return ctx;
}

}  // namespace mrc::verbs::testing
