// Tests for srv6/src/config.cc: JSON description round trip and error messages.
#include "srv6/config.h"

#include <gtest/gtest.h>

#include "hand_fabric.h"
#include "srv6/export_linux.h"
#include "srv6/export_sonic.h"

namespace mrc::srv6 {
namespace {

const char* kGood = R"({"hosts": 6, "planes": 2, "spines": 3, "hosts_per_t0": 4,
  "block": "2001:db8::/32", "host_port_gbps": 100, "uplink_gbps": 400,
  "names": ["a", "b", "c", "d", "e", "f"]})";

TEST(Srv6Config, Load_Good) {
  auto f = load(kGood);
  ASSERT_TRUE(f.ok()) << f.error();
  const FabricConfig& c = f->config();
  EXPECT_EQ(c.hosts, 6u);
  EXPECT_EQ(c.planes, 2u);
  EXPECT_EQ(c.spines, 3u);
  EXPECT_EQ(c.hosts_per_t0, 4u);
  EXPECT_EQ(c.block, 0x20010db8u);
  EXPECT_EQ(c.host_port_gbps, 100);
  EXPECT_EQ(c.uplink_gbps, 400);
  ASSERT_EQ(c.names.size(), 6u);
  EXPECT_EQ(c.names[5], "f");
  EXPECT_EQ(format(f->address(0, {1})), "2001:db8:1::");
}

TEST(Srv6Config, Load_DefaultsBlockAndSpeeds) {
  auto f = load(R"({"hosts": 2, "planes": 1, "spines": 1, "hosts_per_t0": 2})");
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->config().block, 0xfcbbbbbbu);
  EXPECT_TRUE(f->config().names.empty());
}

TEST(Srv6Config, DumpLoad_RoundTrip) {
  auto f = load(kGood);
  ASSERT_TRUE(f.ok());
  const std::string text = dump(*f);
  auto g = load(text);
  ASSERT_TRUE(g.ok()) << g.error() << "\n" << text;
  const FabricConfig &a = f->config(), &b = g->config();
  EXPECT_EQ(a.hosts, b.hosts);
  EXPECT_EQ(a.planes, b.planes);
  EXPECT_EQ(a.spines, b.spines);
  EXPECT_EQ(a.hosts_per_t0, b.hosts_per_t0);
  EXPECT_EQ(a.block, b.block);
  EXPECT_EQ(a.host_port_gbps, b.host_port_gbps);
  EXPECT_EQ(a.uplink_gbps, b.uplink_gbps);
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(dump(*g), text);
}

struct Bad {
  const char* json;
  const char* expect;  // substring of the error
};

