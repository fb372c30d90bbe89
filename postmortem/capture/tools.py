"""Running system tools with a time limit: a missing tool, a timeout or a failure is an answer, not an error.

Every child runs in its own session so that a timeout kills what it started
too (`journalctl` pipes to a pager, `nvidia-smi` may hang in the driver).
Output goes to an unnamed temporary file, never to memory, so a tool that
prints gigabytes (a core through `coredumpctl dump`) costs disk, not RAM.

Nothing of the working directory runs: tools are looked up on the absolute
directories of PATH only (postmortem.programs), and every child starts in a
fresh empty directory, so a `json.py` or `torch.py` beside the user cannot be
imported by a probe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

from ..programs import find_program, trusted_path

DEFAULT_TIMEOUT_S = 30.0


@dataclass
class Outcome:
    """What one tool run gave: its output (rewound) and how it ended, in words for the manifest."""

    command: str
    status: str
    """"ok", "exit N", "timeout after N s", "stopped after N s" (a sampler), "not installed", "cannot run: ..."."""
    returncode: int | None
    seconds: float
    output: BinaryIO | None
    errors: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" or self.status.startswith("stopped after")

    def text(self, limit: int = 64 << 20) -> str:
        """The output as text (at most `limit` bytes), "" when there is none."""
        if self.output is None:
            return ""
        self.output.seek(0)
        return self.output.read(limit).decode("utf-8", "replace")


def run_tool(argv: list[str], timeout: float = DEFAULT_TIMEOUT_S, sampler: bool = False,
             env: Mapping[str, str] | None = None) -> Outcome:
    """Run `argv` for at most `timeout` seconds; with `sampler`, running out of time is the plan, not a failure."""
    command = " ".join(argv)
    environ = dict(env or os.environ)
    executable = find_program(argv[0], environ)
    if executable is None:
        return Outcome(command, "not installed", None, 0.0, None, f"{argv[0]} not found on PATH")
    environ["PATH"] = trusted_path(environ.get("PATH"))
    output = tempfile.TemporaryFile()  # noqa: SIM115 - returned in the Outcome, closed here on failure
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="postmortem-probe-") as neutral:
        try:
            child = subprocess.Popen([executable, *argv[1:]], stdin=subprocess.DEVNULL, stdout=output,
                                     stderr=subprocess.PIPE, start_new_session=True, env=environ, cwd=neutral)
        except OSError as exc:
            output.close()
            return Outcome(command, f"cannot run: {exc.strerror or exc}", None, 0.0, None)
        try:
            _, errors = child.communicate(timeout=timeout)
            status = "ok" if child.returncode == 0 else f"exit {child.returncode}"
        except subprocess.TimeoutExpired:
            _stop(child)
            _, errors = child.communicate()
            status = f"{'stopped' if sampler else 'timeout'} after {timeout:g} s"
    output.seek(0)
    return Outcome(command, status, child.returncode, round(time.monotonic() - started, 3), output,
                   errors.decode("utf-8", "replace").strip()[-2000:])


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM to the tool's whole session, SIGKILL if it lingers."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue
