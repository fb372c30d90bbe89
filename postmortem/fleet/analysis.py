"""The per-case function: one case's files through `pipeline.analyze_blobs`, boiled down to rows for the store.

It runs in a worker process (local pool or Dask worker) and returns plain
picklable data. The signature database is loaded once per worker process
(`load_default` is cached), never once per case. It never raises: a case that
cannot be analysed comes back with status "error" and the reason.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..facts import FACT_FIELDS
from ..fingerprint import fingerprint
from ..join import gpu_key
from ..model import Event, Report, to_plain
from .cases import Case, case_digest, case_id
from .stack import report_signature

HARDWARE_LAYERS = ("hardware", "driver/hw")
"""Cause layers that point at a part (a GPU, its slot, its host): what the bad-node list counts."""

TEXT_KEPT = 4000
"""Characters of an event's text kept in the store (the rest is in the case's own files)."""


@dataclass
class CaseResult:
    """What the store keeps of one case; `status` is "ok", "error" (see `diagnostic`) or "known" (digest seen
    before)."""

    path: str
    stat_key: str
    digest: str = ""
    status: str = "ok"
    diagnostic: str = ""
    case: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return case_id(self.digest.removeprefix("unread-")) if self.digest else ""


def analyse_case(case: Case, known: frozenset[str] = frozenset()) -> CaseResult:
    """Digest one case and, unless its digest is in `known`, analyse it; never raises."""
    result = CaseResult(case.path, case.stat_key)
    try:
        result.digest = case_digest(case)
        if result.digest in known:
            result.status = "known"
            return result
        from ..inputs import open_inputs
        from ..pipeline import analyze_blobs

        report = analyze_blobs(open_inputs(list(case.files)))
        fill(result, report)
    except Exception as exc:  # noqa: BLE001 - one bad case is recorded, never the end of the scan
        result.status = "error"
        if not result.digest:  # unreadable before it could be digested: named by where it is and its change key
            where_key = f"{case.path}\0{case.stat_key}".encode("utf-8", "replace")
            result.digest = "unread-" + hashlib.sha256(where_key).hexdigest()
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        place = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
        result.diagnostic = f"{type(exc).__name__}: {exc}{place}"
        result.case, result.findings, result.events, result.facts, result.gpus = {}, [], [], [], []
    return result


def analyse_batch(cases: list[Case], known: frozenset[str] = frozenset()) -> list[CaseResult]:
    """Several cases in one task: what a Dask task carries, so scheduling costs less than the work."""
    return [analyse_case(case, known) for case in cases]


def fill(result: CaseResult, report: Report) -> None:
    """The store's rows of one analysed case (scan's cases, triage's issues)."""
    from ..signatures import load_default

    layers = {name: cause.layer for name, cause in load_default().causes.items()}
    events = {e.id: e for e in report.events}
    host = _first(report.facts.get("host"))
    verdict = report.verdict
    suspect = events.get(report.suspects[0]) if report.suspects else None
    when, source = _case_time(report)
    diagnostics = [d for i in report.inputs for d in i.diagnostics]
    result.case = {
        "cause": verdict.cause if verdict else "unknown",
        "signature": verdict.signature if verdict else None,
        "severity": verdict.severity if verdict else None,
        "confidence": verdict.confidence if verdict else None,
        "title": verdict.title if verdict else None,
        "fingerprint": fingerprint(suspect) if suspect else None,
        "stack_signature": report_signature(report.cores, report.events),
        "time": when, "time_source": source, "host": host,
        "inputs": len(report.inputs), "events": len(report.events),
        "input_diagnostics": len(diagnostics),
        "tool_version": report.tool.get("version"), "signatures_version": report.tool.get("signatures"),
    }
    for rank, finding in enumerate(report.findings):
        result.findings.append({
            "rank": rank, "signature": finding.signature, "cause": finding.cause,
            "layer": layers.get(finding.cause, ""), "severity": finding.severity,
            "confidence": finding.confidence, "title": finding.title, "count": finding.count,
            "first_seen": finding.first_seen, "last_seen": finding.last_seen,
            "consequence_of": finding.consequence_of,
        })
    roles = {i: "evidence" for f in report.findings for i in f.evidence}
    roles.update({i: "suspect" for i in report.suspects if i not in roles})
    result.events = [_event_row(events[i], role) for i, role in roles.items() if i in events]
    result.facts = _facts(report)
    result.gpus = _gpus(report, host, layers)


