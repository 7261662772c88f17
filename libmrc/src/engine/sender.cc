// Sender (requester) half of a QP: packetize WQEs, spray them over the QP's
// paths, process ACK/SACK/NACK, detect loss (RACK + RTO), resend on another
// path, complete WQEs in posting order.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "engine/internal.h"

namespace mrc::engine {

namespace {

wire::Kind wire_kind(const SendWqe& w) {
  if (w.is_read_resp) return wire::Kind::kReadResp;
  switch (w.op) {
    case Opcode::kWrite:
      return wire::Kind::kWrite;
    case Opcode::kWriteImm:
      return wire::Kind::kWriteImm;
    case Opcode::kSend:
      return wire::Kind::kSend;
    case Opcode::kSendImm:
      return wire::Kind::kSendImm;
    case Opcode::kRead:
      return wire::Kind::kReadReq;
    case Opcode::kCmpSwap:
      return wire::Kind::kCmpSwap;
    case Opcode::kFetchAdd:
      return wire::Kind::kFetchAdd;
    case Opcode::kAtomicWrite:
      return wire::Kind::kAtomicWrite;
  }
  return wire::Kind::kWrite;
}

WcOpcode wc_opcode(Opcode op) {
  switch (op) {
    case Opcode::kWrite:
    case Opcode::kWriteImm:
      return WcOpcode::kWrite;
    case Opcode::kSend:
    case Opcode::kSendImm:
      return WcOpcode::kSend;
    case Opcode::kRead:
      return WcOpcode::kRead;
    case Opcode::kCmpSwap:
      return WcOpcode::kCmpSwap;
    case Opcode::kFetchAdd:
      return WcOpcode::kFetchAdd;
    case Opcode::kAtomicWrite:
      return WcOpcode::kAtomicWrite;
  }
  return WcOpcode::kSend;
}

bool fatal_reason(wire::NackReason r) {
  return r == wire::NackReason::kRemoteAccess || r == wire::NackReason::kRemoteInvalid ||
         r == wire::NackReason::kRemoteOperation;
}

}  // namespace

Status<Error> Core::post_send(Qp& q, const SendWr& wr, bool internal) {
  if (q.init.ud) return ud_post_send(q, wr);
  if (wr.invalidate && wr.opcode != Opcode::kSend) return Err{Error::kInvalidArgument};
  if (!takes_sends_in(q.state)) return Err{Error::kBadState};
  if (q.snd.sq.full() && !internal) return Err{Error::kQueueFull};
  if (wr.opcode == Opcode::kWriteImm && q.attr.max_wimm && q.sq_wimms >= q.attr.max_wimm)
    return Err{Error::kWimmLimit};
  if (wr.sg.size() > kMaxSge) return Err{Error::kInvalidArgument};
  if (static_cast<uint8_t>(wr.opcode) > static_cast<uint8_t>(Opcode::kAtomicWrite))
    return Err{Error::kInvalidArgument};
  uint64_t len = 0;
  for (const Sge& s : wr.sg) len += s.length;
  if (len > kMaxMessage) return Err{Error::kTooLarge};
  // An atomic returns 8 bytes into its local memory and works on an aligned 64-bit word.
  if (wr.opcode == Opcode::kAtomicWrite && (len != wire::kAtomicLen || wr.remote_addr % 8 != 0))
    return Err{Error::kInvalidArgument};
  if (is_atomic(wr.opcode) &&
      (len != wire::kAtomicLen || wr.remote_addr % 8 != 0 || wr.inline_data))
    return Err{Error::kInvalidArgument};
  const bool is_inline = wr.inline_data && !is_read_like(wr.opcode);
  if (is_inline && len > kMaxInline) return Err{Error::kTooLarge};

  SendWqe& w = q.snd.sq.next();
  w.sg.clear();
  w.inline_buf.clear();
  if (is_inline) {
    for (const Sge& s : wr.sg) {
      const auto* p = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(s.addr));
      w.inline_buf.insert(w.inline_buf.end(), p, p + s.length);
    }
  } else {
    const uint32_t need = is_read_like(wr.opcode) ? access::kLocalWrite : 0;
    for (const Sge& s : wr.sg) {
      if (s.length == 0) continue;
      const Mr* m = mr(s.lkey, q);
      if (!m || !m->covers(s.addr, s.length) || (m->access & need) != need)
        return Err{Error::kLocalAccess};
      w.sg.push_back(Seg{m->at(s.addr), s.length, s.lkey});
    }
  }
  if (is_atomic(wr.opcode)) {  // the request's payload: the operands, big-endian
    w.inline_buf.resize(wire::kAtomicReqLen);
    put_be64(w.inline_buf.data(), wr.compare_add);
    put_be64(w.inline_buf.data() + 8, wr.opcode == Opcode::kCmpSwap ? wr.swap : 0);
  }
  w.wr_id = wr.wr_id;
  w.op = wr.opcode;
  w.signaled = wr.signaled || (q.init.sq_sig_all && !internal);
  w.solicited = wr.solicited;
  w.is_read_resp = false;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.imm = wr.imm;
  w.xrc_srqn = wr.xrc_srqn;
  w.len = len;
  w.npkts = is_read_like(wr.opcode)
                ? 1
                : std::max<uint32_t>(1, static_cast<uint32_t>((len + q.attr.mtu - 1) / q.attr.mtu));
  w.sent = w.acked = 0;
  w.read_done = false;
  w.fence = wr.fence;
  w.invalidate = wr.invalidate;
  w.status = WcStatus::kSuccess;
  w.msn = 0;
  switch (wr.opcode) {
    case Opcode::kWriteImm:
      ++q.sq_wimms;
      [[fallthrough]];
    case Opcode::kSend:
    case Opcode::kSendImm:
      w.msn = q.next_recv_msn++;
      break;
    case Opcode::kRead:
    case Opcode::kCmpSwap:
    case Opcode::kFetchAdd:
      w.msn = q.next_read_msn++;
      q.reads.push_back(q.snd.sq.tail());
      break;
    case Opcode::kWrite:
    case Opcode::kAtomicWrite:  // a WRITE of 8 bytes: no receive, no response
      break;
  }
  q.snd.sq.push();
  if (q.state == QpState::kError) {
    fail_qp(q, WcStatus::kWrFlushErr);
    return {};
  }
  make_ready(q);
  return {};
}

