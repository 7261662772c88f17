// Structured EVs (UdpDriver::stev_path) on a fabric whose ECMP hashes the IPv6 flow label
// only: a hand-built fabric (tests/verbs/hand_fabric.h: plain ip commands, 1 plane, 2 spines,
// net.ipv6.fib_multipath_hash_policy 3 with fib_multipath_hash_fields 0x8) between two
// UdpDrivers in their namespaces. A QP whose 16 EVs differ only in their flow label spreads its
// data over both spines (bytes each spine forwards towards the receiver), and the same QP with
// one label on all of its EVs sends everything through one. Needs root (namespaces): skips
// otherwise. Its namespaces carry a per-process prefix and are removed at the end.
// Each WRITE runs on two new drivers (engines with no history of the fabric). Threading: the
// test thread talks to the drivers through with_engine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>
#include <vector>

#include "hand_fabric.h"
#include "mrc/common/netns.h"
#include "mrc/io/udp/udp_driver.h"
#include "ns_test_fabric.h"

namespace mrc::io {
namespace {

using namespace engine;
using namespace std::chrono_literals;
using verbs::HandFabric;

constexpr uint32_t kSpines = 2;
constexpr size_t kBytes = 8u << 20;

class NsStev : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto ok = netns_supported(); !ok.ok()) {
      skip_ = ok.error();
      return;
    }
    HandFabric::Options o;
    o.prefix = "mrcst" + std::to_string(::getpid());
    o.planes = 1;
    o.spines = kSpines;
    o.ipv6_hash_policy = 3;    // custom: ...
    o.ipv6_hash_fields = 0x8;  // ...the flow label alone
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
  }

  // Bytes each spine has forwarded towards host 1 (its link to host 1's T0) so far.
  std::vector<uint64_t> spine_bytes() {
    std::vector<uint64_t> b;
    for (uint32_t k = 0; k < kSpines; ++k) {
      auto c = fab_->counters(fab_->spine(0, k), "t1");
      EXPECT_TRUE(c.ok()) << c.error();
      b.push_back(c.ok() ? c->second : 0);
    }
    return b;
  }

  // One verified kBytes WRITE from host 0 to host 1 on a QP pair of two new drivers (engines
  // with no history of the fabric), the sender spraying on one STEV EV per (flow label,
  // source port) of `evs`; the bytes each spine forwarded meanwhile.
  std::vector<uint64_t> write_on(const std::vector<std::pair<uint32_t, uint16_t>>& evs) {
    std::unique_ptr<UdpDriver> drv[2];
    PeerId peer[2] = {};
    for (uint32_t h = 0; h < 2; ++h) {
      UdpConfig c;
      c.planes = {PlaneConfig{HandFabric::host_v6(h, 0), kDefaultUdpPort}};
      c.netns = fab_->host(h);
      auto d = UdpDriver::create(c);
      EXPECT_TRUE(d.ok()) << d.error();
      if (!d.ok()) return {0, 0};
      drv[h] = std::move(d).value();
    }
    for (uint32_t h = 0; h < 2; ++h) peer[h] = drv[h]->add_peer({drv[1 - h]->local_address(0)});
    std::vector<Path> paths;
    for (const auto& [label, sport] : evs) {
      auto p = drv[0]->stev_path(0, label, sport);
      EXPECT_TRUE(p.ok()) << p.error();
      if (p.ok()) paths.push_back(*p);
    }
    for (auto& d : drv) d->start();
    std::vector<uint8_t> src(kBytes), dst(kBytes);
    for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
    Qpn qpn[2] = {};
    CqId cq[2] = {};
    uint32_t rkey = 0, lkey = 0;
    const uint32_t token[2] = {0x5151, 0x6262};
    for (uint32_t h = 0; h < 2; ++h) {
      drv[h]->with_engine([&](Engine& e) {
        cq[h] = *e.create_cq(1024);
        QpInit init;
        init.send_cq = init.recv_cq = cq[h];
        init.local_token = token[h];
        qpn[h] = *e.create_qp(init);
        auto& mem = h == 0 ? src : dst;
        const uint32_t key =
            *e.register_mr(mem.data(), mem.size(), reinterpret_cast<uint64_t>(mem.data()),
                           access::kLocalWrite | access::kRemoteWrite);
        (h == 0 ? lkey : rkey) = key;
      });
    }
    for (uint32_t h = 0; h < 2; ++h) {
      drv[h]->with_engine([&](Engine& e) {
        QpAttr at;
        at.state = QpState::kInit;
        ASSERT_TRUE(e.modify_qp(qpn[h], at, attr::kState).ok());
        at.state = QpState::kRtr;
        at.peer = peer[h];
        at.dest_qpn = qpn[1 - h];
        at.remote_token = token[1 - h];
        at.paths = h == 0 ? paths : drv[1]->spray_paths(0);
        ASSERT_TRUE(e.modify_qp(qpn[h], at, attr::kState | attr::kDest | attr::kPaths).ok());
        at.state = QpState::kRts;
        ASSERT_TRUE(e.modify_qp(qpn[h], at, attr::kState).ok());
      });
    }
    const auto before = spine_bytes();
    Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(kBytes), lkey};
    SendWr wr;
    wr.opcode = Opcode::kWrite;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    wr.rkey = rkey;
    wr.signaled = true;
    EXPECT_TRUE(drv[0]->with_engine([&](Engine& e) { return e.post_send(qpn[0], wr); }).ok());
    Completion c{};
    size_t got = 0;
    const auto end = std::chrono::steady_clock::now() + 20s;  // a limit, not a measurement
    while (got == 0 && std::chrono::steady_clock::now() < end) {
      got = drv[0]->with_engine([&](Engine& e) { return e.poll_cq(cq[0], {&c, 1}); });
      if (got == 0) std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(got, 1u) << "the WRITE did not complete";
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_TRUE(src == dst) << "data differs";
    auto after = spine_bytes();
    for (uint32_t k = 0; k < kSpines; ++k) after[k] -= before[k];
    for (auto& d : drv) d->stop();
    return after;
  }

  static inline std::optional<HandFabric> fab_;
  static inline std::string skip_;
};

