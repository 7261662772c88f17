// The engine's private state: memory regions, CQs, QPs (sender and receiver
// halves) and the Core that owns them. Shared by engine.cc (API, state
// machine, dispatch), sender.cc and receiver.cc.
// Threading: single-threaded, like Engine.
//
// A QP's send state (send_state.h) and receive state (recv_state.h) are types of their own;
// per EV, the sender also keeps the list of its packets in flight last sent on that EV (head
// and tail in the EV's record, PathSet::Ev): a path keeps its packets in order, so one
// acknowledged on an EV reveals the losses of those sent before it on the same EV (RACK per
// EV, detect_losses).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/loss.h"
#include "engine/queues.h"
#include "engine/recv_state.h"
#include "engine/rtt.h"
#include "engine/sack.h"
#include "engine/send_state.h"
#include "engine/timers.h"
#include "mrc/engine/engine.h"
#include "mrc/engine/paths.h"
#include "mrc/engine/policy.h"
#include "mrc/engine/retry.h"
#include "mrc/wire/wire.h"

namespace mrc::engine {

/// Big-endian fields of payloads the engine reads or writes itself (atomic operands and
/// results, tag-matching headers).
inline uint64_t get_be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}
inline uint32_t get_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline void put_be64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
inline void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

inline constexpr uint32_t kMaxReadResponses = 128;  // READs a responder runs at once

struct Mr {
  uint8_t* host = nullptr;  // where iova maps in this process
  uint64_t iova = 0;
  uint64_t len = 0;
  uint32_t access = 0;
  uint32_t pd = 0;       // protection domain: only QPs of the same one use it
  uint32_t key = 0;      // 0: free slot
  bool window = false;   // a memory window (mw.cc): bound to part of an MR, or to nothing
  uint32_t parent = 0;   // window: the key of the MR it is bound to (0: unbound)
  uint32_t windows = 0;  // MR: windows bound to it (no deregistering or reregistering then)
  bool covers(uint64_t addr, uint64_t n) const {
    return addr >= iova && n <= len && addr - iova <= len - n;
  }
  // As integers: the whole-space MR (register_mr) has host nullptr.
  uint8_t* at(uint64_t addr) const {
    return reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(host) + (addr - iova));
  }
};

/// Copies between a scatter/gather list and a flat buffer at a byte offset.
/// Returns false if [offset, offset + n) is outside the list.
bool sg_copy_out(std::span<const Seg> sg, uint64_t offset, uint8_t* dst, size_t n,
                 PayloadCopy copy);
bool sg_copy_in(std::span<const Seg> sg, uint64_t offset, const uint8_t* src, size_t n,
                PayloadCopy copy);
/// The span [offset, offset + n) if it lies within one segment, else empty.
std::span<const uint8_t> sg_contiguous(std::span<const Seg> sg, uint64_t offset, size_t n);

/// Per EV of a QP, the PathStats counters that are neither per packet nor per loss (those
/// are in the EV's record, PathSet::Ev): allocated with the first of them (Qp::ev_signals).
struct EvSignals {
  uint64_t ecn_marks = 0;
  uint64_t probes = 0;
  uint64_t probe_replies = 0;
};

/// A control packet waiting to be sent: NACKs, probes, probe replies (ACKs are
/// built from the QP's state when their turn comes).
struct Control {
  wire::Kind kind = wire::Kind::kNack;
  Qpn qpn = 0;  // local QP (its peer is the destination)
  Path path;
  uint32_t psn = 0;       // NACK: refused PSN; probe, reply: probe sequence
  wire::NackHeader nack;  // kNack
  uint32_t echo_ev = 0;   // kProbeReply
  uint64_t echo_ts = 0;   // kProbeReply
  bool ecn = false;       // kProbeReply: the probe arrived CE-marked
};

/// What one ACK newly acknowledged.
struct AckTally {
  uint64_t bytes = 0;
  uint32_t packets = 0;
};

/// How a packet came to be declared lost: RACK and RTO count against its EV and
/// the window; kNoBlame (NACKed, or resent along with an RTO) does not.
enum class LossKind : uint8_t { kRack, kTimeout, kNoBlame };
/// Which rule declared a packet lost (TxPkt::lost_by): RACK's two rules apart from the rest
/// (tail probe, RTO, NACK, a dead port), so that spurious losses can be told apart by rule.
enum LossRule : uint8_t { kLostOther = 0, kLostPerEv = 1, kLostCrossEv = 2 };

/// One QP: its state split by concern (sender, receiver, RTT estimator, loss detector, paths)
/// and laid out by heat. A 16,384-QP engine touches each QP's state only now and then, so every
/// cache line of it that a packet touches is a miss. The QP is cache-line aligned and its
/// blocks follow who touches them per message: what both ends read per packet first (number,
/// state, timers, the shared health view, the creation attributes: token, PD, CQs), then what
/// only a receiving end touches (RecvState), then what only a sending end touches (SendState,
/// RTT, loss detection, the per-ACK bookkeeping, the READ list and the window's pointer),
/// each end's lines together, so that a QP that only sends (or only receives) pays for its
/// own block and not the other's. Then, each on lines of its own, the stats and the
/// attributes (whose first line, with MTU, peer, tokens and traffic class, is the only one a
/// packet reads) and the path set; configuration and rare events last
/// (QpScale.QpLayout_HotStateFirst checks it). The congestion window is an allocation of its
/// own (Qp::cc), of which a packet reads the first line.
struct alignas(64) Qp {
  // ======== both ends: touched per packet sent, received or acknowledged ========
  Qpn qpn = 0;
  QpState state = QpState::kReset;
  RetryPolicy retry;
  bool in_ready = false;    // in the engine's ready list
  bool in_ackq = false;     // in the engine's ACK list
  bool cc_auto = false;     // profile derived from EngineConfig, base RTT learned
  bool cc_probed = false;   // sent the PROBE of a learned base RTT (Core::probe_base_rtt)
  // Sending end: NO_RESOURCE NACKs in a row (reset by progress). Here, in the first line's
  // padding, to keep the sending end's block at six lines.
  uint32_t rnr_retries = 0;
  Timers timers;  // the engine's timer heap knows their minimum (Core::reschedule)
  SharedHealth::Peer* health = nullptr;  // the engine's view of the peer (set at RTS)
  QpInit init;  // read per packet: token, PD, CQs, UD and XRC kinds

