// Tests of the software verbs device (libmrc/src/verbs) through its own functions, in one
// process: mrc0 on two loopback planes ([::1]:P and [::1]:P+1), QPs connected to each other
// through the GID ::1. What stock binaries do through the shim is ns_perftest_test.cc.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "loopback_env.h"
#include "mrc/verbs/verbs.h"
#include "open_device.h"
#include "verbs/objects.h"

namespace mrc::verbs {
namespace {

using namespace std::chrono_literals;

// The device reads its configuration once per process, at the first call: set it first.
const bool env_set = testing::set_loopback_env();

// Polls until one completion arrives (or 5 s pass).
ibv_wc wait_wc(ibv_cq* cq) {
  ibv_wc wc{};
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < end) {
    if (poll_cq(cq, 1, &wc) == 1) return wc;
  }
  ADD_FAILURE() << "no completion within 5 s";
  wc.status = IBV_WC_GENERAL_ERR;
  return wc;
}

class Verbs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_set);
    ctx_ = testing::open_the_device();
    ASSERT_NE(ctx_, nullptr);
    pd_ = alloc_pd(ctx_);
    for (int i = 0; i < 2; ++i) {
      buf_[i].assign(1 << 20, 0);
      mr_[i] =
          reg_mr(pd_, buf_[i].data(), buf_[i].size(), reinterpret_cast<uintptr_t>(buf_[i].data()),
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
      ASSERT_NE(mr_[i], nullptr);
      cq_[i] = create_cq(ctx_, 256, nullptr, nullptr, 0);
      ASSERT_NE(cq_[i], nullptr);
    }
  }
  void TearDown() override {
    for (ibv_qp* q : qp_) {
      if (q) {
        EXPECT_EQ(destroy_qp(q), 0);
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (cq_[i]) {
        EXPECT_EQ(destroy_cq(cq_[i]), 0);
      }
      if (mr_[i]) {
        EXPECT_EQ(dereg_mr(mr_[i]), 0);
      }
    }
    for (ibv_comp_channel* ch : channels_) EXPECT_EQ(destroy_comp_channel(ch), 0);
    if (pd_) {
      EXPECT_EQ(dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(close_device(ctx_), 0);
    }
  }

  ibv_qp* make_qp(int side, uint32_t max_send_wr = 64) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_[side];
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = max_send_wr;
    a.cap.max_recv_wr = 64;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = 64;
    return create_qp(pd_, &a);
  }

  int to_init(ibv_qp* q) const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = qp_access_;
    return modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }

  // RTR toward `dest` (GID ::1), then RTS, as perftest does.
  int connect(ibv_qp* q, uint32_t dest, bool rts = true) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = dest;
    a.rq_psn = 0x123456;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    EXPECT_EQ(query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
    a.ah_attr.grh.hop_limit = 64;
    if (int r = modify_qp(q, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return r;
    if (!rts) return 0;
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = 14;
    s.retry_cnt = 7;
    s.rnr_retry = 7;
    s.sq_psn = 0x654321;
    s.max_rd_atomic = 16;
    return modify_qp(q, &s,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }

  // qp_[0] = q (side 0, made by the caller) and a default QP on side 1, connected.
  void pair_with(ibv_qp* q) {
    qp_[0] = q;
    qp_[1] = make_qp(1);
    ASSERT_TRUE(qp_[0] && qp_[1]);
    ASSERT_EQ(to_init(qp_[0]), 0);
    ASSERT_EQ(to_init(qp_[1]), 0);
    ASSERT_EQ(connect(qp_[0], qp_[1]->qp_num), 0);
    ASSERT_EQ(connect(qp_[1], qp_[0]->qp_num), 0);
  }
  void make_pair() { pair_with(make_qp(0)); }
  // A side-0 RC QP whose sends complete on `send_cq` (receives on cq_[0]).
  ibv_qp* qp_completing_on(ibv_cq* send_cq) {
    ibv_qp_init_attr ia{};
    ia.send_cq = send_cq;
    ia.recv_cq = cq_[0];
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    return create_qp(pd_, &ia);
  }

  int post(ibv_qp* q, ibv_wr_opcode op, uint64_t local, uint32_t len, uint32_t lkey,
           uint64_t remote = 0, uint32_t rkey = 0, unsigned flags = IBV_SEND_SIGNALED,
           uint32_t imm = 0, int num_sge = 1) {
    ibv_sge sge{local, len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = num_sge;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return post_send(q, &wr, &bad);
  }
  int post_r(ibv_qp* q, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t id = 9) {
    ibv_sge sge{addr, len, lkey};
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return post_recv(q, &wr, &bad);
  }
  uint64_t at(int i, size_t off = 0) { return reinterpret_cast<uintptr_t>(buf_[i].data()) + off; }
  // Memory windows: an MR of side 1's buffer from 8192 (4 KiB) with no remote access of its own,
  // windows may be bound to it; a 64-byte WRITE from qp_[0] there under `rkey`, its status.
  ibv_mr* bindable_mr() {
    return reg_mr(pd_, buf_[1].data() + 8192, 4096, at(1, 8192),
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  }
  ibv_wc_status write_through(uint32_t rkey) {
    if (post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 64, mr_[0]->lkey, at(1, 8192), rkey) != 0)
      return IBV_WC_GENERAL_ERR;
    return wait_wc(cq_[0]).status;
  }
  // The context's ops table, where the inline verbs (ibv_query_device_ex, ...) look.
  verbs_context* vctx() {
    return reinterpret_cast<verbs_context*>(reinterpret_cast<uintptr_t>(ctx_) -
                                            offsetof(verbs_context, context));
  }

  // cq_[0] and cq_[1] replaced by CQs of their own completion channels (before make_pair).
  void cqs_on_channels() {
    for (int i = 0; i < 2; ++i) {
      channels_.push_back(create_comp_channel(ctx_));
      ASSERT_NE(channels_.back(), nullptr);
      ASSERT_EQ(destroy_cq(cq_[i]), 0);
      cq_[i] = create_cq(ctx_, 256, nullptr, channels_.back(), 0);
      ASSERT_NE(cq_[i], nullptr);
    }
  }

  // A SEND/RECV ping-pong of `rounds` 8-byte messages between two app threads, one per QP of
  // make_pair (side 0 sends round r, side 1 answers it), each taking its completions one at a
  // time with wait(side, &wc) (false: none came). Every receive is posted before the peer can
  // send into it (no RNR); every message's bytes, status and opcode are checked.
  void send_ping_pong(int rounds, const std::function<bool(int, ibv_wc*)>& wait) {
    ASSERT_NO_FATAL_FAILURE(make_pair());
    for (int i = 0; i < 2; ++i) ASSERT_EQ(post_r(qp_[i], at(i), 8, mr_[i]->lkey), 0);
    auto side = [&](int i) {
      int sends_done = 0;
      auto next = [&](ibv_wc_opcode want) {  // true: a completion of kind `want` came
        ibv_wc wc{};
        if (!wait(i, &wc)) return false;
        if (wc.status != IBV_WC_SUCCESS || wc.opcode != want) return false;
        return true;
      };
      // The receive of a round, counting the SEND completions that come before it.
      auto until_recv = [&] {
        for (;;) {
          ibv_wc wc{};
          if (!wait(i, &wc) || wc.status != IBV_WC_SUCCESS) return false;
          if (wc.opcode == IBV_WC_RECV) return true;
          if (wc.opcode != IBV_WC_SEND) return false;
          ++sends_done;
        }
      };
      for (int r = 0; r < rounds; ++r) {
        const uint64_t mine = 2 * static_cast<uint64_t>(r) + static_cast<uint64_t>(i);
        uint64_t got = 0;
        if (i == 1) {  // the answer: wait for round r, post the next receive, answer
          if (!until_recv()) return ADD_FAILURE() << "side 1: no receive at round " << r;
          std::memcpy(&got, buf_[1].data(), 8);
          if (got != mine - 1) return ADD_FAILURE() << "side 1 got " << got << " at round " << r;
          EXPECT_EQ(post_r(qp_[1], at(1), 8, mr_[1]->lkey), 0);
        }
        const size_t src = 4096 + 8 * static_cast<size_t>(r);  // not reused before completion
        std::memcpy(buf_[i].data() + src, &mine, 8);
        if (post(qp_[i], IBV_WR_SEND, at(i, src), 8, mr_[i]->lkey) != 0)
          return ADD_FAILURE() << "side " << i << ": post_send failed at round " << r;
        if (i == 0) {
          if (!until_recv()) return ADD_FAILURE() << "side 0: no answer at round " << r;
          std::memcpy(&got, buf_[0].data(), 8);
          if (got != mine + 1) return ADD_FAILURE() << "side 0 got " << got << " at round " << r;
          EXPECT_EQ(post_r(qp_[0], at(0), 8, mr_[0]->lkey), 0);
        }
      }
      for (; sends_done < rounds; ++sends_done)
        if (!next(IBV_WC_SEND)) return ADD_FAILURE() << "side " << i << ": a SEND never completed";
    };
    std::thread t1(side, 1);
    side(0);
    t1.join();
  }

  int qp_access_ = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;  // to_init's
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::vector<uint8_t> buf_[2];
  ibv_mr* mr_[2] = {};
  ibv_cq* cq_[2] = {};
  std::vector<ibv_comp_channel*> channels_;  // destroyed after the CQs
  std::vector<ibv_qp*> qp_ = std::vector<ibv_qp*>(2, nullptr);
};

const ibv_gid kZeroGid{};

TEST_F(Verbs, DeviceAndPort_SaneAttributes) {
  EXPECT_STREQ(ctx_->device->name, "mrc0");
  EXPECT_EQ(ctx_->device->transport_type, IBV_TRANSPORT_IB);
  ibv_device_attr d{};
  ASSERT_EQ(query_device(ctx_, &d), 0);
  EXPECT_EQ(d.phys_port_cnt, 1);
  EXPECT_GT(d.max_qp_rd_atom, 0);
  EXPECT_GE(d.max_qp_wr, 512);
  EXPECT_GE(d.max_sge, 1);
  ibv_port_attr p{};
  ASSERT_EQ(query_port(ctx_, 1, &p), 0);
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(p.gid_tbl_len, kGidTableLen) << "a real RoCE port's length; two planes on ::1: "
                                            "one address, one populated GID";
  EXPECT_NE(p.lid, 0);
  EXPECT_EQ(query_port(ctx_, 2, &p), EINVAL);
  ibv_gid g{};
  ASSERT_EQ(query_gid(ctx_, 1, 0, &g), 0);
  const in6_addr lo = IN6ADDR_LOOPBACK_INIT;
  EXPECT_EQ(std::memcmp(g.raw, &lo, 16), 0) << "GID = the host's MRC address";
  ibv_gid_entry e{};
  ASSERT_EQ(query_gid_ex(ctx_, 1, 0, &e), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(std::memcmp(e.gid.raw, g.raw, 16), 0);
  EXPECT_EQ(e.ndev_ifindex, if_nametoindex("lo")) << "tied to the interface holding ::1";
  // Entries 1..255 are empty, as a real port's unused ones: query_gid_ex says ENODATA (the
  // kernel's answer), query_gid the zero GID and success (libibverbs'); past the table EINVAL.
  EXPECT_EQ(query_gid_ex(ctx_, 1, 1, &e), ENODATA);
  EXPECT_EQ(query_gid_ex(ctx_, 1, kGidTableLen - 1, &e), ENODATA);
  EXPECT_EQ(query_gid_ex(ctx_, 1, kGidTableLen, &e), EINVAL);
  EXPECT_EQ(query_gid_ex(ctx_, 2, 0, &e), EINVAL);
  std::memset(&g, 0xab, sizeof g);
  EXPECT_EQ(query_gid(ctx_, 1, 1, &g), 0);
  EXPECT_EQ(std::memcmp(&g, &kZeroGid, 16), 0) << "an empty entry reads as the zero GID";
  std::memset(&g, 0xab, sizeof g);
  EXPECT_EQ(query_gid(ctx_, 1, kGidTableLen - 1, &g), 0);
  EXPECT_EQ(std::memcmp(&g, &kZeroGid, 16), 0);
  EXPECT_EQ(query_gid(ctx_, 1, kGidTableLen, &g), EINVAL);
  EXPECT_EQ(query_gid(ctx_, 1, -1, &g), EINVAL);
  // The table call gives the populated entries only (as the kernel does), the same ones
  // query_gid_ex gives, even with room for all kGidTableLen.
  std::vector<ibv_gid_entry> t(kGidTableLen);
  ASSERT_EQ(query_gid_table(ctx_, t.data(), t.size()), 1);
  ASSERT_EQ(query_gid_ex(ctx_, 1, 0, &e), 0);
  EXPECT_EQ(std::memcmp(&t[0], &e, sizeof e), 0);
  ASSERT_EQ(query_gid_table(ctx_, t.data(), 1), 1) << "room for the populated ones is enough";
  EXPECT_EQ(query_gid_table(ctx_, t.data(), 0), -EINVAL) << "too small a table";
  // The extended ops perftest reaches through verbs_get_ctx_op.
  verbs_context* v = verbs_get_ctx(ctx_);
  ASSERT_NE(v, nullptr);
  EXPECT_NE(v->query_port, nullptr);
  EXPECT_NE(v->create_qp_ex, nullptr);
  EXPECT_NE(v->create_cq_ex, nullptr);
}

TEST_F(Verbs, Write_Read_WriteImm_SendRecv_Inline) {
  make_pair();
  for (size_t i = 0; i < buf_[0].size(); ++i) buf_[0][i] = static_cast<uint8_t>(i * 7 + 1);
  // WRITE 300 KiB (many packets), then READ it back into another place.
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 300 << 10, mr_[0]->lkey, at(1), mr_[1]->rkey),
            0);
  ibv_wc wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(std::memcmp(buf_[0].data(), buf_[1].data(), 300 << 10), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_READ, at(0, 512 << 10), 300 << 10, mr_[0]->lkey, at(1),
                 mr_[1]->rkey),
            0);
  wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, 300u << 10);
  EXPECT_EQ(std::memcmp(buf_[0].data(), buf_[0].data() + (512 << 10), 300 << 10), 0);
  // WRITE_WITH_IMM consumes a receive and carries the immediate in network order.
  ASSERT_EQ(post_r(qp_[1], at(1, 900 << 10), 16, mr_[1]->lkey, 41), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE_WITH_IMM, at(0), 64, mr_[0]->lkey, at(1, 4096),
                 mr_[1]->rkey, IBV_SEND_SIGNALED, 0xdeadbeef),
            0);
  wc = wait_wc(cq_[1]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.wr_id, 41u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 0xdeadbeefu);
  EXPECT_EQ(wc.qp_num, qp_[1]->qp_num);
  EXPECT_EQ(wait_wc(cq_[0]).opcode, IBV_WC_RDMA_WRITE);
  // SEND with inline data into a posted receive.
  const char msg[] = "hello over MRC";
  ASSERT_EQ(post_r(qp_[1], at(1, 800 << 10), 64, mr_[1]->lkey, 42), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_SEND, reinterpret_cast<uintptr_t>(msg), sizeof msg, 0, 0, 0,
                 IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            0);
  wc = wait_wc(cq_[1]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, sizeof msg);
  EXPECT_STREQ(reinterpret_cast<const char*>(buf_[1].data() + (800 << 10)), msg);
  EXPECT_EQ(wait_wc(cq_[0]).opcode, IBV_WC_SEND);
}

