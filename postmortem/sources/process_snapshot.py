"""The bookkeeping files of a `postmortem snapshot` case: each process's state as /proc showed it
(process.PID.json) and the node's (snapshot.json), read as evidence of where a hung job waits.

A process file becomes one `process-snapshot` event (pid, host, rank, the process state, how long it was
stopped, the GPU and RDMA device files it holds) and one `thread-blocked` event per thread that was in
uninterruptible sleep (state D) -- with its wchan, its kernel stack and the kernel modules on it: a thread stuck
in nvidia or nvidia_uvm is a driver that stopped answering. The node file gives a `snapshot-record` event (when,
where, how many processes: context, never a suspect) and a `tool-hang` event when a node tool (nvidia-smi) ran
out of time, which is itself a sign of a hung driver. The native and Python stacks are in
the process's core beside it, read by the core reader; the hang analysis (postmortem/hang.py) joins the two on
the pid.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .. import later
from ..model import Event, Location, iso_time
from ..text import Line, TextDoc

NAME = "postmortem-snapshot"
PROCESS_FORMAT = "postmortem-process/1"
NODE_FORMAT = "postmortem-snapshot/1"
ANCHORS = (b'"format": "postmortem-process/', b'"format": "postmortem-snapshot/')
MAX_FILE = 8 << 20
"""A process file is a few KiB a thread; one larger than this is read no further."""
MAX_STACKS = 4096
"""Threads whose stacks are kept from one process file (a training process has a few hundred)."""
MAX_BLOCKED = 64
"""Blocked threads reported one by one per process; the rest are counted in the process event."""
_MODULE = later.compile(r"\[(\w+)\]\s*$")
"""A kernel stack line's module: `uvm_spin_loop+0x7c/0x100 [nvidia_uvm]`."""
TOOL_TIMEOUT = later.compile(r"^timeout after (?P<seconds>[\d.]+) s$")


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    found = doc.json_object(MAX_FILE)
    if found is None:
        return
    record, text = found
    where = Location(doc.path, 1, text.count("\n") + 1)
    if record.get("format") == PROCESS_FORMAT and isinstance(record.get("pid"), int):
        yield from _process(record, where)
    elif record.get("format") == NODE_FORMAT:
        yield from _node(record, where)


