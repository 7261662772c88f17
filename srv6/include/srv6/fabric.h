// SRv6 uSID fabric model: hosts, planes, T0 leaves, T1 spines, their links, the uSID
// plan, and path enumeration (a path is a destination address). Threading: a Fabric is an
// immutable value once made; every const member may be called from any thread.
//
// Two ways to make one, the same model afterwards (every member below works on either):
//   - generated (Fabric::make(FabricConfig)): the project's own plan from a few counts, below;
//   - explicit (Fabric::make(FabricSpec)): an existing fabric as configured: per plane the
//     locator block and uSID length, every switch's uSID and name, every host's T0 and port
//     address per plane. The generated plan written out explicitly (config.h dump_explicit)
//     makes an equal Fabric: same addresses, paths and exports.
//
// Topology (the same shape as mrc/io/sim/fabric.h)
// --------
// H hosts, P planes. In each plane p: T T0s and S T1 spines (the same T and S in every plane).
// Each host has one NIC port per plane, cabled to T0(p, t0_of(host)) (the same T0 index in
// every plane) on that T0's port local_index(host). Every T0 of plane p is cabled to every T1
// of plane p. Planes never meet: a packet sent on plane p only crosses plane-p switches.
// Generated: t0_of(h) = h / hosts_per_t0, local_index(h) = h % hosts_per_t0 (the last T0 may
// hold fewer). Explicit: each host names its T0; its local index is its rank among that T0's
// hosts in host order.
//
// Locator format (per plane; Linux `End flavors next-csid lblen L nflen N`)
// --------------
// An address is block (L bits) | uSID (N bits) | uSID | ... ; a switch matches the prefix
// block|own uSID (L + N bits), and its End shifts everything after its uSID left by N bits,
// filling with zeros. Linux accepts L and N multiples of 8 in 8..120 with L + N <= 128
// (kernel-checked by tests/srv6/netlink_test.cc); this project also needs N <= 32.
// Generated fabrics use L = 32 (block fcbb:bbbb::/32 by default), N = 16.
//
// Host port addresses and how a T0 delivers them
// ----------------------------------------------
// A host port address A sits in its plane's block. Its first uSID u (the N bits after the
// block) says how its T0 reaches it:
//   - host-uSID form (u is not its T0's uSID): u is a T0-local "host uSID", like an adjacency
//     uSID: unique among the hosts under that T0, never a switch's uSID in the plane, not 0.
//     The T0 routes block|u (L + N bits) down the host's port. Generated fabrics:
//       A = block | host uSID | T0 uSID | 0 ...   host uSID = kHostUsidBase + local index
//     (globally unique 16-bit host uSIDs cannot work at the published scale: 131,072 NIC
//     ports per plane > 65,535; node uSIDs stay <= kMaxNodeUsid, below kHostUsidBase).
//   - locator form (u is its T0's uSID: A lies in the T0's own locator, e.g.
//     fcbb:bbbb:100:7:: under T0 uSID 0x100): the T0 routes A/128 down the host's port; the
//     longest match wins over the T0's own End route. A needs bits after the T0's uSID.
// Every host port address is unique in the fabric.
//
// Paths (addresses that pick a spine; a path delivers exactly A)
// -----
//   via spine s:          block | T1(p,s) | [T0(p,dst)] | A's bits after its block ...
//   direct (same T0):     block | [T0(p,dst)] | A's bits after its block ...
// [T0] is left out in the locator form (A already starts with it). The sender's first hop is
// its own T0 (the host's route for the block on that port), which forwards on the first
// uSID; each switch that matches its own uSID shifts (End next-csid); after the last shift
// the address is A and the T0 sends it down. So A's last (inserted uSIDs x N) bits must be 0
// (2 uSIDs of room in the host-uSID form, 1 in the locator form); explicit fabrics are
// checked for it. In the generated plan (32/16): T1 | T0 | host | T0, the trailing T0 is an
// argument that makes the delivered address unique per host port.
//
// Paths and EVs
// -------------
// paths(src, dst, plane): one per spine (spine order) when the hosts sit under different
// T0s, the single direct path when they share one; empty for src == dst or out of range.
// EV encoding is libmrc's simulated fabric's: ev = plane << 16 | spine << 8 | k.
// paths() hands out k = 0; path_for_ev takes the spine as spine_of(ev) % S like the
// simulated fabric, and any EV of the plane maps to the direct path under one T0.
//
// Limits: 1 <= planes <= 16, 1 <= spines <= 256, 1 <= hosts under one T0 <= 4096, hosts >= 1,
// interface names <= 15 characters. Generated: node uSIDs <= 0xEFFF. Explicit: uSIDs are
// 1..2^N - 1, unique among the switches of a plane. Fabric::make checks them and returns an
// error string that starts with the field ("planes/1/t1/3/usid: duplicate uSID 0x0103 (also
// t1 2)"; config.h adds the leading '/').
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mrc/common/result.h"

