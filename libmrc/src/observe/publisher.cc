// A device's statistics snapshots and control commands (publisher.h).
// Threading: under the owning driver's mutex only.
#include "mrc/observe/publisher.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "mrc/engine/policy.h"
#include "mrc/wire/wire.h"
#include "srv6/fabric.h"

namespace mrc::observe {

static_assert(kMaxPlanes == engine::kMaxPlanes, "the segment has a record for every plane");

using engine::Duration;
using engine::Time;
using json = nlohmann::json;

namespace {

std::atomic<uint32_t> g_next_device{0};
constexpr size_t kRttSamples = 64;

void copy_str(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = 0;
}

std::string addr_text(const sockaddr_in6& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
  return buf;
}

std::optional<std::string> getenv_str(const char* n) {
  const char* v = std::getenv(n);
  if (!v) return std::nullopt;
  return std::string(v);
}

}  // namespace

/// What the previous snapshot saw of one EV, and its recent RTT samples.
struct Publisher::EvMemo {
  uint32_t changes = 0;
  uint8_t state = 0;  // EvState::kGood: every EV starts GOOD
  uint64_t acked = 0, probe_replies = 0;
  uint32_t rtt_us[kRttSamples] = {};
  uint32_t n = 0;  // samples taken (ring index n % kRttSamples)
  uint64_t seen = 0;
};

struct Publisher::ProbeTarget {
  uint32_t ev = 0;
  uint16_t plane = 0;
  uint32_t sent = 0, received = 0;
  uint64_t replied_rounds = 0;  // bit per round
  int64_t rtt_min = 0, rtt_max = 0, rtt_sum = 0;
};

struct Publisher::ProbeSession {
  sockaddr_un client{};
  socklen_t client_len = 0;
  std::string peer_name;
  engine::PeerId peer = 0;
  uint32_t token = 0;  // the io::Probes session
  uint32_t count = 5, rounds = 0;
  Duration interval{20'000'000}, timeout{300'000'000};
  Time next_round{0}, finish{engine::kNever};
  std::vector<ProbeTarget> targets;
};

std::unique_ptr<Publisher> Publisher::create(const io::UdpConfig& cfg,
                                             const std::vector<sockaddr_in6>& locals,
                                             DriverHooks hooks, std::string* why) {
  if (auto v = getenv_str("MRC_STATS"); v && (*v == "0" || *v == "off" || *v == "false")) {
    if (why) *why = "MRC_STATS=" + *v + ": statistics not published";
    return nullptr;
  }
  std::unique_ptr<Publisher> p(new Publisher());
  p->cfg_ = cfg;
  p->hooks_ = std::move(hooks);
  p->index_ = g_next_device.fetch_add(1);
  if (auto v = getenv_str("MRC_STATS_INTERVAL_MS")) {
    const long ms = std::strtol(v->c_str(), nullptr, 10);
    if (ms >= 1 && ms <= 10'000) p->interval_ = Duration{ms * 1'000'000};
  }
  auto seg = SegmentWriter::create(p->index_);
  if (!seg.ok()) {
    if (why) *why = seg.error();
    return nullptr;
  }
  p->seg_ = std::make_unique<SegmentWriter>(std::move(seg).value());

  p->seg_->begin();  // readers may already look: they see a complete device or none
  DeviceRecord& d = p->seg_->device();
  copy_str(d.name, sizeof d.name, "mrc" + std::to_string(p->index_));
  copy_str(d.netns, sizeof d.netns, cfg.netns);
  d.index = p->index_;
  d.planes = static_cast<uint32_t>(std::min<size_t>(locals.size(), kMaxPlanes));
  d.path_mode = static_cast<uint32_t>(cfg.path_mode);
  d.local_host = cfg.path_mode == io::PathMode::kSrv6 ? cfg.local_host : UINT32_MAX;
  for (uint32_t i = 0; i < d.planes; ++i) {
    copy_str(d.plane[i].address, sizeof d.plane[i].address, addr_text(locals[i]));
    d.plane[i].port = ntohs(locals[i].sin6_port);
  }

  // The control socket: root's directory, owner-only socket.
  ::mkdir(kControlDir, 0755);
  const std::string path = std::string(kControlDir) + "/" + std::to_string(::getpid()) + "." +
                           std::to_string(p->index_) + ".ctl";
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() < sizeof sa.sun_path) {
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ::unlink(path.c_str());
    const int one = 1;
    if (fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) == 0 &&
        ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      ::chmod(path.c_str(), 0600);
      p->ctl_fd_ = fd;
      p->ctl_path_ = path;
      d.has_control = 1;
    } else if (fd >= 0) {
      ::close(fd);
    }
  }
  p->seg_->commit(0);
  return p;
}

