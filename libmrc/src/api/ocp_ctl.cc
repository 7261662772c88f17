// The OCP MRC controller API (mrc_ctl.h) over the engine behind the mrc0 device: device limits,
// ports (planes), EV format / EV / CC profiles, EV event CQs, EV probes. docs/ocp-api.md maps
// each call to the engine. Errors are converted here, once: -1 with errno (poll: -errno) and
// one "mrc: " line on stderr.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <thread>

#include "api/ocp.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/verbs/verbs.h"
#include "srv6/fabric.h"
#include "verbs/internal.h"

namespace mrc::ocp {

engine::NsccConfig to_nscc(const mrc_ctl_cc_nscc_cfg& c) {
  engine::NsccConfig n;
  n.disable_qa = c.disable_qa;
  n.adjust_bytes_threshold = c.adjust_bytes_threshold;
  n.adjust_period_threshold = c.adjust_period_threshold;
  n.base_rtt = c.base_rtt;
  n.eta = c.eta;
  n.fi = c.fi;
  n.fi_scale = c.fi_scale;
  n.gamma = c.gamma;
  n.max_md_jump = c.max_md_jump;
  n.max_cwnd = c.max_cwnd;
  n.qa_gate = c.qa_gate;
  n.qa_threshold = c.qa_threshold;
  n.target_delay = c.target_delay;
  n.alpha = 0;  // derived from max_cwnd (BDP = max_cwnd / 1.5)
  return n;
}

uint32_t FmtProfile::width() const {
  uint32_t w = 0;
  for (uint8_t x : widths) w += x;
  return w;
}

int supported_fmt_modes(const verbs::Device& dev) {
  const io::UdpConfig& u = dev.cfg.udp;
  return MRC_CTL_EV_FMT_MODE_UDP |
         (u.path_mode == io::PathMode::kSrv6 && u.fabric ? MRC_CTL_EV_FMT_MODE_SRV6
                                                         : MRC_CTL_EV_FMT_MODE_STEV);
}

std::optional<engine::Path> to_path(const verbs::Device& dev, int fmt_mode, uint32_t width,
                                    const mrc_ctl_ev& ev, std::string* why) {
  const io::UdpConfig& u = dev.cfg.udp;
  if (ev.port < 1 || ev.port > u.planes.size()) {
    *why = "port " + std::to_string(ev.port) + ": the device has ports 1.." +
           std::to_string(u.planes.size());
    return std::nullopt;
  }
  const auto plane = static_cast<uint16_t>(ev.port - 1);
  auto zero_from = [&](size_t i) {
    return std::all_of(ev.val + i, ev.val + MRC_CTL_EV_MAX_BYTES, [](uint8_t b) { return b == 0; });
  };
  if (fmt_mode == MRC_CTL_EV_FMT_MODE_UDP) {
    const uint32_t raw = uint32_t{ev.val[0]} << 8 | ev.val[1];
    const uint32_t unused = 16 - width;
    if (width == 0 || width > 16 || !zero_from(2) || (raw & ((1u << unused) - 1)) != 0) {
      *why = "a UDP EV is " + std::to_string(width) + " bits, MSB first from val[0]; the rest "
             "must be 0";
      return std::nullopt;
    }
    return engine::Path{uint32_t{plane} << 16 | raw >> unused, plane};
  }
  if (fmt_mode == MRC_CTL_EV_FMT_MODE_STEV && (supported_fmt_modes(dev) & fmt_mode)) {
    // 32 bits, MSB first from val[0]: the flow label's low 16 bits, then the UDP source port.
    const uint32_t raw = uint32_t{ev.val[0]} << 24 | uint32_t{ev.val[1]} << 16 |
                         uint32_t{ev.val[2]} << 8 | ev.val[3];
    const uint32_t unused = 32 - width;
    if (width == 0 || width > 32 || !zero_from(4) ||
        (unused != 0 && (raw & ((1u << unused) - 1)) != 0)) {
      *why = "an STEV EV is " + std::to_string(width) +
             " bits, MSB first from val[0]; the rest "
             "must be 0";
      return std::nullopt;
    }
    if (!dev.driver) {
      *why = "the device is not open";
      return std::nullopt;
    }
    const uint32_t v = unused == 32 ? 0 : raw >> unused;
    auto path = dev.driver->stev_path(plane, v >> 16, static_cast<uint16_t>(v));
    if (!path.ok()) {
      *why = path.error();
      return std::nullopt;
    }
    return *path;
  }
  if (fmt_mode == MRC_CTL_EV_FMT_MODE_SRV6 && (supported_fmt_modes(dev) & fmt_mode)) {
    // The EV is the destination address the controller chose (its uSID segment list, ending
    // at the peer): the driver sends to exactly that, not to the path our plan derives.
    const srv6::Fabric& f = *u.fabric;
    srv6::Ipv6 a{};
    std::memcpy(a.data(), ev.val, 16);
    if (!zero_from(16) || !f.in_block(plane, a) || f.usid_at(plane, a, 0) == 0) {
      *why = "an SRv6 EV is a uSID address (no SRH segment) in the locator block " +
             srv6::prefix(f.block(plane), f.block_bits(plane)) + " of the plane of its port";
      return std::nullopt;
    }
    if (!dev.driver) {
      *why = "the device is not open";
      return std::nullopt;
    }
    auto path = dev.driver->explicit_path(plane, a);
    if (!path.ok()) {
      *why = path.error();
      return std::nullopt;
    }
    return *path;
  }
  *why = "EV format mode " + std::to_string(fmt_mode) + " is not carried by this device";
  return std::nullopt;
}

std::optional<engine::Path> resolve(const verbs::Device& dev, const FmtProfile& fmt,
                                    const EvFields& fields, const mrc_ctl_ev& ev,
                                    std::string* why) {
  if (fields.empty()) return to_path(dev, fmt.mode, fmt.width(), ev, why);
  if (std::string bad = check_fields(fmt.widths, fields); !bad.empty()) {
    *why = "the profile's fields do not fit its EV format profile: " + bad;
    return std::nullopt;
  }
  mrc_ctl_ev wire = ev;
  if (!expand(fmt.widths, fields, ev.val, wire.val, why)) return std::nullopt;
  return to_path(dev, fmt.mode, fmt.width(), wire, why);
}

mrc_ctl_ev_state ev_state(verbs::Device& dev, const EvProfile& p, const EvSlot& s) {
  if (!s.populated) return MRC_CTL_EV_UNKNOWN;
  if (s.denied) return MRC_CTL_EV_DENIED;
  if (!dev.driver) return MRC_CTL_EV_UNKNOWN;
  return dev.driver->peek_engine([&](engine::Engine& e) {
    int worst = 0;  // 0 none, 1 GOOD, 2 ASSUMED_BAD, 3 DENIED
    for (uint32_t qpn : p.qpns) {
      const engine::PathSet* ps = e.paths(qpn);
      const int i = ps ? ps->find(s.path.ev) : -1;
      if (i < 0 || ps->ev(static_cast<size_t>(i)).path.plane != s.path.plane) continue;
      const engine::EvState st = ps->ev(static_cast<size_t>(i)).state;
      worst = std::max(worst, st == engine::EvState::kGood         ? 1
                              : st == engine::EvState::kAssumedBad ? 2
                                                                   : 3);
    }
    return worst == 0 ? MRC_CTL_EV_UNKNOWN
           : worst == 1 ? MRC_CTL_EV_GOOD
           : worst == 2 ? MRC_CTL_EV_ASSUMED_BAD
                        : MRC_CTL_EV_DENIED;
  });
}

mrc_ctl_ev auto_ev(const engine::Path& path) {
  mrc_ctl_ev ev{};
  ev.val[0] = static_cast<uint8_t>(path.ev >> 8);
  ev.val[1] = static_cast<uint8_t>(path.ev);
  ev.port = static_cast<uint8_t>(path.plane + 1);
  return ev;
}

std::vector<engine::Path> auto_paths(verbs::Device& dev, const EvProfile& p) {
  std::vector<engine::Path> out;
  if (!dev.driver) return out;
  auto add = [&](const engine::Path& x) {
    for (const engine::Path& y : out)
      if (y.ev == x.ev && y.plane == x.plane) return;
    out.push_back(x);
  };
  if (dev.cfg.udp.path_mode != io::PathMode::kSrv6)
    for (const engine::Path& x : dev.driver->spray_paths(0)) add(x);
  dev.driver->peek_engine([&](engine::Engine& e) {
    for (uint32_t qpn : p.qpns)
      if (const engine::PathSet* ps = e.paths(qpn))
        for (size_t i = 0; i < ps->size(); ++i) add(ps->ev(i).path);
    return 0;
  });
  return out;
}

std::vector<engine::Path> profile_paths(const EvProfile& p) {
  std::vector<engine::Path> out;
  if (p.mode == MRC_CTL_EV_MODE_AUTO) return out;  // its slots only hold denies
  std::set<uint32_t> seen;
  for (const EvSlot& s : p.slots)
    if (s.populated && seen.insert(s.path.ev).second) out.push_back(s.path);
  return out;
}

void sync_qp(verbs::Device& dev, uint32_t qpn, const EvProfile& p, bool paths) {
  if (p.slots.empty() || !dev.driver) return;
  if (p.mode == MRC_CTL_EV_MODE_AUTO) {  // the device's EVs: only the controller's denies
    const engine::Time now = dev.cfg.udp.clock();
    dev.driver->with_engine([&](engine::Engine& e) {
      for (const EvSlot& s : p.slots)
        if (s.denied) (void)e.deny_ev(now, qpn, s.path.ev, true);
      return 0;
    });
    return;
  }
  const engine::Time now = dev.cfg.udp.clock();
  dev.driver->with_engine([&](engine::Engine& e) {
    auto q = e.query_qp(qpn);
    if (!q || !engine::connected_in(q->state)) return 0;
    engine::QpAttr a;
    uint32_t mask = engine::attr::kPathPolicy;
    if (paths) {
      a.paths = profile_paths(p);
      mask |= engine::attr::kPaths;
    }
    // ev_min_active is profile-wide; the engine's floor is per plane (see docs/ocp-api.md).
    std::set<uint16_t> planes;
    for (const EvSlot& s : p.slots)
      if (s.populated) planes.insert(s.path.plane);
    const auto n = static_cast<uint32_t>(std::max<size_t>(planes.size(), 1));
    a.path_policy = q->path_policy;
    a.path_policy.min_active_per_plane = std::max<uint32_t>(1, (p.min_active + n - 1) / n);
    if (!e.modify_qp(qpn, a, mask)) log("QP %u: the EV profile's paths were refused", qpn);
    for (const EvSlot& s : p.slots)
      if (s.populated && s.denied) (void)e.deny_ev(now, qpn, s.path.ev, true);
    return 0;
  });
}

namespace {

constexpr int kAllStates = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD | MRC_CTL_EV_DENIED;

const char* profile_state_name(int s) {
  return s == MRC_CTL_PROFILE_INIT      ? "INIT"
         : s == MRC_CTL_PROFILE_OFFLINE ? "OFFLINE"
         : s == MRC_CTL_PROFILE_ONLINE  ? "ONLINE"
                                        : "?";
}

// The profile `id` of `map` as a modify call starts from: a copy of it, or a new one when
// there is room; and CUR_STATE, when the call gives it, must be its state. Nullopt (after
// fail(), errno set) otherwise.
template <class P>
std::optional<P> profile_to_modify(std::map<uint64_t, P>& map, uint64_t id, uint32_t limit,
                                   const char* fn, const char* kind, bool check_cur, int cur) {
  auto found = map.find(id);
  if (found == map.end() && map.size() >= limit) {
    fail(ENOMEM, "%s: %u %s profiles exist already", fn, limit, kind);
    return std::nullopt;
  }
  P p = found == map.end() ? P{} : found->second;
  if (check_cur && cur != p.state) {
    fail(EINVAL, "%s: profile %llu is %s, not %s", fn, static_cast<unsigned long long>(id),
         profile_state_name(p.state), profile_state_name(cur));
    return std::nullopt;
  }
  return p;
}

bool valid_state(int s) {
  return s == MRC_CTL_PROFILE_INIT || s == MRC_CTL_PROFILE_OFFLINE || s == MRC_CTL_PROFILE_ONLINE;
}

bool unpopulated(const mrc_ctl_ev& ev) {
  return ev.port == 0 &&
         std::all_of(ev.val, ev.val + MRC_CTL_EV_MAX_BYTES, [](uint8_t b) { return b == 0; });
}

bool same_ev(const mrc_ctl_ev& a, const mrc_ctl_ev& b) {
  return a.port == b.port && std::memcmp(a.val, b.val, sizeof a.val) == 0;
}

uint32_t max_width(const verbs::Device& dev) {
  return (supported_fmt_modes(dev) & MRC_CTL_EV_FMT_MODE_SRV6) ? 128 : 32;
}

uint32_t mode_width(int mode) {
  return mode == MRC_CTL_EV_FMT_MODE_SRV6 ? 128 : mode == MRC_CTL_EV_FMT_MODE_STEV ? 32 : 16;
}

const char* fmt_mode_name(int m) {
  return m == MRC_CTL_EV_FMT_MODE_STEV   ? "STEV"
         : m == MRC_CTL_EV_FMT_MODE_SRV6 ? "SRV6"
         : m == MRC_CTL_EV_FMT_MODE_UDP  ? "UDP"
                                         : "?";
}

std::string gid_text(const ibv_gid& g) {
  char s[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET6, g.raw, s, sizeof s);
  return s;
}

const char* algorithms[] = {kNscc, nullptr};

int fill_ctl_attr(verbs::Device& dev, mrc_ctl_device_attr* a) {
  *a = mrc_ctl_device_attr{};
  a->mrc_ctl_protocol_version = MRC_CTL_PROTOCOL_VERSION_1;
  uint32_t used = 0;
  {
    Controller& c = controller();
    std::lock_guard lock(c.mu);
    for (const auto& [id, p] : c.ev) used += static_cast<uint32_t>(p.slots.size());
  }
  a->ev.ev_max_fmt_profiles = kMaxFmtProfiles;
  a->ev.ev_max_profiles = kMaxEvProfiles;
  a->ev.ev_max_count = kMaxEvs;
  a->ev.ev_free_count = kMaxEvs - std::min(used, kMaxEvs);
  a->ev.ev_max_count_profile = kMaxEvsPerProfile;
  a->ev.ev_count_align = 1;
  a->ev.ev_max_width = max_width(dev);
  a->ev.ev_fmt_mode_mask = static_cast<uint32_t>(supported_fmt_modes(dev));
  a->ev.ev_mode_mask = MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN;
  a->ev.ev_op_max_entries = 0;
  a->cc.cc_max_profiles = kMaxCcProfiles;
  a->cc.algorithms = algorithms;
  const auto planes = static_cast<uint32_t>(dev.cfg.udp.planes.size());
  a->phy_port_mask = ((1u << planes) - 1) << 1;
  a->opt_attr = MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE | MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE |
                MRC_CTL_OPT_CAP_EV_EVENT | MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT |
                MRC_CTL_OPT_CAP_EP_OP_EV_PROBE;
  return 0;
}

int check_port(const char* fn, mrc_context* ctx, uint8_t port, const void* attr, int mask) {
  if (!ctx || !attr) return fail(EINVAL, "%s: context and attr are needed", fn);
  const size_t planes = ctx->dev->cfg.udp.planes.size();
  if (port < 1 || port > planes)
    return fail(EINVAL, "%s: port %u: the device has ports 1..%zu (port N = plane N-1)", fn, port,
                planes);
  if (mask & ~MRC_CTL_PORT_ADMIN_STATE)
    return fail(EINVAL, "%s: unknown mask bits 0x%x", fn, mask & ~MRC_CTL_PORT_ADMIN_STATE);
  return 0;
}

// A state change of a profile; `ok` says whether from -> to is a step of the life cycle.
bool step_ok(int from, int to) {
  return from == to || (from == MRC_CTL_PROFILE_INIT && to == MRC_CTL_PROFILE_OFFLINE) ||
         (from == MRC_CTL_PROFILE_OFFLINE &&
          (to == MRC_CTL_PROFILE_ONLINE || to == MRC_CTL_PROFILE_INIT)) ||
         (from == MRC_CTL_PROFILE_ONLINE && to == MRC_CTL_PROFILE_OFFLINE);
}

bool is_local_gid(const verbs::Device& dev, const ibv_gid& gid) {
  if (std::memcmp(dev.gid.raw, gid.raw, 16) == 0) return true;
  const io::UdpConfig& u = dev.cfg.udp;
  for (size_t p = 0; p < u.planes.size(); ++p) {
    in6_addr a{};
    const std::string s = u.planes[p].address.substr(0, u.planes[p].address.find('%'));
    if (::inet_pton(AF_INET6, s.c_str(), &a) == 1 && std::memcmp(&a, gid.raw, 16) == 0) return true;
    if (u.path_mode == io::PathMode::kSrv6 && u.fabric &&
        std::memcmp(u.fabric->host_address(u.local_host, static_cast<uint32_t>(p)).data(),
                    gid.raw, 16) == 0)
      return true;
  }
  return false;
}

// The EVs of GEN profile *p (api/ev_fields.h "Generation"): count of them over the device's
// ports, each expanded through the fields into its engine path. false and *why if the fields
// do not fit `fmt`, generate too few distinct EVs, or an EV cannot be carried.
bool generate(const verbs::Device& dev, const FmtProfile& fmt, EvProfile* p, std::string* why) {
  if (std::string bad = check_fields(fmt.widths, p->fields); !bad.empty()) {
    *why = "fields do not fit EV format profile " + std::to_string(*p->fmt_id) + ": " + bad;
    return false;
  }
  const size_t ports = std::max<size_t>(dev.cfg.udp.planes.size(), 1);
  const uint32_t count = *p->count;
  const uint64_t per_port = (count + ports - 1) / ports;
  if (per_port > gen_combinations(p->fields)) {
    *why = "ev_count " + std::to_string(count) + " needs " + std::to_string(per_port) +
           " distinct EVs per port; the fields generate " +
           std::to_string(gen_combinations(p->fields));
    return false;
  }
  std::vector<EvSlot> slots(count);
  for (uint32_t i = 0; i < count; ++i) {
    EvSlot& s = slots[i];
    gen_ev(p->fields, i / ports, s.ev.val);
    s.ev.port = static_cast<uint8_t>(i % ports + 1);
    auto path = resolve(dev, fmt, p->fields, s.ev, why);
    if (!path) {
      *why = "generated EV " + std::to_string(i) + ": " + *why;
      return false;
    }
    s.path = *path;
    s.populated = true;
  }
  p->slots = std::move(slots);
  return true;
}

// The mrc_ctl_ev_event of API 1.0.0: no `state` (48 bytes instead of 56).
struct EvEvent100 {
  uint64_t profile_id;
  mrc_ctl_ev ev;
  uint32_t drop_count;
};
static_assert(sizeof(EvEvent100) == 48 && offsetof(EvEvent100, drop_count) == 44);
static_assert(sizeof(mrc_ctl_ev_event) == 56);

// A connected QP (RTR or later) of the device toward `peer`: what a PORT_STATUS_UPDATE is bound
// to (io/udp/port_status.h); 0 if none.
engine::Qpn connected_qp_to(io::UdpDriver& drv, engine::PeerId peer) {
  return drv.peek_engine([&](engine::Engine& e) -> engine::Qpn {
    for (engine::Qpn q = 0; q <= e.max_qpn(); ++q) {
      const auto a = e.query_qp(q);
      if (a.ok() && a->peer == peer && engine::connected_in(a->state)) return q;
    }
    return 0;
  });
}

// mrc_ctl_ep_batch_send_wait's PORT_STATUS_UPDATE: request i (its EV's path and dgid's peer
// resolved) validated, then each sent as update sequence base + i through a connected QP to its
// peer; the peers' acks are the responses.
int port_status_update(io::UdpDriver& drv, uint8_t req_tc, const mrc_ctl_ep_req* req, int num_req,
                       const std::vector<engine::Path>& path,
                       const std::vector<engine::PeerId>& peer, uint32_t rsp_timeout,
                       mrc_ctl_ep_rsp* rsp, int* num_rsp) {
  const char* fn = "mrc_ctl_ep_batch_send_wait";
  const size_t ports = drv.planes();
  std::vector<engine::Qpn> qpn(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const uint32_t mask = req[i].op.port_status_update.port_status;
    // 1-based: bit N is port N (plane N - 1); bit 0 and bits past the device's ports are not.
    if ((mask & 1) != 0 || (ports < 31 && (mask >> (ports + 1)) != 0))
      return fail(EINVAL, "%s: req %u: port_status 0x%x: bit N is port N, 1..%zu here", fn,
                  req[i].req_id, mask, ports);
    qpn[i] = connected_qp_to(drv, peer[i]);
    if (qpn[i] == 0)
      return fail(EINVAL,
                  "%s: req %u: no connected QP to dgid %s: an update is bound to a "
                  "QP pair's tokens",
                  fn, req[i].req_id, gid_text(req[i].dgid).c_str());
  }
  // The driver's own counter: the peer applies only an update later than the last it applied.
  const uint32_t base = drv.port_status_seqs(static_cast<uint32_t>(path.size()));
  std::vector<bool> answered(path.size(), false);
  int unsent = 0;
  for (size_t i = 0; i < path.size(); ++i)
    if (!drv.send_port_status(qpn[i], path[i], req[i].op.port_status_update.port_status >> 1,
                              base + static_cast<uint32_t>(i), static_cast<uint8_t>(req_tc << 2))) {
      answered[i] = true;  // nothing to wait for
      ++unsent;
    }
  const engine::Time deadline = drv.now() + engine::Duration{rsp_timeout};
  int n = 0;
  for (;;) {
    for (const io::PortStatusUpdates::Ack& a : drv.take_port_status_acks()) {
      const uint32_t i = a.seq - base;
      if (i >= path.size() || answered[i]) continue;  // another call's, or a duplicate
      answered[i] = true;
      mrc_ctl_ep_rsp& out = rsp[n++];
      out = mrc_ctl_ep_rsp{};
      out.req_id = req[i].req_id;
      out.port = static_cast<uint8_t>(a.plane + 1);
      out.rtt = static_cast<unsigned>(
          std::clamp<int64_t>(a.rtt.count(), 1, static_cast<int64_t>(UINT_MAX)));
    }
    if (n + unsent == num_req || drv.now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  *num_rsp = n;
  if (n < num_req)
    return fail(ETIMEDOUT,
                "%s: %d of %d port status updates acknowledged within %u ns (%d could not be "
                "sent: no route on their EV)",
                fn, n, num_req, rsp_timeout, unsent);
  return 0;
}

}  // namespace
}  // namespace mrc::ocp

using namespace mrc;
using namespace mrc::ocp;

extern "C" {

// ---- Device and version ----------------------------------------------------------------
int mrc_ctl_query_device_ex(struct ibv_context* context, struct mrc_context*,
                            struct mrc_ctl_device_attr* ctl_attr, int* supported) {
  if (!context || !ctl_attr || !supported)
    return fail(EINVAL, "mrc_ctl_query_device_ex: context, ctl_attr and supported are needed");
  if (!verbs::is_mrc_context(context)) {
    *ctl_attr = mrc_ctl_device_attr{};
    *supported = 0;
    return 0;
  }
  *supported = 1;
  return fill_ctl_attr(*verbs::ctx_of(context)->dev, ctl_attr);
}

int mrc_ctl_query_device(struct ibv_context* context, struct mrc_ctl_device_attr* ctl_attr) {
  if (!context || !ctl_attr)
    return fail(EINVAL, "mrc_ctl_query_device: context and ctl_attr are needed");
  if (!verbs::is_mrc_context(context))
    return fail(EOPNOTSUPP, "mrc_ctl_query_device: device %s is not an MRC device",
                context->device ? context->device->name : "?");
  return fill_ctl_attr(*verbs::ctx_of(context)->dev, ctl_attr);
}

void mrc_ctl_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                           uint32_t* vendor_version, uint32_t* last_supported_vendor_version) {
  if (current_version) *current_version = MRC_CTL_API_CURRENT_VERSION;
  if (last_supported_version) *last_supported_version = MRC_CTL_API_LAST_SUPPORTED_VERSION;
  if (vendor_version) *vendor_version = MRC_CTL_VENDOR_API_CURRENT_VERSION;
  if (last_supported_vendor_version)
    *last_supported_vendor_version = MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION;
}

// ---- Ports -----------------------------------------------------------------------------
int mrc_ctl_query_port(struct mrc_context* context, uint8_t port_num,
                       struct mrc_ctl_port_attr* attr, int attr_mask) {
  if (check_port("mrc_ctl_query_port", context, port_num, attr, attr_mask)) return -1;
  if (attr_mask & MRC_CTL_PORT_ADMIN_STATE) {
    const uint16_t drained = context->dev->driver->peek_engine(
        [](engine::Engine& e) { return e.drained_planes(); });
    attr->port_admin_state = (drained >> (port_num - 1)) & 1 ? MRC_CTL_PORT_ADMIN_DISABLED
                                                             : MRC_CTL_PORT_ADMIN_ENABLED;
  }
  return 0;
}

int mrc_ctl_modify_port(struct mrc_context* context, uint8_t port_num,
                        struct mrc_ctl_port_attr* attr, int attr_mask) {
  if (check_port("mrc_ctl_modify_port", context, port_num, attr, attr_mask)) return -1;
  if (!(attr_mask & MRC_CTL_PORT_ADMIN_STATE)) return 0;
  const int s = raw(attr->port_admin_state);
  if (s != MRC_CTL_PORT_ADMIN_DISABLED && s != MRC_CTL_PORT_ADMIN_ENABLED)
    return fail(EINVAL, "mrc_ctl_modify_port: port %u: admin state %d", port_num, s);
  const auto plane = static_cast<uint16_t>(port_num - 1);
  const bool drain = s == MRC_CTL_PORT_ADMIN_DISABLED;
  bool changed = false;
  auto r = context->dev->driver->with_engine([&](engine::Engine& e) {
    changed = ((e.drained_planes() >> plane) & 1) != drain;
    return e.set_plane_drained(plane, drain);
  });
  if (!r)
    return fail(EINVAL, "mrc_ctl_modify_port: port %u: %s", port_num, engine::to_string(r.error()));
  if (changed) {
    Controller& c = controller();
    std::lock_guard lock(c.mu);
    mrc_async_event ev{};
    ev.element.port_num = port_num;
    ev.event_type = drain ? IBV_EVENT_PORT_ERR : IBV_EVENT_PORT_ACTIVE;
    for (mrc_context* ctx : c.contexts)
      if (ctx->dev == context->dev) push_async(ctx, ev);
  }
  return 0;
}

// ---- EV format profiles ------------------------------------------------------------------
int mrc_ctl_modify_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t id,
                                  struct mrc_ctl_ev_fmt_profile_attr* attr, int mask) {
  const char* fn = "mrc_ctl_modify_ev_fmt_profile";
  if (!mrc_ctx || !attr) return fail(EINVAL, "%s: context and attr are needed", fn);
  const int known = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE |
                    MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP |
                    MRC_CTL_EV_FMT_VENDOR_CFG;
  if (mask & ~known) return fail(EINVAL, "%s: unknown mask bits 0x%x", fn, mask & ~known);
  const auto idn = static_cast<unsigned long long>(id);
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  auto start = profile_to_modify(c.fmt, id, kMaxFmtProfiles, fn, "EV format",
                                 mask & MRC_CTL_EV_FMT_PROFILE_CUR_STATE, raw(attr->cur_profile_state));
  if (!start) return -1;
  FmtProfile p = std::move(*start);
  const bool online = p.state == MRC_CTL_PROFILE_ONLINE;
  if (mask & MRC_CTL_EV_FMT_PROFILE_MODE) {
    const int m = raw(attr->ev_fmt_mode);
    if (online) return fail(EBUSY, "%s: profile %llu is ONLINE: take it OFFLINE first", fn, idn);
    if (m != MRC_CTL_EV_FMT_MODE_STEV && m != MRC_CTL_EV_FMT_MODE_SRV6 &&
        m != MRC_CTL_EV_FMT_MODE_UDP)
      return fail(EINVAL, "%s: ev_fmt_mode 0x%x is not one mode", fn, m);
    if (!(supported_fmt_modes(*mrc_ctx->dev) & m))
      return fail(EOPNOTSUPP, "%s: EV format %s is not carried by this device (%s)", fn,
                  fmt_mode_name(m),
                  m == MRC_CTL_EV_FMT_MODE_STEV
                      ? "the flow label does not choose an SRv6 path: use SRV6 EVs"
                      : "SRv6 EVs need path_mode srv6 with a fabric");
    p.mode = m;
  }
  if (mask & MRC_CTL_EV_FMT_PROFILE_OP) {
    if (raw(attr->ev_fmt_op.op) != MRC_CTL_EV_FMT_OP_MODIFY_FIELDS)
      return fail(EINVAL, "%s: op %d: only MODIFY_FIELDS modifies (QUERY_FIELDS is for "
                  "mrc_ctl_query_ev_fmt_profile)", fn, raw(attr->ev_fmt_op.op));
    if (online) return fail(EBUSY, "%s: profile %llu is ONLINE: take it OFFLINE first", fn, idn);
    const int n = attr->ev_fmt_op.fmt_field_count;
    if (n < 1 || n > kMaxEvFields || !attr->ev_fmt_op.fmt_fields)
      return fail(EINVAL, "%s: %d fields (1..%d and an array are needed)", fn, n, kMaxEvFields);
    p.widths.clear();
    for (int i = 0; i < n; ++i) {
      const uint8_t w = attr->ev_fmt_op.fmt_fields[i].width;
      if (w == 0) return fail(EINVAL, "%s: field %d has width 0", fn, i);
      p.widths.push_back(w);
    }
  }
  if (p.mode && !p.widths.empty() && p.width() > mode_width(p.mode))
    return fail(E2BIG, "%s: fields of %u bits: %s EVs carry at most %u here", fn, p.width(),
                fmt_mode_name(p.mode), mode_width(p.mode));
  if (mask & MRC_CTL_EV_FMT_VENDOR_CFG) std::memcpy(p.vendor_cfg, attr->vendor_cfg, sizeof p.vendor_cfg);
  if (mask & MRC_CTL_EV_FMT_PROFILE_STATE) {
    const int to = raw(attr->profile_state);
    if (!valid_state(to) || !step_ok(p.state, to))
      return fail(EINVAL, "%s: profile %llu: no step %s -> %s", fn, idn,
                  profile_state_name(p.state), profile_state_name(to));
    if (to == MRC_CTL_PROFILE_OFFLINE && !p.mode)
      return fail(EINVAL, "%s: profile %llu: OFFLINE needs MRC_CTL_EV_FMT_PROFILE_MODE", fn, idn);
    if (to == MRC_CTL_PROFILE_ONLINE && p.widths.empty())
      return fail(EINVAL, "%s: profile %llu: ONLINE needs the fields (MODIFY_FIELDS)", fn, idn);
    if (online && to == MRC_CTL_PROFILE_OFFLINE && p.users > 0)
      return fail(EBUSY, "%s: profile %llu: %u ONLINE EV profiles use it", fn, idn, p.users);
    if (to == MRC_CTL_PROFILE_INIT) {
      c.fmt.erase(id);
      return 0;
    }
    p.state = static_cast<mrc_ctl_profile_state>(to);
  }
  c.fmt[id] = p;
  return 0;
}

int mrc_ctl_query_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t id,
                                 struct mrc_ctl_ev_fmt_profile_attr* attr, int mask) {
  const char* fn = "mrc_ctl_query_ev_fmt_profile";
  if (!mrc_ctx || !attr) return fail(EINVAL, "%s: context and attr are needed", fn);
  const int known = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE |
                    MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP |
                    MRC_CTL_EV_FMT_VENDOR_CFG;
  if (mask & ~known) return fail(EINVAL, "%s: unknown mask bits 0x%x", fn, mask & ~known);
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  auto it = c.fmt.find(id);
  const FmtProfile p = it == c.fmt.end() ? FmtProfile{} : it->second;  // unnamed: INIT
  if (mask & MRC_CTL_EV_FMT_PROFILE_STATE) attr->profile_state = p.state;
  if (mask & MRC_CTL_EV_FMT_PROFILE_CUR_STATE) attr->cur_profile_state = p.state;
  if (mask & MRC_CTL_EV_FMT_PROFILE_MODE) attr->ev_fmt_mode = static_cast<mrc_ctl_ev_fmt_mode>(p.mode);
  if (mask & MRC_CTL_EV_FMT_VENDOR_CFG) std::memcpy(attr->vendor_cfg, p.vendor_cfg, sizeof p.vendor_cfg);
  if (mask & MRC_CTL_EV_FMT_PROFILE_OP) {
    if (raw(attr->ev_fmt_op.op) != MRC_CTL_EV_FMT_OP_QUERY_FIELDS)
      return fail(EINVAL, "%s: op %d: a query takes QUERY_FIELDS", fn, raw(attr->ev_fmt_op.op));
    const int n = static_cast<int>(p.widths.size());
    const int room = attr->ev_fmt_op.fmt_field_count;
    attr->ev_fmt_op.fmt_field_count = n;
    if (room < n || (n > 0 && !attr->ev_fmt_op.fmt_fields))
      return fail(E2BIG, "%s: %d fields, the array holds %d", fn, n, room);
    for (int i = 0; i < n; ++i) attr->ev_fmt_op.fmt_fields[i].width = p.widths[static_cast<size_t>(i)];
  }
  return 0;
}

