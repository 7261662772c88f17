#include "faults.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <vector>

namespace mrc::msim {
namespace {

using Op = Fault::Op;
enum class Args : uint8_t { kSpine, kT0, kCable, kFlap, kLoss, kOnOff };
struct Word {
  const char* name;
  Op op;
  Args args;
};
constexpr Word kWords[] = {{"t1-down", Op::kT1Down, Args::kSpine},
                           {"t1-up", Op::kT1Up, Args::kSpine},
                           {"t0-down", Op::kT0Down, Args::kT0},
                           {"t0-up", Op::kT0Up, Args::kT0},
                           {"blackhole-t1", Op::kBlackholeT1, Args::kSpine},
                           {"restore-t1", Op::kRestoreT1, Args::kSpine},
                           {"blackhole-t0", Op::kBlackholeT0, Args::kT0},
                           {"restore-t0", Op::kRestoreT0, Args::kT0},
                           {"link-down", Op::kLinkDown, Args::kCable},
                           {"link-up", Op::kLinkUp, Args::kCable},
                           {"flap", Op::kFlap, Args::kFlap},
                           {"loss", Op::kLoss, Args::kLoss},
                           {"trimming", Op::kTrimming, Args::kOnOff}};

const char* usage(Args a) {
  switch (a) {
    case Args::kSpine:
      return "PLANE SPINE";
    case Args::kT0:
      return "PLANE T0";
    case Args::kCable:
      return "PLANE T0 SPINE";
    case Args::kFlap:
      return "PLANE T0 SPINE PERIOD UNTIL";
    case Args::kLoss:
      return "PLANE T0 SPINE PROB";
    case Args::kOnOff:
      return "on|off";
  }
  return "";
}

bool number(const std::string& s, double& x) {
  const char* e = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), e, x);
  return ec == std::errc() && p == e && std::isfinite(x);
}

}  // namespace

Result<engine::Time, std::string> parse_time(const std::string& t, double ideal_s) {
  using E = Err<std::string>;
  struct Unit {
    const char* suffix;
    double scale;  // seconds per unit; 0: percent of ideal
  };
  constexpr Unit kUnits[] = {{"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"s", 1}, {"%", 0}};
  std::string num = t;
  double scale = 1;
  for (const Unit& u : kUnits) {
    const std::string suf = u.suffix;
    if (t.size() > suf.size() && t.compare(t.size() - suf.size(), suf.size(), suf) == 0) {
      num = t.substr(0, t.size() - suf.size());
      scale = u.scale == 0 ? ideal_s / 100 : u.scale;
      break;
    }
  }
  double x = 0;
  if (!number(num, x) || x < 0)
    return E{"'" + t + "' is not a time (a number >= 0 with s, ms, us, ns or %)"};
  return engine::Time{std::llround(x * scale * 1e9)};
}

Result<Fault, std::string> parse_fault(const std::string& text, const FaultScope& sc) {
  using E = Err<std::string>;
  std::istringstream in(text);
  std::vector<std::string> tok;
  for (std::string w; in >> w;) tok.push_back(w);
  const Word* word = nullptr;
  for (const Word& w : kWords)
    if (tok.size() >= 2 && tok[1] == w.name) word = &w;
  if (!word) {
    std::string err =
        tok.size() < 2 ? "expected 'TIME NAME ARGS'" : "unknown fault '" + tok[1] + "'";
    err += " (one of:";
    for (const Word& w : kWords) err += std::string(" ") + w.name;
    return E{err + ")"};
  }
  const std::string use = std::string("usage: TIME ") + word->name + " " + usage(word->args);
  const size_t want = word->args == Args::kSpine || word->args == Args::kT0 ? 4
                      : word->args == Args::kCable                          ? 5
                      : word->args == Args::kFlap                           ? 7
                      : word->args == Args::kLoss                           ? 6
                                                                            : 3;
  if (tok.size() != want) return E{use};
  Fault f;
  f.text = text;
  f.op = word->op;
  auto at = parse_time(tok[0], sc.ideal_s);
  if (!at.ok()) return E{at.error()};
  f.at = at.value();
  if (word->args == Args::kOnOff) {
    if (tok[2] != "on" && tok[2] != "off") return E{use};
    f.on = tok[2] == "on";
    return f;
  }
  auto index = [&](const std::string& s, uint32_t n, const char* what,
                   uint32_t& out) -> std::string {
    double x = 0;
    if (!number(s, x) || x < 0 || x >= n || x != std::floor(x))
      return std::string(what) + " '" + s + "' is not one of 0.." + std::to_string(n - 1);
    out = static_cast<uint32_t>(x);
    return "";
  };
  uint32_t plane = 0;
  if (auto e = index(tok[2], sc.planes, "plane", plane); !e.empty()) return E{e};
  f.plane = static_cast<uint16_t>(plane);
  if (word->args == Args::kSpine) {
    if (auto e = index(tok[3], sc.spines, "spine", f.spine); !e.empty()) return E{e};
    return f;
  }
  if (auto e = index(tok[3], sc.t0s, "T0", f.t0); !e.empty()) return E{e};
  if (word->args == Args::kT0) return f;
  if (auto e = index(tok[4], sc.spines, "spine", f.spine); !e.empty()) return E{e};
  if (word->args == Args::kFlap) {
    auto period = parse_time(tok[5], sc.ideal_s);
    if (!period.ok()) return E{period.error()};
    auto until = parse_time(tok[6], sc.ideal_s);
    if (!until.ok()) return E{until.error()};
    if (period.value().count() <= 0) return E{"flap PERIOD must be > 0"};
    if (until.value() <= f.at) return E{"flap UNTIL must come after TIME"};
    f.period = period.value();
    f.until = until.value();
  } else if (word->args == Args::kLoss) {
    if (!number(tok[5], f.prob) || f.prob < 0 || f.prob > 1)
      return E{"loss PROB '" + tok[5] + "' is not in [0, 1]"};
  }
  return f;
}

void apply(const Fault& f, sim::Fabric& fab) {
  const auto cable = sim::LinkRef::uplink(f.plane, f.t0, f.spine);
  switch (f.op) {
    case Op::kT1Down:
      return fab.t1_down(f.plane, f.spine);
    case Op::kT1Up:
      return fab.t1_up(f.plane, f.spine);
    case Op::kT0Down:
      return fab.t0_down(f.plane, f.t0);
    case Op::kT0Up:
      return fab.t0_up(f.plane, f.t0);
    case Op::kBlackholeT1:
      return fab.blackhole_t1(f.plane, f.spine, true);
    case Op::kRestoreT1:
      return fab.blackhole_t1(f.plane, f.spine, false);
    case Op::kBlackholeT0:
      return fab.blackhole_t0(f.plane, f.t0, true);
    case Op::kRestoreT0:
      return fab.blackhole_t0(f.plane, f.t0, false);
    case Op::kLinkDown:
      return fab.link_down(cable);
    case Op::kLinkUp:
      return fab.link_up(cable);
    case Op::kFlap:
      return fab.flap(cable, f.period, f.until);
    case Op::kLoss:
      return fab.loss(cable, f.prob);
    case Op::kTrimming:
      return fab.set_trimming(f.on);
  }
}

}  // namespace mrc::msim
