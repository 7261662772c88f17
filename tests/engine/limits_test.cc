// Resource limits of the engine (engine.cc, receiver.cc): the caps on QPs, CQs, MRs and
// outstanding work requests give clear errors and leave the existing QPs working; a storm of
// QPs made and destroyed leaks nothing; the receive window bounds what a peer can make a
// receiver hold, and a flood of forged packets (right token) allocates nothing once the
// engine's fixed caps are reached. Threading: single-threaded; heap use is measured by
// replacing the global operator new/delete in this test binary.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <new>
#include <span>
#include <vector>

#include "loop.h"
#include "mrc/engine/engine.h"

// ---- heap accounting: bytes currently allocated with operator new ----------------------
namespace {
std::atomic<int64_t> g_heap{0};
void* counted_new(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  g_heap += static_cast<int64_t>(malloc_usable_size(p));
  return p;
}
void counted_delete(void* p) noexcept {
  if (!p) return;
  g_heap -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}
}  // namespace
void* operator new(size_t n) { return counted_new(n); }
void* operator new[](size_t n) { return counted_new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_new(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { counted_delete(p); }
void operator delete[](void* p) noexcept { counted_delete(p); }
void operator delete(void* p, size_t) noexcept { counted_delete(p); }
void operator delete[](void* p, size_t) noexcept { counted_delete(p); }

namespace mrc::engine {
namespace {

using testing::Loop;
using namespace std::chrono_literals;

int64_t heap_bytes() { return g_heap.load(); }

/// Two engines joined back to back (A is peer 0, B is peer 1) with any number of QP pairs,
/// for what loop.h's single pair cannot do. Datagrams take `latency`; nothing is lost.
struct Pair {
  explicit Pair(const EngineConfig& cfg = {}) : a(cfg), b(cfg) {}
  Engine a, b;
  Time now{1'000'000};
  Duration latency{5'000};
  struct Flight {
    Time at;
    int to;
    std::vector<uint8_t> bytes;
  };
  std::deque<Flight> wire;

  Engine& eng(int i) { return i == 0 ? a : b; }

  /// Connects qa (on A) and qb (on B), both RESET -> RTS, two paths, PSNs from 0.
  void connect(Qpn qa, uint32_t ta, Qpn qb, uint32_t tb, uint32_t mpr = 1024) {
    const Qpn q[2] = {qa, qb};
    const uint32_t tok[2] = {ta, tb};
    for (int i = 0; i < 2; ++i) {
      QpAttr at;
      at.state = QpState::kInit;
      ASSERT_TRUE(eng(i).modify_qp(q[i], at, attr::kState).ok());
      at.state = QpState::kRtr;
      at.peer = static_cast<PeerId>(1 - i);
      at.dest_qpn = q[1 - i];
      at.remote_token = tok[1 - i];
      at.max_psn_range = mpr;
      at.paths = {Path{0x100, 0}, Path{0x101, 1}};
      ASSERT_TRUE(
          eng(i).modify_qp(q[i], at, attr::kState | attr::kDest | attr::kPaths | attr::kMpr).ok());
      at.state = QpState::kRts;
      at.timeout = 10;
      ASSERT_TRUE(eng(i).modify_qp(q[i], at, attr::kState | attr::kTimeout).ok());
    }
  }

  void pump() {
    std::vector<uint8_t> buf(kTransmitBufferSize);
    for (int i = 0; i < 2; ++i)
      while (auto t = eng(i).poll_transmit(now, buf)) {
        std::vector<uint8_t> d(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(t->header_len));
        d.insert(d.end(), t->payload.begin(), t->payload.end());
        wire.push_back({now + latency, static_cast<int>(t->peer), std::move(d)});
      }
  }

  /// Runs for `limit` of virtual time or until nothing is left to do.
  void run(Duration limit) {
    const Time end = now + limit;
    for (;;) {
      pump();
      Time next = std::min(a.next_deadline(), b.next_deadline());
      if (!wire.empty()) next = std::min(next, wire.front().at);
      if (next == kNever || next > end) break;
      now = std::max(now, next);
      while (!wire.empty() && wire.front().at <= now) {
        Flight f = std::move(wire.front());
        wire.pop_front();
        eng(f.to).on_datagram(now, RxInfo{}, f.bytes);
      }
      a.on_timeout(now);
      b.on_timeout(now);
    }
    now = std::max(now, end);
  }
};

QpInit qp_init(CqId cq, uint32_t token, uint32_t max_send_wr = 1024) {
  QpInit i;
  i.send_cq = i.recv_cq = cq;
  i.local_token = token;
  i.max_send_wr = max_send_wr;
  return i;
}

void post_write(Engine& e, Qpn q, uint64_t wr_id, std::vector<uint8_t>& src, uint32_t lkey,
                uint64_t off, uint32_t len, const std::vector<uint8_t>& dst, uint32_t rkey,
                Status<Error>* out) {
  Sge sge{reinterpret_cast<uint64_t>(src.data()) + off, len, lkey};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + off;
  wr.rkey = rkey;
  *out = e.post_send(q, wr);
}

std::vector<Completion> drain(Engine& e, CqId cq) {
  std::vector<Completion> all, c(256);
  while (size_t n = e.poll_cq(cq, c)) all.insert(all.end(), c.begin(), c.begin() + n);
  return all;
}

// ---- caps -----------------------------------------------------------------------------

TEST(Limits, CreateQp_MaxQpsRefusedExistingQpsKeepWorking) {
  EngineConfig cfg;
  cfg.max_qps = 4;
  Pair p(cfg);
  const CqId ca = p.a.create_cq(64).value(), cb = p.b.create_cq(64).value();
  std::vector<uint8_t> src(4 * 8192), dst(4 * 8192, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  const uint32_t lk = p.a.register_mr(src.data(), src.size(),
                                      reinterpret_cast<uint64_t>(src.data()), access::kLocalWrite)
                          .value();
  const uint32_t rk = p.b.register_mr(dst.data(), dst.size(),
                                      reinterpret_cast<uint64_t>(dst.data()), access::kRemoteWrite)
                          .value();
  std::vector<Qpn> qa, qb;
  for (uint32_t i = 0; i < 4; ++i) {
    qa.push_back(p.a.create_qp(qp_init(ca, 100 + i)).value());
    qb.push_back(p.b.create_qp(qp_init(cb, 200 + i)).value());
    p.connect(qa[i], 100 + i, qb[i], 200 + i);
  }
  auto extra = p.a.create_qp(qp_init(ca, 1));
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.error(), Error::kResourceLimit);
  EXPECT_EQ(p.b.create_qp(qp_init(cb, 1)).error(), Error::kResourceLimit);
  // The four QPs at the cap all still carry data.
  for (uint32_t i = 0; i < 4; ++i) {
    Status<Error> s;
    post_write(p.a, qa[i], i, src, lk, i * 8192, 8192, dst, rk, &s);
    ASSERT_TRUE(s.ok());
  }
  p.run(1s);
  const auto c = drain(p.a, ca);
  ASSERT_EQ(c.size(), 4u);
  for (const Completion& x : c) EXPECT_EQ(x.status, WcStatus::kSuccess);
  EXPECT_EQ(src, dst);
  // One goes, one may come.
  ASSERT_TRUE(p.a.destroy_qp(qa[3]).ok());
  EXPECT_TRUE(p.a.create_qp(qp_init(ca, 1)).ok());
  EXPECT_EQ(p.a.create_qp(qp_init(ca, 1)).error(), Error::kResourceLimit);
}

TEST(Limits, CreateCq_MaxCqsRefusedCqInUseNotDestroyed) {
  EngineConfig cfg;
  cfg.max_cqs = 2;
  Engine e(cfg);
  const CqId c1 = e.create_cq(8).value();
  const CqId c2 = e.create_cq(8).value();
  auto c3 = e.create_cq(8);
  ASSERT_FALSE(c3.ok());
  EXPECT_EQ(c3.error(), Error::kResourceLimit);
  const Qpn q = e.create_qp(qp_init(c1, 1)).value();
  EXPECT_EQ(e.destroy_cq(c1).error(), Error::kBadState);  // a QP uses it
  ASSERT_TRUE(e.destroy_cq(c2).ok());
  EXPECT_TRUE(e.create_cq(8).ok());  // the freed one comes back
  EXPECT_EQ(e.create_cq(8).error(), Error::kResourceLimit);
  ASSERT_TRUE(e.destroy_qp(q).ok());
  EXPECT_TRUE(e.destroy_cq(c1).ok());
}

TEST(Limits, RegisterMr_MaxMrsCountsLiveMrsNotFreedSlots) {
  EngineConfig cfg;
  cfg.max_mrs = 4;
  Loop l(1000, cfg);  // each side holds one MR already
  std::vector<uint8_t> buf(4096);
  auto reg = [&] {
    return l.b.eng.register_mr(buf.data(), buf.size(), reinterpret_cast<uint64_t>(buf.data()),
                               access::kRemoteWrite);
  };
  std::vector<uint32_t> keys;
  for (int i = 0; i < 3; ++i) keys.push_back(reg().value());
  auto over = reg();
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error(), Error::kResourceLimit);
  // The QP and its MR at the cap still work.
  std::fill(l.a.mem.begin(), l.a.mem.begin() + 5000, 0x5a);
  l.post_write(l.a, 1, 0, 5000, 0);
  l.run();
  auto c = l.poll(l.a);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(l.a.mem.begin(), l.a.mem.begin() + 5000, l.b.mem.begin()));
  // Deregistered MRs no longer count against the cap, many times over.
  for (int round = 0; round < 50; ++round) {
    for (uint32_t k : keys) ASSERT_TRUE(l.b.eng.deregister_mr(k).ok()) << round;
    keys.clear();
    for (int i = 0; i < 3; ++i) {
      auto k = reg();
      ASSERT_TRUE(k.ok()) << "round " << round << ": " << to_string(k.error());
      keys.push_back(*k);
    }
    EXPECT_EQ(reg().error(), Error::kResourceLimit) << round;
  }
}

TEST(Limits, PostSend_MaxSendWrQueueFullThenDrainsAndAcceptsAgain) {
  Pair p;
  const CqId ca = p.a.create_cq(64).value(), cb = p.b.create_cq(64).value();
  const Qpn qa = p.a.create_qp(qp_init(ca, 7, /*max_send_wr=*/4)).value();
  const Qpn qb = p.b.create_qp(qp_init(cb, 8)).value();
  p.connect(qa, 7, qb, 8);
  std::vector<uint8_t> src(8 * 4096), dst(8 * 4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 5);
  const uint32_t lk = p.a.register_mr(src.data(), src.size(),
                                      reinterpret_cast<uint64_t>(src.data()), access::kLocalWrite)
                          .value();
  const uint32_t rk = p.b.register_mr(dst.data(), dst.size(),
                                      reinterpret_cast<uint64_t>(dst.data()), access::kRemoteWrite)
                          .value();
  Status<Error> s;
  for (uint32_t i = 0; i < 4; ++i) {
    post_write(p.a, qa, i, src, lk, i * 4096, 4096, dst, rk, &s);
    ASSERT_TRUE(s.ok()) << i;
  }
  post_write(p.a, qa, 4, src, lk, 4 * 4096, 4096, dst, rk, &s);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), Error::kQueueFull);
  p.run(1s);
  auto c = drain(p.a, ca);
  ASSERT_EQ(c.size(), 4u);  // the refused WR left no trace
  for (const Completion& x : c) EXPECT_EQ(x.status, WcStatus::kSuccess);
  EXPECT_EQ(p.a.query_qp(qa)->state, QpState::kRts);
  for (uint32_t i = 4; i < 8; ++i) {  // the queue has room again
    post_write(p.a, qa, i, src, lk, i * 4096, 4096, dst, rk, &s);
    ASSERT_TRUE(s.ok()) << i;
  }
  p.run(1s);
  EXPECT_EQ(drain(p.a, ca).size(), 4u);
  EXPECT_EQ(src, dst);
}

// ---- WRITE_WITH_IMM limits (OCP max_wimm, max_wimm_dest) ------------------------------

// A WRITE_WITH_IMM of `len` bytes at `off` of src/dst.
Status<Error> post_write_imm(Engine& e, Qpn q, uint64_t wr_id, std::vector<uint8_t>& src,
                             uint32_t lkey, uint64_t off, const std::vector<uint8_t>& dst,
                             uint32_t rkey) {
  Sge sge{reinterpret_cast<uint64_t>(src.data()) + off, 1024, lkey};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = Opcode::kWriteImm;
  wr.imm = static_cast<uint32_t>(0xabc00 + wr_id);
  wr.sg = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + off;
  wr.rkey = rkey;
  return e.post_send(q, wr);
}

struct WimmPair {
  Pair p;
  CqId ca = p.a.create_cq(64).value(), cb = p.b.create_cq(64).value();
  Qpn qa = p.a.create_qp(qp_init(ca, 7)).value(), qb = p.b.create_qp(qp_init(cb, 8)).value();
  std::vector<uint8_t> src = std::vector<uint8_t>(8 * 1024, 0x5a),
                       dst = std::vector<uint8_t>(8 * 1024);
  uint32_t lk = 0, rk = 0;
  WimmPair(uint32_t max_wimm, uint32_t max_wimm_dest) {
    p.connect(qa, 7, qb, 8);
    QpAttr w;
    w.max_wimm = max_wimm;
    EXPECT_TRUE(p.a.modify_qp(qa, w, attr::kWimm).ok());
    w.max_wimm = 0;
    w.max_wimm_dest = max_wimm_dest;
    EXPECT_TRUE(p.b.modify_qp(qb, w, attr::kWimm).ok());
    lk = p.a.register_mr(src.data(), src.size(), reinterpret_cast<uint64_t>(src.data()), 0).value();
    rk = p.b.register_mr(dst.data(), dst.size(), reinterpret_cast<uint64_t>(dst.data()),
                         access::kRemoteWrite)
             .value();
  }
  void post_recvs(uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) ASSERT_TRUE(p.b.post_recv(qb, RecvWr{100 + i, {}}).ok());
  }
};

