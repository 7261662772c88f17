// Controller plane drain (Engine::set_plane_drained) on the simulated two-tier fabric:
// 2 hosts, 4 planes x 4 spines, a verified bulk WRITE. Draining a plane moves all data off
// it without loss, errors or EV state changes; undraining brings traffic back; a QP made
// while a plane is drained starts without it; a peer's word that its plane is down
// (PORT_STATUS_UPDATE) does the same for the QPs to that peer. Deterministic (virtual time,
// fixed seed).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "mrc/testing/bulk.h"
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

  r.tb.engine(0).set_peer_planes_down(r.tb.net().now(), 1, 1u << 2);
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

  r.tb.engine(0).set_peer_planes_down(r.tb.net().now(), 1, 0);  // the peer's plane 2 is up again
  EXPECT_EQ(r.tb.engine(0).held_planes(1, Time{80ms}), 0u);
  bulk.run_until(Time{120ms});
  EXPECT_GT(r.sent_on(qp.a, 2), held + 1000) << "plane 2 did not come back";

  EXPECT_TRUE(bulk.ok()) << bulk.first_error();
  EXPECT_EQ(r.state_changes(qp.a), 0u) << "an announced plane is not a path failure";
  for (const auto& e : r.tb.engine(0).paths(qp.a)->evs()) EXPECT_EQ(e.state, EvState::kGood);
}

// A peer's PORT_STATUS_UPDATE for a plane that already ate packets: host 1's plane-2 T0 is down
// (the fabric drops what goes there; nothing reports the port), host 0 has sprayed a 64 KiB
// WRITE over the 4 planes, and before any ACK the update says plane 2 is down. What went on
// plane 2 is resent at once on the others, with no blame: no RACK loss, no tail probe, no RTO,
// no EV state change (before, they waited a reorder window for RACK to call them lost).
TEST(PlaneDrain, PeerSaysPlaneDown_WhatIsInFlightThereIsResentAtOnce) {
  DrainRun r;
  r.fab->t0_down(2, 1);
  const auto qp = r.connect();
  BulkWrite w(r.tb, 0, 1, qp, BulkWrite::Config{64 << 10, 1, 1});
  w.pump();
  w.stop_posting();
  w.run_until(r.tb.net().now() + 1us, 1us);  // sprayed, nothing acknowledged yet
  const uint64_t on2 = r.sent_on(qp.a, 2);
  ASSERT_GT(on2, 0u) << "nothing was sprayed on plane 2";
  ASSERT_EQ(r.tb.engine(0).qp_stats(qp.a)->tx_retransmits, 0u);

  r.tb.engine(0).set_peer_planes_down(r.tb.net().now(), 1, 1u << 2);
  w.run_until(r.tb.net().now() + 2ms, 10us);
  ASSERT_EQ(w.verified(), 1u) << w.first_error();
  EXPECT_TRUE(w.ok()) << w.first_error();
  const QpStats* s = r.tb.engine(0).qp_stats(qp.a);
  EXPECT_EQ(s->tx_retransmits, on2) << "each packet on plane 2 resent once";
  EXPECT_EQ(r.sent_on(qp.a, 2), on2) << "resent on the plane the peer said is down";
  EXPECT_EQ(s->fast_losses, 0u) << "loss detection found what the update said";
  EXPECT_EQ(s->tail_probes, 0u);
  EXPECT_EQ(s->rto_fired, 0u);
  EXPECT_EQ(r.state_changes(qp.a), 0u) << "an announced plane is not a path failure";
}

