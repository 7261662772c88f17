#include "report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace mrc::msim {
namespace {

std::string fmt(const char* f, auto... a) {
  char b[256];
  std::snprintf(b, sizeof b, f, a...);
  return b;
}

std::string shape(const Options& o) {
  return fmt("%u hosts, %u planes x %u spines, %u hosts/T0, ports %g Gb/s, uplinks %g Gb/s",
             o.hosts, o.planes, o.spines, o.hosts_per_t0, o.host_gbps, o.uplink_gbps);
}

}  // namespace

Quantiles quantiles(std::vector<double> v) {
  std::erase_if(v, [](double x) { return x < 0; });
  Quantiles q;
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
  };
  q.min = v.front();
  q.p50 = at(0.5);
  q.p99 = at(0.99);
  q.max = v.back();
  return q;
}

std::string format_table(const Options& o, const std::vector<RunResult>& runs) {
  std::string out;
  out += "mrc-sim: " + std::string(to_string(o.pattern)) + ", " + shape(o) +
         fmt(", seed %llu\n", static_cast<unsigned long long>(o.seed));
  if (!runs.empty())
    out += fmt("  ideal %.3f ms (bytes over the tightest cut)\n", runs[0].ideal_s * 1e3);
  const bool ring = o.pattern == Pattern::kRingAllreduce;
  out += fmt("%-11s %10s %6s %s %10s %10s %10s %10s %8s %6s %8s %8s %9s %8s  %s\n", "transport",
             "done ms", "eff", ring ? "busbw Gb/s" : "", "fct min", "fct p50", "fct p99", "fct max",
             "retx", "rtos", "trims", "ev chg", "maxq KiB", "wall s", "verdict");
  for (const RunResult& r : runs) {
    const Quantiles q = quantiles(r.fct_s);
    out +=
        fmt("%-11s %10.3f %6.3f %s %10.3f %10.3f %10.3f %10.3f %8llu %6llu %8llu %8llu %9.0f %8.1f "
            " %s\n",
            to_string(r.transport), r.completion_s * 1e3, r.efficiency,
            ring ? fmt("%10.2f", r.busbw_gbps).c_str() : "", q.min * 1e3, q.p50 * 1e3, q.p99 * 1e3,
            q.max * 1e3, static_cast<unsigned long long>(r.retransmits),
            static_cast<unsigned long long>(r.rtos), static_cast<unsigned long long>(r.trims),
            static_cast<unsigned long long>(r.traffic.ev_changes),
            static_cast<double>(r.max_queue_bytes) / 1024, r.sim_wall_s,
            r.ok() ? "PASS" : ("FAIL: " + r.failure).c_str());
  }
  for (const RunResult& r : runs) {
    out +=
        fmt("  %s: %llu flows, %llu messages verified of %llu (lost %llu, duplicated %llu, "
            "corrupted %llu), %llu error completions, %llu QP errors; %llu sim events, peak "
            "RSS %.0f MiB\n",
            to_string(r.transport), static_cast<unsigned long long>(r.fct_s.size()),
            static_cast<unsigned long long>(r.traffic.verified),
            static_cast<unsigned long long>(r.traffic.messages),
            static_cast<unsigned long long>(r.traffic.lost),
            static_cast<unsigned long long>(r.traffic.duplicated),
            static_cast<unsigned long long>(r.traffic.corrupted),
            static_cast<unsigned long long>(r.traffic.error_completions),
            static_cast<unsigned long long>(r.traffic.qp_errors),
            static_cast<unsigned long long>(r.sim_events), r.peak_rss_mib);
    out +=
        fmt("  %s: first %d base RTTs (%.3f ms): %llu trims, %llu retransmits, %llu drops; "
            "NSCC cuts: %llu ECN, %llu delay\n",
            to_string(r.transport), kFirstRtts, r.first_s * 1e3,
            static_cast<unsigned long long>(r.first_trims),
            static_cast<unsigned long long>(r.first_retransmits),
            static_cast<unsigned long long>(r.first_drops),
            static_cast<unsigned long long>(r.cc_decreases),
            static_cast<unsigned long long>(r.cc_delay_decreases));
  }
  if (!runs.empty() && !runs[0].faults.empty()) {
    out += "  faults:";
    for (const auto& [t, what] : runs[0].faults) out += " [" + what + "]";
    out += "\n";
  }
  return out;
}

