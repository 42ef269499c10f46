#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs `yoco bench` with no
# arguments (the default job: see README; on a GPU machine the 32K-1M sweep of
# yoco-3b vs transformer-3b, `scripts/run.sh --quick` for 32K and 128K only). `scripts/run.sh demo` runs the demo (yoco-tiny,
# yoco-swa-tiny and transformer-tiny: prefill, greedy decode, and the check that
# decode reproduces the full forward). Other arguments go to `yoco bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# A GPU here (nvidia-smi lists one) and the CUDA toolkit: the cuda preset, whose
# default job is the paper's sweep on the GPU; otherwise the CPU job.
preset=cpu
if nvidia-smi -L >/dev/null 2>&1 && { [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; }; then preset=cuda; fi
preset=$(scripts/build.sh "$preset" | tail -1)
if [ "${1:-}" = demo ]; then shift; exec "build/$preset/bin/yoco" demo "$@"; fi
exec "build/$preset/bin/yoco" bench "$@"
