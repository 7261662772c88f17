// Remote memory protection of the engine (receiver.cc's checks, engine.cc's MR table): a peer
// reads and writes only what was registered with the access it needs, through that MR's own
// key, and a deregistered key stays dead even once its table slot holds a new MR. Covers what
// engine_test.cc's Protection_* tests do not. Threading: single-threaded (loop.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "loop.h"
#include "mrc/engine/engine.h"

namespace mrc::engine {
namespace {

using testing::Loop;
using testing::peek;

uint64_t va(const std::vector<uint8_t>& v, uint64_t off = 0) {
  return reinterpret_cast<uint64_t>(v.data()) + off;
}

uint32_t reg(Engine& e, std::vector<uint8_t>& v, uint32_t acc, uint64_t off = 0,
             uint64_t len = UINT64_MAX) {
  if (len == UINT64_MAX) len = v.size() - off;
  return e.register_mr(v.data() + off, len, va(v, off), acc).value();
}

// A posts one WRITE (or READ) of `len` bytes between its memory at `local` and `remote`, with
// its MR's key or `lkey`.
void post(Loop& l, uint64_t wr_id, Opcode op, uint64_t local, uint32_t len, uint64_t remote,
          uint32_t rkey, uint32_t lkey = 0) {
  Sge sge{va(l.a.mem, local), len, lkey ? lkey : l.a.key};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg = {&sge, 1};
  wr.remote_addr = remote;
  wr.rkey = rkey;
  ASSERT_TRUE(l.a.eng.post_send(l.a.qpn, wr).ok());
}

WcStatus one_completion(Loop& l) {
  auto c = l.poll(l.a);
  EXPECT_EQ(c.size(), 1u);
  return c.empty() ? WcStatus::kSuccess : c[0].status;
}

// A READs 100 bytes of `target` (filled with 0x22) with `key`: refused, nothing reaches A.
void expect_read_refused(Loop& r, const std::vector<uint8_t>& target, uint32_t key) {
  post(r, 2, Opcode::kRead, 0, 100, va(target), key);
  r.run();
  EXPECT_EQ(one_completion(r), WcStatus::kRemAccessErr);
  EXPECT_EQ(std::count(r.a.mem.begin(), r.a.mem.begin() + 100, 0x22), 0);
}

TEST(Protection, Write_MrWithoutRemoteWriteRefusedMemoryUntouched) {
  for (uint32_t acc : {access::kLocalWrite, access::kRemoteRead,
                       access::kLocalWrite | access::kRemoteRead | access::kRemoteAtomic}) {
    Loop l;
    std::vector<uint8_t> region(8192, 0x3c);
    const uint32_t key = reg(l.b.eng, region, acc);
    std::fill(l.a.mem.begin(), l.a.mem.begin() + 4096, 0xa5);
    post(l, 1, Opcode::kWrite, 0, 4096, va(region), key);
    l.run();
    EXPECT_EQ(one_completion(l), WcStatus::kRemAccessErr) << "access " << acc;
    EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](uint8_t b) { return b == 0x3c; }));
    EXPECT_GT(l.b.eng.stats().dropped(Drop::kRemoteAccess), 0u);
  }
}

TEST(Protection, WriteRead_AnotherMrsKeyDoesNotReachThatMr) {
  Loop l;
  std::vector<uint8_t> mine(8192, 0x11), theirs(8192, 0x22);
  const uint32_t acc = access::kRemoteWrite | access::kRemoteRead;
  const uint32_t my_key = reg(l.b.eng, mine, acc);
  const uint32_t their_key = reg(l.b.eng, theirs, acc);
  std::fill(l.a.mem.begin(), l.a.mem.begin() + 4096, 0xa5);
  // WRITE into `theirs` with `mine`'s key: refused, though `theirs` is writable with its own.
  post(l, 1, Opcode::kWrite, 0, 100, va(theirs), my_key);
  l.run();
  EXPECT_EQ(one_completion(l), WcStatus::kRemAccessErr);
  EXPECT_TRUE(std::all_of(theirs.begin(), theirs.end(), [](uint8_t b) { return b == 0x22; }));
  EXPECT_TRUE(std::all_of(mine.begin(), mine.end(), [](uint8_t b) { return b == 0x11; }));

  // Same for READ, on a fresh connection: nothing of `theirs` reaches A.
  Loop r;
  std::vector<uint8_t> mine2(8192, 0x11), theirs2(8192, 0x22);
  const uint32_t k2 = reg(r.b.eng, mine2, acc);
  (void)reg(r.b.eng, theirs2, acc);
  expect_read_refused(r, theirs2, k2);

  // Control: each key reaches its own MR.
  Loop ok;
  std::vector<uint8_t> dst(8192, 0x22);
  const uint32_t k3 = reg(ok.b.eng, dst, acc);
  std::fill(ok.a.mem.begin(), ok.a.mem.begin() + 100, 0xa5);
  post(ok, 3, Opcode::kWrite, 0, 100, va(dst), k3);
  ok.run();
  EXPECT_EQ(one_completion(ok), WcStatus::kSuccess);
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0xa5), 100);
  (void)their_key;
}