def _event_row(event: Event, role: str) -> dict[str, Any]:
    return {
        "event_id": event.id, "role": role, "kind": event.kind, "time": _iso(event.time),
        "path": event.where.path, "line": event.where.line, "text": event.text[:TEXT_KEPT],
        "fingerprint": fingerprint(event), "count": event.count,
        "fields": json.dumps(to_plain(event.fields), ensure_ascii=False, default=str)[:TEXT_KEPT],
    }


def _facts(report: Report) -> list[tuple[str, str]]:
    rows = []
    for name in FACT_FIELDS:
        for value in report.facts.get(name) or ():
            rows.append((name, value if isinstance(value, str) else json.dumps(to_plain(value), default=str)))
    return rows


def _gpus(report: Report, host: str | None, layers: dict[str, str]) -> list[dict[str, Any]]:
    """One row per GPU the case names, with the hardware causes whose evidence points at it (by PCI address or UUID)."""
    gpus = [dict(g) for g in report.facts.get("gpus") or ()]
    serials = _serials(report.events)
    for gpu in gpus:
        gpu["pci"] = gpu_key(gpu.get("pci")) or gpu.get("pci")
        gpu["causes"] = []
    for finding in report.findings:
        if layers.get(finding.cause) not in HARDWARE_LAYERS:
            continue
        for event_id in finding.evidence:
            event = report.event(event_id)
            if event is None:
                continue
            pci, uuid = gpu_key(event.fields.get("pci")), event.fields.get("gpu_uuid")
            if not pci and not uuid:
                continue
            named = next((g for g in gpus if (pci and g.get("pci") == pci) or (uuid and g.get("uuid") == uuid)), None)
            if named is None:
                named = {"pci": pci, "uuid": uuid, "causes": []}
                gpus.append(named)
            gpu = named
            if (finding.cause, finding.signature) not in gpu["causes"]:
                gpu["causes"].append((finding.cause, finding.signature))
    return [{
        "host": host, "pci": g.get("pci"), "uuid": g.get("uuid"),
        "serial": serials.get(g.get("pci") or "") or serials.get(g.get("uuid") or ""), "name": g.get("name"),
        "causes": g["causes"],
    } for g in gpus]


def _serials(events: tuple[Event, ...]) -> dict[str, str]:
    """Board serial numbers by PCI address and UUID, from any event that gives `gpu_serial` (0 means unset)."""
    found: dict[str, str] = {}
    for event in events:
        serial = str(event.fields.get("gpu_serial") or "").strip()
        if serial and serial.strip("0"):
            for key in (gpu_key(event.fields.get("pci")), event.fields.get("gpu_uuid")):
                if key:
                    found[key] = serial
    return found


def _case_time(report: Report) -> tuple[str | None, str]:
    """When the case happened: the verdict's earliest dated evidence, else any dated event; else none.

    Only the case's own full wall-clock dates count: a syslog line without a year cannot be placed on a fleet's
    calendar, and a file's mtime says when it was copied, not when the job died (a case without a date is
    counted as undated, never given one).
    """
    dated = [(e.id, e.time) for e in report.events if isinstance(e.time, datetime) and e.clock == "wall"]
    if report.verdict is not None:
        own = [(i, time) for i, time in dated if i in report.verdict.evidence]
        dated = own or dated
    if dated:
        return _iso(min(_utc(time) for _, time in dated)), "log"
    return None, "none"


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _iso(moment: datetime | None) -> str | None:
    return _utc(moment).isoformat(timespec="seconds") if isinstance(moment, datetime) else None


def _first(values: Any) -> str | None:
    if isinstance(values, (list, tuple)) and values:
        return str(values[0])
    return None
