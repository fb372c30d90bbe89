"""Text inputs as candidate lines: decoding, line numbers, context on demand.

A `TextDoc` never holds a whole file as a Python string. It reads the bytes in
windows, asks the prefilter where anchors are, and decodes only those lines
(and, when a source asks, the lines that follow one of them).

A line ends at `\\n`, `\\r\\n` or a lone `\\r` (a progress bar redraws its line
with `\\r`; a log of nothing but redraws is still many lines). Memory stays flat
whatever the input: a storm of identical lines is folded as it is read (see
`TextDoc.scan`), and the candidate lines held are bounded (MAX_HELD_LINES,
MAX_HELD_BYTES).
"""

from __future__ import annotations

import bisect
import codecs
import dataclasses
import hashlib
import json
import queue
import re
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from . import later
from .model import Event, Location
from .normalise import strip_transport
from .reader import ByteReader

if TYPE_CHECKING:
    from .prefilter import Prefilter

WINDOW = 4 * 1024 * 1024
"""Bytes read per scan step; bounds memory whatever the file size."""

MAX_LINE = 8192
"""Longest line text kept; longer lines keep an excerpt around the match."""

MAX_HELD_LINES = 20_000
"""Candidate lines (after folding identical repeats) one input keeps for the parsers. Each becomes an event
matched against every signature (about 0.3 ms each), so a log of millions of different error lines still
finishes in seconds and in a few hundred MiB (benchmarks/bench_memory.py); see `_Held` for which lines go."""

MAX_HELD_BYTES = 48 * 1024 * 1024
"""What those lines may cost in memory, as `_cost` counts it: 20,000 lines of MAX_LINE characters
would otherwise be half a gigabyte before any parsing."""

LINE_OVERHEAD = 600
"""Bytes a held line costs beyond its text (the Line, its fold entry, the parser's share), for MAX_HELD_BYTES."""

_ANSI = later.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]")
_BREAK = re.compile(rb"\n|\r(?!\n)")
_STAMP = re.compile(
    rb"\[\s*\d+\.\d+\]"  # dmesg uptime
    rb"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"  # ISO 8601 / RFC 3339
    rb"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?: \d{4})?"  # dmesg -T, ctime
    rb"|[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?"  # syslog
)
"""Time stamps before a line's first anchor: what differs between the lines of one storm."""
_SHAPE = bytes.maketrans(b"0123456789abcdefABCDEF", b"#" * 22)
"""What differs between near-identical lines (pids, registers, counters): masked to judge how common a line is
(a translation, not a regex: it runs on every candidate line of a storm)."""


@dataclass(frozen=True)
class Line:
    """One decoded line: 1-based number, byte span, text, and which sources it concerns.

    `text` is normalised (postmortem.normalise: quoting and relay prefixes taken off);
    `raw` holds the line as written when that changed it. `count` is how many
    identical lines (time stamps aside) this one stands for: the first line of
    a storm carries the repeats folded into it while the input was read.
    """

    number: int
    start: int
    end: int
    text: str
    groups: frozenset[str] = frozenset()
    raw: str | None = None
    count: int = 1

    @property
    def original(self) -> str:
        """The line as written: what evidence shows, and where a prefix's rank or worker is read."""
        return self.text if self.raw is None else self.raw


def clean(text: str) -> str:
    """Drop ANSI colour codes and a trailing carriage return."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text.rstrip("\r")


def detect_encoding(head: bytes) -> str:
    """Codec for a text input, judged on its first bytes.

    UTF-8 unless the bytes fail badly as UTF-8 and read cleanly as GB18030
    (logs from Chinese-locale Windows machines). UTF-16 is converted before
    this is asked (see `reader.utf16_to_utf8`).
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    utf8_errors = decoder.decode(head, final=False).count("\ufffd")
    if utf8_errors < 4:
        return "utf-8"
    gb_errors = head.decode("gb18030", "replace").count("\ufffd")
    return "gb18030" if gb_errors * 4 < utf8_errors else "utf-8"


