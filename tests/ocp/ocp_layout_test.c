/*
 * ocp_layout_test.c - checks, at compile time, that libmrc's OCP MRC headers
 * (mrc/mrc.h, mrc/mrc_ctl.h and their version headers) are binary compatible
 * with the published OCP MRC 1.0 API headers (API and controller API 1.0.1):
 * every structure's size, alignment and member offsets and sizes, every enum
 * constant and enum type, every macro value, and every function's type.
 *
 * The numbers were measured by compiling the published headers (x86-64
 * Linux, gcc 12 and clang 14, C11, rdma-core 44 verbs.h). A mismatch fails
 * the build; at run time the test only checks MRC_CTL_EV_UNPOPULATED and
 * exits 0 without printing anything.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <mrc/mrc.h>
#include <mrc/mrc_ctl.h>

/* The numbers below are for LP64 (x86-64, aarch64). */
_Static_assert(sizeof(void *) == 8 && sizeof(long) == 8, "LP64 only");

#define MEMBER_SIZE(type, member) sizeof(((type *)0)->member)

/* Size and alignment of a structure. */
#define CHECK_STRUCT(type, size, align)                                   \
	_Static_assert(sizeof(type) == (size), "sizeof(" #type ")");       \
	_Static_assert(_Alignof(type) == (align), "_Alignof(" #type ")")

/* Offset and size of a member (nested members use a.b). */
#define CHECK_MEMBER(type, member, offset, size)                          \
	_Static_assert(offsetof(type, member) == (offset),                 \
		       "offsetof(" #type ", " #member ")");                \
	_Static_assert(MEMBER_SIZE(type, member) == (size),                \
		       "sizeof(" #type "." #member ")")

/* Value of a constant. */
#define CHECK_VALUE(name, value) \
	_Static_assert((long long)(name) == (value), #name)

/* An enum type: its size and whether its compatible integer type is
 * signed (-1: int) or unsigned (1: unsigned int). */
#define CHECK_ENUM(type, size, sign)                                      \
	_Static_assert(sizeof(type) == (size), "sizeof(" #type ")");       \
	_Static_assert(_Generic((type)0, int: -1, unsigned int: 1, default: 0) \
		       == (sign), "signedness of " #type)

/* A function's type, parameter for parameter. */
#define CHECK_FUNCTION(name, type) \
	_Static_assert(_Generic(&name, type: 1, default: 0), "type of " #name)


/* mrc_ctl_ev_t */
_Static_assert(sizeof(mrc_ctl_ev_t) == 32, "sizeof(mrc_ctl_ev_t)");
_Static_assert(_Alignof(mrc_ctl_ev_t) == 1, "_Alignof(mrc_ctl_ev_t)");

/* struct mrc_device_attr */
CHECK_STRUCT(struct mrc_device_attr, 20, 4);
CHECK_MEMBER(struct mrc_device_attr, mrc_protocol_version, 0, 4);
CHECK_MEMBER(struct mrc_device_attr, wimm_attr, 4, 4);
CHECK_MEMBER(struct mrc_device_attr, wimm_attr.max_wimm, 4, 2);
CHECK_MEMBER(struct mrc_device_attr, wimm_attr.max_wimm_dest, 6, 2);
CHECK_MEMBER(struct mrc_device_attr, mpr_attr, 8, 2);
CHECK_MEMBER(struct mrc_device_attr, mpr_attr.max_mpr, 8, 1);
CHECK_MEMBER(struct mrc_device_attr, mpr_attr.mpr_resolution, 9, 1);
CHECK_MEMBER(struct mrc_device_attr, qp_attr, 12, 4);
CHECK_MEMBER(struct mrc_device_attr, qp_attr.max_qp_hint, 12, 4);
CHECK_MEMBER(struct mrc_device_attr, cap, 16, 4);

/* struct mrc_context_attr */
CHECK_STRUCT(struct mrc_context_attr, 8, 4);
CHECK_MEMBER(struct mrc_context_attr, mrc_api_version_used, 0, 4);
CHECK_MEMBER(struct mrc_context_attr, mrc_vendor_api_version_used, 4, 4);

/* struct mrc_qp_hint_attr */
CHECK_STRUCT(struct mrc_qp_hint_attr, 140, 4);
CHECK_MEMBER(struct mrc_qp_hint_attr, num_qps_per_peer, 0, 4);
CHECK_MEMBER(struct mrc_qp_hint_attr, num_send_peers, 4, 4);
CHECK_MEMBER(struct mrc_qp_hint_attr, num_remote_recv_peers, 8, 4);
CHECK_MEMBER(struct mrc_qp_hint_attr, vendor_cfg, 12, 128);

/* struct mrc_qp_hint_init_attr */
CHECK_STRUCT(struct mrc_qp_hint_init_attr, 140, 4);
CHECK_MEMBER(struct mrc_qp_hint_init_attr, attr, 0, 140);

/* struct mrc_qp_init_attr */
CHECK_STRUCT(struct mrc_qp_init_attr, 72, 8);
CHECK_MEMBER(struct mrc_qp_init_attr, qp_context, 0, 8);
CHECK_MEMBER(struct mrc_qp_init_attr, send_cq, 8, 8);
CHECK_MEMBER(struct mrc_qp_init_attr, recv_cq, 16, 8);
CHECK_MEMBER(struct mrc_qp_init_attr, cap, 24, 20);
CHECK_MEMBER(struct mrc_qp_init_attr, sq_sig_all, 44, 4);
CHECK_MEMBER(struct mrc_qp_init_attr, pd, 48, 8);
CHECK_MEMBER(struct mrc_qp_init_attr, send_ops_flags, 56, 8);
CHECK_MEMBER(struct mrc_qp_init_attr, protocol_version, 64, 4);

/* struct mrc_qp_attr */
CHECK_STRUCT(struct mrc_qp_attr, 176, 8);
CHECK_MEMBER(struct mrc_qp_attr, mpr, 0, 2);
CHECK_MEMBER(struct mrc_qp_attr, mpr.mpr, 0, 1);
CHECK_MEMBER(struct mrc_qp_attr, mpr.mpr_dest, 1, 1);
CHECK_MEMBER(struct mrc_qp_attr, wimm, 2, 4);
CHECK_MEMBER(struct mrc_qp_attr, wimm.max_wimm, 2, 2);
CHECK_MEMBER(struct mrc_qp_attr, wimm.max_wimm_dest, 4, 2);
CHECK_MEMBER(struct mrc_qp_attr, timeout, 6, 1);
CHECK_MEMBER(struct mrc_qp_attr, profile, 8, 16);
CHECK_MEMBER(struct mrc_qp_attr, profile.ev_profile_id, 8, 8);
CHECK_MEMBER(struct mrc_qp_attr, profile.cc_profile_id, 16, 8);
CHECK_MEMBER(struct mrc_qp_attr, retry, 24, 2);
CHECK_MEMBER(struct mrc_qp_attr, retry.linear_cnt, 24, 1);
CHECK_MEMBER(struct mrc_qp_attr, retry.exp_cnt, 25, 1);
CHECK_MEMBER(struct mrc_qp_attr, qp_hint, 32, 8);
CHECK_MEMBER(struct mrc_qp_attr, cap, 40, 4);
CHECK_MEMBER(struct mrc_qp_attr, vendor_cfg, 44, 128);

/* struct mrc_async_event */
CHECK_STRUCT(struct mrc_async_event, 16, 8);
CHECK_MEMBER(struct mrc_async_event, element, 0, 8);
CHECK_MEMBER(struct mrc_async_event, element.cq, 0, 8);
CHECK_MEMBER(struct mrc_async_event, element.qp, 0, 8);
CHECK_MEMBER(struct mrc_async_event, element.port_num, 0, 4);
CHECK_MEMBER(struct mrc_async_event, event_type, 8, 4);

/* struct mrc_ctl_device_attr */
CHECK_STRUCT(struct mrc_ctl_device_attr, 72, 8);
CHECK_MEMBER(struct mrc_ctl_device_attr, mrc_ctl_protocol_version, 0, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev, 4, 40);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_max_fmt_profiles, 4, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_max_profiles, 8, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_max_count, 12, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_free_count, 16, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_max_count_profile, 20, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_count_align, 24, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_max_width, 28, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_fmt_mode_mask, 32, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_mode_mask, 36, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, ev.ev_op_max_entries, 40, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, cc, 48, 16);
CHECK_MEMBER(struct mrc_ctl_device_attr, cc.cc_max_profiles, 48, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, cc.algorithms, 56, 8);
CHECK_MEMBER(struct mrc_ctl_device_attr, phy_port_mask, 64, 4);
CHECK_MEMBER(struct mrc_ctl_device_attr, opt_attr, 68, 4);

/* struct mrc_ctl_port_attr */
CHECK_STRUCT(struct mrc_ctl_port_attr, 4, 4);
CHECK_MEMBER(struct mrc_ctl_port_attr, port_admin_state, 0, 4);

/* struct mrc_ctl_ev_fmt_field */
CHECK_STRUCT(struct mrc_ctl_ev_fmt_field, 1, 1);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_field, width, 0, 1);

/* struct mrc_ctl_ev_fmt_profile_attr */
CHECK_STRUCT(struct mrc_ctl_ev_fmt_profile_attr, 168, 8);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, profile_state, 0, 4);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, cur_profile_state, 4, 4);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_mode, 8, 4);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_op, 16, 24);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_op.op, 16, 4);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_op.fmt_fields, 24, 8);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_op.fmt_field_count, 32, 4);
CHECK_MEMBER(struct mrc_ctl_ev_fmt_profile_attr, vendor_cfg, 40, 128);