TEST(Limits, MaxWimm_RequesterRefusesOneMoreUntilOneCompletes) {
  WimmPair w(/*max_wimm=*/2, /*max_wimm_dest=*/0);
  // No receive posted yet: both WRITE_WITH_IMMs wait (NO_RESOURCE), in flight all the while.
  ASSERT_TRUE(post_write_imm(w.p.a, w.qa, 0, w.src, w.lk, 0, w.dst, w.rk).ok());
  ASSERT_TRUE(post_write_imm(w.p.a, w.qa, 1, w.src, w.lk, 1024, w.dst, w.rk).ok());
  w.p.run(100us);
  auto s = post_write_imm(w.p.a, w.qa, 2, w.src, w.lk, 2048, w.dst, w.rk);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), Error::kWimmLimit);
  // Plain WRITEs are not bounded by it.
  Status<Error> wr;
  post_write(w.p.a, w.qa, 9, w.src, w.lk, 4096, 1024, w.dst, w.rk, &wr);
  EXPECT_TRUE(wr.ok());
  w.post_recvs(4);
  w.p.run(1s);
  auto done = drain(w.p.a, w.ca);
  ASSERT_EQ(done.size(), 3u);
  for (const Completion& x : done) EXPECT_EQ(x.status, WcStatus::kSuccess);
  EXPECT_EQ(drain(w.p.b, w.cb).size(), 2u);
  // Both completed: room for two again.
  ASSERT_TRUE(post_write_imm(w.p.a, w.qa, 2, w.src, w.lk, 2048, w.dst, w.rk).ok());
  ASSERT_TRUE(post_write_imm(w.p.a, w.qa, 3, w.src, w.lk, 3072, w.dst, w.rk).ok());
  w.p.run(1s);
  auto recv = drain(w.p.b, w.cb);
  ASSERT_EQ(recv.size(), 2u);
  EXPECT_EQ(recv[0].imm, 0xabc02u);
  EXPECT_EQ(recv[1].imm, 0xabc03u);
  EXPECT_EQ(w.p.a.query_qp(w.qa)->state, QpState::kRts);
}

