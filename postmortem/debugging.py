"""What the debugger formats share: C++ names, frame summaries, CUDA exception codes.

Three sources read text that GPU debugging tools print: `sanitizer`
(compute-sanitizer, cuda-memcheck), `gdb_log` (gdb and cuda-gdb) and
`coredump_log` (systemd-coredump). They name functions, frames and
exceptions the same way, so those rules live here once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import later

CUDA_EXCEPTIONS: dict[int, str] = {
    1: "Lane Illegal Address", 2: "Lane User Stack Overflow", 3: "Device Hardware Stack Overflow",
    4: "Warp Illegal Instruction", 5: "Warp Out-of-range Address", 6: "Warp Misaligned Address",
    7: "Warp Invalid Address Space", 8: "Warp Invalid PC", 9: "Warp Hardware Stack Overflow",
    10: "Device Illegal Address", 11: "Lane Misaligned Address", 12: "Warp Assert",
    13: "Lane Syscall Error", 14: "Warp Illegal Address", 15: "Lane Non-migratable System Atomic",
    16: "Lane Invalid System Atomic", 17: "Cluster Out-of-range Address", 18: "Cluster Block Not Present",
    19: "Warp Stack Canary", 20: "Warp Tensor Memory Access Check", 21: "Warp Tensor Memory Leak",
    22: "Warp Call Requires Newer Driver", 23: "Warp Misaligned PC", 24: "Warp PC Overflow",
    25: "Warp Misaligned Register", 26: "Warp Illegal Instruction Encoding",
    27: "Warp Illegal Instruction Parameter", 28: "Warp Out-of-range Register",
    29: "Warp Invalid Constant Address", 30: "Warp MMU Fault", 31: "Warp Barrier Arrival Mismatch",
    32: "Cluster Shared Memory Issue", 33: "Warp API Stack Error", 34: "Warp Block Not Present",
    35: "Warp User Stack Overflow", 36: "TMA Syscall Error",
}
"""cuda-gdb's CUDA_EXCEPTION_<n> numbers and display names (cudadebugger.h;
../shared/reference/cuda-exceptions.tsv keeps the sources)."""

_EXCEPTION_NUMBERS = {name.lower(): number for number, name in CUDA_EXCEPTIONS.items()}

EXCEPTION_NAMES = later.compile(
    "|".join(re.escape(name) for name in sorted(CUDA_EXCEPTIONS.values(), key=len, reverse=True)))
"""Any exception display name, longest first (memcheck prints them bare as report headers)."""

RUNTIME_MODULES = later.plain(
    r"(?:^|/)(?:libc|libpthread|libdl|librt|libm|ld-linux[\w.-]{0,32}|ld64|libstdc\+\+|libgcc_s|libc\+\+abi|libc\+\+)"
    r"(?:[.-][\w.]{0,32})?\.so(?:\.[\w.]{1,32})?$")
"""Modules of the C/C++ runtime: where a crash surfaces (raise, abort, memcpy), rarely why. The name's three
dotted parts overlap, so each is bounded (a real one is a few characters): unbounded, a long run of dots was
split every way."""

_RUNTIME_FUNCTIONS = frozenset({
    "??", "n/a", "raise", "abort", "gsignal", "__GI_raise", "__GI_abort", "__pthread_kill_implementation",
    "__pthread_kill_internal", "pthread_kill", "<signal handler called>", "__restore_rt", "killpg",
})


def exception_number(name: str) -> int | None:
    """CUDA exception number of a display name such as "Warp Illegal Address"."""
    return _EXCEPTION_NUMBERS.get(name.strip().rstrip(".").lower())


def short_name(signature: str) -> str:
    """A C++ function as people say it: no return type, parameters, clones or launch config.

    "void convert_unary<float, __half>(void const*, long)<<<(32,1,1),(256,1,1)>>>"
    becomes "convert_unary<float, __half>"; cut-off names keep what is there.
    """
    text = signature.strip().replace("(anonymous namespace)", "{anonymous}")
    depth, cut = 0, len(text)
    for i, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif char == "(" and depth == 0 and i > 0 and not text[:i].endswith("operator"):
            cut = i
            break
    name = text[:cut].strip()
    depth, start = 0, 0
    for i, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif char == " " and depth == 0 and not name[:i].endswith("operator"):
            start = i + 1
    return (name[start:] or name).replace("{anonymous}", "(anonymous namespace)")


def module_name(path: str | None) -> str | None:
    """The file name of a module path ("/usr/lib/libcudart.so.10.1" -> "libcudart.so.10.1")."""
    return path.rstrip("/").rsplit("/", 1)[-1] if path else None


def is_runtime_frame(frame: Mapping[str, Any]) -> bool:
    """True for frames of libc, libstdc++, libgcc and signal plumbing."""
    module = frame.get("module")
    if module and RUNTIME_MODULES.search(module):
        return True
    return frame.get("function") in _RUNTIME_FUNCTIONS and not module


def crash_site(frames: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`top_frame` and `top_module`: the first frame outside the C/C++ runtime.

    That frame, not raise() or memcpy(), is usually where to start reading.
    """
    outside = [frame for frame in frames if not is_runtime_frame(frame)]
    if not outside:
        return {}
    top = outside[0]
    function = top.get("function") or "??"
    if function in ("??", "n/a"):
        function = f"?? at {top['pc']}" if top.get("pc") else "??"
        caller = next((f for f in outside if f.get("function") not in (None, "??", "n/a")), None)
        if caller:
            function += f" (called from {caller['function']} in {module_name(caller.get('module')) or 'the program'})"
    return {"top_frame": function, "top_module": module_name(top.get("module")) or "the program"}


def functions_of(frames: Iterable[Mapping[str, Any]]) -> list[str]:
    """The function names of frames, in order (what signatures match on)."""
    return [str(frame.get("function") or "??") for frame in frames]
