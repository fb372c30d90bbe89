"""Hang stacks pasted as text (postmortem/sources/live_stacks.py): `py-spy dump` and `pystack remote` of real hung
processes, taken at test time (tests/hung.py) and pasted one process after another as a user would, and the dumps
of the public threads in tests/corpus. The hang analysis must place them as it places a snapshot's process files,
and name the process the others wait for."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from hung import PY_SPY, PYSTACK, PythonThreads, barrier_deadlock, hang_line, py_spy_dump, pystack_remote, run_tool
from postmortem.capture.collect import Plan
from postmortem.capture.snapshot import job_processes, snapshot
from postmortem.model import Event
from postmortem.pipeline import analyze
from postmortem.sources import live_stacks

CORPUS = Path(__file__).parent / "corpus"
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ptrace and /proc are Linux's")


@dataclass(frozen=True)
class Dumps:
    """One hung barrier job: each process's dumps as the tools print them, the roles' pids, and its snapshot."""

    roles: dict[str, int]
    program: Path
    text: dict[str, dict[int, str]]
    """Tool invocation -> pid -> what it printed."""
    oracle: dict[str, dict[int, PythonThreads]]
    """py-spy's JSON and pystack's frames (tests/hung.py) per pid: what the text must give."""
    snapshot: Path


INVOCATIONS = {
    "py-spy": (PY_SPY, "py-spy", ["dump", "--pid"]),
    "py-spy --native": (PY_SPY, "py-spy", ["dump", "--native", "--pid"]),
    "py-spy --locals": (PY_SPY, "py-spy", ["dump", "--locals", "--pid"]),
    "pystack": (PYSTACK, "pystack", ["remote", "--no-color"]),
    "pystack --native": (PYSTACK, "pystack", ["remote", "--native", "--no-color"]),
    "pystack --locals": (PYSTACK, "pystack", ["remote", "--locals", "--no-color"]),
}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Dumps:
    """Every dump of the 4-rank barrier job whose rank 2 sleeps, and a `postmortem snapshot` of it."""
    case = tmp_path_factory.mktemp("snapshot")
    with barrier_deadlock() as hung:
        pids = [hung.pid, *hung.children]
        text = {name: {pid: run_tool(tool, label, [*args, str(pid)]) for pid in pids}
                for name, (tool, label, args) in INVOCATIONS.items()}
        oracle = {"py-spy": {pid: py_spy_dump(pid) for pid in pids},
                  "pystack": {pid: pystack_remote(pid) for pid in pids}}
        snapshot(case, job_processes([hung.pid]), Plan(since=datetime.now(), telemetry_s=0, timeout_s=5))
    return Dumps(hung.roles, hung.program, text, oracle, case)


def _paste(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _processes(events: list[Event]) -> dict[int, Event]:
    return {e.fields["pid"]: e for e in events if e.kind == "process-snapshot"}


def _job_hang(report) -> Event:
    return next(e for e in report.events if e.kind == "job-hang")


@pytest.mark.parametrize("invocation", list(INVOCATIONS))
def test_pasted_dumps_of_a_hung_job_name_the_sleeper_as_a_snapshot_does(dumps: Dumps, tmp_path: Path,
                                                                         invocation: str) -> None:
    pasted = _paste(tmp_path, "stacks.txt", "\n".join(dumps.text[invocation].values()))
    report = analyze([str(pasted)])
    ours, theirs = _job_hang(report), _job_hang(analyze([str(dumps.snapshot)]))
    sleeper = dumps.roles["rank2"]
    assert ours.fields["suspect"] == f"pid {sleeper}" == theirs.fields["suspect"].split(" on ")[0]
    assert ours.fields["suspect_where"] == theirs.fields["suspect_where"] == \
        f"never_arrives ({dumps.program.name}:{hang_line(dumps.program, 'sleeper')})"
    assert ours.fields["waiting_kind"] == theirs.fields["waiting_kind"] == "barrier"
    assert report.findings[0].signature == "hang-rank-not-in-collective"
    assert sorted(_processes(report.events)) == sorted(dumps.text[invocation])


@pytest.mark.parametrize("tool", ["py-spy", "pystack"])
def test_python_frames_are_innermost_first_as_the_tools_json_and_frames_say(dumps: Dumps, tmp_path: Path,
                                                                           tool: str) -> None:
    """py-spy prints innermost first, pystack outermost first: both come out as a snapshot holds them."""
    pasted = _paste(tmp_path, "stacks.txt", "\n".join(dumps.text[tool].values()))
    for pid, event in _processes(analyze([str(pasted)]).events).items():
        ours = {s["tid"]: [(f["function"], f["line"]) for f in s["python"]] for s in event.fields["stacks"]}
        theirs = {tid: [(f.function, f.line) for f in frames] for tid, frames in dumps.oracle[tool][pid].items()}
        assert ours == theirs
        assert event.fields["threads"] == len(theirs)


def test_native_frames_of_both_tools_are_innermost_first(dumps: Dumps, tmp_path: Path) -> None:
    sleeper = dumps.roles["rank2"]
    for invocation in ("py-spy --native", "pystack --native"):
        event = _processes(analyze([str(_paste(tmp_path, "one.txt", dumps.text[invocation][sleeper]))]).events)[sleeper]
        main = event.fields["stacks"][0]
        assert main["tid"] == sleeper and main["frames"][0]["symbol"] == "clock_nanosleep", invocation


def test_launcher_rank_prefixes_give_each_process_its_rank(dumps: Dumps, tmp_path: Path) -> None:
    """torchrun `[rankN]:` / `[defaultN]:` and srun `N: ` prefixes, over a paste mixing both tools."""
    styles = ("[rank{}]: ", "[default{}]:", "{}: ", "[rank{}]: ")
    tools = ("py-spy", "pystack", "py-spy --locals", "pystack --native")
    pieces = []
    for rank in range(4):
        text = dumps.text[tools[rank]][dumps.roles[f"rank{rank}"]]
        pieces.append("\n".join(styles[rank].format(rank) + line for line in text.splitlines()))
    report = analyze([str(_paste(tmp_path, "ranks.txt", "\n".join(pieces)))])
    ranks = {e.fields["pid"]: e.fields.get("rank") for e in report.events if e.kind == "process-snapshot"}
    assert ranks == {dumps.roles[f"rank{rank}"]: rank for rank in range(4)}
    hang = _job_hang(report)
    assert hang.fields["suspect_rank"] == 2 and hang.fields["waiting_members"] == "ranks 0-1, 3"


def test_processes_read_from_one_input_are_bounded(dumps: Dumps, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_stacks, "MAX_PROCESSES", 3)
    pasted = _paste(tmp_path, "stacks.txt", "\n".join(dumps.text["py-spy"].values()))
    assert len(_processes(analyze([str(pasted)]).events)) == 3


# --- the dumps of public threads (tests/corpus) ----------------------------------------------------------------


def test_dumps_without_process_lines_are_split_at_each_main_thread() -> None:
    """accelerate#3104: two ranks' py-spy dumps pasted without their Process line; each main thread waits in
    backward while an autograd-engine thread waits in the all-gather: the process waits there."""
    report = analyze([str(CORPUS / "dist-pyspy-zero3-allgather-hang-01" / "ranks.log")])
    processes = _processes(report.events)
    assert sorted(processes) == [40, 42]
    assert [s["tid"] for s in processes[42].fields["stacks"]] == [42, 928, 4076, 4077, 4078, 4079]
    assert processes[42].fields["stacks"][-1]["python"][0] == {
        "function": "all_gather_into_tensor", "file": "torch/distributed/distributed_c10d.py", "line": 2709}
    hang = _job_hang(report)
    assert (hang.fields["waiting_kind"], hang.fields["waiting_where"]) == \
        ("collective", "all_gather_into_tensor (distributed_c10d.py:2709)")
    assert report.findings[0].signature == "hang-all-in-collective"


def test_one_rank_waiting_in_a_collective_is_a_hang_in_communication() -> None:
    """DeepSpeed#7266: the one rank pasted waits in the NCCL broadcast of zero.Init."""
    report = analyze([str(CORPUS / "dist-pyspy-zero-init-broadcast-deadlock-01" / "pyspy.log")])
    assert list(_processes(report.events)) == [474480]
    assert (report.findings[0].signature, report.findings[0].cause) == ("hang-all-in-collective", "nccl-timeout")
    assert _job_hang(report).fields["waiting_where"] == "broadcast (distributed_c10d.py:2772)"


