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

Devices never share axes: measured CPU points of tiny models and analytic H100
projections of 3B models are different experiments. The paper's values are
overlaid (stars) only on figures of an H100 device that show the paper's models.

How a value was obtained (`method`) is drawn, never hidden:
  measured: solid line, filled circles     exact: solid line, filled diamonds
  sampled: filled squares                  extrapolated: dotted line, open triangles
  analytic: dashed line, x markers
  over_budget / out_of_memory / failed: a cross at the analytic value of the
  same point (the `analytic` row beside it), labelled "over budget" / "OOM" / "failed".

Exit status: 0 done (figures that cannot be drawn are skipped with the reason
printed), 2 bad input (a file that is not a result CSV: file and line named).

Run with Debian's interpreter: /usr/bin/python3 reports/plot.py [--help]
"""
import argparse
import csv
import glob
import io
import math
import os
import re
import sys
from collections import OrderedDict, defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator
except ImportError as exc:  # pragma: no cover - depends on the interpreter
    sys.stderr.write(
        "plot.py: matplotlib is missing (%s). Run with Debian's interpreter, /usr/bin/python3, "
        "with the python3-matplotlib package installed.\n" % exc
    )
    sys.exit(1)

REPORTS_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RESULTS_GLOB = os.path.join(REPORTS_DIR, "results", "*", "*.csv")
DEFAULT_PAPER_GLOB = os.path.join(REPORTS_DIR, "paper", "*.csv")
DEFAULT_OUT = os.path.join(REPORTS_DIR, "figures")

COLUMNS = (
    "git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,"
    "phase,metric,value,unit,method,repeats,min,max,notes"
).split(",")
INT_COLUMNS = ("seq_len", "batch", "gen_tokens")
FLOAT_COLUMNS = ("value", "min", "max")

NOT_RUN = ("over_budget", "out_of_memory", "failed")
KNOWN_METHODS = ("measured", "exact", "sampled", "extrapolated", "analytic", "paper") + NOT_RUN
NOT_RUN_LABEL = {"over_budget": "over budget", "out_of_memory": "OOM", "failed": "failed"}
# Weaker = larger (reports/SCHEMA.md "Ratio rows"); exact counts as strong as measured.
METHOD_RANK = {"measured": 0, "exact": 0, "sampled": 1, "extrapolated": 2, "analytic": 3,
               "over_budget": 4, "out_of_memory": 4, "failed": 4}
METHOD_STYLE = OrderedDict([
    # method: (marker, filled, linestyle of a segment whose weaker end has this method)
    ("measured", ("o", True, "-")),
    ("exact", ("D", True, "-")),
    ("sampled", ("s", True, "-")),
    ("extrapolated", ("^", False, ":")),
    ("analytic", ("x", True, "--")),
    ("not run", ("X", False, "--")),
    ("does not fit", ("v", False, "none")),
])
METHOD_LEGEND = {
    "measured": "measured (full run)",
    "exact": "exact (counted bytes)",
    "sampled": "sampled (part timed, scaled)",
    "extrapolated": "extrapolated (reduced run, scaled)",
    "analytic": "analytic (cost model)",
    "not run": "not run: analytic value shown",
    "does not fit": "no point: one sequence does not fit",
}

# The paper's compared models; its other numbers (7B on 4 GPUs) are context only.
PAPER_MODELS = ("yoco-3b", "transformer-3b", "yoco-65b", "transformer-65b")
RATIO_METRICS = ("memory_reduction", "prefill_speedup", "decode_speedup", "throughput_gain", "kv_cache_reduction")

MEMORY_PARTS = OrderedDict([
    ("mem_weights_bytes", ("weights", "#7f7f7f")),
    ("mem_kv_cache_bytes", ("KV cache", "#8e44ad")),
    ("mem_state_bytes", ("state (gRet / SWA)", "#16a085")),
    ("mem_activations_bytes", ("activations", "#e67e22")),
    ("mem_other_bytes", ("other (context, workspaces)", "#c8c8c8")),
])

PAPER_DEVICE_RE = re.compile(r"h100", re.IGNORECASE)

GB = 1e9


# ----------------------------------------------------------------------------------------------
# Reading


class CsvError(Exception):
    """A file that is not a result CSV; str() is 'FILE:LINE: message'."""

    def __init__(self, path, line, message):
        super().__init__("%s:%d: %s" % (path, line, message) if line > 0 else "%s: %s" % (path, message))
        self.path, self.line, self.message = path, line, message


class Row(object):
    """One result row: the columns as attributes (ints and floats parsed), plus `src` and `line`."""

    __slots__ = tuple(COLUMNS) + ("src", "line")

    def __init__(self, fields, src, line):
        for k in COLUMNS:
            setattr(self, k, fields[k])
        self.src, self.line = src, line

    @property
    def is_ratio(self):
        return " vs " in self.model

    @property
    def not_run(self):
        return self.method in NOT_RUN

    def key(self):
        """The join key of reports/SCHEMA.md."""
        return (self.model, self.device_name, self.seq_len, self.batch, self.gen_tokens, self.phase, self.metric)

    def where(self):
        return "%s:%d" % (self.src, self.line)

    def __repr__(self):
        return "Row(%s %s %s %s=%r %s)" % (self.device_name, self.model, self.seq_len, self.metric, self.value,
                                          self.method)


def _parse_float(text, column, path, line):
    text = text.strip()
    if text == "":
        return None
    try:
        v = float(text)
    except ValueError:
        raise CsvError(path, line, "column %s: %r is not a number" % (column, text))
    return None if math.isnan(v) else v


def _parse_int(text, column, path, line, default=None):
    text = text.strip()
    if text == "" and default is not None:
        return default
    try:
        return int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            f = None
        if f is not None and f.is_integer():
            return int(f)
        raise CsvError(path, line, "column %s: %r is not an integer" % (column, text))


def read_result_csv(path):
    """Rows of one result CSV; CsvError naming file and line if it is not one."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CsvError(path, 0, "cannot read: %s" % exc.strerror)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CsvError(path, data[:exc.start].count(b"\n") + 1, "not UTF-8 text, so not a result CSV")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise CsvError(path, 1, "empty file; a result CSV starts with the header line of reports/SCHEMA.md")
        header = [h.strip() for h in header]
        if header != COLUMNS:
            missing = [c for c in COLUMNS if c not in header]
            extra = [c for c in header if c not in COLUMNS]
            why = []
            if len(missing) > 6:
                why.append("it has %d of the %d columns; first fields: %s"
                           % (len(COLUMNS) - len(missing), len(COLUMNS), ", ".join(repr(c) for c in header[:5])))
            else:
                if missing:
                    why.append("missing column(s) %s" % ", ".join(missing))
                if extra:
                    why.append("unexpected column(s) %s" % ", ".join(repr(c) for c in extra[:5]))
            if not why:
                why.append("columns out of order")
            raise CsvError(path, 1, "not a result CSV (header must be exactly `%s`): %s"
                           % (",".join(COLUMNS), "; ".join(why)))
        rows = []
        seen = {}
        prev = reader.line_num
        for rec in reader:
            line, prev = prev + 1, reader.line_num
            if not rec or all(not x.strip() for x in rec):
                continue
            if len(rec) != len(COLUMNS):
                raise CsvError(path, line, "%d fields, a result row has %d (%s)"
                               % (len(rec), len(COLUMNS), ",".join(COLUMNS)))
            fields = dict(zip(COLUMNS, (x.strip() if k != "notes" else x for k, x in zip(COLUMNS, rec))))
            for k in INT_COLUMNS:
                fields[k] = _parse_int(fields[k], k, path, line)
            fields["repeats"] = _parse_int(fields["repeats"], "repeats", path, line, default=0)
            for k in FLOAT_COLUMNS:
                fields[k] = _parse_float(fields[k], k, path, line)
            for k in ("device", "device_name", "model", "phase", "metric", "method"):
                if not fields[k]:
                    raise CsvError(path, line, "column %s is empty" % k)
            row = Row(fields, path, line)
            if row.method not in KNOWN_METHODS:
                warn("%s: unknown method %r (reports/SCHEMA.md lists %s); drawn as measured"
                     % (row.where(), row.method, ", ".join(KNOWN_METHODS)))
            if row.value is None and not row.not_run:
                warn("%s: method %s but no value; row ignored" % (row.where(), row.method))
            k = row.key()
            if k in seen:
                warn("%s: same key as line %d (model, device_name, seq_len, batch, gen_tokens, phase, metric); "
                     "keeping this one" % (row.where(), seen[k].line))
                rows.remove(seen[k])
            seen[k] = row
            rows.append(row)
    except csv.Error as exc:
        raise CsvError(path, reader.line_num, "malformed CSV: %s" % exc)
    return rows