Publisher::~Publisher() {
  if (probe_) hooks_.probes->close(probe_->token);
  if (ctl_fd_ >= 0) {
    ::close(ctl_fd_);
    ::unlink(ctl_path_.c_str());
  }
}

Time Publisher::next_deadline() const {
  Time t = dirty_ ? next_publish_ : engine::kNever;
  if (probe_) t = std::min(t, probe_->rounds < probe_->count ? probe_->next_round : probe_->finish);
  return t;
}

void Publisher::add_peer(engine::PeerId id, std::string name, uint32_t host) {
  peers_.push_back(Peer{id, std::move(name), host});
  DeviceRecord& d = seg_->device();
  seg_->begin();
  if (d.n_peers < kMaxPeers) {
    PeerRecord& r = d.peer[d.n_peers++];
    copy_str(r.name, sizeof r.name, peers_.back().name);
    r.id = id;
    r.host = host;
  }
  seg_->commit(seg_->header().published_ns);
}

namespace {

// What moves when anything happens: datagrams, timer runs, QPs made, plane admin; a snapshot is
// due when it differs from the last one's.
uint64_t change_signature(const engine::Engine& e, const io::UdpCounters& c) {
  const engine::EngineStats& es = e.stats();
  return es.rx_datagrams * 1000003u + es.tx_datagrams * 7919u + c.timeouts * 31u +
         e.max_qpn() * 131u + e.drained_planes() + c.datagrams_sent +
         c.datagrams_received * 13u +  // also what only the driver took (queries)
         c.port_link_changes * 17u;    // a port's link, with no datagram moving
}

// The device's planes (drained, link down) and its engine and driver counters.
void device_counters(DeviceRecord& d, const engine::Engine& e, const io::UdpCounters& c) {
  const uint16_t drained = e.drained_planes();
  const uint16_t no_link = e.ports_down();
  for (uint32_t p = 0; p < d.planes; ++p) {
    d.plane[p].admin_down = (drained >> p) & 1;
    d.plane[p].link_down = (no_link >> p) & 1;
  }
  d.udp = UdpCountersRecord{
      c.datagrams_sent,  c.bytes_sent,   c.datagrams_received, c.bytes_received, c.sendmmsg_calls,
      c.gso_messages,    c.gso_disabled, c.gro_messages,       c.recvmmsg_calls, c.send_eagain,
      c.send_enobufs,    c.send_errors,  c.recv_errors,        c.recv_truncated, c.no_route,
      c.loop_iterations, c.timeouts};
  const engine::EngineStats& es = e.stats();
  d.rx_datagrams = es.rx_datagrams;
  d.tx_datagrams = es.tx_datagrams;
  d.rx_bytes = es.rx_bytes;
  d.tx_bytes = es.tx_bytes;
  for (size_t i = 0; i < es.drops.size() && i < kDropReasons; ++i) d.drops[i] = es.drops[i];
  for (size_t i = 0; i < 8; ++i) d.malformed_by_error[i] = es.malformed_by_error[i];
  d.probes_answered = c.probes_answered;
  d.probes_rate_limited = c.probes_rate_limited;
  d.probe_replies_dropped = c.probe_replies_dropped;
  d.addr_queries_sent = c.addr_queries_sent;
  d.addr_queries_answered = c.addr_queries_answered;
  d.addr_queries_refused = c.addr_queries_refused;
  d.addr_queries_rate_limited = c.addr_queries_rate_limited;
  d.addr_replies_accepted = c.addr_replies_accepted;
  d.addr_replies_dropped = c.addr_replies_dropped;
  d.addr_peers_unanswered = c.addr_peers_unanswered;
  d.port_status_sent = c.port_status_sent;
  d.port_status_applied = c.port_status_applied;
  d.port_status_refused = c.port_status_refused;
  d.port_status_acks_dropped = c.port_status_acks_dropped;
  d.port_link_changes = c.port_link_changes;
  d.port_status_stale = c.port_status_stale;
  d.loop_woke_socket = c.loop_woke_socket;
  d.loop_woke_app = c.loop_woke_app;
  d.loop_woke_alarm = c.loop_woke_alarm;
  d.loop_woke_poller_end = c.loop_woke_poller_end;
  d.loop_woke_deadline = c.loop_woke_deadline;
  d.loop_rx_rounds = c.loop_rx_rounds;
  d.poller_rounds = c.poller_rounds;
  d.poller_timeouts = c.poller_timeouts;
  d.other_thread_rounds = c.other_thread_rounds;
  d.app_wakeups = c.app_wakeups;
  d.poller_polls = c.poller_polls;
  d.poller_busy = c.poller_busy;
  d.poller_ready_checks = c.poller_ready_checks;
  d.poller_recvmmsg = c.poller_recvmmsg;
  d.poller_timer_arms = c.poller_timer_arms;
  d.loop_spins = c.loop_spins;
}

// One QP's record without its EVs: attributes, counters, congestion window.
QpRecord qp_record(engine::Qpn qpn, const engine::Engine& e, const engine::QpStats& qs) {
  QpRecord q{};
  q.qpn = qpn;
  if (auto attr = e.query_qp(qpn); attr.ok()) {
    q.state = static_cast<uint8_t>(attr->state);
    q.peer = attr->peer;
    q.dest_qpn = attr->dest_qpn;
    q.mtu = attr->mtu;
    if (attr->cc) {
      q.cc_has_profile = 1;
      q.cc_base_rtt_ns = attr->cc->base_rtt;
      q.cc_target_delay_ns = attr->cc->target_delay;
      q.cc_max_cwnd = attr->cc->max_cwnd;
    }
  }
  q.tx_data_packets = qs.tx_data_packets;
  q.tx_retransmits = qs.tx_retransmits;
  q.tx_payload_bytes = qs.tx_payload_bytes;
  q.rx_data_packets = qs.rx_data_packets;
  q.rx_payload_bytes = qs.rx_payload_bytes;
  q.tx_acks = qs.tx_acks;
  q.rx_acks = qs.rx_acks;
  q.tx_nacks = qs.tx_nacks;
  q.rx_nacks = qs.rx_nacks;
  q.rto_fired = qs.rto_fired;
  q.fast_losses = qs.fast_losses;
  q.spurious_losses = qs.spurious_losses;
  q.tail_probes = qs.tail_probes;
  q.rnr_naks = qs.rnr_naks;
  q.rtt_samples = qs.rtt_samples;
  q.srtt_ns = qs.srtt_ns;
  q.min_rtt_ns = qs.min_rtt_ns;
  q.completions = qs.completions;
  q.error_completions = qs.error_completions;
  if (auto cc = e.cc_stats(qpn)) {
    q.has_cc = 1;
    q.cc_cwnd = cc->cwnd;
    q.cc_min_cwnd = cc->min_cwnd;
    q.cc_acks = cc->acks;
    q.cc_increases = cc->increases();
    q.cc_decreases = cc->decreases + cc->delay_decreases;
    q.cc_quick_adapts = cc->quick_adapts;
    q.cc_trims = cc->trims;
    q.cc_losses = cc->losses;
  }
  return q;
}

// One EV's record: its state, its path's counters, the median and 99th percentile of its last
// `n` RTT samples (microseconds, in any order).
EvRecord ev_record(engine::Qpn qpn, const engine::PathSet& ps, const engine::PathSet::Ev& v,
                   const engine::PathStats& s, const uint32_t* rtt_us, uint32_t n) {
  EvRecord r{};
  r.qpn = qpn;
  r.ev = v.path.ev;
  r.plane = v.path.plane;
  r.spine = static_cast<uint16_t>(srv6::Fabric::spine_of(v.path.ev));
  r.state = static_cast<uint8_t>(v.state);
  r.reason = static_cast<uint8_t>(v.reason);
  r.active = v.active;
  r.plane_drained = ps.plane_drained(v.path.plane) || ps.plane_admin_down(v.path.plane);
  r.changes = v.changes;
  r.since_ns = v.changes ? v.since.count() : 0;
  r.srtt_ns = static_cast<uint64_t>(v.srtt.count());
  if (n > 0) {
    uint32_t sorted[kRttSamples];
    std::copy(rtt_us, rtt_us + n, sorted);
    std::sort(sorted, sorted + n);
    r.rtt_p50_ns = uint64_t{sorted[(n - 1) / 2]} * 1000;
    r.rtt_p99_ns = uint64_t{sorted[std::min<uint32_t>(n - 1, (n * 99 + 99) / 100 - 1)]} * 1000;
  }
  r.tx_packets = s.tx_packets;
  r.tx_bytes = s.tx_bytes;
  r.acked = s.acked;
  r.lost = s.lost;
  r.trims = s.trims;
  r.ecn_marks = s.ecn_marks;
  r.rtt_ns = s.rtt_ns;
  r.probes = s.probes;
  r.probe_replies = s.probe_replies;
  return r;
}

}  // namespace

