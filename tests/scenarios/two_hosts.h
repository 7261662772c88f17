// Test fixture of the scenario tests: 2 hosts on the simulated two-tier fabric (4 planes x
// 4 spines, each host under its own T0, 10 Gb/s ports and uplinks), a QP pair maker and
// per-plane packet counts. Threading: single-threaded, like the Testbed.
#pragma once

#include <memory>

#include "mrc/io/sim/fabric.h"
#include "mrc/testing/testbed.h"

namespace mrc::sim {

struct TwoHosts {
  explicit TwoHosts(uint64_t seed) : tb(SimConfig{seed}, config()) {
    tb.add_host();
    tb.add_host();
    FabricConfig fc;
    fc.hosts = 2;
    fc.host_port_bps = 10'000'000'000;
    fc.uplink_bps = 10'000'000'000;
    fab = std::make_unique<Fabric>(tb.net(), fc);
  }
  static engine::EngineConfig config() {
    engine::EngineConfig c;
    c.nic_bps = 40'000'000'000;
    c.base_rtt = std::chrono::microseconds(20);
    return c;
  }
  /// A QP pair from host 0 to host 1 on 4 EVs per plane (timeout 14, retry_cnt_exp 7).
  Testbed::QpPair connect() {
    engine::QpAttr at;
    at.timeout = 14;
    at.retry_cnt_exp = 7;
    const auto paths = fab->paths(0, 1, 4);
    return tb.connect(0, 1, paths, at);
  }
  /// Data packets host 0's QP sent on `plane` so far.
  uint64_t sent_on(engine::Qpn qpn, uint16_t plane) {
    const engine::PathSet* ps = tb.engine(0).paths(qpn);
    const auto st = tb.engine(0).path_stats(qpn);
    uint64_t n = 0;
    for (size_t i = 0; i < ps->size(); ++i)
      if (ps->ev(i).path.plane == plane) n += st[i].tx_packets;
    return n;
  }
  Testbed tb;
  std::unique_ptr<Fabric> fab;
};

}  // namespace mrc::sim
