// The objects behind the software verbs device's ibv_* handles (verbs.h), for libmrc's own
// layers (the OCP API uses the driver and QPNs behind an ibv_context or ibv_qp).
// Each wraps the libibverbs struct as its first member, so the handle an app holds is the
// object's address. Threading: fields marked (dev) are guarded by Device::mu; the engine is
// reached only through the driver (with_engine / peek_engine).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mrc/engine/engine.h"
#include "mrc/engine/types.h"
#include "mrc/io/config.h"
#include "mrc/io/udp/udp_driver.h"

namespace mrc::verbs {

struct Cq;
struct Qp;
struct Context;
struct Pd;
struct Mr;
struct Srq;
struct Xrcd;
struct McastKeeper;

/// One entry of port 1's GID table, RoCE v2 type.
struct GidEntry {
  ibv_gid gid{};
  uint32_t ifindex = 0;  // the net interface that holds the address (ndev_ifindex); 0: none
};

/// A multicast group's member process as a sender reaches it (mcast.cc): its peer and the
/// paths to it.
struct McastMember {
  engine::PeerId peer = 0;
  std::vector<engine::Path> paths;
};

/// One MRC NIC of the process: a host configuration and, while any context is open, its
/// UdpDriver. Lives as long as the process.
struct Device {
  ibv_device dev{};  // what get_device_list hands out
  io::HostConfig cfg;
  ibv_gid gid{};  // the host's MRC address: GID index 0
  /// Port 1's GID table (build_gid_table): [0] = gid, then each plane address not listed
  /// yet, all RoCE v2; fixed for the device's life, so read without the lock.
  std::vector<GidEntry> gids;
  uint16_t lid = 1;  // fabric host id + 1

  std::mutex mu;
  std::unique_ptr<io::UdpDriver> driver;  // (dev) made at the first open_device
  int contexts = 0;                       // (dev) open contexts; the driver goes with the last
  pid_t driver_pid = 0;  // (dev) the process that made the driver: a forked child makes its own
  std::map<std::string, engine::PeerId> peers;  // (dev) by GID bytes
  std::map<uint32_t, engine::PeerId> fabric_peers;  // (dev) by fabric host
  // (dev) multicast group members by their entry's plane addresses (mcast.cc member_peer)
  std::map<std::string, McastMember> mcast_peers;
  // (dev) this process's member records and the thread renewing them (mcast.cc); never freed
  McastKeeper* mcast_keeper = nullptr;
  std::set<Cq*> armed;                              // (dev) CQs with req_notify pending
  std::atomic<int> n_armed{0};
  std::set<Context*> open;  // (dev) for async events
  std::map<engine::Qpn, Qp*> qps;  // (dev) for async events
  std::map<uint32_t, Pd*> pds;     // (dev) by handle, for ibv_import_pd
  std::map<uint32_t, Mr*> mrs;     // (dev) by handle (the key), for ibv_import_mr
  std::map<uint32_t, Srq*> srqs;   // (dev) by engine id, for the SRQ limit async event
  // (dev) XRC domains opened on a file (xrc.cc): its (st_dev, st_ino) -> the domain's id and
  // the handles open on it; next_xrcd numbers domains (1..).
  struct XrcdFile {
    uint32_t id = 0;
    int handles = 0;
  };
  std::map<std::pair<uint64_t, uint64_t>, XrcdFile> xrcd_files;
  uint32_t next_xrcd = 1;
  // (dev) Every engine event (QP fatal, EV state changes, CQ overflow) is passed to each
  // sink, from the driver's thread, under mu: the OCP API's EV event CQs register here.
  std::map<uint64_t, std::function<void(const engine::Event&)>> event_sinks;
  uint64_t next_sink = 1;  // (dev)

