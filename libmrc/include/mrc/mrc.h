/*
 * mrc.h - the MRC application API: contexts, completion queues and channels,
 * QP hints, MRC queue pairs, async events.
 *
 * Follows the OCP MRC 1.0 API (mrc.h of the OCP Multipath Reliable Connection
 * specification, API version 1.0.1). This is libmrc's own declaration of that
 * API: names, types, constants, signatures and structure layouts are the
 * published ones, so programs built against either header work with libmrc.
 *
 * In libmrc, MRC runs in software over UDP/IPv6. The ibv_context an
 * application passes in is one of libmrc's software verbs devices (`mrc0`),
 * opened with ibv_open_device() through the verbs shim or libmrc's own verbs
 * device. Verbs objects (PD, MR) come from that context; MRC objects (CQ, QP,
 * completion channel) come from this API.
 *
 * Return convention (unless a function says otherwise): 0 on success, -1
 * with errno set on failure; functions returning a pointer return NULL with
 * errno set. Threading: every function is thread-safe; data moves on
 * libmrc's progress thread, so no call is needed to make progress.
 */
#ifndef LIBMRC_MRC_H
#define LIBMRC_MRC_H

#include <stdint.h>
#include <infiniband/verbs.h>

#include "mrc_api_ver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Size of the opaque vendor_cfg byte arrays. libmrc ignores their content. */
#define MRC_MAX_VENDOR_CFG_SIZE 128

/* MRC wire protocol versions, one bit each. A device reports the set it
 * speaks (mrc_device_attr.mrc_protocol_version); a QP asks for one bit, or
 * 0 for the device's choice (mrc_qp_init_attr.protocol_version). */
enum mrc_protocol_version {
	MRC_PROTOCOL_VERSION_0 = 0,      /* unspecified: the provider chooses */
	MRC_PROTOCOL_VERSION_1 = 1 << 0, /* MRC 1.0 wire format */
};

/* Opaque handles; libmrc owns the objects behind them. */
struct mrc_context;
struct mrc_qp_hint;
struct mrc_qp;
struct mrc_cq;
struct mrc_comp_channel;

/* Optional device features (bits of mrc_device_attr.cap). */
enum mrc_device_cap {
	/* The responder sends a NACK when it receives a trimmed packet. */
	MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,
	/* MPR (the receive window) can grow and shrink at run time. */
	MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1,
	/* The responder reports its service time so RTT samples exclude it. */
	MRC_DEVICE_CAP_SVC_TIME = 1 << 2,
};

/* What a device offers for MRC (filled by mrc_query_device*). */
struct mrc_device_attr {
	/* Bitmap of enum mrc_protocol_version values spoken; 0 = provider's
	 * choice. */
	uint32_t mrc_protocol_version;

	struct {
		uint16_t max_wimm;      /* largest max_wimm a requester may set */
		uint16_t max_wimm_dest; /* largest max_wimm_dest a responder may set */
	} wimm_attr;

	struct {
		uint8_t max_mpr;        /* largest MPR, units of 128 PSNs */
		uint8_t mpr_resolution; /* MPR granularity, units of 128 PSNs */
	} mpr_attr;

	struct {
		uint32_t max_qp_hint; /* QP hints a context may hold */
	} qp_attr;

	/* Bitmap of enum mrc_device_cap. */
	uint32_t cap;
};

#if MRC_API_VER_USED >= MRC_API_VER(1, 0, 1)
/*
 * Reports whether `context` can carry MRC and its limits, with the answer
 * shaped for the API version `mcontext` was created with. *supported is
 * non-zero for libmrc's devices and 0 for any other verbs context (that is
 * not an error). mcontext may be NULL: the current version is assumed.
 * libmrc reports protocol version 1, max_wimm and max_wimm_dest 4096,
 * max_mpr = the engine's receive window / 128 (128 by default), resolution
 * 1, and cap MRC_DEVICE_CAP_TRIM_NACK (no dynamic MPR, no service time).
 * Returns 0, or -1 with errno (EINVAL for a NULL context/attr/supported).
 */
int mrc_query_device_ex(struct ibv_context *context,
			struct mrc_context *mcontext,
			struct mrc_device_attr *attr,
			int *supported);
#endif
/*
 * The API 1.0.0 form of mrc_query_device_ex(): same answer, 1.0.0 layout.
 * Returns 0, or -1 with errno.
 */
int mrc_query_device(struct ibv_context *context,
		     struct mrc_device_attr *attr,
		     int *supported);

