// Path (EV) health of one QP: which EVs carry data and in what order (spraying),
// when an EV is declared bad, how it is probed and brought back.
// Threading: owned by its QP (engine thread).
//
// A QP holds its active EVs (QpAttr::paths, typically 16 per plane) and
// backups (QpAttr::backup_paths); all live in one array, indexed by the
// `path` of each packet record. Per EV:
//
//   GOOD         carries data. A trim NACK or an ECN echo sets a one-time skip
//                mark: the sprayer passes it over once (SKIP in MRC terms).
//   ASSUMED_BAD  carries no data; probed every probe_interval (doubling while
//                probes go unanswered, up to probe_interval_max, back to
//                probe_interval on a reply); after probes_to_good clean
//                replies in a row it is GOOD again.
//                Entered after loss_threshold losses in a row on the EV
//                (RACK, i.e. later packets on other EVs were acknowledged),
//                or at once on a retransmission timeout. Trims never count.
//                A probe counts as unanswered only once it is older than the EV's
//                round trip allows (probe_wait): a path whose RTT is above
//                probe_interval (queues of a loaded port, a long fabric) comes back
//                after probes_to_good replies, a few round trips, as a short one does.
//                A relapse (bad again within relapse_window of coming back through
//                probes: a path that keeps losing) waits before its first probe,
//                probe_interval doubled per relapse in a row, up to 8 x
//                probe_interval_max (relapse_gap).
//   DENIED       set by the controller; never used nor probed until allowed.
//
// Active set: an EV that goes bad leaves the active set and the first GOOD backup
// of the same plane takes its place; an EV that comes back rejoins the active
// set if its plane is short, else the backups.
//
// Spraying: planes take turns by smooth weighted round robin, weight =
// plane_weight x min(1, usable EVs / min_active_per_plane), so a plane that
// has lost paths beyond its backups carries less, and a plane with no usable
// EV carries nothing. The turn is passed over when its plane holds more than
// its weight's share of the QP's packets in flight (by an eighth, plus one
// packet): the packet goes to the plane least loaded for its weight instead.
// A plane that drains slower than the others (a port negotiated down, a
// policer, a congested T0) keeps its ACKs longer, so it gets new packets only
// as fast as it delivers them, and the window it would have queued goes to the
// planes that move (healthy planes stay within a packet of their share, so the
// order is then the round robin's). Where the round robin's weights tie, plane 0 goes first,
// then up; while some plane has no weight (held: a port with no link), the first is instead
// the k-th weighted plane, k from a hash of the first active EV and the QP number, so that
// fresh QPs do not all start on the lowest weighted plane (8-packet messages over 3 planes
// went 3:3:2). Inside a plane, EVs take turns. A retransmission avoids
// the EV the packet was lost on. With no usable EV anywhere (everything bad),
// the sprayer still returns a non-denied EV, round robin: the QP keeps trying
// and its retry budget decides, it never stalls silently.
//
// Plane drain: when every EV of a plane is bad the plane is drained and probed
// as a whole, one probe per probe_interval; an EV that answers is probed again, one that
// does not hands over to the next EV of the plane. After probes_to_good clean replies in
// a row the whole plane is GOOD again (EVs still dead then fail again on their own).
//
// Every state change is an EvEvent (EV, plane, old, new, reason).
//
// Reverse paths: the receiver sends each ACK (and NACK, probe reply) back on
// the EV and plane the data came on, so an ACK path is always one the data
// sender currently judges GOOD. A broken reverse direction shows up at the
// sender as unacknowledged packets (RACK, TLP, RTO) and failed probes, which
// are round trips; a QP that only receives needs no path state of its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <new>
#include <span>
#include <unordered_map>
#include <vector>

#include "mrc/engine/types.h"

