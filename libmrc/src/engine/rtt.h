// A QP's round-trip estimator: SRTT, RTTVAR (RFC 6298 smoothing, gains 1/8 and 1/4) and the
// smallest sample, fed by Core::on_ack with send-to-ACK times taken from echoed timestamps
// (the receiver's ACK delay already removed). RACK, the tail loss probe and the RTO read it.
// Threading: plain value type.
#pragma once

#include <algorithm>

#include "mrc/engine/types.h"

namespace mrc::engine {

class RttEstimator {
 public:
  /// True once a sample (or a seed) came: before it srtt(), rttvar() and min_rtt() are 0.
  bool has_sample() const { return srtt_ > Duration{0}; }
  Duration srtt() const { return srtt_; }
  Duration rttvar() const { return rttvar_; }
  Duration min_rtt() const { return min_rtt_; }

  /// One round-trip sample (> 0). The first sets SRTT to it and RTTVAR to half of it.
  void on_sample(Duration rtt) {
    if (srtt_ == Duration{0}) {
      srtt_ = rtt;
      rttvar_ = rtt / 2;
      min_rtt_ = rtt;
      return;
    }
    const Duration err = rtt > srtt_ ? rtt - srtt_ : srtt_ - rtt;
    rttvar_ = (3 * rttvar_ + err) / 4;
    srtt_ = (7 * srtt_ + rtt) / 8;
    min_rtt_ = std::min(min_rtt_, rtt);
  }
  /// Starts from an estimate made elsewhere (another QP to the same peer, SharedHealth::Peer),
  /// as if those samples had been this QP's own.
  void seed(Duration srtt, Duration rttvar, Duration min_rtt) {
    srtt_ = srtt;
    rttvar_ = rttvar;
    min_rtt_ = min_rtt;
  }
  /// What the RTO may not go below (RFC 6298): SRTT + 4 RTTVAR + the receiver's ACK delay;
  /// 0 with no sample (the verbs timeout alone then).
  Duration rto_floor(Duration ack_delay) const {
    return has_sample() ? srtt_ + 4 * rttvar_ + ack_delay : Duration{0};
  }

 private:
  Duration srtt_{0}, rttvar_{0}, min_rtt_{0};
};

}  // namespace mrc::engine
