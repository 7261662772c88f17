// Multicast on the software verbs device (docs/verbs-shim.md "Multicast"): ibv_attach_mcast /
// ibv_detach_mcast of UD QPs, and a UD SEND to a multicast AH fanned out to the group's member
// processes. Membership crosses processes through a directory per group (one file per member
// process: its GID and plane addresses); the sender sends one UD datagram (QPN 0xFFFFFF, the
// GRH's dgid the group) to each member over the planes, and the member's engine gives it to
// every QP of its own attached to the group (Engine::attach_mcast).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

namespace {

constexpr char kMagic[8] = {'M', 'R', 'C', 'M', 'C', 'A', 'S', '1'};

std::string gid_str(const uint8_t* raw) {
  char s[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, raw, s, sizeof s);
  return s;
}

engine::McastGid to_mgid(const ibv_gid& g) {
  engine::McastGid m;
  std::memcpy(m.data(), g.raw, m.size());
  return m;
}

// The group's directory: <base>/<32 hex digits of the GID>.
std::string group_dir(const engine::McastGid& g) {
  std::string d = mcast_dir() + "/";
  char h[3];
  for (uint8_t b : g) {
    std::snprintf(h, sizeof h, "%02x", b);
    d += h;
  }
  return d;
}

// This process's entry name in a group's directory: its pid and plane 0's port (one driver
// per process and device).
std::string entry_name(Device* dev) {
  return std::to_string(::getpid()) + "-" +
         std::to_string(ntohs(dev->driver->local_address(0).sin6_port));
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Writes this process's entry (its GID, then each plane's address) into the group's
// directory, atomically (a reader sees the whole entry or none).
int publish(Device* dev, const engine::McastGid& g) {
  const std::string dir = group_dir(g);
  if (::mkdir(mcast_dir().c_str(), 0700) != 0 && errno != EEXIST)
    return fail(errno, "ibv_attach_mcast: %s: %s", mcast_dir().c_str(), std::strerror(errno));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return fail(errno, "ibv_attach_mcast: %s: %s", dir.c_str(), std::strerror(errno));
  std::string bytes(kMagic, sizeof kMagic);
  bytes.append(reinterpret_cast<const char*>(dev->gid.raw), 16);
  for (uint16_t p = 0; p < dev->driver->planes(); ++p) {
    const sockaddr_in6 a = dev->driver->local_address(p);
    bytes.append(reinterpret_cast<const char*>(&a), sizeof a);
  }
  const std::string path = dir + "/" + entry_name(dev);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(errno, "ibv_attach_mcast: %s: %s", tmp.c_str(), std::strerror(errno));
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : EIO;
    ::unlink(tmp.c_str());
    return fail(e, "ibv_attach_mcast: %s: %s", path.c_str(), std::strerror(e));
  }
  return 0;
}

void withdraw(Device* dev, const engine::McastGid& g) {
  const std::string dir = group_dir(g);
  ::unlink((dir + "/" + entry_name(dev)).c_str());
  ::rmdir(dir.c_str());  // fails while other members are there: fine
}

// The peer that reaches a member at `addrs` (outside a fabric: exactly those addresses and
// ports, as two processes of one host share their GID) or on fabric host `gid` names, and the
// paths to it; made once per member (dev->mcast_peers), the engine told its UD paths.
std::optional<McastMember> member_peer(Device* dev, const ibv_gid& gid,
                                       std::vector<sockaddr_in6> addrs) {
  const std::string key(reinterpret_cast<const char*>(addrs.data()),
                        addrs.size() * sizeof(sockaddr_in6));
  McastMember m;
  {
    std::lock_guard lock(dev->mu);
    if (auto it = dev->mcast_peers.find(key); it != dev->mcast_peers.end()) return it->second;
    uint32_t host = 0;
    if (dev->cfg.udp.path_mode == io::PathMode::kSrv6 && dev->cfg.udp.fabric) {
      ibv_ah_attr a{};
      a.is_global = 1;
      a.grh.dgid = gid;
      auto p = peer_for(dev, a, &host);
      if (!p) {
        log_error("multicast: member %s: %s", gid_str(gid.raw).c_str(), p.error().c_str());
        return std::nullopt;
      }
      m.peer = *p;
    } else {
      m.peer = dev->driver->add_peer(std::move(addrs));
    }
    m.paths = dev->driver->spray_paths(host);
    dev->mcast_peers[key] = m;
  }
  dev->driver->with_engine([&](engine::Engine& e) { e.set_ud_paths(m.peer, m.paths); });
  return m;
}

int attach_error(const char* verb, ibv_qp* qp, const ibv_gid* gid) {
  if (qp->qp_type != IBV_QPT_UD)
    return fail(EINVAL, "%s: QP %u is not UD: only UD QPs join multicast groups", verb, qp->qp_num);
  if (!is_mcast_gid(*gid))
    return fail(EINVAL,
                "%s: QP %u: GID %s is not a multicast GID (ff00::/8, or IPv4 224.0.0.0/4 "
                "IPv4-mapped)",
                verb, qp->qp_num, gid_str(gid->raw).c_str());
  return 0;
}

}  // namespace

