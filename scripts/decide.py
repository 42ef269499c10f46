#!/usr/bin/python3
"""Issue 34's and 14's pending defaults, decided from a GPU session's files by the rules written before any of
them ran (reports/results/nvidia-h100/logs/RUNS.md, "Next calls"; each switch's notes). One block per rule: the
rows it reads, and FLIP (the default changes), KEEP (it stays), or UNDECIDED with what is missing. It decides
nothing else and changes no file: flipping a constant stays a commit of its own, with its numbers.

    scripts/decide.py [--kernels KERNELS.csv ...] [--models MODELS.csv ...] [--summary summary.txt ...]

--kernels: bench_cuda_kernels' rows (a call's kernels.csv); --models: `yoco bench --device cuda` rows (a call's
models.csv or chunks.csv: the runs of step models-3b, told apart by the configuration their prefill rows name);
--summary: gpu-suite's summary.txt of the calls whose tests the rules ask for (a step counts as passed when a
line of it says pass and none says FAIL or TIMEOUT; a step cut short by --deadline, DEADLINE-CUT, counts as not
run). A kernel's smoke test counts as its test: where it failed, its other tests were skipped (and passed). In a
binary every rule shares (test_cuda_models), a failure counts against a rule only if one of the failed tests (the
summary's "failed test of STEP: NAME" lines) is the rule's own or the runners' common ones; with no names (a
crash, a timeout) it counts against every rule. Pairs of rows are taken from one file, never across calls, as the
rules ask ("in the same call").

Exit status: 0 done (whatever the verdicts); 2 a file that cannot be read (named, one line).
"""
import fnmatch
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from result_rows import load, num, run as run_main  # noqa: E402
from yocoreport.chunks import DEFAULT_CHUNK, config_of, label  # noqa: E402

LONG = (524288, 1048576)
BENCH_LENGTHS = (32768, 131072, 524288, 1048576)
MUST_512K_S = 2.9
PAPER_1M_BYTES = 12.4e9
GEMV_NOTE = "GEMMs of 4 rows or fewer as a GEMV"  # cuda/runner/launch_count.hpp, kGemvNote
CHUNK_VARIANT = re.compile(r"^C64 v(?P<k>\d) P(?P<p>\d+)(?: x\d+)?(?P<plan> \(v\d plan\))?$")


def usage(msg):
    print("decide: %s; usage: scripts/decide.py [--kernels F ...] [--models F ...] [--summary F ...]" % msg,
          file=sys.stderr)
    return 2


def parse_args(argv):
    files = {"--kernels": [], "--models": [], "--summary": []}
    key = None
    for a in argv:
        if a in files:
            key = a
        elif a.startswith("-"):
            return None, "unknown option %s" % a
        elif key is None:
            return None, "a file before --kernels, --models or --summary: %s" % a
        else:
            files[key].append(a)
    if not any(files.values()):
        return None, "no file given"
    return files, None


class Tests:
    """The steps of the summaries (test.X, memcheck.X, smoke.X, ...), each summary's word for each (pass, FAIL(rc=N),
    TIMEOUT(...), DEADLINE-CUT(...)) and the failed tests it named under that step."""

    def __init__(self, summaries):
        self.records = defaultdict(list)  # step -> [(word, {failed test names})], one per summary that has it
        for path in summaries:
            try:
                lines = open(path, encoding="utf-8").read().splitlines()
            except OSError as e:
                print("decide: %s: %s" % (path, e.strerror), file=sys.stderr)
                sys.exit(2)
            mine = {}
            for line in lines:
                m = re.match(r"^(\S+)\s+(pass|FAIL\S*|TIMEOUT\S*|DEADLINE-CUT\S*)\s", line)
                if m:
                    mine[m.group(1)] = (m.group(2), set())
                    continue
                m = re.match(r"^  failed test of (\S+): (\S+)$", line)
                if m and m.group(1) in mine:
                    mine[m.group(1)][1].add(m.group(2))
            for step, rec in mine.items():
                self.records[step].append(rec)

    @staticmethod
    def failed_word(word):
        return word.startswith("FAIL") or word.startswith("TIMEOUT")

    def status(self, step):
        """False: failed in some summary; True: else passed in one; None: only cut short by --deadline. Ask only of a
        step in tests.records (records is a defaultdict: asking of another adds it)."""
        words = [w for w, _ in self.records[step]]
        if any(self.failed_word(w) for w in words):
            return False
        return True if "pass" in words else None

    def failures_named(self, step):
        """The failed tests' names where every failure of the step was a test binary's own (FAIL(rc=1): GoogleTest's
        failed tests, each named); None where any was something else (a timeout, a crash, a sanitizer's report, no
        name), which says nothing of which test it was."""
        names = set()
        for word, named in self.records[step]:
            if not self.failed_word(word):
                continue
            if not step.startswith("test.") or word != "FAIL(rc=1)" or not named:
                return None
            names |= named
        return names


