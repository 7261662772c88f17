// Tests for srv6/src/config.cc: JSON description round trip and error messages.
#include "srv6/config.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(format(f->address({1})), "2001:db8:1::");
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

}  // namespace
}  // namespace mrc::srv6
