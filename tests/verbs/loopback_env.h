// The host configuration of a test process's mrc0: two loopback planes ([::1]:P, [::1]:P+1),
// statistics off; free ports for it and for rdma_cm listeners. Threading: call once, before the
// first verbs call of the process (the device reads its configuration then).
#pragma once

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace mrc::verbs::testing {

// True if UDP port `port` of ::1 is free now.
inline bool udp_free(uint16_t port) {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A TCP port of 127.0.0.1 nobody listens on now, for a test's rdma_cm listener: below the
// kernel's ephemeral range (32768..), so that no client socket is given it as its own source
// port (which TCP would connect to itself), starting from the pid (ctest runs tests in
// parallel processes) in 30000..32000, apart from the verbs ports below.
inline uint16_t free_tcp_port() {
  static uint16_t next = static_cast<uint16_t>(30000 + (::getpid() % 500) * 4);
  for (int i = 0; i < 2000; ++i) {
    const uint16_t port = next;
    next = static_cast<uint16_t>(next + 1 >= 32000 ? 30000 : next + 1);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return port;
  }
  return 0;
}

// Verbs peers need fixed ports: two free ones (the planes take port and port + 1) below the
// kernel's ephemeral range (32768..), where other tests' port-0 sockets never land. ctest
// runs tests in parallel processes: start from the pid and look for a free pair in
// 10000..30000 (the OCP conformance test's fixed ports are above).
// Two UDP ports (port, port + 1) of ::1 free now, from `from` on, in 10000..30000.
inline uint16_t free_udp_pair(uint16_t from) {
  uint16_t port = from;
  for (int i = 0; i < 5000 && !(udp_free(port) && udp_free(port + 1)); ++i)
    port = static_cast<uint16_t>(port + 2 >= 30000 ? 10000 : port + 2);
  return port;
}

inline bool set_loopback_env() {
  const uint16_t port = free_udp_pair(static_cast<uint16_t>(10000 + (::getpid() % 10000) * 2));
  ::setenv("MRC_PLANES", "::1,::1", 1);
  ::setenv("MRC_PORT", std::to_string(port).c_str(), 1);
  ::setenv("MRC_STATS", "0", 1);
  return true;
}

}  // namespace mrc::verbs::testing
