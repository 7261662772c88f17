// Control-channel client (control.h). Threading: blocking, no shared state.
#include "control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "mrc/observe/layout.h"

namespace mrc::mrcctl {

bool has_net_admin() {
  if (::geteuid() == 0) return true;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long caps = std::stoull(line.substr(7), nullptr, 16);
    return (caps >> 12) & 1;  // CAP_NET_ADMIN
  }
  return false;
}

Result<nlohmann::json, ControlError> control_request(uint32_t pid, uint32_t index,
                                                     const nlohmann::json& request,
                                                     int timeout_ms) {
  static std::atomic<uint32_t> counter{0};
  const std::string dev = "pid " + std::to_string(pid) + " mrc" + std::to_string(index);
  const std::string target = std::string(observe::kControlDir) + "/" + std::to_string(pid) + "." +
                             std::to_string(index) + ".ctl";
  const std::string mine = std::string(observe::kControlDir) + "/mrcctl." +
                           std::to_string(::getpid()) + "." + std::to_string(counter++) + ".sock";
  if (::access(target.c_str(), F_OK) != 0)
    return Err(ControlError{dev + " has no control socket (" + target + ")"});
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Err(ControlError{std::string("socket: ") + std::strerror(errno)});
  struct Closer {
    int fd;
    std::string path;
    ~Closer() {
      ::close(fd);
      ::unlink(path.c_str());
    }
  } closer{fd, mine};
  sockaddr_un me{}, to{};
  me.sun_family = to.sun_family = AF_UNIX;
  std::strncpy(me.sun_path, mine.c_str(), sizeof me.sun_path - 1);
  std::strncpy(to.sun_path, target.c_str(), sizeof to.sun_path - 1);
  ::unlink(mine.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) {
    if (errno == EACCES || errno == EPERM)
      return Err(ControlError{std::string("needs CAP_NET_ADMIN (run as root): cannot bind in ") +
                              observe::kControlDir});
    return Err(ControlError{"bind " + mine + ": " + std::strerror(errno)});
  }
  const std::string body = request.dump();
  if (::sendto(fd, body.data(), body.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
    if (errno == EACCES || errno == EPERM)
      return Err(ControlError{dev + ": needs CAP_NET_ADMIN (run as root)"});
    if (errno == ECONNREFUSED || errno == ENOENT)
      return Err(ControlError{dev + " is gone (its control socket does not answer)"});
    return Err(ControlError{dev + ": send: " + std::strerror(errno)});
  }
  pollfd p{fd, POLLIN, 0};
  const int r = ::poll(&p, 1, timeout_ms);
  if (r <= 0)
    return Err(ControlError{dev + ": no reply within " + std::to_string(timeout_ms) + " ms"});
  std::vector<char> buf(1 << 20);
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
  if (n < 0) return Err(ControlError{dev + ": receive: " + std::strerror(errno)});
  nlohmann::json j = nlohmann::json::parse(buf.data(), buf.data() + n, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Err(ControlError{dev + ": unreadable reply"});
  if (!j.value("ok", false)) return Err(ControlError{j.value("error", dev + ": failed"), true});
  j["pid"] = pid;
  return j;
}

}  // namespace mrc::mrcctl