namespace {

bool stale_resend(const Qp& q, uint32_t psn) {
  // Acknowledged since it was queued (the slot may already hold a newer PSN).
  return psn_diff(psn, q.snd.snd_una) < 0 || q.snd.tx[psn & q.snd.tx_mask].state != TxPkt::kLost;
}

/// Index in q.snd.retx of the first resend allowed at `now`, or -1; *wake: the
/// earliest time a delayed one (RNR, out of window) is allowed.
long find_resend(const Qp& q, Time now, Time* wake) {
  *wake = kNever;
  for (size_t i = 0; i < q.snd.retx.size(); ++i) {
    const uint32_t psn = q.snd.retx[i];
    if (stale_resend(q, psn)) continue;
    const Time nb = q.snd.not_before(psn);
    if (nb <= now) return static_cast<long>(i);
    *wake = std::min(*wake, nb);
  }
  return -1;
}

}  // namespace

bool Core::has_data(const Qp& q, Time now) const {
  if (!sends_in(q.state)) return false;
  if (cwnd_full(q)) return false;
  Time wake;
  if (find_resend(q, now, &wake) >= 0) return true;
  if (q.state != QpState::kRts || q.snd.inflight() >= q.attr.max_psn_range) return false;
  return q.snd.pkt_rsp != q.snd.rsp.tail() || (q.snd.pkt_wqe != q.snd.sq.tail() && !fenced(q));
}

bool Core::fenced(const Qp& q) const {
  if (q.snd.pkt_wqe == q.snd.sq.tail()) return false;
  const SendWqe& w = q.snd.sq.at(q.snd.pkt_wqe);
  if (w.sent != 0) return false;
  // READs and atomics start in posting order, so those started and not complete are the
  // ones numbered from reads_base_msn up to this one's.
  if (is_read_like(w.op) &&
      psn_diff(w.msn, q.reads_base_msn) >= static_cast<int32_t>(kMaxReadResponses))
    return true;
  // q.reads holds every READ not yet complete, in posting order.
  return w.fence && !q.reads.empty() && q.reads.front() < q.snd.pkt_wqe;
}

bool Core::waiting_on_peer(const Qp& q) const {
  // A READ whose request was acknowledged waits for its response; data that no
  // path may carry (every EV denied) waits for one. The retry budget bounds both.
  // A READ awaiting its response keeps its WQE in the SQ: an empty SQ (the common case when
  // nothing is in flight) answers without reading `reads` (cold, Qp's last lines).
  if (!q.snd.sq.empty() && !q.reads.empty()) return true;
  const bool pending =
      !q.snd.retx.empty() || q.snd.pkt_rsp != q.snd.rsp.tail() || q.snd.pkt_wqe != q.snd.sq.tail();
  return pending && q.paths.count(EvState::kDenied) == q.paths.size();
}

void SendState::grow() {
  const size_t old = tx.size();
  const size_t n = std::min<size_t>(old == 0 ? 16 : 2 * old, tx_cap);
  std::vector<TxPkt> bigger(n);
  for (size_t k = 1; k <= old; ++k) {  // the ring holds [snd_nxt - old, snd_nxt)
    const uint32_t psn = snd_nxt - static_cast<uint32_t>(k);
    bigger[psn & (n - 1)] = tx[psn & tx_mask];
  }
  tx.swap(bigger);
  if (!tx_not_before.empty()) {
    std::vector<Time> nb(n, Time{0});
    for (size_t k = 1; k <= old; ++k) {
      const uint32_t psn = snd_nxt - static_cast<uint32_t>(k);
      nb[psn & (n - 1)] = tx_not_before[psn & tx_mask];
    }
    tx_not_before.swap(nb);
  }
  tx_mask = static_cast<uint32_t>(n - 1);
}

void SendState::restart(uint32_t psn) {
  tx.clear();  // grows with what is in flight (grow())
  tx_not_before.clear();
  tx_mask = 0;
  snd_una = snd_nxt = psn;
  bytes_in_flight = 0;
}

inline void Core::list_append(Qp& q, uint32_t psn) {
  TxPkt& p = q.snd.pkt(psn);
  p.next = psn;
  if (!q.snd.list_empty()) {
    p.prev = q.snd.newest();
    q.snd.pkt(q.snd.newest()).next = psn;
  } else {
    p.prev = psn;
    q.snd.list_head = psn;
  }
  q.snd.list_tail = psn;
  ev_list_append(q, psn);
}

inline void Core::ev_list_append(Qp& q, uint32_t psn) {
  TxPkt& p = q.snd.pkt(psn);
  PathSet::Hot& e = q.paths.tx(p.path);
  p.ev_next = psn;
  if (e.listed) {
    p.ev_prev = e.tx_tail;
    q.snd.pkt(p.ev_prev).ev_next = psn;
  } else {
    p.ev_prev = psn;
    e.tx_head = psn;
    e.listed = true;
  }
  e.tx_tail = psn;
}

[[gnu::always_inline]] inline void Core::list_remove(Qp& q, uint32_t psn) {
  TxPkt& p = q.snd.pkt(psn);
  const bool first = p.prev == psn, last = p.next == psn;
  if (!first) q.snd.pkt(p.prev).next = last ? p.prev : p.next;
  if (!last) q.snd.pkt(p.next).prev = first ? p.next : p.prev;
  if (first) q.snd.list_head = last ? kNoLink : p.next;
  if (last) q.snd.list_tail = first ? kNoLink : p.prev;
  p.prev = p.next = psn;
  PathSet::Hot& e = q.paths.tx(p.path);
  const bool ev_first = p.ev_prev == psn, ev_last = p.ev_next == psn;
  if (!ev_first) q.snd.pkt(p.ev_prev).ev_next = ev_last ? p.ev_prev : p.ev_next;
  if (!ev_last) q.snd.pkt(p.ev_next).ev_prev = ev_first ? p.ev_next : p.ev_prev;
  if (ev_first && ev_last) {
    e.listed = false;
  } else if (ev_first) {
    e.tx_head = p.ev_next;
  } else if (ev_last) {
    e.tx_tail = p.ev_prev;
  }
  p.ev_prev = p.ev_next = psn;
}

void Core::ev_list_sync(Qp& q) {
  q.paths.clear_tx();
  q.loss.rack_evs.clear();
  // Relink in sending order (the sent-order list's), so each EV's list keeps it.
  if (q.snd.list_empty()) return;
  for (uint32_t psn = q.snd.oldest();; psn = q.snd.pkt(psn).next) {
    ev_list_append(q, psn);
    if (psn == q.snd.newest()) break;
  }
}

