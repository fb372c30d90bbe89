"""What shells, schedulers and service managers say when they end a job: killed, crashed, out of memory.

The job's own log often stops without an error; the line that says why comes from
whatever started it: a shell's job control (`line 28:  8156 Killed  python3 main.py`),
an exit status (`exit code 137`, `return code = -9`), Go's exec error (`signal: killed`), Slurm (`Detected 1 oom-kill
event(s) in StepId=191.batch`), systemd (`Failed with result 'oom-kill'`), Kubernetes
(`OOMKilled`), Ray (`killed due to memory pressure (OOM)`), LSF (`TERM_MEMLIMIT`), PBS (`exceeded MEM usage hard
limit`) or MPI (`Signal: Segmentation
fault (11)`). Exit statuses above 128 and negative return codes name a signal (128 + N,
-N); other statuses are not events.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from .. import later
from ..knowledge import shell_signal_words, signal_name
from ..model import Event
from ..text import Line, TextDoc

NAME = "job-log"
ANCHORS: tuple[bytes, ...] = (
    b"oom-kill", b"OOM killer", b"OOMKilled", b"memory pressure (OOM)", b"TERM_MEMLIMIT", b"usage hard limit",
    b"memory limit", b"low on resource: memory",
    b"Killed", b"core dumped", b"Signal: ", b"signal: ",
    b"exit code", b"Exit code", b"exit status", b"return code", b"exitcode", b"exit_code", b"error code",
    b"(?i)exited with code", b"(?i)exited with status",
    b"DUE TO TIME LIMIT", b"DUE TO PREEMPTION",
    b"low memory! at or below", b"exceptions.OutOfMemoryError", b"running low on memory",
    b"sending SIGTERM to process", b"sending SIGKILL to process",
    b"due to memory pressure", b"due to memory used",
    b"<Signals.SIG", b"zsh: ", b"killed  ", b"segmentation fault  ", b"bus error  ", b"abort  ",
    b"illegal hardware instruction", b"memory budget", b"exitCode", b"Exit Code",
    b"Main process exited", b"main process exited",
    b"over memory limit", b"ray-oom-prevention", b"oom_kill", b"to signal",
    b"with signal", b"by signal", b"from signal", b") received", b"received signal", b"Received signal",
    b"(signal ", b"RayOutOfMemoryError",
    *sorted(word.encode() for word in shell_signal_words()),
    b"-536870904", b"0xe0000008", b"0xE0000008", b"process oom", b"eason: oom", b"eason: 'oom'", b'eason":"oom',
    b'eason\\":\\"oom', b"eason: \"oom", b"Memory limit exceeded",
)

_OOM_REPORTS = (
    ("slurm", later.compile(r"Detected (?P<count>\d+) oom[-_ ]kill events?(?:\(s\))?"
                            r"(?: in (?P<step>(?:StepId=|step )\S+))?")),
    ("systemd",
     later.compile(r"(?<![\w@.\-])(?P<unit>[\w@.\-]+\.(?:service|scope)): (?:A process of this unit has been "
                              r"killed by the OOM killer|Failed with result 'oom-kill')")),
    ("kubernetes", later.compile(r"\bOOMKilled\b|The node was low on resource: memory")),
    ("lsf", later.compile(r"TERM_MEMLIMIT: job killed after reaching LSF memory usage limit")),
    ("pbs", later.compile(r"exceeded (?:MEM|mem|vmem|pmem) usage hard limit(?: \((?P<used>\d+) > (?P<limit>\d+)\))?")),
    ("slurm", later.compile(r"exceeded (?:job )?memory limit(?: \((?P<used>\d+) > (?P<limit>\d+)\))?, being killed")),
    ("ray", later.compile(r"(?<!\d)(?P<count>\d+) Workers? \(tasks / actors\) killed due to memory pressure \(OOM\)"
                          r"|ray\.exceptions\.OutOfMemoryError|Task was killed due to the node running low on memory"
                          r"|address the out of memory issue: \S{0,80}ray-oom-prevention"
                          r"|RayOutOfMemoryError: More than \d{1,3}% of the memory on node")),
    ("earlyoom", later.compile(r"low memory! at or below SIG(?:TERM|KILL) limits|sending SIG(?:TERM|KILL) to process "
                               r"(?P<pid>\d+) uid \d+ \"(?P<process>[^\"]{1,64})\"")),
    ("systemd-oomd", later.compile(r"Killed (?P<unit>/\S+) due to memory (?:pressure|used)")),
    ("htcondor", later.compile(r"[Jj]ob has gone over memory limit of (?P<limit>\d+) ?(?:Mb|MB|megabytes)")),
    ("chromium", later.compile(r"(?i)\breason\W{0,3}\s*[:=]\s*\W{0,3}oom\b|\bRenderer process oom\b"
                               r"|(?<![\d-])-536870904(?!\d)|\b0xe0000008\b")),
    ("hugging-face-spaces", later.compile(r"(?:CPU )?Memory limit exceeded \((?P<limit>\d+ ?[GM]i?B?)\)")),
    ("dask", later.compile(r"Worker (?:\S{1,200} \(pid=(?P<pid>\d+)\) )?exceeded \d{1,3}% memory budget\.? +"
                           r"Restarting")),
)
"""Reports that name the out-of-memory kill themselves (no guess needed); Ray's memory monitor kills a task or a
worker for host memory (`ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory`;
before Ray 2, `ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node Local is used`:
ray-project/ray#4877;
docs.ray.io's "Out-Of-Memory Prevention"). earlyoom and systemd-oomd are the
user-space OOM killers of desktops and distributions (earlyoom's main.c: `low memory! at or below SIGTERM limits`,
`sending SIGTERM to process 322603 uid 1000 "python3.13"`; systemd's oomd: `Killed /user.slice/... due to memory
pressure for ...`). Dask's nanny is a memory monitor of the same kind: it kills and restarts a worker past its memory
budget (distributed's worker memory docs; `Worker exceeded 95% memory budget. Restarting`, modin-project/modin#1643,
dask/distributed#1829; newer releases name the worker: `Worker tls://... (pid=129) exceeded 95% memory budget.
Restarting...`). HTCondor holds a job past its memory request (`Docker job has gone over memory limit of 1024 Mb`, the
hold reason of its Docker universe; CHTC/templates-GPUs#7), and Ray's kill message ends with its OOM documentation's
link. Chromium ends a process out of memory with its own status, which Electron reports as the reason `oom` and the
exit code 0xE0000008 (-536870904): `{ exitCode: -536870904, reason: oom }` (electron/electron#36614), `Error: Reason:
oom, Exit Code: -536870904` (signalapp/Signal-Desktop#7189), `{\"reason\":\"oom\",...}` (electron/electron#45201),
`Crash reason:  0xe0000008` (electron/electron#36841). A Hugging Face Space stopped at its memory limit says `CPU Memory
limit exceeded (16GB)` (sedthh/pyxelate#27)."""

_PROGRESS_END = r"(?<=(?:[\w?]/s|s/\w{1,20})\])"
"""Right after a progress bar's last redraw: tqdm ends its line with a carriage return, which a paste loses, and its
rate is per any unit, or seconds per one (`4/8 [02:10<02:22, 35.73s/it]`, `0.0/198.0 [00:00<?, ?seconds/s]`)."""
_DECORATION = r"[\s\"'`*_]"
"""What a person wraps a pasted line in: quotes, backticks, Markdown's bold (`Killed**`, `stopped at "...Killed"`)."""
_JOB_CONTROL = later.compile(
    rf"(?:line \d+:\s+(?P<pid>\d+)\s+|^{_DECORATION}*(?:\[\d+\][+-]?\s+)?|{_PROGRESS_END})"
    r"(?P<what>Killed|(?<=line \d{1,9}:\s{1,9}\d{1,9}\s{1,9})killed|Segmentation fault|Bus error|Aborted"
    r"|Illegal instruction|Floating point exception|Terminated|\L<localized>)"
    rf"(?P<core> \(core dumped\))?(?:\s+(?P<command>\S.*?))?{_DECORATION}*$",
    localized=list(shell_signal_words()),
)
"""bash/sh job control: `script: line 28:  8156 Killed  python3 main.py`, or the bare word on its own line, or right
after a progress bar's last redraw (`4/8 [02:10<02:22, 35.73s/it]Killed`, dorado's `Killed**` in bold, chatglm's
`... 2.91s/it]Killed"` quoted in a sentence: nanoporetech/dorado#358, zai-org/ChatGLM-6B#179); in its users' language
too (data/shell-signals.tsv: `已杀死`, danijar/dreamerv3#203)."""
_ZSH_JOB = later.compile(
    rf"(?:^\s*+|{_PROGRESS_END})(?:zsh: |(?:\[\d+\]\s++(?:[+-]\s++)?)?(?P<pid>\d+)\s++)"
    r"(?P<what>killed|segmentation fault|bus error|abort|illegal hardware instruction|floating point exception"
    r"|terminated)(?P<core> \(core dumped\))?\s{2,}(?P<command>\S.*?)\s*$")
"""zsh's job control, in its own words and aligned columns: `zsh: killed     python main.py`, `[1]    60190 killed
    python main.py` (a job ended by a signal; the pid or the `zsh:` tag and the run of blanks set it apart from
prose), also right after a progress bar's last redraw (`7/8 [00:12<00:01,  1.84s/it][1]    14875 killed     python
main.py --low_vram`: OedoSoldier/chatglm_webui#3)."""
_EXIT_STATUS = later.compile(
    r"(?i)\b(?:exit(?:ed)?(?: with)?(?: code| status)|return code|exitcode|exit_code|error code)"
    r"\s*+[:=(]?\s*+(?P<code>-?\d{1,3})\b"
)
_GO_EXIT = later.compile(
    r"(?<![\w-])signal: (?P<what>segmentation fault|aborted|killed|bus error|illegal instruction"
    r"|floating point exception|terminated)(?P<core> \(core dumped\))?")
"""Go's os/exec exit error, as a Go program reports the child it ran (ollama's `llama runner process has
terminated: signal: segmentation fault`, `signal: aborted (core dumped)`)."""
_PY_SIGNAL = later.compile(r"<Signals\.(?P<what>SIG[A-Z0-9]{2,8}): \d{1,2}>")
"""Python's name of a signal (signal.Signals), as its subprocess error gives a child's end (`Command '[...]' died
with <Signals.SIGKILL: 9>.`) and people quote it."""
_MPI_SIGNAL = later.compile(r"\bSignal: (?P<what>[A-Z][a-z]+(?: [a-z]+)*) \((?P<number>\d+)\)")
_SYSTEMD_EXIT = later.compile(r"(?i:m)ain process exited, code=(?:killed|dumped), status=(?P<number>\d{1,2})/[A-Z]")
"""systemd's end of a service killed by a signal (systemd.exec(5): `code=dumped, status=4/ILL`, `code=killed,
status=9/KILL`): the signal by its number."""
_SIGNAL_NUMBER = later.compile(
    r"(?i)\b(?:crashed|terminated|died|aborted|exited|shutdown|shut[ \t]down)[ \t]++"
    r"(?:with|by|from|on|due[ \t]++to)[ \t]++signal[ \t]*+(?P<number>\d{1,2})\b"
    r"|\b(?:interrupt[ \t]++)?signal[ \t]*+\((?P<number>\d{1,2})\)[ \t]++received\b"
    r"|\breceived[ \t]++signal[ \t]++(?P<number>\d{1,2})\b"
    r"|\b(?:Address not mapped to object|Invalid permissions for mapped object|Invalid address alignment"
    r"|Nonexistent physical address|Integer divide by zero|Illegal opcode)[ \t]++\(signal[ \t]++(?P<number>\d{1,2})\)")
"""A program's own crash handler naming the signal by number (Godot's `handle_crash: Program crashed with signal
11`, a launcher's `process terminated with signal 9`, nvcc's `'ptxas' died due to signal 9 (Kill signal)`,
text-generation-inference's `Download process was signaled to shutdown with signal 7`), or the signal handler of a
server telling what it received (HeavyDB's `Interrupt signal (11) received.`, `received signal 11`), or the kernel's
reason for the signal (its si_code as glibc's psiginfo words it) with the number: ZDoom's `Address not mapped to object
(signal 11)` (Farama-Foundation/ViZDoom#282)."""
_CANCELLED = later.compile(r"CANCELLED AT (?P<when>\S+) DUE TO (?P<reason>TIME LIMIT|PREEMPTION)")


def _signal_of_status(code: int) -> str | None:
    """SIGKILL from 137 (128 + 9) or -9 (a Python subprocess return code); None for plain exit codes."""
    if code < 0:
        return signal_name(-code)
    if 128 < code < 160:
        return signal_name(code - 128)
    return None


def _oom_report(text: str) -> tuple[str, dict[str, Any]] | None:
    for source, pattern in _OOM_REPORTS:
        if m := pattern.search(text):
            fields: dict[str, Any] = {"reporter": source, **{k: v for k, v in m.groupdict().items() if v}}
            for number in ("count", "pid"):
                if number in fields:
                    fields[number] = int(fields[number])
            return "oom-kill", fields
    return None


_MEMORY_WORD = later.compile(r"(?i)memory|oom")
"""What a line of a wrapped OOM report holds (its other lines are read only around such a line: the rest of the
job-control and exit-status lines, most of this source's candidates, join nothing)."""


def _wrapped_oom_report(doc: TextDoc, line: Line) -> tuple[str, dict[str, Any]] | None:
    """An OOM report a terminal or a log shipper wrapped (Ray's `2 Workers (tasks /` then ` actors) killed due to
    memory pressure (OOM)`): read with the line before it, then with the line after."""
    for before, after in ((doc.preceding(line, 1), []), ([], doc.following(line, 1))):
        joined = " ".join(" ".join(each.text for each in (*before, line, *after)).split())
        if (before or after) and (found := _oom_report(joined)):
            return found
    return None


def _event_fields(text: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, fields) for one line, or None when it reports no end of a job."""
    if found := _oom_report(text):
        return found
    if m := _CANCELLED.search(text):
        return "job-cancelled", {"reporter": "slurm", "reason": m["reason"].lower().replace(" ", "-")}
    if m := _PY_SIGNAL.search(text):
        return "child-failed", {"reporter": "python-subprocess", "signal": m["what"]}
    if (m := _SYSTEMD_EXIT.search(text)) and (signal := signal_name(int(m["number"]))):
        return "child-failed", {"reporter": "systemd", "signal": signal}
    if (m := _SIGNAL_NUMBER.search(text)) and (signal := signal_name(int(m["number"]))):
        return "child-failed", {"reporter": "crash-handler", "signal": signal}
    if m := _MPI_SIGNAL.search(text):
        signal = signal_name(m["what"]) or signal_name(int(m["number"]))
        return ("fatal-signal", {"reporter": "mpi", "signal": signal}) if signal else None
    if m := _GO_EXIT.search(text):
        return "child-failed", {"reporter": "go", "signal": signal_name(m["what"]), "core_dumped": bool(m["core"])}
    if m := _JOB_CONTROL.search(text) or _ZSH_JOB.search(text):
        fields = {"reporter": "shell", "signal": signal_name(m["what"]), "core_dumped": bool(m["core"]),
                  "pid": int(m["pid"]) if m["pid"] else None, "command": m["command"]}
        return "child-failed", fields
    if (m := _EXIT_STATUS.search(text)) and (signal := _signal_of_status(int(m["code"]))):
        return "child-failed", {"reporter": "exit-status", "exit_code": int(m["code"]), "signal": signal}
    return None


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One event per distinct report (the same kill told by several lines of a launcher is one event)."""
    seen: dict[tuple, Event] = {}
    for line in lines:
        found = _event_fields(line.text) or (_wrapped_oom_report(doc, line) if _MEMORY_WORD.search(line.text) else None)
        if found is None:
            continue
        kind, fields = found
        fields = {k: v for k, v in fields.items() if v is not None}
        key = (kind, fields.get("signal"), fields.get("reporter"), fields.get("exit_code"))
        if key in seen:
            seen[key] = dataclasses.replace(seen[key], count=seen[key].count + 1)
            continue
        seen[key] = doc.event(kind, line, fields)
    yield from seen.values()
