// Plans and `ip -6` commands for one switch or host (see export_linux.h).
#include "srv6/export_linux.h"

#include <arpa/inet.h>

namespace mrc::srv6 {
namespace {

Ipv6 ll(bool upper) {
  Ipv6 a{0xfe, 0x80};
  a[15] = upper ? 2 : 1;
  return a;
}

Ipv6 peer_ll(const Port& p) {
  Ipv6 a{};
  inet_pton(AF_INET6, p.peer_ll.c_str(), a.data());  // fabric.h's literals always parse
  return a;
}

RouteRecord via(Ipv6 dst, int len, const std::string& dev, Ipv6 gw) {
  return RouteRecord{RouteRecord::Kind::kVia, dst, len, kMainTable, {Nexthop{dev, gw}}};
}

std::string table_suffix(uint32_t table) {
  return table == kMainTable ? "" : " table " + std::to_string(table);
}

}  // namespace

void Plan::append(const Plan& o) {
  addrs.insert(addrs.end(), o.addrs.begin(), o.addrs.end());
  rules.insert(rules.end(), o.rules.begin(), o.rules.end());
  routes.insert(routes.end(), o.routes.begin(), o.routes.end());
}

Plan switch_plan(const Fabric& f, SwitchId s, const SwitchPlanOptions& o) {
  const std::vector<Port> ports = f.ports(s);
  Plan plan;
  for (const Port& p : ports) {
    // A T0 is the upper tier on host links and the lower tier on uplinks; a T1 always upper.
    const bool upper = s.tier == Tier::kT1 || p.to_host;
    plan.addrs.push_back(AddrRecord{p.ifname, ll(upper), 64});
  }
  const uint32_t plane = s.plane;
  const int lblen = f.block_bits(plane), nflen = f.usid_bits(plane);
  RouteRecord end{RouteRecord::Kind::kEnd,
                  f.address(plane, {f.usid(s)}),
                  lblen + nflen,
                  kMainTable,
                  {Nexthop{o.end_dev.empty() ? ports.front().ifname : o.end_dev, {}}}};
  end.lblen = static_cast<uint8_t>(lblen);
  end.nflen = static_cast<uint8_t>(nflen);
  plan.routes.push_back(end);
  for (const Port& p : ports) {
    plan.routes.push_back(via(p.route, p.route_len, p.ifname, peer_ll(p)));
  }
  if (!o.plain_routes) return plan;

  if (s.tier == Tier::kT1) {
    for (const Port& p : ports) {  // p.peer: a T0
      for (uint32_t i = 0; i < f.hosts_under(p.peer); ++i) {
        const uint32_t h = f.host_under(p.peer, i);
        plan.routes.push_back(
            via(f.host_address(h, plane), f.host_prefix_len(h, plane), p.ifname, peer_ll(p)));
      }
    }
    return plan;
  }
  std::vector<Nexthop> up;
  for (const Port& p : ports) {
    if (p.to_host) {
      const int len = f.host_prefix_len(p.peer, plane);
      if (len == p.route_len) continue;  // the delivery route is this very prefix
      plan.routes.push_back(via(f.host_address(p.peer, plane), len, p.ifname, peer_ll(p)));
    } else {
      up.push_back(Nexthop{p.ifname, peer_ll(p)});
    }
  }
  for (uint32_t h = 0; h < f.config().hosts; ++h) {
    if (f.t0_of(h) == s.index) continue;
    plan.routes.push_back(RouteRecord{RouteRecord::Kind::kVia, f.host_address(h, plane),
                                      f.host_prefix_len(h, plane), kMainTable, up});
  }
  return plan;
}

Plan host_port_plan(const Fabric& f, uint32_t host, uint32_t plane) {
  const std::string dev = f.host_ifname(host, plane);
  Plan plan;
  plan.addrs.push_back(AddrRecord{dev, ll(false), 64});
  plan.addrs.push_back(AddrRecord{dev, f.host_address(host, plane), 128});
  plan.routes.push_back(via(f.block(plane), f.block_bits(plane), dev, ll(true)));
  return plan;
}

Plan host_plan(const Fabric& f, uint32_t host) {
  Plan plan;
  for (uint32_t p = 0; p < f.config().planes; ++p) {
    Plan port = host_port_plan(f, host, p);
    if (p > 0) {
      const uint32_t table = kPlaneTableBase + p;
      port.rules.push_back(RuleRecord{f.host_address(host, p), 128, table, table});
      for (RouteRecord& r : port.routes) r.table = table;
      port.routes.push_back(RouteRecord{RouteRecord::Kind::kUnreachable,
                                        f.block(p),
                                        f.block_bits(p),
                                        table,
                                        {},
                                        kUnreachableMetric});
    }
    plan.append(port);
  }
  return plan;
}

std::string ip_command(const AddrRecord& a) {
  return "ip -6 addr add " + prefix(a.addr, a.len) + " dev " + a.dev;
}

std::string ip_command(const RuleRecord& r) {
  return "ip -6 rule add from " + prefix(r.src, r.len) + " table " + std::to_string(r.table) +
         " priority " + std::to_string(r.priority);
}

std::string ip_command(const RouteRecord& r) {
  std::string s = "ip -6 route add ";
  switch (r.kind) {
    case RouteRecord::Kind::kUnreachable:
      s += "unreachable " + prefix(r.dst, r.len);
      break;
    case RouteRecord::Kind::kEnd:
      s += prefix(r.dst, r.len) + " encap seg6local action End flavors next-csid lblen " +
           std::to_string(r.lblen) + " nflen " + std::to_string(r.nflen) + " dev " +
           r.nexthops.front().dev;
      break;
    case RouteRecord::Kind::kVia:
      s += prefix(r.dst, r.len);
      if (r.nexthops.size() == 1) {
        s += " via " + format(r.nexthops.front().via) + " dev " + r.nexthops.front().dev;
      } else {
        for (const Nexthop& n : r.nexthops) s += " nexthop via " + format(n.via) + " dev " + n.dev;
      }
      break;
  }
  s += table_suffix(r.table);
  return r.metric == 0 ? s : s + " metric " + std::to_string(r.metric);
}

std::vector<std::string> ip_commands(const Plan& p) {
  std::vector<std::string> v;
  v.reserve(p.addrs.size() + p.rules.size() + p.routes.size());
  for (const AddrRecord& a : p.addrs) v.push_back(ip_command(a));
  for (const RuleRecord& r : p.rules) v.push_back(ip_command(r));
  for (const RouteRecord& r : p.routes) v.push_back(ip_command(r));
  return v;
}

std::vector<std::string> linux_switch_commands(const Fabric& f, SwitchId s) {
  return ip_commands(switch_plan(f, s));
}

std::vector<std::string> linux_host_commands(const Fabric& f, uint32_t host, uint32_t plane) {
  return ip_commands(host_port_plan(f, host, plane));
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) {
    s += l;
    s += '\n';
  }
  return s;
}

}  // namespace mrc::srv6
