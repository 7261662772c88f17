// The objects behind the OCP MRC API's opaque handles (mrc.h, mrc_ctl.h) and the controller's
// device-wide state, shared by ocp.cc (application API) and ocp_ctl.cc (controller API).
//
// Layering: an mrc_context sits on an ibv_context of the software verbs device (mrc0); an
// mrc_cq wraps a verbs CQ, an mrc_qp a verbs RC QP whose MRC attributes this layer hands to
// verbs::modify_qp as engine overrides (applied with the verbs ones in one engine call), an
// mrc_comp_channel a verbs completion channel (its eventfd is the channel's fd). Profiles
// (EV format, EV, CC) are per device, shared by every context of the process, and named by
// MRC QPs at INIT.
//
// Threading: every C entry point is thread-safe. Locks, always taken in this order:
//   verbs::Device::mu  >  Controller::mu  >  mrc_context::mu  >  mrc_cq::mu  >  the driver's
// The device's event sinks (engine events, on the driver's thread) run under Device::mu and
// take the others, so code holding Controller::mu or a context's mutex never calls a verbs::
// function that takes Device::mu (create/modify/destroy_qp, req_notify_cq). Engine calls
// (UdpDriver::with_engine / peek_engine) are allowed under any of them; mrc_qp_hint::mu is
// a leaf.
//
// EVs (docs/ocp-api.md): an OCP EV {val, port} becomes an engine Path {ev, plane = port - 1}.
// UDP format: the value (at most 16 bits, MSB-first from val[0]) is the UDP source-port
// selector and ev = plane << 16 | value, as UdpDriver::spray_paths numbers its own. SRv6
// format (path_mode srv6 only): val[0..15] is the destination address the controller chose (a
// uSID segment list in the plane's locator block, no SRH); the driver sends exactly there
// (UdpDriver::explicit_path gives its EV), whatever our fabric plan would derive.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "api/ev_fields.h"
#include "common/c_enum.h"
#include "mrc/engine/nscc.h"
#include "mrc/engine/retry.h"
#include "mrc/engine/types.h"
#include "mrc/mrc.h"
#include "mrc/mrc_ctl.h"
#include "verbs/objects.h"

