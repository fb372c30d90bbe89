"""`postmortem snapshot` on real hung processes made at test time (tests/hung.py), checked against the reference
tools that read live processes: py-spy and pystack for the Python frames of every thread, gdb (attached after the
snapshot) for the native frames, and gdb again on the core the snapshot wrote. The process must go on running
after it; the hang analysis must name the process the others wait for."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from gdb_oracle import GDB, gdb_threads, on_the_stack, pairs
from hung import (
    PROGRAMS,
    barrier_deadlock,
    blocked_in_c,
    blocked_in_ctypes,
    build_c,
    busy_threads,
    gdb_attach_bt,
    hang_line,
    in_uninterruptible_sleep,
    keeps_running,
    py_spy_dump,
    pystack_remote,
    python_frame_differences,
    python_lock_deadlock,
    rank_job,
    stopped_tasks,
    torch_gloo_hang,
)
from postmortem.capture.collect import Plan
from postmortem.capture.redact import Redactor
from postmortem.capture.snapshot import job_processes, read_stacks, snapshot, snapshot_process
from postmortem.cli import main
from postmortem.core.python_stack import PythonFrame
from postmortem.debugging import short_name
from postmortem.model import to_plain
from postmortem.pipeline import analyze as _analyze
from test_python_stack import VERSIONS, interpreter

SNAPSHOTS = Path(__file__).parent / "data" / "snapshot"
OTHER_PROCESS_OOM = Path(__file__).parent / "data" / "scope" / "other-process-oom.txt"


def _with_older_oom_of_another_process(folder: Path) -> Path:
    """`folder` with a kernel log beside the snapshot holding a real OOM kill of a process that is not the job's,
    an hour before now (tests/data/scope/SOURCES.md): node context every hang test carries, which must never
    become the job's verdict (postmortem.scope)."""
    from datetime import datetime, timedelta

    stamp = (datetime.now().astimezone() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S%z")
    (folder / "node-kernel.log").write_text(f"{stamp} {socket.gethostname()} kernel: {OTHER_PROCESS_OOM.read_text()}")
    return folder


def analyze(paths: list[str]):
    """pipeline.analyze of the snapshot folders, each with another process's older OOM kill beside it."""
    return _analyze([str(_with_older_oom_of_another_process(Path(path))) for path in paths])
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ptrace and /proc are Linux's")


def _snapshot(pid: int, folder: Path) -> dict:
    """One process's snapshot, as the command takes it; its process file."""
    folder.mkdir(parents=True, exist_ok=True)
    result = snapshot_process(pid, folder, Redactor({}))
    assert result.error is None, result.error
    return json.loads((folder / f"process.{pid}.json").read_text())


def _python(state: dict) -> dict[int, tuple[PythonFrame, ...]]:
    return {t["tid"]: tuple(PythonFrame(f["file"], f["function"], f["line"]) for f in t["python"])
            for t in state["stacks"] if t["python"]}


CLONE_SUFFIX = re.compile(r"(?:\.(?:constprop|isra|part|cold|lto_priv)(?:\.\d+)?)+$")
"""GCC's names for the copies it makes of a function (`__new_sem_wait_slow64.constprop.0`): the ELF symbol postmortem
shows; gdb shows the function's DWARF name. The pcs are compared as they are."""


def _spell(name: str) -> str:
    return CLONE_SUFFIX.sub("", short_name(name))


def _native(state: dict) -> dict[int, list[tuple[int, str | None]]]:
    """(pc, name) per thread, cut after main as gdb's backtrace is."""
    found = {}
    for thread in state["stacks"]:
        frames = [(int(f["pc"], 16), _spell(f["symbol"]) if f["symbol"] else None) for f in thread["frames"]]
        names = [name for _, name in frames]
        found[thread["tid"]] = frames[: names.index("main") + 1] if "main" in names else frames
    return found



@contextmanager
def _ready_child(program: str, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A Python program that prints `ready` when it is where the test wants it, killed at the end."""
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        yield child
    finally:
        child.kill()
        child.wait()

def _gdb_pairs(threads) -> dict[int, list[tuple[int, str | None]]]:
    return pairs(on_the_stack(threads), _spell)


def _same_as_reference_tools(pid: int, state: dict, names: bool = True, native: bool = True) -> None:
    """Python frames equal to py-spy's and pystack's, native frames to gdb's; with `names` False, gdb's pcs only: where
    glibc's detached debug file gives a function several local aliases, gdb's choice among them (`__GI___libc_fcntl64`
    over `__GI___fcntl`) is one postmortem does not yet make (CI's machines have no such file). With `native` False
    (a process that runs on, which each tool stops at another instant): the Python frames' functions and files,
    and no gdb."""
    ours = _python(state)
    spy, pystack = py_spy_dump(pid), pystack_remote(pid)
    if not native:
        ours, spy, pystack = (_places(frames) for frames in (ours, spy, pystack))
    # py-spy lists only threads that run Python; pystack and postmortem also name threads with no Python frame
    assert python_frame_differences(ours, {t: f for t, f in spy.items() if f}) == []
    assert python_frame_differences(ours, {t: f for t, f in pystack.items() if f}) == []
    if not native:
        return
    gdb = _gdb_pairs(gdb_attach_bt(pid))
    if names:
        assert gdb and _native(state) == gdb
    else:
        assert gdb and {t: [pc for pc, _ in f] for t, f in _native(state).items()} == \
            {t: [pc for pc, _ in f] for t, f in gdb.items()}


def _places(threads: dict[int, tuple[PythonFrame, ...]]) -> dict[int, tuple[PythonFrame, ...]]:
    """Each thread's Python frames without their lines: where a running thread is, whatever instant stopped it."""
    return {tid: tuple(PythonFrame(f.file, f.function, 0) for f in frames) for tid, frames in threads.items()}


def test_python_deadlock_frames_equal_py_spy_pystack_and_gdb(tmp_path):
    with python_lock_deadlock() as hung:
        state = _snapshot(hung.pid, tmp_path)
        _same_as_reference_tools(hung.pid, state)
        frames = _python(state)
        for role in ("a_then_b", "b_then_a"):
            assert frames[hung.roles[role]][0].line == hang_line(hung.program, role)
        assert len(state["stacks"]) == 3


def test_process_blocked_in_c_frames_equal_gdb_live_and_on_the_written_core(tmp_path):
    (tmp_path / "build").mkdir()
    with blocked_in_c(tmp_path / "build") as hung:
        state = _snapshot(hung.pid, tmp_path / "case")
        gdb_live = _gdb_pairs(gdb_attach_bt(hung.pid))
    assert [name for _, name in _native(state)[hung.pid]] == ["__GI___libc_read", "wait_for_input", "main"]
    assert _native(state) == gdb_live
    if GDB is not None:  # the core the snapshot wrote reads in gdb as the live process did
        program = tmp_path / "build" / "wait_for_input"
        assert _gdb_pairs(gdb_threads(program, tmp_path / "case" / state["core"])) == gdb_live


def test_python_in_a_ctypes_call_frames_equal_reference_tools(tmp_path):
    with blocked_in_ctypes() as hung:
        state = _snapshot(hung.pid, tmp_path)
        _same_as_reference_tools(hung.pid, state)
        assert [f.function for f in _python(state)[hung.pid]] == ["wait_for_signal", "serve", "<module>"]
        assert "__libc_pause" in [name for _, name in _native(state)[hung.pid]]


def test_barrier_job_every_process_equals_reference_tools_and_the_sleeper_is_the_suspect(tmp_path):
    with barrier_deadlock() as hung:
        members = job_processes([hung.pid])
        assert set(members) >= {hung.pid, *hung.children}
        manifest = snapshot(tmp_path / "case", members, Plan(since=_now(), telemetry_s=0, timeout_s=5))
        for pid in members:
            _same_as_reference_tools(pid, json.loads((tmp_path / "case" / f"process.{pid}.json").read_text()))
    assert [p["error"] for p in manifest["processes"]] == [None] * len(members)
    report = analyze([str(tmp_path / "case")])
    verdict = report.verdict
    assert verdict is not None
    assert (verdict.signature, verdict.cause) == ("hang-rank-not-in-collective", "nccl-timeout")
    hang = next(e for e in report.events if e.kind == "job-hang")
    assert hang.fields["suspect"].startswith(f"pid {hung.roles['rank2']}")
    assert hang.fields["waiting_kind"] == "barrier"
    assert f"never_arrives ({Path(hung.program).name}" in hang.fields["suspect_where"]


def _rank_job_hang(scenario: str, tmp_path: Path, suspect: int = 2) -> tuple[object, dict, object]:
    """rank_job.py in `scenario`, snapshot as `snapshot --job` takes it, every process's frames checked against
    py-spy, pystack and gdb; the hung job, the job-hang event and the report (with another process's older OOM kill
    beside it)."""
    with rank_job(scenario, tmp_path / "lock") as hung:
        members = job_processes([hung.pid])
        manifest = snapshot(tmp_path / "case", members, Plan(since=_now(), telemetry_s=0, timeout_s=5))
        spinning = hung.roles["rank3"] if scenario == "spin" else None
        for pid in members:
            _same_as_reference_tools(pid, json.loads((tmp_path / "case" / f"process.{pid}.json").read_text()),
                                     names=False, native=pid != spinning)
    assert [p["error"] for p in manifest["processes"]] == [None] * len(members)
    report = analyze([str(tmp_path / "case")])
    assert report.verdict is not None and report.verdict.signature == "hang-rank-not-in-collective"
    hang = next(e for e in report.events if e.kind == "job-hang")
    assert hang.fields["suspect_rank"] == suspect
    assert suspect != 2 or hang.fields["waiting_members"] == "ranks 0-1, 3"
    # the launcher and multiprocessing's resource tracker are listed apart: they are not ranks, nor suspects
    assert "resource_tracker.py" in hang.fields["others"] and ";" not in hang.fields["suspect"]
    return hung, hang.fields, report


def test_a_rank_spinning_in_python_is_the_suspect_not_the_rank_waiting_for_it(tmp_path):
    """Rank 2 waits for rank 3's signal in a wait of its own; rank 3 spins in a Python loop: the job stopped at rank
    3, and rank 2 waits with the others."""
    hung, fields, _ = _rank_job_hang("spin", tmp_path, suspect=3)
    assert fields["suspect_kind"] == "running" and fields["waiting_members"] == "ranks 0-2"
    loop = hang_line(hung.program, "spin")  # the loop's line or its body's: where the snapshot stopped it
    assert fields["suspect_where"] in (f"spin (rank_job.py:{loop})", f"spin (rank_job.py:{loop + 1})")


def test_a_rank_that_ended_is_the_suspect_with_how_it_ended(tmp_path):
    """Rank 2 exited with status 3; the launcher, joining rank 0 first, has not reaped it: the snapshot writes how it
    ended (its memory and environment are gone), and it is where the job stopped; rank 2 is the rank not captured."""
    with rank_job("dead", tmp_path / "lock") as hung:
        members = job_processes([hung.pid])
        dead = hung.roles["rank2"]
        assert dead in members
        manifest = snapshot(tmp_path / "case", members, Plan(since=_now(), telemetry_s=0, timeout_s=5))
    assert [p["error"] for p in manifest["processes"]] == [None] * len(members)
    assert json.loads((tmp_path / "case" / f"process.{dead}.json").read_text())["ended"] == "exit status 3"
    report = analyze([str(tmp_path / "case")])
    assert report.verdict is not None and report.verdict.signature == "hang-rank-not-in-collective"
    hang = next(e for e in report.events if e.kind == "job-hang")
    assert hang.fields["suspect_kind"] == "dead" and hang.fields["suspect"].startswith(f"pid {dead} ")
    assert "ended (exit status 3" in hang.fields["suspects"] and hang.fields["missing_ranks"] == "rank 2"


def test_a_rank_in_a_native_mutex_is_named_with_the_lock_it_waits_on(tmp_path):
    hung, fields, _ = _rank_job_hang("mutex", tmp_path)
    assert fields["suspect_kind"] == "native-lock"
    assert fields["suspect_where"] == f"lock_twice (rank_job.py:{hang_line(hung.program, 'mutex')})"


def test_a_rank_waiting_for_a_file_lock_is_named_with_its_holder(tmp_path):
    hung, fields, _ = _rank_job_hang("flock", tmp_path)
    assert fields["suspect_kind"] == "file-lock"
    assert fields["suspect_where"] == f"wait_for_file_lock (rank_job.py:{hang_line(hung.program, 'flock')})"
    assert f"held by pid {hung.pid} " in fields["suspects"] and "(the job's launcher)" in fields["suspects"]


def test_a_rank_whose_forked_worker_deadlocked_names_the_worker_which_is_no_rank(tmp_path):
    """The worker inherited RANK=2 and sits below rank 2: it is rank 2's worker, not a fifth rank, and the lock it
    waits for was held by another thread of rank 2 when it was forked."""
    hung, fields, report = _rank_job_hang("worker", tmp_path)
    worker = hung.roles["worker"]
    assert f"its worker pid {worker} waits for a lock in worker_main (rank_job.py:" in fields["suspects"]
    assert f"pid {worker} on " in fields["others"] and "(a worker of pid" in fields["others"]
    (alone,) = [e for e in report.events if e.kind == "process-hang"]
    assert alone.fields["pid"] == worker and "no thread of it can release" in alone.text


def test_deadlocked_threads_are_named_with_their_lines(tmp_path):
    """No cause of the vocabulary is a deadlock of one process's own threads (../shared/spec/causes.md): the
    verdict is unknown and the deadlock is the first line it shows."""
    with python_lock_deadlock() as hung:
        _snapshot(hung.pid, tmp_path)
    report = analyze([str(tmp_path)])
    hang = next(e for e in report.events if e.kind == "process-hang")
    assert report.verdict is None and report.suspects[0] == hang.id
    # the OOM kill of the node context is an hour older than the process, whose start the snapshot recorded
    assert not report.findings and [f.cause for f in report.context] == ["host-oom"]
    assert "before the job started" in str(report.context[0].outside)
    assert hang.fields["lock_waiters"] == 2
    places = hang.fields["lock_places"]
    for role in ("a_then_b", "b_then_a"):
        assert f"thread {hung.roles[role]} at " in places
        assert f"{hung.program.name}:{hang_line(hung.program, role)})" in places
    a, b = hung.roles["a_then_b"], hung.roles["b_then_a"]
    assert hang.fields["lock_cycle"] in (f"thread {a} -> thread {b} -> thread {a}",
                                         f"thread {b} -> thread {a} -> thread {b}")
    assert f"waits for lock {hung.values['lock_b']:#x}, held by thread {b}" in hang.text
    assert f"waits for lock {hung.values['lock_a']:#x}, held by thread {a}" in hang.text


@pytest.mark.parametrize("version", VERSIONS)
def test_each_thread_names_the_lock_it_waits_for_and_the_locks_it_holds(tmp_path, version):
    """The locks of a deadlock, read from the interpreter's frames in CPython 3.11-3.14, are the objects the program's
    own id() names: each thread waits for the lock the other's `with` block holds. 3.10's frames keep their value stack
    elsewhere and are not read: its threads are placed, their locks not named."""
    with python_lock_deadlock(str(interpreter(version))) as hung:
        state = _snapshot(hung.pid, tmp_path)
    locks = {t["tid"]: [(lock["address"], lock["frame"]) for lock in t["python_locks"]] for t in state["stacks"]}
    lock_a, lock_b = f"{hung.values['lock_a']:#x}", f"{hung.values['lock_b']:#x}"
    if version < (3, 11):
        assert not any(locks.values())
        return
    assert locks[hung.roles["a_then_b"]] == [(lock_b, 0), (lock_a, 0)]
    assert locks[hung.roles["b_then_a"]] == [(lock_a, 0), (lock_b, 0)]
    hang = next(e for e in analyze([str(tmp_path)]).events if e.kind == "process-hang")
    assert "deadlock" in hang.text and hang.fields["lock_cycle"].count("thread") == 3


@pytest.mark.skipif(GDB is None, reason="gdb not installed")
def test_gloo_job_rank_that_never_calls_the_collective_is_the_suspect(tmp_path):
    with torch_gloo_hang() as hung:  # skips where torch is not installed
        manifest = snapshot(tmp_path, job_processes([hung.pid]), Plan(since=_now(), telemetry_s=0, timeout_s=5))
    assert all(p["error"] is None for p in manifest["processes"])
    hang = next(e for e in analyze([str(tmp_path)]).events if e.kind == "job-hang")
    assert hang.fields["waiting_kind"] == "collective"
    assert hang.fields.get("suspect_rank") == 2 or hang.fields["suspect"].startswith(f"pid {hung.roles['rank2']}")


@pytest.mark.skipif(GDB is None, reason="gdb not installed")
def test_gloo_job_rank_in_another_collective_is_the_suspect_with_its_place(tmp_path):
    """Rank 2 waits in all_gather while ranks 0, 1 and 3 wait in all_reduce (real Gloo, CPU): both are collectives,
    and the rank not in the one the others are in is named with where it is instead; every frame equals py-spy's."""
    with torch_gloo_hang("all_gather") as hung:
        members = job_processes([hung.pid])
        snapshot(tmp_path, members, Plan(since=_now(), telemetry_s=0, timeout_s=5))
        for pid in members:
            _same_as_reference_tools(pid, json.loads((tmp_path / f"process.{pid}.json").read_text()),
                                     names=False, native=False)
    report = analyze([str(tmp_path)])
    hang = next(e for e in report.events if e.kind == "job-hang")
    # the ranks are forked children without RANK in their environment: named by their pids
    others = ", ".join(map(str, sorted(hung.roles[f"rank{rank}"] for rank in (0, 1, 3))))
    assert hang.fields["waiting_kind"] == "collective" and hang.fields["waiting_members"] == f"pids {others}"
    assert hang.fields["waiting_where"].startswith("all_reduce (distributed_c10d.py:")
    assert hang.fields["suspect"].startswith(f"pid {hung.roles['rank2']} ")
    assert hang.fields["suspect_kind"] == "collective"
    assert hang.fields["suspect_where"].startswith("all_gather (distributed_c10d.py:")
    assert report.verdict is not None and report.verdict.signature == "hang-rank-not-in-collective"


def test_the_process_goes_on_and_the_stop_is_measured(tmp_path):
    with busy_threads(10) as busy:
        state = _snapshot(busy.hung.pid, tmp_path)
        assert stopped_tasks(busy.hung.pid) == []
        assert keeps_running(busy)
    assert 0 < state["stopped_ms"] < 10_000
    assert len(state["stacks"]) == 11
    spinning = {f["function"] for t in state["stacks"] for f in t["python"][:1]}
    assert {f"spin_{i}" for i in range(10)} <= spinning


def test_secret_environment_values_are_blanked_in_the_core(tmp_path):
    secret, kept = "s3cr3t-value-0123456789", "3,1"
    program = "import sys, time; print('ready', flush=True); time.sleep(60)"
    env = {**os.environ, "MY_API_TOKEN": secret, "CUDA_VISIBLE_DEVICES": kept}
    with _ready_child(program, env) as child:
        state = _snapshot(child.pid, tmp_path)
    core = (tmp_path / state["core"]).read_bytes()
    assert secret.encode() not in core
    assert b"MY_API_TOKEN=" + b"*" * len(secret) in core
    assert f"CUDA_VISIBLE_DEVICES={kept}".encode() in core
    assert state["environment_blanked"] >= 1


def test_a_process_that_cannot_be_read_is_a_line_and_the_others_are_still_taken(tmp_path):
    with blocked_in_ctypes() as hung:
        gone = _gone_pid()
        manifest = snapshot(tmp_path, [gone, 2, hung.pid], Plan(since=_now(), telemetry_s=0, timeout_s=5))
    errors = {p["pid"]: p["error"] for p in manifest["processes"]}
    assert errors[gone] and errors[2] and errors[hung.pid] is None
    assert (tmp_path / f"core.{hung.pid}").exists()


def test_debug_pipe_asks_the_process_for_a_flight_recorder_dump(tmp_path):
    """ProcessGroupNCCL's side of TORCH_NCCL_DEBUG_INFO_PIPE_FILE (a FIFO `<stem><rank>.pipe` it reads; a write
    makes it dump to TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank) needs NCCL and a GPU: here a small program plays it,
    so that what the snapshot does with the pipe is what is tested."""
    stem, dump = tmp_path / "pipe_", tmp_path / "dump_"
    program = textwrap.dedent(f"""\
        import os, time
        fifo = {str(stem)!r} + "3.pipe"
        os.mkfifo(fifo)
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        print("ready", flush=True)
        while not os.read(fd, 64):
            time.sleep(0.02)
        open({str(dump)!r} + "3", "wb").write(b"dumped by rank 3")
        time.sleep(60)
    """)
    env = {**os.environ, "RANK": "3", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(stem),
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(dump), "TORCH_NCCL_TRACE_BUFFER_SIZE": "100"}
    with _ready_child(program, env) as child:
        state = _snapshot(child.pid, tmp_path / "case")
    assert (tmp_path / "case" / state["flight_recorder_dump"]).read_bytes() == b"dumped by rank 3"
    assert state["rank"]["rank"] == 3


def test_cli_exits_1_when_no_process_could_be_taken(tmp_path):
    done = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(_gone_pid()), "-o", str(tmp_path / "c"),
                           "--telemetry", "0"], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 1 and "No such file or directory" in done.stderr
    assert (tmp_path / "c" / "snapshot.json").exists()


def test_cli_prints_each_stop_and_writes_a_case_analyze_reads(tmp_path):
    with python_lock_deadlock() as hung:
        done = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(hung.pid), "-o",
                               str(tmp_path / "case"), "--telemetry", "0"], capture_output=True, text=True,
                              check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"pid {hung.pid}: 3 threads (3 with Python stacks), stopped " in done.stderr
    case = _with_older_oom_of_another_process(tmp_path / "case")
    verdict = subprocess.run([sys.executable, "-m", "postmortem", "analyze", str(case)],
                             capture_output=True, text=True, check=False, timeout=120)
    assert verdict.stdout.startswith("Verdict: unknown")
    assert "(not this job's: at " in verdict.stdout and ", before the job started (" in verdict.stdout
    assert "process-hang: pid" in verdict.stdout and "2 threads deadlock on Python locks" in verdict.stdout


def _now():
    from datetime import datetime

    return datetime.now()


def _gone_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    time.sleep(0.05)
    return child.pid


assert PROGRAMS.is_dir()


def _run(tmp_path: Path, program: str, *flags: str) -> subprocess.CompletedProcess:
    """`postmortem run` of a Python program, in tmp_path: a job that crashes leaves its core in its working directory,
    which must not be the repository's (a `core` file was once committed from there)."""
    return subprocess.run([sys.executable, "-m", "postmortem", "run", "--telemetry", "0", *flags, "--out",
                           str(tmp_path / "case"), "--", sys.executable, "-c", program],
                          capture_output=True, text=True, check=False, timeout=180, cwd=tmp_path)


def test_a_crashed_jobs_verdict_is_its_own_crash_not_another_process_older_oom_kill(tmp_path):
    """A job `run` watched dies of SIGSEGV (a real Python process and faulthandler); the node's kernel log beside its
    case holds another process's OOM kill of an hour earlier: the verdict is the job's crash, the kill is context."""
    done = _run(tmp_path, "import faulthandler, os; faulthandler.enable(); os.kill(os.getpid(), 11)")
    assert done.returncode == 139, done.stderr
    report = analyze([str(tmp_path / "case")])
    assert report.verdict is not None and report.verdict.cause == "native-crash", report.findings
    assert [f.cause for f in report.context] == ["host-oom"] and report.context[0].outside
    assert not any(f.cause == "host-oom" for f in report.findings)


def test_run_takes_a_snapshot_when_the_job_stops_moving_and_the_job_goes_on(tmp_path):
    program = textwrap.dedent("""\
        import time
        def stuck():
            time.sleep(6)
        print("working", flush=True)
        stuck()
        print("done", flush=True)
    """)
    done = _run(tmp_path, program, "--hang-after", "2s")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "working\ndone\n"  # not killed, not held
    assert "no output and no change in GPU utilisation for 2 s: taking a snapshot" in done.stderr
    record = json.loads((tmp_path / "case" / "run.json").read_text())
    assert record["hang_snapshot"] == "hang-snapshot"
    job = json.loads((tmp_path / "case" / "hang-snapshot" / f"process.{record['pid']}.json").read_text())
    assert [f["function"] for f in job["stacks"][0]["python"]] == ["stuck", "<module>"]


def test_run_takes_no_snapshot_of_a_job_that_keeps_writing(tmp_path):
    program = "import time\nfor i in range(12):\n    print(i, flush=True)\n    time.sleep(0.5)\n"
    done = _run(tmp_path, program, "--hang-after", "3s")
    assert done.returncode == 0, done.stderr
    assert "taking a snapshot" not in done.stderr
    assert "hang_snapshot" not in json.loads((tmp_path / "case" / "run.json").read_text())


def test_run_takes_no_hang_snapshot_of_a_job_that_computes_silently(tmp_path):
    """Issue 27: a job that prints nothing for longer than --hang-after but uses the CPU is looked at once: its main
    thread runs Python code (no wait), so it is moving, the busy check is set aside and no hang is reported."""
    program = textwrap.dedent("""\
        import time
        def crunch(until):
            total = 0
            while time.monotonic() < until:
                total += 1
            return total
        print("working", flush=True)
        crunch(time.monotonic() + 7)
        print("done", flush=True)
    """)
    done = _run(tmp_path, program, "--hang-after", "2s")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "working\ndone\n"
    assert "looking where it runs" in done.stderr and "the job is moving" in done.stderr, done.stderr
    assert "crunch" in done.stderr
    assert "hang_snapshot" not in json.loads((tmp_path / "case" / "run.json").read_text())
    assert sorted(p.name for p in (tmp_path / "case").iterdir() if p.is_dir()) == []  # no snapshot left behind


def test_run_calls_a_job_spinning_in_a_gpu_wait_hung_though_it_uses_cpu(tmp_path):
    """CUDA's wait for a kernel polls: a real C program spinning in a function named cudaStreamSynchronize uses a
    core and prints nothing. The busy check finds its main thread in the GPU's wait (data/wait-places.tsv), so the
    snapshot is the hang's."""
    exe = build_c(PROGRAMS / "spin_wait.c", tmp_path / "spin_wait")
    done = subprocess.run([sys.executable, "-m", "postmortem", "run", "--telemetry", "0", "--hang-after", "2s",
                           "--out", str(tmp_path / "case"), "--", str(exe), "7"],
                          capture_output=True, text=True, check=False, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "looking where it runs" in done.stderr and "the job is moving" not in done.stderr, done.stderr
    record = json.loads((tmp_path / "case" / "run.json").read_text())
    assert record["hang_snapshot"] == "hang-snapshot"
    job = json.loads((tmp_path / "case" / "hang-snapshot" / f"process.{record['pid']}.json").read_text())
    assert "cudaStreamSynchronize" in [f.get("symbol") for f in job["stacks"][0]["frames"]]


def test_snapshots_of_one_job_in_a_folder_per_node_are_grouped_as_one(tmp_path):
    """The committed snapshot of a real 4-rank Gloo job (tests/data/snapshot/make_snapshots.py), its processes
    split over two folders as two nodes' snapshots would be: one verdict over both, rank 2 the suspect."""
    import shutil

    for path in (SNAPSHOTS / "gloo-rank-skips").glob("process.*.json"):
        node = tmp_path / ("node-a" if json.loads(path.read_text())["rank"].get("rank", 0) < 2 else "node-b")
        node.mkdir(exist_ok=True)
        shutil.copy(path, node / path.name)
    report = analyze([str(tmp_path / "node-a"), str(tmp_path / "node-b")])
    hang = next(e for e in report.events if e.kind == "job-hang")
    assert (hang.fields["suspect_rank"], hang.fields["waiting_kind"]) == (2, "collective")
    assert hang.fields["waiting_members"] == "ranks 0-1, 3"
    assert "all_reduce (distributed_c10d.py:" in hang.fields["waiting_where"]
    assert report.verdict is not None and report.verdict.signature == "hang-rank-not-in-collective"


def test_flight_recorder_suspect_gets_the_pid_and_host_of_its_rank_from_a_snapshot(tmp_path):
    """A dump holds no pid or host; a snapshot's process file of the same rank does (here a real process started
    with RANK=2 beside the committed dumps of the skip scenario, whose suspect is rank 2)."""
    import shutil

    program = "import time; print('ready', flush=True); time.sleep(60)"
    with _ready_child(program, {**os.environ, "RANK": "2", "WORLD_SIZE": "4"}) as child:
        state = _snapshot(child.pid, tmp_path / "snapshot")
    # the committed dumps were recorded before this process started, which a real job's dumps never are: without
    # its start time the process does not put them outside its job (postmortem.scope)
    process = tmp_path / "snapshot" / f"process.{child.pid}.json"
    process.write_text(json.dumps({k: v for k, v in json.loads(process.read_text()).items() if k != "started"}))
    shutil.copytree(SNAPSHOTS.parent / "flight_recorder" / "skip", tmp_path / "dumps")
    report = analyze([str(tmp_path / "dumps"), str(tmp_path / "snapshot")])
    mismatch = next(e for e in report.events if e.kind == "collective-mismatch")
    assert (mismatch.fields["suspect_ranks"], mismatch.fields["suspect_pid"]) == ("2", child.pid)
    assert mismatch.fields["suspect_host"] == state["host"]
    assert f"rank 2 (pid {child.pid} on {state['host']}) called broadcast" in report.verdict.explanation


def test_a_thread_in_uninterruptible_sleep_is_reported_and_does_not_hold_the_snapshot(tmp_path):
    """A thread in state D cannot be stopped until it wakes (a driver that never returns): the snapshot gives up on
    it after live.STOP_WAIT_S, says so, reads what /proc says of it, and is still a case analyze reads. It is let
    go at once: when it wakes (here: its vfork child is killed) while postmortem still runs, it runs on and is
    never held in tracing stop (ptrace's interrupt, still pending, would stop it until postmortem exited)."""
    from postmortem.core import live

    (tmp_path / "build").mkdir()
    with in_uninterruptible_sleep(tmp_path / "build") as hung:
        child = hung.children[0]
        started = time.monotonic()
        manifest = snapshot(tmp_path / "case", [hung.pid, child], Plan(since=_now(), telemetry_s=0, timeout_s=5))
        took = time.monotonic() - started
        assert stopped_tasks(child) == []
        os.kill(child, 9)  # the vfork parent wakes, returns from main and exits
        held, states = _seconds_in_tracing_stop(hung.pid, 2.0)
    assert held == 0.0 and states[-1] == "Z", states
    assert took < live.STOP_WAIT_S + 10
    parent, sleeper = manifest["processes"]
    assert parent["error"].startswith(f"process {hung.pid}: no thread could be stopped (thread {hung.pid} was never "
                                      "stopped: in uninterruptible sleep") and sleeper["error"] is None
    state = json.loads((tmp_path / "case" / f"process.{hung.pid}.json").read_text())
    assert [t["state"] for t in state["threads"]] == ["D"]
    assert "was never stopped: in uninterruptible sleep" in state["diagnostics"][0]
    blocked = [e for e in analyze([str(tmp_path / "case")]).events if e.kind == "thread-blocked"]
    assert [e.fields["tid"] for e in blocked] == [hung.pid]
    if state["threads"][0]["kernel_stack"]:  # /proc/PID/stack is root's to read
        assert "vfork" in " ".join(state["threads"][0]["kernel_stack"])


def _seconds_in_tracing_stop(pid: int, seconds: float) -> tuple[float, list[str]]:
    """Looks at the process's threads for `seconds` (or until it has exited): about how long one of them was in
    tracing stop (`t` in /proc/PID/task/TID/status), and the process's states seen, in order."""
    held, states = 0.0, []
    step, deadline = 0.01, time.monotonic() + seconds
    while time.monotonic() < deadline and states[-1:] != ["Z"]:
        letters = [line.split()[1] for status in Path(f"/proc/{pid}/task").glob("*/status")
                   for line in status.read_text().splitlines() if line.startswith("State:")]
        held += step if "t" in letters else 0.0
        states.append(letters[0] if letters else "Z")
        time.sleep(step)
    return held, states


def test_job_is_the_tree_under_the_outermost_launcher(tmp_path):
    """`--job`: from any process of a job, up to the outermost launcher (data/launchers.tsv) and down to every
    process under it; with no pid, every launcher's tree. The launcher here is a real process tree whose program
    is named torchrun, as the launcher's is (what the table matches is the command line)."""
    launcher = tmp_path / "torchrun"
    launcher.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import subprocess, sys, time
        workers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
        print(" ".join(str(w.pid) for w in workers), flush=True)
        time.sleep(60)
    """))
    launcher.chmod(0o755)
    job = subprocess.Popen([str(launcher), "--nproc-per-node", "2"], stdout=subprocess.PIPE)
    try:
        assert job.stdout is not None
        workers = [int(pid) for pid in job.stdout.readline().split()]
        assert job_processes([workers[1]]) == [job.pid, *sorted(workers)]
        assert set(job_processes([])) >= {job.pid, *workers}
    finally:
        for pid in [*workers, job.pid]:
            os.kill(pid, 9)
        job.wait()


def test_a_second_snapshot_into_the_same_folder_never_overwrites_the_first(tmp_path):
    from postmortem.outputs import OutputError

    with blocked_in_ctypes() as hung:
        first = snapshot(tmp_path, [hung.pid], Plan(since=_now(), telemetry_s=0, timeout_s=5))
        written = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        with pytest.raises(OutputError, match="already holds a snapshot"):
            snapshot(tmp_path, [hung.pid], Plan(since=_now(), telemetry_s=0, timeout_s=5))
        (tmp_path / "snapshot.json").rename(tmp_path / "first.json")  # a folder of loose files: cores stay
        again = snapshot(tmp_path, [hung.pid], Plan(since=_now(), telemetry_s=0, timeout_s=5))
    assert first["processes"][0]["error"] is None
    assert "cannot write" in again["processes"][0]["error"] and "File exists" in again["processes"][0]["error"]
    assert (tmp_path / f"core.{hung.pid}").read_bytes() == written[f"core.{hung.pid}"]
    assert (tmp_path / f"process.{hung.pid}.json").read_bytes() == written[f"process.{hung.pid}.json"]


# ---------------------------------------------------------------- a target of another user, snapshotted by root

HOSTILE_USER = "pm-hostile"
"""The unprivileged user whose processes try to turn root's snapshot against root (made once, then reused)."""
SYSTEM_PYTHON = "/usr/bin/python3"
"""An interpreter the other user may run (this one may live under /root)."""
MARKER = b"root-only-marker-7f3a9c"


def _hostile_user() -> tuple[int, int]:
    import pwd

    if os.geteuid() != 0:
        pytest.skip("needs root: a target process of a second user, snapshotted by root")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} for the second user to run")
    try:
        entry = pwd.getpwnam(HOSTILE_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", HOSTILE_USER], capture_output=True, check=False)
        try:
            entry = pwd.getpwnam(HOSTILE_USER)
        except KeyError:
            pytest.skip(f"cannot create the user {HOSTILE_USER} (useradd)")
    return entry.pw_uid, entry.pw_gid


@contextmanager
def _hostile_folder() -> Iterator[Path]:
    """A folder in /tmp owned by the second user (the test's own tmp_path is root's, closed to others)."""
    import shutil
    import tempfile

    uid, gid = _hostile_user()
    folder = Path(tempfile.mkdtemp(prefix="pm-hostile-", dir="/tmp"))
    os.chown(folder, uid, gid)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _hostile_children(programs: dict[str, str], env: dict[str, str], cwd: Path) -> Iterator[list[int]]:
    """Programs run by the second user (each prints `ready` when armed), keyed by RANK; their pids."""
    uid, gid = _hostile_user()
    children = [subprocess.Popen([SYSTEM_PYTHON, "-I", "-c", program], stdout=subprocess.PIPE, cwd=cwd,
                                 env={**env, "RANK": rank}, user=uid, group=gid, extra_groups=[])
                for rank, program in programs.items()]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        yield [child.pid for child in children]
    finally:
        for child in children:
            child.kill()
            child.wait()


def _marker_anywhere(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and MARKER in p.read_bytes()]


SERVE_PIPE = """\
import os, sys, time
stem, dump = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"], os.environ["TORCH_FR_DUMP_TEMP_FILE"]
rank = os.environ["RANK"]
fifo = stem + rank + ".pipe"
os.mkfifo(fifo)
with open(dump + rank, "wb") as old:
    old.write(b"an older dump")
fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
print("ready", flush=True)
while not os.read(fd, 64):
    time.sleep(0.02)
os.unlink(dump + rank)
{answer}
time.sleep(60)
"""


def test_a_flight_recorder_dump_swapped_for_a_link_to_a_root_only_file_is_refused(tmp_path):
    """Item 1: three processes of another user arm the debug pipe; asked for a dump, one answers with a symbolic
    link to a root-only file, one with a file over the size limit; a third names a root-owned FIFO as its pipe.
    The case holds none of the root-only bytes, nothing is written into root's FIFO, each refusal is named in
    the process's file, and every process is still taken."""
    from postmortem.sources.flight_recorder import MAX_DUMP

    (tmp_path / "root-only").mkdir()
    secret = tmp_path / "root-only" / "secret"
    secret.write_bytes(MARKER + b"\n")
    secret.chmod(0o600)
    root_fifo = tmp_path / "rootpipe_5.pipe"
    os.mkfifo(root_fifo, 0o600)
    reader = os.open(root_fifo, os.O_RDONLY | os.O_NONBLOCK)
    programs = {
        "3": SERVE_PIPE.format(answer=f"os.symlink({str(secret)!r}, dump + rank)"),
        "7": SERVE_PIPE.format(answer=f"open(dump + rank, 'wb').truncate({MAX_DUMP + 1})"),
        "5": "import time; print('ready', flush=True); time.sleep(60)",
    }
    try:
        with _hostile_folder() as work:
            env = {"PATH": os.defpath, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(work / "pipe_"),
                   "TORCH_FR_DUMP_TEMP_FILE": str(work / "dump_")}
            started = time.monotonic()
            with _hostile_children({rank: program for rank, program in programs.items() if rank != "5"}, env,
                                   work) as (linker, grower), \
                 _hostile_children({"5": programs["5"]}, {**env, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE":
                                                          str(tmp_path / "rootpipe_")}, work) as (namer,):
                done = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(linker), str(grower),
                                       str(namer), "-o", str(tmp_path / "case"), "--telemetry", "0"],
                                      capture_output=True, text=True, check=False, timeout=120)
            took = time.monotonic() - started
        try:
            written_to_root = os.read(reader, 64)
        except BlockingIOError:
            written_to_root = b""
    finally:
        os.close(reader)
    assert done.returncode == 0, done.stderr
    assert _marker_anywhere(tmp_path / "case") == []
    assert written_to_root == b""
    assert not list((tmp_path / "case").glob("flight-recorder.*"))
    states = {pid: json.loads((tmp_path / "case" / f"process.{pid}.json").read_text())
              for pid in (linker, grower, namer)}
    assert all(state["core"] == f"core.{pid}" for pid, state in states.items())
    assert "flight_recorder_dump" not in states[linker] and "flight_recorder_dump" not in states[grower]
    assert any("refused" in line and "symbolic link" in line for line in states[linker]["diagnostics"])
    assert any("refused" in line and f"over the limit of {MAX_DUMP}" in line
               for line in states[grower]["diagnostics"]), states[grower]["diagnostics"]
    assert any("refused" in line and "owned by uid 0" in line for line in states[namer]["diagnostics"])
    assert took < 30


