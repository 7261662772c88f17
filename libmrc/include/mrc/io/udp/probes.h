// Connectionless EV probes: a probe of one path to a host, answered by that host's libmrc
// with no QP on either side. What mrcctl probe (observe/publisher.h) and the OCP controller's
// mrc_ctl_ep_batch_send_wait send. Threading: none of its own; the UdpDriver owns one and
// calls it, and lends it (UdpDriver::with_probes), only under the driver's mutex.
//
// Wire (docs/wire-format.md): a PROBE with dst_qpn 0. Its token is the prober's session
// token (random, 32 bits), psn the prober's sequence number, ev the path, ts the send time.
// The answer is a PROBE_REPLY with dst_qpn 0 and the same token, ev and psn; echo_ev = ev,
// echo_ts = ts, probe_flags kEcnEcho when the probe arrived CE-marked. The answering driver
// sends it back on the same EV (in srv6 mode the path through the same spine toward the
// prober's host, found from the probe's source address; else to the source address).
//
// Trust: anyone can send a probe, so answers are rate limited (kAnswerBurst, then
// kAnswersPerSecond); a reply counts only for an open session with its token and only on an
// EV it was probing (the consumer matches psn), so a forger must guess 32 random bits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "mrc/engine/types.h"
#include "mrc/wire/wire.h"

namespace mrc::io {

/// One answer to a connectionless probe.
struct ProbeReply {
  uint32_t seq = 0;         // the probe's psn, as the prober chose it
  engine::Path path;        // its EV, and the plane the reply came in on
  engine::Duration rtt{0};  // send to reply received, by the prober's clock
  bool ecn = false;         // the probe arrived CE-marked at the peer
  engine::Duration svc{0};  // the peer's service time, in rtt (0: not reported)
};

class Probes {
 public:
  static constexpr uint32_t kAnswerBurst = 1024;         // answers at once, then...
  static constexpr uint32_t kAnswersPerSecond = 20'000;  // ...this many a second
  static constexpr size_t kMaxRepliesHeld = 65536;       // per session, until taken

  /// Sends one datagram on `path` to `peer` (the driver's route) with the DSCP bits of IPv6
  /// traffic class `tclass` (0: the socket's; ECN stays ECT(0)); false if it could not.
  using SendFn =
      std::function<bool(engine::PeerId, engine::Path, std::span<const uint8_t>, uint8_t tclass)>;
  explicit Probes(SendFn send) : send_(std::move(send)) {}

  // ---- Prober ----
  /// A new session: its token (random, never 0, not in use). Replies carrying it are kept
  /// until taken or the session is closed.
  uint32_t open();
  void close(uint32_t token);
  /// Sends probe `seq` of session `token` to `peer` on `path`, with IPv6 traffic class
  /// `tclass` (DSCP << 2; 0: the socket's). False: no such session, or the driver had no
  /// route or the socket refused it.
  bool send(engine::Time now, uint32_t token, engine::PeerId peer, engine::Path path, uint32_t seq,
            uint8_t tclass = 0);
  /// The replies of session `token` received since the last call (none for an unknown one).
  std::vector<ProbeReply> take(uint32_t token);

  // ---- Receive side (the driver) ----
  /// Whether `p` (decoded) is a connectionless PROBE or PROBE_REPLY: dst_qpn 0.
  static bool is_connectionless(const wire::Packet& p) {
    return p.common.dst_qpn == 0 &&
           (p.common.kind == wire::Kind::kProbe || p.common.kind == wire::Kind::kProbeReply);
  }
  /// A reply arrived on `plane` at `now`: kept for its session. False: no session has its
  /// token or it does not echo its own EV (the driver counts it and drops it).
  bool on_reply(engine::Time now, const wire::Packet& reply, uint16_t plane);
  /// A probe arrived: whether the rate limit lets it be answered now (one answer taken).
  bool may_answer(engine::Time now);
  /// The answer to `probe` (arrived CE-marked when `ecn`, read `svc` ago) into `out`
  /// (>= wire::kMaxHeaderSize bytes); its length.
  static size_t build_answer(engine::Time now, const wire::Packet& probe, bool ecn,
                             std::span<uint8_t> out, engine::Duration svc = engine::Duration{0});

 private:
  SendFn send_;
  std::unordered_map<uint32_t, std::vector<ProbeReply>> sessions_;
  double budget_ = kAnswerBurst;  // answers that may go out now
  engine::Time budget_at_{0};     // when budget_ was last refilled
};

}  // namespace mrc::io
