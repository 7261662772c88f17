// Child processes with stdin, stdout and stderr on pipes (see command.h).
#include "command.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace mrc::nsfabric {
namespace {

std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd) {
      if (f >= 0) close(f);
    }
  }
  void close_end(int i) {
    if (fd[i] >= 0) close(fd[i]);
    fd[i] = -1;
  }
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Result<std::string, std::string> run_command(const std::vector<std::string>& argv,
                                             const std::string& input) {
  const std::string line = command_line(argv);
  Pipe in, out, err;
  // stdin is a socket so that writing to a child that quit fails with EPIPE, not SIGPIPE.
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in.fd) != 0 ||
      pipe2(out.fd, O_CLOEXEC) != 0 || pipe2(err.fd, O_CLOEXEC) != 0) {
    return Err(line + ": pipe: " + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Err(line + ": " + std::strerror(rc));
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  if (input.empty()) in.close_end(1);

  std::string stdout_text, stderr_text;
  size_t written = 0;
  char buf[4096];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    pollfd p[3] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}, {in.fd[1], POLLOUT, 0}};
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[2].revents & (POLLOUT | POLLERR | POLLHUP)) {
      const ssize_t n =
          send(in.fd[1], input.data() + written, input.size() - written, MSG_NOSIGNAL);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 || written == input.size()) in.close_end(1);
    }
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Pipe& pipe = i == 0 ? out : err;
      const ssize_t n = read(pipe.fd[0], buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? stdout_text : stderr_text).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        pipe.close_end(0);
      }
    }
  }
  in.close_end(1);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return stdout_text;
  const std::string how = WIFEXITED(status)
                              ? "exit " + std::to_string(WEXITSTATUS(status))
                              : "killed by signal " + std::to_string(WTERMSIG(status));
  return Err(line + ": " + how + ": " + trim(stderr_text.empty() ? stdout_text : stderr_text));
}

}  // namespace mrc::nsfabric