// ---- EV profiles -----------------------------------------------------------------------
int mrc_ctl_modify_ev_profile(struct mrc_context* mrc_ctx, uint64_t id,
                              struct mrc_ctl_ev_profile_attr* attr, int mask) {
  const char* fn = "mrc_ctl_modify_ev_profile";
  if (!mrc_ctx || !attr) return fail(EINVAL, "%s: context and attr are needed", fn);
  const int known = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE |
                    MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                    MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                    MRC_CTL_EV_PROFILE_EVENT_MASK | MRC_CTL_EV_PROFILE_EV_OP |
                    MRC_CTL_EV_PROFILE_EV_FIELDS_OP | MRC_CTL_EV_PROFILE_VENDOR_CFG;
  if (mask & ~known) return fail(EINVAL, "%s: unknown mask bits 0x%x", fn, mask & ~known);
  if ((mask & MRC_CTL_EV_PROFILE_EV_OP) && (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP))
    return fail(EINVAL, "%s: EV_OP and EV_FIELDS_OP in one call", fn);
  const auto idn = static_cast<unsigned long long>(id);
  verbs::Device& dev = *mrc_ctx->dev;
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  auto start = profile_to_modify(c.ev, id, kMaxEvProfiles, fn, "EV",
                                 mask & MRC_CTL_EV_PROFILE_CUR_STATE, raw(attr->cur_profile_state));
  if (!start) return -1;
  EvProfile p = std::move(*start);
  const bool online = p.state == MRC_CTL_PROFILE_ONLINE;
  auto busy = [&](const char* what) {
    return fail(EBUSY, "%s: profile %llu is ONLINE: %s needs it OFFLINE", fn, idn, what);
  };
  if (mask & MRC_CTL_EV_PROFILE_MODE) {
    const int m = raw(attr->ev_mode);
    if (online) return busy("MODE");
    if (m != MRC_CTL_EV_MODE_AUTO && m != MRC_CTL_EV_MODE_EXP && m != MRC_CTL_EV_MODE_GEN)
      return fail(EINVAL, "%s: ev_mode 0x%x is not one mode", fn, m);
    if (m != p.mode) p.slots.clear();  // EVs of another mode
    p.mode = m;
  }
  if (mask & MRC_CTL_EV_PROFILE_FMT_ID) {
    if (online) return busy("FMT_ID");
    p.fmt_id = attr->ev_fmt_profile_id;
  }
  if (mask & MRC_CTL_EV_PROFILE_COUNT) {
    if (online) return busy("COUNT");
    if (attr->ev_count < 1 || attr->ev_count > kMaxEvsPerProfile)
      return fail(attr->ev_count ? E2BIG : EINVAL, "%s: ev_count %u out of range 1..%u", fn,
                  attr->ev_count, kMaxEvsPerProfile);
    p.count = attr->ev_count;
  }
  if (p.mode == MRC_CTL_EV_MODE_EXP && p.count) p.slots.resize(*p.count);
  if (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) p.min_active = attr->ev_min_active;
  if (p.count && p.min_active > *p.count)
    return fail(EINVAL, "%s: ev_min_active %u above ev_count %u", fn, p.min_active, *p.count);
  if (mask & MRC_CTL_EV_PROFILE_EVENT_MASK) {
    if (attr->ev_event_mask & ~kAllStates)
      return fail(EINVAL, "%s: ev_event_mask 0x%x: GOOD, ASSUMED_BAD (and libmrc's DENIED) only",
                  fn, attr->ev_event_mask);
    p.event_mask = attr->ev_event_mask;
  }
  if (mask & MRC_CTL_EV_PROFILE_VENDOR_CFG) std::memcpy(p.vendor_cfg, attr->vendor_cfg, sizeof p.vendor_cfg);
  bool new_fields = false;
  if (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
    if (raw(attr->ev_fields_op.op) != MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS)
      return fail(EINVAL, "%s: QUERY_FIELDS is for mrc_ctl_query_ev_profile", fn);
    const int n = attr->ev_fields_op.field_count;
    if (n < 1 || !attr->ev_fields_op.fields)
      return fail(EINVAL, "%s: %d fields (at least 1 and an array are needed)", fn, n);
    if (n > kMaxEvFields)
      return fail(E2BIG, "%s: %d fields; at most %d (an EV format profile's)", fn, n, kMaxEvFields);
    EvFields f(attr->ev_fields_op.fields, attr->ev_fields_op.fields + n);
    if (std::string bad = check_fields(f); !bad.empty())
      return fail(EINVAL, "%s: profile %llu: %s", fn, idn, bad.c_str());
    if (p.mode == MRC_CTL_EV_MODE_EXP && online)
      return fail(EBUSY,
                  "%s: profile %llu is ONLINE: an explicit profile's fields need it "
                  "OFFLINE (its EVs were expanded with them)",
                  fn, idn);
    if (p.mode == MRC_CTL_EV_MODE_EXP &&
        std::any_of(p.slots.begin(), p.slots.end(), [](const EvSlot& s) { return s.populated; }))
      return fail(EBUSY,
                  "%s: profile %llu: populated EVs were expanded with the old fields; "
                  "unpopulate them first",
                  fn, idn);
    p.fields = std::move(f);
    new_fields = true;
  }

  // A GEN profile's EVs follow its mode, format, count and fields: generated once all are
  // there (the format ONLINE), again when one of them changes.
  bool new_paths = false;
  if (p.mode == MRC_CTL_EV_MODE_GEN &&
      (new_fields ||
       (mask & (MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT)) ||
       ((mask & MRC_CTL_EV_PROFILE_STATE) && p.slots.empty()))) {
    std::string why;
    auto f = p.fmt_id ? c.fmt.find(*p.fmt_id) : c.fmt.end();
    if (f != c.fmt.end() && f->second.state == MRC_CTL_PROFILE_ONLINE && p.count &&
        !p.fields.empty()) {
      if (!generate(dev, f->second, &p, &why))
        return fail(EINVAL, "%s: profile %llu: %s", fn, idn, why.c_str());
      new_paths = online;
    } else {
      p.slots.clear();
    }
  }

  // EV operations, entry by entry: the first failing one stops, earlier ones stay applied.
  struct Live {
    engine::Path path;
    bool deny;
  };
  std::vector<Live> live;
  int err = 0;
  std::string why;
  if (mask & MRC_CTL_EV_PROFILE_EV_OP) {
    const int op = raw(attr->ev_op.op);
    const int n = attr->ev_op.entry_count;
    mrc_ctl_ev_op_entry* ent = attr->ev_op.entries;
    const FmtProfile* fmt = nullptr;
    if (op != MRC_CTL_EV_OP_REPLACE_EV && op != MRC_CTL_EV_OP_MODIFY_EV_STATE)
      return fail(EINVAL, "%s: ev_op %d: a modify takes REPLACE_EV or MODIFY_EV_STATE", fn, op);
    if (n < 0 || (n > 0 && !ent)) return fail(EINVAL, "%s: %d entries and no array", fn, n);
    if (!p.mode) return fail(EINVAL, "%s: profile %llu: EV operations need its MODE", fn, idn);
    if (op == MRC_CTL_EV_OP_REPLACE_EV && p.mode == MRC_CTL_EV_MODE_AUTO)
      return fail(EINVAL,
                  "%s: profile %llu: an AUTO profile's EVs are the device's, not "
                  "REPLACE_EV's (MODIFY_EV_STATE applies)",
                  fn, idn);
    if (p.mode == MRC_CTL_EV_MODE_AUTO) {
      // The EVs named must be in the profile's array; each becomes a slot holding its state.
      const std::vector<engine::Path> paths = auto_paths(dev, p);
      for (int i = 0; i < n && !err; ++i) {
        const mrc_ctl_ev_op_entry& e = ent[i];
        if (raw(e.state) != MRC_CTL_EV_DENIED && raw(e.state) != MRC_CTL_EV_GOOD) {
          err = EINVAL;
          why = "entry " + std::to_string(i) + ": state must be DENIED or GOOD";
          break;
        }
        const engine::Path* at = nullptr;
        for (const engine::Path& x : paths)
          if (same_ev(auto_ev(x), e.ev)) at = &x;
        if (!at) {
          err = ENOENT;
          why = "entry " + std::to_string(i) + ": EV not in the profile's array";
          break;
        }
        EvSlot* slot = nullptr;
        for (EvSlot& s : p.slots)
          if (same_ev(s.ev, e.ev)) slot = &s;
        if (!slot) slot = &p.slots.emplace_back(EvSlot{e.ev, true, *at, false});
        slot->denied = raw(e.state) == MRC_CTL_EV_DENIED;
        live.push_back(Live{slot->path, slot->denied});
      }
    }
    if (op == MRC_CTL_EV_OP_REPLACE_EV && p.mode == MRC_CTL_EV_MODE_GEN)
      return fail(EINVAL,
                  "%s: profile %llu: a generated profile's EVs come from its fields "
                  "(MODIFY_FIELDS), not REPLACE_EV",
                  fn, idn);
    if (op == MRC_CTL_EV_OP_REPLACE_EV) {
      auto f = p.fmt_id ? c.fmt.find(*p.fmt_id) : c.fmt.end();
      if (f == c.fmt.end() || f->second.state != MRC_CTL_PROFILE_ONLINE)
        return fail(EINVAL, "%s: profile %llu: REPLACE_EV needs an ONLINE EV format profile "
                    "(FMT_ID)", fn, idn);
      fmt = &f->second;
    }
    for (int i = 0; i < n && !err && p.mode != MRC_CTL_EV_MODE_AUTO; ++i) {
      const mrc_ctl_ev_op_entry& e = ent[i];
      const bool all = e.flags & MRC_CTL_EV_OP_F_ALL_COPIES;
      std::vector<size_t> at;
      for (size_t s = 0; s < p.slots.size() && (all || at.empty()); ++s) {
        const bool match = unpopulated(e.ev) ? !p.slots[s].populated
                                             : p.slots[s].populated && same_ev(p.slots[s].ev, e.ev);
        if (match) at.push_back(s);
      }
      if (at.empty()) {
        err = ENOENT;
        why = "entry " + std::to_string(i) + ": " +
              (unpopulated(e.ev) ? "no unpopulated slot left" : "EV not in the profile");
        break;
      }
      if (op == MRC_CTL_EV_OP_MODIFY_EV_STATE) {
        if (raw(e.state) != MRC_CTL_EV_DENIED && raw(e.state) != MRC_CTL_EV_GOOD) {
          err = EINVAL;
          why = "entry " + std::to_string(i) + ": state must be DENIED or GOOD";
          break;
        }
        for (size_t s : at) {
          p.slots[s].denied = raw(e.state) == MRC_CTL_EV_DENIED;
          live.push_back(Live{p.slots[s].path, p.slots[s].denied});
        }
        continue;
      }
      if (unpopulated(e.ev_new)) {
        if (online) {
          err = EINVAL;
          why = "entry " + std::to_string(i) + ": an ONLINE profile keeps every slot populated";
          break;
        }
        for (size_t s : at) p.slots[s] = EvSlot{};
        continue;
      }
      if (raw(e.state) != 0 && raw(e.state) != MRC_CTL_EV_GOOD && raw(e.state) != MRC_CTL_EV_DENIED) {
        err = EINVAL;
        why = "entry " + std::to_string(i) + ": state must be GOOD or DENIED";
        break;
      }
      auto path = resolve(dev, *fmt, p.fields, e.ev_new, &why);
      if (!path) {
        err = EINVAL;
        why = "entry " + std::to_string(i) + ": " + why;
        break;
      }
      for (size_t s : at) {
        p.slots[s].ev = e.ev_new;
        p.slots[s].populated = true;
        p.slots[s].path = *path;
        p.slots[s].denied = raw(e.state) == MRC_CTL_EV_DENIED;
      }
      new_paths = new_paths || online;
    }
  }
  if (!err && (mask & MRC_CTL_EV_PROFILE_STATE)) {
    const int to = raw(attr->profile_state);
    std::string bad;
    if (!valid_state(to) || !step_ok(p.state, to)) {
      bad = std::string("no step ") + profile_state_name(p.state) + " -> " + profile_state_name(to);
    } else if (to == MRC_CTL_PROFILE_OFFLINE && p.state == MRC_CTL_PROFILE_INIT &&
               (!p.mode || (p.mode != MRC_CTL_EV_MODE_AUTO && (!p.fmt_id || !p.count)) ||
                (p.mode == MRC_CTL_EV_MODE_GEN && p.fields.empty()))) {
      bad =
          "OFFLINE needs MODE, for EXP and GEN also FMT_ID and COUNT, for GEN the fields "
          "(EV_FIELDS_OP MODIFY_FIELDS)";
    } else if (to == MRC_CTL_PROFILE_ONLINE && p.mode == MRC_CTL_EV_MODE_GEN && p.slots.empty()) {
      bad = "its EV format profile " + std::to_string(*p.fmt_id) + " is not ONLINE";
    } else if (to == MRC_CTL_PROFILE_ONLINE && p.mode == MRC_CTL_EV_MODE_EXP) {
      auto f = c.fmt.find(*p.fmt_id);
      if (f == c.fmt.end() || f->second.state != MRC_CTL_PROFILE_ONLINE)
        bad = "its EV format profile " + std::to_string(*p.fmt_id) + " is not ONLINE";
      for (size_t s = 0; s < p.slots.size() && bad.empty(); ++s)
        if (!p.slots[s].populated) bad = "ONLINE needs every slot populated; slot " +
                                         std::to_string(s) + " is not (REPLACE_EV)";
    } else if (online && to == MRC_CTL_PROFILE_OFFLINE && !p.qpns.empty()) {
      return fail(EBUSY, "%s: profile %llu: %zu QPs use it", fn, idn, p.qpns.size());
    }
    if (!bad.empty()) return fail(EINVAL, "%s: profile %llu: %s", fn, idn, bad.c_str());
    if (p.mode != MRC_CTL_EV_MODE_AUTO && to != p.state) {
      if (to == MRC_CTL_PROFILE_ONLINE) ++c.fmt[*p.fmt_id].users;
      if (online) --c.fmt[*p.fmt_id].users;
    }
    if (to == MRC_CTL_PROFILE_INIT) {
      c.ev.erase(id);
      return 0;
    }
    p.state = static_cast<mrc_ctl_profile_state>(to);
  }
  const bool policy = (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) != 0;
  EvProfile& stored = c.ev[id] = std::move(p);
  // Connected QPs of the profile follow at once.
  if (new_paths || policy) {
    for (uint32_t qpn : stored.qpns) sync_qp(dev, qpn, stored, new_paths);
  } else if (!live.empty() && dev.driver) {
    const engine::Time now = dev.cfg.udp.clock();
    dev.driver->with_engine([&](engine::Engine& e) {
      for (uint32_t qpn : stored.qpns)
        for (const Live& l : live) (void)e.deny_ev(now, qpn, l.path.ev, l.deny);
      return 0;
    });
  }
  if (err) return fail(err, "%s: profile %llu: %s", fn, idn, why.c_str());
  return 0;
}

