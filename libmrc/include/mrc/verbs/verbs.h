// The software verbs device: MRC behind libibverbs' own types (<infiniband/verbs.h>, rdma-core
// 44). libmrc lists one device per host configuration (io/config.h), `mrc0`, whose
// ibv_context carries MRC over UDP/IPv6; the LD_PRELOAD shim (verbs-shim/) exports the
// ibv_* symbols over these functions, and the OCP API (api/) takes the same ibv_context.
// Threading: every function is thread-safe (one mutex per device for object tables; the
// datapath is the UdpDriver's, whose progress thread moves data with no app call).
// This is a C boundary: functions return what the verb they implement returns (0 or an errno
// value; NULL with errno set), never throw, and write one line to stderr naming the problem
// when they refuse something. What an app sees (device and port attributes, the GID table,
// objects and operations, how peers, tokens and PSNs are derived at RTR, progress, errors)
// is in docs/verbs-shim.md ("What the device looks like", "How verbs meets MRC").
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "mrc/engine/engine.h"

namespace mrc::io {
struct UdpConfig;
}

namespace mrc::verbs {

// ---- Devices ---------------------------------------------------------------------------
/// What the front end runs on the device's UdpConfig before open_device creates its driver:
/// the verbs shim passes observe::attach_publisher, so mrcctl sees the device. Call before
/// the first open_device; nullptr (the default): the driver has no observer.
void set_driver_observer(void (*attach)(io::UdpConfig& cfg));
/// MRC devices of this process (0 or 1 today); *n set. The array is the caller's to free
/// with free_device_list; the devices live as long as the process. A configuration error
/// is logged once and lists no device.
ibv_device** get_device_list(int* n);
void free_device_list(ibv_device** list);
/// True for a device, context, or any object whose context is one of ours.
bool is_mrc_device(const ibv_device* d);
bool is_mrc_context(const ibv_context* c);
/// The node GUID (as ibv_query_device reports it) of one of our devices, without opening it.
__be64 device_guid(const ibv_device* d);

ibv_context* open_device(ibv_device* d);
int close_device(ibv_context* c);
int query_device(ibv_context* c, ibv_device_attr* attr);
int query_port(ibv_context* c, uint8_t port, ibv_port_attr* attr);
/// Port 1's GID table length (ibv_port_attr.gid_tbl_len): 256, as ConnectX-4 and later RoCE
/// ports report, and every index an address vector's uint8_t sgid_index can name. The
/// populated entries (the device GID, then each plane address: docs/verbs-shim.md "The GID
/// table") are indices 0..n-1; n..255 are empty, as a real port's unused entries are.
inline constexpr int kGidTableLen = 256;
/// ibv_query_gid: an empty entry gives the zero GID and 0, as libibverbs does for the
/// kernel's empty entries; EINVAL (logged) for a port other than 1 or an index past the table.
int query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid);
/// ibv_query_gid_ex: ENODATA for an empty entry (the kernel's answer, which libibverbs passes
/// on); EINVAL for a port other than 1 or an index past the table.
int query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* entry);
/// ibv_query_gid_table: the populated entries only, as the kernel gives them; -EINVAL when
/// max_entries is fewer than those.
ssize_t query_gid_table(ibv_context* c, ibv_gid_entry* entries, size_t max_entries);
int query_pkey(ibv_context* c, uint8_t port, int index, uint16_t* pkey);
/// Answers sysfs reads about our device (ibv_devinfo reads board_id and the like);
/// false when `dir` is not one of ours.
bool read_sysfs(const char* dir, const char* file, char* buf, size_t size, int* result);

// ---- Async events ----------------------------------------------------------------------
int get_async_event(ibv_context* c, ibv_async_event* event);
void ack_async_event(ibv_async_event* event);

