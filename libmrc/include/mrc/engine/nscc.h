// NSCC: the UEC 1.0 sender congestion window (UET spec 3.6.13), configured as OCP MRC's
// `mrc_ctl_cc_nscc_cfg`. Threading: plain value type owned by one QP (engine thread).
// Sans-IO: no clock reads; every input takes `now`.
//
// One window `cwnd` (bytes) covers all paths of a QP; the sender may send while
// in_flight + MTU <= cwnd. On each ACK with an RTT sample the queueing delay is
//   delay = max(rtt - base_rtt, 0)   (see base_rtt(): a profile's base is never above a
//                                     sample; a given one, NsccBase::kGiven, may be)
// and ECN-CE (echoed in the ACK) with delay vs target_delay picks one of four cases:
//
//   no ECN, delay <  target  proportional increase: inc += alpha * acked * (target - delay),
//                            or, after a whole window of ACKs with delay < 1 us, fast
//                            increase: cwnd += fi_scale * acked on every such ACK, at once.
//   no ECN, delay >= target  fair increase: inc += fi * acked. Queues were full but are
//                            draining (ECN is the leading signal, delay the lagging one).
//                            Unless the delay stands (below): then a delay-based decrease.
//   ECN,    delay <  target  hold: a queue is building on some path; leave it to path
//                            selection (the engine moves off marked EVs).
//   ECN,    delay >= target  multiplicative decrease, at most once per base RTT, when the
//                            average delay avg > target:
//                              cwnd *= max(1 - gamma * (avg - target) / avg, max_md_jump).
//
// Delay-based decrease (not in UEC 1.0; for ports that mark no ECN): a queue above target
// drains within a round trip when its ports mark, since ECN leads. If instead the ACKs of a
// whole window in a row, max(cwnd, adjust_bytes_threshold) bytes, saw delay >= target and no
// CE mark, the queue stands and nothing marks it (a drop-tail port: without this the window
// stays at max_cwnd by fair increase, and QPs that share such a port keep its buffer full and
// lose from it). Then, at most once per round trip (the latest RTT sample, as Swift paces its
// decreases: the window's effect shows one RTT later), with m the smallest delay of that run
// (the queue that stood throughout, not a jitter spike):
//   cwnd *= max(1 - gamma * (m - target) / m, max_md_jump)
// and the pending increase is dropped. A CE mark or a delay below target ends the run, so on
// fabrics that mark, the UEC quadrants act alone. Multiplicative decrease plus fair (additive)
// increase converge competing QPs to equal shares, as the ECN case does.
//
// Increases go to the accumulator `inc` (bytes^2) and reach cwnd in a "fulfill adjustment"
// once more than adjust_bytes_threshold bytes were acked or adjust_period_threshold passed
// since the last timed adjustment: cwnd += inc / cwnd, plus eta bytes when the period passed.
// Dividing by cwnd makes the step per RTT (acked ~ cwnd) about fi bytes for fair increase and
// alpha * (target - delay) bytes for proportional increase whatever the window: equal additive
// steps plus proportional decreases are what make competing flows converge to equal shares.
//
// Raw sample vs average (as UEC): the case choice, proportional and fast increase and the
// quick-adapt delay test use this ACK's raw delay; the multiplicative decrease (whether and how
// much) uses avg, an EWMA of the raw delays with weight kDelayEwmaWeight = 0.0125 per sample
// (UEC leaves the average to implementations; htsim uses this weight).
//
// Quick adapt: achieved bytes are counted over periods of base_rtt + target_delay. At the end
// of a period, if something was wrong (a trim since the last quick adapt, a loss, or a raw
// delay > qa_threshold) and the period achieved fewer than max_cwnd >> qa_gate bytes, cwnd is
// set to max(achieved, MTU) at once (never raised), and ECN-marked ACKs for the bytes then in
// flight are ignored (no case runs for them): they describe the queue quick adapt just cut.
//
// A trimmed packet (NACK TRIMMED): the average takes a delay sample of one base RTT (a trim
// means a full queue), quick adapt is tried as for a loss, and if it does not fire the packet's
// bytes are taken off cwnd. A loss (RTO or inferred, UEC OnInferredLoss) takes one MTU off cwnd
// and nothing else: no quick adapt, no delay sample. A loss that proves spurious (the packet is
// acknowledged after all) gives the MTU back (on_spurious_loss; as TCP undoes a reduction on
// a DSACK, RFC 3708): queues building at a flow's start on a sprayed fabric can make the loss
// backstop declare dozens of late packets lost at once, and without the undo the window stayed
// at a fifth of its ceiling for hundreds of RTTs (mrc-sim permutation, perf/RESULTS.md).
//
// The window always stays within [max(MTU, cwnd_floor), max(max_cwnd, MTU)]; it starts at
// init_cwnd when set, else at the top (UEC: cwnd = MaxWnd, 1.5 BDP).
//
// Start (not in UEC 1.0): a QP that starts knows nothing of the queues on its path, and K QPs
// that start together into one port (an incast) put K x their window on it at once. At line
// rate a 1.5 BDP window takes 1.5 base RTTs to leave the NIC, while a trimmed header comes
// back within about one bare round trip, so the tail of the first window can still be held
// back. Until a window's worth of bytes (the starting cwnd) has been acked, the first trim
// ends the start: cwnd is cut to what is in flight (never raised; at least the floor), so
// nothing more of the first window goes out until ACKs make room, and the UEC rules go on from
// there. Only a trim: a port that trims has a full queue, whereas a CE mark below target is a
// collision on a sprayed path (left to path selection) and one above target comes back too
// late to hold anything (mrc-sim: drops unchanged, completion worse; perf/RESULTS.md). A QP
// that sees no trim keeps its whole first window. Counted in NsccStats::start_exits.
//
// Constants are float parameters as in the OCP struct; see NsccConfig::defaults().
#pragma once

