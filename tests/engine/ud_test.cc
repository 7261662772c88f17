// Unreliable datagram QPs (engine/ud.cc): one UD_SEND datagram per SEND, GRH before the data
// in the receive, Q_Key checks, drops without RNR or NACK, length and state errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/io/sim/fabric.h"
#include "mrc/testing/bulk.h"
#include "mrc/testing/testbed.h"
#include "mrc/wire/wire.h"

namespace mrc::engine {
namespace {

constexpr uint32_t kQkey = 0x11111111;

// One engine with a UD QP at RTS, a CQ and a registered buffer.
struct UdSide {
  Engine eng;
  CqId cq = 0;
  Qpn qpn = 0;
  std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 16, 0);
  uint32_t key = 0;

  explicit UdSide(uint32_t srq_depth = 0) {
    cq = eng.create_cq(256).value();
    QpInit init;
    init.send_cq = init.recv_cq = cq;
    init.ud = true;
    if (srq_depth) init.srq = srq = eng.create_srq(srq_depth).value();
    qpn = eng.create_qp(init).value();
    key = eng.register_mr(mem.data(), mem.size(), reinterpret_cast<uint64_t>(mem.data()),
                          access::kLocalWrite)
              .value();
    QpAttr a;
    a.qkey = kQkey;
    for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
      a.state = s;
      EXPECT_TRUE(eng.modify_qp(qpn, a, attr::kState | attr::kQkey).ok()) << to_string(s);
    }
  }
  uint64_t addr(uint64_t off) const { return reinterpret_cast<uint64_t>(mem.data()) + off; }
  Status<Error> send(uint64_t wr_id, uint64_t off, uint32_t len, const UdDest& d,
                     Opcode op = Opcode::kSend, uint32_t imm = 0) {
    Sge sge{addr(off), len, key};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg = {&sge, 1};
    wr.imm = imm;
    wr.ud = &d;
    return eng.post_send(qpn, wr);
  }
  void recv(uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge sge{addr(off), len, key};
    RecvWr wr{wr_id, {&sge, 1}};
    ASSERT_TRUE((srq ? eng.post_srq_recv(srq, wr) : eng.post_recv(qpn, wr)).ok());
  }
  std::vector<Completion> poll() {
    std::vector<Completion> out(16);
    out.resize(eng.poll_cq(cq, out));
    return out;
  }
  uint32_t srq = 0;
};

struct Datagram {
  Transmit t;
  std::vector<uint8_t> bytes;
};

// Every datagram `from` has to send now.
std::vector<Datagram> drain(UdSide& from) {
  std::vector<Datagram> out;
  std::vector<uint8_t> buf(kTransmitBufferSize);
  while (auto t = from.eng.poll_transmit(Time{1000}, buf)) {
    Datagram d{*t, std::vector<uint8_t>(buf.begin(), buf.begin() + t->header_len)};
    d.bytes.insert(d.bytes.end(), t->payload.begin(), t->payload.end());
    out.push_back(std::move(d));
  }
  return out;
}

UdDest dest_of(const UdSide& to, uint32_t qkey = kQkey) {
  UdDest d;
  d.peer = 3;
  d.path = Path{0x10203, 1};
  d.qpn = to.qpn;
  d.qkey = qkey;
  for (size_t i = 0; i < d.grh.size(); ++i) d.grh[i] = static_cast<uint8_t>(0xa0 + i);
  return d;
}

