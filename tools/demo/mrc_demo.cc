// mrc-demo: a fault run on the simulated multi-plane fabric (io/sim/fabric.h). One QP streams
// RDMA WRITEs from host 0 to host 1 while switches and cables fail and come back. Printed: the
// goodput per interval, each fault as it happens, the EV state changes the engine reports, and
// a summary (goodput per phase, detection times, stalls, retransmits, probes) ending in PASS or
// FAIL. PASS: every byte of every WRITE arrived intact, no error completion, the QP never
// failed. Virtual time: a run is exactly reproducible from its seed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mrc/io/sim/fabric.h"
#include "mrc/testing/bulk.h"
#include "mrc/testing/goodput.h"
#include "mrc/testing/testbed.h"

namespace {

using namespace mrc;
using engine::Duration;
using engine::EvReason;
using engine::EvState;
using engine::kNever;
using engine::PeerId;
using engine::Time;
using sim::Fabric;
using ull = unsigned long long;

constexpr uint16_t kPlanes = 4;
constexpr uint32_t kSpines = 4, kPathsPerPlane = 16, kBackupsPerPlane = 4;
constexpr uint32_t kMsgBytes = 1 << 20, kOutstanding = 8;
constexpr Duration kFine{100'000};  // resolution of the stall and 1 ms dip measurements

Time at_s(double s) { return Time{std::llround(s * 1e9)}; }
double secs(Time t) { return static_cast<double>(t.count()) * 1e-9; }
double ms(Duration d) { return static_cast<double>(d.count()) * 1e-6; }
std::string str(const char* fmt, auto... args) {
  char b[160];
  std::snprintf(b, sizeof b, fmt, args...);
  return b;
}

struct Options {
  double duration_s = 2.3, interval_s = 0.05, rate_gbps = 10;
  uint64_t seed = 1;
  bool quiet = false, no_faults = false, fabric_stats = false;
  std::string csv;
  std::vector<std::string> faults;
};

// ---- Faults ---------------------------------------------------------------------------------

// Kinds in break/repair pairs: a repair undoes the break just before it (op / 2 pairs them).
enum Op : uint8_t { kBlackholeT1, kRestoreT1, kT1Down, kT1Up, kT0Down, kT0Up, kLoss, kFlap };
enum class Where : uint8_t { kT1, kT0, kCable };
struct Kind {
  const char* name;
  Where where;
  const char* what;
};
constexpr Kind kKinds[] = {{"blackhole-t1", Where::kT1, "blackhole on (links stay up)"},
                           {"restore-t1", Where::kT1, "blackhole off"},
                           {"t1-down", Where::kT1, "down"},
                           {"t1-up", Where::kT1, "up"},
                           {"t0-down", Where::kT0, "down"},
                           {"t0-up", Where::kT0, "up"},
                           {"loss", Where::kCable, "random loss"},
                           {"flap", Where::kCable, "flapping"}};
const std::vector<std::string> kDefaultFaults = {"0.30 blackhole-t1 1 2", "0.60 restore-t1 1 2",
                                                 "0.90 t0-down 3 0", "1.30 t0-up 3 0",
                                                 "1.50 flap 0 0 1 0.2 2.1"};

struct Fault {
  Time at{0};
  Op op = kT1Down;
  uint16_t plane = 0;
  uint32_t t0 = 0, spine = 0;
  Duration period{0};  // flap
  Time until{0};       // flap
  double prob = 0;     // loss
  const Kind& kind() const { return kKinds[op]; }
  bool breaks() const { return op == kFlap || (op % 2 == 0 && !(op == kLoss && prob == 0)); }
  int spine_scope() const { return kind().where == Where::kT0 ? -1 : int(spine); }  // -1: all
  std::string element() const {
    if (kind().where == Where::kT1) return str("p%u T1[%u]", plane, spine);
    if (kind().where == Where::kT0) return str("p%u T0[%u]", plane, t0);
    return str("p%u T0[%u]-T1[%u] cable", plane, t0, spine);
  }
  std::string describe() const {
    std::string s = element() + " " + kind().what;
    if (op == kFlap) s += str(" every %.0f ms until %.3f s", ms(period), secs(until));
    if (op == kLoss) s = prob > 0 ? s + str(" %.2f%%", prob * 100) : element() + " loss off";
    return s;
  }
};

// Parses "TIME_S NAME ARGS"; on a mistake returns false with `err` set.
bool parse_fault(const std::string& text, double duration_s, uint32_t t0s, Fault& f,
                 std::string& err) {
  std::istringstream in(text);
  std::vector<std::string> tok;
  for (std::string w; in >> w;) tok.push_back(w);
  int op = -1;
  for (int i = 0; tok.size() >= 2 && i < int(std::size(kKinds)); ++i)
    if (tok[1] == kKinds[i].name) op = i;
  if (op < 0) {
    err = tok.size() < 2 ? "expected 'TIME_S NAME ARGS'" : "unknown fault '" + tok[1] + "'";
    err += " (one of:";
    for (const Kind& k : kKinds) err += std::string(" ") + k.name;
    return err += ")", false;
  }
  f = Fault{};
  f.op = Op(op);
  const Where where = f.kind().where;
  const std::string args = where == Where::kT1   ? "PLANE SPINE"
                           : where == Where::kT0 ? "PLANE T0"
                           : op == kFlap         ? "PLANE T0 SPINE PERIOD_S UNTIL_S"
                                                 : "PLANE T0 SPINE PROB";
  if (tok.size() != 3 + static_cast<size_t>(std::ranges::count(args, ' ')))
    return err = "usage: TIME_S " + tok[1] + " " + args, false;
  std::vector<double> v;
  for (size_t i = 0; i < tok.size(); ++i) {
    double x = 0;
    const char* e = tok[i].data() + tok[i].size();
    auto [p, ec] = std::from_chars(tok[i].data(), e, x);
    if (i != 1 && (ec != std::errc() || p != e || !std::isfinite(x)))
      return err = "not a number: '" + tok[i] + "'", false;
    v.push_back(x);
  }
  auto index = [&](double x, uint32_t n, const char* what) -> int64_t {
    if (x >= 0 && x < n && x == std::floor(x)) return int64_t(x);
    err = str("%s %g is not one of 0..%u", what, x, n - 1);
    return -1;
  };
  if (v[0] < 0 || v[0] >= duration_s)
    return err = str("time %g s is not within the run [0, %g)", v[0], duration_s), false;
  f.at = at_s(v[0]);
  const int64_t plane = index(v[2], kPlanes, "plane");
  if (plane < 0) return false;
  const int64_t t0 = where == Where::kT1 ? 0 : index(v[3], t0s, "T0");
  if (t0 < 0) return false;
  const int64_t spine =
      where == Where::kT0 ? 0 : index(v[where == Where::kT1 ? 3 : 4], kSpines, "spine");
  if (spine < 0) return false;
  f.plane = uint16_t(plane), f.t0 = uint32_t(t0), f.spine = uint32_t(spine);
  if (op == kFlap) {
    if (v[5] <= 0) return err = "flap period must be > 0", false;
    if (v[6] <= v[0]) return err = "flap must end (UNTIL_S) after it starts", false;
    f.period = at_s(v[5]), f.until = at_s(v[6]);
  }
  if (op == kLoss && !(v[5] >= 0 && v[5] <= 1)) return err = "loss PROB must be in [0, 1]", false;
  if (op == kLoss) f.prob = v[5];
  return true;
}

// ---- The run --------------------------------------------------------------------------------

// From a fault or repair on: when do all the primary EVs through it reach `target`?
struct Watch {
  Time at{0};
  std::string what;
  std::set<uint32_t> evs;
  EvState target = EvState::kAssumedBad;
  bool open = false, closed = false;
  size_t hit = 0;
  Time all{-1};
};
// Where a fault is (plane, spine; -1: every spine) and from when to when. An EV declared bad
// outside every window was declared bad on a healthy path.
struct Window {
  uint16_t plane = 0;
  int spine = -1;
  Time from{0}, to = kNever;
};

struct Run {
  Options opt;
  Time end;
  sim::Testbed tb;
  std::unique_ptr<Fabric> fabric;
  sim::Testbed::QpPair qp;
  std::vector<engine::Path> paths;
  std::unique_ptr<sim::BulkWrite> stream;
  std::unique_ptr<sim::GoodputMeter> meter, fine;
  std::vector<Fault> faults;
  std::vector<std::pair<Time, std::string>> phases;  // start of each phase, and why
  std::deque<std::pair<Time, std::string>> notes;    // fault lines not yet printed
  std::deque<engine::Event> pending;                 // EV events not yet printed
  std::map<uint32_t, EvState> ev_state;              // host 0's EVs, as its events tell
  std::vector<Watch> watches;
  std::vector<Window> windows;
  size_t printed = 0;
  uint64_t to_bad = 0, healthy_bad = 0, to_good = 0, drained = 0, lost_events = 0, fatal = 0;
  std::string fatal_cause;

  explicit Run(const Options& o)
      : opt(o), end(at_s(o.duration_s)), tb(sim::SimConfig{o.seed}, engine_config(o)) {}
  static engine::EngineConfig engine_config(const Options& o) {
    engine::EngineConfig c;
    c.nic_bps = static_cast<uint64_t>(kPlanes * o.rate_gbps * 1e9);  // CC: all ports together
    c.trimming = true;
    return c;
  }
  engine::Engine& eng(PeerId h) { return tb.engine(h); }
  uint64_t rx_bytes() { return eng(1).qp_stats(qp.b)->rx_payload_bytes; }
  double healthy_bps() const { return kPlanes * opt.rate_gbps * 1e9; }
};

void setup(Run& r) {
  const PeerId a = r.tb.add_host(), b = r.tb.add_host();
  sim::FabricConfig fc;
  fc.hosts = 2;  // one per T0
  fc.planes = kPlanes;
  fc.spines = kSpines;
  fc.host_port_bps = fc.uplink_bps = static_cast<uint64_t>(r.opt.rate_gbps * 1e9);
  fc.trimming = true;
  r.fabric = std::make_unique<Fabric>(r.tb.net(), fc);
  r.paths = r.fabric->paths(a, b, kPathsPerPlane);
  engine::QpAttr at;
  at.mtu = 4096;
  at.max_psn_range = 1024;
  at.timeout = 14;  // 16.8 ms
  at.backup_paths = r.fabric->backup_paths(a, b, kBackupsPerPlane);
  r.qp = r.tb.connect(a, b, r.paths, at);
  for (const engine::Path& p : r.paths) r.ev_state[p.ev] = EvState::kGood;
  r.stream = std::make_unique<sim::BulkWrite>(
      r.tb, a, b, r.qp, sim::BulkWrite::Config{kMsgBytes, kOutstanding, r.opt.seed});
  auto counter = [&r] { return r.rx_bytes(); };
  r.meter = std::make_unique<sim::GoodputMeter>(r.tb.net(), counter, at_s(r.opt.interval_s));
  r.fine = std::make_unique<sim::GoodputMeter>(r.tb.net(), counter, kFine);
  r.meter->start(Time{0});
  r.fine->start(Time{0});
}

std::set<uint32_t> evs_of(const Run& r, uint16_t plane, int spine) {
  std::set<uint32_t> out;
  for (const engine::Path& p : r.paths)
    if (p.plane == plane && (spine < 0 || Fabric::spine_of(p.ev) == uint32_t(spine)))
      out.insert(p.ev);
  return out;
}

// At t: print `line`, and watch the EVs through (plane, spine) reach `target`.
void announce(Run& r, Time t, const std::string& line, const std::string& label, uint16_t plane,
              int spine, EvState target) {
  r.watches.push_back(Watch{t, label, evs_of(r, plane, spine), target});
  r.tb.net().at(t, [&r, t, line] { r.notes.emplace_back(t, "fault: " + line); });
}

void schedule(Run& r) {
  std::map<std::string, size_t> open;  // element and pair of a break not yet repaired -> window
  for (const Fault& f : r.faults) {
    r.tb.net().at(f.at, [&r, f] {
      const sim::LinkRef cable = sim::LinkRef::uplink(f.plane, f.t0, f.spine);
      switch (f.op) {
        case kBlackholeT1:
          return r.fabric->blackhole_t1(f.plane, f.spine, true);
        case kRestoreT1:
          return r.fabric->blackhole_t1(f.plane, f.spine, false);
        case kT1Down:
          return r.fabric->t1_down(f.plane, f.spine);
        case kT1Up:
          return r.fabric->t1_up(f.plane, f.spine);
        case kT0Down:
          return r.fabric->t0_down(f.plane, f.t0);
        case kT0Up:
          return r.fabric->t0_up(f.plane, f.t0);
        case kLoss:
          return r.fabric->loss(cable, f.prob);
        case kFlap:
          return r.fabric->flap(cable, f.period, f.until);
      }
    });
    r.phases.emplace_back(f.at, f.describe());
    const int spine = f.spine_scope();
    if (f.op != kFlap) {
      const std::string key = f.element() + std::to_string(f.op / 2);
      if (f.breaks() && !open.count(key)) {
        open[key] = r.windows.size();
        r.windows.push_back(Window{f.plane, spine, f.at});
      } else if (!f.breaks() && open.count(key)) {
        r.windows[open[key]].to = f.at;
        open.erase(key);
      }
      const EvState target = f.breaks() ? EvState::kAssumedBad : EvState::kGood;
      announce(r, f.at, f.describe(), f.describe(), f.plane, spine, target);
      continue;
    }
    // The fabric toggles the cable itself (down first); the demo names each toggle.
    bool down = true;
    for (Time t = f.at; t < f.until && t < r.end; t += f.period, down = !down) {
      const std::string label = f.element() + (down ? " down (flap)" : " up (flap)");
      const std::string line = t == f.at ? f.describe() + ": down" : label;
      announce(r, t, line, label, f.plane, spine, down ? EvState::kAssumedBad : EvState::kGood);
      if (down) r.windows.push_back(Window{f.plane, spine, t, std::min(t + f.period, f.until)});
    }
    if (!down && f.until < r.end) {
      const std::string line = f.element() + " up (flap over)";
      announce(r, f.until, line, line, f.plane, spine, EvState::kGood);
    }
    r.phases.emplace_back(f.until, f.element() + " flap over");
  }
  std::ranges::stable_sort(r.phases, {}, &std::pair<Time, std::string>::first);
  std::ranges::stable_sort(r.watches, {}, &Watch::at);  // open_watches relies on this order
}

// ---- EV events: per-interval lines, detection times ----------------------------------------

bool faulted(const Run& r, uint16_t plane, uint32_t spine, Time t) {
  constexpr Duration kGrace{1'000'000};  // packets sent before a repair may be lost after it
  return std::ranges::any_of(r.windows, [&](const Window& w) {
    return w.plane == plane && (w.spine < 0 || uint32_t(w.spine) == spine) && w.from <= t &&
           (w.to == kNever || t <= w.to + kGrace);
  });
}

void update(Run& r, Watch& w, Time now) {
  w.hit = std::ranges::count_if(w.evs, [&](uint32_t ev) { return r.ev_state[ev] == w.target; });
  if (w.hit == w.evs.size()) w.all = now, w.closed = true;
}

// Starts the watches due by `now`; a new watch ends older ones on the same EVs.
void open_watches(Run& r, Time now) {
  for (Watch& w : r.watches) {
    if (w.open || w.at > now) continue;
    for (Watch& o : r.watches)
      if (o.open && std::ranges::any_of(w.evs, [&](uint32_t e) { return o.evs.count(e); }))
        o.closed = true;
    w.open = true;
    update(r, w, w.at);
  }
}

void poll_events(Run& r) {
  for (PeerId h : {PeerId{0}, PeerId{1}}) {
    while (auto e = r.eng(h).poll_event()) {
      r.lost_events += e->dropped_before;
      if (e->type == engine::EventType::kQpFatal && r.fatal++ == 0)
        r.fatal_cause = "host " + std::to_string(h) + ": " + to_string(e->cause);
      if (e->type != engine::EventType::kEvState) continue;
      const auto to = EvState(e->to);
      if (EvReason(e->reason) == EvReason::kPlaneDrained) {
        ++r.drained;
      } else if (to == EvState::kGood) {
        ++r.to_good;
      } else if (to == EvState::kAssumedBad) {
        ++r.to_bad;
        r.healthy_bad += !faulted(r, e->plane, Fabric::spine_of(e->ev), e->at);
      }
      if (h == 0) {
        open_watches(r, e->at);
        r.ev_state[e->ev] = to;
        for (Watch& w : r.watches)
          if (w.open && !w.closed && w.evs.count(e->ev)) update(r, w, e->at);
      }
      r.pending.push_back(*e);
    }
  }
}

// The EV events up to `upto`, one line per (state, reason), in order of first appearance:
// "4 EVs -> ASSUMED_BAD (loss) via p1 T1[2]", then "plane 3 drained ...".
std::vector<std::string> ev_lines(Run& r, Time upto) {
  struct Group {
    std::tuple<uint8_t, uint8_t, bool> key;  // to, reason, on a healthy path
    int count = 0;
    std::map<uint16_t, std::set<uint32_t>> where;
  };
  std::vector<Group> groups;
  std::vector<std::string> drained, lines;
  for (; !r.pending.empty() && r.pending.front().at <= upto; r.pending.pop_front()) {
    const engine::Event& e = r.pending.front();
    if (EvReason(e.reason) == EvReason::kPlaneDrained) {
      drained.push_back(str("plane %u drained: none of its EVs is usable", e.plane));
      continue;
    }
    const bool healthy =
        EvState(e.to) == EvState::kAssumedBad && !faulted(r, e.plane, Fabric::spine_of(e.ev), e.at);
    const auto key = std::make_tuple(e.to, e.reason, healthy);
    auto g = std::ranges::find(groups, key, &Group::key);
    if (g == groups.end()) g = groups.insert(g, Group{key});
    ++g->count;
    g->where[e.plane].insert(Fabric::spine_of(e.ev));
  }
  for (const Group& g : groups) {
    const auto [to, reason, healthy] = g.key;
    std::string s = str("%d EV%s -> %s (%s) via", g.count, g.count == 1 ? "" : "s",
                        to_string(EvState(to)), to_string(EvReason(reason)));
    for (const auto& [plane, spines] : g.where) {
      s += str(" p%u", plane);
      if (spines.size() == kSpines)
        s += " (every T1)";
      else
        for (uint32_t sp : spines) s += str(" T1[%u]", sp);
    }
    lines.push_back(healthy ? s + "  <- no fault there" : s);
  }
  lines.insert(lines.end(), drained.begin(), drained.end());
  return lines;
}

// Prints the intervals the meter has closed since last time, with the faults and EV events
// between them. `final`: also what came after the last interval.
void print_intervals(Run& r, bool final) {
  const bool out = !r.opt.quiet;
  auto notes_before = [&](Time t) {
    for (; !r.notes.empty() && r.notes.front().first < t; r.notes.pop_front())
      if (out)
        std::printf("%8.3f s  %s\n", secs(r.notes.front().first), r.notes.front().second.c_str());
  };
  auto events_upto = [&](Time t) {
    for (const std::string& l : ev_lines(r, t))
      if (out) std::printf("%12s paths: %s\n", "", l.c_str());
  };
  const auto iv = r.meter->intervals();
  for (; r.printed < iv.size(); ++r.printed) {
    const auto& i = iv[r.printed];
    notes_before(i.end);
    const double bps = static_cast<double>(i.bytes) * 8 / secs(r.meter->interval());
    const double pct = 100 * bps / r.healthy_bps();
    const auto bar = static_cast<size_t>(std::clamp(pct / 2, 0.0, 50.0) + 0.5);
    if (out)
      std::printf("%8.3f s  %6.2f Gb/s %5.1f%%  %s\n", secs(i.end), bps * 1e-9, pct,
                  std::string(bar, '#').c_str());
    events_upto(i.end);
  }
  if (final) notes_before(kNever), events_upto(kNever);
}

// Runs to the end, printing as it goes; then posts no more and lets the WRITEs in flight finish
// (up to 10 s more) so that every one is checked.
void drive(Run& r) {
  sim::SimNet& net = r.tb.net();
  sim::BulkWrite& s = *r.stream;
  const Duration step = at_s(r.opt.interval_s);
  for (Time tick = std::min(step, r.end); net.now() < r.end; tick = std::min(tick + step, r.end)) {
    while (net.now() < tick) {
      s.pump();
      net.run_until([&s] { return s.cqe_ready(); }, tick);  // repost as soon as one completes
    }
    net.run_until(tick);  // the rest of the events at `tick`, the meter's sample among them
    s.pump();
    poll_events(r);
    print_intervals(r, false);
  }
  r.meter->stop();
  r.fine->stop();
  s.stop_posting();
  const Time limit = r.end + std::chrono::seconds(10);
  while (s.in_flight() > 0 && net.now() < limit) {
    net.run_until([&s] { return s.cqe_ready(); }, limit);
    s.pump();
  }
  poll_events(r);
  open_watches(r, kNever);
  print_intervals(r, true);
}

int report(Run& r) {
  const sim::GoodputMeter& m = *r.meter;
  const sim::BulkWrite& s = *r.stream;
  const double avg = m.rate_bps(Time{0}, r.end);
  std::printf("\nsummary\n");
  std::printf("  moved     %.2f GB at the receiver, %.2f Gb/s over the run (%.1f%% of %.0f Gb/s)\n",
              static_cast<double>(r.rx_bytes()) * 1e-9, avg * 1e-9, 100 * avg / r.healthy_bps(),
              r.healthy_bps() * 1e-9);
  std::printf(
      "  verified  %llu WRITEs of 1 MiB (%.2f GB) byte for byte: %llu mismatched, %llu failed\n",
      ull(s.verified()), static_cast<double>(s.verified()) * kMsgBytes * 1e-9, ull(s.mismatches()),
      ull(s.errors()));
  std::printf("  phases    %-15s %8s %9s %8s  %s\n", "from - to (s)", "avg Gb/s", "min 50 ms",
              "min 1 ms", "began with");
  std::vector<std::pair<Time, std::string>> marks = {{Time{0}, "start"}};
  for (const auto& [t, why] : r.phases) {
    if (t >= r.end) continue;
    if (marks.back().first == t)
      marks.back().second += ", " + why;  // faults at the same time
    else
      marks.emplace_back(t, why);
  }
  for (size_t i = 0; i < marks.size(); ++i) {
    const Time from = marks[i].first, to = i + 1 < marks.size() ? marks[i + 1].first : r.end;
    if (to > from)
      std::printf("            %6.3f - %6.3f %8.2f %9.2f %8.2f  %s\n", secs(from), secs(to),
                  m.rate_bps(from, to) * 1e-9, m.min_rate_bps(from, to, m.interval()) * 1e-9,
                  r.fine->min_rate_bps(from, to, std::chrono::milliseconds(1)) * 1e-9,
                  marks[i].second.c_str());
  }
  std::printf("  detection: time until every primary EV through the element reaches the state\n");
  for (const Watch& w : r.watches) {
    if (w.at >= r.end || w.evs.empty()) continue;
    const std::string took = w.all.count() >= 0 ? str("after %.3f ms", ms(w.all - w.at))
                                                : std::string("not all of them");
    std::printf("    %6.3f s  %-44s %2zu/%zu %s %s\n", secs(w.at), w.what.c_str(), w.hit,
                w.evs.size(), to_string(w.target), took.c_str());
  }
  const engine::QpStats& q = *r.eng(0).qp_stats(r.qp.a);
  uint64_t probes = 0, replies = 0, trims = 0;
  for (const auto& ps : r.eng(0).path_stats(r.qp.a))
    probes += ps.probes, replies += ps.probe_replies, trims += ps.trims;
  std::printf("  longest stall  %.1f ms with no byte arriving (%.1f ms resolution)\n",
              ms(r.fine->longest_stall(Time{0}, r.end)), ms(kFine));
  std::printf(
      "  retransmits    %llu of %llu packets; declared lost: %llu by RACK/SACK, %llu RTOs\n",
      ull(q.tx_retransmits), ull(q.tx_data_packets), ull(q.fast_losses), ull(q.rto_fired));
  std::printf("  probes         %llu sent, %llu answered; trims %llu\n", ull(probes), ull(replies),
              ull(trims));
  std::printf(
      "  EV events      %llu -> ASSUMED_BAD (%llu with no fault on the path), %llu -> GOOD, "
      "%llu plane drained%s\n",
      ull(r.to_bad), ull(r.healthy_bad), ull(r.to_good), ull(r.drained),
      r.lost_events ? " (some events lost: queue full)" : "");
  if (r.opt.fabric_stats) std::printf("\n%s", r.fabric->summary().c_str());

  std::string why;
  if (s.mismatches()) why += std::to_string(s.mismatches()) + " WRITEs arrived wrong; ";
  if (s.errors()) why += std::to_string(s.errors()) + " failed (first: " + s.first_error() + "); ";
  if (r.fatal) why += "QP error (" + r.fatal_cause + "); ";
  if (s.in_flight()) why += std::to_string(s.in_flight()) + " WRITEs never completed; ";
  if (s.verified() == 0) why += "nothing completed; ";
  if (!why.empty()) {
    std::printf("FAIL: %s\n", why.substr(0, why.size() - 2).c_str());
    return 1;
  }
  std::printf("PASS: all %llu WRITEs arrived intact, no error completion, QP never failed\n",
              ull(s.verified()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "mrc-demo: a fault run on the simulated multi-plane fabric, in virtual time. One MRC QP\n"
      "streams RDMA WRITEs over 4 planes x 4 spines while faults happen; prints goodput per\n"
      "interval, the faults and path (EV) changes, and a summary. Exit 0 on PASS (every byte\n"
      "intact, no error), 1 on FAIL, 2 on bad arguments."};
  app.add_option("--duration", o.duration_s, "virtual seconds to run")
      ->check(CLI::Range(0.001, 60.0))
      ->capture_default_str();
  app.add_option("--interval", o.interval_s, "seconds per printed interval")
      ->check(CLI::Range(0.0001, 10.0))
      ->capture_default_str();
  app.add_option("--rate-gbps", o.rate_gbps, "rate of every host port and uplink, Gb/s")
      ->check(CLI::Range(0.1, 400.0))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the network and the data")->capture_default_str();
  app.add_option("--fault", o.faults,
                 "'TIME_S NAME ARGS', repeatable; replaces the default schedule:\n"
                 "  blackhole-t1|restore-t1|t1-down|t1-up PLANE SPINE\n"
                 "  t0-down|t0-up PLANE T0          (host h is under T0 h)\n"
                 "  flap PLANE T0 SPINE PERIOD_S UNTIL_S   (the T0-T1 cable)\n"
                 "  loss PLANE T0 SPINE PROB               (both directions)\n"
                 "Default: '0.3 blackhole-t1 1 2' '0.6 restore-t1 1 2' '0.9 t0-down 3 0'\n"
                 "         '1.3 t0-up 3 0' '1.5 flap 0 0 1 0.2 2.1'")
      ->type_name("'TIME_S NAME ARGS'")
      ->allow_extra_args(false);
  app.add_flag("--no-faults", o.no_faults, "run without faults (a baseline)");
  app.add_option("--csv", o.csv, "write the per-interval series (time_s,gbps) to FILE")
      ->type_name("FILE");
  app.add_flag("-q,--quiet", o.quiet, "print only the summary");
  app.add_flag("--fabric-stats", o.fabric_stats, "print every switch's counters at the end");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.interval_s > o.duration_s) {
    std::fprintf(stderr, "mrc-demo: --interval is longer than --duration\n");
    return 2;
  }
  FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (!o.csv.empty() && !csv) {
    std::fprintf(stderr, "mrc-demo: --csv %s: %s\n", o.csv.c_str(), std::strerror(errno));
    return 2;
  }

  Run r(o);
  setup(r);
  const bool mine = !o.faults.empty();
  for (const std::string& text : o.no_faults ? std::vector<std::string>{}
                                 : mine      ? o.faults
                                             : kDefaultFaults) {
    Fault f;
    std::string err;
    if (parse_fault(text, o.duration_s, r.fabric->t0_count(), f, err)) {
      r.faults.push_back(f);
    } else if (mine) {
      std::fprintf(stderr, "mrc-demo: --fault '%s': %s\n", text.c_str(), err.c_str());
      return 2;
    }  // default faults past a short --duration are left out
  }
  std::ranges::stable_sort(r.faults, {}, &Fault::at);
  schedule(r);

  if (!o.quiet) {
    std::printf(
        "mrc-demo: fault run on the simulated fabric (virtual time, seed %llu)\n"
        "  fabric  2 hosts on different T0s, %u planes x %u T1 spines, host ports and "
        "uplinks %g Gb/s, trimming on\n"
        "  QP      host 0 -> host 1, %u EVs + %u backups per plane, MTU 4096, %u x 1 MiB "
        "RDMA WRITEs in flight, every byte checked\n"
        "  run     %g s, goodput at the receiver every %g ms; 100%% = %g Gb/s (%u planes "
        "x %g Gb/s)\n\n",
        ull(o.seed), kPlanes, kSpines, o.rate_gbps, kPathsPerPlane, kBackupsPerPlane, kOutstanding,
        o.duration_s, o.interval_s * 1e3, r.healthy_bps() * 1e-9, kPlanes, o.rate_gbps);
  }
  drive(r);
  const int rc = report(r);
  if (csv) {
    const std::string text = r.meter->csv();
    if (std::fwrite(text.data(), 1, text.size(), csv) != text.size() || std::fclose(csv) != 0) {
      std::fprintf(stderr, "mrc-demo: --csv %s: write failed\n", o.csv.c_str());
      return 1;
    }
  }
  return rc;
}
