#!/usr/bin/env bash
# Bytes per core (issue 17): CPU time per received byte of MRC on one unshaped path against the
# raw UDP GSO/GRO ceiling on the same fabric, one after the other. One namespace fabric (2 hosts,
# 1 plane x 1 spine, no rate limit, removed on exit); needs root. Each run is one process
# (`mrc-perf --prefix`: both MRC endpoints and their progress threads, or the ceiling's sender
# and receiver threads) under `perf stat -e task-clock`: the CPU time of all its threads, user
# and kernel (the namespaces' forwarding runs in the sending thread's softirq, counted; work the
# kernel defers to ksoftirqd is not, for either). CPU time, not cycles: this KVM guest exposes
# no hardware counters (perf stat says "not supported"); on an idle machine at a fixed clock
# they are proportional. Bytes are the payload the receiver accepted: MRC's verified (or not)
# WRITE bytes, the ceiling's received UDP payload.
#   mrc        mrc-perf, 1 MiB WRITEs x 8 outstanding, every byte verified (its default)
#   no-verify  the same, --no-verify (as perftest counts)
#   ceiling    mrc-perf --no-mrc --baseline udp-ceiling (GSO senders, a GRO receiver that counts)
#   ceiling-app  the same with MRC's memory footprint (--ceiling-memory 16M): its sender reads,
#              and its receiver lands, in turn through 16 MiB each, as MRC's sender reads and its
#              receiver places 2 x 8 outstanding x 1 MiB of registered memory (mostly out of
#              cache; the plain ceiling reuses one 64 KiB send and 1 MiB of receive buffers)
# Runs alternate ROUNDS times so load hits each alike; prints every run and, per kind, the
# median ns of CPU per KiB, Gbit/s and CPUs busy, and ceiling / MRC of the CPU per byte
# (target >= 0.8 not verified, >= 0.7 verified), then the same against ceiling-app. Record the
# output in perf/RESULTS.md.
#
# Usage: bash perf/bytes_per_core.sh [seconds=10] [rounds=3]
# BEFORE=<path of an mrc-perf kept from before a change> adds its two MRC runs to each round
# (before-mrc, before-no-verify), alternating with the build's, and prints after / before.
# Progress threads (UdpConfig::progress_threads, one per plane at most): PLANES=<n> (default 1)
# makes the fabric n planes x 1 spine; THREADS="1 2" runs, in each round, MRC verified with
# each of those thread counts (mrc-t1, mrc-t2: `mrc-perf --progress-threads`) and the ceiling
# in place of the kinds above, and prints each against the first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-10}
ROUNDS=${2:-3}
[[ $SECS =~ ^[1-9][0-9]*$ ]] || { echo "bytes_per_core.sh: seconds must be a positive integer, got '$SECS'" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "bytes_per_core.sh: rounds must be a positive integer, got '$ROUNDS'" >&2; exit 2; }
command -v perf >/dev/null || { echo "bytes_per_core.sh: needs perf (Debian: linux-perf)" >&2; exit 2; }
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc-fabric mrc-perf --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
PLANES=${PLANES:-1}
[[ $PLANES =~ ^[1-9][0-9]*$ ]] || { echo "bytes_per_core.sh: PLANES must be a positive integer, got '$PLANES'" >&2; exit 2; }
for t in ${THREADS:-}; do
  [[ $t =~ ^[1-9][0-9]*$ ]] || { echo "bytes_per_core.sh: THREADS must list positive integers, got '$THREADS'" >&2; exit 2; }
done
fabric_up "bpc$$" 0 "$PLANES" 1

# one <kind>: "<kind> <CPU ms> <payload bytes> <seconds>" of one run.
one() {
  local kind=$1 args=(--prefix "$PREFIX" --duration "$SECS" -q) out="$WORK/$1.out"
  local bin=$B/tools/mrc-perf
  [[ $kind == before-* ]] && bin=$BEFORE
  case $kind in
    mrc | before-mrc) ;;
    no-verify | before-no-verify) args+=(--no-verify) ;;
    ceiling) args+=(--no-mrc --baseline udp-ceiling) ;;
    ceiling-app) args+=(--no-mrc --baseline udp-ceiling --ceiling-memory 16M) ;;
    mrc-t*) args+=(--progress-threads "${kind#mrc-t}") ;;
  esac
  perf stat -x, -o "$WORK/$kind.stat" -e task-clock -- "$bin" "${args[@]}" \
    > "$out" 2>&1 || { cat "$out" >&2; exit 1; }
  local ms bytes
  ms=$(awk -F, '$3 == "task-clock" {print $1}' "$WORK/$kind.stat")
  if [[ $kind == ceiling* ]]; then
    # "received <Gbit/s> Gbit/s" over the run's seconds
    bytes=$(grep -o 'received [0-9.]* Gbit/s' "$out" | awk -v s="$SECS" '{printf "%.0f", $2 * 1e9 / 8 * s}')
  else
    # "mrc: ... <n> messages (<GB> GB) verified|not verified"
    bytes=$(grep -o 'messages ([0-9.]* GB)' "$out" | tr -d '(' | awk '{printf "%.0f", $2 * 1e9}')
  fi
  [[ -n $ms && -n $bytes && $bytes != 0 ]] || { echo "bytes_per_core.sh: no figures from $kind:" >&2; cat "$out" "$WORK/$kind.stat" >&2; exit 1; }
  echo "$kind $ms $bytes $SECS"
}