def test_a_thread_header_without_frames_is_no_process(dumps: Dumps, tmp_path: Path) -> None:
    """A paste cut right after a thread's header says nothing of where the process waits."""
    cut = "\n".join(dumps.text["py-spy"][dumps.roles["rank0"]].splitlines()[:4])
    report = analyze([str(_paste(tmp_path, "cut.txt", cut))])
    assert cut.splitlines()[-1].startswith("Thread ") and not _processes(report.events)
    assert not any(e.kind == "job-hang" for e in report.events)


def test_old_py_spy_hex_thread_ids() -> None:
    """fairseq#4816: py-spy before 0.3.10 names a thread by its pthread id in hex; rank 0 waits for a batch."""
    report = analyze([str(CORPUS / "dist-pyspy-rank0-dataloader-hang-01" / "rank0.log")])
    (event,) = _processes(report.events).values()
    (main,) = event.fields["stacks"]
    assert (main["tid"], main["name"]) == (0x7FA6E7C01740, "MainThread")
    assert [f["function"] for f in main["python"][:3]] == ["wait", "get", "__next__"]
    assert not report.findings  # one rank alone: nothing says the others wait for it


def test_a_dump_in_a_markdown_fence_beside_a_gdb_backtrace() -> None:
    """returnn#1811: py-spy's lines inside a fence, then gdb's native frames, which are not py-spy's."""
    report = analyze([str(Path(__file__).parent / "data" / "live_stacks" / "returnn-1811.log")])
    (event,) = _processes(report.events).values()
    (main,) = event.fields["stacks"]
    assert (main["tid"], main["name"], main["frames"]) == (367714, "MainThread", [])
    assert [f["function"] for f in main["python"][:2]] == ["ctc_loss", "ctc_loss"]
    assert main["python"][-1] == {"function": "<module>", "file": "returnn/rnn.py", "line": 11}


