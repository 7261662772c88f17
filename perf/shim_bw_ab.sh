#!/usr/bin/env bash
# Two verbs shims' bandwidth side by side (a change's shim against the one before it): stock
# ib_read_bw and ib_write_bw (-D SECS, 64 KiB, perftest's defaults otherwise) through shim A,
# then B, alternating within each round, on one namespace fabric as perf/verbs_perf.sh's (2
# hosts, 4 planes x 4 spines, 2 Gbit/s host ports). Prints each pair and B / A. Which shim runs
# first biases a pair on a machine whose load moves: run it again with A and B swapped.
# Needs root (network namespaces).
#
# Usage: bash perf/shim_bw_ab.sh <shim A .so> <shim B .so> [rounds=3] [seconds=5]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=${1:?shim A}; B=${2:?shim B}; ROUNDS=${3:-3}; SECS=${4:-5}
for s in "$A" "$B"; do
  [[ -f $s ]] || { echo "shim_bw_ab.sh: $s: no such file" >&2; exit 2; }
done
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc-fabric --parallel "$(nproc)" >/dev/null
PREFIX="ab$$"
FAB=build/tools/mrc-fabric
cleanup() { "$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
"$FAB" up --prefix "$PREFIX" --hosts 2 --planes 4 --spines 4 --rate 2 >/dev/null
CFG=/run/mrc-fabric/$PREFIX/hosts
SERVER=$(ip -n "$PREFIX-h0" -4 -o addr show dev mgmt0 | awk '{print $4}' | cut -d/ -f1)
# bw <shim> <tool args...>: server in host 0, client in host 1; prints the client's Gbit/s.
bw() {
  local shim=$1; shift
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" MRC_STATS=0 LD_PRELOAD="$shim" \
    "$@" > "/tmp/shim_bw_ab.$$" 2>&1 &
  local s=$!
  sleep 0.5
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" MRC_STATS=0 LD_PRELOAD="$shim" \
    "$@" "$SERVER" | awk '$1 == 65536 {print $4}'
  wait "$s" || { cat "/tmp/shim_bw_ab.$$" >&2; exit 1; }
  rm -f "/tmp/shim_bw_ab.$$"
}
for ((r = 1; r <= ROUNDS; ++r)); do
  for t in ib_read_bw ib_write_bw; do
    a=$(bw "$A" "$t" -D "$SECS" -f 1 --report_gbits)
    b=$(bw "$B" "$t" -D "$SECS" -f 1 --report_gbits)
    printf 'round %d %-11s A %s B %s Gbit/s  B / A %.2f  load %s\n' "$r" "$t" "$a" "$b" \
      "$(echo "$b / $a" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
