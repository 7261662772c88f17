// Receiver (responder) half of a QP: check each data packet against the QP
// and the memory it names, place its payload at once (no reorder buffer),
// mark it in the scoreboard, run in-order work as the cumulative PSN moves,
// and ACK/SACK/NACK.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "engine/internal.h"

namespace mrc::engine {

void Core::nack(Qp& q, const wire::Packet& p, const RxInfo& rx, wire::NackReason r) {
  ++q.stats.tx_nacks;
  if (ctrl.size() >= 4 * 4096) return;  // the sender's timeout covers a NACK we could not queue
  Control c;
  c.kind = wire::Kind::kNack;
  c.qpn = q.qpn;
  c.path = Path{p.common.ev, rx.plane};
  c.psn = p.common.psn;
  c.nack.cum_psn = q.rcv.sb.cum();
  c.nack.nack_psn = p.common.psn;
  c.nack.echo_ev = p.common.ev;
  c.nack.echo_ts = p.common.ts;
  c.nack.reason = r;
  if (r == wire::NackReason::kNoResource)
    c.nack.rnr_timer = static_cast<uint8_t>(wire::kRnrTimerStated | q.attr.min_rnr_timer);
  ctrl.push_back(c);
}

bool Core::refuse(RxData& x, Drop why, wire::NackReason r) {
  stats.drop(why);
  nack(x.q, x.p, x.rx, r);
  return false;
}

bool Core::have_recv(RxData& x, uint32_t msn) {
  Qp& q = x.q;
  if (x.xs) return xrc_take(q, msn, *x.xs, x.p.data.xrc_srqn);
  if (Srq* s = srq(q.init.srq); s && s->tm) return tm_take(x, *s, msn);
  srq_take(q, msn);
  return psn_diff(msn, q.rcv.rq_base_msn + static_cast<uint32_t>(q.rcv.rq.size())) < 0;
}

bool Core::refuse_no_recv(RxData& x) {
  return x.tm_wait ? refuse(x, Drop::kPsnOutOfWindow, wire::NackReason::kPsnOutOfWindow)
                   : refuse(x, Drop::kNoReceive, wire::NackReason::kNoResource);
}

bool Core::take_response_slot(RxData& x) {
  if (x.q.pending_reads >= kMaxReadResponses)
    return refuse(x, Drop::kNoReceive, wire::NackReason::kNoResource);
  ++x.q.pending_reads;
  return true;
}

const Mr* Core::atomic_word(RxData& x, uint32_t need, uint32_t len) {
  const wire::DataHeader& d = x.p.data;
  if (!(x.q.attr.access & need)) {
    refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteAccess);
    return nullptr;
  }
  if (d.msg_len != len || d.payload_len != len || d.addr % 8 != 0) {
    refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteInvalid);
    return nullptr;
  }
  const Mr* m = mr_in(d.rkey, x.pd);
  if (!m || !(m->access & need) || !m->covers(d.addr, wire::kAtomicLen)) {
    refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteAccess);
    return nullptr;
  }
  if (reinterpret_cast<uintptr_t>(m->at(d.addr)) % 8 != 0) {  // an iova unlike its memory
    refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteInvalid);
    return nullptr;
  }
  return m;
}

