// Devices, contexts, queries, async events, peers and tokens of the software verbs device.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "mrc/verbs/sysfs.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

namespace {
void vlog(const char* fmt, va_list ap) {
  char line[512];
  std::vsnprintf(line, sizeof line, fmt, ap);
  std::fprintf(stderr, "mrc-verbs: %s\n", line);
}
}  // namespace

void log_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

int fail(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
  errno = err;
  return err;
}

namespace {
std::atomic<void (*)(io::UdpConfig&)> g_attach_observer{nullptr};
}  // namespace

Device* the_device() {
  static Device* dev = [] () -> Device* {
    auto cfg = io::load_host_config();
    if (!cfg) {
      log_error("no MRC device: %s", cfg.error().c_str());
      return nullptr;
    }
    auto* d = new Device;  // lives as long as the process: apps keep ibv_device pointers
    d->cfg = std::move(*cfg);
    const io::UdpConfig& u = d->cfg.udp;
    std::string addr = u.planes[0].address.substr(0, u.planes[0].address.find('%'));
    if (u.path_mode == io::PathMode::kSrv6 && u.fabric) {
      d->gid = gid_of_host(*u.fabric, u.local_host);
      d->lid = static_cast<uint16_t>(u.local_host + 1);
    } else {
      ::inet_pton(AF_INET6, addr.c_str(), d->gid.raw);
    }
    d->gids = build_gid_table(u, d->gid);
    ibv_device& v = d->dev;
    v.node_type = IBV_NODE_CA;
    v.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(v.name, sizeof v.name, "mrc0");
    std::snprintf(v.dev_name, sizeof v.dev_name, "uverbs-mrc0");
    std::snprintf(v.dev_path, sizeof v.dev_path, "/sys/class/infiniband_verbs/uverbs-mrc0");
    std::snprintf(v.ibdev_path, sizeof v.ibdev_path, "/sys/class/infiniband/mrc0");
    return d;
  }();
  return dev;
}

uint64_t guid_of(const ibv_gid& g) {
  uint64_t v;
  std::memcpy(&v, g.raw + 8, 8);  // the interface id, as RoCE derives GUIDs
  return v ^ 0x02;
}

namespace {

int mtu_enum(uint32_t bytes) {
  int e = IBV_MTU_256;
  while ((256u << (e - IBV_MTU_256)) < bytes && e < IBV_MTU_4096) ++e;
  return e;
}

}  // namespace

// ---- Devices ---------------------------------------------------------------------------
void set_driver_observer(void (*attach)(io::UdpConfig&)) { g_attach_observer.store(attach); }

ibv_device** get_device_list(int* n) {
  Device* d = the_device();
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  int k = 0;
  if (d) list[k++] = &d->dev;
  if (n) *n = k;
  return list;
}

void free_device_list(ibv_device** list) { std::free(list); }

bool is_mrc_device(const ibv_device* d) {
  Device* dev = the_device();
  return dev && d == &dev->dev;
}

bool is_mrc_context(const ibv_context* c) { return c && is_mrc_device(c->device); }

__be64 device_guid(const ibv_device* d) {
  return is_mrc_device(d) ? guid_of(the_device()->gid) : 0;
}

Device* device_of(const ibv_context* c) { return ctx_of(c)->dev; }

