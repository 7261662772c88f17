// Tests of the simulated two-tier multi-plane fabric, with scripted fake hosts (no engine).
// Threading: single-threaded tests.
#include "mrc/io/sim/fabric.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "mrc/wire/wire.h"

namespace mrc::sim {
namespace {

using namespace std::chrono_literals;

// A scripted host. Each datagram it sends is `size` bytes: byte 0 version, byte 1
// kind, byte 3 net_flags (as a CommonHeader), then the EV and a sequence number,
// so the receiver can tell which path carried it.
class FakeHost : public Node {
 public:
  struct Arrival {
    Time t;
    engine::RxInfo rx;
    uint32_t ev = 0;
    uint32_t seq = 0;
    size_t size = 0;
    uint8_t net_flags = 0;
  };

  void send_at(Time at, PeerId peer, engine::Path path, size_t size = 1000,
               wire::Kind kind = wire::Kind::kWrite) {
    auto it = std::upper_bound(out_.begin(), out_.end(), at,
                               [](Time t, const Out& o) { return t < o.at; });
    out_.insert(it, Out{at, peer, path, size, kind, next_seq_++});
  }

  void on_datagram(Time now, const engine::RxInfo& rx, std::span<const uint8_t> b) override {
    Arrival a{now, rx, 0, 0, b.size(), b.size() > 3 ? b[3] : uint8_t{0}};
    if (b.size() >= 12) {
      std::memcpy(&a.ev, &b[4], 4);
      std::memcpy(&a.seq, &b[8], 4);
    }
    rx_.push_back(a);
  }
  void on_timeout(Time) override {}
  std::optional<engine::Transmit> poll_transmit(Time now, std::span<uint8_t> buf) override {
    if (out_.empty() || out_.front().at > now) return std::nullopt;
    const Out o = out_.front();
    out_.pop_front();
    std::memset(buf.data(), 0, o.size);
    buf[0] = wire::kVersion;
    buf[1] = static_cast<uint8_t>(o.kind);
    std::memcpy(&buf[4], &o.path.ev, 4);
    std::memcpy(&buf[8], &o.seq, 4);
    engine::Transmit t;
    t.peer = o.peer;
    t.path = o.path;
    t.header_len = o.size;  // all in the driver's buffer
    return t;
  }
  Time next_deadline() const override { return out_.empty() ? engine::kNever : out_.front().at; }

  const std::vector<Arrival>& rx() const { return rx_; }
  size_t count_ev(uint32_t ev) const {
    return static_cast<size_t>(
        std::count_if(rx_.begin(), rx_.end(), [&](const Arrival& a) { return a.ev == ev; }));
  }

 private:
  struct Out {
    Time at;
    PeerId peer;
    engine::Path path;
    size_t size;
    wire::Kind kind;
    uint32_t seq;
  };
  std::deque<Out> out_;
  std::vector<Arrival> rx_;
  uint32_t next_seq_ = 0;
};

// Fake hosts on a SimNet with a Fabric over them. Hosts are declared before the net
// (they must outlive it).
struct World {
  explicit World(FabricConfig c) : hosts(make_hosts(c.hosts)) {
    for (auto& h : hosts) net.add_host(h.get());
    fabric = std::make_unique<Fabric>(net, c);
  }
  static std::vector<std::unique_ptr<FakeHost>> make_hosts(uint32_t n) {
    std::vector<std::unique_ptr<FakeHost>> v;
    for (uint32_t i = 0; i < n; ++i) v.push_back(std::make_unique<FakeHost>());
    return v;
  }
  FakeHost& host(PeerId h) { return *hosts[h]; }
  // One datagram on every path, at time t.
  void send_all(PeerId src, PeerId dst, std::span<const engine::Path> paths, Time t) {
    for (const auto& p : paths) host(src).send_at(t, dst, p);
    net.wake(src);
  }

