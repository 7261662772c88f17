#include "net.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "control.h"
#include "knobs.h"
#include "mrc/common/netns.h"
#include "mrc/engine/engine.h"
#include "mrc/engine/policy.h"
#include "mrc/io/config.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/observe/publisher.h"
#include "mrc/version.h"

namespace mrc::nccl {

using engine::Completion;
using engine::Engine;
using engine::WcOpcode;
using engine::WcStatus;

struct Connecting;

namespace {

// wr_id tags: which of a comm's posted work a completion belongs to.
constexpr uint64_t kCtsRecv = 1ull << 62;    // | ring slot: a CTS record arrived (sender)
constexpr uint64_t kCtsSend = 1ull << 61;    // a CTS record sent (receiver; errors only)
constexpr uint64_t kImmRecv = 1ull << 60;    // a WRITE_IMM arrived (receiver)
constexpr int kCtsSlots = 2 * kMaxRequests;  // CTS receives the sender keeps
constexpr size_t kCtsEntry = 20;             // addr u64, rkey u32, size u32, tag i32
constexpr size_t kCtsHeader = 12;            // seq u32, n u32, eager slots freed u32
constexpr size_t kCtsBytes = kCtsHeader + kCtsEntry * kMaxRecvs;  // 172 <= engine::kMaxInline
constexpr size_t kCtsSlotBytes = 256;
constexpr int kImmRecvs = 2 * kMaxRequests * kMaxRecvs;  // receives posted for WRITE_IMMs
constexpr int kSendRequests = kMaxRequests * kMaxRecvs;  // a send comm's requests in flight
constexpr uint32_t kSeqMask = (1u << 28) - 1;            // imm = (seq << 3) | buffer index
constexpr uint32_t kEagerImm = 1u << 31;                  // imm = kEagerImm | eager ring slot
constexpr uint32_t kEagerSlots = 8;  // a receive comm's eager ring: NCCL keeps 8 steps in flight
constexpr uint32_t kEagerTag = 4;    // a slot: the message's tag (i32), then the message
constexpr auto kPeerCheckEvery = std::chrono::milliseconds(1);
constexpr uint64_t kKeepalive = 1ull << 59;  // a 0-byte WRITE from a waiting receiver
// A receiver waiting this long with nothing arriving sends a 0-byte WRITE, so that a network
// that stays dead fails its QP within the retry budget (its sends are all acknowledged, so
// nothing else would ever time out on its side).
constexpr auto kKeepaliveEvery = std::chrono::milliseconds(100);
static_assert(kCtsBytes <= engine::kMaxInline);

constexpr uint32_t kHandleMagic = 0x6e63726d;  // "mrcn"

// What listen() writes into NCCL's handle; NCCL ships it to the connecting peer.
struct Handle {
  uint32_t magic;
  uint16_t version;
  uint16_t dev;
  sockaddr_in6 addr;  // the listener's control address
  uint64_t listen_id;
  Connecting* connecting;  // connector side: the stage, kept in NCCL's handle
};
static_assert(sizeof(Handle) <= MRC_NCCL_NET_HANDLE_MAXSIZE);

Failure fail(Code c, std::string what) { return Failure{c, std::move(what)}; }
Err<Failure> err(Code c, std::string what) { return Err(fail(c, std::move(what))); }

struct Device {
  std::string name;
  io::HostConfig cfg;
  std::unique_ptr<io::UdpDriver> drv;
  sockaddr_in6 ctrl{};  // where control listeners bind (port 0)
  std::mutex peers_mu;
  std::map<std::string, engine::PeerId> peers;  // by fabric host or plane addresses
};

struct State {
  std::mutex mu;
  int inits = 0;
  Knobs knobs;
  std::vector<std::unique_ptr<Device>> devices;
  std::mt19937_64 rng{std::random_device{}()};
};
State& state() {
  static State s;  // torn down when the library is unloaded (or the process exits)
  return s;
}
std::atomic<mrcNcclLogger> g_logger{nullptr};

uint64_t random64() {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.rng();
}

// Makes a socket-owning call inside the device's network namespace, if it has one.
template <class F>
auto in_device_netns(const Device& d, F&& f) -> decltype(f()) {
  if (d.cfg.udp.netns.empty()) return f();
  return mrc::in_netns(d.cfg.udp.netns, std::forward<F>(f));
}

}  // namespace

struct Request {
  Comm* comm = nullptr;
  bool busy = false;
  bool done = false;
  int n = 1;
  uint32_t seq = 0;
  uint8_t pending = 0;    // receive: buffers still waiting for their WRITE_IMM
  uint8_t qp = 0;         // send: index of the QP its WRITE_IMM went on
  bool unplaced = false;  // send: eager, and no CTS record has placed it yet (not done before)
  uint32_t eager_no = 0;  // send, eager: its number among the comm's eager sends
  uint64_t write_no = 0;  // send: position of its WRITE_IMM among that QP's
  std::array<size_t, kMaxRecvs> sizes{};
  // receive: each buffer as irecv gave it (an eager message is copied there; net.h).
  std::array<uint64_t, kMaxRecvs> addrs{};
  std::array<size_t, kMaxRecvs> caps{};
  std::array<int32_t, kMaxRecvs> tags{};
};

struct MemHandle {
  Device* dev = nullptr;
  uint32_t key = 0;  // 0: an empty registration
  uint64_t addr = 0, len = 0;
};

struct Cts {  // a receive the peer posted, as its CTS record describes it
  struct Entry {
    uint64_t addr = 0;
    uint32_t rkey = 0, size = 0;
    int32_t tag = 0;
  };
  bool valid = false;
  uint32_t seq = 0;
  int n = 0;
  uint8_t used = 0;  // buffers already sent to
  std::array<Entry, kMaxRecvs> e{};
};

// An eager message a comm keeps track of: its tag and size, and `at`, the sender's request
// (send comm: sent, not yet placed) or its ring slot (receive comm: arrived, not yet copied).
struct EagerMsg {
  int32_t tag = 0;
  uint32_t size = 0;
  uint32_t at = 0;
};

struct Comm {
  enum class Role : uint8_t { kSend, kRecv } role = Role::kSend;
  Device* dev = nullptr;
  Stream ctrl;
  std::string peer;  // for logs
  std::vector<engine::Qpn> qps;  // NCCL_MRC_QPS_PER_CONN of them; [0] also carries CTS records
  engine::CqId cq = 0;           // every QP's completions
  uint32_t token = 0;
  // The comm's protection domain: its QPs use, and its peer reaches, only the memory
  // registered on this comm (regMr's comm), not another comm's buffers.
  uint32_t pd = 0;
  bool broken = false;
  Failure failure;
  bool peer_closed = false;
  std::chrono::steady_clock::time_point next_peer_check{};
  uint64_t activity_seen = ~0ull;                      // UdpDriver::activity() at the last CQ drain
  std::chrono::steady_clock::time_point last_heard{};  // receive comm: last completion or keepalive
  std::vector<Request> reqs;
  std::vector<uint32_t> free_reqs;  // send comm
  // Send comm.
  std::vector<uint8_t> cts_ring;  // kCtsSlots x kCtsSlotBytes, registered
  uint32_t cts_key = 0;
  uint32_t cts_expected = 0;  // seq of the next CTS record
  std::array<Cts, kMaxRequests> cts{};
  uint32_t send_seq = 0;                // receive the next isend goes to
  uint64_t sends = 0;                   // isends posted: the next goes to qps[sends % size]
  std::vector<uint64_t> writes_posted;  // per QP
  // Eager sends (net.h): the peer's ring (its slots' size; a receive comm's own ring's too),
  // the largest message sent there (0: none), slots written and freed (the peer's count, from
  // its CTS records), the tag word of each slot's
  // message (registered: a WRITE_IMM's first gather entry), and the eager sends not yet
  // placed in a receive (oldest first): placed as their CTS records come.
  uint64_t eager_addr = 0;
  uint32_t eager_rkey = 0, eager_slot_bytes = 0, eager_max = 0;
  uint32_t eager_posted = 0, eager_freed = 0;
  // CTS records came, and none for a grouped receive: eager sends only then. A grouped
  // receive's sends may come in any order of tags (NCCL's proxy retries a tag that the current
  // receive has no buffer for), which only its CTS record can sort out.
  bool cts_seen = false, grouped_seen = false;
  std::array<int32_t, kEagerSlots> eager_tags{};
  uint32_t eager_tags_key = 0;
  std::deque<EagerMsg> unplaced;
  // Receive comm.
  uint32_t recv_seq = 0;
  std::vector<uint64_t> writes_received;  // per QP (each delivers its WRITE_IMMs in order)
  // Eager messages (net.h): the ring the sender writes them to (kEagerSlots slots of
  // kEagerTag + eager_max bytes, registered), those arrived and not yet copied to a receive
  // (in order), slots freed (copied out: each CTS record says how many), and
  // the receive the next message fills (all before it are full).
  std::vector<uint8_t> eager_ring;
  uint32_t eager_ring_key = 0;
  std::deque<EagerMsg> arrived;
  uint32_t match_seq = 0;
  bool closing = false;  // close_recv: messages are matched and counted, never copied

