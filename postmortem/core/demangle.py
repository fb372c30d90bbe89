"""Mangled symbol names spelled as gdb prints them: C++ (Itanium), Rust legacy and Rust v0.

C++ goes to the C++ runtime's own `__cxa_demangle` (through the cxxfilt
package): it is libiberty's demangler, which gdb and c++filt use. They ask it
for the verbose spelling, which differs in one way only: the four standard
abbreviations are spelled out (`std::basic_ostream<char, std::char_traits<char>
>`, never `std::ostream`), so those are expanded here. Rust's legacy names are
Itanium-shaped and would come out with their `::h<hash>` and `$LT$` escapes, so
they are decoded here first, as gdb does from DWARF and rustfilt does; v0 names
(`_R...`) are in `rust_v0`. Go and C names are never touched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from .rust_v0 import demangle_v0

MAX_MANGLED = 64 * 1024
"""Characters of one mangled name demangled (LLVM's longest are ~10,000; longer ones are kept as they are)."""

_VERBOSE = {"string": "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
            "istream": "std::basic_istream<char, std::char_traits<char> >",
            "ostream": "std::basic_ostream<char, std::char_traits<char> >",
            "iostream": "std::basic_iostream<char, std::char_traits<char> >"}
_ABBREVIATION = re.compile(r"\bstd::(string|istream|ostream|iostream)\b(>?)")
"""What __cxa_demangle prints for the Ss, Si, So and Sd substitutions (not std::string_view: `_` is a word char);
a `>` after one is kept apart from the expansion's own, as libiberty writes `> >`."""
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
    demangler = _cxa_demangle()
    if demangler is None:
        return None
    try:
        return _ABBREVIATION.sub(lambda m: _VERBOSE[m.group(1)] + (" >" if m.group(2) else ""),
                                 demangler(mangled))
    except (ValueError, OSError, UnicodeDecodeError):
        return None


@cache
def _cxa_demangle() -> Callable[[str], str] | None:
    """cxxfilt's demangle, imported on first use (it looks for libstdc++ when imported); None without it."""
    try:
        import cxxfilt  # type: ignore[import-untyped]
    except (ImportError, OSError):
        return None

    def run(mangled: str) -> str:
        try:
            return cxxfilt.demangle(mangled)
        except cxxfilt.Error as error:
            raise ValueError(mangled) from error

    return run
