// Tests of receive placement (Engine::predict_placement, write_target, on_datagram with the
// header and payload apart): what is predicted, what is found in place, and that a payload
// that landed in another PSN's place still ends where it belongs.
// Threading: single-threaded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "loop.h"

namespace mrc::engine::testing {
namespace {

// Both engines with receive placement on (EngineConfig::rx_placement, as the UDP driver sets it
// from UdpConfig::rx_placement).
EngineConfig placing() {
  EngineConfig c;
  c.rx_placement = true;
  return c;
}

// A WRITE from a to b whose data packets the test holds (b's ACKs flow as usual).
struct Held {
  Loop loop;
  std::vector<std::vector<uint8_t>> data;  // a's data packets, in PSN order
  size_t payload = 0;                      // bytes per full packet

  explicit Held(uint32_t len, const EngineConfig& cfg = placing()) : loop(1000, cfg) {
    for (size_t i = 0; i < loop.a.mem.size(); ++i) loop.a.mem[i] = static_cast<uint8_t>(i * 7 + 3);
    loop.hook = [this](int from, std::vector<uint8_t>& d) {
      if (from == 0 && wire::is_data(static_cast<wire::Kind>(d[1]))) {
        data.push_back(d);
        return Loop::Verdict::kDrop;
      }
      return Loop::Verdict::kDeliver;
    };
    loop.post_write(loop.a, 1, 0, len, 0);
    loop.run(200us);  // sends what the window allows, no retransmission yet
    if (!data.empty()) payload = wire::decode(data[0])->data.payload_len;
  }
  std::span<const uint8_t> header(size_t i) const {
    return {data[i].data(), wire::kDataHeaderSize};
  }
  std::span<const uint8_t> payload_of(size_t i) const {
    return {data[i].data() + wire::kDataHeaderSize, data[i].size() - wire::kDataHeaderSize};
  }
  // As the kernel would: packet i's payload lands at `at`, and the engine is fed from there.
  void land_and_feed(size_t i, uint8_t* at) {
    const auto p = payload_of(i);
    std::memcpy(at, p.data(), p.size());
    loop.b.eng.on_datagram(loop.now, RxInfo{}, header(i), {at, p.size()});
  }
};

TEST(Placement, PredictsTheNextUnreceivedPsnsOfTheMessageInOrder) {
  Held h(64 * 1024);
  ASSERT_GE(h.data.size(), 6u);
  RxPlacement out[64];
  EXPECT_EQ(h.loop.b.eng.predict_placement(out), 0u) << "no WRITE placed yet";
  h.loop.b.eng.on_datagram(h.loop.now, RxInfo{}, h.data[0]);
  const size_t n = h.loop.b.eng.predict_placement(out);
  const size_t rest = (64 * 1024 - h.payload + h.payload - 1) / h.payload;
  ASSERT_EQ(n, rest) << "every later PSN of the message";
  for (size_t k = 0; k < n; ++k) {
    EXPECT_EQ(out[k].at, h.loop.b.mem.data() + (k + 1) * h.payload) << k;
    EXPECT_EQ(out[k].len, std::min<size_t>(h.payload, 64 * 1024 - (k + 1) * h.payload)) << k;
  }
  // A PSN already here ends the run: packet 3 arrived, so only packet 1 and 2's places.
  h.loop.b.eng.on_datagram(h.loop.now, RxInfo{}, h.data[3]);
  h.loop.b.eng.on_datagram(h.loop.now, RxInfo{}, h.data[0]);  // a duplicate moves nothing
  ASSERT_EQ(h.loop.b.eng.predict_placement(out), rest - 3) << "after PSN 3, the last placed";
  EXPECT_EQ(out[0].at, h.loop.b.mem.data() + 4 * h.payload);
  h.loop.b.eng.on_datagram(h.loop.now, RxInfo{}, h.data[1]);
  EXPECT_EQ(h.loop.b.eng.predict_placement(out), 1u);
  EXPECT_EQ(out[0].at, h.loop.b.mem.data() + 2 * h.payload);
  // Limited to the span given.
  EXPECT_EQ(h.loop.b.eng.predict_placement({out, 0}), 0u);
}

// A QP reset and reconnected with the same token and first PSN starts a fresh scoreboard, on
// which the old message's later PSNs look unreceived: nothing from before the reset may be
// predicted, or the kernel would be pointed into a WRITE that already completed.
TEST(Placement, NothingPredictedAfterTheQpIsResetAndReconnected) {
  Held h(64 * 1024);
  ASSERT_GE(h.data.size(), 6u);
  Engine& b = h.loop.b.eng;
  b.on_datagram(h.loop.now, RxInfo{}, h.data[0]);
  RxPlacement out[64];
  ASSERT_GT(b.predict_placement(out), 0u);
  QpAttr reset;
  reset.state = QpState::kReset;
  ASSERT_TRUE(b.modify_qp(h.loop.b.qpn, reset, attr::kState).ok());
  QpAttr at;  // reconnected as Held's Loop connected it: same peer, token, paths, first PSN
  at.state = QpState::kInit;
  ASSERT_TRUE(b.modify_qp(h.loop.b.qpn, at, attr::kState).ok());
  at.state = QpState::kRtr;
  at.peer = 1;
  at.dest_qpn = h.loop.a.qpn;
  at.remote_token = h.loop.a.token;
  at.rq_psn = 1000;
  for (uint32_t i = 0; i < 4; ++i)
    at.paths.push_back(Path{0x100 + i, static_cast<uint16_t>(i % 2)});
  ASSERT_TRUE(
      b.modify_qp(h.loop.b.qpn, at, attr::kState | attr::kDest | attr::kPaths | attr::kRqPsn).ok());
  EXPECT_EQ(b.predict_placement(out), 0u) << "a prediction from the QP before its reset";
}

TEST(Placement, InPlacePayloadIsNotCopiedAndAMisplacedOneIsCopiedToItsPlace) {
  Held h(64 * 1024);
  ASSERT_GE(h.data.size(), 6u);
  Engine& b = h.loop.b.eng;
  b.on_datagram(h.loop.now, RxInfo{}, h.data[0]);
  EXPECT_EQ(b.stats().rx_write_copied, h.payload);
  RxPlacement out[64];
  ASSERT_GE(b.predict_placement(out), 4u);
  // PSN 1 where predicted: found in place, not copied.
  EXPECT_EQ(b.write_target(h.header(1)), out[0].at);
  h.land_and_feed(1, out[0].at);
  EXPECT_EQ(b.stats().rx_write_in_place, h.payload);
  EXPECT_EQ(b.stats().rx_write_copied, h.payload);
  // PSN 3 lands in PSN 2's place (a misprediction): the engine copies it to its own place;
  // PSN 2's place holds PSN 3's bytes until PSN 2 arrives and overwrites them.
  EXPECT_NE(b.write_target(h.header(3)), out[1].at);
  h.land_and_feed(3, out[1].at);
  EXPECT_EQ(b.stats().rx_write_copied, 2 * h.payload);
  EXPECT_EQ(0, std::memcmp(out[2].at, h.payload_of(3).data(), h.payload));
  b.on_datagram(h.loop.now, RxInfo{}, h.data[2]);
  EXPECT_EQ(0, std::memcmp(h.loop.b.mem.data(), h.loop.a.mem.data(), 4 * h.payload));
  // The rest as usual: the WRITE completes with every byte as sent.
  h.loop.hook = {};
  for (size_t i = 4; i < h.data.size(); ++i) b.on_datagram(h.loop.now, RxInfo{}, h.data[i]);
  ASSERT_TRUE(h.loop.run_until([&] { return !h.loop.poll(h.loop.a).empty(); }));
  EXPECT_EQ(0, std::memcmp(h.loop.b.mem.data(), h.loop.a.mem.data(), 64 * 1024));
}

// Placement off (EngineConfig::rx_placement, the default): the engine keeps no record of the
// WRITEs it places, so nothing is ever predicted, however many arrive in order; write_target
// (a pure look-up) still answers, and a payload fed apart still lands and is counted as copied.
TEST(Placement, OffPredictsNothingAndRecordsNothing) {
  Held h(64 * 1024, EngineConfig{});
  ASSERT_GE(h.data.size(), 6u);
  Engine& b = h.loop.b.eng;
  RxPlacement out[64];
  for (size_t i = 0; i < 3; ++i) {
    b.on_datagram(h.loop.now, RxInfo{}, h.data[i]);
    EXPECT_EQ(b.predict_placement(out), 0u) << "after PSN " << i;
  }
  EXPECT_EQ(b.write_target(h.header(3)), h.loop.b.mem.data() + 3 * h.payload);
  std::vector<uint8_t> elsewhere(h.payload);
  h.land_and_feed(3, elsewhere.data());
  EXPECT_EQ(b.predict_placement(out), 0u);
  EXPECT_EQ(b.stats().rx_write_copied, 4 * h.payload);
  EXPECT_EQ(b.stats().rx_write_in_place, 0u);
  EXPECT_EQ(0, std::memcmp(h.loop.b.mem.data(), h.loop.a.mem.data(), 4 * h.payload));
}

// An XRC target QP's WRITE is copied into an MR of the PD of the XRC SRQ it names (Core::on_data),
// so write_target names that place as for any QP: the driver's check that a copy lands on
// nothing not yet fed depends on it. One naming an SRQ of another PD places nothing: null.
TEST(Placement, WriteTargetNamesAnXrcTargetQpsPlace) {
  constexpr uint32_t kDomain = 7;
  Loop l(1000, placing(), 4, [](int side, Engine&, QpInit& init) {
    if (side != 1) return;
    init.xrcd = kDomain;
    init.send_cq = init.recv_cq = 0;
  });
  const uint32_t same_pd = l.b.eng.create_srq(8, XrcSrqInit{kDomain, l.b.cq, 0}).value();
  const uint32_t other_pd = l.b.eng.create_srq(8, XrcSrqInit{kDomain, l.b.cq, 3}).value();
  std::vector<std::vector<uint8_t>> data;
  l.hook = [&](int from, std::vector<uint8_t>& d) {
    if (from != 0 || !wire::is_data(static_cast<wire::Kind>(d[1]))) return Loop::Verdict::kDeliver;
    data.push_back(d);
    return Loop::Verdict::kDrop;
  };
  for (const uint32_t srqn : {same_pd, other_pd}) {
    Sge sge{reinterpret_cast<uint64_t>(l.a.mem.data()), 64, l.a.key};
    SendWr wr;
    wr.opcode = Opcode::kWrite;
    wr.sg = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(l.b.mem.data()) + 4096;
    wr.rkey = l.b.key;
    wr.xrc_srqn = srqn;
    ASSERT_TRUE(l.a.eng.post_send(l.a.qpn, wr).ok());
  }
  for (size_t i = 0; i < 64; ++i) l.a.mem[i] = static_cast<uint8_t>(0xA0 + i);
  l.run(200us);
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(l.b.eng.write_target({data[0].data(), wire::kDataHeaderSize}), l.b.mem.data() + 4096);
  EXPECT_EQ(l.b.eng.write_target({data[1].data(), wire::kDataHeaderSize}), nullptr);
  // The engine copies the first where write_target said, and the second nowhere.
  l.b.eng.on_datagram(l.now, RxInfo{}, data[0]);
  EXPECT_EQ(0, std::memcmp(l.b.mem.data() + 4096, l.a.mem.data(), 64));
  EXPECT_EQ(l.b.eng.stats().rx_write_copied, 64u);
  const std::vector<uint8_t> before(l.b.mem.begin(), l.b.mem.end());
  l.b.eng.on_datagram(l.now, RxInfo{}, data[1]);
  EXPECT_EQ(l.b.eng.stats().rx_write_copied, 64u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), l.b.mem.begin()));
}