namespace mrc::srv6 {

using Ipv6 = std::array<uint8_t, 16>;  // network byte order

inline constexpr uint32_t kMaxPlanes = 16;
inline constexpr uint32_t kMaxSpines = 256;
inline constexpr uint32_t kMaxHostsPerT0 = 4096;
inline constexpr uint16_t kMaxNodeUsid = 0xEFFF;
inline constexpr uint16_t kHostUsidBase = 0xF000;
inline constexpr int kBlockBits = 32;  // generated plan
inline constexpr int kUsidBits = 16;   // generated plan
inline constexpr int kMaxUsidBits = 32;

// "fcbb:bbbb:1::" from 16 bytes (inet_ntop); prefix() adds "/len".
std::string format(const Ipv6& a);
std::string prefix(const Ipv6& a, int len);
// Parses "x:y::/32": a /32 IPv6 prefix with zero host bits; the block's 4 bytes on success.
Result<uint32_t, std::string> parse_block(std::string_view s);
// Parses "x:y::/L" with zero bits past L (any L in 0..128).
Result<std::pair<Ipv6, int>, std::string> parse_prefix(std::string_view s);
// Whether Linux's next-csid accepts these locator-block and node-function lengths (bits):
// both multiples of 8 in 8..120, sum <= 128. "" or why not.
std::string csid_lengths_error(int lblen, int nflen);

struct FabricConfig {
  uint32_t hosts = 0;
  uint32_t planes = 0;
  uint32_t spines = 0;
  uint32_t hosts_per_t0 = 0;       // explicit fabrics: the most hosts under one T0
  uint32_t block = 0xfcbbbbbb;     // top 32 bits of every address (fcbb:bbbb::/32);
                                   // explicit fabrics: plane 0's block's first 32 bits
  double host_port_gbps = 400;     // per host NIC port (one plane), Gbit/s
  double uplink_gbps = 800;        // per T0-T1 cable, Gbit/s
  std::vector<std::string> names;  // optional host names; empty or one per host
};

// An existing fabric as configured (the explicit form of config.h).
struct SwitchSpec {
  std::string name;   // "" : the structural name (switch_name); else [A-Za-z0-9_.:-]{1,64}
  uint32_t usid = 0;  // 1 .. 2^usid_bits - 1, unique among the plane's switches
};
struct PlaneSpec {
  Ipv6 block{};        // locator block, bits past block_bits zero
  int block_bits = 0;  // lblen
  int usid_bits = 16;  // nflen
  std::vector<SwitchSpec> t0s, t1s;
};
struct HostSpec {
  std::string name;             // "" or unique among hosts ([A-Za-z0-9_.:-]{1,64})
  uint32_t t0 = 0;              // index into every plane's t0s
  std::vector<Ipv6> addresses;  // one per plane
};
struct FabricSpec {
  std::vector<PlaneSpec> planes;
  std::vector<HostSpec> hosts;
  double host_port_gbps = 400;
  double uplink_gbps = 800;
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
  uint32_t peer_usid = 0;  // a switch peer's node uSID; a host's first uSID after the block
  bool to_host = false;
  uint32_t peer = 0;  // host id, T0 index or spine index
  // What this switch routes through the port: a switch peer's uSID prefix (block|uSID), a
  // host's delivery prefix (block|host uSID, or its address /128 in the locator form).
  Ipv6 route{};
  int route_len = 0;
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
  static Result<Fabric, std::string> make(const FabricSpec& spec);
  /// The same fabric with other port speeds (both forms).
  Fabric with_speeds(double host_port_gbps, double uplink_gbps) const;