/* struct mrc_ctl_ev */
CHECK_STRUCT(struct mrc_ctl_ev, 33, 1);
CHECK_MEMBER(struct mrc_ctl_ev, val, 0, 32);
CHECK_MEMBER(struct mrc_ctl_ev, port, 32, 1);

/* struct mrc_ctl_ev_field */
CHECK_STRUCT(struct mrc_ctl_ev_field, 20, 4);
CHECK_MEMBER(struct mrc_ctl_ev_field, width, 0, 4);
CHECK_MEMBER(struct mrc_ctl_ev_field, init_val, 4, 4);
CHECK_MEMBER(struct mrc_ctl_ev_field, min_val, 8, 4);
CHECK_MEMBER(struct mrc_ctl_ev_field, max_val, 12, 4);
CHECK_MEMBER(struct mrc_ctl_ev_field, mask, 16, 4);

/* struct mrc_ctl_ev_op_entry */
CHECK_STRUCT(struct mrc_ctl_ev_op_entry, 76, 4);
CHECK_MEMBER(struct mrc_ctl_ev_op_entry, ev, 0, 33);
CHECK_MEMBER(struct mrc_ctl_ev_op_entry, ev_new, 33, 33);
CHECK_MEMBER(struct mrc_ctl_ev_op_entry, state, 68, 4);
CHECK_MEMBER(struct mrc_ctl_ev_op_entry, flags, 72, 4);

