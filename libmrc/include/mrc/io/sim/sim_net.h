// A deterministic discrete-event network in virtual time that drives engines (tests, demo,
// benchmarks). Threading: single-threaded. One owner builds the network, calls run_until and the
// setters, and owns the nodes; callbacks run on that thread, inside run_until.
//
// Model
// -----
// Hosts are `Node`s (an engine through `EngineNode`, or a scripted fake in tests);
// a host's PeerId is its index, in the order of add_host. The network is a set of
// directed links. A datagram goes from its sender to its receiver over a *route*:
//
//   egress_port(src, plane)  ->  route links...  ->  receiver node
//
// where `plane` is Transmit::path.plane and the route links come from the router,
// a function of (src, dst, ev, plane). RxInfo::plane is the plane of the last link
// of the route (the port it arrived on); RxInfo::ecn_ce is set when any link
// marked it.
//
// Every host has, per plane, an egress port (its NIC port: where the host is
// paced) and an ingress port (the last hop into it: where incast queues), both
// links made on first use with an infinite-rate, zero-latency config until set.
//
// Default router: add_path(a, b, plane, cfg) adds one link a->b and one b->a
// (a "spine" path of that plane) and records the routes
//   a->b: [that link, ingress_port(b, plane)]   (and likewise b->a).
// A transmit from src to dst with (ev, plane) takes path number ev % n of the n
// paths added for (src, dst, plane). No path: the datagram is dropped and
// counted in SimStats::no_route. set_router replaces this table with any
// function (a two-tier multi-plane fabric builds its own links and routes,
// typically ending them with ingress_port(dst, plane)).
//
// Links
// -----
// A link is store-and-forward: a FIFO buffer, then serialization at `rate_bps`
// (size * 8 / rate seconds, exact: the sub-nanosecond remainder carries over
// while the link stays busy), then `latency` of propagation. rate_bps == 0 is an
// infinite rate: no buffer, packets pass at once (only latency and the
// impairments apply). What happens to a datagram arriving at a link, in order:
//
//   1. link down: dropped;  blackhole: dropped (silently, links up);
//   2. patterned loss (every Nth arrival, or a bitmask over arrivals), then random loss;
//   3. corruption: one random bit of one random byte flipped;
//   4. duplication: a copy follows the original into the buffer;
//   5. with B = bytes in the buffer (waiting + in service) before it:
//      B >= trim_threshold_bytes and a data packet longer than its header: cut
//        to wire::kDataHeaderSize bytes, net_flags |= kTrimmed (and
//        kTrimmedLastHop when this link is the route's last), never dropped for
//        it; with trimmed_priority it waits in a queue served before the rest;
//      a packet that is not data (ACK, NACK, probe...) waits there too with
//        control_priority;
//      B + size > capacity_bytes: tail drop;
//      B >= ecn_threshold_bytes: ECN CE set, with probability (B - threshold) /
//        ecn_ramp_bytes while B is inside the ramp (WRED), always past it;
//   6. after serialization, with probability `reorder` an extra delay uniform in
//      [1 ns, reorder_max] is added to its propagation (it overtakes nothing in
//      this link's buffer, only on the wire).
// A link going down drops its buffer and everything it has on the wire; going
// up, it carries new arrivals again. Random draws come from a per-link
// generator seeded from (SimConfig::seed, link id), drawn only for impairments
// that are on: the same seed and inputs give the same event order, bit for bit.
//
// Driving nodes
// -------------
// The loop takes the earliest event (ties: the order they were scheduled):
// a datagram reaching a link or its receiver, a link finishing a
// serialization, a node's next_deadline, a callback from at(). After any input
// to a node (on_datagram, on_timeout) the net drains the node: poll_transmit
// into its own buffer until nullopt, copying each datagram into a pooled buffer
// the network owns. Backpressure: a node is polled only while every one of its
// egress ports holds fewer than SimConfig::port_pause_bytes (so its own port
// never tail-drops it); when a port drains below that it is polled again, at
// that instant. A full port therefore pauses the node on all planes, as a
// shared transmit ring would; a paused node whose deadline is already due gets
// on_timeout again only once it is polled again. Calls made to a node from outside (post_send
// between run_until calls, or in a callback) are picked up at the start of
// run_until and after every callback, or at once with wake().
//
// Setup mistakes (an unknown host or link id, a null node) throw
// std::out_of_range / std::invalid_argument. A node whose next_deadline() stays
// at or before now through a million on_timeout calls aborts the process with
// a message: that engine would otherwise spin forever at one virtual instant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "mrc/engine/engine.h"
#include "mrc/engine/types.h"

