"""What both benchmarks need: one measured child process, and postmortem as an install leaves it."""

from __future__ import annotations

import compileall
import os
import subprocess
import time
from pathlib import Path


def measure(command: list[str], output: Path) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (bytes) and exit status of one run.

    Output goes to a real file: GNU grep stops at its first match when its
    output is /dev/null, which would time nothing.
    """
    with open(output, "wb") as sink:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    return wall, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def compile_postmortem() -> None:
    """Write the package's bytecode, as `pip install` does, so that start-up is not timed as compilation
    (an editable install under PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module per run)."""
    import postmortem

    compileall.compile_dir(str(Path(postmortem.__file__).parent), quiet=1)
