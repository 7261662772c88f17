// The /metrics HTTP endpoint (http.h). Threading: the caller's thread only.
#include "http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mrc::mrcctl {

Result<int, std::string> listen_on(const std::string& addr_port) {
  const size_t colon = addr_port.rfind(':');
  if (colon == std::string::npos) return Err("--listen " + addr_port + ": expected ADDR:PORT");
  std::string host = addr_port.substr(0, colon);
  const std::string port = addr_port.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) == 0 || std::stoul(port) > 65535)
    return Err("--listen " + addr_port + ": bad port " + port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* ai = nullptr;
  if (const int g = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &ai);
      g != 0 || !ai)
    return Err("--listen " + addr_port + ": bad address: " + ::gai_strerror(g));
  const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
    const std::string e = std::strerror(errno);
    ::freeaddrinfo(ai);
    if (fd >= 0) ::close(fd);
    return Err("--listen " + addr_port + ": " + e);
  }
  ::freeaddrinfo(ai);
  return fd;
}

void serve_metrics(int fd, const std::function<std::string()>& body,
                   const std::atomic<bool>* stop) {
  while (!stop || !stop->load()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // The request line is enough; read what arrives within a short time.
    std::string req;
    char buf[4096];
    for (int i = 0; i < 20 && req.find("\r\n\r\n") == std::string::npos && req.size() < 65536;
         ++i) {
      pollfd q{c, POLLIN, 0};
      if (::poll(&q, 1, 100) <= 0) break;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    std::string status = "404 Not Found", type = "text/plain", out = "not found: try /metrics\n";
    const bool get = req.rfind("GET ", 0) == 0;
    const size_t sp = req.find(' ', 4);
    const std::string path = get && sp != std::string::npos ? req.substr(4, sp - 4) : "";
    if (!get) {
      status = "405 Method Not Allowed";
      out = "GET only\n";
    } else if (path == "/metrics" || path.rfind("/metrics?", 0) == 0) {
      status = "200 OK";
      type = "text/plain; version=0.0.4; charset=utf-8";
      out = body();
    }
    const std::string head = "HTTP/1.0 " + status + "\r\nContent-Type: " + type +
                             "\r\nContent-Length: " + std::to_string(out.size()) +
                             "\r\nConnection: close\r\n\r\n";
    const std::string all = head + out;
    size_t off = 0;
    while (off < all.size()) {
      const ssize_t n = ::send(c, all.data() + off, all.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(c);
  }
}

}  // namespace mrc::mrcctl
