// Stock rdma_cm programs (rdmacm-utils' rping, perftest with -R) over MRC through the
// LD_PRELOAD shim, unmodified: on loopback planes in the test's own namespace (two processes
// with their own UDP ports, the connection manager on 127.0.0.1), and between two hosts of
// the namespace fabric (the connection manager over the management network, the data over
// the planes). Skips, saying why, where the programs are not installed, where namespaces
// cannot be made (the fabric tests), and under sanitizers (a sanitized shim cannot be
// preloaded into stock binaries; cm_test covers the connection manager).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "loopback_env.h"
#include "ns_test_fabric.h"
#include "ns_tools.h"

namespace mrc::verbs {
namespace {

using namespace std::chrono_literals;

// Why these tests cannot run here, or "".
std::string tools_missing() {
#if defined(MRC_TEST_ASAN) || defined(MRC_TEST_TSAN)
  return "built with a sanitizer: the shim cannot be preloaded into stock binaries";
#endif
  for (const char* tool : {"rping", "ucmatose", "ib_write_bw"}) {
    const std::string path = std::string("/usr/bin/") + tool;
    if (::access(path.c_str(), X_OK) != 0)
      return std::string(tool) + " is not installed (apt-get install rdmacm-utils perftest)";
  }
  return "";
}

// rping's client output: both ends ran `count` verified pings.
void expect_rping_ok(const PairResult& r, int count) {
  EXPECT_EQ(r.client_rc, 0) << r.both();
  EXPECT_EQ(r.server_rc, 0) << r.both();
  size_t pings = 0;
  for (size_t at = r.client.find("ping data: rdma-ping-"); at != std::string::npos;
       at = r.client.find("ping data: rdma-ping-", at + 1))
    ++pings;
  EXPECT_EQ(pings, static_cast<size_t>(count)) << r.client;
  EXPECT_NE(r.client.find("rdma-ping-" + std::to_string(count - 1) + ":"), std::string::npos);
  EXPECT_EQ(r.client.find("mismatch"), std::string::npos) << r.client;
}

void expect_perftest_ok(const std::string& tool, const PairResult& r) {
  EXPECT_EQ(r.client_rc, 0) << tool << "\n" << r.both();
  EXPECT_EQ(r.server_rc, 0) << tool << "\n" << r.both();
  EXPECT_NE(r.client.find("Data ex. method : rdma_cm"), std::string::npos) << r.client;
  const auto v = perftest_result_line(r.client);
  ASSERT_GE(v.size(), 5u) << tool << ": no result line\n" << r.client;
  EXPECT_GT(tool.find("_lat") != std::string::npos ? v[2] : v[3], 0) << r.client;
}

// ---- Loopback: two processes of this namespace --------------------------------------------
class RdmacmLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = tools_missing(); !why.empty()) GTEST_SKIP() << why;
    const uint16_t s =
        testing::free_udp_pair(static_cast<uint16_t>(10000 + (::getpid() % 9000) * 2));
    server_port_ = s;
    client_port_ = testing::free_udp_pair(static_cast<uint16_t>(s + 2));
    cm_port_ = testing::free_tcp_port();
  }
  std::vector<std::string> env(uint16_t udp_port) const {
    return {"MRC_PLANES=::1,::1", "MRC_PORT=" + std::to_string(udp_port), "MRC_STATS=0",
            std::string("LD_PRELOAD=") + MRC_VERBS_SHIM};
  }
  PairResult run(std::vector<std::string> server, std::vector<std::string> client) const {
    return run_server_client({"", env(server_port_), server}, {"", env(client_port_), client},
                             cm_port_, 60s);
  }
  uint16_t server_port_ = 0, client_port_ = 0, cm_port_ = 0;
};

TEST_F(RdmacmLoopback, Rping_100Verified) {
  const std::string p = std::to_string(cm_port_);
  expect_rping_ok(run({"rping", "-s", "-a", "127.0.0.1", "-p", p},
                      {"rping", "-c", "-a", "127.0.0.1", "-p", p, "-C", "100", "-v", "-V"}),
                  100);
}

