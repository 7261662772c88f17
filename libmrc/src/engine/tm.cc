// Tag matching on an SRQ (engine.h create_tm_srq, post_srq_op): the tag list and its phase
// sync, the classification of a message where its first packet lands, and the rendezvous the
// receiver runs (READ, then FIN). Threading: as the engine.
#include <cstring>

#include "engine/internal.h"

namespace mrc::engine {

void Core::make_tm(uint32_t id, CqId cq, uint32_t max_tags) {
  Srq& s = srqs[id - 1];
  s.tm = std::make_shared<SrqTm>();
  s.tm->cq = cq;
  s.tm->max_tags = max_tags;
  ++cqs[cq - 1].users;
}

Result<uint32_t, Error> Core::post_srq_op(uint32_t id, const SrqOp& op) {
  Srq* s = srq(id);
  if (!s || !s->tm) return Err{Error::kInvalidArgument};
  SrqTm& t = *s->tm;
  if (op.kind == SrqOp::kAdd && op.sg.size() > kMaxSge) return Err{Error::kInvalidArgument};
  if (op.kind == SrqOp::kAdd && t.tags.size() >= t.max_tags) return Err{Error::kQueueFull};
  if (op.kind != SrqOp::kAdd && op.kind != SrqOp::kDel && op.kind != SrqOp::kSync)
    return Err{Error::kInvalidArgument};
  if (op.sync || op.kind == SrqOp::kSync) {
    t.synced = op.unexpected_cnt;
    if (t.in_sync())  // the app has seen every unexpected message: every tag may match
      for (TmTag& g : t.tags) g.active = true;
  }
  Completion k;
  k.wr_id = op.wr_id;
  uint32_t handle = 0;
  switch (op.kind) {
    case SrqOp::kAdd: {
      TmTag g;
      g.handle = handle = t.next_handle++;
      if (t.next_handle == 0) t.next_handle = 1;
      g.tag = op.tag;
      g.mask = op.mask;
      g.wr_id = op.recv_wr_id;
      for (const Sge& e : op.sg) {
        if (e.length == 0) continue;
        g.sg.push_back(e);
        g.capacity += e.length;
      }
      g.active = t.in_sync();
      t.tags.push_back(std::move(g));
      k.opcode = WcOpcode::kTmAdd;
      break;
    }
    case SrqOp::kDel: {
      k.opcode = WcOpcode::kTmDel;
      auto it = std::find_if(t.tags.begin(), t.tags.end(),
                             [&](const TmTag& g) { return g.handle == op.handle; });
      if (it == t.tags.end())
        k.status = WcStatus::kTmErr;  // used up by a message, or never added
      else
        t.tags.erase(it);
      break;
    }
    case SrqOp::kSync:
      k.opcode = WcOpcode::kTmSync;
      break;
  }
  if (!t.in_sync()) k.tm_flags |= tm_flag::kSyncReq;
  if (op.signaled || k.status != WcStatus::kSuccess) {
    Cq& cq = cqs[t.cq - 1];
    if (cq.q.size() >= cq.depth)
      push_event(Event{EventType::kCqOverflow, 0, t.cq, k.status});
    else
      cq.q.push_back(k);
  }
  return handle;
}

bool Core::tm_take(RxData& x, Srq& s, uint32_t msn) {
  Qp& q = x.q;
  SrqTm& t = *s.tm;
  const int32_t idx = psn_diff(msn, q.rcv.rq_base_msn);
  if (idx < 0) return false;
  if (static_cast<uint64_t>(idx) < q.rcv.rq.size()) return true;  // an earlier packet classified it
  const wire::DataHeader& d = x.p.data;
  const bool send = x.p.common.kind == wire::Kind::kSend || x.p.common.kind == wire::Kind::kSendImm;
  // In MSN order, from the message's first packet (the one with the header).
  if (static_cast<uint64_t>(idx) > q.rcv.rq.size() || (send && d.offset != 0)) {
    x.tm_wait = true;
    return false;
  }
  if (q.rcv.rq.full()) return false;
  TmMsg m;
  m.cq = t.cq;
  const uint8_t* h = x.p.payload.data();
  if (send && d.msg_len >= tmh::kLen && x.p.payload.size() >= tmh::kLen) {
    const uint8_t op = h[0];
    const bool rndv = op == tmh::kRndv && d.msg_len >= tmh::kLen + tmh::kRvhLen &&
                      x.p.payload.size() >= tmh::kLen + tmh::kRvhLen;
    if (op == tmh::kNoTag) {
      m.kind = TmMsg::kNoTag;
    } else if (op == tmh::kEager || rndv) {
      m.priv = get_be32(h + 4);
      m.tag = get_be64(h + 8);
      if (rndv) {
        m.va = get_be64(h + 16);
        m.rkey = get_be32(h + 24);
        m.len = get_be32(h + 28);
      }
      auto it = std::find_if(t.tags.begin(), t.tags.end(), [&](const TmTag& g) {
        return g.active && ((m.tag ^ g.tag) & g.mask) == 0;
      });
      if (it != t.tags.end()) {
        RecvWqe& r = q.rcv.rq.next();
        r = RecvWqe{};
        r.wr_id = it->wr_id;
        r.posted = std::move(it->sg);
        r.capacity = it->capacity;
        r.cq = t.cq;
        q.rcv.rq.push();
        t.tags.erase(it);
        m.kind = rndv ? TmMsg::kRndv : TmMsg::kEager;
        tm_msgs[{q.qpn, msn}] = m;
        return true;
      }
      m.kind = TmMsg::kUnexpected;
      m.tag = m.priv = 0;  // reported only with a match
    }
  }
  if (s.q.empty()) return false;  // RNR, as any SRQ without receives
  if (m.kind == TmMsg::kUnexpected) ++t.unexpected;
  RecvWqe& r = q.rcv.rq.next();
  r = std::move(s.q.front());
  r.cq = t.cq;
  q.rcv.rq.push();
  s.q.pop_front();
  if (s.limit && s.q.size() < s.limit) {
    s.limit = 0;
    Event e;
    e.type = EventType::kSrqLimit;
    e.qpn = q.qpn;
    e.srq = q.init.srq;
    push_event(e);
  }
  tm_msgs[{q.qpn, msn}] = m;
  return true;
}

bool Core::tm_place(const TmMsg* m, RecvWqe& r, const wire::DataHeader& d, const uint8_t* payload) {
  if (m && m->kind == TmMsg::kRndv) return true;  // the data comes by READ
  const uint64_t skip = m && m->kind == TmMsg::kEager ? tmh::kLen : 0;
  if (d.msg_len - skip > r.capacity) return false;
  const uint64_t from = std::max<uint64_t>(d.offset, skip);
  const uint64_t end = uint64_t{d.offset} + d.payload_len;
  if (end > from)
    sg_copy_in(r.sg, from - skip, payload + (from - d.offset), static_cast<size_t>(end - from),
               cfg.copy);
  return true;
}

bool Core::tm_recv_done(Qp& q, uint32_t msn, const RecvWqe& r, Completion& c) {
  auto it = tm_msgs.find({q.qpn, msn});
  if (it == tm_msgs.end()) return true;
  const TmMsg m = it->second;
  tm_msgs.erase(it);
  switch (m.kind) {
    case TmMsg::kPlain:
      return true;
    case TmMsg::kNoTag:
      c.opcode = WcOpcode::kTmNoTag;
      return true;
    case TmMsg::kUnexpected:
      c.opcode = WcOpcode::kTmRecv;
      return true;
    case TmMsg::kEager:
      c.opcode = WcOpcode::kTmRecv;
      c.tm_flags = tm_flag::kMatch | tm_flag::kDataValid;
      c.tag = m.tag;
      c.tm_priv = m.priv;
      c.byte_len -= static_cast<uint32_t>(tmh::kLen);
      return true;
    case TmMsg::kRndv:
      break;
  }
  c.opcode = WcOpcode::kTmRecv;
  c.tm_flags = tm_flag::kMatch;
  c.tag = m.tag;
  c.tm_priv = m.priv;
  c.byte_len = 0;
  // The READ of the requester's buffer into the tag's, over this QP: the engine's own WR.
  Completion fail = c;
  fail.tm_flags = 0;
  if (m.len > r.capacity) {
    fail.status = WcStatus::kTmRndvIncomplete;
    complete(q, m.cq, c);
    complete(q, m.cq, fail);
    return false;
  }
  std::vector<Sge> sg;
  uint64_t left = m.len;
  for (const Sge& e : r.posted) {
    if (left == 0) break;
    Sge g = e;
    g.length = static_cast<uint32_t>(std::min<uint64_t>(g.length, left));
    left -= g.length;
    sg.push_back(g);
  }
  SendWr wr;
  wr.wr_id = c.wr_id;
  wr.opcode = Opcode::kRead;
  wr.sg = sg;
  wr.remote_addr = m.va;
  wr.rkey = m.rkey;
  wr.signaled = false;
  complete(q, m.cq, c);  // before the READ is posted
  if (!post_send(q, wr, /*internal=*/true)) {
    fail.status = WcStatus::kLocProtErr;  // the tag's buffer is no local memory of the QP
    complete(q, m.cq, fail);
    return false;
  }
  tm_reads[{q.qpn, q.snd.sq.tail() - 1}] = TmRead{m, wr.wr_id};
  return false;
}

void Core::tm_read_done(Qp& q, uint64_t seq) {
  auto it = tm_reads.find({q.qpn, seq});
  if (it == tm_reads.end()) return;
  const TmRead t = it->second;
  tm_reads.erase(it);
  uint8_t fin[tmh::kLen] = {tmh::kFin};
  put_be32(fin + 4, t.msg.priv);
  put_be64(fin + 8, t.msg.tag);
  const Sge g{reinterpret_cast<uintptr_t>(fin), sizeof fin, 0};
  SendWr wr;
  wr.opcode = Opcode::kSend;
  wr.sg = std::span(&g, 1);
  wr.inline_data = true;
  wr.signaled = false;
  (void)post_send(q, wr, /*internal=*/true);  // refused only in a state that flushes anyway
  Completion c;
  c.wr_id = t.wr_id;
  c.opcode = WcOpcode::kTmRecv;
  c.qpn = q.qpn;
  c.tm_flags = tm_flag::kDataValid;  // no kMatch: tag and app context were in the first
  c.byte_len = t.msg.len;
  complete(q, t.msg.cq, c);
}

void Core::tm_forget(Qpn q) {
  tm_msgs.erase(tm_msgs.lower_bound({q, 0}), tm_msgs.upper_bound({q, UINT32_MAX}));
  tm_reads.erase(tm_reads.lower_bound({q, 0}), tm_reads.upper_bound({q, UINT64_MAX}));
}

}  // namespace mrc::engine