TEST(Limits, MaxWimmDest_PeerPastTheLimitFailsTheResponderAndTheRequester) {
  WimmPair w(/*max_wimm=*/0, /*max_wimm_dest=*/2);
  // Without receives the responder holds every WRITE_WITH_IMM it accepts; the third is one
  // more than it agreed to hold.
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_TRUE(post_write_imm(w.p.a, w.qa, i, w.src, w.lk, i * 1024, w.dst, w.rk).ok());
  w.p.run(1s);
  EXPECT_EQ(w.p.b.query_qp(w.qb)->state, QpState::kError);
  EXPECT_EQ(w.p.b.stats().drops[static_cast<size_t>(Drop::kWimmLimit)], 1u);
  EXPECT_EQ(w.p.a.query_qp(w.qa)->state, QpState::kError);
  // The WR the responder refused fails with REM_INV_REQ, the two it held are flushed.
  auto c = drain(w.p.a, w.ca);
  ASSERT_EQ(c.size(), 3u);
  for (const Completion& x : c)
    EXPECT_EQ(x.status, x.wr_id == 2 ? WcStatus::kRemInvReqErr : WcStatus::kWrFlushErr) << x.wr_id;
  EXPECT_EQ(std::count(w.dst.begin() + 2048, w.dst.begin() + 3072, 0x5a), 0);  // not placed
}