/* struct mrc_ctl_ev_profile_attr */
CHECK_STRUCT(struct mrc_ctl_ev_profile_attr, 216, 8);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, profile_state, 0, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, cur_profile_state, 4, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_mode, 8, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_fmt_profile_id, 16, 8);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_count, 24, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_min_active, 28, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_event_mask, 32, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_op, 40, 24);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_op.op, 40, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_op.entries, 48, 8);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_op.entry_count, 56, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_fields_op, 64, 24);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_fields_op.op, 64, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_fields_op.fields, 72, 8);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, ev_fields_op.field_count, 80, 4);
CHECK_MEMBER(struct mrc_ctl_ev_profile_attr, vendor_cfg, 88, 128);

/* struct mrc_ctl_cc_profile_attr */
CHECK_STRUCT(struct mrc_ctl_cc_profile_attr, 152, 8);
CHECK_MEMBER(struct mrc_ctl_cc_profile_attr, profile_state, 0, 4);
CHECK_MEMBER(struct mrc_ctl_cc_profile_attr, cur_profile_state, 4, 4);
CHECK_MEMBER(struct mrc_ctl_cc_profile_attr, algorithm, 8, 8);
CHECK_MEMBER(struct mrc_ctl_cc_profile_attr, cc_config, 16, 8);
CHECK_MEMBER(struct mrc_ctl_cc_profile_attr, vendor_cfg, 24, 128);

/* struct mrc_ctl_cc_nscc_cfg */
CHECK_STRUCT(struct mrc_ctl_cc_nscc_cfg, 52, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, disable_qa, 0, 1);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, adjust_bytes_threshold, 4, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, adjust_period_threshold, 8, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, base_rtt, 12, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, eta, 16, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, fi, 20, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, fi_scale, 24, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, gamma, 28, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, max_md_jump, 32, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, max_cwnd, 36, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, qa_gate, 40, 1);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, qa_threshold, 44, 4);
CHECK_MEMBER(struct mrc_ctl_cc_nscc_cfg, target_delay, 48, 4);