class _Span(NamedTuple):
    """A candidate line found by the scan, not yet decoded."""

    number: int
    start: int
    end: int
    raw: bytes
    groups: frozenset[str]
    key: tuple | None
    """What identical repeats share (None: this line never folds)."""


@lru_cache(maxsize=8)  # a few prefilters at most (one per input kind), none kept alive for long
def _folding(prefilter: Prefilter, repeats: frozenset[bytes]) -> frozenset[int]:
    """Indexes of the prefilter's literals in `repeats`; cached, as every input of an archive of 100,000 asks."""
    return frozenset(i for i, literal in enumerate(prefilter.literals) if literal in repeats)


class TextDoc:
    """A text input opened for scanning: candidate lines and context lines.

    `diagnostics` collects what the scan and the parsers had to skip, for the input's report.
    """

    def __init__(self, reader: ByteReader, path: str, encoding: str = "utf-8", kind: str = "text"):
        self.reader = reader
        self.path = path
        self.encoding = encoding
        self.kind = kind
        """The input's kind (inputs.Blob.kind): "text" for a log, "prose" for what a person wrote (Markdown)."""
        self.sha256 = ""
        self.diagnostics: list[str] = []
        self.candidate_lines = 0
        """Lines `scan` found an anchor on, before folding: the work the parsers are offered (a speed count)."""
        self._known: list[tuple[int, int]] = [(1, 0)]  # (line number, byte offset) of lines whose start is known

    def decode(self, raw: bytes) -> str:
        """Bytes to clean text; undecodable bytes become U+FFFD, never an error."""
        return clean(raw.decode(self.encoding, "replace"))

    def json_object(self, limit: int) -> tuple[dict[str, Any], str] | None:
        """The whole input as one JSON object, read up to `limit` bytes, with its text (the files postmortem
        itself writes: run records, snapshots); None when it is not one."""
        text = self.decode(self.reader.read_at(0, limit))
        try:
            found = json.loads(text)
        except ValueError:
            return None
        return (found, text) if isinstance(found, dict) else None

    def make_line(self, number: int, start: int, end: int, raw: bytes, groups: frozenset[str] = frozenset()) -> Line:
        """A Line from its bytes: normalised text, and the written text when they differ."""
        written = self.decode(raw)
        text = strip_transport(written)
        return Line(number, start, end, text, groups, None if text == written else written)

    def scan(self, prefilter: Prefilter, repeats: Iterable[bytes] = ()) -> list[Line]:
        """Every line holding an anchor, with the groups (sources) it concerns, storms folded as they are read.

        A line whose every anchor is in `repeats` (literals whose lines say all
        they have to say on their own) folds into the first line identical to it
        but for its time stamps: the first and the last of such a storm are kept,
        the first counting the ones between (Line.count). Past MAX_HELD_LINES /
        MAX_HELD_BYTES, lines of the most repeated shape go first (see `_Held`),
        named in a diagnostic. Also sets `sha256`, the digest of the whole input,
        from the same reads.
        """
        folding = _folding(prefilter, frozenset(repeats))
        held = _Held(self)
        pending: _Span | None = None
        for span in self._spans(prefilter, folding):
            self.candidate_lines += 1
            if pending is not None and pending.start == span.start:  # one line that a window boundary split
                pending = pending._replace(end=max(pending.end, span.end), groups=pending.groups | span.groups,
                                           key=None)
                continue
            if pending is not None:
                held.add(pending)
            pending = span
        if pending is not None:
            held.add(pending)
        lines = held.lines()
        self._known = sorted(set(self._known) | {(line.number, line.start) for line in lines})
        return lines

    def _spans(self, prefilter: Prefilter, folding: frozenset[int]) -> Iterator[_Span]:
        """The candidate lines of the whole input, window by window; every step moves forward or stops."""
        pos, number, line_start, hashed_to = 0, 1, 0, 0
        size = self.reader.size
        digest = _Digest(threaded=size > WINDOW)
        long_line = False
        try:
            while pos < size:
                want = min(WINDOW, size - pos)
                chunk = self.reader.read_at(pos, want)
                if pos + len(chunk) > hashed_to:
                    digest.update(chunk[hashed_to - pos :] if hashed_to > pos else chunk)
                    hashed_to = pos + len(chunk)
                if len(chunk) < want:  # the file shrank since it was opened (rotated, truncated): read what is there
                    self.diagnostics.append(
                        f"the input shrank while it was read ({size} bytes when opened, {pos + len(chunk)} at the "
                        f"end): only the first {pos + len(chunk)} bytes were scanned")
                    yield from self._scan_chunk(prefilter, folding, pos, chunk, number, line_start)[0]
                    break
                if pos + len(chunk) < size:
                    cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r", 0, len(chunk) - 1))
                    if cut == -1:  # one line longer than the window: scan it in overlapping pieces
                        if not long_line:
                            self.diagnostics.append(
                                f"line {number} is longer than {WINDOW >> 20} MiB: only the text around its first "
                                "anchor was read as a candidate line")
                            long_line = True
                        yield from self._scan_chunk(prefilter, folding, pos, chunk, number, line_start)[0]
                        pos += max(1, len(chunk) - prefilter.longest + 1)
                        continue
                    chunk = chunk[: cut + 1]
                long_line = False
                spans, number = self._scan_chunk(prefilter, folding, pos, chunk, number, line_start)
                yield from spans
                pos += len(chunk)
                line_start = pos
                self._known.append((number, pos))
        finally:
            self.sha256 = digest.hexdigest()

    def _scan_chunk(self, prefilter: Prefilter, folding: frozenset[int], base: int, chunk: bytes, first_number: int,
                    first_start: int) -> tuple[list[_Span], int]:
        """The candidate lines of one window, and the number of the line after its last break; text before its
        first break continues the line at `first_start`. Each byte's line breaks are counted once."""
        number, counted_to = first_number, 0
        start = end = anchor = -1
        groups: set[str] = set()
        foldable = True
        spans: list[_Span] = []
        carriage = b"\r" in chunk  # most logs have none: then a line's ends are one find each
        for match_end, literal in prefilter.matches(chunk):
            if match_end > end:
                if groups:
                    spans.append(self._span(number, base, chunk, (start, end, anchor), groups, foldable, first_start))
                anchor = match_end - prefilter.lengths[literal]
                start = chunk.rfind(b"\n", counted_to, anchor)
                if carriage:
                    start = max(start, chunk.rfind(b"\r", counted_to, anchor))
                start = start + 1 or counted_to
                number += _breaks(chunk, counted_to, start) if carriage else chunk.count(b"\n", counted_to, start)
                counted_to = start
                end = _line_end(chunk, match_end) if carriage else chunk.find(b"\n", match_end)
                end = len(chunk) if end == -1 else end
                groups, foldable = set(), True
            groups |= prefilter.owners[literal]
            foldable = foldable and literal in folding
        if groups:
            spans.append(self._span(number, base, chunk, (start, end, anchor), groups, foldable, first_start))
        rest = _breaks(chunk, counted_to, len(chunk)) if carriage else chunk.count(b"\n", counted_to)
        return spans, number + rest

    @staticmethod
    def _span(number: int, base: int, chunk: bytes, span: tuple[int, int, int], groups: set[str], foldable: bool,
              first_start: int) -> _Span:
        """The line at span (start, end, first anchor's start); an over-long one keeps the text around the anchor."""
        start, end, anchor = span
        lo = start if end - start <= MAX_LINE else max(start, anchor - MAX_LINE // 2)
        raw = chunk[lo : min(end, lo + MAX_LINE)]
        owners = frozenset(groups)
        key = (owners, _STAMP.sub(b"", raw[: anchor - lo]), raw[anchor - lo :]) if foldable else None
        return _Span(number, base + start if start else first_start, base + end, raw, owners, key)

    def event(self, kind: str, first: Line, fields: dict | None = None, *,
              last: Line | None = None, text: str | None = None, **extra) -> Event:
        """An Event located at lines `first`..`last`; its text defaults to those lines, its count to the lines
        folded into `first`."""
        if text is None:
            text = first.original if last is None else "\n".join(
                l.original for l in [first, *self.following(first, last.number - first.number)])
        where = Location(self.path, first.number, (last or first).number)
        extra.setdefault("count", first.count)
        return Event(kind=kind, where=where, text=text, fields=fields or {}, **extra)

    def context(self, first: int, last: int, lines: int = 2) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The `lines` lines before line `first` and after line `last` (1-based), for evidence in context.

        Starts from the nearest line whose offset the scan learned (every
        candidate line and window start), so it reads a few KiB, not the file.
        """
        start = self._line_at(first)
        if start is None:
            return (), ()
        before = tuple(line.original for line in self.preceding(start, lines))
        after_from = start if last <= first else next(iter(self.following(start, last - first)[-1:]), start)
        after = tuple(line.original for line in self.following(after_from, lines))
        return before, after

    def _line_at(self, number: int) -> Line | None:
        known = bisect.bisect_right(self._known, (number, float("inf"))) - 1
        if known < 0:
            return None
        at_number, offset = self._known[known]
        if number == at_number:
            raw = self.reader.read_at(offset, MAX_LINE)
            end = _line_end(raw, 0)
            return self.make_line(number, offset, offset + end, raw[:end])
        anchor = Line(at_number - 1, offset - 1, offset - 1, "")
        found = self.following(anchor, number - at_number + 1)
        return found[-1] if len(found) == number - at_number + 1 else None

    def following(self, line: Line, limit: int = 200, max_bytes: int = 1 << 20) -> list[Line]:
        """Up to `limit` lines after `line` (for tracebacks and other blocks).

        Reads a little at first and more only while lines are missing, so a
        parser asking for 4 lines after each of 100,000 candidates reads about
        4 lines each, not `max_bytes`.
        """
        start = line.end + 1
        raw, at_end = self._read_growing(start, limit, max_bytes, forward=True)
        if not at_end and raw.endswith(b"\r"):
            raw = raw[:-1]  # its \n may be the next byte: the cut line is dropped below anyway
        pieces = _BREAK.split(raw)
        if at_end:
            if pieces and not pieces[-1]:
                pieces.pop()  # nothing after the file's last line break
        else:
            pieces.pop()  # cut at the read size: not a whole line
        out: list[Line] = []
        offset = start
        for i, piece in enumerate(pieces[:limit]):
            out.append(self.make_line(line.number + 1 + i, offset, offset + len(piece), piece[:MAX_LINE]))
            offset += len(piece) + 1
        return out

    def preceding(self, line: Line, limit: int = 3, max_bytes: int = 64 * 1024) -> list[Line]:
        """Up to `limit` lines before `line`, nearest last (context for evidence)."""
        raw, at_start = self._read_growing(line.start, limit, max_bytes, forward=False)
        pieces = _BREAK.split(raw)[:-1]  # the piece after the last break is `line` itself
        if not at_start and pieces:
            pieces = pieces[1:]  # the first piece may be cut
        pieces = pieces[-limit:] if limit else []
        out, offset = [], line.start
        for i, piece in enumerate(reversed(pieces)):
            offset -= len(piece) + 1
            out.append(self.make_line(line.number - 1 - i, offset, offset + len(piece), piece[:MAX_LINE]))
        return out[::-1]

    def _read_growing(self, edge: int, lines: int, max_bytes: int, forward: bool) -> tuple[bytes, bool]:
        """Bytes after (or before) `edge` holding at least `lines` line breaks, read in growing steps.

        Returns the bytes and whether they reach the end (or start) of the input.
        """
        size = min(max_bytes, max(4096, lines * 256))
        while True:
            lo = edge if forward else max(0, edge - size)
            raw = self.reader.read_at(lo, size if forward else edge - lo)
            at_limit = lo + len(raw) >= self.reader.size if forward else lo == 0
            if at_limit or size >= max_bytes or _breaks(raw, 0, len(raw)) > lines:
                return raw, at_limit
            size = min(max_bytes, size * 4)


class _Digest:
    """SHA-256 of an input read window by window. For an input of more than one window the hashing runs on a second
    thread (hashlib lets go of the GIL on large buffers), so the digest of a big log costs its scan no time where a
    second core is free; a bounded queue keeps at most a few windows waiting."""

    def __init__(self, threaded: bool) -> None:
        self._hash = hashlib.sha256()
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=4)
            self._thread = threading.Thread(target=self._run, name="postmortem-digest", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self._queue is not None
        while (data := self._queue.get()) is not None:
            self._hash.update(data)

    def update(self, data: bytes) -> None:
        if self._queue is None:
            self._hash.update(data)
        else:
            self._queue.put(data)

    def hexdigest(self) -> str:
        """The digest of everything given; waits for the thread, which then ends."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = self._thread = None
        return self._hash.hexdigest()


def _breaks(data: bytes, lo: int, hi: int) -> int:
    """Line breaks in data[lo:hi]: \\n, \\r\\n and lone \\r each count once (the \\r\\n pass only when a \\r
    is there)."""
    newlines, carriages = data.count(b"\n", lo, hi), data.count(b"\r", lo, hi)
    return newlines + carriages - data.count(b"\r\n", lo, hi) if carriages else newlines


def _line_end(data: bytes, at: int) -> int:
    """Where the line holding offset `at` ends: its \\n (after a \\r for \\r\\n), a lone \\r, or the data's end."""
    newline = data.find(b"\n", at)
    stop = len(data) if newline == -1 else newline
    carriage = data.find(b"\r", at, stop)
    return stop if carriage == -1 or carriage == newline - 1 else carriage


def _cost(span: _Span) -> int:
    """What holding `span` costs, for MAX_HELD_BYTES: its bytes, its fold key, and later its decoded text."""
    return LINE_OVERHEAD + (3 if span.key is not None else 2) * len(span.raw)


@dataclass(eq=False, slots=True)
class _Run:
    """A held candidate line (decoded only once the scan ends) and the identical repeats folded into it."""

    span: _Span
    shape: tuple
    cost: int
    count: int = 1
    """The first line and the repeats between it and `last`."""
    last: _Span | None = None
    """The latest repeat, kept as evidence of when the storm ended."""
    dropped: bool = False


class _Held:
    """The candidate lines one scan keeps, within MAX_HELD_LINES and MAX_HELD_BYTES.

    Identical lines fold into one run (first, last, count). Past the budget a line
    is dropped from the most common shape of line (digits and hex masked: a storm
    whose pids or registers differ), never its first or latest one; only when no
    shape is common is the oldest line dropped. A rare line, a different event
    after a storm, stays.
    """

    def __init__(self, doc: TextDoc):
        self.doc = doc
        self.runs: dict[tuple, _Run] = {}
        self.shapes: dict[tuple, deque[_Run]] = {}
        self.order: deque[_Run] = deque()  # arrival order, dropped runs removed lazily
        self.largest: tuple = ()
        self.held = self.cost = 0
        self.dropped = 0
        self.dropped_lines = (0, 0)  # first and last line number of what was dropped

    def add(self, span: _Span) -> None:
        if span.key is not None and (run := self.runs.get(span.key)) is not None:
            if run.last is not None:
                run.count += 1
            run.last = span
            return
        shape = (span.groups, span.raw.translate(_SHAPE))
        group = self.shapes.get(shape)
        if group is not None and len(group) > 2 and self.held >= MAX_HELD_LINES \
                and len(group) >= len(self.shapes.get(self.largest, ())):
            run = group[-1]  # full, and this is the most common shape: its latest line gives way to this one
            self._forget(run)
            run.span, run.cost, run.count, run.last = span, _cost(span), 1, None
        else:
            run = _Run(span, shape, _cost(span))
            if group is None:
                group = self.shapes[shape] = deque()
            group.append(run)
            if len(group) > len(self.shapes.get(self.largest, ())):
                self.largest = shape
            self.order.append(run)
            self.held += 1
        if span.key is not None:
            self.runs[span.key] = run
        self.cost += run.cost
        while self.held > MAX_HELD_LINES or self.cost > MAX_HELD_BYTES:
            victim = self._victim()
            victim.dropped = True
            self.held -= 1
            self._forget(victim)
        if len(self.order) > 2 * MAX_HELD_LINES:
            self.order = deque(r for r in self.order if not r.dropped)

    def _victim(self) -> _Run:
        """The second line of the most common shape when it has more than two, else the oldest line held."""
        group = self.shapes.get(self.largest)
        if group is not None and len(group) > 2:
            first = group.popleft()
            victim = group.popleft()
            group.appendleft(first)
            return victim
        while self.order[0].dropped:
            self.order.popleft()
        victim = self.order.popleft()
        group = self.shapes[victim.shape]
        group.remove(victim)
        if not group:
            del self.shapes[victim.shape]
        return victim

    def _forget(self, run: _Run) -> None:
        """Count `run`'s lines as not parsed and release what it cost."""
        self.cost -= run.cost
        if run.span.key is not None and self.runs.get(run.span.key) is run:
            del self.runs[run.span.key]
        self.dropped += run.count + (run.last is not None)
        first, last = self.dropped_lines
        self.dropped_lines = (min(first or run.span.number, run.span.number),
                              max(last, (run.last or run.span).number))

    def lines(self) -> list[Line]:
        """The held lines decoded in input order, each first of a storm with its count; a diagnostic for the rest."""
        out: list[Line] = []
        for run in self.order:
            if run.dropped:
                continue
            for span, count in ((run.span, run.count), (run.last, 1)):
                if span is not None:
                    line = self.doc.make_line(span.number, span.start, span.end, span.raw, span.groups)
                    out.append(dataclasses.replace(line, count=count) if count > 1 else line)
        if self.dropped:
            first, last = self.dropped_lines
            self.doc.diagnostics.append(
                f"{self.dropped} candidate lines between line {first} and line {last} were not parsed: this input has "
                f"more different candidate lines than the {MAX_HELD_LINES} (or {MAX_HELD_BYTES >> 20} MiB) one input "
                "may hold, so lines were dropped from the most repeated kinds of line (their first and latest kept)")
        return sorted(out, key=lambda line: (line.number, line.start))


FENCE = later.compile(r"^\s{0,3}(?:```|~~~)")
"""A Markdown code fence: what stands between two is a program's output pasted into a person's text."""
FENCE_ANCHORS = (b"```", b"~~~")
"""The literals of a fence, for a source that must know which of a Markdown file's lines stand between fences."""


def fence_sides(lines: list[Line]) -> tuple[list[Line], list[Line]]:
    """The lines between a Markdown text's code fences (a pasted log) and the lines outside them (prose); the fence
    lines themselves are in neither. `lines` must hold every fence line of the text, in order."""
    inside: list[Line] = []
    outside: list[Line] = []
    fenced = False
    for line in lines:
        if FENCE.match(line.text):
            fenced = not fenced
        else:
            (inside if fenced else outside).append(line)
    return inside, outside
