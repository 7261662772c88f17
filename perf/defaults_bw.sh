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
# Usage: [FRONTS="plugin shim perf"] bash perf/defaults_bw.sh [seconds=8] [rounds=2] [rate=2]
# (FRONTS picks the front ends; only their targets are built)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-8}
ROUNDS=${2:-2}
RATE=${3:-2}
cmake --preset release --log-level=WARNING >/dev/null
FRONTS=${FRONTS:-plugin shim perf}
targets=(mrc-fabric)  # only what the fronts asked for use
for front in $FRONTS; do
  case $front in
    plugin) targets+=(nccl_bw nccl-net-mrc) ;;
    shim) targets+=(mrc_verbs_shim) ;;
    perf) targets+=(mrc-perf) ;;
    *) echo "defaults_bw.sh: unknown front '$front' in FRONTS (plugin, shim, perf)" >&2; exit 2 ;;
  esac
done
cmake --build --preset release --target "${targets[@]}" --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
fabric_up "dbw$$" "$RATE"

# <front> <tuned 0|1>: Gbit/s with nothing set, or with the base RTT the scripts used to pass.
plugin() { if [[ $1 == 1 ]]; then plugin_bw "$SECS" MRC_BASE_RTT_US=300; else plugin_bw "$SECS"; fi; }
shim() { if [[ $1 == 1 ]]; then shim_bw "$SECS" MRC_BASE_RTT_US=300; else shim_bw "$SECS"; fi; }
# perf <tuned 0|1>: mrc-perf's healthy figure.
perf() {
  local tune=()
  [[ $1 == 1 ]] && tune=(--base-rtt-us 300)
  "$B/tools/mrc-perf" --prefix "$PREFIX" --client 1 --server 0 --duration "$SECS" -q "${tune[@]}" \
    > "$WORK/perf" 2>&1 || { cat "$WORK/perf"; exit 1; }
  awk '$1 == "mrc:" && $2 == "healthy" {print $3}' "$WORK/perf"
}

printf 'fabric: 4 planes x 4 spines, host ports %s Gbit/s (ceiling %s Gbit/s), %s s runs, %s rounds\n' \
  "$RATE" "$((4 * RATE))" "$SECS" "$ROUNDS"
printf '%-9s %-28s %-28s %8s %8s %s\n' "front" "default (Gbit/s, each run)" \
  "base RTT 300 us (each run)" "default" "tuned" "default/tuned"
for front in $FRONTS; do
  d="" t=""
  for ((r = 0; r < ROUNDS; ++r)); do
    if (( r % 2 == 0 )); then d+=" $($front 0)"; t+=" $($front 1)"
    else t+=" $($front 1)"; d+=" $($front 0)"; fi
  done
  md=$(echo "$d" | median) mt=$(echo "$t" | median)
  printf '%-9s %-28s %-28s %8.3f %8.3f %.3f\n' "$front" "$d" "$t" "$md" "$mt" \
    "$(echo "$md / $mt" | bc -l)"
done
