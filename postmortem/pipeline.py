"""open -> sources -> facts -> match -> rank: one analysis, as plain functions.

`analyze(paths)` is the API the CLI, the tests and notebooks call; it returns a
`Report` and never raises for bad input: what cannot be read becomes a
diagnostic on that input.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from functools import cache
from typing import TYPE_CHECKING, Any

from . import __version__
from .facts import collect_facts, with_arch_knowledge, with_build_support, with_driver_support
from .fingerprint import suspects
from .inputs import Blob, open_inputs
from .join import apart, incidents, incidents_note, join
from .model import YEARLESS, Event, Finding, InputInfo, Options, Report, Unread, plausible_time
from .rank import rank
from .reader import BytesReader, core_digest
from .scope import mark_outside
from .signatures import Database, load_default, match
from .sources import SourceCard, card, source_cards
from .text import Line, TextDoc, detect_encoding

if TYPE_CHECKING:
    from .prefilter import Prefilter


_BY_KIND: dict[str, tuple[tuple[SourceCard, ...], tuple[SourceCard, ...], frozenset[bytes]]] = {}
"""Per kind: `source_cards()` as it was (known by identity, never hashed), the cards that read the kind, and the
anchors that fold. A plain dict, not a class: it sits on every command's start-up path."""


def _kind_sources(kind: str) -> tuple[tuple[SourceCard, ...], frozenset[bytes]]:
    """The cards reading `kind` and the anchors that fold, made once per kind and per `source_cards()` tuple (a test
    may swap the cards) and asked twice an input: hashing the cards (37, with a thousand anchors) to look them up
    cost 5 s over a tar of 100,000 members."""
    cards = source_cards()
    held = _BY_KIND.get(kind)
    if held is None or held[0] is not cards:
        reading = tuple(source for source in cards if kind in source.reads)
        held = _BY_KIND[kind] = (cards, reading, _repeats(reading))
    return held[1], held[2]


def sources_for(kind: str = "text") -> tuple[SourceCard, ...]:
    """The cards of the text sources that read inputs of `kind` (a Blob's kind: "text", or "prose" for an issue's
    text; `sources.READS`)."""
    return _kind_sources(kind)[0]


@cache
def text_prefilter(kind: str = "text") -> Prefilter:
    """The one prefilter over the anchors of every source of `kind` (compiled once, when an input first needs
    it)."""
    from .prefilter import Prefilter

    return Prefilter({source.name: source.anchors for source in sources_for(kind)})


def text_repeats(kind: str = "text") -> frozenset[bytes]:
    """Anchors whose identical lines fold as they are read (a source's REPEATS): only those that no source
    without them shares, since another source may need every line of them. Made once per set of sources, so it
    follows `source_cards` as it is now yet costs nothing per input (uncached, some 0.2 ms: 20 s over the
    100,000 members of one tar)."""
    return _kind_sources(kind)[1]


def _repeats(sources: tuple[SourceCard, ...]) -> frozenset[bytes]:
    anchors = [(frozenset(source.anchors), frozenset(source.repeats)) for source in sources]
    folding = frozenset().union(*(repeats for _, repeats in anchors))
    # an anchor folds unless a source owns it without folding it
    return folding - frozenset().union(*(owned - repeats for owned, repeats in anchors))


Progress = Callable[[int, str], None]
"""Told (inputs done so far, the input being read) before each input: for progress displays."""


def analyze(paths: list[str], database: Database | None = None, options: Options = Options(),
            progress: Progress | None = None) -> Report:
    """Read every input under `paths` and explain what happened."""
    return analyze_blobs(open_inputs(paths), database, options, progress)


def analyze_text(text: str, name: str = "<text>", database: Database | None = None) -> Report:
    """Analyse a string as if it were a file (signature examples, notebooks)."""
    return analyze_blobs([Blob(name, BytesReader(text.encode("utf-8")))], database)


