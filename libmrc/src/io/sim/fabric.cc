#include "mrc/io/sim/fabric.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <stdexcept>

namespace mrc::sim {

namespace {

enum class Role : uint8_t { kNone, kHostUp, kHostDown, kT0Up, kT1Down };

struct LinkInfo {
  Role role = Role::kNone;
  uint16_t plane = 0;
  uint32_t t0 = 0;
  uint32_t other = 0;  // host (kHostUp/kHostDown) or spine (kT0Up/kT1Down)
  bool down = false;   // link_down / flap
};

constexpr uint32_t kMaxHops = 3;  // T0->T1, T1->T0, T0->host

std::string gbps(uint64_t bps) {
  char b[32];
  std::snprintf(b, sizeof b, "%g Gb/s", static_cast<double>(bps) * 1e-9);
  return b;
}

}  // namespace

void accumulate(LinkStats& a, const LinkStats& b) {
  a.offered += b.offered;
  a.enqueued += b.enqueued;
  a.delivered += b.delivered;
  a.delivered_bytes += b.delivered_bytes;
  a.dropped_down += b.dropped_down;
  a.dropped_blackhole += b.dropped_blackhole;
  a.dropped_loss += b.dropped_loss;
  a.dropped_pattern += b.dropped_pattern;
  a.dropped_queue += b.dropped_queue;
  a.trimmed += b.trimmed;
  a.ecn_marked += b.ecn_marked;
  a.corrupted += b.corrupted;
  a.duplicated += b.duplicated;
  a.reordered += b.reordered;
  a.max_queued_bytes = std::max(a.max_queued_bytes, b.max_queued_bytes);
}

// ---- Fabric ----------------------------------------------------------------------------

struct Fabric::State {
  SimNet& net;
  FabricConfig cfg;
  uint32_t t0s = 0;
  std::vector<LinkId> host_up, host_down;  // [host * P + plane]
  std::vector<LinkId> up, down;            // [(plane * t0s + t0) * S + spine]
  mutable std::array<LinkId, kMaxHops> scratch{};             // the route() being returned
  std::vector<uint8_t> t0_is_down, t1_is_down, t0_bh, t1_bh;  // [plane * t0s + t0], [plane * S + s]
  std::vector<LinkInfo> info;                                 // by LinkId
  std::vector<uint8_t> port_dn;  // [hp(h, p)]: the port's cable has a direction down
  std::function<void(PeerId, uint16_t, bool)> on_port;  // set_on_port

  State(SimNet& n, const FabricConfig& c) : net(n), cfg(c) {}

  uint32_t P() const { return cfg.planes; }
  uint32_t S() const { return cfg.spines; }
  size_t hp(PeerId h, uint16_t p) const { return size_t{h} * P() + p; }
  size_t ts(uint16_t p, uint32_t t0, uint32_t s) const { return (size_t{p} * t0s + t0) * S() + s; }

  void check_plane(uint16_t p) const {
    if (p >= P()) throw std::out_of_range("fabric: plane out of range");
  }
  void check_t0(uint16_t p, uint32_t t0) const {
    check_plane(p);
    if (t0 >= t0s) throw std::out_of_range("fabric: T0 out of range");
  }
  void check_t1(uint16_t p, uint32_t s) const {
    check_plane(p);
    if (s >= S()) throw std::out_of_range("fabric: spine out of range");
  }
  void check_host(PeerId h) const {
    if (h >= cfg.hosts) throw std::out_of_range("fabric: host out of range");
  }

  LinkConfig switch_egress(uint64_t rate, Duration latency, bool trimming) const {
    LinkConfig c;
    c.rate_bps = rate;
    c.latency = latency;
    c.capacity_bytes = cfg.capacity_bytes;
    c.ecn_threshold_bytes = cfg.ecn_threshold_bytes;
    c.ecn_ramp_bytes = cfg.ecn_ramp_bytes;
    c.trim_threshold_bytes = trimming ? cfg.trim_threshold_bytes : kUnlimited;
    c.trimmed_priority = cfg.trimmed_priority;
    c.control_priority = cfg.control_priority;
    return c;
  }

  void record(LinkId l, Role role, uint16_t p, uint32_t t0, uint32_t other) {
    if (info.size() <= l) info.resize(size_t{l} + 1);
    info[l] = LinkInfo{role, p, t0, other, false};
  }

