// SONiC config_db JSON for one switch (see export_sonic.h).
#include "srv6/export_sonic.h"

#include <nlohmann/json.hpp>

namespace mrc::srv6 {

std::string sonic_config(const Fabric& f, SwitchId s) {
  using nlohmann::json;
  const std::string own = f.usid_prefix(s.plane, f.usid(s));
  const std::string nflen = std::to_string(f.usid_bits(s.plane));
  json j;
  j["SRV6_MY_LOCATORS"]["loc1"] = {{"prefix", own},
                                   {"block_len", std::to_string(f.block_bits(s.plane))},
                                   {"node_len", nflen},
                                   {"func_len", nflen},
                                   {"arg_len", "0"}};
  j["SRV6_MY_SIDS"]["loc1|" + own] = {{"action", "uN"}, {"decap_dscp_mode", "pipe"}};
  json routes = json::object();
  for (const Port& p : f.ports(s)) {
    routes[prefix(p.route, p.route_len)] = {{"nexthop", p.peer_ll}, {"ifname", p.ifname}};
  }
  j["STATIC_ROUTE"] = std::move(routes);
  return j.dump(2);
}

}  // namespace mrc::srv6
