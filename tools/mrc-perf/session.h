// One mrc-perf session on a fabric: the MRC run and the chosen baselines one after another,
// each under the same fault schedule, then the summaries, the CSV and the PNG. Shared by
// mrc-perf and the demo. Threading: run_session blocks the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
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

struct SessionOptions {
  uint32_t client = 0, server = 1;  // fabric host ids
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
  bool mrc = true;                  // run MRC (false: baselines only)
  std::vector<Baseline> baselines;  // run after MRC, in this order
  std::vector<TimedFault> faults;   // applied in every run; undone at the end of each
  bool trimming = false;            // the fabric trims: zero UDP checksums (no GSO), engine told so
  bool gso = true, gro = true;
  bool ecmp = false;  // paths by UDP source port over the fabric's ECMP routes, not SRv6
  // NSCC's unloaded RTT, us; 0 = learned (the default): the windowed minimum RTT plus the
  // driver's send burst (64 KiB) at the port rate (engine/policy.h BaseRttFilter, io/udp
  // send_burst).
  double base_rtt_us = 0;
  bool congestion_control = true;
  uint32_t max_psn_range = 1024;  // packets in flight per QP at most (MPR)
  std::string csv, png, title;
  bool quiet = false;       // no line per second
  bool show_paths = false;  // print the sender's EVs (state, packets, losses) at the end
  const std::atomic<bool>* cancel = nullptr;
};

struct SessionResult {
  std::vector<Series> series;  // mrc first (if run), then baselines
  std::vector<Summary> summaries;
  std::vector<std::string> details;  // one line per run
  std::optional<MrcRunResult> mrc;   // the MRC run's own figures, when it ran
  bool data_ok = true;               // MRC: every byte verified, no error completion
  std::string first_error;
};

Result<SessionResult, std::string> run_session(const FabricHandle& fab, const SessionOptions& o);


}  // namespace mrc::perf