std::optional<Transmit> Core::send_data(Qp& q, Time now, std::span<uint8_t> buf) {
  // Resends first, each on a different path than last time.
  while (!q.snd.retx.empty() && stale_resend(q, q.snd.retx.front())) q.snd.retx.pop_front();
  Time wake;
  const long r = find_resend(q, now, &wake);
  // The wake-up of a delayed resend (RNR, out of window) is armed even when the window is
  // full: once the window opens, only a timer brings a resend that is not yet due.
  if (wake != kNever && (!q.timers.pending(Timer::kRnr, now) || wake < q.timers.at(Timer::kRnr)))
    q.timers.set(Timer::kRnr, wake);
  if (cwnd_full(q)) return std::nullopt;
  const bool retransmit = r >= 0;
  const bool from_rsp = q.snd.pkt_rsp != q.snd.rsp.tail();
  // SQD: what is in flight still completes (resends), nothing new starts.
  if (!retransmit && (q.state != QpState::kRts || q.snd.inflight() >= q.attr.max_psn_range ||
                      (!from_rsp && (q.snd.pkt_wqe == q.snd.sq.tail() || fenced(q)))))
    return std::nullopt;
  // The memory must still be registered: an app that deregistered it must not
  // have its freed pages sent (nor a READ response served from them).
  {
    const bool rsp = retransmit ? q.snd.pkt(q.snd.retx[static_cast<size_t>(r)]).rsp : from_rsp;
    const uint64_t seq = retransmit ? q.snd.wqe_seq(q.snd.pkt(q.snd.retx[static_cast<size_t>(r)]))
                                    : (from_rsp ? q.snd.pkt_rsp : q.snd.pkt_wqe);
    const SendWqe& w = rsp ? q.snd.rsp.at(seq) : q.snd.sq.at(seq);
    if (!live(w.sg)) {
      if (rsp) refuse_read(q, w.req_psn);
      fail_qp(q, WcStatus::kLocProtErr, rsp ? UINT64_MAX : seq);
      return std::nullopt;
    }
  }
  const int avoid = retransmit ? q.snd.pkt(q.snd.retx[static_cast<size_t>(r)]).path : -1;
  sync_health(q, now);
  const uint16_t path_index = q.paths.next(avoid);
  if (path_index == PathSet::kNoPath) {  // every EV denied: wait (arm_rto bounds it)
    arm_rto(q, now);
    return std::nullopt;
  }
  uint32_t psn;
  if (retransmit) {
    psn = q.snd.retx[static_cast<size_t>(r)];
    q.snd.retx.erase(static_cast<size_t>(r));
    ++q.stats.tx_retransmits;
    q.loss.tlp_go = false;
  } else {
    uint64_t& cursor = from_rsp ? q.snd.pkt_rsp : q.snd.pkt_wqe;
    SendWqe& w = from_rsp ? q.snd.rsp.at(cursor) : q.snd.sq.at(cursor);
    if (q.snd.ring_full()) q.snd.grow();
    psn = q.snd.snd_nxt++;
    q.snd.prefetch_next();
    TxPkt& p = q.snd.pkt(psn);
    p.wqe = static_cast<uint32_t>(cursor);
    p.rsp = from_rsp;
    p.offset = w.sent * q.attr.mtu;
    // A READ request carries no payload, an atomic request its operands (inline_buf).
    p.len = is_read_like(w.op) && !w.is_read_resp
                ? static_cast<uint16_t>(w.inline_buf.size())
                : static_cast<uint16_t>(std::min<uint64_t>(q.attr.mtu, w.len - p.offset));
    p.first = w.sent == 0;
    p.last = w.sent + 1 == w.npkts;
    p.tx_count = 0;
    p.blamed = false;
    p.lost_by = kLostOther;
    p.proven = false;
    if (!q.snd.tx_not_before.empty()) q.snd.tx_not_before[psn & q.snd.tx_mask] = Time{0};
    if (p.first) {
      w.first_psn = psn;
      // A message leaving within ride_wait of the last one that came: a reply (a ping-pong),
      // so the next message's ACK may wait for the next reply (Core::waits_for_reply).
      if (!from_rsp && q.rcv.last_msg_at != kNever && now - q.rcv.last_msg_at <= cfg.ride_wait)
        q.rcv.replies = true;  // (an app's message: a READ response is the engine's)
    }
    if (++w.sent == w.npkts) ++cursor;
    ++q.stats.tx_data_packets;
    q.stats.tx_payload_bytes += p.len;
  }
  q.snd.pkt(psn).path = path_index;

  TxPkt& p = q.snd.pkt(psn);
  const SendWqe& w = q.snd.wqe(p);
  p.state = TxPkt::kInFlight;
  p.sent = now;
  p.xseq = q.snd.xseq_next++;
  ++p.tx_count;
  q.snd.bytes_in_flight += p.len;
  const PathSet::Hot& ev = q.paths.hot(p.path);
  const Path path{ev.ev, ev.plane};
  p.plane = ev.plane;
  q.paths.on_sent(p.plane);
  list_append(q, psn);
  q.paths.count_sent(p.path, p.len);

  wire::Packet& pk = tx_header(q, wire_kind(w), ev.ev, psn, now);
  pk.common.flags =
      (p.first ? wire::flag::kFirst : 0) | (p.last ? wire::flag::kLast | wire::flag::kAckReq : 0) |
      (retransmit ? wire::flag::kRetransmit : 0) | (cfg.payload_crc ? wire::flag::kPayloadCrc : 0) |
      (p.last && w.solicited ? wire::flag::kSolicited : 0) |
      (w.invalidate ? wire::flag::kInvalidate : 0);
  pk.data.addr = w.remote_addr;
  pk.data.rkey = w.rkey;
  pk.data.msn = w.msn;
  pk.data.offset = p.offset;
  pk.data.msg_len =
      is_atomic(w.op) && !w.is_read_resp ? wire::kAtomicReqLen : static_cast<uint32_t>(w.len);
  pk.data.imm = w.imm;
  pk.data.payload_len = p.len;
  pk.data.src_qpn = q.qpn;
  // One field, two meanings (wire::DataHeader): an XRC initiator's data names the peer's
  // SRQ (1..65535, checked at post); any other data says which of this host's ports have no
  // link.
  if (w.xrc_srqn)
    pk.data.xrc_srqn = static_cast<uint16_t>(w.xrc_srqn);
  else
    pk.data.ports_down = health.local_down();

  std::span<const uint8_t> payload;
  if (p.len > 0) {
    if (!w.inline_buf.empty()) {
      payload = std::span<const uint8_t>(w.inline_buf).subspan(p.offset, p.len);
    } else {
      payload = sg_contiguous(w.sg, p.offset, p.len);
      if (payload.empty()) {  // crosses SGEs: gather after the header
        uint8_t* dst = buf.data() + wire::kDataHeaderSize;
        sg_copy_out(w.sg, p.offset, dst, p.len, cfg.copy);
        payload = {dst, p.len};
      }
    }
  }
  // The ACK this end owes the peer rides along when the packet has room for it below the
  // MTU: a trailer after the payload (wire.h), the whole datagram in `buf`.
  // Never on a packet without payload (a READ request, a 0-byte message): its trailer would
  // make a packet that switches may trim (they cut what passes the data header).
  const bool ride = q.rcv.unacked > 0 && q.rcv.peer_rides && cfg.ack_rides && p.len > 0 &&
                    p.len + wire::kAckTrailerSize <= q.attr.mtu && connected_in(q.state);
  // The reply left, but has no room for the ACK that waited for it: the ACK goes at once.
  if (!ride && q.rcv.held && p.first && !retransmit) {
    q.rcv.held = false;
    want_ack(q);
  }
  if (ride) {
    if (q.rcv.held) q.rcv.ride_misses = 0;  // the reply came in time
    fill_ack(q, now, pk.ack);
    ++q.stats.tx_ack_rides;
  }
  const size_t hl = wire::encode_header(pk, payload, buf);
  arm_rto(q, now);
  if (!ride) return Transmit{q.attr.peer, path, hl, payload, q.attr.traffic_class};
  uint8_t* const at = buf.data() + hl;
  if (!payload.empty() && payload.data() != at) {
    if (!w.inline_buf.empty())
      std::memcpy(at, payload.data(), payload.size());
    else
      sg_copy_out(w.sg, p.offset, at, p.len, cfg.copy);
  }
  wire::encode_ack_trailer(pk, buf.first(hl), buf.subspan(hl + p.len));
  return Transmit{q.attr.peer, path, hl + p.len + wire::kAckTrailerSize, {},
                  q.attr.traffic_class};
}

