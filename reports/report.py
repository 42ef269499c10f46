#!/usr/bin/python3
"""Regenerate reports/README.md: the figures of plot.py, YOCO-vs-Transformer ratios beside the paper's, provenance.

Reads the same inputs as plot.py (result CSVs, reports/SCHEMA.md; the paper's
numbers in reports/paper/), draws the figures into --out and writes the README
at --readme with the figures linked relative to it. Everything in the README
comes from the CSVs: no number is written into this template.

Exit status: 0 done, 2 bad input (a file that is not a result CSV: file and line named).

Run with Debian's interpreter: /usr/bin/python3 reports/report.py [--help]
"""
import argparse
import os
import sys
from collections import OrderedDict, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402
from yocoreport.atomic import check_writable_folder, replacing  # noqa: E402
from yocoreport.breakdown import cupti_sections, is_cupti_row  # noqa: E402
from yocoreport.kernels import is_kernel_row, kernel_sections  # noqa: E402
from yocoreport.calibrated import calibrated_section  # noqa: E402
from yocoreport.cli import ArgumentParser, run_main  # noqa: E402
from yocoreport.data import difference_for  # noqa: E402
from yocoreport.multi_device import multi_device_section  # noqa: E402
from yocoreport.style import WRITTEN  # noqa: E402
from yocoreport.two_cards import card_dirs_of, two_cards_section  # noqa: E402
from plot import fmt_tokens, fmt_value, fmt_sig, model_sort_key  # noqa: E402

DEFAULT_README = os.path.join(plot.REPORTS_DIR, "README.md")

METRIC_TITLE = OrderedDict([
    ("memory_reduction", "memory reduction (Transformer / YOCO total memory)"),
    ("prefill_speedup", "prefill speed-up (Transformer / YOCO prefill latency)"),
    ("decode_speedup", "decode speed-up (Transformer / YOCO decode step latency)"),
    ("throughput_gain", "throughput gain (YOCO / Transformer throughput)"),
    ("kv_cache_reduction", "KV cache reduction (Transformer / YOCO bytes per token)"),
])
SHORT_METRIC = {
    "memory_reduction": "memory reduction", "prefill_speedup": "prefill speed-up",
    "decode_speedup": "decode speed-up", "throughput_gain": "throughput gain",
    "kv_cache_reduction": "KV cache reduction", "mem_total_bytes": "total memory",
    "mem_kv_cache_bytes": "KV cache memory", "prefill_latency_s": "prefill latency",
    "throughput_tokens_per_s": "throughput", "kv_cache_bytes_per_token": "KV cache per token",
    "decode_step_latency_s": "decode step latency",
}
FIGURE_TEXT = {
    "memory_vs_length": "Total memory vs length",
    "memory_breakdown": "Memory breakdown",
    "kv_cache_per_token": "KV cache bytes per token vs model size",
    "prefill_vs_length": "Prefill latency vs prompt length",
    "throughput_vs_length": "Throughput vs length",
    "decode_vs_length": "Decode step latency vs context length",
    "breakdown": "GPU time by kernel family (CUPTI)",
}
METHOD_TEXT = OrderedDict([
    ("measured", "a full run of the phase, timed; median of the repeats"),
    ("exact", "counted, not timed: bytes held by the buffers"),
    ("sampled", "part of the phase timed and scaled (the row's notes say what)"),
    ("extrapolated", "a reduced run scaled up (the row's notes say how)"),
    ("analytic", "from the cost model, never from a run"),
    ("calibrated", "from the cost model corrected by one card's measured kernel efficiencies, never from a run "
                   "on the device named"),
    ("over_budget", "not run: predicted time above the budget; figures show the analytic value"),
    ("out_of_memory", "not run: does not fit; figures show the analytic value"),
    ("failed", "the run raised an error; figures show the analytic value"),
    ("paper", "a number stated in (or derived from) the paper"),
])


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    import re
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(md_escape(c) for c in r) + " |")
    return "\n".join(out)


def length_text(n):
    return "—" if n <= 0 else "%s (%s tokens)" % (fmt_tokens(n), "{:,}".format(n))


