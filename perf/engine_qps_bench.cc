// What the engine's cost does with the number of QPs it holds (issue 14, "the engine
// with thousands of QPs"). Two engines on a simulated loopback (one core does both
// sides and the ACK path), N connected QP pairs, 16 EVs over 4 planes each, engine
// defaults otherwise (QpInit, QpAttr: 1024 send/recv WRs, MPR 1024, 16384-PSN window).
// Header work only, as engine_pps_bench's `nocopy`: no payload copy, no payload CRC.
//
//   BM_EngineQps/qps:N/pool:P/kib:K  per-packet cost with N connected QPs: 16 at a time
//       (fewer if P < 16) carry a K KiB WRITE (K / 4 packets); each completion hands the
//       turn to the next of the first P QPs in rotation, so the active subset keeps
//       changing. P = N: every QP is touched in turn (an all-to-all: with N = 16,384 each
//       message meets a QP whose state left the caches long ago); P = 64 or 1,024: the other
//       N - P QPs are connected and idle, which is what the engine's structures must not feel.
//       The loop is a driver's: timers when due, one data packet A -> B, B's ACKs
//       back to A, completions. Counter per_pkt (seconds, printed as e.g. 162n = 162 ns).
//       Timed in steady state: the clock starts once every QP of the pool has carried a
//       message (its first one also builds its per-QP state).
//   BM_EngineTimers/qps:N  cost of one timer event when N QPs each have one: every
//       QP has one unacknowledged packet (its peer never answers); each step runs
//       next_deadline, on_timeout (one QP's RTO fires) and the resend. Counter per_timer (seconds).
//   --count=N,P,K,WARM,PKTS  no benchmark: the BM_EngineQps loop for WARM packets, then
//       PKTS packets inside measured_packets(), for counting instructions and cache
//       misses per packet under callgrind (deterministic, unlike time on a shared VM):
//         valgrind --tool=callgrind --cache-sim=yes --LL=16777216,16,64
//           --toggle-collect='*measured_packets*' engine_qps_bench --count=16384,16384,64,300000,50000
//       (one command line)
//   BM_IdleQpBytes/qps:N/used:U  heap bytes per connected QP (mallinfo2: in use + mmapped),
//       U = 0: brought to RTS, never used; U = 1: every pair also carried one 64 KiB
//       WRITE and is idle again. Both sides' QPs count (2N QPs).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "bench_main.h"
#include "mrc/engine/engine.h"

namespace {

using namespace mrc::engine;

void no_copy(void*, const void*, size_t) {}

constexpr uint32_t kMaxMsg = 1 << 20;  // largest message (256 packets of 4 KiB)

EngineConfig config() {
  EngineConfig c;
  c.payload_crc = false;
  c.copy = no_copy;
  c.ack_every = 4;
  return c;
}

void connect(Engine& e, Qpn q, Qpn dest, uint32_t token) {
  QpAttr at;
  at.state = QpState::kInit;
  (void)e.modify_qp(q, at, attr::kState);
  at.state = QpState::kRtr;
  at.dest_qpn = dest;
  at.remote_token = token;
  for (uint32_t i = 0; i < 16; ++i) at.paths.push_back(Path{i, static_cast<uint16_t>(i / 4)});
  (void)e.modify_qp(q, at, attr::kState | attr::kDest | attr::kPaths);
  at.state = QpState::kRts;
  (void)e.modify_qp(q, at, attr::kState);
}

/// N QP pairs between engines a and b, all at RTS, one CQ per engine.
struct Fleet {
  Engine a{config()}, b{config()};
  CqId acq = 0, bcq = 0;
  std::vector<Qpn> aq, bq;
  std::vector<uint8_t> src, dst;
  uint32_t skey = 0, dkey = 0;
  Time now{1'000'000};

