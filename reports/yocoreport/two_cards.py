"""One commit's kernel benchmark on two cards: for every kernel row both cards ran at the same commit (the same
kernels, the same shapes), how much faster the second card runs it, beside the ratios of the two runs' own
ceilings. Bandwidth-bound kernels should follow the copy ratio and compute-bound ones the GEMM ratio. A kernel
that follows neither is bound by something else, such as launch latency or a chain of dependent steps.

Reads every kernels.csv in the folders of the report's result files (reports/results/<card>/) and under their
logs/ (the bench_cuda_kernels rows, metric kernel_time_s, method measured), pairs the files of one git revision
run on different devices, and joins their rows by (phase, model, length, batch)."""
import csv
import glob
import os
import statistics
from collections import OrderedDict, defaultdict



def _read(path):
    """(git sha, device name, {(phase, model, seq_len, batch): seconds}, {ceiling metric: value})."""
    times, ceilings, sha, device = {}, {}, "", ""
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r.get("device") != "cuda" or r.get("method") != "measured" or not r.get("value"):
                continue
            sha, device = r["git_sha"].replace("-dirty", ""), r["device_name"]
            if r["phase"] == "ceiling":
                ceilings[r["metric"]] = float(r["value"])
            elif r["metric"] == "kernel_time_s":
                times[(r["phase"], r["model"], r["seq_len"], r["batch"])] = float(r["value"])
    return sha, device, times, ceilings


def card_dirs_of(result_files):
    """The folders of the report's result files: reports/results/<card>/ for the default ones."""
    return sorted({os.path.dirname(os.path.abspath(f)) for f in result_files})


def pairs(card_dirs):
    """[(sha, (device A, times A, ceilings A, path A), (device B, ...))] for every revision two devices ran;
    A is the device whose name sorts first (for the H100 and the H200: the H100). Of several files of one
    revision and device, the one with the most rows."""
    best = {}
    paths = []
    for d in card_dirs:
        paths += glob.glob(os.path.join(d, "kernels.csv")) + glob.glob(os.path.join(d, "logs", "*", "kernels.csv"))
    for path in sorted(paths):
        sha, device, times, ceilings = _read(path)
        if not times or not sha:
            continue
        key = (sha, device)
        if key not in best or len(times) > len(best[key][1]):
            best[key] = (device, times, ceilings, path)
    by_sha = defaultdict(list)
    for (sha, device), v in best.items():
        by_sha[sha].append(v)
    out = []
    for sha, runs in sorted(by_sha.items()):
        runs.sort(key=lambda v: v[0])
        for i in range(len(runs)):
            for j in range(i + 1, len(runs)):
                out.append((sha, runs[i], runs[j]))
    return out


def family_ratios(times_a, times_b):
    """{family: [time on A / time on B, ...]} over the rows both ran (a family is the phase before ':')."""
    out = OrderedDict()
    for key in sorted(set(times_a) & set(times_b)):
        a, b = times_a[key], times_b[key]
        if a > 0 and b > 0:
            out.setdefault(key[0].partition(":")[0], []).append(a / b)
    return out


def two_cards_section(table, rel, card_dirs):
    """README lines: per pair of cards, per kernel family, the second card's speedup against the ceilings'."""
    lines = []
    for sha, (dev_a, times_a, ceil_a, path_a), (dev_b, times_b, ceil_b, path_b) in pairs(card_dirs):
        ratios = family_ratios(times_a, times_b)
        if not ratios:
            continue
        copy = ceil_b.get("copy_bw_gbs", 0) / ceil_a["copy_bw_gbs"] if ceil_a.get("copy_bw_gbs") else None
        gemm = ceil_b.get("gemm_peak_tflops", 0) / ceil_a["gemm_peak_tflops"] if ceil_a.get("gemm_peak_tflops") else None
        if not lines:
            lines += ["## One commit on two cards", ""]
        lines += [
            "The kernel benchmark of commit `%s` on %s ([%s](%s)) and on %s ([%s](%s)): each kernel row both ran, "
            "the time on the first over the time on the second (above 1: the second is faster), by family. The "
            "runs' own ceilings give the ratios to expect: copy bandwidth %s, GEMM rate %s. Measured, CUDA events, "
            "medians." % (sha, dev_a, rel(path_a), rel(path_a), dev_b, rel(path_b), rel(path_b),
                          "%.2fx" % copy if copy else "not measured", "%.2fx" % gemm if gemm else "not measured"),
            ""]
        body = []
        for fam, rs in ratios.items():
            body.append([fam, str(len(rs)), "%.2fx" % statistics.median(rs), "%.2f-%.2fx" % (min(rs), max(rs))])
        lines += [table(["family", "rows", "median speedup", "range"], body), ""]
    return lines
