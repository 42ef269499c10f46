#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs `yoco bench` with no
# arguments (the default job: see README). `scripts/run.sh demo` runs the demo (yoco-tiny,
# yoco-swa-tiny and transformer-tiny: prefill, greedy decode, and the check that
# decode reproduces the full forward). Other arguments go to `yoco bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
preset=$(scripts/build.sh cpu | tail -1)
if [ "${1:-}" = demo ]; then shift; exec "build/$preset/bin/yoco" demo "$@"; fi
exec "build/$preset/bin/yoco" bench "$@"
