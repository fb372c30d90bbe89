"""Run one hostile case through `postmortem` in a child process and check what must never happen.

A case builds its inputs in a fresh directory and names the command line. The
child runs with an address-space limit (RLIMIT_AS) and a wall-clock limit, in
the case directory as working directory. Afterwards: the exit status is the expected one,
no Python traceback was printed, the evidence the case plants is in the
report, no input changed, and nothing was written outside the declared outputs.
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

GiB = 1024**3
COMMAND = str(Path(sys.executable).parent / "postmortem")
"""The installed console script (not `python -m`, which would import from the working directory)."""


@dataclass(frozen=True)
class Run:
    """What a built case runs and expects: arguments after `postmortem`, relative to the case directory."""

    args: list[str]
    evidence: tuple[str, ...] = ()
    """Strings the report (stdout, or the output file) must hold: the real evidence still found."""
    absent: tuple[str, ...] = ()
    """Strings the report must not hold (a planted secret, an escape sequence)."""
    exit_codes: tuple[int, ...] = (0,)
    outputs: tuple[str, ...] = ()
    """Files the run may create (relative to the case directory); the first is the report when given."""
    stdin: bytes | None = None


@dataclass(frozen=True)
class Hostile:
    """One crafted input: which issue item it attacks, how to build it, and its bounds."""

    item: int
    name: str
    build: Callable[[Path], Run]
    wall_s: float = 60.0
    address_space: int = 2 * GiB
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What one run did, for the assertion message and for the measured table in benchmarks."""

    returncode: int
    wall_s: float
    peak_rss_kib: int
    stdout: bytes
    stderr: bytes
    report: bytes
    problems: list[str]


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `root`: size, mtime and a digest of the head and tail (inputs may be huge and sparse)."""
    seen: dict[str, tuple[int, int, str]] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            digest = hashlib.sha256()
            if path.is_file() and not path.is_symlink():
                with open(path, "rb") as handle:
                    digest.update(handle.read(1 << 20))
                    if st.st_size > 2 << 20:
                        handle.seek(-(1 << 20), os.SEEK_END)
                        digest.update(handle.read())
            seen[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, digest.hexdigest())
    return seen


def run_case(case: Hostile, directory: Path) -> Outcome:
    """Build `case` under `directory`, run it bounded, and list every rule it broke."""
    directory.mkdir(parents=True, exist_ok=True)
    run = case.build(directory)
    before = snapshot(directory)

    def bound() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (case.address_space, case.address_space))

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1", **case.env}
    problems: list[str] = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        inp.write(run.stdin or b"")
        inp.seek(0)
        started = time.monotonic()
        child = subprocess.Popen([COMMAND, *run.args], cwd=directory, env=env,
                                 stdin=inp, stdout=out, stderr=err, preexec_fn=bound)  # noqa: PLW1509 - single-threaded harness
        returncode, peak = _wait(child, case.wall_s, problems)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if returncode not in run.exit_codes:
        problems.append(f"exit {returncode}, expected {run.exit_codes}")
    if b"Traceback (most recent call last)" in stdout + stderr:
        problems.append("a Python traceback was printed")
    if b"MemoryError" in stderr:
        problems.append("ran out of memory")
    report = stdout
    if run.outputs and (directory / run.outputs[0]).is_file():
        report = (directory / run.outputs[0]).read_bytes()
    for text in run.evidence:
        if text.encode() not in report:
            problems.append(f"evidence {text!r} not in the report")
    for text in run.absent:
        if text.encode() in report + stderr:
            problems.append(f"{text!r} leaked into the report")
    after = snapshot(directory)
    for name, state in before.items():
        if after.get(name) != state:
            problems.append(f"input {name} changed or vanished")
    allowed = set(run.outputs)
    for name in after.keys() - before.keys():
        if name not in allowed:
            problems.append(f"wrote {name}, which is not an output")
    return Outcome(returncode, wall, peak, stdout, stderr, report, problems)


def _wait(child: subprocess.Popen, limit: float, problems: list[str]) -> tuple[int, int]:
    """Wait for the child alone (wait4: its own peak RSS in KiB, not the test process's); kill it past `limit`."""
    deadline = time.monotonic() + limit
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            return child.returncode, usage.ru_maxrss
        if time.monotonic() > deadline:
            problems.append(f"ran past {limit} s")
            child.kill()
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            return child.returncode, usage.ru_maxrss
        time.sleep(0.02)