PLANTED_NODE_NAMES = ("kernel.log", "driver-version.txt", "lspci-nvidia.txt", "nvidia-smi-q.xml", "topology.txt",
                      "telemetry.csv")
"""What a snapshot writes for the node (collect.gpu_pieces and the kernel log, by their base names)."""


def _plant(folder: Path, names: Iterable[str], victim: Path) -> None:
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).symlink_to(victim)


def test_snapshot_into_a_folder_with_planted_links_writes_through_none(tmp_path):
    """Item 2: every name a snapshot writes is a link to a file of the test's; none is written through, each is
    named as refused, and a planted manifest name (even a dangling link) refuses the folder before any capture."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"the test's own file\n")
    program = "import time; print('ready', flush=True); time.sleep(60)"
    with _ready_child(program, dict(os.environ)) as child:
        _plant(tmp_path / "case", [f"process.{child.pid}.json", *PLANTED_NODE_NAMES], victim)
        done = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(child.pid), "-o",
                               str(tmp_path / "case"), "--telemetry", "0"],
                              capture_output=True, text=True, check=False, timeout=120)
        (tmp_path / "dangling").mkdir()
        (tmp_path / "dangling" / "snapshot.json").symlink_to(tmp_path / "made-by-root")
        refused = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(child.pid), "-o",
                                  str(tmp_path / "dangling"), "--telemetry", "0"],
                                 capture_output=True, text=True, check=False, timeout=120)
    assert victim.read_bytes() == b"the test's own file\n"
    assert f"cannot write process.{child.pid}.json" in done.stderr and "exists already" in done.stderr
    manifest = json.loads((tmp_path / "case" / "snapshot.json").read_text())
    for entry in manifest["node"]:
        assert entry["path"] is None
    assert any("cannot write kernel.log" in entry.get("why", "") for entry in manifest["node"]) or \
        not any(entry["source"].startswith(("journalctl", "dmesg")) and entry["status"] == "ok"
                for entry in manifest["node"])
    assert (tmp_path / "case" / f"core.{child.pid}").is_file()
    assert refused.returncode == 2 and "already holds a snapshot" in refused.stderr
    assert not (tmp_path / "made-by-root").exists()
    assert sorted(p.name for p in (tmp_path / "dangling").iterdir()) == ["snapshot.json"]


def test_run_into_a_folder_with_planted_links_writes_through_none(tmp_path):
    """Item 2: `run --out` into a folder whose stream, record and telemetry names are links is refused before the
    job starts; the kernel log and a core of a crashed job are never copied through planted links either."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"the test's own file\n")
    _plant(tmp_path / "case", ["stdout.log", "stderr.log", "run.json", "telemetry.csv"], victim)
    started = _run(tmp_path, f"open({str(tmp_path / 'job-ran')!r}, 'w')")
    assert started.returncode == 2 and "stdout.log" in started.stderr and "exists already" in started.stderr
    assert victim.read_bytes() == b"the test's own file\n" and not (tmp_path / "job-ran").exists()
    for link in (tmp_path / "case").iterdir():
        link.unlink()
    for name in ("kernel.log", "core"):
        (tmp_path / "case" / name).symlink_to(tmp_path / f"made-by-root-{name}")
    crashed = subprocess.run([sys.executable, "-m", "postmortem", "run", "--telemetry", "0", "--out", "case", "--",
                              sys.executable, "-c", "import os; os.kill(os.getpid(), 11)"],
                             cwd=tmp_path, capture_output=True, text=True, check=False, timeout=180)
    assert crashed.returncode == 139, crashed.stderr
    assert not (tmp_path / "made-by-root-kernel.log").exists() and not (tmp_path / "made-by-root-core").exists()
    record = json.loads((tmp_path / "case" / "run.json").read_text())
    if (tmp_path / "core").exists():  # taken beside the planted name, not through it
        assert any(note.startswith(f"core: {tmp_path / 'core'} -> {tmp_path / 'case' / 'core.'}")
                   for note in record["collected"]), record["collected"]


