// nlohmann exceptions stay inside this file.
#include "mrc/io/config.h"

#include <arpa/inet.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "srv6/config.h"

namespace mrc::io {
namespace {

using nlohmann::json;

struct Bad {
  std::string msg;
};

// Every knob, with how to read it from JSON and from the environment.
struct Fields {
  std::string path_mode = "direct";
  std::string fabric;
  std::optional<uint32_t> host;
  std::vector<std::string> planes;
  uint32_t port = kDefaultUdpPort;
  uint32_t mtu = 0;
  std::string netns;
  bool gso = true, gro = true, zero_udp_checksum = false, busy_poll = false;
  bool poller_progress = UdpConfig{}.poller_progress;
  bool ack_rides = true;
  double poller_grace_us = static_cast<double>(kDefaultPollerGrace.count()) / 1000;
  std::optional<double> spin_us;  // none: the driver's default_spin()
  uint32_t ecmp_source_ports = 16;
  std::vector<std::vector<std::string>> peers;  // per host: its address per plane
  std::string peers_source;                     // where `peers` came from, for errors
  bool peer_query = true;
  double nic_gbps = 0;
  double base_rtt_us = 0;
  double min_base_rtt_us = static_cast<double>(kDefaultMinBaseRtt.count()) / 1000;
  int progress_nice = -10;  // with pollers off: the thread preempts spinning apps
  uint32_t progress_threads = 0;  // 0: the driver's kDefaultProgressThreads
};

uint32_t to_uint(const std::string& where, const std::string& s, uint32_t lo, uint32_t hi) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || s[0] == '-' || v < lo || v > hi) {
    throw Bad{where + ": must be " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
              s};
  }
  return static_cast<uint32_t>(v);
}

int to_nice(const std::string& where, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < -20 || v > 19)
    throw Bad{where + ": must be a nice value -20..19, got " + s};
  return static_cast<int>(v);
}

// A number in [0, hi]: `hi` keeps every later conversion (to nanoseconds, bits per second)
// inside int64, and NaN and infinity out.
double to_double(const std::string& where, const std::string& s, double hi) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 0) || !(v <= hi)) {
    char range[64];
    std::snprintf(range, sizeof range, "0..%g", hi);
    throw Bad{where + ": must be a number " + range + ", got " + s};
  }
  return v;
}

// Upper bounds for the numeric fields: 100 Tb/s of NIC, 10 s of round trip, the driver's
// longest poller_grace (1 s).
constexpr double kMaxNicGbps = 100'000;
constexpr double kMaxRttUs = 10'000'000;
constexpr double kMaxPollerGraceUs = static_cast<double>(kMaxPollerGrace.count()) / 1000;
constexpr double kMaxSpinUs = static_cast<double>(kMaxSpin.count()) / 1000;

