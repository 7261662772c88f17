// PathSet: spraying over planes and EVs, loss -> ASSUMED_BAD, backups, probes,
// plane drain and restore, deny/allow, events, resends leaving lossy planes, held planes.
// SharedHealth: per-peer and local plane holds, EV holds, their backoff and end.
#include "mrc/engine/paths.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace mrc::engine {
namespace {

using namespace std::chrono_literals;

/// 4 planes x 4 active EVs (ev = plane * 100 + k) and 2 backups per plane.
PathSet make(PathPolicy pol = {}) {
  std::vector<Path> active, backup;
  for (uint16_t p = 0; p < 4; ++p) {
    for (uint32_t k = 0; k < 4; ++k) active.push_back(Path{p * 100u + k, p});
    for (uint32_t k = 4; k < 6; ++k) backup.push_back(Path{p * 100u + k, p});
  }
  PathSet s;
  s.reset(active, backup, pol);
  return s;
}

std::map<uint32_t, int> spray(PathSet& s, int n) {
  std::map<uint32_t, int> count;
  for (int i = 0; i < n; ++i) ++count[s.ev(s.next(-1)).path.ev];
  return count;
}

TEST(PathSet, Next_SpraysEvenlyOverActiveEvsOfEveryPlane) {
  PathSet s = make();
  auto c = spray(s, 1600);
  ASSERT_EQ(c.size(), 16u);  // backups carry nothing while actives are good
  for (auto& [ev, n] : c) EXPECT_EQ(n, 100) << ev;
}

TEST(PathSet, Next_PlaneHoldingMoreThanItsShareInFlightLendsItsTurn) {
  PathSet s = make();
  // Plane 0 keeps what it is given (a slow port); the others deliver at once.
  std::map<uint16_t, int> per_plane;
  for (int i = 0; i < 400; ++i) {
    const uint16_t plane = s.ev(s.next(-1)).path.plane;
    ++per_plane[plane];
    s.on_sent(plane);
    if (plane != 0) s.on_left(plane);
  }
  // Plane 0 holds at most (9/8 x a quarter of what is in flight) + 1: 1 here, and the
  // others take every turn it passes.
  EXPECT_EQ(s.inflight(0), static_cast<uint32_t>(per_plane[0]));
  EXPECT_LE(per_plane[0], 2);
  EXPECT_GE(per_plane[1] + per_plane[2] + per_plane[3], 398);
  // Plane 0 delivers: it takes turns again.
  for (int i = 0; i < per_plane[0]; ++i) s.on_left(0);
  auto c = spray(s, 16);
  int on0 = 0;
  for (auto& [ev, n] : c) on0 += ev < 100 ? n : 0;
  EXPECT_GE(on0, 1);
}

TEST(PathSet, Next_EvenInFlightKeepsTheRoundRobinsOrder) {
  PathSet a = make(), b = make();
  for (int i = 0; i < 400; ++i) {
    const uint16_t ia = a.next(-1), ib = b.next(-1);
    ASSERT_EQ(ia, ib) << i;
    // a counts its packets and every plane delivers two sends later; b counts nothing.
    a.on_sent(a.ev(ia).path.plane);
    if (i >= 2) a.on_left(a.ev(ia).path.plane);
  }
  a.clear_inflight();
  EXPECT_EQ(a.inflight(0) + a.inflight(1) + a.inflight(2) + a.inflight(3), 0u);
}

TEST(PathSet, Next_HeldEvPassedOverWhileItsPlaneHasAnother) {
  PathSet s = make();
  const int held = s.find(101);
  s.set_ev_held(static_cast<uint16_t>(held), true);
  EXPECT_EQ(s.evs_held(), 1u);
  auto c = spray(s, 1600);
  EXPECT_EQ(c[101], 0);
  for (uint32_t ev : {100u, 102u, 103u}) EXPECT_NEAR(c[ev], 400 / 3, 1) << ev;
  // Every EV of plane 1 held: the plane still carries its share (holding a plane is the
  // plane view's decision, not the EVs').
  for (uint32_t ev : {100u, 102u, 103u}) s.set_ev_held(static_cast<uint16_t>(s.find(ev)), true);
  c = spray(s, 1600);
  EXPECT_EQ(c[100] + c[101] + c[102] + c[103], 400);
  for (uint32_t ev : {100u, 101u, 102u, 103u})
    s.set_ev_held(static_cast<uint16_t>(s.find(ev)), false);
  EXPECT_EQ(s.evs_held(), 0u);
  c = spray(s, 1600);
  EXPECT_EQ(c[101], 100);
}

TEST(PathSet, Next_AvoidPicksAnotherEv) {
  PathSet s = make();
  for (int i = 0; i < 100; ++i) {
    const uint16_t a = s.next(-1);
    EXPECT_NE(s.next(a), a);
  }
}

TEST(PathSet, OnLost_TwoInARowMakeAssumedBadAndBackupReplacesIt) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  const int i = s.find(101);
  s.on_lost(i, false, Time{10}, ev);
  EXPECT_EQ(s.ev(i).state, EvState::kGood);
  s.on_acked(i);  // an ack in between resets the run
  s.on_lost(i, false, Time{11}, ev);
  EXPECT_EQ(s.ev(i).state, EvState::kGood);
  s.on_lost(i, false, Time{12}, ev);
  EXPECT_EQ(s.ev(i).state, EvState::kAssumedBad);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].ev, 101u);
  EXPECT_EQ(ev[0].plane, 1);
  EXPECT_EQ(ev[0].from, EvState::kGood);
  EXPECT_EQ(ev[0].to, EvState::kAssumedBad);
  EXPECT_EQ(ev[0].reason, EvReason::kLoss);
  auto c = spray(s, 1600);
  EXPECT_EQ(c.count(101), 0u);
  EXPECT_EQ(c[104], 100);  // the plane's first backup took its place
  EXPECT_EQ(c[100], 100);
}

TEST(PathSet, OnLost_TimeoutIsEnoughAlone) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  s.on_lost(s.find(2), true, Time{5}, ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].reason, EvReason::kTimeout);
}

TEST(PathSet, OnCongestion_SkipsOnceOnly) {
  PathSet s = make();
  const int i = s.find(0);
  s.on_congestion(i);
  auto c = spray(s, 4);       // one pick per plane
  EXPECT_EQ(c.count(0), 0u);  // passed over...
  EXPECT_EQ(c[1], 1);
  c = spray(s, 12);
  EXPECT_EQ(c[0], 1);  // ...once
  EXPECT_EQ(s.ev(i).state, EvState::kGood);
}