def short_length(n):
    return "—" if n <= 0 else fmt_tokens(n)


def cite(row, limit=150):
    n = " ".join(row.notes.split())
    return n if len(n) <= limit else n[:limit - 1].rstrip() + "…"


def method_text(row):
    """The method; for a value scaled from part of a run (sampled, extrapolated) with what its notes say."""
    if row.method in ("sampled", "extrapolated") and row.notes.strip():
        return "%s (%s)" % (row.method, cite(row, 90))
    return row.method


def our_value_text(data, row):
    if row.value is not None:
        return fmt_value(row.value, row.unit)
    v, src = data.value_of(row)
    label = plot.NOT_RUN_LABEL.get(row.method, row.method)
    if v is not None:
        return "not run (%s); analytic %s" % (label, fmt_value(v, row.unit))
    return "not run (%s)" % label


def paper_match(data, row):
    """The paper's row for the same model (pair), length and metric, if it has one."""
    for p in data.paper:
        if p.model == row.model and p.seq_len == row.seq_len and p.metric == row.metric and p.phase == row.phase:
            return p
    return None


def paper_fig(row):
    """'Fig. 7a' etc. from a paper row's notes, else the first words."""
    import re
    m = re.search(r"(Fig\. \d+[a-z]?|Intro|Sec\. [\d.]+)", row.notes)
    return m.group(1) if m else "paper"


# ----------------------------------------------------------------------------------------------


def reason_of(data, claim, row):
    """(key, reason) from differences.csv for one row beside a claim: reasons are written by hand for a card's runs.
    A calibrated prediction never takes one (it is no run on the card it names: a measured run's reason would read
    as its own); an analytic row takes its card's reason only where a run of that card was read (the reason then
    explains why there is a projection there, e.g. "No measured ratio: ... does not fit"), and a reason for every
    device (no card) otherwise."""
    if row.method == "calibrated":
        return None, ""
    key, why = difference_for(data.differences, claim.model, claim.seq_len, claim.metric, row.device_name)
    if key is not None and key[3] and row.method in plot.PREDICTED_METHODS and not any(
            r.method not in plot.PREDICTED_METHODS and key[3].lower() in r.device_name.lower()
            for r in data.results):
        key = (claim.model, claim.seq_len, claim.metric, "")
        return (key, data.differences[key]) if key in data.differences else (None, "")
    return key, why


