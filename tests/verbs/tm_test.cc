// Tag matching of the software verbs device (libmrc/src/verbs/tm.cc, engine tm.cc), in one
// process over two loopback planes: a tag-matching SRQ, ibv_post_srq_ops, and every TM flow
// (eager match, unexpected with phase sync, NO_TAG, a deleted tag, rendezvous) checked byte for
// byte through a CQ_ex read as ibv_wc_read_tm_info reads it.
#include <arpa/inet.h>
#include <endian.h>
#include <gtest/gtest.h>
#include <infiniband/tm_types.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "loopback_env.h"
#include "mrc/verbs/verbs.h"
#include "open_device.h"
#include "to_rts.h"

namespace mrc::verbs {
namespace {

using namespace std::chrono_literals;

const bool env_set = testing::set_loopback_env();

// One completion of a CQ_ex, every field the TM tests look at.
struct Cqe {
  bool got = false;
  uint64_t wr_id = 0;
  ibv_wc_status status = IBV_WC_GENERAL_ERR;
  ibv_wc_opcode opcode = IBV_WC_SEND;
  unsigned flags = 0;
  uint32_t byte_len = 0;
  ibv_wc_tm_info tm{};
};

// The next completion of `cq` within `limit` (got false if none).
Cqe next(ibv_cq_ex* cq, std::chrono::milliseconds limit = 5s) {
  Cqe c;
  ibv_poll_cq_attr pa{};
  const auto end = std::chrono::steady_clock::now() + limit;
  int r = ENOENT;
  while (r == ENOENT && std::chrono::steady_clock::now() < end) r = ibv_start_poll(cq, &pa);
  if (r != 0) return c;
  c.got = true;
  c.wr_id = cq->wr_id;
  c.status = cq->status;
  c.opcode = ibv_wc_read_opcode(cq);
  c.flags = ibv_wc_read_wc_flags(cq);
  c.byte_len = ibv_wc_read_byte_len(cq);
  ibv_wc_read_tm_info(cq, &c.tm);
  ibv_end_poll(cq);
  return c;
}

using testing::to_rts;

// A requester (plain RC QP, its own receive queue) and a responder on a tag-matching SRQ; both
// CQs are CQ_ex with IBV_WC_EX_WITH_TM_INFO. Buffers: the requester's `out` (what it sends or
// lets the responder READ), the responder's `tagbuf` (tagged buffers) and `plain` (plain SRQ
// receives, 4 KiB each).
class TagMatching : public ::testing::Test {
 protected:
  static constexpr size_t kPlainSize = 4096;

  void SetUp() override {
    ASSERT_TRUE(env_set);
    ctx_ = testing::open_the_device();
    ASSERT_NE(ctx_, nullptr);
    pd_ = alloc_pd(ctx_);
    out_.assign(1 << 16, 0);
    tagbuf_.assign(1 << 16, 0);
    plain_.assign(16 * kPlainSize, 0);
    const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    for (auto* v : {&out_, &tagbuf_, &plain_})
      mrs_.push_back(
          reg_mr(pd_, v->data(), v->size(), reinterpret_cast<uintptr_t>(v->data()), acc));
    for (ibv_mr* m : mrs_) ASSERT_NE(m, nullptr);
    ibv_cq_init_attr_ex ca{};
    ca.cqe = 256;
    ca.wc_flags = static_cast<uint64_t>(IBV_WC_STANDARD_FLAGS) | IBV_WC_EX_WITH_TM_INFO;
    for (auto** c : {&ccq_, &scq_}) {
      *c = create_cq_ex(ctx_, &ca);
      ASSERT_NE(*c, nullptr);
    }
    ibv_device_attr_ex da{};
    ASSERT_EQ(query_device_ex(ctx_, nullptr, &da, sizeof da), 0);
    caps_ = da.tm_caps;
    ibv_srq_init_attr_ex sa{};
    sa.attr.max_wr = 64;
    sa.attr.max_sge = 1;
    sa.comp_mask =
        IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
    sa.srq_type = IBV_SRQT_TM;
    sa.pd = pd_;
    sa.cq = ibv_cq_ex_to_cq(scq_);
    sa.tm_cap.max_num_tags = 4;
    sa.tm_cap.max_ops = 8;
    srq_ = create_srq_ex(ctx_, &sa);
    ASSERT_NE(srq_, nullptr);
    ibv_qp_init_attr ca2{};
    ca2.send_cq = ca2.recv_cq = ibv_cq_ex_to_cq(ccq_);
    ca2.qp_type = IBV_QPT_RC;
    ca2.cap.max_send_wr = ca2.cap.max_recv_wr = 16;
    ca2.cap.max_send_sge = ca2.cap.max_recv_sge = 1;
    cqp_ = create_qp(pd_, &ca2);
    ibv_qp_init_attr sa2{};
    sa2.send_cq = sa2.recv_cq = ibv_cq_ex_to_cq(scq_);
    sa2.qp_type = IBV_QPT_RC;
    sa2.srq = srq_;
    sa2.sq_sig_all = 1;  // the receiver's own READ and FIN still complete nothing
    sqp_ = create_qp(pd_, &sa2);
    ASSERT_TRUE(cqp_ && sqp_);
    ASSERT_EQ(to_rts(ctx_, cqp_, sqp_->qp_num), 0);
    ASSERT_EQ(to_rts(ctx_, sqp_, cqp_->qp_num), 0);
    for (uint64_t i = 0; i < 8; ++i) ASSERT_EQ(post_plain(i), 0);
  }
  void TearDown() override {
    int bad = 0;  // calls that failed (gtest's EXPECT_* cannot follow a bare `if`)
    bad += cqp_ && destroy_qp(cqp_) != 0;
    bad += sqp_ && destroy_qp(sqp_) != 0;
    bad += srq_ && destroy_srq(srq_) != 0;
    for (auto* c : {ccq_, scq_}) bad += c && destroy_cq(ibv_cq_ex_to_cq(c)) != 0;
    for (ibv_mr* m : mrs_) bad += m && dereg_mr(m) != 0;
    bad += pd_ && dealloc_pd(pd_) != 0;
    bad += ctx_ && close_device(ctx_) != 0;
    EXPECT_EQ(bad, 0);
  }

