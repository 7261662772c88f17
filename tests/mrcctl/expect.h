// Checks shared by the mrcctl tests: a strict parser of the Prometheus text exposition
// (format 0.0.4) and a JSON shape checker. Threading: plain functions.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace mrc::mrcctl::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

/// Parses `text`, failing the test (with the line) on anything the format does not allow or
/// Prometheus conventions advise against: a sample before its family's # TYPE, a family split
/// in two blocks, a counter not ending in _total, a bad name, label or value.
inline std::vector<Sample> parse_exposition(const std::string& text) {
  static const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex label_re("[a-zA-Z_][a-zA-Z0-9_]*");
  std::vector<Sample> out;
  std::map<std::string, std::string> types;
  std::set<std::string> helped, closed;
  std::string current;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = "line " + std::to_string(n) + ": " + line;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream w(line);
      std::string hash, kind, name;
      w >> hash >> kind >> name;
      EXPECT_TRUE(std::regex_match(name, name_re)) << where;
      if (kind == "HELP") {
        EXPECT_TRUE(helped.insert(name).second) << "second HELP: " << where;
      } else if (kind == "TYPE") {
        std::string type;
        w >> type;
        EXPECT_TRUE(type == "counter" || type == "gauge") << where;
        EXPECT_EQ(types.count(name), 0u) << "second TYPE: " << where;
        EXPECT_EQ(closed.count(name), 0u) << where;
        types[name] = type;
        if (!current.empty() && current != name) closed.insert(current);
        current = name;
        if (type == "counter") {
          EXPECT_EQ(name.size() > 6 && name.substr(name.size() - 6) == "_total", true) << where;
        }
        EXPECT_EQ(name.rfind("mrc_", 0), 0u) << where;
      }
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    EXPECT_TRUE(std::regex_match(s.name, name_re)) << where;
    EXPECT_EQ(s.name, current) << "sample outside its family block: " << where;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          ADD_FAILURE() << "bad label: " << where;
          return out;
        }
        const std::string key = line.substr(i, eq - i);
        EXPECT_TRUE(std::regex_match(key, label_re)) << where;
        std::string val;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            ++j;
            EXPECT_TRUE(j < line.size() && (line[j] == '\\' || line[j] == '"' || line[j] == 'n'))
                << "bad escape: " << where;
            val += line[j] == 'n' ? '\n' : line[j];
          } else {
            val += line[j];
          }
        }
        EXPECT_LT(j, line.size()) << "unterminated label value: " << where;
        EXPECT_TRUE(s.labels.emplace(key, val).second) << "label twice: " << where;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    EXPECT_TRUE(i < line.size() && line[i] == ' ') << where;
    const std::string v = line.substr(i + 1);
    size_t used = 0;
    try {
      s.value = std::stod(v, &used);
    } catch (...) {
      used = 0;
    }
    EXPECT_TRUE(used == v.size() && !v.empty()) << "bad value: " << where;
    EXPECT_TRUE(types.count(s.name)) << "no TYPE before: " << where;
    EXPECT_TRUE(helped.count(s.name)) << "no HELP before: " << where;
    out.push_back(std::move(s));
  }
  // A (name, labels) pair appears once.
  std::set<std::string> seen;
  for (const Sample& s : out) {
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
    EXPECT_TRUE(seen.insert(key).second) << "duplicate series " << key;
  }
  return out;
}

/// Finds the one sample of `name` whose labels include `labels`; fails if not exactly one.
inline double sample(const std::vector<Sample>& all, const std::string& name,
                     const std::map<std::string, std::string>& labels) {
  const Sample* hit = nullptr;
  int n = 0;
  for (const Sample& s : all) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (match) {
      hit = &s;
      ++n;
    }
  }
  EXPECT_EQ(n, 1) << name;
  return hit ? hit->value : -1;
}

enum class T { kString, kUint, kNumber, kBool, kArray, kObjectOrNull, kUintOrNull, kStringOrNull };

/// Every object of the array `j` has exactly the keys of `shape`, with those types.
inline void expect_shape(const nlohmann::json& j, const std::map<std::string, T>& shape,
                         const std::string& what) {
  ASSERT_TRUE(j.is_array()) << what;
  for (const auto& o : j) {
    ASSERT_TRUE(o.is_object()) << what;
    EXPECT_EQ(o.size(), shape.size()) << what << ": " << o.dump();
    for (const auto& [k, t] : shape) {
      ASSERT_TRUE(o.contains(k)) << what << ": no " << k << " in " << o.dump();
      const auto& v = o[k];
      bool ok = false;
      switch (t) {
        case T::kString:
          ok = v.is_string();
          break;
        case T::kUint:
          ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
          break;
        case T::kNumber:
          ok = v.is_number();
          break;
        case T::kBool:
          ok = v.is_boolean();
          break;
        case T::kArray:
          ok = v.is_array();
          break;
        case T::kObjectOrNull:
          ok = v.is_object() || v.is_null();
          break;
        case T::kUintOrNull:
          ok = v.is_null() || v.is_number_unsigned() || v.is_number_integer();
          break;
        case T::kStringOrNull:
          ok = v.is_null() || v.is_string();
          break;
      }
      EXPECT_TRUE(ok) << what << ": " << k << " has the wrong type in " << o.dump();
    }
  }
}

