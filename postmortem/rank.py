"""Ranking: which finding is the root, which are its consequences, how sure we are.

A deeper-layer cause (bad GPU memory, a GPU off the bus, a host OOM kill)
explains the application errors that follow it on the same host and GPU within
a short window. Such followers are marked `consequence_of` the root and ranked
after every root; the root's confidence rises with what it explains. Each
adjustment is written into the finding's one-line confidence reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from .join import gpu_key
from .model import Event, Finding, severity_rank
from .signatures import Cause

WINDOW = timedelta(minutes=10)
"""How long after a root cause its consequences may still appear."""
LEAD = timedelta(minutes=1)
"""How much earlier than the root a consequence may be stamped (clock skew, buffering)."""
DEEPER = 10
"""Cause-rank difference from which one cause can explain another."""


@dataclasses.dataclass(frozen=True)
class _Scope:
    """What a finding's evidence says about where and when it happened."""

    earliest: datetime | None
    hosts: frozenset[str]
    gpus: frozenset[str]


def rank(findings: Sequence[Finding], events: Sequence[Event], causes: Mapping[str, Cause]) -> list[Finding]:
    """Findings best first, with consequences marked and confidences explained."""
    by_id = {e.id: e for e in events}
    scopes = {f.signature: _scope([by_id[i] for i in f.evidence if i in by_id]) for f in findings}

    def cause_rank(finding: Finding) -> int:
        return causes[finding.cause].rank if finding.cause in causes else 0

    ranked: list[Finding] = []
    explained: dict[str, int] = {}
    for finding in findings:
        roots = [
            other
            for other in findings
            if cause_rank(other) - cause_rank(finding) >= DEEPER
            and severity_rank(other.severity) >= severity_rank("error")
            and _related(scopes[other.signature], scopes[finding.signature])
        ]
        if roots:
            root = max(roots, key=lambda r: (cause_rank(r), severity_rank(r.severity), r.confidence))
            explained[root.signature] = explained.get(root.signature, 0) + 1
            finding = dataclasses.replace(
                finding,
                consequence_of=root.signature,
                confidence=round(finding.confidence * 0.6, 2),
                confidence_reason=f"{finding.confidence_reason}; likely a consequence of {root.signature}",
            )
        ranked.append(finding)
    ranked = [_credit(f, explained.get(f.signature, 0), scopes[f.signature], by_id) for f in ranked]
    ranked.sort(
        key=lambda f: (
            f.consequence_of is not None,
            -severity_rank(f.severity),
            -f.confidence,
            -cause_rank(f),
            _sortable(scopes[f.signature].earliest),
        )
    )
    return ranked


def _credit(finding: Finding, explains: int, scope: _Scope, by_id: Mapping[str, Event]) -> Finding:
    """Raise a root's confidence for corroboration: several inputs, or followers it explains."""
    inputs = len({by_id[i].where.path for i in finding.evidence if i in by_id})
    bonus, notes = 0.0, []
    if explains:
        bonus += 0.05 * min(explains, 2)
        notes.append(f"explains {explains} later finding{'s' * (explains != 1)}")
    if inputs > 1:
        bonus += 0.03
        notes.append("seen in several inputs")
    if not notes:
        return finding
    return dataclasses.replace(
        finding,
        confidence=round(min(0.99, finding.confidence + bonus), 2),
        confidence_reason="; ".join([finding.confidence_reason, *notes]),
    )


def _scope(evidence: Sequence[Event]) -> _Scope:
    """Times, hosts and GPUs of the evidence; a pci the join stage proved (a traceback's GPU) counts too."""
    times = [e.time for e in evidence if e.time is not None]
    hosts = frozenset(str(e.fields["host"]) for e in evidence if e.fields.get("host"))
    gpus = frozenset(key for e in evidence if (key := gpu_key(e.fields.get("pci"))))
    return _Scope(min(times, key=_sortable) if times else None, hosts, gpus)


def _related(root: _Scope, follower: _Scope) -> bool:
    """Could the root have caused the follower? Unknowns count as 'could'."""
    if root.hosts and follower.hosts and not root.hosts & follower.hosts:
        return False
    if root.gpus and follower.gpus and not root.gpus & follower.gpus:
        return False
    if root.earliest is None or follower.earliest is None:
        return True
    if (root.earliest.tzinfo is None) != (follower.earliest.tzinfo is None):
        return True
    return root.earliest - LEAD <= follower.earliest <= root.earliest + WINDOW


def _sortable(moment: datetime | None) -> float:
    if moment is None:
        return float("inf")
    if moment.tzinfo is None:
        return (moment - datetime(1970, 1, 1)).total_seconds()
    return moment.timestamp()
