#include "io/udp/udp_driver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>

namespace mrc::io {

using engine::Duration;
using engine::Time;

engine::Time now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return Time{static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec};
}

namespace {

constexpr int kEct0 = 0b10;          // IPv6 traffic class ECN field: ECT(0)
constexpr int kEcnMask = 0b11;       // ...and CE
constexpr size_t kMaxRxRounds = 16;  // full receive batches per wakeup before ppoll again
constexpr size_t kControlSize = 64;  // room for the IPV6_TCLASS cmsg

std::string describe(const std::string& address, uint16_t port) {
  return "[" + address + "]:" + std::to_string(port);
}

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

/// One plane port: its socket, its receive buffers, what EAGAIN left behind.
struct UdpDriver::Plane {
  int fd = -1;
  sockaddr_in6 local{};
  // Receive side (progress thread only).
  std::vector<uint8_t> rx_data = std::vector<uint8_t>(kBatch * engine::kTransmitBufferSize);
  std::array<mmsghdr, kBatch> rx_msgs{};
  std::array<iovec, kBatch> rx_iov{};
  std::array<std::array<uint8_t, kControlSize>, kBatch> rx_control{};
  // Datagrams a full socket refused, copied out of the engine's spans (under mu_).
  struct Pending {
    engine::PeerId peer;
    std::vector<uint8_t> bytes;
  };
  std::deque<Pending> pending;

  ~Plane() {
    if (fd >= 0) ::close(fd);
  }
};

/// One datagram of the transmit batch: header buffer plus what poll_transmit said.
struct UdpDriver::Slot {
  std::vector<uint8_t> buf = std::vector<uint8_t>(engine::kTransmitBufferSize);
  engine::Transmit tx;
};

UdpDriver::UdpDriver(const UdpConfig& cfg)
    : cfg_(cfg), engine_(std::make_unique<engine::Engine>(cfg.engine)), tx_slots_(kBatch) {}

UdpDriver::~UdpDriver() {
  stop();
  if (event_fd_ >= 0) ::close(event_fd_);
}

Result<std::unique_ptr<UdpDriver>, std::string> UdpDriver::create(const UdpConfig& cfg) {
  if (cfg.planes.empty()) return Err(std::string("udp driver: no planes configured"));
  if (cfg.clock == nullptr) return Err(std::string("udp driver: no clock"));
  std::unique_ptr<UdpDriver> d(new UdpDriver(cfg));
  d->event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (d->event_fd_ < 0) return Err("udp driver: eventfd: " + errno_text(errno));

  for (size_t i = 0; i < cfg.planes.size(); ++i) {
    const PlaneConfig& pc = cfg.planes[i];
    const std::string where = "plane " + std::to_string(i) + " " + describe(pc.address, pc.port);
    addrinfo hints{};
    hints.ai_family = AF_INET6;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    addrinfo* ai = nullptr;
    const std::string port = std::to_string(pc.port);
    const int gai = ::getaddrinfo(pc.address.c_str(), port.c_str(), &hints, &ai);
    if (gai != 0 || ai == nullptr) {
      return Err("udp driver: " + where + ": not an IPv6 address: " + ::gai_strerror(gai));
    }
    auto plane = std::make_unique<Plane>();
    std::memcpy(&plane->local, ai->ai_addr, sizeof(sockaddr_in6));
    ::freeaddrinfo(ai);

    plane->fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (plane->fd < 0) return Err("udp driver: " + where + ": socket: " + errno_text(errno));
    const int fd = plane->fd;
    const int one = 1, tclass = kEct0;
    if (::setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one) != 0 ||
        ::setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof tclass) != 0) {
      return Err("udp driver: " + where + ": traffic class options: " + errno_text(errno));
    }
    if (cfg.zero_udp_checksum &&
        (::setsockopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_TX, &one, sizeof one) != 0 ||
         ::setsockopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one) != 0)) {
      return Err("udp driver: " + where + ": UDP_NO_CHECK6: " + errno_text(errno));
    }
    if (cfg.socket_buffer_bytes > 0) {
      // Best effort: the FORCE variants need CAP_NET_ADMIN; else the kernel caps at rmem_max.
      const int sz = cfg.socket_buffer_bytes;
      if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
        (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
      if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) != 0)
        (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    }
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&plane->local), sizeof(sockaddr_in6)) != 0) {
      return Err("udp driver: " + where + ": bind: " + errno_text(errno));
    }
    socklen_t len = sizeof(sockaddr_in6);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&plane->local), &len) != 0) {
      return Err("udp driver: " + where + ": getsockname: " + errno_text(errno));
    }
    for (size_t k = 0; k < kBatch; ++k) {
      plane->rx_iov[k] = {plane->rx_data.data() + k * engine::kTransmitBufferSize,
                          engine::kTransmitBufferSize};
    }
    d->sockets_.push_back(std::move(plane));
  }
  return d;
}

