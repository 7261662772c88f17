#!/bin/sh
# NSCC in mrc-sim (issue 16): the starting window and the delay-based decrease, before/after in
# virtual time (deterministic for a seed). Runs every case below with each mrc-sim binary given
# (e.g. main's copied aside, then the branch's) into OUT/<label>/<case>.json, then prints one
# markdown table per case: efficiency, retransmits, RTOs, trims, drops, and the first 4 base
# RTTs' trims / retransmits / drops and NSCC's cuts, side by side. About 3 minutes per binary
# on one core (about 6 with the 256-host incasts and permutation without ECN).
#   incast_{15,63}[_256][_noecn]: 64 (256) hosts, 15 x 2 MiB or 63 x 1 MiB into host 0, mrc and
#     mrc-notrim; _noecn: 256 KiB drop-tail queues that mark nothing (--buffer 256K --ecn 1G)
#   perm_{64,256}: permutation 8 MiB (mrc; _noecn: mrc and mrc-notrim, drop-tail as above);
#   a2a_{64,256}: all-to-all 32 KiB, 32 flows in flight
#   *_nodd: the same with --no-delay-decrease (skipped with DD=0, or by a binary without the
#     flag); the rule off is a CC profile, which learns no base RTT: compare _dd and _nodd
#     under a label with the base RTT set (e.g. --base-rtt-us,-1)
# MRC_SIM may carry arguments for every case after commas: nothing set (mrc-sim's default: the
# engines learn the base RTT) vs the fabric's base RTT set by hand (issue 16) is
# `learned=build/tools/mrc-sim tuned=build/tools/mrc-sim,--base-rtt-us,-1`.
# Usage: [DD=0] perf/mrc-sim/run_cc.sh OUT LABEL=MRC_SIM[,ARG...] [LABEL=MRC_SIM[,ARG...]...]
set -eu
OUT=$1; shift
run() { # <bin> <dir> <case> <args...>
  rb=$1; rd=$2; rn=$3; shift 3
  # shellcheck disable=SC2086
  nice -n 10 "$rb" --no-progress -q --json "$rd/$rn.json" "$@" $extra || echo "FAILED: $rn" >&2
}
for lb in "$@"; do
  label=${lb%%=*}; b=${lb#*=}; d=$OUT/$label; mkdir -p "$d"
  extra=""
  case $b in *,*) extra=$(printf %s "${b#*,}" | tr , ' '); b=${b%%,*} ;; esac
  noecn="--buffer 256K --ecn 1G"
  for h in 64 256; do
    sfx=""; [ $h = 256 ] && sfx=_256
    for n in 15 63; do
      bytes=2M; [ $n = 63 ] && bytes=1M
      run "$b" "$d" incast_$n$sfx --hosts $h --pattern incast --incast-senders $n --bytes $bytes --transport mrc,mrc-notrim
      # shellcheck disable=SC2086
      run "$b" "$d" incast_$n${sfx}_noecn --hosts $h --pattern incast --incast-senders $n --bytes $bytes --transport mrc,mrc-notrim $noecn
    done
    run "$b" "$d" perm_$h --hosts $h --pattern permutation --bytes 8M --transport mrc
    run "$b" "$d" a2a_$h --hosts $h --pattern alltoall --bytes 32K --window 32 --qps-on-demand --transport mrc
    # shellcheck disable=SC2086
    run "$b" "$d" perm_${h}_noecn --hosts $h --pattern permutation --bytes 8M --transport mrc,mrc-notrim $noecn
  done
  if [ "${DD:-1}" != 0 ] && "$b" --help | grep -q -- --no-delay-decrease; then
    for c in "perm_64 --pattern permutation --bytes 8M --transport mrc,mrc-notrim" \
             "perm_64_noecn --pattern permutation --bytes 8M --transport mrc,mrc-notrim $noecn" \
             "a2a_64 --pattern alltoall --bytes 32K --window 32 --qps-on-demand --transport mrc,mrc-notrim" \
             "incast_15_noecn --pattern incast --incast-senders 15 --bytes 2M --transport mrc,mrc-notrim $noecn"; do
      set -- $c; name=$1; shift
      run "$b" "$d" ${name}_dd --hosts 64 "$@"
      run "$b" "$d" ${name}_nodd --hosts 64 --no-delay-decrease "$@"
    done
  fi
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
labels = sorted(os.listdir(out), key=lambda l: os.path.getmtime(os.path.join(out, l)))
cases = []
for l in labels:
    for f in sorted(os.listdir(os.path.join(out, l))):
        if f.endswith(".json") and f[:-5] not in cases:
            cases.append(f[:-5])
print("| case | transport | " + " | ".join(
    "%s eff | retx | RTOs | trims | drops | first 4 RTTs trims / retx / drops | NSCC cuts ECN / delay" % l
    for l in labels) + " |")
print("| --- | --- |" + " --- | --- | --- | --- | --- | --- | --- |" * len(labels))
for c in cases:
    runs = {}
    for l in labels:
        p = os.path.join(out, l, c + ".json")
        if os.path.exists(p):
            d = json.load(open(p))
            for r in d if isinstance(d, list) else [d]:
                runs.setdefault(r["transport"], {})[l] = r
    for t, byl in runs.items():
        cells = []
        for l in labels:
            r = byl.get(l)
            if r is None:
                cells.append("- | - | - | - | - | - | -")
                continue
            f = r.get("first_rtts", {})
            cells.append("%.3f%s | %d | %d | %d | %d | %s / %s / %s | %s / %s" % (
                r["efficiency"], "" if r["ok"] else " FAIL", r["retransmits"], r["rtos"],
                r["trims"], r["drops"], f.get("trims", "-"), f.get("retransmits", "-"),
                f.get("drops", "-"), r.get("cc_decreases", "-"), r.get("cc_delay_decreases", "-")))
        print("| %s | %s | %s |" % (c, t, " | ".join(cells)))
PY
