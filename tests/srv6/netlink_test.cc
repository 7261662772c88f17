// Tests for srv6/src/netlink.cc: a plan applied through netlink leaves the same kernel
// state as its ip commands. Needs root (network namespaces); skips otherwise.
#include "srv6/netlink.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>

#include "hand_fabric.h"
#include "mrc/common/netns.h"
#include "srv6/config.h"

namespace mrc::srv6 {
namespace {

struct Shell {
  int rc = 0;
  std::string out;  // stdout and stderr
};

Shell sh(const std::string& cmd) {
  Shell r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  r.rc = pclose(p);
  return r;
}

Fabric small_fabric() {
  FabricConfig c;
  c.hosts = 4;
  c.planes = 2;
  c.spines = 2;
  c.hosts_per_t0 = 2;
  return *Fabric::make(c);
}

// Every interface a plan names, but lo.
std::set<std::string> devices(const Plan& p) {
  std::set<std::string> d;
  for (const AddrRecord& a : p.addrs) d.insert(a.dev);
  for (const RouteRecord& r : p.routes) {
    for (const Nexthop& n : r.nexthops) d.insert(n.dev);
  }
  d.erase("lo");
  return d;
}

// The records behind the text (no root needed).
TEST(Srv6Plans, HostTablesAndPlainRoutes_Text) {
  const Fabric f = small_fabric();
  const auto h = ip_commands(host_plan(f, 3));
  ASSERT_EQ(h.size(), 8u);
  EXPECT_EQ(h[4], "ip -6 rule add from fcbb:bbbb:f001:6::/128 table 101 priority 101");
  EXPECT_EQ(h[5], "ip -6 route add fcbb:bbbb::/32 via fe80::2 dev p0h3");
  EXPECT_EQ(h[6], "ip -6 route add fcbb:bbbb::/32 via fe80::2 dev p1h3 table 101");
  EXPECT_EQ(h[7], "ip -6 route add unreachable fcbb:bbbb::/32 table 101 metric 65535");
  const auto t0 = ip_commands(switch_plan(f, {Tier::kT0, 0, 0}, {.plain_routes = true}));
  EXPECT_EQ(t0.back(),
            "ip -6 route add fcbb:bbbb:f001:2::/64 nexthop via fe80::2 dev p0t0-s0 nexthop via "
            "fe80::2 dev p0t0-s1");
  const auto t1 = ip_commands(switch_plan(f, {Tier::kT1, 1, 0}, {.end_dev = "srv6"}));
  EXPECT_EQ(t1[2],
            "ip -6 route add fcbb:bbbb:7::/48 encap seg6local action End flavors next-csid "
            "lblen 32 nflen 16 dev srv6");
  EXPECT_EQ(linux_switch_commands(f, {Tier::kT1, 1, 0}).size(), t1.size());
}

// Two namespaces with the interfaces of a plan (veths whose other ends sit in a third one),
// all up; one is programmed through netlink, the other with the ip commands.
class Srv6Netlink : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = "mrcnl" + std::to_string(getpid());
    const Shell probe = sh("ip netns add " + prefix_ + "-probe");
    if (probe.rc != 0) GTEST_SKIP() << "needs root to create network namespaces: " << probe.out;
    made_.push_back(prefix_ + "-probe");
  }
  void TearDown() override {
    for (const std::string& n : made_) sh("ip netns del " + n);
  }

  std::string make_ns(const std::string& suffix) {
    const std::string ns = prefix_ + "-" + suffix;
    EXPECT_EQ(sh("ip netns add " + ns).rc, 0);
    made_.push_back(ns);
    // No DAD and no automatic link-locals: both namespaces then hold exactly what is added.
    EXPECT_EQ(sh("ip netns exec " + ns +
                 " sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0"
                 " net.ipv6.conf.default.addr_gen_mode=1 && ip -n " +
                 ns + " link set lo up")
                  .rc,
              0);
    return ns;
  }

  // Makes a namespace with the plan's interfaces, all up.
  std::string make_switch(const std::string& suffix, const Plan& p) {
    const std::string ns = make_ns(suffix);
    const std::string peers = make_ns(suffix + "p");
    int i = 0;
    for (const std::string& dev : devices(p)) {
      const std::string q = "q" + std::to_string(i++);
      const Shell r = sh("ip link add " + dev + " netns " + ns + " type veth peer name " + q +
                         " netns " + peers + " && ip -n " + ns + " link set " + dev +
                         " up && ip -n " + peers + " link set " + q + " up");
      EXPECT_EQ(r.rc, 0) << r.out;
    }
    return ns;
  }

