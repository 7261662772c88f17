#include "session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <tuple>

#include "mrc/wire/wire.h"
#include "srv6/fabric.h"

namespace mrc::perf {

Result<Baseline, std::string> parse_baseline(const std::string& s) {
  if (s == "tcp") return Baseline::kTcp;
  if (s == "mptcp") return Baseline::kMptcp;
  if (s == "udp-ceiling") return Baseline::kUdpCeiling;
  return Err("baseline must be tcp, mptcp or udp-ceiling, got '" + s + "'");
}

const char* to_string(Baseline b) {
  switch (b) {
    case Baseline::kTcp:
      return "tcp";
    case Baseline::kMptcp:
      return "mptcp";
    case Baseline::kUdpCeiling:
      return "udp-ceiling";
  }
  return "?";
}

Result<msim::Pattern, std::string> parse_pattern(const std::string& s) {
  for (msim::Pattern p :
       {msim::Pattern::kAlltoall, msim::Pattern::kPermutation, msim::Pattern::kIncast})
    if (s == msim::to_string(p)) return p;
  return Err("pattern must be alltoall, permutation or incast, got '" + s + "'");
}

double pattern_port_gbps(uint32_t hosts, uint32_t planes) {
  if (hosts == 0 || planes == 0) return 2;
  return std::min(2.0, kPatternBudgetGbps / (static_cast<double>(hosts) * planes));
}

Result<PatternPlan, std::string> plan_pattern(const srv6::Fabric& f, const PatternOptions& p,
                                              double port_gbps) {
  const uint32_t have = f.config().hosts;
  if (p.hosts < 2) return Err("a pattern needs at least 2 hosts, got " + std::to_string(p.hosts));
  if (p.hosts > have)
    return Err(std::to_string(p.hosts) + " hosts asked for, but the fabric has " +
               std::to_string(have));
  msim::WorkloadSpec ws;
  ws.pattern = p.pattern;
  ws.hosts = p.hosts;
  ws.seed = p.seed;
  ws.incast_senders = p.hosts - 1;
  ws.incast_dst = 0;
  auto w = msim::make_workload(ws);
  if (!w.ok()) return Err(w.error());
  PatternPlan plan;
  for (const msim::Flow& fl : w->flows) plan.pairs.emplace_back(fl.src, fl.dst);
  if (port_gbps > 0) {
    msim::Capacity c;
    c.planes = f.config().planes;
    c.spines = f.config().spines;
    c.hosts_per_t0 = f.config().hosts_per_t0;
    c.host_port_bps = static_cast<uint64_t>(port_gbps * 1e9);
    c.uplink_bps = static_cast<uint64_t>(f.config().uplink_gbps * 1e9);
    const double t = msim::ideal_seconds(*w, c);
    if (t > 0) plan.ideal_gbps = static_cast<double>(w->total_bytes()) * 8 / t / 1e9;
  }
  return plan;
}

std::string format_hosts(const HostsSummary& h, double healthy_gbps) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%s between %zu hosts, %zu flows: goodput per host, Gbit/s\n",
                h.pattern.c_str(), h.tx_gbps.size(), h.pairs.size());
  out += line;
  for (size_t i = 0; i < h.tx_gbps.size(); ++i) {
    std::snprintf(line, sizeof line, "  host %-3zu  tx %8.4f  rx %8.4f\n", i, h.tx_gbps[i],
                  h.rx_gbps[i]);
    out += line;
  }
  if (h.ideal_gbps > 0) {
    std::snprintf(line, sizeof line,
                  "  total %.4f Gbit/s (healthy %.4f) of ideal %.4f (the host ports' bottleneck): "
                  "efficiency %.3f (healthy %.3f)\n",
                  h.total_gbps, healthy_gbps, h.ideal_gbps, h.total_gbps / h.ideal_gbps,
                  healthy_gbps / h.ideal_gbps);
  } else {
    std::snprintf(line, sizeof line,
                  "  total %.4f Gbit/s (healthy %.4f); no ideal: the host ports are not shaped\n",
                  h.total_gbps, healthy_gbps);
  }
  out += line;
  return out;
}

