// Unreliable datagram QPs (QpInit::ud, verbs UD): each SEND is one UD_SEND datagram to the
// destination its WR names, with no PSN, ACK or retransmission; a receiver takes it into its
// next receive (GRH first) or drops it. It leaves on the path the WR names unless the QPs'
// shared path health holds that path's plane or EV then (ud_path, Engine::set_ud_paths).
// Not in MRC 1.0: the verbs device's own addition (docs/wire-format.md "UD_SEND").
#include <algorithm>
#include <cstring>

#include "engine/internal.h"

namespace mrc::engine {

Status<Error> Core::ud_post_send(Qp& q, const SendWr& wr) {
  if (!sends_in(q.state)) return Err{Error::kBadState};
  if (!wr.ud || wr.invalidate || (wr.opcode != Opcode::kSend && wr.opcode != Opcode::kSendImm))
    return Err{Error::kInvalidArgument};  // UD carries SENDs only, each with its destination
  if (wr.sg.size() > kMaxSge) return Err{Error::kInvalidArgument};
  if (q.ud_queued >= q.init.max_send_wr) return Err{Error::kQueueFull};
  uint64_t len = 0;
  for (const Sge& s : wr.sg) len += s.length;
  if (len > q.attr.mtu) return Err{Error::kTooLarge};  // one datagram: at most the MTU
  if (wr.inline_data && len > kMaxInline) return Err{Error::kTooLarge};
  UdOut o;
  o.bytes.reserve(wire::kUdGrhLen + len);
  o.bytes.assign(wr.ud->grh.begin(), wr.ud->grh.end());
  // Gathered now: the datagram is sent once and never again, so the app's buffers are free
  // as soon as the post returns (the send completes when the driver takes the datagram).
  for (const Sge& s : wr.sg) {
    if (s.length == 0) continue;
    const uint8_t* p;
    if (wr.inline_data) {
      p = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(s.addr));
    } else {
      const Mr* m = mr(s.lkey, q);
      if (!m || !m->covers(s.addr, s.length)) return Err{Error::kLocalAccess};
      p = m->at(s.addr);
    }
    const size_t at = o.bytes.size();
    o.bytes.resize(at + s.length);
    copy(o.bytes.data() + at, p, s.length);
  }
  o.qpn = q.qpn;
  o.dst = *wr.ud;
  o.wr_id = wr.wr_id;
  o.signaled = wr.signaled || q.init.sq_sig_all;
  o.solicited = wr.solicited;
  o.has_imm = wr.opcode == Opcode::kSendImm;
  o.imm = wr.imm;
  // A multicast fan-out: the same datagram to each member process, the last completing.
  for (size_t i = 0; i + 1 < wr.ud_fan.size(); ++i) {
    UdOut m = o;
    m.dst = wr.ud_fan[i];
    m.last = false;
    udq.push_back(std::move(m));
  }
  if (!wr.ud_fan.empty()) o.dst = wr.ud_fan.back();
  udq.push_back(std::move(o));
  ++q.ud_queued;
  return {};
}

std::optional<Transmit> Core::ud_transmit(Time now, std::span<uint8_t> buf) {
  while (!udq.empty()) {
    const UdOut o = std::move(udq.front());
    udq.pop_front();
    Qp* q = qp(o.qpn);
    if (!q || !q->init.ud) continue;  // destroyed since
    if (o.last) --q->ud_queued;
    Completion c;
    c.wr_id = o.wr_id;
    c.opcode = WcOpcode::kSend;
    c.qpn = q->qpn;
    c.byte_len = static_cast<uint32_t>(o.bytes.size() - wire::kUdGrhLen);
    if (!sends_in(q->state)) {  // ERROR since: flushed
      c.status = WcStatus::kWrFlushErr;
      if (o.last) complete(*q, q->init.send_cq, c);
      continue;
    }
    wire::CommonHeader& h = tx_pkt.common;
    h.version = wire::kVersion;
    h.kind = wire::Kind::kUdSend;
    h.flags = wire::flag::kFirst | wire::flag::kLast |
              (cfg.payload_crc ? wire::flag::kPayloadCrc : 0) |
              (o.solicited ? wire::flag::kSolicited : 0) | (o.has_imm ? wire::flag::kImm : 0);
    h.net_flags = 0;
    h.dst_qpn = o.dst.qpn;
    h.token = o.dst.qkey;
    h.psn = 0;
    h.ts = static_cast<uint64_t>(std::max<int64_t>(now.count(), 1));
    wire::DataHeader& d = tx_pkt.data;
    d = wire::DataHeader{};
    d.msg_len = static_cast<uint32_t>(o.bytes.size());
    d.payload_len = static_cast<uint16_t>(o.bytes.size());
    d.imm = o.imm;
    d.src_qpn = q->qpn;
    const Path path = ud_path(o.dst, now);
    h.ev = path.ev;
    const size_t n = wire::encode_header(tx_pkt, o.bytes, buf);
    // The payload goes into the caller's buffer after the header: the driver polls a burst
    // of datagrams before it sends any, so it must outlive this UdOut (a WR chain, or a
    // multicast fan-out, puts several UD datagrams in one burst).
    std::memcpy(buf.data() + n, o.bytes.data(), o.bytes.size());
    ++q->stats.tx_data_packets;
    q->stats.tx_payload_bytes += c.byte_len;
    if (o.signaled && o.last) complete(*q, q->init.send_cq, c);
    return Transmit{o.dst.peer, path, n, buf.subspan(n, o.bytes.size()), o.dst.traffic_class};
  }
  return std::nullopt;
}

