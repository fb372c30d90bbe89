"""The reader every framework family shares: launcher prefixes, report plumbing, tracebacks.

A log line may carry launcher prefixes (`[rank3]:`, `[default0]:`, `rank3:`,
`(VllmWorker TP1 pid=409) ERROR 09-14 03:15:31 [file.py:596]`, glog and ISO
timestamps, `> ` quotes); `prefixed` takes them off and keeps the rank or
process tag so interleaved ranks do not mix. `follow` reads the lines after a
report's first one from the same rank or process, `continuation` finds where a
multi-line error message ends, and every detector returns its reports as
`Found`s. The Python (and IPython, Jupyter, Colab) traceback and Lua Torch's
`stack traceback:` are read here too: a CUDA error or an out-of-memory report
from any framework often arrives as a traceback's exception line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import regex

from ... import later
from ...model import dated, month_number
from ...text import Line, TextDoc

FOLLOW_LIMIT = 400
"""Most lines one report (a traceback, a dump) may span."""


# ---------------------------------------------------------------- prefixes

_PREFIX_PIECES = later.compile(
    r"""
    \G(?:                                                   # only where the last piece ended (linear under search)
      \[(?:rank|default)(?P<rank>\d+)\]:\s?
    | rank(?P<rank>\d+):\s
    | \((?P<proc>[A-Za-z][\w.\- ]*?\bpid=\d+)\)\s+
    | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<mm>\d\d)-(?P<dd>\d\d)\s+(?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?)
      \s+\[[^\]]*\][ ]?                                    # vLLM: "ERROR 09-14 03:15:31 [file.py:596]"
    | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:
    | >[ ]?
    | (?P<svc>[A-Za-z][\w.\-]*)[ ]+\|[ ]                   # docker compose: "vllm-1  | "
    | From[ ]worker[ ](?P<worker>\d+):\s*                 # Julia Distributed
    | (?P<task>\d{1,4}):[ ]                                 # srun --label: "0: "
    | [ \t]*(?P<iso>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?)(?:Z|[+-]\d\d:?\d\d)?:?[ ]?
    | \[(?P<iso>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?\][ ]?
                                                            # DeepSpeed: "[2024-10-22 10:29:01,123] "
    | (?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ ]+(?P<dd>\d{1,2})[ ](?P<hms>\d\d:\d\d:\d\d)
      [ ]+[\w.\-]+[ ]+[\w.\-/]+(?:\[\d+\])?:[ ]                # syslog: "Oct 22 10:30:05 host prog[123]: "
    | -\s+[\w.]+\s+-\s+[A-Z]+\s+-\s+
    | \[?[IWEF](?:(?P<mm>\d\d)(?P<dd>\d\d)\s+(?P<hms>\d\d:\d\d:\d\d\.\d+))?\s+(?:\d+\s+)?[\w/.\-]+:\d+\][ ]?  # glog
    )""",
    regex.VERBOSE,
)


@dataclass(frozen=True)
class Prefixed:
    """A line with its launcher/log prefix taken off."""

    body: str
    tag: str | None
    """The rank or process the line belongs to, when the prefix says."""
    shape: int
    """How many prefix pieces were removed (lines of one report share it)."""
    time: datetime | None
    written: str | None = None
    """A year-less stamp of the prefix (glog's `E1022 10:30:05.123456`, vLLM's `09-14 03:15:31`), spelled as syslog
    writes one (`Oct 22 10:30:05.123456`, model.dated) so that join.infer_years can give it a year."""


def _split_prefix(text: str) -> Prefixed:
    pos, tag, pieces, moment, written = 0, None, 0, None, None
    while pieces < 8:
        match = _PREFIX_PIECES.match(text, pos)
        if not match or match.end() == pos:
            break
        if match.group("rank"):
            tag = f"rank{match.group('rank')}"
        elif match.group("proc"):
            tag = match.group("proc")
        elif match.group("svc") or match.group("worker") or match.group("task"):
            tag = match.group("svc") or f"worker{match.group('worker') or match.group('task')}"
        elif match.group("iso") and moment is None:
            moment = _iso_time(match.group("iso"))
        elif match.group("hms") and written is None:
            month = match.group("mm") or str(month_number(match.group("mon")) or 0)
            written = _month_day(month, match.group("dd"), match.group("hms"))
        pos, pieces = match.end(), pieces + 1
    return Prefixed(text[pos:], tag, pieces, moment, written)


def line_time(text: str) -> tuple[datetime | None, str | None]:
    """When a log line says it was written, from its prefix: a full date, or a year-less stamp (Prefixed.written);
    a date further on is the message's own, never the line's."""
    found = _split_prefix(text)
    return found.time, found.written


def _month_day(month: str, day: str, hms: str) -> str | None:
    """`Oct 22 10:30:05.123` for month "10", day "22": a year-less stamp as model.dated reads it, when it is a date in
    some year."""
    number = int(month)
    if not 1 <= number <= 12:
        return None
    written = f"{_MONTH_NAMES[number - 1]} {int(day):02d} {hms}"
    return written if dated(written, 2000) else None  # 2000 is a leap year: Feb 29 is a date in some year


_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def prefixed(line: Line) -> Prefixed:
    """The line's prefix facts (rank, process, time: read where it was written) and its body (read
    from the normalised text, so quoting and gutters never hide a report)."""
    written = _split_prefix(line.original)
    if line.raw is None:
        return written
    return dataclasses.replace(written, body=_split_prefix(line.text).body)


def _iso_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace(",", ".").replace("_", " "))
    except ValueError:
        return None


# ---------------------------------------------------------------- found reports

@dataclass
class Found:
    """One report before folding: its kind, line span and typed fields."""

    kind: str
    first: Line
    last: Line
    fields: dict[str, Any]
    key: tuple
    time: datetime | None = None
    count: int = 1
    tags: set[str] = field(default_factory=set)
    """Rank or process tags of the lines folded into this report."""


@dataclass
class Context:
    """What the detectors share while one input is parsed."""

    doc: TextDoc
    consumed: dict[str, set[int]] = field(default_factory=dict)
    """Line numbers already part of a report, per kind, so a dump is not reported twice."""

    def taken(self, kind: str, line: Line) -> bool:
        return line.number in self.consumed.get(kind, ())

    def take(self, kind: str, lines: list[Line]) -> None:
        self.consumed.setdefault(kind, set()).update(l.number for l in lines)


def _same_source(head: Prefixed, other: Prefixed) -> bool:
    return head.tag == other.tag


def follow(ctx: Context, line: Line, limit: int) -> Iterator[tuple[Line, Prefixed]]:
    """The lines after `line` that come from the same rank or process, read lazily
    in small steps (most reports end within a few lines)."""
    head = prefixed(line)
    current, left = line, limit
    while left > 0:
        step = ctx.doc.following(current, min(left, 16), 64 * 1024)
        if not step:
            return
        for nxt in step:
            pre = prefixed(nxt)
            if _same_source(head, pre):
                yield nxt, pre
        current, left = step[-1], left - len(step)


_TAIL = later.compile(
    r"""^(?:CUDA\ kernel\ errors\ might|For\ debugging\ consider\ passing|Compile\ with\ .TORCH_USE_CUDA_DSA
    |Search\ for\ .cuda|',\ please\ check|You\ can\ try\ to\ repro|BufferAssignment|\S+:\d+:\ CUDA\ error\s*$
    |Exception\ raised\ from|frame\ \#\d+|0\ successful\ operations|\d+\ derived\ errors)""",
    regex.VERBOSE,
)
_REPRO = later.compile(r"^You can try to repro")
_NEW_RECORD = later.compile(r"^(?:Traceback|During handling|The above exception|\S+(?:Error|Exception):)")


