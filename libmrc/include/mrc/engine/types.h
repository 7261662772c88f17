// Engine vocabulary: time, ids, work requests, completions, events, errors.
// Threading: plain value types.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>

namespace mrc::engine {

/// A point in time: nanoseconds since an epoch the driver picks (virtual time
/// in the simulator, CLOCK_MONOTONIC under the UDP driver).
using Time = std::chrono::nanoseconds;
using Duration = std::chrono::nanoseconds;
inline constexpr Time kNever = Time::max();

using Qpn = uint32_t;     // queue pair number, > 0; unique per engine
using CqId = uint32_t;    // completion queue handle
using PeerId = uint32_t;  // the driver's handle for a remote host; opaque to the engine

/// Errors returned by engine calls (not completions: those carry WcStatus).
enum class Error : uint8_t {
  kInvalidArgument = 1,  // a field out of range (MTU, PSN, sizes, zero paths...)
  kNoSuchQp,
  kNoSuchCq,
  kNoSuchMr,
  kBadState,       // operation not allowed in the QP's current state / transition not allowed
  kQueueFull,      // send or receive queue at its max_*_wr
  kTooLarge,       // message above kMaxMessage or inline above kMaxInline
  kResourceLimit,  // engine-wide cap reached (QPs, CQs, MRs)
  kLocalAccess,    // SGE not covered by a local MR with the needed access
  kNotSupported,
  kWimmLimit,  // max_wimm WRITE_WITH_IMMs already in flight (OCP MRC QPs)
};
const char* to_string(Error e);

inline constexpr uint64_t kMaxMessage = 1ull << 30;  // 1 GiB
inline constexpr uint32_t kMaxSge = 16;
inline constexpr uint32_t kMaxInline = 256;

/// Access flags, same values as IBV_ACCESS_*.
namespace access {
inline constexpr uint32_t kLocalWrite = 1;
inline constexpr uint32_t kRemoteWrite = 2;
inline constexpr uint32_t kRemoteRead = 4;
inline constexpr uint32_t kRemoteAtomic = 8;
}  // namespace access

/// QP states, in the order of the normal path (verbs/OCP names).
enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kSqd, kError };
const char* to_string(QpState s);
/// RTS or SQD: the states in which a QP's requester side is live (it sends, retransmits and
/// completes what was posted; SQD only stops new posts).
constexpr bool sends_in(QpState s) { return s == QpState::kRts || s == QpState::kSqd; }
/// RTR, RTS or SQD: the QP is connected to its peer; its responder side is live (it takes data
/// and answers with ACKs), and the driver counts it toward that peer.
constexpr bool connected_in(QpState s) { return s == QpState::kRtr || sends_in(s); }
/// RTS, SQD or ERROR: a send work request is taken (in ERROR it completes flushed).
constexpr bool takes_sends_in(QpState s) { return sends_in(s) || s == QpState::kError; }
/// INIT, RTR, RTS or SQD: a modify that leaves the state as it is may change attributes (RESET
/// has nothing to change; ERROR only leaves).
constexpr bool configurable_in(QpState s) { return s != QpState::kReset && s != QpState::kError; }

/// Planes a host has at most: a Path's plane is < kMaxPlanes, and plane sets travel as 16-bit
/// masks (Engine::drained_planes). The owner of the limit: wire::kMaxAddrPlanes, the
/// statistics segment and srv6::kMaxPlanes are checked against it.
inline constexpr uint16_t kMaxPlanes = 16;

/// One entropy value of a QP: the driver maps (peer, ev) to a destination
/// (an SRv6 uSID address, or a UDP source port + flow label) and sends it out
/// of the local port of `plane`.
struct Path {
  uint32_t ev = 0;
  uint16_t plane = 0;
};

/// kCmpSwap, kFetchAdd: 64-bit atomics on an 8-byte aligned remote address; the one local
/// SGE (8 bytes) receives the value before the operation. Not in MRC 1.0 (wire.h kCmpSwap).
// kAtomicWrite: verbs' atomic write, 8 bytes (one Sge, or inline) stored at the 8-byte aligned
// remote_addr with one 64-bit store (wire kAtomicWrite); the responder needs remote write.
enum class Opcode : uint8_t {
  kWrite,
  kWriteImm,
  kSend,
  kSendImm,
  kRead,
  kCmpSwap,
  kFetchAdd,
  kAtomicWrite
};
constexpr bool is_atomic(Opcode op) { return op == Opcode::kCmpSwap || op == Opcode::kFetchAdd; }
/// READ and the atomics: requests the peer answers with READ_RESP in its own PSN space.
constexpr bool is_read_like(Opcode op) { return op == Opcode::kRead || is_atomic(op); }

struct Sge {
  uint64_t addr = 0;  // local VA (in the MR's iova space)
  uint32_t length = 0;
  uint32_t lkey = 0;
};

/// Where a UD QP's SEND goes (SendWr::ud): verbs' address handle plus the WR's remote QPN and
/// Q_Key. UD is unreliable: one datagram, no ACK, no retransmission (wire.h kUdSend).
/// The destination QPN of a UD datagram to a multicast group (verbs: 0xFFFFFF): the receiving
/// engine gives it to every UD QP attached to the group its GRH's dgid names
/// (Engine::attach_mcast).
inline constexpr uint32_t kMulticastQpn = 0xFFFFFF;

/// A multicast group's GID (the IPv6 multicast address, or an IPv4 one IPv4-mapped).
using McastGid = std::array<uint8_t, 16>;

