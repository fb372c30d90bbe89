"""Real hung processes, started at test time, and the reference tools that read them (py-spy, pystack, gdb).

Each program under tests/data/hung/ writes a ready line (`<role> <tid>`, see ready.py) just before it
blocks; the context managers here wait for every role's line, then until each of those threads sleeps
in the kernel, yield a `Hung`, and kill the whole process group at the end, whatever the test did.
The oracles give per OS thread id the frames their tool sees, innermost first, and skip the test
when the tool is missing or ptrace is refused: `snapshot`'s tests compare with them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from gdb_oracle import GDB, SCRIPT, Threads, parse_frames, run_gdb
from postmortem.core.python_stack import PythonFrame
from test_python_stack import pystack_threads

PROGRAMS = Path(__file__).parent / "data" / "hung"
TOOLS = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
"""The venv's bin first: py-spy and pystack are installed with the test extra."""
PY_SPY = shutil.which("py-spy", path=TOOLS)
PYSTACK = shutil.which("pystack", path=TOOLS)
READY_TIMEOUT = 120.0
"""Seconds for every role to say it is about to block (four ranks importing torch at once are slow)."""
SETTLE_TIMEOUT = 10.0
"""Seconds from the last ready line until every role's thread sleeps in the kernel."""
GONE_TIMEOUT = 10.0
"""Seconds for a killed process group to be gone."""
TOOL_TIMEOUT = 120
REFUSED = ("permission denied", "operation not permitted")
"""How py-spy and pystack say that ptrace (or reading the process's memory) was refused."""
SLEEPING = ("S", "D")
"""/proc stat states of a thread blocked in the kernel."""
STOPPED = ("T", "t")
"""/proc stat states of a stopped thread: by a signal, or by a tracer."""
RANKS = ("parent", "rank0", "rank1", "rank2", "rank3")
"""The roles of the multi-process jobs: the parent that starts and joins four ranks."""

PythonThreads = dict[int, tuple[PythonFrame, ...]]


@dataclass(frozen=True)
class Hung:
    """A process hung where its program says: its pid (the group's leader), the OS thread id of each
    role its program names (a child process's pid for a role in a child), its descendants' pids, and
    the program's source (the file its frames name)."""

    pid: int
    roles: dict[str, int]
    children: tuple[int, ...]
    program: Path
    values: dict[str, int] = dataclasses.field(default_factory=dict)
    """The numbers the program said instead of a thread (hung_process's `values`): an object's address."""


@dataclass(frozen=True)
class Task:
    """One line of /proc/TID/stat, as much as the fixtures use."""

    pid: int
    state: str
    ppid: int
    pgrp: int


def hang_line(program: Path, marker: str) -> int:
    """The line of `program` commented `HANG <marker>`: where the tests expect a frame to stand."""
    lines = program.read_text().splitlines()
    found = [n for n, line in enumerate(lines, 1) if line.rstrip().endswith((f"# HANG {marker}",
                                                                            f"/* HANG {marker} */"))]
    assert len(found) == 1, f"{program}: {len(found)} lines marked HANG {marker}"
    return found[0]


