// A multi-plane ECMP fabric built by hand with plain `ip` and `tc` commands, as a user's
// own network would be: no fabric file, no SRv6, no mrc-fabric. 2 hosts, P planes, S spines
// per plane; in each plane a T0 per host and S spines, ordinary routes, the T0s spread over
// the spines by ECMP (L4 hash). Dual stack, its own addressing:
//   IPv6: 2001:db8:<plane>:<net>::<id>/64      IPv4: 198.18.<plane * 16 + net>.<id>/24
//   net: host h's link = h, T0 (h) - spine (k) link = 10 + 2h + k; id: host 1, T0 2 on host
//   links; T0 1, spine 2 on T0-spine links. A management link between the hosts ("mgmt",
//   198.19.0.h+1) carries the tools' own TCP exchange. Host ports (both ends) are shaped by tbf.
// With Options::srv6 the same switches also forward SRv6 uSIDs, programmed with plain
// `ip -6 route ... encap seg6local action End flavors next-csid` lines and an addressing
// plan of their own (not srv6/'s generated one, not mrc-fabric's), and srv6_fabric_json()
// is the hand-written explicit fabric file (srv6/config.h) that describes them:
//   plane p's locator block fc00:1a:<p>::/48 (lblen 48), 16-bit uSIDs (nflen 16);
//   T0 of host h: uSID 0xa0 + h; spine k: uSID 0xb0 + k (the same numbers in every plane);
//   host h's port address in the T0's locator: fc00:1a:<p>:<a0+h>:1:: (fabric.h's locator
//   form), its T0 routes it (/128) down the host port; a path via spine k is
//   fc00:1a:<p>:<b0+k>:<a0+h>:1:: (the spine shifts its uSID off: the T0's address is next).
//   A T0 also routes the other T0's locator (/64) over its spines by ECMP, so plain traffic
//   to a host port address (TCP) needs no SRv6.
// Namespaces are named <prefix>-h<h>, -t<p>h<h>, -s<p>k<k>; down() (and the destructor)
// removes them all. Threading: test thread only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "command.h"
#include "mrc/common/netns.h"
#include "mrc/common/result.h"

namespace mrc::verbs {

class HandFabric {
 public:
  struct Options {
    std::string prefix;  // unique to the test process
    uint32_t planes = 2;
    uint32_t spines = 2;
    std::string rate = "500mbit";  // tbf rate of every host port
    uint32_t mtu = 9000;           // of every fabric link: a 4 KiB MRC packet and its headers
    bool srv6 = false;             // also program the SRv6 uSID routes (above)
    // What the switches' IPv6 ECMP hashes (net.ipv6.fib_multipath_hash_policy; 3: custom, the
    // fields in ipv6_hash_fields, e.g. 0x8: the flow label only).
    uint32_t ipv6_hash_policy = 1;
    uint32_t ipv6_hash_fields = 0;
  };

  static Result<HandFabric, std::string> up(const Options& o) {
    HandFabric f(o);
    if (auto s = f.build(); !s) {
      f.down();
      return Err(s.error());
    }
    return f;
  }
  HandFabric(HandFabric&& o) noexcept : o_(o.o_), made_(std::move(o.made_)) { o.made_.clear(); }
  HandFabric& operator=(HandFabric&&) = delete;
  ~HandFabric() { down(); }

  /// Removes every namespace this fabric made (also what a failed up() left); idempotent.
  void down() {
    for (const std::string& ns : made_) (void)nsfabric::run_command({"ip", "netns", "del", ns});
    made_.clear();
  }

