// libnccl-net-mrc between two hosts of a namespace fabric (kernel SRv6 forwarding, 2 planes x
// 2 spines, 1 Gbit/s ports): a verified stream of 1 MiB messages while a T1 spine fails and
// comes back; no request may fail. The plugin runs with ephemeral UDP ports (MRC_PORT=0) in
// SRv6 mode, so peers learn each other's ports in the handshake. Skips, saying why, where
// namespaces cannot be made; the fabric is removed at the end, also on failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

#include "hand_fabric.h"
#include "mrc/common/netns.h"
#include "ns_test_fabric.h"
#include "ns_tools.h"
#include "plugin_harness.h"
#include "srv6/config.h"

namespace mrc::nccl::harness {
namespace {

class NcclFabric : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto ok = mrc::netns_supported(); !ok.ok()) {
      skip_ = ok.error();
      return;
    }
    auto up = perf::make_test_fabric("mrcn", 2, /*gso=*/true);
    ASSERT_TRUE(up.ok()) << up.error();
    fab_.emplace(std::move(up).value());
    fabric_file_ = "/tmp/" + fab_->options().prefix + "-fabric.json";
    std::ofstream(fabric_file_) << srv6::dump(fab_->fabric()) << "\n";
  }
  static void TearDownTestSuite() {
    if (!fab_) return;
    const std::string prefix = fab_->options().prefix;
    EXPECT_TRUE(fab_->down().ok());
    fab_.reset();
    std::filesystem::remove(fabric_file_);
    EXPECT_EQ(perf::namespaces_left(prefix), std::vector<std::string>{})
        << "namespaces left behind";
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(fab_.has_value());
  }
  static RankSpec host(uint32_t h) {
    const std::string cfg = "/tmp/" + fab_->options().prefix + "-empty.json";
    std::ofstream(cfg) << "{}\n";
    return RankSpec{{{"MRC_CONFIG", cfg},
                     {"MRC_PATH_MODE", "srv6"},
                     {"MRC_FABRIC", fabric_file_},
                     {"MRC_HOST", std::to_string(h)},
                     {"MRC_NETNS", fab_->host_netns(h)},
                     {"MRC_PORT", "0"}}};
  }
  static inline std::optional<nsfabric::NsFabric> fab_;
  static inline std::string skip_, fabric_file_;
};

// Rank 0 streams verified 1 MiB messages to rank 1 for `seconds`, then a 0-byte end marker.
std::string stream(int rank, Board& b, double seconds, double* gbps) {
  Plugin pl;
  if (!pl.lib) return "dlopen: " + pl.error;
  Api a = pl.api(12);
  if (int r = a.init())
    return "init returned " + std::to_string(r) + ": " +
           (warnings().empty() ? "" : warnings().back());
  constexpr size_t kSize = 1 << 20;
  constexpr int kSlots = 8;
  void* listen = nullptr;
  void* comm = nullptr;
  Handle h{};
  if (rank == 1) {
    if (a.listen(0, h.data(), &listen)) return "listen: " + warnings().back();
    b.put(0, h);
    if (auto e = wait_accept(a, listen, &comm); !e.empty()) return e;
  } else {
    if (!b.get(0, &h)) return "no handle";
    if (auto e = wait_connect(a, h, &comm); !e.empty()) return e;
  }
  std::vector<uint8_t> mem(kSize * kSlots);
  void* mh = nullptr;
  if (a.reg_mr(comm, mem.data(), mem.size(), MRC_NCCL_PTR_HOST, &mh)) return "regMr";
  std::vector<void*> req(kSlots, nullptr);
  std::vector<uint64_t> seq_of(kSlots, 0);
  uint64_t posted = 0, completed = 0, bytes = 0;
  bool ended = false;  // sender: end marker posted; receiver: end marker received
  const double start = now_s();
  while (true) {
    for (int s = 0; s < kSlots; ++s) {
      if (req[s]) continue;
      uint8_t* at = mem.data() + kSize * s;
      if (rank == 0) {
        if (ended) break;
        const bool last = now_s() - start > seconds;
        if (!last) fill(at, kSize, posted);
        if (a.isend(comm, at, last ? 0 : kSize, 0, mh, &req[s]))
          return "isend: " + warnings().back();
        if (req[s]) {
          seq_of[s] = posted++;
          ended = last;
        }
      } else if (!ended) {
        size_t sz = kSize;
        int tag = 0;
        void* d = at;
        if (a.irecv(comm, 1, &d, &sz, &tag, &mh, &req[s])) return "irecv: " + warnings().back();
        if (req[s]) seq_of[s] = posted++;
      }
    }
    // Complete in posting order.
    int oldest = -1;
    for (int s = 0; s < kSlots; ++s)
      if (req[s] && (oldest < 0 || seq_of[s] < seq_of[oldest])) oldest = s;
    if (oldest < 0) {
      if (!ended) continue;  // nothing in flight yet: the next CTS has not come (sender)
      break;
    }
    int done = 0, size = 0;
    if (a.test(req[oldest], &done, &size))
      return "test of message " + std::to_string(seq_of[oldest]) + ": " + warnings().back();
    if (!done) continue;
    req[oldest] = nullptr;
    ++completed;
    if (rank == 1) {
      if (size == 0) {
        ended = true;  // the end marker; the rest of the posted receives stay unused
        break;
      }
      if (auto e = verify(mem.data() + kSize * oldest, kSize, seq_of[oldest]); !e.empty()) return e;
    }
    bytes += static_cast<uint64_t>(size);
  }
  *gbps = static_cast<double>(bytes) * 8 / 1e9 / (now_s() - start);
  if (rank == 1) {
    // Receives still posted past the end marker are closed in flight.
  }
  a.dereg_mr(comm, mh);
  rank == 0 ? a.close_send(comm) : a.close_recv(comm);
  if (listen) a.close_listen(listen);
  a.finalize();
  if (rank == 1 && completed < 100)
    return "only " + std::to_string(completed) + " messages arrived";
  return "";
}

