#!/usr/bin/env bash
# The project's test command (README.md; CI runs it through .ci/run).
#   1. installs missing Debian packages (scripts/deps.sh)
#   2. release preset (build/): configure, build everything incl. perf/ benchmarks, ctest
#   3. asan preset (build/asan): configure, build, ctest under ASan+UBSan
#   4. tsan preset (build/tsan): the threaded parts (UDP driver, mrc-perf runs, the NCCL
#      plugin across processes, the verbs device's CQs and completion channels, its rdma_cm
#      service thread) under TSan
#   5. fuzz preset (build/fuzz): every libFuzzer target for 20 s from its seed corpus
# Exits non-zero on the first failure; the last line says PASS or FAIL and where.
#
# Usage: bash scripts/test.sh [--quick | --asan-only] [-- <ctest args>]
#   --quick       release only (skip the ASan+UBSan, TSan and fuzz builds)
#   --asan-only   ASan+UBSan only (skip the release, TSan and fuzz builds)
#   -- ARGS       passed to both ctest runs, e.g. -- -R Scoreboard  or  -- -LE perf
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

run_release=1
run_asan=1
run_tsan_fuzz=1
ctest_args=()
while (($#)); do
  case "$1" in
    --quick) run_asan=0; run_tsan_fuzz=0 ;;
    --asan-only) run_release=0; run_tsan_fuzz=0 ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test.sh: unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
if ((!run_release && !run_asan)); then
  echo "test.sh: --quick and --asan-only together leave nothing to run" >&2
  exit 2
fi

jobs=$(nproc)
stage="start"
passed=()

finish() {
  local rc=$?
  if ((rc == 0)); then
    echo "test.sh: PASS ($(IFS=,; echo "${passed[*]}")) in ${SECONDS}s"
  else
    echo "test.sh: FAIL at '${stage}' (exit ${rc}) after ${SECONDS}s"
  fi
}
trap finish EXIT

# step <name> <command...>: run one stage, announce it and how long it took.
step() {
  stage="$1"
  shift
  local t0=$SECONDS
  echo "==> ${stage}"
  "$@"
  echo "==> ${stage}: ok ($((SECONDS - t0))s)"
}

step "deps" bash scripts/deps.sh

# ctest: -j runs tests in parallel; --output-on-failure and "no tests is an error" come
# from the test presets (CMakePresets.json).
if ((run_release)); then
  step "release: configure" cmake --preset release
  step "release: build" cmake --build --preset release --parallel "$jobs"
  step "release: test" ctest --preset release -j "$jobs" "${ctest_args[@]}"
  passed+=(release)
fi

# ASAN_OPTIONS / UBSAN_OPTIONS (halt_on_error, print_stacktrace, leak checks) are set by
# the asan test preset, so `ctest --preset asan` by hand runs the same way. Options in the
# caller's environment are appended and win.
if ((run_asan)); then
  step "asan: configure" cmake --preset asan
  step "asan: build" cmake --build --preset asan --parallel "$jobs"
  step "asan: test" ctest --preset asan -j "$jobs" "${ctest_args[@]}"
  passed+=(asan)
fi

# The threaded parts under ThreadSanitizer: only their test binaries are built.
if ((run_tsan_fuzz)); then
  step "tsan: configure" cmake --preset tsan
  step "tsan: build" cmake --build --preset tsan --parallel "$jobs" \
    --target udp_driver_test probes_test config_test mrc_run_test nccl_transfer_test \
    verbs_device_test cm_test
  step "tsan: test" ctest --preset tsan -j "$jobs"
  passed+=(tsan)
fi

# Short bounded fuzzing of the wire decoder, the engine and the config parsers (fuzz/).
if ((run_tsan_fuzz)); then
  step "fuzz" bash scripts/fuzz.sh "${MRC_FUZZ_SECONDS:-20}"
  passed+=(fuzz)
fi
