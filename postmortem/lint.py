"""`postmortem signatures lint`: a signature pack is only as good as its examples.

Loading already checks the schema, the cause vocabulary and duplicate ids.
Lint then runs every entry's examples through the whole pipeline (a positive
example must fire the entry, a negative one must not), checks that every
entry has its words in every language the reports speak, and refuses patterns
whose matching time can explode (a quantified group holding a quantifier).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import regex

from .pipeline import analyze, analyze_text
from .signatures import Database, Signature


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one signature."""

    signature: str
    message: str


def fired(example: str | Mapping[str, str], root: Path) -> list[str] | None:
    """Ids of the signatures an example fires; None for a file example that is not at hand.

    Text examples are analysed as a log; `{file: path}` examples (cores and
    other binary inputs) are read from `root`, the pack's repository.
    """
    if isinstance(example, Mapping):
        path = root / example["file"]
        if not path.is_file():
            return None
        return [f.signature for f in analyze([str(path)]).findings]
    return [f.signature for f in analyze_text(example, "example.log").findings]


def check_examples(signature: Signature, root: Path) -> list[Problem]:
    """A positive example that does not fire, or a negative one that does."""
    problems = []
    for kind, must_fire in (("positive", True), ("negative", False)):
        for i, example in enumerate(signature.examples[kind]):
            result = fired(example, root)
            if result is not None and (signature.id in result) != must_fire:
                verb = "does not fire" if must_fire else "fires"
                problems.append(Problem(signature.id, f"{kind} example {i + 1} {verb}"))
    return problems


def check_translations(database: Database) -> list[Problem]:
    """Every signature needs its title, explanation and actions in each report language."""
    from .render.i18n import LANGUAGES, signature_catalog

    problems = []
    for lang in LANGUAGES:
        if lang == "en":
            continue
        catalog = signature_catalog(lang)["signatures"]
        for signature in database.signatures:
            entry = catalog.get(signature.id) or {}
            missing = [key for key in ("title", "explain", "actions") if not entry.get(key)]
            if missing:
                problems.append(Problem(signature.id, f"no {lang} {', '.join(missing)}"))
    return problems


_QUANTIFIER = regex.compile(r"(?:(?P<base>[*+?])|\{\d*+(?:(?P<comma>,)(?P<high>\d*+))?\})(?P<mode>[?+]?)")
_GROUP_OPEN = regex.compile(r"\((?:\?(?P<atomic>>|<?[=!])|\?(?:P?<\w+>|[a-zA-Z-]*:|\||P=\w+\)))?")
_NOT_A_GROUP = regex.compile(r"\(\?(?:#[^)]*|[a-zA-Z-]*)\)")
"""Inline flags (`(?i)`) and comments: nothing to quantify."""
_ESCAPE = regex.compile(r"\\(?:[pPN]\{[^}]*\}|x\{[^}]*\}|.)", regex.DOTALL)
_CLASS = regex.compile(r"\[\^?\]?(?:\\.|\[:\w+:\]|[^\]])*\]", regex.DOTALL)


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


def check_patterns(signature: Signature) -> list[Problem]:
    """A pattern with nested quantifiers: one crafted line could hold the whole analysis for minutes."""
    return [Problem(signature.id, f"pattern /{pattern.pattern}/ nests quantifiers in {part!r}: one long line can take "
                                  "minutes; make a level possessive (`++`, `*+`) or atomic (`(?>...)`)")
            for pattern in signature.patterns for part in nested_quantifiers(pattern.pattern)]


def lint(database: Database, root: Path) -> list[Problem]:
    """Every problem of every signature in `database` (empty when the pack is sound)."""
    problems = [problem for signature in database.signatures
                for problem in (*check_patterns(signature), *check_examples(signature, root))]
    return problems + check_translations(database)
