/*
 * mrc_ctl.h - the MRC controller API: device limits, port (plane) admin
 * state, EV format profiles, EV profiles (explicit, generated, DENY), CC
 * profiles (NSCC), EV state-change events, and connectionless EV probes.
 *
 * Follows the OCP MRC 1.0 API (mrc_ctl.h of the OCP Multipath Reliable
 * Connection specification, controller API version 1.0.1). This is libmrc's
 * own declaration of that API: names, types, constants, signatures and
 * structure layouts are the published ones.
 *
 * In libmrc the controller API is backed by the same software engine as
 * mrc.h: a controller takes an mrc_context from mrc_create_context() on the
 * `mrc0` verbs context, and profiles it configures are what QPs name at
 * their INIT transition (MRC_QP_EV_PROFILE_ID, MRC_QP_CC_PROFILE_ID).
 * A "port" is one MRC plane: port N (1-based) is plane N-1.
 *
 * Profiles all follow one life cycle: INIT (exists, unconfigured) ->
 * OFFLINE (configured, not usable) -> ONLINE (usable by QPs) and back.
 * A profile id is any 64-bit number the controller picks; naming one
 * creates it in INIT.
 *
 * Return convention (unless a function says otherwise): 0 on success, -1
 * with errno set on failure. Threading: every function is thread-safe.
 */
#ifndef LIBMRC_MRC_CTL_H
#define LIBMRC_MRC_CTL_H

#include <stdint.h>
#include <infiniband/verbs.h>

#include "mrc.h"
#include "mrc_ctl_api_ver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Size of the opaque vendor_cfg byte arrays. libmrc ignores their content. */
#define MRC_CTL_MAX_VENDOR_CFG_SIZE 128

/* An EV entry with no value yet: the initial content of every slot of an
 * explicit EV profile's array. */
#define MRC_CTL_EV_UNPOPULATED \
	((struct mrc_ctl_ev){ .val = { 0 }, .port = 0 })

/* Largest EV value, in bytes (an SRv6 address plus an SRH segment). */
#define MRC_CTL_EV_MAX_BYTES 32

/* Controller protocol versions, one bit each (see mrc_ctl_device_attr). */
enum mrc_ctl_protocol_version {
	MRC_CTL_PROTOCOL_VERSION_0 = 0,      /* unspecified */
	MRC_CTL_PROTOCOL_VERSION_1 = 1 << 0, /* MRC 1.0 */
};

/* Life-cycle state shared by EV format, EV and CC profiles. */
enum mrc_ctl_profile_state {
	MRC_CTL_PROFILE_INIT,    /* exists, not configured */
	MRC_CTL_PROFILE_OFFLINE, /* configured, not usable by QPs */
	MRC_CTL_PROFILE_ONLINE,  /* usable by QPs */
};

/* ---- Device ---------------------------------------------------------- */

/* Optional controller features (bits of mrc_ctl_device_attr.opt_attr). */
enum mrc_ctl_attr_opt {
	/* EV profiles may be changed while ONLINE (event mask, EV
	 * replacement, fields). */
	MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE = 1 << 0,
	/* CC profiles may be reconfigured while ONLINE. */
	MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE = 1 << 1,
	/* EV state-change events (EV event CQs) are available. */
	MRC_CTL_OPT_CAP_EV_EVENT = 1 << 2,
	/* Explicit EV arrays must be one contiguous range of values starting
	 * at the first EV. */
	MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE = 1 << 3,
	/* mrc_ctl_ev_event.drop_count is an exact count, not a flag. */
	MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT = 1 << 4,
	/* mrc_ctl_ep_batch_send_wait() supports MRC_CTL_EP_OP_EV_PROBE. */
	MRC_CTL_OPT_CAP_EP_OP_EV_PROBE = 1 << 5,
};

/* Controller limits and features of a device. */
struct mrc_ctl_device_attr {
	/* Bitmap of enum mrc_ctl_protocol_version; 0 = provider's choice. */
	uint32_t mrc_ctl_protocol_version;

