// The UDP datapath (IPv6; IPv4 planes as IPv4-mapped addresses): one engine, one socket per
// plane, progress threads (one by default, up to one per plane: progress_threads) that feed
// the engine datagrams and time and send what it hands out (engine.h's driver loop). Front
// ends (the verbs device, the NCCL plugin, mrc-perf) make one per device and reach the
// engine only through with_engine; app threads that poll for completions may receive
// themselves (poll_progress, UdpConfig::poller_progress).
// Threading: every public method is thread-safe. The engine is owned here and touched only
// under the driver's mutex (with_engine, or a progress thread); step() and start()/stop()
// must not run concurrently with each other. A sender (progress thread, app post, poller)
// takes its datagrams from the engine under the mutex into buffers of its own and sends them
// after releasing it; each plane's sends take turns in the order they were taken, so a
// socket's datagrams leave in the engine's order ("Send buffers" there). The loop, the wire
// mapping (PathMode, ECN, GSO, GRO, checksums, IPv4), send buffers, probes, peers learnt on the
// wire, namespaces and the observer are described in docs/fabric.md ("The UDP driver").
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "mrc/common/result.h"
#include "mrc/engine/engine.h"
#include "mrc/engine/types.h"
#include "mrc/io/udp/observer.h"
#include "mrc/io/udp/peer_addresses.h"
#include "mrc/io/udp/port_status.h"
#include "mrc/io/udp/probes.h"
#include "srv6/fabric.h"

