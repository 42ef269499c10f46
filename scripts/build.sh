#!/usr/bin/env bash
# Configures and builds one preset: cpu (default), cuda or sanitize.
# `auto` picks cuda when nvcc exists (it then builds the CPU parts too), else cpu.
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
script_help_if_asked "$@"
cd "$(dirname "$0")/.."
preset="${1:-cpu}"
if [ "$preset" = auto ]; then
  if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then preset=cuda; else preset=cpu; fi
fi
jobs="${YOCO_JOBS:-$(nproc)}"
# Progress and errors go to stderr; stdout carries only the preset's name.
cmake --preset "$preset" >&2
cmake --build "build/$preset" -j "$jobs" >&2
echo "$preset"
