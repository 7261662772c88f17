// Tests for tools/mrc-fabric/nsfabric.cc on real namespaces: UDP over every SRv6 path and
// plain ECMP, each fault and its undo, the IPv4 management network, the host configuration
// files, teardown. Needs root; skips otherwise.
#include "nsfabric.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <utility>

#include "command.h"
#include "common/fd.h"
#include "io/config.h"
#include "srv6/netlink.h"

namespace mrc::nsfabric {
namespace {

using namespace std::chrono_literals;
using srv6::Ipv6;
using srv6::SwitchId;
using srv6::Tier;

constexpr uint16_t kPort = 7000;
constexpr uint16_t kMgmtPort = 7001;  // TCP on the management network

std::vector<std::string> netns_with(const std::string& prefix) {
  std::vector<std::string> v;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with(prefix + "-")) v.push_back(n);
  }
  return v;
}

bool process_alive(int pid) {
  return std::filesystem::exists("/proc/" + std::to_string(pid) + "/comm");
}

bool root_or_skip_reason(const std::string& prefix, std::string* why) {
  const std::string probe = prefix + "-probe";
  auto r = run_command({"ip", "netns", "add", probe});
  if (!r) {
    *why = "needs root to create network namespaces: " + r.error();
    return false;
  }
  (void)run_command({"ip", "netns", "del", probe});
  return true;
}

sockaddr_in6 socket_address(const Ipv6& a, uint16_t port) {
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(port);
  std::memcpy(&sa.sin6_addr, a.data(), 16);
  return sa;
}

