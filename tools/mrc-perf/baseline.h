// Reference transports for mrc-perf (TCP, MPTCP, a raw UDP ceiling) between two namespaces.
// Threading: each run_* blocks its calling thread for the run and calls on_tick from it; runs
// must not overlap on the same port. No shared state between calls.
//
// Every run measures from a client netns to a server netns that hold one IPv6 address per
// plane. TCP and MPTCP run iperf3 (started as child processes, killed and reaped by pid on
// every exit path); the UDP ceiling is an in-process GSO sender and GRO receiver. Needs root
// (setns, ip netns exec). Errors name the problem ("iperf3 not found: install iperf3",
// "netns mrcf-h9 does not exist"); nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mrc/common/result.h"

namespace mrc::perf {

struct Sample {
  double t_s;    // end of the interval, seconds since the run started
  double gbps;   // goodput over the interval, Gbit/s (10^9 bit/s)
  double dur_s;  // length of the interval, s: intervals tile the run, so the samples'
                 // duration-weighted mean is the bytes moved / the time (report.h)
};

struct BaselineResult {
  std::vector<Sample> samples;  // one per interval, in time order
  double mean_gbps = 0;         // goodput over the whole run, Gbit/s
  std::string detail;           // one human-readable line: what ran and what it saw
  int subflows = 0;             // MPTCP: subflows of the busiest connection, seen mid-run
};

struct BaselineSpec {
  std::string client_netns, server_netns;               // names under /run/netns
  std::vector<std::string> client_addrs, server_addrs;  // one IPv6 per plane (index = plane)
  double duration_s = 10;   // iperf3 runs: a whole number of seconds (iperf3 -t is integral)
  double interval_s = 0.1;  // sample period; iperf3's minimum is 0.1
  int streams = 1;          // parallel TCP connections (iperf3 -P) or UDP sender threads
  uint16_t port = 5201;     // server port (TCP or UDP)
  // UDP payload bytes per GSO segment. 0 (default): what an MRC data packet carries on the
  // client's plane-0 link, so that the ceiling compares like with like: the payload MRC picks
  // for that link's MTU (io/udp/link_mtu.h payload_for_link: 8192 on 9000-byte links, 1024 on
  // 1500) plus its 72-byte data header. Else as given; the path MTU must hold it plus 48 B of
  // IPv6 + UDP headers.
  uint32_t udp_segment_bytes = 0;
  // "App memory" of the UDP ceiling: each sender reads its sends in turn from this many bytes
  // (one 64 KiB send after the next) and the receiver lands its GRO datagrams in turn into as
  // many (64 KiB each). 0 (default): one send's worth and kBatch receive buffers, reused (in
  // cache: the kernel's copies at their fastest). MRC reads each message from, and lands it
  // in, registered memory (mrc-perf: 2 x outstanding x size on each side, 16 MiB by default,
  // mostly out of cache); as many bytes here make the ceiling's kernel copies touch as cold
  // memory, with no copy of MRC's own. Rounded up to whole sends / receive buffers.
  size_t udp_app_bytes = 0;
  // Called at each interval boundary with the elapsed time (s), so a caller can apply faults
  // on schedule. May be empty; must not throw. For iperf3 runs the clock starts when the
  // client is started, a few ms before iperf3's own interval clock.
  std::function<void(double t_s)> on_tick;
};

// iperf3 TCP from client plane 0 to server plane 0, measured at the receiver (the server's own
// intervals), as MRC is.
Result<BaselineResult, std::string> run_tcp(const BaselineSpec& spec);

// iperf3 under `mptcpize run` on both sides, with the in-kernel path manager set up for a
// subflow per plane: both namespaces get net.mptcp.enabled=1 and limits of 8 subflows / 8
// accepted ADD_ADDRs; their MPTCP endpoints are replaced by the client plane addresses as
// `subflow` and the server plane addresses as `signal` (each with its device), and flushed
// again at the end. Fails if the connection was not MPTCP. `detail` lists the subflows and the
// bytes each client plane sent.
Result<BaselineResult, std::string> run_mptcp(const BaselineSpec& spec);

// The UDP ceiling of the path: `streams` threads in the client netns send 64 KiB GSO batches
// (UDP_SEGMENT of udp_segment_bytes, or MRC's packet for the link: BaselineSpec) as fast as
// they can from plane 0 to the server's plane 0;
// a thread in the server netns receives with UDP_GRO and recvmmsg and counts UDP payload
// bytes. Samples are the received goodput; `detail` gives segments and packets per second.
Result<BaselineResult, std::string> run_udp_ceiling(const BaselineSpec& spec);

namespace detail {

// Checks what every run needs: both netns exist, at least one IPv6 address per side (all
// parseable), duration_s > 0, 0 < interval_s <= duration_s, streams in 1..64.
Status<std::string> check_spec(const BaselineSpec& spec);

// The receiver's goodput from an iperf3 client's -J output with --get-server-output (the
// server run with -J -i): its intervals (zero-length ones dropped) and its bytes over the time
// they cover. An error names what is missing.
Result<BaselineResult, std::string> parse_iperf3(const std::string& client_json);

}  // namespace detail
}  // namespace mrc::perf
