// Tests of the trimming / ECN-marking eBPF program (tools/mrc-fabric/trim.cc) on real network
// namespaces: sender - switch - receiver (dual stack), the switch's port toward the receiver
// rate-limited by tbf and trimmed at the same rate; MRC over IPv6 and over IPv4, down to a
// receiving UDP driver that NACKs what was trimmed. Skips without permission to create
// namespaces.
// Threading: the test thread only; sockets are opened inside the namespaces by mrc::in_netns.
#include "trim.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mrc/common/fd.h"
#include "mrc/common/netns.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/wire/wire.h"

namespace mrc::nsfabric {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint16_t kMrcPort = wire::kDefaultUdpPort;
constexpr uint16_t kOtherPort = 9999;
constexpr int kEct0 = 0x02;  // traffic class with ECN = ECT(0)
constexpr int kEcnCe = 0x03;
constexpr uint32_t kPayload = 4096;  // per packet (the links' MTU is sized for it)
constexpr int kPollMs = 3000;        // a receive gives up after this long without a datagram

// Runs a shell command; returns its output, or an error with the command and its output.
Result<std::string, std::string> sh(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return Err{cmd + ": popen failed"};
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  if (pclose(p) != 0) return Err{cmd + ": " + out};
  return out;
}

// A network namespace this test created, deleted (with its interfaces and filters) on scope exit.
class Netns {
 public:
  explicit Netns(std::string name) : name_(std::move(name)) {}
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  ~Netns() {
    if (created_) (void)sh("ip netns del " + name_);
  }
  Result<std::string, std::string> create() {
    auto r = sh("ip netns add " + name_);
    created_ = r.ok();
    return r;
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  bool created_ = false;
};

Bytes pattern(size_t n, uint32_t seed) {
  Bytes v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// A WRITE packet with PSN `psn` and a 4 KiB payload, header and payload CRC set.
Bytes mrc_write(uint32_t psn) {
  wire::Packet p;
  p.common.kind = wire::Kind::kWrite;
  p.common.flags = wire::flag::kPayloadCrc;
  p.common.dst_qpn = 7;
  p.common.token = 0xC0FFEE;
  p.common.ev = psn % 16;
  p.common.psn = psn;
  p.data.rkey = 0x1234;
  p.data.offset = psn * kPayload;
  p.data.msg_len = 1 << 30;
  p.data.payload_len = kPayload;
  const Bytes payload = pattern(kPayload, psn);
  Bytes b(wire::kDataHeaderSize + payload.size());
  wire::encode_header(p, payload, b);
  std::copy(payload.begin(), payload.end(), b.begin() + wire::kDataHeaderSize);
  return b;
}

struct Datagram {
  Bytes bytes;
  int tclass = -1;
};

// An IPv6 socket address; an IPv4 literal becomes its mapped form (::ffff:a.b.c.d), which a
// dual-stack socket sends as IPv4.
sockaddr_in6 addr(const char* ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  const std::string s = std::strchr(ip, ':') ? ip : std::string("::ffff:") + ip;
  inet_pton(AF_INET6, s.c_str(), &a.sin6_addr);
  return a;
}

Status<std::string> setopt(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof value) != 0)
    return Err{std::string("setsockopt ") + what + ": " + std::strerror(errno)};
  return {};
}

// sender (S) 2001:db8:1::1 -- in0 switch (W) out0 -- 2001:db8:2::1 receiver (R)
//            192.0.2.1                                   192.0.2.129 (IPv4: 192.0.2.0/25, .128/25)
// out0 has tbf at kRateMbit and the trim program at the same rate.
class TrimFabric : public ::testing::Test {
 protected:
  static constexpr int kRateMbit = 200;
  static constexpr const char* kSenderIp = "2001:db8:1::1";
  static constexpr const char* kReceiverIp = "2001:db8:2::1";
  static constexpr const char* kSenderIp4 = "192.0.2.1";
  static constexpr const char* kReceiverIp4 = "192.0.2.129";

