// Test harness: two engines joined back to back in virtual time, with a hook
// that sees (and may drop, hold back or rewrite) every datagram. For protocol
// unit tests that need packet surgery; multipath and impairment scenarios use
// the simulated network (libmrc/src/io/sim).
// Threading: single-threaded.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/wire/wire.h"

namespace mrc::engine::testing {

using namespace std::chrono_literals;

/// A connected QP on each side, with its CQ and a registered buffer.
struct Side {
  Engine eng;
  CqId cq = 0;
  Qpn qpn = 0;
  uint32_t token = 0;
  std::vector<uint8_t> mem;
  uint32_t key = 0;
  explicit Side(const EngineConfig& cfg) : eng(cfg) {}
};

class Loop {
 public:
  /// What the hook decides for a datagram going from side `from`.
  enum class Verdict { kDeliver, kDrop };
  using Hook = std::function<Verdict(int from, std::vector<uint8_t>& dgram)>;

  /// Adjusts side `side`'s (0: a, 1: b) QpInit before its QP is made (an SRQ, say).
  using InitHook = std::function<void(int side, Engine& e, QpInit& init)>;
  /// Both QPs start their PSNs at `first_psn`.
  explicit Loop(uint32_t first_psn = 1000, const EngineConfig& cfg = {}, uint32_t npaths = 4,
                const InitHook& on_init = {})
      : a(cfg), b(cfg) {
    setup(a, 1, 0xA11CE,
          on_init ? [&](Engine& e, QpInit& i) { on_init(0, e, i); }
                  : std::function<void(Engine&, QpInit&)>{});
    setup(b, 2, 0xB0B,
          on_init ? [&](Engine& e, QpInit& i) { on_init(1, e, i); }
                  : std::function<void(Engine&, QpInit&)>{});
    connect(a, b, npaths, first_psn);
    connect(b, a, npaths, first_psn);
  }