namespace {

// Applies the schedule from the baselines' tick callback (their own clock).
class TickFaults {
 public:
  TickFaults(const std::vector<TimedFault>& faults, const FabricHandle& fab)
      : faults_(faults), fab_(fab) {}
  void tick(double t_s) {
    while (next_ < faults_.size() && faults_[next_].t_s <= t_s) {
      const auto began = std::chrono::steady_clock::now();
      auto r = fab_.apply_fault(faults_[next_].fault);
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      marks_.push_back(FaultMark{t_s, faults_[next_].fault, r.ok() ? "" : r.error(), t_s + took});
      ++next_;
    }
  }
  std::vector<FaultMark> marks() const { return marks_; }

 private:
  const std::vector<TimedFault>& faults_;
  const FabricHandle& fab_;
  size_t next_ = 0;
  std::vector<FaultMark> marks_;
};

// TCP for a pattern: an iperf3 per flow, all at once (server port 5201 + flow), each from its
// initiator's plane-0 address to its target's, measured at the receiver; the first flow's
// ticks apply the faults. The sum is on the first flow's intervals: each adds the rate of its
// own interval that holds the middle of that one (every iperf3 keeps its own 0.1 s intervals,
// started within milliseconds of the others), up to the end of the shortest flow. Per host:
// the flows' means.
Result<BaselineResult, std::string> run_tcp_pattern(const FabricHandle& fab,
                                                    const PatternPlan& plan, uint32_t hosts,
                                                    const BaselineSpec& base, TickFaults& ticks,
                                                    HostsSummary* per_host) {
  const srv6::Fabric& f = *fab.fabric;
  std::vector<Result<BaselineResult, std::string>> results(plan.pairs.size(),
                                                           Err(std::string("not run")));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < plan.pairs.size(); ++i) {
    BaselineSpec spec = base;
    const auto [a, b] = plan.pairs[i];
    spec.client_netns = fab.host_netns(a);
    spec.server_netns = fab.host_netns(b);
    spec.client_addrs = {srv6::format(f.host_address(a, 0))};
    spec.server_addrs = {srv6::format(f.host_address(b, 0))};
    spec.port = static_cast<uint16_t>(5201 + i);
    spec.on_tick = nullptr;
    if (i == 0) spec.on_tick = [&ticks](double t) { ticks.tick(t); };
    threads.emplace_back([&results, i, spec] { results[i] = run_tcp(spec); });
  }
  for (std::thread& t : threads) t.join();
  BaselineResult out;
  double end_s = 1e300;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok())
      return Err("flow " + std::to_string(plan.pairs[i].first) + " -> " +
                 std::to_string(plan.pairs[i].second) + ": " + results[i].error());
    end_s = std::min(end_s, results[i]->samples.empty() ? 0.0 : results[i]->samples.back().t_s);
  }
  per_host->pairs = plan.pairs;
  per_host->tx_gbps.assign(hosts, 0);
  per_host->rx_gbps.assign(hosts, 0);
  for (size_t i = 0; i < results.size(); ++i) {
    per_host->tx_gbps[plan.pairs[i].first] += results[i]->mean_gbps;
    per_host->rx_gbps[plan.pairs[i].second] += results[i]->mean_gbps;
    per_host->total_gbps += results[i]->mean_gbps;
  }
  std::vector<size_t> at(results.size(), 0);  // each flow's interval holding `mid`
  for (const Sample& grid : results[0]->samples) {
    if (grid.t_s > end_s) break;
    const double mid = grid.t_s - grid.dur_s / 2;
    Sample sum{grid.t_s, 0, grid.dur_s};
    for (size_t i = 0; i < results.size(); ++i) {
      const std::vector<Sample>& v = results[i]->samples;
      while (at[i] + 1 < v.size() && v[at[i]].t_s < mid) ++at[i];
      sum.gbps += v[at[i]].gbps;
    }
    out.samples.push_back(sum);
  }
  out.mean_gbps = per_host->total_gbps;
  out.detail = std::to_string(results.size()) +
               " iperf3 flows at once, one per flow of the pattern, each on plane 0 (its ports "
               "are one plane's share of the ideal's)";
  return out;
}