namespace mrc::sim {

using engine::Duration;
using engine::PeerId;
using engine::Time;
using LinkId = uint32_t;

/// "No limit" for the byte thresholds and capacities of LinkConfig.
inline constexpr uint64_t kUnlimited = UINT64_MAX;
/// Largest datagram an engine sends (8192 B payloads); SimConfig::max_datagram is what a run's
/// network carries (larger transmits are counted and dropped) and what each packet slot holds.
inline constexpr size_t kMaxDatagram = engine::kTransmitBufferSize;
/// A datagram with a 4096-byte payload and the largest header: the default max_datagram.
inline constexpr size_t kDatagram4K = 128 + 4096;

struct LinkConfig {
  Duration latency{0};                   // propagation delay
  uint64_t rate_bps = 0;                 // bits/s; 0 = infinite (no buffer, no serialization)
  uint64_t capacity_bytes = kUnlimited;  // buffer size, bytes (waiting + in service); tail drop
  // Mark CE when the buffer holds at least ecn_threshold_bytes on arrival, with a
  // probability rising from 0 to 1 across the next ecn_ramp_bytes (WRED; 0: always).
  uint64_t ecn_threshold_bytes = kUnlimited;
  uint64_t ecn_ramp_bytes = 0;
  // Trim data packets when the buffer holds at least this.
  uint64_t trim_threshold_bytes = kUnlimited;
  bool trimmed_priority = true;  // trimmed headers go before untrimmed packets
  // ACKs, NACKs and every other packet that carries no data (not wire::is_data) wait in that
  // priority queue too (a switch's control traffic class, as NDP serves its headers, ACKs and
  // NACKs before data): else an ACK waits behind the data of a congested port.
  bool control_priority = true;
};

/// Faults of one link; all off by default. Probabilities are per datagram arriving.
struct Impairments {
  double loss = 0;  // random loss probability
  uint32_t loss_every_n =
      0;  // drop arrivals n-1, 2n-1, 3n-1, ... (counted from set_impairments); 0 = off
  uint64_t loss_pattern = 0;     // drop arrival i when bit (i % loss_pattern_len) is set
  uint8_t loss_pattern_len = 0;  // 1..64; 0 = off
  double reorder = 0;            // probability of an extra propagation delay...
  Duration reorder_max{0};       // ...uniform in [1 ns, reorder_max]
  double duplicate = 0;          // probability that a copy is sent too
  double corrupt = 0;            // probability that one bit is flipped
};

/// Counters of one link. They only grow.
struct LinkStats {
  uint64_t offered = 0;    // datagrams that reached the link (duplicates not counted)
  uint64_t enqueued = 0;   // accepted (into the buffer, or passed at infinite rate)
  uint64_t delivered = 0;  // reached the far end
  uint64_t delivered_bytes = 0;
  uint64_t dropped_down = 0;  // link down: on arrival, flushed from the buffer, or cut on the wire
  uint64_t dropped_blackhole = 0;
  uint64_t dropped_loss = 0;     // random loss
  uint64_t dropped_pattern = 0;  // loss_every_n / loss_pattern
  uint64_t dropped_queue = 0;    // tail drop: buffer full
  uint64_t trimmed = 0;
  uint64_t ecn_marked = 0;  // CE set here (not counting packets already CE)
  uint64_t corrupted = 0;
  uint64_t duplicated = 0;        // copies made
  uint64_t reordered = 0;         // datagrams given extra delay
  uint64_t max_queued_bytes = 0;  // high-water mark of the buffer
  uint64_t dropped() const {
    return dropped_down + dropped_blackhole + dropped_loss + dropped_pattern + dropped_queue;
  }
};

/// Counters of the whole network. They only grow.
struct SimStats {
  uint64_t events = 0;     // events processed
  uint64_t transmits = 0;  // datagrams taken from nodes
  uint64_t delivered = 0;  // datagrams given to nodes
  uint64_t delivered_bytes = 0;
  uint64_t no_route = 0;  // transmits with no route (unknown peer, no path)
  uint64_t oversize = 0;  // transmits above SimConfig::max_datagram
};

struct SimConfig {
  uint64_t seed = 1;
  uint64_t port_pause_bytes =
      2 * kDatagram4K;  // poll a node only while each egress port holds less
  // Largest datagram carried, <= kMaxDatagram: raise it for QPs with 8192-byte payloads (a
  // packet slot holds this many bytes; at 1,024 hosts the slots are most of the memory).
  size_t max_datagram = kDatagram4K;
};

/// The driver-facing side of an engine (engine.h explains the call order).
class Node {
 public:
  virtual ~Node() = default;
  virtual void on_datagram(Time now, const engine::RxInfo& rx, std::span<const uint8_t> bytes) = 0;
  virtual void on_timeout(Time now) = 0;
  virtual std::optional<engine::Transmit> poll_transmit(Time now, std::span<uint8_t> buf) = 0;
  virtual Time next_deadline() const = 0;
};

/// An engine as a node. Header-only so that users of fake nodes need no engine code.
class EngineNode final : public Node {
 public:
  explicit EngineNode(engine::Engine& e) : e_(e) {}
  void on_datagram(Time now, const engine::RxInfo& rx, std::span<const uint8_t> bytes) override {
    e_.on_datagram(now, rx, bytes);
  }
  void on_timeout(Time now) override { e_.on_timeout(now); }
  std::optional<engine::Transmit> poll_transmit(Time now, std::span<uint8_t> buf) override {
    return e_.poll_transmit(now, buf);
  }
  Time next_deadline() const override { return e_.next_deadline(); }
  engine::Engine& engine() { return e_; }