void Core::start_cc(Qp& q) {
  q.cc.reset();
  q.cc_auto = !q.attr.cc && !q.attr.cc_off && cfg.congestion_control && cfg.base_rtt == Duration{0};
  q.cc_base = cc_start_base_rtt(cfg);  // until measured
  q.cc_rtt = BaseRttFilter{cfg.min_base_rtt, cfg.send_burst,
                           spray_allowance(cfg, q.attr.mtu, q.paths.planes())};
  if (auto c = cc_config(q))
    q.cc = std::make_unique<Nscc>(*c, q.attr.mtu,
                                  q.cc_auto ? NsccBase::kGiven : NsccBase::kProfile);
  q.cc_probed = false;
}

std::optional<NsccConfig> Core::cc_config(const Qp& q) const {
  if (q.attr.cc_off) return std::nullopt;
  auto c =
      q.cc_auto ? derived_cc(cfg, q.attr.mtu, q.cc_base) : effective_cc(cfg, q.attr.mtu, q.attr.cc);
  if (!c) return c;
  return with_rates(*c, cfg, q.attr.mtu, q.attr.cc_rates);
}

void Core::learn_base_rtt(Qp& q, Time now, Duration rtt) {
  if (!q.cc || !q.cc_auto || rtt <= Duration{0}) return;
  if (q.health) q.cc_rtt.set_anchor(q.health->min_rtt);
  q.cc_rtt.on_sample(now, rtt);
  if (q.cc_rtt.moved(q.cc_learned)) {  // learned base RTT moved: re-derive the profile
    q.cc_base = q.cc_learned = q.cc_rtt.estimate();
    reconfig_cc(q);
  }
}

void Core::probe_base_rtt(Qp& q) {
  if (q.cc_probed || !q.cc || !q.cc_auto || q.paths.size() == 0) return;
  q.cc_probed = true;
  send_probe(q, 0, 0);
}

void Core::reconfig_cc(Qp& q) {
  if (auto c = cc_config(q))
    q.cc->set_config(*c, q.cc_auto ? NsccBase::kGiven : NsccBase::kProfile);
}

void Core::arm_rto(Qp& q, Time now) {
  q.timers.cancel(Timer::kTlp);
  const Duration rto = q.rto(cfg.ack_delay);
  if (!q.snd.list_empty()) {
    q.wait_since = kNever;
    q.timers.set(Timer::kRto, rto == kNever ? kNever : q.snd.pkt(q.snd.oldest()).sent + rto);
    // Tail loss probe (RFC 8985 section 7): losses at the tail have no later packet
    // to reveal them; resending the newest one does, long before the RTO.
    // Clamped before the RTO when the RTO is short (RttEstimator::tlp_at).
    if (q.rtt.has_sample() && !q.loss.tlp_sent) {
      const Time at =
          q.rtt.tlp_at(std::max(q.snd.pkt(q.snd.newest()).sent, q.last_ack_at),
                       q.timers.at(Timer::kRto), cfg.ack_delay, cfg.tlp_min_slack);
      if (at != kNever) q.timers.set(Timer::kTlp, at);
    }
    return;
  }
  // Nothing in flight: still bound a wait on the peer by the same timeout.
  if (rto == kNever || !waiting_on_peer(q)) {
    q.wait_since = kNever;
    q.timers.cancel(Timer::kRto);
    return;
  }
  if (q.wait_since == kNever) q.wait_since = now;
  q.timers.set(Timer::kRto, q.wait_since + rto);
}

void Core::resync_health(Qp& q, Time now) {
  q.health_epoch = health.epoch();
  q.paths.set_planes_held(health.held(*q.health, now, &q.health_recheck));
  // EVs held by the shared view: looked up only while some EV hold may be running (or this
  // QP still marks some held), once per change of the view, not per packet.
  if (health.ev_holds_end() <= now && q.paths.evs_held() == 0) return;
  for (uint16_t i = 0; i < q.paths.size(); ++i) {
    const uint32_t ev = q.paths.path(i).ev;
    // A hold that ran out unanswered is tested with one PROBE, by the first QP to look (it
    // is about to send a packet, so it lives for the probe's reply: that packet's ACK is
    // still to come).
    if (health.ev_probe_due(ev, now)) send_probe(q, i, 0);
    Time until = kNever;
    const bool held = health.ev_held(ev, now, &until);
    q.paths.set_ev_held(i, held);
    if (held) q.health_recheck = std::min(q.health_recheck, until);
  }
}

