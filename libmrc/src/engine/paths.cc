#include "mrc/engine/paths.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <memory>

namespace mrc::engine {

void PathSet::reset(std::span<const Path> active, std::span<const Path> backups,
                    const PathPolicy& p, uint32_t salt) {
  // What a packet reads and writes of the set itself (next(), on_sent, on_acked, count()):
  // two cache lines when the set starts one (Qp::paths does).
  static_assert(offsetof(PathSet, count_) + sizeof count_ <= 128 &&
                offsetof(PathSet, lossy_) < 128 && offsetof(PathSet, held_) < 128);
  policy_ = p;
  std::vector<Hot> hot;
  cold_.clear();
  evs_held_ = 0;
  index_.clear();
  bad_.clear();
  uint16_t planes = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (const Path& path : pass == 0 ? active : backups) {
      Hot h;
      h.ev = path.ev;
      h.plane = static_cast<uint8_t>(path.plane);
      h.active = pass == 0;
      Cold c;
      c.path = path;
      index_.emplace_back(path.ev, static_cast<uint16_t>(hot.size()));
      hot.push_back(h);
      cold_.push_back(c);
      planes = std::max<uint16_t>(planes, static_cast<uint16_t>(path.plane + 1));
    }
  }
  // Sorted by EV, then index: among equal EVs the first given comes first (find returns it).
  std::sort(index_.begin(), index_.end());
  planes_ = planes;
  hot_.assign(hot);
  // Per-plane state for the planes in use. Packets in flight keep their planes' counts (the
  // set may change under a live QP); those on a plane the new set lacks are forgotten.
  turn_.resize(planes);
  plane_.assign(planes, PlaneState{});
  inflight_total_ = 0;
  for (Turn& t : turn_) {
    t.wrr = 0;
    t.cursor = 0;
    inflight_total_ += t.inflight;
  }
  // The by-plane list: EV indexes grouped by plane (counting sort keeps index order).
  uint16_t n_in[kMaxPlanes] = {};
  for (const Hot& h : hot_) ++n_in[h.plane];
  uint16_t fill[kMaxPlanes];
  for (uint16_t pl = 0, begin = 0; pl < planes; begin = static_cast<uint16_t>(begin + n_in[pl++]))
    turn_[pl].begin = fill[pl] = begin;
  uint16_t* const by_plane = hot_.by_plane();
  for (size_t i = 0; i < hot_.size(); ++i) {
    const uint16_t pl = hot_[i].plane;
    by_plane[fill[pl]++] = static_cast<uint16_t>(i);
    if (hot_[i].active) {
      ++plane_[pl].target_active;
      ++plane_[pl].active;
      ++plane_[pl].usable;
    }
  }
  // Picks the plane the round robin starts from when some plane has no weight
  // (refresh_weights): a hash of the first active EV and the salt (the QP number).
  tie_seed_ = 0;
  for (const Hot& h : hot_) {
    if (!h.active) continue;
    uint64_t z = (uint64_t{h.ev} ^ uint64_t{salt} << 32) * 0x9E3779B97F4A7C15ull;
    tie_seed_ = static_cast<uint32_t>((z ^ (z >> 29)) >> 32);
    break;
  }
  count_[static_cast<size_t>(EvState::kGood)] = static_cast<uint32_t>(hot_.size());
  count_[static_cast<size_t>(EvState::kAssumedBad)] = 0;
  count_[static_cast<size_t>(EvState::kDenied)] = 0;
  drained_ = answered_ = 0;
  lossy_ = 0;
  fallback_cursor_ = 0;
  refresh_weights();
}