namespace mrc::engine {

enum class EvState : uint8_t { kGood, kAssumedBad, kDenied };
const char* to_string(EvState s);

enum class EvReason : uint8_t {
  kLoss,           // loss_threshold packets in a row lost on it
  kTimeout,        // a retransmission timeout hit a packet on it
  kProbeClean,     // probes_to_good clean probe replies
  kPlaneDrained,   // every EV of its plane is bad (reported once per plane, on the last EV)
  kPlaneRestored,  // its drained plane answered probes again
  kDenied,         // controller
  kAllowed,        // controller lifted a deny; probing starts
};
const char* to_string(EvReason r);

/// How a QP judges and probes its paths (OCP EV profile and our knobs).
struct PathPolicy {
  uint32_t min_active_per_plane = 4;  // ev_min_active: below it a plane's weight shrinks
  uint32_t loss_threshold = 2;        // losses in a row (RACK) that make an EV ASSUMED_BAD
  uint32_t probes_to_good = 3;        // clean probe replies in a row that make it GOOD
  Duration probe_interval{100'000};   // between probes of one bad EV (or of a drained plane)...
  Duration probe_interval_max{2'000'000};  // ...doubling per unanswered probe up to this
  Duration relapse_window{2'000'000};      // bad again this soon after probes brought it
                                           // back: a relapse (the first probe waits longer)
  uint32_t plane_weight[kMaxPlanes] = {1, 1, 1, 1, 1, 1, 1, 1,
                                       1, 1, 1, 1, 1, 1, 1, 1};  // capacity by plane
};

struct EvEvent {
  uint32_t ev = 0;
  uint16_t plane = 0;
  EvState from = EvState::kGood;
  EvState to = EvState::kGood;
  EvReason reason = EvReason::kLoss;
  Time at{0};
};

/// A probe to send now on EV `index`.
struct ProbeRequest {
  uint16_t index = 0;
  uint32_t seq = 0;
};

class PathSet {
 public:
  /// What a data packet sent on an EV and its acknowledgement read and write of the EV (the
  /// sprayer's flags, the wire's EV value, Core's sent-order list, the per-packet counters'
  /// low bits, srtt, per-EV RACK), 32 bytes: two EVs to a cache line, and a QP's EVs in one
  /// dense array (hot_, an EvBlock), so that a QP whose state has left the caches (thousands
  /// of QPs, each active in turn) pays half a line per packet for its EV, not a line (a 64 KiB
  /// message over 16 EVs: 8 lines, not 16). The last RTT sample of each EV (written per ACK)
  /// follows the records in the same block. Everything else about the EV (health
  /// bookkeeping, probes, counters' high parts) is in a cold record (Cold) that a packet
  /// touches only when a loss, a probe, a state change or a counter's carry needs it.
  /// Nothing else keeps a copy of these fields: the sprayer decides from this record alone,
  /// so there is nothing to drift apart.
  struct alignas(32) Hot {
    uint64_t rack_xseq = 0;  // transmission order of the newest first transmission on it known
                             // delivered (RACK per EV)
    // The sender's in-flight packets last sent on this EV, in sending order (PSNs; Core's
    // ev_list_*); valid while `listed`.
    uint32_t tx_head = 0, tx_tail = 0;
    uint32_t ev = 0;           // Path::ev: the EV value each packet carries on the wire
    uint32_t srtt_ns = 0;      // smoothed send-to-ACK time of data on this EV (saturates at 4.29 s)
    uint32_t tx_bytes_lo = 0;  // PathStats::tx_bytes, low 32 bits (Cold::tx_bytes_hi)
    // PathStats::tx_packets and acked, low 8 bits: a carry adds 256 to Cold's base (once
    // per 256 packets on the EV).
    uint8_t tx_packets_lo = 0, acked_lo = 0;
    uint8_t plane = 0;       // Path::plane (< kMaxPlanes)
    uint8_t state_ : 2 = 0;  // EvState
    uint8_t active : 1 = 0;  // in the sprayed set (else a backup)
    uint8_t skip : 1 = 0;    // pass over once
    uint8_t held : 1 = 0;    // held by the engine's shared view of EVs (SharedHealth): passed over
    uint8_t listed : 1 = 0;  // sender: tx_head / tx_tail hold a list (else no packet in it)
    uint8_t lossy : 1 = 0;   // Cold::losses is not 0 (an ACK then clears it)

    EvState state() const { return static_cast<EvState>(state_); }
    /// In the sprayed set and GOOD: the sprayer may pick it.
    bool usable() const { return active && state_ == static_cast<uint8_t>(EvState::kGood); }
    Duration srtt() const { return Duration{srtt_ns}; }
  };
  static_assert(sizeof(Hot) == 32, "two EVs to a cache line");

  /// The rest of an EV's record: health bookkeeping, probes, observers' fields.
  struct Cold {
    Path path;
    EvReason reason = EvReason::kAllowed;  // why it entered its state (meaningful once changes > 0)
    uint8_t backoff = 0;                   // probe interval doublings (unanswered probes)
    uint16_t losses = 0;                   // losses in a row (Hot::lossy: not 0)
    uint16_t clean = 0;                    // clean probe replies in a row
    uint8_t relapses = 0;  // times in a row it went bad within relapse_window of coming back
    uint32_t tx_bytes_hi = 0;
    uint64_t tx_packets_base = 0, acked_base = 0;  // multiples of 256 (Hot's low bits carry here)
    uint64_t lost = 0;                             // PathStats::lost, trims (the sender counts)
    uint64_t trims = 0;
    uint32_t probe_seq = 0;  // seq of the latest probe sent (0: none)
    uint32_t reply_seq = 0;  // probe_seq when last answered (equal: nothing outstanding)
    Time probe_sent{0};
    Time next_probe = kNever;
    Time since{0};         // time of the last state change
    uint32_t changes = 0;  // state changes so far (observers diff snapshots)
  };

