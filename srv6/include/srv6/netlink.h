// Programs the calling thread's network namespace through netlink (libnl-3): a Plan of
// export_linux.h, and interface admin state. Threading: each call opens its own netlink
// socket in the namespace of the calling thread, so calls on different threads (in
// different namespaces) are independent. To program another namespace, call from a thread
// that entered it (mrc::in_netns, mrc/common/netns.h).
//
// apply() leaves the same state as running ip_commands(plan) on the same namespace, with
// replace semantics, so it may be called again to restore a plan:
//   addresses and routes: NLM_F_CREATE | NLM_F_REPLACE (`ip addr/route replace`);
//   rules: created unless an equal one exists (`ip rule add`, EEXIST ignored).
// Linux deletes every route through an interface that goes admin down (and its link-local
// addresses), and refuses new ones through it (ENETDOWN). apply() therefore skips records
// on interfaces that are down, and installs a multipath route with only the nexthops on up
// interfaces (skipped when none is up); call it again once they are up. On a namespace
// whose interfaces are all up it is exact.
//
// Errors name the record as its ip command and the kernel's reason:
//   "ip -6 route add fcbb:bbbb:3::/48 via fe80::2 dev p0t0-s9: no interface p0t0-s9".
#pragma once

#include <string>

#include "mrc/common/result.h"
#include "srv6/export_linux.h"

namespace mrc::srv6 {

Status<std::string> apply(const Plan& plan);

// `ip link set dev <ifname> up|down`.
Status<std::string> set_link_up(const std::string& ifname, bool up);

// Whether the interface is administratively up (IFF_UP); an error if there is none.
Result<bool, std::string> link_is_up(const std::string& ifname);

}  // namespace mrc::srv6
