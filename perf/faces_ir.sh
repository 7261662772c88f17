#!/usr/bin/env bash
# Instructions per work request and per completion poll of the WRITE faces (issue 23), counted
# by callgrind: perf/ocp_write_bw (the OCP MRC API) and stock ib_write_bw through the verbs shim,
# each the client (sender) of one run on a namespace fabric (2 hosts, 4 planes x 4 spines, host
# ports RATE Gbit/s), the whole client process under `valgrind --tool=callgrind`, the server
# plain. For each function on the post and the poll path it prints the calls and the
# instructions per call, callees included (Ir/call), read from the call arcs of callgrind's
# output:
#   post    the face's entry (mrc_post_send, or verbs::post_send that ib_write_bw's inline
#           ibv_post_send reaches), verbs::post_send, Engine::post_send (the WR queued), and
#           UdpDriver::flush_locked (the packets the new WR lets out, sent from the app thread)
#   poll    the face's entry (mrc_poll_cq or verbs::poll_cq), Engine::poll_cq, and
#           UdpDriver::poll_progress (the app thread receiving when its CQ was empty)
# "per WR" is the shared code's own part per work request (every WRITE is signalled, so one
# completion each): the posts without flush_locked, and all polls without poll_progress,
# divided by the WRs posted. It counts instructions, not time: the machine's load moves it
# little, and it does not depend on how many packets a post happened to send (flush_locked)
# or how often the app polled an empty CQ (the polls that found nothing cost ~20 Ir each).
# CG_OUT=<folder> keeps callgrind's files there (callgrind_annotate them per line). Under valgrind the process's
# threads share one core, so the runs are slow; the per-call counts are what is read.
# REF, a folder holding another build's ocp_write_bw and its lib/ (libmrc.so.*,
# libmrc-verbs-shim.so; e.g. copied from build/perf and build/lib at the commit before a
# change), adds that build's two faces as ocp-ref and shim-ref, run on the same fabric.
# Needs root (network namespaces), valgrind and perftest.
#
# Usage: bash perf/faces_ir.sh [seconds=6] [rate=2] [REF]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECS=${1:-6}
RATE=${2:-2}
REF=${3:-}
if [[ -n $REF && ! -x $REF/ocp_write_bw ]]; then
  echo "faces_ir.sh: $REF/ocp_write_bw: no such program (REF holds ocp_write_bw and lib/)" >&2
  exit 2
fi
command -v valgrind >/dev/null || { echo "faces_ir.sh: needs valgrind" >&2; exit 2; }
command -v ib_write_bw >/dev/null || { echo "faces_ir.sh: needs ib_write_bw (perftest)" >&2; exit 2; }
cmake --preset release --log-level=WARNING >/dev/null
cmake --build --preset release --target mrc_verbs_shim mrc-fabric ocp_write_bw \
  --parallel "$(nproc)" >/dev/null
source perf/fabric_bw.sh
fabric_up "fir$$" "$RATE"

# run <face> <env and argv of the program...>: server in host 0, client under callgrind in
# host 1 (the server's address last); callgrind's output in $WORK/cg.<face>.
run() {
  local face=$1 envs=(); shift
  while [[ $1 == *=* ]]; do envs+=("$1"); shift; done
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" "${envs[@]}" "$@" \
    > "$WORK/$face-server" 2>&1 &
  local s=$!
  sleep 0.5
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" "${envs[@]}" valgrind \
    --tool=callgrind --callgrind-out-file="$WORK/cg.$face" "$@" "$SERVER" > "$WORK/$face" 2>&1 ||
    { cat "$WORK/$face-server" "$WORK/$face" >&2; exit 1; }
  wait "$s" || { cat "$WORK/$face-server" >&2; exit 1; }
}

run ocp "$B/perf/ocp_write_bw" --seconds "$SECS" --margin 1
run shim LD_PRELOAD="$SHIM" ib_write_bw -D "$SECS" -f 1 --report_gbits
if [[ -n $REF ]]; then
  run ocp-ref LD_LIBRARY_PATH="$REF/lib" "$REF/ocp_write_bw" --seconds "$SECS" --margin 1
  run shim-ref LD_PRELOAD="$REF/lib/libmrc-verbs-shim.so" ib_write_bw -D "$SECS" -f 1 \
    --report_gbits
fi

[[ -z ${CG_OUT:-} ]] || { mkdir -p "$CG_OUT"; cp "$WORK"/cg.* "$CG_OUT"/; }
printf 'fabric: 4 planes x 4 spines, host ports %s Gbit/s, %s s runs, load %s\n' "$RATE" "$SECS" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
FACES=(ocp shim)
[[ -n $REF ]] && FACES+=(ocp-ref shim-ref)
for f in "${FACES[@]}"; do
  python3 - "$f" "$WORK/cg.$f" <<'EOF'
import re, sys
face, path = sys.argv[1], sys.argv[2]
# Callgrind's format: "fn=(id) name" / "cfn=(id) name" (the name only the first time), then
# "calls=N ..." and on the next line "<position> <Ir>": N calls costing Ir, callees included.
names, calls, incl = {}, {}, {}
cfn = None
want = None
for line in open(path, errors="replace"):
    if want is not None:
        parts = line.split()
        calls[cfn] = calls.get(cfn, 0) + want
        incl[cfn] = incl.get(cfn, 0) + int(parts[1])
        want = None
        continue
    m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
    if m:
        if m.group(2):
            names[m.group(1)] = m.group(2).strip()
        if line.startswith("cfn="):
            cfn = m.group(1)
        continue
    if line.startswith("calls="):
        want = int(line.split()[0][6:])
def get(pattern):
    """calls and inclusive Ir of the functions whose name starts with pattern (summed)."""
    c = i = 0
    for k, n in names.items():
        if n.startswith(pattern):
            c += calls.get(k, 0)
            i += incl.get(k, 0)
    return c, i
ocp = face.startswith("ocp")
post = get("mrc_post_send" if ocp else "mrc::verbs::post_send(")
poll = get("mrc_poll_cq" if ocp else "mrc::verbs::poll_cq(")
flush = get("mrc::io::UdpDriver::flush_locked(")
progress = get("mrc::io::UdpDriver::poll_progress(")
rows = [("post (entry)", post),
        ("verbs::post_send", get("mrc::verbs::post_send(")),
        ("Engine::post_send", get("mrc::engine::Engine::post_send(")),
        ("flush_locked", flush),
        ("poll (entry)", poll),
        ("verbs::poll_cq", get("mrc::verbs::poll_cq(")),
        ("Engine::poll_cq", get("mrc::engine::Engine::poll_cq(")),
        ("poll_progress", progress)]
print(f"  {face}")
for name, (c, i) in rows:
    print(f"    {name:20s} {c:>10,d} calls {i / c if c else 0:>10,.0f} Ir/call")
if post[0]:
    # Every WRITE is signalled: one completion per post. Per WR, the shared code's own part.
    p, q = (post[1] - flush[1]) / post[0], (poll[1] - progress[1]) / post[0]
    print(f"    per WR: post {p:,.0f} Ir (without flush_locked), completion {q:,.0f} Ir (the "
          f"polls without poll_progress, over {post[0]:,d} WRs), together {p + q:,.0f}")
EOF
done
