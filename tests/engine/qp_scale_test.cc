// The engine holding thousands of QPs (issue 14): a rotating few carry traffic among
// thousands connected and idle; deadlines come from the QPs that have timers only; an
// idle connected QP holds a few KiB (counted by a global allocator hook, no timing);
// the per-QP buffers (internal.h SeqRing, Fifo) grow on demand and keep their order.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "engine/internal.h"
#include "mrc/engine/engine.h"

// ---- heap accounting: every operator new/delete of this test binary (all forms, so that
// none falls through to a sanitizer's own and meets ours at free) ------------------------
namespace {
size_t g_live = 0;  // bytes the allocator handed out and not yet freed (usable sizes)
void* counted(void* p) {
  if (!p) throw std::bad_alloc();
  g_live += malloc_usable_size(p);
  return p;
}
void uncount(void* p) {
  if (p) g_live -= malloc_usable_size(p);
}
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

void* operator new(size_t n) { return counted(std::malloc(n ? n : 1)); }
void* operator new[](size_t n) { return counted(std::malloc(n ? n : 1)); }
void* operator new(size_t n, std::align_val_t a) {
  const auto al = static_cast<size_t>(a);
  return counted(std::aligned_alloc(al, round_up(n ? n : 1, al)));
}
void* operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  void* p = std::malloc(n ? n : 1);
  if (p) g_live += malloc_usable_size(p);
  return p;
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  const auto al = static_cast<size_t>(a);
  void* p = std::aligned_alloc(al, round_up(n ? n : 1, al));
  if (p) g_live += malloc_usable_size(p);
  return p;
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return operator new(n, a, t);
}
// Every new above takes its memory from malloc, so free is the matching release; GCC warns
// on free inside a replaced operator delete all the same (-Wmismatched-new-delete).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept {
  uncount(p);
  std::free(p);
}
#pragma GCC diagnostic pop
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }
void operator delete(void* p, std::align_val_t) noexcept { operator delete(p); }
void operator delete[](void* p, std::align_val_t) noexcept { operator delete(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { operator delete(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { operator delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { operator delete(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  operator delete(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  operator delete(p);
}

namespace mrc::engine {
namespace {

constexpr uint32_t kPaths = 16;  // 4 planes x 4 EVs, as a multi-plane NIC sprays

std::vector<Path> paths() {
  std::vector<Path> p;
  for (uint32_t i = 0; i < kPaths; ++i) p.push_back(Path{0x100 + i, static_cast<uint16_t>(i / 4)});
  return p;
}

void connect(Engine& e, Qpn q, PeerId peer, Qpn dest, uint32_t token) {
  QpAttr at;
  at.state = QpState::kInit;
  ASSERT_TRUE(e.modify_qp(q, at, attr::kState).ok());
  at.state = QpState::kRtr;
  at.peer = peer;
  at.dest_qpn = dest;
  at.remote_token = token;
  at.paths = paths();
  ASSERT_TRUE(e.modify_qp(q, at, attr::kState | attr::kDest | attr::kPaths).ok());
  at.state = QpState::kRts;
  ASSERT_TRUE(e.modify_qp(q, at, attr::kState).ok());
}

/// N connected QP pairs between engines a and b over a wire with a fixed latency; a
/// hook may drop datagrams.
struct Fleet {
  Engine a, b;
  CqId acq = 0, bcq = 0;
  std::vector<Qpn> aq, bq;
  std::vector<uint8_t> amem, bmem;
  uint32_t akey = 0, bkey = 0;
  Time now{1'000'000};
  Duration latency{2'000};
  std::function<bool(int from, const Transmit&)> drop;  // true: lost on the wire

  explicit Fleet(uint32_t n, size_t mem = 1 << 20) : amem(mem), bmem(mem) {
    acq = a.create_cq(1 << 16).value();
    bcq = b.create_cq(1 << 16).value();
    const uint32_t acc = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
    akey = a.register_mr(amem.data(), mem, reinterpret_cast<uint64_t>(amem.data()), acc).value();
    bkey = b.register_mr(bmem.data(), mem, reinterpret_cast<uint64_t>(bmem.data()), acc).value();
    for (uint32_t i = 0; i < n; ++i) {
      QpInit ia;
      ia.send_cq = ia.recv_cq = acq;
      ia.local_token = 2 * i + 1;
      QpInit ib = ia;
      ib.send_cq = ib.recv_cq = bcq;
      ib.local_token = 2 * i + 2;
      aq.push_back(a.create_qp(ia).value());
      bq.push_back(b.create_qp(ib).value());
    }
    for (uint32_t i = 0; i < n; ++i) {
      connect(a, aq[i], 1, bq[i], 2 * i + 2);
      connect(b, bq[i], 0, aq[i], 2 * i + 1);
    }
  }

  struct InFlight {
    Time at;
    int to;
    std::vector<uint8_t> bytes;
  };
  std::vector<InFlight> wire;  // a vector, not a deque: its memory settles (BuffersGrow...)

  Engine& eng(int i) { return i == 0 ? a : b; }
  /// A WRITE of `len` bytes from the start of a's memory to the start of b's; `s` keeps its SGE.
  SendWr write_wr(Sge& s, uint32_t len, uint64_t wr_id = 0) const {
    s = Sge{reinterpret_cast<uint64_t>(amem.data()), len, akey};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.sg = {&s, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(bmem.data());
    wr.rkey = bkey;
    return wr;
  }
  void pump() {
    std::vector<uint8_t> buf(kTransmitBufferSize);
    for (int i = 0; i < 2; ++i)
      while (auto t = eng(i).poll_transmit(now, buf)) {
        if (drop && drop(i, *t)) continue;
        std::vector<uint8_t> d(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(t->header_len));
        d.insert(d.end(), t->payload.begin(), t->payload.end());
        wire.push_back({now + latency, 1 - i, std::move(d)});
      }
  }
  /// One step of virtual time: to the next wire arrival or deadline. False when there
  /// is nothing left to happen.
  bool step() {
    pump();
    Time next = std::min(a.next_deadline(), b.next_deadline());
    if (!wire.empty()) next = std::min(next, wire.front().at);
    if (next == kNever) return false;
    now = std::max(now, next);
    while (!wire.empty() && wire.front().at <= now) {
      InFlight f = std::move(wire.front());
      wire.erase(wire.begin());
      eng(f.to).on_datagram(now, RxInfo{}, f.bytes);
    }
    a.on_timeout(now);
    b.on_timeout(now);
    return true;
  }
};

// A few QPs at a time carry WRITEs, SENDs and READs among 3,000 connected ones; the turn
// moves on with every completion. Every message completes with the right bytes, the QPs
// never used sent and received nothing, and once done both engines go quiet.
TEST(QpScale, RotatingFewAmongThousandsAllComplete) {
  constexpr uint32_t kQps = 3000, kMsgs = 120, kActive = 8, kLen = 6000, kSlot = 8192;
  Fleet f(kQps, kMsgs * kSlot);
  auto qp_of = [](uint32_t m) { return (m * 37) % kQps; };  // spread over the whole fleet
  for (uint32_t m = 0; m < kMsgs; ++m)
    for (uint32_t k = 0; k < kLen; ++k) {
      f.amem[m * kSlot + k] = static_cast<uint8_t>(m * 7 + k);
      f.bmem[m * kSlot + k] = static_cast<uint8_t>(m * 13 + k);  // READ sources
    }
  uint32_t next = 0, done = 0;
  auto post = [&](uint32_t m) {
    const uint32_t k = qp_of(m);
    const uint64_t off = uint64_t{m} * kSlot;
    Sge s{reinterpret_cast<uint64_t>(f.amem.data()) + off, kLen, f.akey};
    SendWr wr;
    wr.wr_id = m;
    wr.sg = {&s, 1};
    wr.opcode = m % 3 == 0 ? Opcode::kWrite : m % 3 == 1 ? Opcode::kSend : Opcode::kRead;
    wr.remote_addr = reinterpret_cast<uint64_t>(f.bmem.data()) + off;
    wr.rkey = f.bkey;
    if (wr.opcode == Opcode::kSend) {
      Sge r{reinterpret_cast<uint64_t>(f.bmem.data()) + off, kLen, f.bkey};
      ASSERT_TRUE(f.b.post_recv(f.bq[k], RecvWr{m, {&r, 1}}).ok());
    }
    ASSERT_TRUE(f.a.post_send(f.aq[k], wr).ok());
  };
  while (next < kActive) post(next++);
  std::vector<Completion> comps(64);
  uint32_t recvs = 0;
  for (int guard = 0; guard < 1'000'000 && done < kMsgs; ++guard) {
    ASSERT_TRUE(f.step());
    for (size_t i = 0, n = f.a.poll_cq(f.acq, comps); i < n; ++i) {
      ASSERT_EQ(comps[i].status, WcStatus::kSuccess) << comps[i].wr_id;
      ASSERT_EQ(comps[i].qpn, f.aq[qp_of(static_cast<uint32_t>(comps[i].wr_id))]);
      ++done;
      if (next < kMsgs) post(next++);
    }
    for (size_t i = 0, n = f.b.poll_cq(f.bcq, comps); i < n; ++i) {
      ASSERT_EQ(comps[i].status, WcStatus::kSuccess);
      ++recvs;
    }
  }
  ASSERT_EQ(done, kMsgs);
  while (f.step()) {
  }
  for (size_t i = 0, n = f.b.poll_cq(f.bcq, comps); i < n; ++i) ++recvs;
  EXPECT_EQ(recvs, kMsgs / 3);
  for (uint32_t m = 0; m < kMsgs; ++m) {
    const bool read = m % 3 == 2;
    const auto& dst = read ? f.amem : f.bmem;
    for (uint32_t k = 0; k < kLen; ++k)
      ASSERT_EQ(dst[m * kSlot + k], static_cast<uint8_t>(read ? m * 13 + k : m * 7 + k))
          << "message " << m << " byte " << k;
  }
  std::vector<bool> used(kQps);
  for (uint32_t m = 0; m < kMsgs; ++m) used[qp_of(m)] = true;
  for (uint32_t k = 0; k < kQps; ++k) {
    if (used[k]) continue;
    const QpStats* sa = f.a.qp_stats(f.aq[k]);
    const QpStats* sb = f.b.qp_stats(f.bq[k]);
    ASSERT_EQ(sa->tx_data_packets + sa->rx_acks + sa->completions, 0u) << k;
    ASSERT_EQ(sb->rx_data_packets + sb->tx_acks + sb->completions, 0u) << k;
  }
  EXPECT_TRUE(f.a.idle());
  EXPECT_TRUE(f.b.idle());
  EXPECT_EQ(f.a.next_deadline(), kNever);
  EXPECT_EQ(f.b.next_deadline(), kNever);
}

// 4,096 connected QPs, one of them loses its only packet: the engine's deadline is that
// QP's retransmission timeout to the nanosecond, the timeout resends that packet and
// nothing else, and once it is acknowledged no deadline is left.
TEST(QpScale, DeadlineIsTheOneArmedQpsTimeout) {
  constexpr uint32_t kQps = 4096, kLossy = 1234;
  Fleet f(kQps);
  EXPECT_EQ(f.a.next_deadline(), kNever);
  uint32_t dropped = 0;
  f.drop = [&](int from, const Transmit&) { return from == 0 && dropped++ == 0; };
  Sge s;
  const SendWr wr = f.write_wr(s, 100, 7);
  ASSERT_TRUE(f.a.post_send(f.aq[kLossy], wr).ok());
  const Time sent = f.now;
  f.pump();
  ASSERT_EQ(dropped, 1u);
  const Duration rto = RetryPolicy{QpAttr{}.timeout, 7, 0}.base();  // 1.024 us x 2^16
  EXPECT_EQ(f.a.next_deadline(), sent + rto);
  EXPECT_EQ(f.b.next_deadline(), kNever);
  f.now = sent + rto;
  f.a.on_timeout(f.now);
  // What leaves now: the lost packet, resent, and (the loss being the QP's first sign of
  // congestion) its one PROBE of a learned base RTT (Core::probe_base_rtt); nothing else.
  std::vector<uint8_t> buf(kTransmitBufferSize);
  size_t resent = 0, probes = 0;
  while (auto t = f.a.poll_transmit(f.now, buf)) {
    const auto p = wire::decode({buf.data(), t->header_len + t->payload.size()});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->common.dst_qpn, f.bq[kLossy]);
    if (p->common.kind == wire::Kind::kProbe) {
      ++probes;
    } else {
      EXPECT_TRUE(p->common.flags & wire::flag::kRetransmit);
      ++resent;
    }
    f.b.on_datagram(f.now, RxInfo{}, {buf.data(), t->header_len + t->payload.size()});
  }
  EXPECT_EQ(resent, 1u);
  EXPECT_LE(probes, 1u);
  while (f.step()) {
  }
  std::vector<Completion> comps(4);
  ASSERT_EQ(f.a.poll_cq(f.acq, comps), 1u);
  EXPECT_EQ(comps[0].wr_id, 7u);
  EXPECT_EQ(comps[0].status, WcStatus::kSuccess);
  EXPECT_EQ(f.a.qp_stats(f.aq[kLossy])->rto_fired, 1u);
  EXPECT_EQ(f.a.next_deadline(), kNever);
  EXPECT_EQ(f.b.next_deadline(), kNever);
}

// One WRITE among 64 QPs, acknowledged: the ACK cancels every timer of both QPs, and
// next_deadline() says so at once (kNever), not at the time the cancelled RTO would have
// come due: a driver that arms its timer from it does not wake for nothing, and on_timeout
// never visits the QP for a timer that is gone (issues 14 and 17: the engine's timer heap
// kept such an entry and ran the QP's timeouts when it came due).
TEST(QpScale, NextDeadline_NeverOnceAnAckCancelsEveryTimer) {
  Fleet f(64);
  Sge s;
  SendWr wr = f.write_wr(s, 100, 1);
  std::vector<Completion> comps(4);
  for (uint64_t m = 1; m <= 3; ++m) {  // the first without an RTT sample, then with one
    wr.wr_id = m;
    ASSERT_TRUE(f.a.post_send(f.aq[17], wr).ok());
    const Time sent = f.now;
    f.pump();
    EXPECT_GT(f.a.next_deadline(), sent) << "message " << m << ": no timer armed";
    size_t n = 0;
    for (int guard = 0; guard < 100 && n == 0; ++guard) {
      ASSERT_TRUE(f.step());
      n = f.a.poll_cq(f.acq, comps);
    }
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(comps[0].wr_id, m);
    f.pump();
    EXPECT_EQ(f.a.next_deadline(), kNever) << "message " << m << ": a cancelled timer";
    EXPECT_EQ(f.b.next_deadline(), kNever) << "message " << m;
    f.now += std::chrono::microseconds(50);
  }
  EXPECT_EQ(f.a.qp_stats(f.aq[17])->rto_fired, 0u);
  EXPECT_EQ(f.a.qp_stats(f.aq[17])->tail_probes, 0u);
}

// A QP's timer pushed later (a second message sent after the first was acknowledged, whose
// own packet is lost): the deadline is the second message's, never one of the first's
// cancelled timers, and that timer recovers the loss; then nothing is left.
TEST(QpScale, NextDeadline_FollowsTheLaterTimerOfANewMessage) {
  Fleet f(64);
  Sge s;
  SendWr wr = f.write_wr(s, 100);
  std::vector<Completion> comps(4);
  wr.wr_id = 1;
  ASSERT_TRUE(f.a.post_send(f.aq[5], wr).ok());
  size_t n = 0;
  for (int guard = 0; guard < 100 && n == 0; ++guard) {
    ASSERT_TRUE(f.step());
    n = f.a.poll_cq(f.acq, comps);
  }
  ASSERT_EQ(n, 1u);
  // Later than anything the first message armed (its RTO: 67 ms), well before it came due.
  f.now += std::chrono::milliseconds(1);
  bool dropped = false;
  f.drop = [&](int from, const Transmit&) { return from == 0 && !std::exchange(dropped, true); };
  wr.wr_id = 2;
  ASSERT_TRUE(f.a.post_send(f.aq[5], wr).ok());
  const Time sent = f.now;
  f.pump();
  ASSERT_TRUE(dropped);
  const Duration rto = RetryPolicy{QpAttr{}.timeout, 7, 0}.base();
  const Time deadline = f.a.next_deadline();
  EXPECT_GT(deadline, sent);
  EXPECT_LE(deadline, sent + rto);
  EXPECT_EQ(f.b.next_deadline(), kNever);
  n = 0;
  for (int guard = 0; guard < 100 && n == 0; ++guard) {
    ASSERT_TRUE(f.step());
    n = f.a.poll_cq(f.acq, comps);
  }
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(comps[0].wr_id, 2u);
  EXPECT_EQ(comps[0].status, WcStatus::kSuccess);
  while (f.step()) {
  }
  EXPECT_EQ(f.a.next_deadline(), kNever);
  EXPECT_EQ(f.b.next_deadline(), kNever);
}

// A QP whose later timer stays put (a READ whose request was lost: its RTO) while its
// delayed ACK is armed and cancelled once per message it receives (10,000 two-packet WRITEs
// from its peer: the first packet arms kAck, the second is ACKed at once, which cancels it).
// Each ACK pushed an earlier entry and then brought the QP back to the RTO's time; the
// entries already at that time stayed in the heap and matched it again, one more per ACK,
// until the RTO came due (issue 14). A generation number in
// each entry makes exactly one of them speak for the QP, so the heap holds about one entry
// per QP with a timer; the RTO still comes due at its time and recovers the READ.
TEST(QpScale, TimerHeap_BoundedWhileALaterTimerStaysPut) {
  constexpr uint32_t kQps = 64, kMsgs = 10'000, kQ = 3;
  Fleet f(kQps);
  QpAttr slow;
  slow.timeout = 22;  // 4.3 s: the READ's RTO stays put for the whole run
  ASSERT_TRUE(f.a.modify_qp(f.aq[kQ], slow, attr::kTimeout).ok());
  for (uint32_t k = 0; k < 100; ++k) f.bmem[4096 + k] = static_cast<uint8_t>(k + 1);
  Sge rs{reinterpret_cast<uint64_t>(f.amem.data()) + 4096, 100, f.akey};
  SendWr rd;
  rd.wr_id = 1;
  rd.opcode = Opcode::kRead;
  rd.sg = {&rs, 1};
  rd.remote_addr = reinterpret_cast<uint64_t>(f.bmem.data()) + 4096;
  rd.rkey = f.bkey;
  ASSERT_TRUE(f.a.post_send(f.aq[kQ], rd).ok());
  f.drop = [](int from, const Transmit&) { return from == 0; };  // the READ request
  f.pump();
  f.drop = nullptr;
  const Time rto_at = f.a.next_deadline();
  ASSERT_NE(rto_at, kNever);
  Sge ws{reinterpret_cast<uint64_t>(f.bmem.data()), 2 * QpAttr{}.mtu, f.bkey};
  SendWr wr;
  wr.sg = {&ws, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(f.amem.data());
  wr.rkey = f.akey;
  std::vector<Completion> comps(4);
  size_t most = 0;
  for (uint32_t m = 0; m < kMsgs; ++m) {
    wr.wr_id = m;
    ASSERT_TRUE(f.b.post_send(f.bq[kQ], wr).ok());
    size_t n = 0;
    for (int guard = 0; guard < 100 && n == 0; ++guard) {
      ASSERT_TRUE(f.step());
      most = std::max(most, f.a.timer_heap_size());
      n = f.b.poll_cq(f.bcq, comps);
    }
    ASSERT_EQ(n, 1u) << "message " << m;
    ASSERT_EQ(comps[0].status, WcStatus::kSuccess);
  }
  EXPECT_GE(f.a.qp_stats(f.aq[kQ])->tx_acks, kMsgs);
  ASSERT_LT(f.now, rto_at);  // the later timer stayed put throughout
  EXPECT_EQ(f.a.next_deadline(), rto_at);
  EXPECT_LE(most, 4u) << "one QP with timers among " << kQps;
  // The RTO comes due at its time and resends the READ, which then completes.
  size_t n = 0;
  for (int guard = 0; guard < 100 && n == 0; ++guard) {
    ASSERT_TRUE(f.step());
    n = f.a.poll_cq(f.acq, comps);
  }
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(comps[0].wr_id, 1u);
  EXPECT_EQ(comps[0].status, WcStatus::kSuccess);
  EXPECT_GE(f.now, rto_at);
  EXPECT_EQ(f.a.qp_stats(f.aq[kQ])->rto_fired, 1u);
  EXPECT_EQ(std::memcmp(f.amem.data() + 4096, f.bmem.data() + 4096, 100), 0);
  while (f.step()) {
  }
  EXPECT_EQ(f.a.next_deadline(), kNever);
  EXPECT_EQ(f.a.timer_heap_size(), 0u);
}

// A QP reset with its RTO armed (its WRITE lost) and its slot's next QP, the same QPN made
// ready again at the same instant, arming the same RTO time: exactly one entry speaks for the
// slot (the old one's generation is gone), the RTO fires once, for the new QP, and recovers
// its WRITE. Judged by time alone both entries matched.
TEST(QpScale, TimerHeap_ReusedSlotAfterResetKeepsOneEntry) {
  constexpr uint32_t kQ = 5;
  Fleet f(8);
  Sge s;
  SendWr wr = f.write_wr(s, 100, 1);
  f.drop = [](int from, const Transmit&) { return from == 0; };
  ASSERT_TRUE(f.a.post_send(f.aq[kQ], wr).ok());
  f.pump();
  const Time rto_at = f.a.next_deadline();
  ASSERT_NE(rto_at, kNever);
  QpAttr reset;
  reset.state = QpState::kReset;
  ASSERT_TRUE(f.a.modify_qp(f.aq[kQ], reset, attr::kState).ok());
  connect(f.a, f.aq[kQ], 1, f.bq[kQ], 2 * kQ + 2);
  wr.wr_id = 2;
  ASSERT_TRUE(f.a.post_send(f.aq[kQ], wr).ok());  // the same instant: the same RTO time
  f.pump();
  f.drop = nullptr;
  EXPECT_EQ(f.a.next_deadline(), rto_at);
  EXPECT_EQ(f.a.timer_heap_size(), 1u) << "the reset QP's entry still speaks";
  std::vector<Completion> comps(4);
  size_t n = 0;
  for (int guard = 0; guard < 100 && n == 0; ++guard) {
    ASSERT_TRUE(f.step());
    n = f.a.poll_cq(f.acq, comps);
  }
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(comps[0].wr_id, 2u);
  EXPECT_EQ(comps[0].status, WcStatus::kSuccess);
  EXPECT_EQ(f.now, rto_at + 2 * f.latency);  // resent by the RTO, at its time
  EXPECT_EQ(f.a.qp_stats(f.aq[kQ])->rto_fired, 1u);
  while (f.step()) {
  }
  EXPECT_EQ(f.a.next_deadline(), kNever);
}

// A QP destroyed with its RTO armed, and a new QP given its number (slot) later: the old entry
// never runs the new QP's timeouts (the deadline is the new QP's own RTO, not the old one's,
// which comes first), and the new QP's own RTO fires at its time and recovers its lost WRITE.
TEST(QpScale, TimerHeap_ReusedSlotAfterDestroyRunsOnlyTheNewQpsTimers) {
  constexpr uint32_t kQ = 2;
  Fleet f(4);
  Sge s;
  SendWr wr = f.write_wr(s, 100, 1);
  f.drop = [](int from, const Transmit&) { return from == 0; };
  ASSERT_TRUE(f.a.post_send(f.aq[kQ], wr).ok());
  f.pump();
  f.drop = nullptr;
  const Time old_rto = f.a.next_deadline();
  ASSERT_NE(old_rto, kNever);
  const Qpn gone = f.aq[kQ];
  ASSERT_TRUE(f.a.destroy_qp(gone).ok());
  // QPNs are reused late (after 64 others were freed): free 65 more, then take the first.
  QpInit init;
  init.send_cq = init.recv_cq = f.acq;
  std::vector<Qpn> others;
  for (int i = 0; i < 65; ++i) {
    init.local_token = 1000 + i;
    others.push_back(f.a.create_qp(init).value());
  }
  for (Qpn q : others) ASSERT_TRUE(f.a.destroy_qp(q).ok());
  f.now += std::chrono::milliseconds(1);
  init.local_token = 2 * kQ + 1;  // what b's QP sends back to
  const Qpn reused = f.a.create_qp(init).value();
  ASSERT_EQ(reused, gone);
  connect(f.a, reused, 1, f.bq[kQ], 2 * kQ + 2);
  EXPECT_EQ(f.a.next_deadline(), kNever) << "the destroyed QP's RTO";
  bool dropped = false;
  f.drop = [&](int from, const Transmit&) { return from == 0 && !std::exchange(dropped, true); };
  wr.wr_id = 2;
  ASSERT_TRUE(f.a.post_send(reused, wr).ok());
  const Time sent = f.now;
  f.pump();
  ASSERT_TRUE(dropped);
  const Time new_rto = f.a.next_deadline();
  EXPECT_GT(new_rto, old_rto);
  const Duration rto = RetryPolicy{QpAttr{}.timeout, 7, 0}.base();
  EXPECT_LE(new_rto, sent + rto);
  std::vector<Completion> comps(4);
  size_t n = 0;
  for (int guard = 0; guard < 100 && n == 0; ++guard) {
    ASSERT_TRUE(f.step());
    ASSERT_NE(f.now, old_rto) << "woke for the destroyed QP's RTO";
    n = f.a.poll_cq(f.acq, comps);
  }
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(comps[0].wr_id, 2u);
  EXPECT_EQ(comps[0].status, WcStatus::kSuccess);
  EXPECT_EQ(f.now, new_rto + 2 * f.latency);
  EXPECT_EQ(f.a.qp_stats(reused)->rto_fired, 1u);
}

// What an idle connected QP holds: the Qp itself, its window (Nscc), its EVs (a 32-byte
// per-packet record, a cold record, an RTT sample and a by-plane entry each; the path list in
// its attributes, the EV index), its path set's per-plane state (the sprayer's and the
// health's: 56 bytes a plane, for the planes in use only) and the allocator's rounding on each
// of those blocks.
// No send, receive or in-flight ring, no bitmap: those grow with use.
size_t idle_qp_bound() {
  const size_t per_ev = sizeof(PathSet::Hot) + sizeof(PathSet::Cold) + sizeof(uint32_t) +
                        sizeof(uint16_t) + sizeof(Path) + sizeof(std::pair<uint32_t, uint16_t>);
  constexpr size_t kPlanes = 4;     // kPaths over 4 planes (connect)
  constexpr size_t kPerPlane = 56;  // PathSet's Turn (24 bytes) and PlaneState (32)
  // Qp, its window (Nscc), attr.paths, EV block, cold records, index, 2 per-plane.
  constexpr size_t kBlocks = 8;
  constexpr size_t kRounding = 64;  // per block: malloc's header and size classes, alignment
  return sizeof(Qp) + sizeof(Nscc) + kPaths * per_ev + kPlanes * kPerPlane + kBlocks * kRounding +
         2 * sizeof(void*);  // + table slot
}

TEST(QpScale, IdleConnectedQpHoldsFewKib) {
  constexpr uint32_t kQps = 512;
  Engine e;
  const CqId cq = e.create_cq(16).value();
  std::vector<Qpn> qps;
  qps.reserve(kQps);
  const size_t before = g_live;
  for (uint32_t i = 0; i < kQps; ++i) {
    QpInit init;  // defaults: 1,024 send and receive WRs
    init.send_cq = init.recv_cq = cq;
    init.local_token = i + 1;
    qps.push_back(e.create_qp(init).value());
    connect(e, qps.back(), 1, i + 1, i + 1);
  }
  const size_t per_qp = (g_live - before) / kQps;
  EXPECT_LE(per_qp, idle_qp_bound());
  EXPECT_LE(per_qp, 8u << 10);  // "a few KiB" (before on-demand buffers: 909.6 KB)
  for (Qpn q : qps) ASSERT_TRUE(e.destroy_qp(q).ok());
  EXPECT_LE(g_live - before, size_t{64} << 10);  // the QP table itself stays
}

// Qp is laid out by heat and by end: cache-line aligned; what both ends read per packet (state,
// timers, the health view, the creation attributes) first, then the receiving end's block,
// then the sending end's, each end's lines together (a QP that only receives pays 5 lines of
// it per message, one that only sends 8); the stats and the attributes on lines of their own
// (a packet reads the first line of each); configuration and rarely used state after the stats,
// the attributes, the path set and the window (these two from a line boundary).
TEST(QpScale, QpLayout_HotStateFirst) {
  static_assert(alignof(Qp) == 64);
  const auto q = std::make_unique<Qp>();
  const auto base = reinterpret_cast<uintptr_t>(q.get());
  ASSERT_EQ(base % 64, 0u);
  const auto at = [&](const void* field) { return reinterpret_cast<uintptr_t>(field) - base; };
  const auto line = [&](size_t offset) { return offset / 64; };
  // Both ends: lines 0 and 1.
  for (const void* both :
       {static_cast<const void*>(&q->state), static_cast<const void*>(&q->timers),
        static_cast<const void*>(&q->health), static_cast<const void*>(&q->init),
        static_cast<const void*>(&q->rnr_retries)})
    EXPECT_LT(at(both), at(&q->rcv));
  EXPECT_LE(at(&q->init) + sizeof q->init, size_t{2 * 64});
  // The receiving end: the shared lines and its own, five in all.
  const size_t recv_end = at(&q->rcv) + sizeof q->rcv;
  EXPECT_LE(recv_end, size_t{5 * 64});
  // The sending end: right after, six lines of its own, with the READ list (read whenever the
  // RTO is armed with nothing in flight) and the window's pointer (read per packet sent).
  const size_t send_begin = at(&q->snd);
  const size_t send_end = at(&q->cc) + sizeof q->cc;
  EXPECT_GE(send_begin, recv_end);
  EXPECT_LE(line(send_end - 1) - line(send_begin) + 1, 6u);
  for (const void* hot :
       {static_cast<const void*>(&q->snd.tx), static_cast<const void*>(&q->snd.snd_una),
        static_cast<const void*>(&q->snd.sq), static_cast<const void*>(&q->snd.retx),
        static_cast<const void*>(&q->health_epoch), static_cast<const void*>(&q->rtt),
        static_cast<const void*>(&q->loss), static_cast<const void*>(&q->wait_since),
        static_cast<const void*>(&q->last_ack_at), static_cast<const void*>(&q->local_after),
        static_cast<const void*>(&q->reads), static_cast<const void*>(&q->cc)}) {
    EXPECT_GE(at(hot), send_begin);
    EXPECT_LT(at(hot), send_end);
  }
  // The window is an allocation of its own, 64-byte aligned: what a packet reads of it (its
  // first 64 bytes, nscc.cc checks) is one line.
  static_assert(alignof(Nscc) == 64);
  // Stats and attributes start a line each: a packet reads the first.
  EXPECT_EQ(at(&q->stats) % 64, 0u);
  EXPECT_EQ(at(&q->attr) % 64, 0u);
  EXPECT_GE(at(&q->stats), send_end);
  // What a packet reads of them lies in their first line (QpStats: a sending end's counters,
  // then a receiving end's in the second).
  EXPECT_LT(offsetof(QpStats, completions), 64u);
  EXPECT_LT(offsetof(QpStats, min_rtt_ns), 64u);
  EXPECT_GE(offsetof(QpStats, rx_data_packets), 64u);
  EXPECT_LT(offsetof(QpStats, tx_acks), 128u);
  EXPECT_LT(offsetof(QpAttr, traffic_class), 64u);
  EXPECT_LT(offsetof(QpAttr, access), 64u);
  EXPECT_LT(offsetof(QpAttr, max_psn_range_dest), 64u);
  // The path set starts a line: what a packet reads of it (PathSet's first 120 bytes,
  // paths.cc checks) is two lines.
  EXPECT_EQ(at(&q->paths) % 64, 0u);
  // Whether the READ list is empty is one read: its head and tail in one line.
  EXPECT_EQ(line(at(&q->reads)), line(at(&q->reads) + sizeof q->reads - 1));
  const size_t cold_begin = at(&q->cc_rtt);
  EXPECT_GT(cold_begin, at(&q->paths));
  for (const void* cold :
       {static_cast<const void*>(&q->cc_base), static_cast<const void*>(&q->ev_signals),
        static_cast<const void*>(&q->next_recv_msn), static_cast<const void*>(&q->pending_reads)})
    EXPECT_GE(at(cold), cold_begin);
}

// After one 6,000-byte WRITE and back to idle, the sender holds one WQE slot (its one gather
// segment inside it) and the smallest in-flight ring (the per-EV sent-order lists live in the
// EV records), the receiver nothing (its first 64-bit bitmap word is inside the scoreboard);
// not the rings
// their limits (1,024 WRs, MPR 1,024, a 16,384-PSN window) would allow. (A first message
// on another QP lets the engines' and the wire's own containers settle.)
TEST(QpScale, BuffersGrowWithUseOnly) {
  Fleet f(64);
  std::vector<Completion> comps(4);
  auto write = [&](uint32_t qp) {
    Sge s;
    const SendWr wr = f.write_wr(s, 6000);
    ASSERT_TRUE(f.a.post_send(f.aq[qp], wr).ok());
    while (f.step()) {
    }
  };
  write(3);
  ASSERT_EQ(f.a.poll_cq(f.acq, comps), 1u);
  const size_t before = g_live;
  write(5);
  const size_t grown = g_live - before;
  ASSERT_EQ(f.a.poll_cq(f.acq, comps), 1u);
  ASSERT_EQ(comps[0].status, WcStatus::kSuccess);
  const size_t expect = sizeof(SendWqe) + 16 * sizeof(TxPkt);
  EXPECT_LE(grown, expect + 4 * 64);  // + allocator rounding per block
  EXPECT_GE(grown, expect);
}

// The prefetch hints (Qp::prefetch_recv, prefetch_send, prefetch_send_blocks) on a QP that
// has nothing yet (no rings, no bitmap, no paths, no window) index nothing; on one with a ring,
// a WQE and a bitmap they change nothing (they read pointers, never state). That the engine's
// behaviour is the same with them is every other engine, scenario and mrc-sim test.
TEST(QpScale, PrefetchHints_IndexNothingAbsentAndChangeNothing) {
  const auto q = std::make_unique<Qp>();
  q->prefetch_recv();
  q->prefetch_send();
  q->prefetch_send_blocks(Core::kBurst);
  EXPECT_TRUE(q->snd.tx.empty());
  EXPECT_EQ(q->rcv.sb.ring_bits(), 0u);
  EXPECT_EQ(q->paths.size(), 0u);
  q->snd.tx_cap = 64;
  q->snd.grow();
  q->snd.sq.init(8);
  q->snd.sq.push().wr_id = 5;
  q->rcv.sb.reset(100, 1024);
  ASSERT_EQ(q->rcv.sb.mark(300), RecvScoreboard::Mark::kNew);  // an allocated ring
  q->prefetch_recv();
  q->prefetch_send();
  q->prefetch_send_blocks(Core::kBurst);
  EXPECT_EQ(q->snd.tx.size(), 16u);
  EXPECT_EQ(q->snd.sq.size(), 1u);
  EXPECT_EQ(q->snd.sq.at(q->snd.sq.head()).wr_id, 5u);
  EXPECT_TRUE(q->rcv.sb.received(300));
  EXPECT_FALSE(q->rcv.sb.received(299));
  EXPECT_EQ(q->rcv.sb.cum(), 100u);
}

TEST(SeqRing, GrowsOnDemandKeepingOrder) {
  SeqRing<uint64_t> r;
  r.init(1000);
  EXPECT_EQ(r.slots(), 0u);
  for (uint64_t i = 0; i < 5; ++i) r.push() = i;
  EXPECT_EQ(r.slots(), 8u);
  r.pop();
  r.pop();
  for (uint64_t i = 5; i < 40; ++i) r.push() = i;  // wraps, then grows past 32
  EXPECT_EQ(r.slots(), 64u);
  for (uint64_t s = r.head(); s != r.tail(); ++s) ASSERT_EQ(r.at(s), s);
  while (!r.full()) r.push() = r.tail();
  EXPECT_EQ(r.size(), 1000u);
  EXPECT_EQ(r.slots(), 1024u);  // the capacity rounded up, never more
  for (uint64_t s = r.head(); s != r.tail(); ++s) ASSERT_EQ(r.at(s), s);
}

TEST(Fifo, LazyRingKeepsOrderThroughGrowthAndErase) {
  Fifo<uint32_t> q;
  EXPECT_EQ(q.capacity(), 0u);
  for (uint32_t i = 0; i < 3; ++i) q.push_back(i);
  q.pop_front();                                     // 1 2
  for (uint32_t i = 3; i < 10; ++i) q.push_back(i);  // grows while wrapped
  q.erase(2);                                        // drops 3
  std::vector<uint32_t> got;
  for (size_t i = 0; i < q.size(); ++i) got.push_back(q[i]);
  EXPECT_EQ(got, (std::vector<uint32_t>{1, 2, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(q.front(), 1u);
  q.clear();
  EXPECT_TRUE(q.empty());
}

// A moved-from ring or FIFO is empty and usable again, as a moved-from std::vector was (not
// a null buffer that still claims a length).
TEST(SeqRing, MovedFromIsEmptyAndUsable) {
  SeqRing<uint64_t> a;
  a.init(64);
  for (uint64_t i = 0; i < 10; ++i) a.push() = i;
  SeqRing<uint64_t> b(std::move(a));
  EXPECT_EQ(b.size(), 10u);
  for (uint64_t s = b.head(); s != b.tail(); ++s) ASSERT_EQ(b.at(s), s);
  EXPECT_EQ(a.size(), 0u);   // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_EQ(a.slots(), 0u);  // NOLINT(bugprone-use-after-move)
  a.push() = 7;
  EXPECT_EQ(a.at(a.head()), 7u);
  SeqRing<uint64_t> c;
  c = std::move(b);
  EXPECT_EQ(c.size(), 10u);
  EXPECT_EQ(b.size(), 0u);  // NOLINT(bugprone-use-after-move)
  b.push() = 9;
  EXPECT_EQ(b.size(), 1u);
}

TEST(Fifo, MovedFromIsEmptyAndUsable) {
  Fifo<uint32_t> a;
  for (uint32_t i = 0; i < 6; ++i) a.push_back(i);
  Fifo<uint32_t> b(std::move(a));
  EXPECT_EQ(b.size(), 6u);
  EXPECT_EQ(b[5], 5u);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move)
  a.push_back(3);
  EXPECT_EQ(a.front(), 3u);
  Fifo<uint32_t> c;
  c = std::move(b);
  EXPECT_EQ(c.size(), 6u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  b.push_back(4);
  EXPECT_EQ(b.front(), 4u);
}

}  // namespace
}  // namespace mrc::engine
