// Tests of the wire format (libmrc/src/wire/wire.cc): layout, round trips, every decode error,
// trimming, CRC coverage, and decode of random and mutated datagrams against a reference.
#include "mrc/wire/wire.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/crc32c.h"

namespace mrc::wire {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr Kind kDataKinds[] = {Kind::kWrite,   Kind::kWriteImm,   Kind::kSend,    Kind::kSendImm,
                               Kind::kReadReq, Kind::kReadResp,   Kind::kCmpSwap, Kind::kFetchAdd,
                               Kind::kUdSend,  Kind::kAtomicWrite};
constexpr Kind kControlKinds[] = {Kind::kAck, Kind::kNack, Kind::kProbe, Kind::kProbeReply};
constexpr Kind kAllKinds[] = {Kind::kWrite,   Kind::kWriteImm,    Kind::kSend,    Kind::kSendImm,
                              Kind::kReadReq, Kind::kReadResp,    Kind::kCmpSwap, Kind::kFetchAdd,
                              Kind::kUdSend,  Kind::kAtomicWrite, Kind::kAck,     Kind::kNack,
                              Kind::kProbe,   Kind::kProbeReply};

// ---- Byte helpers, written from the documented offsets (not from wire.cc) -------------

constexpr size_t kOffNetFlags = 3;
constexpr size_t kOffHdrCrc = 20;
constexpr size_t kOffPayloadLen = 60;
constexpr size_t kOffPayloadCrc = 64;

uint32_t load_be32(std::span<const uint8_t> b, size_t off) {
  return uint32_t{b[off]} << 24 | uint32_t{b[off + 1]} << 16 | uint32_t{b[off + 2]} << 8 |
         uint32_t{b[off + 3]};
}
uint16_t load_be16(std::span<const uint8_t> b, size_t off) {
  return static_cast<uint16_t>(b[off] << 8 | b[off + 1]);
}
void store_be32(Bytes& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void store_be16(Bytes& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v >> 8);
  b[off + 1] = static_cast<uint8_t>(v);
}

// Header length by kind byte, from the spec: 0 for an unknown kind.
size_t spec_header_size(uint8_t kind) {
  if (kind >= 1 && kind <= 10) return 72;  // data kinds, atomics (7, 8, 10), UD_SEND (9)
  switch (kind) {
    case 16:
      return 96;
    case 17:
      return 56;
    case 32:
      return 32;
    case 33:
      return 48;
    case 34:  // ADDR_QUERY: common + 16
      return 48;
    case 35:  // ADDR_REPLY: common + 16 + 16 planes x 20
      return 368;
    case 36:  // PORT_STATUS: common + 16
    case 37:  // PORT_STATUS_ACK: common + 16
      return 48;
    default:
      return 0;
  }
}

// hdr_crc by the spec: CRC32C of the header with hdr_crc and net_flags as zero.
uint32_t spec_header_crc(std::span<const uint8_t> header) {
  Bytes h(header.begin(), header.end());
  h[kOffNetFlags] = 0;
  store_be32(h, kOffHdrCrc, 0);
  return crc32c(0, h.data(), h.size());
}

// Recomputes hdr_crc after a test edited header bytes.
void reseal(Bytes& b) {
  const size_t n = spec_header_size(b[1]);
  store_be32(b, kOffHdrCrc, spec_header_crc(std::span(b).first(n)));
}

// What decode must answer, by the rules of wire.h read byte by byte: nullopt means success.
std::optional<WireError> reference_verdict(std::span<const uint8_t> b) {
  if (b.size() < 32) return WireError::kTooShort;
  if (b[0] != 1) return WireError::kBadVersion;
  const size_t hs = spec_header_size(b[1]);
  if (hs == 0) return WireError::kUnknownKind;
  if (b.size() < hs) return WireError::kTooShort;
  if (spec_header_crc(b.first(hs)) != load_be32(b, kOffHdrCrc)) return WireError::kBadHeaderCrc;
  if (hs != 72 && b.size() != hs) return WireError::kBadLength;
  if (b[1] == 34 && b[40] != 0) return WireError::kBadField;  // a query lists no planes
  if (b[1] == 35 && b[40] > 16) return WireError::kBadField;  // a reply at most 16
  if (hs != 72) return std::nullopt;
  const size_t payload_len = load_be16(b, kOffPayloadLen);
  const size_t got = b.size() - 72;
  if (payload_len > 8192) return WireError::kPayloadTooLarge;
  const bool trailer = got == payload_len + 68;  // an ACK riding on the packet
  if (got > payload_len && !trailer) return WireError::kBadLength;
  if (got < payload_len || (b[kOffNetFlags] & 0x03) != 0) return std::nullopt;  // trimmed
  if ((b[2] & 0x08) != 0 &&
      crc32c(0, b.data() + 72, payload_len) != load_be32(b, kOffPayloadCrc)) {
    return WireError::kBadPayloadCrc;
  }
  if (trailer && crc32c(load_be32(b, kOffHdrCrc), b.data() + 72 + payload_len, 64) !=
                     load_be32(b, 72 + payload_len + 64))
    return WireError::kBadPayloadCrc;
  return std::nullopt;
}

// ---- Packets with every field distinctive ---------------------------------------------

Bytes make_payload(size_t n, uint8_t seed = 0x5A) {
  Bytes v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

Packet distinctive_packet(Kind kind) {
  Packet p;
  p.common.kind = kind;
  p.common.flags = flag::kFirst | flag::kLast | flag::kAckReq | flag::kPayloadCrc |
                   flag::kRetransmit | flag::kSolicited;
  p.common.dst_qpn = 0x8A1B2C3D;
  p.common.token = 0xF00DCAFE;
  p.common.ev = 0x0001FEED;
  p.common.psn = 0xFFFFFFF0;
  p.common.ts = 0x8123456789ABCDEFull;
  if (is_data(kind)) {
    p.data.addr = 0xFEDCBA9876543210ull;
    p.data.rkey = 0x9ABCDEF1;
    p.data.msn = 0x80000007;
    p.data.offset = 0x00ABC000;
    p.data.msg_len = 0x3FFFFFFF;
    p.data.imm = 0xC0DEC0DE;
    p.data.payload_len = 1499;
    p.data.src_qpn = 0x00FEDCBA;
    p.data.ports_down = 0x4002;
  }
  p.ack.cum_psn = 0x87654321;
  p.ack.sack_base = 0x87654320;
  p.ack.echo_ev = 0x0000BEEF;
  p.ack.echo_psn = 0x87654399;
  p.ack.echo_ts = 0xF1E2D3C4B5A69788ull;
  p.ack.ack_delay_ns = 0xA5A5A5A5;
  p.ack.ack_flags = ack_flag::kEcnEcho;
  p.ack.ports_down = 0x8005;
  p.ack.sack = {0x8000000000000001ull, 0x0123456789ABCDEFull, 0xFFFFFFFFFFFFFFFEull,
                0x7FFFFFFF00000000ull};
  p.nack.cum_psn = 0x11223344;
  p.nack.nack_psn = 0x11223355;
  p.nack.echo_ev = 0x0000ABCD;
  p.nack.reason = NackReason::kPsnOutOfWindow;
  p.nack.rnr_timer = static_cast<uint8_t>(kRnrTimerStated | 14);
  p.nack.echo_ts = 0x0FEDCBA987654321ull;
  p.probe_reply.echo_ev = 0xE0E1E2E3;
  p.probe_reply.probe_flags = ack_flag::kEcnEcho;
  p.probe_reply.echo_ts = 0xCAFEBABEDEADBEEFull;
  p.probe_reply.svc_ns = 0xABCDEF;
  return p;
}

// Header + payload, as a sender puts them in one datagram.
Bytes encode_packet(const Packet& p, std::span<const uint8_t> payload = {}) {
  Bytes b(header_size(p.common.kind) + payload.size());
  const size_t n = encode_header(p, payload, b);
  EXPECT_EQ(n, header_size(p.common.kind));
  std::copy(payload.begin(), payload.end(), b.begin() + n);
  return b;
}

// A valid datagram of `kind` with distinctive fields (data kinds carry a payload_len payload).
Bytes valid_datagram(Kind kind, size_t payload_len = 1499) {
  Packet p = distinctive_packet(kind);
  if (!is_data(kind)) return encode_packet(p);
  p.data.payload_len = static_cast<uint16_t>(payload_len);
  const Bytes payload = make_payload(payload_len);
  return encode_packet(p, payload);
}

// A valid data datagram of `kind` with an ACK trailer (distinctive_packet's ACK fields).
Bytes datagram_with_ack(Kind kind, size_t payload_len) {
  Packet p = distinctive_packet(kind);
  p.data.payload_len = static_cast<uint16_t>(payload_len);
  const Bytes payload = make_payload(payload_len);
  Bytes b = encode_packet(p, payload);
  b.resize(b.size() + kAckTrailerSize);
  EXPECT_EQ(encode_ack_trailer(p, std::span(b).first(kDataHeaderSize),
                               std::span(b).subspan(kDataHeaderSize + payload_len)),
            kAckTrailerSize);
  return b;
}

// Every field of the extension of `kind` (and the common header but hdr_crc) matches.
void expect_same_fields(const Packet& want, const Packet& got) {
  EXPECT_EQ(got.common.version, want.common.version);
  EXPECT_EQ(got.common.kind, want.common.kind);
  EXPECT_EQ(got.common.flags, want.common.flags);
  EXPECT_EQ(got.common.net_flags, want.common.net_flags);
  EXPECT_EQ(got.common.dst_qpn, want.common.dst_qpn);
  EXPECT_EQ(got.common.token, want.common.token);
  EXPECT_EQ(got.common.ev, want.common.ev);
  EXPECT_EQ(got.common.psn, want.common.psn);
  EXPECT_EQ(got.common.ts, want.common.ts);
  const Kind k = want.common.kind;
  if (is_data(k)) {
    EXPECT_EQ(got.data.addr, want.data.addr);
    EXPECT_EQ(got.data.rkey, want.data.rkey);
    EXPECT_EQ(got.data.msn, want.data.msn);
    EXPECT_EQ(got.data.offset, want.data.offset);
    EXPECT_EQ(got.data.msg_len, want.data.msg_len);
    EXPECT_EQ(got.data.imm, want.data.imm);
    EXPECT_EQ(got.data.payload_len, want.data.payload_len);
    EXPECT_EQ(got.data.src_qpn, want.data.src_qpn);
    EXPECT_EQ(got.data.ports_down, want.data.ports_down);
  } else if (k == Kind::kAck) {
    EXPECT_EQ(got.ack.cum_psn, want.ack.cum_psn);
    EXPECT_EQ(got.ack.sack_base, want.ack.sack_base);
    EXPECT_EQ(got.ack.echo_ev, want.ack.echo_ev);
    EXPECT_EQ(got.ack.echo_psn, want.ack.echo_psn);
    EXPECT_EQ(got.ack.echo_ts, want.ack.echo_ts);
    EXPECT_EQ(got.ack.ack_delay_ns, want.ack.ack_delay_ns);
    EXPECT_EQ(got.ack.ack_flags, want.ack.ack_flags);
    EXPECT_EQ(got.ack.ports_down, want.ack.ports_down);
    EXPECT_EQ(got.ack.sack, want.ack.sack);
  } else if (k == Kind::kNack) {
    EXPECT_EQ(got.nack.cum_psn, want.nack.cum_psn);
    EXPECT_EQ(got.nack.nack_psn, want.nack.nack_psn);
    EXPECT_EQ(got.nack.echo_ev, want.nack.echo_ev);
    EXPECT_EQ(got.nack.reason, want.nack.reason);
    EXPECT_EQ(got.nack.rnr_timer, want.nack.rnr_timer);
    EXPECT_EQ(got.nack.echo_ts, want.nack.echo_ts);
  } else if (k == Kind::kProbeReply) {
    EXPECT_EQ(got.probe_reply.echo_ev, want.probe_reply.echo_ev);
    EXPECT_EQ(got.probe_reply.probe_flags, want.probe_reply.probe_flags);
    EXPECT_EQ(got.probe_reply.echo_ts, want.probe_reply.echo_ts);
    EXPECT_EQ(got.probe_reply.svc_ns, want.probe_reply.svc_ns);
  }
}

std::string describe(const Result<Packet, WireError>& r) {
  return r.ok() ? std::string("ok") : std::string(to_string(r.error()));
}

#define EXPECT_WIRE_ERROR(result, err)                                                 \
  do {                                                                                 \
    const auto& r_ = (result);                                                         \
    ASSERT_FALSE(r_.ok()) << "decoded, expected " << to_string(err);                   \
    EXPECT_EQ(r_.error(), (err)) << to_string(r_.error()) << " != " << to_string(err); \
  } while (0)

// ---- Known-answer headers: the bytes were laid out by hand from docs/wire-format.md,
// hdr_crc by an independent bitwise CRC32C. A layout change breaks these. --------------

const uint8_t kPayload123456789[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};

Packet known_data_packet() {
  Packet p;
  p.common.kind = Kind::kWriteImm;
  p.common.flags = flag::kFirst | flag::kLast | flag::kPayloadCrc;
  p.common.dst_qpn = 0x01020304;
  p.common.token = 0x05060708;
  p.common.ev = 0x090A0B0C;
  p.common.psn = 0x0D0E0F10;
  p.common.ts = 0x1112131415161718;
  p.data.addr = 0x2122232425262728;
  p.data.rkey = 0x292A2B2C;
  p.data.msn = 0x2D2E2F30;
  p.data.offset = 0x31323334;
  p.data.msg_len = 0x35363738;
  p.data.imm = 0x393A3B3C;
  p.data.payload_len = 9;
  p.data.payload_crc = 0xE3069283;  // CRC32C("123456789")
  p.data.src_qpn = 0x41424344;
  return p;
}
const uint8_t kDataBytes[] = {
    0x01, 0x02, 0x0B, 0x00,                          // 0: version, kind, flags, net_flags
    0x01, 0x02, 0x03, 0x04,                          // 4: dst_qpn
    0x05, 0x06, 0x07, 0x08,                          // 8: token
    0x09, 0x0A, 0x0B, 0x0C,                          // 12: ev
    0x0D, 0x0E, 0x0F, 0x10,                          // 16: psn
    0xAF, 0xCD, 0x20, 0xF5,                          // 20: hdr_crc
    0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // 24: ts
    0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,  // 32: addr
    0x29, 0x2A, 0x2B, 0x2C,                          // 40: rkey
    0x2D, 0x2E, 0x2F, 0x30,                          // 44: msn
    0x31, 0x32, 0x33, 0x34,                          // 48: offset
    0x35, 0x36, 0x37, 0x38,                          // 52: msg_len
    0x39, 0x3A, 0x3B, 0x3C,                          // 56: imm
    0x00, 0x09, 0x00, 0x00,                          // 60: payload_len, xrc_srqn
    0xE3, 0x06, 0x92, 0x83,                          // 64: payload_crc
    0x41, 0x42, 0x43, 0x44,                          // 68: src_qpn
};

Packet known_ack_packet() {
  Packet p;
  p.common.kind = Kind::kAck;
  p.common.flags = flag::kAckReq;
  p.common.dst_qpn = 0xA1A2A3A4;
  p.common.token = 0xA5A6A7A8;
  p.common.ev = 0xA9AAABAC;
  p.common.psn = 0xADAEAFB0;
  p.common.ts = 0xB1B2B3B4B5B6B7B8;
  p.ack.cum_psn = 0xC1C2C3C4;
  p.ack.sack_base = 0xC5C6C7C8;
  p.ack.echo_ev = 0xC9CACBCC;
  p.ack.echo_psn = 0xCDCECFD0;
  p.ack.echo_ts = 0xD1D2D3D4D5D6D7D8;
  p.ack.ack_delay_ns = 0xD9DADBDC;
  p.ack.ack_flags = ack_flag::kEcnEcho;
  p.ack.sack = {0xE1E2E3E4E5E6E7E8, 0xE9EAEBECEDEEEFF0, 0xF1F2F3F4F5F6F7F8, 0x0102030405060708};
  return p;
}
const uint8_t kAckBytes[] = {
    0x01, 0x10, 0x04, 0x00,                          // 0: version, kind, flags, net_flags
    0xA1, 0xA2, 0xA3, 0xA4,                          // 4: dst_qpn
    0xA5, 0xA6, 0xA7, 0xA8,                          // 8: token
    0xA9, 0xAA, 0xAB, 0xAC,                          // 12: ev
    0xAD, 0xAE, 0xAF, 0xB0,                          // 16: psn
    0xBA, 0x7D, 0x96, 0x29,                          // 20: hdr_crc
    0xB1, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8,  // 24: ts
    0xC1, 0xC2, 0xC3, 0xC4,                          // 32: cum_psn
    0xC5, 0xC6, 0xC7, 0xC8,                          // 36: sack_base
    0xC9, 0xCA, 0xCB, 0xCC,                          // 40: echo_ev
    0xCD, 0xCE, 0xCF, 0xD0,                          // 44: echo_psn
    0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8,  // 48: echo_ts
    0xD9, 0xDA, 0xDB, 0xDC,                          // 56: ack_delay_ns
    0x01, 0x00, 0x00, 0x00,                          // 60: ack_flags, reserved, ports_down
    0xE1, 0xE2, 0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8,  // 64: sack[0]
    0xE9, 0xEA, 0xEB, 0xEC, 0xED, 0xEE, 0xEF, 0xF0,  // 72: sack[1]
    0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8,  // 80: sack[2]
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // 88: sack[3]
};

Packet known_nack_packet() {
  Packet p;
  p.common.kind = Kind::kNack;
  p.common.dst_qpn = 0x00C0FFEE;
  p.common.token = 0x12345678;
  p.common.ev = 7;
  p.common.psn = 0x00ABCDEF;
  p.common.ts = 0x0000018C2A3B4C5D;
  p.nack.cum_psn = 0x10203040;
  p.nack.nack_psn = 0x50607080;
  p.nack.echo_ev = 0x90A0B0C0;
  p.nack.reason = NackReason::kPsnOutOfWindow;
  p.nack.echo_ts = 0x0102030405060708;
  return p;
}
const uint8_t kNackBytes[] = {
    0x01, 0x11, 0x00, 0x00,                          // 0: version, kind, flags, net_flags
    0x00, 0xC0, 0xFF, 0xEE,                          // 4: dst_qpn
    0x12, 0x34, 0x56, 0x78,                          // 8: token
    0x00, 0x00, 0x00, 0x07,                          // 12: ev
    0x00, 0xAB, 0xCD, 0xEF,                          // 16: psn
    0x57, 0x70, 0x50, 0x5A,                          // 20: hdr_crc
    0x00, 0x00, 0x01, 0x8C, 0x2A, 0x3B, 0x4C, 0x5D,  // 24: ts
    0x10, 0x20, 0x30, 0x40,                          // 32: cum_psn
    0x50, 0x60, 0x70, 0x80,                          // 36: nack_psn
    0x90, 0xA0, 0xB0, 0xC0,                          // 40: echo_ev
    0x0B, 0x00, 0x00, 0x00,                          // 44: reason, rnr_timer, reserved
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // 48: echo_ts
};

Packet known_probe_packet() {
  Packet p;
  p.common.kind = Kind::kProbe;
  p.common.token = 0x0BADF00D;
  p.common.ev = 0x0000FFFF;
  p.common.psn = 0x42;
  p.common.ts = 0x7766554433221100;
  return p;
}
const uint8_t kProbeBytes[] = {
    0x01, 0x20, 0x00, 0x00,                          // 0: version, kind, flags, net_flags
    0x00, 0x00, 0x00, 0x00,                          // 4: dst_qpn
    0x0B, 0xAD, 0xF0, 0x0D,                          // 8: token
    0x00, 0x00, 0xFF, 0xFF,                          // 12: ev
    0x00, 0x00, 0x00, 0x42,                          // 16: psn
    0xDD, 0x07, 0x9C, 0x22,                          // 20: hdr_crc
    0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00,  // 24: ts
};

Packet known_probe_reply_packet() {
  Packet p;
  p.common.kind = Kind::kProbeReply;
  p.common.token = 0x0BADF00D;
  p.common.ev = 0x00001234;
  p.common.psn = 0x42;
  p.common.ts = 0x0011223344556677;
  p.probe_reply.echo_ev = 0xDEADBEEF;
  p.probe_reply.probe_flags = ack_flag::kEcnEcho;
  p.probe_reply.echo_ts = 0x8877665544332211;
  return p;
}
const uint8_t kProbeReplyBytes[] = {
    0x01, 0x21, 0x00, 0x00,                          // 0: version, kind, flags, net_flags
    0x00, 0x00, 0x00, 0x00,                          // 4: dst_qpn
    0x0B, 0xAD, 0xF0, 0x0D,                          // 8: token
    0x00, 0x00, 0x12, 0x34,                          // 12: ev
    0x00, 0x00, 0x00, 0x42,                          // 16: psn
    0x87, 0x22, 0x96, 0x9C,                          // 20: hdr_crc
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,  // 24: ts
    0xDE, 0xAD, 0xBE, 0xEF,                          // 32: echo_ev
    0x01, 0x00, 0x00, 0x00,                          // 36: probe_flags, reserved
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // 40: echo_ts
};

struct KnownAnswer {
  const char* name;
  Packet packet;
  std::span<const uint8_t> header;
  std::span<const uint8_t> payload;
};

std::vector<KnownAnswer> known_answers() {
  return {
      {"data", known_data_packet(), kDataBytes, kPayload123456789},
      {"ack", known_ack_packet(), kAckBytes, {}},
      {"nack", known_nack_packet(), kNackBytes, {}},
      {"probe", known_probe_packet(), kProbeBytes, {}},
      {"probe_reply", known_probe_reply_packet(), kProbeReplyBytes, {}},
  };
}

// ---- to_string -------------------------------------------------------------------------

TEST(Wire, ToString_EveryWireErrorHasADistinctName) {
  std::set<std::string> names;
  for (auto e : {WireError::kTooShort, WireError::kBadVersion, WireError::kUnknownKind,
                 WireError::kBadLength, WireError::kPayloadTooLarge, WireError::kBadHeaderCrc,
                 WireError::kBadPayloadCrc, WireError::kBadField}) {
    ASSERT_NE(to_string(e), nullptr);
    names.insert(to_string(e));
  }
  EXPECT_EQ(names.size(), 8u);
  EXPECT_NE(to_string(static_cast<WireError>(0)), nullptr);
}

// ---- encode_header ---------------------------------------------------------------------

TEST(Wire, HeaderSize_MatchesTheSpecForEveryKindByte) {
  for (int k = 0; k < 256; ++k) {
    EXPECT_EQ(header_size(static_cast<Kind>(k)), spec_header_size(static_cast<uint8_t>(k)))
        << "kind " << k;
  }
  EXPECT_EQ(kMaxHeaderSize, 96u);
  EXPECT_EQ(kDataHeaderSize, 72u);
}

TEST(Wire, EncodeHeader_ProducesTheKnownBytesOfEveryKind) {
  for (const KnownAnswer& ka : known_answers()) {
    SCOPED_TRACE(ka.name);
    Bytes out(ka.header.size() + 16, 0xEE);
    ASSERT_EQ(encode_header(ka.packet, ka.payload, out), ka.header.size());
    EXPECT_EQ(Bytes(out.begin(), out.begin() + ka.header.size()),
              Bytes(ka.header.begin(), ka.header.end()));
    for (size_t i = ka.header.size(); i < out.size(); ++i) {
      ASSERT_EQ(out[i], 0xEE) << "wrote past the header at " << i;
    }
  }
}

TEST(Wire, Decode_KnownBytesOfEveryKindGiveTheFields) {
  for (const KnownAnswer& ka : known_answers()) {
    SCOPED_TRACE(ka.name);
    Bytes b(ka.header.begin(), ka.header.end());
    b.insert(b.end(), ka.payload.begin(), ka.payload.end());
    const auto r = decode(b);
    ASSERT_TRUE(r.ok()) << describe(r);
    expect_same_fields(ka.packet, *r);
    EXPECT_EQ(r->common.hdr_crc, load_be32(ka.header, kOffHdrCrc));
    EXPECT_FALSE(r->trimmed);
    EXPECT_EQ(r->payload.size(), ka.payload.size());
  }
}

TEST(Wire, EncodeHeader_PayloadCrcIsZeroWithoutTheFlag) {
  Packet p = known_data_packet();
  p.common.flags &= ~flag::kPayloadCrc;
  p.data.payload_crc = 0x12345678;  // ignored
  const Bytes b = encode_packet(p, kPayload123456789);
  EXPECT_EQ(load_be32(b, kOffPayloadCrc), 0u);
  const auto r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->data.payload_crc, 0u);
}

TEST(Wire, EncodeHeader_PayloadCrcIsComputedNotCopied) {
  Packet p = known_data_packet();
  p.data.payload_crc = 0;  // encode computes it from the payload
  const Bytes b = encode_packet(p, kPayload123456789);
  EXPECT_EQ(load_be32(b, kOffPayloadCrc), 0xE3069283u);
}

TEST(Wire, EncodeHeader_IgnoresTheHdrCrcField) {
  Packet p = known_ack_packet();
  p.common.hdr_crc = 0xFFFFFFFF;
  const Bytes b = encode_packet(p);
  EXPECT_EQ(b, Bytes(std::begin(kAckBytes), std::end(kAckBytes)));
}

TEST(Wire, EncodeHeader_NetFlagsAreWrittenButLeaveTheCrcUnchanged) {
  for (const KnownAnswer& ka : known_answers()) {
    SCOPED_TRACE(ka.name);
    Packet p = ka.packet;
    p.common.net_flags = net_flag::kTrimmed | net_flag::kTrimmedLastHop;
    Bytes out(ka.header.size());
    encode_header(p, ka.payload, out);
    Bytes want(ka.header.begin(), ka.header.end());
    want[kOffNetFlags] = 0x03;
    EXPECT_EQ(out, want);
  }
}

TEST(Wire, EncodeHeader_DataWithMaxPayload) {
  Packet p = distinctive_packet(Kind::kReadResp);
  p.data.payload_len = kMaxPayload;
  const Bytes payload = make_payload(kMaxPayload);
  const Bytes b = encode_packet(p, payload);
  EXPECT_EQ(load_be16(b, kOffPayloadLen), kMaxPayload);
  EXPECT_EQ(load_be32(b, kOffPayloadCrc), crc32c(0, payload.data(), payload.size()));
}

#ifndef NDEBUG
TEST(WireDeathTest, EncodeHeader_PayloadShorterThanPayloadLenAsserts) {
  Packet p = known_data_packet();
  Bytes out(kDataHeaderSize);
  EXPECT_DEATH(encode_header(p, std::span(kPayload123456789).first(8), out), "");
}
#endif

// ---- round trips -----------------------------------------------------------------------

TEST(Wire, EncodeDecode_RoundTripDataEveryKindAndPayloadSize) {
  for (Kind kind : kDataKinds) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{1499}, size_t{kMaxPayload}}) {
      for (bool with_crc : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "kind " << int(kind) << " len " << len << " crc " << with_crc);
        Packet p = distinctive_packet(kind);
        if (!with_crc) p.common.flags &= ~flag::kPayloadCrc;
        p.data.payload_len = static_cast<uint16_t>(len);
        const Bytes payload = make_payload(len, static_cast<uint8_t>(len));
        const Bytes b = encode_packet(p, payload);
        const auto r = decode(b);
        ASSERT_TRUE(r.ok()) << describe(r);
        expect_same_fields(p, *r);
        EXPECT_EQ(r->data.payload_crc, with_crc ? crc32c(0, payload.data(), len) : 0u);
        EXPECT_FALSE(r->trimmed);
        EXPECT_EQ(Bytes(r->payload.begin(), r->payload.end()), payload);
      }
    }
  }
}