TEST(Protection, AnotherPdsMr_NeitherThePeerNorTheQpReachesIt) {
  // The loop's QPs are in protection domain 0; these MRs are in PD 7, with every access.
  const uint32_t all = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
  Loop l;
  std::vector<uint8_t> other(8192, 0x22);
  const uint32_t key =
      l.b.eng.register_mr(other.data(), other.size(), va(other), all, /*pd=*/7).value();
  std::fill(l.a.mem.begin(), l.a.mem.begin() + 4096, 0xa5);
  post(l, 1, Opcode::kWrite, 0, 4096, va(other), key);
  l.run();
  EXPECT_EQ(one_completion(l), WcStatus::kRemAccessErr);
  EXPECT_TRUE(std::all_of(other.begin(), other.end(), [](uint8_t b) { return b == 0x22; }));

  Loop r;
  std::vector<uint8_t> other2(8192, 0x22);
  expect_read_refused(
      r, other2,
      r.b.eng.register_mr(other2.data(), other2.size(), va(other2), all, /*pd=*/7).value());

  // Locally (a fresh connection: a remote access error fails the QP): a send SGE or a
  // receive buffer in PD 7 is no key for a PD 0 QP.
  Loop r2;
  std::vector<uint8_t> mine(4096, 0x33);
  const uint32_t lkey =
      r2.a.eng.register_mr(mine.data(), mine.size(), va(mine), all, /*pd=*/7).value();
  Sge sge{va(mine), 100, lkey};
  SendWr wr;
  wr.opcode = Opcode::kWrite;
  wr.sg = {&sge, 1};
  wr.remote_addr = va(r2.b.mem);
  wr.rkey = r2.b.key;
  auto s = r2.a.eng.post_send(r2.a.qpn, wr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), Error::kLocalAccess);
  // (A receive buffer is checked when a SEND lands: Receive_* below.)
  // The same memory registered in the QP's PD works.
  const uint32_t ok_key = r2.a.eng.register_mr(mine.data(), mine.size(), va(mine), all).value();
  sge.lkey = ok_key;
  EXPECT_TRUE(r2.a.eng.post_send(r2.a.qpn, wr).ok());
  r2.run();
  EXPECT_EQ(one_completion(r2), WcStatus::kSuccess);
  EXPECT_EQ(std::count(r2.b.mem.begin(), r2.b.mem.begin() + 100, 0x33), 100);
}

