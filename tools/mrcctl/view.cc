// Snapshots -> JSON, tables and Prometheus text (view.h). Threading: pure functions.
#include "view.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "mrc/engine/paths.h"
#include "mrc/engine/stats.h"
#include "mrc/engine/types.h"

namespace mrc::mrcctl {

namespace {

std::string qp_state(uint8_t s) {
  return s <= static_cast<uint8_t>(engine::QpState::kError)
             ? engine::to_string(static_cast<engine::QpState>(s))
             : "?";
}
std::string ev_state(uint8_t s) {
  return s <= static_cast<uint8_t>(engine::EvState::kDenied)
             ? engine::to_string(static_cast<engine::EvState>(s))
             : "?";
}
std::string ev_reason(uint8_t r) {
  return r <= static_cast<uint8_t>(engine::EvReason::kAllowed)
             ? engine::to_string(static_cast<engine::EvReason>(r))
             : "?";
}
const char* mode_name(uint32_t m) {
  switch (m) {
    case 0:
      return "direct";
    case 1:
      return "srv6";
    case 2:
      return "ecmp";
  }
  return "?";
}

bool selected(const Snapshot& s, const Filter& f) {
  return (f.pid == 0 || s.pid == f.pid) && (f.device.empty() || f.device == s.device.name);
}

std::string fmt(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string cell(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_float()) return fmt(v.get<double>(), 1);
  return v.dump();
}

// DeviceRecord's counters appended after layout 1 first shipped, by their document names.
// A segment from an older libmrc lacks some (Snapshot::has): they are left out, not shown as 0.
using Counters = std::vector<std::pair<const char*, uint64_t>>;
using DeviceCounter = std::pair<const char*, uint64_t observe::DeviceRecord::*>;

template <size_t N>
Counters present(const Snapshot& s, const DeviceCounter (&fields)[N]) {
  Counters out;
  for (const auto& [name, f] : fields)
    if (s.has(f)) out.emplace_back(name, s.device.*f);
  return out;
}

using R = observe::DeviceRecord;

// Connectionless probes (io/udp/probes.h).
Counters probe_counters(const Snapshot& s) {
  static constexpr DeviceCounter kFields[] = {
      {"probes_answered", &R::probes_answered},
      {"probes_rate_limited", &R::probes_rate_limited},
      {"probe_replies_dropped", &R::probe_replies_dropped}};
  return present(s, kFields);
}

// The peer address query counters (io/udp/peer_addresses.h).
Counters addr_query_counters(const Snapshot& s) {
  static constexpr DeviceCounter kFields[] = {
      {"addr_queries_sent", &R::addr_queries_sent},
      {"addr_queries_answered", &R::addr_queries_answered},
      {"addr_queries_refused", &R::addr_queries_refused},
      {"addr_queries_rate_limited", &R::addr_queries_rate_limited},
      {"addr_replies_accepted", &R::addr_replies_accepted},
      {"addr_replies_dropped", &R::addr_replies_dropped},
      {"addr_peers_unanswered", &R::addr_peers_unanswered}};
  return present(s, kFields);
}

// The port status and port link counters (io/udp/port_status.h, io/udp/link_watch.h).
Counters port_counters(const Snapshot& s) {
  static constexpr DeviceCounter kFields[] = {
      {"port_status_sent", &R::port_status_sent},
      {"port_status_applied", &R::port_status_applied},
      {"port_status_refused", &R::port_status_refused},
      {"port_status_acks_dropped", &R::port_status_acks_dropped},
      {"port_status_stale", &R::port_status_stale},
      {"port_link_changes", &R::port_link_changes}};
  return present(s, kFields);
}

// What woke the progress loop and which threads did the receive work (io::UdpCounters).
Counters wake_counters(const Snapshot& s) {
  static constexpr DeviceCounter kFields[] = {
      {"loop_woke_socket", &R::loop_woke_socket},
      {"loop_woke_app", &R::loop_woke_app},
      {"loop_woke_alarm", &R::loop_woke_alarm},
      {"loop_woke_poller_end", &R::loop_woke_poller_end},
      {"loop_woke_deadline", &R::loop_woke_deadline},
      {"loop_rx_rounds", &R::loop_rx_rounds},
      {"poller_rounds", &R::poller_rounds},
      {"poller_timeouts", &R::poller_timeouts},
      {"other_thread_rounds", &R::other_thread_rounds},
      {"app_wakeups", &R::app_wakeups},
      {"poller_polls", &R::poller_polls},
      {"poller_busy", &R::poller_busy},
      {"poller_ready_checks", &R::poller_ready_checks},
      {"poller_recvmmsg", &R::poller_recvmmsg},
      {"poller_timer_arms", &R::poller_timer_arms},
      {"loop_spins", &R::loop_spins}};
  return present(s, kFields);
}

}  // namespace

std::string peer_name(const Snapshot& s, uint32_t id) {
  for (uint32_t i = 0; i < s.device.n_peers; ++i)
    if (s.device.peer[i].id == id) return s.device.peer[i].name;
  return "?";
}

bool has_peer(const std::vector<Snapshot>& snaps, const std::string& name) {
  for (const Snapshot& s : snaps)
    for (uint32_t i = 0; i < s.device.n_peers; ++i)
      if (name == s.device.peer[i].name ||
          (s.device.peer[i].host != UINT32_MAX && name == std::to_string(s.device.peer[i].host)))
        return true;
  return false;
}

std::string ev_text(uint32_t ev) {
  std::string t = "p" + std::to_string(ev >> 16) + ".s" + std::to_string((ev >> 8) & 0xFF);
  if (ev & 0xFF) t += ".k" + std::to_string(ev & 0xFF);
  return t;
}

bool parse_ev(const std::string& text, uint32_t* ev) {
  if (text.empty()) return false;
  unsigned p = 0, s = 0, k = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "p%u.s%u%n", &p, &s, &used) == 2) {
    if (static_cast<size_t>(used) != text.size()) {
      int more = 0;
      if (std::sscanf(text.c_str() + used, ".k%u%n", &k, &more) != 1 ||
          static_cast<size_t>(used + more) != text.size())
        return false;
    }
    if (p > 0xFFFF || s > 0xFF || k > 0xFF) return false;
    *ev = p << 16 | s << 8 | k;
    return true;
  }
  size_t pos = 0;
  try {
    const unsigned long long v = std::stoull(text, &pos, 0);
    if (pos != text.size() || v > UINT32_MAX || text[0] == '-') return false;
    *ev = static_cast<uint32_t>(v);
    return true;
  } catch (...) {
    return false;
  }
}