std::string to_json(const Options& o, const std::vector<RunResult>& runs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const RunResult& r : runs) {
    const Quantiles q = quantiles(r.fct_s);
    nlohmann::json j;
    j["hosts"] = o.hosts;
    j["planes"] = o.planes;
    j["spines"] = o.spines;
    j["hosts_per_t0"] = o.hosts_per_t0;
    j["host_gbps"] = o.host_gbps;
    j["uplink_gbps"] = o.uplink_gbps;
    j["pattern"] = to_string(o.pattern);
    j["transport"] = to_string(r.transport);
    j["bytes"] = o.bytes;
    j["seed"] = o.seed;
    j["ideal_s"] = r.ideal_s;
    j["completion_s"] = r.completion_s;
    j["efficiency"] = r.efficiency;
    if (r.busbw_gbps >= 0) j["busbw_gbps"] = r.busbw_gbps;
    j["flows"] = r.fct_s.size();
    j["fct_s"] = {{"min", q.min}, {"p50", q.p50}, {"p99", q.p99}, {"max", q.max}};
    j["messages"] = r.traffic.messages;
    j["verified"] = r.traffic.verified;
    j["lost"] = r.traffic.lost;
    j["duplicated"] = r.traffic.duplicated;
    j["corrupted"] = r.traffic.corrupted;
    j["error_completions"] = r.traffic.error_completions;
    j["qp_errors"] = r.traffic.qp_errors;
    j["retransmits"] = r.retransmits;
    j["rtos"] = r.rtos;
    j["trims"] = r.trims;
    j["trimmed_t0_t1"] = r.trims_by_tier[0];
    j["trimmed_t1_t0"] = r.trims_by_tier[1];
    j["trimmed_t0_host"] = r.trims_by_tier[2];
    j["ev_changes"] = r.traffic.ev_changes;
    j["max_queue_bytes"] = r.max_queue_bytes;
    j["drops"] = r.drops;
    j["cc_decreases"] = r.cc_decreases;
    j["cc_delay_decreases"] = r.cc_delay_decreases;
    j["first_rtts"] = {{"rtts", kFirstRtts},
                       {"span_s", r.first_s},
                       {"trims", r.first_trims},
                       {"retransmits", r.first_retransmits},
                       {"drops", r.first_drops}};
    j["data_packets"] = r.data_packets;
    j["fast_losses"] = r.fast_losses;
    j["spurious_losses"] = r.spurious_losses;
    j["tail_probes"] = r.tail_probes;
    j["plane_holds"] = r.plane_holds;
    j["ev_holds"] = r.ev_holds;
    j["qps"] = r.traffic.qps;
    j["max_live_qps"] = r.traffic.max_live_qps;
    j["window"] = o.window;
    j["qps_on_demand"] = o.on_demand;
    j["sim_wall_s"] = r.sim_wall_s;
    j["sim_cpu_s"] = r.sim_cpu_s;
    j["sim_events"] = r.sim_events;
    j["peak_rss_mib"] = r.peak_rss_mib;
    nlohmann::json faults = nlohmann::json::array();
    for (const auto& [t, what] : r.faults) faults.push_back({{"t_s", t}, {"fault", what}});
    j["faults"] = faults;
    j["ok"] = r.ok();
    j["failure"] = r.failure;
    arr.push_back(j);
  }
  return (arr.size() == 1 ? arr[0] : arr).dump(2) + "\n";
}

