// Runs a tool binary as a child process and captures its output: mrcctl (MRCCTL_PATH, the
// default where it is defined) or another one by path (run_program), found on $PATH with
// find_program.
// Threading: blocking; children are waited for (or killed by the caller, by pid).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace mrc::mrcctl::testing {

/// The first executable `name` on $PATH, or "" (tests skip, saying so).
inline std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  for (const char* d : {"/usr/sbin", "/sbin"}) {
    const std::string p = std::string(d) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

struct CliResult {
  int rc = -1;
  std::string out, err;
};

/// Starts `prog` with `args`; stdout/stderr to the returned pipes (-1 if not wanted).
inline pid_t spawn_program(const std::string& prog, const std::vector<std::string>& args,
                           int* out_fd, int* err_fd) {
  int o[2], e[2];
  if (::pipe2(o, O_CLOEXEC) != 0 || ::pipe2(e, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(o[1], 1);
    ::dup2(e[1], 2);
    std::vector<char*> argv;
    std::string path = prog;
    argv.push_back(path.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(o[1]);
  ::close(e[1]);
  *out_fd = o[0];
  *err_fd = e[0];
  return pid;
}

/// Runs it to the end (killed after timeout_ms).
inline CliResult run_program(const std::string& prog, const std::vector<std::string>& args,
                             int timeout_ms = 20000) {
  CliResult r;
  int o = -1, e = -1;
  const pid_t pid = spawn_program(prog, args, &o, &e);
  if (pid < 0) return r;
  pollfd fds[2] = {{o, POLLIN, 0}, {e, POLLIN, 0}};
  int open = 2, waited = 0;
  char buf[65536];
  while (open > 0 && waited < timeout_ms) {
    if (::poll(fds, 2, 100) == 0) {
      waited += 100;
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  if (open > 0) ::kill(pid, SIGKILL);
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

#ifdef MRCCTL_PATH
inline pid_t spawn_cli(const std::vector<std::string>& args, int* out_fd, int* err_fd) {
  return spawn_program(MRCCTL_PATH, args, out_fd, err_fd);
}
inline CliResult run_cli(const std::vector<std::string>& args, int timeout_ms = 20000) {
  return run_program(MRCCTL_PATH, args, timeout_ms);
}
#endif

}  // namespace mrc::mrcctl::testing
