/* tc clsact egress program of one namespace-fabric port with a gray failure (gray.h): sends a
 * share of the packets to the port's delay line, flips one payload bit of a share of the UDP
 * packets that carry no checksum, and drops those of the share that carry one. Loaded once per
 * port by gray.cc, which sets the .rodata configuration before load.
 * Threading: runs on any CPU for any packet; counters with atomic adds. Neighbour discovery
 * and packets that are not IPv6 pass untouched. */
/* The libbpf headers need the kernel's types first. */
/* clang-format off */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
/* clang-format on */

#include "gray_shared.h"

char LICENSE[] SEC("license") = "GPL";

/* Configuration, written by the loader before load. */
const volatile __u32 hold_per10k = 0;    /* share of packets sent to the delay line, 1/10000 */
const volatile __u32 line_ifindex = 0;   /* the delay line's capture interface */
const volatile __u32 corrupt_per10k = 0; /* share of UDP/TCP packets corrupted (or dropped) */
const volatile __u32 pass_mark = 0;      /* skb->mark of what the delay line sends back */

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mrc_gray_counters);
} gray_counters SEC(".maps");

enum {
  kOffIp6 = ETH_HLEN,
  kOffNextHeader = kOffIp6 + 6,
  kOffL4 = kOffIp6 + 40,
  kOffUdpCheck = kOffL4 + 6,
  kOffUdpPayload = kOffL4 + 8,
  kIcmpv6 = 58,
  kNdFirst = 133, /* router solicitation .. redirect */
  kNdLast = 137,
};

static __always_inline int chosen(__u32 per10k) {
  return per10k != 0 && bpf_get_prandom_u32() % 10000 < per10k;
}

SEC("tc")
int mrc_gray(struct __sk_buff* skb) {
  const __u32 zero = 0;
  struct mrc_gray_counters* c = bpf_map_lookup_elem(&gray_counters, &zero);
  if (!c) return TC_ACT_UNSPEC;
  __sync_fetch_and_add(&c->packets, 1);
  /* A packet back from the delay line is not held again, but may be corrupted: the held share
   * is not exempt from corruption. */
  int returned = 0;
  if (pass_mark != 0 && skb->mark == pass_mark) {
    __sync_fetch_and_add(&c->returned, 1);
    skb->mark = 0;
    returned = 1;
  }
  if (skb->protocol != bpf_htons(ETH_P_IPV6)) return TC_ACT_UNSPEC;
  __u8 nh = 0;
  if (bpf_skb_load_bytes(skb, kOffNextHeader, &nh, 1) < 0) return TC_ACT_UNSPEC;
  if (nh == kIcmpv6) {
    __u8 type = 0;
    if (bpf_skb_load_bytes(skb, kOffL4, &type, 1) < 0) return TC_ACT_UNSPEC;
    if (type >= kNdFirst && type <= kNdLast) return TC_ACT_UNSPEC;
  }
  if (!returned && chosen(hold_per10k)) {
    __sync_fetch_and_add(&c->held, 1);
    return bpf_redirect(line_ifindex, 0);
  }
  if ((nh != IPPROTO_UDP && nh != IPPROTO_TCP) || !chosen(corrupt_per10k)) return TC_ACT_UNSPEC;
  __u16 check = 1;
  if (nh == IPPROTO_UDP && bpf_skb_load_bytes(skb, kOffUdpCheck, &check, 2) < 0)
    return TC_ACT_UNSPEC;
  if (check != 0 || skb->gso_segs > 1 || skb->len <= kOffUdpPayload) {
    __sync_fetch_and_add(&c->dropped, 1);
    return TC_ACT_SHOT;
  }
  const __u32 r = bpf_get_prandom_u32();
  __u32 off = kOffUdpPayload + (r >> 3) % (skb->len - kOffUdpPayload);
  if (off > 0xffff) return TC_ACT_UNSPEC; /* bounds for the verifier */
  __u8 b = 0;
  if (bpf_skb_load_bytes(skb, off, &b, 1) < 0) return TC_ACT_UNSPEC;
  b ^= (__u8)(1u << (r & 7));
  if (bpf_skb_store_bytes(skb, off, &b, 1, 0) < 0) return TC_ACT_UNSPEC;
  __sync_fetch_and_add(&c->corrupted, 1);
  return TC_ACT_UNSPEC;
}
