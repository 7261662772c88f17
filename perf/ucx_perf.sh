#!/usr/bin/env bash
# UCX (Debian's ucx_perftest 1.13, UCT over rc_verbs) through the verbs shim vs Debian's stock
# perftest through the same shim, side by side in one run on one namespace fabric: 2 hosts,
# 4 planes x 4 spines, host ports shaped to RATE Gbit/s (ceiling 4 x RATE). Needs root
# (network namespaces). Record the output in perf/RESULTS.md.
#   write bw   ucx_perftest -t put_bw -D zcopy (64 KiB, UCX's defaults otherwise)  vs
#              ib_write_bw -D SECS (64 KiB): MB/s, ratio ucx / perftest, and the ceiling
#   read bw    ucx_perftest -t get -D zcopy (64 KiB)  vs  ib_read_bw -D SECS (64 KiB)
#   latency    ucx_perftest -t put_lat (8 B, 2000 iterations: half the round trip, median)  vs
#              ib_write_lat (8 B, 2000 iterations, t_typical: half the round trip)
#   UCP tag    ucx_perftest -t tag_bw (64 KiB) and -t tag_lat (8 B, 2000 iterations) through
#              UCP (UCX_TLS=rc_verbs,ud_verbs: UCP wires rc_verbs up over ud_verbs; what Open
#              MPI's UCX PML uses)  vs  ib_write_bw and ib_write_lat above
# ucx_perftest runs a count, not a time: messages of 64 KiB, as many as perftest's bandwidth of
# the same run moves in SECS, so both run about as long. The fabric comes from
# perf/fabric_bw.sh (shared with faces_bw.sh and mpi_perf.sh).
#
# Usage: bash perf/ucx_perf.sh [seconds=10] [rate=2]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-10}
RATE=${2:-2}
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc_verbs_shim mrc-fabric --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
fabric_up "up$$" "$RATE"
CEIL_MBS=$(awk -v r="$RATE" 'BEGIN { printf "%.0f", 4 * r * 1000 / 8 }')

as_host() {
  local h=$1; shift
  ip netns exec "$PREFIX-h$h" env MRC_CONFIG="$CFG/h$h.json" MRC_STATS=0 \
    LD_PRELOAD="$SHIM" "$@"
}
# pair2 <server cmd...> -- <client cmd...>: server in host 0, client in host 1 (ucx_perftest's
# two ends take different arguments, unlike fabric_bw.sh's pair); the client's output on stdout.
pair2() {
  local srv=() ; while [[ $1 != -- ]]; do srv+=("$1"); shift; done; shift
  as_host 0 "${srv[@]}" > "$WORK/server" 2>&1 &
  local s=$!
  sleep 1
  as_host 1 "$@" || { cat "$WORK/server"; exit 1; }
  wait "$s"
}
perftest_bw() { awk '/^ *65536 /{print $4}' | tail -1; }
perftest_lat() { awk '/^ *8 /{print $5}' | tail -1; }  # t_typical, us
# ucx_perftest's Final line: iterations, lat p50 avg overall (us), MB/s avg overall, msg/s
ucx_final() { grep '^Final:' | tail -1; }

echo "# ucx_perf.sh: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), ${SECS}s runs," \
     "4 planes x 4 spines at $RATE Gbit/s (ceiling $CEIL_MBS MB/s), load $(cut -d' ' -f1-3 /proc/loadavg)"

