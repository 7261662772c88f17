/*
 * OCP MRC 1.0 conformance of libmrc: a C11 program written against libmrc's mrc.h and
 * mrc_ctl.h only (plus <infiniband/verbs.h> for the device, PD and MR), linked with libmrc
 * and the verbs shim (not libibverbs), as an OCP MRC application would be.
 *
 * One process, one device (mrc0, two loopback planes: MRC_PLANES=::1,::1, MRC_PORT=P, so
 * plane 0 is [::1]:P and plane 1 [::1]:P+1): two MRC QPs connected to each other through
 * the GID ::1, and a controller context configuring the profiles they use.
 *
 * Where the API has no counters (which EVs and planes carry data), the test watches lo with
 * an AF_PACKET socket (root) and reads the MRC common header (docs/wire-format.md: byte 1 =
 * kind, bytes 12..15 = EV, big-endian); plane 1's datagrams leave from port P+1.
 *
 * Every failed check prints "FAIL file:line: what"; the exit status is 1 if any did, 77
 * (skipped) if all passed but the wire checks could not run (no AF_PACKET socket).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include <mrc/mrc.h>
#include <mrc/mrc_ctl.h>

#include "ocp_test.h"

/* ---- The EVs of the explicit profile: UDP format, 16 bits, two per port ---------------- */
enum { NEV = 4, EV_PROFILE = 1, FMT_PROFILE = 13, CC_PROFILE = 7 };
static const uint16_t ev_value[NEV] = { 0x1234, 0x1235, 0x1236, 0x1237 };
static const uint8_t ev_port[NEV] = { 1, 2, 1, 2 };

/* The EV the datapath carries for it: plane << 16 | value. */
static uint32_t wire_ev(int i) { return (uint32_t)(ev_port[i] - 1) << 16 | ev_value[i]; }

/* ---- Completions through the channel ------------------------------------------------------ */
static struct mrc_cq *send_cq, *recv_cq;
static int send_cq_tag, recv_cq_tag; /* their cq_context */

/* Collects `want` completions of the CQs bound to `ch`, sleeping in poll() on its fd. */
static int collect(struct mrc_comp_channel *ch, int fd, struct ibv_wc *wc, int want)
{
	int got = 0;
	double end = now_ms() + 5000;
	while (got < want && now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)(end - now_ms()) + 1) <= 0)
			break;
		struct mrc_cq *cq = NULL;
		void *ctx = NULL;
		if (mrc_get_cq_event(ch, &cq, &ctx) != 0) {
			CHECK(errno == EAGAIN, "mrc_get_cq_event: errno %d (%s)", errno, strerror(errno));
			continue;
		}
		CHECK((cq == send_cq && ctx == &send_cq_tag) || (cq == recv_cq && ctx == &recv_cq_tag),
		      "mrc_get_cq_event returned cq %p context %p, not one of ours", (void *)cq, ctx);
		mrc_ack_cq_events(cq, 1);
		EXPECT_OK(mrc_req_notify_cq(cq, 0)); /* re-armed before polling: nothing slips */
		int n;
		while (got < want && (n = mrc_poll_cq(cq, want - got, wc + got)) > 0)
			got += n;
	}
	return got;
}

/* ---- EV events ------------------------------------------------------------------------- */
struct evlog {
	struct mrc_ctl_ev_event e[256];
	int n;
};

static void ev_drain(struct mrc_cq *cq, struct evlog *log)
{
	struct mrc_ctl_ev_event buf[16];
	int n;
	while ((n = mrc_ctl_poll_ev_event(cq, 16, buf)) > 0)
		for (int i = 0; i < n && log->n < 256; i++)
			log->e[log->n++] = buf[i];
	CHECK(n == 0, "mrc_ctl_poll_ev_event: %d", n);
}

/* Index in the log of an event for EV i entering `state`, polling up to 3 s; -1 if none. */
static int ev_wait(struct mrc_cq *cq, struct evlog *log, int from, int i, int state)
{
	struct mrc_ctl_ev want = make_ev(ev_value[i], ev_port[i]);
	double end = now_ms() + 3000;
	for (;;) {
		ev_drain(cq, log);
		for (int k = from; k < log->n; k++)
			if (log->e[k].profile_id == EV_PROFILE && log->e[k].state == (enum mrc_ctl_ev_state)state &&
			    memcmp(&log->e[k].ev, &want, sizeof want) == 0)
				return k;
		if (now_ms() > end)
			return -1;
		sleep_us(1000);
	}
}

static int query_ev_state(struct mrc_context *ctl, int i)
{
	struct mrc_ctl_ev_op_entry e;
	memset(&e, 0, sizeof e);
	e.ev = make_ev(ev_value[i], ev_port[i]);
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
	a.ev_op.entries = &e;
	a.ev_op.entry_count = 1;
	if (mrc_ctl_query_ev_profile(ctl, EV_PROFILE, &a, MRC_CTL_EV_PROFILE_EV_OP) != 0)
		return 0;
	return e.state;
}

static int set_ev_state(struct mrc_context *ctl, int i, int state)
{
	struct mrc_ctl_ev_op_entry e;
	memset(&e, 0, sizeof e);
	e.ev = make_ev(ev_value[i], ev_port[i]);
	e.state = (enum mrc_ctl_ev_state)state;
	struct mrc_ctl_ev_profile_attr a;
	memset(&a, 0, sizeof a);
	a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
	a.ev_op.entries = &e;
	a.ev_op.entry_count = 1;
	return mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &a, MRC_CTL_EV_PROFILE_EV_OP);
}

/* ---- Writes ------------------------------------------------------------------------------ */
enum { BUF = 1 << 20 };
static unsigned char *buf_a, *buf_b;
static struct ibv_mr *mr_a, *mr_b;
static struct mrc_qp *qa, *qb;
static struct mrc_comp_channel *chan;
static int chan_fd;

/* `count` signaled WRITEs of `len` bytes from A to B, each completed without error. */
static void write_burst(int count, uint32_t len, uint64_t wr_id)
{
	struct ibv_wc wc[64];
	for (int k = 0; k < count; k++) {
		struct ibv_sge sge = { (uintptr_t)buf_a + k * len % (BUF - len), len, mr_a->lkey };
		struct ibv_send_wr wr, *bad = NULL;
		memset(&wr, 0, sizeof wr);
		wr.wr_id = wr_id + k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)buf_b + k * len % (BUF - len);
		wr.wr.rdma.rkey = mr_b->rkey;
		EXPECT_OK(mrc_post_send(qa, &wr, &bad));
	}
	int got = collect(chan, chan_fd, wc, count);
	CHECK(got == count, "%d of %d WRITE completions", got, count);
	for (int k = 0; k < got; k++)
		CHECK(wc[k].status == IBV_WC_SUCCESS && wc[k].opcode == IBV_WC_RDMA_WRITE,
		      "WRITE %llu: status %s opcode %d", (unsigned long long)wc[k].wr_id,
		      ibv_wc_status_str(wc[k].status), wc[k].opcode);
}

/* Everything mrc_query_qp says of a QP, for before/after checks. */
struct qp_snap {
  struct ibv_qp_attr v;
  struct mrc_qp_attr m;
  struct mrc_qp_init_attr init;
};
static void qp_snap(struct mrc_qp* qp, struct qp_snap* s) {
  memset(s, 0, sizeof *s);
  EXPECT_OK(mrc_query_qp(qp, &s->v,
                         IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_DEST_QPN | IBV_QP_AV | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN |
                             IBV_QP_ACCESS_FLAGS,
                         &s->m,
                         MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR | MRC_QP_MPR_DEST |
                             MRC_QP_TIMEOUT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID |
                             MRC_QP_HINT | MRC_QP_RETRY_CNT | MRC_QP_CAP | MRC_QP_VENDOR_CFG,
                         &s->init));
}

