#!/usr/bin/env bash
# mrc-perf --latency of two builds, alternated on one namespace fabric (2 hosts, 4 planes x 4
# spines, RATE Gbit/s ports), with the like-for-like reference in every round: one thread
# playing both ends of a busy UDP ping-pong over MRC's first EV (udp_pingpong --role both), as
# mrc-perf's one polling thread serves both hosts. Per round and build: p50 / p99 of the round
# trip, their ratios to twice the reference's one-way t_typical / t_99, and the per-round-trip
# driver counters mrc-perf prints (load-independent). Needs root (network namespaces).
#   Usage: bash perf/latency_ab.sh A_MRC_PERF B_MRC_PERF [rounds=4] [seconds=4] [rate=2]
# A and B are mrc-perf binaries (e.g. a copy of main's build and this tree's). The fabric and
# the reference come from this tree's build (build/tools/mrc-fabric, build/perf/udp_pingpong;
# BUILD=<dir> names another build tree with tools/ and perf/ in it, e.g. stripped copies
# carried to another machine).
# C=<mrc-perf> adds a third build, "c", to each round. TRACE=1 adds a run per round: B with --latency-trace (the slow round trips' causes;
# its reads add to every round trip, so its figures are not B's). NICE=-20 runs every
# measured process (both builds and the reference alike) at that nice value: on a machine
# shared with builds, a stand-in for an idle one (the scheduler's share, not its absence).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=${1:?usage: latency_ab.sh A_MRC_PERF B_MRC_PERF [rounds] [seconds] [rate]}
BB=${2:?usage: latency_ab.sh A_MRC_PERF B_MRC_PERF [rounds] [seconds] [rate]}
ROUNDS=${3:-4}
SECS=${4:-4}
RATE=${5:-2}
B=${BUILD:-build}
for f in "$A" "$BB" "$B/tools/mrc-fabric" "$B/perf/udp_pingpong"; do
  [[ -x $f ]] || { echo "latency_ab.sh: $f: not an executable (build it first)" >&2; exit 2; }
done
PREFIX="lab$$"
FAB=$B/tools/mrc-fabric
cleanup() { "$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
"$FAB" up --prefix "$PREFIX" --hosts 2 --planes 4 --spines 4 --rate "$RATE" >/dev/null
CFG=/run/mrc-fabric/$PREFIX/hosts
OUT=${OUT:-/tmp/latency_ab.$$}
mkdir -p "$OUT"
echo "round build load p50_us p99_us p50/2xref p99/2xref_t99 ref_one_way_typ_us ref_t99_us"
for r in $(seq 1 "$ROUNDS"); do
  REF=$(${NICE:+nice -n "$NICE"} ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" "$B/perf/udp_pingpong" \
    --role both --peer-host 0 --peer-netns "$PREFIX-h0" --busy --iters 5000)
  # "udp t_min <> t_typical <> t_avg <> t_99 <> ..."
  TYP=$(echo "$REF" | awk '{for (i = 1; i <= NF; ++i) if ($i == "t_typical") print $(i + 1)}')
  T99=$(echo "$REF" | awk '{for (i = 1; i <= NF; ++i) if ($i == "t_99") print $(i + 1)}')
  runs="a:$A b:$BB"
  [[ -n ${C:-} ]] && runs="$runs c:$C"
  [[ ${TRACE:-0} == 1 ]] && runs="$runs t:$BB"
  for run in $runs; do
    name=${run%%:*}
    bin=${run#*:}
    extra=()
    [[ $name == t ]] && extra=(--latency-trace "$OUT/trace.$r.csv")
    LOAD=$(cut -d' ' -f1 /proc/loadavg)
    ${NICE:+nice -n "$NICE"} "$bin" --prefix "$PREFIX" --client 1 --server 0 --op write --size 8 --latency \
      --duration "$SECS" -q "${extra[@]}" > "$OUT/$name.$r.txt" 2>&1
    read -r P50 P99 < <(sed -n 's/.*latency (post to completion.*p50 \([0-9.]*\) us, p99 \([0-9.]*\) us.*/\1 \2/p' "$OUT/$name.$r.txt")
    printf '%s %s %s %s %s %.2f %.2f %s %s\n' "$r" "$name" "$LOAD" "$P50" "$P99" \
      "$(echo "$P50 / (2 * $TYP)" | bc -l)" "$(echo "$P99 / (2 * $T99)" | bc -l)" "$TYP" "$T99"
  done
done
echo "outputs (counters per round trip, trace summaries): $OUT"