  const FabricConfig& config() const { return cfg_; }
  bool is_explicit() const { return x_ != nullptr; }
  uint32_t t0s() const { return t0s_; }  // T0s per plane
  uint32_t switches() const { return cfg_.planes * (t0s_ + cfg_.spines); }
  uint32_t t0_of(uint32_t host) const;
  uint32_t local_index(uint32_t host) const;
  uint32_t hosts_under(uint32_t t0) const;  // the last T0 may hold fewer
  uint32_t host_under(uint32_t t0, uint32_t i) const;  // the host at local index i

  // Locator format of a plane.
  Ipv6 block(uint32_t plane) const;
  int block_bits(uint32_t plane) const;
  int usid_bits(uint32_t plane) const;

  uint32_t t0_usid(uint32_t plane, uint32_t t0) const;
  uint32_t t1_usid(uint32_t plane, uint32_t spine) const;
  uint32_t usid(SwitchId s) const;
  // Generated: the T0-local host uSID. Explicit: the first uSID of the host's plane-0 address.
  uint32_t host_usid(uint32_t host) const;
  // The switch of `plane` owning a node uSID (false if none); host uSIDs are not nodes.
  bool owner(uint32_t plane, uint32_t usid, SwitchId* out) const;

  std::string switch_name(SwitchId s) const;   // "t0p{p}-{t}" / "t1p{p}-{s}" (namespaces)
  std::string switch_label(SwitchId s) const;  // the explicit name, else switch_name
  std::string host_ifname(uint32_t host, uint32_t plane) const;
  std::vector<Port> ports(SwitchId s) const;  // uplinks/downlinks, in index order

  // block(plane) | usids... | 0; uSIDs past the address's end are left out.
  Ipv6 address(uint32_t plane, const std::vector<uint32_t>& usids) const;
  Ipv6 host_address(uint32_t host, uint32_t plane) const;
  // The delivery prefix length of a host port on its T0 (see above) and the length of the
  // prefix that holds every non-zero bit of the address, rounded up to whole uSIDs (plain
  // routes to the host port; generated: 64).
  int host_route_len(uint32_t host, uint32_t plane) const;
  int host_prefix_len(uint32_t host, uint32_t plane) const;
  // The host whose port address (any plane) `a` is, or whose 64-bit prefix `a` shares when
  // that address has nothing past its first 64 bits (a GID's interface id does not matter).
  // Nullopt for anything else (a switch's, an outsider's).
  std::optional<uint32_t> host_of(const Ipv6& a) const;
  // Prefix "block|usid/(L+N)" a switch of `plane` matches for a uSID.
  std::string usid_prefix(uint32_t plane, uint32_t usid) const;

  std::vector<Path> paths(uint32_t src, uint32_t dst, uint32_t plane) const;
  Result<Path, std::string> path_for_ev(uint32_t src, uint32_t dst, uint32_t ev) const;

  static constexpr uint32_t ev(uint32_t plane, uint32_t spine, uint32_t k) {
    return plane << 16 | (spine & 0xff) << 8 | (k & 0xff);
  }
  static constexpr uint32_t plane_of(uint32_t ev) { return ev >> 16; }
  static constexpr uint32_t spine_of(uint32_t ev) { return (ev >> 8) & 0xff; }
  static constexpr uint32_t salt_of(uint32_t ev) { return ev & 0xff; }

  // The uSID at word i after the plane's block (0 = the active one); 0 past the end.
  uint32_t usid_at(uint32_t plane, const Ipv6& a, int i) const;
  // Next-csid shift on a plane's switch: drop the active uSID, move the rest left, fill with
  // zero; the block stays.
  Ipv6 shift(uint32_t plane, const Ipv6& a) const;
  // Whether `a` lies in the plane's block.
  bool in_block(uint32_t plane, const Ipv6& a) const;

  struct Tables;  // explicit fabrics (fabric.cc)

 private:
  Fabric(FabricConfig cfg, std::shared_ptr<const Tables> x);
  Path make_path(uint32_t dst, uint32_t plane, uint32_t spine, bool direct, uint32_t k) const;

  FabricConfig cfg_;
  uint32_t t0s_ = 0;
  std::shared_ptr<const Tables> x_;  // null: generated (formulas)
};

}  // namespace mrc::srv6
