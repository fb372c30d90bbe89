"""One pass over raw bytes that finds every anchor literal of every source.

Most lines of a fleet log are noise. Each text source names the literals its
lines must contain (its ANCHORS); this module finds all of them in a single
scan so that only candidate lines are ever decoded and parsed. Hyperscan does
the scan at several GB/s where it is installed; a pure-Python fallback (one
`bytes.find` sweep per literal) gives the same answer more slowly.

An anchor that starts with ANY_CASE (`(?i)cusolver`) is found in any ASCII letter
case (`cuSolver`, `CUSOLVER`): for words that programs and people spell every
way, where listing the spellings would never end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

try:  # optional accelerator; the fallback below gives identical results
    import hyperscan
except ImportError:  # pragma: no cover - exercised where hyperscan is absent
    hyperscan = None  # type: ignore[assignment]  # the module or None: checked before each use


ANY_CASE = b"(?i)"
"""The mark of an anchor found in any letter case; the text after it is written in lower case."""


def searched(literal: bytes) -> tuple[bytes, bool]:
    """What an anchor stands for in the text, and whether in any letter case."""
    if literal.startswith(ANY_CASE):
        return literal[len(ANY_CASE):].lower(), True
    return literal, False


class Prefilter:
    """Finds the end offsets of anchor literals, each tagged with its group.

    `groups` maps a group name (a source's name) to its literals.
    """

    def __init__(self, groups: Mapping[str, Sequence[bytes]], use_hyperscan: bool = True):
        self.literals: list[bytes] = []
        """The anchors as the sources name them (ANY_CASE marks included): what REPEATS and the folding compare."""
        self.searched: list[tuple[bytes, bool]] = []
        """Each anchor's text as it is looked for, and whether in any letter case (`searched`)."""
        self.owners: list[frozenset[str]] = []
        index: dict[bytes, int] = {}
        for group, literals in groups.items():
            for literal in literals:
                if literal not in index:
                    index[literal] = len(self.literals)
                    self.literals.append(literal)
                    self.searched.append(searched(literal))
                    self.owners.append(frozenset())
                i = index[literal]
                self.owners[i] = self.owners[i] | {group}
        self.lengths = [len(text) for text, _ in self.searched]
        """How many bytes each anchor spans in the text (where its line starts is found from its match's end)."""
        self.longest = max(self.lengths, default=1)
        self._database = None
        if use_hyperscan and hyperscan is not None and self.literals:
            self._database = _hyperscan_database(self.literals, self.searched)

    @property
    def engine(self) -> str:
        """Which scanner runs: "hyperscan" or "python"."""
        return "hyperscan" if self._database is not None else "python"

    def matches(self, chunk: bytes) -> list[tuple[int, int]]:
        """Every (end offset, literal index) in `chunk`, sorted by end offset."""
        found: list[tuple[int, int]] = []
        if self._database is not None:
            self._database.scan(chunk, match_event_handler=_collect, context=found)
        else:
            lowered = chunk.lower() if any(any_case for _, any_case in self.searched) else chunk
            for i, (text, any_case) in enumerate(self.searched):
                found.extend((end, i) for end in _find_all(lowered if any_case else chunk, text))
        found.sort()
        return found


def _hyperscan_database(literals: list[bytes], written: list[tuple[bytes, bool]]) -> hyperscan.Database:
    """The literals compiled into one Hyperscan block-mode database, or the same database from the user cache:
    compiling 1,300 literals is a tenth of a one-line log's run. A cached entry is the bytes this version wrote for
    these literals (user_cache checks its SHA-256; the key holds the version and every literal); it must load
    (Hyperscan refuses a database of another version or platform) and answer the first and the last literal with
    their own ids, as the compiled one does; anything else is compiled again. (Scanning a text of every literal as
    the check was a tenth of a one-line log's run again: a Python call per match.)"""
    from . import user_cache

    entry = user_cache.key(getattr(hyperscan, "__version__", ""), *literals)
    if (stored := user_cache.read("hyperscan", entry)) is not None:
        try:
            database = hyperscan.loadb(stored, mode=hyperscan.HS_MODE_BLOCK)
            database.scratch = hyperscan.Scratch(database)  # a loaded database has none; scanning needs one
            ends = (0, len(literals) - 1)
            if all(_answers(database, written[index][0], index) for index in ends):
                return database
        except (hyperscan.error, TypeError, ValueError):
            pass
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[re.escape(text) for text, _ in written], ids=list(range(len(literals))),
                     elements=len(literals),
                     flags=[hyperscan.HS_FLAG_CASELESS if any_case else 0 for _, any_case in written])
    user_cache.write("hyperscan", entry, hyperscan.dumpb(database))
    return database


def _answers(database: hyperscan.Database, text: bytes, index: int) -> bool:
    """Whether scanning literal `index`'s text alone finds it under its own id."""
    found: list[tuple[int, int]] = []
    database.scan(text, match_event_handler=_collect, context=found)
    return (len(text), index) in found


def _collect(literal_id: int, _start: int, end: int, _flags: int, found: object) -> None:
    assert isinstance(found, list)  # the context `matches` passes to scan
    found.append((end, literal_id))


def _find_all(chunk: bytes, literal: bytes) -> Iterator[int]:
    at = chunk.find(literal)
    while at != -1:
        yield at + len(literal)
        at = chunk.find(literal, at + 1)