  static_assert(sizeof(Cold) == 96, "relapses sits in what was padding");

  /// One EV as observers and tests see it: a copy of both records (ev(i)).
  struct Ev {
    Path path;
    EvState state = EvState::kGood;
    bool active = false, skip = false, held = false, listed = false;
    uint8_t backoff = 0;
    uint16_t losses = 0, clean = 0;
    uint32_t tx_head = 0, tx_tail = 0;
    uint64_t rack_xseq = 0;
    Duration srtt{0};
    uint64_t rtt_ns = 0;
    EvReason reason = EvReason::kAllowed;
    uint32_t probe_seq = 0, reply_seq = 0;
    uint64_t lost = 0, trims = 0;
    Time probe_sent{0}, next_probe = kNever, since{0};
    uint32_t changes = 0;
    uint64_t tx_packets_ = 0, tx_bytes_ = 0, acked_ = 0;
    uint64_t tx_packets() const { return tx_packets_; }
    uint64_t tx_bytes() const { return tx_bytes_; }
    uint64_t acked() const { return acked_; }
  };

  /// Replaces the set. Planes must be < kMaxPlanes. Events are not emitted for the reset.
  /// `salt` (the engine passes the QP number) picks, with the first active EV, where the
  /// round robin starts while some plane is held: QPs given the same path list (a real
  /// host's driver gives every QP to a peer the same one) then start on different planes.
  void reset(std::span<const Path> active, std::span<const Path> backups, const PathPolicy& p,
             uint32_t salt = 0);
  const PathPolicy& policy() const { return policy_; }
  void set_policy(const PathPolicy& p) {
    policy_ = p;
    refresh_weights();
  }

  size_t size() const { return hot_.size(); }
  /// 1 + the highest plane of the set (0: no paths): the NIC ports the QP sprays over.
  uint16_t planes() const { return planes_; }
  /// A copy of EV i's records (observers, tests; not for the per-packet path).
  Ev ev(size_t i) const;
  /// All EVs, as ev(i) gives them.
  std::vector<Ev> evs() const;
  /// EV i's path (its cold record).
  const Path& path(size_t i) const { return cold_[i].path; }
  EvState state(size_t i) const { return hot_[i].state(); }
  /// EV i's per-packet record for the sender's fields (tx_head, tx_tail, listed, rack_xseq,
  /// the counters through count_sent / count_acked): Core's sent-order lists and PathStats
  /// live there. Nothing else writes them.
  Hot& tx(size_t i) { return hot_[i]; }
  const Hot& hot(size_t i) const { return hot_[i]; }
  /// A data packet of `bytes` payload bytes sent on EV i (PathStats::tx_packets, tx_bytes).
  void count_sent(size_t i, uint32_t bytes) {
    Hot& h = hot_[i];
    if (++h.tx_packets_lo == 0) [[unlikely]]
      cold_[i].tx_packets_base += 256;
    h.tx_bytes_lo += bytes;
    if (h.tx_bytes_lo < bytes) [[unlikely]]
      ++cold_[i].tx_bytes_hi;
  }
  /// A data packet sent on EV i acknowledged (PathStats::acked).
  void count_acked(size_t i) {
    if (++hot_[i].acked_lo == 0) [[unlikely]]
      cold_[i].acked_base += 256;
  }
  void count_lost(size_t i) { ++cold_[i].lost; }
  void count_trim(size_t i) { ++cold_[i].trims; }
  /// The last RTT sample on EV i (data or probe): PathStats::rtt_ns. Kept as 32 bits (a
  /// sample above 4.29 s reads 4.29 s) in a dense array beside the per-packet records: each
  /// ACK writes one, and 16 EVs' samples share a line.
  void set_rtt_sample(size_t i, uint64_t ns) {
    hot_.rtt()[i] = static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX));
  }
  /// Empties every EV's sent-order list and forgets its newest delivered packet (the
  /// sender's in-flight state was reset, or the set was: Core relinks what is in flight).
  void clear_tx() {
    for (Hot& h : hot_) {
      h.listed = false;
      h.rack_xseq = 0;
    }
  }
  /// Index of `ev`, or -1.
  int find(uint32_t ev) const;

