// The delay line (delay_line.h): veth pair, the forked process and its loop.
#include "delay_line.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "command.h"
#include "gray.h"
#include "mrc/common/netns.h"

namespace mrc::nsfabric {
namespace {

// struct virtio_net_hdr, which PACKET_VNET_HDR puts before each frame (linux/virtio_net.h
// does not compile as C++ beside the libc headers).
constexpr size_t kVnetHdrBytes = 10;

std::string capture_if(const std::string& ifname) { return "dl" + ifname; }
std::string reader_if(const std::string& ifname) { return "dr" + ifname; }

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// The child's whole life after the fork; writes "ok" or an error to `ready`, then loops.
[[noreturn]] void run(const std::string& netns, const std::string& ifname,
                      const DelayLineConfig& cfg, int ready) {
  const auto fail = [&](const std::string& what) {
    const std::string msg = what + ": " + std::strerror(errno);
    (void)!write(ready, msg.data(), msg.size());
    _exit(1);
  };
  const std::string ns_path = "/run/netns/" + netns;
  const int nsfd = open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) fail("enter " + netns);
  close(nsfd);
  const unsigned rx_if = if_nametoindex(reader_if(ifname).c_str());
  const unsigned tx_if = if_nametoindex(ifname.c_str());
  if (rx_if == 0 || tx_if == 0) fail("interfaces");
  const int one = 1;
  const int rx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
  const int tx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (rx < 0 || tx < 0) fail("packet socket");
  const uint32_t mark = kGrayPassMark;
  if (setsockopt(rx, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0 ||
      setsockopt(tx, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0) {
    fail("PACKET_VNET_HDR");
  }
  if (setsockopt(tx, SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0) fail("SO_MARK");
  const int buf = kLineSocketBufferBytes;
  (void)setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  (void)setsockopt(tx, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
  sockaddr_ll rx_addr{};
  rx_addr.sll_family = AF_PACKET;
  rx_addr.sll_protocol = htons(ETH_P_ALL);
  rx_addr.sll_ifindex = static_cast<int>(rx_if);
  if (bind(rx, reinterpret_cast<const sockaddr*>(&rx_addr), sizeof rx_addr) != 0) fail("bind");
  sockaddr_ll tx_addr{};
  tx_addr.sll_family = AF_PACKET;
  tx_addr.sll_ifindex = static_cast<int>(tx_if);
  (void)!write(ready, "ok", 2);
  close(ready);

  std::multimap<int64_t, std::string> held;  // due time (ns) -> vnet header + frame
  size_t held_bytes = 0;
  uint64_t rnd = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull | 1;
  std::string frame(kVnetHdrBytes + 65536 + 64, '\0');
  int64_t next_check = 0;
  DelayLineDrops drops, written;
  for (;;) {
    int64_t now = now_ns();
    while (!held.empty() && held.begin()->first <= now) {
      const std::string& f = held.begin()->second;
      (void)sendto(tx, f.data(), f.size(), 0, reinterpret_cast<const sockaddr*>(&tx_addr),
                   sizeof tx_addr);
      held_bytes -= f.size();
      held.erase(held.begin());
    }
    if (now >= next_check) {  // the namespace gone: the fabric was removed
      if (access(ns_path.c_str(), F_OK) != 0) _exit(0);
      next_check = now + 200'000'000;
      tpacket_stats stats{};  // reading resets the kernel's counts
      socklen_t len = sizeof stats;
      if (getsockopt(rx, SOL_PACKET, PACKET_STATISTICS, &stats, &len) == 0) {
        drops.socket += stats.tp_drops;
      }
      if (!cfg.drops_file.empty() &&
          (drops.over_limit != written.over_limit || drops.socket != written.socket)) {
        const std::string tmp = cfg.drops_file + ".tmp";
        const std::string text =
            std::to_string(drops.over_limit) + " " + std::to_string(drops.socket) + "\n";
        const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
          const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
          close(fd);
          if (ok && rename(tmp.c_str(), cfg.drops_file.c_str()) == 0) written = drops;
        }
      }
    }
    int64_t wait = 100'000'000;
    if (!held.empty()) wait = std::min(wait, held.begin()->first - now);
    const timespec ts{static_cast<time_t>(wait / 1000000000), static_cast<long>(wait % 1000000000)};
    pollfd p{rx, POLLIN, 0};
    (void)ppoll(&p, 1, &ts, nullptr);
    for (;;) {
      const ssize_t n = recv(rx, frame.data(), frame.size(), 0);
      if (n <= 0) break;
      now = now_ns();
      int64_t due = now + int64_t{cfg.base_us} * 1000;
      rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
      if (cfg.extra_per10k > 0 && rnd % 10000 < cfg.extra_per10k)
        due += int64_t{cfg.extra_us} * 1000;
      if (held_bytes + static_cast<size_t>(n) > kMaxHeldBytes) {
        ++drops.over_limit;
        continue;
      }
      held.emplace(due, frame.substr(0, static_cast<size_t>(n)));
      held_bytes += static_cast<size_t>(n);
    }
  }
}

Status<std::string> ip(const std::string& netns, std::vector<std::string> args) {
  args.insert(args.begin(), {"ip", "-n", netns});
  auto r = run_command(args);
  if (!r) return Err(r.error());
  return {};
}

void remove_pair(const std::string& netns, const std::string& ifname) {
  (void)ip(netns, {"link", "del", capture_if(ifname)});
}

}  // namespace

bool is_named_process(int pid, const std::string& name) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  return std::getline(in, comm) && comm == name;
}

bool is_delay_line(int pid) { return is_named_process(pid, kDelayLineName); }

Result<DelayLineDrops, std::string> read_delay_line_drops(const std::string& drops_file) {
  std::ifstream in(drops_file);
  DelayLineDrops d;
  if (!in) return d;
  if (!(in >> d.over_limit >> d.socket)) return Err(drops_file + ": not two counts");
  return d;
}

void reset_signals_in_child() {
  for (int sig = 1; sig < NSIG; ++sig) (void)signal(sig, SIG_DFL);  // SIGKILL/SIGSTOP: EINVAL
  sigset_t none;
  sigemptyset(&none);
  (void)sigprocmask(SIG_SETMASK, &none, nullptr);
}

void stop_named_process(int pid, const std::string& name) {
  if (!is_named_process(pid, name)) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 200; ++i) {  // up to 2 s
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    if (kill(pid, 0) != 0 && errno == ESRCH) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, WNOHANG);
}

Result<DelayLine, std::string> start_delay_line(const std::string& netns, const std::string& ifname,
                                                const DelayLineConfig& cfg) {
  const std::string where = ifname + " in " + netns + ": delay line: ";
  if (capture_if(ifname).size() >= IFNAMSIZ) return Err(where + "interface name too long");
  remove_pair(netns, ifname);
  if (auto s = ip(netns, {"link", "add", capture_if(ifname), "mtu", "65535", "type", "veth", "peer",
                          "name", reader_if(ifname), "mtu", "65535"});
      !s) {
    return Err(where + s.error());
  }
  auto set_up = mrc::in_netns(netns, [&]() -> Status<std::string> {
    for (const std::string& i : {capture_if(ifname), reader_if(ifname)}) {
      std::ofstream f("/proc/sys/net/ipv6/conf/" + i + "/disable_ipv6");
      if (!(f << "1\n")) return Err("disable_ipv6 on " + i);
    }
    return {};
  });
  if (set_up) set_up = ip(netns, {"link", "set", capture_if(ifname), "up"});
  if (set_up) set_up = ip(netns, {"link", "set", reader_if(ifname), "up"});
  auto index = mrc::in_netns(netns, [&]() -> Result<uint32_t, std::string> {
    const unsigned i = if_nametoindex(capture_if(ifname).c_str());
    if (i == 0) return Err("no " + capture_if(ifname));
    return static_cast<uint32_t>(i);
  });
  if (!set_up || !index) {
    remove_pair(netns, ifname);
    return Err(where + (!set_up ? set_up.error() : index.error()));
  }

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Err(where + "pipe: " + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    remove_pair(netns, ifname);
    return Err(where + "fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    reset_signals_in_child();
    setsid();
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    dup2(pipefd[1], 3);
    close_range(4, ~0u, 0);  // also the parent's state lock
    prctl(PR_SET_NAME, kDelayLineName);
    run(netns, ifname, cfg, 3);
  }
  close(pipefd[1]);
  std::string answer;
  char b[256];
  pollfd p{pipefd[0], POLLIN, 0};
  while (poll(&p, 1, 5000) > 0) {
    const ssize_t n = read(pipefd[0], b, sizeof b);
    if (n <= 0) break;
    answer.append(b, static_cast<size_t>(n));
  }
  close(pipefd[0]);
  if (answer != "ok") {
    stop_named_process(pid, kDelayLineName);
    waitpid(pid, nullptr, WNOHANG);
    remove_pair(netns, ifname);
    return Err(where + (answer.empty() ? "the process did not start" : answer));
  }
  return DelayLine{static_cast<int>(pid), *index};
}

void stop_delay_line(const std::string& netns, const std::string& ifname, int pid) {
  stop_named_process(pid, kDelayLineName);
  if (access(("/run/netns/" + netns).c_str(), F_OK) == 0) remove_pair(netns, ifname);
}

}  // namespace mrc::nsfabric
