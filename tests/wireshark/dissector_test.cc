// The Wireshark dissector (tools/wireshark/mrc.lua) against the project's own encoder: packets
// of every kind made by wire::encode_header, written to a pcap, decoded by tshark; every field
// must read back as encoded, trims and bad CRCs flagged, the port preference obeyed, GSO
// aggregates split, and a fabric file's paths named. Skips where tshark is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "mrc/wire/wire.h"
#include "srv6/config.h"
#include "srv6/fabric.h"
#include "tshark.h"

namespace mrc::wireshark {
namespace {

using namespace mrc::wireshark::testing;
using Bytes = std::vector<uint8_t>;
using srv6::Ipv6;

struct Frame {
  Ipv6 src{}, dst{};
  uint16_t dport = wire::kDefaultUdpPort;
  Bytes udp_payload;
};

/// A pcap (LINKTYPE_RAW) of IPv6/UDP frames.
void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  std::ofstream f(path, std::ios::binary);
  auto put = [&](const void* p, size_t n) {
    f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  };
  auto le32 = [&](uint32_t v) { put(&v, 4); };
  auto le16 = [&](uint16_t v) { put(&v, 2); };
  le32(0xa1b2c3d4);
  le16(2);
  le16(4);
  le32(0);
  le32(0);
  le32(262144);
  le32(101);  // LINKTYPE_RAW
  uint32_t t = 0;
  for (const Frame& fr : frames) {
    Bytes ip(48 + fr.udp_payload.size());
    const size_t udp_len = 8 + fr.udp_payload.size();
    ip[0] = 0x60;
    ip[4] = static_cast<uint8_t>(udp_len >> 8);
    ip[5] = static_cast<uint8_t>(udp_len);
    ip[6] = 17;
    ip[7] = 64;
    std::copy(fr.src.begin(), fr.src.end(), ip.begin() + 8);
    std::copy(fr.dst.begin(), fr.dst.end(), ip.begin() + 24);
    ip[40] = 0x9c;  // source port 40000
    ip[41] = 0x40;
    ip[42] = static_cast<uint8_t>(fr.dport >> 8);
    ip[43] = static_cast<uint8_t>(fr.dport);
    ip[44] = static_cast<uint8_t>(udp_len >> 8);
    ip[45] = static_cast<uint8_t>(udp_len);
    std::copy(fr.udp_payload.begin(), fr.udp_payload.end(), ip.begin() + 48);
    le32(t++);
    le32(0);
    le32(static_cast<uint32_t>(ip.size()));
    le32(static_cast<uint32_t>(ip.size()));
    put(ip.data(), ip.size());
  }
}

Bytes payload_of(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
  return b;
}

/// A packet of `kind` with every field distinct (as tests/wire/wire_test.cc does).
wire::Packet packet_of(wire::Kind kind, uint32_t salt) {
  wire::Packet p;
  p.common.kind = kind;
  p.common.flags = wire::flag::kFirst | wire::flag::kAckReq;
  p.common.dst_qpn = 0x11 + salt;
  p.common.token = 0xA1B2C3D4 ^ salt;
  p.common.ev = 0x00030201 + salt;
  p.common.psn = 0x01000000 + salt;
  p.common.ts = 0x0123456789ABCDEFull + salt;
  p.data = {0xFEDCBA9876543210ull, 0x55667788, 41, 8192, 65536, 0xDEADBEEF, 0, 0, 0x4242, 0x0102};
  p.ack.cum_psn = 1000 + salt;
  p.ack.sack_base = 1001 + salt;
  p.ack.echo_ev = 0x00010203;
  p.ack.echo_psn = 999;
  p.ack.echo_ts = 0x1111222233334444ull;
  p.ack.ack_delay_ns = 12345;
  p.ack.ack_flags = wire::ack_flag::kEcnEcho;
  p.ack.ports_down = 0x0009;
  p.ack.sack = {0x5ull, 0, 0x8000000000000000ull, 0x1ull};
  p.nack = {77, 78, 0x00020100, wire::NackReason::kNoResource, 0, 0x0A0B0C0D0E0F1011ull};
  p.nack.rnr_timer = static_cast<uint8_t>(wire::kRnrTimerStated | 14);
  p.probe_reply = {0x00010305, wire::ack_flag::kEcnEcho, 0x7777666655554444ull, 0x123456};
  p.addr.target_qpn = 900;
  p.addr.src_qpn = 901;
  p.port_status = {902, 903, 0x0000000Du};
  if (kind == wire::Kind::kAddrReply) {
    p.addr.planes = 2;
    p.addr.plane[0].addr = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    p.addr.plane[0].port = 4791;
    p.addr.plane[1].addr = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 1, 1};
    p.addr.plane[1].port = 4792;
  }
  return p;
}

