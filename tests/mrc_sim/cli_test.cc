// Tests of the mrc-sim binary (MRC_SIM_PATH) end to end: exit codes, the error message on bad
// input, and the JSON it writes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Out {
  int rc = -1;
  std::string text;  // stdout and stderr
};

Out run(const std::string& args) {
  Out o;
  const std::string cmd = std::string(MRC_SIM_PATH) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) o.text.append(buf, n);
  const int st = ::pclose(p);
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

TEST(MrcSimCli, BadArgumentsExit2WithTheProblemNamed) {
  Out o = run("--pattern broadcast");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.text.find("mrc-sim: --pattern 'broadcast'"), std::string::npos) << o.text;
  o = run("--hosts 8 --fault 'soon t1-down 0 0'");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.text.find("'soon' is not a time"), std::string::npos) << o.text;
  o = run("--hosts 8 --fault '1ms t1-down 0 99'");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.text.find("spine '99'"), std::string::npos) << o.text;
}

TEST(MrcSimCli, ARunPassesAndWritesOneJsonObjectPerTransport) {
  const std::string json = ::testing::TempDir() + "mrc_sim_cli_test.json";
  Out o =
      run("--hosts 8 --planes 2 --hosts-per-t0 2 --bytes 32K --evs-per-plane 4 "
          "--transport mrc,plane --no-progress --json " +
          json);
  EXPECT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("PASS"), std::string::npos) << o.text;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  for (const auto& r : j) {
    for (const char* k : {"hosts", "planes", "spines", "pattern", "transport", "ideal_s",
                          "completion_s", "efficiency", "flows", "retransmits", "rtos", "trims",
                          "sim_wall_s", "sim_events", "peak_rss_mib"})
      EXPECT_TRUE(r.contains(k)) << k;
    EXPECT_EQ(r["hosts"], 8);
    EXPECT_TRUE(r["ok"].get<bool>());
    EXPECT_FALSE(r.contains("busbw_gbps"));  // not a ring
  }
  std::remove(json.c_str());
}

TEST(MrcSimCli, AFailedRunExits1) {
  Out o =
      run("--hosts 8 --planes 2 --hosts-per-t0 2 --bytes 32K --no-progress --max-time 0.02 "
          "--fault '0 t0-down 0 0' --fault '0 t0-down 1 0'");
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_NE(o.text.find("FAIL"), std::string::npos) << o.text;
}

TEST(MrcSimCli, TracePrintsEvChangesWithTheirQpAndPeerAndTheRtosBlame) {
  // Host 0 cut off on both planes: its peers' packets to it time out (RTOs blame the EVs).
  const std::string args =
      "--hosts 8 --planes 2 --hosts-per-t0 2 --bytes 32K --no-progress -q --max-time 0.01 "
      "--fault '0 t0-down 0 0' --fault '0 t0-down 1 0'";
  Out o = run(args + " --trace");
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_NE(o.text.find("(peer 0) EV "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("GOOD -> ASSUMED_BAD (timeout)"), std::string::npos) << o.text;
  o = run(args);
  EXPECT_EQ(o.text.find("trace "), std::string::npos) << "traced without --trace";
}

TEST(MrcSimCli, TraceNamesEveryQpThatTookAnRtoWhenItCloses) {
  // A T0 of plane 1 blackholes (links up) a tenth of the way in: QPs on demand recover, close,
  // and the RTOs of the closed QPs add up to the run's.
  const std::string json = ::testing::TempDir() + "mrc_sim_cli_trace.json";
  Out o = run(
      "--hosts 8 --planes 2 --hosts-per-t0 2 --bytes 64K --pattern alltoall --window 2 "
      "--qps-on-demand --evs-per-plane 4 --no-progress -q --fault '10% blackhole-t0 1 0' "
      "--trace --json " +
      json);
  EXPECT_EQ(o.rc, 0) << o.text;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  const uint64_t rtos = (j.is_array() ? j.at(0) : j).at("rtos").get<uint64_t>();
  ASSERT_GT(rtos, 0u) << "the case takes no RTO any more: pick one that does";
  uint64_t traced = 0;
  for (size_t at = o.text.find("closed after "); at != std::string::npos;
       at = o.text.find("closed after ", at + 1))
    traced += std::stoull(o.text.substr(at + 13));
  EXPECT_EQ(traced, rtos) << o.text;
  std::remove(json.c_str());
}

}  // namespace
