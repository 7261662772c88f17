// The delay line of a namespace-fabric port: where the gray program (gray.h) sends the packets
// it holds, and a process that sends them back out of the port later. Used by the `delay` and
// `reorder` faults (fault.h), since the kernel has no netem (nor fq for departure times).
// Threading: free functions, callable from any thread; start_delay_line forks (see below).
//
// For port <if> in namespace N, start_delay_line makes a veth pair dl<if> / dr<if> in N (MTU
// 65535, IPv6 off, up) and forks a process named kDelayLineName that enters N and
//   - reads every frame arriving on dr<if> (what the gray program redirected to dl<if>) through
//     an AF_PACKET socket with virtio-net headers, so GSO and checksum offload survive;
//   - holds each base_us, and a share extra_per10k / 10000 of them (chosen at random) extra_us
//     longer, so those are overtaken by later ones;
//   - sends each, when due, out of <if> through an AF_PACKET socket with SO_MARK kGrayPassMark
//     (the gray program passes those): they go through <if>'s qdisc (tbf) as any packet.
// Holding is timed with CLOCK_MONOTONIC and ppoll; on a loaded machine a packet leaves late by
// the process's scheduling delay (tens of microseconds), never early. At most kMaxHeldBytes
// are held; past that arriving frames are dropped, and frames the kernel could not queue on
// the reading socket (its buffer, kLineSocketBufferBytes, full) are dropped too. Both are
// counted and written to DelayLineConfig::drops_file (see DelayLineDrops); a fault that
// would hold more than kMaxHeldBytes at the link's rate is refused before it starts
// (nsfabric.cc). The process outlives the caller (as a
// flapper does, nsfabric.h), runs only this file's code after the fork, and ends on SIGTERM
// or by itself once N is gone.
#pragma once

#include <cstdint>
#include <string>

#include "mrc/common/result.h"

namespace mrc::nsfabric {

inline constexpr char kDelayLineName[] = "mrcf-delay";  // process name (comm)
inline constexpr size_t kMaxHeldBytes = 64u << 20;
inline constexpr int kLineSocketBufferBytes = 8 << 20;  // SO_RCVBUF / SO_SNDBUF of its sockets

struct DelayLineConfig {
  uint32_t base_us = 0;       // every packet
  uint32_t extra_us = 0;      // a share of them, on top
  uint32_t extra_per10k = 0;  // that share, 1/10000
  std::string drops_file;     // where the process writes its drop counts ("" = nowhere)
};

// What a delay line dropped, since it started; counts only grow. The process rewrites its
// drops_file (text "<over_limit> <socket>\n") within 200 ms of a change.
struct DelayLineDrops {
  uint64_t over_limit = 0;  // arrived while kMaxHeldBytes were held
  uint64_t socket = 0;      // the reading socket's buffer full (PACKET_STATISTICS tp_drops)
};

// Reads a drops_file; all zero when the file is not there (nothing dropped yet).
Result<DelayLineDrops, std::string> read_delay_line_drops(const std::string& drops_file);

struct DelayLine {
  int pid = 0;                   // the process
  uint32_t capture_ifindex = 0;  // dl<if>'s index in the namespace (GrayConfig::line_ifindex)
};

// Makes the veth pair (replacing a left-over one) and starts the process; returns once the
// process's sockets are bound (or its error, the process gone and the pair removed).
Result<DelayLine, std::string> start_delay_line(const std::string& netns, const std::string& ifname,
                                                const DelayLineConfig& cfg);

// Stops process `pid` if it is a delay line (SIGTERM, SIGKILL after 2 s) and removes the veth
// pair of the port if there is one. Safe to call when either is gone.
void stop_delay_line(const std::string& netns, const std::string& ifname, int pid);

bool is_delay_line(int pid);

// Whether process `pid` exists and its name (/proc/<pid>/comm) is `name`.
bool is_named_process(int pid, const std::string& name);

// For a child right after fork(): every signal's disposition back to SIG_DFL and an empty signal
// mask, so that SIGTERM ends it at once even when the parent (mrc-perf, a test) had a handler
// that only sets a flag the child never reads.
void reset_signals_in_child();

// Stops `pid` if its process name (/proc/<pid>/comm) is `name`: SIGTERM, then SIGKILL after
// 2 s. For the fabric's own child processes (flappers, delay lines), never any other.
void stop_named_process(int pid, const std::string& name);

}  // namespace mrc::nsfabric
