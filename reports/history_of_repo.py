#!/usr/bin/python3
"""The project's own performance history: walks the repository's git history and ingests every committed
result CSV (reports/results/**, the GPU runs' logs included, and reports/baselines/*) at the commit that first
committed each of its rows (that commit and its date stand for the row), orders the commits by git, then lists
the change points and draws the trend figures. What the report's "Performance history" section shows.

  reports/history_of_repo.py [--repo DIR] [--db FILE] [--out DIR] [--page FILE]

A measurement is one row, wherever it was committed: a run's CSV under logs/ and its copy in the card's folder,
or a file that grew (a sweep resumed, logs/chunks.csv gathering every run's rows), add each row once, at the
commit that first had it. CSVs that are not result CSVs (a profiler's export) are passed over. The database is
rebuilt each time (default build/history/project.db); figures go to --out (default reports/figures/), the page
to --page (default reports/HISTORY.md). Exit status: 0 done, 2 bad input (one line)."""
import csv
import io
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import history  # noqa: E402  (history.py beside this file)
from yocohistory.store import COLUMNS, HistoryError, Store  # noqa: E402
from yocoreport.cli import ArgumentParser  # noqa: E402


def git(repo, *args):
    return subprocess.run(["git", "-C", repo] + list(args), capture_output=True, check=True).stdout


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--repo", default=os.path.dirname(HERE), metavar="DIR",
                   help="the repository whose history is read (default: this checkout)")
    p.add_argument("--db", default=os.path.join(os.path.dirname(HERE), "build", "history", "project.db"),
                   metavar="FILE", help="the SQLite history, removed and rebuilt (default: build/history/project.db)")
    p.add_argument("--out", default=os.path.join(HERE, "figures"), metavar="DIR",
                   help="folder for the trend figures (default: reports/figures)")
    p.add_argument("--page", default=os.path.join(HERE, "HISTORY.md"), metavar="FILE",
                   help="the page that lists the change points and shows the figures (default: reports/HISTORY.md)")
    a = p.parse_args(argv)
    try:
        return run(a)
    except HistoryError as exc:
        sys.stderr.write("history_of_repo: %s\n" % exc)
        return 2
    except OSError as exc:
        sys.stderr.write("history_of_repo: %s: %s\n" % (exc.filename or "", exc.strerror or exc))
        return 2
    except Exception as exc:  # SQLite's own failure (a disk full): one line, not a traceback
        sys.stderr.write("history_of_repo: internal error: %s\n" % history.one_line(exc))
        return 1


def remove_old_history(db):
    """Removes the history that --db names, to rebuild it; anything else there is refused and left as it is."""
    os.makedirs(os.path.dirname(os.path.abspath(db)), exist_ok=True)
    if os.path.isdir(db):
        raise HistoryError("%s: is a folder, not a history database" % db)
    if os.path.exists(db):
        with open(db, "rb") as f:
            head = f.read(16)
        if head and head != b"SQLite format 3\x00":
            raise HistoryError("%s: not a SQLite database, so not a history to rebuild (left as it is)" % db)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)


def new_rows(data, seen):
    """The CSV `data` (bytes) with only the rows not in `seen` (which it extends): None when it is not a result
    CSV (its header is not the schema's), b"" when every row was seen. Rows are compared as parsed records, so a
    note with a line break in it is one row; a file the reader refuses is returned whole, to be refused by it."""
    try:
        text = data.decode("utf-8-sig")
        records = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except (UnicodeDecodeError, csv.Error):
        return data
    if not records or [h.strip() for h in records[0]] != COLUMNS:
        return None
    if not text.endswith("\n"):  # cut short: rewritten, it would pass as whole
        return data
    fresh = [r for r in records[1:] if r and tuple(r) not in seen]
    if not fresh:
        return b""
    seen.update(tuple(r) for r in fresh)
    out = io.StringIO(newline="")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(records[0])
    w.writerows(fresh)
    return out.getvalue().encode("utf-8")


def ingest_repo(repo, db):
    """Rebuilds `db` from every result row committed in `repo`'s history, each row at the first commit that had it.
    Returns the counts (files, rows, refused, other, repeated) and the seconds it took."""
    try:
        log = git(repo, "log", "--reverse", "--diff-filter=AM", "--format=@%H %cI", "--name-only", "--",
                  "reports/results", "reports/baselines").decode().splitlines()
    except (OSError, subprocess.CalledProcessError) as exc:
        why = (getattr(exc, "stderr", b"") or b"").decode(errors="replace").strip().splitlines()
        raise HistoryError("%s: not a git repository (%s)" % (repo, why[0] if why else exc))
    remove_old_history(db)
    t0 = time.time()
    store = Store(db, create=True)
    n = dict(files=0, rows=0, refused=0, other=0, repeated=0)
    seen = set()
    commit = date = None
    with tempfile.TemporaryDirectory() as tmp:
        for line in log:
            if line.startswith("@"):
                commit, date = line[1:].split(" ", 1)
                continue
            if not line.endswith(".csv"):
                continue
            try:
                data = git(repo, "show", "%s:%s" % (commit, line))
            except subprocess.CalledProcessError:
                continue
            fresh = new_rows(data, seen)
            if fresh is None:
                n["other"] += 1
                continue
            if not fresh:
                n["repeated"] += 1
                continue
            f = os.path.join(tmp, line.replace("/", "__"))
            with open(f, "wb") as fh:
                fh.write(fresh)
            try:
                n["rows"] += store.ingest(f, commit=commit[:12], date=date)
                n["files"] += 1
            except HistoryError as exc:
                n["refused"] += 1
                sys.stderr.write("history_of_repo: %s at %s: %s (not ingested)\n" % (line, commit[:12], exc))
    shas = store.distinct_shas()
    store.set_commit_order(history.git_order(repo, shas))
    store.close()
    return n, time.time() - t0


def run(a):
    # First: without ruptures this script runs again under .venv's Python, and what it did before would be redone.
    history.need_detection(__file__)
    n, took = ingest_repo(a.repo, a.db)
    print("ingested %d file version(s), %d row(s) (%d refused; %d with no row not ingested before, %d not result "
          "CSVs) in %.2f s into %s" % (n["files"], n["rows"], n["refused"], n["repeated"], n["other"], took, a.db))
    from yocohistory.detect import analyse
    from yocohistory.trends import collect, draw, page
    store = Store(a.db, create=False)
    series = history.series_points(store, None)
    order = {sha: i for i, sha in enumerate(store.commit_order())}
    store.close()
    changes = []
    for name, (metric, pts) in sorted(series.items()):
        for c in analyse(pts, metric)["changes"]:
            changes.append((name, c))
    made = draw(collect(series), order, a.out)
    text = page(made, changes, order, "%d file versions, %d rows, %.1f s to ingest" % (n["files"], n["rows"], took),
                os.path.dirname(os.path.abspath(a.page)))
    with open(a.page + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(a.page + ".tmp", a.page)
    print("%d figure(s), %d change point(s) past the floor; wrote %s"
          % (len(made), sum(1 for _n, c in changes if "below the floor" not in c[6]), a.page))
    return 0


if __name__ == "__main__":
    sys.exit(main())
