// SONiC config_db JSON for one switch: static SRv6 uSID locator and SID (SONiC
// doc/srv6/srv6_static_config_hld.md) plus static routes. Threading: free function.
//
// Shape (config_db.json nesting: table -> key -> fields, all field values strings):
// {
//   "SRV6_MY_LOCATORS": { "loc1": { "prefix": "fcbb:bbbb:5::/48", "block_len": "32",
//                                    "node_len": "16", "func_len": "16", "arg_len": "0" } },
//   "SRV6_MY_SIDS": { "loc1|fcbb:bbbb:5::/48": { "action": "uN",
//                                                 "decap_dscp_mode": "pipe" } },
//   "STATIC_ROUTE": { "fcbb:bbbb:6::/48": { "nexthop": "fe80::2", "ifname": "p0t0-s0" }, ... }
// }
// block_len, node_len (= func_len) are the plane's locator format (fabric.h; 32 and 16 when
// generated). The static routes are the same ones export_linux.h emits (one per neighbour:
// its uSID prefix, or a host's delivery prefix). Interface names are fabric.h's; on a real
// switch map them to its ports (Ethernet0, ...).
#pragma once

#include <string>

#include "srv6/fabric.h"

namespace mrc::srv6 {

std::string sonic_config(const Fabric& f, SwitchId s);

}  // namespace mrc::srv6
