// UD QPs and address handles of the software verbs device (libmrc/src/verbs/ud.cc), in one
// process over two loopback planes: ibv_create_ah, UD send/receive with the GRH in the receive
// buffer, the answer through ibv_create_ah_from_wc, ibv_wr_set_ud_addr, Q_Key checks and the
// UD modify_qp transitions.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "loopback_env.h"
#include "mrc/verbs/verbs.h"
#include "open_device.h"
#include "to_rts.h"
#include "wait_wc.h"

namespace mrc::verbs {
namespace {

using namespace std::chrono_literals;

const bool env_set = testing::set_loopback_env();
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kGrh = 40;

using testing::wait_wc;

class Ud : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_set);
    ctx_ = testing::open_the_device();
    ASSERT_NE(ctx_, nullptr);
    pd_ = alloc_pd(ctx_);
    for (int i = 0; i < 2; ++i) {
      buf_[i].assign(1 << 16, 0);
      mr_[i] = reg_mr(pd_, buf_[i].data(), buf_[i].size(),
                      reinterpret_cast<uintptr_t>(buf_[i].data()), IBV_ACCESS_LOCAL_WRITE);
      ASSERT_NE(mr_[i], nullptr);
      cq_[i] = create_cq(ctx_, 64, nullptr, nullptr, 0);
      ASSERT_NE(cq_[i], nullptr);
      qp_[i] = make_ud_qp(i);
      ASSERT_NE(qp_[i], nullptr);
      ASSERT_EQ(to_rts(qp_[i]), 0);
    }
    ibv_ah_attr a{};
    a.is_global = 1;
    a.port_num = 1;
    ASSERT_EQ(query_gid(ctx_, 1, 0, &a.grh.dgid), 0);
    a.grh.hop_limit = 64;
    ah_ = create_ah(pd_, &a);
    ASSERT_NE(ah_, nullptr);
  }
  void TearDown() override {
    if (ah_) {
      EXPECT_EQ(destroy_ah(ah_), 0);
    }
    for (int i = 0; i < 2; ++i) {
      if (qp_[i]) {
        EXPECT_EQ(destroy_qp(qp_[i]), 0);
      }
      if (cq_[i]) {
        EXPECT_EQ(destroy_cq(cq_[i]), 0);
      }
      if (mr_[i]) {
        EXPECT_EQ(dereg_mr(mr_[i]), 0);
      }
    }
    if (pd_) {
      EXPECT_EQ(dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(close_device(ctx_), 0);
    }
  }

  ibv_qp* make_ud_qp(int side) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_[side];
    a.qp_type = IBV_QPT_UD;
    a.cap.max_send_wr = a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    return create_qp(pd_, &a);
  }
  static int to_rts(ibv_qp* q) { return testing::ud_to_rts(q, kQkey); }
  int post_recv_at(int side, uint64_t wr_id, uint32_t off, uint32_t len) {
    ibv_sge s{reinterpret_cast<uintptr_t>(buf_[side].data()) + off, len, mr_[side]->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return post_recv(qp_[side], &wr, &bad);
  }
  int send_from(int side, ibv_ah* ah, uint32_t dest_qpn, uint32_t qkey, uint32_t off, uint32_t len,
                uint64_t wr_id = 1) {
    ibv_sge s{reinterpret_cast<uintptr_t>(buf_[side].data()) + off, len, mr_[side]->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = dest_qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return post_send(qp_[side], &wr, &bad);
  }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::vector<uint8_t> buf_[2];
  ibv_mr* mr_[2] = {};
  ibv_cq* cq_[2] = {};
  ibv_qp* qp_[2] = {};
  ibv_ah* ah_ = nullptr;
};

TEST_F(Ud, CreateAh_NeedsGrhAndAGidOfTheTable) {
  ibv_ah_attr a{};
  a.port_num = 1;
  errno = 0;
  EXPECT_EQ(create_ah(pd_, &a), nullptr);  // no GRH: the port is RoCE
  EXPECT_EQ(errno, EINVAL);
  a.is_global = 1;
  ASSERT_EQ(query_gid(ctx_, 1, 0, &a.grh.dgid), 0);
  a.grh.sgid_index = 200;  // inside the table (gid_tbl_len 256), empty: the kernel's ENODATA
  errno = 0;
  EXPECT_EQ(create_ah(pd_, &a), nullptr);
  EXPECT_EQ(errno, ENODATA);
  a.grh.sgid_index = 1;
  errno = 0;
  EXPECT_EQ(create_ah(pd_, &a), nullptr) << "the first empty entry";
  EXPECT_EQ(errno, ENODATA);
  a.grh.sgid_index = 0;
  a.port_num = 2;
  EXPECT_EQ(create_ah(pd_, &a), nullptr);
  a.port_num = 1;
  ibv_ah* ah = create_ah(pd_, &a);
  ASSERT_NE(ah, nullptr);
  EXPECT_EQ(ah->pd, pd_);
  EXPECT_EQ(destroy_ah(ah), 0);
}

TEST_F(Ud, SendRecv_GrhBeforeDataAndTheAnswerThroughAhFromWc) {
  for (uint32_t i = 0; i < 500; ++i) buf_[0][i] = static_cast<uint8_t>(i * 13 + 1);
  ASSERT_EQ(post_recv_at(1, 42, 0, kGrh + 500), 0);
  ASSERT_EQ(send_from(0, ah_, qp_[1]->qp_num, kQkey, 0, 500, 7), 0);
  const ibv_wc s = wait_wc(cq_[0]);
  EXPECT_EQ(s.status, IBV_WC_SUCCESS);
  EXPECT_EQ(s.opcode, IBV_WC_SEND);
  EXPECT_EQ(s.wr_id, 7u);
  const ibv_wc r = wait_wc(cq_[1]);
  ASSERT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.wr_id, 42u);
  EXPECT_EQ(r.opcode, IBV_WC_RECV);
  EXPECT_EQ(r.byte_len, kGrh + 500);
  EXPECT_EQ(r.src_qp, qp_[0]->qp_num);
  EXPECT_TRUE(r.wc_flags & IBV_WC_GRH);
  ibv_gid gid0;
  ASSERT_EQ(query_gid(ctx_, 1, 0, &gid0), 0);
  ibv_grh grh;
  std::memcpy(&grh, buf_[1].data(), kGrh);
  EXPECT_EQ(ntohl(grh.version_tclass_flow) >> 28, 6u);  // an IPv6 header, as RoCE v2 gives
  EXPECT_EQ(std::memcmp(grh.sgid.raw, gid0.raw, 16), 0);
  EXPECT_EQ(std::memcmp(grh.dgid.raw, gid0.raw, 16), 0);
  EXPECT_EQ(std::memcmp(buf_[1].data() + kGrh, buf_[0].data(), 500), 0);

  // The answer: an AH from the completion and its GRH, to the sender's QP.
  ibv_ah* back = create_ah_from_wc(pd_, &r, reinterpret_cast<ibv_grh*>(buf_[1].data()), 1);
  ASSERT_NE(back, nullptr);
  ASSERT_EQ(post_recv_at(0, 43, 1000, kGrh + 100), 0);
  std::memset(buf_[1].data() + 2000, 'b', 100);
  ASSERT_EQ(send_from(1, back, r.src_qp, kQkey, 2000, 100), 0);
  EXPECT_EQ(wait_wc(cq_[1]).status, IBV_WC_SUCCESS);
  const ibv_wc r2 = wait_wc(cq_[0]);
  ASSERT_EQ(r2.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r2.wr_id, 43u);
  EXPECT_EQ(r2.src_qp, qp_[1]->qp_num);
  EXPECT_EQ(buf_[0][1000 + kGrh], 'b');
  EXPECT_EQ(destroy_ah(back), 0);
}