// A fabric of 2 hosts x 2 planes x 2 spines, one host per T0 (10 namespaces and P-mgmt),
// with a UDP socket per host port bound to its address (made inside the host's namespace).
class NsFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = "mrcft" + std::to_string(getpid());
    if (std::string why; !root_or_skip_reason(prefix_, &why)) GTEST_SKIP() << why;

    srv6::FabricConfig c;
    c.hosts = 2;
    c.planes = 2;
    c.spines = 2;
    c.hosts_per_t0 = 1;
    c.host_port_gbps = 10;
    Options o = options();
    o.prefix = prefix_;
    auto f = srv6::Fabric::make(c);
    ASSERT_TRUE(f.ok());
    auto nf = NsFabric::up(*f, o);
    ASSERT_TRUE(nf.ok()) << nf.error();
    nf_.emplace(std::move(nf).value());
    for (uint32_t h = 0; h < 2; ++h) {
      for (uint32_t p = 0; p < 2; ++p) {
        auto fd = io::in_netns(nf_->host_netns(h), [&]() -> Result<int, std::string> {
          const int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
          const sockaddr_in6 sa = socket_address(fabric().host_address(h, p), kPort);
          if (s < 0 || bind(s, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
            return Err("socket/bind: " + std::string(std::strerror(errno)));
          }
          return s;
        });
        ASSERT_TRUE(fd.ok()) << fd.error();
        socks_[{h, p}] = UniqueFd(*fd);
      }
    }
  }

  void TearDown() override {
    socks_.clear();
    auto s = NsFabric::down(prefix_);
    EXPECT_TRUE(s.ok()) << s.error();
    EXPECT_TRUE(netns_with(prefix_).empty());
  }

  virtual Options options() const { return {}; }

  const srv6::Fabric& fabric() const { return nf_->fabric(); }

  Status<std::string> fault(const std::string& text) {
    auto f = parse_fault(text);
    if (!f) return Err(f.error());
    return nf_->apply(*f);
  }

  // Sends n datagrams from host src's port on `plane` to dst and counts those that reach
  // host `to`'s port on that plane (payloads tagged, so stragglers of other calls do not
  // count). Waits up to `wait` for them.
  int deliver(uint32_t src, uint32_t plane, const Ipv6& dst, uint32_t to, int n,
              std::chrono::milliseconds wait = 300ms) {
    const uint64_t tag = ++tag_;
    const int out = socks_.at({src, plane}).get();
    const int in = socks_.at({to, plane}).get();
    const sockaddr_in6 sa = socket_address(dst, kPort);
    for (int i = 0; i < n; ++i) {
      // A failing send (no route while a port is down) is a lost datagram.
      (void)sendto(out, &tag, sizeof tag, 0, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    }
    int got = 0;
    const auto end = std::chrono::steady_clock::now() + wait;
    while (got < n && std::chrono::steady_clock::now() < end) {
      pollfd p{in, POLLIN, 0};
      poll(&p, 1, 20);
      uint64_t v = 0;
      while (recv(in, &v, sizeof v, 0) == static_cast<ssize_t>(sizeof v)) got += v == tag;
    }
    return got;
  }

  // All n arrive (waiting long enough for neighbour discovery on a loaded machine).
  bool works(uint32_t src, uint32_t plane, const Ipv6& dst, uint32_t to) {
    return deliver(src, plane, dst, to, 3, 3000ms) == 3;
  }
  bool fails(uint32_t src, uint32_t plane, const Ipv6& dst, uint32_t to) {
    return deliver(src, plane, dst, to, 3) == 0;
  }

  Ipv6 via_spine(uint32_t src, uint32_t dst, uint32_t plane, uint32_t spine) const {
    return fabric().paths(src, dst, plane).at(spine).dst;
  }

  // Every SRv6 path and the plain address, both directions, on the given planes.
  void expect_all_work(std::vector<uint32_t> planes = {0, 1}) {
    for (uint32_t p : planes) {
      for (auto [a, b] : {std::pair<uint32_t, uint32_t>{0, 1}, {1, 0}}) {
        for (const srv6::Path& path : fabric().paths(a, b, p)) {
          EXPECT_TRUE(works(a, p, path.dst, b))
              << "h" << a << " -> h" << b << " via " << srv6::format(path.dst);
        }
        EXPECT_TRUE(works(a, p, fabric().host_address(b, p), b))
            << "plain h" << a << " -> h" << b << " plane " << p;
      }
    }
  }

  Result<bool, std::string> link_up(SwitchId s, const std::string& ifname) {
    return io::in_netns(nf_->switch_netns(s), [&] { return srv6::link_is_up(ifname); });
  }

  std::optional<int> flapper_pid() const {
    std::smatch m;
    const std::string st = nf_->status();
    if (!std::regex_search(st, m, std::regex("pid ([0-9]+)"))) return std::nullopt;
    return std::stoi(m[1]);
  }

  std::string prefix_;
  std::optional<NsFabric> nf_;
  std::map<std::pair<uint32_t, uint32_t>, UniqueFd> socks_;  // (host, plane)
  uint64_t tag_ = 0;
};

TEST_F(NsFabricTest, Up_EverySrv6PathAndPlainEcmp_Deliver) {
  expect_all_work();
  // Both kinds of route coexist: the plain /64s do not capture SRv6 addresses (every path
  // above crossed its own spine) and vice versa.
  EXPECT_EQ(fabric().paths(0, 1, 0).size(), 2u);
}

TEST_F(NsFabricTest, Up_StateAttachAndSecondUpRefused) {
  EXPECT_EQ(netns_with(prefix_).size(), 11u);
  EXPECT_TRUE(std::filesystem::exists(state_dir(prefix_) + "/fabric.json"));
  auto again = NsFabric::attach(prefix_);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->fabric().config().spines, 2u);
  EXPECT_EQ(again->options().mtu, 9000);
  EXPECT_EQ(again->switch_netns({Tier::kT1, 1, 0}), prefix_ + "-t1p1-0");
  auto dup = NsFabric::up(fabric(), again->options());
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().find("exists"), std::string::npos) << dup.error();
  EXPECT_EQ(netns_with(prefix_).size(), 11u);  // the refused up() removed nothing
  EXPECT_FALSE(NsFabric::attach(prefix_ + "x").ok());
  EXPECT_TRUE(again->options().mgmt);
  const std::string st = nf_->status();
  EXPECT_NE(st.find("faults: none"), std::string::npos) << st;
  EXPECT_NE(st.find("p0t0-h0 up [tbf Sent"), std::string::npos) << st;
  EXPECT_NE(st.find(prefix_ + "-mgmt: br0 up"), std::string::npos) << st;
  EXPECT_NE(st.find(prefix_ + "-h1: MRC_CONFIG=" + state_dir(prefix_) +
                    "/hosts/h1.json, mgmt0 10.255.0.2 up"),
            std::string::npos)
      << st;
}