def section_glance(data, devices):
    lines = ["## The paper's claims and this suite's numbers", ""]
    claims = [p for p in data.paper if not plot.paper_flags(p)["context"]]
    order = {"memory": 0, "kv_cache": 1, "prefill": 2, "throughput": 3}
    claims.sort(key=lambda p: (order.get(p.phase, 9), p.is_ratio, model_sort_key(p.model), p.seq_len, p.metric))
    if not claims:
        return lines + ["No paper numbers were read (reports/paper/*.csv).", ""]
    dev_rank = {n: i for i, n in enumerate(devices)}
    matches = OrderedDict()
    for p in claims:
        matches[id(p)] = sorted(
            (r for r in data.results if r.model == p.model and r.seq_len == p.seq_len and r.metric == p.metric
             and r.phase == p.phase),
            key=lambda r: (dev_rank.get(r.device_name, len(dev_rank)), r.device_name, r.batch, r.gen_tokens))
    have = [p for p in claims if matches[id(p)]]
    run = [p for p in have if any(r.method in ("measured", "exact", "sampled", "extrapolated")
                                  for r in matches[id(p)])]
    lines.append("Of the paper's %d efficiency numbers for its compared models (stated, or derived from its "
                 "ratios), this suite has a value for %d at the same model and length: %d from a run (measured, "
                 "exact, sampled or extrapolated), %d from the cost model only."
                 % (len(claims), len(have), len(run), len(have) - len(run)))
    lines.append("")
    lines += [
        "Each claim of the paper (H100-80GB, its 3B and 65B models) beside the value this suite has for the same "
        "model, length and metric, on every device that has one. *ours / paper* above 1 means our number is "
        "larger. Devices differ: an analytic projection, a measured GPU run and the paper's H100 are different "
        "experiments, and the method column says which.",
        "",
    ]
    lines += [
        "*why they differ*: the reasons written by hand in `reports/paper/differences.csv` (model, length, metric, "
        "and the card whose rows they explain), after the numbers were measured; empty where none is written yet.",
        "",
    ]
    body = []
    used = set()
    for p in claims:
        ours = matches[id(p)]
        what = "%s, %s, %s" % (SHORT_METRIC.get(p.metric, p.metric), p.model, short_length(p.seq_len))
        src = paper_fig(p)
        if not ours:
            key, why = difference_for(data.differences, p.model, p.seq_len, p.metric, "")
            used.add(key)
            body.append([what, plot.paper_value_text(p), src, "not measured", "—", "—", "—", why])
            continue
        shown = set()  # a reason written out once for the claim, then "(as above)"
        for r in ours:
            v, _ = data.value_of(r)
            ratio = "%s" % fmt_sig(v / p.value) if (v is not None and p.value) else "—"
            key, why = reason_of(data, p, r)
            used.add(key)
            body.append([what, plot.paper_value_text(p), src, our_value_text(data, r), ratio, method_text(r),
                         r.device_name + ("" if r.batch in (0, 1) else " (batch %d)" % r.batch),
                         "" if not why else "(as above)" if key in shown else why])
            shown.add(key)
    lines.append(table(["claim", "paper", "where", "ours", "ours / paper", "method", "device", "why they differ"],
                       body))
    lines.append("")
    # A reason for one card's rows of a claim the paper has is unused where that card's results were not read
    # (a partial results folder: up to 43 lines of warnings) or where the card is misspelt: one line names
    # those cards, so a typo still shows.
    claimed = {(p.model, p.seq_len, p.metric) for p in claims}
    unread = sorted({k[3] for k in data.differences if k not in used and k[:3] in claimed})
    if unread:
        n = sum(1 for k in data.differences if k not in used and k[:3] in claimed)
        plot.warn("%s: %d reason(s) for cards whose rows were not read here, not shown: no device named like %s "
                  "with a run (a projection, analytic or calibrated, takes no card's reason)"
                  % (data.differences_file, n, ", ".join(repr(d) if d else "'' (every device)" for d in unread)))
    for k in data.differences:
        if k not in used and k[:3] not in claimed:
            plot.warn("%s: no claim of the paper has model %r, length %d, metric %r%s; reason not shown"
                      % (data.differences_file, k[0], k[1], k[2],
                         ", measured on a device named like %r" % k[3] if k[3] else ""))
    return lines


def section_measured(data, devices):
    lines = ["## What was measured", ""]
    if not data.results:
        lines += ["No result CSVs were found, so there is nothing to show yet. Run the benchmark (below) and "
                  "regenerate this page.", ""]
        return lines
    lines.append("The suite runs YOCO and the GQA Transformer it is compared against through the same "
                 "protocol (DESIGN.md §4): memory by part, prefill latency (time to first token), "
                 "decode step latency and throughput across lengths, plus the KV cache bytes per token of each "
                 "model preset. Every number carries how it was obtained:")
    lines.append("")
    present = set(r.method for r in data.results) | set(r.method for r in data.paper)
    for m, t in METHOD_TEXT.items():
        if m in present:
            lines.append("- `%s`: %s" % (m, t))
    lines.append("")
    lines.append("Devices (one section each below; devices never share a plot):")
    lines.append("")
    for name, rows in devices.items():
        models = sorted(set(r.model for r in rows if not r.is_ratio and r.model not in ("-", "")),
                        key=model_sort_key)
        lens = sorted(set(r.seq_len for r in rows if r.seq_len > 0))
        tops = OrderedDict()
        kernel_phases = set(r.phase for r in rows if is_kernel_row(r))
        cupti_phases = set(r.phase for r in rows if is_cupti_row(r))
        for ph in sorted(set(r.phase for r in rows) - kernel_phases - cupti_phases):
            top, _, part = ph.partition(".")
            tops.setdefault(top, False)
            tops[top] = tops[top] or bool(part)
        phases = [t + (" (also by part)" if by_part else "") for t, by_part in tops.items()]
        if cupti_phases:
            phases.append("a CUPTI kernel breakdown of prefill and decode")
        if kernel_phases:
            phases.append("%d kernel benchmark phases (ours and peers)" % len(kernel_phases))
        counts = defaultdict(int)
        for r in rows:
            counts[r.method] += 1
        kinds = "/".join(sorted(set(r.device for r in rows)))
        lr = ("lengths %s–%s" % (fmt_tokens(lens[0]), fmt_tokens(lens[-1]))) if len(lens) > 1 else (
            "length %s" % fmt_tokens(lens[0]) if lens else "no lengths")
        lines.append("- **%s** (`%s`): %s; %s; phases %s; rows by method: %s." % (
            name, kinds, plot.models_phrase(models, limit=6), lr, ", ".join(phases),
            ", ".join("%s %d" % (m, counts[m]) for m in sorted(counts, key=lambda m: plot.METHOD_RANK.get(m, 9)))))
    lines.append("")
    return lines


