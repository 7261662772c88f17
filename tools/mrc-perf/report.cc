#include "report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mrc::perf {
namespace {

// Duration-weighted mean goodput of the intervals whose ends lie in (from, to]: the bytes
// they moved over the time they cover.
double mean_in(const std::vector<Sample>& v, double from, double to) {
  double bits = 0, secs = 0;
  for (const Sample& i : v) {
    if (i.t_s > from && i.t_s <= to + 1e-9) {
      bits += i.gbps * i.dur_s;
      secs += i.dur_s;
    }
  }
  return secs > 0 ? bits / secs : 0;
}

// Lowest duration-weighted mean over `w` consecutive intervals whose ends lie in (from, to].
double min_window(const std::vector<Sample>& v, double from, double to, size_t w) {
  std::vector<const Sample*> xs;
  for (const Sample& i : v)
    if (i.t_s > from && i.t_s <= to + 1e-9) xs.push_back(&i);
  if (xs.empty()) return 0;
  if (xs.size() < w) w = xs.size();
  double bits = 0, secs = 0, best = 1e300;
  for (size_t k = 0; k < xs.size(); ++k) {
    bits += xs[k]->gbps * xs[k]->dur_s;
    secs += xs[k]->dur_s;
    if (k >= w) {
      bits -= xs[k - w]->gbps * xs[k - w]->dur_s;
      secs -= xs[k - w]->dur_s;
    }
    // The running sum's subtractions leave rounding residue: an idle window reads as -1e-17.
    if (k + 1 >= w && secs > 0) best = std::min(best, std::max(0.0, bits / secs));
  }
  return best == 1e300 ? 0 : best;
}

// The series' typical interval: the time it covers over the number of samples.
double interval_len(const std::vector<Sample>& v) {
  double secs = 0;
  for (const Sample& i : v) secs += i.dur_s;
  return v.empty() || secs <= 0 ? 0.01 : secs / v.size();
}

}  // namespace

Summary summarize(const Series& s, double warmup_s) {
  Summary sum;
  const auto& v = s.intervals;
  if (v.empty()) return sum;
  const double dt = interval_len(v);
  const size_t w100 = std::max<size_t>(1, static_cast<size_t>(std::lround(0.1 / dt)));
  const double end = v.back().t_s;
  std::vector<FaultMark> faults;
  for (const FaultMark& f : s.faults)
    if (f.error.empty()) faults.push_back(f);
  const double first_fault = faults.empty() ? end : faults.front().t_s;
  sum.healthy_gbps = mean_in(v, warmup_s, first_fault);
  sum.mean_gbps = mean_in(v, 0, end);

  std::vector<double> cuts{0};
  for (const FaultMark& f : faults) cuts.push_back(f.t_s);
  cuts.push_back(end);
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    PhaseSummary ph;
    ph.start_s = cuts[p];
    ph.end_s = cuts[p + 1];
    // A fault's phase counts from when its apply returned (at most its end).
    const double from = p == 0 ? std::min(warmup_s, ph.end_s)
                               : std::clamp(faults[p - 1].applied_s, ph.start_s, ph.end_s);
    ph.mean_gbps = mean_in(v, from, ph.end_s);
    ph.min_100ms_gbps = min_window(v, from, ph.end_s, w100);
    ph.min_interval_gbps = min_window(v, from, ph.end_s, 1);
    if (p > 0) {
      ph.fault = faults[p - 1].fault;
      ph.at_50ms_gbps =
          ph.start_s + 0.1 <= ph.end_s ? mean_in(v, ph.start_s + 0.05, ph.start_s + 0.1) : 0;
      // Repairs (up, unblackhole, unflap, untrim; loss, degrade, delay, corrupt, reorder ...
      // 0 [up|down]) have nothing to detect.
      const std::string& f = ph.fault;
      // A trim fault ends with its ECN threshold, which may be 0: not a repair.
      const bool repair = f.rfind("up ", 0) == 0 || f.rfind("un", 0) == 0 ||
                          (f.rfind("trim ", 0) != 0 && f.ends_with(" 0")) || f.ends_with(" 0 up") ||
                          f.ends_with(" 0 down");
      for (const PathEvent& e : s.path_events) {
        if (repair) break;
        if (e.t_s >= ph.start_s && e.t_s < ph.end_s && e.to != "GOOD") {
          ph.detect_ms = (e.t_s - ph.start_s) * 1e3;
          break;
        }
      }
    }
    sum.phases.push_back(ph);
  }
  double run = 0;
  for (const Sample& i : v) {
    if (i.t_s <= warmup_s) continue;
    run = i.gbps < 0.1 * sum.healthy_gbps ? run + i.dur_s : 0;
    sum.longest_stall_ms = std::max(sum.longest_stall_ms, run * 1e3);
  }
  return sum;
}

