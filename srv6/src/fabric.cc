// SRv6 uSID fabric model: uSID plan, addresses, path enumeration (see fabric.h).
#include "srv6/fabric.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

namespace mrc::srv6 {
namespace {

// Addresses as 128-bit integers, most significant bit first (bit 0 is the address's first).
using U128 = unsigned __int128;

U128 to_u(const Ipv6& a) {
  U128 v = 0;
  for (uint8_t b : a) v = v << 8 | b;
  return v;
}

Ipv6 from_u(U128 v) {
  Ipv6 a{};
  for (int i = 15; i >= 0; --i) {
    a[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
  return a;
}

U128 top_mask(int bits) {  // the first `bits` bits set
  if (bits <= 0) return 0;
  if (bits >= 128) return ~U128{0};
  return ~U128{0} << (128 - bits);
}

U128 shr(U128 v, int n) { return n >= 128 ? 0 : v >> n; }

int used_bits(const Ipv6& a) {  // index past the last set bit (0 for ::)
  const U128 v = to_u(a);
  for (int i = 127; i >= 0; --i)
    if ((v >> (127 - i)) & 1) return i + 1;
  return 0;
}

std::string hex(uint32_t v, int bits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", (bits + 3) / 4, v);
  return buf;
}

std::string t0_if(uint32_t p, uint32_t t, char kind, uint32_t n) {
  return "p" + std::to_string(p) + "t" + std::to_string(t) + "-" + kind + std::to_string(n);
}
std::string t1_if(uint32_t p, uint32_t s, uint32_t t) {
  return "p" + std::to_string(p) + "s" + std::to_string(s) + "-t" + std::to_string(t);
}

bool good_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  });
}

}  // namespace

// Explicit fabrics: the spec and what is derived from it, computed once in make().
struct Fabric::Tables {
  std::vector<PlaneSpec> planes;
  std::vector<uint32_t> host_t0, local;
  std::vector<std::vector<uint32_t>> under;  // per T0 index: its hosts in local-index order
  std::vector<Ipv6> addr;                    // [host * planes + plane]
  std::vector<uint8_t> route_len, prefix_len;
  std::vector<std::pair<Ipv6, uint32_t>> by_addr;                  // sorted: address -> host
  std::vector<std::pair<uint64_t, uint32_t>> by_prefix;            // sorted: 64-bit prefix -> host,
                                                                   // addresses with nothing past it
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> owners;  // per plane: uSID ->
                                                                   // t0 (< T) or T + spine
};

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

