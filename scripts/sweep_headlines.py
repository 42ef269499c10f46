#!/usr/bin/python3
"""Headlines of the paper's sweep (`yoco bench` default job on a GPU, issue 16):
per model and length the measured memory, prefill, decode step and throughput
with how each was obtained (measured / sampled / extrapolated / out_of_memory
/ over_budget), then every number the paper states (reports/paper/*.csv)
beside ours at the same model, length and metric, with ours / paper; and the
CUPTI breakdown's family shares at each model's longest profiled length.

    scripts/sweep_headlines.py SWEEP.csv [more.csv ...] [--paper DIR]

Standard library only (runs on the lent GPU machine). Prints tables and
nothing else; exit 2 on an unreadable file.
"""
import glob
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from result_rows import load as load_rows, num, run as run_main  # noqa: E402


def load(paths):
    return load_rows(paths, "sweep_headlines")


HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ["gemm", "gret", "attention_prefill", "attention_decode", "norms", "other"]


def human(v, unit):
    if v is None:
        return "-"
    if unit == "B":
        return f"{v / 1e9:.2f} GB"
    if unit == "s":
        return f"{v:.4g} s" if v >= 0.1 else f"{v * 1e3:.3g} ms"
    if unit == "x":
        return f"{v:.2f}x"
    return f"{v:.4g} {unit}"


def cell(r):
    if r is None:
        return "-"
    v = num(r["value"])
    if v is None:
        return r["method"]
    text = human(v, r["unit"])
    if r["metric"] == "throughput_tokens_per_s":
        text += f" (b={r['batch']})"
    return text + ("" if r["method"] in ("measured", "exact") else f" [{r['method']}]")


def length(n):
    return f"{n // 1048576}M" if n >= 1048576 and n % 1048576 == 0 else f"{n // 1024}K" if n % 1024 == 0 else str(n)


def table(header, body):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)] if body else [len(h) for h in header]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in body]
    return "\n".join(out)


def usage(why):
    print("sweep_headlines: %s; usage: scripts/sweep_headlines.py SWEEP.csv [more.csv ...] [--paper DIR]" % why,
          file=sys.stderr)
    return 2


def main(argv):
    args = argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__.strip())
        return 0
    paper_dir = os.path.join(HERE, "..", "reports", "paper")
    if "--paper" in args:
        i = args.index("--paper")
        if i + 1 == len(args) or args[i + 1].startswith("-"):
            return usage("--paper needs a folder")
        paper_dir = args[i + 1]
        del args[i:i + 2]
        if not os.path.isdir(paper_dir):
            return usage("--paper %s: no such folder" % paper_dir)
    bad = [a for a in args if a.startswith("-")]
    if bad or not args:
        return usage("unknown option %s" % bad[0] if bad else "no file given")
    rows = [r for r in load(args) if r["device"] not in ("analytic", "paper")]
    # reports/paper/differences.csv is the report's hand-written reasons, not a result CSV
    paper_files = sorted(p for p in glob.glob(os.path.join(paper_dir, "*.csv"))
                         if os.path.basename(p) != "differences.csv")
    paper = [r for r in load(paper_files) if r.get("method") == "paper"]
    # The last row of each key wins (a resumed or repeated run).
    by_key = {}
    for r in rows:
        by_key[(r["model"], int(r["seq_len"]), r["phase"], r["metric"])] = r
    points = sorted({(r["model"], int(r["seq_len"])) for r in rows if " vs " not in r["model"] and r["model"] != "-"})
    wanted = [("memory", "mem_total_bytes", "memory"), ("prefill", "prefill_latency_s", "prefill"),
              ("decode", "decode_step_latency_s", "decode step"),
              ("throughput", "throughput_tokens_per_s", "throughput")]
    devices = sorted({r["device_name"] for r in rows})
    print("device: " + ", ".join(devices))
    body = [[m, length(n)] + [cell(by_key.get((m, n, ph, me))) for ph, me, _ in wanted] for m, n in points]
    print(table(["model", "N"] + [w[2] for w in wanted], body))

    # The paper's numbers beside ours.
    body = []
    ours_models = {m for m, _ in points}
    for p in paper:
        model, n = p["model"], int(p["seq_len"])
        if not all(part in ours_models for part in model.split(" vs ")):
            continue  # a model this sweep did not run
        ours = by_key.get((model, n, p["phase"], p["metric"]))
        pv, ov = num(p["value"]), num(ours["value"]) if ours else None
        ratio = f"{ov / pv:.2f}" if ov is not None and pv else "-"
        body.append([model, length(n), p["metric"], human(pv, p["unit"]), cell(ours), ratio])
    if body:
        print("\nthe paper's numbers (reports/paper) beside ours:")
        print(table(["model", "N", "metric", "paper", "ours", "ours/paper"], body))

    # CUPTI: family shares at each model's longest profiled length.
    fam = defaultdict(dict)
    for (m, n, ph, me), r in by_key.items():
        if me == "gpu_time_s" and "." in ph and num(r["value"]) is not None:
            phase, family = ph.split(".", 1)
            if family in FAMILIES:
                fam[(m, n, phase)][family] = num(r["value"])
    body = []
    for m in sorted({k[0] for k in fam}):
        for phase in ("prefill", "decode"):
            lengths = sorted(n for (mm, n, pp) in fam if mm == m and pp == phase)
            if not lengths:
                continue
            f = fam[(m, lengths[-1], phase)]
            total = sum(f.values())
            shares = [f"{100 * f.get(x, 0) / total:.0f}%" if total > 0 else "-" for x in FAMILIES]
            over = by_key.get((m, lengths[-1], phase + ".kernels", "cupti_overhead_fraction"))
            body.append([m, length(lengths[-1]), phase, human(total, "s")] + shares +
                        [f"{100 * num(over['value']):.1f}%" if over and num(over["value"]) is not None else "-"])
    if body:
        print("\nwhere the GPU time goes (CUPTI, per prefill / decode step, longest profiled length):")
        print(table(["model", "N", "phase", "GPU time"] + FAMILIES + ["overhead"], body))
    return 0


if __name__ == "__main__":
    run_main(main, "sweep_headlines")