TEST(Wire, EncodeDecode_RoundTripEveryControlKind) {
  for (Kind kind : kControlKinds) {
    SCOPED_TRACE(testing::Message() << "kind " << int(kind));
    const Packet p = distinctive_packet(kind);
    const Bytes b = encode_packet(p);
    ASSERT_EQ(b.size(), header_size(kind));
    const auto r = decode(b);
    ASSERT_TRUE(r.ok()) << describe(r);
    expect_same_fields(p, *r);
    EXPECT_TRUE(r->payload.empty());
    EXPECT_FALSE(r->trimmed);
  }
}

TEST(Wire, EncodeDecode_RoundTripExtremeValues) {
  for (Kind kind : kAllKinds) {
    for (bool ones : {false, true}) {
      SCOPED_TRACE(testing::Message() << "kind " << int(kind) << " all ones " << ones);
      const uint64_t v = ones ? ~0ull : 0;
      const auto w = static_cast<uint32_t>(v);
      const auto b = static_cast<uint8_t>(v);
      Packet p;
      p.common.kind = kind;
      p.common.flags = b & ~flag::kPayloadCrc;
      p.common.dst_qpn = p.common.token = p.common.ev = p.common.psn = w;
      p.common.ts = v;
      p.data.addr = v;
      p.data.rkey = p.data.msn = p.data.offset = p.data.msg_len = p.data.imm = w;
      p.data.src_qpn = w;
      p.data.ports_down = static_cast<uint16_t>(v);
      p.ack.cum_psn = p.ack.sack_base = p.ack.echo_ev = p.ack.echo_psn = w;
      p.ack.echo_ts = v;
      p.ack.ack_delay_ns = w;
      p.ack.ack_flags = b;
      p.ack.ports_down = static_cast<uint16_t>(v);
      p.ack.sack.fill(v);
      p.nack.cum_psn = p.nack.nack_psn = p.nack.echo_ev = w;
      p.nack.reason = static_cast<NackReason>(b);
      p.nack.echo_ts = v;
      p.probe_reply.echo_ev = w;
      p.probe_reply.probe_flags = b;
      p.probe_reply.echo_ts = v;
      const auto r = decode(encode_packet(p));
      ASSERT_TRUE(r.ok()) << describe(r);
      expect_same_fields(p, *r);
    }
  }
}