  std::string host(uint32_t h) const { return o_.prefix + "-h" + std::to_string(h); }
  std::string t0(uint32_t p, uint32_t h) const {
    return o_.prefix + "-t" + std::to_string(p) + "h" + std::to_string(h);
  }
  std::string spine(uint32_t p, uint32_t k) const {
    return o_.prefix + "-s" + std::to_string(p) + "k" + std::to_string(k);
  }
  /// Host h's port in plane p (device "p<p>" in its namespace).
  static std::string port_dev(uint32_t p) { return "p" + std::to_string(p); }
  static std::string v6(uint32_t p, uint32_t net, uint32_t id) {
    return "2001:db8:" + std::to_string(p) + ":" + std::to_string(net) + "::" + std::to_string(id);
  }
  static std::string v4(uint32_t p, uint32_t net, uint32_t id) {
    return "198.18." + std::to_string(p * 16 + net) + "." + std::to_string(id);
  }
  static std::string host_v6(uint32_t h, uint32_t p) { return v6(p, h, 1); }
  static std::string host_v4(uint32_t h, uint32_t p) { return v4(p, h, 1); }
  static std::string mgmt(uint32_t h) { return "198.19.0." + std::to_string(h + 1); }

  // The SRv6 plan (Options::srv6; see the file comment). Numbers are hex uSIDs.
  static std::string hex(uint32_t v) {
    char b[16];
    std::snprintf(b, sizeof b, "%x", v);
    return b;
  }
  static uint32_t t0_usid(uint32_t h) { return 0xa0 + h; }
  static uint32_t t1_usid(uint32_t k) { return 0xb0 + k; }
  static std::string srv6_block(uint32_t p) { return "fc00:1a:" + hex(p) + "::"; }
  static std::string srv6_usid(uint32_t p, uint32_t usid) {  // block|uSID, the /64 prefix
    return "fc00:1a:" + hex(p) + ":" + hex(usid) + "::";
  }
  static std::string srv6_host(uint32_t h, uint32_t p) {
    return "fc00:1a:" + hex(p) + ":" + hex(t0_usid(h)) + ":1::";
  }
  static std::string srv6_path(uint32_t p, uint32_t k, uint32_t h) {
    return "fc00:1a:" + hex(p) + ":" + hex(t1_usid(k)) + ":" + hex(t0_usid(h)) + ":1::";
  }
  /// The explicit fabric file (srv6/config.h) describing the SRv6 routes this fabric has.
  std::string srv6_fabric_json() const {
    std::string planes, hosts;
    for (uint32_t p = 0; p < o_.planes; ++p) {
      std::string t0s, t1s;
      for (uint32_t h = 0; h < 2; ++h)
        t0s += std::string(h ? ", " : "") + "{\"name\": \"" + t0(p, h) + "\", \"usid\": \"0x" +
               hex(t0_usid(h)) + "\"}";
      for (uint32_t k = 0; k < o_.spines; ++k)
        t1s += std::string(k ? ", " : "") + "{\"name\": \"" + spine(p, k) + "\", \"usid\": \"0x" +
               hex(t1_usid(k)) + "\"}";
      planes += std::string(p ? ",\n" : "") + "    {\"block\": \"" + srv6_block(p) +
                "/48\", \"usid_bits\": 16,\n     \"t0\": [" + t0s + "],\n     \"t1\": [" + t1s +
                "]}";
    }
    for (uint32_t h = 0; h < 2; ++h) {
      std::string a;
      for (uint32_t p = 0; p < o_.planes; ++p)
        a += std::string(p ? ", " : "") + "\"" + srv6_host(h, p) + "\"";
      hosts += std::string(h ? ",\n" : "") + "    {\"name\": \"" + host(h) +
               "\", \"t0\": " + std::to_string(h) + ", \"addresses\": [" + a + "]}";
    }
    return "{\n  \"planes\": [\n" + planes + "\n  ],\n  \"hosts\": [\n" + hosts + "\n  ]\n}\n";
  }
  const Options& options() const { return o_; }

