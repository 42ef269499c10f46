#!/usr/bin/python3
"""Self-test of reports/plot.py and reports/report.py on a synthetic result set.

Run:  /usr/bin/python3 -m unittest test_reports      (from reports/)
      /usr/bin/python3 reports/test_reports.py        (from anywhere)

The synthetic rows follow reports/SCHEMA.md but their numbers are made up (rough
formulas, not the suite's cost model): they exist to exercise the scripts.
`/usr/bin/python3 reports/test_reports.py --make-synthetic DIR` writes them to DIR
for looking at the figures by hand; never commit them as results.
"""
import atexit
import contextlib
import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plot  # noqa: E402
import report  # noqa: E402

K = 1024
M = 1024 * 1024


# ----------------------------------------------------------------------------------------------
# Synthetic result set


class _Writer(object):
    def __init__(self, prov):
        self.prov, self.rows = prov, []

    def add(self, model, seq_len, phase, metric, value, unit, method, batch=1, gen=0, repeats=None, lo=None,
            hi=None, notes="", device=None, device_name=None):
        prov = dict(self.prov)
        if device is not None:
            prov.update(device=device, device_name=device_name, driver="")
        if repeats is None:
            repeats = {"measured": 5, "sampled": 1, "extrapolated": 1}.get(method, 0)
        fmt = lambda v: "" if v is None else "%.17g" % v  # noqa: E731
        if value is not None and lo is None:
            lo = hi = value
        self.rows.append(dict(prov, model=model, seq_len=seq_len, batch=batch, gen_tokens=gen, phase=phase,
                              metric=metric, value=fmt(value), unit=unit, method=method, repeats=repeats,
                              min=fmt(lo), max=fmt(hi), notes=notes))

    def write(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, plot.COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerows(self.rows)
        return path


def _ratios(w, a, b, seq_len, phase, ya, yb, method, batch=1, gen=0, higher_better=False):
    name = {"memory": "memory_reduction", "prefill": "prefill_speedup", "decode": "decode_speedup",
            "throughput": "throughput_gain", "kv_cache": "kv_cache_reduction"}[phase]
    v = (ya / yb) if higher_better else (yb / ya)
    w.add("%s vs %s" % (a, b), seq_len, phase, name, v, "x", method, batch=batch, gen=gen)


# The CUPTI breakdown of a `--cupti` sweep (reports/SCHEMA.md): family shares per model and phase, the kernels
# that make up each family (name, share of the family, launches per unit), the overhead by length.
CUPTI_SHARES = {
    ("yoco-3b", "prefill"): dict(gemm=0.5, gret=0.25, attention_prefill=0.125, norms=0.1, other=0.025),
    ("yoco-3b", "decode"): dict(gemm=0.6, gret=0.1, attention_decode=0.2, norms=0.05, other=0.05),
    ("transformer-3b", "prefill"): dict(gemm=0.4, attention_prefill=0.5, norms=0.08, other=0.02),
    ("transformer-3b", "decode"): dict(gemm=0.3, attention_decode=0.6, norms=0.06, other=0.04),
}
CUPTI_KERNELS = dict(gemm=[("sm90_xmma_gemm_bf16bf16_bf16f32", 0.7, 52), ("cublasLt_splitKreduce", 0.3, 26)],
                     gret=[("gret_chunk_v3", 1.0, 13)], attention_prefill=[("attn_prefill_v2", 1.0, 26)],
                     attention_decode=[("flash_decode_split", 1.0, 26)], norms=[("rmsnorm_rope", 1.0, 53)],
                     other=[("embedding_gather", 1.0, 1)])
CUPTI_LENGTHS = {32 * K: 0.02, 128 * K: 0.03}  # length -> prefill overhead; decode's is 10% everywhere


def add_cupti_rows(w):
    for (model, phase), shares in CUPTI_SHARES.items():
        for n, over in CUPTI_LENGTHS.items():
            total = (0.04 if phase == "prefill" else 0.01) * n / (128 * K)
            unit = "prefill" if phase == "prefill" else "decode step"
            for fam, share in shares.items():
                w.add(model, n, "%s.%s" % (phase, fam), "gpu_time_s", total * share, "s", "measured", repeats=1,
                      notes="%d kernels, 80 launches per %s; CUPTI activity records" % (len(CUPTI_KERNELS[fam]),
                                                                                        unit))
                for name, part, launches in CUPTI_KERNELS[fam]:
                    w.add(model, n, "%s:%s" % (phase, name), "kernel_time_s", total * share * part, "s", "measured",
                          repeats=1, notes="family %s, %d launches per %s; CUPTI activity records (concurrent "
                                           "kernel), per %s" % (fam, launches, unit, unit))
            w.add(model, n, phase + ".kernels", "gpu_time_s", total, "s", "measured", repeats=1)
            w.add(model, n, phase + ".kernels", "cupti_overhead_fraction", over if phase == "prefill" else 0.1,
                  "fraction", "measured", repeats=1)
            w.add(model, n, phase + ".kernels", "gpu_busy_fraction", 0.97, "fraction", "measured", repeats=1)


def make_synthetic(root, with_param_count=True, with_cuda=True):
    """Writes a synthetic result set under root/{cpu,analytic,cuda}/; returns the file paths."""
    files = []
    # --- CPU, tiny models, 1K..16K -------------------------------------------------------------
    cpu = _Writer(dict(git_sha="0123456789ab", timestamp="2026-11-21T10:00:00Z", host="devbox", device="cpu",
                       device_name="AMD EPYC (2 cores)", driver="6.1.0-28-amd64"))
    roof = dict(device="analytic", device_name="roofline of AMD EPYC (measured ceilings)")
    gen = 128
    cpu.add("-", 0, "ceiling", "gemm_peak_tflops", 0.108, "TFLOP/s", "measured", notes="Eigen fp32 GEMM, median")
    cpu.add("-", 0, "ceiling", "copy_bw_gbs", 22.6, "GB/s", "measured", notes="memcpy, median")
    tiny_kv = {"yoco-tiny": 256.0, "transformer-tiny": 1024.0}
    for n in (1024, 2048, 4096, 8192, 16384):
        mem, pre, dec, thr = {}, {}, {}, {}
        for m in ("yoco-tiny", "transformer-tiny"):
            y = m.startswith("yoco")
            parts = dict(mem_weights_bytes=812032.0 if y else 798720.0, mem_kv_cache_bytes=tiny_kv[m] * n,
                         mem_state_bytes=8192.0 if y else 0.0, mem_activations_bytes=(0.6 if y else 1.1) * 2e5 + 40 * n,
                         mem_other_bytes=0.0)
            for k, v in parts.items():
                cpu.add(m, n, "memory", k, v, "B", "exact")
            mem[m] = sum(parts.values())
            cpu.add(m, n, "memory", "mem_total_bytes", mem[m], "B", "exact")
            cpu.add(m, n, "memory", "mem_host_peak_rss_bytes", mem[m] + 21e6, "B", "measured", repeats=1)
            pre[m] = 2.1e-5 * n if y else 4e-5 * n + 2.3e-7 * n * n
            if not y and n == 16384:
                cpu.add(m, n, "prefill", "prefill_latency_s", None, "s", "over_budget",
                        notes="predicted %.1f s > --budget-s 30" % pre[m])
                cpu.add(m, n, "prefill", "prefill_latency_s", pre[m], "s", "analytic", **roof)
            else:
                cpu.add(m, n, "prefill", "prefill_latency_s", pre[m], "s", "measured", lo=pre[m] * 0.97,
                        hi=pre[m] * 1.06)
            dec[m] = 3e-4 + (2e-9 if y else 9e-9) * n
            meth = "measured" if n <= 4096 else "sampled"
            cpu.add(m, n, "decode", "decode_step_latency_s", dec[m], "s", meth, lo=dec[m] * 0.95, hi=dec[m] * 1.1,
                    notes="" if meth == "measured" else "64 of 128 decode steps timed, scaled")
            thr[m] = gen / (pre[m] + gen * dec[m])
            if not y and n == 16384:
                cpu.add(m, n, "throughput", "throughput_tokens_per_s", None, "tokens/s", "over_budget", gen=gen,
                        notes="prefill over budget")
                cpu.add(m, n, "throughput", "throughput_tokens_per_s", thr[m], "tokens/s", "analytic", gen=gen,
                        **roof)
            else:
                cpu.add(m, n, "throughput", "throughput_tokens_per_s", thr[m], "tokens/s", meth, gen=gen,
                        notes="" if meth == "measured" else "decode steps sampled")
        a, b = "yoco-tiny", "transformer-tiny"
        _ratios(cpu, a, b, n, "memory", mem[a], mem[b], "exact")
        _ratios(cpu, a, b, n, "prefill", pre[a], pre[b], "analytic" if n == 16384 else "measured")
        _ratios(cpu, a, b, n, "decode", dec[a], dec[b], "measured" if n <= 4096 else "sampled")
        _ratios(cpu, a, b, n, "throughput", thr[a], thr[b], "analytic" if n == 16384 else
                ("measured" if n <= 4096 else "sampled"), gen=gen, higher_better=True)
    for m, v in tiny_kv.items():
        cpu.add(m, 0, "kv_cache", "kv_cache_bytes_per_token", v, "B/token", "exact")
    _ratios(cpu, "yoco-tiny", "transformer-tiny", 0, "kv_cache", 256.0, 1024.0, "exact")
    files.append(cpu.write(os.path.join(root, "cpu", "bench.csv")))

    # --- analytic H100 projection of the 3B models, 32K..1M, and KV per token of the presets ---
    h = _Writer(dict(git_sha="0123456789ab", timestamp="2026-11-21T10:05:00Z", host="devbox", device="analytic",
                     device_name="H100 SXM5 80GB (datasheet)", driver=""))
    lens = [32 * K * 2 ** i for i in range(6)]

    def h100_3b(m, n):
        y = m.startswith("yoco")
        kvpt = 4096.0 if y else 106496.0
        parts = dict(mem_weights_bytes=6.36e9 if y else 6.47e9, mem_kv_cache_bytes=kvpt * n,
                     mem_state_bytes=20.4e6 if y else 0.0, mem_activations_bytes=0.8e9 if y else 1.3e9,
                     mem_other_bytes=0.55e9)
        pre = 3.1e-6 * n + 0.02 if y else 2.2e-5 * n + 2.55e-10 * n * n
        dec = 0.011 + 4e-9 * n if y else 0.011 + 1.2e-7 * n
        return parts, pre, dec

    analytic = {}
    for n in lens:
        vals = {}
        for m in ("yoco-3b", "transformer-3b"):
            parts, pre, dec = h100_3b(m, n)
            for k, v in parts.items():
                h.add(m, n, "memory", k, v, "B", "analytic", gen=1024)
            tot = sum(parts.values())
            h.add(m, n, "memory", "mem_total_bytes", tot, "B", "analytic", gen=1024)
            h.add(m, n, "prefill", "prefill_latency_s", pre, "s", "analytic")
            h.add(m, n, "decode", "decode_step_latency_s", dec, "s", "analytic")
            per_seq = parts["mem_kv_cache_bytes"] + parts["mem_state_bytes"]
            free = 80e9 - parts["mem_weights_bytes"] - parts["mem_activations_bytes"] - parts["mem_other_bytes"]
            mb = max(0, int(free // per_seq))
            h.add(m, n, "throughput", "max_batch", mb, "count", "analytic", batch=mb, gen=1024,
                  notes="" if mb else "one sequence does not fit")
            b = max(mb, 1)
            thr = b * 1024 / (b * pre + 1024 * dec * (1 + 0.02 * b))
            if mb:  # as the cost model does: no throughput row where not one sequence fits
                h.add(m, n, "throughput", "throughput_tokens_per_s", thr, "tokens/s", "analytic", batch=b, gen=1024)
            vals[m] = (tot, pre, dec, thr, b)
            analytic[(m, n)] = (parts, tot, pre, dec)
        a, bb = "yoco-3b", "transformer-3b"
        _ratios(h, a, bb, n, "memory", vals[a][0], vals[bb][0], "analytic", gen=1024)
        _ratios(h, a, bb, n, "prefill", vals[a][1], vals[bb][1], "analytic")
        _ratios(h, a, bb, n, "decode", vals[a][2], vals[bb][2], "analytic")
        if vals[bb][4] and h.rows[-1]["metric"] == "throughput_tokens_per_s":
            _ratios(h, a, bb, n, "throughput", vals[a][3], vals[bb][3], "analytic", batch=vals[a][4], gen=1024,
                    higher_better=True)
    presets = [("tiny", 64, 4, 4, 2, 0.2e6), ("160m", 768, 12, 12, 3, 0.16e9), ("400m", 1024, 24, 16, 4, 0.4e9),
               ("830m", 1536, 24, 12, 3, 0.83e9), ("1.4b", 2048, 24, 16, 4, 1.4e9),
               ("2.7b", 2560, 32, 20, 5, 2.7e9), ("3b", 3072, 26, 24, 8, 3.2e9), ("6.8b", 4096, 32, 32, 8, 6.8e9),
               ("13b", 5120, 40, 40, 10, 13e9), ("65b", 8192, 80, 64, 8, 65e9)]
    for size, d, L, H, Hkv, pc in presets:
        per_layer = Hkv * (d // H) * 2 * 2.0
        for fam, layers in (("yoco", 1), ("transformer", L)) + ((("yoco-swa", 1),) if size in ("160m", "1.4b",
                                                                                                 "13b") else ()):
            m = "%s-%s" % (fam, size)
            v = per_layer * layers + (0 if fam != "yoco-swa" else 0)
            h.add(m, 0, "kv_cache", "kv_cache_bytes_per_token", v, "B/token", "analytic")
            if with_param_count:
                h.add(m, 0, "model", "param_count", pc * (1.0 if fam == "transformer" else 0.99), "count", "exact")
        _ratios(h, "yoco-%s" % size, "transformer-%s" % size, 0, "kv_cache", per_layer, per_layer * L,
                "analytic")
    files.append(h.write(os.path.join(root, "analytic", "h100-3b.csv")))

    if not with_cuda:
        return files
    # --- a measured H100 run of the 3B models with points that did not run ----------------------
    c = _Writer(dict(git_sha="fedcba987654-dirty", timestamp="2026-11-22T08:00:00Z", host="gpu-node-7",
                     device="cuda", device_name="NVIDIA H100 80GB HBM3", driver="550.54.15"))
    dsh = dict(device="analytic", device_name="H100 SXM5 80GB (datasheet)")
    for n in lens:
        for m in ("yoco-3b", "transformer-3b"):
            parts, tot, pre, dec = analytic[(m, n)]
            if tot > 80e9:
                c.add(m, n, "memory", "mem_total_bytes", None, "B", "out_of_memory", gen=1024,
                      notes="needs %.1f GB, 79.1 GB free" % (tot / 1e9))
                for k, v in parts.items():
                    c.add(m, n, "memory", k, None, "B", "out_of_memory", gen=1024, notes="does not fit")
            else:
                for k, v in parts.items():
                    c.add(m, n, "memory", k, v * 1.04, "B", "measured", gen=1024, repeats=1)
                c.add(m, n, "memory", "mem_total_bytes", tot * 1.04, "B", "measured", gen=1024, repeats=1)
            if m.startswith("transformer") and n == 1 * M:
                c.add(m, n, "prefill", "prefill_latency_s", None, "s", "over_budget",
                      notes="predicted %.0f s > --budget-s 240" % pre)
                c.add(m, n, "prefill", "prefill_latency_s", pre, "s", "analytic", **dsh)
            elif m.startswith("transformer") and n == 512 * K:
                c.add(m, n, "prefill", "prefill_latency_s", pre * 1.2, "s", "extrapolated",
                      notes="2 of 26 layers timed, x13")
            else:
                c.add(m, n, "prefill", "prefill_latency_s", pre * 1.15, "s", "measured", lo=pre * 1.12,
                      hi=pre * 1.2)
            if m.startswith("transformer") and n == 1 * M:  # beside the out_of_memory memory rows of the point
                c.add(m, n, "decode", "decode_step_latency_s", dec * 1.1, "s", "extrapolated",
                      notes="1 and 2 layers of each kind timed at the full length, scaled to 26 layers")
            else:
                c.add(m, n, "decode", "decode_step_latency_s", dec * 1.1, "s", "sampled",
                      notes="64 of 1024 steps timed, scaled")
    add_cupti_rows(c)
    files.append(c.write(os.path.join(root, "cuda", "h100-run.csv")))
    # Kernel benchmark rows (bench_cuda_kernels and bench/peers) of the same device.
    k = _Writer(dict(c.prov))
    k.add("-", 0, "ceiling", "copy_bw_gbs", 2990.0, "GB/s", "measured")
    k.add("-", 0, "ceiling", "gemm_peak_tflops", 780.0, "TFLOP/s", "measured")
    fl = 6144.0 * 16384 ** 2
    for phase, t in (("attn_prefill:D128 v2", 2.5e-3), ("attn_prefill:D128 v1", 4.7e-3),
                     ("attn_prefill_torch_cudnn:D128", 2.6e-3)):
        k.add("transformer-3b", 16 * K, phase, "kernel_time_s", t, "s", "measured", lo=t * 0.99, hi=t * 1.02)
        k.add("transformer-3b", 16 * K, phase, "achieved_tflops", fl / t / 1e12, "TFLOP/s", "measured")
        if not phase.startswith("attn_prefill_torch"):
            k.add("transformer-3b", 16 * K, phase, "fraction_of_gemm_peak", fl / t / 780e12, "ratio", "measured")
    k.add("transformer-3b", 16 * K, "attn_prefill_torch_efficient:D128", "kernel_time_s", None, "s", "failed",
          notes="No available kernel. Aborting execution.")
    files.append(k.write(os.path.join(root, "cuda", "kernels.csv")))
    return files


# ----------------------------------------------------------------------------------------------
# Tests


def _quiet(fn, *a, **kw):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = fn(*a, **kw)
    return rc, out.getvalue(), err.getvalue()


_DEFAULT_REPORT = {}


def default_report():
    """report.main once over make_synthetic's default results, for the tests that only read what it wrote
    (about 12 s a run on 2 cores: the figures); its own folder, removed at exit."""
    if not _DEFAULT_REPORT:
        d = tempfile.mkdtemp(prefix="yoco-reports-default-")
        atexit.register(shutil.rmtree, d, True)
        results, out, readme = (os.path.join(d, n) for n in ("results", "figures", "README.md"))
        make_synthetic(results)
        rc, o, e = _quiet(report.main, ["--results", results, "--out", out, "--readme", readme])
        _DEFAULT_REPORT.update(rc=rc, log=o + e, out=out, readme=readme)
    return _DEFAULT_REPORT


class ReportsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="yoco-reports-test-")
        self.results = os.path.join(self.tmp, "results")
        self.out = os.path.join(self.tmp, "figures")
        self.readme = os.path.join(self.tmp, "README.md")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_paper_rows_parse(self):
        files = sorted(f for f in os.listdir(os.path.join(HERE, "paper"))
                       if f.endswith(".csv") and f != plot.DIFFERENCES_NAME)
        self.assertTrue(files, "reports/paper/*.csv missing")
        rows = []
        for f in files:
            path = os.path.join(HERE, "paper", f)
            with open(path) as fh:
                self.assertEqual(fh.readline().rstrip("\n"), ",".join(plot.COLUMNS), path)
            rows.extend(plot.read_result_csv(path))
        self.assertTrue(all(r.device == "paper" and r.method == "paper" for r in rows))
        self.assertTrue(all(r.device_name == "H100-80GB (paper)" for r in rows))
        self.assertTrue(all(r.notes.strip() and r.value is not None for r in rows))
        keys = [r.key() for r in rows]
        self.assertEqual(len(keys), len(set(keys)), "duplicate key among the paper rows")
        got = {(r.model, r.seq_len, r.metric): r.value for r in rows}
        pair = "yoco-3b vs transformer-3b"
        self.assertEqual(got[("yoco-3b", M, "mem_total_bytes")], 12.4e9)
        self.assertEqual(got[(pair, M, "memory_reduction")], 9.4)
        self.assertEqual(got[(pair, 32 * K, "memory_reduction")], 2)
        self.assertEqual(got[(pair, M, "prefill_speedup")], 71.8)
        self.assertEqual(got[(pair, 32 * K, "prefill_speedup")], 2.87)
        self.assertEqual(got[("transformer-3b", 512 * K, "prefill_latency_s")], 180)
        self.assertEqual(got[("yoco-3b", 512 * K, "prefill_latency_s")], 6)
        self.assertEqual(got[("transformer-3b", M, "prefill_latency_s")], 300)
        self.assertEqual(got[("transformer-3b", 512 * K, "throughput_tokens_per_s")], 4.5)
        self.assertEqual(got[("yoco-3b", 512 * K, "throughput_tokens_per_s")], 43.1)
        self.assertEqual(got[(pair, 512 * K, "throughput_gain")], 9.6)
        self.assertEqual(got[("transformer-65b", 512 * K, "mem_kv_cache_bytes")], 86e9)
        self.assertEqual(got[("yoco-65b vs transformer-65b", 0, "kv_cache_reduction")], 80)
        self.assertEqual(got[("yoco-65b", 0, "kv_cache_bytes_per_token")], 2 ** 30 / 131072)
        self.assertAlmostEqual(got[("transformer-65b", 0, "kv_cache_bytes_per_token")], 2 ** 30 / 1638.4)
        self.assertEqual(got[("transformer-7b", M, "prefill_latency_s")], 380)
        self.assertEqual(got[("transformer-7b", 450 * K, "prefill_latency_s")], 110)

    def test_plot_and_report(self):
        r = default_report()
        self.assertEqual(r["rc"], 0, r["log"])
        self.out, self.readme = r["out"], r["readme"]
        pngs = sorted(f for f in os.listdir(self.out) if f.endswith(".png"))
        svgs = sorted(f for f in os.listdir(self.out) if f.endswith(".svg"))
        self.assertEqual(len(pngs), len(svgs))
        for dev in ("amd-epyc-2-cores", "h100-sxm5-80gb-datasheet", "nvidia-h100-80gb-hbm3"):
            for kind in ("memory_vs_length", "memory_breakdown", "prefill_vs_length"):
                self.assertIn("%s_%s.png" % (dev, kind), pngs)
        self.assertIn("h100-sxm5-80gb-datasheet_kv_cache_per_token.png", pngs)
        self.assertIn("h100-sxm5-80gb-datasheet_throughput_vs_length.png", pngs)
        # the roofline device only holds the projections beside points that did not run
        self.assertFalse(any(f.startswith("roofline") for f in pngs), pngs)
        for f in pngs:
            with open(os.path.join(self.out, f), "rb") as fh:
                self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n", f)
        with open(self.readme, encoding="utf-8") as fh:
            text = fh.read()
        for needle in ("## AMD EPYC (2 cores)", "## H100 SXM5 80GB (datasheet)", "prefill_speedup",
                       "kv_cache_reduction", "How to regenerate", "Where the numbers come from",
                       "fedcba987654-dirty", "gpu-node-7", "71.8×", "over budget", "Ceilings measured",
                       "### CUDA kernels against their floors", "### Side by side with the peers",
                       "| attn_prefill | transformer-3b | 16K | 1 | torch cudnn D128 | 2.6 ms | D128 v2 | 2.5 ms | 1.04× |",
                       "Did not run: attn_prefill_torch_efficient:D128"):
            self.assertIn(needle, text)
        # figures are linked relative to the README and exist
        import re
        links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
        self.assertTrue(links)
        for l in links:
            self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(self.readme), l)), l)
            self.assertFalse(os.path.isabs(l), l)

    def test_plot_without_param_count_or_paper(self):
        make_synthetic(self.results, with_param_count=False, with_cuda=False)
        rc, out, err = _quiet(plot.main, [self.results, "--out", self.out, "--no-paper"])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("preset size order", out)
        self.assertTrue(os.path.isfile(os.path.join(self.out, "h100-sxm5-80gb-datasheet_kv_cache_per_token.png")))

    def test_missing_data_is_skipped_not_fatal(self):
        w = _Writer(dict(git_sha="x", timestamp="2026-11-21T10:00:00Z", host="h", device="cpu",
                         device_name="Some CPU", driver=""))
        w.add("yoco-tiny", 1024, "prefill", "prefill_latency_s", 0.5, "s", "measured")
        w.add("transformer-tiny", 1024, "prefill", "prefill_latency_s", None, "s", "failed", notes="boom")
        path = w.write(os.path.join(self.results, "one.csv"))
        rc, out, err = _quiet(report.main, [path, "--out", self.out, "--readme", self.readme])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("skip memory_vs_length", out)
        self.assertTrue(os.path.isfile(os.path.join(self.out, "some-cpu_prefill_vs_length.png")))
        # A results folder holding no CSV was exit 0 and a README of no rows (one line on stdout, easily missed):
        # but a folder of nothing named on the command line is the user's mistake (a wrong path, a run not copied
        # yet), so it is bad input now: exit 2, one line on stderr naming the folder, nothing written
        # (test_empty_results_folder_exit_2). A point that did not run (above) is still no error.

    def test_empty_results_folder_exit_2(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(os.path.join(empty, "nvidia-h100", "logs", "run-01"))
        # (a CSV under logs/ is history, not results: still nothing to report)
        with open(os.path.join(empty, "nvidia-h100", "logs", "run-01", "sweep.csv"), "w") as f:
            f.write(",".join(plot.COLUMNS) + "\n")
        for tool, main, extra in (("report.py", report.main, ["--readme", self.readme]), ("plot.py", plot.main, [])):
            for args in (["--results", empty], [empty]):
                rc, out, err = _quiet(main, args + ["--out", self.out] + extra)
                self.assertEqual(rc, 2, out + err)
                self.assertEqual(err.splitlines(), ["%s: %s: no *.csv under this folder (given as --results; folders "
                                                    "named logs are not read)" % (tool, empty)], tool)
                self.assertFalse(os.path.exists(self.readme), tool)
                self.assertFalse(os.path.exists(self.out), tool)

    def test_readme_folder_refused_before_any_work_and_figures_counted_as_written(self):
        # `--readme SOMEFOLDER` was refused only when the README was written, after every figure (a minute).
        from unittest import mock
        make_synthetic(self.results, with_cuda=False)
        folder = os.path.join(self.tmp, "a-folder")
        os.makedirs(folder)
        with mock.patch.object(report.plot, "make_figures", side_effect=AssertionError("figures drawn")) as mf, \
                mock.patch.object(report.plot, "load_from_args", wraps=report.plot.load_from_args) as ld:
            rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", folder])
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(err.splitlines(), ["report.py: cannot write: %s: is a folder (--readme names the README "
                                            "file to write)" % folder])
        self.assertFalse(mf.called)
        self.assertFalse(ld.called)
        self.assertFalse(os.path.exists(self.out))
        self.assertEqual(os.listdir(folder), [])
        # The count line counts what was written: a device of no figure beside the README's multi-device figure
        # said "0 figure(s)" while multi_device_prefill.png was written.
        from yocoreport import multi_device
        self.assertTrue(os.path.isfile(multi_device.PATH), multi_device.PATH)
        w = _Writer(dict(git_sha="x", timestamp="2026-11-21T10:00:00Z", host="h", device="cpu", device_name="CPU",
                         driver=""))
        w.add("-", 0, "ceiling", "gemm_flops", 5e9, "FLOP/s", "measured")
        one = w.write(os.path.join(self.tmp, "one", "one.csv"))
        rc, out, err = _quiet(report.main, ["--results", one, "--out", self.out, "--readme", self.readme])
        self.assertEqual(rc, 0, out + err)
        pngs = [f for f in os.listdir(self.out) if f.endswith(".png")]
        self.assertIn("multi_device_prefill.png", pngs)
        self.assertIn("\n%d figure(s) in %s\n" % (len(pngs), self.out), out)

    def _expect_exit2(self, content, line, fragment):
        path = os.path.join(self.tmp, "bad.csv")
        with open(path, "w") as f:
            f.write(content)
        for main in (plot.main, report.main):
            rc, out, err = _quiet(main, [path, "--out", self.out, "--readme", self.readme] if main is report.main
                                  else [path, "--out", self.out])
            self.assertEqual(rc, 2, out + err)
            self.assertIn("%s:%d:" % (path, line), err)
            self.assertIn(fragment, err)

    def test_malformed_csv_exit_2(self):
        header = ",".join(plot.COLUMNS) + "\n"
        good = ("x,2026-11-21T10:00:00Z,h,cpu,CPU,,yoco-tiny,1024,1,0,prefill,prefill_latency_s,0.5,s,measured,"
                "5,0.4,0.6,\n")
        self._expect_exit2("a,b,c\n1,2,3\n", 1, "not a result CSV")
        self._expect_exit2(header.replace("metric,", ""), 1, "missing column(s) metric")
        self._expect_exit2(header + good + "x,y\n", 3, "2 fields")
        self._expect_exit2(header + good + good.replace("0.5,s", "fast,s"), 3, "column value")
        self._expect_exit2(header + good + good.replace(",1024,", ",1k,"), 3, "column seq_len")
        # nan and inf are not numbers of a result: refused, never drawn nor dropped quietly
        self._expect_exit2(header + good + good.replace("0.5,s", "nan,s"), 3, "column value: 'nan' is not a finite")
        self._expect_exit2(header + good + good.replace("0.5,s", "inf,s"), 3, "column value: 'inf' is not a finite")
        self._expect_exit2(header + good.replace(",0.6,", ",-inf,"), 2, "column max: '-inf' is not a finite")
        self._expect_exit2("", 1, "empty file")
        # A stray quote in notes read every later line into that field: the rows after it vanished, exit 0.
        self._expect_exit2(header + good.replace(",\n", ',"half a note\n') + good + good, 2,
                           "a quoted field is not closed on this line")
        self._expect_exit2(header + good + good.replace(",\n", ',"half a note\n'), 3, "is not closed on this line")
        # A file cut short (an interrupted run) ends inside a row: its last field read as written, exit 0.
        noted = good.replace(",\n", ",prefill chunk 32768\n")
        self._expect_exit2(header + good + noted[:-4], 3, "does not end with a line break")

    def test_outputs_are_atomic_and_unwritable_paths_exit_2(self):
        from yocoreport.atomic import replacing
        make_synthetic(self.results, with_cuda=False)
        # An unwritable README or figure folder is refused before any figure is drawn.
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", "/dev/null/figures",
                                            "--readme", self.readme])
        self.assertEqual(rc, 2, out + err)
        self.assertIn("/dev/null/figures", err)
        self.assertFalse(os.path.exists(self.readme))
        rc, out, err = _quiet(plot.main, [self.results, "--out", "/dev/null/figures"])
        self.assertEqual(rc, 2, out + err)
        # A write that fails part-way leaves the earlier file byte for byte, and no temporary file.
        path = os.path.join(self.tmp, "keep.md")
        with open(path, "w") as f:
            f.write("earlier")
        with self.assertRaises(RuntimeError):
            with replacing(path, "w") as f:
                f.write("half of the new text")
                raise RuntimeError("interrupted")
        with open(path) as f:
            self.assertEqual(f.read(), "earlier")
        self.assertEqual(sorted(os.listdir(self.tmp)).count("keep.md"), 1)
        self.assertFalse([n for n in os.listdir(self.tmp) if n.endswith(".tmp")])
        # A full disk: the error names the target, the earlier file stays.
        if os.path.exists("/dev/full"):
            with self.assertRaises(OSError):
                with replacing("/dev/full/x.md", "w") as f:
                    f.write("x")

    # --- issue 16: the CUPTI breakdown, extrapolated points, why ours differ from the paper -------------------

    def _readme(self):
        with open(self.readme, encoding="utf-8") as fh:
            return fh.read()

    def test_cupti_breakdown_figure_and_section(self):
        r = default_report()
        self.assertEqual(r["rc"], 0, r["log"])
        self.out, self.readme = r["out"], r["readme"]
        png = os.path.join(self.out, "nvidia-h100-80gb-hbm3_breakdown.png")
        self.assertTrue(os.path.isfile(png), os.listdir(self.out))
        with open(png, "rb") as fh:
            self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertTrue(os.path.isfile(png[:-4] + ".svg"))
        # Only the device with CUPTI rows: no figure and no "not drawn" entry elsewhere.
        self.assertFalse([f for f in os.listdir(self.out) if f.endswith("_breakdown.png") and "memory" not in f
                          and not f.startswith("nvidia")])
        text = self._readme()
        self.assertNotIn("gpu time by kernel family (cupti) (", text)  # never listed as "not drawn"
        self.assertIn("### GPU time by kernel family (CUPTI)", text)
        self.assertIn("](figures/nvidia-h100-80gb-hbm3_breakdown.png)", text)
        sec = text[text.index("### Where the GPU time goes (CUPTI kernel breakdown)"):]
        sec = sec[:sec.index("\n## ")] if "\n## " in sec else sec
        for needle in (
                "CUPTI overhead: prefill 2%–3% over 4 points; decode 10% over 4 points.",
                "| model | N | B | phase | GPU time | gemm | gret | attention prefill | attention decode | norms | "
                "other | GPU busy | overhead |",
                # shares at each point (sum of the families = 100%), total per prefill / decode step
                "| yoco-3b | 128K | 1 | prefill | 40 ms | 50% | 25% | 12.5% | — | 10% | 2.5% | 97% | 3% |",
                "| yoco-3b | 32K | 1 | decode | 2.5 ms | 60% | 10% | — | 20% | 5% | 5% | 97% | 10% |",
                "| transformer-3b | 128K | 1 | prefill | 40 ms | 40% | — | 50% | — | 8% | 2% | 97% | 3% |",
                # the top kernels at the longest length, family and launches from the notes
                "| yoco-3b | 128K | 1 | prefill | sm90_xmma_gemm_bf16bf16_bf16f32 | gemm | 14 ms | 35% | 52 |",
                "| transformer-3b | 128K | 1 | decode | flash_decode_split | attention_decode | 6 ms | 60% | 26 |"):
            self.assertIn(needle, sec)
        self.assertNotIn("| yoco-3b | 32K | 1 | prefill | sm90", sec)  # top kernels only at the longest length
        # No host API rows in this set: no host table.
        self.assertNotIn("The host's CUDA calls", sec)
        self.assertNotIn("embedding_gather | other | 1 ms", sec)  # 6th of yoco's prefill: not in the top 5
        # The CUPTI kernel rows are not kernel benchmarks: the floors table does not list them.
        floors = text[text.index("### CUDA kernels against their floors"):]
        floors = floors[:floors.index("\n### ", 5)]
        self.assertNotIn("sm90_xmma", floors)
        self.assertIn("a CUPTI kernel breakdown of prefill and decode", text)
        self.assertNotIn("prefill:sm90", text.split("## What was measured")[1].split("\n## ")[0])


    def test_cupti_host_calls_table(self):
        """The host's CUDA calls (--cupti's <phase>.host rows): one table row a point, the top functions."""
        cuda = _Writer(dict(git_sha="0123456789ab", timestamp="2026-11-27T10:00:00Z", host="gpu", device="cuda",
                            device_name="NVIDIA H100 80GB HBM3", driver="CUDA driver 13.0"))
        n = 4 * K
        cuda.add("yoco-small", n, "prefill.gemm", "gpu_time_s", 1e-4, "s", "measured", repeats=1,
                 notes="7 kernels, 20 launches per prefill; CUPTI activity records")
        cuda.add("yoco-small", n, "prefill.kernels", "gpu_time_s", 2.8e-4, "s", "measured", repeats=1)
        cuda.add("yoco-small", n, "prefill.host", "api_enqueue_s", 5.2e-4, "s", "measured", repeats=1,
                 notes="host seconds in CUDA calls that enqueue work or set state, 75 calls per prefill (a driver "
                       "call inside a runtime call counted once: 41 nested); CUPTI runtime and driver API records")
        cuda.add("yoco-small", n, "prefill.host", "api_wait_s", 3e-4, "s", "measured", repeats=1)
        for name, v, calls in (("cudaLaunchKernel", 2e-4, 41), ("cuLaunchKernelEx", 2.5e-4, 20),
                               ("cudaFuncSetAttribute", 4e-5, 4), ("cudaEventRecord", 1e-5, 2)):
            cuda.add("yoco-small", n, "prefill.host:" + name, "api_time_s", v, "s", "measured", repeats=1,
                     notes="runtime, %d calls per prefill; CUPTI runtime and driver API records" % calls)
        cuda.write(os.path.join(self.results, "nvidia-h100", "models.csv"))
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme])
        self.assertEqual(rc, 0, out + err)
        text = self._readme()
        self.assertIn("The host's CUDA calls in the same profiled regions", text)
        self.assertIn("| yoco-small | 4K | 1 | prefill | 520 µs | 75 | 300 µs | cuLaunchKernelEx 250 µs (20 calls); "
                      "cudaLaunchKernel 200 µs (41 calls); cudaFuncSetAttribute 40 µs (4 calls) |", text)
        self.assertNotIn("cudaEventRecord 10", text)  # the top 3 only
        # The host rows are CUPTI rows: not listed as a phase "by part" of the device's runs.
        self.assertNotIn("prefill (also by part)", text)
    def test_cupti_rows_and_notes_as_the_gpu_backend_writes_them(self):
        from yocoreport import breakdown

        class R(object):
            def __init__(self, phase, metric, notes="", method="measured"):
                self.phase, self.metric, self.notes, self.method = phase, metric, notes, method

        for phase, metric, yes in (("prefill.gemm", "gpu_time_s", True), ("decode.kernels", "gpu_busy_fraction", True),
                                   ("decode.kernels", "cupti_overhead_fraction", True),
                                   ("prefill:(rest)", "kernel_time_s", True),
                                   ("decode:flash_decode_split_kernel", "kernel_time_s", True),
                                   ("prefill.gemm", "flops", False),  # the cost model's parts
                                   ("prefill.attention", "gpu_time_s", False),  # not a CUPTI family
                                   ("attn_prefill:D128 v2", "kernel_time_s", False),  # a kernel benchmark
                                   ("prefill", "prefill_latency_s", False)):
            self.assertEqual(breakdown.is_cupti_row(R(phase, metric)), yes, (phase, metric))
        # the cost model's per-family predictions (yoco model --calibration) are no CUPTI records
        self.assertFalse(breakdown.is_cupti_row(R("prefill.gemm", "gpu_time_s", method="calibrated")))
        note = ("family gemm, 52 launches per prefill; CUPTI activity records (concurrent kernel), per prefill")
        self.assertEqual(breakdown.kernel_note(R("prefill:x", "kernel_time_s", note)), ("gemm", "52"))
        rest = ("12 kernels past the first 99.9% of the time, merged (family other), 0.5 launches per decode step; "
                "CUPTI activity records (concurrent kernel), per decode step (16 decode steps profiled)")
        self.assertEqual(breakdown.kernel_note(R("decode:(rest)", "kernel_time_s", rest)), ("other", "0.5"))
        self.assertEqual(breakdown.kernel_note(R("decode:x", "kernel_time_s", "")), ("", ""))

    def test_no_cupti_rows_no_breakdown(self):
        from unittest import mock
        from yocoreport import figures
        make_synthetic(self.results, with_cuda=False)
        # Only the CUPTI figure's choice is under test: the others are not drawn (about 5 s on 2 cores).
        def skipped(data, name, rows, *kind_out_stem):
            return plot.Figure(name, kind_out_stem[-1], reason="not drawn by this test")
        for fn in ("line_figure", "breakdown_figure", "kv_figure"):
            patch = mock.patch.object(figures, fn, skipped)
            patch.start()
            self.addCleanup(patch.stop)
        # No hand-written reasons either: the committed ones cite the GPU run's CUPTI breakdown.
        no_reasons = os.path.join(self.tmp, "no-reasons.csv")
        with open(no_reasons, "w") as f:
            f.write("model,seq_len,metric,reason\n")
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme,
                                            "--differences", no_reasons])
        self.assertEqual(rc, 0, out + err)
        self.assertFalse([f for f in os.listdir(self.out) if f.endswith("_breakdown.png") and "memory" not in f])
        text = self._readme()
        self.assertNotIn("CUPTI", text)
        self.assertNotIn("skip breakdown", out)

    def test_extrapolated_points_drawn_open_with_legend_and_in_paper_table(self):
        from unittest import mock
        from matplotlib.text import Text
        from yocoreport import lines as lines_mod
        make_synthetic(self.results)
        data = plot.load([self.results], None)
        name = "NVIDIA H100 80GB HBM3"
        rows = data.devices()[name]
        seen = {}

        def spy(fig, out_dir, stem):
            ax = fig.axes[0]
            seen["points"] = [(l.get_marker(), l.get_markerfacecolor(), list(l.get_xdata()))
                              for l in ax.get_lines() if len(l.get_xdata()) == 1]
            seen["dotted"] = [list(l.get_xdata()) for l in ax.get_lines() if l.get_linestyle() == ":"]
            seen["texts"] = [t.get_text() for t in fig.findobj(Text)]
            return lines_mod.__dict__["_orig_save"](fig, out_dir, stem)

        lines_mod._orig_save = lines_mod._save
        try:
            for kind, n in (("decode_vs_length", M), ("prefill_vs_length", 512 * K)):
                seen.clear()
                with mock.patch.object(lines_mod, "_save", spy):
                    f = _quiet(plot.line_figure, data, name, rows, kind, self.out, "x_" + kind)[0]
                self.assertTrue(f.paths, kind)
                # the extrapolated point: an open triangle at its length, joined by a dotted segment
                self.assertIn(("^", "white", [n]), seen["points"], kind)
                self.assertTrue(any(n in xs for xs in seen["dotted"]), kind)
                # measured/sampled points stay filled
                self.assertFalse([p for p in seen["points"] if p[0] in ("o", "s") and p[1] == "white"], kind)
                self.assertIn("extrapolated (reduced run, scaled)", seen["texts"], kind)
                self.assertIn("extrapolated", f.title)
        finally:
            del lines_mod._orig_save
        # The paper comparison says how the value was obtained, with the notes of the scaling: a table, which
        # no figure changes, so none is drawn (about 10 s on 2 cores; test_plot_and_report draws them).
        with mock.patch.object(report.plot, "make_figures", lambda data, out: []):
            rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme",
                                                self.readme])
        self.assertEqual(rc, 0, out + err)
        text = self._readme()
        glance = text[:text.index("## What was measured")]
        self.assertIn("| prefill latency, transformer-3b, 512K | ~180 s | Fig. 9 | 98 s | 0.544 | "
                      "extrapolated (2 of 26 layers timed, x13) | NVIDIA H100 80GB HBM3 |", glance)
        self.assertIn("- `extrapolated`: a reduced run scaled up", text)
        # The extrapolated decode point sits beside the point's out_of_memory memory rows; both are shown.
        self.assertIn("| total memory, transformer-3b, 1M | 117 GB (derived) | Fig. 7a | not run (OOM); analytic",
                      glance)

    def test_why_they_differ_column(self):
        make_synthetic(self.results)
        # Every run below reads the same results and differs only in --differences, which no figure shows:
        # no figure is drawn (about 13 s a time on 2 cores; test_plot_and_report draws these results' figures).
        from unittest import mock
        patch = mock.patch.object(report.plot, "make_figures", lambda data, out: [])
        patch.start()
        self.addCleanup(patch.stop)
        diff = os.path.join(self.tmp, "differences.csv")
        with open(diff, "w", encoding="utf-8") as f:
            f.write("# filled after the GPU sweep\n"
                    "model,seq_len,metric,reason\n"
                    "# a comment between lines\n"
                    "\n"
                    "transformer-3b,512K,prefill_latency_s,\"our attention kernel, not theirs: 2 of 26 layers timed\"\n"
                    "yoco-3b vs transformer-3b,32768,prefill_speedup,chunked prefill of 32K tokens\n"
                    "   # an indented comment\n"
                    "transformer-3b,512K,prefill_latency_s,second reason\n"
                    "yoco-3b,12345,prefill_latency_s,no such claim\n")
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme,
                                            "--differences", diff])
        self.assertEqual(rc, 0, out + err)
        text = self._readme()
        glance = text[:text.index("## What was measured")]
        self.assertIn("| claim | paper | where | ours | ours / paper | method | device | why they differ |", glance)
        self.assertIn("| extrapolated (2 of 26 layers timed, x13) | NVIDIA H100 80GB HBM3 | our attention kernel, not "
                      "theirs: 2 of 26 layers timed; second reason |", glance)
        self.assertIn("| analytic | H100 SXM5 80GB (datasheet) | (as above) |", glance)
        self.assertIn("| 2.87× | Fig. 9 |", glance)
        self.assertIn("| chunked prefill of 32K tokens |", glance)
        self.assertIn("no claim of the paper has model 'yoco-3b', length 12345", err)
        # Reasons for a card whose results were not read, on claims the paper has: one line naming the card
        # (a partial results folder gave a line per reason; a misspelt card still shows).
        diff2 = os.path.join(self.tmp, "differences2.csv")
        with open(diff2, "w", encoding="utf-8") as f:
            f.write("model,seq_len,metric,device,reason\n"
                    "transformer-3b,512K,prefill_latency_s,NVIDIA B200,a card not read here\n"
                    "yoco-3b,12345,prefill_latency_s,,no such claim\n")
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme,
                                            "--differences", diff2])
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(err.count("B200"), 1, err)
        self.assertIn("1 reason(s) for cards whose rows were not read here, not shown: no device named like "
                      "'NVIDIA B200'", err)
        self.assertIn("no claim of the paper has model 'yoco-3b', length 12345", err)
        # A reason for one card's rows (the device column): on that card's row, the others keep theirs.
        with open(diff, "w", encoding="utf-8") as f:
            f.write("model,seq_len,metric,device,reason\n"
                    "transformer-3b,512K,prefill_latency_s,,for every card\n"
                    "transformer-3b,512K,prefill_latency_s,h100 80gb,for the measured H100 only\n"
                    "transformer-3b,512K,prefill_latency_s,H200,no H200 row here\n")
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme,
                                            "--differences", diff])
        self.assertEqual(rc, 0, out + err)
        glance = self._readme()[:self._readme().index("## What was measured")]
        self.assertIn("| NVIDIA H100 80GB HBM3 | for the measured H100 only |", glance)
        self.assertIn("| H100 SXM5 80GB (datasheet) | for every card |", glance)
        self.assertNotIn("no H200 row here", glance)
        self.assertIn("not shown: no device named like 'H200'", err)
        # Without reasons the column is there, empty.
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("| why they differ |", self._readme())
        self.assertNotIn("second reason", self._readme())
        # A malformed file: exit 2 naming file and line.
        for content, line, frag in (("model,seq_len,metric\n", 1, "the header must be"),
                                    ("model,seq_len,metric,device,reason\nyoco-3b,32K,prefill_latency_s,x\n", 2,
                                     "4 fields, a line has 5"),
                                    ("# c\nmodel,seq_len,metric,reason\nyoco-3b,32K,prefill_latency_s\n", 3,
                                     "3 fields"),
                                    ("model,seq_len,metric,reason\nyoco-3b,32Q,prefill_latency_s,x\n", 2,
                                     "column seq_len"),
                                    ("model,seq_len,metric,reason\nyoco-3b,32K,prefill_latency_s,\n", 2,
                                     "must not be empty"),
                                    ("", 1, "no header line"), ("# a comment alone\n\n", 1, "no header line")):
            with open(diff, "w") as f:
                f.write(content)
            rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme",
                                                self.readme, "--differences", diff])
            self.assertEqual(rc, 2, out + err)
            self.assertIn("%s:%d:" % (diff, line), err)
            self.assertIn(frag, err)
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme,
                                            "--differences", os.path.join(self.tmp, "absent.csv")])
        self.assertEqual(rc, 2, out + err)
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme,
                                            "--differences", self.tmp])
        self.assertEqual(rc, 2, out + err)
        self.assertIn("%s: not a file (given as --differences)" % self.tmp, err)

    def test_calibrated_rows_are_predictions_not_measurements_nor_cupti(self):
        # `yoco model --calibration ... --out` rows (method calibrated, and prefill.<family> gpu_time_s of the
        # model): each warned "unknown method ... drawn as measured", the README announced a CUPTI breakdown and
        # drew one from the model's family rows, and the paper table gave the predicted points a measured H200
        # run's hand-written reason (matched by the card's name in "calibrated: H200 ...").
        from unittest import mock
        from matplotlib.text import Text
        from yocoreport import lines as lines_mod
        from yocoreport.breakdown import is_cupti_row
        from yocoreport.style import plt
        name = "calibrated: H200 SXM 141GB (datasheet)"
        w = _Writer(dict(git_sha="abc", timestamp="2026-11-29T10:00:00Z", host="h", device="calibrated",
                         device_name=name, driver=""))
        for model, base in (("yoco-3b", 0.35), ("transformer-3b", 1.7)):
            for n in (128 * K, 256 * K, 512 * K, M):
                t = base * n / (64 * K)
                w.add(model, n, "prefill", "prefill_latency_s", t, "s", "calibrated", lo=0.95 * t, hi=1.05 * t)
                for fam, share in (("gemm", 0.7), ("gret", 0.1), ("attention", 0.2)):
                    w.add(model, n, "prefill." + fam, "gpu_time_s", share * t, "s", "calibrated")
            w.add(model, M, "memory", "mem_total_bytes", 13.5e9 if model == "yoco-3b" else 121e9, "B", "calibrated")
        path = w.write(os.path.join(self.results, "h200.csv"))
        diff = os.path.join(self.tmp, "differences.csv")
        with open(diff, "w", encoding="utf-8") as f:
            f.write("model,seq_len,metric,device,reason\n"
                    "yoco-3b,512K,prefill_latency_s,H200,measured on the H200 in run-04\n"
                    "yoco-3b,1M,mem_total_bytes,H200,counted on the H200 in run-04\n")
        data, _out, err = _quiet(plot.load, [path], None, diff)
        self.assertNotIn("unknown method", err)
        rows = data.devices()[name]
        self.assertFalse([r for r in rows if is_cupti_row(r)])
        # drawn as a prediction: its own marker (not the measured filled circle), dash-dot, legend says calibrated
        seen = {}

        def spy(fig, out_dir, stem):
            ax = fig.axes[0]
            seen["markers"] = set(l.get_marker() for l in ax.get_lines() if len(l.get_xdata()) == 1)
            seen["styles"] = set(l.get_linestyle() for l in ax.get_lines() if len(l.get_xdata()) > 1)
            seen["texts"] = [t.get_text() for t in fig.findobj(Text)]
            plt.close(fig)
            return []

        with mock.patch.object(lines_mod, "_save", spy):
            _quiet(plot.line_figure, data, name, rows, "prefill_vs_length", self.out, "x")
        self.assertEqual(seen["markers"], {plot.METHOD_STYLE["calibrated"][0]})
        self.assertNotIn("o", seen["markers"])
        self.assertEqual(seen["styles"], {"-."})
        self.assertIn(plot.METHOD_LEGEND["calibrated"], seen["texts"])
        # The README: no CUPTI section nor breakdown figure; the method listed; no measured run's reason.
        rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme", self.readme,
                                            "--differences", diff])
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("unknown method", err)
        text = self._readme()
        self.assertNotIn("CUPTI", text)
        self.assertFalse([f for f in os.listdir(self.out) if "breakdown" in f and "memory" not in f])
        self.assertIn("- `calibrated`: from the cost model corrected by", text)
        glance = text[:text.index("## What was measured")]
        self.assertIn("| 2.8 s | 0.467 | calibrated | %s |  |" % name, glance)
        self.assertNotIn("run-04", text)
        self.assertIn("2 reason(s) for cards whose rows were not read here, not shown: no device named like 'H200' "
                      "with a run", err)
        # Beside a measured run of the card, the run takes its reason and the prediction still none.
        w2 = _Writer(dict(git_sha="abc", timestamp="2026-11-29T10:00:00Z", host="h", device="cuda",
                          device_name="NVIDIA H200", driver="570"))
        w2.add("yoco-3b", 512 * K, "prefill", "prefill_latency_s", 2.86, "s", "measured")
        w2.write(os.path.join(self.results, "run.csv"))
        with mock.patch.object(report.plot, "make_figures", lambda data, out: []):
            rc, out, err = _quiet(report.main, ["--results", self.results, "--out", self.out, "--readme",
                                                self.readme, "--differences", diff])
        self.assertEqual(rc, 0, out + err)
        glance = self._readme()[:self._readme().index("## What was measured")]
        self.assertIn("| measured | NVIDIA H200 | measured on the H200 in run-04 |", glance)
        self.assertIn("| calibrated | %s |  |" % name, glance)

    def test_committed_differences_file(self):
        path = os.path.join(HERE, "paper", "differences.csv")
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        self.assertTrue(lines[0].startswith("#"), "explain the file in a comment first")
        self.assertIn("model,seq_len,metric,device,reason", lines)
        got = plot.read_differences(path)
        # (one result row: a results folder holding no CSV is refused, test_empty_results_folder_exit_2)
        w = _Writer(dict(git_sha="x", timestamp="2026-11-21T10:00:00Z", host="h", device="cpu", device_name="CPU",
                         driver=""))
        w.add("yoco-tiny", 1024, "prefill", "prefill_latency_s", 0.5, "s", "measured")
        w.write(os.path.join(self.results, "one.csv"))
        paper = _quiet(plot.load, [self.results], None)[0]  # the default paper folder: differences.csv is no paper CSV
        self.assertNotIn(path, [os.path.abspath(p) for p in paper.paper_files])
        self.assertTrue(paper.paper)
        self.assertEqual(paper.differences, got)
        # Every reason written names a claim of the paper.
        claims = set((p.model, p.seq_len, p.metric) for p in paper.paper)
        for k in got:
            self.assertIn(k[:3], claims)

    def test_two_cards_pair_one_revisions_kernel_rows_by_family(self):
        from yocoreport import two_cards
        header = ["git_sha", "timestamp", "host", "device", "device_name", "driver", "model", "seq_len", "batch",
                  "gen_tokens", "phase", "metric", "value", "unit", "method", "repeats", "min", "max", "notes"]

        def write(card, sub, sha, device_name, copy, times):
            folder = os.path.join(self.results, card, *sub)
            os.makedirs(folder, exist_ok=True)
            rows = [[sha, "t", "h", "cuda", device_name, "", "-", "0", "1", "0", "ceiling", "copy_bw_gbs",
                     repr(copy), "GB/s", "measured", "1", "", "", ""],
                    [sha, "t", "h", "cuda", device_name, "", "-", "0", "1", "0", "ceiling", "gemm_peak_tflops",
                     "780.0", "TFLOP/s", "measured", "1", "", "", ""]]
            for phase, t in times.items():
                rows.append([sha, "t", "h", "cuda", device_name, "", "yoco-3b", "32768", "1", "0", phase,
                             "kernel_time_s", repr(t), "s", "measured", "20", "", "", ""])
            with open(os.path.join(folder, "kernels.csv"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(header)
                w.writerows(rows)
        # Card A's rows of revision abc in a run's logs, card B's at its top; revision old only on A.
        write("card-a", ("logs", "run-1"), "abc", "Card A", 3000.0,
              {"swiglu:rows": 1.4e-3, "gret_chunk:v6": 1.0e-3, "gret_chunk:v3": 1.2e-3, "only_a:x": 1.0})
        write("card-b", (), "abc-dirty", "Card B", 4200.0,
              {"swiglu:rows": 1.0e-3, "gret_chunk:v6": 1.0e-3, "gret_chunk:v3": 1.0e-3, "only_b:x": 1.0})
        write("card-a", (), "old", "Card A", 3000.0, {"swiglu:rows": 9.0})
        cards = [os.path.join(self.results, c) for c in ("card-a", "card-b")]
        self.assertEqual(two_cards.card_dirs_of([os.path.join(cards[1], "sweep.csv"), os.path.join(cards[0], "k.csv"),
                                                 os.path.join(cards[0], "x.csv")]), cards)
        found = two_cards.pairs(cards)
        self.assertEqual([(sha, a[0], b[0]) for sha, a, b in found], [("abc", "Card A", "Card B")])
        ratios = two_cards.family_ratios(found[0][1][1], found[0][2][1])
        self.assertEqual(list(ratios), ["gret_chunk", "swiglu"])  # rows both ran, by family
        self.assertAlmostEqual(ratios["swiglu"][0], 1.4)
        self.assertEqual(sorted(round(r, 3) for r in ratios["gret_chunk"]), [1.0, 1.2])
        table = lambda h, b: "\n".join(" | ".join(r) for r in [h] + b)  # noqa: E731
        text = "\n".join(two_cards.two_cards_section(table, os.path.basename, cards))
        self.assertIn("copy bandwidth 1.40x, GEMM rate 1.00x", text)
        self.assertIn("gret_chunk | 2 | 1.10x | 1.00-1.20x", text)
        self.assertIn("swiglu | 1 | 1.40x | 1.40-1.40x", text)
        # No revision on two cards: no section.
        shutil.rmtree(os.path.join(self.results, "card-b"))
        self.assertEqual(two_cards.two_cards_section(table, os.path.basename, cards), [])

    def test_chunk_tradeoff_pairs_calibrated_and_measured_by_their_notes(self):
        from yocoreport import chunks
        header = ["git_sha", "timestamp", "host", "device", "device_name", "driver", "model", "seq_len", "batch",
                  "gen_tokens", "phase", "metric", "value", "unit", "method", "repeats", "min", "max", "notes"]

        def row(n, phase, metric, v, method, notes, model="yoco-3b", batch="1"):
            return {"git_sha": "x", "timestamp": "t", "host": "h", "device": "cuda", "device_name": "d",
                    "driver": "", "model": model, "seq_len": str(n), "batch": batch, "gen_tokens": "0",
                    "phase": phase, "metric": metric, "value": "%r" % v, "unit": "", "method": method,
                    "repeats": "1", "min": "%r" % (0.95 * v), "max": "%r" % (1.05 * v), "notes": notes}

        def write(path, rows):
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=header)
                w.writeheader()
                w.writerows(rows)
        cal, meas = os.path.join(self.tmp, "chunks-h100.csv"), os.path.join(self.tmp, "chunks.csv")
        rows = []
        for n in (512 * K, M):
            s = n / (512 * K)
            rows += [row(n, "prefill", "prefill_latency_s", 3.1 * s, "calibrated", "c; prefill chunk 32768 tokens"),
                     row(n, "memory", "mem_total_bytes", 14.5e9 * s, "calibrated", "c; prefill chunk 32768 tokens"),
                     row(n, "prefill", "prefill_latency_s", 3.1 * s, "calibrated",
                         "c; prefill chunk 16384 tokens; FFN in row blocks of 4096"),
                     row(n, "memory", "mem_total_bytes", 12.3e9 * s, "calibrated",
                         "c; prefill chunk 16384 tokens; FFN in row blocks of 4096"),
                     row(n, "prefill.gemm", "gpu_time_s", 2.0, "calibrated", "c; prefill chunk 16384 tokens"),
                     row(n, "prefill", "prefill_latency_s", 9.9, "calibrated", "c", model="transformer-3b")]
        write(cal, rows)
        self.assertEqual(chunks.config_of("median of 2; prefill chunk 16384; FFN in row blocks of 4096"),
                         (16384, 4096, False, False, False, False, False, ""))
        self.assertEqual(chunks.config_of("x; FFN up half fused"), (32768, 0, True, False, False, False, False, ""))
        self.assertEqual(chunks.config_of("x; FFN up half fused in CTA pairs"), (32768, 0, 2, False, False, False, False, ""))
        self.assertEqual(chunks.label((32768, 0, 2, False, False, False, False, "")), "chunk 32768, FFN up fused in CTA pairs")
        self.assertEqual(chunks.config_of("x; a buffer each for the prefill's sublayers"),
                         (32768, 0, False, True, False, False, False, ""))
        self.assertEqual(chunks.config_of("x; prefill chunk 16384; GEMM algorithms tuned at first use"),
                         (16384, 0, False, False, True, False, False, ""))
        self.assertEqual(chunks.config_of("x; residual added in the GEMMs' epilogue"),
                         (32768, 0, False, False, False, True, False, ""))
        self.assertEqual(chunks.config_of("x; residual stored once a layer"),
                         (32768, 0, False, False, False, False, True, ""))
        self.assertEqual(chunks.label((32768, 0, False, False, False, False, True, "")),
                         "chunk 32768, residual stored once a layer")
        self.assertEqual(chunks.config_of("x; residual stored once a layer; gRet chunk kernel v7 named"),
                         (32768, 0, False, False, False, False, True, "v7"))
        self.assertEqual(chunks.label((32768, 0, False, False, False, False, True, "v7")),
                         "chunk 32768, residual stored once a layer, gRet chunk v7")
        self.assertEqual(chunks.label((16384, 0, True, False, False, False, False, "")), "chunk 16384, FFN up fused")
        self.assertEqual(chunks.label((32768, 0, False, True, False, False, False, "")), "chunk 32768, sublayer buffers apart")
        self.assertEqual(chunks.label((32768, 0, False, False, True, False, False, "")), "chunk 32768, GEMMs tuned")
        self.assertEqual(chunks.label((32768, 0, False, False, True, True, False, "")),
                         "chunk 32768, GEMMs tuned, residual in the GEMMs")
        table = lambda h, b: "\n".join(" | ".join(r) for r in [h] + b)  # noqa: E731
        rel = lambda p: os.path.basename(p)  # noqa: E731
        # Without measured rows: calibrated only, and the section says none are measured yet.
        lines = chunks.chunk_section(cal, meas, table, rel, self.out)
        text = "\n".join(lines)
        self.assertIn("measured: none yet", text)
        self.assertIn("chunk 32768 | 14.50 / — | 29.00 / — | 3.1 / — | 6.2 / —", text)
        self.assertIn("chunk 16384, FFN rows 4096 | 12.30 / — | 24.60 / — | 3.1 / — | 6.2 / —", text)
        self.assertNotIn("9.9", text)  # the Transformer's row
        # The measured run: memory and prefill rows in the words the sweep writes, paired with the calibrated
        # configuration they name; a configuration the model did not project gets a row of its own.
        write(meas, [row(M, "prefill", "prefill_latency_s", 6.4, "measured",
                         "median of 2 after 1 warm-up; prefill chunk 16384; FFN in row blocks of 4096"),
                     row(M, "memory", "mem_total_bytes", 12.41e9, "measured",
                         "the device arena's buffers; YOCO's prefill delta in the normed rows; FFN in row blocks "
                         "of 4096; prefill chunk 16384"),
                     row(M, "memory", "mem_total_bytes", 13.1e9, "measured", "buffers; prefill chunk 8192"),
                     row(M, "prefill", "prefill_latency_s", 6.6, "measured", "median; prefill chunk 8192")])
        text = "\n".join(chunks.chunk_section(cal, meas, table, rel, self.out))
        self.assertIn("measured: [chunks.csv](chunks.csv)", text)
        self.assertIn("chunk 16384, FFN rows 4096 | 12.30 / — | 24.60 / 12.41 | 3.1 / — | 6.2 / 6.4", text)
        self.assertIn("chunk 8192 | — / — | — / 13.10 | — / — | — / 6.6", text)
        png = os.path.join(self.out, "chunk_tradeoff_nvidia-h100.png")
        self.assertIn("](chunk_tradeoff_nvidia-h100.png)", text)
        with open(png, "rb") as fh:
            self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n")
        # No calibrated file: no section.
        self.assertEqual(chunks.chunk_section(os.path.join(self.tmp, "none.csv"), meas, table, rel, self.out), [])

    def test_second_card_check_states_its_ceilings_and_the_goal(self):
        from yocoreport import calibrated
        header = ["git_sha", "timestamp", "host", "device", "device_name", "driver", "model", "seq_len", "batch",
                  "gen_tokens", "phase", "metric", "value", "unit", "method", "repeats", "min", "max", "notes"]

        def write(name, ceilings, points):
            path = os.path.join(self.tmp, name)
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=header)
                w.writeheader()
                for model, n, metric, predicted, measured in points:
                    w.writerow({"git_sha": "x", "timestamp": "t", "host": "h", "device": "calibrated",
                                "device_name": "calibrated model of NVIDIA H100 80GB HBM3", "driver": "",
                                "model": model, "seq_len": str(n), "batch": "1", "gen_tokens": "0",
                                "phase": metric.split("_")[0], "metric": metric, "value": "%r" % predicted,
                                "unit": "s", "method": "calibrated", "repeats": "0", "min": "", "max": "",
                                "notes": "measured %.6g; predicted / measured %.4f; ceilings: %s" % (
                                    measured, predicted / measured, ceilings)})
            return path
        table = lambda h, b: "\n".join(" | ".join(r) for r in [h] + b)  # noqa: E731
        rel = lambda p: os.path.basename(p)  # noqa: E731
        proj = write("check-nvidia-h100-on-nvidia-h200.csv", "H200 SXM 141GB (datasheet) scaled by H100's ratios",
                     [("yoco-3b", 32 * K, "prefill_latency_s", 0.17, 0.15),
                      ("yoco-3b", 32 * K, "decode_step_latency_s", 0.0030, 0.0031)])
        text = "\n".join(calibrated.second_card_section(proj, table, rel))
        self.assertIn("another card (nvidia-h200; the projection)", text)
        self.assertIn("on H200 SXM 141GB (datasheet) scaled by H100's ratios", text)
        self.assertIn("prefill s 13.3%", text)
        self.assertIn("0 of 2 points outside the ±20% goal", text)
        self.assertIn("yoco-3b | 32K | 1 | prefill s | 0.17 / 0.15 = 1.133", text)
        own = write("check-nvidia-h100-on-nvidia-h200-run-ceilings.csv", "the run's measured ceilings (NVIDIA H200)",
                    [("transformer-3b", 64 * K, "prefill_latency_s", 0.5, 0.8)])
        text = "\n".join(calibrated.second_card_section(own, table, rel))
        self.assertIn("another card (nvidia-h200; its own measured ceilings)", text)
        self.assertIn("1 of 1 points outside the ±20% goal", text)
        self.assertEqual(calibrated.second_card_section(write("check-nvidia-h100-on-x.csv", "c", []), table, rel),
                         [])

    def test_in_sample_check_takes_the_fitted_cards_rows_only(self):
        # The H200's yoco-3b 512K run (long-points.csv) shares model, length and metric with the H100 sweep the
        # calibration was fitted on; the in-sample table must show the H100's 3.249 s, not the H200's 2.859 s.
        from yocoreport import calibrated
        from yocoreport import data as yd
        import report
        dat = yd.load()
        text = "\n".join(calibrated.calibrated_section(dat, report.table, self.tmp, self.out))
        rows = [line for line in text.splitlines() if line.startswith("| yoco-3b | 512K |")]
        self.assertTrue(rows, "no in-sample row for yoco-3b at 512K")
        self.assertIn(" / 3.249 = ", rows[0])

    def test_scripts_run_by_path(self):
        make_synthetic(self.results, with_cuda=False)
        exe = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        r = subprocess.run([exe, os.path.join(HERE, "plot.py"), "--results", self.results, "--out", self.out],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("wrote", r.stdout)
        bad = os.path.join(self.tmp, "bad.csv")
        with open(bad, "w") as f:
            f.write("not,a,result\n")
        r = subprocess.run([exe, os.path.join(HERE, "report.py"), bad, "--out", self.out, "--readme", self.readme],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(bad + ":1:", r.stderr)

    def test_a_closed_stdout_or_ctrl_c_is_no_traceback_and_no_torn_output(self):
        # `report.py | head`: the BrokenPipeError of a progress line was caught as "cannot write a figure", exit 2,
        # and the README was not written; plot.py printed a traceback. Ctrl-C printed a KeyboardInterrupt traceback.
        # Now the end by the signal, as the C++ yoco ends, with the outputs whole (the earlier ones or the new).
        import signal
        make_synthetic(self.results, with_cuda=False)
        exe = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        for tool in ("plot.py", "report.py"):
            args = [exe, os.path.join(HERE, tool), "--results", self.results, "--out", self.out]
            if tool == "report.py":
                args += ["--readme", self.readme]
            r, w = os.pipe()
            os.close(r)
            try:
                p = subprocess.run(args, stdout=w, stderr=subprocess.PIPE, universal_newlines=True)
            finally:
                os.close(w)
            self.assertEqual(p.returncode, -signal.SIGPIPE, tool + ": " + p.stderr)
            self.assertNotIn("Traceback", p.stderr, tool)
            self.assertNotIn("cannot write", p.stderr, tool)
            # The SIGINT must come while the tool provably still has work to do, or nothing is checked: after its
            # first line (the files are read, figures are being drawn) it is stopped (SIGSTOP; waitpid says it
            # is stopped, not gone) and what it printed so far is read; if its last line ("... written to" /
            # "wrote README") is not out and the README is still the earlier one, it has not finished, so SIGINT
            # then SIGCONT must end it by SIGINT. Otherwise (it finished within a moment: a machine too slow to
            # stop it in time) it is run again; never interrupted in 3 runs is a failure, not a pass.
            last = "figure(s) written to" if tool == "plot.py" else "wrote " + self.readme
            for attempt in range(3):
                with open(self.readme, "w") as f:
                    f.write("earlier")
                p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
                fd = p.stdout.fileno()
                said = b""
                while b"\n" not in said:
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break
                    said += chunk
                p.send_signal(signal.SIGSTOP)  # (not sent if it has already ended and been reaped by send_signal)
                if p.returncode is None:
                    _pid, status = os.waitpid(p.pid, os.WUNTRACED)
                    if not os.WIFSTOPPED(status):  # it ended (and is reaped here): Popen is told how
                        p.returncode = os.waitstatus_to_exitcode(status)
                if p.returncode is not None:
                    p.communicate(timeout=120)
                    continue
                os.set_blocking(fd, False)
                try:
                    while True:
                        chunk = os.read(fd, 65536)
                        if not chunk:
                            break
                        said += chunk
                except BlockingIOError:
                    pass
                os.set_blocking(fd, True)
                with open(self.readme) as f:
                    running = last not in said.decode() and f.read() == "earlier"
                p.send_signal(signal.SIGINT)
                p.send_signal(signal.SIGCONT)
                out, err = p.communicate(timeout=120)
                err = err.decode()
                if running:
                    break
            else:
                self.fail("%s: finished before the SIGINT in all 3 runs: the interruption was never checked" % tool)
            self.assertEqual(p.returncode, -signal.SIGINT, tool + ": " + err)
            self.assertNotIn("Traceback", err, tool)
            self.assertEqual(err.strip().splitlines(), ["%s: interrupted (SIGINT)" % tool], tool)
            with open(self.readme) as f:
                self.assertEqual(f.read(), "earlier")
            # (--out is made after the first line: the signal may come before it)
            self.assertFalse([n for d in (self.tmp, self.out) if os.path.isdir(d) for n in os.listdir(d)
                              if n.endswith(".tmp")])

    def test_sigterm_removes_the_temporary_file_and_says_one_line(self):
        # `timeout -s TERM 10 plot.py ...` ended it on the spot: no message, and a `.<name>.png.<rand>.tmp` left in
        # the output folder. Now as SIGINT: the temporary file removed, one line, the end by the signal (143).
        import signal
        exe = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        target = os.path.join(self.out, "fig.png")
        # Deterministic: the SIGTERM comes inside the atomic write of a figure.
        script = ("import os, signal, sys, time\n"
                  "sys.path.insert(0, %r)\n"
                  "from yocoreport.atomic import replacing\n"
                  "from yocoreport.cli import run_main\n"
                  "def main():\n"
                  "    with replacing(%r) as f:\n"
                  "        f.write(b'half a figure')\n"
                  "        os.kill(os.getpid(), signal.SIGTERM)\n"
                  "        time.sleep(30)\n"
                  "    return 0\n"
                  "run_main(main, 'plot.py')\n" % (HERE, target))
        p = subprocess.run([exe, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertEqual(p.returncode, -signal.SIGTERM, p.stderr)
        self.assertEqual(p.stderr.strip().splitlines(), ["plot.py: interrupted (SIGTERM)"])
        self.assertEqual(os.listdir(self.out), [])
        # The tool itself, terminated while it draws (its first line is out before any figure is drawn).
        make_synthetic(self.results, with_cuda=False)
        out2 = os.path.join(self.tmp, "figures2")
        p = subprocess.Popen([exe, os.path.join(HERE, "plot.py"), "--results", self.results, "--out", out2],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
        p.stdout.readline()
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, -signal.SIGTERM, err)
        self.assertEqual(err.decode().strip().splitlines(), ["plot.py: interrupted (SIGTERM)"])
        self.assertFalse([n for n in os.listdir(out2) if n.endswith(".tmp")] if os.path.isdir(out2) else [])

    def test_bad_options_are_one_line_exit_2(self):
        exe = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        for tool in ("plot.py", "report.py"):
            for args, fragment in ((["--bogus"], "unrecognized arguments: --bogus"),
                                   (["--out"], "argument --out: expected one argument"),
                                   (["--paper", self.tmp, "--no-paper"], "argument --no-paper: not allowed with argument")):
                r = subprocess.run([exe, os.path.join(HERE, tool)] + args, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, universal_newlines=True)
                self.assertEqual((r.returncode, r.stdout), (2, ""), r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertIn("%s: error: %s" % (tool, fragment), r.stderr)
            r = subprocess.run([exe, os.path.join(HERE, tool), "--help"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("model,seq_len,metric[,device],reason", " ".join(r.stdout.split()))  # both forms read


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--make-synthetic":
        for p in make_synthetic(sys.argv[2]):
            print("wrote", p)
        sys.exit(0)
    unittest.main()