  std::vector<std::unique_ptr<FakeHost>> hosts;
  SimNet net;
  std::unique_ptr<Fabric> fabric;
};

// 4 hosts, 2 per T0, 2 planes, 4 spines.
FabricConfig small() {
  FabricConfig c;
  c.hosts = 4;
  c.hosts_per_t0 = 2;
  c.planes = 2;
  c.spines = 4;
  return c;
}

TEST(Fabric, Paths_SpreadEvenlyAndUnique) {
  FabricConfig c;
  c.hosts = 2;
  c.planes = 4;
  c.spines = 4;
  World w(c);
  const Fabric& f = *w.fabric;
  const auto ps = f.paths(0, 1, 8);
  ASSERT_EQ(ps.size(), 32u);
  std::set<uint32_t> evs;
  std::map<std::pair<uint16_t, uint32_t>, int> per_spine;
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(ps[i].plane, i % 4) << "consecutive paths alternate planes";
    EXPECT_EQ(Fabric::plane_of(ps[i].ev), ps[i].plane);
    evs.insert(ps[i].ev);
    ++per_spine[{ps[i].plane, Fabric::spine_of(ps[i].ev)}];
  }
  EXPECT_EQ(evs.size(), 32u);
  ASSERT_EQ(per_spine.size(), 16u);
  for (const auto& [k, n] : per_spine) EXPECT_EQ(n, 2);

  // Not a multiple of S: spines differ by at most one.
  std::map<uint32_t, int> uneven;
  for (const auto& p : f.paths(0, 1, 6)) {
    if (p.plane == 0) ++uneven[Fabric::spine_of(p.ev)];
  }
  EXPECT_EQ(uneven, (std::map<uint32_t, int>{{0, 2}, {1, 2}, {2, 1}, {3, 1}}));

  // Backups never collide with primaries, whatever the salt; salts separate sets.
  for (const auto& p : f.backup_paths(0, 1, 8)) {
    EXPECT_EQ(evs.count(p.ev), 0u);
    EXPECT_GE(Fabric::salt_of(p.ev), Fabric::kBackupSalt);
  }
  for (const auto& p : f.paths(0, 1, 4, 2)) EXPECT_EQ(evs.count(p.ev), 0u);
  EXPECT_THROW((void)f.paths(0, 1, 4 * 128 + 1), std::invalid_argument);
  EXPECT_THROW((void)f.backup_paths(0, 1, 4, 128), std::invalid_argument);
  EXPECT_THROW((void)f.paths(0, 2, 1), std::out_of_range);

