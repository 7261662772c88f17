// A host's own plane port losing its link, on namespaces (tests/verbs/hand_fabric.h: 2 hosts,
// 2 planes, 1 spine a plane, tbf-shaped host ports): the UdpDriver learns it from netlink
// (io/udp/link_watch.h) and tells its engine (Engine::set_port_up), which stops sending on the
// plane and says so in its headers, so the peer's engine holds the plane towards that host.
// A WRITE runs while the port goes down and comes back; it completes with every byte checked,
// and a WRITE after the port is back uses the plane again. Two ways to lose the link: the
// sender's port set down in its own namespace (IFF_UP), the receiver's T0 end set down (carrier,
// IFF_LOWER_UP). Needs root (namespaces): skips otherwise. Namespaces carry a per-process
// prefix and are removed at the end. Threading: the test thread talks to the drivers through
// with_engine.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "hand_fabric.h"
#include "io/udp/link_watch.h"
#include "mrc/common/netns.h"
#include "mrc/io/udp/udp_driver.h"
#include "ns_test_fabric.h"

namespace mrc::io {
namespace {

using namespace engine;
using namespace std::chrono_literals;
using verbs::HandFabric;

constexpr size_t kBytes = 48u << 20;  // about 0.8 s on two 500 Mbit/s ports
constexpr uint16_t kPlane = 1;        // the plane whose port goes down

class NsLink : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto ok = netns_supported(); !ok.ok()) {
      skip_ = ok.error();
      return;
    }
    HandFabric::Options o;
    o.prefix = "mrclk" + std::to_string(::getpid());
    o.planes = 2;
    o.spines = 1;
    auto f = HandFabric::up(o);
    ASSERT_TRUE(f.ok()) << f.error();
    fab_.emplace(std::move(f).value());
    auto r = fab_->resolve_links();
    ASSERT_TRUE(r.ok()) << r.error();
  }
  static void TearDownTestSuite() {
    if (!fab_) return;
    const std::string prefix = fab_->options().prefix;
    fab_.reset();  // removes its namespaces
    EXPECT_EQ(perf::namespaces_left(prefix), std::vector<std::string>{});
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(fab_.has_value());
    for (uint32_t h = 0; h < 2; ++h) {
      UdpConfig c;
      c.planes = {PlaneConfig{HandFabric::host_v6(h, 0), kDefaultUdpPort},
                  PlaneConfig{HandFabric::host_v6(h, 1), kDefaultUdpPort}};
      c.netns = fab_->host(h);
      auto d = UdpDriver::create(c);
      ASSERT_TRUE(d.ok()) << d.error();
      drv_[h] = std::move(d).value();
      EXPECT_TRUE(drv_[h]->link_watch_notes().empty()) << drv_[h]->link_watch_notes()[0];
    }
    for (uint32_t h = 0; h < 2; ++h)
      peer_[h] = drv_[h]->add_peer({drv_[1 - h]->local_address(0), drv_[1 - h]->local_address(1)});
    const uint32_t token[2] = {0x7171, 0x8282};
    for (uint32_t h = 0; h < 2; ++h) {
      drv_[h]->with_engine([&](Engine& e) {
        cq_[h] = *e.create_cq(1024);
        QpInit init;
        init.send_cq = init.recv_cq = cq_[h];
        init.local_token = token[h];
        qpn_[h] = *e.create_qp(init);
        auto& mem = mem_[h];
        mem.assign(kBytes, 0);
        key_[h] = *e.register_mr(mem.data(), mem.size(), reinterpret_cast<uint64_t>(mem.data()),
                                 access::kLocalWrite | access::kRemoteWrite);
      });
    }
    for (uint32_t h = 0; h < 2; ++h) {
      drv_[h]->with_engine([&](Engine& e) {
        QpAttr at;
        at.state = QpState::kInit;
        ASSERT_TRUE(e.modify_qp(qpn_[h], at, attr::kState).ok());
        at = drv_[h]->rtr_attr(peer_[h], 1 - h, qpn_[1 - h], token[1 - h]);
        at.state = QpState::kRtr;
        ASSERT_TRUE(e.modify_qp(qpn_[h], at, attr::kState | UdpDriver::kRtrMask).ok());
        at.state = QpState::kRts;
        ASSERT_TRUE(e.modify_qp(qpn_[h], at, attr::kState).ok());
      });
      drv_[h]->start();
    }
  }
  void TearDown() override {
    for (auto& d : drv_)
      if (d) d->stop();
  }

  void ip(const std::vector<std::string>& argv) {
    std::vector<std::string> a = {"ip"};
    a.insert(a.end(), argv.begin(), argv.end());
    auto r = nsfabric::run_command(a);
    ASSERT_TRUE(r.ok()) << r.error();
  }

  // Posts a `bytes` WRITE from host 0 to host 1 of a new pattern.
  void post_write(size_t bytes, uint8_t seed) {
    for (size_t i = 0; i < bytes; ++i) mem_[0][i] = static_cast<uint8_t>(i * 13 + seed);
    Sge sge{reinterpret_cast<uint64_t>(mem_[0].data()), static_cast<uint32_t>(bytes), key_[0]};
    SendWr wr;
    wr.opcode = Opcode::kWrite;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(mem_[1].data());
    wr.rkey = key_[1];
    wr.signaled = true;
    ASSERT_TRUE(drv_[0]->with_engine([&](Engine& e) { return e.post_send(qpn_[0], wr); }).ok());
  }
  bool write_done() {
    Completion c{};
    if (drv_[0]->with_engine([&](Engine& e) { return e.poll_cq(cq_[0], {&c, 1}); }) == 0)
      return false;
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    return true;
  }
  // Polls `f` every ms for up to `limit` (a bound, not a measurement).
  static bool eventually(const std::function<bool()>& f, std::chrono::seconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!f()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  uint64_t plane_bytes_from_host0() {  // what host 0's T0 of kPlane received from it
    auto c = fab_->counters(fab_->t0(kPlane, 0), "toh");
    EXPECT_TRUE(c.ok()) << c.error();
    return c.ok() ? c->first : 0;
  }

  // The scenario of the file comment: `down` host's kPlane port loses its link by `down_cmd`
  // while a WRITE runs; `up_cmds` bring it back.
  void run(uint32_t down, const std::vector<std::vector<std::string>>& down_cmds,
           const std::vector<std::vector<std::string>>& up_cmds) {
    const uint32_t other = 1 - down;
    ASSERT_TRUE(drv_[down]->port_link_up(kPlane));
    ASSERT_EQ(drv_[down]->counters().port_link_changes, 0u);
    post_write(kBytes, 3);
    std::this_thread::sleep_for(100ms);  // the WRITE is under way on both planes
    for (const auto& c : down_cmds) ip(c);
    ASSERT_TRUE(eventually([&] { return drv_[down]->counters().port_link_changes == 1; }))
        << "the driver did not see the link go";
    EXPECT_FALSE(drv_[down]->port_link_up(kPlane));
    EXPECT_EQ(drv_[down]->with_engine([](Engine& e) { return e.ports_down(); }), 1u << kPlane);
    // The peer's engine learns it from this host's headers and holds the plane towards it.
    bool peer_saw = false, peer_held = false;
    done_ = false;
    ASSERT_TRUE(eventually([&] {
      drv_[other]->with_engine([&](Engine& e) {
        peer_saw = peer_saw || (e.peer_ports_down(peer_[other]) & (1u << kPlane));
        peer_held = peer_held || (e.held_planes(peer_[other], drv_[other]->now()) & (1u << kPlane));
      });
      done_ = done_ || write_done();
      return peer_saw && peer_held;
    })) << "peer saw ports_down: "
        << peer_saw << ", held the plane: " << peer_held;
    for (const auto& c : up_cmds) ip(c);
    ASSERT_TRUE(eventually([&] { return drv_[down]->counters().port_link_changes == 2; }))
        << "the driver did not see the link come back";
    EXPECT_TRUE(drv_[down]->port_link_up(kPlane));
    EXPECT_EQ(drv_[down]->with_engine([](Engine& e) { return e.ports_down(); }), 0u);
    ASSERT_TRUE(eventually([&] { return done_ = done_ || write_done(); }, 60s))
        << "the WRITE did not complete";
    for (size_t i = 0; i < kBytes; ++i)
      ASSERT_EQ(mem_[1][i], static_cast<uint8_t>(i * 13 + 3)) << "byte " << i;
    // Back in use: the peer no longer hears of it nor holds the plane (packets lost while the
    // two ends of the link found each other again, neighbour discovery, may have held it a
    // while longer), and a new WRITE crosses the plane too.
    ASSERT_TRUE(eventually([&] {
      return drv_[0]->with_engine([&](Engine& e) {
        return (e.held_planes(peer_[0], drv_[0]->now()) & (1u << kPlane)) == 0;
      });
    })) << "host 0 still holds plane "
        << kPlane << " towards host 1";
    const uint64_t before = plane_bytes_from_host0();
    post_write(8u << 20, 5);
    ASSERT_TRUE(eventually([&] { return write_done(); }, 60s))
        << "the second WRITE did not complete";
    for (size_t i = 0; i < (8u << 20); ++i)
      ASSERT_EQ(mem_[1][i], static_cast<uint8_t>(i * 13 + 5)) << "byte " << i;
    EXPECT_EQ(drv_[other]->with_engine([&](Engine& e) { return e.peer_ports_down(peer_[other]); }),
              0u);
    const uint64_t after = plane_bytes_from_host0();
    EXPECT_GT(after - before, 1u << 20) << "plane " << kPlane << " carried " << after - before
                                        << " bytes of an 8 MiB WRITE after its link came back";
    EXPECT_EQ(drv_[down]->counters().port_link_changes, 2u);
  }

  static inline std::optional<HandFabric> fab_;
  static inline std::string skip_;
  std::unique_ptr<UdpDriver> drv_[2];
  PeerId peer_[2] = {};
  CqId cq_[2] = {};
  Qpn qpn_[2] = {};
  uint32_t key_[2] = {};
  std::vector<uint8_t> mem_[2];
  bool done_ = false;
};