void Publisher::tick(Time now, engine::Engine& e, const io::UdpCounters& c, bool commands,
                     bool app_call) {
  if (commands && ctl_fd_ >= 0) serve_control(now, e);
  if (app_call) dirty_ = true;  // a QP made, changed or destroyed without traffic
  if (probe_) probe_replies();
  if (probe_) probe_rounds(now);
  if (const uint64_t sig = change_signature(e, c); sig != signature_) {
    signature_ = sig;
    dirty_ = true;
  }
  if (dirty_ && now >= next_publish_) {
    publish(now, e, c);
    dirty_ = false;
    next_publish_ = now + interval_;
  }
}

void Publisher::publish(Time now, engine::Engine& e, const io::UdpCounters& c) {
  SegmentWriter& w = *seg_;
  SegmentHeader& h = w.header();
  w.begin();
  device_counters(w.device(), e, c);
  const uint64_t gen = h.generation + 1;
  Tally t;
  for (engine::Qpn qpn = 1; qpn <= e.max_qpn(); ++qpn) publish_qp(qpn, e, gen, t);
  h.n_qps = t.qps;
  h.n_evs = t.evs;
  h.qps_truncated = t.qps_truncated;
  h.evs_truncated = t.evs_truncated;
  w.commit(now.count());
  // Forget EVs of QPs that are gone.
  for (auto it = memo_.begin(); it != memo_.end();)
    it = it->second->seen == gen ? std::next(it) : memo_.erase(it);
}