bool to_bool(const std::string& where, const std::string& s) {
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw Bad{where + ": must be 0/1/true/false, got " + s};
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void from_json(const json& j, const std::string& src, Fields& f) {
  if (!j.is_object()) throw Bad{src + ": /: must be a JSON object"};
  for (const auto& item : j.items()) {
    const std::string key = item.key();
    const json& v = item.value();
    const std::string where = src + ": /" + key;
    auto str = [&]() {
      if (!v.is_string()) throw Bad{where + ": must be a string, got " + v.type_name()};
      return v.get<std::string>();
    };
    auto boolean = [&]() {
      if (!v.is_boolean()) throw Bad{where + ": must be true or false, got " + v.dump()};
      return v.get<bool>();
    };
    auto uint = [&](uint32_t lo, uint32_t hi) {
      if (!v.is_number_unsigned()) throw Bad{where + ": must be an unsigned integer, got " + v.dump()};
      return to_uint(where, std::to_string(v.get<uint64_t>()), lo, hi);
    };
    auto number = [&](double hi) {
      if (!v.is_number()) throw Bad{where + ": must be a number, got " + v.dump()};
      return to_double(where, v.dump(), hi);
    };
    if (key == "path_mode") f.path_mode = str();
    else if (key == "fabric") f.fabric = str();
    else if (key == "host") f.host = uint(0, UINT32_MAX);
    else if (key == "planes") {
      if (!v.is_array()) throw Bad{where + ": must be an array of IPv6 or IPv4 addresses"};
      f.planes.clear();
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string()) throw Bad{where + "/" + std::to_string(i) + ": must be a string"};
        f.planes.push_back(v[i].get<std::string>());
      }
    } else if (key == "port") f.port = uint(0, 65535);
    else if (key == "mtu") f.mtu = uint(0, 8192);
    else if (key == "netns") f.netns = str();
    else if (key == "gso") f.gso = boolean();
    else if (key == "gro") f.gro = boolean();
    else if (key == "zero_udp_checksum") f.zero_udp_checksum = boolean();
    else if (key == "busy_poll") f.busy_poll = boolean();
    else if (key == "poller_progress")
      f.poller_progress = boolean();
    else if (key == "ack_rides")
      f.ack_rides = boolean();
    else if (key == "poller_grace_us")
      f.poller_grace_us = number(kMaxPollerGraceUs);
    else if (key == "spin_us")
      f.spin_us = number(kMaxSpinUs);
    else if (key == "ecmp_source_ports") f.ecmp_source_ports = uint(1, 256);
    else if (key == "peer_query")
      f.peer_query = boolean();
    else if (key == "peers") {
      if (!v.is_array()) throw Bad{where + ": must be an array of {\"planes\": [...]}"};
      f.peers.clear();
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = where + "/" + std::to_string(i);
        if (!v[i].is_object()) throw Bad{at + ": must be an object {\"planes\": [...]}"};
        std::vector<std::string> planes;
        bool have = false;
        for (const auto& e : v[i].items()) {
          if (e.key() != "planes") throw Bad{at + "/" + e.key() + ": unknown field"};
          const json& a = e.value();
          if (!a.is_array() || a.empty())
            throw Bad{at + "/planes: must be a non-empty array of addresses"};
          for (size_t k = 0; k < a.size(); ++k) {
            if (!a[k].is_string())
              throw Bad{at + "/planes/" + std::to_string(k) + ": must be a string"};
            planes.push_back(a[k].get<std::string>());
          }
          have = true;
        }
        if (!have) throw Bad{at + ": needs \"planes\""};
        f.peers.push_back(std::move(planes));
      }
      f.peers_source = src + ": /peers";
    } else if (key == "nic_gbps")
      f.nic_gbps = number(kMaxNicGbps);
    else if (key == "base_rtt_us") f.base_rtt_us = number(kMaxRttUs);
    else if (key == "min_base_rtt_us") f.min_base_rtt_us = number(kMaxRttUs);
    else if (key == "progress_threads")
      f.progress_threads = uint(0, engine::kMaxPlanes);
    else if (key == "progress_nice") {
      if (!v.is_number_integer()) throw Bad{where + ": must be an integer, got " + v.dump()};
      f.progress_nice = to_nice(where, v.dump());
    }
    else throw Bad{where + ": unknown field"};
  }
}

