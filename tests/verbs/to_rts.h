// The in-process verbs tests' connection step: a QP to RTS towards another QP of the same
// device. Threading: test thread.
#pragma once

#include "mrc/verbs/verbs.h"

namespace mrc::verbs::testing {

/// RESET -> INIT -> RTR -> RTS towards QP `dest` on this device (GID 0), MTU 1024 (a few KiB
/// take several packets), remote WRITE and READ granted, 16 READs each way. 0 or the errno of
/// the step that failed.
inline int to_rts(ibv_context* ctx, ibv_qp* q, uint32_t dest) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int r =
          modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return r;
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.max_dest_rd_atomic = 16;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  if (int r = query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid)) return r;
  if (int r = modify_qp(q, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return r;
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  return modify_qp(q, &a,
                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/// A UD QP's RESET -> INIT (pkey 0, port 1, Q_Key `qkey`) -> RTR -> RTS: pyverbs' and
/// perftest's steps. 0 or the errno of the step that failed.
inline int ud_to_rts(ibv_qp* q, uint32_t qkey) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  if (int r = modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return r;
  a.qp_state = IBV_QPS_RTR;
  if (int r = modify_qp(q, &a, IBV_QP_STATE)) return r;
  a.qp_state = IBV_QPS_RTS;
  return modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

}  // namespace mrc::verbs::testing
