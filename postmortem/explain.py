"""`postmortem explain`: what one code or one pasted line means, for someone holding only that.

`Xid 79`, `SXid 12028`, `cudaErrorIllegalAddress`, `CUDA_ERROR_ILLEGAL_ADDRESS`,
`700` and "an illegal memory access was encountered" are turned into the
event a source would have produced for them and matched against the same
signature database; anything else is analysed as a log line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import regex

from . import knowledge
from .knowledge import CudaError, cuda_error
from .model import Event, Finding, Location, Report
from .pipeline import analyze_text
from .rank import rank
from .signatures import Database, load_default, match, render_explanation

_XID = regex.compile(r"(?i)^\s*+(s?xid)\s*+[:#]?\s*+(\d{1,6})\s*$")


@dataclass(frozen=True)
class Explanation:
    """What a token is (`what`), the CUDA error record when it names one, and the findings it gives."""

    token: str
    what: str
    cuda: CudaError | None
    findings: tuple[Finding, ...]


def explain(token: str, database: Database | None = None) -> Explanation:
    """Explain one code or one line of log."""
    database = database or load_default()
    if code := _XID.match(token):
        kind, number = code[1].lower(), int(code[2])
        label = f"{'Xid' if kind == 'xid' else 'SXid'} {number}"
        documented = knowledge.xid(number) if kind == "xid" else knowledge.sxid(number)
        what = (f"{label}: {documented.name} (origin {documented.origin}; severity {documented.severity}; "
                f"recommended action {documented.action})" if documented else f"{label}: not a documented code")
        return _from_event(token, what, database, Event(kind, Location("<explain>", 1), token, {kind: number}))
    record = cuda_error(token)
    if record is not None:
        fields = {"error": record.runtime_name or record.driver_name, "number": record.number,
                  "message": record.message, "sticky": record.sticky}
        what = f"CUDA error {record.number}: {record.name} ({record.driver_name or '-'}): \"{record.message}\""
        return _from_event(token, what, database, Event("cuda-error", Location("<explain>", 1), token, fields),
                           record)
    report = analyze_text(token, "<explain>", database)
    return Explanation(token, _describe(report), None, report.findings)


def _from_event(token: str, what: str, database: Database, event: Event, record: CudaError | None = None):
    """Findings for a code alone: placeholders the code cannot fill show as <name> (e.g. <pci>)."""
    event = Event(event.kind, event.where, event.text, event.fields, id="e1")
    templates = {s.id: s.explain for s in database.signatures}
    findings = tuple(
        replace(f, explanation=render_explanation(templates[f.signature], event.fields, lambda name: f"<{name}>"))
        for f in rank(match(database, [event]), [event], database.causes)
    )
    return Explanation(token, what, record, findings)


def _describe(report: Report) -> str:
    kinds = sorted({e.kind for e in report.events})
    return f"a log line ({', '.join(kinds)})" if kinds else "no code or known message recognised"
