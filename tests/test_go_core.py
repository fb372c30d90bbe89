"""Cores of a Go program (tests/data/core/src/go_crash.go), built with `go` at test time and compared with gdb.

Go binaries carry their CFI only in `.debug_frame`, zlib-compressed (SHF_COMPRESSED), and Go's leaf
functions push no frame pointer: without that CFI the rbp chain drops the caller of every frameless
leaf, and a stack scan runs on past the goroutine's or thread's first frame. gdb's frames (function
and pc, per thread) are the oracle; gdb stops at main.main, so ours are cut there, and gdb's frames at
pcs in the never-mapped first pages (the zero return address at a thread's start, the stale words past
Go's own signal trampoline, which gdb does not recognise) are left out: no unwinder can name them.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from gdb_oracle import GDB, gdb_threads, pairs, run_gdb
from postmortem.core import elf
from postmortem.core.modules import CHDR, SHF_COMPRESSED, _inflated
from postmortem.core.unwind import MAX_CFI_SECTION, CfiError
from postmortem.debugging import short_name
from test_core import SRC, _allow_cores, core_of

GO = shutil.which("go")
NEVER_MAPPED = 0x10000
"""Linux's default vm.mmap_min_addr: no code lies below it."""
needs_go = pytest.mark.skipif(GO is None or GDB is None, reason="go or gdb not installed")


def build(directory: Path, name: str, *flags: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(directory), "GOCACHE": str(directory / ".c"),
           "GOFLAGS": "-mod=mod", "GO111MODULE": "off"}
    subprocess.run([str(GO), "build", *flags, "-o", name, str(SRC / "go_crash.go")], cwd=directory, env=env,
                   check=True, capture_output=True, timeout=300)
    return directory / name


def aborted(directory: Path, name: str, *flags: str) -> Path:
    """GOTRACEBACK=crash: the runtime turns the nil dereference into a panic, then aborts; the kernel's core."""
    program = build(directory, name, *flags)
    subprocess.run([str(program)], cwd=directory, preexec_fn=_allow_cores, env={"GOTRACEBACK": "crash"},
                   capture_output=True, check=False, timeout=60)
    if not (directory / "core").exists():
        pytest.skip("no core file was written (core_pattern pipes cores elsewhere)")
    return directory / "core"


def gdb_frames(exe: Path, core: Path) -> dict[int, list[tuple[int, str | None]]]:
    """gdb's frames per thread as (pc, name), inline frames and never-mapped pcs left out."""
    return pairs({tid: [f for f in frames if f.kind != "inline" and f.pc >= NEVER_MAPPED]
                  for tid, frames in gdb_threads(exe, core).items()})


def our_frames(core: dict) -> dict[int, list[tuple[int, str | None]]]:
    """Ours per thread as (pc, name), cut after main.main; `.abi0` (the assembly functions' ELF symbol
    names) dropped, as gdb names them from DWARF."""
    found = {}
    for thread in core["threads"]:
        frames = [(int(f["pc"], 16), short_name(f["symbol"]).removesuffix(".abi0") if f["symbol"] else None)
                  for f in thread["frames"]]
        names = [name for _, name in frames]
        found[thread["tid"]] = frames[: names.index("main.main") + 1] if "main.main" in names else frames
    return found


@needs_go
def test_frames_at_the_fault_equal_gdb(tmp_path):
    """gdb stops the program at the SIGSEGV, before Go's handler runs, and writes the core: the crashing
    thread is leaf <- third <- second <- first <- main.main, leaf without a frame of its own."""
    program = build(tmp_path, "go_crash")
    run_gdb([f"file {program}", "run", "gcore core"], cwd=tmp_path, timeout=120)
    theirs = gdb_frames(program, tmp_path / "core")
    core = core_of(tmp_path / "core")
    ours = our_frames(core)
    assert [name for _, name in ours[core["threads"][0]["tid"]]] == \
        ["main.leaf", "main.third", "main.second", "main.first", "main.main"]
    assert all(f["how"] == "cfi" for t in core["threads"] for f in t["frames"][1:])
    assert ours == theirs


GOROUTINE = ["runtime.raise", "runtime.dieFromSignal", "runtime.fatalpanic", "runtime.gopanic", "runtime.sigpanic",
             "main.leaf", "main.third", "main.second", "main.first", "main.main"]
"""The crashed goroutine under Go's signal handler, as the runtime's own traceback prints it."""


@needs_go
def test_runtime_abort_core_equals_gdb(tmp_path):
    """The kernel's core after the runtime's abort: the crashing thread in Go's signal handler, the others
    parked in futex, each ending where gdb's does (runtime.clone, runtime.mcall). gdb stops at Go's signal
    restorer (runtime.sigreturn, which it does not take for a trampoline); past it ours go on, from the
    kernel's sigcontext, through the crashed goroutine down to main.main."""
    core_path = aborted(tmp_path, "go_crash")
    core = core_of(core_path)
    assert core["signal"]["name"] == "SIGABRT"
    theirs = gdb_frames(tmp_path / "go_crash", core_path)
    ours = our_frames(core)
    crashed = core["threads"][0]["tid"]
    handler, mine = theirs.pop(crashed), ours.pop(crashed)
    restorer = [name for _, name in handler].index(None)
    assert mine[:restorer] == handler[:restorer] and handler[restorer - 1][1] == "runtime.sigtramp"
    assert mine[restorer] == (handler[restorer][0], "<signal handler called>")
    assert [name for _, name in mine[restorer + 1:]] == GOROUTINE
    # a thread the runtime was still starting may be in runtime.clone alone; the parked ones go deeper
    assert len(ours) >= 2 and any(len(frames) > 3 for frames in ours.values())
    assert ours == theirs


