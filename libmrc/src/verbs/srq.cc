// Shared receive queues of the software verbs device: create, modify (the limit), query,
// destroy, post_srq_recv; RC and UC QPs attached to one take their receives from it
// (engine: Engine::create_srq, QpInit::srq). Threading: as verbs.h.
#include <cerrno>

#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* a) { return make_srq(pd, a, {}, nullptr); }

ibv_srq* make_srq(ibv_pd* pd, ibv_srq_init_attr* a, const engine::XrcSrqInit& xrc, Xrcd* xrcd,
                  const TmSrqInit* tm) {
  if (!a || a->attr.max_wr == 0 || a->attr.max_wr > kMaxQpWr || a->attr.max_sge == 0 ||
      a->attr.max_sge > engine::kMaxSge) {
    fail(EINVAL, "ibv_create_srq: max_wr 1..%u and max_sge 1..%u", kMaxQpWr, engine::kMaxSge);
    return nullptr;
  }
  Device* dev = device_of(pd->context);
  auto id = dev->driver->with_engine([&](engine::Engine& e) {
    return tm ? e.create_tm_srq(a->attr.max_wr, tm->cq, tm->max_tags)
              : e.create_srq(a->attr.max_wr, xrc);
  });
  if (!id) {
    fail(to_errno(id.error()), "ibv_create_srq: %s", engine::to_string(id.error()));
    return nullptr;
  }
  auto* s = new Srq;
  s->ctx = ctx_of(pd->context);
  s->id = *id;
  s->max_wr = a->attr.max_wr;
  s->max_sge = a->attr.max_sge;
  s->xrcd = xrcd;
  s->tm = tm != nullptr;
  if (xrcd) ++xrcd->users;
  ibv_srq& b = s->srq;
  b.context = pd->context;
  b.srq_context = a->srq_context;
  b.pd = pd;
  b.handle = *id;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  ++pd_of(pd)->users;
  a->attr.srq_limit = 0;  // verbs: ignored at creation, armed by modify_srq
  std::lock_guard lock(dev->mu);
  dev->srqs[*id] = s;
  return &b;
}

int modify_srq(ibv_srq* srq, ibv_srq_attr* a, int mask) {
  Srq* s = srq_of(srq);
  if (mask & ~IBV_SRQ_LIMIT)
    return fail(EINVAL, "ibv_modify_srq: mask 0x%x: mrc0 sets IBV_SRQ_LIMIT only (no resizing)",
                mask);
  if (!(mask & IBV_SRQ_LIMIT)) return 0;
  if (a->srq_limit > s->max_wr)
    return fail(EINVAL, "ibv_modify_srq: srq_limit %u above max_wr %u", a->srq_limit, s->max_wr);
  auto r = s->ctx->dev->driver->with_engine(
      [&](engine::Engine& e) { return e.arm_srq_limit(s->id, a->srq_limit); });
  if (!r) return fail(to_errno(r.error()), "ibv_modify_srq: %s", engine::to_string(r.error()));
  return 0;
}

int query_srq(ibv_srq* srq, ibv_srq_attr* a) {
  Srq* s = srq_of(srq);
  a->max_wr = s->max_wr;
  a->max_sge = s->max_sge;
  a->srq_limit =
      s->ctx->dev->driver->with_engine([&](engine::Engine& e) { return e.srq_limit(s->id); });
  return 0;
}

int destroy_srq(ibv_srq* srq) {
  Srq* s = srq_of(srq);
  Device* dev = s->ctx->dev;
  auto r = dev->driver->with_engine([&](engine::Engine& e) { return e.destroy_srq(s->id); });
  if (!r && r.error() == engine::Error::kBadState)
    return fail(EBUSY, "ibv_destroy_srq: QPs still use it");
  if (!r) return fail(to_errno(r.error()), "ibv_destroy_srq: %s", engine::to_string(r.error()));
  {
    std::lock_guard lock(dev->mu);
    dev->srqs.erase(s->id);
  }
  --pd_of(srq->pd)->users;
  if (s->xrcd) --s->xrcd->users;
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Srq* s = srq_of(srq);
  return post_recv_chain(
      *s->ctx->dev->driver, wr, bad, s->max_sge,
      [&](ibv_recv_wr* w) {
        log_error("ibv_post_srq_recv: %d SGEs, the SRQ takes at most %u", w->num_sge, s->max_sge);
        return EINVAL;
      },
      [&](engine::Engine& e, const engine::RecvWr& ew) {
        auto r = e.post_srq_recv(s->id, ew);
        if (r) return 0;
        log_error("ibv_post_srq_recv: %s", engine::to_string(r.error()));
        return to_errno(r.error());
      });
}

}  // namespace mrc::verbs
