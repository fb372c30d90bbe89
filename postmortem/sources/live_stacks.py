"""Stacks of a hung job as people paste them into an issue: `py-spy dump --pid PID` and `pystack remote PID`,
of one process or of several (one dump per rank, pasted one after another, often through a launcher's or a
log collector's rank prefix: `[rank3]:`, `[default3]:`, `3: `).

Each process becomes one `process-snapshot` event of the shape postmortem/sources/process_snapshot.py gives
(pid, rank when a prefix says it, process, threads, `stacks`: per thread its tid, name, native frames and
Python frames, innermost first), so that the hang analysis (postmortem/hang.py) groups pasted dumps as it groups
a snapshot's process files.

py-spy (https://github.com/benfred/py-spy) prints `Process PID: COMMAND`, then per thread
`Thread TID (idle|active[+gil]): "NAME"` and its frames innermost first, `function (file:line)`; with
`--native` native frames are mixed in as `function (library)`, with `--locals` each frame is followed by its
more indented `Arguments:` and `Locals:`. Python 3.11+ frames are named by their qualified name
(`Condition.wait`): the code's own name (the last part) is kept, as pystack and a core name it.

pystack (https://github.com/bloomberg/pystack) prints per thread `Traceback for thread TID (NAME) [FLAGS]
(most recent call last):` and its frames outermost first, `(Python) File "file", line N, in function` (and
`(C) File ...` with `--native`): they are turned round. pystack names no process: a `pystack remote PID` command
line pasted above a dump gives its pid; otherwise a process's threads are listed newest first, its main thread
(whose tid is the pid) last, so a thread with a larger tid than the one before it starts the next process.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import regex

from .. import later
from ..model import Event
from ..normalise import relay_rank
from ..text import Line, TextDoc

NAME = "live-stacks"
ANCHORS = (b"Process ", b"Thread ", b"Traceback for thread ", b"pystack remote ")
MAX_PROCESSES = 1024
"""Processes read from one input (a pasted job of a few nodes has tens)."""
MAX_THREADS = 1024
"""Threads kept per process (a training process has tens, a few hundred with DataLoader pin threads)."""
MAX_FRAMES = 256
"""Frames kept per thread (Python and native each): the innermost, where it waits."""
MAX_BLOCK_LINES = 4096
"""Lines read after one thread's header: its frames and, with --locals, their variables."""

PY_SPY_PROCESS = later.compile(r"^[ \t]*Process (?P<pid>\d+): (?P<command>.*)$")
PY_SPY_THREAD = later.compile(
    r'^[ \t]*Thread (?P<tid>0x[0-9A-Fa-f]+|\d+) \((?P<state>[a-z+]+)\)(?:: "(?P<name>.*)")?\s*$')
PY_SPY_FRAME = later.compile(r"^(?P<indent>[ \t]+)(?P<function>\S.*?) \((?P<where>[^()]*)\)\s*$")
PY_SPY_PYTHON = later.compile(r"^(?:(?P<file>.*(?:\.pyx?|>)):(?P<line>\d+))?$")
"""Where a py-spy frame is a Python one: `file.py:N`, `<frozen x>:N`, or nothing (py-spy found no file);
any other place (`libc.so.6`, `src/x.cc:12`) is a native frame's."""
PYSTACK_THREAD = later.compile(
    r"^[ \t]*Traceback for thread (?P<tid>\d+) \((?P<name>.*?)\) \[(?P<flags>[^\]]*)\]"
    r" \(most recent call last\):\s*$")
PYSTACK_FRAME = later.compile(
    r'^[ \t]+\((?P<kind>Python|C)\) File "(?P<file>[^"]*)", line (?P<line>\d+), in '
    r"(?P<function>.+?)(?: \(inlined\))?(?: \((?P<module>[^()]*)\))?\s*$")
PYSTACK_COMMAND = later.compile(r"\bpystack remote\b(?:\s+-\S+)*\s+(?P<pid>\d+)\b")
HEADERS = (PY_SPY_PROCESS, PY_SPY_THREAD, PYSTACK_THREAD, PYSTACK_COMMAND)


@dataclass
class _Process:
    """One process's dump while it is read."""

    tool: str
    first: Line
    last: Line
    pid: int | None = None
    rank: int | None = None
    command: str | None = None
    stacks: list[dict[str, Any]] = field(default_factory=list)


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    processes: list[_Process] = []
    pystack_pid: int | None = None
    ends = _block_ends(lines)
    for line, end in zip(lines, ends):
        rank = _rank(line)
        if (command := PYSTACK_COMMAND.search(line.text)) is not None:
            pystack_pid = int(command["pid"])
        elif (opened := PY_SPY_PROCESS.match(line.text)) is not None:
            processes.append(_Process("py-spy", line, line, int(opened["pid"]), rank, opened["command"].strip()))
        elif (header := PY_SPY_THREAD.match(line.text) or PYSTACK_THREAD.match(line.text)) is not None:
            tool = "py-spy" if header.re.pattern == PY_SPY_THREAD.pattern else "pystack"
            block = _block(doc, line, end)
            thread = _py_spy_thread(header, block) if tool == "py-spy" else _pystack_thread(header, block)
            current = processes[-1] if processes else None
            if current is None or _starts_another(current, tool, rank, thread, pystack_pid):
                current = _Process(tool, line, line, pystack_pid if tool == "pystack" else None, rank)
                processes.append(current)
                pystack_pid = None
            if len(current.stacks) < MAX_THREADS:
                current.stacks.append(thread)
            current.last = block[-1] if block else line
        if len(processes) > MAX_PROCESSES:
            break
    for process in processes[:MAX_PROCESSES]:
        if any(s["frames"] or s["python"] for s in process.stacks):  # a header alone says nothing of a wait
            yield _event(doc, process)


