// The plugin's control frames (control.h) and knobs (knobs.h): round trips, and every kind of
// bad input refused with a message that names it.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "control.h"
#include "knobs.h"

namespace mrc::nccl {
namespace {

Endpoint endpoint(int planes, int qps = 1) {
  Endpoint e;
  e.mode = io::PathMode::kSrv6;
  e.fabric_host = 3;
  for (int q = 0; q < qps; ++q) e.qpns.push_back(static_cast<uint32_t>(17 + q));
  e.token = 0xdeadbeef;
  e.mtu = 2048;
  e.eager_addr = 0x7f0012345600ull;
  e.eager_rkey = 0x51;
  e.eager_slots = 8;
  e.eager_slot_bytes = 4 + 8192;
  for (int p = 0; p < planes; ++p) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    inet_pton(AF_INET6, ("fd00:" + std::to_string(p) + "::1").c_str(), &a.sin6_addr);
    a.sin6_port = htons(static_cast<uint16_t>(4791 + p));
    a.sin6_scope_id = static_cast<uint32_t>(p);
    e.planes.push_back(a);
  }
  return e;
}

TEST(ControlFrame, HelloRoundTrip) {
  Frame f;
  f.type = FrameType::kHello;
  f.listen_id = 0x1122334455667788ull;
  f.endpoint = endpoint(16, kMaxQps);
  const auto bytes = encode(f);
  EXPECT_EQ(bytes.size(), kFrameHeader + kMaxFrameBody);
  auto d = decode(bytes);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->listen_id, f.listen_id);
  EXPECT_EQ(d->endpoint.mode, io::PathMode::kSrv6);
  EXPECT_EQ(d->endpoint.fabric_host, 3u);
  EXPECT_EQ(d->endpoint.qpns, (std::vector<uint32_t>{17, 18, 19, 20, 21, 22, 23, 24}));
  EXPECT_EQ(d->endpoint.token, 0xdeadbeefu);
  EXPECT_EQ(d->endpoint.mtu, 2048u);
  EXPECT_EQ(d->endpoint.eager_addr, 0x7f0012345600ull);
  EXPECT_EQ(d->endpoint.eager_rkey, 0x51u);
  EXPECT_EQ(d->endpoint.eager_slots, 8u);
  EXPECT_EQ(d->endpoint.eager_slot_bytes, 4u + 8192);
  ASSERT_EQ(d->endpoint.planes.size(), 16u);
  EXPECT_EQ(to_string(d->endpoint.planes[5]), "[fd00:5::1]:4796");
  EXPECT_EQ(d->endpoint.planes[5].sin6_scope_id, 5u);
}

TEST(ControlFrame, ReadyAndByeRoundTrip) {
  Frame bye;
  bye.type = FrameType::kBye;
  bye.delivered = {123456789, 0, 7};
  bye.eager_copied = 0xfffffff9u;
  auto d = decode(encode(bye));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->type, FrameType::kBye);
  EXPECT_EQ(d->delivered, (std::vector<uint64_t>{123456789, 0, 7}));
  EXPECT_EQ(d->eager_copied, 0xfffffff9u);
  bye.delivered.clear();
  EXPECT_NE(decode(encode(bye)).error().find("BYE: 0 QPs"), std::string::npos);
  Frame ready;
  ready.type = FrameType::kReady;
  EXPECT_EQ(encode(ready).size(), kFrameHeader);
  EXPECT_TRUE(decode(encode(ready)).ok());
}

std::string decode_error(std::vector<uint8_t> b) {
  auto d = decode(b);
  return d.ok() ? "" : d.error();
}

TEST(ControlFrame, BadInput_NamesTheProblem) {
  Frame f;
  f.type = FrameType::kReply;
  f.endpoint = endpoint(2, 2);
  const auto good = encode(f);
  auto b = good;
  b[0] ^= 1;
  EXPECT_NE(decode_error(b).find("bad magic"), std::string::npos);
  b = good;
  b[4] = 9;
  EXPECT_NE(decode_error(b).find("peer speaks version 9"), std::string::npos);
  b = good;
  b[6] = 77;
  EXPECT_NE(decode_error(b).find("unknown type 77"), std::string::npos);
  b = good;
  b.pop_back();
  EXPECT_NE(decode_error(b).find("body bytes, got"), std::string::npos);
  b = good;
  b[8] = 0xff;
  b[9] = 0xff;
  EXPECT_NE(decode_error(b).find("at most"), std::string::npos);
  b = good;
  b[kFrameHeader + 8] = 7;  // path mode
  EXPECT_NE(decode_error(b).find("unknown path mode 7"), std::string::npos);
  b = good;
  b[kFrameHeader + 9] = 0;  // planes
  EXPECT_NE(decode_error(b).find("0 planes"), std::string::npos);
  b = good;
  b[kFrameHeader + 9] = 3;  // says 3 planes, carries 2
  EXPECT_NE(decode_error(b).find("truncated"), std::string::npos);
  b = good;
  b[kFrameHeader + 10] = 0;  // QPs
  EXPECT_NE(decode_error(b).find("0 QPs"), std::string::npos);
  b = good;
  b[kFrameHeader + 10] = 9;
  EXPECT_NE(decode_error(b).find("9 QPs (1..8)"), std::string::npos);
  b = good;
  b[kFrameHeader + 11] = 1;
  EXPECT_NE(decode_error(b).find("reserved field not zero"), std::string::npos);
  b = good;
  std::memset(&b[kFrameHeader + 48], 0, 4);  // the second QPN
  EXPECT_NE(decode_error(b).find("QPN 0"), std::string::npos);
  b = good;
  b[kFrameHeader + 20] = 0x01;  // mtu 2048 -> 2049
  EXPECT_NE(decode_error(b).find("MTU 2049"), std::string::npos);
  b = good;
  b[kFrameHeader + 36] = 65;  // eager slots
  EXPECT_NE(decode_error(b).find("eager ring of 65 slots (at most 64)"), std::string::npos);
  b = good;
  std::memset(&b[kFrameHeader + 40], 0xff, 4);  // eager slot bytes
  EXPECT_NE(decode_error(b).find("with slots of 4294967295 bytes (4..65540)"), std::string::npos);
  b = good;
  std::memset(&b[kFrameHeader + 24], 0, 8);  // eager ring address, with slots
  EXPECT_NE(decode_error(b).find("eager ring at 0x0"), std::string::npos);
  b = good;
  b[4] = 1;  // a version-1 plugin (one QP per connection) on the other side
  EXPECT_NE(decode_error(b).find("peer speaks version 1, this plugin 3"), std::string::npos);
  b[4] = 2;  // version 2: no eager ring
  EXPECT_NE(decode_error(b).find("peer speaks version 2, this plugin 3"), std::string::npos);
  EXPECT_NE(decode_error({1, 2, 3}).find("shorter than a header"), std::string::npos);
}

