#!/usr/bin/python3
"""Draw the YOCO paper's efficiency figures from result CSVs (reports/SCHEMA.md).

Reads result CSVs (default: every reports/results/*/*.csv, or the files and
folders given) and the paper's numbers (reports/paper/*.csv, the same schema,
device `paper`), and draws, for every device (`device_name`) separately:

  memory_vs_length      total memory vs length              (paper Fig. 7a)
  memory_breakdown      memory by part at the longest length (paper Fig. 7b)
  kv_cache_per_token    KV cache bytes per token vs model size (paper Fig. 8)
  prefill_vs_length     prefill latency vs prompt length    (paper Fig. 9)
  throughput_vs_length  throughput vs length                (paper Fig. 10)
  decode_vs_length      decode step latency vs context      (not in the paper)
  breakdown             GPU time by kernel family (CUPTI)   (not in the paper; only for devices with
                        the CUPTI rows of a `--cupti` sweep: per model, a stacked bar per length,
                        prefill and decode panels)

Devices never share axes: measured CPU points of tiny models and analytic H100
projections of 3B models are different experiments. The paper's values are
overlaid (stars) only on figures of an H100 device that show the paper's models.

How a value was obtained (`method`) is drawn, never hidden:
  measured: solid line, filled circles     exact: solid line, filled diamonds
  sampled: filled squares                  extrapolated: dotted line, open triangles
  analytic: dashed line, x markers        calibrated: dash-dot line, open plus markers
  over_budget / out_of_memory / failed: a cross at the analytic value of the
  same point (the `analytic` row beside it), labelled "over budget" / "OOM" / "failed".

Exit status: 0 done (figures that cannot be drawn are skipped with the reason
printed), 2 bad input (a file that is not a result CSV: file and line named).

The code lives in reports/yocoreport/, one module per figure family over shared ones:

  data.py        loading: result CSVs and the paper's numbers into Data (CsvError, Row, load)
  style.py       shared: names, colours, formats, Figure, FIGURE_KINDS, markers, axes, legends, saving
  lines.py       the line-vs-length figure the families below share (line_figure, LINE_SPECS)
  memory.py      memory_vs_length (spec), memory_breakdown (breakdown_figure)
  kv.py          kv_cache_per_token (kv_figure)
  prefill.py     prefill_vs_length (spec)
  throughput.py  throughput_vs_length, decode_vs_length (specs)
  breakdown.py   breakdown (cupti_figure) and the CUPTI section of the README
  kernels.py     kernel efficiency: kernels against their floors and beside the peers (README tables)
  figures.py     make_figures: every kind of FIGURE_KINDS for every device, each to its family's drawer

This file is the command line (and re-exports the library's names, as `plot.X`).

Run with Debian's interpreter: /usr/bin/python3 reports/plot.py [--help]
"""
import argparse
import sys

from yocoreport.data import (  # noqa: F401
    COLUMNS, DEFAULT_DIFFERENCES, DEFAULT_OUT, DEFAULT_PAPER_GLOB, DEFAULT_RESULTS_GLOB, DIFFERENCES_NAME,
    FLOAT_COLUMNS, GB, INT_COLUMNS, KNOWN_METHODS, METHOD_RANK, NOT_RUN, NOT_RUN_LABEL, PAPER_MODELS,
    PREDICTED_METHODS, RATIO_METRICS, REPORTS_DIR, CsvError, Data, Row, dedupe, expand_paths, load, read_differences,
    read_result_csv, warn)
from yocoreport.style import (  # noqa: F401
    FIGURE_KINDS, METHOD_LEGEND, METHOD_STYLE, PAPER_DEVICE_RE, Figure, family_kind, fmt_sig, fmt_tokens, fmt_value,
    is_paper_device, methods_phrase, model_colors, model_sort_key, models_phrase, paper_flags, paper_value_text, slug,
    split_preset)
from yocoreport.memory import MEMORY_PARTS, breakdown_figure  # noqa: F401
from yocoreport.kv import kv_figure  # noqa: F401
from yocoreport.lines import LINE_SPECS, line_figure  # noqa: F401
from yocoreport.breakdown import breakdown_figure as cupti_figure, cupti_sections  # noqa: F401
from yocoreport.figures import make_figures  # noqa: F401
from yocoreport.atomic import check_writable_folder  # noqa: E402
from yocoreport.cli import ArgumentParser, run_main  # noqa: E402


# ----------------------------------------------------------------------------------------------
# Command line


def add_input_args(p):
    p.add_argument("paths", nargs="*", metavar="CSV_OR_DIR",
                   help="result CSVs or folders of them (same as --results)")
    p.add_argument("--results", nargs="+", metavar="DIR_OR_FILES", default=[],
                   help="result CSVs, or folders searched for *.csv (default: reports/results/*/*.csv)")
    paper = p.add_mutually_exclusive_group()
    paper.add_argument("--paper", nargs="+", metavar="DIR_OR_FILES", default=None,
                       help="the paper's numbers (default: reports/paper/*.csv)")
    paper.add_argument("--no-paper", action="store_true", help="do not read the paper's numbers")
    p.add_argument("--differences", default=None, metavar="CSV",
                   help="why ours differ from the paper's: model,seq_len,metric[,device],reason; '#' lines are "
                        "comments (default: reports/paper/differences.csv, or one in a folder given to --paper)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help="folder for the figures, PNG (150 dpi) and SVG (default: reports/figures)")


def load_from_args(args):
    specs = list(args.paths) + list(args.results)
    return load(specs or None, [] if args.no_paper else args.paper, args.differences)


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Exit status: 0 done, 2 bad input: an option, a file that is not a result CSV (file "
                              "and line named), an output that cannot be written (one line on stderr).")
    add_input_args(p)
    args = p.parse_args(argv)
    try:
        data = load_from_args(args)
    except CsvError as exc:
        sys.stderr.write("plot.py: %s\n" % exc)
        return 2
    print("read %d result file(s), %d paper file(s): %d result rows, %d paper rows"
          % (len(data.result_files), len(data.paper_files), len(data.results), len(data.paper)))
    try:  # an unwritable --out is reported before any figure is drawn
        check_writable_folder(args.out)
    except OSError as exc:
        sys.stderr.write("plot.py: cannot write: %s\n" % (exc.strerror or exc))
        return 2
    figs = make_figures(data, args.out)
    n = sum(1 for f in figs if f.paths)
    print("%d figure(s) written to %s" % (n, args.out))
    return 0


if __name__ == "__main__":
    run_main(main, "plot.py")