  void SetUp() override {
    static int instance = 0;
    const std::string prefix =
        "mrctrim" + std::to_string(getpid()) + "-" + std::to_string(instance++) + "-";
    sender_ = std::make_unique<Netns>(prefix + "s");
    switch_ = std::make_unique<Netns>(prefix + "w");
    receiver_ = std::make_unique<Netns>(prefix + "r");
    if (auto st = sender_->create(); !st)
      GTEST_SKIP() << "cannot create network namespaces (needs root): " << st.error();
    ASSERT_TRUE(switch_->create().ok());
    ASSERT_TRUE(receiver_->create().ok());
    const std::string& s = sender_->name();
    const std::string& w = switch_->name();
    const std::string& r = receiver_->name();
    // Static MACs and neighbours: no neighbour discovery delays or drops the burst.
    for (const std::string& cmd : {
             "ip link add eth0 netns " + s + " address 02:00:00:00:01:01 mtu 9000 type veth " +
                 "peer name in0 netns " + w + " address 02:00:00:00:01:02 mtu 9000",
             "ip link add out0 netns " + w + " address 02:00:00:00:02:02 mtu 9000 type veth " +
                 "peer name eth0 netns " + r + " address 02:00:00:00:02:01 mtu 9000",
             "ip netns exec " + w + " sysctl -qw net.ipv6.conf.all.forwarding=1",
             "ip netns exec " + w + " sysctl -qw net.ipv4.ip_forward=1",
             "ip -n " + s + " addr add 192.0.2.1/25 dev eth0",
             "ip -n " + w + " addr add 192.0.2.2/25 dev in0",
             "ip -n " + w + " addr add 192.0.2.130/25 dev out0",
             "ip -n " + r + " addr add 192.0.2.129/25 dev eth0",
             "ip -n " + s + " addr add 2001:db8:1::1/64 dev eth0 nodad",
             "ip -n " + w + " addr add 2001:db8:1::2/64 dev in0 nodad",
             "ip -n " + w + " addr add 2001:db8:2::2/64 dev out0 nodad",
             "ip -n " + r + " addr add 2001:db8:2::1/64 dev eth0 nodad",
             "ip -n " + s + " link set eth0 up",
             "ip -n " + w + " link set in0 up",
             "ip -n " + w + " link set out0 up",
             "ip -n " + r + " link set eth0 up",
             "ip -n " + s + " route add 2001:db8:2::/64 via 2001:db8:1::2",
             "ip -n " + r + " route add 2001:db8:1::/64 via 2001:db8:2::2",
             "ip -n " + s + " route add 192.0.2.128/25 via 192.0.2.2",
             "ip -n " + r + " route add 192.0.2.0/25 via 192.0.2.130",
             "ip -n " + s + " neigh replace 192.0.2.2 lladdr 02:00:00:00:01:02 dev eth0 " +
                 "nud permanent",
             "ip -n " + w + " neigh replace 192.0.2.129 lladdr 02:00:00:00:02:01 dev out0 " +
                 "nud permanent",
             "ip -n " + w + " neigh replace 192.0.2.1 lladdr 02:00:00:00:01:01 dev in0 " +
                 "nud permanent",
             "ip -n " + r + " neigh replace 192.0.2.130 lladdr 02:00:00:00:02:02 dev eth0 " +
                 "nud permanent",
             "ip -n " + s + " neigh replace 2001:db8:1::2 lladdr 02:00:00:00:01:02 dev eth0 " +
                 "nud permanent",
             "ip -n " + w + " neigh replace 2001:db8:2::1 lladdr 02:00:00:00:02:01 dev out0 " +
                 "nud permanent",
             "tc -n " + w + " qdisc add dev out0 root tbf rate " + std::to_string(kRateMbit) +
                 "mbit burst 16kb limit 8mb",
         }) {
      auto st = sh(cmd);
      ASSERT_TRUE(st.ok()) << st.error();
    }
    // Every test starts with the program on out0.
    auto st = attach_trim(w, "out0", config());
    if (!st.ok() && st.error().find("(needs root)") != std::string::npos)
      GTEST_SKIP() << "cannot load eBPF programs: " << st.error();
    ASSERT_TRUE(st.ok()) << st.error();
  }

