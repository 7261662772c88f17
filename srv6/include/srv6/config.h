// Fabric description file (JSON) <-> Fabric. Threading: free functions, no shared state.
//
// {
//   "hosts": 64, "planes": 4, "spines": 8, "hosts_per_t0": 16,   // unsigned integers > 0
//   "block": "fcbb:bbbb::/32",        // optional, default fcbb:bbbb::/32; a /32 prefix
//   "host_port_gbps": 400,            // number > 0 (per host port, one plane)
//   "uplink_gbps": 800,               // number > 0 (per T0-T1 cable)
//   "names": ["gpu0", ...]            // optional: one string per host
// }
// Limits are Fabric::make's (fabric.h). Unknown fields are ignored.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "srv6/fabric.h"

namespace mrc::srv6 {

// Parses and validates a description. On error the string starts with the JSON path of the
// bad field ("/planes: must be 1..16, got 17"; "/: ..." for the whole document). Never throws.
Result<Fabric, std::string> load(std::string_view json);

// The description of `f`, which load() reads back to an equal configuration.
std::string dump(const Fabric& f);

}  // namespace mrc::srv6
