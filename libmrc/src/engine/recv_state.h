// A QP's receive (responder) state: the scoreboard of PSNs received, the posted receives,
// the in-order work pending at messages' last PSNs, and what the next ACK echoes. The
// receiver's logic is Core's (receiver.cc); this type holds the state and what needs nothing
// else (indexing, growth). Open to additions (a receive-side matching hook would keep its
// per-QP state here).
// Threading: plain value type, owned by its QP (engine thread).
//
//   sb    RecvScoreboard (cum PSN + bitmap)
//   rq    posted receives; receive #msn is rq[msn - rq_base_msn]
//   acts  in-order work at the last PSN of a message (complete a receive,
//         run a READ, finish our READ), run as cum passes that PSN
#pragma once

#include <cstdint>
#include <vector>

#include "engine/queues.h"
#include "engine/sack.h"
#include "mrc/engine/engine.h"
#include "mrc/wire/wire.h"

namespace mrc::engine {

struct RecvWqe {
  uint64_t wr_id = 0;
  std::vector<Sge> posted;  // as the app posted them (length > 0), checked when data lands
  std::vector<Seg> sg;      // `posted` resolved by Core::resolve_recv for the packet at hand
  uint64_t capacity = 0;
  // XRC target QPs (QpInit::xrcd): the SRQ's CQ and PD this receive came with; `pending`: a
  // slot held for a message whose first packet has not come yet (xrc_take), no receive in it.
  CqId cq = 0;
  uint32_t pd = 0;
  bool pending = false;
};

/// In-order work the receiver runs when cum passes `psn` (the message's last PSN).
struct Action {
  enum Kind : uint8_t { kNone, kRecv, kRecvImm, kWriteImm, kReadReq, kReadResp, kAtomic };
  Kind kind = kNone;
  bool solicited = false;
  uint32_t psn = 0;  // the message's last PSN
  uint32_t msn = 0;
  uint32_t imm = 0;
  uint32_t len = 0;
  uint64_t addr = 0;  // READ request, atomic: remote (our) VA
  uint32_t rkey = 0;
  bool cas = false;          // atomic: compare-and-swap (else fetch-and-add)
  uint64_t compare_add = 0;  // atomic operands (host order)
  uint64_t swap = 0;
  bool invalidate = false;  // kRecv: invalidate window `rkey` (SEND_WITH_INV)
  uint32_t pd = 0;          // the PD the message's memory is checked in (XRC: its SRQ's)
};

/// The hot receive state, laid out as a data packet's receipt and its ACK touch it (Qp puts
/// it in its hot block, after the send state).
struct RecvState {
  RecvScoreboard sb;
  uint32_t unacked = 0;      // data packets since our last ACK
  uint32_t rq_base_msn = 0;  // receive number of rq.head()
  SeqRing<RecvWqe> rq;
  // Ring indexed by PSN & (size - 1) holding the pending actions, all at PSNs in
  // [sb.cum(), sb.cum() + acts.size()). Empty until a message needs one (WRITE needs
  // none); grows (grow_acts()) to cover the farthest PSN ahead, up to recv_window.
  std::vector<Action> acts;
  Path ack_path;  // path of the newest data packet (ACKs go back on it)
  Time last_rx_at{0};
  wire::AckHeader last_rx;  // echo fields of the newest data packet (ack_flags, echo_*)
  // ACKs riding on data (docs/engine.md "ACKs that ride on replies"): when the newest message
  // ended here (kNever: none yet); whether this end's last message left within ride_wait of
  // one (a ping-pong: its next ACK may wait for the reply); whether the ACK pending now waits
  // for one (Timer::kAck bounds the wait); whether the peer reads trailers (its ACKs said so);
  // waits in a row that no reply ended, and messages to ACK at once before waiting again.
  Time last_msg_at = kNever;
  bool replies = false;
  bool held = false;
  bool peer_rides = false;
  uint8_t ride_misses = 0;
  uint16_t ride_skip = 0;

  /// The slot of the action at `psn` (acts non-empty, psn within sb.cum() + acts.size()).
  Action& act(uint32_t psn) { return acts[psn & (acts.size() - 1)]; }
  /// Grows acts (16 slots at first, then doubling) to hold an action `ahead` PSNs past the
  /// scoreboard's cum; the pending actions keep their PSNs. (Defined in receiver.cc.)
  void grow_acts(uint32_t ahead);
};

}  // namespace mrc::engine
