// Tag matching on the software verbs device: tag-matching SRQs (ibv_create_srq_ex with
// IBV_SRQT_TM), ibv_post_srq_ops and the device's tm_caps. The matching itself is the
// engine's, where a SEND's first packet lands (engine.h create_tm_srq); docs/verbs-shim.md
// "Tag matching". Threading: as verbs.h (the engine through the driver).
#include <cerrno>

#include "common/c_enum.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"
#include "verbs/objects.h"

namespace mrc::verbs {

ibv_tm_caps tm_caps() {
  ibv_tm_caps t{};
  t.max_rndv_hdr_size = kTmMaxRndvHdr;
  t.max_num_tags = kTmMaxTags;
  t.flags = IBV_TM_CAP_RC;
  t.max_ops = kTmMaxOps;
  t.max_sge = engine::kMaxSge;
  return t;
}

ibv_srq* create_tm_srq(ibv_context* c, ibv_srq_init_attr_ex* a) {
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq || a->cq->context != c) {
    fail(EINVAL,
         "ibv_create_srq_ex: a tag-matching SRQ needs a CQ of this context "
         "(IBV_SRQ_INIT_ATTR_CQ)");
    return nullptr;
  }
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_TM) || a->tm_cap.max_num_tags == 0 ||
      a->tm_cap.max_num_tags > kTmMaxTags || a->tm_cap.max_ops == 0 ||
      a->tm_cap.max_ops > kTmMaxOps) {
    fail(EINVAL,
         "ibv_create_srq_ex: a tag-matching SRQ needs IBV_SRQ_INIT_ATTR_TM with "
         "tm_cap.max_num_tags 1..%u and max_ops 1..%u",
         kTmMaxTags, kTmMaxOps);
    return nullptr;
  }
  TmSrqInit tm;
  tm.cq = cq_of(a->cq)->id;
  tm.max_tags = a->tm_cap.max_num_tags;
  return make_srq(a->pd, reinterpret_cast<ibv_srq_init_attr*>(a), {}, nullptr, &tm);
}

int post_srq_ops(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad) {
  Srq* s = srq_of(srq);
  auto refuse = [&](ibv_ops_wr* w, int err) {
    if (bad) *bad = w;
    return err;
  };
  if (!s->tm) {
    log_error("ibv_post_srq_ops: the SRQ is not a tag-matching one (IBV_SRQT_TM)");
    return refuse(wr, EINVAL);
  }
  int err = 0;
  s->ctx->dev->driver->with_engine([&](engine::Engine& e) {
    engine::Sge sges[engine::kMaxSge];
    for (ibv_ops_wr* w = wr; w; w = w->next) {
      const int op = raw(w->opcode);
      if (w->flags & ~(IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC)) {
        log_error("ibv_post_srq_ops: flags 0x%x (IBV_OPS_SIGNALED, IBV_OPS_TM_SYNC are known)",
                  w->flags);
        err = refuse(w, EINVAL);
        return 0;
      }
      engine::SrqOp o;
      o.wr_id = w->wr_id;
      o.signaled = w->flags & IBV_OPS_SIGNALED;
      o.sync = w->flags & IBV_OPS_TM_SYNC;
      o.unexpected_cnt = w->tm.unexpected_cnt;
      if (op == IBV_WR_TAG_ADD) {
        const int n = w->tm.add.num_sge;
        if (n < 0 || static_cast<uint32_t>(n) > engine::kMaxSge || (n > 0 && !w->tm.add.sg_list)) {
          log_error("ibv_post_srq_ops: TAG_ADD with %d SGEs (0..%u, sg_list set)", n,
                    engine::kMaxSge);
          err = refuse(w, EINVAL);
          return 0;
        }
        for (int i = 0; i < n; ++i)
          sges[i] = engine::Sge{w->tm.add.sg_list[i].addr, w->tm.add.sg_list[i].length,
                                w->tm.add.sg_list[i].lkey};
        o.kind = engine::SrqOp::kAdd;
        o.recv_wr_id = w->tm.add.recv_wr_id;
        o.tag = w->tm.add.tag;
        o.mask = w->tm.add.mask;
        o.sg = std::span<const engine::Sge>(sges, static_cast<size_t>(n));
      } else if (op == IBV_WR_TAG_DEL) {
        o.kind = engine::SrqOp::kDel;
        o.handle = w->tm.handle;
      } else if (op == IBV_WR_TAG_SYNC) {
        o.kind = engine::SrqOp::kSync;
      } else {
        log_error("ibv_post_srq_ops: opcode %d (TAG_ADD, TAG_DEL, TAG_SYNC are known)", op);
        err = refuse(w, EINVAL);
        return 0;
      }
      auto r = e.post_srq_op(s->id, o);
      if (!r) {
        log_error("ibv_post_srq_ops: %s%s", engine::to_string(r.error()),
                  r.error() == engine::Error::kQueueFull ? " (max_num_tags tags posted)" : "");
        err = refuse(w, to_errno(r.error()));
        return 0;
      }
      if (op == IBV_WR_TAG_ADD) w->tm.handle = *r;
    }
    return 0;
  });
  return err;
}

}  // namespace mrc::verbs
