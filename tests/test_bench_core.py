"""benchmarks/bench_core.py: its checks against gdb fail loudly, and a quick run of both cases passes them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_core imports its sibling `common`
import bench_core  # noqa: E402

GDB_ALL = """\
Program terminated with signal SIGSEGV, Segmentation fault.
#0  crash (p=p@entry=0x0) at big.c:7
7\t__attribute__((noinline)) static void crash(volatile int *p) { *p = 1; }

Thread 2 (Thread 0x7f4207f8a6c0 (LWP 12)):
#0  0x00007f420e867df2 in __libc_pause () at ../sysdeps/unix/sysv/linux/pause.c:29
#1  0x00005620b467c199 in idle (arg=<optimized out>) at big.c:6
#2  0x00007f420e89d8ec in clone3 () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f420e791740 (LWP 11)):
#0  crash (p=p@entry=0x0) at big.c:7
#1  0x00005620b467c216 in main (argc=<optimized out>, argv=<optimized out>) at big.c:14
"""


def frame(symbol: str, file: str | None, line: int | None) -> dict:
    return {"symbol": symbol, "file": file, "line": line, "inlined": []}


def report(*threads: dict) -> dict:
    return {"cores": [{"threads": list(threads)}]}


def big_report(main_line: int = 14, idle_file: str | None = "/tmp/big.c") -> dict:
    return report(
        {"tid": 11, "crashed": True, "truncated": None,
         "frames": [frame("crash", "/tmp/big.c", 7), frame("main", "/tmp/big.c", main_line),
                    frame("__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", 58)]},
        {"tid": 12, "crashed": False, "truncated": None,
         "frames": [frame("__libc_pause", "../sysdeps/unix/sysv/linux/pause.c", 29),
                    frame("idle", idle_file, 6 if idle_file else None), frame("clone3", None, None)]})


def test_gdb_lines_per_thread_without_the_loading_banner() -> None:
    assert bench_core.gdb_lines(GDB_ALL) == {
        12: [("__libc_pause", "pause.c", 29), ("idle", "big.c", 6)],
        11: [("crash", "big.c", 7), ("main", "big.c", 14)]}


def test_big_check_accepts_gdb_lines_and_rejects_missing_or_wrong_ones() -> None:
    assert bench_core.check_big(big_report(), GDB_ALL, True).startswith("2 threads, 4 frames with file:line")
    with pytest.raises(SystemExit, match="idle has no source line"):
        bench_core.check_big(big_report(idle_file=None), GDB_ALL, True)
    with pytest.raises(SystemExit, match=r"differ from gdb's in threads \[11\]"):
        bench_core.check_big(big_report(main_line=13), GDB_ALL, True)


def deep_report(depth: int, truncated: str | None = None, main: bool = True) -> dict:
    frames = [frame("down", "/tmp/deep.c", 4)] + [frame("down", "/tmp/deep.c", 5)] * depth
    frames += [frame("main", "/tmp/deep.c", 7)] if main else []
    return report({"tid": 1, "crashed": True, "truncated": truncated, "frames": frames})


def test_deep_check_wants_every_frame_down_to_main() -> None:
    gdb = "".join(f"#{i}  0x1 in down (depth={i}) at deep.c:{4 if i == 0 else 5}\n" for i in range(4))
    gdb += "#4  0x1 in main (argc=2, argv=0x2) at deep.c:7\n"
    check = bench_core.check_deep(3)
    assert check(deep_report(3), gdb, True) == "5 frames, main is frame #4 at deep.c:7, all 5 equal to gdb's"
    assert check(deep_report(3), "", False).endswith("(gdb did not finish)")
    with pytest.raises(SystemExit, match="truncated: the 3 frames"):
        check(deep_report(3, truncated="the 3 frames read per thread are found"), gdb, True)
    with pytest.raises(SystemExit, match="main missing"):
        check(deep_report(3, main=False), gdb, True)
    with pytest.raises(SystemExit, match="frames differ from gdb's from #3"):
        check(deep_report(3), gdb.replace("deep.c:5\n#4", "deep.c:6\n#4"), True)


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("gdb") is None, reason="needs gcc and gdb")
def test_quick_run_matches_gdb(tmp_path: Path) -> None:
    """Both cases, small: the program's frames carry the lines gdb gives, the recursion is read whole."""
    if Path("/proc/sys/kernel/core_pattern").read_text().strip() != "core":
        pytest.skip("core_pattern does not write `core` in the working directory")
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_core.py"), "--megabytes", "64",
                          "--depth", "3000", "--runs", "1", "--gdb-timeout", "60"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "big: 9 threads," in run.stdout and "all equal to gdb's" in run.stdout, run.stdout
    assert "deep: 3,005 frames, main is frame #3,001 at deep.c:7, all 3,002 equal to gdb's" in run.stdout, run.stdout
