#!/usr/bin/python3
"""yoco history: every result CSV of this suite kept in one database, so that performance can be followed
across commits.

  yoco history ingest --db DB [--git DIR] [--commit SHA] [--date ISO] FILE|DIR...
  yoco history check --db DB [--series GLOB] [--floor 5%] [--far 6] [--noise 3]
  yoco history changes --db DB [--series GLOB] [--floor 5%] [--far 6] [--noise 3] [--format table|csv|json]
  yoco history export --db DB [--series GLOB] [--format csv]
  yoco history series --db DB [--series GLOB]
(reports/history.py takes the same arguments: `yoco history` runs it.)

DB is a file path (SQLite, created on first ingest) or a postgresql://user@host:port/database URL (the same
schema; the password from PGPASSWORD or a pgpass file, never in the URL). A folder given to ingest is searched for *.csv
(recursively; one with none is bad input). Ingest is idempotent (a file whose content is already in adds nothing, and
a row already in from another file, every field equal, is not added again: a sweep file that grew under --resume
adds its new points only) and atomic per file.
--git DIR orders commits by that repository's history (else rows follow their timestamps). --commit/--date
override the rows' own git_sha/timestamp (files from elsewhere). A series is model|device_name|seq_len|batch|
gen_tokens|phase|metric, and |CONFIGURATION where the row's notes name one other than the runners' default (a
prefill chunk, 'chunk 16384'; the words yocoreport/chunks.py reads; a gRet decode kernel named, 'gRet decode
split'); GLOB matches the whole name (fnmatch), so end it in * to take those configurations too:
'yoco-3b|*|prefill|prefill_latency_s*' (without the last *, the '|chunk 16384' series are left out).

Detection (yocohistory/detect.py has the method): per series, PELT change points (ruptures) on the series
scaled by its own noise; a change is a regression when it goes the metric's worse way by more than the floor
and 3x the noise; counted metrics (exact rows, bytes, FLOPs) flag any change, a regression only the worse
way (a metric of no direction, param_*: a CHANGE line, exit 0). `check` judges the newest run of
each series: a regression at once when worse than its level by the floor and 6x the noise, or when the last
two runs form a new, worse level; "suspected" (reported, exit 0) when worse by the floor and 3x the noise only.

Exit status: 0 done (check: no regression), 1 check found a regression, or an internal failure (a database's own
error: one line, "internal error"), 2 bad input (the file, and line where there is one, named; a --series GLOB
that matches no series)."""
import argparse
import csv
import datetime
import fnmatch
import math
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from yocohistory.store import COLUMNS, SERIES_KEY, HistoryError, Store, read_file  # noqa: E402
from yocoreport.chunks import DEFAULT_CONFIG, config_of, label as config_label  # noqa: E402
from yocoreport.cli import ArgumentParser  # noqa: E402


NAMED_DECODE = re.compile(r"gRet decode step (\w+) named")  # bench/harness/cuda_backend.cpp, gret_kernel_note


def one_line(exc):
    """An exception as one line: its type and its message's first line (a server's DETAIL lines left out)."""
    text = str(exc).strip()
    return "%s: %s" % (type(exc).__name__, text.splitlines()[0]) if text else type(exc).__name__


def series_name(r):
    """model|device_name|seq_len|batch|gen_tokens|phase|metric, then |CONFIGURATION where the notes name one other
    than the runners' default: one run may measure a point at several (the GPU suite's step `chunks` at prefill
    chunks of 8192, 16384 and 32768, in logs/chunks.csv), and as one series their values flip-flopped within a
    commit. The configuration as the report reads it (yocoreport/chunks.py: the prefill chunk, the FFN's row blocks,
    its up half fused, ...); a row that names the default (`prefill chunk 32768`) is in the series of one that
    names none, as the schema says they ran the same."""
    name = "|".join(str(r[k]) for k in SERIES_KEY)
    notes = r["notes"] or ""
    config = config_of(notes)
    parts = [] if config == DEFAULT_CONFIG else [config_label(config)]
    # A gRet decode kernel named by YOCO_GRET_DECODE (bench/harness/cuda_backend.cpp): the report's configuration
    # does not read it, and its rows joined the default's series.
    decode = NAMED_DECODE.search(notes)
    if decode:
        parts.append("gRet decode " + decode.group(1))
    return name + "|" + ", ".join(parts) if parts else name