TEST(Ud, SendRecv_GrhThenDataInTheReceiveBothComplete) {
  UdSide a, b;
  for (uint32_t i = 0; i < 300; ++i) a.mem[i] = static_cast<uint8_t>(i * 7);
  b.recv(77, 1000, wire::kUdGrhLen + 300);
  const UdDest d = dest_of(b);
  ASSERT_TRUE(a.send(5, 0, 300, d, Opcode::kSendImm, 0xfeedu).ok());
  auto out = drain(a);
  ASSERT_EQ(out.size(), 1u);  // one datagram, on the path and to the peer the WR named
  EXPECT_EQ(out[0].t.peer, 3u);
  EXPECT_EQ(out[0].t.path.ev, 0x10203u);
  EXPECT_EQ(out[0].t.path.plane, 1);
  const auto p = wire::decode(out[0].bytes);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->common.kind, wire::Kind::kUdSend);
  EXPECT_EQ(p->common.token, kQkey);
  EXPECT_EQ(p->data.src_qpn, a.qpn);
  auto sc = a.poll();  // the send completes once the datagram is out: nothing acknowledges it
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 5u);
  EXPECT_EQ(sc[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(sc[0].byte_len, 300u);
  b.eng.on_datagram(Time{2000}, RxInfo{1, false}, out[0].bytes);
  EXPECT_TRUE(drain(b).empty());  // no ACK
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc[0].byte_len, wire::kUdGrhLen + 300);
  EXPECT_EQ(rc[0].src_qpn, a.qpn);
  EXPECT_TRUE(rc[0].has_imm);
  EXPECT_EQ(rc[0].imm, 0xfeedu);
  EXPECT_EQ(std::memcmp(b.mem.data() + 1000, d.grh.data(), wire::kUdGrhLen), 0);
  EXPECT_EQ(std::memcmp(b.mem.data() + 1000 + wire::kUdGrhLen, a.mem.data(), 300), 0);
}

// The driver polls a burst of datagrams before it sends any: each datagram's payload stays
// whole until then (it pointed into the engine's last UD datagram, freed by the next poll).
TEST(Ud, PollTransmit_BurstOfDatagramsEachPayloadStaysWhole) {
  UdSide a, b;
  for (uint32_t i = 0; i < 200; ++i) a.mem[i] = static_cast<uint8_t>(i);
  const UdDest d = dest_of(b);
  ASSERT_TRUE(a.send(1, 0, 100, d).ok());
  ASSERT_TRUE(a.send(2, 100, 100, d).ok());
  std::vector<std::vector<uint8_t>> bufs(3, std::vector<uint8_t>(kTransmitBufferSize));
  std::vector<Transmit> burst;
  for (auto& buf : bufs)
    if (auto t = a.eng.poll_transmit(Time{1000}, buf)) burst.push_back(*t);
  ASSERT_EQ(burst.size(), 2u);
  for (uint32_t k = 0; k < 2; ++k) {
    ASSERT_EQ(burst[k].payload.size(), wire::kUdGrhLen + 100);
    for (uint32_t i = 0; i < 100; ++i)
      ASSERT_EQ(burst[k].payload[wire::kUdGrhLen + i], static_cast<uint8_t>(100 * k + i)) << k;
  }
}

TEST(Ud, SendRecv_AppBufferFreeAfterPost) {
  UdSide a, b;
  b.recv(1, 0, 100);
  std::memset(a.mem.data(), 'x', 10);
  ASSERT_TRUE(a.send(1, 0, 10, dest_of(b)).ok());
  std::memset(a.mem.data(), 'y', 10);  // after the post, before the datagram goes
  auto out = drain(a);
  ASSERT_EQ(out.size(), 1u);
  b.eng.on_datagram(Time{2000}, RxInfo{}, out[0].bytes);
  ASSERT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(b.mem[wire::kUdGrhLen], 'x');
}

TEST(Ud, Recv_WrongQkeyDroppedReceiveKept) {
  UdSide a, b;
  b.recv(1, 0, 100);
  ASSERT_TRUE(a.send(1, 0, 10, dest_of(b, kQkey + 1)).ok());
  for (auto& d : drain(a)) b.eng.on_datagram(Time{2000}, RxInfo{}, d.bytes);
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.eng.stats().dropped(Drop::kBadToken), 1u);
  ASSERT_TRUE(a.send(2, 0, 10, dest_of(b)).ok());  // the right Q_Key takes the receive
  for (auto& d : drain(a)) b.eng.on_datagram(Time{2000}, RxInfo{}, d.bytes);
  EXPECT_EQ(b.poll().size(), 1u);
}

