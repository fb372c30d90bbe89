"""What the benchmarks share: one measured child process, postmortem as an install leaves it, grep's literals."""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


def measure(command: list[str], output: Path, timeout: float | None = None) -> tuple[float, int, int]:
    """Wall seconds, peak RSS (bytes) and exit status of one run.

    Output goes to a real file: GNU grep stops at its first match when its
    output is /dev/null, which would time nothing. A run past `timeout`
    seconds is killed (status -9), so a slow tool is bounded, not waited for.
    """
    with open(output, "wb") as sink:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, child.kill) if timeout is not None else None
        if timer:
            timer.start()
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        if timer:
            timer.cancel()
    return wall, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def compile_postmortem() -> None:
    """Write the package's bytecode, as `pip install` does, so that start-up is not timed as compilation
    (an editable install under PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module per run)."""
    import postmortem

    compileall.compile_dir(str(Path(postmortem.__file__).parent), quiet=1)


def anchors() -> list[bytes]:
    """Every literal postmortem's prefilter scans for: grep gets the same work (an anchor found in any letter case
    as its lower-case text: `grep -F` has no per-literal case flag)."""
    from postmortem.prefilter import searched
    from postmortem.sources import source_cards

    return sorted({searched(a)[0] for source in source_cards() for a in source.anchors})


@dataclass(frozen=True)
class Bench:
    """The two programs compared, a scratch folder, and the file of literals grep is given."""

    grep: str
    postmortem: str
    workdir: Path
    literals: Path


def prepare(prefix: str) -> Bench:
    """Compile postmortem, find both programs, make the scratch folder and write grep's literals into it."""
    compile_postmortem()
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    literals = workdir / "literals.txt"
    literals.write_bytes(b"\n".join(anchors()) + b"\n")
    postmortem = shutil.which("postmortem") or str(Path(sys.executable).parent / "postmortem")
    return Bench(shutil.which("grep") or "grep", postmortem, workdir, literals)
