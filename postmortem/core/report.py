"""What reading a core gives: frozen records that `model.to_plain` turns into the JSON `cores` entry.

Addresses are hex strings ("0x7f3a..."): JSON numbers lose precision above 2**53.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .python_stack import PythonFrame


@dataclass(frozen=True)
class Frame:
    """One stack frame: where (pc, module + offset), what (symbol + offset) and how it was found.

    `how` is "registers" for frame 0, then "cfi", "fp" or "scan" (the last two are guesses).
    """

    pc: str
    module: str | None
    offset: str | None
    symbol: str | None
    symbol_offset: int | None
    how: str


@dataclass(frozen=True)
class Thread:
    """One thread: its id, whether it took the signal, registers, native frames and Python frames."""

    tid: int
    crashed: bool
    registers: Mapping[str, str]
    frames: tuple[Frame, ...]
    python_frames: tuple[PythonFrame, ...] | None = None


@dataclass(frozen=True)
class Signal:
    """The fatal signal: what it was, what si_code says, the faulting address or the sender."""

    number: int
    name: str
    code: int
    code_meaning: str
    address: str | None
    mapping: str | None
    sender_pid: int | None


@dataclass(frozen=True)
class ModuleInfo:
    """One mapped file: load range, build-ids (core vs disk), GPU-stack kind and version."""

    path: str
    start: str
    end: str
    build_id: str | None
    build_id_on_disk: str | None
    kind: str
    version: str | None
    found_at: str | None


@dataclass(frozen=True)
class Core:
    """A core file read like a debugger reads it; `path` is the input it came from."""

    path: str
    executable: str | None
    command_line: str | None
    argv: tuple[str, ...]
    pid: int | None
    uid: int | None
    signal: Signal | None
    threads: tuple[Thread, ...]
    modules: tuple[ModuleInfo, ...]
    environment: Mapping[str, Any] = field(default_factory=dict)
    python_version: str | None = None
    gpu: Mapping[str, str] = field(default_factory=dict)
