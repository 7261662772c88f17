/*
 * What the C tests of the OCP MRC API (tests/ocp/ *.c) share: checks that count failures
 * and print "FAIL file:line: what", a watchdog naming the step that hung, time, and a
 * capture of lo (AF_PACKET, root) that reads the MRC common header of the datagrams between
 * the two loopback planes [::1]:port0 and [::1]:port0 + 1 (docs/wire-format.md: byte 1 =
 * kind, bytes 12..15 = EV, big-endian). Each test is one C11 program: everything here is
 * static. Single-threaded.
 */
#ifndef MRC_TESTS_OCP_OCP_TEST_H
#define MRC_TESTS_OCP_OCP_TEST_H

#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include <mrc/mrc_ctl.h>

static int failures;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                     \
			fprintf(stderr, "  [%s]\n", #cond);               \
			failures++;                                       \
		}                                                         \
	} while (0)

/* A check the rest of the test depends on. */
#define REQUIRE(cond, ...)                                                \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                     \
			fprintf(stderr, "  [%s] (cannot go on)\n", #cond); \
			exit(1);                                          \
		}                                                         \
	} while (0)

/* `call` must fail with -1 and errno `err`. */
#define EXPECT_ERR(call, err)                                                      \
	do {                                                                       \
		errno = 0;                                                         \
		int r_ = (call);                                                   \
		int e_ = errno;                                                    \
		CHECK(r_ == -1 && e_ == (err), "%s: got %d, errno %d (%s); want -1, %s", \
		      #call, r_, e_, strerror(e_), #err);                          \
	} while (0)

/* `call` (a pointer) must be NULL with errno `err`. */
#define EXPECT_NULL(call, err)                                                    \
	do {                                                                      \
		errno = 0;                                                        \
		void *p_ = (void *)(call);                                        \
		int e_ = errno;                                                   \
		CHECK(p_ == NULL && e_ == (err), "%s: got %p, errno %d (%s); want NULL, %s", \
		      #call, p_, e_, strerror(e_), #err);                         \
	} while (0)

#define EXPECT_OK(call)                                                         \
	do {                                                                    \
		errno = 0;                                                      \
		int r_ = (call);                                                \
		CHECK(r_ == 0, "%s: got %d, errno %d (%s)", #call, r_, errno, strerror(errno)); \
	} while (0)

static const char *volatile step = "start"; /* what the test is doing, for the watchdog */

static inline void watchdog(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: the test hung for 60 s (watchdog) in: ";
	(void)!write(2, msg, sizeof msg - 1);
	(void)!write(2, step, strlen(step));
	(void)!write(2, "\n", 1);
	_exit(1);
}

static inline double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static inline void sleep_us(long us)
{
	struct timespec t = { us / 1000000, (us % 1000000) * 1000 };
	nanosleep(&t, NULL);
}

static inline struct mrc_ctl_ev make_ev(uint16_t value, uint8_t port)
{
	struct mrc_ctl_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.val[0] = value >> 8; /* MSB first */
	ev.val[1] = value & 0xff;
	ev.port = port;
	return ev;
}

/* ---- Watching lo ------------------------------------------------------------------------- */
static int port0; /* MRC_PORT: plane 0; plane 1 is port0 + 1 */

struct seen {
	int data;        /* MRC data packets (WRITE, WRITE_IMM) between our planes */
	int data_plane1; /* ... of them from plane 1's socket */
	int wrong_plane; /* data whose EV names another plane than the socket it left from */
	/* MRC connectionless probes (dst_qpn 0: mrc_ctl_ep_batch_send_wait's). A QP's own path
	 * probes are not counted: one of an earlier step's QPs once sent one with the socket's
	 * traffic class while a check of req_tc's watched. */
	int probes;
	int probe_tclass; /* the IPv6 traffic class of the last probe counted */
	int acks;        /* MRC ACKs */
	int data_before_ack; /* data packets captured before the first ACK */
	/* The most data packets outstanding at once as the wire shows it: a data packet's PSN
	 * less the last cumulative PSN an ACK carried (before any ACK, the first data PSN), + 1.
	 * One QP's burst at a time; a GSO capture counts by its first datagram's PSN. */
	int max_outstanding;
	int have_base;    /* (cap_read's) base_psn is set */
	uint32_t base_psn; /* (cap_read's) the last cumulative PSN, or the first data PSN */
	uint32_t evs[64];
	int nevs;        /* distinct data EVs */
	uint32_t labels[64];
	int nlabels;     /* distinct IPv6 flow labels of the data packets */
	uint32_t probe_label; /* the IPv6 flow label of the last probe counted */
};

static inline int cap_open(void)
{
	int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IPV6));
	if (fd < 0)
		return -1;
	struct sockaddr_ll sa = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IPV6),
				  .sll_ifindex = (int)if_nametoindex("lo") };
	int sz = 32 << 20;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Exit status for "could not run every check" (ctest's SKIP_RETURN_CODE, as automake's). */
#define SKIP_EXIT 77