void Publisher::publish_qp(engine::Qpn qpn, engine::Engine& e, uint64_t gen, Tally& t) {
  const engine::QpStats* qs = e.qp_stats(qpn);
  if (!qs) return;
  e.path_stats(qpn, path_stats_);
  if (t.qps >= seg_->header().max_qps) {
    ++t.qps_truncated;
    return;
  }
  QpRecord& q = seg_->qps()[t.qps++];
  q = qp_record(qpn, e, *qs);
  q.ev_first = t.evs;
  const engine::PathSet* ps = e.paths(qpn);
  if (!ps) return;
  for (size_t i = 0; i < ps->size(); ++i) {
    const engine::PathSet::Ev& v = ps->ev(i);
    const engine::PathStats s = i < path_stats_.size() ? path_stats_[i] : engine::PathStats{};
    const EvMemo& m = remember(qpn, v, s, gen);
    if (t.evs >= seg_->header().max_evs) {
      ++t.evs_truncated;
      continue;
    }
    seg_->evs()[t.evs++] =
        ev_record(qpn, *ps, v, s, m.rtt_us, std::min<uint32_t>(m.n, kRttSamples));
  }
  q.ev_count = t.evs - q.ev_first;
}

Publisher::EvMemo& Publisher::remember(engine::Qpn qpn, const engine::PathSet::Ev& v,
                                       const engine::PathStats& s, uint64_t gen) {
  auto& memo = memo_[uint64_t{qpn} << 32 | v.path.ev];
  if (!memo) memo = std::make_unique<EvMemo>();
  EvMemo& m = *memo;
  if (v.changes < m.changes) m = EvMemo{};  // the QP was reset or remade
  m.seen = gen;
  if (v.changes != m.changes) {
    EventRecord r{};
    r.at_ns = v.since.count();
    r.qpn = qpn;
    r.ev = v.path.ev;
    r.plane = v.path.plane;
    r.from = m.state;
    r.to = static_cast<uint8_t>(v.state);
    r.reason = static_cast<uint8_t>(v.reason);
    r.missed = v.changes - m.changes - 1;
    seg_->push_event(r);
    m.changes = v.changes;
    m.state = static_cast<uint8_t>(v.state);
  }
  if ((s.acked != m.acked || s.probe_replies != m.probe_replies) && s.rtt_ns > 0)
    m.rtt_us[m.n++ % kRttSamples] =
        static_cast<uint32_t>(std::min<uint64_t>(s.rtt_ns / 1000, UINT32_MAX));
  m.acked = s.acked;
  m.probe_replies = s.probe_replies;
  return m;
}

