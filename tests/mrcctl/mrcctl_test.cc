// The mrcctl binary end to end against this test process's own UdpDriver pair (loopback,
// data moving): every read command's JSON checked against its documented shape, tables,
// metrics parsed (also over HTTP), controller commands, and the one-line errors with exit
// status 2 for bad arguments and unknown names.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>

#include "expect.h"
#include "loopback_pair.h"
#include "run_cli.h"
#include "srv6/config.h"

namespace mrc::mrcctl {
namespace {

using namespace mrc::mrcctl::testing;
using namespace std::chrono_literals;
using Pair = mrc::observe::testing::LoopbackPair;

class Cli : public Pair {
 protected:
  std::vector<std::string> me(std::vector<std::string> args) {
    args.insert(args.begin(), {"--pid", std::to_string(::getpid())});
    return args;
  }
  nlohmann::json json_of(const std::vector<std::string>& args) {
    auto r = run_cli(me(args));
    EXPECT_EQ(r.rc, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  /// Exit status 2 and exactly one line on stderr, mentioning `what`.
  void expect_usage_error(const std::vector<std::string>& args, const std::string& what) {
    auto r = run_cli(args);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_EQ(r.err.rfind("mrcctl: ", 0), 0u) << r.err;
  }
  bool has_control() {
    auto s = snap(0);
    return s && s->device.has_control;
  }
};

TEST_F(Cli, ReadCommands_JsonMatchesDocumentedShape) {
  pump(300ms);
  std::this_thread::sleep_for(50ms);
  const auto devices = json_of({"devices", "--json"});
  expect_shape(devices, kDeviceShape, "devices");
  EXPECT_EQ(devices.size(), 2u);
  const auto ports = json_of({"ports", "--json"});
  expect_shape(ports, kPortShape, "ports");
  EXPECT_EQ(ports.size(), 4u);
  const auto qps = json_of({"qps", "--json"});
  expect_shape(qps, kQpShape, "qps");
  EXPECT_EQ(qps.size(), 2u);
  const auto paths = json_of({"paths", "::1", "--json"});
  expect_shape(paths, kPathShape, "paths");
  EXPECT_EQ(paths.size(), 16u);  // 8 EVs on each side's QP
  uint64_t sent = 0;
  for (const auto& p : paths) sent += p["tx_bytes"].get<uint64_t>();
  EXPECT_GE(sent, completed_ * (256u << 10));
  const auto only = json_of({"--device", devices[0]["device"], "paths", "--qpn",
                             std::to_string(qps[0]["qpn"].get<uint32_t>()), "--json"});
  EXPECT_EQ(only.size(), 8u);
  const auto events = json_of({"events", "--json"});
  expect_shape(events, kEventShape, "events");
}

TEST_F(Cli, Tables_HaveHeadersAndRows) {
  pump(100ms);
  std::this_thread::sleep_for(50ms);
  auto r = run_cli(me({"paths"}));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("PID", 0), 0u);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 17);
  r = run_cli(me({"devices"}));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  r = run_cli(me({"ports"}));
  EXPECT_NE(r.out.find("ADMIN"), std::string::npos);
}

TEST_F(Cli, Metrics_TextAndHttp) {
  pump(200ms);
  std::this_thread::sleep_for(50ms);
  auto r = run_cli(me({"metrics"}));
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto samples = parse_exposition(r.out);
  const auto qps = json_of({"qps", "--json"});
  const std::string pid = std::to_string(::getpid());
  for (const auto& q : qps) {
    const double tx = sample(
        samples, "mrc_qp_tx_payload_bytes_total",
        {{"pid", pid}, {"device", q["device"]}, {"qpn", std::to_string(q["qpn"].get<uint32_t>())}});
    EXPECT_EQ(tx, q["tx_payload_bytes"].get<double>());
  }
  size_t path_states = 0, current = 0;
  for (const auto& s : samples) {
    path_states += s.name == "mrc_path_state";
    current += s.name == "mrc_path_state" && s.value == 1;
  }
  EXPECT_EQ(path_states, 3 * 16u);  // a series per state
  EXPECT_EQ(current, 16u);          // each EV in exactly one

  // Over HTTP: a scraper's GET /metrics.
  const int port = 20000 + ::getpid() % 20000;
  int o = -1, e = -1;
  const pid_t server =
      spawn_cli(me({"metrics", "--listen", "[::1]:" + std::to_string(port)}), &o, &e);
  ASSERT_GT(server, 0);
  auto get = [&](const std::string& path) {
    std::string reply;
    for (int attempt = 0; attempt < 50 && reply.empty(); ++attempt) {
      std::this_thread::sleep_for(100ms);
      const int s = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      a.sin6_addr = in6addr_loopback;
      if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        const std::string rq = "GET " + path + " HTTP/1.0\r\nHost: x\r\n\r\n";
        (void)!::send(s, rq.data(), rq.size(), MSG_NOSIGNAL);
        char buf[65536];
        ssize_t n;
        while ((n = ::recv(s, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
      }
      ::close(s);
    }
    return reply;
  };
  const std::string ok = get("/metrics");
  const std::string missing = get("/nothing");
  ::kill(server, SIGTERM);
  int status = 0;
  ::waitpid(server, &status, 0);
  ::close(o);
  ::close(e);
  ASSERT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok.substr(0, 200);
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  const auto body = parse_exposition(ok.substr(ok.find("\r\n\r\n") + 4));
  EXPECT_GT(body.size(), 100u);
  EXPECT_EQ(missing.rfind("HTTP/1.0 404", 0), 0u) << missing.substr(0, 100);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "no clean exit on SIGTERM";
}

TEST_F(Cli, Controller_DenyAllowDrainProbeCc) {
  if (!has_control()) GTEST_SKIP() << "no control socket (needs root for /run/mrc)";
  pump(100ms);
  auto r = run_cli(me({"deny", "p1.s3"}));
  ASSERT_EQ(r.rc, 0) << r.err;
  pump(100ms);
  std::this_thread::sleep_for(30ms);
  auto paths = json_of({"paths", "--json"});
  int denied = 0;
  for (const auto& p : paths) denied += p["state"] == "DENIED";
  EXPECT_EQ(denied, 2);  // the EV of both QPs (each side sprays on the same EVs)
  for (const auto& p : paths) {
    if (p["state"] == "DENIED") {
      EXPECT_EQ(p["path"], "p1.s3");
    }
  }
  EXPECT_EQ(run_cli(me({"allow", "p1.s3"})).rc, 0);

  r = run_cli(me({"ports", "drain", "1"}));
  ASSERT_EQ(r.rc, 0) << r.err;
  std::this_thread::sleep_for(30ms);
  for (const auto& p : json_of({"ports", "--json"}))
    EXPECT_EQ(p["admin"], p["plane"] == 1 ? "drained" : "up");
  EXPECT_EQ(run_cli(me({"ports", "undrain", "1"})).rc, 0);
  pump(30ms);
  std::this_thread::sleep_for(30ms);
  for (const auto& p : json_of({"ports", "--json"})) EXPECT_EQ(p["admin"], "up");

  const auto probe = json_of({"probe", "::1", "--count", "3", "--json"});
  ASSERT_TRUE(probe.is_array());
  ASSERT_EQ(probe.size(), 2u);  // both devices know a peer called ::1
  for (const auto& dev : probe) {
    ASSERT_EQ(dev["paths"].size(), 8u);
    for (const auto& p : dev["paths"]) EXPECT_FALSE(p["bad"].get<bool>()) << p.dump();
  }
  r = run_cli(me({"probe", "::1", "--count", "2"}));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 17);

  EXPECT_EQ(run_cli(me({"cc", "set", "target_delay=25000"})).rc, 0);
  const auto cc = json_of({"cc", "show", "--json"});
  for (const auto& dev : cc)
    for (const auto& q : dev["qps"]) EXPECT_EQ(q["target_delay"], 25000);
  expect_usage_error(me({"cc", "set", "nonsense=1"}), "unknown field nonsense");
  expect_usage_error(me({"cc", "set", "target_delay=abc"}), "not a number");
  expect_usage_error(me({"cc", "set", "max_cwnd=1e12"}), "above 4294967295");
}

TEST_F(Cli, Errors_OneLineExit2) {
  pump(50ms);
  std::this_thread::sleep_for(30ms);
  expect_usage_error({"bogus"}, "bogus");
  expect_usage_error({"paths", "--nope"}, "--nope");
  expect_usage_error(me({"paths", "h9"}), "unknown peer h9");
  expect_usage_error(me({"probe", "h9"}), "unknown peer h9");
  expect_usage_error(me({"deny", "p9.s9"}), "unknown EV p9.s9");
  expect_usage_error(me({"deny", "zz"}), "bad EV zz");
  expect_usage_error(me({"--device", "mrc999", "qps"}), "unknown device mrc999");
  expect_usage_error(me({"qps", "--qpn", "77"}), "unknown QP 77");
  expect_usage_error(me({"ports", "drain", "9"}), "unknown plane 9");
  expect_usage_error({"--pid", "999999999", "paths"}, "no libmrc process with pid 999999999");
  expect_usage_error({"probe", "h1", "--count", "0"}, "--count");
  expect_usage_error({"metrics", "--listen", "nonsense"}, "ADDR:PORT");
  expect_usage_error({"fabric", "show", "--fabric", "/nonexistent.json"}, "/nonexistent.json");
}

TEST(CliFabric, ShowListsPlanesSwitchesHosts) {
  srv6::FabricConfig cfg;
  cfg.hosts = 3;
  cfg.planes = 2;
  cfg.spines = 4;
  cfg.hosts_per_t0 = 2;
  auto f = srv6::Fabric::make(cfg);
  ASSERT_TRUE(f.ok());
  const std::string file = "/tmp/mrcctl_test_fabric." + std::to_string(::getpid()) + ".json";
  { std::ofstream(file) << srv6::dump(*f); }
  auto r = run_cli({"fabric", "show", "--fabric", file, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["planes"], 2);
  EXPECT_EQ(j["spines"], 4);
  ASSERT_EQ(j["plane"].size(), 2u);
  EXPECT_EQ(j["plane"][1]["switches"].size(), 2u + 4u);  // 2 T0s + 4 T1s
  EXPECT_EQ(j["plane"][1]["switches"][2]["name"], f->switch_name({srv6::Tier::kT1, 1, 0}));
  EXPECT_EQ(j["plane"][1]["switches"][2]["usid"], f->t1_usid(1, 0));
  ASSERT_EQ(j["host"].size(), 3u);
  EXPECT_EQ(j["host"][2]["addresses"][1], srv6::format(f->host_address(2, 1)));
  r = run_cli({"fabric", "show", "--fabric", file});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("t1p1-3"), std::string::npos) << r.out;
  std::filesystem::remove(file);
}

TEST(CliHelp, EveryCommandHasHelp) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"devices", "--help"},
                                             {"ports", "--help"},
                                             {"ports", "drain", "--help"},
                                             {"ports", "undrain", "--help"},
                                             {"qps", "--help"},
                                             {"paths", "--help"},
                                             {"events", "--help"},
                                             {"metrics", "--help"},
                                             {"probe", "--help"},
                                             {"deny", "--help"},
                                             {"allow", "--help"},
                                             {"cc", "--help"},
                                             {"cc", "show", "--help"},
                                             {"cc", "set", "--help"},
                                             {"fabric", "--help"},
                                             {"fabric", "show", "--help"}}) {
    auto r = run_cli(args);
    EXPECT_EQ(r.rc, 0) << args.back();
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << args[0];
  }
}

}  // namespace
}  // namespace mrc::mrcctl
