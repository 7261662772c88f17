// Trimming and ECN marking on a namespace-fabric switch port: a tc clsact egress eBPF program per
// port (DESIGN.md section 5). Threading: free functions, callable from any thread; each one does
// its work on a short-lived thread of its own inside the port's network namespace.
//
// The program models the port's queue as a virtual queue drained at `rate_gbps`: on every packet
//   backlog = max(0, backlog - rate * (now - last)) + bytes leaving (L2 length, after trimming).
// With the backlog a packet finds on arrival (before its own bytes):
//   backlog > trim_bytes: an MRC data packet (UDP over IPv6 or IPv4 to udp_port, MRC version
//     and kind valid, with payload) is cut to Ethernet + IP + UDP + MRC common + data extension
//     (134 bytes on IPv6, 114 on IPv4), gets net_flag::kTrimmed, the IP length (IPv6 payload
//     length; IPv4 total length, header checksum updated) and UDP length rewritten and UDP
//     checksum zero (IPv4: no checksum; IPv6 receivers must set UDP_NO_CHECK6_RX). It is not
//     also marked.
//   backlog > ecn_bytes: any ECT(0)/ECT(1) packet not trimmed gets CE, MRC or not, IPv6 or
//     IPv4 (the IPv4 header checksum updated).
// GSO skbs (gso_segs > 1) count with all their bytes and may get CE but are never trimmed: turn
// GSO off on hosts whose traffic should be trimmed. Ports are Ethernet (veth); IPv6 extension
// headers, IPv4 options and IPv4 fragments are not parsed (such packets count as not MRC).
// Nothing is ever dropped.
//
// The program stays attached after the loading process exits (tc holds it). Nothing is pinned:
// trim_counters finds the program through the tc filter (fixed handle and priority on clsact
// egress) and its counters map through the program, so the counters and the queue live exactly
// as long as the filter, and deleting the interface or the netns removes everything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "mrc/common/result.h"

namespace mrc::nsfabric {

struct TrimConfig {
  double rate_gbps = 0;      // port rate, Gbit/s (1e9 bit/s), > 0: the virtual queue drains at it
  uint32_t trim_bytes = 0;   // trim MRC data when the backlog exceeds this, bytes
  uint32_t ecn_bytes = 0;    // mark ECT packets CE when the backlog exceeds this; <= trim_bytes
  uint16_t udp_port = 4791;  // MRC UDP destination port (wire::kDefaultUdpPort)
};

// Snapshot of one port's counters; they only grow and restart at zero on (re)attach.
struct TrimCounters {
  uint64_t packets = 0;     // packets seen
  uint64_t bytes = 0;       // their L2 bytes after trimming
  uint64_t trimmed = 0;     // MRC data packets cut to their headers
  uint64_t ce_marked = 0;   // packets that got CE
  uint64_t gso_passed = 0;  // GSO skbs passed untrimmed
  uint64_t not_mrc = 0;     // packets that are not MRC (counted in the backlog all the same)
};

// Loads a program instance configured with `cfg` and attaches it to `ifname`'s egress in netns
// `netns` (/run/netns/<netns>), creating the clsact qdisc if needed. An instance already attached
// there is replaced (counters restart). Needs root (CAP_BPF, CAP_NET_ADMIN). Errors read
// "<ifname> in <netns>: <what>: <cause>".
Status<std::string> attach_trim(const std::string& netns, const std::string& ifname,
                                const TrimConfig& cfg);

// Removes the filter (the clsact qdisc stays); the program and its maps go with it. An error when
// none is attached.
Status<std::string> detach_trim(const std::string& netns, const std::string& ifname);

// Reads the counters of the instance attached to `ifname` in `netns`; any process may call it.
Result<TrimCounters, std::string> trim_counters(const std::string& netns,
                                                const std::string& ifname);

}  // namespace mrc::nsfabric
