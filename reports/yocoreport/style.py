"""Shared by every figure family: names, colours and number formats; the `Figure` record and the catalogue of
figure kinds (FIGURE_KINDS); how a method is drawn (markers, line styles, legends), axes, labels, saving."""
import math
import os
import re
import sys
from collections import OrderedDict, defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    # Fixed ids inside SVGs: a re-run with the same rows rewrites the same bytes, so git shows only real changes.
    matplotlib.rcParams["svg.hashsalt"] = "yoco-report"
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator
except ImportError as exc:  # pragma: no cover - depends on the interpreter
    sys.stderr.write(
        "plot.py: matplotlib is missing (%s). Run with Debian's interpreter, /usr/bin/python3, "
        "with the python3-matplotlib package installed.\n" % exc
    )
    sys.exit(1)

from .atomic import replacing
from .data import KNOWN_METHODS, NOT_RUN, NOT_RUN_LABEL, PAPER_MODELS

METHOD_STYLE = OrderedDict([
    # method: (marker, filled, linestyle of a segment whose weaker end has this method)
    ("measured", ("o", True, "-")),
    ("exact", ("D", True, "-")),
    ("sampled", ("s", True, "-")),
    ("extrapolated", ("^", False, ":")),
    ("analytic", ("x", True, "--")),
    ("calibrated", ("P", False, "-.")),
    ("not run", ("X", False, "--")),
    ("does not fit", ("v", False, "none")),
])
METHOD_LEGEND = {
    "measured": "measured (full run)",
    "exact": "exact (counted bytes)",
    "sampled": "sampled (part timed, scaled)",
    "extrapolated": "extrapolated (reduced run, scaled)",
    "analytic": "analytic (cost model)",
    "calibrated": "calibrated (cost model fitted to a measured card)",
    "not run": "not run: analytic value shown",
    "does not fit": "no point: one sequence does not fit",
}

PAPER_DEVICE_RE = re.compile(r"h100", re.IGNORECASE)


# ----------------------------------------------------------------------------------------------
# Names, colours, formats

_SIZE_RE = re.compile(r"^(?P<family>.+)-(?P<size>tiny|small|\d+(?:\.\d+)?[kmbt])$", re.IGNORECASE)
# The named test sizes sort below every parameter count: tiny (d 64) before small (d 256).
_NAMED_SIZES = {"tiny": 0.0, "small": 1.0}
_SIZE_MULT = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def split_preset(model):
    """'yoco-1.4b' -> ('yoco', '1.4b', 1.4e9); 'yoco-tiny' -> ('yoco', 'tiny', 0); 'yoco-small' -> ('yoco', 'small', 1);
    other -> (model, None, None)."""
    m = _SIZE_RE.match(os.path.basename(model))
    if not m:
        return model, None, None
    size = m.group("size").lower()
    n = _NAMED_SIZES[size] if size in _NAMED_SIZES else float(size[:-1]) * _SIZE_MULT[size[-1]]
    return m.group("family"), size, n


def family_kind(model):
    """'yoco' (gRet), 'yoco-swa', 'transformer' or 'other'."""
    name = os.path.basename(model).lower()
    if name.startswith("yoco-swa"):
        return "yoco-swa"
    if name.startswith("yoco"):
        return "yoco"
    if name.startswith("transformer"):
        return "transformer"
    return "other"


_CMAPS = {"yoco": "Blues", "yoco-swa": "GnBu", "transformer": "Reds", "other": "Greys"}
_BASE = {"yoco": "#1f5fa8", "yoco-swa": "#138d75", "transformer": "#c0392b", "other": "#555555"}


def model_sort_key(model):
    fam, _, n = split_preset(model)
    order = {"yoco": 0, "yoco-swa": 1, "transformer": 2, "other": 3}[family_kind(model)]
    return (order, fam, n if n is not None else float("inf"), model)


def model_colors(models):
    """YOCO models in blues, SWA-YOCO in blue-greens, Transformers in reds; shades by size within a family."""
    by_kind = defaultdict(list)
    for m in sorted(set(models), key=model_sort_key):
        by_kind[family_kind(m)].append(m)
    colors = {}
    for kind, ms in by_kind.items():
        if len(ms) == 1:
            colors[ms[0]] = _BASE[kind]
            continue
        cmap = plt.get_cmap(_CMAPS[kind])
        for i, m in enumerate(ms):
            colors[m] = cmap(0.45 + 0.5 * i / (len(ms) - 1))
    return colors


