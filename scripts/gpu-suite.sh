#!/usr/bin/env bash
# One call on a GPU machine runs every GPU check of the suite and brings back
# every log (KERNELS.md §7): device facts, all GPU tests (YOCO_EXPECT_GPU=1, so
# nothing passes by skipping; the smoke tests of prefill v3 and gRet chunk v6
# first, under a short timeout, each left out of the rest if it fails), compute-sanitizer memcheck/racecheck on the
# small cases, the kernel benchmarks against the ceilings measured in the same
# run, a SASS census (HGMMA/HMMA per kernel), and the model runners through
# `yoco bench --device cuda` (step `models`: the small presets at 4K, and an
# out-of-memory point followed by one that runs; step `models-3b`, not in the
# default: yoco-3b's prefill and decode at 512K and 1M, plain and with the decode GEMMs as a GEMV,
# its prefill with each of issue 34's candidates (the fused FFN up kernel in CTA pairs where the same call's
# bench has it ahead of cuBLAS + SwiGLU, the residual stored once a layer, gRet chunk v7, v7 with each,
# chunk 16384 with tuned GEMMs); step `models-3b-short`, not in the default: yoco-3b vs transformer-3b
# at 32K and 128K end to end). Every step runs under `timeout`, so a hung kernel
# costs one step, not the call. The default steps no longer fit one device call
# (10 minutes at most): by the run summaries of 2026-11-26/27 every test binary
# takes about 4 minutes, the sanitizers on every binary about 6 (racecheck of
# gRet chunk alone 2.6), the peers about 3, the rest about 1. Run them as the
# calls of reports/results/nvidia-h100/logs/RUNS.md ("Next calls") choose, with
# --sanitize-tests naming what changed since the sanitizers last passed (the
# benchmarks and their peers stay in one call: their ratios need it).
# Step `dist` (issue 33): the CUDA runners (YOCO, the Transformer) sharded over MPI ranks that
# share the one GPU (test_dist_cuda under mpirun -np 1, 2, 3; NCCL with one
# rank), then `yoco generate` and `yoco bench` with --device cuda under mpirun; the lent image
# has no OpenMPI, so scripts/carry-libs.sh --mpirun carries a relocatable copy
# in .carry/openmpi, which this script puts on PATH (OPAL_PREFIX).
# Step `chunks` (not in the default): yoco-3b at 512K and 1M with prefill
# chunks of 16384 (plain; FFN up half fused; FFN in blocks of 4096 rows) and
# 8192 tokens, 32768 with the FFN in blocks of 8192 rows, and 32768 with a
# buffer each for the sublayers (memory and prefill; issue 34; about 6
# minutes; chunk 32768 itself is step models-3b's).
# Step `profile` runs scripts/profile-point.sh (nsys, then ncu) on yoco-small at
# 4K: README's profiling commands, checked; then ncu on gRet chunk v6 at yoco-3b
# 32K (every section, in the logs' *.ncu-details.txt, every metric in *.ncu-raw.csv, the SASS with its
# samples in *.ncu-sass.csv), and on v7 the same way where its smoke test passed. Step `sweep` (not in the default
# steps: it takes a call of its own) runs the
# default job's GPU sweep (yoco-3b vs transformer-3b, 32K-1M, --cupti) with
# --resume into --sweep-results and copies its CSV to --out (and the logs);
# --quick: 32K and 128K only. --sweep-results is a folder of the sweep's own
# (default reports/sweep-in-progress; RUNS.md names one a card, reports/sweep-<card>):
# the file brought back goes there and is committed, so a sweep cut by the
# step's timeout continues in the next call. Not reports/results: that would
# resume the committed sweep (refused when the cost model changed since, else
# its points kept and nothing measured; yoco bench --dry-run says which).
# Step sweep needs --deadline (the call's timeout - 30). --sweep-models /
# --sweep-lengths narrow or extend it, one command for the whole sweep (a
# resumed file must hold only the points its command asks for: a second model
# or length goes to --sweep-file NAME.csv, a file of its own).
# Step `noise` (not in the default; issue 16's GPU CI recipe, about 1-2 minutes): scripts/gpu-ci-noise.sh,
# the CI bench (the small presets at 4K and 16K) twice with the same build, then the noise floor and
# the gate command it supports; run-a.csv comes back beside the summary as ci-gpu-run-a.csv, the
# baseline to commit (reports/baselines/ci-gpu.csv), and the floor's report as ci-gpu-noise-floor.md.
#
#   scripts/gpu-suite.sh [--dry-run] [--bundle FILE | --bin DIR] [--out DIR] [--steps|--only info,tests,sanitize,dist,bench,peers,sass,models,models-3b,chunks,models-3b-short,profile,sweep,noise]
#                        [--tests REGEX] [--sanitize-tests REGEX] [--peers sdpa,fla[,fla-check]]
#                        [--fla-check-lengths 32K,128K,512K,1M]
#                        [--bench-filter NAMES] [--timeout-scale X]
#                        [--sweep-results DIR] [--quick] [--sweep-seconds S] [--deadline S]
#                        [--sweep-models A,B] [--sweep-lengths N,...] [--sweep-file NAME.csv]
#
# --deadline: seconds the whole suite may take (default none). Each step's
#        timeout is cut to what is left, a step with under 10 s left is not
#        started (DEADLINE in the summary), and the logs are still packed: set
#        it some 30 s under the device call's timeout, so that a call cut short
#        brings its logs back instead of losing them with the killed script.
# --dry-run: on any machine, no GPU needed: every step the other options select
#        is checked instead of run, so that a misspelt option, filter or test name
#        costs nothing here rather than a step of a device call. yoco's commands
#        run with --dry-run (their options, models and YOCO_* switches checked,
#        nothing measured), a test binary lists the tests its filter selects
#        (none is a failure), bench_cuda_kernels' --filter names must be
#        benchmarks it has, Python and shell scripts must compile; mpirun and
#        compute-sanitizer are left out (what they wrap is checked). Logs go to a
#        temporary folder unless --out names one; exit 1 if any step's check fails.
# --bundle: the one-file carry of scripts/carry-gpu-build.sh (.carry/bundle.tar.xz):
#        unpacked into .carry/ first (scripts/carry-unpack.sh, checked against
#        its manifest; a damaged one stops the call at once, exit 2), then
#        --bin is .carry/bin, where every test binary and tool sits (--dry-run:
#        into a temporary folder, removed at the end; .carry/ is left alone).
# --bin: folder of the cuda preset's binaries (default build/cuda/bin, else
#        .carry/bin). --out: where logs go (default $OUT on the lent machine,
#        else reports/gpu-suite-logs). The last lines printed are a summary.
# --tests: the GPU test binaries to run (regex on test_*; default all);
# --sanitize-tests: of those, the ones run under compute-sanitizer (default all:
#        a call short of device time leaves out binaries whose kernels the
#        sanitizers already passed at this code). --peers: which peer scripts
#        (default sdpa,fla; fla takes ~2 minutes, mostly Triton compiling;
#        fla-check, not in the default: fla's outputs at 32K-1M x 24 x 128
#        judged by `yoco check gret` against the fp64 reference, over 5
#        minutes at 1M alone (run-15: fla judged, ours cut by the step's
#        timeout; give it a call of its own) and ~26 GB of scratch files at
#        1M, into peers_fla_check.csv (rewritten after each judgement); our
#        chunk kernel's outputs, from gret_chunk_on_file, judged beside them).
# peers: PyTorch SDPA (and FlexAttention) for attention, flash-linear-attention
#        for gRet, installed from wheels in .whl/ when carried (never committed).
# The git revision in the rows comes from YOCO_GIT_SHA when set: pass it from
# the machine that built (a lent machine's copy of .git may be older than the
# working tree it received).
# Outputs: summary.txt, suite.log (all steps), kernels.csv (bench rows),
#          peers_sdpa.csv, peers_fla.csv, models.csv (the rows of every models
#          run; each run's own file is in the logs), chunks.csv (the prefill
#          configurations' rows of steps chunks and models-3b, the GEMV's run
#          aside), logs.tar.gz (one log per step, packed again after every step, so
#          a call killed between steps still brings them back). summary.txt has a
#          line a step (pass, FAIL, TIMEOUT, DEADLINE-CUT: cut short by --deadline),
#          the failed tests of a failed test binary by name, and last "verdicts for
#          a later call: ..." (the variables below that this call's smoke tests and
#          tests set, to pass on).
# Caller's switches: YOCO_FFN_FUSED_VERIFIED=1 / YOCO_GRET_V7_VERIFIED=1 (an
# earlier call's smoke and tests of the fused FFN / gRet chunk v7 passed: their
# model runs may go ahead where this call runs no test of them);
# YOCO_FFN_SKIP_FUSED=1 / YOCO_FFN_SKIP_PAIRS=1 / YOCO_GRET_SKIP_V6=1 / YOCO_GRET_SKIP_V7=1 /
# YOCO_PREFILL_SKIP_V3=1 (leave them out; v6 left out moves the runners to YOCO_GRET_CHUNK=v3).
set -uo pipefail
source "$(dirname "$0")/lib/script-help.sh"
cd "$(dirname "$0")/.."

