// Raw UDP ping-pong over the path MRC's EV p0.s0 takes: the reference for ib_write_lat through
// the verbs shim (perf/verbs_perf.sh). Both ends read the host config MRC uses ($MRC_CONFIG,
// io/config.h, SRv6 mode): the server binds its plane-0 address, the client sends each ping to
// the uSID address of fabric path (plane 0, spine 0) toward the server, as MRC's EV 0 would.
// Prints the one-way latency (half the round trip, as perftest's _lat tools report) in us:
// "udp t_min <> t_typical <> t_avg <> t_99 <> t_99.9 <> t_max <> (<n> pings of <s> B)".
//
//   server:  udp_pingpong --role server --peer-host 1 [--port 4800] [--busy]
//   client:  udp_pingpong --role client --peer-host 0 [--iters 1000] [--size 2] [--busy]
// --busy polls the socket without sleeping (as perftest spins on memory / its CQ).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "mrc/io/config.h"

namespace {

ssize_t recv_one(int fd, void* buf, size_t n, bool busy, sockaddr_in6* from) {
  socklen_t len = sizeof *from;
  for (;;) {
    const ssize_t r = ::recvfrom(fd, buf, n, busy ? MSG_DONTWAIT : 0,
                                 reinterpret_cast<sockaddr*>(from), &len);
    if (r >= 0 || (errno != EAGAIN && errno != EINTR)) return r;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"raw UDP ping-pong over MRC's fabric path p0.s0"};
  std::string role;
  uint32_t peer_host = 0;
  uint16_t port = 4800;
  int iters = 1000, size = 2;
  bool busy = false;
  app.add_option("--role", role, "server or client")->required()->check(CLI::IsMember({"server", "client"}));
  app.add_option("--peer-host", peer_host, "the other end's fabric host id")->required();
  app.add_option("--port", port, "UDP port of the server");
  app.add_option("--iters", iters, "pings")->check(CLI::Range(1, 10'000'000));
  app.add_option("--size", size, "bytes per ping")->check(CLI::Range(1, 8192));
  app.add_flag("--busy", busy, "poll without sleeping");
  CLI11_PARSE(app, argc, argv);

  auto cfg = mrc::io::load_host_config();
  if (!cfg) {
    std::fprintf(stderr, "udp_pingpong: %s\n", cfg.error().c_str());
    return 2;
  }
  const auto& u = cfg->udp;
  if (u.path_mode != mrc::io::PathMode::kSrv6 || !u.fabric) {
    std::fprintf(stderr, "udp_pingpong: the host config is not an SRv6 fabric host\n");
    return 2;
  }
  const int fd = ::socket(AF_INET6, SOCK_DGRAM, 0);
  sockaddr_in6 me{};
  me.sin6_family = AF_INET6;
  me.sin6_port = htons(role == "server" ? port : 0);
  std::memcpy(&me.sin6_addr, u.fabric->host_address(u.local_host, 0).data(), 16);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) {
    std::perror("udp_pingpong: bind");
    return 2;
  }
  std::vector<char> buf(std::max(size, 64));
  sockaddr_in6 from{};
  if (role == "server") {
    for (;;) {
      const ssize_t n = recv_one(fd, buf.data(), buf.size(), busy, &from);
      if (n < 0) return 1;
      if (n == 1 && buf[0] == 'q') return 0;  // the client is done
      // Answer along the fabric path p0.s0 toward the client, as MRC's ACKs go.
      auto back = u.fabric->path_for_ev(u.local_host, peer_host, 0);
      if (!back) return 1;
      std::memcpy(&from.sin6_addr, back->dst.data(), 16);
      ::sendto(fd, buf.data(), n, 0, reinterpret_cast<sockaddr*>(&from), sizeof from);
    }
  }
  auto path = u.fabric->path_for_ev(u.local_host, peer_host, 0);  // plane 0, spine 0
  if (!path) {
    std::fprintf(stderr, "udp_pingpong: %s\n", path.error().c_str());
    return 2;
  }
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_port = htons(port);
  std::memcpy(&to.sin6_addr, path->dst.data(), 16);
  std::vector<double> us;
  for (int i = 0; i < iters + 10; ++i) {  // 10 to warm up (neighbour discovery)
    const auto t0 = std::chrono::steady_clock::now();
    ::sendto(fd, buf.data(), size, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (recv_one(fd, buf.data(), buf.size(), busy, &from) < 0) return 1;
    const double rtt = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 10) us.push_back(rtt / 2);
  }
  const char q = 'q';
  ::sendto(fd, &q, 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  std::vector<double> s = us;
  std::sort(s.begin(), s.end());
  auto pct = [&](double p) { return s[std::min(s.size() - 1, static_cast<size_t>(p * s.size()))]; };
  double avg = 0;
  for (double v : s) avg += v / s.size();
  std::printf("udp t_min %.2f t_typical %.2f t_avg %.2f t_99 %.2f t_99.9 %.2f t_max %.2f (%d pings of %d B%s)\n",
              s.front(), pct(0.5), avg, pct(0.99), pct(0.999), s.back(), iters, size,
              busy ? ", busy polling" : "");
  return 0;
}
