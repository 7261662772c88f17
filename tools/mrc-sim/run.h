// One mrc-sim run: a fabric, one engine per host, a workload and its faults under one
// transport, in virtual time, with the figures the report prints. Threading: single-threaded;
// runs one after the other (the VerifySink is per thread).
//
// The loop: build the Testbed (every engine's payload copy is the VerifySink's check), the
// Fabric (trimming off for mrc-notrim), lay out the sink, start the Traffic, schedule the
// faults with SimNet::at, sample goodput (bytes verified at the receivers) every interval,
// and run until Traffic::done() or the time limit. Progress goes to stderr about once a
// second once a run has taken more than two seconds of wall time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "faults.h"
#include "options.h"
#include "pattern.h"
#include "traffic.h"

namespace mrc::msim {

struct RunResult {
  Transport transport = Transport::kMrc;
  double ideal_s = 0;
  double completion_s = 0;    // the last message verified (the collective's completion)
  double efficiency = 0;      // ideal / completion
  double busbw_gbps = -1;     // ring-allreduce: NCCL's bus bandwidth; -1: not this pattern
  bool finished = false;      // every message verified before the limit
  std::vector<double> fct_s;  // per flow, from the start (ring: its edge's last message)
  TrafficStats traffic;
  uint64_t retransmits = 0, rtos = 0, trims = 0, data_packets = 0;
  uint64_t fast_losses = 0, spurious_losses = 0, tail_probes = 0;  // engine loss detection
  uint64_t plane_holds = 0;        // planes held down by the engines' shared path health
  uint64_t ev_holds = 0;           // EV values held down by the engines' shared path health
  uint64_t max_queue_bytes = 0;    // deepest switch egress queue
  uint64_t trims_by_tier[3] = {};  // packets trimmed on T0->T1, T1->T0, T0->host links
  uint64_t cc_decreases = 0, cc_delay_decreases = 0;  // NSCC window cuts: ECN, delay-based
  uint64_t drops = 0;  // datagrams dropped in the fabric (queue, down, loss)
  // The first round trips: what the flows' starting windows cost before NSCC can have reacted
  // to anything (kFirstRtts x the engines' base RTT from the start; an incast's first burst).
  double first_s = 0;  // the span, s
  uint64_t first_trims = 0, first_retransmits = 0, first_drops = 0;
  double sim_wall_s = 0;
  double sim_cpu_s = 0;  // user + system CPU of the process during the run
  uint64_t sim_events = 0;
  double peak_rss_mib = 0;  // of the process so far
  double interval_s = 0;
  std::vector<std::pair<double, double>> goodput;  // (interval end s, Gb/s verified)
  std::vector<std::pair<double, std::string>> faults;
  std::string failure;  // why the run failed; "" when it passed
  bool ok() const { return failure.empty(); }
};

/// How many of the engines' base RTTs (the one set by hand, else base_rtt() of the fabric)
/// RunResult::first_* cover: a window of 1.5 BDP takes 1.5
/// of them to leave the NIC at line rate, the signals it raises one more to come back, and the
/// resends they cause another.
inline constexpr int kFirstRtts = 4;

/// The fabric's capacity as Options give it.
Capacity capacity(const Options& o);
/// The fabric's base RTT for NSCC, what `--base-rtt-us -1` sets by hand (by default the engines
/// learn theirs): twice the unloaded round trip of an MTU packet through a spine (4
/// store-and-forward hops out, 4 back), see run.cc.
engine::Duration base_rtt(const Options& o);

/// Runs `w` under `t` with `faults` (parsed against this fabric).
RunResult run_one(const Options& o, Transport t, const Workload& w,
                  const std::vector<Fault>& faults, double ideal_s);

}  // namespace mrc::msim
