// One mrc-perf session on a fabric: the MRC run and the chosen baselines one after another,
// each under the same fault schedule, then the summaries, the CSV and the PNG. Shared by
// mrc-perf and the demo. Either between two hosts (client -> server), or a traffic pattern
// between the first N hosts of the fabric (SessionOptions::pattern), every host its own
// driver, every pair its own QPs. Threading: run_session blocks the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mrc-sim/pattern.h"
#include "mrc/common/result.h"
#include "mrc_run.h"
#include "report.h"
#include "srv6/fabric.h"

namespace mrc::perf {

/// What a session needs from a fabric (the namespace fabric, in practice).
struct FabricHandle {
  const srv6::Fabric* fabric = nullptr;
  std::function<std::string(uint32_t host)> host_netns;
  std::function<Status<std::string>(const std::string& fault)> apply_fault;
  // The faults that repair what the given ones leave broken (run after each run); may be empty.
  std::function<std::vector<std::string>(const std::vector<std::string>& faults)> repairs;
  double port_gbps = 0;  // host port rate limit; 0 = unlimited
};

enum class Baseline : uint8_t { kTcp, kMptcp, kUdpCeiling };
Result<Baseline, std::string> parse_baseline(const std::string& s);
const char* to_string(Baseline b);

/// A traffic pattern between fabric hosts 0..hosts-1 (mrc-perf --pattern), the flows of
/// mrc-sim's patterns (tools/mrc-sim/pattern.h), each flow a stream of messages on its own QP
/// pair(s) for the whole run (baseline tcp: an iperf3 per flow, at once, on plane 0):
///   alltoall     every host to every other host at once: H(H-1) flows
///   permutation  every host to one other, a derangement drawn from `seed`: H flows
///   incast       hosts 1..H-1 to host 0: H-1 flows
struct PatternOptions {
  msim::Pattern pattern = msim::Pattern::kAlltoall;
  uint32_t hosts = 0;  // >= 2, at most the fabric's
  uint64_t seed = 1;
};
/// "alltoall", "permutation" or "incast"; the error names the word and the choices.
Result<msim::Pattern, std::string> parse_pattern(const std::string& s);

/// The flows (initiator, target) of a pattern and the most goodput it can have: the total
/// over the tightest cut of the fabric's host ports (every host's ports for alltoall and
/// permutation, the receiver's for incast) and uplinks, at `port_gbps` per host port
/// (0: unknown, unshaped ports; ideal_gbps is then 0).
struct PatternPlan {
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  double ideal_gbps = 0;
};
Result<PatternPlan, std::string> plan_pattern(const srv6::Fabric& f, const PatternOptions& p,
                                              double port_gbps);

/// The host port rate mrc-perf shapes a pattern's own fabric to when --rate is not given:
/// all hosts' ports together kPatternBudgetGbps, at most 2 Gbit/s a port, so that a pattern
/// between many hosts stays within what two shared cores move in software.
inline constexpr double kPatternBudgetGbps = 2;
double pattern_port_gbps(uint32_t hosts, uint32_t planes);

struct SessionOptions {
  uint32_t client = 0, server = 1;  // fabric host ids
  std::optional<PatternOptions> pattern;  // set: a pattern (client, server, bidirectional unused)
  Op op = Op::kWrite;
  std::vector<Op> ops;  // MRC: a mix, QP pair q runs ops[q % size] (empty: op everywhere)
  uint32_t msg_bytes = 1u << 20;
  uint32_t qps = 1;
  uint32_t outstanding = 8;
  double duration_s = 10;
  double interval_s = 0.01;  // MRC samples; iperf3 cannot go below 0.1
  bool bidirectional = false;
  bool verify = true;
  bool latency = false;  // a latency run: one message in flight, completions polled every 2 us
  // A latency run: each round trip's record (rt_trace.h) to this CSV, and the slow ones'
  // causes in the details; empty: none (MrcRunSpec::trace_round_trips).
  std::string latency_trace;
  bool mrc = true;                  // run MRC (false: baselines only)
  std::vector<Baseline> baselines;  // run after MRC, in this order
  size_t ceiling_memory_bytes = 0;  // udp-ceiling: BaselineSpec::udp_app_bytes
  std::vector<TimedFault> faults;   // applied in every run; undone at the end of each
  bool trimming = false;            // the fabric trims: zero UDP checksums (no GSO), engine told so
  bool gso = true, gro = true;
  bool rx_placement = false;  // UdpConfig::rx_placement
  bool ecmp = false;  // paths by UDP source port over the fabric's ECMP routes, not SRv6
  // NSCC's unloaded RTT, us; 0 = learned (the default): the windowed minimum RTT plus the
  // driver's send burst (65,000 B) at the port rate (engine/policy.h BaseRttFilter, io/udp
  // send_burst).
  double base_rtt_us = 0;
  bool congestion_control = true;
  // Each endpoint's UDP driver progress threads (UdpConfig::progress_threads); 0: its default.
  uint32_t progress_threads = 0;
  uint32_t max_psn_range = 1024;  // packets in flight per QP at most (MPR)
  std::string csv, png, title;
  bool quiet = false;       // no line per second
  bool show_paths = false;  // print the sender's EVs (state, packets, losses) at the end
  const std::atomic<bool>* cancel = nullptr;
};

/// A pattern run's goodput per host and in total, Gbit/s: payload bytes received while
/// sampling over the sampled time (the data's source counts them as sent).
struct HostsSummary {
  std::string pattern;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  std::vector<double> tx_gbps, rx_gbps;  // per host
  double total_gbps = 0;
  double ideal_gbps = 0;  // PatternPlan's; 0: unknown
};
/// One line per host, the total, the ideal and the efficiency of the total and of the
/// healthy phase (`healthy_gbps`, report.h's figure) against it.
std::string format_hosts(const HostsSummary& h, double healthy_gbps);

struct SessionResult {
  std::vector<Series> series;  // mrc first (if run), then baselines
  std::vector<Summary> summaries;
  std::vector<std::string> details;  // one line per run
  std::optional<MrcRunResult> mrc;   // the MRC run's own figures, when it ran
  std::optional<HostsSummary> hosts;  // pattern runs
  std::vector<HostsSummary> baseline_hosts;  // pattern runs: per baseline (tcp), in order
  bool data_ok = true;               // MRC: every byte verified, no error completion
  std::string first_error;
};

Result<SessionResult, std::string> run_session(const FabricHandle& fab, const SessionOptions& o);


}  // namespace mrc::perf