TEST(PathSet, Probes_CleanRepliesBringItBack) {
  PathPolicy pol;
  pol.probes_to_good = 3;
  pol.probe_interval = 100us;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> pr;
  const int i = s.find(202);
  s.on_lost(i, true, Time{0}, ev);
  EXPECT_EQ(s.next_probe_time(), Time{100us});
  Time now{100us};
  for (int k = 0; k < 3; ++k) {
    pr.clear();
    s.poll_probes(now, pr, ev);
    ASSERT_EQ(pr.size(), 1u);
    EXPECT_EQ(pr[0].index, i);
    EXPECT_EQ(s.ev(i).state, EvState::kAssumedBad);
    s.on_probe_reply(pr[0].index, pr[0].seq, false, now + 10us, ev);
    now += 100us;
  }
  EXPECT_EQ(s.ev(i).state, EvState::kGood);
  EXPECT_EQ(ev.back().reason, EvReason::kProbeClean);
  EXPECT_EQ(s.next_probe_time(), kNever);
  // It comes back as a backup: its replacement stays active.
  EXPECT_FALSE(s.ev(i).active);
}

// An EV whose round trip (400 us) is above probe_interval (100 us): the outstanding probe is
// not counted lost when the next would be due, only once older than 2 x RTT; answered each
// round trip, 3 replies bring it back (it never could when every probe counted lost at 100 us).
TEST(PathSet, Probes_RoundTripAboveIntervalStillComesBack) {
  PathPolicy pol;
  pol.probes_to_good = 3;
  pol.probe_interval = 100us;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> pr;
  const int i = s.find(202);
  s.on_rtt(static_cast<uint16_t>(i), 400us);
  s.on_lost(i, true, Time{0}, ev);
  Time now{100us};
  for (int k = 0; k < 3; ++k) {
    pr.clear();
    s.poll_probes(now, pr, ev);
    ASSERT_EQ(pr.size(), 1u) << k;
    EXPECT_EQ(s.next_probe_time(), now + 100us);
    pr.clear();
    s.poll_probes(now + 100us, pr, ev);  // unanswered, younger than 2 x RTT: no new probe
    EXPECT_TRUE(pr.empty()) << k;
    EXPECT_EQ(s.next_probe_time(), now + 800us);
    EXPECT_EQ(s.ev(i).clean, k);
    now += 400us;
    s.on_probe_reply(static_cast<uint16_t>(i), s.ev(i).probe_seq, false, now, ev);
    EXPECT_EQ(s.next_probe_time(), k < 2 ? now + 100us : kNever);
    now += 100us;
  }
  EXPECT_EQ(s.ev(i).state, EvState::kGood);
  EXPECT_EQ(ev.back().reason, EvReason::kProbeClean);
}

// Past 2 x RTT the probe is lost as before: the clean count restarts and the gap doubles.
TEST(PathSet, Probes_UnansweredPastTwiceTheRoundTripCountsLost) {
  PathPolicy pol;
  pol.probe_interval = 100us;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> pr;
  const int i = s.find(202);
  s.on_rtt(static_cast<uint16_t>(i), 150us);
  s.on_lost(i, true, Time{0}, ev);
  s.poll_probes(Time{100us}, pr, ev);
  ASSERT_EQ(pr.size(), 1u);
  s.poll_probes(Time{200us}, pr, ev);
  EXPECT_EQ(pr.size(), 1u);
  EXPECT_EQ(s.next_probe_time(), Time{400us});  // sent at 100 us + 2 x 150 us
  s.poll_probes(Time{400us}, pr, ev);
  EXPECT_EQ(pr.size(), 2u);
  EXPECT_EQ(s.ev(i).backoff, 1);
}

// Bad again within relapse_window of coming back: the first probe waits 200 us, then 400 us
// on the next relapse; bad again after the window: 100 us again.
TEST(PathSet, Probes_RelapseWaitsLongerBeforeTheFirstProbe) {
  PathPolicy pol;
  pol.probes_to_good = 1;
  pol.probe_interval = 100us;
  pol.relapse_window = 2ms;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> pr;
  const auto i = static_cast<uint16_t>(s.find(202));
  Time now{0};
  const auto bad_then_back = [&](Duration first_probe) {
    s.on_lost(i, true, now, ev);
    EXPECT_EQ(s.next_probe_time(), now + first_probe);
    now = s.next_probe_time();
    pr.clear();
    s.poll_probes(now, pr, ev);
    ASSERT_EQ(pr.size(), 1u);
    s.on_probe_reply(i, pr[0].seq, false, now + 10us, ev);
    ASSERT_EQ(s.ev(i).state, EvState::kGood);
    now += 10us;
  };
  bad_then_back(100us);
  now += 1ms;
  bad_then_back(200us);
  now += 1ms;
  bad_then_back(400us);
  now += 3ms;  // GOOD past the window: the run of relapses ends
  bad_then_back(100us);
}

// A plane whose every EV keeps losing together (a lossy host port on that plane) drains,
// comes back through probes and drains again: its relapse waits apply to the plane's first
// probe too, or a plane of relapsing EVs would be probed back every probe_interval.
TEST(PathSet, Plane_RelapsingPlaneWaitsLongerBeforeItsFirstProbe) {
  PathPolicy pol;
  pol.probes_to_good = 1;
  pol.probe_interval = 100us;
  pol.relapse_window = 2ms;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> pr;
  Time now{0};
  const auto drain_then_back = [&](Duration first_probe) {
    for (uint32_t k = 0; k < 6; ++k) s.on_lost(s.find(300 + k), true, now, ev);
    ASSERT_TRUE(s.plane_drained(3));
    EXPECT_EQ(s.next_probe_time(), now + first_probe);
    now = s.next_probe_time();
    pr.clear();
    s.poll_probes(now, pr, ev);
    ASSERT_EQ(pr.size(), 1u);
    s.on_probe_reply(pr[0].index, pr[0].seq, false, now + 10us, ev);
    ASSERT_FALSE(s.plane_drained(3));
    now += 10us;
  };
  drain_then_back(100us);
  now += 1ms;
  drain_then_back(200us);
  now += 1ms;
  drain_then_back(400us);
  now += 3ms;  // back for longer than the window: the run of relapses ends
  drain_then_back(100us);
}

TEST(PathSet, Probes_MarkedOrLostReplyRestartsCount) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> pr;
  const int i = s.find(3);
  s.on_lost(i, true, Time{0}, ev);
  Time now = s.next_probe_time();
  s.poll_probes(now, pr, ev);
  s.on_probe_reply(i, pr.back().seq, false, now, ev);
  now = s.next_probe_time();
  s.poll_probes(now, pr, ev);
  s.on_probe_reply(i, pr.back().seq, true, now, ev);  // CE-marked: not clean
  EXPECT_EQ(s.ev(i).clean, 0);
  s.on_probe_reply(i, pr.back().seq + 100, false, now, ev);  // never sent: ignored
  EXPECT_EQ(s.ev(i).clean, 0);
}

TEST(PathSet, Probes_UnansweredBackOffToMaxAndReplyResets) {
  PathPolicy pol;
  pol.probe_interval = 100us;
  pol.probe_interval_max = 800us;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> pr;
  const int i = s.find(5);
  s.on_lost(i, true, Time{0}, ev);
  std::vector<Duration> gaps;
  Time last{0};
  for (int k = 0; k < 6; ++k) {
    const Time t = s.next_probe_time();
    gaps.push_back(t - last);
    last = t;
    s.poll_probes(t, pr, ev);  // never answered
  }
  EXPECT_EQ(gaps, (std::vector<Duration>{100us, 100us, 200us, 400us, 800us, 800us}));
  s.on_probe_reply(i, pr.back().seq, false, last + 5us, ev);
  EXPECT_EQ(s.next_probe_time(), last + 5us + 100us);  // back to the base interval
}