BIN=""
BUNDLE=""
DRY=""
OUTDIR="${OUT:-reports/gpu-suite-logs}"
STEPS="info,tests,sanitize,dist,bench,peers,sass,models"
TEST_REGEX="."
SANITIZE_REGEX="."
PEERS="sdpa,fla"
BENCH_FILTER=""
SCALE=1
SWEEP_RESULTS=reports/sweep-in-progress
SWEEP_QUICK=""
SWEEP_SECONDS=540
SWEEP_NARROW=()
DEADLINE=0
FLA_CHECK_LENGTHS=32K,128K,512K,1M
while [ $# -gt 0 ]; do
  case "$1" in  # an option that takes a value, given none: one line, not bash's unbound-variable error
    --sweep-results|--sweep-seconds|--sweep-models|--sweep-lengths|--sweep-file|--bin|--bundle|--deadline|--out|\
    --steps|--only|--tests|--sanitize-tests|--peers|--fla-check-lengths|--bench-filter|--timeout-scale)
      [ $# -ge 2 ] || { echo "gpu-suite: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --sweep-results) SWEEP_RESULTS="$2"; shift 2 ;;
    --quick) SWEEP_QUICK=--quick; shift ;;
    --dry-run) DRY=1; shift ;;
    --sweep-seconds) SWEEP_SECONDS="$2"; shift 2 ;;
    --sweep-models) SWEEP_NARROW+=(--model "$2"); shift 2 ;;
    --sweep-lengths) SWEEP_NARROW+=(--lengths "$2"); shift 2 ;;
    --sweep-file) SWEEP_NARROW+=(--sweep-file "$2"); shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    --bundle) BUNDLE="$2"; shift 2 ;;
    --deadline) DEADLINE="$2"; shift 2 ;;
    --out) OUTDIR="$2"; OUT_GIVEN=1; shift 2 ;;
    --steps|--only) STEPS="$2"; shift 2 ;;
    --tests) TEST_REGEX="$2"; shift 2 ;;
    --sanitize-tests) SANITIZE_REGEX="$2"; shift 2 ;;
    --peers) PEERS="$2"; shift 2 ;;
    --fla-check-lengths) FLA_CHECK_LENGTHS="$2"; shift 2 ;;
    --bench-filter) BENCH_FILTER="$2"; shift 2 ;;
    --timeout-scale) SCALE="$2"; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) echo "gpu-suite: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$DEADLINE" =~ ^[0-9]+$ ]] || { echo "gpu-suite: --deadline takes whole seconds, not '$DEADLINE'" >&2; exit 2; }
# A regex bash cannot compile matches nothing, and a misspelt peer runs nothing: both said here.
for opt in "--tests $TEST_REGEX" "--sanitize-tests $SANITIZE_REGEX"; do
  [[ "" =~ ${opt#* } ]]; [ $? -ne 2 ] || { echo "gpu-suite: ${opt%% *}: not a regular expression: '${opt#* }'" >&2; exit 2; }
done
IFS=, read -ra peer_list <<<"$PEERS"
for p in "${peer_list[@]}"; do
  case "$p" in
    sdpa|fla|fla-check) ;;
    *) echo "gpu-suite: --peers: unknown peer '$p' (sdpa, fla, fla-check)" >&2; exit 2 ;;
  esac
done
# A misspelt step would run nothing and cost a device call: refuse it here.
for step in ${STEPS//,/ }; do
  case "$step" in
    info|tests|sanitize|dist|bench|peers|sass|models|models-3b|chunks|models-3b-short|profile|sweep|noise) ;;
    *) echo "gpu-suite: --only: unknown step '$step' (see --help)" >&2; exit 2 ;;
  esac
done
# The sweep alone takes --sweep-seconds (540 by default) of a call's 600, and a smoke test of v6 that
# hangs (70 s) runs before it: only a --deadline keeps the call from being killed at its limit, its
# files not brought back.
if [ -z "$DRY" ] && [[ ",$STEPS," == *",sweep,"* ]] && [ "$DEADLINE" = 0 ]; then
  echo "gpu-suite: step sweep needs --deadline (the call's timeout - 30)" >&2
  exit 2
fi
if [ -n "$BUNDLE" ]; then
  [ -z "$BIN" ] || { echo "gpu-suite: --bundle and --bin both given: the bundle's binaries are .carry/bin" >&2; exit 2; }
  [ -f "$BUNDLE" ] || { echo "gpu-suite: --bundle: no file '$BUNDLE' (scripts/carry-gpu-build.sh makes it; carry it)" >&2; exit 2; }
fi
if [ -n "$DRY" ]; then
  # A dry run rewrites summary.txt, suite.log, models.csv, chunks.csv and logs.tar.gz in --out: never
  # over a real run's.
  if [ -n "${OUT_GIVEN:-}" ] && [ -e "$OUTDIR" ] && { [ ! -d "$OUTDIR" ] || [ -n "$(ls -A "$OUTDIR")" ]; }; then
    echo "gpu-suite: --dry-run --out '$OUTDIR': not an empty folder (a dry run would rewrite its files): give a new one, or none" >&2
    exit 2
  fi
  [ -n "${OUT_GIVEN:-}" ] || OUTDIR=$(mktemp -d /tmp/gpu-suite-dry.XXXXXX)
else
  command -v nvidia-smi >/dev/null || { echo "gpu-suite: no nvidia-smi: not a GPU machine" >&2; exit 2; }
fi
CARRY=.carry  # the carried libraries and launcher (and the bundle's binaries)
if [ -n "$BUNDLE" ]; then
  # A dry run checks the bundle the same way, but into a folder of its own: it replaces nothing here.
  if [ -n "$DRY" ]; then
    CARRY=$(mktemp -d /tmp/gpu-suite-dry-carry.XXXXXX)
    DRY_CARRY=$CARRY
    trap 'rm -rf "$DRY_CARRY"' EXIT  # (widened below, once the logs' folder exists)
  fi
  scripts/carry-unpack.sh "$BUNDLE" "$CARRY" || exit 2
  BIN=$CARRY/bin
fi
if [ -z "$BIN" ]; then
  for d in build/cuda/bin .carry/bin; do [ -d "$d" ] && { BIN="$d"; break; }; done