// ---- JSON ---------------------------------------------------------------------------------

Json devices_json(const std::vector<Snapshot>& snaps, const Filter& f, int64_t now_ns) {
  Json out = Json::array();
  for (const Snapshot& s : snaps) {
    if (!selected(s, f)) continue;
    const observe::DeviceRecord& d = s.device;
    uint64_t drops = 0;
    for (uint64_t x : d.drops) drops += x;
    Json peers = Json::array();
    for (uint32_t i = 0; i < d.n_peers; ++i) peers.push_back(d.peer[i].name);
    out.push_back(
        Json{{"pid", s.pid},
             {"device", d.name},
             {"netns", d.netns},
             {"path_mode", mode_name(d.path_mode)},
             {"local_host", d.local_host == UINT32_MAX ? Json() : Json(d.local_host)},
             {"planes", d.planes},
             {"qps", s.qps.size()},
             {"peers", peers},
             {"control", d.has_control != 0},
             {"rx_datagrams", d.rx_datagrams},
             {"tx_datagrams", d.tx_datagrams},
             {"rx_bytes", d.rx_bytes},
             {"tx_bytes", d.tx_bytes},
             {"drops", drops},
             {"generation", s.generation},
             {"age_s", s.published_ns > 0 ? Json((now_ns - s.published_ns) / 1e9) : Json()}});
    for (const auto& [name, v] : addr_query_counters(s)) out.back()[name] = v;
    for (const auto& [name, v] : port_counters(s)) out.back()[name] = v;
    for (const auto& [name, v] : wake_counters(s)) out.back()[name] = v;
  }
  return out;
}

