// The simulated network: event loop, links, impairments, node draining (model in sim_net.h).
// Threading: single-threaded, as SimNet.
#include "mrc/io/sim/sim_net.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mrc/wire/wire.h"

namespace mrc::sim {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint64_t kNsPerSec = 1'000'000'000;
// on_timeout calls at one virtual instant after which a node is declared stuck
// (its next_deadline never moves past now): an engine bug, reported loudly.
constexpr uint32_t kMaxTimeoutsPerInstant = 1'000'000;

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256**, one independent stream per (seed, stream).
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) {
    uint64_t a = seed;
    uint64_t b = stream ^ 0x5851F42D4C957F2Dull;
    uint64_t x = splitmix64(a) ^ splitmix64(b);
    for (auto& s : s_) s = splitmix64(x);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return p > 0 && uniform() < p; }
  // Uniform in [0, n), n > 0 (modulo bias below 2^-40 for the n used here).
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
};

// FIFO of packet indices; a ring that only grows.
class Fifo {
 public:
  bool empty() const { return count_ == 0; }
  void push(uint32_t v) {
    if (count_ == buf_.size()) grow();
    buf_[(head_ + count_) & (buf_.size() - 1)] = v;
    ++count_;
  }
  uint32_t pop() {
    const uint32_t v = buf_[head_];
    head_ = (head_ + 1) & (buf_.size() - 1);
    --count_;
    return v;
  }

 private:
  void grow() {
    std::vector<uint32_t> n(std::max<size_t>(16, buf_.size() * 2));
    for (size_t i = 0; i < count_; ++i) n[i] = buf_[(head_ + i) & (buf_.size() - 1)];
    buf_.swap(n);
    head_ = 0;
  }
  std::vector<uint32_t> buf_;  // size 0 or a power of 2
  size_t head_ = 0;
  size_t count_ = 0;
};

struct Packet {
  std::unique_ptr<uint8_t[]> data;  // SimConfig::max_datagram bytes, kept when reused
  uint32_t size = 0;
  PeerId src = 0;
  PeerId dst = 0;
  LinkId egress = 0;
  std::array<LinkId, kMaxRoute> route{};  // the links after the egress port (a copy)
  uint16_t route_len = 0;
  uint16_t hop = 0;    // the link it is in or on: 0 the egress port, i > 0 route[i - 1]
  uint32_t epoch = 0;  // that link's epoch when the packet went onto its wire
  bool ce = false;
};

struct Link {
  Link(uint16_t p, const LinkConfig& c, Rng r) : cfg(c), plane(p), rng(r) {}
  LinkConfig cfg;
  Impairments imp;
  uint16_t plane;
  PeerId owner = kNone;  // the host whose egress port this is
  bool up = true;
  bool blackhole = false;
  Rng rng;
  uint64_t arrivals = 0;  // since set_impairments, for the loss patterns
  Fifo hi;                // trimmed headers (trimmed_priority), control (control_priority)
  Fifo lo;
  uint32_t in_service = kNone;
  uint64_t queued = 0;  // bytes waiting + in service
  uint32_t epoch = 0;   // bumped when the link goes down: invalidates what is in flight
  uint64_t frac = 0;    // serialization remainder, in 1/rate_bps ns units
  LinkStats stats;
};

struct Host {
  Node* node = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(engine::kTransmitBufferSize);
  std::vector<LinkId> egress;     // by plane; kNone where not made yet
  std::vector<LinkId> ingress;    // by plane
  Time pending = engine::kNever;  // earliest timer event known to be queued
  bool blocked = false;           // an egress port is at or above port_pause_bytes
  Time last_timeout{-1};
  uint32_t timeouts_at_last = 0;
};

enum class Kind : uint8_t { kArrive, kTxDone, kTimer, kCallback };

struct Event {
  Time t;
  uint64_t seq;
  uint32_t id;   // packet, link, host or callback
  uint32_t aux;  // kTxDone: link epoch
  Kind kind;
};

bool before(const Event& a, const Event& b) { return a.t != b.t ? a.t < b.t : a.seq < b.seq; }

