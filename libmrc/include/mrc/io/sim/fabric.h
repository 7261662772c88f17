// A two-tier multi-plane fabric (T0 leaves, T1 spines) built on a SimNet, and its fault
// switches (the goodput recorder of fault runs is testing/goodput.h). Threading: single-threaded,
// like SimNet: one owner builds it and calls everything, also from SimNet::at callbacks.
//
// Topology
// --------
// H hosts (the SimNet's PeerIds 0..H-1, added before the Fabric is built), P planes.
// In each plane p: one T0 per group of `hosts_per_t0` hosts (T0 index = host /
// hosts_per_t0; the last group may be smaller) and S T1 spines. Every cable is two
// directed SimNet links:
//
//   host h, plane p  --egress_port(h, p)-->  T0(p, h/hpt)  --ingress_port(h, p)-->  host h
//   T0(p, t)  --uplink(p, t, s, kUp)-->  T1(p, s)  --uplink(p, t, s, kDown)-->  T0(p, t)
//
// SimNet's egress port of a host on plane p *is* the host->T0 link (the sender's NIC:
// host_port_bps, host_latency, unlimited buffer, no ECN, no trimming; SimNet pauses the
// host while it holds a couple of datagrams), and its ingress port *is* the T0->host
// link. The switch egress links (T0->T1, T1->T0, T0->host) share one queue model:
// capacity_bytes, ecn_threshold_bytes and ecn_ramp_bytes, trim_threshold_bytes (sim_net.h says what
// each does). Host-side links run at host_port_bps, T0-T1 links at uplink_bps.
//
// Routing (set_router; the router computes each route when a datagram is sent, from
// the link tables, and keeps the Fabric's state alive as long as the SimNet holds it).
// A datagram from src to dst sent with (ev, plane):
//
//   same T0:       [egress_port(src, plane)] -> ingress_port(dst, plane)
//   different T0s: [egress_port(src, plane)] -> T0(src)->T1(s) -> T1(s)->T0(dst)
//                  -> ingress_port(dst, plane),   with s = spine_of(ev) % S
//
// The plane is the Transmit's plane (the port it left from); the plane bits of the EV
// are not consulted. src == dst, a host >= H or a plane >= P: no route (SimNet
// counts it in SimStats::no_route).
//
// EV encoding (this model's; the engine treats EVs as opaque):
//
//   ev = plane << 16 | spine << 8 | k        k = 0..255: salt among EVs on one spine
//
// paths() hands out k in [0, 128), backup_paths() k in [128, 256), so the two sets
// never share an EV. With the real namespace fabric the EV selects a uSID path the
// same way (spine, plane), so tests written against this encoding carry over.
//
// Faults (each reversible; immediate, so schedule them with SimNet::at):
//   t0_down/t0_up        every cable of that T0 (to its hosts and to every spine) down/up
//   t1_down/t1_up        every cable of that spine down/up
//   link_down/link_up    one cable (LinkRef), one direction or both
//   flap                 link_down, link_up, ... every `period` until a time, then up
//   blackhole_t0/_t1     the switch keeps its links up and drops everything it forwards
//                        (SimNet blackhole on its egress links)
//   loss                 random loss probability on a cable (SimNet impairments)
//   set_trimming         trim thresholds on/off on all switch egress links
// A link is up when neither of its switches is down and it is not down itself, so
// faults compose: t1_up does not revive a cable whose T0 is still down.
//
// Setup mistakes (zero counts, more than 256 spines, hosts missing from the SimNet,
// names out of range) throw std::invalid_argument / std::out_of_range.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mrc/engine/types.h"
#include "mrc/io/sim/sim_net.h"

