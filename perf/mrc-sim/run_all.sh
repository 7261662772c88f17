#!/bin/sh
# The mrc-sim measurements of perf/RESULTS.md (2026-11-25): scale table, fault runs, cost curve.
# Runs one simulation at a time at low priority; writes JSON (and a few CSV/PNG) next to this
# script. Usage: perf/mrc-sim/run_all.sh [build dir]   (about 40 minutes on one core; the cost curve is run_cost.sh)
set -eu
B=${1:-build}/tools/mrc-sim
D=$(dirname "$0")
run() { name=$1; shift; echo "== $name: mrc-sim $*" >&2; nice -n 10 "$B" --no-progress -q --json "$D/$name.json" "$@" || echo "FAILED: $name" >&2; }
T=mrc,plane,ecmp
# Scale table: permutation 8 MiB per host; alltoall 32 KiB per pair, 32 flows in flight per
# host, QPs on demand; ring-allreduce 32 MiB per rank, 8 slices per chunk.
for h in 64 256; do run perm_$h --hosts $h --pattern permutation --bytes 8M --transport $T; done
run perm_1024 --hosts 1024 --pattern permutation --bytes 8M --transport $T --csv "$D/perm_1024.csv" --png "$D/perm_1024.png"
for h in 64 256 1024; do run a2a_$h --hosts $h --pattern alltoall --bytes 32K --window 32 --qps-on-demand --transport $T --csv "$D/a2a_$h.csv" --png "$D/a2a_$h.png"; done
for h in 64 256; do run ring_$h --hosts $h --pattern ring-allreduce --bytes 32M --slices 8 --transport $T --csv "$D/ring_$h.csv" --png "$D/ring_$h.png"; done
# Fault runs: 256-host alltoall; a T1 fails halfway; one T0's plane 0 is out from the start.
run fault_t1_256 --hosts 256 --pattern alltoall --bytes 32K --window 32 --qps-on-demand --transport mrc,plane --fault '50% t1-down 0 3' --csv "$D/fault_t1_256.csv" --png "$D/fault_t1_256.png"
run fault_t0_256 --hosts 256 --pattern alltoall --bytes 32K --window 32 --qps-on-demand --transport mrc,plane --fault '0 t0-down 0 0' --csv "$D/fault_t0_256.csv" --png "$D/fault_t0_256.png"
# Cost curve: perf/mrc-sim/run_cost.sh