TEST(NsFabricMgmt, Address_DistinctDottedIpv4) {
  EXPECT_EQ(mgmt_address(0), "10.255.0.1");
  EXPECT_EQ(mgmt_address(249), "10.255.0.250");
  EXPECT_EQ(mgmt_address(250), "10.255.1.1");
  EXPECT_EQ(mgmt_address(kMaxMgmtHosts - 1), "10.255.255.250");
  std::set<std::string> seen;
  for (uint32_t h = 0; h < kMaxMgmtHosts; ++h) {
    in_addr a{};
    ASSERT_EQ(inet_pton(AF_INET, mgmt_address(h).c_str(), &a), 1) << h;
    EXPECT_EQ(ntohl(a.s_addr) >> 16, 0x0AFFu) << h;  // 10.255.0.0/16
    seen.insert(mgmt_address(h));
  }
  EXPECT_EQ(seen.size(), kMaxMgmtHosts);
}

bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  return poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

// A TCP connection from host `from` to host `to`'s management address (sockets made in
// their namespaces), one byte each way.
Status<std::string> mgmt_tcp(const NsFabric& nf, uint32_t from, uint32_t to) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(kMgmtPort);
  const std::string where = mgmt_address(to) + ":" + std::to_string(kMgmtPort);
  if (inet_pton(AF_INET, mgmt_address(to).c_str(), &sa.sin_addr) != 1) return Err(where);
  const auto* addr = reinterpret_cast<const sockaddr*>(&sa);
  const auto make = [&](uint32_t host, bool listener) {
    return io::in_netns(nf.host_netns(host), [&]() -> Result<int, std::string> {
      const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (s < 0) return Err("socket: " + std::string(std::strerror(errno)));
      const int one = 1;
      setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      const bool ok = listener ? bind(s, addr, sizeof sa) == 0 && listen(s, 1) == 0
                               : connect(s, addr, sizeof sa) == 0 || errno == EINPROGRESS;
      if (!ok) {
        const std::string e = std::strerror(errno);
        close(s);
        return Err((listener ? "listen on " : "connect to ") + where + ": " + e);
      }
      return s;
    });
  };
  auto l = make(to, true);
  if (!l) return Err(l.error());
  const UniqueFd listener(*l);
  auto c = make(from, false);
  if (!c) return Err(c.error());
  const UniqueFd client(*c);
  int err = 0;
  socklen_t len = sizeof err;
  if (!wait_for(client.get(), POLLOUT, 3000ms)) return Err("connect to " + where + ": timeout");
  getsockopt(client.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return Err("connect to " + where + ": " + std::strerror(err));
  if (!wait_for(listener.get(), POLLIN, 3000ms)) return Err(std::string("accept: timeout"));
  const UniqueFd server(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (server.get() < 0) return Err("accept: " + std::string(std::strerror(errno)));
  for (auto [out, in] : {std::pair{client.get(), server.get()}, {server.get(), client.get()}}) {
    char b = 'x';
    if (send(out, &b, 1, MSG_NOSIGNAL) != 1) {
      return Err("send: " + std::string(std::strerror(errno)));
    }
    if (!wait_for(in, POLLIN, 3000ms) || recv(in, &b, 1, 0) != 1) {
      return Err(std::string("recv: nothing"));
    }
  }
  return {};
}

TEST_F(NsFabricTest, Mgmt_TcpIpv4BetweenHosts_Ipv6OffUntouchedByFaults) {
  auto s = mgmt_tcp(*nf_, 0, 1);
  EXPECT_TRUE(s.ok()) << s.error();
  s = mgmt_tcp(*nf_, 1, 0);
  EXPECT_TRUE(s.ok()) << s.error();
  for (uint32_t h = 0; h < 2; ++h) {
    auto v6 = run_command({"ip", "netns", "exec", nf_->host_netns(h), "sysctl", "-n",
                           "net.ipv6.conf.mgmt0.disable_ipv6"});
    ASSERT_TRUE(v6.ok()) << v6.error();
    EXPECT_EQ(*v6, "1\n") << "h" << h;
    auto a = run_command({"ip", "-n", nf_->host_netns(h), "addr", "show", "dev", "mgmt0"});
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_NE(a->find("inet " + mgmt_address(h) + "/16"), std::string::npos) << *a;
    EXPECT_EQ(a->find("inet6"), std::string::npos) << *a;
  }
  // Host 1 cut off from every plane: the management network still connects it.
  ASSERT_TRUE(fault("down t0 h1 p0").ok());
  ASSERT_TRUE(fault("down t0 h1 p1").ok());
  EXPECT_TRUE(fails(0, 0, fabric().host_address(1, 0), 1));
  s = mgmt_tcp(*nf_, 0, 1);
  EXPECT_TRUE(s.ok()) << s.error();
}

TEST_F(NsFabricTest, HostConfig_LoadsAsThatHostOnItsPortAddresses) {
  for (uint32_t h = 0; h < 2; ++h) {
    const std::string path = nf_->host_config(h);
    EXPECT_EQ(path, state_dir(prefix_) + "/hosts/h" + std::to_string(h) + ".json");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    auto c = io::load_host_config([&](const char* name) -> std::optional<std::string> {
      if (std::string(name) == "MRC_CONFIG") return path;
      return std::nullopt;
    });
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c->udp.path_mode, io::PathMode::kSrv6);
    EXPECT_EQ(c->udp.local_host, h);
    ASSERT_TRUE(c->udp.fabric);
    EXPECT_EQ(c->udp.fabric->config().hosts, 2u);
    ASSERT_EQ(c->udp.planes.size(), 2u);
    for (uint32_t p = 0; p < 2; ++p) {
      EXPECT_EQ(c->udp.planes[p].address, srv6::format(fabric().host_address(h, p)));
    }
    EXPECT_NE(c->sources.find(path), std::string::npos) << c->sources;
  }
}

