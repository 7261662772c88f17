// The connection manager over mrc0 (cm.h): ids, event channels, the CM service thread and
// its TCP exchange (cm_wire.h), and the QP transitions a connection drives.
#include "mrc/verbs/cm.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mrc/verbs/verbs.h"
#include "verbs/cm_wire.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs::cm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kConnectTimeout = std::chrono::seconds(5);
constexpr auto kRefusedRetry = std::chrono::seconds(3);
// A handshake step that gets no answer (a REQ with no REP or REJ, a REP with no RTU, a TCP
// client that never sends its REQ) fails after this: UNREACHABLE / CONNECT_ERROR with
// -ETIMEDOUT, or the idle connection is closed; nothing waits forever on a stalled peer.
constexpr auto kHandshakeTimeout = std::chrono::seconds(30);

// librdmacm's return convention after fail() (internal.h) logged the problem and set errno.
int minus_one(int /*errno value*/) { return -1; }

std::string addr_str(const sockaddr* a) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (a->sa_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(a);
    ::inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
    port = ntohs(s->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (a->sa_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(a);
    ::inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
    port = ntohs(s->sin6_port);
  }
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

socklen_t addr_len(const sockaddr* a) {
  return a->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

// Same family, address and port (a client that the kernel connected to itself: its source
// port was the free port it dialled).
bool same_endpoint(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(b);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a->sa_family != AF_INET6) return false;
  const auto* x = reinterpret_cast<const sockaddr_in6*>(a);
  const auto* y = reinterpret_cast<const sockaddr_in6*>(b);
  return x->sin6_port == y->sin6_port &&
         std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

struct Channel {
  rdma_event_channel ch{};  // first: the app's pointer is the object's address
  std::mutex mu;
  std::deque<rdma_cm_event*> queue;  // (mu) posted, not yet fetched
  int readers = 0;                   // (mu) threads inside rdma_get_cm_event
  bool destroyed = false;            // (mu) rdma_destroy_event_channel came while readers > 0
};
Channel* chan_of(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }

struct Event {
  rdma_cm_event ev{};  // first: rdma_ack_cm_event gets the object's address
  uint8_t private_data[kMaxPrivate]{};
};

// Where an id is. Active: kIdle -> kAddrResolved -> kRouteResolved -> kConnecting (TCP) ->
// kReqSent -> (kRepRcvd, no QP on the id ->) kEstablished. Passive: kBound -> kListening;
// its children kReqWait (TCP accepted) -> kReqRcvd (CONNECT_REQUEST posted) -> kRepSent ->
// kEstablished. Both: kEstablished -> kDisconnecting (DREQ sent) -> kDisconnected; kRejected
// and kFailed end an attempt.
enum class St {
  kIdle,
  kBound,
  kAddrResolved,
  kRouteResolved,
  kListening,
  kConnecting,
  kReqSent,
  kReqWait,
  kReqRcvd,
  kRepSent,
  kRepRcvd,
  kEstablished,
  kDisconnecting,
  kDisconnected,
  kRejected,
  kFailed,
};

struct Id {
  rdma_cm_id id{};  // first: the app's pointer is the object's address
  uint64_t serial = 0;
  St st = St::kIdle;
  int fd = -1;                        // TCP: listening or connection socket
  std::string in;                     // bytes received, not yet a whole CmMsg
  Id* listener = nullptr;             // a passive child: its listening id (null once that is gone)
  bool handed = false;                // a child the app has seen (CONNECT_REQUEST posted)
  bool own_channel = false;           // rdma_migrate_id(id, NULL) made its channel
  Clock::time_point deadline{};       // kConnecting, kReqSent, kRepSent, kReqWait: fails after it
  Clock::time_point refused_until{};  // kConnecting: a refused connect is tried again till then
  Clock::time_point retry_at{};       // kConnecting without a socket: when to try again
  CmMsg out{};                        // kConnecting: the REQ to send once connected
  bool have_peer = false;
  CmMsg peer{};  // the peer's REQ (passive) or REP (active)
  uint32_t psn = 0;
  // kDisconnected: RDMA_CM_EVENT_TIMEWAIT_EXIT is posted at this time (timewait_exit())
  Clock::time_point timewait_until{};
  bool timewait = false;
  uint8_t tos = 0;  // RDMA_OPTION_ID_TOS: the QP's IPv6 traffic class / IPv4 TOS (its DSCP)
  uint8_t responder_resources = 1, initiator_depth = 1, retry_count = 7, rnr_retry_count = 7;
  uint8_t ack_timeout = 14;  // verbs units (4.096 us x 2^t), RDMA_OPTION_ID_ACK_TIMEOUT
  int afonly = 0;            // RDMA_OPTION_ID_AFONLY: IPV6_V6ONLY of its socket
  bool sync = false;         // made without a channel (rdma_create_ep): calls wait for events
  bool made_cqs = false;     // rdma_create_qp made the QP's CQs and channels (none were given)
  bool has_ep_attr = false;  // a passive rdma_create_ep: the QP rdma_get_request makes
  ibv_qp_init_attr ep_attr{};
  ibv_pd* ep_pd = nullptr;
  // Multicast groups joined (rdma_join_multicast): the group's GID, and whether the id's QP
  // was attached (a send-only join attaches nothing).
  struct Group {
    ibv_gid mgid{};
    bool attached = false;
  };
  std::vector<Group> groups;
};
Id* id_of(rdma_cm_id* i) { return reinterpret_cast<Id*>(i); }
// An RDMA_PS_UDP id: a UD QP, whose "connection" is one REQ/REP exchange (cm_wire.h).
bool is_ud(const Id* id) { return id->id.ps == RDMA_PS_UDP; }

// Every id of the process, the mrc0 context ids hand out, and the service thread.
struct Service {
  std::mutex mu;
  std::map<uint64_t, Id*> ids;  // (mu) by serial
  uint64_t next_serial = 1;     // (mu)
  int wake = -1;                // eventfd: the thread re-reads the id table
  ibv_context* ctx = nullptr;   // (mu) opened at the first bind / resolve
  ibv_pd* pd = nullptr;         // (mu) rdma_create_qp's default PD
  bool started = false;         // (mu)
  uint64_t rounds = 0;          // (mu) poll rounds the thread has finished
  std::condition_variable round_done;

  void poke() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake, &one, sizeof one);
  }
  void run();
  void handle(Id* id);
  void on_msg(Id* id, const CmMsg& m);
};

Service* g_service = nullptr;  // svc()'s, for the fork handlers

// fork(): the table is held across it, so the child's copy is whole. The child has only
// the thread that forked, not the service thread, and its ids' sockets are shared with the
// parent: it lets go of them (closes its copies; the parent's stay open, its connections
// go on) and starts a service of its own at its next call, with its own wake fd. Without
// this a child's rdma_destroy_id waited forever for a service round.
void before_fork() { g_service->mu.lock(); }
void after_fork_parent() { g_service->mu.unlock(); }
void after_fork_child() {
  Service& s = *g_service;
  for (auto& [_, id] : s.ids) {
    if (id->fd >= 0) ::close(id->fd);
    id->fd = -1;
  }
  ::close(s.wake);
  s.wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s.started = false;
  new (&s.round_done) std::condition_variable;  // a parent thread may have been waiting
  s.mu.unlock();
}

Service& svc() {
  // Lives as long as the process (its thread does): never destroyed.
  static Service* s = [] {
    auto* n = new Service;
    n->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    g_service = n;
    ::pthread_atfork(&before_fork, &after_fork_parent, &after_fork_child);
    return n;
  }();
  return *s;
}

void start_service(Service& s) {
  if (s.started) return;
  s.started = true;
  std::thread([&s] { s.run(); }).detach();
}

// mrc0's context (opened once); null with errno set and a line when there is no device.
ibv_context* context(Service& s) {
  if (s.ctx) return s.ctx;
  int n = 0;
  ibv_device** list = get_device_list(&n);
  if (!list || n == 0) {
    if (list) free_device_list(list);
    fail(ENODEV, "no MRC device (see the host configuration: $MRC_CONFIG, /etc/mrc/mrc.json)");
    return nullptr;
  }
  s.ctx = open_device(list[0]);
  free_device_list(list);
  if (!s.ctx) fail(errno ? errno : ENODEV, "cannot open mrc0");
  return s.ctx;
}

// rdma_create_qp's default PD: mrc0's one PD for the CM's ids.
ibv_pd* default_pd(Service& s) {
  if (!s.pd) s.pd = alloc_pd(s.ctx);
  return s.pd;
}

// Ties an id to mrc0 once bound or resolved, as librdmacm does: its context, port, source
// GID and the device's PD (id->pd: an app that makes its own QP, ibv_create_qp(id->pd, ...),
// rather than rdma_create_qp, finds a PD there; a null one crashed pyverbs' external-QP test).
void attach_device(Service& s, rdma_cm_id* cm) {
  cm->verbs = s.ctx;
  cm->port_num = 1;
  if (!cm->pd) cm->pd = default_pd(s);
  query_gid(s.ctx, 1, 0, &cm->route.addr.addr.ibaddr.sgid);
}

void push(Id* id, Event* e) {
  Channel* ch = chan_of(id->id.channel);
  {
    std::lock_guard l(ch->mu);
    ch->queue.push_back(&e->ev);
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(ch->ch.fd, &one, sizeof one);
}

void post(Id* id, rdma_cm_event_type type, int status, const CmMsg* m = nullptr) {
  auto* e = new Event;
  e->ev.id = &id->id;
  e->ev.listen_id =
      type == RDMA_CM_EVENT_CONNECT_REQUEST && id->listener ? &id->listener->id : nullptr;
  e->ev.event = type;
  e->ev.status = status;
  const uint8_t len = m ? std::min<uint8_t>(m->private_len, kMaxPrivate) : 0;
  if (len) std::memcpy(e->private_data, m->private_data, len);
  if (m && is_ud(id)) {
    // The peer's UD QP, and the AH attributes that reach it (its GID; our GID 0).
    rdma_ud_param& u = e->ev.param.ud;
    u.private_data = len ? e->private_data : nullptr;
    u.private_data_len = len;
    u.qp_num = m->qpn;
    u.qkey = RDMA_UDP_QKEY;
    u.ah_attr.is_global = 1;
    std::memcpy(u.ah_attr.grh.dgid.raw, m->gid, 16);
    u.ah_attr.grh.sgid_index = 0;
    u.ah_attr.grh.hop_limit = 64;
    u.ah_attr.grh.traffic_class = id->tos;
    u.ah_attr.port_num = 1;
  } else if (m) {
    rdma_conn_param& c = e->ev.param.conn;
    c.private_data = len ? e->private_data : nullptr;
    c.private_data_len = len;
    c.responder_resources = m->responder_resources;
    c.initiator_depth = m->initiator_depth;
    c.retry_count = m->retry_count;
    c.rnr_retry_count = m->rnr_retry_count;
    c.qp_num = m->qpn;
  }
  push(id, e);
}

// RDMA_CM_EVENT_MULTICAST_JOIN (status 0) or _ERROR: param.ud holds the join's context as its
// private data and what a SEND to the group needs: an AH to the group's GID, QPN 0xFFFFFF,
// RDMA_UDP_QKEY (the Q_Key rdma_create_qp gave the id's UD QP).
void post_mcast(Id* id, rdma_cm_event_type type, int status, const ibv_gid& mgid, void* context) {
  auto* e = new Event;
  e->ev.id = &id->id;
  e->ev.event = type;
  e->ev.status = status;
  rdma_ud_param& u = e->ev.param.ud;
  u.private_data = context;
  u.qp_num = engine::kMulticastQpn;
  u.qkey = RDMA_UDP_QKEY;
  u.ah_attr.is_global = 1;
  u.ah_attr.grh.dgid = mgid;
  u.ah_attr.grh.hop_limit = 64;
  u.ah_attr.grh.traffic_class = id->tos;
  u.ah_attr.dlid = 0xffff;  // RoCE: the MLID is not used (the GRH addresses the group)
  u.ah_attr.port_num = 1;
  push(id, e);
}

void close_fd(Id* id) {
  if (id->fd >= 0) ::close(id->fd);
  id->fd = -1;
  id->in.clear();
}

bool send_msg(Id* id, const CmMsg& m) {
  return id->fd >= 0 &&
         ::send(id->fd, &m, sizeof m, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof m);
}

// Our side of a message: QP number, GID, plane ports, the connection parameters, the private
// data (its size checked by the caller).
CmMsg our_msg(Service& s, Id* id, MsgType type, uint32_t qpn, const void* pd, uint8_t len) {
  CmMsg m;
  m.type = type;
  m.qpn = qpn;
  m.psn = id->psn;
  m.responder_resources = id->responder_resources;
  m.initiator_depth = id->initiator_depth;
  m.retry_count = id->retry_count;
  m.rnr_retry_count = id->rnr_retry_count;
  m.ud = is_ud(id) ? 1 : 0;
  if (s.ctx) {
    ibv_gid g{};
    if (query_gid(s.ctx, 1, 0, &g) == 0) std::memcpy(m.gid, g.raw, 16);
    // The ports the planes are bound to (the config's, or the kernel's where it says 0).
    const Device* dev = device_of(s.ctx);
    const io::UdpConfig& u = dev->cfg.udp;
    m.nports = static_cast<uint8_t>(std::min(u.planes.size(), kMaxPorts));
    for (size_t i = 0; i < m.nports; ++i)
      m.ports[i] = dev->driver ? ntohs(dev->driver->local_address(static_cast<uint16_t>(i)).sin6_port)
                               : u.planes[i].port;
  }
  m.private_len = pd ? len : 0;
  if (pd && len) std::memcpy(m.private_data, pd, len);
  return m;
}

// Outside a fabric, the peer's plane ports (its REQ/REP) go with its GID into the device's
// peer table before the QP reaches RTR, so a peer whose ports differ from ours (another
// process on this host) is found; in a fabric the GID alone names the host.
void learn_peer(Service& s, const CmMsg& p) {
  Device* dev = device_of(s.ctx);
  const io::UdpConfig& u = dev->cfg.udp;
  if ((u.path_mode == io::PathMode::kSrv6 && u.fabric) || p.nports == 0) return;
  if (p.nports != u.planes.size()) {
    log_error("peer has %u planes, we have %zu: sending to its GID at our ports", p.nports,
              u.planes.size());
    return;
  }
  std::lock_guard l(dev->mu);
  const std::string key(reinterpret_cast<const char*>(p.gid), 16);
  if (!dev->driver || dev->peers.count(key)) return;
  in6_addr known;
  std::memcpy(&known, p.gid, 16);
  std::vector<uint16_t> ports(p.ports, p.ports + p.nports);
  dev->peers[key] = dev->driver->add_peer_at(known, ports);
}

// The attributes that move an id's QP to `state` (rdma_init_qp_attr).
int qp_attr(Service& s, Id* id, ibv_qp_state state, ibv_qp_attr* a, int* mask) {
  *a = {};
  a->qp_state = state;
  if (is_ud(id)) {  // as librdmacm's: the Q_Key at INIT, nothing toward a peer
    switch (state) {
      case IBV_QPS_INIT:
        a->pkey_index = 0;
        a->port_num = 1;
        a->qkey = RDMA_UDP_QKEY;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
        return 0;
      case IBV_QPS_RTR:
        *mask = IBV_QP_STATE;
        return 0;
      case IBV_QPS_RTS:
        a->sq_psn = id->psn;
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        return 0;
      default:
        return minus_one(
            fail(EINVAL, "rdma_init_qp_attr: state %d: only INIT, RTR and RTS", state));
    }
  }
  switch (state) {
    case IBV_QPS_INIT:
      a->pkey_index = 0;
      a->port_num = 1;
      a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      return 0;
    case IBV_QPS_RTR: {
      if (!id->have_peer)
        return minus_one(fail(EINVAL, "rdma_init_qp_attr: RTR: the peer is not known yet"));
      ibv_port_attr port{};
      if (query_port(s.ctx, 1, &port)) return -1;
      a->path_mtu = port.active_mtu;
      a->dest_qp_num = id->peer.qpn;
      a->rq_psn = id->peer.psn;
      a->max_dest_rd_atomic = std::max<uint8_t>(id->responder_resources, 1);
      a->min_rnr_timer = 0;  // 655.36 ms, as the kernel's rdma_cm sets unless told
      a->ah_attr.is_global = 1;
      std::memcpy(a->ah_attr.grh.dgid.raw, id->peer.gid, 16);
      a->ah_attr.grh.sgid_index = 0;
      a->ah_attr.grh.hop_limit = 64;
      a->ah_attr.grh.traffic_class = id->tos;
      a->ah_attr.port_num = 1;
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    }
    case IBV_QPS_RTS:
      if (!id->have_peer)
        return minus_one(fail(EINVAL, "rdma_init_qp_attr: RTS: the peer is not known yet"));
      a->sq_psn = id->psn;
      a->timeout = id->ack_timeout;
      a->retry_cnt = std::min<uint8_t>(id->retry_count, 7);
      a->rnr_retry = std::min<uint8_t>(id->rnr_retry_count, 7);
      a->max_rd_atomic = std::max<uint8_t>(id->initiator_depth, 1);
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
              IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    default:
      return minus_one(fail(EINVAL, "rdma_init_qp_attr: state %d: only INIT, RTR and RTS", state));
  }
}

// Moves the id's QP to RTR and RTS toward the peer; 0, or -1 with errno.
int connect_qp(Service& s, Id* id) {
  for (ibv_qp_state st : {IBV_QPS_RTR, IBV_QPS_RTS}) {
    ibv_qp_attr a;
    int mask = 0;
    if (qp_attr(s, id, st, &a, &mask)) return -1;
    if (const int r = modify_qp(id->id.qp, &a, mask))
      return minus_one(fail(r, "QP %u to %s toward the peer: %s", id->id.qp->qp_num,
                            st == IBV_QPS_RTR ? "RTR" : "RTS", std::strerror(r)));
  }
  return 0;
}

void remove_id(Service& s, Id* id) {
  close_fd(id);
  s.ids.erase(id->serial);
  for (auto& [_, other] : s.ids)
    if (other->listener == id) other->listener = nullptr;
}

// A connection's first PSN, 24 bits from the kernel's random source (getrandom), as IB CMs
// pick them; std::random_device if that fails.
uint32_t random_psn() {
  uint32_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = std::random_device{}();
  return v & 0xffffff;
}

// The connection is over: DISCONNECTED now, TIMEWAIT_EXIT once a packet of it can no longer
// be in flight (the QP's local ACK timeout, 4.096 us x 2^ack_timeout), as the kernel's CM
// posts it when the QP leaves time-wait.
void disconnected(Id* id) {
  id->st = St::kDisconnected;
  post(id, RDMA_CM_EVENT_DISCONNECTED, 0);
  id->timewait = true;
  id->timewait_until =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(
                         4.096 * (1ull << std::min<uint8_t>(id->ack_timeout, 31))));
}

// The TCP connection ended (closed, reset, garbage) at state `st`.
void peer_gone(Service& s, Id* id, int err) {
  close_fd(id);
  switch (id->st) {
    case St::kEstablished:
    case St::kDisconnecting:
      disconnected(id);
      break;
    case St::kReqSent:
    case St::kRepSent:
    case St::kRepRcvd:
      id->st = St::kFailed;
      post(id, RDMA_CM_EVENT_CONNECT_ERROR, -err);
      break;
    case St::kReqWait:  // the app never saw it
      remove_id(s, id);
      delete id;
      break;
    case St::kReqRcvd:  // the app holds it: accept will fail
      id->st = St::kFailed;
      break;
    default:
      break;
  }
}

void refused(Id* id, int err);
void destroy_made_cqs(Id* id);

void unreachable(Id* id, int err) {
  log_error("rdma_connect: no MRC connection manager answers at %s (%s)",
            addr_str(&id->id.route.addr.dst_addr).c_str(), std::strerror(err));
  close_fd(id);
  id->st = St::kFailed;
  post(id, RDMA_CM_EVENT_UNREACHABLE, -err);
}

// Opens the id's TCP connection toward its destination (the service thread sees it complete).
// A refused connection is tried again every 20 ms for kRefusedRetry: a server that listens
// again between two phases (perftest -R: one listener for its exchange, then one for the
// test's QPs) is not missed by a client quicker than it. Then, or on any other error,
// UNREACHABLE.
void try_connect(Id* id) {
  const sockaddr* dst = &id->id.route.addr.dst_addr;
  if (id->fd < 0) id->fd = ::socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (id->fd < 0) return unreachable(id, errno);
  if (::connect(id->fd, dst, addr_len(dst)) == 0 || errno == EINPROGRESS) return;
  refused(id, errno);
}

void refused(Id* id, int err) {
  close_fd(id);
  const auto now = Clock::now();
  if (err == ECONNREFUSED && now < id->refused_until) {
    id->retry_at = now + std::chrono::milliseconds(20);
    return;
  }
  unreachable(id, err);
}

void Service::run() {
  for (;;) {
    std::vector<pollfd> pf{{wake, POLLIN, 0}};
    std::vector<uint64_t> who{0};
    bool retrying = false;
    {
      std::lock_guard l(mu);
      for (auto& [serial, id] : ids) {
        retrying |= id->st == St::kConnecting && id->fd < 0;
        if (id->fd < 0 || id->st == St::kBound) continue;  // a bound socket waits for listen
        pf.push_back({id->fd, static_cast<short>(id->st == St::kConnecting ? POLLOUT : POLLIN), 0});
        who.push_back(serial);
      }
    }
    ::poll(pf.data(), pf.size(), retrying ? 20 : 100);
    uint64_t v;
    while (::read(wake, &v, sizeof v) == sizeof v) {
    }
    std::lock_guard l(mu);
    ++rounds;
    round_done.notify_all();
    for (size_t i = 1; i < pf.size(); ++i) {
      auto it = ids.find(who[i]);
      if (it == ids.end() || it->second->fd != pf[i].fd || !pf[i].revents) continue;
      handle(it->second);
    }
    const auto now = Clock::now();
    std::vector<Id*> stalled;  // handshakes past their deadline (peer_gone may delete them)
    for (auto& [_, id] : ids) {
      if (id->timewait && now >= id->timewait_until) {
        id->timewait = false;
        post(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
      }
      const bool handshake =
          id->st == St::kReqSent || id->st == St::kRepSent || id->st == St::kReqWait;
      if (handshake && now > id->deadline) stalled.push_back(id);
      if (id->st != St::kConnecting) continue;
      if (now > id->deadline)
        unreachable(id, ETIMEDOUT);
      else if (id->fd < 0 && now >= id->retry_at)
        try_connect(id);
    }
    for (Id* id : stalled) {
      if (id->st == St::kReqSent) {
        unreachable(id, ETIMEDOUT);
      } else {
        if (id->st == St::kRepSent)
          log_error("rdma_accept: %s never confirmed the connection (%s)",
                    addr_str(&id->id.route.addr.dst_addr).c_str(), std::strerror(ETIMEDOUT));
        peer_gone(*this, id, ETIMEDOUT);
      }
    }
  }
}

void Service::handle(Id* id) {
  if (id->st == St::kListening) {
    for (;;) {
      const int c = ::accept4(id->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) return;
      auto* child = new Id;
      child->serial = next_serial++;
      child->st = St::kReqWait;
      child->deadline = Clock::now() + kHandshakeTimeout;
      child->fd = c;
      child->listener = id;
      child->psn = random_psn();
      child->tos = id->tos;  // a connection takes its listener's TOS, as the kernel's CM
      child->id.verbs = id->id.verbs;
      child->id.pd = id->id.pd;
      child->id.channel = id->id.channel;
      child->id.context = id->id.context;
      child->id.ps = id->id.ps;
      child->id.port_num = 1;
      child->id.qp_type = id->id.qp_type;
      child->id.route.addr.addr.ibaddr.sgid = id->id.route.addr.addr.ibaddr.sgid;
      socklen_t n = sizeof(sockaddr_storage);
      ::getsockname(c, &child->id.route.addr.src_addr, &n);
      n = sizeof(sockaddr_storage);
      ::getpeername(c, &child->id.route.addr.dst_addr, &n);
      ids[child->serial] = child;
    }
  }
  if (id->st == St::kConnecting) {
    int err = 0;
    socklen_t n = sizeof err;
    ::getsockopt(id->fd, SOL_SOCKET, SO_ERROR, &err, &n);
    if (err) return refused(id, err);
    sockaddr_storage local{};
    n = sizeof local;
    ::getsockname(id->fd, reinterpret_cast<sockaddr*>(&local), &n);
    std::memcpy(&id->id.route.addr.src_storage, &local, sizeof local);
    if (same_endpoint(reinterpret_cast<const sockaddr*>(&local), &id->id.route.addr.dst_addr))
      return refused(id, ECONNREFUSED);  // TCP's simultaneous open with itself: nobody there
    id->st = St::kReqSent;
    id->deadline = Clock::now() + kHandshakeTimeout;
    if (!send_msg(id, id->out)) return peer_gone(*this, id, ECONNRESET);
    return;
  }
  char buf[4096];
  int gone = 0;  // why the connection ended, once what came before is handled
  for (;;) {
    const ssize_t r = ::recv(id->fd, buf, sizeof buf, 0);
    if (r > 0) {
      id->in.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      gone = r == 0 ? ECONNRESET : errno;
    break;
  }
  while (id->fd >= 0 && id->in.size() >= sizeof(CmMsg)) {
    CmMsg m;
    std::memcpy(&m, id->in.data(), sizeof m);
    id->in.erase(0, sizeof m);
    if (m.magic != kCmMagic || m.private_len > kMaxPrivate || m.nports > kMaxPorts) {
      log_error("rdma_cm: %s is not an MRC connection manager (bad message): closing",
                addr_str(&id->id.route.addr.dst_addr).c_str());
      return peer_gone(*this, id, EPROTO);
    }
    const uint64_t serial = id->serial;
    on_msg(id, m);
    if (!ids.count(serial)) return;  // on_msg dropped it
  }
  if (gone && id->fd >= 0) peer_gone(*this, id, gone);
}

void Service::on_msg(Id* id, const CmMsg& m) {
  switch (m.type) {
    case MsgType::kReq:
      if (id->st != St::kReqWait) break;
      if ((m.ud != 0) != is_ud(id)) {  // an RDMA_PS_UDP request to a TCP listener, or back
        log_error("rdma_cm: %s asked for %s, this listener is %s: rejected",
                  addr_str(&id->id.route.addr.dst_addr).c_str(),
                  m.ud ? "RDMA_PS_UDP" : "RDMA_PS_TCP", is_ud(id) ? "RDMA_PS_UDP" : "RDMA_PS_TCP");
        CmMsg rej = our_msg(*this, id, MsgType::kRej, 0, nullptr, 0);
        rej.ud = m.ud;
        send_msg(id, rej);
        remove_id(*this, id);
        delete id;
        return;
      }
      id->peer = m;
      id->have_peer = true;
      std::memcpy(id->id.route.addr.addr.ibaddr.dgid.raw, m.gid, 16);
      learn_peer(*this, m);  // before any QP, ours or the app's (rping -q), goes to RTR
      // The passive side answers with what the active side asked (its depth is our
      // responder resources and the other way round), unless rdma_accept says otherwise.
      id->responder_resources = m.initiator_depth;
      id->initiator_depth = m.responder_resources;
      id->retry_count = m.retry_count;
      id->rnr_retry_count = m.rnr_retry_count;
      if (!id->listener) {  // the listener went away meanwhile
        remove_id(*this, id);
        delete id;
        return;
      }
      id->st = St::kReqRcvd;
      id->handed = true;
      post(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &m);
      return;
    case MsgType::kRep:
      if (id->st != St::kReqSent) break;
      id->peer = m;
      id->have_peer = true;
      std::memcpy(id->id.route.addr.addr.ibaddr.dgid.raw, m.gid, 16);
      learn_peer(*this, m);  // before any QP, ours or the app's (rping -q), goes to RTR
      // An RDMA_PS_UDP id: the peer's QP number is all there is to learn.
      if (is_ud(id)) {
        close_fd(id);
        id->st = St::kEstablished;
        post(id, RDMA_CM_EVENT_ESTABLISHED, 0, &m);
        return;
      }
      if (!id->id.qp) {
        id->st = St::kRepRcvd;
        post(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &m);
        return;
      }
      if (connect_qp(*this, id)) {
        CmMsg rej = our_msg(*this, id, MsgType::kRej, id->id.qp->qp_num, nullptr, 0);
        send_msg(id, rej);
        close_fd(id);
        id->st = St::kFailed;
        post(id, RDMA_CM_EVENT_CONNECT_ERROR, -errno);
        return;
      }
      send_msg(id, our_msg(*this, id, MsgType::kRtu, id->id.qp->qp_num, nullptr, 0));
      id->st = St::kEstablished;
      post(id, RDMA_CM_EVENT_ESTABLISHED, 0, &m);
      return;
    case MsgType::kRtu:
      if (id->st != St::kRepSent) break;
      id->st = St::kEstablished;
      post(id, RDMA_CM_EVENT_ESTABLISHED, 0);
      return;
    case MsgType::kRej:
      if (id->st != St::kReqSent && id->st != St::kRepSent) break;
      close_fd(id);
      id->st = St::kRejected;
      // A refused RDMA_PS_UDP request is UNREACHABLE with the SIDR status, as the kernel's CM
      // reports it.
      if (is_ud(id))
        post(id, RDMA_CM_EVENT_UNREACHABLE, MRC_CM_SIDR_REJECT, &m);
      else
        post(id, RDMA_CM_EVENT_REJECTED, MRC_CM_REJ_CONSUMER_DEFINED, &m);
      return;
    case MsgType::kDreq: {
      const bool was = id->st == St::kEstablished || id->st == St::kDisconnecting;
      send_msg(id, our_msg(*this, id, MsgType::kDrep, 0, nullptr, 0));
      close_fd(id);
      if (was || id->st == St::kRepSent) disconnected(id);
      return;
    }
    case MsgType::kDrep:
      if (id->st != St::kDisconnecting) break;
      close_fd(id);
      disconnected(id);
      return;
  }
  log_error("rdma_cm: unexpected message %d from %s in state %d: ignored", static_cast<int>(m.type),
            addr_str(&id->id.route.addr.dst_addr).c_str(), static_cast<int>(id->st));
}

bool family_ok(const sockaddr* a) {
  return a && (a->sa_family == AF_INET || a->sa_family == AF_INET6);
}

// Binds the id's socket to `addr` (a copy of it lands in route.addr.src with the port the
// kernel chose); attaches mrc0. Under s.mu.
int bind_locked(Service& s, Id* id, const sockaddr* addr) {
  if (!family_ok(addr))
    return minus_one(fail(EAFNOSUPPORT, "rdma_bind_addr: only IPv4 and IPv6 addresses (family %d)",
                          addr ? addr->sa_family : -1));
  if (id->fd >= 0) return minus_one(fail(EINVAL, "rdma_bind_addr: the id is bound already"));
  if (!context(s)) return -1;
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  // Listeners restart on their port while the last run's connections are in TIME_WAIT.
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (addr->sa_family == AF_INET6)
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &id->afonly, sizeof id->afonly);
  if (::bind(fd, addr, addr_len(addr)) != 0) {
    const int e = errno;
    ::close(fd);
    return minus_one(fail(e, "rdma_bind_addr: %s: %s", addr_str(addr).c_str(), std::strerror(e)));
  }
  socklen_t n = sizeof(sockaddr_storage);
  ::getsockname(fd, &id->id.route.addr.src_addr, &n);
  id->fd = fd;
  attach_device(s, &id->id);
  if (id->st == St::kIdle) id->st = St::kBound;
  return 0;
}

}  // namespace

rdma_event_channel* create_event_channel() {
  auto* c = new Channel;
  c->ch.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (c->ch.fd < 0) {
    delete c;
    return nullptr;
  }
  Service& s = svc();
  std::lock_guard l(s.mu);
  start_service(s);
  return &c->ch;
}

// A thread still inside rdma_get_cm_event (rping's CM thread, which the program abandons at
// exit) keeps the channel: with librdmacm it stays blocked in the kernel's read, so here the
// eventfd stays open and the object alive for it, and it blocks until the process ends,
// rather than reading a closed descriptor or freed memory (which made rping exit with
// "rdma_get_cm_event: Bad file descriptor", or crash, about once in 40 runs).
void destroy_event_channel(rdma_event_channel* channel) {
  if (!channel) return;
  Channel* c = chan_of(channel);
  {
    std::lock_guard l(c->mu);
    for (rdma_cm_event* e : c->queue) delete reinterpret_cast<Event*>(e);
    c->queue.clear();
    if (c->readers > 0) {
      c->destroyed = true;
      return;
    }
  }
  ::close(c->ch.fd);
  delete c;
}

int create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps) {
  if (!out) return minus_one(fail(EINVAL, "rdma_create_id: no place for the id"));
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP)
    return minus_one(fail(EPROTONOSUPPORT,
                          "rdma_create_id: port space 0x%x: mrc0 has RDMA_PS_TCP (RC QPs) and "
                          "RDMA_PS_UDP (UD QPs) only",
                          static_cast<unsigned>(ps)));
  // No channel: a synchronous id with a channel of its own, whose calls wait for their event.
  const bool sync = !channel;
  if (sync && !(channel = create_event_channel())) return -1;
  Service& s = svc();
  std::lock_guard l(s.mu);
  start_service(s);
  auto* id = new Id;
  id->sync = id->own_channel = sync;
  id->serial = s.next_serial++;
  id->id.channel = channel;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  id->psn = random_psn();
  s.ids[id->serial] = id;
  *out = &id->id;
  return 0;
}