  Side a, b;
  Hook hook;
  Time now{1'000'000};
  Duration latency{5'000};  // one way
  /// Extra one-way delay of a datagram from side `from` (a slower path); later datagrams
  /// may then overtake it.
  std::function<Duration(int from, const std::vector<uint8_t>& dgram)> extra_delay;
  bool ecn_ce = false;      // datagrams arrive with ECN CE (a marking queue on the way)
  uint64_t delivered = 0;

  Side& side(int i) { return i == 0 ? a : b; }

  /// Runs until both engines are idle and nothing is in flight, or `limit` passes.
  void run(Duration limit = 10s) {
    const Time end = now + limit;
    while (now < end) {
      pump();
      Time next = std::min(a.eng.next_deadline(), b.eng.next_deadline());
      if (!wire_.empty()) next = std::min(next, wire_.front().at);
      if (next == kNever) return;
      now = std::max(now, next);
      deliver_due();
      a.eng.on_timeout(now);
      b.eng.on_timeout(now);
    }
  }

  /// Runs as run() does, but stops at the first moment (`now`) after which `done()` holds, as
  /// an application polling at once would see it; false if it never held within `limit`.
  bool run_until(const std::function<bool()>& done, Duration limit = 10s) {
    const Time end = now + limit;
    while (now < end) {
      pump();
      if (done()) return true;
      Time next = std::min(a.eng.next_deadline(), b.eng.next_deadline());
      if (!wire_.empty()) next = std::min(next, wire_.front().at);
      if (next == kNever) return done();
      now = std::max(now, next);
      deliver_due();
      a.eng.on_timeout(now);
      b.eng.on_timeout(now);
    }
    return done();
  }

  std::vector<Completion> poll(Side& s) {
    std::vector<Completion> out(256);
    out.resize(s.eng.poll_cq(s.cq, out));
    return out;
  }

  void post_write(Side& s, uint64_t wr_id, uint64_t off, uint32_t len, uint64_t roff,
                  Opcode op = Opcode::kWrite, uint32_t imm = 0) {
    Side& r = &s == &a ? b : a;
    Sge sge{reinterpret_cast<uint64_t>(s.mem.data()) + off, len, s.key};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(r.mem.data()) + roff;
    wr.rkey = r.key;
    wr.imm = imm;
    ASSERT_TRUE(s.eng.post_send(s.qpn, wr).ok());
  }
  void post_recv(Side& s, uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge sge{reinterpret_cast<uint64_t>(s.mem.data()) + off, len, s.key};
    RecvWr wr{wr_id, {&sge, 1}};
    ASSERT_TRUE(s.eng.post_recv(s.qpn, wr).ok());
  }

 private:
  struct InFlight {
    Time at;
    int to;
    std::vector<uint8_t> bytes;
  };
  std::deque<InFlight> wire_;

  static void setup(Side& s, uint8_t fill, uint32_t token,
                    const std::function<void(Engine&, QpInit&)>& on_init) {
    s.mem.assign(1 << 20, fill);
    s.cq = s.eng.create_cq(1 << 16).value();
    QpInit init;
    init.send_cq = init.recv_cq = s.cq;
    init.local_token = token;
    s.token = token;
    if (on_init) on_init(s.eng, init);
    s.qpn = s.eng.create_qp(init).value();
    s.key = s.eng
                .register_mr(s.mem.data(), s.mem.size(), reinterpret_cast<uint64_t>(s.mem.data()),
                             access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead)
                .value();
  }
  static void connect(Side& s, Side& peer, uint32_t npaths, uint32_t first_psn) {
    QpAttr at;
    at.state = QpState::kInit;
    ASSERT_TRUE(s.eng.modify_qp(s.qpn, at, attr::kState).ok());
    at.state = QpState::kRtr;
    at.peer = &s == &peer ? 0 : 1;
    at.dest_qpn = peer.qpn;
    at.remote_token = peer.token;
    at.rq_psn = first_psn;
    for (uint32_t i = 0; i < npaths; ++i)
      at.paths.push_back(Path{0x100 + i, static_cast<uint16_t>(i % 2)});
    ASSERT_TRUE(
        s.eng.modify_qp(s.qpn, at, attr::kState | attr::kDest | attr::kPaths | attr::kRqPsn).ok());
    at.state = QpState::kRts;
    at.sq_psn = first_psn;
    at.timeout = 10;  // ~1 ms
    at.retry_cnt_exp = 0;  // a verbs budget: 7 retries at ~1 ms, then failure (tests time it)
    ASSERT_TRUE(
        s.eng.modify_qp(s.qpn, at, attr::kState | attr::kSqPsn | attr::kTimeout | attr::kRetry)
            .ok());
  }

  void pump() {
    for (int i = 0; i < 2; ++i) {
      Engine& e = side(i).eng;
      std::vector<uint8_t> buf(kTransmitBufferSize);
      while (auto t = e.poll_transmit(now, buf)) {
        std::vector<uint8_t> d(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(t->header_len));
        d.insert(d.end(), t->payload.begin(), t->payload.end());
        if (hook && hook(i, d) == Verdict::kDrop) continue;
        const Time at = now + latency + (extra_delay ? extra_delay(i, d) : Duration{0});
        // Kept in arrival order (stable for equal times).
        auto pos = wire_.end();
        while (pos != wire_.begin() && std::prev(pos)->at > at) --pos;
        wire_.insert(pos, InFlight{at, 1 - i, std::move(d)});
      }
    }
  }
  void deliver_due() {
    while (!wire_.empty() && wire_.front().at <= now) {
      InFlight f = std::move(wire_.front());
      wire_.pop_front();
      side(f.to).eng.on_datagram(now, RxInfo{0, ecn_ce}, f.bytes);
      ++delivered;
    }
  }
};

/// Decodes a datagram for a hook (asserting it is well formed).
inline wire::Packet peek(const std::vector<uint8_t>& d) {
  auto p = wire::decode(d);
  EXPECT_TRUE(p.ok());
  return p.ok() ? *p : wire::Packet{};
}

}  // namespace mrc::engine::testing