TEST_F(Ud, InitAhFromWc_RefusesACompletionWithoutGrh) {
  ibv_wc wc{};
  ibv_grh grh{};
  ibv_ah_attr a{};
  EXPECT_EQ(init_ah_from_wc(ctx_, 1, &wc, &grh, &a), EINVAL);
  wc.wc_flags = IBV_WC_GRH;  // a dgid none of ours
  std::memset(grh.dgid.raw, 0xee, 16);
  EXPECT_EQ(init_ah_from_wc(ctx_, 1, &wc, &grh, &a), EINVAL);
}

TEST_F(Ud, WrSetUdAddr_SendsThroughTheExtendedApi) {
  ASSERT_EQ(post_recv_at(1, 5, 0, kGrh + 64), 0);
  std::memset(buf_[0].data(), 'x', 64);
  ibv_qp_ex* x = qp_to_qp_ex(qp_[0]);
  x->wr_start(x);
  x->wr_id = 9;
  x->wr_flags = IBV_SEND_SIGNALED;
  x->wr_send_imm(x, htonl(0xabcd));
  x->wr_set_ud_addr(x, ah_, qp_[1]->qp_num, kQkey);
  x->wr_set_sge(x, mr_[0]->lkey, reinterpret_cast<uintptr_t>(buf_[0].data()), 64);
  ASSERT_EQ(x->wr_complete(x), 0);
  EXPECT_EQ(wait_wc(cq_[0]).wr_id, 9u);
  const ibv_wc r = wait_wc(cq_[1]);
  ASSERT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(r.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(r.imm_data), 0xabcdu);
  EXPECT_EQ(buf_[1][kGrh + 63], 'x');
  // Without a destination the batch is refused.
  x->wr_start(x);
  x->wr_send(x);
  x->wr_set_sge(x, mr_[0]->lkey, reinterpret_cast<uintptr_t>(buf_[0].data()), 64);
  EXPECT_EQ(x->wr_complete(x), EINVAL);
}