	struct {
		uint32_t ev_max_fmt_profiles;  /* EV format profiles, at most */
		uint32_t ev_max_profiles;      /* EV profiles, at most */
		uint32_t ev_max_count;         /* EVs over all profiles */
		uint32_t ev_free_count;        /* of which not yet in use */
		uint32_t ev_max_count_profile; /* EVs in one profile, at most */
		uint32_t ev_count_align;       /* ev_count must be a multiple */
		uint32_t ev_max_width;         /* usable bits of an EV value */
		uint32_t ev_fmt_mode_mask;     /* enum mrc_ctl_ev_fmt_mode bits */
		uint32_t ev_mode_mask;         /* enum mrc_ctl_ev_mode bits */
		uint32_t ev_op_max_entries;    /* entries per EV op; 0 = no cap */
	} ev;

	struct {
		uint32_t cc_max_profiles; /* CC profiles, at most */
		/* NULL-terminated names of the CC algorithms; owned by the
		 * library. libmrc offers "uet-1.0-nscc". */
		const char **algorithms;
	} cc;

	/* Bit N set: port N (1-based, plane N-1) belongs to this device. */
	uint32_t phy_port_mask;

	/* Bitmap of enum mrc_ctl_attr_opt. */
	uint32_t opt_attr;
};

#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
/*
 * Reports the controller limits of `context` (a libmrc verbs context),
 * shaped for the API version `mcontext` was created with (NULL: current).
 * *supported is 0 for a verbs context that is not libmrc's (not an error).
 * Returns 0, or -1 with errno.
 */
int mrc_ctl_query_device_ex(struct ibv_context *context,
			    struct mrc_context *mcontext,
			    struct mrc_ctl_device_attr *ctl_attr,
			    int *supported);
#endif
/*
 * The controller API 1.0.0 form of mrc_ctl_query_device_ex(). Fails with
 * EOPNOTSUPP for a verbs context that is not libmrc's. Returns 0, or -1
 * with errno.
 */
int mrc_ctl_query_device(struct ibv_context *context,
			 struct mrc_ctl_device_attr *ctl_attr);

/*
 * Writes the controller API versions libmrc implements (MRC_CTL_API_VER
 * encoding), like mrc_query_version(). Any pointer may be NULL.
 */
void mrc_ctl_query_version(uint32_t *current_version,
			   uint32_t *last_supported_version,
			   uint32_t *vendor_version,
			   uint32_t *last_supported_vendor_version);

/* ---- Ports (planes) --------------------------------------------------- */

/* Administrative state of a port. */
enum mrc_ctl_port_admin_state {
	MRC_CTL_PORT_ADMIN_DISABLED = 0, /* drained: no MRC traffic on it */
	MRC_CTL_PORT_ADMIN_ENABLED = 1,
};

/* Which mrc_ctl_port_attr fields a query or modify touches. */
enum mrc_ctl_port_attr_mask {
	MRC_CTL_PORT_ADMIN_STATE = 1 << 0,
};

/* Controller-settable port attributes. */
struct mrc_ctl_port_attr {
	/* The OCP API has a disabled port read as IBV_PORT_DOWN in
	 * ibv_query_port(); libmrc's mrc0 has one verbs port for all planes,
	 * which stays ACTIVE: a disabled plane shows in mrc_ctl_query_port()
	 * and as IBV_EVENT_PORT_ERR in mrc_get_async_event(). */
	enum mrc_ctl_port_admin_state port_admin_state;
};

/*
 * Reads the admin state of port_num (1-based plane number), as the engine
 * holds it. The plane's address is not in the published attributes: it is
 * the host configuration's (plane 0's is the mrc0 GID).
 * Returns 0, or -1 with errno (EINVAL for a port outside phy_port_mask).
 */
int mrc_ctl_query_port(struct mrc_context *context,
		       uint8_t port_num,
		       struct mrc_ctl_port_attr *attr,
		       int attr_mask);

/*
 * Disables (drains) or enables a plane for every QP of the device, present
 * and future: nothing new is sent on a disabled plane, its EVs keep their
 * state, and packets in flight on it are acknowledged or resent on the
 * other planes (only a QP with no usable EV left anywhere else falls back
 * on it). A change is reported to every context as IBV_EVENT_PORT_ERR /
 * IBV_EVENT_PORT_ACTIVE. Returns 0, or -1 with errno (EINVAL).
 */
int mrc_ctl_modify_port(struct mrc_context *context,
			uint8_t port_num,
			struct mrc_ctl_port_attr *attr,
			int attr_mask);

/* ---- EV format profiles ------------------------------------------------ */

