/* tc clsact egress program of one namespace-fabric switch port: models the port's queue as a
 * virtual queue drained at the port rate, trims MRC data packets (UDP over IPv6 or IPv4) to
 * their headers above trim_bytes and sets ECN CE above ecn_bytes (DESIGN.md section 5). Loaded once
 * per port by trim.cc, which sets the .rodata configuration before load. Threading: runs on any CPU
 * for any packet; the queue is updated under a bpf_spin_lock and the counters with atomic adds.
 * Never drops: anything it cannot parse passes unchanged. */
/* The libbpf headers need the kernel's types first. */
/* clang-format off */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
/* clang-format on */

#include "trim_shared.h"

char LICENSE[] SEC("license") = "GPL";

/* Configuration, written by the loader before load. */
const volatile __u64 rate_q24 = 0;  /* port rate in bytes per ns, fixed point << 24 */
const volatile __u64 max_dt_ns = 0; /* idle time that surely empties the queue (dt*rate_q24 fits) */
const volatile __u32 trim_bytes = 0; /* trim MRC data when the queue holds more than this */
const volatile __u32 ecn_bytes = 0;  /* mark ECT packets CE when it holds more than this */
const volatile __u16 udp_port = 0;   /* MRC UDP destination port, host order */

struct queue {
  struct bpf_spin_lock lock;
  __u64 backlog; /* bytes */
  __u64 last_ns; /* bpf_ktime_get_ns() of the last update */
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct queue);
} trim_queue SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mrc_trim_counters);
} trim_counters SEC(".maps");

/* Byte offsets from the start of the frame: Ethernet, then IPv6 without extension headers or
 * IPv4 without options, then UDP, then the MRC common header (mrc/wire/wire.h). */
enum {
  kOffIp = ETH_HLEN,
  kOffIp6PayloadLen = kOffIp + 4,
  kOffIp4TotalLen = kOffIp + 2,
  kOffIp4Check = kOffIp + 10,
  kIp6HeaderSize = 40,
  kIp4HeaderSize = 20,
  kUdpHeaderSize = 8,
  kMrcCommonSize = 32,
  kMrcDataHeaderSize = 72, /* common + data extension */
  kMrcVersion = 1,
  kNetFlagTrimmed = 0x01,
  kEcn6Mask = 0x30, /* the ECN bits of the traffic class, in the second IPv6 byte */
  kEcn4Mask = 0x03, /* the ECN bits of the IPv4 TOS byte */
};

enum action { kPass, kMark, kTrim };

struct view {
  __u8 ip[12];    /* IPv6: version .. hop limit (8 bytes); IPv4: version/IHL .. checksum */
  int v4;         /* IPv4 (else IPv6) */
  __u32 off_udp;  /* frame offset of the UDP header */
  __u32 trim_len; /* frame length once trimmed: up to the end of the MRC data header */
  int ect;        /* ECT(0) or ECT(1) */
  int mrc;        /* a well-formed MRC common header at the configured port */
  int trimmable;  /* an MRC data packet with payload */
};

static __always_inline int mrc_kind_ok(__u8 kind) {
  return (kind >= 1 && kind <= 6) || kind == 16 || kind == 17 || kind == 32 || kind == 33;
}

static __always_inline void parse(struct __sk_buff* skb, struct view* v) {
  __u8 ecn, proto;
  if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
    if (bpf_skb_load_bytes(skb, kOffIp, v->ip, 8) < 0) return;
    ecn = (v->ip[1] & kEcn6Mask) >> 4;
    proto = v->ip[6];
    v->off_udp = kOffIp + kIp6HeaderSize;
  } else if (skb->protocol == bpf_htons(ETH_P_IP)) {
    if (bpf_skb_load_bytes(skb, kOffIp, v->ip, 12) < 0) return;
    if (v->ip[0] != 0x45) return; /* not version 4 with a 20-byte header (options: not MRC) */
    ecn = v->ip[1] & kEcn4Mask;
    /* A fragment (more fragments, or an offset) carries no whole MRC packet. */
    if ((v->ip[6] & 0x3f) != 0 || v->ip[7] != 0) {
      v->ect = ecn == 1 || ecn == 2;
      v->v4 = 1;
      return;
    }
    proto = v->ip[9];
    v->v4 = 1;
    v->off_udp = kOffIp + kIp4HeaderSize;
  } else {
    return;
  }
  v->ect = ecn == 1 || ecn == 2;
  v->trim_len = v->off_udp + kUdpHeaderSize + kMrcDataHeaderSize;
  if (proto != IPPROTO_UDP) return;
  __u8 h[12]; /* UDP header, then version, kind, flags, net_flags */
  if (bpf_skb_load_bytes(skb, v->off_udp, h, sizeof h) < 0) return;
  const __u16 dport = (__u16)(h[2] << 8 | h[3]);
  const __u16 udp_len = (__u16)(h[4] << 8 | h[5]);
  if (dport != udp_port || udp_len < kUdpHeaderSize + kMrcCommonSize) return;
  if (h[8] != kMrcVersion || !mrc_kind_ok(h[9])) return;
  v->mrc = 1;
  v->trimmable =
      h[9] <= 6 && udp_len > kUdpHeaderSize + kMrcDataHeaderSize && skb->len > v->trim_len;
}