std::string format_summary(const Series& s, const Summary& sum) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line,
                "%s: healthy %.3f Gbit/s, run mean %.3f Gbit/s, longest stall %.0f ms\n",
                s.name.c_str(), sum.healthy_gbps, sum.mean_gbps, sum.longest_stall_ms);
  o << line;
  std::snprintf(line, sizeof line, "  %-34s %8s %8s %9s %9s %10s %9s\n", "phase (from fault)",
                "start_s", "mean", "min100ms", "/healthy", "at50ms", "detect_ms");
  o << line;
  for (const PhaseSummary& p : sum.phases) {
    const double h = sum.healthy_gbps > 0 ? sum.healthy_gbps : 1;
    std::string detect = p.detect_ms >= 0 ? std::to_string(p.detect_ms).substr(0, 6) : "-";
    std::string after = p.fault.empty() ? "-" : std::to_string(p.at_50ms_gbps / h).substr(0, 5);
    std::snprintf(line, sizeof line, "  %-34s %8.2f %8.3f %9.3f %9.3f %10s %9s\n",
                  p.fault.empty() ? "(start)" : p.fault.c_str(), p.start_s, p.mean_gbps,
                  p.min_100ms_gbps, p.min_100ms_gbps / h, after.c_str(), detect.c_str());
    o << line;
  }
  for (const FaultMark& f : s.faults) {
    if (!f.error.empty())
      o << "  fault at " << f.t_s << " s failed: " << f.fault << ": " << f.error << "\n";
    else if (f.applied_s - f.t_s > 0.05)  // its phase's goodput counts from the end of it
      o << "  fault at " << f.t_s << " s took " << std::lround((f.applied_s - f.t_s) * 1e3)
        << " ms to apply: " << f.fault << "\n";
  }
  return o.str();
}

Status<std::string> write_csv(const std::string& path, const std::vector<Series>& series) {
  std::ofstream out(path);
  if (!out) return Err(path + ": cannot write: " + std::strerror(errno));
  size_t rows = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    out << (i ? "," : "") << series[i].name << "_t_s," << series[i].name << "_gbps";
    rows = std::max(rows, series[i].intervals.size());
  }
  out << ",fault\n";
  const std::vector<FaultMark> none;
  const std::vector<FaultMark>& faults = series.empty() ? none : series[0].faults;
  size_t next_fault = 0;
  char buf[64];
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < series.size(); ++i) {
      if (i) out << ",";
      if (r < series[i].intervals.size()) {
        std::snprintf(buf, sizeof buf, "%.3f,%.4f", series[i].intervals[r].t_s,
                      series[i].intervals[r].gbps);
        out << buf;
      } else {
        out << ",";
      }
    }
    out << ",";
    // Faults of the first series, on the row of the interval they fall in.
    const auto& first = series[0].intervals;
    const double t = r < first.size() ? first[r].t_s : 1e300;
    std::string marks;
    while (next_fault < faults.size() && faults[next_fault].t_s <= t) {
      if (!marks.empty()) marks += "; ";
      marks += faults[next_fault++].fault;
    }
    out << marks << "\n";
  }
  if (!out) return Err(path + ": write failed");
  return {};
}

Status<std::string> write_png(const std::string& png_path, const std::string& csv_path,
                              const std::vector<Series>& series, const std::string& title) {
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1200,500 font 'sans,10'\n"
     << "set output '" << png_path << "'\n"
     << "set datafile separator ','\n"
     << "set title \"" << title << "\"\n"
     << "set xlabel 'time (s)'\nset ylabel 'goodput (Gbit/s)'\n"
     << "set grid\nset key outside right top\nset yrange [0:*]\n";
  int n = 0;
  if (!series.empty()) {
    for (const FaultMark& f : series[0].faults) {
      ++n;
      gp << "set arrow " << n << " from " << f.t_s << ", graph 0 to " << f.t_s
         << ", graph 1 nohead dt 2 lc rgb '#aa0000'\n";
      gp << "set label " << n << " \"" << f.fault << "\" at " << f.t_s << ", graph "
         << (0.97 - 0.05 * ((n - 1) % 4)) << " font 'sans,8' tc rgb '#aa0000' offset 0.3,0\n";
    }
  }
  gp << "plot ";
  for (size_t i = 0; i < series.size(); ++i) {
    if (i) gp << ", ";
    gp << "'" << csv_path << "' using " << (2 * i + 1) << ":" << (2 * i + 2)
       << " every ::1 with lines lw 1.5 title '" << series[i].name << "'";
  }
  gp << "\n";
  return run_gnuplot(png_path, gp.str());
}

Status<std::string> run_gnuplot(const std::string& png_path, const std::string& text) {
  const std::string script = png_path + ".gp";
  {
    std::ofstream out(script);
    if (!out) return Err(script + ": cannot write");
    out << text;
  }
  const pid_t pid = ::fork();
  if (pid < 0) return Err(std::string("gnuplot: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "gnuplot: %s (install gnuplot-nox)\n", std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::remove(script.c_str());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Err(
        "gnuplot failed to draw " + png_path +
        (WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (gnuplot not installed?)" : ""));
  }
  return {};
}

double time_back_ms(const Series& s, double healthy_gbps, double repair_s, double share) {
  const std::vector<Sample>& v = s.intervals;
  const double goal = share * healthy_gbps;
  for (size_t a = 0; a < v.size(); ++a) {
    const double start = v[a].t_s - v[a].dur_s;
    if (start < repair_s - 1e-6) continue;
    double bits = 0, secs = 0;
    for (size_t b = a; b < v.size() && secs < 0.1 - 1e-6; ++b) {
      bits += v[b].gbps * v[b].dur_s;
      secs += v[b].dur_s;
    }
    if (secs < 0.1 - 1e-6) return -1;  // the series ends within 100 ms
    if (bits / secs >= goal) return (start - repair_s) * 1e3;
  }
  return -1;
}

}  // namespace mrc::perf
