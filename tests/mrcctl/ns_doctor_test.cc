// mrcctl doctor on a namespace fabric host (tools/mrcctl/doctor.h): 2 hosts x 2 planes x 2
// spines, one host per T0, prefix unique to this process. h1 runs libmrc (a UdpDriver of this
// test in h1's namespace, with h1's host configuration), so it answers probes; the mrcctl
// binary runs as h0 (`ip netns exec <h0> env MRC_CONFIG=<h0's config> mrcctl doctor`).
//   - as built: no FAIL, every plane's address, route, MTU, port and probe lines ok;
//   - a plane port down, an MTU too small, the UDP port taken: each FAILs on its line and
//     plane, with the exit status 1; restored, all ok again;
//   - bad arguments: exit 2 and a message naming the argument.
// Skips (saying why) without root. The namespaces are removed at the end.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "fault.h"
#include "mrc/common/netns.h"
#include "mrc/io/config.h"
#include "mrc/io/udp/udp_driver.h"
#include "nlohmann/json.hpp"
#include "nsfabric.h"

namespace mrc::mrcctl {
namespace {

using Json = nlohmann::json;

struct Shell {
  int rc = -1;
  std::string out;
};

Shell run(const std::string& cmd) {
  Shell r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class NsDoctor : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto ok = mrc::netns_supported(); !ok.ok()) {
      skip_ = ok.error();
      return;
    }
    ::setenv("MRC_STATS", "0", 1);
    auto f = srv6::Fabric::make(
        srv6::FabricConfig{.hosts = 2, .planes = 2, .spines = 2, .hosts_per_t0 = 1});
    ASSERT_TRUE(f.ok()) << f.error();
    nsfabric::Options o;
    o.prefix = "mrcdr" + std::to_string(::getpid());
    o.mgmt = false;
    o.shape = false;
    auto up = nsfabric::NsFabric::up(*f, o);
    ASSERT_TRUE(up.ok()) << up.error();
    fab_.emplace(std::move(up).value());
    // h1's libmrc: answers connectionless probes from its progress loop.
    const std::string conf = fab_->host_config(1);
    auto cfg = io::load_host_config([&](const char* name) -> std::optional<std::string> {
      if (std::string(name) == "MRC_CONFIG") return conf;
      return std::nullopt;
    });
    ASSERT_TRUE(cfg.ok()) << cfg.error();
    cfg->udp.netns = fab_->host_netns(1);
    auto d = io::UdpDriver::create(cfg->udp);
    ASSERT_TRUE(d.ok()) << d.error();
    peer_ = std::move(d).value();
    peer_->start();
  }

  static void TearDownTestSuite() {
    peer_.reset();
    if (!fab_) return;
    EXPECT_TRUE(fab_->down().ok());
    fab_.reset();
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(fab_.has_value());
  }

  // mrcctl as h0 with `args`; stderr kept apart (the JSON is stdout alone).
  static Shell doctor(const std::string& args, bool json = true, const std::string& env = "") {
    const std::string err = "/tmp/" + fab_->options().prefix + "-doctor.err";
    Shell r = run("ip netns exec " + fab_->host_netns(0) +
                  " env MRC_CONFIG=" + fab_->host_config(0) + " MRC_STATS=0 " + env + " " +
                  MRCCTL_PATH + (json ? " --json" : "") + " doctor " + args + " 2>" + err);
    std::ifstream in(err);
    std::stringstream ss;
    ss << in.rdbuf();
    stderr_ = ss.str();
    std::remove(err.c_str());
    return r;
  }

  // The verdict of check `name` on `plane` (-1: host-wide); "" if absent.
  static std::string verdict(const Json& j, const std::string& name, int plane) {
    for (const Json& c : j["checks"])
      if (c["check"] == name && (plane < 0 ? c["plane"].is_null() : c["plane"] == plane))
        return c["verdict"];
    return "";
  }
  // Its detail and fix, the same way.
  static std::string detail(const Json& j, const std::string& name, int plane) {
    for (const Json& c : j["checks"])
      if (c["check"] == name && (plane < 0 ? c["plane"].is_null() : c["plane"] == plane))
        return c["detail"].get<std::string>() + " / " + c.value("fix", "");
    return "";
  }

