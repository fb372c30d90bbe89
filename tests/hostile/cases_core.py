"""Items 1, 5, 8 and 10: hostile cores and GPU core dumps, made from the committed real ones.

Each keeps the real crash (SIGSEGV in lib_c of tests/data/core/null-write.core.zst, the
Warp Illegal Address of tests/data/nvcudmp) and damages one thing: the files NT_FILE names,
the CFI of the crashing function, the program headers, the section headers. The bounds are
the measured peak (harness Outcome.wall_s, peak_rss_kib) with a margin of about three.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nvcudmp_builder import Spec, build, lane_tables_sharing_a_region

from . import core_craft
from .harness import Hostile, Run

SECRET = "PLANTED-SECRET-7341"
CRASH = ("SIGSEGV", "lib_c")
CUBIN = Path(__file__).parent.parent / "data" / "fatbin" / "k_sm90.cubin"


def _secrets_over_the_stack(directory: Path) -> Run:
    """Item 1: the stack's strings cut from the dump, NT_FILE naming a planted secrets file over them
    in one core and /proc/self/environ in the other (AT_EXECFN at offset 0 of each). The child's
    environment starts with this process's first variable (the harness puts os.environ first), so
    that is what a leak through /proc/self/environ would show, JSON-escaped."""
    (directory / "credentials").write_text(f"aws_secret_access_key={SECRET} " * 200)
    for name, path in (("core.file", str(directory / "credentials")), ("core.proc", "/proc/self/environ")):
        core = core_craft.committed("null-write")
        core_craft.strings_over_file(core, path, path)
        (directory / name).write_bytes(core)
    _beside(directory)
    first = "=".join(next(iter(os.environ.items()), ("PYTHONDONTWRITEBYTECODE", "1")))
    return Run(["analyze", "--format", "json", "--show-env", "core.file", "core.proc"], evidence=CRASH,
               absent=(SECRET, json.dumps(first)[1:-1][:200]))


def _beside(directory: Path) -> None:
    for name in ("crash", "libcrash.so"):
        (directory / name).write_bytes((core_craft.DATA / name).read_bytes())


def _cfi(instructions: bytes, *evidence: str):
    def build_case(directory: Path) -> Run:
        core_craft.crash_with_cfi(directory, instructions)
        return Run(["analyze", "core"], evidence=(*CRASH, "lib_b", "main", *evidence))
    return build_case


def _notes_twenty_times(directory: Path) -> Run:
    """Item 8: 20 PT_NOTE headers over the same notes, which hold a 48 MiB xsave note."""
    core_craft.notes_read_many_times(directory / "core", 20, 48 << 20)
    _beside(directory)
    return Run(["analyze", "--format", "json", "core"], evidence=(*CRASH, '"tid": 23097'))


def _lane_tables_sharing_a_region(directory: Path) -> Run:
    """Item 8: a GPU core dump whose lane table is repeated to 32 MiB and named by 2,000 more sections."""
    dump = lane_tables_sharing_a_region(build(Spec(CUBIN.read_bytes())), 32 << 20, 2000)
    (directory / "core_1700000000_node7_4242.nvcudmp").write_bytes(dump)
    return Run(["analyze", "core_1700000000_node7_4242.nvcudmp"], evidence=("Warp Illegal Address", "crash(int*)"))


def _threads_past_the_budget(directory: Path) -> Run:
    """Item 5: 10,500 more threads without frame pointers, whose crashing frame's CFA expression loops:
    each thread falls back to a stack scan, until the core's unwinding budget is spent."""
    core = core_craft.crash_with_cfi(directory, core_craft.SKIP_LOOP)
    threads = bytearray(core.read_bytes())
    core_craft.many_threads(threads, 10_500)
    core.write_bytes(threads)
    return Run(["analyze", "core"], evidence=(*CRASH, "lib_b", "main", "unwinding stopped at thread",
                                              "the first 10000 are read"))


MiB = 1 << 20
CASES = [  # measured: wall 0.1-0.8 s; least address space that passes 79 MiB (95 MiB: notes, threads)
    Hostile(1, "core-names-secrets-over-its-stack", _secrets_over_the_stack, wall_s=5, address_space=256 * MiB),
    Hostile(5, "cfa-expression-skip-loop", _cfi(core_craft.SKIP_LOOP, "DW_OP_skip"), wall_s=5,
            address_space=256 * MiB),
    Hostile(5, "cfa-expression-bra-loop", _cfi(core_craft.BRA_LOOP, "DW_OP_skip/bra"), wall_s=5,
            address_space=256 * MiB),
    Hostile(5, "ten-thousand-threads-past-the-budget", _threads_past_the_budget, wall_s=5, address_space=320 * MiB),
    Hostile(8, "cfi-remember-state-bomb", _cfi(core_craft.REMEMBER_BOMB, "remember_state"), wall_s=5,
            address_space=256 * MiB),
    Hostile(8, "twenty-note-headers-one-region", _notes_twenty_times, wall_s=5, address_space=320 * MiB),
    Hostile(8, "lane-tables-sharing-one-region", _lane_tables_sharing_a_region, wall_s=5, address_space=256 * MiB),
    Hostile(10, "cfi-restore-state-underflow", _cfi(core_craft.RESTORE_UNDERFLOW, "restore_state"), wall_s=5,
            address_space=256 * MiB),
    Hostile(10, "cfa-expression-stack-underflow", _cfi(core_craft.POP_EMPTY, "pops more values"), wall_s=5,
            address_space=256 * MiB),
]