  void break_with(Code c, std::string what) {
    if (broken) return;
    broken = true;
    failure = fail(c, dev->name + " " + (role == Role::kSend ? "send" : "recv") + " comm to " +
                          peer + ": " + std::move(what));
  }
};

struct ListenComm {
  // An accepted TCP connection. Its comm (CQ, QP) is made only once its HELLO names this
  // listen comm, so strangers' connections cost a socket; at most kMaxAccepting wait (the
  // oldest silent one goes for a new one), each for kHelloTimeout at most.
  struct Accepting {
    Stream ctrl;                 // until HELLO; then the comm's
    std::unique_ptr<Comm> comm;  // from HELLO on
    std::chrono::steady_clock::time_point since;
  };
  static constexpr size_t kMaxAccepting = 256;
  static constexpr std::chrono::seconds kHelloTimeout{30};
  Device* dev = nullptr;
  UniqueFd fd;
  uint64_t id = 0;
  std::vector<Accepting> pending;
};

struct Connecting {
  std::unique_ptr<Comm> comm;
  sockaddr_in6 to{};
  enum class Stage : uint8_t { kTcp, kReply, kReady } stage = Stage::kTcp;
};

void log(mrcNcclLogLevel level, const std::string& line) {
  if (mrcNcclLogger l = g_logger.load()) {
    l(level, MRC_NCCL_LOG_NET, __FILE__, __LINE__, "NET/MRC : %s", line.c_str());
  } else if (level == mrcNcclLogWarn) {
    std::fprintf(stderr, "NET/MRC : %s\n", line.c_str());
  }
}

namespace {

std::string describe(const Device& d) {
  const io::UdpConfig& u = d.cfg.udp;
  std::string s = d.name + ": " + std::to_string(d.drv->planes()) + " planes, ";
  switch (u.path_mode) {
    case io::PathMode::kSrv6:
      s += "srv6 (fabric host " + std::to_string(u.local_host) + ")";
      break;
    case io::PathMode::kEcmp:
      s += "ecmp";
      break;
    case io::PathMode::kDirect:
      s += "direct";
      break;
  }
  s += ", " + std::to_string(u.engine.nic_bps / 1'000'000'000) + " Gbit/s, ports";
  for (uint16_t p = 0; p < d.drv->planes(); ++p) s += " " + to_string(d.drv->local_address(p));
  s += "; control " + to_string(d.ctrl) + "; config: " + d.cfg.sources;
  return s;
}

Result<std::unique_ptr<Device>, std::string> open_device(uint32_t index, const std::string& file,
                                                         const Knobs& k) {
  io::Getenv env = io::process_env;
  if (!file.empty()) {
    env = [file](const char* n) -> std::optional<std::string> {
      if (std::string_view(n) == "MRC_CONFIG") return file;
      return io::process_env(n);
    };
  }
  auto cfg = io::load_host_config(env);
  if (!cfg.ok()) return Err(cfg.error());
  auto d = std::make_unique<Device>();
  d->name = "mrc" + std::to_string(index);
  d->cfg = std::move(*cfg);
  observe::attach_publisher(d->cfg.udp);  // mrcctl sees the device
  auto drv = io::UdpDriver::create(d->cfg.udp);
  if (!drv.ok()) return Err(drv.error());
  auto mtu = (*drv)->payload_mtu(d->cfg.mtu);
  if (!mtu.ok()) return Err(mtu.error());
  d->cfg.mtu = *mtu;  // the links' largest payload unless the config chose one
  d->drv = std::move(*drv);
  d->drv->start();
  const sockaddr_in6 p0 = d->drv->local_address(0);
  d->ctrl = sockaddr_in6{};
  d->ctrl.sin6_family = AF_INET6;
  if (!k.ctrl_addr.empty()) {
    inet_pton(AF_INET6, k.ctrl_addr.c_str(), &d->ctrl.sin6_addr);
  } else {
    d->ctrl.sin6_addr = p0.sin6_addr;
    d->ctrl.sin6_scope_id = p0.sin6_scope_id;
  }
  if (d->cfg.udp.path_mode != io::PathMode::kSrv6) {
    for (uint16_t p = 0; p < d->drv->planes(); ++p) {
      const sockaddr_in6 a = d->drv->local_address(p);
      if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr))
        return Err(d->name + ": plane " + std::to_string(p) +
                   " is bound to [::]; peers need its address: set \"planes\" in the host config"
                   " (or MRC_PLANES)");
    }
  }
  if (IN6_IS_ADDR_UNSPECIFIED(&d->ctrl.sin6_addr))
    return Err(d->name + ": no control address: set NCCL_MRC_CTRL_ADDR");
  return d;
}

Device* device(int dev) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (dev < 0 || static_cast<size_t>(dev) >= s.devices.size()) return nullptr;
  return s.devices[dev].get();
}

Endpoint local_endpoint(const Comm& c) {
  Endpoint e;
  e.mode = c.dev->cfg.udp.path_mode;
  e.fabric_host = c.dev->cfg.udp.local_host;
  for (uint16_t p = 0; p < c.dev->drv->planes(); ++p)
    e.planes.push_back(c.dev->drv->local_address(p));
  e.qpns = c.qps;
  e.token = c.token;
  e.mtu = c.dev->cfg.mtu;
  if (c.eager_ring_key) {
    e.eager_addr = reinterpret_cast<uint64_t>(c.eager_ring.data());
    e.eager_rkey = c.eager_ring_key;
    e.eager_slots = kEagerSlots;
    e.eager_slot_bytes = c.eager_slot_bytes;
  }
  return e;
}

const char* mode_name(io::PathMode m) {
  return m == io::PathMode::kSrv6 ? "srv6" : m == io::PathMode::kEcmp ? "ecmp" : "direct";
}

