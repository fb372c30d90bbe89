"""Input formats: one module per format, each turning candidate lines into Events.

A text source module defines:

- `NAME`: the format's name, shown as the input's format;
- `ANCHORS`: byte literals; a line is handed to the source only if it holds one
  (the prefilter finds them all in one pass over the raw bytes);
- `parse(doc, lines)`: yields `Event`s from those candidate lines (made with
  `doc.event(...)`), reading further lines through `doc.following(line)` for
  multi-line blocks such as tracebacks.

A source of last resort (`mentions`: known codes and phrases in any layout) sets READS_UNCLAIMED and its
`parse(doc, lines, earlier, unread)` is also given the events the sources before it made of this input and a
list for the lines it saw but did not read; they run last (`error_words`, an error line read by its words alone,
after `mentions`).

Adding a format is adding a module and naming it in TEXT_SOURCE_MODULES, then running
tools/gen_source_cards.py: the pipeline knows each source by its card (data/source-cards.json: its name, the kinds
of input it reads and its anchors) and imports the module only when a line holds one of its anchors, so that a log
pays for the formats it holds, not for all of them (issue 28; a test fails while a card differs from its module).
Binary inputs have their own entry points: `core_file` reads ELF cores.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Event
    from ..text import Line, TextDoc

TEXT_SOURCE_MODULES = (
    "kernel_log", "framework_log", "nccl_log", "nccl_collectives", "gpu_tools", "sanitizer", "gdb_log", "coredump_log",
    "bug_report", "gpu_telemetry", "nvsmi_xml", "job_log", "host_messages", "health_tests", "collect_bundle",
    "run_record", "process_snapshot", "flight_recorder", "live_stacks", "torch_env", "installed", "graphics_log",
    "reporter_words",
    "mentions",
    "error_words",
)
"""Text formats, in the order their events are listed."""


@cache
def text_sources() -> tuple[ModuleType, ...]:
    """The text source modules, imported on first use (a core alone never pays for them)."""
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in TEXT_SOURCE_MODULES)


READS = ("text", "prose")
"""The input kinds a text source reads unless it says otherwise (its READS): logs, and what people wrote. A
source of what only people write (reporter_words) reads prose alone: the text of an issue, never a log."""

CARDS = "source-cards.json"
"""data/ file of the cards, written by tools/gen_source_cards.py."""


@dataclass(frozen=True)
class SourceCard:
    """What the pipeline needs to know of a text source before any line is read: which lines to hand it."""

    module: str
    name: str
    anchors: tuple[bytes, ...]
    repeats: tuple[bytes, ...]
    reads: tuple[str, ...]
    reads_unclaimed: bool

    def parse(self, doc: TextDoc, lines: list[Line], **extra: Any) -> Iterator[Event]:
        """The source's own parse, its module imported now (once: Python keeps it)."""
        return importlib.import_module(f"{__name__}.{self.module}").parse(doc, lines, **extra)

    def to_plain(self) -> dict[str, Any]:
        return {"module": self.module, "name": self.name, "anchors": [a.decode() for a in self.anchors],
                "repeats": [a.decode() for a in self.repeats], "reads": list(self.reads),
                "reads_unclaimed": self.reads_unclaimed}


def card_of(module: ModuleType) -> SourceCard:
    """A source module's card, as the generator writes it and the test compares it."""
    return SourceCard(module.__name__.rsplit(".", 1)[-1], module.NAME, tuple(module.ANCHORS),
                      tuple(getattr(module, "REPEATS", ())), tuple(getattr(module, "READS", READS)),
                      bool(getattr(module, "READS_UNCLAIMED", False)))


@cache
def source_cards() -> tuple[SourceCard, ...]:
    """The cards of the text sources, in TEXT_SOURCE_MODULES order, read from data/ without importing a source;
    where a file the cards were made from has changed size since (a source or a table edited in a checkout, the
    generator not yet run), the sources' own cards instead: an edit is read as it stands, never with stale
    anchors (the test that the committed cards are current still fails until the generator runs)."""
    from ..knowledge import data_text

    text = data_text(CARDS)
    written = json.loads(text)
    if written.get("inputs") != card_inputs():
        return tuple(card_of(module) for module in text_sources())
    return tuple(SourceCard(c["module"], c["name"], tuple(a.encode() for a in c["anchors"]),
                            tuple(a.encode() for a in c["repeats"]), tuple(c["reads"]), c["reads_unclaimed"])
                 for c in written["sources"])


def card_inputs() -> dict[str, int]:
    """The size of every file a card can come from (the text sources, the tables under data/): some 70 stat calls,
    a tenth of a millisecond."""
    package = Path(__file__).resolve().parent.parent
    found = [*package.glob("sources/*.py"), *package.glob("sources/frameworks/*.py"), *package.glob("data/*.tsv")]
    return {path.relative_to(package).as_posix(): path.stat().st_size for path in sorted(found)}


def card(module: str) -> SourceCard:
    """The card of the source module named `module` (`bug_report`)."""
    return next(c for c in source_cards() if c.module == module)
