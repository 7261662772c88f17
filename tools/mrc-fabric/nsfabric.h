// The namespace fabric: srv6::Fabric built from Linux network namespaces and veth pairs on
// one machine, with faults. Threading: an NsFabric is a handle (the fabric lives in the
// kernel and in its state directory); its const members may run on any thread. apply()
// calls, also from other processes (`mrc-fabric fault`), are serialized by a lock file.
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); runs ip, tc, nft and ethtool.
//
// What up() builds, for prefix P:
//   namespaces   P-h<H> per host, P-t0p<P>-<T> per T0, P-t1p<P>-<S> per spine (fabric.h
//                switch_name); every cable a veth pair with fabric.h's interface names,
//                MTU Options::mtu, made directly into its two namespaces.
//   sysctls      all: accept_dad=0 (addresses usable at once), addr_gen_mode=1 (only the
//                plan's link-locals), keep_addr_on_down=1; every port's neighbour
//                retrans_time_ms kNeighRetransMs (IPv6, IPv4); switches also forwarding=1,
//                seg6_enabled=1 (all and every interface), fib_multipath_hash_policy=1.
//   routes       export_linux.h plans through srv6/netlink.h (or, with use_netlink=false,
//                through its ip commands): hosts host_plan (per-plane tables); switches
//                switch_plan with plain_routes (ECMP to every host port address, for TCP
//                and MPTCP baselines) and the End route on kEndDev (a port going down must
//                not take the End route with it).
//   rate         with Options::shape, tbf on both ends of every host link (egress from host
//                and from its T0) at the fabric's host_port_gbps, burst kTbfBurstBytes (so a
//                64 KiB GSO packet passes whole), limit kTbfLimitBytes.
//   gso          Options::gso=false turns tx-udp-segmentation off on hosts' ports, so GSO
//                sends are cut into packets before they enter the fabric.
//   mgmt         with Options::mgmt, an IPv4 management network beside the fabric, for what
//                talks TCP over IPv4 out of band (perftest's ib_write_bw, ibv_rc_pingpong):
//                namespace P-mgmt (lo up, IPv6 off) with Linux bridges br0..br<N> (up, at
//                most kMgmtHostsPerBridge hosts each; br<K> joins br0 through the veth pair
//                br<K>-up / br<K>-dn), and per host a veth pair: mgmt0 in P-h<H> (IPv6 off,
//                up, mgmt_address(H)/16, no other route) and h<H> in P-mgmt, a port of
//                br<H / kMgmtHostsPerBridge>. No fault touches it; status() shows it.
//   host configs state_dir(P)/hosts/h<H>.json per host (host_config()): libmrc's host
//                configuration (mrc/io/config.h) with path_mode "srv6", the state
//                directory's fabric.json and host H, so that
//                  ip netns exec P-h<H> env MRC_CONFIG=<that file> <program>
//                runs a program as host H on its port addresses.
//   state        /run/mrc-fabric/P/: fabric.json (srv6::dump), state.json (options, active
//                faults, flapper pids), hosts/, lock.
//
// Faults (fault.h). Linux deletes the routes through an interface that goes admin down, so
// `up` re-applies the plans of the namespaces at both ends of every link it restores: first
// every end up, then the plans, then (once no address is tentative) the ends' neighbour
// entries flushed, so that traffic sent through the restore does not wait out a lost
// neighbour solicitation (1 s).
// A link stays down while any active `down` covers it (a switch or the link itself).
// blackhole and loss are nftables rules in table inet P_fault of the namespaces concerned,
// rewritten as a whole from the active faults at each change; a host's side of a link drops
// in its T0's forward hook (iifname), not in the host's output (the sender would see EPERM).
// degrade replaces the root qdisc of both ends with tbf at the rate (0 restores the build's).
// delay, corrupt and reorder attach the gray eBPF program (gray.h) to both ends, and delay and
// reorder start a delay line per end (delay_line.h: a veth pair and a forked process named
// mrcf-delay, pid in state.json, stopped by the repair and by down()). flap forks the calling
// process (no exec; the child is named mrcf-flap, pid in state.json, and closes every
// inherited file descriptor) to toggle the link until unflap or down() stops it; it also
// ends by itself when the namespaces are gone. The child runs only this library's code
// (netlink, threads of its own), so the fork is safe as long as no other thread of the
// caller is inside this library at that moment. A flapping link cannot be taken down, nor
// a down one flapped, until unflap / up.
//
// down() removes the flapper and delay line processes (by recorded pid, after checking their
// name), every namespace whose name is one of this fabric's (P-h<N>, P-t0p<N>-<N>,
// P-t1p<N>-<N>, P-mgmt, whether or not the state says so) and the state directory. It is
// idempotent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fault.h"
#include "mrc/common/netns.h"  // mrc::in_netns: run a function (e.g. make a socket) inside a namespace
#include "mrc/common/result.h"
#include "srv6/export_linux.h"
#include "srv6/fabric.h"