  TrimConfig config() const {
    return TrimConfig{kRateMbit / 1000.0, /*trim_bytes=*/32 * 1024, /*ecn_bytes=*/8 * 1024,
                      kMrcPort};
  }

  // A socket in the sender's netns: zero UDP checksums, traffic class `tclass` (IPv6 and, for
  // IPv4-mapped destinations, the IPv4 TOS).
  void open_sender(UniqueFd& fd, int tclass) {
    auto st = mrc::in_netns(sender_->name(), [&]() -> Status<std::string> {
      fd.reset(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      if (fd.get() < 0) return Err{std::string("socket: ") + std::strerror(errno)};
      if (auto s = setopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY"); !s) return s;
      if (auto s = setopt(fd.get(), SOL_UDP, UDP_NO_CHECK6_TX, 1, "UDP_NO_CHECK6_TX"); !s) return s;
      if (auto s = setopt(fd.get(), SOL_SOCKET, SO_NO_CHECK, 1, "SO_NO_CHECK"); !s) return s;
      if (auto s = setopt(fd.get(), IPPROTO_IP, IP_TOS, tclass, "IP_TOS"); !s) return s;
      if (auto s = setopt(fd.get(), IPPROTO_IPV6, IPV6_TCLASS, tclass, "IPV6_TCLASS"); !s) return s;
      return setopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, 16 << 20, "SO_SNDBUFFORCE");
    });
    ASSERT_TRUE(st.ok()) << st.error();
  }

  // A socket in the receiver's netns bound to `port`, accepting zero checksums, reporting tclass.
  void open_receiver(UniqueFd& fd, uint16_t port) {
    auto st = mrc::in_netns(receiver_->name(), [&]() -> Status<std::string> {
      fd.reset(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      if (fd.get() < 0) return Err{std::string("socket: ") + std::strerror(errno)};
      if (auto s = setopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, 0, "IPV6_V6ONLY"); !s) return s;
      if (auto s = setopt(fd.get(), SOL_UDP, UDP_NO_CHECK6_RX, 1, "UDP_NO_CHECK6_RX"); !s) return s;
      if (auto s = setopt(fd.get(), IPPROTO_IP, IP_RECVTOS, 1, "IP_RECVTOS"); !s) return s;
      if (auto s = setopt(fd.get(), IPPROTO_IPV6, IPV6_RECVTCLASS, 1, "IPV6_RECVTCLASS"); !s) return s;
      if (auto s = setopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20, "SO_RCVBUFFORCE"); !s)
        return s;
      const sockaddr_in6 a = addr("::", port);
      if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
        return Err{std::string("bind: ") + std::strerror(errno)};
      return {};
    });
    ASSERT_TRUE(st.ok()) << st.error();
  }

