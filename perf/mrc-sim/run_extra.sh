#!/bin/sh
# Extra mrc-sim comparisons of perf/RESULTS.md (2026-11-25): several QPs per rail for `plane`,
# trimming on/off under incast. Same conventions as run_all.sh (about 5 minutes).
set -eu
B=${1:-build}/tools/mrc-sim
D=$(dirname "$0")
run() { name=$1; shift; echo "== $name: mrc-sim $*" >&2; nice -n 10 "$B" --no-progress -q --json "$D/$name.json" "$@" || echo "FAILED: $name" >&2; }
for q in 1 4; do run perm_256_q$q --hosts 256 --pattern permutation --bytes 8M --transport mrc,plane --qps-per-conn $q; done
run incast_256 --hosts 256 --pattern incast --incast-senders 32 --bytes 2M --transport mrc,mrc-notrim,plane,ecmp
