"""What reading a core gives: frozen records that `model.to_plain` turns into the JSON `cores` entry.

Addresses are hex strings ("0x7f3a..."): JSON numbers lose precision above 2**53.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .python_stack import PythonFrame, PythonLock


@dataclass(frozen=True)
class InlineFrame:
    """A function the compiler inlined at a frame's pc: gdb lists it as a frame of its own, same pc."""

    function: str | None
    file: str | None
    line: int | None


@dataclass(frozen=True)
class Frame:
    """One stack frame: where (pc, module + offset), what (symbol + offset) and how it was found.

    `how` is "registers" for frame 0, then "cfi", "sigcontext" (the frame a signal interrupted, read from
    the kernel's signal frame), "pclntab" (Go's own table), "fp", "scan" or "lr" (aarch64's link register;
    the last three are guesses): unwind.HOWS.
    `file`/`line` come from DWARF (for a return address, of the call: pc-1, as gdb does);
    `inlined` lists the functions inlined there, innermost first, each with its own line, and
    then `file`/`line` are where the outermost of them was called.
    """

    pc: str
    module: str | None
    offset: str | None
    symbol: str | None
    symbol_offset: int | None
    how: str
    file: str | None = None
    line: int | None = None
    inlined: tuple[InlineFrame, ...] = ()
    python_frames: tuple[PythonFrame, ...] = ()
    """For an eval-loop frame (_PyEval_EvalFrameDefault) of CPython: the Python frames it runs,
    innermost first, as `pystack --native` shows them; Thread.python_merge says how they were assigned."""


@dataclass(frozen=True)
class Thread:
    """One thread: its id, whether it took the signal, registers, native frames and Python frames.

    `truncated` says why the native frames stop short of the outermost one (a bound, never silently);
    `stack_left` is the bytes of stack past the last frame, `frames_left` about how many frames they
    hold. `guessed_from` is the first frame found without CFI: from it on the stack is a guess.
    """

    tid: int
    crashed: bool
    registers: Mapping[str, str]
    frames: tuple[Frame, ...]
    python_frames: tuple[PythonFrame, ...] | None = None
    truncated: str | None = None
    stack_left: int | None = None
    frames_left: int | None = None
    guessed_from: int | None = None
    python_merge: str | None = None
    """How `python_frames` were spread over the eval-loop frames (Frame.python_frames), and how sure that is."""
    python_locks: tuple[PythonLock, ...] = ()
    """The threading locks its Python frames' value stacks refer to (PythonThread.locks): what a thread waiting in a
    lock waits for, and the `with` blocks it is in."""
    name: str | None = None
    """The thread's name (its comm): every thread's where a snapshot wrote them (notes.NT_THREAD_NAMES), else only
    the main thread's (NT_PRPSINFO); Linux cores name no other thread."""


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
    in_stack_guard: bool = False
    """The address lies in the guard gap just below the faulting thread's stack: a stack overflow."""


@dataclass(frozen=True)
class OriginalFault:
    """The signal a crash handler caught before it re-raised it or aborted (postmortem.core.signal_frame).

    Read from the kernel's rt_sigframe under the handler: the fault's siginfo, the registers it
    interrupted and the stack unwound from them. `handler` names who re-raised it ("faulthandler",
    else module!function); `frame_address` is where the sigframe lies on the (alternate) stack.
    """

    signal: Signal
    frame_address: str
    handler: str
    handler_frame: Frame
    registers: Mapping[str, str]
    frames: tuple[Frame, ...]


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
    original_fault: OriginalFault | None = None
