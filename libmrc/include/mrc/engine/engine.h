// The sans-IO MRC protocol engine: QPs, memory regions, CQs, reliability.
// Threading: single-threaded. One owner calls every method; the API layer
// serialises callers. No syscalls, no clock reads, no threads inside: every
// input that depends on time takes `now`, and the engine says when it next
// needs to run (next_deadline()).
//
// A driver (UDP sockets, or the simulated network) runs this loop:
//
//   on_datagram(now, rx, bytes)   for every datagram received
//   on_timeout(now)               when now >= next_deadline()
//   while (auto t = poll_transmit(now, buf)) send t   (until it returns nullopt)
//   poll_cq(...) / poll_event()   to drain completions and async events
//
// and app-facing calls (post_send, post_recv, modify_qp, ...) may be made
// between any two of these. After any call, poll_transmit may have work and
// next_deadline may have moved.
//
// What a packet is: wire/wire.h. How a QP sends, retransmits and completes:
// sender.cc; how it checks and places what arrives: receiver.cc (state in
// internal.h). How paths are chosen and judged: paths.h. Congestion: nscc.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "mrc/common/result.h"
#include "mrc/engine/nscc.h"
#include "mrc/engine/paths.h"
#include "mrc/engine/policy.h"
#include "mrc/engine/retry.h"
#include "mrc/engine/stats.h"
#include "mrc/engine/types.h"

