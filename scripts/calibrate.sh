#!/usr/bin/env bash
# Regenerates reports/model/ (or --out DIR) from committed data: the calibrated cost model
# fitted on the committed H100 sweep (--cupti) with the same card's kernel benchmark (the flash prefill
# versions' times), its check on that sweep
# (in-sample), its check on the small presets' run (run-17: 4K and 16K, kept buffers, CUPTI; out of sample: not
# in the fit), its check on every other card's committed sweep (reports/results/<card>/sweep.csv: on the
# projection and on the card's own ceilings), projections to the H100/H200/B200 datasheets, and what-ifs.
# Then `/usr/bin/python3 reports/report.py` draws them into the report.
#
#   scripts/calibrate.sh [--yoco PATH] [--small FILE] [--out DIR]
# --yoco: the binary (default build/cpu/bin/yoco, else build/cuda/bin/yoco).
# --small: the small presets' run to check out of sample (default run-17's models_small.csv; a newer
# run's replaces it together with SMALL_RUN and its prose in reports/yocoreport/calibrated.py).
# --out: the folder the files land in (default reports/model, which the report reads; made if missing).
# Paths are from the repository root, where the script runs.
# The files land together: all are written into a folder beside DIR first, then renamed into DIR one by
# one, each old one kept aside until the last is in. An error or an interruption (Ctrl-C, TERM, HUP) puts
# the old set back, so once the script has ended DIR holds the old files or the new ones, never a mix; only a
# kill -9 or a crash during those renames can leave a mix, and then leaves the work folder .<DIR's
# name>.calibrate.* beside DIR behind (the new files not yet landed, the replaced ones under old/ to put back).
# Other files in DIR (multi-device.csv, a check on a card no longer in reports/results) are left as they are.
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
cd "$(dirname "$0")/.."
YOCO=""
SMALL=""
OUT=reports/model
while [ $# -gt 0 ]; do
  case "$1" in
    --yoco) [ $# -ge 2 ] || { echo "calibrate.sh: --yoco needs a path" >&2; exit 2; }; YOCO="$2"; shift 2 ;;
    --small) [ $# -ge 2 ] || { echo "calibrate.sh: --small needs a file" >&2; exit 2; }; SMALL="$2"; shift 2 ;;
    --out)
      if [ $# -lt 2 ] || [ -z "$2" ]; then echo "calibrate.sh: --out needs a folder" >&2; exit 2; fi
      OUT="${2%/}"; OUT=${OUT:-/}; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) echo "calibrate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ! -e "$OUT" ] || [ -d "$OUT" ] || { echo "calibrate.sh: --out: '$OUT' is not a folder" >&2; exit 2; }
. scripts/find-yoco.sh
find_yoco "$YOCO"
SWEEP=reports/results/nvidia-h100/sweep.csv
KERNELS=reports/results/nvidia-h100/kernels.csv
SMALL=${SMALL:-reports/results/nvidia-h100/logs/run-17-bench-models-split-rope/models_small.csv}
[ -f "$SMALL" ] || { echo "calibrate.sh: --small: no file '$SMALL'" >&2; exit 2; }
mkdir -p "$OUT" 2>/dev/null || { echo "calibrate.sh: --out: cannot make the folder '$OUT'" >&2; exit 2; }
[ -w "$OUT" ] || { echo "calibrate.sh: --out: cannot write in '$OUT'" >&2; exit 2; }
CAL=$OUT/calibration-nvidia-h100.csv
# The what-ifs' peer efficiencies: cuDNN's and FlashAttention-2's prefill
# attention as fractions of the GEMM ceiling (D128, transformer-3b, 128K;
# reports/results/nvidia-h100/peers_sdpa.csv of run-12).
# attention_prefill=v2: the Transformer's attention at the flash prefill the sweep ran (v2), not the
# runners' v3: how much of YOCO's ratio moved with our own kernel.
WHATIFS="attention=ceiling attention.compute=0.781 attention.compute=0.435 attention_prefill=v2 gemm=ceiling gret=ceiling norms=ceiling"

# The work folder beside DIR, on its file system: the files are renamed from it into DIR, which is
# atomic file by file.
tmp=$(mktemp -d "$(dirname "$OUT")/.$(basename "$OUT").calibrate.XXXXXX")
landed=()    # the files renamed into DIR so far (each named before its rename)
landing=0    # 1 from the first rename into DIR until the last
# Puts back the set DIR had: each landed file's old version (kept under old/), or none where it had none.
roll_back() {
  local n ok=0
  for n in ${landed[@]+"${landed[@]}"}; do
    if [ -e "$tmp/old/$n" ] || [ -L "$tmp/old/$n" ]; then mv -fT "$tmp/old/$n" "$OUT/$n" || ok=1
    elif [ ! -d "$OUT/$n" ]; then rm -f "$OUT/$n" || ok=1  # a folder there: the rename failed on it
    fi
  done
  return $ok
}
finish() {
  local rc=$?
  trap '' INT TERM HUP
  if [ "$landing" = 1 ]; then
    if roll_back; then
      echo "calibrate.sh: stopped while the files landed: $OUT holds its old files again" >&2
    else
      echo "calibrate.sh: stopped while the files landed, and could not put all the old files back: $tmp/old holds them" >&2
      exit "$rc"
    fi
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
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
# The set, named as it lands, in $tmp/new; the projections name the calibration file they came from.
mkdir "$tmp/new" "$tmp/old"
mv "$tmp/cal.csv" "$tmp/new/$(basename "$CAL")"
mv "$tmp/check.csv" "$tmp/new/check-nvidia-h100.csv"
mv "$tmp/check-small.csv" "$tmp/new/check-small-nvidia-h100.csv"
for card in ${others[@]+"${others[@]}"}; do
  mv "$tmp/check-on-$card.csv" "$tmp/new/check-nvidia-h100-on-$card.csv"
  mv "$tmp/check-on-$card-run-ceilings.csv" "$tmp/new/check-nvidia-h100-on-$card-run-ceilings.csv"
done
for dev in h100 h200 b200; do mv "$tmp/projection-$dev.csv" "$tmp/new/projection-$dev.csv"; done
mv "$tmp/whatif.csv" "$tmp/new/whatif-h100.csv"
mv "$tmp/chunks.csv" "$tmp/new/chunks-h100.csv"
mv "$tmp/prefill-steps.csv" "$tmp/new/prefill-steps-h100.csv"
# (as sed text: the path a pattern, CAL a replacement, each with its special characters escaped)
from_text=$(printf '%s' "$tmp/cal.csv" | sed 's/[][\\.*^$#]/\\&/g')
cal_text=$(printf '%s' "$CAL" | sed 's/[#&\\]/\\&/g')
sed -i "s#$from_text#$cal_text#g" "$tmp"/new/*.csv
# Every file lands, or none does: each old file is linked aside (same file system), then the new ones
# are renamed over them; finish() puts the old set back if this stops before the last rename.
for f in "$tmp"/new/*; do
  n=$(basename "$f")
  if { [ -e "$OUT/$n" ] || [ -L "$OUT/$n" ]; } && [ ! -d "$OUT/$n" ]; then
    ln -P "$OUT/$n" "$tmp/old/$n" 2>/dev/null || cp -pP "$OUT/$n" "$tmp/old/$n"
  fi
done
landing=1
for f in "$tmp"/new/*; do
  n=$(basename "$f")
  landed+=("$n")
  mv -fT "$f" "$OUT/$n"
done
landing=0
echo "calibrate.sh: wrote $CAL and the checks, projections and what-ifs beside it in $OUT/"