def test_a_rank_that_waits_for_no_one_is_suspected_before_one_in_another_collective(tmp_path: Path) -> None:
    """Issue 27: ranks 0 and 1 wait in all_reduce, rank 2 in a subgroup's barrier waiting for rank 3, which runs its
    own loop; "the first group that differs from the majority" would blame rank 2. Dumps in py-spy's layout, each
    line with torchrun's rank prefix."""
    def dump(rank: int, pid: int, state: str, frames: list[str]) -> str:
        lines = [f"Process {pid}: python train.py", "Python v3.11.7 (/usr/bin/python3.11)", "",
                 f'Thread {pid} ({state}): "MainThread"', *(f"    {frame}" for frame in frames)]
        return "\n".join(f"[rank{rank}]: {line}" for line in lines)

    collective = ["all_reduce (torch/distributed/distributed_c10d.py:2501)", "step (train.py:88)",
                  "<module> (train.py:120)"]
    paste = "\n".join([
        dump(0, 3100, "idle", collective), dump(1, 3101, "idle", collective),
        dump(2, 3102, "idle", ["barrier (torch/distributed/distributed_c10d.py:4159)", "sync_pairs (train.py:61)",
                               "step (train.py:90)", "<module> (train.py:120)"]),
        dump(3, 3103, "active", ["collate (train.py:40)", "step (train.py:84)", "<module> (train.py:120)"])])
    report = analyze([str(_paste(tmp_path, "ranks.txt", paste))])
    hang = _job_hang(report)
    assert (hang.fields["waiting_kind"], hang.fields["suspect_rank"]) == ("collective", 3), hang.fields
    assert hang.fields["suspects"].index("rank 3") < hang.fields["suspects"].index("rank 2")
