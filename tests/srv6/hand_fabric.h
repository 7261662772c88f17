// A hand-written explicit fabric description (srv6/config.h) for tests: what a user with
// their own addressing would write. Threading: constants only.
//
// 2 planes, each 2 T0s and 2 T1s with hand-assigned uSIDs, a /48 locator block with 16-bit
// uSIDs (Linux `lblen 48 nflen 16`, not the generated 32/16), 4 hosts, 2 under each T0.
// Plane 0 hosts use the host-uSID form (block | f00i | T0 uSID), plane 1 the locator form
// (block | T0 uSID | host part): fabric.h has both. Both planes reuse the T0 uSIDs (planes
// never meet).
#pragma once

namespace mrc::srv6::testing {

inline constexpr char kHandFabric[] = R"({
  "planes": [
    { "block": "fcbb:bbbb:cc00::/48", "usid_bits": 16,
      "t0": [ {"name": "leaf0-a", "usid": "0x0101"}, {"name": "leaf1-a", "usid": "0x0102"} ],
      "t1": [ {"name": "spine0-a", "usid": "0x0201"}, {"name": "spine1-a", "usid": 514} ] },
    { "block": "fcbb:bbbb:dd00::/48",
      "t0": [ {"name": "leaf0-b", "usid": "0x0101"}, {"name": "leaf1-b", "usid": "0x0102"} ],
      "t1": [ {"name": "spine0-b", "usid": "0x0301"}, {"name": "spine1-b", "usid": "0x0302"} ] }
  ],
  "hosts": [
    { "name": "gpu0", "t0": 0, "addresses": ["fcbb:bbbb:cc00:f001:101::", "fcbb:bbbb:dd00:101:a::"] },
    { "name": "gpu1", "t0": 0, "addresses": ["fcbb:bbbb:cc00:f002:101::", "fcbb:bbbb:dd00:101:b::"] },
    { "name": "gpu2", "t0": 1, "addresses": ["fcbb:bbbb:cc00:f001:102::", "fcbb:bbbb:dd00:102:a::"] },
    { "name": "gpu3", "t0": 1, "addresses": ["fcbb:bbbb:cc00:f002:102::", "fcbb:bbbb:dd00:102:b::"] }
  ],
  "host_port_gbps": 2, "uplink_gbps": 4
})";

}  // namespace mrc::srv6::testing
