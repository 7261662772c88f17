#include "rt_trace.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mrc::perf {

namespace {

constexpr int64_t kOffCpuMark = 10'000;  // ns: "off CPU" mark (a time slice lost, not a cache miss)

uint32_t delta(uint64_t a, uint64_t b) { return static_cast<uint32_t>(b - a); }

RtHost host_between(const io::UdpCounters& a, const io::UdpCounters& b) {
  RtHost h;
  h.loop_wakes = delta(a.loop_iterations, b.loop_iterations);
  h.loop_rx = delta(a.loop_rx_rounds, b.loop_rx_rounds);
  h.poller_rounds = delta(a.poller_rounds, b.poller_rounds);
  h.poller_timeouts = delta(a.poller_timeouts, b.poller_timeouts);
  h.loop_timeouts = delta(a.timeouts, b.timeouts) - h.poller_timeouts;
  h.woke_socket = delta(a.loop_woke_socket, b.loop_woke_socket);
  h.woke_app = delta(a.loop_woke_app, b.loop_woke_app);
  h.woke_alarm = delta(a.loop_woke_alarm, b.loop_woke_alarm);
  h.woke_poller_end = delta(a.loop_woke_poller_end, b.loop_woke_poller_end);
  h.woke_deadline = delta(a.loop_woke_deadline, b.loop_woke_deadline);
  h.datagrams_sent = delta(a.datagrams_sent, b.datagrams_sent);
  return h;
}

}  // namespace

RoundTrip round_trip_between(const RtSnapshot& a, const RtSnapshot& b) {
  RoundTrip r;
  r.ns = b.mono_ns - a.mono_ns;
  r.off_cpu_ns = std::max<int64_t>(0, r.ns - (b.thread_cpu_ns - a.thread_cpu_ns));
  r.tail_probes = delta(a.tail_probes, b.tail_probes);
  r.rtos = delta(a.rtos, b.rtos);
  for (int i = 0; i < 2; ++i) r.host[i] = host_between(a.host[i], b.host[i]);
  return r;
}

const char* to_string(RtCause c) {
  switch (c) {
    case RtCause::kRto:
      return "rto";
    case RtCause::kTailProbe:
      return "tail probe";
    case RtCause::kAppOffCpu:
      return "app off cpu";
    case RtCause::kLoopRx:
      return "loop received";
    case RtCause::kLoopWoke:
      return "loop woke";
    case RtCause::kNone:
      return "none";
  }
  return "?";
}

RtCause rt_cause(const RoundTrip& r, int64_t median_ns) {
  if (r.rtos > 0) return RtCause::kRto;
  if (r.tail_probes > 0) return RtCause::kTailProbe;
  const int64_t excess = r.ns - median_ns;
  if (excess > 0 && 2 * r.off_cpu_ns >= excess) return RtCause::kAppOffCpu;
  if (r.host[0].loop_rx + r.host[1].loop_rx > 0) return RtCause::kLoopRx;
  if (r.host[0].loop_wakes + r.host[1].loop_wakes > 0) return RtCause::kLoopWoke;
  return RtCause::kNone;
}

std::vector<RtBuckets> bucket_round_trips(std::span<const RoundTrip> rts,
                                          std::span<const double> quantiles) {
  std::vector<RtBuckets> out;
  if (rts.empty()) return out;
  std::vector<int64_t> ns(rts.size());
  for (size_t i = 0; i < rts.size(); ++i) ns[i] = rts[i].ns;
  std::sort(ns.begin(), ns.end());
  const auto at = [&](double q) {
    return ns[std::min(ns.size() - 1, static_cast<size_t>(q * static_cast<double>(ns.size())))];
  };
  const int64_t median = at(0.5);
  for (double q : quantiles) {
    RtBuckets b;
    b.quantile = q;
    b.above_ns = q > 0 ? at(q) : INT64_MIN;
    for (const RoundTrip& r : rts) {
      if (r.ns <= b.above_ns) continue;
      ++b.count;
      ++b.by_cause[static_cast<size_t>(rt_cause(r, median))];
      b.tlp += r.tail_probes > 0;
      b.rto += r.rtos > 0;
      b.off_cpu += r.off_cpu_ns >= kOffCpuMark;
      b.off_cpu_ns_sum += r.off_cpu_ns;
      b.loop_rx += r.host[0].loop_rx + r.host[1].loop_rx > 0;
      for (int h = 0; h < 2; ++h) {
        b.loop_woke[h] += r.host[h].loop_wakes > 0;
        b.poller_end[h] += r.host[h].woke_poller_end > 0;
      }
    }
    if (q == 0) b.above_ns = 0;
    out.push_back(b);
  }
  return out;
}

