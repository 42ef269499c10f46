#!/usr/bin/env bash
# ci-bench.sh's two compare passes (--gate) on doctored copies of a committed baseline: a point the
# baseline measured that no longer runs (its rows method failed, its ratio rows gone) must fail the
# gate; it passed when ONLY_BASE and NOT_RUN were no failures. Usage: scripts/test_ci_gate.sh PRESET
set -u
cd "$(dirname "$0")/.."
preset=${1:?usage: scripts/test_ci_gate.sh PRESET}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
base=reports/baselines/ci-cpu/gemm-105gflops-copy-23gbs.csv
fail=0
doctor() {  # OUT, then what to do to yoco-tiny's 4K run rows: failed | oom | drop-ratios | none
  /usr/bin/python3 - "$base" "$1" "$2" <<'PY'
import csv, sys
src, out, how = sys.argv[1:]
rows = list(csv.DictReader(open(src, newline="")))
keep = []
for r in rows:
    run = r["device"] != "analytic" and r["seq_len"] == "4096"
    if how in ("failed", "oom") and run and r["model"] == "yoco-tiny" and r["value"]:
        r.update(value="", min="", max="", method="failed" if how == "failed" else "out_of_memory")
    if how in ("failed", "oom", "drop-ratios") and run and r["model"] == "yoco-tiny vs transformer-tiny":
        continue
    keep.append(r)
with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
    w.writeheader(); w.writerows(keep)
PY
}
expect() {  # want-rc, case
  local want=$1 how=$2 out rc
  doctor "$tmp/$how.csv" "$how"
  out=$(scripts/ci-bench.sh "$preset" --gate "$base" "$tmp/$how.csv" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: --gate on a copy with yoco-tiny 4K '$how' -> rc $rc, want $want"; printf '%s\n' "$out" | grep -E 'result|ONLY|NOT_RUN' | head; fail=1
  else
    echo "ok: '$how' -> rc $rc ($(printf '%s\n' "$out" | grep -c 'result: FAIL') failing passes)"
  fi
}
expect 0 none
expect 1 failed
expect 1 oom
expect 1 drop-ratios
exit $fail
