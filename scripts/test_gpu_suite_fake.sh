#!/usr/bin/env bash
# scripts/gpu-suite.sh run for real (not --dry-run) on fake binaries, no GPU: what a device call
# brings back. A fake nvidia-smi, gtest binaries that pass, fail by name or sleep, and a yoco that
# writes the CSVs its options name. Checks: the sweep's file comes back beside the summary (before
# this test it never did: it was compared with a summary written after it); the logs come back as one
# tarball and no loose folder; a failed binary's tests are named; a failed smoke test's verdict is
# passed on and moves the runners off v6; a step cut by --deadline says so; a sweep beside other steps
# without --deadline is refused.
set -u
cd "$(dirname "$0")/.."
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
hdr='git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,phase,metric,value,unit,method,repeats,min,max,notes'
mkdir -p "$t/bin" "$t/path"
printf '#!/usr/bin/env bash\necho "NVIDIA H100 80GB HBM3, 580.159.04"\n' >"$t/path/nvidia-smi"
# A GoogleTest binary: FAKE_FAIL holds "binary" or "binary:filter" entries to fail; FAKE_SLEEP_<binary> seconds.
cat >"$t/fake_test" <<'EOF'
#!/usr/bin/env bash
n=$(basename "$0"); f=""
for a in "$@"; do case "$a" in --gtest_filter=*) f="${a#--gtest_filter=}" ;; esac; done
k="FAKE_SLEEP_$n"; [ -z "$f" ] && [ -n "${!k:-}" ] && sleep "${!k}"
for x in ${FAKE_FAIL:-}; do
  if [ "$x" = "$n" ] || [ "$x" = "$n:$f" ]; then
    echo "[  FAILED  ] Fake.${n}_broken (1 ms)"; echo "[  FAILED  ] 1 test, listed below:"; echo "[  FAILED  ] Fake.${n}_broken"
    exit 1
  fi
done
echo "[  PASSED  ] 1 test."
EOF
# yoco: --out FILE gets a row; bench --default-job writes <results-dir>/fake-card/sweep.csv; the
# gRet kernel it was given goes to FAKE_TRACE.
cat >"$t/bin/yoco" <<EOF
#!/usr/bin/env bash
out="" results="" job=""
while [ \$# -gt 0 ]; do
  case "\$1" in
    --out) out="\$2"; shift 2 ;;
    --results-dir) results="\$2"; shift 2 ;;
    --default-job) job=1; shift ;;
    *) shift ;;
  esac
done
echo "yoco YOCO_GRET_CHUNK=\${YOCO_GRET_CHUNK:-}" >>"\${FAKE_TRACE:-/dev/null}"
row='x,2026-11-29T00:00:00Z,vm,cuda,H100,d,yoco-3b,524288,1,0,prefill,prefill_latency_s,2.9,s,measured,2,2.8,3.0,n'
[ -z "\$out" ] || printf '%s\n%s\n' '$hdr' "\$row" >"\$out"
if [ -n "\$job" ]; then mkdir -p "\$results/fake-card" && printf '%s\n%s\n' '$hdr' "\$row" >"\$results/fake-card/sweep.csv"; fi
exit 0
EOF
chmod +x "$t/fake_test" "$t/bin/yoco" "$t/path/nvidia-smi"
for b in test_cuda_models test_gret_chunk test_flash_prefill test_gemm_swiglu; do cp "$t/fake_test" "$t/bin/$b"; done
suite() { PATH="$t/path:$PATH" scripts/gpu-suite.sh --bin "$t/bin" "$@"; }

# One call: tests (a failed model test, a failed v6 smoke test), the yoco-3b runs, the sweep.
FAKE_FAIL="test_cuda_models test_gret_chunk:GretChunkV6.Smoke" FAKE_TRACE="$t/trace" \
  suite --out "$t/out" --only tests,models-3b,sweep --tests 'test_cuda_models|test_gret_chunk' \
  --sweep-results "$t/results" --deadline 120 >"$t/out.log" 2>&1
sum="$t/out/summary.txt"
[ -f "$t/out/sweep.csv" ] && grep -q "^sweep file: $t/results/fake-card/sweep.csv" "$sum" &&
  ok "the sweep's file comes back beside the summary" || bad "no sweep.csv in \$OUT: $(ls "$t/out" | tr '\n' ' ')"
[ -f "$t/out/logs.tar.gz" ] && [ ! -e "$t/out/logs" ] && tar -tzf "$t/out/logs.tar.gz" | grep -q 'logs/test.test_cuda_models.log' &&
  tar -tzf "$t/out/logs.tar.gz" | grep -q 'logs/sweep.csv' &&
  ok "the logs come back as one tarball (the sweep's file in it too), no loose folder" ||
  bad "logs: $(ls "$t/out" | tr '\n' ' ')"
grep -q '^  failed test of test.test_cuda_models: Fake.test_cuda_models_broken$' "$sum" &&
  ok "a failed binary's tests are named" || bad "no failed test named: $(grep -A1 'test.test_cuda_models' "$sum")"
grep -q '^verdicts for a later call: YOCO_GRET_SKIP_V6=1' "$sum" && ok "a failed smoke test's verdict is passed on" ||
  bad "verdicts: $(grep verdicts "$sum")"
grep -q 'YOCO_GRET_CHUNK=v3' "$t/trace" && ! grep -q 'YOCO_GRET_CHUNK=$' "$t/trace" &&
  ok "with v6 left out the runners take v3 (or the kernel a run names)" || bad "yoco saw: $(sort -u "$t/trace" | tr '\n' ' ')"

# A step cut short by --deadline is not a timeout of its own, and says nothing of its kernel: no skip
# passed on, and nothing verified (the binary did not pass). (20 s: a step starts with 10 s left.)
FAKE_SLEEP_test_gret_chunk=60 suite --out "$t/cut" --only tests --tests test_gret_chunk --deadline 20 >/dev/null 2>&1
grep -qE '^test.test_gret_chunk +DEADLINE-CUT' "$t/cut/summary.txt" && ok "a step cut by --deadline says DEADLINE-CUT" ||
  bad "cut step: $(grep test_gret_chunk "$t/cut/summary.txt")"
grep -qx 'verdicts for a later call: none' "$t/cut/summary.txt" &&
  ok "a cut test binary sets no verdict, and verifies nothing" || bad "after a cut: $(grep verdicts "$t/cut/summary.txt")"

# No test binary here: the skips set for want of one are not passed on; the caller's word is.
mkdir -p "$t/tools" && cp "$t/bin/yoco" "$t/tools/"
YOCO_GRET_V7_VERIFIED=1 PATH="$t/path:$PATH" scripts/gpu-suite.sh --bin "$t/tools" --out "$t/tools-out" \
  --only models-3b --deadline 60 >/dev/null 2>&1
grep -qx 'verdicts for a later call: YOCO_GRET_V7_VERIFIED=1' "$t/tools-out/summary.txt" &&
  ok "a tools-only call passes on the caller's verdicts, not its own want of tests" ||
  bad "tools-only: $(grep verdicts "$t/tools-out/summary.txt")"

# A sweep without --deadline: refused before anything runs.
err=$(suite --out "$t/refused" --only sweep 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [[ "$err" == *"needs --deadline"* ]] && [ ! -e "$t/refused/summary.txt" ] &&
  ok "a sweep without --deadline -> $err" || bad "refusal: rc $rc, '$err'"
exit $fail