bool Core::accept_write(RxData& x) {
  Qp& q = x.q;
  const wire::CommonHeader& h = x.p.common;
  const wire::DataHeader& d = x.p.data;
  const bool imm = h.kind == wire::Kind::kWriteImm;
  if (imm && q.attr.max_wimm_dest &&
      psn_diff(d.msn, q.rcv.rq_base_msn) >= static_cast<int32_t>(q.attr.max_wimm_dest)) {
    refuse(x, Drop::kWimmLimit, wire::NackReason::kRemoteInvalid);
    fail_qp(q, WcStatus::kRemInvReqErr);
    return false;
  }
  if (!(q.attr.access & access::kRemoteWrite))  // the QP grants no WRITE at all
    return refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteAccess);
  if (imm) (void)have_recv(x, d.msn);
  if (d.msg_len > 0) {
    const Mr* m = mr_in(d.rkey, x.pd);
    if (!m || !(m->access & access::kRemoteWrite) || !m->covers(d.addr, d.msg_len))
      return refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteAccess);
    if (imm && (h.flags & wire::flag::kLast) && !have_recv(x, d.msn)) return refuse_no_recv(x);
    uint8_t* to = m->at(d.addr + d.offset);
    if (to != x.p.payload.data()) {
      copy(to, x.p.payload.data(), d.payload_len);
      stats.rx_write_copied += d.payload_len;
    } else {  // the driver's receive placement put it there
      stats.rx_write_in_place += d.payload_len;
    }
    if (placement && !x.xs && d.payload_len > 0)  // where Engine::predict_placement starts
      last_write = {q.qpn, q.init.local_token, h.psn, d.rkey, d.addr, d.offset, d.payload_len,
                    d.msg_len};
  } else if (imm && !have_recv(x, d.msn)) {
    return refuse_no_recv(x);
  }
  if (imm) x.act.kind = Action::kWriteImm;
  return true;
}

bool Core::accept_send(RxData& x) {
  Qp& q = x.q;
  const wire::CommonHeader& h = x.p.common;
  const wire::DataHeader& d = x.p.data;
  const int32_t idx = psn_diff(d.msn, q.rcv.rq_base_msn);
  if (idx < 0) {  // its receive already completed: a forged or corrupt MSN
    stats.drop(Drop::kDuplicate);
    return false;
  }
  if (!have_recv(x, d.msn)) return refuse_no_recv(x);
  RecvWqe& r = q.rcv.rq.at(q.rcv.rq.head() + static_cast<uint64_t>(idx));
  const TmMsg* tm = tm_msgs.empty() ? nullptr : tm_msg(q.qpn, d.msn);
  if (!tm && d.msg_len > r.capacity)
    return refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteInvalid);
  if (!resolve_recv(q, r)) {  // a bad or deregistered receive buffer: a local error, and the
    // requester's SEND fails with a remote operation error, as from a verbs responder
    nack(q, x.p, x.rx, wire::NackReason::kRemoteOperation);
    fail_qp(q, WcStatus::kLocProtErr);
    return false;
  }
  if (h.flags & wire::flag::kInvalidate) {  // SEND_WITH_INV: a window of this QP's PD
    const Mr* w = mr_in(d.rkey, x.pd);
    if (!w || !w->window) return refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteAccess);
    x.act.invalidate = true;
    x.act.rkey = d.rkey;
  }
  if (tm) {  // a tag-matching SRQ's message (tm.cc)
    if (!tm_place(tm, r, d, x.p.payload.data()))
      return refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteInvalid);
  } else if (d.payload_len) {
    sg_copy_in(r.sg, d.offset, x.p.payload.data(), d.payload_len, cfg.copy);
  }
  x.act.kind = h.kind == wire::Kind::kSendImm ? Action::kRecvImm : Action::kRecv;
  return true;
}

bool Core::accept_read_req(RxData& x) {
  const wire::DataHeader& d = x.p.data;
  if (!(x.q.attr.access & access::kRemoteRead))  // the QP grants no READ at all
    return refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteAccess);
  if (d.msg_len > 0) {
    const Mr* m = mr_in(d.rkey, x.pd);
    if (!m || !(m->access & access::kRemoteRead) || !m->covers(d.addr, d.msg_len))
      return refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteAccess);
  }
  if (!take_response_slot(x)) return false;
  x.act.kind = Action::kReadReq;
  x.act.addr = d.addr;
  x.act.rkey = d.rkey;
  return true;
}