ibv_context* open_device(ibv_device* d) {
  Device* dev = the_device();
  if (!dev || d != &dev->dev) {
    errno = ENODEV;
    return nullptr;
  }
  {
    std::lock_guard lock(dev->mu);
    if (dev->driver && dev->driver_pid != ::getpid()) {
      // A forked child: the parent's driver thread is not here and its objects are the
      // parent's (docs/verbs-shim.md, fork): start afresh, leaving the copy alone.
      (void)dev->driver.release();
      dev->contexts = 0;
      dev->peers.clear();
      dev->fabric_peers.clear();
      dev->mcast_peers.clear();
      dev->armed.clear();
      dev->n_armed = 0;
      dev->open.clear();
      dev->qps.clear();
      dev->pds.clear();
      dev->mrs.clear();
      dev->srqs.clear();
    }
    if (!dev->driver) {
      io::UdpConfig udp = dev->cfg.udp;
      if (auto* attach = g_attach_observer.load()) attach(udp);
      auto drv = io::UdpDriver::create(udp);
      if (!drv) {
        fail(EIO, "ibv_open_device(mrc0): %s", drv.error().c_str());
        return nullptr;
      }
      auto mtu = (*drv)->payload_mtu(dev->cfg.mtu);
      if (!mtu) {
        fail(EINVAL, "ibv_open_device(mrc0): %s", mtu.error().c_str());
        return nullptr;
      }
      dev->cfg.mtu = *mtu;  // the links' largest payload unless the config chose one
      dev->driver = std::move(*drv);
      dev->driver->set_on_progress([dev, d = dev->driver.get()] { dev->on_progress(*d); });
      dev->driver->start();
      dev->driver_pid = ::getpid();
    }
    ++dev->contexts;
  }
  auto* ctx = new Context;
  ctx->dev = dev;
  ctx->pid = ::getpid();
  ctx->async_fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  ctx->cmd_fd = open_cmd_fd();
  verbs_context& v = ctx->vctx;
  v.sz = sizeof(verbs_context);
  v.query_port = [](ibv_context* c, uint8_t port, ibv_port_attr* a, size_t) {
    return verbs::query_port(c, port, a);
  };
  v.create_cq_ex = &create_cq_ex;
  v.create_qp_ex = &create_qp_ex;
  v.query_device_ex = &query_device_ex;
  v.advise_mr = &advise_mr;
  v.alloc_parent_domain = &alloc_parent_domain;
  v.open_xrcd = &open_xrcd;  // xrc.cc
  v.close_xrcd = &close_xrcd;
  v.create_srq_ex = &create_srq_ex;
  v.get_srq_num = &get_srq_num;
  v.post_srq_ops = &post_srq_ops;  // tm.cc
  ibv_context& c = v.context;
  c.device = d;
  c.cmd_fd = ctx->cmd_fd;
  c.async_fd = ctx->async_fd;
  c.num_comp_vectors = 1;
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&c.mutex, nullptr);
  c.ops.poll_cq = &poll_cq;
  c.ops.req_notify_cq = &req_notify_cq;
  c.ops.post_send = &post_send;
  c.ops.post_recv = &post_recv;
  c.ops.post_srq_recv = &post_srq_recv;
  c.ops.alloc_mw = &alloc_mw;
  c.ops.bind_mw = &bind_mw;
  c.ops.dealloc_mw = &dealloc_mw;
  std::lock_guard lock(dev->mu);
  dev->open.insert(ctx);
  return &c;
}

int close_device(ibv_context* c) {
  Context* ctx = ctx_of(c);
  Device* dev = ctx->dev;
  std::unique_ptr<io::UdpDriver> last;
  if (ctx->pid != ::getpid()) {  // the parent's, in a forked child: not this process's device
    delete ctx;
    return 0;
  }
  {
    std::lock_guard lock(dev->mu);
    dev->open.erase(ctx);
    if (--dev->contexts == 0) {
      last = std::move(dev->driver);
      dev->peers.clear();
      dev->fabric_peers.clear();
      dev->mcast_peers.clear();
      dev->armed.clear();
      dev->n_armed = 0;
    }
  }
  last.reset();  // stops the thread, outside the lock its hook takes
  ::close(ctx->async_fd);
  if (ctx->cmd_fd >= 0) ::close(ctx->cmd_fd);
  pthread_mutex_destroy(&c->mutex);
  delete ctx;
  return 0;
}