TEST(Srv6Config, Load_BadInput_NamesField) {
  const Bad cases[] = {
      {R"({"planes": 1, "spines": 1, "hosts_per_t0": 1})", "/hosts: missing"},
      {R"({"hosts": "4", "planes": 1, "spines": 1, "hosts_per_t0": 1})", "/hosts: must be"},
      {R"({"hosts": 4, "planes": 0, "spines": 1, "hosts_per_t0": 1})", "/planes: must be > 0"},
      {R"({"hosts": 4, "planes": -1, "spines": 1, "hosts_per_t0": 1})", "/planes: must be > 0"},
      {R"({"hosts": 4, "planes": 1.5, "spines": 1, "hosts_per_t0": 1})", "/planes: must be"},
      {R"({"hosts": 4, "planes": 17, "spines": 1, "hosts_per_t0": 1})", "/planes: must be 1..16"},
      {R"({"hosts": 4, "planes": 1, "spines": 300, "hosts_per_t0": 1})", "/spines: must be 1..256"},
      {R"({"hosts": 4, "planes": 1, "spines": 1})", "/hosts_per_t0: missing"},
      {R"({"hosts": 4, "planes": 1, "spines": 1, "hosts_per_t0": 5000})", "/hosts_per_t0"},
      {R"({"hosts": 4, "planes": 1, "spines": 1, "hosts_per_t0": 1, "block": "fcbb::/48"})",
       "/block: 'fcbb::/48' is not a /32"},
      {R"({"hosts": 4, "planes": 1, "spines": 1, "hosts_per_t0": 1, "block": "fcbb::"})",
       "/block:"},
      {R"({"hosts": 4, "planes": 1, "spines": 1, "hosts_per_t0": 1, "block": "zz::/32"})",
       "/block:"},
      {R"({"hosts": 4, "planes": 1, "spines": 1, "hosts_per_t0": 1, "block": 5})",
       "/block: must be a string"},
      {R"({"hosts": 4, "planes": 1, "spines": 1, "hosts_per_t0": 1, "uplink_gbps": 0})",
       "/uplink_gbps: must be > 0"},
      {R"({"hosts": 4, "planes": 1, "spines": 1, "hosts_per_t0": 1, "host_port_gbps": "x"})",
       "/host_port_gbps: must be a number"},
      {R"({"hosts": 2, "planes": 1, "spines": 1, "hosts_per_t0": 1, "names": ["a", 3]})",
       "/names/1: must be a string"},
      {R"({"hosts": 2, "planes": 1, "spines": 1, "hosts_per_t0": 1, "names": ["a"]})",
       "/names: need one name per host"},
      {R"({"hosts": 2, "planes": 1, "spines": 1, "hosts_per_t0": 1, "names": "a"})",
       "/names: must be an array"},
      {R"({"hosts": 100000, "planes": 1, "spines": 1, "hosts_per_t0": 1})",
       "/hosts: too many switches for 16-bit uSIDs"},
      {R"([1, 2])", "/: must be a JSON object"},
      {R"({"hosts": )", "/: not valid JSON"},
  };
  for (const Bad& b : cases) {
    auto f = load(b.json);
    ASSERT_FALSE(f.ok()) << b.json;
    EXPECT_NE(f.error().find(b.expect), std::string::npos)
        << b.json << "\n  got: " << f.error() << "\n  want: " << b.expect;
  }
}

TEST(Srv6Config, LoadExplicit_HandWritten) {
  auto f = load(testing::kHandFabric);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_TRUE(f->is_explicit());
  const FabricConfig& c = f->config();
  EXPECT_EQ(c.hosts, 4u);
  EXPECT_EQ(c.planes, 2u);
  EXPECT_EQ(c.spines, 2u);
  EXPECT_EQ(c.hosts_per_t0, 2u);
  EXPECT_EQ(c.host_port_gbps, 2);
  EXPECT_EQ(c.names, (std::vector<std::string>{"gpu0", "gpu1", "gpu2", "gpu3"}));
  EXPECT_EQ(f->t0s(), 2u);
  EXPECT_EQ(f->block_bits(1), 48);
  EXPECT_EQ(f->usid_bits(1), 16);
  EXPECT_EQ(f->t1_usid(0, 1), 0x0202u);  // 514 as a number
  EXPECT_EQ(f->switch_label({Tier::kT1, 1, 0}), "spine0-b");
  EXPECT_EQ(f->switch_name({Tier::kT1, 1, 0}), "t1p1-0");  // namespaces keep structural names
  EXPECT_EQ(f->t0_of(2), 1u);
  EXPECT_EQ(f->local_index(3), 1u);
  EXPECT_EQ(format(f->host_address(2, 1)), "fcbb:bbbb:dd00:102:a::");
  // Paths spell the switches' own uSIDs after a /48 block, then the address's own bits.
  // Plane 0 (host-uSID form): T1 | T0 | f001 | T0.
  auto p0 = f->paths(0, 2, 0);
  ASSERT_EQ(p0.size(), 2u);
  EXPECT_EQ(format(p0[1].dst), "fcbb:bbbb:cc00:202:102:f001:102:0");
  // Plane 1 (locator form): T1 | the address after its block (it starts with its T0).
  auto p1 = f->paths(0, 2, 1);
  ASSERT_EQ(p1.size(), 2u);
  EXPECT_EQ(format(p1[0].dst), "fcbb:bbbb:dd00:301:102:a::");
  // Under one T0: plane 0 goes through the T0's uSID, plane 1 is the address itself.
  EXPECT_EQ(format(f->paths(0, 1, 0)[0].dst), "fcbb:bbbb:cc00:101:f002:101::");
  EXPECT_EQ(format(f->paths(0, 1, 1)[0].dst), "fcbb:bbbb:dd00:101:b::");
  // Each switch on the way shifts once; what arrives is the host's address.
  for (uint32_t p = 0; p < 2; ++p) {
    for (uint32_t a = 0; a < 4; ++a) {
      for (uint32_t b = 0; b < 4; ++b) {
        for (const Path& path : f->paths(a, b, p)) {
          Ipv6 d = path.dst;
          if (!path.direct) d = f->shift(p, d);  // the spine
          if (f->usid_at(p, d, 0) == f->t0_usid(p, f->t0_of(b)) && d != f->host_address(b, p))
            d = f->shift(p, d);  // the T0's End (the locator form is delivered as is)
          EXPECT_EQ(d, f->host_address(b, p)) << a << "->" << b << " plane " << p;
        }
      }
    }
  }
  EXPECT_EQ(f->host_of(f->host_address(3, 1)), 3u);
  EXPECT_FALSE(f->host_of(p1[0].dst).has_value());
}