def continuation(ctx: Context, line: Line, limit: int = 40) -> Line:
    """The last line of an error message that spans several lines.

    Indented lines and the fixed hint lines frameworks append belong to the
    message; PyTorch's cuDNN repro snippet (blank lines included) does too.
    """
    last, repro, blanks = line, False, 0
    for nxt, pre in follow(ctx, line, limit):
        body = pre.body
        if not body.strip():
            blanks += 1
            if not repro or blanks > 1:
                break
            continue
        blanks = 0
        if repro and not _NEW_RECORD.match(body):
            last = nxt
        elif (body[:1].isspace() and not body.lstrip().startswith('File "')) or _TAIL.match(body):
            repro = repro or bool(_REPRO.match(body))
            last = nxt
        else:
            break
    return last


def block_text(ctx: Context, first: Line, last: Line) -> list[str]:
    """The bodies (prefixes off) of the lines first..last, for reading fields."""
    count = last.number - first.number
    lines = [first] + ctx.doc.following(first, count, min(1 << 20, (count + 1) * 8192))
    return [prefixed(l).body for l in lines]


# ---------------------------------------------------------------- python tracebacks

_TB_HEADER = later.compile(r"Traceback \(most recent call last\)")  # IPython prints it without the colon
_PY_FRAME = later.compile(r'^\s*File "(?P<file>[^"]+)",\s?line (?P<line>\d+)(?:,?\s?in (?P<func>\S.*))?$')
"""A traceback's frame line; indented by Python, flush left where a paste outside a code block lost the indent (and
without the blanks where it was retyped: `File "x.py",line 3439,in barrier`)."""
_IPY_FRAME = later.compile(
    r"^(?:(?P<file>Cell In\[\d+\]), line (?P<line>\d+)(?:, in (?P<func>.+))?"
    r"|File (?P<file>\S.*?):(?P<line>\d+), in (?P<func>.+)"
    r"|(?P<file>Input In \[\d+\]), in (?P<func>.+)"
    r"|(?P<file><ipython-input-[\w-]+>|\S+\.pyx?) in (?P<func>[\w.<>]+)\(.*)$")
