"""The fault under a crash handler: the kernel's rt_sigframe, read back from the crashed thread's stack.

Python's faulthandler, PyTorch's and other libraries' handlers catch SIGSEGV, then
re-raise it (SI_TKILL) or abort, so the core's NT_SIGINFO names the handler's signal,
not the fault. The kernel left the fault's siginfo and registers in the frame it
built to run the handler:

    x86-64 (arch/x86/include/asm/sigframe.h): { char *pretcode; struct ucontext uc; struct siginfo info; }
    aarch64 (arch/arm64/kernel/signal.c):     { struct siginfo info; struct ucontext uc; }

The unwinder meets that frame as the signal trampoline the handler returns to, and
records its stack pointer; core/arch.py says where the siginfo and the registers are
from there. The frame's saved pc must be the pc of the frame the unwinder found under
the trampoline. The kernel fills `info` only for an SA_SIGINFO handler (faulthandler's
is not one); otherwise the fault is told by what the sigcontext itself records: x86-64's
CPU exception (trapno, err, cr2), aarch64's fault_address.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import replace

from ..debugging import is_runtime_frame
from . import notes
from .analysis import (
    SIGNAL_FRAME,
    CoreRead,
    _crash_site,
    _ModuleFinder,
    _named,
    _RawFrame,
    _symbolize,
    signal_record,
    unwind_thread,
)
from .arch import AARCH64, X86_64, Arch
from .memory import Memory
from .report import Frame, OriginalFault, Thread
from .symbols import demangle
from .unwind import Budget

CONTEXT_BYTES = 1024
"""Bytes read from the trampoline's stack pointer: every field used lies in the first 600."""
X86_64_TRAP_WORDS = ("eflags", "csgsfs", "err", "trapno", "oldmask", "cr2")
"""The x86-64 sigcontext's words after rip: the CPU exception that raised the signal, its error code and
faulting address (asm/sigcontext.h)."""
TRAPS = {6: (4, 2), 13: (11, 0x80)}
"""x86 exceptions the kernel turns into a signal (arch/x86/kernel/traps.c): #UD -> SIGILL ILL_ILLOPN,
#GP -> SIGSEGV SI_KERNEL; #PF (PAGE_FAULT) is decoded from its error code."""
PAGE_FAULT = 14
PF_PROTECTION, PF_USER = 1, 4
"""Page-fault error code bits: a protection violation (SEGV_ACCERR, else SEGV_MAPERR), in user mode."""
MIN_CODE, MAX_CODE = -60, 0x80
"""si_code runs from SI_ASYNCNL (-60) to SI_KERNEL (0x80): outside that, the bytes are not a siginfo."""
SIGINFO_SIZE = 128
"""struct siginfo."""
MAX_SIGNAL = 64
"""The highest Linux signal number (SIGRTMAX): a larger si_signo is not a siginfo."""
FAULT_SIGNALS = frozenset({4, 7, 8, 11})
"""SIGILL, SIGBUS, SIGFPE, SIGSEGV: the signals whose sigcontext fault address means something."""


def add_original_fault(result: CoreRead, raw_threads: list[tuple], memory: Memory, finder: _ModuleFinder,
                       arch: Arch) -> None:
    """When the crashed thread ran a signal handler, record the fault under it and make it the crash site."""
    core = result.core
    crashed = next((raw for raw in raw_threads if raw[1]), None)
    thread = next((t for t in core.threads if t.crashed), None) if core is not None else None
    if core is None or crashed is None or thread is None:
        return
    tid, _crashed, _registers, frames = crashed
    found = find_frame(frames, memory, arch, core.signal.number if core.signal else 0)
    names = [frame.symbol for frame in thread.frames]
    if found is None or SIGNAL_FRAME not in names or names.index(SIGNAL_FRAME) == 0:
        return
    address, info, context = found
    handler = thread.frames[names.index(SIGNAL_FRAME) - 1]
    unwound = unwind_thread(context, memory, finder, Budget(), arch).frames
    [(_tid, _c, _r, rows)], symbols = _symbolize([(tid, True, context, unwound)], finder)
    plain = demangle(symbols)
    fault = OriginalFault(signal_record(info, finder), hex(address), handler_name(handler, core.python_version),
                          handler, {name: hex(value) for name, value in context.items()},
                          tuple(_named(row, plain) for row in rows))
    result.core = replace(core, original_fault=fault)
    _crash_site(result, [Thread(tid, True, fault.registers, fault.frames)], finder)