#include <cstdint>

#include "mrc/engine/types.h"

namespace mrc::engine {

/// EWMA weight of one delay sample in avg_delay() (UEC reference model: 0.0125).
inline constexpr double kNsccDelayEwmaWeight = 0.0125;
/// Raw delay under which an ACK counts as "delay ~= 0" for fast increase (htsim: 1 us).
inline constexpr Duration kNsccFastIncreaseDelay = std::chrono::microseconds{1};
/// Reference network of the UEC scaling: 100 Gb/s x 12 us = 150,000 bytes.
inline constexpr uint64_t kNsccReferenceBdp = 150000;
/// The UEC reference RTT, ns: the one definition of the 12 us default (policy.h kBaseRttStart).
inline constexpr uint32_t kNsccReferenceRttNs = 12000;
/// UEC MaxWnd in BDPs: max_cwnd = 1.5 x BDP (defaults(); a max_cwnd / 1.5 is the BDP).
inline constexpr double kNsccMaxWndBdps = 1.5;

/// OCP MRC `struct mrc_ctl_cc_nscc_cfg`, field for field (same names, order, units: ns and
/// bytes; OCP's float constants widened to double), plus `alpha`, which OCP leaves to the
/// device. With a = BDP / kNsccReferenceBdp and b = target_delay / 12 us, the UEC defaults are
/// in the comments. A default-constructed config is defaults(100 Gb/s, 12 us, 4096, true).
struct NsccConfig {
  uint8_t disable_qa = 0;                   // non-zero: quick adapt off
  uint32_t adjust_bytes_threshold = 32768;  // bytes acked that trigger a fulfill adjustment (8 MTU)
  // ns; timed adjustment period, eta each (base RTT)
  uint32_t adjust_period_threshold = kNsccReferenceRttNs;
  // ns; unloaded RTT of the longest path; 0 = smallest RTT sample
  uint32_t base_rtt = kNsccReferenceRttNs;
  double eta = 614.4;             // bytes added to cwnd once per adjust period (0.15 MTU a)
  double fi = 20480;              // bytes; fair increase adds ~fi bytes per RTT (5 MTU a)
  double fi_scale = 0.25;         // fast increase: cwnd += fi_scale * acked bytes (0.25 a)
  double gamma = 0.8;             // MD gain on the excess (avg - target) / avg, in [0, 1] (0.8)
  double max_md_jump = 0.5;       // smallest factor one MD multiplies cwnd by, in (0, 1] (0.5)
  uint32_t max_cwnd = 225000;     // bytes; window ceiling and starting window (1.5 BDP)
  uint8_t qa_gate = 3;            // quick adapt only if achieved < max_cwnd >> qa_gate (3)
  uint32_t qa_threshold = 36000;  // ns; raw delay above this calls for quick adapt (4 target)
  uint32_t target_delay = 9000;   // ns; queueing delay target (0.75 base RTT trimming, else 1.0)
  // Not in the OCP struct (the device derives it): proportional-increase gain, bytes per ns of
  // delay headroom (4 MTU a b / target). 0 = derive it from max_cwnd (BDP = max_cwnd / 1.5).
  double alpha = 4.0 * 4096 * 0.75 / 9000;
  // Not in the OCP struct either: the rate hints of an MRC QP hint (init/min rate x base RTT),
  // bytes. init_cwnd: the starting window, 0 = max_cwnd (UEC). cwnd_floor: the window never
  // goes below max(MTU, cwnd_floor); 0 = MTU.
  uint32_t init_cwnd = 0;
  uint32_t cwnd_floor = 0;
  // Not in the OCP struct: non-zero runs the delay-based decrease (above; not in UEC 1.0).
  // 0 leaves a standing queue without CE marks to fair increase, as UEC does.
  uint8_t delay_decrease = 1;