_WARNINGS = []


def warn(msg):
    _WARNINGS.append(msg)
    sys.stderr.write("warning: %s\n" % msg)


def expand_paths(specs, what):
    """Files named, or every *.csv under the folders named (recursively), in a stable order."""
    out = []
    for spec in specs:
        if os.path.isdir(spec):
            found = sorted(glob.glob(os.path.join(spec, "**", "*.csv"), recursive=True))
            if not found:
                print("%s: no *.csv under %s" % (what, spec))
            out.extend(found)
        elif os.path.isfile(spec):
            out.append(spec)
        else:
            raise CsvError(spec, 0, "no such file or folder (given as %s)" % what)
    seen, uniq = set(), []
    for p in out:
        a = os.path.abspath(p)
        if a not in seen:
            seen.add(a)
            uniq.append(p)
    return uniq


def dedupe(rows):
    """One row per join key across files: the latest timestamp wins (ties: the later file)."""
    best = OrderedDict()
    for r in rows:
        k = r.key()
        old = best.get(k)
        if old is None or (r.timestamp or "") >= (old.timestamp or ""):
            if old is not None and old.value != r.value and old.src != r.src:
                print("note: %s and %s both give %s; using %s (later timestamp)"
                      % (old.where(), r.where(), "|".join(str(x) for x in k), r.where()))
            best[k] = r
    return list(best.values())


