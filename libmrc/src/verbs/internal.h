// Shared by the verbs device's .cc files: logging, errno conversion, limits.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "mrc/common/result.h"
#include "mrc/engine/engine.h"
#include "mrc/engine/types.h"
#include "mrc/io/udp/udp_driver.h"
#include "srv6/fabric.h"
#include "verbs/objects.h"

namespace mrc::verbs {

/// Room for N values of T that a callee fills in, left uninitialised: per-call scratch on the
/// post and poll paths, where value-initialising every slot (engine::Sge and
/// engine::Completion have member initialisers) cost more than the call's own work: 64
/// completions, about 260 instructions per poll_cq that found any. Read only the slots the
/// callee wrote. Threading: a local of the calling thread.
template <class T, size_t N>
union Scratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  Scratch() {}  // no member initialised
  T v[N];
};

inline constexpr uint32_t kMaxQpWr = 32768;    // per send or receive queue
inline constexpr uint32_t kMaxCqe = 1u << 22;  // per CQ

/// "mrc-verbs: <line>" on stderr.
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/// log_error, sets errno = err, returns err.
int fail(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

Device* device_of(const ibv_context* c);
/// Port 1's attributes (ibv_query_port; the sysfs tree's ports/1 files say the same).
ibv_port_attr port_attr(const Device& dev);
/// The node GUID of a device whose GID 0 is `g`: the interface id, as RoCE derives GUIDs.
uint64_t guid_of(const ibv_gid& g);
/// The one device of the process, from the host configuration; null (logged once) if the
/// configuration does not load.
Device* the_device();
/// The engine peer an address vector names (see verbs.h "peers"); *host = its fabric host.
/// Under dev->mu, with the driver open.
Result<engine::PeerId, std::string> peer_for(Device* dev, const ibv_ah_attr& ah, uint32_t* host);
/// Port 1's GID table for a host configuration whose device GID is gid0: [0] = gid0 (on
/// plane 0's interface), then each plane's address (an IPv4 one as ::ffff:a.b.c.d) not
/// listed yet, in plane order, each with the index of the interface that holds it (0 when
/// none here does). Only addresses the planes' sockets are bound to: any entry a peer is
/// given as its dgid reaches this device (RoCE v1 entries and the interfaces' other
/// addresses would not).
std::vector<GidEntry> build_gid_table(const io::UdpConfig& u, const ibv_gid& gid0);
/// Whether an address vector's sgid_index names a populated entry of dev's GID table: 0, or
/// the errno the kernel's rdma_get_gid_attr gives a modify_qp / create_ah (ENODATA for an
/// empty entry, EINVAL past kGidTableLen) after logging one line "<what>: grh.sgid_index N:
/// ..." naming the populated entries. `what` names the call and object ("ibv_create_ah").
int check_sgid_index(const Device* dev, unsigned index, const std::string& what);
/// The index of the interface that holds address `a` (IPv4-mapped: the IPv4 address); 0 if none.
uint32_t ifindex_of(const in6_addr& a);
/// The GID of fabric host `host` (kSrv6): see verbs.h "port 1". Its plane-0 address's first
/// 64 bits and the interface id 02:4d:52:43:<host, 32 bits>, so unique per host even where
/// two hosts' addresses share their first 64 bits (a hand-written fabric's locator form).
ibv_gid gid_of_host(const srv6::Fabric& f, uint32_t host);
/// The fabric host a GID names: one whose gid_of_host or one of whose port addresses (any
/// plane) it is, all 16 bytes compared; nullopt if none.
std::optional<uint32_t> fabric_host_of(const srv6::Fabric& f, const ibv_gid& gid);
/// The peer's GID that a QP's tokens are built from (token()): in a fabric (f non-null) the
/// host's canonical gid_of_host, whichever of its names the address vector gave (its GID, a
/// port address of any plane, a LID), since the peer builds its side from its own
/// gid_of_host; outside a fabric the address vector's GID as given.
ibv_gid token_gid(const srv6::Fabric* f, const ibv_ah_attr& ah, uint32_t host);
/// Queues an async event on `ctx` and wakes its async fd.
void post_async(Context* ctx, const ibv_async_event& a);
/// Queues `cq` on its channel and wakes the channel's fd. Under dev->mu.
void notify(Cq* cq);

/// reg_mr(NULL, SIZE_MAX, ON_DEMAND): verbs' implicit on-demand-paging MR, the whole address
/// space (the engine's whole-space MR).
inline bool is_implicit_odp(const void* addr, size_t length, unsigned access) {
  return !addr && length == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND);
}
/// Checks the access flags and range of an MR about to be registered (reg_mr, rereg_mr): 0 and
/// *engine_access (engine::access bits), or an errno with a stderr line naming `verb`.
int mr_access(const char* verb, const void* addr, size_t length, unsigned access,
              unsigned* engine_access);
/// A new ibv_context::cmd_fd (objects.h Context::cmd_fd), or -1 with errno.
int open_cmd_fd();
/// The on-demand paging mrc0 offers (query_device_ex): explicit and implicit, RC.
ibv_odp_caps odp_caps();

/// A UD WR's destination (ud.cc): the AH's peer and its next path, the remote QPN and Q_Key
/// (one with the top bit set: the QP's own, as verbs says), the GRH for a `len`-byte message.
/// 0, or EINVAL (logged, naming `verb`) for a missing AH or one of another PD.
int ud_dest(const char* verb, ibv_qp* qp, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey,
            uint32_t len, engine::UdDest* d);
