#!/usr/bin/env bash
# Prepares what a lent GPU machine needs from this machine's cuda build (it
# has CUDA, CMake and PyTorch, but no Debian packages, no network, and takes
# at most 64 MiB of ignored files a call): the binaries stripped, and the
# libraries and MPI launcher they need.
#   .carry/tests  every GPU test binary (tests/cuda/test_*)
#   .carry/tools  yoco, test_dist_cuda, bench_cuda_kernels, gret_chunk_on_file
#   .carry/lib, .carry/openmpi  scripts/carry-libs.sh --mpirun
#   .carry/bundle.tar.xz  all of the above in one file (the default): bin/
#                 (tests and tools together), lib/, openmpi/ and a
#                 MANIFEST.sha256. Every binary links every kernel, so they
#                 share most of their bytes, and xz keeps them once: the 89 MiB
#                 of stripped binaries at 08a7aa5 came to 5.5 MiB. So every
#                 call carries the same one file, every step of gpu-suite.sh
#                 can run in any call, and the calls can be planned by time
#                 alone. gpu-suite.sh --bundle unpacks it there
#                 (scripts/carry-unpack.sh) and checks it against the manifest.
#   --split       the older way, no bundle: call 1 carries .carry/tests (--only
#                 info,tests,sanitize), call 2 .carry/tools (the rest), both
#                 .carry/lib and .carry/openmpi. Since the test binaries came to
#                 47 MiB (0d14f2f), all of them no longer fit one call beside
#                 the libraries and the tree, so --tests / --tools pick a few.
# The limit counts the working tree that travels too (the tracked files): each
# call's total is checked against it, and the calls' commands are printed.
#
#   scripts/carry-gpu-build.sh [--split] [--no-build] [--tests REGEX] [--tools REGEX] [BUILD_BIN]   (default build/cuda/bin)
# The build folder above BUILD_BIN is brought up to date first (cmake --build; --no-build: not): the
# calls label every row with HEAD's revision (YOCO_GIT_SHA), so a binary older than the tree would be
# measured under the wrong name. Changes not committed are said, for the same reason.
# --tests: only the GPU test binaries whose names match (as gpu-suite's --tests);
# --tools: the same for the tools, whole names (default all four), e.g.
# 'yoco|bench_cuda_kernels'.
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
cd "$(dirname "$0")/.."
tests_regex="."
tools_regex=".*"
bin="build/cuda/bin"
split=""
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tests)
      [ $# -ge 2 ] || { echo "carry-gpu-build.sh: --tests needs a regular expression" >&2; exit 2; }
      tests_regex="$2"; shift 2 ;;
    --tools)
      [ $# -ge 2 ] || { echo "carry-gpu-build.sh: --tools needs a regular expression" >&2; exit 2; }
      tools_regex="$2"; shift 2 ;;
    --split) split=1; shift ;;
    --no-build) build=""; shift ;;
    -h|--help) script_help; exit 0 ;;
    -*) echo "carry-gpu-build.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) bin="$1"; shift ;;
  esac
done
build_dir=$(dirname -- "$bin")
if [ -n "$build" ] && [ -f "$build_dir/CMakeCache.txt" ]; then
  echo "carry-gpu-build.sh: bringing $build_dir up to date (cmake --build; --no-build to skip)" >&2
  cmake --build "$build_dir" -j"$(nproc)" >/dev/null ||
    { echo "carry-gpu-build.sh: the build of $build_dir failed (cmake --build $build_dir)" >&2; exit 2; }