TEST(Wire, Decode_EveryNackReasonPassesThrough) {
  for (int reason = 0; reason < 256; ++reason) {
    Packet p = distinctive_packet(Kind::kNack);
    p.nack.reason = static_cast<NackReason>(reason);
    const auto r = decode(encode_packet(p));
    ASSERT_TRUE(r.ok()) << describe(r);
    EXPECT_EQ(static_cast<int>(r->nack.reason), reason);
  }
}

// ---- decode errors ---------------------------------------------------------------------

TEST(Wire, Decode_EmptyInputIsTooShort) { EXPECT_WIRE_ERROR(decode({}), WireError::kTooShort); }

TEST(Wire, Decode_ShorterThanCommonHeaderIsTooShort) {
  const Bytes b = valid_datagram(Kind::kProbe);
  for (size_t n = 0; n < kCommonSize; ++n) {
    EXPECT_WIRE_ERROR(decode(std::span(b).first(n)), WireError::kTooShort);
  }
}

TEST(Wire, Decode_WrongVersionIsBadVersion) {
  for (int v : {0, 2, 0x81, 0xFF}) {
    Bytes b = valid_datagram(Kind::kAck);
    b[0] = static_cast<uint8_t>(v);
    EXPECT_WIRE_ERROR(decode(b), WireError::kBadVersion);
    reseal(b);  // a well-sealed header of another version is still refused
    EXPECT_WIRE_ERROR(decode(b), WireError::kBadVersion);
  }
}

