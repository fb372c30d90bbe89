"""Items 2, 3, 4 and 9 (output part): what `collect` runs, what it redacts, and where -o may write.

Measured on the development machine (wall, peak RSS of the child): the -o
cases 0.3-1.0 s and 24-68 MiB (refused ones stop before the analysis); collect
beside planted code 2.4 s and 47 MiB; the 32 MiB line 4-5 s and 47 MiB (the old
redactor held it whole, 123 MiB, and ran past 30 s). Bounds: about three times
the time, and 1 GiB of address space (the runs pass at 512 MiB).
"""

from __future__ import annotations

import os
from pathlib import Path

from .harness import GiB, Hostile, Run

XID = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
MARKER = "ran-from-the-working-directory"
"""What a planted module or tool writes; the harness reports it as a file written outside the outputs."""
LONG_LINE = 32 << 20
"""Bytes of one line without a newline: the redactor must cut it, not hold it or scan it whole (a run of `a-`
before `://` made the URL pattern of the old redactor quadratic)."""


def _log(directory: Path, name: str = "dmesg.txt") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(XID)
    return path


def _hard_link_to_input(directory: Path) -> Run:
    os.link(_log(directory), directory / "report.txt")
    return Run(["analyze", "dmesg.txt", "-o", "report.txt"], exit_codes=(2,))


def _output_is_a_file_of_the_input_directory(directory: Path) -> Run:
    _log(directory / "case")
    return Run(["analyze", "case", "-o", "case/dmesg.txt"], exit_codes=(2,))


def _new_output_inside_the_input_directory(directory: Path) -> Run:
    _log(directory / "case")
    return Run(["analyze", "case", "--format", "json", "-o", "case/report.json"], evidence=("gpu-off-bus",),
               absent=("report.json",), outputs=("case/report.json",))


def _unwritable(output: str):
    def build(directory: Path) -> Run:
        _log(directory)
        (directory / "a-directory").mkdir()
        return Run(["analyze", "dmesg.txt", "-o", output], exit_codes=(2,))
    return build


def _collect_beside_planted_code(directory: Path) -> Run:
    for module in ("json", "torch", "pip"):
        (directory / f"{module}.py").write_text(f"open({MARKER!r} + '-{module}', 'w')\n")
    for tool in ("nvidia-smi", "journalctl", "dmesg", "python3", "lspci", "coredumpctl"):
        (directory / tool).write_text(f"#!/bin/sh\ntouch {MARKER}-{tool}\n")
        (directory / tool).chmod(0o755)
    _log(directory)
    return Run(["collect", "--telemetry", "0", "-o", "bundle.tar.gz", "dmesg.txt"], outputs=("bundle.tar.gz",))


def _collect_one_long_line(directory: Path) -> Run:
    with open(directory / "blob.log", "wb") as handle:
        handle.write(b"a-" * (LONG_LINE // 2) + b"://\n")
    return Run(["collect", "--telemetry", "0", "-o", "bundle.tar.gz", "blob.log"], outputs=("bundle.tar.gz",))


PLANTED_PATH = {"PATH": f".{os.pathsep}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
"""A PATH whose "." and empty entries name the working directory, as some shells' profiles leave it."""

CASES = [
    Hostile(4, "output-hard-link-to-an-input", _hard_link_to_input, wall_s=5, address_space=GiB),
    Hostile(4, "output-is-a-file-of-an-input-directory", _output_is_a_file_of_the_input_directory, wall_s=5,
            address_space=GiB),
    Hostile(4, "new-output-inside-an-input-directory", _new_output_inside_the_input_directory, wall_s=5,
            address_space=GiB),
    Hostile(9, "output-dev-full", _unwritable("/dev/full"), wall_s=5, address_space=GiB),
    Hostile(9, "output-in-a-missing-folder", _unwritable("missing-dir/report.txt"), wall_s=5, address_space=GiB),
    Hostile(9, "output-is-a-directory", _unwritable("a-directory"), wall_s=5, address_space=GiB),
    Hostile(2, "collect-beside-planted-modules-and-tools", _collect_beside_planted_code, wall_s=10, address_space=GiB,
            env=PLANTED_PATH),
    Hostile(3, "collect-a-32-mib-line-without-newline", _collect_one_long_line, wall_s=15, address_space=GiB),
]
