// mrc-perf: bandwidth runs between two hosts of a namespace fabric, or a traffic pattern
// between many (--pattern alltoall|permutation|incast --hosts N), under a fault schedule,
// with TCP / MPTCP / raw UDP baselines on the same fabric (two hosts); writes CSV, PNG and a
// summary.
// `--demo` is the README's demo: its own 2-host, 4-plane x 4-spine fabric with 2 Gbit/s
// ports, a 30 s WRITE run with a T1 failure and a T0 outage; it falls back to the simulated
// fabric (mrc-demo) where namespaces are not allowed. Single-threaded CLI over session.h.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "matrix.h"
#include "mrc/common/netns.h"
#include "ns_handle.h"
#include "soak.h"

namespace {

using namespace mrc;

std::atomic<bool> g_cancel{false};

void on_signal(int) {
  if (g_cancel.exchange(true)) ::_exit(130);  // a second Ctrl-C ends at once
}

Result<uint32_t, std::string> parse_size(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  unsigned long long mul = 1;
  const std::string unit = end ? end : "";
  if (unit == "K" || unit == "k" || unit == "KiB") mul = 1024;
  else if (unit == "M" || unit == "m" || unit == "MiB") mul = 1024 * 1024;
  else if (!unit.empty()) return Err("size '" + s + "': unit must be K or M");
  if (s.empty() || s[0] == '-' || v == 0 || v * mul > (1ull << 30))
    return Err("size '" + s + "': must be 1 B .. 1 GiB");
  return static_cast<uint32_t>(v * mul);
}

int fallback_to_sim(const char* argv0, const std::string& why) {
  std::fprintf(stderr, "mrc-perf: %s: running the demo on the simulated fabric instead\n",
               why.c_str());
  std::error_code ec;
  auto self = std::filesystem::canonical("/proc/self/exe", ec);
  const std::string sim = (ec ? std::filesystem::path(argv0) : self).parent_path() / "mrc-demo";
  ::execl(sim.c_str(), sim.c_str(), static_cast<char*>(nullptr));
  std::perror(("mrc-perf: " + sim).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mrc-perf: bandwidth runs between two hosts of a namespace fabric (mrc-fabric), or a\n"
      "traffic pattern between many (--pattern), under a fault schedule, with TCP / MPTCP / raw\n"
      "UDP baselines on the same fabric (two hosts). Writes per-\n"
      "interval CSV, a PNG plot and a summary. Exit 0: every run completed, every MRC byte\n"
      "verified and every fault applied; 1: not so; 2: bad arguments or setup failure."};
  std::string prefix;
  uint32_t hosts = 2, planes = 0, spines = 4, hosts_per_t0 = 1;
  double rate = 2;
  int mtu = 9000;
  bool demo = false, no_gso = false, trim = false, no_mrc = false, rx_placement = false;
  double soak_min = 0;
  std::string matrix_dir;
  uint64_t seed = 1;
  std::string size = "1M", op = "write", pattern;
  std::vector<std::string> faults, baselines;
  perf::SessionOptions o;
  app.add_flag("--demo", demo,
               "the README demo: own 2x4x4 fabric, 2 Gbit/s ports, 30 s WRITE with a T1 failure "
               "and a T0 outage, CSV and PNG in ./demo-out (sim fallback without namespaces)");
  app.add_option("--prefix", prefix, "use the fabric `mrc-fabric up --prefix P` made");
  app.add_option("--planes", planes, "make an own fabric (removed at the end): planes");
  app.add_option("--spines", spines, "own fabric: spines per plane")->capture_default_str();
  CLI::Option* hosts_opt =
      app.add_option("--hosts", hosts,
                     "own fabric: hosts; --pattern: hosts 0..N-1 take part (default: the own "
                     "fabric's, or every host of --prefix's)")
          ->capture_default_str();
  CLI::Option* per_t0_opt =
      app.add_option("--hosts-per-t0", hosts_per_t0,
                     "own fabric: hosts per T0 (default 1; --pattern with 4+ hosts: 2)")
          ->capture_default_str();
  CLI::Option* rate_opt =
      app.add_option("--rate", rate,
                     "own fabric: host port rate, Gbit/s (tbf); 0 = unlimited (default 2; "
                     "--pattern: all hosts' ports add up to 2 Gbit/s, at most 2 each)")
          ->capture_default_str();
  app.add_option("--pattern", pattern,
                 "alltoall (every host to every other at once), permutation (each host to one "
                 "other, a derangement drawn from --seed) or incast (hosts 1..N-1 to host 0): "
                 "one QP pair (x --qps) per flow, every host its own engine and driver; prints "
                 "goodput per host, the total and the ideal of the host ports; --baseline tcp: "
                 "an iperf3 per flow at once");
  app.add_option("--mtu", mtu, "own fabric: MTU of every link")->capture_default_str();
  app.add_option("--client", o.client, "sending host id")->capture_default_str();
  app.add_option("--server", o.server, "receiving host id")->capture_default_str();
  app.add_option("--op", op, "write, write_imm, send, send_imm or read")->capture_default_str();
  CLI::Option* size_opt =
      app.add_option("--size", size, "message size (K, M suffixes; --pattern: default 256K)")
          ->capture_default_str();
  app.add_option("--qps", o.qps, "QP pairs (--pattern: per flow)")->capture_default_str();
  CLI::Option* outstanding_opt =
      app.add_option("--outstanding", o.outstanding,
                     "messages in flight per QP (1..30; --pattern: default 4)")
          ->capture_default_str();
  app.add_option("--duration", o.duration_s, "seconds per run")->capture_default_str();
  app.add_option("--interval", o.interval_s, "seconds per MRC sample")->capture_default_str();
  app.add_flag("--bidir", o.bidirectional, "both directions at once");
  app.add_flag("--latency", o.latency,
               "latency run: one message in flight per QP, completions polled without sleeping "
               "(use a small --size); prints p50/p99/p99.9/max");
  app.add_option("--latency-trace", o.latency_trace,
                 "with --latency (one QP): a CSV row per round trip (each host's driver "
                 "counters, tail probes, the polling thread's time off CPU) and the slow round "
                 "trips' causes in the summary");
  app.add_flag("!--no-verify", o.verify, "do not check the bytes (default: every byte checked)");
  app.add_option("--fault", faults, "'<time> <fault>', repeatable: '5s down t0 h0 p2' (mrc-fabric's "
                                    "fault words; undone at the end of each run)");
  app.add_option("--baseline", baselines, "tcp, mptcp or udp-ceiling; repeatable; run after MRC");
  app.add_flag("--no-mrc", no_mrc, "run only the baselines");
  std::string ceiling_memory;
  app.add_option("--ceiling-memory", ceiling_memory,
                 "udp-ceiling: its senders read their sends, and its receiver lands what comes, "
                 "in turn through this many bytes each (K, M suffixes; default: one send and 16 "
                 "receive buffers, reused, in cache), as MRC moves its messages between 2 x "
                 "outstanding x size of registered memory on each side");
  app.add_flag("--trim", trim, "the fabric trims: zero UDP checksums (so no GSO), engine told");
  app.add_flag("--no-gso", no_gso, "MRC sends single datagrams (no UDP GSO)");
  app.add_flag("--rx-placement", rx_placement,
               "MRC's receiver lets the kernel copy WRITE payloads into place "
               "(UdpConfig::rx_placement, docs/engine.md)");
  app.add_flag("--ecmp", o.ecmp,
               "MRC picks paths by UDP source port over the fabric's ECMP routes (no SRv6)");
  app.add_option("--base-rtt-us", o.base_rtt_us,
                 "congestion control's unloaded RTT, us (0: learned)")->capture_default_str();
  app.add_option("--mpr", o.max_psn_range, "most packets in flight per QP (max PSN range)")
      ->capture_default_str();
  app.add_flag("!--no-cc", o.congestion_control, "congestion control off (a window of MPR only)");
  app.add_option("--progress-threads", o.progress_threads,
                 "each endpoint's UDP driver progress threads, at most one per plane (0: the "
                 "driver's default)")
      ->check(CLI::Range(0u, 16u))
      ->capture_default_str();
  app.add_option("--csv", o.csv, "per-interval goodput, every run (CSV)");
  app.add_option("--png", o.png, "plot of --csv (gnuplot); needs --csv");
  app.add_option("--title", o.title, "plot title");
  app.add_flag("-q,--quiet", o.quiet, "no line per second");
  app.add_flag("--paths", o.show_paths, "print the sender's EVs at the end (state, sent, lost)");
  app.add_option("--soak", soak_min,
                 "a soak run of this many minutes: WRITE, WRITE_IMM, SEND, SEND_IMM and READ QPs "
                 "in both directions, random faults of every kind one at a time (never all "
                 "paths), trimming on; PASS needs every byte and immediate verified, no error "
                 "completion and flat memory (RSS slope over the second half) "
                 "(own fabric: 2 hosts, 4 planes x 4 spines unless given)")
      ->check(CLI::PositiveNumber);
  auto* duration_opt = app.get_option("--duration");
  app.add_option("--matrix", matrix_dir,
                 "the fault matrix (matrix.h): every fault kind, MRC, MPTCP and TCP, " +
                     std::to_string(static_cast<int>(perf::kMatrixDuration)) +
                     " s each (--duration); table, CSVs and PNG into this directory");
  app.add_option("--seed", seed,
                 "--soak: seed of the fault schedule; --pattern permutation: of the derangement")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (!o.latency_trace.empty() && !o.latency) {
    std::fprintf(stderr, "mrc-perf: --latency-trace traces a latency run: add --latency\n");
    return 2;
  }
  if (hosts_opt->count() > 0 && hosts < 2) {
    std::fprintf(stderr, "mrc-perf: --hosts must be at least 2, got %u\n", hosts);
    return 2;
  }
  if (!pattern.empty()) {
    auto p = perf::parse_pattern(pattern);
    if (!p.ok()) {
      std::fprintf(stderr, "mrc-perf: --pattern: %s\n", p.error().c_str());
      return 2;
    }
    for (const char* o2 :
         {"--client", "--server", "--bidir", "--soak", "--latency", "--demo", "--no-mrc",
          "--matrix"}) {
      if (app.count(o2) > 0) {
        std::fprintf(stderr, "mrc-perf: --pattern picks the flows itself: %s does not go with it\n",
                     o2);
        return 2;
      }
    }
    for (const std::string& b : baselines) {
      if (b != "tcp") {
        std::fprintf(stderr,
                     "mrc-perf: --baseline %s: with --pattern only the tcp baseline runs (an "
                     "iperf3 per flow)\n",
                     b.c_str());
        return 2;
      }
    }
    o.pattern = perf::PatternOptions{*p, hosts, seed};
    if (size_opt->count() == 0) size = "256K";
    if (outstanding_opt->count() == 0) o.outstanding = 4;
    if (prefix.empty()) {
      if (per_t0_opt->count() == 0 && hosts >= 4) hosts_per_t0 = 2;
      if (rate_opt->count() == 0 && planes > 0) {
        rate = perf::pattern_port_gbps(hosts, planes);
        std::printf(
            "mrc-perf: %s between %u hosts: host ports at %.4g Gbit/s (all ports together "
            "%.4g Gbit/s, so that it fits in a few cores; --rate to change)\n",
            pattern.c_str(), hosts, rate, rate * hosts * planes);
      }
    }
  }

  if (demo) {
    if (auto ok = mrc::netns_supported(); !ok.ok()) return fallback_to_sim(argv[0], ok.error());
    planes = 4;
    spines = 4;
    hosts = 2;
    rate = 2;
    o.duration_s = 30;
    if (faults.empty())
      faults = {"6s down t1 p1 s2", "10s up t1 p1 s2", "16s down t0 h0 p2", "23s up t0 h0 p2"};
    std::filesystem::create_directories("demo-out");
    if (o.csv.empty()) o.csv = "demo-out/demo.csv";
    if (o.png.empty()) o.png = "demo-out/demo.png";
    if (o.title.empty())
      o.title = "MRC WRITE goodput, 2 hosts, 4 planes x 4 spines, 2 Gbit/s ports: T1 fails and "
                "is restored, then a T0 of plane 2 goes down and up";
  }
  if (!matrix_dir.empty()) {
    if (prefix.empty() && planes == 0) planes = 4;
    if (duration_opt->count() == 0) o.duration_s = perf::kMatrixDuration;
    std::vector<std::string> given;
    for (const CLI::Option* opt : app.get_options()) {
      if (opt->count() > 0) given.push_back(opt->get_name());
    }
    if (auto m = perf::check_matrix_options(o.duration_s, given); !m) {
      std::fprintf(stderr, "mrc-perf: %s\n", m.error().c_str());
      return 2;
    }
  }
  if (soak_min > 0) {
    if (prefix.empty() && planes == 0) planes = 4;
    o.duration_s = soak_min * 60;
    o.ops.assign(std::begin(perf::kAllOps), std::end(perf::kAllOps));
    o.qps = static_cast<uint32_t>(o.ops.size());  // a QP pair per kind, both directions
    o.bidirectional = true;
    trim = true;
    o.quiet = true;
    if (size == "1M") size = "256K";
  }
  auto parsed_op = perf::parse_op(op);
  auto parsed_size = parse_size(size);
  auto parsed_memory = parse_size(ceiling_memory.empty() ? "1" : ceiling_memory);
  for (const auto& r :
       {parsed_op.ok() ? std::string() : parsed_op.error(),
        parsed_size.ok() ? std::string() : parsed_size.error(),
        parsed_memory.ok() ? std::string() : "--ceiling-memory: " + parsed_memory.error()}) {
    if (!r.empty()) {
      std::fprintf(stderr, "mrc-perf: %s\n", r.c_str());
      return 2;
    }
  }
  o.op = *parsed_op;
  o.msg_bytes = *parsed_size;
  o.ceiling_memory_bytes = ceiling_memory.empty() ? 0 : *parsed_memory;
  o.mrc = !no_mrc;
  o.trimming = trim;
  o.gso = !no_gso;
  o.rx_placement = rx_placement;
  for (const std::string& f : faults) {
    auto t = perf::parse_timed_fault(f);
    if (!t.ok()) {
      std::fprintf(stderr, "mrc-perf: --fault: %s\n", t.error().c_str());
      return 2;
    }
    if (auto p = nsfabric::parse_fault(t->fault); !p.ok()) {
      std::fprintf(stderr, "mrc-perf: --fault '%s': %s\n", f.c_str(), p.error().c_str());
      return 2;
    }
    o.faults.push_back(*t);
  }
  std::stable_sort(o.faults.begin(), o.faults.end(),
                   [](const auto& a, const auto& b) { return a.t_s < b.t_s; });
  for (const std::string& b : baselines) {
    auto p = perf::parse_baseline(b);
    if (!p.ok()) {
      std::fprintf(stderr, "mrc-perf: --baseline: %s\n", p.error().c_str());
      return 2;
    }
    o.baselines.push_back(*p);
  }
  if (!o.png.empty() && o.csv.empty()) {
    std::fprintf(stderr, "mrc-perf: --png needs --csv (the plot is drawn from it)\n");
    return 2;
  }
  if (prefix.empty() == (planes == 0)) {
    std::fprintf(stderr, "mrc-perf: give either --prefix (a fabric mrc-fabric made) or --planes "
                         "(and --spines, --hosts, --rate) to make one, or --demo\n");
    return 2;
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  o.cancel = &g_cancel;

  // The fabric: attached, or made here and removed at the end (also after Ctrl-C).
  std::optional<nsfabric::NsFabric> fab;
  bool own = false;
  if (!prefix.empty()) {
    auto a = nsfabric::NsFabric::attach(prefix);
    if (!a.ok()) {
      std::fprintf(stderr, "mrc-perf: %s\n", a.error().c_str());
      return 2;
    }
    fab.emplace(std::move(a).value());
    if (o.pattern) {
      const uint32_t have = fab->fabric().config().hosts;
      if (hosts_opt->count() == 0) o.pattern->hosts = have;
      if (o.pattern->hosts > have) {
        std::fprintf(stderr, "mrc-perf: --hosts %u: the fabric %s has only %u hosts\n",
                     o.pattern->hosts, prefix.c_str(), have);
        return 2;
      }
    }
  } else {
    srv6::FabricConfig cfg;
    cfg.hosts = hosts;
    cfg.planes = planes;
    cfg.spines = spines;
    cfg.hosts_per_t0 = hosts_per_t0;
    cfg.host_port_gbps = rate > 0 ? rate : 400;
    auto f = srv6::Fabric::make(cfg);
    if (!f.ok()) {
      std::fprintf(stderr, "mrc-perf: fabric: %s\n", f.error().c_str());
      return 2;
    }
    nsfabric::Options no;
    no.prefix = "mrcp" + std::to_string(::getpid());
    no.mtu = mtu;
    no.shape = rate > 0;
    no.gso = !trim;
    char port[32] = "unlimited";
    if (rate > 0) std::snprintf(port, sizeof port, "%.4g Gbit/s", rate);
    std::printf(
        "mrc-perf: building fabric %s: %u hosts (%u per T0), %u planes x %u spines, %s "
        "ports\n",
        no.prefix.c_str(), hosts, hosts_per_t0, planes, spines, port);
    auto u = nsfabric::NsFabric::up(*f, no);
    if (!u.ok()) {
      std::fprintf(stderr, "mrc-perf: %s\n", u.error().c_str());
      return 2;
    }
    fab.emplace(std::move(u).value());
    own = true;
  }

  perf::FabricHandle h = perf::fabric_handle(*fab);
  h.apply_fault = [apply = h.apply_fault, quiet = o.quiet](const std::string& text) {
    auto r = apply(text);
    if (!quiet) std::printf("  fault: %s%s%s\n", text.c_str(), r.ok() ? "" : ": FAILED: ",
                            r.ok() ? "" : r.error().c_str());
    return r;
  };

  if (soak_min > 0) {
    perf::SoakPlan plan;
    plan.duration_s = o.duration_s;
    plan.seed = seed;
    for (const auto& f : perf::soak_schedule(fab->fabric(), o.client, o.server, plan)) o.faults.push_back(f);
    std::stable_sort(o.faults.begin(), o.faults.end(),
                     [](const auto& a, const auto& b) { return a.t_s < b.t_s; });
    std::printf("mrc-perf: soak of %.0f min, seed %lu: %zu faults and repairs\n", soak_min,
                static_cast<unsigned long>(seed), o.faults.size());
  }

  if (!matrix_dir.empty()) {
    o.quiet = false;
    auto rows = perf::run_matrix(h, o, matrix_dir);
    int rc = rows.ok() ? 0 : 1;
    if (rows.ok()) {
      std::printf("\n%s\ntable: %s/matrix.md, plot: %s/matrix.png\n",
                  perf::matrix_table(*rows).c_str(), matrix_dir.c_str(), matrix_dir.c_str());
    } else {
      std::fprintf(stderr, "mrc-perf: matrix: %s\n", rows.error().c_str());
    }
    if (own) {
      if (auto d = fab->down(); !d.ok()) {
        std::fprintf(stderr, "mrc-perf: removing the fabric: %s\n", d.error().c_str());
        rc = 1;
      }
    }
    return rc;
  }

  auto res = perf::run_session(h, o);
  int rc = 0;
  if (!res.ok()) {
    std::fprintf(stderr, "mrc-perf: %s\n", res.error().c_str());
    rc = 2;
  } else {
    std::printf("\n");
    for (const std::string& d : res->details) std::printf("%s\n", d.c_str());
    bool faults_ok = true;
    for (size_t i = 0; i < res->series.size(); ++i) {
      std::printf("\n%s", perf::format_summary(res->series[i], res->summaries[i]).c_str());
      for (const auto& m : res->series[i].faults) faults_ok = faults_ok && m.error.empty();
    }
    if (res->hosts) {
      std::printf("\nmrc: %s",
                  perf::format_hosts(*res->hosts, res->summaries.at(0).healthy_gbps).c_str());
      for (size_t i = 0; i < res->baseline_hosts.size(); ++i) {
        const perf::HostsSummary& b = res->baseline_hosts[i];
        std::printf("\n%s: %s", res->series.at(i + 1).name.c_str(),
                    perf::format_hosts(b, res->summaries.at(i + 1).healthy_gbps).c_str());
        if (b.total_gbps > 0 && res->summaries.at(i + 1).healthy_gbps > 0)
          std::printf("mrc / %s: %.2f (total), %.2f (healthy)\n",
                      res->series.at(i + 1).name.c_str(), res->hosts->total_gbps / b.total_gbps,
                      res->summaries.at(0).healthy_gbps / res->summaries.at(i + 1).healthy_gbps);
      }
    }
    if (!o.csv.empty()) std::printf("\nCSV: %s\n", o.csv.c_str());
    if (!o.png.empty()) std::printf("PNG: %s\n", o.png.c_str());
    bool memory_ok = true;
    if (soak_min > 0 && res->mrc) {
      const auto& r = *res->mrc;
      // Flat memory: nothing grows with time once the run is under way. The slope of RSS over
      // the second half of the run (the tool's records are preallocated), KiB per minute.
      const double slope = perf::rss_slope_kib_per_min(r.rss_kib_samples, o.duration_s / 2);
      memory_ok = slope < perf::kFlatRssKibPerMin;
      std::printf(
          "\nsoak: %lu messages, %.2f GB, %lu mismatches, %lu error completions, %lu "
          "retransmits, %lu duplicates dropped, %lu EV state changes; RSS %lu -> max %lu -> %lu "
          "KiB, "
          "%.0f KiB/min over the second half (%s); sends a full socket refused (EAGAIN) %llu + "
          "%llu\n",
          static_cast<unsigned long>(r.messages), static_cast<double>(r.bytes) / 1e9,
          static_cast<unsigned long>(r.mismatches), static_cast<unsigned long>(r.errors),
          static_cast<unsigned long>(r.retransmits), static_cast<unsigned long>(r.duplicates),
          static_cast<unsigned long>(r.path_events.size() + r.path_events_dropped),
          static_cast<unsigned long>(r.rss_start_kib), static_cast<unsigned long>(r.rss_max_kib),
          static_cast<unsigned long>(r.rss_end_kib), slope, memory_ok ? "flat" : "GREW",
          static_cast<unsigned long long>(r.client_counters.send_eagain),
          static_cast<unsigned long long>(r.server_counters.send_eagain));
    }
    const bool pass = res->data_ok && faults_ok && memory_ok && !g_cancel;
    std::printf("%s%s%s\n", pass ? "PASS" : "FAIL", res->first_error.empty() ? "" : ": ",
                res->first_error.c_str());
    rc = pass ? 0 : 1;
  }
  if (own) {
    if (auto d = fab->down(); !d.ok()) {
      std::fprintf(stderr, "mrc-perf: removing the fabric: %s\n", d.error().c_str());
      rc = rc ? rc : 1;
    }
  }
  return rc;
}