namespace mrc::ocp {

inline constexpr uint32_t kApi100 = MRC_API_VER(1, 0, 0);
inline constexpr uint32_t kApi101 = MRC_API_VER(1, 0, 1);

// ---- Limits mrc_query_device / mrc_ctl_query_device report -------------------------------
inline constexpr uint16_t kMaxWimm = 4096;       // wimm_attr.max_wimm and max_wimm_dest
inline constexpr uint32_t kMaxQpHints = 1024;    // per context
inline constexpr uint32_t kMaxFmtProfiles = 64;  // per device
inline constexpr uint32_t kMaxEvProfiles = 1024;
inline constexpr uint32_t kMaxCcProfiles = 1024;
inline constexpr uint32_t kMaxEvsPerProfile = 4096;
inline constexpr uint32_t kMaxEvs = 1u << 20;  // over all profiles
inline constexpr int kMaxEvFields = 32;        // fields of an EV format or EV profile
inline constexpr const char* kNscc = "uet-1.0-nscc";

// MRC QP attribute defaults: what a QP gets for an attribute the app never set. The window,
// ack timeout and retry budget are the connection policy every face shares (engine::QpAttr's
// defaults: retry.h, engine.h); default_qp_attr() (ocp.cc) reads them from there.
inline constexpr uint8_t kMaxTimeout = 24;       // 17.2 s (OCP)
inline constexpr uint8_t kMaxRetryLinear = 7;
inline constexpr uint8_t kMaxRetryExp = 25;      // 25 = retry forever

using mrc::raw;  // enum fields the app filled in (common/c_enum.h)

/// "mrc: <line>" on stderr.
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/// log, errno = err, returns -1.
int fail(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/// log, errno = err, returns nullptr.
std::nullptr_t fail_null(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// The NCCL plugin's CC hint in mrc_qp_hint_attr.vendor_cfg (host byte order), used when
/// version == 1: rates in Mbit/s, 0 = not given. Each becomes a window of rate x base RTT.
struct CcHint {
  uint8_t version;  // 1
  uint8_t rsvd[3];
  uint32_t init_rate;  // -> NsccConfig::init_cwnd
  uint32_t min_rate;   // -> NsccConfig::cwnd_floor
  uint32_t max_rate;   // -> NsccConfig::max_cwnd
};
static_assert(sizeof(CcHint) == 16);

/// The engine's NSCC configuration for an OCP one: field for field; alpha, init_cwnd and
/// cwnd_floor (no OCP field) are derived (0).
engine::NsccConfig to_nscc(const mrc_ctl_cc_nscc_cfg& c);

// ---- Controller state (one per process: libmrc has one device) ----------------------------
struct FmtProfile {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  int mode = 0;                 // enum mrc_ctl_ev_fmt_mode; 0 = not set
  std::vector<uint8_t> widths;  // field widths, bits; empty = not set
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE] = {};
  uint32_t users = 0;  // EV profiles ONLINE with it
  uint32_t width() const;
};

struct EvSlot {
  mrc_ctl_ev ev{};  // as the controller gave it; all zero = unpopulated
  bool populated = false;
  engine::Path path;    // the engine's EV for it
  bool denied = false;  // MODIFY_EV_STATE DENIED, until GOOD
};

struct EvProfile {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  int mode = 0;  // enum mrc_ctl_ev_mode; 0 = not set
  std::optional<uint64_t> fmt_id;
  std::optional<uint32_t> count;
  uint32_t min_active = 0;
  int event_mask = 0;
  std::vector<EvSlot> slots;  // EXP: count of them; GEN: the generated ones once generated;
                              // AUTO: the EVs the controller set a state on (denied or not)
  EvFields fields;            // MODIFY_FIELDS; empty: an EXP EV is its format's bits as given
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE] = {};
  std::set<uint32_t> qpns;  // MRC QPs bound at INIT
};

struct CcProfile {
  mrc_ctl_profile_state state = MRC_CTL_PROFILE_INIT;
  bool has_algorithm = false;              // ALGORITHM set: NSCC, or (no_cc) NULL
  bool no_cc = false;                      // ALGORITHM NULL: no congestion control for its QPs
  std::optional<mrc_ctl_cc_nscc_cfg> cfg;  // the copy query hands out
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE] = {};
  std::set<uint32_t> qpns;
};

struct Controller {
  std::mutex mu;
  std::map<uint64_t, FmtProfile> fmt;  // (mu) ...
  std::map<uint64_t, EvProfile> ev;
  std::map<uint64_t, CcProfile> cc;
  std::map<uint32_t, mrc_qp*> qps;  // (mu) every MRC QP by QPN
  std::set<mrc_context*> contexts;  // (mu) every open MRC context (port events)
};
Controller& controller();

/// Queues an async event on `ctx` and wakes mrc_get_async_event. Takes ctx->mu.
void push_async(mrc_context* ctx, const mrc_async_event& e);

/// The engine Path of an EV {val, port} encoded as `fmt_mode` with `width` valid bits, on a
/// device with `planes` planes; nullopt and *why when it cannot be carried.
std::optional<engine::Path> to_path(const verbs::Device& dev, int fmt_mode, uint32_t width,
                                    const mrc_ctl_ev& ev, std::string* why);

/// The engine Path of an EV of a profile with `fields` (api/ev_fields.h) in format `fmt`: the
/// EV expanded through the fields (none: the EV as given), then to_path. nullopt and *why when
/// the fields do not fit the format, the EV has bits past them, or to_path refuses it.
std::optional<engine::Path> resolve(const verbs::Device& dev, const FmtProfile& fmt,
                                    const EvFields& fields, const mrc_ctl_ev& ev, std::string* why);

/// An AUTO profile's EV for an engine path the device chose: the low 16 bits of its EV number,
/// MSB first from val[0] (the UDP format's bits: in direct and ECMP path modes the source-port
/// selector, in srv6 mode the fabric's spine << 8 | k), on port plane + 1.
mrc_ctl_ev auto_ev(const engine::Path& path);

/// The EV array of AUTO profile `p`: the paths the device gives its QPs (in direct and ECMP
/// modes the same for every peer, UdpDriver::spray_paths) and those its connected QPs hold,
/// each once. Under Controller::mu.
std::vector<engine::Path> auto_paths(verbs::Device& dev, const EvProfile& p);

