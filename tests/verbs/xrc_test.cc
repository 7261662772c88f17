// XRC of the software verbs device (libmrc/src/verbs/xrc.cc, qp.cc), in one process over two
// loopback planes: XRC domains shared through a file, XRC SRQs, XRC_SEND -> XRC_RECV traffic
// with ibv_post_send and ibv_wr_set_xrc_srqn, and the bad flows.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "loopback_env.h"
#include "mrc/verbs/verbs.h"
#include "open_device.h"
#include "to_rts.h"
#include "wait_wc.h"

namespace mrc::verbs {
namespace {

const bool env_set = testing::set_loopback_env();

using testing::wait_wc;

using testing::to_rts;

// Two handles on one file's domain: an XRC SRQ made through the first serves a target QP
// made through the second. The initiator's SENDs (ibv_post_send, then ibv_wr_*) land in the
// SRQ's receives and complete on its CQ with the target's QP number; the bad flows of
// open_xrcd, close_xrcd, create_srq_ex, post_send and post_recv say what is wrong.
TEST(Xrc, OpenXrcd_SharedFileSrqTargetTraffic) {
  ASSERT_TRUE(env_set);
  ibv_context* ctx = testing::open_the_device();
  ASSERT_NE(ctx, nullptr);
  ibv_device_attr da{};
  ASSERT_EQ(query_device(ctx, &da), 0);
  EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_XRC);
  char path[] = "/tmp/mrc-xrc-test.XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);

  ibv_xrcd_init_attr xa{IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, fd, 0};
  EXPECT_EQ(open_xrcd(ctx, &xa), nullptr);  // no domain on the file yet, no O_CREAT
  EXPECT_EQ(errno, EINVAL);
  xa.oflags = O_CREAT;
  ibv_xrcd* x1 = open_xrcd(ctx, &xa);
  ASSERT_NE(x1, nullptr);
  xa.oflags = O_CREAT | O_EXCL;
  EXPECT_EQ(open_xrcd(ctx, &xa), nullptr);  // it exists now
  xa.oflags = 0;
  ibv_xrcd* x2 = open_xrcd(ctx, &xa);
  ASSERT_NE(x2, nullptr);
  ibv_xrcd_init_attr anon{IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, -1, 0};
  EXPECT_EQ(open_xrcd(ctx, &anon), nullptr);  // a domain of its own needs O_CREAT
  anon.oflags = O_CREAT;
  ibv_xrcd* other = open_xrcd(ctx, &anon);
  ASSERT_NE(other, nullptr);