namespace mrc::io {

class LinkWatch;

/// The driver's only clock read: CLOCK_MONOTONIC as engine::Time.
engine::Time now();

inline constexpr uint16_t kDefaultUdpPort = 4791;  // the RoCEv2 port, as MRC uses
inline constexpr size_t kBatch = 32;               // messages per recvmmsg
inline constexpr size_t kTxBurst = 256;            // datagrams polled from the engine per round
inline constexpr size_t kMaxGsoSegments = 64;      // kernel's UDP_MAX_SEGMENTS
inline constexpr size_t kMaxGsoBytes = 65000;      // UDP payload of one GSO message (IPv6 limit)

/// UdpConfig::poller_grace's default, 200 us: the hold must outlast the poller's own gap between
/// polls, and that gap holds the peer's whole turn when app threads and progress threads share
/// the cores (ib_write_lat on the 2-core VM: 10 us took the loop back mid-round-trip so often
/// that the median stayed 21-61 us; 200 us gave 6.4-7.1 us, perf/RESULTS.md 2026-11-28
/// (pollers)). mrc-perf --latency, one thread playing both hosts that sends ~9 us across the
/// fabric between two polls of one host, needs it too (2026-11-27 (lat2)). An app that stops
/// polling to sleep on a completion channel hands the sockets back at once (poller_leaves); one
/// that stops polling and spins on memory waits for the loop at most this.
inline constexpr engine::Duration kDefaultPollerGrace{200'000};
/// The longest UdpConfig::poller_grace create() takes.
inline constexpr engine::Duration kMaxPollerGrace{1'000'000'000};

/// UdpConfig::spin's "decide for me": default_spin().
inline constexpr engine::Duration kAutoSpin{-1};
/// The longest UdpConfig::spin create() takes.
inline constexpr engine::Duration kMaxSpin{10'000'000};
/// The spin a host gets by default: 50 us (net.core.busy_poll's usual value) where this
/// process may run on 8 CPUs or more, else none. With fewer cores the spinning thread takes
/// the CPU from the application's own threads (perftest and NCCL's proxy spin too).
engine::Duration default_spin();

/// The floor of a learned base RTT on this datapath (EngineConfig::min_base_rtt), 100 us. The
/// smallest RTT sample of a software datapath is one that met no scheduling delay: a busy QP's
/// packets wait for the receiving thread's wakeup and batch, so its RTT is several times that
/// minimum with no queue in the network. NSCC's window cap and target delay derived from the
/// minimum (23 us on the 2-core VM's unshaped veth fabric) read that wait as congestion: a bulk
/// WRITE ran at 14 Gbit/s with 15,000 delay decreases in 4 s, against 29 with this floor
/// (perf/RESULTS.md 2026-11-28 (floor)). The host config's min_base_rtt_us defaults to it.
inline constexpr engine::Duration kDefaultMinBaseRtt{100'000};

/// EngineConfig with this datapath's defaults where they differ from the engine's (which
/// also runs on simulated hardware fabrics): min_base_rtt = kDefaultMinBaseRtt.
inline engine::EngineConfig udp_engine_defaults() {
  engine::EngineConfig e;
  e.min_base_rtt = kDefaultMinBaseRtt;
  return e;
}

/// Packets in flight on a QP from which UdpDriver::with_engine_post leaves a post to the
/// loop's batch (16: two GSO runs of 8 full datagrams). Below it (a ping-pong whose last
/// message's ACK went alone, a QP's occasional control record) the post is sent at once.
inline constexpr size_t kPostBatchInFlight = 16;

/// How a Transmit's path becomes a destination (see the file comment).
enum class PathMode : uint8_t { kDirect, kSrv6, kEcmp };

/// One local plane port.
struct PlaneConfig {
  std::string address = "::";       // IPv6 literal to bind, optionally with %scope; an IPv4
                                    // plane as its mapped form ::ffff:a.b.c.d
  uint16_t port = kDefaultUdpPort;  // 0: ephemeral (see UdpDriver::local_address)
};

struct UdpConfig {
  engine::EngineConfig engine = udp_engine_defaults();
  std::vector<PlaneConfig> planes;  // index = plane number; at least one
  PathMode path_mode = PathMode::kDirect;
  std::shared_ptr<const srv6::Fabric> fabric;  // kSrv6: the fabric this host is part of
  uint32_t local_host = 0;                     // kSrv6: this host's id in `fabric`
  uint16_t peer_port = kDefaultUdpPort;        // kSrv6: the port peers listen on
  uint32_t ecmp_source_ports = 16;             // kEcmp: sending sockets per plane (1..256)
  // kDirect/kEcmp: other hosts' addresses, one entry per host, index = plane (address and
  // port): add_peer_at finds a peer known by any one of them here.
  std::vector<std::vector<sockaddr_in6>> known_peers;
  bool peer_query = true;  // kDirect/kEcmp: learn_addresses asks peers on the wire
  bool zero_udp_checksum = false;              // UDP_NO_CHECK6_TX/RX (see above); no GSO
  bool gso = true;                             // UDP_SEGMENT for same-destination runs
  bool gro = true;                             // UDP_GRO on receive
  // Receive placement (docs/engine.md "Receive placement"): while a WRITE is arriving, the
  // loop's recvmmsg scatters each datagram's payload straight to the place the engine
  // predicts for it in registered memory (Engine::predict_placement), so the kernel's copy
  // is the only one; a datagram that lands elsewhere is copied to its place as before. The
  // loop holds the driver's mutex over each such recvmmsg (an app call waits for one). Off by
  // default: it removed 87-90% of the user-space copy by count but made one recvmmsg per GRO
  // message, and on the loaded 2-core VM no change in CPU per byte showed (perf/RESULTS.md
  // 2026-11-27 (rxcopy)); measure it on an idle machine (mrc-perf --rx-placement). The driver
  // sets engine.rx_placement from it (off: the engine keeps no placement record per packet).
  bool rx_placement = false;
  bool busy_poll = false;                      // progress thread never sleeps (latency)
  // After a round with work (datagrams, an app call, a timer run), each progress
  // thread polls its sockets without sleeping for this long before it sleeps again, as
  // net.core.busy_poll does for a socket: a datagram that comes meanwhile is read at once,
  // not after a wakeup (on the 16-core device ~6 us each way: the blocking UDP ping-pong's
  // one way is 8.5 us, the busy one's 2.5). It costs the CPU of that spin after each burst of
  // work, never while idle. kAutoSpin: default_spin().
  engine::Duration spin = kAutoSpin;
  // poll_progress does the work in the polling app thread (see the file comment); false:
  // it returns false at once and only the progress thread receives. With the 200 us hold the
  // polling thread receives and answers with no thread wakeup in between (ib_write_lat 6.4-7.1
  // against 21-61 us, the NCCL plugin's 8 B round trip 21-23 against 134-181 us on the 2-core
  // VM: perf/RESULTS.md 2026-11-28 (pollers)). Still off by default: TSan saw a progress
  // thread's sendmmsg read an NCCL send buffer the app was refilling, a datagram staged before
  // a poller completed its message (sends leave outside the mutex), which pollers make likely.
  bool poller_progress = false;
  // How long pollers hold the sockets after their last poll_progress call (see the file
  // comment and docs/fabric.md): the progress thread stays off the sockets and timers that
  // long. Long enough to cover the poller's own gap between polls, else the thread takes the
  // sockets back mid-gap and every datagram that then arrives wakes it (a wakeup, on a VM
  // an IPI, inside the sender's send) while the poller competes with it for the receive;
  // short enough that an app that stops polling and spins on memory waits little for the
  // thread (one that sleeps on a completion channel hands them back: poller_leaves).
  // 0..1 s (create() refuses others).
  engine::Duration poller_grace = kDefaultPollerGrace;
  std::string netns;                           // make sockets in this netns; "" = current
  int socket_buffer_bytes = 4 << 20;           // SO_SNDBUF/SO_RCVBUF asked for (kernel may cap)
  // Nice value of the progress thread (-20..19; 0 leaves it). Below 0 it preempts app
  // threads that spin at once when a datagram arrives, but where threads outnumber cores it
  // also starves the app threads that do the other half of the work: with pollers on, -10
  // (the host config's default, for pollers off) halved ib_write_bw and ib_send_bw on the 2-core VM
  // against 0 (perf/RESULTS.md 2026-11-28 (pollers)). Best effort: below 0 needs CAP_SYS_NICE.
  int progress_nice = 0;
  // Progress threads start() runs (1..engine::kMaxPlanes; 0: kDefaultProgressThreads). Thread
  // k serves the plane sockets p with p % threads == k (a plane's socket and receive buffers
  // are one thread's), more threads than planes are as many as planes. Every thread feeds
  // the one engine under the driver's mutex, so a QP's state is touched by one thread at a
  // time; what runs in parallel is each plane's waiting, recvmmsg (the kernel's copy out of
  // the socket) and parsing, and every thread's sends (sendmmsg, outside the mutex; on
  // loopback and veth the kernel delivers inside the call). Thread 0 also serves timers, app
  // wakeups, the observer, link changes and poll_progress's planes (a poller takes thread 0's
  // planes only).
  uint32_t progress_threads = 0;
  engine::Time (*clock)() = &now;              // replaceable for tests; the only clock
  // Makes the driver's observer in create() (observer.h); empty: none. Front ends set it
  // with observe::attach_publisher.
  ObserverFactory observer;
};

/// How long kMaxGsoBytes (65,000 B) take at a plane port's rate (engine.nic_bps shared by the
/// planes): the least the driver hands the kernel for one plane at once when the window
/// allows. A round polls up to kTxBurst datagrams from the engine and sends each plane's
/// share in one sendmmsg, as GSO messages of up to kMaxGsoBytes each or, without GSO, as
/// single datagrams, so a burst can be longer than this. It is EngineConfig::send_burst of
/// the driver's engine: 260 us at 2 Gbit/s per port. 0 without planes or NIC rate.
engine::Duration send_burst(const UdpConfig& c);

/// The progress threads UdpConfig::progress_threads = 0 gives: 1. Since every thread sends
/// outside the engine's mutex, more threads carry more bytes where cores are free, and cost
/// small messages their latency (perf/RESULTS.md 2026-11-27 (device, lead, s13), 16 idle
/// cores): 2 / 4 / 8 threads gave 1.52 / 1.73 / 1.20x one thread's Gbit/s (8 loopback planes),
/// real NCCL's 64 MiB all_reduce 3.21 against 1.63 GB/s with 4 threads; but an 8 B send/recv
/// took 82.8 against 46.8 us and mrc-perf --latency's p50 28.5-37.5 against 11.9-17.0 us
/// (each message's packet and ACK wake threads of their own; a poller covers thread 0's
/// planes only). 1 keeps the latency; a bandwidth-bound job on a host with cores to spare
/// sets progress_threads (2-4).
inline constexpr uint32_t kDefaultProgressThreads = 1;

/// Plain counters that only grow; read as a snapshot with counters().
struct UdpCounters {
  uint64_t datagrams_sent = 0;
  uint64_t bytes_sent = 0;  // UDP payload bytes
  uint64_t datagrams_received = 0;
  uint64_t bytes_received = 0;
  uint64_t sendmmsg_calls = 0;
  uint64_t gso_messages = 0;       // messages that carried several datagrams
  uint64_t gso_disabled = 0;       // planes that fell back to single datagrams
  uint64_t gro_messages = 0;       // received messages that held several datagrams
  uint64_t recvmmsg_calls = 0;     // those that read, or came from the loop (poll_progress
                                   // rounds that read nothing are not counted)
  uint64_t poller_rounds = 0;      // poll_progress calls that fed the engine datagrams or timers
  // The pollers' own syscalls and misses (issue 17: what a polling thread pays per round trip,
  // empty polls included; each happens outside mu_, so counted apart and added by counters()).
  uint64_t poller_polls = 0;         // poll_progress calls that looked at the sockets
  uint64_t poller_busy = 0;          // ...that found the receive side taken (loop, other poller)
  uint64_t poller_ready_checks = 0;  // readiness syscalls (epoll_wait; none with one plane)
  uint64_t poller_recvmmsg = 0;      // recvmmsg syscalls of pollers, empty ones included
  uint64_t poller_timer_arms = 0;    // timerfd_settime of pollers (pushing the loop's hold)
  uint64_t send_eagain = 0;      // a socket was full; the rest of its batch waited
  uint64_t send_enobufs = 0;     // dropped by the host
  uint64_t send_errors = 0;      // other send errors (dropped)
  uint64_t recv_errors = 0;      // recvmmsg errors other than EAGAIN
  uint64_t recv_truncated = 0;   // datagrams above kTransmitBufferSize (dropped)
  // Receive placement (UdpConfig::rx_placement): recvmmsg calls that scattered into predicted
  // places, datagrams found in place (no user-space copy), and bytes copied out of predicted
  // places again because a datagram there was not the one predicted (then the engine copies
  // them to where they belong, as any received datagram).
  uint64_t placed_calls = 0;
  uint64_t placed_datagrams = 0;
  uint64_t placed_bounce_bytes = 0;
  uint64_t no_route = 0;         // Transmit to an unknown peer or plane (dropped)
  uint64_t loop_iterations = 0;  // wakeups of the loop (idle: stays flat)
  uint64_t other_thread_rounds = 0;  // ...of those, rounds of progress threads 1.. that fed
                                     // the engine (their planes' datagrams)
  uint64_t timeouts = 0;         // on_timeout calls
  uint64_t poller_timeouts = 0;  // ...of those, made by pollers (poll_progress)
  // What woke thread 0's loop (a polling app's round trip should need none; issue 17): each
  // wakeup counts once per reason it found (several can hold at once; none: a signal, the
  // observer's control fd or the link watch).
  uint64_t loop_woke_socket = 0;      // a plane socket it watched was ready
  uint64_t loop_woke_app = 0;         // its eventfd: an app call (with_engine), another thread
  uint64_t loop_woke_alarm = 0;       // the timerfd an app call moved to an earlier deadline
  uint64_t loop_woke_poller_end = 0;  // the pollers' hold (poller_grace past the last poll) ran out
  uint64_t loop_woke_deadline = 0;    // ppoll's own timeout: an engine, observer or address
                                      // deadline it slept toward
  uint64_t loop_spins = 0;  // rounds (any thread) that polled without sleeping (spin) and
                            // found nothing
  uint64_t loop_rx_rounds = 0;  // loop rounds (any thread) that read datagrams: the receive
                                // work pollers left to it
  uint64_t app_wakeups = 0;      // app calls (with_engine, with_engine_flush, with_engine_post)
                                 // that woke thread 0
  // Connectionless probes (io/udp/probes.h).
  uint64_t probes_answered = 0;        // probes to dst_qpn 0 answered
  uint64_t probes_rate_limited = 0;    // ...not answered: over Probes::kAnswersPerSecond
  uint64_t probe_replies_dropped = 0;  // replies with no open session's token (forged, late)
  // Peer address queries (io/udp/peer_addresses.h).
  uint64_t addr_queries_sent = 0;
  uint64_t addr_queries_answered = 0;
  uint64_t addr_queries_refused = 0;       // no local QP expects its token (a stranger, or a
                                           // QP not yet at RTR: the asker retries)
  uint64_t addr_queries_rate_limited = 0;  // not answered: over kAnswersPerSecond
  uint64_t addr_replies_accepted = 0;      // peers whose plane addresses were learnt
  uint64_t addr_replies_dropped = 0;       // replies that answer no open query (forged, late)
  uint64_t addr_peers_unanswered = 0;      // learnings that gave up: the peer stays on one address
  // Port status updates (io/udp/port_status.h).
  uint64_t port_status_sent = 0;          // updates sent (send_port_status)
  uint64_t port_status_applied = 0;       // peers' updates applied (and acknowledged)
  uint64_t port_status_refused = 0;       // updates no local QP is bound to (a stranger's)
  uint64_t port_status_stale = 0;         // updates not later than the last one applied for
                                          // their peer (acknowledged, not applied)
  uint64_t port_status_acks_dropped = 0;  // acks of no open update, and malformed ones
  // Plane port link (io/udp/link_watch.h).
  uint64_t port_link_changes = 0;  // Engine::set_port_up calls: a watched port's link went
                                   // down or came back (a port down at start counts once)
};

class UdpDriver {
 public:
  /// Opens and binds one socket per plane. Errors name the address and port.
  static Result<std::unique_ptr<UdpDriver>, std::string> create(const UdpConfig& cfg);
  ~UdpDriver();  // stops the thread if running
  UdpDriver(const UdpDriver&) = delete;
  UdpDriver& operator=(const UdpDriver&) = delete;

  size_t planes() const { return sockets_.size(); }
  /// The progress threads start() runs: UdpConfig::progress_threads (0: auto), at most one
  /// per plane.
  size_t progress_threads() const { return shards_.size(); }
  /// The configuration it runs with: create()'s, with engine.send_burst filled in (send_burst).
  const UdpConfig& config() const { return cfg_; }
  /// The address a plane socket is bound to (with the real port if 0 was asked).
  sockaddr_in6 local_address(uint16_t plane) const;
  /// Largest payload (QpAttr::mtu) every plane's link carries (io/udp/link_mtu.h): 8192 on
  /// jumbo (9000-byte) links, 1024 on 1500-byte ones.
  uint32_t max_payload() const { return max_payload_; }
  /// The payload front ends give their QPs: `configured` (HostConfig::mtu) when every plane's
  /// link carries it, the largest they carry when it is 0; else an error naming the plane,
  /// its link MTU and the largest payload that fits.
  Result<uint32_t, std::string> payload_mtu(uint32_t configured) const;

  /// A remote host: its address for each plane (index = plane); kDirect and
  /// kEcmp. The returned id is what QpAttr::peer takes. A plane without an
  /// address drops (no_route).
  engine::PeerId add_peer(std::vector<sockaddr_in6> per_plane_addresses);
  /// kDirect/kEcmp: a remote host known by one address (a verbs GID), at `ports` (one per
  /// local plane: hosts are configured alike). Its address per plane from
  /// UdpConfig::known_peers when an entry holds `known`; else every plane sends to `known`
  /// (at its port) until learn_addresses() learns better. Same `known`, same id.
  engine::PeerId add_peer_at(const in6_addr& known, std::span<const uint16_t> ports);
  /// Asks `peer` (made by add_peer_at, not from the table) for its plane addresses through
  /// QP `qpn` (at RTR toward it; the query is bound to its tokens). Returns at once; the
  /// addresses change when the reply comes. False when nothing was started: not such a peer,
  /// already learnt or learning, peer_query off, or no such QP.
  bool learn_addresses(engine::PeerId peer, engine::Qpn qpn);
  /// A peer's current destination on each plane (first spine): what add_peer_at and learning
  /// made of it. Empty for an unknown peer.
  std::vector<sockaddr_in6> peer_addresses(engine::PeerId peer) const;
  /// kSrv6: a host of the fabric by id; its uSID paths are computed here. `ports`: the UDP
  /// port of each of its planes (a process with ephemeral ports, learnt by a front end's
  /// handshake); empty: UdpConfig::peer_port on every plane. This host itself is a peer too
  /// (one path a plane, to its own port address and bound port: QPs and address handles of
  /// one host that talk to each other, as an MPI rank's own endpoint does).
  Result<engine::PeerId, std::string> add_fabric_peer(uint32_t host,
                                                      std::span<const uint16_t> ports = {});
  /// kSrv6: the EVs to spray on toward `host`, one per plane and spine (k = 0),
  /// plane-major, as QpAttr::paths takes them. Empty when not in kSrv6 mode.
  std::vector<engine::Path> fabric_paths(uint32_t host) const;
  /// The EVs a QP toward `host` sprays on, as QpAttr::paths takes them, in every mode: kSrv6
  /// fabric_paths(host); kDirect 4 EVs per plane; kEcmp one per source port and plane
  /// (`host` is unused outside kSrv6). EV = plane << 16 | k << 8.
  std::vector<engine::Path> spray_paths(uint32_t host) const;
  /// kSrv6: a path whose destination is `dst` itself, as a controller spelled it (a uSID
  /// segment list in the plane's block, ending at the peer; the OCP API's explicit SRv6
  /// EVs), not the one the fabric derives for an EV. Sent to any peer on that path, a
  /// datagram goes to `dst` at that peer's port. The EV is kExplicitEv | plane << 16 | i
  /// (i counts the plane's distinct addresses); the same address gives the same EV. Errors:
  /// not kSrv6, plane out of range, an address outside the plane's block, more than
  /// kMaxExplicitPerPlane addresses.
  static constexpr uint32_t kExplicitEv = 1u << 31;
  static constexpr size_t kMaxExplicitPerPlane = 4096;
  Result<engine::Path, std::string> explicit_path(uint16_t plane, const srv6::Ipv6& dst);
  /// kDirect/kEcmp, IPv6 planes: a structured EV (the OCP API's STEV format): its datagrams
  /// carry IPv6 flow label `label` (20 bits; 0: the kernel's own, auto_flowlabels), written per
  /// sendmsg (IPV6_FLOWINFO_SEND and sin6_flowinfo, set on the plane's sockets by the first
  /// one; a GSO message is one label, so GSO stays on), and in kEcmp mode leave from the
  /// source-port socket that `sport` picks as a spray EV's low 16 bits do (route()). Linux
  /// (4.x on) needs no lease (IPV6_FLOWLABEL_MGR) for a label unless some socket of the netns
  /// holds one exclusively; then the kernel refuses the others' labels (EINVAL, counted as
  /// send errors). EV = kStevEv | plane << 16 | i (i counts the plane's distinct (label,
  /// sport)); the same pair gives the same EV. A peer's ACK that echoes an EV it does not know
  /// goes without a label. Errors: another mode, plane out of range or IPv4, a label over 20
  /// bits, more than kMaxStevPerPlane pairs.
  static constexpr uint32_t kStevEv = 1u << 30;
  static constexpr size_t kMaxStevPerPlane = 4096;
  Result<engine::Path, std::string> stev_path(uint16_t plane, uint32_t label, uint16_t sport);
  /// The path policy for a QP that sprays on spray_paths(): kSrv6 sets
  /// min_active_per_plane to the spines a plane needs to carry a full T0's host ports
  /// (srv6::spines_for_full_t0 at the NIC rate per plane), so a dead spine costs its plane
  /// no share while the rest carry the port; other modes keep PathPolicy's defaults.
  engine::PathPolicy spray_policy() const;
  /// The engine attributes that connect a QP to `peer` at RTR, as every front end (verbs
  /// device, NCCL plugin) connects one: the peer, its QP and the token it expects (kDest),
  /// spray_paths(host) (kPaths) and spray_policy() (kPathPolicy); kRtrMask names them. The
  /// front end adds its own (MTU, PSNs, timeout, CC...) and calls Engine::connect_qp.
  static constexpr uint32_t kRtrMask =
      engine::attr::kDest | engine::attr::kPaths | engine::attr::kPathPolicy;
  engine::QpAttr rtr_attr(engine::PeerId peer, uint32_t host, engine::Qpn dest_qpn,
                          uint32_t remote_token) const;

  /// Runs f(engine) under the driver's mutex, then wakes the progress thread
  /// so what f posted goes out promptly. Returns what f returns. Do not keep
  /// references into the engine past f.
  template <class F>
  decltype(auto) with_engine(F&& f) {
    struct Wake {
      UdpDriver* d;
      ~Wake() {
        d->activity_.fetch_add(1, std::memory_order_release);
        d->wake();
      }
    } wake_after_unlock{this};  // destroyed after `lock`
    std::lock_guard lock(mu_);
    ++counters_.app_wakeups;
    return f(*engine_);
  }

  /// As with_engine, and then sends what f queued from the caller's thread: taken from the
  /// engine under the same lock, sent after releasing it (flush_unlock). A posted message
  /// leaves without waiting for the progress thread to wake (one thread wakeup less per
  /// message; what latency-bound apps feel). The thread is woken only when a socket was full;
  /// a timer earlier than it planned (a post's RTO) moves its alarm (a timerfd) instead, so a
  /// post never costs a loop round. f must return a value.
  template <class F>
  decltype(auto) with_engine_flush(F&& f) {
    return post_call(nullptr, std::forward<F>(f));
  }

  /// A post to QP `qpn` (verbs post_send, the NCCL plugin's sends): with_engine_flush unless
  /// the QP has a backlog (kPostBatchInFlight packets or more in flight) and no poller holds
  /// the sockets; then as with_engine: the progress loop is woken and sends it in its round,
  /// with every other ready packet (one sendmmsg per plane, GSO runs per path). A post to an
  /// idle QP, a ping-pong's every message, small control records, and posts while an app
  /// thread polls leave from the caller's thread as before. Flushed alone, each post of a deep
  /// queue went out as its own sends: a 64 KiB WRITE sprayed over 4 planes was 4 sendmmsg of
  /// 2 datagrams, no GSO run, forwarded in the app's thread (ib_write_bw on the unshaped 4 x 4
  /// fabric: 8.2 sendmmsg per message in a run at 0.84-1.25 GB/s; perf/RESULTS.md 2026-11-28
  /// (floor), where that slow state did not come back and the gain measured is 1.02-1.15x).
  /// A flush sends whatever the engine has ready, other QPs' backlog included (flush_unlock).
  /// f must return a value.
  template <class F>
  decltype(auto) with_engine_post(engine::Qpn qpn, F&& f) {
    return post_call(&qpn, std::forward<F>(f));
  }

  /// The poller's turn (see the file comment): for a thread that waits for a completion and
  /// found none. Receives what the plane sockets hold (one batch each, no waiting), feeds it to
  /// the engine, runs its timers when one is due (the loop leaves them to pollers while they
  /// poll) and sends what that produced, in the caller's thread, and keeps the progress thread
  /// off the sockets and timers for UdpConfig::poller_grace. Never blocks: false at once when poller_progress
  /// is off, when the loop or another poller is receiving, and when nothing came and no timer
  /// was due; true when it fed the engine (activity() grew: poll the CQ again). Thread or not.
  bool poll_progress();

  /// A poller that is about to stop polling and sleep (verbs ibv_req_notify_cq: the app arms a
  /// completion channel) ends the pollers' hold now, so the progress thread takes the sockets
  /// and timers back at once instead of after UdpConfig::poller_grace: what arrives while the
  /// app sleeps is received, and its event raised, without that wait. Another thread still
  /// polling takes the hold again with its next poll. Thread-safe; never blocks.
  void poller_leaves();

  /// Runs f(Probes&) under the driver's mutex: connectionless probes of paths to a peer
  /// (io/udp/probes.h), answered by the peer's driver with no QP on either side. Probes
  /// leave at once; replies are collected by the progress loop.
  template <class F>
  decltype(auto) with_probes(F&& f) {
    std::lock_guard lock(mu_);
    return f(*probes_);
  }
  /// OCP PORT_STATUS_UPDATE (io/udp/port_status.h): tells the host of local QP `qpn`'s peer
  /// (the QP connected, at RTR or later: the update is bound to the pair's tokens) which of this
  /// host's planes are up (bit p of `ports_up`: plane p), on `path`, with DSCP bits `tclass`
  /// (as Probes::send) and sequence `seq`. The peer's driver holds the planes that are down
  /// for this host on all its QPs to it (Engine::set_peer_planes_down) and acknowledges; the
  /// acks come from take_port_status_acks(). False: no such connected QP, no route, or the
  /// socket refused it.
  bool send_port_status(engine::Qpn qpn, engine::Path path, uint32_t ports_up, uint32_t seq,
                        uint8_t tclass = 0);
  /// `n` consecutive sequences for send_port_status, the first returned: the driver numbers
  /// its updates from one counter, as the receiver applies only a later one than the last it
  /// applied for this host (io/udp/port_status.h).
  uint32_t port_status_seqs(uint32_t n);
  /// The acks of send_port_status's updates received since the last call.
  std::vector<PortStatusUpdates::Ack> take_port_status_acks();
  /// The clock the driver and its engine run on (UdpConfig::clock).
  engine::Time now() const { return cfg_.clock(); }

  /// As with_engine, without waking the progress thread: for calls that only
  /// drain or read (poll_cq, poll_event, stats) and so give it nothing to send.
  /// Front ends poll completions with this in tight loops.
  template <class F>
  decltype(auto) peek_engine(F&& f) {
    std::lock_guard lock(mu_);
    return f(*engine_);
  }

  /// peek_engine for a thread that must not sleep on the mutex (one that busy-polls, as
  /// mrc-perf --latency does): runs f and returns true when the mutex is free, else false at
  /// once. Its holder is often the loop or a poller feeding the engine (the receive copy);
  /// sleeping on it costs the poller a futex wait and its holder a futex wake (issue 17).
  template <class F>
  bool try_peek_engine(F&& f) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    f(*engine_);
    return true;
  }

  /// Grows whenever the engine may hold new completions or events: in every round in
  /// which the loop fed it datagrams or timeouts (before that round's transmissions, so a
  /// peer answering them cannot get ahead of it), and after every with_engine. A poller
  /// reads it before draining and skips the engine (and its mutex) while it stays put.
  uint64_t activity() const { return activity_.load(std::memory_order_acquire); }

  /// Called by the loop after every iteration that fed the engine (datagrams, timeouts),
  /// without the mutex held: front ends that must wake sleepers (completion channels) check
  /// their CQs here. Set before start(); keep it short.
  void set_on_progress(std::function<void()> f) { on_progress_ = std::move(f); }

  /// Starts the progress threads (progress_threads(); idempotent).
  void start();
  /// Stops and joins them (idempotent); returns promptly.
  void stop();
  /// One loop iteration in the caller's thread over every plane, waiting up to max_wait for
  /// something to do. Only while the threads are not started.
  void step(engine::Duration max_wait);

  UdpCounters counters() const;

  /// Whether plane port `plane` has link (io/udp/link_watch.h); true for a plane whose link
  /// is not watched.
  bool port_link_up(uint16_t plane) const;
  /// Why planes' links are not watched (one line each; written to stderr at create() when
  /// MRC_DEBUG is set). Empty when every plane is watched.
  const std::vector<std::string>& link_watch_notes() const { return link_notes_; }

 private:
  struct Plane;
  struct Slot;
  struct Route;
  struct Scratch;
  struct TxStage;
  struct Shard;
  explicit UdpDriver(const UdpConfig& cfg);
  void wake();  // thread 0 (event_fd_)
  // After a round of thread `from` (with or without mu_): wakes the other threads whose planes
  // have queued sends (only a plane's own thread waits for room on its socket).
  void wake_pending_owners(const Shard& from);
  // Under mu_ (`lock`, released on return): takes what the engine has to send into a stage of
  // the caller's (stages_), releases mu_ and sends it; true if the loop must be woken (a
  // socket of its was full, or its alarm could not be moved).
  bool flush_unlock(std::unique_lock<std::mutex>& lock);
  // Under mu_: an engine deadline earlier than thread 0's planned wake moves its alarm
  // (deadline_timer_fd_, armed relative to a fresh clock reading); false if that failed and
  // thread 0 must be woken instead.
  bool move_alarm_locked();
  // Under mu_: counters()'s snapshot (counters_ with the counts kept outside mu_ added).
  UdpCounters counters_locked() const;
  void run_once(Shard& s, engine::Duration max_wait);
  // Under rx_mu_, without mu_: one recvmmsg on a plane socket; the datagrams read, or
  // -errno (EAGAIN: none). Counted by feed_received.
  int receive_batch(size_t plane);
  // Receive placement, under the plane's receive lock, without mu_: up to kBatch times, under
  // mu_ from the prediction to the feed, a recvmmsg of one message into the places
  // Engine::predict_placement gives, fed at once (feed_placed) so the next prediction follows
  // it. The messages read, or -errno; with no prediction, receive_batch's result unfed.
  int receive_placed(size_t plane);
  void feed_placed(size_t plane, int r, engine::Time t);
  // One datagram of a plain receive (or one copied out of the placed ones) to its owner:
  // the driver's connectionless kinds, else the engine.
  void feed_one(size_t plane, size_t msg, const engine::RxInfo& rx, const timespec& stamp,
                std::span<const uint8_t> bytes, engine::Time t);
  // Under mu_ and rx_mu_: a batch of receive_batch's (r as it returned) to the engine.
  void feed_received(size_t plane, int r, engine::Time t);
  // Sending, in two steps (issue 17: the sendmmsg out of the engine's mutex). stage(), under
  // mu_: up to kTxBurst datagrams from the engine into `st` (headers, payloads up to
  // kMaxInline copied, destinations), none while a plane holds refused datagrams, and a turn
  // on each plane that has some or is blocked. send_staged(), with or without mu_: on each
  // such plane, in its turn, the queued ones first, then st's. What stage() returns:
  struct Staged {
    bool full = false;     // took kTxBurst: the engine may hold more
    bool blocked = false;  // polled nothing: a plane's socket held refused datagrams
  };
  Staged stage(engine::Time t, TxStage& st);
  bool send_staged(TxStage& st);  // true: no plane it sent on is left blocked
  // In plane `plane`'s turn: its refused datagrams; true when all are sent.
  bool flush_pending(size_t plane);
  // In plane `plane`'s turn: st's datagrams of that plane (indices into st.slots).
  void send_slots(size_t plane, TxStage& st, std::vector<size_t>& slots);
  // In its plane's turn: a copy of one datagram to the plane's queue of refused ones.
  static void queue_copy(Plane& pl, const Slot& s);
  std::optional<Route> route(const engine::Transmit& tx) const;  // under mu_; none: no route
  // The socket a datagram of EV `ev` leaves from: kEcmp's source-port socket its low 16 bits
  // pick (spray_paths' k << 8 | salt), else the plane port's.
  static int source_fd(const Plane& pl, uint32_t ev);
  // Under mu_: a connectionless probe or reply (io/udp/probes.h) that came on `plane` from
  // `from`; false: not one (malformed: the engine counts it).
  // `stamp`: the kernel's receive time (SO_TIMESTAMPNS, CLOCK_REALTIME; 0 if none), where the
  // answer's service time starts.
  bool connectionless(size_t plane, const sockaddr_in6& from, bool ecn, const timespec& stamp,
                      std::span<const uint8_t> bytes, engine::Time t);
  // Under mu_: a PORT_STATUS or PORT_STATUS_ACK (port_status.h) that came on `plane`.
  void port_status_message(size_t plane, const sockaddr_in6& from, std::span<const uint8_t> bytes,
                           engine::Time t);
  // Under mu_: one datagram on `path` to `peer` (route()), with DSCP bits `tclass` (0: the
  // socket's); false if there is no route or the socket refused it. Probes and updates.
  bool send_datagram(engine::PeerId peer, engine::Path path, std::span<const uint8_t> bytes,
                     uint8_t tclass);
  // Under mu_: an ADDR_QUERY or ADDR_REPLY (peer_addresses.h) that came on `plane`.
  void address_message(size_t plane, const sockaddr_in6& from, std::span<const uint8_t> bytes,
                       engine::Time t);
  void send_address_queries(engine::Time t);  // under mu_: those due
  // Under mu_: add_fabric_peer.
  engine::PeerId add_peer_locked(std::vector<sockaddr_in6> per_plane_addresses);
  Result<engine::PeerId, std::string> add_fabric_peer_locked(uint32_t host,
                                                             std::span<const uint16_t> ports);

  UdpConfig cfg_;
  std::vector<std::unique_ptr<Plane>> sockets_;
  uint32_t max_payload_ = 0;  // smallest payload_for_link over the planes (create)
  int event_fd_ = -1;
  // poll_progress (times in ns of CLOCK_MONOTONIC, io::now: thread scheduling, not protocol
  // time). Pollers hold the sockets until poller_until_ns_ (the last poll + poller_grace).
  // The loop sleeps through that on a timerfd: it arms it to poller_until_ns_ itself before
  // each such sleep (so it always wakes), and pollers push it later while it sleeps on it
  // (Shard::stepped_back; re-armed once less than half the grace is left of poller_timer_ns_),
  // so a loop whose app polls without pause stays asleep.
  int poller_timer_fd_ = -1;
  // Pollers learn which of thread 0's plane sockets hold datagrams from this epoll set (one
  // epoll_wait, ~0.25 us here, where ppoll of 4 sockets took ~0.8 us; -1 with one plane:
  // recvmmsg straight). The loop's own ppoll does not use it.
  int poller_epoll_fd_ = -1;
  // The pollers' counters (UdpCounters::poller_*), outside mu_: written by pollers only,
  // relaxed, added to counters()'s snapshot.
  struct PollerCounts {
    std::atomic<uint64_t> polls{0}, busy{0}, ready_checks{0}, recvmmsg{0}, timer_arms{0};
  };
  PollerCounts poller_counts_;
  std::atomic<int64_t> poller_until_ns_{0};
  std::atomic<int64_t> poller_timer_ns_{0};
  void arm_poller_timer(int64_t at_ns);
  // The sockets' receive side (Plane's rx buffers, Scratch::got): the loop's receive rounds
  // or one poll_progress at a time, from the recvmmsg through feeding the engine; released
  // before that round's sends (issue 17), which run under mu_ alone. Taken before mu_, never
  // while holding it (released while holding it).
  std::mutex rx_mu_;

  mutable std::mutex mu_;  // guards engine_, peers_, counters_, pending queues
  std::unique_ptr<engine::Engine> engine_;
  // peers_[peer][plane][spine]: destination (kSrv6: one per spine; else one).
  std::vector<std::vector<std::vector<sockaddr_in6>>> peers_;
  // explicit_path: the addresses per plane, and the destinations made from them per
  // (peer, plane, index) with the peer's port (a map: route() hands out stable pointers).
  std::vector<std::vector<srv6::Ipv6>> explicit_;
  mutable std::map<std::tuple<engine::PeerId, uint16_t, uint32_t>, sockaddr_in6> explicit_to_;
  // stev_path: (flow label, source port) per plane, and the destinations made from them per
  // (peer, plane, index), the peer's address with the label (a map: stable pointers).
  struct Stev {
    uint32_t label = 0;
    uint16_t sport = 0;
    bool operator==(const Stev&) const = default;
  };
  std::vector<std::vector<Stev>> stev_;
  mutable std::map<std::tuple<engine::PeerId, uint16_t, uint32_t>, sockaddr_in6> stev_to_;
  // add_peer_at: peers by their known address (16 bytes + port), and which may be learnt.
  std::map<std::array<uint8_t, 16>, engine::PeerId> peers_at_;     // under mu_
  std::map<engine::PeerId, std::vector<sockaddr_in6>> learnable_;  // under mu_
  std::unique_ptr<PeerAddresses> addresses_;                       // under mu_
  UdpCounters counters_;
  // flush_unlock's stages (app calls, pollers): one per caller at a time, kept for reuse.
  std::mutex stages_mu_;
  std::vector<std::unique_ptr<TxStage>> stages_;  // under stages_mu_: free ones
  std::unique_ptr<TxStage> take_stage();
  void give_stage(std::unique_ptr<TxStage> st);
  std::atomic<uint64_t> app_flush_wakeups_{0};  // UdpCounters::app_wakeups of flush_unlock
  std::unique_ptr<Scratch> scratch_;    // poll_progress's buffers (under rx_mu_)
  std::unique_ptr<Probes> probes_;     // under mu_
  PortStatusUpdates port_status_;      // under mu_
  std::unique_ptr<DriverObserver> observer_;  // under mu_; null: none attached (or MRC_STATS=0)
  std::unique_ptr<LinkWatch> link_watch_;     // under mu_; null: no plane's link is watched
  std::vector<std::string> link_notes_;       // set by create(), then read-only
  void link_changes(engine::Time t);          // under mu_: link_watch_'s news to the engine

  std::function<void()> on_progress_;
  // The progress threads' shares of the planes (shards_[0]: thread 0's, with event_fd_),
  // and step()'s: every plane, as thread 0.
  std::vector<std::unique_ptr<Shard>> shards_;
  // with_engine_flush (qpn null) and with_engine_post (*qpn): f under mu_, then flush_unlock,
  // or, for a post to a QP with a backlog while no poller holds the sockets, a wakeup of the
  // loop after the unlock (with_engine's way). activity_ grows after the unlock either way.
  template <class F>
  decltype(auto) post_call(const engine::Qpn* qpn, F&& f) {
    bool must_wake = false;
    struct After {
      UdpDriver* d;
      bool& wake;
      ~After() {
        d->activity_.fetch_add(1, std::memory_order_release);
        if (wake) d->wake();
      }
    } after_unlock{this, must_wake};  // destroyed after `lock`
    std::unique_lock lock(mu_);
    const bool backlog = qpn && engine_->in_flight(*qpn) >= kPostBatchInFlight &&
                         poller_until_ns_.load(std::memory_order_relaxed) <= io::now().count();
    auto r = f(*engine_);
    if (backlog) {  // the loop sends it
      ++counters_.app_wakeups;
      must_wake = true;
      return r;
    }
    must_wake = flush_unlock(lock);
    if (must_wake) app_flush_wakeups_.fetch_add(1, std::memory_order_relaxed);
    return r;
  }

  std::unique_ptr<Shard> step_shard_;
  std::vector<uint32_t> plane_shard_;  // plane -> index into shards_
  std::atomic<bool> started_{false};  // written under mu_ (start, stop)
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> activity_{0};
  int64_t planned_wake_ns_ = 0;  // under mu_: when the sleeping loop wakes by itself (ns)
  // An app call (flush_unlock) or another thread's round that makes an engine deadline earlier
  // than planned_wake_ns_ arms this timerfd (move_alarm_locked; relative, so a test clock works
  // as the loop's timeout does) rather than waking the loop. The loop watches it and leaves it
  // armed until it rings: till then it covers every engine deadline at or after it, and the
  // loop's own timeout only the earlier ones. (Disarming it before each sleep was a
  // timerfd_settime per round, and the next post armed it again: two per message, each ~10 us
  // on a VM where the timer is the CPU's next one. Left armed, a ping-pong arms it about once
  // per tail-loss-probe time and it rings once then, a loop round.)
  int deadline_timer_fd_ = -1;
  int64_t alarm_at_ns_ = INT64_MAX;  // under mu_: when it rings (cfg_.clock() ns); MAX: unarmed
};

}  // namespace mrc::io