// 4-ary min-heap on (t, seq), sifting a hole rather than swapping: half the depth
// of a binary heap and one copy per level, which is most of the loop's cost.
class EventHeap {
 public:
  bool empty() const { return v_.empty(); }
  const Event& top() const { return v_.front(); }
  void push(const Event& e) {
    size_t i = v_.size();
    v_.push_back(e);
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!before(e, v_[parent])) break;
      v_[i] = v_[parent];
      i = parent;
    }
    v_[i] = e;
  }
  void pop() {
    const Event last = v_.back();
    v_.pop_back();
    const size_t n = v_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = std::min(first + 4, n);
      for (size_t c = first + 1; c < end; ++c) {
        if (before(v_[c], v_[best])) best = c;
      }
      if (!before(v_[best], last)) break;
      v_[i] = v_[best];
      i = best;
    }
    v_[i] = last;
  }

 private:
  std::vector<Event> v_;
};

}  // namespace

struct SimNet::Impl {
  explicit Impl(const SimConfig& c) : cfg(c) {}

  SimConfig cfg;
  Time now{0};
  uint64_t seq = 0;
  EventHeap events;
  // Vectors for speed: a Link& must not be held across send() (a new plane adds a
  // port), a Packet& not across alloc()/clone(), a Host& not across add_host().
  std::vector<Host> hosts;
  std::vector<Link> links;
  std::vector<Packet> packets;
  std::vector<uint32_t> free_packets;
  std::vector<std::function<void()>> callbacks;
  std::vector<uint32_t> free_callbacks;
  Router router;  // empty: the default table
  // Default table: (src << 32 | dst) -> by plane -> paths.
  std::unordered_map<uint64_t, std::vector<std::vector<Route>>> paths;
  std::deque<std::array<LinkId, 2>> route_store;
  std::function<void(const TraceRecord&)> trace;
  SimStats stats;

  Link& link(LinkId id) {
    if (id >= links.size()) throw std::out_of_range("mrc::sim: no such link");
    return links[id];
  }
  Host& host(PeerId id) {
    if (id >= hosts.size()) throw std::out_of_range("mrc::sim: no such host");
    return hosts[id];
  }

  void push(Time t, Kind kind, uint32_t id, uint32_t aux = 0) {
    events.push(Event{std::max(t, now), seq++, id, aux, kind});
  }

  LinkId add_link(uint16_t plane, const LinkConfig& c) {
    const auto id = static_cast<LinkId>(links.size());
    links.emplace_back(plane, c, Rng(cfg.seed, id));
    return id;
  }

  LinkId port(PeerId h, uint16_t plane, bool egress) {
    auto& v = egress ? host(h).egress : host(h).ingress;
    if (v.size() <= plane) v.resize(size_t{plane} + 1, kNone);
    if (v[plane] == kNone) {
      v[plane] = add_link(plane, LinkConfig{});
      if (egress) links[v[plane]].owner = h;
    }
    return v[plane];
  }

  Route default_route(PeerId src, PeerId dst, uint32_t ev, uint16_t plane) const {
    auto it = paths.find(uint64_t{src} << 32 | dst);
    if (it == paths.end() || it->second.size() <= plane) return {};
    const auto& v = it->second[plane];
    if (v.empty()) return {};
    return v[ev % v.size()];
  }

  // ---- Packets ----

  uint32_t alloc() {
    if (!free_packets.empty()) {
      const uint32_t i = free_packets.back();
      free_packets.pop_back();
      return i;
    }
    packets.emplace_back();
    packets.back().data.reset(new uint8_t[std::min(cfg.max_datagram, kMaxDatagram)]);
    return static_cast<uint32_t>(packets.size() - 1);
  }
  void release(uint32_t pi) { free_packets.push_back(pi); }

  uint32_t clone(uint32_t pi) {
    const uint32_t ci = alloc();
    Packet& c = packets[ci];
    const Packet& p = packets[pi];
    std::memcpy(c.data.get(), p.data.get(), p.size);
    c.size = p.size;
    c.src = p.src;
    c.dst = p.dst;
    c.egress = p.egress;
    c.route = p.route;
    c.route_len = p.route_len;
    c.hop = p.hop;
    c.epoch = p.epoch;
    c.ce = p.ce;
    return ci;
  }

  static LinkId link_at(const Packet& p) { return p.hop == 0 ? p.egress : p.route[p.hop - 1]; }