// No prediction where the kernel must not write: a deregistered MR, a QP out of RTR/RTS, or a
// copier other than memcpy (GPU memory, say). write_target names nothing in those cases.
TEST(Placement, NothingPredictedWithoutMrConnectedQpOrMemcpy) {
  RxPlacement out[64];
  {
    Held h(64 * 1024);
    h.loop.b.eng.on_datagram(h.loop.now, RxInfo{}, h.data[0]);
    ASSERT_GT(h.loop.b.eng.predict_placement(out), 0u);
    ASSERT_TRUE(h.loop.b.eng.deregister_mr(h.loop.b.key).ok());
    EXPECT_EQ(h.loop.b.eng.predict_placement(out), 0u);
    EXPECT_EQ(h.loop.b.eng.write_target(h.header(1)), nullptr);
  }
  {
    Held h(64 * 1024);
    h.loop.b.eng.on_datagram(h.loop.now, RxInfo{}, h.data[0]);
    QpAttr at;
    at.state = QpState::kError;
    ASSERT_TRUE(h.loop.b.eng.modify_qp(h.loop.b.qpn, at, attr::kState).ok());
    EXPECT_EQ(h.loop.b.eng.predict_placement(out), 0u);
    EXPECT_EQ(h.loop.b.eng.write_target(h.header(1)), nullptr);
  }
  {
    EngineConfig cfg = placing();
    cfg.copy = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
    Held h(64 * 1024, cfg);
    h.loop.b.eng.on_datagram(h.loop.now, RxInfo{}, h.data[0]);
    EXPECT_EQ(h.loop.b.eng.predict_placement(out), 0u);
  }
  {
    Held h(64 * 1024);  // not a data header
    std::vector<uint8_t> shortened(h.data[1].begin(), h.data[1].begin() + 40);
    EXPECT_EQ(h.loop.b.eng.write_target(shortened), nullptr);
    EXPECT_EQ(h.loop.b.eng.write_target(h.header(1)), h.loop.b.mem.data() + h.payload);
  }
}

}  // namespace
}  // namespace mrc::engine::testing