Result<std::pair<Ipv6, int>, std::string> parse_prefix(std::string_view s) {
  const std::string str(s);
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) return Err{"'" + str + "' is not an IPv6 prefix (no /len)"};
  const std::string len_s(s.substr(slash + 1));
  int len = -1;
  if (!len_s.empty() && len_s.size() <= 3 &&
      std::all_of(len_s.begin(), len_s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    len = std::stoi(len_s);
  if (len < 0 || len > 128) return Err{"'" + str + "': prefix length must be 0..128"};
  const std::string addr(s.substr(0, slash));
  Ipv6 a{};
  if (inet_pton(AF_INET6, addr.c_str(), a.data()) != 1) {
    return Err{"'" + str + "' is not an IPv6 prefix (bad address)"};
  }
  if ((to_u(a) & ~top_mask(len)) != 0) {
    return Err{"'" + str + "': bits past /" + len_s + " are set"};
  }
  return std::make_pair(a, len);
}

std::string csid_lengths_error(int lblen, int nflen) {
  auto bad = [](int v) { return v < 8 || v > 120 || v % 8 != 0; };
  if (bad(lblen)) {
    return "locator block of " + std::to_string(lblen) +
           " bits: Linux next-csid takes a multiple of 8 in 8..120";
  }
  if (bad(nflen)) {
    return "uSID of " + std::to_string(nflen) +
           " bits: Linux next-csid takes a multiple of 8 in 8..120";
  }
  if (lblen + nflen > 128) {
    return "block " + std::to_string(lblen) + " + uSID " + std::to_string(nflen) +
           " bits: Linux next-csid needs at most 128";
  }
  return "";
}

Fabric::Fabric(FabricConfig cfg, std::shared_ptr<const Tables> x)
    : cfg_(std::move(cfg)), x_(std::move(x)) {
  t0s_ = x_ ? static_cast<uint32_t>(x_->under.size())
            : (cfg_.hosts + cfg_.hosts_per_t0 - 1) / cfg_.hosts_per_t0;
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
  return Fabric(std::move(cfg), nullptr);
}

Result<Fabric, std::string> Fabric::make(const FabricSpec& spec) {
  auto x = std::make_shared<Tables>();
  x->planes = spec.planes;
  const size_t P = spec.planes.size();
  if (P == 0 || P > kMaxPlanes) {
    return Err{"planes: must list 1.." + std::to_string(kMaxPlanes) + " planes, got " +
               std::to_string(P)};
  }
  if (!(spec.host_port_gbps > 0)) return Err{std::string("host_port_gbps: must be > 0")};
  if (!(spec.uplink_gbps > 0)) return Err{std::string("uplink_gbps: must be > 0")};
  const size_t T = spec.planes[0].t0s.size(), S = spec.planes[0].t1s.size();
  std::map<std::string, std::string> switch_names;  // name -> where
  x->owners.resize(P);
  for (size_t p = 0; p < P; ++p) {
    const PlaneSpec& pl = spec.planes[p];
    const std::string at = "planes/" + std::to_string(p);
    if (auto e = csid_lengths_error(pl.block_bits, pl.usid_bits); !e.empty()) {
      return Err{at +
                 (pl.block_bits % 8 || pl.block_bits < 8 || pl.block_bits > 120 ? "/block: "
                                                                                : "/usid_bits: ") +
                 e};
    }
    if (pl.usid_bits > kMaxUsidBits) {
      return Err{at + "/usid_bits: " + std::to_string(pl.usid_bits) + " bits: at most " +
                 std::to_string(kMaxUsidBits) + " here"};
    }
    if ((to_u(pl.block) & ~top_mask(pl.block_bits)) != 0) {
      return Err{at + "/block: bits past /" + std::to_string(pl.block_bits) + " are set"};
    }
    if (pl.t0s.empty()) return Err{at + "/t0: needs at least one T0"};
    if (pl.t1s.empty()) return Err{at + "/t1: needs at least one T1"};
    if (pl.t0s.size() != T) {
      return Err{at + "/t0: " + std::to_string(pl.t0s.size()) + " T0s, plane 0 has " +
                 std::to_string(T) + " (every plane needs as many)"};
    }
    if (pl.t1s.size() != S) {
      return Err{at + "/t1: " + std::to_string(pl.t1s.size()) + " T1s, plane 0 has " +
                 std::to_string(S) + " (every plane needs as many)"};
    }
    if (S > kMaxSpines) {
      return Err{at + "/t1: at most " + std::to_string(kMaxSpines) + " T1s, got " +
                 std::to_string(S)};
    }
    const uint64_t max_usid = (uint64_t{1} << pl.usid_bits) - 1;
    std::map<uint32_t, std::string> seen;  // uSID -> "t0 3"
    auto& own = x->owners[p];
    for (int tier = 0; tier < 2; ++tier) {
      const auto& v = tier == 0 ? pl.t0s : pl.t1s;
      const char* key = tier == 0 ? "t0" : "t1";
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string here = at + "/" + key + "/" + std::to_string(i);
        const SwitchSpec& sw = v[i];
        if (sw.usid == 0 || sw.usid > max_usid) {
          return Err{here + "/usid: must be 1.." +
                     hex(static_cast<uint32_t>(max_usid), pl.usid_bits) + " for " +
                     std::to_string(pl.usid_bits) + "-bit uSIDs, got " +
                     hex(sw.usid, pl.usid_bits)};
        }
        const std::string what = std::string(key) + " " + std::to_string(i);
        if (auto [it, fresh] = seen.emplace(sw.usid, what); !fresh) {
          return Err{here + "/usid: duplicate uSID " + hex(sw.usid, pl.usid_bits) + " (also " +
                     it->second + ")"};
        }
        own.emplace_back(sw.usid, static_cast<uint32_t>(tier == 0 ? i : T + i));
        if (!sw.name.empty()) {
          if (!good_name(sw.name)) {
            return Err{here + "/name: '" + sw.name + "': use 1..64 of [A-Za-z0-9_.:-]"};
          }
          if (auto [it, fresh] = switch_names.emplace(
                  sw.name, "planes/" + std::to_string(p) + "/" + key + "/" + std::to_string(i));
              !fresh) {
            return Err{here + "/name: duplicate switch name '" + sw.name + "' (also " + it->second +
                       ")"};
          }
        }
      }
    }
    std::sort(own.begin(), own.end());
  }

  const size_t H = spec.hosts.size();
  if (H == 0) return Err{std::string("hosts: needs at least one host")};
  x->under.resize(T);
  x->host_t0.resize(H);
  x->local.resize(H);
  x->addr.resize(H * P);
  x->route_len.resize(H * P);
  x->prefix_len.resize(H * P);
  std::map<std::string, size_t> host_names;
  std::vector<std::string> names;
  bool any_name = false;
  for (const HostSpec& h : spec.hosts) any_name = any_name || !h.name.empty();
  for (size_t h = 0; h < H; ++h) {
    const HostSpec& hs = spec.hosts[h];
    const std::string here = "hosts/" + std::to_string(h);
    if (any_name) {
      if (hs.name.empty()) return Err{here + "/name: missing (other hosts have names)"};
      if (!good_name(hs.name)) {
        return Err{here + "/name: '" + hs.name + "': use 1..64 of [A-Za-z0-9_.:-]"};
      }
      if (auto [it, fresh] = host_names.emplace(hs.name, h); !fresh) {
        return Err{here + "/name: duplicate host name '" + hs.name + "' (also host " +
                   std::to_string(it->second) + ")"};
      }
      names.push_back(hs.name);
    }
    if (hs.t0 >= T) {
      return Err{here + "/t0: " + std::to_string(hs.t0) + " is not a T0 (each plane has " +
                 std::to_string(T) + ", 0.." + std::to_string(T - 1) + ")"};
    }
    x->host_t0[h] = hs.t0;
    x->local[h] = static_cast<uint32_t>(x->under[hs.t0].size());
    x->under[hs.t0].push_back(static_cast<uint32_t>(h));
    if (x->under[hs.t0].size() > kMaxHostsPerT0) {
      return Err{here + "/t0: more than " + std::to_string(kMaxHostsPerT0) + " hosts under T0 " +
                 std::to_string(hs.t0)};
    }
    if (hs.addresses.size() != P) {
      return Err{here + "/addresses: needs one address per plane (" + std::to_string(P) +
                 "), got " + std::to_string(hs.addresses.size())};
    }
  }
  // Per plane: addresses in the block, their delivery form, uniqueness and room for paths.
  std::map<Ipv6, std::string> all_addrs;
  for (size_t p = 0; p < P; ++p) {
    const PlaneSpec& pl = spec.planes[p];
    const int L = pl.block_bits, N = pl.usid_bits;
    const U128 block = to_u(pl.block);
    std::vector<std::map<uint32_t, size_t>> host_usids(T);  // per T0: host uSID -> host
    for (size_t h = 0; h < H; ++h) {
      const Ipv6& a = spec.hosts[h].addresses[p];
      const std::string here = "hosts/" + std::to_string(h) + "/addresses/" + std::to_string(p);
      const std::string as = format(a);
      const U128 v = to_u(a);
      if ((v & top_mask(L)) != block) {
        return Err{here + ": " + as + " is not in plane " + std::to_string(p) +
                   "'s locator block " + prefix(pl.block, L) +
                   " (SRv6 paths deliver only into the block; ECMP fabrics need no fabric file)"};
      }
      if (auto [it, fresh] =
              all_addrs.emplace(a, "host " + std::to_string(h) + " plane " + std::to_string(p));
          !fresh) {
        return Err{here + ": duplicate address " + as + " (also " + it->second + ")"};
      }
      const uint32_t t0 = spec.hosts[h].t0;
      const uint32_t t0u = pl.t0s[t0].usid;
      const uint32_t u =
          static_cast<uint32_t>(shr(v & ~top_mask(L), 128 - L - N) & ((U128{1} << N) - 1));
      const int used = used_bits(a);
      int route_len = 0, inserted = 0;
      if (u == t0u) {  // locator form
        if (used <= L + N) {
          return Err{here + ": " + as + " is T0 " + std::to_string(t0) +
                     "'s own locator: a host address in it needs bits after the T0's uSID"};
        }
        route_len = 128;
        inserted = 1;
      } else {  // host-uSID form
        if (u == 0) {
          return Err{here + ": " + as + ": the uSID after the block is 0 (a host needs its " +
                     "own host uSID there, or its T0's uSID)"};
        }
        const auto& own = x->owners[p];
        auto it = std::lower_bound(own.begin(), own.end(), std::make_pair(u, uint32_t{0}));
        if (it != own.end() && it->first == u) {
          const bool is_t0 = it->second < T;
          return Err{here + ": " + as + ": its first uSID " + hex(u, N) + " is " +
                     (is_t0 ? "t0 " : "t1 ") + std::to_string(is_t0 ? it->second : it->second - T) +
                     "'s (a host uSID must not be a switch's; an address in its T0's own " +
                     "locator starts with that T0's uSID)"};
        }
        if (auto [hit, fresh] = host_usids[t0].emplace(u, h); !fresh) {
          return Err{here + ": " + as + ": host uSID " + hex(u, N) + " is also host " +
                     std::to_string(hit->second) + "'s under T0 " + std::to_string(t0) +
                     " (host uSIDs are unique per T0)"};
        }
        route_len = L + N;
        inserted = 2;
      }
      if (used + inserted * N > 128) {
        return Err{here + ": " + as + ": a path through a spine puts " + std::to_string(inserted) +
                   " uSID(s) ahead of the address's bits after the " + "block, so its last " +
                   std::to_string(inserted * N) + " bits must be 0 (it uses " +
                   std::to_string(used) + " of 128)"};
      }
      const size_t i = h * P + p;
      x->addr[i] = a;
      x->route_len[i] = static_cast<uint8_t>(route_len);
      const int sig = std::max(used - L, 1);
      x->prefix_len[i] = static_cast<uint8_t>(std::min(128, L + (sig + N - 1) / N * N));
      x->by_addr.emplace_back(a, static_cast<uint32_t>(h));
    }
  }
  std::sort(x->by_addr.begin(), x->by_addr.end());
  for (const auto& [a, h] : x->by_addr) {
    if ((to_u(a) & ~top_mask(64)) != 0) continue;
    uint64_t hi = 0;
    for (int i = 0; i < 8; ++i) hi = hi << 8 | a[i];
    x->by_prefix.emplace_back(hi, h);
  }
  std::sort(x->by_prefix.begin(), x->by_prefix.end());

  uint32_t most = 0;
  for (const auto& u : x->under) most = std::max<uint32_t>(most, static_cast<uint32_t>(u.size()));
  // Interface names (fabric.h Port) of the highest indexes must fit IFNAMSIZ - 1.
  const uint32_t pmax = static_cast<uint32_t>(P - 1), tmax = static_cast<uint32_t>(T - 1),
                 smax = static_cast<uint32_t>(S - 1);
  for (const std::string& n :
       {t0_if(pmax, tmax, 'h', most == 0 ? 0 : most - 1), t0_if(pmax, tmax, 's', smax),
        t1_if(pmax, smax, tmax), "p" + std::to_string(pmax) + "h" + std::to_string(H - 1)}) {
    if (n.size() > 15) {
      return Err{"hosts: interface name " + n + " would be longer than 15 characters (fewer " +
                 "hosts or T0s)"};
    }
  }

  FabricConfig cfg;
  cfg.hosts = static_cast<uint32_t>(H);
  cfg.planes = static_cast<uint32_t>(P);
  cfg.spines = static_cast<uint32_t>(S);
  cfg.hosts_per_t0 = std::max(most, 1u);
  const Ipv6& b0 = spec.planes[0].block;
  cfg.block = uint32_t{b0[0]} << 24 | uint32_t{b0[1]} << 16 | uint32_t{b0[2]} << 8 | b0[3];
  cfg.host_port_gbps = spec.host_port_gbps;
  cfg.uplink_gbps = spec.uplink_gbps;
  cfg.names = std::move(names);
  return Fabric(std::move(cfg), std::move(x));
}

