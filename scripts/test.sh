#!/usr/bin/env bash
# Installs what is missing, builds and runs the test suite. With nvcc present
# the cuda preset is built (CPU + CUDA code); GPU tests skip, saying why, when
# no device is present. Then the CI bench is compared with the committed
# baseline (scripts/ci-bench.sh).
#   scripts/test.sh [auto|cpu|cuda]   the suite and the gate (default auto)
#   scripts/test.sh sanitize          the suite under AddressSanitizer +
#                                     UndefinedBehaviorSanitizer, built with
#                                     clang (halt on the first error, leaks
#                                     detected)
#   scripts/test.sh ci                what CI runs (.ci/run): the suite and the
#                                     gate, then the sanitized suite, then a
#                                     20 s smoke of each libFuzzer target
#                                     (scripts/fuzz.sh); any finding fails it
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
script_help_if_asked "$@"
cd "$(dirname "$0")/.."
mode="${1:-auto}"

if [ "$mode" = ci ]; then
  t0=$SECONDS
  stage() { echo "[ci] $1 ($(( (SECONDS - t0) / 60 )) min in)"; }
  stage "suite and performance gate"
  "$0" auto
  stage "suite under ASan + UBSan"
  "$0" sanitize
  stage "fuzz smoke, ${YOCO_FUZZ_SECONDS:-20} s a target"
  scripts/fuzz.sh "${YOCO_FUZZ_SECONDS:-20}"
  echo "[ci] all stages passed in $(( (SECONDS - t0) / 60 )) min $(( (SECONDS - t0) % 60 )) s"
  exit 0
fi

case "$mode" in auto|cpu|cuda|sanitize) ;; *)
  echo "usage: scripts/test.sh [auto|cpu|cuda|sanitize|ci]  (unknown mode '$mode')" >&2; exit 2 ;;
esac
# The sanitize preset builds with clang (tests/sanitize/ubsan_ignore.txt says why).
if [ "$mode" = sanitize ]; then scripts/install-deps.sh --clang; else scripts/install-deps.sh; fi
t_build=$SECONDS
preset=$(scripts/build.sh "$mode" | tail -1)
echo "[test] preset $preset, built in $((SECONDS - t_build)) s"
if [ "$preset" = cuda ]; then
  # Say up front whether the GPU tests will run, and if not, why.
  reason=$(build/cuda/bin/test_cuda_counter_init --gtest_filter='*BitIdentical*' 2>&1 | grep -o 'no CUDA device:.*' | head -1 || true)
  echo "[test] GPU tests: ${reason:-a CUDA device is present, GPU tests run}"
fi
if [ "$preset" = sanitize ]; then
  # The first report ends the test that made it (and so fails it); leaks count.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
fi
t_tests=$SECONDS
ctest --preset "$preset" -j "${YOCO_JOBS:-$(nproc)}" --timeout 900
echo "[test] the suite ran in $((SECONDS - t_tests)) s"
# The performance-regression gate against reports/baselines/ci-cpu.csv (not
# under the sanitizers, whose slowdown would distort the timing ratios).
if [ "$preset" != sanitize ]; then
  t_gate=$SECONDS
  scripts/ci-bench.sh "$preset"
  echo "[test] the performance gate ran in $((SECONDS - t_gate)) s"
fi
