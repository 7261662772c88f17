// Fabric description file (JSON) <-> Fabric. Threading: free functions, no shared state.
//
// Two forms, told apart by "planes" (a number or an array); both make the same model
// (fabric.h), and everything downstream (paths, the UDP driver's destinations, exports)
// works from either.
//
// Short form: the project's generated uSID plan.
// {
//   "hosts": 64, "planes": 4, "spines": 8, "hosts_per_t0": 16,   // unsigned integers > 0
//   "block": "fcbb:bbbb::/32",        // optional, default fcbb:bbbb::/32; a /32 prefix
//   "host_port_gbps": 400,            // number > 0 (per host port, one plane)
//   "uplink_gbps": 800,               // number > 0 (per T0-T1 cable)
//   "names": ["gpu0", ...]            // optional: one string per host
// }
//
// Explicit form: an existing fabric as configured.
// {
//   "planes": [                                   // one per plane (NIC port), 1..16
//     { "block": "fcbb:bbbb:cc00::/48",           // locator block; its length is lblen
//       "usid_bits": 16,                          // nflen (optional, default 16)
//       "t0": [ {"name": "leaf0", "usid": "0x0101"}, ... ],   // usid: number or hex string
//       "t1": [ {"name": "spine0", "usid": 513}, ... ] },     // name optional
//     ... ],                                      // every plane as many T0s and T1s
//   "hosts": [
//     { "name": "gpu0",                            // optional (all or none)
//       "t0": 0,                                   // index into each plane's "t0"
//       "addresses": ["fcbb:bbbb:cc00:f001:101::", ...] },  // one per plane, in its block
//     ... ],
//   "host_port_gbps": 400, "uplink_gbps": 800     // optional, as above
// }
// Lengths Linux next-csid accepts: lblen and nflen multiples of 8 in 8..120, lblen + nflen <=
// 128; here also nflen <= 32. Host addresses: fabric.h (host-uSID or locator form, room for a
// path's uSIDs). Limits are Fabric::make's (fabric.h). Unknown fields are ignored.
#pragma once

#include <string>
#include <string_view>

#include "mrc/common/result.h"
#include "srv6/fabric.h"

namespace mrc::srv6 {

// Parses and validates a description. On error the string starts with the JSON path of the
// bad field ("/planes: must be 1..16, got 17"; "/planes/1/t1/3/usid: duplicate uSID 0x0103
// (also t1 2)"; "/: ..." for the whole document). Never throws.
Result<Fabric, std::string> load(std::string_view json);

// The description of `f` in the form it was made from, which load() reads back to an equal
// fabric.
std::string dump(const Fabric& f);
// The explicit form of either kind of fabric (a generated plan written out switch by switch
// and host by host: a starting point for describing a real fabric).
std::string dump_explicit(const Fabric& f);

}  // namespace mrc::srv6