TEST(Ud, Recv_NoReceiveDroppedWithoutRnr) {
  UdSide a, b;
  ASSERT_TRUE(a.send(1, 0, 10, dest_of(b)).ok());
  for (auto& d : drain(a)) b.eng.on_datagram(Time{2000}, RxInfo{}, d.bytes);
  EXPECT_EQ(b.eng.stats().dropped(Drop::kNoReceive), 1u);
  EXPECT_TRUE(drain(b).empty());   // no NACK: UD has no RNR
  EXPECT_EQ(a.poll().size(), 1u);  // the sender's completion says nothing of delivery
  b.recv(9, 0, 100);               // a later datagram is taken
  ASSERT_TRUE(a.send(2, 0, 10, dest_of(b)).ok());
  for (auto& d : drain(a)) b.eng.on_datagram(Time{2000}, RxInfo{}, d.bytes);
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 9u);
}

TEST(Ud, Recv_TooSmallForGrhAndDataCompletesLocLenErr) {
  UdSide a, b;
  b.recv(1, 0, wire::kUdGrhLen + 9);
  ASSERT_TRUE(a.send(1, 0, 10, dest_of(b)).ok());
  for (auto& d : drain(a)) b.eng.on_datagram(Time{2000}, RxInfo{}, d.bytes);
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, WcStatus::kLocLenErr);
}

TEST(Ud, Recv_TrimmedDatagramIsLostNotNacked) {
  UdSide a, b;
  b.recv(1, 0, 4096);
  ASSERT_TRUE(a.send(1, 0, 1000, dest_of(b)).ok());
  auto out = drain(a);
  ASSERT_EQ(out.size(), 1u);
  out[0].bytes.resize(wire::kDataHeaderSize);  // a switch cut it to its header
  b.eng.on_datagram(Time{2000}, RxInfo{}, out[0].bytes);
  EXPECT_TRUE(b.poll().empty());
  EXPECT_TRUE(drain(b).empty());
  EXPECT_EQ(b.eng.stats().dropped(Drop::kTrimmed), 1u);
}

TEST(Ud, Recv_FromTheSrqInPostingOrder) {
  UdSide a, b(/*srq_depth=*/4);
  b.recv(10, 0, 100);
  b.recv(11, 100, 100);
  for (uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(a.send(i, 0, 10, dest_of(b)).ok());
  for (auto& d : drain(a)) b.eng.on_datagram(Time{2000}, RxInfo{}, d.bytes);
  auto rc = b.poll();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].wr_id, 10u);
  EXPECT_EQ(rc[1].wr_id, 11u);
}

TEST(Ud, PostSend_RefusesWhatUdCannotCarry) {
  UdSide a, b;
  const UdDest d = dest_of(b);
  EXPECT_EQ(a.send(1, 0, 4097, d).error(), Error::kTooLarge);  // more than one MTU
  EXPECT_EQ(a.send(1, 0, 10, d, Opcode::kWrite).error(), Error::kInvalidArgument);
  Sge sge{a.addr(0), 10, a.key};
  SendWr wr;
  wr.opcode = Opcode::kSend;
  wr.sg = {&sge, 1};
  EXPECT_EQ(a.eng.post_send(a.qpn, wr).error(), Error::kInvalidArgument);  // no destination
  sge.lkey = a.key + 1;
  wr.ud = &d;
  EXPECT_EQ(a.eng.post_send(a.qpn, wr).error(), Error::kLocalAccess);
  QpAttr at;
  at.state = QpState::kError;
  ASSERT_TRUE(a.eng.modify_qp(a.qpn, at, attr::kState).ok());
  EXPECT_EQ(a.send(1, 0, 10, d).error(), Error::kBadState);
  EXPECT_TRUE(drain(a).empty());
}

TEST(Ud, Recv_NotReadyOrNotUdIsDropped) {
  UdSide a, b;
  // b back to RESET then INIT: not receiving yet.
  QpAttr at;
  at.state = QpState::kReset;
  ASSERT_TRUE(b.eng.modify_qp(b.qpn, at, attr::kState).ok());
  at.state = QpState::kInit;
  at.qkey = kQkey;
  ASSERT_TRUE(b.eng.modify_qp(b.qpn, at, attr::kState | attr::kQkey).ok());
  b.recv(1, 0, 100);
  ASSERT_TRUE(a.send(1, 0, 10, dest_of(b)).ok());
  for (auto& d : drain(a)) b.eng.on_datagram(Time{2000}, RxInfo{}, d.bytes);
  EXPECT_EQ(b.eng.stats().dropped(Drop::kQpNotReady), 1u);
  EXPECT_TRUE(b.poll().empty());
}