  // Plain SRQ receive `i`: plain_[i * 4 KiB ..), wr_id 1000 + i.
  int post_plain(uint64_t i) {
    ibv_sge g{reinterpret_cast<uintptr_t>(&plain_[i * kPlainSize]), kPlainSize, mrs_[2]->lkey};
    ibv_recv_wr w{};
    w.wr_id = 1000 + i;
    w.sg_list = &g;
    w.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_srq_recv(srq_, &w, &bad);
  }
  // TAG_ADD of `tag`/`mask` over tagbuf_[off, off + len), completions wr_id `id` (the op) and
  // recv_wr_id `id` + 100; *handle set. Returns post_srq_ops' result.
  int add(uint64_t tag, uint64_t mask, size_t off, uint32_t len, uint64_t id, uint32_t* handle,
          int flags = IBV_OPS_SIGNALED, uint32_t unexpected = 0) {
    ibv_sge g{reinterpret_cast<uintptr_t>(&tagbuf_[off]), len, mrs_[1]->lkey};
    ibv_ops_wr w{};
    w.wr_id = id;
    w.opcode = IBV_WR_TAG_ADD;
    w.flags = flags;
    w.tm.unexpected_cnt = unexpected;
    w.tm.add.recv_wr_id = id + 100;
    w.tm.add.sg_list = &g;
    w.tm.add.num_sge = 1;
    w.tm.add.tag = tag;
    w.tm.add.mask = mask;
    ibv_ops_wr* bad = nullptr;
    const int r = ibv_post_srq_ops(srq_, &w, &bad);  // the inline verb: the context's ops table
    if (handle) *handle = w.tm.handle;
    return r;
  }
  int op(ibv_ops_wr_opcode code, uint64_t id, uint32_t handle = 0, uint32_t unexpected = 0) {
    ibv_ops_wr w{};
    w.wr_id = id;
    w.opcode = code;
    w.flags = IBV_OPS_SIGNALED | (code == IBV_WR_TAG_SYNC ? IBV_OPS_TM_SYNC : 0);
    w.tm.handle = handle;
    w.tm.unexpected_cnt = unexpected;
    ibv_ops_wr* bad = nullptr;
    return ibv_post_srq_ops(srq_, &w, &bad);
  }
  // Writes a TM header (and a pattern after it: byte i = seed + i) at out_[0..len) and SENDs it.
  void send_tm(uint8_t tm_op, uint64_t tag, uint32_t app_ctx, uint32_t len, uint8_t seed) {
    for (uint32_t i = 0; i < len; ++i) out_[i] = static_cast<uint8_t>(seed + i);
    ibv_tmh h{};
    h.opcode = tm_op;
    h.app_ctx = htonl(app_ctx);
    h.tag = htobe64(tag);
    std::memcpy(out_.data(), &h, sizeof h);
    send(len);
  }
  void send(uint32_t len) {
    ibv_sge g{reinterpret_cast<uintptr_t>(out_.data()), len, mrs_[0]->lkey};
    ibv_send_wr w{};
    w.wr_id = 77;
    w.sg_list = &g;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(post_send(cqp_, &w, &bad), 0);
    const Cqe c = next(ccq_);
    ASSERT_TRUE(c.got);
    EXPECT_EQ(c.status, IBV_WC_SUCCESS);
    EXPECT_EQ(c.opcode, IBV_WC_SEND);
  }
  // Expects the next responder completion to be `opcode` with `flags`, wr_id `id` and tag.
  Cqe expect(ibv_wc_opcode opcode, uint64_t id, unsigned flags, uint64_t tag = 0) {
    const Cqe c = next(scq_);
    EXPECT_TRUE(c.got);
    EXPECT_EQ(c.status, IBV_WC_SUCCESS);
    EXPECT_EQ(c.opcode, opcode);
    EXPECT_EQ(c.wr_id, id);
    EXPECT_EQ(c.flags & (IBV_WC_TM_SYNC_REQ | IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID), flags);
    EXPECT_EQ(c.tm.tag, tag);
    return c;
  }

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::vector<uint8_t> out_, tagbuf_, plain_;
  std::vector<ibv_mr*> mrs_;
  ibv_cq_ex* ccq_ = nullptr;
  ibv_cq_ex* scq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  ibv_qp* cqp_ = nullptr;
  ibv_qp* sqp_ = nullptr;
  ibv_tm_caps caps_{};
};

TEST_F(TagMatching, Caps_AdvertisedAndSrqChecked) {
  EXPECT_TRUE(caps_.flags & IBV_TM_CAP_RC);
  EXPECT_EQ(caps_.max_num_tags, kTmMaxTags);
  EXPECT_GE(caps_.max_rndv_hdr_size, sizeof(ibv_tmh) + sizeof(ibv_rvh));
  EXPECT_EQ(caps_.max_sge, engine::kMaxSge);
  ibv_srq_init_attr_ex sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
  sa.srq_type = IBV_SRQT_TM;
  sa.pd = pd_;
  sa.cq = ibv_cq_ex_to_cq(scq_);
  EXPECT_EQ(create_srq_ex(ctx_, &sa), nullptr);  // no IBV_SRQ_INIT_ATTR_TM
  EXPECT_EQ(errno, EINVAL);
  sa.comp_mask |= IBV_SRQ_INIT_ATTR_TM;
  sa.tm_cap.max_num_tags = kTmMaxTags + 1;
  sa.tm_cap.max_ops = 1;
  EXPECT_EQ(create_srq_ex(ctx_, &sa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // Tag operations on a plain SRQ: EINVAL, the WR named.
  ibv_srq_init_attr pa{};
  pa.attr.max_wr = 4;
  pa.attr.max_sge = 1;
  ibv_srq* plain = create_srq(pd_, &pa);
  ASSERT_NE(plain, nullptr);
  ibv_ops_wr w{};
  w.opcode = IBV_WR_TAG_SYNC;
  ibv_ops_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_srq_ops(plain, &w, &bad), EINVAL);
  EXPECT_EQ(bad, &w);
  EXPECT_EQ(destroy_srq(plain), 0);
  // More tags than the SRQ holds (4): ENOMEM for the fifth.
  uint32_t h = 0;
  for (uint64_t t = 1; t <= 4; ++t) {
    ASSERT_EQ(add(t, ~0ull, 0, 64, t, &h), 0);
    expect(IBV_WC_TM_ADD, t, 0);
  }
  EXPECT_EQ(add(5, ~0ull, 0, 64, 5, &h), ENOMEM);
}

// Eager: the tag (under its mask) takes the message; the data lands in the tag's buffer
// without the 16-byte header, over several packets; the completion carries the tag's
// recv_wr_id, MATCH | DATA_VALID, the tag and the app context. Tags are used once.
TEST_F(TagMatching, Eager_MatchedIntoTheTagsBufferWithoutTheHeader) {
  uint32_t h1 = 0, h2 = 0;
  ASSERT_EQ(add(0x1001, 0xffff, 0, 8192, 1, &h1), 0);
  expect(IBV_WC_TM_ADD, 1, 0);
  ASSERT_EQ(add(0x2002, 0xffff, 8192, 8192, 2, &h2), 0);
  expect(IBV_WC_TM_ADD, 2, 0);
  EXPECT_NE(h1, h2);
  const uint32_t len = 5000;                                      // 5 packets at MTU 1024
  send_tm(IBV_TMH_EAGER, 0xabcd00002002ull, 0x55667788, len, 3);  // bits outside the mask differ
  const Cqe c =
      expect(IBV_WC_TM_RECV, 102, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 0xabcd00002002ull);
  EXPECT_EQ(c.tm.priv, 0x55667788u);
  EXPECT_EQ(c.byte_len, len - sizeof(ibv_tmh));
  EXPECT_EQ(std::memcmp(&tagbuf_[8192], &out_[sizeof(ibv_tmh)], len - sizeof(ibv_tmh)), 0);
  EXPECT_EQ(tagbuf_[8192 + len - sizeof(ibv_tmh)], 0);  // nothing past the data
  // Tag 0x2002 is used up: the same tag again is unexpected, whole, in the first plain receive.
  send_tm(IBV_TMH_EAGER, 0x2002, 1, 300, 9);
  expect(IBV_WC_TM_RECV, 1000, 0);
  EXPECT_EQ(std::memcmp(&plain_[0], out_.data(), 300), 0);
  EXPECT_EQ(op(IBV_WR_TAG_SYNC, 27, 0, 1), 0);
  expect(IBV_WC_TM_SYNC, 27, 0);
  send_tm(IBV_TMH_EAGER, 0x1001, 2, 100, 1);
  expect(IBV_WC_TM_RECV, 101, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 0x1001);
  EXPECT_EQ(std::memcmp(&tagbuf_[0], &out_[sizeof(ibv_tmh)], 100 - sizeof(ibv_tmh)), 0);
}

// A wrong tag is unexpected: the whole message (header too) in a plain receive, TM_RECV with
// no flags and no tag; the SRQ is out of sync until the app reports it: a tag added meanwhile
// completes with SYNC_REQ and does not match (the next message is unexpected too) until a
// TAG_SYNC with the count brings it in; then it matches.
TEST_F(TagMatching, Unexpected_PhaseSyncHoldsNewTagsUntilReported) {
  uint32_t h = 0;
  ASSERT_EQ(add(7, ~0ull, 0, 1024, 1, &h), 0);
  expect(IBV_WC_TM_ADD, 1, 0);
  send_tm(IBV_TMH_EAGER, 8, 0x1234, 200, 5);  // tag 8: none
  expect(IBV_WC_TM_RECV, 1000, 0);
  EXPECT_EQ(std::memcmp(&plain_[0], out_.data(), 200), 0);
  ASSERT_EQ(add(8, ~0ull, 1024, 1024, 2, &h), 0);  // out of sync: held
  expect(IBV_WC_TM_ADD, 2, IBV_WC_TM_SYNC_REQ);
  send_tm(IBV_TMH_EAGER, 8, 0, 200, 6);
  expect(IBV_WC_TM_RECV, 1001, 0);  // the held tag did not take it
  EXPECT_EQ(std::memcmp(&plain_[kPlainSize], out_.data(), 200), 0);
  EXPECT_EQ(op(IBV_WR_TAG_SYNC, 27, 0, 1), 0);  // one of two reported: still out of sync
  expect(IBV_WC_TM_SYNC, 27, IBV_WC_TM_SYNC_REQ);
  EXPECT_EQ(op(IBV_WR_TAG_SYNC, 28, 0, 2), 0);
  expect(IBV_WC_TM_SYNC, 28, 0);
  send_tm(IBV_TMH_EAGER, 8, 0, 200, 7);
  expect(IBV_WC_TM_RECV, 102, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 8);
  EXPECT_EQ(std::memcmp(&tagbuf_[1024], &out_[16], 184), 0);
  send_tm(IBV_TMH_EAGER, 7, 0, 64, 8);  // the tag added in sync matched all along
  expect(IBV_WC_TM_RECV, 101, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 7);
}

// NO_TAG: never matched, the whole message in a plain receive, TM_NO_TAG, not unexpected (a
// tag added next is in sync). A deleted tag matches nothing; deleting it again is TM_ERR.
TEST_F(TagMatching, NoTagAndDeletedTag) {
  uint32_t h = 0;
  ASSERT_EQ(add(5, ~0ull, 0, 1024, 1, &h), 0);
  expect(IBV_WC_TM_ADD, 1, 0);
  send_tm(IBV_TMH_NO_TAG, 5, 0, 128, 2);
  expect(IBV_WC_TM_NO_TAG, 1000, 0);
  EXPECT_EQ(std::memcmp(&plain_[0], out_.data(), 128), 0);
  EXPECT_EQ(op(IBV_WR_TAG_DEL, 3, h), 0);
  expect(IBV_WC_TM_DEL, 3, 0);
  EXPECT_EQ(op(IBV_WR_TAG_DEL, 4, h), 0);
  const Cqe e = next(scq_);
  EXPECT_EQ(e.status, IBV_WC_TM_ERR);
  EXPECT_EQ(e.wr_id, 4u);
  send_tm(IBV_TMH_EAGER, 5, 0, 128, 3);
  expect(IBV_WC_TM_RECV, 1001, 0);
  EXPECT_EQ(std::memcmp(&plain_[kPlainSize], out_.data(), 128), 0);
  EXPECT_EQ(std::count(tagbuf_.begin(), tagbuf_.begin() + 1024, 0), 1024);  // untouched
}

// Rendezvous: the SEND carries the header and the requester's buffer (RVH); the responder
// completes MATCH, READs the buffer into the tag's over the same QP, sends the requester a FIN
// (its TMH: opcode FIN, same app context and tag) that completes the requester's receive, and
// completes the tag again with DATA_VALID. The tag's buffer is then the requester's, byte for
// byte; the responder's send CQ shows nothing of its own READ and FIN.
TEST_F(TagMatching, Rendezvous_ReadThenFinThenDataValid) {
  uint32_t h = 0;
  ASSERT_EQ(add(0x42, ~0ull, 0, 12000, 1, &h), 0);
  expect(IBV_WC_TM_ADD, 1, 0);
  const uint32_t data_len = 10000;  // 10 READ response packets at MTU 1024
  std::vector<uint8_t> fin(64, 0xee);
  ibv_mr* fmr = reg_mr(pd_, fin.data(), fin.size(), reinterpret_cast<uintptr_t>(fin.data()),
                       IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(fmr, nullptr);
  ibv_sge g{reinterpret_cast<uintptr_t>(fin.data()), 64, fmr->lkey};
  ibv_recv_wr rw{};
  rw.wr_id = 500;
  rw.sg_list = &g;
  rw.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(post_recv(cqp_, &rw, &bad), 0);
  for (uint32_t i = 0; i < data_len; ++i) out_[i] = static_cast<uint8_t>(i * 7 + 1);
  ibv_tmh th{};
  th.opcode = IBV_TMH_RNDV;
  th.app_ctx = htonl(0xa1b2c3d4);
  th.tag = htobe64(0x42);
  ibv_rvh rv{};
  rv.va = htobe64(reinterpret_cast<uintptr_t>(out_.data()));
  rv.rkey = htonl(mrs_[0]->rkey);
  rv.len = htonl(data_len);
  std::memcpy(out_.data(), &th, sizeof th);
  std::memcpy(out_.data() + sizeof th, &rv, sizeof rv);
  const std::vector<uint8_t> want(out_.begin(), out_.begin() + data_len);
  send(64);
  Cqe c = expect(IBV_WC_TM_RECV, 101, IBV_WC_TM_MATCH, 0x42);
  EXPECT_EQ(c.tm.priv, 0xa1b2c3d4u);
  const Cqe f = next(ccq_);
  ASSERT_TRUE(f.got);
  EXPECT_EQ(f.status, IBV_WC_SUCCESS);
  EXPECT_EQ(f.opcode, IBV_WC_RECV);
  EXPECT_EQ(f.wr_id, 500u);
  EXPECT_EQ(f.byte_len, sizeof(ibv_tmh));
  ibv_tmh got{};
  std::memcpy(&got, fin.data(), sizeof got);
  EXPECT_EQ(got.opcode, IBV_TMH_FIN);
  EXPECT_EQ(ntohl(got.app_ctx), 0xa1b2c3d4u);
  EXPECT_EQ(be64toh(got.tag), 0x42u);
  EXPECT_EQ(fin[sizeof(ibv_tmh)], 0xee);  // 16 bytes, no more
  c = expect(IBV_WC_TM_RECV, 101, IBV_WC_TM_DATA_VALID, 0);  // tag info only with MATCH
  EXPECT_EQ(c.byte_len, data_len);
  EXPECT_EQ(std::memcmp(tagbuf_.data(), want.data(), data_len), 0);
  EXPECT_EQ(next(scq_, 200ms).got, false);  // no completion of the responder's own READ or FIN
  EXPECT_EQ(dereg_mr(fmr), 0);
}

}  // namespace
}  // namespace mrc::verbs
