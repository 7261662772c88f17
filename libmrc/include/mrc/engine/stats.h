// Plain counter structs of the engine. Counters only grow; read them as snapshots.
// Threading: owned by the engine; copy them out under the engine's owner.
#pragma once

#include <array>
#include <cstdint>

namespace mrc::engine {

/// Why a received datagram was dropped. Every drop is counted under one reason.
enum class Drop : uint8_t {
  kMalformed,       // wire decode failed (see malformed_by_error)
  kUnknownQp,       // dst_qpn names no QP
  kBadToken,        // token does not match the QP
  kQpNotReady,      // QP not in RTR/RTS (or SQD)
  kPsnOutOfWindow,  // data PSN beyond the receive window (NACKed)
  kDuplicate,       // data PSN already received (re-ACKed, not placed again)
  kBadAck,          // ACK/NACK acknowledging PSNs never sent
  kTrimmed,         // trimmed data packet (NACKed, counted here as well)
  kNoReceive,       // SEND/WRITE_IMM with no receive posted (NACKed NO_RESOURCE)
  kRemoteAccess,    // WRITE/READ refused by key, bounds or access (NACKed)
  kWimmLimit,       // WRITE_IMM past the QP's max_wimm_dest (NACKed; the QP fails)
  kCount
};
const char* to_string(Drop d);

struct EngineStats {
  uint64_t rx_datagrams = 0;
  uint64_t tx_datagrams = 0;
  uint64_t rx_bytes = 0;
  // WRITE payload bytes placed in registered memory: copied there from the driver's buffer,
  // or found already in place (the driver's receive placement, Engine::predict_placement).
  uint64_t rx_write_copied = 0;
  uint64_t rx_write_in_place = 0;
  uint64_t tx_bytes = 0;
  // Datagrams sent by wire::Kind value (slot = the kind byte; every kind is below 64), and of
  // those the ones flagged wire::flag::kRetransmit: what a capture of every port should count.
  std::array<uint64_t, 64> tx_by_kind{};
  uint64_t tx_retransmit_flagged = 0;
  uint64_t plane_holds = 0;  // planes held down by the shared path health (paths.h SharedHealth)
  uint64_t ev_holds = 0;     // EV values held by the shared path health (any peer)
  uint64_t ud_rerouted = 0;  // UD datagrams sent off the path their WR named (it was held)
  std::array<uint64_t, static_cast<size_t>(Drop::kCount)> drops{};
  // Indexed by wire::WireError value (1..7); kBadField (8, only in connectionless ADDR
  // messages the UDP driver takes before the engine) lands in slot 0.
  std::array<uint64_t, 8> malformed_by_error{};
  uint64_t drops_total() const {
    uint64_t n = 0;
    for (auto d : drops) n += d;
    return n;
  }
  uint64_t dropped(Drop d) const { return drops[static_cast<size_t>(d)]; }
  /// Counts one datagram dropped for `d`.
  void drop(Drop d) { ++drops[static_cast<size_t>(d)]; }
};

/// Per-QP counters. In the order a packet touches them (the engine keeps one per QP, and with
/// thousands of QPs each line of it a packet touches is a cache miss): the first 64 bytes are
/// what a sending end counts per packet, ACK and completion, the next 64 what a receiving end
/// counts per data packet and ACK; the rare ones last. Read them by name: the order is not an
/// interface.
struct QpStats {
  // ---- sending end, per packet, ACK, completion ----
  uint64_t tx_data_packets = 0;   // first transmissions
  uint64_t tx_payload_bytes = 0;  // first transmissions only
  uint64_t rx_acks = 0;
  uint64_t rtt_samples = 0;
  uint64_t srtt_ns = 0;      // smoothed RTT, ns (last value)
  uint64_t min_rtt_ns = 0;   // lowest RTT seen, ns
  uint64_t completions = 0;  // completions written (both queues)
  uint64_t error_completions = 0;
  // ---- receiving end, per data packet and ACK ----
  uint64_t rx_data_packets = 0;  // accepted (placed) data packets
  uint64_t rx_payload_bytes = 0;
  uint64_t tx_acks = 0;
  uint64_t tx_nacks = 0;
  // ---- losses, resends, NACKs ----
  uint64_t tx_retransmits = 0;  // retransmitted data packets
  uint64_t rx_nacks = 0;
  uint64_t rto_fired = 0;        // retransmission timeouts
  uint64_t fast_losses = 0;      // packets declared lost from SACK/RACK before a timeout
  uint64_t spurious_losses = 0;  // packets declared lost whose first transmission was acked
  uint64_t tail_probes = 0;      // tail loss probes (newest packet resent after 2 SRTT of silence)
  uint64_t rnr_naks = 0;         // NO_RESOURCE NACKs received
  // RACK's share of the above: packets its cross-EV rule declared lost (the rest of
  // fast_losses is its per-EV rule), and the spurious losses each of its rules had declared
  // (the rest of spurious_losses: tail probes, RTOs, NACKs).
  uint64_t cross_ev_losses = 0;
  uint64_t spurious_per_ev = 0;
  uint64_t spurious_cross_ev = 0;
  // ACKs that rode on data (EngineConfig::ack_rides; counted in tx_acks / rx_acks too).
  uint64_t tx_ack_rides = 0;
  uint64_t rx_ack_rides = 0;
};

struct PathStats {
  uint64_t tx_packets = 0;  // data packets sent on this EV (incl. retransmits)
  uint64_t tx_bytes = 0;
  uint64_t acked = 0;      // data packets sent on this EV and acknowledged
  uint64_t lost = 0;       // data packets sent on this EV and declared lost
  uint64_t trims = 0;      // NACK TRIMMED received for this EV
  uint64_t ecn_marks = 0;  // ACKs echoing ECN CE for this EV
  uint64_t rtt_ns = 0;     // last RTT sample on this EV (data or probe), ns; kept in 32 bits
                           // by the engine: a sample above 4.29 s reads 4.29 s
  uint64_t probes = 0;     // probes sent on this EV
  uint64_t probe_replies = 0;
};

}  // namespace mrc::engine