std::vector<std::string> format_buckets(std::span<const RtBuckets> bs) {
  std::vector<std::string> out;
  std::string head = "round trips: set, count, by cause (first that holds):";
  for (size_t c = 0; c < kRtCauses; ++c) head += std::string(" ") + to_string(RtCause(c)) + ",";
  head += " | marks: tlp, rto, off cpu >= 10 us, loop rx, loop woke h0/h1, poller hold ran out "
          "h0/h1, mean off cpu us";
  out.push_back(head);
  for (const RtBuckets& b : bs) {
    const double n = static_cast<double>(std::max<size_t>(b.count, 1));
    char line[512];
    int k = b.quantile > 0 ? std::snprintf(line, sizeof line, "  > p%g (%.1f us), %zu:",
                                           b.quantile * 100, b.above_ns / 1e3, b.count)
                           : std::snprintf(line, sizeof line, "  all, %zu:", b.count);
    for (size_t c = 0; c < kRtCauses; ++c)
      k += std::snprintf(line + k, sizeof line - k, " %.3f", b.by_cause[c] / n);
    std::snprintf(line + k, sizeof line - k,
                  " | %.3f %.3f %.3f %.3f %.3f/%.3f %.3f/%.3f %.1f", b.tlp / n, b.rto / n,
                  b.off_cpu / n, b.loop_rx / n, b.loop_woke[0] / n, b.loop_woke[1] / n,
                  b.poller_end[0] / n, b.poller_end[1] / n, b.off_cpu_ns_sum / n / 1e3);
    out.emplace_back(line);
  }
  return out;
}

Status<std::string> write_round_trips(const std::string& path, std::span<const RoundTrip> rts) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Err("latency trace '" + path + "': " + std::strerror(errno));
  std::fprintf(f, "ns,off_cpu_ns,tail_probes,rtos");
  for (int h = 0; h < 2; ++h)
    std::fprintf(f,
                 ",h%d_loop_wakes,h%d_loop_rx,h%d_poller_rounds,h%d_loop_timeouts,"
                 "h%d_poller_timeouts,h%d_woke_socket,h%d_woke_app,h%d_woke_alarm,"
                 "h%d_woke_poller_end,h%d_woke_deadline,h%d_datagrams_sent",
                 h, h, h, h, h, h, h, h, h, h, h);
  std::fprintf(f, "\n");
  for (const RoundTrip& r : rts) {
    std::fprintf(f, "%lld,%lld,%u,%u", static_cast<long long>(r.ns),
                 static_cast<long long>(r.off_cpu_ns), r.tail_probes, r.rtos);
    for (const RtHost& h : r.host)
      std::fprintf(f, ",%u,%u,%u,%u,%u,%u,%u,%u,%u,%u,%u", h.loop_wakes, h.loop_rx,
                   h.poller_rounds, h.loop_timeouts, h.poller_timeouts, h.woke_socket, h.woke_app,
                   h.woke_alarm, h.woke_poller_end, h.woke_deadline, h.datagrams_sent);
    std::fprintf(f, "\n");
  }
  if (std::fclose(f) != 0) return Err("latency trace '" + path + "': " + std::strerror(errno));
  return {};
}

}  // namespace mrc::perf
