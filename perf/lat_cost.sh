#!/usr/bin/env bash
# What one small-message round trip costs the host (issue 17), counted rather than timed: the
# kernel's own counters of both processes of a ping-pong (perf stat: the raw_syscalls and
# syscalls tracepoints, context-switches, cpu-migrations; all threads, in-kernel counting, so
# the programs run at their own speed), on one namespace fabric (2 hosts, 4 planes x 4 spines,
# host ports RATE Gbit/s, as perf/verbs_perf.sh):
#   udp        raw UDP ping-pong over MRC's EV p0.s0 (perf/udp_pingpong), blocking: the least a
#              round trip can cost (a send and a receive per side); udp-busy, its busy-polling
#              form (the latency reference of verbs_perf.sh: each empty poll is a recv call)
#   write/send/read  stock ib_write_lat, ib_send_lat, ib_read_lat (2 B) through the verbs shim
# Each program runs twice, with N and 3N iterations; the counts of the first run are taken from
# the second's and divided by 2N, so what setup and teardown cost (device open, perftest's TCP
# exchange) cancels: per round trip, both processes together. Counts move with the load less
# than times do, but not nothing: an empty poll of a spinning app is a syscall (sched_yield
# in the shim, recv in udp-busy), so how long it waits still sets how many it makes. The
# second run's t_min and t_typical (us) are printed beside them: one way, as perftest reports
# WRITE and SEND (half the ping-pong), but a round trip for READ (perftest's rtt_factor).
# read and timerfd say what woke a progress loop (ppoll) that was not a socket: read is the
# eventfd/timerfd drained after such a wakeup, timerfd an alarm set or moved (timerfd_settime).
# REF, a folder holding another build's lib/libmrc-verbs-shim.so (e.g. copied from build/lib
# at the commit before a change), adds the shim rows of that build ("ref-"), alternated with
# this build's within each round. Needs root (network namespaces, perf tracepoints).
#
# Usage: bash perf/lat_cost.sh [N=1000] [rounds=1] [rate=2] [REF]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${1:-1000}
ROUNDS=${2:-1}
RATE=${3:-2}
REF=${4:-}
if [[ -n $REF && ! -f $REF/lib/libmrc-verbs-shim.so ]]; then
  echo "lat_cost.sh: $REF/lib/libmrc-verbs-shim.so: no such file (REF holds lib/)" >&2
  exit 2
fi
if ! perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
  echo "lat_cost.sh: perf cannot count the raw_syscalls tracepoint (needs root and tracefs)" >&2
  exit 2
fi
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc_verbs_shim mrc-fabric udp_pingpong \
  --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
fabric_up "lc$$" "$RATE"
# The counted events, in this order in every line printed.
NAMES=(syscalls sched_yield ppoll recv send write read timerfd futex cswitch migrations)
EVENTS=raw_syscalls:sys_enter,syscalls:sys_enter_sched_yield,syscalls:sys_enter_ppoll
EVENTS+=,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_recvmsg,syscalls:sys_enter_recvfrom
EVENTS+=,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto
EVENTS+=,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_timerfd_settime
EVENTS+=,syscalls:sys_enter_futex
EVENTS+=,context-switches,cpu-migrations

# counts <perf stat -x, file>: the NAMES counts of one process (recv and send summed over
# their three calls), space-separated.
counts() {
  awk -F, '{ v[$3] = $1 }
    END { printf "%d %d %d %d %d %d %d %d %d %d %d\n", v["raw_syscalls:sys_enter"],
      v["syscalls:sys_enter_sched_yield"], v["syscalls:sys_enter_ppoll"],
      v["syscalls:sys_enter_recvmmsg"] + v["syscalls:sys_enter_recvmsg"] + v["syscalls:sys_enter_recvfrom"],
      v["syscalls:sys_enter_sendmmsg"] + v["syscalls:sys_enter_sendmsg"] + v["syscalls:sys_enter_sendto"],
      v["syscalls:sys_enter_write"], v["syscalls:sys_enter_read"],
      v["syscalls:sys_enter_timerfd_settime"], v["syscalls:sys_enter_futex"],
      v["context-switches"], v["cpu-migrations"] }' "$1"
}

# run_pair <iters> <shim|-> <server argv> -- <client argv>: both under perf stat; sets SUM (the
# two processes' counts added) and OUT (the client's output).
run_pair() {
  local iters=$1 shim=$2; shift 2
  local sargs=() cargs=()
  while [[ $1 != -- ]]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  local pre=()
  [[ $shim == - ]] || pre=(LD_PRELOAD="$shim")
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" MRC_STATS=0 "${pre[@]}" \
    perf stat -x, -o "$WORK/s.stat" -e "$EVENTS" -- "${sargs[@]}" > "$WORK/s.out" 2>&1 &
  local s=$!
  sleep 0.5
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" MRC_STATS=0 "${pre[@]}" \
    perf stat -x, -o "$WORK/c.stat" -e "$EVENTS" -- "${cargs[@]}" > "$WORK/c.out" 2>&1 ||
    { cat "$WORK/s.out" "$WORK/c.out" >&2; exit 1; }
  wait "$s" || { cat "$WORK/s.out" >&2; exit 1; }
  SUM=$(paste -d' ' <(counts "$WORK/s.stat") <(counts "$WORK/c.stat") |
    awk '{ for (i = 1; i <= 11; ++i) printf "%d ", $i + $(i + 11); print "" }')
  OUT=$(cat "$WORK/c.out")
}

# measure <label> <shim|-> <kind>: the per-round-trip line of one program.
measure() {
  local label=$1 shim=$2 kind=$3 a b times
  for iters in "$N" "$((3 * N))"; do
    case $kind in
      udp|udp-busy)
        local busy=(); [[ $kind == udp-busy ]] && busy=(--busy)
        run_pair "$iters" - "$B/perf/udp_pingpong" --role server --peer-host 1 "${busy[@]}" -- \
          "$B/perf/udp_pingpong" --role client --peer-host 0 --iters "$iters" "${busy[@]}"
        times=$(echo "$OUT" | awk '/^udp t_min/ {print $3, $5}') ;;
      *)
        run_pair "$iters" "$shim" "ib_${kind}_lat" -n "$iters" -- \
          "ib_${kind}_lat" -n "$iters" "$SERVER"
        times=$(echo "$OUT" | awk '$1 == 2 {print $3, $5}') ;;
    esac
    if [[ $iters == "$N" ]]; then a=$SUM; else b=$SUM; fi
  done
  paste -d' ' <(echo "$a") <(echo "$b") | awk -v l="$label" -v n="$N" -v t="$times" '{
    printf "%-14s", l
    for (i = 1; i <= 11; ++i) printf " %9.2f", ($(i + 11) - $i) / (2 * n)
    printf "   %s\n", t }'
}

printf 'per round trip, both processes (%s and %s iterations, difference / %s); load %s\n' \
  "$N" "$((3 * N))" "$((2 * N))" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-14s' program; printf ' %9s' "${NAMES[@]}"; printf '   t_min t_typical (us, one way; read: round trip)\n'
for ((r = 1; r <= ROUNDS; ++r)); do
  measure udp - udp
  measure udp-busy - udp-busy
  for k in write send read; do
    measure "$k" "$SHIM" "$k"
    [[ -z $REF ]] || measure "ref-$k" "$(realpath "$REF")/lib/libmrc-verbs-shim.so" "$k"
  done
done
