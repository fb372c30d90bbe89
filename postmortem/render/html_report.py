"""One self-contained HTML file a person trusts in a minute: verdict on top, then its proof.

Everything is inline (CSS, SVG); there is no script, and the Content-Security-
Policy forbids any, so the file is safe to open from an email attachment.
Input text only ever reaches the page through jinja2's autoescape: nothing
here marks input as safe markup.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from ..core.unwind import GUESSES
from ..model import Finding, Report
from . import view
from .i18n import Translator

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src 'none'; "
    "script-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'"
)
"""Nothing may load or run; only the inline stylesheet applies."""

EVIDENCE_SHOWN = 8
"""Evidence events shown per finding; the rest are counted."""


@cache
def environment() -> jinja2.Environment:
    """The template environment: autoescape for every template, undefined names are errors."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(report: Report, lang: str = "en", color: bool = False) -> str:
    """The report as one HTML document (`color` is for terminals and ignored here)."""
    t = Translator(lang)
    return environment().get_template("report.html.j2").render(
        t=t,
        lang=lang,
        csp=CSP,
        report=report,
        verdict=_finding(report, report.verdict, t) if report.verdict else None,
        findings=[_finding(report, f, t) for f in report.findings],
        others=[_finding(report, f, t) for f in report.others],
        link_note=view.link_note,
        gpus=[{"gpu": line.gpu, "finding": line.finding, "title": t.words(line.finding, report).title,
               "tally": view.tally_words(line.tallies, t), "others": line.others} for line in view.gpu_summary(report)],
        timeline=view.timeline(report),
        lane_of=view.lane_of,
        plots=view.telemetry_plots(report),
        cores=[_core(core) for core in report.cores],
        facts=[(name, "; ".join(view.fact_value(v) for v in _values(values))) for name, values in report.facts.items()],
        where=lambda event: view.where(event, t),
        thread_label=view.thread_label,
        when=view.when,
        suspects=[event for event in map(report.event, report.suspects) if event is not None],
        safe=view.safe,
        fold_frames=view.fold_frames,
        guesses=GUESSES,
        nothing_known=view.nothing_known(report, t),
    )


def _finding(report: Report, finding: Finding, t: Translator) -> dict[str, Any]:
    """A finding with its words in the reader's language and its evidence folded for display."""
    events = view.evidence_of(report, finding)
    return {
        "finding": finding,
        "words": t.words(finding, report),
        "cause_summary": t.cause(finding.cause),
        "tally": view.tally_words(view.tallies(report, finding), t),
        "evidence": [(e, view.evidence_lines(e)) for e in events[:EVIDENCE_SHOWN]],
        "more": max(0, len(events) - EVIDENCE_SHOWN),
    }


def _values(values: Any) -> list[Any]:
    return list(values) if isinstance(values, (list, tuple, set, frozenset)) else [values]


def _core(core: Any) -> dict[str, Any]:
    """What the template shows of a core; attributes read with getattr, so a core record may grow."""
    threads = tuple(getattr(core, "threads", ()) or ())
    modules = tuple(getattr(core, "modules", ()) or ())
    environment_values = (getattr(core, "environment", None) or {}).get("values") or {}
    return {
        "core": core,
        "crashed": [th for th in threads if getattr(th, "crashed", False)],
        "others": [th for th in threads if not getattr(th, "crashed", False)],
        "modules": sorted(modules, key=lambda m: getattr(m, "kind", "") not in view.GPU_KINDS),
        "gpu_kinds": view.GPU_KINDS,
        "environment": environment_values,
        "gpu": getattr(core, "gpu", None) or {},
    }
