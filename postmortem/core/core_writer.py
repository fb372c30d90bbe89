"""Writing a Linux ELF core of a live process from what `live.capture` took: the notes the kernel would write
and only the pages that were read; and finding, in any core, the bytes of its process's argument and environment
strings (`process_strings`), which `collect` blanks the secrets of in its copy as `snapshot` does in its cores.

The layout is the kernel's (fs/binfmt_elf.c elf_core_dump): the ELF header, the program headers (one PT_NOTE,
then a PT_LOAD per mapping), the notes, then the dumped bytes. A mapping whose pages were not taken gets a
PT_LOAD with p_filesz 0, as the kernel writes one for file text it does not dump: readers (this package's,
gdb's) then know the mapping and its permissions and read its bytes from the mapped file. A mapping with some
pages taken is split into runs, each its own PT_LOAD.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from . import elf, notes
from .analysis import MAX_NOTE_BYTES, argv_environ_pointers
from .live import PAGE, Stopped, Vma, page_runs
from .memory import Memory

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
PN_XNUM = 0xFFFF
"""e_phnum's limit; a process with more mappings keeps only the PT_LOADs that hold bytes (see `_loads`)."""
PRPSINFO = "<bbbb4xQIIiiii16s80s"
"""NT_PRPSINFO's elf_prpsinfo (64-bit), pr_psargs last."""
PSARGS_SIZE = 80
PSARGS = struct.calcsize(PRPSINFO) - PSARGS_SIZE
"""Offset of pr_psargs, the last field of NT_PRPSINFO's elf_prpsinfo."""
MAX_STRINGS_BLOCK = 8 << 20
"""Bytes of a core's argument or environment block read at the most: the kernel gives a new process at most a
quarter of its stack limit of them, and never more than 6 MiB (fs/exec.c, bprm_stack_limits)."""


@dataclass(frozen=True)
class ProcessNote:
    """What NT_PRPSINFO says of the process (as `ps` shows it)."""

    pid: int
    ppid: int
    uid: int
    gid: int
    command: str
    arguments: str
    thread_names: dict[int, str] = field(default_factory=dict)
    """Each thread's name (/proc/PID/task/TID/comm), written as NT_THREAD_NAMES: the kernel writes none."""


def _note(name: bytes, kind: int, desc: bytes) -> bytes:
    name += b"\0"
    return (struct.pack("<III", len(name), len(desc), kind) + name + b"\0" * (-len(name) % 4)
            + desc + b"\0" * (-len(desc) % 4))


def _prstatus(status: notes.ThreadStatus, names: tuple[str, ...], pid: int, ppid: int) -> bytes:
    head = struct.pack("<iiih2xQQiiii64x", 0, 0, 0, status.cursig, 0, 0, status.tid, ppid, pid, pid)
    return head + struct.pack(f"<{len(names)}Q", *(status.registers[n] for n in names)) + struct.pack("<i4x", 1)


def _prpsinfo(process: ProcessNote) -> bytes:
    return struct.pack(PRPSINFO, 0, ord("S"), 0, 0, 0, process.uid, process.gid, process.pid,
                       process.ppid, process.pid, process.pid, process.command.encode()[:15],
                       process.arguments.encode("utf-8", "replace")[:PSARGS_SIZE])


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
    if process.thread_names:
        body += _note(notes.THREAD_NAMES_OWNER, notes.NT_THREAD_NAMES, notes.thread_names_desc(process.thread_names))
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


@dataclass(frozen=True)
class StringsBlock:
    """A process's argument or environment strings in a core: their address and bytes (NUL-separated)."""

    address: int
    data: bytes


@dataclass(frozen=True)
class ProcessStrings:
    """Where a core holds its process's command line and environment."""

    segments: list[elf.Segment]
    arguments: StringsBlock
    environment: StringsBlock
    psargs_offset: int | None
    """File offset of NT_PRPSINFO's pr_psargs: the command line's first bytes again, NULs made spaces."""
    psargs: bytes

    def blanked_psargs(self, blanked_arguments: bytes) -> bytes:
        """pr_psargs with `*` wherever the argument block it copies was blanked (the kernel copies it from the
        block as the core is written: byte i of one is byte i of the other)."""
        out = bytearray(self.psargs)
        for at, (before, after) in enumerate(zip(self.arguments.data[: len(out)], blanked_arguments, strict=False)):
            if before != after:
                out[at] = after
        return bytes(out)


def process_strings(read: elf.Read) -> ProcessStrings | None:
    """Where a core holds its process's argument and environment blocks, found as the core reader finds argv and
    the environment (analysis.argv_environ_pointers: below the auxiliary vector on the stack), each from its
    first string to the end of its last, and pr_psargs; None where the core holds no argv. Raises elf.ElfError."""
    segments = elf.segments(read, elf.header(read))
    found: dict[int, elf.Note] = {}
    for seg in [s for s in segments if s.type == elf.PT_NOTE][:elf.MAX_NOTE_SEGMENTS]:
        for note in elf.notes(read(seg.offset, min(seg.filesz, MAX_NOTE_BYTES)), seg.offset,
                              {notes.NT_AUXV, notes.NT_PRPSINFO}):
            found.setdefault(note.type, note)
    auxv = notes.auxv(found[notes.NT_AUXV].desc) if notes.NT_AUXV in found else {}
    memory = Memory(read, segments, [])
    argv, environ = argv_environ_pointers(memory, auxv)
    if not argv:
        return None
    info = found.get(notes.NT_PRPSINFO)
    has_psargs = info is not None and len(info.desc) >= PSARGS + PSARGS_SIZE
    return ProcessStrings(segments, _block(memory, argv), _block(memory, environ),
                          info.offset + PSARGS if info is not None and has_psargs else None,
                          info.desc[PSARGS: PSARGS + PSARGS_SIZE] if info is not None and has_psargs else b"")


def _block(memory: Memory, pointers: list[int]) -> StringsBlock:
    """The bytes from the lowest of `pointers` to the end of the string at the highest, MAX_STRINGS_BLOCK at most."""
    if not pointers:
        return StringsBlock(0, b"")
    start, last = min(pointers), max(pointers)
    if last - start >= MAX_STRINGS_BLOCK:
        return StringsBlock(start, memory.read(start, MAX_STRINGS_BLOCK) or b"")
    tail = memory.cstring(last, MAX_STRINGS_BLOCK - (last - start)) or b""
    return StringsBlock(start, memory.read(start, last - start + len(tail) + 1) or b"")


def file_extents(segments: list[elf.Segment], address: int, length: int) -> Iterator[tuple[int, int, int]]:
    """Where the `length` bytes at `address` lie in the core file: (file offset, offset in those bytes, count) for
    each part that a PT_LOAD's file bytes hold."""
    for seg in segments:
        if seg.type != elf.PT_LOAD:
            continue
        low, high = max(address, seg.vaddr), min(address + length, seg.vaddr + seg.filesz)
        if low < high:
            yield seg.offset + low - seg.vaddr, low - address, high - low