// A UD QP of `e` at RTS with Q_Key `qkey` on completion queue `cq` (a second QP of a side).
Qpn extra_ud_qp(Engine& e, CqId cq, uint32_t qkey) {
  QpInit init;
  init.send_cq = init.recv_cq = cq;
  init.ud = true;
  const Qpn q = e.create_qp(init).value();
  QpAttr a;
  a.qkey = qkey;
  for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
    a.state = s;
    EXPECT_TRUE(e.modify_qp(q, a, attr::kState | attr::kQkey).ok());
  }
  return q;
}

constexpr McastGid kGroup = {0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x4d, 1};

// A datagram to the group: QPN 0xFFFFFF, the GRH's dgid (bytes 24..39) the group.
UdDest group_dest() {
  UdDest d;
  d.peer = 3;
  d.path = Path{0x10203, 1};
  d.qpn = kMulticastQpn;
  d.qkey = kQkey;
  std::copy(kGroup.begin(), kGroup.end(), d.grh.begin() + 24);
  return d;
}

TEST(Ud, AttachMcast_UdQpsOnlyDetachWhatIsAttachedDestroyDetaches) {
  UdSide b;
  EXPECT_EQ(b.eng.attach_mcast(999, kGroup).error(), Error::kNoSuchQp);
  QpInit rc;
  rc.send_cq = rc.recv_cq = b.cq;
  const Qpn rc_qpn = b.eng.create_qp(rc).value();
  EXPECT_EQ(b.eng.attach_mcast(rc_qpn, kGroup).error(), Error::kInvalidArgument);
  EXPECT_EQ(b.eng.detach_mcast(b.qpn, kGroup).error(), Error::kInvalidArgument);
  ASSERT_TRUE(b.eng.attach_mcast(b.qpn, kGroup).ok());
  ASSERT_TRUE(b.eng.attach_mcast(b.qpn, kGroup).ok());  // again: one attachment
  EXPECT_EQ(b.eng.mcast_members(kGroup), std::vector<Qpn>{b.qpn});
  ASSERT_TRUE(b.eng.destroy_qp(b.qpn).ok());
  EXPECT_TRUE(b.eng.mcast_members(kGroup).empty());
}

// Each attached QP of the receiving engine takes the datagram as its own: Q_Key checked per
// QP, a receive each; a detached QP takes nothing; a group nobody here joined drops it.
TEST(Ud, McastDatagram_EveryAttachedQpReceivesQkeyChecked) {
  UdSide a, b;
  const Qpn second = extra_ud_qp(b.eng, b.cq, kQkey);
  const Qpn other_qkey = extra_ud_qp(b.eng, b.cq, 0x22222222);
  const Qpn left = extra_ud_qp(b.eng, b.cq, kQkey);
  for (Qpn q : {b.qpn, second, other_qkey, left}) ASSERT_TRUE(b.eng.attach_mcast(q, kGroup).ok());
  ASSERT_TRUE(b.eng.detach_mcast(left, kGroup).ok());
  b.recv(1, 0, 200);
  Sge sge{b.addr(1000), 200, b.key};
  ASSERT_TRUE(b.eng.post_recv(second, RecvWr{2, {&sge, 1}}).ok());
  for (uint32_t i = 0; i < 50; ++i) a.mem[i] = static_cast<uint8_t>(i + 1);
  ASSERT_TRUE(a.send(9, 0, 50, group_dest()).ok());
  auto out = drain(a);
  ASSERT_EQ(out.size(), 1u);
  b.eng.on_datagram(Time{2000}, RxInfo{}, out[0].bytes);
  auto got = b.poll();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].qpn, b.qpn);
  EXPECT_EQ(got[1].qpn, second);
  for (const Completion& c : got) {
    EXPECT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_EQ(c.byte_len, wire::kUdGrhLen + 50);
    EXPECT_EQ(c.src_qpn, a.qpn);
  }
  EXPECT_EQ(b.mem[wire::kUdGrhLen], 1);
  EXPECT_EQ(b.mem[1000 + wire::kUdGrhLen + 49], 50);
  EXPECT_EQ(b.eng.stats().dropped(Drop::kBadToken), 1u);   // other_qkey
  EXPECT_EQ(b.eng.stats().dropped(Drop::kNoReceive), 0u);  // `left` is out of the group
  for (Qpn q : {b.qpn, second, other_qkey}) ASSERT_TRUE(b.eng.detach_mcast(q, kGroup).ok());
  b.eng.on_datagram(Time{3000}, RxInfo{}, out[0].bytes);
  EXPECT_EQ(b.eng.stats().dropped(Drop::kUnknownQp), 1u);
}