def _rank(line: Line) -> int | None:
    return relay_rank(line.original)


def _block_ends(lines: list[Line]) -> list[int | None]:
    """For each candidate line, the number of the next header: a thread's block is read no further (a local's
    value may hold an anchor such as "Process "; it is inside the block)."""
    ends: list[int | None] = []
    end = None
    for line in reversed(lines):
        ends.append(end)
        if any(header.search(line.text) for header in HEADERS):
            end = line.number
    return ends[::-1]


def _block(doc: TextDoc, header: Line, end: int | None) -> list[Line]:
    """The lines under a thread's header that are indented deeper than it, up to the next header."""
    limit = MAX_BLOCK_LINES if end is None else min(MAX_BLOCK_LINES, end - header.number - 1)
    depth = _indent(header.text)
    block = []
    for line in doc.following(header, limit) if limit > 0 else []:
        if not line.text.strip() or _indent(line.text) <= depth:
            break
        block.append(line)
    return block


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _starts_another(current: _Process, tool: str, rank: int | None, thread: dict[str, Any],
                    pystack_pid: int | None) -> bool:
    """Whether a thread's header begins the dump of another process than the one being read."""
    if current.tool != tool or current.rank != rank:
        return True
    if tool == "py-spy":  # a dump pasted without its Process line: a second main thread is another process
        return thread["name"] == "MainThread" and any(s["name"] == "MainThread" for s in current.stacks)
    return pystack_pid is not None or (bool(current.stacks) and thread["tid"] > current.stacks[-1]["tid"])


def _py_spy_thread(header: regex.Match, block: list[Line]) -> dict[str, Any]:
    native: list[dict[str, Any]] = []
    python: list[dict[str, Any]] = []
    indent = None
    for line in block:
        frame = PY_SPY_FRAME.match(line.text)
        if frame is None or (indent is not None and len(frame["indent"]) > indent):
            continue  # an argument or a local of the frame above (--locals)
        indent = len(frame["indent"])
        place = PY_SPY_PYTHON.match(frame["where"])
        if place is not None and len(python) < MAX_FRAMES:
            python.append({"function": frame["function"].rpartition(".")[2], "file": place["file"] or "",
                           "line": int(place["line"]) if place["line"] else None})
        elif place is None and len(native) < MAX_FRAMES:
            native.append(_native(frame["function"], frame["where"]))
    tid = header["tid"]
    return {"tid": int(tid, 16) if tid.startswith("0x") else int(tid), "name": header["name"],
            "frames": native, "python": python}


def _pystack_thread(header: regex.Match, block: list[Line]) -> dict[str, Any]:
    native: list[dict[str, Any]] = []
    python: list[dict[str, Any]] = []
    for line in block:
        if (frame := PYSTACK_FRAME.match(line.text)) is None:
            continue  # the frame's source line, its arguments and locals, "Waiting for the GIL"
        if frame["kind"] == "Python":
            python.append({"function": frame["function"], "file": frame["file"], "line": int(frame["line"])})
        else:
            native.append({**_native(frame["function"], frame["module"] or ""), "file": frame["file"],
                           "line": int(frame["line"])})
    # pystack prints the outermost frame first (most recent call last): innermost first, as a snapshot holds them
    return {"tid": int(header["tid"]), "name": header["name"],
            "frames": native[::-1][:MAX_FRAMES], "python": python[::-1][:MAX_FRAMES]}


def _native(function: str, module: str) -> dict[str, Any]:
    """A native frame as a snapshot's: its symbol without a symbol version (`clock_nanosleep@GLIBC_2.2.5`)."""
    return {"symbol": function.split("@", 1)[0], "module": module.rsplit("/", 1)[-1] or None}


def _event(doc: TextDoc, process: _Process) -> Event:
    main = next((s for s in process.stacks if s["name"] == "MainThread" or s["tid"] == process.pid), None)
    # the main thread's tid is the pid (py-spy's decimal thread ids and pystack's are OS thread ids)
    pid = process.pid if process.pid is not None else (main or min(process.stacks, key=lambda s: s["tid"]))["tid"]
    stacks = sorted(process.stacks, key=lambda s: s is not main)  # the main thread first, as hang.py reads it
    fields = {"pid": pid, "rank": process.rank,
              "process": process.command.split()[0].rsplit("/", 1)[-1] if process.command else None,
              "command": (process.command or "")[:500] or None, "threads": len(stacks), "stacks": stacks}
    who = f"rank {process.rank} " if process.rank is not None else ""
    return doc.event("process-snapshot", process.first, {k: v for k, v in fields.items() if v not in (None, "")},
                     last=process.last, text=f"{who}pid {pid}: {len(stacks)} threads, as {process.tool} printed them")
