// PortStatusUpdates' receiver rule on its own (io/udp/port_status.h): per peer host, only an
// update later than the last applied one is fresh, by serial-number arithmetic on the 32-bit
// sequence; another QP pair starts the peer's sequence afresh. The driver's use of it (a
// reordered down/up pair on real sockets) is in udp_driver_test.cc.
#include "mrc/io/udp/port_status.h"

#include <gtest/gtest.h>

namespace mrc::io {
namespace {

wire::Packet update(uint32_t seq, engine::Qpn src_qpn = 7, uint32_t token = 0x5eed) {
  wire::Packet p;
  p.common.kind = wire::Kind::kPortStatus;
  p.common.psn = seq;
  p.common.token = token;
  p.port_status.src_qpn = src_qpn;
  p.port_status.target_qpn = 3;
  return p;
}

TEST(PortStatusUpdates, Fresh_OnlyALaterSequenceOfThePeer) {
  PortStatusUpdates u;
  EXPECT_TRUE(u.fresh(1, update(10)));   // the first from a peer
  EXPECT_FALSE(u.fresh(1, update(10)));  // a duplicate
  EXPECT_FALSE(u.fresh(1, update(9)));   // overtaken: the "down" sent before the "up"
  EXPECT_TRUE(u.fresh(1, update(12)));   // a gap is fine (updates lost or sent elsewhere)
  EXPECT_FALSE(u.fresh(1, update(11)));
  EXPECT_TRUE(u.fresh(2, update(3))) << "each peer host has its own sequence";
  EXPECT_FALSE(u.fresh(1, update(3)));
}

TEST(PortStatusUpdates, Fresh_SequenceWraps) {
  PortStatusUpdates u;
  EXPECT_TRUE(u.fresh(1, update(0xffff'fffe)));
  EXPECT_TRUE(u.fresh(1, update(0xffff'ffff)));
  EXPECT_TRUE(u.fresh(1, update(0))) << "0 follows 0xffffffff";
  EXPECT_TRUE(u.fresh(1, update(5)));
  EXPECT_FALSE(u.fresh(1, update(0xffff'ffff))) << "from before the wrap";
  // Half the number space ahead is the farthest that still counts as later.
  EXPECT_TRUE(u.fresh(1, update(5u + 0x7fff'ffffu)));
  EXPECT_FALSE(u.fresh(1, update(5)));
}

TEST(PortStatusUpdates, Fresh_AnotherQpPairStartsAfresh) {
  PortStatusUpdates u;
  EXPECT_TRUE(u.fresh(1, update(1000, 7, 0x5eed)));
  // The peer restarted (new QPs, new tokens): its counter starts again below.
  EXPECT_TRUE(u.fresh(1, update(1, 9, 0xbeef)));
  EXPECT_FALSE(u.fresh(1, update(1, 9, 0xbeef)));
  EXPECT_TRUE(u.fresh(1, update(2, 9, 0xbeef)));
}

TEST(PortStatusUpdates, NextSeqs_ConsecutiveRangesPerCall) {
  PortStatusUpdates u;
  const uint32_t a = u.next_seqs(3);
  const uint32_t b = u.next_seqs(2);
  EXPECT_EQ(b, a + 3);
  EXPECT_EQ(u.next_seqs(1), b + 2);
}

}  // namespace
}  // namespace mrc::io