  EXPECT_EQ(Fabric::ev(2, 3, 1), 0x20301u);
  EXPECT_EQ(Fabric::describe(Fabric::ev(2, 3, 1)), "plane 2 spine 3 #1");
}

TEST(Fabric, Route_FollowsEvSpine) {
  World w(small());
  Fabric& f = *w.fabric;
  // h0 (T0 0) -> h2 (T0 1): one datagram per (plane, spine), plus spine 1 of plane 1 twice.
  auto ps = f.paths(0, 2, 4);
  ps.push_back(engine::Path{Fabric::ev(1, 1, 7), 1});
  w.send_all(0, 2, ps, Time{0});
  w.net.run_until(Time{1ms});
  ASSERT_EQ(w.host(2).rx().size(), ps.size());
  for (uint16_t p = 0; p < 2; ++p) {
    for (uint32_t s = 0; s < 4; ++s) {
      const uint64_t want = (p == 1 && s == 1) ? 2 : 1;
      EXPECT_EQ(w.net.link_stats(f.link(p, 0, s, Dir::kUp)).delivered, want) << p << " " << s;
      EXPECT_EQ(w.net.link_stats(f.link(p, 1, s, Dir::kDown)).delivered, want) << p << " " << s;
      EXPECT_EQ(w.net.link_stats(f.link(p, 1, s, Dir::kUp)).offered, 0u);
      EXPECT_EQ(w.net.link_stats(f.link(p, 0, s, Dir::kDown)).offered, 0u);
      EXPECT_EQ(f.t1_stats(p, s).delivered, want);
    }
  }
  for (const auto& a : w.host(2).rx()) {
    EXPECT_EQ(a.rx.plane, Fabric::plane_of(a.ev)) << "arrives on the port of its plane";
    EXPECT_FALSE(a.rx.ecn_ce);
    EXPECT_EQ(a.size, 1000u);
  }
  // 4 links of 1 us, each serializing 1000 B at 100 Gb/s (80 ns): the first arrives at 4.32 us.
  EXPECT_EQ(w.host(2).rx().front().t, Time{4 * 1000 + 4 * 80});

  // The reverse direction uses the same EVs through the same spines.
  w.send_all(2, 0, ps, w.net.now());
  w.net.run_for(1ms);
  EXPECT_EQ(w.host(0).rx().size(), ps.size());
  EXPECT_EQ(w.net.link_stats(f.link(1, 1, 1, Dir::kUp)).delivered, 2u);
  EXPECT_EQ(w.net.link_stats(f.link(1, 0, 1, Dir::kDown)).delivered, 2u);
  EXPECT_EQ(w.net.stats().no_route, 0u);
}

TEST(Fabric, Route_SameT0BypassesSpines) {
  World w(small());
  Fabric& f = *w.fabric;
  const auto ps = f.paths(0, 1, 4);
  w.send_all(0, 1, ps, Time{0});
  w.net.run_until(Time{1ms});
  EXPECT_EQ(w.host(1).rx().size(), ps.size());
  for (uint16_t p = 0; p < 2; ++p) {
    for (uint32_t s = 0; s < 4; ++s) {
      EXPECT_EQ(f.t1_stats(p, s).offered, 0u);
      EXPECT_EQ(w.net.link_stats(f.link(p, 0, s, Dir::kUp)).offered, 0u);
    }
    EXPECT_EQ(w.net.link_stats(f.host_link(1, p, Dir::kDown)).delivered, 4u);
  }
  EXPECT_EQ(w.host(1).rx().front().t, Time{2 * 1000 + 2 * 80});
}

TEST(Fabric, Route_NoneToSelfOrUnknownPlane) {
  World w(small());
  w.host(0).send_at(Time{0}, 0, engine::Path{0, 0});
  w.host(0).send_at(Time{0}, 2, engine::Path{0, 2});  // plane 2 of 2
  w.net.wake(0);
  w.net.run_until(Time{1ms});
  EXPECT_EQ(w.net.stats().no_route, 2u);
}

TEST(Fabric, T1Down_DropsOnlyItsPaths) {
  World w(small());
  Fabric& f = *w.fabric;
  const auto ps = f.paths(0, 2, 8);  // 2 EVs per (plane, spine)
  f.t1_down(1, 2);
  w.send_all(0, 2, ps, Time{0});
  w.net.run_until(Time{1ms});
  EXPECT_EQ(w.host(2).rx().size(), ps.size() - 2);
  for (const auto& p : ps) {
    const bool dead = p.plane == 1 && Fabric::spine_of(p.ev) == 2;
    EXPECT_EQ(w.host(2).count_ev(p.ev), dead ? 0u : 1u) << Fabric::describe(p.ev);
  }
  EXPECT_EQ(f.t1_stats(1, 2).dropped_down, 0u) << "dropped on the T0->T1 link, before the T1";
  EXPECT_EQ(w.net.link_stats(f.link(1, 0, 2, Dir::kUp)).dropped_down, 2u);
  EXPECT_FALSE(w.net.link_up(f.link(1, 1, 2, Dir::kDown)));
  EXPECT_TRUE(w.net.link_up(f.link(0, 0, 2, Dir::kUp))) << "same spine index, other plane";
  EXPECT_NE(f.summary().find("p1 T1[2]"), std::string::npos);
  EXPECT_NE(f.summary().find("p1 T0[0]->T1[2] down"), std::string::npos);

  f.t1_up(1, 2);
  w.send_all(0, 2, ps, w.net.now());
  w.net.run_for(1ms);
  EXPECT_EQ(w.host(2).rx().size(), 2 * ps.size() - 2);
  EXPECT_EQ(f.summary().find("links with faults"), std::string::npos);
}

TEST(Fabric, T0Down_DropsItsPlaneForItsGroup) {
  World w(small());
  Fabric& f = *w.fabric;
  EXPECT_EQ(f.t0_of(1), 0u);
  EXPECT_EQ(f.t0_of(2), 1u);
  f.t0_down(1, 0);                              // plane 1, hosts 0 and 1
  w.send_all(0, 2, f.paths(0, 2, 4), Time{0});  // across, both ways
  w.send_all(2, 0, f.paths(2, 0, 4), Time{0});
  w.send_all(1, 0, f.paths(1, 0, 4), Time{0});  // inside the group
  w.send_all(3, 2, f.paths(3, 2, 4), Time{0});  // the other group
  w.net.run_until(Time{1ms});
  auto on_plane = [](const FakeHost& h, uint16_t p) {
    return std::count_if(h.rx().begin(), h.rx().end(),
                         [&](const FakeHost::Arrival& a) { return a.rx.plane == p; });
  };
  EXPECT_EQ(on_plane(w.host(2), 0), 4 + 4);  // from h0 and h3
  EXPECT_EQ(on_plane(w.host(2), 1), 4);      // from h3 only
  EXPECT_EQ(on_plane(w.host(0), 0), 4 + 4);  // from h2 and h1
  EXPECT_EQ(on_plane(w.host(0), 1), 0);
  for (PeerId h : {0u, 1u}) EXPECT_FALSE(w.net.link_up(f.host_link(h, 1, Dir::kUp)));
  for (uint32_t s = 0; s < 4; ++s) EXPECT_FALSE(w.net.link_up(f.link(1, 0, s, Dir::kDown)));
  EXPECT_TRUE(w.net.link_up(f.link(1, 1, 0, Dir::kUp)));

  f.t0_up(1, 0);
  w.send_all(0, 2, f.paths(0, 2, 4), w.net.now());
  w.net.run_for(1ms);
  EXPECT_EQ(on_plane(w.host(2), 1), 4 + 4);
}

TEST(Fabric, PortUp_ReportsEachHostPortThatLosesOrRegainsItsLink) {
  World w(small());
  Fabric& f = *w.fabric;
  std::vector<std::tuple<PeerId, uint16_t, bool>> told;
  f.set_on_port([&told](PeerId h, uint16_t p, bool up) { told.emplace_back(h, p, up); });
  using Told = std::vector<std::tuple<PeerId, uint16_t, bool>>;

  f.t0_down(1, 0);  // plane 1, hosts 0 and 1
  EXPECT_EQ(told, (Told{{0, 1, false}, {1, 1, false}}));
  EXPECT_FALSE(f.port_up(0, 1));
  EXPECT_TRUE(f.port_up(0, 0));
  EXPECT_TRUE(f.port_up(2, 1));
  told.clear();
  f.t1_down(1, 2);                                    // no host port loses its link
  f.blackhole_t0(0, 1, true);                         // silent: the links stay up
  f.link_down(LinkRef::host_port(3, 0, Dir::kDown));  // one direction is enough
  EXPECT_EQ(told, (Told{{3, 0, false}}));
  told.clear();
  f.link_down(LinkRef::host_port(3, 0, Dir::kUp));  // no change: already down
  f.link_up(LinkRef::host_port(3, 0));
  f.t0_up(1, 0);
  EXPECT_EQ(told, (Told{{3, 0, true}, {0, 1, true}, {1, 1, true}}));
  for (PeerId h = 0; h < 4; ++h)
    for (uint16_t p = 0; p < 2; ++p) EXPECT_TRUE(f.port_up(h, p)) << h << " " << p;
  EXPECT_THROW((void)f.port_up(4, 0), std::out_of_range);
  EXPECT_THROW((void)f.port_up(0, 2), std::out_of_range);
}

TEST(Fabric, Faults_Compose) {
  World w(small());
  Fabric& f = *w.fabric;
  const LinkId l = f.link(0, 0, 3, Dir::kUp);
  f.t0_down(0, 0);
  f.t1_down(0, 3);
  f.link_down(LinkRef::uplink(0, 0, 3, Dir::kUp));
  f.t1_up(0, 3);
  EXPECT_FALSE(w.net.link_up(l)) << "its T0 is still down";
  f.t0_up(0, 0);
  EXPECT_FALSE(w.net.link_up(l)) << "the link itself is still down";
  EXPECT_TRUE(w.net.link_up(f.link(0, 0, 3, Dir::kDown))) << "only one direction was taken down";
  f.link_up(LinkRef::uplink(0, 0, 3, Dir::kUp));
  EXPECT_TRUE(w.net.link_up(l));

  f.link_down(LinkRef::host_port(3, 1));
  EXPECT_FALSE(w.net.link_up(w.net.egress_port(3, 1)));
  EXPECT_FALSE(w.net.link_up(w.net.ingress_port(3, 1)));
  EXPECT_EQ(f.links(LinkRef::host_port(3, 1, Dir::kDown)),
            std::vector<LinkId>{w.net.ingress_port(3, 1)});
  EXPECT_EQ(f.link_name(w.net.egress_port(3, 1)), "p1 h3->T0[1]");
  EXPECT_EQ(f.link_name(l), "p0 T0[0]->T1[3]");
  EXPECT_EQ(f.link_name(f.link(1, 1, 2, Dir::kDown)), "p1 T1[2]->T0[1]");
}

TEST(Fabric, BlackholeT1_KeepsLinksUpButDrops) {
  World w(small());
  Fabric& f = *w.fabric;
  const auto ps = f.paths(0, 2, 4);
  f.blackhole_t1(0, 1, true);
  w.send_all(0, 2, ps, Time{0});
  w.net.run_until(Time{1ms});
  EXPECT_EQ(w.host(2).rx().size(), ps.size() - 1);
  EXPECT_EQ(w.host(2).count_ev(Fabric::ev(0, 1, 0)), 0u);
  EXPECT_EQ(f.t1_stats(0, 1).dropped_blackhole, 1u);
  for (uint32_t t = 0; t < 2; ++t) {
    EXPECT_TRUE(w.net.link_up(f.link(0, t, 1, Dir::kUp)));
    EXPECT_TRUE(w.net.link_up(f.link(0, t, 1, Dir::kDown)));
    EXPECT_TRUE(w.net.blackhole(f.link(0, t, 1, Dir::kDown)));
    EXPECT_FALSE(w.net.blackhole(f.link(0, t, 1, Dir::kUp))) << "the T0 still forwards";
  }
  f.blackhole_t1(0, 1, false);
  w.send_all(0, 2, ps, w.net.now());
  w.net.run_for(1ms);
  EXPECT_EQ(w.host(2).count_ev(Fabric::ev(0, 1, 0)), 1u);

  // A blackholed T0 drops toward its hosts too, and its uplinks stay up.
  f.blackhole_t0(1, 1, true);
  w.send_all(0, 2, ps, w.net.now());
  w.net.run_for(1ms);
  EXPECT_EQ(w.host(2).rx().size(), 2 * ps.size() - 1 + 4);  // plane 0 only
  EXPECT_TRUE(w.net.link_up(f.host_link(2, 1, Dir::kDown)));
  EXPECT_EQ(f.t0_stats(1, 1).dropped_blackhole, 4u);
}

TEST(Fabric, Flap_TogglesOnSchedule) {
  World w(small());
  Fabric& f = *w.fabric;
  const LinkId up = f.link(0, 0, 1, Dir::kUp), down = f.link(0, 0, 1, Dir::kDown);
  w.net.at(Time{1s}, [&] { f.flap(LinkRef::uplink(0, 0, 1), 200ms, Time{2s}); });
  std::vector<bool> seen;
  for (int ms = 900; ms <= 2300; ms += 200) {
    w.net.at(Time{std::chrono::milliseconds(ms)}, [&] {
      seen.push_back(w.net.link_up(up));
      EXPECT_EQ(w.net.link_up(up), w.net.link_up(down));
    });
  }
  // One datagram on the flapping spine every 200 ms from 1.1 s: down, up, down, up, down, up...
  const engine::Path p{Fabric::ev(0, 1, 0), 0};
  for (int ms = 1100; ms <= 2300; ms += 200) {
    w.host(0).send_at(Time{std::chrono::milliseconds(ms)}, 2, p);
  }
  w.net.wake(0);
  w.net.run_until(Time{3s});
  EXPECT_EQ(seen, (std::vector<bool>{true, false, true, false, true, false, true, true}));
  std::vector<uint32_t> got;
  for (const auto& a : w.host(2).rx()) got.push_back(a.seq);
  EXPECT_EQ(got, (std::vector<uint32_t>{1, 3, 5, 6}));
  EXPECT_TRUE(w.net.link_up(up));
}

TEST(Fabric, Loss_RateNearP) {
  World w(small());
  Fabric& f = *w.fabric;
  f.loss(LinkRef::uplink(0, 0, 2, Dir::kUp), 0.1);
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) {
    const Time t{int64_t{i} * 200};  // 80 Gb/s, below the 100 Gb/s port rate
    w.host(0).send_at(t, 2, engine::Path{Fabric::ev(0, 2, 0), 0});
    w.host(0).send_at(t, 2, engine::Path{Fabric::ev(0, 3, 0), 0});
  }
  w.net.wake(0);
  w.net.run_until(Time{10ms});
  const double got = static_cast<double>(w.host(2).count_ev(Fabric::ev(0, 2, 0))) / kN;
  EXPECT_NEAR(got, 0.9, 0.01);
  EXPECT_EQ(w.host(2).count_ev(Fabric::ev(0, 3, 0)), size_t{kN});
  EXPECT_EQ(w.net.link_stats(f.link(0, 0, 2, Dir::kUp)).dropped_loss,
            kN - w.host(2).count_ev(Fabric::ev(0, 2, 0)));
  EXPECT_EQ(w.net.impairments(f.link(0, 0, 2, Dir::kDown)).loss, 0.0);
  EXPECT_NE(f.summary().find("p0 T0[0]->T1[2] loss 0.1"), std::string::npos);
  f.loss(LinkRef::uplink(0, 0, 2, Dir::kUp), 0);
  EXPECT_EQ(w.net.impairments(f.link(0, 0, 2, Dir::kUp)).loss, 0.0);
}