  /// Until every T0 and spine has resolved the other end of each link between them (IPv6):
  /// a datagram over the link every 50 ms until `ip neigh` shows the address with a link-layer
  /// address, 5 s at most per link. wait_ready()'s datagrams take one spine per flow, so a
  /// fabric that hashes fields they do not vary (the flow label alone) leaves the other
  /// spines' neighbours unresolved, and a first lost solicitation costs a second.
  Status<std::string> resolve_links() {
    for (uint32_t p = 0; p < o_.planes; ++p) {
      for (uint32_t h = 0; h < 2; ++h) {
        for (uint32_t k = 0; k < o_.spines; ++k) {
          const uint32_t net = 10 + 2 * h + k;
          for (const auto& [ns, to] :
               {std::pair{t0(p, h), v6(p, net, 2)}, std::pair{spine(p, k), v6(p, net, 1)}}) {
            bool ok = false;
            for (int i = 0; i < 100 && !ok; ++i) {
              (void)mrc::in_netns(ns, [&]() -> Status<std::string> {
                const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (fd < 0) return Err(std::string("socket"));
                sockaddr_in6 a{};
                a.sin6_family = AF_INET6;
                a.sin6_port = htons(9);  // discard: nobody listens, the neighbour is the point
                ::inet_pton(AF_INET6, to.c_str(), &a.sin6_addr);
                (void)::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
                ::close(fd);
                return {};
              });
              ::usleep(50'000);
              auto r = nsfabric::run_command({"ip", "-n", ns, "-6", "neigh", "show", to});
              ok = r && r->find("lladdr") != std::string::npos &&
                   r->find("FAILED") == std::string::npos;
            }
            if (!ok) return Err(ns + ": " + to + " unresolved after 5 s");
          }
        }
      }
    }
    return {};
  }

  /// Bytes a namespace's device has sent and received ("ip -s link").
  Result<std::pair<uint64_t, uint64_t>, std::string> counters(const std::string& ns,
                                                              const std::string& dev) const {
    auto r = nsfabric::run_command({"ip", "-n", ns, "-s", "-o", "link", "show", "dev", dev});
    if (!r) return Err(r.error());
    // One line: "... RX: bytes packets ... \    <rx bytes> ... \    TX: bytes ... \    <tx bytes>
    // ..."
    std::vector<std::string> words;
    std::string w;
    for (char c : *r) {
      if (c == ' ' || c == '\\' || c == '\n') {
        if (!w.empty()) words.push_back(w);
        w.clear();
      } else {
        w += c;
      }
    }
    if (!w.empty()) words.push_back(w);
    uint64_t rx = 0, tx = 0;
    bool have_rx = false, have_tx = false;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == "RX:" || words[i] == "TX:") {
        // Header words until the first number.
        size_t j = i + 1;
        while (j < words.size() && !std::isdigit(static_cast<unsigned char>(words[j][0]))) ++j;
        if (j >= words.size()) break;
        (words[i] == "RX:" ? rx : tx) = std::stoull(words[j]);
        (words[i] == "RX:" ? have_rx : have_tx) = true;
      }
    }
    if (!have_rx || !have_tx) return Err("no counters in: " + *r);
    return std::make_pair(rx, tx);
  }

 private:
  explicit HandFabric(const Options& o) : o_(o) {}

  // Every namespace of the fabric: the hosts, then each plane's T0s and spines.
  std::vector<std::string> namespaces() const {
    std::vector<std::string> all = {host(0), host(1)};
    for (uint32_t p = 0; p < o_.planes; ++p) {
      for (uint32_t h = 0; h < 2; ++h) all.push_back(t0(p, h));
      for (uint32_t k = 0; k < o_.spines; ++k) all.push_back(spine(p, k));
    }
    return all;
  }

  Status<std::string> run(const std::vector<std::string>& argv, const std::string& input = "") {
    auto r = nsfabric::run_command(argv, input);
    if (!r) return Err(r.error());
    return {};
  }
  Status<std::string> batch(const std::string& ns, const std::string& lines) {
    return run({"ip", "-n", ns, "-batch", "-"}, lines);
  }
  Status<std::string> sysctl(const std::string& ns, const std::vector<std::string>& kv) {
    std::vector<std::string> argv = {"ip", "netns", "exec", ns, "sysctl", "-q", "-w"};
    argv.insert(argv.end(), kv.begin(), kv.end());
    return run(argv);
  }

