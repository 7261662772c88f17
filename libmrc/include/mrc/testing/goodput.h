// Goodput of fault runs on the simulated network: a meter that samples a byte counter in
// virtual time, and Jain's fairness index. Threading: single-threaded, like SimNet.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "mrc/io/sim/sim_net.h"

namespace mrc::sim {

/// Samples a byte counter every `interval` of virtual time (SimNet::at) from start() on:
/// intervals()[i] holds the bytes counted in (end - interval, end]. Rates are bits/s.
/// The meter may be destroyed before the SimNet: pending samples then do nothing.
class GoodputMeter {
 public:
  struct Interval {
    Time end{0};
    uint64_t bytes = 0;
  };

  GoodputMeter(SimNet& net, std::function<uint64_t()> counter, Duration interval);
  ~GoodputMeter();
  GoodputMeter(const GoodputMeter&) = delete;
  GoodputMeter& operator=(const GoodputMeter&) = delete;

  /// Reads the counter at `at` (now if past) as the baseline and samples from then on.
  void start(Time at);
  void start() { start(Time{-1}); }
  /// No samples after this.
  void stop();

  Duration interval() const;
  std::span<const Interval> intervals() const;
  /// Bits/s over the intervals lying wholly in [from, to]; 0 when there are none.
  double rate_bps(Time from, Time to) const;
  /// Smallest rate over any `window` (rounded down to whole intervals, at least one) of
  /// consecutive intervals wholly in [from, to]; 0 when there are none.
  double min_rate_bps(Time from, Time to, Duration window) const;
  /// Longest run of consecutive zero-byte intervals wholly in [from, to].
  Duration longest_stall(Time from, Time to) const;
  /// "time_s,gbps" header then one line per interval (end time, goodput).
  std::string csv() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

/// Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one takes
/// all. 1 for an empty span or all zeros.
double jain_fairness(std::span<const double> x);

}  // namespace mrc::sim
