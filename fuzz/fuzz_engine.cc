// libFuzzer target: one engine with a connected RC QP and a registered MR, driven by an
// arbitrary sequence of datagrams (raw bytes, or well-formed packets with valid CRCs built
// from fuzzed fields so the fuzzer gets past the header check), timer firings, and posted
// WRITEs/READs whose ACKs the fuzzer may forge. Whatever arrives, the engine must not crash,
// read or write outside the MR, or leak (ASan/UBSan/LSan watch).
#include <cstdint>
#include <vector>

#include "input.h"
#include "mrc/engine/engine.h"
#include "mrc/wire/wire.h"

using namespace mrc;
using namespace mrc::engine;

namespace {

constexpr uint32_t kToken = 0x5eed1234;
constexpr size_t kMem = 64 * 1024;

struct Harness {
  Engine e;
  std::vector<uint8_t> mem = std::vector<uint8_t>(kMem, 0xAB);
  std::vector<uint8_t> local = std::vector<uint8_t>(kMem, 0xCD);
  uint32_t rkey = 0, lkey = 0;
  CqId cq = 0;
  Qpn qpn = 0;
  Time now{1'000'000};
  std::vector<uint8_t> buf = std::vector<uint8_t>(kTransmitBufferSize);

  Harness() : e(EngineConfig{}) {
    cq = *e.create_cq(1024);
    QpInit init;
    init.send_cq = init.recv_cq = cq;
    init.local_token = kToken;
    qpn = *e.create_qp(init);
    const uint32_t acc =
        access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
    rkey = *e.register_mr(mem.data(), mem.size(), reinterpret_cast<uint64_t>(mem.data()), acc);
    lkey = *e.register_mr(local.data(), local.size(), reinterpret_cast<uint64_t>(local.data()), acc);
    QpAttr at;
    at.state = QpState::kInit;
    (void)e.modify_qp(qpn, at, attr::kState);
    at.state = QpState::kRtr;
    at.peer = 0;
    at.dest_qpn = 77;
    at.remote_token = 0x777;
    at.paths = {Path{0x000, 0}, Path{0x100, 0}, Path{0x10000, 1}, Path{0x10100, 1}};
    (void)e.modify_qp(qpn, at, attr::kState | attr::kDest | attr::kPaths);
    at.state = QpState::kRts;
    (void)e.modify_qp(qpn, at, attr::kState);
    for (uint64_t i = 0; i < 8; ++i) {  // receives for SEND / WRITE_IMM
      Sge sge{reinterpret_cast<uint64_t>(local.data() + i * 4096), 4096, lkey};
      (void)e.post_recv(qpn, RecvWr{i, {&sge, 1}});
    }
  }

  void drain() {
    for (int i = 0; i < 4096; ++i)
      if (!e.poll_transmit(now, buf)) break;
    Completion c[64];
    while (e.poll_cq(cq, c) > 0) {
    }
    while (e.poll_event()) {
    }
  }

  // An ACK's fields (an ACK packet's, or a data packet's trailer), echoing p's EV and time.
  static void fuzz_ack(fuzz::Input& in, wire::Packet& p) {
    p.ack.cum_psn = in.take<uint16_t>();
    p.ack.sack_base = p.ack.cum_psn + in.take<uint8_t>();
    for (auto& w : p.ack.sack) w = in.take<uint64_t>();
    p.ack.echo_ev = p.common.ev;
    p.ack.echo_psn = in.take<uint16_t>();
    p.ack.echo_ts = p.common.ts;
    p.ack.ack_flags = in.take<uint8_t>();
  }