  Status<std::string> build() {
    const uint32_t P = o_.planes, S = o_.spines;
    const std::vector<std::string> all = namespaces();
    std::string make;
    for (const std::string& ns : all) make += "netns add " + ns + "\n";
    if (auto s = run({"ip", "-batch", "-"}, make); !s) {
      // Some may exist (made before the failure): remove what this prefix names.
      made_ = all;
      return s;
    }
    made_ = all;

    // Links, made from the root namespace straight into their namespaces.
    const std::string mtu = " mtu " + std::to_string(o_.mtu);
    std::string links =
        "link add name mgmt netns " + host(0) + " type veth peer name mgmt netns " + host(1) + "\n";
    for (uint32_t p = 0; p < P; ++p) {
      for (uint32_t h = 0; h < 2; ++h) {
        links += "link add name " + port_dev(p) + " netns " + host(h) + mtu +
                 " type veth peer name toh netns " + t0(p, h) + mtu + "\n";
        for (uint32_t k = 0; k < S; ++k)
          links += "link add name s" + std::to_string(k) + " netns " + t0(p, h) + mtu +
                   " type veth peer name t" + std::to_string(h) + " netns " + spine(p, k) + mtu +
                   "\n";
      }
    }
    if (auto s = run({"ip", "-batch", "-"}, links); !s) return s;

    for (const std::string& ns : all) {
      std::vector<std::string> kv = {
          "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
          "net.ipv6.conf.all.forwarding=1", "net.ipv4.ip_forward=1",
          "net.ipv4.fib_multipath_hash_policy=1",
          "net.ipv6.fib_multipath_hash_policy=" + std::to_string(o_.ipv6_hash_policy),
          "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"};
      if (o_.ipv6_hash_policy == 3)
        kv.push_back("net.ipv6.fib_multipath_hash_fields=" + std::to_string(o_.ipv6_hash_fields));
      if (auto s = sysctl(ns, kv); !s) return s;
    }
    auto addr = [](const std::string& dev, const std::string& a6, const std::string& a4) {
      return "addr add " + a6 + "/64 dev " + dev + " nodad\naddr add " + a4 + "/24 dev " + dev +
             "\nlink set " + dev + " up\n";
    };
    for (uint32_t h = 0; h < 2; ++h) {
      const uint32_t o = 1 - h;
      std::string b = "link set lo up\naddr add " + mgmt(h) + "/24 dev mgmt\nlink set mgmt up\n";
      for (uint32_t p = 0; p < P; ++p) {
        b += addr(port_dev(p), v6(p, h, 1), v4(p, h, 1));
        b += "route add " + v6(p, o, 0) + "/64 via " + v6(p, h, 2) + "\n";
        b += "route add " + v4(p, o, 0) + "/24 via " + v4(p, h, 2) + "\n";
      }
      if (auto s = batch(host(h), b); !s) return s;
    }
    for (uint32_t p = 0; p < P; ++p) {
      for (uint32_t h = 0; h < 2; ++h) {
        const uint32_t o = 1 - h;
        std::string b = "link set lo up\n" + addr("toh", v6(p, h, 2), v4(p, h, 2));
        std::string hops6, hops4;
        for (uint32_t k = 0; k < S; ++k) {
          const uint32_t net = 10 + 2 * h + k;
          const std::string dev = "s" + std::to_string(k);
          b += addr(dev, v6(p, net, 1), v4(p, net, 1));
          hops6 += " nexthop via " + v6(p, net, 2) + " dev " + dev;
          hops4 += " nexthop via " + v4(p, net, 2) + " dev " + dev;
        }
        b += "route add " + v6(p, o, 0) + "/64" + hops6 + "\n";
        b += "route add " + v4(p, o, 0) + "/24" + hops4 + "\n";
        if (auto s = batch(t0(p, h), b); !s) return s;
      }
      for (uint32_t k = 0; k < S; ++k) {
        std::string b = "link set lo up\n";
        for (uint32_t h = 0; h < 2; ++h) {
          const uint32_t net = 10 + 2 * h + k;
          const std::string dev = "t" + std::to_string(h);
          b += addr(dev, v6(p, net, 2), v4(p, net, 2));
          b += "route add " + v6(p, h, 0) + "/64 via " + v6(p, net, 1) + "\n";
          b += "route add " + v4(p, h, 0) + "/24 via " + v4(p, net, 1) + "\n";
        }
        if (auto s = batch(spine(p, k), b); !s) return s;
      }
    }
    if (o_.srv6)
      if (auto s = build_srv6(); !s) return s;
    if (auto s = shape(); !s) return s;
    return wait_ready();
  }

