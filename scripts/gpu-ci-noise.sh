#!/usr/bin/env bash
# The GPU CI recipe's noise floor (issue 16, item 8): runs the same small GPU
# bench twice with the same build on the same device, then
# `yoco compare run-a run-b --noise-floor`: per metric (and phase family) the
# run-to-run change and the rows' own spread, the smallest threshold of
# 1,2,3,5,7,10,15,20,25,35,50% that is at least twice the largest change of the
# timed metrics, and the gate command that uses it. Counted values (bytes,
# FLOPs, counts) must come out bit-identical: if one differs, exit 1.
#
# Usage: scripts/gpu-ci-noise.sh [--dry-run] [OUT_DIR]     (default build/cuda/ci-gpu)
#   --dry-run: no GPU needed: the bench's options checked by `yoco bench --dry-run`, nothing run or
#   written (scripts/gpu-suite.sh --dry-run checks its step `noise` this way)
#   env YOCO: the yoco binary (default build/cuda/bin/yoco)
# Writes OUT_DIR/run-a.csv, run-b.csv (the two runs), noise-floor.md (the
# report), noise-floor.csv (its table as CSV) and gate.txt (the gate command);
# then use it against a committed baseline of the same bench, e.g.
#   yoco compare reports/baselines/ci-gpu.csv NEW.csv --threshold T% --metrics '...'
set -euo pipefail
cd "$(dirname "$0")/.."

dry=""
[ "${1:-}" = --dry-run ] && { dry=1; shift; }
if [ $# -gt 1 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  echo "usage: scripts/gpu-ci-noise.sh [--dry-run] [OUT_DIR]   (default build/cuda/ci-gpu; env YOCO: the yoco binary)" >&2
  [ $# -gt 1 ] && exit 2
  exit 0
fi
out=${1:-build/cuda/ci-gpu}
yoco=${YOCO:-build/cuda/bin/yoco}
if [ ! -x "$yoco" ]; then
  echo "[gpu-ci-noise] no yoco binary at $yoco (build the cuda preset, or set YOCO)" >&2
  exit 2
fi
bench=(bench --device cuda --model yoco-small,transformer-small --lengths 4K,16K --gen 256 --batch 2
       --decode-sample 32 --repeats 5 --warmup 2 --device-name ci-gpu)
if [ -n "$dry" ]; then
  exec "$yoco" "${bench[@]}" --out "$out/run-a.csv" --dry-run
fi
mkdir -p "$out"

for run in a b; do
  csv="$out/run-$run.csv"
  rm -f "$csv"  # a fresh sweep each time
  echo "[gpu-ci-noise] run $run -> $csv"
  "$yoco" "${bench[@]}" --out "$csv"
done

echo "[gpu-ci-noise] noise floor: $out/run-a.csv vs $out/run-b.csv"
status=0
"$yoco" compare "$out/run-a.csv" "$out/run-b.csv" --noise-floor | tee "$out/noise-floor.md" || status=$?
"$yoco" compare "$out/run-a.csv" "$out/run-b.csv" --noise-floor --format csv >"$out/noise-floor.csv" 2>/dev/null || true
sed -n 's/^gate: //p' "$out/noise-floor.md" >"$out/gate.txt"
if [ -s "$out/gate.txt" ]; then
  echo "[gpu-ci-noise] gate command (in $out/gate.txt): $(cat "$out/gate.txt")"
else
  echo "[gpu-ci-noise] no gate command: no timed metric quiet enough for the 1..50% ladder" >&2
fi
exit "$status"