  // ======== receiving end: a data packet's receipt and its ACK ========
  RecvState rcv;  // (recv_state.h)

  // ======== sending end: a packet's send, its ACK, the message's completion ========
  // Six lines, every field of them read or written by a message's packets, ACKs or
  // completion; what a message reads nowhere else of the sending QP: the first two lines, the
  // first of stats and of attr, the path set's two and the window's first (on its own
  // allocation). The READ list and the window's pointer are here, not cold: each is read per
  // ACK or per message (waiting_on_peer, cwnd_full), so a cold line each would be a miss.
  alignas(64) SendState snd;      // (send_state.h)
  uint64_t health_epoch = 0;      // SharedHealth::epoch() when held planes were read
  Time health_recheck = kNever;   // when a hold read then ends
  RttEstimator rtt;
  LossDetector loss;
  Time wait_since = kNever;  // nothing in flight, yet waiting on the peer since (READ, no path)
  Time last_ack_at{0};       // last ACK that acknowledged something
  // Completions of local operations (Engine::post_local), each with the sq sequence number
  // every WQE before which must have completed first. A vector, not a deque: few and rare
  // (memory-window binds, invalidations), and a deque allocates on construction, which every
  // idle QP would pay (QpScale.IdleConnectedQpHoldsFewKib). Each completion pass looks at it.
  std::vector<std::pair<uint64_t, Completion>> local_after;
  // Sq sequence numbers of READs awaiting their response. Whether it is empty is read
  // whenever the RTO is armed with nothing in flight and the SQ not empty (waiting_on_peer):
  // once per ACK that empties the sent-order list mid-message.
  Fifo<uint64_t> reads;
  // Congestion window (RTS on; null when CC is off), on an allocation of its own whose first
  // line holds what a packet sent and an ACK touch (Nscc is 64-byte aligned): the pointer
  // answers "is there a window" from this block, where a std::optional's flag (after the
  // 400-byte window) was a line of its own.
  std::unique_ptr<Nscc> cc;

  alignas(64) QpStats stats;
  // Its first line (state, mtu, peer, dest_qpn, tokens, traffic class) is read per packet; the
  // rest is cold.
  alignas(64) QpAttr attr;
  // The path set starts a line: the sprayer's per-packet state (PathSet's first 120 bytes:
  // its arrays, weights, planes, counts) then takes two lines, not three.
  alignas(64) PathSet paths;

  // ======== cold: configuration, rare events, observers ========
  BaseRttFilter cc_rtt;      // the learned base RTT (cc_auto)
  Duration cc_base{0};       // base RTT the auto profile is derived with (cc_auto)
  Duration cc_learned{0};    // last estimate of cc_rtt taken into cc_base; 0 = none yet
  uint32_t next_recv_msn = 0;         // next SEND/WRITE_IMM receive number at the peer
  uint32_t sq_wimms = 0;              // WRITE_WITH_IMMs in the SQ (posted, not complete): max_wimm
  uint32_t pending_reads = 0;         // READ requests accepted, response not yet fully acked
  uint32_t next_read_msn = 0;         // next READ number
  uint32_t reads_base_msn = 0;        // read number of reads.front()
  uint32_t ud_queued = 0;             // UD QPs: SENDs in Core::udq (max_send_wr bounds them)
  std::vector<EvSignals> ev_signals;  // indexed like paths; empty until one counts (signals())

  /// EV i's rarer counters, allocated on first use.
  EvSignals& signals(uint16_t i) {
    if (ev_signals.size() < paths.size()) ev_signals.resize(paths.size());
    return ev_signals[i];
  }
  /// Retransmission timeout now: the verbs timeout, never below the measured round trip
  /// (SRTT + 4 RTTVAR + the receiver's ACK delay), backed off by the retries so far.
  Duration rto(Duration ack_delay) const {
    return retry.rto(loss.rto_retries, rtt.rto_floor(ack_delay));
  }

