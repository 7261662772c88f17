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
//   both:    udp_pingpong --role both --peer-host 0 --peer-netns P-h0 [--iters ...] [--busy]
// one thread plays both ends (run in the client's namespace with its config; the server's
// socket is made in --peer-netns): the reference for `mrc-perf --latency`, whose one app
// thread polls both ends, so neither side pays a wakeup or another core's cache.
// Without a fabric (e.g. two processes on loopback addresses, as the shim's planes can be):
//   server:  udp_pingpong --role server --address 127.0.1.1 [--port 4800] [--busy]
//   client:  udp_pingpong --role client --address 127.0.2.1 --peer 127.0.1.1 [...]
// binds --address (IPv4 or IPv6) instead of the host config's plane-0 address and sends to
// --peer; the server answers where each ping came from.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "mrc/common/netns.h"
#include "mrc/io/config.h"

namespace {

// An IPv6 address, or an IPv4 one as its IPv4-mapped form (::ffff:a.b.c.d); false if neither.
bool parse_address(const std::string& text, in6_addr* out) {
  if (::inet_pton(AF_INET6, text.c_str(), out) == 1) return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) != 1) return false;
  std::memset(out, 0, sizeof *out);
  out->s6_addr[10] = out->s6_addr[11] = 0xff;
  std::memcpy(&out->s6_addr[12], &v4, 4);
  return true;
}

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
  std::string address, peer, peer_netns;
  app.add_option("--role", role, "server, client, or both (one thread, --peer-netns)")
      ->required()
      ->check(CLI::IsMember({"server", "client", "both"}));
  auto* host_opt = app.add_option("--peer-host", peer_host, "the other end's fabric host id");
  auto* addr_opt = app.add_option("--address", address, "bind this address (no fabric: with --peer at the client)");
  app.add_option("--peer", peer, "no fabric: the server's address (client)")->needs(addr_opt);
  host_opt->excludes(addr_opt);
  app.add_option("--peer-netns", peer_netns, "both: the network namespace of the server's end");
  app.add_option("--port", port, "UDP port of the server");
  app.add_option("--iters", iters, "pings")->check(CLI::Range(1, 10'000'000));
  app.add_option("--size", size, "bytes per ping")->check(CLI::Range(1, 8192));
  app.add_flag("--busy", busy, "poll without sleeping");
  CLI11_PARSE(app, argc, argv);
  const bool both = role == "both";
  if (both && (peer_netns.empty() || host_opt->count() == 0)) {
    std::fprintf(stderr, "udp_pingpong: --role both needs --peer-host and --peer-netns (fabric)\n");
    return 2;
  }
  // Where this end binds, where the client sends, and how the server answers (nullopt: to the
  // ping's source; else along the fabric path p0.s0 toward the client, as MRC's ACKs go).
  sockaddr_in6 me{}, to{};
  me.sin6_family = to.sin6_family = AF_INET6;
  me.sin6_port = htons(role == "server" ? port : 0);
  to.sin6_port = htons(port);
  std::optional<mrc::io::HostConfig> cfg;
  if (!address.empty()) {
    if (!parse_address(address, &me.sin6_addr)) {
      std::fprintf(stderr, "udp_pingpong: --address: not an IPv4 or IPv6 address: %s\n", address.c_str());
      return 2;
    }
    if (role == "client" && !parse_address(peer, &to.sin6_addr)) {
      std::fprintf(stderr, "udp_pingpong: --peer: the client needs the server's address, got '%s'\n",
                   peer.c_str());
      return 2;
    }
  } else {
    if (host_opt->count() == 0) {
      std::fprintf(stderr, "udp_pingpong: give --peer-host (fabric) or --address (no fabric)\n");
      return 2;
    }
    auto loaded = mrc::io::load_host_config();
    if (!loaded) {
      std::fprintf(stderr, "udp_pingpong: %s\n", loaded.error().c_str());
      return 2;
    }
    cfg = std::move(*loaded);
    const auto& u = cfg->udp;
    if (u.path_mode != mrc::io::PathMode::kSrv6 || !u.fabric) {
      std::fprintf(stderr, "udp_pingpong: the host config is not an SRv6 fabric host\n");
      return 2;
    }
    std::memcpy(&me.sin6_addr, u.fabric->host_address(u.local_host, 0).data(), 16);
    if (role != "server") {
      auto path = u.fabric->path_for_ev(u.local_host, peer_host, 0);  // plane 0, spine 0
      if (!path) {
        std::fprintf(stderr, "udp_pingpong: %s\n", path.error().c_str());
        return 2;
      }
      std::memcpy(&to.sin6_addr, path->dst.data(), 16);
    }
  }
  const int fd = ::socket(AF_INET6, SOCK_DGRAM, 0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) {
    std::perror("udp_pingpong: bind");
    return 2;
  }
  std::vector<char> buf(std::max(size, 64));
  sockaddr_in6 from{};
  // --role both: the server's socket, made in its namespace, answering along the fabric path
  // p0.s0 toward this (client) socket's port.
  int server_fd = -1;
  sockaddr_in6 back{};
  if (both) {
    const auto& f = *cfg->udp.fabric;
    sockaddr_in6 server_me{};
    server_me.sin6_family = AF_INET6;
    server_me.sin6_port = htons(port);
    std::memcpy(&server_me.sin6_addr, f.host_address(peer_host, 0).data(), 16);
    auto made = mrc::in_netns(peer_netns, [&]() -> mrc::Result<int, std::string> {
      const int s = ::socket(AF_INET6, SOCK_DGRAM, 0);
      if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&server_me), sizeof server_me) != 0)
        return mrc::Err(std::string("bind the server's end: ") + std::strerror(errno));
      return s;
    });
    if (!made) {
      std::fprintf(stderr, "udp_pingpong: %s\n", made.error().c_str());
      return 2;
    }
    server_fd = *made;
    auto path = f.path_for_ev(peer_host, cfg->udp.local_host, 0);
    if (!path) {
      std::fprintf(stderr, "udp_pingpong: %s\n", path.error().c_str());
      return 2;
    }
    socklen_t len = sizeof back;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&back), &len);
    std::memcpy(&back.sin6_addr, path->dst.data(), 16);
  }
  if (role == "server") {
    for (;;) {
      const ssize_t n = recv_one(fd, buf.data(), buf.size(), busy, &from);
      if (n < 0) return 1;
      if (n == 1 && buf[0] == 'q') return 0;  // the client is done
      if (cfg) {
        auto back = cfg->udp.fabric->path_for_ev(cfg->udp.local_host, peer_host, 0);
        if (!back) return 1;
        std::memcpy(&from.sin6_addr, back->dst.data(), 16);
      }
      ::sendto(fd, buf.data(), n, 0, reinterpret_cast<sockaddr*>(&from), sizeof from);
    }
  }
  std::vector<double> us;
  for (int i = 0; i < iters + 10; ++i) {  // 10 to warm up (neighbour discovery)
    const auto t0 = std::chrono::steady_clock::now();
    ::sendto(fd, buf.data(), size, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (both) {
      const ssize_t n = recv_one(server_fd, buf.data(), buf.size(), busy, &from);
      if (n < 0) return 1;
      ::sendto(server_fd, buf.data(), n, 0, reinterpret_cast<sockaddr*>(&back), sizeof back);
    }
    if (recv_one(fd, buf.data(), buf.size(), busy, &from) < 0) return 1;
    const double rtt = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 10) us.push_back(rtt / 2);
  }
  const char q = 'q';
  if (!both) ::sendto(fd, &q, 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  std::vector<double> s = us;
  std::sort(s.begin(), s.end());
  auto pct = [&](double p) { return s[std::min(s.size() - 1, static_cast<size_t>(p * s.size()))]; };
  double avg = 0;
  for (double v : s) avg += v / s.size();
  std::printf("udp t_min %.2f t_typical %.2f t_avg %.2f t_99 %.2f t_99.9 %.2f t_max %.2f (%d pings of %d B%s%s)\n",
              s.front(), pct(0.5), avg, pct(0.99), pct(0.999), s.back(), iters, size,
              busy ? ", busy polling" : "", both ? ", one thread plays both ends" : "");
  return 0;
}
