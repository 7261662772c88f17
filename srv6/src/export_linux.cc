// `ip -6` commands for one switch or host port (see export_linux.h).
#include "srv6/export_linux.h"

namespace mrc::srv6 {
namespace {

std::string own_ll(bool upper) { return upper ? "fe80::2" : "fe80::1"; }

std::string block_prefix(const Fabric& f) {
  Ipv6 a = f.address({});
  return prefix(a, kBlockBits);
}

}  // namespace

std::vector<std::string> linux_switch_commands(const Fabric& f, SwitchId s) {
  const std::vector<Port> ports = f.ports(s);
  std::vector<std::string> v;
  v.reserve(2 * ports.size() + 1);
  for (const Port& p : ports) {
    // A T0 is the upper tier on host links and the lower tier on uplinks; a T1 always upper.
    const bool upper = s.tier == Tier::kT1 || p.to_host;
    v.push_back("ip -6 addr add " + own_ll(upper) + "/64 dev " + p.ifname);
  }
  v.push_back("ip -6 route add " + f.usid_prefix(f.usid(s)) +
              " encap seg6local action End flavors next-csid lblen 32 nflen 16 dev " +
              ports.front().ifname);
  for (const Port& p : ports) {
    v.push_back("ip -6 route add " + f.usid_prefix(p.peer_usid) + " via " + p.peer_ll + " dev " +
                p.ifname);
  }
  return v;
}

std::vector<std::string> linux_host_commands(const Fabric& f, uint32_t host, uint32_t plane) {
  const std::string dev = f.host_ifname(host, plane);
  return {
      "ip -6 addr add fe80::1/64 dev " + dev,
      "ip -6 addr add " + prefix(f.host_address(host, plane), 128) + " dev " + dev,
      "ip -6 route add " + block_prefix(f) + " via fe80::2 dev " + dev,
  };
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