void PathSet::refresh_weights() {
  const uint32_t floor = std::max<uint32_t>(1, policy_.min_active_per_plane);
  total_w_ = 0;
  no_weight_ = 0;
  for (size_t p = 0; p < planes_; ++p) {
    const bool off = ((admin_down_ | held_) >> p) & 1u;
    turn_[p].w =
        off ? 0
            : int64_t{policy_.plane_weight[p]} * 1024 * std::min(plane_[p].usable, floor) / floor;
    total_w_ += turn_[p].w;
    if (turn_[p].w == 0) no_weight_ |= static_cast<uint16_t>(1u << p);
  }
  // With every plane weighted, ties go to plane 0 first, then up (a round of P turns covers
  // every plane whatever the start). With some plane weightless (held: a port with no link
  // at either end), they go first to the k-th plane with weight, k = tie_seed_ mod their
  // count: else every QP would start on the lowest weighted plane, and short messages (8
  // packets over 3 planes: 3:3:2) would leave the highest plane idle a third of the time.
  const auto all = static_cast<uint16_t>((1u << planes_) - 1);
  const auto weighted = static_cast<uint16_t>(~no_weight_ & all);
  tie_start_ = 0;
  if (weighted == all || weighted == 0) return;
  for (uint32_t k = tie_seed_ % static_cast<uint32_t>(std::popcount(weighted)), p = 0; p < planes_;
       ++p) {
    if (!(weighted >> p & 1u)) continue;
    if (k-- == 0) {
      tie_start_ = static_cast<uint16_t>(p);
      break;
    }
  }
}

void PathSet::EvBlock::assign(std::span<const Hot> hot) {
  n_ = static_cast<uint32_t>(hot.size());
  lines_.assign((38 * hot.size() + 63) / 64, Line{});  // zeroed: RTT samples and list start at 0
  std::uninitialized_copy(hot.begin(), hot.end(), reinterpret_cast<Hot*>(lines_.data()));
}

PathSet::Ev PathSet::ev(size_t i) const {
  const Hot& h = hot_[i];
  const Cold& c = cold_[i];
  Ev e;
  e.path = c.path;
  e.state = h.state();
  e.active = h.active;
  e.skip = h.skip;
  e.held = h.held;
  e.listed = h.listed;
  e.backoff = c.backoff;
  e.losses = c.losses;
  e.clean = c.clean;
  e.tx_head = h.tx_head;
  e.tx_tail = h.tx_tail;
  e.rack_xseq = h.rack_xseq;
  e.srtt = h.srtt();
  e.rtt_ns = hot_.rtt()[i];
  e.reason = c.reason;
  e.probe_seq = c.probe_seq;
  e.reply_seq = c.reply_seq;
  e.lost = c.lost;
  e.trims = c.trims;
  e.probe_sent = c.probe_sent;
  e.next_probe = c.next_probe;
  e.since = c.since;
  e.changes = c.changes;
  e.tx_packets_ = c.tx_packets_base + h.tx_packets_lo;
  e.tx_bytes_ = uint64_t{c.tx_bytes_hi} << 32 | h.tx_bytes_lo;
  e.acked_ = c.acked_base + h.acked_lo;
  return e;
}

std::vector<PathSet::Ev> PathSet::evs() const {
  std::vector<Ev> out;
  out.reserve(hot_.size());
  for (size_t i = 0; i < hot_.size(); ++i) out.push_back(ev(i));
  return out;
}

int PathSet::find(uint32_t ev) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), ev,
                             [](const auto& a, uint32_t v) { return a.first < v; });
  return it == index_.end() || it->first != ev ? -1 : it->second;
}

int PathSet::pick_in_plane(uint16_t plane, int avoid) {
  const std::span<const uint16_t> list = plane_evs(plane);
  const size_t n = list.size();
  int fallback = -1;
  for (int pass = 0; pass < 2; ++pass) {
    size_t pos = turn_[plane].cursor;
    for (size_t k = 0; k < n; ++k, pos = pos + 1 == n ? 0 : pos + 1) {
      const uint16_t i = list[pos];
      Hot& e = hot_[i];
      if (!e.usable()) continue;
      if (e.skip && pass == 0) {
        e.skip = false;
        if (fallback < 0) fallback = i;
        continue;
      }
      if (e.held && pass == 0) {
        if (fallback < 0) fallback = i;
        continue;
      }
      if (i == avoid) {
        if (fallback < 0) fallback = i;
        continue;
      }
      const size_t after = pos + 1 == n ? 0 : pos + 1;
      turn_[plane].cursor = static_cast<uint16_t>(after);
      // The plane's next EV is the likely one for this QP's next packet on the plane.
      __builtin_prefetch(&hot_[list[after]], 1);
      return i;
    }
  }
  return fallback;
}

