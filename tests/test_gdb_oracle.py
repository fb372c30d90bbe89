"""The gdb oracle itself (tests/gdb_oracle.py): its parser, its failures, and its script on a live process.

The script must say the same of a process stopped under gdb as of the core gdb writes of it there,
since other tests read live processes (qemu-user behind `target remote`) with it.
"""

from __future__ import annotations

import subprocess

import pytest

from gdb_oracle import GDB, SCRIPT, GdbFrame, gdb_threads, labels, on_the_stack, pairs, parse_frames, run_gdb
from test_core import GCC, PROGRAMS, SRC

PRINTED = """\
warning: a line gdb printed on the way
THREAD 41
FRAME 0x401126 inline a.c:7 store
FRAME 0x401126 normal /src/a.c:9 job::step(int) const
FRAME 0x7f0000001000 sigtramp None None
THREAD 42
FRAME 0x0 normal None None
"""


def test_parse_frames_reads_every_field_and_skips_other_lines():
    threads = parse_frames(PRINTED)
    assert threads == {
        41: [GdbFrame(0x401126, "inline", "store", "a.c:7"), GdbFrame(0x401126, "normal", "job::step(int) const",
                                                                          "/src/a.c:9"),
             GdbFrame(0x7F0000001000, "sigtramp", None, None)],
        42: [GdbFrame(0, "normal", None, None)]}
    assert labels(on_the_stack(threads)) == {41: ["job::step(int) const", "<signal handler called>"], 42: [None]}
    assert pairs(threads, str.upper)[41][0] == (0x401126, "STORE")


@pytest.mark.skipif(GDB is None, reason="gdb not installed")
def test_a_failing_gdb_fails_the_test_with_its_stderr(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="No such file"):
        run_gdb([f"core-file {tmp_path / 'missing'}"])
    assert run_gdb([f"core-file {tmp_path / 'missing'}"], check=False) == ""
    with pytest.raises(pytest.fail.Exception, match="neither a core nor a process was loaded"):
        gdb_threads(tmp_path / "missing", tmp_path / "missing")


@pytest.mark.skipif(GDB is None or GCC is None, reason="gdb or gcc not installed")
def test_the_script_says_the_same_of_a_live_process_and_of_its_core(tmp_path):
    subprocess.run(PROGRAMS["crash"][0].format(src=SRC), shell=True, cwd=tmp_path, check=True, capture_output=True)
    core = tmp_path / "core.live"
    live = parse_frames(run_gdb([f"file {tmp_path / 'crash'}", "run", f"source {SCRIPT}", f"gcore {core}"],
                                cwd=tmp_path))
    [frames] = live.values()
    assert [(f.name, f.where and f.where.rpartition("/")[2]) for f in frames[:3]] == [
        ("lib_c", "libcrash.c:3"), ("lib_b", "libcrash.c:4"), ("lib_a", "libcrash.c:5")]
    assert frames[3].name == "main" and all(f.kind == "normal" for f in frames)
    assert gdb_threads(tmp_path / "crash", core) == live
