// Multicast on the software verbs device (docs/verbs-shim.md "Multicast"): ibv_attach_mcast /
// ibv_detach_mcast of UD QPs, and a UD SEND to a multicast AH fanned out to the group's member
// processes. Membership crosses processes, and machines where the directory is on a shared
// filesystem, through a directory per group (one record per member process: mcast_record.h),
// refreshed by a thread of the member's while it is in a group; the sender sends one UD datagram
// (QPN 0xFFFFFF, the GRH's dgid the group) to each live member over the planes, and the member's
// engine gives it to every QP of its own attached to the group (Engine::attach_mcast).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/mcast_record.h"
#include "verbs/objects.h"

namespace mrc::verbs {

namespace {

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

// Unix time in ms: the one wall-clock read of multicast (leases cross machines, so they are
// wall-clock times; clocks kept within kMcastLease - kMcastRefresh of each other).
int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool alive(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

std::string read_line(const char* path) {
  char buf[256] = {};
  FILE* f = std::fopen(path, "re");
  if (!f) return {};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!ok) return {};
  std::string s = buf;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Writes `r` as the group's record of this process, atomically (write a temporary file, then
// rename: a reader, here or on another machine, sees the whole record or none). 0 or errno.
int write_record(const engine::McastGid& g, const McastRecord& r) {
  const std::string dir = group_dir(g);
  const std::string path = dir + "/" + mcast_record_name(r);
  const std::string tmp = path + ".tmp";
  const std::string bytes = encode_mcast_record(r);
  int fd = -1;
  // Twice: the group's last other member may remove the directory between mkdir and open.
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    if (::mkdir(mcast_dir().c_str(), 0700) != 0 && errno != EEXIST) return errno;
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 && errno != ENOENT) return errno;
  }
  if (fd < 0) return errno;
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  const int werr = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : (werr ? werr : EIO);
    ::unlink(tmp.c_str());
    return e;
  }
  return 0;
}

}  // namespace

// This process's records, one per group it is in, and the thread that renews their leases
// every kMcastRefresh while there is any. Made by the first attach of a process (a forked
// child leaves its parent's, whose thread it does not have, and makes its own); never freed.
struct McastKeeper {
  pid_t pid = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::map<engine::McastGid, McastRecord> records;  // (mu)
  bool stop = false;                                // (mu)
  std::thread thread;  // runs while records is not empty (started and joined under dev->mu)

  void run() {
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, kMcastRefresh, [&] { return stop; })) {
      const int64_t expires = wall_ms() + kMcastLease.count();
      for (auto& [g, r] : records) {
        r.expires_ms = expires;
        if (const int e = write_record(g, r))
          log_error(
              "multicast: renewing %s/%s: %s (senders drop this member when its lease "
              "ends)",
              group_dir(g).c_str(), mcast_record_name(r).c_str(), std::strerror(e));
      }
    }
  }
};

namespace {

// dev's keeper for this process. Under dev->mu.
McastKeeper* keeper(Device* dev) {
  if (!dev->mcast_keeper || dev->mcast_keeper->pid != ::getpid()) {
    // A forked child's copy of its parent's keeper names records and a thread of the parent:
    // left alone (its mutex may even be held), not freed.
    dev->mcast_keeper = new McastKeeper;
    dev->mcast_keeper->pid = ::getpid();
  }
  return dev->mcast_keeper;
}

// Writes this process's record into the group's directory and keeps it renewed.
int publish(Device* dev, const engine::McastGid& g) {
  const std::string host = mcast_host_id();
  if (!valid_mcast_host_id(host))
    return fail(EINVAL,
                "ibv_attach_mcast: MRC_MCAST_HOST_ID \"%s\": a host identity is 1..128 "
                "characters of [A-Za-z0-9._-]",
                host.c_str());
  McastRecord r;
  r.host = host;
  char node[256] = {};
  if (::gethostname(node, sizeof node - 1) == 0) r.node = node;
  r.pid = ::getpid();
  r.gid = dev->gid;
  for (uint16_t p = 0; p < dev->driver->planes(); ++p) {
    sockaddr_in6 a = dev->driver->local_address(p);
    a.sin6_scope_id = 0;  // not in the record: a link-local plane is reached on the reader's own
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr))
      log_error(
          "ibv_attach_mcast: plane %u is bound to the wildcard address: members on other "
          "machines cannot reach this process (give the plane its address)",
          static_cast<unsigned>(p));
    r.planes.push_back(a);
  }
  std::lock_guard dlock(dev->mu);
  McastKeeper* k = keeper(dev);
  {
    std::lock_guard lock(k->mu);
    r.expires_ms = wall_ms() + kMcastLease.count();
    if (const int e = write_record(g, r))
      return fail(e, "ibv_attach_mcast: %s/%s: %s", group_dir(g).c_str(),
                  mcast_record_name(r).c_str(), std::strerror(e));
    k->records[g] = std::move(r);
    if (k->thread.joinable()) return 0;
    k->stop = false;
  }
  k->thread = std::thread([k] { k->run(); });
  return 0;
}