  static void expect_all_planes_ok(const Json& j) {
    for (int p = 0; p < 2; ++p)
      for (const char* name : {"address", "route", "mtu", "port", "probe"})
        EXPECT_EQ(verdict(j, name, p), "ok") << name << " plane " << p << ": " << j.dump(1);
  }

  static inline std::string skip_, stderr_;
  static inline std::optional<nsfabric::NsFabric> fab_;
  static inline std::unique_ptr<io::UdpDriver> peer_;
};

TEST_F(NsDoctor, AsBuilt_NoFailEveryPlaneOk) {
  const Shell r = doctor("--peer h1 --count 2");
  auto j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << stderr_;
  EXPECT_EQ(r.rc, 0) << j.dump(1);
  EXPECT_EQ(j["fail"], 0) << j.dump(1);
  EXPECT_EQ(verdict(j, "config", -1), "ok");
  expect_all_planes_ok(j);
  for (const char* name : {"clock", "cpu", "buffers", "busy_poll"})
    EXPECT_NE(verdict(j, name, -1), "") << name;
  // The progress threads' spin: as this host's default chooses it (the fabric's configs set
  // none), unless MRC_SPIN_US in the environment (inherited by mrcctl) sets one.
  const std::string spin = std::getenv("MRC_SPIN_US")          ? "; spin "
                           : io::default_spin().count() > 0 ? "; spin 50 us after work (the default"
                                                            : "; spin 0 (the default";
  EXPECT_NE(detail(j, "busy_poll", -1).find(spin), std::string::npos)
      << detail(j, "busy_poll", -1);
  EXPECT_NE(detail(j, "probe", 1).find("2 of 2 paths to h1 answered"), std::string::npos)
      << j.dump(1);
  // The table: one line per check and the summary.
  const Shell t = doctor("--peer h1 --count 1", false);
  EXPECT_EQ(t.rc, 0) << t.out;
  EXPECT_TRUE(std::regex_search(t.out, std::regex("\nprobe +1 +ok +2 of 2 paths"))) << t.out;
  EXPECT_NE(t.out.find("doctor: 0 FAIL"), std::string::npos) << t.out;
}

TEST_F(NsDoctor, PlanePortDown_AddressRouteAndProbeFail) {
  auto down = nsfabric::parse_fault("down link h0 p1");
  ASSERT_TRUE(down.ok());
  ASSERT_TRUE(fab_->apply(*down).ok());
  const Shell r = doctor("--peer h1 --count 1 --timeout-ms 300");
  auto up = nsfabric::parse_fault("up link h0 p1");
  ASSERT_TRUE(fab_->apply(*up).ok());
  auto j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << stderr_;
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(verdict(j, "address", 1), "FAIL") << j.dump(1);
  EXPECT_NE(detail(j, "address", 1).find("p1h0, which is down / ip link set p1h0 up"),
            std::string::npos)
      << j.dump(1);
  EXPECT_EQ(verdict(j, "route", 1), "FAIL") << j.dump(1);
  EXPECT_EQ(verdict(j, "probe", 1), "FAIL") << j.dump(1);
  EXPECT_NE(detail(j, "probe", 1)
                .find("not probed: " + srv6::format(fab_->fabric().host_address(0, 1)) +
                      " cannot be bound"),
            std::string::npos)
      << j.dump(1);
  EXPECT_EQ(verdict(j, "address", 0), "ok");  // the other plane is untouched
  EXPECT_EQ(verdict(j, "probe", 0), "ok") << j.dump(1);
  // Restored: all ok again.
  const Shell again = doctor("--peer h1 --count 1");
  EXPECT_EQ(again.rc, 0) << again.out;
}

