// The OCP MRC application API (mrc.h) over the software verbs device: contexts, channels, CQs,
// QP hints, MRC QPs (verbs RC QPs that only WRITE), async events. Errors are converted here,
// once: -1 (or NULL) with errno and one "mrc: " line on stderr.
#include "api/ocp.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "mrc/engine/policy.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/verbs/verbs.h"
#include "verbs/internal.h"

namespace mrc::ocp {

namespace {
void vlog(const char* fmt, va_list ap) {
  char line[512];
  std::vsnprintf(line, sizeof line, fmt, ap);
  std::fprintf(stderr, "mrc: %s\n", line);
}
}  // namespace

void log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

int fail(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
  errno = err;
  return -1;
}

std::nullptr_t fail_null(int err, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
  errno = err;
  return nullptr;
}

Controller& controller() {
  static auto* c = new Controller;  // lives as long as the process, like the device
  return *c;
}

void push_async(mrc_context* ctx, const mrc_async_event& e) {
  {
    std::lock_guard lock(ctx->mu);
    ctx->async.push_back(e);
  }
  const uint64_t one = 1;
  (void)!::write(ctx->async_fd, &one, sizeof one);
}

namespace {

constexpr int kQpHintMask = MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
                            MRC_QP_HINT_NUM_REMOTE_RECV_PEERS | MRC_QP_HINT_VENDOR_CFG;
constexpr int kQpAttrMask = MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR |
                            MRC_QP_MPR_DEST | MRC_QP_TIMEOUT | MRC_QP_EV_PROFILE_ID |
                            MRC_QP_CC_PROFILE_ID | MRC_QP_HINT | MRC_QP_RETRY_CNT | MRC_QP_CAP |
                            MRC_QP_VENDOR_CFG;
// Verbs attributes an MRC QP takes, and those it accepts and ignores (OCP: not supported;
// the published benchmark sets PORT, TIMEOUT, RETRY_CNT and RNR_RETRY anyway).
constexpr int kVerbsUsed = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX |
                           IBV_QP_ACCESS_FLAGS | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_SQ_PSN | IBV_QP_PATH_MTU;
constexpr int kVerbsIgnored = IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                              IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
                              IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
                              IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE | IBV_QP_QKEY |
                              IBV_QP_EN_SQD_ASYNC_NOTIFY;

// What a new (or reset) QP's attributes are: the connection policy's window, ack timeout and
// retry budget (engine::QpAttr's defaults, which every face uses), the largest WIMM limits.
mrc_qp_attr default_qp_attr() {
  const engine::QpAttr policy;
  mrc_qp_attr a{};
  a.mpr.mpr = a.mpr.mpr_dest = static_cast<uint8_t>(policy.max_psn_range / 128);
  a.wimm.max_wimm = a.wimm.max_wimm_dest = kMaxWimm;
  a.timeout = policy.timeout;
  a.retry.linear_cnt = policy.retry_cnt_linear;
  a.retry.exp_cnt = policy.retry_cnt_exp;
  return a;
}

uint8_t max_mpr(const verbs::Device& dev) {
  return static_cast<uint8_t>(std::min<uint32_t>(255, dev.cfg.udp.engine.recv_window / 128));
}

const char* state_name(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_ERR: return "ERR";
    default: return "?";
  }
}

int fill_device_attr(const char* fn, ibv_context* c, mrc_device_attr* a, int* supported) {
  if (!c || !a || !supported) return fail(EINVAL, "%s: context, attr and supported are needed", fn);
  *a = mrc_device_attr{};
  if (!verbs::is_mrc_context(c)) {
    *supported = 0;  // a real NIC's context: not an error
    return 0;
  }
  const verbs::Device& dev = *verbs::ctx_of(c)->dev;
  *supported = 1;
  a->mrc_protocol_version = MRC_PROTOCOL_VERSION_1;
  a->wimm_attr.max_wimm = kMaxWimm;
  a->wimm_attr.max_wimm_dest = kMaxWimm;
  a->mpr_attr.max_mpr = max_mpr(dev);
  a->mpr_attr.mpr_resolution = 1;
  a->qp_attr.max_qp_hint = kMaxQpHints;
  a->cap = MRC_DEVICE_CAP_TRIM_NACK;
  return 0;
}

// Every engine event of the device, on the driver's thread under Device::mu: QP fatal errors
// and CQ overflows of this context's objects become its async events; EV state changes of QPs
// bound to an EV profile (of any context) go to this context's EV event CQs.
void on_engine_event(mrc_context* ctx, const engine::Event& e) {
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  if (e.type == engine::EventType::kCqOverflow) {
    std::lock_guard l2(ctx->mu);
    for (mrc_cq* cq : ctx->cqs) {
      if (!cq->vcq || cq->ev_events || verbs::cq_of(cq->vcq)->id != e.cq) continue;
      ctx->async.push_back(mrc_async_event{{.cq = cq}, IBV_EVENT_CQ_ERR});
      const uint64_t one = 1;
      (void)!::write(ctx->async_fd, &one, sizeof one);
    }
    return;
  }
  auto it = c.qps.find(e.qpn);
  if (it == c.qps.end()) return;  // not an MRC QP
  mrc_qp* qp = it->second;
  if (e.type == engine::EventType::kQpFatal) {
    if (qp->ctx == ctx) push_async(ctx, mrc_async_event{{.qp = qp}, IBV_EVENT_QP_FATAL});
    return;
  }
  if (e.type != engine::EventType::kEvState || e.from == e.to || !qp->ev_profile) return;
  auto p = c.ev.find(*qp->ev_profile);
  if (p == c.ev.end()) return;
  mrc_ctl_ev_event out{};
  out.profile_id = p->first;
  if (p->second.mode == MRC_CTL_EV_MODE_AUTO) {
    out.ev = auto_ev(engine::Path{e.ev, e.plane});
  } else {
    const EvSlot* slot = nullptr;
    for (const EvSlot& s : p->second.slots)
      if (s.populated && s.path.ev == e.ev && s.path.plane == e.plane) slot = &s;
    if (!slot) return;
    out.ev = slot->ev;
  }
  // One event per profile-wide change: this QP's copy changes, and the worst state over the
  // profile's copies (GOOD < ASSUMED_BAD < DENIED) is reported when it moves.
  std::lock_guard l2(ctx->mu);
  auto& copies = ctx->ev_copies[{p->first, e.plane, e.ev}];
  auto worst = [&] {
    uint8_t w = static_cast<uint8_t>(engine::EvState::kGood);
    for (auto it = copies.begin(); it != copies.end();) {
      if (!p->second.qpns.count(it->first)) {  // a QP that left the profile
        it = copies.erase(it);
        continue;
      }
      w = std::max(w, it->second);
      ++it;
    }
    return static_cast<engine::EvState>(w);
  };
  static_assert(engine::EvState::kGood < engine::EvState::kAssumedBad &&
                engine::EvState::kAssumedBad < engine::EvState::kDenied);
  const engine::EvState before = worst();
  if (static_cast<engine::EvState>(e.to) == engine::EvState::kGood)
    copies.erase(e.qpn);
  else
    copies[e.qpn] = e.to;
  const engine::EvState to = worst();
  if (copies.empty()) ctx->ev_copies.erase({p->first, e.plane, e.ev});
  if (to == before) return;
  const int state = to == engine::EvState::kGood         ? MRC_CTL_EV_GOOD
                    : to == engine::EvState::kAssumedBad ? MRC_CTL_EV_ASSUMED_BAD
                                                         : MRC_CTL_EV_DENIED;
  if (!(p->second.event_mask & state)) return;
  out.state = static_cast<mrc_ctl_ev_state>(state);
  for (mrc_cq* cq : ctx->cqs) {
    if (!cq->ev_events) continue;
    std::lock_guard l3(cq->mu);
    cq->dropped += e.dropped_before;
    if (cq->events.size() >= cq->depth) {
      ++cq->dropped;
      continue;
    }
    out.drop_count = cq->dropped;
    cq->dropped = 0;
    cq->events.push_back(out);
    if (cq->armed && cq->vcq) {
      cq->armed = false;
      verbs::notify(verbs::cq_of(cq->vcq));
    }
  }
}

// The NSCC constants of CC profile `id` at RTR. nullopt: the engine's automatic ones. Under
// Controller::mu.
std::optional<engine::NsccConfig> cc_config(const Controller& c, uint64_t id) {
  auto it = c.cc.find(id);
  if (it != c.cc.end() && it->second.cfg) return to_nscc(*it->second.cfg);
  return std::nullopt;
}

// The hint's rates (the NCCL plugin's vendor_cfg CC hint), which the engine turns into windows
// of rate x base RTT on top of the QP's profile, the learned one included (QpAttr::cc_rates).
engine::CcRates qp_cc_rates(mrc_qp_hint* hint) {
  CcHint h{};
  if (hint) {
    std::lock_guard lock(hint->mu);
    std::memcpy(&h, hint->attr.vendor_cfg, sizeof h);
  }
  if (h.version != 1) return {};
  return engine::CcRates{h.init_rate, h.min_rate, h.max_rate};
}

// Takes the QP off its profiles' lists. Under Controller::mu.
void unbind(Controller& c, const mrc_qp* qp, uint32_t qpn) {
  if (auto it = qp->ev_profile ? c.ev.find(*qp->ev_profile) : c.ev.end(); it != c.ev.end())
    it->second.qpns.erase(qpn);
  if (auto it = qp->cc_profile ? c.cc.find(*qp->cc_profile) : c.cc.end(); it != c.cc.end())
    it->second.qpns.erase(qpn);
}

int destroy_qp(mrc_qp* qp) {
  const uint32_t qpn = qp->vqp->qp_num;
  if (int r = verbs::destroy_qp(qp->vqp)) {
    errno = r;
    return -1;
  }
  {
    Controller& c = controller();
    std::lock_guard lock(c.mu);
    if (auto it = c.qps.find(qpn); it != c.qps.end() && it->second == qp) c.qps.erase(it);
    unbind(c, qp, qpn);
  }
  if (qp->attr.qp_hint) --qp->attr.qp_hint->qps;
  --qp->init.send_cq->qps;
  --qp->init.recv_cq->qps;
  {
    std::lock_guard lock(qp->ctx->mu);
    qp->ctx->qps.erase(qp);
  }
  delete qp;
  return 0;
}

// force: the context is going away; events taken and not acked do not keep the CQ.
int destroy_cq(mrc_cq* cq, bool force) {
  if (cq->qps > 0) return fail(EBUSY, "mrc_destroy_cq: %d QPs still use the CQ", cq->qps.load());
  if (!force && cq->events_taken != cq->events_acked)
    return fail(EBUSY, "mrc_destroy_cq: %llu CQ events taken from it are not acknowledged "
                "(mrc_ack_cq_events)",
                static_cast<unsigned long long>(cq->events_taken - cq->events_acked));
  {
    std::lock_guard lock(cq->ctx->mu);  // from here no event sink reaches it
    cq->ctx->cqs.erase(cq);
  }
  if (cq->vcq) {
    if (int r = verbs::destroy_cq(cq->vcq)) {
      std::lock_guard lock(cq->ctx->mu);
      cq->ctx->cqs.insert(cq);
      errno = r;
      return -1;
    }
  }
  if (cq->channel) --cq->channel->cqs;
  delete cq;
  return 0;
}

int destroy_channel(mrc_comp_channel* ch) {
  if (ch->cqs > 0)
    return fail(EBUSY, "mrc_destroy_comp_channel: %d CQs still use the channel", ch->cqs.load());
  if (int r = verbs::destroy_comp_channel(ch->vch)) {
    errno = r;
    return -1;
  }
  {
    std::lock_guard lock(ch->ctx->mu);
    ch->ctx->channels.erase(ch);
  }
  delete ch;
  return 0;
}

int destroy_hint(mrc_qp_hint* h) {
  if (h->qps > 0) return fail(EBUSY, "mrc_destroy_qp_hint: %d QPs still use the hint", h->qps.load());
  {
    std::lock_guard lock(h->ctx->mu);
    h->ctx->hints.erase(h);
  }
  delete h;
  return 0;
}

bool owns(mrc_context* ctx, mrc_qp_hint* h) {
  std::lock_guard lock(ctx->mu);
  return ctx->hints.count(h) > 0;
}

int check_hint_attr(const char* fn, const mrc_qp_hint_attr& a, int mask) {
  if ((mask & MRC_QP_HINT_NUM_QPS_PER_PEER) && a.num_qps_per_peer < 0)
    return fail(EINVAL, "%s: num_qps_per_peer %d is negative", fn, a.num_qps_per_peer);
  if ((mask & MRC_QP_HINT_NUM_SEND_PEERS) && a.num_send_peers < 0)
    return fail(EINVAL, "%s: num_send_peers %d is negative", fn, a.num_send_peers);
  if ((mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS) && a.num_remote_recv_peers < 0)
    return fail(EINVAL, "%s: num_remote_recv_peers %d is negative", fn, a.num_remote_recv_peers);
  if (mask & MRC_QP_HINT_VENDOR_CFG) {
    CcHint h;
    std::memcpy(&h, a.vendor_cfg, sizeof h);
    if (h.version == 1 && h.min_rate && h.max_rate && h.min_rate > h.max_rate)
      return fail(EINVAL, "%s: CC hint min_rate %u Mbit/s is above max_rate %u", fn, h.min_rate,
                  h.max_rate);
  }
  return 0;
}

// mrc_modify_qp's steps: checks that build a plan and change nothing (each returns 0, or -1
// with errno set and the problem logged), then the one verbs modify that applies the plan, then
// commit_modify, which cannot fail.
struct ModifyPlan {
  ibv_qp_state cur = IBV_QPS_RESET, to = IBV_QPS_RESET;
  bool to_rtr = false;                             // INIT -> RTR: the QP connects
  mrc_qp_attr next{};                              // the MRC attributes query returns afterwards
  std::optional<uint64_t> ev_profile, cc_profile;  // the profiles bound afterwards
  // At RTR, from the profiles: the EV profile's paths, the CC profile's constants (or none).
  std::vector<engine::Path> profile_evs;
  std::optional<engine::NsccConfig> profile_cc;
  bool profile_cc_off = false;  // its CC profile's algorithm is NULL: no congestion control
  // The verbs modify, with the MRC attributes as engine attributes applied in the same engine
  // call (verbs::EngineOverrides).
  ibv_qp_attr v{};
  int vm = 0;
  verbs::EngineOverrides ov;
};

// The masks, the state transition and what RTR needs.
int check_modify(const mrc_qp* qp, const ibv_qp_attr* vattr, int vattr_mask,
                 const mrc_qp_attr* mrc_attr, int mrc_attr_mask, ModifyPlan& p) {
  const uint32_t qpn = qp->vqp->qp_num;
  if ((vattr_mask && !vattr) || (mrc_attr_mask && !mrc_attr))
    return fail(EINVAL, "mrc_modify_qp: QP %u: a mask is set but its attributes are NULL", qpn);
  if (vattr_mask & ~(kVerbsUsed | kVerbsIgnored))
    return fail(EINVAL, "mrc_modify_qp: QP %u: IBV_QP_* bits 0x%x are not attributes of MRC QPs",
                qpn, vattr_mask & ~(kVerbsUsed | kVerbsIgnored));
  if (mrc_attr_mask & ~kQpAttrMask)
    return fail(EINVAL, "mrc_modify_qp: QP %u: unknown MRC mask bits 0x%x", qpn,
                mrc_attr_mask & ~kQpAttrMask);
  const ibv_qp_state cur = qp->vqp->state;
  const bool has_state = vattr_mask & IBV_QP_STATE;
  if (has_state && (raw(vattr->qp_state) < IBV_QPS_RESET || raw(vattr->qp_state) > IBV_QPS_ERR))
    return fail(EINVAL, "mrc_modify_qp: QP %u: qp_state %d", qpn, raw(vattr->qp_state));
  const ibv_qp_state to = has_state ? vattr->qp_state : cur;
  if ((vattr_mask & IBV_QP_CUR_STATE) && raw(vattr->cur_qp_state) != cur)
    return fail(EINVAL, "mrc_modify_qp: QP %u: cur_qp_state %d, but the QP is in %s", qpn,
                raw(vattr->cur_qp_state), state_name(cur));
  if (has_state &&
      (to == IBV_QPS_SQE || !engine::qp_transition_ok(verbs::to_engine(cur), verbs::to_engine(to))))
    return fail(EINVAL, "mrc_modify_qp: QP %u: no transition %s -> %s", qpn, state_name(cur),
                state_name(to));
  const bool to_rtr = has_state && cur == IBV_QPS_INIT && to == IBV_QPS_RTR;
  if (to_rtr && (vattr_mask & (IBV_QP_AV | IBV_QP_DEST_QPN)) != (IBV_QP_AV | IBV_QP_DEST_QPN))
    return fail(EINVAL, "mrc_modify_qp: QP %u: RTR needs IBV_QP_AV and IBV_QP_DEST_QPN", qpn);
  if ((vattr_mask & IBV_QP_PATH_MTU) &&
      (raw(vattr->path_mtu) < IBV_MTU_256 || raw(vattr->path_mtu) > IBV_MTU_4096))
    return fail(EINVAL, "mrc_modify_qp: QP %u: path_mtu %d", qpn, raw(vattr->path_mtu));
  p.cur = cur;
  p.to = to;
  p.to_rtr = to_rtr;
  p.next = qp->attr;
  p.ev_profile = qp->ev_profile;
  p.cc_profile = qp->cc_profile;
  return 0;
}

// The MRC attributes' ranges, into p.next.
int check_mrc_limits(const mrc_qp* qp, const mrc_qp_attr* m, int mm, ModifyPlan& p) {
  const uint32_t qpn = qp->vqp->qp_num;
  mrc_qp_attr& next = p.next;
  const uint8_t mpr_max = max_mpr(*qp->ctx->dev);
  if (mm & MRC_QP_MAX_WIMM) {
    if (m->wimm.max_wimm < 1 || m->wimm.max_wimm > kMaxWimm)
      return fail(EINVAL, "mrc_modify_qp: QP %u: max_wimm %u out of range 1..%u", qpn,
                  m->wimm.max_wimm, kMaxWimm);
    next.wimm.max_wimm = m->wimm.max_wimm;
  }
  if (mm & MRC_QP_MAX_WIMM_DEST) {
    if (m->wimm.max_wimm_dest < 1 || m->wimm.max_wimm_dest > kMaxWimm)
      return fail(EINVAL, "mrc_modify_qp: QP %u: max_wimm_dest %u out of range 1..%u", qpn,
                  m->wimm.max_wimm_dest, kMaxWimm);
    next.wimm.max_wimm_dest = m->wimm.max_wimm_dest;
  }
  if (mm & MRC_QP_MPR) {
    if (m->mpr.mpr < 1 || m->mpr.mpr > mpr_max)
      return fail(EINVAL, "mrc_modify_qp: QP %u: mpr %u out of range 1..%u (units of 128 PSNs)",
                  qpn, m->mpr.mpr, mpr_max);
    next.mpr.mpr = m->mpr.mpr;
  }
  if (mm & MRC_QP_MPR_DEST) {
    if (m->mpr.mpr_dest < 1 || m->mpr.mpr_dest > mpr_max)
      return fail(EINVAL, "mrc_modify_qp: QP %u: mpr_dest %u out of range 1..%u", qpn,
                  m->mpr.mpr_dest, mpr_max);
    next.mpr.mpr_dest = m->mpr.mpr_dest;
  }
  if (mm & MRC_QP_TIMEOUT) {
    if (m->timeout > kMaxTimeout)
      return fail(EINVAL, "mrc_modify_qp: QP %u: timeout %u above %u (1.024 us x 2^timeout)", qpn,
                  m->timeout, kMaxTimeout);
    next.timeout = m->timeout;
  }
  if (mm & MRC_QP_RETRY_CNT) {
    if (m->retry.linear_cnt > kMaxRetryLinear || m->retry.exp_cnt > kMaxRetryExp)
      return fail(EINVAL, "mrc_modify_qp: QP %u: retry linear %u (max %u), exp %u (max %u)", qpn,
                  m->retry.linear_cnt, kMaxRetryLinear, m->retry.exp_cnt, kMaxRetryExp);
    next.retry = m->retry;
  }
  if (mm & MRC_QP_CAP) {
    const uint32_t known = MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED | MRC_QP_CAP_DYNAMIC_MPR |
                           MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED;
    if (m->cap & ~known)
      return fail(EINVAL, "mrc_modify_qp: QP %u: unknown cap bits 0x%x", qpn, m->cap & ~known);
    if (m->cap & MRC_QP_CAP_DYNAMIC_MPR)
      return fail(EINVAL,
                  "mrc_modify_qp: QP %u: cap MRC_QP_CAP_DYNAMIC_MPR: dynamic MPR is not "
                  "supported (the device has no MRC_DEVICE_CAP_DYNAMIC_MPR)",
                  qpn);
    next.cap = m->cap;
  }
  if (mm & MRC_QP_VENDOR_CFG) std::memcpy(next.vendor_cfg, m->vendor_cfg, sizeof next.vendor_cfg);
  return 0;
}

// The hint and the profiles: set at INIT only; into p.next and p's profiles.
int check_bindings(const mrc_qp* qp, const mrc_qp_attr* m, int mm, ModifyPlan& p) {
  const uint32_t qpn = qp->vqp->qp_num;
  const int binding = MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID;
  const bool at_init = (p.cur == IBV_QPS_RESET && p.to == IBV_QPS_INIT) ||
                       (p.cur == IBV_QPS_INIT && (p.to == IBV_QPS_INIT || p.to == IBV_QPS_RTR));
  if ((mm & binding) && !at_init)
    return fail(EINVAL,
                "mrc_modify_qp: QP %u: the hint and the EV/CC profiles are set at INIT "
                "(the QP is in %s)",
                qpn, state_name(p.cur));
  if ((mm & MRC_QP_HINT) && m->qp_hint && !owns(qp->ctx, m->qp_hint))
    return fail(EINVAL, "mrc_modify_qp: QP %u: the hint is not one of this context's", qpn);
  if (mm & MRC_QP_HINT) p.next.qp_hint = m->qp_hint;
  if (mm & MRC_QP_EV_PROFILE_ID) {
    p.next.profile.ev_profile_id = m->profile.ev_profile_id;
    p.ev_profile = m->profile.ev_profile_id;
  }
  if (mm & MRC_QP_CC_PROFILE_ID) {
    p.next.profile.cc_profile_id = m->profile.cc_profile_id;
    p.cc_profile = m->profile.cc_profile_id;
  }
  return 0;
}

// Profiles named must be ONLINE; at RTR the QP takes its EVs from its EV profile and its
// NSCC constants from its CC profile. One look under the controller's lock.
int look_up_profiles(const mrc_qp* qp, int mm, ModifyPlan& p) {
  const uint32_t qpn = qp->vqp->qp_num;
  Controller& c = controller();
  std::lock_guard lock(c.mu);
  if (mm & MRC_QP_EV_PROFILE_ID) {
    auto it = c.ev.find(*p.ev_profile);
    if (it == c.ev.end() || it->second.state != MRC_CTL_PROFILE_ONLINE)
      return fail(ENOENT, "mrc_modify_qp: QP %u: EV profile %llu is not ONLINE", qpn,
                  static_cast<unsigned long long>(*p.ev_profile));
  }
  if (mm & MRC_QP_CC_PROFILE_ID) {
    auto it = c.cc.find(*p.cc_profile);
    if (it == c.cc.end() || it->second.state != MRC_CTL_PROFILE_ONLINE)
      return fail(ENOENT, "mrc_modify_qp: QP %u: CC profile %llu is not ONLINE", qpn,
                  static_cast<unsigned long long>(*p.cc_profile));
  }
  if (p.to_rtr && p.ev_profile) {
    auto it = c.ev.find(*p.ev_profile);
    if (it == c.ev.end() || it->second.state != MRC_CTL_PROFILE_ONLINE)
      return fail(ENOENT, "mrc_modify_qp: QP %u: its EV profile %llu is no longer ONLINE", qpn,
                  static_cast<unsigned long long>(*p.ev_profile));
    p.profile_evs = profile_paths(it->second);
  }
  if (p.to_rtr && p.cc_profile) {
    auto it = c.cc.find(*p.cc_profile);
    p.profile_cc_off = it != c.cc.end() && it->second.no_cc;
    p.profile_cc = cc_config(c, *p.cc_profile);
  }
  return 0;
}

// The verbs attributes, and the MRC ones as engine attributes. The app's own IBV_QP_TIMEOUT /
// RETRY_CNT are ignored (kVerbsIgnored); the QP's go in their place (in the verbs attributes
// too, for query).
void plan_attrs(const mrc_qp* qp, const ibv_qp_attr* vattr, int vattr_mask, int mm, ModifyPlan& p) {
  const mrc_qp_attr& next = p.next;
  const bool to_rtr = p.to_rtr;
  ibv_qp_attr& v = p.v;
  int& vm = p.vm;
  verbs::EngineOverrides& ov = p.ov;
  engine::QpAttr& ea = ov.attr;
  v = vattr ? *vattr : ibv_qp_attr{};
  vm = vattr_mask & kVerbsUsed & ~IBV_QP_CUR_STATE;
  const bool live = p.to != IBV_QPS_RESET && p.to != IBV_QPS_ERR &&
                    (to_rtr || engine::connected_in(verbs::to_engine(p.cur)));
  if (to_rtr) {
    if (!p.profile_evs.empty()) {  // else the verbs device's spray paths
      ea.paths = std::move(p.profile_evs);
      ov.mask |= engine::attr::kPaths;
    }
    if (p.profile_cc_off) {
      ea.cc_off = true;
      ov.mask |= engine::attr::kCc;
    } else if (p.profile_cc) {
      ea.cc = p.profile_cc;
      ov.mask |= engine::attr::kCc;
    }
    ea.cc_rates = qp_cc_rates(next.qp_hint);
    if (ea.cc_rates.any()) ov.mask |= engine::attr::kCcRates;
  }
  if (live && (to_rtr || (mm & MRC_QP_TIMEOUT))) {
    ea.timeout = std::max<uint8_t>(next.timeout, 1);  // engine: 0 would mean "no timeout"
    v.timeout = ea.timeout;
    vm |= IBV_QP_TIMEOUT;
    ov.mask |= engine::attr::kTimeout;
  }
  if (live && (to_rtr || (mm & MRC_QP_RETRY_CNT))) {
    ea.retry_cnt_linear = next.retry.linear_cnt;
    ea.retry_cnt_exp = next.retry.exp_cnt;
    v.retry_cnt = next.retry.linear_cnt;
    vm |= IBV_QP_RETRY_CNT;
    ov.mask |= engine::attr::kRetry;
  }
  // MPR: set at RTR; on a connected QP it may change (the engine: a window grows only while
  // nothing is in flight, else EBUSY).
  if (to_rtr || (live && (mm & MRC_QP_MPR) && next.mpr.mpr != qp->attr.mpr.mpr)) {
    ea.max_psn_range = uint32_t{next.mpr.mpr} * 128;
    ov.mask |= engine::attr::kMpr;
  }
  // MPR_DEST: this QP's receive window, from RTR on (the engine NACKs PSNs past it).
  if (live && (to_rtr || (mm & MRC_QP_MPR_DEST))) {
    ea.max_psn_range_dest = uint32_t{next.mpr.mpr_dest} * 128;
    ov.mask |= engine::attr::kMprDest;
  }
  // The WRITE_WITH_IMM limits, enforced by the engine from RTR on (see engine::QpAttr).
  if (live && (to_rtr || (mm & (MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST)))) {
    ea.max_wimm = next.wimm.max_wimm;
    ea.max_wimm_dest = next.wimm.max_wimm_dest;
    ov.mask |= engine::attr::kWimm;
  }
}

// Applied: bindings, the profile's EV rules, and what query returns. Nothing here fails.
void commit_modify(mrc_qp* qp, ModifyPlan& p) {
  const uint32_t qpn = qp->vqp->qp_num;
  if (p.to == IBV_QPS_RESET) {  // a reset QP forgets its connection, hint and profiles
    p.next = default_qp_attr();
    p.ev_profile.reset();
    p.cc_profile.reset();
  }
  if (p.next.qp_hint != qp->attr.qp_hint) {
    if (qp->attr.qp_hint) --qp->attr.qp_hint->qps;
    if (p.next.qp_hint) ++p.next.qp_hint->qps;
  }
  {
    Controller& c = controller();
    std::lock_guard lock(c.mu);
    if (p.to_rtr && p.ev_profile)
      if (auto it = c.ev.find(*p.ev_profile); it != c.ev.end())
        sync_qp(*qp->ctx->dev, qpn, it->second, false);
    if (p.ev_profile != qp->ev_profile || p.cc_profile != qp->cc_profile) {
      unbind(c, qp, qpn);
      // A profile that went away since the check above is not bound; RTR then refuses.
      if (auto it = p.ev_profile ? c.ev.find(*p.ev_profile) : c.ev.end(); it != c.ev.end())
        it->second.qpns.insert(qpn);
      if (auto it = p.cc_profile ? c.cc.find(*p.cc_profile) : c.cc.end(); it != c.cc.end())
        it->second.qpns.insert(qpn);
      qp->ev_profile = p.ev_profile;
      qp->cc_profile = p.cc_profile;
    }
  }
  qp->attr = p.next;
}

}  // namespace
}  // namespace mrc::ocp

