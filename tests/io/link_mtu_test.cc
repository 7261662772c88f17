// io/udp/link_mtu.h: the payload a plane's link carries, and what UdpDriver makes of it
// (max_payload, payload_mtu) on interfaces of known MTU in a namespace of the test's own
// (prefix "mrcmtu" + pid, removed at the end, also on failure).
#include "mrc/io/udp/link_mtu.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "mrc/common/netns.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/wire/wire.h"

namespace mrc::io {
namespace {

TEST(PayloadForLink, LargestPowerOfTwoThatFitsWithTheHeaders) {
  EXPECT_EQ(payload_overhead(false), 120u);  // IPv6 40 + UDP 8 + MRC data header 72
  EXPECT_EQ(payload_overhead(true), 100u);
  EXPECT_EQ(payload_for_link(9000, false), 8192u);  // jumbo
  EXPECT_EQ(payload_for_link(1500, false), 1024u);  // Ethernet's default
  EXPECT_EQ(payload_for_link(1500, true), 1024u);
  EXPECT_EQ(payload_for_link(4216, false), 4096u);  // exactly 4096 + 120
  EXPECT_EQ(payload_for_link(4215, false), 2048u);
  EXPECT_EQ(payload_for_link(8312, false), 8192u);
  EXPECT_EQ(payload_for_link(65536, false), wire::kMaxPayload);  // loopback
  EXPECT_EQ(payload_for_link(376, false), 256u);
  EXPECT_EQ(payload_for_link(375, false), 0u);  // not even 256 fits
  EXPECT_EQ(payload_for_link(356, true), 256u);
}

TEST(LinkMtu, LoopbackAndUnknownAddress) {
  sockaddr_in6 lo{};
  lo.sin6_family = AF_INET6;
  lo.sin6_addr = in6addr_loopback;
  auto m = link_mtu(lo);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_GE(*m, 1280u);
  sockaddr_in6 nowhere = lo;
  inet_pton(AF_INET6, "2001:db8::7777", &nowhere.sin6_addr);
  auto e = link_mtu(nowhere);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("2001:db8::7777"), std::string::npos) << e.error();
}

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// Interfaces of MTU 1500 and 9000, IPv6 and IPv4 addresses, in a namespace of our own.
class LinkMtuNs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto ok = netns_supported(); !ok.ok()) GTEST_SKIP() << ok.error();
    ASSERT_EQ(sh("ip netns add " + ns_), 0);
    made_ = true;
    const std::string ip = "ip -n " + ns_ + " ";
    // veth pairs with both ends inside (this kernel may have no dummy interfaces).
    for (auto [dev, mtu] : {std::pair{"small", "1500"}, std::pair{"big", "9000"}}) {
      const std::string d = dev;
      ASSERT_EQ(sh(ip + "link add " + d + " mtu " + mtu + " type veth peer name " + d + "p mtu " +
                   mtu + " && " + ip + "link set " + d + " up && " + ip + "link set " + d +
                   "p up"),
                0);
    }
    ASSERT_EQ(sh(ip + "addr add fd00:77::1/64 dev small nodad && " + ip +
                 "addr add 10.77.0.1/24 dev small && " + ip +
                 "addr add fd00:78::1/64 dev big nodad && " + ip + "link set lo up"),
              0);
  }
  void TearDown() override {
    if (made_) sh("ip netns del " + ns_);
  }
  Result<std::unique_ptr<UdpDriver>, std::string> driver(std::vector<std::string> planes) {
    UdpConfig c;
    c.netns = ns_;
    for (auto& a : planes) c.planes.push_back(PlaneConfig{a, 0});
    return UdpDriver::create(c);
  }
  const std::string ns_ = "mrcmtu" + std::to_string(::getpid());
  bool made_ = false;
};

TEST_F(LinkMtuNs, Driver_PayloadFromEveryPlanesLink) {
  auto big = driver({"fd00:78::1"});
  ASSERT_TRUE(big.ok()) << big.error();
  EXPECT_EQ((*big)->max_payload(), 8192u);
  EXPECT_EQ(*(*big)->payload_mtu(0), 8192u);
  EXPECT_EQ(*(*big)->payload_mtu(4096), 4096u);

  // The smallest link decides; a configured payload it cannot carry is refused, named.
  auto mixed = driver({"fd00:78::1", "fd00:77::1"});
  ASSERT_TRUE(mixed.ok()) << mixed.error();
  EXPECT_EQ((*mixed)->max_payload(), 1024u);
  EXPECT_EQ(*(*mixed)->payload_mtu(0), 1024u);
  auto refused = (*mixed)->payload_mtu(4096);
  ASSERT_FALSE(refused.ok());
  for (const char* word : {"mtu 4096", "plane 1", "fd00:77::1", "1500", "up to 1024"})
    EXPECT_NE(refused.error().find(word), std::string::npos) << word << ": " << refused.error();

  auto v4 = driver({"::ffff:10.77.0.1"});
  ASSERT_TRUE(v4.ok()) << v4.error();
  EXPECT_EQ((*v4)->max_payload(), 1024u);

  // A wildcard plane may send on any interface: the smallest that is up (lo aside).
  auto any = driver({"::"});
  ASSERT_TRUE(any.ok()) << any.error();
  EXPECT_EQ((*any)->max_payload(), 1024u);
}

}  // namespace
}  // namespace mrc::io