/* Where an EV goes in a packet. */
enum mrc_ctl_ev_fmt_mode {
	/* Structured EV: IPv6 flow label bits plus the UDP source port. */
	MRC_CTL_EV_FMT_MODE_STEV = 1 << 0,
	/* SRv6 uSID destination address (plus an optional one-segment SRH). */
	MRC_CTL_EV_FMT_MODE_SRV6 = 1 << 1,
	/* UDP source port only. */
	MRC_CTL_EV_FMT_MODE_UDP = 1 << 2,
};

/* Operation on the field array of an EV format profile. */
enum mrc_ctl_ev_fmt_op {
	MRC_CTL_EV_FMT_OP_MODIFY_FIELDS,
	MRC_CTL_EV_FMT_OP_QUERY_FIELDS,
};

/* Which mrc_ctl_ev_fmt_profile_attr fields a query or modify touches. */
enum mrc_ctl_ev_fmt_profile_attr_mask {
	MRC_CTL_EV_FMT_PROFILE_STATE = 1 << 0,     /* profile_state */
	MRC_CTL_EV_FMT_PROFILE_CUR_STATE = 1 << 1, /* cur_profile_state */
	MRC_CTL_EV_FMT_PROFILE_MODE = 1 << 2,      /* ev_fmt_mode */
	MRC_CTL_EV_FMT_PROFILE_OP = 1 << 3,        /* ev_fmt_op */
	MRC_CTL_EV_FMT_VENDOR_CFG = (-0x7fffffff - 1), /* bit 31 (INT_MIN) */
};

/* One field of the on-wire EV layout. */
struct mrc_ctl_ev_fmt_field {
	uint8_t width; /* bits */
};

/* An EV format profile: the wire layout EVs are expanded into, as an
 * ordered list of field widths (their sum is the expanded EV width). */
struct mrc_ctl_ev_fmt_profile_attr {
	enum mrc_ctl_profile_state profile_state;     /* state to move to */
	enum mrc_ctl_profile_state cur_profile_state; /* state now (query) */

	enum mrc_ctl_ev_fmt_mode ev_fmt_mode;

	struct {
		enum mrc_ctl_ev_fmt_op op;
		struct mrc_ctl_ev_fmt_field *fmt_fields; /* caller's array */
		int fmt_field_count; /* array length in; fields out */
	} ev_fmt_op;