/* Reads everything captured so far into *s (NULL: discard). */
static inline void cap_read(int fd, struct seen *s)
{
	unsigned char b[70000];
	for (;;) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(fd, b, sizeof b, 0, (struct sockaddr *)&from, &fl);
		if (n < 0)
			return;
		if (!s || from.sll_pkttype == PACKET_OUTGOING || n < 40 + 8 + 16 || b[6] != 17)
			continue; /* each datagram once (lo shows it twice), UDP only */
		const unsigned char *udp = b + 40, *mrc = udp + 8;
		int sport = udp[0] << 8 | udp[1], dport = udp[2] << 8 | udp[3];
		if ((sport != port0 && sport != port0 + 1) || (dport != port0 && dport != port0 + 1))
			continue;
		uint32_t ev = (uint32_t)mrc[12] << 24 | (uint32_t)mrc[13] << 16 | mrc[14] << 8 | mrc[15];
		const uint32_t label = (uint32_t)(b[1] & 0x0f) << 16 | (uint32_t)b[2] << 8 | b[3];
		const uint32_t dst_qpn = (uint32_t)mrc[4] << 24 | (uint32_t)mrc[5] << 16 |
					 mrc[6] << 8 | mrc[7];
		if (mrc[1] == 32 && dst_qpn == 0) {
			s->probes++;
			s->probe_tclass = (b[0] & 0x0f) << 4 | b[1] >> 4;
			s->probe_label = label;
		}
		if (mrc[1] == 16) {
			s->acks++;
			if (n >= 48 + 36) { /* ACK: cum_psn right after the 32-byte common header */
				s->base_psn = (uint32_t)mrc[32] << 24 | (uint32_t)mrc[33] << 16 |
					      (uint32_t)mrc[34] << 8 | mrc[35];
				s->have_base = 1;
			}
		}
		if (mrc[1] != 1 && mrc[1] != 2)
			continue;
		s->data++;
		if (s->acks == 0)
			s->data_before_ack++;
		const uint32_t psn = (uint32_t)mrc[16] << 24 | (uint32_t)mrc[17] << 16 |
				     (uint32_t)mrc[18] << 8 | mrc[19];
		if (!s->have_base) {
			s->base_psn = psn;
			s->have_base = 1;
		}
		const int out = (int)(int32_t)(psn - s->base_psn) + 1;
		if (out > s->max_outstanding)
			s->max_outstanding = out;
		if (sport == port0 + 1)
			s->data_plane1++;
		if ((ev >> 16) != (uint32_t)(sport - port0))
			s->wrong_plane++;
		int k = 0;
		while (k < s->nevs && s->evs[k] != ev)
			k++;
		if (k == s->nevs && s->nevs < 64)
			s->evs[s->nevs++] = ev;
		k = 0;
		while (k < s->nlabels && s->labels[k] != label)
			k++;
		if (k == s->nlabels && s->nlabels < 64)
			s->labels[s->nlabels++] = label;
	}
}

static inline int seen_ev(const struct seen *s, uint32_t ev)
{
	for (int k = 0; k < s->nevs; k++)
		if (s->evs[k] == ev)
			return 1;
	return 0;
}

/* NSCC settings for a CC profile: the UEC defaults for 100 Gb/s and a 12 us base RTT. */
static inline struct mrc_ctl_cc_nscc_cfg nscc_defaults(void)
{
	struct mrc_ctl_cc_nscc_cfg c = {
		.disable_qa = 0, .adjust_bytes_threshold = 32768, .adjust_period_threshold = 12000,
		.base_rtt = 12000, .eta = 614.4f, .fi = 20480, .fi_scale = 0.25f, .gamma = 0.8f,
		.max_md_jump = 0.5f, .max_cwnd = 225000, .qa_gate = 3, .qa_threshold = 36000,
		.target_delay = 9000,
	};
	return c;
}

/* Arms the watchdog (60 s) and reads the loopback planes' environment (port0). */
static inline void start_loopback_test(void)
{
	signal(SIGALRM, watchdog);
	alarm(60);
	const char *port_env = getenv("MRC_PORT");
	const char *planes_env = getenv("MRC_PLANES");
	REQUIRE(port_env && planes_env && strcmp(planes_env, "::1,::1") == 0,
		"run with MRC_PLANES=::1,::1 and MRC_PORT set (ctest does)");
	port0 = atoi(port_env);
}

/* Opens mrc0 (the verbs shim's device); *list is the device list, for ibv_free_device_list. */
static inline struct ibv_context *open_mrc0(struct ibv_device ***list)
{
	int ndev = 0;
	*list = ibv_get_device_list(&ndev);
	REQUIRE(*list && ndev >= 1, "no verbs device (is the verbs shim linked?)");
	struct ibv_context *vctx = NULL;
	for (int i = 0; i < ndev && !vctx; i++)
		if (strcmp(ibv_get_device_name((*list)[i]), "mrc0") == 0)
			vctx = ibv_open_device((*list)[i]);
	REQUIRE(vctx, "mrc0 did not open");
	return vctx;
}

/* The exit status of test `name`: 1 if a check failed; SKIP_EXIT if every check passed but
 * the wire checks did not run (`cap` < 0: no capture; not a pass, ctest reports it as
 * skipped); else 0. */
static inline int finish(const char *name, int cap)
{
	if (failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
		return 1;
	}
	if (cap < 0) {
		printf("%s: SKIPPED: the wire checks need an AF_PACKET socket (root); every other "
		       "check passed\n", name);
		return SKIP_EXIT;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

#endif /* MRC_TESTS_OCP_OCP_TEST_H */
