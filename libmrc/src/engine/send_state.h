// A QP's send (requester) state: the WQEs it sends and the READ responses it owes, and
// one record per PSN in flight with the sent-order list through them. The sender's logic is
// Core's (sender.cc), which also keeps each EV's list of its packets in the EV's record
// (PathSet::Ev); this type holds the state and what needs nothing else (indexing, growth).
// Threading: plain value type, owned by its QP (engine thread).
//
//   sq    app send WQEs, completed in posting order
//   rsp   READ responses this QP owes its peer (internal, never completed to the app)
//   tx    one record per PSN in flight [snd_una, snd_nxt), ring indexed by PSN
//   sent-order list: the in-flight PSNs ordered by last transmission time;
//         its head drives the RTO and the cross-EV loss backstop
//   retx  PSNs declared lost, to resend on a different path
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/queues.h"
#include "mrc/engine/engine.h"

namespace mrc::engine {

/// "No PSN" in the sent-order list links: wider than a PSN, since every 32-bit value is one.
inline constexpr uint64_t kNoLink = UINT64_MAX;

/// One send WQE: 128 bytes, cache-line aligned, so that posting one writes two lines, not three.
struct alignas(64) SendWqe {
  uint64_t wr_id = 0;
  Opcode op = Opcode::kWrite;
  bool signaled = true;
  bool solicited = false;
  bool is_read_resp = false;  // in rsp_: data we owe for the peer's READ #msn
  uint32_t msn = 0;  // SEND/WRITE_IMM: receive number at the peer; READ: read number
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;
  uint64_t len = 0;
  SgList sg;  // local memory (for READ: where the response lands); one segment inside
  std::vector<uint8_t> inline_buf;
  uint32_t npkts = 0;  // packets in the message (READ request: 1)
  uint32_t sent = 0;   // packets given a PSN so far
  uint32_t acked = 0;  // packets acknowledged
  uint32_t first_psn = 0;
  uint32_t req_psn = 0;     // READ response: the PSN of the peer's READ request
  bool read_done = false;   // READ: the whole response arrived
  bool fence = false;       // waits for earlier READs before its first packet (SendWr::fence)
  bool invalidate = false;  // SEND: the peer invalidates window `rkey` (SendWr::invalidate)
  uint32_t xrc_srqn = 0;    // XRC initiator: the peer's SRQ (SendWr::xrc_srqn); responses 0
  WcStatus status = WcStatus::kSuccess;
};
static_assert(sizeof(SendWqe) == 128);

/// One PSN in flight: 48 bytes, so that a 16-packet message writes 12 cache lines of the ring,
/// not 16 (each a miss when thousands of QPs take turns). What only a lost packet needs (its
/// earliest resend) is beside the ring (SendState::not_before); the WQE is named by the low
/// 32 bits of its sequence number (SendState::wqe_seq), the flags are bits.
struct TxPkt {
  enum State : uint8_t { kFree, kInFlight, kLost, kAcked };
  Time sent{0};         // last transmission
  uint64_t xseq = 0;    // transmission order of the last transmission (QP-wide counter)
  uint32_t wqe = 0;     // low 32 bits of its WQE's sequence number in sq or rsp (wqe_seq)
  uint32_t offset = 0;  // byte offset in the message
  uint16_t len = 0;     // payload bytes
  uint16_t path = 0;    // index into the QP's paths of the last transmission
  uint8_t tx_count = 0;
  uint8_t plane = 0;      // plane of the last transmission (PathSet's in-flight count)
  uint8_t state = kFree;  // a State (a whole byte: read and written per packet)
  bool rsp : 1 = false;   // wqe indexes rsp (else sq)
  bool first : 1 = false;
  bool last : 1 = false;
  bool blamed : 1 = false;  // declared lost by RACK or an RTO, and its window took the MTU
  // Which rule declared it lost last (a LossRule: QpStats splits its spurious losses by it).
  uint8_t lost_by : 2 = 0;
  bool proven : 1 = false;  // shown spurious already (counted once, however many copies arrive)
  // Links (PSNs) of the sent-order list and of its EV's list; a link to the packet's own
  // PSN means none (a packet never follows itself).
  uint32_t prev = 0, next = 0;
  uint32_t ev_prev = 0, ev_next = 0;
};
static_assert(sizeof(TxPkt) == 48);

/// The hot send state, laid out as a packet's send and ACK touch it (Qp puts it in its hot
/// block). The rarer send bookkeeping (READ numbers, local completions) stays in Qp's cold part.
struct SendState {
  // Ring indexed by PSN: holds [snd_nxt - tx.size(), snd_nxt), so every PSN in flight
  // and the newest freed ones. Empty until the first send; doubles (grow()) when the
  // PSNs in flight fill it, up to max_psn_range rounded up to a power of two.
  std::vector<TxPkt> tx;
  // Beside tx, slot for slot: each lost packet's earliest resend (an RNR or out-of-window
  // NACK's delay; Time{0}: at once). Empty until the QP's first loss (a QP that loses
  // nothing never writes it); from then on as long as tx.
  std::vector<Time> tx_not_before;
  uint32_t tx_mask = 0;  // tx.size() - 1 (tx non-empty)
  uint32_t tx_cap = 0;   // most slots tx may grow to: max_psn_range at RTS, rounded up
  uint32_t snd_una = 0;  // oldest PSN not acked
  uint32_t snd_nxt = 0;  // next new PSN
  uint64_t list_head = kNoLink, list_tail = kNoLink;  // sent-order list (PSNs)
  uint64_t xseq_next = 1;                             // next transmission order number
  uint64_t bytes_in_flight = 0;                       // payload bytes of kInFlight packets
  uint64_t pkt_wqe = 0;                               // next sq WQE to packetize
  uint64_t pkt_rsp = 0;                               // next rsp WQE to packetize
  SeqRing<SendWqe> sq;
  SeqRing<SendWqe> rsp;
  Fifo<uint32_t> retx;  // lost PSNs to resend

