// Tests of tools/mrc-perf/baseline.h on two namespaces of our own joined by two veth "planes".
#include "baseline.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mrc/common/netns.h"

namespace mrc::perf {
namespace {

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

bool have(const std::string& prog) { return sh("command -v " + prog) == 0; }

// A network namespace we created; deleted with the object (its veth ends go with it).
class Netns {
 public:
  explicit Netns(std::string name) : name_(std::move(name)) {
    ok_ = sh("ip netns add " + name_) == 0;
  }
  ~Netns() {
    if (ok_) sh("ip netns del " + name_);
  }
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  bool ok_ = false;
};

// A TCP connect from netns `from` to [to]:9 is refused: the path forwards both ways.
bool reachable(const std::string& from, const std::string& to) {
  bool refused = false;
  auto s = mrc::in_netns(from, [&]() -> Status<std::string> {
    const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const timeval tv{0, 100'000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(9);
    inet_pton(AF_INET6, to.c_str(), &sa.sin6_addr);
    refused =
        connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno == ECONNREFUSED;
    close(fd);
    return {};
  });
  return s.ok() && refused;
}

// <pfx>-a (client) and <pfx>-b (server), plane p a veth pair <pfx>-a<p> / <pfx>-b<p> with
// fd00:<p>::1 and fd00:<p>::2, MTU 9000, no DAD.
class BaselineTest : public ::testing::Test {
 protected:
  static constexpr int kPlanes = 2;

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    a_ = std::make_unique<Netns>(pfx_ + "-a");
    if (!a_->ok()) GTEST_SKIP() << "`ip netns add` is not permitted here";
    b_ = std::make_unique<Netns>(pfx_ + "-b");
    ASSERT_TRUE(b_->ok());
    for (const auto* ns : {a_.get(), b_.get()}) {
      ASSERT_EQ(sh("ip netns exec " + ns->name() +
                   " sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0"),
                0);
      ASSERT_EQ(sh("ip -n " + ns->name() + " link set lo up"), 0);
    }
    for (int p = 0; p < kPlanes; ++p) {
      const std::string a = pfx_ + "-a" + std::to_string(p), b = pfx_ + "-b" + std::to_string(p);
      const std::string net = "fd00:" + std::to_string(p) + "::";
      ASSERT_EQ(sh("ip link add " + a + " netns " + a_->name() + " mtu 9000 type veth peer name " +
                   b + " netns " + b_->name() + " mtu 9000"),
                0);
      ASSERT_EQ(sh("ip -n " + a_->name() + " addr add " + net + "1/64 dev " + a + " nodad"), 0);
      ASSERT_EQ(sh("ip -n " + b_->name() + " addr add " + net + "2/64 dev " + b + " nodad"), 0);
      ASSERT_EQ(sh("ip -n " + a_->name() + " link set " + a + " up"), 0);
      ASSERT_EQ(sh("ip -n " + b_->name() + " link set " + b + " up"), 0);
      spec_.client_addrs.push_back(net + "1");
      spec_.server_addrs.push_back(net + "2");
    }
    spec_.client_netns = a_->name();
    spec_.server_netns = b_->name();
    spec_.duration_s = 2;
    spec_.interval_s = 0.1;
    // A new link drops packets for up to ~1 s (link watch); wait until every plane forwards.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (const auto& addr : spec_.server_addrs) {
      while (!reachable(a_->name(), addr)) {
        ASSERT_LT(std::chrono::steady_clock::now(), end) << addr << " not reachable";
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  // Samples of a ~2 s run at 0.1 s: most intervals there, about 0.1 s apart, in order.
  static void expect_samples(const BaselineResult& r) {
    ASSERT_GE(r.samples.size(), 15u);
    EXPECT_LE(r.samples.size(), 21u);
    double prev = 0;
    for (const auto& s : r.samples) {
      EXPECT_GT(s.t_s - prev, 0.05) << "t=" << s.t_s;
      EXPECT_LT(s.t_s - prev, 0.2) << "t=" << s.t_s;
      EXPECT_GE(s.gbps, 0);
      prev = s.t_s;
    }
    EXPECT_GT(r.mean_gbps, 0);
  }

  const std::string pfx_ = "mrcbl" + std::to_string(getpid());
  std::unique_ptr<Netns> a_, b_;  // b_ is deleted first
  BaselineSpec spec_;
};

TEST_F(BaselineTest, RunTcp_TwoSeconds) {
  if (!have("iperf3")) GTEST_SKIP() << "iperf3 not installed";
  std::vector<double> ticks;
  spec_.on_tick = [&](double t) { ticks.push_back(t); };
  auto r = run_tcp(spec_);
  ASSERT_TRUE(r.ok()) << r.error();
  expect_samples(*r);
  EXPECT_GE(ticks.size(), 15u);
  EXPECT_LE(ticks.size(), 20u);
  std::cout << r->detail << ": " << r->mean_gbps << " Gbit/s\n";
}

TEST_F(BaselineTest, RunMptcp_SubflowPerPlane) {
  if (!have("iperf3")) GTEST_SKIP() << "iperf3 not installed";
  if (!have("mptcpize")) GTEST_SKIP() << "mptcpize not installed (Debian package mptcpize)";
  auto r = run_mptcp(spec_);
  ASSERT_TRUE(r.ok()) << r.error();
  expect_samples(*r);
  EXPECT_GE(r->subflows, 2) << r->detail;
  EXPECT_NE(r->detail.find("fd00:1::1"), std::string::npos) << r->detail;
  std::cout << r->detail << ": " << r->mean_gbps << " Gbit/s\n";
  // Endpoints are flushed afterwards.
  EXPECT_EQ(sh("ip -n " + a_->name() + " mptcp endpoint show | grep -q ."), 256);
}

TEST_F(BaselineTest, RunUdpCeiling_TwoSeconds) {
  std::vector<double> ticks;
  spec_.on_tick = [&](double t) { ticks.push_back(t); };
  auto r = run_udp_ceiling(spec_);
  ASSERT_TRUE(r.ok()) << r.error();
  expect_samples(*r);
  EXPECT_EQ(r->samples.size(), 20u);
  EXPECT_EQ(ticks.size(), 20u);
  EXPECT_DOUBLE_EQ(r->samples.back().t_s, 2.0);
  EXPECT_NE(r->detail.find("pps"), std::string::npos) << r->detail;
  std::cout << r->detail << "\n";
}

// udp_app_bytes: the senders read, and the receiver lands, in turn through that much memory
// (rounded up to whole sends and 64 KiB receive buffers); unset, one send and 16 buffers.
TEST_F(BaselineTest, RunUdpCeiling_AppMemoryIsUsed) {
  spec_.duration_s = 1;
  auto r = run_udp_ceiling(spec_);
  ASSERT_TRUE(r.ok()) << r.error();
  // 65507 / 8264 = 7 segments of 8264 B per send
  EXPECT_NE(r->detail.find("memory: 57848 B sent from, 1048576 B received into"), std::string::npos)
      << r->detail;
  spec_.udp_app_bytes = 4 << 20;
  r = run_udp_ceiling(spec_);
  ASSERT_TRUE(r.ok()) << r.error();
  // ceil(4 MiB / 57848 B) = 73 sends; 64 receive buffers
  EXPECT_NE(r->detail.find("memory: 4222904 B sent from, 4194304 B received into"),
            std::string::npos)
      << r->detail;
  EXPECT_GT(r->mean_gbps, 0) << r->detail;
}

// Unset, the segment is an MRC data packet for the client's link: 8192 B of payload + 72 B of
// MRC header on 9000-byte links (the fixture's), 1024 + 72 on 1500-byte links.
TEST_F(BaselineTest, RunUdpCeiling_SegmentFollowsTheLinkMtu) {
  spec_.duration_s = 1;
  auto r = run_udp_ceiling(spec_);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_NE(r->detail.find(", 8264 B segments"), std::string::npos) << r->detail;
  for (const auto& [ns, dev] : {std::pair{a_->name(), pfx_ + "-a0"}, {b_->name(), pfx_ + "-b0"}})
    ASSERT_EQ(sh("ip -n " + ns + " link set " + dev + " mtu 1500"), 0);
  r = run_udp_ceiling(spec_);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_NE(r->detail.find(", 1096 B segments"), std::string::npos) << r->detail;
  EXPECT_GT(r->mean_gbps, 0) << r->detail;
}

TEST_F(BaselineTest, RunUdpCeiling_SegmentOverMtuIsAnError) {
  spec_.udp_segment_bytes = 9000;
  auto r = run_udp_ceiling(spec_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("path MTU"), std::string::npos) << r.error();
}

TEST_F(BaselineTest, RunTcp_BadSpecIsAnError) {
  spec_.duration_s = 1.5;
  auto r = run_tcp(spec_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("whole number"), std::string::npos) << r.error();
  spec_.duration_s = 1;
  spec_.server_addrs[0] = "fd00::zz";
  r = run_tcp(spec_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not an IPv6 address: 'fd00::zz'"), std::string::npos) << r.error();
}

TEST(Baseline, MissingNetnsIsNamed) {
  BaselineSpec spec;
  spec.client_netns = "mrcbl-no-such-netns";
  spec.server_netns = spec.client_netns;
  spec.client_addrs = spec.server_addrs = {"::1"};
  for (auto* run : {&run_tcp, &run_mptcp, &run_udp_ceiling}) {
    auto r = (*run)(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), "netns mrcbl-no-such-netns does not exist");
  }
}

// The baselines are measured at the receiver, as MRC is: the server's own intervals (client
// -J --get-server-output, server -J), not the client's view of what it sent.
TEST(Baseline, ParseIperf3_ReceiverIntervalsAndBytesOverTime) {
  const std::string client = R"({
    "intervals": [{"sum": {"start": 0, "end": 0.1, "bytes": 999999999, "bits_per_second": 8e10}}],
    "end": {"sum_received": {"bytes": 999999999, "seconds": 0.1, "bits_per_second": 8e10}},
    "server_output_json": {
      "intervals": [
        {"sum": {"start": 0, "end": 0.1, "bytes": 12500000, "bits_per_second": 1e9}},
        {"sum": {"start": 0.1, "end": 0.25, "bytes": 12500000, "bits_per_second": 6.7e8}},
        {"sum": {"start": 0.25, "end": 0.254, "bytes": 500000, "bits_per_second": 1e9}}],
      "end": {"sum_received": {"bytes": 25500000, "seconds": 0.254}}}})";
  auto r = detail::parse_iperf3(client);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->samples.size(), 2u);  // the 4 ms closing interval joins the one before
  EXPECT_DOUBLE_EQ(r->samples[0].gbps, 1.0);
  EXPECT_NEAR(r->samples[1].gbps, 13000000 * 8 / 0.154 / 1e9, 1e-9);
  EXPECT_NEAR(r->samples[1].dur_s, 0.154, 1e-12);
  EXPECT_DOUBLE_EQ(r->samples[1].t_s, 0.254);
  double bits = 0;
  for (const Sample& x : r->samples) bits += x.gbps * 1e9 * x.dur_s;
  EXPECT_NEAR(bits, 25500000 * 8.0, 1);
  EXPECT_NEAR(r->mean_gbps, 25500000 * 8 / 0.254 / 1e9, 1e-9);

  auto no_server = detail::parse_iperf3(R"({"intervals": [], "end": {}})");
  ASSERT_FALSE(no_server.ok());
  EXPECT_NE(no_server.error().find("no receiver (server) intervals"), std::string::npos)
      << no_server.error();
  auto failed = detail::parse_iperf3(R"({"server_output_json": {"error": "boom"}})");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error(), "iperf3 server: boom");
}

}  // namespace
}  // namespace mrc::perf