TEST(Wire, Decode_UnknownKindIsUnknownKind) {
  for (int k = 0; k < 256; ++k) {
    if (spec_header_size(static_cast<uint8_t>(k)) != 0) continue;
    Bytes b = valid_datagram(Kind::kAck);
    b[1] = static_cast<uint8_t>(k);
    EXPECT_WIRE_ERROR(decode(b), WireError::kUnknownKind);
  }
}

TEST(Wire, Decode_ShorterThanKindHeaderIsTooShort) {
  for (Kind kind : kAllKinds) {
    const Bytes b = valid_datagram(kind, 0);
    for (size_t n = kCommonSize; n < header_size(kind); ++n) {
      EXPECT_WIRE_ERROR(decode(std::span(b).first(n)), WireError::kTooShort);
    }
  }
}

TEST(Wire, Decode_ChangedFieldIsBadHeaderCrc) {
  Bytes b = valid_datagram(Kind::kWrite);
  b[19] ^= 0x01;  // psn
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadHeaderCrc);
}

TEST(Wire, Decode_ControlPacketWithTrailingBytesIsBadLength) {
  for (Kind kind : kControlKinds) {
    for (size_t extra : {1, 8, 100}) {
      Bytes b = valid_datagram(kind);
      b.resize(b.size() + extra, 0);
      EXPECT_WIRE_ERROR(decode(b), WireError::kBadLength);
    }
  }
}

