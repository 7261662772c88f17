// Tests for srv6/src/export_sonic.cc: config_db JSON for one switch.
#include "srv6/export_sonic.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hand_fabric.h"
#include "srv6/config.h"

namespace mrc::srv6 {
namespace {

TEST(Srv6Sonic, Config_T0AndT1) {
  FabricConfig c;
  c.hosts = 8;
  c.planes = 2;
  c.spines = 3;
  c.hosts_per_t0 = 4;
  auto f = Fabric::make(c);
  ASSERT_TRUE(f.ok());
  for (SwitchId s : {SwitchId{Tier::kT0, 1, 1}, SwitchId{Tier::kT1, 1, 2}}) {
    const auto j = nlohmann::json::parse(sonic_config(*f, s));
    const std::string own = f->usid_prefix(s.plane, f->usid(s));
    const auto& loc = j.at("SRV6_MY_LOCATORS").at("loc1");
    EXPECT_EQ(loc.at("prefix"), own);
    EXPECT_EQ(loc.at("block_len"), "32");
    EXPECT_EQ(loc.at("node_len"), "16");
    EXPECT_EQ(loc.at("func_len"), "16");
    EXPECT_EQ(loc.at("arg_len"), "0");
    const auto& sid = j.at("SRV6_MY_SIDS").at("loc1|" + own);
    EXPECT_EQ(sid.at("action"), "uN");
    EXPECT_EQ(sid.at("decap_dscp_mode"), "pipe");
    const auto& routes = j.at("STATIC_ROUTE");
    EXPECT_EQ(routes.size(), f->ports(s).size());
    for (const Port& p : f->ports(s)) {
      const auto& r = routes.at(prefix(p.route, p.route_len));
      EXPECT_EQ(r.at("ifname"), p.ifname);
      EXPECT_EQ(r.at("nexthop"), p.peer_ll);
    }
  }
}

TEST(Srv6Sonic, Config_ScaleOneSwitch) {
  FabricConfig c;
  c.hosts = 512 * 256;
  c.planes = 8;
  c.spines = 256;
  c.hosts_per_t0 = 256;
  auto f = Fabric::make(c);
  ASSERT_TRUE(f.ok());
  const auto j = nlohmann::json::parse(sonic_config(*f, {Tier::kT1, 3, 100}));
  EXPECT_EQ(j.at("STATIC_ROUTE").size(), 512u);
}

TEST(Srv6Sonic, Config_ExplicitFabric) {
  auto f = load(testing::kHandFabric);
  ASSERT_TRUE(f.ok()) << f.error();
  const auto j = nlohmann::json::parse(sonic_config(*f, {Tier::kT0, 1, 0}));  // leaf0-b
  const auto& loc = j.at("SRV6_MY_LOCATORS").at("loc1");
  EXPECT_EQ(loc.at("prefix"), "fcbb:bbbb:dd00:101::/64");
  EXPECT_EQ(loc.at("block_len"), "48");
  EXPECT_EQ(loc.at("node_len"), "16");
  EXPECT_EQ(j.at("SRV6_MY_SIDS").at("loc1|fcbb:bbbb:dd00:101::/64").at("action"), "uN");
  const auto& routes = j.at("STATIC_ROUTE");
  ASSERT_EQ(routes.size(), 4u);  // 2 spines up, 2 hosts down
  EXPECT_EQ(routes.at("fcbb:bbbb:dd00:302::/64").at("ifname"), "p1t0-s1");
  EXPECT_EQ(routes.at("fcbb:bbbb:dd00:101:a::/128").at("ifname"), "p1t0-h0");
  EXPECT_EQ(routes.at("fcbb:bbbb:dd00:101:b::/128").at("nexthop"), "fe80::1");
}

}  // namespace
}  // namespace mrc::srv6
