// Host configuration of the UDP datapath, read from one place by every front end (libmrc's
// OCP API, the verbs shim, the NCCL plugin, mrc-perf). Threading: free functions, no state.
//
// Where it comes from, later wins:
//   1. defaults (below);
//   2. the JSON file named by $MRC_CONFIG, else /etc/mrc/mrc.json if it exists;
//   3. environment variables, one per field: MRC_<FIELD in upper case>
//      (MRC_PORT=4792, MRC_PLANES=fd00::1,fd00:1::1, MRC_GSO=0, ...).
//
// The file (every field optional; unknown fields are an error, so typos are caught):
//   {
//     "path_mode": "srv6",           // "direct" | "srv6" | "ecmp" (udp_driver.h PathMode)
//     "fabric": "/etc/mrc/fabric.json", // srv6: the fabric description (srv6/config.h)
//     "host": 0,                     // srv6: this host's id in the fabric
//     "planes": ["fd00::1", ...],    // local address per plane; with a fabric and a host
//                                    // they default to the host's port addresses; direct
//                                    // and ecmp also take IPv4 ("10.0.0.1": UDP/IPv4 on
//                                    // that plane, bound as ::ffff:10.0.0.1, udp_driver.h)
//     "port": 4791,                  // UDP port every plane listens on (and peers use; planes
//                                    // that share an address take port + 1, + 2, ...); 0: an
//                                    // ephemeral port per plane, for several processes on one
//                                    // host (peers learn them in the NCCL plugin's handshake)
//     "mtu": 0,                      // payload bytes per packet: 256..8192, a power of 2; 0
//                                    // (default): the largest every plane's link carries
//                                    // (8192 on 9000-byte links, 1024 on 1500: link_mtu.h)
//     "netns": "",                   // make the sockets in this network namespace
//     "gso": true, "gro": true,      // UDP_SEGMENT / UDP_GRO
//     "zero_udp_checksum": false,    // needed where switches trim (turns GSO off); MRC's
//                                    // payload CRC is on exactly when this is (one checksum)
//     "busy_poll": false,            // progress thread spins instead of sleeping
//     "poller_progress": false,      // a thread polling for completions receives and
//                                    // answers itself (UdpDriver::poll_progress)
//     "poller_grace_us": 200,        // with poller_progress: how long the progress thread
//                                    // leaves the sockets to pollers after their last poll,
//                                    // 0..1000000 (UdpConfig::poller_grace)
//     "ack_rides": true,             // an ACK rides on a data packet going back, and in
//                                    // a ping-pong waits up to 32 us for the reply
//                                    // (engine.h EngineConfig::ack_rides)
//     "spin_us": 50,                 // after a round with work the progress threads poll
//                                    // without sleeping this long, 0..10000; absent: 50
//                                    // with 8 CPUs or more, else 0 (UdpConfig::spin)
//     "ecmp_source_ports": 16,       // ecmp: source ports (sockets) per plane
//     "peers": [{"planes": ["fd00::2", "fd00:1::2"]}, ...],
//                                    // direct/ecmp: other hosts' address per plane (one
//                                    // per plane, plane order, same IP version as ours):
//                                    // a peer known by any one of them (a verbs GID) is sent
//                                    // to on every plane at once. MRC_PEERS="a,b;c,d"
//     "peer_query": true,            // direct/ecmp: a peer not in "peers" is asked for its
//                                    // plane addresses on the wire (peer_addresses.h)
//     "nic_gbps": 0,                 // all plane ports together; 0 = fabric's port rate
//                                    //   x planes, or the engine's default
//     "base_rtt_us": 0,              // unloaded RTT for congestion control; 0 = learn
//                                    //   (engine/policy.h BaseRttFilter; leave it)
//     "min_base_rtt_us": 100,        // floor of a learned one (engine.h EngineConfig)
//     "progress_nice": -10,          // the progress threads' nice value (udp_driver.h);
//                                    // best effort, needs CAP_SYS_NICE below 0
//     "progress_threads": 0          // progress threads, 1..16, at most one per plane
//                                    // (udp_driver.h); 0: kDefaultProgressThreads
//   }
// Errors name the source and the field: "MRC_PORT: must be 0..65535, got 70000",
// "/etc/mrc/mrc.json: /planes/1: not an IPv6 or IPv4 address: fd00::zz",
// "/etc/mrc/mrc.json: /peers/0/planes: 1 addresses for 2 planes (...)".
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "mrc/common/result.h"
#include "mrc/io/udp/udp_driver.h"

namespace mrc::io {

struct HostConfig {
  UdpConfig udp;        // ready for UdpDriver::create
  uint32_t mtu = 0;     // QpAttr::mtu front ends use; 0: UdpDriver::payload_mtu picks
  std::string sources;  // what was read, for logs: "defaults, /etc/mrc/mrc.json, MRC_GSO"
};

/// Reads an environment variable; returns nullopt when unset. Tests pass a map.
using Getenv = std::function<std::optional<std::string>(const char*)>;
std::optional<std::string> process_env(const char* name);

/// Defaults, then the file, then the environment, validated (a fabric file is loaded).
Result<HostConfig, std::string> load_host_config(const Getenv& env = process_env);

/// The same from a JSON text (named `source` in errors), without file lookup; env after it.
Result<HostConfig, std::string> parse_host_config(const std::string& json, const std::string& source,
                                                  const Getenv& env);

}  // namespace mrc::io
