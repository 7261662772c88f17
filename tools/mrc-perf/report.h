// What a fault run prints and writes: per-interval CSV, a gnuplot PNG of bandwidth over time
// with the faults marked, and a summary per phase and per fault. Threading: free functions.
//
// Definitions (the figures perf/RESULTS.md quotes). Every mean is weighted by the intervals'
// durations (Sample::dur_s), so a mean over a span is the bytes moved in it / its length:
//   healthy      mean goodput from `warmup_s` until the first fault (or the whole run)
//   phase        the time from one fault (or the start) to the next (or the end)
//   min_100ms    lowest mean over any 100 ms window (10 intervals of 10 ms) in a phase
//   at_50ms      mean over the 50 ms that start 50 ms after the fault: where the bandwidth
//                is once 50 ms have passed (printed as a share of healthy)
//   detect_ms    fault to the first EV the sender declared bad (none, or a repair: -1)
//   longest stall  the longest run of intervals below 10% of healthy
#pragma once

#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "mrc_run.h"

namespace mrc::perf {

struct Series {
  std::string name;  // "mrc", "tcp", ...
  std::vector<Sample> intervals;
  std::vector<FaultMark> faults;
  std::vector<PathEvent> path_events;  // empty for baselines
};

struct PhaseSummary {
  double start_s = 0, end_s = 0;
  std::string fault;  // what started it ("" for the first)
  double mean_gbps = 0, min_100ms_gbps = 0, min_interval_gbps = 0;
  double at_50ms_gbps = 0;  // phases that start with a fault
  double detect_ms = -1;
};

struct Summary {
  double healthy_gbps = 0;
  double mean_gbps = 0;
  double longest_stall_ms = 0;
  std::vector<PhaseSummary> phases;
};

Summary summarize(const Series& s, double warmup_s = 0.5);

/// Time back after a repair: from `repair_s` to the start of the first 100 ms window (of
/// consecutive intervals that start at or after repair_s) whose mean reaches `share` x
/// healthy, in ms (0: at once; resolution the series' interval, 10 ms for MRC, 100 ms for
/// iperf3). -1 if no such window before the series ends.
double time_back_ms(const Series& s, double healthy_gbps, double repair_s, double share = 0.95);

/// Runs gnuplot on `script` (which writes png_path). Error if gnuplot is missing or fails.
Status<std::string> run_gnuplot(const std::string& png_path, const std::string& script);
std::string format_summary(const Series& s, const Summary& sum);

/// Columns: <name>_t_s,<name>_gbps per series (each on its own interval grid; rows past a
/// series' end are empty), then `fault`: the first series' faults on the row they fall in.
Status<std::string> write_csv(const std::string& path, const std::vector<Series>& series);
/// Runs gnuplot (pngcairo, else png) to draw every series with the first series' faults as
/// vertical lines. Error if gnuplot is missing or fails.
Status<std::string> write_png(const std::string& png_path, const std::string& csv_path,
                              const std::vector<Series>& series, const std::string& title);

}  // namespace mrc::perf