/*
 * Writes the MRC API versions libmrc implements (MRC_API_VER encoding): the
 * current one, the oldest still accepted, and the same two for vendor
 * extensions. Any pointer may be NULL. Needs no context.
 */
void mrc_query_version(uint32_t *current_version,
		       uint32_t *last_supported_version,
		       uint32_t *vendor_version,
		       uint32_t *last_supported_vendor_version);

/* Versions the application was written for. 0 means "not said": libmrc
 * then assumes its current version. */
struct mrc_context_attr {
	uint32_t mrc_api_version_used;        /* MRC_API_VER encoding */
	uint32_t mrc_vendor_api_version_used; /* MRC_API_VER encoding */
};

/*
 * Creates the MRC context on a libmrc verbs context (`mrc0`). The context
 * owns every MRC object made from it; the verbs context must stay open
 * until it is destroyed. context_attr may be NULL (current version). A
 * version below 1.0.0 (the published benchmark passes
 * MRC_PROTOCOL_VERSION_1, i.e. 0.0.1) is taken as 1.0.0, a newer 1.x as
 * 1.0.1; the version picks the mrc_ctl_ev_event layout of the context's EV
 * event CQs. Returns NULL with errno: EINVAL (NULL vcontext), EOPNOTSUPP
 * (not one of libmrc's devices, or an API major above 1).
 */
struct mrc_context *mrc_create_context(struct ibv_context *vcontext,
				       struct mrc_context_attr *context_attr);

/*
 * Destroys an MRC context, and with it any QP, CQ, QP hint and completion
 * channel made from it that the application has not destroyed. The verbs
 * context stays open. Returns 0, or -1 with errno.
 */
int mrc_destroy_context(struct mrc_context *mrc_ctx);

/*
 * Creates a completion channel. It has a real file descriptor (see
 * mrc_get_comp_channel_fd) that becomes readable when an armed CQ bound to
 * it gets a completion. Returns 0 and sets *channel, or -1 with errno.
 */
int mrc_create_comp_channel(struct mrc_context *mrc_ctx,
			    struct mrc_comp_channel **channel);

/*
 * Gives the channel's file descriptor, for poll/epoll. The descriptor stays
 * the channel's; do not close it. Returns 0, or -1 with errno.
 */
int mrc_get_comp_channel_fd(struct mrc_comp_channel *channel, int *fd);

/*
 * Destroys a completion channel; EBUSY while a CQ still uses it.
 * Returns 0, or -1 with errno.
 */
int mrc_destroy_comp_channel(struct mrc_comp_channel *channel);

/*
 * Creates a CQ of at least `cqe` entries. `channel` (may be NULL) receives
 * its completion events; `comp_vector` is accepted and ignored. Returns the
 * CQ, or NULL with errno (EINVAL, ENOMEM).
 */
struct mrc_cq *mrc_create_cq(struct mrc_context *mrc_ctx,
			     int cqe,
			     void *cq_context,
			     struct mrc_comp_channel *channel,
			     int comp_vector);

/*
 * Takes up to num_entries completions, oldest first, as struct ibv_wc
 * (opcodes IBV_WC_RDMA_WRITE and IBV_WC_RECV_RDMA_WITH_IMM). Returns how
 * many were written (fewer than asked means the CQ is now empty), or -1
 * with errno.
 */
int mrc_poll_cq(struct mrc_cq *cq, int num_entries, struct ibv_wc *wc);

/*
 * Destroys a CQ (a regular one or an EV event CQ). EBUSY while a QP uses
 * it, or while CQ events taken from it with mrc_get_cq_event() are not
 * acknowledged. Returns 0, or -1 with errno.
 */
int mrc_destroy_cq(struct mrc_cq *cq);

/* Expected traffic of the QPs sharing a hint. libmrc keeps the numbers
 * (mrc_query_qp_hint returns them) and uses one vendor_cfg layout, the MRC
 * NCCL plugin's CC hint: {uint8_t version = 1; uint8_t rsvd[3]; uint32_t
 * init_rate, min_rate, max_rate;} in host byte order, rates in Mbit/s, 0 =
 * not given. At RTR each rate becomes an NSCC window of rate x base RTT
 * (the CC profile's base_rtt, else the host config's, else where the
 * engine's learned base RTT starts: 12 us plus the driver's GSO burst at
 * the port rate, at least min_base_rtt_us): the
 * starting window, the floor and the ceiling of the QPs of the hint. */
