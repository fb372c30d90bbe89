"""Source lines and inlined frames (postmortem.core.lines), compared with gdb and addr2line.

Programs are built with gcc -g at test time (-O0, and -O2 with static functions
inlined), crashed, and every frame of every thread -- gdb's INLINE frames
included, each with gdb's pc and `at file:line` -- is compared with ours:
an inlined function is listed before the physical frame that holds it, with
the same pc. addr2line -i -f on the same addresses is the second oracle.
Separate debug files are found by build-id, .gnu_debuglink, debuginfod's cache
and --debug-dir, and only when they are that build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gdb_oracle import GDB, Threads, gdb_threads
from hostile import core_craft
from postmortem.debugging import short_name
from postmortem.model import Options
from test_core import DATA, GCC, PROGRAMS, core_of, crash

ADDR2LINE = shutil.which("addr2line")
OBJCOPY = shutil.which("objcopy")

LINE_PROGRAMS = {
    "crash": PROGRAMS["crash"],
    "crash_o2": PROGRAMS["crash_o2"],
    "mt_abort": PROGRAMS["mt_abort"],
    "sighandler": PROGRAMS["sighandler"],
    "inline_crash": ("gcc -g -O2 -o inline_crash {src}/inline_crash.c", ["./inline_crash"]),
}

Row = tuple[int, str | None, str | None]
"""(pc, function, basename:line) of one frame as gdb lists it."""


@pytest.fixture(scope="module")
def cores(tmp_path_factory) -> dict[str, Path]:
    if GCC is None:
        pytest.skip("gcc not installed: the test programs cannot be built")
    root = tmp_path_factory.mktemp("lines")
    return {name: crash(root / name, name, programs=LINE_PROGRAMS) for name in LINE_PROGRAMS}


def _place(file: str | None, line: int | None) -> str | None:
    return f"{os.path.basename(file)}:{line}" if file and line else None


def ours(core: dict) -> dict[int, list[Row]]:
    """Our frames per thread, each inlined function first (innermost first), cut after main as gdb is."""
    threads = {}
    for thread in core["threads"]:
        rows: list[Row] = []
        for frame in thread["frames"]:
            pc = int(frame["pc"], 16)
            for inlined in frame["inlined"]:
                rows.append((pc, short_name(inlined["function"]), _place(inlined["file"], inlined["line"])))
            rows.append((pc, short_name(frame["symbol"]) if frame["symbol"] else None,
                         _place(frame["file"], frame["line"])))
        names = [row[1] for row in rows]
        threads[thread["tid"]] = rows[: names.index("main") + 1] if "main" in names else rows
    return threads


def theirs(exe: Path, core: Path) -> dict[int, list[Row]]:
    """gdb's frames per thread of `core` with its file:line."""
    return rows(gdb_threads(exe, core))


def rows(threads: Threads) -> dict[int, list[Row]]:
    """gdb's frames as `ours` has them (tail-call frames, which only gdb synthesises, left out)."""
    return {tid: [(f.pc, None if f.label is None else short_name(f.label), f.where and os.path.basename(f.where))
                  for f in frames if f.kind != "tailcall"] for tid, frames in threads.items()}


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
@pytest.mark.parametrize("name", list(LINE_PROGRAMS))
def test_lines_and_inline_frames_equal_gdb(cores, name):
    core = cores[name]
    expected = theirs(core.parent / name, core)
    assert expected and all(expected.values()), "gdb printed no frames"
    assert any(place for rows in expected.values() for _pc, _name, place in rows), "gdb knows no lines"
    assert ours(core_of(core)) == expected


def test_inlined_frames_are_gdbs(cores):
    """The -O2 crash inside two inlined functions, and main's return address inside a third."""
    frames = core_of(cores["inline_crash"])["threads"][0]["frames"]
    assert [(i["function"], i["line"]) for i in frames[0]["inlined"]] == [("store", 7), ("twice", 8)]
    assert (frames[0]["symbol"], frames[0]["line"]) == ("outer", 9)
    assert [(i["function"], i["line"]) for i in frames[1]["inlined"]] == [("run", 10)]
    assert (frames[1]["symbol"], frames[1]["line"]) == ("main", 14)