TEST_F(NsFabricTest, SwitchDownUp_PathsThroughItFailThenWork) {
  ASSERT_TRUE(fault("down t1 p0 s0").ok());
  EXPECT_TRUE(fails(0, 0, via_spine(0, 1, 0, 0), 1));
  EXPECT_TRUE(works(0, 0, via_spine(0, 1, 0, 1), 1));
  EXPECT_TRUE(works(0, 0, fabric().host_address(1, 0), 1));  // ECMP avoids the dead spine
  EXPECT_TRUE(works(0, 1, via_spine(0, 1, 1, 0), 1));        // plane 1's spine 0 is another
  auto up = link_up({Tier::kT0, 0, 0}, "p0t0-s0");
  ASSERT_TRUE(up.ok()) << up.error();
  EXPECT_FALSE(*up);
  ASSERT_TRUE(fault("up t1 p0 s0").ok());
  expect_all_work({0});

  // The T0 above host 1 in plane 0: all of plane 0 between the hosts fails.
  ASSERT_TRUE(fault("down t0 h1 p0").ok());
  EXPECT_TRUE(fails(0, 0, via_spine(0, 1, 0, 0), 1));
  EXPECT_TRUE(fails(0, 0, via_spine(0, 1, 0, 1), 1));
  EXPECT_TRUE(fails(1, 0, fabric().host_address(0, 0), 0));
  EXPECT_TRUE(works(0, 1, via_spine(0, 1, 1, 1), 1));
  EXPECT_NE(nf_->status().find("down t0 p0 t1"), std::string::npos);
  ASSERT_TRUE(fault("up t0 p0 t1").ok());  // the same switch, named by index
  expect_all_work();
}