  // ---- prefetch hints: each asks the CPU to fetch lines a coming packet will touch, all at
  // once, so that with thousands of QPs (each cold when its turn comes) the misses overlap
  // one another and the work before them instead of waiting on one another as the code
  // reaches each line. Hints only: no state changes, and nothing read but this QP's own
  // pointers to its blocks (send_blocks) ----
  /// The lines of this QP that receiving a data packet and building its ACK touch: the first
  /// two (number, state, timers, QpInit), the receive block, the receiving end's line of
  /// stats (its second), the first of attr, and the scoreboard's word at cum (a load of its
  /// pointer: RecvState's line).
  void prefetch_recv() const {
    const auto* b = reinterpret_cast<const char*>(this);
    const auto* end = reinterpret_cast<const char*>(&snd);
    for (const char* l = b; l < end; l += 64) __builtin_prefetch(l, 1);
    __builtin_prefetch(reinterpret_cast<const char*>(&stats) + 64, 1);
    __builtin_prefetch(&attr);
    rcv.sb.prefetch();
  }
  /// The lines of this QP that sending a burst of data packets touches: the first two, the
  /// send block, the first line of stats and of attr, the path set's first two. No loads:
  /// the addresses are this QP's. The blocks they point to: prefetch_send_blocks.
  void prefetch_send() const {
    const auto* b = reinterpret_cast<const char*>(this);
    __builtin_prefetch(b, 1);
    __builtin_prefetch(b + 64);
    const auto* end = reinterpret_cast<const char*>(&stats);
    for (const char* l = reinterpret_cast<const char*>(&snd); l < end; l += 64)
      __builtin_prefetch(l, 1);
    __builtin_prefetch(&stats, 1);
    __builtin_prefetch(&attr);
    const auto* ps = reinterpret_cast<const char*>(&paths);
    __builtin_prefetch(ps, 1);
    __builtin_prefetch(ps + 64, 1);
  }
  /// The blocks a burst of `n` new data packets touches outside the QP: the in-flight records,
  /// the WQE, the EV block and per-plane state, the window. Reads the pointers to them from
  /// the send block and the path set (best after prefetch_send has brought those lines).
  void prefetch_send_blocks(uint32_t n) const {
    snd.prefetch_burst(n);
    paths.prefetch_next();
    if (cc) __builtin_prefetch(cc.get(), 1);
  }
};

/// A UD SEND posted and not yet handed to the driver (ud.cc): its datagram's payload (the
/// GRH, then the data gathered at post time) and what its completion needs.
struct UdOut {
  Qpn qpn = 0;
  UdDest dst;
  uint64_t wr_id = 0;
  bool signaled = false;
  bool solicited = false;
  bool has_imm = false;
  bool last = true;  // the WR's last datagram (SendWr::ud_fan): it frees the slot, completes
  uint32_t imm = 0;
  std::vector<uint8_t> bytes;  // wire::kUdGrhLen bytes of GRH, then the message
};

struct Cq {
  uint32_t depth = 0;
  std::deque<Completion> q;
  uint32_t users = 0;  // QPs using it
  bool live = false;
};

/// One tagged buffer of a tag-matching SRQ (Engine::post_srq_op kAdd).
struct TmTag {
  uint32_t handle = 0;
  uint64_t tag = 0, mask = 0;
  uint64_t wr_id = 0;   // SrqOp::recv_wr_id: its kTmRecv completions'
  std::vector<Sge> sg;  // checked when data lands, as a receive's (resolve_recv)
  uint64_t capacity = 0;
  bool active = true;  // added while the SRQ was in sync: matches; else only after a sync
};

/// The tag-matching part of an SRQ (Engine::create_tm_srq). Phase sync, as verbs has it: every
/// unexpected message adds one to `unexpected`; the app reports how many it handled
/// (SrqOp::unexpected_cnt -> `synced`); while they differ the SRQ is out of sync and a tag added
/// then does not match until they agree again.
struct SrqTm {
  CqId cq = 0;  // every completion of the SRQ: receives and tag operations
  uint32_t max_tags = 0;
  std::vector<TmTag> tags;  // in posting order (matching takes the first that fits)
  uint32_t next_handle = 1;
  uint32_t unexpected = 0;
  uint32_t synced = 0;
  bool in_sync() const { return unexpected == synced; }
};

/// How a message to a QP on a tag-matching SRQ was classified when its first packet came
/// (Core::tm_take), kept until its receive completes (Core::tm_msgs).
struct TmMsg {
  enum Kind : uint8_t { kPlain, kNoTag, kUnexpected, kEager, kRndv };
  Kind kind = kPlain;
  uint32_t priv = 0;  // the header's app context
  uint64_t tag = 0;
  uint64_t va = 0;  // kRndv: the requester's buffer (rendezvous header)
  uint32_t rkey = 0;
  uint32_t len = 0;
  CqId cq = 0;  // the SRQ's
};

struct Srq {
  std::deque<RecvWqe> q;  // posted, not yet taken by a QP
  uint32_t max_wr = 0;
  uint32_t limit = 0;  // armed limit (0: disarmed)
  uint32_t users = 0;  // QPs using it
  bool live = false;
  XrcSrqInit xrc;  // xrc.xrcd nonzero: an XRC SRQ, named by messages to XRC target QPs
  std::shared_ptr<SrqTm> tm;  // a tag-matching SRQ (create_tm_srq), else null
};