int query_device(ibv_context* c, ibv_device_attr* a) {
  Device* dev = device_of(c);
  *a = ibv_device_attr{};
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "mrc-sw 0.1.0");
  a->node_guid = a->sys_image_guid = guid_of(dev->gid);
  a->max_mr_size = engine::kMaxMessage;
  a->page_size_cap = 4096;
  a->vendor_id = 0x4d5243;  // "MRC"; not a Mellanox id: perftest uses ibv_post_send
  a->vendor_part_id = 1;
  a->hw_ver = 1;
  a->max_qp = 65535;
  a->max_qp_wr = kMaxQpWr;
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |  // mw.cc
                        IBV_DEVICE_XRC;                                          // xrc.cc
  a->max_mw = 1 << 20;
  a->max_sge = a->max_sge_rd = engine::kMaxSge;
  a->max_cq = 65535;
  a->max_cqe = kMaxCqe;
  a->max_mr = 1 << 20;
  a->max_pd = 1 << 20;
  a->max_qp_rd_atom = a->max_qp_init_rd_atom = 16;
  a->max_res_rd_atom = 16 * 65535;
  // Responders run atomics with the CPU's 64-bit atomic instructions on the target word
  // (engine execute_atomic), so they are atomic against the host's own atomics too.
  a->atomic_cap = IBV_ATOMIC_GLOB;
  a->max_ah = 1 << 20;  // address handles of UD QPs (ud.cc)
  // Multicast (mcast.cc): groups per process and QPs per group (the engine's limits).
  a->max_mcast_grp = engine::Engine::kMaxMcastGroups;
  a->max_mcast_qp_attach = engine::Engine::kMaxMcastAttach;
  a->max_total_mcast_qp_attach = engine::Engine::kMaxMcastGroups * engine::Engine::kMaxMcastAttach;
  a->max_pkeys = 1;
  a->max_srq = 65535;
  a->max_srq_wr = kMaxQpWr;
  a->max_srq_sge = engine::kMaxSge;
  a->local_ca_ack_delay = 16;
  a->phys_port_cnt = 1;
  return 0;
}

ibv_port_attr port_attr(const Device& dev) {
  ibv_port_attr a{};
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = static_cast<ibv_mtu>(mtu_enum(dev.cfg.mtu));
  a.gid_tbl_len = kGidTableLen;  // dev.gids fills 0..n-1, the rest are empty
  a.port_cap_flags = 0;
  a.max_msg_sz = engine::kMaxMessage;
  a.pkey_tbl_len = 1;
  a.lid = dev.lid;
  a.max_vl_num = 1;
  a.active_width = 2;    // 4x
  a.active_speed = 32;   // EDR (25 Gb/s lanes): nominal; the planes' rates are in the config
  a.phys_state = 5;      // LinkUp
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  return a;
}

int query_port(ibv_context* c, uint8_t port, ibv_port_attr* a) {
  if (!a) return fail(EINVAL, "ibv_query_port(mrc0): port_attr is NULL");
  if (port != 1) return fail(EINVAL, "ibv_query_port(mrc0): no port %u (mrc0 has port 1)", port);
  *a = port_attr(*device_of(c));
  return 0;
}

int query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  const std::vector<GidEntry>& t = device_of(c)->gids;
  if (port != 1 || index < 0 || index >= kGidTableLen)
    return fail(EINVAL, "ibv_query_gid(mrc0): port %u index %d: mrc0 has port 1, GIDs 0..%d", port,
                index, kGidTableLen - 1);
  // An empty entry reads as the zero GID, as libibverbs gives a kernel device's.
  *gid = static_cast<size_t>(index) < t.size() ? t[index].gid : ibv_gid{};
  return 0;
}

namespace {
void fill_gid_entry(const std::vector<GidEntry>& t, uint32_t index, ibv_gid_entry* e) {
  *e = ibv_gid_entry{};
  e->gid = t[index].gid;
  e->gid_index = index;
  e->port_num = 1;
  e->gid_type = IBV_GID_TYPE_ROCE_V2;
  e->ndev_ifindex = t[index].ifindex;
}
}  // namespace

int query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e) {
  const std::vector<GidEntry>& t = device_of(c)->gids;
  if (port != 1 || index >= static_cast<uint32_t>(kGidTableLen))
    return fail(EINVAL, "ibv_query_gid_ex(mrc0): port %u index %u: mrc0 has port 1, GIDs 0..%d",
                port, index, kGidTableLen - 1);
  if (index >= t.size()) {
    errno = ENODATA;  // an empty entry, silently: table walkers (perftest, pyverbs) expect it
    return ENODATA;
  }
  fill_gid_entry(t, index, e);
  return 0;
}

