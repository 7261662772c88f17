// The fault runs of DESIGN.md section 6 on the namespace fabric: real kernel SRv6 forwarding,
// real faults, the real UDP datapath. Each run streams verified RDMA WRITEs from host 0 to
// host 1 for a few seconds while one fault comes and goes; every byte must arrive intact,
// no completion may fail, and the engine must notice the fault where the fault is visible
// to it. Skips (saying why) where namespaces cannot be made.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <regex>

#include "command.h"
#include "gray.h"
#include "mrc/common/netns.h"
#include "ns_handle.h"
#include "ns_test_fabric.h"
#include "report.h"

namespace mrc::perf {
namespace {

class NsFaultRuns : public NsFabricSuite<NsFaultRuns> {
 public:
  // No host GSO: the trimming run needs packets, not GSO runs, at the trimming port.
  static constexpr TestFabricSpec kFabric{"mrct", 2, /*gso=*/false};

 protected:
  // A 2.5 s WRITE run with `fault` at 0.6 s and `repair` at 1.6 s.
  // `before_repair`, if given, runs (on the session's thread) just before the repair is
  // applied: the place to read what the fault did while it lasted.
  SessionResult run(const std::string& fault, const std::string& repair, bool trimming = false,
                    std::function<void()> before_repair = {}) {
    FabricHandle h = fabric_handle(*fab_);
    if (before_repair) {
      h.apply_fault = [apply = h.apply_fault, repair, before_repair](const std::string& text) {
        if (text == repair) before_repair();
        return apply(text);
      };
    }
    SessionOptions o;
    o.msg_bytes = 256 << 10;
    o.duration_s = 2.5;
    o.quiet = true;
    o.trimming = trimming;
    o.faults = {{0.6, fault}, {1.6, repair}};
    auto r = run_session(h, o);
    EXPECT_TRUE(r.ok()) << r.error();
    if (!r.ok()) return {};
    SessionResult s = std::move(r).value();
    EXPECT_TRUE(s.data_ok) << s.first_error;
    EXPECT_TRUE(s.mrc.has_value());
    if (s.mrc) {
      EXPECT_GT(s.mrc->messages, 20u) << "the stream hardly moved";
      EXPECT_EQ(s.mrc->mismatches, 0u);
      EXPECT_EQ(s.mrc->errors, 0u) << s.mrc->first_error;
    }
    for (const FaultMark& m : s.series.at(0).faults) EXPECT_EQ(m.error, "") << m.fault;
    EXPECT_EQ(s.series.at(0).faults.size(), 2u);
    return s;
  }

  // EVs of `plane` (and spine, if given) that were not GOOD at some time while the fault
  // lasted (0.6 s to 1.6 s): declared bad then, or still bad from before (on a loaded CI
  // machine, losses before the fault may already have taken an EV out).
  static size_t bad_evs(const SessionResult& s, uint32_t plane, int spine = -1) {
    std::map<uint32_t, bool> bad_at_fault, bad_during;
    for (const PathEvent& e : s.series.at(0).path_events) {
      const bool match = e.plane == plane && (spine < 0 || srv6::Fabric::spine_of(e.ev) ==
                                                               static_cast<uint32_t>(spine));
      if (!match) continue;
      if (e.t_s < 0.6) bad_at_fault[e.ev] = e.to != "GOOD";
      if (e.t_s >= 0.6 && e.t_s < 1.6 && e.to != "GOOD") bad_during[e.ev] = true;
    }
    for (const auto& [ev, bad] : bad_at_fault)
      if (bad) bad_during[ev] = true;
    return bad_during.size();
  }

  // The gray program's counters on switch `s`'s port towards switch index `peer` (zero if
  // none is attached).
  static nsfabric::GrayCounters gray_towards(srv6::SwitchId s, uint32_t peer) {
    for (const srv6::Port& p : fab_->fabric().ports(s)) {
      if (p.to_host || p.peer != peer) continue;
      auto c = nsfabric::gray_counters(fab_->switch_netns(s), p.ifname);
      if (c) return *c;
    }
    return {};
  }

  // Host h's port on `plane` at its T0: (namespace, interface).
  static std::pair<std::string, std::string> t0_port(uint32_t h, uint32_t plane) {
    const srv6::SwitchId t0{srv6::Tier::kT0, plane, fab_->fabric().t0_of(h)};
    for (const srv6::Port& p : fab_->fabric().ports(t0)) {
      if (p.to_host && p.peer == h) return {fab_->switch_netns(t0), p.ifname};
    }
    return {};
  }

