#include "mrc/engine/policy.h"

#include <algorithm>
#include <cmath>

#include "mrc/engine/engine.h"
#include "mrc/wire/wire.h"

namespace mrc::engine {

bool qp_transition_ok(QpState from, QpState to) {
  if (to == QpState::kReset || to == QpState::kError) return true;
  switch (from) {
    case QpState::kReset:
      return to == QpState::kInit;
    case QpState::kInit:
      return to == QpState::kInit || to == QpState::kRtr;
    case QpState::kRtr:
      return to == QpState::kRts;
    case QpState::kRts:
      return to == QpState::kRts || to == QpState::kSqd;
    case QpState::kSqd:
      return to == QpState::kRts || to == QpState::kSqd;
    case QpState::kError:
      return false;
  }
  return false;
}

Duration cc_start_base_rtt(const EngineConfig& cfg) {
  if (cfg.base_rtt > Duration{0}) return cfg.base_rtt;
  return std::max(kBaseRttStart + cfg.send_burst, cfg.min_base_rtt);
}

Duration spray_allowance(const EngineConfig& cfg, uint32_t mtu, uint16_t planes) {
  if (cfg.nic_bps == 0) return Duration{0};
  const double port_bps = static_cast<double>(cfg.nic_bps) / std::max<uint16_t>(planes, 1);
  const double bits = (static_cast<double>(mtu) + wire::kDataHeaderSize) * 8.0;
  return Duration{std::llround(kSprayHops * bits / port_bps * 1e9)};
}

NsccConfig derived_cc(const EngineConfig& cfg, uint32_t mtu, Duration base_rtt) {
  return NsccConfig::defaults(cfg.nic_bps, base_rtt, mtu, cfg.trimming);
}

std::optional<NsccConfig> effective_cc(const EngineConfig& cfg, uint32_t mtu,
                                       const std::optional<NsccConfig>& profile) {
  if (profile) return profile;
  if (!cfg.congestion_control) return std::nullopt;
  NsccConfig c = derived_cc(cfg, mtu, cc_start_base_rtt(cfg));
  if (cfg.base_rtt == Duration{0}) c.base_rtt = 0;  // learned
  return c;
}

NsccConfig with_rates(NsccConfig cc, const EngineConfig& cfg, uint32_t mtu, const CcRates& r) {
  const Duration rtt = cc.base_rtt ? Duration{cc.base_rtt} : cc_start_base_rtt(cfg);
  auto window = [&](uint64_t mbps) {
    const double bytes =
        static_cast<double>(mbps) * 1e6 / 8 * static_cast<double>(rtt.count()) / 1e9;
    return static_cast<uint32_t>(std::min(bytes, 4e9));
  };
  if (r.max_mbps) cc.max_cwnd = std::max(window(r.max_mbps), mtu);
  if (r.init_mbps) cc.init_cwnd = window(r.init_mbps);
  if (r.min_mbps) cc.cwnd_floor = window(r.min_mbps);
  return cc;
}

void BaseRttFilter::on_sample(Time now, Duration rtt) {
  if (rtt <= Duration{0}) return;
  if (cur_start_ == kNever) cur_start_ = now;
  // Close the epochs that ended before `now`; one with no sample leaves its slot empty.
  for (size_t k = 0; now - cur_start_ >= kEpoch && k <= kEpochs; ++k) {
    mins_[next_] = cur_min_;
    next_ = (next_ + 1) % kEpochs;
    cur_min_ = Duration{0};
    cur_start_ += kEpoch;
  }
  if (now - cur_start_ >= kEpoch) cur_start_ = now;  // idle longer than the window
  if (cur_min_ == Duration{0} || rtt < cur_min_) cur_min_ = rtt;
  set_anchor(rtt);
}

Duration BaseRttFilter::estimate() const {
  Duration m = cur_min_;
  for (Duration e : mins_)
    if (e > Duration{0} && (m == Duration{0} || e < m)) m = e;
  if (m == Duration{0}) return m;
  m = std::min(m, kMaxRise * anchor_);
  // The queues a packet meets at the hops of its path are at most what the path itself adds:
  // spray_ (kSprayHops packets) is capped by the minimum, which holds the packet's own
  // serialization at each of its hops (a shorter path, or a NIC slower than configured).
  return std::max(m + std::min(spray_, m) + burst_, floor_);
}

bool BaseRttFilter::moved(Duration in_use) const {
  const Duration e = estimate();
  if (e == Duration{0}) return false;
  if (in_use == Duration{0}) return true;
  return e * 10 < in_use * 9 || e * 10 > in_use * 11;
}

}  // namespace mrc::engine
