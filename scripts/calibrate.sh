#!/usr/bin/env bash
# Regenerates reports/model/ from committed data: the calibrated cost model
# fitted on the committed H100 sweep (--cupti) with the same card's kernel benchmark (the flash prefill
# versions' times), its check on that sweep
# (in-sample), its check on the small presets' run (run-17: 4K and 16K, kept buffers, CUPTI; out of sample: not
# in the fit), its check on every other card's committed sweep (reports/results/<card>/sweep.csv: on the
# projection and on the card's own ceilings), projections to the H100/H200/B200 datasheets, and what-ifs.
# Then `/usr/bin/python3 reports/report.py` draws them into the report.
#
#   scripts/calibrate.sh [--yoco PATH] [--small FILE]     (default build/cpu/bin/yoco, else build/cuda/bin/yoco)
# --small: the small presets' run to check out of sample (default run-17's models_small.csv; a newer
# run's replaces it together with SMALL_RUN and its prose in reports/yocoreport/calibrated.py).
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
cd "$(dirname "$0")/.."
YOCO=""
SMALL=""
while [ $# -gt 0 ]; do
  case "$1" in
    --yoco) [ $# -ge 2 ] || { echo "calibrate.sh: --yoco needs a path" >&2; exit 2; }; YOCO="$2"; shift 2 ;;
    --small) [ $# -ge 2 ] || { echo "calibrate.sh: --small needs a file" >&2; exit 2; }; SMALL="$2"; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) echo "calibrate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
. scripts/find-yoco.sh
find_yoco "$YOCO"
SWEEP=reports/results/nvidia-h100/sweep.csv
KERNELS=reports/results/nvidia-h100/kernels.csv
SMALL=${SMALL:-reports/results/nvidia-h100/logs/run-17-bench-models-split-rope/models_small.csv}
[ -f "$SMALL" ] || { echo "calibrate.sh: --small: no file '$SMALL'" >&2; exit 2; }
OUT=reports/model
CAL=$OUT/calibration-nvidia-h100.csv
# The what-ifs' peer efficiencies: cuDNN's and FlashAttention-2's prefill
# attention as fractions of the GEMM ceiling (D128, transformer-3b, 128K;
# reports/results/nvidia-h100/peers_sdpa.csv of run-12).
# attention_prefill=v2: the Transformer's attention at the flash prefill the sweep ran (v2), not the
# runners' v3: how much of YOCO's ratio moved with our own kernel.
WHATIFS="attention=ceiling attention.compute=0.781 attention.compute=0.435 attention_prefill=v2 gemm=ceiling gret=ceiling norms=ceiling"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Keeps the calibrated rows of a `yoco model --format csv` (the analytic ones
# live in reports/results/analytic-*).
only_calibrated() { /usr/bin/python3 scripts/result_rows.py keep method=calibrated "$@"; }

# The sweep ran flash prefill v2 (its CUPTI rows name it); the runners run v3 now, and other cards'
# runs ran v3: the same card's kernel benchmark times each version beside v2, so that every point is
# priced at the version it ran (bench/analytic/prefill_versions.hpp).
"$YOCO" calibrate "$SWEEP" --kernels "$KERNELS" --out "$tmp/cal.csv" --format csv >"$tmp/check.csv"
"$YOCO" calibrate "$SMALL" --calibration "$tmp/cal.csv" --format csv >"$tmp/check-small.csv"
# Out of sample on another card (issue 35): each other device's sweep, predicted on the projection the
# model made for that card (its datasheet scaled by the H100's measured / datasheet ratios) and on the
# card's own measured ceilings.
others=()
for dir in reports/results/*/; do
  card=$(basename "$dir")
  case "$card" in nvidia-h100|cpu*|analytic*|roofline*) continue ;; esac
  # A card may have its sweep, its points past the paper, or both (the H200's first call measured 2M and 4M
  # before any sweep point): one file of rows, one header.
  run="$tmp/run-$card.csv"
  # long-points.csv: points measured in calls of their own and paired by `yoco ratios` (the H200's full
  # transformer-3b 1M prefill). A point measured again (a sweep over a long point, a beyond.csv of full
  # points over beyond-decode.csv) is in two files: one row per key, the latest, as the report reads
  # them. Each file has its run's ceilings (model "-"): the first file's are kept.
  files=()
  for f in sweep.csv beyond.csv beyond-decode.csv long-points.csv; do
    [ -f "$dir$f" ] || continue
    if [ ${#files[@]} -eq 0 ]; then
      files+=("$dir$f")
    else
      grep -v '^\([^,]*,\)\{6\}-,' "$dir$f" >"$tmp/$card-$f" || true
      files+=("$tmp/$card-$f")
    fi
  done
  [ ${#files[@]} -gt 0 ] || continue
  /usr/bin/python3 scripts/result_rows.py merge "${files[@]}" >"$run" 2>"$tmp/merge-$card.log" ||
    { cat "$tmp/merge-$card.log" >&2; exit 2; }
  grep -q ',ceiling,gemm_peak_tflops,' "$run" || continue  # a GPU run with its measured ceilings
  "$YOCO" calibrate "$run" --calibration "$tmp/cal.csv" --format csv >"$tmp/check-on-$card.csv"
  "$YOCO" calibrate "$run" --calibration "$tmp/cal.csv" --ceilings run --format csv >"$tmp/check-on-$card-run-ceilings.csv"
  others+=("$card")
done
for dev in h100 h200 b200; do
  "$YOCO" model --calibration "$tmp/cal.csv" --device-spec "$dev" --format csv | only_calibrated --header \
    >"$tmp/projection-$dev.csv"
done
first=--header
for w in $WHATIFS; do
  "$YOCO" model --calibration "$tmp/cal.csv" --device-spec h100 --what-if "$w" --format csv | only_calibrated $first \
    >>"$tmp/whatif.csv"
  first=""
done
# Issue 34's trade-off, projected: yoco-3b's memory and prefill by prefill chunk,
# and the configurations the GPU suite's steps `chunks` and `models-3b` measure
# (the FFN in row blocks, the FFN's up half fused, the residual stored once a layer). Memory is the runners' formula; the prefill
# carries the 32K chunk's efficiencies, so only step `chunks` can say what a
# smaller chunk or a row block costs.
first=--header
for c in "4096" "8192" "16384" "32768" "32768 --ffn-rows 8192" "16384 --ffn-rows 4096" \
         "32768 --ffn-fused" "16384 --ffn-fused" "32768 --sublayer-buffers apart" "32768 --residual-per-layer"; do
  # shellcheck disable=SC2086  # the configuration is words on purpose
  "$YOCO" model --calibration "$tmp/cal.csv" --device-spec h100 --model yoco-3b --lengths 512K,1M \
    --prefill-chunk $c --format csv | only_calibrated $first >>"$tmp/chunks.csv"
  first=""
done
# Issue 34's steps toward 2.6 s at 512K, projected: yoco-3b's prefill as the
# sweep ran it, with the element-wise kernels at 95% of copy (run-17's rework
# measured 88-102%), and with the FFN's up half fused too (YOCO_FFN_FUSED=1).
first=--header
for step in "" "--what-if norms=0.95" "--what-if norms=0.95 --ffn-fused"; do
  # shellcheck disable=SC2086  # the step is words on purpose
  "$YOCO" model --calibration "$tmp/cal.csv" --device-spec h100 --model yoco-3b --lengths 512K,1M $step \
    --format csv | only_calibrated $first >>"$tmp/prefill-steps.csv"
  first=""
done
# Every file lands at once, or none does (the projections name the calibration file they came from).
sed -i "s#$tmp/cal.csv#$CAL#g" "$tmp"/*.csv
mv "$tmp/cal.csv" "$CAL"
mv "$tmp/check.csv" "$OUT/check-nvidia-h100.csv"
mv "$tmp/check-small.csv" "$OUT/check-small-nvidia-h100.csv"
for card in "${others[@]}"; do
  mv "$tmp/check-on-$card.csv" "$OUT/check-nvidia-h100-on-$card.csv"
  mv "$tmp/check-on-$card-run-ceilings.csv" "$OUT/check-nvidia-h100-on-$card-run-ceilings.csv"
done
for dev in h100 h200 b200; do mv "$tmp/projection-$dev.csv" "$OUT/projection-$dev.csv"; done
mv "$tmp/whatif.csv" "$OUT/whatif-h100.csv"
mv "$tmp/chunks.csv" "$OUT/chunks-h100.csv"
mv "$tmp/prefill-steps.csv" "$OUT/prefill-steps-h100.csv"
echo "calibrate.sh: wrote $CAL and the checks, projections and what-ifs beside it in $OUT/"
