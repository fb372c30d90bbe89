"""Item 7: lines built to make a pattern backtrack cost linear time, and the real evidence beside them is still found.

The attack's three files: an out-of-memory anchor followed by 8,000 digits (a size pattern retried from every
digit took 20 s), a CUDA error followed by 8,000 dots (a file:line pattern, 2.8 s), and a 31-line mix of
anchors from every source with runs of each adversarial kind (over a minute). Each file also holds one real
report that must still reach the verdict.
"""

from __future__ import annotations

from pathlib import Path

from .harness import GiB, Hostile, Run

RUN = 8000
"""Characters of each adversarial run: a line just under the most of a line any pattern is given (text.MAX_LINE)."""

REAL_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
            "of 79.15 GiB of which 3.19 MiB is free.\n")
REAL_XID = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"

RUNS = ("0" * RUN, "." * RUN, " " * RUN, "\t" * RUN, "a" * RUN, "0x" * (RUN // 2), "/" * RUN, ":" * RUN,
        "=" * RUN, "é中" * (RUN // 2), "a " * (RUN // 2))
"""The kinds of run the attack used: digits, dots, blanks, tabs, letters, `0x`, slashes, colons, `=`, non-ASCII,
and word/blank alternation."""

MIX_ANCHORS = (
    "OOM when allocating ", "Allocation on device ", "OutOfMemoryError", "CUDA out of memory. Tried to allocate ",
    "NVIDIA driver on your system is too old", "CUDA error: invalid device function",
    "CUDA error: unspecified launch failure", "RuntimeError: CUDA error: an illegal memory access was encountered",
    "NCCL WARN ", "NCCL INFO NCCL version ", "NCCL INFO ", "nccl_trace_rank_", "NVRM: Xid (PCI:", "segfault at ",
    "general protection fault", "Assertion `", "block: [", "out of resource: ", "exited with exit code ",
    "Workers (tasks / actors) killed due to memory pressure (OOM)", "Program hit ", "========= ",
    "BUG: unable to handle ", "Segmentation fault", "Thread 1 \"python\" received signal SIGSEGV",
    "#0  0x", "of which ", " is free", "CUBLAS_STATUS_", "Traceback (most recent call last):", "> ",
)
"""31 anchors spanning the framework, NCCL, kernel, job, sanitizer and debugger sources and the relay prefixes."""


def _lines(anchors: tuple[str, ...], runs: tuple[str, ...]) -> str:
    """One line per anchor: its run after it, before it, then on both sides (half each), in turn."""
    out = []
    for i, anchor in enumerate(anchors):
        run = runs[i % len(runs)]
        half = run[: RUN // 2]
        out.append((anchor + run, run + anchor, half + anchor + half)[i % 3])
    return "\n".join(out) + "\n"


def _digits_after_oom(directory: Path) -> Run:
    (directory / "train.log").write_text(_lines(("OOM when allocating ", "Allocation on device ", "OutOfMemoryError"),
                                                ("0" * RUN,)) + REAL_OOM)
    return Run(["analyze", "train.log", "--no-color"], evidence=("gpu-oom", "Tried to allocate 20.00 MiB"))


def _dots_after_cuda_errors(directory: Path) -> Run:
    anchors = ("NVIDIA driver on your system is too old", "CUDA error: invalid device function",
               "CUDA error: unspecified launch failure")
    (directory / "train.log").write_text("".join(f"{anchor}{'.' * RUN}\n" for anchor in anchors) + REAL_XID)
    return Run(["analyze", "train.log", "--no-color"], evidence=("Xid", "79", "invalid device function"))


ERROR_NUMBER_LOG = 2_400_000
"""Bytes of the log of the attack on the CUDA error-number pattern: 72 s reported, 2 min 52 s measured here before
its fix (90 s of CPU on a shared machine), 0.9 s after."""


def _cuda_error_number_log(directory: Path) -> Run:
    """Lines of `CUDA error` and a run of blanks where the number would be: the pattern that reads `error 700`
    tried every split of the blanks between its two optional-blank parts, half a second a line."""
    line = "RuntimeError: CUDA error" + " " * (RUN - 34) + "\n"
    (directory / "train.log").write_text(line * (ERROR_NUMBER_LOG // len(line)) + REAL_XID)
    return Run(["analyze", "train.log", "--no-color"], evidence=("Xid", "79", "fallen off the bus"))


def _mixed_lines(directory: Path) -> Run:
    assert len(MIX_ANCHORS) == 31
    (directory / "mixed.log").write_text(_lines(MIX_ANCHORS, RUNS) + REAL_XID)
    return Run(["analyze", "mixed.log", "--no-color"], evidence=("Xid", "79", "fallen off the bus"))


WALL_S = 4
"""Measured here: 0.3-0.5 s each (1.3 s at most while the machine ran other suites), most of it start-up;
before the fix 76 s, 15 s and 40 s."""
ADDRESS_SPACE = GiB // 2
"""Peak RSS measured: 70 MiB each; half a GiB of address space leaves the interpreter and its libraries room."""

CASES = [
    Hostile(7, "digits-after-oom-anchors", _digits_after_oom, wall_s=WALL_S, address_space=ADDRESS_SPACE),
    Hostile(7, "dots-after-cuda-errors", _dots_after_cuda_errors, wall_s=WALL_S, address_space=ADDRESS_SPACE),
    Hostile(7, "31-line-adversarial-mix", _mixed_lines, wall_s=WALL_S, address_space=ADDRESS_SPACE),
    Hostile(6, "cuda-error-number-2.4MB", _cuda_error_number_log, wall_s=WALL_S, address_space=ADDRESS_SPACE),
]