Result<engine::PeerId, Failure> peer_of(Device& d, const Endpoint& e) {
  if (e.mode != d.cfg.udp.path_mode)
    return err(Code::kInvalidUsage, std::string("peer uses path mode ") + mode_name(e.mode) +
                                        ", this host " + mode_name(d.cfg.udp.path_mode) +
                                        " (host configs disagree)");
  std::string key = e.mode == io::PathMode::kSrv6 ? "h" + std::to_string(e.fabric_host) + "/" : "";
  for (const sockaddr_in6& a : e.planes)
    key += to_string(a) + "%" + std::to_string(a.sin6_scope_id) + ",";
  std::lock_guard lock(d.peers_mu);
  if (auto it = d.peers.find(key); it != d.peers.end()) return it->second;
  engine::PeerId id = 0;
  if (e.mode == io::PathMode::kSrv6) {
    std::vector<uint16_t> ports;  // the peer's own ports: it may run with ephemeral ones
    for (const sockaddr_in6& a : e.planes) ports.push_back(ntohs(a.sin6_port));
    auto p = d.drv->add_fabric_peer(e.fabric_host, ports);
    if (!p.ok()) return err(Code::kRemote, p.error());
    id = *p;
  } else {
    id = d.drv->add_peer(e.planes);
  }
  d.peers.emplace(key, id);
  return id;
}

// The QP's rate hints (NCCL_MRC_CC_*_RATE; none unless set, or with NCCL_MRC_QP_HINT_ENABLE=0).
// The engine applies them to the QP's automatic profile, which keeps learning its base RTT.
engine::CcRates cc_rates(const Knobs& k) {
  if (!k.qp_hint) return {};
  return engine::CcRates{k.cc_init_mbps, k.cc_min_mbps, k.cc_max_mbps};
}

void destroy_comm(Comm& c);

// A comm with its CQ, `nqps` QPs (INIT, one token) and buffers; not connected yet.
Result<std::unique_ptr<Comm>, Failure> make_comm(Device& d, Comm::Role role, size_t nqps) {
  auto c = std::make_unique<Comm>();
  c->role = role;
  c->dev = &d;
  c->token = static_cast<uint32_t>(random64()) | 1u;
  static std::atomic<uint32_t> pds{0x80000000u};  // above the verbs device's PD handles
  c->pd = pds++;
  if (role == Comm::Role::kSend) {
    c->reqs.resize(kSendRequests);
    for (uint32_t i = kSendRequests; i-- > 0;) c->free_reqs.push_back(i);
    c->cts_ring.assign(kCtsSlots * kCtsSlotBytes, 0);
  } else {
    c->reqs.resize(kMaxRequests);
    const uint32_t eager = [] {
      std::lock_guard lock(state().mu);
      return state().knobs.eager_bytes;
    }();
    // One QP only: the receiver matches eager messages in the order they come (net.h).
    if (eager > 0 && nqps == 1) {
      c->eager_slot_bytes = kEagerTag + eager;
      c->eager_ring.assign(kEagerSlots * c->eager_slot_bytes, 0);
    }
  }
  for (Request& r : c->reqs) r.comm = c.get();
  auto st = d.drv->with_engine([&](Engine& e) -> Status<Failure> {
    auto cq = e.create_cq(4 * kImmRecvs);
    if (!cq.ok())
      return err(Code::kSystem, std::string("create_cq: ") + engine::to_string(cq.error()));
    c->cq = *cq;
    engine::QpInit qi;
    qi.send_cq = qi.recv_cq = c->cq;
    qi.max_send_wr = 2 * kSendRequests;
    qi.max_recv_wr = 2 * kImmRecvs;
    qi.local_token = c->token;
    qi.pd = c->pd;
    for (size_t i = 0; i < nqps; ++i) {
      auto qpn = e.create_qp(qi);
      if (!qpn.ok())
        return err(Code::kSystem, std::string("create_qp: ") + engine::to_string(qpn.error()));
      c->qps.push_back(*qpn);
      engine::QpAttr a;
      a.state = engine::QpState::kInit;
      if (auto r = e.modify_qp(*qpn, a, engine::attr::kState); !r.ok())
        return err(Code::kSystem, std::string("modify_qp INIT: ") + engine::to_string(r.error()));
    }
    c->writes_posted.assign(nqps, 0);
    c->writes_received.assign(nqps, 0);
    if (role == Comm::Role::kSend) {
      auto k = e.register_mr(c->cts_ring.data(), c->cts_ring.size(),
                             reinterpret_cast<uint64_t>(c->cts_ring.data()),
                             engine::access::kLocalWrite, c->pd);
      if (!k.ok())
        return err(Code::kSystem, std::string("register_mr: ") + engine::to_string(k.error()));
      c->cts_key = *k;
      auto t = e.register_mr(c->eager_tags.data(), sizeof c->eager_tags,
                             reinterpret_cast<uint64_t>(c->eager_tags.data()), 0, c->pd);
      if (!t.ok())
        return err(Code::kSystem, std::string("register_mr: ") + engine::to_string(t.error()));
      c->eager_tags_key = *t;
    }
    if (!c->eager_ring.empty()) {
      auto k = e.register_mr(c->eager_ring.data(), c->eager_ring.size(),
                             reinterpret_cast<uint64_t>(c->eager_ring.data()),
                             engine::access::kLocalWrite | engine::access::kRemoteWrite, c->pd);
      if (!k.ok())
        return err(Code::kSystem, std::string("register_mr: ") + engine::to_string(k.error()));
      c->eager_ring_key = *k;
    }
    return {};
  });
  if (!st.ok()) {
    destroy_comm(*c);  // what was made before the failure
    return Err(st.error());
  }
  return c;
}

void destroy_comm(Comm& c) {
  c.dev->drv->with_engine([&](Engine& e) {
    for (engine::Qpn q : c.qps) (void)e.destroy_qp(q);
    if (c.cq) (void)e.destroy_cq(c.cq);
    if (c.cts_key) (void)e.deregister_mr(c.cts_key);
    if (c.eager_tags_key) (void)e.deregister_mr(c.eager_tags_key);
    if (c.eager_ring_key) (void)e.deregister_mr(c.eager_ring_key);
  });
}