  static constexpr uint16_t kNoPath = 0xFFFF;
  /// The EV for the next data packet; `avoid` (an index or -1: the EV a resent packet
  /// was lost on) is skipped when another choice exists. A resend also leaves its plane,
  /// and every plane whose latest data packet was lost (RACK or RTO, any EV: a T0 or a
  /// port down shows as losses on every EV of the plane, which a short QP sees only once
  /// or twice each), when another plane may carry data. kNoPath when every EV is denied.
  uint16_t next(int avoid);
  /// Asks the CPU to fetch, for writing, the QP's EV block (EvBlock: the per-packet records,
  /// RTT samples and by-plane list; its first 16 lines, all of it up to 26 EVs), so that a QP
  /// whose records left the caches (thousands of QPs, each active in turn) finds them there
  /// when it sends; next() asks for the next EV of the plane it picked from. The addresses
  /// need no load of the set's state (a load that missed would hold the hints back). A hint
  /// only: no state changes.
  void prefetch_next() const;

  // ---- Feedback (each may append to `out`) ----------------------------------------------
  void on_acked(uint16_t i) {  // per packet acknowledged: inline
    Hot& h = hot_[i];
    if (h.lossy) [[unlikely]] {
      cold_[i].losses = 0;
      h.lossy = false;
    }
    if (lossy_) lossy_ &= static_cast<uint16_t>(~(1u << h.plane));
  }
  /// A data packet went out on `plane` / left the network (acknowledged or declared lost):
  /// the per-plane packets in flight that balance the planes (see Spraying above).
  void on_sent(uint16_t plane) {
    ++turn_[plane].inflight;
    ++inflight_total_;
  }
  void on_left(uint16_t plane) {
    // A clear_inflight() came in between, or a reset() left the plane out.
    if (plane >= planes_ || turn_[plane].inflight == 0) return;
    --turn_[plane].inflight;
    --inflight_total_;
  }
  /// Nothing is in flight any more (the QP's send state was reset).
  void clear_inflight() {
    for (Turn& t : turn_) t.inflight = 0;
    inflight_total_ = 0;
  }
  uint32_t inflight(uint16_t plane) const { return plane < planes_ ? turn_[plane].inflight : 0; }
  /// A send-to-ACK sample of a data packet on EV i (EWMA 1/8).
  void on_rtt(uint16_t i, Duration rtt) {
    const Duration old = hot_[i].srtt();
    const Duration s = old == Duration{0} ? rtt : (7 * old + rtt) / 8;
    hot_[i].srtt_ns = static_cast<uint32_t>(std::clamp<int64_t>(s.count(), 0, UINT32_MAX));
  }
  void on_lost(uint16_t i, bool timeout, Time now, std::vector<EvEvent>& out);
  /// Trim NACK or ECN echo: skip once.
  void on_congestion(uint16_t i);

  // ---- Probes ---------------------------------------------------------------------------
  /// Earliest time poll_probes has work (kNever when nothing is bad).
  Time next_probe_time() const;
  /// Probes due at `now`, appended to `out`; marks them outstanding.
  void poll_probes(Time now, std::vector<ProbeRequest>& out, std::vector<EvEvent>& events);
  /// A probe reply for EV index i with sequence seq; ecn: it came back marked.
  void on_probe_reply(uint16_t i, uint32_t seq, bool ecn, Time now, std::vector<EvEvent>& out);

  // ---- Controller -----------------------------------------------------------------------
  /// Deny (true) or allow (false) an EV. False if no such EV.
  bool deny(uint32_t ev, bool on, Time now, std::vector<EvEvent>& out);

  /// EVs per state (kept as counters), and planes drained.
  uint32_t count(EvState s) const { return count_[static_cast<size_t>(s)]; }
  bool plane_drained(uint16_t plane) const {
    return plane < kMaxPlanes && (drained_ >> plane & 1u);
  }

  /// Planes the engine's shared view holds down for this QP's peer (SharedHealth, bit per
  /// plane): weight 0, like an administrative drain, until the view lets them go.
  void set_planes_held(uint16_t mask);
  uint16_t planes_held() const { return held_; }
  /// EV i is held by the engine's shared view of EVs (SharedHealth::ev_held): the sprayer
  /// passes over it while its plane has another usable EV (unlike skip, every time).
  void set_ev_held(uint16_t i, bool held) {
    if (static_cast<bool>(hot_[i].held) == held) return;
    hot_[i].held = held;
    evs_held_ = held ? evs_held_ + 1 : evs_held_ - 1;
  }
  uint32_t evs_held() const { return evs_held_; }

  /// Administrative drain (controller), unlike the automatic drain above: a plane that
  /// is admin-down gets weight 0, so no data is sprayed on it (retransmissions included),
  /// while its EVs keep their state, counters and probing. Survives reset(). Only the
  /// "nothing usable anywhere" fallback of next() may still pick one of its EVs.
  void set_plane_admin_down(uint16_t plane, bool down);
  bool plane_admin_down(uint16_t plane) const {
    return plane < kMaxPlanes && (admin_down_ >> plane & 1u);
  }