TEST(Limits, MaxWimmDest_WithinTheLimitNeverTrips) {
  WimmPair w(/*max_wimm=*/2, /*max_wimm_dest=*/2);
  uint64_t posted = 0, refused = 0;
  w.post_recvs(8);
  for (int round = 0; round < 40 && posted < 8; ++round) {
    while (posted < 8) {
      auto s = post_write_imm(w.p.a, w.qa, posted, w.src, w.lk, posted * 1024, w.dst, w.rk);
      if (!s.ok()) {
        EXPECT_EQ(s.error(), Error::kWimmLimit);
        ++refused;
        break;
      }
      ++posted;
    }
    w.p.run(20us);
  }
  w.p.run(1s);
  EXPECT_EQ(posted, 8u);
  EXPECT_GT(refused, 0u);  // the requester held back rather than overrun the responder
  EXPECT_EQ(drain(w.p.b, w.cb).size(), 8u);
  EXPECT_EQ(w.p.b.query_qp(w.qb)->state, QpState::kRts);
  EXPECT_EQ(w.p.a.query_qp(w.qa)->state, QpState::kRts);
  EXPECT_EQ(w.src, w.dst);
}

// ---- connection storm -----------------------------------------------------------------

// `n` QP pairs, each made, connected and given a WRITE; every fifth is destroyed at once, with
// its WRITE still on the wire (whose packets then meet no QP, or a reused QPN with another
// token), the others 24 pairs later.
void storm(Pair& p, CqId ca, CqId cb, uint32_t n, uint32_t first, std::vector<uint8_t>& src,
           uint32_t lk, std::vector<uint8_t>& dst, uint32_t rk, uint64_t* ok) {
  struct Live {
    Qpn a, b;
  };
  std::deque<Live> live;
  for (uint32_t i = first; i < first + n; ++i) {
    const uint32_t ta = 0x1000000 + i * 2, tb = ta + 1;  // fresh tokens: stale packets are refused
    auto qa = p.a.create_qp(qp_init(ca, ta));
    auto qb = p.b.create_qp(qp_init(cb, tb));
    ASSERT_TRUE(qa.ok() && qb.ok()) << i;
    p.connect(*qa, ta, *qb, tb, 64);
    Status<Error> s;
    post_write(p.a, *qa, i, src, lk, (i % 16) * 4096, 4096, dst, rk, &s);
    ASSERT_TRUE(s.ok());
    if (i % 5 == 0) {
      p.run(1us);
      ASSERT_TRUE(p.a.destroy_qp(*qa).ok());
      ASSERT_TRUE(p.b.destroy_qp(*qb).ok());
    } else {
      live.push_back({*qa, *qb});
    }
    p.run(50us);
    if (live.size() > 24) {
      ASSERT_TRUE(p.a.destroy_qp(live.front().a).ok());
      ASSERT_TRUE(p.b.destroy_qp(live.front().b).ok());
      live.pop_front();
    }
    for (const Completion& c : drain(p.a, ca)) *ok += c.status == WcStatus::kSuccess;
    (void)drain(p.b, cb);
    while (p.a.poll_event() || p.b.poll_event()) {
    }
  }
  for (const Live& q : live) {
    ASSERT_TRUE(p.a.destroy_qp(q.a).ok());
    ASSERT_TRUE(p.b.destroy_qp(q.b).ok());
  }
  p.run(1s);  // what is still on the wire arrives to no QP
}

