// libnccl-net-mrc between two hosts of a namespace fabric (kernel SRv6 forwarding, 2 planes x
// 2 spines, 1 Gbit/s ports): a verified stream of 1 MiB messages while a T1 spine fails and
// comes back; no request may fail. The plugin runs with ephemeral UDP ports (MRC_PORT=0) in
// SRv6 mode, so peers learn each other's ports in the handshake. Skips, saying why, where
// namespaces cannot be made; the fabric is removed at the end, also on failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "hand_fabric.h"
#include "common/netns.h"
#include "ns_test_fabric.h"
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

// The plugin on a fabric MRC did not make (hand_fabric.h: plain ip commands, ECMP routes, its
// own addressing), path_mode ecmp with no fabric file, over IPv6 and over IPv4: the handshake
// carries every plane's address and (ephemeral) port, so a verified stream leaves host 0 on
// both plane ports.
class NcclHandFabric : public ::testing::TestWithParam<bool> {  // true: IPv4 planes
 protected:
  static void SetUpTestSuite() {
    if (auto ok = mrc::netns_supported(); !ok.ok()) {
      skip_ = ok.error();
      return;
    }
    verbs::HandFabric::Options o;
    o.prefix = "mrcnh" + std::to_string(::getpid());
    auto f = verbs::HandFabric::up(o);
    ASSERT_TRUE(f.ok()) << f.error();
    fab_.emplace(std::move(f).value());
  }
  static void TearDownTestSuite() {
    if (!fab_) return;
    const std::string prefix = fab_->options().prefix;
    fab_.reset();
    std::filesystem::remove("/tmp/" + prefix + "-empty.json");
    EXPECT_EQ(perf::namespaces_left(prefix), std::vector<std::string>{});
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(fab_.has_value());
  }
  static RankSpec host(uint32_t h, bool v4) {
    const std::string cfg = "/tmp/" + fab_->options().prefix + "-empty.json";
    std::ofstream(cfg) << "{}\n";
    std::string planes;
    for (uint32_t p = 0; p < 2; ++p)
      planes += (p ? "," : "") +
                (v4 ? verbs::HandFabric::host_v4(h, p) : verbs::HandFabric::host_v6(h, p));
    return RankSpec{{{"MRC_CONFIG", cfg},
                     {"MRC_PATH_MODE", "ecmp"},
                     {"MRC_PLANES", planes},
                     {"MRC_NETNS", fab_->host(h)},
                     {"MRC_PORT", "0"},
                     {"MRC_NIC_GBPS", "1"}}};
  }
  static inline std::optional<verbs::HandFabric> fab_;
  static inline std::string skip_;
};

TEST_P(NcclHandFabric, EcmpVerifiedStreamUsesBothPlanes) {
  auto tx = [](uint32_t p) {
    auto c = fab_->counters(fab_->host(0), verbs::HandFabric::port_dev(p));
    return c.ok() ? c->second : 0;
  };
  const uint64_t tx0 = tx(0), tx1 = tx(1);
  Board b(1);
  double gbps = 0;
  const std::string err = run_ranks(
      {host(0, GetParam()), host(1, GetParam())},
      [&](int rank) { return stream(rank, b, 2.0, &gbps); }, 120);
  EXPECT_EQ(err, "");
  const double d0 = static_cast<double>(tx(0) - tx0), d1 = static_cast<double>(tx(1) - tx1);
  std::printf("[ ecmp ] plugin stream over %s: plane tx MB %.1f %.1f\n",
              GetParam() ? "IPv4" : "IPv6", d0 / 1e6, d1 / 1e6);
  ASSERT_GT(d0 + d1, 20e6) << "the stream sent too little to judge";
  EXPECT_GT(d0 / (d0 + d1), 0.35);
  EXPECT_GT(d1 / (d0 + d1), 0.35);
}

INSTANTIATE_TEST_SUITE_P(Families, NcclHandFabric, ::testing::Values(false, true),
                         [](const auto& i) { return std::string(i.param ? "Ipv4" : "Ipv6"); });

}  // namespace
}  // namespace mrc::nccl::harness