TEST_F(NsFabricTest, LinkDownUp_OnlyThatLink) {
  ASSERT_TRUE(fault("down link p0 t0 s1").ok());
  EXPECT_TRUE(fails(0, 0, via_spine(0, 1, 0, 1), 1));
  EXPECT_TRUE(fails(1, 0, via_spine(1, 0, 0, 1), 0));
  EXPECT_TRUE(works(0, 0, via_spine(0, 1, 0, 0), 1));
  // Spine 0 still carries both ways. (Not the plain address from host 1: its T0 still
  // hashes over both spines, since nothing withdraws routes, and spine 1 has none to host 0.)
  EXPECT_TRUE(works(1, 0, via_spine(1, 0, 0, 0), 0));
  // A switch down and up restores its links, but not the one that is down by itself.
  ASSERT_TRUE(fault("down t1 p0 s1").ok());
  ASSERT_TRUE(fault("up t1 p0 s1").ok());
  EXPECT_TRUE(fails(0, 0, via_spine(0, 1, 0, 1), 1));
  EXPECT_TRUE(fails(1, 0, via_spine(1, 0, 0, 1), 0));
  ASSERT_TRUE(fault("up link p0 t0 s1").ok());
  expect_all_work({0});

  // A host port: its plane fails at the host (no leak into plane 0), the other works.
  ASSERT_TRUE(fault("down link h1 p1").ok());
  EXPECT_TRUE(fails(0, 1, via_spine(0, 1, 1, 0), 1));
  EXPECT_TRUE(fails(1, 1, fabric().host_address(0, 1), 0));
  EXPECT_TRUE(works(1, 0, fabric().host_address(0, 0), 0));
  ASSERT_TRUE(fault("up link h1 p1").ok());
  expect_all_work();
}

TEST_F(NsFabricTest, Blackhole_LinksStayUpTrafficDropped) {
  ASSERT_TRUE(fault("blackhole t1 p1 s1").ok());
  EXPECT_TRUE(fails(0, 1, via_spine(0, 1, 1, 1), 1));
  EXPECT_TRUE(works(0, 1, via_spine(0, 1, 1, 0), 1));
  for (const char* port : {"p1s1-t0", "p1s1-t1"}) {
    auto up = link_up({Tier::kT1, 1, 1}, port);
    ASSERT_TRUE(up.ok()) << up.error();
    EXPECT_TRUE(*up) << port;
  }
  EXPECT_NE(nf_->status().find("blackhole t1 p1 s1"), std::string::npos);
  ASSERT_TRUE(fault("unblackhole t1 p1 s1").ok());
  expect_all_work({1});
}

TEST_F(NsFabricTest, Loss_SomeLostNotAll_ZeroRemoves) {
  ASSERT_TRUE(fault("loss link p0 t0 s0 50").ok());
  const int n = 200;
  const int got = deliver(0, 0, via_spine(0, 1, 0, 0), 1, n, 2000ms);
  EXPECT_GT(got, n / 10);
  EXPECT_LT(got, n - n / 10);
  EXPECT_EQ(deliver(0, 0, via_spine(0, 1, 0, 1), 1, 20, 3000ms), 20);  // the other spine
  EXPECT_NE(nf_->status().find("loss link p0 t0 s0 50"), std::string::npos);
  ASSERT_TRUE(fault("loss link p0 t0 s0 0").ok());
  EXPECT_EQ(deliver(0, 0, via_spine(0, 1, 0, 0), 1, 20, 3000ms), 20);
}