void undo(const FabricHandle& fab, const std::vector<TimedFault>& faults) {
  if (!fab.repairs) return;
  std::vector<std::string> texts;
  for (const TimedFault& f : faults) texts.push_back(f.fault);
  for (const std::string& f : fab.repairs(texts)) {
    auto r = fab.apply_fault(f);
    if (!r.ok())
      std::fprintf(stderr, "mrc-perf: undoing faults: %s: %s\n", f.c_str(), r.error().c_str());
  }
}

}  // namespace

Result<SessionResult, std::string> run_session(const FabricHandle& fab, const SessionOptions& o) {
  if (fab.fabric == nullptr) return Err(std::string("no fabric"));
  const srv6::Fabric& f = *fab.fabric;
  const uint32_t hosts = f.config().hosts;
  std::optional<PatternPlan> plan;
  if (o.pattern) {
    auto p = plan_pattern(f, *o.pattern, fab.port_gbps);
    if (!p.ok()) return Err(p.error());
    for (Baseline b : o.baselines)
      if (b != Baseline::kTcp)
        return Err(std::string("with a pattern only the tcp baseline runs (an iperf3 per flow), "
                               "not ") +
                   to_string(b));
    plan = std::move(p).value();
  } else if (o.client >= hosts || o.server >= hosts || o.client == o.server) {
    return Err("client and server must be two different hosts of the " + std::to_string(hosts) +
               "-host fabric, got " + std::to_string(o.client) + " and " +
               std::to_string(o.server));
  }
  SessionResult out;
  auto shared = std::make_shared<const srv6::Fabric>(f);
  std::vector<std::string> addrs[2];
  for (int i = 0; i < 2; ++i) {
    const uint32_t h = i == 0 ? o.client : o.server;
    for (uint32_t p = 0; p < f.config().planes; ++p)
      addrs[i].push_back(srv6::format(f.host_address(h, p)));
  }

  if (o.mrc) {
    MrcRunSpec spec;
    auto configure = [&](io::UdpConfig& c, uint32_t h) {
      for (uint32_t p = 0; p < f.config().planes; ++p)
        c.planes.push_back(
            io::PlaneConfig{srv6::format(f.host_address(h, p)), io::kDefaultUdpPort});
      c.path_mode = o.ecmp ? io::PathMode::kEcmp : io::PathMode::kSrv6;
      c.fabric = shared;
      c.local_host = h;
      c.netns = fab.host_netns(h);
      c.zero_udp_checksum = o.trimming;
      c.gso = o.gso;
      c.gro = o.gro;
      c.rx_placement = o.rx_placement;
      c.engine.trimming = o.trimming;
      // One checksum over the payload: the UDP one, or MRC's own where UDP's is off.
      c.engine.payload_crc = o.trimming;
      c.engine.congestion_control = o.congestion_control;
      c.progress_threads = o.progress_threads;
      c.engine.base_rtt = engine::Duration{static_cast<int64_t>(o.base_rtt_us * 1e3)};
      // The ports' rate: the shaping's, else (unshaped) the fabric's nominal port rate, as a
      // host config of this fabric gives it (io/config.cc).
      const double gbps = fab.port_gbps > 0 ? fab.port_gbps : f.config().host_port_gbps;
      c.engine.nic_bps = static_cast<uint64_t>(gbps * 1e9 * f.config().planes);
    };
    if (plan) {
      spec.hosts.resize(o.pattern->hosts);
      for (uint32_t h = 0; h < o.pattern->hosts; ++h) configure(spec.hosts[h], h);
      spec.pairs = plan->pairs;
    } else {
      configure(spec.client, o.client);
      configure(spec.server, o.server);
    }
    spec.op = o.op;
    spec.ops = o.ops;
    spec.msg_bytes = o.msg_bytes;
    spec.outstanding = o.latency ? 1 : o.outstanding;
    spec.spin = o.latency;
    spec.trace_round_trips = o.latency && !o.latency_trace.empty();
    spec.max_psn_range = o.max_psn_range;
    // A plane keeps its full share while its good spines can still carry its host ports:
    // hosts_per_t0 ports of port_gbps over uplinks of uplink_gbps each.
    spec.min_active_per_plane = srv6::spines_for_full_t0(f.config(), fab.port_gbps);
    spec.qps = o.qps;
    spec.bidirectional = o.bidirectional && !plan;
    spec.verify = o.verify;
    spec.duration_s = o.duration_s;
    spec.interval_s = o.interval_s;
    spec.schedule = o.faults;
    spec.apply_fault = fab.apply_fault;
    spec.cancel = o.cancel;
    if (!o.quiet) {
      spec.on_second = [](double t, double gbit) {
        std::printf("  mrc %5.0f s  %7.3f Gbit/s\n", t, gbit);
        std::fflush(stdout);
      };
    }
    auto r = run_mrc(spec);
    undo(fab, o.faults);
    if (!r.ok()) return Err("mrc: " + r.error());
    Series s{"mrc", r->intervals, r->faults, r->path_events};
    out.summaries.push_back(summarize(s));
    out.series.push_back(std::move(s));
    char line[512];
    std::snprintf(
        line, sizeof line,
        "mrc: %s %u B x %u outstanding, %u QP%s%s: %llu messages (%.3f GB) %s, "
        "%llu retransmits (%llu spurious, %llu duplicates received), %llu RTOs, %llu trims, "
        "%llu CRC errors; "
        "%llu datagrams sent in %llu GSO messages",
        to_string(o.op), o.msg_bytes, spec.outstanding, o.qps, o.qps > 1 ? "s" : "",
        plan              ? " per flow"
        : o.bidirectional ? ", both ways"
                          : "",
        (unsigned long long)r->messages, r->bytes / 1e9, o.verify ? "verified" : "not verified",
        (unsigned long long)r->retransmits, (unsigned long long)r->spurious,
        (unsigned long long)r->duplicates, (unsigned long long)r->rtos,
        (unsigned long long)r->trims_seen, (unsigned long long)r->crc_errors,
        (unsigned long long)(plan ? r->datagrams_sent : r->client_counters.datagrams_sent),
        (unsigned long long)(plan ? r->gso_messages : r->client_counters.gso_messages));
    out.details.push_back(plan ? std::string(line) + " (all hosts)" : std::string(line));
    if (plan) {
      HostsSummary hs;
      hs.pattern = msim::to_string(o.pattern->pattern);
      hs.pairs = plan->pairs;
      hs.ideal_gbps = plan->ideal_gbps;
      const double span = r->sampled_s > 0 ? r->sampled_s : 1;
      for (size_t h = 0; h < r->host_tx_bytes.size(); ++h) {
        hs.tx_gbps.push_back(static_cast<double>(r->host_tx_bytes[h]) * 8 / span / 1e9);
        hs.rx_gbps.push_back(static_cast<double>(r->host_rx_bytes[h]) * 8 / span / 1e9);
        hs.total_gbps += hs.rx_gbps.back();
      }
      out.hosts = std::move(hs);
    }
    if (!plan) {
      // What a capture on each host counts leaving it (docs/wireshark.md).
      std::string sent = "mrc: datagrams sent by kind:";
      for (const auto& [host, st] :
           {std::pair{o.client, &r->client_engine}, {o.server, &r->server_engine}}) {
        sent += " h" + std::to_string(host);
        for (size_t k = 0; k < st->tx_by_kind.size(); ++k)
          if (st->tx_by_kind[k] > 0)
            sent += std::string(" ") + wire::to_string(static_cast<wire::Kind>(k)) + " " +
                    std::to_string(st->tx_by_kind[k]);
        sent += " (" + std::to_string(st->tx_retransmit_flagged) + " retransmitted);";
      }
      sent.pop_back();
      out.details.push_back(sent);
    }
    if (!plan && !o.latency && r->bytes > 0) {
      // What each MiB the receiver accepted cost each host's driver, in counts the machine's
      // load does not move (counters since the driver was made, so setup adds a little): the
      // load-independent side of the CPU per byte (issue 17, perf/bytes_per_core.sh).
      const double mib = static_cast<double>(r->bytes) / (1 << 20);
      for (const auto& [host, c, st] :
           {std::tuple{o.client, &r->client_counters, &r->client_engine},
            {o.server, &r->server_counters, &r->server_engine}}) {
        const uint64_t acks = st->tx_by_kind[static_cast<size_t>(wire::Kind::kAck)];
        std::snprintf(line, sizeof line,
                      "mrc: per MiB received, h%u: %.2f progress loop rounds, %.2f timer rounds, "
                      "%.2f recvmmsg, %.2f sendmmsg, %.2f datagrams sent (%.2f ACKs), "
                      "%.2f received, %.2f app wakeups; loop woke by socket %.2f, app %.2f, "
                      "deadline %.2f; WRITE payload KiB copied %.1f, in place %.1f, copied out "
                      "of place %.1f (UdpConfig::rx_placement)",
                      host, c->loop_iterations / mib, c->timeouts / mib, c->recvmmsg_calls / mib,
                      c->sendmmsg_calls / mib, c->datagrams_sent / mib, acks / mib,
                      c->datagrams_received / mib, c->app_wakeups / mib,
                      c->loop_woke_socket / mib, c->loop_woke_app / mib,
                      c->loop_woke_deadline / mib, st->rx_write_copied / 1024.0 / mib,
                      st->rx_write_in_place / 1024.0 / mib,
                      c->placed_bounce_bytes / 1024.0 / mib);
        out.details.push_back(line);
      }
    }
    out.details.push_back("mrc: " + r->cc);
    if (o.latency) {
      std::snprintf(line, sizeof line,
                  "mrc: latency (post to completion, %zu messages): p50 %.1f us, p99 %.1f us, "
                  "p99.9 %.1f us, max %.1f us",
                  r->latency.samples, r->latency.p50_us, r->latency.p99_us, r->latency.p999_us,
                  r->latency.max_us);
      out.details.push_back(line);
      // What each round trip cost each host's driver (counters since the driver was made, so
      // setup adds a little): the load-independent side of the figure above (issue 17).
      const double n = static_cast<double>(std::max<size_t>(r->latency.samples, 1));
      for (const auto& [host, c] :
           {std::pair{o.client, &r->client_counters}, {o.server, &r->server_counters}}) {
        std::snprintf(line, sizeof line,
                      "mrc: per round trip, h%u: %.2f progress loop rounds, %.2f timer rounds "
                      "(%.2f by pollers), %.2f poller rounds, %.2f recvmmsg, %.2f sendmmsg, %.2f "
                      "datagrams sent; loop woke for: socket %.2f, app %.2f, alarm %.2f, pollers' "
                      "hold over %.2f, deadline %.2f; loop received in %.2f; spin polls that "
                      "found nothing %.2f",
                      host, c->loop_iterations / n, c->timeouts / n, c->poller_timeouts / n,
                      c->poller_rounds / n, c->recvmmsg_calls / n, c->sendmmsg_calls / n,
                      c->datagrams_sent / n, c->loop_woke_socket / n, c->loop_woke_app / n,
                      c->loop_woke_alarm / n, c->loop_woke_poller_end / n,
                      c->loop_woke_deadline / n, c->loop_rx_rounds / n, c->loop_spins / n);
        out.details.push_back(line);
        // The pollers' own syscalls (this run's one thread polls both hosts' drivers).
        std::snprintf(line, sizeof line,
                      "mrc: per round trip, h%u's pollers: %.2f polls, %.2f found the receive "
                      "side busy, %.2f readiness checks (epoll_wait), %.2f recvmmsg, %.2f "
                      "timerfd_settime",
                      host, c->poller_polls / n, c->poller_busy / n, c->poller_ready_checks / n,
                      c->poller_recvmmsg / n, c->poller_timer_arms / n);
        out.details.push_back(line);
      }
      std::snprintf(line, sizeof line,
                    "mrc: per round trip, the polling thread: %.2f us of CPU (CLOCK_THREAD_CPUTIME_ID "
                    "over the run / messages)",
                    static_cast<double>(r->latency.poll_thread_cpu_ns) / 1e3 / n);
      out.details.push_back(line);
      if (!r->round_trips.empty()) {
        static constexpr double kQuantiles[] = {0, 0.9, 0.95, 0.99, 0.999};
        const std::vector<RtBuckets> b = bucket_round_trips(r->round_trips, kQuantiles);
        for (const std::string& l : format_buckets(b)) out.details.push_back("mrc: " + l);
        if (auto w = write_round_trips(o.latency_trace, r->round_trips); !w.ok())
          return Err(w.error());
      }
    }
    if (o.show_paths) out.details.push_back("mrc: sender's paths at the end:\n" + r->paths);
    if (!r->ok()) {
      out.data_ok = false;
      out.first_error = r->first_error;
    }
    out.mrc = std::move(r).value();
  }

  for (Baseline b : o.baselines) {
    if (o.cancel && o.cancel->load()) break;
    BaselineSpec spec;
    spec.client_netns = fab.host_netns(o.client);
    spec.server_netns = fab.host_netns(o.server);
    spec.client_addrs = addrs[0];
    spec.server_addrs = addrs[1];
    spec.duration_s = std::max(1.0, std::round(o.duration_s));
    spec.interval_s = std::max(0.1, o.interval_s);
    spec.udp_app_bytes = o.ceiling_memory_bytes;
    TickFaults ticks(o.faults, fab);
    spec.on_tick = [&](double t) { ticks.tick(t); };
    if (!o.quiet) std::printf("  running baseline %s for %.0f s\n", to_string(b), spec.duration_s);
    HostsSummary tcp_hosts;
    Result<BaselineResult, std::string> r =
        plan ? run_tcp_pattern(fab, *plan, o.pattern->hosts, spec, ticks, &tcp_hosts)
        : b == Baseline::kTcp   ? run_tcp(spec)
        : b == Baseline::kMptcp ? run_mptcp(spec)
                                : run_udp_ceiling(spec);
    undo(fab, o.faults);
    if (!r.ok()) return Err(std::string(to_string(b)) + ": " + r.error());
    Series s{to_string(b), r->samples, ticks.marks(), {}};
    out.summaries.push_back(summarize(s));
    out.series.push_back(std::move(s));
    out.details.push_back(std::string(to_string(b)) + ": " + r->detail);
    if (plan) {
      tcp_hosts.pattern = msim::to_string(o.pattern->pattern);
      tcp_hosts.ideal_gbps = plan->ideal_gbps;
      out.baseline_hosts.push_back(std::move(tcp_hosts));
    }
  }

  if (!o.csv.empty() && !out.series.empty()) {
    if (auto w = write_csv(o.csv, out.series); !w.ok()) return Err(w.error());
    if (!o.png.empty()) {
      if (auto w = write_png(o.png, o.csv, out.series, o.title); !w.ok()) return Err(w.error());
    }
  }
  return out;
}

}  // namespace mrc::perf
