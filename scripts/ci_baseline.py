#!/usr/bin/python3
"""The CI gate's baseline for this machine (scripts/ci-bench.sh): one baseline per kind of CI host, told apart by
the ceilings each run measures of its own machine (GEMM rate, copy bandwidth; the `ceiling` rows). A timing ratio
cancels a machine's speed but not its balance: a host with twice the memory bandwidth and 1.5x the GEMM rate runs
the Transformer's 4K prefill 2.2x faster and YOCO's 1.4x, moving their ratio by a third (2026-11-27), so a run is
compared with the baseline of a host like its own.

  ci_baseline.py pick RUN.csv DIR    the baseline in DIR nearest RUN's ceilings: its path on stdout, and on stderr
                                     why (and a warning where no baseline comes from a host within 25% on both)
  ci_baseline.py name RUN.csv DIR    the path --update writes: the nearest baseline if it is within 25% on both
                                     ceilings, else a new file named after RUN's ceilings
  ci_baseline.py counted RUN.csv DIR METRICS
                                     --update's second half: every other baseline in DIR takes RUN's rows of the
                                     counted METRICS (comma-separated; what the exact pass compares), which do not
                                     depend on the host, so that a change of the models regenerates them all
Standard library only. Exit 2 naming the file when a file has no ceiling rows."""
import csv
import glob
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from result_rows import load, num, run as run_main  # noqa: E402
from yocoreport.atomic import replacing  # noqa: E402  (result_rows put reports/ on the path)
from yocoreport.data import COLUMNS  # noqa: E402

SAME_KIND = math.log(1.25)  # both ceilings within 25%: a host of the same kind


def ceilings(path):
    """(GEMM TFLOP/s, copy GB/s) of a bench CSV's measured ceiling rows."""
    got = {}
    for r in load([path], "ci_baseline.py"):
        if r.get("phase") == "ceiling" and r.get("method") == "measured" and num(r.get("value")) is not None:
            got[r["metric"]] = num(r["value"])
    if "gemm_peak_tflops" not in got or "copy_bw_gbs" not in got:
        print("ci_baseline.py: %s: no measured ceiling rows (gemm_peak_tflops, copy_bw_gbs)" % path, file=sys.stderr)
        sys.exit(2)
    for k in ("gemm_peak_tflops", "copy_bw_gbs"):
        if got[k] <= 0:
            print("ci_baseline.py: %s: ceiling %s is %r; a measured ceiling is above 0" % (path, k, got[k]),
                  file=sys.stderr)
            sys.exit(2)
    return got["gemm_peak_tflops"], got["copy_bw_gbs"]


def distance(a, b):
    """The larger of the two ceilings' |log ratio|."""
    return max(abs(math.log(a[0] / b[0])), abs(math.log(a[1] / b[1])))


def nearest(run, folder):
    here = ceilings(run)
    found = sorted(glob.glob(os.path.join(folder, "*.csv")))
    if not found:
        return here, None, None
    scored = sorted((distance(here, ceilings(p)), p) for p in found)
    return here, scored[0][1], scored[0][0]


def describe(c):
    return "GEMM %.3f TFLOP/s, copy %.1f GB/s" % c


def counted(run, folder, metrics):
    """Every baseline in `folder` but `run` itself: its rows of `metrics` replaced by `run`'s (written whole,
    then renamed over the old file)."""
    wanted = set(m for m in metrics.split(",") if m)
    fresh = [r for r in load([run], "ci_baseline.py") if r.get("metric") in wanted]
    if not fresh:  # a misspelt METRICS would take every baseline's counted rows away
        print("ci_baseline.py: %s: no rows of the metrics %r; no baseline changed" % (run, metrics), file=sys.stderr)
        return 2
    others = [p for p in sorted(glob.glob(os.path.join(folder, "*.csv"))) if os.path.abspath(p) != os.path.abspath(run)]
    olds = [load([p], "ci_baseline.py") for p in others]  # every baseline checked before any is rewritten
    header = COLUMNS
    for path, old in zip(others, olds):
        rows = [r for r in old if r.get("metric") not in wanted]
        with replacing(path, "w", newline="") as f:  # fsynced, and no stale temporary left by an interrupt
            w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
            w.writeheader()
            w.writerows(rows + [{k: r.get(k, "") for k in header} for r in fresh])
        print("ci_baseline.py: %s: %d counted rows from %s" % (path, len(fresh), run), file=sys.stderr)
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) in (4, 5) and os.path.exists(argv[3]) and not os.path.isdir(argv[3]):
        print("ci_baseline.py: %s: not a folder (DIR holds the baselines)" % argv[3], file=sys.stderr)
        return 2
    if len(argv) == 5 and argv[1] == "counted":
        return counted(argv[2], argv[3], argv[4])
    if len(argv) != 4 or argv[1] not in ("pick", "name"):
        print("usage: ci_baseline.py pick|name RUN.csv DIR  |  ci_baseline.py counted RUN.csv DIR METRICS",
              file=sys.stderr)
        return 2
    _, what, run, folder = argv
    here, path, dist = nearest(run, folder)
    if what == "pick":
        if path is None:
            print("ci_baseline.py: no baseline in %s (scripts/ci-bench.sh PRESET --update makes one)" % folder,
                  file=sys.stderr)
            return 2
        msg = "baseline %s (made on a host with %s; this one: %s)" % (path, describe(ceilings(path)), describe(here))
        if dist > SAME_KIND:
            msg += ("; WARNING: no baseline from a host within 25% of this one's ceilings: the timing ratios may "
                    "move by the hosts' balance alone (make one here: scripts/ci-bench.sh PRESET --update)")
        print(msg, file=sys.stderr)
        print(path)
        return 0
    if path is not None and dist <= SAME_KIND:
        print(path)
    else:
        print(os.path.join(folder, "gemm-%dgflops-copy-%dgbs.csv" % (round(here[0] * 1000), round(here[1]))))
    return 0


if __name__ == "__main__":
    run_main(main, "ci_baseline.py")
