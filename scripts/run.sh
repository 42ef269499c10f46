#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs the demo (yoco-tiny,
# yoco-swa-tiny and transformer-tiny: prefill, greedy decode, and the check that
# decode reproduces the full forward). Extra arguments go to `yoco demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
preset=$(scripts/build.sh cpu | tail -1)
exec "build/$preset/bin/yoco" demo "$@"