  // After a repair: no delay line process of `pids` left, no delay line veth (dl<port>) in
  // namespace `ns`.
  static void expect_lines_gone(const std::vector<int>& pids, const std::string& ns) {
    for (int pid : pids) {
      EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(pid))) << "delay line " << pid;
    }
    auto links = nsfabric::run_command({"ip", "-o", "-n", ns, "link", "show"});
    ASSERT_TRUE(links.ok()) << links.error();
    EXPECT_EQ(links->find(": dl"), std::string::npos) << *links;
  }

  // Goodput while the fault lasted (0.6 s to 1.6 s) as a share of healthy.
  static double during_share(const SessionResult& s) {
    if (s.series.empty()) return 0;
    const Summary sum = summarize(s.series.at(0));
    if (sum.phases.size() < 2 || sum.healthy_gbps <= 0) return 0;
    return sum.phases[1].mean_gbps / sum.healthy_gbps;
  }
};

TEST_F(NsFaultRuns, T0DownAndUp) {
  auto s = run("down t0 h0 p1", "up t0 h0 p1");
  ASSERT_TRUE(s.mrc.has_value());
  // Host 0's plane-1 port loses its link with the T0: its driver sees that (and its peer
  // learns it from ports_down; the plane is held, no EV blamed: docs/engine.md). Where the
  // driver cannot watch the port, the EVs of the plane are found bad by loss.
  const uint64_t links =
      s.mrc->client_counters.port_link_changes + s.mrc->server_counters.port_link_changes;
  EXPECT_TRUE(links >= 2 || bad_evs(s, 1) >= 1)
      << "the engine never noticed plane 1 going away (link changes " << links << ")";
}

TEST_F(NsFaultRuns, T1FailAndRestore) {
  auto s = run("down t1 p0 s1", "up t1 p0 s1");
  EXPECT_GE(bad_evs(s, 0, 1), 1u) << "spine 1 of plane 0 was never declared bad";
}

TEST_F(NsFaultRuns, LinkFlap) { run("flap link p1 t0 s0 100", "unflap link p1 t0 s0"); }

TEST_F(NsFaultRuns, T1SilentBlackhole) {
  auto s = run("blackhole t1 p1 s0", "unblackhole t1 p1 s0");
  EXPECT_GE(bad_evs(s, 1, 0), 1u) << "the blackholed spine was never declared bad";
}

TEST_F(NsFaultRuns, RandomLossOnALink) {
  auto s = run("loss link p0 t0 s0 1", "loss link p0 t0 s0 0");
  ASSERT_TRUE(s.mrc.has_value());
  EXPECT_GT(s.mrc->retransmits, 0u) << "1% loss but nothing was resent";
}

TEST_F(NsFaultRuns, TrimmingAtTheReceiverPort) {
  // The receiver's T0 port on plane 0 trims as if it ran at half the port rate.
  auto s = run("trim link h1 p0 0.5 32", "untrim link h1 p0", /*trimming=*/true);
  ASSERT_TRUE(s.mrc.has_value());
  EXPECT_GT(s.mrc->trims_seen, 0u) << "no packet was trimmed";
}

// Gray failures: the link stays up and the stream must go on, every byte verified. Floors
// are loose (a loaded CI machine); one plane of two keeps the full rate in each.

TEST_F(NsFaultRuns, DegradedHostLink) {
  // The receiver's port on plane 0 drops to a tenth of its rate: about 0.55 of healthy.
  const auto [ns, port] = t0_port(1, 0);
  std::string qdisc;
  auto s = run("degrade link h1 p0 0.1", "degrade link h1 p0 0", false, [&, ns = ns, port = port] {
    auto q = nsfabric::run_command({"tc", "-n", ns, "qdisc", "show", "dev", port});
    qdisc = q ? *q : q.error();
  });
  EXPECT_NE(qdisc.find("rate 100Mbit"), std::string::npos) << "not degraded: " << qdisc;
  const double share = during_share(s);
  std::printf("FIGURES degraded_host_link during %.3f of healthy\n", share);
  // The sprayer balances the planes by packets in flight, so the slow port gets only what it
  // delivers (without that: 0.27-0.33 on a loaded machine, where this floor failed in CI).
  // Above the ports' 1.1 Gbit/s the fault did not hold (a relative bound would fail where
  // the machine is so loaded that healthy is itself near 1.1).
  ASSERT_FALSE(s.series.empty());
  const Summary sum = summarize(s.series.at(0));
  ASSERT_GE(sum.phases.size(), 2u);
  EXPECT_LT(sum.phases[1].mean_gbps, 1.15 * kFabric.port_gbps) << "the port was not degraded";
#ifndef MRC_TEST_ASAN
  EXPECT_GT(share, 0.35) << "a degraded plane took down more than its share";
#else
  // Under ASan the stream is CPU-bound below the degraded ports' rate: nothing to slow, and
  // its share swings with the load.
  EXPECT_GT(share, 0.2) << "a degraded plane took down more than its share";  // 0.29 seen
#endif
}

