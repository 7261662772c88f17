// Encode and decode of the MRC headers declared in wire.h.
// Threading: pure functions, no state.
#include "mrc/wire/wire.h"

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstring>

#include "common/crc32c.h"

namespace mrc::wire {
namespace {

// ---- Big-endian images of the headers -------------------------------------------------
// A header is memcpy'd between the datagram and one of these structs (no
// unaligned pointer casts); every multi-byte field is a Be<T>.

template <typename T>
class Be {
 public:
  T get() const { return swap(raw_); }
  void set(T v) { raw_ = swap(v); }

 private:
  static T swap(T v) {
    if constexpr (std::endian::native == std::endian::big) {
      return v;
    } else if constexpr (sizeof(T) == 2) {
      return __builtin_bswap16(v);
    } else if constexpr (sizeof(T) == 4) {
      return __builtin_bswap32(v);
    } else {
      static_assert(sizeof(T) == 8);
      return __builtin_bswap64(v);
    }
  }
  T raw_;
};
using Be16 = Be<uint16_t>;
using Be32 = Be<uint32_t>;
using Be64 = Be<uint64_t>;

struct WireCommon {
  uint8_t version;
  uint8_t kind;
  uint8_t flags;
  uint8_t net_flags;
  Be32 dst_qpn;
  Be32 token;
  Be32 ev;
  Be32 psn;
  Be32 hdr_crc;
  Be64 ts;
};
static_assert(sizeof(WireCommon) == kCommonSize);
static_assert(offsetof(WireCommon, net_flags) == 3 && offsetof(WireCommon, dst_qpn) == 4 &&
              offsetof(WireCommon, psn) == 16 && offsetof(WireCommon, hdr_crc) == 20 &&
              offsetof(WireCommon, ts) == 24);

struct WireDataExt {
  Be64 addr;
  Be32 rkey;
  Be32 msn;
  Be32 offset;
  Be32 msg_len;
  Be32 imm;
  Be16 payload_len;
  Be16 ports_down;  // or xrc_srqn (DataHeader)
  Be32 payload_crc;
  Be32 src_qpn;
};
static_assert(sizeof(WireDataExt) == kDataExtSize);
static_assert(offsetof(WireDataExt, payload_len) == 28 && offsetof(WireDataExt, payload_crc) == 32);

struct WireAckExt {
  Be32 cum_psn;
  Be32 sack_base;
  Be32 echo_ev;
  Be32 echo_psn;
  Be64 echo_ts;
  Be32 ack_delay_ns;
  uint8_t ack_flags;
  uint8_t reserved;
  Be16 ports_down;
  Be64 sack[kSackBits / 64];
};
static_assert(sizeof(WireAckExt) == kAckExtSize);
static_assert(offsetof(WireAckExt, ack_flags) == 28 && offsetof(WireAckExt, ports_down) == 30 &&
              offsetof(WireAckExt, sack) == 32);
// An ACK trailer (wire.h) is a WireAckExt, then a Be32: CRC32C of it, seeded with the data
// header's hdr_crc.
static_assert(kAckTrailerSize == sizeof(WireAckExt) + 4);

struct WireNackExt {
  Be32 cum_psn;
  Be32 nack_psn;
  Be32 echo_ev;
  uint8_t reason;
  uint8_t rnr_timer;
  uint8_t reserved[2];
  Be64 echo_ts;
};
static_assert(sizeof(WireNackExt) == kNackExtSize);
static_assert(offsetof(WireNackExt, reason) == 12 && offsetof(WireNackExt, rnr_timer) == 13 &&
              offsetof(WireNackExt, echo_ts) == 16);

struct WireProbeReplyExt {
  Be32 echo_ev;
  uint8_t probe_flags;
  uint8_t svc_ns[3];  // big-endian, 24 bits
  Be64 echo_ts;
};
static_assert(sizeof(WireProbeReplyExt) == kProbeReplyExtSize);
static_assert(offsetof(WireProbeReplyExt, echo_ts) == 8);

struct WireAddrPlane {
  uint8_t addr[16];
  Be16 port;
  uint8_t reserved[2];
};
static_assert(sizeof(WireAddrPlane) == kAddrPlaneSize);

struct WireAddrQueryExt {
  Be32 target_qpn;
  Be32 src_qpn;
  uint8_t planes;
  uint8_t reserved[7];
};
static_assert(sizeof(WireAddrQueryExt) == kAddrQueryExtSize);
static_assert(offsetof(WireAddrQueryExt, planes) == 8);

struct WirePortStatusExt {
  Be32 target_qpn;
  Be32 src_qpn;
  Be32 ports_up;
  uint8_t reserved[4];
};
static_assert(sizeof(WirePortStatusExt) == kPortStatusExtSize);

struct WireAddrReplyExt {
  WireAddrQueryExt head;
  WireAddrPlane plane[kMaxAddrPlanes];
};
static_assert(sizeof(WireAddrReplyExt) == kAddrReplyExtSize);
static_assert(offsetof(WireAddrReplyExt, plane) == 16);

// Whole headers, the unit hdr_crc covers.
template <typename Ext>
struct WireHeader {
  WireCommon common;
  Ext ext;
};
struct WireProbe {
  WireCommon common;
};
using WireData = WireHeader<WireDataExt>;
using WireAck = WireHeader<WireAckExt>;
using WireNack = WireHeader<WireNackExt>;
using WireProbeReply = WireHeader<WireProbeReplyExt>;
using WireAddrQuery = WireHeader<WireAddrQueryExt>;
using WireAddrReply = WireHeader<WireAddrReplyExt>;
static_assert(sizeof(WireAddrQuery) == kCommonSize + kAddrQueryExtSize);
using WirePortStatus = WireHeader<WirePortStatusExt>;
static_assert(sizeof(WirePortStatus) == kCommonSize + kPortStatusExtSize);
static_assert(sizeof(WireAddrReply) == kAddrReplySize);
static_assert(sizeof(WireData) == kCommonSize + kDataExtSize);
static_assert(sizeof(WireAck) == kCommonSize + kAckExtSize && sizeof(WireAck) == kMaxHeaderSize);
static_assert(sizeof(WireNack) == kCommonSize + kNackExtSize);
static_assert(sizeof(WireProbe) == kCommonSize);
static_assert(sizeof(WireProbeReply) == kCommonSize + kProbeReplyExtSize);

constexpr uint8_t kTrimmedMask = net_flag::kTrimmed | net_flag::kTrimmedLastHop;

// ---- Encode ---------------------------------------------------------------------------

// The encoder writes every byte of the header image itself (no `h{}`: zeroing
// the struct first costs a `rep stos`); a field added to a Wire* struct must be
// set in encode_header (the known-answer tests and valgrind on wire_test see one that is not).

// Fills the common header with net_flags and hdr_crc zero, as the CRC takes them.
void put_common(const CommonHeader& c, WireCommon& w) {
  w.version = c.version;
  w.kind = static_cast<uint8_t>(c.kind);
  w.flags = c.flags;
  w.net_flags = 0;
  w.hdr_crc.set(0);
  w.dst_qpn.set(c.dst_qpn);
  w.token.set(c.token);
  w.ev.set(c.ev);
  w.psn.set(c.psn);
  w.ts.set(c.ts);
}

// Stores `h` (hdr_crc and net_flags zero) with its hdr_crc and the given net_flags.
// Both are patched in `out` after the copy: patching `h` first would make the
// copy's wide loads wait on narrow stores (a store-forwarding stall).
template <typename H>
size_t seal(const H& h, uint8_t net_flags, std::span<uint8_t> out) {
  Be32 hdr_crc;
  hdr_crc.set(crc32c(0, &h, sizeof h));
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + offsetof(WireCommon, hdr_crc), &hdr_crc, sizeof hdr_crc);
  out[offsetof(WireCommon, net_flags)] = net_flags;
  return sizeof h;
}

// ---- Decode ---------------------------------------------------------------------------

// Copies the header out of `bytes` (which holds at least sizeof(H)) and checks hdr_crc.
// net_flags (byte 3) and hdr_crc (bytes 20..23) are zeroed for the CRC by rewriting
// the 8-byte words that hold them: byte or 4-byte stores there would make the
// CRC's 8-byte loads miss store forwarding, a stall that costs as much as the CRC.
template <typename H>
bool load_checked(std::span<const uint8_t> bytes, H& h) {
  static_assert(offsetof(WireCommon, net_flags) < 8 && offsetof(WireCommon, hdr_crc) == 20);
  constexpr uint8_t kKeep0[8] = {0xFF, 0xFF, 0xFF, 0x00, 0xFF, 0xFF, 0xFF, 0xFF};   // bytes 0..7
  constexpr uint8_t kKeep16[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00};  // 16..23
  uint64_t word0;
  uint64_t word16;
  uint64_t keep0;
  uint64_t keep16;
  std::memcpy(&word0, bytes.data(), 8);
  std::memcpy(&word16, bytes.data() + 16, 8);
  std::memcpy(&keep0, kKeep0, 8);
  std::memcpy(&keep16, kKeep16, 8);
  auto* raw = reinterpret_cast<uint8_t*>(&h);
  std::memcpy(raw, bytes.data(), sizeof h);
  const uint64_t zeroed0 = word0 & keep0;
  const uint64_t zeroed16 = word16 & keep16;
  std::memcpy(raw, &zeroed0, 8);
  std::memcpy(raw + 16, &zeroed16, 8);
  const uint32_t crc = crc32c(0, raw, sizeof h);
  std::memcpy(raw, &word0, 8);
  std::memcpy(raw + 16, &word16, 8);
  return crc == h.common.hdr_crc.get();
}

void get_ext(const WireData& h, Packet& p) {
  DataHeader& d = p.data;
  d.addr = h.ext.addr.get();
  d.rkey = h.ext.rkey.get();
  d.msn = h.ext.msn.get();
  d.offset = h.ext.offset.get();
  d.msg_len = h.ext.msg_len.get();
  d.imm = h.ext.imm.get();
  d.payload_len = h.ext.payload_len.get();
  d.payload_crc = h.ext.payload_crc.get();
  d.src_qpn = h.ext.src_qpn.get();
  d.ports_down = h.ext.ports_down.get();
}

void get_ack(const WireAckExt& w, AckHeader& a) {
  a.cum_psn = w.cum_psn.get();
  a.sack_base = w.sack_base.get();
  a.echo_ev = w.echo_ev.get();
  a.echo_psn = w.echo_psn.get();
  a.echo_ts = w.echo_ts.get();
  a.ack_delay_ns = w.ack_delay_ns.get();
  a.ack_flags = w.ack_flags;
  a.ports_down = w.ports_down.get();
  for (size_t i = 0; i < a.sack.size(); ++i) a.sack[i] = w.sack[i].get();
}

void put_ack(const AckHeader& a, WireAckExt& w) {
  w.cum_psn.set(a.cum_psn);
  w.sack_base.set(a.sack_base);
  w.echo_ev.set(a.echo_ev);
  w.echo_psn.set(a.echo_psn);
  w.echo_ts.set(a.echo_ts);
  w.ack_delay_ns.set(a.ack_delay_ns);
  w.ack_flags = a.ack_flags;
  w.reserved = 0;
  w.ports_down.set(a.ports_down);
  for (size_t i = 0; i < a.sack.size(); ++i) w.sack[i].set(a.sack[i]);
}

void get_ext(const WireAck& h, Packet& p) { get_ack(h.ext, p.ack); }

void get_ext(const WireNack& h, Packet& p) {
  NackHeader& n = p.nack;
  n.cum_psn = h.ext.cum_psn.get();
  n.nack_psn = h.ext.nack_psn.get();
  n.echo_ev = h.ext.echo_ev.get();
  n.reason = static_cast<NackReason>(h.ext.reason);  // unknown codes pass: the engine decides
  n.rnr_timer = h.ext.rnr_timer;
  n.echo_ts = h.ext.echo_ts.get();
}

void get_ext(const WireProbe&, Packet&) {}

void get_ext(const WireProbeReply& h, Packet& p) {
  ProbeReplyHeader& r = p.probe_reply;
  r.echo_ev = h.ext.echo_ev.get();
  r.probe_flags = h.ext.probe_flags;
  r.svc_ns = uint32_t{h.ext.svc_ns[0]} << 16 | uint32_t{h.ext.svc_ns[1]} << 8 | h.ext.svc_ns[2];
  r.echo_ts = h.ext.echo_ts.get();
}

void get_addr_head(const WireAddrQueryExt& h, Packet& p) {
  p.addr.target_qpn = h.target_qpn.get();
  p.addr.src_qpn = h.src_qpn.get();
  p.addr.planes = h.planes;
}

void get_ext(const WireAddrQuery& h, Packet& p) { get_addr_head(h.ext, p); }

void get_ext(const WireAddrReply& h, Packet& p) {
  get_addr_head(h.ext.head, p);
  for (size_t i = 0; i < kMaxAddrPlanes; ++i) {
    std::memcpy(p.addr.plane[i].addr.data(), h.ext.plane[i].addr, 16);
    p.addr.plane[i].port = h.ext.plane[i].port.get();
  }
}

void get_ext(const WirePortStatus& h, Packet& p) {
  p.port_status.target_qpn = h.ext.target_qpn.get();
  p.port_status.src_qpn = h.ext.src_qpn.get();
  p.port_status.ports_up = h.ext.ports_up.get();
}

void put_addr_head(const AddrHeader& a, uint8_t planes, WireAddrQueryExt& w) {
  w.target_qpn.set(a.target_qpn);
  w.src_qpn.set(a.src_qpn);
  w.planes = planes;
  std::memset(w.reserved, 0, sizeof w.reserved);
}

// Fills `p` field by field (it may hold a previous packet: the engine reuses one).
template <typename H>
void make_packet(const H& h, std::span<const uint8_t> payload, bool trimmed, Packet& p) {
  const WireCommon& w = h.common;
  p.common.version = w.version;
  p.common.kind = static_cast<Kind>(w.kind);
  p.common.flags = w.flags;
  p.common.net_flags = w.net_flags;
  p.common.dst_qpn = w.dst_qpn.get();
  p.common.token = w.token.get();
  p.common.ev = w.ev.get();
  p.common.psn = w.psn.get();
  p.common.hdr_crc = w.hdr_crc.get();
  p.common.ts = w.ts.get();
  get_ext(h, p);
  p.payload = payload;
  p.trimmed = trimmed;
  p.has_ack = false;
}

// `header` holds (at least) the data header; `payload` is what follows it in the datagram, or
// lies apart (decode_split). Inlined into both callers: decode's data path pays no call and no
// test of which caller it has (perf/RESULTS.md 2026-11-27 (rxfix)).
[[gnu::always_inline]] inline Status<WireError> decode_data(std::span<const uint8_t> header,
                                                            std::span<const uint8_t> payload,
                                                            Packet& out) {
  WireData h;
  if (!load_checked(header, h)) return Err{WireError::kBadHeaderCrc};
  const size_t payload_len = h.ext.payload_len.get();
  if (payload_len > kMaxPayload) return Err{WireError::kPayloadTooLarge};
  // What follows the payload: nothing, or exactly an ACK trailer (a trimmed packet has
  // neither: the switch cut both).
  const bool trailer = payload.size() == payload_len + kAckTrailerSize;
  if (payload.size() > payload_len && !trailer) return Err{WireError::kBadLength};
  if (payload.size() < payload_len || (h.common.net_flags & kTrimmedMask) != 0) {
    make_packet(h, {}, /*trimmed=*/true, out);
    return {};
  }
  if (trailer) payload = payload.first(payload_len);
  if ((h.common.flags & flag::kPayloadCrc) != 0 &&
      crc32c(0, payload.data(), payload.size()) != h.ext.payload_crc.get()) {
    return Err{WireError::kBadPayloadCrc};
  }
  WireAckExt t;
  if (trailer) {
    const uint8_t* at = payload.data() + payload_len;
    Be32 crc;
    std::memcpy(&t, at, sizeof t);
    std::memcpy(&crc, at + sizeof t, sizeof crc);
    if (crc32c(h.common.hdr_crc.get(), at, sizeof t) != crc.get())
      return Err{WireError::kBadPayloadCrc};
  }
  make_packet(h, payload, /*trimmed=*/false, out);
  if (trailer) {
    get_ack(t, out.ack);
    out.has_ack = true;
  }
  return {};
}

template <typename H>
Status<WireError> decode_control(std::span<const uint8_t> bytes, Packet& out) {
  H h;
  if (!load_checked(bytes, h)) return Err{WireError::kBadHeaderCrc};
  if (bytes.size() != sizeof h) return Err{WireError::kBadLength};
  make_packet(h, {}, /*trimmed=*/false, out);
  return {};
}

}  // namespace

