"""The figures and tables of reports/README.md, by figure family (reports/plot.py is the command line).

Arrows point one way: data <- style <- the families <- lines <- figures; report.py and plot.py use them all.

  data.py        loading: result CSVs (reports/SCHEMA.md) and the paper's numbers into Data; the schema's constants
  style.py       shared by every family: names, colours, number formats, the Figure record, FIGURE_KINDS (the
                 catalogue of kinds and their paper figure), how a method is drawn, axes, labels, legends, saving
  memory.py      total memory vs length (Fig. 7a, a line spec) and the memory breakdown by part (Fig. 7b)
  kv.py          KV cache bytes per token vs model size (Fig. 8)
  prefill.py     prefill latency vs prompt length (Fig. 9, a line spec)
  throughput.py  throughput vs length (Fig. 10) and decode step latency vs context (line specs)
  lines.py       the line-vs-length drawer those specs share (line_figure; LINE_SPECS gathers the families')
  kernels.py     kernel efficiency: each GPU kernel against its floor and the copy/GEMM ceilings, and beside the
                 peers timed on the same shapes (the README tables; its figures belong here too)
  breakdown.py   GPU time by kernel family from the CUPTI rows of a `--cupti` sweep: the `breakdown` figure (per
                 model, a stacked bar per length, prefill and decode panels) and its README section
  figures.py     make_figures: every kind in FIGURE_KINDS for every device, each handed to its family's drawer
  atomic.py      outputs replaced whole (a temporary file, then a rename); cli.py the command lines' parser (a
                 bad option is one line, exit 2), shared with reports/history.py and history_of_repo.py

A new figure family (e.g. a CUPTI time breakdown of a prefill or decode step) is a module of its own here: a
drawer `xxx_figure(data, device_name, rows, out_dir, stem) -> Figure` over style.py, its kind added to
FIGURE_KINDS in style.py and dispatched in figures.make_figures, its heading to report.FIGURE_TEXT.
"""