void PathSet::prefetch_next() const {
  hot_.prefetch(16);
  // The sprayer's per-plane state (Turn: 24 bytes a plane): its first and last byte's lines.
  if (!turn_.empty()) {
    __builtin_prefetch(turn_.data(), 1);
    __builtin_prefetch(reinterpret_cast<const char*>(turn_.data() + turn_.size()) - 1, 1);
  }
}

int PathSet::balance(int best, uint32_t off) const {
  if (inflight_total_ == 0) return best;
  int64_t w_sum = 0, f_sum = 0;
  for (size_t p = 0; p < planes_; ++p) {
    if (off >> p & 1u) continue;
    w_sum += turn_[p].w;
    f_sum += turn_[p].inflight;
  }
  // Over its share: inflight_p / f_sum > (9/8) w_p / w_sum + 1 / f_sum, in integers.
  const auto over = [&](size_t p) {
    return int64_t{turn_[p].inflight} * w_sum * 8 > turn_[p].w * f_sum * 9 + 8 * w_sum;
  };
  if (f_sum == 0 || !over(static_cast<size_t>(best))) return best;
  int alt = best;
  for (size_t p = 0; p < planes_; ++p) {
    if (off >> p & 1u) continue;
    // inflight_p / w_p < inflight_alt / w_alt
    const auto a = static_cast<size_t>(alt);
    if (int64_t{turn_[p].inflight} * turn_[a].w < int64_t{turn_[a].inflight} * turn_[p].w)
      alt = static_cast<int>(p);
  }
  return alt;
}

uint16_t PathSet::next(int avoid) {
  // A resend leaves the plane it was lost on when another plane has weight: a lost packet
  // says as much about its plane (a T0 or port down) as about its EV.
  uint32_t skip = 0;
  int64_t skip_w = 0;
  if (avoid >= 0 && static_cast<size_t>(avoid) < hot_.size()) {
    for (const uint32_t want : {lossy_ | 1u << hot_[static_cast<size_t>(avoid)].plane,
                                1u << hot_[static_cast<size_t>(avoid)].plane}) {
      int64_t w = 0;
      for (size_t p = 0; p < planes_; ++p)
        if (want >> p & 1u) w += turn_[p].w;
      if (w < total_w_) {
        skip = want;
        skip_w = w;
        break;
      }
    }
  }
  int best = -1;
  const uint32_t off = no_weight_ | skip;
  for (size_t j = 0, p = tie_start_; j < planes_; ++j, p = p + 1 == planes_ ? 0 : p + 1) {
    if (off >> p & 1u) continue;
    turn_[p].wrr += turn_[p].w;
    if (best < 0 || turn_[p].wrr > turn_[static_cast<size_t>(best)].wrr) best = static_cast<int>(p);
  }
  if (best >= 0) {
    // The round robin's state moves as if `best` sent: the schedule stays the weights',
    // balance() only lends the turn to a plane that has drained more.
    turn_[static_cast<size_t>(best)].wrr -= total_w_ - skip_w;
    best = balance(best, off);
    const int i = pick_in_plane(static_cast<uint16_t>(best), avoid);
    if (i >= 0) return static_cast<uint16_t>(i);
  }
  // Nothing usable: keep trying every EV that is not denied, in turn, except on a plane the
  // operator drained (no data goes there, even while every other plane is held or bad).
  const size_t n = hot_.size();
  int fallback = kNoPath;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (fallback_cursor_ + k) % n;
    if (hot_[i].state() == EvState::kDenied || plane_admin_down(hot_[i].plane)) continue;
    fallback = static_cast<int>(i);
    if (static_cast<int>(i) == avoid && n > 1) continue;
    fallback_cursor_ = static_cast<uint32_t>(i + 1);
    return static_cast<uint16_t>(i);
  }
  return static_cast<uint16_t>(fallback);
}

