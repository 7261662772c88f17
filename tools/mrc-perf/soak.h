// The soak run's fault schedule: random faults of every kind the namespace fabric can make
// (switch and link down, flap, silent blackhole, random loss, trimming), one at a time, each
// undone a little later, never taking every path away (so no error completion is allowed).
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "mrc_run.h"
#include "srv6/fabric.h"

namespace mrc::perf {

struct SoakPlan {
  double duration_s = 1800;
  double first_s = 2;                     // quiet start
  double gap_min_s = 2, gap_max_s = 5;    // from one repair to the next fault
  double hold_min_s = 1, hold_max_s = 4;  // how long a fault stays
  bool trimming = true;                   // include trim faults (the run must use --trim)
  uint64_t seed = 1;
};

/// Faults between `client` and `server` with their repairs, sorted by time, all undone before
/// duration_s - 1. Each fault keeps at least one working path between the two hosts.
std::vector<TimedFault> soak_schedule(const srv6::Fabric& f, uint32_t client, uint32_t server,
                                      const SoakPlan& plan);

}  // namespace mrc::perf