TEST_F(NsStev, FlowLabelOnlyEcmp_LabelsSpreadOneLabelDoesNot) {
  std::vector<std::pair<uint32_t, uint16_t>> spread, one;
  for (uint32_t i = 0; i < 16; ++i) {
    spread.emplace_back(0x100 + i * 0x111, 0x0100);  // labels differ, the port half the same
    // The same EV count with one label: the EVs differ in their source-port half only, which
    // the switches do not hash (direct mode: one socket, one port, whatever that half says).
    one.emplace_back(0x777, static_cast<uint16_t>(i));
  }
  const auto s = write_on(spread);
  const uint64_t total_s = s[0] + s[1];
  ASSERT_GT(total_s, kBytes) << "the spines forwarded less than the data";
  for (uint32_t k = 0; k < kSpines; ++k)
    EXPECT_GT(s[k], total_s / 20) << "spine " << k << " carried " << s[k] << " of " << total_s
                                  << " bytes: the labels did not spread";
  std::printf("16 labels: spine 0 %llu bytes, spine 1 %llu bytes\n",
              static_cast<unsigned long long>(s[0]), static_cast<unsigned long long>(s[1]));
  const auto o = write_on(one);
  std::printf("1 label:   spine 0 %llu bytes, spine 1 %llu bytes\n",
              static_cast<unsigned long long>(o[0]), static_cast<unsigned long long>(o[1]));
  const uint64_t total_o = o[0] + o[1];
  ASSERT_GT(total_o, kBytes);
  EXPECT_GT(std::max(o[0], o[1]), total_o / 100 * 99)
      << "one label, yet spines carried " << o[0] << " and " << o[1] << " bytes";
}

}  // namespace
}  // namespace mrc::io