void PathSet::on_congestion(uint16_t i) { hot_[i].skip = true; }

void PathSet::on_lost(uint16_t i, bool timeout, Time now, std::vector<EvEvent>& out) {
  Hot& h = hot_[i];
  lossy_ |= static_cast<uint16_t>(1u << h.plane);
  if (h.state() != EvState::kGood) return;
  Cold& e = cold_[i];
  ++e.losses;
  h.lossy = true;
  if (timeout || e.losses >= policy_.loss_threshold)
    set_state(i, EvState::kAssumedBad, timeout ? EvReason::kTimeout : EvReason::kLoss, now, out);
}

bool PathSet::plane_all_bad(uint16_t plane) const {
  bool any_bad = false;
  for (uint16_t i : plane_evs(plane)) {
    if (hot_[i].state() == EvState::kGood) return false;
    any_bad |= hot_[i].state() == EvState::kAssumedBad;
  }
  return any_bad;
}

void PathSet::leave_active(uint16_t i) {
  Hot& e = hot_[i];
  if (!e.active) return;
  const uint16_t pl = e.plane;
  e.active = false;
  --plane_[pl].active;
  // The first GOOD backup of the same plane (in the order given) takes its place.
  for (uint16_t j : plane_evs(pl)) {
    Hot& b = hot_[j];
    if (!b.active && b.state() == EvState::kGood) {
      b.active = true;
      ++plane_[pl].active;
      ++plane_[pl].usable;
      return;
    }
  }
}

void PathSet::rejoin(uint16_t i) {
  Hot& e = hot_[i];
  const uint16_t pl = e.plane;
  PlaneState& ps = plane_[pl];
  if (ps.active < ps.target_active) {
    e.active = true;
    ++ps.active;
    ++ps.usable;
  }
}

void PathSet::set_state(uint16_t i, EvState to, EvReason why, Time now, std::vector<EvEvent>& out) {
  Hot& h = hot_[i];
  Cold& e = cold_[i];
  const EvState from = h.state();
  if (from == to) return;
  const uint16_t pl = h.plane;
  if (from == EvState::kGood && h.active) --plane_[pl].usable;
  --count_[static_cast<size_t>(from)];
  ++count_[static_cast<size_t>(to)];
  if (from == EvState::kAssumedBad) bad_.erase(std::find(bad_.begin(), bad_.end(), i));
  if (to == EvState::kAssumedBad) bad_.insert(std::lower_bound(bad_.begin(), bad_.end(), i), i);
  if (from == EvState::kGood && to == EvState::kAssumedBad) {
    const bool relapse =
        e.changes > 0 &&
        (e.reason == EvReason::kProbeClean || e.reason == EvReason::kPlaneRestored) &&
        now - e.since < policy_.relapse_window;
    e.relapses = relapse ? static_cast<uint8_t>(std::min(e.relapses + 1, 16)) : 0;
  }
  h.state_ = static_cast<uint8_t>(to);
  e.since = now;
  e.reason = why;
  ++e.changes;
  e.losses = 0;
  h.lossy = false;
  e.clean = 0;
  h.skip = false;
  e.backoff = 0;
  out.push_back(EvEvent{e.path.ev, pl, from, to, why, now});
  switch (to) {
    case EvState::kGood:
      e.next_probe = kNever;
      rejoin(i);
      break;
    case EvState::kAssumedBad:
      leave_active(i);
      e.next_probe = now + relapse_gap(e.relapses);
      if (!plane_drained(pl) && plane_all_bad(pl)) {
        drained_ |= static_cast<uint16_t>(1u << pl);
        answered_ |= static_cast<uint16_t>(1u << pl);
        PlaneState& ps = plane_[pl];
        ps.clean = 0;
        ps.backoff = 0;
        // The plane's first probe waits as long as its longest relapse wait: a plane whose
        // EVs keep losing together (a lossy host port) is kept off as a single EV would be.
        Duration wait = policy_.probe_interval;
        for (uint16_t j : plane_evs(pl)) wait = std::max(wait, relapse_gap(cold_[j].relapses));
        ps.next_probe = now + wait;
        out.push_back(EvEvent{e.path.ev, pl, to, to, EvReason::kPlaneDrained, now});
      }
      break;
    case EvState::kDenied:
      leave_active(i);
      e.next_probe = kNever;
      break;
  }
  refresh_weights();
}