# The runners' common model tests: a failure there is every rule's (the default runners against the reference,
# and their default layout of the sublayers' buffers). CudaModelTest's reservation test is not: it counts
# allocations, and RUNS.md's rules read the numbers of a call where it failed.
COMMON_MODEL_TESTS = ("*CudaModelTest.*", "*CudaModelSublayers.*")
NOT_ABOUT_THE_NUMBERS = ("*CudaModelTest.AReservedGenerationIsKeptByItsPrefill*",
                         "*CudaModelSublayers.AnUnknownChoiceIsAClearError*")


def need_tests(tests, names, own=None):
    """(all passed, words): each name a step of the summaries (test.test_gemv ...); one never run is missing, one cut
    short by --deadline in every summary that has it is missing too. own: {step: fnmatch patterns of the rule's own
    tests} for a binary the rules share: a failure there counts only where a failed test is the rule's own or a
    common one, and only where every failure of the step named its tests (Tests.failures_named)."""
    own = own or {}
    missing = [n for n in names if n not in tests.records]
    cut = [n for n in names if n in tests.records and tests.status(n) is None]
    failed, outside = [], []
    for n in names:
        if n not in tests.records or tests.status(n) is not False:
            continue
        names_failed = tests.failures_named(n) if n in own else None
        if names_failed is None:
            failed.append(n)
            continue
        mine = sorted(t for t in names_failed
                      if any(fnmatch.fnmatchcase(t, p) for p in list(own[n]) + list(COMMON_MODEL_TESTS)) and
                      not any(fnmatch.fnmatchcase(t, p) for p in NOT_ABOUT_THE_NUMBERS))
        if mine:
            failed.append("%s (%s)" % (n, ", ".join(mine)))
        else:
            outside.append("%s (only %s)" % (n, ", ".join(sorted(names_failed))))
    if failed:
        return False, "failed: " + ", ".join(failed)
    if missing or cut:
        return None, "; ".join(w for w in ("not in the summaries: " + ", ".join(missing) if missing else "",
                                           "cut short by --deadline: " + ", ".join(cut) if cut else "") if w)
    words = "passed: " + ", ".join(n for n in names if tests.status(n) is True)
    return True, words + ("; failed outside the rule's tests: " + "; ".join(outside) if outside else "")


class Bench:
    """Kernel times of one kernels.csv: (model, seq_len, batch, phase) -> seconds."""

    def __init__(self, path):
        self.path = path
        self.t = {}
        for r in load([path], "decide"):
            if r["metric"] == "kernel_time_s" and num(r.get("value")) is not None:
                self.t[(r["model"], int(r["seq_len"]), int(r["batch"]), r["phase"])] = num(r["value"])

    def get(self, model, n, b, phase):
        return self.t.get((model, n, b, phase))

    def phases(self, fam):
        return [k for k in self.t if k[3].startswith(fam + ":")]