io::Getenv env(std::map<std::string, std::string> m) {
  return [m](const char* n) -> std::optional<std::string> {
    auto it = m.find(n);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Knobs, DefaultsAndValues) {
  auto k = read_knobs(env({}));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->timeout, 16);
  EXPECT_EQ(k->retry_cnt_linear, 7);
  EXPECT_EQ(k->retry_cnt_exp, 5);
  EXPECT_TRUE(k->qp_hint);
  EXPECT_EQ(k->qps_per_conn, 1u);
  EXPECT_EQ(k->eager_bytes, 8192u);
  k = read_knobs(env({{"NCCL_MRC_TIMEOUT", "20"},
                      {"NCCL_MRC_QPS_PER_CONN", "4"},
                      {"NCCL_MRC_EAGER", "0"},
                      {"NCCL_MRC_RETRY_CNT_EXP", "25"},
                      {"NCCL_MRC_CC_MAX_RATE", "100000"},
                      {"NCCL_MRC_CONFIG", "/a.json,/b.json"},
                      {"NCCL_MRC_DEVICES", "1,0"},
                      {"NCCL_MRC_CTRL_ADDR", "fd00::5"}}));
  ASSERT_TRUE(k.ok()) << k.error();
  EXPECT_EQ(k->timeout, 20);
  EXPECT_EQ(k->retry_cnt_exp, 25);
  EXPECT_EQ(k->cc_max_mbps, 100000u);
  EXPECT_EQ(k->config_files, (std::vector<std::string>{"/a.json", "/b.json"}));
  EXPECT_EQ(k->devices, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(k->ctrl_addr, "fd00::5");
  EXPECT_EQ(k->qps_per_conn, 4u);
  EXPECT_EQ(k->eager_bytes, 0u);
}

// With nothing set, the plugin's QPs get the connection policy every face uses (the engine's
// QpAttr defaults): no timeout, retry budget or window of the plugin's own.
TEST(Knobs, Defaults_AreTheConnectionPolicy) {
  auto k = read_knobs(env({}));
  ASSERT_TRUE(k.ok());
  const engine::QpAttr policy;
  EXPECT_EQ(k->timeout, policy.timeout);
  EXPECT_EQ(k->retry_cnt_linear, policy.retry_cnt_linear);
  EXPECT_EQ(k->retry_cnt_exp, policy.retry_cnt_exp);
  EXPECT_EQ(k->max_psn_range, policy.max_psn_range);
}

TEST(Knobs, BadValues_NameTheVariable) {
  auto bad = [](const char* n, const char* v) {
    auto k = read_knobs(env({{n, v}}));
    return k.ok() ? std::string() : k.error();
  };
  EXPECT_EQ(bad("NCCL_MRC_TIMEOUT", "25"),
            "NCCL_MRC_TIMEOUT: must be an integer in 1..24, got \"25\"");
  EXPECT_EQ(bad("NCCL_MRC_QPS_PER_CONN", "9"),
            "NCCL_MRC_QPS_PER_CONN: must be an integer in 1..8, got \"9\"");
  EXPECT_EQ(bad("NCCL_MRC_EAGER", "65537"),
            "NCCL_MRC_EAGER: must be an integer in 0..65536, got \"65537\"");
  EXPECT_NE(bad("NCCL_MRC_RETRY_CNT_LINEAR", "8").find("NCCL_MRC_RETRY_CNT_LINEAR"),
            std::string::npos);
  EXPECT_NE(bad("NCCL_MRC_QP_HINT_ENABLE", "yes").find("NCCL_MRC_QP_HINT_ENABLE"),
            std::string::npos);
  EXPECT_NE(bad("NCCL_MRC_DEVICES", "0,x").find("NCCL_MRC_DEVICES"), std::string::npos);
  EXPECT_EQ(bad("NCCL_MRC_CTRL_ADDR", "10.0.0.256"),
            "NCCL_MRC_CTRL_ADDR: not an IPv6 or IPv4 address: \"10.0.0.256\"");
  auto v4 = read_knobs(env({{"NCCL_MRC_CTRL_ADDR", "198.18.0.1"}}));
  ASSERT_TRUE(v4.ok()) << v4.error();
  EXPECT_EQ(v4->ctrl_addr, "::ffff:198.18.0.1") << "IPv4, as the dual-stack sockets take it";
  auto k = read_knobs(env({{"NCCL_MRC_CC_MIN_RATE", "5000"}, {"NCCL_MRC_CC_MAX_RATE", "1000"}}));
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.error().find("above NCCL_MRC_CC_MAX_RATE"), std::string::npos);
}

}  // namespace
}  // namespace mrc::nccl