int mrc_ctl_query_ev_profile(struct mrc_context* mrc_ctx, uint64_t id,
                             struct mrc_ctl_ev_profile_attr* attr, int mask) {
  const char* fn = "mrc_ctl_query_ev_profile";
  if (!mrc_ctx || !attr) return fail(EINVAL, "%s: context and attr are needed", fn);
  const int known = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE |
                    MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
                    MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                    MRC_CTL_EV_PROFILE_EVENT_MASK | MRC_CTL_EV_PROFILE_EV_OP |
                    MRC_CTL_EV_PROFILE_EV_FIELDS_OP | MRC_CTL_EV_PROFILE_VENDOR_CFG;
  if (mask & ~known) return fail(EINVAL, "%s: unknown mask bits 0x%x", fn, mask & ~known);
  if ((mask & MRC_CTL_EV_PROFILE_EV_OP) && (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP))
    return fail(EINVAL, "%s: EV_OP and EV_FIELDS_OP in one call", fn);
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  auto it = c.ev.find(id);
  const EvProfile empty;
  const EvProfile& p = it == c.ev.end() ? empty : it->second;  // unnamed: INIT
  if (mask & MRC_CTL_EV_PROFILE_STATE) attr->profile_state = p.state;
  if (mask & MRC_CTL_EV_PROFILE_CUR_STATE) attr->cur_profile_state = p.state;
  if (mask & MRC_CTL_EV_PROFILE_MODE) attr->ev_mode = static_cast<mrc_ctl_ev_mode>(p.mode);
  if (mask & MRC_CTL_EV_PROFILE_FMT_ID) attr->ev_fmt_profile_id = p.fmt_id.value_or(0);
  verbs::Device& dev = *mrc_ctx->dev;
  // An AUTO profile's array: the device's EVs, with the states the controller set.
  std::vector<EvSlot> auto_slots;
  if (p.mode == MRC_CTL_EV_MODE_AUTO)
    for (const engine::Path& x : auto_paths(dev, p)) {
      EvSlot s{auto_ev(x), true, x, false};
      for (const EvSlot& d : p.slots)
        if (same_ev(d.ev, s.ev)) s.denied = d.denied;
      auto_slots.push_back(s);
    }
  const std::vector<EvSlot>& slots = p.mode == MRC_CTL_EV_MODE_AUTO ? auto_slots : p.slots;
  if (mask & MRC_CTL_EV_PROFILE_COUNT)
    attr->ev_count =
        p.mode == MRC_CTL_EV_MODE_AUTO ? static_cast<uint32_t>(slots.size()) : p.count.value_or(0);
  if (mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE) attr->ev_min_active = p.min_active;
  if (mask & MRC_CTL_EV_PROFILE_EVENT_MASK) attr->ev_event_mask = p.event_mask;
  if (mask & MRC_CTL_EV_PROFILE_VENDOR_CFG) std::memcpy(attr->vendor_cfg, p.vendor_cfg, sizeof p.vendor_cfg);
  if (mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP) {
    if (raw(attr->ev_fields_op.op) != MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS)
      return fail(EINVAL, "%s: a query takes QUERY_FIELDS", fn);
    const int n = static_cast<int>(p.fields.size());
    const int room = attr->ev_fields_op.field_count;
    attr->ev_fields_op.field_count = n;
    if (room < n || (n > 0 && !attr->ev_fields_op.fields))
      return fail(E2BIG, "%s: %d fields, the array holds %d", fn, n, room);
    std::copy(p.fields.begin(), p.fields.end(), attr->ev_fields_op.fields);
  }
  if (mask & MRC_CTL_EV_PROFILE_EV_OP) {
    const int op = raw(attr->ev_op.op);
    const int room = attr->ev_op.entry_count;
    mrc_ctl_ev_op_entry* ent = attr->ev_op.entries;
    if (room < 0 || (room > 0 && !ent)) return fail(EINVAL, "%s: %d entries and no array", fn, room);
    if (op == MRC_CTL_EV_OP_QUERY_EV_ARRAY) {
      const int n = static_cast<int>(slots.size());
      attr->ev_op.entry_count = n;
      if (room < n) return fail(E2BIG, "%s: %d EVs, the array holds %d", fn, n, room);
      for (int i = 0; i < n; ++i) {
        const EvSlot& s = slots[static_cast<size_t>(i)];
        ent[i].ev = s.ev;
        ent[i].state = ev_state(dev, p, s);
      }
    } else if (op == MRC_CTL_EV_OP_QUERY_EV_STATE) {
      for (int i = 0; i < room; ++i) {
        const EvSlot* s = nullptr;
        for (const EvSlot& x : slots)
          if (x.populated && same_ev(x.ev, ent[i].ev)) s = &x;
        if (!s) return fail(ENOENT, "%s: entry %d: EV not in profile %llu", fn, i,
                            static_cast<unsigned long long>(id));
        ent[i].state = ev_state(dev, p, *s);
      }
    } else {
      return fail(EINVAL, "%s: ev_op %d: a query takes QUERY_EV_STATE or QUERY_EV_ARRAY", fn, op);
    }
  }
  return 0;
}