namespace mrc::nsfabric {

// The End route's device in every switch namespace: one end of a veth pair (peer
// "srv6-peer") that no fault takes down.
inline constexpr char kEndDev[] = "srv6";
// The plan options of every switch namespace (export_linux.h); hosts get srv6::host_plan.
inline const srv6::SwitchPlanOptions kSwitchPlan = {.plain_routes = true, .end_dev = kEndDev};

inline constexpr uint32_t kTbfBurstBytes = 128 * 1024;
inline constexpr uint32_t kTbfLimitBytes = 512 * 1024;
// Every fabric port's neighbour retransmit time (Linux's default 1000): a solicitation lost to a
// full port queue costs a next hop this long, not a second.
inline constexpr int kNeighRetransMs = 100;
// kMaxShapedGbps (fault.h): up() refuses faster ports while shaping.

// The management network: host H is 10.255.<H / 250>.<H % 250 + 1>/16 on its mgmt0
// (h0 10.255.0.1, h249 10.255.0.250, h250 10.255.1.1), so at most kMaxMgmtHosts hosts.
inline constexpr char kMgmtDev[] = "mgmt0";
inline constexpr int kMgmtPrefixLen = 16;
inline constexpr uint32_t kMaxMgmtHosts = 256 * 250;
// A Linux bridge takes at most 1023 ports, so hosts are spread over several bridges.
inline constexpr uint32_t kMgmtHostsPerBridge = 512;
// Host H's management address, dotted IPv4 without prefix length ("10.255.0.1"); the same
// in every fabric (each has its own P-mgmt). H < kMaxMgmtHosts.
std::string mgmt_address(uint32_t host);

struct Options {
  std::string prefix = "mrcf";  // [A-Za-z][A-Za-z0-9_]*, at most 32 characters
  int mtu = 9000;               // every veth, 1280..65535
  bool gso = true;              // false: tx-udp-segmentation off on host ports
  bool use_netlink = true;      // false: program with the ip commands (initial routes only)
  bool shape = true;            // tbf on host links at the fabric's host_port_gbps
  bool mgmt = true;             // the IPv4 management network (P-mgmt, mgmt0 in every host)
};

// The state directory of a prefix: /run/mrc-fabric/<prefix>.
std::string state_dir(const std::string& prefix);

class NsFabric {
 public:
  // Builds the fabric. Fails if one with this prefix exists (state or namespaces); on any
  // failure removes what it made and returns the error.
  static Result<NsFabric, std::string> up(const srv6::Fabric& f, const Options& o);
  // Reopens a fabric made by up() in this or another process.
  static Result<NsFabric, std::string> attach(const std::string& prefix);
  // Removes the fabric of `prefix`, also a half-made one. Idempotent.
  static Status<std::string> down(const std::string& prefix);
  Status<std::string> down() const { return down(opts_.prefix); }

  const srv6::Fabric& fabric() const { return fabric_; }
  const Options& options() const { return opts_; }
  std::string host_netns(uint32_t host) const;  // name under /run/netns
  std::string switch_netns(srv6::SwitchId s) const;
  std::string mgmt_netns() const;  // P-mgmt; exists only with Options::mgmt
  // Host H's MRC configuration file: state_dir(P)/hosts/h<H>.json (for $MRC_CONFIG).
  std::string host_config(uint32_t host) const;

  // Validates the fault's target against the fabric, applies it, records it.
  Status<std::string> apply(const Fault& f) const;

  // Human-readable: the fabric, active faults, every namespace's ports (up/down, tbf
  // counters) and fault-table drop counters; for hosts also the management address and
  // the configuration file.
  std::string status() const;

  // The pids of the delay lines (delay_line.h) the state records, every end of every link with
  // a delay or reorder; empty when the state cannot be read.
  std::vector<int> delay_lines() const;

 private:
  NsFabric(srv6::Fabric f, Options o) : fabric_(std::move(f)), opts_(std::move(o)) {}

  srv6::Fabric fabric_;
  Options opts_;
};

}  // namespace mrc::nsfabric
