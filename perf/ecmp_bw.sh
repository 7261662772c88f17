#!/usr/bin/env bash
# Stock ib_write_bw through the verbs shim on a fabric MRC did not make (tests/verbs/
# hand_fabric.h: plain ip/tc, ECMP routes, own IPv6 and IPv4 addressing, path_mode ecmp, no
# fabric file) vs the same tool on an mrc-fabric SRv6 fabric of the same shape and port rate,
# one after the other: the reference says what the endpoints reach on this machine now.
# Needs root (network namespaces). Record the output in perf/RESULTS.md.
#   hand fabric  build/tests/verbs/ns_ecmp_test with MRC_NS_ECMP_SECONDS=SECS: the GID peer
#                learns the planes (IPv6, IPv4), and before learning (one plane)
#   reference    mrc-fabric up --planes P --spines S --rate 0.5, ib_write_bw -D SECS, srv6
# Both at 500 Mbit/s per host port, base RTT 300 us.
#
# Usage: bash perf/ecmp_bw.sh [seconds=10] [planes=2] [spines=2]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-10}
PLANES=${2:-2}
SPINES=${3:-2}
PREFIX="eb$$"
B=build
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc_verbs_shim mrc-fabric ns_ecmp_test \
  --parallel "$(nproc)" >/dev/null
FAB=$B/tools/mrc-fabric
SHIM=$PWD/$B/lib/libmrc-verbs-shim.so
cleanup() { "$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM

echo "== $(date -u +%FT%TZ) $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== hand-built ECMP fabric, $PLANES planes x $SPINES spines, 500 Mbit/s ports"
MRC_NS_ECMP_SECONDS=$SECS MRC_NS_ECMP_PLANES=$PLANES MRC_NS_ECMP_SPINES=$SPINES \
  $B/tests/verbs/ns_ecmp_test --gtest_filter='NsEcmp.Ipv*:NsEcmp.Before*' |
  grep -E '^\[ ecmp \]|PASSED|FAILED'

echo "== reference: mrc-fabric SRv6, $PLANES planes x $SPINES spines, 500 Mbit/s ports"
"$FAB" up --prefix "$PREFIX" --hosts 2 --planes "$PLANES" --spines "$SPINES" --rate 0.5 >/dev/null
CFG=/run/mrc-fabric/$PREFIX/hosts
SERVER=$(ip -n "$PREFIX-h0" -4 -o addr show dev mgmt0 | awk '{print $4}' | cut -d/ -f1)
as_host() {
  local h=$1; shift
  ip netns exec "$PREFIX-h$h" env MRC_CONFIG="$CFG/h$h.json" MRC_STATS=0 \
    LD_PRELOAD="$SHIM" "$@"
}
as_host 0 ib_write_bw -D "$SECS" --report_gbits > /tmp/ecmp_bw_server.$$ 2>&1 &
s=$!
sleep 0.5
as_host 1 ib_write_bw -D "$SECS" --report_gbits "$SERVER" | grep -A1 '#bytes' | tail -1 |
  awk -v agg="$PLANES" '{printf "[ srv6 ] ib_write_bw -D %s %.3f Gbit/s = %.2f of %.1f\n", "'"$SECS"'", $4, $4 / (agg * 0.5), agg * 0.5}'
wait "$s" || true
rm -f /tmp/ecmp_bw_server.$$
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
