#!/usr/bin/env bash
# Debian's stock perftest through the verbs shim vs MRC's own tools, side by side on one
# namespace fabric: 2 hosts, 4 planes x 4 spines, host ports shaped to RATE Gbit/s (ceiling
# 4 x RATE). Needs root (network namespaces). Record the output in perf/RESULTS.md.
#   bandwidth  ib_write_bw -D SECS (64 KiB, 128 in flight)  vs  mrc-perf --op write, the same
#              message size, on the same fabric, both over perftest's window (its margins);
#              ratio shim / mrc-perf (target >= 0.9)
#   rdma_cm    ib_write_bw -R -D SECS: the same run connected through the shim's rdma_cm
#              (perftest's -R) instead of perftest's own TCP exchange; ratio -R / plain
#              (the data path is the same: expect about 1)
#   latency    ib_write_lat, ib_send_lat, ib_read_lat (2 B, 1000 iterations; t_typical)  vs
#              a raw UDP ping-pong (udp_pingpong) over the path MRC's first EV takes, blocking
#              and busy-polling: ratios to the busy one (target <= 1.5), and t_min against
#              the busy one's t_min (less load-bound; per-round-trip counts: lat_cost.sh);
#              ib_read_lat reports a whole round trip where the other two report half of
#              one (perftest's rtt_factor): it is set against twice UDP's one way;
#              mrc-perf --latency (8 B WRITE, post to completion: a round trip) p50 / p99 vs
#              twice the busy ping-pong's one-way t_typical / t_99 (targets <= 1.3 / <= 2),
#              and vs the like-for-like reference: one thread playing both ends of the busy
#              ping-pong (udp_pingpong --role both), as mrc-perf's one polling thread does
#   atomics    ib_atomic_lat (fetch-and-add, 1000 iterations) against ib_write_lat of the same
#              run (an atomic is a round trip, as a 2-byte WRITE's ping-pong is: expect about
#              1), and ib_atomic_bw -D SECS (fetch-and-add, perftest's 16 in flight): ops/s
#   qperf -cm1 rc_bw, rc_rdma_write_bw, rc_rdma_read_bw, rc_lat, rc_fetch_add_mr through the
#              shim's rdma_cm (-t SECS each) against ib_write_bw and ib_write_lat above (qperf
#              counts 64 KiB SENDs, one in flight per CQ poll: its own window)
#
# Usage: bash perf/verbs_perf.sh [seconds=10] [rate=2]
# MRC_POLLER_PROGRESS=1 in the environment runs the shim with the app-thread receive
# (io/udp/udp_driver.h poll_progress; off by default), for a comparison. mrc-perf --latency
# always receives in its polling thread.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-10}
RATE=${2:-2}
PREFIX="vp$$"
B=build
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc_verbs_shim mrc-fabric mrc-perf udp_pingpong \
  --parallel "$(nproc)" >/dev/null