Json ports_json(const std::vector<Snapshot>& snaps, const Filter& f) {
  Json out = Json::array();
  for (const Snapshot& s : snaps) {
    if (!selected(s, f)) continue;
    for (uint32_t p = 0; p < s.device.planes; ++p) {
      uint64_t good = 0, bad = 0, denied = 0, tx = 0, bytes = 0;
      for (const observe::EvRecord& e : s.evs) {
        if (e.plane != p) continue;
        good += e.state == 0;
        bad += e.state == 1;
        denied += e.state == 2;
        tx += e.tx_packets;
        bytes += e.tx_bytes;
      }
      out.push_back(Json{{"pid", s.pid},
                         {"device", s.device.name},
                         {"plane", p},
                         {"address", s.device.plane[p].address},
                         {"port", s.device.plane[p].port},
                         {"admin", s.device.plane[p].admin_down ? "drained" : "up"},
                         {"link", s.device.plane[p].link_down ? "down" : "up"},
                         {"evs_good", good},
                         {"evs_assumed_bad", bad},
                         {"evs_denied", denied},
                         {"tx_packets", tx},
                         {"tx_bytes", bytes}});
    }
  }
  return out;
}

Json qps_json(const std::vector<Snapshot>& snaps, const Filter& f) {
  Json out = Json::array();
  for (const Snapshot& s : snaps) {
    if (!selected(s, f)) continue;
    for (const observe::QpRecord& q : s.qps) {
      if (f.qpn && q.qpn != f.qpn) continue;
      const std::string peer = peer_name(s, q.peer);
      if (!f.peer.empty() && peer != f.peer) continue;
      uint32_t good = 0;
      for (uint32_t i = q.ev_first; i < q.ev_first + q.ev_count; ++i) good += s.evs[i].state == 0;
      Json j{{"pid", s.pid},
             {"device", s.device.name},
             {"qpn", q.qpn},
             {"state", qp_state(q.state)},
             {"peer", peer},
             {"dest_qpn", q.dest_qpn},
             {"mtu", q.mtu},
             {"evs", q.ev_count},
             {"evs_good", good},
             {"tx_data_packets", q.tx_data_packets},
             {"tx_retransmits", q.tx_retransmits},
             {"tx_payload_bytes", q.tx_payload_bytes},
             {"rx_data_packets", q.rx_data_packets},
             {"rx_payload_bytes", q.rx_payload_bytes},
             {"tx_acks", q.tx_acks},
             {"rx_acks", q.rx_acks},
             {"tx_nacks", q.tx_nacks},
             {"rx_nacks", q.rx_nacks},
             {"rto_fired", q.rto_fired},
             {"fast_losses", q.fast_losses},
             {"spurious_losses", q.spurious_losses},
             {"tail_probes", q.tail_probes},
             {"rnr_naks", q.rnr_naks},
             {"srtt_us", q.srtt_ns / 1000.0},
             {"min_rtt_us", q.min_rtt_ns / 1000.0},
             {"completions", q.completions},
             {"error_completions", q.error_completions}};
      if (q.has_cc) {
        j["cc"] = Json{{"cwnd", q.cc_cwnd},           {"min_cwnd", q.cc_min_cwnd},
                       {"acks", q.cc_acks},           {"increases", q.cc_increases},
                       {"decreases", q.cc_decreases}, {"quick_adapts", q.cc_quick_adapts},
                       {"trims", q.cc_trims},         {"losses", q.cc_losses}};
      } else {
        j["cc"] = nullptr;
      }
      out.push_back(std::move(j));
    }
  }
  return out;
}

Json paths_json(const std::vector<Snapshot>& snaps, const Filter& f) {
  Json out = Json::array();
  for (const Snapshot& s : snaps) {
    if (!selected(s, f)) continue;
    for (const observe::QpRecord& q : s.qps) {
      if (f.qpn && q.qpn != f.qpn) continue;
      const std::string peer = peer_name(s, q.peer);
      if (!f.peer.empty() && peer != f.peer) continue;
      for (uint32_t i = q.ev_first; i < q.ev_first + q.ev_count; ++i) {
        const observe::EvRecord& e = s.evs[i];
        const double loss = e.tx_packets ? static_cast<double>(e.lost) / e.tx_packets : 0.0;
        out.push_back(Json{{"pid", s.pid},
                           {"device", s.device.name},
                           {"qpn", q.qpn},
                           {"peer", peer},
                           {"ev", e.ev},
                           {"path", ev_text(e.ev)},
                           {"plane", e.plane},
                           {"spine", e.spine},
                           {"state", ev_state(e.state)},
                           {"active", e.active != 0},
                           {"plane_drained", e.plane_drained != 0},
                           {"changes", e.changes},
                           {"reason", e.changes ? Json(ev_reason(e.reason)) : Json()},
                           {"since_ns", e.changes ? Json(e.since_ns) : Json()},
                           {"rtt_us", e.rtt_ns / 1000.0},
                           {"srtt_us", e.srtt_ns / 1000.0},
                           {"rtt_p50_us", e.rtt_p50_ns / 1000.0},
                           {"rtt_p99_us", e.rtt_p99_ns / 1000.0},
                           {"loss", loss},
                           {"tx_packets", e.tx_packets},
                           {"tx_bytes", e.tx_bytes},
                           {"acked", e.acked},
                           {"lost", e.lost},
                           {"trims", e.trims},
                           {"ecn_marks", e.ecn_marks},
                           {"probes", e.probes},
                           {"probe_replies", e.probe_replies}});
      }
    }
  }
  return out;
}