def section_device(data, name, rows, figs, readme_dir):
    lines = ["## %s" % name, ""]
    kinds = sorted(set(r.device for r in rows))
    hosts = sorted(set(r.host for r in rows if r.host))
    shas = sorted(set(r.git_sha for r in rows if r.git_sha))
    lines.append("Device type `%s`%s%s." % ("/".join(kinds), "; host " + ", ".join(hosts) if hosts else "",
                                           "; suite revision " + ", ".join("`%s`" % s for s in shas) if shas else ""))
    if "analytic" in kinds and len(kinds) == 1:
        lines.append("All values here are projections of the cost model onto this device, not runs.")
    ceil = [r for r in rows if r.phase == "ceiling" and r.value is not None]
    if ceil:
        lines.append("Ceilings%s: %s." % (
            " measured in the same run" if any(r.method == "measured" for r in ceil) else "",
            "; ".join("%s %s (%s%s)" % (r.metric, fmt_value(r.value, r.unit), r.method,
                                          ", " + " ".join(r.notes.split()) if r.notes.strip() else "")
                      for r in ceil)))
    lines.append("")
    drawn = [f for f in figs if f.paths]
    for f in drawn:
        rel = os.path.relpath(f.png, readme_dir).replace(os.sep, "/")
        ref = plot.FIGURE_KINDS.get(f.kind)
        lines.append("### %s%s" % (FIGURE_TEXT.get(f.kind, f.kind), " (paper %s)" % ref if ref else ""))
        lines.append("")
        lines.append("![%s](%s)" % (f.title, rel))
        lines.append("")
        lines.append("*%s*" % f.caption)
        lines.append("")
    skipped = [f for f in figs if not f.paths]
    if skipped:
        lines.append("Not drawn for this device: " + "; ".join(
            "%s (%s)" % (FIGURE_TEXT.get(f.kind, f.kind).lower(), f.reason) for f in skipped) + ".")
        lines.append("")
    lines += cupti_sections(rows, table)
    lines += kernel_sections(rows, table)
    ratio_rows = [r for r in rows if r.is_ratio and r.metric in METRIC_TITLE]
    if not ratio_rows and any(is_kernel_row(r) for r in rows):
        return lines  # a kernel-only result set: no model runs, no ratios yet
    lines.append("### Headline ratios, YOCO vs Transformer")
    lines.append("")
    if not ratio_rows:
        lines += ["No ratio rows (model `A vs B`) for this device.", ""]
        return lines
    lines.append("Higher means YOCO is better. *paper*: the paper's value for the same model pair and length, "
                 "\"—\" where it states none.")
    lines.append("")
    order = list(METRIC_TITLE)
    ratio_rows.sort(key=lambda r: (order.index(r.metric), model_sort_key(r.model.split(" vs ")[0]), r.model,
                                   r.seq_len, r.batch, r.gen_tokens))
    body = []
    for r in ratio_rows:
        p = paper_match(data, r)
        ptxt = "%s (%s)" % (plot.paper_value_text(p), paper_fig(p)) if p else "—"
        note = "" if r.batch in (0, 1) else "batch %d" % r.batch
        body.append([r.model, SHORT_METRIC[r.metric], short_length(r.seq_len), our_value_text(data, r), r.method,
                     ptxt] + ([note] if any(x.batch not in (0, 1) for x in ratio_rows) else []))
    header = ["comparison", "metric", "length", "ours", "method", "paper"]
    if any(x.batch not in (0, 1) for x in ratio_rows):
        header.append("batch")
    lines.append(table(header, body))
    lines.append("")
    return lines


