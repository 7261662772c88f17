/*
 * OCP MRC EV profiles beyond the explicit ones, through mrc_ctl.h only: generated (GEN)
 * profiles with EV field rules, and explicit EVs expanded through field rules. A C11
 * program against libmrc's mrc.h / mrc_ctl.h, linked with libmrc and the verbs shim.
 *
 * One device (mrc0, two loopback planes: MRC_PLANES=::1,::1, MRC_PORT=P). The expansions are
 * those of the OCP repository's examples/ev_expansion/ev_expansion.c (and mrc_ctl.h's
 * expansion steps), on a UDP EV format of two 8-bit fields: the example "Structured EV
 * Generated w/ Fixed" (fields init_val (i + 1) << 8, 4 generated bits each, mask 0xf) with
 * each field 8 bits wide instead of 16 (init_val (i + 1) << 4), since a UDP EV carries 16 bits.
 * The datapath's EV (the MRC header's, seen on lo) is plane << 16 | the expanded 16 bits.
 *
 * AUTO profiles: the EV array is the device's own EVs (16 bits, the UDP format's, per port);
 * MODIFY_EV_STATE takes one out of use on every QP of the profile, and the EV events are one
 * per profile-wide change, not one per QP copy.
 *
 * A CC profile whose algorithm is NULL: its QPs run without congestion control. Seen on the
 * wire: one 256 KiB WRITE sends far more than one packet before the first ACK comes back,
 * where a QP of an NSCC profile with a one-packet window (max_cwnd 4096) sends one or two.
 *
 * EV probes (mrc_ctl_ep_batch_send_wait): req_tc is the probes' DSCP on the wire, and the
 * answers carry the peer's service time (adj_svc_time).
 *
 * STEV (structured EVs, mrc_ctl_exp_ev.md's "Working with STEV EV Types": a format of two
 * 16-bit fields): an EV is the IPv6 flow label's low 16 bits, then the UDP source-port
 * selector. Seen on the wire: a QP of an explicit STEV profile sends its data with exactly
 * its EVs' flow labels, and an STEV probe carries its EV's label.
 *
 * PORT_STATUS_UPDATE: the device tells a peer (itself, through ::1) that its port 2 is down;
 * the peer acknowledges, and its QPs to the device send no data from port 2 until a second
 * update says the port is up again.
 *
 * Exit 1 if a check failed, 77 (skipped) if all passed but the wire checks could not run.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <signal.h>

#include <infiniband/verbs.h>

#include <mrc/mrc.h>
#include <mrc/mrc_ctl.h>

#include "ocp_test.h"

enum { FMT = 21, FMT_STEV = 22, GEN = 31, EXPL = 32, AUTO = 33, STEVP = 34, CC_NONE = 41,
       CC_TINY = 42, NGEN = 8, NAUTO = 64, NSTEV = 4, BUF = 1 << 20 };

/* The fields of both profiles: 8 bits each, fixed high nibble i + 1, 4 generated bits. */
static void fields_of_example(struct mrc_ctl_ev_field f[2])
{
	memset(f, 0, 2 * sizeof *f);
	for (int i = 0; i < 2; i++) {
		f[i].width = 8;
		f[i].init_val = (uint32_t)(i + 1) << 4;
		f[i].min_val = 1;
		f[i].max_val = 0xf;
		f[i].mask = 0x0f;
	}
}

/* One-byte EV (two 4-bit field values), MSB first from val[0]. */
static struct mrc_ctl_ev ev8(uint8_t v, uint8_t port)
{
	struct mrc_ctl_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.val[0] = v;
	ev.port = port;
	return ev;
}

static struct ibv_context *vctx;
static struct ibv_pd *pd;
static unsigned char *buf_a, *buf_b;
static struct ibv_mr *mr_a, *mr_b;
static struct mrc_cq *cq;

/* Two MRC QPs of `app` on EV profile `profile` (and CC profile `cc_profile` unless 0, the
 * second with receive window `mpr_dest` x 128 PSNs unless 0), connected to each other through ::1. */
static void connect_pair(struct mrc_context *app, uint64_t profile, uint64_t cc_profile,
			 uint8_t mpr_dest, struct mrc_qp **qa, struct mrc_qp **qb)
{
	struct mrc_qp_init_attr qi;
	memset(&qi, 0, sizeof qi);
	qi.send_cq = cq;
	qi.recv_cq = cq;
	qi.cap.max_send_wr = 64;
	qi.cap.max_recv_wr = 64;
	qi.cap.max_send_sge = 1;
	qi.cap.max_recv_sge = 1;
	qi.pd = pd;
	*qa = mrc_create_qp(app, &qi);
	*qb = mrc_create_qp(app, &qi);
	REQUIRE(*qa && *qb, "mrc_create_qp: errno %d", errno);
	uint32_t qpn[2];
	EXPECT_OK(mrc_get_qpn(*qa, &qpn[0]));
	EXPECT_OK(mrc_get_qpn(*qb, &qpn[1]));
	struct mrc_qp *q[2] = { *qa, *qb };
	union ibv_gid gid;
	REQUIRE(ibv_query_gid(vctx, 1, 0, &gid) == 0, "ibv_query_gid");
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr v = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
		struct mrc_qp_attr m;
		memset(&m, 0, sizeof m);
		m.profile.ev_profile_id = profile;
		m.profile.cc_profile_id = cc_profile;
		EXPECT_OK(mrc_modify_qp(q[i], &v, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS, &m,
					MRC_QP_EV_PROFILE_ID | (cc_profile ? MRC_QP_CC_PROFILE_ID : 0)));
	}
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr v;
		memset(&v, 0, sizeof v);
		v.qp_state = IBV_QPS_RTR;
		v.path_mtu = IBV_MTU_4096;
		v.ah_attr.is_global = 1;
		v.ah_attr.grh.dgid = gid;
		v.ah_attr.grh.hop_limit = 255;
		v.ah_attr.port_num = 1;
		v.dest_qp_num = qpn[1 - i];
		struct mrc_qp_attr m;
		memset(&m, 0, sizeof m);
		m.mpr.mpr_dest = mpr_dest;
		EXPECT_OK(mrc_modify_qp(q[i], &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN | IBV_QP_PATH_MTU, &m,
					i == 1 && mpr_dest ? MRC_QP_MPR_DEST : 0));
	}
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr v = { .qp_state = IBV_QPS_RTS };
		EXPECT_OK(mrc_modify_qp(q[i], &v, IBV_QP_STATE | IBV_QP_SQ_PSN, NULL, 0));
	}
}