  void emit(const Packet& p, bool delivered, DropCause cause, LinkId lid, engine::RxInfo rx = {}) {
    TraceRecord r;
    r.time = now;
    r.delivered = delivered;
    r.cause = cause;
    r.link = lid;
    r.src = p.src;
    r.dst = p.dst;
    r.rx = rx;
    r.bytes = std::span<const uint8_t>(p.data.get(), p.size);
    trace(r);
  }

  void drop(uint32_t pi, LinkId lid, DropCause cause) {
    LinkStats& s = links[lid].stats;
    switch (cause) {
      case DropCause::kDown:
        ++s.dropped_down;
        break;
      case DropCause::kBlackhole:
        ++s.dropped_blackhole;
        break;
      case DropCause::kLoss:
        ++s.dropped_loss;
        break;
      case DropCause::kPattern:
        ++s.dropped_pattern;
        break;
      case DropCause::kQueueFull:
        ++s.dropped_queue;
        break;
      case DropCause::kNoRoute:
      case DropCause::kOversize:
        break;
    }
    if (trace) emit(packets[pi], false, cause, lid);
    release(pi);
  }

  // ---- Links ----

  // Packet pi arrives at the input of link_at(pi).
  void enter(uint32_t pi) {
    const LinkId lid = link_at(packets[pi]);
    Link& l = links[lid];
    ++l.stats.offered;
    if (!l.up) return drop(pi, lid, DropCause::kDown);
    if (l.blackhole) return drop(pi, lid, DropCause::kBlackhole);
    const Impairments& imp = l.imp;
    const uint64_t i = l.arrivals++;
    if ((imp.loss_every_n != 0 && i % imp.loss_every_n == imp.loss_every_n - 1) ||
        (imp.loss_pattern_len != 0 && (imp.loss_pattern >> (i % imp.loss_pattern_len)) & 1)) {
      return drop(pi, lid, DropCause::kPattern);
    }
    if (l.rng.chance(imp.loss)) return drop(pi, lid, DropCause::kLoss);
    Packet& p = packets[pi];
    if (p.size != 0 && l.rng.chance(imp.corrupt)) {
      const uint64_t byte = l.rng.below(p.size);
      p.data[byte] ^= static_cast<uint8_t>(1u << l.rng.below(8));
      ++l.stats.corrupted;
    }
    uint32_t copy = kNone;
    if (l.rng.chance(imp.duplicate)) {
      copy = clone(pi);
      ++l.stats.duplicated;
    }
    admit(pi, lid);
    if (copy != kNone) admit(copy, lid);
  }

  void admit(uint32_t pi, LinkId lid) {
    Link& l = links[lid];
    Packet& p = packets[pi];
    const uint64_t b = l.queued;
    bool trimmed = false;
    if (b >= l.cfg.trim_threshold_bytes && p.size > wire::kDataHeaderSize &&
        wire::is_data(static_cast<wire::Kind>(p.data[1]))) {
      p.size = wire::kDataHeaderSize;
      p.data[3] |= wire::net_flag::kTrimmed;
      if (p.hop == p.route_len) p.data[3] |= wire::net_flag::kTrimmedLastHop;
      ++l.stats.trimmed;
      trimmed = true;
    }
    const bool buffered = l.cfg.rate_bps != 0 || l.in_service != kNone;
    if (buffered && b + p.size > l.cfg.capacity_bytes) return drop(pi, lid, DropCause::kQueueFull);
    if (b >= l.cfg.ecn_threshold_bytes && !p.ce) {
      // WRED: certain past the ramp, with a probability rising across it.
      const uint64_t over = b - l.cfg.ecn_threshold_bytes;
      if (over >= l.cfg.ecn_ramp_bytes ||
          l.rng.uniform() * static_cast<double>(l.cfg.ecn_ramp_bytes) < static_cast<double>(over)) {
        p.ce = true;
        ++l.stats.ecn_marked;
      }
    }
    ++l.stats.enqueued;
    if (!buffered) return depart(pi, lid);
    l.queued += p.size;
    l.stats.max_queued_bytes = std::max(l.stats.max_queued_bytes, l.queued);
    if (l.in_service == kNone) {
      l.frac = 0;  // idle: no remainder to carry
      start_tx(lid, pi);
    } else if ((trimmed && l.cfg.trimmed_priority) ||
               (l.cfg.control_priority && p.size > 1 &&
                !wire::is_data(static_cast<wire::Kind>(p.data[1])))) {
      l.hi.push(pi);
    } else {
      l.lo.push(pi);
    }
  }