def section_paper(data):
    lines = ["## The paper's numbers", ""]
    if not data.paper:
        return lines + ["None read.", ""]
    lines.append("As data in `reports/paper/*.csv` (same columns as the results, device `paper`, method `paper`); "
                 "*notes* cite the figure or section and quote the sentence. Values marked derived are computed "
                 "from the paper's ratios, not stated; the 7B rows are context (another model, four GPUs).")
    lines.append("")
    body = []
    for p in sorted(data.paper, key=lambda p: (p.src, p.phase, p.model, p.seq_len)):
        body.append([p.model, short_length(p.seq_len), p.metric, plot.paper_value_text(p),
                     os.path.basename(p.src), cite(p)])
    lines.append(table(["model", "length", "metric", "value", "file", "notes"], body))
    lines.append("")
    return lines


def section_provenance(data, readme_dir):
    lines = ["## Where the numbers come from", ""]
    groups = OrderedDict()
    for r in data.all_rows:
        k = (r.src, r.device_name, r.device, r.host, r.git_sha)
        g = groups.setdefault(k, [0, set()])
        g[0] += 1
        if r.timestamp:
            g[1].add(r.timestamp)
    if not groups:
        return lines + ["No files read.", ""]
    body = []
    for (src, dn, dev, host, sha), (n, ts) in groups.items():
        rel = os.path.relpath(src, readme_dir).replace(os.sep, "/")
        tss = sorted(ts)
        t = "—" if not tss else (tss[0] if len(tss) == 1 else "%s … %s" % (tss[0], tss[-1]))
        body.append(["[%s](%s)" % (rel, rel), str(n), dn, dev, host or "—", ("`%s`" % sha) if sha else "—", t])
    lines.append(table(["file", "rows", "device_name", "device", "host", "git_sha", "timestamp (UTC)"], body))
    lines.append("")
    return lines


def section_regenerate(readme_path):
    return [
        "## How to regenerate",
        "",
        "```sh",
        "cmake --preset cpu && cmake --build build/cpu -j   # or --preset cuda on a GPU machine",
        "build/cpu/bin/yoco bench                            # the default job",
        "#   keep its CSV (and raw logs) under reports/results/<device>/",
        "/usr/bin/python3 reports/report.py                  # figures into reports/figures/, then this page",
        "```",
        "",
        "`reports/report.py --results FILES_OR_DIRS --out DIR --readme PATH` reads other result sets; "
        "`reports/plot.py` draws the figures alone. Both use Debian's `/usr/bin/python3` (matplotlib). "
        "The columns, phases, metrics and methods of the CSVs are defined in `reports/SCHEMA.md`.",
        "",
    ]