  static Shell apply_ip(const std::string& ns, const Plan& p) {
    std::string batch;
    for (const std::string& l : ip_commands(p))
      batch += l.substr(std::string("ip -6 ").size()) + "\n";
    return sh("printf '" + batch + "' | ip -6 -n " + ns + " -batch -");
  }

  // Sorted lines (the kernel lists some routes in the order they were made), a multipath
  // route's nexthop lines kept on its own line.
  static std::string sorted(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (!l.empty() && l[0] == '\t' && !lines.empty()) {
        lines.back() += l;
      } else {
        lines.push_back(l);
      }
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const std::string& l : lines) out += l + "\n";
    return out;
  }

  static std::string state(const std::string& ns) {
    const std::string addrs = sh("ip -n " + ns + " -6 -br addr show").out;
    // Name and addresses only: the peer's index and the operstate (which follows admin up
    // a moment later) are not programmed.
    return "routes:\n" + sorted(sh("ip -n " + ns + " -6 route show table all").out) + "rules:\n" +
           sh("ip -n " + ns + " -6 rule show").out + "addrs:\n" +
           std::regex_replace(addrs, std::regex("(@if[0-9]+)? +[A-Z]+ +"), " ");
  }

  // Programs the plan both ways and compares.
  void expect_same(const Plan& p) {
    const std::string a = make_switch("a" + std::to_string(n_), p);
    const std::string b = make_switch("b" + std::to_string(n_), p);
    ++n_;
    auto s = mrc::in_netns(a, [&] { return apply(p); });
    ASSERT_TRUE(s.ok()) << s.error();
    const Shell r = apply_ip(b, p);
    ASSERT_EQ(r.rc, 0) << r.out;
    const std::string sa = state(a);
    EXPECT_EQ(sa, state(b));
    EXPECT_NE(sa.find("fcbb:bbbb"), std::string::npos) << sa;
  }

  std::string prefix_;
  std::vector<std::string> made_;
  int n_ = 0;
};

TEST_F(Srv6Netlink, T0WithPlainRoutes_SameAsIpCommands) {
  const Fabric f = small_fabric();
  const Plan p = switch_plan(f, {Tier::kT0, 1, 0}, {.plain_routes = true});
  ASSERT_TRUE(std::any_of(p.routes.begin(), p.routes.end(),
                          [](const RouteRecord& r) { return r.nexthops.size() > 1; }));
  expect_same(p);
}

TEST_F(Srv6Netlink, T1WithEndDevice_SameAsIpCommands) {
  const Fabric f = small_fabric();
  expect_same(switch_plan(f, {Tier::kT1, 0, 1}, {.plain_routes = true, .end_dev = "srv6"}));
}

TEST_F(Srv6Netlink, HostWithPlaneTables_SameAsIpCommands) {
  const Fabric f = small_fabric();
  const Plan p = host_plan(f, 3);
  ASSERT_EQ(p.rules.size(), 1u);
  expect_same(p);
}

// Taking a port down deletes its routes (and a nexthop of the multipath routes); applying
// again once it is up restores the same state, and applying twice changes nothing.
TEST_F(Srv6Netlink, ApplyAgainAfterLinkDown_Restores) {
  const Fabric f = small_fabric();
  const Plan p = switch_plan(f, {Tier::kT0, 0, 1}, {.plain_routes = true});
  const std::string ns = make_switch("r", p);
  auto s = mrc::in_netns(ns, [&] { return apply(p); });
  ASSERT_TRUE(s.ok()) << s.error();
  const std::string before = state(ns);
  const std::string port = p.routes.front().nexthops.front().dev;  // End route's: first port
  s = mrc::in_netns(ns, [&]() -> Status<std::string> {
    if (auto d = set_link_up(port, false); !d) return d;
    auto up = link_is_up(port);
    if (!up) return Err(up.error());
    EXPECT_FALSE(*up);
    return apply(p);  // skips what needs the port
  });
  ASSERT_TRUE(s.ok()) << s.error();
  const std::string down = state(ns);
  EXPECT_EQ(down.find("dev " + port + " metric"), std::string::npos) << down;
  s = mrc::in_netns(ns, [&]() -> Status<std::string> {
    if (auto u = set_link_up(port, true); !u) return u;
    if (auto a = apply(p); !a) return a;
    return apply(p);
  });
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(state(ns), before);
}