Json event_json(const Snapshot& s, const observe::EventRecord& e, uint64_t seq) {
  return Json{{"pid", s.pid},
              {"device", s.device.name},
              {"seq", seq},
              {"at_ns", e.at_ns},
              {"qpn", e.qpn},
              {"ev", e.ev},
              {"path", ev_text(e.ev)},
              {"plane", e.plane},
              {"spine", (e.ev >> 8) & 0xFF},
              {"from", ev_state(e.from)},
              {"to", ev_state(e.to)},
              {"reason", ev_reason(e.reason)},
              {"missed", e.missed}};
}

Json events_json(const std::vector<Snapshot>& snaps, const Filter& f,
                 std::vector<std::pair<std::string, uint64_t>>* from) {
  Json out = Json::array();
  for (const Snapshot& s : snaps) {
    if (!selected(s, f)) continue;
    const std::string key = std::to_string(s.pid) + "." + s.device.name;
    uint64_t start = 0;
    auto it = std::find_if(from->begin(), from->end(), [&](auto& p) { return p.first == key; });
    if (it != from->end()) start = it->second;
    for (size_t i = 0; i < s.events.size(); ++i) {
      const uint64_t seq = s.first_event + i;
      if (seq < start) continue;
      const observe::EventRecord& e = s.events[i];
      if (f.qpn && e.qpn != f.qpn) continue;
      out.push_back(event_json(s, e, seq));
    }
    if (it != from->end())
      it->second = s.events_written;
    else
      from->emplace_back(key, s.events_written);
  }
  std::stable_sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    return a["at_ns"].get<int64_t>() < b["at_ns"].get<int64_t>();
  });
  return out;
}

// ---- tables -------------------------------------------------------------------------------

std::string render(const Table& t, const std::vector<size_t>& min_widths) {
  std::vector<size_t> w(t.head.size(), 0);
  for (size_t c = 0; c < t.head.size(); ++c)
    w[c] = std::max(t.head[c].size(), c < min_widths.size() ? min_widths[c] : 0);
  for (const auto& r : t.rows)
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  std::ostringstream o;
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t c = 0; c < w.size(); ++c) {
      const std::string v = c < r.size() ? r[c] : "";
      l += v;
      if (c + 1 < w.size()) l += std::string(w[c] - v.size() + 2, ' ');
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    o << l << '\n';
  };
  line(t.head);
  for (const auto& r : t.rows) line(r);
  return o.str();
}

namespace {
Table from_json(const Json& j, const std::vector<std::pair<std::string, std::string>>& cols) {
  Table t;
  for (const auto& c : cols) t.head.push_back(c.first);
  for (const Json& r : j) {
    std::vector<std::string> row;
    for (const auto& c : cols) row.push_back(r.contains(c.second) ? cell(r[c.second]) : "-");
    t.rows.push_back(std::move(row));
  }
  return t;
}
}  // namespace

Table devices_table(const Json& j) {
  Table t = from_json(j, {{"PID", "pid"},
                          {"DEVICE", "device"},
                          {"NETNS", "netns"},
                          {"MODE", "path_mode"},
                          {"HOST", "local_host"},
                          {"PLANES", "planes"},
                          {"QPS", "qps"},
                          {"PEERS", "peers"},
                          {"RX_DGRAMS", "rx_datagrams"},
                          {"TX_DGRAMS", "tx_datagrams"},
                          {"DROPS", "drops"},
                          {"ADDRQ_REFUSED", "addr_queries_refused"},
                          {"CTL", "control"}});
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::string p;
    for (const Json& n : j[i]["peers"]) p += (p.empty() ? "" : ",") + n.get<std::string>();
    t.rows[i][7] = p.empty() ? "-" : p;
    if (t.rows[i][2].empty()) t.rows[i][2] = "-";
  }
  return t;
}

