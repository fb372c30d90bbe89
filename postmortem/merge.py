"""One fault, one finding: the findings of signatures that read the same fault are merged into one.

Two signatures can report one fault: both fire on the same event (an NVSwitch SXid read by the Fabric Manager
rule and by the SXid rule), or each on its own wording of it (the driver prints `Xid 79` and then `GPU has
fallen off the bus` for one GPU; nvidia-smi then cannot open that GPU). Listed apart they read as two faults,
and the second crowds a GPU that is really sick out of the other findings. Findings merge when

- the evidence of one is all evidence of the other too (two readings of one line, or one reading that
  also counts a line the report copies, such as NCCL's warning under PyTorch's "Last error:": the
  stronger leads, and its reason names the other), or
- they name the same cause on the same GPUs of the same hosts, both as roots: one thing wrong with one GPU
  (a summary report, role `consequence`, such as Xid 45 or Xid 154, is a fact of its own and never merges).

The merged finding is the strongest of them (root before summary, then severity, then confidence, then file
order) with the evidence of all; `merged` names the others, and its reason says it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

from .join import gpu_key
from .model import Event, Finding, severity_rank
from .signatures import moment


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


def _same_fault(a: Finding, b: Finding, places: Mapping[str, tuple[frozenset[str], frozenset[str]]]) -> bool:
    if set(a.evidence) <= set(b.evidence) or set(b.evidence) <= set(a.evidence):
        return True
    if a.cause != b.cause or a.role != "root" or b.role != "root":
        return False
    gpus, hosts = places[a.signature]
    return bool(gpus) and (gpus, hosts) == places[b.signature]


def _place(finding: Finding, by_id: Mapping[str, Event]) -> tuple[frozenset[str], frozenset[str]]:
    """The GPUs (one spelling) and hosts the finding's evidence names."""
    evidence = [by_id[i] for i in finding.evidence if i in by_id]
    gpus = frozenset(key for e in evidence if (key := gpu_key(e.fields.get("pci"))))
    hosts = frozenset(str(e.fields["host"]) for e in evidence if e.fields.get("host"))
    return gpus, hosts


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
