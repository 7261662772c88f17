// A device's live statistics and control channel: what a UdpDriver publishes (layout.h) and
// the commands mrcctl sends it. The driver's observer (io/udp/observer.h): a front end
// attaches it to a driver's config with attach_publisher before UdpDriver::create.
// Threading: every method runs under the owning driver's mutex (the progress loop, or
// add_peer), never concurrently; it touches the engine only there. It never blocks: the
// control socket is non-blocking, the segment is written in place.
//
// Publishing: tick() runs after each loop iteration. When the engine or driver counters moved
// since the last snapshot (or the application or a command woke the loop), a new one is
// written at most every MRC_STATS_INTERVAL_MS (10 ms by default); next_deadline() makes the
// loop wake for it. EV state changes are found by
// comparing each EV's change count (PathSet::Ev::changes) with the previous snapshot, so the
// app's own engine events (poll_event) are left alone; several changes of one EV between two
// snapshots are one EventRecord with `missed` saying how many more there were.
//
// Control channel: a unix datagram socket /run/mrc/<pid>.<device>.ctl (mode 0600; and the
// sender's kernel credentials must be root's or this process's user's: in practice root). One JSON
// request per datagram, one JSON reply sent back to the sender's bound address (docs/mrcctl.md
// lists the commands):
//   {"cmd":"ping"}
//   {"cmd":"deny","ev":E,"deny":true|false[,"qpn":N]}     Engine::deny_ev on every QP with E
//   {"cmd":"drain","plane":P,"drain":true|false}           Engine::set_plane_drained
//   {"cmd":"cc_show"[,"qpn":N]}                            each QP's NSCC profile
//   {"cmd":"cc_set","set":{field:value...}[,"qpn":N]}      modify_qp(kCc) with those fields
//   {"cmd":"probe","peer":NAME[,"count":C,"interval_ms":I,"timeout_ms":T]}
// Replies are {"ok":true,...} or {"ok":false,"error":"one line"}.
//
// Probes (mrcctl probe): `count` rounds, `interval_ms` apart, of one connectionless probe
// (io/udp/probes.h: no QP on either side, answered by the peer's driver) on every path to
// the peer: in srv6 mode every plane and spine of the fabric, else the EVs a QP to it sprays
// on (UdpDriver::spray_paths). The peer is one this device knows by name ("h<host>", its
// plane-0 address) or, in srv6 mode, any fabric host ("h<N>", N or its fabric name) at the
// configured peer port. The answer lists per path: sent, received, loss, RTT min/avg/max,
// and `bad` (loss >= 50%). Probes change no engine state or counter.
#pragma once

#include <netinet/in.h>
#include <sys/un.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/io/udp/observer.h"
#include "mrc/io/udp/udp_driver.h"
#include "mrc/observe/segment.h"

namespace mrc::observe {

/// Makes every driver created from `cfg` publish (a Publisher per driver, unless MRC_STATS=0):
/// what each front end that creates a UdpDriver calls on its config first.
void attach_publisher(io::UdpConfig& cfg);
/// The factory attach_publisher sets (for front ends that hand it on, e.g. to the verbs
/// device).
io::ObserverFactory publisher_factory();

class Publisher final : public io::DriverObserver {
 public:
  /// What the publisher uses of its driver; each is called under the driver's mutex.
  using DriverHooks = io::DriverHooks;

  /// A publisher for a new device of this process, or nullptr when MRC_STATS=0 or the segment
  /// cannot be made (then *why says so; the datapath runs without). The control socket is
  /// optional: without /run/mrc access the device publishes but takes no commands.
  static std::unique_ptr<Publisher> create(const io::UdpConfig& cfg,
                                           const std::vector<sockaddr_in6>& locals,
                                           DriverHooks hooks, std::string* why);
  ~Publisher() override;

  uint32_t index() const { return index_; }
  /// The control socket for the loop's ppoll set; -1 if none.
  int control_fd() const override { return ctl_fd_; }
  /// Earliest time tick() has work (a snapshot due, a probe round); kNever if none.
  engine::Time next_deadline() const override;

  void add_peer(engine::PeerId id, std::string name, uint32_t host) override;
  /// After each loop iteration: commands (read only when `commands`: the control socket
  /// polled readable, so an iteration without them makes no syscall here), probe rounds,
  /// and a snapshot when due. `app_call`: the application woke the loop (with_engine), so
  /// QPs may have changed without a datagram or timer showing it.
  void tick(engine::Time now, engine::Engine& e, const io::UdpCounters& c, bool commands,
            bool app_call) override;

 private:
  struct EvMemo;
  struct ProbeTarget;
  struct ProbeSession;
  struct Request;  // a parsed control request
  struct Tally {   // what one snapshot wrote, and left out for want of room
    uint32_t qps = 0, evs = 0, qps_truncated = 0, evs_truncated = 0;
  };
  Publisher() = default;
  // Snapshot: the device's counters, then each QP's record and its EVs' (publish_qp), whose
  // state changes since the last snapshot become events (remember).
  void publish(engine::Time now, engine::Engine& e, const io::UdpCounters& c);
  void publish_qp(engine::Qpn qpn, engine::Engine& e, uint64_t gen, Tally& t);
  EvMemo& remember(engine::Qpn qpn, const engine::PathSet::Ev& v, const engine::PathStats& s,
                   uint64_t gen);
  // Control: each datagram is one request, handled by its command's function; each returns
  // the reply ({"ok":false,...} naming the problem when refused).
  void serve_control(engine::Time now, engine::Engine& e);
  std::string handle(engine::Time now, engine::Engine& e, const std::string& request,
                     const sockaddr_un& from, socklen_t from_len, bool* deferred);
  std::string deny(engine::Time now, engine::Engine& e, const Request& r);
  std::string drain(engine::Engine& e, const Request& r);
  std::string cc(engine::Engine& e, const Request& r, bool set);  // cc_show, cc_set
  // Starts a probe session; its reply is sent when it ends (*deferred).
  std::string probe(engine::Time now, const Request& r, const sockaddr_un& from, socklen_t from_len,
                    bool* deferred);
  void reply(const sockaddr_un& to, socklen_t len, const std::string& body);
  void probe_rounds(engine::Time now);
  void probe_replies();  // the probe session's replies into its targets
  // The peer called `name` (see "Probes"), with its fabric host or UINT32_MAX; an error
  // naming what is wrong when there is none.
  Result<std::pair<engine::PeerId, uint32_t>, std::string> peer_by_name(const std::string& name);

  io::UdpConfig cfg_;
  DriverHooks hooks_;
  uint32_t index_ = 0;
  std::unique_ptr<SegmentWriter> seg_;
  int ctl_fd_ = -1;
  std::string ctl_path_;
  engine::Duration interval_{10'000'000};
  engine::Time next_publish_{0};
  bool dirty_ = true;
  uint64_t signature_ = ~uint64_t{0};
  struct Peer {
    engine::PeerId id;
    std::string name;
    uint32_t host;
  };
  std::vector<Peer> peers_;
  std::unordered_map<uint64_t, std::unique_ptr<EvMemo>> memo_;  // (qpn << 32 | ev)
  std::unique_ptr<ProbeSession> probe_;
  std::vector<engine::PathStats> path_stats_;  // one QP's, reused by publish() (no allocation)
};

}  // namespace mrc::observe
