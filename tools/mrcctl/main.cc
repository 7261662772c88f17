// mrcctl: path health and controller CLI for every process using libmrc (docs/mrcctl.md).
// Threading: single-threaded, except `metrics --listen`, which serves on the main thread.
//
// Exit status: 0 done; 1 the operation failed (no reply, refused, permission); 2 bad
// arguments, or an unknown device, peer, EV, plane or QP (one line on stderr naming it).
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "control.h"
#include "doctor.h"
#include "http.h"
#include "srv6/config.h"
#include "view.h"

namespace {

using mrc::mrcctl::Json;
using mrc::observe::Snapshot;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

/// A failure with its exit status.
struct Fail {
  int code;
  std::string what;
};

struct Globals {
  uint32_t pid = 0;
  std::string device;
  bool json = false;
  bool watch = false;
  double interval = 1.0;
};

std::vector<Snapshot> load(const Globals& g) {
  return mrc::observe::read_all(static_cast<pid_t>(g.pid));
}

/// Snapshots for a command, with --pid / --device checked to exist.
std::vector<Snapshot> select(const Globals& g) {
  std::vector<Snapshot> all = load(g);
  if (g.pid != 0 && all.empty())
    throw Fail{2, "no libmrc process with pid " + std::to_string(g.pid) + " publishes statistics"};
  if (!g.device.empty()) {
    std::vector<Snapshot> out;
    for (auto& s : all)
      if (g.device == s.device.name) out.push_back(std::move(s));
    if (out.empty()) throw Fail{2, "unknown device " + g.device};
    return out;
  }
  return all;
}

mrc::mrcctl::Filter filter(const Globals& g) {
  mrc::mrcctl::Filter f;
  f.pid = g.pid;
  f.device = g.device;
  return f;
}

/// Prints `make()` once, or every interval until Ctrl-C with --watch.
void show(const Globals& g, const std::function<Json()>& make,
          const std::function<mrc::mrcctl::Table(const Json&)>& table) {
  do {
    const Json j = make();
    if (g.json) {
      std::cout << (g.watch ? j.dump() : j.dump(2)) << std::endl;
    } else {
      if (g.watch) std::cout << "\033[H\033[2J";
      std::cout << mrc::mrcctl::render(table(j)) << std::flush;
    }
    if (!g.watch) break;
    for (double t = 0; t < g.interval && !g_stop; t += 0.05)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (!g_stop);
}

void need_admin(const std::string& cmd) {
  if (!mrc::mrcctl::has_net_admin()) throw Fail{1, cmd + ": needs CAP_NET_ADMIN (run as root)"};
}

/// Sends `rq` to every selected device that `want` accepts; returns the replies. Errors of
/// single devices are collected; all failing is a Fail.
Json fan_out(const std::string& cmd, const std::vector<Snapshot>& snaps, const Json& rq,
             int timeout_ms, const std::function<bool(const Snapshot&)>& want = nullptr,
             int refusal_code = 1) {
  need_admin(cmd);
  Json replies = Json::array();
  std::string first_error;
  int asked = 0;
  bool refused = false;  // a device answered no (rather than not answering)
  for (const Snapshot& s : snaps) {
    if (want && !want(s)) continue;
    ++asked;
    auto r = mrc::mrcctl::control_request(s.pid, s.device.index, rq, timeout_ms);
    if (r.ok()) {
      replies.push_back(std::move(r).value());
    } else if (first_error.empty()) {
      first_error = r.error().error;
      refused = r.error().refused;
    }
  }
  if (asked == 0) throw Fail{2, cmd + ": no device to send it to"};
  if (replies.empty()) throw Fail{refused ? refusal_code : 1, cmd + ": " + first_error};
  return replies;
}

void print_replies(const Globals& g, const Json& replies, const std::string& done) {
  if (g.json) {
    std::cout << replies.dump(2) << std::endl;
    return;
  }
  for (const Json& r : replies)
    std::cout << "pid " << r["pid"] << " " << r["device"].get<std::string>() << ": " << done
              << std::endl;
}

std::string fabric_file(const std::string& file, const std::string& prefix) {
  if (!file.empty()) return file;
  const std::filesystem::path root = "/run/mrc-fabric";
  if (!prefix.empty()) return (root / prefix / "fabric.json").string();
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec))
    if (std::filesystem::exists(e.path() / "fabric.json"))
      found.push_back(e.path() / "fabric.json");
  if (found.size() == 1) return found[0];
  if (found.empty())
    throw Fail{2, "fabric show: no fabric under /run/mrc-fabric; give --fabric FILE"};
  throw Fail{2, "fabric show: several fabrics under /run/mrc-fabric; give --prefix P"};
}

