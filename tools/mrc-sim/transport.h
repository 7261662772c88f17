// How a connection of mrc-sim uses the fabric's paths: the transports compared in one run.
// All of them are the same engine and wire; only the EVs a QP sprays on differ.
// Threading: free functions.
//
//   mrc         every EV of every plane: `evs_per_plane` EVs on each plane spread over the
//               spines, plus `backups_per_plane` backups (today's MRC behaviour); each QP
//               starts its round robin at a hashed place in that list
//   mrc-notrim  mrc on a fabric that does not trim (switches tail-drop), and an engine
//               told so: what trimming is worth
//   plane       one EV per plane, its spine a hash of (source, destination, QP, plane) as a
//               switch's ECMP would pick it: a RoCE QP per rail, an MPTCP subflow per plane
//   ecmp        one EV for the whole connection, plane and spine hashed: a single-path
//               connection (one port's worth of a multi-plane NIC)
// A hashed path is per direction (a switch hashes each direction's 5-tuple): the two ends
// of a QP pair get their own. With several QPs per connection (--qps-per-conn, as
// NCCL_IB_QPS_PER_CONNECTION) every QP hashes on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "mrc/engine/types.h"

namespace mrc::msim {

enum class Transport : uint8_t { kMrc, kMrcNoTrim, kPlane, kEcmp };
inline constexpr const char* kTransportNames[] = {"mrc", "mrc-notrim", "plane", "ecmp"};
std::optional<Transport> parse_transport(std::string_view name);
const char* to_string(Transport t);

struct PathShape {
  uint16_t planes = 4;
  uint32_t spines = 4;
  uint32_t evs_per_plane = 16;     // mrc
  uint32_t backups_per_plane = 4;  // mrc
};

/// The EVs host `src` sends on to `dst` on QP number `qp` of their connection (fabric.h's
/// EV encoding: plane << 16 | spine << 8 | k).
std::vector<engine::Path> send_paths(Transport t, const PathShape& s, uint32_t src, uint32_t dst,
                                     uint32_t qp, uint64_t seed);
/// Backup EVs (mrc only; empty for the hashed transports, which have nowhere else to go).
std::vector<engine::Path> backup_paths(Transport t, const PathShape& s);

/// The hash a switch would apply to the flow (deterministic for a seed).
uint64_t flow_hash(uint64_t seed, uint32_t src, uint32_t dst, uint32_t qp, uint32_t salt);

}  // namespace mrc::msim