Fabric Fabric::with_speeds(double host_port_gbps, double uplink_gbps) const {
  Fabric f = *this;
  f.cfg_.host_port_gbps = host_port_gbps;
  f.cfg_.uplink_gbps = uplink_gbps;
  return f;
}

uint32_t Fabric::t0_of(uint32_t host) const {
  return x_ ? x_->host_t0[host] : host / cfg_.hosts_per_t0;
}
uint32_t Fabric::local_index(uint32_t host) const {
  return x_ ? x_->local[host] : host % cfg_.hosts_per_t0;
}

uint32_t Fabric::hosts_under(uint32_t t0) const {
  if (t0 >= t0s_) return 0;
  if (x_) return static_cast<uint32_t>(x_->under[t0].size());
  const uint32_t first = t0 * cfg_.hosts_per_t0;
  return std::min(cfg_.hosts_per_t0, cfg_.hosts - first);
}

uint32_t Fabric::host_under(uint32_t t0, uint32_t i) const {
  return x_ ? x_->under[t0][i] : t0 * cfg_.hosts_per_t0 + i;
}

Ipv6 Fabric::block(uint32_t plane) const {
  if (x_) return x_->planes[plane].block;
  return Ipv6{static_cast<uint8_t>(cfg_.block >> 24), static_cast<uint8_t>(cfg_.block >> 16),
              static_cast<uint8_t>(cfg_.block >> 8), static_cast<uint8_t>(cfg_.block)};
}
int Fabric::block_bits(uint32_t plane) const {
  return x_ ? x_->planes[plane].block_bits : kBlockBits;
}
int Fabric::usid_bits(uint32_t plane) const { return x_ ? x_->planes[plane].usid_bits : kUsidBits; }

