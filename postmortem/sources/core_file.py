"""ELF inputs: Linux core files (stub until the core reader lands)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Event, Options
from ..reader import ByteReader

NAME = "elf-core"


@dataclass(frozen=True)
class CoreResult:
    """What reading one ELF input gave: its format, events, the core's details, diagnostics."""

    format: str
    events: tuple[Event, ...] = ()
    core: Any = None
    diagnostics: tuple[str, ...] = field(default_factory=tuple)


def read(reader: ByteReader, path: str, options: Options) -> CoreResult:
    return CoreResult("elf", diagnostics=("ELF file (core or binary): not analysed by this version",))
