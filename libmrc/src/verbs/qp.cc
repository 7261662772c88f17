// RC QPs of the software verbs device: create, modify (verbs attributes to engine ones),
// query, destroy, post_send / post_recv, and the ibv_wr_* API of QP_ex.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "common/c_enum.h"
#include "mrc/engine/retry.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {
namespace {

io::UdpDriver& driver_of(ibv_qp* qp) { return *qp_of(qp)->ctx->dev->driver; }

// The send flags mrc0 honours (FENCE, SIGNALED, SOLICITED, INLINE); IP_CSUM is for raw
// packet QPs, which mrc0 does not have, and other bits are not flags at all.
constexpr unsigned kSendFlags = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |
                                IBV_SEND_INLINE;

// An atomic WR's shape (one 8-byte SGE for the value before, an 8-byte aligned remote
// address, not inline): 0, or EINVAL and a line naming what is wrong.
int check_atomic(const char* verb, uint64_t remote_addr, uint64_t sge_len, int num_sge,
                 bool inline_data) {
  if (num_sge != 1 || sge_len != 8) {
    log_error("%s: an atomic takes one SGE of 8 bytes (%d SGEs, %llu bytes)", verb, num_sge,
              static_cast<unsigned long long>(sge_len));
    return EINVAL;
  }
  if (remote_addr % 8 != 0) {
    log_error("%s: atomic remote address 0x%llx is not 8-byte aligned", verb,
              static_cast<unsigned long long>(remote_addr));
    return EINVAL;
  }
  if (inline_data) {
    log_error("%s: an atomic cannot be IBV_SEND_INLINE", verb);
    return EINVAL;
  }
  return 0;
}

// XRC initiators: the peer's XRC SRQ of the WR (ibv_get_srq_num there), 1..65535.
int check_xrc_srqn(const char* verb, uint32_t srqn) {
  if (srqn == 0 || srqn > 0xffff)
    return fail(EINVAL, "%s: XRC remote SRQ number %u (an XRC SRQ's number: 1..65535)", verb, srqn);
  return 0;
}

// One verbs send WR as an engine WR; sg points into `sges`. 0 or an errno.
int convert(const ibv_send_wr& w, engine::SendWr& out, engine::Sge* sges, uint32_t max_sge) {
  if (w.send_flags & ~kSendFlags) {
    log_error("ibv_post_send: send_flags 0x%x: mrc0 honours FENCE, SIGNALED, SOLICITED and "
              "INLINE only",
              w.send_flags);
    return EINVAL;
  }
  if (w.num_sge < 0 || static_cast<uint32_t>(w.num_sge) > max_sge) {
    log_error("ibv_post_send: %d SGEs, the QP takes at most %u", w.num_sge, max_sge);
    return EINVAL;  // as rdma-core's providers (mlx5, rxe) say it
  }
  switch (raw(w.opcode)) {
    case IBV_WR_RDMA_WRITE: out.opcode = engine::Opcode::kWrite; break;
    case IBV_WR_RDMA_WRITE_WITH_IMM: out.opcode = engine::Opcode::kWriteImm; break;
    case IBV_WR_SEND: out.opcode = engine::Opcode::kSend; break;
    case IBV_WR_SEND_WITH_IMM: out.opcode = engine::Opcode::kSendImm; break;
    case IBV_WR_SEND_WITH_INV:  // the peer invalidates its window invalidate_rkey (mw.cc)
      out.opcode = engine::Opcode::kSend;
      out.invalidate = true;
      break;
    case IBV_WR_RDMA_READ: out.opcode = engine::Opcode::kRead; break;
    case IBV_WR_ATOMIC_CMP_AND_SWP: out.opcode = engine::Opcode::kCmpSwap; break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: out.opcode = engine::Opcode::kFetchAdd; break;
    case IBV_WR_ATOMIC_WRITE:
      out.opcode = engine::Opcode::kAtomicWrite;
      break;
    default:
      log_error(
          "ibv_post_send: opcode %d is not supported by mrc0 (SEND, SEND_WITH_IMM, "
          "RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ, ATOMIC_CMP_AND_SWP, "
          "ATOMIC_FETCH_AND_ADD, ATOMIC_WRITE, BIND_MW, LOCAL_INV, SEND_WITH_INV are)",
          raw(w.opcode));
      return EINVAL;
  }
  if (engine::is_atomic(out.opcode)) {
    if (int e = check_atomic("ibv_post_send", w.wr.atomic.remote_addr,
                             w.num_sge == 1 ? w.sg_list[0].length : 0, w.num_sge,
                             (w.send_flags & IBV_SEND_INLINE) != 0))
      return e;
    out.remote_addr = w.wr.atomic.remote_addr;
    out.rkey = w.wr.atomic.rkey;
    out.compare_add = w.wr.atomic.compare_add;
    out.swap = w.wr.atomic.swap;
  }
  if (out.opcode == engine::Opcode::kAtomicWrite) {  // 8 bytes (one SGE) to an aligned word
    uint64_t len = 0;
    for (int i = 0; i < w.num_sge; ++i) len += w.sg_list[i].length;
    if (len != 8 || w.wr.rdma.remote_addr % 8 != 0) {
      log_error(
          "ibv_post_send: an atomic write takes 8 bytes (%llu) to an 8-byte aligned "
          "remote address (0x%llx)",
          static_cast<unsigned long long>(len),
          static_cast<unsigned long long>(w.wr.rdma.remote_addr));
      return EINVAL;
    }
  }
  for (int i = 0; i < w.num_sge; ++i)
    sges[i] = engine::Sge{w.sg_list[i].addr, w.sg_list[i].length, w.sg_list[i].lkey};
  out.wr_id = w.wr_id;
  out.sg = std::span<const engine::Sge>(sges, static_cast<size_t>(w.num_sge));
  if (!engine::is_atomic(out.opcode)) {
    out.remote_addr = w.wr.rdma.remote_addr;
    out.rkey = w.wr.rdma.rkey;
  }
  if (out.invalidate) out.rkey = w.invalidate_rkey;
  out.imm = out.invalidate ? 0 : ntohl(w.imm_data);  // one union: imm_data, invalidate_rkey
  out.signaled = (w.send_flags & IBV_SEND_SIGNALED) != 0;
  out.solicited = (w.send_flags & IBV_SEND_SOLICITED) != 0;
  out.inline_data = (w.send_flags & IBV_SEND_INLINE) != 0;
  out.fence = (w.send_flags & IBV_SEND_FENCE) != 0;
  return 0;
}

void log_post_error(Qp* q, const char* verb, engine::Error e) {
  // Post errors are the app's to handle; say why once per QP and error kind at most.
  const uint64_t bit = 1ull << (static_cast<unsigned>(e) % 64);
  if (q->post_errors_logged.fetch_or(bit, std::memory_order_relaxed) & bit) return;
  log_error("%s on QP %u: %s", verb, q->qpx.qp_base.qp_num, engine::to_string(e));
}

// ---- ibv_wr_* (QP_ex) --------------------------------------------------------------------
Qp* qx(ibv_qp_ex* q) { return reinterpret_cast<Qp*>(q); }

Qp::Pending& begin_wr(ibv_qp_ex* q, engine::Opcode op) {
  Qp* p = qx(q);
  p->pending.emplace_back();
  Qp::Pending& w = p->pending.back();
  w.wr.wr_id = q->wr_id;
  w.wr.opcode = op;
  w.wr.signaled = (q->wr_flags & IBV_SEND_SIGNALED) != 0;
  w.wr.solicited = (q->wr_flags & IBV_SEND_SOLICITED) != 0;
  w.wr.fence = (q->wr_flags & IBV_SEND_FENCE) != 0;
  if (q->wr_flags & ~kSendFlags) {
    log_error("ibv_wr_*: wr_flags 0x%x: mrc0 honours FENCE, SIGNALED, SOLICITED and INLINE only",
              q->wr_flags);
    p->wr_error = EINVAL;
  }
  return w;
}
void wr_start(ibv_qp_ex* q) {
  qx(q)->pending.clear();
  qx(q)->wr_error = 0;
}
void wr_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  auto& w = begin_wr(q, engine::Opcode::kWrite);
  w.wr.rkey = rkey;
  w.wr.remote_addr = addr;
}
void wr_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
  auto& w = begin_wr(q, engine::Opcode::kWriteImm);
  w.wr.rkey = rkey;
  w.wr.remote_addr = addr;
  w.wr.imm = ntohl(imm);
}
void wr_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  if (q->qp_base.qp_type == IBV_QPT_UC) {
    if (!qx(q)->wr_error) log_error("ibv_wr_rdma_read: a UC QP has no RDMA READ");
    qx(q)->wr_error = EINVAL;
  }
  auto& w = begin_wr(q, engine::Opcode::kRead);
  w.wr.rkey = rkey;
  w.wr.remote_addr = addr;
}
void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
  auto& w = begin_wr(q, engine::Opcode::kCmpSwap);
  w.wr.rkey = rkey;
  w.wr.remote_addr = addr;
  w.wr.compare_add = compare;
  w.wr.swap = swap;
}
void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
  auto& w = begin_wr(q, engine::Opcode::kFetchAdd);
  w.wr.rkey = rkey;
  w.wr.remote_addr = addr;
  w.wr.compare_add = add;
}
// The 8 bytes at `wire`, stored at the responder with one 64-bit store (engine kAtomicWrite).
void wr_atomic_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, const void* wire) {
  auto& w = begin_wr(q, engine::Opcode::kAtomicWrite);
  w.wr.rkey = rkey;
  w.wr.remote_addr = addr;
  w.wr.inline_data = true;
  const auto* p = static_cast<const uint8_t*>(wire);
  w.inline_buf.assign(p, p + 8);
}
void wr_send(ibv_qp_ex* q) { begin_wr(q, engine::Opcode::kSend); }
void wr_send_inv(ibv_qp_ex* q, uint32_t rkey) {
  auto& w = begin_wr(q, engine::Opcode::kSend);
  w.wr.invalidate = true;
  w.wr.rkey = rkey;
}
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* b) {
  auto& w = begin_wr(q, engine::Opcode::kSend);
  w.local_op = IBV_WR_BIND_MW;
  w.mw = mw;
  w.local_rkey = rkey;
  w.bind = *b;
}
void wr_local_inv(ibv_qp_ex* q, uint32_t rkey) {
  auto& w = begin_wr(q, engine::Opcode::kSend);
  w.local_op = IBV_WR_LOCAL_INV;
  w.local_rkey = rkey;
}
void wr_send_imm(ibv_qp_ex* q, __be32 imm) { begin_wr(q, engine::Opcode::kSendImm).wr.imm = ntohl(imm); }
bool has_wr(ibv_qp_ex* q, const char* what) {
  if (!qx(q)->pending.empty()) return true;
  if (!qx(q)->wr_error) log_error("%s before an opcode (ibv_wr_send, ibv_wr_rdma_write, ...)", what);
  qx(q)->wr_error = EINVAL;
  return false;
}
void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  if (!has_wr(q, "ibv_wr_set_sge")) return;
  qx(q)->pending.back().sg.assign(1, engine::Sge{addr, length, lkey});
}
void wr_set_sge_list(ibv_qp_ex* q, size_t n, const ibv_sge* sg) {
  if (!has_wr(q, "ibv_wr_set_sge_list")) return;
  if (n > qx(q)->cap.max_send_sge) {
    log_error("ibv_wr_set_sge_list: %zu SGEs, the QP takes at most %u", n, qx(q)->cap.max_send_sge);
    qx(q)->wr_error = EINVAL;
    return;
  }
  auto& v = qx(q)->pending.back().sg;
  v.clear();
  for (size_t i = 0; i < n; ++i) v.push_back(engine::Sge{sg[i].addr, sg[i].length, sg[i].lkey});
}
void wr_set_inline_data_list(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) {
  if (!has_wr(q, "ibv_wr_set_inline_data")) return;
  auto& w = qx(q)->pending.back();
  w.inline_buf.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto* p = static_cast<const uint8_t*>(bufs[i].addr);
    w.inline_buf.insert(w.inline_buf.end(), p, p + bufs[i].length);
  }
  if (w.inline_buf.size() > qx(q)->cap.max_inline_data) {
    log_error("ibv_wr_set_inline_data: %zu bytes, the QP inlines at most %u",
              w.inline_buf.size(), qx(q)->cap.max_inline_data);
    qx(q)->wr_error = EINVAL;
  }
  w.wr.inline_data = true;
}
void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  const ibv_data_buf b{addr, length};
  wr_set_inline_data_list(q, 1, &b);
}
int wr_complete(ibv_qp_ex* q) {
  Qp* p = qx(q);
  const ibv_qp_state st = q->qp_base.state;
  if (!p->wr_error && !engine::takes_sends_in(to_engine(st))) {
    log_post_error(p, "ibv_wr_complete", engine::Error::kBadState);
    p->wr_error = EINVAL;
  }
  if (p->wr_error) {
    p->pending.clear();
    return p->wr_error;
  }
  Status<engine::Error> r;
  McastFans fans;  // a multicast AH's members, found before the engine's lock
  if (q->qp_base.qp_type == IBV_QPT_UD)
    for (auto& w : p->pending) fans.prepare(p->ctx->dev, w.ah);
  driver_of(&q->qp_base).with_engine_post(q->qp_base.qp_num, [&](engine::Engine& e) {
    for (auto& w : p->pending) {
      engine::Sge inl;
      if (w.local_op) {  // a window bound or invalidated now, completed in order (mw.cc)
        const int err =
            w.local_op == IBV_WR_BIND_MW
                ? (w.mw && w.mw->type == IBV_MW_TYPE_2
                       ? bind_window(e, "ibv_wr_bind_mw", &q->qp_base, w.mw, w.local_rkey, w.bind,
                                     w.wr.wr_id, w.wr.signaled)
                       : fail(EINVAL, "ibv_wr_bind_mw: a type 2 memory window is needed"))
                : invalidate_window(e, "ibv_wr_local_inv", &q->qp_base, w.local_rkey, w.wr.wr_id,
                                    w.wr.signaled);
        if (err) {
          r = Err{engine::Error::kInvalidArgument};
          break;
        }
        continue;
      }
      if (q->qp_base.qp_type == IBV_QPT_UD) {  // each WR names its destination
        uint64_t len = 0;
        for (const engine::Sge& g : w.sg) len += g.length;
        if (w.wr.inline_data) len = w.inline_buf.size();
        if (ud_dest("ibv_wr_complete", &q->qp_base, w.ah, w.remote_qpn, w.remote_qkey,
                    static_cast<uint32_t>(len), &w.ud)) {
          r = Err{engine::Error::kInvalidArgument};
          break;
        }
        w.wr.ud = &w.ud;
        w.wr.ud_fan = fans.fan(w.ah, w.ud);
      }
      if (engine::is_atomic(w.wr.opcode) &&
          check_atomic("ibv_wr_complete", w.wr.remote_addr, w.sg.size() == 1 ? w.sg[0].length : 0,
                       static_cast<int>(w.sg.size()), w.wr.inline_data)) {
        r = Err{engine::Error::kInvalidArgument};
        break;
      }
      if (q->qp_base.qp_type == IBV_QPT_XRC_SEND &&
          check_xrc_srqn("ibv_wr_complete", w.wr.xrc_srqn)) {
        r = Err{engine::Error::kInvalidArgument};
        break;
      }
      if (w.wr.inline_data) {
        inl = engine::Sge{reinterpret_cast<uint64_t>(w.inline_buf.data()),
                          static_cast<uint32_t>(w.inline_buf.size()), 0};
        w.wr.sg = std::span<const engine::Sge>(&inl, w.inline_buf.empty() ? 0 : 1);
      } else {
        w.wr.sg = w.sg;
      }
      r = e.post_send(q->qp_base.qp_num, w.wr);
      if (!r) break;
    }
    return 0;
  });
  p->pending.clear();
  if (!r) {
    log_post_error(p, "ibv_wr_complete", r.error());
    return to_errno(r.error());
  }
  return 0;
}
void wr_abort(ibv_qp_ex* q) { qx(q)->pending.clear(); }
void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (q->qp_base.qp_type != IBV_QPT_UD) {
    if (!qx(q)->wr_error) log_error("ibv_wr_set_ud_addr: QP %u is not UD", q->qp_base.qp_num);
    qx(q)->wr_error = EINVAL;
    return;
  }
  if (!has_wr(q, "ibv_wr_set_ud_addr")) return;
  Qp::Pending& w = qx(q)->pending.back();
  w.ah = ah;
  w.remote_qpn = remote_qpn;
  w.remote_qkey = remote_qkey;
}
void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t srqn) {
  if (q->qp_base.qp_type != IBV_QPT_XRC_SEND) {
    if (!qx(q)->wr_error)
      log_error("ibv_wr_set_xrc_srqn: QP %u is not XRC_SEND", q->qp_base.qp_num);
    qx(q)->wr_error = EINVAL;
    return;
  }
  if (!has_wr(q, "ibv_wr_set_xrc_srqn")) return;
  qx(q)->pending.back().wr.xrc_srqn = srqn;
}
void wr_unsupported(ibv_qp_ex* q, const char* what) {
  if (!qx(q)->wr_error) log_error("%s is not supported by mrc0", what);
  qx(q)->wr_error = EOPNOTSUPP;
}

