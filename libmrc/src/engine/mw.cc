// Memory windows (verbs ibv_alloc_mw, bind, LOCAL_INV, SEND_WITH_INV): a window is a slot of
// the MR table with a key of its own, bound to part of an MR with remote access of its own;
// the responder checks a window's key as it checks an MR's (receiver.cc). Not in MRC 1.0.
#include "engine/internal.h"

namespace mrc::engine {

void Core::unbind(Mr& w) {
  if (w.parent) {
    if (Mr* m = const_cast<Mr*>(mr(w.parent))) --m->windows;
  }
  w.parent = 0;
  w.host = nullptr;
  w.iova = 0;
  w.len = 0;
  w.access = 0;
}

bool Core::invalidate_window(uint32_t key, uint32_t pd) {
  const Mr* m = mr(key);
  if (!m || !m->window || m->pd != pd) return false;
  unbind(mrs[key >> 8]);
  return true;
}

void Core::complete_local(Qp& q) {
  while (!q.local_after.empty() && q.local_after.front().first <= q.snd.sq.head()) {
    complete(q, q.init.send_cq, q.local_after.front().second);
    q.local_after.erase(q.local_after.begin());
  }
}

Status<Error> Core::bind_window(uint32_t key, uint32_t new_key, uint32_t mr_key, uint64_t addr,
                                uint64_t len, uint32_t access, uint32_t pd) {
  Core& c = *this;
  const Mr* w = c.mr(key);
  if (!w || !w->window || w->pd != pd) return Err{Error::kNoSuchMr};
  if ((new_key >> 8) != (key >> 8)) return Err{Error::kInvalidArgument};  // not this window
  const Mr* m = nullptr;
  if (len > 0) {
    m = c.mr(mr_key);
    if (!m || m->window || m->pd != pd) return Err{Error::kNoSuchMr};
    if (!m->covers(addr, len) || !m->host) return Err{Error::kInvalidArgument};
  }
  Mr& win = c.mrs[key >> 8];
  c.unbind(win);
  win.key = new_key;
  if (m) {
    win.host = m->at(addr);
    win.iova = addr;
    win.len = len;
    win.access = access & (access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic);
    win.parent = mr_key;
    ++c.mrs[mr_key >> 8].windows;
  }
  return {};
}

Status<Error> Core::post_local(Qpn qpn, uint64_t wr_id, WcOpcode op, bool signaled) {
  Core& c = *this;
  Qp* q = c.qp(qpn);
  if (!q) return Err{Error::kNoSuchQp};
  if (!sends_in(q->state)) return Err{Error::kBadState};
  if (!signaled && !q->init.sq_sig_all) return {};
  Completion k;
  k.wr_id = wr_id;
  k.opcode = op;
  k.qpn = qpn;
  q->local_after.emplace_back(q->snd.sq.tail(), k);
  c.complete_local(*q);  // at once when nothing was posted before it
  return {};
}

}  // namespace mrc::engine
