// How long a poll_progress call keeps the UDP driver's progress loop off the sockets (the
// pollers' hold, udp_driver.h): kMinGrace, or a few times the smoothed gap between one poll's
// end and the next one's start when that is longer, at most kMaxGrace.
// Threading: every member is an atomic read and written relaxed by any poller (racing updates
// lose a sample, never corrupt one); the loop reads only what UdpDriver derives from it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace mrc::io {

class PollerHold {
 public:
  /// The least hold (ns): the longest an application that stops polling (sleeps on a
  /// completion channel, spins on memory as ib_write_lat does between its polls) waits before
  /// the loop watches the sockets again, when it polled in a tight loop before. 50 us cost
  /// ib_write_lat up to that much per message (perf/RESULTS.md 2026-11-26).
  static constexpr int64_t kMinGrace = 10'000;
  /// The most (ns): a gap longer than this between polls is the poller losing its core, not
  /// its rhythm, and counts as this much.
  static constexpr int64_t kMaxGrace = 100'000;
  /// Grace = kGapsPerGrace x the smoothed gap: a poller's gaps vary with what it does between
  /// polls (mrc-perf --latency: a post, whose send crosses the fabric in the poster's own
  /// softirq on veth, about 9 us; then the other host's answer), and the hold must outlast
  /// the longer ones, or the loop takes the sockets back in every round trip.
  static constexpr int64_t kGapsPerGrace = 3;

  /// A poll starts at `t_ns`: the gap since the last one ended feeds the smoothed gap (gain
  /// 1/8, as RFC 6298's SRTT). Returns the hold's end: t_ns + grace().
  int64_t on_poll_start(int64_t t_ns) {
    const int64_t last = last_end_ns_.load(std::memory_order_relaxed);
    if (last != 0 && t_ns >= last) {
      const int64_t gap = std::min(t_ns - last, kMaxGrace);
      const int64_t g = gap_ns_.load(std::memory_order_relaxed);
      gap_ns_.store(g + (gap - g) / 8, std::memory_order_relaxed);
    }
    return t_ns + grace();
  }
  /// The poll ends at `t_ns` (after its own sends). Returns the hold's end: t_ns + grace().
  int64_t on_poll_end(int64_t t_ns) {
    last_end_ns_.store(t_ns, std::memory_order_relaxed);
    return t_ns + grace();
  }
  /// The hold a poll gives now (ns).
  int64_t grace() const {
    return std::clamp(kGapsPerGrace * gap_ns_.load(std::memory_order_relaxed), kMinGrace,
                      kMaxGrace);
  }
  int64_t smoothed_gap() const { return gap_ns_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> last_end_ns_{0};  // when the last poll ended; 0: none yet
  std::atomic<int64_t> gap_ns_{0};       // smoothed gap between polls
};

}  // namespace mrc::io