TEST(Wire, Decode_HeaderCrcIsCheckedBeforeLength) {
  Bytes b = valid_datagram(Kind::kNack);
  b[40] ^= 0x80;
  b.push_back(0);
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadHeaderCrc);
}

TEST(Wire, Decode_PayloadLenAboveMaxIsPayloadTooLarge) {
  for (uint16_t len : {uint16_t(kMaxPayload + 1), uint16_t(9000), uint16_t(0xFFFF)}) {
    Bytes b = valid_datagram(Kind::kSend, 0);
    store_be16(b, kOffPayloadLen, len);
    reseal(b);
    EXPECT_WIRE_ERROR(decode(b), WireError::kPayloadTooLarge);
    b.resize(b.size() + len, 0x77);  // even when the payload is all there
    EXPECT_WIRE_ERROR(decode(b), WireError::kPayloadTooLarge);
  }
}

TEST(Wire, Decode_PayloadLongerThanPayloadLenIsBadLength) {
  for (size_t len : {0, 1, 1499}) {
    Bytes b = valid_datagram(Kind::kWrite, len);
    b.push_back(0);
    EXPECT_WIRE_ERROR(decode(b), WireError::kBadLength);
  }
}

TEST(Wire, Decode_PayloadBitFlipIsBadPayloadCrc) {
  const Bytes good = valid_datagram(Kind::kWriteImm, 300);
  for (size_t bit = kDataHeaderSize * 8; bit < good.size() * 8; ++bit) {
    Bytes b = good;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_WIRE_ERROR(decode(b), WireError::kBadPayloadCrc);
  }
}

TEST(Wire, Decode_WrongPayloadCrcFieldIsBadPayloadCrc) {
  Bytes b = valid_datagram(Kind::kSendImm, 100);
  store_be32(b, kOffPayloadCrc, load_be32(b, kOffPayloadCrc) + 1);
  reseal(b);
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadPayloadCrc);
}

TEST(Wire, Decode_PayloadWithoutCrcFlagIsNotChecked) {
  Packet p = distinctive_packet(Kind::kWrite);
  p.common.flags &= ~flag::kPayloadCrc;
  p.data.payload_len = 64;
  Bytes b = encode_packet(p, make_payload(64));
  b.back() ^= 0xFF;
  const auto r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->payload.size(), 64u);
}

// ---- header CRC coverage ---------------------------------------------------------------

TEST(Wire, Decode_NetFlagsDoNotBreakHeaderCrc) {
  for (Kind kind : kAllKinds) {
    for (int nf = 0; nf < 256; ++nf) {
      Bytes b = valid_datagram(kind, 64);
      b[kOffNetFlags] = static_cast<uint8_t>(nf);
      const auto r = decode(b);
      ASSERT_TRUE(r.ok()) << "kind " << int(kind) << " net_flags " << nf << ": " << describe(r);
      EXPECT_EQ(r->common.net_flags, nf);
      EXPECT_EQ(r->trimmed, is_data(kind) && (nf & 0x03) != 0);
    }
  }
}

// CRC32C catches every single-bit error, so no flip in the header can decode, and the
// error names the byte's role: version, kind (another kind may be too long), or the CRC.
TEST(Wire, Decode_HeaderBitFlipNeverDecodes) {
  for (Kind kind : kAllKinds) {
    const Bytes good = valid_datagram(kind, 200);
    const size_t hs = header_size(kind);
    for (size_t bit = 0; bit < hs * 8; ++bit) {
      const size_t byte = bit / 8;
      if (byte == kOffNetFlags) continue;  // not covered, by design (test above)
      SCOPED_TRACE(testing::Message() << "kind " << int(kind) << " bit " << bit);
      Bytes b = good;
      b[byte] ^= static_cast<uint8_t>(1u << (bit % 8));
      const auto r = decode(b);
      ASSERT_FALSE(r.ok());
      if (byte == 0) {
        EXPECT_EQ(r.error(), WireError::kBadVersion);
      } else if (byte == 1) {
        EXPECT_TRUE(r.error() == WireError::kUnknownKind || r.error() == WireError::kTooShort ||
                    r.error() == WireError::kBadHeaderCrc)
            << to_string(r.error());
      } else {
        EXPECT_EQ(r.error(), WireError::kBadHeaderCrc) << to_string(r.error());
      }
    }
  }
}

TEST(Wire, Decode_ReservedBytesAreCoveredByCrcButOtherwiseIgnored) {
  Bytes b = valid_datagram(Kind::kReadReq, 0);
  b[62] = 0xAB;  // data: ports_down / xrc_srqn (once reserved), big-endian
  b[63] = 0x00;
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadHeaderCrc);
  reseal(b);
  auto d = decode(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->data.xrc_srqn, 0xAB00);
  EXPECT_EQ(d->data.ports_down, 0xAB00);  // the same two bytes

  Bytes a = valid_datagram(Kind::kAck);
  a[61] = 0xFF;  // ack reserved
  reseal(a);
  EXPECT_TRUE(decode(a).ok());
}

TEST(Wire, Decode_DataPortsDownIsCoveredByTheCrc) {
  Bytes b = valid_datagram(Kind::kReadReq, 0);
  b[62] = 0x80;  // ports_down, high byte: port 15
  b[63] = 0x01;  // and port 0
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadHeaderCrc);
  reseal(b);
  const auto r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->data.ports_down, 0x8001);
}

TEST(Wire, Decode_AckPortsDownIsBigEndianAfterTheReservedByte) {
  Packet p = known_ack_packet();
  p.ack.ports_down = 0x0104;  // ports 2 and 8 have no link
  const Bytes b = encode_packet(p);
  EXPECT_EQ(b[61], 0x00);
  EXPECT_EQ(b[62], 0x01);
  EXPECT_EQ(b[63], 0x04);
  const auto r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->ack.ports_down, 0x0104);
}

TEST(Wire, Decode_NackRnrTimerIsTheByteAfterTheReason) {
  Packet p = known_nack_packet();
  p.nack.reason = NackReason::kNoResource;
  p.nack.rnr_timer = static_cast<uint8_t>(kRnrTimerStated | 31);
  Bytes b = encode_packet(p);
  EXPECT_EQ(b[44], 0x0A);
  EXPECT_EQ(b[45], 0x9F);
  EXPECT_EQ(b[46], 0x00);
  EXPECT_EQ(b[47], 0x00);
  auto r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->nack.rnr_timer, kRnrTimerStated | 31);
  b[45] = 0x00;  // an older sender: not stated; covered by the CRC like any header byte
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadHeaderCrc);
  reseal(b);
  r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->nack.rnr_timer, 0);
}

// ---- trimming --------------------------------------------------------------------------

