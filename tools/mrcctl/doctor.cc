// mrcctl doctor: host checks before an MRC job (see doctor.h).
#include "doctor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "mrc/io/config.h"
#include "mrc/io/udp/link_mtu.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/wire/wire.h"
#include "srv6/fabric.h"

namespace mrc::mrcctl {
namespace {

// The progress threads' spin after work (UdpConfig::spin), as configured or as the default
// chooses on this host; no configuration: the default's choice.
std::string spin_text(const io::UdpConfig* u) {
  const bool chosen = !u || u->spin == io::kAutoSpin;
  const engine::Duration spin = chosen ? io::default_spin() : u->spin;
  const std::string us = std::to_string(spin.count() / 1000);
  if (spin.count() == 0)
    return chosen ? "spin 0 (the default with fewer than 8 CPUs; spin_us sets one)"
                  : "spin 0 (spin_us)";
  return "spin " + us + " us after work (" +
         (chosen ? std::string("the default with 8 CPUs or more") : std::string("spin_us")) +
         ")";
}

struct Cmd {
  int rc = -1;  // exit status; 127: not found
  std::string out;
};

// Runs a command line (arguments we made: addresses, interface names, quoted).
Cmd run_cmd(const std::string& line) {
  Cmd c;
  FILE* p = ::popen((line + " 2>&1").c_str(), "r");
  if (!p) return c;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) c.out.append(buf, n);
  const int st = ::pclose(p);
  c.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  while (!c.out.empty() && (c.out.back() == '\n' || c.out.back() == ' ')) c.out.pop_back();
  return c;
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s)) return std::nullopt;
  return s;
}

std::optional<long long> read_number(const std::string& path) {
  auto s = read_line(path);
  if (!s) return std::nullopt;
  try {
    return std::stoll(*s);
  } catch (...) {
    return std::nullopt;
  }
}

std::string fmt(const in6_addr& a) {
  char b[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, &a, b, sizeof b);
  return b;
}

struct Iface {
  std::string name;
  unsigned flags = 0;
  int mtu = 0;
};

std::optional<Iface> iface_with(const in6_addr& a) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<Iface> out;
  for (ifaddrs* i = list; i && !out; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6) continue;
    const auto* s = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
    if (std::memcmp(&s->sin6_addr, &a, 16) != 0) continue;
    Iface f;
    f.name = i->ifa_name;
    f.flags = i->ifa_flags;
    f.mtu = static_cast<int>(read_number("/sys/class/net/" + f.name + "/mtu").value_or(0));
    out = f;
  }
  ::freeifaddrs(list);
  return out;
}

// The process holding UDP port `port` (IPv6 or IPv4 table), "pid N (comm)", or "".
std::string port_holder(uint16_t port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/udp6", "/proc/net/udp"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream w(line);
      std::string sl, local, rem, st, q, tr, rt, uid, to, inode;
      w >> sl >> local >> rem >> st >> q >> tr >> rt >> uid >> to >> inode;
      const auto colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) inodes.insert(inode);
    }
  }
  if (inodes.empty()) return "";
  DIR* proc = ::opendir("/proc");
  if (!proc) return "";
  std::string who;
  for (dirent* e; who.empty() && (e = ::readdir(proc));) {
    const std::string pid = e->d_name;
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    DIR* fds = ::opendir(("/proc/" + pid + "/fd").c_str());
    if (!fds) continue;
    for (dirent* f; who.empty() && (f = ::readdir(fds));) {
      char link[64] = {};
      const std::string path = "/proc/" + pid + "/fd/" + f->d_name;
      const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
      if (n <= 0) continue;
      const std::string l(link, static_cast<size_t>(n));
      if (l.rfind("socket:[", 0) == 0 && inodes.count(l.substr(8, l.size() - 9)))
        who = "pid " + pid + " (" + read_line("/proc/" + pid + "/comm").value_or("?") + ")";
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return who;
}

std::string us(engine::Duration d) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f us", std::chrono::duration<double, std::micro>(d).count());
  return b;
}

const char* mode_name(io::PathMode m) {
  return m == io::PathMode::kSrv6 ? "srv6" : m == io::PathMode::kEcmp ? "ecmp" : "direct";
}

}  // namespace

const char* to_string(Verdict v) {
  return v == Verdict::kOk ? "ok" : v == Verdict::kWarn ? "warn" : "FAIL";
}