uint32_t Fabric::t0_usid(uint32_t plane, uint32_t t0) const {
  if (x_) return x_->planes[plane].t0s[t0].usid;
  return 1 + plane * (t0s_ + cfg_.spines) + t0;
}
uint32_t Fabric::t1_usid(uint32_t plane, uint32_t spine) const {
  if (x_) return x_->planes[plane].t1s[spine].usid;
  return 1 + plane * (t0s_ + cfg_.spines) + t0s_ + spine;
}
uint32_t Fabric::usid(SwitchId s) const {
  return s.tier == Tier::kT0 ? t0_usid(s.plane, s.index) : t1_usid(s.plane, s.index);
}
uint32_t Fabric::host_usid(uint32_t host) const {
  if (x_) return usid_at(0, host_address(host, 0), 0);
  return kHostUsidBase + local_index(host);
}

bool Fabric::owner(uint32_t plane, uint32_t usid, SwitchId* out) const {
  if (plane >= cfg_.planes) return false;
  if (x_) {
    const auto& own = x_->owners[plane];
    auto it = std::lower_bound(own.begin(), own.end(), std::make_pair(usid, uint32_t{0}));
    if (it == own.end() || it->first != usid) return false;
    *out = it->second < t0s_ ? SwitchId{Tier::kT0, plane, it->second}
                             : SwitchId{Tier::kT1, plane, it->second - t0s_};
    return true;
  }
  if (usid == 0 || usid > switches()) return false;
  const uint32_t n = usid - 1u;
  const uint32_t per = t0s_ + cfg_.spines;
  if (n / per != plane) return false;
  const uint32_t i = n % per;
  *out = i < t0s_ ? SwitchId{Tier::kT0, plane, i} : SwitchId{Tier::kT1, plane, i - t0s_};
  return true;
}

