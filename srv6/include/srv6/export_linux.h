// Linux `ip` commands that program one switch (or host port) of the fabric for SRv6 uSID
// forwarding. Text only; programming through netlink is separate. Threading: free
// functions over a const Fabric.
//
// For switch X (run inside X's network namespace; needs seg6_enabled=1 and forwarding=1):
//   ip -6 addr add <ll>/64 dev <if>                 for each port (fe80::1 lower tier,
//                                                    fe80::2 upper tier, see fabric.h Port)
//   ip -6 route add <block>:<own usid>::/48 encap seg6local action End flavors next-csid
//       lblen 32 nflen 16 dev <first port>          (one line)
//   ip -6 route add <block>:<next usid>::/48 via <peer ll> dev <if>
//       for every uSID a neighbour owns: a T0 routes each spine's uSID up and each of its
//       hosts' (T0-local) uSIDs down; a spine routes each T0's uSID down.
// Interface names are fabric.h's (<= 15 characters).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "srv6/fabric.h"

namespace mrc::srv6 {

std::vector<std::string> linux_switch_commands(const Fabric& f, SwitchId s);

// For host `host`'s port on `plane` (inside the host's namespace): its link-local, its host
// port address (/128) and a route for the whole block to its T0.
std::vector<std::string> linux_host_commands(const Fabric& f, uint32_t host, uint32_t plane);

// Lines joined with '\n', one trailing newline.
std::string join_lines(const std::vector<std::string>& lines);

}  // namespace mrc::srv6
