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
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "engine/engine.h"

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

void BM_EnginePps(benchmark::State& state) {
  const auto v = static_cast<Variant>(state.range(0));
  Bench bench(v);
  std::vector<uint8_t> dgram(kTransmitBufferSize), ackbuf(kTransmitBufferSize);
  Completion comps[64];
  Time now{1'000'000};
  uint64_t packets = 0, bytes = 0;
  for (int i = 0; i < 32; ++i) bench.post();
  for (auto _ : state) {
    // One data packet A -> B, then any ACKs B -> A.
    auto t = bench.a.poll_transmit(now, dgram);
    if (!t) {
      bench.a.poll_cq(bench.acq, comps);
      bench.post();
      continue;
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
  state.counters["pkts/s"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["retx"] = static_cast<double>(bench.a.qp_stats(bench.aq)->tx_retransmits);
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

}  // namespace