// ---- CC profiles -------------------------------------------------------------------------
int mrc_ctl_modify_cc_profile(struct mrc_context* mrc_ctx, uint64_t id,
                              struct mrc_ctl_cc_profile_attr* attr, int mask) {
  const char* fn = "mrc_ctl_modify_cc_profile";
  if (!mrc_ctx || !attr) return fail(EINVAL, "%s: context and attr are needed", fn);
  const int known = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE |
                    MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG |
                    MRC_CTL_CC_PROFILE_VENDOR_CFG;
  if (mask & ~known) return fail(EINVAL, "%s: unknown mask bits 0x%x", fn, mask & ~known);
  const auto idn = static_cast<unsigned long long>(id);
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  auto start = profile_to_modify(c.cc, id, kMaxCcProfiles, fn, "CC",
                                 mask & MRC_CTL_CC_PROFILE_CUR_STATE, raw(attr->cur_profile_state));
  if (!start) return -1;
  CcProfile p = std::move(*start);
  const bool online = p.state == MRC_CTL_PROFILE_ONLINE;
  if (mask & MRC_CTL_CC_PROFILE_ALGORITHM) {
    if (online) return fail(EBUSY, "%s: profile %llu is ONLINE: ALGORITHM needs it OFFLINE", fn, idn);
    if (attr->algorithm && std::strcmp(attr->algorithm, kNscc) != 0)
      return fail(EINVAL, "%s: unknown algorithm \"%s\" (libmrc has \"%s\", or NULL for none)", fn,
                  attr->algorithm, kNscc);
    p.has_algorithm = true;
    p.no_cc = !attr->algorithm;
    if (p.no_cc) p.cfg.reset();
  }
  bool retune = false;
  if (mask & MRC_CTL_CC_PROFILE_CONFIG) {
    if (!p.has_algorithm) return fail(EINVAL, "%s: profile %llu: CONFIG needs ALGORITHM first", fn, idn);
    if (p.no_cc)
      return fail(EINVAL,
                  "%s: profile %llu: its algorithm is NULL (no congestion control): no "
                  "CONFIG",
                  fn, idn);
    if (!attr->cc_config) return fail(EINVAL, "%s: cc_config is NULL", fn);
    mrc_ctl_cc_nscc_cfg cfg;
    std::memcpy(&cfg, attr->cc_config, sizeof cfg);
    if (const char* bad = engine::validate(to_nscc(cfg)))
      return fail(EINVAL, "%s: profile %llu: %s", fn, idn, bad);
    p.cfg = cfg;
    retune = online;
  }
  if (mask & MRC_CTL_CC_PROFILE_VENDOR_CFG) std::memcpy(p.vendor_cfg, attr->vendor_cfg, sizeof p.vendor_cfg);
  if (mask & MRC_CTL_CC_PROFILE_STATE) {
    const int to = raw(attr->profile_state);
    if (!valid_state(to) || !step_ok(p.state, to))
      return fail(EINVAL, "%s: profile %llu: no step %s -> %s", fn, idn,
                  profile_state_name(p.state), profile_state_name(to));
    if (to == MRC_CTL_PROFILE_OFFLINE && !p.has_algorithm)
      return fail(EINVAL, "%s: profile %llu: OFFLINE needs ALGORITHM", fn, idn);
    if (to == MRC_CTL_PROFILE_ONLINE && !p.cfg && !p.no_cc)
      return fail(EINVAL, "%s: profile %llu: ONLINE needs CONFIG", fn, idn);
    if (online && to == MRC_CTL_PROFILE_OFFLINE && !p.qpns.empty())
      return fail(EBUSY, "%s: profile %llu: %zu QPs use it", fn, idn, p.qpns.size());
    if (to == MRC_CTL_PROFILE_INIT) {
      c.cc.erase(id);
      return 0;
    }
    p.state = static_cast<mrc_ctl_profile_state>(to);
  }
  const CcProfile& stored = c.cc[id] = std::move(p);
  if (retune && mrc_ctx->dev->driver) {
    engine::QpAttr a;
    a.cc = to_nscc(*stored.cfg);
    mrc_ctx->dev->driver->with_engine([&](engine::Engine& e) {
      for (uint32_t qpn : stored.qpns) {
        auto q = e.query_qp(qpn);
        if (q && engine::connected_in(q->state)) (void)e.modify_qp(qpn, a, engine::attr::kCc);
      }
      return 0;
    });
  }
  return 0;
}

