"""`postmortem snapshot` on real hung processes made at test time (tests/hung.py), checked against the reference
tools that read live processes: py-spy and pystack for the Python frames of every thread, gdb (attached after the
snapshot) for the native frames, and gdb again on the core the snapshot wrote. The process must go on running
after it; the hang analysis must name the process the others wait for."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gdb_oracle import GDB, gdb_threads, on_the_stack, pairs
from hung import (
    PROGRAMS,
    barrier_deadlock,
    blocked_in_c,
    blocked_in_ctypes,
    busy_threads,
    gdb_attach_bt,
    hang_line,
    in_uninterruptible_sleep,
    keeps_running,
    py_spy_dump,
    pystack_remote,
    python_frame_differences,
    python_lock_deadlock,
    stopped_tasks,
    torch_gloo_hang,
)
from postmortem.capture.collect import Plan
from postmortem.capture.redact import Redactor
from postmortem.capture.snapshot import job_processes, snapshot, snapshot_process
from postmortem.core.python_stack import PythonFrame
from postmortem.debugging import short_name
from postmortem.pipeline import analyze

SNAPSHOTS = Path(__file__).parent / "data" / "snapshot"
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


def _same_as_reference_tools(pid: int, state: dict) -> None:
    ours = _python(state)
    spy, pystack = py_spy_dump(pid), pystack_remote(pid)
    # py-spy lists only threads that run Python; pystack and postmortem also name threads with no Python frame
    assert python_frame_differences(ours, {t: f for t, f in spy.items() if f}) == []
    assert python_frame_differences(ours, {t: f for t, f in pystack.items() if f}) == []
    gdb = _gdb_pairs(gdb_attach_bt(pid))
    assert gdb and _native(state) == gdb


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
    verdict = report.findings[0]
    assert (verdict.signature, verdict.cause) == ("hang-rank-not-in-collective", "nccl-timeout")
    hang = next(e for e in report.events if e.kind == "job-hang")
    assert hang.fields["suspect"].startswith(f"pid {hung.roles['rank2']}")
    assert hang.fields["waiting_kind"] == "barrier"
    assert f"never_arrives ({Path(hung.program).name}" in hang.fields["suspect_where"]


def test_deadlocked_threads_are_named_with_their_lines(tmp_path):
    """No cause of the vocabulary is a deadlock of one process's own threads (../shared/spec/causes.md): the
    verdict is unknown and the deadlock is the first line it shows."""
    with python_lock_deadlock() as hung:
        _snapshot(hung.pid, tmp_path)
    report = analyze([str(tmp_path)])
    hang = next(e for e in report.events if e.kind == "process-hang")
    assert not report.findings and report.suspects[0] == hang.id
    assert hang.fields["lock_waiters"] == 2
    places = hang.fields["lock_places"]
    for role in ("a_then_b", "b_then_a"):
        assert f"thread {hung.roles[role]} at " in places
        assert f"{hung.program.name}:{hang_line(hung.program, role)})" in places


@pytest.mark.skipif(GDB is None, reason="gdb not installed")
def test_gloo_job_rank_that_never_calls_the_collective_is_the_suspect(tmp_path):
    with torch_gloo_hang() as hung:  # skips where torch is not installed
        manifest = snapshot(tmp_path, job_processes([hung.pid]), Plan(since=_now(), telemetry_s=0, timeout_s=5))
    assert all(p["error"] is None for p in manifest["processes"])
    hang = next(e for e in analyze([str(tmp_path)]).events if e.kind == "job-hang")
    assert hang.fields["waiting_kind"] == "collective"
    assert hang.fields.get("suspect_rank") == 2 or hang.fields["suspect"].startswith(f"pid {hung.roles['rank2']}")


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
    verdict = subprocess.run([sys.executable, "-m", "postmortem", "analyze", str(tmp_path / "case")],
                             capture_output=True, text=True, check=False, timeout=120)
    assert verdict.stdout.startswith("Verdict: unknown")
    assert "process-hang: pid" in verdict.stdout and "2 threads wait for Python locks" in verdict.stdout


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
    return subprocess.run([sys.executable, "-m", "postmortem", "run", "--telemetry", "0", *flags, "--out",
                           str(tmp_path / "case"), "--", sys.executable, "-c", program],
                          capture_output=True, text=True, check=False, timeout=180)


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
    assert report.findings[0].signature == "hang-rank-not-in-collective"


def test_flight_recorder_suspect_gets_the_pid_and_host_of_its_rank_from_a_snapshot(tmp_path):
    """A dump holds no pid or host; a snapshot's process file of the same rank does (here a real process started
    with RANK=2 beside the committed dumps of the skip scenario, whose suspect is rank 2)."""
    import shutil

    program = "import time; print('ready', flush=True); time.sleep(60)"
    with _ready_child(program, {**os.environ, "RANK": "2", "WORLD_SIZE": "4"}) as child:
        state = _snapshot(child.pid, tmp_path / "snapshot")
    shutil.copytree(SNAPSHOTS.parent / "flight_recorder" / "skip", tmp_path / "dumps")
    report = analyze([str(tmp_path / "dumps"), str(tmp_path / "snapshot")])
    mismatch = next(e for e in report.events if e.kind == "collective-mismatch")
    assert (mismatch.fields["suspect_ranks"], mismatch.fields["suspect_pid"]) == ("2", child.pid)
    assert mismatch.fields["suspect_host"] == state["host"]
    assert f"rank 2 (pid {child.pid} on {state['host']}) called broadcast" in report.findings[0].explanation


def test_a_thread_in_uninterruptible_sleep_is_reported_and_does_not_hold_the_snapshot(tmp_path):
    """A thread in state D cannot be stopped until it wakes (a driver that never returns): the snapshot gives up on
    it after live.STOP_WAIT_S, says so, reads what /proc says of it, and is still a case analyze reads."""
    from postmortem.core import live

    (tmp_path / "build").mkdir()
    with in_uninterruptible_sleep(tmp_path / "build") as hung:
        child = hung.children[0]
        started = time.monotonic()
        manifest = snapshot(tmp_path / "case", [hung.pid, child], Plan(since=_now(), telemetry_s=0, timeout_s=5))
        took = time.monotonic() - started
        assert stopped_tasks(child) == []
    assert took < live.STOP_WAIT_S + 10
    parent, sleeper = manifest["processes"]
    assert parent["error"].startswith(f"process {hung.pid}: no thread could be stopped (thread {hung.pid} did not "
                                      "stop within") and sleeper["error"] is None
    state = json.loads((tmp_path / "case" / f"process.{hung.pid}.json").read_text())
    assert [t["state"] for t in state["threads"]] == ["D"]
    assert "did not stop within" in state["diagnostics"][0]
    blocked = [e for e in analyze([str(tmp_path / "case")]).events if e.kind == "thread-blocked"]
    assert [e.fields["tid"] for e in blocked] == [hung.pid]
    if state["threads"][0]["kernel_stack"]:  # /proc/PID/stack is root's to read
        assert "vfork" in " ".join(state["threads"][0]["kernel_stack"])


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