// RTR and RTS toward the peer's QP, then the receives the role keeps posted.
NetStatus connect_qp(Comm& c, const Endpoint& peer) {
  Device& d = *c.dev;
  if (peer.qpns.size() != c.qps.size())
    return err(Code::kRemote, "the peer has " + std::to_string(peer.qpns.size()) +
                                  " QPs for this connection, this side " +
                                  std::to_string(c.qps.size()));
  auto pid = peer_of(d, peer);
  if (!pid.ok()) return Err(pid.error());
  c.peer = peer.mode == io::PathMode::kSrv6 ? "fabric host " + std::to_string(peer.fabric_host)
                                            : to_string(peer.planes[0]);
  auto qp_list = [](const std::vector<uint32_t>& q) {
    std::string t;
    for (uint32_t n : q) t += (t.empty() ? "" : ",") + std::to_string(n);
    return t;
  };
  c.peer += (peer.qpns.size() == 1 ? " QP " : " QPs ") + qp_list(peer.qpns);
  const Knobs k = [] {
    std::lock_guard lock(state().mu);
    return state().knobs;
  }();
  // The connection policy every front end shares (UdpDriver::rtr_attr), then the plugin's knobs.
  engine::QpAttr a = d.drv->rtr_attr(*pid, peer.fabric_host, 0, peer.token);
  a.mtu = std::min(peer.mtu, d.cfg.mtu);
  a.timeout = k.timeout;
  a.retry_cnt_linear = k.retry_cnt_linear;
  a.retry_cnt_exp = k.retry_cnt_exp;
  a.max_psn_range = k.max_psn_range;
  a.cc_rates = cc_rates(k);
  uint32_t mask = io::UdpDriver::kRtrMask | engine::attr::kMtu | engine::attr::kTimeout |
                  engine::attr::kRetry | engine::attr::kMpr;
  if (a.cc_rates.any()) mask |= engine::attr::kCcRates;
  const size_t npaths = a.paths.size();
  auto st = d.drv->with_engine([&](Engine& e) -> Status<Failure> {
    for (size_t q = 0; q < c.qps.size(); ++q) {
      a.dest_qpn = peer.qpns[q];
      if (auto r = e.connect_qp(c.qps[q], a, mask); !r.ok())
        return err(Code::kInternal, std::string("connect QP (INIT -> RTR -> RTS): ") +
                                        r.error().field + ": " +
                                        engine::to_string(r.error().error));
      if (c.role == Comm::Role::kRecv) {  // WRITE_IMMs may come on any of them
        for (int i = 0; i < kImmRecvs; ++i) {
          if (auto r = e.post_recv(c.qps[q], engine::RecvWr{kImmRecv, {}}); !r.ok())
            return err(Code::kInternal, std::string("post_recv: ") + engine::to_string(r.error()));
        }
      }
    }
    if (c.role == Comm::Role::kSend) {  // CTS records come on the first QP
      for (int i = 0; i < kCtsSlots; ++i) {
        engine::Sge sge{reinterpret_cast<uint64_t>(c.cts_ring.data() + i * kCtsSlotBytes),
                        static_cast<uint32_t>(kCtsSlotBytes), c.cts_key};
        if (auto r = e.post_recv(c.qps[0], engine::RecvWr{kCtsRecv | i, {&sge, 1}}); !r.ok())
          return err(Code::kInternal, std::string("post_recv: ") + engine::to_string(r.error()));
      }
    }
    return {};
  });
  if (!st.ok()) return st;
  // Eager sends where the receive comm offers a ring of the slots this plugin uses, and its
  // own knob allows (the acceptor makes a ring only for one QP).
  if (c.role == Comm::Role::kSend && c.qps.size() == 1 && peer.eager_slots == kEagerSlots &&
      k.eager_bytes > 0) {
    c.eager_addr = peer.eager_addr;
    c.eager_rkey = peer.eager_rkey;
    c.eager_slot_bytes = peer.eager_slot_bytes;
    c.eager_max = std::min<uint32_t>(k.eager_bytes, peer.eager_slot_bytes - kEagerTag);
  }
  log(mrcNcclLogInfo, d.name + ": " + (c.role == Comm::Role::kSend ? "send" : "recv") + " comm " +
                          (c.qps.size() == 1 ? "QP " : "QPs ") + qp_list(c.qps) + " connected to " +
                          c.peer + ", " + std::to_string(npaths) + " paths over " +
                          std::to_string(d.drv->planes()) + " planes" +
                          (c.role == Comm::Role::kRecv ? ""
                           : c.eager_max              ? ", eager sends up to " +
                                                 std::to_string(c.eager_max) + " B"
                           : c.qps.size() > 1 ? ", no eager sends (one QP per connection only)"
                                              : ", no eager sends"));
  return {};
}

// ---- Data path ---------------------------------------------------------------------------

void place_eager(Comm& c);

void on_cts(Comm& c, const uint8_t* p, uint32_t len) {
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, p + at, 4);
    return v;
  };
  if (len < kCtsHeader) return c.break_with(Code::kRemote, "short CTS record");
  const uint32_t seq = u32(0), n = u32(4), freed = u32(8);
  if (n < 1 || n > kMaxRecvs || len != kCtsHeader + kCtsEntry * n)
    return c.break_with(Code::kRemote, "malformed CTS record (" + std::to_string(n) + " buffers)");
  if (seq != c.cts_expected)
    return c.break_with(Code::kRemote, "CTS record " + std::to_string(seq) +
                                           " out of order (expected " +
                                           std::to_string(c.cts_expected) + ")");
  if (freed - c.eager_freed > c.eager_posted - c.eager_freed)
    return c.break_with(Code::kRemote, "CTS record frees eager slots never written (" +
                                           std::to_string(freed) + " of " +
                                           std::to_string(c.eager_posted) + ")");
  c.eager_freed = freed;
  c.cts_seen = true;
  c.grouped_seen = c.grouped_seen || n > 1;
  Cts& t = c.cts[seq % kMaxRequests];
  // The receive 32 before this one may still wait for eager sends to be placed in it: their
  // messages filled it (the peer posted this one after), so they place now.
  if (t.valid) place_eager(c);
  if (t.valid) return c.break_with(Code::kRemote, "more than 32 receives posted by the peer");
  ++c.cts_expected;
  t = Cts{};
  t.valid = true;
  t.seq = seq;
  t.n = static_cast<int>(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* q = p + kCtsHeader + kCtsEntry * i;
    std::memcpy(&t.e[i].addr, q, 8);
    std::memcpy(&t.e[i].rkey, q + 8, 4);
    std::memcpy(&t.e[i].size, q + 12, 4);
    std::memcpy(&t.e[i].tag, q + 16, 4);
  }
}

// The first buffer of receive `t` not yet sent to that has this tag, or -1: how a send finds
// its buffer, by CTS record (isend) or after the fact for an eager one (place_eager), and how
// the receiver matches eager messages (match_arrived), so both ends agree.
int free_buffer(const Cts& t, int32_t tag) {
  for (int i = 0; i < t.n; ++i)
    if (!(t.used & (1u << i)) && t.e[i].tag == tag) return i;
  return -1;
}

// Buffer `idx` of the receive the sends fill now is sent to; once all are, the next
// receive's turn.
void use_buffer(Comm& c, Cts& t, int idx) {
  t.used |= static_cast<uint8_t>(1u << idx);
  if (t.used == (1u << t.n) - 1) {
    t.valid = false;
    ++c.send_seq;
  }
}

// Places the eager sends not placed yet (oldest first) in the receives whose CTS records have
// come. One that fits no buffer breaks the comm: its data went already.
void place_eager(Comm& c) {
  while (!c.unplaced.empty() && !c.broken) {
    Cts& t = c.cts[c.send_seq % kMaxRequests];
    if (!t.valid || t.seq != c.send_seq) return;
    const auto [tag, size, req] = c.unplaced.front();  // `at`: the send's request
    const int idx = free_buffer(t, tag);
    if (idx < 0)
      return c.break_with(Code::kInvalidUsage,
                          "eager send (written before its receive's CTS) with tag " +
                              std::to_string(tag) + ": no buffer of the peer's receive " +
                              std::to_string(t.seq) + " has it");
    if (size > t.e[idx].size)
      return c.break_with(Code::kInvalidUsage,
                          "eager send (written before its receive's CTS) of " +
                              std::to_string(size) + " bytes into a receive of " +
                              std::to_string(t.e[idx].size) + " bytes");
    c.unplaced.pop_front();
    c.reqs[req].unplaced = false;
    use_buffer(c, t, idx);
  }
}

// Receiver: copies the eager messages that came (in order) into the receives they belong to,
// found as the sender placed them (free_buffer's rule over the buffers still waiting); one
// whose receive is not posted yet waits for irecv. Each one copied frees its slot.
void match_arrived(Comm& c) {
  const size_t slot_bytes = c.eager_slot_bytes;
  while (!c.arrived.empty() && !c.broken) {
    for (; c.match_seq != c.recv_seq; ++c.match_seq) {  // past the receives already full
      const Request& r = c.reqs[c.match_seq % kMaxRequests];
      if (r.busy && r.seq == c.match_seq && r.pending) break;
    }
    if (c.match_seq == c.recv_seq) return;
    Request& r = c.reqs[c.match_seq % kMaxRequests];
    const EagerMsg m = c.arrived.front();  // `at`: its slot
    int idx = -1;
    for (int i = 0; i < r.n && idx < 0; ++i)
      if ((r.pending & (1u << i)) && r.tags[i] == m.tag) idx = i;
    if (idx < 0)
      return c.break_with(Code::kInvalidUsage, "eager message with tag " + std::to_string(m.tag) +
                                                   " matches no buffer of receive " +
                                                   std::to_string(r.seq));
    if (m.size > r.caps[idx])
      return c.break_with(Code::kInvalidUsage, "a send of " + std::to_string(m.size) +
                                                   " bytes into a receive of " +
                                                   std::to_string(r.caps[idx]) + " bytes");
    if (m.size > 0 && !c.closing)  // closing: NCCL may have deregistered and freed it
      std::memcpy(reinterpret_cast<void*>(r.addrs[idx]),
                  c.eager_ring.data() + m.at * slot_bytes + kEagerTag, m.size);
    c.arrived.pop_front();
    ++c.eager_freed;
    r.sizes[idx] = m.size;
    r.pending &= static_cast<uint8_t>(~(1u << idx));
    if (!r.pending) r.done = true;
  }
}