// The documented shapes (docs/mrcctl.md).
inline const std::map<std::string, T> kPathShape = {{"pid", T::kUint},
                                                    {"device", T::kString},
                                                    {"qpn", T::kUint},
                                                    {"peer", T::kString},
                                                    {"ev", T::kUint},
                                                    {"path", T::kString},
                                                    {"plane", T::kUint},
                                                    {"spine", T::kUint},
                                                    {"state", T::kString},
                                                    {"active", T::kBool},
                                                    {"plane_drained", T::kBool},
                                                    {"changes", T::kUint},
                                                    {"reason", T::kStringOrNull},
                                                    {"since_ns", T::kUintOrNull},
                                                    {"rtt_us", T::kNumber},
                                                    {"srtt_us", T::kNumber},
                                                    {"rtt_p50_us", T::kNumber},
                                                    {"rtt_p99_us", T::kNumber},
                                                    {"loss", T::kNumber},
                                                    {"tx_packets", T::kUint},
                                                    {"tx_bytes", T::kUint},
                                                    {"acked", T::kUint},
                                                    {"lost", T::kUint},
                                                    {"trims", T::kUint},
                                                    {"ecn_marks", T::kUint},
                                                    {"probes", T::kUint},
                                                    {"probe_replies", T::kUint}};
inline const std::map<std::string, T> kDeviceShape = {{"pid", T::kUint},
                                                      {"device", T::kString},
                                                      {"netns", T::kString},
                                                      {"path_mode", T::kString},
                                                      {"local_host", T::kUintOrNull},
                                                      {"planes", T::kUint},
                                                      {"qps", T::kUint},
                                                      {"peers", T::kArray},
                                                      {"control", T::kBool},
                                                      {"rx_datagrams", T::kUint},
                                                      {"tx_datagrams", T::kUint},
                                                      {"rx_bytes", T::kUint},
                                                      {"tx_bytes", T::kUint},
                                                      {"drops", T::kUint},
                                                      {"addr_queries_sent", T::kUint},
                                                      {"addr_queries_answered", T::kUint},
                                                      {"addr_queries_refused", T::kUint},
                                                      {"addr_queries_rate_limited", T::kUint},
                                                      {"addr_replies_accepted", T::kUint},
                                                      {"addr_replies_dropped", T::kUint},
                                                      {"addr_peers_unanswered", T::kUint},
                                                      {"port_status_sent", T::kUint},
                                                      {"port_status_applied", T::kUint},
                                                      {"port_status_refused", T::kUint},
                                                      {"port_status_acks_dropped", T::kUint},
                                                      {"port_link_changes", T::kUint},
                                                      {"port_status_stale", T::kUint},
                                                      {"loop_woke_socket", T::kUint},
                                                      {"loop_woke_app", T::kUint},
                                                      {"loop_woke_alarm", T::kUint},
                                                      {"loop_woke_poller_end", T::kUint},
                                                      {"loop_woke_deadline", T::kUint},
                                                      {"loop_rx_rounds", T::kUint},
                                                      {"poller_rounds", T::kUint},
                                                      {"poller_timeouts", T::kUint},
                                                      {"other_thread_rounds", T::kUint},
                                                      {"app_wakeups", T::kUint},
                                                      {"poller_polls", T::kUint},
                                                      {"poller_busy", T::kUint},
                                                      {"poller_ready_checks", T::kUint},
                                                      {"poller_recvmmsg", T::kUint},
                                                      {"poller_timer_arms", T::kUint},
                                                      {"loop_spins", T::kUint},
                                                      {"generation", T::kUint},
                                                      {"age_s", T::kNumber}};
inline const std::map<std::string, T> kPortShape = {
    {"pid", T::kUint},        {"device", T::kString},   {"plane", T::kUint},
    {"address", T::kString},  {"port", T::kUint},       {"admin", T::kString},
    {"link", T::kString},     {"evs_good", T::kUint},   {"evs_assumed_bad", T::kUint},
    {"evs_denied", T::kUint}, {"tx_packets", T::kUint}, {"tx_bytes", T::kUint}};
inline const std::map<std::string, T> kQpShape = {{"pid", T::kUint},
                                                  {"device", T::kString},
                                                  {"qpn", T::kUint},
                                                  {"state", T::kString},
                                                  {"peer", T::kString},
                                                  {"dest_qpn", T::kUint},
                                                  {"mtu", T::kUint},
                                                  {"evs", T::kUint},
                                                  {"evs_good", T::kUint},
                                                  {"tx_data_packets", T::kUint},
                                                  {"tx_retransmits", T::kUint},
                                                  {"tx_payload_bytes", T::kUint},
                                                  {"rx_data_packets", T::kUint},
                                                  {"rx_payload_bytes", T::kUint},
                                                  {"tx_acks", T::kUint},
                                                  {"rx_acks", T::kUint},
                                                  {"tx_nacks", T::kUint},
                                                  {"rx_nacks", T::kUint},
                                                  {"rto_fired", T::kUint},
                                                  {"fast_losses", T::kUint},
                                                  {"spurious_losses", T::kUint},
                                                  {"tail_probes", T::kUint},
                                                  {"rnr_naks", T::kUint},
                                                  {"srtt_us", T::kNumber},
                                                  {"min_rtt_us", T::kNumber},
                                                  {"completions", T::kUint},
                                                  {"error_completions", T::kUint},
                                                  {"cc", T::kObjectOrNull}};
inline const std::map<std::string, T> kEventShape = {
    {"pid", T::kUint},   {"device", T::kString}, {"seq", T::kUint},    {"at_ns", T::kUint},
    {"qpn", T::kUint},   {"ev", T::kUint},       {"path", T::kString}, {"plane", T::kUint},
    {"spine", T::kUint}, {"from", T::kString},   {"to", T::kString},   {"reason", T::kString},
    {"missed", T::kUint}};

}  // namespace mrc::mrcctl::testing