  // A well-formed packet of a fuzzed kind; the fields that matter pick "right" or "random".
  std::vector<uint8_t> packet(fuzz::Input& in) {
    wire::Packet p;
    static constexpr wire::Kind kKinds[] = {
        wire::Kind::kWrite,   wire::Kind::kWriteImm,   wire::Kind::kSend,    wire::Kind::kSendImm,
        wire::Kind::kReadReq, wire::Kind::kReadResp,   wire::Kind::kAck,     wire::Kind::kNack,
        wire::Kind::kProbe,   wire::Kind::kProbeReply, wire::Kind::kCmpSwap, wire::Kind::kFetchAdd,
        wire::Kind::kUdSend,  wire::Kind::kAtomicWrite};
    const uint8_t sel = in.take<uint8_t>();
    p.common.kind = kKinds[sel % std::size(kKinds)];
    p.common.flags = in.take<uint8_t>() & ~wire::flag::kPayloadCrc;
    p.common.net_flags = in.take<uint8_t>() & 1;
    p.common.dst_qpn = (sel & 0x80) ? in.take<uint32_t>() : qpn;
    p.common.token = (sel & 0x40) ? in.take<uint32_t>() : kToken;
    p.common.ev = in.take<uint8_t>() & 1 ? 0x100 : 0x10000;
    p.common.psn = in.take<uint16_t>();
    p.common.ts = static_cast<uint64_t>(now.count()) - in.take<uint16_t>();
    std::span<const uint8_t> payload;
    if (wire::is_data(p.common.kind)) {
      const uint8_t how = in.take<uint8_t>();
      p.data.rkey = (how & 1) ? in.take<uint32_t>() : rkey;
      p.data.addr = reinterpret_cast<uint64_t>(mem.data()) + ((how & 2) ? in.take<uint32_t>() : in.take<uint16_t>());
      p.data.msn = in.take<uint8_t>();
      p.data.offset = in.take<uint16_t>();
      p.data.msg_len = in.take<uint32_t>() % (2 * kMem);
      p.data.imm = in.take<uint32_t>();
      payload = in.bytes(in.take<uint16_t>() % (wire::kMaxPayload + 1));
      p.data.payload_len = static_cast<uint16_t>(payload.size());
    } else if (p.common.kind == wire::Kind::kAck) {
      fuzz_ack(in, p);
    } else if (p.common.kind == wire::Kind::kNack) {
      p.nack.cum_psn = in.take<uint16_t>();
      p.nack.nack_psn = in.take<uint16_t>();
      p.nack.echo_ev = p.common.ev;
      p.nack.reason = static_cast<wire::NackReason>(in.take<uint8_t>());
      p.nack.echo_ts = p.common.ts;
    } else if (p.common.kind == wire::Kind::kProbeReply) {
      p.probe_reply.echo_ev = p.common.ev;
      p.probe_reply.echo_ts = p.common.ts;
    }
    // A data packet may carry an ACK (a trailer after the payload): fuzzed as an ACK's fields.
    const bool trailer = wire::is_data(p.common.kind) && (in.take<uint8_t>() & 1);
    if (trailer) fuzz_ack(in, p);
    std::vector<uint8_t> out(wire::header_size(p.common.kind) + payload.size() +
                             (trailer ? wire::kAckTrailerSize : 0));
    const size_t h = wire::encode_header(p, payload, out);
    std::copy(payload.begin(), payload.end(), out.begin() + h);
    if (trailer)
      wire::encode_ack_trailer(p, std::span(out).first(h),
                               std::span(out).subspan(h + payload.size()));
    if (p.common.net_flags && wire::is_data(p.common.kind)) out.resize(h);  // trimmed
    return out;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness h;
  fuzz::Input in(data, size);
  for (int step = 0; step < 256 && !in.empty(); ++step) {
    const uint8_t op = in.take<uint8_t>();
    RxInfo rx;
    rx.plane = op & 0x10 ? 1 : 0;
    rx.ecn_ce = op & 0x20;
    switch (op % 4) {
      case 0: {  // raw bytes
        auto b = in.bytes(in.take<uint16_t>() % 4300);
        h.e.on_datagram(h.now, rx, b);
        break;
      }
      case 1: {  // well-formed packet
        auto p = h.packet(in);
        h.e.on_datagram(h.now, rx, p);
        break;
      }
      case 2:  // time passes
        h.now += Duration{int64_t{in.take<uint16_t>()} * 1000};
        if (h.e.next_deadline() <= h.now) h.e.on_timeout(h.now);
        break;
      case 3: {  // post a WRITE, READ or atomic so forged ACKs/NACKs/responses have a target
        Sge sge{reinterpret_cast<uint64_t>(h.local.data()), 1 + in.take<uint16_t>() % 16384u, h.lkey};
        SendWr wr;
        wr.opcode = op & 0x40 ? Opcode::kRead : Opcode::kWrite;
        if (op & 0x80) {  // an atomic: 8 bytes back, an aligned target
          wr.opcode = op & 0x40 ? Opcode::kCmpSwap : Opcode::kFetchAdd;
          sge.length = 8;
          wr.compare_add = in.take<uint16_t>();
        }
        wr.sg = {&sge, 1};
        wr.remote_addr = 0x1000;
        wr.rkey = 0x4242;
        (void)h.e.post_send(h.qpn, wr);
        break;
      }
    }
    h.drain();
  }
  return 0;
}
