"""The crashed process's memory, read by address.

Dumped pages come from the core's PT_LOAD segments (bisect over their start
addresses, within p_filesz). Pages the kernel did not dump -- file-backed
text, read-only data, .eh_frame -- come from the file named in NT_FILE at
`file_offset + (addr - start)`, only when that file was checked to be the one
the process mapped (modules.memory_source): the core names its paths, and a
path such as /proc/self/environ must not fill the dead process's stack with
the analysing process's environment.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from .elf import PT_LOAD, Read, Segment
from .notes import FileMapping

PF_X = 1

class Memory:
    """Reads of the dead process's address space; None where nothing is known."""

    def __init__(self, read_core: Read, loads: list[Segment], files: list[FileMapping],
                 sources: Mapping[str, Read] | None = None):
        """`sources`: the reads of checked files, by the NT_FILE path they stand in for."""
        self._read_core = read_core
        self._loads = sorted((s for s in loads if s.type == PT_LOAD and s.memsz), key=lambda s: s.vaddr)
        self._starts = [s.vaddr for s in self._loads]
        self._files = sorted(files, key=lambda f: f.start)
        self._file_starts = [f.start for f in self._files]
        self._sources = sources or {}

    def segment(self, addr: int) -> Segment | None:
        """The PT_LOAD whose memory range holds `addr`."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._loads[i].vaddr + self._loads[i].memsz:
            return self._loads[i]
        return None

    def mapping(self, addr: int) -> FileMapping | None:
        """The NT_FILE entry whose range holds `addr`."""
        i = bisect.bisect_right(self._file_starts, addr) - 1
        if i >= 0 and addr < self._files[i].end:
            return self._files[i]
        return None

    def executable(self, addr: int) -> bool:
        """True when `addr` lies in a mapping the process could execute (the PT_LOAD's PF_X flag)."""
        seg = self.segment(addr)
        return seg is not None and bool(seg.flags & PF_X)

    def read(self, addr: int, length: int) -> bytes | None:
        """Up to `length` bytes at `addr` (shorter where memory ends); None when the first byte is unknown."""
        out = bytearray()
        while len(out) < length:
            chunk = self._read_piece(addr + len(out), length - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out) if out else None

    def cstring(self, addr: int, limit: int) -> bytes | None:
        """The NUL-terminated bytes at `addr`, `limit` of them at most; None where the core does not hold them."""
        data = self.read(addr, limit)
        return None if data is None else data.split(b"\0", 1)[0]

    def word(self, addr: int) -> int | None:
        """One little-endian u64, or None when not all eight bytes are known."""
        data = self.read(addr, 8)
        return int.from_bytes(data, "little") if data is not None and len(data) == 8 else None

    def _read_piece(self, addr: int, length: int) -> bytes:
        seg = self.segment(addr)
        if seg is not None:
            rel = addr - seg.vaddr
            if rel < seg.filesz:
                data = self._read_core(seg.offset + rel, min(length, seg.filesz - rel))
                if data:
                    return data
            length = min(length, seg.memsz - rel)
        return self._from_file(addr, length)

    def _from_file(self, addr: int, length: int) -> bytes:
        mapping = self.mapping(addr)
        if mapping is None:
            return b""
        read = self._sources.get(mapping.path)
        if read is None:
            return b""
        return read(mapping.file_offset + addr - mapping.start, min(length, mapping.end - addr))
