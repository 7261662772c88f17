// The connection policy: the decisions every front end (OCP API, verbs layer, NCCL plugin,
// the observer's cc_show) shares, each in one function. A default changes here and every
// face gets it; the faces pass their overrides (a CC profile, rate hints), never re-derive.
// The attribute defaults (ack timeout, retry budget, window) are QpAttr's (engine.h, retry.h).
// Threading: pure functions, and BaseRttFilter is owned by one QP (the engine's thread).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "mrc/engine/nscc.h"
#include "mrc/engine/types.h"

namespace mrc::engine {

struct EngineConfig;

/// The minimum RTT a learned base RTT assumes before the first sample: the UEC reference RTT.
inline constexpr Duration kBaseRttStart{kNsccReferenceRttNs};

/// True when verbs / OCP allow a QP to move from `from` to `to` (IB spec 10.3.1, the subset
/// MRC QPs have): any state to RESET or ERROR; RESET -> INIT; INIT -> INIT, RTR; RTR -> RTS;
/// RTS -> RTS, SQD; SQD -> RTS, SQD. The engine's modify_qp and the OCP API both check this.
bool qp_transition_ok(QpState from, QpState to);

/// The base RTT the QP's NSCC constants are derived from before it has measured one:
/// cfg.base_rtt when configured, else max(kBaseRttStart + cfg.send_burst, cfg.min_base_rtt)
/// (what BaseRttFilter would say of a kBaseRttStart sample).
Duration cc_start_base_rtt(const EngineConfig& cfg);

/// Hops of the longest path a learned base RTT allows for (engine/policy.h spray_allowance):
/// host -> T0 -> T1 -> T0 -> host, the two-tier multi-plane Clos MRC is built for.
inline constexpr int kSprayHops = 4;

/// What a QP sending at line rate over sprayed paths meets on top of its smallest RTT sample:
/// one packet (`mtu` plus the data header) ahead of it at each store-and-forward hop of the
/// longest path (kSprayHops), at a plane port's rate (cfg.nic_bps / `planes`; `planes` 0
/// counts as 1). A fabric loaded by spraying holds about that much at each port when nothing
/// is congested: QPs sprayed over the same planes collide at random, and the smallest sample
/// a busy QP takes is one that met none of it (a lucky minimum). mrc-sim, 64 hosts,
/// permutation at line rate (perf/RESULTS.md 2026-11-26 nsccb): unloaded RTT 21.3 us,
/// smallest samples 21.6-30.7 us, smoothed RTTs 29-49 us; this allowance is 13.3 us. 0 when
/// cfg.nic_bps is 0.
Duration spray_allowance(const EngineConfig& cfg, uint32_t mtu, uint16_t planes);

/// NsccConfig::defaults for this engine's NIC, trimming and `mtu` with `base_rtt` (> 0): the
/// constants of a QP without a CC profile once its base RTT is known.
NsccConfig derived_cc(const EngineConfig& cfg, uint32_t mtu, Duration base_rtt);

/// The QP's effective NSCC constants: `profile` when given (a CC profile: taken as is), else
/// derived_cc(cfg, mtu, cc_start_base_rtt(cfg)) with its base_rtt 0 when cfg.base_rtt is 0 (the
/// engine learns it, BaseRttFilter). nullopt when there is no profile and cfg.congestion_control is
/// off.
std::optional<NsccConfig> effective_cc(const EngineConfig& cfg, uint32_t mtu,
                                       const std::optional<NsccConfig>& profile = std::nullopt);

/// Rate hints of a QP (OCP's MRC QP hint vendor_cfg, the NCCL plugin's NCCL_MRC_CC_*_RATE),
/// Mbit/s; 0 = not given. Carried in QpAttr::cc_rates: the engine applies them with with_rates
/// to whichever profile the QP runs, the automatic one each time its base RTT is re-learned.
struct CcRates {
  uint64_t init_mbps = 0;  // starting window
  uint64_t min_mbps = 0;   // window floor
  uint64_t max_mbps = 0;   // window ceiling
  bool any() const { return init_mbps || min_mbps || max_mbps; }
};

/// `cc` with the rates turned into windows of rate x RTT bytes (saturating at 4e9): max_cwnd
/// (at least one MTU), init_cwnd, cwnd_floor. The RTT is cc.base_rtt, else
/// cc_start_base_rtt(cfg) (a profile whose base_rtt is 0).
NsccConfig with_rates(NsccConfig cc, const EngineConfig& cfg, uint32_t mtu, const CcRates& r);

/// A QP's learned base RTT: the smallest RTT sample over a sliding window (the open epoch and
/// the kEpochs before it, kEpoch each: 8-10 s), plus `burst` (EngineConfig::send_burst: what a
/// busy QP's packets wait behind the driver's own bursts) and plus `spray` (spray_allowance:
/// what its packets meet at the fabric's ports when the fabric is busy but not congested; at
/// most the minimum itself), and never below `floor`
/// (EngineConfig::min_base_rtt). A minimum ages out after the window instead of sizing the
/// window for the QP's life, and a path whose RTT rises (a longer route, a slower fabric) is
/// followed. The anchor is a minimum over seconds because the samples of a busy QP carry the
/// queue its own window builds: a percentile of them, or a minimum over milliseconds while
/// the queue never drains, grows the window that builds it (measured on the namespace fabric:
/// a 1,280-sample window learned 415 us where 300 us is right). A lucky minimum (a sample that
/// met no scheduling delay) is at most the datapath's own RTT below the true one, and
/// `burst`, not the minimum, is most of the base on a software datapath. A lucky minimum on a
/// sprayed fabric is a packet that met no other QP's packet at any port, which a QP at line
/// rate seldom repeats: without `spray` the QPs with the luckiest minima got the smallest
/// windows and set the completion time (mrc-sim 64-host permutation: 0.768 of ideal learned vs
/// 0.949 with the base RTT set by hand; perf/RESULTS.md 2026-11-26 nsccb). The engine
/// re-derives the QP's NSCC constants when moved() says the estimate left the one in use by
/// more than 10%, and NSCC takes the estimate as its base RTT as given (NsccBase::kGiven): its
/// queueing delay is RTT minus this estimate, never minus the QP's smallest sample (a lucky
/// one would put every sample of a busy QP above the target delay).
///
/// Samples that skip the data queue. The engine feeds the filter the RTT of every ACK (the
/// data packet's round trip less the receiver's hold), and two more kinds: the NACK of a
/// trimmed packet (its header jumped the full queue that trimmed it), and the reply to the one
/// PROBE a learned QP sends at its first sign of congestion (a CE mark or a loss: a queue it
/// may have started behind), taken plus the spray allowance
/// (a probe is header-sized: the allowance is what a data packet's own serialization adds at
/// kSprayHops hops at a plane port's rate). Switches serve trimmed headers, ACKs and probes in
/// a control class ahead of data (NDP; the OCP MRC switch profile gives trimmed packets a
/// priority share); where they do not, these samples queue as data does and the minimum is
/// what it would have been. Without them a QP that starts behind a queue that never drains
/// while it runs learns that queue as its base RTT: an incast's far senders (the receiver's
/// port fills before their first packet reaches it) learnt 148-170 us where 21 us is bare,
/// their windows and targets then never let the delay-based decrease fire, and the senders
/// under the receiver's T0, which learnt the bare figure, were starved (mrc-sim 64 hosts,
/// 63 -> 1 into 256 KiB drop-tail ports: 0.87-0.89 of the hand-set figure, 0.97-0.98 with
/// them; perf/RESULTS.md 2026-11-26 incast).
///
/// The windowed minimum may follow a rising RTT only up to kMaxRise x the anchor: the
/// smallest sample this QP, or any QP to the same peer (set_anchor: SharedHealth's per-peer
/// minimum), ever took. Without that bound, QPs that share a port and never let its queue
/// drain learn their own queue as base RTT: a larger base sizes a larger window, which
/// queues more (the namespace soak, 5 QPs each way on 1 Gbit/s ports with no ECN, learned
/// 7.8 ms where 0.6 ms is right, then lost a million packets to the queue it built). A QP
/// that starts behind the others' queue is bounded by the first QP's empty-queue sample.
class BaseRttFilter {
 public:
  static constexpr Duration kEpoch = std::chrono::seconds{2};
  static constexpr size_t kEpochs = 4;
  static constexpr int kMaxRise = 2;

