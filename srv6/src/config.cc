// Fabric description file (JSON) <-> Fabric; nlohmann exceptions stay inside this file.
#include "srv6/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
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

// "0x0103" or 259: a uSID.
uint32_t get_usid(const json& j, const std::string& path) {
  if (!j.contains("usid")) throw BadField{path + "/usid: missing"};
  const json& v = j.at("usid");
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > std::numeric_limits<uint32_t>::max()) throw BadField{path + "/usid: too large"};
    return static_cast<uint32_t>(u);
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const std::string digits = hex ? s.substr(2) : s;
    const bool ok = !digits.empty() && digits.size() <= 8 &&
                    std::all_of(digits.begin(), digits.end(), [&](char c) {
                      return std::isdigit(static_cast<unsigned char>(c)) ||
                             (hex && std::isxdigit(static_cast<unsigned char>(c)));
                    });
    if (ok) {
      const uint64_t u = std::stoull(digits, nullptr, hex ? 16 : 10);
      if (u <= std::numeric_limits<uint32_t>::max()) return static_cast<uint32_t>(u);
    }
    throw BadField{path + "/usid: '" + s + "' is not a uSID (a number, or hex as \"0x0103\")"};
  }
  throw BadField{path + "/usid: must be a number or a hex string, got " +
                 std::string(v.type_name())};
}

std::string get_name(const json& j, const std::string& path) {
  if (!j.contains("name")) return "";
  const json& v = j.at("name");
  if (!v.is_string())
    throw BadField{path + "/name: must be a string, got " + std::string(v.type_name())};
  return v.get<std::string>();
}

const json& get_array(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) throw BadField{path + "/" + key + ": missing"};
  const json& v = j.at(key);
  if (!v.is_array()) {
    throw BadField{path + "/" + key + ": must be an array, got " + std::string(v.type_name())};
  }
  return v;
}

Ipv6 get_address(const json& v, const std::string& path) {
  if (!v.is_string()) {
    throw BadField{path + ": must be an IPv6 address string, got " + std::string(v.type_name())};
  }
  const std::string s = v.get<std::string>();
  Ipv6 a{};
  if (inet_pton(AF_INET6, s.c_str(), a.data()) != 1) {
    throw BadField{path + ": '" + s + "' is not an IPv6 address"};
  }
  return a;
}

// The explicit form (config.h): "planes" is an array.
FabricSpec parse_explicit(const json& j) {
  FabricSpec spec;
  const json& planes = get_array(j, "planes", "");
  for (size_t p = 0; p < planes.size(); ++p) {
    const std::string at = "/planes/" + std::to_string(p);
    const json& pj = planes[p];
    if (!pj.is_object()) throw BadField{at + ": must be an object {block, usid_bits, t0, t1}"};
    PlaneSpec pl;
    if (!pj.contains("block")) throw BadField{at + "/block: missing"};
    const json& b = pj.at("block");
    if (!b.is_string())
      throw BadField{at + "/block: must be a string, got " + std::string(b.type_name())};
    auto pr = parse_prefix(b.get<std::string>());
    if (!pr) throw BadField{at + "/block: " + pr.error()};
    pl.block = pr->first;
    pl.block_bits = pr->second;
    if (pj.contains("usid_bits")) {
      const json& u = pj.at("usid_bits");
      if (!u.is_number_unsigned() || u.get<uint64_t>() > 128) {
        throw BadField{at + "/usid_bits: must be an unsigned integer (8..32), got " + u.dump()};
      }
      pl.usid_bits = static_cast<int>(u.get<uint64_t>());
    }
    for (const char* key : {"t0", "t1"}) {
      const json& v = get_array(pj, key, at);
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string here = at + "/" + key + "/" + std::to_string(i);
        if (!v[i].is_object()) throw BadField{here + ": must be an object {name, usid}"};
        SwitchSpec sw{get_name(v[i], here), get_usid(v[i], here)};
        (key[1] == '0' ? pl.t0s : pl.t1s).push_back(std::move(sw));
      }
    }
    spec.planes.push_back(std::move(pl));
  }
  const json& hosts = get_array(j, "hosts", "");
  for (size_t h = 0; h < hosts.size(); ++h) {
    const std::string at = "/hosts/" + std::to_string(h);
    const json& hj = hosts[h];
    if (!hj.is_object()) throw BadField{at + ": must be an object {name, t0, addresses}"};
    HostSpec hs;
    hs.name = get_name(hj, at);
    if (!hj.contains("t0")) throw BadField{at + "/t0: missing"};
    const json& t = hj.at("t0");
    if (!t.is_number_unsigned() || t.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
      throw BadField{at + "/t0: must be a T0 index (an unsigned integer), got " + t.dump()};
    hs.t0 = static_cast<uint32_t>(t.get<uint64_t>());
    const json& addrs = get_array(hj, "addresses", at);
    for (size_t p = 0; p < addrs.size(); ++p)
      hs.addresses.push_back(get_address(addrs[p], at + "/addresses/" + std::to_string(p)));
    spec.hosts.push_back(std::move(hs));
  }
  spec.host_port_gbps = get_gbps(j, "host_port_gbps", spec.host_port_gbps);
  spec.uplink_gbps = get_gbps(j, "uplink_gbps", spec.uplink_gbps);
  return spec;
}

