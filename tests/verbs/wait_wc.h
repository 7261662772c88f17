// The in-process verbs tests' completion wait: poll a CQ until one completion comes.
// Threading: test thread.
#pragma once

#include <chrono>

#include "mrc/verbs/verbs.h"

namespace mrc::verbs::testing {

/// The next completion of `cq` within `limit`; status IBV_WC_GENERAL_ERR if none came.
inline ibv_wc wait_wc(ibv_cq* cq, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  ibv_wc wc{};
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end)
    if (poll_cq(cq, 1, &wc) == 1) return wc;
  wc.status = IBV_WC_GENERAL_ERR;
  return wc;
}

}  // namespace mrc::verbs::testing
