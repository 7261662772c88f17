#include "io/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mrc::io {

std::string netns_path(const std::string& name) { return "/run/netns/" + name; }

Status<std::string> enter_netns(const std::string& name) {
  const std::string path = netns_path(name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return Err("netns " + name + " does not exist");
  if (fd < 0) return Err("netns " + name + ": open " + path + ": " + std::strerror(errno));
  const int r = ::setns(fd, CLONE_NEWNET);
  const int e = errno;
  ::close(fd);
  if (r != 0) return Err("netns " + name + ": setns: " + std::strerror(e));
  return {};
}

}  // namespace mrc::io
