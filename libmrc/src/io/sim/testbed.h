// Hosts with engines on a SimNet, and connected QP pairs: the one way tests,
// the demo and benchmarks set up transfers on the simulated network.
// Threading: single-threaded, like SimNet.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "engine/retry.h"
#include "io/sim/sim_net.h"

namespace mrc::sim {

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
  /// rnr_retry, max_psn_range, backup_paths and path_policy; states, PSNs,
  /// destinations and tokens are filled in here. The pair's `a` is on host a. Aborts on failure
  /// (set-up code, not the system under test).
  QpPair connect(PeerId a, PeerId b, std::span<const engine::Path> paths,
                 const engine::QpAttr& attr = {}, uint32_t max_wr = 4096);

  /// Registers `mem` on host h with every access flag; returns the key.
  uint32_t register_mr(PeerId h, std::span<uint8_t> mem);

 private:
  struct Host {
    std::unique_ptr<engine::Engine> eng;
    std::unique_ptr<EngineNode> node;
    engine::CqId cq = 0;
  };
  SimNet net_;
  engine::EngineConfig eng_cfg_;
  std::vector<std::unique_ptr<Host>> hosts_;
  uint32_t next_token_ = 0x5eed0001;
};

}  // namespace mrc::sim
