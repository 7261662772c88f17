// What mrcctl shows: live-statistics snapshots (observe/segment.h) turned into JSON documents,
// text tables and the Prometheus text exposition. Threading: pure functions of their inputs.
//
// JSON is the source of truth: every table is rendered from the same JSON the --json flag
// prints (docs/mrcctl.md describes each document's fields).
//
// Prometheus (text exposition format 0.0.4): every family has # HELP and # TYPE lines and
// its samples right after them; names start with mrc_, counters end in _total, times are
// in seconds, sizes in bytes; labels: pid, device, plane, qpn, ev, spine, and state /
// reason / quantile where a family needs one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mrc/observe/segment.h"

namespace mrc::mrcctl {

using Json = nlohmann::json;
using observe::Snapshot;

/// Which rows a command shows; empty / 0 fields match everything.
struct Filter {
  uint32_t pid = 0;
  std::string device;  // "mrc0"
  uint32_t qpn = 0;
  std::string peer;  // peer name as the device knows it ("h1", an address)
};

/// The device's name for peer id `id` ("?" if unknown).
std::string peer_name(const Snapshot& s, uint32_t id);
/// True when some selected device knows a peer called `name`.
bool has_peer(const std::vector<Snapshot>& snaps, const std::string& name);

/// "p1.s2" for EV 0x10200 (".k3" added when the salt is not 0).
std::string ev_text(uint32_t ev);
/// Parses an EV: a number (decimal or 0x hex) or "p<plane>.s<spine>[.k<k>]". False if neither.
bool parse_ev(const std::string& text, uint32_t* ev);

Json devices_json(const std::vector<Snapshot>& snaps, const Filter& f, int64_t now_ns);
Json ports_json(const std::vector<Snapshot>& snaps, const Filter& f);
Json qps_json(const std::vector<Snapshot>& snaps, const Filter& f);
Json paths_json(const std::vector<Snapshot>& snaps, const Filter& f);
Json event_json(const Snapshot& s, const observe::EventRecord& e, uint64_t seq);
/// Events of every selected device with sequence number >= from[pid.device] (all if absent),
/// oldest first; `from` is advanced past what is returned.
Json events_json(const std::vector<Snapshot>& snaps, const Filter& f,
                 std::vector<std::pair<std::string, uint64_t>>* from);

/// A table: headers and rows of cells; render() pads columns with two spaces between.
struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};
/// `min_widths` (per column) keeps columns aligned across separately rendered tables
/// (events --follow prints each batch under the first batch's header).
std::string render(const Table& t, const std::vector<size_t>& min_widths = {});
/// Column widths events --follow uses.
inline const std::vector<size_t> kEventWidths = {15, 7, 7, 5, 8, 5, 5, 11, 11, 0};
Table devices_table(const Json& j);
Table ports_table(const Json& j);
Table qps_table(const Json& j);
Table paths_table(const Json& j);
Table events_table(const Json& j);
Table probe_table(const Json& replies);
Table cc_table(const Json& replies);

/// The Prometheus text exposition of every counter of `snaps`.
std::string metrics_text(const std::vector<Snapshot>& snaps);

}  // namespace mrc::mrcctl
