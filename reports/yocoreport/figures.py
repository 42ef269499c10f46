"""Every figure of every device: make_figures walks FIGURE_KINDS and hands each kind to its family's drawer."""
from .breakdown import breakdown_figure as cupti_figure
from .data import DEFAULT_OUT
from .kv import kv_figure
from .lines import LINE_SPECS, line_figure
from .memory import breakdown_figure
from .style import FIGURE_KINDS, Figure, plt, slug


def make_figures(data, out_dir=DEFAULT_OUT, log=print):
    """Draw every figure for every device; returns [Figure] (skipped ones have `reason`)."""
    figures = []
    devices = data.devices()
    if not devices:
        log("no result rows: no figures drawn")
        return figures
    stems = {}
    for name, rows in devices.items():
        s = slug(name)
        while s in stems.values():
            s += "-2"
        stems[name] = s
        kinds = sorted(set(r.device for r in rows))
        log("device %r (%s, %d rows):" % (name, "/".join(kinds), len(rows)))
        for kind in FIGURE_KINDS:
            stem = "%s_%s" % (s, kind)
            try:
                if kind in LINE_SPECS:
                    f = line_figure(data, name, rows, kind, out_dir, stem)
                elif kind == "memory_breakdown":
                    f = breakdown_figure(data, name, rows, out_dir, stem)
                elif kind == "breakdown":
                    f = cupti_figure(data, name, rows, out_dir, stem)
                    if f is None:  # no CUPTI rows: no figure, not even a skipped one
                        continue
                else:
                    f = kv_figure(data, name, rows, out_dir, stem)
            except Exception as exc:  # a figure must never take the others down
                plt.close("all")
                f = Figure(name, kind, reason="error while drawing: %s: %s" % (type(exc).__name__, exc))
            if f.paths:
                log("  wrote %s" % ", ".join(f.paths))
            else:
                log("  skip %s: %s" % (kind, f.reason))
            figures.append(f)
    return figures