/* struct mrc_ctl_ev_event */
CHECK_STRUCT(struct mrc_ctl_ev_event, 56, 8);
CHECK_MEMBER(struct mrc_ctl_ev_event, profile_id, 0, 8);
CHECK_MEMBER(struct mrc_ctl_ev_event, ev, 8, 33);
CHECK_MEMBER(struct mrc_ctl_ev_event, drop_count, 44, 4);
CHECK_MEMBER(struct mrc_ctl_ev_event, state, 48, 4);

/* struct mrc_ctl_ep_req */
CHECK_STRUCT(struct mrc_ctl_ep_req, 88, 8);
CHECK_MEMBER(struct mrc_ctl_ep_req, req_id, 0, 2);
CHECK_MEMBER(struct mrc_ctl_ep_req, sgid, 8, 16);
CHECK_MEMBER(struct mrc_ctl_ep_req, dgid, 24, 16);
CHECK_MEMBER(struct mrc_ctl_ep_req, ev_fmt_mode, 40, 4);
CHECK_MEMBER(struct mrc_ctl_ep_req, req_ev, 44, 33);
CHECK_MEMBER(struct mrc_ctl_ep_req, op, 80, 4);
CHECK_MEMBER(struct mrc_ctl_ep_req, op.port_status_update, 80, 4);
CHECK_MEMBER(struct mrc_ctl_ep_req, op.port_status_update.port_status, 80, 4);

/* struct mrc_ctl_ep_rsp */
CHECK_STRUCT(struct mrc_ctl_ep_rsp, 12, 4);
CHECK_MEMBER(struct mrc_ctl_ep_rsp, req_id, 0, 2);
CHECK_MEMBER(struct mrc_ctl_ep_rsp, port, 2, 1);
CHECK_MEMBER(struct mrc_ctl_ep_rsp, rtt, 4, 4);
CHECK_MEMBER(struct mrc_ctl_ep_rsp, adj_svc_time, 8, 1);

/* enum mrc_protocol_version */
CHECK_ENUM(enum mrc_protocol_version, 4, 1);
CHECK_VALUE(MRC_PROTOCOL_VERSION_0, 0);
CHECK_VALUE(MRC_PROTOCOL_VERSION_1, 1);

/* enum mrc_device_cap */
CHECK_ENUM(enum mrc_device_cap, 4, 1);
CHECK_VALUE(MRC_DEVICE_CAP_TRIM_NACK, 1);
CHECK_VALUE(MRC_DEVICE_CAP_DYNAMIC_MPR, 2);
CHECK_VALUE(MRC_DEVICE_CAP_SVC_TIME, 4);

/* enum mrc_qp_hint_attr_mask */
CHECK_ENUM(enum mrc_qp_hint_attr_mask, 4, -1);
CHECK_VALUE(MRC_QP_HINT_NUM_QPS_PER_PEER, 1);
CHECK_VALUE(MRC_QP_HINT_NUM_SEND_PEERS, 2);
CHECK_VALUE(MRC_QP_HINT_NUM_REMOTE_RECV_PEERS, 4);
CHECK_VALUE(MRC_QP_HINT_VENDOR_CFG, (-0x7fffffffLL - 1));

/* enum mrc_qp_attr_mask */
CHECK_ENUM(enum mrc_qp_attr_mask, 4, -1);
CHECK_VALUE(MRC_QP_MAX_WIMM, 1);
CHECK_VALUE(MRC_QP_MAX_WIMM_DEST, 2);
CHECK_VALUE(MRC_QP_MPR, 4);
CHECK_VALUE(MRC_QP_MPR_DEST, 8);
CHECK_VALUE(MRC_QP_TIMEOUT, 0x10);
CHECK_VALUE(MRC_QP_EV_PROFILE_ID, 0x20);
CHECK_VALUE(MRC_QP_CC_PROFILE_ID, 0x40);
CHECK_VALUE(MRC_QP_HINT, 0x80);
CHECK_VALUE(MRC_QP_RETRY_CNT, 0x100);
CHECK_VALUE(MRC_QP_CAP, 0x200);
CHECK_VALUE(MRC_QP_VENDOR_CFG, (-0x7fffffffLL - 1));

