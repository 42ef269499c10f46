#!/usr/bin/python3
"""The project's own performance history: walks the repository's git history and ingests every committed
result CSV (reports/results/**, reports/baselines/*) at the commit that added or changed it (that commit and its
date stand for the file's rows), orders the commits by git, then lists the change points and draws the trend
figures. What the report's "Performance history" section shows.

  reports/history_of_repo.py [--repo DIR] [--db FILE] [--out DIR]

The database is rebuilt each time (default build/history/project.db); figures go to reports/figures/, the page to
reports/HISTORY.md (beside this script, whatever --out says). Exit status: 0 done, 2 bad input (one line)."""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import history  # noqa: E402  (history.py beside this file)
from yocohistory.store import HistoryError, Store  # noqa: E402
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
    a = p.parse_args(argv)
    try:
        return run(a)
    except HistoryError as exc:
        sys.stderr.write("history_of_repo: %s\n" % exc)
        return 2
    except OSError as exc:
        sys.stderr.write("history_of_repo: %s: %s\n" % (exc.filename or "", exc.strerror or exc))
        return 2


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


def run(a):
    try:
        log = git(a.repo, "log", "--reverse", "--diff-filter=AM", "--format=@%H %cI", "--name-only", "--",
                  "reports/results", "reports/baselines").decode().splitlines()
    except (OSError, subprocess.CalledProcessError) as exc:
        why = (getattr(exc, "stderr", b"") or b"").decode(errors="replace").strip().splitlines()
        raise HistoryError("%s: not a git repository (%s)" % (a.repo, why[0] if why else exc))
    remove_old_history(a.db)
    t0 = time.time()
    store = Store(a.db, create=True)
    files = rows = refused = 0
    commit = date = None
    with tempfile.TemporaryDirectory() as tmp:
        for line in log:
            if line.startswith("@"):
                commit, date = line[1:].split(" ", 1)
                continue
            if not line.endswith(".csv") or "/logs/" in line:
                continue
            try:
                data = git(a.repo, "show", "%s:%s" % (commit, line))
            except subprocess.CalledProcessError:
                continue
            f = os.path.join(tmp, line.replace("/", "__"))
            with open(f, "wb") as fh:
                fh.write(data)
            try:
                rows += store.ingest(f, commit=commit[:12], date=date)
                files += 1
            except HistoryError as exc:
                refused += 1
                sys.stderr.write("history_of_repo: %s at %s: %s (not ingested)\n" % (line, commit[:12], exc))
    shas = store.distinct_shas()
    store.set_commit_order(history.git_order(a.repo, shas))
    store.close()
    took = time.time() - t0
    print("ingested %d file version(s), %d row(s) (%d refused) in %.2f s into %s"
          % (files, rows, refused, took, a.db))
    history.need_detection()  # re-runs this script under .venv's Python when Debian's lacks ruptures
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
    text = page(made, changes, order, "%d file versions, %d rows, %.1f s to ingest" % (files, rows, took), HERE)
    out = os.path.join(HERE, "HISTORY.md")
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(out + ".tmp", out)
    print("%d figure(s), %d change point(s) past the floor; wrote %s"
          % (len(made), sum(1 for _n, c in changes if "below the floor" not in c[6]), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