const char* to_string(Kind k) {
  switch (k) {
    case Kind::kWrite:
      return "WRITE";
    case Kind::kWriteImm:
      return "WRITE_IMM";
    case Kind::kSend:
      return "SEND";
    case Kind::kSendImm:
      return "SEND_IMM";
    case Kind::kReadReq:
      return "READ_REQ";
    case Kind::kReadResp:
      return "READ_RESP";
    case Kind::kCmpSwap:
      return "CMP_SWAP";
    case Kind::kFetchAdd:
      return "FETCH_ADD";
    case Kind::kUdSend:
      return "UD_SEND";
    case Kind::kAtomicWrite:
      return "ATOMIC_WRITE";
    case Kind::kAck:
      return "ACK";
    case Kind::kNack:
      return "NACK";
    case Kind::kProbe:
      return "PROBE";
    case Kind::kProbeReply:
      return "PROBE_REPLY";
    case Kind::kAddrQuery:
      return "ADDR_QUERY";
    case Kind::kAddrReply:
      return "ADDR_REPLY";
    case Kind::kPortStatus:
      return "PORT_STATUS";
    case Kind::kPortStatusAck:
      return "PORT_STATUS_ACK";
  }
  return "?";
}

const char* to_string(WireError e) {
  switch (e) {
    case WireError::kTooShort:
      return "too short";
    case WireError::kBadVersion:
      return "bad version";
    case WireError::kUnknownKind:
      return "unknown kind";
    case WireError::kBadLength:
      return "bad length";
    case WireError::kPayloadTooLarge:
      return "payload too large";
    case WireError::kBadHeaderCrc:
      return "bad header crc";
    case WireError::kBadPayloadCrc:
      return "bad payload crc (or ACK trailer crc)";
    case WireError::kBadField:
      return "field out of range";
  }
  return "unknown wire error";
}

