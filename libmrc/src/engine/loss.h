// A QP's loss detector state: RACK (RFC 8985, made to tolerate spraying: Core::detect_losses),
// the tail loss probe and the retransmission timeout's retry count. The packets themselves
// (the sent-order lists) are the sender's; this holds what decides when one of them is lost.
// Threading: plain value type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/rtt.h"
#include "mrc/engine/types.h"

namespace mrc::engine {

struct LossDetector {
  /// Smallest reorder window RACK uses (2 us): timer granularity, not a network's reordering.
  static constexpr Duration kMinReorder{2000};
  /// Largest reorder_mult: the window stops growing at 64 x min_rtt / 4 (and never passes SRTT).
  static constexpr uint32_t kMaxReorderMult = 64;
  /// Packets acknowledged without a spurious loss before the reorder window halves.
  static constexpr uint32_t kReorderDecay = 16384;

  std::vector<uint16_t> rack_evs;  // EVs with a packet sent before one delivered on them
  uint64_t rack_xseq = 0;     // transmission order of the most recently sent packet known delivered
  Duration rack_rtt{0};       // send-to-ACK time of the latest first transmission acknowledged
  uint32_t reorder_mult = 1;  // reorder window in units of min_rtt / 4
  uint32_t since_spurious = 0;  // packets acked since the last spurious loss
  uint32_t rto_retries = 0;     // consecutive timeouts without progress
  bool tlp_sent = false;        // a tail loss probe went out since the last progress
  bool tlp_go = false;          // the probe waits to be sent: it may pass a full window

  /// The RTT RACK waits on: SRTT, or with no sample yet (only NACKs came back, or no
  /// timestamps) the send-to-ACK time of the latest packet delivered, rather than nothing
  /// (a 2 us window that declares a whole first window lost).
  Duration rack_srtt(const RttEstimator& rtt) const {
    return rtt.has_sample() ? rtt.srtt() : rack_rtt;
  }
  /// Slack for a network that reorders within a path: reorder_mult x min_rtt / 4 (at least
  /// 2 us), never more than the RTT.
  Duration reorder_window(const RttEstimator& rtt) const {
    return std::min(reorder_mult * std::max(rtt.min_rtt() / 4, kMinReorder),
                    std::max(rack_srtt(rtt), kMinReorder));
  }
  /// The spread of queueing between paths (the cross-EV backstop's slack): SRTT + 4 RTTVAR,
  /// at most 2 x SRTT (an RTO must not come first), never below the reorder window.
  Duration spread(const RttEstimator& rtt) const {
    const Duration srtt = rack_srtt(rtt);
    return std::max(reorder_window(rtt), std::min(srtt + 4 * rtt.rttvar(), 2 * srtt));
  }
  /// A packet declared lost was acknowledged before its resend could be: widen the window.
  void on_spurious() {
    reorder_mult = std::min(reorder_mult + 1, kMaxReorderMult);
    since_spurious = 0;
  }
  /// A packet acknowledged with no spurious loss: every kReorderDecay of them halve the window.
  void on_clean_ack() {
    if (++since_spurious >= kReorderDecay && reorder_mult > 1) {
      reorder_mult /= 2;
      since_spurious = 0;
    }
  }
  /// Something new was acknowledged: the timeouts and the probe start over.
  void on_progress() {
    rto_retries = 0;
    tlp_sent = false;
  }
  /// Packet `xseq` (a first transmission or not) is known delivered.
  void on_delivered(uint64_t xseq) { rack_xseq = std::max(rack_xseq, xseq); }
};

}  // namespace mrc::engine
