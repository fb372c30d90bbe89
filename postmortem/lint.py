"""`postmortem signatures lint`: a signature pack is only as good as its examples.

Loading already checks the schema, the cause vocabulary and duplicate ids.
Lint then runs every entry's examples through the whole pipeline (a positive
example must fire the entry, a negative one must not) and checks that every
entry has its words in every language the reports speak.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

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


def lint(database: Database, root: Path) -> list[Problem]:
    """Every problem of every signature in `database` (empty when the pack is sound)."""
    problems = [problem for signature in database.signatures for problem in check_examples(signature, root)]
    return problems + check_translations(database)
