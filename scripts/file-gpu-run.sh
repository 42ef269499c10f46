#!/usr/bin/env bash
# Files what one device call brought back (the folder of the `run` tool's files_at, or any copy of
# scripts/gpu-suite.sh's --out) as the next run of its card, in one step: a lent machine goes back
# after 30 s idle, so the time between two calls of a session is spent copying, not deciding how.
#
#   scripts/file-gpu-run.sh FROM SLUG [--device DIR] [--results DIR] [--commit SHA]
#
# FROM: the call's files (summary.txt at least). SLUG: what ran, e.g. tests-sanitize-bench; the run is
# named run-NN-SLUG, NN one past the highest run of the card's logs/ (two digits). --device: the
# card's folder under --results (default reports/results); by default from summary.txt's device line
# (NVIDIA H100 ... -> nvidia-h100, NVIDIA H200 -> nvidia-h200). --commit SHA: git-commits the run
# folder and logs/chunks.csv with the commit that ran in the subject (no commit without it).
#
# Copies every plain file of FROM into <card>/logs/run-NN-SLUG/ (a run folder that exists is refused:
# nothing filed is ever replaced), then appends the rows of FROM/chunks.csv, without their header, to
# <card>/logs/chunks.csv: that file gathers every measured prefill configuration across runs, so a
# run's own file must never replace it (its header must equal the gathered one's). Prints the run's
# summary. Exit 0 filed, 2 bad input (one line naming it); a failed copy leaves no half-filed run.
set -uo pipefail
die() { echo "file-gpu-run.sh: $*" >&2; exit 2; }

from="" slug="" device="" results="" commit_sha=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device|--results|--commit) [ $# -ge 2 ] || die "$1 needs a value" ;;
  esac
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --results) results="$2"; shift 2 ;;
    --commit) commit_sha="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *)
      if [ -z "$from" ]; then from="$1"; elif [ -z "$slug" ]; then slug="$1"; else die "one FROM and one SLUG, got '$1' too"; fi
      shift ;;
  esac
done
[ -n "$from" ] && [ -n "$slug" ] || die "usage: scripts/file-gpu-run.sh FROM SLUG [--device DIR] [--results DIR] [--commit SHA]"
# Paths as the caller gave them, then the checkout's root (the default results and git work there).
from=$(readlink -m -- "$from")
[ -z "$results" ] || results=$(readlink -m -- "$results")
cd "$(dirname "$0")/.." || die "cannot enter the checkout"
[ -n "$results" ] || results=reports/results
[ -d "$from" ] || die "FROM '$from' is not a folder"
[ -f "$from/summary.txt" ] || die "FROM '$from' has no summary.txt: not what gpu-suite.sh writes"
[[ "$slug" =~ ^[a-z0-9][a-z0-9.-]*$ ]] || die "SLUG '$slug': lower-case letters, digits, '.' and '-' only"
[ -z "$commit_sha" ] || [[ "$commit_sha" =~ ^[0-9a-f]{7,40}$ ]] || die "--commit '$commit_sha' is not a commit id"

if [ -z "$device" ]; then
  name=$(sed -n 's/^device: //p' "$from/summary.txt" | head -1)
  case "$name" in
    *H100*) device=nvidia-h100 ;;
    *H200*) device=nvidia-h200 ;;
    *) die "$from/summary.txt: device '${name:-none}' is no card this script knows: give --device" ;;
  esac
fi
logs="$results/$device/logs"
[ -d "$logs" ] || die "no folder '$logs' (--device or --results wrong?)"

last=$(find "$logs" -maxdepth 1 -type d -name 'run-[0-9]*' -printf '%f\n' | sed 's/^run-0*\([0-9][0-9]*\).*/\1/' |
  sort -n | tail -1)
run=$(printf 'run-%02d-%s' $((${last:-0} + 1)) "$slug")
dest="$logs/$run"
[ ! -e "$dest" ] || die "'$dest' exists: nothing filed is replaced"

gathered="$logs/chunks.csv"
if [ -f "$from/chunks.csv" ] && [ -f "$gathered" ]; then
  [ "$(head -1 "$from/chunks.csv")" = "$(head -1 "$gathered")" ] ||
    die "$from/chunks.csv: its header is not $gathered's (a schema change: append by hand)"
fi

# Into a folder beside the destination, renamed when whole: an interrupted copy files nothing.
tmp=$(mktemp -d "$logs/.filing.XXXXXX") || die "cannot write into '$logs'"
trap 'rm -rf "$tmp"' EXIT
n=0
for f in "$from"/*; do
  [ -f "$f" ] || continue
  cp -- "$f" "$tmp/" || die "cannot copy '$f'"
  n=$((n + 1))
done
chmod 755 "$tmp" && chmod 644 "$tmp"/* && mv -T "$tmp" "$dest" || die "cannot move the run into '$dest'"
trap - EXIT

added=0
if [ -f "$dest/chunks.csv" ]; then
  if [ -f "$gathered" ]; then
    added=$(tail -n +2 "$dest/chunks.csv" | grep -c .)
    tail -n +2 "$dest/chunks.csv" | grep . >>"$gathered"
  else
    cp "$dest/chunks.csv" "$gathered"
    added=$(tail -n +2 "$gathered" | grep -c .)
  fi
fi

if [ -f "$dest/chunks.csv" ]; then
  echo "filed $n files as $dest ($added rows of its chunks.csv appended to $gathered)"
else
  echo "filed $n files as $dest"
fi
grep -vE '^(libcupti|libraries added|mpirun for)' "$dest/summary.txt"

if [ -n "$commit_sha" ]; then
  passed=$(grep -cE '^[^ ]+ +pass ' "$dest/summary.txt")
  failed=$(grep -cE '^[^ ]+ +(FAIL|TIMEOUT|DEADLINE-CUT)' "$dest/summary.txt")
  # The run's paths only (--only): whatever else is staged in this checkout stays out of the commit.
  paths=("$dest")
  [ -f "$gathered" ] && paths+=("$gathered")
  git add -- "${paths[@]}" &&
    git commit -q --only -m "[results] $device $run at $commit_sha: $passed steps pass, $failed fail" \
      -m "What one device call brought back, filed by scripts/file-gpu-run.sh; RUNS.md says what it decides." \
      -- "${paths[@]}" ||
    die "the run is filed but the commit failed (commit it by hand)"
  echo "committed: $(git log --oneline -1)"
fi