def test_an_output_folder_of_another_user_is_refused_before_anything_is_taken(tmp_path):
    """Item 2: as root, a case folder (or the folder it would be made in) that another user owns could be filled
    with links between the check and the writes: snapshot, run and collect refuse it with exit status 2."""
    program = "import time; print('ready', flush=True); time.sleep(60)"
    with _hostile_folder() as theirs, _ready_child(program, dict(os.environ)) as child:
        outcomes = [subprocess.run([sys.executable, "-m", "postmortem", *args], capture_output=True, text=True,
                                   check=False, timeout=120, cwd=tmp_path)
                    for args in (["snapshot", str(child.pid), "-o", str(theirs), "--telemetry", "0"],
                                 ["snapshot", str(child.pid), "-o", str(theirs / "case"), "--telemetry", "0"],
                                 ["run", "--telemetry", "0", "--out", str(theirs), "--", "touch", "job-ran"],
                                 ["collect", "--telemetry", "0", "-o", str(theirs / "bundle.tar.gz")])]
        left = sorted(p.name for p in theirs.iterdir())
    for done in outcomes:
        assert done.returncode == 2, done.stderr
        assert f"owned by {HOSTILE_USER}" in done.stderr and "Traceback" not in done.stderr
    assert left == [] and not (tmp_path / "job-ran").exists()