// ---- control ------------------------------------------------------------------------------

void Publisher::serve_control(Time now, engine::Engine& e) {
  char buf[65536];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  for (int k = 0; k < 16; ++k) {
    sockaddr_un from{};
    iovec iov{buf, sizeof buf};
    msghdr m{};
    m.msg_name = &from;
    m.msg_namelen = sizeof from;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(ctl_fd_, &m, MSG_DONTWAIT);
    if (n < 0) return;
    // Only root or this process's own user may command it (the socket's mode says the
    // same; the kernel's credentials close the window between bind and chmod).
    const cmsghdr* c = CMSG_FIRSTHDR(&m);
    ucred cred{};
    const bool have = c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS;
    if (have) std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
    if (!have || (cred.uid != 0 && cred.uid != ::geteuid())) {
      reply(from, m.msg_namelen,
            json{{"ok", false}, {"error", "needs CAP_NET_ADMIN (run as root)"}}.dump());
      continue;
    }
    bool deferred = false;
    std::string out;
    try {
      out =
          handle(now, e, std::string(buf, static_cast<size_t>(n)), from, m.msg_namelen, &deferred);
    } catch (const std::exception&) {
      // A field of the wrong type, or text that is not UTF-8: refuse, keep the loop alive.
      deferred = false;
      out = json{{"ok", false}, {"error", "malformed request"}}.dump();
    }
    if (!deferred) reply(from, m.msg_namelen, out);
  }
}

void Publisher::reply(const sockaddr_un& to, socklen_t len, const std::string& body) {
  if (len <= sizeof(sa_family_t)) return;  // unbound sender: nowhere to answer
  (void)::sendto(ctl_fd_, body.data(), body.size(), MSG_DONTWAIT,
                 reinterpret_cast<const sockaddr*>(&to), len);
}

Result<std::pair<engine::PeerId, uint32_t>, std::string> Publisher::peer_by_name(
    const std::string& name) {
  for (const Peer& p : peers_) {
    if (p.name == name || (p.host != UINT32_MAX && name == std::to_string(p.host)))
      return std::make_pair(p.id, p.host);
  }
  const std::string dev = "mrc" + std::to_string(index_);
  if (cfg_.path_mode != io::PathMode::kSrv6 || !cfg_.fabric)
    return Err(dev + " has no peer " + name);
  // Any host of the fabric: "h<N>", "<N>" or its name in the fabric file.
  const srv6::FabricConfig& fc = cfg_.fabric->config();
  std::optional<uint32_t> host;
  for (uint32_t h = 0; h < fc.hosts && !host; ++h)
    if (name == "h" + std::to_string(h) || name == std::to_string(h) ||
        (h < fc.names.size() && name == fc.names[h]))
      host = h;
  if (!host) return Err(dev + " has no peer " + name + " (not a host of the fabric)");
  if (*host == cfg_.local_host) return Err(dev + ": " + name + " is this host");
  if (cfg_.peer_port == 0)
    return Err(dev + " has no peer " + name + " and ephemeral ports (port 0): only a peer it " +
               "is connected to can be probed");
  auto id = hooks_.add_fabric_peer(*host);
  if (!id.ok()) return Err(dev + ": " + id.error());
  return std::make_pair(*id, *host);
}

