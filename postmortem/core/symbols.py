"""Function symbols of one ELF image: address -> name, and C++ demangling.

`.symtab` (or a separate debug file's) is preferred to `.dynsym`. Entries are
unpacked with `struct.iter_unpack` over the raw table: pyelftools' per-symbol
iteration is about fifty times slower on libc's or libpython's tables.
"""

from __future__ import annotations

import bisect
import re
import struct
import subprocess
from collections.abc import Iterable

from ..programs import find_program
from .elf import Read, Section

STT_FUNC, STT_GNU_IFUNC = 2, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
_BIND_PREFERENCE = {STB_LOCAL: 0, STB_GLOBAL: 1, STB_WEAK: 2}
_SYM = struct.Struct("<IBBHQQ")
MAX_TABLE = 512 * 1024 * 1024
"""Bytes of one symbol or string table read (libtorch_cuda's are tens of MiB; a crafted header may claim any size)."""
MAX_ALIASES = 64
"""Names weighed for one address (glibc gives a function up to five; a crafted table may give it millions)."""


_GENERATED_ALIAS = re.compile(r"_alias_\d+$")
"""Names glibc's symbol-versioning macros generate next to the real one."""


class SymbolTable:
    """Sorted function symbols; names are decoded from the string table only when asked for."""

    def __init__(self, read: Read, sections: dict[str, Section]):
        self.source = ""
        self._values: list[int] = []
        self._rows: list[tuple[int, int, int, int]] = []
        self._strings = b""
        for table, strtab in ((".symtab", ".strtab"), (".dynsym", ".dynstr")):
            sym, names = sections.get(table), sections.get(strtab)
            if sym and names and sym.type != 8 and 0 < sym.size <= MAX_TABLE:
                self._load(read(sym.offset, sym.size), read(names.offset, min(names.size, MAX_TABLE)))
                self.source = table
                break

    def _load(self, raw: bytes, strings: bytes) -> None:
        rows = [(value, size, name, info >> 4)
                for name, info, _other, shndx, value, size in _SYM.iter_unpack(raw[: len(raw) // _SYM.size * _SYM.size])
                if value and shndx and (info & 0xF) in (STT_FUNC, STT_GNU_IFUNC)]
        rows.sort()
        self._rows = rows
        self._values = [row[0] for row in rows]
        self._strings = strings

    def __bool__(self) -> bool:
        return bool(self._rows)

    def lookup(self, vaddr: int) -> tuple[str, int] | None:
        """(name, start) of the function holding `vaddr`: the nearest symbol at or below it.

        A sized symbol that ends before `vaddr` does not hold it (gdb then
        prints ??, and so do we). Among aliases at one address, the local
        name wins (glibc's __GI_raise over raise; that is the name gdb prints
        from DWARF), then global over weak, then a name that is not one of
        glibc's generated `_alias_N` names (__libc_start_main_impl over
        __libc_start_main_alias_1), then the name with fewer leading
        underscores (clone3 over __clone3).
        """
        i = bisect.bisect_right(self._values, vaddr) - 1
        if i < 0:
            return None
        start = self._values[i]
        first = max(bisect.bisect_left(self._values, start), i + 1 - MAX_ALIASES)
        holders = [row for row in self._rows[first:i + 1] if not row[1] or vaddr < start + row[1]]
        if not holders:
            return None
        names = [(_BIND_PREFERENCE.get(bind, 3), self._name(name)) for _v, _s, name, bind in holders]
        best = min(names, key=lambda item: (item[0], _GENERATED_ALIAS.search(item[1]) is not None,
                                            len(item[1]) - len(item[1].lstrip("_")), item[1]))
        return best[1], start

    def _name(self, offset: int) -> str:
        end = self._strings.find(b"\0", offset)
        return self._strings[offset:end if end >= 0 else None].decode("utf-8", "replace")


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Itanium-mangled names mapped to their C++ spelling; one call for the whole batch.

    Uses c++filt when it is installed; without it names stay as they are
    (never an error).
    """
    mangled = sorted({name for name in names if name.startswith("_Z")})
    tool = find_program("c++filt")  # never one in the working directory
    if not mangled or tool is None:
        return {}
    try:
        done = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    plain = done.stdout.splitlines()
    return dict(zip(mangled, plain)) if len(plain) == len(mangled) else {}


def find_symbol_address(read: Read, sections: dict[str, Section], name: str) -> int | None:
    """The link-time address of a defined symbol of any type (a variable such as _PyRuntime included)."""
    wanted = name.encode()
    for table, strtab in ((".dynsym", ".dynstr"), (".symtab", ".strtab")):
        sym, names = sections.get(table), sections.get(strtab)
        if not sym or not names or sym.type == 8 or not 0 < sym.size <= MAX_TABLE:
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