 private:
  engine::Engine& e_;
};

/// Most links a route may hold (after the egress port); a longer one throws at send.
inline constexpr size_t kMaxRoute = 6;
/// Links after the egress port, the last one into the receiver. The net copies it into
/// the datagram when it is sent, so it need only stay valid during the router call (a
/// router may compute it into a scratch buffer). Empty: no route.
using Route = std::span<const LinkId>;
using Router = std::function<Route(PeerId src, PeerId dst, uint32_t ev, uint16_t plane)>;

/// Why a datagram left the network without reaching its receiver (trace only).
enum class DropCause : uint8_t {
  kDown,
  kBlackhole,
  kLoss,
  kPattern,
  kQueueFull,
  kNoRoute,
  kOversize
};

/// One record of the optional trace (set_trace): a datagram delivered or dropped.
struct TraceRecord {
  Time time{0};
  bool delivered = false;              // false: dropped for `cause` at `link`
  DropCause cause = DropCause::kDown;  // when dropped
  LinkId link =
      0;  // the link that dropped it, the last link when delivered; 0 for kNoRoute, kOversize
  PeerId src = 0;
  PeerId dst = 0;
  engine::RxInfo rx;               // when delivered
  std::span<const uint8_t> bytes;  // valid during the call only; empty for kNoRoute, kOversize
};

class SimNet {
 public:
  explicit SimNet(const SimConfig& cfg = {});
  ~SimNet();
  SimNet(const SimNet&) = delete;
  SimNet& operator=(const SimNet&) = delete;

  // ---- Topology ------------------------------------------------------------------------
  /// Adds a host; the node must outlive the SimNet. Returns its PeerId (0, 1, 2, ...).
  PeerId add_host(Node* node);
  /// Adds a directed link whose far end is on `plane` (what RxInfo::plane says when it is last).
  LinkId add_link(uint16_t plane, const LinkConfig& cfg);
  /// The host's NIC port on `plane`, out of it / into it (made on first use).
  LinkId egress_port(PeerId host, uint16_t plane);
  LinkId ingress_port(PeerId host, uint16_t plane);

  struct PathLinks {
    LinkId forward;  // a -> b
    LinkId reverse;  // b -> a
  };
  /// Default router: one more path between a and b on `plane`, both directions with `cfg`.
  PathLinks add_path(PeerId a, PeerId b, uint16_t plane, const LinkConfig& cfg);
  /// Replaces the default router.
  void set_router(Router router);

  // ---- Links (any time, also from callbacks) --------------------------------------------
  const LinkConfig& link_config(LinkId link) const;
  /// New rate/latency/thresholds apply to what arrives or starts serializing from now on.
  void set_link_config(LinkId link, const LinkConfig& cfg);
  const Impairments& impairments(LinkId link) const;
  /// Also restarts the loss_every_n / loss_pattern count. Throws std::invalid_argument
  /// for loss_pattern_len above 64.
  void set_impairments(LinkId link, const Impairments& imp);
  /// Down drops the buffer and what is on the wire; up carries new arrivals.
  void set_link_up(LinkId link, bool up);
  bool link_up(LinkId link) const;
  void set_blackhole(LinkId link, bool on);
  bool blackhole(LinkId link) const;
  const LinkStats& link_stats(LinkId link) const;
  uint64_t queued_bytes(LinkId link) const;
  size_t link_count() const;

  // ---- Time ----------------------------------------------------------------------------
  Time now() const;
  /// Runs `fn` at virtual time t (now, if t is past), in the loop, after events already due then.
  void at(Time t, std::function<void()> fn);
  /// Drains `host` and re-reads its deadline now (after calls made to it from outside).
  void wake(PeerId host);
  /// Processes every event up to and including t; now() is t afterwards.
  void run_until(Time t);
  void run_for(Duration d) { run_until(now() + d); }
  /// Runs until done() (checked before, and after every event) or until limit.
  /// Returns whether done() became true; now() is then the time it did, else limit.
  bool run_until(const std::function<bool()>& done, Time limit);

  // ---- Observability -------------------------------------------------------------------
  const SimStats& stats() const;
  /// Called for every datagram delivered or dropped; empty function: off.
  void set_trace(std::function<void(const TraceRecord&)> trace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrc::sim