/// One parsed control request: the JSON, this device's name, and the QP it names (0: all).
struct Publisher::Request {
  json rq;
  std::string dev;
  engine::Qpn only_qpn = 0;
  std::string fail(const std::string& why) const {
    return json{{"ok", false}, {"device", dev}, {"error", why}}.dump();
  }
  std::string ok(json fields) const {
    json out{{"ok", true}, {"device", dev}};
    out.update(fields);
    return out.dump();
  }
};

std::string Publisher::handle(Time now, engine::Engine& e, const std::string& request,
                              const sockaddr_un& from, socklen_t from_len, bool* deferred) {
  Request r;
  r.dev = "mrc" + std::to_string(index_);
  r.rq = json::parse(request, nullptr, false);
  const json& rq = r.rq;
  if (rq.is_discarded() || !rq.is_object() || !rq.contains("cmd") || !rq["cmd"].is_string())
    return r.fail("request is not a JSON object with a \"cmd\"");
  const std::string cmd = rq["cmd"];
  r.only_qpn = rq.value("qpn", 0u);
  if (r.only_qpn != 0 && e.qp_stats(r.only_qpn) == nullptr)
    return r.fail(r.dev + " has no QP " + std::to_string(r.only_qpn));
  if (cmd == "ping") return r.ok({{"pid", ::getpid()}});
  if (cmd == "deny") return deny(now, e, r);
  if (cmd == "drain") return drain(e, r);
  if (cmd == "cc_show" || cmd == "cc_set") return cc(e, r, cmd == "cc_set");
  if (cmd == "probe") return probe(now, r, from, from_len, deferred);
  return r.fail("unknown command " + cmd);
}

std::string Publisher::deny(Time now, engine::Engine& e, const Request& r) {
  if (!r.rq.contains("ev") || !r.rq["ev"].is_number_unsigned()) return r.fail("deny: needs \"ev\"");
  const uint32_t ev = r.rq["ev"];
  const bool on = r.rq.value("deny", true);
  json qps = json::array();
  for (engine::Qpn q = 1; q <= e.max_qpn(); ++q) {
    if (r.only_qpn != 0 && q != r.only_qpn) continue;
    const engine::PathSet* ps = e.paths(q);
    if (!ps || ps->find(ev) < 0) continue;
    if (e.deny_ev(now, q, ev, on).ok()) qps.push_back(q);
  }
  if (qps.empty()) return r.fail(r.dev + ": no QP has EV " + std::to_string(ev));
  return r.ok({{"qps", qps}});
}

std::string Publisher::drain(engine::Engine& e, const Request& r) {
  if (!r.rq.contains("plane") || !r.rq["plane"].is_number_unsigned())
    return r.fail("drain: needs \"plane\"");
  const uint32_t plane = r.rq["plane"];
  if (plane >= cfg_.planes.size())
    return r.fail(r.dev + " has no plane " + std::to_string(plane) + " (planes 0.." +
                  std::to_string(cfg_.planes.size() - 1) + ")");
  const bool on = r.rq.value("drain", true);
  if (!e.set_plane_drained(static_cast<uint16_t>(plane), on).ok())
    return r.fail("plane " + std::to_string(plane) + ": refused by the engine");
  dirty_ = true;
  return r.ok({{"plane", plane}, {"drained", on}});
}

