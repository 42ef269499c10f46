"""The history store on SQLite: schema version 1, ingest that is idempotent (a file's content hash is kept)
and atomic (one transaction per file; WAL mode, so that two ingests at once both land), parameterised queries
only. A database file that is not ours (or not SQLite) is refused and never written."""
import csv
import hashlib
import io
import os
import sqlite3

SCHEMA_VERSION = 1
# Notes may be long (a failure's message, a kernel's parameters): no field is too large to keep.
csv.field_size_limit(1 << 30)
COLUMNS = ("git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,"
           "phase,metric,value,unit,method,repeats,min,max,notes").split(",")
SERIES_KEY = ("model", "device_name", "seq_len", "batch", "gen_tokens", "phase", "metric")

_SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE files (id INTEGER PRIMARY KEY, sha256 TEXT NOT NULL UNIQUE, path TEXT NOT NULL, "
    "rows INTEGER NOT NULL, commit_override TEXT, date_override TEXT)",
    "CREATE TABLE results (id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL REFERENCES files(id), "
    "line INTEGER NOT NULL, git_sha TEXT NOT NULL, timestamp TEXT NOT NULL, host TEXT NOT NULL, "
    "device TEXT NOT NULL, device_name TEXT NOT NULL, driver TEXT NOT NULL, model TEXT NOT NULL, "
    "seq_len INTEGER NOT NULL, batch INTEGER NOT NULL, gen_tokens INTEGER NOT NULL, phase TEXT NOT NULL, "
    "metric TEXT NOT NULL, value REAL, unit TEXT NOT NULL, method TEXT NOT NULL, repeats INTEGER NOT NULL, "
    "min REAL, max REAL, notes TEXT NOT NULL)",
    "CREATE INDEX results_series ON results (model, device_name, seq_len, batch, gen_tokens, phase, metric)",
    "CREATE TABLE commits (sha TEXT PRIMARY KEY, ord INTEGER NOT NULL, date TEXT)",
]


class HistoryError(Exception):
    """Bad input or a database that is not ours: one line naming the file (exit 2)."""


def _int(text, column, path, line):
    try:
        v = int(text)
    except ValueError:
        raise HistoryError("%s:%d: column %s is not an integer: %r" % (path, line, column, text[:40]))
    if v < 0:
        raise HistoryError("%s:%d: column %s is negative" % (path, line, column))
    return v


def _float(text, column, path, line):
    if text == "":
        return None
    try:
        v = float(text)
    except ValueError:
        raise HistoryError("%s:%d: column %s is not a number: %r" % (path, line, column, text[:40]))
    if v != v or v in (float("inf"), float("-inf")):
        raise HistoryError("%s:%d: column %s is not finite" % (path, line, column))
    return v


