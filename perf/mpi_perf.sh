#!/usr/bin/env bash
# Open MPI over MRC vs Open MPI over TCP, in one run on one namespace fabric (2 hosts, 4 planes x
# 4 spines, host ports shaped to RATE Gbit/s; ceiling 4 x RATE). Needs root (namespaces) and
# openmpi-bin / libopenmpi-dev (scripts/deps.sh). Record the output in perf/RESULTS.md.
#   mrc  mpirun --mca pml ucx --mca btl self, UCX_TLS=rc_verbs,ud_verbs on mrc0 through the
#        verbs shim (nothing else UCX could fall back on)
#   tcp  mpirun --mca pml ob1 --mca btl self,tcp over the management network (mgmt0), as
#        tests/mpi/ns_mpi_test.cc runs it. mgmt0 is an unshaped veth pair and bridge: TCP gets
#        a faster link than MRC's four shaped ports (its ceiling is the machine's memory copy
#        rate, not 4 x RATE), so a ratio over 1 at large sizes is partly the link. Over the
#        plane ports (IPv6 only) Open MPI 4.1.4's TCP BTL did not connect ("connect() to
#        fcbb:bbbb:f000:e:::1024 failed: Operation now in progress") and hung.
# The program is perf/mpi_pingpong (an osu_latency-style ping-pong, 1 B .. MAX, every size's
# first message each way checked byte by byte); each runs ROUNDS times alternately (load on the
# machine hits both alike) and the table is the median half round trip per size, the MB/s it
# gives, and the ratio mrc / tcp of the times (below 1: MRC quicker). The first-principles
# check is mpi_pingpong's own bytes / seconds, printed for the last mrc run, and a plain TCP
# ping-pong over mgmt0 (the floor under the TCP BTL's small-message time).
# The MRC ranks run with the shim preloaded (tests/mpi/mpi_rank.sh), the TCP ranks without it.
#
# Usage: bash perf/mpi_perf.sh [rounds=3] [max_bytes=1048576] [iters=200] [rate=2]
# (iters: timed round trips per size up to 64 KiB, a tenth of it above, at least 20)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${1:-3}
MAX=${2:-1048576}
ITERS=${3:-200}
RATE=${4:-2}
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc_verbs_shim mrc-fabric mpi_pingpong \
  --parallel "$(nproc)" >/dev/null
[[ -x $PWD/build/perf/mpi_pingpong ]] || { echo "mpi_perf.sh: no mpicc (apt-get install libopenmpi-dev)" >&2; exit 2; }
source perf/fabric_bw.sh
fabric_up "mpp$$" "$RATE"
CLIENT=$(ip -n "$PREFIX-h1" -4 -o addr show dev mgmt0 | awk '{print $4}' | cut -d/ -f1)

# run <out> <shim or ""> <mpirun options...>: mpirun in host 0's namespace, one rank per host.
# The two "hosts" share this machine's cores, which mpirun cannot know (one slot per host): a
# rank polling for a message holds the core its peer needs, and without yielding Open MPI's TCP
# BTL took 10-44 ms per half round trip (a plain TCP ping-pong: 9 us). mpi_yield_when_idle 1
# (what Open MPI sets itself on a node it knows is oversubscribed) for both transports.
run() {
  local out=$1 shim=$2; shift 2
  ip netns exec "$PREFIX-h0" env MRC_MPI_PREFIX="$PREFIX" MRC_MPI_SHIM="$shim" \
    mpirun --allow-run-as-root -np 2 --host "$SERVER,$CLIENT" \
    --mca plm_rsh_agent "$PWD/tests/mpi/mpi_agent.sh" --mca oob_tcp_if_include mgmt0 \
    --mca mpi_yield_when_idle 1 "$@" \
    "$PWD/tests/mpi/mpi_rank.sh" "$PWD/$B/perf/mpi_pingpong" "$MAX" "$ITERS" \
    > "$WORK/$out" 2>&1 || { cat "$WORK/$out" >&2; exit 1; }
}
# tcp_rtt: a plain TCP ping-pong (1 byte, TCP_NODELAY, 300 round trips) over mgmt0 between
# the two hosts: the link's own half round trip (median, us), the floor under the TCP BTL's.
tcp_rtt() {
  local py='import socket, sys, time
if sys.argv[1] == "s":
    l = socket.create_server(("0.0.0.0", 7999), reuse_port=True)
    c = l.accept()[0]
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while (b := c.recv(1)):
        c.sendall(b)
else:
    c = socket.create_connection((sys.argv[2], 7999))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ts = []
    for i in range(300):
        t = time.perf_counter(); c.sendall(b"x"); c.recv(1); ts.append(time.perf_counter() - t)
    print("%.1f" % (sorted(ts)[150] * 1e6 / 2))'
  ip netns exec "$PREFIX-h0" timeout 60 python3 -c "$py" s & local s=$!
  sleep 1
  ip netns exec "$PREFIX-h1" timeout 60 python3 -c "$py" c "$SERVER"
  wait "$s"
}
mrc() { run "$1" "$SHIM" --mca pml ucx --mca btl self -x UCX_TLS=rc_verbs,ud_verbs -x UCX_NET_DEVICES=mrc0:1; }
tcp() { run "$1" "" --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include mgmt0; }

echo "# mpi_perf.sh: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), $ROUNDS rounds," \
     "$ITERS iterations, 4 planes x 4 spines at $RATE Gbit/s (ceiling $(( 4 * RATE * 1000 / 8 )) MB/s)," \
     "tcp over mgmt0 (unshaped), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < ROUNDS; ++r)); do
  if (( r % 2 )); then tcp "tcp-$r"; mrc "mrc-$r"; else mrc "mrc-$r"; tcp "tcp-$r"; fi
done
printf '%-9s %12s %12s %10s %10s %9s\n' bytes mrc_us tcp_us mrc_MB/s tcp_MB/s mrc/tcp
for n in $(awk '$1 == "mpi_pingpong" && $2 != "total" {print $2}' "$WORK/mrc-0"); do
  m=$(cat "$WORK"/mrc-* | awk -v n="$n" '$1 == "mpi_pingpong" && $2 == n {print $3}' | median)
  t=$(cat "$WORK"/tcp-* | awk -v n="$n" '$1 == "mpi_pingpong" && $2 == n {print $3}' | median)
  awk -v n="$n" -v m="$m" -v t="$t" \
    'BEGIN { printf "%-9d %12.2f %12.2f %10.1f %10.1f %9.2f\n", n, m, t, n / m, n / t, m / t }'
done
echo "plain TCP over mgmt0 (python, 1 B, TCP_NODELAY): half round trip p50 $(tcp_rtt) us"
last=$(( ROUNDS - 1 ))
awk '$2 == "total" {printf "check (mrc run %s): %.0f bytes in %.3f s timed = %.1f MB/s over all sizes\n",
  r, $3, $4, $3 / $4 / 1e6}' r="$last" "$WORK/mrc-$last"
