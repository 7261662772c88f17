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
# Why a face falls behind: at the end of each window (SECS - MARGIN) the sending QP's engine
# counters (mrcctl, statistics published) and the CPU the two processes used so far, per GB of
# first transmissions, are read and printed per run and per face:
#   retx/1k  data packets resent per 1,000 sent; rto, tlp: timeouts and tail probes fired
#   srtt, cwnd   the sending QP's smoothed RTT and NSCC window then
#   app, prog    CPU ms per GB of the sender's application thread and of its progress thread
#   recv         CPU ms per GB of the receiving process (all threads)
#
# Usage: bash perf/faces_bw.sh [seconds=8] [rounds=3] [rate=2]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-8}
ROUNDS=${2:-3}
RATE=${3:-2}
MARGIN=$(( SECS >= 5 ? 2 : 1 ))
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target nccl_bw nccl-net-mrc mrc_verbs_shim mrc-fabric ocp_write_bw mrcctl \
  --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
fabric_up "fbw$$" "$RATE"
MRCCTL=$B/tools/mrcctl
TICK=$(getconf CLK_TCK)
SAMPLE_AT=$(( SECS - MARGIN ))

# cpu_s <pid> [main|others|all]: user + system seconds of the process's main thread, of its
# other threads (libmrc's progress thread; the publisher has none) or of all.
cpu_s() {
  local t sum=0
  for t in /proc/"$1"/task/*; do
    case ${2:-all} in main) [[ ${t##*/} == "$1" ]] || continue ;; others) [[ ${t##*/} != "$1" ]] || continue ;; esac
    sum=$(awk -v s="$sum" -v k="$TICK" '{print s + ($14 + $15) / k}' "$t/stat")
  done
  echo "$sum"
}
# sample <sender pid> <receiver pid> (fabric_bw.sh calls it at SAMPLE_AT): one line of
# $WORK/counters for the run of face $FACE.
sample() {
  local qps cpu
  cpu="$(cpu_s "$1" main) $(cpu_s "$1" others) $(cpu_s "$2")"
  qps=$("$MRCCTL" --json --pid "$1" qps) || { echo "faces_bw.sh: mrcctl found no QP of pid $1" >&2; exit 1; }
  echo "$qps" | python3 -c '
import json, sys
q = max(json.load(sys.stdin), key=lambda q: q["tx_data_packets"])
print(sys.argv[1], q["tx_data_packets"], q["tx_retransmits"], q["rto_fired"], q["tail_probes"],
      q["srtt_us"], q["cc"]["cwnd"] if q.get("cc") else 0, q["tx_payload_bytes"], *sys.argv[2:])' \
    "$FACE" $cpu >> "$WORK/counters"
}

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
    FACE=$f
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
# Counters at the end of each window (see the top), per run, then summed per face.
printf 'counters (sending QP at %s s; CPU ms per GB sent):\n  %-7s %9s %8s %4s %4s %8s %8s %7s %7s %7s\n' \
  "$SAMPLE_AT" face packets retx/1k rto tlp srtt_ms cwnd_KB app prog recv
awk '{g = $8 / 1e9; printf "  %-7s %9d %8.1f %4d %4d %8.2f %8.0f %7.0f %7.0f %7.0f\n", $1, $2,
      1000 * $3 / $2, $4, $5, $6 / 1000, $7 / 1000, 1000 * $9 / g, 1000 * $10 / g, 1000 * $11 / g}' \
  "$WORK/counters"
awk '{p[$1] += $2; x[$1] += $3; o[$1] += $4; l[$1] += $5; b[$1] += $8; a[$1] += $9; g[$1] += $10
      r[$1] += $11} END {for (f in p) printf "  %-7s all runs: retx/1k %.1f, rto %d, tlp %d, CPU ms/GB app %.0f prog %.0f recv %.0f\n",
      f, 1000 * x[f] / p[f], o[f], l[f], a[f] / b[f] * 1e12, g[f] / b[f] * 1e12, r[f] / b[f] * 1e12}' \
  "$WORK/counters" | sort