class Runs:
    """The model runs of one file: (timestamp, configuration) -> {(seq_len, phase, metric): (value, min, max)}."""

    def __init__(self, path):
        self.path = path
        by_ts = defaultdict(dict)
        notes = defaultdict(list)
        for r in load([path], "decide"):
            if r.get("device") == "analytic" or r["model"] != "yoco-3b" or int(r["batch"]) != 1:
                continue
            ts = r.get("timestamp", "")
            notes[ts].append(r.get("notes", ""))
            by_ts[ts][(int(r["seq_len"]), r["phase"], r["metric"])] = (num(r["value"]), num(r.get("min")),
                                                                       num(r.get("max")))
        self.runs = {}
        for ts, m in by_ts.items():
            pre = [v for (n, ph, me), v in m.items() if ph == "prefill" and me == "prefill_latency_s"]
            if not pre:
                continue
            pre_notes = next((x for x in notes[ts] if "warm-up" in x and "prefill chunk" in x), "")
            cfg = config_of(pre_notes) + (any(GEMV_NOTE in x for x in notes[ts]),)
            self.runs[(ts, cfg)] = m

    def find(self, want):
        """The run whose configuration matches want (a function of the config tuple), the last if several."""
        hits = [m for (ts, cfg), m in sorted(self.runs.items()) if want(cfg)]
        return hits[-1] if hits else None


def plain(cfg):
    chunk, rows, fused, apart, tuned, residual, per_layer, named, gemv = cfg
    return chunk == DEFAULT_CHUNK and not (rows or fused or apart or tuned or residual or per_layer or named or gemv)


def only(**kw):
    names = ("chunk", "rows", "fused", "apart", "tuned", "residual", "per_layer", "named", "gemv")
    base = dict(zip(names, (DEFAULT_CHUNK, 0, False, False, False, False, False, "", False)))
    base.update(kw)
    want = tuple(base[n] for n in names)
    return lambda cfg: cfg == want


