"""The event model: the plain data every stage passes to the next.

Sources turn bytes into `Event`s, the signature engine turns events into
`Finding`s, ranking orders findings, renderers print a `Report`. All of it is
frozen dataclasses so a stage cannot reach back and change an earlier one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any

SEVERITIES = ("info", "warning", "error", "critical")
"""Severity names, weakest first; `severity_rank` orders them."""


def severity_rank(severity: str) -> int:
    """Position of a severity in SEVERITIES (unknown names rank lowest)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


@dataclass(frozen=True)
class Location:
    """Where an event's evidence lies: a display path and a 1-based line range.

    `path` names archive members as `bundle.tar.gz!/var/log/kern.log`.
    Binary inputs use `offset` instead of lines. `section` names the part of a
    bundle the lines sit in (the header of an nvidia-bug-report.log section).
    """

    path: str
    line: int | None = None
    end_line: int | None = None
    offset: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class Event:
    """One observation from one input: an Xid line, a traceback, an OOM kill.

    `fields` hold the typed values signatures match on (xid, pci, pid,
    process, error, rank, ...). `time` is set when the input says when, as a
    real date; `clock` says how it was derived ("wall", "uptime+boot", or
    YEARLESS with `time` None and the stamp as written in fields["stamp"]).
    `count` > 1 when identical reports (the same traceback from 64 ranks) were
    folded into this one event.
    """

    kind: str
    where: Location
    text: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    time: datetime | None = None
    clock: str | None = None
    count: int = 1
    id: str = ""
    context_before: tuple[str, ...] = ()
    context_after: tuple[str, ...] = ()
    """A few input lines around the evidence, so a reader sees it in place."""


EARLIEST = datetime(1900, 1, 1)
LATEST = datetime(9000, 1, 1)
"""Times outside these bounds (UTC) are junk in a crash log (year 1, year 9999 with a -23:59 offset, an uptime of
3e11 s added to a boot time); they are dropped before any arithmetic on them can overflow;
the margin to datetime's limits leaves room for every window and join."""

YEARLESS = "wall-no-year"
"""The clock of a stamp written without a year (syslog's `Dec  2 11:38:47`). Such an event has no `time`: a guessed
year would order it years away from dated events and reach people as a date no log wrote. Its stamp is kept as
written in fields["stamp"] (comparable within its own input only) until an input of the same incident gives the
year (join.infer_years)."""

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("jan", "jän"), ("feb",), ("mar", "mär", "mrz"), ("apr",), ("may", "mai"), ("jun",),
            ("jul",), ("aug",), ("sep",), ("oct", "okt"), ("nov",), ("dec", "dez"),
        ],
        start=1,
    )
    for name in names
}
"""Month abbreviations of year-less stamps: English, and German (journals from de_DE machines)."""


def driver_code(event: Event) -> str | None:
    """`Xid 48` or `SXid 12028` for a driver's numbered report, else None: how a person names it."""
    code = event.fields.get(event.kind) if event.kind in ("xid", "sxid") else None
    return None if code is None else f"{'Xid' if event.kind == 'xid' else 'SXid'} {code}"


def ranks_text(ranks: Iterable[int]) -> str:
    """`rank 3`, `ranks 0-2, 4, 6-7`: the ranks a finding names, runs of neighbours joined, as people write them."""
    runs: list[list[int]] = []
    for rank in sorted(set(ranks)):
        if runs and rank == runs[-1][-1] + 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    words = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return ("rank " if len(runs) == 1 and len(runs[0]) == 1 else "ranks ") + words


def iso_time(value: object) -> datetime | None:
    """A time postmortem wrote into one of its own records (run.json, snapshot.json) with isoformat; None for
    anything else."""
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def month_number(name: str) -> int | None:
    """1..12 for a month abbreviation in MONTHS ("Sep", "Sept.", "Mär"), else None."""
    return MONTHS.get(name.lower()[:3]) or MONTHS.get(name.lower())


def dated(stamp: str, year: int) -> datetime | None:
    """A year-less `Mon DD HH:MM:SS` stamp placed in `year`, or None when it is no such stamp or that date does not
    exist (Feb 29 of a common year)."""
    parts = stamp.split()
    if len(parts) != 3 or not (month := month_number(parts[0])) or not parts[1].isdigit():
        return None
    try:
        h, m, s = (int(x) for x in parts[2].split(".")[0].split(":"))
        return datetime(year, month, int(parts[1]), h, m, s)
    except ValueError:
        return None


def written_span(events: Iterable[Event]) -> tuple[str | None, str | None]:
    """The first and last year-less stamp of `events` as written (in their order), for a finding none of whose
    evidence is dated; (None, None) when they carry none."""
    stamps = [s for e in events for s in (e.fields.get("stamp"), e.fields.get("last_stamp")) if isinstance(s, str)]
    return (stamps[0], stamps[-1]) if stamps else (None, None)


def plausible_time(moment: datetime | None) -> datetime | None:
    """`moment` when it lies between EARLIEST and LATEST (aware times judged in UTC), else None; never raises."""
    if moment is None:
        return None
    try:
        utc = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment
    except (OverflowError, ValueError):
        return None
    return moment if EARLIEST <= utc < LATEST else None


LOOSE = "loose"
"""fields["read"] of an event made by the reader of last resort (sources.mentions): the code or phrase stood outside
its format's layout, so a finding resting on such events alone is trusted less (signatures.finding_for)."""
LOOSE_FACTOR = 0.75
"""Factor on the confidence of a finding whose every event was read loosely."""