 private:
  void set_state(uint16_t i, EvState to, EvReason why, Time now, std::vector<EvEvent>& out);
  Duration probe_gap(uint8_t backoff) const;
  /// How long a probe sent on EV i (with `backoff` doublings) may go unanswered before it
  /// counts as lost: the probe gap, or twice the EV's round trip (the larger of its data
  /// SRTT and its last RTT sample, probe replies included) when that is longer. A probe
  /// waits behind the same queues as data: on a path whose RTT is above probe_interval
  /// (a loaded port, a long fabric) a reply can never beat the next probe, and counting
  /// each such probe lost kept a live EV ASSUMED_BAD for as long as the queue stayed.
  /// Twice the round trip counts up to 4 x probe_interval_max (8 ms by default): the data
  /// SRTT stops moving while the EV is bad, and one taken in the queue that made it bad
  /// must not stretch every later wait.
  Duration probe_wait(uint16_t i, uint8_t backoff) const;
  /// From going ASSUMED_BAD to the first probe: probe_interval, doubled per relapse in a row
  /// (Cold::relapses), up to 8 x probe_interval_max (16 ms by default): a path that keeps
  /// losing carries data for about a round trip each time it comes back, so the wait is what
  /// keeps its share small. A plane whose every EV went bad (drained) waits for the longest
  /// of its EVs' relapse gaps before its first plane probe.
  Duration relapse_gap(uint8_t relapses) const;
  void leave_active(uint16_t i);
  void rejoin(uint16_t i);
  bool plane_all_bad(uint16_t plane) const;
  int pick_in_plane(uint16_t plane, int avoid);
  /// `best` unless it holds more than its share of the packets in flight among the planes
  /// not in `off`; then the plane least loaded for its weight.
  int balance(int best, uint32_t off) const;
  void refresh_weights();  // after PlaneState::usable or the policy changes
  /// EV indexes of `plane`, in index order.
  std::span<const uint16_t> plane_evs(uint16_t plane) const {
    return {hot_.by_plane() + turn_[plane].begin, plane_size(plane)};
  }
  /// How many EVs `plane` has (from the per-plane state: no read of the by-plane list).
  size_t plane_size(uint16_t plane) const {
    const size_t end = plane + 1u < planes_ ? turn_[plane + 1u].begin : hot_.size();
    return end - turn_[plane].begin;
  }

  // Memory: two arrays of EVs (Hot, Cold), one of their indexes grouped by plane, one sorted
  // (ev, index) table, the ASSUMED_BAD list, and two per-plane arrays sized to the planes
  // in use (planes(), set by reset(): 4 planes cost 4 entries, not kMaxPlanes; an idle QP's
  // path set is ~250 bytes of per-plane state instead of ~930), the sprayer's (Turn, hot) and
  // the health machinery's (PlaneState, cold). Per-plane flags are bits of a uint16_t.
  // No work here scans every EV except reset(): spraying looks at one plane's EVs from
  // its cursor on (EvBlock::by_plane: 2 bytes an EV), probing
  // walks the ASSUMED_BAD list, counts are counters.
  // What a packet touches (next(), on_sent / on_left, on_acked) comes first, the
  // sprayer's per-plane state interleaved (Turn): a QP of a few planes whose state has
  // left the caches pays a line or two for it, not one per array.
  struct Turn {
    int64_t wrr = 0;        // smooth weighted round robin state
    int64_t w = 0;          // current weight of the plane
    uint32_t inflight = 0;  // data packets in flight on the plane (on_sent / on_left)
    uint16_t cursor = 0;    // position in the plane's EVs (plane_evs) to try next (pick_in_plane)
    uint16_t begin = 0;     // the plane's EVs: by_plane()[begin, the next plane's begin)
  };
  static_assert(sizeof(Turn) == 24);
  /// A plane's health when it is not sprayed on: active set bookkeeping and plane probing.
  struct PlaneState {
    Time next_probe{0};          // drained: when the plane is probed next
    uint32_t target_active = 0;  // active EVs at reset
    uint32_t usable = 0;         // active GOOD EVs
    uint32_t active = 0;         // active EVs
    uint32_t drain_cursor = 0;   // drained: the EV (of the plane's) probed next
    uint32_t clean = 0;          // drained: clean probe replies in a row
    uint8_t backoff = 0;         // drained: probe interval doublings
  };
  /// One 64-byte aligned block of n EVs: their Hot records (32 n bytes: 16 EVs fill 8 lines
  /// exactly), their last RTT samples (4 n), their indexes grouped by plane (2 n, the list
  /// the sprayer walks): what a packet touches of its EV in one allocation, no line shared
  /// with another object.
  class EvBlock {
   public:
    void assign(std::span<const Hot> hot);
    size_t size() const { return n_; }
    Hot& operator[](size_t i) { return data()[i]; }
    const Hot& operator[](size_t i) const { return data()[i]; }
    Hot* begin() { return data(); }
    Hot* end() { return data() + n_; }
    const Hot* begin() const { return data(); }
    const Hot* end() const { return data() + n_; }
    uint32_t* rtt() { return std::launder(reinterpret_cast<uint32_t*>(bytes() + 32 * n_)); }
    const uint32_t* rtt() const {
      return std::launder(reinterpret_cast<const uint32_t*>(bytes() + 32 * n_));
    }
    uint16_t* by_plane() { return std::launder(reinterpret_cast<uint16_t*>(bytes() + 36 * n_)); }
    const uint16_t* by_plane() const {
      return std::launder(reinterpret_cast<const uint16_t*>(bytes() + 36 * n_));
    }
    /// The block's first `max_lines` cache lines, prefetched for writing.
    void prefetch(size_t max_lines) const {
      const size_t lines = std::min(lines_.size(), max_lines);
      for (size_t k = 0; k < lines; ++k) __builtin_prefetch(&lines_[k], 1);
    }