class Data(object):
    """All rows read: `results` (devices other than `paper`) and `paper`, plus the files behind them."""

    def __init__(self, result_files, paper_files):
        self.result_files, self.paper_files = list(result_files), list(paper_files)
        rows = []
        for p in self.result_files + self.paper_files:
            rows.extend(read_result_csv(p))
        self.all_rows = rows
        rows = dedupe(rows)
        self.results = [r for r in rows if r.device != "paper"]
        self.paper = [r for r in rows if r.device == "paper"]
        self._devices = None
        self._index_analytic()
        self.param_count = {}
        for r in self.results + self.paper:
            if r.phase == "model" and r.metric == "param_count" and r.value is not None:
                self.param_count.setdefault(r.model, r.value)

    def _index_analytic(self):
        idx = defaultdict(list)
        for r in self.results:
            if r.method == "analytic" and r.value is not None:
                idx[(r.model, r.seq_len, r.phase, r.metric)].append(r)
        self._analytic = idx
        self.fill = {}
        for r in self.results:
            if r.not_run:
                f = self._find_fill(r)
                if f is not None:
                    self.fill[id(r)] = f

    def _find_fill(self, row):
        """The analytic row beside a point that did not run (same model, length, phase, metric)."""
        cands = [c for c in self._analytic.get((row.model, row.seq_len, row.phase, row.metric), []) if c is not row]
        if not cands:
            return None

        def score(c):
            s = 0
            if c.src == row.src:
                s += 8
            if c.batch == row.batch:
                s += 4
            if c.gen_tokens == row.gen_tokens:
                s += 2
            if c.device_name == row.device_name:
                s += 1
            return s

        return max(cands, key=score)

    def value_of(self, row):
        """(value, the row it comes from): the row's own value or, for a point that did not run, the analytic one."""
        if row.value is not None:
            return row.value, row
        f = self.fill.get(id(row))
        if f is not None:
            return f.value, f
        return None, None

    def devices(self):
        """device_name -> rows: GPU runs first, then CPU runs, then analytic projections (each in order of
        first appearance). Analytic groups that only hold the projections beside points that did not run are
        left out: those values are drawn on the figures of the points they stand in for."""
        if self._devices is not None:
            return self._devices
        groups = OrderedDict()
        for r in self.results:
            groups.setdefault(r.device_name, []).append(r)
        used = set(id(f) for f in self.fill.values())
        rank = {"cuda": 0, "cpu": 1, "analytic": 3}
        order = sorted(groups, key=lambda n: (min(rank.get(r.device, 2) for r in groups[n]),
                                              list(groups).index(n)))
        out = OrderedDict()
        for name in order:
            rows = groups[name]
            if all(id(r) in used for r in rows):
                print("skip device %r: its %d row(s) only give the analytic values beside points that did not run "
                      "(drawn on those devices' figures)" % (name, len(rows)))
                continue
            out[name] = rows
        self._devices = out
        return out


def load(result_specs=None, paper_specs=None):
    """Data from the files/folders given (None: the defaults). Raises CsvError."""
    if result_specs:
        result_files = expand_paths(result_specs, "--results")
    else:
        result_files = sorted(glob.glob(DEFAULT_RESULTS_GLOB))
        if not result_files:
            print("no result CSVs under %s" % os.path.dirname(os.path.dirname(DEFAULT_RESULTS_GLOB)))
    if paper_specs is None:
        paper_files = sorted(glob.glob(DEFAULT_PAPER_GLOB))
    else:
        paper_files = expand_paths(paper_specs, "--paper")
    return Data(result_files, paper_files)


