"""PyTorch's processes: DataLoader workers that died, and torchrun (torch.distributed.elastic) children.

A worker killed by a signal or by a full /dev/shm (Paddle's DataLoader words it the
same way), workers that exited, `mp.spawn`'s processes that died, elastic's `failed (exitcode: ...)` line and the
ChildFailedError summary table with one entry per failed rank.
"""

from __future__ import annotations

from typing import Any

import regex

from ... import later
from ...knowledge import signal_name
from ...text import Line
from .traceback import Context, Found, Prefixed, follow

_SHM = later.compile(r"(?i)Unexpected bus error encountered in (?:DataLoader )?worker"
                     r"|insufficient shared memory \(shm\)"
                     r"|unable to (?:write to file|open shared memory object) </torch")
"""PyTorch's and Paddle's DataLoader words for a worker killed by SIGBUS on a full /dev/shm, and torch's
shared-memory allocator failing on its `/dev/shm/torch_PID_N` files (`unable to write to file </torch_18692_1954>:
No space left on device (28)`): tensors that DataLoader workers hand over live there."""
_WORKER_SIGNAL = later.compile(r"DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal: (?P<sig>[^.]+)")
_WORKER_FAULT = later.compile(r"Unexpected (?P<what>segmentation fault|floating point exception"
                              r"|illegal instruction) encountered in worker")
_WORKER_EXIT = later.compile(r"DataLoader worker \(pid\(s\) (?P<pids>[\d, ]+)\) exited unexpectedly")
_ELASTIC = later.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: "
    r"(?P<rank>\d+) \(pid: (?P<pid>\d+)\)(?: of binary: (?P<binary>\S+))?"
)
_SPAWN_EXIT = later.compile(r"\bprocess (?P<index>\d+) terminated with (?:signal (?P<sig>SIG[A-Z0-9]+)"
                            r"|exit code (?P<code>-?\d+))")
"""torch.multiprocessing.spawn's ProcessExitedException (torch/multiprocessing/spawn.py): a process `mp.spawn` started
died by a signal or exited non-zero without raising (one that raised is a ProcessRaisedException with its traceback)."""
_CHILD_FAILED = later.compile(r"ChildFailedError:")
_ROOT_FIELDS = later.compile(
    r"^\s*(?:time\s*:\s*(?P<time>\S+)|host\s*:\s*(?P<host>\S+)"
    r"|rank\s*:\s*(?P<rank>\d+)(?: \(local_rank: (?P<local>\d+)\))?"
    r"|exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?|traceback\s*:\s*(?P<tb>.*))"
)


def workers(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    body = pre.body
    if _SHM.search(body):
        fields: dict[str, Any] = {"process": "DataLoader worker", "signal": "SIGBUS", "shm": True}
        return [Found("bus-error", line, line, fields, ("bus-error",), pre.time)]
    if match := _WORKER_SIGNAL.search(body):
        words, last = match["sig"].strip(), line
        if signal_name(words) is None and match.end() == len(body.rstrip()):
            # the message hard-wrapped inside the signal's name ("... by signal: Bus" / "error. It is ...")
            for nxt, p in follow(ctx, line, 1):
                if signal_name(joined := f"{words} {p.body.split('.')[0].strip()}"):
                    words, last = joined, nxt
        signal = signal_name(words) or words
        fields = {"process": "DataLoader worker", "pid": int(match["pid"]), "signal": signal}
        kind = "bus-error" if signal == "SIGBUS" else "child-failed"
        return [Found(kind, line, last, fields, (kind, signal), pre.time)]
    if match := _WORKER_FAULT.search(body):
        fields = {"process": "DataLoader worker", "signal": signal_name(match["what"])}
        return [Found("fatal-signal", line, line, fields, ("fatal-signal", fields["signal"], "worker"), pre.time)]
    if match := _WORKER_EXIT.search(body):
        fields = {"process": "DataLoader worker", "pids": [int(p) for p in regex.findall(r"\d+", match["pids"])]}
        return [Found("child-failed", line, line, fields, ("child-failed", "worker-exit"), pre.time)]
    if match := _ELASTIC.search(body):
        fields = _child_fields(match["code"], match["pid"], match["rank"])
        fields["binary"] = match["binary"]
        return [Found("child-failed", line, line, fields, _child_key(fields), pre.time)]
    if match := _SPAWN_EXIT.search(body):
        fields = {"process": "mp.spawn process", "rank": int(match["index"])}
        if match["sig"]:
            fields["signal"] = signal_name(match["sig"]) or match["sig"]
        else:
            fields.update(_child_fields(match["code"], None, None))
        return [Found("child-failed", line, line, fields, ("child-failed", "spawn", fields["rank"]), pre.time)]
    if _CHILD_FAILED.search(body):
        return _child_failed_block(ctx, line, pre)
    return []


def _child_fields(code: str, pid: str | None, rank: str | None) -> dict[str, Any]:
    exitcode = int(code)
    fields: dict[str, Any] = {"exitcode": exitcode, "pid": int(pid) if pid else None}
    if rank is not None:
        fields["rank"] = int(rank)
    fields["signal"] = signal_name(exitcode) if exitcode < 0 else None
    return fields


def _child_key(fields: dict[str, Any]) -> tuple:
    return ("child-failed", fields.get("exitcode"), fields.get("pid"))


def _child_failed_block(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    """The summary table torchrun prints: one entry per failed rank under `[N]:`."""
    found: list[Found] = []
    entry: dict[str, Any] | None = None
    rules, last = 0, line
    for nxt, p in follow(ctx, line, 120):
        body = p.body
        if body.startswith("====="):
            rules += 1
            last = nxt
            if rules == 2:
                break
            continue
        if regex.match(r"^\s*\[\d+\]:", body):
            entry = {}
            found.append(Found("child-failed", nxt, nxt, entry, (), pre.time))
        elif entry is not None and (match := _ROOT_FIELDS.match(body)):
            for name, value in match.groupdict().items():
                if value is not None:
                    entry[name] = value
            found[-1].last = nxt
        last = nxt
    ctx.take("fatal-signal", [l for l, _ in follow(ctx, line, last.number - line.number)])
    events = []
    for item in found:
        raw = item.fields
        if "code" not in raw:
            continue
        fields = _child_fields(raw["code"], raw.get("pid"), raw.get("rank"))
        fields.update({k: raw[k] for k in ("host", "tb") if k in raw})
        if "tb" in fields:
            fields["traceback"] = fields.pop("tb")
        if "local" in raw:
            fields["local_rank"] = int(raw["local"])
        events.append(Found("child-failed", line, last, fields, _child_key(fields), pre.time))
    return events