TEST(Srv6Config, DumpLoad_ExplicitRoundTrip) {
  auto f = load(testing::kHandFabric);
  ASSERT_TRUE(f.ok()) << f.error();
  const std::string text = dump(*f);
  auto g = load(text);
  ASSERT_TRUE(g.ok()) << g.error() << "\n" << text;
  EXPECT_EQ(dump(*g), text);
  EXPECT_EQ(dump_explicit(*g), text);
}

// Everything exported or routed from the two forms of one generated plan.
std::string everything(const Fabric& f) {
  std::string s;
  const FabricConfig& c = f.config();
  for (uint32_t p = 0; p < c.planes; ++p) {
    for (uint32_t t = 0; t < f.t0s() + c.spines; ++t) {
      const SwitchId sw =
          t < f.t0s() ? SwitchId{Tier::kT0, p, t} : SwitchId{Tier::kT1, p, t - f.t0s()};
      s += join_lines(ip_commands(switch_plan(f, sw, {.plain_routes = true})));
      s += sonic_config(f, sw);
    }
    for (uint32_t a = 0; a < c.hosts; ++a) {
      for (uint32_t b = 0; b < c.hosts; ++b) {
        for (uint32_t e = 0; e < 4; ++e) {
          auto path = f.path_for_ev(a, b, Fabric::ev(p, e, 0));
          if (path.ok()) s += format(path->dst) + "\n";
        }
      }
    }
  }
  for (uint32_t h = 0; h < c.hosts; ++h) {
    s += join_lines(ip_commands(host_plan(f, h)));
    for (uint32_t p = 0; p < c.planes; ++p) {
      s += std::to_string(f.host_of(f.host_address(h, p)).value_or(99)) + " ";
      s += std::to_string(f.host_route_len(h, p)) + " " + std::to_string(f.host_prefix_len(h, p)) +
           "\n";
    }
  }
  return s;
}

TEST(Srv6Config, DumpExplicit_GeneratedPlan_SameFabric) {
  auto g = load(kGood);  // 6 hosts, 2 planes, 3 spines, 4 per T0, block 2001:db8::/32
  ASSERT_TRUE(g.ok());
  const std::string text = dump_explicit(*g);
  auto x = load(text);
  ASSERT_TRUE(x.ok()) << x.error() << "\n" << text;
  EXPECT_TRUE(x->is_explicit());
  EXPECT_FALSE(g->is_explicit());
  EXPECT_EQ(x->config().names, g->config().names);
  EXPECT_EQ(x->config().hosts_per_t0, g->config().hosts_per_t0);
  EXPECT_EQ(x->config().block, g->config().block);
  const std::string a = everything(*g), b = everything(*x);
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, b);
}

