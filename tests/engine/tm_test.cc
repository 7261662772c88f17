// Tag matching in the engine (engine/tm.cc): messages to a QP on a tag-matching SRQ are
// classified in MSN order at their first packet, whatever order the sprayed packets come in;
// tag list operations and their completions. Two engines back to back (loop.h), virtual time.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "loop.h"
#include "mrc/engine/engine.h"
#include "mrc/wire/wire.h"

namespace mrc::engine {
namespace {

using testing::Loop;
using namespace std::chrono_literals;

// B's QP on a tag-matching SRQ whose completions go to B's CQ.
struct TmLoop {
  uint32_t srq = 0;
  Loop l{1000, {}, 4, [this](int side, Engine& e, QpInit& init) {
           if (side != 1) return;
           srq = e.create_tm_srq(16, init.recv_cq, 8).value();
           init.srq = srq;
         }};
  uint64_t b_addr(uint64_t off) const { return reinterpret_cast<uint64_t>(l.b.mem.data()) + off; }
  // A SEND from A of a.mem[off, off + len) whose first 16 bytes are a TM header.
  void send_tm(uint64_t wr_id, uint64_t off, uint32_t len, uint8_t op, uint64_t tag) {
    uint8_t* p = l.a.mem.data() + off;
    for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(wr_id * 13 + i * 7);
    std::memset(p, 0, tmh::kLen);
    p[0] = op;
    for (int i = 0; i < 8; ++i) p[8 + i] = static_cast<uint8_t>(tag >> (56 - 8 * i));
    Sge g{reinterpret_cast<uint64_t>(p), len, l.a.key};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = Opcode::kSend;
    wr.sg = {&g, 1};
    ASSERT_TRUE(l.a.eng.post_send(l.a.qpn, wr).ok());
  }
};

// The first packets of two multi-packet SENDs come last (the first message's later than the
// second's): every packet of a message not yet classified, and the second message's first
// packet while the first message is not, is NACKed PSN_OUT_OF_WINDOW and resent, so the first
// message still takes the tag and the second (unexpected) the plain receive, both byte for
// byte. Placing a packet before its message is classified would put it in the wrong buffer.
TEST(Tm, FirstPacketsLate_ClassifiedInOrderDataIntact) {
  TmLoop t;
  Loop& l = t.l;
  SrqOp add;
  add.wr_id = 1;
  add.recv_wr_id = 50;
  add.tag = 5;
  add.mask = ~0ull;
  Sge tagged{t.b_addr(100'000), 20'000, l.b.key};
  add.sg = {&tagged, 1};
  const auto h = l.b.eng.post_srq_op(t.srq, add);
  ASSERT_TRUE(h.ok());
  EXPECT_NE(*h, 0u);
  Sge plain{t.b_addr(200'000), 20'000, l.b.key};
  ASSERT_TRUE(l.b.eng.post_srq_recv(t.srq, RecvWr{60, {&plain, 1}}).ok());
  l.extra_delay = [](int from, const std::vector<uint8_t>& d) {
    const wire::Packet p = testing::peek(d);
    if (from != 0 || p.common.kind != wire::Kind::kSend || p.data.offset != 0) return Duration{0};
    return p.common.psn == 1000 ? Duration{200'000} : Duration{100'000};
  };
  t.send_tm(7, 0, 10'000, tmh::kEager, 5);        // PSNs 1000..1002: the tag
  t.send_tm(8, 20'000, 6'000, tmh::kEager, 0x99);  // PSNs 1003..1004: no such tag
  l.run(1s);
  auto ca = l.poll(l.a);
  ASSERT_EQ(ca.size(), 2u);
  for (const Completion& c : ca) EXPECT_EQ(c.status, WcStatus::kSuccess);
  auto cb = l.poll(l.b);
  ASSERT_EQ(cb.size(), 3u);
  EXPECT_EQ(cb[0].opcode, WcOpcode::kTmAdd);
  EXPECT_EQ(cb[0].wr_id, 1u);
  EXPECT_EQ(cb[1].opcode, WcOpcode::kTmRecv);
  EXPECT_EQ(cb[1].wr_id, 50u);
  EXPECT_EQ(cb[1].tm_flags, tm_flag::kMatch | tm_flag::kDataValid);
  EXPECT_EQ(cb[1].tag, 5u);
  EXPECT_EQ(cb[1].byte_len, 10'000u - tmh::kLen);
  EXPECT_EQ(cb[2].opcode, WcOpcode::kTmRecv);
  EXPECT_EQ(cb[2].wr_id, 60u);
  EXPECT_EQ(cb[2].tm_flags, 0);
  EXPECT_EQ(cb[2].tag, 0u);
  EXPECT_EQ(cb[2].byte_len, 6'000u);
  EXPECT_EQ(std::memcmp(&l.b.mem[100'000], &l.a.mem[tmh::kLen], 10'000 - tmh::kLen), 0);
  EXPECT_EQ(std::memcmp(&l.b.mem[200'000], &l.a.mem[20'000], 6'000), 0);
  EXPECT_GT(l.b.eng.stats().dropped(Drop::kPsnOutOfWindow), 0u) << "nothing had to wait";
  // The unexpected message put the SRQ out of sync: an add now says so until a sync reports it.
  add.wr_id = 2;
  ASSERT_TRUE(l.b.eng.post_srq_op(t.srq, add).ok());
  SrqOp sync;
  sync.kind = SrqOp::kSync;
  sync.wr_id = 3;
  sync.unexpected_cnt = 1;
  ASSERT_TRUE(l.b.eng.post_srq_op(t.srq, sync).ok());
  cb = l.poll(l.b);
  ASSERT_EQ(cb.size(), 2u);
  EXPECT_EQ(cb[0].tm_flags, tm_flag::kSyncReq);
  EXPECT_EQ(cb[1].opcode, WcOpcode::kTmSync);
  EXPECT_EQ(cb[1].tm_flags, 0);
  // Operations on a plain SRQ, or an unknown one, are refused.
  const uint32_t plain_srq = l.b.eng.create_srq(4).value();
  EXPECT_EQ(l.b.eng.post_srq_op(plain_srq, sync).error(), Error::kInvalidArgument);
  EXPECT_EQ(l.b.eng.post_srq_op(999, sync).error(), Error::kInvalidArgument);
}

}  // namespace
}  // namespace mrc::engine
