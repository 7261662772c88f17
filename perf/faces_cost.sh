#!/usr/bin/env bash
# What each face costs per byte (issue 23): perf/ocp_write_bw (the OCP MRC API) and stock
# ib_write_bw through the verbs shim post the same work (64 KiB WRITEs, 128 in flight, every
# one signalled) through the same verbs post/poll code, so a gap between their Gbit/s
# (perf/faces_bw.sh) is either CPU per byte or work the transport repeats; the NCCL plugin
# (perf/nccl_bw, 4 MiB messages) is counted the same way. This counts both kinds, per face, on one
# namespace fabric (2 hosts, 4 planes x 4 spines, host ports RATE Gbit/s):
#   Gbit/s      the program's own figure
#   retx/1k     data packets retransmitted per 1,000 first transmissions (the sending QP's
#               engine counters, read with mrcctl at the end of the measured window)
#   rto         retransmission timeouts fired by then; srtt_ms, the QP's smoothed RTT then
#   cpu ms/GB   CPU time (user + system, /proc/PID/stat, both processes with all threads)
#               per GB of first transmissions, at the same moment
# Counts, not timings, except the CPU figure: the machine's load moves Gbit/s, these less. The
# programs spin on their CQs, so on a CPU-bound machine CPU per GB also follows the rate.
# The faces alternate ROUNDS times. REF, a folder holding another build's ocp_write_bw and its
# lib/ (e.g. copied from build/perf and build/lib at the commit before a change), adds that
# build's OCP face as "ref", measured in the same rounds. Needs root (network namespaces).
#
# Usage: bash perf/faces_cost.sh [seconds=8] [rounds=2] [rate=2] [REF]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-8}
ROUNDS=${2:-2}
RATE=${3:-2}
REF=${4:-}
if [[ -n $REF && ! -x $REF/ocp_write_bw ]]; then
  echo "faces_cost.sh: $REF/ocp_write_bw: no such program (REF holds ocp_write_bw and lib/)" >&2
  exit 2
fi
MARGIN=$(( SECS >= 5 ? 2 : 1 ))
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc_verbs_shim mrc-fabric mrcctl ocp_write_bw nccl_bw \
  nccl-net-mrc \
  --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
MRCCTL=$B/tools/mrcctl
fabric_up "fco$$" "$RATE"
TICK=$(getconf CLK_TCK)

# cpu_s <pid>: user + system seconds of the process so far (all its threads).
cpu_s() { awk -v t="$TICK" '{print ($14 + $15) / t}' "/proc/$1/stat"; }

# measure <face> <client and server argv...>: runs the pair (statistics published: MRC_STATS
# on), samples the client's QP and both processes' CPU at the end of the window (SECS - MARGIN),
# prints one line: face Gbit/s tx_data_packets tx_retransmits rto_fired srtt_us bytes cpu_s.
measure() {
  local face=$1; shift
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" "$@" > "$WORK/$face-server" 2>&1 &
  local s=$!
  sleep 0.5
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" "$@" "$SERVER" > "$WORK/$face" 2>&1 &
  local c=$!
  sleep $(( SECS - MARGIN ))
  local cpu qps
  cpu=$(echo "$(cpu_s $c) + $(cpu_s $s)" | bc -l)
  qps=$("$MRCCTL" --json --pid "$c" qps) || { cat "$WORK/$face-server" "$WORK/$face" >&2; exit 1; }
  wait "$c" || { cat "$WORK/$face-server" "$WORK/$face" >&2; exit 1; }
  wait "$s" || { cat "$WORK/$face-server" >&2; exit 1; }
  local gbps
  case $face in
    ocp | ref) gbps=$(awk '$1 == "ocp_write_bw" && $4 == "Gbit/s" {print $3}' "$WORK/$face") ;;
    shim)
      gbps=$(awk '$1 == 65536 {print $4}' "$WORK/$face")
      # How perftest posted and polled, beside ocp_write_bw's (128 in flight, all signalled).
      grep -E 'TX depth|CQ Moderation|Post List' "$WORK/$face" | tr -s ' ' > "$WORK/perftest" ;;
  esac
  row "$face" "$gbps" "$cpu" "$qps"
}

