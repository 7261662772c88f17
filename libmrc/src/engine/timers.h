// Per-QP timers: one array indexed by an enum; the next deadline is the minimum.
// Threading: owned by its QP (engine thread).
#pragma once

#include <array>
#include <cstddef>

#include "mrc/engine/types.h"

namespace mrc::engine {

enum class Timer : uint8_t {
  kRto,    // retransmission timeout of the oldest packet in flight
  kTlp,    // tail loss probe: nothing acked for 2 SRTT, resend the newest packet
  kRack,   // reorder window of a packet sent before one already acked (RACK)
  kAck,    // delayed ACK
  kRnr,    // resend after NO_RESOURCE (receiver not ready)
  kProbe,  // probe bad EVs (paths.h)
  kCount
};

class Timers {
 public:
  void set(Timer t, Time at) { at_[static_cast<size_t>(t)] = at; }
  void cancel(Timer t) { at_[static_cast<size_t>(t)] = kNever; }
  Time at(Timer t) const { return at_[static_cast<size_t>(t)]; }
  bool expired(Timer t, Time now) const { return at(t) <= now; }
  /// Set and still in the future.
  bool pending(Timer t, Time now) const { return at(t) != kNever && at(t) > now; }
  Time next() const {
    Time m = kNever;
    for (Time t : at_) m = t < m ? t : m;
    return m;
  }
  void cancel_all() { at_.fill(kNever); }

 private:
  std::array<Time, static_cast<size_t>(Timer::kCount)> at_ = make_never();
  static constexpr std::array<Time, static_cast<size_t>(Timer::kCount)> make_never() {
    std::array<Time, static_cast<size_t>(Timer::kCount)> a{};
    a.fill(kNever);
    return a;
  }
};

}  // namespace mrc::engine
