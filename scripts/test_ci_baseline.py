#!/usr/bin/python3
"""scripts/ci_baseline.py on small files of the bench's schema: the nearest host's baseline is picked (a warning
where none is of the same kind), --update's path is that baseline or a new file, the counted rows reach every other
baseline and nothing else of theirs changes, and a file without ceilings exits 2 naming it; and the scripts that
read result CSVs through scripts/result_rows.py exit 2 with one line naming a file that is not one.
Run: /usr/bin/python3 -m unittest discover -s scripts -p test_ci_baseline.py"""
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "ci_baseline.py")
HEADER = ["git_sha", "timestamp", "host", "device", "device_name", "driver", "model", "seq_len", "batch",
          "gen_tokens", "phase", "metric", "value", "unit", "method", "repeats", "min", "max", "notes"]


def _row(phase, metric, value, method="measured", model="-"):
    r = dict.fromkeys(HEADER, "")
    r.update(model=model, seq_len="1024", batch="2", gen_tokens="0", phase=phase, metric=metric, value=repr(value),
             method=method, device="cpu", device_name="ci-cpu")
    return r


def _write(path, gemm, copy, flops=1.0, prefill=2.0):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        if gemm is not None:
            w.writerow(_row("ceiling", "gemm_peak_tflops", gemm))
            w.writerow(_row("ceiling", "copy_bw_gbs", copy))
        w.writerow(_row("prefill", "flops", flops, "analytic", "yoco-tiny"))
        w.writerow(_row("prefill", "prefill_latency_s", prefill, "measured", "yoco-tiny"))


def _run(*args):
    p = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout.strip(), p.stderr