/* enum mrc_qp_cap */
CHECK_ENUM(enum mrc_qp_cap, 4, 1);
CHECK_VALUE(MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED, 1);
CHECK_VALUE(MRC_QP_CAP_DYNAMIC_MPR, 2);
CHECK_VALUE(MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED, 4);

/* enum mrc_ctl_protocol_version */
CHECK_ENUM(enum mrc_ctl_protocol_version, 4, 1);
CHECK_VALUE(MRC_CTL_PROTOCOL_VERSION_0, 0);
CHECK_VALUE(MRC_CTL_PROTOCOL_VERSION_1, 1);

/* enum mrc_ctl_profile_state */
CHECK_ENUM(enum mrc_ctl_profile_state, 4, 1);
CHECK_VALUE(MRC_CTL_PROFILE_INIT, 0);
CHECK_VALUE(MRC_CTL_PROFILE_OFFLINE, 1);
CHECK_VALUE(MRC_CTL_PROFILE_ONLINE, 2);

/* enum mrc_ctl_attr_opt */
CHECK_ENUM(enum mrc_ctl_attr_opt, 4, 1);
CHECK_VALUE(MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE, 1);
CHECK_VALUE(MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE, 2);
CHECK_VALUE(MRC_CTL_OPT_CAP_EV_EVENT, 4);
CHECK_VALUE(MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE, 8);
CHECK_VALUE(MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT, 0x10);
CHECK_VALUE(MRC_CTL_OPT_CAP_EP_OP_EV_PROBE, 0x20);

/* enum mrc_ctl_port_admin_state */
CHECK_ENUM(enum mrc_ctl_port_admin_state, 4, 1);
CHECK_VALUE(MRC_CTL_PORT_ADMIN_DISABLED, 0);
CHECK_VALUE(MRC_CTL_PORT_ADMIN_ENABLED, 1);

/* enum mrc_ctl_port_attr_mask */
CHECK_ENUM(enum mrc_ctl_port_attr_mask, 4, 1);
CHECK_VALUE(MRC_CTL_PORT_ADMIN_STATE, 1);

/* enum mrc_ctl_ev_fmt_mode */
CHECK_ENUM(enum mrc_ctl_ev_fmt_mode, 4, 1);
CHECK_VALUE(MRC_CTL_EV_FMT_MODE_STEV, 1);
CHECK_VALUE(MRC_CTL_EV_FMT_MODE_SRV6, 2);
CHECK_VALUE(MRC_CTL_EV_FMT_MODE_UDP, 4);

/* enum mrc_ctl_ev_fmt_op */
CHECK_ENUM(enum mrc_ctl_ev_fmt_op, 4, 1);
CHECK_VALUE(MRC_CTL_EV_FMT_OP_MODIFY_FIELDS, 0);
CHECK_VALUE(MRC_CTL_EV_FMT_OP_QUERY_FIELDS, 1);

/* enum mrc_ctl_ev_fmt_profile_attr_mask */
CHECK_ENUM(enum mrc_ctl_ev_fmt_profile_attr_mask, 4, -1);
CHECK_VALUE(MRC_CTL_EV_FMT_PROFILE_STATE, 1);
CHECK_VALUE(MRC_CTL_EV_FMT_PROFILE_CUR_STATE, 2);
CHECK_VALUE(MRC_CTL_EV_FMT_PROFILE_MODE, 4);
CHECK_VALUE(MRC_CTL_EV_FMT_PROFILE_OP, 8);
CHECK_VALUE(MRC_CTL_EV_FMT_VENDOR_CFG, (-0x7fffffffLL - 1));

/* enum mrc_ctl_ev_state */
CHECK_ENUM(enum mrc_ctl_ev_state, 4, -1);
CHECK_VALUE(MRC_CTL_EV_GOOD, 1);
CHECK_VALUE(MRC_CTL_EV_ASSUMED_BAD, 2);
CHECK_VALUE(MRC_CTL_EV_DENIED, 4);
CHECK_VALUE(MRC_CTL_EV_UNKNOWN, (-0x7fffffffLL - 1));

/* enum mrc_ctl_ev_mode */
CHECK_ENUM(enum mrc_ctl_ev_mode, 4, 1);
CHECK_VALUE(MRC_CTL_EV_MODE_AUTO, 1);
CHECK_VALUE(MRC_CTL_EV_MODE_EXP, 2);
CHECK_VALUE(MRC_CTL_EV_MODE_GEN, 4);

