// libFuzzer target: the verbs shim's handshake surface. The shim has no handshake of its
// own: perftest and ibv_rc_pingpong exchange each side's LID, QPN, PSN, GID (and for RDMA
// the rkey and buffer address) over their own TCP connection, and hand what the peer sent
// to mrc0 unchecked, in ibv_modify_qp's RTR/RTS attributes and in their work requests. So
// each input is one such peer record, with the attribute masks and values a program might
// build from it, applied to a fresh QP of the software verbs device (loopback planes):
// every call must succeed or return an errno, never crash or hang; a WRITE and a READ with
// the record's rkey and address are posted when the QP reaches RTS; the QP is destroyed
// with whatever is still in flight.
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "input.h"
#include "mrc/verbs/verbs.h"
#include "verbs/loopback_env.h"

namespace {

using namespace mrc::verbs;

struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<uint8_t> mem = std::vector<uint8_t>(64 << 10);
  ibv_mr* mr = nullptr;
};

Device& device() {
  static Device d = [] {
    Device x;
    testing::set_loopback_env();
    int n = 0;
    ibv_device** list = get_device_list(&n);
    if (n != 1) std::abort();
    x.ctx = open_device(list[0]);
    free_device_list(list);
    if (!x.ctx) std::abort();
    x.pd = alloc_pd(x.ctx);
    x.cq = create_cq(x.ctx, 1024, nullptr, nullptr, 0);
    x.mr = reg_mr(x.pd, x.mem.data(), x.mem.size(), reinterpret_cast<uintptr_t>(x.mem.data()),
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!x.pd || !x.cq || !x.mr) std::abort();
    return x;
  }();
  return d;
}

void drain(ibv_cq* cq) {
  ibv_wc wc[64];
  while (poll_cq(cq, 64, wc) > 0) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Device& d = device();
  mrc::fuzz::Input in(data, size);

  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = d.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = create_qp(d.pd, &ia);
  if (!qp) std::abort();  // nothing fuzzed yet: this must work

  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.port_num = in.take<uint8_t>() & 1 ? 1 : in.take<uint8_t>();
  init.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  (void)modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);

  // The peer's record, as the program received it.
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.ah_attr.dlid = in.take<uint16_t>();
  rtr.dest_qp_num = in.take<uint32_t>();
  rtr.rq_psn = in.take<uint32_t>();
  const uint32_t rkey = in.take<uint32_t>();
  const uint64_t vaddr = in.take<uint64_t>();
  auto gid = in.bytes(16);
  std::memcpy(rtr.ah_attr.grh.dgid.raw, gid.data(), gid.size());
  const uint8_t flags = in.take<uint8_t>();
  rtr.ah_attr.is_global = flags & 1;
  rtr.ah_attr.grh.sgid_index = in.take<uint8_t>();
  rtr.ah_attr.grh.hop_limit = in.take<uint8_t>();
  rtr.ah_attr.port_num = in.take<uint8_t>();
  rtr.ah_attr.sl = in.take<uint8_t>();
  rtr.path_mtu = static_cast<ibv_mtu>(in.take<uint8_t>());
  rtr.max_dest_rd_atomic = in.take<uint8_t>();
  rtr.min_rnr_timer = in.take<uint8_t>();
  int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU |
                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (flags & 2) rtr_mask &= ~static_cast<int>(in.take<uint8_t>()) << 1;  // a sloppy program
  const bool at_rtr = modify_qp(qp, &rtr, rtr_mask) == 0;

  if (at_rtr) {
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    rts.sq_psn = in.take<uint32_t>();
    rts.timeout = in.take<uint8_t>();
    rts.retry_cnt = in.take<uint8_t>();
    rts.rnr_retry = in.take<uint8_t>();
    rts.max_rd_atomic = in.take<uint8_t>();
    const bool at_rts = modify_qp(qp, &rts,
                                  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
    if (at_rts) {
      const uint32_t len = in.take<uint16_t>() % (16 << 10);
      ibv_sge sge{reinterpret_cast<uintptr_t>(d.mem.data()), len, d.mr->lkey};
      ibv_send_wr wr[2]{};
      for (int i = 0; i < 2; ++i) {
        wr[i].wr_id = static_cast<uint64_t>(i);
        wr[i].sg_list = &sge;
        wr[i].num_sge = 1;
        wr[i].opcode = i == 0 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        wr[i].send_flags = IBV_SEND_SIGNALED;
        wr[i].wr.rdma.remote_addr = vaddr;
        wr[i].wr.rdma.rkey = rkey;
      }
      wr[0].next = &wr[1];
      ibv_send_wr* bad = nullptr;
      (void)post_send(qp, wr, &bad);
    }
  }
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  (void)query_qp(qp, &q, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN, &qi);
  if (destroy_qp(qp) != 0) std::abort();
  drain(d.cq);
  return 0;
}