  explicit Fleet(uint32_t n) : src(kMaxMsg, 0x11), dst(kMaxMsg) {
    acq = a.create_cq(1 << 20).value();
    bcq = b.create_cq(1 << 20).value();
    skey = a.register_mr(src.data(), src.size(), reinterpret_cast<uint64_t>(src.data()), 0).value();
    dkey = b.register_mr(dst.data(), dst.size(), reinterpret_cast<uint64_t>(dst.data()),
                         access::kLocalWrite | access::kRemoteWrite)
               .value();
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
      connect(a, aq[i], bq[i], 2 * i + 2);
      connect(b, bq[i], aq[i], 2 * i + 1);
    }
  }
  void post(uint32_t i, uint64_t wr_id, uint32_t len = 64 << 10) {
    Sge s{reinterpret_cast<uint64_t>(src.data()), len, skey};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.sg = {&s, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    wr.rkey = dkey;
    wr.signaled = true;
    (void)a.post_send(aq[i], wr);
  }
  /// One driver step: due timers, one data packet A -> B, B's ACKs to A. False when
  /// A had nothing to send (time moves on).
  bool step(std::vector<uint8_t>& dgram, std::vector<uint8_t>& ackbuf) {
    if (a.next_deadline() <= now) a.on_timeout(now);
    if (b.next_deadline() <= now) b.on_timeout(now);
    auto t = a.poll_transmit(now, dgram);
    if (!t) {
      while (auto ack = b.poll_transmit(now, ackbuf))
        a.on_datagram(now, RxInfo{}, {ackbuf.data(), ack->header_len});
      now += Duration{1000};
      return false;
    }
    b.on_datagram(now, RxInfo{t->path.plane}, {dgram.data(), t->header_len + t->payload.size()});
    while (auto ack = b.poll_transmit(now, ackbuf))
      a.on_datagram(now, RxInfo{}, {ackbuf.data(), ack->header_len});
    now += Duration{100};
    return true;
  }
};

/// BM_EngineQps's traffic: 16 of the first `pool` QPs at a time carry a `len`-byte WRITE,
/// each completion passes the turn on.
struct Rotation {
  Fleet f;
  uint32_t pool, len, cursor = 0;
  uint64_t packets = 0, messages = 0;
  std::vector<uint8_t> dgram = std::vector<uint8_t>(kTransmitBufferSize);
  std::vector<uint8_t> ackbuf = std::vector<uint8_t>(kTransmitBufferSize);
  Completion comps[64];

  Rotation(uint32_t n, uint32_t pool_qps, uint32_t bytes)
      : f(n), pool(std::min(n, pool_qps)), len(bytes) {
    for (uint32_t i = 0; i < std::min<uint32_t>(pool, 16); ++i) activate();
  }
  void activate() {
    f.post(cursor, messages++, len);
    cursor = cursor + 1 == pool ? 0 : cursor + 1;
  }
  void step() {
    packets += f.step(dgram, ackbuf);
    const size_t k = f.a.poll_cq(f.acq, comps);
    for (size_t i = 0; i < k; ++i) activate();
    f.b.poll_cq(f.bcq, comps);
  }
};

void BM_EngineQps(benchmark::State& state) {
  Rotation r(static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1)),
             static_cast<uint32_t>(state.range(2)) << 10);
  // Steady state, as --count's WARM: every QP of the pool has carried one message before
  // the clock starts. A QP's first message builds its send and receive state (grown on
  // demand, see BM_IdleQpBytes); left in the timed loop, those 16,384 one-time builds
  // would weigh 2-20% of a 0.5-3 s run at 16,384 QPs depending on its length, and nothing
  // at 1 QP.
  while (r.messages < r.pool + 16) r.step();
  const uint64_t packets0 = r.packets, messages0 = r.messages;
  for (auto _ : state) r.step();
  const uint64_t packets = r.packets - packets0, messages = r.messages - messages0;
  state.counters["per_pkt"] = benchmark::Counter(
      static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["msgs"] = static_cast<double>(messages);
  state.SetItemsProcessed(static_cast<int64_t>(packets));
}
BENCHMARK(BM_EngineQps)
    ->ArgNames({"qps", "pool", "kib"})
    ->Args({1, 1, 64})
    ->Args({64, 64, 64})
    ->Args({1024, 1024, 64})
    ->Args({16384, 16384, 64})
    ->Args({1024, 64, 64})
    ->Args({16384, 64, 64})
    ->Args({16384, 1024, 64})
    ->Args({1, 1, 256})
    ->Args({1024, 1024, 256})
    ->Args({16384, 16384, 256});