TEST_F(Verbs, UnsignalledSends_OnlyTheSignalledOneCompletes) {
  // 100 WRs in flight at once: the send queue must hold them (unsignalled ones occupy it
  // until a later signalled one completes, as in verbs).
  ASSERT_NO_FATAL_FAILURE(pair_with(make_qp(0, 128)));
  for (int i = 0; i < 99; ++i)
    ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 1024, mr_[0]->lkey, at(1), mr_[1]->rkey, 0),
              0);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 1024, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  std::this_thread::sleep_for(50ms);
  ibv_wc wc;
  EXPECT_EQ(poll_cq(cq_[0], 1, &wc), 0) << "an unsignalled WRITE completed";
}

TEST_F(Verbs, RtrWithAnEmptySgidIndex_EnodataQpUnchangedThenIndexZeroConnects) {
  // An empty GID entry is refused as the kernel refuses it (rdma_get_gid_attr: ENODATA), and
  // the refused call changes nothing: the QP stays in INIT and connects with a populated one.
  qp_[0] = make_qp(0);
  qp_[1] = make_qp(1);
  ASSERT_EQ(to_init(qp_[0]), 0);
  ASSERT_EQ(to_init(qp_[1]), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = qp_[1]->qp_num;
  a.max_dest_rd_atomic = 16;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = 7;
  ASSERT_EQ(query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
  const int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  errno = 0;
  EXPECT_EQ(modify_qp(qp_[0], &a, mask), ENODATA);
  EXPECT_EQ(errno, ENODATA);
  a.ah_attr.grh.sgid_index = kGidTableLen - 1;
  EXPECT_EQ(modify_qp(qp_[0], &a, mask), ENODATA) << "the table's last index, empty";
  ibv_qp_attr q{};
  ibv_qp_init_attr i{};
  ASSERT_EQ(query_qp(qp_[0], &q, IBV_QP_STATE, &i), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_INIT) << "a refused RTR changes nothing";
  ASSERT_EQ(connect(qp_[1], qp_[0]->qp_num), 0);
  ASSERT_EQ(connect(qp_[0], qp_[1]->qp_num), 0);  // sgid_index 0
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 1024, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
}

TEST_F(Verbs, RtrOnlyResponder_AnswersReadsAndTakesWrites) {
  // A bw server stays in RTR: its memory is written and read with no call on its side.
  qp_[0] = make_qp(0);
  qp_[1] = make_qp(1);
  ASSERT_EQ(to_init(qp_[0]), 0);
  ASSERT_EQ(to_init(qp_[1]), 0);
  ASSERT_EQ(connect(qp_[1], qp_[0]->qp_num, /*rts=*/false), 0);
  ASSERT_EQ(connect(qp_[0], qp_[1]->qp_num), 0);
  std::memset(buf_[1].data(), 0x5a, 8192);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_READ, at(0), 8192, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(buf_[0][8191], 0x5a);
  // Sends from the RTR side are refused, as verbs says.
  EXPECT_EQ(post(qp_[1], IBV_WR_RDMA_WRITE, at(1), 8, mr_[1]->lkey, at(0), mr_[0]->rkey), EINVAL);
  ibv_qp_attr a{};
  ibv_qp_init_attr i{};
  ASSERT_EQ(query_qp(qp_[1], &a, IBV_QP_STATE, &i), 0);
  EXPECT_EQ(a.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(a.rq_psn, 0x123456u) << "the app's PSN is what query_qp shows";
}

TEST_F(Verbs, BadUse_TheErrnoVerbsProgramsExpect) {
  qp_[0] = make_qp(0);
  qp_[1] = make_qp(1);
  // Post on a RESET QP.
  EXPECT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 8, mr_[0]->lkey, at(1), mr_[1]->rkey), EINVAL);
  ASSERT_EQ(to_init(qp_[0]), 0);
  ASSERT_EQ(to_init(qp_[1]), 0);
  // RTR without an address vector.
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(modify_qp(qp_[0], &r, IBV_QP_STATE), EINVAL);
  // Enum fields a C program filled with values outside the enum (found by fuzz_verbs_connect:
  // reading them as the C++ enum type was undefined behaviour).
  const int bogus = 1000;
  std::memcpy(&r.path_mtu, &bogus, sizeof bogus);
  EXPECT_EQ(modify_qp(qp_[0], &r, IBV_QP_PATH_MTU), EINVAL);
  std::memcpy(&r.qp_state, &bogus, sizeof bogus);
  EXPECT_EQ(modify_qp(qp_[0], &r, IBV_QP_STATE), EINVAL);
  ASSERT_EQ(connect(qp_[0], qp_[1]->qp_num), 0);
  ASSERT_EQ(connect(qp_[1], qp_[0]->qp_num), 0);
  // Bad lkey, too many SGEs, an opcode mrc0 does not do.
  EXPECT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 8, 0xbad00, at(1), mr_[1]->rkey), EINVAL);
  EXPECT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 8, mr_[0]->lkey, at(1), mr_[1]->rkey,
                 IBV_SEND_SIGNALED, 0, 17),
            EINVAL);
  EXPECT_EQ(post(qp_[0], IBV_WR_TSO, at(0), 8, mr_[0]->lkey, at(1), mr_[1]->rkey), EINVAL);
  // A flag mrc0 cannot honour (raw packet checksum offload) is refused, not ignored.
  EXPECT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 8, mr_[0]->lkey, at(1), mr_[1]->rkey,
                 IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM),
            EINVAL);
  // So are attributes it has nothing behind: alternate paths, a Q_Key (UD), queue resizing.
  for (int bit : {IBV_QP_ALT_PATH, IBV_QP_PATH_MIG_STATE, IBV_QP_QKEY, IBV_QP_CAP}) {
    ibv_qp_attr x{};
    EXPECT_EQ(modify_qp(qp_[0], &x, bit), EINVAL) << "mask bit 0x" << std::hex << bit;
  }
  ibv_sge one{at(0), 8, mr_[0]->lkey};
  ibv_send_wr odd{};
  odd.sg_list = &one;
  odd.num_sge = 1;
  std::memcpy(&odd.opcode, &bogus, sizeof bogus);
  ibv_send_wr* odd_bad = nullptr;
  EXPECT_EQ(post_send(qp_[0], &odd, &odd_bad), EINVAL);
  EXPECT_EQ(odd_bad, &odd);
  // A too-big receive SGE list.
  ibv_sge sges[17] = {};
  ibv_recv_wr rw{};
  rw.sg_list = sges;
  rw.num_sge = 17;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(post_recv(qp_[1], &rw, &bad), EINVAL);
  EXPECT_EQ(bad, &rw);
  // Memory registration rules.
  EXPECT_EQ(reg_mr(pd_, buf_[0].data(), 64, at(0), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_mr* relaxed =
      reg_mr(pd_, buf_[0].data(), 64, at(0), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  ASSERT_NE(relaxed, nullptr) << "optional access bits are accepted";
  EXPECT_EQ(dereg_mr(relaxed), 0);
  ibv_mr* huge = reg_mr(pd_, buf_[0].data(), 64, at(0), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_HUGETLB);
  ASSERT_NE(huge, nullptr) << "IBV_ACCESS_HUGETLB (how the range is backed) is accepted";
  EXPECT_EQ(dereg_mr(huge), 0);
  // Unsupported objects: EOPNOTSUPP, no crash.
  ibv_qp_init_attr raw{};  // raw packet QPs are an Ethernet NIC's (XRC: xrc_test.cc)
  raw.send_cq = raw.recv_cq = cq_[0];
  raw.qp_type = IBV_QPT_RAW_PACKET;
  raw.cap.max_send_wr = raw.cap.max_recv_wr = 1;
  EXPECT_EQ(create_qp(pd_, &raw), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_F(Verbs, ResizeCq_GrowsShrinksNotBelowWhatItHolds) {
  make_pair();
  ASSERT_EQ(resize_cq(cq_[0], 4), 0);
  EXPECT_EQ(cq_[0]->cqe, 4);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 8, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < end &&
         qp_of(qp_[0])->ctx->dev->driver->peek_engine(
             [&](engine::Engine& e) { return e.cq_depth(cq_of(cq_[0])->id); }) < 3) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(resize_cq(cq_[0], 2), EINVAL);  // three completions wait in it
  EXPECT_EQ(cq_[0]->cqe, 4);
  EXPECT_EQ(resize_cq(cq_[0], 0), EINVAL);
  ASSERT_EQ(resize_cq(cq_[0], 64), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
}

// Memory windows (verbs/mw.cc): an MR without remote access, reached through a window only.
TEST_F(Verbs, MemoryWindow_Type1BindGrantsWriteRebindToNothingRevokes) {
  make_pair();
  ibv_mr* mr = bindable_mr();
  ASSERT_NE(mr, nullptr);
  errno = 0;
  EXPECT_EQ(alloc_mw(pd_, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_mw* mw = alloc_mw(pd_, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  const uint32_t before = mw->rkey;
  ibv_mw_bind b{};
  b.wr_id = 5;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info = {mr, at(1, 8192), 4096, IBV_ACCESS_REMOTE_WRITE};
  ASSERT_EQ(bind_mw(qp_[1], mw, &b), 0);
  ibv_wc wc = wait_wc(cq_[1]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(mw->rkey, ibv_inc_rkey(before));
  EXPECT_EQ(dereg_mr(mr), EBUSY);  // a window is bound to it
  std::memset(buf_[0].data(), 0x77, 64);
  EXPECT_EQ(write_through(mw->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(buf_[1][8192 + 63], 0x77);
  b.bind_info = {mr, at(1, 8192), 0, 0};  // type 1: rebound to nothing
  ASSERT_EQ(bind_mw(qp_[1], mw, &b), 0);
  EXPECT_EQ(wait_wc(cq_[1]).opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(write_through(mw->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dealloc_mw(mw), 0);
  EXPECT_EQ(dereg_mr(mr), 0);
}

TEST_F(Verbs, MemoryWindow_Type2BindThenSendWithInvalidateRevokes) {
  make_pair();
  ibv_mr* mr = bindable_mr();
  ASSERT_NE(mr, nullptr);
  ibv_mw* mw = alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ibv_send_wr wr{};
  wr.wr_id = 6;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = {mr, at(1, 8192), 4096, IBV_ACCESS_REMOTE_WRITE};
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(post_send(qp_[1], &wr, &bad), 0);
  EXPECT_EQ(wait_wc(cq_[1]).opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(mw->rkey, wr.bind_mw.rkey);
  EXPECT_EQ(write_through(mw->rkey), IBV_WC_SUCCESS);
  // The peer invalidates it with its SEND.
  ASSERT_EQ(post_r(qp_[1], at(1, 0), 64, mr_[1]->lkey, 11), 0);
  ibv_sge sge{at(0), 8, mr_[0]->lkey};
  ibv_send_wr inv{};
  inv.wr_id = 12;
  inv.sg_list = &sge;
  inv.num_sge = 1;
  inv.opcode = IBV_WR_SEND_WITH_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = mw->rkey;
  ASSERT_EQ(post_send(qp_[0], &inv, &bad), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  ibv_wc wc = wait_wc(cq_[1]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 11u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wc.invalidated_rkey, mw->rkey);
  EXPECT_EQ(write_through(mw->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dealloc_mw(mw), 0);
  EXPECT_EQ(dereg_mr(mr), 0);
}

TEST_F(Verbs, MemoryWindow_LocalInvalidateRevokes) {
  make_pair();
  ibv_mr* mr = bindable_mr();
  ASSERT_NE(mr, nullptr);
  ibv_mw* mw = alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ibv_qp_ex* x = qp_to_qp_ex(qp_[1]);
  const ibv_mw_bind_info info{mr, at(1, 8192), 4096, IBV_ACCESS_REMOTE_WRITE};
  x->wr_start(x);
  x->wr_id = 21;
  x->wr_flags = IBV_SEND_SIGNALED;
  x->wr_bind_mw(x, mw, ibv_inc_rkey(mw->rkey), &info);
  ASSERT_EQ(x->wr_complete(x), 0);
  EXPECT_EQ(wait_wc(cq_[1]).wr_id, 21u);
  EXPECT_EQ(write_through(mw->rkey), IBV_WC_SUCCESS);
  x->wr_start(x);
  x->wr_id = 22;
  x->wr_local_inv(x, mw->rkey);
  ASSERT_EQ(x->wr_complete(x), 0);
  const ibv_wc wc = wait_wc(cq_[1]);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(wc.wr_id, 22u);
  EXPECT_EQ(write_through(mw->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dealloc_mw(mw), 0);
  EXPECT_EQ(dereg_mr(mr), 0);
}

TEST_F(Verbs, RemoteKeyViolation_RemAccessErr_TargetUntouched) {
  make_pair();
  ibv_mr* ro = reg_mr(pd_, buf_[1].data() + 4096, 4096, at(1, 4096), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(ro, nullptr);
  std::memset(buf_[0].data(), 0xee, 4096);
  std::memset(buf_[1].data(), 0, buf_[1].size());
  // A key without remote write, then a range past the MR.
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 4096, mr_[0]->lkey, at(1, 4096), ro->rkey), 0);
  ibv_wc wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(std::all_of(buf_[1].begin(), buf_[1].end(), [](uint8_t b) { return b == 0; }))
      << "the target's memory changed";
  ibv_qp_attr a{};
  ibv_qp_init_attr i{};
  ASSERT_EQ(query_qp(qp_[0], &a, IBV_QP_STATE, &i), 0);
  EXPECT_EQ(a.qp_state, IBV_QPS_ERR);
  EXPECT_EQ(dereg_mr(ro), 0);

  // A fresh pair (the failed QP stays in ERROR): the right key, but a range that runs past
  // the end of its MR.
  for (ibv_qp*& q : qp_) {
    EXPECT_EQ(destroy_qp(q), 0);
    q = nullptr;
  }
  make_pair();
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 4096, mr_[0]->lkey, at(1, buf_[1].size() - 100),
                 mr_[1]->rkey),
            0);
  wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(std::all_of(buf_[1].begin(), buf_[1].end(), [](uint8_t b) { return b == 0; }))
      << "the target's memory changed";
}

// The responder QP's qp_access_flags count, not only its MRs': a QP that grants READ only
// refuses a WRITE into an MR with every access, and one that grants WRITE only refuses a READ.
TEST_F(Verbs, QpAccessFlags_RemAccessErrWhereTheQpDoesNotGrant) {
  for (int grant : {IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_WRITE}) {
    make_pair();
    ibv_qp_attr a{};
    a.qp_access_flags = static_cast<unsigned>(grant);
    ASSERT_EQ(modify_qp(qp_[1], &a, IBV_QP_ACCESS_FLAGS), 0);
    ibv_qp_init_attr i{};
    ASSERT_EQ(query_qp(qp_[1], &a, IBV_QP_ACCESS_FLAGS, &i), 0);
    EXPECT_EQ(a.qp_access_flags, static_cast<unsigned>(grant));
    std::memset(buf_[0].data(), 0xee, 4096);
    std::memset(buf_[1].data(), 0, buf_[1].size());
    const bool write = grant == IBV_ACCESS_REMOTE_READ;  // try what is not granted
    ASSERT_EQ(post(qp_[0], write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, at(0), 4096,
                   mr_[0]->lkey, at(1), mr_[1]->rkey),
              0);
    ibv_wc wc = wait_wc(cq_[0]);
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << (write ? "WRITE" : "READ");
    EXPECT_TRUE(std::all_of(buf_[1].begin(), buf_[1].end(), [](uint8_t b) { return b == 0; }))
        << "the target's memory changed";
    EXPECT_TRUE(std::all_of(buf_[0].begin(), buf_[0].begin() + 4096,
                            [](uint8_t b) { return b == 0xee; }))
        << "a refused READ brought data";
    for (ibv_qp*& q : qp_) {
      EXPECT_EQ(destroy_qp(q), 0);
      q = nullptr;
    }
  }
}

TEST_F(Verbs, AnotherPdsMr_RemAccessErrAndLocalProtection) {
  make_pair();
  // Memory of another PD on the same device, with every access: not the QPs' to use.
  ibv_pd* other = alloc_pd(ctx_);
  ASSERT_NE(other, nullptr);
  const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* theirs = reg_mr(other, buf_[1].data() + 4096, 4096, at(1, 4096), all);
  ibv_mr* mine = reg_mr(other, buf_[0].data() + 8192, 4096, at(0, 8192), all);
  ASSERT_TRUE(theirs && mine);
  std::memset(buf_[0].data(), 0xee, 4096);
  std::memset(buf_[1].data(), 0, buf_[1].size());
  // Locally: a send SGE of the other PD's MR is refused at post time; a receive is checked
  // when a SEND lands in it, as on a NIC (ReceiveInAnotherPd_RemOpErrAtTheRequester).
  EXPECT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0, 8192), 64, mine->lkey, at(1), mr_[1]->rkey),
            EINVAL);
  // Remotely: the peer's QP is in pd_, so the other PD's rkey is no key at all.
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 4096, mr_[0]->lkey, at(1, 4096), theirs->rkey),
            0);
  ibv_wc wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(std::all_of(buf_[1].begin(), buf_[1].end(), [](uint8_t b) { return b == 0; }))
      << "the target's memory changed";
  EXPECT_EQ(dereg_mr(theirs), 0);
  EXPECT_EQ(dealloc_pd(other), EBUSY);  // `mine` still in it
  EXPECT_EQ(dealloc_pd(pd_), EBUSY);    // the QPs and MRs of the fixture
  EXPECT_EQ(dereg_mr(mine), 0);
  EXPECT_EQ(dealloc_pd(other), 0);
}

// A receive whose buffer is another PD's: accepted at post; the SEND that lands in it
// completes at the requester with REM_OP_ERR (a NACK, not a retry timeout) and at the
// responder with an error, its memory untouched.
TEST_F(Verbs, ReceiveInAnotherPd_RemOpErrAtTheRequester) {
  make_pair();
  ibv_pd* other = alloc_pd(ctx_);
  ASSERT_NE(other, nullptr);
  ibv_mr* theirs = reg_mr(other, buf_[1].data() + 4096, 4096, at(1, 4096), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(theirs, nullptr);
  std::memset(buf_[1].data(), 0, buf_[1].size());
  ASSERT_EQ(post_r(qp_[1], at(1, 4096), 64, theirs->lkey), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_SEND, at(0), 64, mr_[0]->lkey, 0, 0), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_REM_OP_ERR);
  EXPECT_NE(wait_wc(cq_[1]).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(std::all_of(buf_[1].begin(), buf_[1].end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(dereg_mr(theirs), 0);
  EXPECT_EQ(dealloc_pd(other), 0);
}

// ibv_query_device_ex through the context's ops, as the inline ibv_query_device_ex calls it:
// query_device's attributes, phys_port_cnt_ex equal to phys_port_cnt, the ODP caps; a short
// (older) struct gets its prefix, a bad input mask EINVAL.
TEST_F(Verbs, QueryDeviceEx_AgreesWithQueryDevice) {
  verbs_context* v = vctx();
  ASSERT_NE(v->query_device_ex, nullptr);
  ibv_device_attr_ex x{};
  ASSERT_EQ(v->query_device_ex(ctx_, nullptr, &x, sizeof x), 0);
  ibv_device_attr d{};
  ASSERT_EQ(query_device(ctx_, &d), 0);
  EXPECT_EQ(std::memcmp(&x.orig_attr, &d, sizeof d), 0);
  EXPECT_EQ(x.phys_port_cnt_ex, d.phys_port_cnt);
  EXPECT_EQ(x.odp_caps.general_caps, uint64_t{IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT});
  EXPECT_EQ(x.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_SEND,
            uint32_t{IBV_ODP_SUPPORT_SEND});
  EXPECT_EQ(x.odp_caps.per_transport_caps.ud_odp_caps,
            uint32_t{IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV});
  ibv_device_attr_ex small{};
  small.comp_mask = 0xdead;
  ASSERT_EQ(v->query_device_ex(ctx_, nullptr, &small, sizeof(ibv_device_attr) + 4), 0);
  EXPECT_EQ(small.comp_mask, 0u);
  EXPECT_EQ(small.phys_port_cnt_ex, 0u);  // beyond what the caller passed
  ibv_query_device_ex_input in{1};
  EXPECT_EQ(v->query_device_ex(ctx_, &in, &x, sizeof x), EINVAL);
  EXPECT_EQ(v->query_device_ex(ctx_, nullptr, &x, 8), EINVAL);
}

// ctx->cmd_fd is a real descriptor of the context's own (dup works), closed with it.
TEST_F(Verbs, CmdFd_ARealDescriptorTheContextOwns) {
  ASSERT_GE(ctx_->cmd_fd, 0);
  const int d = ::dup(ctx_->cmd_fd);
  ASSERT_GE(d, 0);
  ::close(d);
  ibv_context* second = testing::open_the_device();
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->cmd_fd, ctx_->cmd_fd);
  const int fd = second->cmd_fd;
  EXPECT_EQ(close_device(second), 0);
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // closed with its context
}

// ibv_rereg_mr: same keys; the new access is what a peer's WRITE meets (REM_ACCESS_ERR once
// REMOTE_WRITE is gone, memory untouched); a new translation is where data lands; bad input
// is IBV_REREG_MR_ERR_INPUT with EINVAL and the MR unchanged.
TEST_F(Verbs, ReregMr_AccessAndTranslationSameKeys) {
  make_pair();
  const uint32_t lkey = mr_[1]->lkey, rkey = mr_[1]->rkey;
  ASSERT_EQ(
      rereg_mr(mr_[1], IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE), 0);
  EXPECT_EQ(mr_[1]->lkey, lkey);
  EXPECT_EQ(mr_[1]->rkey, rkey);
  std::memset(buf_[0].data(), 0x5a, 4096);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 64, mr_[0]->lkey, at(1), rkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(buf_[1][0], 0);

  errno = 0;
  EXPECT_EQ(rereg_mr(mr_[1], 0, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rereg_mr(mr_[1], IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 0, 0),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(rereg_mr(mr_[1], IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                     IBV_ACCESS_REMOTE_WRITE),  // remote write without local write
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(mr_[1]->addr, buf_[1].data());

  std::vector<uint8_t> moved(4096, 0);
  ASSERT_EQ(rereg_mr(mr_[1], IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, nullptr,
                     moved.data(), moved.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(mr_[1]->addr, moved.data());
  EXPECT_EQ(mr_[1]->length, moved.size());
  // qp_[0] failed above: a fresh pair for the WRITE into the new place.
  for (ibv_qp*& q : qp_) {
    EXPECT_EQ(destroy_qp(q), 0);
    q = nullptr;
  }
  make_pair();
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 64, mr_[0]->lkey,
                 reinterpret_cast<uintptr_t>(moved.data()), rkey),
            0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::count(moved.begin(), moved.begin() + 64, 0x5a), 64);
  // Back over the fixture's buffer, for TearDown and the PD count.
  ASSERT_EQ(
      rereg_mr(mr_[1], IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buf_[1].data(), buf_[1].size(), 0),
      0);
}

// The implicit ODP MR (NULL, SIZE_MAX, ON_DEMAND): its lkey sends from any buffer of the
// process; it takes local access only (a peer must not name any address); ibv_advise_mr
// checks each SGE against its MR and faults the pages in.
TEST_F(Verbs, ImplicitOdpMr_AnyBufferAndPrefetch) {
  make_pair();
  ibv_mr* all = reg_mr(pd_, nullptr, SIZE_MAX, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(reg_mr(pd_, nullptr, SIZE_MAX, 0,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND),
            nullptr);
  std::vector<uint8_t> anywhere(8192, 0x6b);
  const uint64_t src = reinterpret_cast<uintptr_t>(anywhere.data());
  ibv_sge sge{src, 8192, all->lkey};
  EXPECT_EQ(advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1),
            0);
  EXPECT_EQ(advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &sge, 1), 0);
  EXPECT_EQ(advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &sge, 1), EINVAL);  // bad flag
  EXPECT_EQ(advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0), EINVAL);
  ibv_sge outside{at(0, (1 << 20) - 8), 64, mr_[0]->lkey};  // past the end of mr_[0]
  EXPECT_EQ(advise_mr(pd_, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &outside, 1), EINVAL);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, src, 8192, all->lkey, at(1), mr_[1]->rkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::count(buf_[1].begin(), buf_[1].begin() + 8192, 0x6b), 8192);
  EXPECT_EQ(dereg_mr(all), 0);
}

// A parent domain stands for its protection domain: an MR registered on it serves a QP made
// on it and the fixture's QPs (same protection domain); the protection domain cannot go
// while the parent domain lives; thread domains and a parent of a parent are refused.
TEST_F(Verbs, ParentDomain_ItsMrsAndQpsAreInTheProtectionDomain) {
  verbs_context* v = vctx();
  ASSERT_NE(v->alloc_parent_domain, nullptr);
  ibv_parent_domain_init_attr a{};
  a.pd = pd_;
  ibv_pd* parent = v->alloc_parent_domain(ctx_, &a);
  ASSERT_NE(parent, nullptr);
  EXPECT_EQ(parent->handle, pd_->handle);
  ibv_parent_domain_init_attr nested{};
  nested.pd = parent;
  EXPECT_EQ(v->alloc_parent_domain(ctx_, &nested), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_parent_domain_init_attr with_td = a;
  with_td.td = reinterpret_cast<ibv_td*>(&with_td);
  EXPECT_EQ(v->alloc_parent_domain(ctx_, &with_td), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  std::vector<uint8_t> mem(4096, 0x71);
  ibv_mr* mr = reg_mr(parent, mem.data(), mem.size(), reinterpret_cast<uintptr_t>(mem.data()),
                      IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq_[0];
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ibv_qp* q = create_qp(parent, &qa);
  ASSERT_NE(q, nullptr);
  pair_with(q);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, reinterpret_cast<uintptr_t>(mem.data()), 256, mr->lkey,
                 at(1), mr_[1]->rkey),
            0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::count(buf_[1].begin(), buf_[1].begin() + 256, 0x71), 256);
  EXPECT_EQ(dealloc_pd(parent), EBUSY);  // its MR and QP
  EXPECT_EQ(destroy_qp(qp_[0]), 0);
  qp_[0] = nullptr;
  EXPECT_EQ(dereg_mr(mr), 0);
  EXPECT_EQ(dealloc_pd(parent), 0);
}

// UC QPs: SEND and RDMA WRITE (with immediate) as on RC (carried reliably by MRC); RDMA READ
// refused at post (ibv_post_send and ibv_wr_rdma_read) with EINVAL; query says UC.
TEST_F(Verbs, UcQp_SendAndWriteNoRead) {
  ibv_qp* uc[2];
  for (int i = 0; i < 2; ++i) {
    ibv_qp_init_attr_ex a{};
    a.send_cq = a.recv_cq = cq_[i];
    a.qp_type = IBV_QPT_UC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = pd_;
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
    uc[i] = create_qp_ex(ctx_, &a);
    ASSERT_NE(uc[i], nullptr);
    a.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ;
    EXPECT_EQ(create_qp_ex(ctx_, &a), nullptr) << "READ is no UC operation";
  }
  qp_ = {uc[0], uc[1]};
  ASSERT_EQ(to_init(qp_[0]), 0);
  ASSERT_EQ(to_init(qp_[1]), 0);
  ASSERT_EQ(connect(qp_[0], qp_[1]->qp_num), 0);
  ASSERT_EQ(connect(qp_[1], qp_[0]->qp_num), 0);
  ibv_qp_attr qa{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(query_qp(qp_[0], &qa, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(init.qp_type, IBV_QPT_UC);
  std::memset(buf_[0].data(), 0x3e, 4096);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 512, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::count(buf_[1].begin(), buf_[1].begin() + 512, 0x3e), 512);
  ASSERT_EQ(post_r(qp_[1], at(1, 8192), 64, mr_[1]->lkey), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_SEND, at(0), 64, mr_[0]->lkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(wait_wc(cq_[1]).opcode, IBV_WC_RECV);
  EXPECT_EQ(post(qp_[0], IBV_WR_RDMA_READ, at(0), 64, mr_[0]->lkey, at(1), mr_[1]->rkey), EINVAL);
  ibv_qp_ex* x = qp_to_qp_ex(qp_[0]);
  x->wr_start(x);
  x->wr_rdma_read(x, mr_[1]->rkey, at(1));
  x->wr_set_sge(x, mr_[0]->lkey, at(0), 64);
  EXPECT_EQ(x->wr_complete(x), EINVAL);
}

// An SRQ serves two RC QPs: each SEND lands in the next receive posted to it, whichever QP it
// arrives on; modify_srq arms the limit and IBV_EVENT_SRQ_LIMIT_REACHED comes once (query_srq
// then says 0); resizing is refused; destroy_srq is EBUSY while a QP uses it; post_recv on
// the QPs themselves is refused.
TEST_F(Verbs, Srq_SharedByTwoQpsLimitEvent) {
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  ibv_srq* srq = create_srq(pd_, &sa);
  ASSERT_NE(srq, nullptr);
  for (uint64_t i = 0; i < 4; ++i) {
    ibv_sge sge{at(1, 4096 * (i + 1)), 64, mr_[1]->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 100 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);  // the inline verb: ctx->ops
  }
  ibv_srq_attr lim{};
  lim.srq_limit = 3;
  ASSERT_EQ(modify_srq(srq, &lim, IBV_SRQ_LIMIT), 0);
  lim.max_wr = 32;
  EXPECT_EQ(modify_srq(srq, &lim, IBV_SRQ_MAX_WR), EINVAL);
  // Two side-1 QPs on the SRQ, each connected to a side-0 QP.
  ibv_qp* on_srq[2];
  ibv_qp* senders[2];
  for (int k = 0; k < 2; ++k) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_[1];
    a.qp_type = IBV_QPT_RC;
    a.srq = srq;
    a.cap.max_send_wr = 4;
    a.cap.max_send_sge = 1;
    on_srq[k] = create_qp(pd_, &a);
    ASSERT_NE(on_srq[k], nullptr);
    senders[k] = make_qp(0);
    ASSERT_EQ(to_init(on_srq[k]), 0);
    ASSERT_EQ(to_init(senders[k]), 0);
    ASSERT_EQ(connect(senders[k], on_srq[k]->qp_num), 0);
    ASSERT_EQ(connect(on_srq[k], senders[k]->qp_num), 0);
  }
  EXPECT_EQ(post_r(on_srq[0], at(1), 64, mr_[1]->lkey), EINVAL);
  EXPECT_EQ(destroy_srq(srq), EBUSY);
  std::memset(buf_[0].data(), 0x41, 64);
  std::memset(buf_[0].data() + 64, 0x42, 64);
  ASSERT_EQ(post(senders[1], IBV_WR_SEND, at(0), 64, mr_[0]->lkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  ibv_wc w = wait_wc(cq_[1]);
  EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_EQ(w.wr_id, 100u);
  EXPECT_EQ(w.qp_num, on_srq[1]->qp_num);
  ASSERT_EQ(post(senders[0], IBV_WR_SEND, at(0, 64), 64, mr_[0]->lkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_SUCCESS);
  w = wait_wc(cq_[1]);
  EXPECT_EQ(w.wr_id, 101u);
  EXPECT_EQ(w.qp_num, on_srq[0]->qp_num);
  EXPECT_EQ(buf_[1][4096], 0x41);
  EXPECT_EQ(buf_[1][8192], 0x42);
  // 2 receives left < 3: the limit event, once.
  ibv_async_event ev{};
  ASSERT_EQ(get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  ack_async_event(&ev);
  ibv_srq_attr q{};
  ASSERT_EQ(query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u);
  EXPECT_EQ(q.max_wr, 16u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(destroy_qp(on_srq[k]), 0);
    EXPECT_EQ(destroy_qp(senders[k]), 0);
  }
  EXPECT_EQ(destroy_srq(srq), 0);
}

TEST_F(Verbs, PollCq_MoreThan64AtOnce_ShortCountMeansEmpty) {
  ASSERT_NO_FATAL_FAILURE(pair_with(make_qp(0, 128)));
  ASSERT_EQ(post_r(qp_[1], at(1, 1 << 19), 64, mr_[1]->lkey), 0);
  for (int i = 0; i < 100; ++i) {  // the last with an immediate, which the target sees
    ASSERT_EQ(post(qp_[0], i < 99 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM, at(0), 64,
                   mr_[0]->lkey, at(1), mr_[1]->rkey),
              0);
  }
  // Once the last WRITE has landed (completions leave in posting order), give its ACK a
  // moment: then all 100 are there.
  ASSERT_EQ(wait_wc(cq_[1]).status, IBV_WC_SUCCESS);
  std::this_thread::sleep_for(200ms);
  ibv_wc wc[128];
  const int got = poll_cq(cq_[0], 128, wc);
  ASSERT_EQ(got, 100) << "one call must return every completion there is (up to n)";
  for (int i = 0; i < got; ++i) EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
  EXPECT_EQ(poll_cq(cq_[0], 128, wc), 0);
}

TEST_F(Verbs, CqEx_CompletionsLeftAfterEndPollWakeTheChannel) {
  ibv_comp_channel* ch = create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 64;
  ca.channel = ch;
  ibv_cq_ex* cqx = create_cq_ex(ctx_, &ca);
  ASSERT_NE(cqx, nullptr);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  ASSERT_NO_FATAL_FAILURE(pair_with(qp_completing_on(cq)));
  ASSERT_EQ(post_r(qp_[1], at(1, 4096), 64, mr_[1]->lkey), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 64, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE_WITH_IMM, at(0), 64, mr_[0]->lkey, at(1), mr_[1]->rkey),
            0);
  ASSERT_EQ(wait_wc(cq_[1]).status, IBV_WC_SUCCESS);  // both landed
  std::this_thread::sleep_for(200ms);                 // and their ACKs came back
  // Read one through the cursor and stop: the other is still the CQ's.
  ibv_poll_cq_attr pa{};
  const auto end = std::chrono::steady_clock::now() + 5s;
  int r = ENOENT;
  while (r != 0 && std::chrono::steady_clock::now() < end) r = ibv_start_poll(cqx, &pa);
  ASSERT_EQ(r, 0);
  ibv_end_poll(cqx);
  // Armed now, the channel fires at once for it, and ibv_poll_cq returns it.
  ASSERT_EQ(req_notify_cq(cq, 0), 0);
  pollfd p{ch->fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 1000), 1) << "a completion waits, and the armed channel slept";
  ibv_wc wc{};
  EXPECT_EQ(poll_cq(cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ibv_cq* got = nullptr;
  void* cq_ctx = nullptr;
  if (p.revents & POLLIN) {
    ASSERT_EQ(get_cq_event(ch, &got, &cq_ctx), 0);
    ack_cq_events(cq, 1);
  }
  EXPECT_EQ(destroy_qp(qp_[0]), 0);
  qp_[0] = nullptr;
  EXPECT_EQ(destroy_cq(cq), 0);
  EXPECT_EQ(destroy_comp_channel(ch), 0);
}

TEST_F(Verbs, CompletionChannel_RealFdWakesOnCompletion) {
  ibv_comp_channel* ch = create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ASSERT_GE(ch->fd, 0);
  ibv_cq* cq = create_cq(ctx_, 16, this, ch, 0);
  ASSERT_NE(cq, nullptr);
  ASSERT_NO_FATAL_FAILURE(pair_with(qp_completing_on(cq)));
  ASSERT_EQ(req_notify_cq(cq, 0), 0);
  pollfd p{ch->fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "woke with nothing completed";
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 100000, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "no wakeup within 5 s";
  ibv_cq* got = nullptr;
  void* cq_ctx = nullptr;
  ASSERT_EQ(get_cq_event(ch, &got, &cq_ctx), 0);
  EXPECT_EQ(got, cq);
  EXPECT_EQ(cq_ctx, this);
  ack_cq_events(cq, 1);
  ibv_wc wc{};
  ASSERT_EQ(poll_cq(cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(destroy_comp_channel(ch), EBUSY) << "a CQ still uses it";
  EXPECT_EQ(destroy_qp(qp_[0]), 0);
  qp_[0] = nullptr;
  EXPECT_EQ(destroy_cq(cq), 0);
  EXPECT_EQ(destroy_comp_channel(ch), 0);
}

// Progress never depends on the application polling (issue 17): each way an app waits for
// its peer carries a ping-pong between two app threads, on the device's defaults (the progress
// thread receives and answers; poller_progress off). Run under TSan (tsan preset).
constexpr int kPingPongRounds = 100;

// Asleep on a completion channel: the app calls poll_cq only after the channel woke it.
TEST_F(Verbs, Progress_AppSleepingOnCompletionChannel_PingPongCompletes) {
  ASSERT_NO_FATAL_FAILURE(cqs_on_channels());
  std::atomic<int> sleeps{0};
  send_ping_pong(kPingPongRounds, [&](int i, ibv_wc* wc) {
    ibv_comp_channel* ch = channels_[static_cast<size_t>(i)];
    for (;;) {
      if (poll_cq(cq_[i], 1, wc) == 1) return true;  // what the last wakeup brought
      if (req_notify_cq(cq_[i], 0) != 0) return false;
      if (poll_cq(cq_[i], 1, wc) == 1) return true;  // what came before the arming
      pollfd p{ch->fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1) return false;  // asleep until the channel wakes it
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if (get_cq_event(ch, &ev_cq, &ev_ctx) != 0 || ev_cq != cq_[i]) return false;
      ack_cq_events(ev_cq, 1);
      sleeps.fetch_add(1, std::memory_order_relaxed);
    }
  });
  EXPECT_GT(sleeps.load(), 0) << "no thread ever slept: the test did not test sleeping";
}

// Polling the CQ without pause, as perftest and NCCL's proxy do.
TEST_F(Verbs, Progress_AppPollingCq_PingPongCompletes) {
  send_ping_pong(kPingPongRounds, [&](int i, ibv_wc* wc) {
    *wc = wait_wc(cq_[i]);
    return wc->status != IBV_WC_GENERAL_ERR;
  });
}

// An app spinning on memory, as ib_write_lat waits for the peer's WRITE: a plain read of
// memory the device writes, with no call into it (not instrumented: a NIC's DMA).
__attribute__((no_sanitize("thread"), noinline)) uint64_t spin_read(const uint8_t* p) {
  uint64_t v = 0;
  for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<const volatile uint8_t*>(p)[b];
  return v;
}

// Spinning on memory, never polling the CQ: unsignalled WRITEs, more rounds than the send
// queue holds (64), so the ACKs must retire them with no poll_cq either. (On a loaded 2-core
// machine a round here takes ms, not the polling tests' 0.1-0.2 ms: spinners without a
// syscall spend their share of the CPU; the same spin with a sched_yield runs in about 0.3 ms.)
TEST_F(Verbs, Progress_AppSpinningOnMemory_WritePingPongCompletes) {
  ASSERT_NO_FATAL_FAILURE(make_pair());
  constexpr int kRounds = kPingPongRounds;  // > 64
  auto side = [&](int i) {
    for (int r = 0; r < kRounds; ++r) {
      // Side 0 writes 2r + 1 into side 1's memory; side 1 answers 2r + 2.
      if (i == 1) {
        const uint64_t want = 2 * static_cast<uint64_t>(r) + 1;
        const auto end = std::chrono::steady_clock::now() + 5s;
        while (spin_read(buf_[1].data()) != want)
          if (std::chrono::steady_clock::now() > end)
            return ADD_FAILURE() << "side 1: WRITE " << want << " never landed";
      }
      const uint64_t mine = 2 * static_cast<uint64_t>(r) + 1 + static_cast<uint64_t>(i);
      std::memcpy(buf_[i].data() + 4096, &mine, 8);
      // Inline, unsignalled: nothing to poll for.
      if (post(qp_[i], IBV_WR_RDMA_WRITE, at(i, 4096), 8, mr_[i]->lkey, at(1 - i), mr_[1 - i]->rkey,
               IBV_SEND_INLINE) != 0)
        return ADD_FAILURE() << "side " << i << ": post_send refused at round " << r
                             << " (send queue full: unsignalled WRITEs never retired?)";
      if (i == 0) {
        const auto end = std::chrono::steady_clock::now() + 5s;
        while (spin_read(buf_[0].data()) != mine + 1)
          if (std::chrono::steady_clock::now() > end)
            return ADD_FAILURE() << "side 0: WRITE " << mine + 1 << " never landed";
      }
    }
  };
  std::thread t1(side, 1);
  side(0);
  t1.join();
  ibv_wc wc{};
  EXPECT_EQ(poll_cq(cq_[0], 1, &wc), 0) << "an unsignalled WRITE completed";
  EXPECT_EQ(poll_cq(cq_[1], 1, &wc), 0);
}

TEST_F(Verbs, QpEx_WrApi_And_CqEx) {
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 64;
  ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM;
  ibv_cq_ex* cqx = create_cq_ex(ctx_, &ca);
  ASSERT_NE(cqx, nullptr);
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cqx);
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.pd = pd_;
  qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
  ASSERT_NO_FATAL_FAILURE(pair_with(create_qp_ex(ctx_, &qa)));
  std::memcpy(buf_[0].data(), "abcdefgh", 8);
  ASSERT_EQ(post_r(qp_[1], at(1, 4096), 64, mr_[1]->lkey), 0);
  ibv_qp_ex* x = qp_to_qp_ex(qp_[0]);
  ibv_wr_start(x);
  x->wr_id = 1;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, mr_[1]->rkey, at(1));
  ibv_wr_set_sge(x, mr_[0]->lkey, at(0), 8);
  x->wr_id = 2;
  ibv_wr_send(x);
  ibv_wr_set_inline_data(x, const_cast<char*>("inline!"), 8);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  // Two send completions via the CQ_ex cursor.
  std::vector<uint64_t> ids;
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (ids.size() < 2 && std::chrono::steady_clock::now() < end) {
    ibv_poll_cq_attr pa{};
    if (ibv_start_poll(cqx, &pa) != 0) continue;
    do {
      EXPECT_EQ(cqx->status, IBV_WC_SUCCESS);
      ids.push_back(cqx->wr_id);
    } while (ibv_next_poll(cqx) == 0);
    ibv_end_poll(cqx);
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(std::memcmp(buf_[1].data(), "abcdefgh", 8), 0);
  EXPECT_EQ(wait_wc(cq_[1]).byte_len, 8u);
  EXPECT_STREQ(reinterpret_cast<const char*>(buf_[1].data() + 4096), "inline!");
  // An unsupported wr_* op fails the batch at wr_complete, no crash.
  ibv_wr_start(x);
  ibv_wr_send_tso(x, nullptr, 0, 0);  // raw packet QPs only
  EXPECT_EQ(ibv_wr_complete(x), EOPNOTSUPP);
  EXPECT_EQ(destroy_qp(qp_[0]), 0);
  qp_[0] = nullptr;
  EXPECT_EQ(destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
}

// What a verbs program leaves unset at RTR is the connection policy every face uses (the
// engine's QpAttr defaults), except that a responder retries forever (verbs: a responder never
// fails for its requester's silence); what it sets at RTS is its own (perftest: timeout 14,
// retry_cnt 7, linear only).
TEST_F(Verbs, ModifyQp_UnsetAtRtrIsTheConnectionPolicy) {
  qp_[0] = make_qp(0);
  ASSERT_EQ(to_init(qp_[0]), 0);
  ASSERT_EQ(connect(qp_[0], 0xabcdef, /*rts=*/false), 0);
  auto engine_attr = [&] {
    return qp_of(qp_[0])->ctx->dev->driver->peek_engine(
        [&](engine::Engine& e) { return e.query_qp(qp_[0]->qp_num).value(); });
  };
  const engine::QpAttr policy;
  engine::QpAttr a = engine_attr();
  EXPECT_EQ(a.timeout, policy.timeout);
  EXPECT_EQ(a.retry_cnt_linear, policy.retry_cnt_linear);
  EXPECT_EQ(a.retry_cnt_exp, engine::kRetryForever);
  EXPECT_EQ(a.max_psn_range, policy.max_psn_range);
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;  // 4.096 us x 2^14 = 1.024 us x 2^16
  s.retry_cnt = 3;
  ASSERT_EQ(modify_qp(qp_[0], &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT), 0);
  a = engine_attr();
  EXPECT_EQ(a.timeout, 16);
  EXPECT_EQ(a.retry_cnt_linear, 3);
  EXPECT_EQ(a.retry_cnt_exp, 0);
}

TEST_F(Verbs, DeadPeer_RetryExceeded_AndQpFatalAsyncEvent) {
  qp_[0] = make_qp(0);
  ASSERT_EQ(to_init(qp_[0]), 0);
  ASSERT_EQ(connect(qp_[0], 0xabcdef), 0);  // no such QP: nothing ever answers
  ibv_qp_attr a{};
  a.timeout = 8;  // ~1 ms
  a.retry_cnt = 2;
  ASSERT_EQ(modify_qp(qp_[0], &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT), 0);
  ASSERT_EQ(post(qp_[0], IBV_WR_RDMA_WRITE, at(0), 64, mr_[0]->lkey, at(1), mr_[1]->rkey), 0);
  EXPECT_EQ(wait_wc(cq_[0]).status, IBV_WC_RETRY_EXC_ERR);
  pollfd p{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  ibv_async_event ev{};
  ASSERT_EQ(get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ev.element.qp, qp_[0]);
  ack_async_event(&ev);
}

// What query_qp says of a QP and the engine's counters of it, as bytes, for before/after checks.
std::string qp_snapshot(ibv_qp* q) {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  EXPECT_EQ(query_qp(q, &a, ~0, &init), 0);
  std::string out(reinterpret_cast<const char*>(&a), sizeof a);
  out.append(reinterpret_cast<const char*>(&init), sizeof init);
  qp_of(q)->ctx->dev->driver->peek_engine([&](engine::Engine& e) {
    out.append(reinterpret_cast<const char*>(e.qp_stats(q->qp_num)), sizeof(engine::QpStats));
    const engine::QpAttr ea = e.query_qp(q->qp_num).value();
    for (uint64_t v : {uint64_t(ea.state), uint64_t(ea.mtu), uint64_t(ea.timeout),
                       uint64_t(ea.retry_cnt_linear), uint64_t(ea.rnr_retry), uint64_t(ea.access),
                       uint64_t(ea.peer), uint64_t(ea.dest_qpn), uint64_t(ea.paths.size())})
      out.append(reinterpret_cast<const char*>(&v), sizeof v);
    return 0;
  });
  return out;
}

// A modify refused for its last field changes nothing (the verbs attributes, the engine's QP,
// its counters), and the line on stderr names the field: one the verbs device checks
// (path_mtu, after the others converted) and one the engine checks (the transition).
TEST_F(Verbs, ModifyQp_RefusedForLastFieldChangesNothing) {
  pair_with(make_qp(0));
  const std::string before = qp_snapshot(qp_[0]);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 20;
  a.retry_cnt = 3;
  a.rnr_retry = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  const int bogus = 1000;
  std::memcpy(&a.path_mtu, &bogus, sizeof bogus);
  const int mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                   IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MTU;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(modify_qp(qp_[0], &a, mask), EINVAL);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("path_mtu"), std::string::npos);
  EXPECT_EQ(qp_snapshot(qp_[0]), before);
  // The engine refuses RTS -> INIT (verbs has no such transition): nothing of the rest lands.
  a.qp_state = IBV_QPS_INIT;
  a.path_mtu = IBV_MTU_1024;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(modify_qp(qp_[0], &a, mask), EINVAL);
  const std::string line = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(line.find("(RTS -> INIT): state"), std::string::npos) << line;
  EXPECT_EQ(qp_snapshot(qp_[0]), before);
  // The same attributes in a good call all land.
  a.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(modify_qp(qp_[0], &a, mask), 0);
  EXPECT_NE(qp_snapshot(qp_[0]), before);
  ibv_qp_attr got{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(query_qp(qp_[0], &got, ~0, &init), 0);
  EXPECT_EQ(got.timeout, 20);
  EXPECT_EQ(got.path_mtu, IBV_MTU_1024);
}

// Posts one atomic on `q`: the value before lands at local (8 bytes of lkey's MR).
int post_atomic(ibv_qp* q, ibv_wr_opcode op, uint64_t local, uint32_t lkey, uint64_t remote,
                uint32_t rkey, uint64_t compare_add, uint64_t swap = 0, uint32_t len = 8) {
  ibv_sge sge{local, len, lkey};
  ibv_send_wr wr{};
  wr.wr_id = 11;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = remote;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  ibv_send_wr* bad = nullptr;
  return post_send(q, &wr, &bad);
}

TEST_F(Verbs, Atomics_FetchAddCmpSwap_ValueBeforeComesBack) {
  ibv_device_attr d{};
  ASSERT_EQ(query_device(ctx_, &d), 0);
  EXPECT_EQ(d.atomic_cap, IBV_ATOMIC_GLOB);
  qp_access_ |= IBV_ACCESS_REMOTE_ATOMIC;
  make_pair();
  ibv_mr* target = reg_mr(pd_, buf_[1].data() + 8192, 64, at(1, 8192),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  ASSERT_NE(target, nullptr);
  uint64_t word = 41;
  std::memcpy(buf_[1].data() + 8192, &word, 8);
  auto value = [&](int side, size_t off) {
    uint64_t v;
    std::memcpy(&v, buf_[side].data() + off, 8);
    return v;
  };
  ASSERT_EQ(post_atomic(qp_[0], IBV_WR_ATOMIC_FETCH_AND_ADD, at(0), mr_[0]->lkey, at(1, 8192),
                        target->rkey, 1),
            0);
  ibv_wc wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(value(0, 0), 41u);
  EXPECT_EQ(value(1, 8192), 42u);
  ASSERT_EQ(post_atomic(qp_[0], IBV_WR_ATOMIC_CMP_AND_SWP, at(0, 8), mr_[0]->lkey, at(1, 8192),
                        target->rkey, 42, 0x1234567890abcdefull),
            0);
  wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(value(0, 8), 42u);
  EXPECT_EQ(value(1, 8192), 0x1234567890abcdefull);
  // The extended API, a compare that fails: the word stays, its value comes back.
  ibv_qp_ex* x = qp_to_qp_ex(qp_[0]);
  ibv_wr_start(x);
  x->wr_id = 12;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_cmp_swp(x, target->rkey, at(1, 8192), 1, 2);
  ibv_wr_set_sge(x, mr_[0]->lkey, at(0, 16), 8);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(value(0, 16), 0x1234567890abcdefull);
  EXPECT_EQ(value(1, 8192), 0x1234567890abcdefull);

  // Refused at post, with a line: misaligned, not 8 bytes, inline.
  EXPECT_EQ(post_atomic(qp_[0], IBV_WR_ATOMIC_FETCH_AND_ADD, at(0), mr_[0]->lkey, at(1, 8196),
                        target->rkey, 1),
            EINVAL);
  EXPECT_EQ(post_atomic(qp_[0], IBV_WR_ATOMIC_FETCH_AND_ADD, at(0), mr_[0]->lkey, at(1, 8192),
                        target->rkey, 1, 0, 4),
            EINVAL);
  // An MR without remote atomic access: REM_ACCESS_ERR, the word untouched.
  ASSERT_EQ(post_atomic(qp_[0], IBV_WR_ATOMIC_FETCH_AND_ADD, at(0, 24), mr_[0]->lkey, at(1, 0),
                        mr_[1]->rkey, 1),
            0);
  wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(value(1, 0), 0u);
  EXPECT_EQ(dereg_mr(target), 0);
}

// Atomic write: ibv_wr_atomic_write's 8 bytes and IBV_WR_ATOMIC_WRITE's 8-byte SGE land at
// the aligned word as given (remote write access is what it needs); another length or a
// misaligned address is EINVAL at post.
TEST_F(Verbs, AtomicWrite_EightBytesLandAsGiven) {
  make_pair();  // qp_access_flags: REMOTE_WRITE | REMOTE_READ
  const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ibv_qp_ex* x = qp_to_qp_ex(qp_[0]);
  ibv_wr_start(x);
  x->wr_id = 21;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(x, mr_[1]->rkey, at(1, 64), bytes);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  ibv_wc wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(std::memcmp(buf_[1].data() + 64, bytes, 8), 0);
  std::memcpy(buf_[0].data() + 128, "8 bytes", 8);
  ibv_sge sge{at(0, 128), 8, mr_[0]->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 22;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = at(1, 72);
  wr.wr.rdma.rkey = mr_[1]->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(post_send(qp_[0], &wr, &bad), 0);
  wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(reinterpret_cast<char*>(buf_[1].data() + 72), "8 bytes");
  wr.wr.rdma.remote_addr = at(1, 76);
  EXPECT_EQ(post_send(qp_[0], &wr, &bad), EINVAL);
  wr.wr.rdma.remote_addr = at(1, 72);
  sge.length = 4;
  EXPECT_EQ(post_send(qp_[0], &wr, &bad), EINVAL);
}

TEST_F(Verbs, Atomics_QpWithoutRemoteAtomic_RemAccessErr) {
  make_pair();  // qp_access_flags: REMOTE_WRITE | REMOTE_READ
  ibv_mr* target = reg_mr(pd_, buf_[1].data() + 8192, 64, at(1, 8192),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  ASSERT_NE(target, nullptr);
  std::memset(buf_[1].data() + 8192, 0, 8);
  ASSERT_EQ(post_atomic(qp_[0], IBV_WR_ATOMIC_FETCH_AND_ADD, at(0), mr_[0]->lkey, at(1, 8192),
                        target->rkey, 1),
            0);
  const ibv_wc wc = wait_wc(cq_[0]);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(buf_[1][8192], 0);
  EXPECT_EQ(dereg_mr(target), 0);
}

TEST(VerbsToken, DirectionsDiffer_NeverZero) {
  ibv_gid a{}, b{};
  a.raw[15] = 1;
  b.raw[15] = 2;
  EXPECT_NE(token(a, 1, b, 2), token(b, 2, a, 1));
  EXPECT_EQ(token(a, 1, b, 2), token(a, 1, b, 2));
  EXPECT_NE(token(a, 1, b, 2), token(a, 1, b, 3));
  EXPECT_NE(token(a, 1, b, 2), 0u);
}

}  // namespace
}  // namespace mrc::verbs