fi
[ -n "$BIN" ] && [ -d "$BIN" ] || { echo "gpu-suite: no binaries (build the cuda preset, or pass --bin)" >&2; exit 2; }
mkdir -p "$OUTDIR"
# The per-step logs (and the models runs' own CSVs) are kept outside --out and packed into
# $OUTDIR/logs.tar.gz after every step: only a few files come back from a lent machine, and a call
# killed between steps (its timeout, not --deadline) still brings back every log so far.
LOGS_ROOT=$(mktemp -d /tmp/gpu-suite-logs.XXXXXX) || { echo "gpu-suite: cannot make a folder for the logs in /tmp" >&2; exit 2; }
LOGS="$LOGS_ROOT/logs"
mkdir -p "$LOGS"
trap 'rm -rf "$LOGS_ROOT" ${DRY_CARRY:+"$DRY_CARRY"}' EXIT
pack_logs() {
  # tar's exit 1 is "a file changed as it was read" (a killed step's child still writing): packed all the same.
  tar --warning=no-file-changed -czf "$OUTDIR/.logs.tar.gz.part" -C "$LOGS_ROOT" logs 2>/dev/null
  if [ $? -le 1 ]; then
    mv -f "$OUTDIR/.logs.tar.gz.part" "$OUTDIR/logs.tar.gz"
  else
    rm -f "$OUTDIR/.logs.tar.gz.part"
    return 1
  fi
}
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
export YOCO_EXPECT_GPU=1
export YOCO_PROGRESS=lines  # yoco bench: a line per point and step in the logs
# --cupti's libcupti: the toolkit's, else (an image whose CUDA comes as Python
# wheels) the nvidia-cuda-cupti wheel's.
if [ -z "${YOCO_CUPTI_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcupti.so.13' &&
   ! ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13 \
        /usr/local/cuda/targets/*/lib/libcupti.so.13 >/dev/null 2>&1; then
  wheel_cupti=$(python3 -c 'import glob, site
print(next(iter(sorted(p for d in site.getsitepackages() for p in glob.glob(d + "/nvidia/**/libcupti.so.13", recursive=True))), ""))' 2>/dev/null)
  [ -n "$wheel_cupti" ] && export YOCO_CUPTI_LIB="$wheel_cupti"
fi
# Shared libraries the lent image may lack, for binaries built here: OpenMPI's
# (yoco, bench_cuda_kernels and test_cupti_collector link dist/ when this
# machine has MPI; scripts/carry-libs.sh copies them into .carry/lib) and
# NCCL's (test_nccl_communicator: the toolkit's, else the nvidia-nccl wheel's).
LIBDIRS=""
[ -d "$CARRY/lib" ] && LIBDIRS=$(cd "$CARRY/lib" && pwd)
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2' && [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
  wheel_nccl=$(python3 -c 'import glob, os, site
print(next(iter(sorted(os.path.dirname(p) for d in site.getsitepackages() for p in glob.glob(d + "/nvidia/**/libnccl.so.2", recursive=True))), ""))' 2>/dev/null)
  [ -n "$wheel_nccl" ] && LIBDIRS="${LIBDIRS:+$LIBDIRS:}$wheel_nccl"
fi
[ -n "$LIBDIRS" ] && export LD_LIBRARY_PATH="$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# mpirun for step `dist`: the carried OpenMPI when carried (relocated by
# OPAL_PREFIX; its PMIx plugins beside it), else the machine's. The carried one
# first: run-17's image had an mpirun whose PMIx plugin failed to load
# (undefined symbol PMIx_Info_create), the carried one ran (run-18). Ranks as root, shared memory
# without cross-memory attach (containers often forbid it), no load errors
# from components whose libraries (InfiniBand, UCX) the image lacks.
MPIRUN=
if [ -x "$CARRY/openmpi/bin/mpirun" ]; then
  export OPAL_PREFIX=$(cd "$CARRY/openmpi" && pwd)
  export PATH="$OPAL_PREFIX/bin:$PATH" PMIX_MCA_mca_base_component_path="$OPAL_PREFIX/pmix"
  MPIRUN="$OPAL_PREFIX/bin/mpirun"
else
  MPIRUN=$(command -v mpirun || true)
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mca_base_component_show_load_errors=0 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none PMIX_MCA_pcompress_base_silence_warning=1
has_step() { [[ ",$STEPS," == *",$1,"* ]]; }
note() { echo "$*" | tee -a "$SUMMARY"; }
# dry_check CMD...: --dry-run's check of one step's command (see --help), no GPU needed.
dry_check() {
  local -a cmd=("$@") envs=()
  if [ "${cmd[0]}" = env ]; then
    cmd=("${cmd[@]:1}")
    while [ ${#cmd[@]} -gt 0 ] && [[ "${cmd[0]}" == *=* ]]; do envs+=("${cmd[0]}"); cmd=("${cmd[@]:1}"); done
  fi
  # mpirun, compute-sanitizer: what they wrap is the first word in the binaries' folder.
  case "${cmd[0]}" in
    python3|scripts/*|"$BIN"/*) ;;
    *)
      local i
      for ((i = 0; i < ${#cmd[@]}; i++)); do [[ "${cmd[$i]}" == "$BIN/"* ]] && break; done
      [ "$i" -lt ${#cmd[@]} ] || { echo "not checked: ${cmd[*]}"; return 0; }
      echo "checking what ${cmd[0]##*/} wraps: ${cmd[*]:$i}"
      cmd=("${cmd[@]:$i}") ;;
  esac
  local prog=${cmd[0]##*/}
  case "$prog" in
    yoco) env "${envs[@]}" "${cmd[@]}" --dry-run ;;
    test_*)
      [ -x "${cmd[0]}" ] || { echo "no ${cmd[0]}"; return 1; }
      local filter="" a
      for a in "${cmd[@]:1}"; do [[ "$a" == --gtest_filter=* ]] && filter="$a"; done
      local listed
      listed=$("${cmd[0]}" ${filter:+"$filter"} --gtest_list_tests) || { echo "$listed"; return 1; }
      local n
      n=$(printf '%s\n' "$listed" | grep -c '^  ')
      echo "${cmd[0]##*/} ${filter:-(all)}: $n tests"
      [ "$n" -gt 0 ] || { echo "the filter selects no test"; return 1; } ;;
    bench_cuda_kernels)
      local known want="" k
      known=$("${cmd[0]}" --list) || return 1
      for ((k = 1; k < ${#cmd[@]}; k++)); do [ "${cmd[$k]}" = --filter ] && want="${cmd[$((k + 1))]:-}"; done
      # bench_cuda_kernels runs every benchmark whose name contains one of the filter's items.
      local -a items
      IFS=, read -ra items <<<"$want"
      for k in "${items[@]}"; do
        [ -n "$k" ] || continue
        grep -qF -- "$k" <<<"$known" ||
          { echo "--filter $k: in no benchmark's name (bench_cuda_kernels --list)"; return 1; }
      done
      echo "bench_cuda_kernels --filter ${want:-(all)}: each item selects a benchmark" ;;
    python3)  # compiled in memory: py_compile would write __pycache__ beside the script, in the tree
      python3 -c 'import sys; compile(open(sys.argv[1], "rb").read(), sys.argv[1], "exec")' "${cmd[1]}" &&
        echo "${cmd[1]} compiles" ;;
    # A script that offers --dry-run checks its own commands (gpu-ci-noise.sh: its yoco bench's options).
    *.sh) bash -n "${cmd[0]}" && [ -x "${cmd[0]}" ] && echo "${cmd[0]} parses" &&
          { ! grep -q -- '^#.*\[--dry-run\]' "${cmd[0]}" || env "${envs[@]}" "${cmd[0]}" --dry-run "${cmd[@]:1}"; } ;;
    *) echo "not checked: ${cmd[*]}" ;;
  esac
}
# run_step NAME SECONDS CMD...: logs to $LOGS/NAME.log, records pass/fail/timeout.
run_step() {
  local name="$1" secs="$2" cut=""; shift 2
  STEP_VERDICT=""
  secs=$(awk -v s="$secs" -v k="$SCALE" 'BEGIN{printf "%d", s*k}')
  if [ "$DEADLINE" -gt 0 ]; then
    local left=$((DEADLINE - SECONDS))
    if [ "$left" -lt 10 ]; then
      note "$(printf '%-48s %s' "$name" "DEADLINE (not started: ${left}s of --deadline $DEADLINE left)")"
      STEP_VERDICT=DEADLINE
      return 124
    fi
    [ "$secs" -gt "$left" ] && secs=$left && cut=1
  fi
  local t0=$SECONDS
  echo "=== $name ($*) ==="
  if [ -n "$DRY" ]; then
    dry_check "$@" >"$LOGS/$name.log" 2>&1
    local rc=$? verdict="dry-ok"
    [ $rc -eq 0 ] || verdict="DRY-FAIL(rc=$rc)"
    grep -q '^not checked' "$LOGS/$name.log" && verdict="dry-not-checked"
    tail -n 5 "$LOGS/$name.log"
    note "$(printf '%-48s %-16s %5ds' "$name" "$verdict" $((SECONDS - t0)))"
    STEP_VERDICT=$verdict
    pack_logs
    return $rc
  fi
  timeout -k 10 "$secs" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  local verdict=pass
  [ $rc -eq 0 ] || verdict="FAIL(rc=$rc)"
  # Cut short by --deadline, not timed out at its own limit: scripts/decide.py reads it as not run.
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    verdict="TIMEOUT(${secs}s)"
    [ -n "$cut" ] && verdict="DEADLINE-CUT(${secs}s)"
  fi
  tail -n 25 "$LOGS/$name.log"
  note "$(printf '%-48s %-16s %5ds' "$name" "$verdict" $((SECONDS - t0)))"
  STEP_VERDICT=$verdict
  # A GoogleTest binary's failed tests by name, for the rules that ask only for their own
  # (scripts/decide.py): one line each, under the step's.
  [ $rc -eq 0 ] || grep -oE '^\[  FAILED  \] [A-Za-z][A-Za-z0-9_/.]*' "$LOGS/$name.log" | sort -u | head -40 |
    sed "s|^\[  FAILED  \] |  failed test of $name: |" | tee -a "$SUMMARY"
  pack_logs
  return $rc
}

# Whether the last run_step's command failed by itself (FAIL, TIMEOUT at its own limit): a step cut
# short or never started by --deadline says nothing of its kernel, and sets no verdict.
step_failed() { [[ "$STEP_VERDICT" == FAIL* || "$STEP_VERDICT" == TIMEOUT* || "$STEP_VERDICT" == DRY-FAIL* ]]; }
# The verdicts this call passes on (summary's last line): the caller's own, then what this call's
# smoke tests and tests found; not the skips it set only for want of a test binary.
CALL_VERDICTS=()
for v in YOCO_PREFILL_SKIP_V3 YOCO_GRET_SKIP_V6 YOCO_GRET_SKIP_V7 YOCO_FFN_SKIP_FUSED YOCO_FFN_SKIP_PAIRS \
         YOCO_GRET_V7_VERIFIED YOCO_FFN_FUSED_VERIFIED; do
  [ "${!v:-0}" = 1 ] && CALL_VERDICTS+=("$v=1")
done
verdict() { [[ " ${CALL_VERDICTS[*]} " == *" $1=1 "* ]] || CALL_VERDICTS+=("$1=1"); }

{
echo "gpu-suite $(date -u +%FT%TZ) git ${YOCO_GIT_SHA:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)} bin $BIN"

note "device: $([ -n "$DRY" ] && echo "none: --dry-run checks every step's command, runs none" ||
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
[ -z "$DRY" ] || note "dry-run logs: $OUTDIR"
note "libcupti for --cupti: ${YOCO_CUPTI_LIB:-the loader's or the toolkit's}"
note "libraries added to the loader's path: ${LIBDIRS:-none}"
note "mpirun for step dist: ${MPIRUN:-none (carry it: scripts/carry-libs.sh --mpirun)}"
if has_step info && [ -z "$DRY" ]; then
  {
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    timeout 30 nvidia-smi
    nvcc --version 2>/dev/null | tail -2
    ldd "$BIN"/test_flash_decode 2>&1 | head -20
    ldd "$BIN"/yoco 2>&1 | grep -E 'cuda|cublas|mpi|not found'
    # libcupti is loaded by --cupti at run time (YOCO_CUPTI_LIB overrides): where is it here?
    ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda/lib64/libcupti.so* \
      /usr/local/cuda/targets/*/lib/libcupti.so* 2>&1 | head -5
    timeout 60 python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' 2>&1
  } >"$LOGS/info.log" 2>&1
  head -12 "$LOGS/info.log"
fi

# The steps that run yoco say so where --bin has none, instead of vanishing from the summary.
if [ ! -x "$BIN/yoco" ]; then
  for step in models models-3b chunks models-3b-short profile noise sweep; do
    has_step "$step" && note "$(printf '%-48s %s' "$step" "MISSING (no yoco in $BIN)")"
  done
fi
# The GPU test binaries are those built from tests/cuda/test_*.cpp.
GPU_TESTS=()
matched=0
for src in tests/cuda/test_*.cpp; do
  t=$(basename "$src" .cpp)
  [[ "$t" =~ $TEST_REGEX ]] || continue
  matched=$((matched + 1))
  if [ -x "$BIN/$t" ]; then
    GPU_TESTS+=("$t")
  elif has_step tests || has_step sanitize; then  # (the other steps do not need them: a tools-only --bin)
    note "$(printf '%-48s %s' "$t" "MISSING (not in $BIN)")"
  fi
done
# A --tests that selects no test would leave steps tests and sanitize empty, and say nothing.
[ "$matched" -gt 0 ] || ! { has_step tests || has_step sanitize; } ||
  note "$(printf '%-48s %s' tests "MISSING (no tests/cuda/test_*.cpp matches --tests '$TEST_REGEX')")"

# Prefill v3 (TMA + mbarriers, not yet verified on a GPU when this was written) alone first, under
# a short timeout: a wrong mbarrier phase hangs, and one hung kernel must not stall every other
# test, sanitizer and bench row. If it fails, YOCO_PREFILL_SKIP_V3=1 leaves v3 out of the rest.
if [ "${YOCO_PREFILL_SKIP_V3:-0}" = 1 ]; then
  note "YOCO_PREFILL_SKIP_V3=1 from the caller: prefill v3 is left out"
elif { has_step tests || has_step sanitize || has_step bench; } && [ -x "$BIN/test_flash_prefill" ]; then
  run_step smoke.flash_prefill_v3 60 "$BIN/test_flash_prefill" --gtest_color=no --gtest_filter='FlashPrefillV3.Smoke'
  if step_failed; then
    export YOCO_PREFILL_SKIP_V3=1
    verdict YOCO_PREFILL_SKIP_V3
    note "prefill v3 failed its smoke test: YOCO_PREFILL_SKIP_V3=1 leaves it out of the other tests, the sanitizers and the bench"
  fi
fi
# gRet chunk v6 (wgmma; two role loops share a named barrier, so a mismatch hangs), the same way.
# v6 is also the library's plan at head dim 128, so the runners take it in every yoco-3b model run:
# where it is left out, YOCO_GRET_CHUNK=v3 (unless the caller chose one) moves them to v3, whose
# rows say so, instead of every run waiting out its timeout.
gret_v6_off() {
  export YOCO_GRET_SKIP_V6=1
  [ -n "${YOCO_GRET_CHUNK:-}" ] || export YOCO_GRET_CHUNK=v3
  note "$1: YOCO_GRET_SKIP_V6=1 leaves it out of the other tests, the sanitizers and the bench; the runners take YOCO_GRET_CHUNK=${YOCO_GRET_CHUNK}"
}
if [ "${YOCO_GRET_SKIP_V6:-0}" = 1 ]; then
  gret_v6_off "YOCO_GRET_SKIP_V6=1 from the caller"
elif { has_step tests || has_step sanitize || has_step bench || has_step models-3b || has_step chunks ||
       has_step models-3b-short || has_step profile || has_step sweep; } && [ -x "$BIN/test_gret_chunk" ]; then
  run_step smoke.gret_chunk_v6 60 "$BIN/test_gret_chunk" --gtest_color=no --gtest_filter='GretChunkV6.Smoke'
  if step_failed; then
    verdict YOCO_GRET_SKIP_V6
    gret_v6_off "gret chunk v6 failed its smoke test"
  fi
fi
# gRet chunk v7 (v6 with two output warpgroups, 512 threads; written without a GPU), the same way.
# Its model runs (step models-3b, YOCO_GRET_CHUNK=v7) are made only after its smoke test passed in
# the same call (V7_OK), or with YOCO_GRET_V7_VERIFIED=1 from the caller (an earlier call's passed).
V7_OK=0
if [ "${YOCO_GRET_SKIP_V7:-0}" = 1 ]; then
  note "YOCO_GRET_SKIP_V7=1 from the caller: gret chunk v7 is left out"
elif { has_step tests || has_step sanitize || has_step bench || has_step models-3b || has_step profile; } &&
     [ -x "$BIN/test_gret_chunk" ]; then
  if run_step smoke.gret_chunk_v7 60 "$BIN/test_gret_chunk" --gtest_color=no --gtest_filter='GretChunkV7.Smoke'; then
    V7_OK=1
  elif step_failed; then
    export YOCO_GRET_SKIP_V7=1
    verdict YOCO_GRET_SKIP_V7
    note "gret chunk v7 failed its smoke test: YOCO_GRET_SKIP_V7=1 leaves it out of the other tests, the sanitizers, the bench and the model runs"
  fi
elif [ "${YOCO_GRET_V7_VERIFIED:-0}" = 1 ]; then
  V7_OK=1
elif has_step bench || has_step models-3b || has_step sanitize || has_step profile; then
  # No smoke test here (a --bin without test_gret_chunk) and no earlier call's word: the bench would
  # launch v7 untried, and a hang there takes the bench step.
  export YOCO_GRET_SKIP_V7=1
  note "no test_gret_chunk here and no YOCO_GRET_V7_VERIFIED=1: YOCO_GRET_SKIP_V7=1 leaves gret chunk v7 out"
fi
# The fused W1|W3 GEMM + SwiGLU (TMA + mbarriers, written without a GPU): its small cases alone
# first, the same way (the selector's cases: a hang or a launch error shows here; whether it
# computes right is test.test_gemm_swiglu's, below). If either fails, YOCO_FFN_SKIP_FUSED=1 leaves
# it out of the rest (tests, sanitizers, the bench's fused rows) and its model runs
# (YOCO_FFN_FUSED=1) are not made. Where this --bin has no test_gemm_swiglu (the tools call), it
# runs only with YOCO_FFN_FUSED_VERIFIED=1 from the caller (an earlier call's smoke and tests
# passed), and a caller's YOCO_FFN_SKIP_FUSED=1 always wins.
FUSED_FFN_OK=0
fused_ffn_off() {
  FUSED_FFN_OK=0
  export YOCO_FFN_SKIP_FUSED=1
  note "$1: YOCO_FFN_SKIP_FUSED=1 leaves the fused W1|W3 + SwiGLU kernel out of the rest"
}
if [ "${YOCO_FFN_SKIP_FUSED:-0}" = 1 ]; then
  note "YOCO_FFN_SKIP_FUSED=1 from the caller: the fused W1|W3 + SwiGLU kernel is left out"
elif [ -x "$BIN/test_gemm_swiglu" ]; then
  if { has_step tests || has_step sanitize || has_step bench || has_step models-3b || has_step chunks; }; then
    if run_step smoke.gemm_swiglu 60 "$BIN/test_gemm_swiglu" --gtest_color=no --gtest_filter='GemmSwiglu.TheSelector*'; then
      FUSED_FFN_OK=1
    elif step_failed; then
      verdict YOCO_FFN_SKIP_FUSED
      fused_ffn_off "its smoke test failed"
    fi
  fi
  # Its CTA pairs (clusters of two, the weight tile multicast; written without a GPU): a smoke
  # test of their own after the one-CTA kernel's; on failure YOCO_FFN_SKIP_PAIRS=1 leaves them out of
  # the tests, the sanitizers and the bench's pair rows (the runners do not take them yet).
  if [ "$FUSED_FFN_OK" = 1 ] && [ "${YOCO_FFN_SKIP_PAIRS:-0}" != 1 ] && { has_step tests || has_step sanitize || has_step bench; }; then
    run_step smoke.gemm_swiglu_pairs 60 "$BIN/test_gemm_swiglu" --gtest_color=no --gtest_filter='GemmSwigluCtaPairs.Smoke'
    if step_failed; then
      export YOCO_FFN_SKIP_PAIRS=1
      verdict YOCO_FFN_SKIP_PAIRS
      note "the fused kernel's CTA pairs failed their smoke test: YOCO_FFN_SKIP_PAIRS=1 leaves them out of the rest"
    fi
  fi
elif [ "${YOCO_FFN_FUSED_VERIFIED:-0}" = 1 ]; then
  FUSED_FFN_OK=1
elif has_step bench || has_step models-3b || has_step chunks; then
  fused_ffn_off "no test_gemm_swiglu here and no YOCO_FFN_FUSED_VERIFIED=1"
fi
# A test binary's timeout: about three times its longest run on the lent cards (the run summaries of
# reports/results/*/logs), at least 60 s, so that a hang (a kernel waiting on a barrier or an mbarrier
# that never completes) costs a minute of a call, not 200 s; binaries never timed get 60 s, the longest
# 240 s (test_gret_chunk: 78 s at run-20, before v7's tests).
test_timeout() {
  case "$1" in
    test_gret_chunk) echo 240 ;;
    test_cuda_models|test_flash_prefill) echo 150 ;;
    *) echo 60 ;;
  esac
}
PASSED_TESTS=()
if has_step tests; then
  for t in "${GPU_TESTS[@]}"; do
    if run_step "test.$t" "$(test_timeout "$t")" "$BIN/$t" --gtest_color=no; then PASSED_TESTS+=("$t"); continue; fi
    if step_failed; then
      if [ "$t" = test_gemm_swiglu ] && [ "$FUSED_FFN_OK" = 1 ]; then
        verdict YOCO_FFN_SKIP_FUSED
        fused_ffn_off "test_gemm_swiglu failed"
      fi
      # v7's tests are in test_gret_chunk, and most of them run every kernel in one test (a failure does
      # not name the kernel): any failure there keeps v7's model runs from timing a wrong kernel.
      if [ "$t" = test_gret_chunk ] && [ "$V7_OK" = 1 ]; then
        V7_OK=0
        verdict YOCO_GRET_SKIP_V7
        export YOCO_GRET_SKIP_V7=1
        note "test_gret_chunk failed: YOCO_GRET_SKIP_V7=1 leaves gret chunk v7 out of the sanitizers, the bench and the model runs"
      fi
    fi
  done