TEST(PathSet, Plane_AllBadDrainsProbesAsWholeAndRestores) {
  PathPolicy pol;
  pol.probes_to_good = 2;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  for (uint32_t k = 0; k < 6; ++k) {  // actives and the backups that replace them
    const int i = s.find(300 + k);
    s.on_lost(i, true, Time{1}, ev);
  }
  EXPECT_TRUE(s.plane_drained(3));
  EXPECT_EQ(ev.back().reason, EvReason::kPlaneDrained);
  auto c = spray(s, 1200);
  for (uint32_t k = 0; k < 6; ++k) EXPECT_EQ(c.count(300 + k), 0u);
  EXPECT_EQ(c[0], 100);  // the other planes share it all
  // One probe per interval for the whole plane.
  std::vector<ProbeRequest> pr;
  Time now = s.next_probe_time();
  s.poll_probes(now, pr, ev);
  ASSERT_EQ(pr.size(), 1u);
  s.on_probe_reply(pr[0].index, pr[0].seq, false, now, ev);
  pr.clear();
  now = s.next_probe_time();
  s.poll_probes(now, pr, ev);
  ASSERT_EQ(pr.size(), 1u);
  s.on_probe_reply(pr[0].index, pr[0].seq, false, now, ev);
  EXPECT_FALSE(s.plane_drained(3));
  for (uint32_t k = 0; k < 6; ++k) EXPECT_EQ(s.ev(s.find(300 + k)).state, EvState::kGood);
  c = spray(s, 1600);
  for (uint32_t k = 0; k < 4; ++k) EXPECT_EQ(c[300 + k], 100);
}

TEST(PathSet, Plane_LivePathsAmongDeadOnes_BringThePlaneBack) {
  // Every EV of plane 3 went bad (say a spine died and a burst hit the others), but only
  // every other one is really dead: probing sticks to an EV that answers, so the plane comes
  // back (taking turns, no 3 clean replies in a row would ever come).
  PathPolicy pol;
  pol.probes_to_good = 3;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  for (uint32_t k = 0; k < 6; ++k) s.on_lost(s.find(300 + k), true, Time{1}, ev);
  ASSERT_TRUE(s.plane_drained(3));
  auto dead = [&](int i) { return i == s.find(300) || i == s.find(302) || i == s.find(304); };
  Time now{1};
  int probes = 0;
  while (s.plane_drained(3) && probes < 50) {
    std::vector<ProbeRequest> pr;
    now = s.next_probe_time();
    s.poll_probes(now, pr, ev);
    for (const auto& r : pr) {
      ++probes;
      if (!dead(r.index)) s.on_probe_reply(r.index, r.seq, false, now + 10us, ev);
    }
  }
  EXPECT_FALSE(s.plane_drained(3));
  EXPECT_LE(probes, 6) << "the plane should be back after 3 clean replies in a row";
}

TEST(PathSet, Plane_LosingPathsBeyondBackupsShrinksItsShare) {
  PathPolicy pol;
  pol.min_active_per_plane = 4;
  PathSet s = make(pol);
  std::vector<EvEvent> ev;
  for (uint32_t k = 0; k < 4; ++k) s.on_lost(s.find(200 + k), true, Time{1}, ev);  // 2 backups left
  auto c = spray(s, 700);
  int plane2 = c[204] + c[205];
  EXPECT_EQ(plane2, 100);  // 2 of 4 usable: half weight (1/7 of traffic)
  EXPECT_EQ(c[0] + c[1] + c[2] + c[3], 200);
}

TEST(PathSet, Deny_NeverUsedNorProbedUntilAllowed) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  ASSERT_TRUE(s.deny(1, true, Time{1}, ev));
  EXPECT_FALSE(s.deny(999, true, Time{1}, ev));
  EXPECT_EQ(ev.back().to, EvState::kDenied);
  EXPECT_EQ(spray(s, 1600).count(1), 0u);
  EXPECT_EQ(s.next_probe_time(), kNever);
  ASSERT_TRUE(s.deny(1, false, Time{2}, ev));
  EXPECT_EQ(ev.back().reason, EvReason::kAllowed);
  EXPECT_EQ(s.ev(s.find(1)).state, EvState::kAssumedBad);
  EXPECT_EQ(s.next_probe_time(), Time{2});
}

TEST(PathSet, Next_EverythingBadStillReturnsNonDeniedEvs) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  for (size_t i = 0; i < s.size(); ++i) s.on_lost(static_cast<uint16_t>(i), true, Time{1}, ev);
  s.deny(0, true, Time{1}, ev);
  std::set<uint32_t> seen;
  for (int i = 0; i < 100; ++i) seen.insert(s.ev(s.next(-1)).path.ev);
  EXPECT_EQ(seen.count(0), 0u);
  EXPECT_EQ(seen.size(), s.size() - 1);
}

// Counts are counters and probes walk the ASSUMED_BAD list (no scan of every EV): both
// must follow every state change, and probes still go out in EV order.
TEST(PathSet, CountsAndProbeOrderFollowStateChanges) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  EXPECT_EQ(s.count(EvState::kGood), 24u);
  for (uint32_t e : {302u, 1u, 203u}) s.on_lost(s.find(e), true, Time{10}, ev);
  ASSERT_TRUE(s.deny(100, true, Time{10}, ev));
  EXPECT_EQ(s.count(EvState::kGood), 20u);
  EXPECT_EQ(s.count(EvState::kAssumedBad), 3u);
  EXPECT_EQ(s.count(EvState::kDenied), 1u);
  const Time due = Time{10} + PathPolicy{}.probe_interval;
  EXPECT_EQ(s.next_probe_time(), due);
  std::vector<ProbeRequest> probes;
  s.poll_probes(due, probes, ev);
  std::vector<uint32_t> order;
  for (const ProbeRequest& r : probes) order.push_back(s.ev(r.index).path.ev);
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 203, 302}));  // index order, as the EVs were given
  // Clean replies bring 203 back; allowing 100 makes it ASSUMED_BAD, probed at once.
  for (const ProbeRequest& r : probes)
    if (s.ev(r.index).path.ev == 203)
      for (uint32_t k = 0; k < PathPolicy{}.probes_to_good; ++k) {
        s.on_probe_reply(r.index, s.ev(r.index).probe_seq, false, due, ev);
        if (k + 1 < PathPolicy{}.probes_to_good) {
          probes.clear();
          s.poll_probes(s.next_probe_time(), probes, ev);
        }
      }
  EXPECT_EQ(s.ev(s.find(203)).state, EvState::kGood);
  ASSERT_TRUE(s.deny(100, false, due, ev));
  EXPECT_EQ(s.count(EvState::kGood), 21u);
  EXPECT_EQ(s.count(EvState::kAssumedBad), 3u);
  EXPECT_EQ(s.count(EvState::kDenied), 0u);
  EXPECT_EQ(s.next_probe_time(), due);
  probes.clear();
  s.poll_probes(due, probes, ev);
  ASSERT_FALSE(probes.empty());
  EXPECT_EQ(s.ev(probes[0].index).path.ev, 100u);
  s.reset(std::vector<Path>{{7, 0}}, {}, PathPolicy{});
  EXPECT_EQ(s.count(EvState::kGood), 1u);
  EXPECT_EQ(s.count(EvState::kAssumedBad), 0u);
  EXPECT_EQ(s.next_probe_time(), kNever);
}

