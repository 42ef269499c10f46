"""scripts/decide.py on made-up calls: each rule's FLIP, KEEP and UNDECIDED, and its refusals. The rows carry the
phases and notes the benches and runners write (bench/cuda_micro/*.cpp, bench/harness/cuda_backend.cpp)."""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = ("git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,phase,metric,value,unit,"
          "method,repeats,min,max,notes").split(",")


def row(model, n, b, phase, metric, value, mn="", mx="", notes="", ts="2026-11-29T10:00:00Z", device="cuda"):
    return dict(zip(HEADER, ["abc", ts, "vm", device, "NVIDIA H100 80GB HBM3", "13.0", model, n, b, 0, phase, metric,
                             value, "s", "measured", 2, mn, mx, notes]))


def kernel(phase, t, model="yoco-3b", n=32768, b=1):
    return row(model, n, b, phase, "kernel_time_s", t)


def run(ts, extra, times, decode=None, mem1m=None, chunk=32768):
    """A yoco-3b run of 512K and 1M: prefill (median, min, max) per length, its notes' configuration words."""
    rows = []
    for n, (med, mn, mx) in zip((524288, 1048576), times):
        notes = "median of 2 after 1 warm-up; prefill chunk %d" % chunk + ("; " + extra if extra else "")
        rows.append(row("yoco-3b", n, 1, "prefill", "prefill_latency_s", med, mn, mx, notes, ts))
        if decode:
            rows.append(row("yoco-3b", n, 1, "decode", "decode_step_latency_s", decode[n == 1048576], "", "",
                            "median of 64 steps" + ("; " + extra if extra else ""), ts))
    if mem1m:
        rows.append(row("yoco-3b", 1048576, 1, "memory", "mem_total_bytes", mem1m, "", "",
                        "weights + kv_cache; prefill chunk 16384; " + extra, ts))
    return rows


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, HEADER)
        w.writeheader()
        w.writerows(rows)
    return path


def bench_rows(win=True):
    """Every bench pair the rules read, the candidate faster (win) or slower."""
    c, b = (1.0, 2.0) if win else (2.0, 1.0)
    rows = [
        kernel("add_rms_norm:rows 32768 d 3072, a layer's two norms, the residual stored once", c),
        kernel("add_rms_norm:rows 32768 d 3072, a layer's two norms, an add + RMSNorm each", b),
        kernel("gret_norm_gate:rows 32768 H24 D128, g in q|k|v|g rows, half-warp kernel", c),
        kernel("gret_norm_gate:rows 32768 H24 D128, g in q|k|v|g rows", b),
        kernel("ffn_up:fused gemm_swiglu, CTA pairs, rows 32768 d 3072 F 8192", c, n=32768),
        kernel("ffn_up:cublas W1|W3 + swiglu, rows 32768 d 3072 F 8192", b, n=32768),
        kernel("gemm_shapes:q|k|v|g d 3072, gemv (ours, YOCO_GEMV=1)", c, n=1),
        kernel("gemm_shapes:q|k|v|g d 3072, cublasGemmEx (the runners' call)", b, n=1),
    ]
    for n in (32768, 131072, 524288, 1048576):
        rows += [kernel("gret_chunk:C64 v6 P5 x2 (v6 plan)", b, n=n), kernel("gret_chunk:C64 v7 P5 x2 (v7 plan)", c, n=n),
                 kernel("gret_chunk:C64 v6 P11", 0.5 * b if win else 3.0, n=n),
                 kernel("gret_chunk:C64 v7 P11", 0.5 * c if win else 3.0, n=n)]
    for k, plan_t in ((6, b), (7, c)):
        rows += [kernel("gret_chunk:C64 v%d P2 (v%d plan)" % (k, k), plan_t, n=16384, b=2),
                 kernel("gret_chunk:C64 v%d P5" % k, plan_t if win else 9.0, n=16384, b=2),
                 kernel("gret_chunk:C64 v%d P6" % k, plan_t * 0.9, n=16384, b=2)]
    for name, one, two, alone in (("W1|W3 GEMM beside add + RMSNorm", 10.0, 8.5 if win else 9.9, 2.0),
                                  ("q|k|v|g GEMM beside SwiGLU", 10.0, 8.8 if win else 9.9, 2.0)):
        rows += [kernel("beside_gemm:%s, GEMM alone" % name, 8.0), kernel("beside_gemm:%s, pass alone" % name, alone),
                 kernel("beside_gemm:%s, one stream" % name, one), kernel("beside_gemm:%s, two streams" % name, two),
                 kernel("beside_gemm:%s, two streams, the pass at the greatest priority" % name, two + 0.1)]
    # The gRet pair is not in the rule: its rows hide nothing where the rule's pairs win and everything where
    # they lose, so the verdict would change if it counted.
    g = "q|k|v|g GEMM beside gRet chunk (library plan: v6 P5) H24 D128"
    rows += [kernel("beside_gemm:%s, GEMM alone" % g, 8.0), kernel("beside_gemm:%s, pass alone" % g, 2.0),
             kernel("beside_gemm:%s, one stream" % g, 11.0),
             kernel("beside_gemm:%s, two streams" % g, 11.0 if win else 9.0),
             kernel("beside_gemm:%s, two streams, the pass at the greatest priority" % g, 11.0 if win else 9.0)]
    return rows