void withdraw(Device* dev, const engine::McastGid& g) {
  std::lock_guard dlock(dev->mu);
  McastKeeper* k = keeper(dev);
  bool last = false;
  {
    std::lock_guard lock(k->mu);
    auto it = k->records.find(g);
    if (it == k->records.end()) return;
    ::unlink((group_dir(g) + "/" + mcast_record_name(it->second)).c_str());
    k->records.erase(it);
    last = k->records.empty();
    if (last) k->stop = true;
  }
  ::rmdir(group_dir(g).c_str());  // fails while other members are there: fine
  if (last && k->thread.joinable()) {
    k->cv.notify_all();
    k->thread.join();
  }
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
  const std::string self = mcast_host_id();
  const int64_t now = wall_ms();
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name.ends_with(".tmp")) continue;
    const std::string path = dir + "/" + name;
    char buf[4096];
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // left since (or renewed under us: its next version is read next post)
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n <= 0) continue;
    auto r = parse_mcast_record(std::string_view(buf, static_cast<size_t>(n)));
    if (!r) {
      log_error("multicast: %s: %s: skipped", path.c_str(), r.error().c_str());
      continue;
    }
    if (mcast_record_liveness(*r, self, now, alive) == McastLiveness::kStale) {
      ::unlink(path.c_str());  // a member that went without leaving (here: exited; elsewhere:
      continue;                // its lease ran out), removed for every reader
    }
    if (r->planes.size() != planes) {
      log_error("multicast: %s: a member of %zu planes, this device has %zu: skipped", path.c_str(),
                r->planes.size(), planes);
      continue;
    }
    for (size_t p = 0; p < planes; ++p)  // a link-local plane: on this host's plane interface
      if (IN6_IS_ADDR_LINKLOCAL(&r->planes[p].sin6_addr))
        r->planes[p].sin6_scope_id =
            dev->driver->local_address(static_cast<uint16_t>(p)).sin6_scope_id;
    if (auto m = member_peer(dev, r->gid, std::move(r->planes))) out.push_back(std::move(*m));
  }
  ::closedir(d);
  return out;
}

std::string mcast_host_id() {
  if (const char* env = std::getenv("MRC_MCAST_HOST_ID"); env && *env) return env;
  // A pid is valid within one pid namespace of one running kernel: the boot's id and the
  // namespace's inode name exactly that.
  static const std::string id = [] {
    std::string boot = read_line("/proc/sys/kernel/random/boot_id");
    struct stat st;
    if (!boot.empty() && ::stat("/proc/self/ns/pid", &st) == 0)
      return boot + "." + std::to_string(st.st_ino);
    char node[256] = {};  // no /proc: the hostname (a container sharing it shares the answer)
    if (::gethostname(node, sizeof node - 1) != 0 || !valid_mcast_host_id(node))
      return std::string("unknown-host");
    return std::string(node);
  }();
  return id;
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
