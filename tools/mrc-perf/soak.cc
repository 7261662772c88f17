#include "soak.h"

#include <random>
#include <string>

namespace mrc::perf {

std::vector<TimedFault> soak_schedule(const srv6::Fabric& f, uint32_t client, uint32_t server,
                                      const SoakPlan& plan) {
  std::mt19937_64 rng(plan.seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  const auto& c = f.config();
  std::vector<TimedFault> out;
  double t = plan.first_s;
  const int kinds = plan.trimming ? 7 : 6;
  while (true) {
    const double hold = uniform(plan.hold_min_s, plan.hold_max_s);
    if (t + hold > plan.duration_s - 1) break;
    const std::string p = "p" + std::to_string(pick(c.planes));
    const std::string s = "s" + std::to_string(pick(c.spines));
    const uint32_t h = pick(2) == 0 ? client : server;
    const std::string host = "h" + std::to_string(h);
    const std::string t0 = "t" + std::to_string(f.t0_of(h));
    std::string fault, repair;
    switch (pick(static_cast<uint32_t>(kinds))) {
      case 0:  // a spine fails (the plane keeps its other spines)
        fault = "down t1 " + p + " " + s;
        repair = "up t1 " + p + " " + s;
        break;
      case 1:  // a host's T0 fails: that plane is gone for it, the other planes stay
        fault = "down t0 " + host + " " + p;
        repair = "up t0 " + host + " " + p;
        break;
      case 2:  // an uplink flaps every 50..300 ms
        fault = "flap link " + p + " " + t0 + " " + s + " " + std::to_string(50 + pick(251));
        repair = "unflap link " + p + " " + t0 + " " + s;
        break;
      case 3:  // a spine silently drops everything
        fault = "blackhole t1 " + p + " " + s;
        repair = "unblackhole t1 " + p + " " + s;
        break;
      case 4:  // random loss on an uplink, 1..5 %
        fault = "loss link " + p + " " + t0 + " " + s + " " + std::to_string(1 + pick(5));
        repair = "loss link " + p + " " + t0 + " " + s + " 0";
        break;
      case 5:  // an uplink goes down
        fault = "down link " + p + " " + t0 + " " + s;
        repair = "up link " + p + " " + t0 + " " + s;
        break;
      default:  // trimming at a host's port: a small queue that cuts packets to the header
        fault = "trim link " + host + " " + p + " 0.5 32";
        repair = "untrim link " + host + " " + p;
        break;
    }
    out.push_back(TimedFault{t, fault});
    out.push_back(TimedFault{t + hold, repair});
    t += hold + uniform(plan.gap_min_s, plan.gap_max_s);
  }
  return out;
}

}  // namespace mrc::perf
