// Traffic patterns of mrc-sim: which host sends how many bytes to which, cut into which
// messages, and which message must have arrived before another may be posted. Pure functions
// of (pattern, hosts, bytes, seed), shared by the tool and its tests. Threading: free
// functions and value types.
//
// Patterns (`--pattern`):
//   permutation     every host sends `bytes` to one other host: a seeded random derangement
//                   (no host sends to itself; each host receives exactly one flow).
//   alltoall        every host sends `bytes` to every other host (NCCL all-to-all): H(H-1)
//                   flows; host a's flows in the order a+1, a+2, ... (NCCL's p2p schedule),
//                   all posted at once unless the traffic's window limits them.
//   ring-allreduce  NCCL's ring algorithm on a buffer of `bytes` per rank: N chunks of
//                   bytes/N; 2(N-1) steps (N-1 reduce-scatter, N-1 all-gather) in which rank r
//                   sends one chunk to r+1 and receives one from r-1. A chunk is cut into
//                   `slices` messages (NCCL's pipelining); slice j of step k at rank r is
//                   posted only once slice j of step k-1 from r-1 has arrived at r (verified),
//                   so one slow flow slows the whole collective. One flow per ring edge.
//   incast          `incast_senders` hosts (seeded choice) each send `bytes` to host
//                   `incast_dst`.
// Every flow but the ring's is cut into messages of at most `msg_bytes`. The ideal time is
// the bytes over the tightest cut of the fabric (ideal_seconds), latency not counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mrc/common/result.h"

namespace mrc::msim {

enum class Pattern : uint8_t { kPermutation, kAlltoall, kRingAllreduce, kIncast };
inline constexpr const char* kPatternNames[] = {"permutation", "alltoall", "ring-allreduce",
                                                "incast"};
std::optional<Pattern> parse_pattern(std::string_view name);
const char* to_string(Pattern p);

struct WorkloadSpec {
  Pattern pattern = Pattern::kPermutation;
  uint32_t hosts = 2;
  uint64_t bytes = 1 << 20;      // per flow; ring-allreduce: the buffer per rank
  uint64_t msg_bytes = 1 << 20;  // largest message of a flow (not the ring's)
  uint32_t slices = 8;           // ring-allreduce: messages per chunk
  uint32_t incast_senders = 8;   // incast: K
  uint32_t incast_dst = 0;       // incast: the receiver
  uint64_t seed = 1;
};

struct Flow {
  uint32_t src = 0, dst = 0;
  uint64_t bytes = 0;
};

struct Message {
  uint32_t flow = 0;   // index into Workload::flows (src, dst)
  uint64_t bytes = 0;  // > 0
  int64_t after = -1;  // a message whose arrival at this one's source gates its posting
};

struct Workload {
  WorkloadSpec spec;
  std::vector<Flow> flows;
  // Posting order: a flow's messages appear in the order they are posted on it, and a
  // host's flows in the order they start.
  std::vector<Message> messages;
  uint64_t total_bytes() const;
};

/// Checks the spec (hosts >= 2, bytes large enough to cut, incast senders < hosts, ...)
/// and builds the workload; the error names the problem.
Result<Workload, std::string> make_workload(const WorkloadSpec& spec);

/// A permutation of 0..n-1 with no fixed point, drawn from `seed` (n >= 2).
std::vector<uint32_t> derangement(uint32_t n, uint64_t seed);

/// The fabric as far as the ideal time needs it.
struct Capacity {
  uint32_t planes = 4, spines = 4, hosts_per_t0 = 1;
  uint64_t host_port_bps = 0;  // one port of one plane
  uint64_t uplink_bps = 0;     // one T0-T1 link
};

/// Seconds to move the workload's payload through its tightest cut: every host's ports
/// (sent, received: bytes / (planes x port)) and every T0's uplinks (bytes leaving or
/// entering the T0 for other T0s / (planes x spines x uplink)). Latency and headers are
/// not counted, so efficiency = ideal / actual is at most ~0.98 (4 KiB MTU).
double ideal_seconds(const Workload& w, const Capacity& c);

}  // namespace mrc::msim
