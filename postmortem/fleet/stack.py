"""Socorro-style stack signatures: a native crash named by its top meaningful frames, `module!symbol | ...`.

Two crashes with the same top frames are usually the same bug, whatever the
pids, addresses and load bases. The frames where a crash merely surfaces (libc,
pthread, abort and signal plumbing) and the Python eval loop (every Python
process has it) say nothing about which bug it was; they are skipped by the
rules below, which are data: adding a rule is adding a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

import regex

from ..debugging import RUNTIME_MODULES, module_name, short_name

SKIP_RULES: tuple[tuple[str, str, str], ...] = (
    # (what the pattern is matched against, pattern, why the frame says nothing about the bug)
    ("module", RUNTIME_MODULES.pattern, "C/C++ runtime: where a crash surfaces, not why"),  # a file name: no "/"
    ("symbol", r"^(?:raise|abort|gsignal|__GI_\w+|__pthread_kill\w*|pthread_kill|killpg|__restore_rt|"
               r"<signal handler called>|__kernel_rt_sigreturn|__libc_\w+|start_thread|clone3?|__clone\w*)$",
     "abort and signal plumbing"),
    ("symbol", r"^(?:std::terminate|__cxa_throw|__cxa_rethrow|__cxxabiv1::\w+|__gnu_cxx::__verbose_terminate_handler|"
               r"_ZSt9terminatev|_ZN9__gnu_cxx27__verbose_terminate_handlerEv|_ZN10__cxxabiv1\w+|__cxa_\w+)$",
     "C++ exception machinery"),
    ("symbol", r"^(?:_PyEval_EvalFrame\w*|PyEval_EvalCode\w*|_PyEval_Vector|_PyFunction_Vectorcall|"
               r"_?PyObject_(?:Vectorcall|VectorcallTstate|Call|CallObject|MakeTpCall|FastCall\w*|Call_Prepend)\w*|"
               r"_PyVectorcall_Call|cfunction_\w+|method_vectorcall\w*|vectorcall_\w+|slot_tp_call|"
               r"_?PyRun_\w+|run_mod|run_eval_code_obj|pymain_\w+|Py_RunMain|Py_BytesMain|main_loop)$",
     "the Python interpreter loop: in every Python process"),
    ("symbol", r"^c10::Error::Error|^c10::detail::torchCheckFail|^c10::detail::torchInternalAssertFail",
     "PyTorch's error constructor: where the report is made, not the fault"),
)
"""Frames skipped at the top of a stack; every rule is (field, regex, reason)."""

UNKNOWN_SYMBOLS = frozenset({"", "??", "n/a", "<unknown function>", "<unknown>"})
"""Symbol spellings that mean the debugger or backtrace did not know the function."""

FRAME_FORMATS: tuple[str, ...] = (
    # glibc backtrace_symbols: /lib/x86_64-linux-gnu/libcuda.so.1(cuLaunchKernel+0x1a2) [0x7f...]
    r"^\s*(?P<module>[^\s(\[]+)\((?P<symbol>[^+)]*)(?:\+(?P<offset>0x[0-9a-fA-F]+))?\)\s*\[(?P<pc>0x[0-9a-fA-F]+)\]",
    # PyTorch / c10: frame #3: at::native::foo(...) + 0x2ad (0x7f16b970498b in /path/libtorch.so)
    r"^\s*(?:frame #\d+:\s*)?(?P<symbol>.+?) \+ (?P<offset>0x[0-9a-fA-F]+) \("
    r"(?P<pc>0x[0-9a-fA-F]+) in (?P<module>[^)]+)\)",
)
"""How native frames printed as text look; a frame in no format (a Python frame) is not a native frame."""

STACK_KINDS = ("core-signal", "coredump", "backtrace", "fatal-signal", "segfault")
"""Event kinds whose `frames` field can hold a native stack, most telling first."""

TOP_FRAMES = 3
"""Frames named in a signature."""


@cache
def _rules() -> tuple[tuple[str, regex.Pattern], ...]:
    return tuple((what, regex.compile(pattern)) for what, pattern, _why in SKIP_RULES)


@cache
def _formats() -> tuple[regex.Pattern, ...]:
    return tuple(regex.compile(pattern) for pattern in FRAME_FORMATS)


def native_frame(frame: Any) -> tuple[str, str, str] | None:
    """(module, symbol, offset) of a frame given as a dict (debugger sources, cores) or a text line; None if not
    native."""
    if isinstance(frame, Mapping):
        module = frame.get("module")
        symbol = frame.get("function") or frame.get("symbol")
        offset = frame.get("offset")
        if not module and not symbol:
            return None
        return module_name(str(module)) or "" if module else "", str(symbol or ""), str(offset or "")
    if isinstance(frame, str):
        for pattern in _formats():
            if found := pattern.match(frame):
                return module_name(found["module"].strip()) or "", found["symbol"].strip(), found["offset"] or ""
    return None


def skipped(module: str, symbol: str) -> bool:
    """True when a frame matches a SKIP_RULES rule, or has neither a known symbol nor a module."""
    if symbol in UNKNOWN_SYMBOLS and not module:
        return True
    return any(pattern.search(module if what == "module" else symbol) for what, pattern in _rules())


def signature(frames: Iterable[Any], top: int = TOP_FRAMES) -> str | None:
    """`module!symbol | module!symbol | ...` of the first `top` meaningful frames; None when none is left."""
    named: list[str] = []
    for frame in frames:
        parsed = native_frame(frame)
        if parsed is None:
            continue
        module, symbol, offset = parsed
        if skipped(module, symbol):
            continue
        name = short_name(symbol) if symbol not in UNKNOWN_SYMBOLS else (f"+{offset}" if offset else "??")
        named.append(name if not module else f"{module}{name}" if name.startswith("+") else f"{module}!{name}")
        if len(named) == top:
            break
    return " | ".join(named) or None


def report_signature(cores: Sequence[Any], events: Sequence[Any]) -> str | None:
    """The stack signature of one analysis: the crashed thread of a core (the stack of the fault under
    a handler that re-raised it, when there is one), else the first native stack in an event."""
    for core in cores:
        original = getattr(core, "original_fault", None)
        stacks = [original.frames] if original is not None else \
            [thread.frames for thread in getattr(core, "threads", ()) or () if getattr(thread, "crashed", False)]
        for stack in stacks:
            frames = [{"module": f.module, "function": f.symbol, "offset": f.offset} for f in stack]
            if found := signature(frames):
                return found
    order = {kind: i for i, kind in enumerate(STACK_KINDS)}
    for event in sorted((e for e in events if e.kind in order), key=lambda e: order[e.kind]):
        frames = event.fields.get("frames")
        if isinstance(frames, list) and (found := signature(frames)):
            return found
    return None