  ibv_pd* pd = alloc_pd(ctx);
  std::vector<uint8_t> buf(1 << 16, 0);
  ibv_mr* mr = reg_mr(pd, buf.data(), buf.size(), reinterpret_cast<uintptr_t>(buf.data()),
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_cq* scq = create_cq(ctx, 64, nullptr, nullptr, 0);
  ibv_cq* rcq = create_cq(ctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(scq, nullptr);
  ASSERT_NE(rcq, nullptr);

  ibv_srq_init_attr_ex sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD;
  sa.srq_type = IBV_SRQT_XRC;
  sa.pd = pd;
  sa.xrcd = x1;
  EXPECT_EQ(create_srq_ex(ctx, &sa), nullptr);  // no CQ
  EXPECT_EQ(errno, EINVAL);
  sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
  sa.cq = rcq;
  ibv_srq* srq = create_srq_ex(ctx, &sa);
  ASSERT_NE(srq, nullptr);
  uint32_t srqn = 0;
  ASSERT_EQ(get_srq_num(srq, &srqn), 0);
  EXPECT_NE(srqn, 0u);
  sa.xrcd = other;  // another domain's SRQ: the target refuses messages naming it
  ibv_srq* foreign = create_srq_ex(ctx, &sa);
  ASSERT_NE(foreign, nullptr);
  ibv_srq_init_attr_ex tm = sa;
  tm.comp_mask |= IBV_SRQ_INIT_ATTR_TM;
  tm.srq_type = IBV_SRQT_TM;
  EXPECT_EQ(create_srq_ex(ctx, &tm), nullptr);  // tag matching (tm.cc) needs tm_cap
  EXPECT_EQ(errno, EINVAL);

  ibv_qp_init_attr_ex ta{};
  ta.qp_type = IBV_QPT_XRC_RECV;
  ta.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  ta.xrcd = x2;
  ibv_qp* tgt = create_qp_ex(ctx, &ta);
  ASSERT_NE(tgt, nullptr);
  EXPECT_EQ(close_xrcd(x2), EBUSY);  // the target uses it
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_XRC_SEND;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.pd = pd;
  ia.send_cq = scq;
  ia.cap.max_send_wr = 16;
  ia.cap.max_send_sge = 1;
  ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  ibv_qp* ini = create_qp_ex(ctx, &ia);
  ASSERT_NE(ini, nullptr);
  ASSERT_EQ(to_rts(ctx, tgt, ini->qp_num), 0);
  ASSERT_EQ(to_rts(ctx, ini, tgt->qp_num), 0);

  for (uint64_t i = 0; i < 2; ++i) {
    ibv_sge rs{reinterpret_cast<uintptr_t>(buf.data()) + 4096 * (i + 1), 1024, mr->lkey};
    ibv_recv_wr rw{};
    rw.wr_id = 100 + i;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(post_srq_recv(srq, &rw, &bad), 0);
  }
  ibv_recv_wr own{};
  ibv_recv_wr* bad_recv = nullptr;
  EXPECT_EQ(post_recv(tgt, &own, &bad_recv), EINVAL);
  EXPECT_EQ(post_recv(ini, &own, &bad_recv), EINVAL);

  std::memcpy(buf.data(), "xrc-one", 8);
  ibv_sge ss{reinterpret_cast<uintptr_t>(buf.data()), 8, mr->lkey};
  ibv_send_wr sw{};
  sw.wr_id = 1;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(post_send(ini, &sw, &bad), EINVAL);  // no remote SRQ named
  sw.qp_type.xrc.remote_srqn = srqn;
  ASSERT_EQ(post_send(ini, &sw, &bad), 0);
  ibv_wc wc = wait_wc(scq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  wc = wait_wc(rcq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 100u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 8u);
  EXPECT_EQ(wc.qp_num, tgt->qp_num);
  EXPECT_STREQ(reinterpret_cast<char*>(buf.data() + 4096), "xrc-one");

  std::memcpy(buf.data(), "xrc-two", 8);
  ibv_qp_ex* qx = qp_to_qp_ex(ini);
  qx->wr_start(qx);
  qx->wr_id = 2;
  qx->wr_flags = IBV_SEND_SIGNALED;
  qx->wr_send(qx);
  qx->wr_set_sge(qx, mr->lkey, reinterpret_cast<uintptr_t>(buf.data()), 8);
  qx->wr_set_xrc_srqn(qx, srqn);
  ASSERT_EQ(qx->wr_complete(qx), 0);
  EXPECT_EQ(wait_wc(scq).status, IBV_WC_SUCCESS);
  wc = wait_wc(rcq);
  EXPECT_EQ(wc.wr_id, 101u);
  EXPECT_STREQ(reinterpret_cast<char*>(buf.data() + 8192), "xrc-two");

  uint32_t foreign_n = 0;
  ASSERT_EQ(get_srq_num(foreign, &foreign_n), 0);
  sw.qp_type.xrc.remote_srqn = foreign_n;
  ASSERT_EQ(post_send(ini, &sw, &bad), 0);
  EXPECT_EQ(wait_wc(scq).status, IBV_WC_REM_INV_REQ_ERR);

  EXPECT_EQ(destroy_qp(ini), 0);
  EXPECT_EQ(destroy_qp(tgt), 0);
  EXPECT_EQ(destroy_srq(foreign), 0);
  EXPECT_EQ(destroy_srq(srq), 0);
  EXPECT_EQ(close_xrcd(x2), 0);
  EXPECT_EQ(close_xrcd(x1), 0);
  EXPECT_EQ(close_xrcd(other), 0);
  EXPECT_EQ(destroy_cq(scq), 0);
  EXPECT_EQ(destroy_cq(rcq), 0);
  EXPECT_EQ(dereg_mr(mr), 0);
  EXPECT_EQ(dealloc_pd(pd), 0);
  ::close(fd);
  EXPECT_EQ(close_device(ctx), 0);
}

}  // namespace
}  // namespace mrc::verbs