bool Core::accept_atomic(RxData& x) {
  const wire::DataHeader& d = x.p.data;
  const Mr* m = atomic_word(x, access::kRemoteAtomic, wire::kAtomicReqLen);
  if (!m || !take_response_slot(x)) return false;
  x.act.kind = Action::kAtomic;
  x.act.addr = d.addr;
  x.act.rkey = d.rkey;
  x.act.cas = x.p.common.kind == wire::Kind::kCmpSwap;
  x.act.compare_add = get_be64(x.p.payload.data());
  x.act.swap = get_be64(x.p.payload.data() + 8);
  return true;
}

bool Core::accept_atomic_write(RxData& x) {
  const Mr* m = atomic_word(x, access::kRemoteWrite, wire::kAtomicLen);
  if (!m) return false;
  // Placed on arrival as a WRITE is, with one 64-bit store: a reader sees all 8 bytes or
  // none of them (the bytes as sent: the word is the app's, in its byte order).
  uint64_t v = 0;
  std::memcpy(&v, x.p.payload.data(), sizeof v);
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(m->at(x.p.data.addr))).store(v);
  return true;
}

bool Core::accept_read_resp(RxData& x, Time now) {
  Qp& q = x.q;
  const wire::DataHeader& d = x.p.data;
  const int32_t idx = psn_diff(d.msn, q.reads_base_msn);
  if (idx < 0 || static_cast<size_t>(idx) >= q.reads.size()) {
    stats.drop(Drop::kBadAck);
    return false;
  }
  const SendWqe& w = q.snd.sq.at(q.reads[static_cast<size_t>(idx)]);
  if (d.msg_len != w.len) {
    stats.drop(Drop::kBadAck);
    return false;
  }
  if (!live(w.sg)) {
    fail_qp(q, WcStatus::kLocProtErr, q.reads[static_cast<size_t>(idx)]);
    return false;
  }
  if (is_atomic(w.op)) {  // the value before the operation, big-endian on the wire
    if (d.payload_len != wire::kAtomicLen) {
      stats.drop(Drop::kBadAck);
      return false;
    }
    const uint64_t v = get_be64(x.p.payload.data());
    sg_copy_in(w.sg, 0, reinterpret_cast<const uint8_t*>(&v), sizeof v, cfg.copy);
  } else if (d.payload_len) {
    sg_copy_in(w.sg, d.offset, x.p.payload.data(), d.payload_len, cfg.copy);
  }
  x.act.kind = Action::kReadResp;
  q.loss.rto_retries = 0;  // the responder is alive: restart the wait for the rest
  if (q.wait_since != kNever) q.wait_since = now;
  ack_by_response(q, w.first_psn + w.npkts, now);  // last: it may complete and pop WQEs
  return true;
}

void Core::note_rx(Qp& q, Time now, const RxInfo& rx, const wire::CommonHeader& h) {
  if (q.rcv.unacked == 0) q.rcv.last_rx.ack_flags = 0;
  q.rcv.last_rx.echo_ev = h.ev;
  q.rcv.last_rx.echo_psn = h.psn;
  q.rcv.last_rx.echo_ts = h.ts;
  q.rcv.last_rx_at = now;
  q.rcv.ack_path = Path{h.ev, rx.plane};
}

