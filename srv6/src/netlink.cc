// Netlink programming of one namespace with libnl-3 core messages (see netlink.h).
// libnl-route has no seg6local support, so every message is built here by hand.
#include "srv6/netlink.h"

#include <linux/fib_rules.h>
#include <linux/lwtunnel.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/seg6_local.h>
#include <net/if.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

namespace mrc::srv6 {
namespace {

constexpr size_t kMsgSize = 64 * 1024;  // a multipath route over 256 spines needs ~7 KiB

struct KernelError {
  int err = 0;
  std::string msg;  // extended ack text, if the kernel sent one
};

int on_error(sockaddr_nl*, nlmsgerr* e, void* arg) {
  auto* out = static_cast<KernelError*>(arg);
  out->err = -e->error;
  const auto* h =
      reinterpret_cast<const nlmsghdr*>(reinterpret_cast<const char*>(e) - NLMSG_HDRLEN);
  if (h->nlmsg_flags & NLM_F_ACK_TLVS) {
    size_t off = sizeof(nlmsgerr);
    if (!(h->nlmsg_flags & NLM_F_CAPPED)) off += e->msg.nlmsg_len - NLMSG_HDRLEN;
    const char* p = reinterpret_cast<const char*>(e) + off;
    const char* end = reinterpret_cast<const char*>(h) + h->nlmsg_len;
    while (p + sizeof(nlattr) <= end) {
      const auto* a = reinterpret_cast<const nlattr*>(p);
      if (a->nla_len < sizeof(nlattr) || p + a->nla_len > end) break;
      if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
        out->msg.assign(p + NLA_HDRLEN, strnlen(p + NLA_HDRLEN, a->nla_len - NLA_HDRLEN));
      }
      p += NLA_ALIGN(a->nla_len);
    }
  }
  return NL_STOP;
}

struct MsgFree {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgFree>;

class Socket {
 public:
  static Result<Socket, std::string> open() {
    Socket s;
    s.sk_.reset(nl_socket_alloc());
    if (!s.sk_) return Err(std::string("netlink: out of memory"));
    if (const int r = nl_connect(s.sk_.get(), NETLINK_ROUTE); r < 0) {
      return Err("netlink: connect: " + std::string(nl_geterror(r)));
    }
    const int fd = nl_socket_get_fd(s.sk_.get());
    const int one = 1;
    // Best effort: without them errors lose the kernel's text, nothing else.
    setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
    setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    s.err_ = std::make_unique<KernelError>();
    nl_socket_modify_err_cb(s.sk_.get(), NL_CB_CUSTOM, on_error, s.err_.get());
    return s;
  }

  // Sends `m` and waits for the kernel's answer; returns the errno (0 on success) and sets
  // `text` to a description when it is not 0.
  int request(const Msg& m, std::string* text) {
    *err_ = KernelError{};
    int r = nl_send_auto(sk_.get(), m.get());
    if (r >= 0) r = nl_wait_for_ack(sk_.get());
    if (r >= 0) return 0;
    if (err_->err == 0) {
      *text = nl_geterror(r);
      return EIO;
    }
    *text = err_->msg.empty() ? std::strerror(err_->err) : err_->msg;
    return err_->err;
  }

 private:
  struct SockFree {
    void operator()(nl_sock* s) const { nl_socket_free(s); }
  };
  std::unique_ptr<nl_sock, SockFree> sk_;
  std::unique_ptr<KernelError> err_;  // stable address for the callback
};

Msg new_msg(int type, int flags) {
  Msg m(nlmsg_alloc_size(kMsgSize));
  if (m && !nlmsg_put(m.get(), NL_AUTO_PORT, NL_AUTO_SEQ, type, 0, flags)) m.reset();
  return m;
}

bool is_link_local(const Ipv6& a) { return a[0] == 0xfe && (a[1] & 0xc0) == 0x80; }

// Interface index and admin state, looked up once per interface per apply().
class Links {
 public:
  Result<bool, std::string> up(const std::string& dev) {
    auto it = cache_.find(dev);
    if (it == cache_.end()) {
      auto r = link_is_up(dev);
      if (!r) return Err(r.error());
      it = cache_.emplace(dev, *r).first;
    }
    return it->second;
  }

