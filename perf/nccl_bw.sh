#!/usr/bin/env bash
# NCCL-style send/recv bandwidth through libnccl-net-mrc vs plain TCP sockets (NCCL's socket
# transport), side by side on one namespace fabric: 2 hosts, 4 planes x 4 spines, host ports
# shaped to RATE Gbit/s (the physical ceiling is 4 x RATE). Needs root (network namespaces).
# Prints each transport's Gbit/s and the ratios; record them in perf/RESULTS.md. The plugin
# runs twice: one QP per connection (the default) and four (NCCL_MRC_QPS_PER_CONN=4).
#
# Usage: bash perf/nccl_bw.sh [seconds=10] [rate=2] [message bytes=4194304]
#
# Latency mode: the round trip of one message at a time, 8 B .. 64 KiB (nccl_bw --latency),
# through the plugin and through NCCL-style TCP sockets (one connection each way, size then
# payload, non-blocking sockets polled without sleeping) on the same fabric, one after the
# other; prints p50 and p99 per size and MRC / TCP for each. Then the same for the step of a
# collective (nccl_bw --latency --exchange): both ranks post a receive and a send at once and
# wait for both, so a send may wait for the other rank's receive (the plugin's CTS record, or
# its eager ring for small messages: NCCL_MRC_EAGER).
#
# Usage: bash perf/nccl_bw.sh latency [round trips per size=1000] [rate=2]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODE=bandwidth
if [[ ${1:-} == latency ]]; then
  MODE=latency
  shift
  ITERS=${1:-1000}
  RATE=${2:-2}
  [[ $ITERS =~ ^[1-9][0-9]*$ ]] || { echo "nccl_bw.sh: round trips must be a positive integer, got '$ITERS'" >&2; exit 2; }
else
  SECS=${1:-10}
  RATE=${2:-2}
  SIZE=${3:-4194304}
fi
PREFIX="nbw$$"
B=build
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target nccl_bw nccl-net-mrc mrc-fabric --parallel "$(nproc)" >/dev/null
FAB=$B/tools/mrc-fabric
WORK=$(mktemp -d)
cleanup() { "$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM
"$FAB" up --prefix "$PREFIX" --hosts 2 --planes 4 --spines 4 --rate "$RATE" >/dev/null
echo '{}' > "$WORK/empty.json"

# start <label> <transport> [args...]: receiver in host 1, sender in host 0, both waited for;
# $QPS QPs per connection (default 1). Output in $WORK/out-<label>-<role>.
start() {
  local label=$1 transport=$2; shift 2
  local rv="$WORK/rv-$label"
  for h in 0 1; do
    local role=send; [[ $h == 1 ]] && role=recv
    env MRC_CONFIG="$WORK/empty.json" MRC_PATH_MODE=srv6 MRC_FABRIC="/run/mrc-fabric/$PREFIX/fabric.json" \
        MRC_HOST=$h MRC_PORT=0 \
        NCCL_MRC_QPS_PER_CONN="${QPS:-1}" \
        ip netns exec "$PREFIX-h$h" "$B/perf/nccl_bw" --transport "$transport" --role $role \
        --rendezvous "$rv" --plugin "$B/lib/libnccl-net-mrc.so" "$@" \
        > "$WORK/out-$label-$role" 2>&1 &
    eval "pid_$h=\$!"
  done
  wait "$pid_0" "$pid_1" || { cat "$WORK"/out-"$label"-*; exit 1; }
}

if [[ $MODE == latency ]]; then
  start mrc mrc --latency --iterations "$ITERS"
  start tcp tcp --latency --iterations "$ITERS"
  printf 'fabric: 4 planes x %s Gbit/s; one message in flight, %s round trips per size (after 100 untimed)\n' "$RATE" "$ITERS"
  printf '  %8s  %10s %10s  %10s %10s  %9s %9s\n' size "MRC p50" "MRC p99" "TCP p50" "TCP p99" "p50 ratio" "p99 ratio"
  # "<transport> latency <bytes> B p50 <us> us p99 <us> us (...)"
  join <(awk '$2 == "latency" {print $3, $6, $9}' "$WORK/out-mrc-send" | sort -k1,1) \
       <(awk '$2 == "latency" {print $3, $6, $9}' "$WORK/out-tcp-send" | sort -k1,1) | sort -n |
    awk '{printf "  %6s B  %7.1f us %7.1f us  %7.1f us %7.1f us  %9.2f %9.2f\n", $1, $2, $3, $4, $5, $2 / $4, $3 / $5}'
  grep -h corrupt "$WORK/out-mrc-send" "$WORK/out-tcp-send" | grep -v ' 0 corrupt' && { echo "corrupt round trips" >&2; exit 1; }
  # The step of a collective: both ranks post a receive and a send at once, wait for both.
  start mrcx mrc --latency --exchange --iterations "$ITERS"
  start tcpx tcp --latency --exchange --iterations "$ITERS"
  printf 'exchange (both ranks receive and send each round, as an NCCL step), p50 / p99 per round\n'
  printf '  %8s  %10s %10s  %10s %10s  %9s %9s\n' size "MRC p50" "MRC p99" "TCP p50" "TCP p99" "p50 ratio" "p99 ratio"
  join <(awk '$2 == "latency" {print $3, $6, $9}' "$WORK/out-mrcx-send" | sort -k1,1) \
       <(awk '$2 == "latency" {print $3, $6, $9}' "$WORK/out-tcpx-send" | sort -k1,1) | sort -n |
    awk '{printf "  %6s B  %7.1f us %7.1f us  %7.1f us %7.1f us  %9.2f %9.2f\n", $1, $2, $3, $4, $5, $2 / $4, $3 / $5}'
  grep -h corrupt "$WORK/out-mrcx-send" "$WORK/out-tcpx-send" | grep -v ' 0 corrupt' && { echo "corrupt rounds" >&2; exit 1; }
  exit 0
fi

# run <label> <transport> [args...]: a bandwidth run (start); the receiver's Gbit/s.
run() {
  start "$@" --size "$SIZE" --seconds "$SECS"
  # Only the receiver's figure line ("<transport> <Gbit/s> Gbit/s ..."): the file also holds
  # both programs' stderr (the plugin's log lines), whose second words are not figures.
  awk -v t="$2" '$1 == t && $3 == "Gbit/s" {print $2}' "$WORK/out-$1-recv"
}
MRC=$(run mrc mrc)
MRC4=$(QPS=4 run mrc4 mrc)
TCP1=$(run tcp1 tcp --streams 1)
TCP4=$(run tcp4 tcp --streams 4)
CEIL=$((4 * RATE))
printf 'fabric: 4 planes x %s Gbit/s (ceiling %s Gbit/s), %s B messages, %s s\n' "$RATE" "$CEIL" "$SIZE" "$SECS"
printf '  MRC plugin      %7.2f Gbit/s  (%.2f of the ceiling)\n' "$MRC" "$(echo "$MRC / $CEIL" | bc -l)"
printf '  ... 4 QPs/conn  %7.2f Gbit/s  (%.2f of the ceiling; 4 QPs / 1 QP = %.2f)\n' "$MRC4" \
  "$(echo "$MRC4 / $CEIL" | bc -l)" "$(echo "$MRC4 / $MRC" | bc -l)"
printf '  TCP, 1 stream   %7.2f Gbit/s  -> MRC/TCP = %.2f\n' "$TCP1" "$(echo "$MRC / $TCP1" | bc -l)"
printf '  TCP, 4 streams  %7.2f Gbit/s  -> MRC/TCP = %.2f\n' "$TCP4" "$(echo "$MRC / $TCP4" | bc -l)"