int destroy_id(rdma_cm_id* cm) {
  if (!cm) return minus_one(fail(EINVAL, "rdma_destroy_id: no id"));
  if (cm->event) {  // a synchronous id's last event (wait_for, get_request)
    ack_cm_event(cm->event);
    cm->event = nullptr;
  }
  Service& s = svc();
  std::unique_lock l(s.mu);
  Id* id = id_of(cm);
  for (Id::Group& g : id->groups)  // rdma_leave_multicast of what the app did not leave
    if (g.attached && cm->qp) verbs::detach_mcast(cm->qp, &g.mgid, 0);
  id->groups.clear();
  const bool polled = id->fd >= 0;
  // Events not fetched yet that name it would point at freed memory: its own, and the
  // CONNECT_REQUESTs it listened for (listen_id), whose connections go with it since the app
  // has not seen them (the peer sees its TCP connection close: CONNECT_ERROR or UNREACHABLE).
  std::vector<Id*> orphans;
  Channel* c = chan_of(cm->channel);
  {
    std::lock_guard cl(c->mu);
    size_t erased = 0;
    std::erase_if(c->queue, [&](rdma_cm_event* e) {
      const bool mine = e->id == cm || e->listen_id == cm;
      if (e->listen_id == cm && e->id != cm) orphans.push_back(id_of(e->id));
      if (mine) {
        delete reinterpret_cast<Event*>(e);
        ++erased;
      }
      return mine;
    });
    // Their counts leave the channel's eventfd too, or a program polling it sees it readable
    // and then blocks in rdma_get_cm_event. With no thread inside rdma_get_cm_event the count
    // is the queue's exactly (events are posted under the service lock, held here), so these
    // reads do not block; a thread inside skips such empty wakeups itself.
    if (c->readers == 0)
      for (uint64_t v; erased > 0; --erased)
        [[maybe_unused]] ssize_t n = ::read(c->ch.fd, &v, sizeof v);
  }
  // A listener takes the connections the app has not seen with it.
  for (auto& [_, other] : s.ids)
    if (other->listener == id && !other->handed) orphans.push_back(other);
  for (Id* o : orphans) {
    remove_id(s, o);
    delete o;
  }
  remove_id(s, id);
  destroy_made_cqs(id);
  if (id->own_channel) destroy_event_channel(cm->channel);
  delete id;
  if (polled) {
    // A poll in progress holds the closed socket (and its port) until it returns: wait for
    // the round, so the port is free when rdma_destroy_id returns.
    const uint64_t r = s.rounds;
    s.poke();
    s.round_done.wait(l, [&] { return s.rounds > r; });
  }
  return 0;
}

