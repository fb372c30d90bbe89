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
    """(cause, signature, detail kind, detail) of one case: the rules of the module docstring."""
    if cause in SPLIT_BY_STACK and stack:
        return cause, signature, "stack", stack
    if cause == "unknown":
        return cause, None, "fingerprint" if fingerprint else None, fingerprint
    return cause, signature, None, None


def buckets(conn: sqlite3.Connection) -> tuple[list[Bucket], int]:
    """Every bucket, largest first, and the number of cases that could not be analysed."""
    found: dict[tuple, Bucket] = {}
    gpus = _gpu_names(conn)
    texts = _suspect_texts(conn)
    for row in _case_rows(conn):
        bucket = found.get(row.key)
        if bucket is None:
            bucket = found[row.key] = Bucket(*row.key, example=row.paths[0] if row.paths else None,
                                             example_text=texts.get(row.id))
        bucket.count += 1
        if row.time:
            bucket.first_seen = min(bucket.first_seen or row.time, row.time)
            bucket.last_seen = max(bucket.last_seen or row.time, row.time)
        if row.host:
            bucket.hosts.add(row.host)
        bucket.gpus.update(gpus.get(row.id, ()))
    errors = conn.execute("SELECT COUNT(*) FROM cases WHERE status = 'error'").fetchone()[0]
    return sorted(found.values(), key=lambda b: (-b.count, b.key)), errors


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


def _case_rows(conn: sqlite3.Connection) -> list[CaseRow]:
    """Every analysed case with its bucket key, oldest first (undated last)."""
    paths: dict[str, list[str]] = defaultdict(list)
    for case, path in conn.execute("SELECT case_id, path FROM locations ORDER BY path"):
        paths[case].append(path)
    rows = conn.execute("""SELECT id, cause, signature, stack_signature, fingerprint, time, host FROM cases
                           WHERE status = 'ok' ORDER BY time IS NULL, time, id""")
    return [CaseRow(case, bucket_key(cause, signature, stack, fingerprint), when, host, tuple(paths[case]))
            for case, cause, signature, stack, fingerprint, when, host in rows]


def bucket_cases(conn: sqlite3.Connection, key: str) -> list[CaseRow]:
    """The cases of the bucket whose key (as `postmortem buckets` prints it) is `key`, oldest first."""
    return [row for row in _case_rows(conn) if _key_text(row.key) == key]


def _key_text(key: tuple[str, str | None, str | None, str | None]) -> str:
    cause, signature, _, detail = key
    return " / ".join(part for part in (cause, signature, detail) if part)


def gpu_label(case: str, host: str | None, pci: str | None, uuid: str | None, serial: str | None) -> str:
    """A GPU as an operator finds it: its board serial, else its UUID, else host and PCI address.

    A PCI address without a host names no GPU beyond its own case (every machine has a 0000:01:00), so such a
    GPU is labelled with its case and never merges with another case's."""
    if serial:
        return f"serial {serial}"
    if uuid:
        return uuid
    return f"{host} {pci or '?'}" if host else f"{pci or '?'} in case {case}"


def _gpu_names(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Case id -> labels of the GPUs its hardware findings point at."""
    names: dict[str, set[str]] = defaultdict(set)
    for case, host, pci, uuid, serial in conn.execute("SELECT case_id, host, pci, uuid, serial FROM gpu_faults"):
        names[case].add(gpu_label(case, host, pci, uuid, serial))
    return names


def _suspect_texts(conn: sqlite3.Connection) -> dict[str, str]:
    """Case id -> first line of its first suspect event (what an unknown bucket says)."""
    texts: dict[str, str] = {}
    for case, text in conn.execute("SELECT case_id, text FROM events WHERE "
                                   "role = 'suspect' ORDER BY case_id, event_id"):
        texts.setdefault(case, (text or "").split("\n", 1)[0][:300])
    return texts


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
    from ..render.view import safe

    return safe(text)