std::string Fabric::switch_name(SwitchId s) const {
  return (s.tier == Tier::kT0 ? "t0p" : "t1p") + std::to_string(s.plane) + "-" +
         std::to_string(s.index);
}

std::string Fabric::switch_label(SwitchId s) const {
  if (x_) {
    const PlaneSpec& pl = x_->planes[s.plane];
    const std::string& n = s.tier == Tier::kT0 ? pl.t0s[s.index].name : pl.t1s[s.index].name;
    if (!n.empty()) return n;
  }
  return switch_name(s);
}

std::string Fabric::host_ifname(uint32_t host, uint32_t plane) const {
  return "p" + std::to_string(plane) + "h" + std::to_string(host);
}

std::vector<Port> Fabric::ports(SwitchId s) const {
  std::vector<Port> v;
  const uint32_t p = s.plane;
  const int un = block_bits(p) + usid_bits(p);
  if (s.tier == Tier::kT0) {
    const uint32_t t = s.index;
    const uint32_t n = hosts_under(t);
    v.reserve(cfg_.spines + n);
    for (uint32_t sp = 0; sp < cfg_.spines; ++sp) {
      const uint32_t u = t1_usid(p, sp);
      v.push_back(Port{t0_if(p, t, 's', sp), t1_if(p, sp, t), "fe80::2", u, false, sp,
                       address(p, {u}), un});
    }
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t h = host_under(t, i);
      const Ipv6 a = host_address(h, p);
      const int len = host_route_len(h, p);
      v.push_back(Port{t0_if(p, t, 'h', i), host_ifname(h, p), "fe80::1", usid_at(p, a, 0), true, h,
                       from_u(to_u(a) & top_mask(len)), len});
    }
  } else {
    v.reserve(t0s_);
    for (uint32_t t = 0; t < t0s_; ++t) {
      const uint32_t u = t0_usid(p, t);
      v.push_back(Port{t1_if(p, s.index, t), t0_if(p, t, 's', s.index), "fe80::1", u, false, t,
                       address(p, {u}), un});
    }
  }
  return v;
}