using namespace mrc;
using namespace mrc::ocp;

extern "C" {

// ---- Device and version ----------------------------------------------------------------
int mrc_query_device_ex(struct ibv_context* context, struct mrc_context*,
                        struct mrc_device_attr* attr, int* supported) {
  // Both API versions have the same mrc_device_attr.
  return fill_device_attr("mrc_query_device_ex", context, attr, supported);
}

int mrc_query_device(struct ibv_context* context, struct mrc_device_attr* attr, int* supported) {
  return fill_device_attr("mrc_query_device", context, attr, supported);
}

void mrc_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                       uint32_t* vendor_version, uint32_t* last_supported_vendor_version) {
  if (current_version) *current_version = MRC_API_CURRENT_VERSION;
  if (last_supported_version) *last_supported_version = MRC_API_LAST_SUPPORTED_VERSION;
  if (vendor_version) *vendor_version = MRC_VENDOR_API_CURRENT_VERSION;
  if (last_supported_vendor_version)
    *last_supported_vendor_version = MRC_VENDOR_API_LAST_SUPPORTED_VERSION;
}

// ---- Context ---------------------------------------------------------------------------
struct mrc_context* mrc_create_context(struct ibv_context* vcontext,
                                       struct mrc_context_attr* context_attr) {
  if (!vcontext) return fail_null(EINVAL, "mrc_create_context: vcontext is NULL");
  if (!verbs::is_mrc_context(vcontext))
    return fail_null(EOPNOTSUPP, "mrc_create_context: device %s is not an MRC device (open mrc0)",
                     vcontext->device ? vcontext->device->name : "?");
  uint32_t version = kApi101;
  if (context_attr && context_attr->mrc_api_version_used) {
    // 0 < v < 1.0.0 (the benchmark passes MRC_PROTOCOL_VERSION_1 = 1): 1.0.0; a newer 1.x:
    // the current one (minors only add).
    const uint32_t v = context_attr->mrc_api_version_used;
    if ((v >> MRC_API_VER_MAJOR_OFFSET) > 1)
      return fail_null(EOPNOTSUPP, "mrc_create_context: API version 0x%08x is newer than libmrc's "
                       "1.0.1", v);
    version = v >= kApi101 ? kApi101 : kApi100;
  }
  if (context_attr && context_attr->mrc_vendor_api_version_used > MRC_VENDOR_API_CURRENT_VERSION)
    return fail_null(EOPNOTSUPP, "mrc_create_context: vendor API version 0x%08x: libmrc has "
                     "vendor API 1.0.0 only", context_attr->mrc_vendor_api_version_used);
  auto* ctx = new mrc_context;
  ctx->vctx = vcontext;
  ctx->dev = verbs::ctx_of(vcontext)->dev;
  ctx->api_version = version;
  ctx->async_fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ctx->async_fd < 0) {
    const int e = errno;
    delete ctx;
    return fail_null(e, "mrc_create_context: eventfd: %s", std::strerror(e));
  }
  {
    Controller& c = controller();
    std::lock_guard lock(c.mu);
    c.contexts.insert(ctx);
  }
  std::lock_guard lock(ctx->dev->mu);
  ctx->sink = ctx->dev->next_sink++;
  ctx->dev->event_sinks[ctx->sink] = [ctx](const engine::Event& e) { on_engine_event(ctx, e); };
  return ctx;
}