/* enum mrc_ctl_ev_op */
CHECK_ENUM(enum mrc_ctl_ev_op, 4, 1);
CHECK_VALUE(MRC_CTL_EV_OP_REPLACE_EV, 0);
CHECK_VALUE(MRC_CTL_EV_OP_MODIFY_EV_STATE, 1);
CHECK_VALUE(MRC_CTL_EV_OP_QUERY_EV_STATE, 2);
CHECK_VALUE(MRC_CTL_EV_OP_QUERY_EV_ARRAY, 3);

/* enum mrc_ctl_ev_fields_op */
CHECK_ENUM(enum mrc_ctl_ev_fields_op, 4, 1);
CHECK_VALUE(MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, 0);
CHECK_VALUE(MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS, 1);

/* enum mrc_ctl_ev_profile_attr_mask */
CHECK_ENUM(enum mrc_ctl_ev_profile_attr_mask, 4, -1);
CHECK_VALUE(MRC_CTL_EV_PROFILE_STATE, 1);
CHECK_VALUE(MRC_CTL_EV_PROFILE_CUR_STATE, 2);
CHECK_VALUE(MRC_CTL_EV_PROFILE_MODE, 4);
CHECK_VALUE(MRC_CTL_EV_PROFILE_FMT_ID, 8);
CHECK_VALUE(MRC_CTL_EV_PROFILE_COUNT, 0x10);
CHECK_VALUE(MRC_CTL_EV_PROFILE_MIN_ACTIVE, 0x20);
CHECK_VALUE(MRC_CTL_EV_PROFILE_EVENT_MASK, 0x40);
CHECK_VALUE(MRC_CTL_EV_PROFILE_EV_OP, 0x80);
CHECK_VALUE(MRC_CTL_EV_PROFILE_EV_FIELDS_OP, 0x100);
CHECK_VALUE(MRC_CTL_EV_PROFILE_VENDOR_CFG, (-0x7fffffffLL - 1));

/* enum mrc_ctl_ev_op_flags */
CHECK_ENUM(enum mrc_ctl_ev_op_flags, 4, 1);
CHECK_VALUE(MRC_CTL_EV_OP_F_ALL_COPIES, 1);

/* enum mrc_ctl_cc_profile_attr_mask */
CHECK_ENUM(enum mrc_ctl_cc_profile_attr_mask, 4, -1);
CHECK_VALUE(MRC_CTL_CC_PROFILE_STATE, 1);
CHECK_VALUE(MRC_CTL_CC_PROFILE_CUR_STATE, 2);
CHECK_VALUE(MRC_CTL_CC_PROFILE_ALGORITHM, 4);
CHECK_VALUE(MRC_CTL_CC_PROFILE_CONFIG, 8);
CHECK_VALUE(MRC_CTL_CC_PROFILE_VENDOR_CFG, (-0x7fffffffLL - 1));

/* enum mrc_ctl_ep_op_type */
CHECK_ENUM(enum mrc_ctl_ep_op_type, 4, 1);
CHECK_VALUE(MRC_CTL_EP_OP_EV_PROBE, 0);
CHECK_VALUE(MRC_CTL_EP_OP_PORT_STATUS_UPDATE, 1);

