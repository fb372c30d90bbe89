"""What the HTML and Markdown reports show, computed once from a Report: plain data, no markup.

Input text stays text here; escaping is the job of whoever writes markup
(jinja2 autoescape for HTML, `markdown_report` for Markdown).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from .. import later
from ..join import gpu_key
from ..knowledge import data_rows
from ..model import YEARLESS, Event, Finding, Report, driver_code
from ..names import safe
from .i18n import Translator

if TYPE_CHECKING:
    import regex

    from ..core.report import Frame, Thread

GPU_KINDS = ("nvidia-driver", "cuda-library", "framework")
EXTENSION_KINDS = ("user-extension",)
"""Compiled extension modules from site-packages or the job's directory: a custom op, or numpy's; never listed
as GPU libraries (the interpreter's own, lib-dynload's, are `python-stdlib` and listed with neither)."""


def merge_note(thread: Thread) -> str | None:
    """How a thread's Python frames were put on its eval-loop frames, where that is worth a reader's attention:
    only when it is a guess (some Python frames on no eval-loop frame, or an eval-loop frame with none); a certain
    pairing goes unsaid (the JSON keeps the note)."""
    placed = sum(len(frame.python_frames) for frame in thread.frames)
    loops_without = any(not frame.python_frames for frame in thread.frames if _runs_python(frame))
    certain = thread.python_frames is not None and placed == len(thread.python_frames) and not loops_without
    return None if certain or not thread.python_merge else thread.python_merge


def thread_label(thread: Thread) -> str:
    """A thread as its heading names it: its id, and its name where the core holds one (`31717 (data-loader)`)."""
    return f"{thread.tid} ({safe(thread.name)})" if thread.name else str(thread.tid)


def _runs_python(frame: Frame) -> bool:
    from ..core.python_stack import is_eval_loop  # a core's view only

    return is_eval_loop(frame.symbol)


def module_groups(modules: Sequence[Any]) -> list[tuple[str, list[Any]]]:
    """(catalogue key of the heading, modules) for the GPU libraries and the compiled extensions a core loaded."""
    groups = [("gpu_libraries", [m for m in modules if m.kind in GPU_KINDS]),
              ("extensions_loaded", [m for m in modules if m.kind in EXTENSION_KINDS])]
    return [(key, found) for key, found in groups if found]
"""Module kinds that belong to the GPU stack; highlighted in core sections."""

def fact_value(value: Any) -> str:
    """One value of a fact as a person reads it: a GPU's identity as `pci 0000:3b:00, uuid GPU-…`."""
    if isinstance(value, Mapping):
        return ", ".join(f"{key} {safe(str(item))}" for key, item in value.items() if item not in (None, ""))
    if isinstance(value, (list, tuple)):
        return " ".join(safe(str(item)) for item in value)
    return safe(str(value))


def where(event: Event, t: Translator) -> str:
    """`path:line-end` (archive member included in the path), or the path and the byte offset in it of a binary
    input's evidence (a core's note) in the reader's words."""
    place = event.where
    if place.line is None:
        return safe(place.path) if place.offset is None else t("at_byte", path=safe(place.path), offset=place.offset)
    span = f"-{place.end_line}" if place.end_line and place.end_line != place.line else ""
    section = getattr(place, "section", None)
    return f"{safe(place.path)}:{place.line}{span}" + (f" [{safe(str(section))}]" if section else "")


@dataclass(frozen=True)
class Line:
    """One shown evidence line: its number in the input when known, how often it repeated in a row,
    whether it is context around the evidence rather than evidence, and its parts with the matched
    anchors (the literals that made the line a candidate) marked."""

    number: int | None
    text: str
    repeats: int = 1
    context: bool = False
    parts: tuple[tuple[str, bool], ...] = ()