/* mrc_modify_qp with what it writes to stderr kept in line[n] (NUL-terminated); *err: its
 * errno. */
static int modify_captured(struct mrc_qp* qp, struct ibv_qp_attr* v, int vm, struct mrc_qp_attr* m,
                           int mm, char* line, size_t n, int* err) {
  FILE* tmp = tmpfile();
  REQUIRE(tmp, "tmpfile: %s", strerror(errno));
  fflush(stderr);
  int saved = dup(2);
  REQUIRE(saved >= 0 && dup2(fileno(tmp), 2) >= 0, "dup: %s", strerror(errno));
  errno = 0;
  int r = mrc_modify_qp(qp, v, vm, m, mm);
  *err = errno;
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t got = fread(line, 1, n - 1, tmp);
  line[got] = 0;
  fclose(tmp);
  return r;
}

int main(void)
{
	start_loopback_test();

	/* ---- Versions -------------------------------------------------------------------- */
	step = "versions";
	uint32_t cur = 0, last = 1, vcur = 0, vlast = 1;
	mrc_query_version(&cur, &last, &vcur, &vlast);
	CHECK(cur == MRC_API_CURRENT_VERSION && last == MRC_API_LAST_SUPPORTED_VERSION &&
	      vcur == MRC_VENDOR_API_CURRENT_VERSION && vlast == MRC_VENDOR_API_LAST_SUPPORTED_VERSION,
	      "mrc_query_version: 0x%x 0x%x 0x%x 0x%x", cur, last, vcur, vlast);
	mrc_query_version(NULL, NULL, NULL, NULL); /* tolerated */
	cur = 0;
	mrc_ctl_query_version(&cur, NULL, NULL, NULL);
	CHECK(cur == MRC_CTL_API_CURRENT_VERSION, "mrc_ctl_query_version: 0x%x", cur);

	/* ---- Device ---------------------------------------------------------------------- */
	step = "device";
	struct ibv_device **list;
	struct ibv_context *vctx = open_mrc0(&list);

	struct mrc_device_attr da;
	int supported = -1;
	EXPECT_OK(mrc_query_device(vctx, &da, &supported));
	CHECK(supported == 1, "mrc_query_device: supported %d", supported);
	CHECK(da.mrc_protocol_version & MRC_PROTOCOL_VERSION_1, "protocol versions 0x%x", da.mrc_protocol_version);
	CHECK(da.wimm_attr.max_wimm >= 128 && da.wimm_attr.max_wimm_dest >= 128, "max_wimm %u / %u",
	      da.wimm_attr.max_wimm, da.wimm_attr.max_wimm_dest);
	CHECK(da.mpr_attr.max_mpr >= 8 && da.mpr_attr.mpr_resolution >= 1, "max_mpr %u resolution %u",
	      da.mpr_attr.max_mpr, da.mpr_attr.mpr_resolution);
	CHECK(da.qp_attr.max_qp_hint >= 1, "max_qp_hint %u", da.qp_attr.max_qp_hint);
	CHECK(da.cap & MRC_DEVICE_CAP_TRIM_NACK, "cap 0x%x lacks TRIM_NACK", da.cap);
	supported = -1;
	EXPECT_OK(mrc_query_device_ex(vctx, NULL, &da, &supported));
	CHECK(supported == 1, "mrc_query_device_ex: supported %d", supported);
	EXPECT_ERR(mrc_query_device(NULL, &da, &supported), EINVAL);
	EXPECT_ERR(mrc_query_device(vctx, NULL, &supported), EINVAL);
	EXPECT_ERR(mrc_query_device(vctx, &da, NULL), EINVAL);

	struct mrc_ctl_device_attr ca;
	EXPECT_OK(mrc_ctl_query_device(vctx, &ca));
	CHECK(ca.phy_port_mask == 0x6, "phy_port_mask 0x%x: two planes are ports 1 and 2", ca.phy_port_mask);
	CHECK(ca.ev.ev_fmt_mode_mask & MRC_CTL_EV_FMT_MODE_UDP, "fmt modes 0x%x", ca.ev.ev_fmt_mode_mask);
	CHECK(ca.ev.ev_mode_mask & MRC_CTL_EV_MODE_EXP, "EV modes 0x%x", ca.ev.ev_mode_mask);
	CHECK(ca.ev.ev_max_count_profile >= NEV && ca.ev.ev_count_align >= 1, "EV limits");
	CHECK(ca.cc.algorithms && ca.cc.algorithms[0] && strcmp(ca.cc.algorithms[0], "uet-1.0-nscc") == 0,
	      "CC algorithms");
	CHECK((ca.opt_attr & MRC_CTL_OPT_CAP_EV_EVENT) && (ca.opt_attr & MRC_CTL_OPT_CAP_EP_OP_EV_PROBE),
	      "opt_attr 0x%x", ca.opt_attr);
	EXPECT_ERR(mrc_ctl_query_device(vctx, NULL), EINVAL);
	supported = -1;
	EXPECT_OK(mrc_ctl_query_device_ex(vctx, NULL, &ca, &supported));
	CHECK(supported == 1, "mrc_ctl_query_device_ex: supported %d", supported);

	/* ---- Contexts: the app's, the controller's, and a 1.0.0 one as the benchmark makes -- */
	step = "contexts";
	struct mrc_context_attr cur_attr = { MRC_API_CURRENT_VERSION, 0 };
	struct mrc_context *app = mrc_create_context(vctx, &cur_attr);
	struct mrc_context *ctl = mrc_create_context(vctx, NULL);
	struct mrc_context_attr bench_attr = { MRC_PROTOCOL_VERSION_1, 0 }; /* "0.0.1" */
	struct mrc_context *old = mrc_create_context(vctx, &bench_attr);
	REQUIRE(app && ctl && old, "mrc_create_context: errno %d (%s)", errno, strerror(errno));
	struct mrc_context_attr v2 = { MRC_API_VER(2, 0, 0), 0 };
	EXPECT_NULL(mrc_create_context(vctx, &v2), EOPNOTSUPP);
	EXPECT_NULL(mrc_create_context(NULL, NULL), EINVAL);

	/* ---- Controller: EV format profile (UDP, 16 bits) -------------------------------- */
	step = "EV format profile";
	struct mrc_ctl_ev_fmt_field f16 = { 16 };
	struct mrc_ctl_ev_fmt_profile_attr fa;
	memset(&fa, 0, sizeof fa);
	fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
	fa.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV; /* flow label + source port: 32 bits */
	struct mrc_ctl_ev_fmt_field f33 = { 33 };
	fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
	fa.ev_fmt_op.fmt_fields = &f33;
	fa.ev_fmt_op.fmt_field_count = 1;
	EXPECT_ERR(mrc_ctl_modify_ev_fmt_profile(ctl, 20, &fa, MRC_CTL_EV_FMT_PROFILE_STATE |
						  MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP), E2BIG);
	fa.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_SRV6; /* direct mode here: no fabric */
	EXPECT_ERR(mrc_ctl_modify_ev_fmt_profile(ctl, 20, &fa, MRC_CTL_EV_FMT_PROFILE_MODE), EOPNOTSUPP);
	fa.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
	struct mrc_ctl_ev_fmt_field f24 = { 24 };
	fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
	fa.ev_fmt_op.fmt_fields = &f24;
	fa.ev_fmt_op.fmt_field_count = 1;
	EXPECT_ERR(mrc_ctl_modify_ev_fmt_profile(ctl, FMT_PROFILE, &fa, MRC_CTL_EV_FMT_PROFILE_STATE |
						  MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP), E2BIG);
	fa.ev_fmt_op.fmt_fields = &f16;
	EXPECT_OK(mrc_ctl_modify_ev_fmt_profile(ctl, FMT_PROFILE, &fa, MRC_CTL_EV_FMT_PROFILE_STATE |
						MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP));
	fa.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_OK(mrc_ctl_modify_ev_fmt_profile(ctl, FMT_PROFILE, &fa, MRC_CTL_EV_FMT_PROFILE_STATE));
	struct mrc_ctl_ev_fmt_field qf[2];
	memset(&fa, 0, sizeof fa);
	fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
	fa.ev_fmt_op.fmt_fields = qf;
	fa.ev_fmt_op.fmt_field_count = 2;
	EXPECT_OK(mrc_ctl_query_ev_fmt_profile(ctl, FMT_PROFILE, &fa, MRC_CTL_EV_FMT_PROFILE_CUR_STATE |
					       MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP));
	CHECK(fa.cur_profile_state == MRC_CTL_PROFILE_ONLINE && fa.ev_fmt_mode == MRC_CTL_EV_FMT_MODE_UDP &&
	      fa.ev_fmt_op.fmt_field_count == 1 && qf[0].width == 16, "EV format profile query");

	/* ---- Controller: explicit EV profile ----------------------------------------------- */
	step = "EV profile";
	struct mrc_ctl_ev_profile_attr ea;
	memset(&ea, 0, sizeof ea);
	ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
	ea.ev_mode = (enum mrc_ctl_ev_mode)(MRC_CTL_EV_MODE_GEN | MRC_CTL_EV_MODE_EXP); /* not one */
	EXPECT_ERR(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_MODE), EINVAL);
	ea.ev_mode = MRC_CTL_EV_MODE_EXP;
	ea.ev_fmt_profile_id = FMT_PROFILE;
	ea.ev_count = NEV;
	ea.ev_min_active = 2;
	ea.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD | MRC_CTL_EV_DENIED;
	EXPECT_OK(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_STATE |
					    MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
					    MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
					    MRC_CTL_EV_PROFILE_EVENT_MASK));
	ea.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_ERR(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_STATE), EINVAL);
	struct mrc_ctl_ev_op_entry ent[NEV];
	memset(ent, 0, sizeof ent);
	for (int i = 0; i < NEV; i++) {
		ent[i].ev = MRC_CTL_EV_UNPOPULATED;
		ent[i].ev_new = make_ev(ev_value[i], ev_port[i]);
		ent[i].state = MRC_CTL_EV_GOOD;
	}
	memset(&ea, 0, sizeof ea);
	ea.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	ea.ev_op.entries = ent;
	ea.ev_op.entry_count = NEV;
	EXPECT_OK(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_EV_OP));
	struct mrc_ctl_ev_op_entry extra;
	memset(&extra, 0, sizeof extra);
	extra.ev = MRC_CTL_EV_UNPOPULATED;
	extra.ev_new = make_ev(0x4321, 1);
	ea.ev_op.entries = &extra;
	ea.ev_op.entry_count = 1;
	EXPECT_ERR(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_EV_OP), ENOENT);
	extra.ev = make_ev(ev_value[0], ev_port[0]);
	extra.ev_new = make_ev(0x4321, 3); /* no port 3 */
	EXPECT_ERR(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_EV_OP), EINVAL);
	ea.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_OK(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_STATE));
	struct mrc_ctl_ev_op_entry arr[NEV];
	memset(&ea, 0, sizeof ea);
	ea.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
	ea.ev_op.entries = arr;
	ea.ev_op.entry_count = 2;
	EXPECT_ERR(mrc_ctl_query_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_EV_OP), E2BIG);
	CHECK(ea.ev_op.entry_count == NEV, "QUERY_EV_ARRAY wants %d entries, said %d", NEV, ea.ev_op.entry_count);
	ea.ev_op.entry_count = NEV;
	EXPECT_OK(mrc_ctl_query_ev_profile(ctl, EV_PROFILE, &ea, MRC_CTL_EV_PROFILE_EV_OP |
					   MRC_CTL_EV_PROFILE_CUR_STATE | MRC_CTL_EV_PROFILE_COUNT));
	CHECK(ea.cur_profile_state == MRC_CTL_PROFILE_ONLINE && ea.ev_count == NEV, "EV profile query");
	for (int i = 0; i < NEV; i++) {
		struct mrc_ctl_ev want = make_ev(ev_value[i], ev_port[i]);
		CHECK(memcmp(&arr[i].ev, &want, sizeof want) == 0, "EV array slot %d", i);
		CHECK(arr[i].state == MRC_CTL_EV_UNKNOWN, "EV %d: state %d before any QP uses it", i, arr[i].state);
	}

	/* ---- Controller: CC profile (NSCC) ------------------------------------------------- */
	step = "CC profile";
	struct mrc_ctl_cc_nscc_cfg nscc = nscc_defaults();
	struct mrc_ctl_cc_profile_attr cc;
	memset(&cc, 0, sizeof cc);
	cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
	cc.algorithm = "cubic";
	EXPECT_ERR(mrc_ctl_modify_cc_profile(ctl, CC_PROFILE, &cc, MRC_CTL_CC_PROFILE_STATE |
					     MRC_CTL_CC_PROFILE_ALGORITHM), EINVAL);
	cc.algorithm = "uet-1.0-nscc";
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_PROFILE, &cc, MRC_CTL_CC_PROFILE_STATE |
					    MRC_CTL_CC_PROFILE_ALGORITHM));
	cc.profile_state = MRC_CTL_PROFILE_ONLINE;
	EXPECT_ERR(mrc_ctl_modify_cc_profile(ctl, CC_PROFILE, &cc, MRC_CTL_CC_PROFILE_STATE), EINVAL);
	struct mrc_ctl_cc_nscc_cfg bad_nscc = nscc;
	bad_nscc.gamma = 1.5f;
	cc.cc_config = &bad_nscc;
	EXPECT_ERR(mrc_ctl_modify_cc_profile(ctl, CC_PROFILE, &cc, MRC_CTL_CC_PROFILE_CONFIG), EINVAL);
	cc.cc_config = &nscc;
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_PROFILE, &cc, MRC_CTL_CC_PROFILE_STATE |
					    MRC_CTL_CC_PROFILE_CONFIG));
	memset(&cc, 0, sizeof cc);
	EXPECT_OK(mrc_ctl_query_cc_profile(ctl, CC_PROFILE, &cc, MRC_CTL_CC_PROFILE_CUR_STATE |
					   MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG));
	CHECK(cc.cur_profile_state == MRC_CTL_PROFILE_ONLINE && cc.algorithm &&
	      strcmp(cc.algorithm, "uet-1.0-nscc") == 0 && cc.cc_config && cc.cc_config != &nscc &&
	      memcmp(cc.cc_config, &nscc, sizeof nscc) == 0, "CC profile query: a library-owned copy");

	/* ---- App: channel, CQs, hint, PD, MRs ---------------------------------------------- */
	step = "channel, CQs, hint";
	REQUIRE(mrc_create_comp_channel(app, &chan) == 0, "mrc_create_comp_channel");
	EXPECT_OK(mrc_get_comp_channel_fd(chan, &chan_fd));
	CHECK(chan_fd >= 0 && fcntl(chan_fd, F_GETFD) >= 0, "channel fd %d is not a file descriptor", chan_fd);
	CHECK(fcntl(chan_fd, F_SETFL, fcntl(chan_fd, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	EXPECT_ERR(mrc_get_comp_channel_fd(chan, NULL), EINVAL);
	send_cq = mrc_create_cq(app, 256, &send_cq_tag, chan, 0);
	recv_cq = mrc_create_cq(app, 256, &recv_cq_tag, chan, 0);
	REQUIRE(send_cq && recv_cq, "mrc_create_cq: errno %d", errno);
	EXPECT_NULL(mrc_create_cq(app, 0, NULL, NULL, 0), EINVAL);
	EXPECT_NULL(mrc_create_cq(NULL, 16, NULL, NULL, 0), EINVAL);
	struct mrc_cq *plain_cq = mrc_create_cq(app, 16, NULL, NULL, 0);
	REQUIRE(plain_cq, "mrc_create_cq without a channel");
	EXPECT_ERR(mrc_req_notify_cq(plain_cq, 0), EINVAL);
	struct mrc_comp_channel *chan_fd_probe;
	EXPECT_ERR(mrc_create_comp_channel(NULL, &chan_fd_probe), EINVAL);

	struct mrc_qp_hint_init_attr hi;
	memset(&hi, 0, sizeof hi);
	hi.attr.num_qps_per_peer = 2;
	hi.attr.num_send_peers = 1;
	hi.attr.num_remote_recv_peers = 0;
	/* The NCCL plugin's CC hint: {u8 version 1; u8 rsvd[3]; u32 init, min, max rate Mbit/s}. */
	uint32_t rates[3] = { 10000, 1000, 50000 };
	hi.attr.vendor_cfg[0] = 1;
	memcpy(hi.attr.vendor_cfg + 4, rates, sizeof rates);
	struct mrc_qp_hint *hint = mrc_create_qp_hint(app, &hi);
	REQUIRE(hint, "mrc_create_qp_hint: errno %d", errno);
	struct mrc_qp_hint_attr ha;
	memset(&ha, 0, sizeof ha);
	ha.num_send_peers = 3;
	EXPECT_OK(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_NUM_SEND_PEERS));
	memset(&ha, 0, sizeof ha);
	EXPECT_OK(mrc_query_qp_hint(hint, &ha, MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS |
				    MRC_QP_HINT_NUM_REMOTE_RECV_PEERS | MRC_QP_HINT_VENDOR_CFG));
	CHECK(ha.num_qps_per_peer == 2 && ha.num_send_peers == 3 && ha.num_remote_recv_peers == 0 &&
	      memcmp(ha.vendor_cfg, hi.attr.vendor_cfg, sizeof ha.vendor_cfg) == 0, "QP hint query");
	EXPECT_ERR(mrc_query_qp_hint(hint, &ha, 1 << 5), EINVAL);
	ha.num_qps_per_peer = -1;
	EXPECT_ERR(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_NUM_QPS_PER_PEER), EINVAL);
	EXPECT_ERR(mrc_destroy_qp_hint(NULL), EINVAL);

	struct ibv_pd *pd = ibv_alloc_pd(vctx);
	REQUIRE(pd, "ibv_alloc_pd");
	buf_a = aligned_alloc(4096, BUF);
	buf_b = aligned_alloc(4096, BUF);
	REQUIRE(buf_a && buf_b, "memory");
	for (int i = 0; i < BUF; i++) {
		buf_a[i] = (unsigned char)(i * 7 + 3);
		buf_b[i] = 0;
	}
	mr_a = ibv_reg_mr(pd, buf_a, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mr_b = ibv_reg_mr(pd, buf_b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(mr_a && mr_b, "ibv_reg_mr");

	/* ---- QPs: create, INIT (hint, EV and CC profiles), RTR, RTS ------------------------- */
	step = "QP setup";
	struct mrc_qp_init_attr qi;
	memset(&qi, 0, sizeof qi);
	qi.send_cq = send_cq;
	qi.recv_cq = recv_cq;
	qi.cap.max_send_wr = 64;
	qi.cap.max_recv_wr = 64;
	qi.cap.max_send_sge = 1;
	qi.cap.max_recv_sge = 1;
	qi.pd = pd;
	qi.send_ops_flags = IBV_QP_EX_WITH_SEND;
	EXPECT_NULL(mrc_create_qp(app, &qi), EINVAL);
	qi.send_ops_flags = 0; /* as the benchmark: both writes */
	qa = mrc_create_qp(app, &qi);
	qb = mrc_create_qp(app, &qi);
	struct mrc_qp *qc = mrc_create_qp(app, &qi);
	REQUIRE(qa && qb && qc, "mrc_create_qp: errno %d", errno);
        {
          /* Defaults of a QP the app set nothing on: the connection policy every face gives
           * (engine::QpAttr's defaults, RetryPolicy.Default_IsTheConnectionPolicy): timeout 16
           * (67.1 ms, a verbs program's timeout 14), retry 7 + 5, MPR 1024 PSNs; none of the
           * OCP API's own. */
          struct ibv_qp_attr dv;
          struct mrc_qp_attr dm;
          struct mrc_qp_init_attr di;
          memset(&dm, 0, sizeof dm);
          EXPECT_OK(
              mrc_query_qp(qc, &dv, 0, &dm, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT | MRC_QP_MPR, &di));
          CHECK(dm.timeout == 16 && dm.retry.linear_cnt == 7 && dm.retry.exp_cnt == 5 &&
                    dm.mpr.mpr == 8,
                "defaults of a fresh QP: timeout %u, retry %u + %u, mpr %u", dm.timeout,
                dm.retry.linear_cnt, dm.retry.exp_cnt, dm.mpr.mpr);
        }
        CHECK(qi.cap.max_send_wr >= 64 && qi.cap.max_recv_wr >= 64, "granted caps written back");
	uint32_t qpn_a = 0, qpn_b = 0;
	EXPECT_OK(mrc_get_qpn(qa, &qpn_a));
	EXPECT_OK(mrc_get_qpn(qb, &qpn_b));
	CHECK(qpn_a && qpn_b && qpn_a != qpn_b, "QPNs %u %u", qpn_a, qpn_b);

	struct ibv_qp_attr va;
	memset(&va, 0, sizeof va);
	va.qp_state = IBV_QPS_INIT;
	va.pkey_index = 0;
	va.port_num = 1;
	va.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	const int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	struct mrc_qp_attr ma;
	memset(&ma, 0, sizeof ma);
	ma.qp_hint = hint;
	ma.profile.ev_profile_id = 99; /* not a profile */
	ma.profile.cc_profile_id = CC_PROFILE;
	const int init_mrc = MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID;
	EXPECT_ERR(mrc_modify_qp(qc, &va, init_mask, &ma, init_mrc), ENOENT);
	ma.profile.ev_profile_id = EV_PROFILE;
	EXPECT_OK(mrc_modify_qp(qa, &va, init_mask, &ma, init_mrc));
	EXPECT_OK(mrc_modify_qp(qb, &va, init_mask, &ma, init_mrc));
	EXPECT_ERR(mrc_destroy_qp_hint(hint), EBUSY);
	EXPECT_OK(mrc_destroy_qp(qc));

	union ibv_gid gid;
	REQUIRE(ibv_query_gid(vctx, 1, 0, &gid) == 0, "ibv_query_gid");
	struct ibv_qp_attr rtr;
	memset(&rtr, 0, sizeof rtr);
	rtr.qp_state = IBV_QPS_RTR;
	rtr.path_mtu = IBV_MTU_4096;
	rtr.ah_attr.is_global = 1;
	rtr.ah_attr.grh.dgid = gid;
	rtr.ah_attr.grh.hop_limit = 255;
	rtr.ah_attr.port_num = 1;
	rtr.rq_psn = 0;
	const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU;
	memset(&ma, 0, sizeof ma);
	ma.wimm.max_wimm_dest = 128;
	ma.mpr.mpr_dest = 8;
	EXPECT_ERR(mrc_modify_qp(qa, &rtr, IBV_QP_STATE, &ma, 0), EINVAL); /* no address */
	rtr.dest_qp_num = qpn_b;
	EXPECT_OK(mrc_modify_qp(qa, &rtr, rtr_mask, &ma, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST));
	rtr.dest_qp_num = qpn_a;
	EXPECT_OK(mrc_modify_qp(qb, &rtr, rtr_mask, &ma, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST));

	struct ibv_qp_attr rts;
	memset(&rts, 0, sizeof rts);
	rts.qp_state = IBV_QPS_RTS;
	rts.sq_psn = 0;
	rts.timeout = 14; /* verbs attributes MRC ignores, as the benchmark sends them */
	rts.retry_cnt = 14;
	rts.rnr_retry = 14;
	const int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
	memset(&ma, 0, sizeof ma);
	ma.wimm.max_wimm = 128;
	ma.mpr.mpr = 8;
	ma.retry.linear_cnt = 7;
	ma.retry.exp_cnt = 25;
	ma.timeout = 25;
	const int rts_mrc = MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT;
	EXPECT_ERR(mrc_modify_qp(qa, &rts, rts_mask, &ma, rts_mrc), EINVAL); /* timeout > 24 */
	ma.timeout = 16; /* 67 ms: no spurious timeouts on a loaded host */
	ma.retry.exp_cnt = 26;
	EXPECT_ERR(mrc_modify_qp(qa, &rts, rts_mask, &ma, rts_mrc), EINVAL);
	ma.retry.exp_cnt = 25;
	ma.mpr.mpr = 0;
	EXPECT_ERR(mrc_modify_qp(qa, &rts, rts_mask, &ma, rts_mrc), EINVAL);
	ma.mpr.mpr = 8;
	ma.cap = MRC_QP_CAP_DYNAMIC_MPR;
	EXPECT_ERR(mrc_modify_qp(qa, &rts, rts_mask, &ma, rts_mrc | MRC_QP_CAP), EINVAL);
	EXPECT_OK(mrc_modify_qp(qa, &rts, rts_mask, &ma, rts_mrc));
	EXPECT_OK(mrc_modify_qp(qb, &rts, rts_mask, &ma, rts_mrc));
	memset(&ma, 0, sizeof ma);
	ma.profile.ev_profile_id = EV_PROFILE;
	EXPECT_ERR(mrc_modify_qp(qa, NULL, 0, &ma, MRC_QP_EV_PROFILE_ID), EINVAL); /* INIT only */
	struct ibv_qp_attr bad_state = { .qp_state = IBV_QPS_INIT };
	EXPECT_ERR(mrc_modify_qp(qa, &bad_state, IBV_QP_STATE, NULL, 0), EINVAL); /* RTS -> INIT */
        /* Validate, then apply: a modify refused for its last field (the cap, checked after every
         * other attribute it sets) leaves the QP as it was, and its error line names the field. */
        step = "modify refused for its last field";
        {
          struct qp_snap before, after;
          qp_snap(qa, &before);
          struct ibv_qp_attr v = rts;
          struct mrc_qp_attr m;
          memset(&m, 0, sizeof m);
          m.wimm.max_wimm = 64;
          m.wimm.max_wimm_dest = 64;
          m.mpr.mpr_dest = 4;
          m.timeout = 18;
          m.retry.linear_cnt = 3;
          m.retry.exp_cnt = 4;
          memset(m.vendor_cfg, 0x5a, sizeof m.vendor_cfg);
          m.cap = MRC_QP_CAP_DYNAMIC_MPR;
          const int mm = MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_TIMEOUT |
                         MRC_QP_RETRY_CNT | MRC_QP_VENDOR_CFG | MRC_QP_CAP;
          char line[512];
          int err = 0;
          int r = modify_captured(qa, &v, rts_mask, &m, mm, line, sizeof line, &err);
          CHECK(r == -1 && err == EINVAL, "refused modify: got %d, errno %d", r, err);
          CHECK(strstr(line, "mrc_modify_qp") && strstr(line, "cap"),
                "the error line names the field: %s", line);
          qp_snap(qa, &after);
          CHECK(memcmp(&before, &after, sizeof before) == 0, "a refused modify changed QP A");
        }

        struct ibv_qp_attr qv;
	struct mrc_qp_attr qm;
	struct mrc_qp_init_attr qinit;
	memset(&qm, 0, sizeof qm);
	EXPECT_OK(mrc_query_qp(qa, &qv, IBV_QP_STATE, &qm,
			       MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR | MRC_QP_MPR_DEST |
			       MRC_QP_TIMEOUT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_HINT |
			       MRC_QP_RETRY_CNT | MRC_QP_CAP | MRC_QP_VENDOR_CFG, &qinit));
	CHECK(qv.qp_state == IBV_QPS_RTS, "QP A state %d", qv.qp_state);
	CHECK(qm.wimm.max_wimm == 128 && qm.wimm.max_wimm_dest == 128 && qm.mpr.mpr == 8 &&
	      qm.mpr.mpr_dest == 8 && qm.timeout == 16 && qm.retry.linear_cnt == 7 &&
	      qm.retry.exp_cnt == 25 && qm.profile.ev_profile_id == EV_PROFILE &&
	      qm.profile.cc_profile_id == CC_PROFILE && qm.qp_hint == hint && qm.cap == 0,
	      "MRC attributes of QP A as set");
	CHECK(qinit.send_cq == send_cq && qinit.recv_cq == recv_cq && qinit.pd == pd &&
	      qinit.send_ops_flags == (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM),
	      "init attributes of QP A");
	EXPECT_ERR(mrc_query_qp(qa, NULL, IBV_QP_STATE, NULL, 0, NULL), EINVAL);
	for (int i = 0; i < NEV; i++)
		CHECK(query_ev_state(ctl, i) == MRC_CTL_EV_GOOD, "EV %d in use by the QPs: state %d", i,
		      query_ev_state(ctl, i));

	/* ---- Data: WRITE and WRITE_WITH_IMM, completions through the channel ----------------- */
	step = "WRITE and WRITE_WITH_IMM";
	int cap = cap_open();
	if (cap < 0)
		fprintf(stderr, "note: no AF_PACKET socket (%s): wire checks skipped (run as root)\n",
			strerror(errno));
	struct ibv_recv_wr rwr[4], *rbad = NULL;
	memset(rwr, 0, sizeof rwr);
	for (int i = 0; i < 4; i++) {
		rwr[i].wr_id = 100 + i; /* no SGE: a WRITE_WITH_IMM lands at its RETH address */
		rwr[i].next = i < 3 ? &rwr[i + 1] : NULL;
	}
	EXPECT_OK(mrc_post_recv(qb, rwr, &rbad)); /* up front: MRC has no RNR */
	EXPECT_OK(mrc_req_notify_cq(send_cq, 0));
	EXPECT_OK(mrc_req_notify_cq(recv_cq, 0));
	struct ibv_sge sge1 = { (uintptr_t)buf_a, 65536, mr_a->lkey };
	struct ibv_sge sge2 = { (uintptr_t)buf_a + 65536, 4096, mr_a->lkey };
	struct ibv_send_wr w2 = { .wr_id = 2, .sg_list = &sge2, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(0xC0FFEE),
				  .wr.rdma = { (uintptr_t)buf_b + 65536, mr_b->rkey } };
	struct ibv_send_wr w1 = { .wr_id = 1, .next = &w2, .sg_list = &sge1, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { (uintptr_t)buf_b, mr_b->rkey } };
	struct ibv_send_wr *sbad = NULL;
	EXPECT_OK(mrc_post_send(qa, &w1, &sbad));
	struct ibv_wc wc[8];
	int got = collect(chan, chan_fd, wc, 3);
	CHECK(got == 3, "%d of 3 completions (2 writes, 1 IMM receive) through the channel", got);
	int writes = 0, imms = 0;
	for (int k = 0; k < got; k++) {
		CHECK(wc[k].status == IBV_WC_SUCCESS, "completion %d: %s", k, ibv_wc_status_str(wc[k].status));
		if (wc[k].opcode == IBV_WC_RDMA_WRITE) {
			writes++;
			CHECK(wc[k].wr_id == (uint64_t)writes && wc[k].qp_num == qpn_a,
			      "write completion %d: wr_id %llu qp %u", writes,
			      (unsigned long long)wc[k].wr_id, wc[k].qp_num);
		} else if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			imms++;
			CHECK(wc[k].wr_id == 100 && wc[k].qp_num == qpn_b && (wc[k].wc_flags & IBV_WC_WITH_IMM) &&
			      ntohl(wc[k].imm_data) == 0xC0FFEE && wc[k].byte_len == 4096,
			      "IMM receive: wr_id %llu qp %u flags 0x%x imm 0x%x len %u",
			      (unsigned long long)wc[k].wr_id, wc[k].qp_num, wc[k].wc_flags,
			      ntohl(wc[k].imm_data), wc[k].byte_len);
		}
	}
	CHECK(writes == 2 && imms == 1, "%d write and %d IMM completions", writes, imms);
	CHECK(memcmp(buf_a, buf_b, 65536 + 4096) == 0, "written bytes differ from the source");

	/* ---- Only WRITEs on MRC QPs ----------------------------------------------------------- */
	step = "refused opcodes";
	struct ibv_send_wr send = { .wr_id = 9, .sg_list = &sge2, .num_sge = 1, .opcode = IBV_WR_SEND,
				    .send_flags = IBV_SEND_SIGNALED };
	sbad = NULL;
	EXPECT_ERR(mrc_post_send(qa, &send, &sbad), EINVAL);
	CHECK(sbad == &send, "bad_wr names the SEND");
	struct ibv_send_wr read = send;
	read.opcode = IBV_WR_RDMA_READ;
	EXPECT_ERR(mrc_post_send(qa, &read, &sbad), EINVAL);
	struct ibv_send_wr w3 = w1;
	w3.wr_id = 3;
	w3.next = &send;
	sbad = NULL;
	EXPECT_ERR(mrc_post_send(qa, &w3, &sbad), EINVAL); /* the WRITE goes, the SEND does not */
	CHECK(sbad == &send && w3.next == &send, "bad_wr is the SEND; the chain is left as it was");
	got = collect(chan, chan_fd, wc, 1);
	CHECK(got == 1 && wc[0].wr_id == 3 && wc[0].status == IBV_WC_SUCCESS,
	      "the WRITE before the refused SEND completed");
	EXPECT_ERR(mrc_poll_cq(NULL, 1, wc), EINVAL);

	/* ---- max_wimm bounds the WRITE_WITH_IMMs in flight ------------------------------------ */
	step = "max_wimm";
	memset(&ma, 0, sizeof ma);
	EXPECT_ERR(mrc_modify_qp(qa, NULL, 0, &ma, MRC_QP_MAX_WIMM), EINVAL); /* 0: none could go */
	ma.wimm.max_wimm = 2;
	EXPECT_OK(mrc_modify_qp(qa, NULL, 0, &ma, MRC_QP_MAX_WIMM)); /* RTS -> RTS */
	struct ibv_send_wr wi[3];
	struct ibv_sge wsge[3];
	for (int i = 0; i < 3; i++) {
		wsge[i] = (struct ibv_sge){ (uintptr_t)buf_a + i * 4096, 4096, mr_a->lkey };
		wi[i] = (struct ibv_send_wr){ .wr_id = 40 + i, .next = i < 2 ? &wi[i + 1] : NULL,
					      .sg_list = &wsge[i], .num_sge = 1,
					      .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					      .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(40 + i),
					      .wr.rdma = { (uintptr_t)buf_b + i * 4096, mr_b->rkey } };
	}
	/* One call posts the chain at once: the third finds two in flight. */
	sbad = NULL;
	EXPECT_ERR(mrc_post_send(qa, wi, &sbad), ENOMEM);
	CHECK(sbad == &wi[2], "bad_wr is the third WRITE_WITH_IMM");
	got = collect(chan, chan_fd, wc, 4);
	CHECK(got == 4, "%d of 4 completions (2 WRITE_WITH_IMMs, 2 IMM receives)", got);
	for (int k = 0; k < got; k++)
		CHECK(wc[k].status == IBV_WC_SUCCESS && wc[k].wr_id != 42, "completion %d: %s wr_id %llu",
		      k, ibv_wc_status_str(wc[k].status), (unsigned long long)wc[k].wr_id);
	wi[2].next = NULL;
	EXPECT_OK(mrc_post_send(qa, &wi[2], &sbad)); /* the two completed: room again */
	got = collect(chan, chan_fd, wc, 2);
	CHECK(got == 2, "%d of 2 completions of the third WRITE_WITH_IMM", got);
	memset(&qm, 0, sizeof qm);
	EXPECT_OK(mrc_query_qp(qa, &qv, 0, &qm, MRC_QP_MAX_WIMM, &qinit));
	CHECK(qm.wimm.max_wimm == 2, "max_wimm reads back %u", qm.wimm.max_wimm);
	ma.wimm.max_wimm = 128;
	EXPECT_OK(mrc_modify_qp(qa, NULL, 0, &ma, MRC_QP_MAX_WIMM));
	for (int i = 0; i < 4; i++) rwr[i].next = i < 3 ? &rwr[i + 1] : NULL;
	EXPECT_OK(mrc_post_recv(qb, rwr, &rbad)); /* back to 4 posted */

	/* ---- The explicit EV list is what the datapath uses ------------------------------------ */
	step = "EV list on the wire";
	if (cap >= 0) {
		struct seen s = { 0 };
		cap_read(cap, &s);
		CHECK(s.data > 0, "no MRC data packet seen on lo");
		CHECK(s.wrong_plane == 0, "%d data packets left from another plane than their EV's", s.wrong_plane);
		for (int k = 0; k < s.nevs; k++) {
			int listed = 0;
			for (int i = 0; i < NEV; i++)
				listed |= s.evs[k] == wire_ev(i);
			CHECK(listed, "data sent on EV 0x%08x, not in the EV profile", s.evs[k]);
		}
		for (int i = 0; i < NEV; i++)
			CHECK(seen_ev(&s, wire_ev(i)), "no data on profile EV %d (0x%08x)", i, wire_ev(i));
	}

	/* ---- EV events: DENY and allow -------------------------------------------------------- */
	step = "EV events (DENY, allow)";
	struct mrc_comp_channel *ctl_chan;
	REQUIRE(mrc_create_comp_channel(ctl, &ctl_chan) == 0, "controller channel");
	int ctl_fd = -1;
	EXPECT_OK(mrc_get_comp_channel_fd(ctl_chan, &ctl_fd));
	CHECK(fcntl(ctl_fd, F_SETFL, fcntl(ctl_fd, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	int ev_tag;
	struct mrc_cq *ev_cq = mrc_ctl_create_ev_event_cq(ctl, 64, &ev_tag, ctl_chan, 0);
	struct mrc_cq *tiny_cq = mrc_ctl_create_ev_event_cq(ctl, 1, NULL, NULL, 0);
	struct mrc_cq *old_cq = mrc_ctl_create_ev_event_cq(old, 64, NULL, NULL, 0);
	REQUIRE(ev_cq && tiny_cq && old_cq, "mrc_ctl_create_ev_event_cq: errno %d", errno);
	EXPECT_ERR(mrc_poll_cq(ev_cq, 1, wc), EINVAL);
	CHECK(mrc_ctl_poll_ev_event(send_cq, 1, NULL) == -EINVAL, "poll_ev_event on a plain CQ: -EINVAL");
	CHECK(mrc_ctl_poll_ev_event(ev_cq, 0, NULL) == 0, "poll of 0 events");
	EXPECT_OK(mrc_req_notify_cq(ev_cq, 0));
	struct evlog evs = { .n = 0 };

	EXPECT_OK(set_ev_state(ctl, 0, MRC_CTL_EV_DENIED));
	struct pollfd pf = { .fd = ctl_fd, .events = POLLIN };
	CHECK(poll(&pf, 1, 3000) == 1, "the EV event CQ's channel did not wake");
	struct mrc_cq *which = NULL;
	void *which_ctx = NULL;
	EXPECT_OK(mrc_get_cq_event(ctl_chan, &which, &which_ctx));
	CHECK(which == ev_cq && which_ctx == &ev_tag, "channel event for the EV event CQ");
	mrc_ack_cq_events(ev_cq, 1);
	int k = ev_wait(ev_cq, &evs, 0, 0, MRC_CTL_EV_DENIED);
	CHECK(k >= 0, "no DENIED event for EV 0");
	CHECK(query_ev_state(ctl, 0) == MRC_CTL_EV_DENIED, "EV 0 state after DENY: %d", query_ev_state(ctl, 0));

	/* One event per profile-wide change (mrc_ctl.h: per EV state change of the profile), not
	 * one per QP copy: both QPs' copies went DENIED, the profile's EV did once. */
	sleep_us(100000);
	ev_drain(ev_cq, &evs);
	int denies = 0;
	for (int j = 0; j < evs.n; j++)
		denies += evs.e[j].state == MRC_CTL_EV_DENIED;
	CHECK(denies == 1, "%d DENIED events for one DENY of an EV two QPs hold", denies);

	/* The 1.0.0 context gets the 48-byte layout (no state): the DENY at byte 0 now, the
	 * allow's two events (ASSUMED_BAD, GOOD) at 48 and 96 below. */
	unsigned char raw[8 * sizeof(struct mrc_ctl_ev_event)];
	memset(raw, 0xAB, sizeof raw);
	int nold = 0;
	for (double end = now_ms() + 3000; nold < 1 && now_ms() < end; sleep_us(1000)) {
		int n = mrc_ctl_poll_ev_event(old_cq, 8 - nold, (struct mrc_ctl_ev_event *)(raw + nold * 48));
		CHECK(n >= 0, "mrc_ctl_poll_ev_event (1.0.0): %d", n);
		nold += n > 0 ? n : 0;
	}
	CHECK(nold == 1, "the 1.0.0 context's EV CQ holds %d events (want the one DENY)", nold);
	{
		uint64_t pid;
		memcpy(&pid, raw, 8);
		struct mrc_ctl_ev want = make_ev(ev_value[0], ev_port[0]);
		CHECK(pid == EV_PROFILE && memcmp(raw + 8, &want, sizeof want) == 0,
		      "1.0.0 event at byte 0 (profile %llu)", (unsigned long long)pid);
		CHECK(raw[48] == 0xAB, "1.0.0 events wrote past 48 bytes");
	}

	if (cap >= 0) {
		cap_read(cap, NULL);
		write_burst(16, 16384, 1000);
		struct seen s = { 0 };
		cap_read(cap, &s);
		CHECK(s.data > 0 && !seen_ev(&s, wire_ev(0)), "data still on the DENIED EV 0x%08x", wire_ev(0));
	}

	EXPECT_OK(set_ev_state(ctl, 0, MRC_CTL_EV_GOOD)); /* allow: probed, then GOOD */
	int k2 = ev_wait(ev_cq, &evs, k + 1, 0, MRC_CTL_EV_GOOD);
	CHECK(k2 >= 0, "no GOOD event for EV 0 after the allow");
	CHECK(ev_wait(ev_cq, &evs, k + 1, 0, MRC_CTL_EV_ASSUMED_BAD) >= 0,
	      "no ASSUMED_BAD event (allowed, being probed) for EV 0");
	CHECK(query_ev_state(ctl, 0) == MRC_CTL_EV_GOOD, "EV 0 state after the allow: %d", query_ev_state(ctl, 0));
	for (double end = now_ms() + 3000; nold < 3 && now_ms() < end; sleep_us(1000)) {
		int n = mrc_ctl_poll_ev_event(old_cq, 8 - nold, (struct mrc_ctl_ev_event *)(raw + nold * 48));
		nold += n > 0 ? n : 0;
	}
	CHECK(nold == 3, "the 1.0.0 context's EV CQ holds %d events (DENY, ASSUMED_BAD, GOOD)", nold);
	{
		uint64_t pid;
		memcpy(&pid, raw + 96, 8);
		struct mrc_ctl_ev want = make_ev(ev_value[0], ev_port[0]);
		CHECK(pid == EV_PROFILE && memcmp(raw + 96 + 8, &want, sizeof want) == 0,
		      "third 1.0.0 event at byte 96 (profile %llu)", (unsigned long long)pid);
		CHECK(raw[3 * 48] == 0xAB, "1.0.0 events wrote past 3 x 48 bytes");
	}
	/* tiny_cq (1 entry) kept the DENY and dropped the allow's two events, counted on the
	 * next one it takes: a second DENY. */
	struct mrc_ctl_ev_event one;
	CHECK(mrc_ctl_poll_ev_event(tiny_cq, 1, &one) == 1 && one.drop_count == 0 &&
	      one.state == MRC_CTL_EV_DENIED, "tiny EV CQ: first event (state %d, drop_count %u)",
	      one.state, one.drop_count);
	EXPECT_OK(set_ev_state(ctl, 0, MRC_CTL_EV_DENIED));
	CHECK(ev_wait(ev_cq, &evs, k2 + 1, 0, MRC_CTL_EV_DENIED) >= 0, "no DENIED event for the second DENY");
	CHECK(mrc_ctl_poll_ev_event(tiny_cq, 1, &one) == 1 && one.drop_count == 2,
	      "tiny EV CQ: the event after an overflow carries drop_count %u (want 2)", one.drop_count);
	EXPECT_OK(set_ev_state(ctl, 0, MRC_CTL_EV_GOOD));
	k2 = ev_wait(ev_cq, &evs, k2 + 1, 0, MRC_CTL_EV_GOOD);
	CHECK(k2 >= 0, "no GOOD event after the second allow");
	EXPECT_ERR(set_ev_state(ctl, 0, MRC_CTL_EV_ASSUMED_BAD), EINVAL);
	struct mrc_ctl_ev_profile_attr mask_attr = { .ev_event_mask = 1 << 5 };
	EXPECT_ERR(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &mask_attr, MRC_CTL_EV_PROFILE_EVENT_MASK), EINVAL);

        /* ---- EV probes (connectionless): an RTT for every EV -----------------------------------
         */
        step = "EV probes";
	struct mrc_ctl_ep_req req[NEV + 1];
	struct mrc_ctl_ep_rsp rsp[NEV + 1];
	memset(req, 0, sizeof req);
	for (int i = 0; i <= NEV; i++) {
		req[i].req_id = (uint16_t)(10 + i);
		req[i].sgid = gid;
		req[i].dgid = gid;
		req[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
		req[i].req_ev = i < NEV ? make_ev(ev_value[i], ev_port[i]) : make_ev(0x7777, 1);
	}
	int nrsp = -1;
        const double probe_start = now_ms();
        EXPECT_OK(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_EV_PROBE, req, NEV, 500000000u, rsp, &nrsp));
        const double probe_ns =
            (now_ms() - probe_start) * 1e6; /* no RTT can be longer than the call */
        CHECK(nrsp == NEV, "%d of %d probes answered", nrsp, NEV);
	for (int i = 0; i < NEV; i++) {
		int found = 0;
		for (int r = 0; r < nrsp; r++) {
			if (rsp[r].req_id != req[i].req_id)
				continue;
			found = 1;
                        CHECK(rsp[r].rtt > 0 && rsp[r].rtt <= probe_ns,
                              "probe of EV %d: rtt %u ns in a %.0f ns call", i, rsp[r].rtt,
                              probe_ns);
                        CHECK(rsp[r].port == ev_port[i], "probe of EV %d: port %u", i, rsp[r].port);
		}
		CHECK(found, "no answer for the probe of EV %d", i);
	}
        /* No QP needed: an EV no QP holds is probed and answered all the same. */
        nrsp = -1;
        EXPECT_OK(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_EV_PROBE, req + NEV, 1,
                                             500000000u, rsp, &nrsp));
        CHECK(nrsp == 1 && rsp[0].req_id == req[NEV].req_id && rsp[0].port == 1,
              "the probe of an EV no QP holds: %d answers", nrsp);
        /* A peer that does not answer (::2: nobody): what did answer comes back, and ETIMEDOUT. */
        struct mrc_ctl_ep_req two[2] = {req[NEV - 1], req[NEV - 1]};
        two[1].req_id = 99;
        memset(two[1].dgid.raw, 0, 16);
        two[1].dgid.raw[15] = 2;
        nrsp = -1;
        EXPECT_ERR(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_EV_PROBE, two, 2, 20000000u,
                                              rsp, &nrsp),
                   ETIMEDOUT);
        CHECK(nrsp == 1 && rsp[0].req_id == req[NEV - 1].req_id, "partial answer: %d", nrsp);
	EXPECT_ERR(mrc_ctl_ep_batch_send_wait(ctl, 64, MRC_CTL_EP_OP_EV_PROBE, req, 1, 1000000u, rsp, &nrsp), EINVAL);
	struct mrc_ctl_ep_req bad_mask = req[0];
	bad_mask.op.port_status_update.port_status = 1u << 0; /* 1-based: bit 0 is no port */
	EXPECT_ERR(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &bad_mask, 1,
					      1000000u, rsp, &nrsp), EINVAL);
	struct mrc_ctl_ep_req alien = req[0];
	memset(alien.sgid.raw, 0, 16);
	alien.sgid.raw[0] = 0x20;
	EXPECT_ERR(mrc_ctl_ep_batch_send_wait(ctl, 0, MRC_CTL_EP_OP_EV_PROBE, &alien, 1, 1000000u, rsp, &nrsp), EINVAL);

	/* ---- Ports: drain plane 1 (port 2) and bring it back ---------------------------------- */
	step = "port drain";
	struct mrc_ctl_port_attr pa = { MRC_CTL_PORT_ADMIN_ENABLED };
	EXPECT_OK(mrc_ctl_query_port(ctl, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
	CHECK(pa.port_admin_state == MRC_CTL_PORT_ADMIN_ENABLED, "port 2 starts enabled");
	pa.port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED;
	EXPECT_ERR(mrc_ctl_modify_port(ctl, 0, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL);
	EXPECT_ERR(mrc_ctl_modify_port(ctl, 3, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL);
	EXPECT_ERR(mrc_ctl_modify_port(ctl, 2, &pa, 1 << 4), EINVAL);
	struct mrc_ctl_port_attr odd = { (enum mrc_ctl_port_admin_state)5 };
	EXPECT_ERR(mrc_ctl_modify_port(ctl, 2, &odd, MRC_CTL_PORT_ADMIN_STATE), EINVAL);
	EXPECT_OK(mrc_ctl_modify_port(ctl, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
	memset(&pa, 0xff, sizeof pa);
	EXPECT_OK(mrc_ctl_query_port(ctl, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
	CHECK(pa.port_admin_state == MRC_CTL_PORT_ADMIN_DISABLED, "port 2 reads DISABLED");
	struct mrc_async_event ae;
	memset(&ae, 0, sizeof ae);
	EXPECT_OK(mrc_get_async_event(app, &ae));
	CHECK(ae.event_type == IBV_EVENT_PORT_ERR && ae.element.port_num == 2, "async event %d port %d",
	      ae.event_type, ae.element.port_num);
	mrc_ack_async_event(&ae);
	if (cap >= 0)
		cap_read(cap, NULL);
	write_burst(16, 16384, 2000); /* every write completes: traffic moved off plane 1 */
	if (cap >= 0) {
		struct seen s = { 0 };
		cap_read(cap, &s);
		CHECK(s.data > 0 && s.data_plane1 == 0, "drained plane 1 carried %d of %d data packets",
		      s.data_plane1, s.data);
	}
	pa.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
	EXPECT_OK(mrc_ctl_modify_port(ctl, 2, &pa, MRC_CTL_PORT_ADMIN_STATE));
	EXPECT_OK(mrc_get_async_event(app, &ae));
	CHECK(ae.event_type == IBV_EVENT_PORT_ACTIVE && ae.element.port_num == 2, "async event %d port %d",
	      ae.event_type, ae.element.port_num);
	write_burst(16, 16384, 3000);
	if (cap >= 0) {
		struct seen s = { 0 };
		cap_read(cap, &s);
		CHECK(s.data_plane1 > 0, "plane 1 carried none of %d data packets after undrain", s.data);
	}
	CHECK(memcmp(buf_a, buf_b, 16 * 16384) == 0, "bytes written during the drain differ");

	/* ---- Teardown, with the refusals on the way -------------------------------------------- */
	step = "teardown";
	struct mrc_ctl_ev_profile_attr off = { .profile_state = MRC_CTL_PROFILE_OFFLINE };
	EXPECT_ERR(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &off, MRC_CTL_EV_PROFILE_STATE), EBUSY);
	struct mrc_ctl_ev_fmt_profile_attr foff = { .profile_state = MRC_CTL_PROFILE_OFFLINE };
	EXPECT_ERR(mrc_ctl_modify_ev_fmt_profile(ctl, FMT_PROFILE, &foff, MRC_CTL_EV_FMT_PROFILE_STATE), EBUSY);
	EXPECT_ERR(mrc_destroy_cq(send_cq), EBUSY);
	EXPECT_ERR(mrc_destroy_comp_channel(chan), EBUSY);
	EXPECT_OK(mrc_destroy_qp(qa));
	EXPECT_OK(mrc_destroy_qp(qb));
	EXPECT_OK(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &off, MRC_CTL_EV_PROFILE_STATE));
	off.profile_state = MRC_CTL_PROFILE_INIT;
	EXPECT_OK(mrc_ctl_modify_ev_profile(ctl, EV_PROFILE, &off, MRC_CTL_EV_PROFILE_STATE));
	EXPECT_OK(mrc_ctl_modify_ev_fmt_profile(ctl, FMT_PROFILE, &foff, MRC_CTL_EV_FMT_PROFILE_STATE));
	struct mrc_ctl_cc_profile_attr ccoff = { .profile_state = MRC_CTL_PROFILE_OFFLINE };
	EXPECT_OK(mrc_ctl_modify_cc_profile(ctl, CC_PROFILE, &ccoff, MRC_CTL_CC_PROFILE_STATE));
	EXPECT_OK(mrc_destroy_qp_hint(hint));
	EXPECT_OK(mrc_destroy_cq(send_cq));
	EXPECT_OK(mrc_destroy_cq(recv_cq));
	EXPECT_OK(mrc_destroy_cq(plain_cq));
	EXPECT_OK(mrc_destroy_comp_channel(chan));
	EXPECT_OK(mrc_destroy_cq(ev_cq));
	EXPECT_OK(mrc_destroy_cq(tiny_cq));
	EXPECT_OK(mrc_destroy_context(old)); /* with old_cq still in it: the context cleans up */
	EXPECT_OK(mrc_destroy_comp_channel(ctl_chan));
	EXPECT_OK(mrc_destroy_context(ctl));
	EXPECT_OK(mrc_destroy_context(app));
	EXPECT_ERR(mrc_destroy_context(NULL), EINVAL);
	if (cap >= 0)
		close(cap);
	EXPECT_OK(ibv_dereg_mr(mr_a));
	EXPECT_OK(ibv_dereg_mr(mr_b));
	EXPECT_OK(ibv_dealloc_pd(pd));
	EXPECT_OK(ibv_close_device(vctx));
	ibv_free_device_list(list);
	free(buf_a);
	free(buf_b);

	/* (Without the capture the EV list, DENY and port drain were not seen steering real
	 * packets.) */
	return finish("ocp_conformance_test", cap);
}