ssize_t query_gid_table(ibv_context* c, ibv_gid_entry* entries, size_t max_entries) {
  const std::vector<GidEntry>& t = device_of(c)->gids;
  if (max_entries < t.size()) {
    fail(EINVAL, "ibv_query_gid_table(mrc0): room for %zu entries, the table has %zu populated",
         max_entries, t.size());
    return -EINVAL;
  }
  for (uint32_t i = 0; i < t.size(); ++i) fill_gid_entry(t, i, &entries[i]);
  return static_cast<ssize_t>(t.size());
}

int query_pkey(ibv_context*, uint8_t port, int index, uint16_t* pkey) {
  if (port != 1 || index != 0) return fail(EINVAL, "ibv_query_pkey(mrc0): no pkey %d", index);
  *pkey = 0xffff;
  return 0;
}

bool read_sysfs(const char* dir, const char* file, char* buf, size_t size, int* result) {
  Device* dev = the_device();
  if (!dev || !dir) return false;
  const std::string d = dir;
  if (d.rfind(dev->dev.ibdev_path, 0) != 0 && d.rfind(dev->dev.dev_path, 0) != 0) return false;
  static const std::vector<SysfsNode> tree = sysfs_tree(*dev);  // the device's state is fixed
  const SysfsNode* n = sysfs_find(tree, d.substr(5) + "/" + (file ? file : ""));  // past "/sys/"
  if (!n || n->kind != SysfsNode::Kind::kFile) {
    *result = -1;
    errno = ENOENT;
    return true;
  }
  const size_t len = std::min(size, n->data.size());
  std::memcpy(buf, n->data.data(), len);
  if (len < size) buf[len] = 0;
  *result = static_cast<int>(len);
  return true;
}

// ---- Async events ----------------------------------------------------------------------
int get_async_event(ibv_context* c, ibv_async_event* ev) {
  Context* ctx = ctx_of(c);
  uint64_t one;
  if (::read(ctx->async_fd, &one, sizeof one) != sizeof one) return -1;  // errno from read
  std::lock_guard lock(ctx->mu);
  if (ctx->async.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *ev = ctx->async.front();
  ctx->async.pop_front();
  return 0;
}

void ack_async_event(ibv_async_event*) {}

void Device::on_progress(io::UdpDriver& drv) {
  if (n_armed.load(std::memory_order_acquire) > 0) {
    std::vector<Cq*> fire;
    {
      std::lock_guard lock(mu);
      for (auto it = armed.begin(); it != armed.end();) {
        Cq* cq = *it;
        if (drv.peek_engine([&](engine::Engine& e) { return e.cq_depth(cq->id); }) > 0) {
          fire.push_back(cq);
          it = armed.erase(it);
        } else {
          ++it;
        }
      }
      n_armed = static_cast<int>(armed.size());
      for (Cq* cq : fire) notify(cq);
    }
  }
  // Engine events go to the sinks; QP fatal errors also become IBV_EVENT_QP_FATAL on the
  // QP's context.
  std::vector<engine::Event> evs;
  drv.peek_engine([&](engine::Engine& e) {
    while (auto ev = e.poll_event()) evs.push_back(*ev);
    return 0;
  });
  if (evs.empty()) return;
  std::lock_guard lock(mu);
  for (const auto& ev : evs) {
    for (auto& [id, sink] : event_sinks) sink(ev);
    if (ev.type == engine::EventType::kSrqLimit) {
      if (auto s = srqs.find(ev.srq); s != srqs.end()) {
        ibv_async_event a{};
        a.element.srq = &s->second->srq;
        a.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
        post_async(s->second->ctx, a);
      }
      continue;
    }
    if (ev.type != engine::EventType::kQpFatal) continue;
    auto it = qps.find(ev.qpn);
    if (it == qps.end() || it->second->mrc) continue;  // MRC QPs: the OCP API's own events
    Context* ctx = it->second->ctx;
    ibv_async_event a{};
    a.element.qp = &it->second->qpx.qp_base;
    a.event_type = IBV_EVENT_QP_FATAL;
    post_async(ctx, a);
  }
}

void post_async(Context* ctx, const ibv_async_event& a) {
  {
    std::lock_guard lock(ctx->mu);
    ctx->async.push_back(a);
  }
  const uint64_t one = 1;
  (void)!::write(ctx->async_fd, &one, sizeof one);
}

// ---- GID table ---------------------------------------------------------------------------
uint32_t ifindex_of(const in6_addr& a) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  uint32_t index = 0;
  const bool v4 = IN6_IS_ADDR_V4MAPPED(&a);
  for (const ifaddrs* i = list; i && !index; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    bool same = false;
    if (v4 && i->ifa_addr->sa_family == AF_INET) {
      const auto* s4 = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      same = std::memcmp(&s4->sin_addr, a.s6_addr + 12, 4) == 0;
    } else if (!v4 && i->ifa_addr->sa_family == AF_INET6) {
      const auto* s6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      same = std::memcmp(&s6->sin6_addr, &a, 16) == 0;
    }
    if (same) index = ::if_nametoindex(i->ifa_name);
  }
  ::freeifaddrs(list);
  return index;
}