// B's receive names a key of another PD: accepted at post (as a NIC takes it), and the SEND
// that lands in it fails B's QP (a local protection error) and A's SEND with REM_OP_ERR (a
// NACK, not a timeout); B's memory stays as it was.
TEST(Protection, Receive_AnotherPdsKeyIsRemoteOpErrorNotATimeout) {
  Loop l;
  std::vector<uint8_t> other(4096, 0x22);
  const uint32_t key =
      l.b.eng.register_mr(other.data(), other.size(), va(other), access::kLocalWrite, 7).value();
  Sge sge{va(other), 100, key};
  ASSERT_TRUE(l.b.eng.post_recv(l.b.qpn, RecvWr{9, {&sge, 1}}).ok());
  l.post_write(l.a, 1, 0, 100, 0, Opcode::kSend);
  l.run(std::chrono::milliseconds(
      100));  // well below the retransmission budget: the NACK, not a timeout, ends it
  EXPECT_EQ(one_completion(l), WcStatus::kRemOpErr);
  auto rb = l.poll(l.b);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_NE(rb[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::all_of(other.begin(), other.end(), [](uint8_t b) { return b == 0x22; }));
}

// reregister_mr keeps the key: a receive posted before the MR moved away from its buffer fails
// when the SEND lands (REM_OP_ERR at A); on a fresh connection, one posted in the MR's new
// range is filled there.
TEST(Protection, Receive_CheckedAgainstTheMrAsReregistered) {
  Loop l;
  l.post_recv(l.b, 9, 0, 100);
  std::vector<uint8_t> moved(4096, 0x44);
  ASSERT_TRUE(
      l.b.eng.reregister_mr(l.b.key, moved.data(), moved.size(), va(moved), access::kLocalWrite, 0)
          .ok());
  l.post_write(l.a, 1, 0, 100, 0, Opcode::kSend);
  l.run(std::chrono::milliseconds(100));
  EXPECT_EQ(one_completion(l), WcStatus::kRemOpErr);
  EXPECT_EQ(std::count(l.b.mem.begin(), l.b.mem.begin() + 100, 2), 100);  // B's fill, untouched

  Loop r;
  std::vector<uint8_t> there(4096, 0x44);
  ASSERT_TRUE(
      r.b.eng.reregister_mr(r.b.key, there.data(), there.size(), va(there), access::kLocalWrite, 0)
          .ok());
  Sge sge{va(there), 100, r.b.key};
  ASSERT_TRUE(r.b.eng.post_recv(r.b.qpn, RecvWr{9, {&sge, 1}}).ok());
  r.post_write(r.a, 1, 0, 100, 0, Opcode::kSend);
  r.run();
  EXPECT_EQ(one_completion(r), WcStatus::kSuccess);
  EXPECT_EQ(std::count(there.begin(), there.begin() + 100, 1), 100);  // A's fill
  EXPECT_FALSE(r.b.eng.reregister_mr(0x12345, there.data(), 1, va(there), 0, 0).ok());
}

// The whole-space MR (verbs' implicit ODP MR: nullptr, iova 0, UINT64_MAX bytes) reaches any
// buffer of the process by its address; check_mr answers for it as for any MR.
TEST(Protection, WholeSpaceMr_ReachesAnyAddress) {
  Loop l;
  const uint32_t all = l.a.eng.register_mr(nullptr, UINT64_MAX, 0, access::kLocalWrite).value();
  std::vector<uint8_t> src(256, 0x5a);
  EXPECT_TRUE(l.a.eng.check_mr(all, va(src), src.size(), 0).ok());
  EXPECT_EQ(l.a.eng.check_mr(all, va(src), src.size(), 3).error(), Error::kNoSuchMr);
  EXPECT_EQ(l.a.eng.check_mr(l.a.key, va(src), src.size(), 0).error(), Error::kLocalAccess);
  EXPECT_FALSE(l.a.eng.register_mr(nullptr, UINT64_MAX, 1, access::kLocalWrite).ok());
  std::fill(l.a.mem.begin(), l.a.mem.begin() + 256, 0x5a);
  post(l, 1, Opcode::kWrite, 0, 256, va(l.b.mem), l.b.key, all);
  l.run();
  EXPECT_EQ(one_completion(l), WcStatus::kSuccess);
  EXPECT_EQ(std::count(l.b.mem.begin(), l.b.mem.begin() + 256, 0x5a), 256);
}

TEST(Protection, Read_OutsideRegisteredRangeRefusedNothingLeaks) {
  // B registers only the middle of a buffer; the rest holds a secret.
  std::vector<uint8_t> buf(3 * 4096, 0xee);
  std::fill(buf.begin() + 4096, buf.begin() + 2 * 4096, 0x55);
  struct Case {
    int64_t start;  // relative to the MR's first byte
    uint32_t len;
    bool ok;
  };
  for (const Case& c : {Case{0, 4096, true}, Case{-1, 100, false}, Case{4000, 97, false},
                        Case{4096, 1, false}, Case{-4096, 8192, false}}) {
    Loop l;
    const uint32_t key = reg(l.b.eng, buf, access::kRemoteRead, 4096, 4096);
    post(l, 1, Opcode::kRead, 0, c.len, va(buf, 4096) + c.start, key);
    l.run();
    EXPECT_EQ(one_completion(l), c.ok ? WcStatus::kSuccess : WcStatus::kRemAccessErr)
        << c.start << "+" << c.len;
    EXPECT_EQ(std::count(l.a.mem.begin(), l.a.mem.begin() + c.len, 0xee), 0)
        << "secret leaked at " << c.start << "+" << c.len;
    if (!c.ok) {
      EXPECT_EQ(std::count(l.a.mem.begin(), l.a.mem.begin() + c.len, 1), c.len);  // untouched
      EXPECT_GT(l.b.eng.stats().dropped(Drop::kRemoteAccess), 0u);
    }
  }
}

TEST(Protection, Deregister_KeyDeadAfterItsSlotHoldsANewMr) {
  Loop l;
  std::vector<uint8_t> region(8192, 0x44);
  const uint32_t acc = access::kRemoteWrite | access::kRemoteRead;
  const uint32_t old_key = reg(l.b.eng, region, acc);
  std::fill(l.a.mem.begin(), l.a.mem.begin() + 8192, 0xa5);
  post(l, 1, Opcode::kWrite, 0, 10, va(region), old_key);
  l.run();
  ASSERT_EQ(one_completion(l), WcStatus::kSuccess);  // the key works while registered
  std::fill(region.begin(), region.end(), 0x44);

  // Deregister it, then churn registrations until its slot is reused: the same memory,
  // with the same access, under a new key of the same slot.
  ASSERT_TRUE(l.b.eng.deregister_mr(old_key).ok());
  uint32_t new_key = 0;
  std::vector<uint32_t> others;
  for (int i = 0; i < 64 && new_key == 0; ++i) {
    const uint32_t k = reg(l.b.eng, region, acc);
    if ((k >> 8) == (old_key >> 8))
      new_key = k;
    else
      others.push_back(k);
    if (others.size() > 20) {
      ASSERT_TRUE(l.b.eng.deregister_mr(others.front()).ok());
      others.erase(others.begin());
    }
  }
  ASSERT_NE(new_key, 0u) << "the old key's slot was never reused";
  ASSERT_NE(new_key, old_key);

  // WRITE and READ with the dead key: REM_ACCESS_ERR at the requester, memory untouched.
  post(l, 2, Opcode::kWrite, 0, 8192, va(region), old_key);
  l.run();
  EXPECT_EQ(one_completion(l), WcStatus::kRemAccessErr);
  EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](uint8_t b) { return b == 0x44; }));

  Loop r;
  std::vector<uint8_t> reg2(4096, 0x44);
  const uint32_t dead = reg(r.b.eng, reg2, acc);
  ASSERT_TRUE(r.b.eng.deregister_mr(dead).ok());
  EXPECT_EQ(r.b.eng.deregister_mr(dead).error(), Error::kNoSuchMr);  // and not twice
  post(r, 3, Opcode::kRead, 0, 4096, va(reg2), dead);
  r.run();
  EXPECT_EQ(one_completion(r), WcStatus::kRemAccessErr);
  EXPECT_EQ(std::count(r.a.mem.begin(), r.a.mem.begin() + 4096, 0x44), 0);
}