"""A frame of IPython's (Jupyter's, Colab's) traceback: `Cell In[14], line 28`, `File ~/x.py:129, in f(a, b)`,
`Input In [3], in <cell line: 1>()`, and IPython 7's `<ipython-input-5-..> in <module>` / `/x.py in f(a)`."""
_IPY_SOURCE = later.compile(r"^\s*(?:-*> ?)?\d+\s")
"""The numbered source lines IPython prints under each frame (`---> 28 importer2 = ...`)."""
_EXC_LINE = later.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_CHAIN = later.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")


def frame_line(body: str) -> regex.Match | None:
    """A traceback's frame line, as Python or IPython prints it."""
    return _PY_FRAME.match(body) or _IPY_FRAME.match(body)


def python_traceback(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    if ctx.taken("python-exception", line):
        return []
    chain: list[dict[str, Any]] = []
    frames: list[dict[str, Any]] = []
    state = "frames"
    if _CHAIN.match(pre.body.strip()):  # a chain whose first traceback was cut above its exception line
        if not (cut := _cut_exception(ctx, line)):
            return []
        chain.append(cut)
        state = "chain"
    elif not _TB_HEADER.search(pre.body):
        if not (first := _headless_start(ctx, line, pre)):
            return []
        frames.append(first)
    last, headers, read = line, [line], [line]
    after_frame = bool(frames)
    for nxt, p in follow(ctx, line, FOLLOW_LIMIT):
        body = p.body
        read.append(nxt)
        if state == "frames":
            frame = frame_line(body)
            if frame:
                frames.append(_frame_fields(frame))
                last, after_frame = nxt, True
            elif body[:1].isspace() or not body.strip() or _IPY_SOURCE.match(body):
                continue
            elif exc := exception_line(body):
                chain.append({"exc_type": exc["type"], "message": (exc["msg"] or "").strip(), "frames": frames})
                frames, last, state = [], nxt, "after"
            elif after_frame:  # a frame's source line that lost its indent
                after_frame = False
            else:
                break
        elif state == "after":
            if _CHAIN.match(body):
                state, last = "chain", nxt
            elif _TB_HEADER.search(body) and chain:
                headers.append(nxt)
                state, last = "frames", nxt
            elif ((body[:1].isspace() or _TAIL.match(body)) and len(chain[-1]["message"]) < 2000
                  and nxt.number - last.number == 1):
                chain[-1]["message"] += "\n" + body.strip()
                last = nxt
            elif body.strip():
                break
        elif state == "chain":
            if _TB_HEADER.search(body):
                headers.append(nxt)
                state, last = "frames", nxt
            elif body.strip():
                break
    if not chain:
        return []
    ctx.take("python-exception", headers + [l for l in read if l.number <= last.number])
    final = chain[-1]
    top = [f"{f['file']}:{f['line']} in {f['function']}" for f in final["frames"][-5:]]
    fields = {
        "exc_type": final["exc_type"],
        "message": final["message"][:1000],
        "frames": final["frames"][-5:][::-1],
        "top_frame": top[-1] if top else None,
    }
    if len(chain) > 1:
        fields["chain"] = [{"exc_type": c["exc_type"], "message": c["message"][:300]} for c in chain]
    key = ("python-exception", final["exc_type"], _digits_off(final["message"][:200]), tuple(top))
    return [Found("python-exception", line, last, fields, key, pre.time)]


def _headless_start(ctx: Context, line: Line, pre: Prefixed) -> dict[str, Any] | None:
    """The first frame of a traceback pasted without its `Traceback (most recent call last):` line: a frame line
    with no frame, source line or header in the two lines before it."""
    frame = frame_line(pre.body)
    if not frame or any(frame_line(b := prefixed(l).body) or _TB_HEADER.search(b)
                        for l in ctx.doc.preceding(line, 2)):
        return None
    return _frame_fields(frame)


def _cut_exception(ctx: Context, line: Line) -> dict[str, Any] | None:
    """The `Type: message` line just above a "During handling of the above exception" line, when nothing above it
    was read as its traceback (a paste that starts at the first exception)."""
    before = [l for l in ctx.doc.preceding(line, 3) if prefixed(l).body.strip()]
    if not before or ctx.taken("python-exception", before[-1]):
        return None
    if not (exc := exception_line(prefixed(before[-1]).body)):
        return None
    return {"exc_type": exc["type"], "message": (exc["msg"] or "").strip(), "frames": []}


def _frame_fields(frame: regex.Match) -> dict[str, Any]:
    return {"file": frame["file"], "line": int(frame["line"]) if frame["line"] else None,
            "function": frame["func"] or ""}


def exception_line(body: str) -> regex.Match | None:
    """The `Type: message` line that ends a traceback (dotted names or the usual suffixes)."""
    match = _EXC_LINE.match(body.strip())
    if match and ("." in match["type"] or _EXCEPTION_NAME.search(match["type"])):
        return match
    return None


_EXCEPTION_NAME = later.compile(r"(?:Error|Exception|Exit|Interrupt|Failure|Fault|Warning)$")


def _digits_off(text: str) -> str:
    return regex.sub(r"\d+", "#", text)


_LUA_FRAME = later.compile(r"^\t(?P<frame>\S.*)$")


def lua_traceback(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    """Lua (Torch7) errors: the message line, then `stack traceback:` and tab-indented frames."""
    if pre.body.strip() != "stack traceback:":
        return []
    before = ctx.doc.preceding(line, 1)
    if not before:
        return []
    message = prefixed(before[0]).body.strip()
    frames, last = [], line
    for nxt, p in follow(ctx, line, 60):
        if not (frame := _LUA_FRAME.match(p.body)):
            break
        frames.append(frame["frame"])
        last = nxt
    fields = {"message": message[:1000], "frames": frames[:5], "top_frame": frames[0] if frames else None}
    return [Found("lua-error", before[0], last, fields, ("lua-error", _digits_off(message[:200])), pre.time)]


def frames_before(ctx: Context, line: Line) -> tuple[Line, str | None]:
    """Where a traceback whose header was cut off begins, and its innermost frame.

    Logs quoted in issues and shipped by launchers often start mid-traceback; the
    frames just above an error line still say where it was raised.
    """
    head = prefixed(line)
    first, top = line, None
    for earlier in reversed(ctx.doc.preceding(line, 8)):
        pre = prefixed(earlier)
        if pre.tag != head.tag or not pre.body[:1].isspace():
            break
        first = earlier
        if top is None and (frame := _PY_FRAME.match(pre.body)):
            top = f"{frame['file']}:{frame['line']} in {frame['func'] or ''}"
    return (first, top) if top else (line, None)