// A SEND with ud_fan (a group's member processes): one datagram to each, on the member's own
// peer and path, one send-queue slot and one completion, after the last.
TEST(Ud, McastFanOut_OneDatagramPerMemberOneCompletion) {
  UdSide a;
  const UdDest base = group_dest();
  std::vector<UdDest> fan(3, base);
  for (uint32_t i = 0; i < 3; ++i) {
    fan[i].peer = 10 + i;
    fan[i].path = Path{0x100u + i, static_cast<uint16_t>(i % 2)};
  }
  Sge sge{a.addr(0), 64, a.key};
  SendWr wr;
  wr.wr_id = 42;
  wr.opcode = Opcode::kSend;
  wr.sg = {&sge, 1};
  wr.ud = &base;
  wr.ud_fan = fan;
  ASSERT_TRUE(a.eng.post_send(a.qpn, wr).ok());
  auto out = drain(a);
  ASSERT_EQ(out.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].t.peer, 10 + i);
    EXPECT_EQ(out[i].t.path.ev, 0x100u + i);
    const auto p = wire::decode(out[i].bytes);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->common.dst_qpn, kMulticastQpn);
  }
  auto c = a.poll();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 42u);
  EXPECT_EQ(c[0].byte_len, 64u);
}

// UD has no acknowledgements, so no path health of its own: it uses the one the engine's QPs
// share. With the peer's paths given (set_ud_paths, as a verbs AH does), a datagram whose
// named path is on a plane held for the peer (our port without link, the peer's word on its
// ports, an administrative drain) leaves on a path of another plane; when the hold ends, on
// the named path again. Without paths for the peer, or with every plane held, the named one.
TEST(Ud, HeldPlane_DatagramLeavesOnAnotherPlaneOfThePeer) {
  UdSide a, b;
  const std::vector<Path> paths = {{0x100, 0}, {0x101, 0}, {0x200, 1}, {0x201, 1}};
  UdDest d = dest_of(b);
  d.path = paths[2];  // plane 1
  auto sent_on = [&](uint64_t wr_id) {
    EXPECT_TRUE(a.send(wr_id, 0, 10, d).ok());
    auto out = drain(a);
    EXPECT_EQ(out.size(), 1u);
    if (out.empty()) return Path{0, 0xffff};
    const auto p = wire::decode(out[0].bytes);
    EXPECT_TRUE(p.ok());
    if (p.ok()) {
      EXPECT_EQ(p->common.ev, out[0].t.path.ev);  // the EV on the wire is the path's
    }
    return out[0].t.path;
  };
  ASSERT_TRUE(a.eng.set_port_up(Time{1000}, 1, false).ok());
  EXPECT_EQ(sent_on(1).plane, 1);  // no paths known for the peer: the named one
  a.eng.set_ud_paths(d.peer, paths);
  for (uint64_t i = 0; i < 4; ++i) {
    const Path p = sent_on(2 + i);
    EXPECT_EQ(p.plane, 0) << "datagram " << i << " went into the plane whose port is down";
    EXPECT_TRUE(p.ev == 0x100 || p.ev == 0x101) << p.ev;
  }
  EXPECT_EQ(a.eng.stats().ud_rerouted, 4u);
  ASSERT_TRUE(a.eng.set_port_up(Time{1000}, 1, true).ok());
  Path p = sent_on(6);
  EXPECT_EQ(p.plane, 1);  // the port is back: the named path
  EXPECT_EQ(p.ev, 0x200u);
  a.eng.set_peer_planes_down(Time{1000}, d.peer, 1u << 1);  // the peer's word: its plane 1 is down
  EXPECT_EQ(sent_on(7).plane, 0);
  a.eng.set_peer_planes_down(Time{1000}, d.peer, 0);
  ASSERT_TRUE(a.eng.set_plane_drained(1, true).ok());  // an administrative drain
  EXPECT_EQ(sent_on(8).plane, 0);
  ASSERT_TRUE(a.eng.set_plane_drained(0, true).ok());  // both drained: nothing better
  EXPECT_EQ(sent_on(9).ev, 0x200u);
  ASSERT_TRUE(a.eng.set_plane_drained(0, false).ok());
  ASSERT_TRUE(a.eng.set_plane_drained(1, false).ok());
  a.eng.set_ud_paths(d.peer, {});  // forgotten
  ASSERT_TRUE(a.eng.set_port_up(Time{1000}, 1, false).ok());
  EXPECT_EQ(sent_on(10).plane, 1);
  EXPECT_EQ(a.eng.stats().ud_rerouted, 6u);
}

