"""The fault under a crash handler: the kernel's rt_sigframe, read back from the crashed thread's stack.

Python's faulthandler, PyTorch's and other libraries' handlers catch SIGSEGV, then
re-raise it (SI_TKILL) or abort, so the core's NT_SIGINFO names the handler's signal,
not the fault. The kernel left the fault's siginfo and registers in the frame it
built to run the handler (arch/x86/include/asm/sigframe.h, x86-64):

    struct rt_sigframe { char *pretcode; struct ucontext uc; struct siginfo info; }

pretcode is the handler's return address (glibc's __restore_rt, whose CFI marks it a
signal frame), so the frame is found by that word above the handler's frames, and
checked against the frame the unwinder found under the trampoline. The kernel fills
`info` only for an SA_SIGINFO handler (faulthandler's is not one); otherwise the
fault is told by the CPU exception the sigcontext records (trapno, err, cr2).
"""

from __future__ import annotations

import struct
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
from .memory import Memory
from .report import Frame, OriginalFault, Thread
from .symbols import demangle
from .unwind import Budget

PRETCODE = 8
"""Bytes of the return address (pretcode) that starts the frame, before struct ucontext."""
UC_MCONTEXT = 40
"""Offset of uc_mcontext in the kernel's struct ucontext: uc_flags, uc_link, uc_stack (stack_t, 24 bytes)."""
SIGCONTEXT_REGS = "r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi rbp rbx rdx rax rcx rsp rip eflags".split()
"""The general registers at the start of struct sigcontext (asm/sigcontext.h), in order."""
SIGCONTEXT_TRAP = ("csgsfs", "err", "trapno", "oldmask", "cr2")
"""The words after them: the CPU exception that raised the signal, its error code and faulting address."""
TRAPS = {6: (4, 2), 13: (11, 0x80)}
"""x86 exceptions the kernel turns into a signal (arch/x86/kernel/traps.c): #UD -> SIGILL ILL_ILLOPN,
#GP -> SIGSEGV SI_KERNEL; #PF (PAGE_FAULT) is decoded from its error code."""
PAGE_FAULT = 14
PF_PROTECTION, PF_USER = 1, 4
"""Page-fault error code bits: a protection violation (SEGV_ACCERR, else SEGV_MAPERR), in user mode."""
MIN_CODE, MAX_CODE = -60, 0x80
"""si_code runs from SI_ASYNCNL (-60) to SI_KERNEL (0x80): outside that, the bytes are not a siginfo."""
UCONTEXT_SIZE = 304
"""The kernel's struct ucontext: 40 bytes, struct sigcontext (256), uc_sigmask (8); siginfo follows it."""
SIGINFO_SIZE = 128
"""struct siginfo."""
FRAME_SIZE = PRETCODE + UCONTEXT_SIZE + SIGINFO_SIZE
MAX_SCAN = 1 << 20
"""Stack bytes above the crashed thread's stack pointer searched for the frame: the handler's frames
(raise, abort, faulthandler's traceback dump) take a few KiB; an alternate signal stack is smaller than this."""
MAX_CANDIDATES = 64
"""Words equal to the trampoline's address checked before the search gives up (a hostile stack can repeat it)."""
MAX_SIGNAL = 64
"""The highest Linux signal number (SIGRTMAX): a larger si_signo is not a siginfo."""


def add_original_fault(result: CoreRead, raw_threads: list[tuple], memory: Memory, finder: _ModuleFinder) -> None:
    """When the crashed thread ran a signal handler, record the fault under it and make it the crash site."""
    core = result.core
    crashed = next((raw for raw in raw_threads if raw[1]), None)
    thread = next((t for t in core.threads if t.crashed), None) if core is not None else None
    if core is None or crashed is None or thread is None:
        return
    tid, _crashed, registers, frames = crashed
    found = find_frame(registers, frames, memory)
    names = [frame.symbol for frame in thread.frames]
    if found is None or SIGNAL_FRAME not in names or names.index(SIGNAL_FRAME) == 0:
        return
    address, info, context = found
    handler = thread.frames[names.index(SIGNAL_FRAME) - 1]
    unwound = unwind_thread(context, memory, finder, Budget()).frames
    [(_tid, _c, _r, rows)], symbols = _symbolize([(tid, True, context, unwound)], finder)
    plain = demangle(symbols)
    fault = OriginalFault(signal_record(info, finder), hex(address), handler_name(handler, core.python_version),
                          handler, {name: hex(value) for name, value in context.items()},
                          tuple(_named(row, plain) for row in rows))
    result.core = replace(core, original_fault=fault)
    _crash_site(result, [Thread(tid, True, fault.registers, fault.frames)], finder)


def find_frame(registers: dict[str, int], frames: list[_RawFrame],
               memory: Memory) -> tuple[int, notes.SignalInfo, dict[str, int]] | None:
    """(address, siginfo, registers) of the innermost rt_sigframe on the thread's stack, or None.

    The frame's first word is the trampoline's address (the unwinder's signal frame); its
    saved rip must be the pc of the frame the unwinder found under the trampoline.
    """
    at = next((i for i, frame in enumerate(frames) if frame.signal_frame), None)
    rsp = registers.get("rsp")
    if not at or rsp is None:
        return None
    resumed = frames[at + 1].pc if at + 1 < len(frames) else None
    block = memory.read(rsp, MAX_SCAN) or b""
    needle = struct.pack("<Q", frames[at].pc)
    start = 0
    for _ in range(MAX_CANDIDATES):
        hit = block.find(needle, start)
        if hit < 0:
            return None
        start = hit + 1
        if (rsp + hit) % 8:
            continue
        decoded = decode(memory.read(rsp + hit, FRAME_SIZE) or b"")
        if decoded is not None and (resumed is None or decoded[1]["rip"] == resumed):
            return rsp + hit, *decoded
    return None


def decode(frame: bytes) -> tuple[notes.SignalInfo, dict[str, int]] | None:
    """The siginfo and the interrupted registers of one rt_sigframe's bytes; None when they cannot be those."""
    if len(frame) < FRAME_SIZE:
        return None
    names = SIGCONTEXT_REGS + list(SIGCONTEXT_TRAP)
    values = dict(zip(names, struct.unpack_from(f"<{len(names)}Q", frame, PRETCODE + UC_MCONTEXT), strict=True))
    registers = {name: values[name] for name in SIGCONTEXT_REGS}
    info = notes.signal_info(frame[PRETCODE + UCONTEXT_SIZE:])
    if info is None or not 0 < info.number <= MAX_SIGNAL or not MIN_CODE <= info.code <= MAX_CODE:
        info = from_trap(values["trapno"], values["err"], values["cr2"])
    if info is None or not registers["rip"]:
        return None
    return info, registers


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
