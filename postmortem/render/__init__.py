"""Renderers: a Report in the form each audience reads (terminal, machines, bug trackers, people)."""

from __future__ import annotations

from collections.abc import Callable

from ..model import Report
from . import html_report, json_report, markdown_report, text_report
from .i18n import LANGUAGES, default_language

Renderer = Callable[..., str]


def _json(report: Report, lang: str = "en", color: bool = False) -> str:
    """JSON is for machines: one language (the contract's), never coloured."""
    return json_report.render(report)


FORMATS: dict[str, Renderer] = {
    "text": text_report.render,
    "json": _json,
    "markdown": markdown_report.render,
    "html": html_report.render,
}
"""Output format name -> function(report, lang="en", color=False) -> str."""

__all__ = ["FORMATS", "LANGUAGES", "default_language"]