Table ports_table(const Json& j) {
  return from_json(j, {{"PID", "pid"},
                       {"DEVICE", "device"},
                       {"PLANE", "plane"},
                       {"ADDRESS", "address"},
                       {"PORT", "port"},
                       {"ADMIN", "admin"},
                       {"LINK", "link"},
                       {"GOOD", "evs_good"},
                       {"BAD", "evs_assumed_bad"},
                       {"DENIED", "evs_denied"},
                       {"TX_PKTS", "tx_packets"},
                       {"TX_BYTES", "tx_bytes"}});
}

Table qps_table(const Json& j) {
  Table t = from_json(j, {{"PID", "pid"},
                          {"DEVICE", "device"},
                          {"QPN", "qpn"},
                          {"STATE", "state"},
                          {"PEER", "peer"},
                          {"DEST_QPN", "dest_qpn"},
                          {"EVS", "evs"},
                          {"TX_PKTS", "tx_data_packets"},
                          {"RETX", "tx_retransmits"},
                          {"RX_PKTS", "rx_data_packets"},
                          {"RTO", "rto_fired"},
                          {"SRTT_US", "srtt_us"},
                          {"CWND", "cc"}});
  for (size_t i = 0; i < t.rows.size(); ++i) {
    t.rows[i][6] = std::to_string(j[i]["evs_good"].get<uint32_t>()) + "/" + t.rows[i][6];
    t.rows[i][12] = j[i]["cc"].is_null() ? "-" : std::to_string(j[i]["cc"]["cwnd"].get<uint64_t>());
  }
  t.head[6] = "GOOD/EVS";
  return t;
}

Table paths_table(const Json& j) {
  Table t;
  t.head = {"PID",   "DEVICE", "QPN",    "PEER",       "EV",         "PLANE",
            "SPINE", "STATE",  "REASON", "RTT_P50_US", "RTT_P99_US", "LOSS%",
            "LOST",  "TRIMS",  "ECN",    "TX_PKTS",    "TX_BYTES"};
  for (const Json& r : j) {
    t.rows.push_back({cell(r["pid"]), cell(r["device"]), cell(r["qpn"]), cell(r["peer"]),
                      cell(r["path"]), cell(r["plane"]), cell(r["spine"]), cell(r["state"]),
                      cell(r["reason"]), cell(r["rtt_p50_us"]), cell(r["rtt_p99_us"]),
                      fmt(r["loss"].get<double>() * 100.0, 2), cell(r["lost"]), cell(r["trims"]),
                      cell(r["ecn_marks"]), cell(r["tx_packets"]), cell(r["tx_bytes"])});
  }
  return t;
}

Table events_table(const Json& j) {
  Table t;
  t.head = {"TIME_S", "PID", "DEVICE", "QPN", "EV", "PLANE", "SPINE", "FROM", "TO", "REASON"};
  for (const Json& r : j) {
    t.rows.push_back(
        {fmt(r["at_ns"].get<int64_t>() / 1e9, 6), cell(r["pid"]), cell(r["device"]), cell(r["qpn"]),
         cell(r["path"]), cell(r["plane"]), cell(r["spine"]), cell(r["from"]), cell(r["to"]),
         cell(r["reason"]) +
             (r["missed"].get<uint32_t>() ? " (+" + cell(r["missed"]) + " more)" : "")});
  }
  return t;
}