// A peer that holds the token and crafts packets itself (not an honest requester): offsets,
// lengths and addresses that reach past the MR are refused before anything is placed.
TEST(Protection, ForgedWrite_OffsetLengthAddressOutsideMrRefused) {
  Loop l;
  std::vector<uint8_t> region(4 * 4096, 0x66);
  const uint32_t key = reg(l.b.eng, region, access::kRemoteWrite, 4096, 2 * 4096);
  std::vector<uint8_t> payload(1024, 0xa5);
  uint32_t psn = 1000;  // the loop's first PSN: each forgery is the next in-window PSN
  auto forge = [&](uint64_t addr, uint32_t msg_len, uint32_t offset, uint32_t rkey) {
    wire::Packet p;
    p.common.kind = wire::Kind::kWrite;
    p.common.flags = wire::flag::kFirst | wire::flag::kLast | wire::flag::kPayloadCrc;
    p.common.dst_qpn = l.b.qpn;
    p.common.token = l.b.token;
    p.common.ev = 0x100;
    p.common.psn = psn++;
    p.data.addr = addr;
    p.data.rkey = rkey;
    p.data.offset = offset;
    p.data.msg_len = msg_len;
    p.data.payload_len = static_cast<uint16_t>(payload.size());
    std::vector<uint8_t> d(wire::kDataHeaderSize);
    wire::encode_header(p, payload, d);
    d.insert(d.end(), payload.begin(), payload.end());
    l.b.eng.on_datagram(l.now, {}, d);
  };
  const uint64_t base = va(region, 4096);
  forge(base, 1024, 2 * 4096, key);            // offset past msg_len
  forge(base + 2 * 4096 - 512, 1024, 0, key);  // runs past the MR's end
  forge(base - 512, 1024, 0, key);             // starts before it
  forge(base, 1024, 0, key ^ 0x100);           // a key of another slot
  forge(base, 1024, 0, key + 1);               // the next generation of this slot
  forge(UINT64_MAX - 100, 1024, 0, key);       // address arithmetic that would wrap
  EXPECT_EQ(l.b.eng.stats().dropped(Drop::kRemoteAccess), 6u);
  EXPECT_EQ(l.b.eng.qp_stats(l.b.qpn)->rx_data_packets, 0u);
  EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](uint8_t b) { return b == 0x66; }));
  // Control: the same forgery inside the MR is placed (the token is all it takes).
  forge(base, 1024, 0, key);
  EXPECT_EQ(l.b.eng.qp_stats(l.b.qpn)->rx_data_packets, 1u);
  EXPECT_EQ(std::count(region.begin(), region.end(), 0xa5), 1024);
}