Json fabric_json(const mrc::srv6::Fabric& f) {
  const auto& c = f.config();
  Json planes = Json::array();
  for (uint32_t p = 0; p < c.planes; ++p) {
    Json sw = Json::array();
    for (uint32_t t = 0; t < f.t0s(); ++t) {
      const mrc::srv6::SwitchId id{mrc::srv6::Tier::kT0, p, t};
      sw.push_back(
          Json{{"name", f.switch_label(id)}, {"tier", "T0"}, {"index", t}, {"usid", f.usid(id)}});
    }
    for (uint32_t s = 0; s < c.spines; ++s) {
      const mrc::srv6::SwitchId id{mrc::srv6::Tier::kT1, p, s};
      sw.push_back(
          Json{{"name", f.switch_label(id)}, {"tier", "T1"}, {"index", s}, {"usid", f.usid(id)}});
    }
    planes.push_back(Json{{"plane", p},
                          {"block", mrc::srv6::prefix(f.block(p), f.block_bits(p))},
                          {"usid_bits", f.usid_bits(p)},
                          {"switches", sw}});
  }
  Json hosts = Json::array();
  for (uint32_t h = 0; h < c.hosts; ++h) {
    Json addrs = Json::array();
    for (uint32_t p = 0; p < c.planes; ++p)
      addrs.push_back(mrc::srv6::format(f.host_address(h, p)));
    hosts.push_back(Json{{"host", h},
                         {"name", h < c.names.size() ? c.names[h] : "h" + std::to_string(h)},
                         {"t0", f.t0_of(h)},
                         {"addresses", addrs}});
  }
  return Json{{"hosts", c.hosts},
              {"planes", c.planes},
              {"spines", c.spines},
              {"hosts_per_t0", c.hosts_per_t0},
              {"t0s_per_plane", f.t0s()},
              {"host_port_gbps", c.host_port_gbps},
              {"uplink_gbps", c.uplink_gbps},
              {"plane", planes},
              {"host", hosts}};
}

