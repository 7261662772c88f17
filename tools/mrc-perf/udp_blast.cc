// The UDP ceiling baseline: GSO senders and a GRO receiver in two namespaces.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "baseline.h"
#include "mrc/common/fd.h"
#include "mrc/common/netns.h"
#include "mrc/io/udp/link_mtu.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace mrc::perf {

namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

constexpr size_t kMaxSend = 65507;            // UDP payload bytes of one GSO send (64 KiB)
constexpr size_t kIpUdpHeaders = 48;          // IPv6 + UDP header bytes per segment on the wire
constexpr int kBatch = 16;                    // recvmmsg messages per call
constexpr size_t kRecvBuf = 65536;            // one GRO-coalesced datagram
constexpr int kSocketBuf = 64 << 20;          // SO_RCVBUF / SO_SNDBUF request, bytes
constexpr timeval kSocketTimeout{0, 20'000};  // so blocked threads see the stop flag

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// An owned file descriptor.
sockaddr_in6 make_addr(const std::string& addr, uint16_t port) {
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(port);
  inet_pton(AF_INET6, addr.c_str(), &sa.sin6_addr);
  return sa;
}

void set_buffer(int fd, int force_opt, int opt) {
  // The *FORCE variants ignore net.core.[rw]mem_max but need CAP_NET_ADMIN.
  if (setsockopt(fd, SOL_SOCKET, force_opt, &kSocketBuf, sizeof kSocketBuf) != 0)
    setsockopt(fd, SOL_SOCKET, opt, &kSocketBuf, sizeof kSocketBuf);
}

// A UDP socket in the calling thread's netns, bound to addr:port.
Result<UniqueFd, std::string> udp_socket(const std::string& addr, uint16_t port) {
  UniqueFd fd(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Err(errno_text("socket"));
  const sockaddr_in6 sa = make_addr(addr, port);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0)
    return Err(errno_text("bind [" + addr + "]:" + std::to_string(port)));
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &kSocketTimeout, sizeof kSocketTimeout);
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &kSocketTimeout, sizeof kSocketTimeout);
  return fd;
}

struct Counters {
  std::atomic<uint64_t> bytes{0};     // UDP payload bytes
  std::atomic<uint64_t> segments{0};  // datagrams as sent (GSO segments)
};

// Receive buffers: `slots` of kRecvBuf (at least kBatch), used kBatch at a time in turn.
void receive(int fd, size_t slots, const std::atomic<bool>& stop, Counters& rx) {
  std::vector<char> data(slots * kRecvBuf);
  size_t next = 0;
  alignas(cmsghdr) char control[kBatch][CMSG_SPACE(sizeof(int))];
  iovec iov[kBatch];
  mmsghdr msgs[kBatch];
  while (!stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {data.data() + (next + i) % slots * kRecvBuf, kRecvBuf};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = control[i];
      msgs[i].msg_hdr.msg_controllen = sizeof control[i];
    }
    const int n = recvmmsg(fd, msgs, kBatch, MSG_WAITFORONE, nullptr);
    if (n > 0) next = (next + static_cast<size_t>(n)) % slots;
    for (int i = 0; i < n; ++i) {
      const uint64_t len = msgs[i].msg_len;
      uint64_t segment = len;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
          int gso = 0;
          std::memcpy(&gso, CMSG_DATA(c), sizeof gso);
          if (gso > 0) segment = gso;
        }
      }
      rx.bytes.fetch_add(len, std::memory_order_relaxed);
      rx.segments.fetch_add(segment ? (len + segment - 1) / segment : 0, std::memory_order_relaxed);
    }
  }
}

// Sends until `stop`; the first hard error stops this sender and is kept in `error`.
// Each send is the next send_bytes of a source of `sends` of them, in turn.
void blast(int fd, size_t send_bytes, size_t sends, size_t segment, const std::atomic<bool>& stop,
           Counters& tx, std::string& error, std::atomic<int>& failed) {
  const std::vector<char> buf(send_bytes * sends, 0);
  const uint64_t segments = (send_bytes + segment - 1) / segment;
  size_t next = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    const char* from = buf.data() + next * send_bytes;
    next = next + 1 == sends ? 0 : next + 1;
    if (send(fd, from, send_bytes, 0) >= 0) {
      tx.bytes.fetch_add(send_bytes, std::memory_order_relaxed);
      tx.segments.fetch_add(segments, std::memory_order_relaxed);
      continue;
    }
    const int e = errno;
    // Full buffers, and ICMP errors from earlier datagrams, do not end the run.
    if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ENOBUFS || e == ECONNREFUSED ||
        e == EHOSTUNREACH || e == ENETUNREACH)
      continue;
    error = std::string("send: ") + std::strerror(e);
    if (e == EINVAL || e == EMSGSIZE)
      error += " (a " + std::to_string(segment) + " B segment + " + std::to_string(kIpUdpHeaders) +
               " B of headers must fit the path MTU)";
    failed.fetch_add(1);
    return;
  }
}

std::string rate(double per_s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f M", per_s / 1e6);
  return b;
}

// UDP payload of an MRC data packet on the link of `addr` in `netns` (BaselineSpec).
Result<size_t, std::string> mrc_segment(const std::string& netns, const std::string& addr) {
  size_t segment = 0;
  auto s = mrc::in_netns(netns, [&]() -> Status<std::string> {
    auto mtu = io::link_mtu(make_addr(addr, 0));
    if (!mtu) return Err(mtu.error());
    const uint32_t payload = io::payload_for_link(*mtu, /*ipv4=*/false);
    if (payload == 0)
      return Err("link MTU " + std::to_string(*mtu) + " of [" + addr + "] carries no MRC payload");
    segment = payload + io::payload_overhead(/*ipv4=*/false) - kIpUdpHeaders;
    return {};
  });
  if (!s) return Err("udp-ceiling: " + s.error());
  return segment;
}

}  // namespace