	/* Opaque provider data. */
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/*
 * Configures an EV format profile and moves it through its life cycle
 * (to OFFLINE needs MODE; to ONLINE needs the fields set with
 * MRC_CTL_EV_FMT_OP_MODIFY_FIELDS). libmrc carries three modes: UDP, at
 * most 16 bits (the UDP source-port selector), on every host; STEV, at most
 * 32 bits (the IPv6 flow label's low 16 bits, then the UDP source-port
 * selector; IPv6 planes), in the direct and ecmp path modes; SRV6, at most
 * 128 bits (a uSID address, no SRH segment), with path_mode srv6 (which has
 * no STEV). Returns 0, or -1 with errno: EINVAL,
 * EBUSY (an ONLINE EV profile uses it), E2BIG (fields the engine cannot
 * carry, e.g. wider than the mode allows), EOPNOTSUPP (mode not carried).
 */
int mrc_ctl_modify_ev_fmt_profile(struct mrc_context *mrc_ctx,
				  uint64_t ev_fmt_profile_id,
				  struct mrc_ctl_ev_fmt_profile_attr *attr,
				  int attr_mask);

/*
 * Reads an EV format profile; with MRC_CTL_EV_FMT_OP_QUERY_FIELDS copies
 * the fields into the caller's array (E2BIG, with the needed count in
 * fmt_field_count, when it is too short). Returns 0, or -1 with errno.
 */
int mrc_ctl_query_ev_fmt_profile(struct mrc_context *mrc_ctx,
				 uint64_t ev_fmt_profile_id,
				 struct mrc_ctl_ev_fmt_profile_attr *attr,
				 int attr_mask);

/* ---- EVs ------------------------------------------------------------- */

/* An EV value, its bits most significant first from val[0]. STEV/UDP: the
 * first 4 bytes (libmrc's UDP EVs: a 16-bit value in val[0..1], the top
 * `width` bits for narrower formats). SRv6: bytes 0..15 are the destination
 * address, bytes 16..31 the SRH segment (if any). In libmrc an EV on port
 * p is engine EV (p - 1) << 16 | value (UDP); an SRv6 EV keeps the spine
 * its first uSID names, the driver addressing each peer itself. */
typedef uint8_t mrc_ctl_ev_t[MRC_CTL_EV_MAX_BYTES];

/* An EV and the port (1-based plane) it leaves from. */
struct mrc_ctl_ev {
	mrc_ctl_ev_t val;
	uint8_t port;
};

/* EV states, one bit each (also used as an event mask). */
enum mrc_ctl_ev_state {
	MRC_CTL_EV_GOOD = 1 << 0,        /* in use */
	MRC_CTL_EV_ASSUMED_BAD = 1 << 1, /* retired by the transport */
	MRC_CTL_EV_DENIED = 1 << 2,      /* forbidden by the controller */
	MRC_CTL_EV_UNKNOWN = (-0x7fffffff - 1), /* bit 31 (INT_MIN) */
};

/* ---- EV profiles -------------------------------------------------------- */

/* Where a profile's EVs come from. */
enum mrc_ctl_ev_mode {
	MRC_CTL_EV_MODE_AUTO = 1 << 0, /* the provider picks them */
	MRC_CTL_EV_MODE_EXP = 1 << 1,  /* the controller lists them */
	MRC_CTL_EV_MODE_GEN = 1 << 2,  /* generated from field rules */
};

/* Operation on the EVs of a profile (ev_op). */
enum mrc_ctl_ev_op {
	MRC_CTL_EV_OP_REPLACE_EV,
	MRC_CTL_EV_OP_MODIFY_EV_STATE,
	MRC_CTL_EV_OP_QUERY_EV_STATE,
	MRC_CTL_EV_OP_QUERY_EV_ARRAY,
};

/* Operation on the generation fields of a profile (ev_fields_op). */
enum mrc_ctl_ev_fields_op {
	MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS,
	MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS,
};

/* Which mrc_ctl_ev_profile_attr fields a query or modify touches. */
enum mrc_ctl_ev_profile_attr_mask {
	MRC_CTL_EV_PROFILE_STATE = 1 << 0,       /* profile_state */
	MRC_CTL_EV_PROFILE_CUR_STATE = 1 << 1,   /* cur_profile_state */
	MRC_CTL_EV_PROFILE_MODE = 1 << 2,        /* ev_mode */
	MRC_CTL_EV_PROFILE_FMT_ID = 1 << 3,      /* ev_fmt_profile_id */
	MRC_CTL_EV_PROFILE_COUNT = 1 << 4,       /* ev_count */
	MRC_CTL_EV_PROFILE_MIN_ACTIVE = 1 << 5,  /* ev_min_active */
	MRC_CTL_EV_PROFILE_EVENT_MASK = 1 << 6,  /* ev_event_mask */
	MRC_CTL_EV_PROFILE_EV_OP = 1 << 7,       /* ev_op */
	MRC_CTL_EV_PROFILE_EV_FIELDS_OP = 1 << 8, /* ev_fields_op */
	MRC_CTL_EV_PROFILE_VENDOR_CFG = (-0x7fffffff - 1), /* bit 31 (INT_MIN) */
};

/* One field of an EV profile: how EV bits expand into a format field.
 * The field starts as init_val; if mask has k bits set, the next k bits of
 * the EV (read most significant first) form a k-bit number whose bits are
 * laid, in order, into the mask's bit positions. */
struct mrc_ctl_ev_field {
	uint32_t width;    /* bits; at most the format field's width */
	uint32_t init_val; /* fixed bits before the EV bits are laid in */
	uint32_t min_val;  /* smallest generated value (generated mode) */
	uint32_t max_val;  /* largest generated value (generated mode) */
	uint32_t mask;     /* where EV bits go; 0 = a fixed field */
};

/* Flags of an EV operation entry. */
enum mrc_ctl_ev_op_flags {
	/* REPLACE_EV: replace every slot holding `ev`, not just one. */
	MRC_CTL_EV_OP_F_ALL_COPIES = 1 << 0,
};

/* One entry of an EV operation. Per op (in = read, out = written):
 *   REPLACE_EV       ev in, ev_new in, state in, flags in
 *   MODIFY_EV_STATE  ev in, state in, flags in
 *   QUERY_EV_STATE   ev in, state out
 *   QUERY_EV_ARRAY   ev out, state out */
struct mrc_ctl_ev_op_entry {
	struct mrc_ctl_ev ev;
	struct mrc_ctl_ev ev_new;
	enum mrc_ctl_ev_state state;
	uint32_t flags; /* enum mrc_ctl_ev_op_flags */
};

/* An EV profile: the set of EVs (paths) QPs of the profile spray over,
 * explicit or generated, expanded through an EV format profile. */
struct mrc_ctl_ev_profile_attr {
	enum mrc_ctl_profile_state profile_state;     /* state to move to */
	enum mrc_ctl_profile_state cur_profile_state; /* state now (query) */

