// Tests for srv6/src/fabric.cc: uSID plan, addresses, paths, EVs, scale.
#include "srv6/fabric.h"

#include <gtest/gtest.h>

#include <set>

namespace mrc::srv6 {
namespace {

Fabric make(uint32_t hosts, uint32_t planes, uint32_t spines, uint32_t hpt) {
  FabricConfig c;
  c.hosts = hosts;
  c.planes = planes;
  c.spines = spines;
  c.hosts_per_t0 = hpt;
  auto f = Fabric::make(c);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error());
  return std::move(f).value();
}

TEST(Srv6Fabric, Usids_UniqueAndOwned) {
  const Fabric f = make(10, 3, 4, 4);  // 3 T0s per plane, the last holds 2 hosts
  EXPECT_EQ(f.t0s(), 3u);
  EXPECT_EQ(f.hosts_under(2), 2u);
  std::set<std::pair<uint32_t, uint32_t>> seen;  // generated: unique over all planes too
  std::set<uint32_t> all;
  for (uint32_t p = 0; p < 3; ++p) {
    for (uint32_t t = 0; t < f.t0s(); ++t) {
      const SwitchId s{Tier::kT0, p, t};
      EXPECT_TRUE(seen.insert({p, f.usid(s)}).second);
      EXPECT_TRUE(all.insert(f.usid(s)).second);
      SwitchId o;
      ASSERT_TRUE(f.owner(p, f.usid(s), &o));
      EXPECT_FALSE(f.owner((p + 1) % 3, f.usid(s), &o));  // another plane's
      EXPECT_EQ(o, s);
    }
    for (uint32_t sp = 0; sp < 4; ++sp) {
      const SwitchId s{Tier::kT1, p, sp};
      EXPECT_TRUE(seen.insert({p, f.usid(s)}).second);
      EXPECT_TRUE(all.insert(f.usid(s)).second);
      SwitchId o;
      ASSERT_TRUE(f.owner(p, f.usid(s), &o));
      EXPECT_FALSE(f.owner((p + 1) % 3, f.usid(s), &o));  // another plane's
      EXPECT_EQ(o, s);
    }
  }
  EXPECT_EQ(seen.size(), f.switches());
  EXPECT_EQ(all.count(0), 0u);
  // Host uSIDs: unique under each T0, disjoint from node uSIDs; (T0, host) unique overall.
  std::set<std::pair<uint32_t, uint32_t>> ports;
  std::set<std::string> addrs;
  for (uint32_t p = 0; p < 3; ++p) {
    for (uint32_t h = 0; h < 10; ++h) {
      EXPECT_GE(f.host_usid(h), kHostUsidBase);
      EXPECT_TRUE(ports.insert({f.t0_usid(p, f.t0_of(h)), f.host_usid(h)}).second);
      EXPECT_TRUE(addrs.insert(format(f.host_address(h, p))).second);
    }
  }
  SwitchId o;
  EXPECT_FALSE(f.owner(0, f.host_usid(0), &o));
  EXPECT_FALSE(f.owner(0, 0, &o));
}

TEST(Srv6Fabric, Format_DefaultBlock) {
  const Fabric f = make(4, 1, 2, 2);
  EXPECT_EQ(format(f.address(0, {1})), "fcbb:bbbb:1::");
  EXPECT_EQ(f.usid_prefix(0, 0x20), "fcbb:bbbb:20::/48");
  EXPECT_EQ(format(f.address(0, {1, 2, 3, 4, 5, 6})), "fcbb:bbbb:1:2:3:4:5:6");
}

TEST(Srv6Fabric, ParseBlock_AcceptsOnlySlash32) {
  auto ok = parse_block("2001:db8::/32");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 0x20010db8u);
  EXPECT_FALSE(parse_block("2001:db8::").ok());
  EXPECT_FALSE(parse_block("2001:db8::/48").ok());
  EXPECT_FALSE(parse_block("2001:db8::1/32").ok());
  EXPECT_FALSE(parse_block("nonsense/32").ok());
}