Table probe_table(const Json& replies) {
  Table t;
  t.head = {"PID",  "DEVICE", "PEER",       "EV",         "PLANE",      "SPINE",  "SENT",
            "RECV", "LOSS%",  "RTT_MIN_US", "RTT_AVG_US", "RTT_MAX_US", "VERDICT"};
  for (const Json& r : replies) {
    for (const Json& p : r["paths"]) {
      t.rows.push_back({cell(r["pid"]), cell(r["device"]), cell(r["peer"]),
                        ev_text(p["ev"].get<uint32_t>()), cell(p["plane"]), cell(p["spine"]),
                        cell(p["sent"]), cell(p["received"]),
                        fmt(p["loss"].get<double>() * 100.0, 1),
                        p.contains("rtt_min_us") ? cell(p["rtt_min_us"]) : "-",
                        p.contains("rtt_avg_us") ? cell(p["rtt_avg_us"]) : "-",
                        p.contains("rtt_max_us") ? cell(p["rtt_max_us"]) : "-",
                        p["bad"].get<bool>()          ? "BAD"
                        : p["loss"].get<double>() > 0 ? "lossy"
                                                      : "ok"});
    }
  }
  return t;
}

Table cc_table(const Json& replies) {
  Table t;
  t.head = {"PID",      "DEVICE", "QPN", "PROFILE", "BASE_RTT_NS", "TARGET_DELAY_NS",
            "MAX_CWND", "ETA",    "FI",  "GAMMA",   "MAX_MD_JUMP", "QA"};
  for (const Json& r : replies) {
    for (const Json& q : r["qps"]) {
      t.rows.push_back({cell(r["pid"]), cell(r["device"]), cell(q["qpn"]), cell(q["profile"]),
                        cell(q["base_rtt"]), cell(q["target_delay"]), cell(q["max_cwnd"]),
                        fmt(q["eta"].get<double>(), 1), fmt(q["fi"].get<double>(), 0),
                        fmt(q["gamma"].get<double>(), 2), fmt(q["max_md_jump"].get<double>(), 2),
                        q["disable_qa"].get<int>() ? "off" : "on"});
    }
  }
  return t;
}

// ---- Prometheus ---------------------------------------------------------------------------

namespace {

std::string escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '"')
      o += "\\\"";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

using Labels = std::vector<std::pair<std::string, std::string>>;

/// Collects samples per family so each family prints as one block.
class Exposition {
 public:
  void add(const std::string& name, const char* type, const std::string& help, const Labels& l,
           double v) {
    auto& f = fam_[name];
    if (f.type.empty()) {
      f.type = type;
      f.help = help;
      order_.push_back(name);
    }
    std::string line = name;
    if (!l.empty()) {
      line += '{';
      for (size_t i = 0; i < l.size(); ++i)
        line += (i ? "," : "") + l[i].first + "=\"" + escape(l[i].second) + "\"";
      line += '}';
    }
    char b[64];
    if (v >= 0 && v < 1.8e19 && v == static_cast<double>(static_cast<uint64_t>(v)))
      std::snprintf(b, sizeof b, " %" PRIu64, static_cast<uint64_t>(v));
    else
      std::snprintf(b, sizeof b, " %.9g", v);
    f.lines.push_back(line + b);
  }
  std::string text() const {
    std::string o;
    for (const std::string& n : order_) {
      const Family& f = fam_.at(n);
      o += "# HELP " + n + " " + f.help + "\n# TYPE " + n + " " + f.type + "\n";
      for (const std::string& l : f.lines) o += l + "\n";
    }
    return o;
  }

 private:
  struct Family {
    std::string type, help;
    std::vector<std::string> lines;
  };
  std::map<std::string, Family> fam_;
  std::vector<std::string> order_;
};

}  // namespace

namespace {
// A CLOCK_MONOTONIC time of this machine (what segments hold) as Unix seconds.
double unix_seconds_of(int64_t mono_ns) {
  timespec m{}, r{};
  ::clock_gettime(CLOCK_MONOTONIC, &m);
  ::clock_gettime(CLOCK_REALTIME, &r);
  const int64_t now_mono = int64_t{m.tv_sec} * 1'000'000'000 + m.tv_nsec;
  const int64_t now_real = int64_t{r.tv_sec} * 1'000'000'000 + r.tv_nsec;
  return static_cast<double>(now_real - (now_mono - mono_ns)) / 1e9;
}
}  // namespace

