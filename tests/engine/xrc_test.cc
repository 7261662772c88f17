// XRC in the engine (verbs XRC INI -> TGT QPs): a target QP of an XRC domain takes each
// message's receive from the XRC SRQ the message names, completes it on that SRQ's CQ and
// checks the message's memory in that SRQ's PD (engine.h QpInit::xrcd, SendWr::xrc_srqn).
#include <gtest/gtest.h>

#include "loop.h"
#include "mrc/engine/engine.h"
#include "mrc/wire/wire.h"

namespace mrc::engine {
namespace {

using testing::Loop;

constexpr uint32_t kDomain = 7;

// B's QP is an XRC target of kDomain: no CQs, no receive queue of its own.
Loop xrc_loop() {
  return Loop(1000, {}, 4, [](int side, Engine&, QpInit& init) {
    if (side != 1) return;
    init.xrcd = kDomain;
    init.send_cq = init.recv_cq = 0;
  });
}

void post_xrc(Loop& l, uint64_t wr_id, uint64_t off, uint32_t len, uint32_t srqn,
              Opcode op = Opcode::kSend, uint64_t roff = 0) {
  Sge sge{reinterpret_cast<uint64_t>(l.a.mem.data()) + off, len, l.a.key};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(l.b.mem.data()) + roff;
  wr.rkey = l.b.key;
  wr.xrc_srqn = srqn;
  ASSERT_TRUE(l.a.eng.post_send(l.a.qpn, wr).ok());
}

void post_srq(Loop& l, uint32_t srq, uint64_t wr_id, uint64_t off, uint32_t len) {
  Sge sge{reinterpret_cast<uint64_t>(l.b.mem.data()) + off, len, l.b.key};
  ASSERT_TRUE(l.b.eng.post_srq_recv(srq, RecvWr{wr_id, {&sge, 1}}).ok());
}

std::vector<Completion> poll(Engine& e, CqId cq) {
  std::vector<Completion> out(64);
  out.resize(e.poll_cq(cq, out));
  return out;
}

// Three SENDs to two XRC SRQs of the domain, the first one held back on the wire so the
// others overtake it: each takes its receive from the SRQ it names (not the next in MSN
// order from another) and completes on that SRQ's CQ with the target QP's number.
TEST(Xrc, Send_TakesTheNamedSrqAndCompletesOnItsCq) {
  Loop l = xrc_loop();
  const CqId cq2 = l.b.eng.create_cq(64).value();
  const uint32_t s1 = l.b.eng.create_srq(8, XrcSrqInit{kDomain, l.b.cq, 0}).value();
  const uint32_t s2 = l.b.eng.create_srq(8, XrcSrqInit{kDomain, cq2, 0}).value();
  post_srq(l, s1, 11, 0, 1000);
  post_srq(l, s2, 21, 2000, 1000);
  post_srq(l, s2, 22, 4000, 1000);
  bool first = true;
  l.extra_delay = [&](int from, const std::vector<uint8_t>& d) {
    if (from != 0 || testing::peek(d).common.kind != wire::Kind::kSend || !first)
      return Duration{0};
    first = false;
    return Duration{2'000'000};  // 2 ms: the other two land first
  };
  l.a.mem[0] = 0xa1;    // message 1
  l.a.mem[100] = 0xb2;  // message 2
  l.a.mem[300] = 0xc3;  // message 3
  post_xrc(l, 1, 0, 100, s2);
  post_xrc(l, 2, 100, 200, s1);
  post_xrc(l, 3, 300, 300, s2);
  l.run();
  auto c1 = poll(l.b.eng, l.b.cq);
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c1[0].wr_id, 11u);
  EXPECT_EQ(c1[0].byte_len, 200u);
  EXPECT_EQ(c1[0].qpn, l.b.qpn);
  EXPECT_EQ(l.b.mem[0], 0xb2);
  // s2's receives went to its messages in the order they arrived (3, then 1); completions
  // come in message order.
  auto c2 = poll(l.b.eng, cq2);
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_EQ(c2[0].wr_id, 22u);
  EXPECT_EQ(c2[0].byte_len, 100u);
  EXPECT_EQ(c2[1].wr_id, 21u);
  EXPECT_EQ(c2[1].byte_len, 300u);
  EXPECT_EQ(l.b.mem[4000], 0xa1);
  EXPECT_EQ(l.b.mem[2000], 0xc3);
  for (const Completion& c : c2) {
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(c.qpn, l.b.qpn);
  }
  EXPECT_EQ(l.poll(l.a).size(), 3u);
  EXPECT_EQ(l.b.eng.srq_depth(s1) + l.b.eng.srq_depth(s2), 0u);
}

// A message naming no XRC SRQ of the target's domain (none, a plain SRQ, another domain's) is
// refused: the requester's WR fails with kRemInvReqErr and nothing is received.
TEST(Xrc, Send_ForeignOrMissingSrqIsRemoteInvalid) {
  for (int which = 0; which < 3; ++which) {
    Loop l = xrc_loop();
    uint32_t srqn = 0;
    if (which == 0) srqn = 40;  // no such SRQ
    if (which == 1) srqn = l.b.eng.create_srq(8).value();
    if (which == 2) srqn = l.b.eng.create_srq(8, XrcSrqInit{kDomain + 1, l.b.cq, 0}).value();
    if (srqn != 40) post_srq(l, srqn, 5, 0, 1000);
    post_xrc(l, 1, 0, 100, srqn);
    l.run();
    auto ca = l.poll(l.a);
    ASSERT_EQ(ca.size(), 1u) << which;
    EXPECT_EQ(ca[0].status, WcStatus::kRemInvReqErr) << which;
    EXPECT_TRUE(poll(l.b.eng, l.b.cq).empty()) << which;
  }
}

// WRITE and READ to a target are checked in the PD of the SRQ they name: B's MR (PD 0) serves
// them through an SRQ of PD 0 and is no key at all through an SRQ of PD 3.
TEST(Xrc, Write_CheckedInTheNamedSrqsPd) {
  Loop l = xrc_loop();
  const uint32_t pd0 = l.b.eng.create_srq(8, XrcSrqInit{kDomain, l.b.cq, 0}).value();
  const uint32_t pd3 = l.b.eng.create_srq(8, XrcSrqInit{kDomain, l.b.cq, 3}).value();
  l.a.mem[0] = 0x5a;
  post_xrc(l, 1, 0, 64, pd0, Opcode::kWrite, 4096);
  post_xrc(l, 2, 8192, 64, pd0, Opcode::kRead, 4096);
  l.run();
  auto ok = l.poll(l.a);
  ASSERT_EQ(ok.size(), 2u);
  for (const Completion& c : ok) EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(l.b.mem[4096], 0x5a);
  EXPECT_EQ(l.a.mem[8192], 0x5a);
  post_xrc(l, 3, 0, 64, pd3, Opcode::kWrite, 8192);
  l.run();
  auto bad = l.poll(l.a);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(l.b.mem[8192], 2);  // untouched (B's fill)
}

// A target QP posts nothing itself; an XRC SRQ needs a live CQ, holds it, and stays below the
// 16 bits the wire gives its number; XRC SRQs and targets are only made of a domain.
TEST(Xrc, Target_RefusesPostsAndSrqNeedsCq) {
  Loop l = xrc_loop();
  Sge sge{reinterpret_cast<uint64_t>(l.b.mem.data()), 8, l.b.key};
  EXPECT_EQ(l.b.eng.post_recv(l.b.qpn, RecvWr{1, {&sge, 1}}).error(), Error::kInvalidArgument);
  SendWr wr;
  wr.opcode = Opcode::kSend;
  wr.sg = {&sge, 1};
  EXPECT_EQ(l.b.eng.post_send(l.b.qpn, wr).error(), Error::kInvalidArgument);
  wr.xrc_srqn = 0x10000;
  EXPECT_EQ(l.a.eng.post_send(l.a.qpn, wr).error(), Error::kInvalidArgument);
  EXPECT_EQ(l.b.eng.create_srq(8, XrcSrqInit{kDomain, 999, 0}).error(), Error::kNoSuchCq);
  const CqId cq = l.b.eng.create_cq(8).value();
  const uint32_t s = l.b.eng.create_srq(8, XrcSrqInit{kDomain, cq, 0}).value();
  EXPECT_EQ(l.b.eng.destroy_cq(cq).error(), Error::kBadState);  // the SRQ holds it
  ASSERT_TRUE(l.b.eng.destroy_srq(s).ok());
  EXPECT_TRUE(l.b.eng.destroy_cq(cq).ok());
  QpInit bad;
  bad.xrcd = kDomain;
  bad.srq = 1;  // a target has no SRQ of its own
  EXPECT_FALSE(l.b.eng.create_qp(bad).ok());
  QpInit plain;  // not XRC: CQs required
  EXPECT_EQ(l.b.eng.create_qp(plain).error(), Error::kNoSuchCq);
}

}  // namespace
}  // namespace mrc::engine