int bind_addr(rdma_cm_id* cm, sockaddr* addr) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  return bind_locked(s, id_of(cm), addr);
}

int resolve_addr(rdma_cm_id* cm, sockaddr* src, sockaddr* dst, int) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (!family_ok(dst))
    return minus_one(
        fail(EAFNOSUPPORT, "rdma_resolve_addr: the destination must be an IPv4 or IPv6 address"));
  // As the kernel's: an id bound already (rdma_bind_addr) keeps its address; src is not used.
  if (src && id->fd < 0 && bind_locked(s, id, src)) return -1;
  if (!context(s)) return -1;
  std::memcpy(&cm->route.addr.dst_storage, dst, addr_len(dst));
  // The source address the kernel would use toward dst (a UDP socket's connect routes it);
  // no route is ADDR_ERROR, as librdmacm reports it.
  if (id->fd < 0) {
    const int u = ::socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (u >= 0 && ::connect(u, dst, addr_len(dst)) != 0) {
      const int e = errno;
      ::close(u);
      log_error("rdma_resolve_addr: no route to %s (%s)", addr_str(dst).c_str(), std::strerror(e));
      post(id, RDMA_CM_EVENT_ADDR_ERROR, -e);
      return 0;
    }
    socklen_t n = sizeof(sockaddr_storage);
    ::getsockname(u, &cm->route.addr.src_addr, &n);
    if (cm->route.addr.src_addr.sa_family == AF_INET)
      cm->route.addr.src_sin.sin_port = 0;
    else
      cm->route.addr.src_sin6.sin6_port = 0;
    ::close(u);
  }
  attach_device(s, cm);
  id->st = St::kAddrResolved;
  post(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  return 0;
}

