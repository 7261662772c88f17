// Tests for tools/mrc-fabric/delay_line.cc that need no namespace: the drop-count file, the
// process-name check and the children's signal reset (the delay line itself is exercised on
// real namespaces in nsfabric_test.cc).
#include "delay_line.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

namespace mrc::nsfabric {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + std::to_string(getpid()))).string();
}

TEST(ReadDelayLineDrops, MissingFileZero_CountsRead_GarbageAnError) {
  const std::string path = temp_path("mrc-drops-");
  std::filesystem::remove(path);
  auto none = read_delay_line_drops(path);
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_EQ(none->over_limit, 0u);
  EXPECT_EQ(none->socket, 0u);
  std::ofstream(path) << "3 17\n";
  auto some = read_delay_line_drops(path);
  ASSERT_TRUE(some.ok()) << some.error();
  EXPECT_EQ(some->over_limit, 3u);
  EXPECT_EQ(some->socket, 17u);
  std::ofstream(path) << "many\n";
  auto bad = read_delay_line_drops(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find(path), std::string::npos) << bad.error();
  std::filesystem::remove(path);
}

TEST(IsNamedProcess, OwnNameOnly) {
  std::ifstream in("/proc/self/comm");
  std::string comm;
  ASSERT_TRUE(std::getline(in, comm));
  EXPECT_TRUE(is_named_process(getpid(), comm));
  EXPECT_FALSE(is_named_process(getpid(), comm + "x"));
  EXPECT_FALSE(is_named_process(0, comm));
  EXPECT_FALSE(is_delay_line(getpid()));
}

volatile std::sig_atomic_t g_flag = 0;

// A parent that handles SIGTERM with a flag (as mrc-perf does) and blocks SIGUSR1: the child
// that resets its signals dies of SIGTERM at once; without the reset it would outlive it.
TEST(ResetSignalsInChild, SigtermEndsTheChildDespiteTheParentsHandler) {
  struct sigaction sa {};
  struct sigaction old {};
  sa.sa_handler = [](int) { g_flag = 1; };
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGTERM, &sa, &old), 0);
  sigset_t block, was;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(sigprocmask(SIG_BLOCK, &block, &was), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    reset_signals_in_child();
    raise(SIGTERM);
    _exit(0);  // reached only if SIGTERM was handled or blocked
  }
  sigprocmask(SIG_SETMASK, &was, nullptr);
  sigaction(SIGTERM, &old, nullptr);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the child exited normally: SIGTERM did not end it";
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
  }
  EXPECT_EQ(g_flag, 0);
}

}  // namespace
}  // namespace mrc::nsfabric