void Core::mark_lost(Qp& q, uint32_t psn, Time now, Time not_before, LossKind why,
                     LossRule rule) {
  TxPkt& p = q.snd.pkt(psn);
  if (p.state == TxPkt::kInFlight) {
    p.lost_by = rule;
    p.proven = false;
    list_remove(q, psn);
    p.state = TxPkt::kLost;
    q.snd.bytes_in_flight -= p.len;
    q.paths.on_left(p.plane);
    q.paths.count_lost(p.path);
    q.snd.retx.push_back(psn);
    if (why != LossKind::kNoBlame) {  // RACK or RTO: blame the EV (and its plane), tell CC
      q.paths.on_lost(p.path, why == LossKind::kTimeout, now, ev_scratch);
      if (q.health && health.on_lost(*q.health, q.paths.hot(p.path).plane, now))
        ++stats.plane_holds;
      if (q.health && health.on_lost_ev(q.paths.hot(p.path).ev, now)) ++stats.ev_holds;
      if (q.cc) q.cc->on_loss(now);
      probe_base_rtt(q);
      p.blamed = true;
    }
  }
  Time& nb = q.snd.not_before_slot(psn);
  nb = std::max(nb, not_before);
}

void Core::lose_planes(Qp& q, uint16_t planes, Time now) {
  bool any = false;
  for (uint16_t m = planes; m != 0; m &= static_cast<uint16_t>(m - 1))
    any = any || q.paths.inflight(static_cast<uint16_t>(std::countr_zero(m))) > 0;
  if (!any) return;
  uint64_t psn = q.snd.list_head;
  while (psn != kNoLink) {
    const TxPkt& p = q.snd.pkt(static_cast<uint32_t>(psn));
    const uint64_t next = p.next == psn ? kNoLink : p.next;
    if (planes & (1u << p.plane))
      mark_lost(q, static_cast<uint32_t>(psn), now, now, LossKind::kNoBlame);
    psn = next;
  }
  make_ready(q);
}

void Core::on_peer_ports(Qp& q, uint16_t down, Time now) {
  if (!q.health || down == q.health->reported_down) return;  // the known word: almost every ACK
  const auto gained = static_cast<uint16_t>(down & ~q.health->reported_down);
  health.set_reported_down(*q.health, down);
  if (gained == 0) return;
  Time& after = port_sweep_after[q.attr.peer];
  if (now < after) return;
  after = now + health.policy().hold;
  for (auto& o : qps)
    if (o && o.get() != &q && o->health == q.health && sends_in(o->state))
      lose_planes(*o, gained, now);
}

void Core::ack_psn(Qp& q, uint32_t psn, Time now, AckTally* acked) {
  TxPkt& p = q.snd.pkt(psn);
  if (p.state != TxPkt::kInFlight && p.state != TxPkt::kLost) return;
  // Spurious loss: declared lost, yet acknowledged before a resend could be, or within min
  // RTT / 2 of the resend (too soon for the resend's own ACK). on_ack also finds one from an
  // ACK that echoes an earlier copy.
  if (p.state == TxPkt::kLost || (p.tx_count > 1 && now - p.sent < q.rtt.min_rtt() / 2))
    spurious_loss(q, p, false);
  else
    q.loss.on_clean_ack();
  if (p.state == TxPkt::kInFlight) {
    list_remove(q, psn);
    q.snd.bytes_in_flight -= p.len;
    q.paths.on_left(p.plane);
    // Time to acknowledgement of this EV (send to ACK, with the receiver's coalescing):
    // what RACK waits for on this path. Only unambiguous (first) transmissions.
    if (p.tx_count == 1) {
      q.paths.on_rtt(p.path, now - p.sent);
      q.loss.rack_rtt = now - p.sent;
    }
  }
  p.state = TxPkt::kAcked;
  SendWqe& w = q.snd.wqe(p);
  ++w.acked;
  q.paths.count_acked(p.path);
  q.paths.on_acked(p.path);
  if (q.health && health.counting(*q.health)) health.on_acked(*q.health, q.paths.hot(p.path).plane);
  if (health.ev_counting()) health.on_acked_ev(q.paths.hot(p.path).ev);
  q.loss.on_delivered(p.xseq);
  // Delivered on its EV: packets sent before it on the same EV are overdue. Only a first
  // transmission says which copy arrived (a resend's ACK may be for the original).
  if (p.tx_count == 1) {
    PathSet::Hot& e = q.paths.tx(p.path);
    if (p.xseq > e.rack_xseq) {
      e.rack_xseq = p.xseq;
      if (e.listed && q.snd.pkt(e.tx_head).xseq < p.xseq &&
          (q.loss.rack_evs.empty() || q.loss.rack_evs.back() != p.path))
        q.loss.rack_evs.push_back(p.path);
    }
  }
  acked->bytes += p.len;
  ++acked->packets;
}

void Core::spurious_loss(Qp& q, TxPkt& p, bool echoed) {
  if (p.proven) return;
  p.proven = true;
  ++q.stats.spurious_losses;
  if (p.lost_by == kLostPerEv) ++q.stats.spurious_per_ev;
  if (p.lost_by == kLostCrossEv) ++q.stats.spurious_cross_ev;
  // A tail probe's or an RTO's resend whose first copy an ACK echoed later says nothing
  // about reordering: only RACK's windows learn from those.
  if (!echoed || p.lost_by != kLostOther) q.loss.on_spurious();
  // The window gives back what the loss took (the packet was only late, not lost): a
  // burst of late packets must not leave the window at a fraction of what the path holds.
  if (p.blamed && q.cc) q.cc->on_spurious_loss();
  p.blamed = false;
}

void Core::ack_through(Qp& q, uint32_t cum, Time now, AckTally* acked) {
  // PSNs below snd_una are already freed.
  while (psn_diff(cum, q.snd.snd_una) > 0) {
    ack_psn(q, q.snd.snd_una, now, acked);
    q.snd.pkt(q.snd.snd_una).state = TxPkt::kFree;
    ++q.snd.snd_una;
  }
}