/// Engine::Impl: owns everything; sender.cc and receiver.cc add its methods. Public: what the
/// Engine API (engine.cc's Engine:: functions and their helpers) may call and read; private:
/// the steps of the sender, the receiver, the path and UD machinery, which only Core's own
/// methods call.
class Core {
 public:
  // ---- Engine's (engine.cc): what its API calls, and the tables it reads and writes ----
  explicit Core(const EngineConfig& c);
  EngineConfig cfg;
  EngineStats stats;
  std::vector<Mr> mrs;    // slot index = key >> 8
  std::vector<Srq> srqs;  // id = index + 1
  std::deque<uint32_t> free_mrs;
  // Registered MRs: what EngineConfig::max_mrs caps (mrs may hold more slots: freed, retired).
  size_t live_mrs = 0;
  std::vector<Cq> cqs;                   // CqId = index + 1
  std::vector<std::unique_ptr<Qp>> qps;  // slot = qpn - 1
  std::deque<uint32_t> free_qpns;
  size_t live_qps = 0;
  uint16_t planes_drained = 0;  // Engine::set_plane_drained, bit per plane
  SharedHealth health;          // path health shared by the QPs (paths.h)
  // Per peer: before this time a new word of a dead port resends only the packets of the QP
  // that got it, not those of every QP to the peer (on_peer_ports: one sweep per `hold`).
  std::unordered_map<PeerId, Time> port_sweep_after;
  std::deque<Qpn> ready;        // QPs that may have data to send
  std::deque<Qpn> ackq;         // QPs owing an ACK
  std::deque<Control> ctrl;     // NACKs, probe replies
  std::deque<Event> events;
  // ---- timers: a min-heap of {time, QP, generation} with, per QP slot, what is in it and what
  // is due ----
  /// One heap entry. `gen` is its slot's generation when it was pushed: of the entries of one
  /// slot only the one whose gen is the slot's speaks for the QP (TimerSlot). Ordered by time,
  /// then generation, so that at one time a QP's superseded entries come before its live one
  /// and are dropped as they reach the front (a generation that wrapped only changes the order).
  struct Deadline {
    Time at;
    Qpn qpn;
    uint32_t gen;
    bool operator<(const Deadline& o) const { return at < o.at || (at == o.at && gen < o.gen); }
    bool operator>(const Deadline& o) const { return o < *this; }
  };
  static_assert(sizeof(Deadline) == 16);
  /// Per QP slot (qpn - 1), in a dense array beside the heap, not in the cold Qp: a popped
  /// entry is judged by this alone. `gen` names the one heap entry that speaks for the QP (each
  /// push takes a new generation; clear_timer_slot moves it on too, so a QP reset or destroyed,
  /// and the next QP in its slot, never meet its old entries); `scheduled` is that entry's time
  /// (kNever: none). Every other entry of the slot is superseded, dropped when popped or
  /// compacted, whatever its time: before generations an entry left at time T matched again
  /// once the QP was rescheduled at T (a READ's RTO staying put while the delayed ACK is armed
  /// and cancelled per message added one per ACK; issue 14). 32 bits never wrap onto a
  /// superseded entry: a slot's generation moves by one per push, and compact_heap drops every
  /// superseded entry at least once per 1,025 + 2 x (entries it kept last) pushes. `due` is
  /// the QP's real next deadline (Qp::timers.next()), written by reschedule whenever it
  /// changes, earlier, later or cancelled. Invariant: due >= scheduled (an earlier due is pushed at once). The live entry
  /// of a QP whose due moved later is re-pushed at its due (dropped when kNever) without
  /// touching the Qp, so a cancelled or postponed timer never runs the QP's timeouts (issues
  /// 14 and 17). 24 bytes: two times and the generation (the 4 bytes of padding are free).
  struct TimerSlot {
    Time scheduled = kNever;
    Time due = kNever;
    uint32_t gen = 0;
    /// Whether `d` (an entry of this slot) is the one that speaks for the QP.
    bool live(const Deadline& d) const { return d.gen == gen && scheduled != kNever; }
  };
  std::vector<Deadline> heap;         // min-heap by time, then generation (std::greater)
  std::vector<TimerSlot> timer_slots;  // by QP slot, as qps (grown with it)
  std::deque<UdOut> udq;       // UD SENDs to transmit, in posting order (ud.cc)
  struct UdPaths {
    std::vector<Path> paths;  // Engine::set_ud_paths
    uint32_t cursor = 0;      // the next to try when a datagram's own path is held
  };
  std::unordered_map<PeerId, UdPaths> ud_paths;  // by peer (ud.cc ud_path)
  std::map<McastGid, std::vector<Qpn>> mcast;    // attached QPs by group (ud.cc)
  wire::Packet rx_pkt;                           // decode target, reused (no per-datagram init)
  wire::Packet peek_pkt;                         // Engine::write_target's decode target
  // The last WRITE payload placed (accept_write, only while `placement`): where
  // Engine::predict_placement starts.
  struct LastWrite {
    Qpn qpn = 0;  // 0: none
    uint32_t token = 0;  // the QP's local token then (a second guard: forget_last_write)
    uint32_t psn = 0;
    uint32_t rkey = 0;
    uint64_t addr = 0;  // the message's first byte (iova)
    uint32_t offset = 0;
    uint32_t payload_len = 0;
    uint32_t msg_len = 0;
  } last_write;
  /// Forgets last_write if it names slot `qpn` (a QP created, reset or destroyed there). A QP
  /// reset and reconnected to the same peer, or a new QP in a reused slot, may get the same
  /// token and starting PSN (verbs derives both from the QP numbers), and its fresh scoreboard
  /// would make the old message's later PSNs look unreceived: a prediction from before would
  /// point the kernel into a WRITE that already completed.
  void forget_last_write(Qpn qpn) {
    if (last_write.qpn == qpn) last_write = {};
  }
  // EngineConfig::rx_placement with EngineConfig::copy left at memcpy: accept_write records
  // last_write, predict_placement answers.
  bool placement = false;
  uint32_t burst = 0;  // packets the front ready QP sent in a row
  /// Packets a ready QP sends in a row before the next QP's turn (consecutive packets batch
  /// well in the driver).
  static constexpr uint32_t kBurst = 16;
  /// At the start of a QP's turn (poll_transmit): the two QPs whose turns come next are asked
  /// for, ahead of time, in two steps one turn apart (a software pipeline): the lines of the one
  /// after next (Qp::prefetch_send: no loads), the blocks of the next, whose lines the turn
  /// before asked for (Qp::prefetch_send_blocks: its pointers, now cached, then their blocks).
  /// A turn (16 packets) is far longer than a fetch from memory, so with thousands of QPs
  /// taking turns a QP's state is there when its turn comes, fetched beside other work.
  void prefetch_turns();
  /// The QP a received datagram names, asked for before the datagram is decoded and checked
  /// (wire::peek: a hint, never trusted): a data packet's receive lines (Qp::prefetch_recv).
  void prefetch_rx(std::span<const uint8_t> bytes) {
    const wire::Peek k = wire::peek(bytes);
    if (!wire::is_data(k.kind) || k.dst_qpn == 0 || k.dst_qpn > qps.size()) return;
    if (const Qp* q = qps[k.dst_qpn - 1].get()) q->prefetch_recv();
  }
  /// tx_pkt with its common header set for a packet of `q` to its peer.
  wire::Packet& tx_header(const Qp& q, wire::Kind kind, uint32_t ev, uint32_t psn, Time now) {
    wire::CommonHeader& h = tx_pkt.common;
    h.version = wire::kVersion;
    h.kind = kind;
    h.flags = 0;
    h.net_flags = 0;
    h.dst_qpn = q.attr.dest_qpn;
    h.token = q.attr.remote_token;
    h.ev = ev;
    h.psn = psn;
    // 0 means "no timestamp" to the peer (no RTT sample from its echo): a packet sent at
    // time 0 (a simulation's first instant) is stamped 1 ns instead of going unmeasured.
    h.ts = static_cast<uint64_t>(std::max<int64_t>(now.count(), 1));
    return tx_pkt;
  }