const char* explain(WcStatus s) {
  switch (s) {
    case WcStatus::kRetryExcErr:
      return "no acknowledgement on any path within the retry budget (NCCL_MRC_TIMEOUT, "
             "NCCL_MRC_RETRY_CNT_LINEAR/EXP): the peer or every path to it is down";
    case WcStatus::kRemAccessErr:
      return "the peer refused a write (bad key or bounds)";
    case WcStatus::kWrFlushErr:
      return "work flushed: the QP went to the error state";
    case WcStatus::kRnrRetryExcErr:
      return "the peer had no receive posted for too long";
    default:
      return "completion error";
  }
}

// Drains the comm's CQ into its requests and reposts the receives they used.
void progress(Comm& c, bool force = false) {
  uint64_t seen = c.dev->drv->activity();
  if (seen == c.activity_seen && !force) {
    // Nothing new in the engine since the last drain: receive and answer in this thread
    // (the proxy's test loop; UdpDriver::poll_progress), then look again.
    if (!c.dev->drv->poll_progress()) return;
    seen = c.dev->drv->activity();
  }
  c.activity_seen = seen;
  std::array<Completion, 64> wc;
  std::vector<uint64_t> cts_repost;
  std::vector<engine::Qpn> imm_repost;  // the QP of each WRITE_IMM that used a receive
  for (;;) {
    const size_t n = c.dev->drv->peek_engine([&](Engine& e) { return e.poll_cq(c.cq, wc); });
    if (n > 0) c.last_heard = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) {
      const Completion& w = wc[i];
      if (w.status != WcStatus::kSuccess) {
        c.break_with(Code::kRemote,
                     std::string(engine::to_string(w.status)) + ": " + explain(w.status));
        continue;
      }
      if (c.role == Comm::Role::kSend) {
        if (w.wr_id & kCtsRecv) {
          const uint64_t slot = w.wr_id & 0xffff;
          on_cts(c, c.cts_ring.data() + slot * kCtsSlotBytes, w.byte_len);
          cts_repost.push_back(slot);
        } else if (w.wr_id < c.reqs.size() && c.reqs[w.wr_id].busy) {
          c.reqs[w.wr_id].done = true;
        }
      } else if (w.opcode == WcOpcode::kRecvWriteImm) {
        imm_repost.push_back(w.qpn);
        const size_t q =
            static_cast<size_t>(std::find(c.qps.begin(), c.qps.end(), w.qpn) - c.qps.begin());
        if (q < c.writes_received.size()) ++c.writes_received[q];
        if (w.imm & kEagerImm) {  // a message in the eager ring, its slots written in turn
          const uint32_t slot = w.imm & ~kEagerImm;
          const size_t slot_bytes = c.eager_slot_bytes;  // 0: no ring
          const uint32_t expected =
              (c.eager_freed + static_cast<uint32_t>(c.arrived.size())) % kEagerSlots;
          if (slot_bytes == 0 || slot != expected || c.arrived.size() >= kEagerSlots ||
              w.byte_len < kEagerTag || w.byte_len > slot_bytes) {
            c.break_with(Code::kRemote,
                         "malformed eager message (slot " + std::to_string(slot) + ", expected " +
                             std::to_string(expected) + ", " + std::to_string(c.arrived.size()) +
                             " not yet copied; " + std::to_string(w.byte_len) + " bytes)");
            continue;
          }
          EagerMsg a;
          a.at = slot;
          a.size = w.byte_len - kEagerTag;
          std::memcpy(&a.tag, c.eager_ring.data() + slot * slot_bytes, kEagerTag);
          c.arrived.push_back(a);
          match_arrived(c);
          continue;
        }
        const uint32_t seq = w.imm >> 3, idx = w.imm & 7;
        Request& r = c.reqs[seq % kMaxRequests];
        if (!r.busy || (r.seq & kSeqMask) != seq || !(r.pending & (1u << idx))) {
          c.break_with(Code::kRemote,
                       "data for a receive not posted (imm " + std::to_string(w.imm) + ")");
          continue;
        }
        r.sizes[idx] = w.byte_len;
        r.pending &= static_cast<uint8_t>(~(1u << idx));
        if (!r.pending) r.done = true;
      }
    }
    if (n < wc.size()) break;
  }
  place_eager(c);  // CTS records that came place the eager sends sent before them
  if (cts_repost.empty() && imm_repost.empty()) return;
  c.dev->drv->peek_engine([&](Engine& e) {
    for (uint64_t slot : cts_repost) {
      engine::Sge sge{reinterpret_cast<uint64_t>(c.cts_ring.data() + slot * kCtsSlotBytes),
                      static_cast<uint32_t>(kCtsSlotBytes), c.cts_key};
      (void)e.post_recv(c.qps[0], engine::RecvWr{kCtsRecv | slot, {&sge, 1}});
    }
    for (engine::Qpn q : imm_repost) (void)e.post_recv(q, engine::RecvWr{kImmRecv, {}});
  });
}

// Reads the control connection: BYE or its closing means the peer is gone.
void check_peer(Comm& c) {
  const auto now = std::chrono::steady_clock::now();
  if (c.peer_closed || now < c.next_peer_check) return;
  c.next_peer_check = now + kPeerCheckEvery;
  for (;;) {
    auto f = c.ctrl.read_frame();
    if (!f.ok()) {
      c.peer_closed = true;
      break;
    }
    if (!*f) return;
    if ((*f)->type != FrameType::kBye) {
      c.break_with(Code::kRemote, "unexpected control frame after the handshake");
      return;
    }
    // The receiver closed: sends it had received are complete even if their ACK never came.
    if (c.role == Comm::Role::kSend) {
      const std::vector<uint64_t>& got = (*f)->delivered;
      if (got.size() != c.qps.size()) {
        c.break_with(Code::kRemote, "BYE for " + std::to_string(got.size()) + " QPs, not " +
                                        std::to_string(c.qps.size()));
        return;
      }
      for (Request& r : c.reqs) {
        if (r.busy && r.write_no < got[r.qp]) r.done = true;
        // An eager one reached a receive only if it was copied there (else it is lost: test()).
        if (r.busy && r.unplaced &&
            static_cast<int32_t>((*f)->eager_copied - r.eager_no) > 0)
          r.unplaced = false;
      }
    }
    c.peer_closed = true;
    break;
  }
}

bool pending_requests(const Comm& c) {
  for (const Request& r : c.reqs)
    if (r.busy && !r.done) return true;
  return false;
}

}  // namespace

// ---- Init, devices ------------------------------------------------------------------------