// A one-plane explicit fabric with `plane` as its plane and `hosts` as its hosts.
std::string one_plane(const std::string& plane, const std::string& hosts) {
  return R"({"planes": [)" + plane + R"(], "hosts": [)" + hosts + "]}";
}
const std::string kPlane =
    R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": 257}, {"usid": 258}],
        "t1": [{"usid": "0x0201"}, {"usid": "0x0202"}]})";
const std::string kHosts = R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:101::"]},
                              {"t0": 1, "addresses": ["fcbb:bbbb:cc00:102:7::"]})";

TEST(Srv6Config, LoadExplicit_SmallestGood) {
  auto f = load(one_plane(kPlane, kHosts));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->switch_label({Tier::kT0, 0, 1}), "t0p0-1");
  EXPECT_EQ(f->host_route_len(0, 0), 64);   // host uSID f001 on its T0
  EXPECT_EQ(f->host_route_len(1, 0), 128);  // in T0 0x0102's locator
}

// A given name that is another (unnamed) switch's structural name survives a round trip.
TEST(Srv6Config, DumpLoad_ExplicitNameLikeAnotherSwitchs) {
  auto f = load(one_plane(
      R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": 1, "name": "t0p0-1"}, {"usid": 2}],
          "t1": [{"usid": 3}]})",
      R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:1:7::"]})"));
  ASSERT_TRUE(f.ok()) << f.error();
  const std::string text = dump(*f);
  auto g = load(text);
  ASSERT_TRUE(g.ok()) << g.error() << "\n" << text;
  EXPECT_EQ(dump(*g), text);
  EXPECT_EQ(g->switch_label({Tier::kT0, 0, 0}), "t0p0-1");
}