def read_rows(path, data):
    """Every row of one result CSV (reports/SCHEMA.md) as a dict, exactly as written (no de-duplication);
    HistoryError naming the file and line for anything else."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HistoryError("%s:%d: not UTF-8 text, so not a result CSV" % (path, data[:exc.start].count(b"\n") + 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    try:
        header = next(reader, None)
        if header is None or [h.strip() for h in header] != COLUMNS:
            raise HistoryError("%s:1: not a result CSV (header must be exactly `%s`)" % (path, ",".join(COLUMNS)))
        prev = reader.line_num
        for rec in reader:
            line, prev = prev + 1, reader.line_num
            if not rec or all(not x.strip() for x in rec):
                continue
            if len(rec) != len(COLUMNS):
                raise HistoryError("%s:%d: %d fields, a result row has %d" % (path, line, len(rec), len(COLUMNS)))
            r = dict(zip(COLUMNS, rec))
            for k in ("seq_len", "batch", "gen_tokens"):
                r[k] = _int(r[k].strip(), k, path, line)
            r["repeats"] = _int(r["repeats"].strip() or "0", "repeats", path, line)
            for k in ("value", "min", "max"):
                r[k] = _float(r[k].strip(), k, path, line)
            for k in ("device", "device_name", "model", "phase", "metric", "method"):
                if not r[k].strip():
                    raise HistoryError("%s:%d: column %s is empty" % (path, line, k))
            r["line"] = line
            rows.append(r)
    except csv.Error as exc:
        raise HistoryError("%s:%d: malformed CSV: %s" % (path, reader.line_num, exc))
    return rows


class Store(object):
    """One history database (SQLite file)."""

    def __init__(self, path, create=True):
        self.path = path
        exists = os.path.exists(path)
        if exists and os.path.isdir(path):
            raise HistoryError("%s: is a folder, not a history database" % path)
        if not exists and not create:
            raise HistoryError("%s: no such history database (yoco history ingest creates it)" % path)
        if exists:
            with open(path, "rb") as f:
                head = f.read(16)
            if head and head != b"SQLite format 3\x00":
                raise HistoryError("%s: not a SQLite database, so not a history database (left as it is)" % path)
        try:
            self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
            self.db.execute("PRAGMA busy_timeout = 60000")
            tables = set(r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        except sqlite3.DatabaseError as exc:
            raise HistoryError("%s: not a usable SQLite database (%s); left as it is" % (path, exc))
        if not tables:
            self._create()
        elif "meta" not in tables:
            raise HistoryError("%s: a SQLite database, but not a yoco history (no meta table); left as it is" % path)
        else:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None or row[0] != str(SCHEMA_VERSION):
                raise HistoryError("%s: history schema version %s, this code reads %d; left as it is"
                                   % (path, row[0] if row else "missing", SCHEMA_VERSION))

    def _create(self):
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have created it meanwhile.
            if self.db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone()[0] == 0:
                for stmt in _SCHEMA:
                    self.db.execute(stmt)
                self.db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def close(self):
        self.db.close()

    def ingest(self, path, commit=None, date=None):
        """Adds one result CSV; returns the rows added (0 when this content is already in). One transaction:
        a process killed mid-ingest leaves the store as it was."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise HistoryError("%s: cannot read: %s" % (path, exc.strerror))
        digest = hashlib.sha256(data).hexdigest()
        if commit or date:
            digest = hashlib.sha256((digest + "|" + (commit or "") + "|" + (date or "")).encode()).hexdigest()
        rows = read_rows(path, data)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if self.db.execute("SELECT 1 FROM files WHERE sha256 = ?", (digest,)).fetchone():
                self.db.execute("ROLLBACK")
                return 0
            cur = self.db.execute("INSERT INTO files (sha256, path, rows, commit_override, date_override) "
                                  "VALUES (?, ?, ?, ?, ?)", (digest, path, len(rows), commit, date))
            fid = cur.lastrowid
            self.db.executemany(
                "INSERT INTO results (file_id, line, git_sha, timestamp, host, device, device_name, driver, model, "
                "seq_len, batch, gen_tokens, phase, metric, value, unit, method, repeats, min, max, notes) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(fid, r["line"], commit or r["git_sha"], date or r["timestamp"], r["host"], r["device"],
                  r["device_name"], r["driver"], r["model"], r["seq_len"], r["batch"], r["gen_tokens"], r["phase"],
                  r["metric"], r["value"], r["unit"], r["method"], r["repeats"], r["min"], r["max"], r["notes"])
                 for r in rows])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return len(rows)

    def set_commit_order(self, ordered):
        """[(sha, date)] oldest first (from git): the order series follow; others fall back to time."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("DELETE FROM commits")
            self.db.executemany("INSERT INTO commits (sha, ord, date) VALUES (?, ?, ?)",
                                [(s, i, d) for i, (s, d) in enumerate(ordered)])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def rows(self, where="", args=()):
        """Result rows as dicts in series order: by the commit's place in git's history where known, then time."""
        q = ("SELECT r.git_sha, r.timestamp, r.host, r.device, r.device_name, r.driver, r.model, r.seq_len, r.batch, "
             "r.gen_tokens, r.phase, r.metric, r.value, r.unit, r.method, r.repeats, r.min, r.max, r.notes "
             "FROM results r LEFT JOIN commits c ON c.sha = r.git_sha " + where +
             " ORDER BY c.ord IS NULL, c.ord, r.timestamp, r.file_id, r.line")
        return [dict(zip(COLUMNS, rec)) for rec in self.db.execute(q, args)]

    def counts(self):
        return (self.db.execute("SELECT count(*) FROM files").fetchone()[0],
                self.db.execute("SELECT count(*) FROM results").fetchone()[0])
