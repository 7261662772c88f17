// The MRC wire format: every header on the wire, its size, and the one decoder.
// Threading: pure functions, no state.
//
// Every datagram is UDP/IPv6 (port configurable, 4791 by default) carrying
//
//   CommonHeader (32 B) | kind extension | payload (data packets only)
//
// All fields are big-endian. docs/wire-format.md draws each header. The
// structs below are host-order views; the byte images (with `static_assert`s
// on every size and offset) are private to wire.cc, and encode_header and
// decode are the only ways in and out.
//
// Integrity: `hdr_crc` is CRC32C over the whole header (common + extension)
// with `hdr_crc` and `net_flags` taken as zero, so a switch may set
// `net_flags` (it trims a packet and marks it) without breaking the header.
// The payload has its own CRC32C (`payload_crc`, valid when flag
// kPayloadCrc is set) because the transport may run with UDP checksums off
// so that switches can trim.
//
// An ACK may ride on a data packet going the other way: the ACK's extension and its own
// CRC32C follow the payload as a trailer (kAckTrailerSize bytes; the datagram is then
// kDataHeaderSize + payload_len + kAckTrailerSize long, which is how the receiver knows).
// A switch that trims the packet cuts the trailer with the payload: the ACK is lost, as
// a dropped ACK is. A sender attaches trailers only to a peer whose ACKs carry
// ack_flag::kRides (it reads them); a peer without this never gets one.
//
// Trimming: a switch cuts a data packet to its header. The receiver
// recognises it from what is left: the payload is shorter than
// `payload_len`, and/or net_flags has kTrimmed. Decode reports
// `Packet::trimmed` and an empty payload; a trimmed packet is a congestion
// signal (the receiver NACKs it), never data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "mrc/common/result.h"