  // lookup
  Qp* qp(Qpn qpn);
  const Mr* mr(uint32_t key) const;
  /// The MR of `key` if `q` may use it (same protection domain), else null.
  const Mr* mr(uint32_t key, const Qp& q) const { return mr_in(key, q.init.pd); }
  Srq* srq(uint32_t id) {
    return id == 0 || id > srqs.size() || !srqs[id - 1].live ? nullptr : &srqs[id - 1];
  }

  // scheduling
  void make_ready(Qp& q);
  /// Records q's next deadline (after any change of q.timers: earlier, later or cancelled)
  /// and puts it in the heap if it is earlier than the QP's entry there; a later one is
  /// re-pushed when that entry comes to the heap's front (settle_heap, Engine::on_timeout).
  void reschedule(Qp& q) {
    TimerSlot& s = timer_slots[q.qpn - 1];
    const Time t = q.timers.next();
    s.due = t;
    if (t >= s.scheduled) return;
    s.scheduled = t;
    heap.push_back({t, q.qpn, ++s.gen});
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    if (heap.size() > 1024 + 2 * heap_kept) compact_heap();
  }
  /// Forgets slot `qpn`'s timers (a QP created, reset or destroyed there): its entries in the
  /// heap are superseded (the generation moves on; it is never reset, so an entry of a QP
  /// gone from the slot cannot speak for the next one).
  void clear_timer_slot(Qpn qpn) {
    if (timer_slots.size() < qpn) timer_slots.resize(qpn);
    TimerSlot& s = timer_slots[qpn - 1];
    s = TimerSlot{kNever, kNever, s.gen + 1};
  }
  /// Makes the heap's front a real deadline: pops superseded entries and re-pushes those whose
  /// QP's due moved later at that due (drops them when it is kNever). Reads the dense slots
  /// only, never a Qp. Each pop here answers one earlier push.
  void settle_heap();
  /// The earliest real deadline (after settle_heap), kNever when none.
  Time next_deadline() {
    if (heap.empty()) return kNever;
    const Deadline& d = heap.front();
    const TimerSlot& s = timer_slots[d.qpn - 1];
    if (s.live(d) && s.due <= d.at) return d.at;  // the common case: nothing moved
    settle_heap();
    return heap.empty() ? kNever : heap.front().at;
  }

  // completions / errors
  /// Moves q to ERROR: the WQE `culprit` (an sq_ sequence number, or the
  /// oldest when UINT64_MAX) completes with `cause`, every other WR with
  /// WR_FLUSH_ERR; emits kQpFatal unless `fatal_event` is false (the app moved the QP to
  /// ERROR itself: a HCA reports only errors it detects, and programs such as UCX destroy the
  /// QP right after, so an event naming it would outlive it).
  void fail_qp(Qp& q, WcStatus cause, uint64_t culprit = UINT64_MAX, bool fatal_event = true);

  // sender (sender.cc)
  /// `internal`: a WR of the engine's own (a rendezvous READ or FIN, tm.cc): past max_send_wr,
  /// and completing only on error whatever sq_sig_all says.
  Status<Error> post_send(Qp& q, const SendWr& wr, bool internal = false);
  std::optional<Transmit> send_data(Qp& q, Time now, std::span<uint8_t> buf);
  /// False: refused (it acknowledges PSNs never sent), counted as Drop::kBadAck.
  bool on_ack(Qp& q, Time now, const wire::Packet& p);
  void on_nack(Qp& q, Time now, const wire::Packet& p);
  void sender_timeout(Qp& q, Time now);
  /// Empties every EV's list and relinks what is in flight (after the path set changed).
  void ev_list_sync(Qp& q);
  /// Packets in flight on `planes` (bit per plane) can no longer arrive (a port with no link,
  /// ours or the peer's): lost now, with no blame (no EV, plane or window pays), for resending
  /// on the other planes. Nothing to do (the per-ACK case) unless one of those planes has
  /// packets of q in flight.
  void lose_planes(Qp& q, uint16_t planes, Time now);
  /// The peer's word on its ports (`ports_down` of an ACK or a data packet that q got): the
  /// shared view holds those planes for every QP to the peer, and when the word is new, every
  /// other QP to it resends at once (lose_planes) what it has in flight there. That QP may
  /// have no ACK of its own to come (its other packets all trimmed: NACKs carry no
  /// ports_down), no RTT sample (so no tail probe), and its window full of those packets:
  /// only its RTO would find them. q's own packets are the caller's (after its ACKs). The
  /// sweep visits every QP slot, at most once per SharedHealth::Policy::hold per peer
  /// (port_sweep_after): a peer whose word flips on every packet does not make each packet
  /// cost a scan.
  void on_peer_ports(Qp& q, uint16_t down, Time now);
  // A fresh window for q from its profile (Qp::cc absent when there is none), learning its
  // base RTT when the profile is the automatic one.
  void start_cc(Qp& q);
  // One base RTT sample for q.cc_rtt (a QP with CC that learns its base: cc_auto; else nothing),
  // re-deriving the QP's NSCC constants when the estimate moves (policy.h BaseRttFilter).
  void learn_base_rtt(Qp& q, Time now, Duration rtt);
  // Once per QP that learns its base RTT (cc_auto), at its first sign of congestion (a CE mark,
  // a loss): one PROBE, whose reply is a base sample that skipped the data queue.
  void probe_base_rtt(Qp& q);
  // Gives q's live window cc_config(q), keeping the window (q.cc is set).
  void reconfig_cc(Qp& q);

