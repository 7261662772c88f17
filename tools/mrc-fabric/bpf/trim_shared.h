/* What the trim eBPF program (trim.bpf.c) and its loader (trim.cc) share: the counters map's
 * value. C, so that both clang -target bpf and the C++ compiler read it. Threading: a layout.
 *
 * Counters only grow; one instance per attached port, reset when the program is (re)attached.
 * "Bytes" are L2 bytes (Ethernet header included) as they left the program, after trimming. */
#ifndef MRC_TRIM_SHARED_H
#define MRC_TRIM_SHARED_H

#include <linux/types.h>

struct mrc_trim_counters {
  __u64 packets;    /* every packet the program saw */
  __u64 bytes;      /* their bytes after trimming */
  __u64 trimmed;    /* MRC data packets cut to their headers */
  __u64 ce_marked;  /* ECT packets that left with CE */
  __u64 gso_passed; /* GSO skbs (gso_segs > 1): counted, maybe marked, never trimmed */
  __u64 not_mrc;    /* packets that are not MRC (other protocols, ports, or unparsable) */
};

#endif
