"""The line figure shared by the families drawn against length (memory_vs_length, prefill_vs_length,
throughput_vs_length, decode_vs_length): one line per model, the method of each point drawn; the specs come from
the family modules."""
from collections import OrderedDict

from . import memory, prefill, throughput
from .data import NOT_RUN_LABEL
from .style import (FIGURE_KINDS, Figure, Line2D, _byte_unit, _byte_ylabel, _draw_paper_star, _draw_point,
                    _label, _legends, _log2_axis, _method_legend_handles, _method_of, _paper_points, _save,
                    _segment_style, _short_methods, _y_scale, fmt_tokens, methods_phrase, model_colors,
                    model_sort_key, models_phrase, paper_flags, paper_value_text, plt)

LINE_SPECS = {}
for _family in (memory, prefill, throughput):
    LINE_SPECS.update(_family.LINE_SPECS)


def _series(rows):
    """model -> list of series (label, rows sorted by seq_len): one per model unless a model has several
    rows at one length (different batch or gen_tokens), then one per (batch, gen_tokens)."""
    by_model = OrderedDict()
    for r in sorted(rows, key=lambda r: (model_sort_key(r.model), r.seq_len)):
        by_model.setdefault(r.model, []).append(r)
    out = []
    for model, rs in by_model.items():
        lens = [r.seq_len for r in rs]
        if len(lens) == len(set(lens)):
            out.append((model, model, rs))
            continue
        groups = OrderedDict()
        for r in rs:
            groups.setdefault((r.batch, r.gen_tokens), []).append(r)
        for (b, g), grs in groups.items():
            out.append((model, "%s (batch %d, gen %d)" % (model, b, g), grs))
    return out


def _x_label(kind, rows):
    gens = set(r.gen_tokens for r in rows)
    if kind == "prefill_vs_length":
        return "prompt length (tokens)"
    if kind == "decode_vs_length":
        return "context length (tokens in the cache)"
    if len(gens) == 1 and list(gens)[0] > 0:
        return "sequence length N (tokens; the last {:,} generated)".format(list(gens)[0])
    return "sequence length N (tokens, prompt + generated)"