TEST(Wire, Decode_TrimmedDataPacketHasNoPayload) {
  const Bytes good = valid_datagram(Kind::kWrite, 1499);
  for (size_t keep : {size_t{0}, size_t{1}, size_t{64}, size_t{1498}}) {
    const auto r = decode(std::span(good).first(kDataHeaderSize + keep));
    ASSERT_TRUE(r.ok()) << describe(r);
    EXPECT_TRUE(r->trimmed) << "kept " << keep;
    EXPECT_TRUE(r->payload.empty());
    expect_same_fields(distinctive_packet(Kind::kWrite), *r);
  }
}

TEST(Wire, Decode_NetFlagTrimmedMarksTrimmedEvenWithFullPayload) {
  for (uint8_t nf : {net_flag::kTrimmed, net_flag::kTrimmedLastHop}) {
    Bytes b = valid_datagram(Kind::kSend, 256);
    b[kOffNetFlags] = nf;
    const auto r = decode(b);
    ASSERT_TRUE(r.ok()) << describe(r);
    EXPECT_TRUE(r->trimmed);
    EXPECT_TRUE(r->payload.empty());
    EXPECT_EQ(r->common.net_flags, nf);
  }
}

TEST(Wire, Decode_TrimmedPacketSkipsPayloadCrc) {
  Bytes b = valid_datagram(Kind::kSend, 256);
  b.back() ^= 0x01;  // would be kBadPayloadCrc
  b[kOffNetFlags] = net_flag::kTrimmed;
  const auto by_flag = decode(b);
  ASSERT_TRUE(by_flag.ok()) << describe(by_flag);
  EXPECT_TRUE(by_flag->trimmed);

  b[kOffNetFlags] = 0;
  b.pop_back();
  const auto by_length = decode(b);
  ASSERT_TRUE(by_length.ok()) << describe(by_length);
  EXPECT_TRUE(by_length->trimmed);
}

TEST(Wire, Decode_ZeroLengthPayloadIsNotTrimmed) {
  const auto r = decode(valid_datagram(Kind::kReadReq, 0));
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_FALSE(r->trimmed);
  EXPECT_TRUE(r->payload.empty());
}

TEST(Wire, Decode_PayloadPointsIntoTheInput) {
  const Bytes b = valid_datagram(Kind::kReadResp, 777);
  const auto r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->payload.data(), b.data() + kDataHeaderSize);
  EXPECT_EQ(r->payload.size(), 777u);
}

// ---- ACK trailers ----------------------------------------------------------------------

// An ACK riding on data: the trailer after the payload is the ACK extension's 64 bytes as an
// ACK packet lays them out, then CRC32C of them seeded with the data header's hdr_crc; decode
// gives the ACK's fields and the payload without it, for every data kind and payload size.
TEST(Wire, AckTrailer_KnownBytesAndRoundTripEveryDataKind) {
  const Packet want = distinctive_packet(Kind::kWrite);
  Packet ack = distinctive_packet(Kind::kAck);
  const Bytes ack_bytes = encode_packet(ack);
  for (const Kind kind : kDataKinds) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{8}, size_t{1499}, size_t{8192 - 68}}) {
      const Bytes b = datagram_with_ack(kind, len);
      ASSERT_EQ(b.size(), kDataHeaderSize + len + kAckTrailerSize);
      const size_t t = kDataHeaderSize + len;
      EXPECT_TRUE(std::equal(b.begin() + t, b.begin() + t + 64, ack_bytes.begin() + kCommonSize));
      EXPECT_EQ(load_be32(b, t + 64), crc32c(load_be32(b, kOffHdrCrc), b.data() + t, 64));
      const auto r = decode(b);
      ASSERT_TRUE(r.ok()) << describe(r) << " " << to_string(kind) << " " << len;
      EXPECT_TRUE(r->has_ack);
      EXPECT_FALSE(r->trimmed);
      EXPECT_EQ(r->payload.data(), b.data() + kDataHeaderSize);
      EXPECT_EQ(r->payload.size(), len);
      EXPECT_EQ(r->ack.cum_psn, want.ack.cum_psn);
      EXPECT_EQ(r->ack.sack_base, want.ack.sack_base);
      EXPECT_EQ(r->ack.echo_ev, want.ack.echo_ev);
      EXPECT_EQ(r->ack.echo_psn, want.ack.echo_psn);
      EXPECT_EQ(r->ack.echo_ts, want.ack.echo_ts);
      EXPECT_EQ(r->ack.ack_delay_ns, want.ack.ack_delay_ns);
      EXPECT_EQ(r->ack.ack_flags, want.ack.ack_flags);
      EXPECT_EQ(r->ack.ports_down, want.ack.ports_down);
      EXPECT_EQ(r->ack.sack, want.ack.sack);
    }
  }
  // Without a trailer the same Packet (reused, as the engine does) says none.
  Packet p;
  ASSERT_TRUE(decode(datagram_with_ack(Kind::kSend, 64), p).ok());
  EXPECT_TRUE(p.has_ack);
  ASSERT_TRUE(decode(valid_datagram(Kind::kSend, 64), p).ok());
  EXPECT_FALSE(p.has_ack);
}

// A flipped bit anywhere in the trailer, or a trailer moved onto another packet (its CRC is
// seeded with the header's), is refused as a bad CRC; the payload's CRC still covers only
// the payload.
TEST(Wire, AckTrailer_BitFlipOrAnotherPacketsTrailerIsBadPayloadCrc) {
  const Bytes good = datagram_with_ack(Kind::kWriteImm, 40);
  for (size_t bit = (kDataHeaderSize + 40) * 8; bit < good.size() * 8; ++bit) {
    Bytes b = good;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_WIRE_ERROR(decode(b), WireError::kBadPayloadCrc);
  }
  Bytes other = datagram_with_ack(Kind::kWriteImm, 40);
  store_be32(other, 16, 0x1234);  // another PSN
  reseal(other);
  std::copy(good.end() - kAckTrailerSize, good.end(), other.end() - kAckTrailerSize);
  EXPECT_WIRE_ERROR(decode(other), WireError::kBadPayloadCrc);
  EXPECT_STREQ(to_string(WireError::kBadPayloadCrc), "bad payload crc (or ACK trailer crc)");
}

// Only exactly a trailer may follow the payload: 1..67 or 69+ bytes more are a bad length.
TEST(Wire, AckTrailer_AnyOtherLengthPastThePayloadIsBadLength) {
  const Bytes good = datagram_with_ack(Kind::kSend, 100);
  for (size_t extra : {size_t{1}, size_t{4}, size_t{64}, size_t{67}, size_t{69}, size_t{200}}) {
    Bytes b = good;
    b.resize(kDataHeaderSize + 100 + extra, 0);
    SCOPED_TRACE(extra);
    EXPECT_WIRE_ERROR(decode(b), WireError::kBadLength);
  }
}

// A switch trims the packet to its header (the trailer goes with the payload): trimmed, no
// ACK. Marked trimmed with everything still there: trimmed, and the ACK is not read either.
TEST(Wire, AckTrailer_TrimmedPacketCarriesNoAck) {
  Bytes b = datagram_with_ack(Kind::kWrite, 1499);
  const auto cut = decode(std::span(b).first(kDataHeaderSize));
  ASSERT_TRUE(cut.ok()) << describe(cut);
  EXPECT_TRUE(cut->trimmed);
  EXPECT_FALSE(cut->has_ack);
  b[kOffNetFlags] = net_flag::kTrimmed;
  const auto marked = decode(b);
  ASSERT_TRUE(marked.ok()) << describe(marked);
  EXPECT_TRUE(marked->trimmed);
  EXPECT_FALSE(marked->has_ack);
}

// ---- hostile input ---------------------------------------------------------------------

