"""gdb and cuda-gdb sessions: signals, backtraces, CUDA exceptions, GPU focus.

What a person pastes from a debugger: `Thread 1 "python" received signal
SIGSEGV`, the stop location, `bt` or `thread apply all bt` output, and on a
GPU cuda-gdb's `CUDA Exception: Warp Illegal Address` with the focus line
naming kernel, block, thread, SM, warp and lane. A host signal belongs to the
backtrace printed after it (the thread it names, or a bare `bt`). Threads
with the same stack (forty idle workers in poll()) fold into one event.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import regex

from .. import later
from ..debugging import CUDA_EXCEPTIONS, crash_site, exception_number, functions_of, short_name
from ..knowledge import signal_name
from ..model import Event
from ..text import Line, TextDoc

NAME = "gdb"
ANCHORS = (
    b"#0  ",
    b"received signal ",
    b"terminated with signal ",
    b"CUDA Exception: ",
    b"CUDA_EXCEPTION_",
    b"[Switching focus to CUDA kernel",
    b"[Current thread is ",
    b"Parent Dev Grid Status",
)

MAX_FRAMES = 200
"""Frames read in one thread's backtrace."""
EXCEPTION_LINES = 12
"""Lines after a CUDA exception that may still describe it (PC, signal, focus, location)."""

_FRAME = later.compile(
    r"(?<![\w#(])#(?P<index>\d+)\s+(?P<body>0x[0-9a-fA-F]+ in \S.*|<signal handler called>"
    r"|(?!0x)[^\s(][^(]*\(.*\)(?: at \S+:\d+| from \S+)?)\s*$")
_STOP = later.compile(r"^(?P<pc>0x[0-9a-fA-F]+) in (?P<call>.+?)"
                      r"(?: at (?P<file>\S+):(?P<line>\d+)| from (?P<module>\S+))?\s*$")
_CALL = later.compile(r"^(?:(?P<pc>0x[0-9a-fA-F]+) in )?(?P<call>.+?)"
                      r"(?: at (?P<file>\S+):(?P<line>\d+)| from (?P<module>\S+))?$")
"""A frame's text after its number, stripped first: a trailing blank-matcher under the lazy `call` would rescan
every blank run."""
_THREAD = later.compile(r"\bThread (?P<num>\d+) \((?P<what>.*)\)\s*:?\s*$")
_LWP = later.compile(r"LWP (?P<lwp>\d+)")
_QUOTED = later.compile(r"\"(?P<name>[^\"]*)\"")
_SIGNAL = later.compile(
    r"(?:(?:Thread (?P<thread>\d+)(?: \"(?P<process>[^\"]*)\")?"
    r"(?: \([^)]*\)*)?|Program) received|Program terminated with)"
    r" signal (?P<signal>SIG\w+|CUDA_EXCEPTION_\d+|\d+|\?)(?:, (?P<text>[^.]+))?\.?")
_CURRENT = later.compile(r"\[Current thread is (?P<num>\d+)")
_CUDA_EXCEPTION = later.compile(r"CUDA Exception: (?P<name>[A-Za-z][\w -]*[\w])")
_TRIGGER = later.compile(r"exception was triggered at PC (?P<pc>0x[0-9a-fA-F]+)")
_FOCUS = later.compile(r"\[Switching focus to CUDA (?P<what>[^\]]+)\]")
_FOCUS_PART = later.compile(r"\b(?P<key>kernel|grid|cluster|block|thread|device|sm|warp|lane) "
                            r"(?P<value>\([\d, ]+\)|\d+)")
_PC_SOURCE = later.compile(r"^(?P<pc>0x[0-9a-fA-F]+)\s+(?P<line>\d+)\s+(?P<source>\S.*)$")
_SOURCE = later.compile(r"^(?P<line>\d+)\t(?P<source>.*)$")
_KERNEL_ROW = later.compile(
    r"^\s*+(?P<focus>\*)?\s*+(?P<kernel_id>\d+)\s+(?P<parent>-|\d+)\s+(?P<device>\d+)\s+(?P<grid>-?\d+)\s+"
    r"(?P<status>[A-Za-z]+)\s+(?P<sms_mask>0x[0-9a-fA-F]+)\s+(?P<grid_dim>\([\d,]+\))\s+(?P<block_dim>\([\d,]+\))"
    r"\s+(?P<invocation>\S(?:.*\S)?)\s*$")
MAX_KERNEL_ROWS = 256
"""Rows read under one `info cuda kernels` header."""
_PAGER = "--Type <RET>"
_DETAIL_LINES = frozenset({"No locals.", "No symbol table info available."})
"""Lines `bt full` prints under a frame that has no locals to show."""
_FOCUS_NAMES = {"kernel": "kernel_id", "sm": "sm_id"}
"""Focus keys renamed where the shared field names mean something else (sm = architecture)."""


