"""Text inputs as candidate lines: decoding, line numbers, context on demand.

A `TextDoc` never holds a whole file as a Python string. It reads the bytes in
windows, asks the prefilter where anchors are, and decodes only those lines
(and, when a source asks, the lines that follow one of them).
"""

from __future__ import annotations

import bisect
import codecs
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import regex

from .model import Event, Location
from .normalise import strip_transport
from .reader import ByteReader

if TYPE_CHECKING:
    from .prefilter import Prefilter

WINDOW = 16 * 1024 * 1024
"""Bytes read per scan step; bounds memory whatever the file size."""

MAX_LINE = 8192
"""Longest line text kept; longer lines keep an excerpt around the match."""

_ANSI = regex.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]")


@dataclass(frozen=True)
class Line:
    """One decoded line: 1-based number, byte span, text, and which sources it concerns.

    `text` is normalised (postmortem.normalise: quoting and relay prefixes taken off);
    `raw` holds the line as written when that changed it.
    """

    number: int
    start: int
    end: int
    text: str
    groups: frozenset[str] = frozenset()
    raw: str | None = None

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


class TextDoc:
    """A text input opened for scanning: candidate lines and context lines."""

    def __init__(self, reader: ByteReader, path: str, encoding: str = "utf-8"):
        self.reader = reader
        self.path = path
        self.encoding = encoding
        self.sha256 = ""
        self._known: list[tuple[int, int]] = [(1, 0)]  # (line number, byte offset) of lines whose start is known

    def decode(self, raw: bytes) -> str:
        """Bytes to clean text; undecodable bytes become U+FFFD, never an error."""
        return clean(raw.decode(self.encoding, "replace"))

    def make_line(self, number: int, start: int, end: int, raw: bytes, groups: frozenset[str] = frozenset()) -> Line:
        """A Line from its bytes: normalised text, and the written text when they differ."""
        written = self.decode(raw)
        text = strip_transport(written)
        return Line(number, start, end, text, groups, None if text == written else written)

    def scan(self, prefilter: Prefilter) -> list[Line]:
        """Every line holding an anchor, with the groups (sources) it concerns.

        Also sets `sha256`, the digest of the whole input, from the same reads.
        """
        lines: list[Line] = []
        pos, line_number, hashed_to = 0, 1, 0
        digest = hashlib.sha256()
        size = self.reader.size
        while pos < size:
            chunk = self.reader.read_at(pos, WINDOW)
            if not chunk:
                break
            if pos + len(chunk) > hashed_to:
                digest.update(chunk[hashed_to - pos :])
                hashed_to = pos + len(chunk)
            if pos + len(chunk) < size:
                cut = chunk.rfind(b"\n")
                if cut == -1:  # one line longer than the window: scan it in pieces
                    lines.extend(self._scan_long_line(prefilter, pos, chunk, line_number))
                    pos += len(chunk) - prefilter.longest + 1
                    continue
                chunk = chunk[: cut + 1]
            lines.extend(self._scan_chunk(prefilter, pos, chunk, line_number))
            line_number += chunk.count(b"\n")
            pos += len(chunk)
            self._known.append((line_number, pos))
        self.sha256 = digest.hexdigest()
        merged = _merge_same_lines(lines)
        self._known = sorted(set(self._known) | {(line.number, line.start) for line in merged})
        return merged

    def _scan_chunk(self, prefilter: Prefilter, base: int, chunk: bytes, first_number: int) -> Iterator[Line]:
        number, counted_to = first_number, 0
        start = end = anchor = -1
        groups: set[str] = set()
        for match_end, literal in prefilter.matches(chunk):
            if match_end > end:
                if groups:
                    yield self._line(number, base, chunk, (start, end, anchor), groups)
                anchor = match_end
                start = chunk.rfind(b"\n", counted_to, match_end) + 1 or counted_to
                number += chunk.count(b"\n", counted_to, start)
                counted_to = start
                end = chunk.find(b"\n", match_end)
                end = len(chunk) if end == -1 else end
                groups = set()
            groups |= prefilter.owners[literal]
        if groups:
            yield self._line(number, base, chunk, (start, end, anchor), groups)

    def _line(self, number: int, base: int, chunk: bytes, span: tuple[int, int, int], groups: set[str]) -> Line:
        """The line at span (start, end, first anchor's end); an over-long one keeps the text around the anchor."""
        start, end, anchor = span
        if end - start <= MAX_LINE:
            raw = chunk[start:end]
        else:
            lo = max(start, anchor - MAX_LINE // 2)
            raw = chunk[lo : min(end, lo + MAX_LINE)]
        return self.make_line(number, base + start, base + end, raw, frozenset(groups))

    def _scan_long_line(self, prefilter: Prefilter, base: int, chunk: bytes, number: int) -> Iterator[Line]:
        for match_end, literal in prefilter.matches(chunk):
            lo = max(0, match_end - MAX_LINE // 2)
            yield self.make_line(number, base + lo, base + match_end, chunk[lo : match_end + MAX_LINE // 2],
                                 prefilter.owners[literal])

    def event(self, kind: str, first: Line, fields: dict | None = None, *,
              last: Line | None = None, text: str | None = None, **extra) -> Event:
        """An Event located at lines `first`..`last`; its text defaults to those lines."""
        if text is None:
            text = first.original if last is None else "\n".join(
                l.original for l in [first, *self.following(first, last.number - first.number)])
        where = Location(self.path, first.number, (last or first).number)
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
            end = self.reader.read_at(offset, MAX_LINE).find(b"\n")
            end = offset + end if end >= 0 else min(self.reader.size, offset + MAX_LINE)
            return self.make_line(number, offset, end, self.reader.read_at(offset, end - offset))
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
        pieces = raw.split(b"\n")
        if at_end:
            if pieces and not pieces[-1]:
                pieces.pop()  # nothing after the file's last newline
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
        pieces = raw.split(b"\n")[:-1]  # the piece after the last newline is `line` itself
        if not at_start and pieces:
            pieces = pieces[1:]  # the first piece may be cut
        pieces = pieces[-limit:] if limit else []
        out, offset = [], line.start
        for i, piece in enumerate(reversed(pieces)):
            offset -= len(piece) + 1
            out.append(self.make_line(line.number - 1 - i, offset, offset + len(piece), piece[:MAX_LINE]))
        return out[::-1]

    def _read_growing(self, edge: int, lines: int, max_bytes: int, forward: bool) -> tuple[bytes, bool]:
        """Bytes after (or before) `edge` holding at least `lines` newlines, read in growing steps.

        Returns the bytes and whether they reach the end (or start) of the input.
        """
        size = min(max_bytes, max(4096, lines * 256))
        while True:
            lo = edge if forward else max(0, edge - size)
            raw = self.reader.read_at(lo, size if forward else edge - lo)
            at_limit = lo + len(raw) >= self.reader.size if forward else lo == 0
            if at_limit or size >= max_bytes or raw.count(b"\n") > lines:
                return raw, at_limit
            size = min(max_bytes, size * 4)


def _merge_same_lines(lines: list[Line]) -> list[Line]:
    """Join candidates that a window boundary split into two for one line."""
    merged: list[Line] = []
    for line in lines:
        if merged and merged[-1].start == line.start:
            last = merged.pop()
            line = Line(last.number, last.start, max(last.end, line.end), last.text, last.groups | line.groups, last.raw)
        merged.append(line)
    return merged
