// A host's word on its own ports (the OCP controller's PORT_STATUS_UPDATE,
// mrc_ctl_ep_batch_send_wait): it tells a peer which of its planes are up, so that the peer's
// QPs stop sending into the planes that are down (Engine::set_peer_planes_down) and come back
// when they are up again.
// Threading: none of its own; the UdpDriver owns one and calls it only under its mutex.
//
// Wire (docs/wire-format.md): a PORT_STATUS with dst_qpn 0, bound to one QP pair as an
// ADDR_QUERY is (peer_addresses.h): its token is the token the peer's QP expects in data
// packets (QpAttr::remote_token of the updating QP), target_qpn that QP, src_qpn the updating
// QP, psn the update's sequence, ports_up bit p: the updating host's plane p is up. The
// peer's driver applies it only when a QP of its own is `target_qpn`, expects that token, is
// connected back to `src_qpn` and is at RTR or later (bound()): anyone else's update is
// refused, counted and unanswered, so nobody without the QP pair's tokens can turn a host's
// traffic away from a plane. The update holds for the whole host pair (every QP between
// them), not for the one QP it names. The PORT_STATUS_ACK carries the answering QP's
// remote_token (what the updating QP expects), target_qpn = the updating QP, src_qpn the
// answering QP, and the update's psn and ports_up. The updater takes an ack only when it
// answers an open update (sequence, QP and token), else drops it (counted).
//
// Sequence (the common header's psn): the updater's driver numbers its updates from one
// counter (next_seqs), so a later update to a peer carries a later number whichever of its
// QPs sends it. The receiver keeps, per peer host, the sequence of the last update it applied
// and the QP pair that update came through, and applies only a later one: serial-number
// arithmetic (RFC 1982) on the 32-bit field, `seq - last` read as a signed 32-bit number is
// > 0, so the numbers may wrap. An earlier or repeated one (a "down" overtaken on the way by
// the "up" sent after it) is stale: counted (UdpCounters::port_status_stale), acknowledged (it
// did arrive, and the newer word holds) and not applied. An update through another QP pair
// (src_qpn or token changed: a restarted peer, or its QP replaced) starts the peer's sequence
// afresh.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/engine/types.h"
#include "mrc/wire/wire.h"

namespace mrc::io {

class PortStatusUpdates {
 public:
  static constexpr size_t kSize = wire::kCommonSize + wire::kPortStatusExtSize;  // either kind
  static constexpr size_t kMaxOpen = 4096;  // updates awaiting an ack; older ones are forgotten

  /// An acknowledged update.
  struct Ack {
    uint32_t seq = 0;         // the update's sequence, as the updater chose it
    uint16_t plane = 0;       // the plane the ack came in on
    engine::Duration rtt{0};  // update sent to ack received
  };

  // ---- Updater ----
  /// The update of local QP `qpn` (attributes `qp`, connected) saying `ports_up`, sequence
  /// `seq`, into `out` (>= kSize bytes); its length. Kept open until acked or forgotten.
  size_t build_update(engine::Time now, engine::Qpn qpn, const engine::QpAttr& qp,
                      uint32_t ports_up, uint32_t seq, std::span<uint8_t> out);
  /// A decoded PORT_STATUS_ACK that came on `plane`: false (the driver counts a drop) unless
  /// it answers an open update.
  bool on_ack(engine::Time now, const wire::Packet& ack, uint16_t plane);
  /// The acks taken since the last call.
  std::vector<Ack> take();
  /// Stops waiting for update `seq` (its ack, if it comes, is dropped).
  void forget(uint32_t seq) { open_.erase(seq); }
  /// Reserves `n` consecutive sequences for updates about to be sent; the first of them.
  /// The counter starts at 1 and wraps (the receiver compares serially).
  uint32_t next_seqs(uint32_t n) {
    const uint32_t first = next_seq_;
    next_seq_ += n;
    return first;
  }

  // ---- Receiver ----
  /// Whether `update` (a decoded PORT_STATUS) is bound to local QP `qp` (its attributes, from
  /// Engine::query_qp): the QP expects its token, is connected back to its src_qpn, and is at
  /// RTR or later.
  static bool bound(const wire::Packet& update, const engine::QpAttr& qp);
  /// Whether `update` (bound() held) from peer host `peer` is later than the last one applied
  /// for that peer (see the file comment); if so it becomes the last. False: stale, the
  /// peer's planes stay as the last one said.
  bool fresh(engine::PeerId peer, const wire::Packet& update);
  /// The ack of `update` from local QP `qpn` (bound() held) into `out` (>= kSize); its length.
  static size_t build_ack(engine::Time now, const wire::Packet& update, const engine::QpAttr& qp,
                          engine::Qpn qpn, std::span<uint8_t> out);

 private:
  struct Open {
    engine::Qpn qpn = 0;
    uint32_t token = 0;  // what the ack must carry: the updating QP's local_token
    engine::Time sent{0};
  };
  std::map<uint32_t, Open> open_;
  std::vector<Ack> acked_;
  uint32_t next_seq_ = 1;  // the updater's next sequence (next_seqs)
  /// Receiver: per peer host, the last update applied: its sequence and the QP pair it came
  /// through (the updating QP and the token it carried).
  struct Applied {
    uint32_t seq = 0;
    engine::Qpn src_qpn = 0;
    uint32_t token = 0;
  };
  std::unordered_map<engine::PeerId, Applied> applied_;
};

}  // namespace mrc::io
