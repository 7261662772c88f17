// Fabric description file (JSON) <-> Fabric; nlohmann exceptions stay inside this file.
#include "srv6/config.h"

#include <limits>
#include <nlohmann/json.hpp>

namespace mrc::srv6 {
namespace {

using nlohmann::json;

struct BadField {
  std::string msg;
};

uint32_t get_count(const json& j, const char* key) {
  const std::string path = std::string("/") + key;
  if (!j.contains(key)) throw BadField{path + ": missing"};
  const json& v = j.at(key);
  if (!v.is_number_integer())
    throw BadField{path + ": must be an unsigned integer, got " + std::string(v.type_name())};
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u == 0) throw BadField{path + ": must be > 0"};
    if (u > std::numeric_limits<uint32_t>::max()) throw BadField{path + ": too large"};
    return static_cast<uint32_t>(u);
  }
  throw BadField{path + ": must be > 0, got " + v.dump()};
}

double get_gbps(const json& j, const char* key, double dflt) {
  const std::string path = std::string("/") + key;
  if (!j.contains(key)) return dflt;
  const json& v = j.at(key);
  if (!v.is_number())
    throw BadField{path + ": must be a number, got " + std::string(v.type_name())};
  const double d = v.get<double>();
  if (!(d > 0)) throw BadField{path + ": must be > 0, got " + v.dump()};
  return d;
}

std::string block_string(uint32_t block) {
  Ipv6 a{};
  a[0] = block >> 24;
  a[1] = block >> 16;
  a[2] = block >> 8;
  a[3] = block;
  return prefix(a, 32);
}

// Fabric::make's errors start with the field name; give them a JSON path.
std::string as_path(const std::string& e) { return "/" + e; }

}  // namespace

Result<Fabric, std::string> load(std::string_view text) {
  try {
    const json j = json::parse(text);
    if (!j.is_object()) throw BadField{"/: must be a JSON object"};
    FabricConfig cfg;
    cfg.hosts = get_count(j, "hosts");
    cfg.planes = get_count(j, "planes");
    cfg.spines = get_count(j, "spines");
    cfg.hosts_per_t0 = get_count(j, "hosts_per_t0");
    if (j.contains("block")) {
      const json& b = j.at("block");
      if (!b.is_string())
        throw BadField{"/block: must be a string, got " + std::string(b.type_name())};
      auto r = parse_block(b.get<std::string>());
      if (!r) throw BadField{"/block: " + r.error()};
      cfg.block = *r;
    }
    cfg.host_port_gbps = get_gbps(j, "host_port_gbps", cfg.host_port_gbps);
    cfg.uplink_gbps = get_gbps(j, "uplink_gbps", cfg.uplink_gbps);
    if (j.contains("names")) {
      const json& n = j.at("names");
      if (!n.is_array()) throw BadField{"/names: must be an array of strings"};
      for (size_t i = 0; i < n.size(); ++i) {
        if (!n[i].is_string()) {
          throw BadField{"/names/" + std::to_string(i) + ": must be a string, got " +
                         std::string(n[i].type_name())};
        }
        cfg.names.push_back(n[i].get<std::string>());
      }
    }
    auto f = Fabric::make(std::move(cfg));
    if (!f) return Err{as_path(f.error())};
    return std::move(f).value();
  } catch (const BadField& e) {
    return Err{e.msg};
  } catch (const json::exception& e) {
    return Err{std::string("/: not valid JSON: ") + e.what()};
  }
}

std::string dump(const Fabric& f) {
  const FabricConfig& c = f.config();
  json j;
  j["hosts"] = c.hosts;
  j["planes"] = c.planes;
  j["spines"] = c.spines;
  j["hosts_per_t0"] = c.hosts_per_t0;
  j["block"] = block_string(c.block);
  j["host_port_gbps"] = c.host_port_gbps;
  j["uplink_gbps"] = c.uplink_gbps;
  if (!c.names.empty()) j["names"] = c.names;
  return j.dump(2);
}

}  // namespace mrc::srv6
