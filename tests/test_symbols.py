"""Symbol names as gdb gives them: PLT stubs, aliases and zero-sized symbols, C++ and Rust demangling.

gdb is the oracle: `info symbol` over every address of the code sections (its
minimal-symbol choice, the one it names frames with when there is no DWARF),
and its frames of cores of programs built here with gcc and rustc. c++filt is
the oracle for demangling (plain for C++, which is how gdb spells C++; `-i`
for Rust, which is how rustfilt and gdb from DWARF spell it).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from gdb_oracle import GDB, gdb_threads, on_the_stack, pairs, run_gdb
from postmortem.core.demangle import demangle_one
from postmortem.core.modules import Image
from postmortem.model import to_plain
from postmortem.pipeline import analyze

SRC = Path(__file__).parent / "data" / "core" / "src"
GCC, CXXFILT, NM = (shutil.which(tool) for tool in ("gcc", "c++filt", "nm"))
RUSTUP_RUSTC = Path.home() / ".cargo" / "bin" / "rustc"
"""Where rustup installs rustc when its bin directory is not on PATH."""
RUSTC = shutil.which("rustc") or (str(RUSTUP_RUSTC) if os.access(RUSTUP_RUSTC, os.X_OK) else None)
LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")
LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
CODE = (".init", ".plt", ".plt.got", ".plt.sec", ".text", ".fini")

PLT_LAYOUTS = {
    # name: gcc flags; each gives the stubs a different layout
    "lazy": "-Wl,-z,lazy",
    "now": "-Wl,-z,now",
    "ibt": "-fcf-protection=full -Wl,-z,ibtplt,-z,lazy",  # .plt.sec, 16-byte .plt.got
    "ibt_now": "-fcf-protection=full -Wl,-z,ibt,-z,now",
}
HIDE_DEBUG_FILES = "set debug-file-directory /nonexistent"
"""gdb names from the symbol tables alone, as postmortem does without debug files."""
INFO_SYMBOL = """
import gdb
for line in open({path!r}):
    print("AT", line.strip(), gdb.execute("info symbol " + line.strip(), to_string=True).strip())
"""


def gdb_info_symbol(binary: Path, addresses: list[int], work: Path) -> dict[int, tuple[str, int] | None]:
    """gdb's `info symbol` for each address of `binary` (debug files hidden): (name, offset) or None."""
    listing, script = work / "addresses.txt", work / "info_symbol.py"
    listing.write_text("".join(f"{a:#x}\n" for a in addresses))
    script.write_text(INFO_SYMBOL.format(path=str(listing)))
    found: dict[int, tuple[str, int] | None] = {}
    for line in run_gdb([HIDE_DEBUG_FILES, f"file {binary}", f"source {script}"]).splitlines():
        if line.startswith("AT "):
            _, at, said = line.split(" ", 2)
            match = re.fullmatch(r"(.*?)(?: \+ (\d+))? in section \S+", said)
            found[int(at, 16)] = (match.group(1), int(match.group(2) or 0)) if match else None
    return found


def ours(binary: Path, addresses: list[int]) -> dict[int, tuple[str, int] | None]:
    """Our name and offset for each address, demangled as frames are."""
    data = binary.read_bytes()
    table = Image(lambda offset, length: data[offset:offset + length], binary.name).symbols
    found: dict[int, tuple[str, int] | None] = {}
    for address in addresses:
        hit = table.lookup(address)
        found[address] = (demangle_one(hit[0]) or hit[0], address - hit[1]) if hit else None
    return found


def code_addresses(binary: Path, step: int = 1) -> list[int]:
    """Every `step`-th address of the code sections, and one past each."""
    data = binary.read_bytes()
    sections = Image(lambda offset, length: data[offset:offset + length], binary.name).sections
    return sorted({a for name in CODE if (s := sections.get(name)) for a in range(s.addr, s.addr + s.size + 1, step)})