  /// Called by the driver's thread after each round: wakes armed CQs that hold
  /// completions, turns engine events into async events.
  void on_progress(io::UdpDriver& drv);
};

struct Context {
  verbs_context vctx{};  // the app's ibv_context is &vctx.context
  Device* dev = nullptr;
  pid_t pid = 0;      // the process that opened it (a forked child's copy is not counted)
  int async_fd = -1;  // eventfd, semaphore mode
  // ibv_context::cmd_fd: a memfd ("mrc0-cmd", empty) the context owns, so programs that dup
  // or poll it get a real descriptor; mrc0 has no kernel part to send commands to.
  int cmd_fd = -1;
  std::mutex mu;
  std::deque<ibv_async_event> async;  // (mu)
};

struct Pd {
  ibv_pd pd{};
  std::atomic<uint32_t> users{0};  // MRs, QPs, parent domains in it: dealloc_pd refuses (EBUSY)
  // A parent domain (ibv_alloc_parent_domain): the protection domain it stands for (pd.handle
  // is that one's, so its MRs and QPs are in it), else null.
  Pd* protection = nullptr;
  bool imported = false;  // ibv_import_pd: another context's handle on a PD; unimport frees it
};
inline Pd* pd_of(ibv_pd* pd) { return reinterpret_cast<Pd*>(pd); }

struct Mr {
  ibv_mr mr{};
  bool imported = false;  // ibv_import_mr: another handle on a registration; unimport frees it
  uint64_t iova = 0;      // where mr.addr appears to peers (reg_mr_iova2); kept by rereg_mr
  unsigned access = 0;    // IBV_ACCESS_* as registered; kept by rereg_mr
};
inline Mr* mr_of(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }

struct Srq {
  ibv_srq srq{};
  Context* ctx = nullptr;
  uint32_t id = 0;  // the engine's (Engine::create_srq)
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  Xrcd* xrcd = nullptr;  // an XRC SRQ's domain (ibv_create_srq_ex, IBV_SRQT_XRC), else null
  bool tm = false;       // a tag-matching SRQ (IBV_SRQT_TM, tm.cc)
};
inline Srq* srq_of(ibv_srq* s) { return reinterpret_cast<Srq*>(s); }

/// An XRC domain handle (ibv_open_xrcd, xrc.cc): the domain `id` (engine QpInit::xrcd,
/// XrcSrqInit::xrcd), shared by every handle opened on the same file in this process.
struct Xrcd {
  ibv_xrcd xrcd{};
  uint32_t id = 0;
  std::pair<uint64_t, uint64_t> file{};  // (st_dev, st_ino); (0, 0): no file (fd -1)
  std::atomic<uint32_t> users{0};        // XRC SRQs and target QPs: close_xrcd refuses (EBUSY)
};
inline Xrcd* xrcd_of(ibv_xrcd* x) { return reinterpret_cast<Xrcd*>(x); }

/// An address handle (ud.cc): the peer its GRH names, the paths a datagram to it may take
/// (the driver's spray_paths for that host: successive WRs rotate over them) and the GID of
/// its sgid_index, all resolved once at ibv_create_ah.
struct Ah {
  ibv_ah ah{};
  ibv_ah_attr attr{};
  engine::PeerId peer = 0;
  std::vector<engine::Path> paths;  // never empty
  std::atomic<uint32_t> next{0};    // the path of the next datagram: paths[next % size]
  ibv_gid sgid{};
  bool mcast = false;  // dgid is a multicast GID: a SEND goes to the group's members (mcast.cc)
};
inline Ah* ah_of(ibv_ah* a) { return reinterpret_cast<Ah*>(a); }

struct Channel {
  ibv_comp_channel ch{};  // ch.fd: eventfd, semaphore mode: one count per queued CQ
  std::mutex mu;
  std::deque<Cq*> ready;  // (mu)
};

struct Cq {
  ibv_cq_ex cq{};  // ibv_cq is its prefix
  Context* ctx = nullptr;
  Channel* channel = nullptr;
  engine::CqId id = 0;
  uint64_t empty_at = ~0ull;  // driver activity() when a poll last found nothing
  // CQ_ex polling: the completion being read between start_poll and end_poll.
  engine::Completion cur{};
  std::mutex poll_mu;  // one poller at a time (verbs asks the app for that; cheap insurance)
};

struct Qp {
  ibv_qp_ex qpx{};  // ibv_qp is its prefix
  Context* ctx = nullptr;
  ibv_qp_attr attr{};  // what modify_qp set, for query_qp
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  uint32_t peer_host = 0;  // fabric host of the peer (kSrv6), for spray_paths
  std::atomic<uint64_t> post_errors_logged{0};  // engine::Error kinds already logged
  std::set<engine::McastGid> mcast;  // groups attached (ibv_attach_mcast), under the QP's use
  // ibv_wr_* batch between wr_start and wr_complete.
  struct Pending {
    engine::SendWr wr;
    std::vector<engine::Sge> sg;
    std::vector<uint8_t> inline_buf;
    // UD QPs: ibv_wr_set_ud_addr's destination, turned into `ud` by wr_complete (ud_dest).
    ibv_ah* ah = nullptr;
    uint32_t remote_qpn = 0;
    uint32_t remote_qkey = 0;
    engine::UdDest ud;
    // ibv_wr_bind_mw / ibv_wr_local_inv: a local operation (IBV_WR_BIND_MW, IBV_WR_LOCAL_INV),
    // not an engine SendWr (0: none); its window, key and binding (mw.cc).
    int local_op = 0;
    ibv_mw* mw = nullptr;
    uint32_t local_rkey = 0;
    ibv_mw_bind_info bind{};
  };
  std::vector<Pending> pending;
  int wr_error = 0;  // first error of the batch (EINVAL ...), reported by wr_complete
  // An OCP MRC QP (libmrc's mrc_create_qp): its async events are the OCP API's, and its
  // modifies come with the OCP attributes as engine overrides (verbs.h EngineOverrides).
  bool mrc = false;
  Xrcd* xrcd = nullptr;  // an XRC target QP's domain (IBV_QPT_XRC_RECV), else null
};

inline Context* ctx_of(const ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<uintptr_t>(c) -
                                    offsetof(verbs_context, context));
}
inline Cq* cq_of(ibv_cq* cq) { return reinterpret_cast<Cq*>(cq); }
inline Qp* qp_of(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }

}  // namespace mrc::verbs
