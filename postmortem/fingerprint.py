"""Stable fingerprints of events, and the suspects of a report nothing explained.

Two crashes that say the same thing should group together in bulk analysis
even when their pids, addresses, times and paths differ. A fingerprint is a
short hash of the event kind and its first line with those parts masked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import later
from .model import Event, Finding

if TYPE_CHECKING:
    import regex

_MASKS: tuple[tuple[regex.Pattern, str], ...] = tuple(
    (later.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<uuid>"),
        (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "<time>"),
        (r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)?\s*(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{1,2}"
         r"\s+\d{2}:\d{2}:\d{2}(?:\s+\d{4})?", "<time>"),
        (r"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b", "<time>"),
        (r"(?<![\w.~/-])(?:[\w.~-]*+/)+([\w.-]+)", r"<path>/\1"),  # from the path's start only: linear
        (r"\b0x[0-9a-fA-F]+\b", "0x?"),
        (r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", "<hex>"),
        (r"\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?\b", "<pci>"),
        (r"\d+(?:\.\d+)?", "N"),
        (r"\s+", " "),
    )
)

SUSPICIOUS_KINDS = (
    "core-signal", "coredump", "fatal-signal", "gpu-exception", "sanitizer-error", "cuda-error", "xid", "sxid",
    "segfault", "kernel-panic", "kernel-oops", "driver-message", "python-exception", "child-failed", "library-error",
    "nccl-error", "nccl-warn", "backtrace", "process-hang", "thread-blocked", "tool-hang", "job-hang",
)
"""Event kinds most likely to be the crash itself, most telling first; any other kind follows."""

CONTEXT_KINDS = frozenset({"job-run", "bundle-manifest", "software-stack", "python-packages", "environment-variables",
                           "cuda-device", "library-arch", "process-snapshot",
                           "snapshot-record"})
"""Event kinds that record how the evidence was gathered (a `postmortem run` record, a `collect` bundle's own
files) or what the machine holds (its software, a library's device code), never the crash: no suspects."""

MAX_SUSPECTS = 3


def mask(text: str, host: str | None = None) -> str:
    """The first line of `text` with times, ids, addresses, numbers, directories (and `host`) masked."""
    line = text.strip().split("\n", 1)[0][:500]
    if host:
        line = line.replace(host, "<host>")
    for pattern, replacement in _MASKS:
        line = pattern.sub(replacement, line)
    return line.strip()


IDENTITY_FIELDS = ("xid", "sxid", "error", "signal", "exc_type", "status", "exception", "report")
"""Fields that name WHAT happened (codes, not values): kept in the fingerprint although numbers are masked."""


def fingerprint(event: Event) -> str:
    """16 hex digits that stay the same for the same message from another run, host or process."""
    codes = [f"{name}={event.fields[name]}" for name in IDENTITY_FIELDS if event.fields.get(name) is not None]
    host = event.fields.get("host")
    key = "\n".join([event.kind, *codes, mask(event.text, host if isinstance(host, str) else None)])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def suspects(events: Sequence[Event], findings: Sequence[Finding] = ()) -> tuple[str, ...]:
    """Ids of the events most likely to be the crash when no signature explained it.

    Events that are already a finding's evidence are not suspects; when a summary report
    leads (findings given), the suspects are the unexplained error lines before it (any
    unexplained ones when none comes before).
    """
    order = {kind: i for i, kind in enumerate(SUSPICIOUS_KINDS)}
    used = {i for f in findings for i in f.evidence}
    candidates = [e for e in events if e.id not in used and e.kind not in CONTEXT_KINDS
                  and (not findings or e.kind in order)]
    if findings:
        from .rank import happened_before  # ranking's own notion of order; imported where suspects need it

        first = next((e for e in events if e.id in findings[0].evidence), None)
        earlier = [e for e in candidates if first is not None and happened_before(e, first)
                   and e.where != first.where]
        candidates = earlier or candidates
    ranked = sorted(candidates, key=lambda e: (order.get(e.kind, len(order)), e.where.path, e.where.line or 0))
    return tuple(e.id for e in ranked[:MAX_SUSPECTS])