namespace {

// cc_set's `set` applied to `c`: each field by its NsccConfig name; an error naming the field.
Status<std::string> set_cc_fields(engine::NsccConfig& c, const json& set) {
  for (const auto& [k, v] : set.items()) {
    if (!v.is_number()) return Err(k + ": not a number");
    const double x = v.get<double>();
    if (x < 0) return Err(k + ": must be >= 0");
    // The integer fields are 32 bits: a larger value is refused, not wrapped.
    const auto u = static_cast<uint32_t>(std::min(x, 4294967295.0));
    if (x > 4294967295.0 && k != "eta" && k != "fi" && k != "fi_scale" && k != "gamma" &&
        k != "max_md_jump" && k != "alpha")
      return Err(k + ": " + v.dump() + " is above 4294967295");
    if (k == "base_rtt")
      c.base_rtt = u;
    else if (k == "target_delay")
      c.target_delay = u;
    else if (k == "max_cwnd")
      c.max_cwnd = u;
    else if (k == "adjust_bytes_threshold")
      c.adjust_bytes_threshold = u;
    else if (k == "adjust_period_threshold")
      c.adjust_period_threshold = u;
    else if (k == "qa_threshold")
      c.qa_threshold = u;
    else if (k == "qa_gate")
      c.qa_gate = static_cast<uint8_t>(std::min(u, 255u));
    else if (k == "disable_qa")
      c.disable_qa = static_cast<uint8_t>(u != 0);
    else if (k == "eta")
      c.eta = x;
    else if (k == "fi")
      c.fi = x;
    else if (k == "fi_scale")
      c.fi_scale = x;
    else if (k == "gamma")
      c.gamma = x;
    else if (k == "max_md_jump")
      c.max_md_jump = x;
    else if (k == "alpha")
      c.alpha = x;
    else
      return Err("unknown field " + k);
  }
  if (const char* bad = engine::validate(c)) return Err(std::string(bad));
  return {};
}

// A QP's profile as cc_show and cc_set answer it.
json cc_json(engine::Qpn q, const engine::NsccConfig& c, bool own) {
  return json{{"qpn", q},
              {"profile", own ? "qp" : "engine default"},
              {"disable_qa", c.disable_qa},
              {"adjust_bytes_threshold", c.adjust_bytes_threshold},
              {"adjust_period_threshold", c.adjust_period_threshold},
              {"base_rtt", c.base_rtt},
              {"eta", c.eta},
              {"fi", c.fi},
              {"fi_scale", c.fi_scale},
              {"gamma", c.gamma},
              {"max_md_jump", c.max_md_jump},
              {"max_cwnd", c.max_cwnd},
              {"qa_gate", c.qa_gate},
              {"qa_threshold", c.qa_threshold},
              {"target_delay", c.target_delay},
              {"alpha", c.alpha}};
}

}  // namespace

std::string Publisher::cc(engine::Engine& e, const Request& r, bool set) {
  const json fields = r.rq.value("set", json::object());
  if (set && (!fields.is_object() || fields.empty())) return r.fail("nothing to set");
  json qps = json::array();
  for (engine::Qpn q = 1; q <= e.max_qpn(); ++q) {
    if (r.only_qpn != 0 && q != r.only_qpn) continue;
    auto a = e.query_qp(q);
    if (!a.ok()) continue;
    // What the QP's window runs with now (the learned base RTT included); before RTS what it
    // will start with. With CC off, cc_set starts from the engine's default profile (a
    // profile turns CC on for its QP) and cc_show has nothing to show.
    auto live = e.cc_config(q);
    if (!live) live = engine::effective_cc(cfg_.engine, a->mtu, a->cc);
    if (!live && !set) continue;
    engine::NsccConfig c =
        live ? *live
             : engine::derived_cc(cfg_.engine, a->mtu, engine::cc_start_base_rtt(cfg_.engine));
    if (set) {
      if (auto st = set_cc_fields(c, fields); !st.ok()) return r.fail(st.error());
      if (!engine::configurable_in(a->state)) continue;
      engine::QpAttr na;
      na.cc = c;
      if (!e.modify_qp(q, na, engine::attr::kCc).ok())
        return r.fail("QP " + std::to_string(q) + " refused the profile");
    }
    qps.push_back(cc_json(q, c, a->cc.has_value() || set));
  }
  if (set) dirty_ = true;
  return r.ok({{"qps", qps}});
}

