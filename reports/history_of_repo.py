#!/usr/bin/python3
"""The project's own performance history: walks the repository's git history and ingests every committed
result CSV (reports/results/**, reports/baselines/*) at the commit that added or changed it (that commit and its
date stand for the file's rows), orders the commits by git, then lists the change points and draws the trend
figures. What the report's "Performance history" section shows.

  reports/history_of_repo.py [--repo DIR] [--db FILE] [--out DIR]

The database is rebuilt each time (default build/history/project.db); figures go to reports/figures/."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import history  # noqa: E402  (history.py beside this file)
from yocohistory.store import HistoryError, Store  # noqa: E402


def git(repo, *args):
    return subprocess.run(["git", "-C", repo] + list(args), capture_output=True, check=True).stdout


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", default=os.path.dirname(HERE))
    p.add_argument("--db", default=os.path.join(os.path.dirname(HERE), "build", "history", "project.db"))
    p.add_argument("--out", default=os.path.join(HERE, "figures"))
    a = p.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(a.db)), exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(a.db + suffix):
            os.remove(a.db + suffix)
    log = git(a.repo, "log", "--reverse", "--diff-filter=AM", "--format=@%H %cI", "--name-only", "--",
              "reports/results", "reports/baselines").decode().splitlines()
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
