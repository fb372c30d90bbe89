"""Buckets: cases that are the same problem, grouped and counted.

A case explained by a signature goes to the bucket of its cause and signature;
a native crash is split further by its stack signature (`stack.py`). A case
nothing explained goes to the bucket of its stack signature when it has a
native stack, else of the fingerprint of its most suspicious event
(`postmortem.fingerprint`), so the same unknown message from many hosts is one
bucket to look at. Cases that could not be analysed are counted apart.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field

from .store import bucket_key_sql

SPLIT_BY_STACK = ("native-crash", "unknown")
"""Causes whose buckets are split by stack signature: a host-side crash is named by where it crashed."""


@dataclass
class Bucket:
    """One group of cases: its key, how many, when, where; `detail` is a stack signature or fingerprint."""

    cause: str
    signature: str | None
    detail_kind: str | None
    detail: str | None
    count: int = 0
    first_seen: str | None = None
    last_seen: str | None = None
    hosts: set[str] = field(default_factory=set)
    gpus: set[str] = field(default_factory=set)
    example: str | None = None
    example_text: str | None = None

    @property
    def key(self) -> str:
        return _key_text((self.cause, self.signature, self.detail_kind, self.detail))

    def plain(self) -> dict:
        """JSON-ready form (`postmortem buckets --format json`)."""
        return {"key": self.key, "cause": self.cause, "signature": self.signature, "detail_kind": self.detail_kind,
                "detail": self.detail, "count": self.count, "first_seen": self.first_seen,
                "last_seen": self.last_seen, "hosts": sorted(self.hosts), "gpus": sorted(self.gpus),
                "example": self.example, "example_text": self.example_text}


def bucket_key(cause: str, signature: str | None, stack: str | None, fingerprint: str | None
               ) -> tuple[str, str | None, str | None, str | None]:
    """(cause, signature, detail kind, detail) of one case: the rules of the module docstring (KEY says them in SQL)."""
    if cause in SPLIT_BY_STACK and stack:
        return cause, signature, "stack", stack
    if cause == "unknown":
        return cause, None, "fingerprint" if fingerprint else None, fingerprint
    return cause, signature, None, None


KEY = bucket_key_sql()
"""bucket_key as SQL over a `cases` row, the store's own (store.bucket_key_sql, what its index and summaries hold):
the buckets are read from the summaries and a bucket's cases found by a seek in the index."""
_KEYED = ", ".join(KEY)
_NAMES = ", ".join(f"key{i}" for i in range(len(KEY)))
_NAMED = ", ".join(f"{expression} AS key{i}" for i, expression in enumerate(KEY))
_SAME_BUCKET = " AND ".join(f"{expression} IS ?" for expression in KEY)


def buckets(conn: sqlite3.Connection) -> tuple[list[Bucket], int]:
    """Every bucket, largest first, and the number of cases that could not be analysed: from the store's summaries
    (store.MIGRATIONS 2), a bucket's first and last case by a seek in the index of the bucket key."""
    found: dict[tuple, Bucket] = {}
    for *kept, count in conn.execute("SELECT cause, signature, kind, detail, cases FROM bucket_counts"):
        key = _key_of(kept)
        found[key] = Bucket(*key, count=count, first_seen=_seen(conn, "MIN", key), last_seen=_seen(conn, "MAX", key))
    for *kept, host in conn.execute("SELECT cause, signature, kind, detail, host FROM bucket_hosts"):
        if (bucket := found.get(_key_of(kept))) is not None:
            bucket.hosts.add(host)
    for *key, label in conn.execute(
            f"SELECT DISTINCT {_NAMES}, {gpu_label('g')} FROM (SELECT id, {_NAMED} FROM cases WHERE status = 'ok') "
            "JOIN gpu_faults g ON g.case_id = id"):
        if (bucket := found.get(tuple(key))) is not None:
            bucket.gpus.add(label)
    for bucket in found.values():
        oldest = _oldest(conn, (bucket.cause, bucket.signature, bucket.detail_kind, bucket.detail))
        if oldest is not None:
            bucket.example, bucket.example_text = _example(conn, oldest)
    errors = conn.execute("SELECT COUNT(*) FROM cases WHERE status = 'error'").fetchone()[0]
    return sorted(found.values(), key=lambda b: (-b.count, b.key)), errors


def _key_of(kept: list[str]) -> tuple[str, str | None, str | None, str | None]:
    """A bucket key as the summaries keep it ('' for a part that is none) back as bucket_key gives it."""
    cause, signature, kind, detail = kept
    return cause, signature or None, kind or None, detail or None


def _seen(conn: sqlite3.Connection, which: str, key: tuple) -> str | None:
    """The first (MIN) or last (MAX) dated case of a bucket: one seek in the index of the bucket key."""
    return conn.execute(f"SELECT {which}(time) FROM cases WHERE status = 'ok' AND {_SAME_BUCKET} AND time > ''",
                        key).fetchone()[0]