  // tag matching (tm.cc): the Engine API's part
  /// Makes SRQ `id` a tag-matching one (Engine::create_tm_srq; `cq` checked, held).
  void make_tm(uint32_t id, CqId cq, uint32_t max_tags);
  Result<uint32_t, Error> post_srq_op(uint32_t srq, const SrqOp& op);
  /// Forgets q's tag-matching state (its receives flushed or the QP gone).
  void tm_forget(Qpn q);

  // paths (engine.cc)
  void ev_events(Qp& q);  // turns ev_scratch into engine events, re-arms probes
  void path_timeout(Qp& q, Time now);
  /// How long a plane q probes as drained stays held for its peer: until q's next probe
  /// (a relapse wait can be longer than probe_interval_max), at least probe_interval_max.
  Time drained_hold_end(const Qp& q, Time now) const;
  void on_probe_reply(Qp& q, Time now, const wire::Packet& p);
  std::vector<EvEvent> ev_scratch;

  // memory windows (mw.cc)
  /// Leaves window `w` bound to nothing (its MR's count of windows drops).
  void unbind(Mr& w);
  /// Unbinds the window of `key` if it is one of `pd`; false if not.
  bool invalidate_window(uint32_t key, uint32_t pd);
  /// Engine::bind_mw and Engine::post_local.
  Status<Error> bind_window(uint32_t key, uint32_t new_key, uint32_t mr, uint64_t addr,
                            uint64_t len, uint32_t access, uint32_t pd);
  Status<Error> post_local(Qpn qpn, uint64_t wr_id, WcOpcode op, bool signaled);

  // unreliable datagrams (ud.cc)
  /// A datagram for a UD QP (or a UD_SEND for another): Q_Key and state checked, the next
  /// receive takes the GRH and data, or it is dropped and counted. Never answered.
  void on_ud(Qp& q, const wire::Packet& p);
  /// A datagram to kMulticastQpn: to each QP attached to its GRH's dgid (on_ud each).
  void on_ud_mcast(const wire::Packet& p);
  /// Takes `qpn` off every group (destroy_qp).
  void mcast_forget(Qpn qpn);
  /// The next queued UD SEND as a datagram (its send completes now), or nullopt.
  std::optional<Transmit> ud_transmit(Time now, std::span<uint8_t> buf);

  // receiver (receiver.cc)
  /// A data packet for q: checked against the QP, its window and the memory it names, then
  /// taken by its opcode's accept_* (placed, its in-order work queued) and received().
  void on_data(Qp& q, Time now, const RxInfo& rx, const wire::Packet& p);
  /// The MR that the rkey of a data packet (not a READ response) to q names, in the PD on_data
  /// checks its memory in: q's own, or on an XRC target QP the PD of the XRC SRQ of q's domain
  /// that the packet names; null when there is no such MR or SRQ (on_data refuses it).
  /// Engine::write_target's look-up.
  const Mr* data_mr(const Qp& q, const wire::DataHeader& d);
  void receiver_timeout(Qp& q, Time now);
  size_t build_ack(Qp& q, Time now, std::span<uint8_t> buf, Path* path);
  /// The ACK of what q has received (standalone or riding on data): echo, cumulative PSN,
  /// SACK, delay; resets what it acknowledges (unacked, the kAck timer).
  void fill_ack(Qp& q, Time now, wire::AckHeader& a);
  /// Whether the ACK that message-ending packet `h` asks for waits for the app's reply
  /// (EngineConfig::ack_rides): a one-packet message that is no READ response, the peer reads
  /// trailers, the last message got a reply, no late reply lately (RecvState::ride_skip,
  /// counted down here), and the RTO leaves room for the wait.
  bool waits_for_reply(Qp& q, const wire::CommonHeader& h);
  /// An ACK that waited for a reply went without one (its timer, or the peer resent):
  /// stop waiting until a reply is quick again, and back off (RecvState::ride_skip).
  void ride_missed(Qp& q);

  void nack(Qp& q, const wire::Packet& p, const RxInfo& rx, wire::NackReason r);

 private:
  // ---- Core's own steps: called only from Core's methods (sender.cc, receiver.cc, ud.cc,
  // mw.cc, engine.cc's Core:: functions), never by the Engine API directly ----
  wire::Packet tx_pkt;  // encode source, reused
  void copy(void* dst, const void* src, size_t n) const { cfg.copy(dst, src, n); }