TEST_F(NsFaultRuns, DelayedUplink) {
  const srv6::SwitchId t0{srv6::Tier::kT0, 0, 0}, s0{srv6::Tier::kT1, 0, 0};
  nsfabric::GrayCounters at_t0, at_s0;
  std::vector<int> lines;
  auto s = run("delay link p0 t0 s0 2000", "delay link p0 t0 s0 0", false, [&] {
    at_t0 = gray_towards(t0, 0);
    at_s0 = gray_towards(s0, 0);
    lines = fab_->delay_lines();
  });
  EXPECT_GT(during_share(s), 0.3) << "2 ms more on one path of four stalled the stream";
  // Data goes up through the T0's port, ACKs come back down through the spine's.
  EXPECT_GT(at_t0.held, 100u) << "the data was never delayed";
  EXPECT_GT(at_s0.held, 10u) << "the ACKs were never delayed";
  EXPECT_EQ(lines.size(), 2u) << "a delay line per end";
  expect_lines_gone(lines, fab_->switch_netns(t0));
  expect_lines_gone({}, fab_->switch_netns(s0));
}

TEST_F(NsFaultRuns, CorruptedHostLink_CaughtByCrc) {
  // Zero UDP checksums (trimming mode): the flipped bits reach MRC, whose CRCs drop them.
  auto s = run("corrupt link h1 p0 1", "corrupt link h1 p0 0", /*trimming=*/true);
  ASSERT_TRUE(s.mrc.has_value());
  EXPECT_GT(s.mrc->crc_errors, 0u) << "no corrupted packet was caught";
  EXPECT_GT(s.mrc->retransmits, 0u) << "corrupted packets were not resent";
  EXPECT_GT(during_share(s), 0.3);
}

TEST_F(NsFaultRuns, ReorderedHostLink) {
  const auto [ns, port] = t0_port(1, 0);
  nsfabric::GrayCounters c;
  std::vector<int> lines;
  auto s =
      run("reorder link h1 p0 10 500", "reorder link h1 p0 0", false, [&, ns = ns, port = port] {
        auto r = nsfabric::gray_counters(ns, port);
        if (r) c = *r;
        lines = fab_->delay_lines();
      });
  EXPECT_GT(during_share(s), 0.3) << "reordering is not loss, but the stream slowed as if";
  EXPECT_GT(c.held, 10u) << "no packet to host 1 was held back";
  EXPECT_LT(c.held, c.packets / 4) << "far more than 10% held";
  EXPECT_EQ(lines.size(), 2u) << "a delay line per end";
  expect_lines_gone(lines, ns);
}

TEST_F(NsFaultRuns, LostAcksOnly) {
  // Host 1 receives: "up" from it carries only its ACKs on plane 0.
  // The loss is an nft rule with a counter where host 1's T0 forwards what host 1 sent.
  const std::string ns = t0_port(1, 0).first;
  std::string rules;
  auto s = run("loss link h1 p0 10 up", "loss link h1 p0 0 up", false, [&] {
    auto r = nsfabric::run_command({"ip", "netns", "exec", ns, "nft", "list", "ruleset"});
    rules = r ? *r : r.error();
  });
  std::smatch m;
  ASSERT_TRUE(std::regex_search(rules, m, std::regex("counter packets ([0-9]+) .*loss link h1")))
      << "the ACK loss was not in force: " << rules;
  EXPECT_GT(std::stoull(m[1]), 10u) << "no ACK was lost: " << rules;
  EXPECT_GT(during_share(s), 0.3) << "lost ACKs on one plane stalled the stream";
}

TEST_F(NsFaultRuns, LostDataOnly) {
  auto s = run("loss link h1 p0 10 down", "loss link h1 p0 0 down");
  ASSERT_TRUE(s.mrc.has_value());
  EXPECT_GT(s.mrc->retransmits, 0u) << "10% of plane 0's data lost but nothing was resent";
  // EVs of plane 0 go bad and come back by turns (measured 0.18-0.45 with 30% under load 11).
  EXPECT_GT(during_share(s), 0.2);
}

TEST_F(NsFaultRuns, OneWayBlackholeOfData) {
  auto s = run("blackhole link h1 p0 down", "unblackhole link h1 p0 down");
  EXPECT_GE(bad_evs(s, 0), 1u) << "plane 0 lost all data but no EV was declared bad";
  // A whole plane of two is gone for data (0.5 at best), and every EV of it must be found bad
  // one by one: measured 0.29-0.45 on a loaded machine.
  EXPECT_GT(during_share(s), 0.2);
}

}  // namespace
}  // namespace mrc::perf