def build(command: str, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(command.format(src=SRC), shell=True, cwd=work, check=True, capture_output=True)


needs_gcc_gdb = pytest.mark.skipif(GCC is None or GDB is None, reason="gcc or gdb not installed")


@needs_gcc_gdb
@pytest.mark.parametrize("layout", list(PLT_LAYOUTS))
def test_every_code_address_is_named_as_gdb_names_it(tmp_path, layout):
    """PLT stubs (`puts@plt`), the zero-sized `_init`, gaps between sections: all of .init .plt* .text .fini."""
    build(f"gcc -O0 {PLT_LAYOUTS[layout]} -o plt_calls {{src}}/plt_calls.c", tmp_path)
    binary = tmp_path / "plt_calls"
    addresses = code_addresses(binary)
    theirs = gdb_info_symbol(binary, addresses, tmp_path)
    assert len(theirs) == len(addresses)
    assert {name for name, _ in filter(None, theirs.values())} >= {"puts@plt", "abort@plt", "__cxa_finalize@plt"}
    assert ours(binary, addresses) == theirs


@needs_gcc_gdb
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_cxx_plt_stubs_are_demangled_before_their_suffix(tmp_path):
    """`_ZNSt13runtime_errorC1EPKc@plt` is `std::runtime_error::runtime_error(char const*)@plt` to gdb."""
    build("g++ -O0 -o terminate {src}/terminate.cc", tmp_path)
    binary = tmp_path / "terminate"
    addresses = code_addresses(binary)
    theirs = gdb_info_symbol(binary, addresses, tmp_path)
    assert "std::runtime_error::runtime_error(char const*)@plt" in {n for n, _ in filter(None, theirs.values())}
    assert ours(binary, addresses) == theirs


@needs_gcc_gdb
def test_aliases_and_zero_sized_labels_are_chosen_as_gdb_chooses(tmp_path):
    """Local, global and weak names of one function, in both name orders, and an assembler label of size 0."""
    build("gcc -O0 -o aliases {src}/aliases.c", tmp_path)
    binary = tmp_path / "aliases"
    addresses = code_addresses(binary)
    theirs = gdb_info_symbol(binary, addresses, tmp_path)
    assert {"mm_weak", "zz_global", "zero_sized"} <= {name for name, _ in filter(None, theirs.values())}
    assert ours(binary, addresses) == theirs


@needs_gcc_gdb
@pytest.mark.skipif(not LIBC.exists(), reason="no x86-64 glibc at the usual path")
def test_glibc_names_equal_gdb_without_its_debug_file(tmp_path):
    """Every function of libc's .dynsym (raise/gsignal, the IFUNCs...), one byte in, and every PLT address."""
    data = LIBC.read_bytes()
    image = Image(lambda offset, length: data[offset:offset + length], LIBC.name)
    starts = sorted({value for value, *_ in image.symbols._rows})
    plt = [a for name in (".plt", ".plt.got", ".plt.sec") if (s := image.sections.get(name))
           for a in range(s.addr, s.addr + s.size, 4)]
    addresses = sorted({*starts, *(a + 1 for a in starts), *plt})
    theirs = gdb_info_symbol(LIBC, addresses, tmp_path)
    assert len(theirs) == len(addresses) > 2000
    mine = ours(LIBC, addresses)
    assert {a: mine[a] for a in addresses if mine[a] != theirs[a]} == {}


def _allow_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def gdb_frames(binary: Path, core: Path) -> dict[int, list[tuple[int, str | None]]]:
    """gdb's physical frames per thread, (pc, name)."""
    return pairs(on_the_stack(gdb_threads(binary, core, before=[HIDE_DEBUG_FILES])))


def our_frames(core: Path, upto: int) -> dict[int, list[tuple[int, str | None]]]:
    [found] = analyze([str(core)]).cores
    plain = json.loads(json.dumps(to_plain(found)))
    return {t["tid"]: [(int(f["pc"], 16), f["symbol"]) for f in t["frames"]][:upto] for t in plain["threads"]}


@needs_gcc_gdb
@pytest.mark.parametrize("layout", ["lazy", "ibt_now"])
def test_a_core_stopped_inside_a_plt_stub_has_gdb_frames(tmp_path, layout):
    """gdb stops the program on `puts@plt` (in .plt, or .plt.sec with IBT) and writes the core."""
    build(f"gcc -O0 {PLT_LAYOUTS[layout]} -o plt_calls {{src}}/plt_calls.c", tmp_path)
    core = tmp_path / "core"
    run_gdb([HIDE_DEBUG_FILES, f"file {tmp_path / 'plt_calls'}", "break puts@plt", "run", f"gcore {core}"],
            check=False)
    if not core.exists():
        pytest.skip("gdb could not run the program and write a core here")
    theirs = gdb_frames(tmp_path / "plt_calls", core)
    [frames] = theirs.values()
    assert frames[0][1] == "puts@plt" and frames[1][1] == "main"
    assert our_frames(core, len(frames)) == theirs


RUST_BUILDS = {"legacy": "", "v0": "-C symbol-mangling-version=v0"}


def _rust_spelling(name: str | None) -> str | None:
    """gdb's minimal-symbol spelling of a Rust name without its hash (`::h<16 hex>`), crate disambiguators
    (`core[c1f1a4ba060b9bfa]`) and const types (`<4: usize>`): what rustfilt and gdb from DWARF print."""
    if name is None:
        return None
    return re.sub(r": (?:[iu](?:8|16|32|64|128|size)|bool|char)\b", "",
                  re.sub(r"\[[0-9a-f]{1,16}\]|::h[0-9a-f]{16}$", "", name))


@pytest.mark.skipif(RUSTC is None or GDB is None, reason="rustc or gdb not installed")
@pytest.mark.parametrize("mangling", list(RUST_BUILDS))
def test_rust_frames_equal_gdb(tmp_path, mangling):
    """A null read three calls deep in Rust, no DWARF: our frames are gdb's (pc and name), less the hashes."""
    build(f"{RUSTC} -C opt-level=0 -C debuginfo=0 {RUST_BUILDS[mangling]} -o rust_crash {{src}}/rust_crash.rs",
          tmp_path)
    subprocess.run(["./rust_crash"], cwd=tmp_path, preexec_fn=_allow_cores, capture_output=True, check=False)
    core = tmp_path / "core"
    if not core.exists():
        run_gdb([HIDE_DEBUG_FILES, f"file {tmp_path / 'rust_crash'}", "run", f"gcore {core}"], check=False)
    if not core.exists():
        pytest.skip("no core file was written")
    theirs = {tid: [(pc, _rust_spelling(name)) for pc, name in frames]
              for tid, frames in gdb_frames(tmp_path / "rust_crash", core).items()}
    [frames] = theirs.values()
    main = next(i for i, (_pc, name) in enumerate(frames) if name and name.endswith("rust_crash::main"))
    assert any("as rust_crash::Step>::step" in (name or "") for _pc, name in frames)
    cut = {tid: f[:main + 1] for tid, f in theirs.items()}
    assert our_frames(core, main + 1) == cut


def _mangled(binary: Path) -> list[str]:
    names = set()
    for flags in (["-D", "--defined-only"], ["--defined-only"]):
        out = subprocess.run([NM, *flags, str(binary)], capture_output=True, text=True, check=False).stdout
        names.update(line.split()[-1] for line in out.splitlines() if line.split()[-1:] and
                     line.split()[-1].startswith(("_Z", "_R")))
    return sorted(names)


def _cxxfilt(names: list[str], *flags: str) -> list[str]:
    return subprocess.run([CXXFILT, *flags], input="".join(n + "\n" for n in names), capture_output=True, text=True,
                          check=True).stdout.splitlines()


@pytest.mark.skipif(CXXFILT is None or NM is None or not LIBSTDCXX.exists(), reason="c++filt, nm or libstdc++ missing")
def test_every_libstdcxx_name_demangles_as_cxxfilt_does():
    """All of libstdc++'s mangled names (with their @@GLIBCXX versions), and names that are not mangled."""
    names = _mangled(LIBSTDCXX) + ["main.main", "runtime.sigpanic", "type:.eq.[2]interface {}", "_Z", "_Zfoo"]
    assert len(names) > 5000
    expected = _cxxfilt(names)
    got = [demangle_one(name) or name for name in names]
    assert [(n, g) for n, g, e in zip(names, got, expected) if g != e] == []


@pytest.mark.skipif(RUSTC is None or CXXFILT is None or NM is None, reason="rustc, c++filt or nm not installed")
@pytest.mark.parametrize("mangling", list(RUST_BUILDS))
def test_every_rust_name_demangles_as_rustfilt_does(tmp_path, mangling):
    """Every Rust symbol of a program and its std, spelled as `c++filt -i` (libiberty's Rust demangler) does."""
    build(f"{RUSTC} -C opt-level=0 {RUST_BUILDS[mangling]} -o rust_crash {{src}}/rust_crash.rs", tmp_path)
    legacy = re.compile(r"_ZN.*17h[0-9a-f]{16}E")
    names = [n for n in _mangled(tmp_path / "rust_crash") if n.startswith("_R") or legacy.fullmatch(n)]
    assert len(names) > 100
    expected = _cxxfilt(names, "-i")
    got = [demangle_one(name) or name for name in names]
    assert [(n, g) for n, g, e in zip(names, got, expected) if g != e] == []