TEST(Srv6Config, LoadExplicit_BadInput_NamesNodeAndField) {
  const std::string two_planes =
      R"({"planes": [)" + kPlane + "," +
      R"({"block": "fcbb:bbbb:dd00::/48", "t0": [{"usid": 257}, {"usid": 258}],
          "t1": [{"usid": "0x0103"}, {"usid": "0x0103"}]}],
          "hosts": [{"t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:101::", "fcbb:bbbb:dd00:101:1::"]}]})";
  const std::pair<std::string, std::string> cases[] = {
      {two_planes, "/planes/1/t1/1/usid: duplicate uSID 0x0103 (also t1 0)"},
      {one_plane(R"({"block": "fcbb:bbbb:c000::/44", "t0": [{"usid": 1}], "t1": [{"usid": 2}]})",
                 kHosts),
       "/planes/0/block: locator block of 44 bits: Linux next-csid takes a multiple of 8"},
      {one_plane(
           R"({"block": "fcbb::/16", "usid_bits": 12, "t0": [{"usid": 1}], "t1": [{"usid": 2}]})",
           kHosts),
       "/planes/0/usid_bits: uSID of 12 bits"},
      {one_plane(
           R"({"block": "fcbb:bbbb:cc00::/120", "usid_bits": 16, "t0": [{"usid": 1}], "t1": [{"usid": 2}]})",
           kHosts),
       "/planes/0/usid_bits: block 120 + uSID 16 bits: Linux next-csid needs at most 128"},
      {one_plane(
           R"({"block": "fcbb:bbbb:cc00::/48", "usid_bits": 40, "t0": [{"usid": 1}], "t1": [{"usid": 2}]})",
           kHosts),
       "/planes/0/usid_bits: 40 bits: at most 32 here"},
      {one_plane(R"({"block": "fcbb:bbbb:cc00:1::/48", "t0": [{"usid": 1}], "t1": [{"usid": 2}]})",
                 kHosts),
       "/planes/0/block: 'fcbb:bbbb:cc00:1::/48': bits past /48 are set"},
      {one_plane(
           R"({"block": "fcbb:bbbb:cc00::/48", "usid_bits": 8, "t0": [{"usid": 256}], "t1": [{"usid": 2}]})",
           kHosts),
       "/planes/0/t0/0/usid: must be 1..0xff for 8-bit uSIDs, got 0x100"},
      {one_plane(R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": 0}], "t1": [{"usid": 2}]})",
                 kHosts),
       "/planes/0/t0/0/usid: must be 1..0xffff"},
      {one_plane(
           R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": "0xzz"}], "t1": [{"usid": 2}]})",
           kHosts),
       "/planes/0/t0/0/usid: '0xzz' is not a uSID"},
      {one_plane(R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{}], "t1": [{"usid": 2}]})", kHosts),
       "/planes/0/t0/0/usid: missing"},
      {one_plane(R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": 1}]})", kHosts),
       "/planes/0/t1: missing"},
      {one_plane(R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": 1}], "t1": []})", kHosts),
       "/planes/0/t1: needs at least one T1"},
      {one_plane(
           R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": 1, "name": "a b"}], "t1": [{"usid": 2}]})",
           kHosts),
       "/planes/0/t0/0/name: 'a b': use 1..64 of"},
      {one_plane(
           R"({"block": "fcbb:bbbb:cc00::/48", "t0": [{"usid": 1, "name": "x"}], "t1": [{"usid": 2, "name": "x"}]})",
           kHosts),
       "/planes/0/t1/0/name: duplicate switch name 'x' (also planes/0/t0/0)"},
      {R"({"planes": [)" + kPlane + "," + kPlane.substr(0, kPlane.find("\"t1\"")) +
           R"("t1": [{"usid": 5}]}], "hosts": []})",
       "/planes/1/t1: 1 T1s, plane 0 has 2 (every plane needs as many)"},
      {one_plane(kPlane, R"({"t0": 2, "addresses": ["fcbb:bbbb:cc00:f001:101::"]})"),
       "/hosts/0/t0: 2 is not a T0 (each plane has 2, 0..1)"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": []})"),
       "/hosts/0/addresses: needs one address per plane (1), got 0"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["2001:db8::1"]})"),
       "/hosts/0/addresses/0: 2001:db8::1 is not in plane 0's locator block fcbb:bbbb:cc00::/48"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:101::"]},
                            {"t0": 1, "addresses": ["fcbb:bbbb:cc00:f001:101::"]})"),
       "/hosts/1/addresses/0: duplicate address fcbb:bbbb:cc00:f001:101:: (also host 0 plane 0)"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:101::"]},
                            {"t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:102::"]})"),
       "/hosts/1/addresses/0: fcbb:bbbb:cc00:f001:102::: host uSID 0xf001 is also host 0's under "
       "T0 0"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:201:101::"]})"),
       "/hosts/0/addresses/0: fcbb:bbbb:cc00:201:101::: its first uSID 0x0201 is t1 0's"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:0:101::"]})"),
       "the uSID after the block is 0"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:101::"]})"),
       "is T0 0's own locator"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:101:0:1:0"]})"),
       "/hosts/0/addresses/0: fcbb:bbbb:cc00:f001:101:0:1:0: a path through a spine puts 2 "
       "uSID(s) ahead"},
      {one_plane(kPlane, R"({"t0": 0, "addresses": ["nonsense"]})"),
       "/hosts/0/addresses/0: 'nonsense' is not an IPv6 address"},
      {one_plane(kPlane, R"({"addresses": ["fcbb:bbbb:cc00:f001:101::"]})"),
       "/hosts/0/t0: missing"},
      {one_plane(kPlane, R"({"name": "a", "t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:101::"]},
                            {"t0": 1, "addresses": ["fcbb:bbbb:cc00:102:7::"]})"),
       "/hosts/1/name: missing (other hosts have names)"},
      {R"({"planes": [], "hosts": []})", "/planes: must list 1..16 planes, got 0"},
      {R"({"planes": [)" + kPlane + R"(], "hosts": 4})", "/hosts: the explicit form"},
  };
  for (const auto& [json, want] : cases) {
    auto f = load(json);
    ASSERT_FALSE(f.ok()) << json;
    EXPECT_NE(f.error().find(want), std::string::npos)
        << json << "\n  got: " << f.error() << "\n  want: " << want;
  }
}

}  // namespace
}  // namespace mrc::srv6