bool Core::on_ack(Qp& q, Time now, const wire::Packet& pk) {
  const wire::AckHeader& a = pk.ack;
  if (psn_diff(a.cum_psn, q.snd.snd_nxt) > 0) {
    stats.drop(Drop::kBadAck);
    return false;
  }
  ++q.stats.rx_acks;
  if (a.ack_flags & wire::ack_flag::kRides) q.rcv.peer_rides = true;
  // Which path the echoed packet went on: its record is still in the ring.
  int echo_path = -1;
  if (psn_diff(q.snd.snd_nxt, a.echo_psn) > 0 &&
      psn_diff(q.snd.snd_nxt, a.echo_psn) <= static_cast<int64_t>(q.snd.tx.size())) {
    const TxPkt& e = q.snd.pkt(a.echo_psn);
    if (e.path < q.paths.size() && q.paths.hot(e.path).ev == a.echo_ev) echo_path = e.path;
  }
  // The peer's word on its ports: every QP to it stops sending on a dead one; what this QP
  // has in flight there is resent at once (below, after the ACKs), not left to loss detection.
  on_peer_ports(q, a.ports_down, now);
  // The echoed copy is an earlier transmission of a packet since resent (its timestamp is
  // older than the packet's last send): that copy arrived, so the loss that resent it was
  // spurious (what a DSACK says in TCP; the receiver echoes a duplicate it drops, too).
  // Before the ACKs below, so that ack_psn's guess (a resend acknowledged too soon) does not
  // take it first.
  const int64_t echo_back = psn_diff(q.snd.snd_nxt, a.echo_psn);  // in the in-flight ring?
  if (a.echo_ts != 0 && echo_back > 0 && echo_back <= static_cast<int64_t>(q.snd.tx.size())) {
    TxPkt& e = q.snd.pkt(a.echo_psn);
    const auto sent = Time{static_cast<int64_t>(a.echo_ts)};
    if (e.tx_count > 1 && !e.proven && e.state != TxPkt::kLost && sent < e.sent && sent <= now)
      spurious_loss(q, e, true);
  }

  AckTally acked;
  ack_through(q, a.cum_psn, now, &acked);
  for (size_t k = 0; k < a.sack.size(); ++k) {
    uint64_t bits = a.sack[k];
    while (bits) {
      const int b = std::countr_zero(bits);
      bits &= bits - 1;
      const uint32_t psn = a.sack_base + static_cast<uint32_t>(64 * k + b);
      if (psn_diff(psn, q.snd.snd_una) >= 0 && psn_diff(psn, q.snd.snd_nxt) < 0)
        ack_psn(q, psn, now, &acked);
    }
  }
  while (q.snd.snd_una != q.snd.snd_nxt && q.snd.pkt(q.snd.snd_una).state == TxPkt::kAcked) {
    q.snd.pkt(q.snd.snd_una).state = TxPkt::kFree;
    ++q.snd.snd_una;
  }

  // RTT from the echoed timestamp, minus the time the receiver held the ACK.
  const auto echo = Time{static_cast<int64_t>(a.echo_ts)};
  Duration rtt{0};
  if (a.echo_ts != 0 && echo <= now) {
    rtt = now - echo - Duration{a.ack_delay_ns};
    if (rtt <= Duration{0}) rtt = now - echo;
    ++q.stats.rtt_samples;
    q.rtt.on_sample(rtt);
    if (q.health) {  // what a new QP to this peer starts from
      q.health->srtt = q.rtt.srtt();
      q.health->rttvar = q.rtt.rttvar();
      q.health->min_rtt = q.health->min_rtt == Duration{0}
                              ? q.rtt.min_rtt()
                              : std::min(q.health->min_rtt, q.rtt.min_rtt());
    }
    q.stats.srtt_ns = static_cast<uint64_t>(q.rtt.srtt().count());
    q.stats.min_rtt_ns = static_cast<uint64_t>(q.rtt.min_rtt().count());
    if (echo_path >= 0)
      q.paths.set_rtt_sample(static_cast<size_t>(echo_path), static_cast<uint64_t>(rtt.count()));
  }
  const bool ecn = a.ack_flags & wire::ack_flag::kEcnEcho;
  if (echo_path >= 0 && ecn) {
    ++q.signals(static_cast<uint16_t>(echo_path)).ecn_marks;
    q.paths.on_congestion(static_cast<uint16_t>(echo_path));
  }
  if (ecn) probe_base_rtt(q);
  if (q.cc) {
    learn_base_rtt(q, now, rtt);
    if (acked.packets > 0) q.cc->on_ack(now, acked.bytes, rtt, ecn, q.snd.bytes_in_flight);
  }
  if (a.ports_down != 0) lose_planes(q, a.ports_down, now);
  after_acks(q, now, acked.packets > 0);
  return true;
}

void Core::ack_by_response(Qp& q, uint32_t cum, Time now) {
  if (psn_diff(cum, q.snd.snd_una) <= 0 || psn_diff(cum, q.snd.snd_nxt) > 0) return;
  // The request's one transmission gives an RTT sample (the responder's turnaround included:
  // a response states no ack_delay); no congestion signal (no ECN echo, and a response's delay
  // is the responder's queue as much as the path's).
  const TxPkt& req = q.snd.pkt(cum - 1);
  const bool sample = req.state == TxPkt::kInFlight && req.tx_count == 1 && req.sent <= now;
  const Duration rtt = now - req.sent;
  AckTally acked;
  ack_through(q, cum, now, &acked);
  if (sample) {
    ++q.stats.rtt_samples;
    q.rtt.on_sample(rtt);
  }
  after_acks(q, now, acked.packets > 0);
}

void Core::after_acks(Qp& q, Time now, bool progress) {
  if (progress) {
    q.loss.on_progress();
    q.rnr_retries = 0;
    q.last_ack_at = now;
  }
  detect_losses(q, now);
  complete_sends(q);
  arm_rto(q, now);
  if (!ev_scratch.empty()) ev_events(q);
  if (has_data(q, now)) make_ready(q);
}