struct UdDest {
  PeerId peer = 0;
  Path path;                      // the EV and plane this datagram goes out on
  Qpn qpn = 0;                    // the remote UD QP
  uint32_t qkey = 0;              // the remote QP's Q_Key (it drops a datagram with another)
  uint8_t traffic_class = 0;      // as QpAttr::traffic_class
  std::array<uint8_t, 40> grh{};  // wire::kUdGrhLen: what the receiver finds before the data
};

struct SendWr {
  uint64_t wr_id = 0;
  Opcode opcode = Opcode::kWrite;
  std::span<const Sge> sg;   // gather list (scatter list for kRead), at most kMaxSge
  uint64_t remote_addr = 0;  // WRITE/READ/atomics: remote VA (atomics: 8-byte aligned)
  uint32_t rkey = 0;         // WRITE/READ/atomics: remote key
  uint64_t compare_add = 0;  // kCmpSwap: the value compared; kFetchAdd: the value added
  uint64_t swap = 0;         // kCmpSwap: written when the compare matches
  uint32_t imm = 0;          // WRITE_IMM/SEND_IMM: immediate data (host order)
  bool signaled = true;      // completion on success (errors always complete)
  bool solicited = false;
  bool inline_data = false;  // copy the payload at post time (<= kMaxInline); lkeys not checked
  bool fence = false;        // verbs IBV_SEND_FENCE: starts only once every READ posted
                             // before it on the QP has completed
  const UdDest* ud = nullptr;  // UD QPs (QpInit::ud): the destination of this SEND; else null
  // UD to a multicast group (ud->qpn kMulticastQpn): one datagram to each of these (the
  // group's member processes, each with its own peer and path) instead of to ud's peer; the
  // WR takes one send-queue slot and completes once, after the last. Empty: ud alone.
  std::span<const UdDest> ud_fan;
  // SEND (verbs SEND_WITH_INV): the peer invalidates its memory window `rkey` when the
  // receive completes (wire flag::kInvalidate).
  bool invalidate = false;
  // XRC initiator QPs (verbs IBV_QPT_XRC_SEND): the peer's XRC SRQ (Engine::create_srq with
  // an XRC domain) the message's receive comes from, and in whose PD the peer checks its
  // memory (every opcode); 1..65535 (the wire carries 16 bits). 0: not XRC.
  uint32_t xrc_srqn = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg;  // scatter list, at most kMaxSge
};

/// Completion status, one to one with ibv_wc_status values we produce.
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kTmErr = 22,             // a tag-matching SRQ operation failed (Engine::post_srq_op: no such tag)
  kTmRndvIncomplete = 23,  // a matched rendezvous the receiver could not READ (too long)
};
const char* to_string(WcStatus s);

/// kBindMw, kLocalInv: a memory window bound or invalidated (Engine::post_local).
enum class WcOpcode : uint8_t {
  kSend,
  kWrite,
  kRead,
  kRecv,
  kRecvWriteImm,
  kCmpSwap,
  kFetchAdd,
  kBindMw,
  kLocalInv,
  kAtomicWrite,
  // Tag-matching SRQs (Engine::create_tm_srq): a tag list operation done (post_srq_op), a
  // message matched or unexpected (kTmRecv), a message whose header says NO_TAG (kTmNoTag).
  kTmAdd,
  kTmDel,
  kTmSync,
  kTmRecv,
  kTmNoTag
};

/// Completion::tm_flags (verbs IBV_WC_TM_SYNC_REQ, IBV_WC_TM_MATCH, IBV_WC_TM_DATA_VALID).
namespace tm_flag {
inline constexpr uint8_t kSyncReq = 1;    // the SRQ is out of sync: report the unexpected count
inline constexpr uint8_t kMatch = 2;      // the message matched a tag: `tag`, `tm_priv` valid
inline constexpr uint8_t kDataValid = 4;  // the tag's buffer holds the data (byte_len bytes)
}  // namespace tm_flag

struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  bool has_imm = false;
  bool solicited = false;
  Qpn qpn = 0;
  uint32_t byte_len = 0;  // receives: bytes placed; READ: bytes read; atomics: 8
  uint32_t imm = 0;       // host order, when has_imm
  Qpn src_qpn = 0;        // UD receives: the sending QP (their buffer starts with its GRH)
  bool has_inv = false;   // a SEND_WITH_INV's receive: `imm` is the window key it invalidated
  uint8_t tm_flags = 0;   // tag matching (tm_flag::*)
  uint32_t tm_priv = 0;   // tm_flag::kMatch: the message header's app context (host order)
  uint64_t tag = 0;       // tm_flag::kMatch: the message's tag
};

enum class EventType : uint8_t {
  kQpFatal,     // QP went to ERROR (retry exhausted, remote error); all WRs flushed
  kCqOverflow,  // a completion was lost because the CQ was full
  kEvState,     // an EV of the QP changed state (ev, plane, from, to, reason)
  kSrqLimit,    // shared receive queue `srq` fell below its armed limit (then disarmed)
};

/// EvState and EvReason values (paths.h), carried as bytes here.
struct Event {
  EventType type = EventType::kQpFatal;
  Qpn qpn = 0;
  CqId cq = 0;
  WcStatus cause = WcStatus::kSuccess;  // kQpFatal: the error that ended the QP
  uint32_t ev = 0;                      // kEvState
  uint16_t plane = 0;
  uint8_t from = 0, to = 0;  // EvState
  uint8_t reason = 0;        // EvReason
  Time at{0};
  uint32_t dropped_before = 0;  // events lost (queue full) just before this one
  uint32_t srq = 0;             // kSrqLimit
};

}  // namespace mrc::engine
