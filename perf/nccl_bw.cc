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
//
// --latency: round trips instead of a stream. Each side listens and connects (a send and a
// receive comm each way, as NCCL pairs ranks; TCP: one connection each way), writing its
// handle/address to FILE.<role>. The sender pings one message at a time and the receiver
// echoes it from where it landed; for each size of kLatencySizes (8 B .. 64 KiB), after
// --warmup untimed round trips, --iterations are timed at the sender from the moment it
// posts the reply's receive (then the ping's send) to the reply's completion, both polled
// without sleeping as NCCL's proxy polls. TCP sends the size first and polls non-blocking
// sockets, as NCCL's socket transport does. The sender prints a line per size:
// "<transport> latency <bytes> B p50 <us> us p99 <us> us (<n> round trips, <k> corrupt)".
// --latency --exchange: the step of an NCCL collective or send/recv instead, where both ranks
// post their receive and their send at once and the next step waits for the receive (so a
// rank's send may have to wait for the other's receive to be known: the plugin's CTS, or its
// eager ring). As NCCL keeps several steps in flight, a round's send is waited for in the next
// round, after its receive. Both sides run every size's rounds; the sender times each round,
// from its receive's post through its send's post, the receive's completion and the previous
// round's send (done by then as a rule). TCP sends and receives on both connections at once,
// polled non-blocking.
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "mrc/io/config.h"
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
  bool latency = false;   // round trips per size (see the file comment), not a stream
  bool exchange = false;  // --latency: both ranks send and receive each round (file comment)
  int iterations = 1000;  // --latency: timed round trips per size
  int warmup = 100;       // --latency: untimed round trips before them
};

// --latency's message sizes, bytes: NCCL's small all-reduce and send/recv range.
constexpr std::array<size_t, 8> kLatencySizes = {8, 32, 128, 512, 2048, 8192, 32768, 65536};

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