def test_root_by_sudo_writes_into_the_folders_of_the_user_who_ran_sudo(tmp_path):
    """`sudo postmortem collect -o bundle.tar.gz` in one's home folder is how collect is run: the user who ran sudo
    (SUDO_UID) holds root already, so a link in their own folder gains them nothing and it is no foreign folder.
    Another user's folder still is."""
    uid, _gid = _hostile_user()
    with _hostile_folder() as theirs:
        done = [subprocess.run([sys.executable, "-m", "postmortem", "collect", "--telemetry", "0", "-o",
                                str(theirs / "bundle.tar.gz")], capture_output=True, text=True, check=False,
                               timeout=120, cwd=tmp_path, env={**os.environ, "SUDO_UID": sudo})
                for sudo in (str(uid), str(uid + 1))]
        written = sorted(p.name for p in theirs.iterdir())
    assert done[0].returncode == 0, done[0].stderr
    assert done[1].returncode == 2 and f"owned by {HOSTILE_USER}" in done[1].stderr, done[1].stderr
    assert written == ["bundle.tar.gz"]


@contextmanager
def _stacks_in_one_mapping(build: Path) -> Iterator:
    """one_mapping_stacks.c built into `build`: 200 threads whose stacks are slices of one 64 MiB mapping (as
    Go's goroutine stacks lie in its heap arenas), each blocked in read(). Skips without gcc."""
    from hung import build_c, hung_process, task

    source = PROGRAMS / "one_mapping_stacks.c"
    exe = build_c(source, build / "one_mapping_stacks", "-pthread")
    with hung_process(source, [str(exe)], ("main",)) as hung:
        deadline = time.monotonic() + 30
        while any((t := task(int(p.name))) is None or t.state != "S" for p in Path(f"/proc/{hung.pid}/task").iterdir()):
            assert time.monotonic() < deadline, "the threads did not all block"
            time.sleep(0.05)
        yield hung


