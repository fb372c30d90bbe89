"""C++ demanglers from the package index against c++filt, on every mangled symbol of real libraries.

c++filt (binutils, libiberty's demangler) is the oracle: gdb spells C++ names
with the same code. For each library (libstdc++.so.6 by default, plus any
given with --lib) the names are every `_Z` symbol `nm -D --defined-only` and
`nm --defined-only` list, GNU version suffixes (`@@GLIBCXX_3.4`) included.
Each installed candidate demangles each name once, in one pass (none of them
has seen the names before: the demangle package's result cache is emptied
first); a name it cannot read, or raises on, stays as it
is, as postmortem keeps it. The version suffix is split off and put back by
this harness, so that the demanglers are compared, not their suffix handling.
The cxxfilt row is `__cxa_demangle` as it is: it abbreviates std::string,
std::istream, std::ostream and std::iostream, which c++filt and gdb spell out.
The last row is postmortem's own `demangle_one`, whatever demangler it uses.

Columns: equal (to c++filt), kept (left mangled where c++filt demangled it),
other (any other difference) and seconds per 100k names (one pass, in this
process). Candidates that are not installed are named and skipped; install them
in the same environment as postmortem (`pip install cxxfilt demangle
cpp-demangle pycxxfilt pydemumble multi-demangle itanium-demangler llvm-demangle-fxti`).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from postmortem.core.demangle import demangle_one

LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
MAX_NAMES = 1_000_000
"""Names read from one library (libLLVM and libtorch hold a few hundred thousand)."""
SHOW = 3
"""Differences printed per candidate and library, to say what kind they are."""

Demangler = Callable[[str], str | None]
"""name -> spelling; raising, None or "" mean "cannot read"."""


def _attribute(module: str, name: str) -> Callable[[], Demangler]:
    return lambda: getattr(importlib.import_module(module), name)


def _demangle_gnu() -> Demangler:
    import demangle

    return functools.partial(demangle.demangle, language="itanium", style="gnu")


def _itanium_demangler() -> Demangler:
    import itanium_demangler

    return lambda name: str(itanium_demangler.parse(name) or "")


CANDIDATES: dict[str, Callable[[], Demangler]] = {
    # row: its demangler, imported (ImportError or OSError: not installed)
    "cxxfilt (__cxa_demangle)": _attribute("cxxfilt", "demangle"),
    "demangle, style=gnu (pure Python)": _demangle_gnu,
    "cpp-demangle (Rust cpp_demangle)": _attribute("cpp_demangle", "demangle"),
    "multi-demangle (Rust)": _attribute("multi_demangle", "demangle_symbol"),
    "pycxxfilt (LLVM)": _attribute("pycxxfilt", "itanium_demangle"),
    "pydemumble (LLVM demumble)": _attribute("pydemumble", "demangle"),
    "llvm-demangle-fxti (LLVM)": _attribute("llvmdemangle", "itanium_demangle"),
    "itanium-demangler (pure Python)": _itanium_demangler,
}


@dataclass(frozen=True)
class Score:
    equal: int
    kept: int
    other: int
    seconds: float
    examples: list[tuple[str, str, str]]


def mangled_names(library: Path) -> list[str]:
    """Every `_Z` name nm lists for `library` (dynamic and static tables), sorted, at most MAX_NAMES."""
    names: set[str] = set()
    for flags in (["-D", "--defined-only"], ["--defined-only"]):
        listing = subprocess.run(["nm", *flags, str(library)], capture_output=True, text=True, check=False).stdout
        names.update(f[-1] for f in (line.split() for line in listing.splitlines()) if f and f[-1].startswith("_Z"))
    return sorted(names)[:MAX_NAMES]


def cxxfilt_spelling(names: list[str]) -> list[str]:
    """c++filt's spelling of each name, one line each (it keeps what it cannot demangle)."""
    out = subprocess.run(["c++filt"], input="".join(n + "\n" for n in names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    if len(out) != len(names):
        raise SystemExit(f"c++filt gave {len(out)} lines for {len(names)} names")
    return out


def harnessed(demangler: Demangler) -> Callable[[str], str]:
    """`demangler` with the version suffix kept aside and a failure read as "keep the name"."""
    def run(name: str) -> str:
        mangled, at, suffix = name.partition("@")
        try:
            plain = demangler(mangled)
        except Exception:  # noqa: BLE001 -- each package has its own error types; all mean "cannot read"
            plain = None
        return (plain or mangled) + at + suffix
    return run


def score(spell: Callable[[str], str], names: list[str], expected: list[str]) -> Score:
    if "demangle" in sys.modules:  # its result cache would time every row after the first as look-ups
        sys.modules["demangle"].cache_clear()
    start = time.perf_counter()
    got = [spell(name) for name in names]
    seconds = time.perf_counter() - start
    wrong = [(n, g, e) for n, g, e in zip(names, got, expected) if g != e]
    kept = sum(1 for n, g, _e in wrong if g == n)
    return Score(len(names) - len(wrong), kept, len(wrong) - kept, seconds, wrong[:SHOW])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", type=Path, action="append", default=[],
                        help="another C++ shared library to read (repeatable)")
    parser.add_argument("--show", action="store_true", help=f"print up to {SHOW} differences per row")
    args = parser.parse_args()
    if shutil.which("c++filt") is None or shutil.which("nm") is None:
        raise SystemExit("needs c++filt and nm (binutils)")
    rows: dict[str, Callable[[str], str]] = {}
    for row, load in CANDIDATES.items():
        try:
            rows[row] = harnessed(load())
        except (ImportError, OSError):
            print(f"not installed: {row}", file=sys.stderr)
    rows["postmortem demangle_one"] = lambda name: demangle_one(name) or name
    for library in [*([LIBSTDCXX] if LIBSTDCXX.exists() else []), *args.lib]:
        names = mangled_names(library)
        expected = cxxfilt_spelling(names)
        print(f"\n{library} : {len(names)} mangled names\n")
        print("| demangler | equal | kept mangled | other | s per 100k |\n|---|---|---|---|---|")
        for row, spell in rows.items():
            result = score(spell, names, expected)
            per_100k = result.seconds / max(len(names), 1) * 100_000
            print(f"| {row} | {result.equal} ({result.equal / max(len(names), 1):.2%}) | {result.kept} | "
                  f"{result.other} | {per_100k:.2f} |")
            for name, got, want in result.examples if args.show else []:
                print(f"    {name}\n      got  {got}\n      want {want}")


if __name__ == "__main__":
    main()