  void build() {
    if (cfg.hosts == 0 || cfg.planes == 0 || cfg.spines == 0 || cfg.hosts_per_t0 == 0) {
      throw std::invalid_argument("fabric: hosts, planes, spines and hosts_per_t0 must be > 0");
    }
    if (cfg.spines > 256) throw std::invalid_argument("fabric: at most 256 spines");
    t0s = (cfg.hosts + cfg.hosts_per_t0 - 1) / cfg.hosts_per_t0;
    const uint32_t H = cfg.hosts;

    host_up.resize(size_t{H} * P());
    host_down.resize(size_t{H} * P());
    port_dn.assign(size_t{H} * P(), 0);
    for (PeerId h = 0; h < H; ++h) {
      for (uint16_t p = 0; p < P(); ++p) {
        LinkConfig nic;
        nic.rate_bps = cfg.host_port_bps;
        nic.latency = cfg.host_latency;
        const LinkId eg = net.egress_port(h, p);  // throws for a host not in the net
        net.set_link_config(eg, nic);
        const LinkId in = net.ingress_port(h, p);
        net.set_link_config(in, switch_egress(cfg.host_port_bps, cfg.host_latency, cfg.trimming));
        host_up[hp(h, p)] = eg;
        host_down[hp(h, p)] = in;
        record(eg, Role::kHostUp, p, h / cfg.hosts_per_t0, h);
        record(in, Role::kHostDown, p, h / cfg.hosts_per_t0, h);
      }
    }

    up.resize(size_t{P()} * t0s * S());
    down.resize(up.size());
    const LinkConfig uplink = switch_egress(cfg.uplink_bps, cfg.uplink_latency, cfg.trimming);
    for (uint16_t p = 0; p < P(); ++p) {
      for (uint32_t t = 0; t < t0s; ++t) {
        for (uint32_t s = 0; s < S(); ++s) {
          const LinkId u = net.add_link(p, uplink);
          const LinkId d = net.add_link(p, uplink);
          up[ts(p, t, s)] = u;
          down[ts(p, t, s)] = d;
          record(u, Role::kT0Up, p, t, s);
          record(d, Role::kT1Down, p, t, s);
        }
      }
    }

    t0_is_down.assign(size_t{P()} * t0s, 0);
    t0_bh.assign(t0_is_down.size(), 0);
    t1_is_down.assign(size_t{P()} * S(), 0);
    t1_bh.assign(t1_is_down.size(), 0);
  }

  // Computed per datagram into `scratch` (SimNet copies it): no table of H^2 routes.
  Route route(PeerId src, PeerId dst, uint32_t ev, uint16_t plane) const {
    if (src >= cfg.hosts || dst >= cfg.hosts || src == dst || plane >= P()) return {};
    const uint32_t ta = src / cfg.hosts_per_t0, tb = dst / cfg.hosts_per_t0;
    size_t len = 0;
    if (ta != tb) {
      const uint32_t s = Fabric::spine_of(ev) % S();
      scratch[len++] = up[ts(plane, ta, s)];
      scratch[len++] = down[ts(plane, tb, s)];
    }
    scratch[len++] = host_down[hp(dst, plane)];
    return Route(scratch.data(), len);
  }

  // Recomputes the SimNet state of link l from the fault flags.
  void apply(LinkId l) {
    const LinkInfo& li = info[l];
    const size_t t = size_t{li.plane} * t0s + li.t0;
    bool dn = li.down || t0_is_down[t] != 0;
    bool bh = false;
    switch (li.role) {
      case Role::kHostUp:
        break;
      case Role::kHostDown:
        bh = t0_bh[t] != 0;
        break;
      case Role::kT0Up:
        dn = dn || t1_is_down[size_t{li.plane} * S() + li.other] != 0;
        bh = t0_bh[t] != 0;
        break;
      case Role::kT1Down:
        dn = dn || t1_is_down[size_t{li.plane} * S() + li.other] != 0;
        bh = t1_bh[size_t{li.plane} * S() + li.other] != 0;
        break;
      case Role::kNone:
        return;
    }
    if (net.link_up(l) == dn) net.set_link_up(l, !dn);
    if (net.blackhole(l) != bh) net.set_blackhole(l, bh);
    if (li.role == Role::kHostUp || li.role == Role::kHostDown) port_changed(li.other, li.plane);
  }

  // Host h's port on plane p has a link while both directions of its cable are up.
  void port_changed(PeerId h, uint16_t p) {
    const size_t i = hp(h, p);
    const bool dn = !net.link_up(host_up[i]) || !net.link_up(host_down[i]);
    if (port_dn[i] == static_cast<uint8_t>(dn)) return;
    port_dn[i] = dn;
    if (on_port) on_port(h, p, !dn);
  }