TEST_F(Ud, Recv_OtherQkeyIsNotDelivered) {
  ASSERT_EQ(post_recv_at(1, 1, 0, kGrh + 64), 0);
  ASSERT_EQ(send_from(0, ah_, qp_[1]->qp_num, kQkey + 1, 0, 64, 1), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);             // sent: UD never hears of the drop
  EXPECT_EQ(wait_wc(cq_[1], 200ms).status, IBV_WC_GENERAL_ERR);  // nothing arrived
  // A WR Q_Key with the top bit set is the sending QP's own (kQkey): taken.
  ASSERT_EQ(send_from(0, ah_, qp_[1]->qp_num, 0x80000000u, 0, 64, 2), 0);
  const ibv_wc r = wait_wc(cq_[1]);
  EXPECT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.wr_id, 1u);
}

TEST_F(Ud, PostSend_RefusesMoreThanTheMtuAndAMissingAh) {
  EXPECT_EQ(send_from(0, ah_, qp_[1]->qp_num, kQkey, 0, 4097), EINVAL);
  EXPECT_EQ(send_from(0, nullptr, qp_[1]->qp_num, kQkey, 0, 64), EINVAL);
}

TEST_F(Ud, ModifyQp_UdTransitionsAndQuery) {
  ibv_qp* q = make_ud_qp(0);
  ASSERT_NE(q, nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_EQ(modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);  // Q_Key
  a.qkey = 0x77;
  a.dest_qp_num = 5;  // a connected QP's attribute
  EXPECT_EQ(modify_qp(q, &a, IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_DEST_QPN), EINVAL);
  ASSERT_EQ(modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  ibv_qp_attr got{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(query_qp(q, &got, IBV_QP_QKEY | IBV_QP_STATE, &init), 0);
  EXPECT_EQ(got.qkey, 0x77u);
  EXPECT_EQ(got.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(init.qp_type, IBV_QPT_UD);
  EXPECT_EQ(destroy_qp(q), 0);
}

}  // namespace
}  // namespace mrc::verbs