SUMMARY_PASS = """device: NVIDIA H100 80GB HBM3, 580.159.04
smoke.gret_chunk_v7                              pass                 2s
smoke.gemm_swiglu                                pass                 1s
smoke.gemm_swiglu_pairs                          pass                 1s
test.test_kernels_vs_reference                   pass                 1s
test.test_cuda_models                            pass                50s
test.test_gemm_swiglu                            pass                 9s
test.test_gret_decode                            pass                12s
test.test_gret_chunk                             pass                90s
test.test_gemv                                   pass                 3s
memcheck.test_kernels_vs_reference               pass                 2s
memcheck.test_cuda_models                        pass                20s
memcheck.test_gemm_swiglu                        pass                 3s
racecheck.test_gemm_swiglu                       pass                 3s
synccheck.test_gemm_swiglu                       pass                 2s
"""


def summary_with(step, word, failed_tests=(), base=SUMMARY_PASS):
    """`base` with `step`'s line saying `word`, and under it gpu-suite's line for each failed test it names."""
    lines = base.replace("%-48s pass" % step, "%-48s %-16s" % (step, word)).splitlines(True)
    at = next(i for i, x in enumerate(lines) if x.startswith(step + " "))
    lines[at + 1:at + 1] = ["  failed test of %s: %s\n" % (step, t) for t in failed_tests]
    return "".join(lines)