  // Every link touching T0 (p, t0): its hosts' ports and its uplinks both ways.
  std::vector<LinkId> t0_links(uint16_t p, uint32_t t0) const {
    std::vector<LinkId> v;
    const PeerId first = t0 * cfg.hosts_per_t0;
    const PeerId last = std::min(cfg.hosts, first + cfg.hosts_per_t0);
    for (PeerId h = first; h < last; ++h) {
      v.push_back(host_up[hp(h, p)]);
      v.push_back(host_down[hp(h, p)]);
    }
    for (uint32_t s = 0; s < S(); ++s) {
      v.push_back(up[ts(p, t0, s)]);
      v.push_back(down[ts(p, t0, s)]);
    }
    return v;
  }
  std::vector<LinkId> t1_links(uint16_t p, uint32_t s) const {
    std::vector<LinkId> v;
    for (uint32_t t = 0; t < t0s; ++t) {
      v.push_back(up[ts(p, t, s)]);
      v.push_back(down[ts(p, t, s)]);
    }
    return v;
  }

  std::vector<LinkId> links(const LinkRef& r) const {
    std::vector<LinkId> v;
    LinkId u, d;
    if (r.kind == LinkRef::Kind::kUplink) {
      check_t0(r.plane, r.t0_or_host);
      check_t1(r.plane, r.spine);
      u = up[ts(r.plane, r.t0_or_host, r.spine)];
      d = down[ts(r.plane, r.t0_or_host, r.spine)];
    } else {
      check_plane(r.plane);
      check_host(r.t0_or_host);
      u = host_up[hp(r.t0_or_host, r.plane)];
      d = host_down[hp(r.t0_or_host, r.plane)];
    }
    if (r.dir != Dir::kDown) v.push_back(u);
    if (r.dir != Dir::kUp) v.push_back(d);
    return v;
  }

  void set_down(std::span<const LinkId> ls, bool dn) {
    for (LinkId l : ls) {
      info[l].down = dn;
      apply(l);
    }
  }

  void apply_all(std::span<const LinkId> ls) {
    for (LinkId l : ls) apply(l);
  }

  // Egress links of switches (T0->T1, T1->T0, T0->host).
  template <typename F>
  void for_switch_egress(F f) const {
    for (LinkId l : up) f(l);
    for (LinkId l : down) f(l);
    for (LinkId l : host_down) f(l);
  }

  // Sets `ls` down (when dn) or up at t, then toggles every period; up at `until`.
  static void flap_step(std::shared_ptr<State> s, std::vector<LinkId> ls, Time t, bool dn,
                        Duration period, Time until) {
    if (t >= until) dn = false;
    s->set_down(ls, dn);
    if (t >= until) return;
    const Time next = std::min(t + period, until);
    SimNet& net = s->net;
    net.at(next, [s = std::move(s), ls = std::move(ls), next, dn, period, until]() mutable {
      flap_step(std::move(s), std::move(ls), next, !dn, period, until);
    });
  }