def csv_files(specs):
    out = []
    for s in specs:
        if os.path.isdir(s):
            found = [os.path.join(root, f) for root, _dirs, files in sorted(os.walk(s))
                     for f in sorted(files) if f.endswith(".csv")]
            if not found:  # a run that wrote nothing: not an ingest that succeeds with nothing in
                raise HistoryError("%s: a folder with no *.csv in it (nor in its subfolders)" % s)
            out += found
        elif os.path.isfile(s):
            out.append(s)
        else:
            raise HistoryError("%s: no such file or folder" % s)
    return out


def git_log(repo):
    """Every commit of `repo` as 'SHA DATE' lines, oldest first; HistoryError (one line) if it is not a repository."""
    try:
        return subprocess.run(["git", "-C", repo, "log", "--all", "--reverse", "--format=%H %cI"],
                              capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError) as exc:
        why = (getattr(exc, "stderr", "") or str(exc)).strip().splitlines()
        raise HistoryError("%s: not a git repository (%s)" % (repo, why[0] if why else exc))


def git_order(repo, shas, log=None):
    """(recorded git_sha, order, date) for the recorded shas git knows, oldest commit first."""
    if log is None:
        log = git_log(repo)
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
    log = git_log(a.git) if a.git else None  # a bad --git is refused before anything is ingested
    files = csv_files(a.files)  # so is a missing file or an empty folder: no database made for them
    # The database is opened at the first file read and found good: an ingest whose files are all refused makes no
    # empty history (which a read would take for one, and `check` passed).
    store = None
    try:
        added = skipped = repeated = 0
        bad = []
        for f in files:
            try:
                prepared = read_file(f, commit=a.commit, date=a.date)
            except HistoryError as exc:  # the others still go in; the exit status says one did not
                sys.stderr.write("yoco history: %s (file not ingested)\n" % exc)
                bad.append(f)
                continue
            if store is None:
                store = Store(a.db, create=True)  # a database refused ends the command: nothing can go in
            try:
                n = store.add(prepared)
            except HistoryError as exc:
                sys.stderr.write("yoco history: %s (file not ingested)\n" % exc)
                bad.append(f)
                continue
            added += n
            repeated += store.last_repeated
            skipped += store.last_was_in  # not n == 0: a new file of a header alone adds no rows either
        if store is None:  # every file refused, each said so: the database was not opened, nor made
            return 2
        if a.git:
            shas = store.distinct_shas()
            store.set_commit_order(git_order(a.git, shas, log))
        nf, nr = store.counts()
        print("ingested %d file(s): %d row(s) added%s, %d file(s) already in, %d refused; the history holds %d "
              "file(s), %d row(s)" % (len(files) - len(bad), added,
                                      " (%d already in from another file)" % repeated if repeated else "", skipped,
                                      len(bad), nf, nr))
    finally:
        if store is not None:
            store.close()
    return 2 if bad else 0


def parse_floor(text):
    """--floor: a size, so its sign is dropped (-5% is 5%: a change counts past it either way)."""
    t = text.strip()
    t = t[:-1] if t.endswith("%") else t  # one sign: rstrip took '5%%' (a shell-escaping slip) as 5%
    try:
        v = abs(float(t)) / 100.0
    except ValueError:
        raise HistoryError("--floor: expected a percentage such as 5%%, got %r" % text)
    if not math.isfinite(v) or not 0 <= v < 10:
        raise HistoryError("--floor: out of range: %r" % text)
    return v


def noise_units(text):
    """--far, --noise: a finite number of noise units, not below 0."""
    try:
        v = float(text)
    except ValueError:
        v = None
    if v is None or not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError("expected a number of noise units (finite, not below 0), got %r" % text)
    return v


def iso_time(text):
    """--date: an ISO 8601 time, as the rows' timestamps are (2026-11-26T00:00:00Z)."""
    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected an ISO 8601 time such as 2026-11-26T00:00:00Z, got %r" % text)
    return text


def matching_rows(store, glob):
    """The history's rows (all, or those of the series matching --series GLOB); HistoryError when GLOB matches no
    series: a gate that checks nothing is a typo, not a pass (as compare refuses a --metrics glob that matches no row)."""
    rows = store.rows()
    if not glob:
        return rows
    out = [r for r in rows if fnmatch.fnmatchcase(series_name(r), glob)]
    if not out:
        raise HistoryError("--series %r matches none of the %d series of %s (yoco history series lists them)"
                           % (glob, len(set(series_name(r) for r in rows)), store.be.where))
    return out