TEST(PathSet, Next_ResendLeavesItsPlaneAndLossyPlanes) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  // A loss on plane 1 (EV 100) and one on plane 2 (EV 200): resends avoid both planes
  // and the lost-on plane, new data does not.
  s.on_lost(4, false, Time{0}, ev);  // index 4 = EV 100 (plane 1)
  s.on_lost(8, false, Time{0}, ev);  // index 8 = EV 200 (plane 2)
  for (int i = 0; i < 40; ++i) {
    const uint16_t plane = s.ev(s.next(0)).path.plane;  // resend of a packet lost on plane 0
    EXPECT_EQ(plane, 3) << i;
  }
  std::set<uint16_t> planes;
  for (int i = 0; i < 40; ++i) planes.insert(s.ev(s.next(-1)).path.plane);
  EXPECT_EQ(planes.size(), 4u) << "new data left a plane";
  // An acknowledgement on plane 2 ends its run of losses: resends may use it again.
  s.on_acked(9);
  planes.clear();
  for (int i = 0; i < 40; ++i) planes.insert(s.ev(s.next(0)).path.plane);
  EXPECT_EQ(planes, (std::set<uint16_t>{2, 3}));
}

TEST(PathSet, Next_ResendStaysWhenEveryOtherPlaneIsLossy) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  for (uint16_t i : {4, 8, 12}) s.on_lost(i, false, Time{0}, ev);  // planes 1, 2, 3
  // Only its own plane is left out, the lossy ones are better than nothing.
  std::set<uint16_t> planes;
  for (int i = 0; i < 60; ++i) planes.insert(s.ev(s.next(0)).path.plane);
  EXPECT_EQ(planes, (std::set<uint16_t>{1, 2, 3}));
}

TEST(PathSet, SetPlanesHeld_CarriesNothingUntilReleased) {
  PathSet s = make();
  s.set_planes_held(1u << 2 | 1u << 3);
  EXPECT_EQ(s.planes_held(), 0b1100);
  std::set<uint16_t> planes;
  for (int i = 0; i < 100; ++i) planes.insert(s.ev(s.next(-1)).path.plane);
  EXPECT_EQ(planes, (std::set<uint16_t>{0, 1}));
  s.set_planes_held(0);
  planes.clear();
  for (int i = 0; i < 100; ++i) planes.insert(s.ev(s.next(-1)).path.plane);
  EXPECT_EQ(planes.size(), 4u);
  // Every plane held: the sprayer still returns EVs (it never stalls silently).
  s.set_planes_held(0xF);
  EXPECT_NE(s.next(-1), PathSet::kNoPath);
}

// QPs given rotated path lists (each starting on a different EV, as mrc-sim's hashed rotation
// does) start their round robin on different planes: with plane 0 held (a port with no link),
// a 32 KiB message's 8 packets fall on planes 1-3 evenly across QPs, not 3:3:2 (every QP
// starting on plane 1, the lowest with weight), which left plane 3 idle a third of the time.
TEST(PathSet, Next_FirstTurnsSpreadOverPlanesWithWeightAcrossQps) {
  std::vector<Path> base;
  for (uint32_t k = 0; k < 8; ++k)
    for (uint16_t p = 0; p < 4; ++p) base.push_back(Path{p * 100u + k, p});
  std::map<uint16_t, int> per_plane, first;
  const int qps = 3000;
  for (int q = 0; q < qps; ++q) {
    std::vector<Path> active = base;
    std::rotate(active.begin(), active.begin() + (q * 7) % active.size(), active.end());
    PathSet s;
    s.reset(active, {}, PathPolicy{});
    s.set_planes_held(1u << 0);
    for (int i = 0; i < 8; ++i) {
      const uint16_t plane = s.ev(s.next(-1)).path.plane;
      if (i == 0) ++first[plane];
      ++per_plane[plane];
    }
  }
  EXPECT_EQ(per_plane.count(0), 0u);
  for (uint16_t p = 1; p < 4; ++p) {
    EXPECT_NEAR(per_plane[p], qps * 8 / 3, qps * 8 / 100) << "plane " << p;
    EXPECT_NEAR(first[p], qps / 3, qps / 20) << "plane " << p;
  }
}

// A real host's driver gives every QP to a peer the same path list: the salt (the engine
// passes the QP number) still spreads where their round robins start while a plane is held.
TEST(PathSet, Next_SameListDifferentSaltsStartOnEveryPlaneWithWeight) {
  std::vector<Path> active;
  for (uint16_t p = 0; p < 4; ++p)
    for (uint32_t k = 0; k < 4; ++k) active.push_back(Path{uint32_t{p} << 16 | k << 8, p});
  std::map<uint16_t, int> first;
  const int qps = 3000;
  for (int q = 0; q < qps; ++q) {
    PathSet s;
    s.reset(active, {}, PathPolicy{}, static_cast<uint32_t>(q + 1));
    s.set_planes_held(1u << 0);
    ++first[s.ev(s.next(-1)).path.plane];
  }
  EXPECT_EQ(first.count(0), 0u);
  for (uint16_t p = 1; p < 4; ++p) EXPECT_NEAR(first[p], qps / 3, qps / 20) << "plane " << p;
}

// One QP's round robin is unchanged by where it starts: every plane with weight takes one
// turn in each round, so a long message spreads evenly whatever the first EV.
TEST(PathSet, Next_AnyStartKeepsEachRoundEven) {
  std::vector<Path> active;
  for (uint32_t k = 0; k < 4; ++k)
    for (uint16_t p = 0; p < 4; ++p) active.push_back(Path{p * 100u + k, p});
  for (size_t shift = 0; shift < active.size(); ++shift) {
    std::vector<Path> v = active;
    std::rotate(v.begin(), v.begin() + static_cast<ptrdiff_t>(shift), v.end());
    PathSet s;
    s.reset(v, {}, PathPolicy{});
    for (int round = 0; round < 50; ++round) {
      std::set<uint16_t> planes;
      for (int i = 0; i < 4; ++i) planes.insert(s.ev(s.next(-1)).path.plane);
      ASSERT_EQ(planes.size(), 4u) << "shift " << shift << " round " << round;
    }
  }
}

