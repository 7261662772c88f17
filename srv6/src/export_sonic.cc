// SONiC config_db JSON for one switch (see export_sonic.h).
#include "srv6/export_sonic.h"

#include <nlohmann/json.hpp>

namespace mrc::srv6 {

std::string sonic_config(const Fabric& f, SwitchId s) {
  using nlohmann::json;
  const std::string own = f.usid_prefix(f.usid(s));
  json j;
  j["SRV6_MY_LOCATORS"]["loc1"] = {{"prefix", own},
                                   {"block_len", "32"},
                                   {"node_len", "16"},
                                   {"func_len", "16"},
                                   {"arg_len", "0"}};
  j["SRV6_MY_SIDS"]["loc1|" + own] = {{"action", "uN"}, {"decap_dscp_mode", "pipe"}};
  json routes = json::object();
  for (const Port& p : f.ports(s)) {
    routes[f.usid_prefix(p.peer_usid)] = {{"nexthop", p.peer_ll}, {"ifname", p.ifname}};
  }
  j["STATIC_ROUTE"] = std::move(routes);
  return j.dump(2);
}

}  // namespace mrc::srv6