// A port with no link (its T0 is down): host 1's plane-2 port, which its driver reports
// (Engine::set_port_up). Host 0 learns it from host 1's first ACK (AckHeader::ports_down):
// what it had sprayed on plane 2 is resent at once, not found by loss detection (no RACK
// loss, no RTO, no EV blamed), and nothing more goes there; host 1 sends nothing on its dead
// port. With the link back, host 1's next ACK brings plane 2 back at host 0.
TEST(PlaneDrain, PortWithNoLink_PeerLearnsItFromAcksAndResendsAtOnce) {
  DrainRun r;
  r.tb.report_ports(*r.fab);
  r.fab->t0_down(2, 1);
  EXPECT_EQ(r.tb.engine(1).ports_down(), 1u << 2);
  EXPECT_EQ(r.tb.engine(0).ports_down(), 0u);
  const auto qp = r.connect();
  const auto write = [&r](const Testbed::QpPair& pair, PeerId src, PeerId dst) {
    BulkWrite w(r.tb, src, dst, pair, BulkWrite::Config{64 << 10, 1, 1});
    w.pump();
    w.stop_posting();
    w.run_until(r.tb.net().now() + 2ms, 10us);
    ASSERT_EQ(w.verified(), 1u) << w.first_error();
    ASSERT_TRUE(w.ok());
  };
  write(qp, 0, 1);  // 16 packets, 4 on each plane, all sent before the first ACK
  const QpStats* s = r.tb.engine(0).qp_stats(qp.a);
  const uint64_t on2 = r.sent_on(qp.a, 2);
  EXPECT_GT(on2, 0u) << "nothing was sent on plane 2 before the first ACK";
  EXPECT_EQ(r.tb.engine(0).peer_ports_down(1), 1u << 2);
  EXPECT_EQ(r.tb.engine(0).held_planes(1, r.tb.net().now()), 1u << 2);
  EXPECT_EQ(s->tx_retransmits, on2) << "each packet sent on plane 2 resent once";
  EXPECT_EQ(s->fast_losses, 0u) << "loss detection found what the ACK said";
  EXPECT_EQ(s->rto_fired, 0u);
  EXPECT_EQ(r.tb.engine(0).stats().plane_holds, 0u);
  EXPECT_EQ(r.state_changes(qp.a), 0u) << "a peer's dead port is no fault of an EV";

  for (int i = 0; i < 4; ++i) write(qp, 0, 1);
  EXPECT_EQ(r.sent_on(qp.a, 2), on2) << "data went to a port that said it has no link";
  EXPECT_EQ(s->tx_retransmits, on2);
  // Host 1 sending: nothing on its own dead port, nothing lost.
  write(Testbed::QpPair{qp.b, qp.a}, 1, 0);
  const QpStats* back = r.tb.engine(1).qp_stats(qp.b);
  const PathSet* paths1 = r.tb.engine(1).paths(qp.b);
  const auto st1 = r.tb.engine(1).path_stats(qp.b);
  uint64_t host1_on2 = 0;
  for (size_t i = 0; i < paths1->size(); ++i)
    if (paths1->ev(i).path.plane == 2) host1_on2 += st1[i].tx_packets;
  EXPECT_EQ(host1_on2, 0u);
  EXPECT_GT(back->tx_data_packets, 0u);
  EXPECT_EQ(back->tx_retransmits, 0u);

  r.fab->t0_up(2, 1);
  EXPECT_EQ(r.tb.engine(1).ports_down(), 0u);
  write(qp, 0, 1);  // its ACKs say the port is back
  EXPECT_EQ(r.tb.engine(0).peer_ports_down(1), 0u);
  write(qp, 0, 1);
  EXPECT_GT(r.sent_on(qp.a, 2), on2) << "plane 2 did not come back";
}