void from_env(const Getenv& env, Fields& f, std::string& sources) {
  auto get = [&](const char* name, auto&& apply) {
    if (auto v = env(name)) {
      apply(std::string(name), *v);
      sources += std::string(", ") + name;
    }
  };
  get("MRC_PATH_MODE", [&](auto, auto v) { f.path_mode = v; });
  get("MRC_FABRIC", [&](auto, auto v) { f.fabric = v; });
  get("MRC_HOST", [&](auto n, auto v) { f.host = to_uint(n, v, 0, UINT32_MAX); });
  get("MRC_PLANES", [&](auto, auto v) { f.planes = split_commas(v); });
  get("MRC_PORT", [&](auto n, auto v) { f.port = to_uint(n, v, 0, 65535); });
  get("MRC_MTU", [&](auto n, auto v) { f.mtu = to_uint(n, v, 0, 8192); });
  get("MRC_NETNS", [&](auto, auto v) { f.netns = v; });
  get("MRC_GSO", [&](auto n, auto v) { f.gso = to_bool(n, v); });
  get("MRC_GRO", [&](auto n, auto v) { f.gro = to_bool(n, v); });
  get("MRC_ZERO_UDP_CHECKSUM", [&](auto n, auto v) { f.zero_udp_checksum = to_bool(n, v); });
  get("MRC_BUSY_POLL", [&](auto n, auto v) { f.busy_poll = to_bool(n, v); });
  get("MRC_POLLER_PROGRESS", [&](auto n, auto v) { f.poller_progress = to_bool(n, v); });
  get("MRC_ACK_RIDES", [&](auto n, auto v) { f.ack_rides = to_bool(n, v); });
  get("MRC_POLLER_GRACE_US",
      [&](auto n, auto v) { f.poller_grace_us = to_double(n, v, kMaxPollerGraceUs); });
  get("MRC_SPIN_US", [&](auto n, auto v) { f.spin_us = to_double(n, v, kMaxSpinUs); });
  get("MRC_ECMP_SOURCE_PORTS", [&](auto n, auto v) { f.ecmp_source_ports = to_uint(n, v, 1, 256); });
  get("MRC_PEER_QUERY", [&](auto n, auto v) { f.peer_query = to_bool(n, v); });
  get("MRC_PEERS", [&](auto n, auto v) {  // hosts separated by ';', planes by ','
    f.peers.clear();
    std::stringstream in(v);
    for (std::string host; std::getline(in, host, ';');) {
      if (host.empty()) continue;
      f.peers.push_back(split_commas(host));
    }
    f.peers_source = n;
  });
  get("MRC_NIC_GBPS", [&](auto n, auto v) { f.nic_gbps = to_double(n, v, kMaxNicGbps); });
  get("MRC_BASE_RTT_US", [&](auto n, auto v) { f.base_rtt_us = to_double(n, v, kMaxRttUs); });
  get("MRC_MIN_BASE_RTT_US", [&](auto n, auto v) { f.min_base_rtt_us = to_double(n, v, kMaxRttUs); });
  get("MRC_PROGRESS_NICE", [&](auto n, auto v) { f.progress_nice = to_nice(n, v); });
  get("MRC_PROGRESS_THREADS",
      [&](auto n, auto v) { f.progress_threads = to_uint(n, v, 0, engine::kMaxPlanes); });
}

constexpr size_t kMaxFileBytes = 16 << 20;  // a fabric file of the published scale is far less

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Bad{path + ": not a regular file" + (ec ? ": " + ec.message() : "")};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Bad{path + ": cannot read: " + std::strerror(errno)};
  // Read in pieces up to one past the limit (no 16 MiB buffer for a file of a few hundred bytes).
  std::string text;
  char piece[64 * 1024];
  while (text.size() <= kMaxFileBytes && in.read(piece, sizeof piece).gcount() > 0) {
    text.append(piece, static_cast<size_t>(in.gcount()));
  }
  if (text.size() > kMaxFileBytes) throw Bad{path + ": larger than 16 MiB"};
  return text;
}

// An address as the driver binds or sends to it: IPv6 as written (a %scope kept), IPv4 as its
// IPv4-mapped IPv6 form. Throws naming `where`.
std::string plane_address(const std::string& where, const std::string& text, in6_addr* out) {
  const std::string addr = text.substr(0, text.find('%'));
  in_addr v4;
  if (text.find(':') == std::string::npos && ::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    const std::string mapped = "::ffff:" + text;
    ::inet_pton(AF_INET6, mapped.c_str(), out);
    return mapped;
  }
  if (::inet_pton(AF_INET6, addr.c_str(), out) != 1)
    throw Bad{where + ": not an IPv6 or IPv4 address: " + text};
  return text;
}

