/* What the gray-failure eBPF program (gray.bpf.c) and its loader (gray.cc) share: the counters
 * map's value. C, so that both clang -target bpf and the C++ compiler read it. Threading: a
 * layout. Counters only grow; one instance per attached port, reset when (re)attached. */
#ifndef MRC_GRAY_SHARED_H
#define MRC_GRAY_SHARED_H

#include <linux/types.h>

struct mrc_gray_counters {
  __u64 packets;   /* every packet the program saw, the delay line's returns included */
  __u64 held;      /* sent to the delay line (gray.h) */
  __u64 returned;  /* came back from the delay line (carrying the pass mark): passed as they are */
  __u64 corrupted; /* UDP packets with a zero checksum that left with one payload bit flipped */
  __u64 dropped;   /* packets chosen for corruption that carry a checksum: dropped instead */
};

#endif