def series_points(store, glob):
    """series name -> (metric, [(commit, timestamp, value, spread, method, file_id)]) in history order."""
    out = {}
    for r in matching_rows(store, glob):
        if r["value"] is None:
            continue
        n = series_name(r)
        spread = r["max"] - r["min"] if r["min"] is not None and r["max"] is not None else None
        out.setdefault(n, (r["metric"], []))[1].append((r["git_sha"], r["timestamp"], r["value"], spread, r["method"],
                                                              r["file_id"]))
    return out


def need_detection(script=__file__):
    """The detection's libraries; from the checkout's .venv (scripts/install-deps.sh) when Debian's Python lacks
    ruptures: `script` (the one running, with this process's arguments) is run again under the venv's Python."""
    try:
        import ruptures  # noqa: F401
        return
    except ImportError:
        pass
    venv = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv", "bin", "python3")
    # The venv's python is a link to Debian's: tell them apart by sys.prefix, not by the binary.
    if os.path.exists(venv) and os.path.abspath(sys.prefix) != os.path.dirname(os.path.dirname(venv)):
        os.execv(venv, [venv, os.path.abspath(script)] + sys.argv[1:])
    raise HistoryError("ruptures is not installed (scripts/install-deps.sh installs it into .venv)")


def cmd_changes(a):
    need_detection()
    from yocohistory.detect import analyse
    floor = parse_floor(a.floor)
    store = Store(a.db, create=False)
    try:
        found = []
        for name, (metric, pts) in sorted(series_points(store, a.series).items()):
            res = analyse(pts, metric, floor, a.far, a.noise)
            for (i, commit, before, after, rel, conf, kind, detail) in res["changes"]:
                found.append(dict(series=name, index=i, commit=commit, before=before, after=after,
                                  relative_change=rel, confidence=conf, kind=kind, noise=res["noise"], detail=detail))
    finally:
        store.close()
    if a.format == "json":
        import json
        # A change from a level of 0 is infinitely large: null, since JSON has no Infinity (strict readers refuse it).
        for f in found:
            for k in ("before", "after", "relative_change", "noise"):
                if not math.isfinite(f[k]):
                    f[k] = None
        print(json.dumps(found, indent=2, allow_nan=False))
    elif a.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        keys = ["series", "index", "commit", "before", "after", "relative_change", "confidence", "kind", "noise",
                "detail"]
        w.writerow(keys)
        for f in found:
            w.writerow([f[k] for k in keys])
    else:
        # Whole commits (as recorded: 12 hex digits, -dirty), the kind and commit columns as wide as their widest.
        wk = max([len(f["kind"]) for f in found] + [0])
        wc = max([len(f["commit"]) for f in found] + [0])
        for f in found:
            print("%-*s %-*s %+8.2f%%  %.6g -> %.6g  (confidence %.3f, noise %.3g)  %s%s"
                  % (wk, f["kind"], wc, f["commit"], 100 * f["relative_change"], f["before"], f["after"],
                     f["confidence"], f["noise"], f["series"], "  (%s)" % f["detail"] if f["detail"] else ""))
        print("%d change point(s)" % len(found))
    return 0


def cmd_check(a):
    need_detection()
    from yocohistory.detect import analyse
    floor = parse_floor(a.floor)
    store = Store(a.db, create=False)
    try:
        series = series_points(store, a.series)
    finally:
        store.close()
    if not series:  # a gate that checks nothing is not a pass
        raise HistoryError("%s: the history holds no series with a value to check" % store.be.where)
    regressions = suspected = changed = 0
    for name, (metric, pts) in sorted(series.items()):
        # The run ingested last (the highest file id; its last point in history order), judged against the runs
        # before it: a run of an older commit ingested now is this ingest's run, not the history's last.
        last = max(p[5] for p in pts)
        k = max(i for i, p in enumerate(pts) if p[5] == last)
        pts = pts[:k + 1]
        res = analyse(pts, metric, floor, a.far, a.noise)
        if res["newest"] in ("regression", "suspected", "change"):
            print("%s: %s at %s: %s" % (res["newest"].upper(), name, pts[-1][0], res["newest_detail"]))
            regressions += res["newest"] == "regression"
            suspected += res["newest"] == "suspected"
            changed += res["newest"] == "change"
    print("%d series checked: %d regression(s), %d suspected, %d changed of no direction (floor %.1f%%)"
          % (len(series), regressions, suspected, changed, 100 * floor))
    return 1 if regressions else 0


def cmd_export(a):
    store = Store(a.db, create=False)
    try:
        rows = matching_rows(store, a.series)
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(["" if r[k] is None else (repr(r[k]) if isinstance(r[k], float) else r[k]) for k in COLUMNS])
    finally:
        store.close()
    return 0


