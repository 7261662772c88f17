// io/udp/link_watch.h: the link rule, parsing of RTM_NEWLINK/RTM_DELLINK datagrams (built here
// byte by byte, as the kernel lays them out), and which planes a LinkWatch watches.
#include "io/udp/link_watch.h"

// glibc's net/if.h first: linux/if.h then skips what it defines.
// clang-format off
#include <net/if.h>
#include <linux/if.h>
// clang-format on
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <cstring>
#include <vector>

#include "mrc/io/udp/udp_driver.h"

namespace mrc::io {
namespace {

constexpr uint32_t kUp = uint32_t{IFF_UP} | uint32_t{IFF_LOWER_UP} | uint32_t{IFF_RUNNING};

// One link message: nlmsghdr, ifinfomsg, then IFLA_IFNAME and (if given) IFLA_OPERSTATE.
void add_link_message(std::vector<uint8_t>& out, uint16_t type, int ifindex, uint32_t flags,
                      int operstate = -1) {
  std::vector<uint8_t> m(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ifinfomsg)));
  auto attr = [&](uint16_t t, const void* v, size_t n) {
    const size_t at = m.size();
    m.resize(at + NLA_ALIGN(NLA_HDRLEN + n));
    nlattr a{static_cast<uint16_t>(NLA_HDRLEN + n), t};
    std::memcpy(&m[at], &a, sizeof a);
    std::memcpy(&m[at + NLA_HDRLEN], v, n);
  };
  attr(IFLA_IFNAME, "p1", 3);
  if (operstate >= 0) {
    const auto o = static_cast<uint8_t>(operstate);
    attr(IFLA_OPERSTATE, &o, 1);
  }
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(m.size());
  h.nlmsg_type = type;
  std::memcpy(m.data(), &h, sizeof h);
  ifinfomsg i{};
  i.ifi_family = AF_UNSPEC;
  i.ifi_index = ifindex;
  i.ifi_flags = flags;
  std::memcpy(&m[NLMSG_HDRLEN], &i, sizeof i);
  out.insert(out.end(), m.begin(), m.end());
}

TEST(LinkUp, NeedsUpCarrierAndRunning) {
  EXPECT_TRUE(link_up(kUp, std::nullopt));
  EXPECT_FALSE(link_up(kUp & ~IFF_UP, std::nullopt));        // ip link set down
  EXPECT_FALSE(link_up(kUp & ~IFF_LOWER_UP, std::nullopt));  // carrier lost (peer, T0 down)
  EXPECT_FALSE(link_up(kUp & ~IFF_RUNNING, std::nullopt));
  EXPECT_TRUE(link_up(kUp, IF_OPER_UP));
  EXPECT_TRUE(link_up(kUp, IF_OPER_UNKNOWN));  // drivers that report no operstate
  EXPECT_FALSE(link_up(kUp, IF_OPER_LOWERLAYERDOWN));
  EXPECT_FALSE(link_up(kUp, IF_OPER_DORMANT));
}

TEST(ParseLinkMessages, SeveralMessagesInOneDatagram) {
  std::vector<uint8_t> d;
  add_link_message(d, RTM_NEWLINK, 7, kUp, IF_OPER_UP);
  add_link_message(d, RTM_NEWLINK, 8, kUp & ~IFF_LOWER_UP, IF_OPER_LOWERLAYERDOWN);
  add_link_message(d, RTM_NEWLINK, 9, kUp, IF_OPER_DOWN);  // operstate rules over flags
  add_link_message(d, RTM_DELLINK, 10, kUp);
  add_link_message(d, RTM_NEWADDR, 11, kUp);  // not a link message: skipped
  add_link_message(d, RTM_NEWLINK, 12, kUp);  // no operstate: flags alone
  const auto m = parse_link_messages(d);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].ifindex, 7);
  EXPECT_TRUE(m[0].up);
  EXPECT_EQ(m[1].ifindex, 8);
  EXPECT_FALSE(m[1].up);
  EXPECT_EQ(m[2].ifindex, 9);
  EXPECT_FALSE(m[2].up);
  EXPECT_EQ(m[3].ifindex, 10);
  EXPECT_FALSE(m[3].up);  // a deleted interface has no link
  EXPECT_EQ(m[4].ifindex, 12);
  EXPECT_TRUE(m[4].up);
}

TEST(ParseLinkMessages, TruncatedAndShortMessagesAreSkipped) {
  std::vector<uint8_t> d;
  add_link_message(d, RTM_NEWLINK, 7, kUp, IF_OPER_UP);
  const size_t one = d.size();
  add_link_message(d, RTM_NEWLINK, 8, kUp, IF_OPER_UP);
  // The second message cut short: its header says more than the datagram holds.
  EXPECT_EQ(parse_link_messages({d.data(), d.size() - 4}).size(), 1u);
  // A header with no room for ifinfomsg.
  std::vector<uint8_t> s(NLMSG_HDRLEN + 4);
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(s.size());
  h.nlmsg_type = RTM_NEWLINK;
  std::memcpy(s.data(), &h, sizeof h);
  EXPECT_TRUE(parse_link_messages(s).empty());
  EXPECT_TRUE(parse_link_messages({}).empty());
  EXPECT_EQ(parse_link_messages({d.data(), one}).size(), 1u);
}

sockaddr_in6 address(const char* text) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  EXPECT_EQ(::inet_pton(AF_INET6, text, &a.sin6_addr), 1) << text;
  return a;
}

TEST(LinkWatch, SharedAndWildcardAddressesAreNotWatched) {
  const std::vector<sockaddr_in6> locals = {address("::1"), address("::1"), address("::")};
  std::vector<std::string> notes;
  EXPECT_EQ(LinkWatch::create(locals, &notes), nullptr);  // nothing left to watch
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_NE(notes[0].find("other planes have this address too"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("other planes have this address too"), std::string::npos) << notes[1];
  EXPECT_NE(notes[2].find("wildcard"), std::string::npos) << notes[2];
}

TEST(LinkWatch, LoopbackPlaneIsWatchedAndUp) {
  const std::vector<sockaddr_in6> locals = {address("::1"), address("::ffff:127.0.0.1")};
  std::vector<std::string> notes;
  auto w = LinkWatch::create(locals, &notes);
  ASSERT_NE(w, nullptr) << (notes.empty() ? "" : notes[0]);
  EXPECT_TRUE(notes.empty());
  EXPECT_TRUE(w->watched(0));
  EXPECT_TRUE(w->watched(1));
  EXPECT_GE(w->fd(), 0);
  EXPECT_TRUE(w->up(0));
  EXPECT_TRUE(w->initial_down().empty());
  EXPECT_TRUE(w->read().empty());  // nothing changed
}

TEST(UdpDriverLinkWatch, LoopbackPlanesSharingAnAddress_NoteNoErrorPortsUp) {
  UdpConfig c;
  c.planes = {PlaneConfig{"::1", 0}, PlaneConfig{"::1", 0}};
  auto d = UdpDriver::create(c);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ((*d)->link_watch_notes().size(), 2u);
  EXPECT_TRUE((*d)->port_link_up(0));
  EXPECT_TRUE((*d)->port_link_up(1));
  EXPECT_EQ((*d)->counters().port_link_changes, 0u);
  EXPECT_EQ((*d)->with_engine([](engine::Engine& e) { return e.ports_down(); }), 0);
}

}  // namespace
}  // namespace mrc::io