  // The SRv6 uSID routes (file comment): plain `ip -6 route` lines, no srv6/ export.
  Status<std::string> build_srv6() {
    const uint32_t P = o_.planes, S = o_.spines;
    const std::string end = " encap seg6local action End flavors next-csid lblen 48 nflen 16 dev ";
    for (const std::string& ns : namespaces())
      if (auto s = sysctl(
              ns, {"net.ipv6.conf.all.seg6_enabled=1", "net.ipv6.conf.default.seg6_enabled=1"});
          !s)
        return s;
    for (uint32_t h = 0; h < 2; ++h) {
      std::string b;
      for (uint32_t p = 0; p < P; ++p) {
        b += "addr add " + srv6_host(h, p) + "/128 dev " + port_dev(p) + " nodad\n";
        b += "route add " + srv6_block(p) + "/48 via " + v6(p, h, 2) + " dev " + port_dev(p) + "\n";
      }
      if (auto s = batch(host(h), b); !s) return s;
    }
    for (uint32_t p = 0; p < P; ++p) {
      for (uint32_t h = 0; h < 2; ++h) {
        std::string b = "route add " + srv6_usid(p, t0_usid(h)) + "/64" + end + "toh\n";
        b += "route add " + srv6_host(h, p) + "/128 via " + v6(p, h, 1) + " dev toh\n";
        std::string hops;
        for (uint32_t k = 0; k < S; ++k) {
          b += "route add " + srv6_usid(p, t1_usid(k)) + "/64 via " + v6(p, 10 + 2 * h + k, 2) +
               " dev s" + std::to_string(k) + "\n";
          hops += " nexthop via " + v6(p, 10 + 2 * h + k, 2) + " dev s" + std::to_string(k);
        }
        // The other T0's locator as a plain ECMP route: traffic to a host port address
        // itself (the plugin's TCP handshake) crosses the fabric without SRv6.
        b += "route add " + srv6_usid(p, t0_usid(1 - h)) + "/64" + hops + "\n";
        if (auto s = batch(t0(p, h), b); !s) return s;
      }
      for (uint32_t k = 0; k < S; ++k) {
        std::string b = "route add " + srv6_usid(p, t1_usid(k)) + "/64" + end + "t0\n";
        for (uint32_t h = 0; h < 2; ++h)
          b += "route add " + srv6_usid(p, t0_usid(h)) + "/64 via " + v6(p, 10 + 2 * h + k, 1) +
               " dev t" + std::to_string(h) + "\n";
        if (auto s = batch(spine(p, k), b); !s) return s;
      }
    }
    return {};
  }

