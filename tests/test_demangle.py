"""C++ names spelled as gdb spells them, where the C++ runtime's own `__cxa_demangle` does not.

gdb and c++filt both spell names with binutils' libiberty; `__cxa_demangle` (the
cxxfilt package's demangler, the one postmortem used before) is libstdc++'s older
copy of it, which writes a dependent call in a `decltype` as `ns::S::get<int>()`
where gdb writes `(ns::S::get<int>)()`. The oracles: gdb's frames of a core of a
C++ program built here, its `demangle` command, and c++filt. Every libstdc++ name
is compared with c++filt in tests/test_symbols.py; benchmarks/bench_demangle.py
measures the demanglers of the package index the same way.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gdb_oracle import GDB, gdb_threads, on_the_stack, pairs, run_gdb
from postmortem.core.demangle import demangle_one
from postmortem.model import to_plain
from postmortem.pipeline import analyze
from test_core import crash
from test_symbols import CXXFILT, NM, _cxxfilt, _mangled

PROGRAM = {"demangle_crash": ("g++ -O0 -o demangle_crash {src}/demangle_crash.cc", ["./demangle_crash"])}
"""Built without -g: gdb then names frames from the symbol table, through its demangler."""
DEPENDENT_CALL = "decltype ((ns::S::get<int>)()) by_member<ns::S>(ns::S)"
LIBLLVM = sorted(Path("/usr/lib").glob("llvm-*/lib/libLLVM*.so*"))
"""A large C++ library (libtorch-sized symbol table) where one is installed."""

needs_gxx_gdb = pytest.mark.skipif(shutil.which("g++") is None or GDB is None, reason="g++ or gdb not installed")


@pytest.fixture(scope="module")
def program_core(tmp_path_factory) -> Path:
    return crash(tmp_path_factory.mktemp("demangle") / "demangle_crash", "demangle_crash", programs=PROGRAM)


@needs_gxx_gdb
def test_frames_of_hard_names_equal_gdb(program_core):
    """pc and name of every frame down to main: decltype calls, a lambda, an ABI tag, std::string, an operator."""
    theirs = pairs(on_the_stack(gdb_threads(program_core.parent / "demangle_crash", program_core)))
    [frames] = theirs.values()
    upto = [name for _pc, name in frames].index("main") + 1  # gdb shows no frame past main
    [found] = analyze([str(program_core)]).cores
    ours = {t["tid"]: [(int(f["pc"], 16), f["symbol"]) for f in t["frames"]][:upto]
            for t in to_plain(found)["threads"]}
    assert frames[1][1] == DEPENDENT_CALL
    assert ours == {tid: f[:upto] for tid, f in theirs.items()}


@needs_gxx_gdb
@pytest.mark.skipif(CXXFILT is None or NM is None, reason="c++filt or nm not installed")
def test_every_name_of_the_program_equals_gdb_and_cxxfilt(program_core):
    """Every C++ symbol the program defines, spelled by gdb's `demangle` command and by c++filt."""
    names = [n for n in _mangled(program_core.parent / "demangle_crash") if n.startswith("_Z")]
    assert len(names) > 20
    gdb = run_gdb([f"demangle -l c++ -- {name}" for name in names]).splitlines()
    assert _cxxfilt(names) == gdb
    assert DEPENDENT_CALL in gdb
    assert [demangle_one(name) for name in names] == gdb


@pytest.mark.skipif(CXXFILT is None or NM is None or not LIBLLVM, reason="c++filt, nm or libLLVM missing")
def test_every_name_of_libllvm_demangles_as_cxxfilt_does():
    """Tens of thousands of template-heavy names (decltype calls among them), with their @@LLVM versions."""
    names = [n for n in _mangled(LIBLLVM[0]) if n.startswith("_Z")]
    assert len(names) > 10_000
    expected = _cxxfilt(names)
    assert [(n, g) for n, g, e in zip(names, (demangle_one(n) or n for n in names), expected) if g != e] == []
