// Faults of an mrc-sim run: the sim fabric's fault words (io/sim/fabric.h) at virtual times.
// Threading: free functions.
//
//   'TIME t1-down|t1-up PLANE SPINE'             a T1 spine fails / comes back
//   'TIME t0-down|t0-up PLANE T0'                a T0 (its hosts lose that plane)
//   'TIME blackhole-t1|restore-t1 PLANE SPINE'   drops everything, links stay up / off again
//   'TIME blackhole-t0|restore-t0 PLANE T0'
//   'TIME link-down|link-up PLANE T0 SPINE'      the T0-T1 cable, both directions
//   'TIME flap PLANE T0 SPINE PERIOD UNTIL'      that cable down/up every PERIOD until UNTIL
//   'TIME loss PLANE T0 SPINE PROB'              random loss on that cable (0 ends it)
//   'TIME trimming on|off'                       trimming on every switch egress
// TIME, PERIOD and UNTIL: a number with a unit, s, ms, us or ns ("1.5ms"; no unit: seconds),
// or a percentage of the run's ideal time ("50%": halfway through a healthy run).
#pragma once

#include <cstdint>
#include <string>

#include "mrc/common/result.h"
#include "mrc/engine/types.h"
#include "mrc/io/sim/fabric.h"

namespace mrc::msim {

struct Fault {
  enum class Op : uint8_t {
    kT1Down,
    kT1Up,
    kT0Down,
    kT0Up,
    kBlackholeT1,
    kRestoreT1,
    kBlackholeT0,
    kRestoreT0,
    kLinkDown,
    kLinkUp,
    kFlap,
    kLoss,
    kTrimming
  };
  engine::Time at{0};
  Op op = Op::kT1Down;
  uint16_t plane = 0;
  uint32_t t0 = 0, spine = 0;
  engine::Duration period{0};  // flap
  engine::Time until{0};       // flap
  double prob = 0;             // loss
  bool on = true;              // trimming
  std::string text;            // as given
};

struct FaultScope {
  uint16_t planes = 4;
  uint32_t t0s = 1, spines = 4;
  double ideal_s = 0;  // what "N%" is a share of
};

/// Parses one --fault; the error names what is wrong and shows the usage.
Result<Fault, std::string> parse_fault(const std::string& text, const FaultScope& scope);
/// Parses "1.5ms", "200us", "0.002", "50%" (of scope.ideal_s) into a time.
Result<engine::Time, std::string> parse_time(const std::string& text, double ideal_s);
/// Does it now.
void apply(const Fault& f, sim::Fabric& fabric);

}  // namespace mrc::msim
