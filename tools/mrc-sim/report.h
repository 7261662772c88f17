// What mrc-sim prints and writes: a summary table (one row per transport), JSON (one object
// per run; an array of them for several transports), goodput over virtual time as CSV, and
// a PNG (completion-time CDF per transport, goodput over time with the faults marked).
// Threading: free functions.
//
// JSON fields: hosts, planes, spines, hosts_per_t0, pattern, transport, bytes, seed,
// ideal_s, completion_s, efficiency, busbw_gbps (ring-allreduce only), flows, fct_s
// {min, p50, p99, max}, messages, verified, lost, duplicated, corrupted, error_completions,
// qp_errors, retransmits, rtos, trims, ev_changes, max_queue_bytes, drops, data_packets,
// sim_wall_s, sim_events, peak_rss_mib, ok, failure.
#pragma once

#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "options.h"
#include "run.h"

namespace mrc::msim {

struct Quantiles {
  double min = 0, p50 = 0, p99 = 0, max = 0;
};
/// Of the values >= 0 (flows that completed); all 0 when none.
Quantiles quantiles(std::vector<double> v);

std::string format_table(const Options& o, const std::vector<RunResult>& runs);
std::string to_json(const Options& o, const std::vector<RunResult>& runs);
/// time_s, then <transport>_gbps per run (each run's own intervals), then the faults.
Status<std::string> write_csv(const std::string& path, const std::vector<RunResult>& runs);
/// gnuplot pngcairo: two panels (CDF of flow completion times; goodput from `csv_path`).
Status<std::string> write_png(const std::string& png, const std::string& csv_path, const Options& o,
                              const std::vector<RunResult>& runs);

}  // namespace mrc::msim