// The checks ibv_create_qp(_ex) makes before it creates anything: true, or false after saying
// why (errno set). An XRC_SEND QP comes with its send_cq as its recv_cq (make_qp sets it).
bool check_qp_args(ibv_context* c, ibv_pd* pd, int type, ibv_cq* send_cq, ibv_cq* recv_cq,
                   ibv_srq* srq, const ibv_qp_cap& cap, uint64_t send_ops, ibv_xrcd* xrcd) {
  // UC QPs are MRC connections too: what UC may lose arrives all the same (docs/verbs-shim.md).
  if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD && type != IBV_QPT_XRC_SEND &&
      type != IBV_QPT_XRC_RECV) {
    fail(EOPNOTSUPP,
         "ibv_create_qp: QP type %d is not supported by mrc0 (RC, UC, UD, XRC_SEND and "
         "XRC_RECV are)",
         type);
    return false;
  }
  // XRC (xrc.cc): an initiator has no receive side (its engine QP's recv_cq is its send_cq,
  // never used); a target has no PD, CQs or receive queue of its own, only its domain.
  const bool tgt = type == IBV_QPT_XRC_RECV;
  if (tgt) {
    if (!xrcd || xrcd->context != c) {
      fail(EINVAL, "ibv_create_qp_ex: an XRC_RECV QP needs an XRCD of this context");
      return false;
    }
    if (srq || send_ops) {
      fail(EINVAL, "ibv_create_qp_ex: an XRC_RECV QP takes no SRQ and sends nothing");
      return false;
    }
  } else {
    if (type == IBV_QPT_XRC_SEND) {
      if (srq) {
        fail(EINVAL, "ibv_create_qp: an XRC_SEND QP has no receive side (no SRQ)");
        return false;
      }
    }
    if (!pd || pd->context != c) {
      fail(EINVAL, "ibv_create_qp: the PD belongs to another context");
      return false;
    }
    if (!send_cq || !recv_cq || !is_mrc_context(send_cq->context) ||
        !is_mrc_context(recv_cq->context)) {
      fail(EINVAL, "ibv_create_qp: send_cq and recv_cq must be mrc0 CQs");
      return false;
    }
  }
  if (srq && srq->context != c) {
    fail(EINVAL, "ibv_create_qp: the SRQ belongs to another context");
    return false;
  }
  if (cap.max_send_wr > kMaxQpWr || cap.max_recv_wr > kMaxQpWr ||
      cap.max_send_sge > engine::kMaxSge || cap.max_recv_sge > engine::kMaxSge ||
      cap.max_inline_data > engine::kMaxInline) {
    fail(EINVAL, "ibv_create_qp: caps above mrc0's (max_*_wr %u, max_*_sge %u, "
         "max_inline_data %u)", kMaxQpWr, engine::kMaxSge, engine::kMaxInline);
    return false;
  }
  const uint64_t supported =
      IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
      (type != IBV_QPT_UD
           ? IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                 IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV
           : 0) |
      (type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND
           ? IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_WRITE
           : 0);
  if (send_ops & ~supported) {
    fail(EOPNOTSUPP, "ibv_create_qp_ex: send_ops_flags 0x%llx are not supported by mrc0",
         static_cast<unsigned long long>(send_ops & ~supported));
    return false;
  }
  return true;
}