wbw=$(pair2 ib_write_bw -D "$SECS" -s 65536 -- ib_write_bw -D "$SECS" -s 65536 "$SERVER" | perftest_bw)
ITERS=$(awk -v s="$SECS" -v b="$wbw" 'BEGIN { printf "%d", s * b * 1e6 / 65536 }')
u=$(pair2 ucx_perftest -- ucx_perftest "$SERVER" -t put_bw -x rc_verbs -d mrc0:1 -D zcopy -s 65536 -n "$ITERS" | ucx_final)
ubw=$(awk '{print $7}' <<<"$u"); uit=$(awk '{print $2}' <<<"$u"); ulat_all=$(awk '{print $5}' <<<"$u")
# First principles: messages x 64 KiB / (messages x overall us per message) = the MB/s printed.
echo "write bw: ib_write_bw $wbw MB/s; ucx put_bw $ubw MB/s ($uit x 64 KiB in" \
     "$(awk -v n="$uit" -v t="$ulat_all" 'BEGIN{printf "%.2f s = %.0f MB/s", n*t/1e6, 65536/t}'));" \
     "ratio ucx/perftest" \
     "$(awk -v a="$ubw" -v b="$wbw" 'BEGIN{printf "%.2f", a/b}'); of ceiling" \
     "$(awk -v a="$ubw" -v c="$CEIL_MBS" 'BEGIN{printf "%.2f", a/c}')"

rbw=$(pair2 ib_read_bw -D "$SECS" -s 65536 -- ib_read_bw -D "$SECS" -s 65536 "$SERVER" | perftest_bw)
ITERS=$(awk -v s="$SECS" -v b="$rbw" 'BEGIN { printf "%d", s * b * 1e6 / 65536 }')
u=$(pair2 ucx_perftest -- ucx_perftest "$SERVER" -t get -x rc_verbs -d mrc0:1 -D zcopy -s 65536 -n "$ITERS" | ucx_final)
ugbw=$(awk '{print $7}' <<<"$u")
echo "read bw: ib_read_bw $rbw MB/s; ucx get $ugbw MB/s; ratio" \
     "$(awk -v a="$ugbw" -v b="$rbw" 'BEGIN{printf "%.2f", a/b}')"

wlat=$(pair2 ib_write_lat -s 8 -n 2000 -- ib_write_lat -s 8 -n 2000 "$SERVER" | perftest_lat)
u=$(pair2 ucx_perftest -- ucx_perftest "$SERVER" -t put_lat -x rc_verbs -d mrc0:1 -s 8 -n 2000 | ucx_final)
ulat=$(awk '{print $3}' <<<"$u")
echo "latency (8 B, half round trip): ib_write_lat t_typical $wlat us; ucx put_lat p50 $ulat us;" \
     "ratio $(awk -v a="$ulat" -v b="$wlat" 'BEGIN{printf "%.2f", a/b}')"

# UCP: tag matching over rc_verbs (wired up through ud_verbs), as Open MPI's UCX PML uses it.
# shellcheck disable=SC2054  # the commas are UCX_TLS's list, not array separators
TLS=(env UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=mrc0:1)
ITERS=$(awk -v s="$SECS" -v b="$wbw" 'BEGIN { printf "%d", s * b * 1e6 / 65536 }')
u=$(pair2 "${TLS[@]}" ucx_perftest -- "${TLS[@]}" ucx_perftest "$SERVER" -t tag_bw -s 65536 -n "$ITERS" | ucx_final)
tbw=$(awk '{print $7}' <<<"$u"); tit=$(awk '{print $2}' <<<"$u"); tlat_all=$(awk '{print $5}' <<<"$u")
echo "tag bw: ib_write_bw $wbw MB/s; ucx tag_bw $tbw MB/s ($tit x 64 KiB in" \
     "$(awk -v n="$tit" -v t="$tlat_all" 'BEGIN{printf "%.2f s = %.0f MB/s", n*t/1e6, 65536/t}'));" \
     "ratio ucx/perftest $(awk -v a="$tbw" -v b="$wbw" 'BEGIN{printf "%.2f", a/b}'); of ceiling" \
     "$(awk -v a="$tbw" -v c="$CEIL_MBS" 'BEGIN{printf "%.2f", a/c}')"
u=$(pair2 "${TLS[@]}" ucx_perftest -- "${TLS[@]}" ucx_perftest "$SERVER" -t tag_lat -s 8 -n 2000 | ucx_final)
tlat=$(awk '{print $3}' <<<"$u")
echo "tag latency (8 B, half round trip): ib_write_lat t_typical $wlat us; ucx tag_lat p50 $tlat us;" \
     "ratio $(awk -v a="$tlat" -v b="$wlat" 'BEGIN{printf "%.2f", a/b}')"