TEST(Limits, ConnectionStorm_ThousandsOfQpsLeaveNoTrace) {
  EngineConfig cfg;
  cfg.max_qps = 32;
  cfg.recv_window = 64;
  Pair p(cfg);
  const CqId ca = p.a.create_cq(1 << 12).value(), cb = p.b.create_cq(1 << 12).value();
  std::vector<uint8_t> src(16 * 4096, 0x77), dst(16 * 4096, 0);
  const uint32_t lk = p.a.register_mr(src.data(), src.size(),
                                      reinterpret_cast<uint64_t>(src.data()), access::kLocalWrite)
                          .value();
  const uint32_t rk = p.b.register_mr(dst.data(), dst.size(),
                                      reinterpret_cast<uint64_t>(dst.data()), access::kRemoteWrite)
                          .value();
  uint64_t ok = 0;
  storm(p, ca, cb, 500, 0, src, lk, dst, rk, &ok);  // warm-up: tables reach their size
  const int64_t heap_warm = heap_bytes();
  const Qpn qpn_warm = p.a.max_qpn();
  storm(p, ca, cb, 3000, 500, src, lk, dst, rk, &ok);
  const int64_t heap_after = heap_bytes();

  EXPECT_GT(ok, 2500u);  // the WRITEs of the QPs not destroyed at once completed
  EXPECT_EQ(dst, src);   // and what landed is right
  // Stale packets of destroyed QPs were refused, by reason.
  const auto& sb = p.b.stats();
  EXPECT_GT(
      sb.dropped(Drop::kUnknownQp) + sb.dropped(Drop::kBadToken) + sb.dropped(Drop::kQpNotReady),
      0u);
  // Nothing left behind: QPN space, heap, timers, queues, counts.
  EXPECT_LE(p.a.max_qpn(), 32u + 65u);
  EXPECT_EQ(p.a.max_qpn(), qpn_warm);
  EXPECT_GT(heap_warm, 128 * 1024);  // the accounting sees the buffers and engines
  EXPECT_LT(heap_after - heap_warm, 64 * 1024) << "heap grew by " << heap_after - heap_warm;
  EXPECT_TRUE(p.a.idle());
  EXPECT_TRUE(p.b.idle());
  p.a.on_timeout(p.now + 1h);
  p.b.on_timeout(p.now + 1h);
  EXPECT_EQ(p.a.next_deadline(), kNever);
  EXPECT_EQ(p.b.next_deadline(), kNever);
  std::vector<Qpn> again;  // every one of the max_qps slots is free again
  for (int i = 0; i < 32; ++i) {
    auto q = p.a.create_qp(qp_init(ca, 1));
    ASSERT_TRUE(q.ok()) << i << ": " << to_string(q.error());
    again.push_back(*q);
  }
  EXPECT_EQ(p.a.create_qp(qp_init(ca, 1)).error(), Error::kResourceLimit);
  for (Qpn q : again) ASSERT_TRUE(p.a.destroy_qp(q).ok());
  EXPECT_TRUE(p.a.destroy_cq(ca).ok());  // no QP still counted as a user
  EXPECT_TRUE(p.b.destroy_cq(cb).ok());
}