int resolve_route(rdma_cm_id* cm, int) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (id->st != St::kAddrResolved)
    return minus_one(
        fail(EINVAL, "rdma_resolve_route: resolve the address first (rdma_resolve_addr)"));
  id->st = St::kRouteResolved;
  post(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return 0;
}

int listen(rdma_cm_id* cm, int backlog) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (id->st == St::kIdle) {  // as librdmacm: an unbound id listens on every address
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    if (bind_locked(s, id, reinterpret_cast<sockaddr*>(&any))) return -1;
  }
  if (id->st != St::kBound)
    return minus_one(fail(EINVAL, "rdma_listen: the id is not bound to an address"));
  if (::listen(id->fd, backlog > 0 ? backlog : 128) != 0)
    return minus_one(fail(errno, "rdma_listen: %s: %s", addr_str(&cm->route.addr.src_addr).c_str(),
                          std::strerror(errno)));
  id->st = St::kListening;
  s.poke();
  return 0;
}

namespace {
int connect_async(rdma_cm_id* cm, rdma_conn_param* p) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (id->st != St::kRouteResolved)
    return minus_one(fail(EINVAL, "rdma_connect: resolve the address and the route first"));
  const uint8_t most = is_ud(id) ? kSidrReqPrivate : kReqPrivate;
  if (p && p->private_data_len > most)
    return minus_one(fail(EINVAL, "rdma_connect: %u bytes of private data, at most %u in a request",
                          p->private_data_len, most));
  // An RDMA_PS_UDP id asks for the peer's QP number: it needs no QP of its own to do so.
  if (!is_ud(id) && !cm->qp && (!p || p->qp_num == 0))
    return minus_one(fail(EINVAL, "rdma_connect: no QP on the id and no qp_num in the parameters"));
  if (p) {
    id->responder_resources = p->responder_resources;
    id->initiator_depth = p->initiator_depth;
    id->retry_count = p->retry_count;
    id->rnr_retry_count = p->rnr_retry_count;
  }
  const uint32_t qpn = cm->qp ? cm->qp->qp_num : p ? p->qp_num : 0;
  id->out = our_msg(s, id, MsgType::kReq, qpn, p ? p->private_data : nullptr,
                    p ? p->private_data_len : 0);
  id->deadline = Clock::now() + kConnectTimeout;
  id->refused_until = Clock::now() + kRefusedRetry;
  id->st = St::kConnecting;
  try_connect(id);  // errors are reported as events, as librdmacm does
  s.poke();
  return 0;
}

