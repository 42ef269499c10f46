"""GPU time by kernel family, from the CUPTI rows of a sweep run with `--cupti` (reports/SCHEMA.md "CUPTI kernel
breakdown"): the `breakdown` figure (per model, a stacked bar per length of the families' shares, prefill and decode
as separate panels) and the README section (the shares at each point, the top kernels at the longest length, the
profiler's overhead). A device without such rows gets neither.

Rows (device cuda; times per prefill, or per decode step):
  <phase>.<family>   gpu_time_s                the family's kernels; phase prefill or decode
  <phase>:<kernel>   kernel_time_s             one kernel (notes "family X, N launches per ..."); `(rest)`: the
                                               kernels past the first 99.9% of the time, merged
  <phase>.kernels    gpu_time_s                all kernels (and memcpy/memset records)
                     cupti_overhead_fraction   time per unit under the profiler / the timed median - 1
                     gpu_busy_fraction         the records' summed GPU time / the region's time under the profiler
  <phase>.host       api_enqueue_s, api_wait_s the host's CUDA calls that enqueue work / wait for the device
                                               (notes "N calls per ...")
  <phase>.host:<fn>  api_time_s                one CUDA function (notes "runtime|driver, N calls per ...")
"""
import re
from collections import OrderedDict

from matplotlib.patches import Patch

from .data import PREDICTED_METHODS
from .style import Figure, _save, fmt_sig, fmt_tokens, fmt_value, model_colors, model_sort_key, models_phrase, plt

PHASES = OrderedDict([("prefill", "per prefill"), ("decode", "per decode step")])
FAMILIES = OrderedDict([
    ("gemm", ("GEMM (projections, FFN, LM head)", "#4e79a7")),
    ("gret", ("gRet (gated retention)", "#59a14f")),
    ("attention_prefill", ("attention, prefill", "#e15759")),
    ("attention_decode", ("attention, decode", "#f28e2b")),
    ("norms", ("norms, RoPE, gates, SwiGLU, embedding", "#b07aa1")),
    ("other", ("other (cache writes, copies, ...)", "#bab0ac")),
])
TOTAL_METRICS = ("gpu_time_s", "cupti_overhead_fraction", "gpu_busy_fraction")
HOST_METRICS = ("api_enqueue_s", "api_wait_s")
_CALLS_NOTE = re.compile(r"(?P<calls>\d[\d.]*(?:[eE][+-]?\d+)?)\s+calls?\s+per\b")
TOP_HOST_CALLS = 3
_FAMILY_NOTE = re.compile(r"\bfamily\s+(?P<family>[A-Za-z0-9_]+)")
_LAUNCH_NOTE = re.compile(r"(?P<launches>\d[\d.]*(?:[eE][+-]?\d+)?)\s+launches?\s+per\b")
TOP_KERNELS = 5


def is_cupti_row(r):
    """A row of the CUPTI breakdown (not one of the kernel benchmarks, whose phases are '<family>:<variant>'). A
    prediction is never one: `yoco model --calibration` writes `prefill.<family>` gpu_time_s rows too, of the cost
    model, not of CUPTI records of a run."""
    if r.method in PREDICTED_METHODS:
        return False
    if r.metric == "kernel_time_s":
        top, sep, name = r.phase.partition(":")
        return bool(sep) and top in PHASES and bool(name)
    top, sep, part = r.phase.partition(".")
    if not sep or top not in PHASES:
        return False
    if part == "kernels":
        return r.metric in TOTAL_METRICS
    if part == "host":
        return r.metric in HOST_METRICS
    if part.startswith("host:"):
        return r.metric == "api_time_s" and len(part) > len("host:")
    return part in FAMILIES and r.metric == "gpu_time_s"


def kernel_note(r):
    """(family, launches per unit) from the notes of a `<phase>:<kernel>` row ("family gemm, 52 launches per
    prefill; ..."); '' for what they do not say."""
    f = _FAMILY_NOTE.search(r.notes or "")
    n = _LAUNCH_NOTE.search(r.notes or "")
    return (f.group("family") if f else ""), (n.group("launches") if n else "")