  // lookup
  /// The MR of `key` if it is in protection domain `pd`, else null.
  const Mr* mr_in(uint32_t key, uint32_t pd) const {
    const Mr* m = mr(key);
    return m && m->pd == pd ? m : nullptr;
  }
  /// For an XRC target QP: the XRC SRQ of q's domain that `srqn` names, else null.
  Srq* xrc_srq(const Qp& q, uint32_t srqn) {
    Srq* s = srq(srqn);
    return s && s->xrc.xrcd && s->xrc.xrcd == q.init.xrcd ? s : nullptr;
  }
  /// For an XRC target QP: makes receive number `msn` one of `s`'s (slots before it are held
  /// for their own messages' SRQs); false when `s` has none left (RNR) or q.rcv.rq is full.
  bool xrc_take(Qp& q, uint32_t msn, Srq& s, uint32_t srqn);
  /// Every segment still lies in a registered MR (none was deregistered since).
  /// Resolves r.posted into r.sg against the MRs as they are now (key of q's pd, range, local
  /// write); false if one fails (the receive's local protection error).
  bool resolve_recv(const Qp& q, RecvWqe& r) const;
  /// For a QP on an SRQ: moves receives from the SRQ into q.rcv.rq, in order, until receive
  /// number `msn` is there (or the SRQ or q.rcv.rq's room runs out); raises the SRQ's limit event.
  void srq_take(Qp& q, uint32_t msn);
  bool live(std::span<const Seg> sg) const {
    for (const Seg& g : sg)
      if (!mr(g.key)) return false;
    return true;
  }

  // scheduling
  void want_ack(Qp& q);
  /// Drops the superseded entries (those that are not the one their slot's `gen` names).
  /// Visits the heap's entries only, never the QPs that have none; runs after at least
  /// 1,024 + the entries it kept last time were added, so O(1) per insertion.
  void compact_heap();
  size_t heap_kept = 0;  // entries the last compaction kept

  // completions / errors
  void complete(Qp& q, CqId cq, const Completion& c);

  // sender (sender.cc)
  bool has_data(const Qp& q, Time now) const;
  /// The next new WQE must wait: it is fenced and an earlier READ is still outstanding, or
  /// it is a READ or atomic and kMaxReadResponses of them are outstanding (what a responder
  /// runs at once: more would be refused with RNR NACKs and resent, as an IB requester
  /// holds READs and atomics past its initiator depth).
  bool fenced(const Qp& q) const;
  void complete_sends(Qp& q);
  void read_response_done(Qp& q, uint32_t msn);
  void queue_read_response(Qp& q, const Action& a);
  /// Runs an atomic request once, in PSN order (a duplicate request never reaches here: the
  /// scoreboard drops it), and queues its READ_RESP carrying the value before the operation:
  /// the response keeps that value until ACKed, so a lost response is resent, not re-run.
  void execute_atomic(Qp& q, const Action& a);
  /// NACKs the peer's READ request `req_psn` with REMOTE_ACCESS after it was
  /// accepted (its MR was deregistered since): the requester fails that READ.
  void refuse_read(Qp& q, uint32_t req_psn);
  /// Unlinks psn from the sent-order list and its EV's list. The list operations run for
  /// every packet sent and acknowledged: inline, defined in sender.cc (their only user).
  inline void list_remove(Qp& q, uint32_t psn);
  /// Links psn (its path set) at the tail of the sent-order list and of its EV's list.
  inline void list_append(Qp& q, uint32_t psn);
  /// Links psn (its path set) at the tail of its EV's list only.
  inline void ev_list_append(Qp& q, uint32_t psn);
  /// Applies the shared view's held planes to q's sprayer if they may have changed.
  void sync_health(Qp& q, Time now) {  // per packet sent: the fast check inline
    if (!q.health || (q.health_epoch == health.epoch() && now < q.health_recheck)) return;
    resync_health(q, now);
  }
  // The shared view changed (or a hold ended): held planes and held EVs for q; q (about to
  // send) takes the probes of EV holds that ran out (SharedHealth::ev_probe_due).
  void resync_health(Qp& q, Time now);
  void mark_lost(Qp& q, uint32_t psn, Time now, Time not_before, LossKind why,
                 LossRule rule = kLostOther);
  void ack_psn(Qp& q, uint32_t psn, Time now, AckTally* acked);
  /// Packet p, declared lost, arrived after all: counted once (QpStats::spurious_losses and
  /// its rule's counter), RACK's reorder window widens (LossDetector::on_spurious; not for a
  /// tail probe's or RTO's resend found `echoed`, from an ACK's echo of its earlier copy),
  /// and the window gets back what the loss took.
  void spurious_loss(Qp& q, TxPkt& p, bool echoed);
  void ack_through(Qp& q, uint32_t cum, Time now, AckTally* acked);
  void detect_losses(Qp& q, Time now);
  void after_acks(Qp& q, Time now, bool progress);
  /// A READ's or atomic's response acknowledges its request and every PSN before it (`cum`:
  /// the request's last PSN + 1), as in IB: the responder runs a request only once all of
  /// them have arrived, and sends no ACK of its own for one it answers at once (received()).
  void ack_by_response(Qp& q, uint32_t cum, Time now);
  void arm_rto(Qp& q, Time now);
  bool waiting_on_peer(const Qp& q) const;
  // The constants q's window should run with now: its profile, or the automatic one derived
  // with cc_base; rate hints applied. nullopt: no window (CC off, no profile).
  std::optional<NsccConfig> cc_config(const Qp& q) const;
  /// The window holds no room for another packet; a pending tail loss probe goes anyway (a
  /// window of one or two packets can be filled by the very losses the probe is to reveal).
  bool cwnd_full(const Qp& q) const {
    return q.cc && !q.loss.tlp_go && q.snd.bytes_in_flight > 0 &&
           !q.cc->can_send(q.snd.bytes_in_flight);
  }

