// SRv6 uSID fabric model: uSID plan, addresses, path enumeration (see fabric.h).
#include <algorithm>
#include <cmath>
#include "srv6/fabric.h"

#include <arpa/inet.h>

#include <cstring>
#include <string>

namespace mrc::srv6 {

std::string format(const Ipv6& a) {
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, a.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

std::string prefix(const Ipv6& a, int len) { return format(a) + "/" + std::to_string(len); }

Result<uint32_t, std::string> parse_block(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) {
    return Err{"'" + std::string(s) + "' is not a /32 IPv6 prefix (no '/32')"};
  }
  if (s.substr(slash + 1) != "32") {
    return Err{"'" + std::string(s) + "' is not a /32 IPv6 prefix (length must be 32)"};
  }
  const std::string addr(s.substr(0, slash));
  Ipv6 a{};
  if (inet_pton(AF_INET6, addr.c_str(), a.data()) != 1) {
    return Err{"'" + std::string(s) + "' is not a /32 IPv6 prefix (bad address)"};
  }
  for (size_t i = 4; i < a.size(); ++i) {
    if (a[i] != 0) {
      return Err{"'" + std::string(s) + "' is not a /32 IPv6 prefix (bits past /32 are set)"};
    }
  }
  return uint32_t{a[0]} << 24 | uint32_t{a[1]} << 16 | uint32_t{a[2]} << 8 | a[3];
}

Fabric::Fabric(FabricConfig cfg) : cfg_(std::move(cfg)) {
  t0s_ = (cfg_.hosts + cfg_.hosts_per_t0 - 1) / cfg_.hosts_per_t0;
}

Result<Fabric, std::string> Fabric::make(FabricConfig cfg) {
  if (cfg.hosts == 0) return Err{std::string("hosts: must be > 0")};
  if (cfg.planes == 0 || cfg.planes > kMaxPlanes) {
    return Err{"planes: must be 1.." + std::to_string(kMaxPlanes) + ", got " +
               std::to_string(cfg.planes)};
  }
  if (cfg.spines == 0 || cfg.spines > kMaxSpines) {
    return Err{"spines: must be 1.." + std::to_string(kMaxSpines) + ", got " +
               std::to_string(cfg.spines)};
  }
  if (cfg.hosts_per_t0 == 0 || cfg.hosts_per_t0 > kMaxHostsPerT0) {
    return Err{"hosts_per_t0: must be 1.." + std::to_string(kMaxHostsPerT0) + ", got " +
               std::to_string(cfg.hosts_per_t0)};
  }
  if (!(cfg.host_port_gbps > 0)) return Err{std::string("host_port_gbps: must be > 0")};
  if (!(cfg.uplink_gbps > 0)) return Err{std::string("uplink_gbps: must be > 0")};
  if (!cfg.names.empty() && cfg.names.size() != cfg.hosts) {
    return Err{"names: need one name per host (" + std::to_string(cfg.hosts) + "), got " +
               std::to_string(cfg.names.size())};
  }
  const uint64_t t0s = (uint64_t{cfg.hosts} + cfg.hosts_per_t0 - 1) / cfg.hosts_per_t0;
  const uint64_t nodes = uint64_t{cfg.planes} * (t0s + cfg.spines);
  if (nodes > kMaxNodeUsid) {
    return Err{"hosts: too many switches for 16-bit uSIDs: " + std::to_string(nodes) +
               " T0+T1 over all planes, at most " + std::to_string(kMaxNodeUsid)};
  }
  return Fabric(std::move(cfg));
}

uint32_t Fabric::hosts_under(uint32_t t0) const {
  if (t0 >= t0s_) return 0;
  const uint32_t first = t0 * cfg_.hosts_per_t0;
  return std::min(cfg_.hosts_per_t0, cfg_.hosts - first);
}

uint16_t Fabric::t0_usid(uint32_t plane, uint32_t t0) const {
  return static_cast<uint16_t>(1 + plane * (t0s_ + cfg_.spines) + t0);
}
uint16_t Fabric::t1_usid(uint32_t plane, uint32_t spine) const {
  return static_cast<uint16_t>(1 + plane * (t0s_ + cfg_.spines) + t0s_ + spine);
}
uint16_t Fabric::usid(SwitchId s) const {
  return s.tier == Tier::kT0 ? t0_usid(s.plane, s.index) : t1_usid(s.plane, s.index);
}
uint16_t Fabric::host_usid(uint32_t host) const {
  return static_cast<uint16_t>(kHostUsidBase + local_index(host));
}

bool Fabric::owner(uint16_t usid, SwitchId* out) const {
  if (usid == 0 || usid > switches()) return false;
  const uint32_t n = usid - 1u;
  const uint32_t per = t0s_ + cfg_.spines;
  const uint32_t plane = n / per, i = n % per;
  *out = i < t0s_ ? SwitchId{Tier::kT0, plane, i} : SwitchId{Tier::kT1, plane, i - t0s_};
  return true;
}

std::string Fabric::switch_name(SwitchId s) const {
  return (s.tier == Tier::kT0 ? "t0p" : "t1p") + std::to_string(s.plane) + "-" +
         std::to_string(s.index);
}

std::string Fabric::host_ifname(uint32_t host, uint32_t plane) const {
  return "p" + std::to_string(plane) + "h" + std::to_string(host);
}

namespace {
std::string t0_if(uint32_t p, uint32_t t, char kind, uint32_t n) {
  return "p" + std::to_string(p) + "t" + std::to_string(t) + "-" + kind + std::to_string(n);
}
std::string t1_if(uint32_t p, uint32_t s, uint32_t t) {
  return "p" + std::to_string(p) + "s" + std::to_string(s) + "-t" + std::to_string(t);
}
}  // namespace

std::vector<Port> Fabric::ports(SwitchId s) const {
  std::vector<Port> v;
  const uint32_t p = s.plane;
  if (s.tier == Tier::kT0) {
    const uint32_t t = s.index;
    const uint32_t n = hosts_under(t);
    v.reserve(cfg_.spines + n);
    for (uint32_t sp = 0; sp < cfg_.spines; ++sp) {
      v.push_back(
          Port{t0_if(p, t, 's', sp), t1_if(p, sp, t), "fe80::2", t1_usid(p, sp), false, sp});
    }
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t h = t * cfg_.hosts_per_t0 + i;
      v.push_back(Port{t0_if(p, t, 'h', i), host_ifname(h, p), "fe80::1", host_usid(h), true, h});
    }
  } else {
    v.reserve(t0s_);
    for (uint32_t t = 0; t < t0s_; ++t) {
      v.push_back(Port{t1_if(p, s.index, t), t0_if(p, t, 's', s.index), "fe80::1", t0_usid(p, t),
                       false, t});
    }
  }
  return v;
}