std::string mcast_dir() {
  const char* env = std::getenv("MRC_MCAST_DIR");
  if (env && *env) return env;
  struct stat st;
  const char* base = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  return std::string(base) + "/mrc-mcast-" + std::to_string(::getuid());
}

bool is_mcast_gid(const ibv_gid& g) {
  if (g.raw[0] == 0xff) return true;
  static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kV4Mapped, 12) == 0 && (g.raw[12] & 0xf0) == 0xe0;
}

int attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t) {
  if (int e = attach_error("ibv_attach_mcast", qp, gid)) return e;
  Device* dev = qp_of(qp)->ctx->dev;
  const engine::McastGid g = to_mgid(*gid);
  bool first = false;
  auto r = dev->driver->with_engine([&](engine::Engine& e) {
    first = e.mcast_members(g).empty();
    return e.attach_mcast(qp->qp_num, g);
  });
  if (!r)
    return fail(r.error() == engine::Error::kQueueFull ? ENOMEM : EINVAL,
                "ibv_attach_mcast: QP %u, group %s: %s", qp->qp_num, gid_str(gid->raw).c_str(),
                r.error() == engine::Error::kQueueFull
                    ? "mrc0 has max_mcast_grp groups, or the group max_mcast_qp_attach QPs"
                    : engine::to_string(r.error()));
  if (first) {
    if (int e = publish(dev, g)) {
      dev->driver->with_engine([&](engine::Engine& en) { (void)en.detach_mcast(qp->qp_num, g); });
      return e;
    }
  }
  qp_of(qp)->mcast.insert(g);
  return 0;
}

int detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t) {
  if (int e = attach_error("ibv_detach_mcast", qp, gid)) return e;
  Device* dev = qp_of(qp)->ctx->dev;
  const engine::McastGid g = to_mgid(*gid);
  bool last = false;
  auto r = dev->driver->with_engine([&](engine::Engine& e) {
    auto ok = e.detach_mcast(qp->qp_num, g);
    last = e.mcast_members(g).empty();
    return ok;
  });
  if (!r)
    return fail(EINVAL, "ibv_detach_mcast: QP %u is not attached to group %s", qp->qp_num,
                gid_str(gid->raw).c_str());
  qp_of(qp)->mcast.erase(g);
  if (last) withdraw(dev, g);
  return 0;
}

void mcast_forget_qp(Device* dev, const std::set<engine::McastGid>& groups) {
  for (const engine::McastGid& g : groups) {
    bool last = false;
    dev->driver->with_engine([&](engine::Engine& e) { last = e.mcast_members(g).empty(); });
    if (last) withdraw(dev, g);
  }
}

std::vector<McastMember> mcast_members(Device* dev, const ibv_gid& gid) {
  std::vector<McastMember> out;
  const std::string dir = group_dir(to_mgid(gid));
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;  // no member anywhere
  const size_t planes = dev->driver->planes();
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name.ends_with(".tmp")) continue;
    const std::string path = dir + "/" + name;
    if (!alive(static_cast<pid_t>(std::atol(name.c_str())))) {
      ::unlink(path.c_str());  // a member that exited without leaving
      continue;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // left since
    char buf[sizeof kMagic + 16 + 16 * sizeof(sockaddr_in6)];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    const ssize_t want = static_cast<ssize_t>(sizeof kMagic + 16 + planes * sizeof(sockaddr_in6));
    if (n != want || std::memcmp(buf, kMagic, sizeof kMagic) != 0) {
      log_error("multicast: %s: not a member entry of %zu planes: skipped", path.c_str(), planes);
      continue;
    }
    ibv_gid g;
    std::memcpy(g.raw, buf + sizeof kMagic, 16);
    std::vector<sockaddr_in6> addrs(planes);
    std::memcpy(addrs.data(), buf + sizeof kMagic + 16, planes * sizeof(sockaddr_in6));
    if (auto m = member_peer(dev, g, std::move(addrs))) out.push_back(std::move(*m));
  }
  ::closedir(d);
  return out;
}

void McastFans::prepare(Device* dev, ibv_ah* ah) {
  if (!ah || !ah_of(ah)->mcast || members_.count(ah)) return;
  members_[ah] = mcast_members(dev, ah_of(ah)->attr.grh.dgid);
}

std::span<const engine::UdDest> McastFans::fan(ibv_ah* ah, const engine::UdDest& d) {
  const auto it = members_.find(ah);
  if (it == members_.end() || it->second.empty()) return {};
  std::vector<engine::UdDest>& v = out_.emplace_back();
  for (const McastMember& m : it->second) {
    engine::UdDest x = d;
    x.peer = m.peer;
    x.path = m.paths[ah_of(ah)->next.fetch_add(1, std::memory_order_relaxed) % m.paths.size()];
    v.push_back(x);
  }
  return v;
}

McastMember mcast_self(Device* dev) {
  std::vector<sockaddr_in6> addrs;
  for (uint16_t p = 0; p < dev->driver->planes(); ++p)
    addrs.push_back(dev->driver->local_address(p));
  auto m = member_peer(dev, dev->gid, std::move(addrs));
  return m ? *m : McastMember{0, dev->driver->spray_paths(0)};
}

}  // namespace mrc::verbs