// The QP's own access flags (verbs qp_access_flags) are checked next to the MR's: a QP that
// does not grant remote WRITE (READ) refuses it even into an MR that allows it, as a NIC does;
// what it grants still works.
TEST(Protection, QpAccessFlags_RefuseWhatTheQpDoesNotGrant) {
  const uint32_t mr_all = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
  // B's QP grants qp_acc; B's region is registered with every access. A remote access
  // error fails A's QP, so the WRITE and the READ each get a fresh pair.
  struct Pair {
    Loop l;
    std::vector<uint8_t> region = std::vector<uint8_t>(8192, 0x22);
    uint32_t key = 0;
    explicit Pair(uint32_t qp_acc, uint32_t mr_acc) {
      key = reg(l.b.eng, region, mr_acc);
      QpAttr at;
      at.access = qp_acc;
      EXPECT_TRUE(l.b.eng.modify_qp(l.b.qpn, at, attr::kAccess).ok());
      std::fill(l.a.mem.begin(), l.a.mem.begin() + 4096, 0xa5);
    }
  };
  for (uint32_t qp_acc : {0u, access::kRemoteRead, access::kRemoteWrite}) {
    Pair w(qp_acc, mr_all);
    post(w.l, 1, Opcode::kWrite, 0, 4096, va(w.region), w.key);
    w.l.run();
    const bool write_ok = qp_acc & access::kRemoteWrite;
    EXPECT_EQ(one_completion(w.l), write_ok ? WcStatus::kSuccess : WcStatus::kRemAccessErr)
        << "QP access " << qp_acc;
    EXPECT_EQ(std::count(w.region.begin(), w.region.end(), 0xa5), write_ok ? 4096 : 0)
        << "QP access " << qp_acc;

    Pair r(qp_acc, mr_all);
    if (qp_acc & access::kRemoteRead) {
      post(r.l, 2, Opcode::kRead, 0, 100, va(r.region), r.key);
      r.l.run();
      EXPECT_EQ(one_completion(r.l), WcStatus::kSuccess) << "QP access " << qp_acc;
      EXPECT_EQ(std::count(r.l.a.mem.begin(), r.l.a.mem.begin() + 100, 0x22), 100);
    } else {
      expect_read_refused(r.l, r.region, r.key);
    }
  }
}

}  // namespace
}  // namespace mrc::engine