TEST_F(NcclFabric, VerifiedStream) {
  Board b(1);
  double gbps = 0;
  const std::string err = run_ranks(
      {host(0), host(1)}, [&](int rank) { return stream(rank, b, 2.0, &gbps); }, 120);
  EXPECT_EQ(err, "");
}

TEST_F(NcclFabric, T1FailAndRestoreMidTransfer_NoError) {
  Board b(1);
  double gbps = 0;
  bool failed = false, restored = false;
  std::string fault_error;
  const std::string err = run_ranks(
      {host(0), host(1)}, [&](int rank) { return stream(rank, b, 4.0, &gbps); }, 120,
      [&](double t) {
        // Connection setup takes well under a second; the stream runs from then for 4 s.
        if (!failed && t > 1.5) {
          failed = true;
          auto f = nsfabric::parse_fault("down t1 p0 s1");
          if (auto s = fab_->apply(*f); !s.ok()) fault_error = s.error();
        }
        if (!restored && t > 3.0) {
          restored = true;
          auto f = nsfabric::parse_fault("up t1 p0 s1");
          if (auto s = fab_->apply(*f); !s.ok()) fault_error = s.error();
        }
      });
  if (!restored) {
    auto f = nsfabric::parse_fault("up t1 p0 s1");
    (void)fab_->apply(*f);
  }
  EXPECT_TRUE(failed && restored) << "the stream ended before the fault schedule did";
  EXPECT_EQ(fault_error, "");
  EXPECT_EQ(err, "");
}

