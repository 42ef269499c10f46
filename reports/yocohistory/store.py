"""The history store on SQLite: schema version 1, ingest that is idempotent (a file's content hash is kept)
and atomic (one transaction per file; WAL mode, so that two ingests at once both land), parameterised queries
only. A database file that is not ours (or not SQLite) is refused and never written."""
import bisect
import csv
import datetime
import hashlib
import io
import math
import os
import sqlite3

SCHEMA_VERSION = 1
# PostgreSQL's advisory lock of the history's writers (one per database): any constant, this one "yocohist" in ASCII.
ADVISORY_LOCK = 0x796F636F68697374
# Notes may be long (a failure's message, a kernel's parameters): no field is too large to keep.
csv.field_size_limit(1 << 30)
COLUMNS = ("git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,"
           "phase,metric,value,unit,method,repeats,min,max,notes").split(",")
SERIES_KEY = ("model", "device_name", "seq_len", "batch", "gen_tokens", "phase", "metric")

_SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE files (id {id}, sha256 TEXT NOT NULL UNIQUE, path TEXT NOT NULL, "
    "rows INTEGER NOT NULL, commit_override TEXT, date_override TEXT)",
    "CREATE TABLE results (id {id}, file_id INTEGER NOT NULL REFERENCES files(id), "
    "line INTEGER NOT NULL, git_sha TEXT NOT NULL, timestamp TEXT NOT NULL, host TEXT NOT NULL, "
    "device TEXT NOT NULL, device_name TEXT NOT NULL, driver TEXT NOT NULL, model TEXT NOT NULL, "
    "seq_len INTEGER NOT NULL, batch INTEGER NOT NULL, gen_tokens INTEGER NOT NULL, phase TEXT NOT NULL, "
    "metric TEXT NOT NULL, value {real}, unit TEXT NOT NULL, method TEXT NOT NULL, repeats INTEGER NOT NULL, "
    "min {real}, max {real}, notes TEXT NOT NULL)",
    "CREATE INDEX results_series ON results (model, device_name, seq_len, batch, gen_tokens, phase, metric)",
    "CREATE TABLE commits (sha TEXT PRIMARY KEY, ord INTEGER NOT NULL, date TEXT)",
]


def instant(text):
    """An ISO 8601 time as seconds since the epoch, UTC (a time with no zone read as UTC); -inf when it is not one
    (sorted first, then by its text)."""
    try:
        t = datetime.datetime.fromisoformat((text or "").strip().replace("Z", "+00:00"))
    except ValueError:
        return -math.inf
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t.timestamp()


class HistoryError(Exception):
    """Bad input or a database that is not ours: one line naming the file (exit 2)."""


def _int(text, column, path, line):
    try:
        v = int(text)
    except ValueError:
        raise HistoryError("%s:%d: column %s is not an integer: %r" % (path, line, column, text[:40]))
    if v < 0:
        raise HistoryError("%s:%d: column %s is negative" % (path, line, column))
    if v >= 1 << 63:  # the databases' INTEGER is 64-bit: past it sqlite3 raised OverflowError mid-ingest
        raise HistoryError("%s:%d: column %s is out of range: %r" % (path, line, column, text[:40]))
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
    if text and not text.endswith("\n"):
        # Every writer ends each row with a line break: a file without the last one was cut short (a copy or a
        # transfer interrupted), maybe inside the notes, whose words are read back; said first, since a cut row
        # has too few fields too. As the C++ reader words it.
        raise HistoryError("%s:%d: the file does not end with a line break: its last row is cut short "
                           "(reports/SCHEMA.md)" % (path, text.count("\n") + 1))
    # strict: a quoted field left open to the end of the file (cut short) or text after a closing quote is an
    # error, not a field silently cut or mangled.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows = []
    prev = 0
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
            if not r["model"].strip() and r["phase"].strip() == "ceiling":
                # A row of no model, from before the `-` convention (reports/SCHEMA.md; run-02's kernels.csv of
                # 2026-11-23 leaves it empty): read as it is written today, so its series joins the later runs'.
                r["model"] = "-"
            for k in ("device", "device_name", "model", "phase", "metric", "method"):
                if not r[k].strip():
                    raise HistoryError("%s:%d: column %s is empty" % (path, line, k))
            r["line"] = line
            rows.append(r)
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):  # the C++ reader's words (bench/results/result_csv.cpp)
            raise HistoryError("%s:%d: a quoted field is not closed: the file ends inside it, so its last row is cut "
                               "short (reports/SCHEMA.md)" % (path, prev + 1))
        raise HistoryError("%s:%d: malformed CSV: %s" % (path, reader.line_num, exc))
    return rows


