// The live-statistics segment: the byte layout every libmrc device publishes and mrcctl reads.
// Threading: plain data. One writer per segment (the device's progress loop, segment.h
// SegmentWriter); any number of readers in other processes (SegmentReader) that never block
// the writer (seqlock).
//
// Where: POSIX shared memory "/mrc-stats.<pid>.<device>" (on Linux the file
// /dev/shm/mrc-stats.<pid>.<device>), mode 0644, one per UdpDriver ("device" mrc<N>, N counted
// per process from 0). MRC_STATS=0 in the environment turns publishing off.
//
// Layout (little-endian host order, every record a fixed size, offsets in the header):
//
//   SegmentHeader            at 0
//   DeviceRecord             at device_off             (exactly one)
//   QpRecord[max_qps]        at qps_off                (n_qps valid)
//   EvRecord[max_evs]        at evs_off                (n_evs valid; QpRecord::ev_first/ev_count)
//   EventRecord[event_cap]   at events_off             (ring: event #i at i % event_cap)
//
// Versioning: `magic` and `version` identify the layout; a reader refuses another version.
// Within a version, records only grow at their end: readers use the sizes in the header
// (device_size, qp_size, ...) as strides and read the prefix they know. Only DeviceRecord
// has grown so far: a reader also takes one shorter than its own, down to
// kDeviceRecordMinSize (an older libmrc's), zero-fills the rest and keeps the writer's size
// (Snapshot::device_size), so mrcctl leaves out counters that library never had.
//
// Consistency (seqlock): the writer makes `seq` odd, writes everything, makes `seq` even
// again (release). A reader copies the segment between two reads of `seq` (acquire) and
// retries when they differ or are odd, so it never uses a torn snapshot. The writer never
// waits for readers.
//
// Staleness: `pid` and `start_time` (field 22 of /proc/<pid>/stat, clock ticks since boot)
// name the writing process. A segment whose process is gone, or whose pid now belongs to a
// process with another start time, is stale: readers skip it and remove it (if allowed).
// The writer removes its segment when the driver is destroyed.
//
// Times: `*_ns` fields are CLOCK_MONOTONIC nanoseconds (the engine's clock under the UDP
// driver), comparable with the reader's own CLOCK_MONOTONIC on the same machine.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mrc::observe {

inline constexpr uint64_t kMagic = 0x31544154534352'4dull;  // "MRCSTAT1" read as little-endian
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kMaxPlanes = 16;
inline constexpr uint32_t kMaxPeers = 64;
inline constexpr uint32_t kMaxQps = 256;
inline constexpr uint32_t kMaxEvs = 8192;
inline constexpr uint32_t kEventCapacity = 1024;
inline constexpr uint32_t kDropReasons = 16;        // engine::Drop values (kCount <= 16)
inline constexpr char kShmPrefix[] = "mrc-stats.";  // + "<pid>.<device>" under /dev/shm
inline constexpr char kShmDir[] = "/dev/shm";
inline constexpr char kControlDir[] = "/run/mrc";  // control sockets: <pid>.<device>.ctl

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;                                // sizeof(SegmentHeader)
  uint32_t device_size, qp_size, ev_size, event_size;  // record strides
  uint32_t max_qps, max_evs, event_capacity;
  uint32_t pid;
  uint64_t start_time;  // /proc/<pid>/stat field 22 of the writer
  uint64_t total_size;  // bytes of the whole segment
  uint64_t device_off, qps_off, evs_off, events_off;
  std::atomic<uint64_t> seq;  // seqlock: odd while the writer is inside
  uint64_t generation;        // snapshots published so far
  int64_t published_ns;       // when the latest snapshot was taken (monotonic)
  uint32_t n_qps, n_evs;      // valid records
  uint32_t qps_truncated;     // QPs left out (more than max_qps)
  uint32_t evs_truncated;     // EVs left out (more than max_evs)
  uint64_t events_written;    // EventRecords written so far; ring holds the last event_capacity
  uint8_t reserved[64];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(SegmentHeader) == 208);