std::vector<GidEntry> build_gid_table(const io::UdpConfig& u, const ibv_gid& gid0) {
  std::vector<GidEntry> t;
  auto listed = [&](const ibv_gid& g) {
    for (const GidEntry& e : t)
      if (std::memcmp(e.gid.raw, g.raw, 16) == 0) return true;
    return false;
  };
  for (const io::PlaneConfig& pc : u.planes) {
    const size_t pct = pc.address.find('%');
    GidEntry e;
    if (::inet_pton(AF_INET6, pc.address.substr(0, pct).c_str(), e.gid.raw) != 1) continue;
    in6_addr a;
    std::memcpy(&a, e.gid.raw, 16);
    e.ifindex = pct != std::string::npos ? ::if_nametoindex(pc.address.c_str() + pct + 1) : 0;
    if (e.ifindex == 0) e.ifindex = ifindex_of(a);
    if (t.empty()) t.push_back({gid0, e.ifindex});  // the device's GID, on plane 0's interface
    if (!listed(e.gid)) t.push_back(e);
  }
  if (t.empty()) t.push_back({gid0, 0});
  return t;
}

int check_sgid_index(const Device* dev, unsigned index, const std::string& what) {
  const size_t n = dev->gids.size();
  if (index < n) return 0;
  if (index >= static_cast<unsigned>(kGidTableLen))
    return fail(EINVAL, "%s: grh.sgid_index %u is past mrc0's GID table (0..%d; populated 0..%zu)",
                what.c_str(), index, kGidTableLen - 1, n - 1);
  return fail(ENODATA, "%s: grh.sgid_index %u is an empty GID entry (mrc0's populated GIDs: 0..%zu)",
              what.c_str(), index, n - 1);
}

// ---- Peers and tokens --------------------------------------------------------------------
ibv_gid gid_of_host(const srv6::Fabric& f, uint32_t host) {
  ibv_gid g{};
  std::memcpy(g.raw, f.host_address(host, 0).data(), 8);
  // Fabric addresses end in 64 zero bits, and RoCE tools take a GID with a zero interface
  // id for "no GID": fill one in (locally administered, "MRC", host id).
  const uint8_t iid[8] = {0x02,
                          0x4d,
                          0x52,
                          0x43,
                          static_cast<uint8_t>(host >> 24),
                          static_cast<uint8_t>(host >> 16),
                          static_cast<uint8_t>(host >> 8),
                          static_cast<uint8_t>(host)};
  std::memcpy(g.raw + 8, iid, 8);
  return g;
}

std::optional<uint32_t> fabric_host_of(const srv6::Fabric& f, const ibv_gid& gid) {
  for (uint32_t h = 0; h < f.config().hosts; ++h) {
    if (std::memcmp(gid_of_host(f, h).raw, gid.raw, 16) == 0) return h;
    for (uint32_t p = 0; p < f.config().planes; ++p)
      if (std::memcmp(f.host_address(h, p).data(), gid.raw, 16) == 0) return h;
  }
  return std::nullopt;
}