@pytest.mark.skipif(GDB is None or OBJCOPY is None, reason="gdb or objcopy not installed")
def test_zstd_compressed_debug_sections_give_gdbs_lines(tmp_path):
    """Debug sections compressed with zstd (objcopy --compress-debug-sections=zstd; gcc -gz=zstd and the debug
    files of Fedora and Arch): the inlined frames and lines are gdb's, as with uncompressed ones (pyelftools
    refuses the compression type, which gave no lines at all)."""
    programs = {"inline_zstd": ("gcc -g -O2 -o inline_zstd {src}/inline_crash.c && "
                                "objcopy --compress-debug-sections=zstd inline_zstd", ["./inline_zstd"])}
    try:
        core = crash(tmp_path / "zstd", "inline_zstd", programs=programs)
    except subprocess.CalledProcessError:
        pytest.skip("this objcopy cannot compress with zstd")
    exe = core.parent / "inline_zstd"
    described = subprocess.run(["readelf", "-t", str(exe)], capture_output=True, text=True, check=True).stdout
    assert "ZSTD" in described
    expected = theirs(exe, core)
    if not any(place for rows in expected.values() for _pc, _name, place in rows):
        pytest.skip("this gdb reads no zstd-compressed DWARF")
    read = ours(core_of(core))
    assert read == expected
    [thread] = read.values()
    assert [row[1:] for row in thread[:2]] == [("store", "inline_crash.c:7"), ("twice", "inline_crash.c:8")]


