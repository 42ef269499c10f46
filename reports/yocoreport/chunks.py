"""Issue 34's trade-off: yoco-3b's memory against its prefill time by how the runners prefill (the chunk, the
FFN in row blocks, the FFN's up half fused), calibrated (reports/model/chunks-h100.csv, `yoco model
--calibration`) beside measured (the GPU suite's step `chunks`, its rows kept in
reports/results/nvidia-h100/logs/chunks.csv). A configuration is read from a row's notes, in the words the runners
and the cost model write (cuda/runner/launch_count.hpp), so calibrated and measured points pair by them."""
import csv
import os
import re
import sys
from collections import OrderedDict


LENGTHS = (524288, 1048576)
GOAL_S = {524288: 2.6, 1048576: 5.2}  # issue 34's prefill goals on the H100
MUST_S = {524288: 2.9}                # and its must
PAPER_1M_GB = 12.4                    # the paper's yoco-3b memory at 1M tokens
DEFAULT_CHUNK = 32768                 # rows that name no chunk ran the default (reference/config.hpp)


APART = "a buffer each for the prefill's sublayers"  # cuda/runner/launch_count.hpp, kApartSublayerNote
TUNED = "GEMM algorithms tuned at first use"        # cuda/runner/launch_count.hpp, kGemmTunedNote
RESIDUAL = "residual added in the GEMMs' epilogue"   # cuda/runner/launch_count.hpp, kResidualInGemmNote
PER_LAYER = "residual stored once a layer"          # cuda/runner/launch_count.hpp, kResidualPerLayerNote
NAMED_CHUNK = re.compile(r"gRet chunk kernel (\w+) named")  # bench/harness/cuda_backend.cpp, gret_kernel_note


def config_of(notes):
    """(prefill chunk, FFN row block or 0, FFN up half fused (False, True, or 2 for its CTA pairs), sublayers in a buffer each, GEMMs tuned, residual added
    by the GEMMs, residual stored once a layer, the gRet chunk kernel named instead of the planner's or "") as a row's
    notes say it ran (the calibrated rows price the runners' default: one buffer for the sublayers, cuBLAS's own
    GEMM algorithms)."""
    chunk = re.search(r"prefill chunk (\d+)", notes)
    rows = re.search(r"FFN in row blocks of (\d+)", notes)
    named = NAMED_CHUNK.search(notes)
    return (int(chunk.group(1)) if chunk else DEFAULT_CHUNK, int(rows.group(1)) if rows else 0,
            (2 if "FFN up half fused in CTA pairs" in notes else "FFN up half fused" in notes), APART in notes, TUNED in notes, RESIDUAL in notes, PER_LAYER in notes,
            named.group(1) if named else "")


def label(config):
    chunk, rows, fused, apart, tuned, residual, per_layer, named = config
    parts = ["chunk %d" % chunk]
    if rows:
        parts.append("FFN rows %d" % rows)
    if fused == 2:
        parts.append("FFN up fused in CTA pairs")
    elif fused:
        parts.append("FFN up fused")
    if apart:
        parts.append("sublayer buffers apart")
    if tuned:
        parts.append("GEMMs tuned")
    if residual:
        parts.append("residual in the GEMMs")
    if per_layer:
        parts.append("residual stored once a layer")
    if named:
        parts.append("gRet chunk " + named)
    return ", ".join(parts)


DEFAULT_CONFIG = (DEFAULT_CHUNK, 0, False, False, False, False, False, "")  # the runners' defaults, as config_of reads them


def measured_default(path):
    """{seq_len: prefill s} of yoco-3b's measured runs in the runners' default configuration, from `path`."""
    if not os.path.isfile(path):
        return {}
    point = points(_rows(path), ("measured",)).get(DEFAULT_CONFIG, {})
    return {n: v[0] for (metric, n), v in point.items() if metric == "prefill_latency_s"}


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def points(rows, methods):
    """{config: {(metric, seq_len): (value, min, max)}} of yoco-3b's prefill latency and total memory at 512K
    and 1M among `rows` whose method is one of `methods`; a later row of the same point replaces an earlier."""
    out = OrderedDict()
    for r in rows:
        if r.get("model") != "yoco-3b" or r.get("method") not in methods or not r.get("value"):
            continue
        if (r["phase"], r["metric"]) not in (("prefill", "prefill_latency_s"), ("memory", "mem_total_bytes")):
            continue
        n = int(r["seq_len"])
        if n not in LENGTHS or r.get("batch", "1") != "1":
            continue
        v = float(r["value"])
        lo = float(r["min"]) if r.get("min") else v
        hi = float(r["max"]) if r.get("max") else v
        point = out.setdefault(config_of(r["notes"]), {})
        if (r["metric"], n) in point and point[(r["metric"], n)][0] != v:
            print("chunks: %s at %d measured twice for %s (%s, then %s): the later kept" % (
                r["metric"], n, label(config_of(r["notes"])), point[(r["metric"], n)][0], v), file=sys.stderr)
        point[(r["metric"], n)] = (v, lo, hi)
    return out


