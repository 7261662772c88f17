#!/usr/bin/env bash
# Stock ib_write_bw through the verbs shim on a fabric MRC did not make (tests/verbs/
# hand_fabric.h: plain ip/tc, own IPv6 and IPv4 addressing, ECMP routes, and SRv6 uSID routes
# programmed by hand with a hand-written fabric file) vs the same tool on an mrc-fabric SRv6
# fabric of the same shape and port rate, one after the other: the reference says what the
# endpoints reach on this machine now. Then the NCCL plugin's harness on the hand fabric.
# Needs root (network namespaces). Record the output in perf/RESULTS.md.
#   hand fabric  build/tests/verbs/ns_ecmp_test with MRC_NS_ECMP_SECONDS=SECS: ECMP, the GID
#                peer learns the planes (IPv6, IPv4), and before learning (one plane); SRv6
#                with the hand-written fabric file
#   reference    mrc-fabric up --planes P --spines S --rate 0.5, ib_write_bw -D SECS, srv6;
#                perf/nccl_bw (the plugin, 1 MiB messages, SECS) on it
#   plugin       build/tests/nccl/nccl_fabric_test NcclHandFabric (2 planes x 2 spines): the
#                harness's stream of 1 MiB messages, every byte verified, and perf/nccl_bw,
#                for SECS each, ECMP IPv6 / IPv4 and SRv6
# All at 500 Mbit/s per host port, base RTT 300 us.
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
cmake --build --preset release --target mrc_verbs_shim mrc-fabric ns_ecmp_test nccl_fabric_test nccl_bw nccl-net-mrc \
  --parallel "$(nproc)" >/dev/null
FAB=$B/tools/mrc-fabric
SHIM=$PWD/$B/lib/libmrc-verbs-shim.so
cleanup() { "$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM

echo "== $(date -u +%FT%TZ) $(git rev-parse --short HEAD), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== hand-built fabric (ECMP, and SRv6 with a hand-written file), $PLANES planes x $SPINES spines, 500 Mbit/s ports"
MRC_NS_ECMP_SECONDS=$SECS MRC_NS_ECMP_PLANES=$PLANES MRC_NS_ECMP_SPINES=$SPINES \
  $B/tests/verbs/ns_ecmp_test --gtest_filter='NsEcmp.Ipv*:NsEcmp.Srv6*:NsEcmp.Before*' |
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
rm -f /tmp/ecmp_bw_server.$$ /tmp/ecmp_bw_rv.$$
# The plugin on the reference: perf/nccl_bw, 1 MiB messages, receiver's rate.
for h in 1 0; do
  role=send; [[ $h == 1 ]] && role=recv
  ip netns exec "$PREFIX-h$h" env MRC_CONFIG="$CFG/h$h.json" MRC_PORT=0 \
    $B/perf/nccl_bw --transport mrc --role $role --rendezvous /tmp/ecmp_bw_rv.$$ \
    --plugin $B/lib/libnccl-net-mrc.so --size 1048576 --seconds "$SECS" > /tmp/ecmp_bw_$role.$$ 2>&1 &
  eval "pid_$h=\$!"
done
wait "$pid_0" "$pid_1" || cat /tmp/ecmp_bw_*.$$
awk -v agg="$PLANES" '$1 == "mrc" {printf "[ srv6 ] plugin nccl_bw %.3f Gbit/s = %.2f of %.1f\n", $2, $2 / (agg * 0.5), agg * 0.5}' \
  /tmp/ecmp_bw_recv.$$
rm -f /tmp/ecmp_bw_send.$$ /tmp/ecmp_bw_recv.$$ /tmp/ecmp_bw_rv.$$

echo "== NCCL plugin harness on the hand-built fabric, 2 planes x 2 spines, 500 Mbit/s ports"
MRC_NS_ECMP_SECONDS=$SECS $B/tests/nccl/nccl_fabric_test --gtest_filter='Fabrics/NcclHandFabric.*' |
  grep -E '^\[ ecmp \]|PASSED|FAILED'
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