TEST_F(Srv6Netlink, UnknownInterface_ErrorNamesCommand) {
  const Fabric f = small_fabric();
  const std::string ns = make_ns("e");
  Plan p;
  p.routes.push_back(RouteRecord{RouteRecord::Kind::kVia,
                                 f.address(0, {3}),
                                 48,
                                 kMainTable,
                                 {Nexthop{"lo", {}}, Nexthop{"p0t0-s9", {}}}});
  auto s = mrc::in_netns(ns, [&] { return apply(p); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("ip -6 route add fcbb:bbbb:3::/48 nexthop via :: dev lo nexthop via "
                           ":: dev p0t0-s9: no interface p0t0-s9"),
            std::string::npos)
      << s.error();
  auto up = mrc::in_netns(ns, [] { return link_is_up("nope0"); });
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.error(), "no interface nope0");
  // A kernel refusal carries its reason.
  p.routes = {RouteRecord{RouteRecord::Kind::kVia,
                          f.address(0, {3}),
                          48,
                          kMainTable,
                          {Nexthop{"lo", f.address(0, {7})}}}};
  s = mrc::in_netns(ns, [&] { return apply(p); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("ip -6 route add fcbb:bbbb:3::/48 via fcbb:bbbb:7:: dev lo: "),
            std::string::npos)
      << s.error();
}

// A hand-written fabric's switches (a /48 block, hand-assigned uSIDs, /128 host routes of
// the locator form): netlink and the ip commands agree, and the kernel takes lblen 48.
TEST_F(Srv6Netlink, ExplicitFabricSwitches_SameAsIpCommands) {
  auto f = load(testing::kHandFabric);
  ASSERT_TRUE(f.ok()) << f.error();
  const Plan t0 = switch_plan(*f, {Tier::kT0, 1, 0}, {.plain_routes = true, .end_dev = "srv6"});
  const std::string text = join_lines(ip_commands(t0));
  EXPECT_NE(text.find("ip -6 route add fcbb:bbbb:dd00:101::/64 encap seg6local action End "
                      "flavors next-csid lblen 48 nflen 16 dev srv6"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ip -6 route add fcbb:bbbb:dd00:101:a::/128 via fe80::1 dev p1t0-h0"),
            std::string::npos)
      << text;
  expect_same(t0);
  expect_same(switch_plan(*f, {Tier::kT1, 0, 1}, {.plain_routes = true}));
  expect_same(host_plan(*f, 2));
}

// csid_lengths_error says what the kernel says, for every length pair in steps of 4 bits.
TEST_F(Srv6Netlink, CsidLengths_KernelAgrees) {
  const std::string ns = make_ns("k");
  ASSERT_EQ(sh("ip -n " + ns + " link add d0 type veth peer name d1 && ip -n " + ns +
               " link set d0 up && ip -n " + ns + " link set d1 up")
                .rc,
            0);
  Ipv6 dst{0xfc, 0xbb, 0xbb, 0xbb, 0, 1};
  int accepted = 0, checked = 0;
  auto s = mrc::in_netns(ns, [&]() -> Status<std::string> {
    for (int l = 0; l <= 128; l += 4) {
      for (int n = 0; n <= 128; n += 4) {
        RouteRecord r{RouteRecord::Kind::kEnd, dst, 48, kMainTable, {Nexthop{"d0", {}}}};
        r.lblen = static_cast<uint8_t>(l);
        r.nflen = static_cast<uint8_t>(n);
        Plan p;
        p.routes.push_back(r);
        const bool kernel_ok = apply(p).ok();
        const std::string ours = csid_lengths_error(l, n);
        EXPECT_EQ(kernel_ok, ours.empty()) << "lblen " << l << " nflen " << n << ": " << ours;
        accepted += kernel_ok;
        ++checked;
      }
    }
    return {};
  });
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(checked, 33 * 33);
  // lblen, nflen in {8, 16, ..., 120} with a sum of at most 128: 15 + 14 + ... + 1 pairs.
  EXPECT_EQ(accepted, 120);
}

}  // namespace
}  // namespace mrc::srv6
