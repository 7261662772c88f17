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
  /// How long after the last send (or progress) the tail loss probe waits (RFC 8985 section
  /// 7.2's PTO, whose slack is the receiver's worst ACK delay): 2 SRTT plus the largest of
  /// the receiver's ACK delay, 4 RTTVAR and `min_slack` (EngineConfig::tlp_min_slack: the
  /// host's scheduling jitter). 0 with no sample (no probe then).
  Duration tlp_timeout(Duration ack_delay, Duration min_slack) const {
    return has_sample() ? 2 * srtt_ + std::max({ack_delay, 4 * rttvar_, min_slack})
                        : Duration{0};
  }
  /// When the tail loss probe goes, the tail having gone quiet at `since` (the newest send or
  /// the last ACK that made progress) and the RTO being due at `rto_at` (kNever: none);
  /// kNever: no probe. Normally since + tlp_timeout. A small ack timeout (OCP's example,
  /// timeout 8: 262 us) can put that at or past the RTO, and the probe used to be dropped
  /// there, leaving a tail loss to the RTO (everything in flight resent and blamed, the next
  /// timeout doubled). It is clamped instead to rto_at - rto_floor: the latest time at which
  /// the probe's ACK, allowed as long as the RTO allows any round trip (SRTT + 4 RTTVAR +
  /// ack_delay), still comes back before the RTO and saves it. It never goes before since +
  /// rto_floor either, the time by which the tail's own ACK is overdue by the same measure
  /// (earlier it would be a resend of a packet whose ACK is still on its way): when the two
  /// bounds cross (the RTO less than two round trips after `since`) there is no probe.
  Time tlp_at(Time since, Time rto_at, Duration ack_delay, Duration min_slack) const {
    if (!has_sample()) return kNever;
    const Time natural = since + tlp_timeout(ack_delay, min_slack);
    if (rto_at == kNever) return natural;
    const Duration answer = rto_floor(ack_delay);
    const Time latest = rto_at - answer;
    if (natural <= latest) return natural;
    return latest >= since + answer ? latest : kNever;
  }

 private:
  Duration srtt_{0}, rttvar_{0}, min_rtt_{0};
};

}  // namespace mrc::engine