def analyze_blobs(blobs: Iterable[Blob], database: Database | None = None, options: Options = Options(),
                  progress: Progress | None = None) -> Report:
    """The pipeline over already opened inputs."""
    database = database or load_default()
    inputs: list[InputInfo] = []
    events: list[Event] = []
    cores: list = []
    for done, blob in enumerate(blobs):
        if progress is not None:
            progress(done, blob.path)
        if blob.kind == "elf" and blob.reader is not None:
            info, found, core = read_elf(blob, options)
            cores.extend([core] if core is not None else [])
        else:
            info, found = read_blob(blob)
        inputs.append(info)
        events.extend(found)
    if any(e.kind == "job-run" for e in events):
        from .sources import run_record  # only for the case directory of a `postmortem run`

        streams = run_record.captured_streams(events)
        inputs = [_captured(info, streams[info.path]) if info.path in streams else info for info in inputs]
        cores = run_record.job_environment(cores, events)
    telemetry = tuple(e.fields["series"] for e in events if e.kind == "gpu-series")  # frames, not evidence
    events = [e for e in events if e.kind != "gpu-series"]
    if any(e.kind == "process-snapshot" for e in events):  # live snapshots: where each process waits
        from .hang import hang_events

        events.extend(hang_events(events))
    if any(e.kind == "flight-recorder" for e in events):  # dumps of several ranks: where the ranks parted
        from .flight import with_collective_mismatches

        events = with_collective_mismatches(events)
    events = _number(_dated(join(_dated(_dedupe(events)))))
    events = with_build_support(with_driver_support(with_arch_knowledge(events)))
    if any(e.kind in ("library-arch", "arch-unsupported", "cuda-error") for e in events):
        from .binaries.library_arch import libraries_in_logs, with_library_verdicts

        # the libraries a core loaded or a backtrace names, judged for the GPU the inputs name
        events = with_library_verdicts(_number([*events, *libraries_in_logs(events, options.sysroot)]))
    facts = collect_facts(events)
    separate = apart(events)
    if note := incidents_note(separate, len(inputs)):  # several incidents: said once, on the first of them
        facts = {**facts, "incidents": [note]}
        first = next((i for i, info in enumerate(inputs) if any(info.path in pair for pair in separate)), 0)
        inputs[first] = dataclasses.replace(inputs[first], diagnostics=(*inputs[first].diagnostics, note))
    scoped = mark_outside(match(database, events), events, database.causes)
    findings = rank(scoped, events, database.causes, incidents(events, separate))
    tool = {"name": "postmortem", "version": __version__, "signatures": database.version}
    own = tuple(f for f in findings if f.outside is None)
    context = tuple(f for f in findings if f.outside is not None)
    unexplained: tuple[str, ...] = ()
    if not own or _unrecognised_root(own[0]):
        # the job's own lines: another process's event (scope.py) is context, not a suspect of the job's failure
        elsewhere = {i for f in context for i in f.evidence}
        unexplained = suspects([e for e in events if e.id not in elsewhere], own)
    return Report(tool, tuple(inputs), tuple(events), facts, own, tuple(cores), telemetry, unexplained, context)


def _unrecognised_root(verdict: Finding) -> bool:
    """A summary report (Xid 154, reset required) leads only when its root was not recognised."""
    return verdict.role == "consequence" and verdict.consequence_of is None


def read_blob(blob: Blob) -> tuple[InputInfo, list[Event]]:
    """Parse one input with every source that applies; failures become diagnostics."""
    diagnostics = list(blob.diagnostics)
    if blob.reader is None:
        return InputInfo(blob.path, "unreadable", 0, "", tuple(diagnostics)), []
    size = blob.reader.size
    if size == 0:
        return InputInfo(blob.path, "empty", 0, "sha256:" + hashlib.sha256(b"").hexdigest(),
                         (NOTHING_FOUND["empty"],)), []
    head = blob.reader.read_at(0, 64 * 1024)
    doc = TextDoc(blob.reader, blob.path, detect_encoding(head), blob.kind)
    events: list[Event] = []
    formats: list[str] = []
    unread: list[Unread] = []
    try:
        lines = doc.scan(text_prefilter(blob.kind), text_repeats(blob.kind))
        named = set().union(*(line.groups for line in lines))
        for source in sources_for(blob.kind):
            if source.name not in named:
                continue
            mine = [line for line in lines if source.name in line.groups]
            if source.reads_unclaimed:
                found = _run_source(source, doc, mine, diagnostics, earlier=events, unread=unread)
            else:
                found = _run_source(source, doc, mine, diagnostics)
            if found:
                formats.append(source.name)
                events.extend(found)
        if report_lines := [line for line in lines if card("bug_report").name in line.groups]:
            from .sources import bug_report  # only where its anchors stand: its sections place the events

            events, notes = bug_report.name_sections(doc, report_lines, events)
            diagnostics.extend(notes)
        events = [_in_context(doc, _timed(event)) for event in events]
    except OSError as exc:
        diagnostics.append(f"read error: {exc}")
    diagnostics.extend(doc.diagnostics)
    if not formats:
        diagnostics.append(NOTHING_FOUND[_plain_kind(head)])
    info = InputInfo(blob.path, "+".join(formats) or _plain_kind(head), size, "sha256:" + doc.sha256,
                     tuple(diagnostics), tuple(unread))
    return info, events


