#include "mrc/engine/nscc.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cmath>
#include <limits>

namespace mrc::engine {
namespace {

uint32_t saturate_u32(double v) {
  if (!(v > 0)) return 0;
  if (v >= static_cast<double>(std::numeric_limits<uint32_t>::max())) {
    return std::numeric_limits<uint32_t>::max();
  }
  return static_cast<uint32_t>(std::llround(v));
}

bool finite_nonnegative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

double nscc_alpha(uint32_t mtu, double bdp_bytes, uint32_t target_delay_ns) {
  if (target_delay_ns == 0) return 0;
  const double a = bdp_bytes / static_cast<double>(kNsccReferenceBdp);
  const double b = static_cast<double>(target_delay_ns) / kNsccReferenceRttNs;
  return 4.0 * mtu * a * b / target_delay_ns;
}

NsccConfig NsccConfig::defaults(uint64_t nic_bps, Duration base_rtt, uint32_t mtu, bool trimming) {
  const double rtt_ns = static_cast<double>(base_rtt.count());
  const double bdp = static_cast<double>(nic_bps) / 8.0 * rtt_ns * 1e-9;
  const double a = bdp / static_cast<double>(kNsccReferenceBdp);
  NsccConfig c;
  c.disable_qa = 0;
  c.adjust_bytes_threshold = saturate_u32(8.0 * mtu);
  c.adjust_period_threshold = saturate_u32(rtt_ns);
  c.base_rtt = saturate_u32(rtt_ns);
  c.target_delay = saturate_u32((trimming ? 0.75 : 1.0) * rtt_ns);
  c.eta = 0.15 * mtu * a;
  c.fi = 5.0 * mtu * a;
  c.fi_scale = 0.25 * a;
  c.gamma = 0.8;
  c.max_md_jump = 0.5;
  c.max_cwnd = saturate_u32(kNsccMaxWndBdps * bdp);
  c.qa_gate = 3;
  c.qa_threshold = saturate_u32(4.0 * c.target_delay);
  c.alpha = nscc_alpha(mtu, bdp, c.target_delay);
  return c;
}

const char* validate(const NsccConfig& c) {
  if (c.target_delay == 0) return "nscc.target_delay: must be > 0 ns";
  if (c.adjust_period_threshold == 0) return "nscc.adjust_period_threshold: must be > 0 ns";
  if (c.max_cwnd == 0) return "nscc.max_cwnd: must be > 0 bytes";
  if (!finite_nonnegative(c.eta)) return "nscc.eta: must be a finite number >= 0";
  if (!finite_nonnegative(c.fi)) return "nscc.fi: must be a finite number >= 0";
  if (!finite_nonnegative(c.fi_scale)) return "nscc.fi_scale: must be a finite number >= 0";
  if (!(c.gamma >= 0 && c.gamma <= 1)) return "nscc.gamma: must be in [0, 1]";
  if (!(c.max_md_jump > 0 && c.max_md_jump <= 1)) return "nscc.max_md_jump: must be in (0, 1]";
  if (c.qa_gate > 31) return "nscc.qa_gate: must be at most 31 (a shift of max_cwnd)";
  if (!finite_nonnegative(c.alpha)) return "nscc.alpha: must be a finite number >= 0";
  return nullptr;
}

Nscc::Nscc(const NsccConfig& config, uint32_t mtu, NsccBase base) : mtu_(mtu) {
  static_assert(offsetof(Nscc, start_left_) + sizeof start_left_ <= 64 &&
                    offsetof(Nscc, qa_armed_) < 64 && offsetof(Nscc, mtu_) < 64,
                "what a packet sent and an ACK with no RTT sample touch: the first line");
  assert(mtu > 0);
  set_config(config, base);
  cwnd_ = config.init_cwnd > 0 ? std::clamp<double>(config.init_cwnd, floor_, max_wnd_) : max_wnd_;
  stats_.min_cwnd = cwnd();
  start_left_ = cwnd();
}

void Nscc::set_config(const NsccConfig& config, NsccBase base) {
  assert(validate(config) == nullptr);
  assert(base == NsccBase::kProfile || config.base_rtt > 0);
  config_ = config;
  base_ = base;
  max_wnd_ = std::max<double>(config.max_cwnd, mtu_);
  floor_ = std::min<double>(std::max<double>(config.cwnd_floor, mtu_), max_wnd_);
  alpha_ = config.alpha > 0
               ? config.alpha
               : nscc_alpha(mtu_, config.max_cwnd / kNsccMaxWndBdps, config.target_delay);
  if (cwnd_ > 0) set_cwnd(cwnd_);
}

Duration Nscc::base_rtt() const {
  const Duration configured{config_.base_rtt};
  if (base_ == NsccBase::kGiven) return configured;
  if (configured.count() == 0) return min_rtt_ == kNever ? Duration{0} : min_rtt_;
  return std::min(configured, min_rtt_);
}

NsccStats Nscc::stats() const {
  NsccStats s = stats_;
  s.cwnd = cwnd();
  return s;
}

void Nscc::start(Time now) {
  if (started_) return;
  started_ = true;
  last_adjust_time_ = now;
  last_dec_time_ = now;
  last_delay_dec_time_ = now;
}

void Nscc::set_cwnd(double bytes) {
  cwnd_ = std::clamp(bytes, floor_, max_wnd_);
  stats_.min_cwnd = std::min(stats_.min_cwnd, cwnd());
}

void Nscc::update_delay(Duration delay) {
  avg_delay_ns_ = kNsccDelayEwmaWeight * static_cast<double>(delay.count()) +
                  (1 - kNsccDelayEwmaWeight) * avg_delay_ns_;
}

void Nscc::on_ack(Time now, uint64_t newly_acked_bytes, Duration rtt_sample, bool ecn_ce,
                  uint64_t bytes_in_flight) {
  start(now);
  last_in_flight_ = bytes_in_flight;
  bytes_ignored_ += newly_acked_bytes;
  received_bytes_ += newly_acked_bytes;
  achieved_bytes_ += newly_acked_bytes;
  if (starting_) {
    start_left_ -= std::min(start_left_, newly_acked_bytes);
    starting_ = start_left_ > 0;
  }
  if (rtt_sample <= Duration{0}) return;
  ++stats_.acks;

  min_rtt_ = std::min(min_rtt_, rtt_sample);
  const Duration delay = std::max(rtt_sample - base_rtt(), Duration{0});
  update_delay(delay);

  if (quick_adapt(now, /*is_loss=*/false, ecn_ce, delay)) return;

  const Duration target{config_.target_delay};
  if (ecn_ce || delay < target) standing_bytes_ = 0;
  if (!ecn_ce && delay >= target) {
    ++stats_.fair_increases;
    inc_bytes_ += config_.fi * static_cast<double>(newly_acked_bytes);
    if (config_.delay_decrease != 0) delay_decrease(now, newly_acked_bytes, delay, rtt_sample);
  } else if (!ecn_ce) {
    ++stats_.proportional_increases;
    proportional_increase(newly_acked_bytes, delay);
  } else if (delay >= target) {
    multiplicative_decrease(now);
  } else {
    ++stats_.holds;
  }

  if (now - last_adjust_time_ >= Duration{config_.adjust_period_threshold} ||
      received_bytes_ > config_.adjust_bytes_threshold) {
    fulfill_adjustment(now);
  }
}

void Nscc::on_nack_trim(Time now, uint32_t bytes, uint64_t bytes_in_flight) {
  start(now);
  ++stats_.trims;
  last_in_flight_ = bytes_in_flight;
  const Duration configured{config_.base_rtt};
  update_delay(configured.count() != 0 ? configured : base_rtt());
  bytes_ignored_ += bytes;
  trigger_qa_ = true;
  if (starting_) end_start(last_in_flight_);
  // UEC passes the trim to quick adapt as an ECN-marked loss with no delay sample.
  if (!quick_adapt(now, /*is_loss=*/true, /*ecn_ce=*/true, Duration{0})) {
    set_cwnd(cwnd_ - bytes);
  }
}

void Nscc::end_start(uint64_t in_flight) {
  starting_ = false;
  ++stats_.start_exits;
  set_cwnd(std::min(cwnd_, static_cast<double>(in_flight)));
}

void Nscc::on_loss(Time now) {
  start(now);
  ++stats_.losses;
  last_in_flight_ -= std::min<uint64_t>(last_in_flight_, mtu_);
  bytes_ignored_ += mtu_;
  const double before = cwnd_;
  set_cwnd(cwnd_ - mtu_);
  loss_taken_ += before - cwnd_;
}

void Nscc::on_spurious_loss() {
  const double give = std::min(loss_taken_, static_cast<double>(mtu_));
  loss_taken_ -= give;
  ++stats_.losses_undone;
  set_cwnd(cwnd_ + give);
}

bool Nscc::quick_adapt(Time now, bool is_loss, bool ecn_ce, Duration delay) {
  if (config_.disable_qa != 0) return false;
  bool done_or_ignore = false;
  if (bytes_ignored_ < bytes_to_ignore_ && ecn_ce) {
    ++stats_.ignored_acks;
    done_or_ignore = true;
  } else if (now >= qa_endtime_) {
    const uint64_t gate = static_cast<uint64_t>(max_wnd_) >> config_.qa_gate;
    if (qa_armed_ && (trigger_qa_ || is_loss || delay > Duration{config_.qa_threshold}) &&
        achieved_bytes_ < gate) {
      ++stats_.quick_adapts;
      set_cwnd(std::min(cwnd_, static_cast<double>(achieved_bytes_)));
      bytes_to_ignore_ = last_in_flight_;
      bytes_ignored_ = 0;
      trigger_qa_ = false;
      done_or_ignore = true;
    }
    achieved_bytes_ = 0;
    qa_endtime_ = now + base_rtt() + Duration{config_.target_delay};
    qa_armed_ = true;
  }
  if (done_or_ignore) {
    inc_bytes_ = 0;
    received_bytes_ = 0;
  }
  return done_or_ignore;
}

void Nscc::proportional_increase(uint64_t acked, Duration delay) {
  if (delay < kNsccFastIncreaseDelay) {
    fi_count_ += acked;
    if (fi_count_ > cwnd() || increase_mode_) {
      ++stats_.fast_increases;
      increase_mode_ = true;
      set_cwnd(cwnd_ + config_.fi_scale * static_cast<double>(acked));
      return;
    }
  } else {
    fi_count_ = 0;
  }
  increase_mode_ = false;
  const double headroom_ns = static_cast<double>((Duration{config_.target_delay} - delay).count());
  inc_bytes_ += alpha_ * static_cast<double>(acked) * headroom_ns;
}

void Nscc::multiplicative_decrease(Time now) {
  increase_mode_ = false;
  fi_count_ = 0;
  const double target = config_.target_delay;
  if (avg_delay_ns_ > target && now - last_dec_time_ > base_rtt()) {
    ++stats_.decreases;
    const double factor =
        std::max(1 - config_.gamma * (avg_delay_ns_ - target) / avg_delay_ns_, config_.max_md_jump);
    set_cwnd(cwnd_ * factor);
    last_dec_time_ = now;
  }
}

void Nscc::delay_decrease(Time now, uint64_t acked, Duration delay, Duration rtt_sample) {
  standing_min_ = standing_bytes_ == 0 ? delay : std::min(standing_min_, delay);
  standing_bytes_ += acked;
  const uint64_t window = std::max<uint64_t>(cwnd(), config_.adjust_bytes_threshold);
  if (standing_bytes_ < window || now - last_delay_dec_time_ < rtt_sample) return;
  ++stats_.delay_decreases;
  increase_mode_ = false;
  fi_count_ = 0;
  const double m = static_cast<double>(standing_min_.count());
  const double target = config_.target_delay;
  set_cwnd(cwnd_ * std::max(1 - config_.gamma * (m - target) / m, config_.max_md_jump));
  inc_bytes_ = 0;
  received_bytes_ = 0;
  standing_bytes_ = 0;
  last_delay_dec_time_ = now;
}

void Nscc::fulfill_adjustment(Time now) {
  ++stats_.adjustments;
  double w = cwnd_ + inc_bytes_ / cwnd_;
  // UEC moves last_adjust_time only on the timed path, so eta comes once per period.
  if (now - last_adjust_time_ >= Duration{config_.adjust_period_threshold}) {
    last_adjust_time_ = now;
    w += config_.eta;
  }
  set_cwnd(w);
  inc_bytes_ = 0;
  received_bytes_ = 0;
}

}  // namespace mrc::engine