// The sender's own port set down in its namespace (IFF_UP off). Linux drops the port's IPv6
// address and the routes through it when it goes down: put back as hand_fabric.h made them.
// In both tests the port that goes down gets no DAD when it comes back (its link-local
// address would stay tentative for a second or two, and neighbour discovery with it).
TEST_F(NsLink, SenderPortSetDown_PlaneHeldOnBothEndsWriteCompletesPlaneBackAfterUp) {
  const std::string ns = fab_->host(0), dev = HandFabric::port_dev(kPlane);
  run(0,
      {{"netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf." + dev + ".accept_dad=0"},
       {"-n", ns, "link", "set", dev, "down"}},
      {{"-n", ns, "link", "set", dev, "up"},
       {"-n", ns, "-6", "addr", "replace", HandFabric::host_v6(0, kPlane) + "/64", "dev", dev,
        "nodad"},
       {"-n", ns, "-6", "route", "replace", HandFabric::v6(kPlane, 1, 0) + "/64", "via",
        HandFabric::v6(kPlane, 0, 2)}});
}

// The receiver's T0 end of its port set down: the receiver's port loses carrier (IFF_LOWER_UP
// off) and keeps its address; the T0 drops its own IPv6 address, put back.
TEST_F(NsLink, ReceiverPortLosesCarrier_PlaneHeldOnBothEndsWriteCompletesPlaneBackAfterUp) {
  const std::string t0 = fab_->t0(kPlane, 1);
  run(1,
      {{"netns", "exec", t0, "sysctl", "-qw", "net.ipv6.conf.toh.accept_dad=0"},
       {"-n", t0, "link", "set", "toh", "down"}},
      {{"-n", t0, "link", "set", "toh", "up"},
       {"-n", t0, "-6", "addr", "replace", HandFabric::v6(kPlane, 1, 2) + "/64", "dev", "toh",
        "nodad"}});
}

