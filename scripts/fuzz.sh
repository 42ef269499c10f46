#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (ASan + UBSan) in
# build/fuzz and runs each for SECONDS (default 60) on a scratch copy of its
# committed seed corpus (tests/fuzz/corpus/<target>/, never grown by a run).
# Inputs saved under tests/fuzz/findings/<target>/ are replayed first: a known
# finding that still reproduces fails the run like a new one.
# Prints executions and findings per target; exits 1 on any finding.
#   scripts/fuzz.sh [SECONDS]        FUZZ_TARGETS="fuzz_config ..." to choose
# CI runs it at 20 s a target (scripts/test.sh ci); clang is installed here,
# when missing, and is not needed by the plain build.
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
script_help_if_asked "$@"
cd "$(dirname "$0")/.."

secs=${1:-60}
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS]  (a positive integer, default 60)" >&2; exit 2; }
targets=(${FUZZ_TARGETS:-fuzz_safetensors fuzz_config fuzz_results_csv fuzz_npy})

# The suite's packages plus clang and its runtimes, only those missing.
scripts/install-deps.sh --clang

build=build/fuzz
echo "[fuzz] building ${targets[*]} in $build (clang++ -fsanitize=fuzzer,address,undefined)"
make -s -f tests/fuzz/Makefile BUILD="$build" -j "${YOCO_JOBS:-$(nproc)}" "${targets[@]/#/$build/}"

dict_for() {
  case "$1" in fuzz_results_csv) echo tests/fuzz/csv.dict ;; fuzz_npy) echo tests/fuzz/npy.dict ;; *) echo tests/fuzz/json.dict ;; esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
summary=()
for t in "${targets[@]}"; do
  bin=$build/$t
  work=$build/run/$t
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  found=0

  # Known findings first (regression check), one run each.
  if compgen -G "tests/fuzz/findings/$t/*" >/dev/null; then
    for f in tests/fuzz/findings/"$t"/*; do
      if ! "$bin" -runs=1 "$f" >"$work/replay.log" 2>&1; then
        echo "[fuzz] $t: known finding still reproduces: $f"
        grep -m3 -E 'ERROR|FINDING|runtime error|terminate|what\(\)' "$work/replay.log" | sed 's/^/[fuzz]   /' || true
        found=$((found + 1))
      fi
    done
  fi

  cp -r tests/fuzz/corpus/"$t"/. "$work/corpus/"
  echo "[fuzz] $t: ${secs}s on a copy of tests/fuzz/corpus/$t ($(ls "$work/corpus" | wc -l) seeds)"
  rc=0
  "$bin" "$work/corpus" -max_total_time="$secs" -print_final_stats=1 -dict="$(dict_for "$t")" \
    -artifact_prefix="$work/artifacts/" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    >"$work/fuzz.log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$' | tail -1 || true)
  [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$work/fuzz.log" | tail -1 | tr -d '#' || true)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$work/fuzz.log"  | tail -1 || true)
  if [ "$rc" -ne 0 ] || compgen -G "$work/artifacts/*" >/dev/null; then
    found=$((found + 1))
    echo "[fuzz] $t: FINDING (exit $rc), log $work/fuzz.log"
    grep -m5 -E 'ERROR:|FINDING|runtime error|terminate|what\(\)|SUMMARY' "$work/fuzz.log" | sed 's/^/[fuzz]   /' || true
    for a in "$work"/artifacts/*; do [ -e "$a" ] && echo "[fuzz]   input: $a"; done
  fi
  summary+=("$(printf '%-18s %12s execs  %-22s %s' "$t" "${execs:-?}" "${cov:-}" \
               "$([ "$found" -eq 0 ] && echo 'no findings' || echo "$found finding(s)")")")
  [ "$found" -eq 0 ] || failed=1
done

echo "[fuzz] summary (${secs}s per target):"
printf '[fuzz]   %s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "[fuzz] findings: inputs under $build/run/<target>/artifacts/; keep one under tests/fuzz/findings/<target>/ and add a regression test" >&2
  exit 1
fi
echo "[fuzz] no findings"