 private:
  std::map<std::string, bool> cache_;
};

Result<int, std::string> ifindex(const std::string& dev) {
  const unsigned idx = if_nametoindex(dev.c_str());
  if (idx == 0) return Err("no interface " + dev);
  return static_cast<int>(idx);
}

// Builds one message; "" or the reason it cannot be built.
std::string build(const AddrRecord& a, nl_msg* m) {
  auto idx = ifindex(a.dev);
  if (!idx) return idx.error();
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET6;
  ifa.ifa_prefixlen = static_cast<uint8_t>(a.len);
  ifa.ifa_scope = is_link_local(a.addr) ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
  ifa.ifa_index = static_cast<uint32_t>(*idx);
  if (nlmsg_append(m, &ifa, sizeof ifa, NLMSG_ALIGNTO) < 0 ||
      nla_put(m, IFA_LOCAL, 16, a.addr.data()) < 0 ||
      nla_put(m, IFA_ADDRESS, 16, a.addr.data()) < 0) {
    return "message too large";
  }
  return "";
}

std::string build(const RuleRecord& r, nl_msg* m) {
  fib_rule_hdr h{};
  h.family = AF_INET6;
  h.src_len = static_cast<uint8_t>(r.len);
  h.table = static_cast<uint8_t>(r.table < 256 ? r.table : RT_TABLE_UNSPEC);
  h.action = FR_ACT_TO_TBL;
  if (nlmsg_append(m, &h, sizeof h, NLMSG_ALIGNTO) < 0 ||
      nla_put(m, FRA_SRC, 16, r.src.data()) < 0 || nla_put_u32(m, FRA_TABLE, r.table) < 0 ||
      nla_put_u32(m, FRA_PRIORITY, r.priority) < 0) {
    return "message too large";
  }
  return "";
}

// `nexthops`: the route's nexthops on up interfaces (at least one, but for kUnreachable).
std::string build(const RouteRecord& r, const std::vector<Nexthop>& nexthops, nl_msg* m) {
  rtmsg rt{};
  rt.rtm_family = AF_INET6;
  rt.rtm_dst_len = static_cast<uint8_t>(r.len);
  rt.rtm_table = static_cast<uint8_t>(r.table < 256 ? r.table : RT_TABLE_UNSPEC);
  rt.rtm_protocol = RTPROT_BOOT;  // what `ip route add` uses
  rt.rtm_scope = RT_SCOPE_UNIVERSE;
  rt.rtm_type = r.kind == RouteRecord::Kind::kUnreachable ? RTN_UNREACHABLE : RTN_UNICAST;
  bool ok = nlmsg_append(m, &rt, sizeof rt, NLMSG_ALIGNTO) >= 0 &&
            nla_put(m, RTA_DST, 16, r.dst.data()) >= 0 && nla_put_u32(m, RTA_TABLE, r.table) >= 0;
  if (r.metric != 0) ok = ok && nla_put_u32(m, RTA_PRIORITY, r.metric) >= 0;
  if (nexthops.empty()) return ok ? "" : "message too large";
  if (nexthops.size() == 1) {
    auto idx = ifindex(nexthops.front().dev);
    if (!idx) return idx.error();
    ok = ok && nla_put_u32(m, RTA_OIF, static_cast<uint32_t>(*idx)) >= 0;
    if (r.kind == RouteRecord::Kind::kEnd) {
      ok = ok && nla_put_u16(m, RTA_ENCAP_TYPE, LWTUNNEL_ENCAP_SEG6_LOCAL) >= 0;
      nlattr* encap = ok ? nla_nest_start(m, RTA_ENCAP) : nullptr;
      ok = encap && nla_put_u32(m, SEG6_LOCAL_ACTION, SEG6_LOCAL_ACTION_END) >= 0;
      nlattr* flv = ok ? nla_nest_start(m, SEG6_LOCAL_FLAVORS) : nullptr;
      ok = flv &&
           nla_put_u32(m, SEG6_LOCAL_FLV_OPERATION, 1u << SEG6_LOCAL_FLV_OP_NEXT_CSID) >= 0 &&
           nla_put_u8(m, SEG6_LOCAL_FLV_LCBLOCK_BITS, r.lblen) >= 0 &&
           nla_put_u8(m, SEG6_LOCAL_FLV_LCNODE_FN_BITS, r.nflen) >= 0;
      if (ok) nla_nest_end(m, flv);
      if (ok) nla_nest_end(m, encap);
    } else {
      ok = ok && nla_put(m, RTA_GATEWAY, 16, nexthops.front().via.data()) >= 0;
    }
    return ok ? "" : "message too large";
  }
  nlattr* mp = ok ? nla_nest_start(m, RTA_MULTIPATH) : nullptr;
  ok = mp != nullptr;
  for (const Nexthop& n : nexthops) {
    auto idx = ifindex(n.dev);
    if (!idx) return idx.error();
    auto* nh =
        ok ? static_cast<rtnexthop*>(nlmsg_reserve(m, sizeof(rtnexthop), NLMSG_ALIGNTO)) : nullptr;
    ok = nh != nullptr && nla_put(m, RTA_GATEWAY, 16, n.via.data()) >= 0;
    if (!ok) break;
    nh->rtnh_flags = 0;
    nh->rtnh_hops = 0;  // weight 1
    nh->rtnh_ifindex = *idx;
    nh->rtnh_len = static_cast<unsigned short>(reinterpret_cast<char*>(nlmsg_tail(nlmsg_hdr(m))) -
                                               reinterpret_cast<char*>(nh));
  }
  if (ok) nla_nest_end(m, mp);
  return ok ? "" : "message too large";
}

// Sends one record's message; `line` names it in errors.
Status<std::string> send(Socket& sk, const Msg& m, const std::string& built,
                         const std::string& line, bool exist_ok) {
  if (!m) return Err(line + ": out of memory");
  if (!built.empty()) return Err(line + ": " + built);
  std::string why;
  const int e = sk.request(m, &why);
  if (e == 0 || (exist_ok && e == EEXIST)) return {};
  return Err(line + ": " + why);
}

}  // namespace

Status<std::string> apply(const Plan& plan) {
  auto sk = Socket::open();
  if (!sk) return Err(sk.error());
  Links links;
  for (const AddrRecord& a : plan.addrs) {
    auto up = links.up(a.dev);
    if (!up) return Err(ip_command(a) + ": " + up.error());
    if (!*up) continue;
    Msg m = new_msg(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
    const std::string built = m ? build(a, m.get()) : "";
    if (auto s = send(*sk, m, built, ip_command(a), false); !s) return s;
  }
  for (const RuleRecord& r : plan.rules) {
    Msg m = new_msg(RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL);
    const std::string built = m ? build(r, m.get()) : "";
    if (auto s = send(*sk, m, built, ip_command(r), true); !s) return s;
  }
  for (const RouteRecord& r : plan.routes) {
    std::vector<Nexthop> live;
    for (const Nexthop& n : r.nexthops) {
      auto up = links.up(n.dev);
      if (!up) return Err(ip_command(r) + ": " + up.error());
      if (*up) live.push_back(n);
    }
    if (live.empty() && r.kind != RouteRecord::Kind::kUnreachable) continue;
    Msg m = new_msg(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
    const std::string built = m ? build(r, live, m.get()) : "";
    if (auto s = send(*sk, m, built, ip_command(r), false); !s) return s;
  }
  return {};
}

Status<std::string> set_link_up(const std::string& ifname, bool up) {
  const std::string line = "ip link set dev " + ifname + (up ? " up" : " down");
  auto idx = ifindex(ifname);
  if (!idx) return Err(line + ": " + idx.error());
  auto sk = Socket::open();
  if (!sk) return Err(line + ": " + sk.error());
  Msg m = new_msg(RTM_NEWLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = *idx;
  ifi.ifi_flags = up ? IFF_UP : 0;
  ifi.ifi_change = IFF_UP;
  const bool ok = m && nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO) >= 0;
  return send(*sk, m, ok ? "" : "message too large", line, false);
}

Result<bool, std::string> link_is_up(const std::string& ifname) {
  ifreq ifr{};
  if (ifname.size() >= sizeof ifr.ifr_name) return Err("no interface " + ifname);
  std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
  const int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Err("socket: " + std::string(std::strerror(errno)));
  const int r = ioctl(fd, SIOCGIFFLAGS, &ifr);
  const int e = errno;
  close(fd);
  if (r != 0) {
    if (e == ENODEV) return Err("no interface " + ifname);
    return Err(ifname + ": SIOCGIFFLAGS: " + std::strerror(e));
  }
  return (ifr.ifr_flags & IFF_UP) != 0;
}

}  // namespace mrc::srv6