// Two senders at the full port rate into one host port, over uplinks 4x faster: the queue
// builds on T0->receiver, where data is ECN-marked and then trimmed, never tail-dropped.
TEST(Fabric, Incast_TrimsAndMarksAtHostPort) {
  for (const bool trimming : {true, false}) {
    FabricConfig c;
    c.hosts = 3;
    c.planes = 1;
    c.spines = 2;
    c.host_port_bps = 10'000'000'000;
    c.uplink_bps = 40'000'000'000;
    c.capacity_bytes = 64 << 10;
    c.ecn_threshold_bytes = 8 << 10;
    c.trim_threshold_bytes = 16 << 10;
    World w(c);
    Fabric& f = *w.fabric;
    if (!trimming) f.set_trimming(false);
    constexpr int kN = 400;
    for (int i = 0; i < kN; ++i) {
      for (PeerId s : {0u, 1u}) w.host(s).send_at(Time{0}, 2, {Fabric::ev(0, i % 2, 0), 0}, 4000);
    }
    w.net.wake(0);
    w.net.wake(1);
    w.net.run_until(Time{10ms});
    const LinkStats& port = w.net.link_stats(f.host_link(2, 0, Dir::kDown));
    for (uint32_t t = 0; t < 3; ++t) {
      for (uint32_t s = 0; s < 2; ++s) {
        for (Dir d : {Dir::kUp, Dir::kDown}) {
          const LinkStats& ul = w.net.link_stats(f.link(0, t, s, d));
          EXPECT_LE(ul.max_queued_bytes, 8000u) << "uplinks hold at most the two senders' packets";
          EXPECT_EQ(ul.trimmed + ul.ecn_marked + ul.dropped(), 0u);
        }
      }
    }
    EXPECT_GT(port.ecn_marked, 0u);
    size_t trimmed = 0, ce = 0;
    for (const auto& a : w.host(2).rx()) {
      if (a.net_flags & wire::net_flag::kTrimmed) {
        ++trimmed;
        EXPECT_EQ(a.size, wire::kDataHeaderSize);
        EXPECT_TRUE(a.net_flags & wire::net_flag::kTrimmedLastHop);
      }
      ce += a.rx.ecn_ce;
    }
    EXPECT_GT(ce, 0u);
    if (trimming) {
      EXPECT_GT(port.trimmed, 0u);
      EXPECT_EQ(trimmed, port.trimmed);
      EXPECT_EQ(port.dropped_queue, 0u);
      EXPECT_EQ(w.host(2).rx().size(), size_t{2 * kN});
      EXPECT_LE(port.max_queued_bytes, (16u << 10) + 2 * 4000);
    } else {
      EXPECT_EQ(port.trimmed, 0u);
      EXPECT_GT(port.dropped_queue, 0u);
      EXPECT_EQ(w.host(2).rx().size() + port.dropped_queue, size_t{2 * kN});
    }
    // The senders' NIC ports never trim or mark.
    for (PeerId s : {0u, 1u}) {
      const LinkStats& nic = w.net.link_stats(f.host_link(s, 0, Dir::kUp));
      EXPECT_EQ(nic.trimmed + nic.ecn_marked + nic.dropped(), 0u);
    }
  }
}

