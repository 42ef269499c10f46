#!/usr/bin/env python3
"""One line per kernel family from a GPU run's CSVs: the range of its rows'
efficiency against the ceilings of the same run, and how the fastest of ours
compares with each peer at the same points. gpu-suite.sh prints it last.

  scripts/gpu_headlines.py KERNELS.csv [PEERS.csv ...]

Rows whose variant says "sweep" are left out of ours (tuning sweeps, not what
the library runs). Standard library only: runs on the lent machine's python3.

Exit status: 0 done; 2 a file that is not a result CSV (file and line named,
nothing printed), or a PEERS file that does not exist (named after the lines of
the files that do: the suite passes peers_*.csv whether or not a peer ran).
"""
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from result_rows import load, run as run_main  # noqa: E402

RATE = {"attn_prefill": "fraction_of_gemm_peak"}  # the others: fraction_of_copy_bw
PEER = re.compile(r"^(?P<base>.+?)_(?:torch_(?P<backend>[a-z0-9]+)|(?P<fla>fla))$")
HEAD_DIM = re.compile(r"\bD(\d+)\b")


def split(phase):
    fam, _, variant = phase.partition(":")
    m = PEER.match(fam)
    if m:
        return m.group("base"), ("torch_" + m.group("backend")) if m.group("backend") else "fla", variant
    return fam, "", variant


def is_chunk(variant):
    return "q0" in variant or "chunk" in variant


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) < 2 or argv[1].startswith("-"):
        print("usage: scripts/gpu_headlines.py KERNELS.csv [PEERS.csv ...] (--help says more)", file=sys.stderr)
        return 2
    missing = [p for p in argv[2:] if not os.path.exists(p)]
    rows = load([p for p in argv[1:] if p not in missing], "gpu_headlines")
    rc = report(rows)
    if missing:
        print("gpu_headlines: no such file: %s (its rows are not in the lines above)" % ", ".join(missing),
              file=sys.stderr)
        return 2
    return rc


def candidate_lines(ours, by_point, fam, suffix, baseline_suffix, head, baseline_name, shown):
    """A line per row of family `fam` whose variant ends with `suffix` (a candidate), beside the row of the
    same point whose variant ends with `baseline_suffix` instead: its time and the ratio, the default's
    decision. `shown(base)` is the words of the point the line names."""
    for r in ours:
        f, _, variant = split(r["phase"])
        if f != fam or not variant.endswith(suffix):
            continue
        base = variant[:-len(suffix)]
        other = by_point.get((r["model"], r["seq_len"], r["batch"], fam + ":" + base + baseline_suffix))
        print("%-28s %s: %.3f ms%s" % (
            head, shown(base), 1e3 * float(r["value"]),
            " vs %s %.3f ms (%.3fx its time)" % (baseline_name, 1e3 * other, float(r["value"]) / other)
            if other else " (no %s row)" % ("pair" if baseline_suffix else baseline_name)))