// The ibv_wr_* entry points of a QP_ex (the same for every mrc0 QP: each refuses what its QP
// type cannot do when called).
void set_qp_ex_ops(ibv_qp_ex& x) {
  x.wr_rdma_write = &wr_write;
  x.wr_rdma_write_imm = &wr_write_imm;
  x.wr_rdma_read = &wr_read;
  x.wr_send = &wr_send;
  x.wr_send_imm = &wr_send_imm;
  x.wr_set_sge = &wr_set_sge;
  x.wr_set_sge_list = &wr_set_sge_list;
  x.wr_set_inline_data = &wr_set_inline_data;
  x.wr_set_inline_data_list = &wr_set_inline_data_list;
  x.wr_start = &wr_start;
  x.wr_complete = &wr_complete;
  x.wr_abort = &wr_abort;
  x.wr_atomic_cmp_swp = &wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = &wr_atomic_fetch_add;
  x.wr_bind_mw = &wr_bind_mw;
  x.wr_local_inv = &wr_local_inv;
  x.wr_send_inv = &wr_send_inv;
  x.wr_send_tso = [](ibv_qp_ex* q, void*, uint16_t, uint16_t) {
    wr_unsupported(q, "ibv_wr_send_tso");
  };
  x.wr_set_ud_addr = &wr_set_ud_addr;
  x.wr_set_xrc_srqn = &wr_set_xrc_srqn;
  x.wr_atomic_write = &wr_atomic_write;
}

