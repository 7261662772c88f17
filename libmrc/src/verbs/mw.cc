// Memory windows of the software verbs device: ibv_alloc_mw / ibv_dealloc_mw (type 1 and 2),
// ibv_bind_mw (type 1), and the send queue's BIND_MW and LOCAL_INV work requests (type 2;
// post_send and ibv_wr_bind_mw / ibv_wr_local_inv). The engine keeps the windows (engine/mw.cc)
// and checks their keys at the responder as it checks an MR's.
#include <cerrno>

#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
    fail(EINVAL, "ibv_alloc_mw: type %d (mrc0 has memory windows of type 1 and 2)",
         static_cast<int>(type));
    return nullptr;
  }
  Device* dev = device_of(pd->context);
  auto key = dev->driver->with_engine([&](engine::Engine& e) { return e.alloc_mw(pd->handle); });
  if (!key) {
    fail(to_errno(key.error()), "ibv_alloc_mw: %s", engine::to_string(key.error()));
    return nullptr;
  }
  auto* mw = new ibv_mw{};
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = *key;
  mw->handle = *key;
  mw->type = type;
  ++pd_of(pd)->users;
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  Device* dev = device_of(mw->context);
  auto r = dev->driver->with_engine([&](engine::Engine& e) { return e.deregister_mr(mw->rkey); });
  if (!r) return fail(EINVAL, "ibv_dealloc_mw: %s", engine::to_string(r.error()));
  --pd_of(mw->pd)->users;
  delete mw;
  return 0;
}

int bind_window(engine::Engine& e, const char* verb, ibv_qp* qp, ibv_mw* mw, uint32_t new_rkey,
                const ibv_mw_bind_info& b, uint64_t wr_id, bool signaled) {
  if (qp->qp_type != IBV_QPT_RC && qp->qp_type != IBV_QPT_UC)
    return fail(EINVAL, "%s: QP %u: memory windows are bound from RC and UC QPs", verb, qp->qp_num);
  if (!mw || mw->pd != qp->pd)
    return fail(EINVAL, "%s: QP %u: the window is not of the QP's PD", verb, qp->qp_num);
  if (b.length && (!b.mr || b.mr->pd != qp->pd))
    return fail(EINVAL, "%s: QP %u: the MR is not of the QP's PD", verb, qp->qp_num);
  if (b.length && !(mr_of(b.mr)->access & IBV_ACCESS_MW_BIND))
    return fail(EACCES, "%s: the MR was registered without IBV_ACCESS_MW_BIND", verb);
  const unsigned remote =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (b.mw_access_flags & ~(remote | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED))
    return fail(EINVAL, "%s: mw_access_flags 0x%x", verb, b.mw_access_flags);
  if (b.mw_access_flags & IBV_ACCESS_ZERO_BASED)
    return fail(EINVAL, "%s: zero-based windows are not supported by mrc0", verb);
  auto r = e.bind_mw(mw->rkey, new_rkey, b.length ? b.mr->lkey : 0, b.addr, b.length,
                     b.mw_access_flags & remote, qp->pd->handle);
  if (!r)
    return fail(to_errno(r.error()), "%s: window 0x%x: %s", verb, mw->rkey,
                engine::to_string(r.error()));
  mw->rkey = new_rkey;
  if (auto c = e.post_local(qp->qp_num, wr_id, engine::WcOpcode::kBindMw, signaled); !c)
    return fail(to_errno(c.error()), "%s: QP %u: %s", verb, qp->qp_num,
                engine::to_string(c.error()));
  return 0;
}

int invalidate_window(engine::Engine& e, const char* verb, ibv_qp* qp, uint32_t rkey,
                      uint64_t wr_id, bool signaled) {
  if (auto r = e.invalidate_mw(rkey, qp->pd->handle); !r)
    return fail(EINVAL, "%s: QP %u: 0x%x is no memory window of the QP's PD", verb, qp->qp_num,
                rkey);
  if (auto c = e.post_local(qp->qp_num, wr_id, engine::WcOpcode::kLocalInv, signaled); !c)
    return fail(to_errno(c.error()), "%s: QP %u: %s", verb, qp->qp_num,
                engine::to_string(c.error()));
  return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  if (qp->state != IBV_QPS_RTS) return fail(EINVAL, "ibv_bind_mw: QP %u is not in RTS", qp->qp_num);
  const uint32_t new_rkey = ibv_inc_rkey(mw->rkey);  // type 1: the device picks the next key
  int err = 0;
  qp_driver(qp).with_engine_flush([&](engine::Engine& e) {
    err = bind_window(e, "ibv_bind_mw", qp, mw, new_rkey, bind->bind_info, bind->wr_id,
                      (bind->send_flags & IBV_SEND_SIGNALED) != 0);
    return 0;
  });
  return err;
}

}  // namespace mrc::verbs