namespace mrc::sim {

struct FabricConfig {
  uint32_t hosts = 2;                        // H: the SimNet's hosts 0..H-1 (already added)
  uint16_t planes = 4;                       // P
  uint32_t spines = 4;                       // S: T1 switches per plane, at most 256
  uint32_t hosts_per_t0 = 1;                 // hosts under one T0
  uint64_t host_port_bps = 100'000'000'000;  // one NIC port (host<->T0), bits/s per plane
  uint64_t uplink_bps = 100'000'000'000;     // one T0<->T1 link, bits/s
  Duration host_latency{1'000};              // propagation of a host<->T0 link (1 us)
  Duration uplink_latency{1'000};            // propagation of a T0<->T1 link (1 us)
  // Switch egress queues (T0->T1, T1->T0, T0->host):
  uint64_t capacity_bytes = 1 << 20;          // buffer; tail drop above
  uint64_t ecn_threshold_bytes = 64 << 10;    // CE at or above, with probability rising...
  uint64_t ecn_ramp_bytes = 0;                // ...over this many bytes (WRED; 0: always)
  uint64_t trim_threshold_bytes = 128 << 10;  // trim data at or above (when trimming is on)
  bool trimming = true;                       // initial state of set_trimming
  bool trimmed_priority = true;               // trimmed headers jump the queue
  bool control_priority = true;               // so do ACKs, NACKs, probes (LinkConfig)
};

/// Direction of a cable: kUp is toward the spine (host->T0, T0->T1), kDown away from it.
enum class Dir : uint8_t { kUp, kDown, kBoth };

/// Names one cable of the fabric, one direction or both.
struct LinkRef {
  enum class Kind : uint8_t { kUplink, kHostPort };
  Kind kind = Kind::kUplink;
  uint16_t plane = 0;
  uint32_t t0_or_host = 0;  // kUplink: T0 index in the plane; kHostPort: host
  uint32_t spine = 0;       // kUplink only
  Dir dir = Dir::kBoth;

  /// The cable between T0(plane, t0) and T1(plane, spine).
  static LinkRef uplink(uint16_t plane, uint32_t t0, uint32_t spine, Dir dir = Dir::kBoth) {
    return LinkRef{Kind::kUplink, plane, t0, spine, dir};
  }
  /// The cable between host and its T0 of `plane` (kUp: the host's NIC egress).
  static LinkRef host_port(PeerId host, uint16_t plane, Dir dir = Dir::kBoth) {
    return LinkRef{Kind::kHostPort, plane, host, 0, dir};
  }
};

class Fabric {
 public:
  /// Builds the links and routes on `net` and installs the router. `net` must hold at
  /// least cfg.hosts hosts and must outlive the Fabric.
  Fabric(SimNet& net, const FabricConfig& cfg);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const FabricConfig& config() const;
  SimNet& net();
  /// T0 index (in every plane) of a host, and the number of T0s per plane.
  uint32_t t0_of(PeerId host) const;
  uint32_t t0_count() const;

  // ---- EVs -------------------------------------------------------------------------------
  static constexpr uint32_t kBackupSalt = 128;  // backup_paths use k from here on
  static constexpr uint32_t ev(uint16_t plane, uint32_t spine, uint32_t k) {
    return uint32_t{plane} << 16 | (spine & 0xff) << 8 | (k & 0xff);
  }
  static constexpr uint16_t plane_of(uint32_t ev) { return static_cast<uint16_t>(ev >> 16); }
  static constexpr uint32_t spine_of(uint32_t ev) { return (ev >> 8) & 0xff; }
  static constexpr uint32_t salt_of(uint32_t ev) { return ev & 0xff; }
  /// "plane 2 spine 3 #1".
  static std::string describe(uint32_t ev);

  /// per_plane EVs on every plane, the i-th on spine i % S with k = salt + i / S:
  /// spines evenly used, all EVs distinct. Ordered i-major (plane 0..P-1 for i = 0,
  /// then for i = 1, ...) so that consecutive paths alternate planes. The EVs do not
  /// depend on src/dst here (they are checked, and name the pair for real fabrics).
  /// Throws std::invalid_argument when salt + ceil(per_plane / S) > kBackupSalt.
  std::vector<engine::Path> paths(PeerId src, PeerId dst, uint32_t per_plane,
                                  uint32_t salt = 0) const;
  /// As paths() with k from kBackupSalt + salt: never one of paths()'s EVs.
  std::vector<engine::Path> backup_paths(PeerId src, PeerId dst, uint32_t per_plane,
                                         uint32_t salt = 0) const;

  // ---- Port link state (what a host's NIC sees of its own cables) ----------------------
  /// Whether host's port on `plane` has a link: both directions of its cable to the T0 are
  /// up (a T0 down, or the cable down, takes it; a blackhole or loss does not show).
  bool port_up(PeerId host, uint16_t plane) const;
  /// Called with (host, plane, up) each time port_up changes, from inside the fault call
  /// (and so inside SimNet::at callbacks): where a driver tells its engine
  /// (Engine::set_port_up), as a NIC's PHY reports carrier. Empty: nobody is told.
  void set_on_port(std::function<void(PeerId, uint16_t, bool)> fn);

  // ---- Faults (immediate; schedule with net().at) ---------------------------------------
  void t0_down(uint16_t plane, uint32_t t0);
  void t0_up(uint16_t plane, uint32_t t0);
  void t1_down(uint16_t plane, uint32_t spine);
  void t1_up(uint16_t plane, uint32_t spine);
  void link_down(const LinkRef& ref);
  void link_up(const LinkRef& ref);
  /// link_down now, link_up at now + period, down again at now + 2 period, ... and up at
  /// `until` (no toggle at or after it). link_up during a flap does not stop it. The
  /// scheduled toggles share the Fabric's state: they go on if the Fabric is destroyed.
  void flap(const LinkRef& ref, Duration period, Time until);
  void blackhole_t0(uint16_t plane, uint32_t t0, bool on);
  void blackhole_t1(uint16_t plane, uint32_t spine, bool on);
  /// Random loss probability p on each direction of ref (other impairments kept).
  void loss(const LinkRef& ref, double p);
  /// Trim thresholds on all switch egress links: cfg.trim_threshold_bytes, or none.
  void set_trimming(bool on);

  // ---- Observability ---------------------------------------------------------------------
  /// kUp: T0->T1, kDown: T1->T0 (kBoth is out of range).
  LinkId link(uint16_t plane, uint32_t t0, uint32_t spine, Dir dir) const;
  /// kUp: host->T0 (egress_port), kDown: T0->host (ingress_port).
  LinkId host_link(PeerId host, uint16_t plane, Dir dir) const;
  /// The SimNet links a LinkRef names (one or two).
  std::vector<LinkId> links(const LinkRef& ref) const;
  /// "p1 T0[0]->T1[2]", "p0 h3->T0[1]", ...; "link 7" for links not of the fabric.
  std::string link_name(LinkId link) const;
  /// Sum of the switch's egress links' counters (max_queued_bytes: the largest one).
  LinkStats t0_stats(uint16_t plane, uint32_t t0) const;
  LinkStats t1_stats(uint16_t plane, uint32_t spine) const;
  /// One line per switch (delivered, drops, trims, CE, state) and the links with faults.
  std::string summary() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

/// Adds `b` into `a` (counters summed, max_queued_bytes the larger).
void accumulate(LinkStats& a, const LinkStats& b);

}  // namespace mrc::sim
