"""`postmortem signatures lint`: a signature pack is only as good as its examples.

Loading already checks the schema, the cause vocabulary and duplicate ids.
Lint then runs every entry's examples through the whole pipeline (a positive
example must fire the entry, a negative one must not), checks that every
entry has its words in every language the reports speak, and refuses patterns
whose matching time can explode (a quantified group holding a quantifier).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import regex

from . import later
from .inputs import Blob
from .model import Report
from .pipeline import analyze, analyze_blobs, analyze_text
from .reader import BytesReader
from .signatures import Database, Flaw, Signature, default_directory, trace


@dataclass(frozen=True)
class Result:
    """What lint found: problems (exit 1) and warnings that do not fail the pack."""

    problems: list[Flaw]
    warnings: list[str]


def example_report(example: str | Mapping[str, str], root: Path, database: Database | None = None) -> Report | None:
    """The analysis of one example with `database`; None for a file example that is not at hand.

    Text examples are analysed as a log; `{file: path}` examples (cores and
    other binary inputs, or a folder read as one job: flight-recorder dumps of every rank) are read from
    `root`, the pack's repository; `{issue: path}` examples are bug reports, read as `postmortem triage` reads
    them (the reporter's words are evidence there only); `{prose: text}` is text a person wrote, read as an
    issue's text is.
    """
    if isinstance(example, Mapping) and "prose" in example:
        blob = Blob("example.md", BytesReader(example["prose"].encode("utf-8")), kind="prose")
        return analyze_blobs([blob], database)
    if isinstance(example, Mapping):
        path = root / next(iter(example.values()))
        if not path.exists():
            return None
        if "issue" in example:
            from .triage import issue_report

            return issue_report(path, database)
        return analyze([str(path)], database)
    return analyze_text(example, "example.log", database)


def fires(signature: Signature, report: Report) -> bool:
    """Whether `signature` is among the report's findings (or merged into one: the same fault, merge.py)."""
    return any(signature.id in (f.signature, *f.merged) for f in report.findings)


def explain_match(signature: Signature, report: Report) -> list[str]:
    """Why `signature` fired on the report or not: the trace of its condition on the event that comes closest.

    The closest event is the one on which the most parts of the condition hold; a condition that holds on an
    event whose finding is still missing was dropped after matching (ranking, joining).
    """
    if not report.events:
        said = "; ".join(d for i in report.inputs for d in i.diagnostics) or "no source recognised it"
        return [f"no event was read from it ({said})"]
    traces = [(event, trace(signature.rule, event)) for event in report.events]
    event, steps = max(traces, key=lambda t: (t[1][0].held, sum(step.held for step in t[1])))
    place = f"{event.where.path}:{event.where.line}"
    if steps[0].held:
        into = next((f.signature for f in report.findings if signature.id in f.merged), None)
        verdict = ("fires" + (f" (merged into {into}, a finding of the same fault)" if into else "")
                   if fires(signature, report) else "matches, but its finding was dropped after matching")
        lines = [f"the condition holds on {event.kind} event at {place}: the signature {verdict}"]
    else:
        lines = [f"closest of {len(report.events)} event(s): {event.kind} at {place}: {_excerpt(event.text)}"]
    lines.extend(f"{'  ' * step.depth}{'holds' if step.held else 'FAILS'}: {step.label}"
                 + (f" ({step.seen})" if step.seen else "") for step in steps)
    return lines


def _excerpt(text: str, width: int = 120) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return repr(first if len(first) <= width else first[:width] + "...")


def check_examples(signature: Signature, root: Path, database: Database) -> list[Flaw]:
    """A positive example that does not fire (with the trace of why), or a negative one that does."""
    problems = []
    for kind, must_fire in (("positive", True), ("negative", False)):
        for i, example in enumerate(signature.examples[kind]):
            report = example_report(example, root, database)
            if report is not None and fires(signature, report) != must_fire:
                verb = "does not fire" if must_fire else "fires"
                problems.append(Flaw(signature.source, signature.lines[f"examples.{kind}.{i}"], signature.id,
                                     f"{kind} example {i + 1} {verb}", tuple(explain_match(signature, report))))
    return problems


def check_translations(database: Database, languages: Sequence[str] | None = None) -> Result:
    """Every bundled signature needs its words in each report language; a pack without them is one warning.

    Reports read translations from the bundled catalogue only, so another pack's
    signatures are shown in English there: worth saying once, not a fault of the pack.
    """
    from .render.i18n import LANGUAGES, signature_catalog

    problems: list[Flaw] = []
    warnings: list[str] = []
    bundled = default_directory().resolve()
    for lang in LANGUAGES[1:] if languages is None else languages:
        catalog = signature_catalog(lang)["signatures"]
        untranslated: dict[Path, list[str]] = {}
        for signature in database.signatures:
            entry = catalog.get(signature.id) or {}
            missing = [key for key in ("title", "explain", "actions") if not entry.get(key)]
            pack = signature.source.parent.resolve()
            if missing and pack == bundled:
                problems.append(Flaw(signature.source, signature.lines["id"], signature.id,
                                     f"no {lang} {', '.join(missing)}"))
            elif missing:
                untranslated.setdefault(pack, []).append(signature.id)
        warnings.extend(f"signature pack {pack}: no {lang} words for {len(ids)} signature(s) ({', '.join(ids)}); "
                        f"{lang} reports show them in English" for pack, ids in untranslated.items())
    return Result(problems, warnings)


_QUANTIFIER = later.compile(r"(?:(?P<base>[*+?])|\{\d*+(?:(?P<comma>,)(?P<high>\d*+))?\})(?P<mode>[?+]?)")
_GROUP_OPEN = later.compile(r"\((?:\?(?P<atomic>>|<?[=!])|\?(?:P?<\w+>|[a-zA-Z-]*:|\||P=\w+\)))?")
_NOT_A_GROUP = later.compile(r"\(\?(?:#[^)(]*+|[a-zA-Z-]*+)\)")
"""Inline flags (`(?i)`) and comments (without a parenthesis of their own): nothing to quantify."""
_ESCAPE = later.compile(r"\\(?:[pPN]\{[^}]*\}|x\{[^}]*\}|.)", regex.DOTALL)
_CLASS = later.compile(r"\[\^?\]?(?:[^\]\\\[]++|\\.|\[:\w{1,16}:\]){0,64}+\]", regex.DOTALL)
"""A character class: runs of plain characters, escapes and POSIX names, 64 of them at the most. A bare `[`
inside is read as the start of another class, so a text of many `[` that never close is scanned once, not once
from each `[`: the walk below stays linear in the pattern's length."""


@dataclass
class _Group:
    start: int
    atomic: bool
    repeats: bool = False
    """Whether an unbounded, backtracking quantifier sits inside."""


def nested_quantifiers(pattern: str) -> list[str]:
    """The parts of `pattern` where an unbounded quantifier repeats a group that holds one (`(\\d+)+`, `(?:a*b?)*`).

    Such a group can split one run of text in exponentially many ways before it fails. An atomic
    group (`(?>...)`), a lookaround or a possessive quantifier (`*+`, `++`) on either level gives
    the engine nothing to retry, so those pass.
    """
    found: list[str] = []
    stack = [_Group(0, atomic=False)]
    i = 0
    while i < len(pattern):
        start, group = i, None
        if pattern[i] == "\\":
            escape = _ESCAPE.match(pattern, i)
            i = escape.end() if escape else len(pattern)  # a lone trailing backslash: nothing follows to scan
        elif pattern[i] == "[" and (cls := _CLASS.match(pattern, i)):
            i = cls.end()
        elif pattern[i] == "(" and (flags := _NOT_A_GROUP.match(pattern, i)):
            i = flags.end()
            continue
        elif pattern[i] == "(":
            opened = _GROUP_OPEN.match(pattern, i)
            assert opened is not None  # its tail is optional: it matches at any "("
            stack.append(_Group(i, atomic=bool(opened["atomic"])))
            i = opened.end()
            continue
        elif pattern[i] == ")" and len(stack) > 1:
            group = stack.pop()
            start, i = group.start, i + 1
        else:
            i += 1
        inner = group is not None and group.repeats and not group.atomic
        quantifier = _QUANTIFIER.match(pattern, i)
        if quantifier:
            unbounded = quantifier["base"] in ("*", "+") or bool(quantifier["comma"] and not quantifier["high"])
            backtracks = unbounded and quantifier["mode"] != "+"
            if backtracks and inner:
                found.append(pattern[start : quantifier.end()])
            stack[-1].repeats |= backtracks
            i = quantifier.end()
        stack[-1].repeats |= inner
    return found


def check_patterns(signature: Signature) -> list[Flaw]:
    """A pattern with nested quantifiers: one crafted line could hold the whole analysis for minutes."""
    return [Flaw(signature.source, signature.lines["match"], signature.id,
                 f"pattern /{pattern.pattern}/ nests quantifiers in {part!r}: one long line can take minutes; "
                 "make a level possessive (`++`, `*+`) or atomic (`(?>...)`)")
            for pattern in signature.patterns for part in nested_quantifiers(pattern.pattern)]


def lint(database: Database, root: Path, flaws: list[Flaw] | None = None) -> Result:
    """Every problem of every signature in `database`, after the `flaws` loading found (none when sound)."""
    problems = [*(flaws or []), *(problem for signature in database.signatures
                                  for problem in (*check_patterns(signature),
                                                  *check_examples(signature, root, database)))]
    translations = check_translations(database)
    return Result(sorted(problems + translations.problems, key=lambda flaw: (str(flaw.path), flaw.line)),
                  translations.warnings)
