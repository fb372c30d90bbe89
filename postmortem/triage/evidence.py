"""What to ask a reporter for: the evidence that would separate the verdict from its usual alternatives, when the
issue does not already hold it (data/evidence-requests.tsv)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from ..knowledge import data_rows
from ..model import Report

ALTERNATIVE_MARGIN = 0.2
"""A finding of another cause within this much confidence of the verdict is an alternative the evidence has not
ruled out."""
MAX_REQUESTS = 3
"""Most requests in one answer: a reporter asked for ten things sends none."""


@dataclass(frozen=True)
class Request:
    """One thing to attach: `id` names its words in the interface catalogue (ask_<id>, why_<id>)."""

    id: str
    command: str
    cause: str
    """The cause (verdict or alternative) it would settle."""


@dataclass(frozen=True)
class _Rule:
    id: str
    causes: frozenset[str]
    when: frozenset[str]
    unless: tuple[frozenset[str], ...]
    command: str


@cache
def rules() -> tuple[_Rule, ...]:
    return tuple(_Rule(row["id"], frozenset(row["causes"].split(",")), frozenset(row["when"].split("+")) - {""},
                       tuple(frozenset(group.split("+")) for group in row["unless"].split()), row["command"])
                 for row in data_rows("evidence-requests.tsv"))


def requests_for(report: Report, said: frozenset[str] = frozenset()) -> Iterator[Request]:
    """The table's requests for the verdict's cause and its close alternatives that the report does not answer;
    `said` adds what the input itself shows (issue:images)."""
    causes = _open_causes(report)
    held = _held(report) | said
    count = 0
    for rule in rules():
        cause = next((cause for cause in causes if cause in rule.causes), None)
        if cause is None or not rule.when <= held or any(group <= held for group in rule.unless):
            continue
        yield Request(rule.id, rule.command, cause)
        count += 1
        if count == MAX_REQUESTS:
            return


def _open_causes(report: Report) -> list[str]:
    """The verdict's cause, then those of other root findings close to it in confidence."""
    verdict = report.verdict
    if verdict is None:
        return ["unknown"]
    causes = [verdict.cause]
    for finding in report.others:
        if (finding.role != "consequence" and finding.cause not in causes
                and finding.confidence >= verdict.confidence - ALTERNATIVE_MARGIN):
            causes.append(finding.cause)
    return causes


def _held(report: Report) -> frozenset[str]:
    """What the report holds, in the table's terms: format:NAME, fact:NAME, kind:NAME."""
    formats = {f"format:{name}" for info in report.inputs for name in info.format.split("+")}
    facts = {f"fact:{name}" for name, value in report.facts.items() if value}
    kinds = {f"kind:{event.kind}" for event in report.events}
    return frozenset(formats | facts | kinds)