def _cell(metric, cal, meas):
    scale = 1e-9 if metric == "mem_total_bytes" else 1.0
    fmt = "%.2f" if metric == "mem_total_bytes" else "%.3g"
    c = fmt % (cal[0] * scale) if cal else "—"
    return c + " / " + (fmt % (meas[0] * scale) if meas else "—")


def figure(cal, meas, out_dir, stem):
    """Memory (x) against prefill (y), one panel per length: calibrated points hollow with their band,
    measured ones filled, a line from each configuration's calibrated point to its measured one."""
    # matplotlib only here: scripts/decide.py reads this module's parsing under any interpreter.
    from .style import _save, plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    configs = list(OrderedDict.fromkeys(list(cal) + list(meas)))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, n in zip(axes, LENGTHS):
        for i, cfg in enumerate(configs):
            color = colors[i % len(colors)]
            c_mem, c_pre = cal.get(cfg, {}).get(("mem_total_bytes", n)), cal.get(cfg, {}).get(("prefill_latency_s", n))
            m_mem, m_pre = meas.get(cfg, {}).get(("mem_total_bytes", n)), meas.get(cfg, {}).get(("prefill_latency_s", n))
            if c_mem and c_pre:
                ax.errorbar([c_mem[0] / 1e9], [c_pre[0]], yerr=[[c_pre[0] - c_pre[1]], [c_pre[2] - c_pre[0]]],
                            fmt="o", mfc="none", color=color, capsize=3, label=label(cfg) + " (calibrated)")
            if m_mem and m_pre:
                ax.plot([m_mem[0] / 1e9], [m_pre[0]], "o", color=color, label=label(cfg) + " (measured)")
                if c_mem and c_pre:
                    ax.plot([c_mem[0] / 1e9, m_mem[0] / 1e9], [c_pre[0], m_pre[0]], "-", color=color, lw=0.6)
        ax.axhline(GOAL_S[n], color="0.4", ls="--", lw=0.8, label="issue 34's goal (%.1f s)" % GOAL_S[n])
        if n in MUST_S:
            ax.axhline(MUST_S[n], color="C3", ls="-.", lw=0.8, label="issue 34's must (%.1f s)" % MUST_S[n])
        if n == 1048576:
            ax.axvline(PAPER_1M_GB, color="0.4", ls=":", lw=0.8, label="the paper's %.1f GB" % PAPER_1M_GB)
        ax.set_title("yoco-3b at %dK tokens (H100)" % (n >> 10) if n < 1048576 else "yoco-3b at 1M tokens (H100)",
                     fontsize=10)
        ax.set_xlabel("total memory, GB")
        ax.set_ylabel("prefill, s")
    # One legend for both panels: each label once (the must's line is on the 512K panel only).
    seen = OrderedDict()
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(l, h)
    fig.legend(list(seen.values()), list(seen), fontsize=7, loc="center left", bbox_to_anchor=(0.99, 0.5))
    fig.tight_layout()
    return _save(fig, out_dir, stem)


def chunk_section(calibrated_csv, measured_csv, table, rel, out_dir):
    """README lines: the table of every configuration (calibrated / measured) and the figure."""
    if not os.path.isfile(calibrated_csv):
        return []
    cal = points(_rows(calibrated_csv), ("calibrated",))
    meas = points(_rows(measured_csv), ("measured",)) if os.path.isfile(measured_csv) else OrderedDict()
    if not cal:
        return []
    body = []
    for cfg in OrderedDict.fromkeys(list(cal) + list(meas)):
        c, m = cal.get(cfg, {}), meas.get(cfg, {})
        body.append([label(cfg)] + [_cell(metric, c.get((metric, n)), m.get((metric, n)))
                                    for metric in ("mem_total_bytes", "prefill_latency_s") for n in LENGTHS])
    source = ("measured: [%s](%s), the GPU suite's step `chunks`" % (rel(measured_csv), rel(measured_csv))
              if meas else "measured: none yet (the GPU suite's step `chunks` writes them; RUNS.md says where they go)")
    lines = ["yoco-3b by how the runners prefill (issue 34's trade-off; calibrated / measured, H100; calibrated: "
             "[%s](%s), memory by the runners' own formula, the prefill carrying the 32K chunk's kernel "
             "efficiencies and not counting an FFN row block's extra calls, so it cannot show what a smaller chunk or a "
             "row block costs; %s)."
             % (rel(calibrated_csv), rel(calibrated_csv), source), "",
             table(["configuration", "memory GB 512K", "memory GB 1M", "prefill s 512K", "prefill s 1M"], body), ""]
    try:
        paths = figure(cal, meas, out_dir, "chunk_tradeoff_nvidia-h100")
        lines += ["![memory vs prefill by prefill configuration](%s)" % rel(paths[0]), ""]
    except Exception as exc:  # a figure never takes the report down
        lines += ["(figure not drawn: %s)" % exc, ""]
    return lines
