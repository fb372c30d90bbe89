"""Function symbols of one ELF image: address -> name as gdb names it, PLT stubs included.

`.symtab` (or a separate debug file's) is preferred to `.dynsym`. Entries are
unpacked with `struct.iter_unpack` over the raw table: pyelftools' per-symbol
iteration is about fifty times slower on libc's or libpython's tables.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .demangle import demangle_one
from .elf import EM_AARCH64, EM_X86_64, SHT_NOBITS, Read, Section
from .gopclntab import go_table

STT_NOTYPE, STT_FUNC, STT_GNU_IFUNC = 0, 2, 10
_CODE_TYPES = (STT_NOTYPE, STT_FUNC, STT_GNU_IFUNC)
"""Symbol types gdb may name a pc with: an assembler label has no type; data symbols lie in other sections."""
SHN_LORESERVE = 0xFF00
"""Section indexes from here up are special (SHN_ABS, SHN_COMMON): no code lies there."""
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
_BIND_PREFERENCE = {STB_LOCAL: 0, STB_GLOBAL: 1, STB_WEAK: 2}
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
MAX_TABLE = 512 * 1024 * 1024
"""Bytes of one symbol or string table read (libtorch_cuda's are tens of MiB; a crafted header may claim any size)."""
MAX_ALIASES = 64
"""Symbols weighed for one address, aliases and the zero-sized ones gdb walks back over (glibc gives a function up
to five names; a crafted table may give it millions)."""
MAX_PLT = 16 * 1024 * 1024
"""Bytes of one PLT section or relocation table decoded (libtorch_cuda's PLT has ~20,000 16-byte stubs)."""
MAX_NAME = 64 * 1024
"""Bytes of one .dynstr name read for a PLT stub (real ones are under 4 KiB)."""

_ENDBR64, _BND = b"\xf3\x0f\x1e\xfa", b"\xf2"
_JMP_GOT = b"\xff\x25"
"""jmp *disp32(%rip), the stub's jump through its GOT slot."""
_ADRP_X16, _LDR_X17_X16 = (0x9F00001F, 0x90000010), (0xFFC003FF, 0xF9400211)
"""(mask, value) of an aarch64 stub's `adrp x16, page` and `ldr x17, [x16, #offset]` (its GOT slot)."""
_BTI_C = struct.pack("<I", 0xD503245F)
"""`bti c`, which starts each stub of a PLT built for branch target identification."""
_OVERLAPPING = (".tbss",)
"""Sections whose addresses overlap the next section's (TLS templates): never the section a pc is in."""


_GENERATED_ALIAS = re.compile(rb"_alias_\d+$")
"""Names glibc's symbol-versioning macros generate next to the real one."""


@dataclass(frozen=True)
class Plt:
    """Synthetic `name@plt` symbols of the PLT stubs, as BFD makes them for gdb: zero-sized, sorted by address."""

    starts: list[int]
    names: list[str]
    spans: list[tuple[int, int]]  # the PLT sections, [start, end)


class SymbolTable:
    """Sorted function symbols; names are decoded from the string table only when asked for."""

    def __init__(self, read: Read, sections: dict[str, Section], machine: int):
        self.source = ""
        self._values: list[int] = []
        self._rows: list[tuple[int, int, int, int]] = []
        self._strings = b""
        self._dwarf = (info := sections.get(".debug_info")) is not None and info.type != SHT_NOBITS
        spans = sorted((s.addr, s.addr + s.size) for s in sections.values()
                       if s.addr and s.size and s.name not in _OVERLAPPING)
        self._span_starts, self._spans = [start for start, _end in spans], spans
        self._plt = plt_symbols(read, sections, machine)
        for table, strtab in ((".symtab", ".strtab"), (".dynsym", ".dynstr")):
            sym, names = sections.get(table), sections.get(strtab)
            if sym and names and sym.type != SHT_NOBITS and 0 < sym.size <= MAX_TABLE:
                self._load(read(sym.offset, sym.size), read(names.offset, min(names.size, MAX_TABLE)))
                self.source = table
                break
        go = go_table(read, sections) if not self._rows else None
        if go is not None:  # a Go binary stripped with -ldflags=-s: its runtime's own table still names it
            rows, self._strings = go.rows()
            self._rows, self._values, self.source = rows, [row[0] for row in rows], ".gopclntab"

    def _load(self, raw: bytes, strings: bytes) -> None:
        rows = [(value, size, name, info)
                for name, info, _other, shndx, value, size in _SYM.iter_unpack(raw[: len(raw) // _SYM.size * _SYM.size])
                if value and 0 < shndx < SHN_LORESERVE and (info & 0xF) in _CODE_TYPES]
        rows.sort()
        self._rows = rows
        self._values = [row[0] for row in rows]
        self._strings = strings

    def __bool__(self) -> bool:
        return bool(self._rows) or bool(self._plt.starts)

    def take_plt(self, other: SymbolTable) -> None:
        """Use `other`'s PLT names: a separate debug file keeps the PLT and its relocations only as NOBITS."""
        if not self._plt.starts:
            self._plt = other._plt

    def lookup(self, vaddr: int, in_dwarf: bool = True) -> tuple[str, int] | None:
        """(name, start) of the function holding `vaddr`, chosen as gdb chooses its minimal symbol.

        A sized symbol holds [start, start + size); a zero-sized one (a PLT
        stub, an assembler label) holds up to the next symbol of its own
        section, never past the section's end. Where the image has DWARF,
        gdb names the frame from it instead, and among aliases the DWARF name
        is the local one (glibc's __GI_raise over raise): see `_dwarf_name`.
        `in_dwarf` False says no compilation unit covers `vaddr` (libc.a's code
        in a static binary built with -g): the minimal symbol stands.
        """
        plt = self._plt
        at = bisect.bisect_right(plt.starts, vaddr) - 1
        where = _span_of(plt.spans, vaddr)
        if at >= 0 and where is not None and _span_of(plt.spans, plt.starts[at]) == where:
            return plt.names[at], plt.starts[at]
        i = bisect.bisect_right(self._values, vaddr) - 1
        if i < 0:
            return None
        window = self._rows[max(0, i + 1 - MAX_ALIASES):i + 1]
        named = sorted((value, self._name(name), size, info) for value, size, name, info in window)
        best = self._gdb_choice(named, vaddr)
        if best is None:
            return None
        start, name, size, _info = best
        if self._dwarf and in_dwarf:
            name = _dwarf_name([row for row in named if row[0] == start and row[2] == size])
        return name.decode("utf-8", "replace"), start

    def _gdb_choice(self, named: list[_Named], vaddr: int) -> _Named | None:
        """gdb's lookup_minimal_symbol_by_pc_section over symbols sorted by (address, name).

        A pc outside every section has no symbol (an image without section
        headers, one read from core memory, is taken as one section). From the
        last symbol at or below `vaddr` backwards: symbols of another
        section are skipped; a local one yields to the global or weak one just
        before it when both have the same address and size; zero-sized ones are
        remembered (the nearest) and passed over until a sized one is found.
        The sized one is the answer if it holds `vaddr`, else the nearest
        zero-sized one, else none.
        """
        zero = None
        section = _span_of(self._spans, vaddr, self._span_starts)
        if section is None and self._spans:
            return None
        for k in range(len(named) - 1, -1, -1):
            start, _name, size, _info = named[k]
            if section is not None and _span_of(self._spans, start, self._span_starts) != section:
                continue
            before = named[k - 1] if k else None
            if (not _plain_text(named[k][3]) and before and _plain_text(before[3]) and before[0] == start
                    and before[2] == size):
                continue
            if not size:
                zero = zero or named[k]
                continue
            return named[k] if vaddr < start + size else zero
        return zero

    def _name(self, offset: int) -> bytes:
        end = self._strings.find(b"\0", offset)
        return self._strings[offset:end if end >= 0 else None]


_Named = tuple[int, bytes, int, int]
"""(address, name, size, st_info) of one symbol, as gdb sorts its minimal symbols."""


def _plain_text(info: int) -> bool:
    """gdb's mst_text: a global, weak or unique function or label (locals are mst_file_text, IFUNCs
    mst_text_gnu_ifunc)."""
    return info & 0xF in (STT_NOTYPE, STT_FUNC) and info >> 4 in (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE)


def _dwarf_name(aliases: list[_Named]) -> bytes:
    """Among aliases, the name glibc's DWARF gives the function, which gdb then prints.

    The local name wins (__GI_raise over raise), then global over weak, then
    a name that is not one of glibc's generated `_alias_N` names
    (__libc_start_main_impl over __libc_start_main_alias_1), then the name
    with fewer leading underscores (clone3 over __clone3).
    """
    return min((_BIND_PREFERENCE.get(info >> 4, 3), _GENERATED_ALIAS.search(name) is not None,
                len(name) - len(name.lstrip(b"_")), name) for _v, name, _s, info in aliases)[3]


def _span_of(spans: list[tuple[int, int]], vaddr: int, starts: list[int] | None = None) -> int | None:
    """Index of the section holding `vaddr`; None outside them all."""
    k = bisect.bisect_right(starts if starts is not None else [span[0] for span in spans], vaddr) - 1
    return k if k >= 0 and vaddr < spans[k][1] else None


def plt_symbols(read: Read, sections: dict[str, Section], machine: int) -> Plt:
    """`name@plt` at each PLT stub, named as BFD's synthetic symbols are (what gdb prints).

    A stub is found by its jump through a GOT slot (`PltLayout.stubs`); the slot is matched with the
    JUMP_SLOT, GLOB_DAT or IRELATIVE relocation that fills it, whose symbol names the stub
    (`*ABS*+0xaddend@plt` for an IRELATIVE one, which has no symbol).
    """
    layout = PLT_LAYOUTS.get(machine)
    if layout is None:
        return Plt([], [], [])
    slots = _got_slots(read, sections, layout.relocations)
    found: dict[int, str] = {}
    spans = []
    for name in layout.sections:
        section = sections.get(name)
        if not section or section.type == SHT_NOBITS or not 0 < section.size <= MAX_PLT or not slots:
            continue
        spans.append((section.addr, section.addr + section.size))
        for start, got in layout.stubs(read(section.offset, section.size), section.addr, name):
            if got in slots:
                found[start] = slots[got]
    starts = sorted(found)
    return Plt(starts, [found[start] for start in starts], sorted(spans))


def _x86_64_stubs(code: bytes, addr: int, name: str) -> Iterator[tuple[int, int]]:
    """(stub, GOT slot) of each `jmp *GOT(%rip)` (after an optional endbr64 and bnd prefix), at the stub size
    of its section."""
    step = 8 if name == ".plt.got" and not code.startswith(_ENDBR64) else 16
    for at in range(0, len(code) - step + 1, step):
        jump = at + (4 if code.startswith(_ENDBR64, at) else 0)
        jump += 1 if code.startswith(_BND, jump) else 0
        if code.startswith(_JMP_GOT, jump) and jump + 6 <= len(code):
            yield addr + at, addr + jump + 6 + int.from_bytes(code[jump + 2:jump + 6], "little", signed=True)


def _aarch64_stubs(code: bytes, addr: int, _name: str) -> Iterator[tuple[int, int]]:
    """(stub, GOT slot) of each `adrp x16, page; ldr x17, [x16, #offset]` (the stub starts at a `bti c`
    just before it, where the PLT has them); PLT0's own pair loads the resolver's slot, which no
    relocation fills."""
    for at in range(0, len(code) - 7, 4):
        adrp, ldr = struct.unpack_from("<II", code, at)
        if adrp & _ADRP_X16[0] != _ADRP_X16[1] or ldr & _LDR_X17_X16[0] != _LDR_X17_X16[1]:
            continue
        pages = ((adrp >> 29) & 3) | (((adrp >> 5) & 0x7FFFF) << 2)
        pages -= (1 << 21) if pages >> 20 else 0
        slot = ((addr + at) & ~0xFFF) + (pages << 12) + ((ldr >> 10) & 0xFFF) * 8
        start = at - 4 if at >= 4 and code[at - 4:at] == _BTI_C else at
        yield addr + start, slot & ((1 << 64) - 1)


@dataclass(frozen=True)
class PltLayout:
    """Where one architecture's linkers put PLT stubs, the relocations that fill their GOT slots, and how
    a stub is told from its code."""

    sections: tuple[str, ...]
    relocations: frozenset[int]
    stubs: Callable[[bytes, int, str], Iterator[tuple[int, int]]]


PLT_LAYOUTS = {
    # lazy .plt; with IBT (-z ibt, -fcf-protection) the called stubs move to .plt.sec; .plt.got holds the stubs
    # of functions whose address is also taken (GLOB_DAT); .plt.bnd is MPX's .plt.sec.
    # R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_IRELATIVE
    EM_X86_64: PltLayout((".plt", ".plt.sec", ".plt.got", ".plt.bnd"), frozenset({6, 7, 37}), _x86_64_stubs),
    # R_AARCH64_GLOB_DAT, R_AARCH64_JUMP_SLOT, R_AARCH64_IRELATIVE
    EM_AARCH64: PltLayout((".plt",), frozenset({1025, 1026, 1032}), _aarch64_stubs),
}


def _got_slots(read: Read, sections: dict[str, Section], relocations: frozenset[int]) -> dict[int, str]:
    """GOT slot address -> stub name, from .rela.plt and .rela.dyn over .dynsym."""
    sym, names = sections.get(".dynsym"), sections.get(".dynstr")
    if not sym or not names or sym.type == SHT_NOBITS or names.type == SHT_NOBITS:
        return {}
    slots: dict[int, str] = {}
    named: dict[int, str] = {}  # .dynsym index -> name: a crafted table may point every relocation at one symbol
    for table in (".rela.plt", ".rela.dyn"):
        rela = sections.get(table)
        if not rela or rela.type == SHT_NOBITS or not 0 < rela.size <= MAX_PLT:
            continue
        raw = read(rela.offset, rela.size)
        for offset, info, addend in _RELA.iter_unpack(raw[: len(raw) // _RELA.size * _RELA.size]):
            if info & 0xFFFFFFFF not in relocations:
                continue
            index = info >> 32
            if index not in named:
                named[index] = _dynamic_name(read, sym, names, index) if index else "*ABS*"
            base = named[index]
            slots[offset] = base + (f"+{addend:#x}" if addend else "") + "@plt"
    return slots


def _dynamic_name(read: Read, sym: Section, names: Section, index: int) -> str:
    """The name of .dynsym entry `index` ("" when the entry or its name lies outside the tables)."""
    if (index + 1) * _SYM.size > sym.size:
        return ""
    name_at = _SYM.unpack(read(sym.offset + index * _SYM.size, _SYM.size).ljust(_SYM.size, b"\0"))[0]
    if name_at >= names.size:
        return ""
    raw = read(names.offset + name_at, min(MAX_NAME, names.size - name_at))
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled names (C++, Rust legacy and v0) mapped to the spelling gdb prints; the others are left out."""
    plain = {name: demangle_one(name) for name in set(names)}
    return {name: text for name, text in plain.items() if text is not None}


def find_symbol_address(read: Read, sections: dict[str, Section], name: str) -> int | None:
    """The link-time address of a defined symbol of any type (a variable such as _PyRuntime included)."""
    wanted = name.encode()
    for table, strtab in ((".dynsym", ".dynstr"), (".symtab", ".strtab")):
        sym, names = sections.get(table), sections.get(strtab)
        if not sym or not names or sym.type == SHT_NOBITS or not 0 < sym.size <= MAX_TABLE:
            continue
        strings = read(names.offset, min(names.size, MAX_TABLE))
        at = strings.find(b"\0" + wanted + b"\0")
        if at < 0:
            continue
        raw = read(sym.offset, sym.size)
        for st_name, _info, _other, shndx, value, _size in _SYM.iter_unpack(raw[: len(raw) // _SYM.size * _SYM.size]):
            if st_name == at + 1 and shndx and value:
                return value
    return None