/* Macros */
CHECK_VALUE(MRC_MAX_VENDOR_CFG_SIZE, 128);
CHECK_VALUE(MRC_CTL_MAX_VENDOR_CFG_SIZE, 128);
CHECK_VALUE(MRC_CTL_EV_MAX_BYTES, 32);
CHECK_VALUE(MRC_API_VER_MAJOR_OFFSET, 24);
CHECK_VALUE(MRC_API_VER_MINOR_OFFSET, 16);
CHECK_VALUE(MRC_API_VER_SUBMINOR_OFFSET, 0);
CHECK_VALUE(MRC_API_CURRENT_VERSION, 0x1000001);
CHECK_VALUE(MRC_API_LAST_SUPPORTED_VERSION, 0x0);
CHECK_VALUE(MRC_API_VER_USED, 0x1000001);
CHECK_VALUE(MRC_VENDOR_API_CURRENT_VERSION, 0x1000000);
CHECK_VALUE(MRC_VENDOR_API_LAST_SUPPORTED_VERSION, 0x0);
CHECK_VALUE(MRC_VENDOR_API_VER_USED, 0x1000000);
CHECK_VALUE(MRC_CTL_API_VER_MAJOR_OFFSET, 24);
CHECK_VALUE(MRC_CTL_API_VER_MINOR_OFFSET, 16);
CHECK_VALUE(MRC_CTL_API_VER_SUBMINOR_OFFSET, 0);
CHECK_VALUE(MRC_CTL_API_CURRENT_VERSION, 0x1000001);
CHECK_VALUE(MRC_CTL_API_LAST_SUPPORTED_VERSION, 0x0);
CHECK_VALUE(MRC_CTL_API_VER_USED, 0x1000001);
CHECK_VALUE(MRC_CTL_VENDOR_API_CURRENT_VERSION, 0x1000000);
CHECK_VALUE(MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION, 0x0);
CHECK_VALUE(MRC_CTL_VENDOR_API_VER_USED, 0x1000000);
#if !(MRC_API_VER_LATEST == 0xFFFFFFFF)
#error "MRC_API_VER_LATEST"
#endif
#if !(MRC_CTL_API_VER_LATEST == 0xFFFFFFFF)
#error "MRC_CTL_API_VER_LATEST"
#endif

/* The version-packing macros. */
CHECK_VALUE(MRC_API_VER(2, 3, 4), 0x02030004);
CHECK_VALUE(MRC_CTL_API_VER(2, 3, 4), 0x02030004);

/* Controller API 1.0.0 has no mrc_ctl_ev_event.state: its events are 48
 * bytes (measured with MRC_CTL_API_VER_USED set to 1.0.0), the offset at
 * which 1.0.1 adds `state`. */
_Static_assert(offsetof(struct mrc_ctl_ev_event, drop_count) + sizeof(uint32_t) == 48,
	       "mrc_ctl_ev_event 1.0.0 size");

/* Every function, with the parameter types of the published prototypes. */
CHECK_FUNCTION(mrc_query_device_ex,
	       int (*)(struct ibv_context *, struct mrc_context *, struct mrc_device_attr *, int *));
CHECK_FUNCTION(mrc_query_device,
	       int (*)(struct ibv_context *, struct mrc_device_attr *, int *));
CHECK_FUNCTION(mrc_query_version,
	       void (*)(uint32_t *, uint32_t *, uint32_t *, uint32_t *));
CHECK_FUNCTION(mrc_create_context,
	       struct mrc_context * (*)(struct ibv_context *, struct mrc_context_attr *));
CHECK_FUNCTION(mrc_destroy_context,
	       int (*)(struct mrc_context *));
CHECK_FUNCTION(mrc_create_comp_channel,
	       int (*)(struct mrc_context *, struct mrc_comp_channel **));
CHECK_FUNCTION(mrc_get_comp_channel_fd,
	       int (*)(struct mrc_comp_channel *, int *));
CHECK_FUNCTION(mrc_destroy_comp_channel,
	       int (*)(struct mrc_comp_channel *));
CHECK_FUNCTION(mrc_create_cq,
	       struct mrc_cq * (*)(struct mrc_context *, int, void *, struct mrc_comp_channel *, int));
CHECK_FUNCTION(mrc_poll_cq,
	       int (*)(struct mrc_cq *, int, struct ibv_wc *));
CHECK_FUNCTION(mrc_destroy_cq,
	       int (*)(struct mrc_cq *));
CHECK_FUNCTION(mrc_create_qp_hint,
	       struct mrc_qp_hint * (*)(struct mrc_context *, struct mrc_qp_hint_init_attr *));
CHECK_FUNCTION(mrc_destroy_qp_hint,
	       int (*)(struct mrc_qp_hint *));
CHECK_FUNCTION(mrc_query_qp_hint,
	       int (*)(struct mrc_qp_hint *, struct mrc_qp_hint_attr *, int));
CHECK_FUNCTION(mrc_modify_qp_hint,
	       int (*)(struct mrc_qp_hint *, struct mrc_qp_hint_attr *, int));
CHECK_FUNCTION(mrc_create_qp,
	       struct mrc_qp * (*)(struct mrc_context *, struct mrc_qp_init_attr *));
CHECK_FUNCTION(mrc_destroy_qp,
	       int (*)(struct mrc_qp *));