Result<BaselineResult, std::string> run_udp_ceiling(const BaselineSpec& spec) {
  if (auto s = detail::check_spec(spec); !s) return Err(s.error());
  size_t segment = spec.udp_segment_bytes;
  if (segment == 0) {
    auto m = mrc_segment(spec.client_netns, spec.client_addrs[0]);
    if (!m) return Err(m.error());
    segment = *m;
  }
  if (segment < 1 || segment > kMaxSend)
    return Err("udp_segment_bytes must be 1.." + std::to_string(kMaxSend) + ", got " +
               std::to_string(segment));
  const size_t send_bytes = kMaxSend / segment * segment;
  const size_t sends = std::max<size_t>(1, (spec.udp_app_bytes + send_bytes - 1) / send_bytes);
  const size_t slots = std::max<size_t>(kBatch, (spec.udp_app_bytes + kRecvBuf - 1) / kRecvBuf);

  UniqueFd rx_fd;
  auto s = mrc::in_netns(spec.server_netns, [&]() -> Status<std::string> {
    auto fd = udp_socket(spec.server_addrs[0], spec.port);
    if (!fd) return Err("udp-ceiling receiver: " + fd.error());
    const int on = 1;
    if (setsockopt(fd->get(), SOL_UDP, UDP_GRO, &on, sizeof on) != 0)
      return Err("udp-ceiling receiver: " + errno_text("UDP_GRO"));
    set_buffer(fd->get(), SO_RCVBUFFORCE, SO_RCVBUF);
    rx_fd = std::move(*fd);
    return {};
  });
  if (!s) return Err(s.error());

  std::vector<UniqueFd> tx_fds;
  s = mrc::in_netns(spec.client_netns, [&]() -> Status<std::string> {
    const sockaddr_in6 dst = make_addr(spec.server_addrs[0], spec.port);
    const int gso = static_cast<int>(segment);
    for (int i = 0; i < spec.streams; ++i) {
      auto fd = udp_socket(spec.client_addrs[0], 0);
      if (!fd) return Err("udp-ceiling sender: " + fd.error());
      if (connect(fd->get(), reinterpret_cast<const sockaddr*>(&dst), sizeof dst) != 0)
        return Err("udp-ceiling sender: " + errno_text("connect [" + spec.server_addrs[0] + "]"));
      if (setsockopt(fd->get(), SOL_UDP, UDP_SEGMENT, &gso, sizeof gso) != 0)
        return Err("udp-ceiling sender: " + errno_text("UDP_SEGMENT"));
      set_buffer(fd->get(), SO_SNDBUFFORCE, SO_SNDBUF);
      tx_fds.push_back(std::move(*fd));
    }
    return {};
  });
  if (!s) return Err(s.error());

  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};  // senders that stopped on an error
  Counters rx, tx;
  std::vector<std::string> errors(tx_fds.size());
  std::thread receiver(receive, rx_fd.get(), slots, std::cref(stop), std::ref(rx));
  std::vector<std::thread> senders;
  for (size_t i = 0; i < tx_fds.size(); ++i) {
    senders.emplace_back(blast, tx_fds[i].get(), send_bytes, sends, segment, std::cref(stop),
                         std::ref(tx), std::ref(errors[i]), std::ref(failed));
  }

  BaselineResult r;
  const auto start = Clock::now();
  uint64_t last = 0;
  double last_t = 0;
  for (int k = 1;; ++k) {
    double t = k * spec.interval_s;
    if (t > spec.duration_s - 1e-9) t = spec.duration_s;
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(Seconds(t)));
    const uint64_t bytes = rx.bytes.load(std::memory_order_relaxed);
    r.samples.push_back({t, (bytes - last) * 8 / (t - last_t) / 1e9, t - last_t});
    last = bytes;
    last_t = t;
    if (spec.on_tick) spec.on_tick(t);
    if (t >= spec.duration_s || failed.load() == spec.streams) break;
  }
  const uint64_t rx_bytes = rx.bytes.load(), rx_segments = rx.segments.load();
  const uint64_t tx_bytes = tx.bytes.load(), tx_segments = tx.segments.load();
  stop = true;
  for (auto& t : senders) t.join();
  receiver.join();
  for (const auto& e : errors) {
    if (!e.empty()) return Err("udp-ceiling sender: " + e);
  }

  const double d = spec.duration_s;
  r.mean_gbps = rx_bytes * 8 / d / 1e9;
  // rx may count a send that tx has not yet counted.
  const double loss =
      tx_segments ? std::max(0.0, 100.0 * (1.0 - double(rx_segments) / tx_segments)) : 0;
  char line[400];
  std::snprintf(line, sizeof line,
                "udp-ceiling: %d sender(s) [%s] -> [%s]:%u, %zu B segments x %zu per send; "
                "memory: %zu B sent from, %zu B received into; "
                "sent %.2f Gbit/s %spps, received %.2f Gbit/s %spps (%llu segments), "
                "%.1f%% not received",
                spec.streams, spec.client_addrs[0].c_str(), spec.server_addrs[0].c_str(), spec.port,
                segment, send_bytes / segment, sends * send_bytes, slots * kRecvBuf,
                tx_bytes * 8 / d / 1e9, rate(tx_segments / d).c_str(), r.mean_gbps,
                rate(rx_segments / d).c_str(), static_cast<unsigned long long>(rx_segments), loss);
  r.detail = line;
  return r;
}

}  // namespace mrc::perf
