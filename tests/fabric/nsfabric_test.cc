// Tests for tools/mrc-fabric/nsfabric.cc on real namespaces: UDP over every SRv6 path and
// plain ECMP, each fault and its undo, the IPv4 management network, the host configuration
// files, teardown. Needs root; skips otherwise.
#include "nsfabric.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <utility>

#include "command.h"
#include "gray.h"
#include "mrc/common/fd.h"
#include "mrc/io/config.h"
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

// While alive, SIGTERM and SIGINT run a handler that only sets a flag, as in mrc-perf (whose
// fabric children are forked from it): a child that kept the handler would not end on SIGTERM.
volatile std::sig_atomic_t g_signalled = 0;
class FlagOnSigterm {
  using SigAction = struct sigaction;

 public:
  FlagOnSigterm() {
    SigAction sa{};
    sa.sa_handler = [](int) { g_signalled = 1; };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
  }
  ~FlagOnSigterm() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
  }
  FlagOnSigterm(const FlagOnSigterm&) = delete;
  FlagOnSigterm& operator=(const FlagOnSigterm&) = delete;

 private:
  SigAction old_term_{};
  SigAction old_int_{};
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
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
        auto fd = mrc::in_netns(nf_->host_netns(h), [&]() -> Result<int, std::string> {
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
    return mrc::in_netns(nf_->switch_netns(s), [&] { return srv6::link_is_up(ifname); });
  }

  std::optional<int> flapper_pid() const {
    std::smatch m;
    const std::string st = nf_->status();
    if (!std::regex_search(st, m, std::regex("pid ([0-9]+)"))) return std::nullopt;
    return std::stoi(m[1]);
  }

  // ---- measurements for the gray faults, on host 0 -> host 1 (or back) over one plane ----

  // A datagram of the measurements: send time (steady clock, shared by every namespace),
  // sequence number, then a fixed pattern.
  struct Probe {
    int64_t sent_ns = 0;
    uint32_t seq = 0;
    uint8_t pattern[500];
  };
  static void fill(Probe& p) {
    for (size_t i = 0; i < sizeof p.pattern; ++i) p.pattern[i] = static_cast<uint8_t>(i * 7);
  }
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void drain(int fd) {
    Probe p;
    while (recv(fd, &p, sizeof p, 0) > 0) {
    }
  }

  // Median one-way delay (ms) of `n` probes from src to dst's port on `plane`, one at a time.
  double one_way_ms(uint32_t src, uint32_t dst, uint32_t plane, int n = 15) {
    const int out = socks_.at({src, plane}).get();
    const int in = socks_.at({dst, plane}).get();
    drain(in);
    const sockaddr_in6 sa = socket_address(fabric().host_address(dst, plane), kPort);
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      Probe p;
      fill(p);
      p.sent_ns = now_ns();
      p.seq = static_cast<uint32_t>(i);
      (void)sendto(out, &p, sizeof p, 0, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
      pollfd pf{in, POLLIN, 0};
      if (poll(&pf, 1, 1000) <= 0) continue;
      Probe r;
      if (recv(in, &r, sizeof r, 0) == static_cast<ssize_t>(sizeof r) && r.seq == p.seq) {
        ms.push_back((now_ns() - r.sent_ns) / 1e6);
      }
    }
    if (ms.empty()) return -1;
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  struct Stream {
    int sent = 0, got = 0, inversions = 0, bad = 0;
    double gbps = 0;  // received bytes / (last arrival - first arrival)
  };
  // Sends `n` probes of `bytes` (>= sizeof(Probe)) from host 0 to host 1 on `plane`, `gap`
  // apart (none: as fast as the socket takes them), receiving on the same thread, and counts
  // what arrived, out of order (below the highest sequence seen) and changed (a bit flipped).
  Stream stream(uint32_t plane, int n, std::chrono::microseconds gap,
                size_t bytes = sizeof(Probe)) {
    const int out = socks_.at({0, plane}).get();
    const int in = socks_.at({1, plane}).get();
    drain(in);
    const sockaddr_in6 sa = socket_address(fabric().host_address(1, plane), kPort);
    std::vector<uint8_t> buf(bytes), rbuf(bytes);
    Probe ref;
    fill(ref);
    Stream st;
    std::vector<int64_t> sent_ns(static_cast<size_t>(n));
    int64_t first = 0, last = 0, max_seq = -1;
    uint64_t rx_bytes = 0;
    const auto take = [&] {
      for (;;) {
        const ssize_t k = recv(in, rbuf.data(), rbuf.size(), 0);
        if (k <= 0) return;
        const int64_t t = now_ns();
        if (st.got++ == 0) first = t;
        last = t;
        rx_bytes += static_cast<uint64_t>(k);
        Probe r;
        std::memcpy(&r, rbuf.data(), sizeof r);
        if (r.seq >= sent_ns.size() || r.sent_ns != sent_ns[r.seq] ||
            std::memcmp(r.pattern, ref.pattern, sizeof r.pattern) != 0) {
          ++st.bad;  // a bit flipped anywhere in it
          continue;
        }
        if (static_cast<int64_t>(r.seq) < max_seq) ++st.inversions;
        max_seq = std::max<int64_t>(max_seq, r.seq);
      }
    };
    for (int i = 0; i < n; ++i) {
      Probe p = ref;
      p.seq = static_cast<uint32_t>(i);
      p.sent_ns = sent_ns[static_cast<size_t>(i)] = now_ns();
      std::memcpy(buf.data(), &p, sizeof p);
      if (sendto(out, buf.data(), buf.size(), 0, reinterpret_cast<const sockaddr*>(&sa),
                 sizeof sa) > 0) {
        ++st.sent;
      }
      take();
      if (gap.count() > 0) {
        const int64_t until = now_ns() + gap.count() * 1000;
        while (now_ns() < until) take();
      }
    }
    const int64_t end = now_ns() + 500'000'000;  // what is held or queued arrives
    while (st.got < st.sent && now_ns() < end) {
      pollfd pf{in, POLLIN, 0};
      poll(&pf, 1, 10);
      take();
    }
    if (last > first) st.gbps = rx_bytes * 8.0 / static_cast<double>(last - first);
    return st;
  }

  // Host 0 sends on plane 0 with zero UDP checksums and host 1 takes them (as MRC with --trim).
  void zero_udp_checksums_on_plane0() {
    const int one = 1;
    ASSERT_EQ(setsockopt(socks_.at({0, 0}).get(), IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one),
              0);
    ASSERT_EQ(setsockopt(socks_.at({1, 0}).get(), IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one),
              0);
  }

  // The T0 port (namespace, interface) of host h's link on `plane`.
  std::pair<std::string, std::string> t0_port(uint32_t h, uint32_t plane) const {
    const SwitchId t0{Tier::kT0, plane, fabric().t0_of(h)};
    for (const srv6::Port& p : fabric().ports(t0)) {
      if (p.to_host && p.peer == h) return {nf_->switch_netns(t0), p.ifname};
    }
    return {};
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

// Every port, host or switch, re-solicits a neighbour after kNeighRetransMs (IPv6 and IPv4):
// a solicitation lost to a full port queue left a plane dark for Linux's 1 s.
TEST_F(NsFabricTest, Up_EveryPortResolicitsNeighboursIn100Ms) {
  const std::string ms = std::to_string(kNeighRetransMs) + "\n";
  std::vector<std::pair<std::string, std::string>> ports;  // (namespace, interface)
  for (uint32_t p = 0; p < 2; ++p) {
    ports.emplace_back(nf_->host_netns(0), fabric().host_ifname(0, p));
    const SwitchId t0{Tier::kT0, p, fabric().t0_of(0)};
    for (const srv6::Port& port : fabric().ports(t0))
      ports.emplace_back(nf_->switch_netns(t0), port.ifname);  // its host and spine ports
  }
  for (const auto& [ns, ifname] : ports) {
    for (const char* v : {"ipv6", "ipv4"}) {
      auto r = run_command({"ip", "netns", "exec", ns, "sysctl", "-n",
                            std::string("net.") + v + ".neigh." + ifname + ".retrans_time_ms"});
      ASSERT_TRUE(r.ok()) << r.error();
      EXPECT_EQ(*r, ms) << ns << " " << ifname << " " << v;
    }
  }
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
    return mrc::in_netns(nf.host_netns(host), [&]() -> Result<int, std::string> {
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
  const FlagOnSigterm handler;  // as in mrc-perf: the flapper must still end on SIGTERM
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
  const auto t = std::chrono::steady_clock::now();
  ASSERT_TRUE(fault("unflap link p0 t0 s0").ok());
  EXPECT_LT(seconds_since(t), 1.5) << "unflap waited for the flapper to be killed";
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
  ASSERT_TRUE(fault("delay link h1 p1 500").ok());
  const std::vector<int> lines = nf_->delay_lines();
  ASSERT_EQ(lines.size(), 2u) << nf_->status();
  socks_.clear();
  auto s = nf_->down();
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(netns_with(prefix_).empty());
  EXPECT_FALSE(std::filesystem::exists(mrc::netns_path(prefix_ + "-mgmt")));
  EXPECT_FALSE(process_alive(*pid));
  for (int line : lines) EXPECT_FALSE(process_alive(line)) << "delay line " << line;
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

namespace mrc::nsfabric {
namespace {

TEST_F(NsFabricTest, Up_TrafficFlowsAtOnceWhileSendingThroughTheRestore) {
  // Host 0 keeps sending over plane 0 while its T0 comes back. A route restored before the
  // other end of its cable was up sent the neighbour solicitation into a link without
  // carrier, and Linux retried it 1 s later (the repaired plane dark for a second).
  ASSERT_TRUE(fault("down t0 h0 p0").ok());
  const int out = socks_.at({0, 0}).get(), in = socks_.at({1, 0}).get();
  drain(in);
  const sockaddr_in6 sa = socket_address(via_spine(0, 1, 0, 0), kPort);
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    const uint64_t v = 7;
    while (!stop) {
      (void)sendto(out, &v, sizeof v, 0, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
      std::this_thread::sleep_for(1ms);
    }
  });
  std::this_thread::sleep_for(20ms);
  const auto t_up = std::chrono::steady_clock::now();
  const auto up = fault("up t0 h0 p0");
  const auto t_done = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> first;
  while (!first && std::chrono::steady_clock::now() < t_up + 3s) {
    pollfd p{in, POLLIN, 0};
    if (poll(&p, 1, 10) > 0) first = std::chrono::steady_clock::now();
  }
  stop = true;
  sender.join();
  ASSERT_TRUE(up.ok()) << up.error();
  ASSERT_TRUE(first.has_value()) << "nothing arrived within 3 s of up";
  const auto ms = [](auto d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  EXPECT_LT(ms(*first - t_done), 300)
      << "first datagram " << ms(*first - t_done) << " ms after up returned (up took "
      << ms(t_done - t_up) << " ms)";
}

// ---- gray failures: each measured on the link, then removed ----

TEST_F(NsFabricTest, Delay_OneWayDelayGrowsByIt_ZeroRemoves) {
  const double before = one_way_ms(0, 1, 0);
  ASSERT_GE(before, 0) << "no probe came back";
  ASSERT_TRUE(fault("delay link h1 p0 5000").ok());
  const double there = one_way_ms(0, 1, 0), back = one_way_ms(1, 0, 0);
  EXPECT_GE(there, 5.0) << "h0 -> h1 over the delayed link";
  EXPECT_GE(back, 5.0) << "h1 -> h0 over the delayed link";
  EXPECT_LT(there, before + 5.0 + 50) << "held far longer than the delay";
  EXPECT_LT(one_way_ms(0, 1, 1), 5.0) << "plane 1 is not delayed";
  EXPECT_NE(nf_->status().find("delay link h1 p0 5000"), std::string::npos);
  const auto [ns, port] = t0_port(1, 0);
  // Packets other than the probes (neighbour discovery) may still be in the 5 ms line when the
  // counters are first read: every held packet must come back, so wait for the line to empty.
  auto c = gray_counters(ns, port);
  for (const auto until = std::chrono::steady_clock::now() + 1s;
       c.ok() && c->returned != c->held && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(10ms);
    c = gray_counters(ns, port);
  }
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_GE(c->held, 10u) << "the probes h0 -> h1 leave this port";
  EXPECT_EQ(c->returned, c->held) << "held packets never came back";
  ASSERT_TRUE(fault("delay link h1 p0 0").ok());
  EXPECT_LT(one_way_ms(0, 1, 0), 5.0);
  EXPECT_FALSE(gray_counters(ns, port).ok()) << "the program stayed attached";
}

// The repair of a delay stops both ends' lines at once, also when the process that forked them
// handles SIGTERM (mrc-perf does): the lines end on SIGTERM, they are not killed 2 s later.
TEST_F(NsFabricTest, Delay_RepairWithSigtermHandler_LinesGoneAtOnce) {
  const FlagOnSigterm handler;
  ASSERT_TRUE(fault("delay link h1 p0 1000").ok());
  const std::vector<int> pids = nf_->delay_lines();
  ASSERT_EQ(pids.size(), 2u) << nf_->status();
  const auto t = std::chrono::steady_clock::now();
  ASSERT_TRUE(fault("delay link h1 p0 0").ok());
  EXPECT_LT(seconds_since(t), 1.5) << "the repair waited for the lines to be killed";
  for (int pid : pids) EXPECT_FALSE(process_alive(pid)) << pid;
  const auto [ns, port] = t0_port(1, 0);
  EXPECT_FALSE(run_command({"ip", "-n", ns, "link", "show", "dl" + port}).ok())
      << "the delay line's veth pair stayed";
  EXPECT_EQ(g_signalled, 0) << "the signal reached this process";
}

// A delay the line could not hold at the link's rate (10 Gbit/s here) is refused, naming the
// delay, the rate and the limit; nothing is left applied. A delay it can hold shows its drop
// counts in the status.
TEST_F(NsFabricTest, Delay_MoreThanTheLineHolds_RefusedNamingDelayAndRate) {
  auto r = fault("delay link h1 p0 100000");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("100000 us"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("10 Gbit/s"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("64 MiB"), std::string::npos) << r.error();
  EXPECT_EQ(nf_->status().find("delay link"), std::string::npos) << nf_->status();
  EXPECT_TRUE(nf_->delay_lines().empty());
  ASSERT_TRUE(fault("degrade link h1 p0 1").ok());  // at 1 Gbit/s, 100 ms is 12 MB: held
  ASSERT_TRUE(fault("delay link h1 p0 100000").ok());
  EXPECT_NE(nf_->status().find("dropped 0 over the held limit, 0 at its socket"), std::string::npos)
      << nf_->status();
  ASSERT_TRUE(fault("delay link h1 p0 0").ok());
  ASSERT_TRUE(fault("degrade link h1 p0 0").ok());
}

// Delay and corruption on one link: every packet goes through the delay line, and the corrupted
// share is still corrupted (on its way back out of the port).
TEST_F(NsFabricTest, DelayAndCorrupt_HeldPacketsCorruptedToo) {
  ASSERT_TRUE(fault("delay link h1 p0 1000").ok());
  ASSERT_TRUE(fault("corrupt link h1 p0 20").ok());
  ASSERT_NO_FATAL_FAILURE(zero_udp_checksums_on_plane0());
  const Stream zero = stream(0, 300, std::chrono::microseconds(100));
  EXPECT_EQ(zero.got, zero.sent);
  EXPECT_GT(zero.bad, 300 / 20) << "about 20% should arrive changed";
  EXPECT_LT(zero.bad, 300 * 2 / 5);
  const auto [ns, port] = t0_port(1, 0);
  auto c = gray_counters(ns, port);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_GE(c->held, 300u) << "the delay holds every packet";
  EXPECT_EQ(c->corrupted, static_cast<uint64_t>(zero.bad));
  ASSERT_TRUE(fault("corrupt link h1 p0 0").ok());
  ASSERT_TRUE(fault("delay link h1 p0 0").ok());
}

TEST_F(NsFabricTest, Degrade_RateFallsToIt_ZeroRestoresThePortRate) {
  ASSERT_TRUE(fault("degrade link h1 p0 0.1").ok());
  const Stream d = stream(0, 1500, std::chrono::microseconds(0), 8000);
  // The sender outruns 0.1 Gbit/s: the tbf queue (limit + burst, about 80 packets of 8000 B)
  // and what drains while it sends arrive, about 100; enough to time the rate.
  EXPECT_GE(d.got, 50);
  EXPECT_LT(d.gbps, 0.1 * 1.2) << "faster than the degraded rate";
  EXPECT_GT(d.gbps, 0.1 * 0.5) << "far below the degraded rate";
  EXPECT_NE(nf_->status().find("degrade link h1 p0 0.1"), std::string::npos);
  ASSERT_TRUE(fault("degrade link h1 p0 0").ok());
  const Stream r = stream(0, 1500, std::chrono::microseconds(0), 8000);
  EXPECT_GT(r.gbps, 0.3) << "the port rate (10 Gbit/s) did not come back";
}

TEST_F(NsFabricTest, Corrupt_ZeroChecksumFlippedChecksummedDropped_Counted) {
  ASSERT_TRUE(fault("corrupt link h1 p0 20").ok());
  const auto [ns, port] = t0_port(1, 0);
  // UDP with checksums: the chosen ones are dropped, none arrives changed.
  const Stream sum = stream(0, 300, std::chrono::microseconds(100));
  EXPECT_EQ(sum.bad, 0);
  EXPECT_GT(sum.sent - sum.got, 300 / 20) << "about 20% should be lost";
  EXPECT_LT(sum.sent - sum.got, 300 * 2 / 5);
  auto c = gray_counters(ns, port);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->dropped, static_cast<uint64_t>(sum.sent - sum.got));
  EXPECT_EQ(c->corrupted, 0u);
  // Zero UDP checksums (as MRC sends with --trim): every one arrives, some changed.
  ASSERT_NO_FATAL_FAILURE(zero_udp_checksums_on_plane0());
  const Stream zero = stream(0, 300, std::chrono::microseconds(100));
  EXPECT_EQ(zero.got, zero.sent);
  EXPECT_GT(zero.bad, 300 / 20);
  EXPECT_LT(zero.bad, 300 * 2 / 5);
  c = gray_counters(ns, port);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->corrupted, static_cast<uint64_t>(zero.bad));
  ASSERT_TRUE(fault("corrupt link h1 p0 0").ok());
  const Stream after = stream(0, 100, std::chrono::microseconds(100));
  EXPECT_EQ(after.got, after.sent);
  EXPECT_EQ(after.bad, 0);
}

TEST_F(NsFabricTest, Reorder_SomeOvertakenNoneLost_ZeroRemoves) {
  ASSERT_TRUE(fault("reorder link h1 p0 30 3000").ok());
  const Stream r = stream(0, 200, std::chrono::microseconds(100));
  EXPECT_EQ(r.got, r.sent) << "reordering lost packets";
  EXPECT_GT(r.inversions, 200 / 10) << "about 30% should arrive after later ones";
  EXPECT_EQ(r.bad, 0);
  const auto [ns, port] = t0_port(1, 0);
  auto c = gray_counters(ns, port);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_GT(c->held, 200u / 10);
  EXPECT_LT(c->held, 200u * 6 / 10);
  ASSERT_TRUE(fault("reorder link h1 p0 0").ok());
  const Stream after = stream(0, 200, std::chrono::microseconds(100));
  EXPECT_EQ(after.got, after.sent);
  EXPECT_EQ(after.inversions, 0);
}

TEST_F(NsFabricTest, OneWay_LossAndBlackholeOnlyThatDirection) {
  // Host link, up (host 1 -> its T0): host 1's packets lost, and its sends do not fail.
  ASSERT_TRUE(fault("loss link h1 p0 100 up").ok());
  EXPECT_TRUE(fails(1, 0, fabric().host_address(0, 0), 0));
  EXPECT_TRUE(works(0, 0, via_spine(0, 1, 0, 0), 1));
  const sockaddr_in6 sa = socket_address(fabric().host_address(0, 0), kPort);
  const uint64_t v = 0;
  EXPECT_EQ(sendto(socks_.at({1, 0}).get(), &v, sizeof v, 0, reinterpret_cast<const sockaddr*>(&sa),
                   sizeof sa),
            static_cast<ssize_t>(sizeof v))
      << "a link loss must be silent: " << std::strerror(errno);
  EXPECT_NE(nf_->status().find("loss link h1 p0 100 up"), std::string::npos);
  ASSERT_TRUE(fault("loss link h1 p0 0 up").ok());
  EXPECT_TRUE(works(1, 0, fabric().host_address(0, 0), 0));

  // Uplink of host 1's T0 to spine 0, down (spine -> T0): only what comes down it is lost.
  const std::string link = "link p0 t" + std::to_string(fabric().t0_of(1)) + " s0";
  ASSERT_TRUE(fault("blackhole " + link + " down").ok());
  EXPECT_TRUE(fails(0, 0, via_spine(0, 1, 0, 0), 1));
  EXPECT_TRUE(works(1, 0, via_spine(1, 0, 0, 0), 0));
  EXPECT_TRUE(works(0, 0, via_spine(0, 1, 0, 1), 1));
  ASSERT_TRUE(fault("unblackhole " + link + " down").ok());
  expect_all_work({0});
}

}  // namespace
}  // namespace mrc::nsfabric