// mtu unset (the default): the driver takes the largest payload each link carries; a 1500-byte
// link works with 1024-byte payloads, which doctor warns about (9000 gives 8192).
TEST_F(NsDoctor, MtuUnsetSmallLink_WarnsWithThePayloadItGets) {
  const std::string h0 = fab_->host_netns(0);
  ASSERT_EQ(run("ip -n " + h0 + " link set p0h0 mtu 1500").rc, 0);
  const Shell r = doctor("");
  ASSERT_EQ(run("ip -n " + h0 + " link set p0h0 mtu 9000").rc, 0);
  auto j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << stderr_;
  EXPECT_EQ(verdict(j, "mtu", 0), "warn") << j.dump(1);
  EXPECT_NE(detail(j, "mtu", 0).find("p0h0 MTU 1500: payloads of 1024 bytes"), std::string::npos)
      << j.dump(1);
  EXPECT_EQ(verdict(j, "mtu", 1), "ok");
  EXPECT_NE(detail(j, "mtu", 1).find("MTU 9000: payloads of 8192 bytes"), std::string::npos)
      << j.dump(1);
}

// An mtu the config asks for that a link cannot carry fails, with the MTU to set.
TEST_F(NsDoctor, MtuTooSmall_MtuFails) {
  const std::string h0 = fab_->host_netns(0);
  ASSERT_EQ(run("ip -n " + h0 + " link set p0h0 mtu 1500").rc, 0);
  const Shell r = doctor("", true, "MRC_MTU=4096");
  ASSERT_EQ(run("ip -n " + h0 + " link set p0h0 mtu 9000").rc, 0);
  auto j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << stderr_;
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(verdict(j, "mtu", 0), "FAIL") << j.dump(1);
  EXPECT_NE(detail(j, "mtu", 0).find("p0h0 MTU 1500 < 4216 an MRC packet needs (mtu 4096"),
            std::string::npos)
      << j.dump(1);
  EXPECT_EQ(verdict(j, "mtu", 1), "ok");
  EXPECT_EQ(verdict(j, "probe", 0), "");  // no --peer: no probes
}

TEST_F(NsDoctor, UdpPortTaken_PortFailsNamingTheHolder) {
  const srv6::Ipv6 a = fab_->fabric().host_address(0, 0);
  auto fd = mrc::in_netns(fab_->host_netns(0), [&]() -> Result<int, std::string> {
    const int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(io::kDefaultUdpPort);
    std::memcpy(&sa.sin6_addr, a.data(), 16);
    if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      return Err(std::string(std::strerror(errno)));
    return s;
  });
  ASSERT_TRUE(fd.ok()) << fd.error();
  const Shell r = doctor("--peer h1 --count 1 --timeout-ms 200");
  ::close(*fd);
  auto j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << stderr_;
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(verdict(j, "port", 0), "FAIL") << j.dump(1);
  EXPECT_NE(detail(j, "port", 0)
                .find("UDP port 4791 on " + srv6::format(a) + " is in use by pid " +
                      std::to_string(getpid())),
            std::string::npos)
      << j.dump(1);
  EXPECT_EQ(verdict(j, "port", 1), "ok");
  EXPECT_EQ(verdict(j, "probe", 0), "FAIL");             // not probed: the port is taken
  EXPECT_EQ(verdict(j, "probe", 1), "ok") << j.dump(1);  // the other plane still is
}

TEST_F(NsDoctor, BadArguments_Exit2NamingThem) {
  Shell r = doctor("--peer h7", false);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(stderr_.find("mrcctl: doctor: --peer h7: not a host of the fabric (h0..h1"),
            std::string::npos)
      << stderr_;
  r = doctor("--peer h0", false);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(stderr_.find("--peer h0: that is this host"), std::string::npos) << stderr_;
  r = doctor("--count 0", false);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(stderr_.find("--count: probes per path must be 1..100, got 0"), std::string::npos)
      << stderr_;
  r = doctor("--peer", false);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(stderr_.find("--peer"), std::string::npos) << stderr_;
  r = doctor("--bogus", false);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(stderr_.find("--bogus"), std::string::npos) << stderr_;
}

}  // namespace
}  // namespace mrc::mrcctl