# ----------------------------------------------------------------------------------------------
# Names, colours, formats

_SIZE_RE = re.compile(r"^(?P<family>.+)-(?P<size>tiny|\d+(?:\.\d+)?[kmbt])$", re.IGNORECASE)
_SIZE_MULT = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def split_preset(model):
    """'yoco-1.4b' -> ('yoco', '1.4b', 1.4e9); 'yoco-tiny' -> ('yoco', 'tiny', 0); other -> (model, None, None)."""
    m = _SIZE_RE.match(os.path.basename(model))
    if not m:
        return model, None, None
    size = m.group("size").lower()
    n = 0.0 if size == "tiny" else float(size[:-1]) * _SIZE_MULT[size[-1]]
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
    for m in ("measured", "exact", "sampled", "extrapolated", "analytic") + NOT_RUN:
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
])

LINE_SPECS = {
    "memory_vs_length": dict(phase="memory", metric="mem_total_bytes", scale=None,
                             title="Total inference memory vs length",
                             ylabel="total memory",
                             what="Total memory (weights + KV cache + state + activations + other)"),
    "prefill_vs_length": dict(phase="prefill", metric="prefill_latency_s", scale=1.0,
                              title="Prefill latency (time to first token) vs prompt length",
                              ylabel="prefill latency (s)",
                              what="Prefill latency (time to first token)"),
    "throughput_vs_length": dict(phase="throughput", metric="throughput_tokens_per_s", scale=1.0,
                                 title="Throughput vs length",
                                 ylabel="throughput (tokens/s)",
                                 what="Throughput = batch × generated tokens / (prefill + decode steps)"),
    "decode_vs_length": dict(phase="decode", metric="decode_step_latency_s", scale=None,
                             title="Decode step latency vs context length",
                             ylabel="decode step latency",
                             what="Latency of one decode step (whole batch) at the given context"),
}


def _save(fig, out_dir, stem):
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(out_dir, "%s.%s" % (stem, ext))
        kw = {"metadata": {"Date": None}} if ext == "svg" else {}
        fig.savefig(p, dpi=150, bbox_inches="tight", **kw)
        paths.append(p)
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
    rank = {"measured": 0, "exact": 0, "sampled": 1, "extrapolated": 2, "analytic": 3, "not run": 4}
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


def _short_methods(rows):
    """For titles: 'measured, extrapolated; 1 over budget'."""
    parts = [m for m in ("measured", "exact", "sampled", "extrapolated", "analytic")
             if any(r.method == m for r in rows)]
    parts += sorted(set(r.method for r in rows if r.method not in KNOWN_METHODS))
    text = "method: " + (", ".join(parts) if parts else "none")
    nr = ["%d %s" % (sum(1 for r in rows if r.method == m), NOT_RUN_LABEL[m]) for m in NOT_RUN
          if any(r.method == m for r in rows)]
    if nr:
        text += "; not run: " + ", ".join(nr)
    return text


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


# ----------------------------------------------------------------------------------------------
# Command line


def add_input_args(p):
    p.add_argument("paths", nargs="*", metavar="CSV_OR_DIR",
                   help="result CSVs or folders of them (same as --results)")
    p.add_argument("--results", nargs="+", metavar="DIR_OR_FILES", default=[],
                   help="result CSVs, or folders searched for *.csv (default: reports/results/*/*.csv)")
    p.add_argument("--paper", nargs="+", metavar="DIR_OR_FILES", default=None,
                   help="the paper's numbers (default: reports/paper/*.csv)")
    p.add_argument("--no-paper", action="store_true", help="do not read the paper's numbers")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help="folder for the figures, PNG (150 dpi) and SVG (default: reports/figures)")


def load_from_args(args):
    specs = list(args.paths) + list(args.results)
    return load(specs or None, [] if args.no_paper else args.paper)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Exit status: 0 done, 2 bad input (file and line named).")
    add_input_args(p)
    args = p.parse_args(argv)
    try:
        data = load_from_args(args)
    except CsvError as exc:
        sys.stderr.write("plot.py: %s\n" % exc)
        return 2
    print("read %d result file(s), %d paper file(s): %d result rows, %d paper rows"
          % (len(data.result_files), len(data.paper_files), len(data.results), len(data.paper)))
    figs = make_figures(data, args.out)
    n = sum(1 for f in figs if f.paths)
    print("%d figure(s) written to %s" % (n, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
