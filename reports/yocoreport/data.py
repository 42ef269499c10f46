"""Loading: result CSVs (reports/SCHEMA.md) and the paper's numbers into `Data`; the schema's constants."""
import csv
import glob
import io
import math
import os
import sys
from collections import OrderedDict, defaultdict

REPORTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RESULTS_GLOB = os.path.join(REPORTS_DIR, "results", "*", "*.csv")
DEFAULT_PAPER_GLOB = os.path.join(REPORTS_DIR, "paper", "*.csv")
DEFAULT_OUT = os.path.join(REPORTS_DIR, "figures")
# Hand-written reasons why a measured number differs from the paper's (not a result CSV; read_differences).
DIFFERENCES_NAME = "differences.csv"
DEFAULT_DIFFERENCES = os.path.join(REPORTS_DIR, "paper", DIFFERENCES_NAME)
DIFFERENCES_COLUMNS = ("model", "seq_len", "metric", "reason")
# With a device: a reason for one card's rows only (a substring of their device_name, e.g. H200).
DIFFERENCES_DEVICE_COLUMNS = ("model", "seq_len", "metric", "device", "reason")

COLUMNS = (
    "git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,"
    "phase,metric,value,unit,method,repeats,min,max,notes"
).split(",")
INT_COLUMNS = ("seq_len", "batch", "gen_tokens")
FLOAT_COLUMNS = ("value", "min", "max")

NOT_RUN = ("over_budget", "out_of_memory", "failed", "skipped")
KNOWN_METHODS = ("measured", "exact", "sampled", "extrapolated", "analytic", "calibrated", "paper") + NOT_RUN
# Predictions of the cost model, never from a run on the device named: drawn as projections, never as CUPTI
# breakdowns, and a reason written by hand for a card's runs (differences.csv) is not theirs.
PREDICTED_METHODS = ("analytic", "calibrated")
NOT_RUN_LABEL = {"over_budget": "over budget", "out_of_memory": "OOM", "failed": "failed", "skipped": "skipped"}
# Weaker = larger (reports/SCHEMA.md "Ratio rows"); exact counts as strong as measured.
METHOD_RANK = {"measured": 0, "exact": 0, "sampled": 1, "extrapolated": 2, "analytic": 3, "calibrated": 3,
               "over_budget": 4, "out_of_memory": 4, "failed": 4, "skipped": 4}

# The paper's compared models; its other numbers (7B on 4 GPUs) are context only.
PAPER_MODELS = ("yoco-3b", "transformer-3b", "yoco-65b", "transformer-65b")
RATIO_METRICS = ("memory_reduction", "prefill_speedup", "decode_speedup", "throughput_gain", "kv_cache_reduction")

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
    if not math.isfinite(v):  # a point that did not run has an empty value (reports/SCHEMA.md), never nan or inf
        raise CsvError(path, line, "column %s: %r is not a finite number (leave it empty where there is none)"
                       % (column, text))
    return v


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


def result_records(path, data=None):
    """[(line, raw, fields)] for every row of one result CSV (reports/SCHEMA.md), blank lines skipped: `raw` the
    columns as written (stripped, but notes), `fields` with the integers and numbers parsed (an empty value None).
    `data`: the file's bytes, read from `path` if None. CsvError naming file and line if it is not a result CSV:
    the one check of a result file, shared by the report and scripts/result_rows.py."""
    if data is None:
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
        out = []
        prev = reader.line_num
        for rec in reader:
            line, prev = prev + 1, reader.line_num
            # csv reads a quote left open on to the next closing one, or to the end of the file: the rows in
            # between became one row's notes and were gone, exit 0. A record is one line (SCHEMA.md, as the
            # C++ reader, bench/results/result_csv.hpp, requires).
            if any("\n" in x or "\r" in x for x in rec):
                raise CsvError(path, line, "a quoted field is not closed on this line (a record is one line)")
            if not rec or all(not x.strip() for x in rec):
                continue
            if len(rec) != len(COLUMNS):
                raise CsvError(path, line, "%d fields, a result row has %d (%s)"
                               % (len(rec), len(COLUMNS), ",".join(COLUMNS)))
            raw = dict(zip(COLUMNS, (x.strip() if k != "notes" else x for k, x in zip(COLUMNS, rec))))
            fields = dict(raw)
            for k in INT_COLUMNS:
                fields[k] = _parse_int(fields[k], k, path, line)
            fields["repeats"] = _parse_int(fields["repeats"], "repeats", path, line, default=0)
            for k in FLOAT_COLUMNS:
                fields[k] = _parse_float(fields[k], k, path, line)
            for k in ("device", "device_name", "model", "phase", "metric", "method"):
                if not fields[k]:
                    raise CsvError(path, line, "column %s is empty" % k)
            out.append((line, raw, fields))
        # Every writer ends each row with a line break: a last row without one is a file cut short (an
        # interrupted run or copy), and its last field, the notes, would read as whatever was left of it.
        if out and not text.endswith(("\n", "\r")) and out[-1][0] == prev:
            raise CsvError(path, prev, "the file does not end with a line break: its last row is cut short "
                           "(an interrupted run or copy?)")
    except csv.Error as exc:
        raise CsvError(path, reader.line_num, "malformed CSV: %s" % exc)
    return out


def read_result_csv(path):
    """Rows of one result CSV; CsvError naming file and line if it is not one."""
    rows = []
    seen = {}
    for line, _raw, fields in result_records(path):
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
    return rows


_WARNINGS = []