int accept_async(rdma_cm_id* cm, rdma_conn_param* p) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (id->st == St::kFailed)
    return minus_one(fail(ECONNRESET, "rdma_accept: the peer went away before the accept"));
  if (id->st != St::kReqRcvd)
    return minus_one(fail(EINVAL, "rdma_accept: no connection request on this id"));
  const uint8_t most = is_ud(id) ? kSidrRepPrivate : kRepPrivate;
  if (p && p->private_data_len > most)
    return minus_one(fail(EINVAL, "rdma_accept: %u bytes of private data, at most %u in a reply",
                          p->private_data_len, most));
  if (!cm->qp && (!p || p->qp_num == 0))
    return minus_one(fail(EINVAL, "rdma_accept: no QP on the id and no qp_num in the parameters"));
  if (p) {
    id->responder_resources = p->responder_resources;
    id->initiator_depth = p->initiator_depth;
    if (p->rnr_retry_count) id->rnr_retry_count = p->rnr_retry_count;
  }
  if (cm->qp && !is_ud(id) && connect_qp(s, id)) return -1;
  const uint32_t qpn = cm->qp ? cm->qp->qp_num : p->qp_num;
  if (!send_msg(id, our_msg(s, id, MsgType::kRep, qpn, p ? p->private_data : nullptr,
                            p ? p->private_data_len : 0))) {
    peer_gone(s, id, ECONNRESET);
    return minus_one(fail(ECONNRESET, "rdma_accept: the peer went away"));
  }
  if (is_ud(id)) {  // the peer has our QP number: nothing follows (no RTU, no ESTABLISHED here)
    close_fd(id);
    id->st = St::kEstablished;
    return 0;
  }
  id->st = St::kRepSent;
  id->deadline = Clock::now() + kHandshakeTimeout;
  return 0;
}