int mrc_destroy_context(struct mrc_context* mrc_ctx) {
  if (!mrc_ctx) return fail(EINVAL, "mrc_destroy_context: context is NULL");
  mrc_context* ctx = mrc_ctx;
  // What the app left: QPs first (they hold CQs and hints), then CQs, hints, channels.
  auto take = [&](auto& set) {
    std::lock_guard lock(ctx->mu);
    return std::vector(set.begin(), set.end());
  };
  for (mrc_qp* qp : take(ctx->qps))
    if (ocp::destroy_qp(qp) != 0) return fail(errno, "mrc_destroy_context: a QP cannot be destroyed");
  for (mrc_cq* cq : take(ctx->cqs))
    if (ocp::destroy_cq(cq, true) != 0) return -1;
  for (mrc_qp_hint* h : take(ctx->hints))
    if (destroy_hint(h) != 0) return -1;
  for (mrc_comp_channel* ch : take(ctx->channels))
    if (destroy_channel(ch) != 0) return -1;
  {
    std::lock_guard lock(ctx->dev->mu);
    ctx->dev->event_sinks.erase(ctx->sink);
  }
  {
    Controller& c = controller();
    std::lock_guard lock(c.mu);
    c.contexts.erase(ctx);
  }
  ::close(ctx->async_fd);
  delete ctx;
  return 0;
}