// ---- PD, MR ----------------------------------------------------------------------------
ibv_pd* alloc_pd(ibv_context* c);
int dealloc_pd(ibv_pd* pd);
ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
int dereg_mr(ibv_mr* mr);
/// ibv_rereg_mr: the MR's new translation, PD or access, same keys; on bad input
/// IBV_REREG_MR_ERR_INPUT (errno says why) and the MR unchanged.
int rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access);
/// ibv_advise_mr: checks each SGE against its MR, then faults its pages in
/// (MADV_POPULATE_READ/WRITE; PREFETCH_NO_FAULT maps nothing new). Synchronous: FLUSH or not.
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg, uint32_t n);
// ---- Shared receive queues (srq.cc) -----------------------------------------------------
/// ibv_create_srq: max_wr up to kMaxQpWr, max_sge up to engine::kMaxSge; srq_limit is armed
/// by modify_srq (IBV_SRQ_LIMIT; no resizing: EINVAL), then one IBV_EVENT_SRQ_LIMIT_REACHED.
ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr);
int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask);
int query_srq(ibv_srq* srq, ibv_srq_attr* attr);
int destroy_srq(ibv_srq* srq);  // EBUSY while a QP uses it
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
// ---- XRC (xrc.cc; docs/verbs-shim.md "XRC") ----------------------------------------------
/// ibv_open_xrcd: comp_mask FD and OFLAGS; fd -1 with O_CREAT: a domain of its own; else the
/// domain of fd's file in this process (O_CREAT makes it; O_EXCL: EINVAL if it exists).
ibv_xrcd* open_xrcd(ibv_context* c, ibv_xrcd_init_attr* attr);
int close_xrcd(ibv_xrcd* xrcd);  // EBUSY while XRC SRQs or target QPs use the handle
/// ibv_create_srq_ex: IBV_SRQT_BASIC as create_srq; IBV_SRQT_XRC needs a PD, an XRCD and a
/// CQ; IBV_SRQT_TM (tag matching, tm.cc) a PD, a CQ and IBV_SRQ_INIT_ATTR_TM.
ibv_srq* create_srq_ex(ibv_context* c, ibv_srq_init_attr_ex* attr);
// ---- Tag matching (tm.cc; docs/verbs-shim.md "Tag matching") ------------------------------
/// The tag-matching SRQ of ibv_create_srq_ex (IBV_SRQT_TM): tm_cap.max_num_tags 1..kTmMaxTags,
/// max_ops 1..kTmMaxOps; its completions (receives, tag operations) go to attr->cq.
ibv_srq* create_tm_srq(ibv_context* c, ibv_srq_init_attr_ex* attr);
/// ibv_post_srq_ops on a tag-matching SRQ: IBV_WR_TAG_ADD (sets wr->tm.handle), _DEL, _SYNC;
/// flags IBV_OPS_SIGNALED, IBV_OPS_TM_SYNC. The first WR refused is *bad (its errno returned).
int post_srq_ops(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad);
/// ibv_query_device_ex's tm_caps: RC, kTmMaxTags tags, kTmMaxOps operations, engine::kMaxSge
/// SGEs per tag, a rendezvous header of up to kTmMaxRndvHdr bytes.
ibv_tm_caps tm_caps();
inline constexpr uint32_t kTmMaxTags = 1024;
inline constexpr uint32_t kTmMaxOps = 1024;
inline constexpr uint32_t kTmMaxRndvHdr = 64;
int get_srq_num(ibv_srq* srq, uint32_t* srq_num);  // the engine's id: what XRC senders name

/// ibv_alloc_parent_domain: a PD that stands for attr->pd (its MRs and QPs are in it); the
/// allocators are accepted and unused (mrc0 has no provider buffers); thread domains EOPNOTSUPP.
ibv_pd* alloc_parent_domain(ibv_context* c, ibv_parent_domain_init_attr* attr);
/// Whether `fd` is (a dup of) an open mrc0 context's cmd_fd: what ibv_import_device takes.
bool is_cmd_fd(int fd);
/// ibv_import_device / import_pd / import_mr, within the process (mrc0's objects live in it):
/// a new context on mrc0 owning `fd`; new handles on the PD and MR of `handle`. unimport_*
/// free the handle only.
ibv_context* import_device(int fd);
ibv_pd* import_pd(ibv_context* c, uint32_t handle);
void unimport_pd(ibv_pd* pd);
ibv_mr* import_mr(ibv_pd* pd, uint32_t handle);
void unimport_mr(ibv_mr* mr);
/// ibv_query_device_ex: query_device's attributes, phys_port_cnt_ex (1), the ODP caps and
/// tm_caps (tm.cc).
int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size);