// Compares decode with the reference verdict; on success also the payload and trim.
void check_against_reference(std::span<const uint8_t> b) {
  const auto r = decode(b);
  const std::optional<WireError> want = reference_verdict(b);
  if (want) {
    ASSERT_FALSE(r.ok()) << "decoded a datagram the spec refuses (" << to_string(*want) << ")";
    ASSERT_EQ(r.error(), *want) << to_string(r.error()) << " != " << to_string(*want);
    return;
  }
  ASSERT_TRUE(r.ok()) << "refused a valid datagram: " << describe(r);
  ASSERT_EQ(static_cast<uint8_t>(r->common.kind), b[1]);
  if (is_data(r->common.kind)) {
    const bool trimmed =
        b.size() - kDataHeaderSize < r->data.payload_len || (b[kOffNetFlags] & 0x03) != 0;
    const bool trailer = b.size() - kDataHeaderSize == r->data.payload_len + kAckTrailerSize;
    ASSERT_EQ(r->trimmed, trimmed);
    ASSERT_EQ(r->has_ack, trailer && !trimmed);
    ASSERT_EQ(r->payload.size(), trimmed ? 0 : r->data.payload_len);
    if (!trimmed) {
      ASSERT_EQ(r->payload.data(), b.data() + kDataHeaderSize);
    }
  } else {
    ASSERT_TRUE(r->payload.empty());
    ASSERT_FALSE(r->trimmed);
  }
}

TEST(Wire, Decode_RandomBytesNeverCrashAndMatchTheReference) {
  std::mt19937 rng(20240601);
  for (int iter = 0; iter < 200000; ++iter) {
    Bytes b(rng() % 8 == 0 ? 360 + rng() % 16 : rng() % 200);  // some around ADDR_REPLY's 368
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    // Steer most inputs past the first checks so the later ones see traffic too.
    if (b.size() >= 2 && rng() % 4 != 0) b[0] = kVersion;
    if (b.size() >= 2 && rng() % 2 != 0) b[1] = static_cast<uint8_t>(kAllKinds[rng() % 10]);
    if (b.size() >= 2 && rng() % 8 == 0) b[1] = static_cast<uint8_t>(34 + rng() % 2);  // ADDR_*
    if (b.size() >= 41 && b[1] >= 34 && rng() % 2 != 0) b[40] = static_cast<uint8_t>(rng() % 20);
    if (b.size() >= 32 && rng() % 2 != 0) {
      const size_t hs = spec_header_size(b[1]);
      if (hs != 0 && b.size() >= hs) reseal(b);
    }
    check_against_reference(b);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "iteration " << iter;
      return;
    }
  }
}

TEST(Wire, Decode_MutatedValidPacketsMatchTheReference) {
  std::mt19937 rng(7);
  int decoded = 0;
  for (int iter = 0; iter < 100000; ++iter) {
    const Kind kind = kAllKinds[rng() % 11];  // the data kinds, ACK and NACK
    Bytes b = is_data(kind) && rng() % 3 == 0 ? datagram_with_ack(kind, rng() % 300)
                                              : valid_datagram(kind, rng() % 300);
    switch (rng() % 6) {
      case 0:
        b.resize(rng() % (b.size() + 1));
        break;  // truncate
      case 1:
        b.resize(b.size() + 1 + rng() % 8, uint8_t(rng()));
        break;  // extend
      case 2:
        b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        break;
      case 3:  // change header bytes and reseal: exercises the checks after the CRC
        for (int i = 0; i < 3; ++i) b[2 + rng() % (header_size(kind) - 2)] = uint8_t(rng());
        reseal(b);
        break;
      case 4:
        b[kOffNetFlags] = static_cast<uint8_t>(rng());
        break;
      default:
        break;  // untouched
    }
    check_against_reference(b);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "iteration " << iter;
      return;
    }
    decoded += decode(b).ok();
  }
  EXPECT_GT(decoded, 10000);  // the mix does reach the success paths
}

}  // namespace
}  // namespace mrc::wire

// ---- ADDR_QUERY / ADDR_REPLY (connectionless, io/udp/peer_addresses.h) -------------------

namespace mrc::wire {
namespace {

Packet addr_packet(Kind kind, uint8_t planes) {
  Packet p;
  p.common.kind = kind;
  p.common.dst_qpn = 0;
  p.common.token = 0xF00DCAFE;
  p.common.psn = 0x12345678;  // the nonce
  p.common.ts = 0x8123456789ABCDEFull;
  p.addr.target_qpn = 0x00A1B2C3;
  p.addr.src_qpn = 0x00D4E5F6;
  p.addr.planes = planes;
  for (uint8_t i = 0; i < planes; ++i) {
    for (uint8_t k = 0; k < 16; ++k) p.addr.plane[i].addr[k] = static_cast<uint8_t>(i * 16 + k);
    p.addr.plane[i].port = static_cast<uint16_t>(4791 + i);
  }
  return p;
}

// PORT_STATUS and its ACK: the same 16-byte extension (target_qpn, src_qpn, ports_up,
// reserved), at known offsets, covered by hdr_crc, and back field for field.
TEST(Wire, PortStatus_KnownBytesAndRoundTrip) {
  for (const Kind kind : {Kind::kPortStatus, Kind::kPortStatusAck}) {
    SCOPED_TRACE(to_string(kind));
    Packet p;
    p.common.kind = kind;
    p.common.token = 0xF00DCAFE;
    p.common.ev = 0x00010203;
    p.common.psn = 0x12345678;  // the update's sequence
    p.common.ts = 0x8123456789ABCDEFull;
    p.port_status.target_qpn = 0x00A1B2C3;
    p.port_status.src_qpn = 0x00D4E5F6;
    p.port_status.ports_up = 0x0000000D;  // planes 0, 2, 3 up; 1 down
    Bytes b(header_size(kind));
    ASSERT_EQ(encode_header(p, {}, b), 48u);
    EXPECT_EQ(b[1], static_cast<uint8_t>(kind));
    EXPECT_EQ(load_be32(b, 4), 0u);  // dst_qpn: connectionless
    EXPECT_EQ(load_be32(b, 32), 0x00A1B2C3u);
    EXPECT_EQ(load_be32(b, 36), 0x00D4E5F6u);
    EXPECT_EQ(load_be32(b, 40), 0x0000000Du);
    for (size_t i = 44; i < 48; ++i) EXPECT_EQ(b[i], 0) << "byte " << i;
    EXPECT_EQ(load_be32(b, kOffHdrCrc), spec_header_crc(b));
    auto r = decode(b);
    ASSERT_TRUE(r.ok()) << describe(r);
    expect_same_fields(p, *r);
    EXPECT_EQ(r->port_status.ports_up, 0x0000000Du);
    EXPECT_EQ(r->port_status.target_qpn, 0x00A1B2C3u);
    EXPECT_EQ(r->port_status.src_qpn, 0x00D4E5F6u);
    b[40] ^= 1;  // a flipped bit of the mask
    EXPECT_FALSE(decode(b).ok());
    b[40] ^= 1;
    b.push_back(0);  // trailing bytes
    EXPECT_FALSE(decode(b).ok());
  }
}

TEST(Wire, AddrQuery_KnownBytesAndRoundTrip) {
  const Packet q = addr_packet(Kind::kAddrQuery, 0);
  Bytes b(header_size(Kind::kAddrQuery));
  ASSERT_EQ(encode_header(q, {}, b), 48u);
  EXPECT_EQ(b[1], 34);
  EXPECT_EQ(load_be32(b, 4), 0u);                                       // dst_qpn: connectionless
  EXPECT_EQ(load_be32(b, 8), 0xF00DCAFEu);                              // token
  EXPECT_EQ(load_be32(b, 16), 0x12345678u);                             // nonce in psn
  EXPECT_EQ(load_be32(b, 32), 0x00A1B2C3u);                             // target_qpn
  EXPECT_EQ(load_be32(b, 36), 0x00D4E5F6u);                             // src_qpn
  for (size_t i = 40; i < 48; ++i) EXPECT_EQ(b[i], 0) << "byte " << i;  // planes, reserved
  EXPECT_EQ(load_be32(b, kOffHdrCrc), spec_header_crc(b));
  auto r = decode(b);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r->addr.target_qpn, 0x00A1B2C3u);
  EXPECT_EQ(r->addr.src_qpn, 0x00D4E5F6u);
  EXPECT_EQ(r->common.psn, 0x12345678u);
  EXPECT_EQ(r->addr.planes, 0);
}

TEST(Wire, AddrReply_KnownBytesAndRoundTripEveryPlaneCount) {
  for (uint8_t n : {0, 1, 2, 4, 16}) {
    const Packet a = addr_packet(Kind::kAddrReply, n);
    Bytes b(kAddrReplySize);
    ASSERT_EQ(encode_header(a, {}, b), 368u);
    EXPECT_EQ(b[1], 35);
    EXPECT_EQ(b[40], n);
    for (size_t i = 0; i < 16; ++i) {
      const size_t at = 48 + i * 20;
      for (size_t k = 0; k < 16; ++k)
        ASSERT_EQ(b[at + k], i < n ? i * 16 + k : 0) << "plane " << i << " byte " << k;
      EXPECT_EQ(load_be16(b, at + 16), i < n ? 4791 + i : 0);  // unused entries are zero
      EXPECT_EQ(load_be16(b, at + 18), 0);
    }
    EXPECT_EQ(load_be32(b, kOffHdrCrc), spec_header_crc(b));
    auto r = decode(b);
    ASSERT_TRUE(r.ok()) << describe(r);
    EXPECT_EQ(r->addr.planes, n);
    EXPECT_EQ(r->addr.target_qpn, 0x00A1B2C3u);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(r->addr.plane[i].addr, a.addr.plane[i].addr);
      EXPECT_EQ(r->addr.plane[i].port, a.addr.plane[i].port);
    }
  }
}