// Writes `line` to `path` at once (a reader never sees part of it).
void publish(const std::string& path, const std::string& line) {
  std::ofstream(path + ".tmp") << line << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
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

// Loads and initialises the plugin as NCCL does; an empty Api (version 0) after saying why.
Api open_plugin(const Options& o, Plugin& pl) {
  if (!pl.lib) {
    std::cerr << "nccl_bw: dlopen " << o.plugin << ": " << pl.error << "\n";
    return {};
  }
  Api a = pl.newest();
  if (!a.version) {
    std::cerr << "nccl_bw: " << o.plugin << ": " << pl.error << "\n";
    return {};
  }
  std::cerr << "nccl_bw: " << o.role << ": loaded ncclNetPlugin_v" << a.version << "\n";
  if (int r = a.init()) {
    std::cerr << "nccl_bw: plugin init failed (" << r
              << "): " << (warnings().empty() ? "no warning" : warnings().back()) << "\n";
    return {};
  }
  return a;
}

std::string to_hex(const Handle& h) {
  std::ostringstream hex;
  for (uint8_t b : h) hex << std::hex << (b >> 4) << (b & 15);
  return hex.str();
}

// The handle another process published in `path` (wait_file), or false after saying why.
bool read_handle(const std::string& path, Handle& h) {
  const std::string hex = wait_file(path);
  if (hex.size() != 2 * h.size()) {
    std::cerr << "nccl_bw: no handle in " << path << "\n";
    return false;
  }
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

// Messages of `size`, `inflight` at a time, for `seconds`; a 0-byte message ends the run.
int run_mrc(const Options& o) {
  Plugin pl(o.plugin);
  Api a = open_plugin(o, pl);
  if (!a.version) return 1;
  const bool send = o.role == "send";
  void* comm = nullptr;
  void* listen = nullptr;
  Handle h{};
  if (!send) {
    if (a.listen(0, h.data(), &listen)) return 1;
    publish(o.rendezvous, to_hex(h));
    if (!wait_accept(a, listen, &comm, 60).empty()) return 1;
  } else {
    if (!read_handle(o.rendezvous, h)) return 1;
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

// p50 and p99 of the samples (sorted here), microseconds.
std::pair<double, double> p50_p99(std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
  };
  return {at(0.5), at(0.99)};
}

void print_latency(const char* transport, size_t size, std::vector<double>& us, uint64_t bad) {
  const auto [p50, p99] = p50_p99(us);
  std::printf("%s latency %zu B p50 %.1f us p99 %.1f us (%zu round trips, %llu corrupt)\n",
              transport, size, p50, p99, us.size(), static_cast<unsigned long long>(bad));
  std::fflush(stdout);
}

// Every size's rounds (--warmup untimed, then --iterations timed), sequence numbers counting on
// across sizes: round(size, seq, &good) runs one and returns false on a failure; `good` false
// counts it corrupt. With `print`, a line per size. The number of corrupt rounds, or -1.
template <class Round>
int64_t time_rounds(const Options& o, const char* transport, bool print, Round&& round) {
  uint64_t seq = 0, bad_total = 0;
  for (size_t size : kLatencySizes) {
    std::vector<double> us;
    uint64_t bad = 0;
    for (int i = 0; i < o.warmup + o.iterations; ++i, ++seq) {
      bool good = true;
      const double t0 = now();
      if (!round(size, seq, good)) return -1;
      const double t1 = now();
      if (!good) ++bad;
      if (i >= o.warmup) us.push_back((t1 - t0) * 1e6);
    }
    if (print) print_latency(transport, size, us, bad);
    bad_total += bad;
  }
  return static_cast<int64_t>(bad_total);
}

// Polls test() on each request until all are done, without sleeping; false on an error.
// `size` (may be null) gets the last one's size.
bool wait_all(Api& a, std::initializer_list<void*> reqs, int* size) {
  int ignored = 0;
  for (void* r : reqs) {
    for (int done = 0; !done;) {
      if (int e = a.test(r, &done, size ? size : &ignored)) {
        std::cerr << "nccl_bw: test returned " << e << "\n";
        return false;
      }
    }
  }
  return true;
}

// isend/irecv return a null request while the peer is not ready (no CTS yet): post again.
bool post_send(Api& a, void* comm, void* data, size_t n, void* mh, void** req) {
  for (*req = nullptr; !*req;) {
    if (int e = a.isend(comm, data, n, 0, mh, req)) {
      std::cerr << "nccl_bw: isend returned " << e << "\n";
      return false;
    }
  }
  return true;
}
bool post_recv(Api& a, void* comm, void* data, size_t n, void* mh, void** req) {
  for (*req = nullptr; !*req;) {
    size_t sz = n;
    int tag = 0;
    void* d = data;
    if (int e = a.irecv(comm, 1, &d, &sz, &tag, &mh, req)) {
      std::cerr << "nccl_bw: irecv returned " << e << "\n";
      return false;
    }
  }
  return true;
}

// --latency through the plugin (see the file comment).
int run_mrc_latency(const Options& o) {
  Plugin pl(o.plugin);
  Api a = open_plugin(o, pl);
  if (!a.version) return 1;
  const bool pinger = o.role == "send";
  void* listen = nullptr;
  Handle mine{}, theirs{};
  if (a.listen(0, mine.data(), &listen)) return 1;
  publish(o.rendezvous + "." + o.role, to_hex(mine));
  if (!read_handle(o.rendezvous + "." + (pinger ? "recv" : "send"), theirs)) return 1;
  // Both at once: each side's connect completes only as the other accepts.
  void *sc = nullptr, *rc = nullptr;
  for (const double end = now() + 60; !sc || !rc;) {
    if (!sc && a.connect(0, theirs.data(), &sc)) return 1;
    if (!rc && a.accept(listen, &rc)) return 1;
    if (now() > end) {
      std::cerr << "nccl_bw: connect/accept not done after 60 s\n";
      return 1;
    }
  }
  constexpr size_t kMax = kLatencySizes.back();
  // Pinger: [0] sent, [1] received. Echoer: the two halves take turns to receive, and the
  // echo leaves from where the ping landed (registered on both comms).
  std::vector<uint8_t> mem(3 * kMax);  // the exchange: two sends' buffers and a receive's
  void *smh = nullptr, *rmh = nullptr;
  if (a.reg_mr(sc, mem.data(), mem.size(), MRC_NCCL_PTR_HOST, &smh) ||
      a.reg_mr(rc, mem.data(), mem.size(), MRC_NCCL_PTR_HOST, &rmh))
    return 1;
  int64_t bad_total = 0;
  if (o.exchange) {  // both ranks alike (see the file comment)
    std::array<uint8_t*, 2> outs = {mem.data(), mem.data() + kMax};  // round k sends from [k % 2]
    uint8_t* in = mem.data() + 2 * kMax;
    void* last_sr = nullptr;  // the previous round's send, waited for after this one's receive
    bad_total = time_rounds(o, "mrc", pinger, [&](size_t size, uint64_t seq, bool& good) {
      uint8_t* out = outs[seq % 2];
      if (o.verify) fill_seq(out, size, seq);
      void *sr = nullptr, *rr = nullptr;
      int got = 0;
      if (!post_recv(a, rc, in, kMax, rmh, &rr) || !post_send(a, sc, out, size, smh, &sr) ||
          !wait_all(a, {rr}, &got) || (last_sr && !wait_all(a, {last_sr}, nullptr)))
        return false;
      last_sr = sr;
      good = static_cast<size_t>(got) == size && (!o.verify || check_seq(in, size, seq));
      return true;
    });
    if (bad_total < 0 || (last_sr && !wait_all(a, {last_sr}, nullptr))) return 1;
  } else if (pinger) {
    uint8_t* out = mem.data();
    uint8_t* in = mem.data() + kMax;
    bad_total = time_rounds(o, "mrc", true, [&](size_t size, uint64_t seq, bool& good) {
      if (o.verify) fill_seq(out, size, seq);
      void *sr = nullptr, *rr = nullptr;
      int got = 0;
      if (!post_recv(a, rc, in, kMax, rmh, &rr) || !post_send(a, sc, out, size, smh, &sr) ||
          !wait_all(a, {sr}, nullptr) || !wait_all(a, {rr}, &got))
        return false;
      good = static_cast<size_t>(got) == size && (!o.verify || check_seq(in, size, seq));
      return true;
    });
    if (bad_total < 0) return 1;
    void* sr = nullptr;  // the end: a 0-byte ping, not echoed
    if (!post_send(a, sc, out, 0, smh, &sr) || !wait_all(a, {sr}, nullptr)) return 1;
  } else {
    void* rr = nullptr;
    size_t turn = 0;
    if (!post_recv(a, rc, mem.data(), kMax, rmh, &rr)) return 1;
    for (;;) {
      int got = 0;
      if (!wait_all(a, {rr}, &got)) return 1;
      if (got == 0) break;
      uint8_t* at = mem.data() + kMax * turn;
      turn ^= 1;
      // The next ping's receive first, so its CTS travels with this echo.
      void* sr = nullptr;
      if (!post_recv(a, rc, mem.data() + kMax * turn, kMax, rmh, &rr) ||
          !post_send(a, sc, at, static_cast<size_t>(got), smh, &sr) || !wait_all(a, {sr}, nullptr))
        return 1;
    }
  }
  a.dereg_mr(sc, smh);
  a.dereg_mr(rc, rmh);
  a.close_send(sc);
  a.close_recv(rc);
  a.close_listen(listen);
  a.finalize();
  return bad_total ? 2 : 0;
}

// All n bytes through fd; spin: a non-blocking call polled until done, as NCCL's socket
// transport polls from its proxy thread (else blocking calls).
bool io_all(int fd, uint8_t* p, size_t n, bool send, bool spin = false) {
  const int flags = spin ? MSG_DONTWAIT : 0;
  while (n > 0) {
    const ssize_t k = send ? ::send(fd, p, n, MSG_NOSIGNAL | flags) : ::recv(fd, p, n, flags);
    if (k < 0 && spin && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// `streams` TCP connections, TCP_NODELAY, from the sender (connects) to the receiver (listens
// on its plane 0 address and publishes it in the rendezvous file); false after saying why.
bool tcp_connections(const Options& o, int streams, std::vector<int>& fds) {
  const bool send = o.role == "send";
  if (!send) {
    auto cfg = mrc::io::load_host_config();
    if (!cfg.ok()) {
      std::cerr << "nccl_bw: " << cfg.error() << "\n";
      return false;
    }
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    inet_pton(AF_INET6, cfg->udp.planes[0].address.c_str(), &a.sin6_addr);
    const int l = ::socket(AF_INET6, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) || ::listen(l, 64)) {
      std::perror("nccl_bw: bind/listen");
      return false;
    }
    socklen_t len = sizeof a;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
    publish(o.rendezvous, std::string(buf) + " " + std::to_string(ntohs(a.sin6_port)));
    for (int i = 0; i < streams; ++i) fds.push_back(::accept(l, nullptr, nullptr));
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
      return false;
    }
    for (int i = 0; i < streams; ++i) {
      const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)) {
        std::perror("nccl_bw: connect");
        return false;
      }
      fds.push_back(fd);
    }
  }
  for (int fd : fds) {
    if (fd < 0) {
      std::perror("nccl_bw: accept");
      return false;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return true;
}

// The socket-transport shape: a header with the size, then the payload split over the streams,
// one thread per stream (NCCL_SOCKET_NTHREADS), messages back to back.
int run_tcp(const Options& o) {
  const bool send = o.role == "send";
  std::vector<int> fds;
  if (!tcp_connections(o, o.streams, fds)) return 1;
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

// --latency over TCP (see the file comment): connection 0 carries pings, 1 the echoes.
int run_tcp_latency(const Options& o) {
  std::vector<int> fds;
  if (!tcp_connections(o, 2, fds)) return 1;
  constexpr size_t kMax = kLatencySizes.back();
  std::vector<uint8_t> buf(2 * kMax);
  uint8_t* out = buf.data();
  uint8_t* in = buf.data() + kMax;
  // One message: its size (8 B), then the payload, polled without sleeping.
  auto send_msg = [&](int fd, uint8_t* p, uint64_t n) {
    return io_all(fd, reinterpret_cast<uint8_t*>(&n), sizeof n, true, true) &&
           (n == 0 || io_all(fd, p, n, true, true));
  };
  auto recv_msg = [&](int fd, uint8_t* p, uint64_t* n) {
    return io_all(fd, reinterpret_cast<uint8_t*>(n), sizeof *n, false, true) && *n <= kMax &&
           (*n == 0 || io_all(fd, p, *n, false, true));
  };
  int64_t bad_total = 0;
  if (o.exchange) {  // both ranks alike: send on one connection while receiving on the other
    const bool pinger = o.role == "send";
    const int tx = fds[pinger ? 0 : 1], rx = fds[pinger ? 1 : 0];
    bad_total = time_rounds(o, "tcp", pinger, [&](size_t size, uint64_t seq, bool& good) {
      if (o.verify) fill_seq(out, size, seq);
      uint64_t n = size, got = 0;
      std::array<uint8_t, 8> hdr_in{};
      // Each direction: the 8-byte size, then the payload; both advanced as they can.
      size_t sent = 0, recvd = 0;
      const size_t total = 8 + size;
      const auto would_block = [](ssize_t k) {
        return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      };
      while (sent < total || recvd < 8 + got) {
        if (sent < total) {
          const ssize_t k =
              sent < 8 ? ::send(tx, reinterpret_cast<uint8_t*>(&n) + sent, 8 - sent,
                                MSG_NOSIGNAL | MSG_DONTWAIT)
                       : ::send(tx, out + (sent - 8), total - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (k > 0) sent += static_cast<size_t>(k);
          else if (!would_block(k)) return false;
        }
        if (recvd < 8 + got) {
          const ssize_t k = recvd < 8
                                ? ::recv(rx, hdr_in.data() + recvd, 8 - recvd, MSG_DONTWAIT)
                                : ::recv(rx, in + (recvd - 8), 8 + got - recvd, MSG_DONTWAIT);
          if (k > 0) {
            recvd += static_cast<size_t>(k);
            if (recvd == 8) std::memcpy(&got, hdr_in.data(), 8);
            if (got > kMax) return false;
          } else if (!would_block(k)) {
            return false;
          }
        }
      }
      good = got == size && (!o.verify || check_seq(in, size, seq));
      return true;
    });
    if (bad_total < 0) return 1;
  } else if (o.role == "send") {
    bad_total = time_rounds(o, "tcp", true, [&](size_t size, uint64_t seq, bool& good) {
      if (o.verify) fill_seq(out, size, seq);
      uint64_t got = 0;
      if (!send_msg(fds[0], out, size) || !recv_msg(fds[1], in, &got)) return false;
      good = got == size && (!o.verify || check_seq(in, size, seq));
      return true;
    });
    if (bad_total < 0) return 1;
    if (!send_msg(fds[0], out, 0)) return 1;
  } else {
    for (;;) {
      uint64_t got = 0;
      if (!recv_msg(fds[0], in, &got)) return 1;
      if (got == 0) break;
      if (!send_msg(fds[1], in, got)) return 1;
    }
  }
  for (int fd : fds) ::close(fd);
  return bad_total ? 2 : 0;
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
  auto* latency = app.add_flag(
      "--latency", o.latency,
      "round trips of 8 B .. 64 KiB, p50/p99 per size at the sender (see the top)");
  app.add_flag("--exchange", o.exchange,
               "--latency: both ranks post a receive and a send each round (NCCL's step)")
      ->needs(latency);
  app.add_option("--iterations", o.iterations, "--latency: timed round trips per size")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--warmup", o.warmup, "--latency: untimed round trips before them per size")
      ->check(CLI::Range(0, 10000000));
  CLI11_PARSE(app, argc, argv);
  if (o.latency) return o.transport == "mrc" ? run_mrc_latency(o) : run_tcp_latency(o);
  return o.transport == "mrc" ? run_mrc(o) : run_tcp(o);
}
