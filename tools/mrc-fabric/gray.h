// Gray failures on a namespace-fabric port: a tc clsact egress eBPF program (bpf/gray.bpf.c) per
// port that sends a share of the packets to the port's delay line (delay_line.h) and corrupts a
// share of them. Threading: free functions, callable from any thread; each one does its work on
// a short-lived thread of its own inside the port's network namespace.
//
// What the program does with each packet leaving the port, in this order:
//   - carrying skb->mark == pass_mark (what the delay line sends back): mark cleared, counted
//     as returned, and on to the corruption step below (never held twice);
//   - not IPv6, or ICMPv6 neighbour discovery (types 133..137): passed;
//   - not returned, with probability hold_per10k / 10000: redirected to the egress of interface
//     line_ifindex (the delay line's capture end); it is corrupted (or not) when it comes back,
//     so a delay or reorder on the same link leaves the corrupted share unchanged;
//   - an IPv6 UDP or TCP packet (no extension headers), with probability corrupt_per10k / 10000:
//     UDP with a zero checksum and not GSO gets one random bit of its UDP payload flipped (the
//     receiver sees the flip unless its own integrity checks catch it: MRC's header and payload
//     CRC32C); anything else chosen is dropped, since on a wire the receiver's checksum would
//     drop it (veth hands checksum-offloaded packets over unchecked, so a flip would not be);
//   - passed on to the next filter (the trimming program, trim.h, runs after this one).
// The program stays attached after the loading process exits; deleting the filter, the
// interface or the namespace removes it with its counters.
#pragma once

#include <cstdint>
#include <string>

#include "mrc/common/result.h"

namespace mrc::nsfabric {

// skb->mark of the packets the delay line sends back ("MRCD").
inline constexpr uint32_t kGrayPassMark = 0x4d524344;

struct GrayConfig {
  uint32_t hold_per10k = 0;     // share sent to the delay line, 1/10000 (0..10000)
  uint32_t line_ifindex = 0;    // the delay line's capture interface; needed when hold_per10k > 0
  uint32_t corrupt_per10k = 0;  // share corrupted or dropped, 1/10000 (0..10000)
};

// Snapshot of one port's counters; they only grow and restart at zero on (re)attach.
struct GrayCounters {
  uint64_t packets = 0;    // every packet seen, returns from the delay line included
  uint64_t held = 0;       // sent to the delay line
  uint64_t returned = 0;   // came back from it
  uint64_t corrupted = 0;  // left with a bit flipped
  uint64_t dropped = 0;    // chosen for corruption but carrying a checksum: dropped
};

// Loads a program instance configured with `cfg` and attaches it to `ifname`'s egress in netns
// `netns`, before the trimming program, creating the clsact qdisc if needed; replaces one
// already there. Errors read "<ifname> in <netns>: <what>: <cause>".
Status<std::string> attach_gray(const std::string& netns, const std::string& ifname,
                                const GrayConfig& cfg);
// Removes the filter; an error when none is attached.
Status<std::string> detach_gray(const std::string& netns, const std::string& ifname);
Result<GrayCounters, std::string> gray_counters(const std::string& netns,
                                                const std::string& ifname);

}  // namespace mrc::nsfabric