ibv_gid token_gid(const srv6::Fabric* f, const ibv_ah_attr& ah, uint32_t host) {
  return f ? gid_of_host(*f, host) : ah.grh.dgid;
}

Result<engine::PeerId, std::string> peer_for(Device* dev, const ibv_ah_attr& ah, uint32_t* host) {
  const io::UdpConfig& u = dev->cfg.udp;
  const bool fabric = u.path_mode == io::PathMode::kSrv6 && u.fabric;
  if (fabric) {
    const srv6::Fabric& f = *u.fabric;
    std::optional<uint32_t> h;
    if (ah.is_global) {
      h = fabric_host_of(f, ah.grh.dgid);
      if (!h) {
        char s[INET6_ADDRSTRLEN];
        ::inet_ntop(AF_INET6, ah.grh.dgid.raw, s, sizeof s);
        return Err{std::string("GID ") + s + " is no host of the fabric"};
      }
    } else {
      if (ah.dlid == 0 || ah.dlid > f.config().hosts)
        return Err{"LID " + std::to_string(ah.dlid) + " is no host of the fabric (LID = host + 1)"};
      h = ah.dlid - 1u;
    }
    *host = *h;
    if (auto it = dev->fabric_peers.find(*h); it != dev->fabric_peers.end()) return it->second;
    auto p = dev->driver->add_fabric_peer(*h);
    if (!p) return Err{p.error()};
    dev->fabric_peers[*h] = *p;
    return *p;
  }
  if (!ah.is_global) return Err{std::string("a GID is needed to find the peer outside a fabric (use -g 0 / RoCE)")};
  *host = 0;
  const std::string key(reinterpret_cast<const char*>(ah.grh.dgid.raw), 16);
  // Ports learnt for this GID (the connection manager's REQ or REP carries them) serve with
  // ephemeral ports too.
  if (auto it = dev->peers.find(key); it != dev->peers.end()) return it->second;
  if (u.peer_port == 0) {
    // Ephemeral ports: another process's are unknown, but a GID of this device is this
    // process (a program that talks to itself) at the ports its planes were given.
    const bool own = std::any_of(dev->gids.begin(), dev->gids.end(), [&](const GidEntry& g) {
      return std::memcmp(g.gid.raw, ah.grh.dgid.raw, 16) == 0;
    });
    if (!own)
      return Err{std::string("the config has ephemeral ports (port 0): verbs peers need a fixed "
                             "port, or a connection through rdma_cm")};
    std::vector<uint16_t> ports;
    for (uint16_t pl = 0; pl < dev->driver->planes(); ++pl)
      ports.push_back(ntohs(dev->driver->local_address(pl).sin6_port));
    in6_addr self;
    std::memcpy(&self, ah.grh.dgid.raw, 16);
    const engine::PeerId p = dev->driver->add_peer_at(self, ports);
    dev->peers[key] = p;
    return p;
  }
  // Outside a fabric the GID is one address of the peer (an IPv4 one as its IPv4-mapped
  // form, as RoCE v2 writes it), at the port each plane has here (hosts are configured
  // alike): the driver finds its other plane addresses in the host config's peer table, or
  // learns them on the wire once a QP toward it is at RTR (qp.cc).
  std::vector<uint16_t> ports;
  for (const io::PlaneConfig& pc : u.planes) ports.push_back(pc.port);
  in6_addr known;
  std::memcpy(&known, ah.grh.dgid.raw, 16);
  const engine::PeerId p = dev->driver->add_peer_at(known, ports);
  dev->peers[key] = p;
  return p;
}

uint32_t token(const ibv_gid& src_gid, uint32_t src_qpn, const ibv_gid& dst_gid,
               uint32_t dst_qpn) {
  // FNV-1a over the direction's identity, then a 64-bit finaliser; never 0.
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001b3ull;
  };
  mix(src_gid.raw, 16);
  mix(&src_qpn, 4);
  mix(dst_gid.raw, 16);
  mix(&dst_qpn, 4);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  const uint32_t t = static_cast<uint32_t>(h ^ (h >> 32));
  return t ? t : 1;
}

}  // namespace mrc::verbs
