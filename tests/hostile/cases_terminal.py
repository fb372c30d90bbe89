"""Round 3, item 9: no string from a target or an input reaches the terminal raw, from any command.

Function and file names of a Python traceback, an NVRM line with an OSC 8 link, archive member names, case folder
names, a foreign store's table names and input file names hold a title change (ESC ] 0 ;), a screen clear
(ESC [ 2 J), C1 controls (U+009B, and the raw byte 0x9B of a name that is not UTF-8), a bidi override, BEL,
backspace and carriage return. Every command that shows them must show them escaped (`\\x1b`) and still show the
evidence; tests/test_cli.py runs these cases again and checks every byte of stdout and stderr. Measured on a
shared 2-core VM: 0.2-0.7 s each, under 50 MiB. Bounds: 15 s (the machine's load varies), 1 GiB of address space.
"""

from __future__ import annotations

import io
import os
import sqlite3
import tarfile
from pathlib import Path

from .harness import GiB, Hostile, Run

NAME = os.fsdecode(b"\x1b]0;pwn\x07\x1b[2J\x9b\xe2\x80\xae\x08\rlog.txt")
"""A file or folder name with a title change, a screen clear, the raw byte 0x9B, U+202E, backspace and CR."""
LOG = (
    'Traceback (most recent call last):\n'
    '  File "/srv/\x1b]0;title\x07train\x1b[2J\u009b.py", line 3, in \x1b]0;fn\x07main\u009b\n'
    '    x = torch.zeros(1).cuda()\n'
    'RuntimeError: CUDA error: an illegal memory access was encountered\n'
    '[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, '
    '\x1b]8;;http://evil.example/\x1b\\GPU has fallen off the bus.\x1b]8;;\x1b\\ \x00\x07\b\u202e\n'
)
RAW = ("\x1b", "\x07", "\u009b", "\u202e", "\x00", "\b")
"""What must not reach stdout or stderr as it is (tests/test_cli.py checks the raw 0x9B byte and every control)."""
SHOWN = ("\\x1b]0;", "Xid")
"""The evidence, escaped: still shown."""


def _case_folder(directory: Path) -> Path:
    folder = directory / "case"
    folder.mkdir()
    (folder / NAME).write_text(LOG)
    return folder


def _analyze_folder(directory: Path) -> Run:
    _case_folder(directory)
    return Run(["analyze", "case"], evidence=(*SHOWN, "log.txt", "main\\x9b"), absent=RAW)


def _analyze_archive(directory: Path) -> Run:
    data = LOG.encode()
    with tarfile.open(directory / "bundle.tar", "w", format=tarfile.GNU_FORMAT) as archive:
        info = tarfile.TarInfo(f"logs/{NAME}")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return Run(["analyze", "bundle.tar"], evidence=(*SHOWN, "bundle.tar!/logs/"), absent=RAW)


def _explain_lines(directory: Path) -> Run:
    lines = LOG.split("\n", 1)[1]  # not the traceback's first line: the harness takes it for one of ours
    return Run(["explain", "-"], evidence=("\\x1b]0;title", "Xid"), absent=RAW, exit_codes=(0, 1),
               stdin=lines.encode())


def _explain_argument(directory: Path) -> Run:
    return Run(["explain", "Xid 79 \x1b]0;owned\x07\u009b\x1b[2J"], evidence=("\\x1b]0;owned",), absent=RAW,
               exit_codes=(0, 1))


def _explain_match(directory: Path) -> Run:
    _case_folder(directory)
    return Run(["signatures", "explain-match", "xid-79", "case"], evidence=("\\x1b]0;pwn", "fires"), absent=RAW)


def _gpu_arch(directory: Path) -> Run:
    """A wheel whose real CUDA library is stored under a hostile member name (a zip name is UTF-8: U+009B)."""
    import zipfile

    library = (Path(__file__).parent.parent / "data" / "fatbin" / "libk_multi.so").read_bytes()
    with zipfile.ZipFile(directory / "torch-0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("torch/lib/\x1b]0;pwn\x07\x1b[2J\u009b\u202e\b\rlibk.so", library)
    return Run(["gpu-arch", "--verbose", "torch-0-py3-none-any.whl"], evidence=("\\x1b]0;pwn", "libk.so", "sm_"),
               absent=RAW)


def _missing_input(directory: Path) -> Run:
    return Run(["analyze", NAME], absent=RAW, exit_codes=(2,))


def _scan_and_buckets(directory: Path) -> Run:
    from postmortem.fleet.scan import scan

    (directory / "fleet" / NAME).mkdir(parents=True)
    (directory / "fleet" / NAME / "dmesg.txt").write_text(LOG)
    scan(directory / "fleet", directory / "s.sqlite", jobs=1)
    return Run(["buckets", "--db", "s.sqlite", "--cases", "gpu-off-bus / xid-79"], evidence=("\\x1b]0;pwn",),
               absent=RAW, outputs=("<stdout>", "s.sqlite-wal", "s.sqlite-shm"))  # the report is stdout


def _scan(directory: Path) -> Run:
    _case_folder(directory)
    (directory / "case" / "broken.gz").write_bytes(b"\x1f\x8b\x08\x00junk")
    return Run(["scan", "case", "--db", "s.sqlite", "-j", "1"], evidence=("2 case(s) found",), absent=RAW,
               outputs=("<stdout>", "s.sqlite"))  # no such file: the report is stdout


def _foreign_store(directory: Path) -> Run:
    with sqlite3.connect(directory / "other.sqlite") as conn:
        conn.execute('CREATE TABLE "\x1b]0;owned\x07\x1b[2Jusers\u009b" (id INTEGER)')
    conn.close()
    return Run(["buckets", "--db", "other.sqlite"], absent=RAW, exit_codes=(2,))


CASES = [
    Hostile(9, f"terminal-{build.__name__.strip('_')}", build, wall_s=15, address_space=GiB)
    for build in (_analyze_folder, _analyze_archive, _explain_lines, _explain_argument, _explain_match, _gpu_arch,
                  _missing_input, _scan_and_buckets, _scan, _foreign_store)
]
