#include "io/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace mrc::io {

std::string netns_path(const std::string& name) { return "/run/netns/" + name; }

Status<std::string> netns_supported() {
  int err = 0;
  std::thread([&] { err = ::unshare(CLONE_NEWNET) == 0 ? 0 : errno; }).join();
  if (err == 0) return {};
  return Err("cannot create network namespaces here (needs root: CAP_SYS_ADMIN and "
             "CAP_NET_ADMIN): unshare: " + std::string(std::strerror(err)));
}

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
