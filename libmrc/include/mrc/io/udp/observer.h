// What a UdpDriver calls on the observer a front end attaches to it (statistics, a control
// channel): the narrow interface that lets io/ call up without depending on what implements
// it (observe/publisher.h, attached with observe::attach_publisher). Threading: the driver
// calls every method under its mutex (the progress loop, or add_peer), never concurrently;
// an observer touches the engine only there, and must not block.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mrc/common/result.h"
#include "mrc/engine/engine.h"
#include "mrc/engine/types.h"

namespace mrc::io {

struct UdpConfig;    // udp_driver.h
struct UdpCounters;  // udp_driver.h
class Probes;        // probes.h

/// What the driver calls, in this order: add_peer as peers are made; per loop iteration
/// next_deadline() and control_fd() before ppoll, tick() after the iteration.
class DriverObserver {
 public:
  virtual ~DriverObserver() = default;
  /// Earliest time tick() has work; engine::kNever if none. The loop wakes for it.
  virtual engine::Time next_deadline() const = 0;
  /// A descriptor the loop polls for reading (a control socket); -1 if none.
  virtual int control_fd() const = 0;
  /// A peer the driver made: its id, a name ("h<host>", or the plane-0 address) and its
  /// fabric host (UINT32_MAX outside srv6 mode).
  virtual void add_peer(engine::PeerId id, std::string name, uint32_t host) = 0;
  /// After each loop iteration. `commands`: control_fd() polled readable; `app_call`: the
  /// application woke the loop (with_engine), so QPs may have changed without a datagram.
  virtual void tick(engine::Time now, engine::Engine& e, const UdpCounters& c, bool commands,
                    bool app_call) = 0;
};

/// What an observer may use of its driver; each is called under the driver's mutex (from
/// within the DriverObserver calls above).
struct DriverHooks {
  Probes* probes = nullptr;  // the driver's connectionless probes
  // srv6: a new peer for fabric host `host` at the configured peer port.
  std::function<Result<engine::PeerId, std::string>(uint32_t host)> add_fabric_peer;
  // The EVs a QP toward `host` sprays on (UdpDriver::spray_paths).
  std::function<std::vector<engine::Path>(uint32_t host)> spray_paths;
};

/// Made once by UdpDriver::create, after its sockets are bound: the driver's config, each
/// plane's bound address, and the hooks. Returns nullptr for none (the datapath runs
/// without, e.g. MRC_STATS=0).
using ObserverFactory = std::function<std::unique_ptr<DriverObserver>(
    const UdpConfig& cfg, const std::vector<sockaddr_in6>& locals, DriverHooks hooks)>;

}  // namespace mrc::io
