// Tests for libmrc/src/api/ocp_ctl.cc's SRv6 EVs: an explicit SRv6 EV given through the OCP
// controller API is the destination address it spells (the controller's segment list), not
// a path re-derived from the fabric file. Needs root (a network namespace); skips otherwise.
//
// Setup: a namespace whose lo holds host 0's port address of a generated 2-host fabric and
// an address X in the fabric's block that is none of the plan's paths. mrc0 runs as host 0
// (path_mode srv6) with its sockets in that namespace. An EV probe toward host 1 on an EV
// spelling X must arrive at a socket bound to X; a plan-derived address would go nowhere
// (no route in the namespace).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "mrc/common/netns.h"
#include "mrc/mrc.h"
#include "mrc/mrc_ctl.h"
#include "srv6/config.h"

namespace mrc {
namespace {

constexpr uint16_t kPort = 31917;

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

mrc_ctl_ev srv6_ev(const srv6::Ipv6& a, uint8_t port) {
  mrc_ctl_ev ev{};
  std::memcpy(ev.val, a.data(), 16);
  ev.port = port;
  return ev;
}

class OcpSrv6Ev : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto s = mrc::netns_supported(); !s) GTEST_SKIP() << "needs root: " << s.error();
    ns_ = "mrcev" + std::to_string(getpid());
    dir_ = "/tmp/" + ns_;
    ASSERT_EQ(sh("ip netns add " + ns_), 0);
    made_ = true;
    auto f = srv6::Fabric::make(
        srv6::FabricConfig{.hosts = 2, .planes = 1, .spines = 2, .hosts_per_t0 = 1});
    ASSERT_TRUE(f.ok());
    fabric_ = std::make_unique<srv6::Fabric>(*f);
    // X: block | T1 0 | T0 1 | host uSID 0xf000 | 0x0abc: a list our plan never makes (its
    // last uSID would be T0 1's).
    x_ = fabric_->address(0, {fabric_->t1_usid(0, 0), fabric_->t0_usid(0, 1), 0xf000, 0x0abc});
    for (const srv6::Path& p : fabric_->paths(0, 1, 0)) ASSERT_NE(p.dst, x_);
    ASSERT_EQ(sh("ip -n " + ns_ + " link set lo up && ip -n " + ns_ + " -6 addr add " +
                 srv6::format(fabric_->host_address(0, 0)) + "/128 dev lo nodad && ip -n " + ns_ +
                 " -6 addr add " + srv6::format(x_) + "/128 dev lo nodad"),
              0);
    ASSERT_EQ(sh("mkdir -p " + dir_), 0);
    std::ofstream(dir_ + "/fabric.json") << srv6::dump(*fabric_);
    std::ofstream(dir_ + "/mrc.json")
        << R"({"path_mode": "srv6", "fabric": ")" + dir_ + R"(/fabric.json", "host": 0, "port": )" +
               std::to_string(kPort) + R"(, "netns": ")" + ns_ + R"(", "gso": false})";
    setenv("MRC_CONFIG", (dir_ + "/mrc.json").c_str(), 1);
    setenv("MRC_STATS", "0", 1);
  }
  void TearDown() override {
    if (ctl_) mrc_destroy_context(ctl_);
    if (vctx_) ibv_close_device(vctx_);
    if (rx_ >= 0) close(rx_);
    if (made_) sh("ip netns del " + ns_);
    if (!dir_.empty()) sh("rm -rf " + dir_);
  }

  std::string ns_, dir_;
  bool made_ = false;
  std::unique_ptr<srv6::Fabric> fabric_;
  srv6::Ipv6 x_{};
  int rx_ = -1;
  ibv_context* vctx_ = nullptr;
  mrc_context* ctl_ = nullptr;
};

TEST_F(OcpSrv6Ev, ExplicitEv_ProbeGoesToTheAddressItSpells) {
  // The receiver at X, on the port host 1 would listen on.
  auto fd = mrc::in_netns(ns_, [&]() -> Result<int, std::string> {
    const int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(kPort);
    std::memcpy(&a.sin6_addr, x_.data(), 16);
    if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      return Err(std::string("bind X: ") + std::strerror(errno));
    return s;
  });
  ASSERT_TRUE(fd.ok()) << fd.error();
  rx_ = *fd;

  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_TRUE(list != nullptr && n >= 1);
  for (int i = 0; i < n && !vctx_; ++i)
    if (std::strcmp(ibv_get_device_name(list[i]), "mrc0") == 0) vctx_ = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  ASSERT_TRUE(vctx_ != nullptr) << "mrc0 did not open";
  ctl_ = mrc_create_context(vctx_, nullptr);
  ASSERT_TRUE(ctl_ != nullptr);
  mrc_ctl_device_attr ca{};
  ASSERT_EQ(mrc_ctl_query_device(vctx_, &ca), 0);
  ASSERT_TRUE(ca.ev.ev_fmt_mode_mask & MRC_CTL_EV_FMT_MODE_SRV6);

  ibv_gid sgid{};
  ASSERT_EQ(ibv_query_gid(vctx_, 1, 0, &sgid), 0);
  ibv_gid dgid{};
  std::memcpy(dgid.raw, fabric_->host_address(1, 0).data(), 16);  // host 1

  mrc_ctl_ep_req req{};
  req.req_id = 7;
  req.sgid = sgid;
  req.dgid = dgid;
  req.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_SRV6;
  req.req_ev = srv6_ev(x_, 1);
  mrc_ctl_ep_rsp rsp[1];
  int nrsp = -1;
  // Nobody answers at X: the call times out (ETIMEDOUT, no response), having sent the probe.
  errno = 0;
  EXPECT_EQ(
      mrc_ctl_ep_batch_send_wait(ctl_, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 50000000u, rsp, &nrsp),
      -1);
  EXPECT_EQ(errno, ETIMEDOUT) << std::strerror(errno);
  EXPECT_EQ(nrsp, 0);
  pollfd p{rx_, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1) << "no datagram arrived at " << srv6::format(x_);
  uint8_t buf[2048];
  sockaddr_in6 from{};
  socklen_t len = sizeof from;
  const ssize_t got = recvfrom(rx_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
  EXPECT_GT(got, 0);
  srv6::Ipv6 src{};
  std::memcpy(src.data(), &from.sin6_addr, 16);
  EXPECT_EQ(src, fabric_->host_address(0, 0)) << srv6::format(src);

  // An address outside the plane's block is refused, and names the block.
  srv6::Ipv6 outside{0x20, 0x01, 0x0d, 0xb8, 0, 1};
  req.req_ev = srv6_ev(outside, 1);
  errno = 0;
  EXPECT_EQ(
      mrc_ctl_ep_batch_send_wait(ctl_, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1000000u, rsp, &nrsp),
      -1);
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace mrc