echo "fabric: 2 hosts, $PLANES plane(s) x 1 spine, unshaped; $SECS s per run, $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-10s %12s %14s %12s %10s %8s\n' run "CPU ms" "payload B" "ns CPU/KiB" Gbit/s CPUs
KINDS=(mrc no-verify ceiling ceiling-app)
if [[ -n ${BEFORE:-} ]]; then
  [[ -x $BEFORE ]] || { echo "bytes_per_core.sh: BEFORE=$BEFORE is not an executable" >&2; exit 2; }
  KINDS=(before-mrc mrc before-no-verify no-verify ceiling ceiling-app)
fi
if [[ -n ${THREADS:-} ]]; then
  KINDS=()
  for t in $THREADS; do KINDS+=("mrc-t$t"); done
  KINDS+=(ceiling)
fi
for ((r = 0; r < ROUNDS; r++)); do
  for kind in "${KINDS[@]}"; do
    one "$kind" | tee -a "$WORK/all" | awk '{printf "  %-10s %12.0f %14.0f %12.1f %10.2f %8.2f\n",
      $1, $2, $3, $2 * 1e6 / $3 * 1024, $3 * 8 / $4 / 1e9, $2 / 1e3 / $4}'
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
cpk() { awk -v k="$1" '$1 == k {print $2 * 1e6 / $3 * 1024}' "$WORK/all" | median; }
gbps() { awk -v k="$1" '$1 == k {print $3 * 8 / $4 / 1e9}' "$WORK/all" | median; }
if [[ -n ${THREADS:-} ]]; then
  C=$(cpk ceiling) FIRST=${KINDS[0]}
  for k in "${KINDS[@]}"; do
    [[ $k == ceiling ]] && continue
    printf '%s: median ns of CPU per KiB %.1f (ceiling / it %.2f, it / %s %.2f), Gbit/s %.2f (it / %s %.2f)\n' \
      "$k" "$(cpk "$k")" "$(echo "$C / $(cpk "$k")" | bc -l)" "$FIRST" "$(echo "$(cpk "$k") / $(cpk "$FIRST")" | bc -l)" \
      "$(gbps "$k")" "$FIRST" "$(echo "$(gbps "$k") / $(gbps "$FIRST")" | bc -l)"
  done
  printf 'ceiling: median ns of CPU per KiB %.1f, Gbit/s %.2f\n' "$C" "$(gbps ceiling)"
  exit 0
fi
M=$(cpk mrc) N=$(cpk no-verify) C=$(cpk ceiling)
printf 'median ns of CPU per KiB: MRC verified %.1f (%.2f Gbit/s), not verified %.1f (%.2f Gbit/s), ceiling %.1f (%.2f Gbit/s)\n' \
  "$M" "$(gbps mrc)" "$N" "$(gbps no-verify)" "$C" "$(gbps ceiling)"
printf 'ceiling / MRC, CPU per byte: verified %.2f (target >= 0.7), not verified %.2f (target >= 0.8)\n' \
  "$(echo "$C / $M" | bc -l)" "$(echo "$C / $N" | bc -l)"
A=$(cpk ceiling-app)
printf 'ceiling-app (16 MiB each side): %.1f ns of CPU per KiB (%.2f Gbit/s), %.2f of the ceiling'"'"'s CPU per byte; ceiling-app / MRC: verified %.2f, not verified %.2f\n' \
  "$A" "$(gbps ceiling-app)" "$(echo "$A / $C" | bc -l)" "$(echo "$A / $M" | bc -l)" "$(echo "$A / $N" | bc -l)"
if [[ -n ${BEFORE:-} ]]; then
  BM=$(cpk before-mrc) BN=$(cpk before-no-verify)
  printf 'before: ns of CPU per KiB verified %.1f, not verified %.1f; after / before: %.2f, %.2f\n' \
    "$BM" "$BN" "$(echo "$M / $BM" | bc -l)" "$(echo "$N / $BN" | bc -l)"
fi
