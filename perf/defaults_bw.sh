#!/usr/bin/env bash
# Good figures without knobs (issue 16): each front end with nothing set next to the same front
# end with the base RTT that the scripts used to pass by hand (300 us), on one namespace fabric
# (2 hosts, 4 planes x 4 spines, host ports shaped to RATE Gbit/s; ceiling 4 x RATE). Needs
# root. The two settings alternate, ROUNDS times, so load on the machine hits both alike; the
# output is every run and the median of each, and default / tuned.
#   plugin    perf/nccl_bw --transport mrc through libnccl-net-mrc.so (4 MiB messages)
#   shim      ib_write_bw -D SECS through the verbs shim (64 KiB, perftest's own window)
#   mrc-perf  mrc-perf --duration SECS (1 MiB WRITEs, every byte verified): "healthy" figure
# Record the output in perf/RESULTS.md.
#
# Usage: bash perf/defaults_bw.sh [seconds=8] [rounds=2] [rate=2]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-8}
ROUNDS=${2:-2}
RATE=${3:-2}
PREFIX="dbw$$"
B=build
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target nccl_bw nccl-net-mrc mrc_verbs_shim mrc-fabric mrc-perf \
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

# plugin <tuned 0|1>: Gbit/s the receiver of perf/nccl_bw counted.
plugin() {
  local tune="" rv="$WORK/rv-$RANDOM$RANDOM"
  [[ $1 == 1 ]] && tune="MRC_BASE_RTT_US=300"
  for h in 0 1; do
    local role=send; [[ $h == 1 ]] && role=recv
    env MRC_CONFIG="$WORK/empty.json" MRC_PATH_MODE=srv6 \
      MRC_FABRIC="/run/mrc-fabric/$PREFIX/fabric.json" MRC_HOST=$h MRC_PORT=0 MRC_STATS=0 $tune \
      ip netns exec "$PREFIX-h$h" "$B/perf/nccl_bw" --transport mrc --role $role \
      --rendezvous "$rv" --plugin "$B/lib/libnccl-net-mrc.so" --size 4194304 --seconds "$SECS" \
      > "$WORK/plugin-$role" 2>&1 &
    eval "pid_$h=\$!"
  done
  wait "$pid_0" "$pid_1" || { cat "$WORK"/plugin-*; exit 1; }
  awk '$1 == "mrc" && $3 == "Gbit/s" {print $2}' "$WORK/plugin-recv"
}
# shim <tuned 0|1>: ib_write_bw's average over its window (-f: margins not counted).
shim() {
  local tune="" margin=$(( SECS >= 5 ? 2 : 1 ))
  [[ $1 == 1 ]] && tune="MRC_BASE_RTT_US=300"
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" MRC_STATS=0 $tune LD_PRELOAD="$SHIM" \
    ib_write_bw -D "$SECS" -f "$margin" --report_gbits > "$WORK/shim-server" 2>&1 &
  local s=$!
  sleep 0.5
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" MRC_STATS=0 $tune LD_PRELOAD="$SHIM" \
    ib_write_bw -D "$SECS" -f "$margin" --report_gbits "$SERVER" > "$WORK/shim-client" 2>&1 ||
    { cat "$WORK"/shim-*; exit 1; }
  wait "$s"
  awk '$1 == 65536 {print $4}' "$WORK/shim-client"
}
# perf <tuned 0|1>: mrc-perf's healthy figure.
perf() {
  local tune=()
  [[ $1 == 1 ]] && tune=(--base-rtt-us 300)
  "$B/tools/mrc-perf" --prefix "$PREFIX" --client 1 --server 0 --duration "$SECS" -q "${tune[@]}" \
    > "$WORK/perf" 2>&1 || { cat "$WORK/perf"; exit 1; }
  awk '$1 == "mrc:" && $2 == "healthy" {print $3}' "$WORK/perf"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf 'fabric: 4 planes x 4 spines, host ports %s Gbit/s (ceiling %s Gbit/s), %s s runs, %s rounds\n' \
  "$RATE" "$((4 * RATE))" "$SECS" "$ROUNDS"
printf '%-9s %-28s %-28s %8s %8s %s\n' "front" "default (Gbit/s, each run)" \
  "base RTT 300 us (each run)" "default" "tuned" "default/tuned"
for front in ${FRONTS:-plugin shim perf}; do
  d="" t=""
  for ((r = 0; r < ROUNDS; ++r)); do
    if (( r % 2 == 0 )); then d+=" $($front 0)"; t+=" $($front 1)"
    else t+=" $($front 1)"; d+=" $($front 0)"; fi
  done
  md=$(echo "$d" | median) mt=$(echo "$t" | median)
  printf '%-9s %-28s %-28s %8.3f %8.3f %.3f\n' "$front" "$d" "$t" "$md" "$mt" \
    "$(echo "$md / $mt" | bc -l)"
done
