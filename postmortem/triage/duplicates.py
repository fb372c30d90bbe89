"""Earlier issues that look like this one, found in the store `scan` writes (fleet/store.py): an issue is a case
whose location is its reference ("owner/repo#123"), bucketed as scan buckets cases (fleet/buckets.py).

An earlier issue of the same repository matches when it falls in the same bucket (cause and signature; for a
native crash the stack signature too), has the same native stack signature, or the same fingerprint of the line
nothing explained; the GPU model they share is said beside it. A verdict of `unknown` alone is no match.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass

from ..fleet import store
from ..fleet.analysis import CaseResult, fill
from ..fleet.buckets import bucket_key
from ..knowledge import short_gpu_name
from ..model import Report
from ..sources.reporter_words import REPORTED
from .issue import Issue

MAX_DUPLICATES = 3
"""Earlier issues named in one answer, best matches first."""


@dataclass(frozen=True)
class Duplicate:
    """An earlier issue that looks the same, and why."""

    ref: str
    reasons: tuple[str, ...]
    """("same signature xid-79", "same GPU model RTX 5090"): the match first, then what else they share."""


def issue_result(issue: Issue, report: Report, text: str) -> CaseResult:
    """The store's rows for one triaged issue; its digest is its text's, so an edit is a new case."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    result = CaseResult(issue.ref, digest, digest)
    fill(result, report)
    return result


def find_and_store(db: str, issue: Issue, report: Report, text: str) -> tuple[Duplicate, ...]:
    """The earlier issues like this one in the store at `db`; then this one is stored (replacing its last
    version)."""
    result = issue_result(issue, report, text)
    conn = store.connect(db)
    try:
        found = _matches(conn, issue, result)
        store.write(conn, [result])
    finally:
        conn.close()
    return found


def _in_words(*signatures: str | None) -> bool:
    """Whether one of the verdicts rests on a reporter's words (signatures/reported.yaml), which say a cause but
    not which of its signatures: the same cause is then the closest a match gets."""
    return any(signature and signature.startswith(REPORTED) for signature in signatures)


def _matches(conn: sqlite3.Connection, issue: Issue, result: CaseResult) -> tuple[Duplicate, ...]:
    case = result.case
    key = bucket_key(case["cause"], case["signature"], case["stack_signature"], case["fingerprint"])
    gpus = {short_gpu_name(value) for name, value in result.facts if name == "gpu_name"}
    prefix = f"{issue.repository}#" if issue.repository else ""  # the same repository's issues only
    rows = conn.execute(
        "SELECT l.path, c.id, c.cause, c.signature, c.stack_signature, c.fingerprint FROM locations l "
        "JOIN cases c ON c.id = l.case_id WHERE c.status = 'ok' AND l.path != ? AND substr(l.path, 1, ?) = ? "
        "ORDER BY l.seen_at", (issue.ref, len(prefix), prefix)).fetchall()
    found: list[tuple[int, Duplicate]] = []
    for path, case_id, cause, signature, stack, fingerprint in rows:
        reasons = []
        if case["stack_signature"] and stack == case["stack_signature"]:
            reasons.append(f"same native stack {stack}")
        if case["cause"] != "unknown" and bucket_key(cause, signature, stack, fingerprint) == key:
            reasons.append(f"same signature {signature}" if signature else f"same cause {cause}")
        elif cause == case["cause"] != "unknown" and _in_words(signature, case["signature"]):
            reasons.append(f"same cause {cause}, one of them told in words")
        elif case["fingerprint"] and fingerprint == case["fingerprint"]:
            reasons.append("same unexplained line")
        if not reasons:
            continue
        theirs = {short_gpu_name(v) for (v,) in conn.execute(
            "SELECT value FROM facts WHERE case_id = ? AND name = 'gpu_name'", (case_id,))}
        shared = sorted(gpus & theirs)
        if shared:
            reasons.append(f"same GPU model {', '.join(shared)}")
        found.append((len(reasons), Duplicate(path, tuple(reasons))))
    found.sort(key=lambda pair: -pair[0])  # stable: equally good matches stay oldest first
    return tuple(duplicate for _, duplicate in found[:MAX_DUPLICATES])