int mrc_ctl_query_cc_profile(struct mrc_context* mrc_ctx, uint64_t id,
                             struct mrc_ctl_cc_profile_attr* attr, int mask) {
  const char* fn = "mrc_ctl_query_cc_profile";
  if (!mrc_ctx || !attr) return fail(EINVAL, "%s: context and attr are needed", fn);
  const int known = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE |
                    MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG |
                    MRC_CTL_CC_PROFILE_VENDOR_CFG;
  if (mask & ~known) return fail(EINVAL, "%s: unknown mask bits 0x%x", fn, mask & ~known);
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  auto it = c.cc.find(id);
  const CcProfile empty;
  const CcProfile& p = it == c.cc.end() ? empty : it->second;  // unnamed: INIT
  if (mask & MRC_CTL_CC_PROFILE_STATE) attr->profile_state = p.state;
  if (mask & MRC_CTL_CC_PROFILE_CUR_STATE) attr->cur_profile_state = p.state;
  if (mask & MRC_CTL_CC_PROFILE_ALGORITHM)
    attr->algorithm = p.has_algorithm && !p.no_cc ? kNscc : nullptr;
  // The stored copy: it stays where it is until the profile goes back to INIT.
  if (mask & MRC_CTL_CC_PROFILE_CONFIG) attr->cc_config = p.cfg ? &*p.cfg : nullptr;
  if (mask & MRC_CTL_CC_PROFILE_VENDOR_CFG) std::memcpy(attr->vendor_cfg, p.vendor_cfg, sizeof p.vendor_cfg);
  return 0;
}

