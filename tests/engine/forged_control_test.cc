// Forged control packets from a peer that holds the right token (sender.cc's on_ack/on_nack,
// engine.cc's on_probe_reply): what it can only slow down, what it cannot touch, and the one
// thing it can end. The namespace-fabric version under load is
// tests/perf_tools/ns_replay_test.cc. Threading: single-threaded (loop.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "loop.h"
#include "mrc/engine/engine.h"

namespace mrc::engine {
namespace {

using testing::Loop;
using testing::peek;

/// A NACK to A's QP as B would send it, with A's token.
std::vector<uint8_t> nack_to_a(const Loop& l, uint32_t psn, uint32_t cum, wire::NackReason r) {
  wire::Packet p;
  p.common.kind = wire::Kind::kNack;
  p.common.dst_qpn = l.a.qpn;
  p.common.token = l.a.token;
  p.common.ev = 0x100;
  p.nack.nack_psn = psn;
  p.nack.cum_psn = cum;
  p.nack.echo_ev = 0x100;
  p.nack.reason = r;
  std::vector<uint8_t> d(wire::kCommonSize + wire::kNackExtSize);
  wire::encode_header(p, {}, d);
  return d;
}

void fill(std::vector<uint8_t>& m, uint32_t len) {
  for (uint32_t i = 0; i < len; ++i) m[i] = static_cast<uint8_t>(i * 31 + 7);
}

TEST(ForgedControl, NackForRealPsn_OnlyResendsDataIntact) {
  for (auto reason : {wire::NackReason::kTrimmed, wire::NackReason::kPsnOutOfWindow,
                      wire::NackReason::kNoResource}) {
    Loop l;
    fill(l.a.mem, 16 * 4096);
    l.post_write(l.a, 1, 0, 16 * 4096, 0);
    int forged = 0;
    l.hook = [&](int from, std::vector<uint8_t>& d) {
      const auto p = peek(d);
      // Right behind each of four real packets (PSNs 1000, 1005, 1010, 1015; the real one still
      // arrives): a NACK for it, with a cumulative PSN that acknowledges nothing.
      if (from == 0 && wire::is_data(p.common.kind) && p.common.psn % 5 == 0 &&
          !(p.common.flags & wire::flag::kRetransmit)) {
        l.a.eng.on_datagram(l.now, {}, nack_to_a(l, p.common.psn, 1000, reason));
        ++forged;
      }
      return Loop::Verdict::kDeliver;
    };
    l.run();
    EXPECT_EQ(forged, 4);
    auto c = l.poll(l.a);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess) << static_cast<int>(reason);
    EXPECT_TRUE(std::equal(l.a.mem.begin(), l.a.mem.begin() + 16 * 4096, l.b.mem.begin()));
    const QpStats& qs = *l.a.eng.qp_stats(l.a.qpn);
    EXPECT_EQ(qs.rx_nacks, 4u);
    if (reason == wire::NackReason::kNoResource) {
      // Its effect: a resend held back by the RNR delay, which the real ACK overtakes.
      EXPECT_EQ(qs.rnr_naks, 4u);
    } else {
      // Its effect: resends (a trim NACK in the first window also ends NSCC's start, so a
      // resend the real ACK makes needless may never go out), each placed once, not twice.
      EXPECT_GE(qs.tx_retransmits, 1u) << static_cast<int>(reason);
      EXPECT_EQ(l.b.eng.stats().dropped(Drop::kDuplicate), qs.tx_retransmits)
          << static_cast<int>(reason);
    }
  }
}

TEST(ForgedControl, AckNackForUnsentPsns_DroppedBadAckNothingAcknowledged) {
  Loop l;
  fill(l.a.mem, 8 * 4096);
  l.post_write(l.a, 1, 0, 8 * 4096, 0);
  std::vector<uint8_t> buf(kTransmitBufferSize);
  ASSERT_TRUE(l.a.eng.poll_transmit(l.now, buf).has_value());  // PSN 1000 is in flight
  const auto& st = l.a.eng.stats();
  l.a.eng.on_datagram(l.now, {}, nack_to_a(l, 1000 + 5000, 1000, wire::NackReason::kTrimmed));
  l.a.eng.on_datagram(l.now, {}, nack_to_a(l, 1000, 1000 + 5000, wire::NackReason::kTrimmed));
  l.a.eng.on_datagram(l.now, {}, nack_to_a(l, 1000 + 5000, 1000, wire::NackReason::kRemoteAccess));
  wire::Packet a;
  a.common.kind = wire::Kind::kAck;
  a.common.dst_qpn = l.a.qpn;
  a.common.token = l.a.token;
  a.ack.cum_psn = 1000 + 5000;
  std::vector<uint8_t> d(wire::kCommonSize + wire::kAckExtSize);
  wire::encode_header(a, {}, d);
  l.a.eng.on_datagram(l.now, {}, d);
  EXPECT_EQ(st.dropped(Drop::kBadAck), 4u);
  EXPECT_EQ(l.a.eng.qp_stats(l.a.qpn)->rx_acks, 0u);
  EXPECT_EQ(l.a.eng.qp_stats(l.a.qpn)->rx_nacks, 0u);
  EXPECT_EQ(l.a.eng.query_qp(l.a.qpn)->state, QpState::kRts);  // even the fatal reason
  l.run();
  auto c = l.poll(l.a);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(l.a.mem.begin(), l.a.mem.begin() + 8 * 4096, l.b.mem.begin()));
}

TEST(ForgedControl, ProbeReply_UnknownEvBadAckGoodEvUnchanged) {
  Loop l;
  wire::Packet r;
  r.common.kind = wire::Kind::kProbeReply;
  r.common.dst_qpn = l.a.qpn;
  r.common.token = l.a.token;
  std::vector<uint8_t> d(wire::kCommonSize + wire::kProbeReplyExtSize);
  for (uint32_t seq = 0; seq < 100; ++seq) {
    r.common.psn = seq;
    r.probe_reply.echo_ev = 0xbad000 + seq;  // no such EV
    wire::encode_header(r, {}, d);
    l.a.eng.on_datagram(l.now, {}, d);
    r.probe_reply.echo_ev = 0x100 + seq % 4;  // a real, good EV that was never probed
    wire::encode_header(r, {}, d);
    l.a.eng.on_datagram(l.now, {}, d);
  }
  EXPECT_EQ(l.a.eng.stats().dropped(Drop::kBadAck), 100u);
  const PathSet* ps = l.a.eng.paths(l.a.qpn);
  ASSERT_NE(ps, nullptr);
  for (size_t i = 0; i < ps->size(); ++i) EXPECT_EQ(ps->ev(i).state, EvState::kGood);
  EXPECT_FALSE(l.a.eng.poll_event().has_value());  // no EV changed state
}

// The limit of the token: a fatal NACK for an in-flight PSN ends the QP, as a forged
// NAK-with-error does in RoCE. Documented here so that a change to it is a visible one.
TEST(ForgedControl, NackFatalReasonForRealPsn_EndsQpWithThatError) {
  Loop l;
  l.post_write(l.a, 1, 0, 4 * 4096, 0);
  std::vector<uint8_t> buf(kTransmitBufferSize);
  ASSERT_TRUE(l.a.eng.poll_transmit(l.now, buf).has_value());  // PSN 1000 in flight
  l.a.eng.on_datagram(l.now, {}, nack_to_a(l, 1000, 1000, wire::NackReason::kRemoteAccess));
  auto c = l.poll(l.a);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(l.a.eng.query_qp(l.a.qpn)->state, QpState::kError);
}

}  // namespace
}  // namespace mrc::engine
