// Packets per second through a sender engine plus a receiver engine on the
// simulated loopback (one core does both sides and the ACK path), 4 KiB MTU,
// bulk RDMA WRITE. Variants:
//   nocopy    : header work only. The sender hands out a payload view (zero-copy
//               gather, as with sendmsg iovecs); the receiver's placement copy is
//               a no-op and payload CRCs are off. Header CRC32C is on.
//   copy      : the loopback linearises each datagram (the kernel's copy) and the
//               receiver places the payload into the MR (memcpy). No payload CRC.
//   copy_crc  : copy + payload CRC32C on send and receive (the default config).
// BM_Memcpy4K is the reference in the same run: one 4 KiB memcpy per packet.
// --count=WARM,PKTS  no benchmark: the nocopy loop for WARM packets, then PKTS packets
//     inside measured_packets(), for counting instructions and cache misses per packet
//     under callgrind (deterministic, unlike time on a shared machine):
//       valgrind --tool=callgrind --cache-sim=yes --LL=16777216,16,64
//         --toggle-collect='*measured_packets*' engine_pps_bench --count=20000,100000
//     (one command line); Ir / PKTS is instructions per packet.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_main.h"
#include "mrc/engine/engine.h"

namespace {

using namespace mrc::engine;

void no_copy(void*, const void*, size_t) {}

enum Variant { kNoCopy, kCopy, kCopyCrc };

struct Bench {
  Engine a, b;
  CqId acq = 0, bcq = 0;
  Qpn aq = 0, bq = 0;
  std::vector<uint8_t> src, dst;
  uint32_t skey = 0, dkey = 0;
  static constexpr uint32_t kMsg = 1 << 20;  // 256 packets per WRITE

  static EngineConfig config(Variant v) {
    EngineConfig c;
    c.payload_crc = v == kCopyCrc;
    c.copy = v == kNoCopy ? no_copy : nullptr;
    c.ack_every = 4;
    return c;
  }
  explicit Bench(Variant v) : a(config(v)), b(config(v)), src(16 << 20, 0x11), dst(16 << 20) {
    acq = a.create_cq(1 << 16).value();
    bcq = b.create_cq(1 << 16).value();
    QpInit ia;
    ia.send_cq = ia.recv_cq = acq;
    ia.local_token = 1;
    ia.max_send_wr = 64;
    aq = a.create_qp(ia).value();
    QpInit ib = ia;
    ib.send_cq = ib.recv_cq = bcq;
    ib.local_token = 2;
    bq = b.create_qp(ib).value();
    skey = a.register_mr(src.data(), src.size(), reinterpret_cast<uint64_t>(src.data()), 0).value();
    dkey = b.register_mr(dst.data(), dst.size(), reinterpret_cast<uint64_t>(dst.data()),
                         access::kLocalWrite | access::kRemoteWrite)
               .value();
    connect(a, aq, bq, 2);
    connect(b, bq, aq, 1);
  }
  static void connect(Engine& e, Qpn q, Qpn dest, uint32_t token) {
    QpAttr at;
    at.state = QpState::kInit;
    (void)e.modify_qp(q, at, attr::kState);
    at.state = QpState::kRtr;
    at.dest_qpn = dest;
    at.remote_token = token;
    for (uint32_t i = 0; i < 16; ++i) at.paths.push_back(Path{i, static_cast<uint16_t>(i / 4)});
    (void)e.modify_qp(q, at, attr::kState | attr::kDest | attr::kPaths);
    at.state = QpState::kRts;
    at.max_psn_range = 4096;
    (void)e.modify_qp(q, at, attr::kState | attr::kMpr);
  }
  uint64_t posted = 0;
  void post() {
    Sge s{reinterpret_cast<uint64_t>(src.data()) + (posted % 16) * kMsg, kMsg, skey};
    SendWr wr;
    wr.wr_id = posted;
    wr.sg = {&s, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + (posted % 16) * kMsg;
    wr.rkey = dkey;
    wr.signaled = (posted % 8) == 7;
    (void)a.post_send(aq, wr);
    ++posted;
  }
};

// The benchmark's loop, one packet per step(): one data packet A -> B, then any ACKs
// B -> A, then completions and new WRITEs.
struct Loop {
  Variant v;
  Bench bench;
  std::vector<uint8_t> dgram, ackbuf;
  Completion comps[64];
  Time now{1'000'000};
  uint64_t packets = 0, bytes = 0;