Qp* make_qp(ibv_context* c, ibv_pd* pd, int type, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_srq* srq,
            const ibv_qp_cap& cap, int sq_sig_all, void* qp_context, uint64_t send_ops,
            ibv_xrcd* xrcd = nullptr) {
  if (type == IBV_QPT_XRC_SEND) recv_cq = send_cq;  // an initiator's receive side is never used
  if (!check_qp_args(c, pd, type, send_cq, recv_cq, srq, cap, send_ops, xrcd)) return nullptr;
  const bool tgt = type == IBV_QPT_XRC_RECV;
  Device* dev = device_of(c);
  engine::QpInit init;
  init.send_cq = tgt ? 0 : cq_of(send_cq)->id;
  init.recv_cq = tgt ? 0 : cq_of(recv_cq)->id;
  init.max_send_wr = std::max(cap.max_send_wr, 1u);
  // A target's receives are its messages' SRQs': as many in hand as one SRQ can hold.
  init.max_recv_wr = tgt ? kMaxQpWr : std::max(cap.max_recv_wr, 1u);
  init.sq_sig_all = sq_sig_all != 0;
  init.pd = tgt ? 0 : pd->handle;  // the QP uses (and its peer reaches) only this PD's MRs
  init.ud = type == IBV_QPT_UD;
  if (tgt) init.xrcd = xrcd_of(xrcd)->id;
  // Receives from the SRQ: as many in hand as it can hold.
  if (srq) {
    init.srq = srq_of(srq)->id;
    init.max_recv_wr = srq_of(srq)->max_wr;
  }
  auto qpn = dev->driver->with_engine([&](engine::Engine& e) { return e.create_qp(init); });
  if (!qpn) {
    fail(to_errno(qpn.error()), "ibv_create_qp: %s", engine::to_string(qpn.error()));
    return nullptr;
  }
  auto* q = new Qp;
  q->ctx = ctx_of(c);
  q->cap = cap;
  q->cap.max_send_sge = q->cap.max_recv_sge = engine::kMaxSge;
  q->cap.max_inline_data = engine::kMaxInline;
  q->sq_sig_all = sq_sig_all != 0;
  ibv_qp& b = q->qpx.qp_base;
  b.context = c;
  b.qp_context = qp_context;
  b.pd = tgt ? nullptr : pd;
  if (b.pd) ++pd_of(pd)->users;
  if (tgt) {
    q->xrcd = xrcd_of(xrcd);
    ++q->xrcd->users;
  }
  b.send_cq = tgt ? nullptr : send_cq;
  b.recv_cq = tgt || type == IBV_QPT_XRC_SEND ? nullptr : recv_cq;
  b.srq = srq;
  b.handle = *qpn;
  b.qp_num = *qpn;
  b.state = IBV_QPS_RESET;
  b.qp_type = static_cast<ibv_qp_type>(type);
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  set_qp_ex_ops(q->qpx);
  std::lock_guard lock(dev->mu);
  dev->qps[*qpn] = q;
  return q;
}

}  // namespace

