"""Go's own function table, `.gopclntab`: names and frame sizes of a Go binary stripped of everything else.

`go build -ldflags="-s -w"` (how most Go daemons ship) leaves no `.symtab`, no
DWARF and so no `.debug_frame`; the runtime still carries `.gopclntab`, which
its own tracebacks read. Its layout (Go 1.18 and later: runtime/symtab.go
`pcHeader`, `_func`, and the pc-value tables `pcvalue`/`step` decode):

    pcHeader  magic u32 (0xFFFFFFF0 Go 1.18, 0xFFFFFFF1 Go 1.20+), 2 pad bytes, minLC u8 (the
              instruction quantum: 1 on x86-64, 4 on arm64), ptrSize u8, then nfunc, nfiles,
              textStart, and the offsets from the header of funcnametab, cutab, filetab, pctab, pclntab
    functab   at pclntab: nfunc + 1 pairs (entryoff u32, funcoff u32), entries sorted, offsets from
              textStart and from pclntab
    _func     entryoff u32, nameoff i32 (into funcnametab), args i32, deferreturn u32, pcsp u32 (into pctab), ...

`pcsp` maps each pc of a function to how far its stack pointer has moved below
the one it was called with: the frame size that the unwinder needs where there is
no CFI. Every read is bounded; a table that does not parse is no table.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from .elf import SHT_NOBITS, Read, Section

MAGICS = (0xFFFFFFF0, 0xFFFFFFF1)
"""pcHeader magics of Go 1.18-1.19 and 1.20 on; older layouts (Go 1.2-1.17) are not read."""
HEADER = struct.Struct("<IBBBB8Q")
FUNCTAB_ENTRY = struct.Struct("<II")
FUNC_FIELDS = struct.Struct("<IiiII")
"""The first fields of `_func`: entryoff, nameoff, args, deferreturn, pcsp."""
MAX_TABLE = 256 << 20
"""Bytes of one `.gopclntab` read (a large Go binary's is tens of MiB)."""
MAX_FUNCS = 4_000_000
"""Functions indexed (Kubernetes' biggest binaries have about 200,000)."""
MAX_PCVALUE_STEPS = 100_000
"""Entries of one function's pc-value table decoded: one per change of the value, a few dozen in real code."""


class GoTableError(Exception):
    """The section is not a `.gopclntab` this reader knows."""


@dataclass(frozen=True)
class GoFunction:
    entry: int
    name_offset: int
    pcsp: int


class GoTable:
    """One binary's `.gopclntab`, indexed once: function by pc, name, frame size at a pc."""

    def __init__(self, read: Read, section: Section):
        if section.type == SHT_NOBITS or not HEADER.size < section.size <= MAX_TABLE:
            raise GoTableError("no .gopclntab bytes")
        self._data = read(section.offset, section.size)
        if len(self._data) < HEADER.size:
            raise GoTableError(".gopclntab cut off")
        magic, pad1, pad2, self.quantum, pointer, nfunc, _nfiles, text, names, _cu, _files, pctab, pcln = \
            HEADER.unpack_from(self._data)
        if magic not in MAGICS or pad1 or pad2 or pointer != 8 or self.quantum not in (1, 2, 4):
            raise GoTableError(f".gopclntab header {magic:#x} is not Go 1.18+'s (64-bit)")
        if not 0 < nfunc <= MAX_FUNCS or pcln + FUNCTAB_ENTRY.size * (nfunc + 1) > len(self._data):
            raise GoTableError(".gopclntab function table cut off")
        self.text, self._names, self._pctab, self._pcln = text, names, pctab, pcln
        entries = [FUNCTAB_ENTRY.unpack_from(self._data, pcln + i * FUNCTAB_ENTRY.size) for i in range(nfunc + 1)]
        self._starts = [text + entry for entry, _off in entries]
        self._offsets = [off for _entry, off in entries]

    def __len__(self) -> int:
        return len(self._starts) - 1

    def function(self, vaddr: int) -> GoFunction | None:
        """The function whose [entry, next entry) holds a link-time address."""
        at = bisect.bisect_right(self._starts, vaddr) - 1
        if not 0 <= at < len(self._starts) - 1:
            return None
        fields = self._pcln + self._offsets[at]
        if fields + FUNC_FIELDS.size > len(self._data):
            return None
        entryoff, nameoff, _args, _defer, pcsp = FUNC_FIELDS.unpack_from(self._data, fields)
        return GoFunction(self.text + entryoff, nameoff, pcsp)

    def name(self, function: GoFunction) -> str:
        start = self._names + function.name_offset
        end = self._data.find(b"\0", start, start + 4096)
        return self._data[start:end if end >= 0 else start].decode("utf-8", "replace")

    def rows(self) -> tuple[list[tuple[int, int, int, int]], bytes]:
        """(entry, size, name offset, st_info) per function and the name table they index, shaped as the
        symbol table rows of core/symbols.py (a global function each)."""
        rows = []
        for at in range(len(self._starts) - 1):
            fields = self._pcln + self._offsets[at]
            if fields + FUNC_FIELDS.size > len(self._data):
                continue
            _entry, nameoff, *_ = FUNC_FIELDS.unpack_from(self._data, fields)
            rows.append((self._starts[at], self._starts[at + 1] - self._starts[at], nameoff, 0x12))
        return rows, self._data[self._names:]

    def frame_size(self, function: GoFunction, vaddr: int) -> int | None:
        """pcsp at `vaddr`: bytes the stack pointer is below its value at the call; None when unknown."""
        pos, value, pc = self._pctab + function.pcsp, -1, function.entry
        for step in range(MAX_PCVALUE_STEPS):
            delta, pos = _uvarint(self._data, pos)
            if delta is None or (delta == 0 and step):
                return None
            value += -(delta >> 1) - 1 if delta & 1 else delta >> 1
            advance, pos = _uvarint(self._data, pos)
            if advance is None:
                return None
            pc += advance * self.quantum
            if vaddr < pc:
                return value
        return None


def _uvarint(data: bytes, pos: int) -> tuple[int | None, int]:
    """An unsigned LEB128 (Go's varint) of at most 5 bytes (a uint32)."""
    result = 0
    for shift in range(0, 35, 7):
        if pos >= len(data):
            return None, pos
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
    return None, pos


def go_table(read: Read, sections: dict[str, Section]) -> GoTable | None:
    """The binary's `.gopclntab`, or None when it has none this reader knows."""
    section = sections.get(".gopclntab")
    if section is None:
        return None
    try:
        return GoTable(read, section)
    except GoTableError:
        return None
