// SendState: the PSN-indexed in-flight ring (growth keeps each record at its PSN, up to the
// cap), the in-flight count across PSN wrap, restart.
#include "engine/send_state.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engine/internal.h"

namespace mrc::engine {
namespace {

TEST(SendState, Grow_StartsAt16AndDoublesUpToTheCap) {
  SendState s;
  s.tx_cap = 64;
  EXPECT_TRUE(s.tx.empty());
  s.grow();
  EXPECT_EQ(s.tx.size(), 16u);
  EXPECT_EQ(s.tx_mask, 15u);
  s.grow();
  s.grow();
  EXPECT_EQ(s.tx.size(), 64u);
  s.grow();  // at the cap: stays
  EXPECT_EQ(s.tx.size(), 64u);
  EXPECT_EQ(s.tx_mask, 63u);
}

TEST(SendState, Grow_KeepsEachRecordAtItsPsnAcrossWrap) {
  SendState s;
  s.tx_cap = 1024;
  s.restart(UINT32_MAX - 9);  // PSNs wrap past 2^32 after 10
  s.grow();
  while (!s.ring_full()) {  // 16 PSNs in flight, each record naming its PSN
    s.pkt(s.snd_nxt).offset = s.snd_nxt;
    ++s.snd_nxt;
  }
  EXPECT_EQ(s.inflight(), 16u);
  s.grow();
  EXPECT_FALSE(s.ring_full());
  for (uint32_t psn = s.snd_una; psn != s.snd_nxt; ++psn) EXPECT_EQ(s.pkt(psn).offset, psn);
}

// A hint to the CPU only: an empty ring (nothing sent yet) is not indexed, a full one
// (snd_nxt's slot still holds the oldest PSN in flight) keeps every record.
TEST(SendState, PrefetchNext_ChangesNothing) {
  SendState s;
  s.tx_cap = 16;
  s.prefetch_next();
  EXPECT_TRUE(s.tx.empty());
  s.grow();
  while (!s.ring_full()) {
    s.pkt(s.snd_nxt).offset = s.snd_nxt;
    ++s.snd_nxt;
    s.prefetch_next();
  }
  EXPECT_EQ(s.inflight(), 16u);
  for (uint32_t psn = s.snd_una; psn != s.snd_nxt; ++psn) EXPECT_EQ(s.pkt(psn).offset, psn);
}

// prefetch_burst, a hint as well: nothing sent (empty ring) and nothing posted (no WQE) are
// not indexed; a ring smaller than the burst is not walked past its size (wrapping at
// snd_nxt); every record and the WQE keep what they held.
TEST(SendState, PrefetchBurst_ChangesNothing) {
  SendState s;
  s.tx_cap = 64;
  s.sq.init(4);
  s.prefetch_burst(16);
  EXPECT_TRUE(s.tx.empty());
  s.grow();  // 16 slots
  s.snd_nxt = s.snd_una = 0xFFFFFFF8u;
  for (uint32_t k = 0; k < 16; ++k) s.pkt(s.snd_nxt + k).offset = k;
  s.prefetch_burst(64);  // more than the ring holds
  SendWqe& w = s.sq.push();
  w.wr_id = 77;
  w.sg.push_back(Seg{nullptr, 1, 2});
  s.pkt_wqe = s.sq.head();
  s.prefetch_burst(16);
  EXPECT_EQ(s.tx.size(), 16u);
  for (uint32_t k = 0; k < 16; ++k) EXPECT_EQ(s.pkt(s.snd_nxt + k).offset, k);
  EXPECT_EQ(s.sq.at(s.pkt_wqe).wr_id, 77u);
  EXPECT_EQ(s.sq.at(s.pkt_wqe).sg.size(), 1u);
  EXPECT_EQ(s.inflight(), 0u);
}

TEST(SendState, Restart_EmptiesTheRingAndStartsAtThePsn) {
  SendState s;
  s.tx_cap = 64;
  s.grow();
  s.snd_nxt = 5;
  s.bytes_in_flight = 4096;
  s.restart(1000);
  EXPECT_TRUE(s.tx.empty());
  EXPECT_EQ(s.snd_una, 1000u);
  EXPECT_EQ(s.snd_nxt, 1000u);
  EXPECT_EQ(s.inflight(), 0u);
  EXPECT_EQ(s.bytes_in_flight, 0u);
  EXPECT_TRUE(s.ring_full());  // no slot until grow()
  EXPECT_TRUE(s.list_empty());
}

// The earliest resend of lost packets lives beside the ring: none (Time{0}) until the first is
// set, then kept at its PSN when the ring grows, and gone with a restart.
TEST(SendState, NotBefore_BesideTheRingKeptAtItsPsnWhenItGrows) {
  SendState s;
  s.tx_cap = 1024;
  s.restart(UINT32_MAX - 5);
  s.grow();
  while (!s.ring_full()) ++s.snd_nxt;
  EXPECT_TRUE(s.tx_not_before.empty());
  EXPECT_EQ(s.not_before(s.snd_una + 3), Time{0});
  s.not_before_slot(s.snd_una + 3) = Time{777};  // wraps past 2^32 at PSN 6 of 16
  s.not_before_slot(s.snd_una + 9) = Time{999};
  EXPECT_EQ(s.tx_not_before.size(), s.tx.size());
  s.grow();
  EXPECT_EQ(s.tx_not_before.size(), s.tx.size());
  EXPECT_EQ(s.not_before(s.snd_una + 3), Time{777});
  EXPECT_EQ(s.not_before(s.snd_una + 9), Time{999});
  EXPECT_EQ(s.not_before(s.snd_una + 4), Time{0});
  s.restart(5);
  EXPECT_TRUE(s.tx_not_before.empty());
  EXPECT_EQ(s.not_before(5), Time{0});
}

// A record names its WQE by the low 32 bits of the sequence number; the full number comes back
// from its ring's head, in sq or in rsp.
TEST(SendState, WqeSeq_RebuiltFromItsRingsHead) {
  SendState s;
  s.sq.init(8);
  s.rsp.init(8);
  for (int i = 0; i < 6; ++i) s.sq.push().wr_id = 100 + static_cast<uint64_t>(i);
  s.sq.pop();
  s.sq.pop();  // head 2
  s.rsp.push().req_psn = 42;
  TxPkt p;
  p.wqe = 4;
  EXPECT_EQ(s.wqe_seq(p), 4u);
  EXPECT_EQ(s.wqe(p).wr_id, 104u);
  p.rsp = true;
  p.wqe = 0;
  EXPECT_EQ(s.wqe_seq(p), 0u);
  EXPECT_EQ(s.wqe(p).req_psn, 42u);
  static_assert(sizeof(TxPkt) == 48);
}

// A send WQE's gather list: one segment inside the list itself (no allocation: posting a
// one-segment WR writes nothing outside its WQE), more on an allocation that keeps their order;
// clear() and reuse, moves that leave the source empty, and the span the copy helpers take.
TEST(SendState, SgList_OneSegmentInsideMoreAllocatedInOrder) {
  SendWqe w;
  EXPECT_TRUE(w.sg.empty());
  uint8_t buf[64] = {};
  w.sg.push_back(Seg{buf, 16, 7});
  ASSERT_EQ(w.sg.size(), 1u);
  const auto* lo = reinterpret_cast<const char*>(&w);
  const auto* at = reinterpret_cast<const char*>(w.sg.data());
  EXPECT_TRUE(at >= lo && at < lo + sizeof(SendWqe));  // inside the WQE
  EXPECT_EQ(w.sg[0].host, buf);
  for (uint32_t i = 1; i < kMaxSge; ++i) w.sg.push_back(Seg{buf + i, i, 100 + i});
  ASSERT_EQ(w.sg.size(), size_t{kMaxSge});
  at = reinterpret_cast<const char*>(w.sg.data());
  EXPECT_FALSE(at >= lo && at < lo + sizeof(SendWqe));  // its own allocation
  EXPECT_EQ(w.sg[0].key, 7u);
  for (uint32_t i = 1; i < kMaxSge; ++i) {
    EXPECT_EQ(w.sg[i].host, buf + i);
    EXPECT_EQ(w.sg[i].key, 100 + i);
  }
  // Reused (a WQE slot's next message): the allocation stays, the list starts over.
  w.sg.clear();
  EXPECT_TRUE(w.sg.empty());
  w.sg.push_back(Seg{buf + 8, 8, 9});
  w.sg.push_back(Seg{buf + 32, 8, 9});
  uint8_t out[16] = {};
  for (int i = 0; i < 64; ++i) buf[i] = static_cast<uint8_t>(i);
  // 8 bytes from offset 4: the first segment's last 4 (buf[12..16)), the second's first 4.
  ASSERT_TRUE(sg_copy_out(w.sg, 4, out, 8, [](void* d, const void* s, size_t n) {
    std::memcpy(d, s, n);
  }));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], i < 4 ? 12 + i : 28 + i) << i;
  EXPECT_FALSE(sg_copy_out(w.sg, 12, out, 8, [](void*, const void*, size_t) {}));  // past it
  // Moved (a ring's growth): the target holds the list, the source is empty and usable.
  SendWqe v = std::move(w);
  EXPECT_EQ(v.sg.size(), 2u);
  EXPECT_EQ(v.sg[1].host, buf + 32);
  EXPECT_TRUE(w.sg.empty());  // NOLINT(bugprone-use-after-move): moves leave it empty
  w.sg.push_back(Seg{buf, 1, 1});
  EXPECT_EQ(w.sg.size(), 1u);
  EXPECT_EQ(w.sg[0].host, buf);
  static_assert(sizeof(SendWqe) == 128);
}
}  // namespace
}  // namespace mrc::engine