// LinkWatch::read on an overrun socket (ENOBUFS: the kernel dropped events): 101 link changes
// of host 0's plane port (ip link set down/up, ending down) into a socket made as small as the
// kernel allows; the watch ends at the link's real state (it asks for every link's state) and
// sees the link come back. Without that answer to ENOBUFS it never saw the link come back.
TEST_F(NsLink, LinkWatch_OverrunSocketEndsAtTheRealState) {
  const std::string ns = fab_->host(0);
  std::unique_ptr<LinkWatch> w;
  std::vector<std::string> notes;
  auto made = in_netns(ns, [&]() -> Status<std::string> {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    ::inet_pton(AF_INET6, HandFabric::host_v6(0, kPlane).c_str(), &a.sin6_addr);
    w = LinkWatch::create(std::vector<sockaddr_in6>{a}, &notes);
    return {};
  });
  ASSERT_TRUE(made.ok()) << made.error();
  ASSERT_NE(w, nullptr) << (notes.empty() ? "" : notes[0]);
  ASSERT_TRUE(w->up(0));
  const int tiny = 1;  // the kernel rounds it up to its least
  ASSERT_EQ(::setsockopt(w->fd(), SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny), 0);
  const std::string dev = HandFabric::port_dev(kPlane);
  std::string burst;
  for (int i = 0; i < 50; ++i) burst += "link set " + dev + " down\nlink set " + dev + " up\n";
  burst += "link set " + dev + " down\n";  // ends down
  auto r = nsfabric::run_command({"ip", "-n", ns, "-batch", "-"}, burst);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(eventually([&] {
    (void)w->read();
    return !w->up(0);
  })) << "the watch did not end at the link's state (down)";
  for (const auto& c : std::vector<std::vector<std::string>>{
           {"-n", ns, "link", "set", dev, "up"},
           {"-n", ns, "-6", "addr", "replace", HandFabric::host_v6(0, kPlane) + "/64", "dev", dev,
            "nodad"},
           {"-n", ns, "-6", "route", "replace", HandFabric::v6(kPlane, 1, 0) + "/64", "via",
            HandFabric::v6(kPlane, 0, 2)}})
    ip(c);
  EXPECT_TRUE(eventually([&] {
    (void)w->read();
    return w->up(0);
  })) << "the watch did not see the link come back";
}

}  // namespace
}  // namespace mrc::io
