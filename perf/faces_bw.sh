#!/usr/bin/env bash
# One engine, three faces (issue 23): bandwidth between two hosts of one namespace fabric
# (4 planes x 4 spines, host ports shaped to RATE Gbit/s; ceiling 4 x RATE) through each front
# end of libmrc with nothing tuned, in one run. Needs root (network namespaces).
#   plugin  the NCCL net plugin: perf/nccl_bw --transport mrc (receiver-driven WRITE_IMM,
#           4 MiB messages, the receiver's Gbit/s)
#   ocp     the OCP MRC API: perf/ocp_write_bw (mrc.h only; 64 KiB WRITEs, 128 in flight, the
#           bytes of the WRITEs completed inside the window, as ib_write_bw counts them)
#   shim    stock ib_write_bw -D SECS through the verbs shim (64 KiB, 128 in flight)
# The three alternate, ROUNDS times (the order rotates each round), so load on the machine hits
# each alike; the output is every run, the median of each and the ratios of the medians, and
# the OCP program's own bytes / seconds as the first-principles check. Record it in
# perf/RESULTS.md with the machine's load.
#
# Usage: bash perf/faces_bw.sh [seconds=8] [rounds=3] [rate=2]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-8}
ROUNDS=${2:-3}
RATE=${3:-2}
PREFIX="fbw$$"
B=build
MARGIN=$(( SECS >= 5 ? 2 : 1 ))
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target nccl_bw nccl-net-mrc mrc_verbs_shim mrc-fabric ocp_write_bw \
  --parallel "$(nproc)" >/dev/null
FAB=$B/tools/mrc-fabric
SHIM=$PWD/$B/lib/libmrc-verbs-shim.so
WORK=$(mktemp -d)
cleanup() { "$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM
"$FAB" up --prefix "$PREFIX" --hosts 2 --planes 4 --spines 4 --rate "$RATE" >/dev/null
CFG=/run/mrc-fabric/$PREFIX/hosts
SERVER=$(ip -n "$PREFIX-h0" -4 -o addr show dev mgmt0 | awk '{print $4}' | cut -d/ -f1)
echo '{}' > "$WORK/empty.json"

# plugin: Gbit/s the receiver of perf/nccl_bw counted.
plugin() {
  local rv="$WORK/rv-$RANDOM$RANDOM"
  for h in 0 1; do
    local role=send; [[ $h == 1 ]] && role=recv
    env MRC_CONFIG="$WORK/empty.json" MRC_PATH_MODE=srv6 \
      MRC_FABRIC="/run/mrc-fabric/$PREFIX/fabric.json" MRC_HOST=$h MRC_PORT=0 MRC_STATS=0 \
      ip netns exec "$PREFIX-h$h" "$B/perf/nccl_bw" --transport mrc --role $role \
      --rendezvous "$rv" --plugin "$B/lib/libnccl-net-mrc.so" --size 4194304 --seconds "$SECS" \
      > "$WORK/plugin-$role" 2>&1 &
    eval "pid_$h=\$!"
  done
  wait "$pid_0" "$pid_1" || { cat "$WORK"/plugin-*; exit 1; }
  awk '$1 == "mrc" && $3 == "Gbit/s" {print $2}' "$WORK/plugin-recv"
}
# pair <out> <prog args...>: server in host 0, client (with the server's address) in host 1,
# each as its fabric host (its MRC config); the client's output in $WORK/<out>.
pair() {
  local out=$1; shift
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" MRC_STATS=0 "$@" \
    > "$WORK/$out-server" 2>&1 &
  local s=$!
  sleep 0.5
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" MRC_STATS=0 "$@" "$SERVER" \
    > "$WORK/$out" 2>&1 || { cat "$WORK/$out-server" "$WORK/$out"; exit 1; }
  wait "$s" || { cat "$WORK/$out-server"; exit 1; }
}
# ocp: perf/ocp_write_bw's Gbit/s (its bytes / window kept for the check below).
ocp() {
  pair ocp "$B/perf/ocp_write_bw" --seconds "$SECS" --margin "$MARGIN"
  cat "$WORK/ocp" >> "$WORK/ocp-all"
  awk '$1 == "ocp_write_bw" && $4 == "Gbit/s" {print $3}' "$WORK/ocp"
}
# shim: ib_write_bw's average over its window (-f: margins not counted).
shim() {
  pair shim env LD_PRELOAD="$SHIM" ib_write_bw -D "$SECS" -f "$MARGIN" --report_gbits
  awk '$1 == 65536 {print $4}' "$WORK/shim"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

FRONTS=(plugin ocp shim)
declare -A runs
for ((r = 0; r < ROUNDS; ++r)); do
  for ((i = 0; i < 3; ++i)); do
    f=${FRONTS[(i + r) % 3]}
    runs[$f]+=" $($f)"
  done
done
CEIL=$((4 * RATE))
printf 'fabric: 4 planes x 4 spines, host ports %s Gbit/s (ceiling %s Gbit/s), %s s runs, %s rounds, load %s\n' \
  "$RATE" "$CEIL" "$SECS" "$ROUNDS" "$(cut -d' ' -f1-3 /proc/loadavg)"
declare -A med
for f in "${FRONTS[@]}"; do
  med[$f]=$(echo "${runs[$f]}" | median)
  printf '  %-7s median %7.3f Gbit/s (%.3f of the ceiling)  runs:%s\n' "$f" "${med[$f]}" \
    "$(echo "${med[$f]} / $CEIL" | bc -l)" "${runs[$f]}"
done
printf 'ratios: ocp/shim %.3f  plugin/shim %.3f  plugin/ocp %.3f\n' \
  "$(echo "${med[ocp]} / ${med[shim]}" | bc -l)" "$(echo "${med[plugin]} / ${med[shim]}" | bc -l)" \
  "$(echo "${med[plugin]} / ${med[ocp]}" | bc -l)"
# First principles: the OCP program's bytes over its window, recomputed here.
awk '$1 == "ocp_write_bw" { printf "check: ocp %s bytes in %s s = %.3f Gbit/s (program said %s)\n",
  $5, $8, $5 * 8 / $8 / 1e9, $3 }' "$WORK/ocp-all"