// ---- Completion channels ------------------------------------------------------------------
int mrc_create_comp_channel(struct mrc_context* mrc_ctx, struct mrc_comp_channel** channel) {
  if (!mrc_ctx || !channel)
    return fail(EINVAL, "mrc_create_comp_channel: context and channel are needed");
  ibv_comp_channel* vch = verbs::create_comp_channel(mrc_ctx->vctx);
  if (!vch) return -1;  // errno and the line from the verbs device
  auto* ch = new mrc_comp_channel;
  ch->ctx = mrc_ctx;
  ch->vch = vch;
  {
    std::lock_guard lock(mrc_ctx->mu);
    mrc_ctx->channels.insert(ch);
  }
  *channel = ch;
  return 0;
}

int mrc_get_comp_channel_fd(struct mrc_comp_channel* channel, int* fd) {
  if (!channel || !fd) return fail(EINVAL, "mrc_get_comp_channel_fd: channel and fd are needed");
  *fd = channel->vch->fd;
  return 0;
}

int mrc_destroy_comp_channel(struct mrc_comp_channel* channel) {
  if (!channel) return fail(EINVAL, "mrc_destroy_comp_channel: channel is NULL");
  return destroy_channel(channel);
}

// ---- CQs -------------------------------------------------------------------------------------
struct mrc_cq* mrc_create_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                             struct mrc_comp_channel* channel, int comp_vector) {
  if (!mrc_ctx) return fail_null(EINVAL, "mrc_create_cq: context is NULL");
  if (cqe < 1 || static_cast<uint32_t>(cqe) > verbs::kMaxCqe)
    return fail_null(EINVAL, "mrc_create_cq: cqe %d out of range 1..%u", cqe, verbs::kMaxCqe);
  if (channel && channel->ctx != mrc_ctx)
    return fail_null(EINVAL, "mrc_create_cq: the channel belongs to another context");
  (void)comp_vector;  // one completion vector: any value is taken as 0
  auto* cq = new mrc_cq;
  cq->ctx = mrc_ctx;
  cq->cq_context = cq_context;
  cq->channel = channel;
  // The verbs CQ's context is the mrc_cq: get_cq_event hands it back.
  cq->vcq = verbs::create_cq(mrc_ctx->vctx, cqe, cq, channel ? channel->vch : nullptr, 0);
  if (!cq->vcq) {
    delete cq;
    return nullptr;  // errno and the line from the verbs device (resources)
  }
  if (channel) ++channel->cqs;
  std::lock_guard lock(mrc_ctx->mu);
  mrc_ctx->cqs.insert(cq);
  return cq;
}