engine::QpState to_engine(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET:
      return engine::QpState::kReset;
    case IBV_QPS_INIT:
      return engine::QpState::kInit;
    case IBV_QPS_RTR:
      return engine::QpState::kRtr;
    case IBV_QPS_RTS:
      return engine::QpState::kRts;
    case IBV_QPS_SQD:
      return engine::QpState::kSqd;
    default:
      return engine::QpState::kError;
  }
}

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  Qp* q = make_qp(pd->context, pd, raw(a->qp_type), a->send_cq, a->recv_cq, a->srq, a->cap,
                  a->sq_sig_all, a->qp_context, 0);
  if (!q) return nullptr;
  a->cap = q->cap;  // verbs: the caps granted, at least those asked
  return &q->qpx.qp_base;
}

ibv_qp* create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* a) {
  const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
                         IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD;
  if (a->comp_mask & ~known) {
    fail(EOPNOTSUPP, "ibv_create_qp_ex: comp_mask 0x%x is not supported by mrc0",
         a->comp_mask & ~known);
    return nullptr;
  }
  // Create flags (scatter FCS, VLAN stripping, ...) are raw packet and NIC features: none.
  if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) {
    fail(EOPNOTSUPP, "ibv_create_qp_ex: create_flags 0x%x are not supported by mrc0",
         a->create_flags);
    return nullptr;
  }
  ibv_xrcd* xrcd = (a->comp_mask & IBV_QP_INIT_ATTR_XRCD) ? a->xrcd : nullptr;
  if (raw(a->qp_type) != IBV_QPT_XRC_RECV && (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd)) {
    fail(EINVAL, "ibv_create_qp_ex: a PD is needed (IBV_QP_INIT_ATTR_PD)");
    return nullptr;
  }
  ibv_pd* pd = (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : nullptr;
  const uint64_t ops = (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? a->send_ops_flags : 0;
  Qp* q = make_qp(c, pd, raw(a->qp_type), a->send_cq, a->recv_cq, a->srq, a->cap, a->sq_sig_all,
                  a->qp_context, ops, xrcd);
  if (!q) return nullptr;
  a->cap = q->cap;
  return &q->qpx.qp_base;
}

ibv_qp_ex* qp_to_qp_ex(ibv_qp* qp) { return &qp_of(qp)->qpx; }

// The ibv_qp_attr fields mrc0 takes (docs/verbs-shim.md says what each does).
constexpr int kQpAttrMask = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
                            IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MTU |
                            IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_DEST_QPN;

int modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  return modify_qp(qp, a, mask, EngineOverrides{}, "ibv_modify_qp");
}

