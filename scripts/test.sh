#!/usr/bin/env bash
# Installs what is missing, builds and runs the test suite. With nvcc present
# the cuda preset is built (CPU + CUDA code); GPU tests skip, saying why, when
# no device is present. `scripts/test.sh sanitize` runs the suite under
# AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
preset=$(scripts/build.sh "${1:-auto}" | tail -1)
echo "[test] preset $preset"
ctest --preset "$preset" -j "${YOCO_JOBS:-$(nproc)}" --timeout 900
