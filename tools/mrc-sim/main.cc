// mrc-sim: the real MRC engine at cluster scale on the simulated fabric (README in
// docs/simulation.md, "mrc-sim"). Parses the options, builds the workload, runs it under each
// transport in turn, prints the table and writes JSON / CSV / PNG. Exit 0: every byte of every
// run verified; 1: a run failed; 2: bad arguments.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "faults.h"
#include "options.h"
#include "pattern.h"
#include "report.h"
#include "run.h"

int main(int argc, char** argv) {
  using namespace mrc::msim;
  Options o;
  std::string err;
  switch (parse_cli(argc, argv, o, err)) {
    case ParseOutcome::kHelp:
      return 0;
    case ParseOutcome::kBad:
      std::fprintf(stderr, "mrc-sim: %s\n", err.c_str());
      return 2;
    case ParseOutcome::kRun:
      break;
  }
  WorkloadSpec ws;
  ws.pattern = o.pattern;
  ws.hosts = o.hosts;
  ws.bytes = o.bytes;
  ws.msg_bytes = o.msg_bytes;
  ws.slices = o.slices;
  ws.incast_senders = o.incast_senders;
  ws.seed = o.seed;
  auto w = make_workload(ws);
  if (!w.ok()) {
    std::fprintf(stderr, "mrc-sim: %s\n", w.error().c_str());
    return 2;
  }
  const double ideal = ideal_seconds(w.value(), capacity(o));
  const FaultScope scope{o.planes, (o.hosts + o.hosts_per_t0 - 1) / o.hosts_per_t0, o.spines,
                         ideal};
  std::vector<Fault> faults;
  for (const std::string& text : o.faults) {
    auto f = parse_fault(text, scope);
    if (!f.ok()) {
      std::fprintf(stderr, "mrc-sim: --fault '%s': %s\n", text.c_str(), f.error().c_str());
      return 2;
    }
    faults.push_back(f.value());
  }
  std::vector<RunResult> runs;
  for (Transport t : o.transports) runs.push_back(run_one(o, t, w.value(), faults, ideal));
  if (!o.quiet) std::fputs(format_table(o, runs).c_str(), stdout);
  int rc = 0;
  for (const RunResult& r : runs) rc |= r.ok() ? 0 : 1;
  if (!o.json.empty()) {
    const std::string j = to_json(o, runs);
    if (o.json == "-") {
      std::fputs(j.c_str(), stdout);
    } else {
      std::ofstream out(o.json);
      if (!(out << j)) {
        std::fprintf(stderr, "mrc-sim: --json %s: write failed\n", o.json.c_str());
        rc = 1;
      }
    }
  }
  if (!o.csv.empty()) {
    if (auto s = write_csv(o.csv, runs); !s.ok()) {
      std::fprintf(stderr, "mrc-sim: --csv: %s\n", s.error().c_str());
      rc = 1;
    } else if (!o.png.empty()) {
      if (auto p = write_png(o.png, o.csv, o, runs); !p.ok()) {
        std::fprintf(stderr, "mrc-sim: --png: %s\n", p.error().c_str());
        rc = 1;
      }
    }
  }
  return rc;
}