def length(n):
    return "1M" if n == 1048576 else "%dK" % (n // 1024)


def described(cfg):
    return label(cfg[:8]) + (", decode GEMMs as a GEMV" if cfg[8] else "")


def prefill(m, n):
    return m.get((n, "prefill", "prefill_latency_s")) if m else None


def ranges_apart(files, cand, what):
    """The ranges rule: at 512K and 1M the candidate's slowest prefill run faster than the plain run's fastest, in
    one file. (verdict, lines)."""
    lines, verdict = [], None
    for f in files:
        base, c = f.find(plain), f.find(cand)
        if not base or not c:
            continue
        ok = True
        for n in LONG:
            b, x = prefill(base, n), prefill(c, n)
            if not b or not x or None in (b[1], x[2]):
                lines.append("  %s: no %s prefill at %s in both runs" % (f.path, what, length(n)))
                ok = None
                break
            won = x[2] < b[1]
            ok = ok and won
            lines.append("  %s %4s: %s %.4f s [%.4f-%.4f] vs plain %.4f s [%.4f-%.4f]: %s" % (
                os.path.basename(f.path), length(n), what, x[0], x[1], x[2], b[0], b[1], b[2],
                "slowest faster than plain's fastest" if won else "ranges not apart"))
        verdict = ok
        break
    if verdict is None and not lines:
        lines.append("  no file holds both a plain and a %s run of yoco-3b" % what)
    return verdict, lines


def print_rule(title, rule, verdict, lines, flip="FLIP", keep="KEEP"):
    word = flip if verdict is True else keep if verdict is False else "UNDECIDED"
    print("%s: %s" % (title, word))
    print("  rule: " + rule)
    for line in lines:
        print(line)
    print()


def bench_pair(benches, model, n, b, cand, base):
    for bench in benches:
        x, y = bench.get(model, n, b, cand), bench.get(model, n, b, base)
        if x is not None and y is not None:
            return x, y, bench.path
    return None


def combine(*vs):
    """True if all are True, False if any is False, else None (something missing)."""
    if any(v is False for v in vs):
        return False
    return True if all(v is True for v in vs) else None


def rule_per_layer(benches, runs, tests):
    v1, lines = ranges_apart(runs, only(per_layer=True), "per-layer")
    pair = bench_pair(benches, "yoco-3b", 32768, 1, "add_rms_norm:rows 32768 d 3072, a layer's two norms, the residual "
                      "stored once", "add_rms_norm:rows 32768 d 3072, a layer's two norms, an add + RMSNorm each")
    v2 = None if pair is None else pair[0] < pair[1]
    lines.append("  bench: " + ("no pair of rows" if pair is None else
                                "stored once %.3f ms vs an add + RMSNorm each %.3f ms (%s)" % (
                                    1e3 * pair[0], 1e3 * pair[1], os.path.basename(pair[2]))))
    own = ["*CudaModelResidualPerLayer.*"]
    v3, words = need_tests(tests, ["test.test_kernels_vs_reference", "test.test_cuda_models",
                                   "memcheck.test_kernels_vs_reference", "memcheck.test_cuda_models"],
                           {"test.test_cuda_models": own, "memcheck.test_cuda_models": own})
    lines.append("  tests " + words)
    v = combine(v1, v2, v3)
    print_rule("kResidualPerLayerByDefault (cuda/runner/launch_count.hpp)",
               "at 512K and 1M the per-layer prefill's slowest run faster than the plain run's fastest, the bench pair "
               "agrees, its tests pass (memcheck too: issue 34 asks for compute-sanitizer clean)", v, lines)
    return v


def rule_pairs(benches, runs, tests):
    v1, lines = ranges_apart(runs, only(fused=2), "FFN up in CTA pairs")
    shape = "rows 32768"
    pr = None
    for bench in benches:
        for (model, n, b, ph) in bench.phases("ffn_up"):
            if ph.startswith("ffn_up:fused gemm_swiglu, CTA pairs, " + shape + " "):
                rest = ph[len("ffn_up:fused gemm_swiglu, CTA pairs, "):]
                u = bench.get(model, n, b, "ffn_up:cublas W1|W3 + swiglu, " + rest)
                if u is not None:
                    pr = (bench.get(model, n, b, ph), u, bench.path)
    v2 = None if pr is None else pr[0] < pr[1]
    lines.append("  bench: " + ("no 32768-row pair of rows" if pr is None else
                                "CTA pairs %.3f ms vs cuBLAS + SwiGLU %.3f ms (%s)" % (1e3 * pr[0], 1e3 * pr[1],
                                                                                     os.path.basename(pr[2]))))
    v3, words = need_tests(tests, ["smoke.gemm_swiglu", "smoke.gemm_swiglu_pairs", "test.test_gemm_swiglu",
                                   "test.test_cuda_models", "memcheck.test_gemm_swiglu", "racecheck.test_gemm_swiglu",
                                   "synccheck.test_gemm_swiglu"],
                           {"test.test_cuda_models": ["*CudaModelFfnFused.*"]})
    lines.append("  tests " + words)
    v = combine(v1, v2, v3)
    print_rule("kFfnUpFusedByDefault + kFfnUpPairsByDefault (cuda/runner/launch_count.hpp)",
               "its tests pass (and the sanitizers on its small cases) and at 512K and 1M the fused-pairs prefill's "
               "slowest run is faster than the plain run's fastest (the bench's 32768-row pairs row ahead of cuBLAS + "
               "SwiGLU gated the run)", v, lines)
    return v


def rule_half_warp(benches, tests):
    base = "gret_norm_gate:rows 32768 H24 D128, g in q|k|v|g rows"
    pair = bench_pair(benches, "yoco-3b", 32768, 1, base + ", half-warp kernel", base)
    lines = ["  bench: " + ("no pair of q|k|v|g rows" if pair is None else
                            "half-warp %.3f ms vs per-warp %.3f ms (%s)" % (1e3 * pair[0], 1e3 * pair[1],
                                                                         os.path.basename(pair[2])))]
    v2, words = need_tests(tests, ["test.test_gret_decode"])
    lines.append("  tests " + words)
    v = combine(None if pair is None else pair[0] < pair[1], v2)
    print_rule("kNormGateHalfWarpByDefault (cuda/gret/gret_gate.hpp)",
               "the half-warp q|k|v|g row beats the per-warp q|k|v|g row (and its bit tests pass)", v, lines)
    return v


def chunk_rows(bench, k):
    """{(seq_len, batch): {"plan": (P, seconds), P: seconds}} of gret_chunk kernel k on yoco-3b in one file."""
    out = defaultdict(dict)
    for (model, n, b, ph) in bench.phases("gret_chunk"):
        m = CHUNK_VARIANT.match(ph.split(":", 1)[1])
        if model != "yoco-3b" or not m or int(m.group("k")) != k:
            continue
        t = bench.get(model, n, b, ph)
        if m.group("plan"):
            out[(n, b)]["plan"] = (int(m.group("p")), t)
        elif "x" not in ph.split(":", 1)[1]:
            out[(n, b)][int(m.group("p"))] = t
    return out


def rule_v7(benches, tests):
    lines, verdict = [], None
    for bench in benches:
        v6, v7 = chunk_rows(bench, 6), chunk_rows(bench, 7)
        if not v7:
            continue
        verdict = True
        for key in [(n, 1) for n in BENCH_LENGTHS] + [(16384, 2)]:
            a, b = v7.get(key, {}).get("plan"), v6.get(key, {}).get("plan")
            if not a or not b:
                lines.append("  N %d B %d: no plan row of %s" % (key[0], key[1], "v7" if not a else "v6"))
                verdict = combine(verdict, None)
                continue
            won = a[1] < b[1]
            verdict = combine(verdict, won)
            lines.append("  N %7d B %d: v7 P%d %.3f ms vs v6 P%d %.3f ms (%.3fx): %s" % (
                key[0], key[1], a[0], 1e3 * a[1], b[0], 1e3 * b[1], a[1] / b[1], "wins" if won else "loses"))
        lines.insert(0, "  " + bench.path)
        break
    if not lines:
        lines.append("  no v7 rows in the kernel files")
    v2, words = need_tests(tests, ["smoke.gret_chunk_v7", "test.test_gret_chunk"])
    lines.append("  tests " + words)
    v = combine(verdict, v2)
    print_rule("v7 as the library's plan (cuda/gret/gret_select.cpp)",
               "v7's plan row beats v6's at every bench length (32K-1M) and at batch 2, in the same call", v, lines)
    return v


def rule_p11(benches, v7_won):
    k = 7 if v7_won else 6
    lines, verdict = ["  kernel: v%d (%s)" % (k, "v7 won its rule" if v7_won else "v7 did not win its rule")], None
    for bench in benches:
        rows = chunk_rows(bench, k)
        if not rows:
            continue
        verdict = True
        for n in BENCH_LENGTHS:
            plan, p11 = rows.get((n, 1), {}).get("plan"), rows.get((n, 1), {}).get(11)
            if plan and plan[0] == 11:
                lines.append("  N %7d B 1: the plan is P 11 already" % n)
                continue
            if not plan or p11 is None:
                lines.append("  N %7d B 1: no %s row" % (n, "plan" if not plan else "P 11"))
                verdict = combine(verdict, None)
                continue
            won = p11 < plan[1]
            verdict = combine(verdict, won)
            lines.append("  N %7d B 1: P11 %.3f ms vs plan P%d %.3f ms (%.3fx): %s" % (
                n, 1e3 * p11, plan[0], 1e3 * plan[1], p11 / plan[1], "wins" if won else "loses"))
        two = rows.get((16384, 2), {})
        plan = two.get("plan")
        if not plan:
            lines.append("  N   16384 B 2: no plan row")
            verdict = combine(verdict, None)
        for p in (5, 6) if plan else ():
            if plan and plan[0] == p:
                lines.append("  N   16384 B 2: the plan is P %d" % p)
                continue
            t = two.get(p)
            if t is None:
                lines.append("  N   16384 B 2: no P %d row" % p)
                verdict = combine(verdict, None)
                continue
            ok = t <= plan[1]
            verdict = combine(verdict, ok)
            lines.append("  N   16384 B 2: P%d %.3f ms vs plan P%d %.3f ms (%.3fx): %s" % (
                p, 1e3 * t, plan[0], 1e3 * plan[1], t / plan[1], "does not lose" if ok else "loses"))
        lines.insert(1, "  " + bench.path)
        break
    print_rule("P 11 (two waves) in the v%d planner (cuda/gret/gret_plan.hpp)" % k,
               "the P 11 row beats the plan's row of the same kernel at 32K, 128K, 512K and 1M, and the batch-2 rows "
               "at P 5 / 6 do not lose to the plan's", verdict, lines)


def rule_gemv(benches, runs, tests):
    lines, v1 = [], None
    for bench in benches:
        shapes = [k for k in bench.phases("gemm_shapes") if ", gemv (ours" in k[3]]
        if not shapes:
            continue
        v1 = True
        for (model, n, b, ph) in sorted(shapes):
            shape = ph.split(":", 1)[1].split(", gemv (ours", 1)[0]
            g = bench.get(model, n, b, ph)
            c = bench.get(model, n, b, "gemm_shapes:" + shape + ", cublasGemmEx (the runners' call)")
            if c is None:
                lines.append("  %s m %d: no cublasGemmEx row" % (shape, n))
                v1 = combine(v1, None)
                continue
            v1 = combine(v1, g < c)
            lines.append("  %s m %d: gemv %.2f us vs cublasGemmEx %.2f us (%.2fx)" % (shape, n, 1e6 * g, 1e6 * c, g / c))
        break
    if v1 is None and not lines:
        lines.append("  no gemv rows in the kernel files")
    v2 = None
    for f in runs:
        base, c = f.find(plain), f.find(only(gemv=True))
        if not base or not c:
            continue
        v2 = True
        for n in LONG:
            x, y = c.get((n, "decode", "decode_step_latency_s")), base.get((n, "decode", "decode_step_latency_s"))
            if not x or not y:
                v2 = combine(v2, None)
                lines.append("  %s: no decode step in both runs" % length(n))
                continue
            v2 = combine(v2, x[0] < y[0])
            lines.append("  %s decode step (graph): gemv %.3f ms vs plain %.3f ms (%.3fx)" % (
                length(n), 1e3 * x[0], 1e3 * y[0], x[0] / y[0]))
        break
    v3, words = need_tests(tests, ["test.test_gemv", "test.test_cuda_models"],
                           {"test.test_cuda_models": ["*CudaModelGemv.*"]})
    lines.append("  tests " + words)
    print_rule("kGemvByDefault (cuda/runner/launch_count.hpp)",
               "every decode shape's GEMV row beats cublasGemmEx's, models.3b_long_gemv's decode steps beat "
               "models.3b_long's, the GEMV's tests pass", combine(v1, v2, v3), lines)


def rule_memory(runs):
    lines, v = [], None
    for f in runs:
        base, c = f.find(plain), f.find(only(chunk=16384, tuned=True))
        if not base or not c:
            continue
        v = True
        for n in LONG:
            x, y = prefill(c, n), prefill(base, n)
            if not x or not y:
                v = combine(v, None)
                lines.append("  %s: no prefill in both runs" % length(n))
                continue
            within = x[0] <= 1.02 * y[0]
            v = combine(v, within)
            lines.append("  %4s: chunk 16384 tuned %.4f s vs chunk 32768 %.4f s (%+.2f%%)" % (
                length(n), x[0], y[0], 100 * (x[0] / y[0] - 1)))
        mem = c.get((1048576, "memory", "mem_total_bytes"))
        if mem and mem[0]:
            fits = mem[0] <= PAPER_1M_BYTES
            lines.append("  1M memory: %.2f GB (the paper's 12.4): %s" % (mem[0] / 1e9, "within" if fits else "over"))
            v = combine(v, fits)
        break
    if not lines:
        lines.append("  no file holds both a plain and a chunk-16384 tuned run")
    print_rule("Chunk 16384 with tuned GEMMs as issue 34's memory configuration",
               "within 2% of the chunk-32768 prefill at both lengths in the same call (and <= 12.4 GB at 1M)",
               v, lines, flip="MET", keep="NOT MET")


def rule_beside(benches):
    lines, verdicts = [], []
    for bench in benches:
        names = sorted({(m, n, b, ph.rsplit(", GEMM alone", 1)[0]) for (m, n, b, ph) in bench.phases("beside_gemm")
                        if ph.endswith(", GEMM alone")})
        for (m, n, b, name) in names:
            one, alone = bench.get(m, n, b, name + ", one stream"), bench.get(m, n, b, name + ", pass alone")
            if "gRet chunk" in name:
                # Not one of the rule's two pairs (written before the runs): whether the GEMM before it slows
                # the chunk, the runner's order in a step (cuda/gret/NOTES-gret_chunk.md, "In the runner").
                gemm = bench.get(m, n, b, name + ", GEMM alone")
                if one is not None and alone is not None and gemm is not None:
                    lines.append("  %s (not in the rule): one stream %.3fx the GEMM alone + the chunk alone"
                                 % (name.split(":", 1)[1], one / (gemm + alone)))
                continue
            twos = [t for t in (bench.get(m, n, b, name + ", two streams"),
                                bench.get(m, n, b, name + ", two streams, the pass at the greatest priority"))
                    if t is not None]
            if one is None or alone is None or not twos:
                lines.append("  %s: rows missing" % name.split(":", 1)[1])
                verdicts.append(None)
                continue
            hid = (one - min(twos)) / alone
            verdicts.append(hid)
            lines.append("  %s: the better two-stream row hid %.0f%% of the pass alone" % (name.split(":", 1)[1],
                                                                                       100 * hid))
        if names:
            break
    known = [h for h in verdicts if h is not None]
    if len(known) >= 2 and len(known) == len(verdicts) and all(h >= 0.5 for h in known):
        word = "WRITE the two-step prefill"
    elif len(known) >= 2 and len(known) == len(verdicts) and all(h < 0.2 for h in known):
        word = "GOAL OUT OF REACH by scheduling with these kernels"
    elif len(known) >= 2 and len(known) == len(verdicts):
        word = "between the thresholds: no rule decides"
    else:
        word = "UNDECIDED"
    print("Passes under the GEMMs (issue 34's goal): %s" % word)
    print("  rule: at least 50% hidden in both pairs: write the two-step prefill; under 20% in both: the goal is "
          "out of reach by scheduling")
    for line in lines or ["  no beside_gemm rows in the kernel files"]:
        print(line)
    print()


def best_512k(runs):
    best = None
    for f in runs:
        for (ts, cfg), m in f.runs.items():
            p = prefill(m, 524288)
            if p and p[0] and (best is None or p[0] < best[0]):
                best = (p[0], cfg, f.path)
    if best:
        print("Issue 34's must (<= %.1f s at 512K): the fastest run is %.4f s (%s, %s): %s" % (
            MUST_512K_S, best[0], described(best[1]),
            os.path.basename(best[2]), "met" if best[0] <= MUST_512K_S else "NOT met"))


def main(argv):
    if "-h" in argv[1:] or "--help" in argv[1:]:
        print(__doc__.strip())
        return 0
    files, err = parse_args(argv[1:])
    if err:
        return usage(err)
    for p in files["--kernels"] + files["--models"] + files["--summary"]:
        if not os.path.isfile(p):
            print("decide: %s: no such file" % p, file=sys.stderr)
            return 2
    benches = [Bench(p) for p in files["--kernels"]]
    runs = [Runs(p) for p in files["--models"]]
    tests = Tests(files["--summary"])
    per_layer = rule_per_layer(benches, runs, tests)
    pairs = rule_pairs(benches, runs, tests)
    if per_layer is True and pairs is True:
        print("Both the residual stored once a layer and the FFN in CTA pairs flip: the one with the faster 512K "
              "prefill becomes the default (they exclude each other).\n")
    rule_half_warp(benches, tests)
    v7 = rule_v7(benches, tests)
    rule_p11(benches, v7 is True)
    rule_gemv(benches, runs, tests)
    rule_memory(runs)
    rule_beside(benches)
    best_512k(runs)
    return 0


if __name__ == "__main__":
    run_main(main, "decide")