Bytes encode(wire::Packet p, const Bytes& payload = {}) {
  if (wire::is_data(p.common.kind)) p.data.payload_len = static_cast<uint16_t>(payload.size());
  Bytes b(wire::header_size(p.common.kind) + payload.size());
  const size_t n = wire::encode_header(p, payload, b);
  std::copy(payload.begin(), payload.end(), b.begin() + static_cast<ptrdiff_t>(n));
  return b;
}

std::string hex(uint64_t v, int digits) {
  char b[40];
  std::snprintf(b, sizeof b, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return b;
}
std::string dec(uint64_t v) { return std::to_string(v); }
std::string one(const Row& r, const std::string& f) {
  auto it = r.find(f);
  return it == r.end() || it->second.empty() ? "" : it->second[0];
}
std::string all(const Row& r, const std::string& f) {
  std::string s;
  auto it = r.find(f);
  if (it == r.end()) return s;
  for (const auto& v : it->second) s += (s.empty() ? "" : ",") + v;
  return s;
}

class Dissector : public ::testing::Test {
 protected:
  void SetUp() override {
    if (find_program("tshark").empty()) GTEST_SKIP() << "tshark is not installed (scripts/deps.sh)";
    dir_ = std::filesystem::temp_directory_path() / ("mrc-dissector-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Fields decode(const std::vector<Frame>& frames, const std::vector<std::string>& fields,
                const std::vector<std::string>& extra = {}) {
    const std::string pcap = (dir_ / "t.pcap").string();
    write_pcap(pcap, frames);
    Fields f = tshark_fields(pcap, fields, extra);
    EXPECT_EQ(f.rc, 0) << f.err;
    EXPECT_EQ(f.err.find("Lua: Error"), std::string::npos) << f.err;
    EXPECT_EQ(f.rows.size(), frames.size()) << f.err;
    return f;
  }
  std::filesystem::path dir_;
};

TEST_F(Dissector, EveryKind_FieldsReadBackAsEncoded) {
  const wire::Kind kinds[] = {
      wire::Kind::kWrite,       wire::Kind::kWriteImm,   wire::Kind::kSend,
      wire::Kind::kSendImm,     wire::Kind::kReadReq,    wire::Kind::kReadResp,
      wire::Kind::kCmpSwap,     wire::Kind::kFetchAdd,   wire::Kind::kUdSend,
      wire::Kind::kAtomicWrite, wire::Kind::kAck,        wire::Kind::kNack,
      wire::Kind::kProbe,       wire::Kind::kProbeReply, wire::Kind::kAddrQuery,
      wire::Kind::kAddrReply,   wire::Kind::kPortStatus, wire::Kind::kPortStatusAck};
  std::vector<Frame> frames;
  std::vector<wire::Packet> sent;
  uint32_t salt = 0;
  for (wire::Kind k : kinds) {
    wire::Packet p = packet_of(k, salt++);
    if (salt % 2) p.common.flags |= wire::flag::kPayloadCrc;
    const Bytes payload =
        wire::is_data(k) && k != wire::Kind::kReadReq ? payload_of(100 + salt) : Bytes{};
    Frame f;
    f.udp_payload = encode(p, payload);
    auto d = wire::decode(f.udp_payload);  // what the engine reads: the reference
    ASSERT_TRUE(d.ok());
    sent.push_back(d.value());
    frames.push_back(std::move(f));
  }
  const std::vector<std::string> fields = {"mrc.version",
                                           "mrc.kind",
                                           "mrc.flags",
                                           "mrc.net_flags",
                                           "mrc.dst_qpn",
                                           "mrc.token",
                                           "mrc.ev",
                                           "mrc.psn",
                                           "mrc.hdr_crc",
                                           "mrc.hdr_crc.ok",
                                           "mrc.ts",
                                           "mrc.error",
                                           "mrc.data.addr",
                                           "mrc.data.rkey",
                                           "mrc.data.msn",
                                           "mrc.data.offset",
                                           "mrc.data.msg_len",
                                           "mrc.data.imm",
                                           "mrc.data.payload_len",
                                           "mrc.data.xrc_srqn",
                                           "mrc.data.payload_crc",
                                           "mrc.data.payload_crc.ok",
                                           "mrc.src_qpn",
                                           "mrc.payload",
                                           "mrc.cum_psn",
                                           "mrc.ack.sack_base",
                                           "mrc.echo_ev",
                                           "mrc.ack.echo_psn",
                                           "mrc.echo_ts",
                                           "mrc.ack.ack_delay_ns",
                                           "mrc.ack.flags",
                                           "mrc.ports_down",
                                           "mrc.ack.sack",
                                           "mrc.ack.sack_psns",
                                           "mrc.nack.psn",
                                           "mrc.nack.reason",
                                           "mrc.nack.rnr_timer",
                                           "mrc.nack.rnr_wait_ms",
                                           "mrc.probe_reply.flags",
                                           "mrc.probe_reply.svc_ns",
                                           "mrc.addr.target_qpn",
                                           "mrc.addr.planes",
                                           "mrc.addr.address",
                                           "mrc.addr.port",
                                           "mrc.port_status.ports_up",
                                           "mrc.ev.plane",
                                           "mrc.ev.spine",
                                           "mrc.ev.salt"};
  const Fields out = decode(frames, fields);
  ASSERT_EQ(out.rows.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    const wire::Packet& p = sent[i];
    const Row& r = out.rows[i];
    const auto k = p.common.kind;
    SCOPED_TRACE("kind " + dec(static_cast<uint8_t>(k)));
    EXPECT_EQ(one(r, "mrc.error"), "");
    EXPECT_EQ(one(r, "mrc.version"), "1");
    EXPECT_EQ(one(r, "mrc.kind"), dec(static_cast<uint8_t>(k)));
    EXPECT_EQ(one(r, "mrc.flags"), hex(p.common.flags, 2));
    EXPECT_EQ(one(r, "mrc.net_flags"), hex(0, 2));
    EXPECT_EQ(one(r, "mrc.dst_qpn"), dec(p.common.dst_qpn));
    EXPECT_EQ(one(r, "mrc.token"), hex(p.common.token, 8));
    EXPECT_EQ(one(r, "mrc.ev"), hex(p.common.ev, 8));
    EXPECT_EQ(one(r, "mrc.ev.plane"), dec(p.common.ev >> 16));
    EXPECT_EQ(one(r, "mrc.ev.spine"), dec((p.common.ev >> 8) & 0xff));
    EXPECT_EQ(one(r, "mrc.ev.salt"), dec(p.common.ev & 0xff));
    EXPECT_EQ(one(r, "mrc.psn"), dec(p.common.psn));
    EXPECT_EQ(one(r, "mrc.hdr_crc"), hex(p.common.hdr_crc, 8));
    EXPECT_EQ(one(r, "mrc.hdr_crc.ok"), "1");
    EXPECT_EQ(one(r, "mrc.ts"), dec(p.common.ts));
    if (wire::is_data(k)) {
      EXPECT_EQ(one(r, "mrc.data.addr"), hex(p.data.addr, 16));
      EXPECT_EQ(one(r, "mrc.data.rkey"), hex(p.data.rkey, 8));
      EXPECT_EQ(one(r, "mrc.data.msn"), dec(p.data.msn));
      EXPECT_EQ(one(r, "mrc.data.offset"), dec(p.data.offset));
      EXPECT_EQ(one(r, "mrc.data.msg_len"), dec(p.data.msg_len));
      EXPECT_EQ(one(r, "mrc.data.imm"), hex(p.data.imm, 8));
      EXPECT_EQ(one(r, "mrc.data.payload_len"), dec(p.data.payload_len));
      EXPECT_EQ(one(r, "mrc.ports_down"), hex(p.data.ports_down, 4));
      EXPECT_EQ(one(r, "mrc.data.xrc_srqn"), dec(p.data.xrc_srqn));  // the same two bytes
      EXPECT_EQ(one(r, "mrc.data.payload_crc"), hex(p.data.payload_crc, 8));
      EXPECT_EQ(one(r, "mrc.data.payload_crc.ok"),
                (p.common.flags & wire::flag::kPayloadCrc) && p.data.payload_len ? "1" : "");
      EXPECT_EQ(one(r, "mrc.src_qpn"), dec(p.data.src_qpn));
      std::string payload_hex;
      for (uint8_t b : p.payload) payload_hex += hex(b, 2).substr(2);
      EXPECT_EQ(one(r, "mrc.payload"), payload_hex);
    } else if (k == wire::Kind::kAck) {
      EXPECT_EQ(one(r, "mrc.cum_psn"), dec(p.ack.cum_psn));
      EXPECT_EQ(one(r, "mrc.ack.sack_base"), dec(p.ack.sack_base));
      EXPECT_EQ(one(r, "mrc.echo_ev"), hex(p.ack.echo_ev, 8));
      EXPECT_EQ(one(r, "mrc.ack.echo_psn"), dec(p.ack.echo_psn));
      EXPECT_EQ(one(r, "mrc.echo_ts"), dec(p.ack.echo_ts));
      EXPECT_EQ(one(r, "mrc.ack.ack_delay_ns"), dec(p.ack.ack_delay_ns));
      EXPECT_EQ(one(r, "mrc.ack.flags"), hex(p.ack.ack_flags, 2));
      EXPECT_EQ(one(r, "mrc.ports_down"), hex(p.ack.ports_down, 4));
      std::string words;
      for (uint64_t w : p.ack.sack) words += (words.empty() ? "" : ",") + hex(w, 16);
      EXPECT_EQ(all(r, "mrc.ack.sack"), words);
      // Bits 0 and 2 of word 0, bit 63 of word 2 (PSN +191), bit 0 of word 3 (PSN +192).
      const uint32_t b = p.ack.sack_base;
      EXPECT_EQ(all(r, "mrc.ack.sack_psns"),
                dec(b) + ", " + dec(b + 2) + ", " + dec(b + 191) + "-" + dec(b + 192));
    } else if (k == wire::Kind::kNack) {
      EXPECT_EQ(one(r, "mrc.cum_psn"), dec(p.nack.cum_psn));
      EXPECT_EQ(one(r, "mrc.nack.psn"), dec(p.nack.nack_psn));
      EXPECT_EQ(one(r, "mrc.echo_ev"), hex(p.nack.echo_ev, 8));
      EXPECT_EQ(one(r, "mrc.nack.reason"), hex(static_cast<uint8_t>(p.nack.reason), 2));
      EXPECT_EQ(one(r, "mrc.nack.rnr_timer"), hex(p.nack.rnr_timer, 2));
      EXPECT_EQ(one(r, "mrc.nack.rnr_wait_ms"), "1.28");  // code 14
      EXPECT_EQ(one(r, "mrc.echo_ts"), dec(p.nack.echo_ts));
    } else if (k == wire::Kind::kProbeReply) {
      EXPECT_EQ(one(r, "mrc.echo_ev"), hex(p.probe_reply.echo_ev, 8));
      EXPECT_EQ(one(r, "mrc.probe_reply.flags"), hex(p.probe_reply.probe_flags, 2));
      EXPECT_EQ(one(r, "mrc.echo_ts"), dec(p.probe_reply.echo_ts));
      EXPECT_EQ(one(r, "mrc.probe_reply.svc_ns"), dec(p.probe_reply.svc_ns));
    } else if (k == wire::Kind::kAddrQuery || k == wire::Kind::kAddrReply) {
      EXPECT_EQ(one(r, "mrc.addr.target_qpn"), dec(p.addr.target_qpn));
      EXPECT_EQ(one(r, "mrc.src_qpn"), dec(p.addr.src_qpn));
      EXPECT_EQ(one(r, "mrc.addr.planes"), dec(p.addr.planes));
      if (k == wire::Kind::kAddrReply) {
        const auto addrs = r.at("mrc.addr.address");
        const auto ports = r.at("mrc.addr.port");
        ASSERT_EQ(addrs.size(), wire::kMaxAddrPlanes);
        EXPECT_EQ(addrs[0], "2001:db8::1");
        EXPECT_EQ(addrs[1], "::ffff:198.18.1.1");
        EXPECT_EQ(addrs[2], "::");
        EXPECT_EQ(ports[0], "4791");
        EXPECT_EQ(ports[1], "4792");
      }
    } else if (k == wire::Kind::kPortStatus || k == wire::Kind::kPortStatusAck) {
      EXPECT_EQ(one(r, "mrc.addr.target_qpn"), dec(p.port_status.target_qpn));
      EXPECT_EQ(one(r, "mrc.src_qpn"), dec(p.port_status.src_qpn));
      EXPECT_EQ(one(r, "mrc.port_status.ports_up"), hex(p.port_status.ports_up, 8));
    }
  }
}

TEST_F(Dissector, TrimsAndBadPackets_FlaggedAsDecodeRefusesThem) {
  wire::Packet p = packet_of(wire::Kind::kWrite, 0);
  p.common.flags |= wire::flag::kPayloadCrc;
  const Bytes good = encode(p, payload_of(1000));
  struct Case {
    const char* what;
    Bytes bytes;
    const char* error;  // "" for none; else a piece of the dissector's message
    bool trimmed;
  };
  std::vector<Case> cases;
  cases.push_back({"trimmed by length", Bytes(good.begin(), good.begin() + 72 + 10), "", true});
  Bytes marked(good.begin(), good.begin() + 72);
  marked[3] = wire::net_flag::kTrimmedLastHop;  // outside hdr_crc
  cases.push_back({"trimmed by net_flags", marked, "", true});
  Bytes bad_payload = good;
  bad_payload.back() ^= 0x01;
  cases.push_back({"bad payload CRC", bad_payload, "bad payload CRC32C", false});
  Bytes bad_header = good;
  bad_header[16] ^= 0x80;  // PSN bit
  cases.push_back({"bad header CRC", bad_header, "bad header CRC32C", false});
  Bytes probe = encode(packet_of(wire::Kind::kProbe, 1));
  probe.push_back(0);
  cases.push_back({"control with trailing byte", probe, "1 bytes after a PROBE header", false});
  cases.push_back({"too short", Bytes(good.begin(), good.begin() + 20), "too short", false});
  Bytes version = good;
  version[0] = 2;
  cases.push_back({"bad version", version, "bad version 2", false});
  Bytes kind = good;
  kind[1] = 99;
  cases.push_back({"unknown kind", kind, "unknown kind 99", false});
  std::vector<Frame> frames;
  for (const Case& c : cases) {
    // The reference: decode accepts exactly the ones the dissector passes.
    auto d = wire::decode(c.bytes);
    EXPECT_EQ(d.ok(), std::string(c.error).empty()) << c.what;
    if (d.ok()) {
      EXPECT_EQ(d.value().trimmed, c.trimmed) << c.what;
    }
    frames.push_back(Frame{{}, {}, wire::kDefaultUdpPort, c.bytes});
  }
  const Fields out = decode(frames, {"mrc.error", "mrc.trimmed", "_ws.expert.severity"});
  for (size_t i = 0; i < cases.size() && i < out.rows.size(); ++i) {
    const Case& c = cases[i];
    const Row& r = out.rows[i];
    if (std::string(c.error).empty()) {
      EXPECT_EQ(all(r, "mrc.error"), "") << c.what;
    } else {
      EXPECT_NE(all(r, "mrc.error").find(c.error), std::string::npos)
          << c.what << ": " << all(r, "mrc.error");
    }
    EXPECT_EQ(one(r, "mrc.trimmed"), c.trimmed ? "1" : "") << c.what;
    EXPECT_FALSE(one(r, "_ws.expert.severity").empty()) << c.what << ": no expert info";
  }
}

// A data packet with an ACK riding on it (wire.h: the trailer after the payload): the
// dissector shows the ACK's fields as decode reads them, alone and inside a GSO aggregate;
// a trailer whose CRC fails is flagged as decode refuses it.
TEST_F(Dissector, AckTrailer_FieldsReadBackAsDecodedAndBadCrcFlagged) {
  auto with_trailer = [](wire::Packet p, const Bytes& payload) {
    Bytes b = encode(p, payload);
    p.data.payload_len = static_cast<uint16_t>(payload.size());
    b.resize(b.size() + wire::kAckTrailerSize);
    wire::encode_ack_trailer(p, std::span(b).first(wire::kDataHeaderSize),
                             std::span(b).subspan(wire::kDataHeaderSize + payload.size()));
    return b;
  };
  wire::Packet p = packet_of(wire::Kind::kWriteImm, 5);
  p.common.flags |= wire::flag::kPayloadCrc;
  p.ack.ack_flags = wire::ack_flag::kEcnEcho | wire::ack_flag::kRides;
  const Bytes one_packet = with_trailer(p, payload_of(8));
  Bytes aggregate = one_packet;
  const Bytes next = encode(packet_of(wire::Kind::kSend, 6), payload_of(8));
  aggregate.insert(aggregate.end(), next.begin(), next.end());
  Bytes bad = one_packet;
  bad[wire::kDataHeaderSize + 8 + 3] ^= 0x01;  // a bit of the trailer's cum_psn
  auto ref = wire::decode(one_packet);
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(ref->has_ack);
  EXPECT_EQ(wire::decode(bad).error(), wire::WireError::kBadPayloadCrc);
  const std::vector<Frame> frames = {{{}, {}, wire::kDefaultUdpPort, one_packet},
                                     {{}, {}, wire::kDefaultUdpPort, aggregate},
                                     {{}, {}, wire::kDefaultUdpPort, bad}};
  const Fields out = decode(frames, {"mrc.kind", "mrc.error", "mrc.cum_psn", "mrc.ack.sack_base",
                                     "mrc.ack.echo_psn", "mrc.ack.ack_delay_ns", "mrc.ack.flags",
                                     "mrc.ack.rides", "mrc.ack.sack_psns",
                                     "mrc.ack_trailer.crc.ok"});
  ASSERT_EQ(out.rows.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    const Row& r = out.rows[i];
    EXPECT_EQ(all(r, "mrc.error"), "") << i;
    EXPECT_EQ(one(r, "mrc.cum_psn"), dec(ref->ack.cum_psn)) << i;
    EXPECT_EQ(one(r, "mrc.ack.sack_base"), dec(ref->ack.sack_base)) << i;
    EXPECT_EQ(one(r, "mrc.ack.echo_psn"), dec(ref->ack.echo_psn)) << i;
    EXPECT_EQ(one(r, "mrc.ack.ack_delay_ns"), dec(ref->ack.ack_delay_ns)) << i;
    EXPECT_EQ(one(r, "mrc.ack.flags"), hex(ref->ack.ack_flags, 2)) << i;
    EXPECT_EQ(one(r, "mrc.ack.rides"), "1") << i;
    EXPECT_FALSE(one(r, "mrc.ack.sack_psns").empty()) << i;
    EXPECT_EQ(one(r, "mrc.ack_trailer.crc.ok"), "1") << i;
  }
  EXPECT_EQ(all(out.rows[1], "mrc.kind"), "2,3");  // the trailer, then the next packet
  EXPECT_NE(all(out.rows[2], "mrc.error").find("bad ACK trailer CRC32C"), std::string::npos)
      << all(out.rows[2], "mrc.error");
}

TEST_F(Dissector, PortPreferenceAndAggregates_DecodedOnTheConfiguredPortOnly) {
  Bytes aggregate = encode(packet_of(wire::Kind::kSend, 1), payload_of(300));
  const Bytes second = encode(packet_of(wire::Kind::kSend, 2), payload_of(300));
  const Bytes ack = encode(packet_of(wire::Kind::kAck, 3));
  aggregate.insert(aggregate.end(), second.begin(), second.end());
  aggregate.insert(aggregate.end(), ack.begin(), ack.end());
  const std::vector<Frame> frames = {{{}, {}, wire::kDefaultUdpPort, aggregate},
                                     {{}, {}, 5000, ack}};
  const std::vector<std::string> fields = {"mrc.kind", "mrc.psn", "mrc.error"};
  Fields out = decode(frames, fields);
  ASSERT_EQ(out.rows.size(), 2u);
  EXPECT_EQ(all(out.rows[0], "mrc.kind"), "3,3,16");  // a GSO aggregate: three packets
  EXPECT_EQ(all(out.rows[0], "mrc.psn"), "16777217,16777218,16777219");
  EXPECT_EQ(all(out.rows[0], "mrc.error"), "");
  EXPECT_EQ(all(out.rows[1], "mrc.kind"), "");  // port 5000 is not MRC's by default
  out = decode(frames, fields, {"-o", "mrc.port:5000"});
  ASSERT_EQ(out.rows.size(), 2u);
  EXPECT_EQ(all(out.rows[0], "mrc.kind"), "");
  EXPECT_EQ(all(out.rows[1], "mrc.kind"), "16");
}

TEST_F(Dissector, FabricFile_DestinationShownAsPlaneSpineHost) {
  srv6::FabricConfig cfg;
  cfg.hosts = 4;
  cfg.planes = 2;
  cfg.spines = 3;
  cfg.hosts_per_t0 = 2;
  auto made = srv6::Fabric::make(cfg);
  ASSERT_TRUE(made.ok()) << made.error();
  const srv6::Fabric& fab = made.value();
  // h0 -> h3 on plane 1, spine 2 (as sent), and the same packet as delivered to h3.
  auto path = fab.path_for_ev(0, 3, srv6::Fabric::ev(1, 2, 0));
  ASSERT_TRUE(path.ok()) << path.error();
  const Bytes probe = encode(packet_of(wire::Kind::kProbe, 0));
  const std::vector<Frame> frames = {
      {fab.host_address(0, 1), path.value().dst, wire::kDefaultUdpPort, probe},
      {fab.host_address(0, 1), fab.host_address(3, 1), wire::kDefaultUdpPort, probe},
      {fab.host_address(0, 0), fab.host_address(2, 0), wire::kDefaultUdpPort, probe}};
  const std::vector<std::string> fields = {"mrc.path.plane", "mrc.path.spine", "mrc.path.host",
                                           "mrc.path.src_host", "mrc.path.note"};
  const std::string spine = fab.switch_label({srv6::Tier::kT1, 1, 2});
  for (const bool explicit_form : {false, true}) {
    SCOPED_TRACE(explicit_form ? "explicit form" : "short form");
    const std::string file = (dir_ / "fabric.json").string();
    std::ofstream(file) << (explicit_form ? srv6::dump_explicit(fab) : srv6::dump(fab));
    const Fields out = decode(frames, fields, {"-o", "mrc.fabric:" + file});
    ASSERT_EQ(out.rows.size(), 3u);
    EXPECT_EQ(one(out.rows[0], "mrc.path.plane"), "1");
    EXPECT_EQ(one(out.rows[0], "mrc.path.spine"), spine);
    EXPECT_EQ(one(out.rows[0], "mrc.path.host"), "h3");
    EXPECT_EQ(one(out.rows[0], "mrc.path.src_host"), "h0");
    EXPECT_EQ(all(out.rows[0], "mrc.path.note"), "");
    EXPECT_EQ(one(out.rows[1], "mrc.path.plane"), "1");
    EXPECT_EQ(one(out.rows[1], "mrc.path.spine"), "");
    EXPECT_EQ(one(out.rows[1], "mrc.path.host"), "h3");
    EXPECT_NE(all(out.rows[1], "mrc.path.note").find("delivered"), std::string::npos);
    EXPECT_EQ(one(out.rows[2], "mrc.path.plane"), "0");
    EXPECT_EQ(one(out.rows[2], "mrc.path.host"), "h2");
  }
  // A file that cannot be read is said, not ignored.
  const Fields out = decode(frames, fields, {"-o", "mrc.fabric:" + (dir_ / "none.json").string()});
  ASSERT_FALSE(out.rows.empty());
  EXPECT_NE(all(out.rows[0], "mrc.path.note").find("none.json"), std::string::npos);
}

}  // namespace
}  // namespace mrc::wireshark
