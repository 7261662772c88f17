// SRv6 uSID fabric model: hosts, planes, T0 leaves, T1 spines, their links, the uSID
// plan, and path enumeration (a path is a destination address). Threading: a Fabric is an
// immutable value once made; every const member may be called from any thread.
//
// Topology (the same shape as libmrc/src/io/sim/fabric.h)
// --------
// H hosts, P planes. In each plane p: one T0 per group of `hosts_per_t0` hosts (T0 index
// t = host / hosts_per_t0; the last group may be smaller) and S T1 spines. Each host has
// one NIC port per plane, cabled to T0(p, host / hpt) on that T0's port `host % hpt`
// (the host's "local index"). Every T0 of plane p is cabled to every T1 of plane p.
// Planes never meet: a packet sent on plane p only crosses plane-p switches.
//
// uSID plan (block 32 bits + 16-bit uSIDs, Linux `End flavors next-csid lblen 32 nflen 16`)
// ---------
//   node uSIDs (one per switch, unique in the whole fabric, plane-major, from 0x0001):
//     T0(p, t) = 1 + p * (T + S) + t          T = T0s per plane
//     T1(p, s) = 1 + p * (T + S) + T + s
//   they must stay <= kMaxNodeUsid (0xEFFF).
//   host uSIDs (one per host NIC port, local to its T0, like an adjacency uSID):
//     host h  = kHostUsidBase (0xF000) + h % hosts_per_t0          (hosts_per_t0 <= 4096)
//   A host port is named by the pair (its T0's node uSID, its host uSID), which is unique.
//   Globally unique 16-bit host uSIDs cannot work at the published scale (131,072 NIC
//   ports per plane > 65,535), hence the T0-local scope. Node and host ranges are
//   disjoint, so a T0's table never confuses a spine or T0 uSID with one of its hosts.
//
// Addresses (16 bytes, network order; words after the 32-bit block, 16 bits each)
// ---------
//   path via spine s:   block | T1(p,s) | T0(p,dst) | host(dst) | T0(p,dst) | 0 ...
//   direct (same T0):   block | T0(p,dst) | host(dst) | T0(p,dst) | 0 ...
//   host port address:  block | host(dst) | T0(p,dst) | 0 ...     (what the host owns)
// The sender's first hop is its own T0 (the host's route for the block on that port),
// which forwards on the first uSID. Each switch that matches its own uSID shifts the rest
// left by 16 bits (End next-csid); after the destination T0 shifts, the host uSID is the
// active one, the T0 sends it down the host's port, and the address that arrives is the
// host port address. The trailing T0 uSID is never looked up: it is an argument that
// makes the delivered address unique per host port.
//
// Paths and EVs
// -------------
// paths(src, dst, plane): one per spine (spine order) when the hosts sit under different
// T0s, the single direct path when they share one; empty for src == dst or out of range.
// EV encoding is libmrc's simulated fabric's: ev = plane << 16 | spine << 8 | k.
// paths() hands out k = 0; path_for_ev takes the spine as spine_of(ev) % S like the
// simulated fabric, and any EV of the plane maps to the direct path under one T0.
//
// Limits: 1 <= planes <= 16, 1 <= spines <= 256, 1 <= hosts_per_t0 <= 4096, hosts >= 1,
// node uSIDs <= 0xEFFF. Fabric::make checks them and returns an error string.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace mrc::srv6 {

using Ipv6 = std::array<uint8_t, 16>;  // network byte order

inline constexpr uint32_t kMaxPlanes = 16;
inline constexpr uint32_t kMaxSpines = 256;
inline constexpr uint32_t kMaxHostsPerT0 = 4096;
inline constexpr uint16_t kMaxNodeUsid = 0xEFFF;
inline constexpr uint16_t kHostUsidBase = 0xF000;
inline constexpr int kBlockBits = 32;
inline constexpr int kUsidBits = 16;
inline constexpr int kMaxUsids = 6;  // uSIDs that fit after a /32 block

// "fcbb:bbbb:1::" from 16 bytes (inet_ntop); prefix() adds "/len".
std::string format(const Ipv6& a);
std::string prefix(const Ipv6& a, int len);
// Parses "x:y::/32": a /32 IPv6 prefix with zero host bits; the block's 4 bytes on success.
Result<uint32_t, std::string> parse_block(std::string_view s);

struct FabricConfig {
  uint32_t hosts = 0;
  uint32_t planes = 0;
  uint32_t spines = 0;
  uint32_t hosts_per_t0 = 0;
  uint32_t block = 0xfcbbbbbb;     // top 32 bits of every address (fcbb:bbbb::/32)
  double host_port_gbps = 400;     // per host NIC port (one plane), Gbit/s
  double uplink_gbps = 800;        // per T0-T1 cable, Gbit/s
  std::vector<std::string> names;  // optional host names; empty or one per host
};