// ---- Multicast (mcast.cc; docs/verbs-shim.md "Multicast") ---------------------------------
/// ibv_attach_mcast: the UD QP receives the datagrams sent to the group `gid` names (a
/// multicast GID: ff00::/8, or IPv4 224.0.0.0/4 IPv4-mapped); the lid is not used (RoCE).
/// EINVAL (logged): not a UD QP, not a multicast GID; ENOMEM: max_mcast_grp groups, or
/// max_mcast_qp_attach QPs in the group. Attaching twice is one attachment.
int attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
/// ibv_detach_mcast: ends it; EINVAL (logged) also for a group the QP is not attached to.
int detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);

// ---- Address handles (ud.cc) -------------------------------------------------------------
/// ibv_create_ah: GRH addressing only (the port is RoCE: no GRH is EINVAL); the dgid names the
/// peer as a connected QP's does (verbs.h "peers"), sgid_index a populated entry of the GID
/// table (check_sgid_index: an empty one is ENODATA, one past the table EINVAL).
ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr);
int destroy_ah(ibv_ah* ah);
/// ibv_init_ah_from_wc: the AH that answers a UD receive: dgid = its GRH's sgid, sgid_index
/// the entry its GRH's dgid names; EINVAL without a GRH or for a dgid not in the table.
int init_ah_from_wc(ibv_context* c, uint8_t port, const ibv_wc* wc, const ibv_grh* grh,
                    ibv_ah_attr* attr);
ibv_ah* create_ah_from_wc(ibv_pd* pd, const ibv_wc* wc, const ibv_grh* grh, uint8_t port);

// ---- Memory windows (mw.cc) ------------------------------------------------------------------
/// ibv_alloc_mw: type 1 or 2 (else EINVAL), bound to nothing; ibv_dealloc_mw unbinds and frees.
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);
/// ibv_bind_mw (type 1): binds at once under the next key (ibv_inc_rkey, set in mw->rkey); its
/// completion (IBV_WC_BIND_MW, if signalled) comes after the WRs posted before it.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);

// ---- CQs and completion channels ---------------------------------------------------------
ibv_comp_channel* create_comp_channel(ibv_context* c);
int destroy_comp_channel(ibv_comp_channel* ch);
ibv_cq* create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* ch, int vector);
ibv_cq_ex* create_cq_ex(ibv_context* c, ibv_cq_init_attr_ex* attr);
int destroy_cq(ibv_cq* cq);
/// ibv_resize_cq: 1..kMaxCqe entries, not fewer than the CQ holds now (EINVAL); cq->cqe set.
int resize_cq(ibv_cq* cq, int cqe);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);
int get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context);
void ack_cq_events(ibv_cq* cq, unsigned n);

// ---- QPs -------------------------------------------------------------------------------
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr);
ibv_qp* create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* attr);
int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask);
/// Engine attributes (attr::k* in mask) that replace what modify_qp derives from the verbs
/// ones: how the OCP API sets an MRC QP's EVs, CC profile, rate hints, MPR, timeout (OCP
/// units), retries and WRITE_WITH_IMM limits in the same engine call as its verbs attributes.
struct EngineOverrides {
  engine::QpAttr attr;
  uint32_t mask = 0;
};
/// modify_qp with `o` on top; `verb` names the caller in the error line. Validate, then
/// apply: every attribute is checked (the engine's checks included: Engine::check_modify_qp)
/// before any is applied, so a refused call changes nothing (verbs attributes, state, engine
/// QP) and its error line names the field. EINVAL, or EBUSY for an overridden PSN range that
/// cannot grow while packets are in flight.
int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, const EngineOverrides& o, const char* verb);
int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init);
int destroy_qp(ibv_qp* qp);
/// Every MRC QP is a QP_ex (ibv_wr_* work on any of them).
ibv_qp_ex* qp_to_qp_ex(ibv_qp* qp);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);

/// The MRC token of the direction src -> dst (see the file comment); exposed for tests.
uint32_t token(const ibv_gid& src_gid, uint32_t src_qpn, const ibv_gid& dst_gid,
               uint32_t dst_qpn);

}  // namespace mrc::verbs
