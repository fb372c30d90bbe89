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
        return " / ".join(part for part in (self.cause, self.signature, self.detail) if part)

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
    rows = conn.execute("""
        SELECT c.id, c.cause, c.signature, c.stack_signature, c.fingerprint, c.time, c.host,
               (SELECT MIN(path) FROM locations l WHERE l.case_id = c.id)
        FROM cases c WHERE c.status = 'ok' ORDER BY c.time, c.id""")
    for case, cause, signature, stack, fingerprint, when, host, path in rows:
        key = bucket_key(cause, signature, stack, fingerprint)
        bucket = found.get(key)
        if bucket is None:
            bucket = found[key] = Bucket(*key, example=path, example_text=texts.get(case))
        bucket.count += 1
        if when:
            bucket.first_seen = min(bucket.first_seen or when, when)
            bucket.last_seen = max(bucket.last_seen or when, when)
        if host:
            bucket.hosts.add(host)
        bucket.gpus.update(gpus.get(case, ()))
    errors = conn.execute("SELECT COUNT(*) FROM cases WHERE status = 'error'").fetchone()[0]
    return sorted(found.values(), key=lambda b: (-b.count, b.key)), errors


def gpu_label(host: str | None, pci: str | None, uuid: str | None, serial: str | None) -> str:
    """A GPU as an operator finds it: its board serial, else its UUID, else host and PCI address."""
    if serial:
        return f"serial {serial}"
    if uuid:
        return uuid
    return f"{host or '?'} {pci or '?'}"


def _gpu_names(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Case id -> labels of the GPUs its hardware findings point at."""
    names: dict[str, set[str]] = defaultdict(set)
    for case, host, pci, uuid, serial in conn.execute("SELECT case_id, host, pci, uuid, serial FROM gpu_faults"):
        names[case].add(gpu_label(host, pci, uuid, serial))
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


def _printable(text: str) -> str:
    from ..render.view import safe

    return safe(text)