class Point(object):
    """The CUPTI rows of one (model, seq_len, batch, gen_tokens) and phase."""

    def __init__(self, model, seq_len, batch, gen, phase):
        self.model, self.seq_len, self.batch, self.gen, self.phase = model, seq_len, batch, gen, phase
        self.families, self.kernels, self.totals = OrderedDict(), [], {}
        self.host, self.host_calls = {}, []  # the host's CUDA calls: <phase>.host rows by metric, per function

    def family_sum(self):
        return sum(r.value for r in self.families.values() if r.value is not None)

    def total(self):
        """GPU time of all kernels per unit: the `.kernels` row, else the families' sum."""
        t = self.totals.get("gpu_time_s")
        return t.value if t is not None and t.value is not None else self.family_sum()

    def shares(self):
        s = self.family_sum()
        if s <= 0:
            return OrderedDict()
        return OrderedDict((f, self.families[f].value / s) for f in FAMILIES
                           if f in self.families and self.families[f].value is not None)

    def value(self, metric):
        r = self.totals.get(metric)
        return None if r is None else r.value

    def label(self):
        return fmt_tokens(self.seq_len) + ("" if self.batch in (0, 1) else " b%d" % self.batch)


def _phase_of(r):
    return re.split(r"[.:]", r.phase, maxsplit=1)[0]


def collect(rows):
    """OrderedDict (model, seq_len, batch, gen, phase) -> Point, for the rows with a value."""
    pts = OrderedDict()
    for r in sorted((r for r in rows if is_cupti_row(r) and r.value is not None),
                    key=lambda r: (model_sort_key(r.model), r.seq_len, r.batch, r.gen_tokens,
                                   list(PHASES).index(_phase_of(r)), r.phase)):
        phase = _phase_of(r)
        k = (r.model, r.seq_len, r.batch, r.gen_tokens, phase)
        p = pts.get(k)
        if p is None:
            p = pts[k] = Point(r.model, r.seq_len, r.batch, r.gen_tokens, phase)
        if r.metric == "kernel_time_s":
            p.kernels.append(r)
        elif r.metric == "api_time_s":
            p.host_calls.append(r)
        elif r.metric in HOST_METRICS:
            p.host[r.metric] = r
        elif r.phase.endswith(".kernels"):
            p.totals[r.metric] = r
        else:
            p.families[r.phase.partition(".")[2]] = r
    return pts