namespace mrc::wire {

inline constexpr uint8_t kVersion = 1;
inline constexpr uint16_t kDefaultUdpPort = 4791;
/// Largest payload one data packet carries (as in IB, the MTU counts payload). IB stops at
/// 4096; MRC in software also carries 8192, which a 9000-byte (jumbo) link holds with the
/// 120 bytes of IPv6, UDP and data header (io/udp: the driver picks it from the links).
inline constexpr uint32_t kMaxPayload = 8192;
/// PSNs covered by one SACK bitmap.
inline constexpr uint32_t kSackBits = 256;

enum class Kind : uint8_t {
  kWrite = 1,         // RDMA WRITE: place at (rkey, addr + offset)
  kWriteImm = 2,      // WRITE with immediate: as kWrite, consumes a receive on the last packet
  kSend = 3,          // SEND: place in receive #msn at offset
  kSendImm = 4,       // SEND with immediate
  kReadReq = 5,       // READ request: responder reads (rkey, addr, msg_len) and sends kReadResp
  kReadResp = 6,      // READ response data: placed at offset of the requester's READ #msn;
                      // also an atomic's response (8 bytes: the original value, big-endian)
  kCmpSwap = 7,       // atomic compare-and-swap request: payload compare | swap (kAtomicReqLen);
                      // the responder answers with a kReadResp of kAtomicLen bytes
  kFetchAdd = 8,      // atomic fetch-and-add request: payload add | 0 (kAtomicReqLen); as kCmpSwap
  kUdSend = 9,        // UD datagram (verbs UD QPs, not in MRC 1.0): one unreliable, unacknowledged
                      // message to dst_qpn, token = the receiver's Q_Key, payload = the 40-byte
                      // GRH the receiver finds before the data (kUdGrhLen) | the data
  kAtomicWrite = 10,  // atomic write (verbs IBV_WR_ATOMIC_WRITE, not in MRC 1.0): one packet,
                      // payload the 8 bytes stored at the 8-byte aligned (rkey, addr) at once
  kAck = 16,          // cumulative ACK + SACK bitmap, echoes one data packet's EV and timestamp
  kNack = 17,         // negative ACK of one PSN with a reason
  kProbe = 32,        // path probe on one EV
  kProbeReply = 33,
  kAddrQuery = 34,      // connectionless: "what are your plane addresses?" (bound to a QP's token)
  kAddrReply = 35,      // its answer: the peer's address and port per plane
  kPortStatus = 36,     // connectionless: "these of my ports are up, the rest down" (OCP
                        // PORT_STATUS_UPDATE; bound to a QP's token as kAddrQuery)
  kPortStatusAck = 37,  // its acknowledgement
};

/// The kind's name as docs/wire-format.md writes it ("WRITE_IMM", "PROBE_REPLY"); "?" for a
/// byte that names no kind.
const char* to_string(Kind k);

/// True for the kinds that carry a DataHeader (UD_SEND too: it is not a QP's reliable data).
constexpr bool is_data(Kind k) { return k >= Kind::kWrite && k <= Kind::kAtomicWrite; }
/// True for the atomic requests (not in MRC 1.0: the verbs device's own addition).
constexpr bool is_atomic(Kind k) { return k == Kind::kCmpSwap || k == Kind::kFetchAdd; }
/// An atomic request's payload (two big-endian 64-bit operands: compare or add, then swap)
/// and msg_len; its response's payload and msg_len (the 64-bit value before the operation).
inline constexpr uint32_t kAtomicReqLen = 16;
inline constexpr uint32_t kAtomicLen = 8;
/// A UD_SEND's payload starts with the GRH verbs puts before a UD message in the receive
/// buffer (IBA 11.4.1.2: 40 bytes, an IPv6 header's layout for RoCE v2), built by the sender.
inline constexpr uint32_t kUdGrhLen = 40;

/// CommonHeader::flags, set by the sender and covered by hdr_crc.
namespace flag {
inline constexpr uint8_t kFirst = 0x01;       // first packet of a message
inline constexpr uint8_t kLast = 0x02;        // last packet of a message
inline constexpr uint8_t kAckReq = 0x04;      // receiver should ACK at once
inline constexpr uint8_t kPayloadCrc = 0x08;  // DataHeader::payload_crc is valid
inline constexpr uint8_t kRetransmit = 0x10;  // a retransmission (diagnostics only)
inline constexpr uint8_t kSolicited = 0x20;   // solicited event (verbs IBV_SEND_SOLICITED)
inline constexpr uint8_t kImm = 0x40;         // UD_SEND: DataHeader::imm is valid (with immediate)
inline constexpr uint8_t kInvalidate = 0x80;  // SEND: invalidate window `rkey` (verbs
                                              // SEND_WITH_INV) when the receive completes
}  // namespace flag

/// CommonHeader::net_flags, set by switches; not covered by hdr_crc.
namespace net_flag {
inline constexpr uint8_t kTrimmed = 0x01;
inline constexpr uint8_t kTrimmedLastHop = 0x02;
}  // namespace net_flag

/// AckHeader::ack_flags.
namespace ack_flag {
inline constexpr uint8_t kEcnEcho = 0x01;  // a packet first acked here arrived with ECN CE
inline constexpr uint8_t kRides = 0x02;    // the ACK's sender reads ACKs riding on data
                                           // (trailers); older peers send 0 and get none
}

/// NACK reason codes. 0x01..0x0B follow UET as MRC uses them; 0x20.. are ours (RC errors).
enum class NackReason : uint8_t {
  kTrimmed = 0x01,
  kTrimmedLastHop = 0x02,
  kNoBitmap = 0x06,
  kNoPktBuffer = 0x07,
  kNoResource = 0x0A,      // no receive posted / responder resources full (RNR)
  kPsnOutOfWindow = 0x0B,  // PSN beyond the receive window
  kRemoteAccess = 0x20,    // rkey, bounds or access flags refused: requester gets REM_ACCESS_ERR
  kRemoteInvalid = 0x21,   // request the responder cannot do (message longer than the receive)
  kRemoteOperation = 0x22, // responder QP in error
};

// ---- Host-order views of the headers -------------------------------------------------

struct CommonHeader {
  uint8_t version = kVersion;
  Kind kind = Kind::kWrite;
  uint8_t flags = 0;      // flag::*
  uint8_t net_flags = 0;  // net_flag::*
  uint32_t dst_qpn = 0;   // QP at the receiver (0: connectionless probe)
  uint32_t token = 0;     // per-connection token the receiver checks
  uint32_t ev = 0;        // entropy value (path) this packet was sent on
  uint32_t psn = 0;       // data: packet sequence number; probe: probe sequence
  uint32_t hdr_crc = 0;   // filled by encode
  uint64_t ts = 0;        // sender's clock at send, ns; echoed for RTT
};

struct DataHeader {
  uint64_t addr = 0;         // WRITE/READ_REQ/atomics: remote VA of the message start; else 0
  uint32_t rkey = 0;         // WRITE/READ_REQ/atomics: remote key
  uint32_t msn = 0;          // SEND/WRITE_IMM: receive sequence number; READ, atomics: read
                             // number (one sequence for both, as IB's read/atomic credits)
  uint32_t offset = 0;       // byte offset of this packet's payload in the message
  uint32_t msg_len = 0;      // total message length in bytes
  uint32_t imm = 0;          // immediate data (WRITE_IMM, SEND_IMM)
  uint16_t payload_len = 0;  // payload bytes this packet carried when sent (before any trim)
  uint32_t payload_crc = 0;  // CRC32C of the payload, when flag::kPayloadCrc
  uint32_t src_qpn = 0;      // sender's QPN (diagnostics, probe replies)
  // One field, two meanings, told apart by the receiving QP (docs/wire-format.md): on data to
  // an XRC target QP (verbs XRC INI -> TGT, not in MRC 1.0) the responder's XRC SRQ that the
  // message's receive comes from and whose protection domain its memory is checked in; on
  // any other data, as AckHeader::ports_down, of the data's sender (0 for UD). An XRC
  // initiator's data carries no ports_down (its ACKs from the target do).
  union {
    uint16_t ports_down = 0;
    uint16_t xrc_srqn;
  };
};

struct AckHeader {
  uint32_t cum_psn = 0;       // every PSN before this one has been received
  uint32_t sack_base = 0;     // PSN of bit 0 of `sack`
  uint32_t echo_ev = 0;       // EV of the data packet that triggered this ACK
  uint32_t echo_psn = 0;      // its PSN
  uint64_t echo_ts = 0;       // its CommonHeader::ts
  uint32_t ack_delay_ns = 0;  // time the receiver held it before acking
  uint8_t ack_flags = 0;      // ack_flag::*
  // Bit p: the ACK's sender has no link on its plane port p (its driver said so,
  // Engine::set_port_up): nothing sent to it on plane p can arrive. 0 from older senders.
  // Data packets carry the same word (DataHeader::ports_down).
  uint16_t ports_down = 0;
  std::array<uint64_t, kSackBits / 64> sack{};  // bit i of word i/64: PSN sack_base + i received
};

struct NackHeader {
  uint32_t cum_psn = 0;   // as in AckHeader
  uint32_t nack_psn = 0;  // the PSN refused
  uint32_t echo_ev = 0;   // EV the refused packet came on
  NackReason reason = NackReason::kTrimmed;
  // kNoResource: kRnrTimerStated | the responder's min_rnr_timer (IB's 5-bit RNR NAK timer
  // code, 0..31: how long the requester waits before resending). 0: not stated (other
  // reasons, older senders). Decode passes the byte through; the engine reads it.
  uint8_t rnr_timer = 0;
  uint64_t echo_ts = 0;
};

/// NackHeader::rnr_timer: the low 5 bits hold a timer code.
inline constexpr uint8_t kRnrTimerStated = 0x80;

/// A PROBE_REPLY's svc_ns field is 24 bits: longer service times are sent as this.
inline constexpr uint32_t kMaxProbeSvcNs = (1u << 24) - 1;

struct ProbeReplyHeader {
  uint32_t echo_ev = 0;
  uint8_t probe_flags = 0;  // ack_flag::kEcnEcho when the probe arrived CE-marked
  uint64_t echo_ts = 0;
  // The answerer's service time, ns: from reading the probe to sending the answer, by its
  // clock (at most kMaxProbeSvcNs); 0 = not reported (peers before this field sent 0). On the
  // wire before echo_ts (docs/wire-format.md).
  uint32_t svc_ns = 0;
};

/// Planes an ADDR_REPLY can list: engine::kMaxPlanes (engine.cc checks they agree).
inline constexpr size_t kMaxAddrPlanes = 16;

/// ADDR_QUERY and ADDR_REPLY (dst_qpn 0, io/udp/peer_addresses.h): the query names the
/// peer's QP it is bound to (common.token = that QP's token, as data packets to it carry);
/// the reply lists the answering host's plane addresses.
struct AddrHeader {
  uint32_t target_qpn = 0;  // query: the answering host's QP; reply: the asking QP
  uint32_t src_qpn = 0;     // the sending QP
  struct Plane {
    std::array<uint8_t, 16> addr{};  // IPv6, or IPv4-mapped IPv6 (::ffff:a.b.c.d)
    uint16_t port = 0;               // UDP port the plane listens on
  };
  uint8_t planes = 0;  // reply: entries of `plane` in use (0..kMaxAddrPlanes); query: 0
  std::array<Plane, kMaxAddrPlanes> plane{};
};

/// PORT_STATUS and PORT_STATUS_ACK (dst_qpn 0, io/udp/port_status.h): the update is bound to
/// one QP pair as an ADDR_QUERY is (common.token = the token the peer's QP expects); the ack
/// echoes it with the token the updating QP expects.
struct PortStatusHeader {
  uint32_t target_qpn = 0;  // update: the receiving host's QP; ack: the updating QP
  uint32_t src_qpn = 0;     // the sending QP
  uint32_t ports_up = 0;    // bit p: the updating host's plane p (OCP port p + 1) is up
};

/// A decoded packet. Only the extension matching common.kind is meaningful.
struct Packet {
  CommonHeader common;
  DataHeader data;
  AckHeader ack;
  NackHeader nack;
  ProbeReplyHeader probe_reply;
  AddrHeader addr;                   // kAddrQuery, kAddrReply
  PortStatusHeader port_status;      // kPortStatus, kPortStatusAck
  std::span<const uint8_t> payload;  // data packets: the payload (empty when trimmed)
  bool trimmed = false;              // data packet cut by a switch
  bool has_ack = false;              // data packet with an ACK trailer: `ack` holds it
};

// ---- Sizes ----------------------------------------------------------------------------

inline constexpr size_t kCommonSize = 32;
inline constexpr size_t kDataExtSize = 40;
inline constexpr size_t kAckExtSize = 64;
inline constexpr size_t kNackExtSize = 24;
inline constexpr size_t kProbeReplyExtSize = 16;
inline constexpr size_t kAddrQueryExtSize = 16;
inline constexpr size_t kAddrPlaneSize = 20;  // address 16, port 2, reserved 2
inline constexpr size_t kAddrReplyExtSize = 16 + kMaxAddrPlanes * kAddrPlaneSize;
inline constexpr size_t kPortStatusExtSize = 16;
/// An ACK riding on a data packet: the ACK extension, then CRC32C of it seeded with the
/// data header's hdr_crc (a trailer is bound to its packet), after the payload.
inline constexpr size_t kAckTrailerSize = kAckExtSize + 4;
/// Largest header of the QP kinds (data, ACK, NACK, probes): what the engine builds. The
/// connectionless ADDR_REPLY is larger (kAddrReplySize); only the driver sends it.
inline constexpr size_t kMaxHeaderSize = kCommonSize + kAckExtSize;
inline constexpr size_t kAddrReplySize = kCommonSize + kAddrReplyExtSize;

/// Header bytes (common + extension) of a packet of kind k; 0 for an unknown kind.
constexpr size_t header_size(Kind k) {
  if (is_data(k)) return kCommonSize + kDataExtSize;
  switch (k) {
    case Kind::kAck: return kCommonSize + kAckExtSize;
    case Kind::kNack: return kCommonSize + kNackExtSize;
    case Kind::kProbe: return kCommonSize;
    case Kind::kProbeReply: return kCommonSize + kProbeReplyExtSize;
    case Kind::kAddrQuery: return kCommonSize + kAddrQueryExtSize;
    case Kind::kAddrReply: return kAddrReplySize;
    case Kind::kPortStatus:
      return kCommonSize + kPortStatusExtSize;
    case Kind::kPortStatusAck:
      return kCommonSize + kPortStatusExtSize;
    default: return 0;
  }
}
inline constexpr size_t kDataHeaderSize = kCommonSize + kDataExtSize;

// ---- Encode / decode -----------------------------------------------------------------

/// The kind and destination QP a datagram names, read from its first 8 bytes before any check
/// (both 0 when it is shorter): for hints only (the engine asks the CPU for that QP's state
/// while it decodes), never trusted: decode checks the datagram, the engine its QP.
struct Peek {
  Kind kind = Kind{0};
  uint32_t dst_qpn = 0;
};
inline Peek peek(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) return {};
  return {static_cast<Kind>(bytes[1]), uint32_t{bytes[4]} << 24 | uint32_t{bytes[5]} << 16 |
                                           uint32_t{bytes[6]} << 8 | bytes[7]};
}

