// The fault matrix (matrix.h).
#include "matrix.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mrc::perf {
namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

Status<std::string> check_matrix_options(double duration_s, const std::vector<std::string>& given) {
  for (const std::string& g : given) {
    for (const char* o : {"--fault", "--no-mrc", "--csv", "--png", "--soak"}) {
      if (g == o) {
        return Err("--matrix runs its own faults, transports and outputs: " + g +
                   " does not go with it");
      }
    }
  }
  if (!(duration_s > kMatrixRepairAt + 1)) {
    return Err("--duration " + fmt("%g", duration_s) +
               " is too short for --matrix: the repair is at " + fmt("%g", kMatrixRepairAt) +
               " s and needs more than a second after it (more than " +
               fmt("%g", kMatrixRepairAt + 1) + " s; default " + fmt("%g", kMatrixDuration) + ")");
  }
  return {};
}

Result<std::vector<MatrixFault>, std::string> matrix_faults(const srv6::Fabric& f, uint32_t client,
                                                            uint32_t server) {
  const auto& c = f.config();
  if (c.planes < 4 || c.spines < 2 || client >= c.hosts || server >= c.hosts ||
      f.t0_of(client) == f.t0_of(server)) {
    return Err(
        std::string("the matrix needs 4 planes, 2 spines and client and server under "
                    "different T0s (mrc-perf's default fabric has them)"));
  }
  const std::string h = "h" + std::to_string(client), r = "h" + std::to_string(server);
  const std::string up0 = "link p0 t" + std::to_string(f.t0_of(client)) + " s1";
  const std::string up1 = "link p1 t" + std::to_string(f.t0_of(client)) + " s1";
  const auto pair = [](std::string kind, std::string fault, std::string repair) {
    return MatrixFault{std::move(kind), std::move(fault), std::move(repair)};
  };
  return std::vector<MatrixFault>{
      pair("T1 down", "down t1 p1 s1", "up t1 p1 s1"),
      pair("T0 of a plane down", "down t0 " + h + " p2", "up t0 " + h + " p2"),
      pair("uplink down", "down " + up0, "up " + up0),
      pair("uplink flapping (200 ms)", "flap " + up0 + " 200", "unflap " + up0),
      pair("T0 silent blackhole", "blackhole t0 " + h + " p2", "unblackhole t0 " + h + " p2"),
      pair("1% loss on an uplink", "loss " + up0 + " 1", "loss " + up0 + " 0"),
      pair("receiver port degraded to 1/4",
           "degrade link " + r + " p3 " + fmt("%g", c.host_port_gbps / 4),
           "degrade link " + r + " p3 0"),
      pair("1 ms more on an uplink", "delay " + up1 + " 1000", "delay " + up1 + " 0"),
      pair("1% corrupted at the receiver port", "corrupt link " + r + " p1 1",
           "corrupt link " + r + " p1 0"),
      pair("10% reordered by 500 us", "reorder link " + r + " p0 10 500",
           "reorder link " + r + " p0 0"),
      pair("10% of ACKs lost (receiver port up)", "loss link " + r + " p0 10 up",
           "loss link " + r + " p0 0 up"),
      pair("10% of data lost (receiver port down)", "loss link " + r + " p0 10 down",
           "loss link " + r + " p0 0 down"),
      pair("receiver port blackholed one way (data)", "blackhole link " + r + " p0 down",
           "unblackhole link " + r + " p0 down"),
  };
}

MatrixCell matrix_cell(const Series& s) {
  MatrixCell c;
  if (s.faults.size() < 2) return c;
  // The summary of the run from kMatrixHealthyS before the fault on: its "healthy" is then
  // the mean over those seconds, its phases the fault's and the repair's.
  const double from = std::max(0.0, s.faults[0].t_s - kMatrixHealthyS);
  Series tail = s;
  tail.intervals.clear();
  for (const Sample& i : s.intervals) {
    if (i.t_s > from) tail.intervals.push_back(i);
  }
  const Summary sum = summarize(tail, from);
  c.healthy_gbps = sum.healthy_gbps;
  c.stall_ms = sum.longest_stall_ms;
  if (sum.phases.size() < 3 || sum.healthy_gbps <= 0) return c;
  c.computed = true;
  c.during = sum.phases[1].mean_gbps / sum.healthy_gbps;
  c.low100 = sum.phases[1].min_100ms_gbps / sum.healthy_gbps;
  c.back_ms = time_back_ms(s, sum.healthy_gbps, s.faults[1].t_s);
  return c;
}

std::string matrix_table(const std::vector<MatrixRow>& rows) {
  if (rows.empty()) return "";
  std::ostringstream out;
  out << "| fault |";
  for (const std::string& t : rows[0].transports)
    out << " " << t << " during | low 100 ms | stall | back |";
  out << "\n| --- |";
  for (size_t i = 0; i < rows[0].transports.size(); ++i) out << " ---: | ---: | ---: | ---: |";
  out << "\n";
  for (const MatrixRow& r : rows) {
    out << "| " << r.fault.kind << " (`" << r.fault.fault << "`) |";
    for (const MatrixCell& c : r.cells) {
      if (!c.computed) {
        out << " n/a | n/a | n/a | n/a |";
        continue;
      }
      out << " " << fmt("%.2f", c.during) << " | " << fmt("%.2f", c.low100) << " | "
          << fmt("%.0f ms", c.stall_ms) << " | "
          << (c.back_ms < 0 ? std::string("-") : fmt("%.0f ms", c.back_ms)) << " |";
    }
    out << "\n";
  }
  out << "\nhealthy Gbit/s per run (before the fault):";
  for (const MatrixRow& r : rows) {
    out << (&r == &rows.front() ? " " : "; ");
    for (size_t i = 0; i < r.cells.size(); ++i) {
      out << (i ? "/" : "") << fmt("%.2f", r.cells[i].healthy_gbps);
    }
  }
  out << " (" << (rows[0].transports.empty() ? "" : rows[0].transports[0]);
  for (size_t i = 1; i < rows[0].transports.size(); ++i) out << "/" << rows[0].transports[i];
  out << ")\n";
  return out.str();
}

