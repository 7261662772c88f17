#include "transport.h"

#include <algorithm>

#include "mrc/io/sim/fabric.h"

namespace mrc::msim {

std::optional<Transport> parse_transport(std::string_view name) {
  for (size_t i = 0; i < std::size(kTransportNames); ++i)
    if (name == kTransportNames[i]) return static_cast<Transport>(i);
  return std::nullopt;
}

const char* to_string(Transport t) { return kTransportNames[static_cast<size_t>(t)]; }

uint64_t flow_hash(uint64_t seed, uint32_t src, uint32_t dst, uint32_t qp, uint32_t salt) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t{src} << 32 | dst) ^
               (uint64_t{qp} << 40 | salt) * 0xC2B2AE3D27D4EB4Full;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<engine::Path> send_paths(Transport t, const PathShape& s, uint32_t src, uint32_t dst,
                                     uint32_t qp, uint64_t seed) {
  using sim::Fabric;
  std::vector<engine::Path> v;
  switch (t) {
    case Transport::kMrc:
    case Transport::kMrcNoTrim: {
      // As Fabric::paths: the i-th EV of every plane on spine i % S, planes alternating;
      // then rotated by a hash of the QP, so QPs start their round robin on different spines
      // (else every new QP's first packets all take spine 0).
      for (uint32_t i = 0; i < s.evs_per_plane; ++i)
        for (uint16_t p = 0; p < s.planes; ++p)
          v.push_back(engine::Path{Fabric::ev(p, i % s.spines, i / s.spines), p});
      const uint64_t shift = flow_hash(seed, src, dst, qp, 0xfffe) % v.size();
      std::rotate(v.begin(), v.begin() + static_cast<ptrdiff_t>(shift), v.end());
      break;
    }
    case Transport::kPlane:
      for (uint16_t p = 0; p < s.planes; ++p) {
        const auto spine = static_cast<uint32_t>(flow_hash(seed, src, dst, qp, p) % s.spines);
        v.push_back(engine::Path{Fabric::ev(p, spine, qp % 128), p});
      }
      break;
    case Transport::kEcmp: {
      const uint64_t h = flow_hash(seed, src, dst, qp, 0xffff);
      const auto p = static_cast<uint16_t>(h % s.planes);
      const auto spine = static_cast<uint32_t>((h / s.planes) % s.spines);
      v.push_back(engine::Path{Fabric::ev(p, spine, qp % 128), p});
      break;
    }
  }
  return v;
}

std::vector<engine::Path> backup_paths(Transport t, const PathShape& s) {
  std::vector<engine::Path> v;
  if (t != Transport::kMrc && t != Transport::kMrcNoTrim) return v;
  for (uint32_t i = 0; i < s.backups_per_plane; ++i)
    for (uint16_t p = 0; p < s.planes; ++p)
      v.push_back(engine::Path{
          sim::Fabric::ev(p, i % s.spines, sim::Fabric::kBackupSalt + i / s.spines), p});
  return v;
}

}  // namespace mrc::msim