TEST(Fabric, Build_LinkConfigsFollowTheConfig) {
  FabricConfig c = small();
  c.host_port_bps = 25'000'000'000;
  c.uplink_bps = 50'000'000'000;
  c.host_latency = 2us;
  c.uplink_latency = 3us;
  World w(c);
  Fabric& f = *w.fabric;
  const LinkConfig& nic = w.net.link_config(f.host_link(0, 1, Dir::kUp));
  EXPECT_EQ(nic.rate_bps, c.host_port_bps);
  EXPECT_EQ(nic.latency, 2us);
  EXPECT_EQ(nic.capacity_bytes, kUnlimited);
  EXPECT_EQ(nic.trim_threshold_bytes, kUnlimited);
  EXPECT_EQ(nic.ecn_threshold_bytes, kUnlimited);
  const LinkConfig& port = w.net.link_config(f.host_link(0, 1, Dir::kDown));
  EXPECT_EQ(port.rate_bps, c.host_port_bps);
  EXPECT_EQ(port.capacity_bytes, c.capacity_bytes);
  EXPECT_EQ(port.trim_threshold_bytes, c.trim_threshold_bytes);
  const LinkConfig& ul = w.net.link_config(f.link(1, 1, 3, Dir::kDown));
  EXPECT_EQ(ul.rate_bps, c.uplink_bps);
  EXPECT_EQ(ul.latency, 3us);
  EXPECT_EQ(ul.ecn_threshold_bytes, c.ecn_threshold_bytes);
  f.set_trimming(false);
  EXPECT_EQ(w.net.link_config(f.link(1, 1, 3, Dir::kDown)).trim_threshold_bytes, kUnlimited);
  EXPECT_EQ(w.net.link_config(f.host_link(0, 1, Dir::kDown)).trim_threshold_bytes, kUnlimited);
  f.set_trimming(true);
  EXPECT_EQ(w.net.link_config(f.link(1, 0, 0, Dir::kUp)).trim_threshold_bytes,
            c.trim_threshold_bytes);
  EXPECT_EQ(f.t0_count(), 2u);
}

