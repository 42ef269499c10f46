#!/usr/bin/env bash
# gpu-suite.sh refuses what would waste a device call before it touches the
# machine: a misspelt step (it would run nothing), a deadline that is not whole
# seconds, an unknown option; each with exit 2 and one line naming it. Runs
# anywhere: the checks come before the script looks for a GPU.
set -u
cd "$(dirname "$0")/.."
fail=0
expect_refusal() {  # expected words, then the arguments
  local words="$1"; shift
  local err rc
  err=$(scripts/gpu-suite.sh "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne 2 ] || [[ "$err" != *"$words"* ]] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then
    echo "FAIL: gpu-suite.sh $* -> rc $rc, '$err' (want rc 2 and one line with '$words')"
    fail=1
  else
    echo "ok: gpu-suite.sh $* -> $err"
  fi
}
expect_refusal "unknown step 'models3b'" --only info,models3b
expect_refusal "unknown step 'chunk'" --only chunk --deadline 100
expect_refusal "--deadline takes whole seconds" --only info --deadline 5m
expect_refusal "unknown argument '--depth'" --depth 3
expect_refusal "--bundle: no file 'nowhere.tar.xz'" --bundle nowhere.tar.xz --only info
expect_refusal "--bundle and --bin both given" --bundle scripts/gpu-suite.sh --bin .carry/bin
expect_refusal "--tests needs a value" --only tests --tests
expect_refusal "unknown argument '--depth'" --depth
expect_refusal "--peers: unknown peer 'sdap'" --only peers --peers sdap,fla
expect_refusal "--tests: not a regular expression" --only tests --tests 'test_(gemv'
exit $fail