def build_readme(data, figures, readme_path, out_dir=None):
    readme_dir = os.path.dirname(os.path.abspath(readme_path))
    devices = data.devices()
    stamps = sorted(r.timestamp for r in data.results if r.timestamp)
    lines = [
        "# YOCO efficiency suite: results",
        "",
        "<!-- Generated by reports/report.py from the CSVs listed under \"Where the numbers come from\". "
        "Do not edit: change the data or the script and regenerate. -->",
        "",
        "Checks the inference-efficiency claims of *You Only Cache Once* (YOCO, Sun et al. 2024): that caching "
        "key/values once cuts inference memory, that the early exit of the prefill cuts time to first token, "
        "and that both raise throughput, against a GQA Transformer. "
        "Generated from %d result file(s) (%d rows%s) and %d file(s) of the paper's numbers." % (
            len(data.result_files), len(data.results),
            ", runs from %s to %s" % (stamps[0], stamps[-1]) if stamps else "", len(data.paper_files)),
        "",
    ]
    if devices:
        lines.append("Contents: " + " · ".join(
            ["[paper vs ours](#the-papers-claims-and-this-suites-numbers)", "[what was measured](#what-was-measured)"]
            + ["[%s](#%s)" % (n, anchor(n)) for n in devices]
            + ["[paper numbers](#the-papers-numbers)", "[provenance](#where-the-numbers-come-from)",
               "[regenerate](#how-to-regenerate)"]))
        lines.append("")
    lines += section_glance(data, devices)
    lines += section_measured(data, devices)
    by_dev = defaultdict(list)
    for f in figures:
        by_dev[f.device_name].append(f)
    for name, rows in devices.items():
        lines += section_device(data, name, rows, by_dev.get(name, []), readme_dir)
    lines += two_cards_section(table, lambda p: os.path.relpath(p, readme_dir).replace(os.sep, "/"),
                               card_dirs_of(data.result_files))
    if out_dir:
        lines += calibrated_section(data, table, readme_dir, out_dir)
        lines += multi_device_section(table, readme_dir, out_dir)
    history_page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "HISTORY.md")
    if os.path.isfile(history_page) and devices and any(r.device == "cuda" for r in data.results):
        rel = os.path.relpath(history_page, readme_dir).replace(os.sep, "/")
        lines += ["## Performance history", "",
                  "Every committed result CSV across the project's commits, with change points: [%s](%s) "
                  "(regenerated by `reports/history_of_repo.py`)." % (rel, rel), ""]
    lines += section_paper(data)
    lines += section_provenance(data, readme_dir)
    lines += section_regenerate(readme_path)
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Exit status: 0 done, 2 bad input: an option, a file that is not a result CSV (file "
                              "and line named), an output that cannot be written (one line on stderr).")
    plot.add_input_args(p)
    p.add_argument("--readme", default=DEFAULT_README, metavar="PATH",
                   help="the README to write (default: reports/README.md)")
    args = p.parse_args(argv)
    if os.path.isdir(args.readme):  # refused before any work: the figures take a minute, then the README failed
        sys.stderr.write("report.py: cannot write: %s: is a folder (--readme names the README file to write)\n"
                         % args.readme)
        return 2
    try:
        data = plot.load_from_args(args)
    except plot.CsvError as exc:
        sys.stderr.write("report.py: %s\n" % exc)
        return 2
    print("read %d result file(s), %d paper file(s): %d result rows, %d paper rows"
          % (len(data.result_files), len(data.paper_files), len(data.results), len(data.paper)))
    try:  # unwritable outputs are reported before any figure is drawn
        check_writable_folder(os.path.dirname(os.path.abspath(args.readme)))
        check_writable_folder(args.out)
    except OSError as exc:
        sys.stderr.write("report.py: cannot write: %s\n" % (exc.strerror or exc))
        return 2
    written = len(WRITTEN)
    try:
        figures = plot.make_figures(data, args.out)
    except OSError as exc:
        sys.stderr.write("report.py: cannot write a figure: %s\n" % exc)
        return 2
    text = build_readme(data, figures, args.readme, args.out)
    try:
        with replacing(args.readme, "w", encoding="utf-8") as f:  # atomic: never a torn README
            f.write(text)
    except OSError as exc:
        sys.stderr.write("report.py: cannot write %s: %s\n" % (args.readme, exc.strerror or exc))
        return 2
    # what was written: the device figures and the README's own (multi_device_prefill, the calibrated checks)
    print("%d figure(s) in %s" % (len(set(os.path.splitext(p)[0] for p in WRITTEN[written:])), args.out))
    print("wrote %s" % args.readme)
    return 0


if __name__ == "__main__":
    run_main(main, "report.py")