void Core::on_data(Qp& q, Time now, const RxInfo& rx, const wire::Packet& p) {
  const wire::CommonHeader& h = p.common;
  const wire::DataHeader& d = p.data;
  // The peer's word on its ports, as in its ACKs (Core::on_ack): a QP that only receives
  // from it tells the QPs that send to it. Not on data to an XRC target QP, where the same
  // two bytes name an XRC SRQ (wire::DataHeader).
  if (!q.init.xrcd) {
    on_peer_ports(q, d.ports_down, now);
    if (d.ports_down != 0) lose_planes(q, d.ports_down, now);
  }
  RxData x{q, p, rx, nullptr, q.init.pd, {}};
  if (p.trimmed) {
    refuse(x, Drop::kTrimmed,
           (h.net_flags & wire::net_flag::kTrimmedLastHop) ? wire::NackReason::kTrimmedLastHop
                                                           : wire::NackReason::kTrimmed);
    return;
  }
  const int32_t ahead = psn_diff(h.psn, q.rcv.sb.cum());
  if (ahead < 0 || q.rcv.sb.received(h.psn)) {
    stats.drop(Drop::kDuplicate);
    // Re-ACK (the sender may have missed ours), echoing this packet so its RTT
    // sample is this transmission's.
    note_rx(q, now, rx, h);
    want_ack(q);
    // A resend of what an ACK waiting for a reply covers: the sender's timer beat the wait
    // (a small RTO), a miss as a reply that never came.
    if (q.rcv.held) ride_missed(q);
    return;
  }
  const uint32_t window = q.attr.max_psn_range_dest
                              ? std::min(q.attr.max_psn_range_dest, q.rcv.sb.window())
                              : q.rcv.sb.window();
  if (static_cast<uint32_t>(ahead) >= window) {
    refuse(x, Drop::kPsnOutOfWindow, wire::NackReason::kPsnOutOfWindow);
    return;
  }
  if (uint64_t{d.offset} + d.payload_len > d.msg_len) {
    refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteInvalid);
    return;
  }
  // An XRC target QP: the message's XRC SRQ (of the QP's domain) gives its receive, its CQ
  // and the PD its memory is checked in (as data_mr looks it up).
  if (q.init.xrcd && h.kind != wire::Kind::kReadResp) {
    x.xs = xrc_srq(q, d.xrc_srqn);
    if (!x.xs) {
      refuse(x, Drop::kRemoteAccess, wire::NackReason::kRemoteInvalid);
      return;
    }
    x.pd = x.xs->xrc.pd;
  }
  x.act.psn = h.psn;
  x.act.msn = d.msn;
  x.act.imm = d.imm;
  x.act.len = d.msg_len;
  x.act.solicited = h.flags & wire::flag::kSolicited;
  x.act.pd = x.pd;
  bool ok = false;
  switch (h.kind) {
    case wire::Kind::kWrite:
    case wire::Kind::kWriteImm:
      ok = accept_write(x);
      break;
    case wire::Kind::kSend:
    case wire::Kind::kSendImm:
      ok = accept_send(x);
      break;
    case wire::Kind::kReadReq:
      ok = accept_read_req(x);
      break;
    case wire::Kind::kCmpSwap:
    case wire::Kind::kFetchAdd:
      ok = accept_atomic(x);
      break;
    case wire::Kind::kAtomicWrite:
      ok = accept_atomic_write(x);
      break;
    case wire::Kind::kReadResp:
      ok = accept_read_resp(x, now);
      break;
    default:
      break;
  }
  if (ok) received(q, now, rx, p, static_cast<uint32_t>(ahead), x.act);
}

const Mr* Core::data_mr(const Qp& q, const wire::DataHeader& d) {
  if (!q.init.xrcd) return mr_in(d.rkey, q.init.pd);
  const Srq* s = xrc_srq(q, d.xrc_srqn);
  return s ? mr_in(d.rkey, s->xrc.pd) : nullptr;
}