HostConfig build(const Fields& f, std::string sources) {
  HostConfig hc;
  hc.sources = std::move(sources);
  UdpConfig& u = hc.udp;
  if (f.path_mode == "direct") u.path_mode = PathMode::kDirect;
  else if (f.path_mode == "srv6") u.path_mode = PathMode::kSrv6;
  else if (f.path_mode == "ecmp") u.path_mode = PathMode::kEcmp;
  else throw Bad{"path_mode: must be direct, srv6 or ecmp, got " + f.path_mode};
  if ((f.mtu & (f.mtu - 1)) != 0 || (f.mtu != 0 && f.mtu < 256)) {
    throw Bad{"mtu: must be 0 (the links decide), 256, 512, 1024, 2048, 4096 or 8192, got " +
              std::to_string(f.mtu)};
  }
  hc.mtu = f.mtu;
  if (!f.fabric.empty()) {
    auto fab = srv6::load(read_file(f.fabric));
    if (!fab.ok()) throw Bad{f.fabric + ": " + fab.error()};
    u.fabric = std::make_shared<const srv6::Fabric>(std::move(fab).value());
  }
  if (u.path_mode == PathMode::kSrv6 && (!u.fabric || !f.host)) {
    throw Bad{"path_mode srv6: needs both fabric and host"};
  }
  if (f.host && u.fabric && *f.host >= u.fabric->config().hosts) {
    throw Bad{"host: " + std::to_string(*f.host) + " is not in the fabric (" +
              std::to_string(u.fabric->config().hosts) + " hosts)"};
  }
  u.local_host = f.host.value_or(0);
  std::vector<std::string> planes = f.planes;
  if (planes.empty() && u.fabric && f.host) {
    for (uint32_t p = 0; p < u.fabric->config().planes; ++p) {
      planes.push_back(srv6::format(u.fabric->host_address(*f.host, p)));
    }
  }
  if (planes.empty()) throw Bad{"planes: no local addresses (set planes, or fabric and host)"};
  std::vector<in6_addr> local(planes.size());
  for (size_t i = 0; i < planes.size(); ++i) {
    const std::string bind = plane_address("planes/" + std::to_string(i), planes[i], &local[i]);
    if (IN6_IS_ADDR_V4MAPPED(&local[i]) && u.path_mode == PathMode::kSrv6)
      throw Bad{"planes/" + std::to_string(i) + ": IPv4 address " + planes[i] +
                ": path_mode srv6 needs IPv6 (IPv4 works with direct and ecmp)"};
    // Planes sharing an address (loopback tests) take consecutive ports: port, port + 1, ...
    uint32_t port = f.port;
    if (port != 0)
      for (size_t j = 0; j < i; ++j) port += planes[j] == planes[i] ? 1 : 0;
    if (port > 65535) throw Bad{"planes/" + std::to_string(i) + ": port " + std::to_string(port) + " out of range"};
    u.planes.push_back(PlaneConfig{bind, static_cast<uint16_t>(port)});
  }
  // The static peer table: each host's address per plane, at the port the same plane has
  // here (hosts are configured alike).
  if (!f.peers.empty() && u.path_mode == PathMode::kSrv6)
    throw Bad{f.peers_source + ": peers are for path_mode direct or ecmp (srv6 has its fabric)"};
  std::map<std::string, std::string> seen;  // address -> where it was first listed
  for (size_t h = 0; h < f.peers.size(); ++h) {
    const std::string at = f.peers_source + "/" + std::to_string(h) + "/planes";
    const auto& entry = f.peers[h];
    if (entry.size() != u.planes.size())
      throw Bad{at + ": " + std::to_string(entry.size()) + " addresses for " +
                std::to_string(u.planes.size()) + " planes (one per plane, in plane order)"};
    std::vector<sockaddr_in6> dsts;
    for (size_t p = 0; p < entry.size(); ++p) {
      const std::string where = at + "/" + std::to_string(p);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      (void)plane_address(where, entry[p], &a.sin6_addr);
      if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr) != IN6_IS_ADDR_V4MAPPED(&local[p]))
        throw Bad{where + ": " + entry[p] + " is " +
                  (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr) ? "IPv4" : "IPv6") + ", plane " +
                  std::to_string(p) + " here is " +
                  (IN6_IS_ADDR_V4MAPPED(&local[p]) ? "IPv4" : "IPv6")};
      char text[INET6_ADDRSTRLEN];
      ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
      if (auto [it, fresh] = seen.emplace(text, where); !fresh)
        throw Bad{where + ": " + entry[p] + " is listed already (" + it->second + ")"};
      a.sin6_port = htons(u.planes[p].port);
      dsts.push_back(a);
    }
    u.known_peers.push_back(std::move(dsts));
  }
  u.peer_query = f.peer_query;
  u.peer_port = static_cast<uint16_t>(f.port);
  u.netns = f.netns;
  u.gso = f.gso;
  u.gro = f.gro;
  u.zero_udp_checksum = f.zero_udp_checksum;
  // One checksum over the payload: UDP's, or MRC's payload CRC where UDP's is off.
  u.engine.payload_crc = f.zero_udp_checksum;
  u.busy_poll = f.busy_poll;
  u.poller_progress = f.poller_progress;
  u.engine.ack_rides = f.ack_rides;
  u.poller_grace = engine::Duration{std::llround(f.poller_grace_us * 1000)};
  if (f.spin_us) u.spin = engine::Duration{std::llround(*f.spin_us * 1000)};
  u.ecmp_source_ports = f.ecmp_source_ports;
  double gbps = f.nic_gbps;
  if (gbps == 0 && u.fabric) gbps = u.fabric->config().host_port_gbps * u.planes.size();
  if (gbps > 0) u.engine.nic_bps = static_cast<uint64_t>(gbps * 1e9);
  u.engine.base_rtt = engine::Duration{static_cast<int64_t>(f.base_rtt_us * 1000)};
  u.engine.min_base_rtt = engine::Duration{static_cast<int64_t>(f.min_base_rtt_us * 1000)};
  u.progress_nice = f.progress_nice;
  u.progress_threads = f.progress_threads;
  return hc;
}

