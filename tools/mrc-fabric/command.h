// Runs the external tools the namespace fabric uses (ip, tc, nft, ethtool) and captures
// their output. Threading: free function, safe from any thread (posix_spawn, no shared state).
#pragma once

#include <string>
#include <vector>

#include "mrc/common/result.h"

namespace mrc::nsfabric {

// Runs argv[0] (looked up in PATH) with `input` on its stdin. Returns its stdout when it
// exits 0; otherwise an error naming the command line, the exit status and its stderr:
//   "tc -n mrcf-h0 qdisc add ...: exit 2: Error: Invalid argument."
Result<std::string, std::string> run_command(const std::vector<std::string>& argv,
                                             const std::string& input = "");

}  // namespace mrc::nsfabric