std::optional<bool> ethtool_feature(const std::string& text, const std::string& feature) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, feature.size() + 1, feature + ":") != 0)
      continue;
    const std::string v = line.substr(start + feature.size() + 1);
    if (v.find("on") != std::string::npos && v.find("off") == std::string::npos) return true;
    if (v.find("off") != std::string::npos) return false;
  }
  return std::nullopt;
}

std::string route_dev(const std::string& text) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"(\bdev ([^ \t\n]+))"))) return m[1];
  return "";
}

Result<std::vector<Check>, std::string> run_doctor(
    const DoctorOptions& o, const std::function<void(const std::vector<Check>&)>& report) {
  if (o.count == 0 || o.count > 100) {
    return Err("--count: probes per path must be 1..100, got " + std::to_string(o.count));
  }
  if (o.timeout_ms == 0 || o.timeout_ms > 60000) {
    return Err("--timeout-ms: must be 1..60000, got " + std::to_string(o.timeout_ms));
  }
  if (!(o.listen_s >= 0) || o.listen_s > 86400) {
    return Err("--listen: seconds must be 0..86400, got " + std::to_string(o.listen_s));
  }
  std::vector<Check> out;
  auto add = [&](std::string name, int plane, Verdict v, std::string detail, std::string fix = "") {
    out.push_back(Check{std::move(name), plane, v, std::move(detail), std::move(fix)});
  };

  // ---- host-wide: clock, CPU, buffers, busy polling ----
  auto host_checks = [&](const io::UdpConfig* u) {
    const std::string cs =
        read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource").value_or("?");
    if (cs == "tsc" || cs == "kvm-clock" || cs == "arch_sys_counter")
      add("clock", -1, Verdict::kOk, "clock source " + cs);
    else
      add("clock", -1, Verdict::kWarn,
          "clock source " + cs + ": every clock read costs a system call",
          "use tsc where the CPU has an invariant TSC (kernel parameter tsc=reliable; "
          "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource)");
    std::map<std::string, int> govs;
    int cpus = 0;
    if (DIR* d = ::opendir("/sys/devices/system/cpu")) {
      for (dirent* e; (e = ::readdir(d));) {
        const std::string n = e->d_name;
        if (n.size() < 4 || n.compare(0, 3, "cpu") != 0 || !::isdigit(n[3])) continue;
        ++cpus;
        if (auto g = read_line("/sys/devices/system/cpu/" + n + "/cpufreq/scaling_governor"))
          ++govs[*g];
      }
      ::closedir(d);
    }
    if (govs.empty()) {
      add("cpu", -1, Verdict::kOk,
          std::to_string(cpus) + " CPUs, no frequency governor (fixed frequency or a VM)");
    } else if (govs.size() == 1 && govs.begin()->first == "performance") {
      add("cpu", -1, Verdict::kOk, std::to_string(cpus) + " CPUs, governor performance");
    } else {
      std::string seen;
      for (const auto& [g, n] : govs)
        seen += (seen.empty() ? "" : ", ") + g + " on " + std::to_string(n);
      add("cpu", -1, Verdict::kWarn,
          "governor " + seen + ": the progress thread wakes to a slow core",
          "cpupower frequency-set -g performance");
    }
    const int want = u ? u->socket_buffer_bytes : (4 << 20);
    const auto rmem = read_number("/proc/sys/net/core/rmem_max");
    const auto wmem = read_number("/proc/sys/net/core/wmem_max");
    if (rmem && wmem && (*rmem < want || *wmem < want)) {
      add("buffers", -1, Verdict::kWarn,
          "net.core.rmem_max " + std::to_string(*rmem) + ", wmem_max " + std::to_string(*wmem) +
              " cap the " + std::to_string(want) + "-byte socket buffers MRC asks for",
          "sysctl -w net.core.rmem_max=" + std::to_string(want) +
              " net.core.wmem_max=" + std::to_string(want));
    } else {
      add("buffers", -1, Verdict::kOk,
          "net.core.rmem_max " + (rmem ? std::to_string(*rmem) : "?") + ", wmem_max " +
              (wmem ? std::to_string(*wmem) : "?"));
    }
    const auto br = read_number("/proc/sys/net/core/busy_read");
    const auto bp = read_number("/proc/sys/net/core/busy_poll");
    add("busy_poll", -1, Verdict::kOk,
        "net.core.busy_read " + (br ? std::to_string(*br) : "n/a") + ", busy_poll " +
            (bp ? std::to_string(*bp) : "n/a") + "; MRC busy_poll " +
            (u && u->busy_poll ? "on (the progress thread spins: one core busy)"
                               : "off (the progress thread sleeps in ppoll)") +
            "; " + spin_text(u));
  };

  // ---- configuration ----
  auto cfg = io::load_host_config();
  if (!cfg.ok()) {
    add("config", -1, Verdict::kFail, cfg.error(),
        "fix the file or variable named (docs/deploy.md explains every field)");
    host_checks(nullptr);
    if (report) report(out);
    return out;
  }
  const io::UdpConfig& u = cfg->udp;
  const bool srv6 = u.path_mode == io::PathMode::kSrv6 && u.fabric;
  const size_t P = u.planes.size();
  add("config", -1, Verdict::kOk,
      cfg->sources + ": path_mode " + mode_name(u.path_mode) + ", " + std::to_string(P) +
          " plane(s), port " + std::to_string(u.planes.empty() ? 0 : u.planes[0].port) + ", mtu " +
          (cfg->mtu == 0 ? std::string("from the links") : std::to_string(cfg->mtu)) +
          (srv6 ? ", fabric host " + std::to_string(u.local_host) + " of " +
                      std::to_string(u.fabric->config().hosts)
                : ""));

  // ---- the peer ----
  std::optional<uint32_t> peer_host;
  std::vector<in6_addr> peer_addrs;
  if (!o.peer.empty()) {
    if (srv6) {
      const srv6::FabricConfig& fc = u.fabric->config();
      for (uint32_t h = 0; h < fc.hosts && !peer_host; ++h)
        if (o.peer == "h" + std::to_string(h) || o.peer == std::to_string(h) ||
            (h < fc.names.size() && o.peer == fc.names[h]))
          peer_host = h;
      if (!peer_host) {
        return Err("--peer " + o.peer + ": not a host of the fabric (h0..h" +
                   std::to_string(fc.hosts - 1) + ", or a name in the fabric file)");
      }
      if (*peer_host == u.local_host) return Err("--peer " + o.peer + ": that is this host");
    } else {
      std::stringstream ss(o.peer);
      for (std::string a; std::getline(ss, a, ',');) {
        in6_addr x{};
        if (::inet_pton(AF_INET6, a.c_str(), &x) != 1)
          return Err("--peer: '" + a + "' is not an IPv6 address (path_mode " +
                     mode_name(u.path_mode) + " takes the peer's address per plane: a,b,...)");
        peer_addrs.push_back(x);
      }
      if (peer_addrs.size() != P) {
        return Err("--peer: one address per plane (" + std::to_string(P) + "), got " +
                   std::to_string(peer_addrs.size()));
      }
    }
  }

  // ---- per plane port ----
  const size_t need = cfg->mtu + wire::kDataHeaderSize + 8 + 40;
  const bool have_ethtool = run_cmd("command -v ethtool").rc == 0;
  // Planes doctor's own driver can bind (address present and up, port free); the others get
  // a stand-in socket on ::1 and are not probed.
  std::vector<bool> usable(P, true);
  std::vector<std::string> unusable_why(P);
  for (size_t p = 0; p < P; ++p) {
    const int pl = static_cast<int>(p);
    const std::string text = u.planes[p].address.substr(0, u.planes[p].address.find('%'));
    in6_addr a{};
    (void)::inet_pton(AF_INET6, text.c_str(), &a);  // the loader checked it
    std::optional<Iface> ifc;
    if (IN6_IS_ADDR_UNSPECIFIED(&a)) {
      add("address", pl, Verdict::kWarn,
          ":: (any address): packets leave by the routing table, not by a plane port",
          "give each plane its port's address (planes in mrc.json)");
    } else if (!(ifc = iface_with(a))) {
      add("address", pl, Verdict::kFail, text + " is on no interface of this host",
          "ip -6 addr add " + text + "/128 dev <plane " + std::to_string(p) +
              " port> (or fix planes in mrc.json)");
    } else if (!(ifc->flags & IFF_UP)) {
      add("address", pl, Verdict::kFail, text + " on " + ifc->name + ", which is down",
          "ip link set " + ifc->name + " up");
    } else if (!(ifc->flags & IFF_RUNNING)) {
      add("address", pl, Verdict::kFail, text + " on " + ifc->name + ": up but no carrier",
          "check the cable and the switch port of " + ifc->name);
    } else {
      add("address", pl, Verdict::kOk, text + " on " + ifc->name + " (up)");
    }

    // Routes.
    std::vector<std::string> dsts;
    if (srv6 && peer_host) {
      for (const srv6::Path& path : u.fabric->paths(u.local_host, *peer_host, pl))
        dsts.push_back(srv6::format(path.dst));
    } else if (srv6) {
      srv6::Ipv6 b = u.fabric->block(pl);
      b[15] |= 1;
      dsts.push_back(srv6::format(b));
    } else if (!peer_addrs.empty()) {
      dsts.push_back(fmt(peer_addrs[p]));
    }
    if (!dsts.empty() && ifc) {
      std::string bad, fix;
      for (const std::string& d : dsts) {
        const Cmd c = run_cmd("ip -6 -o route get " + quote(d) + " from " + quote(text));
        const std::string dev = c.rc == 0 ? route_dev(c.out) : "";
        if (c.rc != 0) {
          bad = "no route to " + d + " from " + text + ": " + c.out;
        } else if (dev != ifc->name) {
          bad = "to " + d + " leaves by " + (dev.empty() ? "?" : dev) + ", not " + ifc->name;
        }
        if (!bad.empty()) break;
      }
      if (!bad.empty()) {
        fix = srv6 ? "route the plane's block " +
                         srv6::prefix(u.fabric->block(pl), u.fabric->block_bits(pl)) + " via " +
                         ifc->name + " for source " + text +
                         " (docs/deploy.md: ip -6 rule add from ADDR table T; ip -6 route add "
                         "BLOCK via T0 dev PORT table T)"
                   : "a route to the peer's plane address via " + ifc->name + " for source " +
                         text + " (docs/deploy.md)";
        add("route", pl, Verdict::kFail, bad, fix);
      } else {
        add("route", pl, Verdict::kOk,
            std::to_string(dsts.size()) + " destination(s) " +
                (peer_host || !peer_addrs.empty() ? "of the peer " : "in the block ") +
                "leave by " + ifc->name);
      }
    }

    if (ifc && cfg->mtu == 0 && ifc->mtu > 0) {
      // mtu unset: the driver takes the largest payload the link carries (io/udp/link_mtu.h).
      const bool v4 = IN6_IS_ADDR_V4MAPPED(&a);
      const uint32_t fits = io::payload_for_link(static_cast<uint32_t>(ifc->mtu), v4);
      if (fits == 0) {
        add("mtu", pl, Verdict::kFail,
            ifc->name + " MTU " + std::to_string(ifc->mtu) + " carries no MRC packet",
            "ip link set " + ifc->name + " mtu 9000 (and the switch ports)");
      } else if (fits < 4096) {
        add("mtu", pl, Verdict::kWarn,
            ifc->name + " MTU " + std::to_string(ifc->mtu) + ": payloads of " +
                std::to_string(fits) + " bytes, headers are " +
                std::to_string(100 * io::payload_overhead(v4) / (fits + io::payload_overhead(v4))) +
                "% of each packet",
            "ip link set " + ifc->name + " mtu 9000 (and the switch ports) for 8192-byte payloads");
      } else {
        add("mtu", pl, Verdict::kOk,
            ifc->name + " MTU " + std::to_string(ifc->mtu) + ": payloads of " +
                std::to_string(fits) + " bytes");
      }
    } else if (ifc) {
      if (ifc->mtu > 0 && static_cast<size_t>(ifc->mtu) < need) {
        add("mtu", pl, Verdict::kFail,
            ifc->name + " MTU " + std::to_string(ifc->mtu) + " < " + std::to_string(need) +
                " an MRC packet needs (mtu " + std::to_string(cfg->mtu) + " + 120 header bytes)",
            "ip link set " + ifc->name + " mtu " + std::to_string(need) +
                " (and the switch ports), or a smaller mtu in mrc.json");
      } else {
        add("mtu", pl, Verdict::kOk,
            ifc->name + " MTU " + std::to_string(ifc->mtu) + " >= " + std::to_string(need));
      }
      if (!have_ethtool) {
        add("offload", pl, Verdict::kWarn, "ethtool is not installed: GSO/GRO not checked",
            "apt-get install ethtool");
      } else {
        const Cmd c = run_cmd("ethtool -k " + quote(ifc->name));
        const auto gso = ethtool_feature(c.out, "tx-udp-segmentation");
        const auto gro = ethtool_feature(c.out, "generic-receive-offload");
        auto on = [](std::optional<bool> v) { return v ? (*v ? "on" : "off") : "?"; };
        const std::string seen =
            std::string("tx-udp-segmentation ") + on(gso) + ", generic-receive-offload " + on(gro);
        const bool gso_used = u.gso && !u.zero_udp_checksum;
        if ((gso_used && gso == false) || (u.gro && gro == false)) {
          add("offload", pl, Verdict::kWarn, seen + ": the kernel does it in software (more CPU)",
              "ethtool -K " + ifc->name +
                  (gso_used && gso == false ? " tx-udp-segmentation on" : "") +
                  (u.gro && gro == false ? " gro on" : ""));
        } else {
          add("offload", pl, Verdict::kOk, seen);
        }
      }
    }

    // The UDP port (and whether the address can be bound at all: not on a down port).
    const uint16_t port = u.planes[p].port;
    auto try_bind = [&](uint16_t port_no) {
      const int s = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in6 sa{};
      sa.sin6_family = AF_INET6;
      sa.sin6_port = htons(port_no);
      sa.sin6_addr = a;
      const int r = s < 0 ? -1 : ::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      const int e = r == 0 ? 0 : errno;
      if (s >= 0) ::close(s);
      return e;
    };
    if (const int e = try_bind(0); e != 0) {
      usable[p] = false;
      unusable_why[p] = text + " cannot be bound (" + std::strerror(e) + "; see address)";
    }
    if (port == 0) {
      add("port", pl, Verdict::kOk, "port 0: an ephemeral port per plane (peers learn it)");
    } else {
      const int e = try_bind(port);
      if (e == 0) {
        add("port", pl, Verdict::kOk, "UDP port " + std::to_string(port) + " free on " + text);
      } else if (e == EADDRINUSE) {
        usable[p] = false;
        unusable_why[p] = "UDP port " + std::to_string(port) + " is in use (see port)";
        const std::string who = port_holder(port);
        add("port", pl, Verdict::kFail,
            "UDP port " + std::to_string(port) + " on " + text + " is in use" +
                (who.empty() ? "" : " by " + who),
            "stop it (ss -ulpn 'sport = :" + std::to_string(port) +
                "'), or set another port in mrc.json on every host");
      } else if (e != EADDRNOTAVAIL) {  // no such address: the address line says so
        usable[p] = false;
        unusable_why[p] = "bind: " + std::string(std::strerror(e));
        add("port", pl, Verdict::kFail,
            "bind " + text + " port " + std::to_string(port) + ": " + std::strerror(e));
      }
    }
  }

  // ---- probes of the peer on every plane, and answering for --listen ----
  std::unique_ptr<io::UdpDriver> drv;
  std::string drv_error;
  const bool want_probes = peer_host || !peer_addrs.empty();
  if (want_probes || o.listen_s > 0) {
    // No observer attached: doctor's own driver publishes nothing.
    io::UdpConfig mine = u;
    for (size_t p = 0; p < P; ++p)
      if (!usable[p]) mine.planes[p] = io::PlaneConfig{"::1", 0};  // keeps plane numbers
    auto d = io::UdpDriver::create(mine);
    if (d.ok()) {
      drv = std::move(d).value();
      drv->start();
    } else {
      drv_error = d.error();
    }
  }
  if (want_probes) {
    if (!drv) {
      for (size_t p = 0; p < P; ++p)
        add("probe", static_cast<int>(p), Verdict::kFail, "not probed: " + drv_error,
            "fix the lines above first");
    } else {
      Result<engine::PeerId, std::string> peer = Err(std::string());
      if (peer_host) {
        peer = drv->add_fabric_peer(*peer_host);
      } else {
        std::vector<sockaddr_in6> to;
        for (size_t p = 0; p < P; ++p) {
          sockaddr_in6 sa{};
          sa.sin6_family = AF_INET6;
          sa.sin6_port = htons(u.planes[p].port);
          sa.sin6_addr = peer_addrs[p];
          to.push_back(sa);
        }
        peer = drv->add_peer(to);
      }
      if (!peer.ok()) return Err(peer.error());
      const std::vector<engine::Path> paths = drv->spray_paths(peer_host.value_or(0));
      const size_t n = paths.size();
      const uint32_t token = drv->with_probes([](io::Probes& pr) { return pr.open(); });
      std::vector<std::vector<engine::Duration>> rtts(n);
      auto collect = [&] {
        for (const io::ProbeReply& r :
             drv->with_probes([&](io::Probes& pr) { return pr.take(token); }))
          if (n > 0 && r.seq / n < o.count && paths[r.seq % n].ev == r.path.ev)
            rtts[r.seq % n].push_back(r.rtt);
      };
      for (uint32_t round = 0; round < o.count; ++round) {
        drv->with_probes([&](io::Probes& pr) {
          for (size_t i = 0; i < n; ++i)
            if (usable[paths[i].plane])
              (void)pr.send(drv->now(), token, *peer, paths[i],
                            static_cast<uint32_t>(round * n + i));
          return 0;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        collect();
      }
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.timeout_ms);
      auto complete = [&] {
        for (size_t i = 0; i < n; ++i)
          if (usable[paths[i].plane] && rtts[i].size() < o.count) return false;
        return true;
      };
      while (!complete() && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        collect();
      }
      drv->with_probes([&](io::Probes& pr) {
        pr.close(token);
        return 0;
      });
      const std::string who = peer_host ? "h" + std::to_string(*peer_host) : o.peer;
      for (size_t p = 0; p < P; ++p) {
        if (!usable[p]) {
          add("probe", static_cast<int>(p), Verdict::kFail, "not probed: " + unusable_why[p],
              "fix the lines above first");
          continue;
        }
        size_t total = 0, answered = 0;
        std::string silent;
        engine::Duration lo = engine::Duration::max(), hi{0}, sum{0};
        size_t samples = 0;
        for (size_t i = 0; i < n; ++i) {
          if (paths[i].plane != p) continue;
          ++total;
          if (rtts[i].empty()) {
            silent += (silent.empty() ? "" : ", ") + ev_text(paths[i].ev);
            continue;
          }
          ++answered;
          for (engine::Duration d : rtts[i]) {
            lo = std::min(lo, d);
            hi = std::max(hi, d);
            sum += d;
            ++samples;
          }
        }
        const std::string counts = std::to_string(answered) + " of " + std::to_string(total) +
                                   " paths to " + who + " answered";
        if (total > 0 && answered == total) {
          add("probe", static_cast<int>(p), Verdict::kOk,
              counts + ", rtt min " + us(lo) + " avg " + us(sum / samples) + " max " + us(hi));
        } else if (answered > 0) {
          add("probe", static_cast<int>(p), Verdict::kWarn, counts + "; silent: " + silent,
              "a switch or link on those paths drops traffic (mrcctl doctor on " + who +
                  ", the switches' counters)");
        } else {
          add("probe", static_cast<int>(p), Verdict::kFail,
              counts + " (" + std::to_string(o.count) + " probes each)",
              "run libmrc on " + who +
                  " (the job, or mrcctl doctor --listen 60 there); open UDP "
                  "port " +
                  std::to_string(u.planes[p].port) +
                  " in both hosts' firewalls; check this plane's links and switches");
        }
      }
    }
  }

  host_checks(&u);
  if (report) report(out);

  if (o.listen_s > 0) {
    if (!drv) return Err("--listen: cannot answer probes: " + drv_error);
    std::fprintf(stderr, "mrcctl: doctor: answering probes for %.0f s\n", o.listen_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(o.listen_s));
  }
  if (drv) drv->stop();
  return out;
}

Json doctor_json(const std::vector<Check>& checks) {
  Json arr = Json::array();
  int fails = 0, warns = 0;
  for (const Check& c : checks) {
    Json j{{"check", c.name}, {"verdict", to_string(c.verdict)}, {"detail", c.detail}};
    j["plane"] = c.plane < 0 ? Json(nullptr) : Json(c.plane);
    if (!c.fix.empty()) j["fix"] = c.fix;
    fails += c.verdict == Verdict::kFail;
    warns += c.verdict == Verdict::kWarn;
    arr.push_back(std::move(j));
  }
  return Json{{"checks", arr}, {"fail", fails}, {"warn", warns}};
}

Table doctor_table(const std::vector<Check>& checks) {
  Table t;
  t.head = {"CHECK", "PLANE", "VERDICT", "DETAIL"};
  for (const Check& c : checks) {
    t.rows.push_back({c.name, c.plane < 0 ? "-" : std::to_string(c.plane), to_string(c.verdict),
                      c.detail + (c.fix.empty() ? "" : "  -> " + c.fix)});
  }
  return t;
}

int doctor_exit(const std::vector<Check>& checks) {
  return std::any_of(checks.begin(), checks.end(),
                     [](const Check& c) { return c.verdict == Verdict::kFail; })
             ? 1
             : 0;
}

}  // namespace mrc::mrcctl