def breakdown_figure(data, device_name, rows, out_dir, stem):
    """The `breakdown` figure, or None when the device has no CUPTI family rows (then no figure is listed)."""
    kind = "breakdown"
    pts = [p for p in collect(rows).values() if p.shares()]
    if not pts:
        return None
    models = sorted(set(p.model for p in pts), key=model_sort_key)
    colors = model_colors(models)
    used = [f for f in FAMILIES if any(f in p.shares() for p in pts)]
    ncol = len(PHASES)
    per_panel = max(len([p for p in pts if p.model == m and p.phase == ph]) for m in models for ph in PHASES)
    width = max(3.6, 1.4 + 0.62 * per_panel)
    fig, axes = plt.subplots(len(models), ncol, figsize=(width * ncol + 2.6, 2.9 * len(models) + 1.0),
                             squeeze=False)
    for i, model in enumerate(models):
        for j, (phase, unit) in enumerate(PHASES.items()):
            ax = axes[i][j]
            mp = [p for p in pts if p.model == model and p.phase == phase]
            ax.set_title("%s — %s (GPU time %s)" % (model, phase, unit), fontsize=9, color=colors[model])
            if not mp:
                ax.text(0.5, 0.5, "no CUPTI rows", transform=ax.transAxes, ha="center", va="center",
                        fontsize=8, color="#777777")
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            for x, p in enumerate(mp):
                bottom = 0.0
                for f, share in p.shares().items():
                    ax.bar(x, 100 * share, bottom=bottom, width=0.62, color=FAMILIES[f][1], edgecolor="white",
                           linewidth=0.5, zorder=3)
                    if share >= 0.12:
                        ax.text(x, bottom + 50 * share, "%.0f%%" % (100 * share), ha="center", va="center",
                                fontsize=6.5, color="white", zorder=4)
                    bottom += 100 * share
                ax.text(x, 101.5, fmt_value(p.total(), "s"), ha="center", va="bottom", fontsize=6.8, zorder=4)
            ax.set_xticks(range(len(mp)))
            ax.set_xticklabels([p.label() for p in mp], fontsize=7.5)
            ax.set_xlim(-0.6, len(mp) - 0.4)
            ax.set_ylim(0, 112)
            ax.set_yticks([0, 25, 50, 75, 100])
            ax.set_ylabel("share of kernel time (%)", fontsize=8)
            ax.grid(True, axis="y", alpha=0.3, zorder=0)
            if i == len(models) - 1:
                ax.set_xlabel("prompt length" if phase == "prefill" else "context length", fontsize=8)
    handles = [Patch(facecolor=FAMILIES[f][1]) for f in reversed(used)]
    fig.legend(handles, [FAMILIES[f][0] for f in reversed(used)], title="kernel family", loc="upper left",
               bbox_to_anchor=(1.0, 1 - 0.9 / fig.get_figheight()), fontsize=8, title_fontsize=8, frameon=False)
    over = _overhead_text(pts)
    title = "GPU time by kernel family (CUPTI; not a paper figure)\n%s · %s%s" % (
        device_name, models_phrase(models), "\nprofiler overhead: " + over if over else "")
    fig.suptitle(title, fontsize=9.5)
    fig.tight_layout()
    fig.subplots_adjust(top=1 - (0.9 if over else 0.72) / fig.get_figheight())
    paths = _save(fig, out_dir, stem)
    caption = ("Where the GPU time of one prefill and of one decode step goes on %s, by kernel family, from CUPTI "
               "activity records of a profiled run after the timed ones (so no timed value carries the profiler); "
               "each bar is 100%% of that point's kernel time, its total above it; models %s.%s" % (
                   device_name, models_phrase(models),
                   " Profiler overhead (how much longer the profiled region ran than the timed one): %s." % over
                   if over else ""))
    return Figure(device_name, kind, title.replace("\n", " — "), caption, paths)


def _overhead_text(pts):
    """'prefill 2%–3%, decode 10%' from the points' cupti_overhead_fraction rows ('' when none)."""
    parts = []
    for ph in PHASES:
        v = [p.value("cupti_overhead_fraction") for p in pts
             if p.phase == ph and p.value("cupti_overhead_fraction") is not None]
        if v:
            parts.append("%s %s" % (ph, _range_pct(v)))
    return ", ".join(parts)


def _range_pct(values):
    lo, hi = min(values), max(values)
    if abs(hi - lo) < 1e-12:
        return "%s%%" % fmt_sig(100 * lo)
    return "%s%%–%s%%" % (fmt_sig(100 * lo), fmt_sig(100 * hi))


