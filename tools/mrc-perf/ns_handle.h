// The session's view of a namespace fabric (session.h FabricHandle over nsfabric.h), for
// mrc-perf and the tests that run sessions on real namespaces. Threading: the handle's
// functions may run on any thread (NsFabric's const members may).
#pragma once

#include "nsfabric.h"
#include "session.h"

namespace mrc::perf {

/// Refers to `fab`, which must outlive the handle. Faults are parsed with nsfabric's fault
/// language and applied to `fab`.
inline FabricHandle fabric_handle(const nsfabric::NsFabric& fab) {
  FabricHandle h;
  h.fabric = &fab.fabric();
  h.host_netns = [&fab](uint32_t host) { return fab.host_netns(host); };
  h.apply_fault = [&fab](const std::string& text) -> Status<std::string> {
    auto f = nsfabric::parse_fault(text);
    if (!f.ok()) return Err(f.error());
    return fab.apply(*f);
  };
  h.repairs = [](const std::vector<std::string>& texts) {
    std::vector<nsfabric::Fault> faults;
    for (const std::string& t : texts)
      if (auto f = nsfabric::parse_fault(t); f.ok()) faults.push_back(*f);
    std::vector<std::string> out;
    for (const nsfabric::Fault& f : nsfabric::repairs(faults)) out.push_back(nsfabric::to_string(f));
    return out;
  };
  h.port_gbps = fab.options().shape ? fab.fabric().config().host_port_gbps : 0;
  return h;
}

}  // namespace mrc::perf
