"""Native crashes as a job's log shows them: fatal signals, aborts, failed assertions.

Python's faulthandler dump, Julia's signal report, glog/absl native backtraces
(`*** Aborted at`, `*** SIGSEGV received by PID`), Windows exception codes, C++
`terminate called ...`, a program's own failed assertion (data/assertion-failures.tsv)
and the shell's `Segmentation fault (core dumped)`.
"""

from __future__ import annotations

from typing import Any

import regex

from ... import later
from ...knowledge import WINDOWS_EXCEPTIONS, core_dumped_words, data_rows, shell_signal_words, signal_name
from ...text import Line
from .traceback import FOLLOW_LIMIT, Context, Found, Prefixed, follow, prefixed

_ASSERTIONS = tuple((row["id"], row["anchor"], later.compile(row["pattern"]))
                    for row in data_rows("assertion-failures.tsv"))
"""How programs report a failed assertion of their own before they abort (data/assertion-failures.tsv): each
wording with the literal a line must hold for its pattern to be tried."""

_FAULTHANDLER = later.compile(r"Fatal Python error: (?P<what>[^:]*[^:\s])\s*$")
_FH_LINE = later.compile(
    r'^(?:\s*$|(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):|Stack \(most recent call first\):'
    r'|\s+File ".*", line \d+ in |\s+<no Python frame>'
    r'|\s+Garbage-collecting|Extension modules:|<Cannot show all threads)'
)
_FH_FRAME = later.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<func>.+)$')
_JULIA_HEAD = later.compile(r"^(?:\[\d+\] )?signal \(?(?P<num>\d{1,2})(?:\.\d+)?\)?(?: \(\d+\))?: "
                            r"(?P<what>[A-Z][\w ]{2,40})$")
"""Julia's signal handler: `signal (11): Segmentation fault`, `[219060] signal 11 (1): Segmentation fault`."""
_JULIA_LINE = later.compile(r"^(?:in expression starting at |unknown function \(ip: 0x|Allocations: "
                            r"|\S.{0,300}? at \S)")
_JULIA_FRAME = later.compile(r"^(?:in expression starting at (?P<expression>.*)|unknown function \(ip: 0x[0-9a-f]+\)"
                             r"|(?P<frame>\S.{0,300}? at \S.*))$")
_NATIVE_HEAD = later.compile(
    r"\*\*\* (?:Aborted at .*\*\*\*|(?P<sig>SIG[A-Z]+)\b.*?received by PID (?P<pid>\d+))"
    r"|(?P<sig>SIG(?:SEGV|BUS|ABRT|ILL|FPE))\s+(?:encountered|caught|received)"
    r"|[Cc]aught signal (?P<num>\d+)|received signal (?P<sig>SIG[A-Z]+)"
)
_NATIVE_FRAME = later.compile(
    r"^\s*(?:@\s+0x[0-9a-f]+|PC: @|\*\*\* SIG|#\d+\s+0x[0-9a-f]+|frame #\d+:|\S+\([^)]*\)\s*\[0x[0-9a-f]+\]"
    r"|\[0x[0-9a-f]+\]|backtrace\(\) returned|stack trace:|Stack trace|\[bt\])",
    regex.IGNORECASE,
)
_SHELL = later.compile(
    r"\G(?:\S+: line \d+:\s+\d+\s+)?"
    r"(?P<what>Segmentation fault|Bus error|Aborted|Illegal instruction|Floating point exception|\L<localized>)"
    r"(?P<core>\s*+[(\uff08](?:core dumped|\L<core>)[)\uff09])?(?:\s+.*)?",
    localized=list(shell_signal_words()),
    core=list(core_dumped_words()),
)
"""A shell's report of a job's signal, in English or in its users' language (data/shell-signals.tsv:
`段错误 (核心已转储)`, `Speicherzugriffsfehler (Speicherabzug geschrieben)`); a full-width parenthesis as Chinese input
methods type it."""
_GLIBC = later.compile(r"^(?:malloc|free|realloc|double free|corrupted|munmap_chunk|malloc_consolidate)\S*.*")
_HEAP_ERROR = later.compile(
    r"^(?:\*\*\* )?Error in `(?P<program>[^'`\n]{1,200})': (?P<message>(?:double free or corruption|free\(\)|"
    r"munmap_chunk\(\)|malloc\(\)|realloc\(\)|corrupted [a-z]|malloc_consolidate\(\))[^:\n]{0,80})"
    r"|^(?P<message>double free or corruption \((?:out|!prev|top|fasttop)\)"
    r"|corrupted size vs\. prev_size(?: in fastbins)?|corrupted double-linked list(?: \(not small\))?"
    r"|(?:free|malloc|realloc|munmap_chunk|malloc_consolidate|tcache_thread_shutdown)\(\): [a-z][\w ()!>.\-]{3,60}+)$")
