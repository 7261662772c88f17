// Multicast member records (mcast.cc, docs/verbs-shim.md "Multicast"): the file one member
// process of a group writes into the group's directory, read by every sender of the group on
// this machine or, with the directory on a filesystem several machines mount, on another one.
// Pure functions: no I/O, the time an argument. Threading: none (values only).
//
// A record is text, one "key value" per line, so an operator can read it with cat:
//
//   mrc-mcast-member 2
//   host 5b0c1f0e-8f0a-4c47-9d1e-2a7c5d6e9f10.4026531836   (mcast_host_id)
//   node n017                                              (the writer's hostname: for people)
//   pid 4242
//   expires 1795000000000     (unix time in ms, the writer's clock: the lease's end)
//   gid fcbb:bbbb:100:0:24d:5243:0:7
//   plane [2001:db8:1::17]:4791                            (one line per plane, in plane order)
//   plane [2001:db8:2::17]:4791
//
// Unknown keys are ignored (a later version may add some); the first line names the version.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mrc/common/result.h"

namespace mrc::verbs {

/// How long a member record stays valid without a refresh, and how often its writer refreshes
/// it. A member on another machine is judged by its lease alone (its pid means nothing here):
/// one that dies without leaving still receives the group's datagrams (dropped on arrival)
/// for at most kMcastLease. Writer and reader clocks may differ by up to
/// kMcastLease - kMcastRefresh (20 s) before a live member is taken for a stale one.
inline constexpr std::chrono::milliseconds kMcastLease{30'000};
inline constexpr std::chrono::milliseconds kMcastRefresh{10'000};

/// One member process of a group, as its record says.
struct McastRecord {
  std::string host;        // the writer's host identity (mcast_host_id): where its pid is valid
  std::string node;        // the writer's hostname, for people reading the directory; may be ""
  int64_t pid = 0;         // the writer's process id, in the writer's pid namespace
  int64_t expires_ms = 0;  // unix time in ms (writer's clock) after which it is stale
  ibv_gid gid{};           // the writer's device GID (in a fabric it names the fabric host)
  std::vector<sockaddr_in6> planes;  // each plane's socket address, in plane order
};

/// The record as text (the format above).
std::string encode_mcast_record(const McastRecord& r);

/// The record in `text`, or what is wrong with it (not a record, another version, a key
/// missing or malformed). Never throws.
Result<McastRecord, std::string> parse_mcast_record(std::string_view text);

/// The record's file name in the group's directory: "<host>.<pid>.<plane 0 port>" (one
/// driver per process and device), unique across the machines sharing the directory.
std::string mcast_record_name(const McastRecord& r);

/// Whether a host identity can go into a record and its file name: 1..128 characters of
/// [A-Za-z0-9._-].
bool valid_mcast_host_id(std::string_view host);

/// Whether a sender at `self_host` takes the member `r` at time `now_ms` (unix ms): while its
/// lease runs (now_ms < expires_ms), and for a record of this host (same identity: same boot,
/// same pid namespace), where its pid means something, only while that process lives
/// (`alive(pid)`: a member killed without leaving is dropped at once). Another host's record
/// is judged by its lease alone.
enum class McastLiveness { kLive, kStale };
McastLiveness mcast_record_liveness(const McastRecord& r, std::string_view self_host,
                                    int64_t now_ms, bool (*alive)(int64_t pid));

}  // namespace mrc::verbs
