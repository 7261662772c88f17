// An MRC bandwidth run between hosts over the real UDP datapath: every endpoint lives in this
// process (each host its own UdpDriver and progress thread, its sockets in its host's network
// namespace), joined only by the network between them. Every byte is checked when `verify`.
// Two hosts (client -> server), or a traffic pattern between many: `hosts` and `pairs`.
// Threading: run_mrc blocks the calling thread, which posts work, verifies, samples the
// receivers' counters every interval and applies the fault schedule through a callback.
//
// Workloads (per QP pair, per direction; `outstanding` messages in flight, reposted as they
// complete):
//   write  RDMA WRITE into a ring of slots at the receiver; checked when the WRITE completes
//   send   SEND into posted receives; checked at the receiver's completion
//   read   RDMA READ of the server's memory; checked at the reader's completion
// Bandwidth is goodput: payload bytes the receiving QPs accepted (QpStats::rx_payload_bytes,
// duplicates excluded), per interval.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baseline.h"
#include "mrc/common/result.h"
#include "mrc/io/udp/udp_driver.h"
#include "rt_trace.h"

namespace mrc::perf {

// What a stream posts. WRITE_IMM and SEND_IMM carry the message number as their immediate,
// which the receiver checks; SEND, SEND_IMM and WRITE_IMM consume posted receives.
enum class Op : uint8_t { kWrite, kSend, kRead, kWriteImm, kSendImm };
Result<Op, std::string> parse_op(const std::string& s);
const char* to_string(Op op);
/// Every kind, for mixes (--soak).
inline constexpr Op kAllOps[] = {Op::kWrite, Op::kWriteImm, Op::kSend, Op::kSendImm, Op::kRead};

/// A fault at a time: "5s down t0 h0 p2" -> {5.0, "down t0 h0 p2"}.
struct TimedFault {
  double t_s = 0;
  std::string fault;
};
/// Parses "<time><unit> <fault words>", unit s or ms ("500ms flap link h0 p1 200").
Result<TimedFault, std::string> parse_timed_fault(const std::string& text);

struct MrcRunSpec {
  io::UdpConfig client, server;  // each with its netns, planes, path mode (and fabric)
  // How each side names the other: kSrv6 -> fabric host ids; else the peer's plane addresses
  // are taken from the other driver's bound sockets.
  // Many hosts: when `hosts` is not empty it replaces client and server (hosts[i] is the
  // config of run host i, its own driver), and each (initiator, target) in `pairs` (indices
  // into hosts, different) gets `qps` QP pairs whose initiator posts `op` to the target.
  // Empty: hosts {client, server}, pairs {(0, 1)} (and (1, 0) with `bidirectional`).
  std::vector<io::UdpConfig> hosts;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  Op op = Op::kWrite;
  std::vector<Op> ops;  // when set: QP pair q runs ops[q % ops.size()] (a mix of kinds)
  uint32_t msg_bytes = 1u << 20;
  uint32_t outstanding = 8;  // messages in flight per QP and direction (<= 30)
  uint32_t qps = 1;
  bool bidirectional = false;
  bool verify = true;
  uint32_t mtu = 0;  // payload per packet; 0: the largest both hosts' links carry (8192 on jumbo)
  uint32_t max_psn_range = 1024;  // QpAttr::max_psn_range: most packets in flight per QP
  // PathPolicy::min_active_per_plane: below this many good EVs a plane's share shrinks.
  uint32_t min_active_per_plane = 4;
  double duration_s = 10;
  double interval_s = 0.01;
  bool spin = false;  // latency runs: poll without sleeping, receiving in this thread
                      // (UdpDriver::poll_progress, poller_progress on); else every 200 us
  // Latency runs with one QP and one message in flight: a RoundTrip record per message
  // (rt_trace.h: counters of both drivers, the QP's probes and the polling thread's CPU time at
  // post and completion; the first kMaxRoundTrips). Off by default: the reads add to each.
  bool trace_round_trips = false;
  std::vector<TimedFault> schedule;
  std::function<Status<std::string>(const std::string& fault)> apply_fault;  // required if schedule
  std::function<void(double t_s, double gbps)> on_second;  // a line per second (may be empty)
  const std::atomic<bool>* cancel = nullptr;  // set (by a signal handler) to end the run early
};

// Samples are baseline.h's Sample: {end of the interval in s since the start, Gbit/s, its
// length}. An interval runs from the previous sample to this one, however late either was, so
// the intervals tile the run: bytes received while sampling = sum(gbps * dur_s) * 1e9 / 8.

struct FaultMark {
  double t_s = 0;  // when its apply began: detection times count from here
  std::string fault;
  std::string error;  // empty: applied
  // When its apply returned (a `tc`/`nft` change on a loaded machine can take a good part of
  // a second): a phase's goodput counts from here, so it never mixes in time before the
  // fault held.
  double applied_s = 0;
};

/// An EV state change the sender saw (client side, or both sides when bidirectional).
struct PathEvent {
  double t_s = 0;
  uint32_t ev = 0;
  uint16_t plane = 0;
  // The engine's static names (to_string): no allocation per event, so a soak with many EV
  // changes does not show them as memory growth.
  std::string_view from, to, reason;
};

/// Post-to-completion time of messages at the poster, microseconds (the first 4 M messages).
struct Latency {
  size_t samples = 0;
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  // The polling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) over the timed run, ns: its own
  // work, which a one-thread ping-pong's round trip is made of, apart from time off its CPU.
  int64_t poll_thread_cpu_ns = 0;
};

struct MrcRunResult {
  std::vector<Sample> intervals;  // goodput per interval, all directions and QPs
  std::vector<FaultMark> faults;
  std::vector<PathEvent> path_events;  // the first 65536
  uint64_t path_events_dropped = 0;    // EV state changes past those (counted, not kept)
  Latency latency;
  std::vector<RoundTrip> round_trips;  // trace_round_trips
  uint64_t messages = 0;    // completed and (if verify) checked
  uint64_t bytes = 0;       // payload bytes of those messages
  // Payload bytes the receivers took in while sampling, and the time the samples cover (from
  // the start to the last sample): their quotient is the samples' duration-weighted mean.
  uint64_t sampled_bytes = 0;
  double sampled_s = 0;
  uint64_t mismatches = 0;  // messages whose bytes differed
  uint64_t errors = 0;      // error completions or failed posts
  std::string first_error;
  uint64_t retransmits = 0, rtos = 0, trims_seen = 0;
  uint64_t spurious = 0;       // retransmits whose first copy was acknowledged after all
  uint64_t duplicates = 0;     // data packets the receivers had already
  uint64_t crc_errors = 0;     // datagrams either side dropped for a bad header or payload CRC32C
  std::string cc;              // sender's RTT and congestion window at the end, one line
  std::string paths;           // sender's EVs at the end: state, packets sent, lost, RTT
  io::UdpCounters client_counters, server_counters;  // run hosts 0 and 1
  // Per run host: payload bytes its QPs sent (as the data's source) and received (as its
  // sink) while sampling, over sampled_s; they add up to sampled_bytes each.
  std::vector<uint64_t> host_tx_bytes, host_rx_bytes;
  uint64_t datagrams_sent = 0, gso_messages = 0;  // every host's driver together
  // This process's resident memory (VmRSS), KiB: after setup, the highest sampled once a
  // second, and at the end of the run (before teardown). Flat memory: max stays near start.
  uint64_t rss_start_kib = 0, rss_max_kib = 0, rss_end_kib = 0;
  // VmRSS once a second (time s, KiB), with the tool's sample records preallocated before
  // the first, so growth here is the library's (and the path events' as they are recorded).
  std::vector<std::pair<double, uint64_t>> rss_kib_samples;
  // Run hosts 0 and 1, incl. every dropped datagram by reason and every datagram sent by kind;
  // read after the drivers stopped, as are the counters above.
  engine::EngineStats client_engine, server_engine;
  bool ok() const { return mismatches == 0 && errors == 0; }
};

/// Least-squares slope of (time s, KiB) samples from `from_s` on, in KiB per minute; 0 with
/// fewer than 3 samples there. The soak's memory verdict: memory that stays flat once the run
/// is under way has a slope near zero however much it took to get there.
double rss_slope_kib_per_min(std::span<const std::pair<double, uint64_t>> samples, double from_s);
/// The most a soak's second-half RSS slope may be and still count as flat, KiB per minute. The
/// CI soak (25 s) reads 0.9-1.2 MiB/min of allocator noise (1.3 MiB over the run); a leak of
/// 100 B per message would read ~4 MiB/min there.
inline constexpr double kFlatRssKibPerMin = 2048;

/// Sets up the drivers and QPs, runs, tears down. Errors are setup failures (sockets, QPs);
/// what goes wrong during the run is in the result (mismatches, errors, first_error).
Result<MrcRunResult, std::string> run_mrc(const MrcRunSpec& spec);

}  // namespace mrc::perf