NetStatus init(mrcNcclLogger logger) {
  if (logger) g_logger.store(logger);
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.inits++ > 0) return {};
  auto k = read_knobs();
  if (!k.ok()) {
    s.inits = 0;
    return err(Code::kInvalidArgument, k.error());
  }
  s.knobs = *k;
  std::vector<std::string> files = s.knobs.config_files;
  if (files.empty()) files.push_back("");
  std::vector<std::unique_ptr<Device>> all;
  for (size_t i = 0; i < files.size(); ++i) {
    auto d = open_device(static_cast<uint32_t>(i), files[i], s.knobs);
    if (!d.ok()) {
      s.inits = 0;
      return err(Code::kSystem, "device mrc" + std::to_string(i) + ": " + d.error());
    }
    all.push_back(std::move(*d));
  }
  if (s.knobs.devices.empty()) {
    s.devices = std::move(all);
  } else {
    for (uint32_t i : s.knobs.devices) {
      if (i >= all.size() || !all[i]) {
        s.inits = 0;
        s.devices.clear();
        return err(Code::kInvalidArgument, "NCCL_MRC_DEVICES: no device " + std::to_string(i) +
                                               " (" + std::to_string(all.size()) + " configured)");
      }
      s.devices.push_back(std::move(all[i]));
    }
  }
  log(mrcNcclLogInfo, std::string("libnccl-net-mrc ") + MRC_LIBRARY_VERSION + ", " +
                          std::to_string(s.devices.size()) + " device(s)");
  for (const auto& d : s.devices) log(mrcNcclLogInfo, describe(*d));
  return {};
}

void finalize() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.inits == 0 || --s.inits > 0) return;
  s.devices.clear();
}

int device_count() {
  std::lock_guard lock(state().mu);
  return static_cast<int>(state().devices.size());
}

Result<Props, Failure> properties(int dev) {
  Device* d = device(dev);
  if (!d) return err(Code::kInvalidArgument, "getProperties: no device " + std::to_string(dev));
  Props p;
  p.name = d->name.c_str();
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the control address: one NIC, one guid
  for (size_t i = 0; i < sizeof d->ctrl.sin6_addr; ++i)
    h = (h ^ reinterpret_cast<const uint8_t*>(&d->ctrl.sin6_addr)[i]) * 1099511628211ull;
  p.guid = h ^ static_cast<uint64_t>(dev);
  p.speed_mbps =
      static_cast<int>(std::min<uint64_t>(d->cfg.udp.engine.nic_bps / 1'000'000, INT32_MAX));
  return p;
}

// ---- Connection setup ---------------------------------------------------------------------

