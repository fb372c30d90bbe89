"""Renderers: a Report in the form each audience reads (terminal, machines, bug trackers, people).

Each renderer is imported when its format is asked for: a JSON run never pays
for jinja2, a terminal run never for the HTML templates.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..model import Report
from .i18n import LANGUAGES, default_language

Renderer = Callable[..., str]

_MODULES = {"text": "text_report", "json": "json_report", "markdown": "markdown_report", "html": "html_report"}


def render(fmt: str, report: Report, lang: str = "en", color: bool = False, debug: bool = False,
           width: int = 88, all_threads: bool = False) -> str:
    """The report in format `fmt` (one of FORMATS); JSON is one language (the contract's), never coloured, and
    always holds what `debug` adds to the text (each input's lines seen but not read); the text's prose is wrapped
    at `width` columns, and a core's every thread is shown with `all_threads` (the JSON always holds them all)."""
    module = importlib.import_module(f"{__name__}.{_MODULES[fmt]}")
    if fmt == "json":
        return module.render(report)
    if fmt == "text":
        return module.render(report, lang=lang, color=color, debug=debug, width=width, all_threads=all_threads)
    return module.render(report, lang=lang, color=color)


FORMATS: dict[str, Renderer] = {
    fmt: (lambda report, lang="en", color=False, debug=False, width=88, all_threads=False, fmt=fmt:
          render(fmt, report, lang, color, debug, width, all_threads))
    for fmt in _MODULES
}
"""Output format name -> function(report, lang="en", color=False, debug=False, width=88, all_threads=False)."""

__all__ = ["FORMATS", "LANGUAGES", "default_language", "render"]