Ipv6 Fabric::address(const std::vector<uint16_t>& usids) const {
  Ipv6 a{};
  a[0] = cfg_.block >> 24;
  a[1] = cfg_.block >> 16;
  a[2] = cfg_.block >> 8;
  a[3] = cfg_.block;
  for (size_t i = 0; i < usids.size() && i < kMaxUsids; ++i) {
    a[4 + 2 * i] = usids[i] >> 8;
    a[5 + 2 * i] = usids[i] & 0xff;
  }
  return a;
}

Ipv6 Fabric::host_address(uint32_t host, uint32_t plane) const {
  return address({host_usid(host), t0_usid(plane, t0_of(host))});
}

std::optional<uint32_t> Fabric::host_of(const Ipv6& a) const {
  const uint16_t hu = usid_at(a, 0);
  SwitchId t0;
  if (hu < kHostUsidBase || !owner(usid_at(a, 1), &t0) || t0.tier != Tier::kT0) return std::nullopt;
  const uint32_t local = hu - kHostUsidBase;
  const uint64_t host = uint64_t{t0.index} * cfg_.hosts_per_t0 + local;
  if (local >= cfg_.hosts_per_t0 || host >= cfg_.hosts) return std::nullopt;
  const Ipv6 want = host_address(static_cast<uint32_t>(host), t0.plane);
  if (std::memcmp(want.data(), a.data(), 8) != 0) return std::nullopt;  // another block
  return static_cast<uint32_t>(host);
}

std::string Fabric::usid_prefix(uint16_t usid) const { return prefix(address({usid}), 48); }

uint16_t Fabric::usid_at(const Ipv6& a, int i) {
  return static_cast<uint16_t>(a[4 + 2 * i] << 8 | a[5 + 2 * i]);
}

Ipv6 Fabric::shift(const Ipv6& a) {
  Ipv6 b = a;
  std::memmove(b.data() + 4, a.data() + 6, 10);
  b[14] = b[15] = 0;
  return b;
}

Path Fabric::make_path(uint32_t dst, uint32_t plane, uint32_t spine, bool direct,
                       uint32_t k) const {
  const uint16_t t0 = t0_usid(plane, t0_of(dst));
  Path path;
  path.plane = plane;
  path.spine = direct ? 0 : spine;
  path.direct = direct;
  path.ev = ev(plane, path.spine, k);
  path.dst = direct ? address({t0, host_usid(dst), t0})
                    : address({t1_usid(plane, spine), t0, host_usid(dst), t0});
  return path;
}

std::vector<Path> Fabric::paths(uint32_t src, uint32_t dst, uint32_t plane) const {
  std::vector<Path> v;
  if (src == dst || src >= cfg_.hosts || dst >= cfg_.hosts || plane >= cfg_.planes) return v;
  if (t0_of(src) == t0_of(dst)) {
    v.push_back(make_path(dst, plane, 0, true, 0));
    return v;
  }
  v.reserve(cfg_.spines);
  for (uint32_t s = 0; s < cfg_.spines; ++s) v.push_back(make_path(dst, plane, s, false, 0));
  return v;
}

Result<Path, std::string> Fabric::path_for_ev(uint32_t src, uint32_t dst, uint32_t ev) const {
  if (src >= cfg_.hosts || dst >= cfg_.hosts) return Err{std::string("host out of range")};
  if (src == dst) return Err{std::string("src == dst: no path")};
  const uint32_t plane = plane_of(ev);
  if (plane >= cfg_.planes) {
    return Err{"plane " + std::to_string(plane) + " of ev out of range"};
  }
  const bool direct = t0_of(src) == t0_of(dst);
  return make_path(dst, plane, spine_of(ev) % cfg_.spines, direct, salt_of(ev));
}


uint32_t spines_for_full_t0(const FabricConfig& c, double port_gbps) {
  const double port = port_gbps > 0 ? port_gbps : c.host_port_gbps;
  const double need = std::ceil(c.hosts_per_t0 * port / c.uplink_gbps - 1e-9);
  return std::clamp<uint32_t>(static_cast<uint32_t>(std::max(need, 1.0)), 1, std::max(c.spines, 1u));
}

}  // namespace mrc::srv6
