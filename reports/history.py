#!/usr/bin/python3
"""yoco history: every result CSV of this suite kept in one database, so that performance can be followed
across commits.

  history.py ingest --db DB [--git DIR] [--commit SHA] [--date ISO] FILE|DIR...
  history.py export --db DB [--series GLOB] [--format csv]
  history.py series --db DB [--series GLOB]

DB is a file path (SQLite, created on first ingest). A folder given to ingest is searched for *.csv
(recursively). Ingest is idempotent (a file whose content is already in adds nothing) and atomic per file.
--git DIR orders commits by that repository's history (else rows follow their timestamps). --commit/--date
override the rows' own git_sha/timestamp (files from elsewhere). A series is model|device_name|seq_len|batch|
gen_tokens|phase|metric; GLOB matches it (fnmatch), e.g. 'yoco-3b|*|prefill|prefill_latency_s'.

Exit status: 0 done, 2 bad input (the file, and line where there is one, named)."""
import argparse
import csv
import fnmatch
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from yocohistory.store import COLUMNS, SERIES_KEY, HistoryError, Store  # noqa: E402


def series_name(r):
    return "|".join(str(r[k]) for k in SERIES_KEY)


def csv_files(specs):
    out = []
    for s in specs:
        if os.path.isdir(s):
            for root, _dirs, files in sorted(os.walk(s)):
                out += [os.path.join(root, f) for f in sorted(files) if f.endswith(".csv")]
        elif os.path.isfile(s):
            out.append(s)
        else:
            raise HistoryError("%s: no such file or folder" % s)
    return out


def git_order(repo, shas):
    """(recorded git_sha, order, date) for the recorded shas git knows, oldest commit first."""
    try:
        log = subprocess.run(["git", "-C", repo, "log", "--all", "--reverse", "--format=%H %cI"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HistoryError("%s: not a git repository (%s)" % (repo, getattr(exc, "stderr", "") or exc))
    full = [ln.split(" ", 1) for ln in log if ln.strip()]
    index = {}
    for i, (h, d) in enumerate(full):
        index[h] = (i, d)
    out = []
    for s in shas:
        base = s[:-len("-dirty")] if s.endswith("-dirty") else s
        if len(base) < 7 or not all(c in "0123456789abcdef" for c in base):
            continue
        hit = [h for h in index if h.startswith(base)]
        if len(hit) == 1:
            out.append((s, index[hit[0]][1], index[hit[0]][0]))
    out.sort(key=lambda t: t[2])
    return [(s, d) for s, d, _i in out]


def cmd_ingest(a):
    store = Store(a.db, create=True)
    try:
        files = csv_files(a.files)
        added = skipped = 0
        bad = []
        for f in files:
            try:
                n = store.ingest(f, commit=a.commit, date=a.date)
            except HistoryError as exc:  # the others still go in; the exit status says one did not
                sys.stderr.write("yoco history: %s (file not ingested)\n" % exc)
                bad.append(f)
                continue
            if n:
                added += n
            else:
                skipped += 1
        if a.git:
            shas = [r[0] for r in store.db.execute("SELECT DISTINCT git_sha FROM results")]
            store.set_commit_order(git_order(a.git, shas))
        nf, nr = store.counts()
        print("ingested %d file(s): %d row(s) added, %d file(s) already in, %d refused; the history holds %d "
              "file(s), %d row(s)" % (len(files) - len(bad), added, skipped, len(bad), nf, nr))
    finally:
        store.close()
    return 2 if bad else 0


def cmd_export(a):
    store = Store(a.db, create=False)
    try:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in store.rows():
            if a.series and not fnmatch.fnmatchcase(series_name(r), a.series):
                continue
            w.writerow(["" if r[k] is None else (repr(r[k]) if isinstance(r[k], float) else r[k]) for k in COLUMNS])
    finally:
        store.close()
    return 0


def cmd_series(a):
    store = Store(a.db, create=False)
    try:
        counts = {}
        for r in store.rows():
            n = series_name(r)
            if not a.series or fnmatch.fnmatchcase(n, a.series):
                counts[n] = counts.get(n, 0) + 1
        for n in sorted(counts):
            print("%5d  %s" % (counts[n], n))
    finally:
        store.close()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="yoco history", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="cmd", metavar="ingest|export|series")
    i = sub.add_parser("ingest", help="add result CSVs (files or folders) to the history")
    i.add_argument("--db", required=True)
    i.add_argument("--git", help="order commits by this repository's history")
    i.add_argument("--commit", help="the commit of these files (overrides their git_sha)")
    i.add_argument("--date", help="the time of these files (overrides their timestamp)")
    i.add_argument("files", nargs="+")
    e = sub.add_parser("export", help="the rows of the history (or of the series matching --series) as CSV")
    e.add_argument("--db", required=True)
    e.add_argument("--series", help="GLOB over model|device_name|seq_len|batch|gen_tokens|phase|metric")
    e.add_argument("--format", choices=["csv"], default="csv")
    s = sub.add_parser("series", help="the series the history holds, with their point counts")
    s.add_argument("--db", required=True)
    s.add_argument("--series")
    try:
        a = p.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code not in (0, None) else 0
    if not a.cmd:
        p.print_usage(sys.stderr)
        return 2
    try:
        return {"ingest": cmd_ingest, "export": cmd_export, "series": cmd_series}[a.cmd](a)
    except HistoryError as exc:
        sys.stderr.write("yoco history: %s\n" % exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
