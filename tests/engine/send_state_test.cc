// SendState: the PSN-indexed in-flight ring (growth keeps each record at its PSN, up to the
// cap), the in-flight count across PSN wrap, restart.
#include "engine/send_state.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mrc::engine