struct PlaneRecord {
  char address[64];    // bound address, IPv6 literal (NUL-terminated)
  uint16_t port;       // bound UDP port
  uint8_t admin_down;  // drained by the controller (Engine::set_plane_drained)
  uint8_t link_down;   // the port has no link (Engine::ports_down: the driver's link watch)
  uint8_t reserved[4];
};
static_assert(sizeof(PlaneRecord) == 72);

struct PeerRecord {
  char name[32];  // "h<host>" (srv6) or the plane-0 address (direct/ecmp)
  uint32_t id;    // engine::PeerId
  uint32_t host;  // fabric host id, or UINT32_MAX
};
static_assert(sizeof(PeerRecord) == 40);

/// io::UdpCounters, field by field (udp_driver.h explains each).
struct UdpCountersRecord {
  uint64_t datagrams_sent, bytes_sent, datagrams_received, bytes_received;
  uint64_t sendmmsg_calls, gso_messages, gso_disabled, gro_messages, recvmmsg_calls;
  uint64_t send_eagain, send_enobufs, send_errors, recv_errors, recv_truncated, no_route;
  uint64_t loop_iterations, timeouts;
};
static_assert(sizeof(UdpCountersRecord) == 17 * 8);

struct DeviceRecord {
  char name[16];        // "mrc0"
  char netns[64];       // network namespace of its sockets ("" = the process's)
  uint32_t index;       // N of mrcN
  uint32_t planes;      // valid entries of plane[]
  uint32_t path_mode;   // io::PathMode: 0 direct, 1 srv6, 2 ecmp
  uint32_t local_host;  // srv6: this host's fabric id; else UINT32_MAX
  uint32_t n_peers;
  uint32_t has_control;  // a control socket /run/mrc/<pid>.<index>.ctl is open
  PlaneRecord plane[kMaxPlanes];
  PeerRecord peer[kMaxPeers];
  UdpCountersRecord udp;
  // engine::EngineStats
  uint64_t rx_datagrams, tx_datagrams, rx_bytes, tx_bytes;
  uint64_t drops[kDropReasons];  // by engine::Drop
  uint64_t malformed_by_error[8];
  // Connectionless probes (io::UdpCounters, io/udp/probes.h).
  uint64_t probes_answered, probes_rate_limited, probe_replies_dropped;
  // Peer address queries (io::UdpCounters, io/udp/peer_addresses.h).
  uint64_t addr_queries_sent, addr_queries_answered, addr_queries_refused,
      addr_queries_rate_limited, addr_replies_accepted, addr_replies_dropped, addr_peers_unanswered;
  // Port status updates and plane port links (io::UdpCounters, io/udp/port_status.h and
  // io/udp/link_watch.h).
  uint64_t port_status_sent, port_status_applied, port_status_refused, port_status_acks_dropped,
      port_link_changes;
  // Appended (a record grows only at its end): updates overtaken by a later one of their peer
  // (io::UdpCounters::port_status_stale), then what woke the progress loop and which threads
  // did the receive work (io::UdpCounters, same names; issue 17).
  uint64_t port_status_stale;
  uint64_t loop_woke_socket, loop_woke_app, loop_woke_alarm, loop_woke_poller_end,
      loop_woke_deadline, loop_rx_rounds, poller_rounds, poller_timeouts, other_thread_rounds,
      app_wakeups;
  // Appended: what the polling application threads did on the sockets (io::UdpCounters,
  // same names; poll_progress).
  uint64_t poller_polls, poller_busy, poller_ready_checks, poller_recvmmsg, poller_timer_arms;
  // Appended: the progress threads' polls without sleep that found nothing (io::UdpCounters::
  // loop_spins; UdpConfig::spin): the CPU the spin after work costs.
  uint64_t loop_spins;
};