   private:
    struct alignas(64) Line {
      std::byte b[64];
    };
    Hot* data() { return std::launder(reinterpret_cast<Hot*>(lines_.data())); }
    const Hot* data() const { return std::launder(reinterpret_cast<const Hot*>(lines_.data())); }
    std::byte* bytes() { return reinterpret_cast<std::byte*>(lines_.data()); }
    const std::byte* bytes() const { return reinterpret_cast<const std::byte*>(lines_.data()); }
    std::vector<Line> lines_;
    uint32_t n_ = 0;
  };
  EvBlock hot_;             // per EV: what a packet touches
  std::vector<Turn> turn_;  // per plane in use (planes_ entries)
  int64_t total_w_ = 0;
  uint32_t inflight_total_ = 0;
  uint16_t planes_ = 0;          // 1 + highest plane in the set
  uint16_t no_weight_ = 0xFFFF;  // bit per plane: its Turn::w is 0
  uint16_t tie_start_ = 0;       // the round robin's ties go to this plane first, then up
  uint32_t tie_seed_ = 0;        // a hash of the first active EV and the salt: picks tie_start_
  uint16_t lossy_ = 0;           // planes whose latest acknowledged-or-lost data packet was lost
  // The rest: losses, probes, the controller, reset().
  uint16_t drained_ = 0;           // bit per plane: every EV of it bad (probed as a whole)
  uint16_t answered_ = 0;          // bit per drained plane: its last probe was answered
  uint16_t admin_down_ = 0;        // bit per plane (any plane < kMaxPlanes; survives reset())
  uint16_t held_ = 0;              // planes held down by the engine's shared view (bit per plane)
  uint32_t count_[3] = {};         // EVs per EvState (read when a QP's sending stops: kept near)
  std::vector<PlaneState> plane_;  // per plane in use (planes_ entries)
  std::vector<Cold> cold_;         // per EV: the rest of its record
  PathPolicy policy_;
  std::vector<std::pair<uint32_t, uint16_t>> index_;  // (ev, index), sorted by ev
  std::vector<uint16_t> bad_;  // indexes of ASSUMED_BAD EVs, ascending (probe order)
  uint32_t evs_held_ = 0;      // EVs with Hot::held
  uint32_t fallback_cursor_ = 0;
  uint32_t next_seq_ = 1;
};