def _text(path):
    with open(path) as f:
        return f.read()


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class CiBaselineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="yoco-ci-baseline-")
        self.dir = os.path.join(self.tmp, "ci-cpu")
        os.makedirs(self.dir)
        self.slow = os.path.join(self.dir, "gemm-69gflops-copy-10gbs.csv")
        self.fast = os.path.join(self.dir, "gemm-105gflops-copy-23gbs.csv")
        _write(self.slow, 0.069, 10.4)
        _write(self.fast, 0.105, 22.8, prefill=1.0)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_the_nearest_host_is_picked_and_a_stranger_is_warned_about(self):
        run = os.path.join(self.tmp, "run.csv")
        _write(run, 0.090, 20.0)  # within 25% of the fast host on both ceilings
        rc, out, err = _run("pick", run, self.dir)
        self.assertEqual((rc, out), (0, self.fast), err)
        self.assertNotIn("WARNING", err)
        _write(run, 0.070, 10.0)
        self.assertEqual(_run("pick", run, self.dir)[1], self.slow)
        _write(run, 0.300, 60.0)  # like neither: the nearest, said
        rc, out, err = _run("pick", run, self.dir)
        self.assertEqual((rc, out), (0, self.fast))
        self.assertIn("WARNING: no baseline from a host within 25% of this one's ceilings", err)

    def test_update_writes_its_kinds_file_or_a_new_one(self):
        run = os.path.join(self.tmp, "run.csv")
        _write(run, 0.100, 21.0)
        self.assertEqual(_run("name", run, self.dir)[1], self.fast)
        _write(run, 0.300, 60.0)
        self.assertEqual(_run("name", run, self.dir)[1], os.path.join(self.dir, "gemm-300gflops-copy-60gbs.csv"))
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        self.assertEqual(_run("pick", run, empty)[0], 2)

    def test_counted_rows_reach_every_other_baseline_and_timings_stay(self):
        _write(self.fast, 0.105, 22.8, flops=7.0, prefill=1.0)  # the models changed: new counted rows
        rc, _, err = _run("counted", self.fast, self.dir, "flops,bytes")
        self.assertEqual(rc, 0, err)
        slow = {(r["phase"], r["metric"]): r["value"] for r in _rows(self.slow)}
        self.assertEqual(slow[("prefill", "flops")], "7.0")
        self.assertEqual(slow[("prefill", "prefill_latency_s")], "2.0")  # its own timing
        self.assertEqual(slow[("ceiling", "copy_bw_gbs")], "10.4")  # its own host
        self.assertEqual(len(_rows(self.slow)), 4)
        self.assertFalse([f for f in os.listdir(self.dir) if f.endswith(".tmp")])

    def test_a_file_without_ceilings_exits_2_naming_it(self):
        bad = os.path.join(self.tmp, "bad.csv")
        _write(bad, None, None)
        rc, _, err = _run("pick", bad, self.dir)
        self.assertEqual(rc, 2)
        self.assertIn(bad, err)
        self.assertIn("no measured ceiling rows", err)
        self.assertEqual(_run("pick", bad)[0], 2)  # usage

    def test_bad_ceilings_folders_and_metrics_exit_2_with_one_line(self):
        run = os.path.join(self.tmp, "run.csv")
        _write(run, -0.1, 10.0)  # a ceiling that is not above 0 (log of it: a traceback before)
        rc, _, err = _run("pick", run, self.dir)
        self.assertEqual((rc, len(err.strip().splitlines())), (2, 1), err)
        self.assertIn("gemm_peak_tflops is -0.1", err)
        _write(run, 0.1, 20.0)
        rc, _, err = _run("pick", run, run)  # DIR a file
        self.assertEqual(rc, 2, err)
        self.assertIn("%s: not a folder" % run, err)
        before = {p: _text(p) for p in (self.slow, self.fast)}
        rc, _, err = _run("counted", self.fast, self.dir, "flopz")  # a misspelt metric: nothing changes
        self.assertEqual(rc, 2, err)
        self.assertIn("no rows of the metrics 'flopz'", err)
        with open(self.slow, "a") as f:
            f.write("truncated,row\n")
        before[self.slow] = _text(self.slow)
        rc, _, err = _run("counted", self.fast, self.dir, "flops")  # a malformed baseline: nothing changes
        self.assertEqual(rc, 2, err)
        self.assertIn(self.slow + ":6:", err)
        self.assertEqual(before, {p: _text(p) for p in (self.slow, self.fast)})
        rc, out, err = _run("--help")
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("ci_baseline.py pick RUN.csv DIR", out)


GOOD = ("abc1234,2026-11-27T00:00:00Z,h,cuda,gpu,,yoco-3b,1024,1,0,prefill,prefill_latency_s,0.5,s,measured,3,0.4,"
        "0.6,note\n")


