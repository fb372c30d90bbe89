"""The fleet report: one self-contained HTML page (inline CSS and SVG, no script, CSP) over a store.

It shares the single-case report's stylesheet and safety rules: input text
reaches the page only through jinja2's autoescape, control characters are made
visible, and the Content-Security-Policy forbids loading or running anything.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from .. import __version__, later
from ..names import safe
from ..render.html_report import CSP
from . import fleet
from .buckets import buckets

PALETTE = ("#b42318", "#1d4ed8", "#b45309", "#047857", "#7c3aed", "#be185d", "#0e7490", "#4d7c0f", "#9f1239",
           "#334155")
"""Colours of the causes, most frequent cause first, when there are no more causes than colours."""


def cause_colours(causes: tuple[str, ...]) -> dict[str, str]:
    """A distinct colour per cause: PALETTE's while it lasts, else hues spread evenly round the colour wheel
    (alternating two lightnesses so neighbours differ more), so no two causes ever share a colour."""
    if len(causes) <= len(PALETTE):
        return dict(zip(causes, PALETTE))
    return {cause: f"hsl({360 * i // len(causes)}, 70%, {38 if i % 2 else 50}%)" for i, cause in enumerate(causes)}


@dataclass(frozen=True)
class Rect:
    """One stacked bar segment of the trend chart, in viewBox units."""

    x: float
    y: float
    width: float
    height: float
    colour: str
    title: str


@cache
def environment() -> jinja2.Environment:
    """Fleet templates first, then the single-case report's (for its stylesheet); autoescape everywhere."""
    here = Path(__file__).parent / "templates"
    shared = Path(__file__).parent.parent / "render" / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([here, shared]), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["path_breaks"] = path_breaks
    return env


_AFTER_SEPARATOR = later.compile(r"(?<=[/\\])")


def path_breaks(path: str) -> Markup:
    """A path escaped, with a line-break opportunity after each separator: a narrow column wraps it between
    folders, never inside a name (the page's `.path` breaks a word only when one name is wider than the column)."""
    return Markup("<wbr>").join(escape(part) for part in _AFTER_SEPARATOR.split(safe(path)))


def render(conn: sqlite3.Connection, title: str = "Fleet report", since: str | None = None,
           until: str | None = None) -> str:
    """The fleet report of the store behind `conn` as one HTML document; the chart over `since`..`until`."""
    found, errors = buckets(conn)
    trend = fleet.trend(conn, since, until)
    total = conn.execute("SELECT COUNT(*) FROM cases").fetchone()[0]
    undated = tuple(dict.fromkeys(b.cause for b in found if b.cause not in trend.causes))
    colours = cause_colours(trend.causes + undated)
    return environment().get_template("fleet.html.j2").render(
        csp=CSP, title=title, version=__version__, safe=safe,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        total=total, errors=errors, buckets=found, trend=trend,
        colours=colours, bars=_bars(trend, colours), nodes=fleet.bad_nodes(conn),
        node_rule={"cases": fleet.MIN_NODE_CASES, "lift": f"{fleet.MIN_NODE_LIFT:g}",
                   "chance": f"{fleet.NODE_CHANCE:g}"}, moves=fleet.card_or_slot(conn),
        versions=fleet.version_links(conn),
        version_rule={"cases": fleet.MIN_CASES_FOR_CORRELATION, "lift": f"{fleet.MIN_LIFT:g}"}, failed=_failed(conn),
    )


CHART = {"width": 1000, "height": 220, "left": 44, "bottom": 26, "top": 8}


def _bars(trend: fleet.Trend, colours: dict[str, str]) -> dict:
    """Stacked bars, one per period, segments in cause order; y ticks at the top count and its half."""
    if not trend.periods:
        return {"rects": (), "peak": 0, "labels": (), **CHART}
    plot_w = CHART["width"] - CHART["left"] - 8
    plot_h = CHART["height"] - CHART["bottom"] - CHART["top"]
    peak = max(sum(c.values()) for c in trend.counts) or 1
    step = plot_w / len(trend.periods)
    rects = []
    for i, (period, counts) in enumerate(zip(trend.periods, trend.counts)):
        base: float = CHART["top"] + plot_h
        for cause in trend.causes:
            n = counts.get(cause, 0)
            if n:
                height = plot_h * n / peak
                base -= height
                rects.append(Rect(round(CHART["left"] + i * step + step * 0.1, 1), round(base, 1),
                                  round(max(step * 0.8, 0.5), 1), round(height, 1), colours[cause],
                                  f"{period}: {n} {cause}"))
    every = max(1, len(trend.periods) // 8)
    labels = tuple((round(CHART["left"] + (i + 0.5) * step, 1), p) for i, p in enumerate(trend.periods)
                   if i % every == 0)
    return {"rects": tuple(rects), "peak": peak, "labels": labels, **CHART}


def _failed(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute("""SELECT (SELECT MIN(path) FROM locations l WHERE l.case_id = c.id), c.diagnostic
                           FROM cases c WHERE c.status = 'error' ORDER BY 1 LIMIT 50""").fetchall()