  void start_tx(LinkId lid, uint32_t pi) {
    Link& l = links[lid];
    l.in_service = pi;
    Duration dt{0};
    if (l.cfg.rate_bps != 0) {
      const uint64_t num = uint64_t{packets[pi].size} * 8 * kNsPerSec + l.frac;
      dt = Duration(static_cast<int64_t>(num / l.cfg.rate_bps));
      l.frac = num % l.cfg.rate_bps;
    }
    push(now + dt, Kind::kTxDone, lid, l.epoch);
  }

  void tx_done(LinkId lid, uint32_t epoch) {
    Link& l = links[lid];
    if (epoch != l.epoch) return;  // flushed by a link down
    const uint32_t pi = l.in_service;
    l.in_service = kNone;
    l.queued -= packets[pi].size;
    if (!l.hi.empty()) {
      start_tx(lid, l.hi.pop());
    } else if (!l.lo.empty()) {
      start_tx(lid, l.lo.pop());
    }
    depart(pi, lid);
    if (l.owner != kNone) unblock(l.owner, /*drain_now=*/true);
  }

  // Packet pi leaves link lid onto its wire.
  void depart(uint32_t pi, LinkId lid) {
    Link& l = links[lid];
    Packet& p = packets[pi];
    Duration extra{0};
    if (l.imp.reorder_max.count() > 0 && l.rng.chance(l.imp.reorder)) {
      extra = Duration(
          1 + static_cast<int64_t>(l.rng.below(static_cast<uint64_t>(l.imp.reorder_max.count()))));
      ++l.stats.reordered;
    }
    p.epoch = l.epoch;
    const Time t = now + l.cfg.latency + extra;
    // Through zero-delay links at once; a receiver always gets it from the loop,
    // so that nodes are never called from inside another node's drain.
    if (t == now && p.hop < p.route_len) return wire_end(pi);
    push(t, Kind::kArrive, pi);
  }

  // Packet pi reaches the far end of link_at(pi).
  void wire_end(uint32_t pi) {
    Packet& p = packets[pi];
    const LinkId lid = link_at(p);
    Link& l = links[lid];
    if (l.epoch != p.epoch) return drop(pi, lid, DropCause::kDown);
    ++l.stats.delivered;
    l.stats.delivered_bytes += p.size;
    if (p.hop == p.route_len) return deliver(pi, lid);
    ++p.hop;
    enter(pi);
  }

  void set_up(LinkId lid, bool up) {
    Link& l = link(lid);
    if (up || !l.up) {
      l.up = up;
      return;
    }
    l.up = false;
    ++l.epoch;
    auto flush = [&](uint32_t pi) { drop(pi, lid, DropCause::kDown); };
    if (l.in_service != kNone) flush(l.in_service);
    l.in_service = kNone;
    while (!l.hi.empty()) flush(l.hi.pop());
    while (!l.lo.empty()) flush(l.lo.pop());
    l.queued = 0;
    if (l.owner != kNone) unblock(l.owner, /*drain_now=*/false);
  }

  // ---- Nodes ----

  void deliver(uint32_t pi, LinkId last) {
    const Packet& p = packets[pi];
    const engine::RxInfo rx{links[last].plane, p.ce};
    ++stats.delivered;
    stats.delivered_bytes += p.size;
    if (trace) emit(p, true, DropCause::kDown, last, rx);
    const PeerId dst = p.dst;
    hosts[dst].node->on_datagram(now, rx, std::span<const uint8_t>(p.data.get(), p.size));
    release(pi);
    drain(dst);
  }