  std::string name(LinkId l) const {
    char b[64];
    if (l >= info.size() || info[l].role == Role::kNone) {
      std::snprintf(b, sizeof b, "link %u", l);
      return b;
    }
    const LinkInfo& li = info[l];
    switch (li.role) {
      case Role::kHostUp:
        std::snprintf(b, sizeof b, "p%u h%u->T0[%u]", li.plane, li.other, li.t0);
        break;
      case Role::kHostDown:
        std::snprintf(b, sizeof b, "p%u T0[%u]->h%u", li.plane, li.t0, li.other);
        break;
      case Role::kT0Up:
        std::snprintf(b, sizeof b, "p%u T0[%u]->T1[%u]", li.plane, li.t0, li.other);
        break;
      case Role::kT1Down:
        std::snprintf(b, sizeof b, "p%u T1[%u]->T0[%u]", li.plane, li.other, li.t0);
        break;
      case Role::kNone:
        break;
    }
    return b;
  }
};

Fabric::Fabric(SimNet& net, const FabricConfig& cfg) : s_(std::make_shared<State>(net, cfg)) {
  s_->build();
  std::shared_ptr<const State> st = s_;
  net.set_router([st](PeerId src, PeerId dst, uint32_t ev, uint16_t plane) {
    return st->route(src, dst, ev, plane);
  });
}

Fabric::~Fabric() = default;

const FabricConfig& Fabric::config() const { return s_->cfg; }
SimNet& Fabric::net() { return s_->net; }
uint32_t Fabric::t0_of(PeerId host) const {
  s_->check_host(host);
  return host / s_->cfg.hosts_per_t0;
}
uint32_t Fabric::t0_count() const { return s_->t0s; }

void Fabric::set_on_port(std::function<void(PeerId, uint16_t, bool)> fn) {
  s_->on_port = std::move(fn);
}

bool Fabric::port_up(PeerId host, uint16_t plane) const {
  s_->check_host(host);
  s_->check_plane(plane);
  return s_->port_dn[s_->hp(host, plane)] == 0;
}

std::string Fabric::describe(uint32_t ev) {
  char b[48];
  std::snprintf(b, sizeof b, "plane %u spine %u #%u", plane_of(ev), spine_of(ev), salt_of(ev));
  return b;
}

namespace {
std::vector<engine::Path> make_paths(uint32_t planes, uint32_t spines, uint32_t per_plane,
                                     uint32_t base, uint32_t limit) {
  const uint32_t rounds = (per_plane + spines - 1) / spines;
  if (base + rounds > limit)
    throw std::invalid_argument("fabric: salt + per_plane / spines too large");
  std::vector<engine::Path> v;
  v.reserve(size_t{planes} * per_plane);
  for (uint32_t i = 0; i < per_plane; ++i) {
    for (uint32_t p = 0; p < planes; ++p) {
      const auto plane = static_cast<uint16_t>(p);
      v.push_back(engine::Path{Fabric::ev(plane, i % spines, base + i / spines), plane});
    }
  }
  return v;
}
}  // namespace

std::vector<engine::Path> Fabric::paths(PeerId src, PeerId dst, uint32_t per_plane,
                                        uint32_t salt) const {
  s_->check_host(src);
  s_->check_host(dst);
  return make_paths(s_->P(), s_->S(), per_plane, salt, kBackupSalt);
}

std::vector<engine::Path> Fabric::backup_paths(PeerId src, PeerId dst, uint32_t per_plane,
                                               uint32_t salt) const {
  s_->check_host(src);
  s_->check_host(dst);
  return make_paths(s_->P(), s_->S(), per_plane, kBackupSalt + salt, 256);
}

void Fabric::t0_down(uint16_t plane, uint32_t t0) {
  s_->check_t0(plane, t0);
  s_->t0_is_down[size_t{plane} * s_->t0s + t0] = 1;
  s_->apply_all(s_->t0_links(plane, t0));
}
void Fabric::t0_up(uint16_t plane, uint32_t t0) {
  s_->check_t0(plane, t0);
  s_->t0_is_down[size_t{plane} * s_->t0s + t0] = 0;
  s_->apply_all(s_->t0_links(plane, t0));
}
void Fabric::t1_down(uint16_t plane, uint32_t spine) {
  s_->check_t1(plane, spine);
  s_->t1_is_down[size_t{plane} * s_->S() + spine] = 1;
  s_->apply_all(s_->t1_links(plane, spine));
}
void Fabric::t1_up(uint16_t plane, uint32_t spine) {
  s_->check_t1(plane, spine);
  s_->t1_is_down[size_t{plane} * s_->S() + spine] = 0;
  s_->apply_all(s_->t1_links(plane, spine));
}
void Fabric::link_down(const LinkRef& ref) { s_->set_down(s_->links(ref), true); }
void Fabric::link_up(const LinkRef& ref) { s_->set_down(s_->links(ref), false); }

void Fabric::flap(const LinkRef& ref, Duration period, Time until) {
  if (period.count() <= 0) throw std::invalid_argument("fabric: flap period must be > 0");
  auto ls = s_->links(ref);
  const Time now = s_->net.now();
  if (until <= now) return;
  State::flap_step(s_, std::move(ls), now, true, period, until);
}

void Fabric::blackhole_t0(uint16_t plane, uint32_t t0, bool on) {
  s_->check_t0(plane, t0);
  s_->t0_bh[size_t{plane} * s_->t0s + t0] = on ? 1 : 0;
  s_->apply_all(s_->t0_links(plane, t0));
}
void Fabric::blackhole_t1(uint16_t plane, uint32_t spine, bool on) {
  s_->check_t1(plane, spine);
  s_->t1_bh[size_t{plane} * s_->S() + spine] = on ? 1 : 0;
  s_->apply_all(s_->t1_links(plane, spine));
}

void Fabric::loss(const LinkRef& ref, double p) {
  for (LinkId l : s_->links(ref)) {
    Impairments imp = s_->net.impairments(l);
    imp.loss = p;
    s_->net.set_impairments(l, imp);
  }
}

void Fabric::set_trimming(bool on) {
  const uint64_t th = on ? s_->cfg.trim_threshold_bytes : kUnlimited;
  s_->for_switch_egress([&](LinkId l) {
    LinkConfig c = s_->net.link_config(l);
    c.trim_threshold_bytes = th;
    s_->net.set_link_config(l, c);
  });
}

LinkId Fabric::link(uint16_t plane, uint32_t t0, uint32_t spine, Dir dir) const {
  s_->check_t0(plane, t0);
  s_->check_t1(plane, spine);
  if (dir == Dir::kBoth) throw std::out_of_range("fabric: link() needs kUp or kDown");
  return dir == Dir::kUp ? s_->up[s_->ts(plane, t0, spine)] : s_->down[s_->ts(plane, t0, spine)];
}

LinkId Fabric::host_link(PeerId host, uint16_t plane, Dir dir) const {
  s_->check_host(host);
  s_->check_plane(plane);
  if (dir == Dir::kBoth) throw std::out_of_range("fabric: host_link() needs kUp or kDown");
  return dir == Dir::kUp ? s_->host_up[s_->hp(host, plane)] : s_->host_down[s_->hp(host, plane)];
}

std::vector<LinkId> Fabric::links(const LinkRef& ref) const { return s_->links(ref); }
std::string Fabric::link_name(LinkId link) const { return s_->name(link); }

LinkStats Fabric::t0_stats(uint16_t plane, uint32_t t0) const {
  s_->check_t0(plane, t0);
  LinkStats sum;
  for (LinkId l : s_->t0_links(plane, t0)) {
    const Role r = s_->info[l].role;
    if (r == Role::kHostDown || r == Role::kT0Up) accumulate(sum, s_->net.link_stats(l));
  }
  return sum;
}

LinkStats Fabric::t1_stats(uint16_t plane, uint32_t spine) const {
  s_->check_t1(plane, spine);
  LinkStats sum;
  for (uint32_t t = 0; t < s_->t0s; ++t) {
    accumulate(sum, s_->net.link_stats(s_->down[s_->ts(plane, t, spine)]));
  }
  return sum;
}

std::string Fabric::summary() const {
  const State& s = *s_;
  const FabricConfig& c = s.cfg;
  std::string out;
  char b[256];
  std::snprintf(b, sizeof b,
                "fabric: %u hosts, %u planes x %u spines, %u T0/plane (%u hosts each), host port "
                "%s, uplink %s\n",
                c.hosts, c.planes, c.spines, s.t0s, c.hosts_per_t0, gbps(c.host_port_bps).c_str(),
                gbps(c.uplink_bps).c_str());
  out += b;
  auto line = [&](const char* what, uint16_t p, uint32_t i, const LinkStats& st, bool dn, bool bh) {
    std::snprintf(b, sizeof b,
                  "p%u %s[%u]: out %llu pkts %llu B, drop down %llu bh %llu loss %llu queue %llu, "
                  "trim %llu, ce %llu, maxq %llu B%s%s\n",
                  p, what, i, static_cast<unsigned long long>(st.delivered),
                  static_cast<unsigned long long>(st.delivered_bytes),
                  static_cast<unsigned long long>(st.dropped_down),
                  static_cast<unsigned long long>(st.dropped_blackhole),
                  static_cast<unsigned long long>(st.dropped_loss + st.dropped_pattern),
                  static_cast<unsigned long long>(st.dropped_queue),
                  static_cast<unsigned long long>(st.trimmed),
                  static_cast<unsigned long long>(st.ecn_marked),
                  static_cast<unsigned long long>(st.max_queued_bytes), dn ? " DOWN" : "",
                  bh ? " BLACKHOLE" : "");
    out += b;
  };
  for (uint16_t p = 0; p < c.planes; ++p) {
    for (uint32_t t = 0; t < s.t0s; ++t) {
      const size_t k = size_t{p} * s.t0s + t;
      line("T0", p, t, t0_stats(p, t), s.t0_is_down[k] != 0, s.t0_bh[k] != 0);
    }
    for (uint32_t sp = 0; sp < c.spines; ++sp) {
      const size_t k = size_t{p} * c.spines + sp;
      line("T1", p, sp, t1_stats(p, sp), s.t1_is_down[k] != 0, s.t1_bh[k] != 0);
    }
  }
  std::string faulty;
  for (LinkId l = 0; l < s.info.size(); ++l) {
    if (s.info[l].role == Role::kNone) continue;
    const bool dn = !s.net.link_up(l), bh = s.net.blackhole(l);
    const double loss = s.net.impairments(l).loss;
    if (!dn && !bh && loss == 0) continue;
    faulty += "  " + s.name(l) + (dn ? " down" : "") + (bh ? " blackhole" : "");
    if (loss != 0) {
      std::snprintf(b, sizeof b, " loss %g", loss);
      faulty += b;
    }
    faulty += "\n";
  }
  if (!faulty.empty()) out += "links with faults:\n" + faulty;
  return out;
}

}  // namespace mrc::sim