namespace {

// DIR/matrix.md, DIR/matrix.csv and DIR/matrix.png from `rows`.
Status<std::string> write_matrix(const std::vector<MatrixRow>& rows, const std::string& dir) {
  if (rows.empty()) return {};
  const std::string table = matrix_table(rows);
  std::ofstream(dir + "/matrix.md") << table;
  {
    std::ofstream csv(dir + "/matrix.csv");
    csv << "fault,transport,healthy_gbps,during,low100,stall_ms,back_ms\n";
    for (const MatrixRow& r : rows) {
      for (size_t k = 0; k < r.cells.size(); ++k) {
        const MatrixCell& c = r.cells[k];
        csv << '"' << r.fault.fault << "\"," << r.transports[k] << "," << c.healthy_gbps << ",";
        if (c.computed) {
          csv << c.during << "," << c.low100 << "," << c.stall_ms << "," << c.back_ms << "\n";
        } else {
          csv << "n/a,n/a,n/a,n/a\n";  // not computed: never a 0 that reads as a figure
        }
      }
    }
  }
  // Small multiples: one panel per fault, the transports overlaid, fault and repair marked.
  const size_t cols = 3, panels = rows.size(), lines = (panels + cols - 1) / cols;
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1500," << 300 * lines << " font 'sans,8'\n"
     << "set output '" << dir << "/matrix.png'\nset datafile separator ','\n"
     << "set multiplot layout " << lines << "," << cols
     << " title 'goodput (Gbit/s) over time (s) per fault: fault at " << kMatrixFaultAt
     << " s, repair at " << kMatrixRepairAt << " s'\n"
     << "set grid\nset yrange [0:*]\nset key top right font 'sans,7'\n"
     << "set arrow 1 from " << kMatrixFaultAt << ", graph 0 to " << kMatrixFaultAt
     << ", graph 1 nohead dt 2 lc rgb '#aa0000'\n"
     << "set arrow 2 from " << kMatrixRepairAt << ", graph 0 to " << kMatrixRepairAt
     << ", graph 1 nohead dt 2 lc rgb '#00aa00'\n";
  for (const MatrixRow& r : rows) {
    gp << "set title \"" << r.fault.kind << "\"\nplot ";
    for (size_t k = 0; k < r.transports.size(); ++k) {
      gp << (k ? ", " : "") << "'" << r.csv << "' using " << (2 * k + 1) << ":" << (2 * k + 2)
         << " every ::1 with lines lw 1.2 title '" << r.transports[k] << "'";
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  return run_gnuplot(dir + "/matrix.png", gp.str());
}

}  // namespace

Result<std::vector<MatrixRow>, std::string> run_matrix(const FabricHandle& fab,
                                                       const SessionOptions& base,
                                                       const std::string& dir) {
  auto faults = matrix_faults(*fab.fabric, base.client, base.server);
  if (!faults) return Err(faults.error());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Err(dir + ": " + ec.message());
  std::vector<MatrixRow> rows;
  // A failed run ends the matrix; what finished before it is still written.
  const auto fail = [&](const std::string& why) -> Result<std::vector<MatrixRow>, std::string> {
    if (rows.empty()) return Err(why);
    auto w = write_matrix(rows, dir);
    return Err(why + " (the " + std::to_string(rows.size()) + " rows finished before are in " +
               dir + "/matrix.md" + (w ? "" : "; writing them failed: " + w.error()) + ")");
  };
  for (size_t i = 0; i < faults->size(); ++i) {
    if (base.cancel && base.cancel->load()) return fail("cancelled");
    const MatrixFault& mf = (*faults)[i];
    SessionOptions o = base;
    o.mrc = true;
    if (o.baselines.empty()) o.baselines = {Baseline::kMptcp, Baseline::kTcp};
    o.faults = {{kMatrixFaultAt, mf.fault}, {kMatrixRepairAt, mf.repair}};
    o.csv = dir + "/" + std::to_string(i + 1) + ".csv";
    o.png.clear();
    o.quiet = true;
    auto res = run_session(fab, o);
    if (!res) return fail(mf.fault + ": " + res.error());
    MatrixRow row{mf, {}, {}, o.csv};
    for (size_t k = 0; k < res->series.size(); ++k) {
      for (const FaultMark& m : res->series[k].faults) {
        if (!m.error.empty()) return fail(res->series[k].name + ": " + m.fault + ": " + m.error);
      }
      row.transports.push_back(res->series[k].name);
      row.cells.push_back(matrix_cell(res->series[k]));
    }
    if (!res->data_ok) return fail(mf.fault + ": MRC: " + res->first_error);
    if (!base.quiet) {
      std::printf("matrix %zu/%zu %s:", i + 1, faults->size(), mf.kind.c_str());
      for (size_t k = 0; k < row.cells.size(); ++k) {
        const MatrixCell& c = row.cells[k];
        if (!c.computed) {
          std::printf(" %s n/a;", row.transports[k].c_str());
          continue;
        }
        std::printf(" %s %.2f/%.2f back %.0f ms;", row.transports[k].c_str(), c.during, c.low100,
                    c.back_ms);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    rows.push_back(std::move(row));
  }

  if (auto w = write_matrix(rows, dir); !w) return Err(w.error());
  return rows;
}

}  // namespace mrc::perf