def test_threads_whose_stacks_share_one_big_mapping_are_copied_once_and_the_process_is_held_briefly(tmp_path):
    """Item 4: each thread's stack is copied only as far as its unwinding reads (not to the end of its mapping),
    pages that several threads' windows share are read once, and only registers and the innermost pages are taken
    while the process is stopped: `postmortem snapshot` stays small, fast and brief, and every thread unwinds to
    its start on the core it wrote."""
    from postmortem.core import live

    (tmp_path / "build").mkdir()
    with _stacks_in_one_mapping(tmp_path / "build") as hung:
        with open(tmp_path / "stderr", "wb") as errors:
            status, peak_kib = _peak_rss([sys.executable, "-m", "postmortem", "snapshot", str(hung.pid), "-o",
                                          str(tmp_path / "case"), "--telemetry", "0"], errors)
        assert stopped_tasks(hung.pid) == []
    assert status == 0, (tmp_path / "stderr").read_text()
    state = json.loads((tmp_path / "case" / f"process.{hung.pid}.json").read_text())
    core = (tmp_path / "case" / state["core"]).stat().st_size
    assert state["stopped_ms"] < 2000, state["stopped_ms"]
    assert core < 16 << 20 and peak_kib << 10 < live.PROCESS_BYTES, (core, peak_kib)
    assert len(state["stacks"]) == 201
    workers = [[f["symbol"] for f in t["frames"]] for t in state["stacks"] if t["tid"] != hung.pid]
    assert all("wait_here" in names and "start_thread" in names for names in workers), workers[:3]