/* Drains the queue to `now`, adds the packet and picks what to do with it. */
static __always_inline enum action enqueue(struct queue* q, __u64 now, __u32 len, int gso,
                                           const struct view* v) {
  enum action a = kPass;
  bpf_spin_lock(&q->lock);
  __u64 backlog = q->backlog;
  if (now > q->last_ns) {
    const __u64 dt = now - q->last_ns;
    if (dt >= max_dt_ns) {
      backlog = 0;
    } else {
      const __u64 drained = (dt * rate_q24) >> 24;
      backlog = backlog > drained ? backlog - drained : 0;
    }
    q->last_ns = now;
  }
  if (!gso && v->trimmable && backlog > trim_bytes) {
    a = kTrim;
    len = v->trim_len;
  } else if (v->ect && backlog > ecn_bytes) {
    a = kMark;
  }
  q->backlog = backlog + len;
  bpf_spin_unlock(&q->lock);
  return a;
}

static __always_inline int trim(struct __sk_buff* skb, const struct view* v) {
  const __u32 off_udp = v->off_udp, trim_len = v->trim_len;
  if (bpf_skb_change_tail(skb, trim_len, 0) < 0) return -1;
  const __be16 udp_len = bpf_htons(trim_len - off_udp);
  const __u16 zero = 0; /* no UDP checksum: IPv4 allows it, IPv6 receivers must accept it */
  __u8 net_flags;
  if (bpf_skb_load_bytes(skb, off_udp + kUdpHeaderSize + 3, &net_flags, 1) < 0) return -1;
  net_flags |= kNetFlagTrimmed;
  if (v->v4) {
    __be16 old_total;
    __builtin_memcpy(&old_total, &v->ip[2], 2);
    const __be16 total = bpf_htons(trim_len - kOffIp);
    if (bpf_skb_store_bytes(skb, kOffIp4TotalLen, &total, 2, BPF_F_RECOMPUTE_CSUM) < 0 ||
        bpf_l3_csum_replace(skb, kOffIp4Check, old_total, total, 2) < 0)
      return -1;
  } else {
    if (bpf_skb_store_bytes(skb, kOffIp6PayloadLen, &udp_len, 2, BPF_F_RECOMPUTE_CSUM) < 0)
      return -1;
  }
  if (bpf_skb_store_bytes(skb, off_udp + 4, &udp_len, 2, BPF_F_RECOMPUTE_CSUM) < 0 ||
      bpf_skb_store_bytes(skb, off_udp + 6, &zero, 2, BPF_F_RECOMPUTE_CSUM) < 0 ||
      bpf_skb_store_bytes(skb, off_udp + kUdpHeaderSize + 3, &net_flags, 1, BPF_F_RECOMPUTE_CSUM) <
          0)
    return -1;
  return 0;
}

static __always_inline int mark_ce(struct __sk_buff* skb, const struct view* v) {
  if (v->v4) {
    /* The TOS byte is the low half of the header's first 16-bit word: the checksum follows. */
    const __u8 tos = v->ip[1] | kEcn4Mask;
    const __u8 word[2] = {v->ip[0], tos};
    __be16 old_word, new_word;
    __builtin_memcpy(&old_word, &v->ip[0], 2);
    __builtin_memcpy(&new_word, word, 2);
    if (bpf_skb_store_bytes(skb, kOffIp + 1, &tos, 1, BPF_F_RECOMPUTE_CSUM) < 0) return -1;
    return bpf_l3_csum_replace(skb, kOffIp4Check, old_word, new_word, 2);
  }
  const __u8 b = v->ip[1] | kEcn6Mask;
  return bpf_skb_store_bytes(skb, kOffIp + 1, &b, 1, BPF_F_RECOMPUTE_CSUM);
}

SEC("tc")
int mrc_trim(struct __sk_buff* skb) {
  const __u32 zero = 0;
  struct queue* q = bpf_map_lookup_elem(&trim_queue, &zero);
  struct mrc_trim_counters* c = bpf_map_lookup_elem(&trim_counters, &zero);
  if (!q || !c) return TC_ACT_OK;

  struct view v = {};
  parse(skb, &v);
  const int gso = skb->gso_segs > 1;
  const enum action a = enqueue(q, bpf_ktime_get_ns(), skb->len, gso, &v);

  if (a == kTrim && trim(skb, &v) == 0) __sync_fetch_and_add(&c->trimmed, 1);
  if (a == kMark && mark_ce(skb, &v) == 0) __sync_fetch_and_add(&c->ce_marked, 1);
  __sync_fetch_and_add(&c->packets, 1);
  __sync_fetch_and_add(&c->bytes, skb->len);
  if (gso) __sync_fetch_and_add(&c->gso_passed, 1);
  if (!v.mrc) __sync_fetch_and_add(&c->not_mrc, 1);
  return TC_ACT_OK;
}