// Every path between the hosts dies (host 0's links in both planes go down) while each side has
// a request in flight: both test() calls return an error within the retry budget (here
// NCCL_MRC_TIMEOUT 14 = 16.8 ms x 8 tries = 134 ms), not a hang. The receiver has nothing
// outstanding on the wire; its keepalive WRITE is what times out there.
TEST_F(NcclFabric, AllPathsDead_BothSidesFailWithinTheRetryBudget) {
  Board b(5);  // 0: handle; 1, 2: when the fault went in, for rank 0 and 1; 3, 4: rank ready
  std::vector<RankSpec> rs = {host(0), host(1)};
  for (auto& r : rs) {
    r.env["NCCL_MRC_TIMEOUT"] = "14";
    r.env["NCCL_MRC_RETRY_CNT_EXP"] = "0";
  }
  bool cut = false;
  int ready = 0;
  double ready_at = 0;
  const std::string err = run_ranks(
      rs,
      [&](int rank) -> std::string {
        Plugin pl;
        Api a = pl.api(12);
        if (a.init()) return "init";
        void* comm = nullptr;
        Handle h{};
        void* listen = nullptr;
        if (rank == 1) {
          if (a.listen(0, h.data(), &listen)) return "listen";
          b.put(0, h);
          if (auto e = wait_accept(a, listen, &comm); !e.empty()) return e;
        } else {
          if (!b.get(0, &h)) return "no handle";
          if (auto e = wait_connect(a, h, &comm); !e.empty()) return e;
        }
        constexpr size_t kBig = 256 << 20;  // ~1 s at 2 Gbit/s: in flight when the fault lands
        std::vector<uint8_t> mem(kBig + (1 << 20));
        void* mh = nullptr;
        if (a.reg_mr(comm, mem.data(), mem.size(), MRC_NCCL_PTR_HOST, &mh)) return "regMr";
        void* req = nullptr;
        for (int i = 0; i < 2; ++i) {  // the second receive is the one left waiting
          req = nullptr;
          while (!req) {
            size_t sz = i == 0 ? 1 << 20 : kBig;
            int tag = 0;
            void* d = mem.data() + (i == 0 ? kBig : 0);
            const int r = rank == 1 ? a.irecv(comm, 1, &d, &sz, &tag, &mh, &req)
                                    : a.isend(comm, d, sz, 0, mh, &req);
            if (r) return "post " + std::to_string(i);
          }
          if (i == 0) {
            int got = 0;
            if (wait_test(a, req, &got)) return "first message";
          }
        }
        b.put(3 + rank, 1);
        int got = 0;
        const int r = wait_test(a, req, &got, 20);
        const double noticed = now_s();
        double cut_at = 0;
        if (!b.get(1 + rank, &cut_at, 5))
          return r == 0 ? "completed before the fault" : "no fault time";
        if (r == 0) return "completed although every path was down";
        if (r == -1) return "test() still pending 20 s after every path went down";
        if (r != mrcNcclRemoteError) return "test() returned " + std::to_string(r);
        if (noticed - cut_at > 2.0)
          return "error only after " + std::to_string(noticed - cut_at) + " s";
        if (warnings().back().find("retry budget") == std::string::npos)
          return "WARN: " + warnings().back();
        return "";
      },
      120,
      [&](double t) {
        int one = 0;
        while (ready < 2 && (b.get(3, &one, 0) || b.get(4, &one, 0)))
          ready_at = ++ready == 2 ? t : 0;
        if (cut || ready < 2 || t < ready_at + 0.1) return;
        cut = true;
        for (const char* f : {"down t0 h0 p0", "down t0 h0 p1"})
          (void)fab_->apply(*nsfabric::parse_fault(f));
        const double at = now_s();
        b.put(1, at);
        b.put(2, at);
      });
  for (const char* f : {"up t0 h0 p0", "up t0 h0 p1"})
    EXPECT_TRUE(fab_->apply(*nsfabric::parse_fault(f)).ok());
  EXPECT_EQ(err, "");
}

// The plugin on a fabric MRC did not make (hand_fabric.h: plain ip commands, ECMP routes and
// hand-programmed SRv6 uSID routes, its own addressing): path_mode ecmp with no fabric file
// over IPv6 and over IPv4 (the handshake carries every plane's address and ephemeral port),
// and path_mode srv6 with a fabric file the test wrote for those routes. A verified stream
// leaves host 0 on both plane ports; the receiver's rate over the planes' aggregate is printed
// for perf/RESULTS.md (MRC_NS_ECMP_SECONDS lengthens the stream; no rate is asserted).
enum class Hand { kEcmpV6, kEcmpV4, kSrv6 };
class NcclHandFabric : public ::testing::TestWithParam<Hand> {
 protected:
  static constexpr double kPortGbps = 0.5;  // HandFabric's default tbf rate

