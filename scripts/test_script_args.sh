#!/usr/bin/env bash
# The user-facing scripts refuse bad arguments before any work, with exit 2 and
# one line naming the option: profile-point.sh (an option without its value was
# bash's "$2: unbound variable", exit 1; a --count that is not a number failed
# in ncu after a whole nsys profile) and ci-bench.sh (--help and a lone --update
# were taken for a PRESET; a misspelt --update ran the gate instead). Runs
# anywhere: the checks come before the scripts look for a binary or a GPU.
set -u
cd "$(dirname "$0")/.."
fail=0
expect_refusal() {  # script, expected words, then the arguments
  local script="$1" words="$2"; shift 2
  local err rc
  err=$(scripts/$script "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne 2 ] || [[ "$err" != *"$words"* ]] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then
    echo "FAIL: $script $* -> rc $rc, '$err' (want rc 2 and one line with '$words')"
    fail=1
  else
    echo "ok: $script $* -> $err"
  fi
}
for opt in --model --length --tool --kernel --count --out --bin; do
  expect_refusal profile-point.sh "$opt needs a value" "$opt"
done
expect_refusal profile-point.sh "--count: a whole number above 0, got 'x'" --count x --bin /nonexistent
expect_refusal profile-point.sh "--count: a whole number above 0, got '0'" --count 0 --bin /nonexistent
expect_refusal install-deps.sh "unknown option '--clnag'" --clnag
expect_refusal ci-bench.sh "unknown argument '--updat'" cpu --updat
expect_refusal ci-bench.sh "one PRESET, got 'b' too" a b
expect_refusal ci-bench.sh "no build/no-such-preset/bin/yoco" no-such-preset --update
out=$(scripts/ci-bench.sh --help 2>&1); rc=$?
if [ "$rc" -ne 0 ] || [[ "$out" != *"Usage: scripts/ci-bench.sh [PRESET] [--update]"* ]]; then
  echo "FAIL: ci-bench.sh --help -> rc $rc, '$out'"; fail=1
else
  echo "ok: ci-bench.sh --help"
fi
# Every script with options answers -h and --help with its header, exit 0, and makes nothing (ptxas-report.sh
# took --help for its OUT path and made a folder named after dirname's usage text in the checkout).
before=$(ls -A)
for s in build test install-deps fuzz ptxas-report ci-bench calibrate carry-gpu-build gpu-suite; do
  for h in -h --help; do
    out=$(scripts/$s.sh $h 2>&1); rc=$?
    first=$(sed -n 2p scripts/$s.sh | sed 's/^# //')
    if [ "$rc" -ne 0 ] || [ "$(printf '%s\n' "$out" | head -1)" != "$first" ]; then
      echo "FAIL: $s.sh $h -> rc $rc, '$(printf '%s' "$out" | head -1)' (want rc 0 and '$first')"; fail=1
    fi
  done
done
[ "$(ls -A)" = "$before" ] || { echo "FAIL: a --help made files: $(comm -13 <(echo "$before") <(ls -A) | tr '\n' ' ')"; fail=1; }
echo "ok: --help of every script"
expect_refusal ptxas-report.sh "unknown option '--bogus'" --bogus
[ ! -e "build/--help" ] && [ ! -e "build/no-such-preset" ] || { echo "FAIL: a refused call made a build folder"; fail=1; }
exit $fail
