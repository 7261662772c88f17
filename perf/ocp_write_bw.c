/*
 * RDMA WRITE bandwidth between two hosts through the OCP MRC 1.0 API alone (mrc.h, with
 * libibverbs' types for the device, PD and MR), as perftest's ib_write_bw measures it: the
 * client keeps DEPTH signalled WRITEs of SIZE bytes in flight to one buffer of the server and
 * counts the bytes of the WRITEs that complete inside the window [MARGIN, SECONDS - MARGIN]
 * (completions at the client: the whole message acknowledged). Nothing is tuned: no QP hint,
 * no EV or CC profile, no MRC attribute; the device and the connection take their defaults.
 * perf/faces_bw.sh runs it beside the NCCL plugin and stock ib_write_bw through the verbs shim.
 *
 * The two sides exchange { GID, QPN, rkey, address } over TCP (the server listens on --port of
 * every address), then the client writes and, when done, tells the server to exit.
 *
 * Usage: ocp_write_bw [--size B] [--depth N] [--seconds S] [--margin S] [--port P] [SERVER]
 * (no SERVER: be the server). Prints "ocp_write_bw SIZE GBITS Gbit/s BYTES bytes in T s".
 * Links libmrc and the verbs shim (for ibv_get_device_list / ibv_open_device on mrc0).
 * Single-threaded. Exit 1 with a line naming the failed step on any error.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include <mrc/mrc.h>

struct opts {
	size_t size;       /* bytes per WRITE (ib_write_bw's default: 65536) */
	int depth;         /* WRITEs in flight (ib_write_bw's default: 128) */
	double seconds;    /* run time */
	double margin;     /* seconds left out at each end of the window */
	const char *port;  /* TCP port of the exchange */
	const char *server; /* NULL: this is the server */
};

/* What each side tells the other (host byte order: both ends run this program). */
struct peer_info {
	uint8_t gid[16];
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	uint64_t size;
};

static void die(const char *what)
{
	fprintf(stderr, "ocp_write_bw: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(1);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void usage(void)
{
	fprintf(stderr, "usage: ocp_write_bw [--size B] [--depth N] [--seconds S] [--margin S] "
			"[--port P] [SERVER]\n");
	exit(2);
}

static double parse_num(const char *flag, const char *s, double lo, double hi)
{
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "ocp_write_bw: %s: '%s' is not a number in [%g, %g]\n", flag, s, lo, hi);
		exit(2);
	}
	return v;
}

static struct opts parse(int argc, char **argv)
{
	struct opts o = { 65536, 128, 10, 2, "18516", NULL };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-') {
			if (o.server)
				usage();
			o.server = a;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(a, "--size"))
			o.size = (size_t)parse_num(a, v, 1, 1 << 30);
		else if (!strcmp(a, "--depth"))
			o.depth = (int)parse_num(a, v, 1, 4096);
		else if (!strcmp(a, "--seconds"))
			o.seconds = parse_num(a, v, 0.1, 3600);
		else if (!strcmp(a, "--margin"))
			o.margin = parse_num(a, v, 0, 3600);
		else if (!strcmp(a, "--port"))
			o.port = v;
		else
			usage();
	}
	if (2 * o.margin >= o.seconds) {
		fprintf(stderr, "ocp_write_bw: --margin %g leaves no window in --seconds %g\n",
			o.margin, o.seconds);
		exit(2);
	}
	return o;
}

/* The TCP connection of the exchange: the server accepts one client, the client connects. */
static int exchange_socket(const struct opts *o)
{
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_family = AF_UNSPEC;
	hints.ai_flags = o->server ? 0 : AI_PASSIVE;
	int rc = getaddrinfo(o->server, o->port, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "ocp_write_bw: address %s port %s: %s\n", o->server ? o->server : "*",
			o->port, gai_strerror(rc));
		exit(1);
	}
	int fd = -1;
	if (o->server) {
		/* The server may not listen yet: retry for 10 s. */
		for (double end = now_s() + 10; fd < 0 && now_s() < end;) {
			fd = socket(res->ai_family, res->ai_socktype, 0);
			if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
				close(fd);
				fd = -1;
				struct timespec t = { 0, 100 * 1000 * 1000 };
				nanosleep(&t, NULL);
			}
		}
		if (fd < 0)
			die("connect to the server");
	} else {
		int l = socket(res->ai_family, res->ai_socktype, 0);
		int one = 1;
		if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
		    bind(l, res->ai_addr, res->ai_addrlen) != 0 || listen(l, 1) != 0)
			die("listen");
		fd = accept(l, NULL, NULL);
		if (fd < 0)
			die("accept");
		close(l);
	}
	freeaddrinfo(res);
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t w = write(fd, (const char *)p + done, n - done);
		if (w <= 0)
			die("exchange: write");
		done += (size_t)w;
	}
}

static void recv_all(int fd, void *p, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = read(fd, (char *)p + done, n - done);
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			die("exchange: read");
		}
		done += (size_t)r;
	}
}