// ---- EV events ---------------------------------------------------------------------------
struct mrc_cq* mrc_ctl_create_ev_event_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                                          struct mrc_comp_channel* channel, int comp_vector) {
  const char* fn = "mrc_ctl_create_ev_event_cq";
  if (!mrc_ctx) return fail_null(EINVAL, "%s: context is NULL", fn);
  if (cqe < 1 || cqe > (1 << 20)) return fail_null(EINVAL, "%s: cqe %d out of range 1..%d", fn, cqe, 1 << 20);
  if (channel && channel->ctx != mrc_ctx)
    return fail_null(EINVAL, "%s: the channel belongs to another context", fn);
  (void)comp_vector;  // one completion vector: any value is taken as 0
  auto* cq = new mrc_cq;
  cq->ctx = mrc_ctx;
  cq->ev_events = true;
  cq->depth = static_cast<uint32_t>(cqe);
  cq->cq_context = cq_context;
  cq->channel = channel;
  if (channel) {
    cq->vcq = verbs::create_cq(mrc_ctx->vctx, 1, cq, channel->vch, 0);
    if (!cq->vcq) {
      delete cq;
      return nullptr;  // errno and the line from the verbs device (resources)
    }
    ++channel->cqs;
  }
  std::lock_guard lock(mrc_ctx->mu);
  mrc_ctx->cqs.insert(cq);
  return cq;
}