# row <face> <Gbit/s> <cpu s> <mrcctl qps JSON>: the line of one run, from the QP that sent.
row() {
  echo "$4" | python3 -c '
import json, sys
q = max(json.load(sys.stdin), key=lambda q: q["tx_data_packets"])
print(sys.argv[1], sys.argv[2], q["tx_data_packets"], q["tx_retransmits"], q["rto_fired"],
      q["srtt_us"], q["tx_payload_bytes"], sys.argv[3])' "$1" "$2" "$3"
}

# plugin: perf/nccl_bw --transport mrc through the plugin (as faces_bw.sh runs it, statistics
# on), host 0 sending, sampled as measure() samples.
plugin() {
  local rv="$WORK/rv-$RANDOM$RANDOM" pid_0 pid_1
  for h in 0 1; do
    local role=send; [[ $h == 1 ]] && role=recv
    env MRC_CONFIG="$WORK/empty.json" MRC_PATH_MODE=srv6 \
      MRC_FABRIC="/run/mrc-fabric/$PREFIX/fabric.json" MRC_HOST=$h MRC_PORT=0 \
      ip netns exec "$PREFIX-h$h" "$B/perf/nccl_bw" --transport mrc --role $role \
      --rendezvous "$rv" --plugin "$B/lib/libnccl-net-mrc.so" --size 4194304 --seconds "$SECS" \
      > "$WORK/plugin-$role" 2>&1 &
    eval "pid_$h=\$!"
  done
  sleep $(( SECS - MARGIN ))
  local cpu qps
  cpu=$(echo "$(cpu_s $pid_0) + $(cpu_s $pid_1)" | bc -l)
  qps=$("$MRCCTL" --json --pid "$pid_0" qps) || { cat "$WORK"/plugin-* >&2; exit 1; }
  wait "$pid_0" "$pid_1" || { cat "$WORK"/plugin-* >&2; exit 1; }
  row plugin "$(awk '$1 == "mrc" && $3 == "Gbit/s" {print $2}' "$WORK/plugin-recv")" "$cpu" "$qps"
}

ocp() {
  measure ocp "$B/perf/ocp_write_bw" --seconds "$SECS" --margin "$MARGIN"
}
shim() {
  measure shim LD_PRELOAD="$SHIM" ib_write_bw -D "$SECS" -f "$MARGIN" --report_gbits
}
ref() {
  measure ref LD_LIBRARY_PATH="$REF/lib" "$REF/ocp_write_bw" --seconds "$SECS" --margin "$MARGIN"
}

FACES=(ocp shim plugin)
[[ -n $REF ]] && FACES+=(ref)
N=${#FACES[@]}
for ((r = 0; r < ROUNDS; ++r)); do
  for ((i = 0; i < N; ++i)); do
    "${FACES[(i + r) % N]}" >> "$WORK/rows"
  done
done
printf 'fabric: 4 planes x 4 spines, host ports %s Gbit/s, %s s runs, %s rounds, load %s\n' \
  "$RATE" "$SECS" "$ROUNDS" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-5s %8s %10s %8s %6s %8s %10s\n' face Gbit/s packets retx/1k rto srtt_ms "cpu ms/GB"
awk '{printf "  %-5s %8.3f %10d %8.1f %6d %8.2f %10.1f\n", $1, $2, $3, 1000 * $4 / $3, $5,
      $6 / 1000, 1000 * $8 / ($7 / 1e9)}' "$WORK/rows"
echo "  ib_write_bw's settings: $(paste -sd, "$WORK/perftest" | tr -d '|')"
# Per face: the sums over its runs.
awk '{p[$1] += $3; x[$1] += $4; o[$1] += $5; b[$1] += $7; c[$1] += $8}
     END {for (f in p) printf "  %-5s all runs: retx/1k %.1f, rto %d, cpu ms/GB %.1f\n", f,
          1000 * x[f] / p[f], o[f], 1000 * c[f] / (b[f] / 1e9)}' "$WORK/rows" | sort