_FORK_AND_MEASURE = ("import os, sys\n"
                     "pid = os.fork()\n"
                     "if pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n"
                     "_, status, usage = os.wait4(pid, 0)\n"
                     "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n")
"""Runs a command as the child of a small interpreter. A child of the test process itself would report the test
process's own peak (a child started by fork or vfork takes its parent's high-water mark along through exec)."""


def _peak_rss(argv: list[str], stderr) -> tuple[int, int]:
    """The command's exit status and its own peak resident size in KiB."""
    done = subprocess.run([sys.executable, "-I", "-c", _FORK_AND_MEASURE, *argv], stdout=subprocess.PIPE,
                          stderr=stderr, check=True, timeout=300)
    status, peak = done.stdout.split()[-2:]
    return int(status), int(peak)


def test_a_stack_cut_by_the_byte_budget_is_a_line_of_the_case(tmp_path):
    """Item 4: past the bytes a snapshot may keep (live.ByteBudget: a job's, or one process's), the stacks left are
    cut, the case says which, and the core written still reads."""
    from postmortem.core import live

    (tmp_path / "build").mkdir()
    with _stacks_in_one_mapping(tmp_path / "build") as hung:
        (tmp_path / "case").mkdir()
        result = snapshot_process(hung.pid, tmp_path / "case", Redactor({}), live.ByteBudget(3 << 20))
        assert stopped_tasks(hung.pid) == []
    assert result.error is None
    state = json.loads((tmp_path / "case" / f"process.{hung.pid}.json").read_text())
    assert (tmp_path / "case" / state["core"]).stat().st_size < 4 << 20
    cut = [line for line in state["diagnostics"] if "bytes a snapshot may keep" in line]
    assert len(cut) == 1 and "thread" in cut[0], state["diagnostics"]
    assert len(state["stacks"]) == 201 and any("wait_here" in [f["symbol"] for f in t["frames"]]
                                               for t in state["stacks"])