def warn(msg):
    _WARNINGS.append(msg)
    sys.stderr.write("warning: %s\n" % msg)


def expand_paths(specs, what):
    """Files named, or every *.csv under the folders named (recursively), in a stable order; CsvError naming a
    folder that holds none.

    A folder named `logs` is history, not results: each GPU run's raw logs and the
    CSVs it brought back sit under reports/results/<device>/logs/run-NN-*/, and
    the current CSVs of the device beside that folder. Name such a file to read it.
    """
    out = []
    for spec in specs:
        if os.path.isdir(spec):
            found = sorted(f for f in glob.glob(os.path.join(spec, "**", "*.csv"), recursive=True)
                           if "logs" not in os.path.relpath(f, spec).split(os.sep)[:-1])
            if not found:  # a folder of nothing is a mistake (a wrong path, a run not copied yet), not a report
                raise CsvError(spec, 0, "no *.csv under this folder (given as %s; folders named logs are not read)"
                               % what)
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


def _parse_length(text, path, line):
    """'32768', '32K' or '1M' (K = 1024) -> int; CsvError otherwise."""
    t = text.strip()
    mult = {"k": 1024, "m": 1024 * 1024}.get(t[-1:].lower(), 1) if t else 1
    num = t[:-1] if mult > 1 else t
    try:
        v = float(num)
    except ValueError:
        raise CsvError(path, line, "column seq_len: %r is not a length (an integer, or like 32K or 1M)" % text)
    if v < 0 or not (v * mult).is_integer():
        raise CsvError(path, line, "column seq_len: %r is not a whole number of tokens" % text)
    return int(v * mult)


def read_differences(path):
    """{(model, seq_len, metric, device): reason} from the hand-written reports/paper/differences.csv.

    Columns model,seq_len,metric,reason, or model,seq_len,metric,device,reason (the header is the first line that
    is not a comment); device "" (or the four-column form) is a reason for every device's row of that claim,
    otherwise for the rows whose device_name contains it (case-insensitive), e.g. H200. Lines whose first
    non-blank character is '#' are comments and blank lines are skipped, anywhere. seq_len: tokens, or 32K / 1M;
    0 for numbers of no length (KV cache per token). Two lines with one key: their reasons joined with '; '.
    CsvError naming file and line for anything else; a missing file is no reasons ({}).
    """
    if not path or not os.path.isfile(path):
        return OrderedDict()
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CsvError(path, 0, "cannot read: %s" % exc)
    out, header = OrderedDict(), None
    for no, text in enumerate(lines, 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        try:
            rec = next(csv.reader([text]))
        except csv.Error as exc:
            raise CsvError(path, no, "malformed CSV: %s" % exc)
        rec = [x.strip() for x in rec]
        if header is None:
            if tuple(rec) not in (DIFFERENCES_COLUMNS, DIFFERENCES_DEVICE_COLUMNS):
                raise CsvError(path, no, "the header must be `%s` or `%s` (after any '#' comment lines), got `%s`"
                               % (",".join(DIFFERENCES_COLUMNS), ",".join(DIFFERENCES_DEVICE_COLUMNS),
                                  ",".join(rec)))
            header = tuple(rec)
            continue
        if len(rec) != len(header):
            raise CsvError(path, no, "%d fields, a line has %d (%s; quote a reason that holds a comma)"
                           % (len(rec), len(header), ",".join(header)))
        f = dict(zip(header, rec))
        model, n, metric, reason, device = f["model"], f["seq_len"], f["metric"], f["reason"], f.get("device", "")
        if not model or not metric or not reason:
            raise CsvError(path, no, "model, metric and reason must not be empty")
        key = (model, _parse_length(n, path, no), metric, device)
        out[key] = (out[key] + "; " + reason) if key in out else reason
    if header is None:  # an empty file is a mistake: a file of no reasons has the header line alone
        raise CsvError(path, 1, "no header line (`%s`, after any '#' comment lines)" % ",".join(DIFFERENCES_COLUMNS))
    return out


def difference_for(differences, model, seq_len, metric, device_name):
    """(key, reason) of the reason for one row: the one written for its device (device_name contains the
    line's device), else the one for every device; (None, "") where none is written."""
    for (m, n, met, dev), reason in differences.items():
        if dev and (m, n, met) == (model, seq_len, metric) and dev.lower() in (device_name or "").lower():
            return (m, n, met, dev), reason
    key = (model, seq_len, metric, "")
    return (key, differences[key]) if key in differences else (None, "")


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

    def __init__(self, result_files, paper_files, differences_file=None):
        self.result_files, self.paper_files = list(result_files), list(paper_files)
        self.differences_file = differences_file
        self.differences = read_differences(differences_file)
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


def load(result_specs=None, paper_specs=None, differences=None):
    """Data from the files/folders given (None: the defaults). Raises CsvError.

    The reasons why ours differ from the paper's (read_differences) come from `differences` if given, else from a
    differences.csv among the paper's files (a folder given to --paper): reports/paper/differences.csv by default. It is never
    read as a paper result CSV."""
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
    found = [p for p in paper_files if os.path.basename(p) == DIFFERENCES_NAME]
    paper_files = [p for p in paper_files if os.path.basename(p) != DIFFERENCES_NAME]
    if differences is None:
        if found:
            differences = found[0]
        elif paper_specs is None:
            differences = DEFAULT_DIFFERENCES
    elif not os.path.isfile(differences):
        raise CsvError(differences, 0, "%s (given as --differences)"
                       % ("not a file" if os.path.exists(differences) else "no such file"))
    return Data(result_files, paper_files, differences)
