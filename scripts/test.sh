#!/usr/bin/env bash
# Installs what is missing, builds and runs the test suite. With nvcc present
# the cuda preset is built (CPU + CUDA code); GPU tests skip, saying why, when
# no device is present. Then the CI bench is compared with the committed
# baseline (scripts/ci-bench.sh). `scripts/test.sh sanitize` runs the suite
# under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
preset=$(scripts/build.sh "${1:-auto}" | tail -1)
echo "[test] preset $preset"
if [ "$preset" = cuda ]; then
  # Say up front whether the GPU tests will run, and if not, why.
  reason=$(build/cuda/bin/test_cuda_counter_init --gtest_filter='*BitIdentical*' 2>&1 | grep -o 'no CUDA device:.*' | head -1 || true)
  echo "[test] GPU tests: ${reason:-a CUDA device is present, GPU tests run}"
fi
ctest --preset "$preset" -j "${YOCO_JOBS:-$(nproc)}" --timeout 900
# The performance-regression gate against reports/baselines/ci-cpu.csv (not
# under the sanitizers, whose slowdown would distort the timing ratios).
if [ "$preset" != sanitize ]; then
  scripts/ci-bench.sh "$preset"
fi