namespace {
// `d` doubled `times` times, never past `cap` (the doubling stops there: no overflow).
Duration doubled(Duration d, uint8_t times, Duration cap) {
  for (uint8_t i = 0; i < times && d < cap; ++i) d *= 2;
  return std::min(d, cap);
}
}  // namespace

Duration PathSet::probe_gap(uint8_t backoff) const {
  return doubled(policy_.probe_interval, backoff,
                 std::max(policy_.probe_interval, policy_.probe_interval_max));
}

Duration PathSet::relapse_gap(uint8_t relapses) const {
  return doubled(policy_.probe_interval, relapses,
                 8 * std::max(policy_.probe_interval, policy_.probe_interval_max));
}

Duration PathSet::probe_wait(uint16_t i, uint8_t backoff) const {
  const Duration rtt{std::max<uint32_t>(hot_[i].srtt_ns, hot_.rtt()[i])};
  const Duration cap = 4 * std::max(policy_.probe_interval, policy_.probe_interval_max);
  return std::max(probe_gap(backoff), std::min(2 * rtt, cap));
}

Time PathSet::next_probe_time() const {
  Time t = kNever;
  for (uint16_t p = 0; p < planes_; ++p)
    if (plane_drained(p)) t = std::min(t, plane_[p].next_probe);
  for (uint16_t i : bad_)
    if (!plane_drained(hot_[i].plane)) t = std::min(t, cold_[i].next_probe);
  return t;
}

void PathSet::poll_probes(Time now, std::vector<ProbeRequest>& out, std::vector<EvEvent>&) {
  // A probe still unanswered when the next one is due counts as lost: the run of
  // clean replies restarts and the interval doubles (up to probe_interval_max).
  for (uint16_t p = 0; p < planes_; ++p) {
    PlaneState& ps = plane_[p];
    if (!plane_drained(p) || ps.next_probe > now) continue;
    const std::span<const uint16_t> list = plane_evs(p);
    const auto bit = static_cast<uint16_t>(1u << p);
    // The EV that answered the last probe is probed again (a plane with one live path among
    // dead ones comes back through it); one that did not answer hands over to the next.
    if (!(answered_ & bit)) {
      // Unanswered: lost only once older than a round trip of its EV allows (probe_wait).
      const uint16_t last = list[ps.drain_cursor % list.size()];
      const Time lost_at = cold_[last].probe_sent + probe_wait(last, ps.backoff);
      if (lost_at > now) {
        ps.next_probe = lost_at;
        continue;
      }
      ps.clean = 0;
      if (ps.backoff < 16) ++ps.backoff;
      ps.drain_cursor = static_cast<uint32_t>((ps.drain_cursor + 1) % list.size());
    }
    for (size_t k = 0; k < list.size(); ++k) {
      const uint16_t i = list[(ps.drain_cursor + k) % list.size()];
      if (hot_[i].state() != EvState::kAssumedBad) continue;
      ps.drain_cursor = static_cast<uint32_t>((ps.drain_cursor + k) % list.size());
      Cold& e = cold_[i];
      e.probe_seq = next_seq_++;
      e.probe_sent = now;
      answered_ &= static_cast<uint16_t>(~bit);
      out.push_back(ProbeRequest{i, e.probe_seq});
      break;
    }
    ps.next_probe = now + probe_gap(ps.backoff);
  }
  for (uint16_t i : bad_) {  // ascending, as EV order
    Cold& e = cold_[i];
    if (plane_drained(hot_[i].plane) || e.next_probe > now) continue;
    if (e.probe_seq != e.reply_seq) {
      // The latest probe is unanswered: lost only once older than a round trip of the EV
      // allows, else a path whose RTT exceeds probe_interval could never answer in time.
      const Time lost_at = e.probe_sent + probe_wait(i, e.backoff);
      if (lost_at > now) {
        e.next_probe = lost_at;
        continue;
      }
      e.clean = 0;
      if (e.backoff < 16) ++e.backoff;
    }
    e.probe_seq = next_seq_++;
    e.probe_sent = now;
    e.next_probe = now + probe_gap(e.backoff);
    out.push_back(ProbeRequest{i, e.probe_seq});
  }
}