int mrc_ctl_poll_ev_event(struct mrc_cq* ev_cq, int num_entries, struct mrc_ctl_ev_event* ev_event) {
  if (!ev_cq || !ev_cq->ev_events || num_entries < 0 || (num_entries > 0 && !ev_event)) {
    fail(EINVAL, "mrc_ctl_poll_ev_event: an EV event CQ (mrc_ctl_create_ev_event_cq), "
         "num_entries >= 0 and an array are needed");
    return -EINVAL;
  }
  // The stride is the layout the app compiled: 56 bytes from API 1.0.1 on, 48 before.
  const bool v101 = ev_cq->ctx->api_version >= kApi101;
  auto* out = reinterpret_cast<uint8_t*>(ev_event);
  std::lock_guard lock(ev_cq->mu);
  int n = 0;
  for (; n < num_entries && !ev_cq->events.empty(); ++n) {
    const mrc_ctl_ev_event& e = ev_cq->events.front();
    if (v101) {
      std::memcpy(out + size_t(n) * sizeof e, &e, sizeof e);
    } else {
      const EvEvent100 old{e.profile_id, e.ev, e.drop_count};
      std::memcpy(out + size_t(n) * sizeof old, &old, sizeof old);
    }
    ev_cq->events.pop_front();
  }
  return n;
}