FabricConfig parse_short(const json& j) {
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
  return cfg;
}

std::string usid_string(uint32_t u, int bits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", (bits + 3) / 4, u);
  return buf;
}

}  // namespace

Result<Fabric, std::string> load(std::string_view text) {
  try {
    const json j = json::parse(text);
    if (!j.is_object()) throw BadField{"/: must be a JSON object"};
    if (j.contains("planes") && j.at("planes").is_array()) {
      if (j.contains("hosts") && !j.at("hosts").is_array()) {
        throw BadField{
            "/hosts: the explicit form (planes as an array) lists hosts as an "
            "array of {name, t0, addresses}"};
      }
      auto f = Fabric::make(parse_explicit(j));
      if (!f) return Err{as_path(f.error())};
      return std::move(f).value();
    }
    auto f = Fabric::make(parse_short(j));
    if (!f) return Err{as_path(f.error())};
    return std::move(f).value();
  } catch (const BadField& e) {
    return Err{e.msg};
  } catch (const json::exception& e) {
    return Err{std::string("/: not valid JSON: ") + e.what()};
  }
}

std::string dump(const Fabric& f) {
  if (f.is_explicit()) return dump_explicit(f);
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

std::string dump_explicit(const Fabric& f) {
  const FabricConfig& c = f.config();
  json planes = json::array();
  for (uint32_t p = 0; p < c.planes; ++p) {
    const int n = f.usid_bits(p);
    json pj;
    pj["block"] = prefix(f.block(p), f.block_bits(p));
    pj["usid_bits"] = n;
    for (Tier tier : {Tier::kT0, Tier::kT1}) {
      json v = json::array();
      const uint32_t count = tier == Tier::kT0 ? f.t0s() : c.spines;
      for (uint32_t i = 0; i < count; ++i) {
        const SwitchId s{tier, p, i};
        json sw{{"usid", usid_string(f.usid(s), n)}};
        // A name only where one was given: an unnamed switch reads back unnamed (its
        // structural name could be another switch's given name).
        if (f.switch_label(s) != f.switch_name(s)) sw["name"] = f.switch_label(s);
        v.push_back(std::move(sw));
      }
      pj[tier == Tier::kT0 ? "t0" : "t1"] = std::move(v);
    }
    planes.push_back(std::move(pj));
  }
  json hosts = json::array();
  for (uint32_t h = 0; h < c.hosts; ++h) {
    json hj;
    if (!c.names.empty()) hj["name"] = c.names[h];
    hj["t0"] = f.t0_of(h);
    json a = json::array();
    for (uint32_t p = 0; p < c.planes; ++p) a.push_back(format(f.host_address(h, p)));
    hj["addresses"] = std::move(a);
    hosts.push_back(std::move(hj));
  }
  json j;
  j["planes"] = std::move(planes);
  j["hosts"] = std::move(hosts);
  j["host_port_gbps"] = c.host_port_gbps;
  j["uplink_gbps"] = c.uplink_gbps;
  return j.dump(2);
}

}  // namespace mrc::srv6
