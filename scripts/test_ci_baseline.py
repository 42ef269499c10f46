#!/usr/bin/python3
"""scripts/ci_baseline.py on small files of the bench's schema: the nearest host's baseline is picked (a warning
where none is of the same kind), --update's path is that baseline or a new file, the counted rows reach every other
baseline and nothing else of theirs changes, and a file without ceilings exits 2 naming it.
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
             method=method, device_name="ci-cpu")
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


if __name__ == "__main__":
    unittest.main()