struct mrc_qp_hint_attr {
	/* QPs of this hint sending to the same destination address at once. */
	int num_qps_per_peer;
	/* Distinct destination addresses the hint's QPs send to at once. */
	int num_send_peers;
	/* Remote QPs sending to the same destination as this QP (incast). */
	int num_remote_recv_peers;
	/* Opaque provider data. */
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* Which mrc_qp_hint_attr fields a query or modify touches. */
enum mrc_qp_hint_attr_mask {
	MRC_QP_HINT_NUM_QPS_PER_PEER = 1 << 0,
	MRC_QP_HINT_NUM_SEND_PEERS = 1 << 1,
	MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = 1 << 2,
	MRC_QP_HINT_VENDOR_CFG = (-0x7fffffff - 1), /* bit 31 (INT_MIN) */
};

/* Creation attributes of a QP hint. */
struct mrc_qp_hint_init_attr {
	struct mrc_qp_hint_attr attr;
};

/*
 * Creates a QP hint: a description of how a group of QPs will be used,
 * given to QPs at the INIT transition (MRC_QP_HINT). Returns the hint, or
 * NULL with errno (EINVAL, ENOMEM when max_qp_hint is reached).
 */
struct mrc_qp_hint *mrc_create_qp_hint(struct mrc_context *mrc_ctx,
				       struct mrc_qp_hint_init_attr *init_attr);

/*
 * Destroys a QP hint. Returns 0, or -1 with errno: EINVAL for a bad
 * handle, EBUSY while a QP still refers to it.
 */
int mrc_destroy_qp_hint(struct mrc_qp_hint *qp_hint);

/*
 * Reads the hint fields selected by qp_hint_attr_mask
 * (enum mrc_qp_hint_attr_mask). Returns 0, or -1 with errno EINVAL.
 */
int mrc_query_qp_hint(struct mrc_qp_hint *qp_hint,
		      struct mrc_qp_hint_attr *qp_hint_attr,
		      int qp_hint_attr_mask);

/*
 * Changes the hint fields selected by qp_hint_attr_mask; QPs using the hint
 * see the new values. Returns 0, or -1 with errno EINVAL.
 */
int mrc_modify_qp_hint(struct mrc_qp_hint *qp_hint,
		       struct mrc_qp_hint_attr *qp_hint_attr,
		       int qp_hint_attr_mask);

/* Creation attributes of an MRC QP (an RC-like QP of the MRC transport). */
struct mrc_qp_init_attr {
	void *qp_context;        /* returned in async events' QP, untouched */
	struct mrc_cq *send_cq;  /* completions of posted writes */
	struct mrc_cq *recv_cq;  /* completions of received WRITE_WITH_IMM */
	struct ibv_qp_cap cap;   /* queue depths and SGE limits (in/out) */
	int sq_sig_all;          /* non-zero: every send completes on send_cq */
	struct ibv_pd *pd;       /* PD of the mrc0 verbs context */
	/* enum ibv_qp_create_send_ops_flags; only RDMA_WRITE and
	 * RDMA_WRITE_WITH_IMM may be set (0 means both). */
	uint64_t send_ops_flags;
	/* Wire protocol version to speak; 0 = the device's choice. */
	enum mrc_protocol_version protocol_version;
};

/*
 * Creates an MRC QP in the RESET state; cap is written back with what was
 * granted, send_ops_flags 0 with both writes, protocol_version 0 with
 * MRC_PROTOCOL_VERSION_1. Returns the QP, or NULL with errno (logged):
 * EINVAL for missing CQs/PD, CQs of another context or EV event CQs, a PD
 * of another verbs context, send_ops_flags asking for anything other than
 * RDMA WRITE / WRITE_WITH_IMM, an unknown protocol version, or caps above
 * the device's; ENOMEM when out of resources.
 */
struct mrc_qp *mrc_create_qp(struct mrc_context *mrc_ctx,
			     struct mrc_qp_init_attr *mrc_qp_attr);

/*
 * Destroys a QP; outstanding work is flushed and dropped.
 * Returns 0, or -1 with errno.
 */
int mrc_destroy_qp(struct mrc_qp *qp);

/* Which mrc_qp_attr fields mrc_modify_qp / mrc_query_qp touch.
 *
 * The OCP API names these as needed per transition:
 *   RESET->INIT  MRC_QP_HINT, MRC_QP_EV_PROFILE_ID, MRC_QP_CC_PROFILE_ID
 *   INIT->RTR    MRC_QP_MAX_WIMM_DEST, MRC_QP_MPR_DEST (MRC_QP_CAP optional)
 *   RTR->RTS     MRC_QP_MAX_WIMM, MRC_QP_MPR, MRC_QP_RETRY_CNT, MRC_QP_TIMEOUT
 * libmrc requires none of them (the published examples send none) and
 * takes each at any transition up to the one that needs it, and the RTS
 * ones again on RTS->RTS. The hint and the profiles are taken only up to
 * RTR (RESET->INIT, INIT->INIT, INIT->RTR). Defaults for what is never set:
 * mpr and mpr_dest 8 (1024 PSNs), max_wimm and max_wimm_dest 4096, timeout
 * 16 (67.1 ms), retry 7 linear then 5 doubling (about 8.9 s in all): the
 * connection policy the verbs device and the NCCL plugin use too; no
 * hint; no EV profile: the device's own EVs (4 per plane); no CC profile:
 * NSCC from the host configuration. */
enum mrc_qp_attr_mask {
	MRC_QP_MAX_WIMM = 1 << 0,      /* wimm.max_wimm */
	MRC_QP_MAX_WIMM_DEST = 1 << 1, /* wimm.max_wimm_dest */
	MRC_QP_MPR = 1 << 2,           /* mpr.mpr */
	MRC_QP_MPR_DEST = 1 << 3,      /* mpr.mpr_dest */
	MRC_QP_TIMEOUT = 1 << 4,       /* timeout */
	MRC_QP_EV_PROFILE_ID = 1 << 5, /* profile.ev_profile_id */
	MRC_QP_CC_PROFILE_ID = 1 << 6, /* profile.cc_profile_id */
	MRC_QP_HINT = 1 << 7,          /* qp_hint */
	MRC_QP_RETRY_CNT = 1 << 8,     /* retry.linear_cnt and retry.exp_cnt */
	MRC_QP_CAP = 1 << 9,           /* cap */
	MRC_QP_VENDOR_CFG = (-0x7fffffff - 1), /* vendor_cfg; bit 31 (INT_MIN) */
};

/* Per-QP feature switches (bits of mrc_qp_attr.cap). */
enum mrc_qp_cap {
	/* The peer cannot send trim NACKs: do not expect them. */
	MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 0,
	/* Use dynamic MPR (takes effect only if both ends enable it). */
	MRC_QP_CAP_DYNAMIC_MPR = 1 << 1,
	/* The peer does not report service time: use raw RTT samples. */
	MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2,
};

/* MRC-specific QP attributes, set with mrc_modify_qp, read with
 * mrc_query_qp; each field is selected by one enum mrc_qp_attr_mask bit. */
struct mrc_qp_attr {
	struct {
		uint8_t mpr;      /* requester window, units of 128 PSNs */
		uint8_t mpr_dest; /* responder window, units of 128 PSNs */
	} mpr;