  // paths (engine.cc)
  /// Queues a PROBE of q on its EV `index`; seq: PathSet's probe sequence (0: a probe of
  /// the shared view, SharedHealth::ev_probe_due, which PathSet does not count).
  void send_probe(Qp& q, uint16_t index, uint32_t seq);
  std::vector<ProbeRequest> probe_scratch;
  uint32_t events_dropped = 0;
  void push_event(const Event& e);

  // memory windows (mw.cc)
  /// Writes q's local completions whose turn has come (every WQE before them completed).
  void complete_local(Qp& q);

  // unreliable datagrams (ud.cc)
  Status<Error> ud_post_send(Qp& q, const SendWr& wr);
  /// The path a datagram to `d` takes at `now`: d.path unless held (Engine::set_ud_paths).
  Path ud_path(const UdDest& d, Time now);

  // receiver (receiver.cc)
  /// One data packet on its way through on_data: what the checks of every opcode share.
  struct RxData {
    Qp& q;
    const wire::Packet& p;
    const RxInfo& rx;
    Srq* xs;      // an XRC target QP: the message's XRC SRQ (else null)
    uint32_t pd;  // the PD its memory is checked in (XRC: its SRQ's)
    Action act;   // the in-order work at its message's last PSN (kNone: none)
    bool tm_wait = false;  // tm_take: the message cannot be classified yet (refuse_no_recv)
  };
  // Each false when the packet was refused (counted, NACKed where the peer must hear of it).
  bool accept_write(RxData& x);     // WRITE, WRITE_WITH_IMM
  bool accept_send(RxData& x);      // SEND, SEND_WITH_IMM (and with invalidate)
  bool accept_read_req(RxData& x);  // READ request: holds a response slot
  bool accept_atomic(RxData& x);    // CMP_SWAP, FETCH_ADD: hold a response slot
  bool accept_atomic_write(RxData& x);
  bool accept_read_resp(RxData& x, Time now);  // our READ's (or atomic's) response
  /// Counts `why` and NACKs the packet with `r`; false (for the accept_* to return).
  bool refuse(RxData& x, Drop why, wire::NackReason r);
  /// The receive of message `msn` is in q.rcv.rq (taken from the SRQ when the QP has one).
  bool have_recv(RxData& x, uint32_t msn);
  /// have_recv's refusal: NACKed NO_RESOURCE (RNR), or PSN_OUT_OF_WINDOW (resent a little
  /// later, no loss blamed) when a tag-matching SRQ's message must wait for its first packet
  /// or an earlier message's (RxData::tm_wait).
  bool refuse_no_recv(RxData& x);

  // ---- tag matching (tm.cc): the receiver's part ----
  // Messages of QPs on a tag-matching SRQ, classified and not yet completed, by (QP, MSN);
  // rendezvous READs in flight, by (QP, send WQE sequence number).
  std::map<std::pair<Qpn, uint32_t>, TmMsg> tm_msgs;
  struct TmRead {
    TmMsg msg;
    uint64_t wr_id = 0;  // the tag's
  };
  std::map<std::pair<Qpn, uint64_t>, TmRead> tm_reads;
  /// have_recv for a QP on tag-matching SRQ `s`: receive number `msn` is classified in MSN
  /// order at its first packet (a SEND's TM header matched against the tags, or a plain SRQ
  /// receive taken) and its slot filled in q.rcv.rq; false with x.tm_wait when it must wait.
  bool tm_take(RxData& x, Srq& s, uint32_t msn);
  /// The classification of `msn` of `q`, or null.
  const TmMsg* tm_msg(Qpn q, uint32_t msn) const {
    auto it = tm_msgs.find({q, msn});
    return it == tm_msgs.end() ? nullptr : &it->second;
  }
  /// accept_send's placement of a SEND packet into receive `r` classified as `m`: an eager
  /// match skips the TM header, a rendezvous match places nothing. False: too long for `r`.
  bool tm_place(const TmMsg* m, RecvWqe& r, const wire::DataHeader& d, const uint8_t* payload);
  /// run_action's receive completion `c` of `q` (receive `r`, number `msn`): the TM fields of
  /// its class. A rendezvous match completes `c` itself and starts its READ (the FIN and the
  /// second completion follow in tm_read_done): false, the caller completes nothing.
  bool tm_recv_done(Qp& q, uint32_t msn, const RecvWqe& r, Completion& c);
  /// complete_sends popped send WQE `seq`: if it was a rendezvous READ, the requester gets its
  /// FIN and the tag its kDataValid completion.
  void tm_read_done(Qp& q, uint64_t seq);
  /// A READ or atomic holds one of the responder's kMaxReadResponses until its response is
  /// acknowledged; past them it is refused (RNR) and resent.
  bool take_response_slot(RxData& x);
  /// The word an atomic request (`need` kRemoteAtomic, `len` 16) or an atomic write
  /// (kRemoteWrite, 8) works on: the QP and the MR grant `need` (else NACK REMOTE_ACCESS),
  /// `len` bytes sent to an address 8-byte aligned in the MR and in memory (else
  /// REMOTE_INVALID, as IB treats a misaligned atomic); null once NACKed.
  const Mr* atomic_word(RxData& x, uint32_t need, uint32_t len);
  /// An accepted data packet: marked in the scoreboard, its action queued, the in-order work
  /// run as cum passes it, and the ACK policy applied.
  void received(Qp& q, Time now, const RxInfo& rx, const wire::Packet& p, uint32_t ahead,
                const Action& act);
  /// The newest data packet's echo fields and path, for the next ACK.
  void note_rx(Qp& q, Time now, const RxInfo& rx, const wire::CommonHeader& h);
  void run_action(Qp& q, Action& a);
};

}  // namespace mrc::engine
