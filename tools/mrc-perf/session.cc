#include "session.h"

#include <cmath>
#include <algorithm>
#include <cstdio>

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

namespace {

// Applies the schedule from the baselines' tick callback (their own clock).
class TickFaults {
 public:
  TickFaults(const std::vector<TimedFault>& faults, const FabricHandle& fab)
      : faults_(faults), fab_(fab) {}
  void tick(double t_s) {
    while (next_ < faults_.size() && faults_[next_].t_s <= t_s) {
      auto r = fab_.apply_fault(faults_[next_].fault);
      marks_.push_back(FaultMark{t_s, faults_[next_].fault, r.ok() ? "" : r.error()});
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
  if (o.client >= hosts || o.server >= hosts || o.client == o.server) {
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
    io::UdpConfig* cfg[2] = {&spec.client, &spec.server};
    for (int i = 0; i < 2; ++i) {
      io::UdpConfig& c = *cfg[i];
      const uint32_t h = i == 0 ? o.client : o.server;
      for (const std::string& a : addrs[i])
        c.planes.push_back(io::PlaneConfig{a, io::kDefaultUdpPort});
      c.path_mode = o.ecmp ? io::PathMode::kEcmp : io::PathMode::kSrv6;
      c.fabric = shared;
      c.local_host = h;
      c.netns = fab.host_netns(h);
      c.zero_udp_checksum = o.trimming;
      c.gso = o.gso;
      c.gro = o.gro;
      c.engine.trimming = o.trimming;
      // One checksum over the payload: the UDP one, or MRC's own where UDP's is off.
      c.engine.payload_crc = o.trimming;
      c.engine.congestion_control = o.congestion_control;
      c.engine.base_rtt = engine::Duration{static_cast<int64_t>(o.base_rtt_us * 1e3)};
      if (fab.port_gbps > 0)
        c.engine.nic_bps = static_cast<uint64_t>(fab.port_gbps * 1e9 * f.config().planes);
    }
    spec.op = o.op;
    spec.ops = o.ops;
    spec.msg_bytes = o.msg_bytes;
    spec.outstanding = o.latency ? 1 : o.outstanding;
    spec.spin = o.latency;
    spec.max_psn_range = o.max_psn_range;
    // A plane keeps its full share while its good spines can still carry its host ports:
    // hosts_per_t0 ports of port_gbps over uplinks of uplink_gbps each.
    spec.min_active_per_plane = srv6::spines_for_full_t0(f.config(), fab.port_gbps);
    spec.qps = o.qps;
    spec.bidirectional = o.bidirectional;
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
        to_string(o.op), o.msg_bytes, o.outstanding, o.qps, o.qps > 1 ? "s" : "",
        o.bidirectional ? ", both ways" : "", (unsigned long long)r->messages, r->bytes / 1e9,
        o.verify ? "verified" : "not verified", (unsigned long long)r->retransmits,
        (unsigned long long)r->spurious, (unsigned long long)r->duplicates,
        (unsigned long long)r->rtos, (unsigned long long)r->trims_seen,
        (unsigned long long)r->crc_errors, (unsigned long long)r->client_counters.datagrams_sent,
        (unsigned long long)r->client_counters.gso_messages);
    out.details.push_back(line);
    out.details.push_back("mrc: " + r->cc);
    if (o.latency) {
      std::snprintf(line, sizeof line,
                  "mrc: latency (post to completion, %zu messages): p50 %.1f us, p99 %.1f us, "
                  "p99.9 %.1f us, max %.1f us",
                  r->latency.samples, r->latency.p50_us, r->latency.p99_us, r->latency.p999_us,
                  r->latency.max_us);
      out.details.push_back(line);
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
    TickFaults ticks(o.faults, fab);
    spec.on_tick = [&](double t) { ticks.tick(t); };
    if (!o.quiet) std::printf("  running baseline %s for %.0f s\n", to_string(b), spec.duration_s);
    Result<BaselineResult, std::string> r = b == Baseline::kTcp     ? run_tcp(spec)
                                            : b == Baseline::kMptcp ? run_mptcp(spec)
                                                                    : run_udp_ceiling(spec);
    undo(fab, o.faults);
    if (!r.ok()) return Err(std::string(to_string(b)) + ": " + r.error());
    Series s{to_string(b), r->samples, ticks.marks(), {}};
    out.summaries.push_back(summarize(s));
    out.series.push_back(std::move(s));
    out.details.push_back(std::string(to_string(b)) + ": " + r->detail);
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