	/* WRITE_WITH_IMMs in flight, 1..4096. As requester: posted and not
	 * yet complete; mrc_post_send refuses one more with ENOMEM. As
	 * responder: held at once (arrived, receive not yet completed); a
	 * peer that sends more fails the QP (the peer's WR completes with
	 * IBV_WC_REM_INV_REQ_ERR). Keep max_wimm <= the peer's max_wimm_dest.
	 * (A WRITE_WITH_IMM that finds no receive posted is resent after a
	 * pause.) */
	struct {
		uint16_t max_wimm;      /* WRITE_WITH_IMMs in flight as requester */
		uint16_t max_wimm_dest; /* WRITE_WITH_IMMs accepted as responder */
	} wimm;

	/* Retransmission timeout 1.024 us * 2^timeout; at most 24 (17.17 s);
	 * 0 is taken as 1. */
	uint8_t timeout;

	/* Profiles set up by the controller (mrc_ctl.h) and learned out of
	 * band; they choose the QP's entropy values and congestion control. */
	struct {
		uint64_t ev_profile_id;
		uint64_t cc_profile_id;
	} profile;

	struct {
		uint8_t linear_cnt; /* retries at a fixed interval, at most 7 */
		uint8_t exp_cnt;    /* then with doubling interval, at most 25;
				     * 25 = retry forever */
	} retry;

	/* Hint the QP belongs to; NULL for none. */
	struct mrc_qp_hint *qp_hint;

	/* Bitmap of enum mrc_qp_cap. libmrc refuses MRC_QP_CAP_DYNAMIC_MPR
	 * (EINVAL) and keeps the two opt-outs. */
	uint32_t cap;