// -q: the programs make and move their QPs themselves (rdma_init_qp_attr, rdma_establish).
TEST_F(RdmacmLoopback, Rping_AppMadeQps_10Verified) {
  const std::string p = std::to_string(cm_port_);
  expect_rping_ok(run({"rping", "-s", "-q", "-a", "127.0.0.1", "-p", p},
                      {"rping", "-c", "-q", "-a", "127.0.0.1", "-p", p, "-C", "10", "-v", "-V"}),
                  10);
}

TEST_F(RdmacmLoopback, Ucmatose) {
  const std::string p = std::to_string(cm_port_);
  const PairResult r =
      run({"ucmatose", "-b", "127.0.0.1", "-p", p}, {"ucmatose", "-s", "127.0.0.1", "-p", p});
  EXPECT_EQ(r.client_rc, 0) << r.both();
  EXPECT_EQ(r.server_rc, 0) << r.both();
  EXPECT_NE(r.client.find("test complete"), std::string::npos) << r.both();
  EXPECT_NE(r.server.find("data transfers complete"), std::string::npos) << r.both();
}

// Synchronous ids: rdma_create_ep, rdma_get_request and the rdma_verbs.h helpers.
TEST_F(RdmacmLoopback, RdmaServerClient) {
  const std::string p = std::to_string(cm_port_);
  const PairResult r = run({"rdma_server", "-p", p}, {"rdma_client", "-s", "127.0.0.1", "-p", p});
  EXPECT_EQ(r.client_rc, 0) << r.both();
  EXPECT_EQ(r.server_rc, 0) << r.both();
  EXPECT_NE(r.client.find("rdma_client: end 0"), std::string::npos) << r.both();
  EXPECT_NE(r.server.find("rdma_server: end 0"), std::string::npos) << r.both();
}

TEST_F(RdmacmLoopback, Perftest_R) {
  for (const std::string tool : {"ib_write_bw", "ib_read_bw", "ib_send_lat"}) {
    const std::string p = std::to_string(cm_port_);
    expect_perftest_ok(tool, run({tool, "-R", "-p", p}, {tool, "-R", "-p", p, "127.0.0.1"}));
    cm_port_ = testing::free_tcp_port();
  }
}

// qperf -cm1 (rdma_cm): bandwidth and latency over SEND/RECV, WRITE and READ, and its atomic
// tests that check every value returned (ver_rc_*: 1,024 posted at once), then `quit` stops
// the server. qperf leaves its QP to rdma_destroy_id, so mrc0 logs its CQ and PD still in use
// at exit (a real device refuses those calls too, silently).
TEST_F(RdmacmLoopback, Qperf_Cm1) {
  if (::access("/usr/bin/qperf", X_OK) != 0) GTEST_SKIP() << "qperf is not installed";
  const std::string p = std::to_string(cm_port_);
  const std::string data = std::to_string(testing::free_tcp_port());
  const std::vector<std::string> tests = {
      "rc_bw",           "rc_lat",           "rc_rdma_write_bw",
      "rc_rdma_read_bw", "ver_rc_fetch_add", "ver_rc_compare_swap"};
  std::vector<std::string> client = {"qperf", "-lp", p,   "-ip",      data,
                                     "-cm1",  "-t",  "1", "127.0.0.1"};
  client.insert(client.end(), tests.begin(), tests.end());
  client.push_back("quit");
  const PairResult r = run({"qperf", "-lp", p}, client);
  EXPECT_EQ(r.client_rc, 0) << r.both();
  EXPECT_EQ(r.server_rc, 0) << r.both();
  for (const std::string& t : tests) EXPECT_NE(r.client.find(t + ":"), std::string::npos) << t;
  EXPECT_EQ(r.client.find("mismatch"), std::string::npos) << r.client;
  EXPECT_EQ(r.client.find("failed"), std::string::npos) << r.client;
}

// ---- Two hosts of the namespace fabric -------------------------------------------------------
class NsRdmacm : public perf::NsFabricSuite<NsRdmacm> {
 public:
  static constexpr perf::TestFabricSpec kFabric{.tag = "mrcrc"};
  // No fabric for tests that would skip anyway.
  static void SetUpTestSuite() {
    if (tools_missing().empty()) NsFabricSuite::SetUpTestSuite();
  }

