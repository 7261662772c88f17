// What one datagram's receive costs, by what the call asks of the kernel (issue 17: a poller's
// recvmmsg took ~2.2 us where the reference's recvfrom took ~0.9 us, perf/RESULTS.md
// 2026-11-27 (lat2)). A plain sender socket and one receiver socket per variant on ::1; each
// iteration sends one SIZE-byte datagram to a receiver (untimed) and times the receive that
// takes it, as a latency run's poller finds one datagram waiting. The variants, from the
// reference's call to the driver's (UdpDriver::receive_batch and open_socket's options):
//   recvfrom        recvfrom with the source address, no socket options (udp_pingpong's call)
//   mmsg1           recvmmsg of 1 message, no name, no options
//   mmsg32          recvmmsg of 32 (kBatch): the second message's try finds nothing
//   +name           ...with each message's source address (msg_name)
//   +tclass         ...and IPV6_RECVTCLASS (a cmsg per message: the ECN mark)
//   +gro            ...and UDP_GRO (a cmsg when datagrams were coalesced)
//   +stamp          ...and SO_TIMESTAMPNS (a cmsg per message): the driver's set at 0ce640f
//   all-1           that set with a batch of 1
//   nostamp-1       ...without SO_TIMESTAMPNS
//   msg-nostamp     ...by recvmsg (one message) rather than recvmmsg
// Every variant also re-initialises its message headers each call, as receive_batch does.
// Prints the mean ns per receive of each of REPEATS rounds (the variants alternate call by
// call), then the median of those means and the median call of all rounds. Note that SO_TIMESTAMPNS on any socket makes the kernel stamp
// every received packet (a global switch): that part of its cost is in the send's softirq,
// not in the receive timed here.
//   Usage: recv_cost [iters=100000] [repeats=5] [size=80]
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "mrc/io/udp/udp_driver.h"

namespace {

#ifndef UDP_GRO
constexpr int UDP_GRO = 104;
#endif

double now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

struct Variant {
  const char* name;
  bool recvfrom = false;  // recvfrom instead of recvmmsg
  size_t batch = 1;       // recvmmsg's vlen
  bool name_addr = false, tclass = false, gro = false, stamp = false;
  bool recvmsg = false;   // recvmsg (one message) instead of recvmmsg
};

int bind_loopback(sockaddr_in6* at) {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *at = a;
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const int size = argc > 3 ? std::atoi(argv[3]) : 80;
  if (iters < 1 || repeats < 1 || size < 1 || size > 8192) {
    std::fprintf(stderr, "recv_cost: iters >= 1, repeats >= 1, size 1..8192\n");
    return 2;
  }
  const std::vector<Variant> variants = {
      {"recvfrom", true, 1},
      {"mmsg1", false, 1},
      {"mmsg32", false, mrc::io::kBatch},
      {"+name", false, 32, true},
      {"+tclass", false, 32, true, true},
      {"+gro", false, 32, true, true, true},
      {"+stamp", false, 32, true, true, true, true},
      {"all-1", false, 1, true, true, true, true},
      {"nostamp-1", false, 1, true, true, true},
      {"msg-nostamp", false, 1, true, true, true, false, true},
  };
  const int one = 1;
  std::vector<int> fds;
  std::vector<sockaddr_in6> at(variants.size());
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    const int fd = bind_loopback(&at[i]);
    bool ok = fd >= 0;
    if (ok && v.tclass) ok = ::setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one) == 0;
    if (ok && v.gro) ok = ::setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) == 0;
    if (ok && v.stamp) ok = ::setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) == 0;
    if (!ok) {
      std::perror("recv_cost: receiver socket");
      return 1;
    }
    fds.push_back(fd);
  }
  sockaddr_in6 src{};
  const int tx = bind_loopback(&src);
  if (tx < 0) {
    std::perror("recv_cost: sender socket");
    return 1;
  }
  constexpr size_t kMax = 64;
  std::vector<uint8_t> payload(static_cast<size_t>(size), 0x5a);
  std::vector<uint8_t> data(kMax * 65536);
  std::array<mmsghdr, kMax> msgs{};
  std::array<iovec, kMax> iov{};
  std::array<std::array<uint8_t, 128>, kMax> control{};
  std::array<sockaddr_in6, kMax> from{};
  for (size_t k = 0; k < kMax; ++k) iov[k] = {&data[k * 65536], 65536};
  // Per variant: each round's mean and all its per-call times (their median is robust to the
  // preemptions of a shared machine, which land in a few calls).
  std::vector<std::vector<double>> mean(variants.size());
  std::vector<std::vector<double>> calls(variants.size());
  for (auto& c : calls) c.reserve(static_cast<size_t>(iters) * static_cast<size_t>(repeats));
  long sink = 0;
  const auto receive = [&](size_t i) {
    const Variant& v = variants[i];
    if (::sendto(tx, payload.data(), payload.size(), 0, reinterpret_cast<const sockaddr*>(&at[i]),
                 sizeof at[i]) != size) {
      std::perror("recv_cost: sendto");
      std::exit(1);
    }
    const double t0 = now_ns();
    if (v.recvfrom) {
      socklen_t len = sizeof from[0];
      sink += ::recvfrom(fds[i], data.data(), 65536, MSG_DONTWAIT,
                         reinterpret_cast<sockaddr*>(&from[0]), &len);
    } else {
      for (size_t m = 0; m < v.batch; ++m) {
        msghdr& h = msgs[m].msg_hdr;
        h = msghdr{};
        h.msg_iov = &iov[m];
        h.msg_iovlen = 1;
        if (v.tclass || v.gro || v.stamp) {
          h.msg_control = control[m].data();
          h.msg_controllen = control[m].size();
        }
        if (v.name_addr) {
          h.msg_name = &from[m];
          h.msg_namelen = sizeof from[m];
        }
      }
      sink += v.recvmsg ? ::recvmsg(fds[i], &msgs[0].msg_hdr, MSG_DONTWAIT)
                        : ::recvmmsg(fds[i], msgs.data(), static_cast<unsigned>(v.batch),
                                     MSG_DONTWAIT, nullptr);
    }
    return now_ns() - t0;
  };
  const auto median = [](std::vector<double> s) {
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  };
  for (int r = 0; r < repeats; ++r) {
    // The variants alternate call by call, so the machine's load falls on each alike.
    std::vector<double> spent(variants.size(), 0);
    for (int k = 0; k < iters; ++k) {
      for (size_t i = 0; i < variants.size(); ++i) {
        const double d = receive(i);
        spent[i] += d;
        calls[i].push_back(d);
      }
    }
    std::printf("round %d, mean:", r + 1);
    for (size_t i = 0; i < variants.size(); ++i) {
      mean[i].push_back(spent[i] / iters);
      std::printf(" %s %.0f", variants[i].name, mean[i].back());
    }
    std::printf(" (ns per receive)\n");
  }
  std::printf("median of the round means:");
  for (size_t i = 0; i < variants.size(); ++i) std::printf(" %s %.0f", variants[i].name, median(mean[i]));
  std::printf("\nmedian call:");
  for (size_t i = 0; i < variants.size(); ++i) std::printf(" %s %.0f", variants[i].name, median(calls[i]));
  std::printf(" (ns; %d rounds of %d, %d B datagrams)%s\n", repeats, iters, size,
              sink == 42 ? " " : "");
  for (int fd : fds) ::close(fd);
  ::close(tx);
  return 0;
}