int mrc_poll_cq(struct mrc_cq* cq, int num_entries, struct ibv_wc* wc) {
  if (!cq || num_entries < 0 || (num_entries > 0 && !wc))
    return fail(EINVAL, "mrc_poll_cq: a CQ, num_entries >= 0 and a wc array are needed");
  if (cq->ev_events)
    return fail(EINVAL, "mrc_poll_cq: an EV event CQ is read with mrc_ctl_poll_ev_event");
  return verbs::poll_cq(cq->vcq, num_entries, wc);
}

int mrc_destroy_cq(struct mrc_cq* cq) {
  if (!cq) return fail(EINVAL, "mrc_destroy_cq: cq is NULL");
  return ocp::destroy_cq(cq, false);
}

int mrc_req_notify_cq(struct mrc_cq* cq, int) {
  if (!cq) return fail(EINVAL, "mrc_req_notify_cq: cq is NULL");
  if (!cq->channel) return fail(EINVAL, "mrc_req_notify_cq: the CQ has no completion channel");
  if (!cq->ev_events) {
    if (int r = verbs::req_notify_cq(cq->vcq, 0)) {
      errno = r;
      return -1;
    }
    return 0;
  }
  std::lock_guard lock(cq->ctx->dev->mu);  // the sinks' lock: no event slips in between
  std::lock_guard l2(cq->mu);
  if (!cq->events.empty()) {
    cq->armed = false;
    verbs::notify(verbs::cq_of(cq->vcq));
  } else {
    cq->armed = true;
  }
  return 0;
}