/// The shortest DeviceRecord a reader takes: the record as layout 1 first shipped (through
/// malformed_by_error). Everything after it was appended later: the probe counters, then
/// the peer address queries, the port status and link counters, the wake-cause counters.
inline constexpr size_t kDeviceRecordMinSize = offsetof(DeviceRecord, probes_answered);

/// One QP: engine::QpStats and its congestion control.
struct QpRecord {
  uint32_t qpn;
  uint8_t state;  // engine::QpState
  uint8_t has_cc;
  uint8_t reserved0[2];
  uint32_t peer;      // engine::PeerId (DeviceRecord::peer names it)
  uint32_t dest_qpn;  // remote QP
  uint32_t mtu;
  uint32_t ev_first, ev_count;  // its EvRecords
  // engine::QpStats
  uint64_t tx_data_packets, tx_retransmits, tx_payload_bytes, rx_data_packets, rx_payload_bytes;
  uint64_t tx_acks, rx_acks, tx_nacks, rx_nacks, rto_fired, fast_losses, spurious_losses;
  uint64_t tail_probes, rnr_naks, rtt_samples, srtt_ns, min_rtt_ns, completions, error_completions;
  // engine::NsccStats (has_cc)
  uint64_t cc_cwnd, cc_min_cwnd, cc_acks, cc_increases, cc_decreases, cc_quick_adapts, cc_trims,
      cc_losses;
  // The QP's own CC profile (QpAttr::cc) when set; zeros: the engine default.
  uint32_t cc_base_rtt_ns, cc_target_delay_ns, cc_max_cwnd, cc_has_profile;
};

/// One EV of a QP: PathSet::Ev and engine::PathStats.
struct EvRecord {
  uint32_t qpn;
  uint32_t ev;  // plane << 16 | spine << 8 | k
  uint16_t plane;
  uint16_t spine;         // (ev >> 8) & 0xff
  uint8_t state;          // engine::EvState
  uint8_t reason;         // engine::EvReason of the last change (changes > 0)
  uint8_t active;         // in the sprayed set (else a backup)
  uint8_t plane_drained;  // its plane is drained (automatic) or admin-down
  uint32_t changes;       // state changes so far
  uint32_t reserved0;
  int64_t since_ns;                 // last state change (0: never changed)
  uint64_t srtt_ns;                 // smoothed data RTT on this EV
  uint64_t rtt_p50_ns, rtt_p99_ns;  // over the last RTT samples seen at publish times
  // engine::PathStats
  uint64_t tx_packets, tx_bytes, acked, lost, trims, ecn_marks, rtt_ns, probes, probe_replies;
};

/// One EV state change (engine::EvEvent), in the ring.
struct EventRecord {
  int64_t at_ns;  // when it changed (engine time)
  uint32_t qpn;
  uint32_t ev;
  uint16_t plane;
  uint8_t from, to;  // engine::EvState
  uint8_t reason;    // engine::EvReason
  uint8_t reserved0[3];
  uint32_t missed;  // further changes of this EV since the previous snapshot not recorded
  uint32_t reserved1;
};
static_assert(sizeof(EventRecord) == 32);

/// Offsets and total size of a segment with these capacities.
struct Geometry {
  uint64_t device_off, qps_off, evs_off, events_off, total;
};
constexpr uint64_t align64(uint64_t x) { return (x + 63) & ~uint64_t{63}; }
constexpr Geometry geometry(uint32_t max_qps, uint32_t max_evs, uint32_t events) {
  Geometry g{};
  g.device_off = align64(sizeof(SegmentHeader));
  g.qps_off = align64(g.device_off + sizeof(DeviceRecord));
  g.evs_off = align64(g.qps_off + uint64_t{max_qps} * sizeof(QpRecord));
  g.events_off = align64(g.evs_off + uint64_t{max_evs} * sizeof(EvRecord));
  g.total = align64(g.events_off + uint64_t{events} * sizeof(EventRecord));
  return g;
}

}  // namespace mrc::observe