  void send(PeerId src, const engine::Transmit& t) {
    Host& h = hosts[src];
    ++stats.transmits;
    const size_t size = t.size();
    const bool oversize =
        size > std::min(cfg.max_datagram, kMaxDatagram) || t.header_len > h.buf.size();
    Route r;
    if (!oversize && t.peer < hosts.size()) {
      r = router ? router(src, t.peer, t.path.ev, t.path.plane)
                 : default_route(src, t.peer, t.path.ev, t.path.plane);
    }
    if (r.size() > kMaxRoute) throw std::invalid_argument("mrc::sim: route longer than kMaxRoute");
    if (oversize || r.empty()) {
      ++(oversize ? stats.oversize : stats.no_route);
      if (trace) {
        TraceRecord rec;
        rec.time = now;
        rec.cause = oversize ? DropCause::kOversize : DropCause::kNoRoute;
        rec.src = src;
        rec.dst = t.peer;
        trace(rec);
      }
      return;
    }
    const LinkId eg = port(src, t.path.plane, /*egress=*/true);
    const uint32_t pi = alloc();
    Packet& p = packets[pi];
    std::memcpy(p.data.get(), h.buf.data(), t.header_len);
    if (!t.payload.empty())
      std::memcpy(p.data.get() + t.header_len, t.payload.data(), t.payload.size());
    p.size = static_cast<uint32_t>(size);
    p.src = src;
    p.dst = t.peer;
    p.egress = eg;
    std::copy(r.begin(), r.end(), p.route.begin());
    p.route_len = static_cast<uint16_t>(r.size());
    p.hop = 0;
    p.epoch = 0;
    p.ce = false;
    enter(pi);
    if (links[eg].queued >= cfg.port_pause_bytes) h.blocked = true;
  }

  void drain(PeerId id) {
    Host& h = hosts[id];
    while (!h.blocked) {
      auto t = h.node->poll_transmit(now, std::span<uint8_t>(h.buf));
      if (!t) break;
      send(id, *t);
    }
    refresh(id);
  }

  // Makes sure a timer event is queued at the node's deadline. A blocked node that
  // is due now (a node may report pending sends as a deadline) waits for its
  // port: unblock() drains it and comes back here.
  void refresh(PeerId id) {
    Host& h = hosts[id];
    const Time d = h.node->next_deadline();
    if (d >= h.pending) return;  // kNever, or an event at or before d fires first and looks again
    if (h.blocked && d <= now) return;
    h.pending = std::max(d, now);
    push(h.pending, Kind::kTimer, id);
  }

  void timer(PeerId id, Time t) {
    Host& h = hosts[id];
    if (t == h.pending) h.pending = engine::kNever;
    if (h.node->next_deadline() > now) return refresh(id);  // moved later since queued
    if (now != h.last_timeout) {
      h.last_timeout = now;
      h.timeouts_at_last = 0;
    }
    if (++h.timeouts_at_last > kMaxTimeoutsPerInstant) {
      std::fprintf(
          stderr,
          "mrc::sim: node %u: next_deadline() stays at or before now (%lld ns) after on_timeout\n",
          id, static_cast<long long>(now.count()));
      std::abort();
    }
    h.node->on_timeout(now);
    if (h.blocked) return refresh(id);
    drain(id);
  }

  // Clears `blocked` once every egress port of the host is below the pause threshold.
  void unblock(PeerId id, bool drain_now) {
    Host& h = hosts[id];
    if (!h.blocked) return;
    for (LinkId lid : h.egress) {
      if (lid != kNone && links[lid].queued >= cfg.port_pause_bytes) return;
    }
    h.blocked = false;
    if (drain_now) drain(id);
  }

  void wake(PeerId id) {
    if (hosts[id].blocked) return refresh(id);
    drain(id);
  }
  void wake_all() {
    for (PeerId id = 0; id < hosts.size(); ++id) wake(id);
  }

  // ---- Loop ----

  void step() {
    const Event e = events.top();
    events.pop();
    now = e.t;
    ++stats.events;
    switch (e.kind) {
      case Kind::kArrive:
        wire_end(e.id);
        break;
      case Kind::kTxDone:
        tx_done(e.id, e.aux);
        break;
      case Kind::kTimer:
        timer(e.id, e.t);
        break;
      case Kind::kCallback:
        callback(e.id);
        break;
    }
  }

  // Out of line: keeps the std::function off step()'s stack frame (ASan pays for it per event).
  [[gnu::noinline]] void callback(uint32_t id) {
    auto fn = std::move(callbacks[id]);
    callbacks[id] = nullptr;
    free_callbacks.push_back(id);
    fn();
    wake_all();
  }
};

