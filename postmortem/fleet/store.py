"""The SQLite store of a fleet's cases: schema (versioned, migrated forward), writes, reads, export.

One writer (the scanning process) commits each batch of results in one
transaction, in WAL mode: a scan killed at any moment leaves the store as of its
last commit, and the next scan goes on from there. Tables:

- `cases`: one row per distinct case content (id = first 16 hex of its digest): verdict, bucket keys, time, host.
- `locations`: where each case was seen (path -> case id) with the cheap change key of its files.
- `findings`: every finding of a case, best first; `layer` is its cause's layer (hardware, driver/hw, ...).
- `events`: the events worth keeping: evidence of findings, and the suspects of cases nothing explained.
- `facts`: environment facts (host, driver_version, cuda_version, torch_version, gpu_uuid, ...), one row per value.
- `gpus`: each GPU a case names: host, PCI address, UUID, board serial (when an input gives it), model.
- `gpu_faults`: the hardware causes whose evidence points at one of those GPUs.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..names import escaped_bytes
from .analysis import CaseResult

if TYPE_CHECKING:
    import pandas


def bucket_key_sql(row: str = "") -> tuple[str, ...]:
    """fleet/buckets.bucket_key as SQL over a cases row (`row` its prefix: "", "NEW.", "OLD."), as migration 2 indexes
    and summarises it: the queries of fleet/buckets use these very expressions, so SQLite matches them to the index.
    Frozen with migration 2: a new key is a new migration and a new function."""
    stacked = (f"({row}cause IN ('native-crash', 'unknown') AND {row}stack_signature IS NOT NULL "
               f"AND {row}stack_signature != '')")
    return (f"{row}cause",
            f"CASE WHEN {row}cause = 'unknown' AND NOT {stacked} THEN NULL ELSE {row}signature END",
            f"CASE WHEN {stacked} THEN 'stack' WHEN {row}cause = 'unknown' AND {row}fingerprint IS NOT NULL "
            f"AND {row}fingerprint != '' THEN 'fingerprint' END",
            f"CASE WHEN {stacked} THEN {row}stack_signature WHEN {row}cause = 'unknown' THEN {row}fingerprint END")


def _bucket_summaries() -> str:
    """Migration 2, frozen like every applied migration: the bucket key of a case (fleet/buckets.bucket_key) as SQL,
    an index on it (with time and host: a bucket's first and last case are an index seek), and two summary tables kept
    exact by triggers as cases are written, re-analysed or dropped (cases per bucket, cases per bucket and host), so
    `buckets` and the report read a few hundred rows, not every case. The summaries hold '' for a key part that is
    NULL (a primary key must not be NULL). The trend counts cases per hour and cause in an index of its own; the bad
    nodes find the hardware findings by layer."""
    def kept(row: str) -> list[str]:
        return [f"COALESCE({part}, '')" for part in bucket_key_sql(row)]

    def summary(row: str) -> str:
        return ", ".join(kept(row))

    where = " AND ".join(f"{name} = {value}" for name, value in zip(("cause", "signature", "kind", "detail"),
                                                                      kept("OLD.")))
    add = (f"INSERT INTO bucket_counts SELECT {summary('NEW.')}, 1 WHERE NEW.status = 'ok' "
           "ON CONFLICT DO UPDATE SET cases = cases + 1;\n"
           f"INSERT INTO bucket_hosts SELECT {summary('NEW.')}, NEW.host, 1 WHERE NEW.status = 'ok' "
           "AND NEW.host IS NOT NULL AND NEW.host != '' ON CONFLICT DO UPDATE SET cases = cases + 1;\n")
    drop = (f"UPDATE bucket_counts SET cases = cases - 1 WHERE OLD.status = 'ok' AND {where};\n"
            f"DELETE FROM bucket_counts WHERE cases <= 0 AND {where};\n"
            f"UPDATE bucket_hosts SET cases = cases - 1 WHERE OLD.status = 'ok' AND host = OLD.host AND {where};\n"
            f"DELETE FROM bucket_hosts WHERE cases <= 0 AND host = OLD.host AND {where};\n")
    plain = bucket_key_sql()
    return f"""
CREATE INDEX cases_bucket_key ON cases({", ".join(plain)}, time, host) WHERE status = 'ok';
CREATE INDEX cases_hour ON cases(substr(time, 1, 13), cause) WHERE status = 'ok' AND time IS NOT NULL;
CREATE INDEX findings_layer ON findings(layer, case_id);
CREATE TABLE bucket_counts (cause TEXT NOT NULL, signature TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL,
    cases INTEGER NOT NULL, PRIMARY KEY (cause, signature, kind, detail)) WITHOUT ROWID;
CREATE TABLE bucket_hosts (cause TEXT NOT NULL, signature TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL,
    host TEXT NOT NULL, cases INTEGER NOT NULL, PRIMARY KEY (cause, signature, kind, detail, host)) WITHOUT ROWID;
INSERT INTO bucket_counts SELECT {summary("")}, COUNT(*) FROM cases WHERE status = 'ok' GROUP BY 1, 2, 3, 4;
INSERT INTO bucket_hosts SELECT {summary("")}, host, COUNT(*) FROM cases WHERE status = 'ok' AND host IS NOT NULL
    AND host != '' GROUP BY 1, 2, 3, 4, 5;
CREATE TRIGGER bucket_case_added AFTER INSERT ON cases BEGIN
{add}END;
CREATE TRIGGER bucket_case_dropped AFTER DELETE ON cases BEGIN
{drop}END;
CREATE TRIGGER bucket_case_changed AFTER UPDATE ON cases BEGIN
{drop}{add}END;
{_version_summaries()}"""


def _version_summaries() -> str:
    """Part of migration 2: the cases per version fact, value and cause (fact_counts) and per fact and cause
    (fact_cases: a case with two values of one fact counts once), for the version facts of fleet.VERSION_FACTS as
    they were then, kept by triggers. A case dropped is taken off before its facts go (SQLite deletes them after it,
    when the case is no longer there to say its cause); a fact row repeated within a case counts once."""
    names = "('driver_version', 'cuda_version', 'torch_version', 'framework', 'kernel_version')"
    cause = "(SELECT cause FROM cases WHERE id = {r}.case_id AND status = 'ok')"
    same_value = "case_id = {r}.case_id AND name = {r}.name AND value = {r}.value"
    same_name = "case_id = {r}.case_id AND name = {r}.name"

    def counted(table: str, columns: str, values: str, sign: str) -> str:
        step = "cases + 1" if sign == "+" else "cases - 1"
        if sign == "+":
            return (f"INSERT INTO {table} SELECT {values}, 1 WHERE {{cause}} IS NOT NULL {{guard}} "
                    f"ON CONFLICT DO UPDATE SET cases = {step};\n")
        return (f"UPDATE {table} SET cases = {step} WHERE ({columns}) = ({values}) {{guard}};\n"
                f"DELETE FROM {table} WHERE cases <= 0 AND ({columns}) = ({values});\n")

    def fact_rows(sign: str, row: str, when_value: str, when_name: str, who: str) -> str:
        c = who.format(r=row)
        return (counted("fact_counts", "name, value, cause", f"{row}.name, {row}.value, {c}", sign)
                .format(cause=c, guard=when_value)
                + counted("fact_cases", "name, cause", f"{row}.name, {c}", sign).format(cause=c, guard=when_name))

    def alone(same: str, row: str) -> str:
        """No other row of the case says it (an added row is there already; a dropped one is gone)."""
        other = " AND rowid != NEW.rowid" if row == "NEW" else ""
        return f"AND {row}.name IN {names} AND NOT EXISTS (SELECT 1 FROM facts WHERE {same.format(r=row)}{other})"

    added = fact_rows("+", "NEW", alone(same_value, "NEW"), alone(same_name, "NEW"), cause)
    dropped = fact_rows("-", "OLD", alone(same_value, "OLD"), alone(same_name, "OLD"), cause)
    own = f"SELECT DISTINCT name, value FROM facts WHERE case_id = {{r}}.id AND name IN {names}"
    own_names = f"SELECT DISTINCT name FROM facts WHERE case_id = {{r}}.id AND name IN {names}"

    def moved(row: str, sign: str) -> str:
        step = "cases + 1" if sign == "+" else "cases - 1"
        if sign == "+":
            return (f"INSERT INTO fact_counts SELECT name, value, {row}.cause, 1 FROM ({own.format(r=row)}) "
                    f"WHERE {row}.status = 'ok' ON CONFLICT DO UPDATE SET cases = {step};\n"
                    f"INSERT INTO fact_cases SELECT name, {row}.cause, 1 FROM ({own_names.format(r=row)}) "
                    f"WHERE {row}.status = 'ok' ON CONFLICT DO UPDATE SET cases = {step};\n")
        return (f"UPDATE fact_counts SET cases = {step} WHERE {row}.status = 'ok' AND cause = {row}.cause "
                f"AND (name, value) IN ({own.format(r=row)});\n"
                f"UPDATE fact_cases SET cases = {step} WHERE {row}.status = 'ok' AND cause = {row}.cause "
                f"AND name IN ({own_names.format(r=row)});\n"
                "DELETE FROM fact_counts WHERE cases <= 0;\nDELETE FROM fact_cases WHERE cases <= 0;\n")

    return f"""CREATE TABLE fact_counts (name TEXT NOT NULL, value TEXT NOT NULL, cause TEXT NOT NULL,
    cases INTEGER NOT NULL, PRIMARY KEY (name, value, cause)) WITHOUT ROWID;
CREATE TABLE fact_cases (name TEXT NOT NULL, cause TEXT NOT NULL, cases INTEGER NOT NULL,
    PRIMARY KEY (name, cause)) WITHOUT ROWID;
INSERT INTO fact_counts SELECT f.name, f.value, c.cause, COUNT(DISTINCT c.id) FROM facts f JOIN cases c
    ON c.id = f.case_id WHERE c.status = 'ok' AND f.name IN {names} GROUP BY 1, 2, 3;
INSERT INTO fact_cases SELECT f.name, c.cause, COUNT(DISTINCT c.id) FROM facts f JOIN cases c
    ON c.id = f.case_id WHERE c.status = 'ok' AND f.name IN {names} GROUP BY 1, 2;
CREATE TRIGGER fact_added AFTER INSERT ON facts BEGIN
{added}END;
CREATE TRIGGER fact_dropped AFTER DELETE ON facts BEGIN
{dropped}END;
CREATE TRIGGER fact_case_dropped BEFORE DELETE ON cases BEGIN
{moved("OLD", "-")}END;
CREATE TRIGGER fact_case_changed AFTER UPDATE OF cause, status ON cases BEGIN
{moved("OLD", "-")}{moved("NEW", "+")}END
"""


MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("initial schema", """
CREATE TABLE cases (
    id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, status TEXT NOT NULL, diagnostic TEXT,
    cause TEXT, signature TEXT, severity TEXT, confidence REAL, title TEXT,
    fingerprint TEXT, stack_signature TEXT, time TEXT, time_source TEXT, host TEXT,
    inputs INTEGER, events INTEGER, input_diagnostics INTEGER,
    tool_version TEXT, signatures_version TEXT, analysed_at TEXT NOT NULL);
CREATE TABLE locations (
    path TEXT PRIMARY KEY, stat_key TEXT NOT NULL,
    case_id TEXT NOT NULL REFERENCES cases(id) ON DELETE CASCADE, seen_at TEXT NOT NULL);
CREATE TABLE findings (
    case_id TEXT NOT NULL REFERENCES cases(id) ON DELETE CASCADE, rank INTEGER NOT NULL,
    signature TEXT, cause TEXT, layer TEXT, severity TEXT, confidence REAL, title TEXT, count INTEGER,
    first_seen TEXT, last_seen TEXT, consequence_of TEXT, PRIMARY KEY (case_id, rank));
CREATE TABLE events (
    case_id TEXT NOT NULL REFERENCES cases(id) ON DELETE CASCADE, event_id TEXT NOT NULL, role TEXT,
    kind TEXT, time TEXT, path TEXT, line INTEGER, text TEXT, fingerprint TEXT, count INTEGER, fields TEXT,
    PRIMARY KEY (case_id, event_id));
CREATE TABLE facts (
    case_id TEXT NOT NULL REFERENCES cases(id) ON DELETE CASCADE, name TEXT NOT NULL, value TEXT);
CREATE TABLE gpus (
    case_id TEXT NOT NULL REFERENCES cases(id) ON DELETE CASCADE, host TEXT, pci TEXT, uuid TEXT, serial TEXT,
    name TEXT);
CREATE TABLE gpu_faults (
    case_id TEXT NOT NULL REFERENCES cases(id) ON DELETE CASCADE, host TEXT, pci TEXT, uuid TEXT, serial TEXT,
    cause TEXT, signature TEXT);
CREATE INDEX locations_case ON locations(case_id);
CREATE INDEX findings_cause ON findings(cause);
CREATE INDEX events_case ON events(case_id);
CREATE INDEX facts_case ON facts(case_id, name);
CREATE INDEX gpus_case ON gpus(case_id);
CREATE INDEX gpu_faults_case ON gpu_faults(case_id);
CREATE INDEX cases_bucket ON cases(cause, signature);
"""),
    ("bucket summaries", _bucket_summaries()),
)
"""Schema changes in order; version N is MIGRATIONS[N-1]. Never edit an applied one: append a new one. Version 2 indexes
the bucket key (fleet/buckets.KEY, the same expressions: SQLite matches them by structure, not by spelling), so the
buckets are one GROUP BY over the index."""

TABLES = ("cases", "locations", "findings", "events", "facts", "gpus", "gpu_faults")
CHILD_TABLES = ("findings", "events", "facts", "gpus", "gpu_faults")


APPLICATION_ID = 0x504D5254
"""`PRAGMA application_id` of a postmortem store ("PMRT"): what tells it from another program's SQLite file."""
OWN_TABLES = frozenset({"schema_migrations", "cases", "locations"})
"""Tables a store made before APPLICATION_ID was stamped holds: such a store is still taken as ours."""


class StoreError(click.ClickException):
    """The store cannot be opened (another program's database, a damaged file) or is newer than this version
    of postmortem understands: one sentence, exit 2, whichever command met it."""

    exit_code = 2


def connect(path: str | Path, readonly: bool = False) -> sqlite3.Connection:
    """A connection with the schema migrated to the newest version (read-only connections are only checked)."""
    path = Path(path)
    if readonly and not path.exists():
        raise StoreError(f"{path}: no such store (create one with `postmortem scan DIR --db {path}`)")
    try:
        if readonly:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
        else:
            conn = sqlite3.connect(path, isolation_level=None, timeout=LOCK_SECONDS)
        _ours(conn, path, readonly)  # before anything is written: another program's file stays as it was
        if not readonly:
            _write_ahead_log(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        version = schema_version(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a postmortem store, or a damaged one ({exc})") from exc
    if version > len(MIGRATIONS):
        raise StoreError(f"{path}: schema version {version} is newer than this postmortem knows ({len(MIGRATIONS)})")
    if readonly:
        if version < len(MIGRATIONS):
            raise StoreError(f"{path}: schema version {version}; run `postmortem scan` once to migrate it")
        return conn
    try:
        migrate(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path}: cannot create or migrate the store ({exc})") from exc
    return conn


def _ours(conn: sqlite3.Connection, path: Path, readonly: bool) -> None:
    """Refuse (closing `conn`) a database that is not a postmortem store: one stamped APPLICATION_ID, one made
    before the stamp (OWN_TABLES), or an empty one. A writer stamps the latter two at once: an empty one before any
    table, so another process creating the same store meanwhile never sees our tables unstamped."""
    stamp, names = conn.execute("SELECT (SELECT application_id FROM pragma_application_id), group_concat(name, "
                                "char(0)) FROM sqlite_master WHERE type = 'table'").fetchone()  # one snapshot
    tables = set(names.split("\0")) if names else set()
    if stamp == APPLICATION_ID:
        return
    if stamp == 0 and (not tables or OWN_TABLES <= tables):
        if not readonly:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        return
    conn.close()
    held = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    raise StoreError(f"{path}: not a postmortem store (application id {stamp:#x}, tables {held or 'none'}); "
                     "it was left as it is: name a new file for --db")


@contextmanager
def guarded(path: str | Path) -> Iterator[None]:
    """SQLite's errors while a store is read or written (a damaged page shows only when it is read) as the
    StoreError naming it."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: the store cannot be read or written ({exc})") from exc


LOCK_SECONDS = 30.0
"""How long a writer waits for another (a second scan creating or migrating the same store) before giving up."""


def _write_ahead_log(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying: the switch needs an exclusive lock and SQLite answers "database is locked" at
    once, without its busy handler, while another process is creating the same fresh store."""
    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def schema_version(conn: sqlite3.Connection) -> int:
    """The newest applied migration, 0 for an empty database."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchone()
    if not exists:
        return 0
    return conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations not yet applied, each in its own transaction."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version "
                 "INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
    for version, (name, script) in enumerate(MIGRATIONS, 1):
        if version <= schema_version(conn):
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if version > schema_version(conn):  # asked again under the write lock: two scans creating one store
                for statement in _statements(script):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, _now()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _statements(script: str) -> list[str]:
    """A migration's statements, one by one (a trigger's body holds semicolons of its own: sqlite3 says where a
    statement is complete)."""
    found, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip().removesuffix(";"))
            pending = ""
    return [*found, pending.strip()] if pending.strip() else found


def _now() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


def seen_locations(conn: sqlite3.Connection) -> dict[str, str]:
    """path -> change key of every location already stored."""
    return dict(conn.execute("SELECT path, stat_key FROM locations"))


def known_digests(conn: sqlite3.Connection) -> frozenset[str]:
    """Digests of the cases already analysed (a moved or copied case is not analysed again)."""
    return frozenset(row[0] for row in conn.execute("SELECT digest FROM cases"))


def write(conn: sqlite3.Connection, results: Iterable[CaseResult]) -> None:
    """Store a batch of results in one transaction: all of it or none of it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for result in results:
            _write_one(conn, result)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _write_one(conn: sqlite3.Connection, result: CaseResult) -> None:
    now = _now()
    case = result.id
    if result.status != "known":
        for table in CHILD_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE case_id = ?", (case,))
        row = {"id": case, "digest": result.digest, "status": result.status, "diagnostic": result.diagnostic or None,
               **result.case, "analysed_at": now}
        updates = ", ".join(f"{name} = excluded.{name}" for name in row if name != "id")
        conn.execute(f"INSERT INTO cases ({', '.join(row)}) VALUES ({', '.join('?' * len(row))}) "
                     f"ON CONFLICT(id) DO UPDATE SET {updates}", _values(row.values()))
        _insert(conn, "findings", case, result.findings)
        _insert(conn, "events", case, result.events)
        conn.executemany("INSERT INTO facts VALUES (?, ?, ?)", [_values((case, name, value))
                                                                 for name, value in result.facts])
        _insert(conn, "gpus", case, [{k: v for k, v in g.items() if k != "causes"} for g in result.gpus])
        _insert(conn, "gpu_faults", case, [
            {"host": g["host"], "pci": g["pci"], "uuid": g["uuid"], "serial": g["serial"], "cause": cause,
             "signature": signature}
            for g in result.gpus for cause, signature in g["causes"]])
    path = escaped_bytes(result.path)
    previous = conn.execute("SELECT case_id FROM locations WHERE path = ?", (path,)).fetchone()
    conn.execute("INSERT INTO locations VALUES (?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET "
                 "stat_key = excluded.stat_key, case_id = excluded.case_id, seen_at = excluded.seen_at",
                 (path, result.stat_key, case, now))
    if previous and previous[0] != case:
        # the files at this path changed: the old content is gone unless another location still holds it
        conn.execute("DELETE FROM cases WHERE id = ? AND NOT EXISTS (SELECT 1 FROM locations WHERE case_id = ?)",
                     (previous[0], previous[0]))


def _insert(conn: sqlite3.Connection, table: str, case: str, rows: list[dict[str, Any]]) -> None:
    if rows:
        names = ["case_id", *rows[0]]
        conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                         [_values((case, *row.values())) for row in rows])


def _values(values: Iterable[Any]) -> tuple[Any, ...]:
    """A row's values as SQLite can hold them (UTF-8): a name's undecodable bytes escaped, so one such folder
    does not fail a batch."""
    return tuple(escaped_bytes(value) if isinstance(value, str) else value for value in values)


@dataclass(frozen=True)
class Fleet:
    """The store as pandas DataFrames, one per table (see the module docstring for the columns)."""

    cases: pandas.DataFrame
    locations: pandas.DataFrame
    findings: pandas.DataFrame
    events: pandas.DataFrame
    facts: pandas.DataFrame
    gpus: pandas.DataFrame
    gpu_faults: pandas.DataFrame

    def tables(self) -> dict[str, pandas.DataFrame]:
        """Table name -> DataFrame, in schema order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def load(db: str | Path) -> Fleet:
    """Every table of the store at `db` as a pandas DataFrame (read-only; `time` columns stay ISO strings)."""
    import pandas

    conn = connect(db, readonly=True)
    try:
        return Fleet(**{table: pandas.read_sql_query(f"SELECT * FROM {table}", conn) for table in TABLES})
    finally:
        conn.close()


EXPORT_FORMATS = ("csv", "parquet")


def export(db: str | Path, fmt: str, directory: str | Path) -> list[Path]:
    """Write each table to `directory/<table>.<fmt>`; parquet needs pyarrow installed."""
    if fmt == "parquet":
        import importlib.util

        if importlib.util.find_spec("pyarrow") is None:
            raise StoreError("--export parquet needs pyarrow (pip install pyarrow); --export csv needs nothing")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in load(db).tables().items():
        target = directory / f"{name}.{fmt}"
        if fmt == "csv":
            frame.to_csv(target, index=False)
        else:
            frame.to_parquet(target, index=False)
        written.append(target)
    return written