void Core::detect_losses(Qp& q, Time now) {
  // RACK (RFC 8985) made to tolerate spraying. Paths differ in queueing, so a packet
  // delivered on one EV says little about one sent just before it on another; a path
  // keeps its own packets in order, so one delivered on the same EV says much.
  //   Per EV: a packet sent before a packet delivered on its own EV is lost once it is
  //   older than the min RTT plus the reorder window (the window is slack for networks
  //   that reorder within a path; it grows with spurious losses and shrinks back).
  //   Across EVs (backstop for a path that delivers nothing any more): a packet sent
  //   before one delivered on any EV is lost once it is older than its RTT (the larger
  //   of the QP's SRTT and its EV's send-to-ACK time) plus the spread of queueing
  //   between the paths: SRTT + 4 x RTTVAR, at most 2 x SRTT (an RTO must not come first).
  q.timers.cancel(Timer::kRack);
  if (q.loss.rack_evs.empty() &&
      (q.snd.list_empty() || q.snd.pkt(q.snd.oldest()).xseq >= q.loss.rack_xseq))
    return;  // nothing in flight was sent before a delivered packet (the common case)
  const Duration reo = q.loss.reorder_window(q.rtt);
  Time next = kNever;
  size_t kept = 0;
  for (size_t k = 0; k < q.loss.rack_evs.size(); ++k) {
    const uint16_t ev = q.loss.rack_evs[k];
    const PathSet::Hot& e = q.paths.hot(ev);
    while (e.listed) {
      const uint32_t psn = e.tx_head;
      const TxPkt& p = q.snd.pkt(psn);
      if (p.xseq >= e.rack_xseq) break;
      const Time deadline = p.sent + q.rtt.min_rtt() + reo;
      if (deadline > now) {
        next = std::min(next, deadline);
        if (std::find(q.loss.rack_evs.begin(), q.loss.rack_evs.begin() + kept, ev) ==
            q.loss.rack_evs.begin() + kept)
          q.loss.rack_evs[kept++] = ev;
        break;
      }
      ++q.stats.fast_losses;
      mark_lost(q, psn, now, now, LossKind::kRack, kLostPerEv);
    }
  }
  q.loss.rack_evs.resize(kept);
  const Duration srtt = q.loss.rack_srtt(q.rtt);
  const Duration spread = q.loss.spread(q.rtt);
  while (!q.snd.list_empty()) {
    const uint32_t psn = q.snd.oldest();
    const TxPkt& p = q.snd.pkt(psn);
    if (p.xseq >= q.loss.rack_xseq) break;
    const Time deadline = p.sent + std::max(srtt, q.paths.hot(p.path).srtt()) + spread;
    if (deadline > now) {
      next = std::min(next, deadline);
      break;
    }
    ++q.stats.fast_losses;
    ++q.stats.cross_ev_losses;
    mark_lost(q, psn, now, now, LossKind::kRack, kLostCrossEv);
  }
  if (next != kNever) q.timers.set(Timer::kRack, next);
}

void Core::on_nack(Qp& q, Time now, const wire::Packet& pk) {
  const wire::NackHeader& n = pk.nack;
  if (psn_diff(n.nack_psn, q.snd.snd_nxt) >= 0 || psn_diff(n.cum_psn, q.snd.snd_nxt) > 0) {
    stats.drop(Drop::kBadAck);
    return;
  }
  ++q.stats.rx_nacks;
  AckTally acked;
  ack_through(q, n.cum_psn, now, &acked);
  if (q.cc && acked.packets > 0)
    q.cc->on_ack(now, acked.bytes, Duration{0}, false, q.snd.bytes_in_flight);
  const bool in_flight = psn_diff(n.nack_psn, q.snd.snd_una) >= 0;
  TxPkt* p = in_flight ? &q.snd.pkt(n.nack_psn) : nullptr;
  if (p && p->state != TxPkt::kInFlight && p->state != TxPkt::kLost) p = nullptr;

  if (fatal_reason(n.reason)) {
    // Also honoured for a PSN already acked: a READ refused after it was accepted.
    const WcStatus st = n.reason == wire::NackReason::kRemoteAccess    ? WcStatus::kRemAccessErr
                        : n.reason == wire::NackReason::kRemoteInvalid ? WcStatus::kRemInvReqErr
                                                                       : WcStatus::kRemOpErr;
    uint64_t culprit = UINT64_MAX;
    if (p && !p->rsp) culprit = q.snd.wqe_seq(*p);
    for (size_t i = 0; i < q.reads.size(); ++i)  // an acknowledged READ refused later: by PSN
      if (!p && q.snd.sq.at(q.reads[i]).first_psn == n.nack_psn) culprit = q.reads[i];
    fail_qp(q, st, culprit);
    return;
  }
  switch (n.reason) {
    case wire::NackReason::kTrimmed:
    case wire::NackReason::kTrimmedLastHop:
      if (p) {
        q.paths.count_trim(p->path);
        if (n.echo_ts != 0 && Time{static_cast<int64_t>(n.echo_ts)} <= now)
          learn_base_rtt(q, now, now - Time{static_cast<int64_t>(n.echo_ts)});
        q.paths.on_congestion(p->path);
        if (q.cc)
          q.cc->on_nack_trim(now, p->len,
                             q.snd.bytes_in_flight - (p->state == TxPkt::kInFlight ? p->len : 0));
        mark_lost(q, n.nack_psn, now, now, LossKind::kNoBlame);
      }
      break;
    case wire::NackReason::kNoResource:
      ++q.stats.rnr_naks;
      if (!p) break;
      // One retry per RNR episode: every packet of a message may be refused at once.
      if (!q.timers.pending(Timer::kRnr, now) && q.attr.rnr_retry != 7 &&
          ++q.rnr_retries > q.attr.rnr_retry) {
        fail_qp(q, WcStatus::kRnrRetryExcErr, p->rsp ? UINT64_MAX : q.snd.wqe_seq(*p));
        return;
      }
      {
        // The responder's timer; one that states none (an older engine): the default.
        const Time at =
            now + rnr_timer_wait((n.rnr_timer & wire::kRnrTimerStated) ? n.rnr_timer
                                                                       : kDefaultMinRnrTimer);
        mark_lost(q, n.nack_psn, now, at, LossKind::kNoBlame);
        if (!q.timers.pending(Timer::kRnr, now)) q.timers.set(Timer::kRnr, at);
      }
      break;
    case wire::NackReason::kPsnOutOfWindow:
    case wire::NackReason::kNoPktBuffer:
    case wire::NackReason::kNoBitmap:
      if (p) {
        const Time at = now + std::max(q.rtt.srtt(), Duration{1000});
        mark_lost(q, n.nack_psn, now, at, LossKind::kNoBlame);
        if (!q.timers.pending(Timer::kRnr, now) || at < q.timers.at(Timer::kRnr))
          q.timers.set(Timer::kRnr, at);
      }
      break;
    default:
      stats.drop(Drop::kBadAck);
      return;
  }
  after_acks(q, now, acked.packets > 0);
}