void BM_EngineTimers(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  Fleet f(n);
  std::vector<uint8_t> dgram(kTransmitBufferSize);
  QpAttr at;
  at.timeout = 4;  // 16.4 us
  // Never answered (B never sees the packets): with a finite budget every QP would fail and
  // leave no timer to measure, so this benchmark alone retries forever.
  at.retry_cnt_exp = kRetryForever;
  for (uint32_t i = 0; i < n; ++i) {
    (void)f.a.modify_qp(f.aq[i], at, attr::kTimeout | attr::kRetry);
    Sge s{reinterpret_cast<uint64_t>(f.src.data()), 64, f.skey};
    SendWr wr;
    wr.sg = {&s, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(f.dst.data());
    wr.rkey = f.dkey;
    (void)f.a.post_send(f.aq[i], wr);
    (void)f.a.poll_transmit(f.now, dgram);  // lost: B never sees it
    f.now += Duration{1};                   // one QP per deadline
  }
  uint64_t events = 0;
  for (auto _ : state) {
    const Time t = f.a.next_deadline();
    f.a.on_timeout(t);
    while (f.a.poll_transmit(t, dgram)) ++events;
  }
  state.counters["per_timer"] = benchmark::Counter(
      static_cast<double>(events), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(BM_EngineTimers)->ArgName("qps")->Arg(1)->Arg(64)->Arg(1024)->Arg(16384);

size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

void BM_IdleQpBytes(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  const bool used = state.range(1) != 0;
  double per_qp = 0;
  for (auto _ : state) {
    const size_t before = heap_bytes();
    auto f = std::make_unique<Fleet>(n);
    if (used) {
      std::vector<uint8_t> dgram(kTransmitBufferSize), ackbuf(kTransmitBufferSize);
      Completion comps[64];
      for (uint32_t i = 0; i < n; ++i) {
        f->post(i, i);
        while (f->a.poll_cq(f->acq, comps) == 0) f->step(dgram, ackbuf);
        f->b.poll_cq(f->bcq, comps);
      }
      // Let delayed ACKs and timers run out, so every QP is idle.
      for (int k = 0; k < 1000 && f->a.next_deadline() != kNever; ++k) f->step(dgram, ackbuf);
    }
    const size_t after = heap_bytes();
    per_qp = static_cast<double>(after - before - 2 * kMaxMsg) / (2.0 * n);
  }
  state.counters["bytes/qp"] = per_qp;
}
BENCHMARK(BM_IdleQpBytes)
    ->ArgNames({"qps", "used"})
    ->Args({1024, 0})
    ->Args({1024, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

[[gnu::noinline]] void measured_packets(Rotation& r, uint64_t packets) {
  const uint64_t end = r.packets + packets;
  while (r.packets < end) r.step();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strncmp(argv[1], "--count=", 8) == 0) {
    unsigned long long n = 0, pool = 0, kib = 0, warm = 0, pkts = 0;
    if (std::sscanf(argv[1] + 8, "%llu,%llu,%llu,%llu,%llu", &n, &pool, &kib, &warm, &pkts) != 5 ||
        n == 0 || pool == 0 || kib == 0 || kib > (kMaxMsg >> 10) || pkts == 0) {
      std::fprintf(stderr, "--count=QPS,POOL,KIB,WARM,PACKETS: five numbers, QPS, POOL, PACKETS > 0, "
                           "1 <= KIB <= %u\n", kMaxMsg >> 10);
      return 2;
    }
    Rotation r(static_cast<uint32_t>(n), static_cast<uint32_t>(pool),
               static_cast<uint32_t>(kib) << 10);
    while (r.packets < warm) r.step();
    measured_packets(r, pkts);
    std::printf("qps %llu pool %llu kib %llu: %llu packets measured after %llu\n", n, pool, kib,
                pkts, warm);
    return 0;
  }
  return mrc::perf::run_benchmarks(argc, argv);
}