int mrc_get_cq_event(struct mrc_comp_channel* channel, struct mrc_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context)
    return fail(EINVAL, "mrc_get_cq_event: channel, cq and cq_context are needed");
  ibv_cq* vcq = nullptr;
  void* vctx = nullptr;
  if (verbs::get_cq_event(channel->vch, &vcq, &vctx) != 0) {
    const int e = errno;
    if (e != EAGAIN && e != EINTR) log("mrc_get_cq_event: %s", std::strerror(e));
    errno = e;
    return -1;
  }
  auto* m = static_cast<mrc_cq*>(vctx);
  ++m->events_taken;
  *cq = m;
  *cq_context = m->cq_context;
  return 0;
}

void mrc_ack_cq_events(struct mrc_cq* cq, unsigned int nevents) {
  if (!cq) return;
  cq->events_acked += nevents;
  if (cq->vcq) verbs::ack_cq_events(cq->vcq, nevents);
}

// ---- QP hints ------------------------------------------------------------------------------
struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* mrc_ctx,
                                       struct mrc_qp_hint_init_attr* init_attr) {
  if (!mrc_ctx || !init_attr) return fail_null(EINVAL, "mrc_create_qp_hint: context and attr are needed");
  if (check_hint_attr("mrc_create_qp_hint", init_attr->attr, kQpHintMask)) return nullptr;
  std::lock_guard lock(mrc_ctx->mu);
  if (mrc_ctx->hints.size() >= kMaxQpHints)
    return fail_null(ENOMEM, "mrc_create_qp_hint: the context holds %u hints already (max_qp_hint)",
                     kMaxQpHints);
  auto* h = new mrc_qp_hint;
  h->ctx = mrc_ctx;
  h->attr = init_attr->attr;
  mrc_ctx->hints.insert(h);
  return h;
}

