#!/usr/bin/env bash
# Prepares what a lent GPU machine needs from this machine's cuda build (it
# has CUDA, CMake and PyTorch, but no Debian packages, no network, and takes
# at most 64 MiB of ignored files a call): the binaries stripped into two
# sets, one a call, and the libraries and MPI launcher they need.
#   .carry/tests  every GPU test binary (tests/cuda/test_*): call 1,
#                 --only info,tests,sanitize
#   .carry/tools  yoco, test_dist_cuda, bench_cuda_kernels, gret_chunk_on_file:
#                 call 2, --only dist,bench,peers,sass,models (dist: the test
#                 binary under mpirun, then the mpirun yoco runs; also
#                 models-3b, chunks, models-3b-short, sweep in calls of
#                 their own). test_dist_cuda
#                 went from call 1 to call 2 when the ring attention test took
#                 call 1 past the limit (65.1 MiB at its commit).
#   .carry/lib, .carry/openmpi  scripts/carry-libs.sh --mpirun (both calls)
# The limit counts the working tree that travels too (the tracked files): each
# call's total is checked against it, and both calls' commands are printed.
#
#   scripts/carry-gpu-build.sh [--tests REGEX] [--tools REGEX] [BUILD_BIN]   (default build/cuda/bin)
# --tests: only the GPU test binaries whose names match (as gpu-suite's --tests):
# every test binary links every kernel, so all of them (47 MiB at 0d14f2f) no
# longer fit one call beside the libraries and the tree; a call that runs a few
# carries those few. --tools: the same for call 2's tools, whole names (default all four; the
# tree grows with every committed run: 16.6 MiB at 3f75db0, when call 2 with all
# four came to 62.8 MiB), e.g. 'yoco|bench_cuda_kernels' for --only bench,models-3b.
set -euo pipefail
cd "$(dirname "$0")/.."
tests_regex="."
tools_regex="."
bin="build/cuda/bin"
while [ $# -gt 0 ]; do
  case "$1" in
    --tests)
      [ $# -ge 2 ] || { echo "carry-gpu-build.sh: --tests needs a regular expression" >&2; exit 2; }
      tests_regex="$2"; shift 2 ;;
    --tools)
      [ $# -ge 2 ] || { echo "carry-gpu-build.sh: --tools needs a regular expression" >&2; exit 2; }
      tools_regex="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "carry-gpu-build.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) bin="$1"; shift ;;
  esac
done
[ -x "$bin/yoco" ] || { echo "carry-gpu-build.sh: no $bin/yoco: build the cuda preset first" >&2; exit 2; }
limit_kib=$((64 * 1024))
# What is carried must stay out of git: not ignored, .carry/ would travel twice (as the tree's
# untracked files too, over the limit) and a `git add -A` would commit binaries. A fresh clone
# has no .git/info/exclude entry for it: add one (this checkout's own, never committed).
for d in .carry .whl; do
  if ! git check-ignore -q "$d/x" 2>/dev/null; then
    mkdir -p "$(git rev-parse --git-path info)"
    echo "/$d/" >>"$(git rev-parse --git-path info/exclude)"
    echo "carry-gpu-build.sh: $d/ added to .git/info/exclude (carried, never committed)" >&2
  fi
done
rm -rf .carry/tests .carry/tools
mkdir -p .carry/tests .carry/tools
missing=""
for src in tests/cuda/test_*.cpp; do
  t=$(basename "$src" .cpp)
  [[ "$t" =~ $tests_regex ]] || continue
  if [ -x "$bin/$t" ]; then strip -o ".carry/tests/$t" "$bin/$t"; else missing="$missing $t"; fi
done
for t in yoco test_dist_cuda bench_cuda_kernels gret_chunk_on_file; do
  [[ "$t" =~ ^($tools_regex)$ ]] || continue
  if [ -x "$bin/$t" ]; then strip -o ".carry/tools/$t" "$bin/$t"; else missing="$missing $t"; fi
done
[ -z "$missing" ] || echo "carry-gpu-build.sh: not built (their steps will say MISSING):$missing" >&2
carry_bins=()
shopt -s nullglob
for f in .carry/tests/* .carry/tools/*; do carry_bins+=("$f"); done
shopt -u nullglob
[ -n "$(ls -A .carry/tests)" ] || echo "carry-gpu-build.sh: no GPU test binary matches --tests '$tests_regex'" >&2
[ -n "$(ls -A .carry/tools)" ] || echo "carry-gpu-build.sh: no tool matches --tools '$tools_regex'" >&2
scripts/carry-libs.sh --mpirun "${carry_bins[@]}" >/dev/null
# KiB of the paths that exist (a missing .whl is no error).
kib() {
  local total=0 p
  for p in "$@"; do [ -e "$p" ] && total=$((total + $(du -sk "$p" | awk '{print $1}'))); done
  echo "$total"
}
# The tracked files and the untracked ones git does not ignore travel with every call.
tree=$(git ls-files -z --cached --others --exclude-standard | du -ck --files0-from=- 2>/dev/null | tail -1 | awk '{print $1}')
shared=$(( $(kib .carry/lib .carry/openmpi) + tree ))
call1=$(( $(kib .carry/tests) + shared ))
call2=$(( $(kib .carry/tools .whl) + shared ))
status=0
for c in "1 $call1" "2 $call2"; do
  set -- $c
  verdict="fits"
  [ "$2" -le "$limit_kib" ] || { verdict="OVER the 64 MiB limit: split the call"; status=1; }
  printf 'call %s sends %5.1f MiB (the tree %.1f of it): %s\n' "$1" "$(awk -v k="$2" 'BEGIN{print k / 1024}')" \
    "$(awk -v k="$tree" 'BEGIN{print k / 1024}')" "$verdict"
done
sha=$(git rev-parse --short=12 HEAD)
cat <<CALLS
call 1: carry .carry/tests .carry/lib .carry/openmpi
  YOCO_GIT_SHA=$sha scripts/gpu-suite.sh --bin .carry/tests --only info,tests,sanitize --tests $(printf '%q' "$tests_regex") --deadline 540
call 2: carry .carry/tools .carry/lib .carry/openmpi .whl
  YOCO_GIT_SHA=$sha scripts/gpu-suite.sh --bin .carry/tools --only dist,bench,peers,sass,models --peers sdpa,fla --deadline 540
CALLS
exit $status
