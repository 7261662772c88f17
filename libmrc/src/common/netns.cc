#include "mrc/common/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace mrc {

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

bool tcp_listening(const std::string& proc_net, uint16_t port) {
  for (const char* table : {"/tcp", "/tcp6"}) {
    std::ifstream in(proc_net + table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream l(line);
      std::string slot, local, remote, state;  // local: "0100007F:4853" (port in hex)
      l >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (state == "0A" && colon != std::string::npos &&
          std::strtoul(local.c_str() + colon + 1, nullptr, 16) == port)
        return true;
    }
  }
  return false;
}

}  // namespace mrc