"""glibc's report of a corrupt heap before it aborts the process (malloc_printerr; glibc up to 2.25 names the program:
`*** Error in `python': double free or corruption (!prev): 0x000056383cda7e40 ***`, then its backtrace and memory
map): junyanz/pytorch-CycleGAN-and-pix2pix#251, facebookresearch/Detectron#380, facebookresearch/habitat-sim#28. From
glibc 2.26 on, the message stands alone on its line (malloc_printerr's `corrupted size vs. prev_size`, `free():
invalid pointer`, `double free or corruption (out)`, the messages of malloc/malloc.c) and the abort follows in any
language (`Annullato (core dump creato)`: negativo17/nvidia-driver#153)."""
_WINDOWS = later.compile(r"(?i)(?:exit status|exception code|exit code|exception)[:\s]+(?:-?\d+\s+\()?"
                         r"(?:(?P<code>0x[ce][0-9a-f]{7}|32212\d{5}|-10737\d{5})|(?P<wide>18446744072[6-9]\d{8}))\b"
                         r"|(?P<violation>exception: access violation (?:reading|writing|executing) 0x[0-9a-f]+)")
"""A Windows process's crash status, as hex or as the decimal a launcher prints it: unsigned (Python's
subprocess: `returned non-zero exit status 3221225477`), signed (`exit code -1073741819`), or sign-extended to 64 bits
and printed unsigned (ziglang/zig#2950), which a JavaScript front end rounds to a double (LM Studio's `Exit code:
18446744072635812000`, lmstudio-ai/lmstudio-bug-tracker#1081, #1950); a crash handler's `exception 0xc0000094
(INT_DIVIDE_BY_ZERO)` (gnif/LookingGlass#1106); or the access violation ctypes raises when a native call faults
(`OSError: exception: access violation reading 0x0000000000001894`)."""
WIDE = (1 << 64) - (1 << 32)
"""A 32-bit status sign-extended to 64 bits, less the status: what a wide decimal exit code adds to it."""
ROUNDED = 1024
"""How far the double a wide exit code was printed from may be from the integer it stood for: the doubles near 2**64
are 2048 apart, and JavaScript prints the shortest digits that read back as that double."""
_TERMINATE = later.compile(r"terminate called (?:after throwing an instance of '(?P<type>[^']+)'"
                           r"|without an active exception|recursively)")
_WHAT = later.compile(r"^\s*what\(\):\s*(?P<what>.*)")