/// Path health shared by all QPs of one engine, so that what one QP learns about a plane
/// is not rediscovered by every other (short QPs never see loss_threshold losses in a row
/// on one of their own EVs). Threading: owned by the engine (engine thread).
///
/// Two views of each plane (local NIC port), both fed by every QP:
///   per peer    losses in a row on a plane towards one peer (a T0 or T1 on the far side
///               down): `peer_losses` of them hold the plane down for that peer;
///   local       losses in a row on a plane towards any peer (our own port or T0 down):
///               `local_losses` of them hold the plane down for every peer.
/// Only losses that blame an EV count (RACK, RTO); trims and NACKs never do. Any data
/// packet acknowledged on the plane ends the run of losses and the backoff. A held plane
/// gets weight 0 in the sprayer of every QP concerned (PathSet::set_planes_held) for
/// `hold`, doubling each time it is held again without an acknowledgement in between,
/// up to `hold_max`; when the hold ends the QPs spray on it again, which is the probe: an
/// acknowledgement clears it, losses hold it again. A QP that drains a plane of its own
/// (PathSet, every EV of it bad) holds it for the peer while it probes it, and releases
/// it when the plane answers. QPs pick changes up lazily, before their next send
/// (epoch() moves on every change; held() says when a hold ends).
///
/// A third view, per EV value towards any peer: `ev_losses` blamed losses in a row on one
/// EV value, with no packet sent on that value (to any peer) acknowledged in between, hold
/// that EV for every QP that sprays on it (PathSet::set_ev_held: passed over while its plane
/// has another usable EV), with the same backoff. It finds a dead spine in an all-to-all of
/// short QPs, where every QP sees the dead EVs once or twice and no peer gets three losses
/// on a plane, provided the same EV value takes the same first hops towards every peer (the
/// SRv6 fabric and the simulated one: the EV names the spine). Where it does not (an ECMP
/// hash of the whole 5-tuple), packets on the value to other peers are acknowledged, which
/// ends the run: no hold, nothing lost but the lookup.
/// When an EV hold runs out with no acknowledgement on the EV since, the EV is not sprayed
/// on again to find out (data lost again, and found lost only by each QP's loss detection):
/// the first QP that looks sends one PROBE on it (ev_probe_due) and the EV stays held, the
/// hold doubled as after a loss, until a probe reply on it (or, after an acknowledgement on
/// it, until the running hold ends).
///
/// Each peer entry also keeps the RTT state of the latest QP that measured one to that
/// peer (SRTT, RTT variance, min RTT): a new QP to the peer starts from it rather than
/// from nothing, so its first loss-detection windows fit the queues of the moment.
class SharedHealth {
 public:
  struct Policy {
    uint16_t peer_losses = 3;      // losses in a row on (peer, plane) that hold it down
    uint16_t local_losses = 16;    // losses in a row on a plane, any peer, that hold it
    uint16_t ev_losses = 3;        // losses in a row on one EV value, any peer, that hold it
    Duration hold{100'000};        // first hold, ns...
    Duration hold_max{2'000'000};  // ...doubling per hold without an ACK in between
  };
  struct Plane {
    Time held_until{0};
    uint16_t losses = 0;  // blamed losses in a row
    uint8_t backoff = 0;  // holds since the last acknowledgement
  };
  struct Peer {
    Duration srtt{0}, rttvar{0}, min_rtt{0};  // RTT state of the latest QP to this peer
    Plane plane[kMaxPlanes];
    uint16_t counting = 0;        // bit per plane: its losses or backoff is not 0
    uint16_t announced_down = 0;  // bit per plane: the peer said it is down (set_announced_down)
    uint16_t reported_down = 0;   // bit per plane: its latest ACK said it has no link there
  };

  SharedHealth() = default;
  explicit SharedHealth(const Policy& p) : policy_(p) {}
  const Policy& policy() const { return policy_; }

  /// The entry of `peer`, created on first use; references stay valid for the engine's life.
  Peer& peer(PeerId peer) { return peers_[peer]; }
  /// The entry of `peer`, or null if no QP to it was made.
  const Peer* find(PeerId peer) const {
    const auto it = peers_.find(peer);
    return it == peers_.end() ? nullptr : &it->second;
  }
  size_t peers() const { return peers_.size(); }

  /// A blamed loss (RACK or RTO) of a packet sent on `plane` to `p`. True if it started a hold.
  bool on_lost(Peer& p, uint16_t plane, Time now);
  /// A QP to `p` drained `plane` (every EV of it bad, PathSet): hold it for the peer until
  /// at least `until` (the QP's next plane probe); the QP refreshes this while it probes.
  void hold_until(Peer& p, uint16_t plane, Time until, Time now);
  /// A QP to `p` found `plane` answering again (its drained plane restored): no hold.
  void release(Peer& p, uint16_t plane);
  /// A data packet sent on `plane` to `p` was acknowledged.
  void on_acked(Peer& p, uint16_t plane) {
    const auto bit = static_cast<uint16_t>(1u << plane);
    if (p.counting & bit) {  // written only when it changes
      p.plane[plane].losses = p.plane[plane].backoff = 0;
      p.counting &= static_cast<uint16_t>(~bit);
    }
    if (local_counting_ & bit) {
      local_[plane].losses = local_[plane].backoff = 0;
      local_counting_ &= static_cast<uint16_t>(~bit);
    }
  }
  /// False when no plane towards `p` (nor any local plane) has a run of losses or a backoff
  /// to end: on_acked would change nothing, whatever the plane (the per-packet fast path).
  bool counting(const Peer& p) const { return (p.counting | local_counting_) != 0; }
  /// The peer's own word on its planes (an OCP PORT_STATUS_UPDATE it sent, bit p: its plane p
  /// is down): those planes are held for it, with no end, until it says they are up again.
  void set_announced_down(Peer& p, uint16_t planes) {
    if (p.announced_down == planes) return;
    p.announced_down = planes;
    ++epoch_;
  }
  /// What the peer's latest ACK says of its plane ports (wire::AckHeader::ports_down, bit p:
  /// its port p has no link, so nothing sent to it on plane p arrives): those planes are held
  /// for it, with no end, until an ACK of it says otherwise.
  void set_reported_down(Peer& p, uint16_t planes) {
    if (p.reported_down == planes) return;
    p.reported_down = planes;
    ++epoch_;
  }
  /// This host's own plane ports with no link (its driver's word, Engine::set_port_up): held
  /// for every peer, with no end, until the link is back; and sent to peers in every ACK.
  void set_local_down(uint16_t planes) {
    if (local_down_ == planes) return;
    local_down_ = planes;
    ++epoch_;
  }
  uint16_t local_down() const { return local_down_; }
  /// Planes held down for `p` at `now` (bit per plane), announced, reported and local link
  /// downs included; *until: when the earliest timed hold of them ends (kNever if none).
  uint16_t held(const Peer& p, Time now, Time* until) const;
  const Plane& local(uint16_t plane) const { return local_[plane]; }