fi
[ -x "$bin/yoco" ] || { echo "carry-gpu-build.sh: no $bin/yoco: build the cuda preset first" >&2; exit 2; }
[ -n "$build" ] || echo "carry-gpu-build.sh: --no-build: $bin is carried as it is, current or not" >&2
# What the binaries were built from against what the rows will be labelled with.
# (awk reads it all: head would close the pipe early, and pipefail end the script without a word.)
dirty=$(git status --porcelain -- . ':!reports' | awk 'NR <= 3 {printf "%s ", $2}')
[ -z "$dirty" ] || echo "carry-gpu-build.sh: not committed, yet in the binaries: ${dirty}(rows name HEAD; commit first)" >&2
# Said before minutes of stripping, not as bash's 'xz: command not found' after them.
[ -n "$split" ] || command -v xz >/dev/null ||
  { echo "carry-gpu-build.sh: the bundle needs xz (scripts/install-deps.sh; or --split, no bundle)" >&2; exit 2; }
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
# (carry-libs.sh given no binary would take build/cuda/bin/yoco's libraries: a bundle of nothing.)
[ ${#carry_bins[@]} -gt 0 ] || { echo "carry-gpu-build.sh: nothing to carry: no binary matches --tests and --tools" >&2; exit 2; }
rm -rf .carry/lib  # what these binaries need, not what earlier builds' needed too
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
sha=$(git rev-parse --short=12 HEAD)
status=0
# verdict NAME KIB: one line, the call's size against the limit.
verdict() {
  local v="fits"
  [ "$2" -le "$limit_kib" ] || { v="OVER the 64 MiB limit: carry fewer binaries (--tests, --tools)"; status=1; }
  printf '%s sends %5.1f MiB (the tree %.1f of it): %s\n' "$1" "$(awk -v k="$2" 'BEGIN{print k / 1024}')" \
    "$(awk -v k="$tree" 'BEGIN{print k / 1024}')" "$v"
}
if [ -n "$split" ]; then
  rm -f .carry/bundle.tar.xz
  verdict "call 1" $(( $(kib .carry/tests) + shared ))
  verdict "call 2" $(( $(kib .carry/tools .whl) + shared ))
  cat <<CALLS
call 1: carry .carry/tests .carry/lib .carry/openmpi
  YOCO_GIT_SHA=$sha scripts/gpu-suite.sh --bin .carry/tests --only info,tests,sanitize --tests $(printf '%q' "$tests_regex") --deadline 540
call 2: carry .carry/tools .carry/lib .carry/openmpi .whl
  YOCO_GIT_SHA=$sha scripts/gpu-suite.sh --bin .carry/tools --only dist,bench,peers,sass,models --peers sdpa,fla --deadline 540
CALLS
  exit $status
fi
# The bundle: bin/ (tests and tools), lib/, openmpi/, the manifest; written
# beside and renamed, so an interrupted run leaves the last bundle whole.
stage=.carry/bundle.stage
trap 'rm -rf "$stage" .carry/bundle.tar.xz.tmp' EXIT  # an interrupted or failed pack leaves neither
rm -rf "$stage"
mkdir -p "$stage/bin"
[ ${#carry_bins[@]} -eq 0 ] || cp -p "${carry_bins[@]}" "$stage/bin/"
cp -a .carry/lib "$stage/lib"
[ -d .carry/openmpi ] && cp -a .carry/openmpi "$stage/openmpi"
(cd "$stage" && find . -type f ! -name MANIFEST.sha256 -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum >MANIFEST.sha256)
tar -C "$stage" -cf - . | xz -9 -T2 >.carry/bundle.tar.xz.tmp
mv .carry/bundle.tar.xz.tmp .carry/bundle.tar.xz
printf 'bundle: %s files, %.1f MiB of binaries and libraries in %.1f MiB\n' "$(grep -c . "$stage/MANIFEST.sha256")" \
  "$(awk -v k="$(kib "$stage")" 'BEGIN{print k / 1024}')" "$(awk -v k="$(kib .carry/bundle.tar.xz)" 'BEGIN{print k / 1024}')"
rm -rf "$stage"
verdict "every call" $(( $(kib .carry/bundle.tar.xz) + tree ))
verdict "a call with the peers' wheels" $(( $(kib .carry/bundle.tar.xz .whl) + tree ))
cat <<CALLS
every call: carry .carry/bundle.tar.xz (and .whl for step peers); gpu-suite.sh unpacks it. The calls'
commands and their order: reports/results/nvidia-h100/logs/RUNS.md ("Next calls"), each with
  YOCO_GIT_SHA=$sha scripts/gpu-suite.sh --bundle .carry/bundle.tar.xz --only ... --deadline <its timeout - 30>
CALLS
exit $status