	enum mrc_ctl_ev_mode ev_mode;

	/* EV format profile the EVs are expanded with (not for AUTO). */
	uint64_t ev_fmt_profile_id;

	/* EVs in the profile; a query returns the aligned count in use. */
	uint32_t ev_count;

	/* EVs that must stay usable: the transport stops retiring EVs as
	 * ASSUMED_BAD at this floor. At most ev_count. libmrc spreads it over
	 * the profile's planes as the engine's per-plane floor: a plane with
	 * fewer usable EVs carries proportionally less (bad EVs are still
	 * retired). */
	uint32_t ev_min_active;

	/* enum mrc_ctl_ev_state bits to report as EV events (GOOD and
	 * ASSUMED_BAD; libmrc also takes DENIED, to report denies). */
	int ev_event_mask;

	struct {
		enum mrc_ctl_ev_op op;
		struct mrc_ctl_ev_op_entry *entries; /* caller's array */
		int entry_count; /* array length in; entries out */
	} ev_op;

	struct {
		enum mrc_ctl_ev_fields_op op;
		struct mrc_ctl_ev_field *fields; /* caller's array */
		int field_count; /* array length in; fields out */
	} ev_fields_op;

	/* Opaque provider data. */
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/*
 * Configures an EV profile, moves it through its life cycle, and runs one
 * EV operation (ev_op) or field operation (ev_fields_op), never both.
 * To OFFLINE needs MODE, FMT_ID, COUNT and (generated mode) the fields;
 * MIN_ACTIVE and EVENT_MASK may come with it or later; to ONLINE an explicit
 * profile needs every slot populated with REPLACE_EV. MODIFY_EV_STATE with MRC_CTL_EV_DENIED takes
 * an EV out of use on every QP of the profile at once (DENY); GOOD returns
 * it, after a probe. Entries are applied in order; the first failing one
 * stops the call. REPLACE_EV on an ONLINE profile gives its connected QPs
 * the new EV set (their EV states start over). Fields (MODIFY_FIELDS) follow
 * the expansion rules above; an EXP profile without fields takes its EVs as
 * its format's bits. A GEN profile's ev_count EVs are generated once its
 * mode, format (ONLINE), count and fields are set, spread over the ports
 * (EV i on port i % ports + 1), field 0's value varying fastest from
 * min_val; REPLACE_EV on it is EINVAL, MODIFY_EV_STATE works as on EXP.
 * An AUTO profile's EV array is the device's own EVs (16 bits each, on
 * their port); MODIFY_EV_STATE works on them as on EXP, REPLACE_EV is
 * EINVAL. Returns 0, or -1
 * with errno: EINVAL, E2BIG (array larger than the device allows), ENOENT
 * (EV not in the profile), EBUSY (QPs use the profile and the change needs
 * it OFFLINE), EOPNOTSUPP.
 */
int mrc_ctl_modify_ev_profile(struct mrc_context *mrc_ctx,
			      uint64_t ev_profile_id,
			      struct mrc_ctl_ev_profile_attr *attr,
			      int attr_mask);

/*
 * Reads an EV profile and, with EV_OP or EV_FIELDS_OP, EV states
 * (QUERY_EV_STATE), the whole EV array (QUERY_EV_ARRAY) or the fields
 * (QUERY_FIELDS) into the caller's arrays; E2BIG with the needed count
 * written back when an array is too short. An EV's state is DENIED if
 * denied, else the worst over the profile's connected QPs (ASSUMED_BAD
 * over GOOD), UNKNOWN when no connected QP uses it. A profile id never
 * configured reads as INIT. Returns 0, or -1 with errno.
 */
int mrc_ctl_query_ev_profile(struct mrc_context *mrc_ctx,
			     uint64_t ev_profile_id,
			     struct mrc_ctl_ev_profile_attr *attr,
			     int attr_mask);

/* ---- CC profiles ------------------------------------------------------- */

/* Which mrc_ctl_cc_profile_attr fields a query or modify touches. */
enum mrc_ctl_cc_profile_attr_mask {
	MRC_CTL_CC_PROFILE_STATE = 1 << 0,     /* profile_state */
	MRC_CTL_CC_PROFILE_CUR_STATE = 1 << 1, /* cur_profile_state */
	MRC_CTL_CC_PROFILE_ALGORITHM = 1 << 2, /* algorithm */
	MRC_CTL_CC_PROFILE_CONFIG = 1 << 3,    /* cc_config */
	MRC_CTL_CC_PROFILE_VENDOR_CFG = (-0x7fffffff - 1), /* bit 31 (INT_MIN) */
};

/* A congestion control profile. */
struct mrc_ctl_cc_profile_attr {
	enum mrc_ctl_profile_state profile_state;     /* state to move to */
	enum mrc_ctl_profile_state cur_profile_state; /* state now (query) */