class BadResultFilesTest(unittest.TestCase):
    """The scripts that read result CSVs (scripts/result_rows.py): a file that is not one exits 2 with one line on
    stderr naming it (and the line and column where there is one), never a traceback; a UTF-8 BOM is fine."""
    SCRIPTS = (["model_headlines.py"], ["sweep_headlines.py"], ["ci_baseline.py", "pick"], ["gpu_headlines.py"],
               ["result_rows.py", "merge"])

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="yoco-result-rows-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _file(self, name, content):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
        return path

    def _run(self, script, path):
        args = [sys.executable, os.path.join(HERE, script[0])] + script[1:] + [path]
        if script[0] == "ci_baseline.py":
            args.append(self.tmp)
        return subprocess.run(args, capture_output=True, text=True)

    def test_bad_files_exit_2_naming_file_and_line(self):
        header = ",".join(HEADER) + "\n"
        cases = [
            (self._file("missing.csv", header.replace(",notes", "") + GOOD.replace(",note", "")), ":1:",
             "missing column(s) notes"),
            (self._file("extra.csv", header.replace("notes", "notes,x") + GOOD.replace("note", "note,x")), ":1:",
             "unexpected column(s) 'x'"),
            (self._file("truncated.csv", header + GOOD + GOOD[:40]), ":3:", "fields, a result row has 19"),
            (self._file("number.csv", header + GOOD.replace("0.5,s", "fast,s")), ":2:", "column value"),
            (self._file("nan.csv", header + GOOD.replace("0.5,s", "nan,s")), ":2:", "not a finite number"),
            (self._file("inf.csv", header + GOOD.replace("0.4,", "inf,")), ":2:", "column min"),
            (self._file("int.csv", header + GOOD.replace(",1024,", ",1k,")), ":2:", "column seq_len"),
            (self._file("binary.csv", b"\x00\xff\xfe"), ":1:", "not UTF-8"),
            (self._file("empty.csv", ""), ":1:", "empty file"),
            (os.path.join(self.tmp, "none.csv"), "", "cannot read"),
            (self.tmp, "", "cannot read"),
        ]
        for script in self.SCRIPTS:
            for path, line, fragment in cases:
                p = self._run(script, path)
                what = "%s %s: %s" % (script[0], os.path.basename(path), p.stderr)
                self.assertEqual(p.returncode, 2, what)
                self.assertNotIn("Traceback", p.stderr, what)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, what)
                self.assertIn(path + line, p.stderr, what)
                self.assertIn(fragment, p.stderr, what)

    def test_merge_keeps_the_latest_row_of_each_key_as_the_report_does(self):
        # scripts/calibrate.sh joins a card's files (sweep.csv, beyond.csv, long-points.csv ...) into one for
        # `yoco calibrate`, which refuses a key twice: a sweep re-measuring a long point held both rows.
        def row(ts, model, n, value):
            r = dict.fromkeys(HEADER, "")
            r.update(timestamp=ts, device="cuda", device_name="NVIDIA H200", model=model, seq_len=str(n), batch="1",
                     gen_tokens="0", phase="prefill", metric="prefill_latency_s", value=value, unit="s",
                     method="measured", notes="a, quoted note")
            return r

        def write(name, rows):
            path = os.path.join(self.tmp, name)
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=HEADER)
                w.writeheader()
                w.writerows(rows)
            return path

        old = write("long-points.csv", [row("2026-11-27T10:00:00Z", "yoco-3b", 524288, "3.1"),
                                        row("2026-11-27T10:00:00Z", "transformer-3b", 1048576, "380")])
        new = write("sweep.csv", [row("2026-11-30T10:00:00Z", "yoco-3b", 524288, "2.7"),
                                  row("2026-11-30T10:00:00Z", "yoco-3b", 32768, "0.1")])
        p = subprocess.run([sys.executable, os.path.join(HERE, "result_rows.py"), "merge", old, new],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = list(csv.DictReader(p.stdout.splitlines()))
        self.assertEqual(p.stdout.splitlines()[0], ",".join(HEADER))
        got = {(r["model"], r["seq_len"]): r["value"] for r in rows}
        self.assertEqual(got, {("yoco-3b", "524288"): "2.7", ("transformer-3b", "1048576"): "380",
                               ("yoco-3b", "32768"): "0.1"})
        self.assertEqual({r["notes"] for r in rows}, {"a, quoted note"})
        self.assertIn("using %s" % new, p.stderr)  # the disagreement said, on stderr, not in the CSV

    def test_a_reader_that_stops_early_is_no_traceback(self):
        # `script FILE | head`: the first print after head left was a BrokenPipeError traceback. Now the end by
        # SIGPIPE, quietly, as the C++ yoco ends.
        kernels = self._file("kernels.csv", ",".join(HEADER) + "\n" + GOOD)
        decide_models = ["--models", kernels]
        for script, args in ((["model_headlines.py"], [kernels]), (["sweep_headlines.py"], [kernels]),
                             (["gpu_headlines.py"], [kernels]), (["decide.py"], decide_models),
                             (["ci_baseline.py", "--help"], [])):
            r, w = os.pipe()
            os.close(r)  # the reader is gone before the first line
            try:
                p = subprocess.run([sys.executable, os.path.join(HERE, script[0])] + script[1:] + args, stdout=w,
                                   stderr=subprocess.PIPE, text=True)
            finally:
                os.close(w)
            self.assertNotIn("Traceback", p.stderr, script[0])
            self.assertNotIn("Error", p.stderr, script[0])
            self.assertEqual(p.returncode, -13, script[0] + ": " + p.stderr)

    def test_model_headlines_pairs_a_run_across_a_second_and_names_an_extrapolated_prefill(self):
        # A bench writes a point's measured rows under the second it started and the analytic ones under the next
        # when it crossed one (the H200's run-07): the GEMM floor was "-". An extrapolated 512K prefill was judged
        # against the bounds as if measured ("6 s (16): met").
        row = "abc1234,2026-11-27T23:03:%s,h,%s,gpu,,yoco-3b,%d,1,0,%s,%s,%s,s,%s,1,,,%s\n"
        text = ",".join(HEADER) + "\n" + "".join(row % r for r in (
            ("47Z", "cuda", 32768, "prefill", "prefill_latency_s", "0.2", "measured", "after 1 warm-up; prefill chunk 32768"),
            ("48Z", "analytic", 32768, "prefill.gemm", "roofline_time_s", "0.1", "analytic", ""),
            ("50Z", "cuda", 524288, "prefill", "prefill_latency_s", "2.5", "extrapolated", "extrapolated from 2 units"),
            ("50Z", "analytic", 524288, "prefill.gemm", "roofline_time_s", "2.0", "analytic", "")))
        p = subprocess.run([sys.executable, os.path.join(HERE, "model_headlines.py"), self._file("models.csv", text)],
                           capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        lines = p.stdout.splitlines()[1:]
        self.assertEqual(len(lines), 2, p.stdout)
        self.assertEqual(lines[0].split()[:7], ["yoco-3b", "32768", "1", "0.2000", "-", "0.1000", "50%"], p.stdout)
        self.assertIn("extrapolated", lines[1])
        self.assertNotIn("met", lines[1])

    def test_gpu_headlines_names_a_missing_peers_file_after_the_headlines(self):
        kernels = self._file("kernels.csv", ",".join(HEADER) + "\n" + GOOD)
        peers = os.path.join(self.tmp, "peers_*.csv")  # the suite's glob where no peer ran
        p = subprocess.run([sys.executable, os.path.join(HERE, "gpu_headlines.py"), kernels, peers],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("no kernel rows", p.stdout)
        self.assertEqual(p.stderr.strip().splitlines(), ["gpu_headlines: no such file: %s (its rows are not in the "
                                                         "lines above)" % peers])
        p = subprocess.run([sys.executable, os.path.join(HERE, "gpu_headlines.py"), "--help"],
                           capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertIn("KERNELS.csv [PEERS.csv ...]", p.stdout)

    def _gpu_headlines(self, row, fields):
        """gpu_headlines.py over a kernels.csv of `row` filled with each of `fields`: its run, checked clean."""
        kernels = self._file("kernels.csv", ",".join(HEADER) + "\n" + "".join(row % f for f in fields))
        p = subprocess.run([sys.executable, os.path.join(HERE, "gpu_headlines.py"), kernels], capture_output=True,
                           text=True)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        return p

    def test_gpu_headlines_puts_the_gemv_beside_cublas(self):
        row = ('abc1234,2026-11-27T00:00:00Z,h,cuda,gpu,,yoco-3b,1,1,0,"gemm_shapes:out_proj m 1 k 3072 n 3072, %s",%s,'
               "%s,%s,measured,5,,,note\n")
        p = self._gpu_headlines(row, [("cublasGemmEx (the runners' call)", "kernel_time_s", "1.36e-05", "s"),
                                      ("gemv (ours, YOCO_GEMV=1)", "kernel_time_s", "6.8e-06", "s"),
                                      ("gemv (ours, YOCO_GEMV=1)", "fraction_of_copy_bw", "0.66", "fraction")])
        self.assertIn("out_proj m 1 k 3072 n 3072: gemv 6.80 us vs cublasGemmEx 13.60 us (0.50x its time), 66% of copy",
                      p.stdout)

    def test_gpu_headlines_puts_chunk_v7_beside_v6(self):
        row = ('abc1234,2026-11-28T00:00:00Z,h,cuda,gpu,,yoco-3b,32768,1,0,"gret_chunk:C64 %s",%s,%s,%s,'
               "measured,10,,,note\n")
        p = self._gpu_headlines(row, [("v6 P5 x2 (v6 plan)", "kernel_time_s", "0.000483", "s"),
                                      ("v6 P5 x2 (v6 plan)", "fraction_of_copy_bw", "0.56", "fraction"),
                                      ("v7 P5 x2 (v7 plan)", "kernel_time_s", "0.000400", "s"),
                                      ("v7 P11", "kernel_time_s", "0.000380", "s")])
        self.assertIn("yoco-3b N 32768 B 1, P5 x2 (v7 plan): v7 0.400 ms vs v6 0.483 ms (0.828x its time)", p.stdout)
        self.assertIn("P11: v7 0.380 ms (no v6 row)", p.stdout)

    def test_gpu_headlines_puts_the_residual_stored_once_beside_the_pair(self):
        row = ('abc1234,2026-11-28T00:00:00Z,h,cuda,gpu,,yoco-3b,32768,1,0,"add_rms_norm:rows 32768 d 3072, '
               'a layer\'s two norms, %s",%s,%s,%s,measured,20,,,note\n')
        p = self._gpu_headlines(row, [("an add + RMSNorm each", "kernel_time_s", "0.000800", "s"),
                                      ("an add + RMSNorm each", "fraction_of_copy_bw", "0.98", "fraction"),
                                      ("the residual stored once", "kernel_time_s", "0.000740", "s")])
        self.assertIn("rows 32768 d 3072: 0.740 ms vs an add + RMSNorm each 0.800 ms (0.925x its time)", p.stdout)

    def test_gpu_headlines_puts_the_half_warp_norm_gate_beside_the_per_warp_one(self):
        row = ('abc1234,2026-11-28T00:00:00Z,h,cuda,gpu,,yoco-3b,32768,1,0,"gret_norm_gate:rows 32768 H24 D128%s",%s,'
               "%s,%s,measured,20,,,note\n")
        p = self._gpu_headlines(row, [(", g in q|k|v|g rows", "kernel_time_s", "0.000300", "s"),
                                      (", g in q|k|v|g rows", "fraction_of_copy_bw", "0.75", "fraction"),
                                      (", g in q|k|v|g rows, half-warp kernel", "kernel_time_s", "0.000240", "s")])
        self.assertIn("rows 32768 H24 D128, g in q|k|v|g rows: 0.240 ms vs per-warp 0.300 ms (0.800x its time)",
                      p.stdout)

    def test_gpu_headlines_puts_two_streams_beside_one(self):
        row = ('abc1234,2026-11-28T00:00:00Z,h,cuda,gpu,,yoco-3b,32768,1,0,"beside_gemm:W1|W3 + SwiGLU, %s",%s,%s,%s,'
               "measured,20,,,note\n")
        p = self._gpu_headlines(row, [("one stream", "kernel_time_s", "0.005000", "s"),
                                      ("two streams", "kernel_time_s", "0.004900", "s"),
                                      ("two streams, the pass at the greatest priority", "kernel_time_s", "0.004500",
                                       "s")])
        self.assertIn("beside a GEMM                W1|W3 + SwiGLU: 4.900 ms vs one stream 5.000 ms (0.980x its time)",
                      p.stdout)
        self.assertIn("the pass at the greatest priority W1|W3 + SwiGLU: 4.500 ms vs one stream 5.000 ms (0.900x",
                      p.stdout)

    def test_gpu_headlines_puts_the_cta_pairs_beside_the_pair_and_the_one_cta_kernel(self):
        row = ('abc1234,2026-11-28T00:00:00Z,h,cuda,gpu,,yoco-3b,32768,1,0,"ffn_up:%srows 32768 d 3072 F 8192",%s,%s,%s,'
               "measured,20,,,note\n")
        p = self._gpu_headlines(row, [("cublas W1|W3 + swiglu, ", "kernel_time_s", "0.004948", "s"),
                                      ("fused gemm_swiglu, ", "kernel_time_s", "0.005008", "s"),
                                      ("fused gemm_swiglu, CTA pairs, ", "kernel_time_s", "0.004453", "s")])
        self.assertIn("rows 32768 d 3072 F 8192: 4.453 ms vs cuBLAS + SwiGLU 4.948 ms (0.900x), one-CTA kernel "
                      "5.008 ms (0.889x)", p.stdout)

    def test_bad_options_exit_2_with_one_line(self):
        good = self._file("good.csv", ",".join(HEADER) + "\n" + GOOD)
        for script, args, fragment in (
                ("model_headlines.py", [], "no file given"),
                ("model_headlines.py", ["--bogus", good], "unknown option --bogus"),
                ("sweep_headlines.py", [], "no file given"),
                ("sweep_headlines.py", [good, "--paper"], "--paper needs a folder"),
                ("sweep_headlines.py", [good, "--paper", os.path.join(self.tmp, "none")], "no such folder"),
                ("sweep_headlines.py", [good, "--bogus"], "unknown option --bogus")):
            p = subprocess.run([sys.executable, os.path.join(HERE, script)] + args, capture_output=True, text=True)
            what = "%s %s: %s" % (script, args, p.stdout + p.stderr)
            self.assertEqual(p.returncode, 2, what)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, what)
            self.assertIn(fragment, p.stderr, what)
        for script in ("model_headlines.py", "sweep_headlines.py"):
            p = subprocess.run([sys.executable, os.path.join(HERE, script), good, "--help"], capture_output=True,
                               text=True)
            self.assertEqual((p.returncode, p.stderr), (0, ""), script)
            self.assertIn("scripts/" + script, p.stdout)

    def test_keep_filter_refuses_a_truncated_or_long_row_with_one_line(self):
        tool = [sys.executable, os.path.join(HERE, "result_rows.py"), "keep", "method^=me", "--header"]
        header = ",".join(HEADER) + "\n"
        for text, fragment in ((header + GOOD + GOOD[:40] + "\n", "<stdin>:3: 6 fields, the header has 19"),
                               (header + GOOD.replace("note", "note,x"), "<stdin>:2: 20 fields, the header has 19"),
                               ("", "<stdin>:1: empty input, no header line")):
            p = subprocess.run(tool, input=text, capture_output=True, text=True)
            self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
            self.assertEqual(p.stderr.strip().splitlines(), ["result_rows.py keep: " + fragment])
        p = subprocess.run(tool, input="\ufeff" + header + GOOD, capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout), (0, header + GOOD), p.stderr)

    def test_an_integer_written_as_a_float_is_read(self):
        path = self._file("float.csv", ",".join(HEADER) + "\n" + GOOD.replace(",1024,1,0,", ",1024.0,1.0,0,"))
        for script in self.SCRIPTS[:2]:
            p = self._run(script, path)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r"yoco-3b +(1024|1K) ")

    def test_a_bom_is_read(self):
        path = self._file("bom.csv", b"\xef\xbb\xbf" + (",".join(HEADER) + "\n" + GOOD).encode())
        for script in self.SCRIPTS[:2]:
            p = self._run(script, path)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("yoco-3b", p.stdout)


if __name__ == "__main__":
    unittest.main()
