// Tests for tools/mrcctl/doctor.cc that need no namespace: the parsers of ethtool and ip
// output, the JSON and table views and the exit status, and the mrcctl binary's answer to a
// configuration that does not load (a FAIL line naming the field, exit 1) and to bad options
// (exit 2). ns_doctor_test.cc runs it on a namespace fabric host.
#include "doctor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "hand_fabric.h"
#include "run_cli.h"

namespace mrc::mrcctl {
namespace {

using testing::run_cli;

TEST(Doctor, EthtoolFeature_OnOffFixedAndMissing) {
  const std::string k =
      "Features for p0h0:\n"
      "rx-checksumming: on\n"
      "generic-receive-offload: off\n"
      "\ttx-udp-segmentation: on [fixed]\n"
      "tx-udp_tnl-segmentation: off [fixed]\n";
  EXPECT_EQ(ethtool_feature(k, "tx-udp-segmentation"), true);
  EXPECT_EQ(ethtool_feature(k, "generic-receive-offload"), false);
  EXPECT_EQ(ethtool_feature(k, "rx-gro-list"), std::nullopt);
}

TEST(Doctor, RouteDev_FromIpRouteGet) {
  EXPECT_EQ(route_dev("fcbb:bbbb:3:2:f000:2:: from fcbb:bbbb:f000:1:: via fe80::2 dev p0h0 "
                      "table 101 proto boot src fcbb:bbbb:f000:1:: metric 1024 pref medium"),
            "p0h0");
  EXPECT_EQ(route_dev("RTNETLINK answers: Network is unreachable"), "");
}

TEST(Doctor, Views_VerdictsCountedExitOnFail) {
  std::vector<Check> v = {{"address", 0, Verdict::kOk, "a on p0h0 (up)", ""},
                          {"cpu", -1, Verdict::kWarn, "powersave", "cpupower ..."}};
  EXPECT_EQ(doctor_exit(v), 0);
  Json j = doctor_json(v);
  EXPECT_EQ(j["fail"], 0);
  EXPECT_EQ(j["warn"], 1);
  EXPECT_TRUE(j["checks"][1]["plane"].is_null());
  EXPECT_EQ(j["checks"][1]["fix"], "cpupower ...");
  EXPECT_FALSE(j["checks"][0].contains("fix"));
  v.push_back({"mtu", 1, Verdict::kFail, "p1h0 MTU 1500 < 4216", "ip link set p1h0 mtu 4216"});
  EXPECT_EQ(doctor_exit(v), 1);
  const std::string t = render(doctor_table(v));
  EXPECT_NE(t.find("mtu      1      FAIL     p1h0 MTU 1500 < 4216  -> ip link set p1h0 mtu 4216"),
            std::string::npos)
      << t;
}

TEST(Doctor, Binary_BadConfigFailsItsLineBadOptionsExit2) {
  const std::string file = "/tmp/mrc-doctor-test-" + std::to_string(getpid()) + ".json";
  std::ofstream(file) << R"({"path_mode": "srv6", "prot": 1})";
  ::setenv("MRC_CONFIG", file.c_str(), 1);
  ::setenv("MRC_STATS", "0", 1);
  auto r = run_cli({"--json", "doctor"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  auto j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["checks"][0]["check"], "config");
  EXPECT_EQ(j["checks"][0]["verdict"], "FAIL");
  EXPECT_NE(j["checks"][0]["detail"].get<std::string>().find(file), std::string::npos) << r.out;
  EXPECT_NE(j["checks"][0]["detail"].get<std::string>().find("prot"), std::string::npos) << r.out;
  r = run_cli({"doctor", "--timeout-ms", "0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("mrcctl: doctor: --timeout-ms: must be 1..60000, got 0"), std::string::npos)
      << r.err;
  r = run_cli({"doctor", "--listen", "-5"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--listen"), std::string::npos) << r.err;
  ::unsetenv("MRC_CONFIG");
  std::remove(file.c_str());
}

// A host configuration naming a bad fabric file: the config line FAILs with the file, the
// node and the field, as every front end would report it.
TEST(Doctor, Binary_BadFabricFileNamesNodeAndField) {
  const std::string dir = "/tmp/mrc-doctor-fab-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  std::string text = srv6::testing::kHandFabric;
  text.replace(text.find("\"0x0302\""), 8, "\"0x0301\"");
  std::ofstream(dir + "/fabric.json") << text;
  std::ofstream(dir + "/mrc.json")
      << R"({"path_mode": "srv6", "fabric": ")" + dir + R"(/fabric.json", "host": 0})";
  ::setenv("MRC_CONFIG", (dir + "/mrc.json").c_str(), 1);
  ::setenv("MRC_STATS", "0", 1);
  auto r = run_cli({"--json", "doctor"});
  ::unsetenv("MRC_CONFIG");
  (void)std::system(("rm -rf " + dir).c_str());
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  auto j = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["checks"][0]["verdict"], "FAIL");
  EXPECT_NE(j["checks"][0]["detail"].get<std::string>().find(
                dir + "/fabric.json: /planes/1/t1/1/usid: duplicate uSID 0x0301 (also t1 0)"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace mrc::mrcctl