int main(int argc, char **argv)
{
	const struct opts o = parse(argc, argv);

	int ndev = 0;
	struct ibv_device **devs = ibv_get_device_list(&ndev);
	if (!devs || ndev < 1)
		die("ibv_get_device_list (no mrc0 device)");
	struct ibv_context *vctx = ibv_open_device(devs[0]);
	if (!vctx)
		die("ibv_open_device");
	struct ibv_port_attr port;
	if (ibv_query_port(vctx, 1, &port) != 0)
		die("ibv_query_port");
	struct ibv_pd *pd = ibv_alloc_pd(vctx);
	if (!pd)
		die("ibv_alloc_pd");
	struct mrc_context *ctx = mrc_create_context(vctx, NULL);
	if (!ctx)
		die("mrc_create_context");
	struct mrc_cq *cq = mrc_create_cq(ctx, 2 * o.depth, NULL, NULL, 0);
	if (!cq)
		die("mrc_create_cq");
	void *buf = aligned_alloc(4096, (o.size + 4095) / 4096 * 4096);
	if (!buf)
		die("buffer");
	memset(buf, 0x5a, o.size);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, o.size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr");

	struct mrc_qp_init_attr qi;
	memset(&qi, 0, sizeof qi);
	qi.send_cq = cq;
	qi.recv_cq = cq;
	qi.cap.max_send_wr = (uint32_t)o.depth;
	qi.cap.max_recv_wr = 1;
	qi.cap.max_send_sge = 1;
	qi.cap.max_recv_sge = 1;
	qi.sq_sig_all = 1;
	qi.pd = pd;
	struct mrc_qp *qp = mrc_create_qp(ctx, &qi);
	if (!qp)
		die("mrc_create_qp");

	struct ibv_qp_attr va;
	memset(&va, 0, sizeof va);
	va.qp_state = IBV_QPS_INIT;
	va.port_num = 1;
	va.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
			  NULL, 0) != 0)
		die("mrc_modify_qp INIT");

	struct peer_info me, peer;
	memset(&me, 0, sizeof me);
	union ibv_gid gid;
	if (ibv_query_gid(vctx, 1, 0, &gid) != 0)
		die("ibv_query_gid");
	memcpy(me.gid, gid.raw, sizeof me.gid);
	if (mrc_get_qpn(qp, &me.qpn) != 0)
		die("mrc_get_qpn");
	me.rkey = mr->rkey;
	me.addr = (uint64_t)(uintptr_t)buf;
	me.size = o.size;
	int fd = exchange_socket(&o);
	send_all(fd, &me, sizeof me);
	recv_all(fd, &peer, sizeof peer);
	if (o.server && peer.size < o.size) {
		fprintf(stderr, "ocp_write_bw: the server's buffer (%llu B) is smaller than --size %zu\n",
			(unsigned long long)peer.size, o.size);
		return 1;
	}

	memset(&va, 0, sizeof va);
	va.qp_state = IBV_QPS_RTR;
	va.path_mtu = port.active_mtu;
	va.dest_qp_num = peer.qpn;
	va.ah_attr.is_global = 1;
	memcpy(va.ah_attr.grh.dgid.raw, peer.gid, sizeof peer.gid);
	va.ah_attr.grh.hop_limit = 255;
	va.ah_attr.port_num = 1;
	if (mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
			  NULL, 0) != 0)
		die("mrc_modify_qp RTR");
	memset(&va, 0, sizeof va);
	va.qp_state = IBV_QPS_RTS;
	if (mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_SQ_PSN, NULL, 0) != 0)
		die("mrc_modify_qp RTS");
	/* Both ready before the first WRITE. */
	char go = 'g';
	send_all(fd, &go, 1);
	recv_all(fd, &go, 1);

	if (!o.server) {
		/* The server: wait for the client's end of run, then leave. */
		recv_all(fd, &go, 1);
		printf("ocp_write_bw server done\n");
		return 0;
	}

	struct ibv_sge sge = { (uint64_t)(uintptr_t)buf, (uint32_t)o.size, mr->lkey };
	struct ibv_send_wr wr;
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = peer.addr;
	wr.wr.rdma.rkey = peer.rkey;
	struct ibv_send_wr *bad = NULL;

	const double start = now_s(), from = start + o.margin, to = start + o.seconds - o.margin,
		     end = start + o.seconds;
	int inflight = 0;
	uint64_t counted = 0; /* bytes of WRITEs completed inside [from, to] */
	struct ibv_wc wc[32];
	for (;;) {
		const double t = now_s();
		while (t < end && inflight < o.depth) {
			if (mrc_post_send(qp, &wr, &bad) != 0)
				die("mrc_post_send");
			++inflight;
		}
		if (t >= end && inflight == 0)
			break;
		int n = mrc_poll_cq(cq, 32, wc);
		if (n < 0)
			die("mrc_poll_cq");
		const double done_at = n ? now_s() : t;
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "ocp_write_bw: WRITE completed with %s\n",
					ibv_wc_status_str(wc[i].status));
				return 1;
			}
			--inflight;
			if (done_at >= from && done_at <= to)
				counted += o.size;
		}
	}
	send_all(fd, &go, 1);
	const double window = to - from;
	printf("ocp_write_bw %zu %.3f Gbit/s %llu bytes in %.3f s\n", o.size,
	       (double)counted * 8 / window / 1e9, (unsigned long long)counted, window);

	close(fd);
	mrc_destroy_qp(qp);
	ibv_dereg_mr(mr);
	mrc_destroy_cq(cq);
	mrc_destroy_context(ctx);
	ibv_dealloc_pd(pd);
	ibv_close_device(vctx);
	ibv_free_device_list(devs);
	free(buf);
	return 0;
}