/* `count` signaled 64 KiB WRITEs from qa to buf_b, each completed without error. */
static void write_burst(struct mrc_qp *qa, int count)
{
	const uint32_t len = 65536;
	for (int k = 0; k < count; k++) {
		struct ibv_sge sge = { (uintptr_t)buf_a + k * len % BUF, len, mr_a->lkey };
		struct ibv_send_wr wr, *bad = NULL;
		memset(&wr, 0, sizeof wr);
		wr.wr_id = (uint64_t)k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)buf_b + k * len % BUF;
		wr.wr.rdma.rkey = mr_b->rkey;
		EXPECT_OK(mrc_post_send(qa, &wr, &bad));
	}
	int got = 0;
	double end = now_ms() + 10000;
	struct ibv_wc wc[16];
	while (got < count && now_ms() < end) {
		int n = mrc_poll_cq(cq, 16, wc);
		for (int i = 0; i < n; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS, "WRITE %llu: %s",
			      (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
		got += n > 0 ? n : 0;
		if (n <= 0)
			sleep_us(200);
	}
	CHECK(got == count, "%d of %d WRITE completions", got, count);
	CHECK(memcmp(buf_a, buf_b, (size_t)(count < 16 ? count : 16) * len) == 0, "data written");
}

/* The datapath's EV of an AUTO profile's EV: plane << 16 | its 16 bits. */
static uint32_t auto_wire(const struct mrc_ctl_ev *ev)
{
	return (uint32_t)(ev->port - 1) << 16 | (uint32_t)ev->val[0] << 8 | ev->val[1];
}

static int ev_op(struct mrc_context *ctl, uint64_t id, int op, struct mrc_ctl_ev_op_entry *e, int n,
		 int query)
{
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.ev_op.op = (enum mrc_ctl_ev_op)op;
	a.ev_op.entries = e;
	a.ev_op.entry_count = n;
	return query ? mrc_ctl_query_ev_profile(ctl, id, &a, MRC_CTL_EV_PROFILE_EV_OP)
		     : mrc_ctl_modify_ev_profile(ctl, id, &a, MRC_CTL_EV_PROFILE_EV_OP);
}

/* write_burst(qp, count) with what lo carried meanwhile in *s; 0 (and *s empty) without a
 * capture. */
static int burst_seen(struct mrc_qp *qp, int count, int cap, struct seen *s)
{
	memset(s, 0, sizeof *s);
	if (cap >= 0)
		cap_read(cap, NULL);
	write_burst(qp, count);
	if (cap < 0)
		return 0;
	cap_read(cap, s);
	return 1;
}

/* EV format profile `id` of `mode` with fields `f` (n of them), taken to ONLINE; its attributes. */
static struct mrc_ctl_ev_fmt_profile_attr fmt_profile_online(struct mrc_context *ctl, uint64_t id,
							     enum mrc_ctl_ev_fmt_mode mode,
							     struct mrc_ctl_ev_fmt_field *f, int n)
{
	struct mrc_ctl_ev_fmt_profile_attr fa;
	memset(&fa, 0, sizeof fa);
	fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
	fa.ev_fmt_mode = mode;
	fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
	fa.ev_fmt_op.fmt_fields = f;
	fa.ev_fmt_op.fmt_field_count = n;
	EXPECT_OK(mrc_ctl_modify_ev_fmt_profile(ctl, id, &fa, MRC_CTL_EV_FMT_PROFILE_STATE |
						MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP));
	fa.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_OK(mrc_ctl_modify_ev_fmt_profile(ctl, id, &fa, MRC_CTL_EV_FMT_PROFILE_STATE));
	return fa;
}

static int modify_ev(struct mrc_context *ctl, uint64_t id, struct mrc_ctl_ev_profile_attr *a,
		     int mask)
{
	return mrc_ctl_modify_ev_profile(ctl, id, a, mask);
}

int main(void)
{
	start_loopback_test();

	step = "device";
	struct ibv_device **list;
	vctx = open_mrc0(&list);
	struct mrc_ctl_device_attr ca;
	EXPECT_OK(mrc_ctl_query_device(vctx, &ca));
	/* mrc_ctl_gen_ev.md: "the MRC_CTL_EV_MODE_GEN mode must be supported by the device" */
	CHECK(ca.ev.ev_mode_mask & MRC_CTL_EV_MODE_GEN, "ev_mode_mask 0x%x lacks GEN", ca.ev.ev_mode_mask);
	struct mrc_context *ctl = mrc_create_context(vctx, NULL);
	struct mrc_context *app = mrc_create_context(vctx, NULL);
	REQUIRE(ctl && app, "mrc_create_context: errno %d", errno);

	/* ---- EV format profile: UDP, two 8-bit fields ---------------------------------- */
	step = "EV format profile";
	struct mrc_ctl_ev_fmt_field ff[2] = { { 8 }, { 8 } };
	struct mrc_ctl_ev_fmt_profile_attr fa =
		fmt_profile_online(ctl, FMT, MRC_CTL_EV_FMT_MODE_UDP, ff, 2);

	/* ---- GEN profile: the rules mrc_ctl.h states, one broken at a time ---------------- */
	step = "GEN profile";
	struct mrc_ctl_ev_field f[3];
	fields_of_example(f);
	struct mrc_ctl_ev_profile_attr ea;
	memset(&ea, 0, sizeof ea);
	ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
	ea.ev_mode = MRC_CTL_EV_MODE_GEN;
	ea.ev_fmt_profile_id = FMT;
	ea.ev_count = NGEN;
	ea.ev_min_active = 2;
	ea.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
	ea.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
	ea.ev_fields_op.fields = f;
	ea.ev_fields_op.field_count = 2;
	const int to_offline = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
			       MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
			       MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK;
	/* To OFFLINE a GEN profile needs its fields. */
	EXPECT_ERR(modify_ev(ctl, GEN, &ea, to_offline), EINVAL);
	f[0].init_val = 0x100; /* wider than 8 bits */
	EXPECT_ERR(modify_ev(ctl, GEN, &ea, to_offline | MRC_CTL_EV_PROFILE_EV_FIELDS_OP), EINVAL);
	f[0].init_val = 0x10;
	f[0].mask = 0x10f; /* a mask bit outside the width */
	EXPECT_ERR(modify_ev(ctl, GEN, &ea, to_offline | MRC_CTL_EV_PROFILE_EV_FIELDS_OP), EINVAL);
	f[0].mask = 0x0f;
	f[0].max_val = 0x1f; /* wider than the mask's 4 bits */
	EXPECT_ERR(modify_ev(ctl, GEN, &ea, to_offline | MRC_CTL_EV_PROFILE_EV_FIELDS_OP), EINVAL);
	fields_of_example(f);
	f[2] = f[1]; /* three fields, the format has two */
	ea.ev_fields_op.field_count = 3;
	EXPECT_ERR(modify_ev(ctl, GEN, &ea, to_offline | MRC_CTL_EV_PROFILE_EV_FIELDS_OP), EINVAL);
	ea.ev_fields_op.field_count = 2;
	ea.ev_count = 2 * 15 * 15 + 2; /* 15 x 15 distinct values per port: one too many */
	EXPECT_ERR(modify_ev(ctl, GEN, &ea, to_offline | MRC_CTL_EV_PROFILE_EV_FIELDS_OP), EINVAL);
	ea.ev_count = NGEN;
	EXPECT_OK(modify_ev(ctl, GEN, &ea, to_offline | MRC_CTL_EV_PROFILE_EV_FIELDS_OP));
	memset(&ea, 0, sizeof ea);
	ea.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_OK(modify_ev(ctl, GEN, &ea, MRC_CTL_EV_PROFILE_STATE));

	/* QUERY_FIELDS: the fields as given; E2BIG and the count when the array is short. */
	struct mrc_ctl_ev_field qf[4];
	memset(qf, 0, sizeof qf);
	memset(&ea, 0, sizeof ea);
	ea.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS;
	ea.ev_fields_op.fields = qf;
	ea.ev_fields_op.field_count = 1;
	EXPECT_ERR(mrc_ctl_query_ev_profile(ctl, GEN, &ea, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), E2BIG);
	CHECK(ea.ev_fields_op.field_count == 2, "QUERY_FIELDS wants %d", ea.ev_fields_op.field_count);
	ea.ev_fields_op.field_count = 4;
	EXPECT_OK(mrc_ctl_query_ev_profile(ctl, GEN, &ea, MRC_CTL_EV_PROFILE_EV_FIELDS_OP |
					   MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_COUNT |
					   MRC_CTL_EV_PROFILE_CUR_STATE));
	fields_of_example(f);
	CHECK(ea.ev_fields_op.field_count == 2 && memcmp(qf, f, 2 * sizeof *f) == 0, "fields as set");
	CHECK(ea.ev_mode == MRC_CTL_EV_MODE_GEN && ea.ev_count == NGEN &&
	      ea.cur_profile_state == MRC_CTL_PROFILE_ONLINE, "GEN profile query");

	/* QUERY_EV_ARRAY: libmrc's generation (ev_fields.h): EV i on port i % 2 + 1, combination
	 * i / 2 with field 0 fastest, each field's value from min_val 1. */
	struct mrc_ctl_ev_op_entry arr[NGEN];
	memset(arr, 0, sizeof arr);
	memset(&ea, 0, sizeof ea);
	ea.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
	ea.ev_op.entries = arr;
	ea.ev_op.entry_count = NGEN;
	EXPECT_OK(mrc_ctl_query_ev_profile(ctl, GEN, &ea, MRC_CTL_EV_PROFILE_EV_OP));
	CHECK(ea.ev_op.entry_count == NGEN, "EV array of %d", ea.ev_op.entry_count);
	static const uint8_t gen_val[NGEN] = { 0x11, 0x11, 0x21, 0x21, 0x31, 0x31, 0x41, 0x41 };
	/* Their expansions: field i = (i + 1) << 4 | value i. */
	static const uint16_t gen_wire[NGEN] = { 0x1121, 0x1121, 0x1221, 0x1221,
						 0x1321, 0x1321, 0x1421, 0x1421 };
	for (int i = 0; i < NGEN; i++) {
		struct mrc_ctl_ev want = ev8(gen_val[i], (uint8_t)(i % 2 + 1));
		CHECK(memcmp(&arr[i].ev, &want, sizeof want) == 0, "generated EV %d: 0x%02x port %u", i,
		      arr[i].ev.val[0], arr[i].ev.port);
		CHECK(arr[i].state == MRC_CTL_EV_UNKNOWN, "EV %d: state %d before any QP", i, arr[i].state);
	}
	/* A generated profile's EVs come from its fields. */
	struct mrc_ctl_ev_op_entry rep;
	memset(&rep, 0, sizeof rep);
	rep.ev = arr[0].ev;
	rep.ev_new = ev8(0x55, 1);
	rep.state = MRC_CTL_EV_GOOD;
	memset(&ea, 0, sizeof ea);
	ea.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	ea.ev_op.entries = &rep;
	ea.ev_op.entry_count = 1;
	EXPECT_ERR(modify_ev(ctl, GEN, &ea, MRC_CTL_EV_PROFILE_EV_OP), EINVAL);

	/* ---- EXP profile with the same fields: the example's first two EVs ---------------- */
	step = "EXP profile with fields";
	fields_of_example(f);
	memset(&ea, 0, sizeof ea);
	ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
	ea.ev_mode = MRC_CTL_EV_MODE_EXP;
	ea.ev_fmt_profile_id = FMT;
	ea.ev_count = 2;
	ea.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
	ea.ev_fields_op.fields = f;
	ea.ev_fields_op.field_count = 2;
	EXPECT_OK(modify_ev(ctl, EXPL, &ea, MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
			    MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
			    MRC_CTL_EV_PROFILE_EV_FIELDS_OP));
	/* ev_expansion.c "Structured EV Generated w/ Fixed", EVs 00 and 01: 0xa4 -> fld0 0x010a
	 * fld1 0x0204, 0x7f -> fld0 0x0107 fld1 0x020f; here 0x1a24 and 0x172f. */
	struct mrc_ctl_ev_op_entry ent[2];
	memset(ent, 0, sizeof ent);
	ent[0].ev = MRC_CTL_EV_UNPOPULATED;
	ent[0].ev_new = ev8(0xa4, 1);
	ent[0].ev_new.val[1] = 0x80; /* a bit past the fields' 8 */
	ent[0].state = MRC_CTL_EV_GOOD;
	memset(&ea, 0, sizeof ea);
	ea.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	ea.ev_op.entries = ent;
	ea.ev_op.entry_count = 1;
	EXPECT_ERR(modify_ev(ctl, EXPL, &ea, MRC_CTL_EV_PROFILE_EV_OP), EINVAL);
	ent[0].ev_new = ev8(0xa4, 1);
	ent[1].ev = MRC_CTL_EV_UNPOPULATED;
	ent[1].ev_new = ev8(0x7f, 2);
	ent[1].state = MRC_CTL_EV_GOOD;
	ea.ev_op.entry_count = 2;
	EXPECT_OK(modify_ev(ctl, EXPL, &ea, MRC_CTL_EV_PROFILE_EV_OP));
	ea.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_OK(modify_ev(ctl, EXPL, &ea, MRC_CTL_EV_PROFILE_STATE));

	/* ---- Data on each profile: the EVs on the wire are the expansions ---------------- */
	step = "data";
	pd = ibv_alloc_pd(vctx);
	buf_a = aligned_alloc(4096, BUF);
	buf_b = aligned_alloc(4096, BUF);
	REQUIRE(pd && buf_a && buf_b, "PD and buffers");
	for (int i = 0; i < BUF; i++)
		buf_a[i] = (unsigned char)(i * 13 + 1);
	mr_a = ibv_reg_mr(pd, buf_a, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mr_b = ibv_reg_mr(pd, buf_b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	cq = mrc_create_cq(app, 256, NULL, NULL, 0);
	REQUIRE(mr_a && mr_b && cq, "MRs and CQ");
	int cap = cap_open();
	struct seen s; /* what lo carried during the last burst_seen */
	if (cap < 0)
		fprintf(stderr, "note: no AF_PACKET socket (%s): wire checks skipped (run as root)\n",
			strerror(errno));

	struct mrc_qp *ga, *gb, *xa, *xb;
	connect_pair(app, GEN, 0, 0, &ga, &gb);
	if (burst_seen(ga, 32, cap, &s)) {
		CHECK(s.data > 0 && s.data_plane1 > 0, "GEN: %d data packets, %d on plane 1", s.data,
		      s.data_plane1);
		for (int k = 0; k < s.nevs; k++) {
			int ok = 0;
			for (int i = 0; i < NGEN; i++)
				ok |= s.evs[k] == ((uint32_t)(i % 2) << 16 | gen_wire[i]);
			CHECK(ok, "GEN: data on EV 0x%x, not an expansion of the profile's", s.evs[k]);
		}
		CHECK(s.nevs >= 4, "GEN: data on %d distinct EVs", s.nevs);
	}
	for (int i = 0; i < NGEN; i++) {
		struct mrc_ctl_ev_op_entry q;
		memset(&q, 0, sizeof q);
		q.ev = ev8(gen_val[i], (uint8_t)(i % 2 + 1));
		memset(&ea, 0, sizeof ea);
		ea.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
		ea.ev_op.entries = &q;
		ea.ev_op.entry_count = 1;
		EXPECT_OK(mrc_ctl_query_ev_profile(ctl, GEN, &ea, MRC_CTL_EV_PROFILE_EV_OP));
		CHECK(q.state == MRC_CTL_EV_GOOD, "generated EV %d in use: state %d", i, q.state);
	}
	/* MODIFY_EV_STATE DENIED on a generated EV (mrc_ctl_gen_ev.md): no more data on it. */
	struct mrc_ctl_ev_op_entry deny;
	memset(&deny, 0, sizeof deny);
	deny.ev = ev8(gen_val[0], 1);
	deny.state = MRC_CTL_EV_DENIED;
	memset(&ea, 0, sizeof ea);
	ea.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
	ea.ev_op.entries = &deny;
	ea.ev_op.entry_count = 1;
	EXPECT_OK(modify_ev(ctl, GEN, &ea, MRC_CTL_EV_PROFILE_EV_OP));
	if (burst_seen(ga, 32, cap, &s)) {
		CHECK(s.data > 0 && !seen_ev(&s, gen_wire[0]), "GEN: data on the DENIED EV 0x%x",
		      gen_wire[0]);
	}

	connect_pair(app, EXPL, 0, 0, &xa, &xb);
	if (burst_seen(xa, 32, cap, &s)) {
		CHECK(s.nevs == 2 && seen_ev(&s, 0x1a24) && seen_ev(&s, 1u << 16 | 0x172f),
		      "EXP with fields: data on %d EVs (0x%x ...), want 0x1a24 and 0x1172f", s.nevs,
		      s.nevs ? s.evs[0] : 0);
	}

	/* ---- AUTO profile: the device's EVs, readable, deniable ---------------------------- */
	step = "AUTO profile";
	memset(&ea, 0, sizeof ea);
	ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
	ea.ev_mode = MRC_CTL_EV_MODE_AUTO;
	ea.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD | MRC_CTL_EV_DENIED;
	EXPECT_OK(modify_ev(ctl, AUTO, &ea, MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
			    MRC_CTL_EV_PROFILE_EVENT_MASK));
	ea.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_OK(modify_ev(ctl, AUTO, &ea, MRC_CTL_EV_PROFILE_STATE));
	memset(&ea, 0, sizeof ea);
	EXPECT_OK(mrc_ctl_query_ev_profile(ctl, AUTO, &ea, MRC_CTL_EV_PROFILE_COUNT));
	const int nauto = (int)ea.ev_count;
	CHECK(nauto >= 2 && nauto <= NAUTO, "AUTO profile: %d EVs", nauto);
	struct mrc_ctl_ev_op_entry aut[NAUTO];
	memset(aut, 0, sizeof aut);
	CHECK(ev_op(ctl, AUTO, MRC_CTL_EV_OP_QUERY_EV_ARRAY, aut, NAUTO, 1) == 0, "AUTO EV array");
	int ports[3] = { 0 };
	for (int i = 0; i < nauto; i++) {
		int zero = 1;
		for (int b = 2; b < MRC_CTL_EV_MAX_BYTES; b++)
			zero &= aut[i].ev.val[b] == 0;
		CHECK(zero && aut[i].ev.port >= 1 && aut[i].ev.port <= 2, "AUTO EV %d: 16 bits on port 1 or 2", i);
		if (aut[i].ev.port <= 2)
			ports[aut[i].ev.port]++;
	}
	CHECK(ports[1] > 0 && ports[2] > 0, "AUTO EVs on both ports: %d, %d", ports[1], ports[2]);
	struct mrc_ctl_ev_op_entry arep;
	memset(&arep, 0, sizeof arep);
	arep.ev = aut[0].ev;
	arep.ev_new = aut[1].ev;
	arep.state = MRC_CTL_EV_GOOD;
	EXPECT_ERR(ev_op(ctl, AUTO, MRC_CTL_EV_OP_REPLACE_EV, &arep, 1, 0), EINVAL);
	struct mrc_ctl_ev_op_entry alien;
	memset(&alien, 0, sizeof alien);
	alien.ev = ev8(0xee, 1);
	alien.ev.val[1] = 0xee;
	alien.state = MRC_CTL_EV_DENIED;
	EXPECT_ERR(ev_op(ctl, AUTO, MRC_CTL_EV_OP_MODIFY_EV_STATE, &alien, 1, 0), ENOENT);

	struct mrc_cq *evq = mrc_ctl_create_ev_event_cq(ctl, 64, NULL, NULL, 0);
	REQUIRE(evq, "mrc_ctl_create_ev_event_cq: errno %d", errno);
	struct mrc_qp *aa, *ab;
	connect_pair(app, AUTO, 0, 0, &aa, &ab);
	if (burst_seen(aa, 32, cap, &s)) {
		for (int k = 0; k < s.nevs; k++) {
			int ok = 0;
			for (int i = 0; i < nauto; i++)
				ok |= s.evs[k] == auto_wire(&aut[i].ev);
			CHECK(ok, "AUTO: data on EV 0x%x, not in the profile's array", s.evs[k]);
		}
		CHECK(s.data > 0 && seen_ev(&s, auto_wire(&aut[0].ev)), "AUTO: no data on EV 0x%x",
		      auto_wire(&aut[0].ev));
	}
	struct mrc_ctl_ev_op_entry q0;
	memset(&q0, 0, sizeof q0);
	q0.ev = aut[0].ev;
	CHECK(ev_op(ctl, AUTO, MRC_CTL_EV_OP_QUERY_EV_STATE, &q0, 1, 1) == 0 && q0.state == MRC_CTL_EV_GOOD,
	      "AUTO EV 0 in use: state %d", q0.state);
	struct mrc_ctl_ev_op_entry d0 = q0;
	d0.state = MRC_CTL_EV_DENIED;
	EXPECT_OK(ev_op(ctl, AUTO, MRC_CTL_EV_OP_MODIFY_EV_STATE, &d0, 1, 0));
	CHECK(ev_op(ctl, AUTO, MRC_CTL_EV_OP_QUERY_EV_STATE, &q0, 1, 1) == 0 && q0.state == MRC_CTL_EV_DENIED,
	      "AUTO EV 0 denied: state %d", q0.state);
	if (burst_seen(aa, 32, cap, &s)) {
		CHECK(s.data > 0 && !seen_ev(&s, auto_wire(&aut[0].ev)), "AUTO: data on the DENIED EV 0x%x",
		      auto_wire(&aut[0].ev));
	}
	/* Both QPs' copies of the EV went DENIED: one event for the profile's EV. */
	int denied = 0;
	struct mrc_ctl_ev_event evb[16];
	for (double end = now_ms() + 300; now_ms() < end; sleep_us(1000)) {
		int n = mrc_ctl_poll_ev_event(evq, 16, evb);
		for (int i = 0; i < n; i++)
			if (evb[i].profile_id == AUTO && evb[i].state == MRC_CTL_EV_DENIED &&
			    memcmp(&evb[i].ev, &aut[0].ev, sizeof aut[0].ev) == 0)
				denied++;
	}
	CHECK(denied == 1, "AUTO: %d DENIED events for one DENY of an EV two QPs hold", denied);

	/* ---- CC profile without an algorithm: no congestion control ------------------------ */
	step = "CC profile without an algorithm";
	struct mrc_ctl_cc_nscc_cfg tiny = nscc_defaults();
	tiny.max_cwnd = 4096; /* one packet */
	struct mrc_ctl_cc_profile_attr cc;
	memset(&cc, 0, sizeof cc);
	cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
	cc.algorithm = NULL; /* mrc_ctl.h: "NULL disables CC" */
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_NONE, &cc, MRC_CTL_CC_PROFILE_STATE |
					    MRC_CTL_CC_PROFILE_ALGORITHM));
	cc.cc_config = &tiny;
	EXPECT_ERR(mrc_ctl_modify_cc_profile(ctl, CC_NONE, &cc, MRC_CTL_CC_PROFILE_CONFIG), EINVAL);
	cc.profile_state = MRC_CTL_PROFILE_ONLINE; /* no CONFIG needed */
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_NONE, &cc, MRC_CTL_CC_PROFILE_STATE));
	memset(&cc, 0x5a, sizeof cc);
	EXPECT_OK(mrc_ctl_query_cc_profile(ctl, CC_NONE, &cc, MRC_CTL_CC_PROFILE_CUR_STATE |
					   MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG));
	CHECK(cc.cur_profile_state == MRC_CTL_PROFILE_ONLINE && !cc.algorithm && !cc.cc_config,
	      "CC profile without an algorithm: state %d", cc.cur_profile_state);
	memset(&cc, 0, sizeof cc);
	cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
	cc.algorithm = "uet-1.0-nscc";
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_TINY, &cc, MRC_CTL_CC_PROFILE_STATE |
					    MRC_CTL_CC_PROFILE_ALGORITHM));
	cc.profile_state = MRC_CTL_PROFILE_ONLINE;
	cc.cc_config = &tiny;
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_TINY, &cc, MRC_CTL_CC_PROFILE_STATE |
					    MRC_CTL_CC_PROFILE_CONFIG));
	struct mrc_qp *na, *nb, *ta, *tb;
	connect_pair(app, AUTO, CC_NONE, 0, &na, &nb);
	connect_pair(app, AUTO, CC_TINY, 0, &ta, &tb);
	int before_ack[2] = { -1, -1 };
	int outstanding[2] = { -1, -1 };
	struct mrc_qp *senders[2] = { na, ta };
	for (int i = 0; i < 2; i++) {
		/* 4 x 64 KiB back to back: 64 packets */
		if (burst_seen(senders[i], 4, cap, &s)) {
			before_ack[i] = s.data_before_ack;
			outstanding[i] = s.max_outstanding;
			/* Both pairs connected after the DENY of AUTO EV 0: it stays out of use. */
			CHECK(s.data > 0 && !seen_ev(&s, auto_wire(&aut[0].ev)),
			      "AUTO: a QP that connected after the DENY sends on EV 0x%x",
			      auto_wire(&aut[0].ev));
		}
	}
	if (cap >= 0) {
		printf("data packets before the first ACK: %d without CC, %d with a one-packet NSCC "
		       "window; most outstanding at once: %d, %d\n", before_ack[0], before_ack[1],
		       outstanding[0], outstanding[1]);
		/* Outstanding, not before the first ACK: the receiving QP is in the same driver,
		 * whose sends run outside its engine lock, so its first ACK may leave after the
		 * sender's third datagram (3 seen) where it once waited for the whole burst (>= 8).
		 * Without CC each 64 KiB WRITE's 8 packets leave at once (8 outstanding seen; 1-2
		 * with the one-packet window): at least twice that window's 2. */
		CHECK(outstanding[0] >= 4, "no congestion control: at most %d data packets outstanding",
		      outstanding[0]);
		CHECK(before_ack[1] >= 1 && before_ack[1] <= 2,
		      "NSCC with a one-packet window: %d data packets before the first ACK", before_ack[1]);
	}

	/* ---- mpr_dest: the receiver's window ------------------------------------------- */
	/* The window counts from the receiver's cumulative PSN, so on a loss-free loopback
	 * nothing reaches past it (the engine's Limits.ReceiveWindow_* tests make the hole):
	 * here, a sender with MPR 1024 completes into a receiver that takes 128 PSNs. */
	step = "mpr_dest";
	struct mrc_qp *wa, *wb;
	connect_pair(app, AUTO, CC_NONE, 1, &wa, &wb);
	struct mrc_qp_attr wq;
	memset(&wq, 0, sizeof wq);
	EXPECT_OK(mrc_query_qp(wb, NULL, 0, &wq, MRC_QP_MPR_DEST, NULL));
	CHECK(wq.mpr.mpr_dest == 1, "mpr_dest %u", wq.mpr.mpr_dest);
	write_burst(wa, 16); /* 1 MiB back to back: 256 packets */

	/* ---- EV probes: req_tc on the wire, service time taken out ----------------------- */
	step = "EV probes";
	union ibv_gid gid;
	REQUIRE(ibv_query_gid(vctx, 1, 0, &gid) == 0, "ibv_query_gid");
	struct mrc_ctl_ep_req preq[2];
	struct mrc_ctl_ep_rsp prsp[2];
	memset(preq, 0, sizeof preq);
	for (int i = 0; i < 2; i++) {
		preq[i].req_id = (uint16_t)(50 + i);
		preq[i].sgid = gid;
		preq[i].dgid = gid;
		preq[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
		preq[i].req_ev = aut[i].ev;
	}
	for (int tc = 0; tc <= 46; tc += 46) { /* the socket's, then EF */
		if (cap >= 0)
			cap_read(cap, NULL);
		int nrsp = -1;
		const double t0 = now_ms();
		EXPECT_OK(mrc_ctl_ep_batch_send_wait(ctl, (uint8_t)tc, MRC_CTL_EP_OP_EV_PROBE, preq, 2,
						     500000000u, prsp, &nrsp));
		const double call_ns = (now_ms() - t0) * 1e6;
		CHECK(nrsp == 2, "%d of 2 probes answered", nrsp);
		for (int r = 0; r < nrsp && r < 2; r++)
			CHECK(prsp[r].adj_svc_time == 1 && prsp[r].rtt > 0 && prsp[r].rtt <= call_ns,
			      "probe answer %u: adj_svc_time %u, rtt %u ns in a %.0f ns call",
			      prsp[r].req_id, prsp[r].adj_svc_time, prsp[r].rtt, call_ns);
		if (cap >= 0) {
			memset(&s, 0, sizeof s);
			cap_read(cap, &s);
			/* DSCP req_tc, ECN ECT(0) as every MRC datagram */
			CHECK(s.probes >= 2 && s.probe_tclass == (tc << 2 | 2),
			      "req_tc %d: %d probes seen, traffic class 0x%x (want 0x%x)", tc,
			      s.probes, s.probe_tclass, tc << 2 | 2);
		}
	}

	/* ---- STEV: flow label + source port ---------------------------------------------- */
	step = "STEV";
	CHECK((ca.ev.ev_fmt_mode_mask & MRC_CTL_EV_FMT_MODE_STEV) && ca.ev.ev_max_width >= 32,
	      "fmt modes 0x%x, max width %u: STEV of 32 bits", ca.ev.ev_fmt_mode_mask,
	      ca.ev.ev_max_width);
	struct mrc_ctl_ev_fmt_field sf[2] = { { 16 }, { 16 } }; /* flow label, source port */
	struct mrc_ctl_ev_fmt_profile_attr sfa =
		fmt_profile_online(ctl, FMT_STEV, MRC_CTL_EV_FMT_MODE_STEV, sf, 2);
	memset(&ea, 0, sizeof ea);
	ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
	ea.ev_mode = MRC_CTL_EV_MODE_EXP;
	ea.ev_fmt_profile_id = FMT_STEV;
	ea.ev_count = NSTEV;
	EXPECT_OK(modify_ev(ctl, STEVP, &ea, MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
			    MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT));
	/* EVs that differ only in their flow label: 0x1001.. on ports 1 and 2, source port 0x0100. */
	struct mrc_ctl_ev_op_entry sent[NSTEV];
	memset(sent, 0, sizeof sent);
	for (int i = 0; i < NSTEV; i++) {
		sent[i].ev = MRC_CTL_EV_UNPOPULATED;
		sent[i].ev_new = make_ev((uint16_t)(0x1001 + i), (uint8_t)(1 + i % 2));
		sent[i].ev_new.val[2] = 0x01;
		sent[i].state = MRC_CTL_EV_GOOD;
	}
	sent[0].ev_new.val[4] = 1; /* past the format's 32 bits */
	memset(&ea, 0, sizeof ea);
	ea.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	ea.ev_op.entries = sent;
	ea.ev_op.entry_count = NSTEV;
	EXPECT_ERR(modify_ev(ctl, STEVP, &ea, MRC_CTL_EV_PROFILE_EV_OP), EINVAL);
	sent[0].ev_new.val[4] = 0;
	EXPECT_OK(modify_ev(ctl, STEVP, &ea, MRC_CTL_EV_PROFILE_EV_OP));
	ea.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_OK(modify_ev(ctl, STEVP, &ea, MRC_CTL_EV_PROFILE_STATE));
	struct mrc_qp *sa, *sb;
	connect_pair(app, STEVP, 0, 0, &sa, &sb);
	if (burst_seen(sa, 16, cap, &s)) {
		int ok = s.nlabels == NSTEV;
		for (int i = 0; i < NSTEV; i++) {
			int k = 0;
			while (k < s.nlabels && s.labels[k] != (uint32_t)(0x1001 + i))
				k++;
			ok = ok && k < s.nlabels;
		}
		CHECK(s.data > 0 && ok, "%d data packets with %d flow labels (first 0x%x), want "
		      "exactly 0x1001..0x%x", s.data, s.nlabels, s.nlabels ? s.labels[0] : 0,
		      0x1000 + NSTEV);
	}
	/* An STEV probe carries its EV's flow label. */
	preq[0].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
	preq[0].req_ev = sent[2].ev_new;
	if (cap >= 0)
		cap_read(cap, NULL);
	int nsrsp = -1;
	EXPECT_OK(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_EV_PROBE, preq, 1, 500000000u,
					     prsp, &nsrsp));
	CHECK(nsrsp == 1, "%d of 1 STEV probe answered", nsrsp);
	if (cap >= 0) {
		memset(&s, 0, sizeof s);
		cap_read(cap, &s);
		CHECK(s.probes >= 1 && s.probe_label == 0x1003, "%d probes seen, flow label 0x%x "
		      "(want 0x1003)", s.probes, s.probe_label);
	}

	/* ---- PORT_STATUS_UPDATE: port 2 down, then up --------------------------------------- */
	step = "port status update";
	struct mrc_ctl_ep_req ureq;
	memset(&ureq, 0, sizeof ureq);
	ureq.req_id = 70;
	ureq.sgid = gid;
	ureq.dgid = gid;
	ureq.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
	ureq.req_ev = make_ev(0, 1);
	ureq.op.port_status_update.port_status = 1u << 3; /* 1-based: port 3 is not there */
	int nu = -1;
	EXPECT_ERR(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &ureq, 1,
					      500000000u, prsp, &nu), EINVAL);
	for (int down = 1; down >= 0; down--) {
		/* bit N = port N: port 1 up, port 2 as `down` says */
		ureq.op.port_status_update.port_status = 1u << 1 | (down ? 0 : 1u << 2);
		nu = -1;
		EXPECT_OK(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &ureq, 1,
						     500000000u, prsp, &nu));
		CHECK(nu == 1 && prsp[0].req_id == 70 && prsp[0].port == 1 && prsp[0].rtt > 0,
		      "update acknowledged: %d answers, req %u on port %u", nu, prsp[0].req_id,
		      prsp[0].port);
		if (burst_seen(xa, 16, cap, &s))
			CHECK(s.data > 0 && (down ? s.data_plane1 == 0 : s.data_plane1 > 0),
			      "port 2 %s: %d of %d data packets from it", down ? "down" : "up",
			      s.data_plane1, s.data);
	}

	/* ---- Teardown ------------------------------------------------------------------- */
	step = "teardown";
	struct mrc_qp *pairs[] = { wa, wb, na, nb, ta, tb, aa, ab, ga, gb, xa, xb, sa, sb };
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
		EXPECT_OK(mrc_destroy_qp(pairs[i]));
	struct mrc_ctl_cc_profile_attr ccoff = { .profile_state = MRC_CTL_PROFILE_OFFLINE };
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_NONE, &ccoff, MRC_CTL_CC_PROFILE_STATE));
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_TINY, &ccoff, MRC_CTL_CC_PROFILE_STATE));
	EXPECT_OK(mrc_destroy_cq(evq));
	struct mrc_ctl_ev_profile_attr off = { .profile_state = MRC_CTL_PROFILE_OFFLINE };
	EXPECT_OK(modify_ev(ctl, GEN, &off, MRC_CTL_EV_PROFILE_STATE));
	EXPECT_OK(modify_ev(ctl, EXPL, &off, MRC_CTL_EV_PROFILE_STATE));
	EXPECT_OK(modify_ev(ctl, AUTO, &off, MRC_CTL_EV_PROFILE_STATE));
	EXPECT_OK(modify_ev(ctl, STEVP, &off, MRC_CTL_EV_PROFILE_STATE));
	off.profile_state = MRC_CTL_PROFILE_INIT;
	EXPECT_OK(modify_ev(ctl, GEN, &off, MRC_CTL_EV_PROFILE_STATE));
	EXPECT_OK(modify_ev(ctl, EXPL, &off, MRC_CTL_EV_PROFILE_STATE));
	fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
	EXPECT_OK(mrc_ctl_modify_ev_fmt_profile(ctl, FMT, &fa, MRC_CTL_EV_FMT_PROFILE_STATE));
	sfa.profile_state = MRC_CTL_PROFILE_OFFLINE;
	EXPECT_OK(mrc_ctl_modify_ev_fmt_profile(ctl, FMT_STEV, &sfa, MRC_CTL_EV_FMT_PROFILE_STATE));
	EXPECT_OK(mrc_destroy_cq(cq));
	EXPECT_OK(mrc_destroy_context(app));
	EXPECT_OK(mrc_destroy_context(ctl));
	if (cap >= 0)
		close(cap);
	EXPECT_OK(ibv_dereg_mr(mr_a));
	EXPECT_OK(ibv_dereg_mr(mr_b));
	EXPECT_OK(ibv_dealloc_pd(pd));
	EXPECT_OK(ibv_close_device(vctx));
	ibv_free_device_list(list);
	free(buf_a);
	free(buf_b);
	return finish("ocp_profiles_test", cap);
}