SimNet::SimNet(const SimConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
SimNet::~SimNet() = default;

PeerId SimNet::add_host(Node* node) {
  if (node == nullptr) throw std::invalid_argument("mrc::sim: add_host(nullptr)");
  impl_->hosts.emplace_back();
  impl_->hosts.back().node = node;
  return static_cast<PeerId>(impl_->hosts.size() - 1);
}

LinkId SimNet::add_link(uint16_t plane, const LinkConfig& cfg) {
  return impl_->add_link(plane, cfg);
}
LinkId SimNet::egress_port(PeerId host, uint16_t plane) { return impl_->port(host, plane, true); }
LinkId SimNet::ingress_port(PeerId host, uint16_t plane) { return impl_->port(host, plane, false); }

SimNet::PathLinks SimNet::add_path(PeerId a, PeerId b, uint16_t plane, const LinkConfig& cfg) {
  Impl& m = *impl_;
  if (a == b) throw std::invalid_argument("mrc::sim: add_path from a host to itself");
  m.host(a);
  m.host(b);
  PathLinks out{m.add_link(plane, cfg), m.add_link(plane, cfg)};
  auto add = [&](PeerId src, PeerId dst, LinkId l) {
    m.route_store.push_back({l, m.port(dst, plane, false)});
    auto& by_plane = m.paths[uint64_t{src} << 32 | dst];
    if (by_plane.size() <= plane) by_plane.resize(size_t{plane} + 1);
    by_plane[plane].push_back(Route(m.route_store.back()));
  };
  add(a, b, out.forward);
  add(b, a, out.reverse);
  return out;
}

void SimNet::set_router(Router router) { impl_->router = std::move(router); }

const LinkConfig& SimNet::link_config(LinkId link) const { return impl_->link(link).cfg; }
void SimNet::set_link_config(LinkId link, const LinkConfig& cfg) { impl_->link(link).cfg = cfg; }
const Impairments& SimNet::impairments(LinkId link) const { return impl_->link(link).imp; }
void SimNet::set_impairments(LinkId link, const Impairments& imp) {
  Link& l = impl_->link(link);
  if (imp.loss_pattern_len > 64) throw std::invalid_argument("mrc::sim: loss_pattern_len above 64");
  l.imp = imp;
  l.arrivals = 0;
}
void SimNet::set_link_up(LinkId link, bool up) { impl_->set_up(link, up); }
bool SimNet::link_up(LinkId link) const { return impl_->link(link).up; }
void SimNet::set_blackhole(LinkId link, bool on) { impl_->link(link).blackhole = on; }
bool SimNet::blackhole(LinkId link) const { return impl_->link(link).blackhole; }
const LinkStats& SimNet::link_stats(LinkId link) const { return impl_->link(link).stats; }
uint64_t SimNet::queued_bytes(LinkId link) const { return impl_->link(link).queued; }
size_t SimNet::link_count() const { return impl_->links.size(); }

Time SimNet::now() const { return impl_->now; }

void SimNet::at(Time t, std::function<void()> fn) {
  Impl& m = *impl_;
  uint32_t id;
  if (!m.free_callbacks.empty()) {
    id = m.free_callbacks.back();
    m.free_callbacks.pop_back();
    m.callbacks[id] = std::move(fn);
  } else {
    id = static_cast<uint32_t>(m.callbacks.size());
    m.callbacks.push_back(std::move(fn));
  }
  m.push(t, Kind::kCallback, id);
}

void SimNet::wake(PeerId host) {
  impl_->host(host);
  impl_->wake(host);
}

void SimNet::run_until(Time t) {
  Impl& m = *impl_;
  m.wake_all();
  while (!m.events.empty() && m.events.top().t <= t) m.step();
  m.now = std::max(m.now, t);
}

bool SimNet::run_until(const std::function<bool()>& done, Time limit) {
  Impl& m = *impl_;
  m.wake_all();
  if (done()) return true;
  while (!m.events.empty() && m.events.top().t <= limit) {
    m.step();
    if (done()) return true;
  }
  m.now = std::max(m.now, limit);
  return false;
}

const SimStats& SimNet::stats() const { return impl_->stats; }
void SimNet::set_trace(std::function<void(const TraceRecord&)> trace) {
  impl_->trace = std::move(trace);
}

}  // namespace mrc::sim
