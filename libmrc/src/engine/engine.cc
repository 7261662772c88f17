// Engine: resource tables, the QP state machine, datagram dispatch, the
// transmit scheduler and timers. Sending is in sender.cc, receiving in receiver.cc.
#include "mrc/engine/engine.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "engine/internal.h"

namespace mrc::engine {

static_assert(wire::kMaxAddrPlanes == kMaxPlanes,
              "an ADDR_REPLY lists every plane a host may have");

namespace {

void default_copy(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }

bool valid_mtu(uint32_t mtu) {
  return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096 || mtu == 8192;
}

/// A QP in RESET with its queues sized.
std::unique_ptr<Qp> new_qp(Qpn qpn, const QpInit& init) {
  auto q = std::make_unique<Qp>();
  q->qpn = qpn;
  q->init = init;
  q->snd.sq.init(init.max_send_wr);
  q->rcv.rq.init(init.max_recv_wr);
  q->snd.rsp.init(kMaxReadResponses);
  q->retry = RetryPolicy{q->attr.timeout, q->attr.retry_cnt_linear, q->attr.retry_cnt_exp};
  return q;
}

}  // namespace

// ---- scatter/gather ------------------------------------------------------------------

template <typename F>
static bool sg_walk(std::span<const Seg> sg, uint64_t offset, size_t n, F&& f) {
  size_t i = 0;
  while (i < sg.size() && offset >= sg[i].len) offset -= sg[i++].len;
  size_t done = 0;
  while (done < n) {
    if (i == sg.size()) return false;
    const size_t take = std::min<uint64_t>(n - done, sg[i].len - offset);
    f(sg[i].host + offset, done, take);
    done += take;
    offset = 0;
    ++i;
  }
  return true;
}

bool sg_copy_out(std::span<const Seg> sg, uint64_t offset, uint8_t* dst, size_t n,
                 PayloadCopy copy) {
  return sg_walk(sg, offset, n, [&](uint8_t* p, size_t at, size_t k) { copy(dst + at, p, k); });
}

bool sg_copy_in(std::span<const Seg> sg, uint64_t offset, const uint8_t* src, size_t n,
                PayloadCopy copy) {
  return sg_walk(sg, offset, n, [&](uint8_t* p, size_t at, size_t k) { copy(p, src + at, k); });
}

std::span<const uint8_t> sg_contiguous(std::span<const Seg> sg, uint64_t offset, size_t n) {
  for (const Seg& s : sg) {
    if (offset < s.len) {
      if (s.len - offset >= n) return {s.host + offset, n};
      return {};
    }
    offset -= s.len;
  }
  return {};
}

// ---- Core ----------------------------------------------------------------------------

Core::Core(const EngineConfig& c) : cfg(c) {
  placement = cfg.rx_placement && !cfg.copy;
  if (!cfg.copy) cfg.copy = default_copy;
  mrs.emplace_back();  // slot 0 is never used, so no key is 0
  uint32_t w = 64;
  while (w < cfg.recv_window) w <<= 1;
  cfg.recv_window = w;
  if (cfg.ack_every == 0) cfg.ack_every = 1;
}

Qp* Core::qp(Qpn qpn) {
  if (qpn == 0 || qpn > qps.size()) return nullptr;
  return qps[qpn - 1].get();
}

const Mr* Core::mr(uint32_t key) const {
  const size_t slot = key >> 8;
  if (slot >= mrs.size() || mrs[slot].key != key || key == 0) return nullptr;
  return &mrs[slot];
}

void Core::make_ready(Qp& q) {
  if (q.in_ready || !sends_in(q.state)) return;
  q.in_ready = true;
  ready.push_back(q.qpn);
  // Its turn comes after the QPs ahead of it: their sends hide the fetch of what its
  // first packet writes (cold when thousands of QPs take turns), and of its window's line
  // (an allocation of its own: no fetch of the QP's lines brings it).
  q.snd.prefetch_next();
  q.paths.prefetch_next();
  if (q.cc) __builtin_prefetch(q.cc.get());
}

void Core::prefetch_turns() {
  // ready[0] takes its turn now; ready[1] is next, ready[2] after it.
  if (ready.size() < 2) return;
  if (const Qp* n = qp(ready[1])) n->prefetch_send_blocks(kBurst);
  if (ready.size() < 3) return;
  if (const Qp* n = qp(ready[2])) n->prefetch_send();
}

void Core::want_ack(Qp& q) {
  if (q.in_ackq) return;
  q.in_ackq = true;
  ackq.push_back(q.qpn);
}

void Core::complete(Qp& q, CqId id, const Completion& c) {
  ++q.stats.completions;
  if (c.status != WcStatus::kSuccess) ++q.stats.error_completions;
  if (id == 0 || id > cqs.size() || !cqs[id - 1].live) return;  // an XRC target QP's: no CQ
  Cq& cq = cqs[id - 1];
  if (cq.q.size() >= cq.depth) {
    push_event(Event{EventType::kCqOverflow, q.qpn, id, c.status});
    return;
  }
  cq.q.push_back(c);
}

void Core::fail_qp(Qp& q, WcStatus cause, uint64_t culprit, bool fatal_event) {
  if (!ev_scratch.empty()) ev_events(q);  // path changes that led here are this QP's
  const bool was_error = q.state == QpState::kError;
  q.state = QpState::kError;
  if (!tm_msgs.empty() || !tm_reads.empty()) tm_forget(q.qpn);  // its receives flush
  if (culprit == UINT64_MAX && !q.snd.sq.empty()) culprit = q.snd.sq.head();
  auto flush_local = [&](uint64_t upto) {  // local completions posted before WQE `upto`
    while (!q.local_after.empty() && q.local_after.front().first <= upto) {
      Completion k = q.local_after.front().second;
      k.status = WcStatus::kWrFlushErr;
      complete(q, q.init.send_cq, k);
      q.local_after.erase(q.local_after.begin());
    }
  };
  for (uint64_t s = q.snd.sq.head(); s != q.snd.sq.tail(); ++s) {
    flush_local(s);
    const SendWqe& w = q.snd.sq.at(s);
    Completion c;
    c.wr_id = w.wr_id;
    c.status = s == culprit ? cause : WcStatus::kWrFlushErr;
    c.opcode = w.op == Opcode::kRead                                 ? WcOpcode::kRead
               : w.op == Opcode::kCmpSwap                            ? WcOpcode::kCmpSwap
               : w.op == Opcode::kFetchAdd                           ? WcOpcode::kFetchAdd
               : w.op == Opcode::kAtomicWrite                        ? WcOpcode::kAtomicWrite
               : (w.op == Opcode::kSend || w.op == Opcode::kSendImm) ? WcOpcode::kSend
                                                                     : WcOpcode::kWrite;
    c.qpn = q.qpn;
    complete(q, q.init.send_cq, c);
  }
  flush_local(UINT64_MAX);
  q.snd.sq.clear();
  q.sq_wimms = 0;
  q.snd.pkt_wqe = q.snd.sq.tail();
  q.snd.rsp.clear();
  q.snd.pkt_rsp = q.snd.rsp.tail();
  q.reads.clear();
  for (uint64_t s = q.rcv.rq.head(); s != q.rcv.rq.tail(); ++s) {
    const RecvWqe& r = q.rcv.rq.at(s);
    if (r.pending) continue;  // an XRC slot no receive was taken for
    Completion c;
    c.wr_id = r.wr_id;
    c.status = WcStatus::kWrFlushErr;
    c.opcode = WcOpcode::kRecv;
    c.qpn = q.qpn;
    complete(q, r.cq ? r.cq : q.init.recv_cq, c);
  }
  q.rcv.rq.clear();
  for (auto& p : q.snd.tx) p = TxPkt{};
  q.snd.tx_not_before.clear();
  q.snd.snd_una = q.snd.snd_nxt;
  q.snd.bytes_in_flight = 0;
  q.paths.clear_inflight();
  q.snd.list_head = q.snd.list_tail = kNoLink;
  q.paths.clear_tx();
  q.loss.rack_evs.clear();
  q.loss.tlp_go = false;
  q.snd.retx.clear();
  q.pending_reads = 0;
  q.timers.cancel_all();
  if (!was_error && fatal_event) push_event(Event{EventType::kQpFatal, q.qpn, 0, cause});
}

void Core::compact_heap() {
  size_t kept = 0;
  for (const Deadline& d : heap)
    if (timer_slots[d.qpn - 1].live(d)) heap[kept++] = d;
  heap.resize(kept);
  std::make_heap(heap.begin(), heap.end(), std::greater<>{});
  heap_kept = kept;
}

void Core::settle_heap() {
  while (!heap.empty()) {
    Deadline& top = heap.front();
    TimerSlot& s = timer_slots[top.qpn - 1];
    const bool live = s.live(top);
    if (live && s.due <= top.at) return;  // a real deadline
    if (!live || s.due == kNever) {       // superseded, or no timer left
      if (live) s.scheduled = kNever;
      std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
      heap.pop_back();
      continue;
    }
    // The QP's deadline moved later: its entry takes the new time where it is and sinks
    // (one sift, not a pop and a push: a tail-loss probe re-armed per ACK does this often).
    s.scheduled = top.at = s.due;
    const Deadline moved = top;
    size_t i = 0;
    const size_t n = heap.size();
    for (size_t c = 1; c < n; i = c, c = 2 * i + 1) {
      if (c + 1 < n && heap[c + 1] < heap[c]) ++c;
      if (!(heap[c] < moved)) break;
      heap[i] = heap[c];
    }
    heap[i] = moved;
  }
}

// ---- paths ---------------------------------------------------------------------------

void Core::push_event(const Event& e) {
  if (events.size() >= 65536) {
    ++events_dropped;
    return;
  }
  events.push_back(e);
  events.back().dropped_before = events_dropped;
  events_dropped = 0;
}

void Core::ev_events(Qp& q) {
  for (const EvEvent& v : ev_scratch) {
    if (q.health && v.reason == EvReason::kPlaneDrained)  // shared with the peer's other QPs
      health.hold_until(*q.health, v.plane, drained_hold_end(q, v.at), v.at);
    if (q.health && v.reason == EvReason::kPlaneRestored) health.release(*q.health, v.plane);
    Event e;
    e.type = EventType::kEvState;
    e.qpn = q.qpn;
    e.ev = v.ev;
    e.plane = v.plane;
    e.from = static_cast<uint8_t>(v.from);
    e.to = static_cast<uint8_t>(v.to);
    e.reason = static_cast<uint8_t>(v.reason);
    e.at = v.at;
    push_event(e);
  }
  ev_scratch.clear();
  q.timers.set(Timer::kProbe, q.paths.next_probe_time());
}

Time Core::drained_hold_end(const Qp& q, Time now) const {
  const Time next = q.paths.next_probe_time();
  const Time floor = now + q.paths.policy().probe_interval_max;
  return next == kNever ? floor : std::max(floor, next);
}

void Core::path_timeout(Qp& q, Time now) {
  if (!q.timers.expired(Timer::kProbe, now)) return;
  if (!sends_in(q.state)) {
    q.timers.cancel(Timer::kProbe);
    return;
  }
  q.paths.poll_probes(now, probe_scratch, ev_scratch);
  // A plane this QP still probes as drained stays held for the peer until its next probe.
  if (q.health && q.paths.count(EvState::kAssumedBad) > 0) {
    const Time until = drained_hold_end(q, now);
    for (uint16_t pl = 0; pl < kMaxPlanes; ++pl)
      if (q.paths.plane_drained(pl)) health.hold_until(*q.health, pl, until, now);
  }
  for (const ProbeRequest& r : probe_scratch) send_probe(q, r.index, r.seq);
  probe_scratch.clear();
  ev_events(q);
}

void Core::send_probe(Qp& q, uint16_t index, uint32_t seq) {
  Control c;
  c.kind = wire::Kind::kProbe;
  c.qpn = q.qpn;
  c.path = q.paths.path(index);
  c.psn = seq;
  ++q.signals(index).probes;
  ctrl.push_back(c);
}

void Core::on_probe_reply(Qp& q, Time now, const wire::Packet& p) {
  const int i = q.paths.find(p.probe_reply.echo_ev);
  if (i < 0) {
    stats.drop(Drop::kBadAck);
    return;
  }
  const auto echo = Time{static_cast<int64_t>(p.probe_reply.echo_ts)};
  if (echo <= now) {
    q.paths.set_rtt_sample(static_cast<size_t>(i), static_cast<uint64_t>((now - echo).count()));
    learn_base_rtt(q, now, now - echo + q.cc_rtt.spray());
  }
  ++q.signals(static_cast<uint16_t>(i)).probe_replies;
  health.on_probe_reply_ev(p.probe_reply.echo_ev, now);  // the EV carries packets, any peer
  q.paths.on_probe_reply(static_cast<uint16_t>(i), p.common.psn,
                         p.probe_reply.probe_flags & wire::ack_flag::kEcnEcho, now, ev_scratch);
  ev_events(q);
  if (has_data(q, now)) make_ready(q);
}

// ---- Engine --------------------------------------------------------------------------

struct Engine::Impl : Core {
  using Core::Core;
};

Engine::Engine(const EngineConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
Engine::~Engine() = default;

namespace {
// register_mr's ranges: a mapping of its own, or the whole address space (nullptr, iova 0,
// UINT64_MAX bytes: verbs' implicit ODP MR).
bool mr_range_ok(const void* addr, uint64_t len, uint64_t iova) {
  if (addr == nullptr && iova == 0 && len == UINT64_MAX) return true;
  return !(addr == nullptr && len > 0) && iova + len >= iova;
}
}  // namespace

Result<uint32_t, Error> Engine::register_mr(void* addr, uint64_t len, uint64_t iova,
                                            uint32_t access, uint32_t pd) {
  Core& c = *impl_;
  if (!mr_range_ok(addr, len, iova)) return Err{Error::kInvalidArgument};
  if (c.live_mrs >= c.cfg.max_mrs) return Err{Error::kResourceLimit};
  size_t slot;
  if (c.free_mrs.size() > 16) {  // reuse slots late; the generation byte kills old keys
    slot = c.free_mrs.front();
    c.free_mrs.pop_front();
  } else {
    if (c.mrs.size() >= (1u << 24) - 1) return Err{Error::kResourceLimit};  // key space
    c.mrs.emplace_back();
    slot = c.mrs.size() - 1;
  }
  Mr& m = c.mrs[slot];
  const uint8_t gen = static_cast<uint8_t>((m.key & 0xff) + 1);
  m.host = static_cast<uint8_t*>(addr);
  m.iova = iova;
  m.len = len;
  m.access = access;
  m.pd = pd;
  m.key = static_cast<uint32_t>(slot << 8) | gen;
  ++c.live_mrs;
  return m.key;
}

Status<Error> Engine::deregister_mr(uint32_t key) {
  Core& c = *impl_;
  if (!c.mr(key)) return Err{Error::kNoSuchMr};
  Mr& m = c.mrs[key >> 8];
  if (m.windows) return Err{Error::kBadState};  // windows are bound to its memory
  if (m.window) c.unbind(m);
  --c.live_mrs;
  m = Mr{};
  m.key = key & 0xff;  // free: matches no key (slot bits 0), generation kept for the next one
  // A slot whose generation would wrap is retired, so no key ever comes back.
  if ((key & 0xff) != 0xff) c.free_mrs.push_back(key >> 8);
  return {};
}

// Memory windows: the work is Core's (mw.cc).
Result<uint32_t, Error> Engine::alloc_mw(uint32_t pd) {
  // A registration that covers nothing and grants nothing, marked a window.
  static uint8_t nothing;  // a valid address for register_mr's checks; never accessed
  auto key = register_mr(&nothing, 1, reinterpret_cast<uint64_t>(&nothing), 0, pd);
  if (!key) return key;
  Mr& w = impl_->mrs[*key >> 8];
  w.window = true;
  impl_->unbind(w);
  return key;
}

Status<Error> Engine::bind_mw(uint32_t key, uint32_t new_key, uint32_t mr, uint64_t addr,
                              uint64_t len, uint32_t access, uint32_t pd) {
  return impl_->bind_window(key, new_key, mr, addr, len, access, pd);
}

Status<Error> Engine::invalidate_mw(uint32_t key, uint32_t pd) {
  if (!impl_->invalidate_window(key, pd)) return Err{Error::kNoSuchMr};
  return {};
}

Status<Error> Engine::post_local(Qpn qpn, uint64_t wr_id, WcOpcode op, bool signaled) {
  return impl_->post_local(qpn, wr_id, op, signaled);
}

Status<Error> Engine::reregister_mr(uint32_t key, void* addr, uint64_t len, uint64_t iova,
                                    uint32_t access, uint32_t pd) {
  Core& c = *impl_;
  if (!c.mr(key) || c.mr(key)->window) return Err{Error::kNoSuchMr};
  if (!mr_range_ok(addr, len, iova)) return Err{Error::kInvalidArgument};
  Mr& m = c.mrs[key >> 8];
  if (m.windows) return Err{Error::kBadState};  // windows are bound to its memory
  m.host = static_cast<uint8_t*>(addr);
  m.iova = iova;
  m.len = len;
  m.access = access;
  m.pd = pd;
  return {};
}

Status<Error> Engine::check_mr(uint32_t key, uint64_t addr, uint64_t len, uint32_t pd) const {
  const Mr* m = impl_->mr(key);
  if (!m || m->pd != pd) return Err{Error::kNoSuchMr};
  if (!m->covers(addr, len)) return Err{Error::kLocalAccess};
  return {};
}

Result<CqId, Error> Engine::create_cq(uint32_t depth) {
  Core& c = *impl_;
  if (depth == 0) return Err{Error::kInvalidArgument};
  for (size_t i = 0; i < c.cqs.size(); ++i) {
    if (!c.cqs[i].live) {
      c.cqs[i] = Cq{depth, {}, 0, true};
      return static_cast<CqId>(i + 1);
    }
  }
  if (c.cqs.size() >= c.cfg.max_cqs) return Err{Error::kResourceLimit};
  c.cqs.push_back(Cq{depth, {}, 0, true});
  return static_cast<CqId>(c.cqs.size());
}

Status<Error> Engine::destroy_cq(CqId id) {
  Core& c = *impl_;
  if (id == 0 || id > c.cqs.size() || !c.cqs[id - 1].live) return Err{Error::kNoSuchCq};
  if (c.cqs[id - 1].users) return Err{Error::kBadState};
  c.cqs[id - 1] = Cq{};
  return {};
}

Status<Error> Engine::resize_cq(CqId id, uint32_t depth) {
  Core& c = *impl_;
  if (id == 0 || id > c.cqs.size() || !c.cqs[id - 1].live) return Err{Error::kNoSuchCq};
  Cq& q = c.cqs[id - 1];
  if (depth == 0 || depth < q.q.size()) return Err{Error::kInvalidArgument};
  q.depth = depth;
  return {};
}

size_t Engine::poll_cq(CqId id, std::span<Completion> out) {
  Core& c = *impl_;
  if (id == 0 || id > c.cqs.size() || !c.cqs[id - 1].live) return 0;
  auto& q = c.cqs[id - 1].q;
  if (q.empty()) return 0;
  const size_t n = std::min(out.size(), q.size());
  std::copy_n(q.begin(), n, out.begin());
  q.erase(q.begin(), q.begin() + static_cast<ptrdiff_t>(n));
  return n;
}

size_t Engine::cq_depth(CqId id) const {
  const Core& c = *impl_;
  if (id == 0 || id > c.cqs.size() || !c.cqs[id - 1].live) return 0;
  return c.cqs[id - 1].q.size();
}

Result<uint32_t, Error> Engine::create_srq(uint32_t max_wr, const XrcSrqInit& xrc) {
  Core& c = *impl_;
  if (max_wr == 0 || max_wr > (1u << 20)) return Err{Error::kInvalidArgument};
  if (xrc.xrcd && (xrc.cq == 0 || xrc.cq > c.cqs.size() || !c.cqs[xrc.cq - 1].live))
    return Err{Error::kNoSuchCq};
  size_t i = 0;
  while (i < c.srqs.size() && c.srqs[i].live) ++i;
  if (xrc.xrcd && i + 1 > 0xffff) return Err{Error::kResourceLimit};  // 16 bits on the wire
  if (i == c.srqs.size()) c.srqs.emplace_back();
  c.srqs[i] = Srq{};
  c.srqs[i].max_wr = max_wr;
  c.srqs[i].live = true;
  if (xrc.xrcd) {
    c.srqs[i].xrc = xrc;
    ++c.cqs[xrc.cq - 1].users;
  }
  return static_cast<uint32_t>(i + 1);
}

Result<uint32_t, Error> Engine::create_tm_srq(uint32_t max_wr, CqId cq, uint32_t max_tags) {
  Core& c = *impl_;
  if (max_tags == 0 || max_tags > (1u << 16)) return Err{Error::kInvalidArgument};
  if (cq == 0 || cq > c.cqs.size() || !c.cqs[cq - 1].live) return Err{Error::kNoSuchCq};
  auto id = create_srq(max_wr);
  if (id) c.make_tm(*id, cq, max_tags);
  return id;
}

Result<uint32_t, Error> Engine::post_srq_op(uint32_t srq, const SrqOp& op) {
  return impl_->post_srq_op(srq, op);
}

Status<Error> Engine::destroy_srq(uint32_t id) {
  Srq* s = impl_->srq(id);
  if (!s) return Err{Error::kInvalidArgument};
  if (s->users) return Err{Error::kBadState};
  if (s->xrc.xrcd) --impl_->cqs[s->xrc.cq - 1].users;
  if (s->tm) --impl_->cqs[s->tm->cq - 1].users;
  *s = Srq{};
  return {};
}

Status<Error> Engine::post_srq_recv(uint32_t id, const RecvWr& wr) {
  Srq* s = impl_->srq(id);
  if (!s) return Err{Error::kInvalidArgument};
  if (s->q.size() >= s->max_wr) return Err{Error::kQueueFull};
  if (wr.sg.size() > kMaxSge) return Err{Error::kInvalidArgument};
  RecvWqe r;
  r.wr_id = wr.wr_id;
  for (const Sge& g : wr.sg) {  // checked when data lands (Core::resolve_recv)
    if (g.length == 0) continue;
    r.posted.push_back(g);
    r.capacity += g.length;
  }
  s->q.push_back(std::move(r));
  return {};
}

Status<Error> Engine::arm_srq_limit(uint32_t id, uint32_t limit) {
  Srq* s = impl_->srq(id);
  if (!s) return Err{Error::kInvalidArgument};
  if (limit > s->max_wr) return Err{Error::kInvalidArgument};
  s->limit = limit;
  return {};
}

size_t Engine::srq_depth(uint32_t id) const {
  const Core& c = *impl_;
  return id == 0 || id > c.srqs.size() || !c.srqs[id - 1].live ? 0 : c.srqs[id - 1].q.size();
}

uint32_t Engine::srq_limit(uint32_t id) const {
  const Core& c = *impl_;
  return id == 0 || id > c.srqs.size() || !c.srqs[id - 1].live ? 0 : c.srqs[id - 1].limit;
}

bool Core::xrc_take(Qp& q, uint32_t msn, Srq& s, uint32_t srqn) {
  const int32_t idx = psn_diff(msn, q.rcv.rq_base_msn);
  if (idx < 0) return false;
  while (q.rcv.rq.size() <= static_cast<uint64_t>(idx)) {  // hold the slots of messages to come
    if (q.rcv.rq.full()) return false;
    q.rcv.rq.next() = RecvWqe{};
    q.rcv.rq.next().pending = true;
    q.rcv.rq.push();
  }
  RecvWqe& slot = q.rcv.rq.at(q.rcv.rq.head() + static_cast<uint64_t>(idx));
  if (!slot.pending) return true;  // an earlier packet of the message took it
  if (s.q.empty()) return false;
  slot = std::move(s.q.front());
  s.q.pop_front();
  slot.cq = s.xrc.cq;
  slot.pd = s.xrc.pd;
  slot.pending = false;
  if (s.limit && s.q.size() < s.limit) {
    s.limit = 0;
    Event e;
    e.type = EventType::kSrqLimit;
    e.qpn = q.qpn;
    e.srq = srqn;
    push_event(e);
  }
  return true;
}

void Core::srq_take(Qp& q, uint32_t msn) {
  Srq* s = srq(q.init.srq);
  const int32_t idx = psn_diff(msn, q.rcv.rq_base_msn);
  if (!s || idx < 0) return;
  bool took = false;
  while (q.rcv.rq.size() <= static_cast<uint64_t>(idx) && !s->q.empty() && !q.rcv.rq.full()) {
    q.rcv.rq.next() = std::move(s->q.front());
    q.rcv.rq.push();
    s->q.pop_front();
    took = true;
  }
  if (took && s->limit && s->q.size() < s->limit) {
    s->limit = 0;
    Event e;
    e.type = EventType::kSrqLimit;
    e.qpn = q.qpn;
    e.srq = q.init.srq;
    push_event(e);
  }
}

Result<Qpn, Error> Engine::create_qp(const QpInit& init) {
  Core& c = *impl_;
  for (CqId id : {init.send_cq, init.recv_cq})
    if ((id != 0 || !init.xrcd) && (id == 0 || id > c.cqs.size() || !c.cqs[id - 1].live))
      return Err{Error::kNoSuchCq};
  if (init.xrcd && (init.srq || init.ud)) return Err{Error::kInvalidArgument};
  if (init.srq && !c.srq(init.srq)) return Err{Error::kInvalidArgument};
  if (init.max_send_wr == 0 || init.max_recv_wr == 0 || init.max_send_wr > (1u << 20) ||
      init.max_recv_wr > (1u << 20))
    return Err{Error::kInvalidArgument};
  if (c.live_qps >= c.cfg.max_qps) return Err{Error::kResourceLimit};
  Qpn qpn;
  if (c.free_qpns.size() > 64) {  // reuse numbers late, so stale packets meet no QP
    qpn = c.free_qpns.front();
    c.free_qpns.pop_front();
  } else {
    c.qps.emplace_back();
    qpn = static_cast<Qpn>(c.qps.size());
  }
  c.qps[qpn - 1] = new_qp(qpn, init);
  c.clear_timer_slot(qpn);
  c.forget_last_write(qpn);
  for (CqId id : {init.send_cq, init.recv_cq})
    if (id) ++c.cqs[id - 1].users;
  if (init.srq) ++c.srqs[init.srq - 1].users;
  ++c.live_qps;
  return qpn;
}

// ---- modify_qp: validate (check_modify), then apply (apply_modify) -------------------------
namespace {

Err<ModifyRefusal> refuse(Error e, const char* field) { return Err{ModifyRefusal{e, field}}; }

// Every check of modify_qp, in no particular order of fields; no effect.
Status<ModifyRefusal> check_modify(const Core& c, const Qp& q, const QpAttr& a, uint32_t mask) {
  const QpState to = (mask & attr::kState) ? a.state : q.state;
  if ((mask & attr::kState) ? !qp_transition_ok(q.state, to) : !configurable_in(q.state))
    return refuse(Error::kBadState, "state");
  if ((mask & attr::kMtu) && !valid_mtu(a.mtu)) return refuse(Error::kInvalidArgument, "mtu");
  if ((mask & attr::kTimeout) && a.timeout > 31) return refuse(Error::kInvalidArgument, "timeout");
  if ((mask & attr::kRetry) && a.retry_cnt_linear > 7)
    return refuse(Error::kInvalidArgument, "retry_cnt_linear");
  if ((mask & attr::kRetry) && a.retry_cnt_exp > kRetryForever)
    return refuse(Error::kInvalidArgument, "retry_cnt_exp");
  if ((mask & attr::kRnrRetry) && a.rnr_retry > 7)
    return refuse(Error::kInvalidArgument, "rnr_retry");
  if ((mask & attr::kMinRnrTimer) && a.min_rnr_timer > 31)
    return refuse(Error::kInvalidArgument, "min_rnr_timer");
  if ((mask & attr::kMpr) && (a.max_psn_range == 0 || a.max_psn_range > c.cfg.recv_window))
    return refuse(Error::kInvalidArgument, "max_psn_range");
  if ((mask & attr::kCc) && a.cc && validate(*a.cc) != nullptr)
    return refuse(Error::kInvalidArgument, "cc");
  if (mask & attr::kPaths) {
    if (a.paths.empty() || a.paths.size() + a.backup_paths.size() > 65535)
      return refuse(Error::kInvalidArgument, "paths");
    std::vector<uint32_t> evs;
    for (const auto* list : {&a.paths, &a.backup_paths})
      for (const Path& p : *list) {
        if (p.plane >= kMaxPlanes) return refuse(Error::kInvalidArgument, "paths");
        evs.push_back(p.ev);
      }
    std::sort(evs.begin(), evs.end());
    if (std::adjacent_find(evs.begin(), evs.end()) != evs.end())
      return refuse(Error::kInvalidArgument, "paths");
  }
  const bool needs_peer = !q.init.ud;  // a UD QP has none: each SEND names its destination
  if (needs_peer && to == QpState::kRtr && q.state == QpState::kInit && !(mask & attr::kDest))
    return refuse(Error::kInvalidArgument, "peer");
  if (needs_peer && to == QpState::kRtr && q.state == QpState::kInit && !(mask & attr::kPaths))
    return refuse(Error::kInvalidArgument, "paths");
  if ((mask & attr::kMtu) && q.state >= QpState::kRtr && q.state != QpState::kError &&
      a.mtu != q.attr.mtu && (!q.snd.sq.empty() || !q.snd.rsp.empty() || q.snd.inflight() > 0))
    return refuse(Error::kBadState, "mtu");
  if (mask & attr::kPathPolicy) {
    const PathPolicy& pp = a.path_policy;
    // Up to a minute: longer is a mistake, and the doubling waits must not overflow.
    constexpr Duration kMax{60'000'000'000};
    if (pp.probe_interval <= Duration{0} || pp.probe_interval_max <= Duration{0} ||
        pp.relapse_window < Duration{0} || pp.probe_interval > kMax ||
        pp.probe_interval_max > kMax || pp.relapse_window > kMax || pp.probes_to_good == 0 ||
        pp.loss_threshold == 0)
      return refuse(Error::kInvalidArgument, "path_policy");
  }
  // The PSN range sizes the in-flight ring: it may grow on a live QP only while
  // nothing is in flight, and never past the peer's receive window.
  const uint32_t mpr = (mask & attr::kMpr) ? a.max_psn_range : q.attr.max_psn_range;
  if (to == QpState::kRts && mpr > c.cfg.recv_window)
    return refuse(Error::kInvalidArgument, "max_psn_range");
  const bool live = sends_in(q.state);
  if (live && (mask & attr::kMpr) && mpr > q.snd.tx_cap && q.snd.inflight() > 0)
    return refuse(Error::kBadState, "max_psn_range");
  return {};
}

// What modify_qp does once check_modify has passed; cannot fail.
void apply_modify(Core& c, Qp& q, const QpAttr& a, uint32_t mask) {
  const QpState to = (mask & attr::kState) ? a.state : q.state;
  const QpState from = q.state;
  if (to == QpState::kReset) {  // drop everything, keep the number and CQs
    c.tm_forget(q.qpn);
    // Its completions not yet polled go too, as rdma-core's providers clean a CQ of a QP
    // reset (mlx5_cq_clean): a QP restarted after an error does not find its flushes.
    for (const CqId id : {q.init.send_cq, q.init.recv_cq})  // live: the QP holds them
      if (id) std::erase_if(c.cqs[id - 1].q, [&](const Completion& k) { return k.qpn == q.qpn; });
    std::erase_if(c.udq, [&](const UdOut& o) { return o.qpn == q.qpn; });
    const Qpn qpn = q.qpn;
    c.qps[qpn - 1] = new_qp(qpn, q.init);  // q is gone
    c.clear_timer_slot(qpn);
    c.forget_last_write(qpn);
    return;
  }
  if (to == QpState::kError) {  // the app's own move: flushes, no fatal event
    c.fail_qp(q, WcStatus::kWrFlushErr, UINT64_MAX, /*fatal_event=*/false);
    return;
  }
  const bool entering = to != from;
  const bool live = sends_in(from);
  QpAttr& s = q.attr;
  // A profile taken off a QP that ran one: a fresh window from EngineConfig.
  const bool cc_cleared = (mask & attr::kCc) && ((!a.cc && s.cc) || a.cc_off != s.cc_off);
  assign_attr(s, a, mask & ~(attr::kState | attr::kLocalToken));
  if (mask & attr::kLocalToken) q.init.local_token = a.local_token;
  if (mask & (attr::kCc | attr::kCcRates)) {
    if (s.cc_off) {
      q.cc.reset();
      q.cc_auto = false;
    } else if (q.cc &&
               !cc_cleared) {  // a live QP keeps its window (and what it learned, if no profile)
      q.cc_auto = q.cc_auto && !s.cc;
      c.reconfig_cc(q);
    } else if (q.cc || ((s.cc || cc_cleared) && live)) {
      c.start_cc(q);  // a profile turns CC on for a live QP without a window
    }
  }
  if (mask & attr::kPathPolicy) q.paths.set_policy(s.path_policy);
  if (mask & attr::kPaths) {
    q.paths.reset(s.paths, s.backup_paths, s.path_policy, q.qpn);
    for (uint16_t p = 0; p < kMaxPlanes; ++p)
      if (c.planes_drained & (1u << p)) q.paths.set_plane_admin_down(p, true);
    q.ev_signals.clear();  // the new set's counters start from 0 (reset() zeroed the rest)
    q.timers.cancel(Timer::kProbe);
    // In-flight records keep path indexes; clamp them to the new set.
    for (auto& p : q.snd.tx)
      if (p.path >= q.paths.size()) p.path = 0;
    c.ev_list_sync(q);
    q.health_epoch = 0;  // held planes apply to the new set
  }
  q.retry = RetryPolicy{s.timeout, s.retry_cnt_linear, s.retry_cnt_exp};
  if (entering && to == QpState::kRtr) {
    q.rcv.sb.reset(s.rq_psn, c.cfg.recv_window);
    q.rcv.acts.clear();  // grows with the first message that needs one (grow_acts())
  }
  // The in-flight ring is sized to the PSN range when the QP starts to send, and may grow on
  // a live QP (check_modify: only while nothing is in flight).
  // (A UD QP has no PSNs, window or peer: nothing starts.)
  const bool starts = entering && to == QpState::kRts && from == QpState::kRtr && !q.init.ud;
  const bool grows = live && (mask & attr::kMpr) && s.max_psn_range > q.snd.tx_cap;
  if (starts) {
    q.snd.restart(s.sq_psn);
    q.paths.clear_inflight();
    q.paths.clear_tx();
    q.loss.rack_evs.clear();
    // Shared path health of the peer; its RTT state seeds this QP's.
    q.health = &c.health.peer(s.peer);
    q.health_epoch = 0;
    if (q.health->srtt > Duration{0})
      q.rtt.seed(q.health->srtt, q.health->rttvar, q.health->min_rtt);
    c.start_cc(q);
  }
  if (grows) q.snd.tx.assign(q.snd.tx.size(), TxPkt{});  // nothing in flight: the ring may grow
  if (starts || grows) q.snd.tx_cap = std::bit_ceil(s.max_psn_range);
  q.state = to;
  if (to == QpState::kRts) c.make_ready(q);
}

}  // namespace

Duration rnr_timer_wait(uint8_t code) {
  // Microseconds, by code (the IBTA table; code 0 is the longest).
  static constexpr uint32_t kUs[32] = {
      655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
      480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
      20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return std::chrono::microseconds(kUs[code & 31]);
}

void assign_attr(QpAttr& to, const QpAttr& from, uint32_t mask) {
  if (mask & attr::kState) to.state = from.state;
  if (mask & attr::kMtu) to.mtu = from.mtu;
  if (mask & attr::kSqPsn) to.sq_psn = from.sq_psn;
  if (mask & attr::kRqPsn) to.rq_psn = from.rq_psn;
  if (mask & attr::kDest) {
    to.peer = from.peer;
    to.dest_qpn = from.dest_qpn;
    to.remote_token = from.remote_token;
  }
  if (mask & attr::kLocalToken) to.local_token = from.local_token;
  if (mask & attr::kTimeout) to.timeout = from.timeout;
  if (mask & attr::kRetry) {
    to.retry_cnt_linear = from.retry_cnt_linear;
    to.retry_cnt_exp = from.retry_cnt_exp;
  }
  if (mask & attr::kRnrRetry) to.rnr_retry = from.rnr_retry;
  if (mask & attr::kMinRnrTimer) to.min_rnr_timer = from.min_rnr_timer;
  if (mask & attr::kMpr) to.max_psn_range = from.max_psn_range;
  if (mask & attr::kMprDest) to.max_psn_range_dest = from.max_psn_range_dest;
  if (mask & attr::kAccess) to.access = from.access;
  if (mask & attr::kWimm) {
    to.max_wimm = from.max_wimm;
    to.max_wimm_dest = from.max_wimm_dest;
  }
  if (mask & attr::kCc) {
    to.cc = from.cc;
    to.cc_off = from.cc_off;
  }
  if (mask & attr::kCcRates) to.cc_rates = from.cc_rates;
  if (mask & attr::kTrafficClass) to.traffic_class = from.traffic_class;
  if (mask & attr::kQkey) to.qkey = from.qkey;
  if (mask & attr::kPathPolicy) to.path_policy = from.path_policy;
  if (mask & attr::kPaths) {
    to.paths = from.paths;
    to.backup_paths = from.backup_paths;
  }
}

Status<ModifyRefusal> Engine::check_modify_qp(Qpn qpn, const QpAttr& a, uint32_t mask) const {
  const Qp* q = impl_->qp(qpn);
  if (!q) return refuse(Error::kNoSuchQp, "qpn");
  return check_modify(*impl_, *q, a, mask);
}

Status<Error> Engine::modify_qp(Qpn qpn, const QpAttr& a, uint32_t mask) {
  Core& c = *impl_;
  Qp* q = c.qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  if (auto ok = check_modify(c, *q, a, mask); !ok) return Err{ok.error().error};
  apply_modify(c, *q, a, mask);
  if (Qp* after = c.qp(qpn)) c.reschedule(*after);  // a move to ERROR cancels its timers
  return {};
}

Status<ModifyRefusal> Engine::connect_qp(Qpn qpn, const QpAttr& a, uint32_t mask) {
  Core& c = *impl_;
  Qp* q = c.qp(qpn);
  if (!q) return refuse(Error::kNoSuchQp, "qpn");
  if (q->state != QpState::kInit) return refuse(Error::kBadState, "state");
  QpAttr rtr = a;
  rtr.state = QpState::kRtr;
  const uint32_t rtr_mask = (mask | attr::kState) & ~attr::kSqPsn;
  if (auto ok = check_modify(c, *q, rtr, rtr_mask); !ok) return ok;
  // RTR -> RTS checks the PSN range against the receive window; nothing else it checks can
  // fail after a good RTR.
  const uint32_t mpr = (mask & attr::kMpr) ? a.max_psn_range : q->attr.max_psn_range;
  if (mpr > c.cfg.recv_window) return refuse(Error::kInvalidArgument, "max_psn_range");
  apply_modify(c, *q, rtr, rtr_mask);
  QpAttr rts = a;
  rts.state = QpState::kRts;
  apply_modify(c, *q, rts, attr::kState | (mask & attr::kSqPsn));
  return {};
}

Result<QpAttr, Error> Engine::query_qp(Qpn qpn) const {
  Qp* q = impl_->qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  QpAttr a = q->attr;
  a.state = q->state;
  a.local_token = q->init.local_token;
  return a;
}

Status<Error> Engine::destroy_qp(Qpn qpn) {
  Core& c = *impl_;
  Qp* q = c.qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  for (CqId id : {q->init.send_cq, q->init.recv_cq})
    if (id) --c.cqs[id - 1].users;
  if (q->init.srq) --c.srqs[q->init.srq - 1].users;
  c.tm_forget(qpn);
  c.mcast_forget(qpn);
  c.qps[qpn - 1].reset();
  c.clear_timer_slot(qpn);
  c.forget_last_write(qpn);
  c.free_qpns.push_back(qpn);
  --c.live_qps;
  return {};
}

Status<Error> Engine::attach_mcast(Qpn qpn, const McastGid& gid) {
  Core& c = *impl_;
  const Qp* q = c.qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  if (!q->init.ud) return Err{Error::kInvalidArgument};
  auto it = c.mcast.find(gid);
  if (it != c.mcast.end() && std::ranges::count(it->second, qpn)) return {};
  if (it == c.mcast.end() && c.mcast.size() >= kMaxMcastGroups) return Err{Error::kQueueFull};
  if (it != c.mcast.end() && it->second.size() >= kMaxMcastAttach) return Err{Error::kQueueFull};
  c.mcast[gid].push_back(qpn);
  return {};
}

Status<Error> Engine::detach_mcast(Qpn qpn, const McastGid& gid) {
  Core& c = *impl_;
  if (!c.qp(qpn)) return Err{Error::kNoSuchQp};
  const auto it = c.mcast.find(gid);
  if (it == c.mcast.end() || !std::erase(it->second, qpn)) return Err{Error::kInvalidArgument};
  if (it->second.empty()) c.mcast.erase(it);
  return {};
}

std::vector<Qpn> Engine::mcast_members(const McastGid& gid) const {
  const auto it = impl_->mcast.find(gid);
  return it == impl_->mcast.end() ? std::vector<Qpn>{} : it->second;
}

Status<Error> Engine::post_send(Qpn qpn, const SendWr& wr) {
  Qp* q = impl_->qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  if (q->init.xrcd || wr.xrc_srqn > 0xffff) return Err{Error::kInvalidArgument};  // XRC target
  return impl_->post_send(*q, wr);
}

bool Core::resolve_recv(const Qp& q, RecvWqe& r) const {
  r.sg.clear();
  for (const Sge& s : r.posted) {
    const Mr* m = mr_in(s.lkey, q.init.xrcd ? r.pd : q.init.pd);
    if (!m || !m->covers(s.addr, s.length) || !(m->access & access::kLocalWrite)) return false;
    r.sg.push_back(Seg{m->at(s.addr), s.length, s.lkey});
  }
  return true;
}

Status<Error> Engine::post_recv(Qpn qpn, const RecvWr& wr) {
  Core& c = *impl_;
  Qp* q = c.qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  if (q->state == QpState::kReset) return Err{Error::kBadState};
  if (q->init.srq || q->init.xrcd) return Err{Error::kInvalidArgument};  // from an SRQ
  if (q->rcv.rq.full()) return Err{Error::kQueueFull};
  if (wr.sg.size() > kMaxSge) return Err{Error::kInvalidArgument};
  RecvWqe& r = q->rcv.rq.next();
  r.posted.clear();
  r.sg.clear();
  r.capacity = 0;
  for (const Sge& s : wr.sg) {  // checked when data lands (Core::resolve_recv)
    if (s.length == 0) continue;
    r.posted.push_back(s);
    r.capacity += s.length;
  }
  r.wr_id = wr.wr_id;
  q->rcv.rq.push();
  if (q->state == QpState::kError) c.fail_qp(*q, WcStatus::kWrFlushErr);
  return {};
}

namespace {

// A decoded datagram (c.rx_pkt) to its QP, by kind: what both on_datagram overloads do after
// decoding. Inlined into each: the joined path, every datagram when receive placement is off,
// pays no call for the split one (perf/RESULTS.md 2026-11-27 (rxfix)).
[[gnu::always_inline]] inline void dispatch(Core& c, Time now, const RxInfo& rx) {
  const wire::Packet& p = c.rx_pkt;
  if (p.common.dst_qpn == kMulticastQpn && p.common.kind == wire::Kind::kUdSend)
    return c.on_ud_mcast(p);
  Qp* q = c.qp(p.common.dst_qpn);
  if (!q) {
    c.stats.drop(Drop::kUnknownQp);
    return;
  }
  if (q->init.ud || p.common.kind == wire::Kind::kUdSend) {  // datagrams: Q_Key, not token
    c.on_ud(*q, p);
    return;
  }
  if (p.common.token != q->init.local_token) {
    c.stats.drop(Drop::kBadToken);
    return;
  }
  const bool rx_ok = connected_in(q->state);
  const bool tx_ok = sends_in(q->state);
  if (wire::is_data(p.common.kind)) {
    // An ACK riding on the data first: what it completes comes before what the data starts.
    if (p.has_ack && tx_ok && c.on_ack(*q, now, p)) ++q->stats.rx_ack_rides;
    if (!connected_in(q->state)) {
      c.stats.drop(Drop::kQpNotReady);
      if (q->state == QpState::kError) c.nack(*q, p, rx, wire::NackReason::kRemoteOperation);
      return;
    }
    c.on_data(*q, now, rx, p);
  } else if (p.common.kind == wire::Kind::kAck || p.common.kind == wire::Kind::kNack) {
    if (!tx_ok) {
      c.stats.drop(Drop::kQpNotReady);
      return;
    }
    if (p.common.kind == wire::Kind::kAck)
      c.on_ack(*q, now, p);
    else
      c.on_nack(*q, now, p);
  } else if (p.common.kind == wire::Kind::kProbe) {
    if (!rx_ok) {
      c.stats.drop(Drop::kQpNotReady);
      return;
    }
    Control r;
    r.kind = wire::Kind::kProbeReply;
    r.qpn = q->qpn;
    r.path = Path{p.common.ev, rx.plane};
    r.psn = p.common.psn;
    r.echo_ev = p.common.ev;
    r.echo_ts = p.common.ts;
    r.ecn = rx.ecn_ce;
    if (c.ctrl.size() < 4 * 4096) c.ctrl.push_back(r);
  } else if (p.common.kind == wire::Kind::kProbeReply) {
    if (!tx_ok) {
      c.stats.drop(Drop::kQpNotReady);
      return;
    }
    c.on_probe_reply(*q, now, p);
  }
  c.reschedule(*q);
}

}  // namespace

void Engine::on_datagram(Time now, const RxInfo& rx, std::span<const uint8_t> bytes) {
  Core& c = *impl_;
  ++c.stats.rx_datagrams;
  c.stats.rx_bytes += bytes.size();
  c.prefetch_rx(bytes);
  if (const auto s = wire::decode(bytes, c.rx_pkt); !s) {
    c.stats.drop(Drop::kMalformed);
    ++c.stats
          .malformed_by_error[static_cast<size_t>(s.error()) % c.stats.malformed_by_error.size()];
    return;
  }
  dispatch(c, now, rx);
}

void Engine::on_datagram(Time now, const RxInfo& rx, std::span<const uint8_t> header,
                         std::span<const uint8_t> payload) {
  Core& c = *impl_;
  ++c.stats.rx_datagrams;
  c.stats.rx_bytes += header.size() + payload.size();
  c.prefetch_rx(header);
  if (const auto s = wire::decode_split(header, payload, c.rx_pkt); !s) {
    c.stats.drop(Drop::kMalformed);
    ++c.stats
          .malformed_by_error[static_cast<size_t>(s.error()) % c.stats.malformed_by_error.size()];
    return;
  }
  dispatch(c, now, rx);
}

size_t Engine::predict_placement(std::span<RxPlacement> out) {
  Core& c = *impl_;
  const Core::LastWrite& w = c.last_write;
  // Placement off (or another copier): nothing was ever recorded, w.qpn is 0.
  if (out.empty() || w.qpn == 0 || w.payload_len == 0) return 0;
  const Qp* q = c.qp(w.qpn);
  if (!q || q->init.ud || q->init.xrcd || q->init.local_token != w.token ||
      !connected_in(q->state) || !(q->attr.access & access::kRemoteWrite))
    return 0;
  const Mr* m = c.mr(w.rkey, *q);
  if (!m || !(m->access & access::kRemoteWrite) || !m->covers(w.addr, w.msg_len)) return 0;
  const uint32_t window = q->attr.max_psn_range_dest
                              ? std::min(q->attr.max_psn_range_dest, q->rcv.sb.window())
                              : q->rcv.sb.window();
  size_t n = 0;
  uint64_t off = uint64_t{w.offset} + w.payload_len;
  for (uint32_t psn = w.psn + 1; n < out.size() && off < w.msg_len; ++psn, off += w.payload_len) {
    const int32_t ahead = psn_diff(psn, q->rcv.sb.cum());
    if (ahead < 0 || static_cast<uint32_t>(ahead) >= window) break;
    if (q->rcv.sb.received(psn)) break;  // the in-order run ends at what is already here
    out[n++] = {m->at(w.addr + off),
                static_cast<uint32_t>(std::min<uint64_t>(w.payload_len, w.msg_len - off))};
  }
  return n;
}

const uint8_t* Engine::write_target(std::span<const uint8_t> header) {
  Core& c = *impl_;
  if (header.size() != wire::kDataHeaderSize) return nullptr;
  const uint8_t kind = header[1];
  if (kind != static_cast<uint8_t>(wire::Kind::kWrite) &&
      kind != static_cast<uint8_t>(wire::Kind::kWriteImm))
    return nullptr;
  if (!wire::decode_split(header, {}, c.peek_pkt)) return nullptr;
  const wire::Packet& p = c.peek_pkt;
  const Qp* q = c.qp(p.common.dst_qpn);
  if (!q || q->init.ud || p.common.token != q->init.local_token || !connected_in(q->state) ||
      !(q->attr.access & access::kRemoteWrite))
    return nullptr;
  const wire::DataHeader& d = p.data;
  if (d.msg_len == 0 || uint64_t{d.offset} + d.payload_len > d.msg_len) return nullptr;
  // An XRC target QP's WRITE is copied as any (accept_write), into the PD its XRC SRQ names:
  // the driver must know where, or it would let the copy land on datagrams not yet fed.
  const Mr* m = c.data_mr(*q, d);
  if (!m || !(m->access & access::kRemoteWrite) || !m->covers(d.addr, d.msg_len)) return nullptr;
  return m->at(d.addr + d.offset);
}

void Engine::on_timeout(Time now) {
  Core& c = *impl_;
  // Only entries whose QP has a timer due by `now` run its timeouts: settle_heap drops or
  // re-pushes the others from the dense slots, without reading the QP.
  while (c.next_deadline() <= now) {
    const Core::Deadline d = c.heap.front();
    std::pop_heap(c.heap.begin(), c.heap.end(), std::greater<>{});
    c.heap.pop_back();
    c.timer_slots[d.qpn - 1].scheduled = kNever;
    Qp* q = c.qp(d.qpn);
    if (!q) continue;
    c.sender_timeout(*q, now);
    c.receiver_timeout(*q, now);
    c.path_timeout(*q, now);
    c.reschedule(*q);
  }
}

std::optional<Transmit> Engine::poll_transmit(Time now, std::span<uint8_t> buf) {
  Core& c = *impl_;
  auto sent = [&](const Transmit& t) {
    ++c.stats.tx_datagrams;
    c.stats.tx_bytes += t.size();
    ++c.stats.tx_by_kind[buf[1] & 63];  // the header's kind byte
    c.stats.tx_retransmit_flagged += (buf[2] & wire::flag::kRetransmit) != 0;
    return t;
  };
  while (!c.ctrl.empty()) {
    const Control k = c.ctrl.front();
    c.ctrl.pop_front();
    Qp* q = c.qp(k.qpn);
    // A QP reset since has no peer any more (ERROR still answers: NACKs tell the peer).
    if (!q || q->state == QpState::kReset || q->state == QpState::kInit) continue;
    wire::Packet& pk = c.tx_header(*q, k.kind, k.path.ev, k.psn, now);
    if (k.kind == wire::Kind::kNack) {
      pk.nack = k.nack;
    } else if (k.kind == wire::Kind::kProbeReply) {
      pk.probe_reply.echo_ev = k.echo_ev;
      pk.probe_reply.echo_ts = k.echo_ts;
      pk.probe_reply.probe_flags = k.ecn ? wire::ack_flag::kEcnEcho : 0;
    }
    const size_t n = wire::encode_header(pk, {}, buf);
    return sent(Transmit{q->attr.peer, k.path, n, {}, q->attr.traffic_class});
  }
  if (auto t = c.ud_transmit(now, buf)) return sent(*t);
  while (!c.ackq.empty()) {
    Qp* q = c.qp(c.ackq.front());
    c.ackq.pop_front();
    if (!q) continue;
    q->in_ackq = false;
    if (!connected_in(q->state)) continue;
    Path path;
    const size_t n = c.build_ack(*q, now, buf, &path);
    c.reschedule(*q);
    return sent(Transmit{q->attr.peer, path, n, {}, q->attr.traffic_class});
  }
  while (!c.ready.empty()) {
    if (c.burst == 0) c.prefetch_turns();
    const Qpn qpn = c.ready.front();
    c.ready.pop_front();
    Qp* q = c.qp(qpn);
    if (!q) continue;
    auto t = sends_in(q->state) ? c.send_data(*q, now, buf) : std::nullopt;
    if (!t) {
      q->in_ready = false;
      c.burst = 0;
      c.reschedule(*q);
      continue;
    }
    // Round robin between QPs, in bursts (consecutive packets batch well in the driver).
    if (++c.burst < Core::kBurst) {
      c.ready.push_front(qpn);
    } else {
      c.burst = 0;
      c.ready.push_back(qpn);
    }
    c.reschedule(*q);
    return sent(*t);
  }
  return std::nullopt;
}

// Settles the heap's front first (Core::settle_heap): the time returned is a timer of some QP
// that is really set, not one cancelled or postponed since. Not a pure read (the heap changes):
// the driver calls it under the lock that serialises every other engine call (UdpDriver::mu_).
Time Engine::next_deadline() const { return impl_->next_deadline(); }

size_t Engine::timer_heap_size() const { return impl_->heap.size(); }

Status<Error> Engine::deny_ev(Time now, Qpn qpn, uint32_t ev, bool deny) {
  Core& c = *impl_;
  Qp* q = c.qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  if (!q->paths.deny(ev, deny, now, c.ev_scratch)) return Err{Error::kInvalidArgument};
  c.ev_events(*q);
  c.reschedule(*q);
  return {};
}

Status<Error> Engine::set_plane_drained(uint16_t plane, bool drained) {
  Core& c = *impl_;
  if (plane >= kMaxPlanes) return Err{Error::kInvalidArgument};
  const auto bit = static_cast<uint16_t>(1u << plane);
  c.planes_drained = drained ? (c.planes_drained | bit) : (c.planes_drained & ~bit);
  for (auto& q : c.qps) {
    if (!q) continue;
    q->paths.set_plane_admin_down(plane, drained);
    c.make_ready(*q);  // undrained capacity may let it send again
  }
  return {};
}

uint16_t Engine::drained_planes() const { return impl_->planes_drained; }

Status<Error> Engine::set_port_up(Time now, uint16_t plane, bool up) {
  Core& c = *impl_;
  if (plane >= kMaxPlanes) return Err{Error::kInvalidArgument};
  const auto bit = static_cast<uint16_t>(1u << plane);
  const uint16_t before = c.health.local_down();
  c.health.set_local_down(up ? (before & ~bit) : (before | bit));
  if (c.health.local_down() == before) return {};
  for (auto& q : c.qps) {
    if (!q || !sends_in(q->state)) continue;
    if (!up) c.lose_planes(*q, bit, now);
    c.make_ready(*q);  // a port back up may let it send again
  }
  return {};
}

uint16_t Engine::ports_down() const { return impl_->health.local_down(); }

uint16_t Engine::peer_ports_down(PeerId peer) const {
  const SharedHealth::Peer* p = impl_->health.find(peer);
  return p ? p->reported_down : 0;
}

uint16_t Engine::held_planes(PeerId peer, Time now) const {
  const SharedHealth::Peer* p = impl_->health.find(peer);
  const SharedHealth::Peer none;
  Time until;
  return impl_->health.held(p ? *p : none, now, &until);
}

void Engine::set_peer_planes_down(Time now, PeerId peer, uint16_t planes) {
  Core& c = *impl_;
  SharedHealth::Peer& h = c.health.peer(peer);
  const auto gained = static_cast<uint16_t>(planes & ~h.announced_down);
  c.health.set_announced_down(h, planes);
  for (auto& q : c.qps) {
    if (!q || q->health != &h) continue;
    // Newly down: what is in flight there is resent now, as for a port with no link.
    if (gained != 0 && sends_in(q->state)) c.lose_planes(*q, gained, now);
    c.make_ready(*q);  // planes back up: send again
  }
}

void Engine::set_ud_paths(PeerId peer, std::span<const Path> paths) {
  Core& c = *impl_;
  if (paths.empty()) {
    c.ud_paths.erase(peer);
    return;
  }
  c.ud_paths[peer].paths.assign(paths.begin(), paths.end());
}

uint16_t Engine::peer_planes_down(PeerId peer) const {
  const SharedHealth::Peer* p = impl_->health.find(peer);
  return p ? p->announced_down : 0;
}

Qpn Engine::max_qpn() const { return static_cast<Qpn>(impl_->qps.size()); }

const PathSet* Engine::paths(Qpn qpn) const {
  const Qp* q = impl_->qp(qpn);
  return q ? &q->paths : nullptr;
}

std::optional<NsccStats> Engine::cc_stats(Qpn qpn) const {
  const Qp* q = impl_->qp(qpn);
  if (!q || !q->cc) return std::nullopt;
  return q->cc->stats();
}

std::optional<NsccConfig> Engine::cc_config(Qpn qpn) const {
  const Qp* q = impl_->qp(qpn);
  if (!q || !q->cc) return std::nullopt;
  return q->cc->config();
}

std::optional<Event> Engine::poll_event() {
  Core& c = *impl_;
  if (c.events.empty()) return std::nullopt;
  Event e = c.events.front();
  c.events.pop_front();
  return e;
}

const EngineStats& Engine::stats() const { return impl_->stats; }

const QpStats* Engine::qp_stats(Qpn qpn) const {
  const Qp* q = impl_->qp(qpn);
  return q ? &q->stats : nullptr;
}

std::vector<PathStats> Engine::path_stats(Qpn qpn) const {
  std::vector<PathStats> out;
  path_stats(qpn, out);
  return out;
}

bool Engine::path_stats(Qpn qpn, std::vector<PathStats>& out) const {
  out.clear();
  const Qp* q = impl_->qp(qpn);
  if (!q) return false;
  out.resize(q->paths.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const PathSet::Ev& e = q->paths.ev(i);
    PathStats& s = out[i];
    s.tx_packets = e.tx_packets();
    s.tx_bytes = e.tx_bytes();
    s.acked = e.acked();
    s.lost = e.lost;
    s.trims = e.trims;
    s.rtt_ns = e.rtt_ns;
    if (i < q->ev_signals.size()) {
      s.ecn_marks = q->ev_signals[i].ecn_marks;
      s.probes = q->ev_signals[i].probes;
      s.probe_replies = q->ev_signals[i].probe_replies;
    }
  }
  return true;
}

size_t Engine::in_flight(Qpn qpn) const {
  const Qp* q = impl_->qp(qpn);
  return q ? q->snd.inflight() : 0;
}

bool Engine::idle() const {
  const Core& c = *impl_;
  if (!c.ctrl.empty() || !c.ackq.empty() || !c.udq.empty()) return false;
  for (const auto& q : c.qps) {
    if (!q) continue;
    if (q->snd.inflight() > 0 || q->snd.pkt_wqe != q->snd.sq.tail() ||
        q->snd.pkt_rsp != q->snd.rsp.tail())
      return false;
  }
  return true;
}

}  // namespace mrc::engine