NetStatus listen(int dev, void* handle, ListenComm** out) {
  *out = nullptr;
  Device* d = device(dev);
  if (!d) return err(Code::kInvalidArgument, "listen: no device " + std::to_string(dev));
  auto l = in_device_netns(*d, [&] { return listen_on(d->ctrl); });
  if (!l.ok()) return err(Code::kSystem, d->name + ": " + l.error());
  auto lc = std::make_unique<ListenComm>();
  lc->dev = d;
  lc->fd = std::move(l->first);
  lc->id = random64();
  Handle h{};
  h.magic = kHandleMagic;
  h.version = kFrameVersion;
  h.dev = static_cast<uint16_t>(dev);
  h.addr = l->second;
  h.listen_id = lc->id;
  h.connecting = nullptr;
  std::memset(handle, 0, MRC_NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *out = lc.release();
  return {};
}

NetStatus connect(int dev, void* handle, Comm** out) {
  *out = nullptr;
  Handle h;
  std::memcpy(&h, handle, sizeof h);
  if (h.magic != kHandleMagic || h.version != kFrameVersion)
    return err(Code::kInvalidArgument,
               "connect: not an MRC plugin handle (magic/version mismatch)");
  Device* d = device(dev);
  if (!d) return err(Code::kInvalidArgument, "connect: no device " + std::to_string(dev));
  auto give_up = [&](Failure f) -> NetStatus {
    if (h.connecting) {
      if (h.connecting->comm) destroy_comm(*h.connecting->comm);
      delete h.connecting;
      h.connecting = nullptr;
      std::memcpy(handle, &h, sizeof h);
    }
    return Err(std::move(f));
  };
  if (!h.connecting) {
    const uint32_t nqps = [] {
      std::lock_guard lock(state().mu);
      return state().knobs.qps_per_conn;
    }();
    auto c = make_comm(*d, Comm::Role::kSend, nqps);
    if (!c.ok()) return Err(c.error());
    auto fd = in_device_netns(*d, [&] { return start_connect(h.addr); });
    if (!fd.ok()) {
      destroy_comm(**c);
      return err(Code::kSystem, fd.error());
    }
    (*c)->ctrl = Stream(std::move(*fd));
    h.connecting = new Connecting{std::move(*c), h.addr};
    std::memcpy(handle, &h, sizeof h);
  }
  Connecting& k = *h.connecting;
  Comm& c = *k.comm;
  if (k.stage == Connecting::Stage::kTcp) {
    auto done = connect_finished(c.ctrl.fd(), k.to);
    if (!done.ok()) return give_up(fail(Code::kSystem, done.error()));
    if (!*done) return {};
    Frame f;
    f.type = FrameType::kHello;
    f.listen_id = h.listen_id;
    f.endpoint = local_endpoint(c);
    c.ctrl.queue(f);
    k.stage = Connecting::Stage::kReply;
  }
  if (auto fl = c.ctrl.flush(); !fl.ok()) return give_up(fail(Code::kSystem, fl.error()));
  if (k.stage == Connecting::Stage::kReply) {
    auto f = c.ctrl.read_frame();
    if (!f.ok())
      return give_up(fail(Code::kRemote, "connect to " + to_string(k.to) + ": " + f.error()));
    if (!*f) return {};
    if ((*f)->type != FrameType::kReply)
      return give_up(fail(Code::kRemote, "connect: expected REPLY from " + to_string(k.to)));
    if (auto st = connect_qp(c, (*f)->endpoint); !st.ok()) return give_up(st.error());
    Frame ready;
    ready.type = FrameType::kReady;
    c.ctrl.queue(ready);
    k.stage = Connecting::Stage::kReady;
  }
  auto fl = c.ctrl.flush();
  if (!fl.ok()) return give_up(fail(Code::kSystem, fl.error()));
  if (!*fl) return {};
  *out = k.comm.release();
  delete h.connecting;
  h.connecting = nullptr;
  std::memcpy(handle, &h, sizeof h);
  return {};
}

NetStatus accept(ListenComm* l, Comm** out) {
  *out = nullptr;
  const auto now = std::chrono::steady_clock::now();
  for (;;) {
    const int fd = ::accept4(l->fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    if (l->pending.size() >= ListenComm::kMaxAccepting) {
      // Full: the oldest connection still without a HELLO goes (a peer sends its HELLO at
      // once; the silent ones are strangers), so a flood never locks real peers out.
      auto oldest = std::find_if(l->pending.begin(), l->pending.end(),
                                 [](const ListenComm::Accepting& a) { return !a.comm; });
      if (oldest == l->pending.end()) {
        ::close(fd);
        log(mrcNcclLogWarn, l->dev->name + ": refused a connection: " +
                                std::to_string(ListenComm::kMaxAccepting) + " are being set up");
        continue;
      }
      l->pending.erase(oldest);
      log(mrcNcclLogWarn, l->dev->name + ": dropped a connection that sent no HELLO: " +
                              std::to_string(ListenComm::kMaxAccepting) + " were waiting");
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    l->pending.push_back(ListenComm::Accepting{Stream(UniqueFd(fd)), nullptr, now});
  }
  // A connection that fails is dropped (its peer's connect fails), never this listen comm.
  for (size_t i = 0; i < l->pending.size();) {
    auto& a = l->pending[i];
    auto drop = [&](const std::string& why) {
      log(mrcNcclLogWarn, l->dev->name + ": refused a connection: " + why);
      if (a.comm) destroy_comm(*a.comm);
      l->pending.erase(l->pending.begin() + static_cast<ptrdiff_t>(i));
    };
    if (!a.comm && now - a.since > ListenComm::kHelloTimeout) {
      drop("no HELLO within " + std::to_string(ListenComm::kHelloTimeout.count()) + " s");
      continue;
    }
    auto f = (a.comm ? a.comm->ctrl : a.ctrl).read_frame();
    if (!f.ok()) {
      drop(f.error());
      continue;
    }
    if (*f && !a.comm) {
      if ((*f)->type != FrameType::kHello) {
        drop("expected HELLO");
        continue;
      }
      if ((*f)->listen_id != l->id) {
        drop("HELLO for another listen comm (stale handle?)");
        continue;
      }
      auto c = make_comm(*l->dev, Comm::Role::kRecv, (*f)->endpoint.qpns.size());
      if (!c.ok()) {
        drop(c.error().what);
        continue;
      }
      a.comm = std::move(*c);
      a.comm->ctrl = std::move(a.ctrl);
      if (auto st = connect_qp(*a.comm, (*f)->endpoint); !st.ok()) {
        drop(st.error().what);
        continue;
      }
      Frame reply;
      reply.type = FrameType::kReply;
      reply.endpoint = local_endpoint(*a.comm);
      a.comm->ctrl.queue(reply);
      f = a.comm->ctrl.read_frame();  // READY may already be here
      if (!f.ok()) {
        drop(f.error());
        continue;
      }
    }
    if (a.comm) {
      if (auto fl = a.comm->ctrl.flush(); !fl.ok()) {
        drop(fl.error());
        continue;
      }
    }
    if (*f && a.comm) {
      if ((*f)->type != FrameType::kReady) {
        drop("expected READY");
        continue;
      }
      *out = a.comm.release();
      l->pending.erase(l->pending.begin() + static_cast<ptrdiff_t>(i));
      return {};
    }
    ++i;
  }
  return {};
}

// ---- Memory ---------------------------------------------------------------------------------

NetStatus reg_mr(Comm* c, void* data, size_t size, int type, MemHandle** out) {
  *out = nullptr;
  if (type != MRC_NCCL_PTR_HOST)
    return err(Code::kInvalidArgument, "regMr: memory type " + std::to_string(type) +
                                           " not supported: this device takes host memory only "
                                           "(NCCL stages GPU buffers through host memory)");
  auto mh = std::make_unique<MemHandle>();
  mh->dev = c->dev;
  mh->addr = reinterpret_cast<uint64_t>(data);
  mh->len = size;
  if (size > 0) {
    auto k = c->dev->drv->with_engine([&](Engine& e) {
      // Peers only WRITE (WRITE_IMM) into receive buffers: no remote read, ever.
      return e.register_mr(data, size, mh->addr,
                           engine::access::kLocalWrite | engine::access::kRemoteWrite, c->pd);
    });
    if (!k.ok())
      return err(Code::kSystem,
                 "regMr of " + std::to_string(size) + " bytes: " + engine::to_string(k.error()));
    mh->key = *k;
  }
  *out = mh.release();
  return {};
}

NetStatus dereg_mr(Comm*, MemHandle* mh) {
  if (!mh) return {};
  std::unique_ptr<MemHandle> own(mh);
  if (mh->key == 0) return {};
  // Through the handle's device, not the comm: NCCL may close the comm first.
  auto st = mh->dev->drv->with_engine([&](Engine& e) { return e.deregister_mr(mh->key); });
  if (!st.ok())
    return err(Code::kInvalidArgument, std::string("deregMr: ") + engine::to_string(st.error()));
  return {};
}

// ---- Transfers ------------------------------------------------------------------------------

// Posts `wr` (its target, gather list and imm set) as a WRITE_IMM on QP `q` for the next free
// send request (there is one), sending it from the caller's thread unless the QP has a
// backlog in flight (UdpDriver::with_engine_post: then the progress thread batches it), and
// fills that request (*out). *out stays NULL when the QP's send queue is full: NCCL retries.
NetStatus post_write(Comm& c, engine::SendWr& wr, uint8_t q, size_t size, Request** out) {
  const uint32_t ri = c.free_reqs.back();
  wr.wr_id = ri;
  wr.opcode = engine::Opcode::kWriteImm;
  auto st = c.dev->drv->with_engine_post(c.qps[q],
                                          [&](Engine& en) { return en.post_send(c.qps[q], wr); });
  if (!st.ok()) {
    if (st.error() == engine::Error::kQueueFull) return {};
    return err(Code::kInternal, std::string("isend: post_send: ") + engine::to_string(st.error()));
  }
  c.free_reqs.pop_back();
  ++c.sends;
  Request& r = c.reqs[ri];
  r.busy = true;
  r.done = false;
  r.unplaced = false;
  r.n = 1;
  r.sizes[0] = size;
  r.qp = q;
  r.write_no = c.writes_posted[q]++;
  *out = &r;
  return {};
}

NetStatus isend(Comm* cp, void* data, size_t size, int tag, MemHandle* mh, Request** out) {
  *out = nullptr;
  Comm& c = *cp;
  if (c.role != Comm::Role::kSend) return err(Code::kInvalidUsage, "isend on a receive comm");
  if (c.broken) return Err(c.failure);
  progress(c);
  if (c.broken) return Err(c.failure);
  if (size > 0 && (!mh || mh->key == 0 || reinterpret_cast<uint64_t>(data) < mh->addr ||
                   reinterpret_cast<uint64_t>(data) + size > mh->addr + mh->len))
    return err(Code::kInvalidArgument, "isend: buffer not inside its registered memory handle");
  Cts& t = c.cts[c.send_seq % kMaxRequests];
  // Its CTS here means every eager send before it is placed (progress ran place_eager).
  if (!t.valid || t.seq != c.send_seq || !c.unplaced.empty()) {
    check_peer(c);
    if (c.peer_closed)
      return err(Code::kRemote, "isend: the peer " + c.peer + " closed the connection");
    // The matching receive's CTS is not here: a small message goes to the eager ring while
    // it has a free slot, else NCCL retries.
    if (c.eager_max == 0 || size > c.eager_max || !c.cts_seen || c.grouped_seen ||
        c.free_reqs.empty() || c.eager_posted - c.eager_freed >= kEagerSlots)
      return {};
    const uint32_t slot = c.eager_posted % kEagerSlots;
    c.eager_tags[slot] = tag;
    const std::array<engine::Sge, 2> sg{
        engine::Sge{reinterpret_cast<uint64_t>(&c.eager_tags[slot]), kEagerTag, c.eager_tags_key},
        engine::Sge{reinterpret_cast<uint64_t>(data), static_cast<uint32_t>(size),
                    mh ? mh->key : 0}};
    engine::SendWr wr;
    wr.sg = {sg.data(), size > 0 ? 2u : 1u};
    wr.remote_addr = c.eager_addr + uint64_t{slot} * c.eager_slot_bytes;
    wr.rkey = c.eager_rkey;
    wr.imm = kEagerImm | slot;
    if (auto st = post_write(c, wr, 0, size, out); !st.ok() || !*out) return st;
    Request& r = **out;
    r.unplaced = true;
    r.eager_no = c.eager_posted++;
    c.unplaced.push_back(EagerMsg{tag, static_cast<uint32_t>(size),
                                  static_cast<uint32_t>(&r - c.reqs.data())});
    return {};
  }
  // No buffer of the current receive with this tag still free: the send belongs to a later
  // receive (a grouped receive's sends may come in any order of tags), so NCCL retries it
  // once the current one is full, as NCCL's own IB transport answers.
  const int idx = free_buffer(t, tag);
  if (idx < 0) return {};
  const Cts::Entry& e = t.e[idx];
  if (size > e.size)
    return err(Code::kInvalidUsage, "isend of " + std::to_string(size) +
                                        " bytes into a receive of " + std::to_string(e.size) +
                                        " bytes");
  if (c.free_reqs.empty()) return {};
  engine::Sge sge{reinterpret_cast<uint64_t>(data), static_cast<uint32_t>(size), mh ? mh->key : 0};
  engine::SendWr wr;
  if (size > 0) wr.sg = {&sge, 1};
  wr.remote_addr = e.addr;
  wr.rkey = e.rkey;
  wr.imm = ((t.seq & kSeqMask) << 3) | static_cast<uint32_t>(idx);
  const auto q = static_cast<uint8_t>(c.sends % c.qps.size());
  if (auto st = post_write(c, wr, q, size, out); !st.ok() || !*out) return st;
  use_buffer(c, t, idx);
  return {};
}

NetStatus irecv(Comm* cp, int n, void** data, const size_t* sizes, const int* tags,
                MemHandle** mhandles, Request** out) {
  *out = nullptr;
  Comm& c = *cp;
  if (c.role != Comm::Role::kRecv) return err(Code::kInvalidUsage, "irecv on a send comm");
  if (n < 1 || n > kMaxRecvs)
    return err(Code::kInvalidArgument,
               "irecv: " + std::to_string(n) + " buffers (1.." + std::to_string(kMaxRecvs) + ")");
  if (c.broken) return Err(c.failure);
  Request& r = c.reqs[c.recv_seq % kMaxRequests];
  if (r.busy) return {};  // 32 receives in flight: NCCL retries
  uint8_t rec[kCtsBytes];
  const uint32_t seq = c.recv_seq, nn = static_cast<uint32_t>(n);
  std::memcpy(rec, &seq, 4);
  std::memcpy(rec + 4, &nn, 4);
  std::memcpy(rec + 8, &c.eager_freed, 4);
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > MRC_NCCL_MAX_NET_SIZE)
      return err(Code::kInvalidArgument,
                 "irecv: buffer of " + std::to_string(sizes[i]) + " bytes (at most 1 GiB)");
    const uint64_t a = reinterpret_cast<uint64_t>(data[i]);
    const MemHandle* mh = mhandles ? mhandles[i] : nullptr;
    if (sizes[i] > 0 && (!mh || mh->key == 0 || a < mh->addr || a + sizes[i] > mh->addr + mh->len))
      return err(Code::kInvalidArgument,
                 "irecv: buffer " + std::to_string(i) + " not inside its registered memory handle");
    const uint32_t key = sizes[i] > 0 ? mh->key : 0, sz = static_cast<uint32_t>(sizes[i]);
    const int32_t tag = tags ? tags[i] : 0;
    uint8_t* q = rec + kCtsHeader + kCtsEntry * i;
    std::memcpy(q, &a, 8);
    std::memcpy(q + 8, &key, 4);
    std::memcpy(q + 12, &sz, 4);
    std::memcpy(q + 16, &tag, 4);
  }
  engine::Sge sge{reinterpret_cast<uint64_t>(rec), static_cast<uint32_t>(kCtsHeader + kCtsEntry * n),
                  0};
  engine::SendWr wr;
  wr.wr_id = kCtsSend;
  wr.opcode = engine::Opcode::kSend;
  wr.sg = {&sge, 1};
  wr.inline_data = true;
  wr.signaled = false;
  auto st = c.dev->drv->with_engine_post(c.qps[0],
                                          [&](Engine& e) { return e.post_send(c.qps[0], wr); });
  if (!st.ok()) {
    if (st.error() == engine::Error::kQueueFull) return {};
    return err(Code::kInternal,
               std::string("irecv: post_send CTS: ") + engine::to_string(st.error()));
  }
  ++c.recv_seq;
  if (!pending_requests(c)) c.last_heard = std::chrono::steady_clock::now();
  r.busy = true;
  r.done = false;
  r.n = n;
  r.seq = seq;
  r.pending = static_cast<uint8_t>((1u << n) - 1);
  r.sizes.fill(0);
  for (int i = 0; i < n; ++i) {
    r.addrs[i] = reinterpret_cast<uint64_t>(data[i]);
    r.caps[i] = sizes[i];
    r.tags[i] = tags ? tags[i] : 0;
  }
  match_arrived(c);  // eager messages that came before this receive
  *out = &r;
  return {};
}

NetStatus test(Request* r, int* done, int* sizes) {
  *done = 0;
  Comm& c = *r->comm;
  if (!r->busy) return err(Code::kInvalidUsage, "test: request already completed");
  // An eager send is done once acknowledged and placed in its receive (place_eager).
  if (!r->done || r->unplaced) progress(c);
  if ((!r->done || r->unplaced) && !c.broken) {
    check_peer(c);
    // What the peer did before it closed is in the CQ by now (it closes after its completions,
    // which follow our placement); look once more before calling the request lost.
    if (c.peer_closed) progress(c, /*force=*/true);
    if (c.peer_closed && !r->done)
      c.break_with(Code::kRemote,
                   "the peer closed the connection (ended or was killed) with this "
                   "request outstanding");
    else if (c.peer_closed && r->unplaced)  // in its eager ring, never copied to a receive
      c.break_with(Code::kRemote,
                   "the peer closed the connection (ended or was killed) before posting the "
                   "receive for an eager send");
  }
  if (r->done && !r->unplaced) {
    *done = 1;
    if (sizes)
      for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->sizes[i]);
    r->busy = false;
    r->done = false;
    if (c.role == Comm::Role::kSend)
      c.free_reqs.push_back(static_cast<uint32_t>(r - c.reqs.data()));
    return {};
  }
  if (c.broken) return Err(c.failure);
  if (c.role == Comm::Role::kRecv) {
    const auto now = std::chrono::steady_clock::now();
    if (now - c.last_heard > kKeepaliveEvery) {
      c.last_heard = now;
      engine::SendWr ka;
      ka.wr_id = kKeepalive;
      ka.opcode = engine::Opcode::kWrite;
      ka.signaled = false;  // errors complete anyway, and those are what it is for
      (void)c.dev->drv->with_engine([&](Engine& e) {  // every QP: any of them may be cut off
        for (engine::Qpn q : c.qps) (void)e.post_send(q, ka);
        return 0;
      });
    }
  }
  // NCCL's proxy thread polls test() in a tight loop; when the cores are all busy, give the
  // progress thread (which does the actual work) the CPU instead of spinning on the mutex.
  sched_yield();
  return {};
}

// ---- Teardown -------------------------------------------------------------------------------

NetStatus close_send(Comm* c) {
  std::unique_ptr<Comm> own(c);
  if (pending_requests(*c))
    log(mrcNcclLogInfo, c->dev->name + ": send comm closed with requests in flight");
  destroy_comm(*c);
  return {};
}

NetStatus close_recv(Comm* c) {
  std::unique_ptr<Comm> own(c);
  c->closing = true;
  progress(*c, /*force=*/true);  // count every WRITE_IMM that arrived, for the sender's sake
  Frame bye;
  bye.type = FrameType::kBye;
  bye.delivered = c->writes_received;
  bye.eager_copied = c->eager_freed;
  c->ctrl.queue(bye);
  (void)c->ctrl.flush();
  destroy_comm(*c);
  return {};
}

NetStatus close_listen(ListenComm* l) {
  std::unique_ptr<ListenComm> own(l);
  for (auto& a : l->pending)
    if (a.comm) destroy_comm(*a.comm);
  return {};
}

}  // namespace mrc::nccl