// ---- Multicast (mcast.cc; docs/verbs-shim.md "Multicast") ---------------------------------
/// ff00::/8, or an IPv4 multicast address (224.0.0.0/4) IPv4-mapped, as RoCE v2 writes it.
bool is_mcast_gid(const ibv_gid& g);
/// Where groups list their member processes: $MRC_MCAST_DIR, else /dev/shm/mrc-mcast-<uid>
/// (/tmp where there is no /dev/shm); one directory per group, one record per member process
/// (mcast_record.h). A directory on a filesystem several machines mount makes groups span them.
std::string mcast_dir();
/// This process's host identity in member records: $MRC_MCAST_HOST_ID, else the kernel's boot
/// id and the pid namespace's inode ("<boot_id>.<inode>": where a pid means the same process),
/// else the hostname.
std::string mcast_host_id();
/// The live member processes of the group `gid` names (mcast_record_liveness; a stale record
/// is removed), each with its peer made once. Not under dev->mu or the engine's lock.
std::vector<McastMember> mcast_members(Device* dev, const ibv_gid& gid);
/// This process as a member: where a SEND to a group without members goes (and is dropped).
McastMember mcast_self(Device* dev);
/// The multicast AHs' member lists for one post, found before the engine's lock is taken
/// (finding them may make peers): ud_fan gives a UD WR's datagrams (SendWr::ud_fan).
class McastFans {
 public:
  /// Finds the members of `ah`'s group if it is a multicast AH (once per AH and post).
  void prepare(Device* dev, ibv_ah* ah);
  /// `d` once per member process of ah's group, each with the member's peer and a path to it;
  /// empty when ah is not multicast or its group has no member (the datagram goes to d's peer:
  /// this process, which drops it).
  std::span<const engine::UdDest> fan(ibv_ah* ah, const engine::UdDest& d);

 private:
  std::map<ibv_ah*, std::vector<McastMember>> members_;
  std::deque<std::vector<engine::UdDest>> out_;  // stable while the post runs
};
/// A destroyed QP's groups: this process's entry goes from those it was the last QP of.
void mcast_forget_qp(Device* dev, const std::set<engine::McastGid>& groups);

/// ibv_modify_qp of a UD QP: state, pkey_index (0), port (1), qkey (needed at INIT), sq_psn
/// (kept for query_qp); anything else EINVAL.
int modify_ud_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask);

/// The driver of a QP's device.
inline io::UdpDriver& qp_driver(ibv_qp* qp) { return *qp_of(qp)->ctx->dev->driver; }
/// A bind of window `mw` to `b` under `new_rkey` from `qp`'s send queue (BIND_MW, ibv_bind_mw):
/// checked (QP type, PDs, the MR's IBV_ACCESS_MW_BIND, access flags), applied, mw->rkey set, its
/// completion queued (Engine::post_local). 0 or an errno, logged naming `verb`. Under the
/// driver's engine call.
int bind_window(engine::Engine& e, const char* verb, ibv_qp* qp, ibv_mw* mw, uint32_t new_rkey,
                const ibv_mw_bind_info& b, uint64_t wr_id, bool signaled);
/// LOCAL_INV of window `rkey` (of qp's PD) from `qp`'s send queue; as bind_window.
int invalidate_window(engine::Engine& e, const char* verb, ibv_qp* qp, uint32_t rkey,
                      uint64_t wr_id, bool signaled);

/// The errno a verb returns for an engine error.
int to_errno(engine::Error e);
/// The engine's state for a verbs QP state; kError for ERR and for SQE, which MRC QPs lack.
engine::QpState to_engine(ibv_qp_state s);
ibv_wc to_wc(const engine::Completion& c);

/// A tag-matching SRQ's CQ (engine id) and tag list size (create_tm_srq).
struct TmSrqInit {
  engine::CqId cq = 0;
  uint32_t max_tags = 0;
};
/// ibv_create_srq's work (srq.cc), for an XRC SRQ too (xrc.xrcd nonzero, `xrcd` its handle)
/// and a tag-matching one (`tm` set: Engine::create_tm_srq).
ibv_srq* make_srq(ibv_pd* pd, ibv_srq_init_attr* a, const engine::XrcSrqInit& xrc, Xrcd* xrcd,
                  const TmSrqInit* tm = nullptr);

/// ibv_post_recv and ibv_post_srq_recv: a chain of receive WRs handed to the engine in one
/// call, as a post is (with_engine_flush: a receive gives the progress thread nothing to do,
/// so it is not woken). A WR with more than `max_sge` SGEs gets `too_many(w)` (it logs and
/// returns an errno); `post(engine, recv_wr)` gives 0 or an errno (logged). The first failure
/// stops the chain and is *bad.
template <class TooMany, class Post>
int post_recv_chain(io::UdpDriver& d, ibv_recv_wr* wr, ibv_recv_wr** bad, uint32_t max_sge,
                    TooMany too_many, Post post) {
  int err = 0;
  d.with_engine_flush([&](engine::Engine& e) {
    Scratch<engine::Sge, engine::kMaxSge> sge_room;  // filled for each WR's num_sge
    engine::Sge* const sges = sge_room.v;
    for (ibv_recv_wr* w = wr; w; w = w->next) {
      if (w->num_sge < 0 || static_cast<uint32_t>(w->num_sge) > max_sge) {
        err = too_many(w);
      } else {
        for (int i = 0; i < w->num_sge; ++i)
          sges[i] = engine::Sge{w->sg_list[i].addr, w->sg_list[i].length, w->sg_list[i].lkey};
        err = post(e, engine::RecvWr{w->wr_id, std::span<const engine::Sge>(sges, w->num_sge)});
      }
      if (err) {
        if (bad) *bad = w;
        break;
      }
    }
    return 0;
  });
  return err;
}

}  // namespace mrc::verbs
