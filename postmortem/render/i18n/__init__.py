"""The words of a report in the reader's language; evidence always stays verbatim.

Two catalogues, both plain YAML a translator edits without touching code:

- `postmortem/render/i18n/<lang>.yaml`: the interface (headings, labels,
  the verdict line) under `ui:`, and under `patterns:` regex -> template
  pairs for the sentences other stages write (confidence reasons,
  diagnostics); a sentence no pattern knows stays in English.
- `signatures/i18n/<lang>.yaml` (and the generated `<lang>.*.yaml` beside
  it): signature id -> title / explain / actions, and cause -> summary.
  `explain` keeps the English entry's `{field}` placeholders and is filled
  from the finding's first evidence event, as in English.

English is the source language: its signature words come from the findings
themselves, so a signature without a translation falls back to English.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ... import later, user_cache
from ...model import Finding, Report
from ...signatures import default_directory, render_explanation

LANGUAGES = ("en", "zh-CN")
"""Languages a report can be written in; the first is the source language."""

_UI_DIR = Path(__file__).parent


def default_language(environ: Mapping[str, str] = os.environ) -> str:
    """The language the locale asks for (LC_ALL, then LC_MESSAGES, then LANG); English otherwise."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:
            return "zh-CN" if value.lower().startswith("zh") else "en"
    return "en"


@dataclass(frozen=True)
class Words:
    """A finding's sentences in one language (title, explanation, actions, confidence reason)."""

    title: str
    explanation: str
    actions: tuple[str, ...]
    reason: str


class Translator:
    """Everything a renderer says, in one language."""

    def __init__(self, lang: str = "en") -> None:
        if lang not in LANGUAGES:
            raise ValueError(f"unknown language {lang!r}; one of {LANGUAGES}")
        self.lang = lang
        ui = ui_catalog(lang)
        self._ui: Mapping[str, str] = {**ui_catalog("en")["ui"], **ui["ui"]}
        self._patterns = tuple((later.compile(p), t) for p, t in (ui.get("patterns") or {}).items())
        self._signatures = signature_catalog(lang) if lang != LANGUAGES[0] else {}

    def __call__(self, key: str, **fields: Any) -> str:
        """An interface string, with `{name}` placeholders filled."""
        return self._ui[key].format(**fields) if fields else self._ui[key]

    def sentence(self, text: str) -> str:
        """A sentence another stage wrote (reason part, diagnostic), translated when a pattern knows it."""
        for pattern, template in self._patterns:
            found = pattern.fullmatch(text)
            if found:
                return template.format(*found.groups(), **found.groupdict())
        return text

    def reason(self, text: str) -> str:
        """A confidence reason: '; '-separated parts, each translated on its own."""
        return self("list_separator").join(self.sentence(part) for part in text.split("; "))

    def cause(self, cause: str) -> str:
        """The cause's one-line summary, or '' when the catalogue has none."""
        causes = self._signatures.get("causes", {}) if self._signatures else cause_summaries()
        return str(causes.get(cause, ""))

    def code_name(self, kind: str, number: int, english: str) -> str | None:
        """An Xid's or SXid's catalog name in this language (Xids: signatures/i18n/xid-names.<lang>.tsv; the English
        one in English), or None where no table has it (the finding's translated title names it then)."""
        if self.lang == LANGUAGES[0]:
            return english
        return xid_names(self.lang).get(number) if kind == "xid" else None

    def words(self, finding: Finding, report: Report) -> Words:
        """The finding's sentences; the explanation is refilled from its first evidence event."""
        entry = self._signatures.get("signatures", {}).get(finding.signature) if self._signatures else None
        reason = self.reason(finding.confidence_reason)
        if not entry:
            return Words(finding.title, finding.explanation, tuple(finding.actions), reason)
        first = report.event(finding.evidence[0]) if finding.evidence else None
        explanation = render_explanation(_unfold(str(entry["explain"])), first.fields if first else {})
        return Words(str(entry["title"]), explanation, tuple(str(a) for a in entry["actions"]), reason)


_FOLDED_SPACE = later.compile(r"(?<=[。，；：！？、）」”])\s+")


def _unfold(text: str) -> str:
    """Drop the spaces YAML folding puts after full-width punctuation where a translator broke a line."""
    return _FOLDED_SPACE.sub("", text.strip())


@cache
def ui_catalog(lang: str) -> Mapping[str, Any]:
    """The interface catalogue of one language."""
    return user_cache.parsed_yaml(_UI_DIR / f"{lang}.yaml") or {}


@cache
def signature_catalog(lang: str, directory: Path | None = None) -> Mapping[str, Mapping[str, Any]]:
    """`signatures` (id -> title/explain/actions) and `causes` (name -> summary) of one language.

    Reads `<lang>.yaml` and every `<lang>.*.yaml` (generated parts) under the
    signature directory's `i18n/` folder.
    """
    folder = (directory or default_directory()) / "i18n"
    merged: dict[str, dict[str, Any]] = {"signatures": {}, "causes": {}}
    for path in sorted(folder.glob(f"{lang}.yaml")) + sorted(folder.glob(f"{lang}.*.yaml")):
        document = user_cache.parsed_yaml(path) or {}
        for part in merged:
            merged[part].update(document.get(part) or {})
    return merged


@cache
def xid_names(lang: str) -> Mapping[int, str]:
    """Xid number -> its catalog name in `lang`, from the translators' table beside the signatures' words."""
    path = default_directory() / "i18n" / f"xid-names.{lang}.tsv"
    if not path.is_file():
        return {}
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    return {int(row[0]): row[2] for row in rows if len(row) > 2 and row[0].isdigit() and row[2]}


@cache
def cause_summaries() -> Mapping[str, str]:
    """The English cause summaries of signatures/causes.yaml."""
    path = default_directory() / "causes.yaml"
    document = user_cache.parsed_yaml(path) or {}
    return {name: str(entry.get("summary", "")) for name, entry in (document.get("causes") or {}).items()}
