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
MARGIN=$(( SECS >= 5 ? 2 : 1 ))
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target nccl_bw nccl-net-mrc mrc_verbs_shim mrc-fabric ocp_write_bw \
  --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
fabric_up "fbw$$" "$RATE"

plugin() { plugin_bw "$SECS"; }
shim() { shim_bw "$SECS"; }
# ocp: perf/ocp_write_bw's Gbit/s (its bytes / window kept for the check below).
ocp() {
  pair ocp -- "$B/perf/ocp_write_bw" --seconds "$SECS" --margin "$MARGIN"
  cat "$WORK/ocp" >> "$WORK/ocp-all"
  awk '$1 == "ocp_write_bw" && $4 == "Gbit/s" {print $3}' "$WORK/ocp"
}

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
