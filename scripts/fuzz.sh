#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset: clang, ASan+UBSan, build/fuzz) and runs each for
# a bounded time from its seed corpus in fuzz/corpus/<target>/. New inputs go to a scratch
# corpus (build/fuzz/corpus/<target>/), never into the repo; a crash leaves its input in
# build/fuzz/artifacts/ and fails the script. scripts/test.sh runs it with 20 s per target.
#
# Usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 20, all targets)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-20}
shift || true
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }
targets=("$@")
((${#targets[@]})) || targets=(fuzz_wire_decode fuzz_engine fuzz_config fuzz_nccl_control fuzz_verbs_connect
                               fuzz_mcast_record)

cmake --preset fuzz --log-level=WARNING
cmake --build --preset fuzz --parallel "$(nproc)" --target "${targets[@]}"
mkdir -p build/fuzz/artifacts
for t in "${targets[@]}"; do
  [[ -d "fuzz/corpus/$t" ]] || { echo "fuzz.sh: no seed corpus fuzz/corpus/$t" >&2; exit 2; }
  mkdir -p "build/fuzz/corpus/$t"
  echo "fuzz.sh: $t for ${seconds}s"
  # Only the summary lines: the per-input log is long. The verbs device logs every refused
  # call on stderr: closed for that target (libFuzzer still prints crash reports).
  extra=()
  [[ "$t" == fuzz_verbs_connect ]] && extra=(-close_fd_mask=2)
  if ! build/fuzz/fuzz/"$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix=build/fuzz/artifacts/"$t"- -print_final_stats=1 "${extra[@]}" \
      "build/fuzz/corpus/$t" "fuzz/corpus/$t" >"build/fuzz/$t.log" 2>&1; then
    tail -40 "build/fuzz/$t.log" >&2
    echo "fuzz.sh: $t FAILED; input saved under build/fuzz/artifacts/" >&2
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "build/fuzz/$t.log" || true
  grep -E "DONE +cov" "build/fuzz/$t.log" | tail -1 || true
done
echo "fuzz.sh: PASS (${targets[*]})"