void PathSet::on_probe_reply(uint16_t i, uint32_t seq, bool ecn, Time now,
                             std::vector<EvEvent>& out) {
  Cold& e = cold_[i];
  if (hot_[i].state() != EvState::kAssumedBad || seq == 0 || seq > e.probe_seq ||
      seq <= e.reply_seq)
    return;
  e.reply_seq = e.probe_seq;  // answered: older probes in flight no longer count as lost
  e.backoff = 0;
  const uint16_t pl = hot_[i].plane;
  if (plane_drained(pl)) {
    PlaneState& ps = plane_[pl];
    answered_ |= static_cast<uint16_t>(1u << pl);
    ps.backoff = 0;
    ps.next_probe = std::min(ps.next_probe, now + policy_.probe_interval);
    ps.clean = ecn ? 0 : ps.clean + 1;
    if (ps.clean < policy_.probes_to_good) return;
    drained_ &= static_cast<uint16_t>(~(1u << pl));
    for (uint16_t j : plane_evs(pl))
      if (hot_[j].state() == EvState::kAssumedBad)
        set_state(j, EvState::kGood, EvReason::kPlaneRestored, now, out);
    return;
  }
  e.next_probe = std::min(e.next_probe, now + policy_.probe_interval);
  e.clean = ecn ? 0 : e.clean + 1;
  if (e.clean >= policy_.probes_to_good)
    set_state(i, EvState::kGood, EvReason::kProbeClean, now, out);
}

void PathSet::set_planes_held(uint16_t mask) {
  if (mask == held_) return;
  held_ = mask;
  refresh_weights();
}

bool SharedHealth::hold(Plane& pl, uint16_t& counting, uint16_t plane, uint16_t threshold,
                        Time now) {
  // Losses of packets sent before the hold started do not count; after a hold that no
  // acknowledgement followed, the first loss holds the plane again.
  if (pl.held_until > now) return false;
  counting |= static_cast<uint16_t>(1u << plane);  // losses or backoff not 0 from here on
  if (++pl.losses < (pl.backoff > 0 ? 1 : threshold)) return false;
  pl.held_until = now + hold_for(pl.backoff);
  pl.losses = 0;
  if (pl.backoff < 16) ++pl.backoff;
  ++epoch_;
  ++holds_;
  return true;
}

Duration SharedHealth::hold_for(uint8_t backoff) const {
  Duration d = policy_.hold;
  for (uint8_t i = 0; i < backoff && d < policy_.hold_max; ++i) d *= 2;
  return std::min(d, std::max(policy_.hold, policy_.hold_max));
}

bool SharedHealth::ev_probe_due(uint32_t ev, Time now) {
  const auto it = evs_.find(ev);
  if (it == evs_.end()) return false;
  Plane& e = it->second;
  // backoff > 0: held at least once, no acknowledgement since (on_acked_ev resets it).
  if (e.backoff == 0 || e.held_until == Time{0} || e.held_until > now) return false;
  e.held_until = now + hold_for(e.backoff);
  if (e.backoff < 16) ++e.backoff;
  ev_holds_end_ = std::max(ev_holds_end_, e.held_until);
  ++ev_probes_;
  return true;
}

void SharedHealth::on_probe_reply_ev(uint32_t ev, Time now) {
  if (ev_counting_ == 0) return;  // no EV has a run of losses or a hold to end
  const auto it = evs_.find(ev);
  if (it == evs_.end() || (it->second.losses == 0 && it->second.backoff == 0)) return;
  Plane& e = it->second;
  if (e.backoff != 0) --ev_backoff_;
  e.losses = e.backoff = 0;
  --ev_counting_;
  if (e.held_until > now) ++epoch_;  // QPs that hold it look again
  e.held_until = Time{0};
}