Ipv6 Fabric::address(uint32_t plane, const std::vector<uint32_t>& usids) const {
  const int L = block_bits(plane), N = usid_bits(plane);
  U128 v = to_u(block(plane));
  for (size_t i = 0; i < usids.size(); ++i) {
    const int end = L + static_cast<int>(i + 1) * N;
    if (end > 128) break;
    v |= (U128{usids[i]} & ((U128{1} << N) - 1)) << (128 - end);
  }
  return from_u(v);
}

Ipv6 Fabric::host_address(uint32_t host, uint32_t plane) const {
  if (x_) return x_->addr[host * cfg_.planes + plane];
  return address(plane, {host_usid(host), t0_usid(plane, t0_of(host))});
}

int Fabric::host_route_len(uint32_t host, uint32_t plane) const {
  return x_ ? x_->route_len[host * cfg_.planes + plane] : kBlockBits + kUsidBits;
}
int Fabric::host_prefix_len(uint32_t host, uint32_t plane) const {
  return x_ ? x_->prefix_len[host * cfg_.planes + plane] : kBlockBits + 2 * kUsidBits;
}

std::optional<uint32_t> Fabric::host_of(const Ipv6& a) const {
  if (x_) {
    const auto& v = x_->by_addr;
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(a, uint32_t{0}));
    if (it != v.end() && it->first == a) return it->second;
    uint64_t hi = 0;
    for (int i = 0; i < 8; ++i) hi = hi << 8 | a[i];
    const auto& w = x_->by_prefix;
    auto jt = std::lower_bound(w.begin(), w.end(), std::make_pair(hi, uint32_t{0}));
    if (jt != w.end() && jt->first == hi) return jt->second;
    return std::nullopt;
  }
  const uint32_t hu = usid_at(0, a, 0);
  const uint32_t t0u = usid_at(0, a, 1);
  if (hu < kHostUsidBase || t0u == 0 || t0u > switches()) return std::nullopt;
  const uint32_t per = t0s_ + cfg_.spines;
  const uint32_t plane = (t0u - 1) / per, t0 = (t0u - 1) % per;
  if (t0 >= t0s_) return std::nullopt;
  const uint32_t local = hu - kHostUsidBase;
  const uint64_t host = uint64_t{t0} * cfg_.hosts_per_t0 + local;
  if (local >= cfg_.hosts_per_t0 || host >= cfg_.hosts) return std::nullopt;
  const Ipv6 want = host_address(static_cast<uint32_t>(host), plane);
  if (std::memcmp(want.data(), a.data(), 8) != 0) return std::nullopt;  // another block
  return static_cast<uint32_t>(host);
}