@needs_go
def test_without_cfi_the_stack_ends_at_the_thread_start(tmp_path):
    """-ldflags=-w leaves no .debug_frame: the frame sizes of .gopclntab unwind every frame, and the stack
    stops at runtime.goexit and runtime.mstart, the first frames of a goroutine and a thread."""
    core = core_of(aborted(tmp_path, "go_nodwarf", "-ldflags=-w"))
    crashed = [f["symbol"] for f in core["threads"][0]["frames"]]
    assert crashed[-4:] == ["main.first", "main.main", "runtime.main", "runtime.goexit.abi0"]
    assert crashed[crashed.index("runtime.sigpanic") + 1:][:2] == ["main.leaf", "main.third"]
    # the crashed goroutine's thread; another thread caught inside a runtime stub or the vDSO (more often on a loaded
    # machine) may need the stack scan past it
    assert {f["how"] for f in core["threads"][0]["frames"][1:]} <= {"pclntab", "sigcontext"}
    assert all(t["frames"][-1]["symbol"] == "runtime.mstart.abi0" for t in core["threads"][1:]
               if "runtime.mstart.abi0" in [f["symbol"] for f in t["frames"]])


def _goroutine(core: dict) -> list[tuple[int, str | None]]:
    """The crashed thread's frames as (pc, name without the `.abi0` of assembly functions' ELF symbols)."""
    return [(int(f["pc"], 16), f["symbol"].removesuffix(".abi0") if f["symbol"] else None)
            for f in core["threads"][0]["frames"]]


@needs_go
def test_a_stripped_binary_is_named_and_unwound_by_its_pclntab(tmp_path):
    """-ldflags="-s -w" (how Go daemons ship) leaves no symbol table and no DWARF. Go's runtime table still
    names every function and gives its frame size: the crashed thread is frame for frame what the same
    program built without stripping gives (whose frames equal gdb's, test_runtime_abort_core_equals_gdb)."""
    stripped = core_of(aborted(tmp_path / "stripped", "go_stripped", "-ldflags=-s -w"))
    full = core_of(aborted(tmp_path / "full", "go_full"))
    assert _goroutine(stripped) == _goroutine(full)
    assert [name for _pc, name in _goroutine(stripped)][-len(GOROUTINE) - 2:-2] == GOROUTINE
    assert {f["how"] for f in stripped["threads"][0]["frames"][1:]} <= {"pclntab", "sigcontext"}
    assert all(t["frames"][-1]["symbol"] in ("runtime.mstart", "runtime.goexit", "runtime.mcall")
               for t in stripped["threads"])


def test_a_compressed_section_inflates_within_its_bound():
    """SHF_COMPRESSED .debug_frame: inflated when zlib and under MAX_CFI_SECTION, refused otherwise."""
    import zlib

    body = b"\x10\0\0\0" + b"\xff" * 4 + b"\x01" * 12
    blob = CHDR.pack(1, 0, len(body), 8) + zlib.compress(body)
    sections = {".debug_frame": elf.Section(".debug_frame", 1, 0, 0, len(blob), SHF_COMPRESSED)}
    read, inflated = _inflated(lambda offset, length: blob[offset:offset + length], sections, ".debug_frame")
    assert read(0, inflated[".debug_frame"].size) == body
    for header in (CHDR.pack(1, 0, MAX_CFI_SECTION + 1, 8), CHDR.pack(2, 0, len(body), 8), struct.pack("<I", 1)):
        hostile = header + zlib.compress(body)
        with pytest.raises(CfiError):
            _inflated(lambda offset, length, data=hostile: data[offset:offset + length],
                      {".debug_frame": elf.Section(".debug_frame", 1, 0, 0, len(hostile), SHF_COMPRESSED)},
                      ".debug_frame")


@needs_go
def test_a_damaged_pclntab_is_no_table_or_a_bounded_one(tmp_path):
    """A real .gopclntab cut short or with bytes flipped: no table, or a table whose lookups answer None
    or a value, never an exception, each within MAX_PCVALUE_STEPS steps."""
    import random

    from postmortem.core.gopclntab import GoTable, GoTableError
    from postmortem.core.modules import Image

    program = build(tmp_path, "go_stripped", "-ldflags=-s -w")
    data = program.read_bytes()
    image = Image(lambda offset, length: data[offset:offset + length], "go")
    section = image.sections[".gopclntab"]
    real = GoTable(image.read, section)
    text = image.sections[".text"]
    assert len(real) > 1000 and real.function(text.addr + 0x100) is not None
    chance = random.Random(14)
    for trial in range(60):
        blob = bytearray(data[section.offset:section.offset + section.size])
        if trial % 2:
            del blob[chance.randrange(len(blob)):]
        for _ in range(40):
            blob[chance.randrange(len(blob))] = chance.randrange(256)
        damaged = elf.Section(".gopclntab", section.type, section.addr, 0, len(blob))
        try:
            table = GoTable(lambda offset, length, b=bytes(blob): b[offset:offset + length], damaged)
        except GoTableError:
            continue
        table.rows()
        for pc in range(text.addr, text.addr + text.size, text.size // 50):
            function = table.function(pc)
            if function is not None:
                table.name(function)
                table.frame_size(function, pc)