  static void SetUpTestSuite() {
    if (auto ok = mrc::netns_supported(); !ok.ok()) {
      skip_ = ok.error();
      return;
    }
    verbs::HandFabric::Options o;
    o.prefix = "mrcnh" + std::to_string(::getpid());
    o.srv6 = true;
    auto f = verbs::HandFabric::up(o);
    ASSERT_TRUE(f.ok()) << f.error();
    fab_.emplace(std::move(f).value());
    std::ofstream("/tmp/" + o.prefix + "-fabric.json") << fab_->srv6_fabric_json();
    // Once: a rank's process may read it while the test spawns the next.
    std::ofstream("/tmp/" + o.prefix + "-empty.json") << "{}\n";
  }
  static void TearDownTestSuite() {
    if (!fab_) return;
    const std::string prefix = fab_->options().prefix;
    fab_.reset();
    std::filesystem::remove("/tmp/" + prefix + "-empty.json");
    std::filesystem::remove("/tmp/" + prefix + "-fabric.json");
    EXPECT_EQ(perf::namespaces_left(prefix), std::vector<std::string>{});
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(fab_.has_value());
  }
  static RankSpec host(uint32_t h, Hand mode) {
    const std::string prefix = "/tmp/" + fab_->options().prefix;
    RankSpec r{{{"MRC_CONFIG", prefix + "-empty.json"},
                {"MRC_NETNS", fab_->host(h)},
                {"MRC_PORT", "0"},
                {"MRC_NIC_GBPS", "1"}}};
    if (mode == Hand::kSrv6) {
      r.env["MRC_PATH_MODE"] = "srv6";
      r.env["MRC_FABRIC"] = prefix + "-fabric.json";
      r.env["MRC_HOST"] = std::to_string(h);
      return r;
    }
    std::string planes;
    for (uint32_t p = 0; p < 2; ++p)
      planes += (p ? "," : "") + (mode == Hand::kEcmpV4 ? verbs::HandFabric::host_v4(h, p)
                                                        : verbs::HandFabric::host_v6(h, p));
    r.env["MRC_PATH_MODE"] = "ecmp";
    r.env["MRC_PLANES"] = planes;
    return r;
  }
#ifdef MRC_NCCL_BW
  // perf/nccl_bw between the fabric's two hosts (its receiver in host 1, its sender in host 0),
  // with `args` after the common ones; both processes' exit codes and output.
  struct NcclBwRun {
    int send_rc = -1, recv_rc = -1;
    std::string send_out, recv_out;
  };
  static NcclBwRun run_nccl_bw(Hand hand, const std::vector<std::string>& args, int limit_s) {
    const std::string rv = "/tmp/" + fab_->options().prefix + "-rv";
    auto clean = [&] {
      for (const char* tail : {"", ".send", ".recv"}) std::filesystem::remove(rv + tail);
    };
    clean();
    auto env = [&](uint32_t h) {
      std::vector<std::string> e;
      for (const auto& [k, v] : host(h, hand).env) e.push_back(k + "=" + v);
      return e;
    };
    auto argv = [&](const char* role) {
      std::vector<std::string> a{MRC_NCCL_BW, "--transport", "mrc",
                                 "--role",    role,          "--rendezvous",
                                 rv,          "--plugin",    MRC_NCCL_PLUGIN_PATH};
      a.insert(a.end(), args.begin(), args.end());
      return a;
    };
    verbs::Child recv = verbs::spawn(fab_->host(1), env(1), argv("recv"));
    verbs::Child send = verbs::spawn(fab_->host(0), env(0), argv("send"));
    NcclBwRun r;
    r.send_rc = send.wait(std::chrono::seconds(limit_s));
    r.recv_rc = recv.wait(std::chrono::seconds(10));
    r.send_out = send.out;
    r.recv_out = recv.out;
    clean();
    return r;
  }
#endif
  static inline std::optional<verbs::HandFabric> fab_;
  static inline std::string skip_;
};

std::string hand_name(Hand h) {
  return h == Hand::kEcmpV6 ? "EcmpIpv6" : h == Hand::kEcmpV4 ? "EcmpIpv4" : "Srv6HandWritten";
}