fi

# Small cases under the sanitizers (they slow kernels 10-100x): per binary, the
# tests that cover each kernel path at short lengths; the long and oracle
# tests are left out. The arena's deliberate out-of-memory allocation is an API
# error to memcheck, so that test is left out too.
sanitize_filter() {
  case "$1" in
    # Every kernel version (v2-v6, chunks 64/128/256) over 3 segments, then decode
    # steps, at ~1K tokens; SplitPrefill's 4K-token runs took 101 s under racecheck.
    # The norm and gate in v6's epilogue passed all three tools in run-16 (127 s of
    # racecheck alone) and no planner uses it since run-17: left out until it changes.
    test_gret_chunk) echo '*PrefillThenDecode*:*RejectsBad*:*V3Equals*' ;;
    test_flash_decode) echo '*AnySplit*:*Strided*:*RingMode*' ;;
    test_gret_decode) echo '*StepMatches*:*NormGate*:*LogDecay*:*Overlapped*:*Reject*:*Split*' ;;
    test_flash_prefill) echo '*HeadDims*:*ChunkOffsets*:*SlidingWindows*:*Unwritten*' ;;
    # The fused FFN kernel at 1,024 rows (and its refusals), its CTA pairs' small cases (the cluster's
    # barriers and multicast); the yoco-3b shape is too slow here.
    test_gemm_swiglu) echo '*Selector*:*Refuses*:GemmSwigluCtaPairs.Smoke' ;;
    # Whole models: one prefill + graph and eager decode per small architecture.
    # And the sublayers' one buffer against a buffer each: memcheck sees a piece overrun only apart
    # (so too for the residual stored once a layer, whose FFN input and W2 output borrow the FFN's pieces).
    # And prefills over buffers a reservation allocated: a kept buffer too small for its prefill would
    # overrun it where the bits could still agree (3-7 s for the binary's memcheck so far).
    test_cuda_models) echo 'Small/CudaModelTest.GraphAndEagerDecodeAreBitIdentical/*:Small/CudaModelTest.AReservedGenerationIsKeptByItsPrefill/*:CudaModelGretDecode.Every*:CudaModelGretChunk.*:CudaModelSublayers.One*:CudaModelResidualPerLayer.TheSameBits*' ;;
    *) echo '-*Long*:*128K*:*32K*:*1M*:*Oracle*:*ImpossibleAllocation*' ;;
  esac
}
SANITIZE_TESTS=()
for t in "${GPU_TESTS[@]}"; do [[ "$t" =~ $SANITIZE_REGEX ]] && SANITIZE_TESTS+=("$t"); done
[ ${#GPU_TESTS[@]} -eq 0 ] || [ ${#SANITIZE_TESTS[@]} -gt 0 ] || ! has_step sanitize ||
  note "$(printf '%-48s %s' sanitize "MISSING (no test binary of --tests matches --sanitize-tests '$SANITIZE_REGEX')")"
has_step sanitize && [ -z "$DRY" ] && ! command -v compute-sanitizer >/dev/null &&
  note "$(printf '%-48s %s' sanitize "MISSING (no compute-sanitizer on the PATH)")"
if has_step sanitize && { command -v compute-sanitizer >/dev/null || [ -n "$DRY" ]; }; then
  for t in "${SANITIZE_TESTS[@]}"; do
    # (CUPTI and the sanitizer both attach to the profiling interface: not together.)
    case "$t" in test_device_ceilings|test_cuda_counter_init|test_cupti_collector) continue ;; esac
    # NCCL's communicator set-up asks cudaFuncGetAttributes of kernels built for
    # other architectures and handles the answer (run-16: four error-209 reports,
    # all inside pncclCommInitRank); the test checks every CUDA return itself, so
    # only memory errors are memcheck's to report there.
    api=(); [ "$t" = test_nccl_communicator ] && api=(--report-api-errors no)
    run_step "memcheck.$t" 180 compute-sanitizer --tool memcheck "${api[@]}" --error-exitcode 9 --print-limit 20 \
      "$BIN/$t" --gtest_color=no --gtest_filter="$(sanitize_filter "$t")"
  done
  for t in "${SANITIZE_TESTS[@]}"; do
    case "$t" in test_flash_prefill|test_gret_chunk|test_flash_decode|test_gret_decode|test_gemm_swiglu)
      run_step "racecheck.$t" 300 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 \
        --print-limit 20 "$BIN/$t" --gtest_color=no --gtest_filter="$(sanitize_filter "$t")"
      run_step "synccheck.$t" 120 compute-sanitizer --tool synccheck --error-exitcode 9 --print-limit 20 \
        "$BIN/$t" --gtest_color=no --gtest_filter="$(sanitize_filter "$t")" ;;
    esac
  done
