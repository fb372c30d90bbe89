"""One fault, one finding: the findings of signatures that read the same fault are merged into one.

Two signatures can report one fault: both fire on the same event (an NVSwitch SXid read by the Fabric Manager
rule and by the SXid rule), or each on its own wording of it (the driver prints `Xid 79` and then `GPU has
fallen off the bus` for one GPU; nvidia-smi then cannot open that GPU). Listed apart they read as two faults,
and the second crowds a GPU that is really sick out of the other findings. Findings merge when

- the evidence of one is all evidence of the other too (two readings of one line, or one reading that
  also counts a line the report copies, such as NCCL's warning under PyTorch's "Last error:": the
  stronger leads, and its reason names the other), or
- they name the same cause on the same GPUs of the same hosts, both as roots: one thing wrong with one GPU
  (a summary report, role `consequence`, such as Xid 45 or Xid 154, is a fact of its own and never merges), or
- they name the same cause of the same process, on one host, within WINDOW: a pid both name, or the innermost
  Python frame of the crash (`python_top`: faulthandler prints it, a core holds it). A process dies once, and
  its core, the kernel's `segfault` line, faulthandler's report and the shell's `Segmentation fault (core
  dumped)` are four accounts of that one death.

The merged finding is the strongest of them (root before summary, then severity, then confidence, then file
order) with the evidence of all; `merged` names the others, and its reason says it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .join import gpu_key
from .model import Event, Finding, severity_rank
from .signatures import moment

WINDOW = timedelta(minutes=10)
"""How long after a root cause its consequences may still appear (rank.py), and how far apart two accounts of one
process's death may be stamped."""


def merge_same_fault(findings: Sequence[Finding], events: Sequence[Event]) -> list[Finding]:
    """The findings with each group that reads one fault merged into its strongest member, in first-member order."""
    by_id = {e.id: e for e in events}
    places = {f.signature: _place(f, by_id) for f in findings}
    groups: list[list[Finding]] = []
    for finding in findings:
        joined = [g for g in groups if any(_same_fault(finding, other, places) for other in g)]
        group = [f for g in joined for f in g] + [finding]
        groups = [g for g in groups if g not in joined]
        groups.append(group)
    order = {f.signature: i for i, f in enumerate(findings)}
    groups.sort(key=lambda g: min(order[f.signature] for f in g))
    return [_merged(group, by_id, order) for group in groups]


@dataclass(frozen=True)
class _Place:
    """Where a finding's evidence says its fault happened."""

    gpus: frozenset[str]
    """PCI addresses, in one spelling."""
    hosts: frozenset[str]
    pids: frozenset[int]
    python_tops: frozenset[str]
    """The innermost Python frame of a crash, `file:line in function`."""
    times: tuple[float, ...]
    """Seconds (signatures.moment) of the evidence that has a time."""


def _same_fault(a: Finding, b: Finding, places: Mapping[str, _Place]) -> bool:
    if set(a.evidence) <= set(b.evidence) or set(b.evidence) <= set(a.evidence):
        return True
    if a.cause != b.cause or a.role != "root" or b.role != "root":
        return False
    one, other = places[a.signature], places[b.signature]
    if one.gpus and (one.gpus, one.hosts) == (other.gpus, other.hosts):
        return True
    same_process = one.pids & other.pids or one.python_tops & other.python_tops
    return bool(same_process) and (not one.hosts or not other.hosts or one.hosts == other.hosts) \
        and _close(one.times, other.times)


def _close(one: Sequence[float], other: Sequence[float]) -> bool:
    """Evidence within WINDOW of each other, or without times to tell (a pid is reused, but not in minutes)."""
    if not one or not other:
        return True
    return abs(min(one) - min(other)) <= WINDOW.total_seconds()


def _place(finding: Finding, by_id: Mapping[str, Event]) -> _Place:
    evidence = [by_id[i] for i in finding.evidence if i in by_id]
    gpus = frozenset(key for e in evidence if (key := gpu_key(e.fields.get("pci"))))
    hosts = frozenset(str(e.fields["host"]) for e in evidence if e.fields.get("host"))
    pids = frozenset(e.fields["pid"] for e in evidence if isinstance(e.fields.get("pid"), int))
    tops = frozenset(str(e.fields["python_top"]) for e in evidence if e.fields.get("python_top"))
    times = tuple(moment(e.time) for e in evidence if e.time is not None)
    return _Place(gpus, hosts, pids, tops, times)


def _merged(group: list[Finding], by_id: Mapping[str, Event], order: Mapping[str, int]) -> Finding:
    if len(group) == 1:
        return group[0]
    lead = max(group, key=lambda f: (f.role == "root", severity_rank(f.severity), f.confidence,
                                     -order[f.signature]))
    others = [f for f in sorted(group, key=lambda f: order[f.signature]) if f is not lead]
    evidence = tuple(dict.fromkeys([*lead.evidence, *(i for f in others for i in f.evidence)]))
    seen = sorted((t for i in evidence if i in by_id for t in (by_id[i].time, by_id[i].fields.get("last_time"))
                   if isinstance(t, datetime)), key=moment)
    also = ", ".join(f.signature for f in others)
    extra = len(evidence) - len(lead.evidence)
    return dataclasses.replace(
        lead,
        evidence=evidence,
        count=sum(by_id[i].count for i in evidence if i in by_id) or lead.count,
        references=tuple(dict.fromkeys([*lead.references, *(r for f in others for r in f.references)])),
        first_seen=seen[0].isoformat() if seen else lead.first_seen,
        last_seen=seen[-1].isoformat() if seen else lead.last_seen,
        merged=(*lead.merged, *(s for f in others for s in (f.signature, *f.merged))),
        confidence_reason=f"{lead.confidence_reason}; the same fault also reported as {also}"
                          + (f" ({extra} more event{'s' * (extra != 1)})" if extra else ""),
    )