  /// A blamed loss (RACK or RTO) of a packet sent on EV value `ev`, to any peer. True if it
  /// started a hold of that EV.
  bool on_lost_ev(uint32_t ev, Time now);
  /// False when no EV value has a run of losses or a backoff: on_acked_ev would change
  /// nothing (the per-packet fast path; check it before looking the EV up).
  bool ev_counting() const { return ev_counting_ != 0; }
  /// A data packet sent on EV value `ev` (to any peer) was acknowledged.
  void on_acked_ev(uint32_t ev) {
    if (ev_counting_ == 0) return;
    const auto it = evs_.find(ev);
    if (it == evs_.end() || (it->second.losses == 0 && it->second.backoff == 0)) return;
    if (it->second.backoff != 0) --ev_backoff_;
    it->second.losses = it->second.backoff = 0;
    --ev_counting_;
  }
  /// The hold of EV value `ev` has run out with no acknowledgement on the EV since it began:
  /// rather than let every QP test it with data (lost again, each loss found only by loss
  /// detection), one QP tests it with a PROBE. True claims that probe for the caller, who
  /// sends it on the EV now; the EV is held again meanwhile, for the next, doubled, hold
  /// (the probe's timeout: no reply by then, the next QP to look probes again). A reply
  /// (on_probe_reply_ev) ends it at once; a packet acknowledged on the EV meanwhile lets the
  /// running hold end with no probe after it. False: no probe due.
  bool ev_probe_due(uint32_t ev, Time now);
  /// A probe reply came back on EV value `ev` (from any peer): the EV carries packets; its
  /// run of losses and backoff end, and so does its hold.
  void on_probe_reply_ev(uint32_t ev, Time now);
  uint64_t ev_probes() const { return ev_probes_; }  // probes claimed by ev_probe_due (counter)
  /// Whether EV value `ev` is held at `now`: a hold runs, or one ran and no acknowledgement
  /// or probe reply came on the EV since (its probe is due: ev_probe_due). If so, *until:
  /// when the running hold ends (at most `now` when the probe is due).
  bool ev_held(uint32_t ev, Time now, Time* until) const {
    const auto it = evs_.find(ev);
    if (it == evs_.end() || (it->second.held_until <= now && it->second.backoff == 0)) return false;
    *until = it->second.held_until;
    return true;
  }
  /// At or after this time no EV is held (Time{0} if none ever was; kNever while some EV
  /// waits for an acknowledgement or a probe reply after its hold).
  Time ev_holds_end() const { return ev_backoff_ > 0 ? kNever : ev_holds_end_; }

  /// Moves on every new hold and every change of a peer's announced planes.
  uint64_t epoch() const { return epoch_; }
  uint64_t holds() const { return holds_; }  // holds started, peer and local (counter)

 private:
  /// One blamed loss on `pl` (plane `plane`, whose bit in `counting` says it is counting).
  bool hold(Plane& pl, uint16_t& counting, uint16_t plane, uint16_t threshold, Time now);
  /// The length of a hold after `backoff` holds with no acknowledgement in between.
  Duration hold_for(uint8_t backoff) const;

  Policy policy_;
  std::unordered_map<PeerId, Peer> peers_;
  Plane local_[kMaxPlanes];
  uint16_t local_counting_ = 0;              // bit per plane: local_[plane] losses or backoff not 0
  uint16_t local_down_ = 0;                  // bit per plane: our port has no link (set_local_down)
  std::unordered_map<uint32_t, Plane> evs_;  // per EV value, any peer (same rules as a plane)
  uint32_t ev_counting_ = 0;                 // entries of evs_ whose losses or backoff is not 0
  Time ev_holds_end_{0};
  uint64_t epoch_ = 1;
  uint64_t holds_ = 0;
  uint64_t ev_probes_ = 0;
  uint32_t ev_backoff_ = 0;  // entries of evs_ whose backoff is not 0 (held, not answered)
};

}  // namespace mrc::engine