def fatal_signal(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    if ctx.taken("fatal-signal", line):
        return []
    for detector in (_faulthandler, _julia_signal, _native_backtrace, _windows_exit, _terminate, _heap_error,
                     failed_assertion, _shell_signal):
        found = detector(ctx, line, pre)
        if found:
            ctx.take("fatal-signal", [l for l, _ in follow(ctx, line, found.last.number - line.number)])
            return [found]
    return []


def _faulthandler(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    match = _FAULTHANDLER.search(pre.body)
    if not match or not signal_name(match["what"]):
        return None
    last = line
    threads: list[tuple[bool, list[str]]] = []
    for nxt, p in follow(ctx, line, FOLLOW_LIMIT):
        if not _FH_LINE.match(p.body):
            break
        if p.body.strip():
            last = nxt
        if p.body.startswith(("Current thread", "Thread", "Stack")):
            threads.append((not p.body.startswith("Thread"), []))
        elif (frame := _FH_FRAME.match(p.body)) and threads:
            threads[-1][1].append(f"{frame['file']}:{frame['line']} in {frame['func']}")
    stacks = [frames for current, frames in threads if current and frames] + [frames for _, frames in threads if frames]
    fields = {"signal": signal_name(match["what"]), "reason": match["what"], "source": "faulthandler",
              "frames": stacks[0][:8] if stacks else []}
    if stacks:
        fields["python_top"] = stacks[0][0]
    return Found("fatal-signal", line, last, fields, ("fatal-signal", fields["signal"], "faulthandler"), pre.time)


def _julia_signal(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    """Julia's report of a fatal signal: the signal, the expression it ran, then native and Julia frames."""
    match = _JULIA_HEAD.match(pre.body.strip())
    if not match or not (signal := signal_name(match["num"])):
        return None
    last, expression = line, None
    frames: list[str] = []
    for nxt, p in follow(ctx, line, FOLLOW_LIMIT):
        body = p.body.strip()
        if not _JULIA_LINE.match(body):
            break
        last = nxt
        frame = _JULIA_FRAME.match(body)
        if frame and frame["expression"]:
            expression = frame["expression"]
        elif frame and frame["frame"] and len(frames) < 12:
            frames.append(frame["frame"])
    fields = {"signal": signal, "reason": match["what"], "source": "julia", "frames": frames, "expression": expression}
    return Found("fatal-signal", line, last, fields, ("fatal-signal", signal, "julia", tuple(frames[:3])), pre.time)


def _native_backtrace(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    match = _NATIVE_HEAD.search(pre.body)
    if not match:
        return None
    signal = signal_name(match["sig"] or match["num"])
    last = line
    frames: list[str] = []
    for nxt, p in follow(ctx, line, FOLLOW_LIMIT):
        if not _NATIVE_FRAME.match(p.body):
            break
        last = nxt
        if signal is None and (inner := regex.search(r"\*\*\* (SIG[A-Z]+)", p.body)):
            signal = inner.group(1)
        if len(frames) < 12 and not regex.match(r"\G\s*+(?:stack trace|backtrace\(\)|Stack trace)", p.body, regex.I):
            frames.append(p.body.strip())
    fields = {"signal": signal, "pid": int(match["pid"]) if match["pid"] else None, "frames": frames,
              "source": "native-backtrace"}
    return Found("fatal-signal", line, last, fields, ("fatal-signal", signal, "native", tuple(frames[:3])), pre.time)


ACCESS_VIOLATION = 0xC0000005


def _windows_exit(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    match = _WINDOWS.search(pre.body)
    if not match:
        return None
    if match["wide"]:  # the exact status is lost to the double's rounding: a known one only where just one is near
        near = [known for known in WINDOWS_EXCEPTIONS if abs(int(float(match["wide"])) - WIDE - known) <= ROUNDED]
        code = near[0] if len(near) == 1 else None
    else:
        code = int(match["code"], 0) & 0xFFFFFFFF if match["code"] else ACCESS_VIOLATION
        if code not in WINDOWS_EXCEPTIONS and not (match["code"] or "0xc").lower().startswith("0xc"):
            return None  # a decimal or a customer code (0xE...) the table does not know is just a number
    status, signal = WINDOWS_EXCEPTIONS.get(code, (None, None)) if code is not None else (None, None)
    fields = {"exception_code": f"0x{code:08x}" if code is not None else "0xc000....", "status": status,
              "signal": signal, "platform": "windows"}
    if match["wide"]:
        fields["exit_code"] = match["wide"]
    return Found("fatal-signal", line, line, fields, ("fatal-signal", code), pre.time)


def _heap_error(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    """glibc found the heap corrupt (a double free, a write past a buffer, often in native code of the process) and
    aborts it: a native crash, whatever the memory map after it lists."""
    if (match := _HEAP_ERROR.match(pre.body.strip())) is None:
        return None
    fields = {"signal": "SIGABRT", "source": "glibc", "glibc_message": match["message"].strip()}
    if match["program"]:
        fields["process"] = match["program"]
    return Found("fatal-signal", line, line, fields, ("fatal-signal", "glibc", match["message"].strip()), pre.time)


def _terminate(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    match = _TERMINATE.search(pre.body)
    if not match:
        return None
    fields: dict[str, Any] = {"signal": "SIGABRT", "source": "c++ terminate", "exception_type": match["type"]}
    last = line
    following = list(follow(ctx, line, 1))
    if following and (what := _WHAT.match(following[0][1].body)):
        fields["what"] = what["what"][:500]
        last = following[0][0]
    return Found("fatal-signal", line, last, fields, ("fatal-signal", "terminate", match["type"]), pre.time)


def failed_assertion(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    """A host program's own assertion failed (glibc's assert, GGML_ASSERT, glog's CHECK, ...): it aborts next. The
    line is searched as written, since a glog prefix (taken off the body) holds the place of a CHECK. Also tried on a
    line another reader took, since an assertion may name the error it checked (Faiss's `details: CUDA error 77`)."""
    for wording, anchor, pattern in _ASSERTIONS:
        if anchor in line.text and (match := pattern.search(line.text)):
            groups = match.groupdict()
            fields: dict[str, Any] = {
                "signal": "SIGABRT", "source": "assertion", "assertion_kind": wording,
                "assertion": groups["cond"].strip()[:500], "file": groups["file"], "file_line": int(groups["line"]),
            }
            if function := (groups.get("function") or "").strip():
                fields["function"] = function[:300]
            return Found("fatal-signal", line, line, fields,
                          ("fatal-signal", "assertion", match["file"], match["line"]), pre.time)
    return None


def _shell_signal(ctx: Context, line: Line, pre: Prefixed) -> Found | None:
    body = pre.body.strip().lstrip("^C")
    match = _SHELL.fullmatch(body)
    if not match or (not match["core"] and body not in (match["what"], match["what"] + ".") and ": line " not in body):
        return None
    first = line
    before = ctx.doc.preceding(line, 1)
    fields: dict[str, Any] = {"signal": signal_name(match["what"]), "source": "shell",
                              "core_dumped": bool(match["core"])}
    if before and _GLIBC.match(prefixed(before[0]).body):
        first = before[0]
        fields["glibc_message"] = prefixed(before[0]).body.strip()
    return Found("fatal-signal", first, line, fields, ("fatal-signal", fields["signal"], "shell"), pre.time)