def evidence_lines(event: Event, limit: int = 40) -> list[Line]:
    """The event's lines in their context, runs of identical lines folded into one with a count."""
    raw = event.text.splitlines() or [""]
    span = (event.where.end_line or event.where.line or 0) - (event.where.line or 0) + 1
    numbered = event.where.line is not None and span == len(raw)
    first = event.where.line or 0
    rows = [(first - len(event.context_before) + i if numbered else None, text, True)
            for i, text in enumerate(event.context_before)]
    rows += [(first + i if numbered else None, text, False) for i, text in enumerate(raw[:limit])]
    rows += [(first + len(raw) + i if numbered else None, text, True) for i, text in enumerate(event.context_after)]
    folded: list[Line] = []
    for number, text, is_context in rows:
        shown = safe(text)
        if folded and folded[-1].text == shown and folded[-1].context == is_context:
            last = folded[-1]
            folded[-1] = Line(last.number, last.text, last.repeats + 1, is_context, last.parts)
        else:
            folded.append(Line(number, shown, 1, is_context, () if is_context else marked(shown)))
    return folded


def marked(text: str) -> tuple[tuple[str, bool], ...]:
    """The text cut into parts, True where a source's anchor literal matched (what made it evidence)."""
    pattern = _anchor_pattern()
    parts: list[tuple[str, bool]] = []
    at = 0
    for found in pattern.finditer(text):
        if found.start() > at:
            parts.append((text[at:found.start()], False))
        parts.append((found.group(), True))
        at = found.end()
    if at < len(text):
        parts.append((text[at:], False))
    return tuple(parts) or ((text, False),)


@cache
def _anchor_pattern() -> regex.Pattern:
    """Every anchor of 4 characters or more, as one pattern that finds the longest at each place. The anchors are
    laid out as a trie (shared prefixes written once): an alternation of 1,700 literals tried one after another at
    every character grew with each table row until an adversarial line took half a second. Anchors found in any
    letter case are a second trie, matched so."""
    from ..prefilter import searched
    from ..sources import source_cards

    written = [searched(a) for s in source_cards() for a in s.anchors]
    exact = {text.decode("utf-8", "replace").strip() for text, any_case in written if not any_case}
    any_case = {text.decode("utf-8", "replace").strip() for text, any_case in written if any_case}
    pattern = _trie_pattern(sorted(lit for lit in exact if len(lit) >= 4))
    if lowered := sorted(lit for lit in any_case if len(lit) >= 4):
        pattern += "|(?i:" + _trie_pattern(lowered) + ")"
    import regex

    return regex.compile(pattern)


