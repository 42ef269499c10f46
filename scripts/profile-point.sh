#!/usr/bin/env bash
# Profiles one point of the sweep with Nsight Systems (timeline: NVTX ranges of
# the `yoco` domain -- prefill, prefill chunk, self-decoder, global K/V,
# cross-decoder, decode step, each layer -- with every kernel under them,
# CUDA-graph nodes included) and/or Nsight Compute (hardware counters of the
# kernels inside the `prefill` range). README "Profiling one point" explains
# what to read in each.
#
#   scripts/profile-point.sh [--model yoco-3b] [--length 128K] [--tool nsys|ncu|both]
#                            [--kernel REGEX] [--count N] [--out DIR] [--bin DIR]
#
# --kernel / --count: ncu profiles the first N (default 5) kernels whose name
# matches REGEX (default: every kernel) inside the prefill range; ncu replays
# each kernel many times, so keep N small. Outputs in --out (default
# build/cuda/profile): <model>-<length>.nsys-rep with its summaries
# (*_nvtx_sum.csv, *_cuda_gpu_kern_sum.csv), <model>-<length>.ncu-rep with a
# text summary (*.ncu.txt), every section of each kernel (*.ncu-details.txt), every
# collected metric (*.ncu-raw.csv) and the SASS with its samples per instruction (*.ncu-sass.csv).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=yoco-3b LENGTH=128K TOOL=both KERNEL="" COUNT=5 OUTDIR=build/cuda/profile BIN=build/cuda/bin
while [ $# -gt 0 ]; do
  case "$1" in  # an option that takes a value, given none: one line, not bash's unbound-variable error
    --model|--length|--tool|--kernel|--count|--out|--bin)
      [ $# -ge 2 ] || { echo "profile-point: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --length) LENGTH="$2"; shift 2 ;;
    --tool) TOOL="$2"; shift 2 ;;
    --kernel) KERNEL="$2"; shift 2 ;;
    --count) COUNT="$2"; shift 2 ;;
    --out) OUTDIR="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "profile-point: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$TOOL" in nsys|ncu|both) ;; *) echo "profile-point: --tool nsys, ncu or both, got '$TOOL'" >&2; exit 2 ;; esac
# ncu reads --count only after the nsys profile of --tool both: refused here, before minutes of profiling.
[[ "$COUNT" =~ ^[1-9][0-9]*$ ]] || { echo "profile-point: --count: a whole number above 0, got '$COUNT'" >&2; exit 2; }
[ -x "$BIN/yoco" ] || { echo "profile-point: no $BIN/yoco (build the cuda preset, or pass --bin)" >&2; exit 2; }
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$OUTDIR"
name="$OUTDIR/$MODEL-$LENGTH"
# One prefill and a few decode steps: what the profile is about, no more. No
# extrapolation (a profile of the probes would not be the point's).
point=(bench --device cuda --model "$MODEL" --lengths "$LENGTH" --metrics prefill,decode --repeats 1
       --decode-sample 8 --no-extrapolate --budget-s 100000)

if [ "$TOOL" != ncu ]; then
  command -v nsys >/dev/null || { echo "profile-point: nsys (Nsight Systems) is not installed" >&2; exit 2; }
  nsys profile --trace=cuda,nvtx,cublas --cuda-graph-trace=node --force-overwrite=true --output "$name" \
    "$BIN/yoco" "${point[@]}" --warmup 1
  nsys stats --force-export=true --report nvtx_sum,cuda_gpu_kern_sum --format csv --output "$name" "$name.nsys-rep"
  echo "profile-point: $name.nsys-rep (open in nsys-ui), ${name}_nvtx_sum.csv, ${name}_cuda_gpu_kern_sum.csv"
fi
if [ "$TOOL" != nsys ]; then
  command -v ncu >/dev/null || { echo "profile-point: ncu (Nsight Compute) is not installed" >&2; exit 2; }
  filter=()
  [ -n "$KERNEL" ] && filter=(--kernel-name "regex:$KERNEL")
  # Only kernels inside the yoco domain's "prefill" push/pop range (domain@range/).
  ncu --nvtx --nvtx-include "yoco@prefill/" "${filter[@]}" --launch-count "$COUNT" --set full --force-overwrite \
    --export "$name" "$BIN/yoco" "${point[@]}" --warmup 0
  ncu --import "$name.ncu-rep" --print-summary per-kernel >"$name.ncu.txt"
  # Every section of every profiled kernel (throughputs, warp stall reasons, occupancy, pipes): what a
  # kernel's limiter is, readable without ncu-ui.
  ncu --import "$name.ncu-rep" --page details >"$name.ncu-details.txt"
  # What the details page leaves out (the H200's run-04 profile of gRet chunk v6 had no stall reasons,
  # pipe utilisations or per-line samples in it): every collected metric as CSV (the stall reasons
  # smsp__pcsamp_warps_issue_stalled_* and smsp__average_warps_issue_stalled_*, the pipes
  # sm__pipe_*_cycles_active), and the SASS with its samples per instruction, so that a stall splits by
  # the warp role whose code it is in. An ncu without one of these pages says so; the rest stands.
  ncu --import "$name.ncu-rep" --page raw --csv >"$name.ncu-raw.csv" ||
    echo "profile-point: this ncu cannot print --page raw --csv" >&2
  ncu --import "$name.ncu-rep" --page source --print-source sass --csv >"$name.ncu-sass.csv" ||
    echo "profile-point: this ncu cannot print --page source --print-source sass --csv" >&2
  echo "profile-point: $name.ncu-rep (open in ncu-ui), summary $name.ncu.txt, sections $name.ncu-details.txt," \
    "metrics $name.ncu-raw.csv, SASS samples $name.ncu-sass.csv"
fi