def test_secrets_on_the_command_line_are_blanked_in_the_core(tmp_path):
    """Item 8: the process file redacts the command line, and the core's copy of it (the argument block at the top
    of the main stack) has the same secrets overwritten by `*`, byte for byte: grep finds none in the core, and
    the case still reads."""
    from hung import build_c, hung_process

    source = PROGRAMS / "wait_for_input.c"
    exe = build_c(source, tmp_path / "wait_for_input")
    password, token, url_password = "hunter2-0123456789", "ghp_" + "Ab1" * 12, "pw-9f8e7d6c5b4a"
    argv = [str(exe), f"--password={password}", "--token", token, f"https://deploy:{url_password}@git.example.com/r",
            "--epochs=3"]
    with hung_process(source, argv, ("main",)) as hung:
        done = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(hung.pid), "-o",
                               str(tmp_path / "case"), "--telemetry", "0"], capture_output=True, text=True,
                              check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    state = json.loads((tmp_path / "case" / f"process.{hung.pid}.json").read_text())
    core = (tmp_path / "case" / state["core"]).read_bytes()
    for secret in (password, token, url_password):
        assert secret.encode() not in core and secret not in json.dumps(state)
    assert b"\0--password=" + b"*" * len(password) + b"\0--token\0" + b"*" * len(token) + b"\0" in core
    assert f"https://deploy:{'*' * len(url_password)}@git.example.com/r\0--epochs=3\0".encode() in core
    assert state["arguments_blanked"] == 3
    verdict = subprocess.run([sys.executable, "-m", "postmortem", "analyze", str(tmp_path / "case")],
                             capture_output=True, text=True, check=False, timeout=120)
    assert verdict.returncode == 0 and verdict.stdout.startswith("Verdict:"), verdict.stderr
    assert "Traceback" not in verdict.stderr and "wait_for_input" in verdict.stdout + json.dumps(state["stacks"])


def test_a_process_with_one_thread_in_uninterruptible_sleep_is_taken_and_the_thread_named(tmp_path):
    """Item 7: a process whose other threads stop is taken, but not wholly held: the command's line for it says
    which thread was never stopped (state D), so nobody reads its missing stack as a thread that was idle."""
    (tmp_path / "build").mkdir()
    with in_uninterruptible_sleep(tmp_path / "build", "thread") as hung:
        done = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(hung.pid), "-o",
                               str(tmp_path / "case"), "--telemetry", "0"], capture_output=True, text=True,
                              timeout=120, check=False)
        assert stopped_tasks(hung.pid) == []
    assert done.returncode == 0, done.stderr
    assert (f"never stopped (uninterruptible sleep, no stack read): thread(s) {hung.pid}" in done.stderr
            and "1 threads" in done.stderr and "main thread in" not in done.stderr), done.stderr


def _build_marker_library(gcc: str, folder: Path, function: str) -> Path:
    """marker_library.c as `folder`/libmarker.so, its function named `function`."""
    library = folder / "libmarker.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-g", "-O0", f"-DMARKER_FN={function}", "-o", str(library),
                    str(PROGRAMS / "marker_library.c")], check=True, capture_output=True, timeout=120)
    return library


