// Tests for srv6/src/export_sonic.cc: config_db JSON for one switch.
#include "srv6/export_sonic.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
    const std::string own = f->usid_prefix(f->usid(s));
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
      const auto& r = routes.at(f->usid_prefix(p.peer_usid));
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

}  // namespace
}  // namespace mrc::srv6
