"""Writing a Linux ELF core of a live process from what `live.capture` took: the notes the kernel would write
and only the pages that were read.

The layout is the kernel's (fs/binfmt_elf.c elf_core_dump): the ELF header, the program headers (one PT_NOTE,
then a PT_LOAD per mapping), the notes, then the dumped bytes. A mapping whose pages were not taken gets a
PT_LOAD with p_filesz 0, as the kernel writes one for file text it does not dump: readers (this package's,
gdb's) then know the mapping and its permissions and read its bytes from the mapped file. A mapping with some
pages taken is split into runs, each its own PT_LOAD.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from . import elf, notes
from .live import PAGE, Stopped, Vma, page_runs

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
PN_XNUM = 0xFFFF
"""e_phnum's limit; a process with more mappings keeps only the PT_LOADs that hold bytes (see `_loads`)."""


@dataclass(frozen=True)
class ProcessNote:
    """What NT_PRPSINFO says of the process (as `ps` shows it)."""

    pid: int
    ppid: int
    uid: int
    gid: int
    command: str
    arguments: str


def _note(name: bytes, kind: int, desc: bytes) -> bytes:
    name += b"\0"
    return (struct.pack("<III", len(name), len(desc), kind) + name + b"\0" * (-len(name) % 4)
            + desc + b"\0" * (-len(desc) % 4))


def _prstatus(status: notes.ThreadStatus, names: tuple[str, ...], pid: int, ppid: int) -> bytes:
    head = struct.pack("<iiih2xQQiiii64x", 0, 0, 0, status.cursig, 0, 0, status.tid, ppid, pid, pid)
    return head + struct.pack(f"<{len(names)}Q", *(status.registers[n] for n in names)) + struct.pack("<i4x", 1)


def _prpsinfo(process: ProcessNote) -> bytes:
    return struct.pack("<bbbb4xQIIiiii16s80s", 0, ord("S"), 0, 0, 0, process.uid, process.gid, process.pid,
                       process.ppid, process.pid, process.pid, process.command.encode()[:15],
                       process.arguments.encode("utf-8", "replace")[:80])


def _nt_file(vmas: list[Vma]) -> bytes:
    files = [v for v in vmas if v.file_backed]
    table = b"".join(struct.pack("<QQQ", v.start, v.end, v.offset // PAGE) for v in files)
    return struct.pack("<QQ", len(files), PAGE) + table + b"".join(v.path.encode("utf-8", "surrogateescape") + b"\0"
                                                                    for v in files)


def _loads(vmas: list[Vma], pages: dict[int, bytes]) -> Iterator[tuple[int, int, int, bytes]]:
    """(vaddr, memsz, flags, bytes) for every mapping: runs of kept pages hold their bytes, the rest none."""
    runs = list(page_runs(pages))
    for vma in vmas:
        at = vma.start
        for start, data in runs:
            end = start + len(data)
            if end <= vma.start or start >= vma.end:
                continue
            start, data = max(start, vma.start), data[max(0, vma.start - start): len(data) - max(0, end - vma.end)]
            if start > at:
                yield at, start - at, vma.flags, b""
            yield start, len(data), vma.flags, data
            at = start + len(data)
        if at < vma.end:
            yield at, vma.end - at, vma.flags, b""


def write(out: BinaryIO, taken: Stopped, process: ProcessNote) -> int:
    """Writes the core; returns its size in bytes."""
    names = taken.arch.prstatus_registers
    body = b"".join(_note(b"CORE", notes.NT_PRSTATUS, _prstatus(t, names, taken.pid, process.ppid))
                    for t in taken.threads)
    body += _note(b"CORE", notes.NT_PRPSINFO, _prpsinfo(process))
    body += _note(b"CORE", notes.NT_AUXV, taken.auxv)
    body += _note(b"CORE", notes.NT_FILE, _nt_file(taken.vmas))
    loads = list(_loads(taken.vmas, taken.pages))
    if len(loads) + 1 >= PN_XNUM:
        loads = [load for load in loads if load[3]][: PN_XNUM - 2]
    count = len(loads) + 1
    offset = EHDR.size + PHDR.size * count
    headers = [PHDR.pack(elf.PT_NOTE, 0, offset, 0, 0, len(body), 0, 1)]
    at = offset + len(body)
    at += -at % PAGE
    data_start = at
    for vaddr, memsz, flags, data in loads:
        headers.append(PHDR.pack(elf.PT_LOAD, flags, at if data else data_start, vaddr, 0, len(data), memsz, PAGE))
        at += len(data)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    out.write(EHDR.pack(ident, elf.ET_CORE, taken.machine, 1, 0, EHDR.size, 0, 0, EHDR.size, PHDR.size, count,
                        64, 0, 0))
    out.write(b"".join(headers))
    out.write(body)
    out.write(b"\0" * (data_start - offset - len(body)))
    for _, _, _, data in loads:
        out.write(data)
    return at