def task(tid: int) -> Task | None:
    """/proc/TID/stat of a thread or process, None once it is gone (the name may hold ') ')."""
    try:
        text = Path(f"/proc/{tid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    return Task(tid, fields[0], int(fields[1]), int(fields[2]))


def processes() -> list[Task]:
    """Every process on the machine."""
    return [t for p in Path("/proc").iterdir() if p.name.isdigit() and (t := task(int(p.name))) is not None]


def descendants(pid: int) -> tuple[int, ...]:
    """The pids of every process below `pid`, in the order /proc lists them."""
    everyone = processes()
    below = {pid}
    while grown := {t.pid for t in everyone if t.ppid in below} - below:
        below |= grown
    return tuple(t.pid for t in everyone if t.pid in below - {pid})


def group_alive(pgrp: int) -> list[int]:
    """The pids of a process group's members that have not exited (zombies are left out)."""
    return [t.pid for t in processes() if t.pgrp == pgrp and t.state != "Z"]


def stopped_tasks(pid: int) -> list[int]:
    """The threads of `pid` that are stopped (by a signal or a tracer): a snapshot must leave none."""
    return [t.pid for p in Path(f"/proc/{pid}/task").iterdir()
            if (t := task(int(p.name))) is not None and t.state in STOPPED]


@contextmanager
def hung_process(program: Path, argv: Sequence[str], roles: Collection[str], *, blocked: bool = True,
                 spinning: Collection[str] = (), values: Collection[str] = ()) -> Iterator[Hung]:
    """Start `argv` (running `program`) in a process group of its own, wait for the ready line of each
    of `roles` (and with `blocked`, until each of their threads but the `spinning` ones sleeps in the kernel)
    and of each of `values` (a number the program says, not a thread), yield it, and kill the group."""
    read_end, write_end = os.pipe()
    try:
        with tempfile.TemporaryFile() as log:
            try:
                process = subprocess.Popen(argv, env={**os.environ, "HUNG_READY_FD": str(write_end)},
                                           pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True)
            finally:
                os.close(write_end)  # the program's ends only: EOF once every process of it has exited
            try:
                said = ready_roles(read_end, [*roles, *values], log)
                threads = {role: tid for role, tid in said.items() if role not in values}
                if blocked:
                    settle({role: tid for role, tid in threads.items() if role not in spinning})
                yield Hung(process.pid, threads, descendants(process.pid), program,
                           {role: said[role] for role in values})
            finally:
                kill_group(process)
    finally:
        os.close(read_end)


def ready_roles(read_end: int, roles: Collection[str], log: IO[bytes]) -> dict[str, int]:
    """The tid of each role from its ready line; fails the test with the program's output if it exits first."""
    said: dict[str, int] = {}
    pending = b""
    deadline = time.monotonic() + READY_TIMEOUT
    while not set(roles) <= said.keys():
        readable, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(read_end, 4096) if readable else b""
        if not chunk:
            log.seek(0)
            pytest.fail(f"{'exited' if readable else 'timed out'} with {sorted(said)} of {sorted(roles)} ready:\n"
                        f"{log.read().decode(errors='replace')}")
        *lines, pending = (pending + chunk).split(b"\n")
        said.update((role, int(tid)) for role, tid in (line.decode().split() for line in lines))
    return said


def settle(roles: dict[str, int]) -> None:
    """Wait until every role's thread has slept in the kernel on two looks in a row: past its ready
    line, and not merely waiting a moment for the GIL."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    looks = 0
    while looks < 2:
        states = {role: t.state if (t := task(tid)) else "gone" for role, tid in roles.items()}
        looks = looks + 1 if all(s in SLEEPING for s in states.values()) else 0
        if time.monotonic() > deadline:
            pytest.fail(f"not blocked after {SETTLE_TIMEOUT} s: {states}")
        time.sleep(0.02)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the whole process group, reap the leader and wait until no member is left running."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    deadline = time.monotonic() + GONE_TIMEOUT
    while left := group_alive(process.pid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"process group {process.pid} still has {left} after SIGKILL")
        time.sleep(0.01)


# --- the hung programs ------------------------------------------------------------------------


@contextmanager
def python_lock_deadlock(python: str = sys.executable) -> Iterator[Hung]:
    """Two threads deadlocked on two locks (roles a_then_b, b_then_a), the main thread joining them; the roles
    lock_a and lock_b are the locks' addresses, as the program's id() gives them."""
    program = PROGRAMS / "lock_deadlock.py"
    with hung_process(program, [python, str(program)], ("main", "a_then_b", "b_then_a"),
                      values=("lock_a", "lock_b")) as hung:
        yield hung


def build_c(source: Path, exe: Path, *flags: str) -> Path:
    """`source` built into `exe` with gcc (-g -O0, then `flags`: libraries after the source); skips the test
    without gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed: no C program to build")
    subprocess.run([gcc, "-g", "-O0", "-o", str(exe), str(source), *flags], check=True, capture_output=True,
                   timeout=120)
    return exe


@contextmanager
def blocked_in_c(build: Path) -> Iterator[Hung]:
    """wait_for_input.c, built into `build` with gcc (-g -O0, frame pointers), blocked in
    read() on a pipe: main -> wait_for_input -> read. Skips without gcc."""
    source = PROGRAMS / "wait_for_input.c"
    exe = build_c(source, build / "wait_for_input", "-fno-omit-frame-pointer")
    with hung_process(source, [str(exe)], ("main",)) as hung:
        yield hung


@contextmanager
def in_uninterruptible_sleep(build: Path, *args: str) -> Iterator[Hung]:
    """vfork_wait.c, built into `build` with gcc: its main thread sleeps in the kernel in state D (a vfork
    parent waiting for its child); with the argument "thread", beside a thread that can be stopped. Skips
    without gcc."""
    source = PROGRAMS / "vfork_wait.c"
    exe = build_c(source, build / "vfork_wait", "-pthread")
    with hung_process(source, [str(exe), *args], ("main",)) as hung:
        yield hung


@contextmanager
def blocked_in_ctypes() -> Iterator[Hung]:
    """A Python process in libc's pause() called through ctypes, below serve -> wait_for_signal."""
    program = PROGRAMS / "ctypes_pause.py"
    with hung_process(program, [sys.executable, str(program)], ("main",)) as hung:
        yield hung


@contextmanager
def barrier_deadlock() -> Iterator[Hung]:
    """Four forked workers of a multiprocessing barrier of four: rank0, rank1, rank3 wait in it,
    rank2 sleeps in never_arrives; the parent (role parent) joins them."""
    program = PROGRAMS / "barrier.py"
    with hung_process(program, [sys.executable, str(program)], RANKS) as hung:
        yield hung


@contextmanager
def rank_job(scenario: str, lock_file: Path) -> Iterator[Hung]:
    """rank_job.py: four ranks, each exec'd with RANK and WORLD_SIZE set as a launcher sets them; ranks 0, 1, 3 wait
    in a barrier and rank 2 is stuck by `scenario`: "mutex" (a native mutex it holds), "flock" (an fcntl lock on
    `lock_file` that the launcher holds) or "worker" (its forked worker deadlocked on a lock held at fork; role
    worker); or, in "spin", rank 2 waits for rank 3, which spins in a Python loop; or, in "dead", rank 2 has exited
    (status 3) and the launcher has not reaped it."""
    program = PROGRAMS / "rank_job.py"
    roles = (*RANKS, "worker") if scenario == "worker" else RANKS
    with hung_process(program, [sys.executable, str(program), scenario, str(lock_file)], roles,
                      spinning={"spin": ("rank3",), "dead": ("rank2",)}.get(scenario, ())) as hung:
        yield hung


@contextmanager
def torch_gloo_hang(scenario: str = "sleep") -> Iterator[Hung]:
    """A 4-rank Gloo job in which rank2 sleeps in skips_the_collective (or, `scenario` "all_gather", waits in an
    all_gather) while the others wait in all_reduce; skips when torch does not import here."""
    pytest.importorskip("torch")
    program = PROGRAMS / "gloo_hang.py"
    with tempfile.TemporaryDirectory() as store, \
            hung_process(program, [sys.executable, str(program), f"{store}/store", scenario], RANKS) as hung:
        yield hung


@dataclass(frozen=True)
class Busy:
    """A process of threads spinning in spin_0 .. spin_<n-1> (roles of those names), and the file in
    which it writes every thread's count every 50 ms."""

    hung: Hung
    counts: Path


@contextmanager
def busy_threads(n: int = 10) -> Iterator[Busy]:
    """A Python process of `n` threads spinning in pure-Python loops, each in a function of its own."""
    roles = ("main", *(f"spin_{i}" for i in range(n)))
    with tempfile.TemporaryDirectory() as where:
        counts = Path(where) / "counts"
        program = PROGRAMS / "busy.py"
        with hung_process(program, [sys.executable, str(program), str(n), str(counts)], roles,
                          blocked=False) as hung:
            yield Busy(hung, counts)


def counts(busy: Busy) -> list[int]:
    """Every spinning thread's count, as the process last wrote it."""
    return [int(c) for c in busy.counts.read_text().split()]


def keeps_running(busy: Busy, seconds: float = 10.0) -> bool:
    """Whether no thread of it is stopped and, within `seconds`, every thread has counted on and the
    main thread reported it: what a snapshot must leave behind (a thread may wait for the GIL a while)."""
    before = counts(busy)
    deadline = time.monotonic() + seconds
    while not stopped_tasks(busy.hung.pid):
        if all(b > a for a, b in zip(before, counts(busy))):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return False


# --- the oracles ------------------------------------------------------------------------------


def run_tool(tool: str | None, name: str, args: Sequence[str]) -> str:
    """A tool's stdout; skips when it is not installed or ptrace is refused, fails on any other error."""
    if tool is None:
        pytest.skip(f"{name} not installed (pip install -e '.[test]'): no oracle")
    done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False)
    if done.returncode != 0:
        said = done.stdout + done.stderr
        if any(r in said.lower() for r in REFUSED):
            pytest.skip(f"{name} was refused (ptrace or /proc/PID/mem): {said.strip()}")
        pytest.fail(f"{' '.join([name, *args])} failed (exit {done.returncode}):\n{said}")
    return done.stdout


