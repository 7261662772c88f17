// Multipath fault runs on the simulated two-tier fabric (DESIGN.md section 6):
// 2 hosts on different T0s, 4 planes x 4 spines, host ports of equal rate,
// bulk WRITE with every byte verified. Thresholds are in virtual time.
// Each test prints a FIGURES line (goodput, dip, time to detect, time to
// reintegrate); perf/RESULTS.md records them.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <span>

#include "mrc/io/sim/fabric.h"
#include "mrc/testing/bulk.h"
#include "mrc/testing/goodput.h"
#include "mrc/testing/testbed.h"

namespace mrc {
namespace {

using namespace engine;
using namespace sim;
using namespace std::chrono_literals;

constexpr uint64_t kPortBps = 10'000'000'000;  // per plane; 4 planes
constexpr uint64_t kAggregateBps = 4 * kPortBps;
constexpr Duration kMeterInterval = 1ms;

double ms(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double seconds(Time t) { return std::chrono::duration<double>(t).count(); }

/// One fault run: fabric, QP pair a -> b, verified bulk WRITE, goodput meter, EV events.
struct FaultRun {
  static EngineConfig engine_config(Duration base_rtt = 20us) {
    EngineConfig c;
    c.nic_bps = kAggregateBps;  // CC defaults from the NIC's real rate...
    // ...and a base RTT every flow shares: the fabric's unloaded RTT is 21.6-23.3 us
    // depending on the path (4 hops of 4 KiB at 10 Gb/s); NSCC takes the lower of the
    // profile's and the samples', so a profile below them all gives every flow the same
    // base. Flows that each learned their own base would not share the port fairly.
    c.base_rtt = base_rtt;
    return c;
  }
  explicit FaultRun(uint32_t hosts = 2, uint64_t seed = 1, Duration base_rtt = 20us)
      : tb(SimConfig{seed}, engine_config(base_rtt)) {
    for (uint32_t i = 0; i < hosts; ++i) tb.add_host();
    FabricConfig fc;
    fc.hosts = hosts;
    fc.host_port_bps = kPortBps;
    fc.uplink_bps = kPortBps;
    // Switch queues as UEC suggests, from the BDP of one port (10 Gb/s x ~22 us RTT
    // = 27 KB): ECN CE ramping from 0.2 to 0.8 BDP, trim from 1.5 BDP (last hop).
    fc.ecn_threshold_bytes = 5 << 10;
    fc.ecn_ramp_bytes = 17 << 10;
    fc.trim_threshold_bytes = 40 << 10;
    fab = std::make_unique<Fabric>(tb.net(), fc);
  }

  /// Connects src -> dst with 16 EVs per plane and 4 backups per plane, and starts a stream.
  BulkWrite& stream(PeerId src, PeerId dst) {
    QpAttr at = bulk_stream_attr();
    at.backup_paths = fab->backup_paths(src, dst, 4);
    auto paths = fab->paths(src, dst, 16);
    pairs.push_back(tb.connect(src, dst, paths, at));
    streams.push_back(std::make_unique<BulkWrite>(tb, src, dst, pairs.back()));
    return *streams.back();
  }

  /// Goodput as the receiver accepts it (payload bytes, no duplicates) of QP pair i.
  GoodputMeter& meter(size_t i, PeerId dst) {
    const Qpn qpn = pairs[i].b;
    meters.push_back(std::make_unique<GoodputMeter>(
        tb.net(), [this, dst, qpn] { return tb.engine(dst).qp_stats(qpn)->rx_payload_bytes; },
        kMeterInterval));
    meters.back()->start();
    return *meters.back();
  }

  void run_until(Time t) {
    std::vector<BulkWrite*> s;
    for (auto& x : streams) s.push_back(x.get());
    while (tb.net().now() < t) {
      run_streams(tb.net(), s, std::min(t, tb.net().now() + 1ms));
      for (PeerId h = 0; h < fab->config().hosts; ++h)
        while (auto e = tb.engine(h).poll_event()) events.push_back({h, *e});
    }
  }

  /// Every stream verified, no error completion, no QP failure, no RTO storm.
  void expect_clean() {
    for (auto& s : streams) {
      EXPECT_GT(s->completed(), 0u);
      EXPECT_EQ(s->mismatches(), 0u);
      EXPECT_EQ(s->errors(), 0u);
    }
    for (auto& [h, e] : events) EXPECT_NE(e.type, EventType::kQpFatal) << "host " << h;
  }

  /// EV events of host h changing to `to`, at or after `from`.
  std::vector<Event> ev_events(PeerId h, EvState to, Time from = Time{0}) const {
    std::vector<Event> out;
    for (auto& [host, e] : events)
      if (host == h && e.type == EventType::kEvState && e.to == uint8_t(to) && e.at >= from &&
          e.reason != uint8_t(EvReason::kPlaneDrained))
        out.push_back(e);
    return out;
  }

  /// For each EV of `evs`: the first time at or after `from` host h's EV changed to `to`
  /// (kNever if it did not). Plane drains count as going bad here: a drained EV carries no
  /// data either.
  std::map<uint32_t, Time> first_change(PeerId h, std::span<const Path> evs, EvState to,
                                        Time from) const {
    std::map<uint32_t, Time> out;
    for (const Path& p : evs) out[p.ev] = kNever;
    for (auto& [host, e] : events)
      if (host == h && e.type == EventType::kEvState && e.to == uint8_t(to) && e.at >= from)
        if (auto it = out.find(e.ev); it != out.end()) it->second = std::min(it->second, e.at);
    return out;
  }

  Time now() { return tb.net().now(); }

  Testbed tb;
  std::unique_ptr<Fabric> fab;
  std::vector<Testbed::QpPair> pairs;
  std::vector<std::unique_ptr<BulkWrite>> streams;
  std::vector<std::unique_ptr<GoodputMeter>> meters;
  std::vector<std::pair<PeerId, Event>> events;
};

/// Goodput of the healthy run, measured once over the same window as the faults use.
double healthy_bps() {
  static const double bps = [] {
    FaultRun r;
    r.stream(0, 1);
    auto& m = r.meter(0, 1);
    r.run_until(Time{200ms});
    r.expect_clean();
    return m.rate_bps(Time{20ms}, Time{200ms});
  }();
  return bps;
}

/// First time from `from` on at which goodput over `window` is back to `frac` of healthy.
Time recovered_at(const GoodputMeter& m, Time from, Time to, double frac, Duration window = 10ms) {
  for (Time t = from; t + window <= to; t += kMeterInterval)
    if (m.rate_bps(t, t + window) >= frac * healthy_bps()) return t;
  return kNever;
}

void figures(const char* name, const std::string& line) {
  std::printf("FIGURES %-22s %s\n", name, line.c_str());
  ::testing::Test::RecordProperty(name, line);
}

/// The figures of an incast whose QP i sends from host i and is metered by ms[i]: each QP's
/// goodput over [from, end) (bits/s), their sum and Jain's index, and the senders' RTOs.
struct IncastShares {
  std::vector<double> rates;
  double total = 0, jain = 0;
  uint64_t rtos = 0;
};
IncastShares incast_shares(FaultRun& r, const std::vector<GoodputMeter*>& ms, Time from, Time end) {
  IncastShares s;
  for (size_t i = 0; i < ms.size(); ++i) {
    s.rates.push_back(ms[i]->rate_bps(from, end));
    s.total += s.rates.back();
    s.rtos += r.tb.engine(i).qp_stats(r.pairs[i].a)->rto_fired;
  }
  s.jain = jain_fairness(s.rates);
  return s;
}

TEST(Multipath, Healthy_GoodputNearAggregate) {
  const double g = healthy_bps();
  figures("healthy", "goodput " + std::to_string(g / 1e9) +
                         " Gb/s = " + std::to_string(g / kAggregateBps) + " of 4 ports");
  EXPECT_GE(g, 0.92 * kAggregateBps);
}

TEST(Multipath, T0Down_ThreeQuartersThenFullAgain) {
  FaultRun r;
  r.stream(0, 1);
  auto& m = r.meter(0, 1);
  const Time down{100ms}, up{400ms}, end{600ms};
  r.tb.net().at(down, [&] { r.fab->t0_down(3, r.fab->t0_of(0)); });
  r.tb.net().at(up, [&] { r.fab->t0_up(3, r.fab->t0_of(0)); });
  r.run_until(end);
  r.expect_clean();
  const double during = m.min_rate_bps(down + 10ms, up, 10ms);
  const Time back = recovered_at(m, up, end, 0.95);
  const auto bad = r.ev_events(0, EvState::kAssumedBad, down);
  ASSERT_FALSE(bad.empty());
  for (auto& e : bad) EXPECT_EQ(e.plane, 3) << Fabric::describe(e.ev);
  // Every plane-3 EV of the QP goes bad after the fault and GOOD again after the repair:
  // detect and reint are the last of them.
  std::vector<Path> plane3;
  for (const Path& p : r.fab->paths(0, 1, 16))
    if (p.plane == 3) plane3.push_back(p);
  ASSERT_EQ(plane3.size(), 16u);
  Time detect{0}, reint{0};
  for (auto [ev, at] : r.first_change(0, plane3, EvState::kAssumedBad, down)) {
    EXPECT_LT(at, up) << Fabric::describe(ev) << " never went bad while its T0 was down";
    detect = std::max(detect, at);
  }
  for (auto [ev, at] : r.first_change(0, plane3, EvState::kGood, up)) {
    EXPECT_LT(at, end) << Fabric::describe(ev) << " not GOOD again after the repair";
    reint = std::max(reint, at);
  }
  EXPECT_LE(detect - down, 5ms);
  EXPECT_LE(reint - up, 100ms);
  figures("t0_down", "min 10ms goodput during " + std::to_string(during / healthy_bps()) +
                         " of healthy; all plane-3 EVs bad after " +
                         std::to_string(ms(detect - down)) + " ms; GOOD again " +
                         std::to_string(ms(reint - up)) +
                         " ms after repair; first 10ms window at >= 0.95 of healthy starts " +
                         std::to_string(ms(back - up)) + " ms after repair");
  EXPECT_GE(during, 0.95 * 0.75 * healthy_bps());
  EXPECT_LE(back - up, 1s);
  EXPECT_FALSE(r.fab->t0_count() == 0);
}

TEST(Multipath, T1FailRestore_NoStallNoDip) {
  FaultRun r;
  r.stream(0, 1);
  auto& m = r.meter(0, 1);
  const Time fail{100ms}, restore{300ms}, end{500ms};
  r.tb.net().at(fail, [&] { r.fab->t1_down(1, 2); });
  r.tb.net().at(restore, [&] { r.fab->t1_up(1, 2); });
  r.run_until(end);
  r.expect_clean();
  const Duration stall = m.longest_stall(Time{2ms}, end);
  const double g = m.rate_bps(Time{20ms}, end);
  const double dip = m.min_rate_bps(fail, fail + 10ms, 1ms);
  // Every EV that went bad (they all cross the failed spine) is GOOD again after the restore.
  std::vector<Path> went_bad;
  for (auto& e : r.ev_events(0, EvState::kAssumedBad, fail))
    went_bad.push_back(Path{e.ev, e.plane});
  ASSERT_FALSE(went_bad.empty()) << "no EV noticed the failed spine";
  Time reint{0};
  for (auto [ev, at] : r.first_change(0, went_bad, EvState::kGood, restore)) {
    EXPECT_LT(at, end) << Fabric::describe(ev) << " not GOOD again after the restore";
    reint = std::max(reint, at);
  }
  EXPECT_LE(reint - restore, 100ms);
  figures("t1_fail_restore",
          "goodput " + std::to_string(g / healthy_bps()) + " of healthy; worst 1ms after fault " +
              std::to_string(dip / healthy_bps()) + "; longest stall " + std::to_string(ms(stall)) +
              " ms; reintegrated " + std::to_string(ms(reint - restore)) + " ms after restore");
  EXPECT_EQ(stall, Duration{0});
  EXPECT_GE(g, 0.97 * healthy_bps());
  for (auto& e : r.ev_events(0, EvState::kAssumedBad, fail)) {
    EXPECT_EQ(e.plane, 1) << Fabric::describe(e.ev) << " at " << seconds(e.at) << " reason "
                          << to_string(EvReason(e.reason));
    EXPECT_EQ(Fabric::spine_of(e.ev), 2u) << Fabric::describe(e.ev) << " at " << seconds(e.at)
                                          << " reason " << to_string(EvReason(e.reason));
  }
}

TEST(Multipath, LinkFlap200ms_GoodputHolds) {
  FaultRun r;
  r.stream(0, 1);
  auto& m = r.meter(0, 1);
  const Time start{50ms}, stop{1050ms}, end{1100ms};
  r.tb.net().at(start, [&] { r.fab->flap(LinkRef::uplink(0, r.fab->t0_of(0), 1), 200ms, stop); });
  r.run_until(end);
  r.expect_clean();
  const double g = m.rate_bps(start, stop);
  figures("flap_200ms",
          "goodput " + std::to_string(g / healthy_bps()) + " of healthy over 1 s of flapping");
  EXPECT_GE(g, 0.95 * healthy_bps());
}

TEST(Multipath, T1Blackhole_FoundInMsAndRoutedAround) {
  FaultRun r;
  r.stream(0, 1);
  auto& m = r.meter(0, 1);
  const Time fault{100ms}, restore{200ms}, end{300ms};
  std::set<uint32_t> its_paths;
  for (const Path& p : r.fab->paths(0, 1, 16))
    if (p.plane == 2 && Fabric::spine_of(p.ev) == 3) its_paths.insert(p.ev);
  r.tb.net().at(fault, [&] { r.fab->blackhole_t1(2, 3, true); });
  r.tb.net().at(restore, [&] { r.fab->blackhole_t1(2, 3, false); });
  r.run_until(end);
  r.expect_clean();
  std::map<uint32_t, Time> bad_at;
  for (auto& e : r.ev_events(0, EvState::kAssumedBad, fault)) {
    EXPECT_EQ(e.plane, 2) << Fabric::describe(e.ev);
    EXPECT_EQ(Fabric::spine_of(e.ev), 3u) << Fabric::describe(e.ev);
    EXPECT_TRUE(e.reason == uint8_t(EvReason::kLoss) || e.reason == uint8_t(EvReason::kTimeout));
    if (!bad_at.count(e.ev)) bad_at[e.ev] = e.at;
  }
  Time detect{0};
  for (uint32_t ev : its_paths) {
    ASSERT_TRUE(bad_at.count(ev)) << Fabric::describe(ev) << " never declared bad";
    detect = std::max(detect, bad_at[ev]);
  }
  std::vector<Path> went_bad;
  for (auto [ev, at] : bad_at) went_bad.push_back(Path{ev, Fabric::plane_of(ev)});
  Time reint{0};
  for (auto [ev, at] : r.first_change(0, went_bad, EvState::kGood, restore)) {
    EXPECT_LT(at, end) << Fabric::describe(ev) << " not GOOD again after the restore";
    reint = std::max(reint, at);
  }
  const double after = m.min_rate_bps(fault + 10ms, restore, 10ms);
  figures("t1_blackhole", "all " + std::to_string(its_paths.size()) + " paths bad after " +
                              std::to_string(ms(detect - fault)) +
                              " ms; min 10ms goodput from +10ms " +
                              std::to_string(after / healthy_bps()) + " of healthy; reintegrated " +
                              std::to_string(ms(reint - restore)) + " ms after restore");
  EXPECT_LE(detect - fault, 5ms);
  EXPECT_GE(after, 0.95 * healthy_bps());
  EXPECT_LE(reint - restore, 100ms);
}

TEST(Multipath, OnePercentLossOnOneLink_GoodputHolds) {
  FaultRun r;
  r.stream(0, 1);
  auto& m = r.meter(0, 1);
  r.fab->loss(LinkRef::uplink(2, r.fab->t0_of(0), 0), 0.01);
  r.run_until(Time{300ms});
  r.expect_clean();
  const double g = m.rate_bps(Time{20ms}, Time{300ms});
  uint64_t retx = r.tb.engine(0).qp_stats(r.pairs[0].a)->tx_retransmits;
  figures("loss_1pct_one_link", "goodput " + std::to_string(g / healthy_bps()) + " of healthy; " +
                                    std::to_string(retx) + " retransmits");
  EXPECT_GE(g, 0.95 * healthy_bps());
}

// A gray failure: the receiver's port on plane 0 keeps working at a tenth of its rate,
// as a policer or a port that negotiated down would (tail drop, no ECN, no trimming:
// nothing marks). The stream can have 3 ports + a tenth: 0.775 of the four.
TEST(Multipath, DegradedHostPort_CostsOnlyItsShare) {
  FaultRun r;
  r.stream(0, 1);
  auto& m = r.meter(0, 1);
  r.run_until(Time{20ms});
  for (LinkId l : r.fab->links(LinkRef::host_port(1, 0, Dir::kDown))) {
    LinkConfig c = r.tb.net().link_config(l);
    c.rate_bps = kPortBps / 10;
    c.capacity_bytes = 64 << 10;
    c.ecn_threshold_bytes = c.trim_threshold_bytes = kUnlimited;
    r.tb.net().set_link_config(l, c);
  }
  r.run_until(Time{220ms});
  r.expect_clean();
  const double g = m.rate_bps(Time{70ms}, Time{220ms});
  const double ideal = 3.1 * kPortBps;
  const uint64_t on0 = [&] {
    const PathSet* ps = r.tb.engine(0).paths(r.pairs[0].a);
    const auto st = r.tb.engine(0).path_stats(r.pairs[0].a);
    uint64_t n = 0;
    for (size_t i = 0; i < ps->size(); ++i)
      if (ps->ev(i).path.plane == 0) n += st[i].tx_packets;
    return n;
  }();
  const uint64_t sent = r.tb.engine(0).qp_stats(r.pairs[0].a)->tx_data_packets;
  figures("degraded_host_port", "goodput " + std::to_string(g / ideal) + " of 3.1 ports; plane 0 " +
                                    std::to_string(double(on0) / double(sent)) + " of packets");
  EXPECT_GE(g, 0.9 * ideal) << "the slow port took more than its share";
}

TEST(Multipath, Incast8To1WithTrimming_NoTimeoutsFairAndFull) {
  FaultRun r(9);
  for (PeerId s = 0; s < 8; ++s) r.stream(s, 8);
  std::vector<GoodputMeter*> ms_;
  for (size_t i = 0; i < 8; ++i) ms_.push_back(&r.meter(i, 8));
  const Time from{50ms}, end{300ms};
  r.run_until(end);
  r.expect_clean();
  const IncastShares sh = incast_shares(r, ms_, from, end);
  uint64_t trims = 0;
  for (size_t i = 0; i < 8; ++i)
    for (auto& p : r.tb.engine(i).path_stats(r.pairs[i].a)) trims += p.trims;
  figures("incast_8to1", "bottleneck goodput " + std::to_string(sh.total / kAggregateBps) +
                             " of its rate; Jain " + std::to_string(sh.jain) + "; " +
                             std::to_string(trims) + " trims; " + std::to_string(sh.rtos) +
                             " RTOs");
  EXPECT_EQ(sh.rtos, 0u);
  EXPECT_GE(sh.total, 0.9 * kAggregateBps);
  EXPECT_GE(sh.jain, 0.95);
}

// The same incast on a fabric whose switches mark no ECN and trim nothing: drop-tail queues of
// 128 KiB. The QPs' windows (1.5 x 40 Gb/s x 20 us each) add up to ~300 KB per port of the
// receiver, more than its queues hold: without NSCC's delay-based decrease (nscc.h) fair
// increase keeps them at that ceiling and the queues overflow every round trip. With it the
// queues stand near the target delay: no drop once the first round trips are over, the port
// stays full, and the QPs share it.
TEST(Multipath, Incast8To1DropTailNoEcn_NoStandingQueueFairAndFull) {
  FaultRun r(9);
  SimNet& net = r.tb.net();
  for (LinkId l = 0; l < net.link_count(); ++l) {
    LinkConfig c = net.link_config(l);
    c.ecn_threshold_bytes = c.trim_threshold_bytes = kUnlimited;
    if (c.capacity_bytes != kUnlimited) c.capacity_bytes = 128 << 10;
    net.set_link_config(l, c);
  }
  for (PeerId s = 0; s < 8; ++s) r.stream(s, 8);
  std::vector<GoodputMeter*> ms_;
  for (size_t i = 0; i < 8; ++i) ms_.push_back(&r.meter(i, 8));
  const auto drops = [&] {
    uint64_t n = 0;
    for (LinkId l = 0; l < net.link_count(); ++l) n += net.link_stats(l).dropped_queue;
    return n;
  };
  const Time from{50ms}, end{300ms};
  r.run_until(from);
  const uint64_t drops_before = drops();
  r.run_until(end);
  r.expect_clean();
  std::vector<double> rates;
  double total = 0;
  uint64_t rtos = 0, retx = 0, sent = 0, cuts = 0;
  for (size_t i = 0; i < 8; ++i) {
    rates.push_back(ms_[i]->rate_bps(from, end));
    total += rates.back();
    const QpStats* st = r.tb.engine(i).qp_stats(r.pairs[i].a);
    rtos += st->rto_fired;
    retx += st->tx_retransmits;
    sent += st->tx_data_packets;
    cuts += r.tb.engine(i).cc_stats(r.pairs[i].a)->delay_decreases;
  }
  const uint64_t late_drops = drops() - drops_before;
  const double jain = jain_fairness(rates);
  figures("incast_8to1_droptail",
          "bottleneck goodput " + std::to_string(total / kAggregateBps) + " of its rate; Jain " +
              std::to_string(jain) + "; drops " + std::to_string(drops_before) + " before 50 ms, " +
              std::to_string(late_drops) + " after; " + std::to_string(retx) + " of " +
              std::to_string(sent) + " packets resent; " + std::to_string(cuts) +
              " delay decreases; " + std::to_string(rtos) + " RTOs");
  EXPECT_EQ(rtos, 0u);
  EXPECT_LE(late_drops, sent / 1000);
  EXPECT_LE(retx, sent / 100);
  EXPECT_GE(total, 0.9 * kAggregateBps);
  EXPECT_GE(jain, 0.95);
  EXPECT_GT(cuts, 0u);
}

// An incast's first round trips. QPs that start together put their first windows (UEC MaxWnd:
// 1.5 x 40 Gb/s x base RTT) on the receiver's 4 ports, which trim above 40 KiB. With a base RTT
// of 40 us, twice the bare round trip (as mrc-sim sets it, and as a base learned on a software
// datapath is: the minimum plus the driver's send burst), a window of 300,000 bytes takes 60 us
// to leave at line rate, and the first trims come back after about 27 us. Each QP then cuts its
// window to what it has in flight (nscc.h "Start") instead of sending the rest into the full
// queue. Without that rule this run trimmed 540 packets in its first 4 base RTTs (1,640 in
// all), with it 362 (1,486). With the base RTT at the bare round trip (20 us) the window is
// nearly out when the first trim comes back, and the rule changes little (228 -> 223).
TEST(Multipath, Incast8To1_FirstTrimEndsTheStart) {
  FaultRun r(9, 1, 40us);
  SimNet& net = r.tb.net();
  for (PeerId s = 0; s < 8; ++s) r.stream(s, 8);
  EXPECT_EQ(r.tb.engine(0).cc_stats(r.pairs[0].a)->cwnd, 300'000u);
  std::vector<GoodputMeter*> ms_;
  for (size_t i = 0; i < 8; ++i) ms_.push_back(&r.meter(i, 8));
  const auto trimmed = [&] {
    uint64_t n = 0;
    for (LinkId l = 0; l < net.link_count(); ++l) n += net.link_stats(l).trimmed;
    return n;
  };
  r.run_until(Time{160us});  // 4 base RTTs
  const uint64_t first = trimmed();
  const Time from{5ms}, end{30ms};
  r.run_until(end);
  r.expect_clean();
  const IncastShares sh = incast_shares(r, ms_, from, end);
  uint64_t exits = 0;
  for (size_t i = 0; i < 8; ++i) exits += r.tb.engine(i).cc_stats(r.pairs[i].a)->start_exits;
  figures("incast_8to1_first_rtts",
          "trimmed in the first 4 base RTTs " + std::to_string(first) + ", in all " +
              std::to_string(trimmed()) + "; " + std::to_string(exits) +
              " starts ended by a trim; bottleneck goodput after 5 ms " +
              std::to_string(sh.total / kAggregateBps) + "; Jain " + std::to_string(sh.jain) +
              "; " + std::to_string(sh.rtos) + " RTOs");
  EXPECT_EQ(exits, 8u);  // each QP's first window was cut short, once
  EXPECT_LT(first, 540u * 8 / 10);
  EXPECT_EQ(sh.rtos, 0u);
  EXPECT_GE(sh.total, 0.9 * kAggregateBps);
  EXPECT_GE(sh.jain, 0.95);
}

}  // namespace
}  // namespace mrc