Path Core::ud_path(const UdDest& d, Time now) {
  const auto it = ud_paths.find(d.peer);
  if (it == ud_paths.end()) return d.path;
  const SharedHealth::Peer* p = health.find(d.peer);
  static const SharedHealth::Peer kNone;  // no RC QP to the peer yet: local holds only
  Time until;
  const uint16_t held = health.held(p ? *p : kNone, now, &until) | planes_drained;
  const bool evs_held = health.ev_holds_end() > now;  // else no EV lookup per datagram
  auto usable = [&](const Path& x) {
    Time ev_until;
    return !((held >> x.plane) & 1) && !(evs_held && health.ev_held(x.ev, now, &ev_until));
  };
  if (usable(d.path)) return d.path;
  UdPaths& u = it->second;
  for (size_t i = 0; i < u.paths.size(); ++i) {
    const Path& x = u.paths[u.cursor++ % u.paths.size()];
    if (!usable(x)) continue;
    ++stats.ud_rerouted;
    return x;
  }
  return d.path;  // every path held: unreliable anyway, the one the WR named
}

void Core::on_ud(Qp& q, const wire::Packet& p) {
  const wire::DataHeader& d = p.data;
  if (!q.init.ud || p.common.kind != wire::Kind::kUdSend) return stats.drop(Drop::kUnknownQp);
  if (p.common.token != q.attr.qkey) return stats.drop(Drop::kBadToken);  // verbs: a Q_Key mismatch
  if (!connected_in(q.state)) return stats.drop(Drop::kQpNotReady);
  if (p.trimmed) return stats.drop(Drop::kTrimmed);  // unreliable: a trimmed datagram is lost
  if (d.offset != 0 || d.msg_len != d.payload_len || d.payload_len < wire::kUdGrhLen)
    return stats.drop(Drop::kMalformed);
  if (q.init.srq) srq_take(q, q.rcv.rq_base_msn);
  if (q.rcv.rq.empty()) return stats.drop(Drop::kNoReceive);  // no RNR for UD: the datagram is lost
  RecvWqe& r = q.rcv.rq.at(q.rcv.rq.head());
  Completion c;
  c.wr_id = r.wr_id;
  c.opcode = WcOpcode::kRecv;
  c.qpn = q.qpn;
  c.src_qpn = d.src_qpn;
  c.byte_len = d.payload_len;
  c.has_imm = (p.common.flags & wire::flag::kImm) != 0;
  c.imm = c.has_imm ? d.imm : 0;
  c.solicited = (p.common.flags & wire::flag::kSolicited) != 0;
  if (!resolve_recv(q, r))
    c.status = WcStatus::kLocProtErr;
  else if (d.payload_len > r.capacity)  // verbs: a UD message longer than the receive
    c.status = WcStatus::kLocLenErr;
  else
    sg_copy_in(r.sg, 0, p.payload.data(), d.payload_len, cfg.copy);
  if (c.status == WcStatus::kSuccess) {
    ++q.stats.rx_data_packets;
    q.stats.rx_payload_bytes += d.payload_len - wire::kUdGrhLen;
  }
  q.rcv.rq.pop();
  ++q.rcv.rq_base_msn;
  complete(q, q.init.recv_cq, c);
}

void Core::on_ud_mcast(const wire::Packet& p) {
  // The GRH (ibv_grh: its dgid at bytes 24..39) is the payload's start.
  if (p.trimmed) return stats.drop(Drop::kTrimmed);  // unreliable: a trimmed datagram is lost
  if (p.payload.size() < wire::kUdGrhLen) return stats.drop(Drop::kMalformed);
  McastGid g;
  std::copy_n(p.payload.begin() + 24, g.size(), g.begin());
  const auto it = mcast.find(g);
  if (it == mcast.end()) return stats.drop(Drop::kUnknownQp);
  // on_ud completes into CQs only: the member list cannot change while it runs.
  for (const Qpn n : it->second)
    if (Qp* q = qp(n)) on_ud(*q, p);
}

void Core::mcast_forget(Qpn qpn) {
  for (auto it = mcast.begin(); it != mcast.end();) {
    std::erase(it->second, qpn);
    it = it->second.empty() ? mcast.erase(it) : std::next(it);
  }
}

}  // namespace mrc::engine
