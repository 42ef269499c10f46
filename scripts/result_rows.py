"""Result CSVs (reports/SCHEMA.md) for the headline scripts: standard library
only, so that they run on the lent GPU machine as they are. A file is checked
by the report's own reader (reports/yocoreport/data.py, standard library too)."""
import contextlib
import csv
import io
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reports"))
from yocoreport.data import COLUMNS, INT_COLUMNS, CsvError, dedupe, result_records  # noqa: E402


def load(paths, tool):
    """Every row of every file, as dicts of the columns as written (seq_len, batch, gen_tokens as plain integers:
    1024.0 reads 1024); exit 2 with one line naming the file (and line, and column) when one cannot be read or is
    not a result CSV (a missing column, a truncated row, a bad number)."""
    rows = []
    for p in paths:
        try:
            rows.extend(dict(raw, **{k: str(fields[k]) for k in INT_COLUMNS})
                        for _line, raw, fields in result_records(p))
        except CsvError as e:
            print(f"{tool}: {e}", file=sys.stderr)
            sys.exit(2)
    return rows


def run(main, tool):
    """sys.exit(main(sys.argv)), the way the C++ yoco ends: a reader that stops early (`TOOL ... | head`) ends the
    script by SIGPIPE, quietly, and Ctrl-C by SIGINT after one line; never a traceback."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        sys.exit(main(sys.argv))
    except KeyboardInterrupt:
        sys.stderr.write("\n%s: interrupted (SIGINT)\n" % tool)
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


def num(v):
    """The value as a float, None when empty or not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def filter_stdin(argv):
    """`result_rows.py keep COLUMN=VALUE|COLUMN^=PREFIX [--header]`: the rows of a result CSV on stdin whose
    column equals VALUE (or starts with PREFIX) to stdout; the header line only with --header (to append)."""
    args = [a for a in argv if a != "--header"]
    if len(args) != 1 or ("=" not in args[0]):
        print("result_rows.py keep: expected COLUMN=VALUE or COLUMN^=PREFIX [--header]", file=sys.stderr)
        return 2
    prefix = "^=" in args[0]
    col, val = args[0].split("^=" if prefix else "=", 1)
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _keep_error("%d: not UTF-8 text" % (data[:exc.start].count(b"\n") + 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    kept = []
    try:  # every line checked before one is written: bad input leaves nothing half-appended
        header = next(reader, None)
        if not header:
            return _keep_error("1: empty input, no header line")
        if col not in header:
            return _keep_error("1: no column '%s' in the header" % col)
        i = header.index(col)
        prev = reader.line_num
        for rec in reader:
            line, prev = prev + 1, reader.line_num
            if not rec:
                continue
            if len(rec) != len(header):
                return _keep_error("%d: %d fields, the header has %d" % (line, len(rec), len(header)))
            if rec[i].startswith(val) if prefix else rec[i] == val:
                kept.append(rec)
    except csv.Error as exc:
        return _keep_error("%d: malformed CSV: %s" % (reader.line_num, exc))
    w = csv.writer(sys.stdout, lineterminator="\n")
    if "--header" in argv:
        w.writerow(header)
    w.writerows(kept)
    return 0


class _Raw:
    """A row as written, seen by the report's dedupe: its join key, timestamp and value."""

    def __init__(self, path, line, raw, fields):
        self.src, self.line, self.raw, self.timestamp = path, line, raw, raw.get("timestamp", "")
        self.value = fields["value"]
        self._key = tuple(fields[c] for c in ("model", "device_name", "seq_len", "batch", "gen_tokens", "phase",
                                              "metric"))

    def key(self):
        return self._key

    def where(self):
        return "%s:%d" % (self.src, self.line)


def merge(paths):
    """`result_rows.py merge FILE...`: the files' rows as one result CSV on stdout, one row per join key, the latest
    timestamp winning (ties: the later file), as the report reads them (yocoreport/data.py, dedupe); its notes on
    rows that disagree go to stderr."""
    if not paths:
        print("result_rows.py merge: expected one or more result CSVs", file=sys.stderr)
        return 2
    rows = []
    for p in paths:
        try:
            rows.extend(_Raw(p, line, raw, fields) for line, raw, fields in result_records(p))
        except CsvError as e:
            print("result_rows.py merge: %s" % e, file=sys.stderr)
            return 2
    with contextlib.redirect_stdout(sys.stderr):
        kept = dedupe(rows)
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows([r.raw[c] for c in COLUMNS] for r in kept)
    return 0


def _keep_error(where_what):
    print("result_rows.py keep: <stdin>:%s" % where_what, file=sys.stderr)
    return 2

if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "keep":
        run(lambda argv: filter_stdin(argv[2:]), "result_rows.py keep")
    if len(sys.argv) >= 2 and sys.argv[1] == "merge":
        run(lambda argv: merge(argv[2:]), "result_rows.py merge")
    print("usage: result_rows.py keep COLUMN=VALUE|COLUMN^=PREFIX [--header] | merge FILE...", file=sys.stderr)
    sys.exit(2)
