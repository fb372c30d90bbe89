"""Unwinding that never gives up silently (issue 14): bad pcs, CFI wherever it is, deep stacks.

Like tests/test_core.py, each case is a C program from tests/data/core/src built and crashed at test
time, and gdb's frames (function and pc, per thread) are the oracle.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gdb_oracle import GDB, gdb_threads, on_the_stack, pairs, run_gdb
from postmortem.core.report import Frame
from postmortem.debugging import short_name
from postmortem.pipeline import analyze
from postmortem.render import html_report, text_report
from test_core import GCC, crash, glibc_spelling

DEBUG_ONLY = "-O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables"
PROGRAMS = {
    "null_pie": ("gcc -g -O0 -pie -fPIE -o null_pie {src}/null_call.c", ["./null_pie"]),
    "null_nopie": ("gcc -g -O0 -no-pie -fno-PIE -o null_nopie {src}/null_call.c", ["./null_nopie"]),
    # no .eh_frame_hdr: gcc does not pass --eh-frame-hdr to the linker for -static
    "cfi_static": ("gcc -static -O2 -g -fomit-frame-pointer -o cfi_static {src}/cfi_only.c", ["./cfi_static"]),
    # the program's own functions have CFI only in .debug_frame
    "cfi_debug_frame": (f"gcc {DEBUG_ONLY} -o cfi_debug_frame {{src}}/cfi_only.c", ["./cfi_debug_frame"]),
    # ... and that .debug_frame only in a separate debug file, found by .gnu_debuglink
    "cfi_separate": (f"gcc {DEBUG_ONLY} -o cfi_separate {{src}}/cfi_only.c && "
                     "objcopy --only-keep-debug cfi_separate cfi_separate.debug && strip --strip-debug cfi_separate "
                     "&& objcopy --add-gnu-debuglink=cfi_separate.debug cfi_separate", ["./cfi_separate"]),
    # a dlopen()ed plugin deleted before it crashes: its CFI is only in the core (coredump_filter 0x3f)
    "deleted_plugin": ("gcc -O2 -g -fomit-frame-pointer -shared -fPIC -o libplugin.so {src}/plugin.c && "
                       "cp libplugin.so plugin.keep && gcc -O0 -g -o deleted_plugin {src}/deleted_plugin.c -ldl",
                       ["./deleted_plugin"]),
    "recurse": ("gcc -g -O0 -o recurse {src}/recurse.c", ["sh", "-c", "ulimit -s 256 && exec ./recurse"]),
    "thread_overflow": ("gcc -g -O0 -pthread -o thread_overflow {src}/thread_overflow.c", ["./thread_overflow"]),
    "recurse_deep": ("gcc -g -O0 -o recurse_deep {src}/recurse.c",
                     ["sh", "-c", "ulimit -s 20000 && exec ./recurse_deep"]),
}
CFI_CASES = ("cfi_static", "cfi_debug_frame", "cfi_separate")


@pytest.fixture(scope="module")
def cores(tmp_path_factory) -> dict[str, Path]:
    if GCC is None or shutil.which("objcopy") is None:
        pytest.skip("gcc/binutils not installed: the test programs cannot be built")
    root = tmp_path_factory.mktemp("unwind")
    return {name: crash(root / name, name, programs=PROGRAMS) for name in PROGRAMS if name != "recurse_deep"}


def gdb_pcs(exe: Path, core: Path) -> dict[int, list[tuple[int, str | None]]]:
    """gdb's (pc, function) per frame per thread; inline and tail-call frames (not physical, see
    tests/gdb_oracle.py) left out.
    gdb runs where the program ran: it finds a dlopen()ed library by the relative name it was loaded by."""
    return pairs(on_the_stack(gdb_threads(exe, core, cwd=exe.parent)), short_name)


def our_pcs(report) -> dict[int, list[tuple[int, str | None]]]:
    """(pc, function) per frame per thread, cut after main (gdb does not show frames past main)."""
    found = {}
    for thread in report.cores[0].threads:
        frames = [(int(f.pc, 16), short_name(f.symbol) if f.symbol else None) for f in thread.frames]
        names = [name for _, name in frames]
        found[thread.tid] = frames[: names.index("main") + 1] if "main" in names else frames
    return found


def same_function(ours: str | None, theirs: str | None) -> bool:
    """One function under glibc's aliases: gdb names it from DWARF (__libc_start_main_impl,
    __clone_internal), we from the symbol table (a static binary's __libc_start_main, __GI___clone_internal)."""
    ours, theirs = glibc_spelling(ours), glibc_spelling(theirs)
    return ours == theirs or (ours is not None and theirs == ours + "_impl")


def assert_equal_gdb(report, exe: Path, core: Path, crashed_only: bool = False) -> None:
    """Our frames equal gdb's, pc and function, in every thread (or only the crashed one)."""
    theirs, ours = gdb_pcs(exe, core), our_pcs(report)
    assert theirs and ours.keys() == theirs.keys()
    for tid, frames in theirs.items():
        if crashed_only and tid != report.cores[0].threads[0].tid:
            continue
        assert [pc for pc, _ in ours[tid]] == [pc for pc, _ in frames]
        assert all(same_function(a, b) for (_, a), (_, b) in zip(ours[tid], frames)), (ours[tid], frames)


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
@pytest.mark.parametrize("name", ["null_pie", "null_nopie"])
def test_call_through_null_pointer_equals_gdb(cores, name):
    """pc 0: the caller is the return address the call left at the stack pointer (0x0 <- dispatch <- main)."""
    report = analyze([str(cores[name])])
    assert_equal_gdb(report, cores[name].parent / name, cores[name])
    frames = report.cores[0].threads[0].frames
    assert [(f.pc, f.symbol) for f in frames[:4]] == [
        ("0x0", None), (frames[1].pc, "dispatch"), (frames[2].pc, "run_loop"), (frames[3].pc, "main")]
    assert [f.how for f in frames[:3]] == ["registers", "scan", "cfi"]
    assert report.cores[0].threads[0].guessed_from == 1
    event = next(e for e in report.events if e.kind == "core-signal")
    assert event.fields["top_frame"] == "?? at 0x0" and "stack_overflow" not in event.fields


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
@pytest.mark.parametrize("name", CFI_CASES)
def test_cfi_without_eh_frame_hdr_or_only_in_debug_frame_equals_gdb(cores, name):
    """-O2 -fomit-frame-pointer: every caller comes from CFI, found in .eh_frame without its header,
    in .debug_frame, or in the separate debug file's .debug_frame."""
    report = analyze([str(cores[name])])
    assert_equal_gdb(report, cores[name].parent / name, cores[name])
    [thread] = report.cores[0].threads
    assert [f.symbol for f in thread.frames[:4]] == ["leaf", "level3", "level2", "level1"]
    assert [f.how for f in thread.frames] == ["registers"] + ["cfi"] * (len(thread.frames) - 1)
    assert thread.guessed_from is None and thread.truncated is None


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
def test_cfi_of_a_deleted_plugin_comes_from_the_core(cores):
    """Read while the plugin's file is gone; gdb is given the file back (it cannot read CFI from a core)."""
    core = cores["deleted_plugin"]
    report = analyze([str(core)])
    shutil.copy(core.parent / "plugin.keep", core.parent / "libplugin.so")
    try:
        theirs = gdb_pcs(core.parent / "deleted_plugin", core)
    finally:
        (core.parent / "libplugin.so").unlink()
    [(tid, frames)] = theirs.items()
    ours = our_pcs(report)[tid]
    assert [pc for pc, _ in ours] == [pc for pc, _ in frames]
    assert [name for _, name in frames[:4]] == ["plugin_leaf", "plugin_step", "plugin_run", "main"]
    [thread] = report.cores[0].threads
    assert [(f.module, f.how) for f in thread.frames[:4]] == [
        ("libplugin.so", "registers"), ("libplugin.so", "cfi"), ("libplugin.so", "cfi"), ("deleted_plugin", "cfi")]
    assert any("libplugin.so (deleted)" in d and "CFI was read from the core's memory" in d
               for d in report.inputs[0].diagnostics)


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
def test_recursion_to_stack_overflow_equals_gdb_and_is_named(cores):
    core = cores["recurse"]
    report = analyze([str(core)])
    assert_equal_gdb(report, core.parent / "recurse", core)
    [thread] = report.cores[0].threads
    names = [f.symbol for f in thread.frames]
    depth = names.index("main")
    assert depth > 2000 and set(names[:depth]) == {"recurse"} and thread.truncated is None
    event = next(e for e in report.events if e.kind == "core-signal")
    assert event.fields["stack_overflow"] is True
    assert report.verdict.signature == "core-stack-overflow"
    text = text_report.render(report)
    assert f"frames 0-{depth - 1:,}: recurse x {depth:,}" in text and f"#{depth} " in text and "!main+" in text
    html = html_report.render(report)
    assert f"frames 0-{depth - 1:,}: recurse x {depth:,}" in html and html.count("<li class=") < 20


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
def test_overflow_into_a_threads_guard_page_equals_gdb_and_is_named(cores):
    """A thread's stack ends at glibc's guard page (a PROT_NONE mapping), not at the kernel's gap."""
    core = cores["thread_overflow"]
    report = analyze([str(core)])
    assert_equal_gdb(report, core.parent / "thread_overflow", core, crashed_only=True)  # main races pthread_create
    crashed = report.cores[0].threads[0]
    assert len(crashed.frames) > 2000 and {f.symbol for f in crashed.frames[:-3]} == {"recurse"}
    assert next(e for e in report.events if e.kind == "core-signal").fields["stack_overflow"] is True
    assert report.verdict.signature == "core-stack-overflow"


def test_frames_past_the_bound_are_counted_not_dropped(cores, monkeypatch):
    """A thread cut at MAX_FRAMES says so: the reason, the stack left and about how many frames it holds."""
    from postmortem.core import analysis
    monkeypatch.setattr(analysis, "MAX_FRAMES", 1000)
    report = analyze([str(cores["recurse"])])
    [thread] = report.cores[0].threads
    assert len(thread.frames) == 1000 and thread.truncated == "the 1,000 frames read per thread are found"
    monkeypatch.undo()
    total = len(analyze([str(cores["recurse"])]).cores[0].threads[0].frames)
    assert thread.frames_left is not None and abs(thread.frames_left - (total - 1000)) < (total - 1000) // 10
    assert thread.stack_left and thread.stack_left > 100 * (total - 1000) // 2
    diagnostics = " ".join(report.inputs[0].diagnostics)
    assert f"unwinding stopped at frame 1,000: the 1,000 frames read per thread are found (about " \
           f"{thread.frames_left:,} more frames" in diagnostics
    assert "the stack is cut short" in text_report.render(report)


@pytest.mark.skipif(GCC is None, reason="gcc not installed")
def test_two_hundred_thousand_frames_all_unwind_to_main_as_gdb_has_it(tmp_path):
    """The default-sized stack of a runaway recursion (about 213,000 frames here): all of them, with main
    at the end where gdb has it (how fast is benchmarks/bench_core.py's promise, not a unit test's)."""
    core = crash(tmp_path, "recurse_deep", programs=PROGRAMS)
    report = analyze([str(core)])
    [thread] = report.cores[0].threads
    names = [f.symbol for f in thread.frames]
    assert len(names) > 200_000 and names[names.index("main") - 1] == "recurse" and thread.truncated is None
    if GDB is not None:  # gdb's last frames and count ("bt -3" numbers them from the outermost)
        out = run_gdb([f"file {core.parent / 'recurse_deep'}", f"core-file {core}", "bt -3"])
        last = [line.split()[0] for line in out.splitlines() if line.startswith("#")]
        assert last and int(last[-1][1:]) == names.index("main")


def test_fold_keeps_lone_frames_and_folds_cycles():
    from postmortem.render.view import fold_frames

    def frames(names: str) -> list[Frame]:
        return [Frame(hex(i), "m", None, n, None, "cfi") for i, n in enumerate(names)]

    runs = fold_frames(frames("xabababcccz"))
    assert [(r.first, r.last, [f.symbol for f in r.cycle], r.repeats) for r in runs] == [
        (0, 0, ["x"], 1), (1, 6, ["a", "b"], 3), (7, 9, ["c"], 3), (10, 10, ["z"], 1)]
    assert [r.repeats for r in fold_frames(frames("aab"))] == [1, 1, 1]
    assert fold_frames([]) == []