void Core::received(Qp& q, Time now, const RxInfo& rx, const wire::Packet& p, uint32_t ahead,
                    const Action& act) {
  const wire::CommonHeader& h = p.common;
  const bool had_holes = q.rcv.sb.has_holes();
  const uint32_t unacked_before = q.rcv.unacked;
  (void)q.rcv.sb.mark(h.psn);
  ++q.stats.rx_data_packets;
  q.stats.rx_payload_bytes += p.data.payload_len;
  if ((h.flags & wire::flag::kLast) && act.kind != Action::kNone) {
    if (ahead >= q.rcv.acts.size()) q.rcv.grow_acts(ahead);
    q.rcv.act(h.psn) = act;
  }
  q.rcv.sb.advance([&](uint32_t psn) {
    if (q.rcv.acts.empty()) return;
    Action& a = q.rcv.act(psn);
    if (a.kind != Action::kNone) {
      run_action(q, a);
      a.kind = Action::kNone;
    }
  });

  // ACK policy: at once on a hole or when one is filled (the filler may complete a message
  // whose last packet came first: its app may see the completion and close the QP before a
  // delayed ACK), on request or every ack_every packets; else delayed.
  note_rx(q, now, rx, h);
  // But none for a READ or atomic request answered in this pass, in order, with nothing else
  // waiting for an ACK and no other response ahead of its own (which leaves next, as responses
  // go before requests): its response acknowledges it (Core::ack_by_response), one datagram
  // and one wakeup less a round trip (issue 17). A request queued behind other responses (a
  // READ pipeline) is ACKed as before, lest the requester time out waiting for its response.
  // An ECN mark still goes back in an ACK; a response that never arrives has the request
  // resent, and a duplicate is ACKed.
  const bool answered = (act.kind == Action::kReadReq || act.kind == Action::kAtomic) &&
                        sends_in(q.state) && q.pending_reads == 1 && unacked_before == 0 &&
                        !had_holes && !q.rcv.sb.has_holes() && !rx.ecn_ce &&
                        psn_diff(q.rcv.sb.cum(), h.psn) > 0;
  if (h.flags & wire::flag::kLast) q.rcv.last_msg_at = now;
  if (answered) return;
  ++q.rcv.unacked;
  if (rx.ecn_ce) q.rcv.last_rx.ack_flags |= wire::ack_flag::kEcnEcho;
  const bool holes = had_holes || q.rcv.sb.has_holes();
  if (!holes && !rx.ecn_ce && q.rcv.unacked < cfg.ack_every && (h.flags & wire::flag::kAckReq) &&
      waits_for_reply(q, h)) {
    // A ping-pong: the reply the app sends next carries this ACK (Core::send_data), else
    // it goes alone at the timer (which then covers earlier packets' delayed ACK too).
    q.rcv.held = true;
    q.timers.set(Timer::kAck, now + cfg.ride_wait);
  } else if ((h.flags & wire::flag::kAckReq) || holes || q.rcv.unacked >= cfg.ack_every) {
    want_ack(q);
  } else if (q.timers.at(Timer::kAck) == kNever) {
    q.timers.set(Timer::kAck, now + cfg.ack_delay);
  }
}

bool Core::waits_for_reply(Qp& q, const wire::CommonHeader& h) {
  // One-packet messages only: a longer message's ACK is a small share of its datagrams, and
  // its sender's next message (bulk, the NCCL plugin's) may wait for that completion.
  // Nor a READ response's (or an atomic's): the app's next request has no payload to carry it
  // (send_data), so it would only go later, behind that request.
  constexpr uint8_t kWhole = wire::flag::kFirst | wire::flag::kLast;
  if (!cfg.ack_rides || !q.rcv.peer_rides || !q.rcv.replies || (h.flags & kWhole) != kWhole ||
      (h.flags & wire::flag::kRetransmit) || h.kind == wire::Kind::kReadResp ||
      !sends_in(q.state))
    return false;
  if (q.rcv.ride_skip > 0) {  // replies came too late lately: not this message
    --q.rcv.ride_skip;
    return false;
  }
  // The peer's RTO (as this end's, from the same path's round trips and, as verbs apps set
  // it, the same timeout) must leave room for the wait: a tail probe clamped before a small
  // RTO goes at RTO - (SRTT + 4 RTTVAR + ack_delay) after the send (rtt.h tlp_at), which must
  // come after the ACK that waited.
  return q.rto(cfg.ack_delay) >=
         q.rtt.rto_floor(cfg.ack_delay) + q.rtt.srtt() + cfg.ride_wait;
}

void Core::ride_missed(Qp& q) {
  q.rcv.held = false;
  q.rcv.replies = false;  // ACK at once until a reply is quick again, then skip 2, 4 .. 256
  q.rcv.ride_misses = static_cast<uint8_t>(std::min(q.rcv.ride_misses + 1, 8));
  q.rcv.ride_skip = static_cast<uint16_t>(1u << q.rcv.ride_misses);
}

