// Link state of the driver's own plane ports (a NIC port, or its T0, going down), learnt from
// the kernel: the interface that holds each plane's bound address, watched through a
// NETLINK_ROUTE socket subscribed to RTNLGRP_LINK (libnl-3). The UdpDriver polls fd() in its
// progress loop (no thread of its own) and hands each change to Engine::set_port_up.
// Threading: a LinkWatch is used by one thread at a time (the driver's, under its mutex);
// create() reads the current network namespace (call it where the plane sockets live, as
// UdpDriver::create does inside UdpConfig::netns). The socket stays in that namespace.
//
// A link is up when the interface is up (IFF_UP), has carrier (IFF_LOWER_UP) and its
// operational state passes traffic (IFF_RUNNING; IFLA_OPERSTATE UP or UNKNOWN when the message
// carries it): a peer veth or a switch port going down clears IFF_LOWER_UP, `ip link set down`
// clears IFF_UP. Planes that cannot be watched (no interface holds the address, a wildcard
// address, or an address several planes share, as loopback test setups with ::1,::1 do) are
// left out with a note (notes()), never an error: their port stays up for the engine.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

struct nl_sock;

namespace mrc::io {

/// What one RTM_NEWLINK/RTM_DELLINK message says of one interface.
struct LinkMessage {
  int ifindex = 0;
  bool up = false;  // the rule in the file comment; RTM_DELLINK: false
};

/// The link messages in one netlink datagram (several nlmsghdr back to back, as the kernel
/// sends them); others (NLMSG_DONE, errors, other types) and malformed ones are skipped.
std::vector<LinkMessage> parse_link_messages(std::span<const uint8_t> datagram);

/// The rule in the file comment, from interface flags and IFLA_OPERSTATE (none: flags alone).
bool link_up(uint32_t ifi_flags, std::optional<uint8_t> operstate);

class LinkWatch {
 public:
  /// A plane port whose link changed (or, from create, is down at start).
  struct Change {
    uint16_t plane = 0;
    bool up = true;
  };

  /// Resolves the interface of each plane's bound address (`locals`, index = plane) in the
  /// current netns and opens the subscribed socket. Null when no plane can be watched, or the
  /// socket cannot be made (then notes say why).
  static std::unique_ptr<LinkWatch> create(std::span<const sockaddr_in6> locals,
                                           std::vector<std::string>* notes);
  ~LinkWatch();
  LinkWatch(const LinkWatch&) = delete;
  LinkWatch& operator=(const LinkWatch&) = delete;

  /// The netlink socket (non-blocking): poll it for POLLIN.
  int fd() const;
  /// Reads every datagram the socket holds; the planes whose link state changed since the
  /// last call (or since create's initial read). An overrun socket (ENOBUFS: events were
  /// lost) is answered by asking the kernel for every link's state (an RTM_GETLINK dump on
  /// the same socket, read as events by this call or the next).
  std::vector<Change> read();
  /// The planes that are down now (create reads the state once; read() keeps it).
  std::vector<Change> initial_down() const;
  /// Whether plane p's link is up (true for planes not watched).
  bool up(uint16_t plane) const { return plane >= up_.size() || up_[plane]; }
  /// Whether plane p is watched.
  bool watched(uint16_t plane) const { return plane < ifindex_.size() && ifindex_[plane] > 0; }

 private:
  LinkWatch() = default;
  std::vector<Change> apply(const LinkMessage& m);
  // Every watched interface's state now (getifaddrs: in the current namespace, create's).
  std::vector<Change> reread();

  nl_sock* sk_ = nullptr;
  std::vector<int> ifindex_;  // per plane; 0: not watched
  std::vector<bool> up_;      // per plane
};

}  // namespace mrc::io