// A plane the operator drained carries no data even when every other plane is held: the
// fallback that keeps a QP from stalling silently takes the held planes, never the drained
// one (mrcctl ports drain: "no data is sent on it").
TEST(PathSet, Next_EveryOtherPlaneHeld_DrainedPlaneStillCarriesNothing) {
  PathSet s = make();
  s.set_plane_admin_down(2, true);
  s.set_planes_held(1u << 0 | 1u << 1 | 1u << 3);
  std::set<uint16_t> planes;
  for (int i = 0; i < 200; ++i) planes.insert(s.ev(s.next(-1)).path.plane);
  EXPECT_EQ(planes.count(2), 0u);
  EXPECT_FALSE(planes.empty());
  // Every plane drained: nothing to send on (the caller waits; the retry budget bounds it).
  for (uint16_t p = 0; p < 4; ++p) s.set_plane_admin_down(p, true);
  EXPECT_EQ(s.next(-1), PathSet::kNoPath);
}

// Per-plane state is sized to the planes in use, not to kMaxPlanes (an idle QP's path set was
// ~1.2 KB, most of it 16 planes' arrays): the object holds no per-plane array (328 bytes: the
// vectors of its two EV records, per-plane state, index, bad list, the policy's 16 weights).
TEST(PathSet, Reset_PerPlaneStateSizedToThePlanesInUse) {
  EXPECT_LE(sizeof(PathSet), size_t{328});
  PathSet s = make();  // 4 planes
  EXPECT_EQ(s.planes(), 4u);
  // Reset to 16 planes, one EV each: every plane carries its turn.
  std::vector<Path> wide;
  for (uint16_t p = 0; p < kMaxPlanes; ++p) wide.push_back(Path{1000u + p, p});
  s.reset(wide, {}, PathPolicy{});
  EXPECT_EQ(s.planes(), kMaxPlanes);
  std::set<uint16_t> planes;
  for (int i = 0; i < kMaxPlanes; ++i) planes.insert(s.ev(s.next(-1)).path.plane);
  EXPECT_EQ(planes.size(), size_t{kMaxPlanes});
}

// A reset to fewer planes keeps the in-flight counts of the planes it keeps; a packet that
// leaves a plane the set no longer has changes nothing (no count underflows).
TEST(PathSet, Reset_FewerPlanesKeepsInFlightOfThoseKept) {
  PathSet s = make();
  s.on_sent(0);
  s.on_sent(3);
  std::vector<Path> two{Path{1, 0}, Path{2, 1}};
  s.reset(two, {}, PathPolicy{});
  EXPECT_EQ(s.planes(), 2u);
  EXPECT_EQ(s.inflight(0), 1u);
  EXPECT_EQ(s.inflight(3), 0u);
  s.on_left(3);  // sent on plane 3 before the reset
  s.on_left(0);
  EXPECT_EQ(s.inflight(0), 0u);
}

// An administrative drain is kept for any plane, even one the set does not have yet.
TEST(PathSet, SetPlaneAdminDown_SurvivesResetToMorePlanes) {
  PathSet s;
  std::vector<Path> one{Path{1, 0}};
  s.reset(one, {}, PathPolicy{});
  s.set_plane_admin_down(5, true);
  EXPECT_TRUE(s.plane_admin_down(5));
  std::vector<Path> six;
  for (uint16_t p = 0; p < 6; ++p) six.push_back(Path{10u + p, p});
  s.reset(six, {}, PathPolicy{});
  EXPECT_TRUE(s.plane_admin_down(5));
  for (int i = 0; i < 60; ++i) EXPECT_NE(s.ev(s.next(-1)).path.plane, 5u);
}

TEST(SharedHealth, OnLost_PeerLossesInARowHoldThePlaneForThatPeer) {
  SharedHealth h;
  SharedHealth::Peer& a = h.peer(1);
  SharedHealth::Peer& b = h.peer(2);
  const Time t{1'000'000};
  Time until;
  for (uint16_t i = 1; i < h.policy().peer_losses; ++i) EXPECT_FALSE(h.on_lost(a, 2, t));
  h.on_acked(a, 2);  // an acknowledgement ends the run
  for (uint16_t i = 1; i < h.policy().peer_losses; ++i) EXPECT_FALSE(h.on_lost(a, 2, t));
  EXPECT_EQ(h.held(a, t, &until), 0);
  const uint64_t epoch = h.epoch();
  EXPECT_TRUE(h.on_lost(a, 2, t));
  EXPECT_GT(h.epoch(), epoch);
  EXPECT_EQ(h.holds(), 1u);
  EXPECT_EQ(h.held(a, t, &until), 1u << 2);
  EXPECT_EQ(until, t + h.policy().hold);
  EXPECT_EQ(h.held(b, t, &until), 0) << "another peer's plane was held";
  EXPECT_EQ(until, kNever);
  EXPECT_EQ(h.held(a, t + h.policy().hold, &until), 0) << "the hold did not end";
}

TEST(SharedHealth, OnLost_HeldAgainAtFirstLossWithBackoffUntilAnAck) {
  SharedHealth h;
  SharedHealth::Peer& a = h.peer(1);
  Time t{0};
  Time until;
  for (uint16_t i = 0; i < h.policy().peer_losses; ++i) h.on_lost(a, 0, t);
  ASSERT_EQ(h.held(a, t, &until), 1u);
  EXPECT_FALSE(h.on_lost(a, 0, t + 1us)) << "a loss during the hold counted";
  Duration hold = h.policy().hold;
  for (int round = 0; round < 8; ++round) {
    t = until;  // the hold ended; the first loss holds it again, twice as long (to a cap)
    EXPECT_TRUE(h.on_lost(a, 0, t)) << round;
    hold = std::min(2 * hold, h.policy().hold_max);
    ASSERT_EQ(h.held(a, t, &until), 1u);
    EXPECT_EQ(until - t, hold) << round;
  }
  // An acknowledgement resets the backoff: the next hold needs a full run and is short.
  t = until;
  h.on_acked(a, 0);
  for (uint16_t i = 1; i < h.policy().peer_losses; ++i) EXPECT_FALSE(h.on_lost(a, 0, t));
  EXPECT_TRUE(h.on_lost(a, 0, t));
  h.held(a, t, &until);
  EXPECT_EQ(until - t, h.policy().hold);
}