def fmt_tokens(n):
    n = int(n)
    if n <= 0:
        return str(n)
    if n % (1 << 20) == 0:
        return "%dM" % (n >> 20)
    if n % 1024 == 0:
        return "%dK" % (n >> 10)
    if n >= 1024 and (n * 10) % 1024 == 0:
        return "%gK" % (n / 1024.0)
    return "{:,}".format(n)


def fmt_sig(v, digits=3):
    if v is None:
        return "—"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10 ** digits:
        return "{:,.0f}".format(v)
    s = "%.*g" % (digits, v)
    if "e" in s:
        s = "%.*f" % (max(0, digits - 1 - int(math.floor(math.log10(a)))), v)
    return s


def fmt_value(v, unit):
    """A value with a readable unit: decimal GB / MB / KB for bytes, s / ms / µs, tokens/s, ×."""
    if v is None:
        return "—"
    if unit == "B":
        for div, u in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
            if abs(v) >= div:
                return "%s %s" % (fmt_sig(v / div), u)
        return "%s B" % fmt_sig(v)
    if unit == "B/token":
        return ("{:,.0f} B/token".format(v)) if abs(v) >= 1000 else "%s B/token" % fmt_sig(v, 4)
    if unit == "s":
        if abs(v) >= 1 or v == 0:
            return "%s s" % fmt_sig(v)
        if abs(v) >= 1e-3:
            return "%s ms" % fmt_sig(v * 1e3)
        return "%s µs" % fmt_sig(v * 1e6)
    if unit == "x":
        return "%s×" % fmt_sig(v)
    if unit == "count":
        return "{:,.0f}".format(v)
    return "%s %s" % (fmt_sig(v), unit)


def slug(name):
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "device"


def is_paper_device(device_name):
    return bool(PAPER_DEVICE_RE.search(device_name))


def methods_phrase(rows):
    """'measured, sampled; 1 point over budget' from the rows drawn."""
    counts = OrderedDict()
    for m in ("measured", "exact", "sampled", "extrapolated", "analytic", "calibrated") + NOT_RUN:
        n = sum(1 for r in rows if r.method == m)
        if n:
            counts[m] = n
    for r in rows:
        if r.method not in counts and r.method not in KNOWN_METHODS:
            counts[r.method] = counts.get(r.method, 0) + 1
    parts = [m for m in counts if m not in NOT_RUN]
    text = ", ".join(parts) if parts else "no values"
    nr = ["%d %s" % (counts[m], NOT_RUN_LABEL[m]) for m in NOT_RUN if m in counts]
    if nr:
        text += "; not run: " + ", ".join(nr) + " (analytic value shown)"
    return text


def models_phrase(models, limit=4):
    ms = sorted(set(models), key=model_sort_key)
    if len(ms) > limit:
        return "%s … (%d models)" % (", ".join(ms[:limit]), len(ms))
    return ", ".join(ms)


def paper_flags(row):
    """Qualifiers of a paper number, from its notes: derived, upper/lower bound, approximate, context."""
    n = row.notes.lower()
    return {
        "derived": n.startswith("derived"),
        "upper": "upper bound" in n,
        "lower": "lower bound" in n,
        "approx": "approximate" in n,
        "context": n.startswith("context"),
    }


def paper_value_text(row):
    f = paper_flags(row)
    t = fmt_value(row.value, row.unit)
    if f["upper"]:
        t = "< " + t
    elif f["lower"]:
        t = "≥ " + t
    elif f["approx"]:
        t = "~" + t
    if f["derived"]:
        t += " (derived)"
    return t


# ----------------------------------------------------------------------------------------------
# Figures


class Figure(object):
    """What make_figures produced for one device and kind (`paths` empty and `reason` set when skipped)."""

    def __init__(self, device_name, kind, title="", caption="", paths=(), reason=""):
        self.device_name, self.kind, self.title, self.caption = device_name, kind, title, caption
        self.paths, self.reason = list(paths), reason

    @property
    def png(self):
        return next((p for p in self.paths if p.endswith(".png")), None)