def py_spy_dump(pid: int) -> PythonThreads:
    """`py-spy dump --json`'s Python frames per OS thread id, innermost first. py-spy names a function by
    its qualified name (3.11+: Class.method); kept is its last part, the code's name, as postmortem
    and pystack name it."""
    threads = json.loads(run_tool(PY_SPY, "py-spy", ["dump", "--pid", str(pid), "--json"]))
    return {t["os_thread_id"]: tuple(PythonFrame(f["filename"], f["name"].rpartition(".")[2], f["line"])
                                     for f in t["frames"]) for t in threads}


def pystack_remote(pid: int) -> PythonThreads:
    """`pystack remote`'s Python frames per OS thread id, innermost first (its text: it has no JSON)."""
    return pystack_threads(run_tool(PYSTACK, "pystack", ["remote", "--no-color", str(pid)]))


def gdb_attach_bt(pid: int) -> Threads:
    """gdb's frames of every thread of the live process, attached in batch mode, then detached."""
    if GDB is None:
        pytest.skip("gdb not installed: no native oracle")
    threads = parse_frames(run_gdb([f"attach {pid}", f"source {SCRIPT}", "detach"], gdb=GDB, check=False))
    if not threads:
        pytest.skip(f"gdb could not attach to {pid}: ptrace refused (kernel.yama.ptrace_scope, CAP_SYS_PTRACE)")
    return threads


def python_frame_differences(a: PythonThreads, b: PythonThreads) -> list[str]:
    """Where two readings of the same process's Python stacks differ, one line per thread; empty when
    they agree on every thread and frame."""
    lines = [f"thread {tid}: only in the {side}" for side, tids in (("first", a.keys() - b.keys()),
                                                                   ("second", b.keys() - a.keys()))
             for tid in sorted(tids)]
    for tid in sorted(a.keys() & b.keys()):
        if a[tid] != b[tid]:
            lines.append(f"thread {tid}: {frames_text(a[tid])} != {frames_text(b[tid])}")
    return lines


def frames_text(frames: Sequence[PythonFrame]) -> str:
    """Frames innermost first as `function (file:line)` joined by ' < '."""
    return " < ".join(f"{f.function} ({Path(f.file).name}:{f.line})" for f in frames) or "no frames"
