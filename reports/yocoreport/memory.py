"""Memory figures: total memory vs length (paper Fig. 7a, drawn by lines.line_figure from LINE_SPECS here) and
the memory breakdown by part at the longest length (paper Fig. 7b)."""
from collections import OrderedDict, defaultdict

from matplotlib.patches import Patch

from .data import NOT_RUN, NOT_RUN_LABEL
from .style import (Figure, Line2D, _byte_unit, _byte_ylabel, _draw_paper_star, _paper_points, _save,
                    _short_methods, fmt_tokens, fmt_value, methods_phrase, model_colors, model_sort_key,
                    models_phrase, paper_value_text, plt)

MEMORY_PARTS = OrderedDict([
    ("mem_weights_bytes", ("weights", "#7f7f7f")),
    ("mem_kv_cache_bytes", ("KV cache", "#8e44ad")),
    ("mem_state_bytes", ("state (gRet / SWA)", "#16a085")),
    ("mem_activations_bytes", ("activations", "#e67e22")),
    ("mem_other_bytes", ("other (context, workspaces)", "#c8c8c8")),
])

LINE_SPECS = {
    "memory_vs_length": dict(phase="memory", metric="mem_total_bytes", scale=None,
                             title="Total inference memory vs length",
                             ylabel="total memory",
                             what="Total memory (weights + KV cache + state + activations + other)"),
}


def breakdown_figure(data, device_name, rows, out_dir, stem):
    kind = "memory_breakdown"
    mem = [r for r in rows if r.phase == "memory" and r.metric in MEMORY_PARTS and not r.is_ratio]
    if not mem:
        return Figure(device_name, kind, reason="no rows with phase memory and metrics %s" % ", ".join(MEMORY_PARTS))
    by_model = defaultdict(list)
    for r in mem:
        by_model[r.model].append(r)
    bars = []  # (model, seq_len, batch, {part: value}, methods, not-run status, rows)
    for model in sorted(by_model, key=model_sort_key):
        rs = by_model[model]
        # Longest length; at it, the (batch, gen_tokens) with most parts, preferring batch 1.
        n = max(r.seq_len for r in rs)
        groups = defaultdict(list)
        for r in rs:
            if r.seq_len == n:
                groups[(r.batch, r.gen_tokens)].append(r)
        (b, g), grs = max(groups.items(), key=lambda kv: (len(kv[1]), kv[0][0] == 1, -kv[0][0]))
        parts, methods, status = OrderedDict(), set(), None
        for r in grs:
            v, _ = data.value_of(r)
            if v is None:
                continue
            parts[r.metric] = v
            methods.add(r.method)
            if r.not_run:
                status = r.method
        if not parts:
            print("  %s @%s: no part of the memory has a value; bar skipped" % (model, fmt_tokens(n)))
            continue
        bars.append((model, n, b, parts, methods, status, grs))
    if not bars:
        return Figure(device_name, kind, reason="memory part rows exist but none has a value")
    paper = _paper_points(data, device_name, "memory", "mem_total_bytes", [b[0] for b in bars])

    div, uname = _byte_unit(max([sum(b[3].values()) for b in bars] + [p.value for p in paper]))
    fig, ax = plt.subplots(figsize=(max(5.2, 2.0 + 1.6 * len(bars)), 4.8))
    used_parts = [p for p in MEMORY_PARTS if any(b[3].get(p, 0) > 0 for b in bars)]
    colors = model_colors([b[0] for b in bars])
    tops, width = [], 0.5
    for i, (model, n, batch, parts, methods, status, _) in enumerate(bars):
        bottom = 0.0
        for p in used_parts:
            v = parts.get(p, 0.0) / div
            if v <= 0:
                continue
            ax.bar(i, v, bottom=bottom, width=width, color=MEMORY_PARTS[p][1], edgecolor="white", linewidth=0.6,
                   hatch="///" if status else None, zorder=3)
            bottom += v
        tops.append(bottom)
        ax.text(i, bottom, fmt_value(bottom * div, "B"), ha="center", va="bottom", fontsize=8, zorder=5)
        how = "/".join(sorted(m for m in methods if m not in NOT_RUN))
        if status:
            how = "%s → analytic" % NOT_RUN_LABEL[status]
        sub = "%s · %s%s" % (fmt_tokens(n), how, "" if batch in (0, 1) else " · batch %d" % batch)
        ax.text(i, -0.075, sub, transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=7,
                color="#444444")
        for pr in paper:
            if pr.model == model and pr.seq_len == n:
                x = i + width / 2 + 0.08
                _draw_paper_star(ax, x, pr.value / div, colors[model], pr)
                ax.annotate("paper\n" + paper_value_text(pr).replace(" (derived)", "\n(derived)"),
                            (x, pr.value / div), textcoords="offset points", xytext=(7, 0), ha="left",
                            va="center", fontsize=6.5, zorder=7)
                tops.append(pr.value / div)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([b[0] for b in bars], fontsize=8.5)
    for t, b in zip(ax.get_xticklabels(), bars):
        t.set_color(colors[b[0]])
        t.set_fontweight("bold")
    ax.set_ylim(0, max(tops) * 1.12)
    ax.set_xlim(-0.6, len(bars) - 0.4 + (0.35 if paper else 0))
    ax.set_ylabel(_byte_ylabel("memory", uname, div))
    ax.grid(True, axis="y", alpha=0.3, zorder=0)
    lens = sorted(set(b[1] for b in bars))
    at = fmt_tokens(lens[0]) if len(lens) == 1 else "the longest length of each model"
    all_rows = [r for b in bars for r in b[6]]
    title = "Memory breakdown at %s (cf. paper Fig. 7b)\n%s · %s\n%s" % (
        at, device_name, models_phrase([b[0] for b in bars]), _short_methods(all_rows))
    ax.set_title(title, fontsize=9.5)
    handles = [(Patch(facecolor=MEMORY_PARTS[p][1]), MEMORY_PARTS[p][0]) for p in reversed(used_parts)]
    if any(b[5] for b in bars):
        handles.append((Patch(facecolor="white", edgecolor="#444444", hatch="///"), "not run: analytic values"))
    if paper:
        handles.append((Line2D([], [], linestyle="none", marker="*", markersize=10, markerfacecolor="#444444",
                               markeredgecolor="black"), "paper total (H100-80GB)"))
    ax.legend([h for h, _ in handles], [l for _, l in handles], loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize=8, frameon=False, title="part", title_fontsize=8)
    paths = _save(fig, out_dir, stem)
    caption = "Memory by part (weights, KV cache, state, activations, other) at %s on %s; %s.%s" % (
        at, device_name, methods_phrase(all_rows), " Star: the paper's total." if paper else "")
    return Figure(device_name, kind, title.replace("\n", " — "), caption, paths)