// The same on the simulated fabric, with the hold learned rather than told: 2 hosts, 4 planes
// x 4 spines, host 1's T0 of plane 2 down. A UD stream from host 0 whose datagrams all name
// plane-2 paths arrives whole while the fault lasts, because the RC QP's losses there make the
// shared path health hold plane 2 for host 1 and every datagram leaves on another plane of the
// AH's paths (set_ud_paths); with the fault repaired and the hold run out, the same datagrams
// go on their plane-2 paths again (no reroute) and arrive. Without set_ud_paths the stream is
// lost while plane 2 is down. Deterministic: virtual time, fixed seed.
TEST(Ud, PlaneHeldByPathHealth_OnTheSimFabric_StreamMovesOffAndComesBack) {
  EngineConfig ec;
  ec.nic_bps = 40'000'000'000;
  ec.base_rtt = std::chrono::microseconds(20);
  sim::Testbed tb(sim::SimConfig{11}, ec);
  tb.add_host();
  tb.add_host();
  sim::FabricConfig fc;
  fc.hosts = 2;
  fc.host_port_bps = fc.uplink_bps = 10'000'000'000;
  sim::Fabric fab(tb.net(), fc);
  // A UD QP and a CQ of its own on each host (the testbed's CQ belongs to the bulk WRITE).
  struct UdHost {
    CqId cq = 0;
    Qpn qpn = 0;
    std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 16, 0);
    uint32_t key = 0;
  } ud[2];
  for (PeerId h : {0u, 1u}) {
    Engine& e = tb.engine(h);
    ud[h].cq = e.create_cq(1024).value();
    QpInit init;
    init.send_cq = init.recv_cq = ud[h].cq;
    init.ud = true;
    ud[h].qpn = e.create_qp(init).value();
    ud[h].key = tb.register_mr(h, ud[h].mem);
    QpAttr a;
    a.qkey = kQkey;
    for (QpState st : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
      a.state = st;
      ASSERT_TRUE(e.modify_qp(ud[h].qpn, a, attr::kState | attr::kQkey).ok());
    }
  }
  const std::vector<Path> paths = fab.paths(0, 1, 4);
  std::vector<Path> on2;
  for (const Path& p : paths)
    if (p.plane == 2) on2.push_back(p);
  ASSERT_EQ(on2.size(), 4u);
  constexpr uint32_t kLen = 200, kSlot = 256;
  // 16 datagrams from host 0, each naming a plane-2 path; how many reached host 1 intact.
  uint8_t seed = 0;
  auto stream = [&]() {
    Engine& rx = tb.engine(1);
    for (uint32_t i = 0; i < 16; ++i) {
      Sge g{reinterpret_cast<uint64_t>(&ud[1].mem[i * kSlot]), kSlot, ud[1].key};
      EXPECT_TRUE(rx.post_recv(ud[1].qpn, RecvWr{i, {&g, 1}}).ok());
    }
    ++seed;
    for (uint32_t i = 0; i < 16; ++i) {
      for (uint32_t k = 0; k < kLen; ++k)
        ud[0].mem[i * kSlot + k] = static_cast<uint8_t>(seed * 31 + i * 7 + k);
      UdDest d;
      d.peer = 1;
      d.path = on2[i % on2.size()];
      d.qpn = ud[1].qpn;
      d.qkey = kQkey;
      Sge g{reinterpret_cast<uint64_t>(&ud[0].mem[i * kSlot]), kLen, ud[0].key};
      SendWr wr;
      wr.wr_id = i;
      wr.opcode = Opcode::kSend;
      wr.sg = {&g, 1};
      wr.ud = &d;
      EXPECT_TRUE(tb.engine(0).post_send(ud[0].qpn, wr).ok());
    }
    // Until all 16 are in (behind the bulk WRITE's queues they take a while), or 20 ms.
    tb.net().run_until([&] { return rx.cq_depth(ud[1].cq) >= 16; },
                       tb.net().now() + Duration{20'000'000});
    std::vector<Completion> c(64);
    c.resize(tb.engine(0).poll_cq(ud[0].cq, c));
    EXPECT_EQ(c.size(), 16u);  // every send completes once handed to the network
    c.resize(64);
    c.resize(rx.poll_cq(ud[1].cq, c));
    uint32_t intact = 0;
    for (const Completion& k : c) {
      const uint8_t* got = &ud[1].mem[k.wr_id * kSlot + wire::kUdGrhLen];
      const uint8_t* sent = &ud[0].mem[k.wr_id * kSlot];
      if (k.status == WcStatus::kSuccess && k.byte_len == wire::kUdGrhLen + kLen &&
          std::memcmp(got, sent, kLen) == 0)
        ++intact;
    }
    return intact;
  };
  tb.engine(0).set_ud_paths(1, paths);
  EXPECT_EQ(stream(), 16u) << "healthy fabric";
  EXPECT_EQ(tb.engine(0).stats().ud_rerouted, 0u);

  fab.t0_down(2, 1);  // host 1 loses plane 2: whatever is sent to it there is dropped
  const auto rc = tb.connect(0, 1, paths, [] {
    QpAttr a;
    a.timeout = 14;
    a.retry_cnt_exp = 7;
    return a;
  }());
  // Light (one 16 KiB WRITE at a time): queues stay short, so a datagram meets no tail drop.
  sim::BulkWrite bulk(tb, 0, 1, rc, sim::BulkWrite::Config{16 << 10, 1, 1});
  for (int i = 0; i < 200 && !(tb.engine(0).held_planes(1, tb.net().now()) & (1u << 2)); ++i)
    bulk.run_until(tb.net().now() + Duration{100'000}, Duration{10'000});
  ASSERT_TRUE(tb.engine(0).held_planes(1, tb.net().now()) & (1u << 2))
      << "the RC QP's losses never held plane 2";
  EXPECT_EQ(stream(), 16u) << "datagrams went into the dead plane";
  EXPECT_EQ(tb.engine(0).stats().ud_rerouted, 16u);

  // Repaired: the plane hold runs out and the RC QP's traffic, sprayed on plane 2 again, is
  // acknowledged there, which also clears the holds of plane 2's EV values (an EV whose hold ran
  // out with no acknowledgement stays passed over until one comes).
  fab.t0_up(2, 1);
  for (int i = 0; i < 400 && tb.engine(0).held_planes(1, tb.net().now()) != 0; ++i)
    bulk.run_until(tb.net().now() + Duration{100'000}, Duration{10'000});
  ASSERT_EQ(tb.engine(0).held_planes(1, tb.net().now()), 0u) << "the hold never ended";
  bulk.run_until(tb.net().now() + Duration{5'000'000}, Duration{10'000});
  bulk.stop_posting();
  bulk.run_until(tb.net().now() + Duration{2'000'000}, Duration{10'000});
  EXPECT_TRUE(bulk.ok()) << bulk.first_error();
  EXPECT_EQ(stream(), 16u);
  EXPECT_EQ(tb.engine(0).stats().ud_rerouted, 16u) << "rerouted with no hold";
}

}  // namespace
}  // namespace mrc::engine