	/* Opaque provider data, kept and returned. */
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/*
 * Reads a QP: verbs attributes selected by vattr_mask (IBV_QP_*) into
 * vattr, MRC attributes selected by mrc_attr_mask into mrc_attr, and the
 * creation attributes into init_attr. Any output may be NULL if its mask is
 * 0. Works in every state. Returns 0, or -1 with errno.
 */
int mrc_query_qp(struct mrc_qp *qp,
		 struct ibv_qp_attr *vattr,
		 int vattr_mask,
		 struct mrc_qp_attr *mrc_attr,
		 int mrc_attr_mask,
		 struct mrc_qp_init_attr *init_attr);

/*
 * Changes a QP's state and attributes, verbs-style: the IBV_QP_* bits of
 * vattr_mask select fields of vattr (state, PSNs, path MTU, address vector
 * naming the peer's GID, destination QPN, access flags), the
 * enum mrc_qp_attr_mask bits select fields of mrc_attr. The source GID is
 * the mrc0 device's. Timeout and retries come from MRC_QP_TIMEOUT and
 * MRC_QP_RETRY_CNT; IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT and the other verbs
 * attributes MRC has no use for (port, RNR, RD atomic, alternate path) are
 * ignored. mrc_attr may be NULL when mrc_attr_mask is 0. An explicit EV
 * profile gives the QP its EVs at RTR (one engine path per EV, its port's
 * plane); the CC profile (and the hint's CC rates) its NSCC window.
 * Returns 0, or -1 with errno (EINVAL for a bad transition or value,
 * ENOENT for an unknown or offline EV/CC profile, EBUSY when MPR grows
 * while packets are in flight).
 */
int mrc_modify_qp(struct mrc_qp *qp,
		  struct ibv_qp_attr *vattr,
		  int vattr_mask,
		  struct mrc_qp_attr *mrc_attr,
		  int mrc_attr_mask);

/* Writes the QP number into *qpn. Returns 0, or -1 with errno. */
int mrc_get_qpn(struct mrc_qp *qp, uint32_t *qpn);

/*
 * Posts receives, which WRITE_WITH_IMM from the peer consume (MRC has no
 * receiver-not-ready: post them before the peer writes). A receive may have
 * no SGE. Allowed from INIT on. Returns 0, or -1 with errno and *bad_wr set
 * to the first request not posted.
 */
int mrc_post_recv(struct mrc_qp *qp,
		  struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);

/*
 * Posts a chain of RDMA WRITE / WRITE_WITH_IMM requests (RTS only). Any
 * other opcode (SEND, READ, atomics) is refused with EINVAL and a log line;
 * the requests before it in the chain are posted.
 * The message is sprayed over the QP's entropy values; the write completes
 * once all of it is acknowledged. Returns 0, or -1 with errno and *bad_wr
 * set to the first request not posted.
 */
int mrc_post_send(struct mrc_qp *qp,
		  struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr);

/* An asynchronous event: which object it is about, and what happened. */
struct mrc_async_event {
	union {
		struct mrc_cq *cq;
		struct mrc_qp *qp;
		int port_num;
	} element;
	enum ibv_event_type event_type;
};

/*
 * Waits for the next asynchronous event of the context and writes it to
 * *event; every event must be acknowledged with mrc_ack_async_event().
 * libmrc reports IBV_EVENT_QP_FATAL (element.qp: a QP of this context went
 * to error), IBV_EVENT_CQ_ERR (element.cq: a CQ overran) and, to every
 * context, IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE (element.port_num)
 * when mrc_ctl_modify_port disables / enables a port. The API gives no
 * descriptor to wait on: the call blocks until an event comes.
 * Returns 0, or -1 with errno.
 */
int mrc_get_async_event(struct mrc_context *mrc_ctx,
			struct mrc_async_event *event);

/* Acknowledges an event from mrc_get_async_event(). */
void mrc_ack_async_event(struct mrc_async_event *event);

/*
 * Arms the CQ: the next completion (solicited_only is accepted and
 * treated as 0) queues one event on the CQ's channel. Returns 0, or -1
 * with errno.
 */
int mrc_req_notify_cq(struct mrc_cq *cq, int solicited_only);

/*
 * Takes the next CQ event from a channel, blocking unless the channel's
 * descriptor is non-blocking (then EAGAIN). Sets *cq and *cq_context.
 * Returns 0, or -1 with errno.
 */
int mrc_get_cq_event(struct mrc_comp_channel *channel,
		     struct mrc_cq **cq,
		     void **cq_context);

/*
 * Acknowledges nevents events taken from this CQ; mrc_destroy_cq() refuses
 * (EBUSY) while a taken event is not acknowledged.
 */
void mrc_ack_cq_events(struct mrc_cq *cq, unsigned int nevents);

#ifdef __cplusplus
}
#endif

#endif /* LIBMRC_MRC_H */
