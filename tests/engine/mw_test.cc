// Memory windows (engine/mw.cc): a window grants remote access to the part of an MR it is
// bound to, under its own key; invalidated (locally or by the peer's SEND_WITH_INV) or rebound
// under a new key, the old key grants nothing; local completions come in posting order.
#include <gtest/gtest.h>

#include "loop.h"
#include "mrc/engine/engine.h"

namespace mrc::engine {
namespace {

using testing::Loop;
using testing::Side;

// b's memory as a local-only MR (no remote access of its own) and a window of b's pd.
struct Windowed {
  Loop l;
  uint32_t mr = 0;
  uint32_t mw = 0;
  Windowed() {
    mr = l.b.eng
             .register_mr(l.b.mem.data(), l.b.mem.size(),
                          reinterpret_cast<uint64_t>(l.b.mem.data()), access::kLocalWrite)
             .value();
    mw = l.b.eng.alloc_mw(0).value();
  }
  uint64_t b_addr(uint64_t off) const { return reinterpret_cast<uint64_t>(l.b.mem.data()) + off; }
  // A SEND of 10 bytes from a that invalidates `rkey` at b (SEND_WITH_INV), run to the end.
  void send_invalidate(uint32_t rkey) {
    Sge sge{reinterpret_cast<uint64_t>(l.a.mem.data()), 10, l.a.key};
    SendWr wr;
    wr.opcode = Opcode::kSend;
    wr.sg = {&sge, 1};
    wr.invalidate = true;
    wr.rkey = rkey;
    ASSERT_TRUE(l.a.eng.post_send(l.a.qpn, wr).ok());
    l.run();
  }
  // A WRITE of `len` bytes from a's memory to b's `off`, under `rkey`; its completion status.
  WcStatus write(uint32_t rkey, uint64_t off, uint32_t len) {
    Sge sge{reinterpret_cast<uint64_t>(l.a.mem.data()), len, l.a.key};
    SendWr wr;
    wr.opcode = Opcode::kWrite;
    wr.sg = {&sge, 1};
    wr.remote_addr = b_addr(off);
    wr.rkey = rkey;
    EXPECT_TRUE(l.a.eng.post_send(l.a.qpn, wr).ok());
    l.run();
    auto c = l.poll(l.a);
    return c.size() == 1 ? c[0].status : WcStatus::kWrFlushErr;
  }
};

// (A refused WRITE fails the requester's QP: one refusal per test, at its end.)
TEST(Mw, BindMw_GrantsItsRangeOnly) {
  Windowed w;
  const uint32_t key = w.mw + 1;  // ibv_inc_rkey
  ASSERT_TRUE(
      w.l.b.eng.bind_mw(w.mw, key, w.mr, w.b_addr(4096), 4096, access::kRemoteWrite, 0).ok());
  std::fill(w.l.a.mem.begin(), w.l.a.mem.begin() + 8, 0x5a);
  EXPECT_EQ(w.write(key, 4096, 8), WcStatus::kSuccess);
  EXPECT_EQ(w.l.b.mem[4096], 0x5a);
  EXPECT_EQ(w.write(key, 8192, 8), WcStatus::kRemAccessErr);  // past the window
}

TEST(Mw, AllocMw_GrantsNothingUntilBound) {
  Windowed w;
  EXPECT_EQ(w.write(w.mw, 4096, 8), WcStatus::kRemAccessErr);
}

TEST(Mw, BindMw_TheWindowsAccessNotTheMrs) {
  Windowed w;
  ASSERT_TRUE(
      w.l.b.eng.bind_mw(w.mw, w.mw + 1, w.mr, w.b_addr(0), 64, access::kRemoteRead, 0).ok());
  EXPECT_EQ(w.write(w.mw + 1, 0, 8), WcStatus::kRemAccessErr);  // bound for READs only
}

TEST(Mw, BindMw_NewKeyMustNameTheWindowOldKeyStops) {
  Windowed w;
  EXPECT_EQ(w.l.b.eng.bind_mw(w.mw, w.mr, w.mr, w.b_addr(0), 64, access::kRemoteWrite, 0).error(),
            Error::kInvalidArgument);  // another slot's key
  EXPECT_EQ(
      w.l.b.eng.bind_mw(w.mw, w.mw + 1, w.mr, w.b_addr(0), 64, access::kRemoteWrite, 7).error(),
      Error::kNoSuchMr);  // another pd
  ASSERT_TRUE(
      w.l.b.eng.bind_mw(w.mw, w.mw + 1, w.mr, w.b_addr(0), 64, access::kRemoteWrite, 0).ok());
  ASSERT_TRUE(
      w.l.b.eng.bind_mw(w.mw + 1, w.mw + 2, w.mr, w.b_addr(0), 64, access::kRemoteWrite, 0).ok());
  EXPECT_EQ(w.write(w.mw + 1, 0, 8), WcStatus::kRemAccessErr);
}

TEST(Mw, DeregisterMr_RefusedWhileAWindowIsBound) {
  Windowed w;
  ASSERT_TRUE(
      w.l.b.eng.bind_mw(w.mw, w.mw + 1, w.mr, w.b_addr(0), 64, access::kRemoteWrite, 0).ok());
  EXPECT_EQ(w.l.b.eng.deregister_mr(w.mr).error(), Error::kBadState);
  ASSERT_TRUE(w.l.b.eng.invalidate_mw(w.mw + 1, 0).ok());
  EXPECT_EQ(w.write(w.mw + 1, 0, 8), WcStatus::kRemAccessErr);  // invalidated
  EXPECT_TRUE(w.l.b.eng.deregister_mr(w.mr).ok());
  EXPECT_TRUE(w.l.b.eng.deregister_mr(w.mw + 1).ok());  // the window freed
}

TEST(Mw, SendWithInvalidate_TheResponderInvalidatesItsWindow) {
  Windowed w;
  const uint32_t key = w.mw + 1;
  ASSERT_TRUE(w.l.b.eng.bind_mw(w.mw, key, w.mr, w.b_addr(0), 64, access::kRemoteWrite, 0).ok());
  w.l.post_recv(w.l.b, 9, 1000, 100);
  w.send_invalidate(key);
  ASSERT_EQ(w.l.poll(w.l.a).size(), 1u);
  auto rc = w.l.poll(w.l.b);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_TRUE(rc[0].has_inv);
  EXPECT_EQ(rc[0].imm, key);
  EXPECT_EQ(w.write(key, 0, 8), WcStatus::kRemAccessErr);
}

TEST(Mw, SendWithInvalidate_NotAWindowIsARemoteAccessError) {
  Windowed w;
  w.l.post_recv(w.l.b, 10, 1000, 100);
  w.send_invalidate(w.mr);  // an MR's key
  auto sc = w.l.poll(w.l.a);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, WcStatus::kRemAccessErr);
  EXPECT_TRUE(w.l.poll(w.l.b).empty());  // no receive taken
}

TEST(Mw, PostLocal_CompletesAfterTheWrsPostedBeforeIt) {
  Loop l;
  l.post_write(l.a, 1, 0, 100000, 0);
  ASSERT_TRUE(l.a.eng.post_local(l.a.qpn, 2, WcOpcode::kBindMw, true).ok());
  EXPECT_TRUE(l.poll(l.a).empty());  // the WRITE before it is not complete
  l.run();
  auto c = l.poll(l.a);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[1].wr_id, 2u);
  EXPECT_EQ(c[1].opcode, WcOpcode::kBindMw);
  // With nothing before it: at once.
  ASSERT_TRUE(l.a.eng.post_local(l.a.qpn, 3, WcOpcode::kLocalInv, true).ok());
  c = l.poll(l.a);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kLocalInv);
}

TEST(Mw, PostLocal_FlushedInOrderWhenTheQpFails) {
  Loop l;
  l.post_write(l.a, 1, 0, 100000, 0);
  ASSERT_TRUE(l.a.eng.post_local(l.a.qpn, 2, WcOpcode::kBindMw, true).ok());
  QpAttr at;
  at.state = QpState::kError;
  ASSERT_TRUE(l.a.eng.modify_qp(l.a.qpn, at, attr::kState).ok());
  auto c = l.poll(l.a);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[1].wr_id, 2u);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
}

}  // namespace
}  // namespace mrc::engine
