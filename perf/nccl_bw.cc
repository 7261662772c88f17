// NCCL-style send/recv bandwidth between two processes, through libnccl-net-mrc (loaded as NCCL
// loads it) or through plain TCP sockets (what NCCL's socket transport does: the same messages,
// the same number in flight, over `--streams` TCP connections, each message split across them).
// perf/nccl_bw.sh runs both on the rate-limited namespace fabric and prints the ratio.
//
//   recv side:  nccl_bw --transport mrc|tcp --role recv --rendezvous FILE [options]
//   send side:  nccl_bw --transport mrc|tcp --role send --rendezvous FILE [options]
// The receiver writes what the sender needs into FILE (the plugin's handle, or its TCP
// address); the sender waits for it. The plugin's host config comes from the MRC_* variables
// (io/config.h). Prints one line: "<transport> <Gbit/s> Gbit/s (<bytes> bytes in <s> s)",
// measured alike for both transports at the receiver: from the first message's completion to
// the last's, over the bytes of the messages after the first.
// Each 4 KiB of a message carries its sequence number, checked at the receiver (catches lost,
// stale or misplaced data at little cost; tests/nccl checks every byte) unless --no-verify.
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "io/config.h"
#include "nccl_net_loader.h"

namespace {

using namespace mrc::nccl::harness;

struct Options {
  std::string transport = "mrc", role, rendezvous, plugin = "libnccl-net-mrc.so";
  size_t size = 4 << 20;
  int inflight = 8;
  double seconds = 10;
  int streams = 1;
  bool verify = true;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void fill_seq(uint8_t* p, size_t n, uint64_t seq) {
  for (size_t i = 0; i + 8 <= n; i += 4096) std::memcpy(p + i, &seq, 8);
}
bool check_seq(const uint8_t* p, size_t n, uint64_t seq) {
  for (size_t i = 0; i + 8 <= n; i += 4096)
    if (std::memcmp(p + i, &seq, 8) != 0) return false;
  return true;
}

std::string wait_file(const std::string& path) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream in(path);
    std::string s;
    if (in && std::getline(in, s) && !s.empty()) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// Messages of `size`, `inflight` at a time, for `seconds`; a 0-byte message ends the run.
int run_mrc(const Options& o) {
  Plugin pl(o.plugin);
  if (!pl.lib) {
    std::cerr << "nccl_bw: dlopen " << o.plugin << ": " << pl.error << "\n";
    return 1;
  }
  Api a = pl.newest();
  if (!a.version) {
    std::cerr << "nccl_bw: " << o.plugin << ": " << pl.error << "\n";
    return 1;
  }
  std::cerr << "nccl_bw: " << o.role << ": loaded ncclNetPlugin_v" << a.version << "\n";
  if (int r = a.init()) {
    std::cerr << "nccl_bw: plugin init failed (" << r
              << "): " << (warnings().empty() ? "no warning" : warnings().back()) << "\n";
    return 1;
  }
  const bool send = o.role == "send";
  void* comm = nullptr;
  void* listen = nullptr;
  Handle h{};
  if (!send) {
    if (a.listen(0, h.data(), &listen)) return 1;
    std::ostringstream hex;
    for (uint8_t b : h) hex << std::hex << (b >> 4) << (b & 15);
    std::ofstream(o.rendezvous + ".tmp") << hex.str() << "\n";
    std::rename((o.rendezvous + ".tmp").c_str(), o.rendezvous.c_str());
    if (!wait_accept(a, listen, &comm, 60).empty()) return 1;
  } else {
    const std::string hex = wait_file(o.rendezvous);
    if (hex.size() != 2 * h.size()) {
      std::cerr << "nccl_bw: no handle in " << o.rendezvous << "\n";
      return 1;
    }
    for (size_t i = 0; i < h.size(); ++i)
      h[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    if (!wait_connect(a, h, &comm, 60).empty()) return 1;
  }
  const size_t slots = static_cast<size_t>(o.inflight);
  std::vector<uint8_t> mem(o.size * slots);
  void* mh = nullptr;
  if (a.reg_mr(comm, mem.data(), mem.size(), MRC_NCCL_PTR_HOST, &mh)) return 1;
  std::vector<void*> req(slots, nullptr);
  std::vector<uint64_t> seq(slots, 0);
  uint64_t posted = 0, bytes = 0, bad = 0;
  bool ended = false;
  double start = 0;
  for (;;) {
    for (size_t s = 0; s < slots; ++s) {
      if (req[s] || (send && ended) || (!send && ended)) continue;
      uint8_t* at = mem.data() + o.size * s;
      int r;
      if (send) {
        if (start == 0) start = now();
        const bool last = now() - start > o.seconds;
        if (!last && o.verify) fill_seq(at, o.size, posted);
        r = a.isend(comm, at, last ? 0 : o.size, 0, mh, &req[s]);
        if (req[s]) ended = last;
      } else {
        size_t sz = o.size;
        int tag = 0;
        void* d = at;
        r = a.irecv(comm, 1, &d, &sz, &tag, &mh, &req[s]);
      }
      if (r) return 1;
      if (req[s]) seq[s] = posted++;
    }
    int oldest = -1;
    for (size_t s = 0; s < slots; ++s)
      if (req[s] && (oldest < 0 || seq[s] < seq[static_cast<size_t>(oldest)]))
        oldest = static_cast<int>(s);
    if (oldest < 0) {
      if (!ended) continue;  // nothing in flight yet: the next CTS has not come (sender)
      break;
    }
    int done = 0, size = 0;
    if (a.test(req[oldest], &done, &size)) return 1;
    if (!done) continue;
    req[oldest] = nullptr;
    if (!send) {
      const bool first = start == 0;
      if (first) start = now();
      if (size == 0) {
        ended = true;
        break;
      }
      if (o.verify && !check_seq(mem.data() + o.size * oldest, o.size, seq[oldest])) ++bad;
      if (first) continue;  // the clock starts as it completes: its bytes came before it
    }
    bytes += static_cast<uint64_t>(size);
  }
  const double secs = now() - start;
  a.dereg_mr(comm, mh);
  send ? a.close_send(comm) : a.close_recv(comm);
  if (listen) a.close_listen(listen);
  a.finalize();
  if (!send) {
    std::cout << "mrc " << bytes * 8 / 1e9 / secs << " Gbit/s (" << bytes << " bytes in " << secs
              << " s, " << bad << " corrupt)\n";
  }
  return bad ? 2 : 0;
}

bool io_all(int fd, uint8_t* p, size_t n, bool send) {
  while (n > 0) {
    const ssize_t k = send ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// The socket-transport shape: a header with the size, then the payload split over the streams,
// one thread per stream (NCCL_SOCKET_NTHREADS), messages back to back.
int run_tcp(const Options& o) {
  const bool send = o.role == "send";
  std::vector<int> fds;
  if (!send) {
    auto cfg = mrc::io::load_host_config();
    if (!cfg.ok()) {
      std::cerr << "nccl_bw: " << cfg.error() << "\n";
      return 1;
    }
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    inet_pton(AF_INET6, cfg->udp.planes[0].address.c_str(), &a.sin6_addr);
    const int l = ::socket(AF_INET6, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || ::listen(l, 64)) {
      std::perror("nccl_bw: bind/listen");
      return 1;
    }
    socklen_t len = sizeof a;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
    std::ofstream(o.rendezvous + ".tmp") << buf << " " << ntohs(a.sin6_port) << "\n";
    std::rename((o.rendezvous + ".tmp").c_str(), o.rendezvous.c_str());
    for (int i = 0; i < o.streams; ++i) fds.push_back(::accept(l, nullptr, nullptr));
    ::close(l);
  } else {
    std::istringstream in(wait_file(o.rendezvous));
    std::string addr;
    int port = 0;
    in >> addr >> port;
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, addr.c_str(), &a.sin6_addr) != 1) {
      std::cerr << "nccl_bw: no address in " << o.rendezvous << "\n";
      return 1;
    }
    for (int i = 0; i < o.streams; ++i) {
      const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)) {
        std::perror("nccl_bw: connect");
        return 1;
      }
      fds.push_back(fd);
    }
  }
  for (int fd : fds) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  std::vector<uint8_t> buf(o.size);
  const size_t part = (o.size + fds.size() - 1) / fds.size();
  uint64_t bytes = 0, bad = 0, seq = 0;
  // The sender's clock runs from the connection; the receiver's, as the MRC receiver's, from
  // the first message's completion, counting the bytes after it.
  double start = now();
  for (;; ++seq) {
    uint64_t size = 0;
    if (send) {
      size = now() - start > o.seconds ? 0 : o.size;
      if (size && o.verify) fill_seq(buf.data(), size, seq);
    }
    if (!io_all(fds[0], reinterpret_cast<uint8_t*>(&size), sizeof size, send)) return 1;
    if (size == 0) break;
    std::vector<std::thread> th;
    bool ok = true;
    for (size_t i = 0; i < fds.size(); ++i) {
      const size_t off = i * part, n = std::min(part, static_cast<size_t>(size) -
                                                          std::min(off, static_cast<size_t>(size)));
      auto job = [&, i, off, n] {
        if (n && !io_all(fds[i], buf.data() + off, n, send)) ok = false;
      };
      if (fds.size() == 1)
        job();
      else
        th.emplace_back(job);
    }
    for (auto& t : th) t.join();
    if (!ok) return 1;
    if (!send && o.verify && !check_seq(buf.data(), size, seq)) ++bad;
    if (!send && seq == 0) {
      start = now();
      continue;
    }
    bytes += size;
  }
  const double secs = now() - start;
  for (int fd : fds) ::close(fd);
  if (!send)
    std::cout << "tcp " << bytes * 8 / 1e9 / secs << " Gbit/s (" << o.streams << " streams, "
              << bytes << " bytes in " << secs << " s, " << bad << " corrupt)\n";
  return bad ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"NCCL-style send/recv bandwidth: libnccl-net-mrc or TCP sockets"};
  app.add_option("--transport", o.transport, "mrc (the plugin) or tcp")
      ->check(CLI::IsMember({"mrc", "tcp"}));
  app.add_option("--role", o.role, "send or recv")
      ->required()
      ->check(CLI::IsMember({"send", "recv"}));
  app.add_option("--rendezvous", o.rendezvous, "file the receiver writes its handle/address to")
      ->required();
  app.add_option("--plugin", o.plugin, "path of libnccl-net-mrc.so");
  app.add_option("--size", o.size, "bytes per message")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--inflight", o.inflight,
                 "messages in flight (plugin; NCCL keeps up to 8 per channel)")
      ->check(CLI::Range(1, 32));
  app.add_option("--seconds", o.seconds, "how long the sender sends");
  app.add_option("--streams", o.streams,
                 "TCP connections (NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS)")
      ->check(CLI::Range(1, 64));
  app.add_flag("!--no-verify", o.verify, "do not check the received bytes");
  CLI11_PARSE(app, argc, argv);
  return o.transport == "mrc" ? run_mrc(o) : run_tcp(o);
}