def _oldest(conn: sqlite3.Connection, key: tuple) -> str | None:
    """The bucket's first case, as buckets are listed (oldest dated case, else the first undated by id)."""
    for order in ("time IS NOT NULL ORDER BY time, id", "time IS NULL ORDER BY id"):
        row = conn.execute(f"SELECT id FROM cases WHERE status = 'ok' AND {_SAME_BUCKET} AND {order} LIMIT 1",
                           key).fetchone()
        if row is not None:
            return row[0]
    return None


def _example(conn: sqlite3.Connection, case: str) -> tuple[str | None, str | None]:
    """A case's first path and the first line of its top suspect (what an unknown bucket says: the line its
    fingerprint is made from, never an event that merely came first in the file, such as the driver's banner)."""
    path = conn.execute("SELECT MIN(path) FROM locations WHERE case_id = ?", (case,)).fetchone()[0]
    text = conn.execute("SELECT text FROM events WHERE case_id = ? AND role = 'suspect' ORDER BY rowid LIMIT 1",
                        (case,)).fetchone()  # stored in the report's order: the first is the top suspect
    return path, (text[0] or "").split("\n", 1)[0][:300] if text is not None else None


@dataclass(frozen=True)
class CaseRow:
    """One analysed case as a bucket lists it: id, bucket key, its own time (from its evidence), host, paths."""

    id: str
    key: tuple[str, str | None, str | None, str | None]
    time: str | None
    host: str | None
    paths: tuple[str, ...]

    def plain(self) -> dict:
        """JSON-ready form (`postmortem buckets --cases KEY --format json`)."""
        return {"id": self.id, "time": self.time, "host": self.host, "paths": list(self.paths)}


def bucket_cases(conn: sqlite3.Connection, key: str) -> list[CaseRow]:
    """The cases of the bucket whose key (as `postmortem buckets` prints it) is `key`, oldest first."""
    chosen = next((k for k in conn.execute(f"SELECT DISTINCT {_KEYED} FROM cases WHERE status = 'ok'")
                   if _key_text(k) == key), None)
    if chosen is None:
        return []
    rows = conn.execute(f"SELECT id, time, host FROM cases WHERE status = 'ok' AND {_SAME_BUCKET} "
                        "ORDER BY time IS NULL, time, id", chosen).fetchall()
    paths: dict[str, list[str]] = defaultdict(list)
    for case, path in conn.execute(f"SELECT case_id, path FROM locations WHERE case_id IN (SELECT id FROM cases "
                                   f"WHERE status = 'ok' AND {_SAME_BUCKET}) ORDER BY path", chosen):
        paths[case].append(path)
    return [CaseRow(case, chosen, when, host, tuple(paths[case])) for case, when, host in rows]


def _key_text(key: tuple[str, str | None, str | None, str | None]) -> str:
    cause, signature, _, detail = key
    return " / ".join(part for part in (cause, signature, detail) if part)


def gpu_label(row: str) -> str:
    """A GPU as an operator finds it, in SQL over a gpu_faults (or gpus) row named `row`: its board serial, else its
    UUID, else host and PCI address. A PCI address without a host names no GPU beyond its own case (every machine has
    a 0000:01:00), so such a GPU is labelled with its case and never merges with another case's."""
    pci = f"COALESCE(NULLIF({row}.pci, ''), '?')"
    return (f"CASE WHEN {row}.serial IS NOT NULL AND {row}.serial != '' THEN 'serial ' || {row}.serial "
            f"WHEN {row}.uuid IS NOT NULL AND {row}.uuid != '' THEN {row}.uuid "
            f"WHEN {row}.host IS NOT NULL AND {row}.host != '' THEN {row}.host || ' ' || {pci} "
            f"ELSE {pci} || ' in case ' || {row}.case_id END")


def format_text(found: list[Bucket], errors: int) -> str:
    """The buckets as a terminal table: count, first/last seen, hosts, GPUs, key."""
    lines = [f"{'cases':>6}  {'first seen':19}  {'last seen':19}  {'hosts':>5}  {'GPUs':>4}  bucket"]
    for b in found:
        lines.append(f"{b.count:>6}  {(b.first_seen or '-'):19}  {(b.last_seen or '-'):19}  {len(b.hosts):>5}  "
                     f"{len(b.gpus):>4}  {_printable(b.key)}")
        if b.detail_kind == "fingerprint" and b.example_text:
            lines.append(f"{'':>62}e.g. {_printable(b.example_text)[:100]}")
    total = sum(b.count for b in found)
    lines.append(f"{total} case(s) in {len(found)} bucket(s); {errors} case(s) could not be analysed")
    return "\n".join(lines) + "\n"


def format_cases(key: str, rows: list[CaseRow]) -> str:
    """One bucket's cases as a terminal table: id, time (from its evidence; - when none is dated), host, paths."""
    lines = [f"{len(rows)} case(s) in bucket {_printable(key)}", f"{'case':16}  {'time':19}  {'host':20}  path"]
    for row in rows:
        first, *more = row.paths or ("-",)
        lines.append(f"{row.id:16}  {(row.time or '-'):19}  {_printable(row.host or '-'):20}  {_printable(first)}")
        lines += [f"{'':61}{_printable(path)}" for path in more]
    return "\n".join(lines) + "\n"


def _printable(text: str) -> str:
    from ..names import safe

    return safe(text)