TEST(SharedHealth, OnLostEv_LossesInARowOnOneEvAnyPeerHoldIt) {
  SharedHealth h;
  const Time t{1'000'000};
  Time until;
  ASSERT_EQ(h.policy().ev_losses, 3);
  EXPECT_FALSE(h.on_lost_ev(0x10203, t));
  EXPECT_FALSE(h.on_lost_ev(0x10203, t));
  h.on_acked_ev(0x10203);  // an acknowledgement on the EV from any peer ends the run
  EXPECT_FALSE(h.on_lost_ev(0x10203, t));
  EXPECT_FALSE(h.on_lost_ev(0x10203, t));
  h.on_acked_ev(0x10204);  // another EV: the run goes on
  EXPECT_FALSE(h.ev_held(0x10203, t, &until));
  EXPECT_TRUE(h.on_lost_ev(0x10203, t));
  ASSERT_TRUE(h.ev_held(0x10203, t, &until));
  EXPECT_EQ(until - t, h.policy().hold);
  EXPECT_EQ(h.ev_holds_end(), kNever) << "held until an acknowledgement or a probe reply";
  EXPECT_FALSE(h.ev_held(0x10204, t, &until));
  // After the hold, it stays held (its probe is due: EvProbeDue tests); the first loss holds
  // it again, twice as long; an acknowledgement resets.
  Time end = t + h.policy().hold;
  EXPECT_TRUE(h.ev_held(0x10203, end, &until));
  EXPECT_EQ(until, end);
  EXPECT_EQ(h.ev_holds_end(), kNever);
  EXPECT_TRUE(h.on_lost_ev(0x10203, end));
  ASSERT_TRUE(h.ev_held(0x10203, end, &until));
  EXPECT_EQ(until - end, 2 * h.policy().hold);
  h.on_acked_ev(0x10203);
  end = until;
  EXPECT_FALSE(h.on_lost_ev(0x10203, end));
  EXPECT_EQ(h.holds(), 2u);
}

TEST(SharedHealth, EvProbeDue_HoldThatRanOutIsProbedOnceAndHeldUntilAReply) {
  SharedHealth h;
  const Time t{1'000'000};
  Time until;
  for (uint16_t i = 0; i < h.policy().ev_losses; ++i) h.on_lost_ev(0x10203, t);
  ASSERT_TRUE(h.ev_held(0x10203, t, &until));
  EXPECT_FALSE(h.ev_probe_due(0x10203, t)) << "probed while its hold runs";
  EXPECT_FALSE(h.ev_probe_due(0x10204, t)) << "an EV never held";
  // The hold ran out with no acknowledgement: one probe, claimed by the first to ask; the EV
  // stays held for the next, doubled, hold meanwhile.
  Time end = t + h.policy().hold;
  EXPECT_TRUE(h.ev_probe_due(0x10203, end));
  EXPECT_FALSE(h.ev_probe_due(0x10203, end)) << "a second probe for the same hold";
  ASSERT_TRUE(h.ev_held(0x10203, end, &until));
  EXPECT_EQ(until - end, 2 * h.policy().hold);
  EXPECT_EQ(h.ev_holds_end(), kNever);
  // No reply by then: the next probe, the hold doubled again.
  end = until;
  EXPECT_TRUE(h.ev_probe_due(0x10203, end));
  ASSERT_TRUE(h.ev_held(0x10203, end, &until));
  EXPECT_EQ(until - end, 4 * h.policy().hold);
  EXPECT_EQ(h.ev_probes(), 2u);
  // A reply (from any peer) ends the hold at once, and with it the wait for a reply.
  const uint64_t epoch = h.epoch();
  h.on_probe_reply_ev(0x10203, end);
  EXPECT_FALSE(h.ev_held(0x10203, end, &until));
  EXPECT_GT(h.epoch(), epoch) << "QPs that hold it are not told";
  EXPECT_NE(h.ev_holds_end(), kNever);
  EXPECT_FALSE(h.ev_probe_due(0x10203, until));
  EXPECT_FALSE(h.ev_counting());
  // Held again later: the first hold's length and threshold, as for an EV never held.
  EXPECT_FALSE(h.on_lost_ev(0x10203, until));
}

TEST(SharedHealth, EvProbeDue_AnAcknowledgementEndsTheWaitForAProbe) {
  SharedHealth h;
  const Time t{1'000'000};
  Time until;
  for (uint16_t i = 0; i < h.policy().ev_losses; ++i) h.on_lost_ev(0x10203, t);
  h.on_acked_ev(0x10203);  // a packet on it got through during the hold (another peer)
  const Time end = t + h.policy().hold;
  EXPECT_FALSE(h.ev_probe_due(0x10203, end));
  EXPECT_FALSE(h.ev_held(0x10203, end, &until));
  EXPECT_NE(h.ev_holds_end(), kNever);
}

