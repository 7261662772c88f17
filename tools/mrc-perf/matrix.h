// The fault matrix (`mrc-perf --matrix DIR`): every fault kind the namespace fabric knows,
// each applied the same way to MRC, MPTCP and TCP (one session per fault, session.h), one
// table and one plot of small multiples. Threading: run_matrix blocks the calling thread.
//
// Each fault has a run of its own: healthy until kFaultAt, the fault, its repair at
// kRepairAt, healthy again until the end (SessionOptions::duration_s, 8 s by default). Per
// transport (report.h for the definitions):
//   healthy      mean goodput over the kMatrixHealthyS before the fault (TCP and MPTCP take
//                more than a second to open their windows: the run's start is not healthy)
//   during       mean goodput from the fault to the repair / healthy
//   low100       lowest 100 ms mean in that span / healthy
//   stall        longest run of intervals below 10% of healthy, ms (anywhere in the run)
//   back         time_back_ms after the repair: to the first 100 ms at >= 0.95 of healthy
//                ("-": never within the run)
// Targets are chosen on the sender's side (host client) and the receiver's (host server),
// planes 0..3 (the fabric needs 4 planes, 2 spines and the two hosts under different T0s).
#pragma once

#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "session.h"

namespace mrc::perf {

inline constexpr double kMatrixFaultAt = 3.0;   // s
inline constexpr double kMatrixRepairAt = 6.0;  // s
inline constexpr double kMatrixDuration = 8.0;  // s, the default run length
inline constexpr double kMatrixHealthyS = 1.5;  // s before the fault that count as healthy

struct MatrixFault {
  std::string kind;    // the row's name: "T1 down", "delay 1 ms on an uplink", ...
  std::string fault;   // fault words (fault.h)
  std::string repair;  // what undoes it
};

// The faults of the matrix on fabric f between hosts client and server; an error naming what
// the fabric lacks.
Result<std::vector<MatrixFault>, std::string> matrix_faults(const srv6::Fabric& f, uint32_t client,
                                                            uint32_t server);

struct MatrixCell {
  bool computed = false;  // false: the run lacked the fault, the repair or a healthy rate (n/a)
  double healthy_gbps = 0;
  double during = 0, low100 = 0;  // shares of healthy
  double stall_ms = 0;
  double back_ms = -1;
};

struct MatrixRow {
  MatrixFault fault;
  std::vector<std::string> transports;  // series names: mrc, mptcp, tcp
  std::vector<MatrixCell> cells;        // one per transport
  std::string csv;                      // this fault's per-interval CSV
};

// The options --matrix refuses, with what is wrong: every run is kMatrixDuration by default
// and must end more than a second after kMatrixRepairAt (or the repair is never measured); its
// faults, transports and outputs are its own, so `given` (the command line's options) must not
// name --fault, --no-mrc, --csv, --png or --soak.
Status<std::string> check_matrix_options(double duration_s, const std::vector<std::string>& given);

// One cell from a run's series (its faults marked: the fault, then the repair).
MatrixCell matrix_cell(const Series& s);

// The table, Markdown: a row per fault, columns per transport (during / low100 / stall /
// back); "n/a" where a cell could not be computed.
std::string matrix_table(const std::vector<MatrixRow>& rows);

// Runs every fault with MRC and the baselines in `base` (MPTCP and TCP if it names none),
// writing DIR/<n>.csv per fault, DIR/matrix.md (the table), DIR/matrix.csv and DIR/matrix.png
// (goodput over time per fault, the transports overlaid). Prints a line per finished fault
// unless base.quiet. Error if a run fails; a fault that failed to apply is an error too. The
// table, CSV and plot are written from the rows finished so far also when a run fails.
Result<std::vector<MatrixRow>, std::string> run_matrix(const FabricHandle& fab,
                                                       const SessionOptions& base,
                                                       const std::string& dir);

}  // namespace mrc::perf