def read_file(path, commit=None, date=None):
    """One result CSV read and checked, not yet added: (path, content hash, rows, commit, date) for Store.add."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise HistoryError("%s: cannot read: %s" % (path, exc.strerror))
    digest = hashlib.sha256(data).hexdigest()
    if commit or date:
        digest = hashlib.sha256((digest + "|" + (commit or "") + "|" + (date or "")).encode()).hexdigest()
    return path, digest, read_rows(path, data), commit, date


class _Sqlite(object):
    """SQLite: one file; WAL so that readers and a writer share it; BEGIN IMMEDIATE so that two writers queue."""
    name = "sqlite"
    id_type, real_type, begin = "INTEGER PRIMARY KEY", "REAL", "BEGIN IMMEDIATE"

    def __init__(self, path, create):
        self.where = path
        if path in ("", ":memory:"):  # sqlite3 would hold it in memory or a temporary file, gone at close
            raise HistoryError("--db %r: SQLite's name for a database that vanishes when the command ends; give a "
                               "file path or a postgresql:// URL" % path)
        exists = os.path.exists(path)
        if exists and os.path.isdir(path):
            raise HistoryError("%s: is a folder, not a history database" % path)
        if not exists and not create:
            raise HistoryError("%s: no such history database (yoco history ingest creates it)" % path)
        folder = os.path.dirname(path) or "."
        if not exists and not os.path.isdir(folder):  # sqlite3 said only "unable to open database file"
            raise HistoryError("%s: cannot create the history: no folder %s" % (path, folder))
        if not exists and not os.access(folder, os.W_OK):  # was "not a usable SQLite database"
            raise HistoryError("%s: cannot create the history: the folder %s is not writable by this user"
                               % (path, folder))
        if exists and create and not os.path.isdir(path) and not os.access(path, os.W_OK):
            # ingest into a read-only history was a traceback ("attempt to write a readonly database")
            raise HistoryError("%s: the history is read-only for this user, so ingest cannot add to it; left as it is"
                               % path)
        if exists and not create and os.path.getsize(path) == 0:  # SQLite would take it for a new database
            raise HistoryError("%s: empty file, not a history database (yoco history ingest creates one); left as it is"
                               % path)
        if exists:
            with open(path, "rb") as f:
                head = f.read(16)
            if head and head != b"SQLite format 3\x00":
                raise HistoryError("%s: not a SQLite database, so not a history database (left as it is)" % path)
        try:
            self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
            self.db.execute("PRAGMA busy_timeout = 60000")
            self.tables = set(r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        except sqlite3.DatabaseError as exc:
            # The history runs in WAL mode, where even a reader writes its -wal and -shm files beside the database:
            # a readable database in a folder this user cannot write is unusable, and "readonly database" alone
            # would not say why.
            if exists and not os.access(folder, os.W_OK):
                raise HistoryError("%s: cannot be opened: SQLite's WAL mode needs to write beside it, and the folder %s "
                                   "is not writable by this user (copy the database somewhere writable)" % (path, folder))
            raise HistoryError("%s: not a usable SQLite database (%s); left as it is" % (path, exc))

    def q(self, sql):
        return sql

    def before_create(self):
        # Switching to WAL needs the file to itself, and busy_timeout does not cover it: two first ingests at
        # once take turns here.
        import time
        for attempt in range(600):
            try:
                self.db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 599:
                    raise HistoryError("%s: cannot open for writing (%s)" % (self.where, exc))
                time.sleep(0.1)

    def execute(self, sql, args=()):
        return self.db.execute(sql, args)

    def executemany(self, sql, rows):
        self.db.executemany(sql, rows)

    def insert_id(self, sql, args):
        return self.db.execute(sql, args).lastrowid

    def has_table(self, name):
        return self.db.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0] > 0

    def lock(self):
        pass  # BEGIN IMMEDIATE took the database's one write lock


class _Postgres(object):
    """PostgreSQL, chosen by a postgresql:// URL; the password comes from PGPASSWORD or a pgpass file (libpq's
    own rules), never from the URL: a URL that carries one is refused without being echoed."""
    name = "postgresql"
    id_type, real_type, begin = "BIGSERIAL PRIMARY KEY", "DOUBLE PRECISION", "BEGIN"

    def __init__(self, url, create):
        from urllib.parse import urlsplit
        try:
            parts = urlsplit(url)
            shown = "%s://%s%s%s" % (parts.scheme, (parts.username + "@") if parts.username else "",
                                     parts.hostname or "", (":%d" % parts.port) if parts.port else "") + parts.path
        except ValueError as exc:  # a port out of range or not a number, a bracket left open: not echoed (a password)
            raise HistoryError("--db: not a valid postgresql:// URL (%s)" % exc)
        self.where = shown
        if parts.password is not None:
            raise HistoryError("%s: a password in the URL is refused (it would show in process lists and logs); "
                               "give it in PGPASSWORD or a pgpass file" % shown)
        try:
            import psycopg2
        except ImportError:
            raise HistoryError("%s: psycopg2 is missing (Debian's python3-psycopg2; scripts/install-deps.sh)" % shown)
        try:
            self.db = psycopg2.connect(url)
        except psycopg2.Error as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise HistoryError("%s: cannot connect: %s" % (shown, msg))
        self.db.autocommit = True
        self.tables = set(r[0] for r in self.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()").fetchall())

    def q(self, sql):
        return sql.replace("?", "%s")

    def before_create(self):
        pass

    def execute(self, sql, args=()):
        cur = self.db.cursor()
        cur.execute(self.q(sql), args)
        return cur

    def executemany(self, sql, rows):
        from psycopg2.extras import execute_batch
        execute_batch(self.db.cursor(), self.q(sql), rows, page_size=1000)

    def insert_id(self, sql, args):
        return self.execute(sql + " RETURNING id", args).fetchone()[0]

    def has_table(self, name):
        return self.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
                            "AND table_name = ?", (name,)).fetchone()[0] > 0

    def lock(self):
        # PostgreSQL's BEGIN takes no lock: two ingests that each read which rows are in, then insert the others,
        # both inserted the rows they share (6 ingests at once of near-identical files: 3342 rows, not 562). This
        # lock, held to the transaction's end, makes one writer at a time, as SQLite's BEGIN IMMEDIATE does.
        self.execute("SELECT pg_advisory_xact_lock(?)", (ADVISORY_LOCK,))

    def close(self):
        self.db.close()


class Store(object):
    """One history database: a SQLite file path, or a postgresql:// URL."""

    def __init__(self, path, create=True):
        self.path = path
        self.last_was_in = False  # whether the last ingest found its file already in
        self.last_repeated = 0  # the rows of the last ingest's file already in from another file
        self.be = _Postgres(path, create) if path.startswith(("postgresql://", "postgres://")) else _Sqlite(path, create)
        tables = self.be.tables
        if not tables and not create:
            # A read made the schema in any empty database it was pointed at (PostgreSQL's own `postgres` database
            # included), and then found an empty history there: written to, and nothing said.
            self.be.db.close()
            raise HistoryError("%s: a database with no history in it (no table at all: yoco history ingest makes one); "
                               "left as it is" % self.be.where)
        if not tables:
            self._create()
        elif "meta" not in tables:
            raise HistoryError("%s: a database, but not a yoco history (no meta table); left as it is" % self.be.where)
        else:
            row = self.be.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None or row[0] != str(SCHEMA_VERSION):
                raise HistoryError("%s: history schema version %s, this code reads %d; left as it is"
                                   % (self.be.where, row[0] if row else "missing", SCHEMA_VERSION))

    @property
    def db(self):  # the SQLite connection (tests and tools that read it directly)
        return self.be.db

    def _tx(self):
        try:
            self.be.execute(self.be.begin)
        except sqlite3.OperationalError as exc:  # read-only all the same (a read-only mount): one line, exit 2
            if "readonly" not in str(exc):
                raise
            raise HistoryError("%s: cannot write the history (%s); left as it is" % (self.be.where, exc))

    def _create(self):
        self.be.before_create()
        self._tx()
        try:
            # First ingests at once into an empty PostgreSQL database each created the tables: all but one failed
            # (UniqueViolation on pg_type, DuplicateTable). Under the writers' lock the second finds them made.
            self.be.lock()
            if not self.be.has_table("meta"):  # another process may have created it meanwhile
                for stmt in _SCHEMA:
                    self.be.execute(stmt.format(id=self.be.id_type, real=self.be.real_type))
                self.be.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.be.execute("COMMIT")
        except BaseException:
            self.be.execute("ROLLBACK")
            raise

    def close(self):
        self.be.db.close()

    def ingest(self, path, commit=None, date=None):
        """Adds one result CSV; returns the rows added (0 when this content is already in). A row already in,
        every field equal (from another file: a sweep's file that grew under --resume, a run's CSV and its copy),
        is not added again (counted in last_repeated). One transaction: a process killed mid-ingest leaves the
        store as it was."""
        return self.add(read_file(path, commit, date))

    def add(self, prepared):
        """Adds a file that read_file read (ingest, in two steps: a file refused never opens the database)."""
        path, digest, rows, commit, date = prepared
        self.last_was_in = False
        self.last_repeated = 0
        self._tx()
        try:
            self.be.lock()
            if self.be.execute("SELECT 1 FROM files WHERE sha256 = ?", (digest,)).fetchone():
                self.be.execute("ROLLBACK")
                self.last_was_in = True
                return 0
            # A run's rows share its git_sha and timestamp: the rows already in are found by those.
            stored = lambda r: (commit or r["git_sha"], date or r["timestamp"]) + tuple(r[k] for k in COLUMNS[2:])  # noqa: E731
            there = set()
            for run in {stored(r)[:2] for r in rows}:
                there.update(tuple(e) for e in self.be.execute(
                    "SELECT " + ", ".join(COLUMNS) + " FROM results WHERE git_sha = ? AND timestamp = ?", run).fetchall())
            fresh = [r for r in rows if stored(r) not in there]
            self.last_repeated = len(rows) - len(fresh)
            rows = fresh
            fid = self.be.insert_id("INSERT INTO files (sha256, path, rows, commit_override, date_override) "
                                    "VALUES (?, ?, ?, ?, ?)", (digest, path, len(rows), commit, date))
            self.be.executemany(
                "INSERT INTO results (file_id, line, git_sha, timestamp, host, device, device_name, driver, model, "
                "seq_len, batch, gen_tokens, phase, metric, value, unit, method, repeats, min, max, notes) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(fid, r["line"], commit or r["git_sha"], date or r["timestamp"], r["host"], r["device"],
                  r["device_name"], r["driver"], r["model"], r["seq_len"], r["batch"], r["gen_tokens"], r["phase"],
                  r["metric"], r["value"], r["unit"], r["method"], r["repeats"], r["min"], r["max"], r["notes"])
                 for r in rows])
            self.be.execute("COMMIT")
        except BaseException as exc:
            self.be.execute("ROLLBACK")
            if type(exc).__name__ == "UniqueViolation":  # the same file, ingested by another process meanwhile
                self.last_was_in = True
                return 0
            raise
        return len(rows)

    def set_commit_order(self, ordered):
        """[(sha, date)] oldest first (from git): merged into the order already known, never replacing it. A shallow
        clone (actions/checkout's default depth 1) lists its one commit: replacing the order with that made the
        newest commit the only one known, sorted first, and `check` judged an old run. Commits git lists now take
        its order; those it no longer lists keep their place after their predecessor in the earlier order."""
        self._tx()
        try:
            self.be.lock()
            earlier = self.be.execute("SELECT sha, date FROM commits ORDER BY ord").fetchall()
            merged = [(s, d) for s, d in ordered]
            place = {s: i for i, (s, _d) in enumerate(merged)}
            prev = None
            for s, d in earlier:
                if s not in place:
                    at = place[prev] + 1 if prev is not None else 0
                    merged.insert(at, (s, d))
                    place = {x: i for i, (x, _d) in enumerate(merged)}
                prev = s
            self.be.execute("DELETE FROM commits")
            self.be.executemany("INSERT INTO commits (sha, ord, date) VALUES (?, ?, ?)",
                                [(s, i, d) for i, (s, d) in enumerate(merged)])
            self.be.execute("COMMIT")
        except BaseException:
            self.be.execute("ROLLBACK")
            raise

    def distinct_shas(self):
        return [r[0] for r in self.be.execute("SELECT DISTINCT git_sha FROM results").fetchall()]

    def commit_order(self):
        return [r[0] for r in self.be.execute("SELECT sha FROM commits ORDER BY ord").fetchall()]

    def rows(self, where="", args=()):
        """Result rows as dicts in series order: by the commit's place in git's history where known; a commit git
        does not know goes after the last known commit dated before its run (times as UTC instants, so that git's
        +01:00 and a row's Z compare); within a commit by time, then ingest order. Each dict also has "file_id"
        (ingest order: a later file, a higher id)."""
        q = ("SELECT r.git_sha, r.timestamp, r.host, r.device, r.device_name, r.driver, r.model, r.seq_len, r.batch, "
             "r.gen_tokens, r.phase, r.metric, r.value, r.unit, r.method, r.repeats, r.min, r.max, r.notes, "
             "r.file_id, r.line FROM results r " + where)
        recs = self.be.execute(q, args).fetchall()
        known = self.be.execute("SELECT sha, ord, date FROM commits ORDER BY ord").fetchall()
        rank = {s: i for i, (s, _o, _d) in enumerate(known)}
        # Known commits' dates as a non-decreasing sequence (branches' dates need not follow git's order).
        dates, top = [], -math.inf
        for _s, _o, d in known:
            top = max(top, instant(d))
            dates.append(top)
        keyed = []
        for rec in recs:
            t = instant(rec[1])
            i = rank.get(rec[0])
            slot = (i, 0) if i is not None else (bisect.bisect_right(dates, t) - 1, 1)
            keyed.append((slot, t, rec[1], rec[19], rec[20], rec))
        keyed.sort(key=lambda k: k[:5])
        out = []
        for k in keyed:
            d = dict(zip(COLUMNS, k[5]))
            d["file_id"] = k[5][19]
            out.append(d)
        return out

    def counts(self):
        return (self.be.execute("SELECT count(*) FROM files").fetchone()[0],
                self.be.execute("SELECT count(*) FROM results").fetchone()[0])