size_t encode_header(const Packet& p, std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const CommonHeader& c = p.common;
  assert(c.version == kVersion);
  assert(header_size(c.kind) != 0 && out.size() >= header_size(c.kind));
  assert(is_data(c.kind) || payload.empty());

  if (is_data(c.kind)) {
    const DataHeader& d = p.data;
    assert(d.payload_len <= kMaxPayload && payload.size() == d.payload_len);
    WireData h;
    put_common(c, h.common);
    h.ext.addr.set(d.addr);
    h.ext.rkey.set(d.rkey);
    h.ext.msn.set(d.msn);
    h.ext.offset.set(d.offset);
    h.ext.msg_len.set(d.msg_len);
    h.ext.imm.set(d.imm);
    h.ext.payload_len.set(d.payload_len);
    h.ext.ports_down.set(d.ports_down);
    h.ext.payload_crc.set(
        (c.flags & flag::kPayloadCrc) != 0 ? crc32c(0, payload.data(), payload.size()) : 0);
    h.ext.src_qpn.set(d.src_qpn);
    return seal(h, c.net_flags, out);
  }

  switch (c.kind) {
    case Kind::kAck: {
      WireAck h;
      put_common(c, h.common);
      put_ack(p.ack, h.ext);
      return seal(h, c.net_flags, out);
    }
    case Kind::kNack: {
      const NackHeader& n = p.nack;
      WireNack h;
      put_common(c, h.common);
      h.ext.cum_psn.set(n.cum_psn);
      h.ext.nack_psn.set(n.nack_psn);
      h.ext.echo_ev.set(n.echo_ev);
      h.ext.reason = static_cast<uint8_t>(n.reason);
      h.ext.rnr_timer = n.rnr_timer;
      std::memset(h.ext.reserved, 0, sizeof h.ext.reserved);
      h.ext.echo_ts.set(n.echo_ts);
      return seal(h, c.net_flags, out);
    }
    case Kind::kProbe: {
      WireProbe h;
      put_common(c, h.common);
      return seal(h, c.net_flags, out);
    }
    case Kind::kProbeReply: {
      const ProbeReplyHeader& r = p.probe_reply;
      WireProbeReply h;
      put_common(c, h.common);
      h.ext.echo_ev.set(r.echo_ev);
      h.ext.probe_flags = r.probe_flags;
      const uint32_t svc = std::min<uint32_t>(r.svc_ns, kMaxProbeSvcNs);
      h.ext.svc_ns[0] = static_cast<uint8_t>(svc >> 16);
      h.ext.svc_ns[1] = static_cast<uint8_t>(svc >> 8);
      h.ext.svc_ns[2] = static_cast<uint8_t>(svc);
      h.ext.echo_ts.set(r.echo_ts);
      return seal(h, c.net_flags, out);
    }
    case Kind::kAddrQuery: {
      WireAddrQuery h;
      put_common(c, h.common);
      put_addr_head(p.addr, 0, h.ext);
      return seal(h, c.net_flags, out);
    }
    case Kind::kAddrReply: {
      const AddrHeader& a = p.addr;
      assert(a.planes <= kMaxAddrPlanes);
      WireAddrReply h;
      put_common(c, h.common);
      put_addr_head(a, a.planes, h.ext.head);
      for (size_t i = 0; i < kMaxAddrPlanes; ++i) {  // entries past `planes` are zero
        WireAddrPlane& w = h.ext.plane[i];
        const bool used = i < a.planes;
        if (used)
          std::memcpy(w.addr, a.plane[i].addr.data(), 16);
        else
          std::memset(w.addr, 0, 16);
        w.port.set(used ? a.plane[i].port : 0);
        std::memset(w.reserved, 0, sizeof w.reserved);
      }
      return seal(h, c.net_flags, out);
    }
    case Kind::kPortStatus:
    case Kind::kPortStatusAck: {
      WirePortStatus h;
      put_common(c, h.common);
      h.ext.target_qpn.set(p.port_status.target_qpn);
      h.ext.src_qpn.set(p.port_status.src_qpn);
      h.ext.ports_up.set(p.port_status.ports_up);
      std::memset(h.ext.reserved, 0, sizeof h.ext.reserved);
      return seal(h, c.net_flags, out);
    }
    default:
      break;
  }
  assert(false && "encode_header: unknown kind");
  return 0;
}