def test_a_compressed_section_that_does_not_inflate_is_a_value_error():
    """zstd and zlib data corrupt, and an unknown compression type: ValueError, never another exception; a cut
    stream reads short."""
    import zlib

    import zstandard

    from postmortem.core.modules import ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD, unpacked

    text = b"DWARF " * 1000
    packed = zstandard.ZstdCompressor().compress(text)
    assert unpacked(ELFCOMPRESS_ZSTD, packed, len(text)) == text
    assert unpacked(ELFCOMPRESS_ZSTD, packed, 10) == text[:10]
    assert unpacked(ELFCOMPRESS_ZLIB, zlib.compress(text), 100) == text[:100]
    assert text.startswith(unpacked(ELFCOMPRESS_ZSTD, packed[: len(packed) // 2], len(text)))  # cut: short
    for kind, data in ((ELFCOMPRESS_ZSTD, b"garbage here"), (ELFCOMPRESS_ZLIB, b"not zlib"), (3, packed)):
        with pytest.raises(ValueError):
            unpacked(kind, data, len(text))


def addr2line(binary: Path, vaddr: int) -> list[tuple[str, str]]:
    """addr2line -i -f: (function, basename:line) innermost first; discriminators dropped."""
    out = subprocess.run([ADDR2LINE, "-i", "-f", "-e", str(binary), hex(vaddr)], capture_output=True, text=True,
                         check=True, timeout=30).stdout.split("\n")
    pairs = zip(out[0::2], out[1::2], strict=False)
    return [(function, _place(where.split(" ")[0].rpartition(":")[0], int(where.split(" ")[0].rpartition(":")[2])))
            for function, where in pairs if function]


@pytest.mark.skipif(ADDR2LINE is None, reason="addr2line not installed")
@pytest.mark.parametrize("name", ["crash", "inline_crash"])
def test_lines_equal_addr2line(cores, name):
    core = core_of(cores[name])
    modules = {Path(m["path"]).name: m for m in core["modules"]}
    for number, frame in enumerate(core["threads"][0]["frames"]):
        binary = cores[name].parent / frame["module"]
        if not binary.exists() or frame["symbol"] == "_start":
            continue
        base = int(modules[frame["module"]]["start"], 16)
        vaddr = int(frame["pc"], 16) - base - (1 if number else 0)  # both are PIE: link-time address = offset
        mine = [(i["function"], _place(i["file"], i["line"])) for i in frame["inlined"]]
        mine.append((frame["symbol"], _place(frame["file"], frame["line"])))
        assert mine == addr2line(binary, vaddr)


def _split_debug(directory: Path, library: str) -> tuple[Path, str]:
    """Strip `library` in place, its DWARF moved to `library.debug` (linked by .gnu_debuglink); its build-id."""
    if OBJCOPY is None:
        pytest.skip("objcopy not installed")
    lib = directory / library
    debug = directory / f"{library}.debug"
    subprocess.run([OBJCOPY, "--only-keep-debug", str(lib), str(debug)], check=True)
    subprocess.run([OBJCOPY, "--strip-debug", "--strip-unneeded", f"--add-gnu-debuglink={debug}", str(lib)],
                   check=True, cwd=directory)
    note = subprocess.run(["readelf", "-n", str(lib)], capture_output=True, text=True, check=True).stdout
    return debug, note.split("Build ID:")[1].split()[0]


@pytest.fixture
def stripped(tmp_path) -> tuple[Path, Path, str]:
    """The committed null-write core beside its program and a stripped libcrash.so + libcrash.so.debug."""
    (tmp_path / "core").write_bytes(bytes(core_craft.committed("null-write")))
    for name in ("crash", "libcrash.so"):
        shutil.copy(DATA / name, tmp_path / name)
    debug, build_id = _split_debug(tmp_path, "libcrash.so")
    return tmp_path / "core", debug, build_id


def _lib_lines(core: Path, options: Options = Options()) -> list[tuple[str | None, int | None]]:
    frames = core_of(core, options)["threads"][0]["frames"][:3]
    return [(f["symbol"], f["line"]) for f in frames]


LIB_LINES = [("lib_c", 3), ("lib_b", 4), ("lib_a", 5)]


def test_committed_core_has_lines(tmp_path):
    (tmp_path / "core").write_bytes(bytes(core_craft.committed("null-write")))
    for name in ("crash", "libcrash.so"):
        shutil.copy(DATA / name, tmp_path / name)
    frames = core_of(tmp_path / "core")["threads"][0]["frames"]
    assert [(f["symbol"], _place(f["file"], f["line"])) for f in frames[:4]] == [
        ("lib_c", "libcrash.c:3"), ("lib_b", "libcrash.c:4"), ("lib_a", "libcrash.c:5"), ("main", "crash.c:4")]


def test_debug_file_by_gnu_debuglink(stripped):
    core, _debug, _build_id = stripped
    assert _lib_lines(core) == LIB_LINES


def test_debug_file_by_build_id_under_debug_dir(stripped, tmp_path_factory):
    core, debug, build_id = stripped
    root = tmp_path_factory.mktemp("debugroot")
    target = root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    target.parent.mkdir(parents=True)
    debug.rename(target)
    assert _lib_lines(core)[0] == ("lib_c", None)
    assert _lib_lines(core, Options(debug_dirs=[str(root)])) == LIB_LINES


def test_debug_file_in_debuginfod_cache(stripped, tmp_path_factory, monkeypatch):
    core, debug, build_id = stripped
    home = tmp_path_factory.mktemp("home")
    target = home / ".cache" / "debuginfod_client" / build_id / "debuginfo"
    target.parent.mkdir(parents=True)
    debug.rename(target)
    monkeypatch.delenv("DEBUGINFOD_CACHE_PATH", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    assert _lib_lines(core) == LIB_LINES


def test_debug_file_of_another_build_is_not_used(stripped):
    """A `libcrash.so.debug` rebuilt from other source: build-id differs, so its lines are not shown."""
    core, debug, _build_id = stripped
    other = debug.parent / "other"
    other.mkdir()
    (other / "libcrash.c").write_text("\n\n\n\n\nvoid lib_c(int *p) { *p = 1; }\n")
    subprocess.run(["gcc", "-g", "-shared", "-fPIC", "-o", str(debug), str(other / "libcrash.c")], check=True)
    assert [line for _symbol, line in _lib_lines(core)] == [None, None, None]


def test_only_the_cu_of_the_pc_is_parsed(tmp_path):
    """A library of 40 compilation units without .debug_aranges: one pc parses one CU, found from the CU
    headers' top DIEs; a core whose CU budget is spent gets no more lines."""
    if GCC is None or OBJCOPY is None:
        pytest.skip("gcc or objcopy not installed")
    from postmortem.core.lines import MAX_CUS, BudgetSpent, DebugInfo, LineBudget
    from postmortem.core.modules import Files
    from postmortem.core.symbols import find_symbol_address

    sources = []
    for i in range(40):
        source = tmp_path / f"unit{i}.c"
        source.write_text(f"int unit{i}(int x) {{\n  return x * {i + 2};\n}}\n")
        sources.append(str(source))
    lib = tmp_path / "libmany.so"
    subprocess.run(["gcc", "-g", "-O0", "-shared", "-fPIC", "-o", str(lib), *sources], check=True)
    subprocess.run([OBJCOPY, "--remove-section=.debug_aranges", str(lib)], check=True)
    files = Files(None, None, ())
    try:
        image = files.image(str(lib))
        assert image is not None and image.size is not None and ".debug_aranges" not in image.sections
        info = DebugInfo(image.read, image.size)
        vaddr = find_symbol_address(image.read, image.sections, "unit17")
        assert vaddr is not None
        budget = LineBudget()
        place = info.locate(vaddr + 4, budget)
        assert place is not None and os.path.basename(place.file or "") == "unit17.c" and place.line in (1, 2)
        assert budget.cus == MAX_CUS - 1
        with pytest.raises(BudgetSpent):
            info.locate(find_symbol_address(image.read, image.sections, "unit3") or 0, LineBudget(cus=0))
    finally:
        files.close()


def _add_minidebuginfo(directory: Path, program: str) -> None:
    """Strip `program` and give it a MiniDebugInfo the way Fedora's find-debuginfo does: the function
    symbols .dynsym lacks, in an xz-compressed ELF in .gnu_debugdata."""
    if OBJCOPY is None or shutil.which("nm") is None:
        pytest.skip("objcopy or nm not installed")
    binary = directory / program

    def defined(*args: str) -> set[str]:
        out = subprocess.run(["nm", *args, "--format=posix", "--defined-only", str(binary)], capture_output=True,
                             text=True, check=True).stdout
        return {line.split()[0] for line in out.splitlines() if not args or line.split()[1] in "Tt"}

    (directory / "keep").write_text("\n".join(sorted(defined() - defined("-D"))) + "\n")
    mini = directory / "mini"
    subprocess.run([OBJCOPY, "--only-keep-debug", str(binary), str(mini)], check=True)
    subprocess.run([OBJCOPY, "-S", "--remove-section=.comment", f"--keep-symbols={directory / 'keep'}", str(mini)],
                   check=True)
    subprocess.run(["xz", "-f", str(mini)], check=True)
    subprocess.run([OBJCOPY, "--strip-all", f"--add-section=.gnu_debugdata={mini}.xz", str(binary)], check=True)


def test_minidebuginfo_names_the_functions_dynsym_lacks(tmp_path):
    """Both files stripped, each with a MiniDebugInfo: main (in no .dynsym) is named again, as gdb names it."""
    if GCC is None or shutil.which("xz") is None:
        pytest.skip("gcc or xz not installed")
    core = crash(tmp_path, "crash", programs=LINE_PROGRAMS)
    for name in ("crash", "libcrash.so"):
        _add_minidebuginfo(tmp_path, name)
    frames = core_of(core)["threads"][0]["frames"]
    assert [f["symbol"] for f in frames[:4]] == ["lib_c", "lib_b", "lib_a", "main"]
    assert [f["line"] for f in frames[:4]] == [None] * 4  # stripped: symbols, but no lines
    if GDB is not None and "lzma" in subprocess.run([GDB, "--configuration"], capture_output=True, text=True,
                                                    check=False).stdout:
        from test_core import gdb_frames, our_frames
        assert our_frames(core_of(core)) == gdb_frames(tmp_path / "crash", core)


@pytest.mark.parametrize("payload", [b"not json", b"[1, 2]", b'{"x": null}', b'{"4096": [1, 2, []]}',
                                     b'{"4096": ["a.c", "3", []]}', b'{"4096": ["a.c", 3, [["f", "a.c"]]]}',
                                     b'{"4096": ["a.c", true, []]}', b'{"4096": ["a.c", 3, {}]}',
                                     b'{"4096": [null, null, [], 4]}'])
def test_a_kept_answer_of_another_shape_drops_the_whole_entry(payload):
    """The user cache's answers are never trusted: anything but exactly what Answers.keep writes is no entry (the
    pcs are looked up in DWARF again), and an entry of the right shape reads back as written."""
    from postmortem.core.lines import Location, Place, _stored

    good = {"4096": ["a.c", 3, [["inl", "b.h", 7]]], "8192": None}
    import json
    assert _stored(json.dumps(good).encode()) == {4096: Location("a.c", 3, (Place("inl", "b.h", 7),)), 8192: None}
    assert _stored(payload) == {}


def test_a_process_holds_the_answers_of_a_bounded_number_of_builds(monkeypatch, tmp_path):
    """A fleet scan reads cores of many builds: past MAX_OPEN_ANSWERS, the oldest builds' answers are let go once
    kept (and read back from the user cache when a later core needs them)."""
    from postmortem.core import lines

    monkeypatch.setenv("POSTMORTEM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(lines, "MAX_OPEN_ANSWERS", 2)
    monkeypatch.setattr(lines.Answers, "_open", {})
    for n in range(5):
        answers = lines.Answers(f"build{n}:1:/lib{n}.so")
        answers.found[4096 + n], answers.new = lines.Location("a.c", n, ()), 1
        lines.Answers._open[f"build{n}"] = answers
        lines.Answers.keep()
    assert list(lines.Answers._open) == ["build3", "build4"]
    assert lines.Answers("build0:1:/lib0.so").found == {4096: lines.Location("a.c", 0, ())}