namespace mrc::engine {

/// Moves payload bytes to their final place (registered memory). memcpy by
/// default; a GPU-memory or DMA-engine copier can replace it.
using PayloadCopy = void (*)(void* dst, const void* src, size_t n);

/// EngineConfig::tlp_min_slack's default, 100 us, tuned on the 2-core VM the project measures
/// on: a software host's round trip varies with scheduling, not only the network. There one
/// round trip in 20-100 takes 3-5x the median (mrc-perf --latency with nothing else running:
/// p50 48-54 us, p99 151-180 us; perf/RESULTS.md 2026-11-27 (lead, idle) After this stop's
/// merges), and 2 SRTT + ack_delay fired a spurious probe on 1.3-6.6% of messages, each a
/// resend and its ACK of work on both hosts inside an already slow round trip. 4 RTTVAR does
/// not cover it: RFC 6298's smoothing forgets a spike within a few samples (tests/engine: a 4x
/// spike every 8th round trip still fired a probe on each). 2 SRTT + 100 us puts the idle p99
/// inside the wait; a lost tail packet is still resent ~67 ms (the default RTO) sooner than
/// without a probe. A host with steadier round trips (a NIC's) may set less.
inline constexpr Duration kDefaultTlpMinSlack{100'000};

struct EngineConfig {
  bool payload_crc = true;    // send a payload CRC32C and check received ones
  uint32_t ack_every = 2;     // ACK after this many data packets (out of order: at once)
  Duration ack_delay{8'000};  // ...or this long after the first unacked one
  // An ACK rides on a data packet the QP sends to the peer (wire.h: a trailer) when one
  // leaves in time, and in a ping-pong (a reply left within ride_wait of the last message)
  // a message's ACK waits up to ride_wait for the reply instead of going alone: one
  // datagram, and one wakeup at each end, less per round trip (docs/engine.md, "ACKs that
  // ride on replies"). ride_wait: an app's reply on the 2-core VM comes 1.7 us after its
  // message when it has a CPU, 20-45 us when it waits for one (perf/RESULTS.md 2026-11-28
  // (rides)). A sender's tail loss probe waits past it (tlp_min_slack, 100 us, is more);
  // where a small RTO clamps the probe (rtt.h tlp_at), an ACK still waiting for its reply
  // may draw a probe, whose duplicate is then ACKed at once.
  bool ack_rides = true;
  Duration ride_wait{32'000};
  uint32_t max_qps = 65536;
  uint32_t max_cqs = 65536;
  uint32_t max_mrs = 1 << 20;
  uint32_t recv_window = 16384;  // PSNs a receiver tracks past its cumulative PSN (power of 2)
  // Congestion control (NSCC). A QP without its own CC profile (QpAttr::cc) derives
  // one from these with NsccConfig::defaults.
  bool congestion_control = true;
  uint64_t nic_bps = 100'000'000'000;  // the NIC: all its plane ports together, bits/s
  Duration base_rtt{0};                // unloaded RTT; 0 = learn it (engine/policy.h)
  // Floor of a learned base RTT. The minimum RTT of a software datapath is an outlier (a
  // sample that met no scheduling delay): a window cap of 1.5 x BDP and a target delay
  // derived from it throttle the QP far below the link (io/config.h sets 100 us).
  Duration min_base_rtt{0};
  // The longest burst the driver sends on one plane at once, as time at a plane port's rate
  // (UdpDriver: 65,000 B, io::send_burst; 260 us at 2 Gbit/s). Packets at a burst's end
  // wait that long behind its start, so a busy QP's RTT is its minimum RTT plus this: a learned
  // base RTT adds it to the measured minimum (engine/policy.h BaseRttFilter).
  Duration send_burst{0};
  bool trimming = true;        // the fabric trims (target delay 0.75 base RTT, else 1.0)
  // The least a tail loss probe waits beyond 2 SRTT (engine/rtt.h RttEstimator::tlp_timeout;
  // kDefaultTlpMinSlack): room for the host's own scheduling jitter. Lower probes a real tail
  // loss sooner and fires more spurious probes (a resend and its ACK) where round trips
  // jitter; higher the reverse. Never past the RTO (RttEstimator::tlp_at clamps the probe).
  Duration tlp_min_slack = kDefaultTlpMinSlack;
  PayloadCopy copy = nullptr;  // nullptr: memcpy
  // Receive placement (docs/engine.md "Receive placement"): the engine remembers where the
  // last WRITE payload it placed went, which predict_placement starts from. Off: that record is
  // never made (no cost per packet) and predict_placement answers 0. Placement also needs
  // `copy` left at memcpy. The UDP driver sets it from UdpConfig::rx_placement.
  bool rx_placement = false;
};

/// One payload's place in registered memory, as the engine predicts it (Engine::predict_placement).
struct RxPlacement {
  uint8_t* at = nullptr;  // where the payload's first byte goes
  uint32_t len = 0;       // payload bytes
};

/// IB's RNR NAK timer (IBTA spec vol. 1, table "Encoding for RNR NAK Timer Field"; verbs
/// ibv_qp_attr::min_rnr_timer): code 1..31 is 0.01 ms .. 491.52 ms, roughly 1.5x apart; code 0
/// is the longest, 655.36 ms. Codes above 31 have no meaning (modify_qp refuses them).
Duration rnr_timer_wait(uint8_t code);

/// The RNR timer of a QP whose front end sets none (OCP MRC, the NCCL plugin, tests): code 7,
/// 0.12 ms. Verbs sets its own (ibv_modify_qp to RTR; rdma_cm sets 0, 655.36 ms, as the
/// kernel's does).
inline constexpr uint8_t kDefaultMinRnrTimer = 7;

/// The PSN window (MPR) of a QP whose front end sets none: 1,024 PSNs (OCP mpr 8, in units of
/// 128), 8 MiB in flight at MTU 8192, more than one port's bandwidth-delay product at the
/// round trips a software transport sees. The OCP API's default mpr and the NCCL plugin's
/// NCCL_MRC_MAX_PSN_RANGE default are this.
inline constexpr uint32_t kDefaultMaxPsnRange = 1024;

/// Attributes set by modify_qp, named as verbs/OCP name them.
struct QpAttr {
  QpState state = QpState::kReset;
  uint32_t mtu = 4096;                   // payload bytes: 256 .. 4096 (verbs) or 8192 (jumbo links)
  uint32_t sq_psn = 0;                   // first PSN this QP sends (RTS)
  uint32_t rq_psn = 0;                   // first PSN this QP expects (RTR)
  PeerId peer = 0;                       // remote host (RTR)
  Qpn dest_qpn = 0;                      // remote QP (RTR)
  uint32_t remote_token = 0;             // token the remote QP expects in our packets (RTR)
  uint32_t local_token = 0;              // token peers must put in packets to us (kLocalToken);
                                         // front ends that learn it only at RTR (verbs) set it so
  uint8_t timeout = kDefaultAckTimeout;  // ack timeout 1.024 us x 2^timeout, 1..31 (OCP: <= 24);
                                         // 0 = none
  uint8_t retry_cnt_linear = kDefaultRetryLinear;  // retries at the base timeout, 0..7
  uint8_t retry_cnt_exp = kDefaultRetryExp;        // then retries with doubling timeout, 0..25;
                                                   // 25 = forever
  uint8_t rnr_retry = 7;                 // NO_RESOURCE retries; 7 = forever (verbs)
  // As responder: how long a requester refused for want of a receive (NO_RESOURCE, "RNR")
  // waits before it resends, as IB's 5-bit RNR NAK timer code (rnr_timer_wait; verbs
  // min_rnr_timer). Sent in the NACK (wire::NackHeader::rnr_timer); the requester waits
  // what the responder asks.
  uint8_t min_rnr_timer = kDefaultMinRnrTimer;
  // The IPv6 traffic class (IPv4 TOS byte) of the QP's datagrams, data and control: its upper
  // 6 bits, the DSCP, are used (Transmit::traffic_class); the 2 ECN bits are the driver's.
  // Verbs' grh.traffic_class, rdma_cm's RDMA_OPTION_ID_TOS. 0: the socket's default.
  // (Here, in the struct's first cache line with the peer, MTU and tokens: every packet
  // reads it, and the engine keeps a QpAttr per QP.)
  uint8_t traffic_class = 0;
  uint32_t max_psn_range = kDefaultMaxPsnRange;  // MPR: most PSNs in flight (OCP: units of 128)
  // This QP's receive window (OCP mpr_dest x 128 PSNs): a data packet this many PSNs or more
  // past the cumulative PSN is NACKed PSN_OUT_OF_WINDOW (the sender resends it later). 0, or
  // above EngineConfig::recv_window: recv_window.
  uint32_t max_psn_range_dest = 0;
  // WRITE_WITH_IMM limits of OCP MRC QPs (0 = none, as verbs has). As requester: most
  // WRITE_WITH_IMMs posted and not yet complete (post_send refuses one more). As responder:
  // most it holds at once (arrived, receive not yet completed); a peer that sends past it
  // breaks the contract: NACKed REMOTE_INVALID and this QP fails (OCP: "moves the QP to an
  // error state"). A requester whose max_wimm <= the peer's max_wimm_dest never trips it.
  uint32_t max_wimm = 0;
  uint32_t max_wimm_dest = 0;
  // Remote operations this QP accepts as responder (access::kRemote*, verbs
  // qp_access_flags), checked next to the MR's own access: a WRITE (READ) the QP does not
  // grant is NACKed REMOTE_ACCESS even into an MR that allows it. Default: all.
  uint32_t access = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
  std::vector<Path> paths;         // active EVs to spray on (RTR); at least one
  std::vector<Path> backup_paths;  // EVs that replace bad ones of the same plane
  PathPolicy path_policy;          // loss threshold, probing, plane weights
  std::optional<NsccConfig> cc;    // CC profile (mrc_ctl_cc_nscc_cfg); unset: from EngineConfig
  // kCc with cc: no congestion control at all for this QP, whatever EngineConfig says (an OCP
  // CC profile without an algorithm): no window, only the PSN range (max_psn_range) bounds
  // what is in flight. `cc` is then ignored.
  bool cc_off = false;
  // UD QPs (QpInit::ud): the Q_Key a datagram must carry to be taken (verbs qkey).
  uint32_t qkey = 0;
  // Rate hints (OCP MRC QP hint, NCCL plugin), applied with with_rates on top of whichever
  // profile the QP runs, the automatic one included: each time its learned base RTT moves,
  // the windows are re-sized (rate x the new base RTT). They do not turn CC on.
  CcRates cc_rates;
};

/// Which QpAttr fields a modify_qp call sets.
namespace attr {
inline constexpr uint32_t kState = 1u << 0;
inline constexpr uint32_t kMtu = 1u << 1;
inline constexpr uint32_t kSqPsn = 1u << 2;
inline constexpr uint32_t kRqPsn = 1u << 3;
inline constexpr uint32_t kDest = 1u << 4;  // peer, dest_qpn, remote_token
inline constexpr uint32_t kTimeout = 1u << 5;
inline constexpr uint32_t kRetry = 1u << 6;  // retry_cnt_linear, retry_cnt_exp
inline constexpr uint32_t kRnrRetry = 1u << 7;
inline constexpr uint32_t kMpr = 1u << 8;
inline constexpr uint32_t kPaths = 1u << 9;  // paths and backup_paths
inline constexpr uint32_t kPathPolicy = 1u << 10;
inline constexpr uint32_t kCc = 1u << 11;
inline constexpr uint32_t kLocalToken = 1u << 12;    // replaces QpInit::local_token
inline constexpr uint32_t kWimm = 1u << 13;          // max_wimm, max_wimm_dest
inline constexpr uint32_t kAccess = 1u << 14;        // access
inline constexpr uint32_t kCcRates = 1u << 15;       // cc_rates
inline constexpr uint32_t kMprDest = 1u << 16;       // max_psn_range_dest
inline constexpr uint32_t kTrafficClass = 1u << 17;  // traffic_class
inline constexpr uint32_t kQkey = 1u << 18;          // qkey (UD QPs)
inline constexpr uint32_t kMinRnrTimer = 1u << 19;   // min_rnr_timer
}  // namespace attr

/// Copies the fields `mask` names (attr::k*) from `from` into `to`; the others stay. kState
/// copies state, kLocalToken local_token. For a front end that layers its overrides (an OCP
/// MRC QP's profile, MPR, timeout...) on the attributes it derived itself.
void assign_attr(QpAttr& to, const QpAttr& from, uint32_t mask);

/// Why modify_qp (or connect_qp) refuses a call: the error it returns and the field that
/// caused it, named as QpAttr names it ("state" for the transition, "mtu", "max_psn_range",
/// "paths", ...; "qpn" for no such QP). Front ends put the field in their error message.
struct ModifyRefusal {
  Error error = Error::kInvalidArgument;
  const char* field = "";
};

struct QpInit {
  CqId send_cq = 0;
  CqId recv_cq = 0;
  uint32_t max_send_wr = 1024;
  uint32_t max_recv_wr = 1024;
  bool sq_sig_all = false;  // every send WR completes, whatever its `signaled`
  uint32_t local_token =
      0;            // token peers must put in packets to this QP (caller draws it at random)
  uint32_t pd = 0;  // protection domain: the MRs this QP may use (register_mr's pd)
  // A shared receive queue (create_srq) the QP's receives come from; 0: its own (post_recv).
  // With one, max_recv_wr bounds the receives taken from it and not yet completed.
  uint32_t srq = 0;
  // An unreliable datagram QP (verbs UD): no peer, PSNs or paths of its own; each SEND names
  // its destination (SendWr::ud) and goes out as one UD_SEND datagram of at most the QP's MTU,
  // completing once handed to the driver; a datagram that finds no receive, a wrong Q_Key or a
  // receive too small is dropped (counted) or completes the receive with kLocLenErr. RESET ->
  // INIT -> RTR -> RTS need no attributes (kQkey sets the Q_Key).
  bool ud = false;
  // An XRC target QP (verbs IBV_QPT_XRC_RECV) of XRC domain `xrcd` (nonzero): no PD, no CQs
  // (send_cq, recv_cq may be 0) and no receive queue of its own. Each message names
  // (SendWr::xrc_srqn, wire DataHeader::xrc_srqn) an XRC SRQ of the same domain: its receive
  // comes from there, its completion goes to that SRQ's CQ and its memory (WRITE, READ,
  // atomics, receive buffers) is checked in that SRQ's PD. A message naming no such SRQ is
  // NACKed REMOTE_INVALID (the requester's WR fails with kRemInvReqErr).
  uint32_t xrcd = 0;
};

/// An XRC SRQ's domain, CQ and PD (create_srq); xrcd 0: a plain SRQ.
struct XrcSrqInit {
  uint32_t xrcd = 0;
  CqId cq = 0;      // where receives of the SRQ complete (held while the SRQ lives)
  uint32_t pd = 0;  // the PD its receive buffers and the messages' memory are checked in
};

/// One operation on a tag-matching SRQ's tag list (Engine::post_srq_op; verbs ibv_ops_wr).
struct SrqOp {
  enum Kind : uint8_t { kAdd, kDel, kSync };
  Kind kind = kAdd;
  uint64_t wr_id = 0;    // of the operation's completion (kTmAdd, kTmDel, kTmSync)
  bool signaled = true;  // complete on success (a failed kDel always completes)
  // Carries the app's count of unexpected messages handled (verbs IBV_OPS_TM_SYNC); kSync
  // always does.
  bool sync = false;
  uint32_t unexpected_cnt = 0;
  uint32_t handle = 0;      // kDel: the tag's, as kAdd returned it
  uint64_t recv_wr_id = 0;  // kAdd: the wr_id of the tag's kTmRecv completions
  uint64_t tag = 0;         // kAdd: a message matches if (its tag ^ tag) & mask == 0
  uint64_t mask = 0;
  std::span<const Sge> sg;  // kAdd: the tag's buffer (at most kMaxSge; checked when data lands)
};

/// Tag-matching message header (verbs' TMH, rdma-core Documentation/tag_matching.md): the
/// first 16 bytes of a SEND to a QP on a tag-matching SRQ. Byte 0 the operation, 4..7 the app
/// context, 8..15 the tag, both big-endian; a rendezvous request adds 16 bytes (RVH): the
/// requester's address (16..23), rkey (24..27) and length (28..31), big-endian.
namespace tmh {
inline constexpr size_t kLen = 16;
inline constexpr size_t kRvhLen = 16;
inline constexpr uint8_t kNoTag = 0;  // not matched: a plain SRQ receive, kTmNoTag
inline constexpr uint8_t kRndv = 1;   // rendezvous request: the receiver READs the data
inline constexpr uint8_t kFin = 2;    // rendezvous done: the receiver's answer to the requester
inline constexpr uint8_t kEager = 3;  // the data follows the header
}  // namespace tmh

/// Metadata a driver passes with each received datagram.
struct RxInfo {
  uint16_t plane = 0;   // local port it arrived on
  bool ecn_ce = false;  // IP header had ECN CE
};

/// One datagram to send: the header is in the caller's buffer, the payload is
/// `payload` (registered memory, or the caller's buffer right after the header
/// when the engine had to gather). Valid until the next engine call.
struct Transmit {
  PeerId peer = 0;
  Path path;                         // EV and local plane port to send from
  size_t header_len = 0;             // bytes at the start of the caller's buffer
  std::span<const uint8_t> payload;  // follows the header on the wire
  uint8_t traffic_class = 0;         // its QP's QpAttr::traffic_class (DSCP bits; 0: default)
  size_t size() const { return header_len + payload.size(); }
};

/// Minimum buffer poll_transmit needs: largest header + largest payload.
inline constexpr size_t kTransmitBufferSize = 128 + 8192;  // wire::kMaxPayload

class Engine {
 public:
  explicit Engine(const EngineConfig& cfg = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // ---- Resources -----------------------------------------------------------------------
  /// Registers [addr, addr+len) with IOVA `iova` (== addr for plain reg_mr) in protection
  /// domain `pd`: only QPs of the same pd (QpInit::pd) may use the key, in their own work
  /// requests or from their peer; for a QP of another pd it is no key at all (a local
  /// access error, a remote access NACK). Returns the key (lkey == rkey). A deregistered
  /// key is never valid again.
  /// addr nullptr, iova 0 and len UINT64_MAX register the whole address space (verbs'
  /// implicit on-demand-paging MR): every address is the process's own.
  Result<uint32_t, Error> register_mr(void* addr, uint64_t len, uint64_t iova, uint32_t access,
                                      uint32_t pd = 0);
  Status<Error> deregister_mr(uint32_t key);
  /// Verbs' rereg_mr: the MR of `key` covers [addr, addr+len) at `iova` with `access` in `pd`
  /// from now on, under the same key (arguments as register_mr). Receives already posted are
  /// checked against it when their data lands (post_recv); kNoSuchMr, kInvalidArgument.
  Status<Error> reregister_mr(uint32_t key, void* addr, uint64_t len, uint64_t iova,
                              uint32_t access, uint32_t pd);
  /// Ok if [addr, addr+len) lies in the MR of `key` and that MR is in protection domain `pd`:
  /// kNoSuchMr (no such key, or another pd's), kLocalAccess (outside it). No effect.
  Status<Error> check_mr(uint32_t key, uint64_t addr, uint64_t len, uint32_t pd) const;

  Result<CqId, Error> create_cq(uint32_t depth);
  Status<Error> destroy_cq(CqId cq);  // kBadState while a QP uses it
  /// Verbs' resize_cq: `cq` holds up to `depth` completions from now on, those it holds kept;
  /// kInvalidArgument for 0 or fewer than it holds now, kNoSuchCq.
  Status<Error> resize_cq(CqId cq, uint32_t depth);
  /// Moves up to out.size() completions of `cq` into `out`, oldest first.
  size_t poll_cq(CqId cq, std::span<Completion> out);
  /// Completions waiting in `cq`.
  size_t cq_depth(CqId cq) const;

  /// A shared receive queue of up to max_wr receives: a QP made with QpInit::srq takes the
  /// next one, in posting order, when the first packet of a message that needs one arrives
  /// (none left: the sender is NACKed for RNR, as with an empty receive queue).
  /// `xrc` (xrcd nonzero) makes an XRC SRQ (QpInit::xrcd): ids stay below 65536 (wire).
  Result<uint32_t, Error> create_srq(uint32_t max_wr, const XrcSrqInit& xrc = {});
  Status<Error> destroy_srq(uint32_t srq);  // kBadState while a QP uses it
  /// kQueueFull at max_wr; SGEs checked when data lands (post_recv).
  Status<Error> post_srq_recv(uint32_t srq, const RecvWr& wr);
  /// Arms the limit: once fewer than `limit` receives are left, one kSrqLimit event, and the
  /// limit is disarmed (0). 0 disarms now.
  Status<Error> arm_srq_limit(uint32_t srq, uint32_t limit);
  /// Receives waiting in `srq` (0 for no such SRQ), and its armed limit.
  size_t srq_depth(uint32_t srq) const;
  uint32_t srq_limit(uint32_t srq) const;

  // ---- Tag matching (tm.cc; verbs IBV_SRQT_TM, ibv_post_srq_ops) -------------------------
  /// A tag-matching SRQ: an SRQ (as create_srq) that also holds up to max_tags tagged buffers
  /// (post_srq_op). Every completion of its receives and operations goes to `cq`. A SEND to a QP
  /// on it is classified when its first packet lands, in MSN order per QP (a later message's,
  /// or a non-first packet of a message not yet classified, is NACKed PSN_OUT_OF_WINDOW and
  /// resent): a TM header (tmh) EAGER or RNDV whose tag matches a tag goes to that tag's buffer
  /// (the tag is used up): EAGER's data without the header, kTmRecv with kMatch | kDataValid;
  /// RNDV: kTmRecv with kMatch, then the receiver READs the requester's buffer (RVH) into the
  /// tag's over the same QP, sends the requester a 16-byte FIN (tmh::kFin, same app context and
  /// tag) and completes kTmRecv with kDataValid (byte_len the length read; no tag: that came with
  /// kMatch). Otherwise the whole message takes the next plain receive of the SRQ: EAGER/RNDV
  /// unmatched are unexpected (kTmRecv, no flags; counted for phase sync, SrqTm), NO_TAG completes
  /// kTmNoTag, anything else (shorter than 16 bytes, FIN, another opcode, WRITE_WITH_IMM) kRecv.
  Result<uint32_t, Error> create_tm_srq(uint32_t max_wr, CqId cq, uint32_t max_tags);
  /// kAdd returns the tag's handle (kQueueFull at max_tags), the others 0. kInvalidArgument:
  /// no such tag-matching SRQ, or more than kMaxSge SGEs. A kDel of a handle used up or
  /// unknown completes kTmErr. A completion carries tm_flag::kSyncReq while out of sync.
  Result<uint32_t, Error> post_srq_op(uint32_t srq, const SrqOp& op);

  Result<Qpn, Error> create_qp(const QpInit& init);
  /// State transitions as verbs: RESET->INIT->RTR->RTS, any->ERROR, any->RESET,
  /// RTS<->SQD. RTR needs kDest and kPaths (and kRqPsn, kMtu when not default).
  /// Validate, then apply: every field `mask` names is checked (check_modify_qp) before any
  /// is applied, so a refused call changes nothing.
  Status<Error> modify_qp(Qpn qpn, const QpAttr& a, uint32_t mask);
  /// The checks of modify_qp(qpn, a, mask), with no effect: ok when it would succeed, else
  /// what it would return and the field that makes it refuse.
  Status<ModifyRefusal> check_modify_qp(Qpn qpn, const QpAttr& a, uint32_t mask) const;
  /// INIT -> RTR -> RTS in one step, for front ends whose QPs send from RTR on (the verbs
  /// device, the NCCL plugin): modify_qp(qpn, a, mask) to RTR (kState is implied), then to RTS
  /// with kSqPsn if mask has it. Both steps are checked before either applies; refused, the
  /// QP is as it was.
  Status<ModifyRefusal> connect_qp(Qpn qpn, const QpAttr& a, uint32_t mask);
  Result<QpAttr, Error> query_qp(Qpn qpn) const;
  Status<Error> destroy_qp(Qpn qpn);

  // ---- Memory windows (mw.cc; verbs ibv_alloc_mw, bind, LOCAL_INV, SEND_WITH_INV) ---------
  /// A memory window of protection domain `pd`: a key of its own (an rkey) that grants
  /// nothing until bind_mw; deregister_mr of its current key frees it.
  Result<uint32_t, Error> alloc_mw(uint32_t pd);
  /// Binds the window whose key is `key` (in `pd`) to [addr, addr+len) of MR `mr` (same pd,
  /// inside it) with the remote `access` given (access::kRemote*), from now on under `new_key`,
  /// which names the same window (new_key >> 8 == key >> 8: verbs' ibv_inc_rkey changes the low
  /// byte only). len 0 unbinds. The MR cannot be deregistered or reregistered while bound
  /// (kBadState). kNoSuchMr (no such window or MR, another pd's), kInvalidArgument (range, key).
  Status<Error> bind_mw(uint32_t key, uint32_t new_key, uint32_t mr, uint64_t addr, uint64_t len,
                        uint32_t access, uint32_t pd);
  /// Unbinds the window of `key` in `pd` (verbs LOCAL_INV): it grants nothing until bound again.
  /// kNoSuchMr if `key` is no window of `pd`.
  Status<Error> invalidate_mw(uint32_t key, uint32_t pd);
  /// The completion (kBindMw, kLocalInv) of a send-queue operation that has taken effect
  /// locally: written once every WR posted before it on the QP has completed, as a send
  /// queue's completions come in posting order; flushed with them. kBadState unless RTS/SQD.
  Status<Error> post_local(Qpn qpn, uint64_t wr_id, WcOpcode op, bool signaled);

  // ---- Work requests --------------------------------------------------------------------
  Status<Error> post_send(Qpn qpn, const SendWr& wr);
  /// The receive's SGEs are checked when a SEND lands in it, as a NIC does (key of the QP's
  /// pd, range, local write; after a reregister_mr the MR as it is then): a bad one fails the
  /// QP with kLocProtErr and the requester's SEND with kRemOpErr.
  Status<Error> post_recv(Qpn qpn, const RecvWr& wr);

  // ---- Driver interface (see the loop above) -------------------------------------------
  void on_datagram(Time now, const RxInfo& rx, std::span<const uint8_t> bytes);
  /// The same for a data packet whose header (wire::kDataHeaderSize bytes) and payload lie
  /// apart. A WRITE payload that is already where it belongs (payload.data() is its target)
  /// is not copied: EngineStats::rx_write_in_place counts it.
  void on_datagram(Time now, const RxInfo& rx, std::span<const uint8_t> header,
                   std::span<const uint8_t> payload);
  /// Receive placement (docs/engine.md "Receive placement"): fills `out` with the places of
  /// the payloads of the PSNs that follow the last WRITE payload this engine placed, in PSN
  /// order, and returns how many. Only PSNs of that same message not yet received and inside
  /// the QP's receive window, only while the QP is connected, its MR still covers the message
  /// and grants remote write, and EngineConfig::copy is memcpy (0 otherwise): memory whose
  /// content is undefined until the PSN arrives, which that PSN's payload overwrites. The
  /// prediction holds only until the next call that changes the engine: a driver that lets
  /// the kernel write there keeps every other caller out from this call until it has fed
  /// what arrived (the UDP driver holds its mutex throughout).
  size_t predict_placement(std::span<RxPlacement> out);
  /// Where on_datagram would place this data header's payload now (a WRITE or WRITE_IMM to a
  /// connected QP, within a covering MR; on an XRC target QP, an MR of the PD of the XRC SRQ
  /// it names); nullptr when it would place it nowhere or the header is not a data header
  /// (wire::kDataHeaderSize bytes). Changes nothing.
  const uint8_t* write_target(std::span<const uint8_t> header);
  void on_timeout(Time now);
  /// Next datagram to send, built in `buf` (at least kTransmitBufferSize bytes).
  std::optional<Transmit> poll_transmit(Time now, std::span<uint8_t> buf);
  /// Earliest time on_timeout must be called: a timer some QP really has set (one cancelled
  /// or moved later since is never reported); kNever when no timer is set. Not a pure read:
  /// it first drops or moves such entries in the timer heap, so callers on several threads
  /// hold the same lock as for on_timeout (the UDP driver's mutex).
  Time next_deadline() const;
  std::optional<Event> poll_event();

  // ---- Controller ----------------------------------------------------------------------
  /// DENY (true) or allow (false) one EV of a QP. Allowing probes it before use.
  Status<Error> deny_ev(Time now, Qpn qpn, uint32_t ev, bool deny);
  /// Drain (true) or undrain (false) local plane port `plane` for every QP, present and
  /// future (PathSet::set_plane_admin_down): no data is sent on it, EV states are kept,
  /// in-flight packets are acknowledged or retransmitted on other planes. The peer's
  /// ACKs follow the data off the plane. kInvalidArgument if plane >= kMaxPlanes.
  Status<Error> set_plane_drained(uint16_t plane, bool drained);
  /// Bit p set: plane p is drained by set_plane_drained.
  uint16_t drained_planes() const;
  /// The driver's word on the link of its own plane port `plane` (carrier, as a NIC's PHY
  /// reports it; a port whose T0 is down has none): with no link, every QP stops sending on
  /// the plane (weight 0, retransmissions included) and resends at once what it had in
  /// flight there, and every ACK this engine sends says so (wire::AckHeader::ports_down), so
  /// that peers stop sending to it on that plane (SharedHealth::set_reported_down) and resend
  /// what they had in flight there without waiting for loss detection. Up again: both end,
  /// at this host at once, at a peer with this host's next ACK to it. EV states are kept.
  /// kInvalidArgument if plane >= kMaxPlanes.
  Status<Error> set_port_up(Time now, uint16_t plane, bool up);
  /// Bit p set: plane port p has no link (set_port_up).
  uint16_t ports_down() const;
  /// Bit p set: `peer`'s latest ACK said its plane port p has no link (0 if none came).
  uint16_t peer_ports_down(PeerId peer) const;
  /// Bit p set: the path health the QPs share (paths.h SharedHealth) holds plane p down
  /// towards `peer` at `now`, for that peer alone or for every peer (local plane).
  uint16_t held_planes(PeerId peer, Time now) const;
  /// What `peer` said of its planes (an OCP PORT_STATUS_UPDATE, io/udp/port_status.h): bit p
  /// set, its plane p is down. Every QP to the peer, present and future, stops sending on those
  /// planes (weight 0, retransmissions included; SharedHealth::set_announced_down) until a
  /// later call clears the bit; what they have in flight on a newly-down plane is resent at
  /// once without blame, as for a port with no link (set_port_up). EV states and probing are
  /// untouched. Replaces the last mask.
  void set_peer_planes_down(Time now, PeerId peer, uint16_t planes);
  /// The mask the last set_peer_planes_down gave `peer` (0 if none).
  uint16_t peer_planes_down(PeerId peer) const;
  /// The paths UD datagrams to `peer` may take (QpInit::ud; a verbs AH's spray list, the
  /// paths an RC QP to the peer sprays on). A datagram goes out on the path its WR names
  /// (UdDest::path) unless the shared path health (SharedHealth: a local port with no link,
  /// the peer's word on its ports, holds learned by the RC QPs to the peer, EV holds) or an
  /// administrative drain holds that path's plane or EV at the time it is sent: then on the
  /// next of these paths, round robin, that is held by none of them (EngineStats::
  /// ud_rerouted). UD has no acknowledgements, so no loss of its own ever holds a plane.
  /// Without paths for the peer, or with all of them held, the datagram takes the named path.
  /// Replaces the last list for the peer; an empty list forgets it.
  void set_ud_paths(PeerId peer, std::span<const Path> paths);

  /// Multicast (verbs ibv_attach_mcast): a UD datagram to QPN kMulticastQpn whose GRH (the
  /// payload's first 40 bytes) has `gid` as its dgid goes to every UD QP of this engine
  /// attached to the group, each checking its Q_Key and taking a receive as for a datagram of
  /// its own (none attached: dropped, Drop::kUnknownQp). Attaching an attached QP again does
  /// nothing. kNoSuchQp; kInvalidArgument: not a UD QP; kQueueFull: the engine has
  /// kMaxMcastGroups groups already, or the group has kMaxMcastAttach QPs. Destroying a QP
  /// detaches it from every group.
  Status<Error> attach_mcast(Qpn qpn, const McastGid& gid);
  /// Ends what attach_mcast began. kNoSuchQp; kInvalidArgument: the QP is not attached to
  /// the group.
  Status<Error> detach_mcast(Qpn qpn, const McastGid& gid);
  /// The QPs attached to `gid` (tests, observability).
  std::vector<Qpn> mcast_members(const McastGid& gid) const;
  static constexpr uint32_t kMaxMcastGroups = 1024;  // per engine (verbs max_mcast_grp)
  static constexpr uint32_t kMaxMcastAttach = 64;    // QPs per group (max_mcast_qp_attach)

  // ---- Observability -------------------------------------------------------------------
  const EngineStats& stats() const;
  /// Null if no such QP.
  const QpStats* qp_stats(Qpn qpn) const;
  /// Per-path counters of a QP, in the order of QpAttr::paths then backup_paths, as a
  /// snapshot (the engine keeps them in each EV's record, PathSet::Ev, next to what a
  /// packet touches); empty if no such QP.
  std::vector<PathStats> path_stats(Qpn qpn) const;
  /// The same into `out` (cleared first, its capacity reused: no allocation once it has
  /// grown, for callers that visit every QP, such as the observer's publisher); false, and
  /// `out` empty, if no such QP.
  bool path_stats(Qpn qpn, std::vector<PathStats>& out) const;
  /// The QP's EVs with their state, same order; null if no such QP.
  const PathSet* paths(Qpn qpn) const;
  /// The QP's congestion window counters; nullopt if no such QP or CC is off.
  std::optional<NsccStats> cc_stats(Qpn qpn) const;
  /// The NSCC constants the QP's window runs with now (its profile, or the automatic one with
  /// the base RTT learned so far; rate hints applied); nullopt if no such QP or no window (CC
  /// off, or not yet RTS).
  std::optional<NsccConfig> cc_config(Qpn qpn) const;
  /// Every QPN in use lies in 1..max_qpn() (0: no QP was ever made); for enumerating QPs.
  Qpn max_qpn() const;
  /// True when no QP has anything in flight or queued to send.
  bool idle() const;
  /// Packets of `qpn` sent and not yet cumulatively acknowledged (0: no such QP). O(1).
  size_t in_flight(Qpn qpn) const;
  /// Entries in the timer heap, superseded ones not yet dropped included (tests: the heap
  /// stays bounded by the QPs with a timer plus the compaction's slack, docs/engine.md).
  size_t timer_heap_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrc::engine