  // Until every plane carries a datagram from host 1 to host 0 and back, in both IP
  // versions (neighbour discovery, addresses usable), and with Options::srv6 between the SRv6
  // port addresses and along every SRv6 path (each spine's End): a fresh fabric drops the
  // first packets.
  Status<std::string> wait_ready() {
    for (uint32_t p = 0; p < o_.planes; ++p) {
      for (bool v4 : {false, true}) {
        const std::string a0 = v4 ? "::ffff:" + host_v4(0, p) : host_v6(0, p);
        const std::string a1 = v4 ? "::ffff:" + host_v4(1, p) : host_v6(1, p);
        if (auto s = probe(a0, a1, a0, a1); !s)
          return Err("plane " + std::to_string(p) + (v4 ? " IPv4" : " IPv6") + ": " + s.error());
      }
      if (o_.srv6)
        if (auto s = probe(srv6_host(0, p), srv6_host(1, p), srv6_host(0, p), srv6_host(1, p)); !s)
          return Err("plane " + std::to_string(p) + " to the SRv6 port addresses: " + s.error());
      for (uint32_t k = 0; o_.srv6 && k < o_.spines; ++k)
        if (auto s =
                probe(srv6_host(0, p), srv6_host(1, p), srv6_path(p, k, 0), srv6_path(p, k, 1));
            !s)
          return Err("plane " + std::to_string(p) + " SRv6 via spine " + std::to_string(k) + ": " +
                     s.error());
    }
    return {};
  }
  // A datagram from a socket of host 1 bound to a1 to host 0's socket bound to a0, sent to
  // `to0`, and its answer sent to `to1`; retried for 5 s.
  Status<std::string> probe(const std::string& a0, const std::string& a1, const std::string& to0,
                            const std::string& to1) {
    auto fd0 = mrc::in_netns(host(0), [&]() { return udp_socket(a0); });
    if (!fd0) return Err(fd0.error());
    auto fd1 = mrc::in_netns(host(1), [&]() { return udp_socket(a1); });
    if (!fd1) {
      ::close(*fd0);
      return Err(fd1.error());
    }
    sockaddr_in6 at0 = local_of(*fd0), at1 = local_of(*fd1);
    ::inet_pton(AF_INET6, to0.c_str(), &at0.sin6_addr);
    ::inet_pton(AF_INET6, to1.c_str(), &at1.sin6_addr);
    bool ok = false;
    for (int i = 0; i < 250 && !ok; ++i) {  // 5 s
      (void)::sendto(*fd1, "x", 1, 0, reinterpret_cast<sockaddr*>(&at0), sizeof at0);
      ::usleep(20'000);
      char b;
      if (::recv(*fd0, &b, 1, MSG_DONTWAIT) == 1)
        (void)::sendto(*fd0, "y", 1, 0, reinterpret_cast<sockaddr*>(&at1), sizeof at1);
      ::usleep(5'000);
      ok = ::recv(*fd1, &b, 1, MSG_DONTWAIT) == 1;
    }
    ::close(*fd0);
    ::close(*fd1);
    if (!ok) return Err(std::string("no datagram between the hosts after 5 s"));
    return {};
  }
  static Result<int, std::string> udp_socket(const std::string& at) {
    const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Err(std::string("socket: ") + std::strerror(errno));
    const int zero = 0;
    (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    ::inet_pton(AF_INET6, at.c_str(), &a.sin6_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      const std::string e = "bind " + at + ": " + std::strerror(errno);
      ::close(fd);
      return Err(e);
    }
    return fd;
  }
  static sockaddr_in6 local_of(int fd) {
    sockaddr_in6 a{};
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    return a;
  }

  Status<std::string> shape() {
    const uint32_t P = o_.planes;
    // Host ports at a NIC port's rate, both directions.
    for (uint32_t p = 0; p < P; ++p) {
      for (uint32_t h = 0; h < 2; ++h) {
        for (const auto& [ns, dev] :
             {std::pair{host(h), port_dev(p)}, std::pair{t0(p, h), std::string("toh")}}) {
          if (auto s = run({"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                            o_.rate, "burst", "131072", "limit", "524288"});
              !s)
            return s;
        }
      }
    }
    return {};
  }

  Options o_;
  std::vector<std::string> made_;
};

}  // namespace mrc::verbs