@dataclass
class _Stack:
    """One thread's backtrace, or several threads' identical ones folded."""

    first: Line
    last: Line
    text: str
    frames: list[dict[str, Any]]
    fields: dict[str, Any]
    threads: list[str] = field(default_factory=list)
    count: int = 1


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """Events of one debugger transcript, in the order they were printed."""
    consumed: set[int] = set()
    stacks: dict[tuple, _Stack] = {}
    foci: dict[tuple, list] = {}
    kernels: dict[tuple, list] = {}
    signal: dict[str, Any] | None = None
    current: str | None = None
    for line in lines:
        if line.number in consumed:
            continue
        text = line.text
        if ("CUDA Exception: " in text or "CUDA_EXCEPTION_" in text) and _is_exception(text):
            event, last = _exception(doc, line)
            consumed.update(range(line.number, last + 1))
            yield event
        elif (m := _SIGNAL.search(text)) and not m.group("signal").startswith(("CUDA", "?")):
            if signal and not signal["used"]:
                yield _lone_signal(doc, signal)
            signal = _host_signal(doc, line, m)
        elif "Parent Dev Grid Status" in text:
            rows = _kernel_table(doc, line)
            consumed.update(range(line.number, line.number + len(rows) + 1))
            for row, fields in rows:
                kernels.setdefault(tuple(fields.get(k) for k in ("kernel_id", "device", "grid", "status")), []).append(
                    (row, fields))
        elif m := _CURRENT.search(text):
            current = m.group("num")
        elif _FOCUS.search(text):
            focus, last = _focus(doc, line)
            consumed.update(range(line.number, last + 1))
            foci.setdefault(_focus_key(focus), []).append(focus)
        elif _FRAME.search(text):
            stack = _backtrace(doc, line)
            if stack is None:
                continue
            consumed.update(range(line.number, stack.last.number + 1))
            _claim_signal(stack, signal, current)
            key = (tuple((f.get("function"), f.get("module"), f.get("file"), f.get("line")) for f in stack.frames),
                   stack.fields.get("signal"))
            if key in stacks:
                stacks[key].count += 1
                stacks[key].threads.extend(stack.threads)
            else:
                stacks[key] = stack
    if signal and not signal["used"]:
        yield _lone_signal(doc, signal)
    for stack in _without_stop_frames(list(stacks.values())):
        yield _stack_event(doc, stack)
    for group in foci.values():
        yield _focus_event(doc, group)
    for group in kernels.values():
        row, fields = group[0]
        yield doc.event("gpu-kernel", row, fields, count=len(group))


def _is_exception(text: str) -> bool:
    return bool(_CUDA_EXCEPTION.search(text) or ((m := _SIGNAL.search(text)) and "CUDA_EXCEPTION" in m.group("signal")))


def parse_call(body: str) -> dict[str, Any]:
    """A gdb frame or stop location: `0x.. in func (args) at file.c:12` or `... from /lib/x.so`.

    The argument values are dropped; C++ parameter types and launch
    configurations are dropped from the name too.
    """
    m = _CALL.match(body.strip())
    frame: dict[str, Any] = {}
    if not m:
        return frame
    call = _drop_args(m.group("call"))
    frame["function"] = short_name(call) if call not in ("??", "") else "??"
    if call.startswith("<"):
        frame["function"] = call
    for key in ("pc", "module", "file"):
        if m.group(key):
            frame[key] = m.group(key)
    if m.group("line"):
        frame["line"] = int(m.group("line"))
    return frame