CHECK_FUNCTION(mrc_query_qp,
	       int (*)(struct mrc_qp *, struct ibv_qp_attr *, int, struct mrc_qp_attr *, int, struct mrc_qp_init_attr *));
CHECK_FUNCTION(mrc_modify_qp,
	       int (*)(struct mrc_qp *, struct ibv_qp_attr *, int, struct mrc_qp_attr *, int));
CHECK_FUNCTION(mrc_get_qpn,
	       int (*)(struct mrc_qp *, uint32_t *));
CHECK_FUNCTION(mrc_post_recv,
	       int (*)(struct mrc_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **));
CHECK_FUNCTION(mrc_post_send,
	       int (*)(struct mrc_qp *, struct ibv_send_wr *, struct ibv_send_wr **));
CHECK_FUNCTION(mrc_get_async_event,
	       int (*)(struct mrc_context *, struct mrc_async_event *));
CHECK_FUNCTION(mrc_ack_async_event,
	       void (*)(struct mrc_async_event *));
CHECK_FUNCTION(mrc_req_notify_cq,
	       int (*)(struct mrc_cq *, int));
CHECK_FUNCTION(mrc_get_cq_event,
	       int (*)(struct mrc_comp_channel *, struct mrc_cq **, void **));
CHECK_FUNCTION(mrc_ack_cq_events,
	       void (*)(struct mrc_cq *, unsigned int));
CHECK_FUNCTION(mrc_ctl_query_device_ex,
	       int (*)(struct ibv_context *, struct mrc_context *, struct mrc_ctl_device_attr *, int *));
CHECK_FUNCTION(mrc_ctl_query_device,
	       int (*)(struct ibv_context *, struct mrc_ctl_device_attr *));
CHECK_FUNCTION(mrc_ctl_query_version,
	       void (*)(uint32_t *, uint32_t *, uint32_t *, uint32_t *));
CHECK_FUNCTION(mrc_ctl_query_port,
	       int (*)(struct mrc_context *, uint8_t, struct mrc_ctl_port_attr *, int));
CHECK_FUNCTION(mrc_ctl_modify_port,
	       int (*)(struct mrc_context *, uint8_t, struct mrc_ctl_port_attr *, int));
CHECK_FUNCTION(mrc_ctl_modify_ev_fmt_profile,
	       int (*)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_fmt_profile_attr *, int));
CHECK_FUNCTION(mrc_ctl_query_ev_fmt_profile,
	       int (*)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_fmt_profile_attr *, int));
CHECK_FUNCTION(mrc_ctl_modify_ev_profile,
	       int (*)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_profile_attr *, int));
CHECK_FUNCTION(mrc_ctl_query_ev_profile,
	       int (*)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_profile_attr *, int));
CHECK_FUNCTION(mrc_ctl_modify_cc_profile,
	       int (*)(struct mrc_context *, uint64_t, struct mrc_ctl_cc_profile_attr *, int));
CHECK_FUNCTION(mrc_ctl_query_cc_profile,
	       int (*)(struct mrc_context *, uint64_t, struct mrc_ctl_cc_profile_attr *, int));
CHECK_FUNCTION(mrc_ctl_create_ev_event_cq,
	       struct mrc_cq * (*)(struct mrc_context *, int, void *, struct mrc_comp_channel *, int));
CHECK_FUNCTION(mrc_ctl_poll_ev_event,
	       int (*)(struct mrc_cq *, int, struct mrc_ctl_ev_event *));
CHECK_FUNCTION(mrc_ctl_ep_batch_send_wait,
	       int (*)(struct mrc_context *, uint8_t, enum mrc_ctl_ep_op_type, struct mrc_ctl_ep_req *, int, uint32_t, struct mrc_ctl_ep_rsp *, int *));

int main(void)
{
	/* The "no EV yet" entry is an all-zero struct mrc_ctl_ev. */
	static const struct mrc_ctl_ev zero;
	struct mrc_ctl_ev unpopulated = MRC_CTL_EV_UNPOPULATED;

	_Static_assert(sizeof(MRC_CTL_EV_UNPOPULATED) == 33,
		       "MRC_CTL_EV_UNPOPULATED is a struct mrc_ctl_ev");
	return memcmp(&unpopulated, &zero, sizeof(zero)) == 0 ? 0 : 1;
}