int mrc_destroy_qp_hint(struct mrc_qp_hint* qp_hint) {
  if (!qp_hint) return fail(EINVAL, "mrc_destroy_qp_hint: hint is NULL");
  return destroy_hint(qp_hint);
}

int mrc_query_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* a, int mask) {
  if (!qp_hint || !a) return fail(EINVAL, "mrc_query_qp_hint: hint and attr are needed");
  if (mask & ~kQpHintMask) return fail(EINVAL, "mrc_query_qp_hint: unknown mask bits 0x%x", mask & ~kQpHintMask);
  std::lock_guard lock(qp_hint->mu);
  const mrc_qp_hint_attr& h = qp_hint->attr;
  if (mask & MRC_QP_HINT_NUM_QPS_PER_PEER) a->num_qps_per_peer = h.num_qps_per_peer;
  if (mask & MRC_QP_HINT_NUM_SEND_PEERS) a->num_send_peers = h.num_send_peers;
  if (mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS) a->num_remote_recv_peers = h.num_remote_recv_peers;
  if (mask & MRC_QP_HINT_VENDOR_CFG) std::memcpy(a->vendor_cfg, h.vendor_cfg, sizeof h.vendor_cfg);
  return 0;
}

int mrc_modify_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* a, int mask) {
  if (!qp_hint || !a) return fail(EINVAL, "mrc_modify_qp_hint: hint and attr are needed");
  if (mask & ~kQpHintMask) return fail(EINVAL, "mrc_modify_qp_hint: unknown mask bits 0x%x", mask & ~kQpHintMask);
  if (check_hint_attr("mrc_modify_qp_hint", *a, mask)) return -1;
  std::lock_guard lock(qp_hint->mu);
  mrc_qp_hint_attr& h = qp_hint->attr;
  if (mask & MRC_QP_HINT_NUM_QPS_PER_PEER) h.num_qps_per_peer = a->num_qps_per_peer;
  if (mask & MRC_QP_HINT_NUM_SEND_PEERS) h.num_send_peers = a->num_send_peers;
  if (mask & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS) h.num_remote_recv_peers = a->num_remote_recv_peers;
  if (mask & MRC_QP_HINT_VENDOR_CFG) std::memcpy(h.vendor_cfg, a->vendor_cfg, sizeof h.vendor_cfg);
  return 0;
}

// ---- QPs -----------------------------------------------------------------------------------
struct mrc_qp* mrc_create_qp(struct mrc_context* mrc_ctx, struct mrc_qp_init_attr* a) {
  if (!mrc_ctx || !a) return fail_null(EINVAL, "mrc_create_qp: context and attr are needed");
  if (!a->send_cq || !a->recv_cq || !a->pd)
    return fail_null(EINVAL, "mrc_create_qp: send_cq, recv_cq and pd are needed");
  if (a->send_cq->ctx != mrc_ctx || a->recv_cq->ctx != mrc_ctx || a->send_cq->ev_events ||
      a->recv_cq->ev_events)
    return fail_null(EINVAL, "mrc_create_qp: send_cq and recv_cq must be CQs (not EV event CQs) "
                     "of this context");
  if (a->pd->context != mrc_ctx->vctx)
    return fail_null(EINVAL, "mrc_create_qp: the PD is not from the context's mrc0 ibv_context");
  const uint64_t writes = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  if (a->send_ops_flags & ~writes)
    return fail_null(EINVAL, "mrc_create_qp: send_ops_flags 0x%llx: MRC QPs do RDMA WRITE and "
                     "WRITE_WITH_IMM only",
                     static_cast<unsigned long long>(a->send_ops_flags & ~writes));
  const int version = raw(a->protocol_version);
  if (version != MRC_PROTOCOL_VERSION_0 && version != MRC_PROTOCOL_VERSION_1)
    return fail_null(EINVAL, "mrc_create_qp: protocol_version 0x%x (libmrc speaks "
                     "MRC_PROTOCOL_VERSION_1)", version);
  const ibv_qp_cap& cap = a->cap;
  if (cap.max_send_wr > verbs::kMaxQpWr || cap.max_recv_wr > verbs::kMaxQpWr ||
      cap.max_send_sge > engine::kMaxSge || cap.max_recv_sge > engine::kMaxSge ||
      cap.max_inline_data > engine::kMaxInline)
    return fail_null(EINVAL, "mrc_create_qp: caps above the device's (max_*_wr %u, max_*_sge %u, "
                     "max_inline_data %u)", verbs::kMaxQpWr, engine::kMaxSge, engine::kMaxInline);
  ibv_qp_init_attr vi{};
  vi.send_cq = a->send_cq->vcq;
  vi.recv_cq = a->recv_cq->vcq;
  vi.cap = cap;
  vi.qp_type = IBV_QPT_RC;
  vi.sq_sig_all = a->sq_sig_all;
  ibv_qp* vqp = verbs::create_qp(a->pd, &vi);
  if (!vqp) return nullptr;  // errno and the line from the verbs device (resources)
  verbs::qp_of(vqp)->mrc = true;  // its events and engine attributes are the OCP API's
  a->cap = vi.cap;
  if (a->send_ops_flags == 0) a->send_ops_flags = writes;
  if (version == MRC_PROTOCOL_VERSION_0) a->protocol_version = MRC_PROTOCOL_VERSION_1;
  auto* qp = new mrc_qp;
  qp->ctx = mrc_ctx;
  qp->vqp = vqp;
  qp->init = *a;
  qp->attr = default_qp_attr();
  ++a->send_cq->qps;
  ++a->recv_cq->qps;
  {
    Controller& c = controller();
    std::lock_guard lock(c.mu);
    c.qps[vqp->qp_num] = qp;
  }
  std::lock_guard lock(mrc_ctx->mu);
  mrc_ctx->qps.insert(qp);
  return qp;
}

int mrc_destroy_qp(struct mrc_qp* qp) {
  if (!qp) return fail(EINVAL, "mrc_destroy_qp: qp is NULL");
  return ocp::destroy_qp(qp);
}

