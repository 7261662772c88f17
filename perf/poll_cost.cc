// What a poller's readiness check costs with nothing to read (issue 17): ppoll of N plane
// sockets against epoll_wait(0) on an epoll set of the same sockets (UdpDriver::poll_progress
// uses the latter), and an empty recvmmsg and a CLOCK_MONOTONIC read for scale. N UDP/IPv6
// sockets bound to ::1, nothing sent. Prints ns per call, each of REPEATS rounds of ITERS
// calls, the kinds alternated within a round. Then what pushing the pollers' hold timer costs
// (UdpDriver::poll_progress, arm_poller_timer): timerfd_settime to 100 us ahead every 25 us
// (the timer becomes the CPU's next: the clock event device is reprogrammed, on a VM an exit)
// against 1 s ahead (behind the tick: no reprogramming), the median of 20,000 calls each.
//   Usage: poll_cost [sockets=4] [iters=300000] [repeats=3]
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace {

double now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 300000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  if (n < 1 || n > 64 || iters < 1 || repeats < 1) {
    std::fprintf(stderr, "poll_cost: sockets 1..64, iters >= 1, repeats >= 1\n");
    return 2;
  }
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    std::perror("poll_cost: epoll_create1");
    return 1;
  }
  std::vector<int> fds;
  std::vector<pollfd> pfds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u32 = static_cast<uint32_t>(i);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) {
      std::perror("poll_cost: socket");
      return 1;
    }
    fds.push_back(fd);
    pfds.push_back({fd, POLLIN, 0});
  }
  const timespec zero{};
  std::vector<epoll_event> ev(static_cast<size_t>(n));
  char buf[64];
  iovec v{buf, sizeof buf};
  mmsghdr m{};
  m.msg_hdr.msg_iov = &v;
  m.msg_hdr.msg_iovlen = 1;
  int sink = 0;  // results used, so no call is optimised away
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_ns();
    for (int k = 0; k < iters; ++k) sink += ppoll(pfds.data(), pfds.size(), &zero, nullptr);
    const double t1 = now_ns();
    for (int k = 0; k < iters; ++k) sink += epoll_wait(ep, ev.data(), n, 0);
    const double t2 = now_ns();
    for (int k = 0; k < iters; ++k) sink += recvmmsg(fds[0], &m, 1, MSG_DONTWAIT, nullptr);
    const double t3 = now_ns();
    double s = 0;
    for (int k = 0; k < iters; ++k) s += now_ns();
    const double t4 = now_ns();
    std::printf(
        "round %d: ppoll of %d sockets %.0f ns, epoll_wait(0) %.0f ns, empty recvmmsg %.0f ns, "
        "clock read %.0f ns%s\n",
        r + 1, n, (t1 - t0) / iters, (t2 - t1) / iters, (t3 - t2) / iters, (t4 - t3) / iters,
        s < 0 || sink == 42 ? " " : "");
  }
  const int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (tfd < 0) {
    std::perror("poll_cost: timerfd_create");
    return 1;
  }
  for (const double ahead : {100e3, 1e9}) {
    std::vector<double> ns;
    double next = now_ns();
    for (int k = 0; k < 20000; ++k) {
      while (now_ns() < next) {
      }
      next += 25e3;  // a push per 25 us of polling
      const auto at = static_cast<int64_t>(now_ns() + ahead);
      itimerspec its{};
      its.it_value.tv_sec = static_cast<time_t>(at / 1'000'000'000);
      its.it_value.tv_nsec = static_cast<long>(at % 1'000'000'000);
      const double t0 = now_ns();
      sink += timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, nullptr);
      ns.push_back(now_ns() - t0);
    }
    std::sort(ns.begin(), ns.end());
    std::printf("timerfd_settime %.0f us ahead, one per 25 us: median %.0f ns, p90 %.0f ns\n",
                ahead / 1e3, ns[ns.size() / 2], ns[ns.size() * 9 / 10]);
  }
  close(tfd);
  for (int fd : fds) close(fd);
  close(ep);
  return 0;
}