def _trie_pattern(literals: list[str]) -> str:
    """A regex that matches exactly `literals`, the longest one where several start at one place."""
    import regex

    root: dict[str, dict] = {}
    for literal in literals:
        node = root
        for char in literal:
            node = node.setdefault(char, {})
        node[""] = {}  # a literal ends here

    def written(node: dict[str, dict]) -> str:
        branches = [regex.escape(char) + written(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return written(root)


def evidence_of(report: Report, finding: Finding) -> list[Event]:
    """The finding's evidence events in report order."""
    return [e for e in (report.event(i) for i in finding.evidence) if e is not None]


# ---------------------------------------------------------------- counts and GPUs

TALLIES_SHOWN = 4
"""Tallies printed per finding; the rest are counted."""


@dataclass(frozen=True)
class Tally:
    """How often one report of a finding came on one GPU (`Xid 13 x 4,893 on 0000:3b:00.0`): the counts folded
    into events are otherwise only in the JSON."""

    what: str
    count: int
    gpu: str | None


def gpu_of(event: Event) -> str | None:
    """The GPU an event names, in the one spelling of a PCI address (join.gpu_key), with its host when it has one;
    None for an NVSwitch's report (an SXid), as in facts.collect_gpus."""
    pci = gpu_key(event.fields.get("pci")) if "sxid" not in event.fields else None
    host = event.fields.get("host")
    return None if pci is None else f"{host} {pci}" if host else pci


def report_label(event: Event) -> str:
    """What an event reports, in a few words: `Xid 13`, `SXid 12028`, the CUDA error, else its kind."""
    return driver_code(event) or safe(str(event.fields.get("error") or event.kind))


def link_note(finding: Finding, t: Translator) -> str:
    """What places a finding that is not the verdict: the root it follows, or why it is not about the job."""
    if finding.outside:
        return t("outside_job", why=finding.outside)
    return t("consequence_of", root=finding.consequence_of) if finding.consequence_of else ""


def tallies(report: Report, finding: Finding) -> list[Tally]:
    """The finding's reports counted by what they say and the GPU they name, first seen first."""
    counts: dict[tuple[str, str | None], int] = {}
    for event in evidence_of(report, finding):
        key = (report_label(event), gpu_of(event))
        counts[key] = counts.get(key, 0) + event.count
    return [Tally(what, count, gpu) for (what, gpu), count in counts.items()]


def tally_words(shown: Sequence[Tally], t: Translator) -> str:
    """`Xid 79 x 1 on 0000:01:00.0; Xid 13 x 4,893 on 0000:3b:00.0`, or '' when it would say no more than the
    finding (one report on no named GPU)."""
    if not shown or (len(shown) == 1 and shown[0].count == 1 and shown[0].gpu is None):
        return ""
    words = [t("tally_on" if tally.gpu else "tally", what=tally.what, count=f"{tally.count:,}", gpu=tally.gpu or "")
             for tally in shown[:TALLIES_SHOWN]]
    if len(shown) > TALLIES_SHOWN:
        words.append(t("more_events", count=len(shown) - TALLIES_SHOWN))
    return "; ".join(words)


@dataclass(frozen=True)
class GpuLine:
    """One sick GPU: its worst finding (the first in rank order that names it), that finding's reports on it (the
    GPU left out: the line names it), and how many other findings name it."""

    gpu: str
    finding: Finding
    tallies: tuple[Tally, ...]
    others: int


def gpu_summary(report: Report) -> list[GpuLine]:
    """One line per GPU a finding names, when several do: a second GPU's own fault (an ECC error needing its own
    RMA) must read as that GPU's, not as a detail under the first GPU's verdict."""
    named: dict[str, list[tuple[Finding, list[Tally]]]] = {}
    for finding in report.findings:
        counted = tallies(report, finding)
        for gpu in dict.fromkeys(tally.gpu for tally in counted if tally.gpu):
            named.setdefault(gpu, []).append((finding, [Tally(tally.what, tally.count, None) for tally in counted
                                                        if tally.gpu == gpu]))
    if len(named) < 2:
        return []
    return [GpuLine(gpu, found[0][0], tuple(found[0][1]), len(found) - 1) for gpu, found in named.items()]


# ---------------------------------------------------------------- timeline

DRAW_ORDER = ("event", "finding", "consequence", "root")
"""Marks are drawn weakest first, so a root is never hidden under another mark at the same time."""


@dataclass(frozen=True)
class Mark:
    """One event on the timeline: lane, position and how it relates to the findings."""

    event: Event
    lane: int
    x: float
    role: str  # "root", "consequence", "finding" or "event"
    label: str

    @property
    def order(self) -> int:
        return DRAW_ORDER.index(self.role)


@dataclass(frozen=True)
class Link:
    """A root finding's event joined to its consequence's event."""

    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True)
class Timeline:
    """The geometry of the SVG timeline, in viewBox units."""

    lanes: tuple[str, ...]
    marks: tuple[Mark, ...]
    links: tuple[Link, ...]
    ticks: tuple[tuple[float, str], ...]
    zone: str
    untimed: int
    yearless: int = 0
    """Events whose stamp has no year: shown as written, never placed on the wall-clock axis."""
    width: int = 1000
    left: int = 170
    lane_height: int = 34
    top: int = 24

    @property
    def height(self) -> int:
        return self.top + self.lane_height * len(self.lanes) + 34

    def y(self, lane: int) -> float:
        return self.top + self.lane_height * lane + self.lane_height / 2


def lane_of(event: Event) -> str:
    """The lane an event belongs to: its GPU, else its rank, else its host, else its input."""
    fields = event.fields
    host = fields.get("host")
    prefix = f"{host} " if host else ""
    for name, label in (("pci", "GPU {}"), ("gpu_index", "GPU {}"), ("gpu", "GPU {}"), ("rank", "rank {}")):
        value = fields.get(name)
        if value not in (None, "", [], ()):
            return prefix + label.format(value)
    if host:
        return f"host {host}"
    return PurePosixPath(event.where.path.split("!")[-1]).name or event.where.path


def normal_times(events: Iterable[Event]) -> tuple[dict[str, datetime], str]:
    """Event id -> time in one zone, and the zone's name (key of the UI catalogue).

    Aware times go to UTC; naive ones (the log named no zone) are taken as
    written, and the zone line says so.
    """
    timed = [(e.id, e.time) for e in events if isinstance(e.time, datetime)]
    aware = [time for _, time in timed if time.tzinfo is not None]
    times: dict[str, datetime] = {}
    for event_id, time in timed:
        moment = time.astimezone(UTC).replace(tzinfo=None) if time.tzinfo else time
        times[event_id] = moment
    if not timed or len(aware) == len(timed):
        zone = "zone_utc"
    elif not aware:
        zone = "zone_naive"
    else:
        zone = "zone_mixed"
    return times, zone


def timeline(report: Report) -> Timeline:
    """Every timed event on one axis; spacing grows with the log of the gap, so seconds and days both read.

    The axis is the wall clock; when no event has a date, it is seconds since boot (dmesg's `[ 1234.567890]`), so an
    uptime-stamped log still gets a timeline. A year-less stamp never goes on the wall clock (a guessed year would
    misplace it); with an uptime it goes on the relative axis, labelled as written.
    """
    times, zone = normal_times(report.events)
    start = min(times.values(), default=None)
    seconds = {i: (t - start).total_seconds() for i, t in times.items() if start is not None}
    if not times:
        seconds = {e.id: float(e.fields["uptime"]) for e in report.events if _uptime(e) is not None}
        zone = "axis_uptime"
    timed = sorted((e for e in report.events if e.id in seconds), key=lambda e: (seconds[e.id], e.id))
    lanes: list[str] = []
    for event in timed:
        if lane_of(event) not in lanes:
            lanes.append(lane_of(event))
    yearless = [e for e in report.events if e.time is None and e.clock == YEARLESS]
    untimed = len(report.events) - len(timed) - sum(e.id not in seconds for e in yearless)
    shape = Timeline(tuple(lanes), (), (), (), zone, untimed, len(yearless))
    positions = _positions([seconds[e.id] for e in timed], shape.left + 12, shape.width - 16)
    roles = _roles(report)
    marks = tuple(
        Mark(e, lanes.index(lane_of(e)), positions[i], roles.get(e.id, "event"),
             _label(times[e.id]) if e.id in times else " ".join(filter(None, (e.fields.get("stamp"),
                                                                              f"{seconds[e.id]:.3f} s"))))
        for i, e in enumerate(timed)
    )
    return Timeline(tuple(lanes), marks, _links(report, marks, shape), _ticks(marks), zone, untimed, len(yearless))


def _uptime(event: Event) -> float | None:
    """Seconds since boot an event without a date carries (dmesg's bracketed stamp), else None."""
    uptime = event.fields.get("uptime")
    return float(uptime) if event.time is None and isinstance(uptime, (int, float)) else None


def when(event: Event) -> str | None:
    """An event's time as shown: ISO 8601 for a date, a year-less stamp as written, or seconds since boot."""
    if event.time is not None:
        return event.time.isoformat()
    if event.clock == YEARLESS and isinstance(event.fields.get("stamp"), str):
        return str(event.fields["stamp"])
    uptime = _uptime(event)
    return None if uptime is None else f"{uptime:.6f} s since boot"


def _positions(moments: Sequence[float], left: float, right: float) -> list[float]:
    """x of each moment (seconds on one axis, in order)."""
    if not moments:
        return []
    steps = [0.0] + [1 + math.log10(1 + max(0.0, b - a)) for a, b in itertools.pairwise(moments)]
    steps = [0.0 if i and moments[i] == moments[i - 1] else s for i, s in enumerate(steps)]
    total = sum(steps)
    if total == 0:
        return [(left + right) / 2] * len(moments)
    placed, running = [], 0.0
    for step in steps:
        running += step
        placed.append(left + (right - left) * running / total)
    return placed


def _roles(report: Report) -> dict[str, str]:
    """Event id -> its strongest role: evidence of a root (the verdict or a cause of others), of a consequence, of
    any finding."""
    roots = {f.consequence_of for f in report.findings if f.consequence_of}
    if report.verdict is not None:
        roots.add(report.verdict.signature)
    roles: dict[str, str] = {}
    order = {"root": 3, "consequence": 2, "finding": 1}
    for finding in report.findings:
        role = "root" if finding.signature in roots else "consequence" if finding.consequence_of else "finding"
        for event_id in finding.evidence:
            if order[role] > order.get(roles.get(event_id, ""), 0):
                roles[event_id] = role
    return roles


def _links(report: Report, marks: Sequence[Mark], shape: Timeline) -> tuple[Link, ...]:
    placed = {m.event.id: m for m in marks}
    by_signature = {f.signature: f for f in report.findings}
    links = []
    for finding in report.findings:
        root = by_signature.get(finding.consequence_of or "")
        if root is None:
            continue
        start = next((placed[i] for i in root.evidence if i in placed), None)
        end = next((placed[i] for i in finding.evidence if i in placed), None)
        if start and end:
            links.append(Link(start.x, shape.y(start.lane), end.x, shape.y(end.lane)))
    return tuple(links)


def _ticks(marks: Sequence[Mark], spacing: float = 120) -> tuple[tuple[float, str], ...]:
    """Time labels under the axis at event positions, never closer than `spacing`; a date after the first drops
    the year they share."""
    ticks: list[tuple[float, str]] = []
    for mark in marks:
        if (not ticks or mark.x - ticks[-1][0] >= spacing) and (not ticks or mark.label != ticks[-1][1]):
            ticks.append((mark.x, mark.label))
    year = ticks[0][1][:5] if ticks and ticks[0][1][4:5] == "-" else None
    return tuple((x, label[5:] if i and year and label.startswith(year) else label) for i, (x, label) in
                 enumerate(ticks))


def _label(moment: datetime) -> str:
    """A date as shown on the axis, to the millisecond when the log gives one."""
    return moment.strftime("%Y-%m-%d %H:%M:%S") + (f".{moment.microsecond // 1000:03d}" if moment.microsecond else "")


# ---------------------------------------------------------------- telemetry

METRICS = (
    ("temperature", "°C", ("temp_c", "temperature.gpu", "gtemp")),
    ("power", "W", ("power_w", "power.draw", "pwr")),
    ("memory_used", "MiB", ("memory_used_mib", "memory.used", "fb")),
    ("utilization", "%", ("util_pct", "utilization.gpu", "sm")),
)
"""Plotted metric, its unit, and the columns that carry it: the telemetry source's canonical
names first, then raw nvidia-smi CSV and dmon spellings."""


@dataclass(frozen=True)
class Plot:
    """One metric of one GPU as an SVG polyline (viewBox 300 x 120), with event ticks."""

    gpu: str
    metric: str
    unit: str
    points: str
    low: float
    high: float
    start: str
    end: str
    events: tuple[tuple[float, str], ...] = field(default_factory=tuple)


def telemetry_plots(report: Report) -> list[Plot]:
    """Plots of `report.telemetry` (per-GPU time series, when a telemetry source gave any)."""
    data = getattr(report, "telemetry", None)
    if data is None:
        return []
    times, _ = normal_times(report.events)
    plots = []
    for gpu, frame in _frames(data):
        for (metric, unit), series in _metric_series(frame).items():
            plots.append(_plot(str(gpu), metric, unit, series, report, times))
    return plots


def _frames(data: Any) -> list[tuple[str, Any]]:
    """(gpu, frame) pairs from a mapping of frames, a list of records with a frame, or one frame with a GPU column."""
    if isinstance(data, Mapping):
        return [(str(k), v) for k, v in data.items()]
    if hasattr(data, "columns") and hasattr(data, "groupby"):
        column = next((c for c in data.columns
                       if str(c).strip().lower() in ("index", "gpu", "gpu_index", "pci.bus_id", "uuid")), None)
        return [(str(k), g) for k, g in data.groupby(column)] if column is not None else [("GPU", data)]
    if isinstance(data, (list, tuple)):
        pairs: list[tuple[str, Any]] = []
        for item in data:
            frame = getattr(item, "frame", None)
            gpu = getattr(item, "gpu", None)
            if frame is not None:
                pairs.append((str(gpu if gpu is not None else len(pairs)), frame))
        return pairs
    return []


def _metric_series(frame: Any) -> dict[tuple[str, str], list[tuple[datetime, float]]]:
    """Metric -> [(time, value)] read from a DataFrame-like object (units in the header or cells are dropped)."""
    if not hasattr(frame, "columns"):
        return {}
    columns = {str(c).strip().lower(): c for c in frame.columns}
    time_column = next((columns[c] for c in columns if c in ("timestamp", "time", "datetime")
                        or c.startswith("timestamp")), None)
    if time_column is None and hasattr(frame, "index") and getattr(frame.index, "dtype", None) is not None \
            and "datetime" in str(frame.index.dtype):
        moments = list(frame.index)
    elif time_column is not None:
        moments = list(frame[time_column])
    else:
        return {}
    found: dict[tuple[str, str], list[tuple[datetime, float]]] = {}
    for metric, unit, names in METRICS:
        column = next((columns[c] for c in columns for n in names if c == n or c.startswith((n + " ", n + "["))), None)
        if column is None:
            continue
        series = [(m, v) for m, v in zip(_datetimes(moments), (_number(x) for x in frame[column]))
                  if m and v is not None]
        if len(series) >= 2:
            found[(metric, unit)] = series
    return found


def _datetimes(values: Iterable[Any]) -> list[datetime | None]:
    moments = []
    for value in values:
        if hasattr(value, "to_pydatetime"):
            value = value.to_pydatetime()
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value.strip().replace("/", "-"))
            except ValueError:
                value = None
        if not isinstance(value, datetime) or value != value:  # NaT compares unequal to itself
            value = None
        elif value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        moments.append(value if isinstance(value, datetime) else None)
    return moments