def cupti_sections(rows, table):
    """Markdown lines for one device's CUPTI rows (empty when it has none)."""
    pts = collect(rows)
    if not pts:
        return []
    used = [f for f in FAMILIES if any(f in p.families for p in pts.values())]
    lines = ["### Where the GPU time goes (CUPTI kernel breakdown)", "",
             "From CUPTI activity records of one more prefill, and of a run of decode steps, after each point's "
             "timed runs; times are per prefill and per decode step. *share* is of the sum of the families; *GPU "
             "busy* is the records' summed GPU time over the region's time under the profiler (above 100% when "
             "kernels overlap on several streams); *overhead* is how much longer a unit ran under the profiler "
             "than its timed median.", ""]
    over = OrderedDict((ph, [p.value("cupti_overhead_fraction") for p in pts.values()
                             if p.phase == ph and p.value("cupti_overhead_fraction") is not None]) for ph in PHASES)
    said = ["%s %s over %d point%s" % (ph, _range_pct(v), len(v), "" if len(v) == 1 else "s")
            for ph, v in over.items() if v]
    if said:
        lines += ["CUPTI overhead: " + "; ".join(said) + ".", ""]
    else:
        lines += ["CUPTI overhead: not reported (no `cupti_overhead_fraction` rows).", ""]
    body = []
    for p in pts.values():
        sh = p.shares()
        busy = p.value("gpu_busy_fraction")
        ov = p.value("cupti_overhead_fraction")
        body.append([p.model, fmt_tokens(p.seq_len), str(p.batch), p.phase, fmt_value(p.total(), "s")]
                    + [("%s%%" % fmt_sig(100 * sh[f])) if f in sh else "—" for f in used]
                    + ["%s%%" % fmt_sig(100 * busy) if busy is not None else "—",
                       "%s%%" % fmt_sig(100 * ov) if ov is not None else "—"])
    lines.append(table(["model", "N", "B", "phase", "GPU time"] + [f.replace("_", " ") for f in used]
                       + ["GPU busy", "overhead"], body))
    lines.append("")

    # The top kernels of each model and phase at the longest length with kernel rows.
    tops = []
    for model in sorted(set(p.model for p in pts.values()), key=model_sort_key):
        for phase, unit in PHASES.items():
            mp = [p for p in pts.values() if p.model == model and p.phase == phase and p.kernels]
            if not mp:
                continue
            n = max(p.seq_len for p in mp)
            for p in [p for p in mp if p.seq_len == n]:
                total = p.total()
                for r in sorted(p.kernels, key=lambda r: -r.value)[:TOP_KERNELS]:
                    fam, launches = kernel_note(r)
                    tops.append([model, fmt_tokens(n), str(p.batch), phase, r.phase.partition(":")[2],
                                 fam or "—", fmt_value(r.value, "s"),
                                 "%s%%" % fmt_sig(100 * r.value / total) if total else "—", launches or "—"])
    if tops:
        lines += ["Top %d kernels of each model and phase at its longest length with kernel rows (time per prefill "
                  "or per decode step; *launches* per the same unit, from the notes):" % TOP_KERNELS, ""]
        lines.append(table(["model", "N", "B", "phase", "kernel", "family", "time", "share", "launches"], tops))
        lines.append("")
    lines += _host_section(pts, table)
    return lines


def _calls(r):
    m = _CALLS_NOTE.search(r.notes or "")
    return m.group("calls") if m else "—"


def _host_section(pts, table):
    """The host's CUDA calls at each point that has them: what enqueued the work, what waited, the top functions."""
    body = []
    for p in pts.values():
        enq, wait = p.host.get("api_enqueue_s"), p.host.get("api_wait_s")
        if enq is None and not p.host_calls:
            continue
        top = sorted((r for r in p.host_calls if r.value is not None), key=lambda r: -r.value)[:TOP_HOST_CALLS]
        body.append([p.model, fmt_tokens(p.seq_len), str(p.batch), p.phase,
                     fmt_value(enq.value, "s") if enq is not None else "—",
                     _calls(enq) if enq is not None else "—",
                     fmt_value(wait.value, "s") if wait is not None else "—",
                     "; ".join("%s %s (%s calls)" % (r.phase.partition(":")[2], fmt_value(r.value, "s"), _calls(r))
                               for r in top) or "—"])
    if not body:
        return []
    return ["The host's CUDA calls in the same profiled regions (CUPTI runtime and driver API records, per prefill "
            "or per decode step; each call's time includes CUPTI's tracing of it, so these bound the calls' own from "
            "above). *enqueue* is the calls that launch work or set state, *wait* the ones that wait for the device; "
            "a driver call made inside a runtime call counts once. Where *enqueue* comes near the unit's time, the "
            "host sets the pace:", "",
            table(["model", "N", "B", "phase", "enqueue", "calls", "wait", "top functions (time, calls)"], body), ""]