/// Spines a plane needs to carry a full T0's host ports at `port_gbps` each (0: the config's
/// host_port_gbps): ceil(hosts_per_t0 x port / uplink_gbps), within [1, spines]. Senders use it
/// as PathPolicy::min_active_per_plane: a plane keeps its full share while that many spines
/// still work.
uint32_t spines_for_full_t0(const FabricConfig& c, double port_gbps = 0);

enum class Tier : uint8_t { kT0, kT1 };

struct SwitchId {
  Tier tier = Tier::kT0;
  uint32_t plane = 0;
  uint32_t index = 0;  // T0 index within the plane, or spine index
  bool operator==(const SwitchId&) const = default;
};

// One cable end on a switch. Interface names (<= 15 chars, Linux IFNAMSIZ - 1; unique
// across the whole fabric, so veth pairs can be made in one namespace):
//   T0(p,t) to T1 s:  "p{p}t{t}-s{s}"     T1(p,s) to T0 t:  "p{p}s{s}-t{t}"
//   T0(p,t) to host:  "p{p}t{t}-h{i}"     (i = host's local index)
//   host h on plane p: "p{p}h{h}"
// Link-local next hops: on every cable the lower tier (host, or T0 on an uplink) is
// fe80::1 and the upper tier (T0 on a host link, or T1) is fe80::2.
struct Port {
  std::string ifname;      // this switch's interface
  std::string peer_if;     // the other end's interface
  std::string peer_ll;     // the other end's link-local address ("fe80::1" / "fe80::2")
  uint16_t peer_usid = 0;  // uSID this port leads to (peer switch node uSID or host uSID)
  bool to_host = false;
  uint32_t peer = 0;  // host id, T0 index or spine index
};

struct Path {
  uint32_t plane = 0;
  uint32_t spine = 0;   // meaningless when direct
  bool direct = false;  // src and dst share a T0: no spine
  uint32_t ev = 0;
  Ipv6 dst{};  // destination address that selects this path
};

class Fabric {
 public:
  static Result<Fabric, std::string> make(FabricConfig cfg);

  const FabricConfig& config() const { return cfg_; }
  uint32_t t0s() const { return t0s_; }  // T0s per plane
  uint32_t switches() const { return cfg_.planes * (t0s_ + cfg_.spines); }
  uint32_t t0_of(uint32_t host) const { return host / cfg_.hosts_per_t0; }
  uint32_t local_index(uint32_t host) const { return host % cfg_.hosts_per_t0; }
  uint32_t hosts_under(uint32_t t0) const;  // the last T0 may hold fewer

  uint16_t t0_usid(uint32_t plane, uint32_t t0) const;
  uint16_t t1_usid(uint32_t plane, uint32_t spine) const;
  uint16_t usid(SwitchId s) const;
  uint16_t host_usid(uint32_t host) const;  // T0-local
  // The switch owning a node uSID (false if none); host uSIDs are not nodes.
  bool owner(uint16_t usid, SwitchId* out) const;

  std::string switch_name(SwitchId s) const;  // "t0p{p}-{t}" / "t1p{p}-{s}"
  std::string host_ifname(uint32_t host, uint32_t plane) const;
  std::vector<Port> ports(SwitchId s) const;  // uplinks/downlinks, in index order

  // block | usids... | 0, at most kMaxUsids.
  Ipv6 address(const std::vector<uint16_t>& usids) const;
  Ipv6 host_address(uint32_t host, uint32_t plane) const;
  // The host whose port address (any plane) `a` is: its first 64 bits are host_address's.
  // Nullopt for anything else (a switch's, an outsider's). Decoded, not searched.
  std::optional<uint32_t> host_of(const Ipv6& a) const;
  // Prefix "block:usid::/48" a switch matches for a uSID.
  std::string usid_prefix(uint16_t usid) const;

  std::vector<Path> paths(uint32_t src, uint32_t dst, uint32_t plane) const;
  Result<Path, std::string> path_for_ev(uint32_t src, uint32_t dst, uint32_t ev) const;

  static constexpr uint32_t ev(uint32_t plane, uint32_t spine, uint32_t k) {
    return plane << 16 | (spine & 0xff) << 8 | (k & 0xff);
  }
  static constexpr uint32_t plane_of(uint32_t ev) { return ev >> 16; }
  static constexpr uint32_t spine_of(uint32_t ev) { return (ev >> 8) & 0xff; }
  static constexpr uint32_t salt_of(uint32_t ev) { return ev & 0xff; }

  // The uSID at word i after the block (0 = the active one).
  static uint16_t usid_at(const Ipv6& a, int i);
  // Next-csid shift: drop the active uSID, move the rest left, fill with zero.
  static Ipv6 shift(const Ipv6& a);

 private:
  explicit Fabric(FabricConfig cfg);
  Path make_path(uint32_t dst, uint32_t plane, uint32_t spine, bool direct, uint32_t k) const;

  FabricConfig cfg_;
  uint32_t t0s_ = 0;
};

}  // namespace mrc::srv6