_NUMBER = later.compile(r"-?\d+(?:\.\d+)?")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(float(value)) else None
    found = _NUMBER.search(str(value))
    return float(found.group()) if found else None


def _plot(gpu: str, metric: str, unit: str, series: list[tuple[datetime, float]], report: Report,
          times: Mapping[str, datetime]) -> Plot:
    series.sort(key=lambda p: p[0])
    start, end = series[0][0], series[-1][0]
    span = (end - start).total_seconds() or 1.0
    low, high = min(v for _, v in series), max(v for _, v in series)
    scale = (high - low) or 1.0

    def x(moment: datetime) -> float:
        return round(4 + 292 * (moment - start).total_seconds() / span, 1)

    points = " ".join(f"{x(m)},{round(112 - 104 * (v - low) / scale, 1)}" for m, v in series)
    marks = tuple(
        (x(times[e.id]), e.kind) for e in report.events if e.id in times and start <= times[e.id] <= end
    )
    return Plot(gpu, metric, unit, points, low, high, _label(start), _label(end), marks)


MAX_CYCLE = 8
"""Longest cycle of frames folded as one run: mutual recursion through up to this many functions."""
MIN_REPEATS = 3
"""A cycle shown once with a count when it repeats at least this often in a row."""


@dataclass(frozen=True)
class FrameRun:
    """Frames `first`..`last` of a stack: one cycle of frames (innermost first) repeated `repeats` times;
    a lone frame is a run of one."""

    first: int
    cycle: tuple[Any, ...]
    repeats: int

    @property
    def last(self) -> int:
        return self.first + len(self.cycle) * self.repeats - 1


