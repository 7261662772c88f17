// mrcctl's side of a device's control channel (observe/publisher.h): one JSON request, one
// JSON reply, over the unix datagram socket /run/mrc/<pid>.<device>.ctl.
// Threading: blocking calls; each makes and removes its own reply socket.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "mrc/common/result.h"

namespace mrc::mrcctl {

/// True when this process may send commands: root, or CAP_NET_ADMIN in its effective set.
bool has_net_admin();

/// Why a request failed: one line, and whether the device itself refused it (it answered
/// {"ok":false}) rather than not being reachable.
struct ControlError {
  std::string error;
  bool refused = false;
};

/// Sends `request` to device `index` of process `pid` and waits up to timeout_ms for the
/// reply. Errors are one line: no control socket, permission (needs CAP_NET_ADMIN), timeout,
/// or the device's own {"ok":false,"error":...}.
Result<nlohmann::json, ControlError> control_request(uint32_t pid, uint32_t index,
                                                     const nlohmann::json& request, int timeout_ms);

}  // namespace mrc::mrcctl