def line_figure(data, device_name, rows, kind, out_dir, stem):
    spec = LINE_SPECS[kind]
    pts = [r for r in rows if r.phase == spec["phase"] and r.metric == spec["metric"] and not r.is_ratio]
    if not pts:
        return Figure(device_name, kind, reason="no rows with phase %s, metric %s" % (spec["phase"], spec["metric"]))
    drawable = []
    for r in pts:
        if r.seq_len <= 0:
            print("  %s: seq_len %d cannot go on a log axis; skipped" % (r.where(), r.seq_len))
            continue
        v, _ = data.value_of(r)
        if v is None:
            print("  %s: %s at %s did not run (%s) and has no analytic row beside it; not drawn"
                  % (r.where(), r.model, fmt_tokens(r.seq_len), r.method))
            continue
        if v <= 0:
            print("  %s: value %g is not positive; not drawn" % (r.where(), v))
            continue
        drawable.append(r)
    if not drawable:
        return Figure(device_name, kind, reason="rows with %s exist but none has a value to draw (or an analytic "
                                                "row beside a point that did not run)" % spec["metric"])
    models = sorted(set(r.model for r in drawable), key=model_sort_key)
    colors = model_colors(models)
    paper = _paper_points(data, device_name, spec["phase"], spec["metric"], models)
    sc, ylabel = spec["scale"], spec["ylabel"]
    if sc is None:  # the unit that suits the largest value: decimal GB/MB/KB for bytes, s/ms/µs for times
        top = max([data.value_of(r)[0] for r in drawable] + [p.value for p in paper])
        if spec["metric"].endswith("_bytes"):
            div, name = _byte_unit(top)
            ylabel = _byte_ylabel(spec["ylabel"], name, div)
        else:
            div, name = next((d, n) for d, n in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")) if top >= d or d == 1e-6)
            ylabel = "%s (%s)" % (spec["ylabel"], name)
        sc = 1.0 / div

    fig, ax = plt.subplots(figsize=(7.6, 4.6))
    methods_used, model_handles, labels = set(), [], []
    xs = [r.seq_len for r in drawable] + [p.seq_len for p in paper]
    ys = [data.value_of(r)[0] * sc for r in drawable] + [p.value * sc for p in paper]
    for model, label, srs in _series(drawable):
        color = colors[model]
        vals = [(r.seq_len, data.value_of(r)[0] * sc, _method_of(r), r) for r in srs]
        for (x1, y1, m1, _), (x2, y2, m2, _) in zip(vals, vals[1:]):
            ax.plot([x1, x2], [y1, y2], color=color, linestyle=_segment_style(m1, m2), linewidth=1.6, zorder=3)
        for x, y, m, r in vals:
            _draw_point(ax, x, y, m, color)
            methods_used.add(m)
            if r.not_run:
                labels.append((x, y, NOT_RUN_LABEL[r.method], 8, dict(fontsize=7.5, color="#8b0000",
                                                                       fontweight="bold")))
            if kind == "throughput_vs_length" and r.batch > 1 and len(set(q.batch for q in drawable)) > 1:
                ax.annotate("b=%d" % r.batch, (x, y), textcoords="offset points", xytext=(0, -11),
                            fontsize=6.5, color="#555555", ha="center", va="top")
        model_handles.append((Line2D([], [], color=color, linewidth=2.2), label))
    ours_at = {(r.model, r.seq_len): data.value_of(r)[0] * sc for r in drawable}
    for pr in paper:
        _draw_paper_star(ax, pr.seq_len, pr.value * sc, colors[pr.model], pr)
        mine = ours_at.get((pr.model, pr.seq_len))
        dy = 0 if mine is None else (-8 if mine >= pr.value * sc else 8)  # away from our point and its line
        # Short label: the legend says a star is the paper's, an open one derived.
        labels.append((pr.seq_len, pr.value * sc, paper_value_text(pr).replace(" (derived)", ""), dy,
                       dict(fontsize=7, color="#222222", fontstyle="italic")))
    # Throughput points that do not exist because not even one sequence fits (max_batch 0, no throughput row).
    no_fit = []
    if kind == "throughput_vs_length":
        have = set((r.model, r.seq_len) for r in drawable)
        for r in rows:
            if (r.phase == "throughput" and r.metric == "max_batch" and r.value == 0 and r.model in colors
                    and r.seq_len > 0 and (r.model, r.seq_len) not in have):
                no_fit.append(r)
                xs.append(r.seq_len)
                have.add((r.model, r.seq_len))
    _log2_axis(ax, xs)
    _y_scale(ax, ys, force="log" if kind in ("prefill_vs_length", "decode_vs_length") and max(ys) / min(ys) >= 10
             else None)
    for i, r in enumerate(sorted(no_fit, key=lambda r: (r.seq_len, model_sort_key(r.model)))):
        y = 0.95 - 0.07 * i  # throughput falls with length: the top right is free
        ax.plot([r.seq_len], [y], transform=ax.get_xaxis_transform(), marker="v", markersize=8,
                markerfacecolor="white", markeredgecolor=colors[r.model], markeredgewidth=1.6, zorder=4,
                linestyle="none", clip_on=False)
        _label(ax, r.seq_len, y, "%s: does not fit" % r.model, xycoords=ax.get_xaxis_transform(), fontsize=7.5,
               color="#8b0000", fontweight="bold")
        methods_used.add("does not fit")
    for x, y, text, dy, kw in labels:
        _label(ax, x, y, text, dy=dy, **kw)
    xlabel = _x_label(kind, drawable)
    batches = set(r.batch for r in drawable)
    if len(batches) == 1 and list(batches)[0] > 1:
        xlabel += "; batch %d at every point" % list(batches)[0]
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    paper_fig = FIGURE_KINDS[kind]
    ref = " (cf. paper %s)" % paper_fig if paper_fig else " (not a paper figure)"
    title = "%s%s\n%s · %s\n%s" % (spec["title"], ref, device_name, models_phrase(models), _short_methods(pts))
    ax.set_title(title, fontsize=9.5)
    _legends(ax, model_handles, _method_legend_handles(methods_used, bool(paper),
                                                       any(paper_flags(p)["derived"] for p in paper)))
    paths = _save(fig, out_dir, stem)
    caption = "%s vs length on %s; models %s; %s.%s" % (
        spec["what"], device_name, models_phrase(models), methods_phrase(pts),
        " Stars: the paper's values (H100-80GB; open: derived from its ratios)." if paper else "")
    return Figure(device_name, kind, title.replace("\n", " — "), caption, paths)