TEST_F(NsFabricTest, FlapUnflap_TogglesThenStopsLinkUp) {
  ASSERT_TRUE(fault("flap link p0 t0 s0 100").ok());
  auto again = fault("flap link p0 t0 s0 100");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().find("already flapping"), std::string::npos) << again.error();
  const std::optional<int> pid = flapper_pid();
  ASSERT_TRUE(pid.has_value()) << nf_->status();
  EXPECT_TRUE(process_alive(*pid));
  bool seen_up = false, seen_down = false;
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (!(seen_up && seen_down) && std::chrono::steady_clock::now() < end) {
    auto up = link_up({Tier::kT0, 0, 0}, "p0t0-s0");
    ASSERT_TRUE(up.ok()) << up.error();
    (*up ? seen_up : seen_down) = true;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(seen_up && seen_down);
  ASSERT_TRUE(fault("unflap link p0 t0 s0").ok());
  EXPECT_FALSE(process_alive(*pid));
  auto up = link_up({Tier::kT0, 0, 0}, "p0t0-s0");
  ASSERT_TRUE(up.ok()) << up.error();
  EXPECT_TRUE(*up);
  expect_all_work({0});
}

TEST_F(NsFabricTest, Down_RemovesNamespacesFlapperAndState_Idempotent) {
  ASSERT_TRUE(fault("flap link h0 p1 60").ok());
  ASSERT_TRUE(fault("loss link h1 p0 5").ok());
  const std::optional<int> pid = flapper_pid();
  ASSERT_TRUE(pid.has_value());
  socks_.clear();
  auto s = nf_->down();
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(netns_with(prefix_).empty());
  EXPECT_FALSE(std::filesystem::exists(io::netns_path(prefix_ + "-mgmt")));
  EXPECT_FALSE(process_alive(*pid));
  EXPECT_FALSE(std::filesystem::exists(state_dir(prefix_)));
  s = NsFabric::down(prefix_);
  EXPECT_TRUE(s.ok()) << s.error();
}

TEST_F(NsFabricTest, Down_WithoutStateRemovesNamespacesByName) {
  std::filesystem::remove_all(state_dir(prefix_));
  socks_.clear();
  auto s = NsFabric::down(prefix_);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(netns_with(prefix_).empty());
}

TEST_F(NsFabricTest, Apply_RangeErrorsNameTheTarget) {
  auto s = fault("down t0 p9 t0");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "t0 p9 t0: plane 9 out of range (fabric has 2 planes)");
  s = fault("blackhole t1 p1 s2");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "t1 p1 s2: spine 2 out of range (fabric has 2 spines per plane)");
  s = fault("down link p0 t5 s0");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "link p0 t5 s0: T0 5 out of range (fabric has 2 T0s per plane)");
  s = fault("loss link h2 p0 10");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "link h2 p0: host 2 out of range (fabric has 2 hosts)");
  s = fault("trim link h5 p0 1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "link h5 p0: host 5 out of range (fabric has 2 hosts)");
  EXPECT_NE(nf_->status().find("faults: none"), std::string::npos);
}

// The same fabric programmed with the ip commands, host GSO off, a smaller MTU, no
// management network.
class NsFabricIpCommandsTest : public NsFabricTest {
 protected:
  Options options() const override {
    Options o;
    o.use_netlink = false;
    o.gso = false;
    o.mtu = 4000;
    o.mgmt = false;
    return o;
  }
};

