// Tests for srv6/src/export_linux.cc: the ip commands, checked by walking every path
// through the route tables they program.
#include "srv6/export_linux.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "hand_fabric.h"
#include "srv6/config.h"

namespace mrc::srv6 {
namespace {

const char kEnd[] = "encap seg6local action End flavors next-csid lblen ";

struct Node {
  bool is_host = false;
  SwitchId sw;
  uint32_t host = 0;
};

struct Table {
  std::string end_prefix;                                             // own uSID /(L+N)
  std::string end_lengths;                                            // "lblen L nflen N"
  std::map<std::string, std::pair<std::string, std::string>> routes;  // prefix -> (via, dev)
};

// The programmed network, read back from the exported text only (plus which interface is
// cabled to which, from the model).
struct Net {
  std::map<std::string, Table> tables;           // switch name -> table
  std::map<std::string, Node> owner;             // ifname -> node it belongs to
  std::map<std::string, std::string> peer;       // ifname -> other end
  std::map<std::string, std::string> ll;         // ifname -> "fe80::x/64"
  std::map<std::string, std::string> host_addr;  // host ifname -> "addr/128"
};

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

void read_lines(Net& net, const std::string& name, const std::vector<std::string>& lines) {
  Table& t = net.tables[name];
  for (const std::string& l : lines) {
    const auto w = words(l);
    ASSERT_GE(w.size(), 7u) << l;
    ASSERT_EQ(w[0] + w[1], "ip-6") << l;
    if (w[2] == "addr") {
      ASSERT_EQ(w[5], "dev") << l;
      if (w[4].starts_with("fe80")) {
        net.ll[w[6]] = w[4];
      } else {
        net.host_addr[w[6]] = w[4];
      }
      continue;
    }
    ASSERT_EQ(w[2] + w[3], "routeadd") << l;
    if (l.find(kEnd) != std::string::npos) {
      EXPECT_TRUE(t.end_prefix.empty()) << "two End routes on " << name;
      t.end_prefix = w[4];
      t.end_lengths = w[11] + " " + w[12] + " " + w[13] + " " + w[14];
      EXPECT_TRUE(net.owner.count(w.back())) << l;  // dev is one of its ports
      continue;
    }
    ASSERT_EQ(w.size(), 9u) << l;
    ASSERT_EQ(w[5], "via") << l;
    ASSERT_EQ(w[7], "dev") << l;
    EXPECT_TRUE(t.routes.emplace(w[4], std::make_pair(w[6], w[8])).second) << l;
  }
}

Net build(const Fabric& f, std::vector<SwitchId>* all = nullptr) {
  Net net;
  std::vector<SwitchId> sw;
  for (uint32_t p = 0; p < f.config().planes; ++p) {
    for (uint32_t t = 0; t < f.t0s(); ++t) sw.push_back({Tier::kT0, p, t});
    for (uint32_t s = 0; s < f.config().spines; ++s) sw.push_back({Tier::kT1, p, s});
  }
  for (SwitchId s : sw) {
    for (const Port& p : f.ports(s)) {
      EXPECT_TRUE(net.owner.emplace(p.ifname, Node{false, s, 0}).second) << p.ifname;
      net.peer[p.ifname] = p.peer_if;
      if (p.to_host) {
        net.owner[p.peer_if] = Node{true, {}, p.peer};
        net.peer[p.peer_if] = p.ifname;
      }
    }
  }
  for (SwitchId s : sw) read_lines(net, f.switch_name(s), linux_switch_commands(f, s));
  for (uint32_t p = 0; p < f.config().planes; ++p) {
    for (uint32_t h = 0; h < f.config().hosts; ++h) {
      read_lines(net, "host" + std::to_string(h) + "p" + std::to_string(p),
                 linux_host_commands(f, h, p));
    }
  }
  if (all) *all = sw;
  return net;
}

// Whether `pfx` ("addr/len") holds `a`.
bool holds(const std::string& pfx, const Ipv6& a) {
  auto r = parse_prefix(pfx);
  if (!r) return false;
  const int len = r->second;
  for (int i = 0; i < len; ++i) {
    const int byte = i / 8, bit = 7 - i % 8;
    if (((r->first[byte] >> bit) & 1) != ((a[byte] >> bit) & 1)) return false;
  }
  return true;
}

// The longest prefix of the table (its End route included) that holds `a`; "" if none.
std::string lookup(const Table& t, const Ipv6& a) {
  std::string best;
  int best_len = -1;
  auto consider = [&](const std::string& pfx) {
    const int len = std::stoi(pfx.substr(pfx.find('/') + 1));
    if (len > best_len && holds(pfx, a)) {
      best = pfx;
      best_len = len;
    }
  };
  if (!t.end_prefix.empty()) consider(t.end_prefix);
  for (const auto& [pfx, r] : t.routes) consider(pfx);
  return best;
}

// Sends `dst` from host `src` on `plane`, hop by hop; returns the host it reaches or fails.
void walk(const Fabric& f, const Net& net, uint32_t src, uint32_t plane, Ipv6 dst,
          uint32_t want_host, int want_switch_hops) {
  std::string dev = f.host_ifname(src, plane);
  int hops = 0;
  for (int guard = 0; guard < 16; ++guard) {
    // Leave by `dev`: the next node is the other end of its cable.
    ASSERT_TRUE(net.peer.count(dev)) << dev;
    const std::string in_if = net.peer.at(dev);
    const Node& n = net.owner.at(in_if);
    if (n.is_host) {
      EXPECT_EQ(n.host, want_host);
      EXPECT_EQ(hops, want_switch_hops);
      EXPECT_EQ(prefix(dst, 128), net.host_addr.at(in_if)) << "delivered address not owned";
      return;
    }
    ++hops;
    const Table& t = net.tables.at(f.switch_name(n.sw));
    std::string pfx = lookup(t, dst);
    if (pfx == t.end_prefix) {
      EXPECT_EQ(t.end_lengths, "lblen " + std::to_string(f.block_bits(plane)) + " nflen " +
                                   std::to_string(f.usid_bits(plane)));
      dst = f.shift(plane, dst);
      pfx = lookup(t, dst);
    }
    auto r = t.routes.find(pfx);
    ASSERT_NE(r, t.routes.end()) << f.switch_name(n.sw) << " has no route for " << pfx;
    dev = r->second.second;
    ASSERT_EQ(net.owner.at(dev).sw, n.sw) << "route leaves by another switch's port";
    // The next hop is the link-local on the far end of that port.
    EXPECT_EQ(r->second.first + "/64", net.ll.at(net.peer.at(dev)));
  }
  FAIL() << "routing loop";
}

TEST(Srv6LinuxExport, EveryPath_ResolvesHopByHop) {
  FabricConfig c;
  c.hosts = 11;  // last T0 holds 3 hosts
  c.planes = 2;
  c.spines = 3;
  c.hosts_per_t0 = 4;
  auto f = Fabric::make(c);
  ASSERT_TRUE(f.ok());
  std::vector<SwitchId> sw;
  const Net net = build(*f, &sw);
  for (SwitchId s : sw) {
    EXPECT_EQ(net.tables.at(f->switch_name(s)).end_prefix, f->usid_prefix(s.plane, f->usid(s)));
  }
  int walked = 0;
  for (uint32_t p = 0; p < c.planes; ++p) {
    for (uint32_t a = 0; a < c.hosts; ++a) {
      EXPECT_EQ(net.ll.at(f->host_ifname(a, p)), "fe80::1/64");
      for (uint32_t b = 0; b < c.hosts; ++b) {
        for (const Path& path : f->paths(a, b, p)) {
          walk(*f, net, a, p, path.dst, b, path.direct ? 1 : 3);
          ++walked;
        }
      }
    }
  }
  // Ordered pairs under one T0: 4*3 + 4*3 + 3*2 = 30 (one path each); the other 80: 3 each.
  EXPECT_EQ(walked, 2 * (30 + 80 * 3));
}

TEST(Srv6LinuxExport, SwitchLines_Shape) {
  FabricConfig c;
  c.hosts = 4;
  c.planes = 1;
  c.spines = 2;
  c.hosts_per_t0 = 2;
  auto f = Fabric::make(c);
  ASSERT_TRUE(f.ok());
  const auto v = linux_switch_commands(*f, {Tier::kT0, 0, 0});
  // 4 ports: 4 addr lines, 1 End, 4 routes.
  ASSERT_EQ(v.size(), 9u);
  EXPECT_EQ(v[0], "ip -6 addr add fe80::1/64 dev p0t0-s0");
  EXPECT_EQ(v[2], "ip -6 addr add fe80::2/64 dev p0t0-h0");
  EXPECT_EQ(v[4],
            "ip -6 route add fcbb:bbbb:1::/48 encap seg6local action End flavors next-csid "
            "lblen 32 nflen 16 dev p0t0-s0");
  EXPECT_EQ(v[5], "ip -6 route add fcbb:bbbb:3::/48 via fe80::2 dev p0t0-s0");
  EXPECT_EQ(v[7], "ip -6 route add fcbb:bbbb:f000::/48 via fe80::1 dev p0t0-h0");
  const auto h = linux_host_commands(*f, 3, 0);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[1], "ip -6 addr add fcbb:bbbb:f001:2::/128 dev p0h3");
  EXPECT_EQ(h[2], "ip -6 route add fcbb:bbbb::/32 via fe80::2 dev p0h3");
  EXPECT_EQ(join_lines({"a", "b"}), "a\nb\n");
}

TEST(Srv6LinuxExport, Scale_OneSwitchEachTier) {
  FabricConfig c;
  c.hosts = 512 * 256;
  c.planes = 8;
  c.spines = 256;
  c.hosts_per_t0 = 256;
  auto f = Fabric::make(c);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(linux_switch_commands(*f, {Tier::kT0, 7, 511}).size(), 2u * 512 + 1);
  EXPECT_EQ(linux_switch_commands(*f, {Tier::kT1, 7, 255}).size(), 2u * 512 + 1);
}

// A hand-written fabric (srv6/config.h explicit form, /48 blocks, hand-assigned uSIDs, both
// host address forms): every path's address resolves through the exported tables alone.
TEST(Srv6LinuxExport, ExplicitFabric_EveryPathResolvesHopByHop) {
  auto f = load(testing::kHandFabric);
  ASSERT_TRUE(f.ok()) << f.error();
  std::vector<SwitchId> sw;
  const Net net = build(*f, &sw);
  for (SwitchId s : sw) {
    EXPECT_EQ(net.tables.at(f->switch_name(s)).end_prefix, f->usid_prefix(s.plane, f->usid(s)));
  }
  int walked = 0;
  for (uint32_t p = 0; p < 2; ++p) {
    for (uint32_t a = 0; a < 4; ++a) {
      for (uint32_t b = 0; b < 4; ++b) {
        for (const Path& path : f->paths(a, b, p)) {
          walk(*f, net, a, p, path.dst, b, path.direct ? 1 : 3);
          ++walked;
        }
      }
    }
  }
  // Per plane: 4 ordered pairs under one T0 (one path each), 8 across (2 spines each).
  EXPECT_EQ(walked, 2 * (4 + 8 * 2));
}

TEST(Srv6LinuxExport, ExplicitFabric_Lines) {
  auto f = load(testing::kHandFabric);
  ASSERT_TRUE(f.ok()) << f.error();
  const auto t0 = linux_switch_commands(*f, {Tier::kT0, 0, 1});  // leaf1-a
  ASSERT_EQ(t0.size(), 9u);
  EXPECT_EQ(t0[4],
            "ip -6 route add fcbb:bbbb:cc00:102::/64 encap seg6local action End flavors "
            "next-csid lblen 48 nflen 16 dev p0t1-s0");
  EXPECT_EQ(t0[5], "ip -6 route add fcbb:bbbb:cc00:201::/64 via fe80::2 dev p0t1-s0");
  EXPECT_EQ(t0[6], "ip -6 route add fcbb:bbbb:cc00:202::/64 via fe80::2 dev p0t1-s1");
  EXPECT_EQ(t0[7], "ip -6 route add fcbb:bbbb:cc00:f001::/64 via fe80::1 dev p0t1-h0");
  const auto t0b = linux_switch_commands(*f, {Tier::kT0, 1, 1});  // leaf1-b: locator form
  EXPECT_EQ(t0b[8], "ip -6 route add fcbb:bbbb:dd00:102:b::/128 via fe80::1 dev p1t1-h1");
  const auto t1 = linux_switch_commands(*f, {Tier::kT1, 1, 0});
  EXPECT_EQ(t1[2],
            "ip -6 route add fcbb:bbbb:dd00:301::/64 encap seg6local action End flavors "
            "next-csid lblen 48 nflen 16 dev p1s0-t0");
  EXPECT_EQ(t1[4], "ip -6 route add fcbb:bbbb:dd00:102::/64 via fe80::1 dev p1s0-t1");
  const auto h = linux_host_commands(*f, 3, 1);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[1], "ip -6 addr add fcbb:bbbb:dd00:102:b::/128 dev p1h3");
  EXPECT_EQ(h[2], "ip -6 route add fcbb:bbbb:dd00::/48 via fe80::2 dev p1h3");
  // Plain routes: each host port's prefix (/80 here: block 48 + two uSIDs).
  const auto plain = ip_commands(switch_plan(*f, {Tier::kT1, 0, 0}, {.plain_routes = true}));
  EXPECT_EQ(plain.back(), "ip -6 route add fcbb:bbbb:cc00:f002:102::/80 via fe80::1 dev p0s0-t1");
}

}  // namespace
}  // namespace mrc::srv6