FAB=$B/tools/mrc-fabric
SHIM=$PWD/$B/lib/libmrc-verbs-shim.so
cleanup() { "$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
"$FAB" up --prefix "$PREFIX" --hosts 2 --planes 4 --spines 4 --rate "$RATE" >/dev/null
CFG=/run/mrc-fabric/$PREFIX/hosts
SERVER=$(ip -n "$PREFIX-h0" -4 -o addr show dev mgmt0 | awk '{print $4}' | cut -d/ -f1)

# as_host <host> <cmd...>: run as fabric host <host> with its MRC config and the shim, nothing
# tuned (mrc-perf runs with its defaults too).
as_host() {
  local h=$1; shift
  ip netns exec "$PREFIX-h$h" env MRC_CONFIG="$CFG/h$h.json" MRC_STATS=0 \
    LD_PRELOAD="$SHIM" "$@"
}
# pair <tool args...>: server in host 0, client in host 1; prints the client's output.
pair() {
  as_host 0 "$@" > /tmp/verbs_perf_server.$$ 2>&1 &
  local s=$!
  sleep 0.5
  as_host 1 "$@" "$SERVER" || { cat /tmp/verbs_perf_server.$$; exit 1; }
  wait "$s"
  rm -f /tmp/verbs_perf_server.$$
}

# Both bandwidths over the same window: perftest's -D run counts the bytes between its margins
# (MARGIN s after the start, MARGIN s before the end); mrc-perf's 10 ms samples are averaged
# over the same span, weighted by each sample's length (its CSV: end time, Gbit/s).
MARGIN=$(( SECS >= 5 ? 2 : 1 ))
SHIM_BW=$(pair ib_write_bw -D "$SECS" -f "$MARGIN" --report_gbits | awk '$1 == 65536 {print $4}')
RCM_BW=$(pair ib_write_bw -R -D "$SECS" -f "$MARGIN" --report_gbits | awk '$1 == 65536 {print $4}')
"$B/tools/mrc-perf" --prefix "$PREFIX" --client 1 --server 0 --op write --size 64K \
  --outstanding 30 --duration "$SECS" -q --csv /tmp/verbs_perf_mrc.$$.csv >/dev/null
PERF_BW=$(awk -F, -v a="$MARGIN" -v b="$((SECS - MARGIN))" '
  NR > 1 { t = $1; g = $2; if (t > a && t <= b) { bits += g * (t - prev); secs += t - prev }
           prev = t }
  END { if (secs > 0) printf "%.3f", bits / secs }' /tmp/verbs_perf_mrc.$$.csv)
rm -f /tmp/verbs_perf_mrc.$$.csv
lat() { pair "$@" | awk '$1 == 2 {print $3, $4, $5, $6, $8, $9}'; }
LAT=$(lat ib_write_lat)
SEND_LAT=$(lat ib_send_lat)
READ_LAT=$(lat ib_read_lat)
MRC_LAT=$("$B/tools/mrc-perf" --prefix "$PREFIX" --client 1 --server 0 --op write --size 8 \
  --latency --duration "$SECS" -q | sed -n 's/.*latency (post to completion.*p50 \([0-9.]*\) us, p99 \([0-9.]*\) us.*/\1 \2/p')
ALAT=$(pair ib_atomic_lat | awk '$1 == 8 {print $3, $4, $5, $6, $8, $9}')
ABW=$(pair ib_atomic_bw -D "$SECS" -f "$MARGIN" | awk '$1 == 8 {print $5}')  # Mpps
# qperf: its server answers the client's tests, then the client's `quit` stops it.
as_host 0 qperf -lp 19766 > /tmp/verbs_perf_qperf.$$ 2>&1 &
QS=$!
sleep 0.5
QPERF=$(as_host 1 qperf -lp 19766 -cm1 -t "$SECS" "$SERVER" rc_bw rc_rdma_write_bw \
  rc_rdma_read_bw rc_lat rc_fetch_add_mr quit 2>/dev/null) || { cat /tmp/verbs_perf_qperf.$$; exit 1; }
wait "$QS" || true
rm -f /tmp/verbs_perf_qperf.$$
# qperf_value <test> <unit out>: the test's figure converted (GB/sec or MB/sec -> Gbit/s;
# us / ms -> us; K/sec or /sec -> ops/s).
qperf_value() {
  echo "$QPERF" | awk -v t="$1:" -v want="$2" '
    $1 == t { on = 1; next }
    on && NF >= 4 { v = $3; u = $4
      if (want == "gbit") { f = (u ~ /^GB/) ? 8 : (u ~ /^MB/) ? 0.008 : (u ~ /^KB/) ? 0.000008 : 0 }
      else if (want == "us") { f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "ns") ? 0.001 : 0 }
      else { f = (u ~ /^K/) ? 1000 : (u ~ /^M/) ? 1000000 : 1 }
      printf "%.3f", v * f; exit }'
}
udp() {
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" "$B/perf/udp_pingpong" --role server --peer-host 1 "$@" &
  local s=$!
  sleep 0.3
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" "$B/perf/udp_pingpong" --role client --peer-host 0 "$@"
  wait "$s"
}
UDP_BLOCK=$(udp)
UDP_BUSY=$(udp --busy)
UDP_ONE=$(ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" "$B/perf/udp_pingpong" \
  --role both --peer-host 0 --peer-netns "$PREFIX-h0" --busy)

CEIL=$((4 * RATE))
printf 'fabric: 4 planes x 4 spines, host ports %s Gbit/s (ceiling %s Gbit/s), %s s runs\n' "$RATE" "$CEIL" "$SECS"
printf '  ib_write_bw via shim   %7.2f Gbit/s  (%.2f of the ceiling)\n' "$SHIM_BW" "$(echo "$SHIM_BW / $CEIL" | bc -l)"
printf '  mrc-perf write 64K     %7.2f Gbit/s  -> shim / mrc-perf = %.2f\n' "$PERF_BW" "$(echo "$SHIM_BW / $PERF_BW" | bc -l)"
printf '  ib_write_bw -R         %7.2f Gbit/s  -> rdma_cm / own TCP exchange = %.2f\n' "$RCM_BW" "$(echo "$RCM_BW / $SHIM_BW" | bc -l)"
printf '  %s\n  %s\n  %s\n' "$UDP_BLOCK" "$UDP_BUSY" "$UDP_ONE"
UB=$(echo "$UDP_BLOCK" | awk '{print $5}')
UP=$(echo "$UDP_BUSY" | awk '{print $5}')
UP99=$(echo "$UDP_BUSY" | awk '{print $9}')
UPMIN=$(echo "$UDP_BUSY" | awk '{print $3}')
U1=$(echo "$UDP_ONE" | awk '{print $5}')
U199=$(echo "$UDP_ONE" | awk '{print $9}')
# perftest reports half the ping-pong's round trip for WRITE and SEND but the whole round trip
# for READ (and atomics: print_report_lat's rtt_factor), so READ is set against twice UDP's
# one way.
for t in "ib_write_lat:1:$LAT" "ib_send_lat:1:$SEND_LAT" "ib_read_lat:2:$READ_LAT"; do
  name=${t%%:*}; v=${t#*:}; k=${v%%:*}; v=${v#*:}
  way='one way'; vs='raw UDP'
  [[ $k == 2 ]] && way='round trip' && vs='2 x raw UDP one way'
  printf '  %-13s via shim  t_min %s t_max %s t_typical %s t_avg %s t_99 %s t_99.9 %s (us, %s)\n' "$name" $v "$way"
  typ=$(echo "$v" | awk '{print $3}')
  printf '    typical / %s = %.2f (blocking), %.2f (busy polling; target <= 1.5)\n' "$vs" \
    "$(echo "$typ / ($k * $UB)" | bc -l)" "$(echo "$typ / ($k * $UP)" | bc -l)"
  # t_min: what the path costs when the scheduler does not get in the way (less load-bound)
  printf '    t_min / %s busy t_min = %.2f\n' "$vs" \
    "$(echo "$(echo "$v" | awk '{print $1}') / ($k * $UPMIN)" | bc -l)"
done
read -r MP50 MP99 <<< "$MRC_LAT"
printf '  mrc-perf --latency (8 B WRITE, round trip)  p50 %s us  p99 %s us\n' "$MP50" "$MP99"
printf '    / raw UDP busy round trip (2 x one way): p50 %.2f (target <= 1.3), p99 %.2f (target <= 2)\n' \
  "$(echo "$MP50 / (2 * $UP)" | bc -l)" "$(echo "$MP99 / (2 * $UP99)" | bc -l)"
printf '    / raw UDP busy round trip, one thread both ends (like for like): p50 %.2f (target <= 1.3), p99 %.2f (target <= 2)\n' \
  "$(echo "$MP50 / (2 * $U1)" | bc -l)" "$(echo "$MP99 / (2 * $U199)" | bc -l)"
TYP=$(echo "$LAT" | awk '{print $3}')
ATYP=$(echo "$ALAT" | awk '{print $3}')
printf '  ib_atomic_lat via shim t_min %s t_max %s t_typical %s t_avg %s t_99 %s t_99.9 %s (us, round trip)\n' $ALAT
printf '  atomic / write latency (typical) = %.2f (an atomic is a round trip; ib_write_lat reports half its ping-pong)\n' \
  "$(echo "$ATYP / (2 * $TYP)" | bc -l)"
printf '  ib_atomic_bw -D %s      %.4f Mops/s fetch-and-add (%.1f Mbit/s of 8-byte results)\n' \
  "$SECS" "$ABW" "$(echo "$ABW * 64" | bc -l)"
Q_BW=$(qperf_value rc_bw gbit); Q_WBW=$(qperf_value rc_rdma_write_bw gbit)
Q_RBW=$(qperf_value rc_rdma_read_bw gbit); Q_LAT=$(qperf_value rc_lat us)
Q_FA=$(qperf_value rc_fetch_add_mr ops)
printf '  qperf -cm1 rc_bw %.2f, rc_rdma_write_bw %.2f, rc_rdma_read_bw %.2f Gbit/s -> rc_rdma_write_bw / ib_write_bw = %.2f\n' \
  "$Q_BW" "$Q_WBW" "$Q_RBW" "$(echo "$Q_WBW / $SHIM_BW" | bc -l)"
printf '  qperf -cm1 rc_lat %.1f us (one way) -> / ib_write_lat typical = %.2f; rc_fetch_add_mr %.0f ops/s -> / ib_atomic_bw = %.2f\n' \
  "$Q_LAT" "$(echo "$Q_LAT / $TYP" | bc -l)" "$Q_FA" "$(echo "$Q_FA / ($ABW * 1000000)" | bc -l)"
