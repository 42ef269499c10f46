#!/usr/bin/env bash
# scripts/file-gpu-run.sh on made-up calls in a scratch results tree (no GPU): the run's number and
# folder, the card from the summary, chunks.csv's rows appended (never replaced), its refusals, and
# --commit in a scratch repository (the run's paths alone committed).
set -u
cd "$(dirname "$0")/.."
fail=0
t=$(readlink -f "$(mktemp -d)")  # file-gpu-run.sh names paths resolved (readlink -m)
trap 'rm -rf "$t"' EXIT
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
hdr='git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,phase,metric,value,unit,method,repeats,min,max,notes'
mkdir -p "$t/results/nvidia-h100/logs/run-07-old" "$t/results/nvidia-h100/logs/run-21-older" "$t/results/nvidia-h200/logs" "$t/call"
printf '%s\nold,row\n' "$hdr" >"$t/results/nvidia-h100/logs/chunks.csv"
printf 'device: NVIDIA H100 80GB HBM3, 580.159.04\nlibcupti for --cupti: x\ntest.test_gemv   pass   3s\nmodels.3b_long   FAIL(rc=1)   9s\n' >"$t/call/summary.txt"
printf '%s\nnew,row1\nnew,row2\n' "$hdr" >"$t/call/chunks.csv"
echo log >"$t/call/suite.log"
mkdir "$t/call/not-a-file"

out=$(scripts/file-gpu-run.sh "$t/call" tests-bench --results "$t/results" 2>&1); rc=$?
d="$t/results/nvidia-h100/logs/run-22-tests-bench"
if [ $rc -eq 0 ] && [ -f "$d/summary.txt" ] && [ -f "$d/suite.log" ] && [ -f "$d/chunks.csv" ] && [ ! -e "$d/not-a-file" ]; then
  ok "filed as run-22 (one past run-21), every plain file copied: $(echo "$out" | head -1)"
else
  bad "first filing: rc $rc, $(ls "$t/results/nvidia-h100/logs")"; echo "$out"
fi
want=$(printf '%s\nold,row\nnew,row1\nnew,row2' "$hdr")
[ "$(cat "$t/results/nvidia-h100/logs/chunks.csv")" = "$want" ] && ok "chunks.csv: the call's rows appended after the old, one header" ||
  bad "chunks.csv is: $(cat "$t/results/nvidia-h100/logs/chunks.csv")"
echo "$out" | grep -q 'libcupti' && bad "the printed summary keeps the library lines" || ok "the summary printed without the library lines"
ls -a "$t/results/nvidia-h100/logs" | grep -q '^\.filing' && bad "a temporary folder was left" || ok "no temporary folder left"

# The H200 from its summary; a first run there; no chunks.csv in the call.
mkdir -p "$t/call2" && printf 'device: NVIDIA H200, 580.159.04\n' >"$t/call2/summary.txt"
scripts/file-gpu-run.sh "$t/call2" models-3b --results "$t/results" >/dev/null 2>&1 &&
  [ -f "$t/results/nvidia-h200/logs/run-01-models-3b/summary.txt" ] && [ ! -e "$t/results/nvidia-h200/logs/chunks.csv" ] &&
  ok "the H200 from the summary, run-01 there, no chunks.csv made from nothing" || bad "H200 filing"

