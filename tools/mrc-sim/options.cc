#include "options.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <sstream>

namespace mrc::msim {

bool parse_size(const std::string& s, uint64_t& out) {
  size_t end = s.size();
  uint64_t mult = 1;
  auto strip = [&](const char* suf, uint64_t m) {
    const size_t n = std::char_traits<char>::length(suf);
    if (end > n && s.compare(end - n, n, suf) == 0) {
      end -= n;
      mult = m;
      return true;
    }
    return false;
  };
  strip("KiB", 1ull << 10) || strip("MiB", 1ull << 20) || strip("GiB", 1ull << 30) ||
      strip("K", 1ull << 10) || strip("M", 1ull << 20) || strip("G", 1ull << 30) ||
      strip("k", 1ull << 10) || strip("B", 1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + end, v);
  if (ec != std::errc() || p != s.data() + end || end == 0) return false;
  if (v > UINT64_MAX / mult) return false;
  out = v * mult;
  return true;
}

namespace {
// A CLI11 option that takes a size with a unit.
CLI::Option* size_option(CLI::App& app, const char* name, uint64_t& v, const char* help) {
  return app
      .add_option_function<std::string>(
          name,
          [&v, name](const std::string& s) {
            if (!parse_size(s, v))
              throw CLI::ValidationError(name,
                                         "'" + s + "' is not a size (e.g. 65536, 64K, 4M, 1G)");
          },
          help)
      ->type_name("SIZE");
}
}  // namespace

std::string check(const Options& o) {
  if (o.hosts < 2) return "--hosts must be at least 2";
  if (o.planes == 0 || o.planes > 16) return "--planes must be 1..16";
  if (o.hosts_per_t0 == 0 || o.hosts_per_t0 > o.hosts) return "--hosts-per-t0 must be 1..hosts";
  if (o.spines == 0 || o.spines > 256) return "--spines must be 1..256";
  if (!(o.host_gbps > 0) || !(o.uplink_gbps > 0)) return "port and uplink rates must be > 0";
  if (o.transports.empty()) return "--transport: give at least one";
  if (o.qps_per_conn == 0 || o.qps_per_conn > 128) return "--qps-per-conn must be 1..128";
  if (o.evs_per_plane == 0 || (o.evs_per_plane + o.spines - 1) / o.spines > 128)
    return "--evs-per-plane must be 1..128 x spines";
  if ((o.backups_per_plane + o.spines - 1) / o.spines > 128) return "--backups-per-plane too large";
  if (o.mtu != 256 && o.mtu != 512 && o.mtu != 1024 && o.mtu != 2048 && o.mtu != 4096 &&
      o.mtu != 8192)
    return "--mtu must be 256, 512, 1024, 2048, 4096 or 8192";
  if (o.msg_bytes > (1u << 30)) return "--msg-bytes must be at most 1 GiB";
  if (o.pattern == Pattern::kRingAllreduce && o.bytes / o.hosts / o.slices > (1u << 30))
    return "ring-allreduce: a slice (bytes / hosts / slices) must be at most 1 GiB";
  if (o.pattern == Pattern::kIncast && (o.incast_senders == 0 || o.incast_senders >= o.hosts))
    return "--incast-senders must be 1..hosts-1";
  if (o.on_demand && o.window == 0) return "--qps-on-demand needs --window";
  if (o.png.size() && o.csv.empty()) return "--png needs --csv (the plot is drawn from it)";
  return "";
}

ParseOutcome parse_cli(int argc, const char* const* argv, Options& o, std::string& err) {
  CLI::App app{
      "mrc-sim: the real MRC engine, one per host, on a simulated two-tier multi-plane fabric,\n"
      "running a collective traffic pattern under several transports in the same run.\n"
      "Every byte is verified at its receiver. Exit 0: all verified; 1: a byte lost,\n"
      "duplicated or corrupted, an error completion, or not done in time; 2: bad arguments."};
  app.add_option("--hosts", o.hosts, "hosts (NICs)")->capture_default_str();
  app.add_option("--planes", o.planes, "planes (ports per NIC)")->capture_default_str();
  app.add_option("--spines", o.spines, "T1 spines per plane (default: non-blocking)");
  app.add_option("--hosts-per-t0", o.hosts_per_t0, "hosts under one T0 (default: min(hosts, 8))");
  app.add_option("--host-gbps", o.host_gbps, "rate of one host port, Gb/s")->capture_default_str();
  app.add_option("--uplink-gbps", o.uplink_gbps, "rate of one T0-T1 link, Gb/s (default: host)");
  app.add_option("--host-latency-us", o.host_latency_us, "host-T0 propagation, us")
      ->capture_default_str();
  app.add_option("--uplink-latency-us", o.uplink_latency_us, "T0-T1 propagation, us")
      ->capture_default_str();
  size_option(app, "--buffer", o.buffer_bytes, "switch egress buffer (default 1M)");
  size_option(app, "--ecn", o.ecn_bytes, "ECN marking threshold (default 64K)");
  size_option(app, "--trim", o.trim_bytes, "trimming threshold (default 128K)");
  std::string pattern = to_string(o.pattern);
  app.add_option("--pattern", pattern, "permutation | alltoall | ring-allreduce | incast")
      ->capture_default_str();
  size_option(app, "--bytes", o.bytes,
              "bytes per flow (ring-allreduce: the buffer per rank) (default 1M)");
  size_option(app, "--msg-bytes", o.msg_bytes, "largest WRITE of a flow (default 1M)");
  app.add_option("--slices", o.slices, "ring-allreduce: messages per chunk")->capture_default_str();
  app.add_option("--incast-senders", o.incast_senders, "incast: senders to host 0")
      ->capture_default_str();
  std::string transports = "mrc";
  app.add_option("--transport", transports,
                 "comma-separated, each run in turn: mrc | mrc-notrim | plane | ecmp")
      ->capture_default_str();
  app.add_option("--qps-per-conn", o.qps_per_conn,
                 "QPs per talking pair (NCCL_IB_QPS_PER_CONNECTION)")
      ->capture_default_str();
  app.add_option("--evs-per-plane", o.evs_per_plane, "mrc: EVs per plane")->capture_default_str();
  app.add_option("--backups-per-plane", o.backups_per_plane, "mrc: backup EVs per plane")
      ->capture_default_str();
  app.add_option("--depth", o.depth, "WRITEs in flight per QP")->capture_default_str();
  app.add_option("--window", o.window,
                 "flows a host has in flight at once, started in order (0: all; alltoall: "
                 "NCCL's p2p scheduling)")
      ->capture_default_str();
  app.add_flag("--qps-on-demand", o.on_demand,
               "make a flow's QPs when it opens and destroy them when it is done (one pair per "
               "direction; needs --window): memory for hosts x window QPs, not hosts^2");
  app.add_option("--mtu", o.mtu, "payload bytes per packet")->capture_default_str();
  app.add_option("--mpr", o.mpr, "max PSN range per QP (and receive window)")
      ->capture_default_str();
  app.add_option("--base-rtt-us", o.base_rtt_us,
                 "the engines' base RTT for congestion control, us, set by hand (default 0: each "
                 "QP learns it, as the engine does with nothing configured; -1: the fabric's "
                 "figure, twice the unloaded RTT through a spine)");
  app.add_flag("!--no-delay-decrease", o.delay_decrease,
               "switch NSCC's delay-based decrease off (an A/B of it; the engines' default is on): "
               "the engines' constants as a profile, which learns no base RTT (sized at "
               "--base-rtt-us, or the fabric's figure when it is learned)");
  app.add_option(
         "--fault", o.faults,
         "'TIME NAME ARGS', repeatable; TIME like 2ms, 300us, 0.01 (s) or 50% (of the "
         "ideal time). NAME ARGS: t1-down|t1-up|blackhole-t1|restore-t1 PLANE SPINE; "
         "t0-down|t0-up|blackhole-t0|restore-t0 PLANE T0; link-down|link-up PLANE T0 "
         "SPINE; flap PLANE T0 SPINE PERIOD UNTIL; loss PLANE T0 SPINE PROB; trimming on|off")
      ->type_name("'TIME NAME ARGS'")
      ->allow_extra_args(false);
  app.add_option("--seed", o.seed, "seed of the workload, the hashes and the network")
      ->capture_default_str();
  app.add_option("--max-time", o.max_time_s,
                 "virtual seconds before giving up (default: 100 x ideal + 10 ms)");
  app.add_option("--json", o.json, "write the results as JSON to FILE ('-': stdout)")
      ->type_name("FILE");
  app.add_option("--csv", o.csv, "write goodput over virtual time to FILE")->type_name("FILE");
  app.add_option("--png", o.png, "plot (gnuplot): completion-time CDF and goodput; needs --csv")
      ->type_name("FILE");
  app.add_option("--interval", o.interval_s, "goodput sampling interval, s (default: ideal / 100)");
  app.add_flag("-q,--quiet", o.quiet, "no table on stdout");
  app.add_flag("!--no-progress", o.progress, "no progress line on stderr");
  app.add_flag("--trace", o.trace,
               "diagnosis, on stderr: every EV state change (host, QP, peer, EV, plane, reason: "
               "'timeout' is an RTO's) and every QP closed after an RTO, with its counters");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return ParseOutcome::kHelp;
  } catch (const CLI::ParseError& e) {
    err = e.what();
    return ParseOutcome::kBad;
  }
  auto p = parse_pattern(pattern);
  if (!p) {
    err = "--pattern '" + pattern + "' is not one of permutation, alltoall, ring-allreduce, incast";
    return ParseOutcome::kBad;
  }
  o.pattern = *p;
  o.transports.clear();
  std::stringstream ts(transports);
  for (std::string t; std::getline(ts, t, ',');) {
    auto tr = parse_transport(t);
    if (!tr) {
      err = "--transport '" + t + "' is not one of mrc, mrc-notrim, plane, ecmp";
      return ParseOutcome::kBad;
    }
    o.transports.push_back(*tr);
  }
  if (o.uplink_gbps == 0) o.uplink_gbps = o.host_gbps;
  if (o.hosts_per_t0 == 0) o.hosts_per_t0 = std::min<uint32_t>(o.hosts, 8);
  if (o.spines == 0 && o.uplink_gbps > 0)
    o.spines =
        static_cast<uint32_t>(std::ceil(o.hosts_per_t0 * o.host_gbps / o.uplink_gbps - 1e-9));
  err = check(o);
  return err.empty() ? ParseOutcome::kRun : ParseOutcome::kBad;
}

}  // namespace mrc::msim