  explicit BaseRttFilter(Duration floor = Duration{0}, Duration burst = Duration{0},
                         Duration spray = Duration{0})
      : floor_(floor), burst_(burst), spray_(spray) {}

  /// One RTT sample (> 0; others are ignored) taken at `now` (non-decreasing).
  void on_sample(Time now, Duration rtt);
  /// A smaller minimum another QP to the same peer measured (0: none); only lowers it.
  void set_anchor(Duration peer_min) {
    if (peer_min > Duration{0} && (anchor_ == Duration{0} || peer_min < anchor_))
      anchor_ = peer_min;
  }
  /// max(floor, m + min(spray, m) + burst) with m = min(windowed minimum, kMaxRise x anchor);
  /// 0 before the first sample. spray is capped by m: the unloaded RTT holds the packet's own
  /// serialization at each hop, so a path with fewer hops than kSprayHops (two hosts under one
  /// T0, a loopback) or a NIC slower than EngineConfig::nic_bps says gets at most twice its
  /// minimum.
  Duration estimate() const;
  /// True when estimate() differs from `in_use` by more than 10% (or in_use is 0 and there
  /// is an estimate).
  bool moved(Duration in_use) const;
  /// The spray allowance given at construction (what a PROBE's sample is taken plus).
  Duration spray() const { return spray_; }

 private:
  Duration floor_;
  Duration burst_;
  Duration spray_;
  std::array<Duration, kEpochs> mins_{};  // minimum of each closed epoch; 0 = none yet
  size_t next_ = 0;                       // the slot the open epoch closes into
  Duration cur_min_{0};                   // minimum of the open epoch; 0 = no sample yet
  Time cur_start_ = kNever;               // when the open epoch began; kNever = none yet
  Duration anchor_{0};                    // smallest sample ever (this QP's or its peer's)
};

}  // namespace mrc::engine