// A synchronous id's call waits for the event it starts (not under the CM lock): 0 when it is
// `want`, else -1 with errno from the event (REJECTED: ECONNREFUSED).
// The event stays in id->event until the next one or rdma_destroy_id, as librdmacm keeps it:
// programs read the peer's private data there (id->event->param.conn).
void hold_event(rdma_cm_id* cm, rdma_cm_event* e) {
  if (cm->event) ack_cm_event(cm->event);
  cm->event = e;
}

int wait_for(rdma_cm_id* cm, rdma_cm_event_type want) {
  rdma_cm_event* e = nullptr;
  if (get_cm_event(cm->channel, &e)) return -1;
  const rdma_cm_event_type got = e->event;
  const int status = e->status;
  hold_event(cm, e);
  if (got == want) return 0;
  errno = got == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : status < 0 ? -status : EIO;
  return -1;
}
}  // namespace

int connect(rdma_cm_id* cm, rdma_conn_param* p) {
  if (connect_async(cm, p)) return -1;
  return id_of(cm)->sync ? wait_for(cm, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int accept(rdma_cm_id* cm, rdma_conn_param* p) {
  if (accept_async(cm, p)) return -1;
  return id_of(cm)->sync ? wait_for(cm, RDMA_CM_EVENT_ESTABLISHED) : 0;
}

int reject(rdma_cm_id* cm, const void* pd, uint8_t len) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (id->st != St::kReqRcvd && id->st != St::kRepRcvd)
    return minus_one(fail(EINVAL, "rdma_reject: no connection request or reply to refuse"));
  if (len > kRejPrivate)
    return minus_one(
        fail(EINVAL, "rdma_reject: %u bytes of private data, at most %u", len, kRejPrivate));
  send_msg(id, our_msg(s, id, MsgType::kRej, cm->qp ? cm->qp->qp_num : 0, pd, len));
  close_fd(id);
  id->st = St::kRejected;
  return 0;
}

int establish(rdma_cm_id* cm) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (id->st != St::kRepRcvd)
    return minus_one(fail(EINVAL, "rdma_establish: no connection response to complete"));
  if (!send_msg(id, our_msg(s, id, MsgType::kRtu, id->peer.qpn, nullptr, 0))) {
    peer_gone(s, id, ECONNRESET);
    return minus_one(fail(ECONNRESET, "rdma_establish: the peer went away"));
  }
  id->st = St::kEstablished;  // as librdmacm: only the passive side hears ESTABLISHED
  return 0;
}

int disconnect(rdma_cm_id* cm) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (is_ud(id))
    return minus_one(fail(EINVAL, "rdma_disconnect: an RDMA_PS_UDP id has no connection"));
  if (cm->qp) {  // flushes what is posted, as librdmacm does
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    modify_qp(cm->qp, &a, IBV_QP_STATE);
  }
  switch (id->st) {
    case St::kEstablished:
    case St::kRepSent:
    case St::kReqSent:
      if (!send_msg(id, our_msg(s, id, MsgType::kDreq, 0, nullptr, 0))) {
        peer_gone(s, id, ECONNRESET);
        return 0;
      }
      id->st = St::kDisconnecting;
      return 0;
    case St::kDisconnecting:
    case St::kDisconnected:
      return 0;
    default:
      return minus_one(fail(EINVAL, "rdma_disconnect: the id is not connected"));
  }
}

int get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event)
    return minus_one(fail(EINVAL, "rdma_get_cm_event: no channel or no event pointer"));
  Channel* c = chan_of(channel);
  {
    std::lock_guard l(c->mu);
    ++c->readers;
  }
  for (;;) {
    uint64_t v;
    if (::read(c->ch.fd, &v, sizeof v) != sizeof v) {
      if (errno == EINTR) continue;
      const int err = errno;  // EAGAIN on a non-blocking channel
      std::lock_guard l(c->mu);
      --c->readers;
      errno = err;
      return -1;
    }
    std::lock_guard l(c->mu);
    // Empty: its id was destroyed before the event was fetched (or the channel was: then
    // wait on, as a reader blocked in librdmacm's read does).
    if (c->queue.empty()) continue;
    *event = c->queue.front();
    c->queue.pop_front();
    --c->readers;
    return 0;
  }
}

int ack_cm_event(rdma_cm_event* event) {
  if (!event) return minus_one(fail(EINVAL, "rdma_ack_cm_event: no event"));
  delete reinterpret_cast<Event*>(event);
  return 0;
}

namespace {
// Moves a new QP to INIT (an RC QP goes on toward its peer once the exchange names it; a UD
// QP goes on to RTS now, as librdmacm's rdma_create_qp takes it); the id keeps it.
int finish_qp(Service& s, Id* id, ibv_qp* qp, ibv_pd* pd) {
  if (!qp) return -1;
  for (ibv_qp_state st : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
    if (st != IBV_QPS_INIT && !is_ud(id)) break;
    ibv_qp_attr a;
    int mask = 0;
    qp_attr(s, id, st, &a, &mask);
    if (const int r = modify_qp(qp, &a, mask)) {
      verbs::destroy_qp(qp);
      errno = r;
      return -1;
    }
  }
  id->id.qp = qp;
  id->id.pd = pd;
  return 0;
}

}  // namespace

namespace {
// What rdma_create_qp and rdma_create_qp_ex check before making the QP on `pd` (null: the
// context's default PD, written back); 0 or -1 with errno.
int check_qp(Service& s, rdma_cm_id* cm, const char* fn, bool has_attr, ibv_pd** pd, int qp_type) {
  if (!cm->verbs)
    return minus_one(fail(EINVAL, "%s: the id has no device yet (bind or resolve it first)", fn));
  if (!has_attr) return minus_one(fail(EINVAL, "%s: no attributes", fn));
  if (cm->qp) return minus_one(fail(EINVAL, "%s: the id has a QP already", fn));
  if (!*pd) *pd = default_pd(s);
  if (!*pd || (*pd)->context != cm->verbs)
    return minus_one(fail(EINVAL, "%s: the PD is not of the id's device (mrc0)", fn));
  if (qp_type != cm->qp_type)
    return minus_one(fail(EINVAL, "%s: QP type %d: an %s id takes %s QPs", fn, qp_type,
                          cm->ps == RDMA_PS_UDP ? "RDMA_PS_UDP" : "RDMA_PS_TCP",
                          cm->qp_type == IBV_QPT_UD ? "UD" : "RC"));
  return 0;
}
}  // namespace