TEST_F(NsFabricIpCommandsTest, Up_Delivers_GsoOffMtuSet) {
  expect_all_work();
  auto k = run_command({"ip", "netns", "exec", nf_->host_netns(1), "ethtool", "-k", "p1h1"});
  ASSERT_TRUE(k.ok()) << k.error();
  EXPECT_NE(k->find("tx-udp-segmentation: off"), std::string::npos) << *k;
  auto l =
      run_command({"ip", "-n", nf_->switch_netns({Tier::kT1, 0, 1}), "link", "show", "p0s1-t0"});
  ASSERT_TRUE(l.ok()) << l.error();
  EXPECT_NE(l->find("mtu 4000"), std::string::npos) << *l;
  // Faults re-program through netlink either way.
  ASSERT_TRUE(fault("down link p1 t1 s0").ok());
  EXPECT_TRUE(fails(0, 1, via_spine(0, 1, 1, 0), 1));
  ASSERT_TRUE(fault("up link p1 t1 s0").ok());
  expect_all_work({1});
}

TEST_F(NsFabricIpCommandsTest, MgmtOff_NoMgmtNetworkHostConfigsStill) {
  EXPECT_EQ(netns_with(prefix_).size(), 10u);
  auto a = run_command({"ip", "-n", nf_->host_netns(0), "link", "show", "mgmt0"});
  EXPECT_FALSE(a.ok());
  EXPECT_TRUE(std::filesystem::exists(nf_->host_config(1)));
  auto again = NsFabric::attach(prefix_);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_FALSE(again->options().mgmt);
  const std::string st = nf_->status();
  EXPECT_NE(st.find("management: none"), std::string::npos) << st;
}

// A leftover management namespace alone makes the fabric exist: up() refuses and removes
// nothing; down() removes it by name.
TEST(NsFabricMgmt, LeftoverMgmtNamespace_UpRefusedDownRemovesIt) {
  const std::string prefix = "mrcfm" + std::to_string(getpid());
  if (std::string why; !root_or_skip_reason(prefix, &why)) GTEST_SKIP() << why;
  auto r = run_command({"ip", "netns", "add", prefix + "-mgmt"});
  ASSERT_TRUE(r.ok()) << r.error();
  srv6::FabricConfig c;
  c.hosts = 1;
  c.planes = 1;
  c.spines = 1;
  c.hosts_per_t0 = 1;
  auto f = srv6::Fabric::make(c);
  ASSERT_TRUE(f.ok());
  Options o;
  o.prefix = prefix;
  auto nf = NsFabric::up(*f, o);
  ASSERT_FALSE(nf.ok());
  EXPECT_NE(nf.error().find("exists"), std::string::npos) << nf.error();
  EXPECT_EQ(netns_with(prefix), std::vector<std::string>{prefix + "-mgmt"});
  auto s = NsFabric::down(prefix);
  EXPECT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(netns_with(prefix).empty());
}

TEST(NsFabricMgmt, TooManyHosts_Rejected) {
  srv6::FabricConfig c;
  c.hosts = kMaxMgmtHosts + 1;
  c.planes = 1;
  c.spines = 1;
  c.hosts_per_t0 = 4096;
  auto f = srv6::Fabric::make(c);
  ASSERT_TRUE(f.ok()) << f.error();
  Options o;
  o.prefix = "mrcfbig";
  auto r = NsFabric::up(*f, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "hosts: the management network addresses at most 64000 hosts, got 64001 "
            "(turn it off)");
}

TEST(NsFabricOptions, BadPrefixAndMtu_Rejected) {
  srv6::FabricConfig c;
  c.hosts = 1;
  c.planes = 1;
  c.spines = 1;
  c.hosts_per_t0 = 1;
  auto f = srv6::Fabric::make(c);
  ASSERT_TRUE(f.ok());
  Options o;
  o.prefix = "a-b";
  auto r = NsFabric::up(*f, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("prefix 'a-b'"), std::string::npos) << r.error();
  o.prefix = "ok";
  o.mtu = 100;
  r = NsFabric::up(*f, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "mtu: must be 1280..65535, got 100");
  EXPECT_FALSE(NsFabric::down("../etc").ok());
}

}  // namespace
}  // namespace mrc::nsfabric
