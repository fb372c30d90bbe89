"""One-line reports of the rest of a GPU node: RDMA NIC (mlx5), GPUDirect peer memory, fabric manager, NVML.

The wordings live in data/host-messages.tsv (family, anchor literal, regex, cause, a real example);
every line that holds one becomes a `host-message` event with its family and the regex's named
fields. Identical reports (a flapping link says `lost carrier` again and again) fold into one event
with a count, so a signature can tell one flap from a storm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import regex

from .. import later
from ..knowledge import dash, data_rows
from ..model import Event
from ..text import Line, TextDoc

NAME = "host-messages"


@dataclass(frozen=True)
class HostMessage:
    """One family of data/host-messages.tsv."""

    family: str
    anchor: str
    pattern: regex.Pattern
    cause: str | None


@cache
def families() -> tuple[HostMessage, ...]:
    """The table, loaded once."""
    return tuple(HostMessage(row["family"], row["anchor"], later.compile(row["regex"]), dash(row["cause"]))
                 for row in data_rows("host-messages.tsv"))


ANCHORS: tuple[bytes, ...] = tuple(sorted({f.anchor.encode() for f in families()}))


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """A host-message event per family and fields, repeats counted."""
    seen: dict[tuple, Event] = {}
    for line in lines:
        for family in families():
            if family.anchor in line.text and (m := family.pattern.search(line.text)):
                fields = {"family": family.family, "message_cause": family.cause,
                          **{k: v for k, v in m.groupdict().items() if v is not None}}
                key = tuple(sorted((k, str(v)) for k, v in fields.items()))
                seen[key] = dataclasses.replace(seen[key], count=seen[key].count + 1) if key in seen \
                    else doc.event("host-message", line, fields)
                break
    yield from seen.values()
