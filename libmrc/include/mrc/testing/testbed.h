// Hosts with engines on a SimNet, and connected QP pairs: the one way tests,
// the demo and benchmarks set up transfers on the simulated network.
// Threading: single-threaded, like SimNet.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/engine/retry.h"
#include "mrc/io/sim/sim_net.h"

namespace mrc::sim {

class Fabric;

class Testbed {
 public:
  explicit Testbed(const SimConfig& net_cfg = {}, const engine::EngineConfig& eng_cfg = {});
  ~Testbed();

  /// A new host with its own engine and one CQ (depth 1<<20).
  PeerId add_host();
  engine::Engine& engine(PeerId h) { return *hosts_[h]->eng; }
  engine::CqId cq(PeerId h) const { return hosts_[h]->cq; }
  SimNet& net() { return net_; }

  struct QpPair {
    engine::Qpn a = 0;  // on host a
    engine::Qpn b = 0;  // on host b
  };
  /// Creates a QP on each host and brings both to RTS, sending on `paths`
  /// (the same EVs both ways). `attr` supplies mtu, timeout, retry counts,
  /// rnr_retry, max_psn_range, backup_paths, path_policy and cc (a CC profile, when set: the
  /// window starts with it at RTS); states, PSNs,
  /// destinations and tokens are filled in here. The pair's `a` is on host a. Aborts on failure
  /// (set-up code, not the system under test).
  QpPair connect(PeerId a, PeerId b, std::span<const engine::Path> paths,
                 const engine::QpAttr& attr = {}, uint32_t max_wr = 4096);
  /// As above, with each end sending on its own EVs: `a_paths` from a, `b_paths` from b
  /// (a hashed single path is one per direction, as a switch hashes each direction).
  QpPair connect(PeerId a, PeerId b, std::span<const engine::Path> a_paths,
                 std::span<const engine::Path> b_paths, const engine::QpAttr& attr,
                 uint32_t max_wr);

  /// Called with h after host h's engine took an input from the net (a datagram or a
  /// timeout), before the net drains it: the place to poll h's CQ and post more work to h
  /// without a round of run_until. What it posts to h goes out in that drain; it must not
  /// make another host's engine send (that host is not drained now). Empty: none.
  void set_on_input(std::function<void(PeerId)> fn) { on_input_ = std::move(fn); }

  /// From now on each host's engine is told when one of its plane ports on `fab` loses or
  /// regains its link (Fabric::set_on_port -> Engine::set_port_up), as a driver tells its
  /// engine of its NIC's carrier. `fab` must be this testbed's net's.
  void report_ports(Fabric& fab);

  /// Registers `mem` on host h with every access flag; returns the key.
  uint32_t register_mr(PeerId h, std::span<uint8_t> mem);

 private:
  class HookedNode;
  struct Host {
    std::unique_ptr<engine::Engine> eng;
    std::unique_ptr<Node> node;
    engine::CqId cq = 0;
  };
  SimNet net_;
  engine::EngineConfig eng_cfg_;
  std::vector<std::unique_ptr<Host>> hosts_;
  uint32_t next_token_ = 0x5eed0001;
  std::function<void(PeerId)> on_input_;
};

}  // namespace mrc::sim