  /// Every constant from the link: BDP = nic_bps / 8 x base_rtt; target = 0.75 base_rtt with
  /// trimming, 1.0 without; the rest as in the field comments. base_rtt must be > 0 here (it
  /// sizes the window); set the result's base_rtt to 0 afterwards to measure it instead.
  /// Values beyond the OCP field widths saturate (validate() still applies).
  static NsccConfig defaults(uint64_t nic_bps, Duration base_rtt, uint32_t mtu, bool trimming);

  bool operator==(const NsccConfig&) const = default;
};

/// nullptr when `c` is usable, else a message naming the bad field ("nscc.gamma: ...").
const char* validate(const NsccConfig& c);

/// UEC alpha = 4 MTU a b / target_delay with a = bdp / kNsccReferenceBdp and b = target_delay /
/// 12 us (bytes per ns; equal to 4 MTU a / 12 us: independent of the target).
double nscc_alpha(uint32_t mtu, double bdp_bytes, uint32_t target_delay_ns);

/// Counters only grow; cwnd and min_cwnd are gauges (bytes).
struct NsccStats {
  uint64_t acks = 0;                    // on_ack calls that carried an RTT sample
  uint64_t proportional_increases = 0;  // ACKs in the no-ECN, below-target case
  uint64_t fast_increases = 0;          // ... of which grew cwnd by fast increase
  uint64_t fair_increases = 0;          // ACKs in the no-ECN, at/above-target case
  uint64_t holds = 0;                   // ACKs in the ECN, below-target case
  uint64_t decreases = 0;               // multiplicative decreases applied (ECN)
  uint64_t delay_decreases = 0;         // delay-based decreases applied (a standing queue, no CE)
  uint64_t quick_adapts = 0;            // quick adapts that set cwnd
  uint64_t ignored_acks = 0;            // ECN-marked ACKs ignored after a quick adapt
  uint64_t adjustments = 0;             // fulfill adjustments
  uint64_t trims = 0;                   // on_nack_trim calls
  uint64_t losses = 0;                  // on_loss calls
  uint64_t losses_undone = 0;           // on_spurious_loss calls
  uint64_t start_exits = 0;             // first windows cut short by a trim (Start above)
  uint64_t cwnd = 0;
  uint64_t min_cwnd = 0;  // smallest window so far
  uint64_t increases() const { return proportional_increases + fair_increases; }
};

/// Where Nscc::base_rtt() comes from.
///   kProfile: config base_rtt lowered by any smaller RTT sample (0: the smallest sample), what
///             a CC profile's base_rtt means (OCP: the unloaded RTT of the longest path).
///   kGiven:   config base_rtt (> 0) as given; samples never lower it. The engine's learned base
///             (engine/policy.h BaseRttFilter: a windowed minimum plus the driver's send burst),
///             re-given with set_config whenever it moves: a lifetime minimum sample below it
///             would put a busy QP's delay above target for good.
enum class NsccBase : uint8_t { kProfile, kGiven };

/// One QP's NSCC window. The engine calls on_ack for every ACK that acknowledges new bytes,
/// on_nack_trim for each trimmed packet NACKed, on_loss when a packet is declared lost (RTO or
/// inferred), and reads cwnd() / can_send() before sending. Preconditions: validate(config) is
/// nullptr and mtu > 0 (validate a CC profile when it is created or modified).
/// 64-byte aligned (also on the heap, where the engine keeps each QP's: Qp::cc), so that what
/// a packet sent and an ACK touch is one cache line.
class alignas(64) Nscc {
 public:
  Nscc(const NsccConfig& config, uint32_t mtu, NsccBase base = NsccBase::kProfile);

  /// Congestion window, bytes, in [max(MTU, cwnd_floor), max(max_cwnd, MTU)].
  uint64_t cwnd() const { return static_cast<uint64_t>(cwnd_); }
  /// UEC CanSend: one more MTU fits under the window.
  bool can_send(uint64_t bytes_in_flight) const { return bytes_in_flight + mtu_ <= cwnd(); }

