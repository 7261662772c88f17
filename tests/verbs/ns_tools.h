// Running stock tools (perftest, ibverbs-utils, rdmacm-utils) inside network namespaces (or
// this one) for the verbs tests: a child process `ip netns exec <ns> env ... <argv>` with its
// output captured, a server and its client run as a pair, and perftest's result line read
// back. Threading: test thread only.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mrc/common/netns.h"

namespace mrc::verbs {

// A child process: `ip netns exec <ns> env ... <argv>`, stdout and stderr into one pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::string out;
  int rc = -1;

  // Reads what is there; true once the child has exited (rc set).
  bool pump() {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    int st = 0;
    if (rc == -1 && ::waitpid(pid, &st, WNOHANG) == pid)
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return rc != -1;
  }
  // Waits for the end; kills it (by its pid) after `limit`.
  int wait(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pump()) {
      if (std::chrono::steady_clock::now() > end) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        rc = 137;
        out += "\n[killed after " + std::to_string(limit.count()) + " ms]";
        break;
      }
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, 20);
    }
    pump();
    ::close(fd);
    fd = -1;
    return rc;
  }
};

// `ns` empty: `env ... <argv>` in the test's own namespace.
inline Child spawn(const std::string& ns, const std::vector<std::string>& env,
                   const std::vector<std::string>& argv) {
  int p[2];
  Child c;
  if (::pipe2(p, O_CLOEXEC) != 0) return c;
  c.pid = ::fork();
  if (c.pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    std::vector<std::string> all = {"ip", "netns", "exec", ns, "env"};
    if (ns.empty()) all = {"env"};
    all.insert(all.end(), env.begin(), env.end());
    all.insert(all.end(), argv.begin(), argv.end());
    std::vector<char*> args;
    for (auto& a : all) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(p[1]);
  c.fd = p[0];
  ::fcntl(c.fd, F_SETFL, O_NONBLOCK);
  return c;
}

struct PairResult {
  int server_rc = -1, client_rc = -1;
  std::string server, client;
  std::string both() const { return "--- server:\n" + server + "\n--- client:\n" + client; }
};

// One side of a pair: its namespace ("" for ours), environment and command line.
struct Side {
  std::string ns;
  std::vector<std::string> env;
  std::vector<std::string> argv;
};

// The server, then, once it listens on TCP `port` (or has exited), the client; `during` runs
// while the client does; the client is killed after `limit`, the server 10 s after that.
inline PairResult run_server_client(const Side& server, const Side& client, uint16_t port,
                                    std::chrono::milliseconds limit,
                                    const std::function<void(Child&)>& during = {}) {
  using Clock = std::chrono::steady_clock;
  PairResult r;
  Child s = spawn(server.ns, server.env, server.argv);
  // Its stdout is a pipe, so fully buffered: a "waiting" line would show only at exit.
  const auto ready = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < ready &&
         !mrc::tcp_listening("/proc/" + std::to_string(s.pid) + "/net", port) && !s.pump())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Child c = spawn(client.ns, client.env, client.argv);
  if (during) during(c);
  r.client_rc = c.wait(limit);
  r.server_rc = s.wait(std::chrono::seconds(10));
  r.client = c.out;
  r.server = s.out;
  return r;
}

// The numbers of perftest's last result line ("#bytes #iterations ..."); empty if none.
inline std::vector<double> perftest_result_line(const std::string& out) {
  static const std::regex line(R"(^\s*\d+\s+\d+(\s+[\d.]+){3,}\s*$)");
  std::vector<double> last;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t nl = out.find('\n', pos);
    const std::string l = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (std::regex_match(l, line)) {
      last.clear();
      std::istringstream in(l);
      for (double v; in >> v;) last.push_back(v);
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return last;
}
// The BW average column (MB/s, or Gb/s with --report_gbits) of a bw tool, or -1.
inline double perftest_bw_average(const std::string& out) {
  const auto v = perftest_result_line(out);
  return v.size() >= 4 ? v[3] : -1;
}

// Whether `ucx_info -d` output `info` lists UCX transport `tl` on device `dev` ("mrc0:1") and
// opened it (its section has no "< failed to open interface >").
inline bool ucx_transport_opens(const std::string& info, const std::string& tl,
                                const std::string& dev) {
  const size_t at = info.find("Transport: " + tl + "\n#         Device: " + dev + "\n");
  if (at == std::string::npos) return false;
  const size_t end = info.find("#      Transport:", at + 1);
  return info.substr(at, end == std::string::npos ? std::string::npos : end - at)
             .find("failed to open interface") == std::string::npos;
}

}  // namespace mrc::verbs
