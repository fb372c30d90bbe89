"""gdb, the oracle of the core tests: one way to run it, one script for its frames, one parser.

tests/data/core/gdb_frames.py prints every thread's frames with gdb's frame type and file:line;
`gdb_threads` runs it over an executable and its core, `parse_frames` reads what it printed (also
after any other way of getting a process into gdb, through `run_gdb`), and the filters below give
each test the view of gdb's frames it compares with: gdb's INLINE frames (the same pc as the frame
that holds them) and TAILCALL frames (synthesised from DWARF call-site info) are not on the stack.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

GDB = shutil.which("gdb")
SCRIPT = Path(__file__).parent / "data" / "core" / "gdb_frames.py"
OFFLINE = "set debuginfod enabled off"
"""Run before anything is loaded: a test's gdb must never ask a debuginfod server for files."""
PYTHON_RAISED = "Traceback (most recent call last):"
"""What gdb writes to stderr when a Python script raises."""
MAX_OUTPUT = 256 << 20
"""Characters of gdb's output parsed at the most (a million frames of long C++ names fit)."""
NOT_ON_THE_STACK = ("inline", "tailcall")
SIGNAL_FRAME = "<signal handler called>"
"""How gdb's backtrace shows a SIGTRAMP frame, and how postmortem names it."""


@dataclass(frozen=True)
class GdbFrame:
    """One frame as gdb lists it: pc, gdb's frame type, function name, file:line of the pc."""

    pc: int
    kind: str
    name: str | None
    where: str | None

    @property
    def label(self) -> str | None:
        """The name gdb's backtrace shows: a signal trampoline is `<signal handler called>`."""
        return SIGNAL_FRAME if self.kind == "sigtramp" else self.name


Threads = dict[int, list[GdbFrame]]


def run_gdb(commands: Iterable[str], *, gdb: str = "gdb", cwd: Path | None = None, timeout: int = 300,
            check: bool = True) -> str:
    """gdb -batch -nx running each command as -ex (debuginfod off first); its stdout. A gdb whose
    last command failed, or in which a sourced Python script raised (gdb still exits 0 then), fails
    the test with its stderr, unless `check` is off (a run that may not get as far as writing a
    core, where the caller skips instead)."""
    argv = [gdb, "-q", "-batch", "-nx", "-iex", OFFLINE, *(a for c in commands for a in ("-ex", c))]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and (done.returncode != 0 or PYTHON_RAISED in done.stderr):
        pytest.fail(f"gdb failed (exit {done.returncode}): {argv}\n{done.stderr}")
    return done.stdout


def parse_frames(text: str) -> Threads:
    """The THREAD and FRAME lines of tests/data/core/gdb_frames.py, per thread id; other lines skipped."""
    threads: Threads = {}
    current: list[GdbFrame] = []
    for line in text[:MAX_OUTPUT].splitlines():
        if line.startswith("THREAD "):
            current = threads.setdefault(int(line.split()[1]), [])
        elif line.startswith("FRAME "):
            _, pc, kind, where, name = line.split(" ", 4)
            current.append(GdbFrame(int(pc, 16), kind, None if name == "None" else name,
                                    None if where == "None" else where))
    return threads


def gdb_threads(exe: Path, core: Path, *, gdb: str = "gdb", sysroot: Path | str | None = None,
                cwd: Path | None = None, before: Iterable[str] = ()) -> Threads:
    """gdb's frames of every thread of `core` of `exe`: the commands of `before`, then the sysroot,
    then the files loaded (so settings that change how they are read come first)."""
    commands = [*before, *([f"set sysroot {sysroot}"] if sysroot is not None else []), *loading(exe, core),
                f"source {SCRIPT}"]
    return parse_frames(run_gdb(commands, gdb=gdb, cwd=cwd))


def loading(exe: Path, core: Path) -> list[str]:
    """The commands that load an executable and its core, for a script of the caller's to follow."""
    return [f"file {exe}", f"core-file {core}"]


def on_the_stack(threads: Threads) -> Threads:
    """The physical frames: gdb's INLINE and TAILCALL frames left out."""
    return {tid: [f for f in frames if f.kind not in NOT_ON_THE_STACK] for tid, frames in threads.items()}


def labels(threads: Threads, spell: Callable[[str], str] = str) -> dict[int, list[str | None]]:
    """Each frame's label per thread, spelled by `spell` (None where gdb has no name)."""
    return {tid: [None if f.label is None else spell(f.label) for f in frames] for tid, frames in threads.items()}


def pairs(threads: Threads, spell: Callable[[str], str] = str) -> dict[int, list[tuple[int, str | None]]]:
    """(pc, label spelled by `spell`) of each frame per thread."""
    return {tid: [(f.pc, None if f.label is None else spell(f.label)) for f in frames]
            for tid, frames in threads.items()}