fi

if has_step dist; then
  # Ranks sharing the one GPU through the MPI backend (host-staged); NCCL with
  # one rank (it refuses two ranks on one device). The test binary and the
  # command-line runs each run where --bin holds them (a call's carry limit
  # may put them in different calls: scripts/carry-gpu-build.sh).
  if [ -z "$MPIRUN" ]; then
    note "$(printf '%-48s %s' dist "MISSING (no mpirun: scripts/carry-libs.sh --mpirun, carry .carry/openmpi)")"
  elif [ ! -x "$BIN/test_dist_cuda" ] && [ ! -x "$BIN/yoco" ]; then
    note "$(printf '%-48s %s' dist "MISSING (neither test_dist_cuda nor yoco in $BIN)")"
  else
    if [ -x "$BIN/test_dist_cuda" ]; then
      run_step dist.test_np1 240 "$MPIRUN" -np 1 --oversubscribe "$BIN/test_dist_cuda" --gtest_color=no
      for np in 2 3; do
        run_step "dist.test_np$np" 300 "$MPIRUN" -np "$np" --oversubscribe "$BIN/test_dist_cuda" --gtest_color=no \
          --gtest_filter='-*Nccl*'
      done
    else
      note "$(printf '%-48s %s' dist.test "SKIP (test_dist_cuda is not in $BIN: another call runs it)")"
    fi
    if [ -x "$BIN/yoco" ]; then
      # The command line end to end (generate's --check is the CPU reference's:
      # the GPU's logits are held to the reference by test_dist_cuda above).
      prompt=$(seq -s, 1 700)
      run_step dist.generate_gret_np2 120 "$MPIRUN" -np 2 --oversubscribe "$BIN/yoco" generate --device cuda \
        --model yoco-small --tokens "$prompt" --gen 16
      run_step dist.generate_swa_np3 120 "$MPIRUN" -np 3 --oversubscribe "$BIN/yoco" generate --device cuda \
        --model yoco-swa-small --tokens "$prompt" --gen 16
      run_step dist.generate_transformer_np2 120 "$MPIRUN" -np 2 --oversubscribe "$BIN/yoco" generate --device cuda \
        --model transformer-small --tokens "$prompt" --gen 16
      # The sweep on 2 ranks (device cuda-x2): latency, memory and the comm rows.
      run_step dist.bench_np2 180 "$MPIRUN" -np 2 --oversubscribe "$BIN/yoco" bench --device cuda \
        --model yoco-small,yoco-swa-small,transformer-small --lengths 4K --gen 64 --repeats 2 \
        --metrics memory,prefill,decode --out "$LOGS/models_dist_np2.csv"
    else
      note "$(printf '%-48s %s' dist.cli "SKIP (yoco is not in $BIN: another call runs it)")"
    fi
  fi