  TxPkt& pkt(uint32_t psn) { return tx[psn & tx_mask]; }
  const TxPkt& pkt(uint32_t psn) const { return tx[psn & tx_mask]; }
  /// The sequence number of p's WQE (in rsp if p.rsp, else in sq). Exact while p is in flight
  /// or lost: its WQE is then still in its ring, [head, tail), fewer than 2^32 after the head.
  uint64_t wqe_seq(const TxPkt& p) const {
    const uint64_t head = p.rsp ? rsp.head() : sq.head();
    return head + static_cast<uint32_t>(p.wqe - static_cast<uint32_t>(head));
  }
  SendWqe& wqe(const TxPkt& p) { return p.rsp ? rsp.at(wqe_seq(p)) : sq.at(wqe_seq(p)); }
  /// The earliest resend of `psn` (lost; set by Core::mark_lost), Time{0} if none was set.
  Time not_before(uint32_t psn) const {
    return tx_not_before.empty() ? Time{0} : tx_not_before[psn & tx_mask];
  }
  /// The slot of `psn`'s earliest resend, tx_not_before made first if need be.
  Time& not_before_slot(uint32_t psn) {
    if (tx_not_before.empty()) tx_not_before.assign(tx.size(), Time{0});
    return tx_not_before[psn & tx_mask];
  }
  /// PSNs given out and not yet cumulatively acknowledged.
  size_t inflight() const { return snd_nxt - snd_una; }
  bool list_empty() const { return list_head == kNoLink; }
  uint32_t oldest() const { return static_cast<uint32_t>(list_head); }  // !list_empty()
  uint32_t newest() const { return static_cast<uint32_t>(list_tail); }
  /// The ring is full: every slot holds a PSN of [snd_nxt - tx.size(), snd_nxt) still in
  /// flight, so snd_nxt cannot be given out before grow() (or an ACK).
  bool ring_full() const { return inflight() >= tx.size(); }
  /// Asks the CPU to fetch the record the next new PSN will use (snd_nxt's slot), for
  /// writing, so that a QP whose state left the caches (thousands of QPs, each active in
  /// turn) does not wait for it when it sends: called when the QP has data to send and
  /// after each new PSN. A hint only: no state changes, nothing read.
  void prefetch_next() const {
    if (!tx.empty()) __builtin_prefetch(&tx[snd_nxt & tx_mask], 1);
  }
  /// The same for a burst: the records of the next `n` new PSNs (fewer if the ring is smaller)
  /// and the WQE next packetized (pkt_wqe: two lines, written; its first gather segment is
  /// inside it). Issued together, a turn ahead of the QP's (Core::prefetch_turns), so the
  /// fetches overlap one another and the work before that turn. A hint only: no state
  /// changes; reads the ring's and the queue's pointers (this block's lines).
  void prefetch_burst(uint32_t n) const {
    if (!tx.empty()) {
      n = std::min<uint32_t>(n, tx_mask + 1);
      // Each record's first and last byte: every line of the n records (48 bytes each).
      for (uint32_t k = 0; k < n; ++k) {
        const auto* r = reinterpret_cast<const char*>(&tx[(snd_nxt + k) & tx_mask]);
        __builtin_prefetch(r, 1);
        __builtin_prefetch(r + sizeof(TxPkt) - 1, 1);
      }
    }
    if (pkt_wqe != sq.tail()) {
      const SendWqe& w = sq.at(pkt_wqe);
      __builtin_prefetch(&w, 1);
      __builtin_prefetch(reinterpret_cast<const char*>(&w) + 64, 1);
    }
  }
  /// Doubles tx (16 slots at first, at most tx_cap), keeping each record at its PSN.
  /// (grow and restart are defined in sender.cc.)
  void grow();
  /// Starts sending from `psn` with nothing in flight (RTR -> RTS: nothing was sent, so the
  /// sent-order list is empty): the ring emptied (it grows again with what is sent), no bytes
  /// in flight.
  void restart(uint32_t psn);
};

}  // namespace mrc::engine