  /// `newly_acked_bytes` left the network; `rtt_sample` is this ACK's RTT (0 if it has none:
  /// then only the byte counters move); `ecn_ce` is the echoed CE mark; `bytes_in_flight` is
  /// what is still in flight after this ACK.
  void on_ack(Time now, uint64_t newly_acked_bytes, Duration rtt_sample, bool ecn_ce,
              uint64_t bytes_in_flight);
  /// A packet of `bytes` (nominal size) was trimmed and NACKed; `bytes_in_flight` is what is
  /// still in flight without it.
  void on_nack_trim(Time now, uint32_t bytes, uint64_t bytes_in_flight);
  /// A packet was declared lost (RTO or inferred): cwnd loses one MTU.
  void on_loss(Time now);
  /// A packet declared lost (on_loss) was acknowledged after all (a spurious loss: it was
  /// late, not lost): the MTU on_loss took is given back, or less if on_loss took less (the
  /// window was at its floor); never more in all than the losses took. The ignore span the
  /// loss extended is not undone.
  void on_spurious_loss();

  /// Replaces the constants (a CC profile modified online, a learned base RTT that moved) and
  /// how base_rtt() is taken; the window and the measurements are kept, cwnd clamped to the
  /// new bounds. kGiven needs config.base_rtt > 0.
  void set_config(const NsccConfig& config, NsccBase base = NsccBase::kProfile);
  const NsccConfig& config() const { return config_; }

  /// kProfile: min(config base_rtt, every RTT sample); the smallest sample when config
  /// base_rtt is 0; 0 before any. kGiven: config base_rtt.
  Duration base_rtt() const;
  NsccBase base_mode() const { return base_; }
  /// EWMA of the queueing delay samples (kNsccDelayEwmaWeight per sample).
  Duration avg_delay() const { return Duration{static_cast<int64_t>(avg_delay_ns_)}; }
  NsccStats stats() const;

 private:
  void start(Time now);
  bool quick_adapt(Time now, bool is_loss, bool ecn_ce, Duration delay);
  void proportional_increase(uint64_t acked, Duration delay);
  void multiplicative_decrease(Time now);
  void delay_decrease(Time now, uint64_t acked, Duration delay, Duration rtt_sample);
  void fulfill_adjustment(Time now);
  void update_delay(Duration delay);
  void set_cwnd(double bytes);
  void end_start(uint64_t in_flight);

  // Laid out by heat (a QP of thousands reads its window only now and then, so each line a
  // packet touches is a cache miss): the first line holds all that a packet sent (can_send)
  // and an ACK with no RTT sample touch; the constants, the delay state and the stats after.
  // The class is 64-byte aligned, so that line is one cache line (nscc.cc checks that those
  // fields lie in the first 64 bytes).
  double cwnd_ = 0;  // bytes; fractional so that small inc / cwnd steps add up
  uint32_t mtu_;
  NsccBase base_ = NsccBase::kProfile;
  bool starting_ = true;         // the first window: see "Start" above
  bool increase_mode_ = false;   // fast increase running
  bool trigger_qa_ = false;      // a trim since the last quick adapt
  bool started_ = false;         // the time fields below are set
  bool qa_armed_ = false;        // a quick-adapt period is running
  uint64_t received_bytes_ = 0;  // acked since the last fulfill adjustment
  uint64_t achieved_bytes_ = 0;  // acked in the current quick-adapt period
  uint64_t bytes_ignored_ = 0;
  uint64_t last_in_flight_ = 0;  // latest bytes_in_flight reported (quick adapt's ignore span)
  uint64_t start_left_ = 0;      // bytes still to be acked before the start is over
  // ---- an ACK with an RTT sample, losses, trims ----
  double alpha_ = 0;    // effective alpha, bytes per ns
  double max_wnd_ = 0;  // max(max_cwnd, mtu), bytes
  double floor_ = 0;    // bytes; max(MTU, config cwnd_floor), at most max_wnd_
  Duration min_rtt_ = kNever;  // smallest RTT sample
  double avg_delay_ns_ = 0;
  double inc_bytes_ = 0;         // accumulated increase, bytes^2, applied as inc / cwnd
  uint64_t fi_count_ = 0;        // bytes acked in a row with delay < kNsccFastIncreaseDelay
  double loss_taken_ = 0;        // bytes on_loss took off cwnd and no on_spurious_loss gave back
  uint64_t bytes_to_ignore_ = 0;
  uint64_t standing_bytes_ = 0;  // acked in a row with delay >= target and no CE
  Duration standing_min_{};      // smallest delay of that run
  Time qa_endtime_{};
  Time last_adjust_time_{};
  Time last_dec_time_{};
  Time last_delay_dec_time_{};
  NsccConfig config_;
  NsccStats stats_;
};

}  // namespace mrc::engine