Status<std::string> write_csv(const std::string& path, const std::vector<RunResult>& runs) {
  std::ofstream out(path);
  if (!out) return Err(path + ": " + std::strerror(errno));
  out << "time_s";
  for (const RunResult& r : runs) out << "," << to_string(r.transport) << "_gbps";
  out << ",fault\n";
  size_t rows = 0;
  for (const RunResult& r : runs) rows = std::max(rows, r.goodput.size());
  const auto& faults =
      runs.empty() ? std::vector<std::pair<double, std::string>>{} : runs[0].faults;
  size_t next = 0;
  for (size_t i = 0; i < rows; ++i) {
    double t = 0;
    for (const RunResult& r : runs)
      if (i < r.goodput.size()) t = r.goodput[i].first;
    out << fmt("%.9f", t);
    for (const RunResult& r : runs) {
      out << ",";
      if (i < r.goodput.size()) out << fmt("%.4f", r.goodput[i].second);
    }
    out << ",";
    std::string marks;
    for (; next < faults.size() && faults[next].first <= t; ++next)
      marks += (marks.empty() ? "" : "; ") + faults[next].second;
    out << marks << "\n";
  }
  if (!out) return Err(path + ": write failed");
  return {};
}

Status<std::string> write_png(const std::string& png, const std::string& csv_path, const Options& o,
                              const std::vector<RunResult>& runs) {
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1200,480 font 'sans,10'\n"
     << "set output '" << png << "'\n"
     << "set datafile separator ','\n";
  // One datablock per transport: sorted completion times and their cumulative share.
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<double> v = runs[i].fct_s;
    std::erase_if(v, [](double x) { return x < 0; });
    std::sort(v.begin(), v.end());
    gp << "$cdf" << i << " << EOD\n";
    for (size_t k = 0; k < v.size(); ++k)
      gp << fmt("%.9f,%.6f\n", v[k] * 1e3,
                static_cast<double>(k + 1) / static_cast<double>(v.size()));
    gp << "EOD\n";
  }
  gp << "set multiplot layout 1,2 title \"mrc-sim: " << to_string(o.pattern) << ", " << shape(o)
     << "\"\n";
  gp << "set title 'flow completion time CDF'\nset xlabel 'completion time (ms)'\n"
     << "set ylabel 'share of flows'\nset grid\nset key bottom right\nset yrange [0:1.02]\n";
  gp << "plot ";
  for (size_t i = 0; i < runs.size(); ++i)
    gp << (i ? ", " : "") << "$cdf" << i << " using 1:2 with steps lw 2 title '"
       << to_string(runs[i].transport) << "'";
  gp << "\n";
  gp << "set title 'goodput verified at the receivers (all hosts)'\nset xlabel 'virtual time "
        "(ms)'\n"
     << "set ylabel 'Gbit/s'\nset yrange [0:*]\nset key top right\n";
  int n = 0;
  if (!runs.empty())
    for (const auto& [t, what] : runs[0].faults) {
      ++n;
      gp << "set arrow " << n << " from " << t * 1e3 << ", graph 0 to " << t * 1e3
         << ", graph 1 nohead dt 2 lc rgb '#aa0000'\n";
      gp << "set label " << n << " \"" << what << "\" at " << t * 1e3 << ", graph "
         << (0.95 - 0.05 * ((n - 1) % 4)) << " font 'sans,8' tc rgb '#aa0000' offset 0.3,0\n";
    }
  gp << "plot ";
  for (size_t i = 0; i < runs.size(); ++i)
    gp << (i ? ", " : "") << "'" << csv_path << "' using ($1*1e3):" << (i + 2)
       << " every ::1 with lines lw 1.5 title '" << to_string(runs[i].transport) << "'";
  gp << "\nunset multiplot\n";
  const std::string script = png + ".gp";
  {
    std::ofstream out(script);
    if (!out) return Err(script + ": cannot write");
    out << gp.str();
  }
  const pid_t pid = ::fork();
  if (pid < 0) return Err(std::string("gnuplot: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::remove(script.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Err(
        "gnuplot failed to draw " + png +
        (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (gnuplot not installed?)" : ""));
  return {};
}

}  // namespace mrc::msim