Result<HostConfig, std::string> parse(const std::optional<std::string>& text,
                                      const std::string& source, const Getenv& env) {
  try {
    Fields f;
    std::string sources = "defaults";
    if (text) {
      json j;
      try {
        j = json::parse(*text);
      } catch (const json::exception& e) {
        throw Bad{source + ": not JSON: " + e.what()};
      }
      from_json(j, source, f);
      sources += ", " + source;
    }
    from_env(env, f, sources);
    return build(f, sources);
  } catch (const Bad& b) {
    return Err(b.msg);
  }
}

}  // namespace

std::optional<std::string> process_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Result<HostConfig, std::string> parse_host_config(const std::string& json_text,
                                                  const std::string& source, const Getenv& env) {
  return parse(json_text, source, env);
}

Result<HostConfig, std::string> load_host_config(const Getenv& env) {
  std::string path = "/etc/mrc/mrc.json";
  bool must_exist = false;
  if (auto p = env("MRC_CONFIG")) {
    path = *p;
    must_exist = true;
  }
  std::ifstream probe(path);
  if (!probe) {
    if (must_exist) return Err("MRC_CONFIG: cannot read " + path + ": " + std::strerror(errno));
    return parse(std::nullopt, "", env);
  }
  std::stringstream ss;
  ss << probe.rdbuf();
  return parse(ss.str(), path, env);
}

}  // namespace mrc::io
