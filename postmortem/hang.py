"""Hang analysis: where each process of a hung job waits, grouped, and who the others wait for.

Input: the `process-snapshot` events of `postmortem snapshot`'s process files (whose stacks were read from the
snapshot's core on the machine that took it, where the libraries are) and of pasted py-spy / pystack dumps
(sources/live_stacks.py). Each process is placed where its main
thread waits: the first row of data/wait-places.tsv that matches a frame of that thread (a collective, a barrier,
the GPU, a Python lock, a sleep, I/O...), shown as its innermost Python frame (or native frame). Processes in the
same place form a group. When most wait for the others (a collective or a barrier), those that do not are the
suspects: they are where the job stopped. The result is one `job-hang` event for the job and one
`process-hang` event per process whose threads wait on each other (two or more threads on Python locks): where the
interpreter's frames show which lock each waits for and which its `with` blocks hold (core.python_stack.PythonLock),
each wait names the holding thread, and a cycle of them is named as the deadlock it is. The
signatures (signatures/hang.yaml) turn the job's into findings, with the ranks and places as fields; a
process-hang has no cause of its own in the vocabulary and is shown as the first unexplained line.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import regex

from . import later
from .knowledge import data_rows
from .model import Event, Location, ranks_text

OTHERS = frozenset({"collective", "barrier"})
"""Wait kinds that wait for other processes: a process not waiting with the others there is the suspect."""
DELEGATES = frozenset({"autograd"})
"""Wait kinds of a main thread that waits for threads of its own process (the autograd engine's): the process
waits where the first of those waits for other processes, when one does (a gradient collective)."""
DEAD = "dead"
"""The wait kind of a process that has ended (a zombie of its launcher): where the job stopped, if it was a rank."""
LAUNCHERS = frozenset({"child", "launcher"})
"""Wait kinds of a job's launcher or parent (torchrun, mpirun, a multiprocessing parent): never a suspect."""
GPU_MODULES = later.compile(r"^nvidia")
"""Kernel modules of the NVIDIA driver (nvidia, nvidia_uvm, nvidia_modeset): a thread blocked in one of them
waits for the driver."""
SHOWN_GROUPS = 8
LOCK_WAITS = frozenset({"python-lock", "join"})
"""Wait kinds of a thread in a Python lock's acquire (Thread.join waits on the thread's own lock): the first lock of
its innermost frame is the one it waits for, not one it holds."""


@dataclass(frozen=True)
class WaitPlace:
    """One row of data/wait-places.tsv."""

    frame: str
    pattern: regex.Pattern
    kind: str
    meaning: str


@cache
def wait_places() -> tuple[WaitPlace, ...]:
    return tuple(WaitPlace(row["frame"], later.compile(row["pattern"]), row["kind"], row["meaning"])
                 for row in data_rows("wait-places.tsv"))


@dataclass(frozen=True)
class Wait:
    """Where one thread waits."""

    tid: int
    kind: str
    meaning: str
    where: str
    """Its innermost Python frame (`function (file:line)`), else its innermost named native frame."""
    wants: str | None = None
    """The address of the Python lock it waits for, where its innermost frame's value stack shows it."""
    holds: tuple[str, ...] = ()
    """The addresses of the Python locks its `with` blocks hold (core.python_stack.PythonLock)."""


@dataclass(frozen=True)
class Waiter:
    """One process of the job, placed where its main thread waits."""

    pid: int
    host: str | None
    rank: int | None
    launcher: str | None
    """The launcher the process is (torchrun, mpirun: data/launchers.tsv), when it is one: never a suspect."""
    path: str
    main: Wait
    threads: tuple[Wait, ...]
    ppid: int | None = None
    worker_of: int | None = None
    """The pid of the rank this process is a child of (a DataLoader or multiprocessing worker, which inherits the
    rank's RANK): not a rank of its own."""
    lock_holders: tuple[int, ...] = ()
    """The pids holding the file locks this process waits for (the snapshot's /proc/locks)."""

    @property
    def name(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"
        return who + (f" (pid {self.pid}{' on ' + self.host if self.host else ''})" if self.rank is not None
                      else f" on {self.host}" if self.host else "")

    @property
    def voter(self) -> bool:
        """A rank, a launcher or a process of the job that ended (a rank whose environment died with it): the
        processes whose waits say where the job stands (not a rank's worker, not a helper such as
        multiprocessing's resource tracker)."""
        return self.rank is not None or self.launcher is not None or self.main.kind == DEAD


def thread_wait(thread: Mapping[str, Any]) -> Wait:
    """Where a thread waits: the first wait-place row matching one of its frames (a process file's `stacks`)."""
    python = [f for f in thread.get("python") or [] if isinstance(f, Mapping)]
    native = [str(f["symbol"]) for f in thread.get("frames") or [] if isinstance(f, Mapping) and f.get("symbol")]
    kernel = [str(name) for name in thread.get("kernel") or []] if thread.get("state") != "R" else []
    candidates = {"python": [f"{f.get('function')}@{f.get('file')}" for f in python], "native": native,
                  "kernel": kernel}
    found = next((place for place in wait_places() if any(place.pattern.search(c) for c in candidates[place.frame])),
                 None)
    where = _python_place(python[0]) if python else (native[0] if native else "?")
    tid = thread["tid"] if isinstance(thread.get("tid"), int) else 0
    if thread.get("ended"):
        return Wait(tid, DEAD, f"{thread['ended']}, before the snapshot; its parent has not reaped it", "its end")
    if found is None:
        return Wait(tid, "running", "not in a known wait (running, or in code the table does not know)", where,
                    None, tuple(lock for lock, _ in _locks(thread)))
    locks = _locks(thread)
    # the first lock of the innermost frame is the one that frame's acquire waits for
    wants = locks[0][0] if found.kind in LOCK_WAITS and locks and locks[0][1] == 0 else None
    return Wait(tid, found.kind, found.meaning, where, wants, tuple(lock for lock, _ in locks if lock != wants))


def _locks(thread: Mapping[str, Any]) -> list[tuple[str, object]]:
    """The addresses of the Python locks a thread's frames refer to, innermost first, each with its frame's index
    (a process file's `python_locks`)."""
    return [(lock["address"], lock.get("frame")) for lock in thread.get("python_locks") or []
            if isinstance(lock, Mapping) and isinstance(lock.get("address"), str)]


def _python_place(frame: Mapping[str, Any]) -> str:
    return f"{frame.get('function')} ({os.path.basename(str(frame.get('file')))}:{frame.get('line')})"


def waiters(events: Iterable[Event]) -> list[Waiter]:
    """The processes of the snapshots, each with where its threads wait (the stacks its process file holds); a process
    taken by several snapshots (the same host, pid and start) once, as the latest shows it."""
    found = []
    for event in _latest_of_each_process(events):
        stacks = event.fields.get("stacks") if event.kind == "process-snapshot" else None
        if event.kind == "process-snapshot" and event.fields.get("ended"):
            stacks = [{"tid": event.fields["pid"], "ended": event.fields["ended"]}]
        if not stacks:
            continue
        threads = tuple(thread_wait(thread) for thread in stacks if isinstance(thread, Mapping))
        pid = event.fields["pid"]
        main = next((w for w in threads if w.tid == pid), threads[0])
        if main.kind in DELEGATES:
            main = next((w for w in threads if w.kind in OTHERS), main)
        holders = tuple(int(h) for lock in event.fields.get("file_locks") or []
                        for h in lock.get("holders") or [] if isinstance(h, int))
        found.append(Waiter(pid, event.fields.get("host"), event.fields.get("rank"), event.fields.get("launcher"),
                            event.where.path, main, threads, event.fields.get("ppid"), None, holders))
    found = _workers_apart(found)
    return sorted(found, key=lambda w: (w.rank is None, w.rank if w.rank is not None else 0, w.host or "", w.pid))


def _latest_of_each_process(events: Iterable[Event]) -> list[Event]:
    """The process snapshots, one per process: a process is its host, pid and start time (a pid reused by another
    process is another one); of two snapshots of it, the later (undated ones first, then by time)."""
    latest: dict[tuple, Event] = {}
    for event in events:
        if event.kind != "process-snapshot":
            continue
        key = (event.fields.get("host"), event.fields.get("pid"), event.fields.get("started"))
        kept = latest.get(key)
        if kept is None or _taken(event) >= _taken(kept):
            latest[key] = event
    return list(latest.values())


def _taken(event: Event) -> str:
    return event.time.isoformat() if event.time is not None else ""


def _workers_apart(found: list[Waiter]) -> list[Waiter]:
    """A process whose parent is a rank of the same host is that rank's worker, whatever RANK it inherited: ranks
    are the processes a launcher started."""
    ranks: dict[tuple[str | None, int | None], Waiter] = {(w.host, w.pid): w for w in found if w.rank is not None}
    return [dataclasses.replace(w, rank=None, worker_of=parent.pid)
            if (parent := ranks.get((w.host, w.ppid))) is not None and parent is not w else w for w in found]


def hang_events(events: Sequence[Event]) -> list[Event]:
    """`process-hang` events for processes whose threads wait on each other, and one `job-hang` event."""
    found = waiters(events)
    made = [event for waiter in found if (event := _process_hang(waiter)) is not None]
    if found:
        made.append(_job_hang(found, events))
    return made


def _process_hang(waiter: Waiter) -> Event | None:
    """Threads of one process waiting on each other's Python locks; or its only thread waiting for one, which no
    thread of it can release (a lock another thread held when the process was forked: a worker's classic deadlock).

    Where the threads' stacks show which lock each waits for and which its `with` blocks hold, each wait names the
    holder, and waits that come back to where they started are a deadlock, named as the cycle of threads."""
    locked = [w for w in waiter.threads if w.kind == "python-lock"]
    alone = len(locked) == 1 and len(waiter.threads) == 1
    holder = {lock: w for w in waiter.threads for lock in w.holds}
    held = [w for w in locked if w.wants in holder and holder[w.wants] is not w]
    if len(locked) < 2 and not alone and not held:
        return None
    places = "; ".join(f"thread {w.tid} at {w.where}" for w in locked)
    cycle = _lock_cycle(locked, holder)
    fields: dict[str, Any] = {"pid": waiter.pid, "host": waiter.host, "who": waiter.name, "lock_waiters": len(locked),
                              "lock_places": places, "threads": len(waiter.threads)}
    if cycle:
        told = (f"{len(cycle)} threads deadlock on Python locks, each holding the lock the next waits for: "
                + "; ".join(f"thread {w.tid} at {w.where} waits for lock {w.wants}, held by thread "
                            f"{holder[str(w.wants)].tid}" for w in cycle))
        fields["lock_cycle"] = " -> ".join(f"thread {w.tid}" for w in [*cycle, cycle[0]])
    elif held:
        told = f"{len(locked)} thread{'s' if len(locked) > 1 else ''} wait for Python locks: " + "; ".join(
            f"thread {w.tid} at {w.where} waits for lock {w.wants}, held by thread {holder[str(w.wants)].tid} at "
            f"{holder[str(w.wants)].where} ({holder[str(w.wants)].meaning})" if w in held else
            f"thread {w.tid} at {w.where}" for w in locked)
    else:
        told = (f"its only thread waits for a Python lock no thread of it can release (held by another thread when "
                f"it was forked): {places}" if alone else f"{len(locked)} threads wait for Python locks: {places}")
    if held:
        fields["lock_holders"] = "; ".join(f"thread {w.tid} waits for thread {holder[str(w.wants)].tid}" for w in held)
    return Event(kind="process-hang", where=Location(waiter.path), text=f"{waiter.name}: {told}", fields=fields)


def _lock_cycle(locked: Sequence[Wait], holder: Mapping[str, Wait]) -> list[Wait]:
    """The first cycle of threads each waiting for a lock the next holds, in order; [] when the waits end."""
    for start in locked:
        path: list[Wait] = []
        current: Wait | None = start
        while current is not None and current not in path:
            path.append(current)
            current = holder.get(current.wants) if current.wants is not None else None
        if current is not None:
            return path[path.index(current):]
    return []


def _members(group: list[Waiter]) -> str:
    ranks = [w.rank for w in group if w.rank is not None]
    pids = [w.pid for w in group if w.rank is None]
    parts = ([ranks_text(ranks)] if ranks else []) + \
            ([f"pid{'s' if len(pids) > 1 else ''} {', '.join(map(str, sorted(pids)))}"] if pids else [])
    return " and ".join(parts)


def _meaning(waiter: Waiter, everyone: Sequence[Waiter] = ()) -> str:
    """What a process's wait means, with whom it waits for where the snapshot shows it: the holder of its file lock,
    its worker stuck on a lock."""
    if waiter.launcher:
        return f"the job's launcher, {waiter.launcher}"
    meaning = waiter.main.meaning
    by_pid = {w.pid: w for w in everyone}
    if waiter.main.kind == "file-lock" and waiter.lock_holders:
        meaning += "; held by " + ", ".join(
            by_pid[h].name + (" (the job's launcher)" if by_pid[h].launcher or by_pid[h].main.kind == "child" else "")
            if h in by_pid else f"pid {h}, not of the job" for h in waiter.lock_holders)
    stuck = [w for w in everyone if w.worker_of == waiter.pid and w.main.kind in ("python-lock", "native-lock")]
    if stuck:
        meaning += "; its worker " + ", ".join(f"pid {w.pid} waits for a lock in {w.main.where}" for w in stuck)
    return meaning


def _placed(who: str, count: int, kind: str, place: str, meaning: str) -> str:
    """`who waits in place (meaning)`; a process that ended has no place: `who ended (meaning)`."""
    if kind == DEAD:
        return f"{who} ended ({meaning})"
    return f"{who} {'wait' if count > 1 else 'waits'} in {place} ({meaning})"


def _job_hang(everyone: list[Waiter], events: Sequence[Event]) -> Event:
    voters = [w for w in everyone if w.voter]
    found = voters if any(w.rank is not None for w in voters) else everyone
    helpers = [w for w in everyone if w not in found]
    groups: dict[tuple[str, str], list[Waiter]] = {}
    for waiter in found:
        kind = "launcher" if waiter.launcher else waiter.main.kind
        groups.setdefault((kind, waiter.main.where), []).append(waiter)
    ordered = sorted(groups.items(), key=lambda item: (item[0][0] in LAUNCHERS, -len(item[1])))
    (kind, where), largest = ordered[0]
    suspects = [w for (k, _), group in ordered[1:] if k not in LAUNCHERS for w in group] \
        if kind in OTHERS and len(found) > 1 else []
    # a rank that ended is where the job stopped; then one that waits for no other process (busy, or in a wait of its
    # own): a rank in another collective or barrier waits for someone too, often for that one
    suspects.sort(key=lambda w: (w.main.kind != DEAD, w.main.kind in OTHERS))
    blocked = [e for e in events if e.kind == "thread-blocked"
               and any(GPU_MODULES.search(m) for m in e.fields.get("kernel_modules", []))]
    tool_hangs = [e for e in events if e.kind == "tool-hang"]
    gpu_side = kind == "gpu" or bool(blocked) or bool(tool_hangs)
    text = "; ".join(_placed(_members(group), len(group), k, place, _meaning(group[0], everyone))
                     for (k, place), group in ordered[:SHOWN_GROUPS])
    fields: dict[str, Any] = {
        "processes": len(everyone),
        "hosts": sorted({w.host for w in everyone if w.host}),
        "groups": [{"members": _members(group), "kind": k, "where": place, "meaning": _meaning(group[0], everyone)}
                   for (k, place), group in ordered],
        "others": "; ".join(f"{w.name}{f' (a worker of pid {w.worker_of})' if w.worker_of else ''} in "
                            f"{w.main.where} ({w.main.meaning})" for w in helpers[:SHOWN_GROUPS]),
        "groups_text": text,
        "side": "gpu" if gpu_side else "host",
        "waiting_kind": kind,
        "waiting_where": where,
        "waiting_members": _members(largest),
    }
    world = {size for e in events
             if e.kind == "process-snapshot" and isinstance(size := e.fields.get("world_size"), int)}
    ranks = {w.rank for w in found if w.rank is not None}
    if len(world) == 1 and ranks:
        missing = sorted(set(range(next(iter(world)))) - ranks)
        if missing:
            fields["missing_ranks"] = ranks_text(missing)
    if suspects:
        fields["suspects"] = "; ".join(_placed(w.name, 1, w.main.kind, w.main.where, _meaning(w, everyone))
                                       for w in suspects)
        fields["suspect"] = suspects[0].name
        fields["suspect_where"] = suspects[0].main.where
        fields["suspect_kind"] = suspects[0].main.kind
        if suspects[0].rank is not None:
            fields["suspect_rank"] = suspects[0].rank
    if blocked:
        fields["driver_blocked"] = "; ".join(e.text for e in blocked[:4])
    if tool_hangs:
        fields["tool_hang"] = tool_hangs[0].text
    return Event(kind="job-hang", where=Location(found[0].path), text=text,
                 fields={k: v for k, v in fields.items() if v not in (None, [], "")})
