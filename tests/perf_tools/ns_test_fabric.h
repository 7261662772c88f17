// A small namespace fabric for the tests that run sessions on real namespaces: `hosts` hosts,
// 2 planes x 2 spines, one host per T0, 1 Gbit/s ports, prefix unique to the process.
// Threading: test thread only.
#pragma once

#include <unistd.h>

#include <string>

#include "common/result.h"
#include "nsfabric.h"

namespace mrc::perf {

inline Result<nsfabric::NsFabric, std::string> make_test_fabric(const std::string& tag,
                                                                uint32_t hosts, bool gso) {
  srv6::FabricConfig cfg;
  cfg.hosts = hosts;
  cfg.planes = 2;
  cfg.spines = 2;
  cfg.hosts_per_t0 = 1;
  cfg.host_port_gbps = 1;
  auto f = srv6::Fabric::make(cfg);
  if (!f.ok()) return Err(f.error());
  nsfabric::Options o;
  o.prefix = tag + std::to_string(::getpid());
  o.gso = gso;
  return nsfabric::NsFabric::up(*f, o);
}

}  // namespace mrc::perf