std::string Fabric::usid_prefix(uint32_t plane, uint32_t usid) const {
  return prefix(address(plane, {usid}), block_bits(plane) + usid_bits(plane));
}

uint32_t Fabric::usid_at(uint32_t plane, const Ipv6& a, int i) const {
  const int L = block_bits(plane), N = usid_bits(plane);
  const int end = L + (i + 1) * N;
  if (i < 0 || end > 128) return 0;
  return static_cast<uint32_t>((to_u(a) >> (128 - end)) & ((U128{1} << N) - 1));
}

Ipv6 Fabric::shift(uint32_t plane, const Ipv6& a) const {
  const int L = block_bits(plane), N = usid_bits(plane);
  const U128 v = to_u(a);
  const U128 rest = v & ~top_mask(L + N);
  return from_u((v & top_mask(L)) | rest << N);
}

bool Fabric::in_block(uint32_t plane, const Ipv6& a) const {
  if (plane >= cfg_.planes) return false;
  const U128 m = top_mask(block_bits(plane));
  return (to_u(a) & m) == (to_u(block(plane)) & m);
}

Path Fabric::make_path(uint32_t dst, uint32_t plane, uint32_t spine, bool direct,
                       uint32_t k) const {
  const uint32_t t0 = t0_usid(plane, t0_of(dst));
  const Ipv6 a = host_address(dst, plane);
  std::vector<uint32_t> ins;
  if (!direct) ins.push_back(t1_usid(plane, spine));
  if (usid_at(plane, a, 0) != t0) ins.push_back(t0);  // locator form: A starts with its T0
  const int L = block_bits(plane), N = usid_bits(plane);
  const U128 tail = shr(to_u(a) & ~top_mask(L), static_cast<int>(ins.size()) * N);
  Path path;
  path.plane = plane;
  path.spine = direct ? 0 : spine;
  path.direct = direct;
  path.ev = ev(plane, path.spine, k);
  path.dst = from_u(to_u(address(plane, ins)) | tail);
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
  return std::clamp<uint32_t>(static_cast<uint32_t>(std::max(need, 1.0)), 1,
                              std::max(c.spines, 1u));
}

}  // namespace mrc::srv6