def _drop_args(call: str) -> str:
    """`name (a=1, b=<opt>)` -> `name`: remove the last balanced parenthesised group."""
    call = call.rstrip()
    if not call.endswith(")"):
        return call
    depth = 0
    for i in range(len(call) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(call[i], 0)
        if depth == 0:
            return call[:i].rstrip() or call
    return call


def _host_signal(doc: TextDoc, line: Line, m: regex.Match) -> dict[str, Any]:
    """A host signal and the stop location printed right after it."""
    name = signal_name(m.group("signal")) or m.group("signal")
    info: dict[str, Any] = {"line": line, "signal": name, "used": False, "stop": None,
                            "thread": m.group("thread"), "process": m.group("process")}
    if m.group("text"):
        info["signal_text"] = m.group("text").strip()
    for nxt in doc.following(line, 3):
        if stop := _STOP.match(nxt.text.strip()):
            info["stop"] = (nxt, {"index": 0, **parse_call(stop.group(0))})
            break
    return info


def _claim_signal(stack: _Stack, signal: dict[str, Any] | None, current: str | None) -> None:
    """Give the stack the signal when it is the signalled thread's (or a bare `bt`)."""
    if not signal or stack.first.number < signal["line"].number:
        return
    thread = stack.fields.get("thread")
    if thread is None or thread in (signal["thread"], current):
        signal["used"] = True
        stack.fields["signal"] = signal["signal"]
        if "signal_text" in signal:
            stack.fields["signal_text"] = signal["signal_text"]
        if signal["process"]:
            stack.fields["process"] = signal["process"]
        stack.text = signal["line"].text + "\n" + stack.text


def _lone_signal(doc: TextDoc, signal: dict[str, Any]) -> Event:
    """A signal with no backtrace after it: the stop location is the only frame."""
    line = signal["line"]
    frames = [signal["stop"][1]] if signal["stop"] else []
    last = signal["stop"][0] if signal["stop"] else None
    fields = {k: signal[k] for k in ("signal", "signal_text", "thread", "process") if signal.get(k)}
    fields.update(frames=frames, functions=functions_of(frames), **crash_site(frames))
    return doc.event("backtrace", line, fields, last=last)


def _backtrace(doc: TextDoc, line: Line) -> _Stack | None:
    """The backtrace that starts at frame #0 on `line`, with its thread header if any."""
    first = _FRAME.search(line.text)
    if first is None or first.group("index") != "0":
        return None
    frames = [{"index": 0, **parse_call(first.group("body"))}]
    block = [line]
    quote = line.text[:first.start()].rstrip()
    for nxt in doc.following(line, MAX_FRAMES * 2):
        text = nxt.text[len(quote):] if quote and nxt.text.startswith(quote) else nxt.text
        m = _FRAME.search(text)
        if m and int(m.group("index")) == frames[-1]["index"] + 1:
            frames.append({"index": int(m.group("index")), **parse_call(m.group("body"))})
        elif not (text.startswith((" ", "\t")) and text.strip()) and _PAGER not in text \
                and text.strip() not in _DETAIL_LINES:
            break
        block.append(nxt)
        if len(frames) >= MAX_FRAMES:
            break
    fields: dict[str, Any] = {}
    header = next((p for p in reversed(doc.preceding(line, 2)) if _THREAD.search(p.text)), None)
    head_lines = []
    if header:
        t = _THREAD.search(header.text)
        assert t is not None  # header was picked for matching _THREAD
        fields["thread"] = t.group("num")
        if lwp := _LWP.search(t.group("what")):
            fields["lwp"] = int(lwp.group("lwp"))
        if name := _QUOTED.search(t.group("what")):
            fields["thread_name"] = name.group("name")
        head_lines = [header.text]
    text = "\n".join(head_lines + [l.text for l in block])
    threads = [fields["thread"]] if "thread" in fields else []
    return _Stack(header or line, block[-1], text, frames, fields, threads)


def _without_stop_frames(stacks: list[_Stack]) -> list[_Stack]:
    """Drop a stop location gdb printed as a lone `#0` when a full `bt` of it follows."""
    def covered(short: _Stack) -> bool:
        return any(long is not short and len(long.frames) > len(short.frames)
                   and long.first.number > short.first.number
                   and long.fields.get("signal") == short.fields.get("signal")
                   and long.frames[:len(short.frames)] == short.frames for long in stacks)
    return [stack for stack in stacks if not covered(stack)]


def _stack_event(doc: TextDoc, stack: _Stack) -> Event:
    fields = dict(stack.fields)
    fields.update(frames=stack.frames, functions=functions_of(stack.frames), **crash_site(stack.frames))
    if stack.count > 1:
        fields["threads"] = stack.threads
    return doc.event("backtrace", stack.first, fields, last=stack.last, text=stack.text, count=stack.count)


def _exception(doc: TextDoc, line: Line) -> tuple[Event, int]:
    """A cuda-gdb CUDA exception: its name, number, trigger PC, focus and location."""
    fields: dict[str, Any] = {}
    block: list[Line] = []
    seen_location = False
    for nxt in [line] + doc.following(line, EXCEPTION_LINES):
        text = nxt.text.strip()
        if nxt is not line and (text.startswith("(cuda-gdb)") or _FRAME.search(text)):
            break
        if m := _CUDA_EXCEPTION.search(text):
            fields.setdefault("exception_name", m.group("name"))
        elif m := _TRIGGER.search(text):
            fields["trigger_pc"] = m.group("pc")
        elif (m := _SIGNAL.search(text)) and "CUDA_EXCEPTION" in m.group("signal"):
            fields["exception"] = int(m.group("signal").rsplit("_", 1)[1])
            if m.group("text"):
                fields["exception_name"] = m.group("text").strip()
            if m.group("process"):
                fields["process"] = m.group("process")
        elif m := _FOCUS.search(text):
            fields.update(_focus_fields(m.group("what")))
        elif (m := _STOP.match(text)) and not seen_location:
            seen_location = True
            fields.update(_location(m.group(0)))
        elif (m := _SOURCE.match(nxt.text)) and seen_location:
            fields["source"] = m.group("source").strip()
        elif text or seen_location:
            break
        block.append(nxt)
    if "exception" not in fields and "exception_name" in fields:
        fields["exception"] = exception_number(fields["exception_name"])
    elif "exception_name" not in fields and fields.get("exception") in CUDA_EXCEPTIONS:
        fields["exception_name"] = CUDA_EXCEPTIONS[fields["exception"]]
    while len(block) > 1 and not block[-1].text.strip():
        block.pop()
    last = block[-1]
    text = "\n".join(l.text for l in block)
    return doc.event("gpu-exception", line, fields, last=last, text=text), last.number


def _location(stop: str) -> dict[str, Any]:
    """Fields of a device stop location: pc, kernel, source file and line."""
    frame = parse_call(stop)
    fields: dict[str, Any] = {"pc": frame.get("pc")}
    if frame.get("function") and frame["function"] != "??":
        fields["kernel"] = frame["function"]
        fields["frames"] = [{"index": 0, **frame}]
    for key in ("file", "line"):
        if key in frame:
            fields[key] = frame[key]
    return {k: v for k, v in fields.items() if v is not None}


def _focus_fields(what: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for m in _FOCUS_PART.finditer(what):
        value = m.group("value")
        key = _FOCUS_NAMES.get(m.group("key"), m.group("key"))
        fields[key] = int(value) if value.isdigit() else value.replace(" ", "")
    return fields


def _focus(doc: TextDoc, line: Line) -> tuple[tuple[Line, Line, dict[str, Any]], int]:
    """A focus switch with no exception (a live or hung kernel) and where that thread is."""
    switch = _FOCUS.search(line.text)
    assert switch is not None  # the caller matched it
    fields = _focus_fields(switch.group("what"))
    last = line
    for nxt in doc.following(line, 2):
        text = nxt.text.strip()
        if m := _PC_SOURCE.match(text):
            fields.update(pc=m.group("pc"), line=int(m.group("line")), source=m.group("source"))
        elif m := _STOP.match(text):
            fields.update(_location(text))
        elif (m := _SOURCE.match(nxt.text)) and last is not line:
            fields["source"] = m.group("source").strip()
        else:
            break
        last = nxt
    return (line, last, fields), last.number


def _focus_key(focus: tuple[Line, Line, dict[str, Any]]) -> tuple:
    fields = focus[2]
    return tuple(fields.get(k) for k in ("pc", "kernel", "file", "line", "source", "device"))


def _focus_event(doc: TextDoc, group: list[tuple[Line, Line, dict[str, Any]]]) -> Event:
    """Every stop at one place (several threads, or the same one asked twice) as one event."""
    first, last, fields = group[0]
    fields = dict(fields)
    threads = list(dict.fromkeys(f"{g[2].get('block')}{g[2].get('thread')}" for g in group))
    if len(threads) > 1:
        fields["threads"] = threads
    return doc.event("gpu-focus", first, fields, last=last, count=len(group))


def _kernel_table(doc: TextDoc, header: Line) -> list[tuple[Line, dict[str, Any]]]:
    """The rows of an `info cuda kernels` table: which kernels ran on which device, `*` on the focus.

    The last column is `Invocation` (name and arguments) in older cuda-gdb and
    `Name Args` in newer; either way the kernel name is read from its start.
    """
    rows: list[tuple[Line, dict[str, Any]]] = []
    for line in doc.following(header, MAX_KERNEL_ROWS):
        m = _KERNEL_ROW.match(line.text)
        if m is None:
            break
        invocation = m["invocation"]
        name = _drop_args(invocation) if "(" in invocation else invocation.split()[0]
        fields: dict[str, Any] = {
            "kernel_id": int(m["kernel_id"]), "device": int(m["device"]), "grid": int(m["grid"]),
            "status": m["status"], "sms_mask": m["sms_mask"], "grid_dim": m["grid_dim"], "block_dim": m["block_dim"],
            "kernel": short_name(name), "invocation": invocation[:300], "focus": bool(m["focus"])}
        if m["parent"] != "-":
            fields["parent"] = int(m["parent"])
        rows.append((line, fields))
    return rows