def read_elf(blob: Blob, options: Options) -> tuple[InputInfo, list[Event], object | None]:
    """An ELF input: a core file is read by `sources.core_file`; other ELF files are named and skipped."""
    from .sources import core_file  # imported on first use: text-only analyses never pay for it
    reader = blob.reader
    assert reader is not None  # analyze_blobs sends only readable ELF inputs here
    result = core_file.read(reader, blob.path, options)
    diagnostics = (*blob.diagnostics, *result.diagnostics)
    info = InputInfo(blob.path, result.format, reader.size, core_digest(reader), diagnostics)
    return info, list(result.events), result.core


CONTEXT_LINES = 2
"""Input lines kept before and after each event's own lines."""


def _in_context(doc: TextDoc, event: Event) -> Event:
    if event.where.line is None or event.where.path != doc.path:
        return event
    before, after = doc.context(event.where.line, event.where.end_line or event.where.line, CONTEXT_LINES)
    return dataclasses.replace(event, context_before=before, context_after=after)


def _timed(event: Event) -> Event:
    """The event with the time its first line's prefix gives (a launcher's ISO date, glog's or vLLM's year-less
    stamp), where its source set none: every input's events reach the timeline and the causal windows, not only
    the kernel log's."""
    if event.time is not None or event.clock is not None:
        return event
    from .sources.frameworks.traceback import line_time  # the one prefix reader; a log with no events never needs it

    moment, written = line_time(event.text.partition("\n")[0])
    if moment is not None:
        return dataclasses.replace(event, time=moment, clock="wall")
    if written is not None:
        return dataclasses.replace(event, clock=YEARLESS, fields={**event.fields, "stamp": written})
    return event


def _run_source(source: SourceCard, doc: TextDoc, lines: list[Line], diagnostics: list[str],
                **extra: Any) -> list[Event]:
    """One source over its candidate lines (bounded by text.MAX_HELD_LINES); its failure is a diagnostic,
    not the end of the analysis. `extra`: what a source of last resort is told (sources.mentions)."""
    if not lines:
        return []
    try:
        return list(source.parse(doc, lines, **extra))
    except Exception as exc:  # noqa: BLE001 - a parser bug must not cost the other sources
        diagnostics.append(
            f"{source.name} parser failed on this input "
            f"({type(exc).__name__}: {exc}); the other formats were still read")
        return []


def _plain_kind(head: bytes) -> str:
    return "binary" if _binary_share(head) > 0.1 else "text"


def _binary_share(head: bytes) -> float:
    controls = sum(1 for b in head if b < 9 or 13 < b < 32 or b == 127)
    return controls / max(1, len(head))


NOTHING_FOUND = {"empty": "empty file", "binary": "binary data in no format this version reads; no events",
                 "text": "no known error pattern in this text"}
"""The diagnostic of an input no source read, by its plain kind (the format it is then listed with)."""


def _captured(info: InputInfo, stream: str) -> InputInfo:
    """A stream `postmortem run` captured is the job's output: with nothing known in it, or nothing at all, it is
    context of the run (listed as `job-stdout`), not a problem input."""
    nothing = NOTHING_FOUND.get(info.format)
    if nothing is None:  # a source read it: listed by that format
        return info
    return dataclasses.replace(info, format=f"job-{stream}", diagnostics=tuple(d for d in info.diagnostics
                                                                                if d != nothing))


def _dedupe(events: list[Event]) -> list[Event]:
    """Keep one event per (input, line, kind, code) when two sources report the same line; two codes on one line
    (`Xid 48 -- uncorrectable ECC, then Xid 63 row remap`), or two symptoms in one title ("fails with CPU OOM"), are
    two events.

    Repeats across ranks or threads are folded by the sources themselves,
    which know what a rank prefix looks like in their format.
    """
    seen: set[tuple] = set()
    kept: list[Event] = []
    for event in events:
        code = event.fields.get("xid") or event.fields.get("sxid") or event.fields.get("symptom")
        place = (event.where.path, event.where.line, event.where.offset, event.kind, code)
        if place not in seen:
            seen.add(place)
            kept.append(event)
    return kept


def _dated(events: list[Event]) -> list[Event]:
    """Events whose time is junk (model.plausible_time) keep their text and lose the time, so no later
    arithmetic (joins, windows, timelines) can overflow on it."""
    return [event if plausible_time(event.time) is event.time
            else dataclasses.replace(event, time=None, clock="implausible") for event in events]


def _number(events: list[Event]) -> list[Event]:
    return [dataclasses.replace(event, id=f"e{i + 1}") for i, event in enumerate(events)]