// The word of a dead port reaches every QP to the peer, not only the one it came on. Host 1's
// plane-0 port has no link. Host 0's QP 1 sends one packet on plane 0 before it knows: it can
// get no ACK, and with no RTT sample it has no tail probe, so only its RTO (16.8 ms) would find
// the packet. Then data from host 1 on another QP says port 0 is down: QP 1 resends at once,
// with no blame. (In mrc-sim's 256-host all-to-all with a T0's plane 0 out, 2 such QPs each
// waited a 1 ms RTO: their 6 packets on live planes were all trimmed, and NACKs carry no
// ports_down; perf/RESULTS.md 2026-11-27 (t0rto).)
TEST(PlaneDrain, PortWithNoLink_WordOnAnotherQpResendsWhatThisQpHasThere) {
  DrainRun r;
  r.tb.report_ports(*r.fab);
  r.fab->t0_down(0, 1);
  const auto qp1 = r.connect();
  BulkWrite w1(r.tb, 0, 1, qp1, BulkWrite::Config{4096, 1, 1});  // one MTU: one packet
  w1.pump();
  w1.stop_posting();
  w1.run_until(r.tb.net().now() + 2us, 1us);
  ASSERT_EQ(r.sent_on(qp1.a, 0), 1u) << "the packet did not go to the dead port";
  EXPECT_EQ(r.tb.engine(0).peer_ports_down(1), 0u) << "host 0 knew before it sent";

  QpAttr at;
  at.timeout = 14;
  at.retry_cnt_exp = 7;
  const auto qp2 = r.tb.connect(1, 0, r.fab->paths(1, 0, 4), at);
  BulkWrite w2(r.tb, 1, 0, qp2, BulkWrite::Config{16 << 10, 1, 1});
  w2.pump();
  w2.stop_posting();
  w1.run_until(r.tb.net().now() + 1ms, 10us);
  w2.pump();
  EXPECT_EQ(r.tb.engine(0).peer_ports_down(1), 1u) << "host 1's data did not say it";
  EXPECT_EQ(w2.verified(), 1u) << w2.first_error();
  ASSERT_EQ(w1.verified(), 1u) << "QP 1's packet still waits for its RTO";
  EXPECT_TRUE(w1.ok()) << w1.first_error();
  const QpStats* s = r.tb.engine(0).qp_stats(qp1.a);
  EXPECT_EQ(s->rto_fired, 0u);
  EXPECT_EQ(s->tail_probes, 0u);
  EXPECT_EQ(s->fast_losses, 0u);
  EXPECT_EQ(s->tx_retransmits, 1u);
  EXPECT_EQ(r.sent_on(qp1.a, 0), 1u) << "resent on the dead port";
  EXPECT_EQ(r.state_changes(qp1.a), 0u) << "a peer's dead port is no fault of an EV";
}

// Host 0's plane-0 port has no link; it opens one fresh QP per 32 KiB message (8 packets), as
// mrc-sim's QPs on demand do, each given the fabric's paths rotated to start on a different EV.
// The 3 planes left each carry a third of the packets: the QPs start their round robin on
// different planes. (Every QP starting on plane 1 sent 3:3:2 and left plane 3 idle a third
// of the time: the hosts under a dead T0 sent at 0.89 of their ports.)
TEST(PlaneDrain, PortWithNoLink_FreshQpsSpreadShortMessagesOverTheOtherPlanes) {
  DrainRun r;
  r.tb.report_ports(*r.fab);
  r.fab->t0_down(0, 0);
  ASSERT_EQ(r.tb.engine(0).ports_down(), 1u);
  const auto paths = r.fab->paths(0, 1, 4);
  uint64_t on[4] = {};
  const int qps = 24;
  for (int q = 0; q < qps; ++q) {
    std::vector<Path> v = paths;
    std::rotate(v.begin(), v.begin() + q % static_cast<int>(v.size()), v.end());
    QpAttr at;
    at.timeout = 14;
    at.retry_cnt_exp = 7;
    const Testbed::QpPair pair = r.tb.connect(0, 1, v, at);
    BulkWrite w(r.tb, 0, 1, pair, BulkWrite::Config{32 << 10, 1, 1});
    w.pump();
    w.stop_posting();
    w.run_until(r.tb.net().now() + 2ms, 10us);
    ASSERT_EQ(w.verified(), 1u) << w.first_error();
    ASSERT_TRUE(w.ok());
    for (uint16_t p = 0; p < 4; ++p) on[p] += r.sent_on(pair.a, p);
  }
  EXPECT_EQ(on[0], 0u) << "data went out of a port with no link";
  const uint64_t total = on[1] + on[2] + on[3];
  EXPECT_GE(total, uint64_t{qps} * 8);
  for (uint16_t p = 1; p < 4; ++p) {
    EXPECT_GE(on[p] * 100, total * 30) << "plane " << p << ": " << on[p] << " of " << total;
    EXPECT_LE(on[p] * 100, total * 37) << "plane " << p << ": " << on[p] << " of " << total;
  }
}

TEST(PlaneDrain, SetPortUp_RejectsPlaneOutOfRange) {
  Engine e;
  EXPECT_EQ(e.set_port_up(Time{0}, kMaxPlanes, false).error(), Error::kInvalidArgument);
  EXPECT_EQ(e.ports_down(), 0u);
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