/// The engine paths of an EXP or GEN profile's populated slots (none for AUTO), each EV once, in
/// slot order.
std::vector<engine::Path> profile_paths(const EvProfile& p);

/// Brings a connected QP (RTR on) bound to `p` in line with it: its paths (when `paths`: after
/// REPLACE_EV on an ONLINE profile; resets the QP's EV states), its path policy
/// (ev_min_active) and the profile's DENIED EVs. Under Controller::mu.
void sync_qp(verbs::Device& dev, uint32_t qpn, const EvProfile& p, bool paths);

/// The EV format modes the device's driver can carry (enum mrc_ctl_ev_fmt_mode bits).
int supported_fmt_modes(const verbs::Device& dev);

/// The profile-wide state of one EV: DENIED if denied, else the worst state of
/// the EV on the profile's QPs (ASSUMED_BAD > GOOD), UNKNOWN if no QP is connected with it.
/// Under Controller::mu.
mrc_ctl_ev_state ev_state(verbs::Device& dev, const EvProfile& p, const EvSlot& s);

}  // namespace mrc::ocp

// ---- The opaque handles of mrc.h -----------------------------------------------------------

struct mrc_context {
  ibv_context* vctx = nullptr;
  mrc::verbs::Device* dev = nullptr;
  uint32_t api_version = mrc::ocp::kApi101;  // what the app declared, 1.0.0 or 1.0.1
  uint64_t sink = 0;                          // its Device::event_sinks entry
  int async_fd = -1;                          // eventfd, semaphore mode: one count per event

  std::mutex mu;
  std::set<mrc_qp*> qps;  // (mu) objects made from it, destroyed with it
  std::set<mrc_cq*> cqs;
  std::set<mrc_qp_hint*> hints;
  std::set<mrc_comp_channel*> channels;
  std::deque<mrc_async_event> async;  // (mu)
  // EV events are per profile-wide change: the copies (one per QP of the profile) of each EV
  // that are not GOOD, by (profile, plane, EV number), QPN -> engine::EvState, as this
  // context's sink saw them change. The profile-wide state is the worst of them (GOOD if
  // none); an event goes out when it changes.
  std::map<std::tuple<uint64_t, uint16_t, uint32_t>, std::map<uint32_t, uint8_t>> ev_copies;
};

struct mrc_comp_channel {
  mrc_context* ctx = nullptr;
  ibv_comp_channel* vch = nullptr;  // its fd is the channel's
  std::atomic<int> cqs{0};          // CQs bound to it
};

struct mrc_cq {
  mrc_context* ctx = nullptr;
  bool ev_events = false;    // an EV event CQ (mrc_ctl_create_ev_event_cq)
  ibv_cq* vcq = nullptr;     // a regular CQ; for an EV event CQ with a channel, a verbs CQ
                             // that only carries its channel events (verbs::notify)
  void* cq_context = nullptr;  // the app's
  mrc_comp_channel* channel = nullptr;
  std::atomic<int> qps{0};               // QPs using it
  std::atomic<uint64_t> events_taken{0};  // mrc_get_cq_event
  std::atomic<uint64_t> events_acked{0};  // mrc_ack_cq_events

  // EV event CQs only.
  std::mutex mu;
  uint32_t depth = 0;
  std::deque<mrc_ctl_ev_event> events;  // (mu) at most depth
  uint32_t dropped = 0;                 // (mu) lost since the last queued event
  bool armed = false;                   // (mu) req_notify_cq pending
};

struct mrc_qp_hint {
  mrc_context* ctx = nullptr;
  std::mutex mu;
  mrc_qp_hint_attr attr{};  // (mu)
  std::atomic<int> qps{0};  // QPs naming it
};

struct mrc_qp {
  mrc_context* ctx = nullptr;
  ibv_qp* vqp = nullptr;  // RC QP of mrc0; vqp->qp_num is the MRC QPN
  mrc_qp_init_attr init{};  // as created, cap as granted
  mrc_qp_attr attr{};       // current MRC attributes (defaults until set)
  std::optional<uint64_t> ev_profile;  // bound at INIT (Controller::ev)
  std::optional<uint64_t> cc_profile;  // bound at INIT (Controller::cc)
};