namespace {
// As librdmacm: a QP asked for without CQs gets a send and a receive CQ of its own, each
// with a completion channel (rdma_get_send_comp / rdma_get_recv_comp wait on them).
int make_cqs(Id* id, ibv_cq** send_cq, ibv_cq** recv_cq, const ibv_qp_cap& cap) {
  rdma_cm_id& c = id->id;
  for (bool send : {true, false}) {
    ibv_cq** cq = send ? send_cq : recv_cq;
    if (*cq) continue;
    ibv_comp_channel* ch = create_comp_channel(c.verbs);
    const int depth =
        static_cast<int>(std::max<uint32_t>(send ? cap.max_send_wr : cap.max_recv_wr, 1));
    *cq = ch ? create_cq(c.verbs, depth, &c, ch, 0) : nullptr;
    if (!*cq) {
      if (ch) destroy_comp_channel(ch);
      return -1;
    }
    (send ? c.send_cq_channel : c.recv_cq_channel) = ch;
    id->made_cqs = true;
  }
  return 0;
}

void destroy_made_cqs(Id* id) {
  if (!id->made_cqs) return;
  rdma_cm_id& c = id->id;
  const std::pair<ibv_cq*, ibv_comp_channel*> made[] = {{c.send_cq, c.send_cq_channel},
                                                        {c.recv_cq, c.recv_cq_channel}};
  for (auto [cq, ch] : made) {
    // A CQ still in use (the app destroyed the id before its QP) keeps its channel: freeing
    // the channel under a live CQ would leave the CQ pointing at freed memory.
    if (cq && ch && destroy_cq(cq) != 0) {
      log_error("rdma_destroy_id: the id's CQ is still in use (destroy its QP first): kept");
      continue;
    }
    if (ch) destroy_comp_channel(ch);
  }
  c.send_cq = c.recv_cq = nullptr;
  c.send_cq_channel = c.recv_cq_channel = nullptr;
  id->made_cqs = false;
}
}  // namespace

int create_qp(rdma_cm_id* cm, ibv_pd* pd, ibv_qp_init_attr* attr) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  if (check_qp(s, cm, "rdma_create_qp", attr, &pd, attr ? attr->qp_type : IBV_QPT_RC)) return -1;
  if (make_cqs(id_of(cm), &attr->send_cq, &attr->recv_cq, attr->cap)) return -1;
  cm->send_cq = attr->send_cq;
  cm->recv_cq = attr->recv_cq;
  return finish_qp(s, id_of(cm), verbs::create_qp(pd, attr), pd);
}

int create_qp_ex(rdma_cm_id* cm, ibv_qp_init_attr_ex* attr) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  ibv_pd* pd = attr && (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr;
  if (check_qp(s, cm, "rdma_create_qp_ex", attr, &pd, attr ? attr->qp_type : IBV_QPT_RC)) return -1;
  attr->pd = pd;
  attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  if (make_cqs(id_of(cm), &attr->send_cq, &attr->recv_cq, attr->cap)) return -1;
  cm->send_cq = attr->send_cq;
  cm->recv_cq = attr->recv_cq;
  return finish_qp(s, id_of(cm), verbs::create_qp_ex(cm->verbs, attr), pd);
}

void destroy_qp(rdma_cm_id* cm) {
  if (!cm) return;
  Service& s = svc();
  std::lock_guard l(s.mu);  // the service thread may be moving it (a REP arriving)
  if (!cm->qp) return;
  verbs::destroy_qp(cm->qp);
  cm->qp = nullptr;
}

namespace {
// The group's GID for a multicast IP address as RoCE v2 has it (an IPv6 address itself, an
// IPv4 one IPv4-mapped); nullopt for another address.
std::optional<ibv_gid> mgid_of(const sockaddr* a) {
  ibv_gid g{};
  if (a && a->sa_family == AF_INET6) {
    std::memcpy(g.raw, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  } else if (a && a->sa_family == AF_INET) {
    g.raw[10] = g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  } else {
    return std::nullopt;
  }
  if (!verbs::is_mcast_gid(g)) return std::nullopt;
  return g;
}

int join(rdma_cm_id* cm, const sockaddr* addr, uint32_t flags, void* context, const char* verb) {
  {
    Service& s = svc();
    std::lock_guard l(s.mu);
    Id* id = id_of(cm);
    const auto mgid = mgid_of(addr);
    if (!mgid)
      return minus_one(fail(EINVAL,
                            "%s: %s is not a multicast address (IPv4 224.0.0.0/4, IPv6 "
                            "ff00::/8)",
                            verb, addr ? addr_str(addr).c_str() : "(null)"));
    if (!is_ud(id)) return minus_one(fail(EINVAL, "%s: multicast needs an RDMA_PS_UDP id", verb));
    if (!cm->verbs)
      return minus_one(fail(EINVAL, "%s: bind the id or resolve an address first", verb));
    if (flags > RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
      return minus_one(
          fail(EINVAL, "%s: join flag %u (FULLMEMBER 0, SENDONLY_FULLMEMBER 1)", verb, flags));
    for (const Id::Group& g : id->groups)
      if (std::memcmp(g.mgid.raw, mgid->raw, 16) == 0)
        return minus_one(
            fail(EADDRINUSE, "%s: the id has joined %s already", verb, addr_str(addr).c_str()));
    // A full member's QP receives the group's datagrams; a send-only one is not attached.
    const bool attach = flags == RDMA_MC_JOIN_FLAG_FULLMEMBER && cm->qp;
    if (attach && verbs::attach_mcast(cm->qp, &*mgid, 0)) return -1;
    id->groups.push_back({*mgid, attach});
    post_mcast(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0, *mgid, context);
  }
  return id_of(cm)->sync ? wait_for(cm, RDMA_CM_EVENT_MULTICAST_JOIN) : 0;
}
}  // namespace

int join_multicast(rdma_cm_id* cm, sockaddr* addr, void* context) {
  if (!cm) return minus_one(fail(EINVAL, "rdma_join_multicast: no id"));
  return join(cm, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context, "rdma_join_multicast");
}

int join_multicast_ex(rdma_cm_id* cm, rdma_cm_join_mc_attr_ex* attr, void* context) {
  constexpr const char* kVerb = "rdma_join_multicast_ex";
  if (!cm || !attr) return minus_one(fail(EINVAL, "%s: null argument", kVerb));
  if (attr->comp_mask & ~uint32_t{RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS})
    return minus_one(fail(EINVAL, "%s: comp_mask 0x%x: ADDRESS (1) and JOIN_FLAGS (2) only", kVerb,
                          attr->comp_mask));
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
    return minus_one(fail(EINVAL, "%s: comp_mask needs RDMA_CM_JOIN_MC_ATTR_ADDRESS", kVerb));
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS))
    return minus_one(fail(EINVAL, "%s: comp_mask needs RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS", kVerb));
  return join(cm, attr->addr, attr->join_flags, context, kVerb);
}

int leave_multicast(rdma_cm_id* cm, sockaddr* addr) {
  if (!cm) return minus_one(fail(EINVAL, "rdma_leave_multicast: no id"));
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  const auto mgid = mgid_of(addr);
  auto it = std::find_if(id->groups.begin(), id->groups.end(), [&](const Id::Group& g) {
    return mgid && std::memcmp(g.mgid.raw, mgid->raw, 16) == 0;
  });
  if (it == id->groups.end())  // librdmacm's errno for a group the id has not joined
    return minus_one(fail(EADDRNOTAVAIL, "rdma_leave_multicast: the id has not joined %s",
                          addr ? addr_str(addr).c_str() : "(null)"));
  if (it->attached && cm->qp) verbs::detach_mcast(cm->qp, &it->mgid, 0);
  id->groups.erase(it);
  return 0;
}

int init_qp_attr(rdma_cm_id* cm, ibv_qp_attr* attr, int* mask) {
  if (!cm || !attr || !mask) return minus_one(fail(EINVAL, "rdma_init_qp_attr: null argument"));
  Service& s = svc();
  std::lock_guard l(s.mu);
  if (!s.ctx) return minus_one(fail(EINVAL, "rdma_init_qp_attr: the id has no device yet"));
  return qp_attr(s, id_of(cm), attr->qp_state, attr, mask);
}