def report(rows):
    val = {}
    for r in rows:
        if r.get("value"):
            val[(r["model"], r["seq_len"], r["batch"], r["phase"], r["metric"])] = float(r["value"])
    times = [r for r in rows if r["metric"] == "kernel_time_s" and r.get("value")]
    ours = [r for r in times if not split(r["phase"])[1] and "sweep" not in r["phase"]]
    fams = defaultdict(list)
    for r in ours:
        fam = split(r["phase"])[0]
        f = val.get((r["model"], r["seq_len"], r["batch"], r["phase"], RATE.get(fam, "fraction_of_copy_bw")))
        if f is not None:
            fams[fam].append(f)
    vs = defaultdict(lambda: defaultdict(list))
    for p in times:
        fam, who, pvar = split(p["phase"])
        if not who:
            continue
        pd = HEAD_DIM.search(pvar)
        cands = [r for r in ours if split(r["phase"])[0] == fam and r["model"] == p["model"]
                 and r["seq_len"] == p["seq_len"] and r["batch"] == p["batch"]
                 and is_chunk(split(r["phase"])[2]) == is_chunk(pvar)
                 and not (pd and HEAD_DIM.search(split(r["phase"])[2])
                          and HEAD_DIM.search(split(r["phase"])[2]).group(1) != pd.group(1))]
        if cands:
            best = min(float(r["value"]) for r in cands)
            vs[fam][who].append(float(p["value"]) / best)
    if not ours:
        print("no kernel rows")
        return 0
    if fams:  # rows against a ceiling (launch_floor's and beside_gemm's have none: their lines follow)
        print("%-28s %5s  %-22s  %s" % ("kernel", "rows", "% of ceiling (min-max)", "ours / peer (peer time / ours)"))
    for fam in sorted(fams):
        f = fams[fam]
        unit = "GEMM" if RATE.get(fam) else "copy"
        peers = "; ".join("%s %.2f-%.2fx" % (who, min(x), max(x)) for who, x in sorted(vs[fam].items()))
        print("%-28s %5d  %5.1f-%5.1f%% of %-6s  %s" % (fam, len(f), 100 * min(f), 100 * max(f), unit, peers or "-"))
    # The decode GEMV against cublasGemmEx at each shape and row count (bench gemm_shapes: the two rows of
    # a shape share the words before ", gemv" / ", cublasGemmEx"): the runners' YOCO_GEMV decision.
    by_phase = {(r["model"], r["seq_len"], r["phase"]): float(r["value"]) for r in ours}
    for r in ours:
        fam, _, variant = split(r["phase"])
        if fam != "gemm_shapes" or ", gemv (ours" not in variant:
            continue
        shape = variant.split(", gemv (ours", 1)[0]
        cublas = by_phase.get((r["model"], r["seq_len"], fam + ":" + shape + ", cublasGemmEx (the runners' call)"))
        frac = val.get((r["model"], r["seq_len"], r["batch"], r["phase"], "fraction_of_copy_bw"))
        print("%-28s %s: gemv %.2f us%s%s" % (
            "gemv vs cublas", shape, 1e6 * float(r["value"]),
            " vs cublasGemmEx %.2f us (%.2fx its time)" % (1e6 * cublas, float(r["value"]) / cublas) if cublas else "",
            ", %.0f%% of copy" % (100 * frac) if frac is not None else ""))
    # gRet chunk v7 (two output warpgroups) against v6 at the same plan or P (bench gret_chunk: the two rows'
    # variants differ only in "v7" / "v6"): the planner's decision (cuda/gret/NOTES-gret_chunk.md, v7).
    by_point = {(r["model"], r["seq_len"], r["batch"], r["phase"]): float(r["value"]) for r in ours}
    for r in ours:
        fam, _, variant = split(r["phase"])
        if fam != "gret_chunk" or not variant.startswith("C64 v7 "):
            continue
        v6 = by_point.get((r["model"], r["seq_len"], r["batch"], fam + ":" + variant.replace("v7", "v6")))
        print("%-28s %s N %s B %s, %s: v7 %.3f ms%s" % (
            "gret chunk v7 vs v6", r["model"], r["seq_len"], r["batch"], variant[len("C64 v7 "):],
            1e3 * float(r["value"]),
            " vs v6 %.3f ms (%.3fx its time)" % (1e3 * v6, float(r["value"]) / v6) if v6 else " (no v6 row)"))
    # A layer's two norms with the residual stored once against an add + RMSNorm each (bench elementwise):
    # the runners' YOCO_RESIDUAL_PER_LAYER decision, with models.3b_long_per_layer's prefill.
    candidate_lines(ours, by_point, "add_rms_norm", ", the residual stored once", ", an add + RMSNorm each",
                    "residual stored once a layer", "an add + RMSNorm each", lambda v: v.split(", a layer's", 1)[0])
    # The norm + gate's half-warp kernel against the per-warp one on the same layout (bench gret_decode: the
    # two rows differ by ", half-warp kernel"): kNormGateHalfWarpByDefault's decision (the q|k|v|g rows).
    candidate_lines(ours, by_point, "gret_norm_gate", ", half-warp kernel", "", "norm_gate half-warp", "per-warp",
                    lambda v: v)
    # The fused FFN up kernel in CTA pairs against the pair it would replace and the one-CTA kernel (bench
    # ffn_up): whether the runners take it (cuda/ops/gemm_swiglu.hpp; RUNS.md's rule).
    pairs = "fused gemm_swiglu, CTA pairs, "
    for r in ours:
        fam, _, variant = split(r["phase"])
        if fam != "ffn_up" or not variant.startswith(pairs):
            continue
        shape = variant[len(pairs):]
        key = lambda v: (r["model"], r["seq_len"], r["batch"], fam + ":" + v + shape)
        unfused, one = by_point.get(key("cublas W1|W3 + swiglu, ")), by_point.get(key("fused gemm_swiglu, "))
        print("%-28s %s: %.3f ms%s%s" % (
            "ffn_up CTA pairs", shape, 1e3 * float(r["value"]),
            " vs cuBLAS + SwiGLU %.3f ms (%.3fx)" % (1e3 * unfused, float(r["value"]) / unfused) if unfused else "",
            ", one-CTA kernel %.3f ms (%.3fx)" % (1e3 * one, float(r["value"]) / one) if one else ""))
    # A prefill GEMM beside another step's pass on two streams against the two on one (bench
    # elementwise_beside_gemm): whether a two-step prefill could hide the passes (RUNS.md's rule).
    for suffix in (", two streams", ", two streams, the pass at the greatest priority"):
        candidate_lines(ours, by_point, "beside_gemm", suffix, ", one stream", "beside a GEMM" + suffix[len(", two streams"):],
                        "one stream", lambda v: v)
    # Rows against no ceiling (launch_floor: a launch's cost, per launch): their times, one line each.
    for r in ours:
        fam, _, variant = split(r["phase"])
        if fam not in fams and fam == "launch_floor":
            print("%-28s %s: %.2f us a launch" % (fam, variant, 1e6 * float(r["value"])))
    return 0


if __name__ == "__main__":
    run_main(main, "gpu_headlines")