sockaddr_in6 UdpDriver::local_address(uint16_t plane) const { return sockets_.at(plane)->local; }

engine::PeerId UdpDriver::add_peer(std::vector<sockaddr_in6> per_plane_addresses) {
  std::lock_guard lock(mu_);
  peers_.push_back(std::move(per_plane_addresses));
  return static_cast<engine::PeerId>(peers_.size() - 1);
}

UdpCounters UdpDriver::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void UdpDriver::wake() {
  const uint64_t one = 1;
  // A full counter (EAGAIN) still means the thread will wake: nothing to do.
  (void)!::write(event_fd_, &one, sizeof one);
}

void UdpDriver::start() {
  if (thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this] {
    while (!stop_.load(std::memory_order_relaxed)) run_once(engine::kNever);
  });
}

void UdpDriver::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  wake();
  thread_.join();
}

void UdpDriver::step(Duration max_wait) { run_once(max_wait); }

void UdpDriver::run_once(Duration max_wait) {
  const size_t n = sockets_.size();
  Time wait = max_wait;
  std::vector<pollfd> fds(n + 1);
  {
    std::lock_guard lock(mu_);
    ++counters_.loop_iterations;
    const Time deadline = engine_->next_deadline();
    if (deadline != engine::kNever) {
      const Time t = cfg_.clock();
      wait = std::min(wait, deadline > t ? deadline - t : Duration{0});
    }
    for (size_t p = 0; p < n; ++p) {
      fds[p] = {sockets_[p]->fd,
                static_cast<short>(POLLIN | (sockets_[p]->pending.empty() ? 0 : POLLOUT)), 0};
    }
  }
  fds[n] = {event_fd_, POLLIN, 0};

  timespec ts{};
  timespec* tsp = nullptr;
  if (wait != engine::kNever) {
    ts.tv_sec = static_cast<time_t>(wait.count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(wait.count() % 1'000'000'000);
    tsp = &ts;
  }
  const int ready = ::ppoll(fds.data(), fds.size(), tsp, nullptr);
  if (ready > 0 && (fds[n].revents & POLLIN)) {
    uint64_t v;
    (void)!::read(event_fd_, &v, sizeof v);
  }

  // Receive full batches outside the lock, feed them to the engine under it,
  // and transmit after each round so ACKs and data interleave.
  std::vector<size_t> got(n, 0);
  for (size_t round = 0; round < kMaxRxRounds; ++round) {
    bool full = false;
    for (size_t p = 0; p < n; ++p) {
      const bool readable =
          round == 0 ? (ready > 0 && (fds[p].revents & POLLIN)) : got[p] == kBatch;
      got[p] = readable ? receive_batch(p) : 0;
      full = full || got[p] == kBatch;
    }
    std::lock_guard lock(mu_);
    const Time t = cfg_.clock();
    for (size_t p = 0; p < n; ++p) feed_received(p, got[p], t);
    if (engine_->next_deadline() <= t) {
      ++counters_.timeouts;
      engine_->on_timeout(t);
    }
    transmit(t);
    if (!full) break;
  }
}

size_t UdpDriver::receive_batch(size_t plane) {
  Plane& pl = *sockets_[plane];
  for (size_t k = 0; k < kBatch; ++k) {
    msghdr& h = pl.rx_msgs[k].msg_hdr;
    h = msghdr{};
    h.msg_iov = &pl.rx_iov[k];
    h.msg_iovlen = 1;
    h.msg_control = pl.rx_control[k].data();
    h.msg_controllen = kControlSize;
    pl.rx_msgs[k].msg_len = 0;
  }
  const int r = ::recvmmsg(pl.fd, pl.rx_msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
  std::lock_guard lock(mu_);  // counters only
  ++counters_.recvmmsg_calls;
  if (r < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++counters_.recv_errors;
    return 0;
  }
  return static_cast<size_t>(r);
}

void UdpDriver::feed_received(size_t plane, size_t n, Time t) {
  Plane& pl = *sockets_[plane];
  for (size_t k = 0; k < n; ++k) {
    msghdr& h = pl.rx_msgs[k].msg_hdr;
    if (h.msg_flags & MSG_TRUNC) {
      ++counters_.recv_truncated;
      continue;
    }
    engine::RxInfo rx;
    rx.plane = static_cast<uint16_t>(plane);
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        int tclass = 0;
        std::memcpy(&tclass, CMSG_DATA(c), sizeof tclass);
        rx.ecn_ce = (tclass & kEcnMask) == kEcnMask;
      }
    }
    const size_t len = pl.rx_msgs[k].msg_len;
    ++counters_.datagrams_received;
    counters_.bytes_received += len;
    engine_->on_datagram(t, rx, {static_cast<const uint8_t*>(pl.rx_iov[k].iov_base), len});
  }
}

bool UdpDriver::flush_pending(size_t plane) {
  Plane& pl = *sockets_[plane];
  while (!pl.pending.empty()) {
    const Plane::Pending& d = pl.pending.front();
    const sockaddr_in6& to = peers_[d.peer][plane];
    ++counters_.sendmmsg_calls;  // one datagram at a time: this is the rare path
    const ssize_t r = ::sendto(pl.fd, d.bytes.data(), d.bytes.size(), 0,
                               reinterpret_cast<const sockaddr*>(&to), sizeof to);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ++counters_.send_eagain;
      return false;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ++(errno == ENOBUFS ? counters_.send_enobufs : counters_.send_errors);
    } else {
      ++counters_.datagrams_sent;
      counters_.bytes_sent += d.bytes.size();
    }
    pl.pending.pop_front();
  }
  return true;
}