namespace {

// The engine attributes an ibv_modify_qp call's own fields ask for (no peer, no effect): 0, or
// the errno after saying why.
int engine_attrs_of(const ibv_qp* qp, const Device* dev, const ibv_qp_attr* a, int mask,
                    const char* verb, engine::QpAttr& e, uint32_t& m) {
  const uint32_t qpn = qp->qp_num;
  if (mask & ~kQpAttrMask)
    return fail(EINVAL,
                "%s: QP %u: attribute mask 0x%x: mrc0 has no alternate path, path "
                "migration, Q_Key (UD QPs only), queue resizing, rate limit or SQD "
                "notification",
                verb, qpn, mask & ~kQpAttrMask);
  if (mask & IBV_QP_STATE) {
    if (raw(a->qp_state) == IBV_QPS_SQE || raw(a->qp_state) < IBV_QPS_RESET ||
        raw(a->qp_state) > IBV_QPS_ERR)
      return fail(EINVAL, "%s: QP %u: state %d is not supported", verb, qpn, raw(a->qp_state));
    e.state = to_engine(a->qp_state);
    m |= engine::attr::kState;
  }
  if (mask & IBV_QP_PATH_MTU) {
    if (raw(a->path_mtu) < IBV_MTU_256 || raw(a->path_mtu) > IBV_MTU_4096)
      return fail(EINVAL, "%s: QP %u: path_mtu %d", verb, qpn, raw(a->path_mtu));
    // IBV_MTU_4096, the largest verbs names, asks for the largest the device does: 8192 on
    // jumbo links (HostConfig::mtu, resolved at ibv_open_device). Smaller ones as asked.
    e.mtu = a->path_mtu == IBV_MTU_4096
                ? dev->cfg.mtu
                : std::min<uint32_t>(256u << (a->path_mtu - IBV_MTU_256), dev->cfg.mtu);
    m |= engine::attr::kMtu;
  }
  // The app's PSNs are kept for query_qp only: see "PSNs" in verbs.h.
  if (mask & IBV_QP_TIMEOUT) {
    // Verbs counts 4.096 us x 2^t, the engine (OCP) 1.024 us x 2^t; 0 is "none" in both.
    e.timeout = a->timeout == 0 ? 0 : std::min(a->timeout + 2, 31);
    m |= engine::attr::kTimeout;
  }
  if (mask & IBV_QP_RETRY_CNT) {
    e.retry_cnt_linear = std::min<uint8_t>(a->retry_cnt, 7);
    e.retry_cnt_exp = 0;  // verbs has linear retries only
    m |= engine::attr::kRetry;
  }
  if (mask & IBV_QP_RNR_RETRY) {
    e.rnr_retry = std::min<uint8_t>(a->rnr_retry, 7);
    m |= engine::attr::kRnrRetry;
  }
  if (mask & IBV_QP_MIN_RNR_TIMER) {
    // The wait this QP asks of its requesters when it has no receive (RNR NAK timer code).
    if (a->min_rnr_timer > 31)
      return fail(EINVAL, "%s: QP %u: min_rnr_timer %u: IB's RNR timer codes are 0..31", verb, qpn,
                  unsigned{a->min_rnr_timer});
    e.min_rnr_timer = a->min_rnr_timer;
    m |= engine::attr::kMinRnrTimer;
  }
  if (mask & IBV_QP_ACCESS_FLAGS) {
    // The remote operations this QP serves as responder, checked next to each MR's access.
    // A UC QP serves WRITEs only (verbs: UC has no READ or atomics).
    e.access =
        static_cast<uint32_t>(a->qp_access_flags) &
        (qp->qp_type == IBV_QPT_UC ? engine::access::kRemoteWrite
                                   : engine::access::kRemoteWrite | engine::access::kRemoteRead |
                                         engine::access::kRemoteAtomic);
    m |= engine::attr::kAccess;
  }
  return 0;
}

// INIT -> RTR: the peer (its host into *host), the tokens, and the connection policy every
// front end shares (UdpDriver::rtr_attr), added to e/m; 0, or the errno after saying why.
// Under dev->mu (the GID table and the peers).
int rtr_attrs_of(const ibv_qp* qp, Device* dev, const ibv_qp_attr* a, int mask, const char* verb,
                 engine::QpAttr& e, uint32_t& m, uint32_t* host) {
  const uint32_t qpn = qp->qp_num;
  if (!(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN))
    return fail(EINVAL, "%s: QP %u: RTR needs IBV_QP_AV and IBV_QP_DEST_QPN", verb, qpn);
  if (a->ah_attr.is_global)
    if (int e = check_sgid_index(dev, a->ah_attr.grh.sgid_index,
                                 std::string(verb) + ": QP " + std::to_string(qpn) + ": ah_attr"))
      return e;
  auto peer = peer_for(dev, a->ah_attr, host);
  if (!peer) return fail(EINVAL, "%s: QP %u: %s", verb, qpn, peer.error().c_str());
  const bool fabric = dev->cfg.udp.path_mode == io::PathMode::kSrv6 && dev->cfg.udp.fabric;
  const ibv_gid remote = token_gid(fabric ? dev->cfg.udp.fabric.get() : nullptr, a->ah_attr, *host);
  // The peer builds its side from the GID it was given for us: outside a fabric the entry
  // this QP's sgid_index picks (the one a program exchanges), in a fabric the canonical one.
  const ibv_gid local =
      !fabric && a->ah_attr.is_global ? dev->gids[a->ah_attr.grh.sgid_index].gid : dev->gid;
  const uint32_t remote_token = token(local, qpn, remote, a->dest_qp_num);
  engine::assign_attr(e, dev->driver->rtr_attr(*peer, *host, a->dest_qp_num, remote_token),
                      io::UdpDriver::kRtrMask);
  e.local_token = token(remote, a->dest_qp_num, local, qpn);
  if (a->ah_attr.is_global) {  // its DSCP on every datagram of the QP (the ECN bits are MRC's)
    e.traffic_class = a->ah_attr.grh.traffic_class;
    m |= engine::attr::kTrafficClass;
  }
  e.rq_psn = e.local_token >> 8;
  e.sq_psn = e.remote_token >> 8;
  m |= io::UdpDriver::kRtrMask | engine::attr::kLocalToken | engine::attr::kRqPsn |
       engine::attr::kSqPsn;
  // What the program leaves unset at RTR is the connection policy's (e's defaults, the
  // values every face uses), except one verbs rule: a responder that stays in RTR never
  // sets a timeout or retry count, yet its READ responses need both, and a verbs responder
  // never fails for its requester's silence, so it retries for as long as the QP lives.
  // A requester sets both at RTS (perftest: retry_cnt 7), its own choice.
  if (!(mask & IBV_QP_TIMEOUT)) m |= engine::attr::kTimeout;
  if (!(mask & IBV_QP_RETRY_CNT)) {
    e.retry_cnt_exp = engine::kRetryForever;
    m |= engine::attr::kRetry;
  }
  return 0;
}

// What a successful modify set, kept for query_qp.
void remember_attrs(ibv_qp_attr& s, const ibv_qp_attr* a, int mask) {
  if (mask & IBV_QP_STATE) s.qp_state = a->qp_state;
  if (mask & IBV_QP_PATH_MTU) s.path_mtu = a->path_mtu;
  if (mask & IBV_QP_SQ_PSN) s.sq_psn = a->sq_psn;
  if (mask & IBV_QP_RQ_PSN) s.rq_psn = a->rq_psn;
  if (mask & IBV_QP_DEST_QPN) s.dest_qp_num = a->dest_qp_num;
  if (mask & IBV_QP_AV) s.ah_attr = a->ah_attr;
  if (mask & IBV_QP_TIMEOUT) s.timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT) s.retry_cnt = a->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) s.rnr_retry = a->rnr_retry;
  if (mask & IBV_QP_ACCESS_FLAGS) s.qp_access_flags = a->qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) s.pkey_index = a->pkey_index;
  if (mask & IBV_QP_PORT) s.port_num = a->port_num;
  if (mask & IBV_QP_MIN_RNR_TIMER) s.min_rnr_timer = a->min_rnr_timer;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s.max_rd_atomic = a->max_rd_atomic;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = a->max_dest_rd_atomic;
}

}  // namespace

int modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask, const EngineOverrides& o, const char* verb) {
  if (qp->qp_type == IBV_QPT_UD && o.mask == 0) return modify_ud_qp(qp, a, mask);
  Qp* q = qp_of(qp);
  Device* dev = q->ctx->dev;
  const uint32_t qpn = qp->qp_num;
  // ---- Validate: the engine attributes of this call, checked with no effect.
  engine::QpAttr e;
  uint32_t m = 0;
  if (int err = engine_attrs_of(qp, dev, a, mask, verb, e, m)) return err;
  const bool to_rtr =
      (mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RTR && qp->state == IBV_QPS_INIT;
  std::unique_lock lock(dev->mu);
  uint32_t host = q->peer_host;
  if (to_rtr) {
    if (int err = rtr_attrs_of(qp, dev, a, mask, verb, e, m, &host)) return err;
  }
  engine::assign_attr(e, o.attr, o.mask);  // an OCP MRC QP's own (EV and CC profiles, MPR...)
  m |= o.mask;
  // ---- Check and apply in one engine call: the engine's QP is ready to send from RTR on
  // (see "PSNs"), so RTR is INIT -> RTR -> RTS there (connect_qp).
  auto r = dev->driver->with_engine([&](engine::Engine& en) -> Status<engine::ModifyRefusal> {
    if (to_rtr) return en.connect_qp(qpn, e, m);
    if (auto ok = en.check_modify_qp(qpn, e, m); !ok) return ok;
    (void)en.modify_qp(qpn, e, m);  // checked just above, under the same lock
    return {};
  });
  if (!r) {
    const engine::ModifyRefusal why = r.error();
    // A PSN range that cannot grow while packets are in flight: try again later.
    const bool busy = why.error == engine::Error::kBadState && (o.mask & engine::attr::kMpr) &&
                      std::strcmp(why.field, "max_psn_range") == 0;
    return fail(busy ? EBUSY : EINVAL, "%s: QP %u (%s -> %s): %s: %s", verb, qpn,
                engine::to_string(to_engine(qp->state)),
                (mask & IBV_QP_STATE) ? engine::to_string(e.state) : "same", why.field,
                engine::to_string(why.error));
  }
  // ---- Applied: the verbs side follows.
  if (to_rtr) q->peer_host = host;
  if (mask & IBV_QP_STATE) qp->state = a->qp_state;
  // A peer known by its GID alone: ask it for its other plane addresses, bound to this QP's
  // tokens (no-op for a peer from the table or the fabric, or one already learnt).
  if (to_rtr) (void)dev->driver->learn_addresses(e.peer, qpn);
  remember_attrs(q->attr, a, mask);
  return 0;
}

int query_qp(ibv_qp* qp, ibv_qp_attr* a, int, ibv_qp_init_attr* init) {
  Qp* q = qp_of(qp);
  auto st = driver_of(qp).peek_engine([&](engine::Engine& e) { return e.query_qp(qp->qp_num); });
  if (!st) return fail(EINVAL, "ibv_query_qp: QP %u: %s", qp->qp_num, engine::to_string(st.error()));
  *a = q->attr;
  a->qp_state = a->cur_qp_state = st->state == engine::QpState::kError ? IBV_QPS_ERR : qp->state;
  a->path_mtu = static_cast<ibv_mtu>(
      std::min(IBV_MTU_256 + __builtin_ctz(st->mtu / 256), static_cast<int>(IBV_MTU_4096)));
  a->cap = q->cap;
  if (init) {
    *init = ibv_qp_init_attr{};
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->cap = q->cap;
    init->srq = qp->srq;
    init->qp_type = qp->qp_type;
    init->sq_sig_all = q->sq_sig_all;
  }
  return 0;
}

int destroy_qp(ibv_qp* qp) {
  Qp* q = qp_of(qp);
  Device* dev = q->ctx->dev;
  auto r = dev->driver->with_engine([&](engine::Engine& e) { return e.destroy_qp(qp->qp_num); });
  if (!r) return fail(EINVAL, "ibv_destroy_qp: QP %u: %s", qp->qp_num, engine::to_string(r.error()));
  {
    std::lock_guard lock(dev->mu);
    dev->qps.erase(qp->qp_num);
  }
  mcast_forget_qp(dev, q->mcast);  // the engine detached it from its groups
  if (qp->pd) --pd_of(qp->pd)->users;
  if (q->xrcd) --q->xrcd->users;
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* q = qp_of(qp);
  if (!engine::takes_sends_in(to_engine(qp->state))) {
    if (bad) *bad = wr;
    log_post_error(q, "ibv_post_send", engine::Error::kBadState);
    return EINVAL;
  }
  int err = 0;
  McastFans fans;  // a multicast AH's members, found before the engine's lock
  if (qp->qp_type == IBV_QPT_UD)
    for (ibv_send_wr* w = wr; w; w = w->next) fans.prepare(q->ctx->dev, w->wr.ud.ah);
  driver_of(qp).with_engine_post(qp->qp_num, [&](engine::Engine& e) {
    Scratch<engine::Sge, engine::kMaxSge> sge_room;  // convert fills the WR's num_sge
    engine::Sge* const sges = sge_room.v;
    for (ibv_send_wr* w = wr; w; w = w->next) {
      if (raw(w->opcode) == IBV_WR_BIND_MW || raw(w->opcode) == IBV_WR_LOCAL_INV) {
        // A window bound or invalidated now, its completion in order (mw.cc).
        const bool sig = (w->send_flags & IBV_SEND_SIGNALED) != 0;
        if (raw(w->opcode) == IBV_WR_LOCAL_INV)
          err = invalidate_window(e, "ibv_post_send", qp, w->invalidate_rkey, w->wr_id, sig);
        else if (!w->bind_mw.mw || w->bind_mw.mw->type != IBV_MW_TYPE_2)
          err = fail(EINVAL, "ibv_post_send: BIND_MW takes a type 2 window (type 1: ibv_bind_mw)");
        else
          err = bind_window(e, "ibv_post_send", qp, w->bind_mw.mw, w->bind_mw.rkey,
                            w->bind_mw.bind_info, w->wr_id, sig);
        if (err) {
          if (bad) *bad = w;
          break;
        }
        continue;
      }
      engine::SendWr ew;
      err = convert(*w, ew, sges, q->cap.max_send_sge);
      if (!err && qp->qp_type == IBV_QPT_UC && ew.opcode == engine::Opcode::kRead) {
        log_error("ibv_post_send: QP %u is UC, which has no RDMA READ", qp->qp_num);
        err = EINVAL;
      }
      if (!err && qp->qp_type == IBV_QPT_XRC_SEND) {  // the WR names the peer's XRC SRQ
        ew.xrc_srqn = w->qp_type.xrc.remote_srqn;
        err = check_xrc_srqn("ibv_post_send", ew.xrc_srqn);
      }
      engine::UdDest ud;
      if (!err && qp->qp_type == IBV_QPT_UD) {  // the WR names its destination
        uint64_t len = 0;
        for (int i = 0; i < w->num_sge; ++i) len += w->sg_list[i].length;
        err = ud_dest("ibv_post_send", qp, w->wr.ud.ah, w->wr.ud.remote_qpn, w->wr.ud.remote_qkey,
                      static_cast<uint32_t>(len), &ud);
        ew.ud = &ud;
        if (!err) ew.ud_fan = fans.fan(w->wr.ud.ah, ud);
      }
      if (!err) {
        if (auto r = e.post_send(qp->qp_num, ew); !r) {
          log_post_error(q, "ibv_post_send", r.error());
          err = to_errno(r.error());
        }
      }
      if (err) {
        if (bad) *bad = w;
        break;
      }
    }
    return 0;
  });
  return err;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp* q = qp_of(qp);
  if (qp->qp_type == IBV_QPT_XRC_SEND || qp->qp_type == IBV_QPT_XRC_RECV) {
    if (bad) *bad = wr;
    return fail(EINVAL, "ibv_post_recv: QP %u is XRC: its receives come from XRC SRQs", qp->qp_num);
  }
  return post_recv_chain(
      driver_of(qp), wr, bad, q->cap.max_recv_sge,
      [&](ibv_recv_wr* w) {
        log_error("ibv_post_recv: %d SGEs, the QP takes at most %u", w->num_sge,
                  q->cap.max_recv_sge);
        return EINVAL;  // as rdma-core's providers (mlx5, rxe) and post_srq_recv say it
      },
      [&](engine::Engine& e, const engine::RecvWr& ew) {
        auto r = e.post_recv(qp->qp_num, ew);
        if (r) return 0;
        log_post_error(q, "ibv_post_recv", r.error());
        return to_errno(r.error());
      });
}

}  // namespace mrc::verbs