class Decide(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def decide(self, *args):
        p = subprocess.run([sys.executable, "-B", os.path.join(HERE, "decide.py"), *args], capture_output=True,
                           text=True)
        return p.returncode, p.stdout, p.stderr

    def summary_file(self, name, text=SUMMARY_PASS):
        """A second call's summary.txt, for the rules that read several."""
        path = os.path.join(self.d, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def block(self, out, title):
        """The verdict word of the rule whose block starts with title."""
        for line in out.splitlines():
            if line.startswith(title):
                return line.split(": ", 1)[1]
        self.fail("no block %r in:\n%s" % (title, out))

    def files(self, win=True, summary=SUMMARY_PASS, models=None):
        k = write(os.path.join(self.d, "kernels.csv"), bench_rows(win))
        if models is None:
            fast = [(2.80, 2.79, 2.81), (5.60, 5.59, 5.61)]
            slow = [(2.99, 2.98, 3.00), (5.99, 5.98, 6.00)]
            cand = fast if win else [(2.94, 2.93, 2.955), (5.89, 5.88, 5.905)]
            models = (run("t0", "", [(2.95, 2.94, 2.96), (5.90, 5.89, 5.91)], decode=(9.0e-3, 15.0e-3))
                      + run("t1", "residual stored once a layer", cand)
                      + run("t2", "FFN up half fused in CTA pairs", cand if win else slow)
                      + run("t3", "GEMMs of 4 rows or fewer as a GEMV", [(2.95, 2.94, 2.96)] * 2,
                            decode=(8.0e-3, 14.0e-3) if win else (9.5e-3, 15.5e-3))
                      + run("t4", "GEMM algorithms tuned at first use", [(2.97, 2.96, 2.98), (5.95, 5.94, 5.96)],
                            mem1m=12.36e9 if win else 12.9e9, chunk=16384))
        m = write(os.path.join(self.d, "models.csv"), models)
        s = os.path.join(self.d, "summary.txt")
        with open(s, "w") as f:
            f.write(summary)
        return ["--kernels", k, "--models", m, "--summary", s]

    # Each rule's block title and its verdict when every candidate wins / loses.
    VERDICTS = (("kResidualPerLayerByDefault", "FLIP", "KEEP"), ("kFfnUpFusedByDefault", "FLIP", "KEEP"),
                ("kNormGateHalfWarpByDefault", "FLIP", "KEEP"), ("v7 as the library's plan", "FLIP", "KEEP"),
                ("kGemvByDefault", "FLIP", "KEEP"), ("Chunk 16384 with tuned GEMMs", "MET", "NOT MET"),
                ("Passes under the GEMMs", "WRITE the two-step prefill",
                 "GOAL OUT OF REACH by scheduling with these kernels"))

    def test_every_rule_flips_when_its_candidates_win(self):
        rc, out, err = self.decide(*self.files(win=True))
        self.assertEqual(rc, 0, err)
        for title, win, _ in self.VERDICTS:
            self.assertEqual(self.block(out, title), win, title)
        self.assertIn("Both the residual stored once a layer and the FFN in CTA pairs flip", out)
        # v7 won its rule, so P 11 is asked of v7.
        self.assertEqual(self.block(out, "P 11 (two waves) in the v7 planner"), "FLIP")
        self.assertIn("the fastest run is 2.8000 s", out)
        self.assertIn("gRet chunk (library plan: v6 P5) H24 D128 (not in the rule): one stream 1.100x", out)
        self.assertIn(": met", out)

    def test_every_rule_keeps_when_its_candidates_lose(self):
        rc, out, err = self.decide(*self.files(win=False))
        self.assertEqual(rc, 0, err)
        for title, _, lose in self.VERDICTS:
            self.assertEqual(self.block(out, title), lose, title)
        # Ranges that overlap keep the default even where the median is faster.
        self.assertIn("ranges not apart", out)
        self.assertEqual(self.block(out, "P 11 (two waves) in the v6 planner"), "KEEP")

    def test_a_failed_test_keeps_a_winning_candidate(self):
        summary = SUMMARY_PASS.replace("test.test_gemm_swiglu                            pass",
                                       "test.test_gemm_swiglu                            FAIL(rc=1)")
        rc, out, _ = self.decide(*self.files(win=True, summary=summary))
        self.assertEqual(rc, 0)
        self.assertEqual(self.block(out, "kFfnUpFusedByDefault"), "KEEP")
        self.assertIn("failed: test.test_gemm_swiglu", out)
        # A sanitizer's failure keeps it too (issue 34: compute-sanitizer clean).
        summary = SUMMARY_PASS.replace("racecheck.test_gemm_swiglu                       pass",
                                       "racecheck.test_gemm_swiglu                       FAIL(rc=9)")
        rc, out, _ = self.decide(*self.files(win=True, summary=summary))
        self.assertEqual(self.block(out, "kFfnUpFusedByDefault"), "KEEP")
        self.assertEqual(self.block(out, "kResidualPerLayerByDefault"), "FLIP")

    def test_a_failed_smoke_test_keeps_its_kernel_though_its_skipped_tests_passed(self):
        # gpu-suite exports the kernel's skip variable when its smoke test fails: its other tests then skip and pass,
        # and a later call's run of the smoke test may pass. The failure in any call keeps the default.
        for smoke, title in (("smoke.gemm_swiglu_pairs", "kFfnUpFusedByDefault"),
                             ("smoke.gret_chunk_v7", "v7 as the library's plan")):
            rc, out, _ = self.decide(*self.files(win=True, summary=summary_with(smoke, "FAIL(rc=1)")),
                                     self.summary_file("later.txt"))
            self.assertEqual(rc, 0)
            self.assertEqual(self.block(out, title), "KEEP", smoke)
            self.assertIn("failed: " + smoke, out)

    def test_a_step_cut_by_the_deadline_decides_nothing(self):
        summary = summary_with("memcheck.test_cuda_models", "DEADLINE-CUT(12s)")
        rc, out, _ = self.decide(*self.files(win=True, summary=summary))
        self.assertEqual(rc, 0)
        self.assertEqual(self.block(out, "kResidualPerLayerByDefault"), "UNDECIDED")
        self.assertIn("cut short by --deadline: memcheck.test_cuda_models", out)
        self.assertEqual(self.block(out, "kFfnUpFusedByDefault"), "FLIP")  # it asks no memcheck of the models

    def test_a_shared_binarys_failure_counts_only_against_the_rules_it_touches(self):
        def failing(*names):
            return summary_with("test.test_cuda_models", "FAIL(rc=1)", names)
        # The GEMV's own test: its rule keeps, the others flip.
        rc, out, _ = self.decide(*self.files(win=True, summary=failing("CudaModelGemv.TheSameLogits")))
        self.assertEqual(self.block(out, "kGemvByDefault"), "KEEP")
        self.assertEqual(self.block(out, "kResidualPerLayerByDefault"), "FLIP")
        self.assertEqual(self.block(out, "kFfnUpFusedByDefault"), "FLIP")
        self.assertIn("failed outside the rule's tests: test.test_cuda_models (only CudaModelGemv.TheSameLogits)",
                      out)
        # A common model test is every rule's; the reservation's allocation count is none's.
        rc, out, _ = self.decide(*self.files(win=True, summary=failing(
            "Small/CudaModelTest.GraphAndEagerDecodeAreBitIdentical/yoco_small")))
        for title in ("kGemvByDefault", "kResidualPerLayerByDefault", "kFfnUpFusedByDefault"):
            self.assertEqual(self.block(out, title), "KEEP", title)
        rc, out, _ = self.decide(*self.files(win=True, summary=failing(
            "Small/CudaModelTest.AReservedGenerationIsKeptByItsPrefill/yoco_small")))
        for title in ("kGemvByDefault", "kResidualPerLayerByDefault", "kFfnUpFusedByDefault"):
            self.assertEqual(self.block(out, title), "FLIP", title)
        # No names (a crash or a timeout): every rule that asks for the binary keeps.
        rc, out, _ = self.decide(*self.files(win=True, summary=failing()))
        for title in ("kGemvByDefault", "kResidualPerLayerByDefault", "kFfnUpFusedByDefault"):
            self.assertEqual(self.block(out, title), "KEEP", title)

    def test_names_narrow_only_a_test_binarys_own_failures(self):
        # Names narrow a failure only where GoogleTest failed them (FAIL(rc=1)) in every summary that failed the
        # step: a binary that failed one test and then hung, a sanitizer's report, a name-less failure in another
        # call each count against every rule that asks for the step.
        name = ["CudaModelGemv.TheSameLogits"]
        for step, word in (("test.test_cuda_models", "TIMEOUT(150s)"), ("memcheck.test_cuda_models", "FAIL(rc=9)")):
            rc, out, _ = self.decide(*self.files(win=True, summary=summary_with(step, word, name)))
            self.assertEqual(self.block(out, "kResidualPerLayerByDefault"), "KEEP", step + " " + word)
        named = summary_with("test.test_cuda_models", "FAIL(rc=1)", name)
        crashed = self.summary_file("crashed.txt", summary_with("test.test_cuda_models", "FAIL(rc=139)"))
        rc, out, _ = self.decide(*self.files(win=True, summary=named), crashed)
        self.assertEqual(self.block(out, "kResidualPerLayerByDefault"), "KEEP")

    def test_a_step_cut_in_one_call_and_passed_in_another_passed(self):
        cut = summary_with("memcheck.test_cuda_models", "DEADLINE-CUT(12s)")
        rc, out, _ = self.decide(*self.files(win=True, summary=cut), self.summary_file("later.txt"))
        self.assertEqual(self.block(out, "kResidualPerLayerByDefault"), "FLIP")

    def test_missing_rows_or_tests_leave_rules_undecided(self):
        k = write(os.path.join(self.d, "k.csv"), [kernel("swiglu:rows 32768", 1.0)])
        rc, out, err = self.decide("--kernels", k)
        self.assertEqual(rc, 0, err)
        for title in ("kResidualPerLayerByDefault", "kFfnUpFusedByDefault", "kNormGateHalfWarpByDefault",
                      "v7 as the library's plan", "kGemvByDefault", "Passes under the GEMMs"):
            self.assertEqual(self.block(out, title), "UNDECIDED", title)
        # Winning rows without the tests' summary decide nothing either.
        args = self.files(win=True)
        rc, out, _ = self.decide(*args[:4])
        self.assertEqual(self.block(out, "kResidualPerLayerByDefault"), "UNDECIDED")
        self.assertIn("not in the summaries", out)

    def test_bad_input_exits_2_with_one_line(self):
        for args in (["--kernels", os.path.join(self.d, "none.csv")], ["--bogus"], ["x.csv"], []):
            rc, out, err = self.decide(*args)
            self.assertEqual(rc, 2, args)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
        bad = os.path.join(self.d, "bad.csv")
        with open(bad, "w") as f:
            f.write("not,a,result\n1,2,3\n")
        rc, _, err = self.decide("--kernels", bad)
        self.assertEqual(rc, 2)
        self.assertIn("bad.csv", err)


if __name__ == "__main__":
    unittest.main()