FIGURE_KINDS = OrderedDict([
    ("memory_vs_length", "Fig. 7a"),
    ("memory_breakdown", "Fig. 7b"),
    ("kv_cache_per_token", "Fig. 8"),
    ("prefill_vs_length", "Fig. 9"),
    ("throughput_vs_length", "Fig. 10"),
    ("decode_vs_length", None),
    ("breakdown", None),  # GPU time by kernel family, from CUPTI rows (breakdown.py); only where they exist
])


# Every figure file _save has written in this process, in order (report.py counts the figures it wrote: the
# device figures and the README's own, e.g. multi_device_prefill).
WRITTEN = []


def _save(fig, out_dir, stem):
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(out_dir, "%s.%s" % (stem, ext))
        kw = {"metadata": {"Date": None}} if ext == "svg" else {}
        with replacing(p) as f:  # atomic: a cut-off run never leaves a torn figure
            fig.savefig(f, format=ext, dpi=150, bbox_inches="tight", **kw)
        paths.append(p)
        WRITTEN.append(p)
    plt.close(fig)
    return paths


def _log2_axis(ax, xs):
    xs = [x for x in xs if x > 0]
    ax.set_xscale("log", base=2)
    lo, hi = min(xs), max(xs)
    e0, e1 = int(math.floor(math.log2(lo))), int(math.ceil(math.log2(hi)))
    step = max(1, int(math.ceil((e1 - e0 + 1) / 12.0)))
    ticks = [2 ** e for e in range(e0, e1 + 1, step)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_tokens(v)))
    if lo == hi:
        ax.set_xlim(lo / 1.6, hi * 1.6)
    else:
        ax.set_xlim(lo / 1.25, hi * 1.25)


def _byte_unit(max_bytes):
    """(divisor, name) of the decimal unit that keeps the largest value >= 1: GB, MB, KB or B."""
    for div, name in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if max_bytes >= div:
            return div, name
    return 1.0, "B"


def _byte_ylabel(what, name, div):
    if name == "B":
        return "%s (bytes)" % what
    return "%s (%s, 1 %s = 10$^{%d}$ B)" % (what, name, name, int(round(math.log10(div))))


def _plain_log_label(v, _pos=None):
    """Log ticks as plain numbers (0.02, 1, 5, 1,000) where that stays short, else 10^n."""
    if v <= 0:
        return ""
    e = int(math.floor(math.log10(v) + 1e-9))
    mant = v / 10.0 ** e
    if -3 <= e <= 5:
        if e >= 0:
            return "{:,}".format(int(round(v)))
        return "%.*f" % (-e, v)
    if abs(mant - 1) < 1e-6:
        return "$10^{%d}$" % e
    return "$%g{\\times}10^{%d}$" % (round(mant, 3), e)


def _count_label(v, _pos=None):
    """Parameter counts: 1M, 10M, 1B, 100B."""
    if v <= 0:
        return ""
    for div, u in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if v >= div:
            return "%g%s" % (v / div, u)
    return "%g" % v


def _y_scale(ax, ys, force=None):
    ys = [y for y in ys if y is not None and y > 0]
    if not ys:
        return
    if force == "log" or (force is None and max(ys) / min(ys) >= 30):
        ax.set_yscale("log")
        lo, hi = min(ys), max(ys)
        pad = (hi / lo) ** 0.08 if hi > lo else 3.0
        ax.set_ylim(lo / pad, hi * pad)
        if hi / lo < 300:  # under ~2.5 decades: label 1, 2, 5 of each decade, or too few ticks remain
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(_plain_log_label))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(bottom=0, top=max(ys) * 1.15)


def _side(ax, x):
    """+1: put a label right of x; -1: left of it (x in the right part of the axis)."""
    x0, x1 = ax.get_xlim()
    if ax.get_xscale() == "log":
        x, x0, x1 = (math.log(max(v, 1e-300)) for v in (x, x0, x1))
    frac = (x - x0) / (x1 - x0) if x1 != x0 else 0.5
    return -1 if frac > 0.68 else 1


def _label(ax, x, y, text, dy=0, xycoords="data", **kw):
    side = _side(ax, x)
    ax.annotate(text, (x, y), xycoords=xycoords, textcoords="offset points", xytext=(9 * side, dy),
                ha="left" if side > 0 else "right", va="center", zorder=7,
                bbox=dict(boxstyle="round,pad=0.12", facecolor="white", edgecolor="none", alpha=0.75), **kw)