// ---- what a peer can make a receiver hold ----------------------------------------------

/// A WRITE packet a peer with the token crafts for B's QP.
std::vector<uint8_t> forged(const Loop& l, wire::Kind kind, uint32_t psn, uint32_t payload) {
  std::vector<uint8_t> pay(payload, 0xa5);
  wire::Packet p;
  p.common.kind = kind;
  p.common.flags = wire::flag::kFirst | wire::flag::kLast | wire::flag::kPayloadCrc;
  p.common.dst_qpn = l.b.qpn;
  p.common.token = l.b.token;
  p.common.ev = 0x100;
  p.common.psn = psn;
  p.data.addr = reinterpret_cast<uint64_t>(l.b.mem.data());
  p.data.rkey = l.b.key;
  p.data.msg_len = kind == wire::Kind::kReadReq ? 4096 : payload;
  p.data.payload_len = static_cast<uint16_t>(payload);
  std::vector<uint8_t> d(wire::header_size(kind));
  wire::encode_header(p, pay, d);
  d.insert(d.end(), pay.begin(), pay.end());
  return d;
}

// QpAttr::max_psn_range_dest (OCP mpr_dest): one QP's receive window below the device's. A
// PSN at its edge is NACKed PSN_OUT_OF_WINDOW; a sender whose MPR is larger still completes
// (it resends what was refused), and the receiver never took a PSN past its window.
TEST(Limits, ReceiveWindow_PerQpWindowBelowTheDevices) {
  EngineConfig cfg;
  Loop l(1000, cfg);
  QpAttr at;
  at.max_psn_range_dest = 128;
  ASSERT_TRUE(l.b.eng.modify_qp(l.b.qpn, at, attr::kMprDest).ok());
  EXPECT_EQ(l.b.eng.query_qp(l.b.qpn)->max_psn_range_dest, 128u);
  l.b.eng.on_datagram(l.now, {}, forged(l, wire::Kind::kWrite, 1000 + 127, 100));
  EXPECT_EQ(l.b.eng.stats().dropped(Drop::kPsnOutOfWindow), 0u);
  l.b.eng.on_datagram(l.now, {}, forged(l, wire::Kind::kWrite, 1000 + 128, 100));
  EXPECT_EQ(l.b.eng.stats().dropped(Drop::kPsnOutOfWindow), 1u);
}

