"""Timing and result rows shared by the peer scripts (DESIGN.md §5).

CUDA events around each launch, warm-up first, the L2 flushed before every
sample (a write of twice its size), median of repeats with min and max kept;
rows in the result-CSV schema of reports/SCHEMA.md so that peers and our
kernels sit in one table. Peers are imported where present and never
committed: a missing one is a `failed` row saying so, not a crash.
"""
import csv
import datetime
import os
import socket
import subprocess
import sys

COLUMNS = ["git_sha", "timestamp", "host", "device", "device_name", "driver", "model", "seq_len", "batch",
           "gen_tokens", "phase", "metric", "value", "unit", "method", "repeats", "min", "max", "notes"]


def git_sha():
    if os.environ.get("YOCO_GIT_SHA"):
        return os.environ["YOCO_GIT_SHA"]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.check_output(["git", "-C", here, "rev-parse", "--short=12", "HEAD"],
                                       stderr=subprocess.DEVNULL, text=True).strip()
    except Exception:
        return "unknown"


class Timer:
    def __init__(self, torch):
        self.torch = torch
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush_buf = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device="cuda")

    def time(self, fn, warmup=3, repeats=20, flush_l2=True):
        torch = self.torch
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for i in range(repeats):
            if flush_l2:
                self.flush_buf.fill_(i & 0xff)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e-3)
        times.sort()
        n = len(times)
        med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
        return med, times[0], times[-1], n


class Rows:
    """Result rows of one peer run, written atomically (temporary file + rename)."""

    def __init__(self, torch):
        props = torch.cuda.get_device_properties(0)
        try:
            driver = subprocess.check_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                             text=True).strip().splitlines()[0]
        except Exception:
            driver = ""
        self.prov = dict(git_sha=git_sha(), timestamp=datetime.datetime.now(datetime.timezone.utc)
                         .strftime("%Y-%m-%dT%H:%M:%SZ"), host=socket.gethostname(), device="cuda",
                         device_name=props.name, driver=driver)
        self.rows = []

    def add(self, model, seq_len, batch, phase, metric, value, unit, method, repeats=0, lo=None, hi=None, notes=""):
        r = dict(self.prov)
        r.update(model=model, seq_len=seq_len, batch=batch, gen_tokens=0, phase=phase, metric=metric,
                 value="" if value is None else repr(float(value)), unit=unit, method=method, repeats=repeats,
                 min="" if lo is None else repr(float(lo)), max="" if hi is None else repr(float(hi)), notes=notes)
        self.rows.append(r)

    def add_timing(self, model, seq_len, batch, phase, timing, bytes_=0.0, flops=0.0, notes=""):
        med, lo, hi, n = timing
        self.add(model, seq_len, batch, phase, "kernel_time_s", med, "s", "measured", n, lo, hi, notes)
        if bytes_:
            self.add(model, seq_len, batch, phase, "achieved_gbs", bytes_ / med / 1e9, "GB/s", "measured", n,
                     notes="bytes floor / median time")
        if flops:
            self.add(model, seq_len, batch, phase, "achieved_tflops", flops / med / 1e12, "TFLOP/s", "measured", n,
                     notes="matmul FLOPs / median time")
        print(f"{phase:40s} {model:14s} N={seq_len:<8d} B={batch:<2d} {med * 1e3:10.4f} ms"
              + (f" {bytes_ / med / 1e9:8.0f} GB/s" if bytes_ else "")
              + (f" {flops / med / 1e12:7.1f} TFLOP/s" if flops else "") + (f"  {notes}" if notes else ""),
              flush=True)

    def add_failure(self, model, seq_len, batch, phase, error):
        msg = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        method = "out_of_memory" if "out of memory" in msg.lower() else "failed"
        self.add(model, seq_len, batch, phase, "kernel_time_s", None, "s", method, 0, notes=msg)
        print(f"{phase:40s} {model:14s} N={seq_len:<8d} B={batch:<2d} {method}: {msg}", flush=True)

    def save(self, path):
        if not path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(self.rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        print(f"wrote {len(self.rows)} rows to {path}", file=sys.stderr)
