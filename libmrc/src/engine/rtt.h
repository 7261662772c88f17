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
  /// The least a tail loss probe waits beyond 2 SRTT: a software host's round trip varies
  /// with scheduling, not only the network. On the 2-core VM the project measures on, one
  /// round trip in 20-100 takes 3-5x the median (mrc-perf --latency with nothing else
  /// running: p50 48-54 us, p99 151-180 us; perf/RESULTS.md 2026-11-27 (lead, idle) After
  /// this stop's merges), and 2 SRTT + ack_delay fired a spurious probe on 1.3-6.6% of
  /// messages, each a resend and its ACK of work on both hosts inside an already slow round
  /// trip. 4 RTTVAR does not cover it: RFC 6298's smoothing forgets a spike within a few
  /// samples (tests/engine: a 4x spike every 8th round trip still fired a probe on each).
  /// 2 SRTT + 100 us puts the idle p99 inside the wait; a lost
  /// tail packet is still resent ~67 ms (the default RTO) sooner than without a probe.
  static constexpr Duration kTlpMinSlack{100'000};
  /// How long after the last send (or progress) the tail loss probe waits (RFC 8985 section
  /// 7.2's PTO, whose slack is the receiver's worst ACK delay): 2 SRTT plus the largest of
  /// the receiver's ACK delay, 4 RTTVAR and kTlpMinSlack. 0 with no sample (no probe then).
  Duration tlp_timeout(Duration ack_delay) const {
    return has_sample() ? 2 * srtt_ + std::max({ack_delay, 4 * rttvar_, kTlpMinSlack})
                        : Duration{0};
  }

 private:
  Duration srtt_{0}, rttvar_{0}, min_rtt_{0};
};

}  // namespace mrc::engine