	/* One of mrc_ctl_device_attr.cc.algorithms ("uet-1.0-nscc"), or
	 * NULL for no congestion control: the profile's QPs run without a
	 * window (only the PSN range, MPR, bounds what is in flight); such a
	 * profile takes no CONFIG and goes ONLINE without one. */
	const char *algorithm;

	/* The algorithm's settings: struct mrc_ctl_cc_nscc_cfg for NSCC. */
	const void *cc_config;

	/* Opaque provider data. */
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* NSCC (UET 1.0 congestion control) settings of a CC profile. libmrc's
 * engine takes every field as is (base_rtt 0: measured); it derives the
 * proportional-increase gain from max_cwnd (BDP = max_cwnd / 1.5). */
struct mrc_ctl_cc_nscc_cfg {
	uint8_t disable_qa;               /* non-zero: no quick adapt */
	uint32_t adjust_bytes_threshold;  /* bytes acked between adjustments */
	uint32_t adjust_period_threshold; /* ns between adjustments */
	uint32_t base_rtt;                /* ns, unloaded path RTT */
	float eta;                        /* additive increase, bytes */
	float fi;                         /* fair increase, bytes */
	float fi_scale;                   /* proportional increase scale */
	float gamma;                      /* multiplicative decrease factor */
	float max_md_jump;                /* largest decrease in one step */
	uint32_t max_cwnd;                /* bytes */
	uint8_t qa_gate;                  /* quick adapt gate */
	uint32_t qa_threshold;            /* ns of delay that triggers QA */
	uint32_t target_delay;            /* ns of queueing delay aimed at */
};

/*
 * Configures a CC profile and moves it through its life cycle (to OFFLINE
 * needs ALGORITHM, to ONLINE needs CONFIG unless the algorithm is NULL).
 * CONFIG on an ONLINE profile retunes every QP using it. Returns 0, or -1
 * with errno (EINVAL for an unknown algorithm or out-of-range setting,
 * EBUSY).
 */
int mrc_ctl_modify_cc_profile(struct mrc_context *mrc_ctx,
			      uint64_t cc_profile_id,
			      struct mrc_ctl_cc_profile_attr *attr,
			      int attr_mask);

/*
 * Reads a CC profile. cc_config points at a copy owned by the library,
 * valid until the profile changes. Returns 0, or -1 with errno.
 */
int mrc_ctl_query_cc_profile(struct mrc_context *mrc_ctx,
			     uint64_t cc_profile_id,
			     struct mrc_ctl_cc_profile_attr *attr,
			     int attr_mask);

/* ---- EV events ---------------------------------------------------------- */

/* One EV state change, reported for states in the profile's event mask. */
struct mrc_ctl_ev_event {
	uint64_t profile_id; /* EV profile of the EV */
	struct mrc_ctl_ev ev;
	/* Events lost just before this one (an exact count in libmrc, which
	 * offers MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT). */
	uint32_t drop_count;
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
	/* The new state (API 1.0.1 on; this field changes the size). */
	enum mrc_ctl_ev_state state;
#endif
};

/*
 * Creates an EV event CQ of at least `cqe` events. State changes of the
 * EVs of every EV profile, for the states in that profile's event mask,
 * land there, one per change of the EV's profile-wide state (the worst of
 * the copies the profile's QPs hold: GOOD < ASSUMED_BAD < DENIED), not one
 * per QP copy; when full, new events are
 * counted in the next event's drop_count instead of overrunning. With a
 * `channel`, mrc_req_notify_cq / mrc_get_cq_event work on it as on any CQ.
 * Destroy it with mrc_destroy_cq(). Returns NULL with errno on failure.
 */
struct mrc_cq *mrc_ctl_create_ev_event_cq(struct mrc_context *mrc_ctx,
					  int cqe,
					  void *cq_context,
					  struct mrc_comp_channel *channel,
					  int comp_vector);

/*
 * Takes up to num_entries EV events, oldest first. Returns how many were
 * written (0 when none), or a negative errno value (e.g. -EINVAL) on
 * failure.
 */
int mrc_ctl_poll_ev_event(struct mrc_cq *ev_cq,
			  int num_entries,
			  struct mrc_ctl_ev_event *ev_event);

/* ---- Endpoint requests (probes) ----------------------------------------- */

/* Kind of endpoint request in a batch. */
enum mrc_ctl_ep_op_type {
	MRC_CTL_EP_OP_EV_PROBE,           /* probe one path, measure RTT */
	MRC_CTL_EP_OP_PORT_STATUS_UPDATE, /* tell a peer our port status */
};

/* One endpoint request. */
struct mrc_ctl_ep_req {
	/* Caller's id, echoed in the response; unique among requests that
	 * may still be answered. */
	uint16_t req_id;
	union ibv_gid sgid; /* our address (a RoCE v2 / IPv6 GID) */
	union ibv_gid dgid; /* the peer's address */

