"""Kernel efficiency, the text part: the GPU kernel rows of a device as README sections: each kernel against its
floor, and each beside the peers timed on the same shapes in the same call.

Kernel rows are those of bench_cuda_kernels and bench/peers (metrics
kernel_time_s, achieved_gbs, achieved_tflops, fraction_of_*): phase
`<family>:<variant>`, where a peer's family is ours plus `_torch_<backend>`
(PyTorch SDPA, FlexAttention) or `_fla` (flash-linear-attention).
"""
import re
from collections import OrderedDict

from .style import fmt_sig, fmt_tokens, fmt_value

KERNEL_METRICS = ("kernel_time_s", "achieved_gbs", "achieved_tflops", "fraction_of_copy_bw", "fraction_of_gemm_peak")
# Our families, in the order the README lists them, with the rate that matters for each.
FAMILIES = OrderedDict([
    ("attn_prefill", "TFLOP/s"), ("attn_decode", "GB/s"), ("attn_decode_ring", "GB/s"),
    ("gret_chunk", "GB/s"), ("gret_decode", "GB/s"), ("gret_norm_gate", "GB/s"), ("gret_log_decay", "GB/s"),
    ("add_rms_norm", "GB/s"), ("swiglu", "GB/s"), ("rope", "GB/s"),
])
_PEER = re.compile(r"^(?P<base>.+?)_(?:torch_(?P<backend>[a-z0-9]+)|(?P<fla>fla))$")
_HEAD_DIM = re.compile(r"\bD(\d+)\b")


def _is_chunk(variant):
    """A query block at an offset inside a longer cache (chunked prefill), not a one-shot pass."""
    return "q0" in variant or "chunk" in variant


def is_kernel_row(r):
    """A row of the kernel benchmarks; the CUPTI breakdown's `prefill:<kernel>` / `decode:<kernel>` rows are not."""
    return r.metric in KERNEL_METRICS and r.phase.partition(":")[0] not in ("prefill", "decode")


def split_phase(phase):
    """'attn_prefill_torch_cudnn:D128' -> ('attn_prefill', 'torch cudnn', 'D128'); ours -> (family, '', variant)."""
    fam, _, variant = phase.partition(":")
    m = _PEER.match(fam)
    if m:
        return m.group("base"), ("torch " + m.group("backend")) if m.group("backend") else "fla", variant
    return fam, "", variant


def _rate(rows_by_key, r, metric):
    x = rows_by_key.get((r.model, r.seq_len, r.batch, r.phase, metric))
    return x.value if x is not None else None


def _short(text, limit=70):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def kernel_sections(rows, table):
    """Markdown lines for one device's kernel rows (empty when it has none)."""
    krows = [r for r in rows if is_kernel_row(r)]
    times = [r for r in krows if r.metric == "kernel_time_s"]
    if not times:
        return []
    by_key = {(r.model, r.seq_len, r.batch, r.phase, r.metric): r for r in krows}
    lines = ["### CUDA kernels against their floors", "",
             "Each kernel timed with CUDA events after a warm-up, the L2 flushed before every sample, median of "
             "the repeats (min–max beside it); GB/s counts the fewest bytes the kernel must move (each tensor "
             "once), TFLOP/s matmul FLOPs by FlashAttention's convention, and the percentages are of the copy and "
             "GEMM ceilings measured in the same run. Rows without a value did not run (the notes say why).", ""]
    ours = [r for r in times if not split_phase(r.phase)[1]]
    order = list(FAMILIES)

    def fam_rank(r):
        f = split_phase(r.phase)[0]
        return order.index(f) if f in order else len(order)

    body = []
    for r in sorted(ours, key=lambda r: (fam_rank(r), r.phase.partition(":")[0], r.model, r.seq_len, r.batch,
                                         r.phase)):
        fam, _, variant = split_phase(r.phase)
        gbs, tf = _rate(by_key, r, "achieved_gbs"), _rate(by_key, r, "achieved_tflops")
        pc, pg = _rate(by_key, r, "fraction_of_copy_bw"), _rate(by_key, r, "fraction_of_gemm_peak")
        spread = ("%s–%s" % (fmt_value(r.min, "s"), fmt_value(r.max, "s"))) if r.min is not None else "—"
        body.append([fam, variant or "—", r.model, fmt_tokens(r.seq_len) if r.seq_len else "—", str(r.batch),
                     fmt_value(r.value, "s") if r.value is not None else r.method, spread,
                     ("%s (%s%%)" % (fmt_sig(gbs), fmt_sig(100 * pc))) if gbs is not None and pc is not None else "—",
                     ("%s (%s%%)" % (fmt_sig(tf), fmt_sig(100 * pg))) if tf is not None and pg is not None else "—",
                     _short(r.notes)])
    lines.append(table(["kernel", "variant", "model", "N", "B", "median", "min–max", "GB/s (% copy)",
                        "TFLOP/s (% GEMM)", "notes"], body))
    lines.append("")

    # Side by side: each peer row beside the fastest of our rows of the same family, model, length, batch
    # (and head dim, where both name one); sweep variants are left out of "ours".
    peers = [r for r in times if split_phase(r.phase)[1] and r.value is not None]
    pairs = []
    for p in peers:
        fam, who, pvar = split_phase(p.phase)
        pd = _HEAD_DIM.search(pvar)
        cands = []
        for r in ours:
            rf, _, rvar = split_phase(r.phase)
            if rf != fam or r.model != p.model or r.seq_len != p.seq_len or r.batch != p.batch or r.value is None:
                continue
            if "sweep" in rvar:
                continue
            rd = _HEAD_DIM.search(rvar)
            if pd and rd and pd.group(1) != rd.group(1):
                continue
            if _is_chunk(pvar) != _is_chunk(rvar):
                continue
            cands.append(r)
        if cands:
            best = min(cands, key=lambda r: r.value)
            pairs.append((fam, p, who, best))
    if pairs:
        lines += ["### Side by side with the peers (same call, same shapes)", "",
                  "*ours / peer* is the peer's time over ours: above 1 means our kernel is faster. Ours is the "
                  "fastest of our non-sweep variants at that point (named).", ""]
        body = []
        for fam, p, who, r in sorted(pairs, key=lambda t: (order.index(t[0]) if t[0] in order else 99, t[1].model,
                                                            t[1].seq_len, t[1].batch, t[2])):
            rate = FAMILIES.get(fam, "GB/s")
            metric = "achieved_tflops" if rate == "TFLOP/s" else "achieved_gbs"
            pr, orate = _rate(by_key, p, metric), _rate(by_key, r, metric)
            body.append([fam, p.model, fmt_tokens(p.seq_len), str(p.batch), who + (" " + split_phase(p.phase)[2]
                                                                                   if split_phase(p.phase)[2] else ""),
                         fmt_value(p.value, "s"), split_phase(r.phase)[2] or "—", fmt_value(r.value, "s"),
                         "%s×" % fmt_sig(p.value / r.value),
                         "%s / %s %s" % (fmt_sig(orate), fmt_sig(pr), rate) if orate and pr else "—"])
        lines.append(table(["kernel", "model", "N", "B", "peer", "peer time", "ours", "our time", "ours / peer",
                            "rate ours / peer"], body))
        lines.append("")
    failed = [r for r in times if r.value is None]
    if failed:
        lines.append("Did not run: " + "; ".join("%s (%s%s: %s)" % (r.phase, r.model, ", N %s" % fmt_tokens(r.seq_len)
                                                                  if r.seq_len else "", _short(r.notes, 60))
                                               for r in failed) + ".")
        lines.append("")
    return lines
