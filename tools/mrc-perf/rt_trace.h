// mrc-perf --latency-trace: what each round trip of a latency run cost, and why the slow ones
// were slow (issue 17: the p99 round trip). One record per message (post to completion, one
// message in flight), from counters read at the post and at the completion; buckets by cause.
// Threading: plain values and pure functions; the run's one thread fills the records.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "mrc/io/udp/udp_driver.h"

namespace mrc::perf {

/// What one host's driver did during a round trip: UdpCounters deltas (udp_driver.h).
struct RtHost {
  uint32_t loop_wakes = 0;       // loop_iterations (every progress thread)
  uint32_t loop_rx = 0;          // loop_rx_rounds: the loop, not a poller, read datagrams
  uint32_t poller_rounds = 0;    // poll_progress rounds that fed the engine
  uint32_t loop_timeouts = 0;    // on_timeout calls made by the loop (timeouts - poller_timeouts)
  uint32_t poller_timeouts = 0;  // ...made by pollers
  // Thread 0's wakeups by reason (loop_woke_*).
  uint32_t woke_socket = 0, woke_app = 0, woke_alarm = 0, woke_poller_end = 0, woke_deadline = 0;
  uint32_t datagrams_sent = 0;
};

/// The counters a record is the difference of, read at one instant.
struct RtSnapshot {
  int64_t mono_ns = 0;      // CLOCK_MONOTONIC
  int64_t thread_cpu_ns = 0;  // CLOCK_THREAD_CPUTIME_ID of the polling (app) thread
  uint64_t tail_probes = 0, rtos = 0;  // the initiating QP's QpStats
  io::UdpCounters host[2];  // the initiator's host, then the target's
};

/// One round trip.
struct RoundTrip {
  int64_t ns = 0;          // post to completion (as the run's latency figure)
  int64_t off_cpu_ns = 0;  // of that, the polling thread was not on a CPU (monotonic - CPU time)
  uint32_t tail_probes = 0, rtos = 0;  // fired on the initiating QP in between
  RtHost host[2];                      // 0: the initiator's host, 1: the target's
};

/// The difference of two snapshots (b after a).
RoundTrip round_trip_between(const RtSnapshot& a, const RtSnapshot& b);

/// Why a round trip was slow, the first that holds in this order (one bucket each):
enum class RtCause : uint8_t {
  kRto,         // a retransmission timeout fired
  kTailProbe,   // a tail loss probe fired (the resend's work on both hosts, spurious or not)
  kAppOffCpu,   // the polling thread was off its CPU for at least half of the time the round
                // trip took beyond the median (descheduled: another thread or softirq ran)
  kLoopRx,      // a progress loop read the datagrams (a poller did not: its hold ran out)
  kLoopWoke,    // a progress loop woke, without receiving
  kNone,        // none of these
};
inline constexpr size_t kRtCauses = 6;
const char* to_string(RtCause c);
RtCause rt_cause(const RoundTrip& r, int64_t median_ns);

/// The summary: per cause, how many round trips above a quantile fell in its bucket, and how
/// many of them (and of all) carry each mark, for a few quantiles.
struct RtBuckets {
  double quantile = 0;     // round trips slower than this quantile of all (0: all of them)
  int64_t above_ns = 0;    // ...i.e. than this
  size_t count = 0;
  size_t by_cause[kRtCauses] = {};
  // Marks, not exclusive: TLP, RTO, off CPU > 10 us, a loop received, a loop woke (host 0/1).
  size_t tlp = 0, rto = 0, off_cpu = 0, loop_rx = 0, loop_woke[2] = {}, poller_end[2] = {};
  int64_t off_cpu_ns_sum = 0;
};
/// The buckets of the round trips above each quantile in `quantiles` (0 = every round trip).
std::vector<RtBuckets> bucket_round_trips(std::span<const RoundTrip> rts,
                                          std::span<const double> quantiles);
/// Human lines for the summary (one per quantile, plus a header).
std::vector<std::string> format_buckets(std::span<const RtBuckets> b);
/// Writes one CSV row per round trip (with a header) to `path`; an error names the file.
Status<std::string> write_round_trips(const std::string& path, std::span<const RoundTrip> rts);

}  // namespace mrc::perf