def _method_of(row):
    if row.not_run:
        return "not run"
    return row.method if row.method in METHOD_STYLE else "measured"


def _draw_point(ax, x, y, method, color, size=6.5, alpha=1.0):
    marker, filled, _ = METHOD_STYLE[method]
    if alpha < 1.0:  # a halo under another series with the same values
        ax.plot([x], [y], marker=marker, markersize=size, color=color, alpha=alpha, markeredgewidth=3.0,
                linestyle="none", zorder=2.5)
        return
    if method == "not run":
        ax.plot([x], [y], marker=marker, markersize=size + 2.5, markerfacecolor="white",
                markeredgecolor=color, markeredgewidth=1.6, linestyle="none", zorder=4)
    elif marker == "x":
        ax.plot([x], [y], marker=marker, markersize=size + 1, color=color, markeredgewidth=1.8,
                linestyle="none", zorder=4)
    else:
        ax.plot([x], [y], marker=marker, markersize=size, markerfacecolor=color if filled else "white",
                markeredgecolor=color, markeredgewidth=1.4, linestyle="none", zorder=4)


def _segment_style(m1, m2):
    rank = {"measured": 0, "exact": 0, "sampled": 1, "extrapolated": 2, "analytic": 3, "calibrated": 3, "not run": 4}
    worse = m1 if rank.get(m1, 0) >= rank.get(m2, 0) else m2
    return METHOD_STYLE[worse][2]


def _method_legend_handles(methods, with_paper=False, paper_derived=False):
    hs = []
    for m in METHOD_STYLE:
        if m not in methods:
            continue
        marker, filled, ls = METHOD_STYLE[m]
        if m == "not run":
            h = Line2D([], [], color="#444444", linestyle=ls, marker=marker, markerfacecolor="white",
                       markeredgewidth=1.6, markersize=8)
        else:
            h = Line2D([], [], color="#444444", linestyle=ls, marker=marker,
                       markerfacecolor="#444444" if filled else "white", markersize=6)
        hs.append((h, METHOD_LEGEND[m]))
    if with_paper:
        hs.append((Line2D([], [], linestyle="none", marker="*", markersize=10, markerfacecolor="#444444",
                          markeredgecolor="black"), "paper (H100-80GB), stated"))
        if paper_derived:
            hs.append((Line2D([], [], linestyle="none", marker="*", markersize=10, markerfacecolor="white",
                              markeredgecolor="black"), "paper, derived from its ratios"))
    return hs


def _legends(ax, model_handles, method_handles):
    leg1 = ax.legend([h for h, _ in model_handles], [l for _, l in model_handles], title="model",
                     loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title_fontsize=8, frameon=False)
    ax.add_artist(leg1)
    if method_handles:
        ax.legend([h for h, _ in method_handles], [l for _, l in method_handles], title="how obtained",
                  loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=8, title_fontsize=8, frameon=False)


def _paper_points(data, device_name, phase, metric, models):
    if not is_paper_device(device_name):
        return []
    return [r for r in data.paper if r.phase == phase and r.metric == metric and r.model in models
            and r.model in PAPER_MODELS and r.value is not None and not paper_flags(r)["context"]]


def _draw_paper_star(ax, x, y, color, row):
    """A star at the paper's value (filled: stated; open: derived from its ratios), under our markers."""
    derived = paper_flags(row)["derived"]
    ax.plot([x], [y], marker="*", markersize=15, markerfacecolor="white" if derived else color,
            markeredgecolor="black", markeredgewidth=0.9, linestyle="none", zorder=3.5)


def _short_methods(rows):
    """For titles: 'measured, extrapolated; 1 over budget'."""
    parts = [m for m in ("measured", "exact", "sampled", "extrapolated", "analytic", "calibrated")
             if any(r.method == m for r in rows)]
    parts += sorted(set(r.method for r in rows if r.method not in KNOWN_METHODS))
    text = "method: " + (", ".join(parts) if parts else "none")
    nr = ["%d %s" % (sum(1 for r in rows if r.method == m), NOT_RUN_LABEL[m]) for m in NOT_RUN
          if any(r.method == m for r in rows)]
    if nr:
        text += "; not run: " + ", ".join(nr)
    return text
