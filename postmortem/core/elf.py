"""Just enough ELF64 little-endian to read cores and the modules they name.

Everything is parsed with `struct` from a `read(offset, length)` callable, so
one code path serves a core, a library on disk and an ELF image found in core
memory (the vdso, or the first page of a mapped library). Bad input raises
`ElfError` (never `struct.error` or `IndexError`) so callers turn it into a
diagnostic. pyelftools is not imported on this path: its import alone costs
about as much as reading a whole core this way.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

Read = Callable[[int, int], bytes]
"""read(offset, length) -> up to `length` bytes (fewer at the end of the data)."""

ET_EXEC, ET_DYN, ET_CORE = 2, 3, 4
EM_X86_64, EM_AARCH64 = 62, 183
PT_LOAD, PT_NOTE = 1, 4
SHT_NOBITS = 8
MACHINES = {3: "i386", 40: "arm", 62: "x86-64", 183: "aarch64", 243: "riscv", 190: "cuda", 21: "ppc64"}

MAX_SECTION_NAMES = 1 << 20
"""Bytes of the section-name table read: real ones take a few hundred; a crafted header may claim terabytes."""

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_NHDR = struct.Struct("<III")


class ElfError(Exception):
    """The bytes are not a readable ELF64 little-endian image (or are cut short)."""


@dataclass(frozen=True)
class Segment:
    """A program header: where bytes of the file land in memory."""

    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


@dataclass(frozen=True)
class Section:
    """A section header with its resolved name."""

    name: str
    type: int
    addr: int
    offset: int
    size: int
    flags: int = 0
    """sh_flags: SHF_COMPRESSED (Go's DWARF) says the bytes are a compression header and zlib data."""


@dataclass(frozen=True)
class Note:
    """One ELF note: owner name, type and descriptor bytes, with the descriptor's file offset."""

    name: bytes
    type: int
    desc: bytes
    offset: int


@dataclass(frozen=True)
class Header:
    """The fields of the ELF header this package uses."""

    elf_class: int
    data: int
    type: int
    machine: int
    phoff: int
    shoff: int
    phnum: int
    shnum: int
    shstrndx: int
    entry: int = 0

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine {self.machine}")


def read_exact(read: Read, offset: int, length: int, what: str) -> bytes:
    """Bytes that must all be there; a short read names what was cut off."""
    data = read(offset, length)
    if len(data) != length:
        raise ElfError(f"{what} at offset {offset:#x} is cut off ({len(data)} of {length} bytes)")
    return data


def header(read: Read) -> Header:
    """The ELF header; only 64-bit little-endian images are accepted."""
    raw = read_exact(read, 0, _EHDR.size, "ELF header")
    ident, etype, machine, _v, entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize, shnum, shstrndx = \
        _EHDR.unpack(raw)
    if ident[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    result = Header(ident[4], ident[5], etype, machine, phoff, shoff, phnum, shnum, shstrndx, entry)
    if ident[4] != 2 or ident[5] != 1:
        raise ElfError(f"{'32-bit' if ident[4] == 1 else 'big-endian'} ELF ({result.machine_name}): only 64-bit "
                       "little-endian files are read")
    if (phnum and phentsize != _PHDR.size) or (shnum and shentsize != _SHDR.size):
        raise ElfError("unexpected program or section header size")
    return result


def segments(read: Read, head: Header) -> list[Segment]:
    """All program headers (a core's PT_LOADs and PT_NOTEs)."""
    raw = read_exact(read, head.phoff, head.phnum * _PHDR.size, "program headers")
    return [Segment(t, f, off, va, fs, ms) for t, f, off, va, _pa, fs, ms, _al in _PHDR.iter_unpack(raw)]


def sections(read: Read, head: Header) -> dict[str, Section]:
    """Section headers by name (first of each name); empty when the file has none."""
    if not head.shnum or not head.shoff:
        return {}
    raw = read_exact(read, head.shoff, head.shnum * _SHDR.size, "section headers")
    rows = list(_SHDR.iter_unpack(raw))
    if head.shstrndx >= len(rows):
        return {}
    names = read(rows[head.shstrndx][4], min(rows[head.shstrndx][5], MAX_SECTION_NAMES))
    found: dict[str, Section] = {}
    for name_at, stype, flags, addr, offset, size, _link, _info, _align, _entsize in rows:
        end = names.find(b"\0", name_at)
        name = names[name_at:end if end >= 0 else None].decode("ascii", "replace")
        found.setdefault(name, Section(name, stype, addr, offset, size, flags))
    return found


def notes(data: bytes, base: int = 0, types: Collection[int] | None = None) -> Iterator[Note]:
    """The notes in a PT_NOTE/SHT_NOTE blob (4-byte aligned); stops at the first broken header.

    With `types`, only notes of those types are yielded (the others' bytes are never copied).
    """
    at = 0
    while at + _NHDR.size <= len(data):
        namesz, descsz, ntype = _NHDR.unpack_from(data, at)
        name_at = at + _NHDR.size
        desc_at = name_at + _align4(namesz)
        end = desc_at + _align4(descsz)
        if desc_at + descsz > len(data):
            return
        if types is None or ntype in types:
            yield Note(data[name_at:name_at + namesz].rstrip(b"\0"), ntype, data[desc_at:desc_at + descsz],
                       base + desc_at)
        at = end


def _align4(n: int) -> int:
    return (n + 3) & ~3


MAX_NOTE_SEGMENT = 1 << 20
"""Bytes of one PT_NOTE segment of a module searched for its build-id (real ones hold a few hundred)."""
MAX_NOTE_SEGMENTS = 8
"""PT_NOTE segments of a module searched: binaries have one to three, a crafted one may have 65,535."""
NT_GNU_BUILD_ID = 3


def build_id(read: Read, head: Header, segs: list[Segment],
             to_read: Callable[[Segment], tuple[int, int]]) -> str | None:
    """NT_GNU_BUILD_ID as hex from the PT_NOTE segments; `to_read` says where each segment's bytes are."""
    for seg in [s for s in segs if s.type == PT_NOTE and s.filesz <= MAX_NOTE_SEGMENT][:MAX_NOTE_SEGMENTS]:
        where, size = to_read(seg)
        for note in notes(read(where, size), types=(NT_GNU_BUILD_ID,)):
            if note.name == b"GNU":
                return note.desc.hex()
    return None