  // Sends every datagram in one burst (sendmmsg) to the receiver's `port`, over IPv6 or IPv4.
  static void send_burst(int fd, const std::vector<Bytes>& dgrams, uint16_t port, bool v4 = false) {
    sockaddr_in6 dst = addr(v4 ? kReceiverIp4 : kReceiverIp, port);
    std::vector<iovec> iov(dgrams.size());
    std::vector<mmsghdr> msgs(dgrams.size());
    for (size_t i = 0; i < dgrams.size(); ++i) {
      iov[i] = {const_cast<uint8_t*>(dgrams[i].data()), dgrams[i].size()};
      msgs[i].msg_hdr.msg_name = &dst;
      msgs[i].msg_hdr.msg_namelen = sizeof dst;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (size_t sent = 0; sent < msgs.size();) {
      const int n = sendmmsg(fd, msgs.data() + sent, static_cast<unsigned>(msgs.size() - sent), 0);
      ASSERT_GT(n, 0) << "sendmmsg: " << std::strerror(errno);
      sent += static_cast<size_t>(n);
    }
  }

  // Receives up to `n` datagrams; stops early when none comes for kPollMs.
  static std::vector<Datagram> receive(int fd, size_t n) {
    std::vector<Datagram> out;
    Bytes buf(65536);
    while (out.size() < n) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, kPollMs) <= 0) break;
      iovec iov{buf.data(), buf.size()};
      alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = ctl;
      m.msg_controllen = sizeof ctl;
      const ssize_t len = recvmsg(fd, &m, 0);
      if (len < 0) break;
      Datagram d;
      d.bytes.assign(buf.begin(), buf.begin() + len);
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)
          std::memcpy(&d.tclass, CMSG_DATA(c), sizeof d.tclass);
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) d.tclass = *CMSG_DATA(c);
      }
      out.push_back(std::move(d));
    }
    return out;
  }

  TrimCounters counters() {
    auto c = trim_counters(switch_->name(), "out0");
    EXPECT_TRUE(c.ok()) << c.error();
    return c.ok() ? *c : TrimCounters{};
  }

  void burst_trims_and_marks(bool v4);  // below

  std::unique_ptr<Netns> sender_, switch_, receiver_;
};

TEST(AttachTrim, BadConfigNamesPortAndField) {
  auto st = attach_trim("ns0", "p0", TrimConfig{0, 1000, 100});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("p0 in ns0: bad trim config: rate_gbps"), std::string::npos)
      << st.error();
  st = attach_trim("ns0", "p0", TrimConfig{1, 1000, 2000});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("ecn_bytes (2000) must not exceed trim_bytes (1000)"),
            std::string::npos)
      << st.error();
  st = attach_trim("ns0", "p0", TrimConfig{1, 1000, 100, 0});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("udp_port"), std::string::npos) << st.error();
}

TEST(AttachTrim, UnknownNetnsIsNamed) {
  const std::string ns = "mrctrim" + std::to_string(getpid()) + "-absent";
  auto st = attach_trim(ns, "p0", TrimConfig{1, 1000, 100});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), "p0 in " + ns + ": netns " + ns + " does not exist");
}

TEST_F(TrimFabric, UnknownInterfaceNamesPort) {
  auto st = attach_trim(switch_->name(), "nope0", config());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().rfind("nope0 in " + switch_->name() + ": interface:", 0), 0u) << st.error();
}

// A burst far above the port rate: every MRC packet arrives and decodes, the queue marks CE
// then trims, untrimmed payloads are intact, and the counters say what arrived.
// A burst of MRC WRITE packets over IPv6 (v4: over IPv4): the first finds an empty queue, later
// ones are marked and then trimmed, trimmed ones arrive as whole, valid headers (on IPv4 the
// kernel checks the rewritten header checksum before delivering), and the counters agree.
TEST_F(TrimFabric, Burst_TrimsAndMarksAndCountersAgree) { burst_trims_and_marks(false); }
TEST_F(TrimFabric, Burst_Ipv4TrimsAndMarksAndCountersAgree) { burst_trims_and_marks(true); }