TEST_P(NcclHandFabric, VerifiedStreamUsesBothPlanes) {
  auto tx = [](uint32_t p) {
    auto c = fab_->counters(fab_->host(0), verbs::HandFabric::port_dev(p));
    return c.ok() ? c->second : 0;
  };
  // stream() wants 100 verified MiB: 5 s leaves room for a loaded machine (0.25 Gbit/s).
  double seconds = 5.0;
  if (const char* e = std::getenv("MRC_NS_ECMP_SECONDS"); e && std::atof(e) > seconds)
    seconds = std::atof(e);
  const uint64_t tx0 = tx(0), tx1 = tx(1);
  Board b(2);  // 0: the handle; 1: the receiver's Gbit/s
  const std::string err = run_ranks(
      {host(0, GetParam()), host(1, GetParam())},
      [&](int rank) {
        double gbps = 0;
        std::string e = stream(rank, b, seconds, &gbps);
        if (rank == 1) b.put(1, gbps);
        return e;
      },
      120);
  EXPECT_EQ(err, "");
  double gbps = 0;
  EXPECT_TRUE(b.get(1, &gbps, 0)) << "the receiver reported no rate";
  const double d0 = static_cast<double>(tx(0) - tx0), d1 = static_cast<double>(tx(1) - tx1);
  const double agg = 2 * kPortGbps;
  std::printf(
      "[ ecmp ] plugin %s: stream %.0f s %.3f Gbit/s = %.2f of %.1f; plane tx MB %.1f %.1f\n",
      hand_name(GetParam()).c_str(), seconds, gbps, gbps / agg, agg, d0 / 1e6, d1 / 1e6);
  EXPECT_GT(gbps, 0);
  ASSERT_GT(d0 + d1, 20e6) << "the stream sent too little to judge";
  EXPECT_GT(d0 / (d0 + d1), 0.35);
  EXPECT_GT(d1 / (d0 + d1), 0.35);
}

#ifdef MRC_NCCL_BW
// perf/nccl_bw (the plugin loaded as NCCL loads it, 1 MiB messages, 8 in flight, a sequence
// number per 4 KiB checked) on the same hand-built fabric: the figure perf/ecmp_bw.sh sets
// beside nccl_bw on an mrc-fabric fabric of the same shape; the harness's stream above checks
// every byte, which on a loaded machine costs more CPU than the ports' rate.
TEST_P(NcclHandFabric, NcclBw_CompletesUncorruptedOnBothPlanes) {
  int seconds = 2;
  if (const char* e = std::getenv("MRC_NS_ECMP_SECONDS"); e && std::atoi(e) > seconds)
    seconds = std::atoi(e);
  const NcclBwRun r = run_nccl_bw(
      GetParam(), {"--size", "1048576", "--seconds", std::to_string(seconds)}, seconds + 60);
  EXPECT_EQ(r.send_rc, 0) << r.send_out;
  EXPECT_EQ(r.recv_rc, 0) << r.recv_out;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.recv_out, m, std::regex(R"(mrc ([0-9.e+-]+) Gbit/s \(.*, 0 corrupt\))")))
      << r.recv_out;
  const double gbps = std::stod(m[1]), agg = 2 * kPortGbps;
  std::printf("[ ecmp ] plugin nccl_bw %s: %d s %.3f Gbit/s = %.2f of %.1f\n",
              hand_name(GetParam()).c_str(), seconds, gbps, gbps / agg, agg);
  EXPECT_GT(gbps, 0);
}

// nccl_bw --latency: both sides listen and connect (a comm each way), every size from 8 B to
// 64 KiB makes its round trips, each echo holds the ping's bytes (its sequence number) and the
// sender prints one line per size. Then --exchange, both ranks sending and receiving each round
// (small messages through the plugin's eager ring, the others after the receive's CTS): every
// round's message holds the other rank's bytes.
TEST_P(NcclHandFabric, NcclBw_LatencyRoundTripsEverySize) {
  for (const bool exchange : {false, true}) {
    std::vector<std::string> args = {"--latency", "--iterations", "20", "--warmup", "2"};
    if (exchange) args.push_back("--exchange");
    const NcclBwRun r = run_nccl_bw(GetParam(), args, 60);
    EXPECT_EQ(r.send_rc, 0) << r.send_out;
    EXPECT_EQ(r.recv_rc, 0) << r.recv_out;
    for (const char* size : {"8", "32", "128", "512", "2048", "8192", "32768", "65536"}) {
      const std::regex line(std::string("mrc latency ") + size +
                            R"( B p50 [0-9.]+ us p99 [0-9.]+ us \(20 round trips, 0 corrupt\))");
      EXPECT_TRUE(std::regex_search(r.send_out, line))
          << (exchange ? "exchange " : "") << size << " B:\n" << r.send_out;
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Fabrics, NcclHandFabric,
                         ::testing::Values(Hand::kEcmpV6, Hand::kEcmpV4, Hand::kSrv6),
                         [](const auto& i) { return hand_name(i.param); });

}  // namespace
}  // namespace mrc::nccl::harness
