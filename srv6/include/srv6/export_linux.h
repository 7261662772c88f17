// What to program on one Linux switch or host port of the fabric for SRv6 uSID forwarding,
// as a list of address / rule / route records (a Plan), and the same as `ip` commands.
// srv6/netlink.h applies a Plan through netlink; both come from the one Plan, so the text
// and the netlink state cannot drift apart. Threading: free functions over a const Fabric.
//
// For switch X (run inside X's network namespace; needs seg6_enabled=1 and forwarding=1):
//   ip -6 addr add <ll>/64 dev <if>                 for each port (fe80::1 lower tier,
//                                                    fe80::2 upper tier, see fabric.h Port)
//   ip -6 route add <block>:<own usid>::/<L+N> encap seg6local action End flavors next-csid
//       lblen <L> nflen <N> dev <first port>        (one line; L, N: the plane's locator
//                                                    format, fabric.h; generated 32 and 16;
//                                                    SwitchPlanOptions::end_dev names
//                                                    another device)
//   ip -6 route add <Port::route>/<Port::route_len> via <peer ll> dev <if>
//       for every neighbour: a T0 routes each spine's uSID up and each of its hosts'
//       delivery prefixes down (block:<host usid>::/<L+N>, or the address /128 in the
//       locator form); a spine routes each T0's uSID down.
// With SwitchPlanOptions::plain_routes, plain IPv6 routes to every host port address
// (address / host_prefix_len: block:<host usid>:<t0 usid>::/64 when generated, see
// fabric.h), so TCP or ECMP traffic needs no SRv6:
//   T0:  its own hosts' prefixes via the host port (left out where it is the delivery
//        route already); every other T0's hosts' as one multipath route over all its
//        spines (`nexthop via fe80::2 dev <up1> nexthop via ...`);
//   T1:  every host's prefix via the port to that host's T0.
//   These are more specific than the T0's host uSID routes (which are T0-local and would
//   send another T0's host port address down to a local host). SRv6 path addresses start
//   with a node uSID, host port addresses in the host-uSID form with a host uSID that is no
//   switch's, so the two sets of routes never match the same address on a spine or
//   upstream.
//
// For host h's port on plane p (host_port_plan; inside the host's namespace): its link-local
// fe80::1/64, its host port address /128 and the plane's block (/32 when generated) via
// fe80::2 on that port:
//   ip -6 addr add fe80::1/64 dev <port>
//   ip -6 addr add <port address>/128 dev <port>
//   ip -6 route add <block>/<L> via fe80::2 dev <port>
// That is complete when each port has its own namespace (or VRF). host_plan puts all of a
// host's ports in one namespace: Linux refuses a second main-table route for the same block,
// and a source route (`from` in the route) does not fall back to one without, so plane 0's
// block route stays in the main table and plane p > 0 moves its own to table
// kPlaneTableBase + p, with a rule choosing that table for its port address:
//   ip -6 rule add from <port address>/128 table <100 + p> priority <100 + p>
//   ip -6 route add <block>/<L> via fe80::2 dev <port> table <100 + p>
//   ip -6 route add unreachable <block>/<L> table <100 + p> metric 65535
// A socket bound to a plane's port address thus leaves by that plane's port; an unbound one
// by plane 0's. The unreachable route takes over while the port is down (Linux then deletes
// the route through it): the plane's traffic fails instead of leaking into the main table,
// i.e. into plane 0.
// Interface names are fabric.h's (<= 15 characters).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "srv6/fabric.h"

namespace mrc::srv6 {

inline constexpr uint32_t kMainTable = 254;       // RT_TABLE_MAIN
inline constexpr uint32_t kPlaneTableBase = 100;  // host plane p > 0: table and rule priority
inline constexpr uint32_t kUnreachableMetric = 65535;

struct AddrRecord {
  std::string dev;
  Ipv6 addr{};
  int len = 0;
};

struct RuleRecord {  // from <src>/<len> table <table> priority <priority>
  Ipv6 src{};
  int len = 0;
  uint32_t table = 0;
  uint32_t priority = 0;
};

struct Nexthop {
  std::string dev;
  Ipv6 via{};  // a link-local next hop; unused by kEnd
};

struct RouteRecord {
  enum class Kind : uint8_t {
    kVia,          // via nexthops; more than one: a multipath (ECMP) route
    kEnd,          // seg6local End flavors next-csid lblen L nflen N dev nexthops[0].dev
    kUnreachable,  // no nexthops
  };
  Kind kind = Kind::kVia;
  Ipv6 dst{};
  int len = 0;
  uint32_t table = kMainTable;
  std::vector<Nexthop> nexthops;  // at least one, but none for kUnreachable
  uint32_t metric = 0;            // 0: the kernel's default (1024)
  uint8_t lblen = kBlockBits;     // kEnd: locator block and uSID lengths, bits
  uint8_t nflen = kUsidBits;
};

// Everything one namespace (or one port of it) needs, applied in this order: addresses,
// rules, routes.
struct Plan {
  std::vector<AddrRecord> addrs;
  std::vector<RuleRecord> rules;
  std::vector<RouteRecord> routes;

  void append(const Plan& other);
};

struct SwitchPlanOptions {
  bool plain_routes = false;  // add the plain IPv6 routes to host port addresses (above)
  // The End route's device; empty: the first port. Linux deletes every route through an
  // interface that goes admin down, so on a fabric with link faults the switch would lose
  // its own uSID with its first port: give it a device that is never taken down. Not "lo":
  // Linux turns a route through lo into a reject route.
  std::string end_dev;
};

Plan switch_plan(const Fabric& f, SwitchId s, const SwitchPlanOptions& o = {});
Plan host_port_plan(const Fabric& f, uint32_t host, uint32_t plane);
Plan host_plan(const Fabric& f, uint32_t host);  // every plane's port, one namespace

// The plan as `ip -6 ...` lines, one record each, in application order.
std::vector<std::string> ip_commands(const Plan& p);
// One record as its `ip -6 ... add` line.
std::string ip_command(const AddrRecord& a);
std::string ip_command(const RuleRecord& r);
std::string ip_command(const RouteRecord& r);

// ip_commands(switch_plan(f, s)): SRv6 routes only, End on the first port.
std::vector<std::string> linux_switch_commands(const Fabric& f, SwitchId s);
// ip_commands(host_port_plan(f, host, plane)).
std::vector<std::string> linux_host_commands(const Fabric& f, uint32_t host, uint32_t plane);

// Lines joined with '\n', one trailing newline.
std::string join_lines(const std::vector<std::string>& lines);

}  // namespace mrc::srv6
