// The verbs device's GID table (device.cc build_gid_table) and fabric GIDs (gid_of_host,
// fabric_host_of) without a device: a
// hand-written fabric whose two hosts' port addresses share their first 64 bits (the locator
// form under one T0) must still give two GIDs, each naming its own host.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>

#include <cstring>

#include "mrc/io/udp/udp_driver.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {
namespace {

srv6::Ipv6 addr(const char* s) {
  srv6::Ipv6 a{};
  EXPECT_EQ(::inet_pton(AF_INET6, s, a.data()), 1) << s;
  return a;
}

ibv_gid gid_of(const srv6::Ipv6& a) {
  ibv_gid g{};
  std::memcpy(g.raw, a.data(), 16);
  return g;
}

// One plane, block fcbb:bbbb::/32 with 16-bit uSIDs, T0 0x100, T1 0x200; both hosts under the
// T0 in its locator: fcbb:bbbb:100::1:0:0 and fcbb:bbbb:100::2:0:0 (first 64 bits equal).
srv6::Fabric shared_prefix_fabric() {
  srv6::FabricSpec spec;
  srv6::PlaneSpec p;
  p.block = addr("fcbb:bbbb::");
  p.block_bits = 32;
  p.usid_bits = 16;
  p.t0s = {{"", 0x100}};
  p.t1s = {{"", 0x200}};
  spec.planes = {p};
  spec.hosts = {{"a", 0, {addr("fcbb:bbbb:100::1:0:0")}}, {"b", 0, {addr("fcbb:bbbb:100::2:0:0")}}};
  auto f = srv6::Fabric::make(spec);
  EXPECT_TRUE(f.ok()) << f.error();
  return std::move(f).value();
}

TEST(FabricHostOf, HostsSharingTheFirst64BitsAreToldApart) {
  const srv6::Fabric f = shared_prefix_fabric();
  ASSERT_EQ(std::memcmp(f.host_address(0, 0).data(), f.host_address(1, 0).data(), 8), 0);
  const ibv_gid g0 = gid_of_host(f, 0), g1 = gid_of_host(f, 1);
  EXPECT_NE(std::memcmp(g0.raw, g1.raw, 16), 0);
  EXPECT_EQ(fabric_host_of(f, g0), 0u);
  EXPECT_EQ(fabric_host_of(f, g1), 1u);
  // A port address given as the GID names its host too, by all of its bytes.
  EXPECT_EQ(fabric_host_of(f, gid_of(f.host_address(0, 0))), 0u);
  EXPECT_EQ(fabric_host_of(f, gid_of(f.host_address(1, 0))), 1u);
}

TEST(FabricHostOf, AGidOfNoHostIsNone) {
  const srv6::Fabric f = shared_prefix_fabric();
  EXPECT_EQ(fabric_host_of(f, gid_of(addr("fcbb:bbbb:100::3:0:0"))), std::nullopt);
  ibv_gid g = gid_of_host(f, 1);
  g.raw[15] ^= 0x80;  // the same prefix, another interface id
  EXPECT_EQ(fabric_host_of(f, g), std::nullopt);
}

// A QP given the peer's plane port address (not its GID) builds its tokens from the peer's
// canonical GID, the one the peer builds its own side from: else every packet is dropped for
// a bad token. Outside a fabric the GID given is used as it is.
TEST(TokenGid, APortAddressNamesThePeersCanonicalGid) {
  const srv6::Fabric f = shared_prefix_fabric();
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = gid_of(addr("fcbb:bbbb:100::2:0:0"));  // host b's port address
  const auto host = fabric_host_of(f, ah.grh.dgid);
  ASSERT_EQ(host, 1u);
  const ibv_gid g = token_gid(&f, ah, *host);
  const ibv_gid b = gid_of_host(f, 1);
  EXPECT_EQ(std::memcmp(g.raw, b.raw, 16), 0);
  EXPECT_NE(std::memcmp(g.raw, ah.grh.dgid.raw, 16), 0);  // the canonical GID is not the port
  const ibv_gid raw = token_gid(nullptr, ah, 0);
  EXPECT_EQ(std::memcmp(raw.raw, ah.grh.dgid.raw, 16), 0);
}

TEST(GidOfHost, InterfaceIdCarriesTheWholeHostId) {
  srv6::FabricConfig c;
  c.hosts = 70000;  // host ids past 16 bits
  c.planes = 1;
  c.spines = 1;
  c.hosts_per_t0 = 4096;
  auto f = srv6::Fabric::make(c);
  ASSERT_TRUE(f.ok()) << f.error();
  const ibv_gid a = gid_of_host(*f, 4), b = gid_of_host(*f, 4 + 65536);
  EXPECT_NE(std::memcmp(a.raw + 8, b.raw + 8, 8), 0);
  EXPECT_EQ(fabric_host_of(*f, b), 4u + 65536);
  const uint8_t iid[8] = {0x02, 0x4d, 0x52, 0x43, 0x00, 0x01, 0x00, 0x04};
  EXPECT_EQ(std::memcmp(b.raw + 8, iid, 8), 0);
}

io::UdpConfig planes(std::vector<std::string> addresses) {
  io::UdpConfig u;
  for (const std::string& a : addresses) u.planes.push_back({a, 4791});
  return u;
}

TEST(BuildGidTable, DeviceGidFirstThenEachPlaneAddressOnce) {
  // A fabric's device GID is none of the plane addresses: index 0, then planes 0, 1, 2.
  const ibv_gid g0 = gid_of(addr("fcbb:bbbb:100:0:24d:5243:0:7"));
  const auto t = build_gid_table(planes({"::1", "::ffff:127.0.0.1", "::1", "2001:db8::99"}), g0);
  ASSERT_EQ(t.size(), 4u) << "a repeated plane address is listed once";
  EXPECT_EQ(std::memcmp(t[0].gid.raw, g0.raw, 16), 0);
  EXPECT_EQ(std::memcmp(t[1].gid.raw, gid_of(addr("::1")).raw, 16), 0);
  EXPECT_EQ(std::memcmp(t[2].gid.raw, gid_of(addr("::ffff:127.0.0.1")).raw, 16), 0);
  EXPECT_EQ(std::memcmp(t[3].gid.raw, gid_of(addr("2001:db8::99")).raw, 16), 0);
  const uint32_t lo = if_nametoindex("lo");
  ASSERT_NE(lo, 0u);
  EXPECT_EQ(t[0].ifindex, lo) << "the device GID sits on plane 0's interface";
  EXPECT_EQ(t[1].ifindex, lo);
  EXPECT_EQ(t[2].ifindex, lo) << "an IPv4 plane: found by its IPv4 address";
  EXPECT_EQ(t[3].ifindex, 0u) << "no interface here holds it";
}

TEST(BuildGidTable, PlaneZerosAddressIsIndexZeroOnce_ScopeNamesTheInterface) {
  const auto t = build_gid_table(planes({"fe80::1%lo", "fe80::2%lo"}), gid_of(addr("fe80::1")));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(std::memcmp(t[1].gid.raw, gid_of(addr("fe80::2")).raw, 16), 0);
  EXPECT_EQ(t[0].ifindex, if_nametoindex("lo"));
  EXPECT_EQ(t[1].ifindex, if_nametoindex("lo"));
}

TEST(CheckSgidIndex, PopulatedOkEmptyEnodataPastTheTableEinval) {
  // What the kernel's rdma_get_gid_attr gives a modify_qp / create_ah: the index of a
  // populated entry passes, an empty entry inside the table is ENODATA, past it EINVAL.
  Device dev;
  dev.gids = build_gid_table(planes({"::1", "2001:db8::99"}), gid_of(addr("::1")));
  ASSERT_EQ(dev.gids.size(), 2u);
  EXPECT_EQ(check_sgid_index(&dev, 0, "t"), 0);
  EXPECT_EQ(check_sgid_index(&dev, 1, "t"), 0);
  EXPECT_EQ(check_sgid_index(&dev, 2, "t"), ENODATA);
  EXPECT_EQ(check_sgid_index(&dev, kGidTableLen - 1, "t"), ENODATA);
  EXPECT_EQ(check_sgid_index(&dev, kGidTableLen, "t"), EINVAL);
}

}  // namespace
}  // namespace mrc::verbs
