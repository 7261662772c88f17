// Controller plane drain (Engine::set_plane_drained) on the simulated two-tier fabric:
// 2 hosts, 4 planes x 4 spines, a verified bulk WRITE. Draining a plane moves all data off
// it without loss, errors or EV state changes; undraining brings traffic back; a QP made
// while a plane is drained starts without it; a peer's word that its plane is down
// (PORT_STATUS_UPDATE) does the same for the QPs to that peer. Deterministic (virtual time,
// fixed seed).
#include <gtest/gtest.h>

#include <memory>

#include "testing/bulk.h"
#include "two_hosts.h"

namespace mrc {
namespace {

using namespace engine;
using namespace sim;
using namespace std::chrono_literals;

struct DrainRun : TwoHosts {
  DrainRun() : TwoHosts(7) {}
  uint32_t state_changes(Qpn qpn) {
    uint32_t n = 0;
    for (const auto& e : tb.engine(0).paths(qpn)->evs()) n += e.changes;
    return n;
  }
};

TEST(PlaneDrain, MovesTrafficOffAndBack) {
  DrainRun r;
  const auto qp = r.connect();
  BulkWrite bulk(r.tb, 0, 1, qp);
  bulk.run_until(Time{30ms});
  const uint64_t before = r.sent_on(qp.a, 2);
  EXPECT_GT(before, 100u) << "plane 2 carried nothing before the drain";

  ASSERT_TRUE(r.tb.engine(0).set_plane_drained(2, true).ok());
  ASSERT_TRUE(r.tb.engine(1).set_plane_drained(2, true).ok());
  EXPECT_EQ(r.tb.engine(0).drained_planes(), 1u << 2);
  const uint64_t done_at_drain = bulk.completed();
  bulk.run_until(Time{35ms});  // what was in flight on plane 2 is acknowledged
  const uint64_t drained = r.sent_on(qp.a, 2);
  const uint64_t other = r.sent_on(qp.a, 1);
  bulk.run_until(Time{80ms});
  EXPECT_EQ(r.sent_on(qp.a, 2), drained) << "data went out on a drained plane";
  EXPECT_GT(r.sent_on(qp.a, 1), other + 1000) << "the other planes stopped too";
  EXPECT_GT(bulk.completed(), done_at_drain + 10);

  ASSERT_TRUE(r.tb.engine(0).set_plane_drained(2, false).ok());
  ASSERT_TRUE(r.tb.engine(1).set_plane_drained(2, false).ok());
  EXPECT_EQ(r.tb.engine(0).drained_planes(), 0u);
  bulk.run_until(Time{120ms});
  EXPECT_GT(r.sent_on(qp.a, 2), drained + 1000) << "plane 2 did not come back";

  EXPECT_TRUE(bulk.ok()) << bulk.first_error();
  EXPECT_EQ(r.state_changes(qp.a), 0u) << "a drain must not look like a path failure";
  for (const auto& e : r.tb.engine(0).paths(qp.a)->evs()) EXPECT_EQ(e.state, EvState::kGood);
}

TEST(PlaneDrain, NewQpStartsDrained) {
  DrainRun r;
  ASSERT_TRUE(r.tb.engine(0).set_plane_drained(1, true).ok());
  ASSERT_TRUE(r.tb.engine(1).set_plane_drained(1, true).ok());
  const auto qp = r.connect();  // made after the drain
  EXPECT_TRUE(r.tb.engine(0).paths(qp.a)->plane_admin_down(1));
  BulkWrite bulk(r.tb, 0, 1, qp);
  bulk.run_until(Time{40ms});
  EXPECT_EQ(r.sent_on(qp.a, 1), 0u);
  EXPECT_GT(r.sent_on(qp.a, 0), 1000u);
  EXPECT_TRUE(bulk.ok()) << bulk.first_error();
}

// A peer's PORT_STATUS_UPDATE (Engine::set_peer_planes_down): host 1 says its plane 2 is down;
// host 0's QP to it moves its data off plane 2 without loss, errors or EV state changes, the
// hold is the peer's (another peer's QPs keep the plane), and "up" brings the traffic back.
TEST(PlaneDrain, PeerSaysPlaneDown_DataMovesOffAndBack) {
  DrainRun r;
  const auto qp = r.connect();
  BulkWrite bulk(r.tb, 0, 1, qp);
  bulk.run_until(Time{30ms});
  ASSERT_GT(r.sent_on(qp.a, 2), 100u) << "plane 2 carried nothing before the update";

  r.tb.engine(0).set_peer_planes_down(1, 1u << 2);
  EXPECT_EQ(r.tb.engine(0).peer_planes_down(1), 1u << 2);
  EXPECT_EQ(r.tb.engine(0).held_planes(1, Time{30ms}), 1u << 2);
  EXPECT_EQ(r.tb.engine(0).held_planes(7, Time{30ms}), 0u) << "another peer is not held";
  const uint64_t done_at_update = bulk.completed();
  bulk.run_until(Time{35ms});  // what was in flight on plane 2 is acknowledged
  const uint64_t held = r.sent_on(qp.a, 2);
  const uint64_t other = r.sent_on(qp.a, 1);
  bulk.run_until(Time{80ms});
  EXPECT_EQ(r.sent_on(qp.a, 2), held) << "data went out on a plane the peer said is down";
  EXPECT_GT(r.sent_on(qp.a, 1), other + 1000) << "the other planes stopped too";
  EXPECT_GT(bulk.completed(), done_at_update + 10);

  r.tb.engine(0).set_peer_planes_down(1, 0);  // the peer's plane 2 is up again
  EXPECT_EQ(r.tb.engine(0).held_planes(1, Time{80ms}), 0u);
  bulk.run_until(Time{120ms});
  EXPECT_GT(r.sent_on(qp.a, 2), held + 1000) << "plane 2 did not come back";

  EXPECT_TRUE(bulk.ok()) << bulk.first_error();
  EXPECT_EQ(r.state_changes(qp.a), 0u) << "an announced plane is not a path failure";
  for (const auto& e : r.tb.engine(0).paths(qp.a)->evs()) EXPECT_EQ(e.state, EvState::kGood);
}

TEST(PlaneDrain, RejectsPlaneOutOfRange) {
  Engine e;
  EXPECT_FALSE(e.set_plane_drained(16, true).ok());
  EXPECT_EQ(e.set_plane_drained(16, true).error(), Error::kInvalidArgument);
  EXPECT_EQ(e.drained_planes(), 0u);
  EXPECT_EQ(e.max_qpn(), 0u);
}

TEST(PathSetAdmin, DownPlaneNeverPickedAndSurvivesReset) {
  PathSet ps;
  const Path paths[] = {{0x000, 0}, {0x100, 0}, {0x10000, 1}, {0x10100, 1}};
  ps.reset(paths, {}, PathPolicy{});
  ps.set_plane_admin_down(1, true);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(ps.ev(ps.next(-1)).path.plane, 0);
  ps.reset(paths, {}, PathPolicy{});
  EXPECT_TRUE(ps.plane_admin_down(1));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ps.ev(ps.next(-1)).path.plane, 0);
  ps.set_plane_admin_down(1, false);
  int on1 = 0;
  for (int i = 0; i < 1000; ++i) on1 += ps.ev(ps.next(-1)).path.plane == 1;
  EXPECT_EQ(on1, 500);
}

TEST(PathSetAdmin, ChangesAndReasonRecorded) {
  PathSet ps;
  const Path paths[] = {{0x000, 0}, {0x100, 0}};
  ps.reset(paths, {}, PathPolicy{});
  std::vector<EvEvent> out;
  EXPECT_EQ(ps.ev(0).changes, 0u);
  ASSERT_TRUE(ps.deny(0x000, true, Time{5}, out));
  EXPECT_EQ(ps.ev(0).changes, 1u);
  EXPECT_EQ(ps.ev(0).reason, EvReason::kDenied);
  EXPECT_EQ(ps.ev(0).since, Time{5});
  ASSERT_TRUE(ps.deny(0x000, false, Time{9}, out));
  EXPECT_EQ(ps.ev(0).changes, 2u);
  EXPECT_EQ(ps.ev(0).reason, EvReason::kAllowed);
}

}  // namespace
}  // namespace mrc