 protected:
  void SetUp() override {
    if (const std::string why = tools_missing(); !why.empty()) GTEST_SKIP() << why;
    NsFabricSuite::SetUp();
  }
  static std::vector<std::string> env(uint32_t host) {
    return {"MRC_CONFIG=" + fab_->host_config(host), "MRC_STATS=0",
            std::string("LD_PRELOAD=") + MRC_VERBS_SHIM};
  }
  static PairResult run(const std::vector<std::string>& server,
                        const std::vector<std::string>& client,
                        const std::function<void(Child&)>& during = {}) {
    return run_server_client({fab_->host_netns(0), env(0), server},
                             {fab_->host_netns(1), env(1), client}, kCmPort, 60s, during);
  }
  static constexpr uint16_t kCmPort = 18515;
};

TEST_F(NsRdmacm, Rping_BetweenHosts_100Verified) {
  const std::string a = nsfabric::mgmt_address(0), p = std::to_string(kCmPort);
  expect_rping_ok(run({"rping", "-s", "-a", a, "-p", p},
                      {"rping", "-c", "-a", a, "-p", p, "-C", "100", "-v", "-V"}),
                  100);
}

TEST_F(NsRdmacm, WriteBwR_BetweenHosts) {
  expect_perftest_ok("ib_write_bw",
                     run({"ib_write_bw", "-R"}, {"ib_write_bw", "-R", nsfabric::mgmt_address(0)}));
}

// Atomics through a plane outage: qperf's ver_rc_fetch_add keeps 1,024 fetch-and-adds in
// flight and checks that each returns the next value of the counter, so one lost or run twice
// ends the run with a mismatch. Host 1's T0 of plane 1 goes down 1.5 s in and comes back at
// 4 s; the run lasts 6 s.
TEST_F(NsRdmacm, QperfAtomics_PlaneDownAndUp_NoneLostOrRepeated) {
  if (::access("/usr/bin/qperf", X_OK) != 0) GTEST_SKIP() << "qperf is not installed";
  const std::string p = std::to_string(kCmPort);
  const std::vector<std::pair<double, std::string>> faults = {{1.5, "down t0 h1 p1"},
                                                              {4, "up t0 h1 p1"}};
  std::vector<std::string> fault_errors;
  const PairResult r = run(
      {"qperf", "-lp", p},
      {"qperf", "-lp", p, "-cm1", "-t", "6", nsfabric::mgmt_address(0), "ver_rc_fetch_add", "quit"},
      [&](Child& c) {
        const auto t0 = std::chrono::steady_clock::now();
        size_t next = 0;
        while (!c.pump()) {
          const double t =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          for (; next < faults.size() && t >= faults[next].first; ++next) {
            auto f = nsfabric::parse_fault(faults[next].second);
            auto s = f.ok() ? fab_->apply(*f) : Status<std::string>(Err(f.error()));
            if (!s.ok()) fault_errors.push_back(faults[next].second + ": " + s.error());
          }
          std::this_thread::sleep_for(50ms);
        }
        for (; next < faults.size(); ++next)  // the run ended early: restore the fabric
          if (auto f = nsfabric::parse_fault(faults[next].second); f.ok()) (void)fab_->apply(*f);
      });
  EXPECT_TRUE(fault_errors.empty()) << fault_errors[0];
  EXPECT_EQ(r.client_rc, 0) << r.both();
  EXPECT_EQ(r.server_rc, 0) << r.both();
  const size_t at = r.client.find("ver_rc_fetch_add:");
  ASSERT_NE(at, std::string::npos) << r.client;
  const size_t rate = r.client.find("msg_rate", at);
  ASSERT_NE(rate, std::string::npos) << r.client;
  std::printf("qperf ver_rc_fetch_add through the outage: %s\n",
              r.client.substr(rate, r.client.find('\n', rate) - rate).c_str());
  EXPECT_EQ(r.client.find("mismatch"), std::string::npos) << r.client;
}

}  // namespace
}  // namespace mrc::verbs
