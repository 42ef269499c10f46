"""KV cache figure: KV cache bytes per token vs model size (paper Fig. 8)."""
import math
import os
from collections import OrderedDict

from .data import NOT_RUN_LABEL
from .style import (Figure, FuncFormatter, Line2D, NullFormatter, _BASE, _count_label, _draw_paper_star,
                    _draw_point, _label, _legends, _method_legend_handles, _method_of, _paper_points, _save,
                    _segment_style, _short_methods, _y_scale, family_kind, fmt_sig, fmt_value, methods_phrase,
                    model_sort_key, plt, split_preset)

def kv_figure(data, device_name, rows, out_dir, stem):
    kind = "kv_cache_per_token"
    kv = [r for r in rows if r.phase == "kv_cache" and r.metric == "kv_cache_bytes_per_token" and not r.is_ratio]
    kv = [r for r in kv if data.value_of(r)[0] is not None and data.value_of(r)[0] > 0]
    if not kv:
        return Figure(device_name, kind, reason="no rows with phase kv_cache, metric kv_cache_bytes_per_token")
    # One value per model (batch 1 preferred, shortest seq_len: the figure is per token of one sequence).
    per_model = OrderedDict()
    for r in sorted(kv, key=lambda r: (model_sort_key(r.model), r.batch != 1, r.seq_len)):
        per_model.setdefault(r.model, r)
    models = list(per_model)
    have_pc = all(m in data.param_count for m in models)
    if have_pc and len(set(data.param_count[m] for m in models)) < 3:
        have_pc = False  # one or two sizes: a categorical axis reads better than a log scale
    elif not have_pc:
        missing = [m for m in models if m not in data.param_count]
        print("  %s: no param_count row (phase model) for %s; x axis = preset size order"
              % (device_name, ", ".join(missing[:6]) + (" …" if len(missing) > 6 else "")))
    sizes = sorted(set(split_preset(m)[1:] for m in models),
                   key=lambda s: (s[1] is None, s[1] if s[1] is not None else 0, s[0] or ""))
    if have_pc:
        xpos = {m: data.param_count[m] for m in models}
    else:
        size_x = {s: i for i, s in enumerate(sizes)}
        xpos = {m: size_x[split_preset(m)[1:]] for m in models}
        tick_labels = [s[0] if s[0] is not None else "" for s in sizes]
        for m in models:  # a model without a size suffix gets its own tick, named after it
            if split_preset(m)[1] is None:
                tick_labels[xpos[m]] = os.path.basename(m)
    families = OrderedDict()
    for m in models:
        families.setdefault((family_kind(m), split_preset(m)[0]), []).append(m)
    fam_color = {}
    others = [fam for (k, fam) in families if k == "other"]
    for (kindf, fam) in families:
        if kindf != "other":
            fam_color[fam] = _BASE[kindf]
    for i, fam in enumerate(others):
        fam_color[fam] = plt.get_cmap("Greys")(0.5 + 0.4 * i / max(1, len(others) - 1))

    fig, ax = plt.subplots(figsize=(7.6, 4.8))
    methods_used, handles, ys = set(), [], []
    for (kindf, fam), ms in families.items():
        ms = sorted(ms, key=lambda m: xpos[m])
        color = fam_color[fam]
        # SWA-YOCO has the same global cache as gRet-YOCO: drawn as a wide pale band under it, so both show.
        halo = kindf == "yoco-swa"
        pts = [(xpos[m], data.value_of(per_model[m])[0], _method_of(per_model[m]), per_model[m]) for m in ms]
        for (x1, y1, m1, _), (x2, y2, m2, _) in zip(pts, pts[1:]):
            ax.plot([x1, x2], [y1, y2], color=color, linestyle="-" if halo else _segment_style(m1, m2),
                    linewidth=6 if halo else 1.5, alpha=0.35 if halo else 1.0, zorder=2.5 if halo else 3,
                    solid_capstyle="round")
        for x, y, m, r in pts:
            _draw_point(ax, x, y, m, color, size=11 if halo else 6.5, alpha=0.35 if halo else 1.0)
            methods_used.add(m)
            ys.append(y)
            if r.not_run:
                ax.annotate(NOT_RUN_LABEL[r.method], (x, y), textcoords="offset points", xytext=(6, 6),
                            fontsize=7.5, color="#8b0000")
        handles.append((Line2D([], [], color=color, linewidth=6 if halo else 2.2, alpha=0.35 if halo else 1.0),
                        fam + (" (wide band)" if halo else "")))
    if have_pc:
        # Size names once per size, below the lowest point of that size.
        low = {}
        for m in models:
            s = split_preset(m)[1] or os.path.basename(m)
            y = data.value_of(per_model[m])[0]
            if s not in low or y < low[s][1]:
                low[s] = (xpos[m], y)
        for s, (x, y) in low.items():
            ax.annotate(s, (x, y), textcoords="offset points", xytext=(0, -9), fontsize=7, ha="center",
                        va="top", color="#333333")
    # Transformer / YOCO at each size where both exist, as a row of labels along the bottom.
    yoco_by_size = {split_preset(m)[1]: m for m in models if family_kind(m) == "yoco" and split_preset(m)[1]}
    last_x = None
    for m in sorted(models, key=lambda m: xpos[m]):
        size = split_preset(m)[1]
        if family_kind(m) != "transformer" or size not in yoco_by_size:
            continue
        y_t, y_y = data.value_of(per_model[m])[0], data.value_of(per_model[yoco_by_size[size]])[0]
        x = xpos[m]
        if have_pc and last_x is not None and abs(math.log10(x) - math.log10(last_x)) < 0.25:
            continue
        last_x = x
        ax.annotate("%s×" % fmt_sig(y_t / y_y), (x, 0.02), xycoords=("data", "axes fraction"), fontsize=7,
                    ha="center", va="bottom", color="#555555")
    paper = _paper_points(data, device_name, "kv_cache", "kv_cache_bytes_per_token", models)
    for pr in paper:
        _draw_paper_star(ax, xpos[pr.model], pr.value, fam_color.get(split_preset(pr.model)[0], "#444444"), pr)
        ys.append(pr.value)
    if have_pc:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(_count_label))
        ax.xaxis.set_minor_formatter(NullFormatter())
        xs = list(xpos.values())
        ax.set_xlim(min(xs) / 2.5, max(xs) * 2.5)
        ax.set_xlabel("parameters (from the param_count rows)")
    else:
        ax.set_xticks(range(len(tick_labels)))
        ax.set_xticklabels(tick_labels)
        ax.set_xlim(-0.5, len(tick_labels) - 0.5)
        ax.set_xlabel("model size (preset name; not to scale)")
    _y_scale(ax, ys, force="log" if max(ys) / min(ys) >= 10 else None)
    lo, hi = ax.get_ylim()
    if ax.get_yscale() == "log":
        ax.set_ylim(lo / 3.0, hi)  # room for the ratio labels along the bottom
    for pr in paper:
        _label(ax, xpos[pr.model], pr.value, "paper: %s" % fmt_value(pr.value, "B/token"), fontsize=7)
    ax.set_ylabel("KV cache per token (bytes / token)")
    ax.grid(True, which="major", alpha=0.3)
    fams = [fam for (_, fam) in families]
    title = "KV cache bytes per token vs model size (cf. paper Fig. 8)\n%s · %s (%d model%s)\n%s" % (
        device_name, ", ".join(fams), len(models), "" if len(models) == 1 else "s",
        _short_methods(list(per_model.values())))
    ax.set_title(title, fontsize=9.5)
    ax.text(0.0, -0.2, "grey labels along the bottom: Transformer / YOCO bytes per token at that size",
            transform=ax.transAxes, fontsize=7.5, color="#444444", va="top")
    _legends(ax, handles, _method_legend_handles(methods_used, bool(paper), False))
    paths = _save(fig, out_dir, stem)
    caption = ("Bytes the KV cache grows by per token of one sequence, by model size, on %s; %s; labels along "
               "the bottom: Transformer / YOCO.%s") % (
        device_name, methods_phrase(list(per_model.values())),
        " Stars: the paper's Fig. 8 values read as 1 GB / tokens served." if paper else "")
    return Figure(device_name, kind, title.replace("\n", " — "), caption, paths)