bool SharedHealth::on_lost(Peer& p, uint16_t plane, Time now) {
  const bool peer_hold = hold(p.plane[plane], p.counting, plane, policy_.peer_losses, now);
  const bool local_hold = hold(local_[plane], local_counting_, plane, policy_.local_losses, now);
  return peer_hold || local_hold;
}

bool SharedHealth::on_lost_ev(uint32_t ev, Time now) {
  Plane& e = evs_[ev];
  const bool was_counting = e.losses != 0 || e.backoff != 0;
  const bool was_backoff = e.backoff != 0;
  uint16_t unused = 0;  // EVs count their runs in ev_counting_, not in a plane mask
  const bool held = hold(e, unused, 0, policy_.ev_losses, now);
  if (!was_counting && (e.losses != 0 || e.backoff != 0)) ++ev_counting_;
  if (!was_backoff && e.backoff != 0) ++ev_backoff_;
  if (held) ev_holds_end_ = std::max(ev_holds_end_, e.held_until);
  return held;
}

void SharedHealth::hold_until(Peer& p, uint16_t plane, Time until, Time now) {
  Plane& pl = p.plane[plane];
  if (pl.held_until >= until) return;
  if (pl.held_until <= now) ++holds_;
  pl.held_until = until;
  ++epoch_;
}

void SharedHealth::release(Peer& p, uint16_t plane) {
  Plane& pl = p.plane[plane];
  pl.losses = 0;
  pl.backoff = 0;
  p.counting &= static_cast<uint16_t>(~(1u << plane));
  if (pl.held_until == Time{0}) return;
  pl.held_until = Time{0};
  ++epoch_;
}

uint16_t SharedHealth::held(const Peer& p, Time now, Time* until) const {
  uint16_t mask = p.announced_down | p.reported_down | local_down_;
  *until = kNever;
  for (uint16_t pl = 0; pl < kMaxPlanes; ++pl) {
    const Time t = std::max(p.plane[pl].held_until, local_[pl].held_until);
    if (t <= now) continue;
    mask |= static_cast<uint16_t>(1u << pl);
    *until = std::min(*until, t);
  }
  return mask;
}

void PathSet::set_plane_admin_down(uint16_t plane, bool down) {
  if (plane >= kMaxPlanes) return;
  const auto bit = static_cast<uint16_t>(1u << plane);
  admin_down_ = down ? admin_down_ | bit : admin_down_ & static_cast<uint16_t>(~bit);
  refresh_weights();
}

bool PathSet::deny(uint32_t ev, bool on, Time now, std::vector<EvEvent>& out) {
  const int i = find(ev);
  if (i < 0) return false;
  const auto idx = static_cast<uint16_t>(i);
  if (on) {
    set_state(idx, EvState::kDenied, EvReason::kDenied, now, out);
  } else if (hot_[idx].state() == EvState::kDenied) {
    set_state(idx, EvState::kAssumedBad, EvReason::kAllowed, now, out);
    cold_[idx].next_probe = now;
  }
  return true;
}

const char* to_string(EvState s) {
  switch (s) {
    case EvState::kGood:
      return "GOOD";
    case EvState::kAssumedBad:
      return "ASSUMED_BAD";
    case EvState::kDenied:
      return "DENIED";
  }
  return "?";
}

const char* to_string(EvReason r) {
  switch (r) {
    case EvReason::kLoss:
      return "loss";
    case EvReason::kTimeout:
      return "timeout";
    case EvReason::kProbeClean:
      return "probe_clean";
    case EvReason::kPlaneDrained:
      return "plane_drained";
    case EvReason::kPlaneRestored:
      return "plane_restored";
    case EvReason::kDenied:
      return "denied";
    case EvReason::kAllowed:
      return "allowed";
  }
  return "?";
}

}  // namespace mrc::engine
