#include "io/udp/link_watch.h"

// glibc's net/if.h first: linux/if.h then skips what it defines.
// clang-format off
#include <net/if.h>
#include <linux/if.h>
// clang-format on
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "mrc/io/udp/link_mtu.h"

namespace mrc::io {
namespace {

bool same(const sockaddr_in6& a, const sockaddr_in6& b) {
  return std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof(in6_addr)) == 0 &&
         a.sin6_scope_id == b.sin6_scope_id;
}

}  // namespace

bool link_up(uint32_t ifi_flags, std::optional<uint8_t> operstate) {
  const uint32_t need = uint32_t{IFF_UP} | uint32_t{IFF_LOWER_UP} | uint32_t{IFF_RUNNING};
  if ((ifi_flags & need) != need) return false;
  return !operstate || *operstate == IF_OPER_UP || *operstate == IF_OPER_UNKNOWN;
}

std::vector<LinkMessage> parse_link_messages(std::span<const uint8_t> datagram) {
  std::vector<LinkMessage> out;
  // libnl's walkers read the buffer; they never write it.
  auto* h = reinterpret_cast<nlmsghdr*>(const_cast<uint8_t*>(datagram.data()));
  int left = static_cast<int>(datagram.size());
  for (; nlmsg_ok(h, left); h = nlmsg_next(h, &left)) {
    if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
    if (nlmsg_datalen(h) < static_cast<int>(sizeof(ifinfomsg))) continue;
    const auto* ifi = static_cast<const ifinfomsg*>(nlmsg_data(h));
    std::array<nlattr*, IFLA_MAX + 1> tb{};
    if (nlmsg_parse(h, sizeof(ifinfomsg), tb.data(), IFLA_MAX, nullptr) < 0) continue;
    std::optional<uint8_t> oper;
    if (tb[IFLA_OPERSTATE] != nullptr && nla_len(tb[IFLA_OPERSTATE]) >= 1)
      oper = nla_get_u8(tb[IFLA_OPERSTATE]);
    out.push_back({ifi->ifi_index, h->nlmsg_type == RTM_NEWLINK && link_up(ifi->ifi_flags, oper)});
  }
  return out;
}

std::unique_ptr<LinkWatch> LinkWatch::create(std::span<const sockaddr_in6> locals,
                                             std::vector<std::string>* notes) {
  std::unique_ptr<LinkWatch> w(new LinkWatch());
  w->ifindex_.assign(locals.size(), 0);
  w->up_.assign(locals.size(), true);
  bool any = false;
  for (size_t p = 0; p < locals.size(); ++p) {
    const std::string plane = "plane " + std::to_string(p) + " " + address_text(locals[p]);
    bool shared = false;
    for (size_t q = 0; q < locals.size(); ++q)
      shared = shared || (q != p && same(locals[p], locals[q]));
    if (shared) {
      notes->push_back(plane + ": link not watched: other planes have this address too");
      continue;
    }
    auto name = link_interface(locals[p]);
    if (!name.ok()) {
      notes->push_back(plane + ": link not watched: " + name.error());
      continue;
    }
    const unsigned index = ::if_nametoindex(name->c_str());
    if (index == 0) {
      notes->push_back(plane + ": link not watched: " + *name + ": " + std::strerror(errno));
      continue;
    }
    w->ifindex_[p] = static_cast<int>(index);
    any = true;
  }
  if (!any) return nullptr;
  w->sk_ = nl_socket_alloc();
  if (w->sk_ == nullptr) {
    notes->push_back("link watch: netlink socket: out of memory");
    return nullptr;
  }
  nl_socket_disable_seq_check(w->sk_);  // multicast events carry no sequence of ours
  int r = nl_connect(w->sk_, NETLINK_ROUTE);
  if (r >= 0) r = nl_socket_add_membership(w->sk_, RTNLGRP_LINK);
  if (r >= 0) r = nl_socket_set_nonblocking(w->sk_);
  if (r < 0) {
    notes->push_back(std::string("link watch: netlink: ") + nl_geterror(r));
    return nullptr;
  }
  // After subscribing: a change between the two is seen by read() as well.
  (void)w->reread();
  return w;
}

LinkWatch::~LinkWatch() {
  if (sk_ != nullptr) nl_socket_free(sk_);
}

int LinkWatch::fd() const { return nl_socket_get_fd(sk_); }

std::vector<LinkWatch::Change> LinkWatch::apply(const LinkMessage& m) {
  std::vector<Change> out;
  for (size_t p = 0; p < ifindex_.size(); ++p) {
    if (ifindex_[p] != m.ifindex || up_[p] == m.up) continue;
    up_[p] = m.up;
    out.push_back({static_cast<uint16_t>(p), m.up});
  }
  return out;
}

std::vector<LinkWatch::Change> LinkWatch::reread() {
  std::vector<Change> out;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return out;
  std::vector<LinkMessage> seen;
  for (ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_PACKET) continue;
    seen.push_back(
        {static_cast<int>(::if_nametoindex(i->ifa_name)), link_up(i->ifa_flags, std::nullopt)});
  }
  ::freeifaddrs(all);
  for (const LinkMessage& m : seen)
    for (const Change& c : apply(m)) out.push_back(c);
  return out;
}

std::vector<LinkWatch::Change> LinkWatch::read() {
  std::vector<Change> out;
  alignas(nlmsghdr) static thread_local std::array<uint8_t, 32768> buf;
  for (;;) {
    const ssize_t n = ::recv(fd(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOBUFS) {
      // Events were dropped: ask for every link's state; the answers come on this socket,
      // in the socket's namespace (this thread may be in another), and are read as events.
      // A dump already running answers EBUSY: its answers will do.
      ifinfomsg all{};
      all.ifi_family = AF_UNSPEC;
      (void)nl_send_simple(sk_, RTM_GETLINK, NLM_F_DUMP, &all, sizeof all);
      continue;
    }
    if (n <= 0) break;
    for (const LinkMessage& m : parse_link_messages({buf.data(), static_cast<size_t>(n)}))
      for (const Change& c : apply(m)) out.push_back(c);
  }
  return out;
}

std::vector<LinkWatch::Change> LinkWatch::initial_down() const {
  std::vector<Change> out;
  for (size_t p = 0; p < up_.size(); ++p)
    if (!up_[p]) out.push_back({static_cast<uint16_t>(p), false});
  return out;
}

}  // namespace mrc::io