TEST(Srv6Fabric, Paths_DifferentT0_OnePerSpineAndDecode) {
  const Fabric f = make(16, 2, 5, 4);
  const uint32_t src = 1, dst = 13;  // T0 0 and T0 3
  for (uint32_t p = 0; p < 2; ++p) {
    const auto v = f.paths(src, dst, p);
    ASSERT_EQ(v.size(), 5u);
    std::set<uint32_t> evs;
    for (uint32_t s = 0; s < 5; ++s) {
      const Path& path = v[s];
      EXPECT_FALSE(path.direct);
      EXPECT_EQ(path.spine, s);
      EXPECT_EQ(path.plane, p);
      EXPECT_TRUE(evs.insert(path.ev).second);
      EXPECT_EQ(f.usid_at(p, path.dst, 0), f.t1_usid(p, s));
      EXPECT_EQ(f.usid_at(p, path.dst, 1), f.t0_usid(p, 3));
      EXPECT_EQ(f.usid_at(p, path.dst, 2), f.host_usid(dst));
      // The spine and the destination T0 each shift once; the src T0 only forwards.
      Ipv6 a = f.shift(p, f.shift(p, path.dst));
      EXPECT_EQ(a, f.host_address(dst, p));
    }
  }
}

TEST(Srv6Fabric, HostOf_EveryPortAddressAndNothingElse) {
  const Fabric f = make(10, 3, 4, 4);  // the last T0 holds 2 hosts: 0xF002.. under it are none
  for (uint32_t h = 0; h < 10; ++h) {
    for (uint32_t p = 0; p < 3; ++p) {
      Ipv6 a = f.host_address(h, p);
      EXPECT_EQ(f.host_of(a), h) << "host " << h << " plane " << p;
      a[15] = 0x42;  // the interface id (a GID's low half) does not matter
      EXPECT_EQ(f.host_of(a), h);
    }
  }
  Ipv6 ghost = f.host_address(9, 0);  // host 9 is index 1 under T0 2; index 2 does not exist
  ghost[5] = static_cast<uint8_t>(ghost[5] + 1);
  EXPECT_FALSE(f.host_of(ghost).has_value());
  for (const Path& path : f.paths(0, 9, 1)) EXPECT_FALSE(f.host_of(path.dst).has_value());
  Ipv6 other_block = f.host_address(3, 0);
  other_block[0] ^= 0x01;
  EXPECT_FALSE(f.host_of(other_block).has_value());
  EXPECT_FALSE(f.host_of(Ipv6{}).has_value());
}

TEST(Srv6Fabric, Paths_SameT0_Direct) {
  const Fabric f = make(16, 2, 5, 4);
  const auto v = f.paths(4, 6, 1);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(v[0].direct);
  EXPECT_EQ(f.usid_at(1, v[0].dst, 0), f.t0_usid(1, 1));
  EXPECT_EQ(f.usid_at(1, v[0].dst, 1), f.host_usid(6));
  EXPECT_EQ(f.shift(1, v[0].dst), f.host_address(6, 1));
}

TEST(Srv6Fabric, Paths_BadInput_Empty) {
  const Fabric f = make(16, 2, 5, 4);
  EXPECT_TRUE(f.paths(3, 3, 0).empty());
  EXPECT_TRUE(f.paths(3, 16, 0).empty());
  EXPECT_TRUE(f.paths(3, 4, 2).empty());
}