fi

if has_step bench && [ -x "$BIN/bench_cuda_kernels" ]; then
  args=(--out "$OUTDIR/kernels.csv")
  [ -n "$BENCH_FILTER" ] && args+=(--filter "$BENCH_FILTER")
  run_step bench_cuda_kernels 420 "$BIN/bench_cuda_kernels" "${args[@]}"
fi

if has_step peers && command -v python3 >/dev/null; then
  if [ -n "$DRY" ]; then
    ! ls .whl/*.whl >/dev/null 2>&1 || echo "(--dry-run: the peers' wheels in .whl/ are not installed)"
  elif ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/yoco-peers \
      .whl/*.whl >"$LOGS/peers-install.log" 2>&1 && export PYTHONPATH=/tmp/yoco-peers${PYTHONPATH:+:$PYTHONPATH}
  fi
  export PYTHONUNBUFFERED=1
  [[ ",$PEERS," == *",sdpa,"* ]] &&
    run_step peers.torch_sdpa 300 python3 bench/peers/torch_sdpa_attention.py --out "$OUTDIR/peers_sdpa.csv"
  [[ ",$PEERS," == *",fla,"* ]] &&
    run_step peers.fla_gret 240 python3 bench/peers/fla_gret.py --out "$OUTDIR/peers_fla.csv"
  [[ ",$PEERS," == *",fla-check,"* ]] &&
    run_step peers.fla_check 420 python3 bench/peers/fla_gret_check.py --yoco "$BIN/yoco" --ours "$BIN/gret_chunk_on_file" \
      --workdir "${TMPDIR:-/tmp}/yoco-fla-check" --lengths "$FLA_CHECK_LENGTHS" --out "$OUTDIR/peers_fla_check.csv"
fi

if has_step sass && [ -n "$DRY" ]; then
  # (No options to check; cuobjdump over every binary is the step itself, and it is the device's.)
  note "$(printf '%-48s %s' sass 'dry-not-checked (cuobjdump runs in the device call)')"
elif has_step sass && command -v cuobjdump >/dev/null; then
  {
    # Every GPU binary links only the kernels it uses: take them all, one
    # line per kernel (the first binary that holds it).
    for b in "$BIN"/bench_cuda_kernels "${GPU_TESTS[@]/#/$BIN/}"; do
      [ -x "$b" ] || continue
      cuobjdump --dump-sass "$b" 2>/dev/null
    done | awk '
        /Function :/ { fn = $3; skip = (fn in seen); seen[fn] = 1; next }
        skip { next }
        /HGMMA/ { hg[fn]++ } / HMMA/ { hm[fn]++ } / LDL| STL/ { ll[fn]++ } /LDGSTS/ { cp[fn]++ }
        END { for (f in seen) if (hg[f] + hm[f] + ll[f] + cp[f] > 0)
                printf "%-100.100s HGMMA %4d HMMA %4d LDGSTS %4d local %4d\n", f, hg[f], hm[f], cp[f], ll[f] }'
  } >"$LOGS/sass.log" 2>&1
  note "$(printf '%-48s %s' sass "$(wc -l <"$LOGS/sass.log") kernels with mma/local ops (logs/sass.log)")"
  pack_logs
fi
if has_step models && [ -x "$BIN/yoco" ]; then
  # The runners end to end (issue 15): every point ends as rows, an
  # out-of-memory point as out_of_memory rows. Decode rows come both ways
  # (graph: phase decode, eager: phase decode_eager) with the host enqueue time.
  # --cupti: the small presets' kernel families (issue 31: their 4K prefill is
  # launch-bound, and per-launch costs need a breakdown to be fitted on).
  run_step models.small 240 "$BIN/yoco" bench --device cuda --model yoco-small,yoco-swa-small,transformer-small \
    --lengths 4K,16K --gen 256 --repeats 3 --cupti --out "$LOGS/models_small.csv"
  # (YOCO's global K/V a GEMM per sequence, YOCO_GLOBAL_KV=per-sequence, ran here until run-17 measured
  # the batched projection 4x faster; decided, it no longer takes device time.)
  # A point that cannot fit (transformer-3b's caches at 2M tokens: ~220 GB) must become
  # out_of_memory rows, and the next point must still run.
  run_step models.oom 240 "$BIN/yoco" bench --device cuda --model transformer-3b --lengths 2M,2K \
    --metrics memory,prefill --repeats 1 --warmup 0 --out "$LOGS/models_oom.csv"
fi
# Whether this call's bench rows put the fused kernel's CTA pairs ahead of cuBLAS + SwiGLU at 32,768 rows
# (bench ffn_up; a dry run says yes, to show the step).
ffn_pairs_won() {
  [ -n "$DRY" ] && return 0
  [ -f "$OUTDIR/kernels.csv" ] || return 1
  python3 - "$OUTDIR/kernels.csv" <<'PY'
import csv
import sys
t = {}
for r in csv.DictReader(open(sys.argv[1], newline="")):
    phase = r.get("phase", "")
    if r.get("metric") == "kernel_time_s" and r.get("value") and phase.startswith("ffn_up:") and "rows 32768 " in phase:
        t[phase.split(":", 1)[1].split(", rows", 1)[0]] = float(r["value"])
pairs, unfused = t.get("fused gemm_swiglu, CTA pairs"), t.get("cublas W1|W3 + swiglu")
sys.exit(0 if pairs and unfused and pairs < unfused else 1)
PY
}
# Steps models-3b and chunks hold what issue 34 is judged on, most telling first, so that a call cut
# by --deadline keeps it: yoco-3b's 512K and 1M prefill (the must: 2.9 s at 512K) and decode steps,
# then the same with the decode GEMMs as a GEMV; step chunks has the memory candidates. models-3b-short (yoco-3b against transformer-3b at 32K and 128K, up to 7 minutes)
# comes after them. The FFN's up half fused ran in run-21 (1.012x the pair: it stays off); step
# chunks keeps its 16384 row.
if has_step models-3b && [ -x "$BIN/yoco" ]; then
  PAIRS_RUN=0
  [ "$FUSED_FFN_OK" = 1 ] && [ "${YOCO_FFN_SKIP_PAIRS:-0}" != 1 ] && ffn_pairs_won && PAIRS_RUN=1
  run_step models.3b_long 300 "$BIN/yoco" bench --device cuda --model yoco-3b --lengths 512K,1M \
    --metrics memory,prefill,decode --repeats 2 --warmup 1 --budget-s 200 --out "$LOGS/models_3b_long.csv"
  # The FFN's up half fused in CTA pairs (YOCO_FFN_FUSED=pairs: the fused kernel's clusters of two sharing
  # the weight tile), only where this call's bench put its 32,768-row ffn_up row ahead of cuBLAS + SwiGLU
  # (RUNS.md's rule): about 0.1 s off 512K if it holds there, the largest of the written levers, so it runs
  # first after the plain run (a call cut by --deadline keeps it). It excludes the residual stored once a layer.
  if [ "$PAIRS_RUN" = 1 ]; then
    run_step models.3b_long_fused_pairs 150 env YOCO_FFN_FUSED=pairs "$BIN/yoco" bench --device cuda \
      --model yoco-3b --lengths 512K,1M --metrics memory,prefill --repeats 2 --warmup 1 --budget-s 120 \
      --out "$LOGS/models_3b_long_fused_pairs.csv"
  fi
  # The residual stored once a layer (YOCO_RESIDUAL_PER_LAYER=1: 22 bytes an element a layer moved by its
  # norms instead of 24, the same bits): its prefill against the plain run's above. Analytic: ~0.014 s
  # off 512K's 2.94 s, about a third of what the must still asks.
  run_step models.3b_long_per_layer 150 env YOCO_RESIDUAL_PER_LAYER=1 "$BIN/yoco" bench --device cuda \
    --model yoco-3b --lengths 512K,1M --metrics memory,prefill --repeats 2 --warmup 1 --budget-s 120 \
    --out "$LOGS/models_3b_long_per_layer.csv"
  if [ "$V7_OK" = 1 ]; then
    # gRet chunk v7 in the runner (YOCO_GRET_CHUNK=v7: its own plan), then every prefill candidate of
    # issue 34 together (v7 and the residual stored once a layer): the must's question in one row.
    run_step models.3b_long_v7 150 env YOCO_GRET_CHUNK=v7 "$BIN/yoco" bench --device cuda --model yoco-3b \
      --lengths 512K,1M --metrics memory,prefill --repeats 2 --warmup 1 --budget-s 120 \
      --out "$LOGS/models_3b_long_v7.csv"
    run_step models.3b_long_candidates 150 env YOCO_GRET_CHUNK=v7 YOCO_RESIDUAL_PER_LAYER=1 "$BIN/yoco" bench \
      --device cuda --model yoco-3b --lengths 512K,1M --metrics memory,prefill --repeats 2 --warmup 1 \
      --budget-s 120 --out "$LOGS/models_3b_long_candidates.csv"
    # Where the pairs run, the candidates that can go together with them (v7 and the pairs: the residual
    # stored once a layer is declined with the FFN fused): the must's question if the pairs win.
    if [ "$PAIRS_RUN" = 1 ]; then
      run_step models.3b_long_candidates_pairs 150 env YOCO_GRET_CHUNK=v7 YOCO_FFN_FUSED=pairs "$BIN/yoco" bench \
        --device cuda --model yoco-3b --lengths 512K,1M --metrics memory,prefill --repeats 2 --warmup 1 \
        --budget-s 120 --out "$LOGS/models_3b_long_candidates_pairs.csv"
    fi
  fi
  # The decode step's GEMMs as ops/gemv.hpp's kernel (YOCO_GEMV=1): its decode steps against the plain
  # run's above (bench gemm_shapes' "gemv (ours" rows price each shape; CUPTI had cuBLAS's decode GEMMs at
  # 67% of their roofline in yoco-3b's 32K step, run-07 of the H200).
  run_step models.3b_long_gemv 150 env YOCO_GEMV=1 "$BIN/yoco" bench --device cuda --model yoco-3b \
    --lengths 512K,1M --metrics memory,prefill,decode --repeats 2 --warmup 1 --budget-s 120 \
    --out "$LOGS/models_3b_long_gemv.csv"
  # Decided at the H200's run-04 (cuda/runner/NOTES-runners.md, last section), so no longer run here:
  # the GEMM algorithms tuned (YOCO_GEMM_ALGO=tuned) and the residual added by the GEMMs
  # (YOCO_RESIDUAL_IN_GEMM=1): both stay off. Chunk 16384 tuned put the H200 within 0.4-0.8% of the
  # plain chunk-32768 run at 12.36 GB (the paper's 12.4 at 1M; run-04); the H100, where plain 16384 was
  # 2.4% slower (run-21), has not run it: issue 34's memory item asks for it within 2% there.
  run_step models.3b_long_tuned_16384 150 env YOCO_GEMM_ALGO=tuned "$BIN/yoco" bench --device cuda \
    --model yoco-3b --lengths 512K,1M --metrics memory,prefill --prefill-chunk 16384 --repeats 2 --warmup 1 \
    --budget-s 120 --out "$LOGS/models_3b_long_tuned_16384.csv"
fi
if has_step chunks && [ -x "$BIN/yoco" ]; then
  # Issue 34's trade-off: yoco-3b's memory and prefill at 512K and 1M by how a prefill step holds its
  # activations (the runners' working set is one step's). Chunk 32768, the default, is step
  # models-3b's (its rows join chunks.csv below). About 1 minute a configuration.
  # The candidates for the paper's 12.4 GB at 1M first. With the sublayers in one buffer (the
  # default since 2026-11-27, runner/sublayer_buffers.hpp) chunks of 16384 need nothing else: 12.36 GB
  # by the formula, cuBLAS's GEMMs at m = 16384. Then the same with the FFN's up half fused and
  # with the FFN in blocks of 4096 rows (12.07 GB each).
  run_step chunks.16384 150 "$BIN/yoco" bench --device cuda --model yoco-3b --lengths 512K,1M \
    --metrics memory,prefill --prefill-chunk 16384 --repeats 2 --warmup 1 --budget-s 120 \
    --out "$LOGS/models_chunk_16384.csv"
  if [ "$FUSED_FFN_OK" = 1 ]; then
    run_step chunks.16384_fused 150 env YOCO_FFN_FUSED=1 "$BIN/yoco" bench --device cuda --model yoco-3b \
      --lengths 512K,1M --metrics memory,prefill --prefill-chunk 16384 --repeats 2 --warmup 1 --budget-s 120 \
      --out "$LOGS/models_chunk_16384_fused.csv"
  fi
  run_step chunks.16384_ffn4096 150 env YOCO_FFN_ROWS=4096 "$BIN/yoco" bench --device cuda --model yoco-3b \
    --lengths 512K,1M --metrics memory,prefill --prefill-chunk 16384 --repeats 2 --warmup 1 --budget-s 120 \
    --out "$LOGS/models_chunk_16384_ffn4096.csv"
  # The default chunk with a buffer each for the sublayers (the layout before): the saving measured
  # (the formula: 1.01 GB at 32768; models-3b has the shared side).
  run_step chunks.32768_apart 150 env YOCO_SUBLAYER_BUFFERS=apart "$BIN/yoco" bench --device cuda \
    --model yoco-3b --lengths 1M --metrics memory,prefill --prefill-chunk 32768 --repeats 2 --warmup 1 \
    --budget-s 120 --out "$LOGS/models_chunk_32768_apart.csv"
  # The FFN in row blocks of 8192 (YOCO_FFN_ROWS) at the default chunk (12.87 GB by the formula).
  run_step chunks.32768_ffn8192 150 env YOCO_FFN_ROWS=8192 "$BIN/yoco" bench --device cuda --model yoco-3b \
    --lengths 512K,1M --metrics memory,prefill --prefill-chunk 32768 --repeats 2 --warmup 1 --budget-s 120 \
    --out "$LOGS/models_chunk_32768_ffn8192.csv"
  run_step chunks.8192 150 "$BIN/yoco" bench --device cuda --model yoco-3b --lengths 512K,1M \
    --metrics memory,prefill --prefill-chunk 8192 --repeats 2 --warmup 1 --budget-s 120 \
    --out "$LOGS/models_chunk_8192.csv"
fi
if has_step models-3b-short && [ -x "$BIN/yoco" ]; then
  # Issue 15's end-to-end command; issue 34's "no slower elsewhere" at the short lengths.
  run_step models.3b 420 "$BIN/yoco" bench --device cuda --model yoco-3b,transformer-3b --lengths 32K,128K \
    --repeats 3 --budget-s 150 --out "$LOGS/models_3b.csv"
fi
if has_step chunks || has_step models-3b; then
  # The trade-off's rows alone (the report pairs them with the calibrated
  # configurations by their notes; RUNS.md: appended to logs/chunks.csv): step models-3b's
  # candidates (the residual stored once a layer, v7 named, chunk 16384 tuned) are configurations
  # too. Not the GEMV's run: its notes name no prefill configuration of the trade-off, so its rows
  # would stand for the plain run's. Only files that exist (mawk stops at a missing one).
  chunk_files=()
  for f in "$LOGS"/models_chunk_*.csv "$LOGS"/models_3b_long*.csv; do
    [ -f "$f" ] && [[ "$f" != *_gemv.csv ]] && chunk_files+=("$f")
  done
  [ ${#chunk_files[@]} -eq 0 ] ||
    awk 'FNR == 1 && NR != 1 { next } { print }' "${chunk_files[@]}" >"$OUTDIR/chunks.csv" 2>/dev/null
fi
if has_step models || has_step models-3b || has_step models-3b-short || has_step chunks; then
  # One file back (a lent machine returns at most 8): the runs' rows, one header.
  awk 'FNR == 1 && NR != 1 { next } { print }' "$LOGS"/models_*.csv >"$OUTDIR/models.csv" 2>/dev/null
fi
if has_step profile && [ -x "$BIN/yoco" ]; then
  # README's profiling commands, on a small point (reports stay on the machine:
  # only their text summaries come back, in the logs).
  # (The lent H100 has ncu but no nsys: a missing tool is said, not failed.)
  # A warm machine may hold an earlier call's reports there: they must not come back as this call's.
  [ -n "$DRY" ] || rm -rf /tmp/yoco-profile /tmp/yoco-profile-v7
  if command -v nsys >/dev/null; then
    run_step profile.nsys 300 scripts/profile-point.sh --bin "$BIN" --model yoco-small --length 4K --tool nsys \
      --out /tmp/yoco-profile
  else
    note "$(printf '%-48s %s' profile.nsys 'SKIP (nsys, Nsight Systems, is not installed here)')"
  fi
  run_step profile.ncu 300 scripts/profile-point.sh --bin "$BIN" --model yoco-small --length 4K --tool ncu \
    --count 3 --out /tmp/yoco-profile
  # gRet chunk v6, yoco-3b's default chunk kernel, one launch at 32K: the H200 showed DRAM bandwidth
  # does not bound it (cuda/gret/NOTES-gret_chunk.md); its sections say what does.
  # Pinned (YOCO_GRET_CHUNK=v6): the library's plan could be another kernel, and ncu would profile none.
  if [ "${YOCO_GRET_SKIP_V6:-0}" = 1 ]; then
    note "$(printf '%-48s %s' profile.ncu_gret_v6 'SKIP (YOCO_GRET_SKIP_V6=1: v6 is left out)')"
  else
    run_step profile.ncu_gret_v6 300 env YOCO_GRET_CHUNK=v6 scripts/profile-point.sh --bin "$BIN" --model yoco-3b \
      --length 32K --tool ncu --kernel gret_chunk_v6 --count 1 --out /tmp/yoco-profile
  fi
  [ -n "$DRY" ] || cp /tmp/yoco-profile/*.csv /tmp/yoco-profile/*.txt "$LOGS/" 2>/dev/null
  # v7 (two output warpgroups) the same way, where its smoke test passed: whether the output chain still
  # sets the chunk period (cuda/gret/NOTES-gret_chunk.md, v7). Its files come back prefixed v7-.
  if [ "$V7_OK" = 1 ]; then
    run_step profile.ncu_gret_v7 300 env YOCO_GRET_CHUNK=v7 scripts/profile-point.sh --bin "$BIN" --model yoco-3b \
      --length 32K --tool ncu --kernel gret_chunk_v7 --count 1 --out /tmp/yoco-profile-v7
    if [ -z "$DRY" ]; then
      for f in /tmp/yoco-profile-v7/*.csv /tmp/yoco-profile-v7/*.txt; do
        [ -f "$f" ] && cp "$f" "$LOGS/v7-$(basename "$f")"
      done
    fi
  fi
fi
if has_step noise && [ -x "$BIN/yoco" ]; then
  # Its own folder in the logs (packed with them); the baseline and the report also beside the summary.
  run_step noise 300 env YOCO="$BIN/yoco" scripts/gpu-ci-noise.sh "$LOGS/ci-gpu"
  [ -f "$LOGS/ci-gpu/run-a.csv" ] && cp "$LOGS/ci-gpu/run-a.csv" "$OUTDIR/ci-gpu-run-a.csv"
  [ -f "$LOGS/ci-gpu/noise-floor.md" ] && cp "$LOGS/ci-gpu/noise-floor.md" "$OUTDIR/ci-gpu-noise-floor.md"
fi
if has_step sweep && [ -x "$BIN/yoco" ]; then
  # The paper's sweep (issue 16). SIGTERM at the step's timeout keeps every
  # completed point in the file; the same step in a later call resumes it.
  # What the step wrote is what is newer than this mark (the summary is not: run_step appends the
  # step's own line to it after the step, so nothing was ever newer than it, and no sweep came back).
  touch "$LOGS_ROOT/sweep-start"
  run_step sweep "$SWEEP_SECONDS" "$BIN/yoco" bench --default-job --device cuda --no-report --resume \
    --results-dir "$SWEEP_RESULTS" $SWEEP_QUICK "${SWEEP_NARROW[@]}"
  swept=0
  for f in "$SWEEP_RESULTS"/*/sweep*.csv "$SWEEP_RESULTS"/*/beyond*.csv; do
    if [ -f "$f" ] && [ "$f" -nt "$LOGS_ROOT/sweep-start" ]; then
      cp "$f" "$OUTDIR/" && cp "$f" "$LOGS/" && note "sweep file: $f" && swept=$((swept + 1))
    fi
  done
  [ -n "$DRY" ] || [ "$swept" -gt 0 ] || note "sweep file: none written (see the sweep's log)"
  grep -E '^\[|points? done|resuming|wrote' "$LOGS/sweep.log" | tail -5
  for f in "$OUTDIR"/sweep*.csv "$OUTDIR"/beyond*.csv; do
    [ -f "$f" ] && python3 scripts/sweep_headlines.py "$f" 2>&1 | tee -a "$LOGS/sweep-headlines.log"
  done
  pack_logs
fi
# This call's verdicts as the variables that carry them, for a later call's command line (RUNS.md,
# "Next calls"): the skips its smoke tests and tests set (a failed or hung smoke test, too, whose
# kernel's other tests then skip and pass), and what its tests verified.
if has_step tests && [ -z "$DRY" ]; then
  # Verified: the smoke test and the whole binary passed in this call (a binary cut by --deadline did not).
  [ "$V7_OK" = 1 ] && [[ " ${PASSED_TESTS[*]} " == *" test_gret_chunk "* ]] && verdict YOCO_GRET_V7_VERIFIED
  [ "$FUSED_FFN_OK" = 1 ] && [[ " ${PASSED_TESTS[*]} " == *" test_gemm_swiglu "* ]] && verdict YOCO_FFN_FUSED_VERIFIED
fi
# A kernel left out is not verified, whoever said so first.
verdicts=()
for v in "${CALL_VERDICTS[@]}"; do
  case "$v" in
    YOCO_GRET_V7_VERIFIED=1) [[ " ${CALL_VERDICTS[*]} " == *" YOCO_GRET_SKIP_V7=1 "* ]] && continue ;;
    YOCO_FFN_FUSED_VERIFIED=1) [[ " ${CALL_VERDICTS[*]} " == *" YOCO_FFN_SKIP_FUSED=1 "* ]] && continue ;;
  esac
  verdicts+=("$v")
done
if [ -n "$DRY" ]; then
  note "verdicts for a later call: none (a dry run tests nothing)"
else
  note "verdicts for a later call: ${verdicts[*]:-none}"
fi
} 2>&1 | tee "$OUTDIR/suite.log"

# Few files come back from a lent machine: the per-step logs travel as one tarball.
pack_logs || echo "gpu-suite: could not pack the logs into $OUTDIR/logs.tar.gz" >&2
echo
echo "===== gpu-suite summary ====="
cat "$SUMMARY"
if [ -f "$OUTDIR/kernels.csv" ]; then
  echo "kernel rows: $OUTDIR/kernels.csv; headlines (ceilings of this run, peers of this call):"
  # Only the peers files this call wrote (none when no peer ran); the script names a file it cannot read.
  peers=()
  for f in "$OUTDIR"/peers_*.csv; do [ -f "$f" ] && peers+=("$f"); done
  python3 scripts/gpu_headlines.py "$OUTDIR/kernels.csv" "${peers[@]}" 2>&1 | tee -a "$SUMMARY"
fi
if [ -s "$OUTDIR/models.csv" ]; then
  echo "model rows: $OUTDIR/models.csv; headlines (prefill vs its GEMM floor, decode graph vs eager):"
  python3 scripts/model_headlines.py "$OUTDIR/models.csv" 2>&1 | tee -a "$SUMMARY"
fi
grep -q -E 'FAIL|TIMEOUT|MISSING|DEADLINE' "$SUMMARY" && exit 1
exit 0
