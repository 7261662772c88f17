// Tests of tools/mrc-sim/transport.h: which EVs each transport gives a QP.
#include "transport.h"

#include <gtest/gtest.h>

#include <set>

#include "mrc/io/sim/fabric.h"

namespace mrc::msim {
namespace {

using sim::Fabric;
const PathShape kShape{4, 8, 16, 4};

TEST(SendPaths, MrcSpraysEveryEvOfEveryPlaneFromAHashedStart) {
  const auto a = send_paths(Transport::kMrc, kShape, 1, 2, 0, 1);
  ASSERT_EQ(a.size(), 64u);
  std::set<uint32_t> evs;
  std::set<std::pair<uint16_t, uint32_t>> plane_spine;
  for (size_t i = 0; i < a.size(); ++i) {
    evs.insert(a[i].ev);
    EXPECT_EQ(Fabric::plane_of(a[i].ev), a[i].plane);
    plane_spine.insert({a[i].plane, Fabric::spine_of(a[i].ev)});
    if (i > 0) {  // planes alternate
      EXPECT_NE(a[i].plane, a[i - 1].plane);
    }
  }
  EXPECT_EQ(evs.size(), 64u);
  EXPECT_EQ(plane_spine.size(), 32u);  // every spine of every plane
  // Another QP starts elsewhere in the same set.
  bool differs = false;
  for (uint32_t qp = 1; qp < 8; ++qp)
    differs |= send_paths(Transport::kMrc, kShape, 1, 2, qp, 1)[0].ev != a[0].ev;
  EXPECT_TRUE(differs);
}

TEST(SendPaths, PlaneIsOneHashedSpinePerPlane) {
  const auto p = send_paths(Transport::kPlane, kShape, 3, 9, 0, 7);
  ASSERT_EQ(p.size(), 4u);
  for (uint16_t i = 0; i < 4; ++i) EXPECT_EQ(p[i].plane, i);
  EXPECT_EQ(p[0].ev, send_paths(Transport::kPlane, kShape, 3, 9, 0, 7)[0].ev);  // deterministic
  // Over many flows the hash uses every spine.
  std::set<uint32_t> spines;
  for (uint32_t d = 0; d < 64; ++d)
    spines.insert(Fabric::spine_of(send_paths(Transport::kPlane, kShape, 0, d, 0, 7)[0].ev));
  EXPECT_EQ(spines.size(), 8u);
}

TEST(SendPaths, EcmpIsOnePathAndHasNoBackups) {
  const auto e = send_paths(Transport::kEcmp, kShape, 5, 6, 2, 1);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(Fabric::plane_of(e[0].ev), e[0].plane);
  EXPECT_TRUE(backup_paths(Transport::kEcmp, kShape).empty());
  EXPECT_TRUE(backup_paths(Transport::kPlane, kShape).empty());
  const auto b = backup_paths(Transport::kMrc, kShape);
  ASSERT_EQ(b.size(), 16u);
  for (const auto& x : b) EXPECT_GE(Fabric::salt_of(x.ev), Fabric::kBackupSalt);
}

TEST(ParseTransport, NamesRoundTrip) {
  for (auto t : {Transport::kMrc, Transport::kMrcNoTrim, Transport::kPlane, Transport::kEcmp})
    EXPECT_EQ(parse_transport(to_string(t)), t);
  EXPECT_FALSE(parse_transport("roce"));
}

}  // namespace
}  // namespace mrc::msim