TEST(SharedHealth, OnLost_LocalPlaneHeldForEveryPeer) {
  SharedHealth h({.peer_losses = 1000, .local_losses = 8});
  std::vector<SharedHealth::Peer*> peers;
  for (PeerId p = 0; p < 8; ++p) peers.push_back(&h.peer(p));
  const Time t{5'000};
  Time until;
  // Losses on plane 1 towards eight peers, none acknowledged on plane 1 in between.
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(h.on_lost(*peers[static_cast<size_t>(i)], 1, t));
  h.on_acked(*peers[0], 1);  // one acknowledgement on the plane from any peer ends the run
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(h.on_lost(*peers[static_cast<size_t>(i)], 1, t));
  EXPECT_TRUE(h.on_lost(*peers[7], 1, t));
  SharedHealth::Peer& fresh = h.peer(99);
  EXPECT_EQ(h.held(fresh, t, &until), 1u << 1) << "a peer never lost to missed the local hold";
  EXPECT_EQ(h.local(1).backoff, 1);
}

TEST(SharedHealth, SetReportedDown_HeldForThatPeerWithNoEndUntilReportedUp) {
  SharedHealth h;
  SharedHealth::Peer& a = h.peer(1);
  SharedHealth::Peer& b = h.peer(2);
  Time until;
  const uint64_t e0 = h.epoch();
  h.set_reported_down(a, 1u << 2);
  EXPECT_GT(h.epoch(), e0) << "QPs to the peer would not look again";
  EXPECT_EQ(h.held(a, Time{1'000'000'000}, &until), 1u << 2);
  EXPECT_EQ(until, kNever) << "a reported port has no timed end";
  EXPECT_EQ(h.held(b, Time{0}, &until), 0u) << "another peer's ports are its own";
  const uint64_t e1 = h.epoch();
  h.set_reported_down(a, 1u << 2);  // the same word again (every ACK carries it): no change
  EXPECT_EQ(h.epoch(), e1);
  h.on_acked(a, 2);  // an acknowledgement does not end it: only the peer's word does
  EXPECT_EQ(h.held(a, Time{0}, &until), 1u << 2);
  h.set_reported_down(a, 0);
  EXPECT_GT(h.epoch(), e1);
  EXPECT_EQ(h.held(a, Time{0}, &until), 0u);
}

TEST(SharedHealth, SetLocalDown_HeldForEveryPeerAndKeptApartFromAnnouncements) {
  SharedHealth h;
  SharedHealth::Peer& a = h.peer(1);
  Time until;
  h.set_local_down(1u << 3);
  EXPECT_EQ(h.local_down(), 1u << 3);
  EXPECT_EQ(h.held(a, Time{0}, &until), 1u << 3);
  EXPECT_EQ(h.held(h.peer(77), Time{0}, &until), 1u << 3) << "a peer made later missed it";
  h.set_announced_down(a, 1u << 0);
  h.set_reported_down(a, 1u << 1);
  EXPECT_EQ(h.held(a, Time{0}, &until), 0b1011u);
  h.set_local_down(0);  // our port is back: the peer's own words still hold
  EXPECT_EQ(h.held(a, Time{0}, &until), 0b0011u);
  EXPECT_EQ(a.announced_down, 1u << 0);
  EXPECT_EQ(a.reported_down, 1u << 1);
}

TEST(SharedHealth, Counting_TrueWhileARunOrBackoffWaitsForAnAck) {
  SharedHealth h({.peer_losses = 2, .local_losses = 3});
  SharedHealth::Peer& a = h.peer(1);
  SharedHealth::Peer& b = h.peer(2);
  const Time t{1'000'000};
  Time until;
  EXPECT_FALSE(h.counting(a));
  h.on_lost(a, 3, t);
  EXPECT_TRUE(h.counting(a));
  EXPECT_TRUE(h.counting(b)) << "the local run of plane 3 is every peer's";
  h.on_acked(b, 1);  // another plane: both runs of plane 3 go on
  EXPECT_TRUE(h.counting(a));
  EXPECT_TRUE(h.on_lost(a, 3, t));  // second loss in a row: held, backoff 1
  h.on_acked(b, 3);                 // ends the local run only
  EXPECT_TRUE(h.counting(a)) << "the peer's backoff was forgotten";
  EXPECT_FALSE(h.counting(b));
  h.on_acked(a, 3);
  EXPECT_FALSE(h.counting(a));
  // After an acknowledgement the next hold needs a full run again (the backoff was reset).
  EXPECT_FALSE(h.on_lost(a, 3, t + h.policy().hold));
  EXPECT_TRUE(h.on_lost(a, 3, t + h.policy().hold));
  EXPECT_EQ(h.held(a, t + h.policy().hold, &until), 1u << 3);
  // A drained plane that answers again ends the peer's run without an acknowledgement.
  h.on_acked(b, 3);  // (the local run)
  h.release(a, 3);
  EXPECT_FALSE(h.counting(a));
}

// prefetch_next() is a hint to the CPU (thousands of QPs: the EVs the next packets use,
// fetched ahead): the EVs it names stay inside the set whatever planes are in use (plane 1
// has no EV here, plane 3's EVs are all bad), and the round robin picks what it would
// have picked without it.
TEST(PathSet, PrefetchNext_LeavesTheRoundRobinAsItWas) {
  std::vector<Path> active;
  for (uint32_t k = 0; k < 3; ++k)
    for (const uint16_t p : {0, 2, 3}) active.push_back(Path{p * 100u + k, p});
  PathSet plain, hinted;
  plain.reset(active, {}, PathPolicy{}, 7);
  hinted.reset(active, {}, PathPolicy{}, 7);
  std::vector<EvEvent> ev;
  for (uint32_t k = 0; k < 3; ++k) {
    for (PathSet* s : {&plain, &hinted})
      for (int i = 0; i < 3; ++i)
        s->on_lost(static_cast<uint16_t>(s->find(300 + k)), false, Time{0}, ev);
  }
  hinted.prefetch_next();
  for (int i = 0; i < 40; ++i) {
    const uint16_t want = plain.next(-1);
    hinted.prefetch_next();
    ASSERT_EQ(hinted.next(-1), want) << "packet " << i;
    ASSERT_NE(plain.ev(want).path.plane, 3) << "packet " << i;
  }
  PathSet empty;
  empty.prefetch_next();
  EXPECT_EQ(empty.next(-1), PathSet::kNoPath);
}
// The sprayer walks each plane's EVs in index order (its cursor a position in the plane's
// list): with the paths given planes interleaved (EV k on plane k % 3), each plane's
// picks still go round its EVs in index order from its first, a skipped EV is passed over
// once, and a reset to another set starts each plane again at its first EV.
TEST(PathSet, Next_WalksEachPlanesEvsInIndexOrderWhenPlanesInterleave) {
  std::vector<Path> active;
  for (uint32_t k = 0; k < 12; ++k) active.push_back(Path{500u + k, static_cast<uint16_t>(k % 3)});
  PathSet s;
  s.reset(active, {}, PathPolicy{}, 3);
  std::map<uint16_t, std::vector<uint32_t>> picks;  // plane -> EVs in the order picked
  for (int i = 0; i < 36; ++i) {
    const Path p = s.ev(s.next(-1)).path;
    picks[p.plane].push_back(p.ev);
  }
  ASSERT_EQ(picks.size(), 3u);
  for (auto& [plane, evs] : picks) {
    ASSERT_EQ(evs.size(), 12u) << plane;
    for (size_t i = 0; i < evs.size(); ++i)
      EXPECT_EQ(evs[i], 500u + plane + 3 * (i % 4)) << "plane " << plane << " pick " << i;
  }
  // EV 503 (plane 0's second) skips once: plane 0 goes 500, 506, 509, 500, 503, ...
  s.on_congestion(static_cast<uint16_t>(s.find(503)));
  std::vector<uint32_t> zero;
  for (int i = 0; i < 15; ++i) {
    const Path p = s.ev(s.next(-1)).path;
    if (p.plane == 0) zero.push_back(p.ev);
  }
  EXPECT_EQ(zero, (std::vector<uint32_t>{500, 506, 509, 500, 503}));
  // Another set: each plane starts at its first EV again.
  std::vector<Path> other;
  for (uint32_t k = 0; k < 4; ++k) other.push_back(Path{700u + k, static_cast<uint16_t>(k % 2)});
  s.reset(other, {}, PathPolicy{}, 3);
  std::map<uint16_t, std::vector<uint32_t>> again;
  for (int i = 0; i < 8; ++i) {
    const Path p = s.ev(s.next(-1)).path;
    again[p.plane].push_back(p.ev);
  }
  EXPECT_EQ(again[0], (std::vector<uint32_t>{700, 702, 700, 702}));
  EXPECT_EQ(again[1], (std::vector<uint32_t>{701, 703, 701, 703}));
}

// The per-packet counters are 64-bit values whose low bits live in the EV's 32-byte
// per-packet record (8 bits of packets and ACKs, 32 of bytes): a carry out of the low
// bits reaches the cold record, nothing is lost.
TEST(PathSet, EvCounters_CarryIntoTheColdRecord) {
  PathSet s = make();
  s.count_sent(0, 4096);
  s.count_acked(0);
  EXPECT_EQ(s.ev(0).tx_packets(), 1u);
  EXPECT_EQ(s.ev(0).tx_bytes(), 4096u);
  EXPECT_EQ(s.ev(0).acked(), 1u);
  for (int i = 0; i < 255; ++i) {  // 256 packets and ACKs: both low bytes wrap once
    s.count_sent(0, 4096);
    s.count_acked(0);
  }
  EXPECT_EQ(s.ev(0).tx_packets(), 256u);
  EXPECT_EQ(s.ev(0).acked(), 256u);
  EXPECT_EQ(s.hot(0).tx_packets_lo, 0u);
  EXPECT_EQ(s.ev(0).tx_bytes(), 256u * 4096);
  s.tx(0).tx_bytes_lo = UINT32_MAX - 100;  // bytes wrap to 3995 with a carry
  s.count_sent(0, 4096);
  EXPECT_EQ(s.ev(0).tx_bytes(), (uint64_t{1} << 32) + 3995);
  EXPECT_EQ(s.ev(0).tx_packets(), 257u);
  for (int i = 0; i < 1000; ++i) s.count_sent(1, 1);
  EXPECT_EQ(s.ev(1).tx_packets(), 1000u);
  EXPECT_EQ(s.ev(1).tx_bytes(), 1000u);
  EXPECT_EQ(s.ev(0).tx_packets(), 257u);  // EV 0 untouched by EV 1's counts
}

// What a packet and its ACK touch of an EV is one 32-byte record, two to a line, all of a
// QP's EVs in one array: 16 EVs (a 64 KiB message of 16 packets) in 8 lines.
TEST(PathSet, HotRecord_TwoEvsToACacheLine) {
  EXPECT_EQ(sizeof(PathSet::Hot), 32u);
  EXPECT_EQ(alignof(PathSet::Hot), 32u);
  PathSet s = make();
  const auto base = reinterpret_cast<uintptr_t>(&s.hot(0));
  EXPECT_EQ(base % 64, 0u);  // the block starts a line: 16 EVs fill 8 lines exactly
  for (size_t i = 1; i < s.size(); ++i)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(&s.hot(i)) - base, 32 * i) << i;
}

// The per-packet record and the full one (ev(i)) say the same about every EV, and the sprayer
// decides from the per-packet record alone: through losses, probes back to GOOD, a plane
// drained and restored, denies, shared-view holds of EVs and planes, an admin drain and a
// reset, the sprayer never picks an EV that ev(i) says is not usable (not active, not GOOD,
// held while its plane has another, or on a plane with no weight) while a usable one exists.
TEST(PathSet, Next_NeverPicksAnEvTheFullRecordSaysIsUnusable) {
  PathSet s = make();
  std::vector<EvEvent> ev;
  std::vector<ProbeRequest> probes;
  Time now{0};
  uint64_t checked = 0;
  const auto check = [&](const char* stage) {
    for (size_t i = 0; i < s.size(); ++i) {
      const PathSet::Ev e = s.ev(i);
      const PathSet::Hot& h = s.hot(i);
      ASSERT_EQ(e.state, h.state()) << stage << " ev " << i;
      ASSERT_EQ(e.active, static_cast<bool>(h.active)) << stage << " ev " << i;
      ASSERT_EQ(e.path.ev, h.ev) << stage << " ev " << i;
      ASSERT_EQ(e.path.plane, h.plane) << stage << " ev " << i;
      ASSERT_EQ(e.losses != 0, static_cast<bool>(h.lossy)) << stage << " ev " << i;
    }
    // Which planes have a usable EV, by the full records and the set's own plane flags.
    bool any = false;
    for (size_t i = 0; i < s.size(); ++i) {
      const PathSet::Ev e = s.ev(i);
      const uint16_t pl = e.path.plane;
      any |= e.active && e.state == EvState::kGood && !s.plane_admin_down(pl) &&
             !(s.planes_held() >> pl & 1u);
    }
    for (int k = 0; k < 64; ++k) {
      const uint16_t i = s.next(-1);
      ASSERT_NE(i, PathSet::kNoPath) << stage;
      const PathSet::Ev e = s.ev(i);
      ASSERT_NE(e.state, EvState::kDenied) << stage << " pick " << k;
      if (!any) continue;  // nothing usable: the fallback may pick any non-denied EV
      ASSERT_TRUE(e.active) << stage << " pick " << k << " ev " << e.path.ev;
      ASSERT_EQ(e.state, EvState::kGood) << stage << " pick " << k << " ev " << e.path.ev;
      ASSERT_FALSE(s.plane_admin_down(e.path.plane)) << stage << " pick " << k;
      ASSERT_FALSE(s.planes_held() >> e.path.plane & 1u) << stage << " pick " << k;
      ++checked;
    }
  };
  check("fresh");
  // Losses: EVs 1 and 2 of plane 0 and EV 0 of plane 1 go bad; backups step in.
  for (uint32_t v : {1u, 2u, 100u})
    for (int k = 0; k < 2; ++k) s.on_lost(static_cast<uint16_t>(s.find(v)), false, now, ev);
  check("three EVs lost");
  // A loss, then an ACK on EV 3: its run of losses ends (lossy follows).
  s.on_lost(static_cast<uint16_t>(s.find(3)), false, now, ev);
  check("one loss on EV 3");
  s.on_acked(static_cast<uint16_t>(s.find(3)));
  check("EV 3 acknowledged");
  // Plane 2 loses every EV, backups too: drained.
  for (uint32_t k = 0; k < 6; ++k) s.on_lost(static_cast<uint16_t>(s.find(200 + k)), true, now, ev);
  ASSERT_TRUE(s.plane_drained(2));
  check("plane 2 drained");
  // Probes bring plane 2 and EV 1 back.
  for (int round = 0; round < 4; ++round) {
    now += 200ms;
    probes.clear();
    s.poll_probes(now, probes, ev);
    for (const ProbeRequest& r : probes) {
      const uint32_t v = s.ev(r.index).path.ev;
      if (v / 100 == 2 || v == 1) s.on_probe_reply(r.index, r.seq, false, now, ev);
    }
    check("probing");
  }
  EXPECT_FALSE(s.plane_drained(2));
  // Denies and an allow.
  ASSERT_TRUE(s.deny(300, true, now, ev));
  ASSERT_TRUE(s.deny(301, true, now, ev));
  check("denied");
  ASSERT_TRUE(s.deny(300, false, now, ev));
  check("allowed");
  // Shared-view holds: EVs of plane 3, then planes.
  for (uint32_t v : {301u, 302u}) s.set_ev_held(static_cast<uint16_t>(s.find(v)), true);
  check("EVs held");
  s.set_planes_held(1u << 1);
  check("plane 1 held");
  s.set_plane_admin_down(3, true);
  check("plane 3 drained by the operator");
  s.set_planes_held(0);
  s.set_plane_admin_down(3, false);
  for (uint32_t v : {301u, 302u}) s.set_ev_held(static_cast<uint16_t>(s.find(v)), false);
  check("released");
  // Every EV bad: the fallback still never returns a denied EV.
  for (size_t i = 0; i < s.size(); ++i) s.on_lost(static_cast<uint16_t>(i), true, now, ev);
  check("everything bad");
  // A reset to another set: both records start again.
  std::vector<Path> active;
  for (uint32_t k = 0; k < 8; ++k) active.push_back(Path{900 + k, static_cast<uint16_t>(k % 2)});
  s.reset(active, {}, PathPolicy{});
  check("reset");
  EXPECT_GT(checked, 64u * 10);
}
}  // namespace
}  // namespace mrc::engine