	enum mrc_ctl_ev_fmt_mode ev_fmt_mode; /* how req_ev is encoded */
	struct mrc_ctl_ev req_ev;             /* path (EV and port) to use */

	union {
		struct {
			uint32_t port_status; /* bit N: port N (1-based) up */
		} port_status_update;
	} op;
};

/* One endpoint response. */
struct mrc_ctl_ep_rsp {
	uint16_t req_id;      /* of the request answered */
	uint8_t port;         /* port (1-based plane) it arrived on */
	unsigned int rtt;     /* round trip, ns */
	uint8_t adj_svc_time; /* non-zero: rtt excludes the peer's service time */
};

/*
 * Sends num_req requests of one kind without a connection (an EV probe
 * goes out on the given EV and port and the peer's libmrc answers it),
 * then waits up to rsp_timeout ns for the answers. Answers are written to
 * rsp in arrival order and *num_rsp says how many. req_tc is the DSCP of
 * the requests.
 *
 * libmrc: an EV probe is a PROBE to QP 0 on req_ev's path to dgid's host
 * (any host of the fabric, or any address in direct mode: no QP on either
 * side), answered by that host's libmrc on the same path; rtt is the round
 * trip by this host's clock less the peer's service time (from its driver
 * reading the probe to sending the answer, which the answer carries;
 * adj_svc_time 1 when the peer reported one). A dgid that names no
 * reachable host is EINVAL. req_tc (0..63) is the DSCP of the requests
 * (IPV6_TCLASS, or IP_TOS on an IPv4 port, on each). The service time
 * starts at the kernel's receive timestamp of the probe, so it covers the
 * peer's socket queueing too.
 *
 * A PORT_STATUS_UPDATE tells dgid's host which of this host's ports are up
 * (port_status bit N: port N; bit 0 and bits past the device's ports are
 * EINVAL); it goes on req_ev's path, bound to the tokens of a connected QP
 * of this device to that host (none: EINVAL). That host's libmrc then
 * sends no data into the ports said down, on any of its QPs to this host,
 * until an update says they are up, and acknowledges each update: the
 * response's rtt is the round trip, port the one the ack came in on,
 * adj_svc_time 0. An update whose tokens match no QP of the receiver is
 * refused there and not acknowledged.
 *
 * Returns 0 when every request was answered; -1 with errno
 * ETIMEDOUT when some were not (rsp and *num_rsp still hold those that
 * were), or -1 with errno EINVAL, ENOMEM, EOPNOTSUPP, EAGAIN.
 */
int mrc_ctl_ep_batch_send_wait(struct mrc_context *mrc_ctx,
			       uint8_t req_tc,
			       enum mrc_ctl_ep_op_type op_type,
			       struct mrc_ctl_ep_req *req,
			       int num_req,
			       uint32_t rsp_timeout,
			       struct mrc_ctl_ep_rsp *rsp,
			       int *num_rsp);

#ifdef __cplusplus
}
#endif

#endif /* LIBMRC_MRC_CTL_H */