@dataclass(frozen=True)
class Unread:
    """A line seen but not read: it holds a known code or phrase, and no event came of it, for `reason`."""

    line: int
    text: str
    reason: str


@dataclass(frozen=True)
class InputInfo:
    """One input as read: its display path, detected formats, digest and diagnostics.

    `digest` names its method: "sha256:<hex>" of the whole input, or for cores
    (gigabytes, mostly untouched by the analysis) "sha256-sampled:<hex>" of the
    size, samples and the notes (`reader.core_digest`).
    """

    path: str
    format: str
    size: int
    digest: str
    diagnostics: tuple[str, ...] = ()
    unread: tuple[Unread, ...] = ()
    """Lines that hold a known code or phrase but became no event, each with why (sources.mentions)."""


@dataclass(frozen=True)
class Finding:
    """A signature that matched, with the events that prove it.

    `confidence` is 0..1 and `confidence_reason` says in one line why.
    `consequence_of` names the signature of a root finding that explains this
    one (an illegal-address traceback right after an ECC Xid on that GPU);
    a root lists the signatures it explains in `consequences`. `count` is how
    many reports the evidence folds (11,000 Xid 45 lines are one finding),
    `first_seen` / `last_seen` the ISO times of its earliest and latest
    evidence (None when the inputs give no time).
    """

    signature: str
    cause: str
    severity: str
    confidence: float
    confidence_reason: str
    title: str
    explanation: str
    actions: tuple[str, ...]
    evidence: tuple[str, ...]
    references: tuple[str, ...] = ()
    role: str = "root"
    """"consequence" when the signature by definition summarises an earlier failure (signatures.ROLES)."""
    consequence_of: str | None = None
    consequences: tuple[str, ...] = ()
    count: int = 1
    first_seen: str | None = None
    last_seen: str | None = None
    merged: tuple[str, ...] = ()
    """Signatures that reported the same fault and were merged into this finding (postmortem.merge)."""
    outside: str | None = None
    """Why this finding is not about the job the inputs capture (another process's, from before the job started):
    context, ranked last, never the verdict (postmortem.scope)."""


@dataclass(frozen=True)
class Options:
    """How to read inputs that need more than their own bytes (cores on another machine).

    `sysroot` is prefixed to the library paths a core names; `debug_dirs` hold
    separate debug files in the `.build-id/xx/rest.debug` layout; `show_env`
    prints every environment variable of a core by value (secrets!), not only
    the GPU-relevant ones; `exe` is the program's file for a core that does not
    name it (no NT_FILE note, no readable AT_EXECFN), as `eu-stack -e` takes it.
    """

    sysroot: str | None = None
    debug_dirs: tuple[str, ...] = ()
    show_env: bool = False
    exe: str | None = None


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's telemetry samples (nvidia-smi --query-gpu CSV or dmon) as read.

    `frame` is a pandas DataFrame with `columns` (canonical names: time,
    temp_c, power_w, memory_used_mib, ...); it stays out of `to_plain` and is
    serialised compactly by the JSON renderer. `dropped` counts rows that did
    not parse.
    """

    gpu: str
    source: Location
    columns: tuple[str, ...]
    frame: Any = field(compare=False, repr=False)
    dropped: int = 0


@dataclass(frozen=True)
class Report:
    """Everything one analysis produced, in the shape of the JSON contract."""

    tool: Mapping[str, str]
    inputs: tuple[InputInfo, ...]
    events: tuple[Event, ...]
    facts: Mapping[str, Any]
    findings: tuple[Finding, ...]
    cores: tuple[Mapping[str, Any], ...] = ()
    telemetry: tuple[GpuSeries, ...] = ()
    suspects: tuple[str, ...] = ()
    """When nothing matched: ids of the events most likely to be the crash (postmortem.fingerprint)."""
    context: tuple[Finding, ...] = ()
    """Findings that are not about the job a snapshot or run record captures, each with its `outside` reason
    (postmortem.scope): shown after the others, never the verdict."""

    @property
    def verdict(self) -> Finding | None:
        """The best finding, or None when nothing matched (cause `unknown`)."""
        return self.findings[0] if self.findings else None

    @property
    def others(self) -> tuple[Finding, ...]:
        """Every finding but the verdict, in rank order, then the context."""
        return (*self.findings[1:], *self.context)

    def event(self, event_id: str) -> Event | None:
        """The event with this id, if any."""
        return next((e for e in self.events if e.id == event_id), None)


_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types `to_plain` returns as they are, checked before any call: most of a report's values are these."""


def to_plain(value: Any) -> Any:
    """Turn model objects into JSON-ready dicts, lists and strings.

    The one place that knows how datetimes and dataclasses serialise. Scalars are passed through
    without a call of their own (a 200,000-frame stack holds millions of them).
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    names = _field_names(kind)  # type: ignore[arg-type]  # every type is hashable (typeshed says `type` may not be)
    if names is not None:
        plain = {}
        for name in names:
            item = getattr(value, name)
            plain[name] = item if type(item) in _SCALARS else to_plain(item)
        return plain
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): v if type(v) in _SCALARS else to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [v if type(v) in _SCALARS else to_plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


@cache
def _field_names(kind: type) -> tuple[str, ...] | None:
    """The field names of a dataclass type (once per type), None for any other type."""
    return tuple(f.name for f in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else None