void Core::sender_timeout(Qp& q, Time now) {
  if (!sends_in(q.state)) return;
  if (q.timers.expired(Timer::kRnr, now)) {
    q.timers.cancel(Timer::kRnr);
    make_ready(q);
  }
  if (q.timers.expired(Timer::kRack, now)) detect_losses(q, now);
  if (q.timers.expired(Timer::kTlp, now) && !q.snd.list_empty() && !q.loss.tlp_sent) {
    q.loss.tlp_sent = true;
    ++q.stats.tail_probes;
    mark_lost(q, q.snd.newest(), now, now, LossKind::kNoBlame);
    q.loss.tlp_go = true;
  }
  if (q.timers.expired(Timer::kRto, now)) {
    const Duration rto = q.rto(cfg.ack_delay);
    const bool in_flight_expired =
        !q.snd.list_empty() && q.snd.pkt(q.snd.oldest()).sent + rto <= now;
    const bool wait_expired =
        q.snd.list_empty() && q.wait_since != kNever && q.wait_since + rto <= now;
    if (in_flight_expired || wait_expired) {
      ++q.stats.rto_fired;
      ++q.loss.rto_retries;
      if (q.retry.exhausted(q.loss.rto_retries)) {
        fail_qp(q, WcStatus::kRetryExcErr,
                q.snd.list_empty() && !q.reads.empty() ? q.reads.front() : UINT64_MAX);
        return;
      }
      q.wait_since = kNever;  // the next wait starts now, with the backed-off timeout
      // Everything in flight is resent elsewhere (as TCP does on RTO): what is
      // older than the timeout blames its EV; what is younger is resent too, or
      // the oldest survivor would set the next, doubled, timeout and the window
      // would drain one packet per timeout.
      while (!q.snd.list_empty()) {
        const bool expired = q.snd.pkt(q.snd.oldest()).sent + rto <= now;
        mark_lost(q, q.snd.oldest(), now, now, expired ? LossKind::kTimeout : LossKind::kNoBlame);
      }
    }
  }
  arm_rto(q, now);
  if (!ev_scratch.empty()) ev_events(q);
  if (has_data(q, now)) make_ready(q);
}

void Core::complete_sends(Qp& q) {
  while (!q.snd.sq.empty() && q.snd.sq.head() != q.snd.pkt_wqe) {
    SendWqe& w = q.snd.sq.at(q.snd.sq.head());
    if (w.acked < w.npkts) break;
    if (is_read_like(w.op) && !w.read_done) break;
    if (w.signaled) {
      Completion c;
      c.wr_id = w.wr_id;
      c.opcode = wc_opcode(w.op);
      c.qpn = q.qpn;
      c.byte_len = static_cast<uint32_t>(w.len);
      complete(q, q.init.send_cq, c);
    }
    if (w.op == Opcode::kWriteImm) --q.sq_wimms;
    const uint64_t seq = q.snd.sq.head();
    q.snd.sq.pop();
    if (!tm_reads.empty()) tm_read_done(q, seq);  // a rendezvous READ (tm.cc)
  }
  complete_local(q);
  while (!q.snd.rsp.empty() && q.snd.rsp.head() != q.snd.pkt_rsp) {
    SendWqe& w = q.snd.rsp.at(q.snd.rsp.head());
    if (w.acked < w.npkts) break;
    q.snd.rsp.pop();
    --q.pending_reads;
  }
}

void Core::read_response_done(Qp& q, uint32_t msn) {
  if (q.reads.empty() || msn != q.reads_base_msn) return;
  q.snd.sq.at(q.reads.front()).read_done = true;
  q.reads.pop_front();
  ++q.reads_base_msn;
  complete_sends(q);
  make_ready(q);  // a fenced WQE may start now
}

void Core::refuse_read(Qp& q, uint32_t req_psn) {
  Control c;
  c.kind = wire::Kind::kNack;
  c.qpn = q.qpn;
  c.path = q.rcv.ack_path;
  c.psn = req_psn;
  c.nack.cum_psn = q.rcv.sb.cum();
  c.nack.nack_psn = req_psn;
  c.nack.reason = wire::NackReason::kRemoteAccess;
  ctrl.push_back(c);
}

void Core::queue_read_response(Qp& q, const Action& a) {
  const Mr* m = a.len ? mr_in(a.rkey, a.pd) : nullptr;
  if (a.len && (!m || !m->covers(a.addr, a.len) || !(m->access & access::kRemoteRead))) {
    // The MR went away between the request and its turn.
    --q.pending_reads;
    refuse_read(q, a.psn);
    return;
  }
  SendWqe& w = q.snd.rsp.push();
  w = SendWqe{};
  w.is_read_resp = true;
  w.op = Opcode::kRead;
  w.msn = a.msn;
  w.len = a.len;
  w.req_psn = a.psn;
  if (a.len) w.sg.push_back(Seg{m->at(a.addr), a.len, a.rkey});
  w.npkts = std::max<uint32_t>(1, (a.len + q.attr.mtu - 1) / q.attr.mtu);
  make_ready(q);
}

void Core::execute_atomic(Qp& q, const Action& a) {
  const Mr* m = mr_in(a.rkey, a.pd);
  if (!m || !m->covers(a.addr, wire::kAtomicLen) || !(m->access & access::kRemoteAtomic)) {
    --q.pending_reads;  // the MR went away between the request and its turn
    refuse_read(q, a.psn);
    return;
  }
  // Atomic against other MRC atomics and the host's own atomic instructions (IBV_ATOMIC_GLOB);
  // on_data checked that the word is 8-byte aligned in memory.
  std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(m->at(a.addr)));
  uint64_t before = a.compare_add;
  if (a.cas)
    word.compare_exchange_strong(before, a.swap);  // `before` = the value found, either way
  else
    before = word.fetch_add(a.compare_add);
  SendWqe& w = q.snd.rsp.push();
  w = SendWqe{};
  w.is_read_resp = true;
  w.op = Opcode::kRead;
  w.msn = a.msn;
  w.len = wire::kAtomicLen;
  w.req_psn = a.psn;
  w.inline_buf.resize(wire::kAtomicLen);
  put_be64(w.inline_buf.data(), before);
  w.npkts = 1;
  make_ready(q);
}

}  // namespace mrc::engine
