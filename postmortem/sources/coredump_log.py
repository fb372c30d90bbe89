"""systemd-coredump reports: the journal's "dumped core" message and `coredumpctl info`.

systemd-coredump logs `Process 13508 (python3) of user 1000 dumped core.`
followed by the modules it saw and a `Stack trace of thread N:` per thread,
the crashing thread first, frames as `#0  0x... raise (libc.so.6 + 0x3ef0b)`.
`coredumpctl info` puts PID, Signal, Executable and Command Line above that
message. Pasted reports are often cut, so a stack trace on its own is read too.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import regex

from .. import later
from ..debugging import crash_site, functions_of
from ..knowledge import signal_name
from ..model import Event
from ..text import Line, TextDoc

NAME = "systemd-coredump"
ANCHORS = (b"dumped core.", b"Stack trace of thread ")

BLOCK_LINES = 3000
"""Lines read after the message: module lists run to hundreds of lines."""
FIELD_LINES = 25
"""Lines above the message that may hold `coredumpctl info` fields."""
MAX_FRAMES = 200

_DUMPED = later.compile(r"Process (?P<pid>\d+) \((?P<process>[^)]*)\) of user (?P<uid>\d+) dumped core\.")
_STACK = later.compile(r"Stack trace of thread (?P<tid>\d+):")
_FRAME = later.compile(
    r"#(?P<index>\d+)\s+(?P<pc>0x[0-9a-fA-F]+) (?P<function>.+?) \("
    r"(?P<module>[^()]+?)(?: \+ (?P<offset>0x[0-9a-fA-F]+))?\)\s*$")
_INFO = later.compile(r"^\s*(?P<key>[A-Z][A-Za-z ]{1,20}): (?P<value>.*)$")
_MODULE = later.compile(r"^\s*(?:Module |ELF object binary|Found module )")
_SYSLOG = later.compile(r"^(?:\S+\s+){2,3}(?P<host>\S+) systemd-coredump\[\d+\]: ")
_INFO_SIGNAL = later.compile(r"(?P<number>\d+)(?: \((?P<name>\w+)\))?")
_ABORT_MESSAGES = later.compile(r"terminate called (?:after throwing|without an active exception|recursively)|"
                                r"Assertion `.*' failed|free\(\): invalid|double free or corruption|"
                                r"malloc\(\): |corrupted size vs\. prev_size|stack smashing detected")
_INFO_KEYS = {"PID": "pid", "UID": "uid", "Signal": "signal", "Executable": "executable",
              "Command Line": "command_line", "Hostname": "host", "Storage": "storage", "Timestamp": "timestamp"}


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One `coredump` event per dumped process (or per orphaned stack trace block)."""
    consumed: set[int] = set()
    for line in lines:
        if line.number in consumed:
            continue
        dumped = _DUMPED.search(line.text)
        if not dumped and not _STACK.search(line.text):
            continue
        block = _block(doc, line)
        consumed.update(l.number for l in block)
        yield _event(doc, line, block, dumped)


def _block(doc: TextDoc, line: Line) -> list[Line]:
    """`line` and the module and stack lines under it, up to the first unrelated line."""
    block = [line]
    blanks = 0
    for nxt in doc.following(line, BLOCK_LINES):
        text = nxt.text.strip()
        if not text:
            blanks += 1
            if blanks > 1:
                break
            continue
        if not (_MODULE.match(nxt.text) or _STACK.search(text) or _FRAME.search(text)):
            break
        blanks = 0
        block.append(nxt)
    return block


def _event(doc: TextDoc, line: Line, block: list[Line], dumped: regex.Match | None) -> Event:
    fields: dict[str, Any] = _info_fields(doc, line) if dumped else {}
    if dumped:
        fields.setdefault("pid", int(dumped.group("pid")))
        fields["process"] = dumped.group("process")
        fields.setdefault("uid", int(dumped.group("uid")))
    if syslog := _SYSLOG.match(line.text):
        fields.setdefault("host", syslog.group("host"))
    stacks = _stacks(block)
    if stacks:
        tid, frames = stacks[0]
        fields.update(thread=tid, frames=frames, functions=functions_of(frames), threads=len(stacks),
                      **crash_site(frames))
        if "signal" not in fields and "abort" in fields["functions"]:
            fields.update(signal="SIGABRT", signal_from="frames")
    if message := _abort_message(doc, line):
        fields["abort_message"] = message
    time = fields.pop("time", None)
    wanted = [l for l in block if not _MODULE.match(l.text)]
    text = "\n".join(l.text for l in wanted[:MAX_FRAMES])
    if "abort_message" in fields:
        text = fields["abort_message"] + "\n" + text
    return doc.event("coredump", line, fields, last=block[-1], text=text, time=time, clock="wall" if time else None)


def _info_fields(doc: TextDoc, line: Line) -> dict[str, Any]:
    """`coredumpctl info` fields printed above the message (PID, Signal, Executable...)."""
    fields: dict[str, Any] = {}
    for above in reversed(doc.preceding(line, FIELD_LINES)):
        m = _INFO.match(above.text)
        if not m:
            break
        key = _INFO_KEYS.get(m.group("key").strip())
        if key:
            fields[key] = m.group("value").strip()
    if "pid" in fields:
        fields["pid"] = int(fields["pid"].split()[0]) if fields["pid"].split()[0].isdigit() else fields.pop("pid")
    if "uid" in fields:
        fields["uid"] = int(fields["uid"].split()[0]) if fields["uid"].split()[0].isdigit() else fields.pop("uid")
    if "signal" in fields and (m := _INFO_SIGNAL.match(fields["signal"])):
        fields["signal_number"] = int(m.group("number"))
        fields["signal"] = signal_name(m.group("number")) or fields["signal"]
    if "timestamp" in fields:
        fields["time"] = _timestamp(fields.pop("timestamp"))
    return fields


def _timestamp(value: str) -> datetime | None:
    """coredumpctl's `Sat 2023-03-04 10:00:00 CET (1min ago)` as a naive wall-clock time."""
    m = regex.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", value)
    return datetime.strptime(m.group(0), "%Y-%m-%d %H:%M:%S") if m else None


def _stacks(block: list[Line]) -> list[tuple[int, list[dict[str, Any]]]]:
    """(thread id, frames) of every `Stack trace of thread` in the block, crashing thread first."""
    stacks: list[tuple[int, list[dict[str, Any]]]] = []
    for line in block:
        if m := _STACK.search(line.text):
            stacks.append((int(m.group("tid")), []))
        elif stacks and (m := _FRAME.search(line.text)) and len(stacks[-1][1]) < MAX_FRAMES:
            frame = {"index": int(m.group("index")), "pc": m.group("pc"), "function": m.group("function"),
                     "module": m.group("module").strip()}
            if m.group("offset"):
                frame["offset"] = m.group("offset")
            stacks[-1][1].append(frame)
    return stacks


def _abort_message(doc: TextDoc, line: Line) -> str | None:
    """What the C/C++ runtime printed just before the abort, when it is in this file."""
    for above in reversed(doc.preceding(line, 20)):
        if m := _ABORT_MESSAGES.search(above.text):
            return above.text[m.start():].strip()
    return None