int run(int argc, char** argv) {
  CLI::App app{"mrcctl: path health and control of the libmrc processes on this host"};
  app.fallthrough();
  app.require_subcommand(1);
  Globals g;
  app.add_option("--pid", g.pid, "only this process");
  app.add_option("--device", g.device, "only this device (mrc0, mrc1, ...)");
  app.add_flag("--json", g.json, "JSON instead of a table");

  auto watchable = [&](CLI::App* c) {
    c->add_flag("--watch", g.watch, "refresh until Ctrl-C");
    c->add_option("--interval", g.interval, "seconds between refreshes (--watch)")
        ->check(CLI::Range(0.05, 3600.0));
  };
  uint32_t qpn = 0;

  auto* devices = app.add_subcommand("devices", "devices (one per UdpDriver) of every process");
  watchable(devices);

  auto* ports =
      app.add_subcommand("ports", "plane ports: address, admin state, link, EVs per state");
  watchable(ports);
  uint32_t plane = 0;
  auto* drain = ports->add_subcommand("drain", "move all traffic off a plane (needs root)");
  drain->add_option("plane", plane, "plane number")->required();
  auto* undrain = ports->add_subcommand("undrain", "let traffic back onto a plane (needs root)");
  undrain->add_option("plane", plane, "plane number")->required();

  auto* qps = app.add_subcommand("qps", "queue pairs: state, peer, counters, congestion window");
  qps->add_option("--qpn", qpn, "only this QP");
  watchable(qps);

  std::string peer;
  auto* paths = app.add_subcommand("paths", "every EV of every QP: state, RTT, loss, trims, bytes");
  paths->add_option("peer", peer, "only QPs to this peer (h1, or an address)");
  paths->add_option("--qpn", qpn, "only this QP");
  watchable(paths);

  bool follow = false;
  auto* events = app.add_subcommand("events", "EV state changes (recent ones; --follow: live)");
  events->add_flag("-f,--follow", follow, "keep printing changes as they happen");
  events->add_option("--qpn", qpn, "only this QP");

  std::string listen;
  auto* metrics = app.add_subcommand("metrics", "Prometheus text exposition of every counter");
  metrics->add_option("--listen", listen, "serve it over HTTP at ADDR:PORT (GET /metrics)");

  uint32_t count = 5, interval_ms = 20, timeout_ms = 300;
  auto* probe =
      app.add_subcommand("probe", "probe every path to a peer (a fabric traceroute); needs root");
  probe->add_option("peer", peer, "the peer (h1, or an address)")->required();
  probe->add_option("--count", count, "probes per path")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  probe->add_option("--interval-ms", interval_ms, "between rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  probe->add_option("--timeout-ms", timeout_ms, "wait for replies after the last round")
      ->capture_default_str()
      ->check(CLI::Range(10, 10000));

  std::string ev_arg;
  auto* deny = app.add_subcommand("deny", "stop using an EV (DENIED); needs root");
  deny->add_option("ev", ev_arg, "EV: p<plane>.s<spine>[.k<k>] or a number")->required();
  deny->add_option("--qpn", qpn, "only this QP");
  auto* allow = app.add_subcommand("allow", "lift a deny (the EV is probed, then used)");
  allow->add_option("ev", ev_arg, "EV: p<plane>.s<spine>[.k<k>] or a number")->required();
  allow->add_option("--qpn", qpn, "only this QP");

  auto* cc = app.add_subcommand("cc", "congestion control (NSCC) profiles");
  cc->require_subcommand(1);
  auto* cc_show = cc->add_subcommand("show", "each QP's NSCC profile; needs root");
  cc_show->add_option("--qpn", qpn, "only this QP");
  std::vector<std::string> settings;
  auto* cc_set =
      cc->add_subcommand("set", "set NSCC fields: base_rtt=20000 target_delay=... (root)");
  cc_set->add_option("field=value", settings, "fields of mrc_ctl_cc_nscc_cfg")->required();
  cc_set->add_option("--qpn", qpn, "only this QP");

  std::string fabric_path, fabric_prefix;
  auto* fabric = app.add_subcommand("fabric", "the fabric description");
  fabric->require_subcommand(1);
  auto* fabric_show = fabric->add_subcommand("show", "planes, switches and hosts of a fabric file");
  fabric_show->add_option("--fabric", fabric_path, "fabric file (srv6/config.h JSON)");
  fabric_show->add_option("--prefix", fabric_prefix, "the fabric `mrc-fabric up --prefix P` made");

  mrc::mrcctl::DoctorOptions doc;
  auto* doctor = app.add_subcommand(
      "doctor",
      "check this host before a job: per plane port address, route, MTU, GSO/GRO, "
      "UDP port, probes of a peer; clock and CPU settings. Exit 0: no FAIL");
  doctor->add_option("--peer", doc.peer,
                     "probe this peer on every plane: srv6 h<N> or a fabric name; else its "
                     "address per plane, a,b,...");
  doctor->add_option("--count", doc.count, "probes per path (1..100)")->capture_default_str();
  doctor->add_option("--timeout-ms", doc.timeout_ms, "wait for replies after the last probe")
      ->capture_default_str();
  doctor->add_option("--listen", doc.listen_s,
                     "then answer probes this many seconds (run it on the peer)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (!app.remaining().empty()) what = "unknown command or argument " + app.remaining()[0];
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::cerr << "mrcctl: " << what << std::endl;
    return 2;
  }

  mrc::mrcctl::Filter f = filter(g);
  f.qpn = qpn;
  if (devices->parsed() || (ports->parsed() && !drain->parsed() && !undrain->parsed())) {
    select(g);
    const bool dev = devices->parsed();
    show(
        g,
        [&] {
          const auto s = load(g);
          return dev ? mrc::mrcctl::devices_json(s, f, mono_ns()) : mrc::mrcctl::ports_json(s, f);
        },
        dev ? mrc::mrcctl::devices_table : mrc::mrcctl::ports_table);
    return 0;
  }
  if (drain->parsed() || undrain->parsed()) {
    const auto snaps = select(g);
    bool known = false;
    for (const Snapshot& s : snaps) known = known || plane < s.device.planes;
    if (!known) throw Fail{2, "unknown plane " + std::to_string(plane)};
    const bool on = drain->parsed();
    const Json replies = fan_out(on ? "ports drain" : "ports undrain", snaps,
                                 Json{{"cmd", "drain"}, {"plane", plane}, {"drain", on}}, 2000,
                                 [&](const Snapshot& s) { return plane < s.device.planes; });
    print_replies(g, replies,
                  std::string("plane ") + std::to_string(plane) + (on ? " drained" : " undrained"));
    return 0;
  }
  if (qps->parsed() || paths->parsed()) {
    const auto snaps = select(g);
    if (qpn) {
      bool known = false;
      for (const Snapshot& s : snaps)
        for (const auto& q : s.qps) known = known || q.qpn == qpn;
      if (!known) throw Fail{2, "unknown QP " + std::to_string(qpn)};
    }
    if (paths->parsed() && !peer.empty()) {
      if (!mrc::mrcctl::has_peer(snaps, peer)) throw Fail{2, "unknown peer " + peer};
      // "1" names host 1: show it under the device's own name.
      for (const Snapshot& s : snaps)
        for (uint32_t i = 0; i < s.device.n_peers; ++i)
          if (s.device.peer[i].host != UINT32_MAX && peer == std::to_string(s.device.peer[i].host))
            peer = s.device.peer[i].name;
      f.peer = peer;
    }
    const bool q = qps->parsed();
    show(
        g,
        [&] {
          const auto s = load(g);
          return q ? mrc::mrcctl::qps_json(s, f) : mrc::mrcctl::paths_json(s, f);
        },
        q ? mrc::mrcctl::qps_table : mrc::mrcctl::paths_table);
    return 0;
  }
  if (events->parsed()) {
    select(g);
    std::vector<std::pair<std::string, uint64_t>> from;
    Json first = mrc::mrcctl::events_json(load(g), f, &from);
    if (!follow) {
      if (g.json)
        std::cout << first.dump(2) << std::endl;
      else
        std::cout << mrc::mrcctl::render(mrc::mrcctl::events_table(first));
      return 0;
    }
    // Follow: JSON lines, or table rows without repeating the header.
    bool header = true;
    auto emit = [&](const Json& j) {
      if (g.json) {
        for (const Json& e : j) std::cout << e.dump() << "\n";
      } else if (!j.empty() || header) {
        std::string t =
            mrc::mrcctl::render(mrc::mrcctl::events_table(j), mrc::mrcctl::kEventWidths);
        if (!header) t = t.substr(t.find('\n') + 1);
        header = false;
        std::cout << t;
      }
      std::cout << std::flush;
    };
    emit(first);
    while (!g_stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      emit(mrc::mrcctl::events_json(load(g), f, &from));
    }
    return 0;
  }
  if (metrics->parsed()) {
    if (listen.empty()) {
      std::cout << mrc::mrcctl::metrics_text(select(g)) << std::flush;
      return 0;
    }
    auto fd = mrc::mrcctl::listen_on(listen);
    if (!fd.ok()) throw Fail{2, fd.error()};
    std::cerr << "mrcctl: serving http://" << listen << "/metrics" << std::endl;
    mrc::mrcctl::serve_metrics(
        *fd, [&] { return mrc::mrcctl::metrics_text(load(g)); }, &g_stop);
    ::close(*fd);
    return 0;
  }
  if (doctor->parsed()) {
    auto checks = mrc::mrcctl::run_doctor(doc, [&](const std::vector<mrc::mrcctl::Check>& v) {
      const Json j = mrc::mrcctl::doctor_json(v);
      if (g.json) {
        std::cout << j.dump(2) << std::endl;
        return;
      }
      std::cout << mrc::mrcctl::render(mrc::mrcctl::doctor_table(v))
                << "doctor: " << j["fail"].get<int>() << " FAIL, " << j["warn"].get<int>()
                << " warn" << std::endl;
    });
    if (!checks.ok()) throw Fail{2, "doctor: " + checks.error()};
    return mrc::mrcctl::doctor_exit(*checks);
  }
  if (probe->parsed()) {
    const auto snaps = select(g);
    // The devices that know the peer probe it; if none does, one srv6 device probes it as a
    // host of its fabric (it says so when the name is none).
    const bool known = mrc::mrcctl::has_peer(snaps, peer);
    const Snapshot* srv6 = nullptr;
    for (const Snapshot& s : snaps)
      if (!srv6 && s.device.path_mode == 1) srv6 = &s;
    if (!known && !srv6) throw Fail{2, "unknown peer " + peer};
    Json rq{{"cmd", "probe"},
            {"peer", peer},
            {"count", count},
            {"interval_ms", interval_ms},
            {"timeout_ms", timeout_ms}};
    const int wait = static_cast<int>(count * interval_ms + timeout_ms + 3000);
    const Json replies = fan_out(
        "probe", snaps, rq, wait,
        [&](const Snapshot& s) { return known ? mrc::mrcctl::has_peer({s}, peer) : &s == srv6; },
        2);
    if (g.json)
      std::cout << replies.dump(2) << std::endl;
    else
      std::cout << mrc::mrcctl::render(mrc::mrcctl::probe_table(replies));
    return 0;
  }
  if (deny->parsed() || allow->parsed()) {
    uint32_t ev = 0;
    if (!mrc::mrcctl::parse_ev(ev_arg, &ev)) throw Fail{2, "bad EV " + ev_arg};
    const auto snaps = select(g);
    auto has_ev = [&](const Snapshot& s) {
      for (const auto& e : s.evs)
        if (e.ev == ev && (qpn == 0 || e.qpn == qpn)) return true;
      return false;
    };
    bool known = false;
    for (const Snapshot& s : snaps) known = known || has_ev(s);
    if (!known) throw Fail{2, "unknown EV " + ev_arg};
    const bool on = deny->parsed();
    Json rq{{"cmd", "deny"}, {"ev", ev}, {"deny", on}};
    if (qpn) rq["qpn"] = qpn;
    const Json replies = fan_out(on ? "deny" : "allow", snaps, rq, 2000, has_ev);
    print_replies(g, replies,
                  "EV " + mrc::mrcctl::ev_text(ev) + (on ? " denied" : " allowed") + " on QPs " +
                      (replies.empty() ? "" : replies[0]["qps"].dump()));
    return 0;
  }
  if (cc_show->parsed() || cc_set->parsed()) {
    const auto snaps = select(g);
    Json rq{{"cmd", cc_show->parsed() ? "cc_show" : "cc_set"}};
    if (qpn) rq["qpn"] = qpn;
    if (cc_set->parsed()) {
      Json set = Json::object();
      for (const std::string& kv : settings) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
          throw Fail{2, "cc set: expected field=value, got " + kv};
        try {
          size_t used = 0;
          const double v = std::stod(kv.substr(eq + 1), &used);
          if (used != kv.size() - eq - 1) throw std::invalid_argument(kv);
          set[kv.substr(0, eq)] = v;
        } catch (const std::exception&) {
          throw Fail{2, "cc set: " + kv.substr(0, eq) + ": not a number: " + kv.substr(eq + 1)};
        }
      }
      rq["set"] = set;
    }
    // A field the device refuses is an argument error (exit 2), like one mrcctl refuses.
    const Json replies = fan_out(cc_show->parsed() ? "cc show" : "cc set", snaps, rq, 2000, nullptr,
                                 /*refusal_code=*/2);
    if (g.json)
      std::cout << replies.dump(2) << std::endl;
    else
      std::cout << mrc::mrcctl::render(mrc::mrcctl::cc_table(replies));
    return 0;
  }
  if (fabric_show->parsed()) {
    const std::string file = fabric_file(fabric_path, fabric_prefix);
    std::ifstream in(file);
    if (!in) throw Fail{2, "fabric show: cannot read " + file};
    std::stringstream ss;
    ss << in.rdbuf();
    auto fab = mrc::srv6::load(ss.str());
    if (!fab.ok()) throw Fail{2, "fabric show: " + file + ": " + fab.error()};
    const Json j = fabric_json(*fab);
    if (g.json) {
      std::cout << j.dump(2) << std::endl;
      return 0;
    }
    std::cout << "fabric " << file << ": " << j["hosts"] << " hosts, " << j["planes"] << " planes, "
              << j["t0s_per_plane"] << " T0 and " << j["spines"] << " T1 per plane, host ports "
              << j["host_port_gbps"] << " Gbit/s\n\n";
    mrc::mrcctl::Table sw;
    sw.head = {"PLANE", "SWITCH", "TIER", "INDEX", "USID"};
    for (const Json& p : j["plane"])
      for (const Json& s : p["switches"]) {
        char usid[8];
        std::snprintf(usid, sizeof usid, "%04x", s["usid"].get<unsigned>());
        sw.rows.push_back({p["plane"].dump(), s["name"], s["tier"], s["index"].dump(), usid});
      }
    std::cout << mrc::mrcctl::render(sw) << "\n";
    mrc::mrcctl::Table h;
    h.head = {"HOST", "NAME", "T0"};
    for (uint32_t p = 0; p < j["planes"].get<uint32_t>(); ++p)
      h.head.push_back("P" + std::to_string(p));
    for (const Json& x : j["host"]) {
      std::vector<std::string> row{x["host"].dump(), x["name"], x["t0"].dump()};
      for (const Json& a : x["addresses"]) row.push_back(a);
      h.rows.push_back(row);
    }
    std::cout << mrc::mrcctl::render(h);
    return 0;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  ::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const Fail& e) {
    std::cerr << "mrcctl: " << e.what << std::endl;
    return e.code;
  } catch (const std::exception& e) {
    std::cerr << "mrcctl: " << e.what() << std::endl;
    return 1;
  }
}