  explicit Loop(Variant variant)
      : v(variant), bench(variant), dgram(kTransmitBufferSize), ackbuf(kTransmitBufferSize) {
    for (int i = 0; i < 32; ++i) bench.post();
  }
  void step() {
    auto t = bench.a.poll_transmit(now, dgram);
    if (!t) {
      bench.a.poll_cq(bench.acq, comps);
      bench.post();
      return;
    }
    size_t len = t->header_len + t->payload.size();
    if (v != kNoCopy && !t->payload.empty() && t->payload.data() != dgram.data() + t->header_len)
      std::memcpy(dgram.data() + t->header_len, t->payload.data(), t->payload.size());
    bench.b.on_datagram(now, RxInfo{}, {dgram.data(), len});
    ++packets;
    bytes += t->payload.size();
    while (auto ack = bench.b.poll_transmit(now, ackbuf))
      bench.a.on_datagram(now, RxInfo{}, {ackbuf.data(), ack->header_len});
    now += Duration{100};
    if (bench.a.poll_cq(bench.acq, comps) > 0 || (packets & 255) == 0)
      while (bench.posted - packets / 256 < 32) bench.post();
  }
};

void BM_EnginePps(benchmark::State& state) {
  Loop loop(static_cast<Variant>(state.range(0)));
  for (auto _ : state) loop.step();
  state.counters["pkts/s"] =
      benchmark::Counter(static_cast<double>(loop.packets), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(loop.bytes));
  state.counters["retx"] =
      static_cast<double>(loop.bench.a.qp_stats(loop.bench.aq)->tx_retransmits);
}
BENCHMARK(BM_EnginePps)->Arg(kNoCopy)->ArgName("nocopy");
BENCHMARK(BM_EnginePps)->Arg(kCopy)->ArgName("copy");
BENCHMARK(BM_EnginePps)->Arg(kCopyCrc)->ArgName("copy_crc");

void BM_Memcpy4K(benchmark::State& state) {
  std::vector<uint8_t> src(16 << 20, 1), dst(16 << 20);
  size_t off = 0;
  for (auto _ : state) {
    std::memcpy(dst.data() + off, src.data() + off, 4096);
    benchmark::DoNotOptimize(dst.data());
    off = (off + 4096) % src.size();
  }
  state.counters["pkts/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 4096);
}
BENCHMARK(BM_Memcpy4K);

[[gnu::noinline]] void measured_packets(Loop& loop, uint64_t packets) {
  const uint64_t end = loop.packets + packets;
  while (loop.packets < end) loop.step();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strncmp(argv[1], "--count=", 8) == 0) {
    unsigned long long warm = 0, pkts = 0;
    char extra = 0;
    if (std::sscanf(argv[1] + 8, "%llu,%llu%c", &warm, &pkts, &extra) != 2 || pkts == 0) {
      std::fprintf(stderr, "--count=WARM,PACKETS: two numbers, PACKETS > 0\n");
      return 2;
    }
    Loop loop(kNoCopy);
    while (loop.packets < warm) loop.step();
    measured_packets(loop, pkts);
    std::printf(
        "nocopy: %llu packets measured after %llu, %llu retransmits\n", pkts, warm,
        static_cast<unsigned long long>(loop.bench.a.qp_stats(loop.bench.aq)->tx_retransmits));
    return 0;
  }
  return mrc::perf::run_benchmarks(argc, argv);
}