// The window counts from the cumulative PSN: in order, nothing is ever past it; behind a hole
// (the first packet lost once), what comes 32 PSNs or more after it is refused and resent.
TEST(Limits, ReceiveWindow_SenderWithALargerMprStillCompletes) {
  EngineConfig cfg;
  cfg.congestion_control = false;  // the whole message at once
  Loop l(1000, cfg);
  QpAttr at;
  at.max_psn_range_dest = 32;
  ASSERT_TRUE(l.b.eng.modify_qp(l.b.qpn, at, attr::kMprDest).ok());
  bool lost = false;
  l.hook = [&](int from, std::vector<uint8_t>& d) {
    auto p = wire::decode(std::span<const uint8_t>(d));
    if (from == 0 && p.ok() && p->common.kind == wire::Kind::kWrite && !lost) {
      lost = true;
      return Loop::Verdict::kDrop;
    }
    return Loop::Verdict::kDeliver;
  };
  l.post_write(l.a, 1, 0, 1 << 20, 0);  // 256 packets, sender MPR 1024
  l.run();
  EXPECT_EQ(l.poll(l.a).size(), 1u);
  EXPECT_GT(l.b.eng.stats().dropped(Drop::kPsnOutOfWindow), 0u);
}

TEST(Limits, ReceiveWindow_PsnsPastTheWindowRefusedNotHeld) {
  EngineConfig cfg;
  cfg.recv_window = 1024;
  Loop l(1000, cfg);
  // The last PSN of the window is accepted (placed, a hole before it) ...
  l.b.eng.on_datagram(l.now, {}, forged(l, wire::Kind::kWrite, 1000 + 1023, 100));
  EXPECT_EQ(l.b.eng.qp_stats(l.b.qpn)->rx_data_packets, 1u);
  // ... the next one, and anything further, is not: NACKed PSN_OUT_OF_WINDOW.
  for (uint32_t ahead : {1024u, 1025u, 1u << 20, (1u << 31) - 1})
    l.b.eng.on_datagram(l.now, {}, forged(l, wire::Kind::kWrite, 1000 + ahead, 100));
  EXPECT_EQ(l.b.eng.stats().dropped(Drop::kPsnOutOfWindow), 4u);
  EXPECT_EQ(l.b.eng.qp_stats(l.b.qpn)->rx_data_packets, 1u);
  std::vector<uint8_t> buf(kTransmitBufferSize);
  int nacks = 0;
  while (auto t = l.b.eng.poll_transmit(l.now, buf)) {
    auto p = wire::decode(std::span<const uint8_t>(buf.data(), t->header_len));
    ASSERT_TRUE(p.ok());
    if (p->common.kind == wire::Kind::kNack) {
      EXPECT_EQ(p->nack.reason, wire::NackReason::kPsnOutOfWindow);
      ++nacks;
    }
  }
  EXPECT_EQ(nacks, 4);
}