TEST(Wire, AddrMessages_BadPlaneCountLengthAndCrcAreRefused) {
  Bytes reply(kAddrReplySize);
  encode_header(addr_packet(Kind::kAddrReply, 2), {}, reply);
  Bytes b = reply;
  b[40] = 17;  // more planes than the reply holds
  reseal(b);
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadField);
  b = reply;
  b[100] ^= 1;  // an address byte: covered by hdr_crc
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadHeaderCrc);
  b = reply;
  b.pop_back();
  EXPECT_WIRE_ERROR(decode(b), WireError::kTooShort);
  b = reply;
  b.push_back(0);
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadLength);

  Bytes query(header_size(Kind::kAddrQuery));
  encode_header(addr_packet(Kind::kAddrQuery, 0), {}, query);
  b = query;
  b[40] = 1;  // a query lists no planes
  reseal(b);
  EXPECT_WIRE_ERROR(decode(b), WireError::kBadField);
}

}  // namespace
}  // namespace mrc::wire

namespace mrc::wire {
namespace {

TEST(Wire, ToString_KindNamesAsTheDocsWriteThem) {
  EXPECT_STREQ(to_string(Kind::kWriteImm), "WRITE_IMM");
  EXPECT_STREQ(to_string(Kind::kReadResp), "READ_RESP");
  EXPECT_STREQ(to_string(Kind::kCmpSwap), "CMP_SWAP");
  EXPECT_STREQ(to_string(Kind::kFetchAdd), "FETCH_ADD");
  EXPECT_STREQ(to_string(Kind::kUdSend), "UD_SEND");
  EXPECT_STREQ(to_string(Kind::kAtomicWrite), "ATOMIC_WRITE");
  EXPECT_STREQ(to_string(Kind::kProbeReply), "PROBE_REPLY");
  EXPECT_STREQ(to_string(Kind::kAddrReply), "ADDR_REPLY");
  EXPECT_STREQ(to_string(Kind::kPortStatus), "PORT_STATUS");
  EXPECT_STREQ(to_string(Kind::kPortStatusAck), "PORT_STATUS_ACK");
  EXPECT_STREQ(to_string(static_cast<Kind>(11)), "?");
  size_t named = 0;
  for (int k = 0; k < 256; ++k) named += std::string(to_string(static_cast<Kind>(k))) != "?";
  EXPECT_EQ(named, 18u);  // every kind of the table, no other byte
}


// ---- decode_split ------------------------------------------------------------------------

// Header and payload apart give the fields decode gives them joined, and the payload span is
// the one passed (not a copy); the payload CRC is checked over it.
TEST(Wire, DecodeSplit_SameFieldsAsJoinedPayloadWhereItLies) {
  for (Kind k : kDataKinds) {
    const Bytes d = valid_datagram(k, 1499);
    const std::span<const uint8_t> header(d.data(), kDataHeaderSize);
    const std::span<const uint8_t> payload(d.data() + kDataHeaderSize, d.size() - kDataHeaderSize);
    Packet joined;
    Packet split;
    ASSERT_TRUE(decode(d, joined).ok()) << to_string(k);
    ASSERT_TRUE(decode_split(header, payload, split).ok()) << to_string(k);
    expect_same_fields(joined, split);
    EXPECT_EQ(split.payload.data(), payload.data());
    EXPECT_EQ(split.payload.size(), payload.size());
    EXPECT_FALSE(split.trimmed);
    Bytes bad(payload.begin(), payload.end());
    bad[7] ^= 1;
    if (distinctive_packet(k).common.flags & flag::kPayloadCrc) {
      EXPECT_EQ(decode_split(header, bad, split).error(), WireError::kBadPayloadCrc);
    }
  }
}

// Only a whole data header: a control kind, or a header cut short or with payload bytes
// attached, is kBadLength; an empty payload reads as trimmed, as a cut datagram does.
TEST(Wire, DecodeSplit_RefusesAnythingButADataHeader) {
  const Bytes d = valid_datagram(Kind::kWrite, 100);
  const std::span<const uint8_t> payload(d.data() + kDataHeaderSize, 100);
  Packet p;
  EXPECT_EQ(decode_split({d.data(), kDataHeaderSize - 1}, payload, p).error(),
            WireError::kBadLength);
  EXPECT_EQ(decode_split({d.data(), kDataHeaderSize + 1}, payload, p).error(),
            WireError::kBadLength);
  const Bytes ack = valid_datagram(Kind::kAck);
  EXPECT_EQ(decode_split({ack.data(), kDataHeaderSize}, {}, p).error(), WireError::kBadLength);
  EXPECT_EQ(decode_split({d.data(), 10}, payload, p).error(), WireError::kTooShort);
  ASSERT_TRUE(decode_split({d.data(), kDataHeaderSize}, {}, p).ok());
  EXPECT_TRUE(p.trimmed);
  EXPECT_EQ(decode_split({d.data(), kDataHeaderSize}, {d.data() + kDataHeaderSize, 101}, p)
                .error(),
            WireError::kBadLength);
}

// peek reads what a datagram says it is and whom it is for, before any check: the same kind
// and QP that decode gives for every valid datagram; for anything shorter than the 8 bytes it
// reads, nothing (kind 0, QP 0); for bytes decode refuses, whatever they say (a hint only).
TEST(Wire, Peek_GivesTheKindAndQpDecodeGivesAndNothingForShortDatagrams) {
  for (Kind kind : kAllKinds) {
    const Bytes b = valid_datagram(kind);
    const Peek k = peek(b);
    auto d = decode(b);
    ASSERT_TRUE(d.ok()) << to_string(kind);
    EXPECT_EQ(k.kind, d.value().common.kind) << to_string(kind);
    EXPECT_EQ(k.dst_qpn, d.value().common.dst_qpn) << to_string(kind);
  }
  Bytes b = valid_datagram(Kind::kWrite);
  for (size_t n = 0; n < 8; ++n) {
    const Peek k = peek(std::span<const uint8_t>(b.data(), n));
    EXPECT_EQ(k.kind, Kind{0}) << n;
    EXPECT_EQ(k.dst_qpn, 0u) << n;
  }
  const Peek k8 = peek(std::span<const uint8_t>(b.data(), 8));
  EXPECT_EQ(k8.kind, Kind::kWrite);
  EXPECT_EQ(k8.dst_qpn, 0x8A1B2C3Du);
  b[0] ^= 0xFF;  // a bad version: decode refuses it, peek still reads the bytes
  EXPECT_FALSE(decode(b).ok());
  EXPECT_EQ(peek(b).dst_qpn, 0x8A1B2C3Du);
}

}  // namespace
}  // namespace mrc::wire
