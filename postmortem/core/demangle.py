"""Mangled symbol names spelled as gdb prints them: C++ (Itanium), Rust legacy and Rust v0.

C++ goes to the `demangle` package's Itanium reader in its "gnu" style: it
spells names as libiberty does, which gdb and c++filt use (verbose, so
`std::basic_ostream<char, std::char_traits<char> >`, never `std::ostream`).
It is pure Python with bounded depth, output and substitutions, and equal to
c++filt on every symbol of libstdc++, libLLVM, libclang-cpp and libjvm, where
the C++ runtime's own `__cxa_demangle` (an older libiberty) is not
(benchmarks/bench_demangle.py). Rust's legacy names are Itanium-shaped and
would come out with their `::h<hash>` and `$LT$` escapes, so they are decoded
here first, as gdb does from DWARF and rustfilt does; v0 names (`_R...`) are in
`rust_v0`. Go and C names are never touched.
"""

from __future__ import annotations

import re

from .rust_v0 import demangle_v0

MAX_MANGLED = 64 * 1024
"""Characters of one mangled name demangled (LLVM's longest are ~10,000; longer ones are kept as they are)."""

_LEGACY_HASH = re.compile(r"17h[0-9a-f]{16}E\Z")
"""How a legacy Rust name ends: its hash as the last path element."""
_PART = re.compile(r"(\d{1,5})")  # no part is longer than MAX_MANGLED
_ESCAPES = {"SP": "@", "BP": "*", "RF": "&", "LT": "<", "GT": ">", "LP": "(", "RP": ")", "C": ","}
_ESCAPE = re.compile(r"\$(SP|BP|RF|LT|GT|LP|RP|C|u[0-9a-f]{1,6})\$")


def demangle_one(name: str) -> str | None:
    """gdb's spelling of `name`, or None when it is not mangled (or not demangled here).

    A version or PLT suffix (`@plt`, `@GLIBC_2.2.5`) is kept after the demangled part, as gdb shows it.
    """
    mangled, at, suffix = name.partition("@")
    if len(mangled) > MAX_MANGLED or not mangled.startswith(("_Z", "_R")):
        return None
    if mangled.startswith("_R"):
        plain = demangle_v0(mangled)
    else:
        plain = (_legacy_rust(mangled) if mangled.startswith("_ZN") and _LEGACY_HASH.search(mangled) else None)
        plain = plain if plain is not None else _itanium(mangled)
    return plain + at + suffix if plain is not None else None


def _legacy_rust(mangled: str) -> str | None:
    """`_ZN3std2rt10lang_start17h0123456789abcdefE` as `std::rt::lang_start` (hash dropped, escapes decoded)."""
    parts, at, end = [], 3, len(mangled) - 20  # "17h" + 16 hex digits + "E"
    while at < end:
        digits = _PART.match(mangled, at)
        if digits is None:
            return None
        size, at = int(digits.group(1)), digits.end()
        if size == 0 or at + size > end:
            return None
        parts.append(_unescape(mangled[at:at + size]))
        at += size
    return "::".join(parts) if parts else None


def _unescape(ident: str) -> str:
    if ident.startswith("_$"):
        ident = ident[1:]
    return _ESCAPE.sub(_escaped, ident.replace("..", "::"))


def _escaped(match: re.Match[str]) -> str:
    code = match.group(1)
    if code in _ESCAPES:
        return _ESCAPES[code]
    value = int(code[1:], 16)
    return chr(value) if value <= 0x10FFFF else match.group(0)


def _itanium(mangled: str) -> str | None:
    """libiberty's spelling of a C++ name; None for one it cannot read (it gives those back as they are)."""
    import demangle  # imported on first use: start-up without a C++ frame does not pay for it

    plain = demangle.demangle(mangled, language="itanium", style="gnu")
    return plain if plain != mangled else None