def cmd_series(a):
    store = Store(a.db, create=False)
    try:
        counts = {}
        for r in matching_rows(store, a.series):
            n = series_name(r)
            counts[n] = counts.get(n, 0) + 1
        for n in sorted(counts):
            print("%5d  %s" % (counts[n], n))
    finally:
        store.close()
    return 0


DB_HELP = "the history: a SQLite file (ingest creates it) or a postgresql://user@host:port/database URL"
SERIES_HELP = ("only the series matching GLOB (fnmatch) over model|device_name|seq_len|batch|gen_tokens|phase|metric"
               "[|configuration]; end it in * to take a metric's configured series too (metric*)")


def add_detection_options(parser, noise_note=""):
    """The history, the series and the change-point thresholds: what check and changes both read."""
    parser.add_argument("--db", required=True, help=DB_HELP)
    parser.add_argument("--series", metavar="GLOB", help=SERIES_HELP)
    parser.add_argument("--floor", default="5%",
                        help="smallest change that counts, either way (default 5%%; its sign is dropped)")
    parser.add_argument("--far", type=noise_units, default=6.0,
                        help="the newest run is a regression at once past this many noise units (default 6)")
    parser.add_argument("--noise", type=noise_units, default=3.0,
                        help="a change must also clear this many noise units (default 3%s)" % noise_note)


def main(argv=None):
    p = ArgumentParser(prog="yoco history", description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="cmd", metavar="ingest|check|changes|export|series")
    i = sub.add_parser("ingest", help="add result CSVs (files or folders) to the history")
    i.add_argument("--db", required=True, help=DB_HELP)
    i.add_argument("--git", metavar="DIR", help="order commits by this repository's history")
    i.add_argument("--commit", help="the commit of these files (overrides their git_sha)")
    i.add_argument("--date", type=iso_time, help="the time of these files, ISO 8601 (overrides their timestamp)")
    i.add_argument("files", nargs="+", metavar="FILE|DIR", help="result CSVs, or folders searched for *.csv")
    c = sub.add_parser("check", help="judge the newest run of each series: exit 1 on a regression")
    add_detection_options(c, "; the newest run: suspected")
    ch = sub.add_parser("changes", help="every change point of the history")
    add_detection_options(ch)
    ch.add_argument("--format", choices=["table", "csv", "json"], default="table", help="default: table")
    e = sub.add_parser("export", help="the rows of the history (or of the series matching --series) as CSV")
    e.add_argument("--db", required=True, help=DB_HELP)
    e.add_argument("--series", metavar="GLOB", help=SERIES_HELP)
    e.add_argument("--format", choices=["csv"], default="csv", help="csv, the only one")
    s = sub.add_parser("series", help="the series the history holds, with their point counts")
    s.add_argument("--db", required=True, help=DB_HELP)
    s.add_argument("--series", metavar="GLOB", help=SERIES_HELP)
    # argparse takes `--floor -5%` for an option named -5% ("expected one argument"): keep the value with its option.
    given, argv = sys.argv[1:] if argv is None else list(argv), []
    while given:
        arg = given.pop(0)
        if arg == "--floor" and given and given[0][:1] == "-" and given[0][1:2].isdigit():
            arg = "--floor=" + given.pop(0)
        argv.append(arg)
    try:
        a = p.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code not in (0, None) else 0
    if not a.cmd:
        sys.stderr.write("yoco history: error: no command (ingest, check, changes, export or series; "
                         "yoco history --help says more)\n")
        return 2
    try:
        return {"ingest": cmd_ingest, "check": cmd_check, "changes": cmd_changes, "export": cmd_export,
                "series": cmd_series}[a.cmd](a)
    except HistoryError as exc:
        sys.stderr.write("yoco history: %s\n" % exc)
        return 2
    except Exception as exc:  # a database's own failure (a server gone, a disk full): one line, not a traceback
        sys.stderr.write("yoco history: internal error: %s\n" % one_line(exc))
        return 1


if __name__ == "__main__":
    # A reader that stops early (`export | head`) ends the command quietly, as it ends the C++ yoco (exit 141 in a
    # shell), not with a BrokenPipeError traceback; ingest's transactions keep the store whole either way.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        # Ctrl-C: one line, not a traceback; the open transaction was rolled back on the way out. Then the end by
        # the signal itself, as yoco bench ends, so that a shell loop around the command stops too.
        sys.stderr.write("\nyoco history: interrupted (SIGINT); the file being ingested, if any, is not in the "
                         "history\n")
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