enum class WireError : uint8_t {
  kTooShort = 1,     // fewer bytes than the common header or the kind's header
  kBadVersion,       // version is not kVersion
  kUnknownKind,      // kind byte names no packet kind
  kBadLength,        // control packet with trailing bytes, or payload longer than payload_len
  kPayloadTooLarge,  // payload_len above kMaxPayload
  kBadHeaderCrc,     // hdr_crc does not match
  kBadPayloadCrc,    // payload_crc does not match (untrimmed packet), or an ACK trailer's CRC
  kBadField,         // a field out of its range (ADDR_REPLY: more planes than it holds)
};
const char* to_string(WireError e);

/// Writes `p`'s header (common + the extension of p.common.kind) into `out`, which
/// must hold header_size(kind) bytes. For data packets, `payload` is the payload
/// that will follow; its length must equal p.data.payload_len, and when
/// flag::kPayloadCrc is set its CRC goes in the header. Returns the header length.
size_t encode_header(const Packet& p, std::span<const uint8_t> payload, std::span<uint8_t> out);

/// Writes p.ack as the trailer of the data packet whose encoded header is `header` (what
/// encode_header wrote); `out` must hold kAckTrailerSize bytes and is placed right after the
/// payload. Returns kAckTrailerSize.
size_t encode_ack_trailer(const Packet& p, std::span<const uint8_t> header, std::span<uint8_t> out);

/// Parses one datagram into `out`. Never trusts the input: every malformed
/// datagram gets a WireError, never a crash or an out-of-bounds read. On
/// success out.common, the extension of its kind, payload and trimmed are set
/// (the other extensions keep what they held: the engine reuses one Packet);
/// the payload span points into `bytes`. On error `out` is unspecified.
Status<WireError> decode(std::span<const uint8_t> bytes, Packet& out);
/// The same for a data packet whose header and payload lie apart (the UDP driver's receive
/// placement: the kernel scattered one datagram into a header buffer and the payload's place
/// in registered memory). `header` must be exactly kDataHeaderSize bytes of a data kind, else
/// kBadLength; out.payload is `payload`. Checks as decode does for header + payload joined.
Status<WireError> decode_split(std::span<const uint8_t> header, std::span<const uint8_t> payload,
                               Packet& out);
/// The same into a fresh Packet (tests, tools).
Result<Packet, WireError> decode(std::span<const uint8_t> bytes);

}  // namespace mrc::wire
