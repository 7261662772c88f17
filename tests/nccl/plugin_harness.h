// A conformance harness for libnccl-net-mrc that drives the plugin the way NCCL does: dlopen
// the .so, look up ncclNetPlugin_vN, init with a logger, then listen -> connect/accept polling
// -> regMr(HOST) -> isend/irecv/test -> close, across processes (fork; handles travel through
// pipes as NCCL ships them through its bootstrap).
// Threading: each rank is a single-threaded child process; the parent only forks and waits.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nccl_net_loader.h"

namespace mrc::nccl::harness {

// ---- Helpers for rank bodies: each returns "" on success, else what went wrong ------------

/// Deterministic bytes for message `seed` (every byte checked by verify).
inline void fill(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    if ((i & 7) == 0) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    p[i] = static_cast<uint8_t>(x >> (8 * (i & 7)));
  }
}
inline std::string verify(const uint8_t* p, size_t n, uint64_t seed) {
  std::vector<uint8_t> want(n);
  fill(want.data(), n, seed);
  for (size_t i = 0; i < n; ++i)
    if (p[i] != want[i])
      return "byte " + std::to_string(i) + " of " + std::to_string(n) + " (message " +
             std::to_string(seed) + ") differs";
  return "";
}

// ---- Processes --------------------------------------------------------------------------------

/// Pipes between ranks, made before fork: ranks publish handles and small values.
class Board {
 public:
  explicit Board(int slots) {
    for (int i = 0; i < slots; ++i) {
      int fd[2];
      if (::pipe(fd) == 0) pipes_.push_back({fd[0], fd[1]});
    }
  }
  ~Board() {
    for (auto& p : pipes_) {
      ::close(p[0]);
      ::close(p[1]);
    }
  }
  template <class T>
  void put(int slot, const T& v) {
    if (::write(pipes_[slot][1], &v, sizeof v) != static_cast<ssize_t>(sizeof v)) std::abort();
  }
  template <class T>
  bool get(int slot, T* v, double timeout_s = 30) {
    size_t got = 0;
    auto* b = reinterpret_cast<uint8_t*>(v);
    while (got < sizeof(T)) {
      pollfd p{pipes_[slot][0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return false;
      const ssize_t n = ::read(pipes_[slot][0], b + got, sizeof(T) - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }

 private:
  std::vector<std::array<int, 2>> pipes_;
};

struct RankSpec {
  std::map<std::string, std::string> env;
  bool expect_killed = false;  // the rank kills itself (SIGKILL) on purpose
};

/// Forks one child per spec; each sets its environment and runs body(rank). Returns "" when
/// every rank succeeded, else each failing rank's message. Ranks still running after
/// timeout_s are killed (by the pids forked here).
/// `tick(seconds since the fork)` runs in the parent every few ms while ranks run (faults).
inline std::string run_ranks(const std::vector<RankSpec>& ranks,
                             const std::function<std::string(int rank)>& body,
                             double timeout_s = 120, const std::function<void(double)>& tick = {}) {
  std::vector<pid_t> pids;
  std::vector<int> msg_fds;
  for (size_t r = 0; r < ranks.size(); ++r) {
    int fd[2];
    if (::pipe(fd) != 0) return "pipe failed";
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fd[0]);
      for (const auto& [k, v] : ranks[r].env) ::setenv(k.c_str(), v.c_str(), 1);
      std::string m = body(static_cast<int>(r));
      if (!m.empty() && ::write(fd[1], m.data(), m.size()) < 0) m = "?";
      ::_exit(m.empty() ? 0 : 1);
    }
    ::close(fd[1]);
    pids.push_back(pid);
    msg_fds.push_back(fd[0]);
  }
  std::string out;
  const double start = now_s(), end = start + timeout_s;
  std::vector<bool> reaped(pids.size(), false);
  std::vector<int> status(pids.size(), 0);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (reaped[r]) continue;
      if (::waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
        reaped[r] = true;
        --left;
      }
    }
    if (left == 0) break;
    if (now_s() > end) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (reaped[r]) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &status[r], 0);
        reaped[r] = true;
        out += "rank " + std::to_string(r) + ": still running after " + std::to_string(timeout_s) +
               " s (killed); ";
      }
      break;
    }
    if (tick) tick(now_s() - start);
    ::usleep(2000);
  }
  for (size_t r = 0; r < pids.size(); ++r) {
    char buf[4096];
    const ssize_t n = ::read(msg_fds[r], buf, sizeof buf);
    ::close(msg_fds[r]);
    const std::string msg = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    const bool killed = WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL;
    if (ranks[r].expect_killed) {
      if (!killed) out += "rank " + std::to_string(r) + ": expected to be killed; " + msg;
      continue;
    }
    if (WIFSIGNALED(status[r]))
      out += "rank " + std::to_string(r) + ": died of signal " +
             std::to_string(WTERMSIG(status[r])) + "; ";
    else if (WEXITSTATUS(status[r]) != 0)
      out += "rank " + std::to_string(r) + ": " + msg + "; ";
  }
  return out;
}

}  // namespace mrc::nccl::harness