TEST(Limits, ForgedFlood_RightTokenAllocatesNothingOnceCapsReached) {
  Loop l;
  // Kinds a peer might flood with, none of which the receiver may hold without bound:
  // far PSNs (NACKs queue), duplicates (ACKs owed), READ requests (responses owed, capped at
  // 128 per QP), probes (replies queue), all while the driver sends nothing.
  uint32_t i = 0;
  auto burst = [&](uint32_t n) {
    for (uint32_t k = 0; k < n; ++k, ++i) {
      std::vector<uint8_t> d;
      switch (i % 4) {
        case 0:
          d = forged(l, wire::Kind::kWrite, 1000 + (1u << 20) + i, 64);
          break;
        case 1:
          d = forged(l, wire::Kind::kWrite, 1000 - 1 - i % 100000, 64);
          break;
        case 2:
          d = forged(l, wire::Kind::kReadReq, 1001 + i % 16000, 0);
          break;
        case 3: {
          wire::Packet p;
          p.common.kind = wire::Kind::kProbe;
          p.common.dst_qpn = l.b.qpn;
          p.common.token = l.b.token;
          p.common.ev = 0x100 + i % 4;
          p.common.psn = i;
          d.resize(wire::kCommonSize);
          wire::encode_header(p, {}, d);
          break;
        }
      }
      l.b.eng.on_datagram(l.now, {}, d);
    }
  };
  burst(40000);  // reaches every cap
  const int64_t h1 = heap_bytes();
  burst(200000);
  const int64_t h2 = heap_bytes();
  EXPECT_GT(h1, 2 << 20);  // the accounting sees the engines' state and the loop's buffers
  EXPECT_LT(h2 - h1, 16 * 1024) << "heap grew by " << h2 - h1 << " bytes";
  const auto& st = l.b.eng.stats();
  EXPECT_EQ(st.dropped(Drop::kPsnOutOfWindow), 60000u);
  // Old PSNs are duplicates; of the READ requests, 128 are taken (responses owed once the
  // hole before them fills), the rest refused NO_RESOURCE, or duplicates when they repeat
  // a PSN already taken.
  EXPECT_EQ(st.dropped(Drop::kDuplicate) + st.dropped(Drop::kNoReceive), 120000u - 128u);
  EXPECT_GT(st.dropped(Drop::kNoReceive), 50000u);
  EXPECT_EQ(l.b.eng.qp_stats(l.b.qpn)->rx_data_packets, 128u);
  // What it has to send is bounded too: one drain, then quiet.
  std::vector<uint8_t> buf(kTransmitBufferSize);
  size_t out = 0;
  while (l.b.eng.poll_transmit(l.now, buf)) ++out;
  EXPECT_LE(out, 4u * 4096 + 200);
  EXPECT_GT(out, 0u);
  // (This QP's data is not sound afterwards: the forged READ requests took PSNs the honest
  // requester will use, which is what a peer holding the token can do; see
  // tests/perf_tools/ns_replay_test.cc.)
}

}  // namespace
}  // namespace mrc::engine
