# Shared by the side-by-side bandwidth scripts (defaults_bw.sh, faces_bw.sh); sourced, not run.
# From the repository root, after the release build: fabric_up makes one namespace fabric
# (2 hosts, 4 planes x 4 spines unless told, host ports RATE Gbit/s) removed on exit, and the runners
# measure one front end on it. Each runner takes the run's seconds and then VAR=value settings
# for both ends' environment (none: nothing tuned).
# SAMPLE_AT=<s> and a function sample <sender pid> <receiver pid>: the runners publish
# statistics (MRC_STATS on) and call it that many seconds into each run, both ends still
# running (faces_bw.sh reads the counters of the window's end so).
B=build
FAB=$B/tools/mrc-fabric
SHIM=$PWD/$B/lib/libmrc-verbs-shim.so

# fabric_up <prefix> <rate> [planes=4] [spines=4]: sets WORK (scratch), CFG (the hosts' MRC
# configs), SERVER (host 0's management address). Rate 0: unshaped.
fabric_up() {
  PREFIX=$1
  WORK=$(mktemp -d)
  trap '"$FAB" down --prefix "$PREFIX" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
  trap 'exit 1' INT TERM
  "$FAB" up --prefix "$PREFIX" --hosts 2 --planes "${3:-4}" --spines "${4:-4}" --rate "$2" >/dev/null
  CFG=/run/mrc-fabric/$PREFIX/hosts
  SERVER=$(ip -n "$PREFIX-h0" -4 -o addr show dev mgmt0 | awk '{print $4}' | cut -d/ -f1)
  echo '{}' > "$WORK/empty.json"
}

# plugin_bw <secs> [VAR=value...]: Gbit/s the receiver of perf/nccl_bw --transport mrc counted
# (through libnccl-net-mrc.so, 4 MiB messages).
plugin_bw() {
  local secs=$1 rv="$WORK/rv-$RANDOM$RANDOM"; shift
  for h in 0 1; do
    local role=send; [[ $h == 1 ]] && role=recv
    env MRC_CONFIG="$WORK/empty.json" MRC_PATH_MODE=srv6 \
      MRC_FABRIC="/run/mrc-fabric/$PREFIX/fabric.json" MRC_HOST=$h MRC_PORT=0 "$(stats)" "$@" \
      ip netns exec "$PREFIX-h$h" "$B/perf/nccl_bw" --transport mrc --role $role \
      --rendezvous "$rv" --plugin "$B/lib/libnccl-net-mrc.so" --size 4194304 --seconds "$secs" \
      > "$WORK/plugin-$role" 2>&1 &
    eval "pid_$h=\$!"
  done
  [[ -z ${SAMPLE_AT:-} ]] || { sleep "$SAMPLE_AT"; sample "$pid_0" "$pid_1"; }
  wait "$pid_0" "$pid_1" || { cat "$WORK"/plugin-* >&2; exit 1; }
  awk '$1 == "mrc" && $3 == "Gbit/s" {print $2}' "$WORK/plugin-recv"
}

# pair <out> <env settings...> -- <prog args...>: the program as server in host 0 and as
# client in host 1 (with the server's address last), each with its host's MRC config; the
# client's output in $WORK/<out>. The client is the sender (WRITEs).
pair() {
  local out=$1 envs=(); shift
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  ip netns exec "$PREFIX-h0" env MRC_CONFIG="$CFG/h0.json" "$(stats)" "${envs[@]}" "$@" \
    > "$WORK/$out-server" 2>&1 &
  local s=$!
  sleep 0.5
  ip netns exec "$PREFIX-h1" env MRC_CONFIG="$CFG/h1.json" "$(stats)" "${envs[@]}" "$@" \
    "$SERVER" > "$WORK/$out" 2>&1 &
  local c=$!
  [[ -z ${SAMPLE_AT:-} ]] || { sleep "$SAMPLE_AT"; sample "$c" "$s"; }
  wait "$c" || { cat "$WORK/$out-server" "$WORK/$out" >&2; exit 1; }
  wait "$s" || { cat "$WORK/$out-server" >&2; exit 1; }
}

# stats: the MRC_STATS setting of both ends (published only where a sample reads them).
stats() { if [[ -n ${SAMPLE_AT:-} ]]; then echo MRC_STATS=1; else echo MRC_STATS=0; fi; }

# shim_bw <secs> [VAR=value...]: stock ib_write_bw -D through the verbs shim (64 KiB, 128 in
# flight), its average over the window less perftest's margins (-f).
shim_bw() {
  local secs=$1; shift
  pair shim "$@" LD_PRELOAD="$SHIM" -- ib_write_bw -D "$secs" -f "$(( secs >= 5 ? 2 : 1 ))" \
    --report_gbits
  awk '$1 == 65536 {print $4}' "$WORK/shim"
}

# median: of the numbers on stdin (space or newline separated).
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
