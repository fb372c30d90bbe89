"""The answer to a bug report: one Markdown comment for the tracker, or JSON for a bot.

The comment opens with a hidden marker (MARKER) so that a bot finds its own comment again and edits it instead of
adding another. Everything quoted from the issue keeps markdown_report's guarantees: evidence sits in fences
longer than any backtick run inside it, other input-derived text is escaped, and `@user` / `#123` / links from
the issue are inert code spans -- a comment never pings anyone the reporter named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from .. import later
from ..model import to_plain
from . import view
from .i18n import Translator
from .markdown_report import code, evidence_block, text

if TYPE_CHECKING:
    from ..triage import Triage

MARKER = "<!-- postmortem-triage -->"
"""The first line of every comment triage writes: how the GitHub Action finds it to update it."""
_LABEL_STATE = later.compile(r"<!-- postmortem-triage labels applied=(?P<applied>[^\s>]*+) "
                             r"declined=(?P<declined>[^\s>]*+) -->")
"""The second line of the Action's comment (LabelState), hidden like the marker: label names percent-encoded, so
none can end the HTML comment."""
EVIDENCE_SHOWN = 2
"""Evidence events quoted in the comment (the JSON form has them all)."""
MAX_COMMENT = 60_000
"""Characters a comment may take (GitHub's limit is 65,536): quoted evidence is dropped to fit, never cut inside
a fence."""


@dataclass(frozen=True)
class LabelState:
    """What the Action's comment remembers of the issue's labels, so that the bot only ever changes its own: a label
    a person added is never taken off, one a person took off is never put back."""

    applied: frozenset[str] = frozenset()
    """Labels the bot added that are still on the issue: the only ones it may take off."""
    declined: frozenset[str] = frozenset()
    """Labels the bot added that a person took off: never added again."""


def label_state(body: str) -> LabelState | None:
    """The state in the second line of the bot's own comment; None in a comment written before it kept one."""
    lines = body.split("\n", 2)
    match = _LABEL_STATE.fullmatch(lines[1]) if len(lines) > 1 else None
    if match is None:
        return None
    return LabelState(*(frozenset(unquote(name) for name in match[key].split(",") if name)
                        for key in ("applied", "declined")))


def _label_state_line(state: LabelState) -> str:
    applied, declined = (",".join(quote(name, safe="") for name in sorted(names))
                         for names in (state.applied, state.declined))
    return f"<!-- postmortem-triage labels applied={applied} declined={declined} -->"


def render_markdown(result: Triage, lang: str = "en", state: LabelState | None = None) -> str:
    """The comment: verdict, confidence, evidence from the issue, actions, what to attach, duplicates; with
    `state`, the Action's labels hidden under the marker."""
    t = Translator(lang)
    report = result.report
    head = [MARKER, *([_label_state_line(state)] if state is not None else [])]
    verdict = report.verdict
    evidence: list[str] = []
    if verdict is None:
        head += [f"**postmortem** · {text(t('triage_unknown'))}", "", text(t("triage_unknown_detail",
                                                                             count=len(report.events)))]
        events = [e for e in (report.event(i) for i in report.suspects) if e is not None]
        heading = t("suspects")
    else:
        words = t.words(verdict, report)
        head += [f"**postmortem** · {text(t('verdict'))}: `{verdict.cause}` · {text(words.title)}", "",
                 f"**{text(t('confidence'))}** {verdict.confidence:.2f} ({text(words.reason)})", "",
                 text(words.explanation)]
        events = view.evidence_of(report, verdict)
        heading = t("triage_evidence")
        if words.actions:
            head += ["", f"**{text(t('what_to_do'))}**", ""]
            head += [f"{i}. {text(action)}" for i, action in enumerate(words.actions, 1)]
    if events:
        evidence = ["", f"**{text(heading)}**", ""]
        evidence += [block for event in events[:EVIDENCE_SHOWN] for block in evidence_block(event, t)]
    tail: list[str] = []
    if result.requests:
        tail += ["", f"**{text(t('triage_attach'))}**", ""]
        tail += ["- " + t("triage_request", ask=text(t("ask_" + r.id)), command=code(r.command),
                          why=text(t("why_" + r.id))) for r in result.requests]
    if result.duplicates:
        tail += ["", f"**{text(t('triage_duplicates'))}**", ""]
        tail += [f"- {_reference(d.ref, result.issue.repository)} ({text(', '.join(d.reasons))})"
                 for d in result.duplicates]
    tool = report.tool
    line = t("tool_line", version=tool.get("version", "?"), signatures=tool.get("signatures", "?"))
    labels = f" · {text(t('triage_labels'))}: " + ", ".join(code(label) for label in result.labels) if result.labels \
        else ""
    tail += ["", f"<sub>{text(line)}{labels}</sub>"]
    while evidence and sum(len(part) + 1 for part in [*head, *evidence, *tail]) > MAX_COMMENT:
        evidence = evidence[:-4] if len(evidence) > 7 else []  # one block at a time (title, blank, fence, blank)
    return "\n".join([*head, *evidence, *tail]) + "\n"


def _reference(ref: str, repository: str | None) -> str:
    """An earlier issue of the same repository as a live `#123` (the tracker links the two, and the maintainer
    closes one as a duplicate of the other in a click): the store's own reference, a repository and a number
    that triage wrote, never text from an issue. Any other reference stays an inert code span."""
    number = ref.removeprefix(f"{repository}#") if repository else ""
    return f"#{number}" if number.isdigit() and len(number) < 12 else code(ref)


def render_json(result: Triage) -> str:
    """The bot's form: the issue as read, the verdict, requests, labels, duplicates and the comment itself."""
    report = result.report
    verdict = report.verdict
    data: dict[str, Any] = {
        "schema": 1,
        "issue": {"ref": result.issue.ref, "number": result.issue.number, "repository": result.issue.repository,
                  "url": result.issue.url, "title": result.issue.title, "notes": list(result.issue.notes)},
        "pieces": [{"name": p.name, "kind": p.kind, "hint": p.hint, "lines": p.text.count("\n") + 1}
                   for p in result.pieces],
        "verdict": {"cause": verdict.cause, "signature": verdict.signature, "confidence": verdict.confidence,
                    "title": verdict.title} if verdict else {"cause": "unknown", "signature": None,
                                                             "confidence": None, "title": None},
        "findings": [{"signature": f.signature, "cause": f.cause, "confidence": f.confidence, "severity": f.severity}
                     for f in report.findings],
        "facts": to_plain(report.facts),
        "requests": [{"id": r.id, "command": r.command, "cause": r.cause} for r in result.requests],
        "labels": list(result.labels),
        "duplicates": [{"ref": d.ref, "reasons": list(d.reasons)} for d in result.duplicates],
        "comment": render_markdown(result),
    }
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
