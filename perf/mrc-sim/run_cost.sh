#!/bin/sh
# The cost curve of perf/RESULTS.md (2026-11-25): mrc alone, permutation, 4 MiB per host, for
# 64 .. 4096 hosts (the same load per host), one run at a time at low priority.
set -eu
B=${1:-build}/tools/mrc-sim
D=$(dirname "$0")
for h in 64 256 1024 2048 4096; do
  echo "== cost_$h" >&2
  nice -n 10 "$B" --no-progress -q --json "$D/cost_$h.json" --hosts $h --pattern permutation --bytes 4M --transport mrc
done