int migrate_id(rdma_cm_id* cm, rdma_event_channel* channel) {
  Id* id = id_of(cm);
  rdma_event_channel* made = channel ? nullptr : create_event_channel();
  if (!channel && !made) return -1;
  Service& s = svc();
  std::lock_guard l(s.mu);
  rdma_event_channel* old = cm->channel;
  const bool owned = id->own_channel;
  cm->channel = channel ? channel : made;
  id->own_channel = made != nullptr;
  if (owned) destroy_event_channel(old);
  return 0;
}

int set_option(rdma_cm_id* cm, int level, int name, void* val, size_t len) {
  Service& s = svc();
  std::lock_guard l(s.mu);
  Id* id = id_of(cm);
  if (level == RDMA_OPTION_ID && name == RDMA_OPTION_ID_REUSEADDR && val && len == sizeof(int))
    return 0;  // every CM socket reuses its address already (bind_locked)
  if (level == RDMA_OPTION_ID && name == RDMA_OPTION_ID_AFONLY && val && len == sizeof(int)) {
    id->afonly = *static_cast<int*>(val) ? 1 : 0;
    return 0;
  }
  if (level == RDMA_OPTION_ID && name == RDMA_OPTION_ID_ACK_TIMEOUT && val && len == 1) {
    id->ack_timeout = *static_cast<uint8_t*>(val);
    return 0;
  }
  if (level == RDMA_OPTION_ID && name == RDMA_OPTION_ID_TOS && val && len == sizeof(uint8_t)) {
    id->tos = *static_cast<uint8_t*>(val);  // the QP's traffic class at RTR (qp_attr)
    return 0;
  }
  return minus_one(fail(EINVAL,
                        "rdma_set_option: level %d option %d (length %zu) is not one mrc0 takes",
                        level, name, len));
}

uint16_t get_src_port(rdma_cm_id* cm) {
  std::lock_guard l(svc().mu);  // the service thread fills the source in when connected
  const sockaddr* a = &cm->route.addr.src_addr;
  return a->sa_family == AF_INET ? cm->route.addr.src_sin.sin_port
                                 : cm->route.addr.src_sin6.sin6_port;
}

uint16_t get_dst_port(rdma_cm_id* cm) {
  std::lock_guard l(svc().mu);
  const sockaddr* a = &cm->route.addr.dst_addr;
  return a->sa_family == AF_INET ? cm->route.addr.dst_sin.sin_port
                                 : cm->route.addr.dst_sin6.sin6_port;
}

const char* event_str(rdma_cm_event_type e) {
  static const char* const names[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  const auto i = static_cast<size_t>(e);
  return i < sizeof names / sizeof names[0] ? names[i] : "UNKNOWN EVENT";
}

int getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                rdma_addrinfo** res) {
  const bool hinted_src = hints && hints->ai_src_addr && hints->ai_src_len;
  if (!res || (!node && !service && !hinted_src))
    return minus_one(fail(EINVAL,
                          "rdma_getaddrinfo: give a node, a service or a source address in the "
                          "hints, and a result pointer"));
  const int ps = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP)
    return minus_one(fail(EPROTONOSUPPORT,
                          "rdma_getaddrinfo: port space 0x%x: mrc0 has RDMA_PS_TCP and "
                          "RDMA_PS_UDP only",
                          static_cast<unsigned>(ps)));
  const bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
  // As librdmacm: a source address in the hints comes back as the result's (pyverbs'
  // AddrInfo(src=, dst=) resolves src first and passes it so), alone when there is nothing
  // else to resolve.
  auto take_hinted_src = [&](rdma_addrinfo* out) {
    if (!hinted_src) return;
    out->ai_src_addr = static_cast<sockaddr*>(std::calloc(1, hints->ai_src_len));
    std::memcpy(out->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
    out->ai_src_len = hints->ai_src_len;
  };
  if (!node && !service) {
    auto* out = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    out->ai_family = hints->ai_src_addr->sa_family;
    out->ai_qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
    out->ai_port_space = ps;
    take_hinted_src(out);
    *res = out;
    return 0;
  }
  addrinfo h{};
  h.ai_socktype = SOCK_STREAM;
  h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
  if (passive) h.ai_flags |= AI_PASSIVE;
  if (hints && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  if (const int r = ::getaddrinfo(node, service, &h, &ai); r != 0) {
    errno = r == EAI_SYSTEM ? errno : ENOENT;
    return r;
  }
  auto* out = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  auto* addr = static_cast<sockaddr*>(std::calloc(1, ai->ai_addrlen));
  std::memcpy(addr, ai->ai_addr, ai->ai_addrlen);
  out->ai_flags = passive ? RAI_PASSIVE : 0;
  out->ai_family = ai->ai_family;
  out->ai_qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  out->ai_port_space = ps;
  if (passive) {
    out->ai_src_addr = addr;
    out->ai_src_len = ai->ai_addrlen;
  } else {
    out->ai_dst_addr = addr;
    out->ai_dst_len = ai->ai_addrlen;
    take_hinted_src(out);
  }
  ::freeaddrinfo(ai);
  *res = out;
  return 0;
}

void freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

int create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!out || !res) return minus_one(fail(EINVAL, "rdma_create_ep: no id pointer or no address"));
  rdma_cm_id* cm = nullptr;
  const auto ps =
      res->ai_port_space ? static_cast<rdma_port_space>(res->ai_port_space) : RDMA_PS_TCP;
  if (create_id(nullptr, &cm, nullptr, ps)) return -1;
  // As librdmacm: the QP's type is the address's (rdma_getaddrinfo gives RC).
  if (attr)
    attr->qp_type = res->ai_qp_type ? static_cast<ibv_qp_type>(res->ai_qp_type) : IBV_QPT_RC;
  int r = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    r = bind_addr(cm, res->ai_src_addr);
    if (!r && attr) {  // the QP of each connection rdma_get_request hands out
      std::lock_guard l(svc().mu);
      id_of(cm)->has_ep_attr = true;
      id_of(cm)->ep_attr = *attr;
      id_of(cm)->ep_pd = pd;
    }
  } else {
    r = resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (!r) r = wait_for(cm, RDMA_CM_EVENT_ADDR_RESOLVED);
    if (!r) r = resolve_route(cm, 2000);
    if (!r) r = wait_for(cm, RDMA_CM_EVENT_ROUTE_RESOLVED);
    if (!r && attr) r = create_qp(cm, pd, attr);
  }
  if (r) {
    const int e = errno;
    destroy_ep(cm);
    errno = e;
    return -1;
  }
  *out = cm;
  return 0;
}

int get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out || !id_of(listen)->sync)
    return minus_one(fail(EINVAL, "rdma_get_request: needs a listening id made by rdma_create_ep"));
  rdma_cm_event* e = nullptr;
  if (get_cm_event(listen->channel, &e)) return -1;
  const rdma_cm_event_type got = e->event;
  rdma_cm_id* child = e->id;
  if (got == RDMA_CM_EVENT_CONNECT_REQUEST) {
    hold_event(child, e);  // the request's private data, as librdmacm leaves it
  } else {
    ack_cm_event(e);
  }
  if (got != RDMA_CM_EVENT_CONNECT_REQUEST) {
    errno = EIO;
    return minus_one(
        fail(EIO, "rdma_get_request: %s instead of a connection request", event_str(got)));
  }
  if (migrate_id(child, nullptr)) return -1;  // a synchronous id of its own
  ibv_qp_init_attr attr{};
  ibv_pd* pd = nullptr;
  {
    std::lock_guard l(svc().mu);
    id_of(child)->sync = true;
    if (id_of(listen)->has_ep_attr) {
      attr = id_of(listen)->ep_attr;
      pd = id_of(listen)->ep_pd;
    }
  }
  if (id_of(listen)->has_ep_attr && create_qp(child, pd, &attr)) {
    const int err = errno;
    reject(child, nullptr, 0);
    destroy_id(child);
    errno = err;
    return -1;
  }
  *out = child;
  return 0;
}

void destroy_ep(rdma_cm_id* cm) {
  if (!cm) return;
  destroy_qp(cm);
  destroy_id(cm);  // with the CQs and channels rdma_create_qp made
}

}  // namespace mrc::verbs::cm