std::string metrics_text(const std::vector<Snapshot>& snaps) {
  Exposition x;
  for (const Snapshot& s : snaps) {
    const observe::DeviceRecord& d = s.device;
    const Labels dev{{"pid", std::to_string(s.pid)}, {"device", d.name}};
    auto with = [&](Labels more) {
      Labels l = dev;
      l.insert(l.end(), more.begin(), more.end());
      return l;
    };
    x.add("mrc_device_info", "gauge", "A libmrc device (one UdpDriver) of a process.",
          with({{"netns", d.netns}, {"path_mode", mode_name(d.path_mode)}}), 1);
    x.add("mrc_stats_snapshots_total", "counter", "Snapshots the device has published.", dev,
          static_cast<double>(s.generation));
    for (uint32_t p = 0; p < d.planes; ++p)
      x.add("mrc_plane_admin_down", "gauge", "1 if the plane is drained by the controller.",
            with({{"plane", std::to_string(p)}, {"address", d.plane[p].address}}),
            d.plane[p].admin_down);
    for (uint32_t p = 0; p < d.planes; ++p)
      x.add("mrc_plane_link_down", "gauge", "1 if the plane port has no link.",
            with({{"plane", std::to_string(p)}, {"address", d.plane[p].address}}),
            d.plane[p].link_down);
    const observe::UdpCountersRecord& u = d.udp;
    const std::pair<const char*, uint64_t> udp[] = {
        {"datagrams_sent", u.datagrams_sent},
        {"sent_bytes", u.bytes_sent},
        {"datagrams_received", u.datagrams_received},
        {"received_bytes", u.bytes_received},
        {"sendmmsg_calls", u.sendmmsg_calls},
        {"gso_messages", u.gso_messages},
        {"gro_messages", u.gro_messages},
        {"recvmmsg_calls", u.recvmmsg_calls},
        {"send_eagain", u.send_eagain},
        {"send_enobufs", u.send_enobufs},
        {"send_errors", u.send_errors},
        {"recv_errors", u.recv_errors},
        {"recv_truncated", u.recv_truncated},
        {"no_route", u.no_route},
        {"loop_iterations", u.loop_iterations},
        {"timeouts", u.timeouts}};
    for (const auto& [n, v] : udp)
      x.add(std::string("mrc_udp_") + n + "_total", "counter",
            std::string("UDP driver counter ") + n + ".", dev, static_cast<double>(v));
    for (const auto& [n, v] : probe_counters(s))
      x.add(std::string("mrc_udp_") + n + "_total", "counter",
            std::string("UDP driver counter ") + n + ".", dev, static_cast<double>(v));
    for (const auto& [n, v] : addr_query_counters(s))
      x.add(std::string("mrc_udp_") + n + "_total", "counter",
            std::string("Peer address queries: ") + n + ".", dev, static_cast<double>(v));
    for (const auto& [n, v] : port_counters(s))
      x.add(std::string("mrc_udp_") + n + "_total", "counter",
            std::string("Plane ports: ") + n + ".", dev, static_cast<double>(v));
    for (const auto& [n, v] : wake_counters(s))
      x.add(std::string("mrc_udp_") + n + "_total", "counter",
            std::string("Progress loop: ") + n + ".", dev, static_cast<double>(v));
    x.add("mrc_udp_gso_disabled_planes", "gauge",
          "Planes whose device refused UDP GSO (they send single datagrams).", dev,
          static_cast<double>(u.gso_disabled));
    x.add("mrc_engine_rx_datagrams_total", "counter", "Datagrams given to the engine.", dev,
          static_cast<double>(d.rx_datagrams));
    x.add("mrc_engine_tx_datagrams_total", "counter", "Datagrams the engine produced.", dev,
          static_cast<double>(d.tx_datagrams));
    x.add("mrc_engine_rx_bytes_total", "counter", "Bytes given to the engine.", dev,
          static_cast<double>(d.rx_bytes));
    x.add("mrc_engine_tx_bytes_total", "counter", "Bytes the engine produced.", dev,
          static_cast<double>(d.tx_bytes));
    for (size_t r = 0; r < static_cast<size_t>(engine::Drop::kCount); ++r)
      x.add("mrc_engine_drops_total", "counter", "Received datagrams dropped, by reason.",
            with({{"reason", engine::to_string(static_cast<engine::Drop>(r))}}),
            static_cast<double>(d.drops[r]));

    for (const observe::QpRecord& q : s.qps) {
      const Labels ql = with({{"qpn", std::to_string(q.qpn)}});
      x.add("mrc_qp_info", "gauge", "A QP: its state and peer.",
            with({{"qpn", std::to_string(q.qpn)},
                  {"state", qp_state(q.state)},
                  {"peer", peer_name(s, q.peer)}}),
            1);
      const std::pair<const char*, uint64_t> qc[] = {{"tx_data_packets", q.tx_data_packets},
                                                     {"tx_retransmits", q.tx_retransmits},
                                                     {"tx_payload_bytes", q.tx_payload_bytes},
                                                     {"rx_data_packets", q.rx_data_packets},
                                                     {"rx_payload_bytes", q.rx_payload_bytes},
                                                     {"tx_acks", q.tx_acks},
                                                     {"rx_acks", q.rx_acks},
                                                     {"tx_nacks", q.tx_nacks},
                                                     {"rx_nacks", q.rx_nacks},
                                                     {"rto_fired", q.rto_fired},
                                                     {"fast_losses", q.fast_losses},
                                                     {"spurious_losses", q.spurious_losses},
                                                     {"tail_probes", q.tail_probes},
                                                     {"rnr_naks", q.rnr_naks},
                                                     {"rtt_samples", q.rtt_samples},
                                                     {"completions", q.completions},
                                                     {"error_completions", q.error_completions}};
      for (const auto& [n, v] : qc)
        x.add(std::string("mrc_qp_") + n + "_total", "counter",
              std::string("QP counter ") + n + ".", ql, static_cast<double>(v));
      x.add("mrc_qp_srtt_seconds", "gauge", "Smoothed RTT of the QP.", ql, q.srtt_ns / 1e9);
      x.add("mrc_qp_min_rtt_seconds", "gauge", "Lowest RTT the QP saw.", ql, q.min_rtt_ns / 1e9);
      if (q.has_cc) {
        x.add("mrc_qp_cc_cwnd_bytes", "gauge", "NSCC congestion window.", ql,
              static_cast<double>(q.cc_cwnd));
        x.add("mrc_qp_cc_decreases_total", "counter", "NSCC multiplicative decreases.", ql,
              static_cast<double>(q.cc_decreases));
        x.add("mrc_qp_cc_quick_adapts_total", "counter", "NSCC quick adapts.", ql,
              static_cast<double>(q.cc_quick_adapts));
      }
      for (uint32_t i = q.ev_first; i < q.ev_first + q.ev_count; ++i) {
        const observe::EvRecord& e = s.evs[i];
        const Labels el = with({{"qpn", std::to_string(q.qpn)},
                                {"ev", std::to_string(e.ev)},
                                {"plane", std::to_string(e.plane)},
                                {"spine", std::to_string(e.spine)}});
        // A state set: one series per state, 1 for the current one.
        for (uint8_t k = 0; k <= static_cast<uint8_t>(engine::EvState::kDenied); ++k) {
          Labels st = el;
          st.emplace_back("state", ev_state(k));
          x.add("mrc_path_state", "gauge",
                "1 for the EV's current state, 0 for the others (GOOD, ASSUMED_BAD, DENIED).", st,
                e.state == k ? 1 : 0);
        }
        if (e.since_ns > 0)
          x.add("mrc_path_state_change_timestamp_seconds", "gauge",
                "When the EV last changed state (Unix time).", el, unix_seconds_of(e.since_ns));
        const std::pair<const char*, uint64_t> pc[] = {
            {"tx_packets", e.tx_packets}, {"tx_bytes", e.tx_bytes},
            {"acked_packets", e.acked},   {"lost_packets", e.lost},
            {"trims", e.trims},           {"ecn_marks", e.ecn_marks},
            {"probes", e.probes},         {"probe_replies", e.probe_replies},
            {"state_changes", e.changes}};
        for (const auto& [n, v] : pc)
          x.add(std::string("mrc_path_") + n + "_total", "counter",
                std::string("Per-EV counter ") + n + ".", el, static_cast<double>(v));
        x.add("mrc_path_rtt_seconds", "gauge", "Last RTT sample on the EV.", el, e.rtt_ns / 1e9);
        x.add("mrc_path_rtt_p50_seconds", "gauge", "Median of the EV's recent RTT samples.", el,
              e.rtt_p50_ns / 1e9);
        x.add("mrc_path_rtt_p99_seconds", "gauge",
              "99th percentile of the EV's recent RTT samples.", el, e.rtt_p99_ns / 1e9);
      }
    }
  }
  return x.text();
}

}  // namespace mrc::mrcctl
