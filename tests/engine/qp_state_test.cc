// QP state machine: allowed transitions, required attributes, flush on error.
#include <gtest/gtest.h>

#include "engine/engine.h"

namespace mrc::engine {
namespace {

struct Fixture : ::testing::Test {
  Engine e;
  CqId cq = e.create_cq(64).value();
  Qpn q = [this] {
    QpInit init;
    init.send_cq = init.recv_cq = cq;
    return e.create_qp(init).value();
  }();
  Status<Error> to(QpState s, uint32_t extra = 0, QpAttr a = {}) {
    a.state = s;
    return e.modify_qp(q, a, attr::kState | extra);
  }
  QpAttr rtr_attr() {
    QpAttr a;
    a.dest_qpn = 5;
    a.paths = {Path{1, 0}};
    return a;
  }
};

using QpState_ = Fixture;

TEST_F(QpState_, Transition_NormalPath) {
  EXPECT_EQ(e.query_qp(q)->state, QpState::kReset);
  ASSERT_TRUE(to(QpState::kInit).ok());
  ASSERT_TRUE(to(QpState::kRtr, attr::kDest | attr::kPaths, rtr_attr()).ok());
  ASSERT_TRUE(to(QpState::kRts).ok());
  ASSERT_TRUE(to(QpState::kSqd).ok());
  ASSERT_TRUE(to(QpState::kRts).ok());
  EXPECT_EQ(e.query_qp(q)->state, QpState::kRts);
}

TEST_F(QpState_, Transition_SkippingStatesRefused) {
  EXPECT_EQ(to(QpState::kRtr).error(), Error::kBadState);
  EXPECT_EQ(to(QpState::kRts).error(), Error::kBadState);
  ASSERT_TRUE(to(QpState::kInit).ok());
  EXPECT_EQ(to(QpState::kRts).error(), Error::kBadState);
}

TEST_F(QpState_, Rtr_NeedsDestinationAndPaths) {
  ASSERT_TRUE(to(QpState::kInit).ok());
  EXPECT_EQ(to(QpState::kRtr).error(), Error::kInvalidArgument);
  QpAttr a = rtr_attr();
  a.paths.clear();
  EXPECT_EQ(to(QpState::kRtr, attr::kDest | attr::kPaths, a).error(), Error::kInvalidArgument);
}

TEST_F(QpState_, Attributes_RangeChecked) {
  ASSERT_TRUE(to(QpState::kInit).ok());
  QpAttr a;
  a.timeout = 32;
  EXPECT_EQ(e.modify_qp(q, a, attr::kTimeout).error(), Error::kInvalidArgument);
  a = {};
  a.retry_cnt_linear = 8;
  EXPECT_EQ(e.modify_qp(q, a, attr::kRetry).error(), Error::kInvalidArgument);
  a = {};
  a.retry_cnt_exp = 26;
  EXPECT_EQ(e.modify_qp(q, a, attr::kRetry).error(), Error::kInvalidArgument);
  a = {};
  a.max_psn_range = 0;
  EXPECT_EQ(e.modify_qp(q, a, attr::kMpr).error(), Error::kInvalidArgument);
  a = {};
  a.mtu = 8192;
  EXPECT_EQ(e.modify_qp(q, a, attr::kMtu).error(), Error::kInvalidArgument);
  a = {};
  a.retry_cnt_exp = 25;
  EXPECT_TRUE(e.modify_qp(q, a, attr::kRetry).ok());
}

TEST_F(QpState_, Error_FlushesPostedReceives) {
  std::vector<uint8_t> buf(64);
  uint32_t key = e.register_mr(buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                               access::kLocalWrite)
                     .value();
  ASSERT_TRUE(to(QpState::kInit).ok());
  Sge s{reinterpret_cast<uint64_t>(buf.data()), 64, key};
  ASSERT_TRUE(e.post_recv(q, RecvWr{11, {&s, 1}}).ok());
  ASSERT_TRUE(to(QpState::kError).ok());
  Completion c[4];
  ASSERT_EQ(e.poll_cq(cq, c), 1u);
  EXPECT_EQ(c[0].wr_id, 11u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  // Posting in ERROR completes at once with a flush error.
  ASSERT_TRUE(e.post_recv(q, RecvWr{12, {&s, 1}}).ok());
  ASSERT_EQ(e.poll_cq(cq, c), 1u);
  EXPECT_EQ(c[0].wr_id, 12u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  // ERROR -> RESET -> INIT works again.
  ASSERT_TRUE(to(QpState::kReset).ok());
  ASSERT_TRUE(to(QpState::kInit).ok());
}

TEST_F(QpState_, PostSend_BeforeRtsRefused) {
  SendWr wr;
  EXPECT_EQ(e.post_send(q, wr).error(), Error::kBadState);
}

TEST_F(QpState_, DestroyCq_InUseRefused) {
  EXPECT_EQ(e.destroy_cq(cq).error(), Error::kBadState);
  ASSERT_TRUE(e.destroy_qp(q).ok());
  EXPECT_TRUE(e.destroy_cq(cq).ok());
}

}  // namespace
}  // namespace mrc::engine
