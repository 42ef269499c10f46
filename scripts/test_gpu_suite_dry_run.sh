#!/usr/bin/env bash
# gpu-suite.sh --dry-run over every step, on the binaries of this machine's
# cuda build (no GPU needed): each step's command must pass its check (yoco's
# options and switches, the test filters selecting tests, the bench filter's
# names, the scripts compiling), so that a misspelt option costs a test here,
# not a step of a 15-minute device session. Then one planted mistake of each
# kind must fail its check.
#   scripts/test_gpu_suite_dry_run.sh BUILD_BIN   (the cuda preset's bin folder)
set -u
cd "$(dirname "$0")/.."
bin="${1:?usage: scripts/test_gpu_suite_dry_run.sh BUILD_BIN}"
[ -x "$bin/yoco" ] && [ -x "$bin/test_gret_chunk" ] || { echo "no cuda build in $bin"; exit 2; }
fail=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
all=info,tests,sanitize,dist,bench,peers,sass,models,models-3b,chunks,models-3b-short,profile,sweep,noise
touch "$out/marker"  # nothing in the tree may be newer than this after the dry runs
if scripts/gpu-suite.sh --dry-run --bin "$bin" --out "$out/all" --only "$all" --peers sdpa,fla,fla-check \
    >"$out/all.log" 2>&1; then
  echo "ok: every step's command passes its dry-run check ($(grep -c 'dry-ok' "$out/all/summary.txt") checked)"
else
  echo "FAIL: gpu-suite.sh --dry-run --only $all:"
  grep -E 'DRY-FAIL|MISSING' "$out/all/summary.txt"
  fail=1
fi
# Every step the suite has ran its check (a step skipped in --dry-run would hide its mistakes).
for want in test.test_cuda_models memcheck.test_gret_chunk dist.test_np1 dist.bench_np2 bench_cuda_kernels \
            peers.torch_sdpa models.small models.3b_long models.3b_long_per_layer models.3b_long_gemv \
            models.3b_long_v7 models.3b_long_candidates models.3b_long_fused_pairs models.3b_long_candidates_pairs \
            models.3b_long_tuned_16384 chunks.16384 models.3b \
            profile.ncu_gret_v6 profile.ncu_gret_v7 sweep noise; do
  grep -q "^$want " "$out/all/summary.txt" || { echo "FAIL: step $want was not checked"; fail=1; }
done

nbad=0
expect_dry_fail() {  # what, then gpu-suite's arguments (each run its own --out: a dry run wants an empty one)
  local what="$1" o="$out/bad$((++nbad))"; shift
  if scripts/gpu-suite.sh --dry-run --bin "$bin" --out "$o" "$@" >"$o.log" 2>&1 ||
     ! grep -qE 'DRY-FAIL|MISSING' "$o/summary.txt"; then
    echo "FAIL: $what passed the dry run"; fail=1
  else
    echo "ok: $what -> $(grep -m1 -E 'DRY-FAIL|MISSING' "$o/summary.txt" | tr -s ' ')"
  fi
}
expect_dry_fail "a bench filter naming no benchmark" --only bench --bench-filter gret,gemm_shpes
# bench_cuda_kernels selects by a part of the name: 'gret' runs gret_chunk and gret_decode.
if scripts/gpu-suite.sh --dry-run --bin "$bin" --out "$out/part" --only bench --bench-filter gret,gemm_shape \
    >"$out/part.log" 2>&1; then
  echo "ok: a bench filter of parts of names passes"
else
  echo "FAIL: --bench-filter gret,gemm_shape (parts of names, as bench_cuda_kernels selects) failed the dry run"
  grep -A5 '=== bench_cuda_kernels' "$out/part.log"; fail=1
fi
expect_dry_fail "a bad yoco option in a step" --only sweep --sweep-lengths 12Q
expect_dry_fail "a --tests that selects no test" --only tests --tests test_flsh
expect_dry_fail "a --sanitize-tests that selects none of --tests" --only sanitize --tests test_gemv --sanitize-tests gret
# --bundle: checked and unpacked into a folder of the dry run's own; .carry/ (carried, or the last
# unpack) is neither made nor touched.
mkdir -p "$out/bundle/bin" && cp "$bin/yoco" "$out/bundle/bin/yoco" &&
  (cd "$out/bundle" && sha256sum bin/yoco >MANIFEST.sha256) && tar -C "$out/bundle" -cf - . | xz -0 -T2 >"$out/b.tar.xz"
had_carry=$([ -e .carry ] && echo 1)
if scripts/gpu-suite.sh --dry-run --bundle "$out/b.tar.xz" --out "$out/bundled" --only models >"$out/bundled.log" 2>&1 &&
   grep -q '^models.small .*dry-ok' "$out/bundled/summary.txt" && grep -q "bin /tmp/gpu-suite-dry-carry" "$out/bundled/suite.log" &&
   { [ -n "$had_carry" ] || [ ! -e .carry ]; }; then
  echo "ok: --dry-run --bundle checks the bundle's yoco from a folder of its own"
else
  echo "FAIL: --dry-run --bundle:"; tail -5 "$out/bundled.log"; fail=1
fi
# Nothing written into the tree: no .pyc of the peers' scripts, nothing under .carry. (Only where
# nothing else writes: ctest runs the Python tests beside this one, and they write scripts' .pyc.)
written=$(find bench/peers .carry -newer "$out/marker" 2>/dev/null | head -5)
[ -z "$written" ] || { echo "FAIL: the dry runs wrote into the tree: $written"; fail=1; }

# --out holding a real run's files: refused (exit 2, one line), every file as it was.
mkdir -p "$out/real" && echo "a real run's summary" >"$out/real/summary.txt" && echo rows >"$out/real/models.csv"
err=$(scripts/gpu-suite.sh --dry-run --bin "$bin" --out "$out/real" --only models 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 2 ] && [[ "$err" == *"--out"*"not an empty folder"* ]] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
   [ "$(cat "$out/real/summary.txt")" = "a real run's summary" ] && [ "$(cat "$out/real/models.csv")" = rows ] &&
   [ "$(ls "$out/real" | wc -l)" -eq 2 ]; then
  echo "ok: a dry run's --out over a real run's files -> $err"
else
  echo "FAIL: --dry-run --out over a real run's files: rc $rc, '$err'; it holds $(ls "$out/real" | tr '\n' ' ')"; fail=1
fi
exit $fail
