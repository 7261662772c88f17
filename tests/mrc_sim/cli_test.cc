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

}  // namespace