def find_frame(frames: list[_RawFrame], memory: Memory, arch: Arch,
               reraised: int) -> tuple[int, notes.SignalInfo, dict[str, int]] | None:
    """(address, siginfo, registers) of the innermost kernel signal frame of a thread, or None.

    It lies at the stack pointer of the innermost signal trampoline frame; its saved pc must be
    the pc of the frame the unwinder found under the trampoline.
    """
    at = next((i for i, frame in enumerate(frames) if frame.signal_frame), None)
    sp = frames[at].sp if at else None
    if at is None or sp is None:
        return None
    decoded = decode(memory.read(sp, CONTEXT_BYTES) or b"", arch, reraised)
    resumed = frames[at + 1].pc if at + 1 < len(frames) else None
    if decoded is None or (resumed is not None and decoded[1][arch.pc] != resumed):
        return None
    return sp + arch.sigframe_start, *decoded


def decode(context: bytes, arch: Arch, reraised: int) -> tuple[notes.SignalInfo, dict[str, int]] | None:
    """The siginfo and the interrupted registers of a kernel signal frame, from the bytes at the
    trampoline's stack pointer; None when they cannot be those."""
    names = arch.sigcontext_registers
    if len(context) < max(arch.sigframe_registers + 8 * (len(names) + len(X86_64_TRAP_WORDS)),
                          arch.sigframe_info + SIGINFO_SIZE):
        return None
    registers = dict(zip(names, struct.unpack_from(f"<{len(names)}Q", context, arch.sigframe_registers),
                         strict=True))
    info = notes.signal_info(context[arch.sigframe_info:arch.sigframe_info + SIGINFO_SIZE])
    if info is None or not 0 < info.number <= MAX_SIGNAL or not MIN_CODE <= info.code <= MAX_CODE:
        info = FAULT_IN_CONTEXT[arch.name](context, arch, reraised)
    if info is None or not registers[arch.pc]:
        return None
    return info, registers


def _x86_64_exception(context: bytes, arch: Arch, _reraised: int) -> notes.SignalInfo | None:
    words = dict(zip(X86_64_TRAP_WORDS, struct.unpack_from(
        f"<{len(X86_64_TRAP_WORDS)}Q", context, arch.sigframe_registers + 8 * len(arch.sigcontext_registers)),
        strict=True))
    return from_trap(words["trapno"], words["err"], words["cr2"])


def _aarch64_fault_address(context: bytes, arch: Arch, reraised: int) -> notes.SignalInfo | None:
    """struct sigcontext starts with fault_address, just before the registers; the signal is the one
    the handler re-raised (its si_code is not in the frame)."""
    if reraised not in FAULT_SIGNALS:
        return None
    address, = struct.unpack_from("<Q", context, arch.sigframe_registers - 8)
    return notes.SignalInfo(reraised, notes.CODE_UNKNOWN, address, None, None)


FAULT_IN_CONTEXT: dict[str, Callable[[bytes, Arch, int], notes.SignalInfo | None]] = {
    X86_64.name: _x86_64_exception, AARCH64.name: _aarch64_fault_address}
"""How each architecture's sigcontext tells the fault when the kernel wrote no siginfo."""


def from_trap(trapno: int, err: int, cr2: int) -> notes.SignalInfo | None:
    """The signal a CPU exception raised, as the kernel would have filled its siginfo; None for others."""
    if trapno == PAGE_FAULT and err & PF_USER:
        return notes.SignalInfo(11, 2 if err & PF_PROTECTION else 1, cr2, None, None)
    if trapno in TRAPS:
        number, code = TRAPS[trapno]
        return notes.SignalInfo(number, code, None, None, None)
    return None


def handler_name(handler: Frame, python_version: str | None) -> str:
    """How a report names the handler: "faulthandler" for CPython's, else module!function.

    CPython's faulthandler_fatal_error ends in `raise(signum)`, compiled as a tail call: its frame
    is gone and libc's raise sits right above the trampoline. In a CPython process, a C runtime
    frame there is taken for faulthandler (which `postmortem run` switches on).
    """
    symbol = handler.symbol or ""
    if symbol.startswith("faulthandler") or (
            python_version is not None and is_runtime_frame({"module": handler.module, "function": symbol})):
        return "faulthandler"
    return f"{handler.module or '?'}!{symbol or '??'}"