TEST(Srv6Fabric, Ev_RoundTrip) {
  const Fabric f = make(64, 8, 256, 8);
  EXPECT_EQ(Fabric::ev(7, 255, 9), 7u << 16 | 255u << 8 | 9u);
  for (uint32_t p : {0u, 3u, 7u}) {
    for (const Path& path : f.paths(0, 63, p)) {
      EXPECT_EQ(Fabric::plane_of(path.ev), p);
      EXPECT_EQ(Fabric::spine_of(path.ev), path.spine);
      auto back = f.path_for_ev(0, 63, path.ev);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(back->dst, path.dst);
      EXPECT_EQ(back->spine, path.spine);
      EXPECT_EQ(back->plane, p);
    }
  }
  // Salt k does not change the route, only the EV.
  auto a = f.path_for_ev(0, 63, Fabric::ev(1, 3, 0));
  auto b = f.path_for_ev(0, 63, Fabric::ev(1, 3, 200));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->dst, b->dst);
  EXPECT_EQ(b->ev, Fabric::ev(1, 3, 200));
  EXPECT_FALSE(f.path_for_ev(0, 63, Fabric::ev(8, 0, 0)).ok());
  EXPECT_FALSE(f.path_for_ev(0, 0, Fabric::ev(0, 0, 0)).ok());
}

TEST(Srv6Fabric, Ev_SpineWrapsLikeSim) {
  const Fabric f = make(16, 1, 3, 4);
  auto p = f.path_for_ev(0, 15, Fabric::ev(0, 4, 0));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->spine, 1u);
}

TEST(Srv6Fabric, Make_RejectsBadCounts) {
  FabricConfig c;
  c.hosts = 4;
  c.planes = 17;
  c.spines = 2;
  c.hosts_per_t0 = 2;
  auto f = Fabric::make(c);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().find("planes"), std::string::npos);
  c.planes = 1;
  c.spines = 257;
  EXPECT_FALSE(Fabric::make(c).ok());
  c.spines = 2;
  c.hosts_per_t0 = 4097;
  EXPECT_FALSE(Fabric::make(c).ok());
  c.hosts_per_t0 = 1;
  c.hosts = 70000;  // 70000 T0s: node uSIDs run out
  auto g = Fabric::make(c);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().find("16-bit"), std::string::npos);
}

TEST(Srv6Fabric, Ports_NamesFitIfnamsiz) {
  // Largest indexes the limits allow: plane 15, spine 255, T0 near kMaxNodeUsid, host 4095.
  FabricConfig c;
  c.planes = 16;
  c.spines = 256;
  c.hosts_per_t0 = 4096;
  c.hosts = 4096 * 3000;  // 16 * (3000 + 256) = 52096 node uSIDs
  auto f = Fabric::make(c);
  ASSERT_TRUE(f.ok()) << f.error();
  for (const Port& p : f->ports({Tier::kT0, 15, 2999})) {
    EXPECT_LE(p.ifname.size(), 15u) << p.ifname;
    EXPECT_LE(p.peer_if.size(), 15u) << p.peer_if;
  }
  EXPECT_LE(f->host_ifname(c.hosts - 1, 15).size(), 15u);
}

// The published scale: 512 T0 x 256 NICs per T0 (131,072 hosts), 8 planes, 256 spines.
TEST(Srv6Fabric, Scale_PublishedSize) {
  const Fabric f = make(512 * 256, 8, 256, 256);
  EXPECT_EQ(f.t0s(), 512u);
  EXPECT_EQ(f.switches(), 8u * (512 + 256));
  const auto v = f.paths(0, 131071, 7);
  EXPECT_EQ(v.size(), 256u);
  EXPECT_EQ(f.paths(0, 255, 7).size(), 1u);
  EXPECT_EQ(f.ports({Tier::kT0, 7, 511}).size(), 256u + 256u);
  EXPECT_EQ(f.ports({Tier::kT1, 7, 255}).size(), 512u);
  // A path set from one host to a spread of others on every plane.
  size_t n = 0;
  for (uint32_t p = 0; p < 8; ++p) {
    for (uint32_t dst = 1; dst < 131072; dst += 997) n += f.paths(0, dst, p).size();
  }
  EXPECT_GT(n, 0u);
}

}  // namespace
}  // namespace mrc::srv6
