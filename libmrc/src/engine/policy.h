// The connection policy: the decisions every front end (OCP API, verbs layer, NCCL plugin,
// the observer's cc_show) shares, each in one function. A default changes here and every
// face gets it; the faces pass their overrides (a CC profile, rate hints), never re-derive.
// Threading: pure functions, and BaseRttFilter is owned by one QP (the engine's thread).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "engine/nscc.h"
#include "engine/types.h"

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
/// Mbit/s; 0 = not given.
struct CcRates {
  uint64_t init_mbps = 0;  // starting window
  uint64_t min_mbps = 0;   // window floor
  uint64_t max_mbps = 0;   // window ceiling
  bool any() const { return init_mbps || min_mbps || max_mbps; }
};

/// `cc` with the rates turned into windows of rate x RTT bytes (saturating at 4e9): max_cwnd
/// (at least one MTU), init_cwnd, cwnd_floor. The RTT is cc.base_rtt, else
/// cc_start_base_rtt(cfg) when cc learns its base RTT.
NsccConfig with_rates(NsccConfig cc, const EngineConfig& cfg, uint32_t mtu, const CcRates& r);

/// A QP's learned base RTT: the smallest RTT sample over a sliding window of the last
/// kEpochs epochs of kEpochSamples samples each, plus `burst` (EngineConfig::send_burst: what a
/// busy QP's packets wait behind the driver's own bursts), and never below `floor`
/// (EngineConfig::min_base_rtt). One outlier minimum ages out after the window instead of
/// sizing the window for the QP's life, and a path whose RTT rises (a longer route, a slower
/// fabric) is followed. The minimum is the anchor because it does not grow with the queue the
/// QP itself builds (a percentile of loaded samples would, and the window with it). The
/// engine re-derives the QP's NSCC constants when moved() says the estimate left the one in
/// use by more than 10%.
class BaseRttFilter {
 public:
  static constexpr uint32_t kEpochSamples = 256;
  static constexpr size_t kEpochs = 4;

  explicit BaseRttFilter(Duration floor = Duration{0}, Duration burst = Duration{0})
      : floor_(floor), burst_(burst) {}

  /// One RTT sample (> 0; others are ignored).
  void on_sample(Duration rtt);
  /// max(floor, windowed minimum + burst); 0 before the first sample.
  Duration estimate() const;
  /// True when estimate() differs from `in_use` by more than 10% (or in_use is 0 and there
  /// is an estimate).
  bool moved(Duration in_use) const;

 private:
  Duration floor_;
  Duration burst_;
  std::array<Duration, kEpochs> mins_{};  // minimum of each closed epoch; 0 = none yet
  size_t next_ = 0;                       // the slot the current epoch closes into
  Duration cur_min_{0};                   // minimum of the open epoch; 0 = no sample yet
  uint32_t cur_n_ = 0;                    // samples in the open epoch
};

}  // namespace mrc::engine
