"""Items 9 and 11: every report format renders any input's times, and no input drives the analyst's display."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from .harness import Hostile, Run

XID = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
EXTREME_TIMES = (
    "9999-12-31T23:59:59.999999-23:59 worker4 kernel: NVRM: Xid (PCI:0000:07:00): 13, Graphics Exception\n"
    "0001-01-01T00:00:00+23:59 worker4 kernel: NVRM: Xid (PCI:0000:07:00): 13, Graphics Exception\n"
    "Dec 31 23:59:59 worker4 kernel: [300000000000.000000] NVRM: Xid (PCI:0000:07:00): 48, DBE\n"
    "[99999999999999.999] NVRM: Xid (PCI:0000:07:00): 31, MMU Fault\n"
    "2024-01-01T00:00:00+14:00 worker4 kernel: [ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
)
FORMATS = ("text", "json", "markdown", "html")


def _extreme_times(fmt: str, directory: Path) -> Run:
    (directory / "kern.log").write_text(EXTREME_TIMES)
    return Run(["analyze", "kern.log", "--format", fmt], evidence=("gpu-off-bus",))


def _escapes_in_log(directory: Path) -> Run:
    (directory / "dmesg.txt").write_text(
        "\x1b]0;owned title\x07\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x1b[2J\u202egnp.exe\n"
        + XID.rstrip("\n") + " \x1b]0;title\x07\u202e\n")
    return Run(["analyze", "dmesg.txt", "--no-color"], evidence=("Xid", "79", "\\x1b", "\\u202e"),
               absent=("\x1b", "\u202e", "\x07"))


CASES = [
    *(Hostile(9, f"extreme-times-{fmt}", partial(_extreme_times, fmt), wall_s=30, address_space=1 << 30)
      for fmt in FORMATS),
    Hostile(11, "escapes-in-text-report", _escapes_in_log, wall_s=30, address_space=1 << 30),
]