void TrimFabric::burst_trims_and_marks(bool v4) {
  constexpr size_t kPackets = 300;
  const TrimCounters before = counters();
  UniqueFd tx, rx;
  ASSERT_NO_FATAL_FAILURE(open_sender(tx, kEct0));
  ASSERT_NO_FATAL_FAILURE(open_receiver(rx, kMrcPort));

  std::vector<Bytes> burst;
  for (uint32_t psn = 0; psn < kPackets; ++psn) burst.push_back(mrc_write(psn));
  ASSERT_NO_FATAL_FAILURE(send_burst(tx.get(), burst, kMrcPort, v4));
  const std::vector<Datagram> got = receive(rx.get(), kPackets);
  ASSERT_EQ(got.size(), kPackets) << "tbf and socket buffers are sized to lose nothing";

  size_t trimmed = 0;
  size_t ce = 0;
  std::vector<bool> seen(kPackets);
  for (const Datagram& d : got) {
    auto p = wire::decode(d.bytes);
    ASSERT_TRUE(p.ok()) << wire::to_string(p.error());
    const uint32_t psn = p->common.psn;
    ASSERT_LT(psn, kPackets);
    EXPECT_FALSE(seen[psn]) << "psn " << psn << " twice";
    seen[psn] = true;
    const bool is_ce = (d.tclass & 0x3) == kEcnCe;
    if (p->trimmed) {
      ++trimmed;
      EXPECT_EQ(d.bytes.size(), wire::kDataHeaderSize);
      EXPECT_TRUE(p->payload.empty());
      EXPECT_NE(p->common.net_flags & wire::net_flag::kTrimmed, 0);
      EXPECT_FALSE(is_ce) << "trimmed packets are not also marked";
    } else {
      const Bytes want = pattern(kPayload, psn);
      EXPECT_TRUE(std::equal(p->payload.begin(), p->payload.end(), want.begin(), want.end()))
          << "psn " << psn;
      EXPECT_EQ(p->common.net_flags, 0);
    }
    EXPECT_TRUE(is_ce || (d.tclass & 0x3) == kEct0) << "tclass " << d.tclass;
    if (is_ce) ++ce;
    if (psn == 0) {
      EXPECT_TRUE(!p->trimmed && !is_ce) << "the first packet finds an empty queue";
    }
  }
  EXPECT_GT(trimmed, 0u);
  EXPECT_GT(ce, 0u);
  EXPECT_LT(trimmed, kPackets);

  const TrimCounters after = counters();
  EXPECT_EQ(after.trimmed - before.trimmed, trimmed);
  EXPECT_EQ(after.ce_marked - before.ce_marked, ce);
  EXPECT_EQ(after.gso_passed, 0u);
  const uint64_t mrc_packets = (after.packets - after.not_mrc) - (before.packets - before.not_mrc);
  EXPECT_EQ(mrc_packets, kPackets);
  uint64_t l2_bytes = 0;  // what arrived plus Ethernet + IP + UDP headers
  for (const Datagram& d : got) l2_bytes += d.bytes.size() + 14 + (v4 ? 20 : 40) + 8;
  EXPECT_GE(after.bytes - before.bytes, l2_bytes);
}

// MRC over IPv4 end to end: a UDP driver in the sender's namespace WRITEs 4 MiB to one in the
// receiver's (planes 192.0.2.1 and 192.0.2.129, IPv4-mapped; no GSO, whose skbs are never
// trimmed). Its first window overfills out0's queue: the program trims IPv4 data packets, the
// receiving engine counts each as a trimmed drop and NACKs it, the sender gets the NACKs and
// resends, and the WRITE completes with every byte in place.
TEST_F(TrimFabric, Ipv4Write_TrimmedPacketsAreNackedAndResent) {
  using namespace engine;
  constexpr size_t kBytes = 4u << 20;
  struct End {
    std::unique_ptr<io::UdpDriver> drv;
    CqId cq = 0;
    Qpn qpn = 0;
    PeerId peer = 0;
  } end[2];
  const std::string ns[2] = {sender_->name(), receiver_->name()};
  const char* ip[2] = {kSenderIp4, kReceiverIp4};
  for (int i = 0; i < 2; ++i) {
    io::UdpConfig cfg;
    cfg.planes.push_back(io::PlaneConfig{std::string("::ffff:") + ip[i],
                                         static_cast<uint16_t>(i == 0 ? 0 : kMrcPort)});
    cfg.netns = ns[i];
    cfg.gso = false;
    auto d = io::UdpDriver::create(cfg);
    ASSERT_TRUE(d.ok()) << d.error();
    end[i].drv = std::move(d).value();
    auto cq = end[i].drv->with_engine([](Engine& e) { return e.create_cq(1u << 12); });
    ASSERT_TRUE(cq.ok());
    end[i].cq = *cq;
  }
  for (int i = 0; i < 2; ++i)
    end[i].peer = end[i].drv->add_peer({end[1 - i].drv->local_address(0)});
  const uint32_t token[2] = {0xA11CEu, 0xB0Bu};
  for (int i = 0; i < 2; ++i) {
    QpInit init;
    init.send_cq = init.recv_cq = end[i].cq;
    init.local_token = token[i];
    auto q = end[i].drv->with_engine([&](Engine& e) { return e.create_qp(init); });
    ASSERT_TRUE(q.ok());
    end[i].qpn = *q;
  }
  std::vector<Path> paths;
  for (uint32_t ev = 0; ev < 4; ++ev) paths.push_back(Path{ev + 1, 0});
  for (int i = 0; i < 2; ++i) {
    end[i].drv->with_engine([&](Engine& e) {
      QpAttr at;
      at.state = QpState::kInit;
      ASSERT_TRUE(e.modify_qp(end[i].qpn, at, attr::kState).ok());
      at.state = QpState::kRtr;
      at.peer = end[i].peer;
      at.dest_qpn = end[1 - i].qpn;
      at.remote_token = token[1 - i];
      at.rq_psn = 100;
      at.paths = paths;
      ASSERT_TRUE(
          e.modify_qp(end[i].qpn, at, attr::kState | attr::kDest | attr::kPaths | attr::kRqPsn)
              .ok());
      at.state = QpState::kRts;
      at.sq_psn = 100;
      ASSERT_TRUE(e.modify_qp(end[i].qpn, at, attr::kState | attr::kSqPsn).ok());
    });
  }
  const Bytes src = pattern(kBytes, 9);
  Bytes dst(kBytes, 0);
  auto reg = [](io::UdpDriver& d, const Bytes& m) {
    auto r = d.with_engine([&](Engine& e) {
      return e.register_mr(const_cast<uint8_t*>(m.data()), m.size(),
                           reinterpret_cast<uint64_t>(m.data()),
                           access::kLocalWrite | access::kRemoteWrite);
    });
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : 0u;
  };
  const uint32_t lkey = reg(*end[0].drv, src), rkey = reg(*end[1].drv, dst);
  for (auto& e : end) e.drv->start();
  const TrimCounters before = counters();
  Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), lkey};
  SendWr wr;
  wr.wr_id = 1;
  wr.opcode = Opcode::kWrite;
  wr.sg = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.rkey = rkey;
  auto posted = end[0].drv->with_engine([&](Engine& e) { return e.post_send(end[0].qpn, wr); });
  ASSERT_TRUE(posted.ok()) << to_string(posted.error());
  std::vector<Completion> got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got.empty() && std::chrono::steady_clock::now() < until) {
    Completion c[4];
    const size_t k = end[0].drv->with_engine(
        [&](Engine& e) { return e.poll_cq(end[0].cq, std::span<Completion>(c)); });
    got.insert(got.end(), c, c + k);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const TrimCounters after = counters();  // nothing is trimmed after the completion
  const uint64_t trimmed = after.trimmed - before.trimmed;
  // A trimmed copy whose data arrived in another (resent) may still be on its way when the
  // WRITE completes (CI read 3694 of 3745): wait, up to 2 s, until the receiver saw each.
  uint64_t tx_nacks = 0, rx_nacks = 0, trimmed_drops = 0;
  for (const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(2);;) {
    end[1].drv->with_engine([&](Engine& e) {
      if (const QpStats* q = e.qp_stats(end[1].qpn)) tx_nacks = q->tx_nacks;
      trimmed_drops = e.stats().drops[static_cast<size_t>(Drop::kTrimmed)];
    });
    if (trimmed_drops >= trimmed || std::chrono::steady_clock::now() > settle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  end[0].drv->with_engine([&](Engine& e) {
    if (const QpStats* q = e.qp_stats(end[0].qpn)) rx_nacks = q->rx_nacks;
  });
  for (auto& e : end) e.drv->stop();
  ASSERT_EQ(got.size(), 1u) << "the 4 MiB WRITE did not complete in 20 s";
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(src == dst) << "the destination differs";
  EXPECT_GT(trimmed, 0u) << "the first window should overfill a 32 KiB trim threshold";
  EXPECT_EQ(trimmed_drops, trimmed) << "every trimmed IPv4 packet reached the receiver's engine";
  EXPECT_GE(tx_nacks, trimmed) << "the receiver NACKs each trimmed packet";
  EXPECT_GT(rx_nacks, 0u);
  EXPECT_LE(rx_nacks, tx_nacks);
}

// Datagrams that are not MRC (another port; the MRC port with a bad version; too short) pass
// byte for byte even while the queue is far above the trim threshold.
TEST_F(TrimFabric, NonMrc_PassesUnmodified) {
  UniqueFd tx, rx_mrc, rx_other;
  ASSERT_NO_FATAL_FAILURE(open_sender(tx, 0));
  ASSERT_NO_FATAL_FAILURE(open_receiver(rx_mrc, kMrcPort));
  ASSERT_NO_FATAL_FAILURE(open_receiver(rx_other, kOtherPort));

  std::vector<Bytes> other;
  std::vector<Bytes> at_mrc_port;
  for (uint32_t i = 0; i < 60; ++i) {
    other.push_back(mrc_write(i));  // well-formed MRC, but not at the configured port
    Bytes bad = mrc_write(i);
    bad[0] = wire::kVersion + 1;
    at_mrc_port.push_back(bad);
  }
  at_mrc_port.push_back(Bytes{1, 1, 0, 0, 0});  // version and kind right, far too short
  ASSERT_NO_FATAL_FAILURE(send_burst(tx.get(), other, kOtherPort));
  ASSERT_NO_FATAL_FAILURE(send_burst(tx.get(), at_mrc_port, kMrcPort));

  const std::vector<Datagram> got_other = receive(rx_other.get(), other.size());
  ASSERT_EQ(got_other.size(), other.size());
  for (size_t i = 0; i < other.size(); ++i) {
    EXPECT_EQ(got_other[i].bytes, other[i]) << "datagram " << i;
    EXPECT_EQ(got_other[i].tclass, 0);
  }
  const std::vector<Datagram> got_mrc = receive(rx_mrc.get(), at_mrc_port.size());
  ASSERT_EQ(got_mrc.size(), at_mrc_port.size());
  for (size_t i = 0; i < at_mrc_port.size(); ++i)
    EXPECT_EQ(got_mrc[i].bytes, at_mrc_port[i]) << "datagram " << i;

  const TrimCounters c = counters();
  EXPECT_EQ(c.trimmed, 0u);
  EXPECT_EQ(c.ce_marked, 0u);
  EXPECT_GE(c.not_mrc, other.size() + at_mrc_port.size());
}

// GSO skbs (one UDP_SEGMENT send of several MRC packets) cannot be trimmed per segment: they
// pass whole, count in the queue and in gso_passed, and get CE above ecn_bytes.
TEST_F(TrimFabric, Gso_PassesUntrimmedAndIsCounted) {
  constexpr size_t kSends = 4;
  constexpr size_t kSegments = 8;  // 8 x 4168 bytes: one send alone fills the queue past trim
  UniqueFd tx, rx;
  ASSERT_NO_FATAL_FAILURE(open_receiver(rx, kMrcPort));
  auto st = mrc::in_netns(sender_->name(), [&]() -> Status<std::string> {
    // UDP GSO needs checksums on (the kernel refuses UDP_SEGMENT with UDP_NO_CHECK6_TX).
    tx.reset(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (tx.get() < 0) return Err{std::string("socket: ") + std::strerror(errno)};
    if (auto s = setopt(tx.get(), IPPROTO_IPV6, IPV6_TCLASS, kEct0, "IPV6_TCLASS"); !s) return s;
    return setopt(tx.get(), SOL_UDP, UDP_SEGMENT,
                  static_cast<int>(wire::kDataHeaderSize) + static_cast<int>(kPayload),
                  "UDP_SEGMENT");
  });
  ASSERT_TRUE(st.ok()) << st.error();

  const sockaddr_in6 dst = addr(kReceiverIp, kMrcPort);
  for (uint32_t i = 0; i < kSends; ++i) {
    Bytes gso;
    for (uint32_t k = 0; k < kSegments; ++k) {
      const Bytes one = mrc_write(i * kSegments + k);
      gso.insert(gso.end(), one.begin(), one.end());
    }
    ASSERT_EQ(sendto(tx.get(), gso.data(), gso.size(), 0, reinterpret_cast<const sockaddr*>(&dst),
                     sizeof dst),
              static_cast<ssize_t>(gso.size()))
        << std::strerror(errno);
  }
  const std::vector<Datagram> got = receive(rx.get(), kSends * kSegments);
  ASSERT_EQ(got.size(), kSends * kSegments);
  size_t ce = 0;
  for (const Datagram& d : got) {
    auto p = wire::decode(d.bytes);
    ASSERT_TRUE(p.ok()) << wire::to_string(p.error());
    EXPECT_FALSE(p->trimmed);
    if ((d.tclass & 0x3) == kEcnCe) ++ce;
  }
  const TrimCounters c = counters();
  EXPECT_EQ(c.gso_passed, kSends);
  EXPECT_EQ(c.trimmed, 0u);
  EXPECT_GT(c.ce_marked, 0u);
  EXPECT_EQ(ce, c.ce_marked * kSegments) << "a marked GSO skb marks every segment";
}

// The filter and its counters outlive the process that attached them; another process reads them.
TEST_F(TrimFabric, Attach_OutlivesTheLoadingProcess) {
  ASSERT_TRUE(detach_trim(switch_->name(), "out0").ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) _exit(attach_trim(switch_->name(), "out0", config()).ok() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "attach in the child failed";

  UniqueFd tx, rx;
  ASSERT_NO_FATAL_FAILURE(open_sender(tx, kEct0));
  ASSERT_NO_FATAL_FAILURE(open_receiver(rx, kMrcPort));
  ASSERT_NO_FATAL_FAILURE(send_burst(tx.get(), {mrc_write(0)}, kMrcPort));
  ASSERT_EQ(receive(rx.get(), 1).size(), 1u);
  EXPECT_GE(counters().packets - counters().not_mrc, 1u);
}

// Detach removes the filter: counters are gone, traffic passes, a second detach says so.
TEST_F(TrimFabric, Detach_RemovesFilter) {
  const std::string& w = switch_->name();
  ASSERT_TRUE(attach_trim(w, "out0", config()).ok()) << "attaching again replaces";
  ASSERT_TRUE(trim_counters(w, "out0").ok());
  auto st = detach_trim(w, "out0");
  ASSERT_TRUE(st.ok()) << st.error();

  auto c = trim_counters(w, "out0");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "out0 in " + w + ": no trim program attached");
  st = detach_trim(w, "out0");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), "out0 in " + w + ": no trim program attached");
  auto filters = sh("tc -n " + w + " filter show dev out0 egress");
  ASSERT_TRUE(filters.ok()) << filters.error();
  EXPECT_EQ(*filters, "") << "an egress filter is left";
}

}  // namespace
}  // namespace mrc::nsfabric