int mrc_get_qpn(struct mrc_qp* qp, uint32_t* qpn) {
  if (!qp || !qpn) return fail(EINVAL, "mrc_get_qpn: qp and qpn are needed");
  *qpn = qp->vqp->qp_num;
  return 0;
}

int mrc_query_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                 struct mrc_qp_attr* mrc_attr, int mrc_attr_mask,
                 struct mrc_qp_init_attr* init_attr) {
  if (!qp) return fail(EINVAL, "mrc_query_qp: qp is NULL");
  if ((vattr_mask && !vattr) || (mrc_attr_mask && !mrc_attr))
    return fail(EINVAL, "mrc_query_qp: a mask is set but its output is NULL");
  if (mrc_attr_mask & ~kQpAttrMask)
    return fail(EINVAL, "mrc_query_qp: unknown MRC mask bits 0x%x", mrc_attr_mask & ~kQpAttrMask);
  if (vattr) {
    ibv_qp_attr v{};
    if (int r = verbs::query_qp(qp->vqp, &v, vattr_mask, nullptr)) {
      errno = r;
      return -1;
    }
    *vattr = v;
  }
  if (mrc_attr) {
    const mrc_qp_attr& s = qp->attr;
    mrc_qp_attr& o = *mrc_attr;
    if (mrc_attr_mask & MRC_QP_MAX_WIMM) o.wimm.max_wimm = s.wimm.max_wimm;
    if (mrc_attr_mask & MRC_QP_MAX_WIMM_DEST) o.wimm.max_wimm_dest = s.wimm.max_wimm_dest;
    if (mrc_attr_mask & MRC_QP_MPR) o.mpr.mpr = s.mpr.mpr;
    if (mrc_attr_mask & MRC_QP_MPR_DEST) o.mpr.mpr_dest = s.mpr.mpr_dest;
    if (mrc_attr_mask & MRC_QP_TIMEOUT) o.timeout = s.timeout;
    if (mrc_attr_mask & MRC_QP_EV_PROFILE_ID) o.profile.ev_profile_id = s.profile.ev_profile_id;
    if (mrc_attr_mask & MRC_QP_CC_PROFILE_ID) o.profile.cc_profile_id = s.profile.cc_profile_id;
    if (mrc_attr_mask & MRC_QP_HINT) o.qp_hint = s.qp_hint;
    if (mrc_attr_mask & MRC_QP_RETRY_CNT) o.retry = s.retry;
    if (mrc_attr_mask & MRC_QP_CAP) o.cap = s.cap;
    if (mrc_attr_mask & MRC_QP_VENDOR_CFG) std::memcpy(o.vendor_cfg, s.vendor_cfg, sizeof o.vendor_cfg);
  }
  if (init_attr) *init_attr = qp->init;
  return 0;
}

int mrc_modify_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                  struct mrc_qp_attr* mrc_attr, int mrc_attr_mask) {
  if (!qp) return fail(EINVAL, "mrc_modify_qp: qp is NULL");
  ModifyPlan p;
  if (check_modify(qp, vattr, vattr_mask, mrc_attr, mrc_attr_mask, p) ||
      check_mrc_limits(qp, mrc_attr, mrc_attr_mask, p) ||
      check_bindings(qp, mrc_attr, mrc_attr_mask, p) || look_up_profiles(qp, mrc_attr_mask, p))
    return -1;
  plan_attrs(qp, vattr, vattr_mask, mrc_attr_mask, p);
  // Apply: the verbs device checks everything (the engine's checks included) before it
  // changes anything; refused, it said why, naming the field, and the QP is as it was.
  if (p.vm || p.ov.mask) {
    if (int r = verbs::modify_qp(qp->vqp, &p.v, p.vm, p.ov, "mrc_modify_qp")) {
      errno = r;
      return -1;
    }
  }
  commit_modify(qp, p);
  return 0;
}

int mrc_post_recv(struct mrc_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr) {
  if (!qp || !wr) return fail(EINVAL, "mrc_post_recv: qp and wr are needed");
  ibv_recv_wr* bad = nullptr;
  if (int r = verbs::post_recv(qp->vqp, wr, &bad)) {  // the verbs device logged why
    if (bad_wr) *bad_wr = bad;
    errno = r;
    return -1;
  }
  return 0;
}

int mrc_post_send(struct mrc_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr) {
  if (!qp || !wr) return fail(EINVAL, "mrc_post_send: qp and wr are needed");
  // Everything before the first WR MRC cannot carry is posted; that one is *bad_wr.
  ibv_send_wr* prev = nullptr;
  ibv_send_wr* refused = nullptr;
  for (ibv_send_wr* w = wr; w; prev = w, w = w->next) {
    if (raw(w->opcode) != IBV_WR_RDMA_WRITE && raw(w->opcode) != IBV_WR_RDMA_WRITE_WITH_IMM) {
      refused = w;
      break;
    }
  }
  int r = 0;
  ibv_send_wr* bad = nullptr;
  if (refused != wr) {
    if (refused) prev->next = nullptr;  // post the prefix only
    r = verbs::post_send(qp->vqp, wr, &bad);
    if (refused) prev->next = refused;
  }
  if (r) {  // the verbs device logged why
    if (bad_wr) *bad_wr = bad;
    errno = r;
    return -1;
  }
  if (refused) {
    if (bad_wr) *bad_wr = refused;
    const int op = raw(refused->opcode);
    const char* name = op == IBV_WR_SEND            ? "IBV_WR_SEND"
                       : op == IBV_WR_SEND_WITH_IMM ? "IBV_WR_SEND_WITH_IMM"
                       : op == IBV_WR_RDMA_READ     ? "IBV_WR_RDMA_READ"
                                                    : "this opcode";
    return fail(EINVAL,
                "mrc_post_send: QP %u: %s (%d) is not supported on MRC QPs (RDMA WRITE "
                "and WRITE_WITH_IMM are)",
                qp->vqp->qp_num, name, op);
  }
  return 0;
}

// ---- Async events ----------------------------------------------------------------------------
int mrc_get_async_event(struct mrc_context* mrc_ctx, struct mrc_async_event* event) {
  if (!mrc_ctx || !event) return fail(EINVAL, "mrc_get_async_event: context and event are needed");
  uint64_t one;
  if (::read(mrc_ctx->async_fd, &one, sizeof one) != sizeof one) {
    const int e = errno;
    if (e != EINTR) log("mrc_get_async_event: %s", std::strerror(e));
    errno = e;
    return -1;
  }
  std::lock_guard lock(mrc_ctx->mu);
  if (mrc_ctx->async.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *event = mrc_ctx->async.front();
  mrc_ctx->async.pop_front();
  return 0;
}

void mrc_ack_async_event(struct mrc_async_event*) {}

}  // extern "C"