void RecvState::grow_acts(uint32_t ahead) {
  size_t n = acts.empty() ? 16 : 2 * acts.size();
  while (n <= ahead) n *= 2;
  std::vector<Action> bigger(n);
  for (const Action& a : acts)
    if (a.kind != Action::kNone) bigger[a.psn & (n - 1)] = a;
  acts.swap(bigger);
}

void Core::run_action(Qp& q, Action& a) {
  switch (a.kind) {
    case Action::kRecv:
    case Action::kRecvImm:
    case Action::kWriteImm: {
      // Cannot happen with an honest peer:
      if (q.rcv.rq.empty() || a.msn != q.rcv.rq_base_msn || q.rcv.rq.at(q.rcv.rq.head()).pending)
        return;
      const RecvWqe& r = q.rcv.rq.at(q.rcv.rq.head());
      const CqId cq = r.cq ? r.cq : q.init.recv_cq;  // XRC: the SRQ's
      Completion c;
      c.wr_id = r.wr_id;
      c.opcode = a.kind == Action::kWriteImm ? WcOpcode::kRecvWriteImm : WcOpcode::kRecv;
      c.qpn = q.qpn;
      c.byte_len = a.len;
      c.has_imm = a.kind != Action::kRecv;
      c.imm = a.imm;
      c.solicited = a.solicited;
      if (a.invalidate && invalidate_window(a.rkey, a.pd)) {
        c.has_inv = true;
        c.imm = a.rkey;
      }
      const bool emit = tm_msgs.empty() || tm_recv_done(q, a.msn, r, c);
      q.rcv.rq.pop();
      ++q.rcv.rq_base_msn;
      if (emit) complete(q, cq, c);
      break;
    }
    case Action::kReadReq:
      queue_read_response(q, a);
      break;
    case Action::kReadResp:
      read_response_done(q, a.msn);
      break;
    case Action::kAtomic:
      execute_atomic(q, a);
      break;
    case Action::kNone:
      break;
  }
}

void Core::receiver_timeout(Qp& q, Time now) {
  if (q.timers.expired(Timer::kAck, now)) {
    q.timers.cancel(Timer::kAck);
    if (q.rcv.held) ride_missed(q);  // no reply came in time
    if (q.rcv.unacked > 0) want_ack(q);
  }
}

size_t Core::build_ack(Qp& q, Time now, std::span<uint8_t> buf, Path* path) {
  wire::Packet& pk = tx_header(q, wire::Kind::kAck, q.rcv.ack_path.ev, 0, now);
  fill_ack(q, now, pk.ack);
  *path = q.rcv.ack_path;
  return wire::encode_header(pk, {}, buf);
}

void Core::fill_ack(Qp& q, Time now, wire::AckHeader& a) {
  a = q.rcv.last_rx;
  a.ack_flags |= wire::ack_flag::kRides;  // this end reads trailers, whatever ack_rides says
  a.ports_down = health.local_down();
  a.cum_psn = q.rcv.sb.cum();
  const int32_t ahead = psn_diff(a.echo_psn, a.cum_psn);
  a.sack_base = ahead < static_cast<int32_t>(wire::kSackBits) ? a.cum_psn
                                                              : a.echo_psn - (wire::kSackBits - 1);
  a.sack = q.rcv.sb.sack(a.sack_base);
  a.ack_delay_ns =
      q.rcv.unacked
          ? static_cast<uint32_t>(std::min<int64_t>((now - q.rcv.last_rx_at).count(), UINT32_MAX))
          : 0;
  q.rcv.unacked = 0;
  q.rcv.last_rx.ack_flags = 0;
  q.rcv.held = false;
  q.timers.cancel(Timer::kAck);
  ++q.stats.tx_acks;
}

}  // namespace mrc::engine