@pytest.mark.parametrize("swapped", ["file", "folder"])
def test_a_library_swapped_for_a_link_to_a_root_only_build_lends_none_of_its_symbols(tmp_path, swapped):
    """Item 1: a process of another user maps its library, deletes it (the mapping stays) and puts at its name,
    or at its folder's, a link to a root-only build of the same code whose function has another name. Root's
    snapshot reads nothing of that build: no file of the case holds that name, the refusal is named, the
    library's frame stays an address, the other frames keep their names, and the process is taken."""
    import shutil

    from hung import build_c, task

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed: no C program to hang")
    uid, gid = _hostile_user()
    root_only = tmp_path / "root-only"
    root_only.mkdir(mode=0o700)
    secret = _build_marker_library(gcc, root_only, "secret_marker_fn")
    secret.chmod(0o600 if swapped == "file" else 0o644)  # a folder the user cannot search hides a readable file
    with _hostile_folder() as work:
        (work / "lib").mkdir()
        library = _build_marker_library(gcc, work / "lib", "public_marker_fn")
        program = work / "swapped_library"
        build_c(PROGRAMS / "swapped_library.c", program, f"-L{work / 'lib'}", "-lmarker", f"-Wl,-rpath,{work / 'lib'}")
        for path in (work / "lib", library, program):
            os.chown(path, uid, gid)
        swap, target = (library, secret) if swapped == "file" else (work / "lib", root_only)
        child = subprocess.Popen([str(program), str(library), str(swap), str(target)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, cwd=work, user=uid, group=gid, extra_groups=[])
        try:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
            deadline = time.monotonic() + 10
            while (found := task(child.pid)) is None or found.state != "S":
                assert time.monotonic() < deadline, "the program did not block"
                time.sleep(0.02)
            assert os.path.islink(swap) and f"{library} (deleted)" in Path(f"/proc/{child.pid}/maps").read_text()
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "postmortem", "snapshot", str(child.pid), "-o",
                                   str(tmp_path / "case"), "--telemetry", "0"],
                                  capture_output=True, text=True, check=False, timeout=120)
            took = time.monotonic() - started
            assert done.returncode == 0, done.stderr
            state = json.loads((tmp_path / "case" / f"process.{child.pid}.json").read_text())
            as_root, _ = read_stacks(tmp_path / "case" / state["core"], None)  # every file read, the planted too
        finally:
            child.kill()
            child.wait()
    assert [str(p) for p in (tmp_path / "case").rglob("*")
            if p.is_file() and b"secret_marker_fn" in p.read_bytes()] == []
    assert any(f"library {library} not read: a link the process's user could have planted" in line
               for line in state["diagnostics"]), state["diagnostics"]
    frames = [(f["module"], f["symbol"]) for f in next(t for t in state["stacks"] if t["tid"] == child.pid)["frames"]]
    assert ("libmarker.so", None) in frames and ("swapped_library", "main") in frames, frames
    assert any(symbol and symbol.endswith("read") for _, symbol in frames), frames  # libc's names are read
    assert [f for t in as_root for f in t["frames"] if f["module"] != "libmarker.so"] == \
        [f for t in state["stacks"] for f in t["frames"] if f["module"] != "libmarker.so"]
    assert "secret_marker_fn" in {f["symbol"] for t in as_root for f in t["frames"]}  # what the rule kept out
    assert took < 30


def test_the_files_of_a_process_are_read_only_as_far_as_its_user_could(tmp_path):
    """Item 1, the rule itself (modules.ReadAs): for a process's user, a file is read when its mode bits give that
    user read (owner, group, others: the kernel's order) along folders it may search, through links it could not
    have planted; the rest is refused and named, or, behind a closed folder or in /proc, not found. Without a
    user, everything is read as the reader (`analyze`)."""
    import shutil
    import tempfile

    from postmortem.core.modules import Files, ReadAs

    me, my_group = os.geteuid(), os.getegid()
    stranger, member, owner = (ReadAs(me + 1000, frozenset({my_group + 1000})), ReadAs(me + 1000,
                               frozenset({my_group})), ReadAs(me, frozenset()))
    shared = Path(tempfile.mkdtemp(prefix="pm-read-as-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        (shared / "private").mkdir(mode=0o700)
        for name, mode in (("open.so", 0o644), ("closed.so", 0o600), ("group.so", 0o640),
                           ("private/inside.so", 0o644)):
            shutil.copyfile(os.path.realpath(shutil.which("true") or "/bin/true"), shared / name)
            (shared / name).chmod(mode)
        for name, target in (("link.so", "open.so"), ("folder-link", "private"), ("proc-link", "/proc/self/environ"),
                             ("loop-a", "loop-b"), ("loop-b", "loop-a")):
            (shared / name).symlink_to(target)

        def read(read_as: ReadAs | None, name: str) -> str:
            files = Files(None, None, (), read_as)
            try:
                image = files.image(str(shared / name))
                return "read" if image is not None else files.refused.get(str(shared / name), "not found")
            finally:
                files.close()

        unreadable, planted = "not readable by the process's user", "a link the process's user could have planted"
        assert [read(stranger, name) for name in ("open.so", "closed.so", "group.so", "private/inside.so",
                                                  "link.so", "proc-link", "loop-a")] == \
            ["read", unreadable, unreadable, "not found", "read", "not found", "not found"]
        assert [read(member, name) for name in ("group.so", "closed.so")] == ["read", unreadable]
        assert [read(owner, name) for name in ("closed.so", "link.so", "folder-link/inside.so")] == \
            ["read", f"{planted} ({shared}/link.so)", f"{planted} ({shared}/folder-link)"]
        assert [read(None, name) for name in ("closed.so", "link.so", "private/inside.so")] == ["read"] * 3
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_one_process_taken_by_two_snapshots_is_one_process_of_the_hang(tmp_path):
    """Issue 27: a hung process snapshot twice (a second look minutes later, two folders) is one process, where the
    later snapshot shows it, not two members of the job."""
    with blocked_in_ctypes() as hung:
        for name in ("first", "second"):
            snapshot(tmp_path / name, [hung.pid], Plan(since=_now(), telemetry_s=0, timeout_s=5))
    report = analyze([str(tmp_path / "first"), str(tmp_path / "second")])
    assert len([e for e in report.events if e.kind == "process-snapshot"]) == 2
    hang = next(e for e in report.events if e.kind == "job-hang")
    assert hang.fields["processes"] == 1 and hang.fields["waiting_members"] == f"pid {hung.pid}", hang.fields


NAMED_THREADS = """
import ctypes, sys, threading
libc = ctypes.CDLL(None)
started = threading.Barrier(3)
def named(comm):
    libc.prctl(15, comm, 0, 0, 0)  # PR_SET_NAME: what /proc/PID/task/TID/comm then says
    started.wait()
    threading.Event().wait()
for comm in (b"data-loader", b"pin-memory-thre"):
    threading.Thread(target=named, args=(comm,), daemon=True).start()
started.wait()
print("ready", flush=True)
threading.Event().wait()
"""


def test_a_snapshots_core_names_every_thread_as_proc_does(tmp_path):
    """The kernel writes no thread's name in a core; a snapshot's core carries each thread's comm (NT_THREAD_NAMES)
    and the report heads each thread with it, as /proc/PID/task/TID/comm (the oracle) says (issue 30)."""
    with _ready_child(NAMED_THREADS, dict(os.environ)) as child:
        comms = {int(tid): Path(f"/proc/{child.pid}/task/{tid}/comm").read_text().strip()
                 for tid in os.listdir(f"/proc/{child.pid}/task")}
        _snapshot(child.pid, tmp_path)
    assert sorted(comms.values())[:2] == ["data-loader", "pin-memory-thre"]
    core = to_plain(_analyze([str(tmp_path / f"core.{child.pid}")]))["cores"][0]
    assert {t["tid"]: t["name"] for t in core["threads"]} == comms
    shown = CliRunner().invoke(main, ["analyze", "--threads", "all", str(tmp_path / f"core.{child.pid}")]).output
    assert all(f"{tid} ({name}):" in shown for tid, name in comms.items()), shown


def test_a_kernels_core_names_its_main_thread_only():
    """NT_PRPSINFO's pr_fname is the thread group leader's comm: the main thread's name; no other thread has one."""
    core = to_plain(_analyze([str(Path(__file__).parents[1] / "samples" / "native-crash-core")]))["cores"][0]
    assert [(t["tid"] == core["pid"], t["name"]) for t in core["threads"]] == [(True, "crash")]