refused() {  # what, the words its one line must hold, then the arguments; must exit 2 with that one line
  local what="$1" words="$2"; shift 2
  local err; err=$(scripts/file-gpu-run.sh "$@" 2>&1 >/dev/null); local rc=$?
  if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == "file-gpu-run.sh: "*"$words"* ]]; then
    ok "$what -> $err"
  else
    bad "$what: rc $rc, '$err' (want rc 2 and one line with '$words')"
  fi
}
refused "no SLUG" "usage: scripts/file-gpu-run.sh FROM SLUG" "$t/call"
refused "a third argument" "one FROM and one SLUG, got 'y' too" "$t/call" x y
refused "an option with no value" "--results needs a value" "$t/call" x --results
refused "no summary.txt" "FROM '$t/results' has no summary.txt" "$t/results" x --results "$t/results"
refused "a missing FROM" "FROM '$t/nowhere' is not a folder" "$t/nowhere" x --results "$t/results"
refused "a SLUG with a space" "SLUG 'a b': lower-case letters" "$t/call" "a b" --results "$t/results"
refused "an unknown option" "unknown option '--force'" "$t/call" x --results "$t/results" --force
mkdir -p "$t/call3" && printf 'device: NVIDIA B200\n' >"$t/call3/summary.txt"
refused "an unknown card in the summary" "device 'NVIDIA B200' is no card this script knows" "$t/call3" x --results "$t/results"
refused "a --device with no folder" "no folder '$t/results/nvidia-b200/logs'" "$t/call" x --results "$t/results" --device nvidia-b200
refused "--commit that is no commit id" "--commit 'HEAD~1' is not a commit id" "$t/call" x --results "$t/results" --commit 'HEAD~1'
# A plain file where the next run's folder would go (the runs are counted among folders only).
touch "$t/results/nvidia-h100/logs/run-23-taken"
refused "a next run that exists" "'$t/results/nvidia-h100/logs/run-23-taken' exists: nothing filed is replaced" \
  "$t/call" taken --results "$t/results"
rm "$t/results/nvidia-h100/logs/run-23-taken"
before=$(cat "$t/results/nvidia-h100/logs/chunks.csv")
printf 'other,header\nr\n' >"$t/call/chunks.csv"
refused "a chunks.csv of another header" "$t/call/chunks.csv: its header is not $t/results/nvidia-h100/logs/chunks.csv's" \
  "$t/call" x --results "$t/results"
[ "$(cat "$t/results/nvidia-h100/logs/chunks.csv")" = "$before" ] && [ ! -e "$t/results/nvidia-h100/logs/run-23-x" ] &&
  ok "the refused call filed nothing and left chunks.csv as it was" || bad "a refused call changed the tree"
# Relative paths are the caller's, not the checkout's.
mkdir -p "$t/rel/call4" && printf 'device: NVIDIA H100 80GB HBM3\n' >"$t/rel/call4/summary.txt"
(cd "$t/rel" && "$OLDPWD/scripts/file-gpu-run.sh" call4 rel --results ../results >/dev/null 2>&1) &&
  [ -f "$t/results/nvidia-h100/logs/run-23-rel/summary.txt" ] && ok "relative FROM and --results taken from the caller's folder" ||
  bad "relative paths: $(ls "$t/results/nvidia-h100/logs")"
# --commit in a scratch repository: the run and chunks.csv committed, another staged change left staged.
r="$t/repo"
mkdir -p "$r/scripts" "$r/reports/results/nvidia-h100/logs" && cp scripts/file-gpu-run.sh "$r/scripts/" &&
  printf '%s\nold,row\n' "$hdr" >"$r/reports/results/nvidia-h100/logs/chunks.csv" && echo a >"$r/other.txt" &&
  git -C "$r" init -q && git -C "$r" -c user.name=t -c user.email=t@t add -A &&
  git -C "$r" -c user.name=t -c user.email=t@t commit -qm init && echo b >"$r/other.txt" && git -C "$r" add other.txt
printf '%s\nnew,row1\n' "$hdr" >"$t/call/chunks.csv"
if GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t \
     "$r/scripts/file-gpu-run.sh" "$t/call" committed --commit abcdef1 >/dev/null 2>&1 &&
   git -C "$r" show --stat HEAD | grep -q 'run-01-committed/summary.txt' &&
   git -C "$r" show --stat HEAD | grep -q 'logs/chunks.csv' && ! git -C "$r" show --stat HEAD | grep -q other.txt &&
   [ "$(git -C "$r" diff --cached --name-only)" = other.txt ]; then
  ok "--commit commits the run and chunks.csv only: $(git -C "$r" log --format=%s -1)"
else
  bad "--commit: $(git -C "$r" log --stat -1 2>&1 | tail -5); staged: $(git -C "$r" diff --cached --name-only)"
fi
exit $fail