void UdpDriver::transmit(Time t) {
  const size_t n = sockets_.size();
  bool blocked = false;
  for (size_t p = 0; p < n; ++p) blocked = !flush_pending(p) || blocked;
  std::vector<std::vector<size_t>> by_plane(n);
  while (!blocked) {
    size_t count = 0;
    for (; count < kBatch; ++count) {
      Slot& s = tx_slots_[count];
      auto tx = engine_->poll_transmit(t, s.buf);
      if (!tx) break;
      s.tx = *tx;
    }
    if (count == 0) break;
    for (auto& v : by_plane) v.clear();
    for (size_t k = 0; k < count; ++k) {
      const engine::Transmit& tx = tx_slots_[k].tx;
      if (tx.path.plane >= n || tx.peer >= peers_.size() ||
          tx.path.plane >= peers_[tx.peer].size()) {
        ++counters_.no_route;
        continue;
      }
      by_plane[tx.path.plane].push_back(k);
    }
    for (size_t p = 0; p < n; ++p) {
      if (!by_plane[p].empty()) send_slots(p, by_plane[p]);
      blocked = blocked || !sockets_[p]->pending.empty();
    }
    if (count < kBatch) break;
  }
}

void UdpDriver::send_slots(size_t plane, const std::vector<size_t>& slots) {
  Plane& pl = *sockets_[plane];
  std::array<mmsghdr, kBatch> msgs{};
  std::array<std::array<iovec, 2>, kBatch> iov{};
  const size_t m = slots.size();
  for (size_t i = 0; i < m; ++i) {
    Slot& s = tx_slots_[slots[i]];
    iov[i][0] = {s.buf.data(), s.tx.header_len};
    iov[i][1] = {const_cast<uint8_t*>(s.tx.payload.data()), s.tx.payload.size()};
    msghdr& h = msgs[i].msg_hdr;
    h.msg_name = &peers_[s.tx.peer][plane];
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_iov = iov[i].data();
    h.msg_iovlen = s.tx.payload.empty() ? 1 : 2;
  }
  size_t i = 0;
  while (i < m) {
    ++counters_.sendmmsg_calls;
    const int r = ::sendmmsg(pl.fd, msgs.data() + i, static_cast<unsigned>(m - i), 0);
    if (r > 0) {
      for (int k = 0; k < r; ++k) {
        ++counters_.datagrams_sent;
        counters_.bytes_sent += tx_slots_[slots[i + k]].tx.size();
      }
      i += static_cast<size_t>(r);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // Keep the rest, copied: the engine's spans die at its next call.
      ++counters_.send_eagain;
      for (; i < m; ++i) {
        const engine::Transmit& tx = tx_slots_[slots[i]].tx;
        Plane::Pending d{tx.peer, std::vector<uint8_t>(tx.size())};
        std::memcpy(d.bytes.data(), tx_slots_[slots[i]].buf.data(), tx.header_len);
        if (!tx.payload.empty())
          std::memcpy(d.bytes.data() + tx.header_len, tx.payload.data(), tx.payload.size());
        pl.pending.push_back(std::move(d));
      }
      break;
    }
    ++(errno == ENOBUFS ? counters_.send_enobufs : counters_.send_errors);
    ++i;  // drop the one that failed; the engine retransmits
  }
}

}  // namespace mrc::io
