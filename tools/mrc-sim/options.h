// mrc-sim's command line: the fabric's shape, the workload, the transports, faults and
// outputs, checked into one Options. Threading: free functions.
//
// Defaults: the published shape scaled down: 4 planes, hosts_per_t0 = min(hosts, 8), as many
// spines as make the T1 layer non-blocking (hosts_per_t0 x host port / uplink), 10 Gb/s
// ports and uplinks, 1 us per hop, 1 MiB switch buffers with ECN at 64 KiB and trimming at
// 128 KiB.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pattern.h"
#include "transport.h"

namespace mrc::msim {

struct Options {
  // Fabric.
  uint32_t hosts = 16;
  uint16_t planes = 4;
  uint32_t spines = 0;        // 0: non-blocking for hosts_per_t0
  uint32_t hosts_per_t0 = 0;  // 0: min(hosts, 8)
  double host_gbps = 10;      // one NIC port (one plane)
  double uplink_gbps = 0;     // one T0-T1 link; 0: host_gbps
  double host_latency_us = 1, uplink_latency_us = 1;
  uint64_t buffer_bytes = 1 << 20, ecn_bytes = 64 << 10, trim_bytes = 128 << 10;
  // Workload.
  Pattern pattern = Pattern::kPermutation;
  uint64_t bytes = 1 << 20;
  uint64_t msg_bytes = 1 << 20;
  uint32_t slices = 8;
  uint32_t incast_senders = 8;
  // Transports, each run in turn on the same fabric, workload and seed.
  std::vector<Transport> transports = {Transport::kMrc};
  uint32_t qps_per_conn = 1;
  uint32_t evs_per_plane = 16, backups_per_plane = 4;
  uint32_t depth = 16;     // WRITEs in flight per QP
  uint32_t window = 0;     // flows in flight per host (0: all at once)
  bool on_demand = false;  // QPs made as flows open, destroyed when done (needs a window)
  uint32_t mtu = 4096;
  uint32_t mpr = 256;          // max_psn_range; the engine's receive window is sized to it
  uint8_t timeout = 10;        // ack timeout exponent: 1.024 us x 2^10 ~ 1 ms
  double base_rtt_us = 0;      // the engines' base RTT (NSCC), us; 0: learned; < 0: base_rtt()
  bool delay_decrease = true;  // NSCC's delay-based decrease (NsccConfig::delay_decrease)
  // Faults ('TIME NAME ARGS', faults.h) and the run.
  std::vector<std::string> faults;
  uint64_t seed = 1;
  double max_time_s = 0;  // virtual; 0: 100 x ideal + 10 ms
  // Outputs.
  std::string json, csv, png;  // "-" for json: stdout
  double interval_s = 0;       // goodput sampling; 0: ideal / 100
  bool quiet = false;
  bool progress = true;
  bool trace = false;  // EV state changes and QPs that took an RTO, on stderr (traffic.h)

  uint64_t host_bps() const { return static_cast<uint64_t>(host_gbps * 1e9); }
  uint64_t uplink_bps() const {
    return static_cast<uint64_t>((uplink_gbps > 0 ? uplink_gbps : host_gbps) * 1e9);
  }
};

enum class ParseOutcome : uint8_t { kRun, kHelp, kBad };
/// Parses argv (CLI11) and fills in the derived defaults, then check(). kHelp: the help was
/// printed; kBad: `err` names the problem (not yet printed).
ParseOutcome parse_cli(int argc, const char* const* argv, Options& o, std::string& err);
/// Checks the combination; "" when fine, else what is wrong.
std::string check(const Options& o);
/// "512K", "4M", "1G", "1KiB", "65536": bytes (K = 1024). false when not a size.
bool parse_size(const std::string& s, uint64_t& out);

}  // namespace mrc::msim