def _process(record: Mapping[str, Any], where: Location) -> Iterator[Event]:
    threads = [t for t in record.get("threads") or [] if isinstance(t, dict) and isinstance(t.get("tid"), int)]
    blocked = [t for t in threads if t.get("state") == "D"]
    rank: dict[str, Any] = record["rank"] if isinstance(record.get("rank"), dict) else {}
    command = [str(arg) for arg in record.get("command") or []]
    common = {"pid": record["pid"], "host": _text(record.get("host")),
              **{key: value for key, value in rank.items() if isinstance(value, int)}}
    main = next((t for t in threads if t["tid"] == record["pid"]), None)
    fields = {
        **common,
        "process": command[0].rsplit("/", 1)[-1] if command else None,
        "comm": _text(main.get("name")) if main else None,
        "started": _text(record.get("started")),
        "command": " ".join(command)[:500] or None,
        "state": _text(record.get("state")),
        "launcher": _text(record.get("launcher")),
        "threads": len(threads),
        "blocked_threads": len(blocked),
        "devices": [str(d) for d in record.get("devices") or []],
        "stopped_ms": record.get("stopped_ms") if isinstance(record.get("stopped_ms"), int | float) else None,
        "core": _text(record.get("core")),
        "stacks": with_kernel_waits([s for s in record.get("stacks") or [] if isinstance(s, dict)][:MAX_STACKS],
                                     threads),
        "ppid": record.get("ppid") if isinstance(record.get("ppid"), int) else None,
        "ended": _text(record.get("ended")),
        "file_locks": [lock for lock in record.get("file_locks") or [] if isinstance(lock, dict)][:MAX_STACKS],
    }
    who = f"rank {rank['rank']} " if isinstance(rank.get("rank"), int) else ""
    text = (f"{who}pid {record['pid']} on {fields['host'] or '?'}: {fields['state'] or '?'}, {len(threads)} threads"
            + (f", {len(blocked)} in uninterruptible sleep" if blocked else ""))
    yield Event(kind="process-snapshot", where=where, text=text,
                fields={k: v for k, v in fields.items() if v not in (None, [], "")})
    for thread in blocked[:MAX_BLOCKED]:
        stack = [str(line) for line in thread.get("kernel_stack") or []]
        in_modules = [(line.split("+", 1)[0], m[1]) for line in stack if (m := _MODULE.search(line))]
        modules = list(dict.fromkeys(module for _, module in in_modules))
        wchan = _text(thread.get("wchan"))
        # where it sleeps: the innermost frame of a module (the driver's own code, under the scheduler's and the
        # locks' frames), else the kernel's wait channel
        thread_fields = {**common, "tid": thread["tid"], "thread_name": _text(thread.get("name")), "wchan": wchan,
                         "kernel_stack": stack, "kernel_modules": modules,
                         "kernel_module": modules[0] if modules else None,
                         "kernel_function": in_modules[0][0] if in_modules else wchan}
        place = thread_fields["kernel_function"] or "an unknown kernel function"
        yield Event(kind="thread-blocked", where=where,
                    text=f"{who}pid {record['pid']} thread {thread['tid']} ({thread_fields['thread_name'] or '?'}) "
                         f"in uninterruptible sleep in {place}" + (f" [{', '.join(modules)}]" if modules else ""),
                    fields={k: v for k, v in thread_fields.items() if v not in (None, [], "")})


def with_kernel_waits(stacks: list[dict], threads: list[dict]) -> list[dict]:
    """Each thread's stack with where /proc saw it wait in the kernel: its state, and its wait channel then the
    functions of its kernel stack (`futex_do_wait`, `fcntl_setlk`) as `kernel`, for hang.thread_wait."""
    by_tid = {t["tid"]: t for t in threads}
    merged = []
    for stack in stacks:
        thread = by_tid.get(stack.get("tid"))
        if thread is None:
            merged.append(stack)
            continue
        names = [str(line).split("+", 1)[0].strip() for line in thread.get("kernel_stack") or []]
        wchan = _text(thread.get("wchan"))
        merged.append({**stack, "state": _text(thread.get("state")),
                       "kernel": [name for name in ([wchan] if wchan and wchan != "0" else []) + names if name]})
    return merged


def _node(record: Mapping[str, Any], where: Location) -> Iterator[Event]:
    taken = iso_time(record.get("taken"))
    processes = [p for p in record.get("processes") or [] if isinstance(p, dict)]
    host = _text(record.get("host"))
    yield Event(kind="snapshot-record", where=where, time=taken, clock="wall" if taken else None,
                text=f"snapshot of {len(processes)} process(es) on {host or '?'}"
                     + (f"; {record['gpu']}" if isinstance(record.get("gpu"), str) else ""),
                fields={k: v for k, v in {"host": host, "processes": len(processes),
                                          "gpu_state": _text(record.get("gpu"))}.items() if v is not None})
    for piece in record.get("node") or []:
        if not isinstance(piece, dict):
            continue
        timed_out = TOOL_TIMEOUT.match(str(piece.get("status") or ""))
        if timed_out:
            tool = str(piece.get("source") or "?")
            yield Event(kind="tool-hang", where=where, time=taken, clock="wall" if taken else None,
                        text=f"{tool} did not answer within {timed_out['seconds']} s on {record.get('host') or '?'}",
                        fields={"tool": tool.split()[0], "command": tool, "seconds": float(timed_out["seconds"]),
                                "host": _text(record.get("host"))})


def _text(value: object) -> str | None:
    return str(value) if isinstance(value, str | int) and str(value) else None