std::string Publisher::probe(Time now, const Request& r, const sockaddr_un& from,
                             socklen_t from_len, bool* deferred) {
  if (probe_) return r.fail(r.dev + ": a probe is already running");
  const std::string name = r.rq.value("peer", std::string());
  auto peer = peer_by_name(name);
  if (!peer.ok()) return r.fail(peer.error());
  auto s = std::make_unique<ProbeSession>();
  s->peer = peer->first;
  s->peer_name = name;
  s->count = std::clamp(r.rq.value("count", 5u), 1u, 64u);
  s->interval =
      Duration{int64_t{std::clamp(r.rq.value("interval_ms", 20u), 1u, 1000u)} * 1'000'000};
  s->timeout =
      Duration{int64_t{std::clamp(r.rq.value("timeout_ms", 300u), 10u, 10000u)} * 1'000'000};
  for (const engine::Path& path : hooks_.spray_paths(peer->second))
    s->targets.push_back(ProbeTarget{path.ev, path.plane});
  if (s->targets.empty() || s->targets.size() > 0xFFFF)
    return r.fail(r.dev + ": no paths to " + name);
  s->client = from;
  s->client_len = from_len;
  s->token = hooks_.probes->open();
  s->next_round = now;
  probe_ = std::move(s);
  probe_rounds(now);
  *deferred = true;
  return {};
}

void Publisher::probe_rounds(Time now) {
  ProbeSession& s = *probe_;
  while (s.rounds < s.count && now >= s.next_round) {
    for (size_t i = 0; i < s.targets.size(); ++i) {
      ProbeTarget& t = s.targets[i];
      ++t.sent;
      (void)hooks_.probes->send(now, s.token, s.peer, engine::Path{t.ev, t.plane},
                                s.rounds << 16 | static_cast<uint32_t>(i));
    }
    ++s.rounds;
    s.next_round = now + s.interval;
    if (s.rounds == s.count) s.finish = now + s.timeout;
  }
  if (s.rounds < s.count || now < s.finish) return;
  json paths = json::array();
  for (const ProbeTarget& t : s.targets) {
    const double loss = t.sent ? 1.0 - static_cast<double>(t.received) / t.sent : 1.0;
    json p{{"ev", t.ev},        {"plane", t.plane},       {"spine", srv6::Fabric::spine_of(t.ev)},
           {"sent", t.sent},    {"received", t.received}, {"loss", loss},
           {"bad", loss >= 0.5}};
    if (t.received > 0) {
      p["rtt_min_us"] = t.rtt_min / 1000.0;
      p["rtt_avg_us"] = static_cast<double>(t.rtt_sum) / t.received / 1000.0;
      p["rtt_max_us"] = t.rtt_max / 1000.0;
    }
    paths.push_back(std::move(p));
  }
  const json out{{"ok", true},
                 {"device", "mrc" + std::to_string(index_)},
                 {"peer", s.peer_name},
                 {"paths", paths}};
  reply(s.client, s.client_len, out.dump());
  hooks_.probes->close(s.token);
  probe_.reset();
}

void Publisher::probe_replies() {
  ProbeSession& s = *probe_;
  for (const io::ProbeReply& r : hooks_.probes->take(s.token)) {
    const uint32_t round = r.seq >> 16, i = r.seq & 0xFFFF;
    if (i >= s.targets.size() || round >= 64 || round >= s.rounds) continue;  // never sent
    ProbeTarget& t = s.targets[i];
    if (r.path.ev != t.ev || r.path.plane != t.plane || (t.replied_rounds >> round) & 1) continue;
    t.replied_rounds |= uint64_t{1} << round;
    const int64_t rtt = r.rtt.count();
    t.rtt_min = t.received == 0 ? rtt : std::min(t.rtt_min, rtt);
    t.rtt_max = std::max(t.rtt_max, rtt);
    t.rtt_sum += rtt;
    ++t.received;
  }
}

io::ObserverFactory publisher_factory() {
  return [](const io::UdpConfig& cfg, const std::vector<sockaddr_in6>& locals,
            io::DriverHooks hooks) -> std::unique_ptr<io::DriverObserver> {
    std::string why;  // no statistics is not an error: the datapath runs without
    return Publisher::create(cfg, locals, std::move(hooks), &why);
  };
}

void attach_publisher(io::UdpConfig& cfg) { cfg.observer = publisher_factory(); }

}  // namespace mrc::observe
