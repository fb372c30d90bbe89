"""The hung programs of tests/hung.py stand where they say, the oracles see them there, and nothing outlives a test."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from gdb_oracle import on_the_stack
from hung import (
    PROGRAMS,
    Busy,
    Hung,
    PythonThreads,
    barrier_deadlock,
    blocked_in_c,
    blocked_in_ctypes,
    busy_threads,
    counts,
    frames_text,
    gdb_attach_bt,
    group_alive,
    hang_line,
    hung_process,
    keeps_running,
    py_spy_dump,
    pystack_remote,
    python_frame_differences,
    python_lock_deadlock,
    run_tool,
    stopped_tasks,
    task,
    torch_gloo_hang,
)
from postmortem.core.python_stack import PythonFrame

ORACLES = [py_spy_dump, pystack_remote]
Oracle = Callable[[int], PythonThreads]


def at(program: Path, function: str, marker: str) -> PythonFrame:
    """The frame of `function` standing at the line of `program` marked `HANG marker`."""
    return PythonFrame(str(program), function, hang_line(program, marker))


@pytest.fixture
def deadlock() -> Iterator[Hung]:
    with python_lock_deadlock() as hung:
        yield hung


@pytest.fixture
def in_ctypes() -> Iterator[Hung]:
    with blocked_in_ctypes() as hung:
        yield hung


@pytest.fixture
def barrier() -> Iterator[Hung]:
    with barrier_deadlock() as hung:
        yield hung


@pytest.fixture
def gloo() -> Iterator[Hung]:
    with torch_gloo_hang() as hung:
        yield hung


@pytest.fixture
def busy() -> Iterator[Busy]:
    with busy_threads() as busy:
        yield busy


@pytest.mark.parametrize("oracle", ORACLES)
def test_both_deadlocked_threads_wait_on_the_other_lock(deadlock: Hung, oracle: Oracle) -> None:
    threads = oracle(deadlock.pid)
    assert sorted(threads) == sorted(deadlock.roles.values())
    program = deadlock.program
    assert threads[deadlock.roles["a_then_b"]][0] == at(program, "a_then_b", "a_then_b")
    assert threads[deadlock.roles["b_then_a"]][0] == at(program, "b_then_a", "b_then_a")
    main = threads[deadlock.roles["main"]]
    assert main[-1] == at(program, "<module>", "main") and main[0].function == "_wait_for_tstate_lock"


@pytest.mark.parametrize("oracle", ORACLES)
def test_the_ctypes_call_is_below_two_python_frames(in_ctypes: Hung, oracle: Oracle) -> None:
    program = in_ctypes.program
    assert oracle(in_ctypes.pid) == {in_ctypes.pid: (at(program, "wait_for_signal", "pause"),
                                                     at(program, "serve", "serve"), at(program, "<module>", "module"))}


def test_gdb_sees_pause_under_the_interpreter(in_ctypes: Hung) -> None:
    [frames] = on_the_stack(gdb_attach_bt(in_ctypes.pid)).values()
    assert frames[0].name is not None and "pause" in frames[0].name
    assert any(f.name == "ffi_call" for f in frames), [f.name for f in frames]
    assert not stopped_tasks(in_ctypes.pid)


def test_gdb_sees_read_under_wait_for_input_under_main(tmp_path: Path) -> None:
    with blocked_in_c(tmp_path) as hung:
        threads = on_the_stack(gdb_attach_bt(hung.pid))
        assert not stopped_tasks(hung.pid), "gdb left the process stopped"
    [frames] = threads.values()
    assert frames[0].name is not None and frames[0].name.endswith("read")
    source = hung.program.name
    assert [(f.name, f.where) for f in frames[1:3]] == [
        ("wait_for_input", f"{PROGRAMS / source}:{hang_line(hung.program, 'read')}"),
        ("main", f"{PROGRAMS / source}:{hang_line(hung.program, 'main')}")]
    assert group_alive(hung.pid) == []


@pytest.mark.parametrize("oracle", ORACLES)
def test_three_ranks_wait_in_the_barrier_and_rank_2_sleeps(barrier: Hung, oracle: Oracle) -> None:
    ranks = {rank: barrier.roles[f"rank{rank}"] for rank in range(4)}
    assert set(ranks.values()) <= set(barrier.children)
    program = barrier.program
    for rank, pid in ranks.items():
        [frames] = oracle(pid).values()
        if rank == 2:
            assert frames[:2] == (at(program, "never_arrives", "sleeper"), at(program, "worker", "never_arrives"))
            continue
        assert at(program, "worker", "waiter") in frames, frames_text(frames)
        waiting = frames.index(at(program, "worker", "waiter"))
        assert (Path(frames[waiting - 1].file).name, frames[waiting - 1].function) == ("threading.py", "wait")


@pytest.mark.parametrize("oracle", ORACLES)
def test_three_gloo_ranks_wait_in_all_reduce_and_rank_2_sleeps(gloo: Hung, oracle: Oracle) -> None:
    program = gloo.program
    for rank in range(4):
        frames = oracle(gloo.roles[f"rank{rank}"])[gloo.roles[f"rank{rank}"]]
        if rank == 2:
            assert frames[:2] == (at(program, "skips_the_collective", "skipper"), at(program, "rank_main", "skips"))
        else:
            assert frames[0].function == "all_reduce" and at(program, "rank_main", "all_reduce") in frames


@pytest.mark.parametrize("program", [python_lock_deadlock, blocked_in_ctypes, barrier_deadlock, torch_gloo_hang])
def test_py_spy_and_pystack_agree_on_every_thread(program: Callable[[], AbstractContextManager[Hung]]) -> None:
    with program() as hung:
        for pid in (hung.pid, *hung.children):
            spy, stack = py_spy_dump(pid), pystack_remote(pid)
            assert spy and all(spy.values())
            assert python_frame_differences(spy, stack) == []
    assert group_alive(hung.pid) == []


def test_python_frame_differences_names_each_thread_that_differs() -> None:
    here, there = PythonFrame("/a.py", "f", 1), PythonFrame("/a.py", "f", 2)
    assert python_frame_differences({1: (here,), 2: (here,)}, {1: (here,), 2: (here,)}) == []
    assert python_frame_differences({1: (here,), 2: (here,), 3: ()}, {1: (there,), 2: (here,), 4: (here,)}) == [
        "thread 3: only in the first", "thread 4: only in the second", "thread 1: f (a.py:1) != f (a.py:2)"]


@pytest.mark.parametrize("program", [python_lock_deadlock, blocked_in_ctypes, barrier_deadlock, busy_threads])
def test_teardown_leaves_no_process_even_when_the_test_fails(program: Callable[[], AbstractContextManager[object]]
                                                             ) -> None:
    with pytest.raises(RuntimeError, match="the test failed"), program() as started:
        assert isinstance(started, (Busy, Hung))
        hung = started.hung if isinstance(started, Busy) else started
        assert group_alive(hung.pid)
        raise RuntimeError("the test failed")
    assert group_alive(hung.pid) == []
    assert all((t := task(pid)) is None or t.state == "Z" for pid in (hung.pid, *hung.children, *hung.roles.values()))


def test_busy_threads_spin_each_in_its_own_function(busy: Busy) -> None:
    roles = busy.hung.roles
    threads = py_spy_dump(busy.hung.pid)
    assert sorted(threads) == sorted(roles.values())
    assert all(threads[roles[f"spin_{i}"]][0].function == f"spin_{i}" for i in range(10))
    assert len(counts(busy)) == 10 and keeps_running(busy)


def test_keeps_running_sees_a_stopped_process(busy: Busy) -> None:
    os.kill(busy.hung.pid, signal.SIGSTOP)
    try:
        assert not keeps_running(busy, seconds=1.0)
        assert stopped_tasks(busy.hung.pid)
    finally:
        os.kill(busy.hung.pid, signal.SIGCONT)
    assert keeps_running(busy)


def test_a_program_that_exits_before_it_is_ready_fails_the_test_with_its_output() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"exited with \[\] of \['main'\] ready:\nno luck"), \
            hung_process(PROGRAMS / "ready.py", [sys.executable, "-c", "print('no luck')"], ("main",)):
        pass


def test_a_missing_tool_skips_with_its_name() -> None:
    with pytest.raises(pytest.skip.Exception, match="py-spy not installed"):
        run_tool(None, "py-spy", ["dump"])


def test_a_failing_tool_fails_the_test() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"false failed \(exit 1\)"):
        run_tool("/bin/false", "false", [])


def test_keeps_running_sees_counts_that_stand_still(busy: Busy, tmp_path: Path) -> None:
    frozen = tmp_path / "counts"
    frozen.write_text(busy.counts.read_text())
    assert not keeps_running(Busy(busy.hung, frozen), seconds=0.2)