// ---- Endpoint requests -------------------------------------------------------------------
int mrc_ctl_ep_batch_send_wait(struct mrc_context* mrc_ctx, uint8_t req_tc,
                               enum mrc_ctl_ep_op_type op_type, struct mrc_ctl_ep_req* req,
                               int num_req, uint32_t rsp_timeout, struct mrc_ctl_ep_rsp* rsp,
                               int* num_rsp) {
  const char* fn = "mrc_ctl_ep_batch_send_wait";
  if (!mrc_ctx || !req || !rsp || !num_rsp || num_req < 1)
    return fail(EINVAL, "%s: context, requests (num_req >= 1), rsp and num_rsp are needed", fn);
  *num_rsp = 0;
  const int op = raw(op_type);
  const bool update = op == MRC_CTL_EP_OP_PORT_STATUS_UPDATE;
  if (op != MRC_CTL_EP_OP_EV_PROBE && !update) return fail(EINVAL, "%s: op_type %d", fn, op);
  if (req_tc > 63) return fail(EINVAL, "%s: req_tc %u is not a DSCP (0..63)", fn, req_tc);
  verbs::Device& dev = *mrc_ctx->dev;
  if (!dev.driver) return fail(EIO, "%s: the device is closed", fn);

  // Connectionless probes (io/udp/probes.h): no QP on either side; the peer's driver answers.
  // Request i goes out as probe sequence i of one session, on its EV, to its dgid's host.
  std::vector<engine::Path> path(static_cast<size_t>(num_req));
  std::vector<engine::PeerId> peer(path.size());
  for (int i = 0; i < num_req; ++i) {
    const mrc_ctl_ep_req& r = req[i];
    for (int j = 0; j < i; ++j)
      if (req[j].req_id == r.req_id) return fail(EINVAL, "%s: req_id %u appears twice", fn, r.req_id);
    if (!is_local_gid(dev, r.sgid))
      return fail(EINVAL, "%s: req %u: sgid %s is not an address of this device", fn, r.req_id,
                  gid_text(r.sgid).c_str());
    const int mode = raw(r.ev_fmt_mode);
    if (!(supported_fmt_modes(dev) & mode) || (mode & (mode - 1)) != 0)
      return fail(EOPNOTSUPP, "%s: req %u: EV format %s is not carried by this device", fn,
                  r.req_id, fmt_mode_name(mode));
    std::string why;
    auto p = to_path(dev, mode, mode_width(mode), r.req_ev, &why);
    if (!p) return fail(EINVAL, "%s: req %u: %s", fn, r.req_id, why.c_str());
    if (p->plane >= dev.driver->planes())
      return fail(EINVAL, "%s: req %u: port %u: the device has %zu", fn, r.req_id, p->plane + 1u,
                  dev.driver->planes());
    path[static_cast<size_t>(i)] = *p;
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.grh.dgid = r.dgid;
    uint32_t host = 0;
    std::lock_guard lock(dev.mu);
    auto to = verbs::peer_for(&dev, ah, &host);
    if (!to)
      return fail(EINVAL, "%s: req %u: dgid %s: %s", fn, r.req_id, gid_text(r.dgid).c_str(),
                  to.error().c_str());
    peer[static_cast<size_t>(i)] = *to;
  }
  io::UdpDriver& drv = *dev.driver;
  if (update)
    return port_status_update(drv, req_tc, req, num_req, path, peer, rsp_timeout, rsp, num_rsp);
  std::vector<bool> answered(path.size(), false);
  int unsent = 0;
  const uint32_t token = drv.with_probes([&](io::Probes& pr) {
    const uint32_t t = pr.open();
    for (size_t i = 0; i < path.size(); ++i)
      if (!pr.send(drv.now(), t, peer[i], path[i], static_cast<uint32_t>(i),
                   static_cast<uint8_t>(req_tc << 2))) {
        answered[i] = true;  // nothing to wait for
        ++unsent;
      }
    return t;
  });
  const engine::Time deadline = drv.now() + engine::Duration{rsp_timeout};
  int n = 0;
  for (;;) {
    for (const io::ProbeReply& r :
         drv.with_probes([&](io::Probes& pr) { return pr.take(token); })) {
      if (r.seq >= path.size() || answered[r.seq] || r.path.ev != path[r.seq].ev ||
          r.path.plane != path[r.seq].plane)
        continue;  // a duplicate, or not the path asked
      answered[r.seq] = true;
      mrc_ctl_ep_rsp& out = rsp[n++];
      out = mrc_ctl_ep_rsp{};
      out.req_id = req[r.seq].req_id;
      out.port = static_cast<uint8_t>(r.path.plane + 1);
      // The peer's service time (reading the probe to answering it) taken out, when it said.
      out.rtt = static_cast<unsigned>(
          std::clamp<int64_t>((r.rtt - r.svc).count(), 1, static_cast<int64_t>(UINT_MAX)));
      out.adj_svc_time = r.svc > engine::Duration{0} ? 1 : 0;
    }
    if (n + unsent == num_req || drv.now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  drv.with_probes([&](io::Probes& pr) { pr.close(token); });
  *num_rsp = n;
  if (n < num_req)
    return fail(ETIMEDOUT,
                "%s: %d of %d probes answered within %u ns (%d could not be sent: "
                "no route on their EV)",
                fn, n, num_req, rsp_timeout, unsent);
  return 0;
}

}  // extern "C"