size_t encode_ack_trailer(const Packet& p, std::span<const uint8_t> header, std::span<uint8_t> out) {
  assert(header.size() >= kDataHeaderSize && is_data(static_cast<Kind>(header[1])));
  assert(out.size() >= kAckTrailerSize);
  WireCommon c;
  std::memcpy(&c, header.data(), sizeof c);
  WireAckExt t;
  put_ack(p.ack, t);
  Be32 crc;
  crc.set(crc32c(c.hdr_crc.get(), &t, sizeof t));
  std::memcpy(out.data(), &t, sizeof t);
  std::memcpy(out.data() + sizeof t, &crc, sizeof crc);
  return kAckTrailerSize;
}

Status<WireError> decode_split(std::span<const uint8_t> header, std::span<const uint8_t> payload,
                               Packet& out) {
  if (header.size() < kCommonSize) return Err{WireError::kTooShort};
  if (header[0] != kVersion) return Err{WireError::kBadVersion};
  const Kind kind = static_cast<Kind>(header[1]);
  if (header_size(kind) == 0) return Err{WireError::kUnknownKind};
  if (!is_data(kind) || header.size() != kDataHeaderSize) return Err{WireError::kBadLength};
  return decode_data(header, payload, out);
}

Status<WireError> decode(std::span<const uint8_t> bytes, Packet& out) {
  if (bytes.size() < kCommonSize) return Err{WireError::kTooShort};
  if (bytes[0] != kVersion) return Err{WireError::kBadVersion};
  const Kind kind = static_cast<Kind>(bytes[1]);
  const size_t hsize = header_size(kind);
  if (hsize == 0) return Err{WireError::kUnknownKind};
  if (bytes.size() < hsize) return Err{WireError::kTooShort};

  if (is_data(kind)) return decode_data(bytes, bytes.subspan(kDataHeaderSize), out);
  switch (kind) {
    case Kind::kAck:
      return decode_control<WireAck>(bytes, out);
    case Kind::kNack:
      return decode_control<WireNack>(bytes, out);
    case Kind::kProbe:
      return decode_control<WireProbe>(bytes, out);
    case Kind::kProbeReply:
      return decode_control<WireProbeReply>(bytes, out);
    case Kind::kAddrQuery: {
      if (auto s = decode_control<WireAddrQuery>(bytes, out); !s) return s;
      return out.addr.planes == 0 ? Status<WireError>{} : Err{WireError::kBadField};
    }
    case Kind::kAddrReply: {
      if (auto s = decode_control<WireAddrReply>(bytes, out); !s) return s;
      return out.addr.planes <= kMaxAddrPlanes ? Status<WireError>{} : Err{WireError::kBadField};
    }
    case Kind::kPortStatus:
    case Kind::kPortStatusAck:
      return decode_control<WirePortStatus>(bytes, out);
    default:
      return Err{WireError::kUnknownKind};  // unreachable: header_size knows every kind
  }
}

Result<Packet, WireError> decode(std::span<const uint8_t> bytes) {
  Packet p;
  const Status<WireError> s = decode(bytes, p);
  if (!s) return Err{s.error()};
  return p;
}

}  // namespace mrc::wire