def fold_frames(frames: Sequence[Any]) -> list[FrameRun]:
    """Runs of recursion folded, so a 200,000-frame overflow reads as a few lines and its outer frames show.

    Frames are the same function when module and symbol match (the pc for an unnamed frame). At each
    frame the cycle of up to MAX_CYCLE frames covering the most frames wins; the work is about
    MAX_CYCLE comparisons a frame.
    """
    keys = [(f.module, f.symbol) if f.symbol else (f.module, f.pc) for f in frames]
    runs: list[FrameRun] = []
    at = 0
    while at < len(keys):
        best, best_covered = 1, 1
        for size in range(1, MAX_CYCLE + 1):
            end = at + size
            while end < len(keys) and keys[end] == keys[end - size]:
                end += 1
            covered = (end - at) // size * size
            if covered // size >= MIN_REPEATS and covered > best_covered:
                best, best_covered = size, covered
        runs.append(FrameRun(at, tuple(frames[at:at + best]), best_covered // best))
        at += best_covered
    return runs


def shown_runs(frames: Sequence[Any], limit: int) -> tuple[list[FrameRun], int]:
    """The first `limit` runs of the folded stack (one line each in a report), and how many frames follow them."""
    runs = fold_frames(frames)
    return runs[:limit], (len(frames) - runs[limit].first if len(runs) > limit else 0)


def run_words(run: FrameRun, t: Translator) -> str:
    """A run of recursion in the reader's words: `frames 12-174,600: recurse x 58,196`."""
    cycle = " <- ".join(safe(f.symbol or f.pc) for f in run.cycle)
    return t("frames_run", first=f"{run.first:,}", last=f"{run.last:,}", count=f"{run.repeats:,}", cycle=cycle)


def stack_notes(thread: Thread, t: Translator) -> list[str]:
    """Why the stack stops short of its outermost frame, and from which frame on it is a guess: a reader
    must not take a cut or guessed stack for the whole, certain one."""
    notes = []
    if thread.truncated:
        notes.append(t("frames_truncated", reason=safe(thread.truncated)))
        if thread.frames_left is not None:
            notes.append(t("frames_left", count=f"{thread.frames_left:,}", size=f"{thread.stack_left or 0:,}"))
    if thread.guessed_from is not None:
        notes.append(t("frames_guessed", index=thread.guessed_from))
    return notes


@dataclass(frozen=True)
class NothingKnown:
    """Why a report has no verdict, in the reader's words, and what to try: with events, the hint to the
    suspects; with none, every format postmortem reads and how to get it (data/input-formats.tsv)."""

    said: str
    formats: list[tuple[str, str]]


def nothing_known(report: Any, t: Any) -> NothingKnown:
    if report.events:
        hint = f" {t('unknown_hint')}" if report.suspects else ""
        context = f" {t('unknown_outside', count=len(report.context))}" if report.context else ""
        return NothingKnown(f"{t('unknown_detail', count=len(report.events))}{context}{hint}", [])
    said = t("unknown_nothing_read", count=len(report.inputs)) if report.inputs else t("unknown_no_inputs")
    return NothingKnown(said, [(_in_language(row, "reads", t.lang), _in_language(row, "get", t.lang))
                               for row in data_rows("input-formats.tsv")])


def _in_language(row: Mapping[str, str], column: str, lang: str) -> str:
    """A table cell in the reader's language: its `column_lang` translation where the table has one."""
    return row.get(f"{column}_{lang}") or row[column]