TEST(Fabric, Build_MistakesThrow) {
  SimNet net;
  FakeHost h0, h1;
  net.add_host(&h0);
  net.add_host(&h1);
  FabricConfig c;
  c.hosts = 3;  // the net has 2
  EXPECT_THROW((Fabric{net, c}), std::out_of_range);
  c.hosts = 2;
  c.spines = 257;
  EXPECT_THROW((Fabric{net, c}), std::invalid_argument);
  c.spines = 4;
  c.hosts_per_t0 = 0;
  EXPECT_THROW((Fabric{net, c}), std::invalid_argument);
  c.hosts_per_t0 = 1;
  Fabric f(net, c);
  EXPECT_THROW(f.t0_down(4, 0), std::out_of_range);
  EXPECT_THROW(f.t1_down(0, 4), std::out_of_range);
  EXPECT_THROW(f.link_down(LinkRef::uplink(0, 2, 0)), std::out_of_range);
  EXPECT_THROW((void)f.link(0, 0, 0, Dir::kBoth), std::out_of_range);
  EXPECT_THROW(f.flap(LinkRef::uplink(0, 0, 0), Duration{0}, Time{1s}), std::invalid_argument);
}

// The routes belong to the router the SimNet holds: packets still go once the Fabric is gone.
TEST(Fabric, Route_OutlivesTheFabric) {
  World w(small());
  const auto ps = w.fabric->paths(0, 3, 4);
  w.fabric->flap(LinkRef::uplink(0, 0, 0), 1ms, Time{10ms});
  w.fabric.reset();
  w.send_all(0, 3, ps, Time{20ms});
  w.net.run_until(Time{30ms});
  EXPECT_EQ(w.host(3).rx().size(), ps.size());
}

}  // namespace
}  // namespace mrc::sim
