"""The notes of a Linux core of a 64-bit little-endian process: process, threads, signal, auxv, mapped files.

Layouts are the kernel's (include/uapi/linux/elfcore.h, siginfo.h; each
architecture's registers are in core/arch.py); each decoder takes the descriptor
bytes and returns plain data, or None when the descriptor is too short to hold
what it claims.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .arch import Arch

NT_PRSTATUS, NT_PRFPREG, NT_PRPSINFO, NT_AUXV = 1, 2, 3, 6
NT_SIGINFO, NT_FILE = 0x53494749, 0x46494C45
NT_ARM_PAC_MASK = 0x406
NT_THREAD_NAMES = 0x4E4D5450
"""A note of this package's own (owner THREAD_NAMES_OWNER, type "PTMN"): every thread's name as /proc/PID/task/TID/comm
said when `snapshot` took the process. The kernel writes no thread's name in a Linux core (FreeBSD's NT_THRMISC
does); readers that do not know the owner skip the note, as gdb does."""
THREAD_NAMES_OWNER = b"POSTMORTEM"
_THREAD_NAME = struct.Struct("<I16s")
"""One thread of NT_THREAD_NAMES: its id and its comm (TASK_COMM_LEN bytes, NUL-padded)."""
"""aarch64's pointer-authentication masks (owner LINUX): which bits of a data and a code pointer hold the signature."""

PR_REG = 112
"""Offset of pr_reg in a 64-bit struct elf_prstatus (after siginfo, cursig, pending and held sets, pids, times)."""

AT_EXECFN, AT_SYSINFO_EHDR, AT_PLATFORM = 31, 33, 15

SIGNALS = {
    1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
    9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
    16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
    23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO",
    30: "SIGPWR", 31: "SIGSYS",
}

_SENDER_CODES = {
    0: "SI_USER: sent by kill()", -1: "SI_QUEUE: sent by sigqueue()", -2: "SI_TIMER: a POSIX timer expired",
    -3: "SI_MESGQ: a message queue changed state", -4: "SI_ASYNCIO: asynchronous I/O completed",
    -5: "SI_SIGIO: queued SIGIO", -6: "SI_TKILL: sent by tkill/abort()", 0x80: "SI_KERNEL: sent by the kernel",
}
_FAULT_CODES = {
    "SIGSEGV": {1: "SEGV_MAPERR: address not mapped", 2: "SEGV_ACCERR: no permission for this access (write to "
                "read-only memory, execute non-executable)", 3: "SEGV_BNDERR: failed bounds check",
                4: "SEGV_PKUERR: protection key denied access", 10: "SEGV_CPERR: control-protection fault"},
    "SIGBUS": {1: "BUS_ADRALN: misaligned address", 2: "BUS_ADRERR: address beyond the end of a mapped file",
               3: "BUS_OBJERR: hardware error on the object", 4: "BUS_MCEERR_AR: uncorrected memory error consumed",
               5: "BUS_MCEERR_AO: uncorrected memory error detected"},
    "SIGILL": {1: "ILL_ILLOPC: illegal opcode", 2: "ILL_ILLOPN: illegal operand", 3: "ILL_ILLADR: illegal "
               "addressing mode", 4: "ILL_ILLTRP: illegal trap", 5: "ILL_PRVOPC: privileged opcode",
               6: "ILL_PRVREG: privileged register", 7: "ILL_COPROC: coprocessor error", 8: "ILL_BADSTK: stack error"},
    "SIGFPE": {1: "FPE_INTDIV: integer divide by zero", 2: "FPE_INTOVF: integer overflow", 3: "FPE_FLTDIV: "
               "floating-point divide by zero", 4: "FPE_FLTOVF: floating-point overflow", 5: "FPE_FLTUND: "
               "floating-point underflow", 6: "FPE_FLTRES: inexact result", 7: "FPE_FLTINV: invalid operation",
               8: "FPE_FLTSUB: subscript out of range"},
    "SIGTRAP": {1: "TRAP_BRKPT: breakpoint", 2: "TRAP_TRACE: trace trap"},
}
_ADDRESS_SIGNALS = frozenset(_FAULT_CODES)


@dataclass(frozen=True)
class ProcessInfo:
    """NT_PRPSINFO: the process as `ps` saw it (psargs is cut at 80 characters)."""

    pid: int
    ppid: int
    uid: int
    gid: int
    fname: str
    psargs: str


@dataclass(frozen=True)
class ThreadStatus:
    """NT_PRSTATUS: one thread's id, pending signal and general registers."""

    tid: int
    cursig: int
    registers: dict[str, int]


@dataclass(frozen=True)
class SignalInfo:
    """NT_SIGINFO: the signal that killed the process and where it came from."""

    number: int
    code: int
    address: int | None
    sender_pid: int | None
    sender_uid: int | None


@dataclass(frozen=True)
class FileMapping:
    """One NT_FILE entry: a file mapped at [start, end) from page `page_offset`."""

    start: int
    end: int
    file_offset: int
    path: str


def process_info(desc: bytes) -> ProcessInfo | None:
    if len(desc) < 136:
        return None
    _s, _n, _z, _nice, _flag, uid, gid, pid, ppid, _pgrp, _sid, fname, psargs = struct.unpack_from(
        "<bbbb4xQIIiiii16s80s", desc)
    return ProcessInfo(pid, ppid, uid, gid, _cstr(fname), _cstr(psargs).strip())


def thread_status(desc: bytes, arch: Arch | None) -> ThreadStatus | None:
    """The thread's id and signal; its registers only for an architecture whose layout is known."""
    names = arch.prstatus_registers if arch is not None else ()
    if len(desc) < PR_REG + 8 * len(names) or len(desc) < 36:
        return None
    cursig, = struct.unpack_from("<h", desc, 12)
    tid, = struct.unpack_from("<i", desc, 32)
    return ThreadStatus(tid, cursig, dict(zip(names, struct.unpack_from(f"<{len(names)}Q", desc, PR_REG),
                                              strict=True)))


def signal_info(desc: bytes) -> SignalInfo | None:
    if len(desc) < 32:
        return None
    number, _errno, code = struct.unpack_from("<iii", desc)
    name = SIGNALS.get(number, "")
    if name in _ADDRESS_SIGNALS and code > 0:
        return SignalInfo(number, code, struct.unpack_from("<Q", desc, 16)[0], None, None)
    if code <= 0:
        pid, uid = struct.unpack_from("<iI", desc, 16)
        return SignalInfo(number, code, None, pid, uid)
    return SignalInfo(number, code, None, None, None)


def code_address_bits(desc: bytes) -> int | None:
    """NT_ARM_PAC_MASK (struct user_pac_mask {data_mask, insn_mask}): the bits of a code address below the
    lowest signature bit; None when the note is short or names no signature bit."""
    if len(desc) < 16:
        return None
    insn_mask, = struct.unpack_from("<Q", desc, 8)
    return (insn_mask & -insn_mask).bit_length() - 1 if insn_mask else None


def auxv(desc: bytes) -> dict[int, int]:
    """(type, value) pairs up to AT_NULL."""
    found: dict[int, int] = {}
    for kind, value in struct.iter_unpack("<QQ", desc[: len(desc) // 16 * 16]):
        if kind == 0:
            break
        found.setdefault(kind, value)
    return found


def file_mappings(desc: bytes) -> list[FileMapping]:
    """NT_FILE entries; offsets are turned from pages into bytes."""
    if len(desc) < 16:
        return []
    count, page_size = struct.unpack_from("<QQ", desc)
    table_end = 16 + count * 24
    if count > 1 << 20 or table_end > len(desc):
        return []
    names = desc[table_end:].split(b"\0")
    rows = struct.iter_unpack("<QQQ", desc[16:table_end])
    return [FileMapping(start, end, page * page_size,
                        names[i].decode("utf-8", "surrogateescape") if i < len(names) else "")
            for i, (start, end, page) in enumerate(rows)]


def signal_name(number: int) -> str:
    if 34 <= number <= 64:
        return f"SIGRT{number - 34}"
    return SIGNALS.get(number, f"signal {number}")


CODE_UNKNOWN = -(2**31)
"""si_code of a signal known only from pr_cursig (no NT_SIGINFO note)."""


def code_meaning(number: int, code: int) -> str:
    """What si_code says about who sent the signal or what fault raised it."""
    if code == CODE_UNKNOWN:
        return "si_code unknown (the core has no NT_SIGINFO note)"
    name = signal_name(number)
    meaning = _FAULT_CODES.get(name, {}).get(code) if code > 0 and code != 0x80 else None
    return meaning or _SENDER_CODES.get(code, f"si_code {code}")


def thread_names_desc(names: dict[int, str]) -> bytes:
    """NT_THREAD_NAMES's bytes: (tid, comm) pairs, each name cut to the kernel's 15 characters."""
    return b"".join(_THREAD_NAME.pack(tid, name.encode("utf-8", "replace")[:15]) for tid, name in names.items())


def thread_names(desc: bytes) -> dict[int, str]:
    """Thread id -> name, from NT_THREAD_NAMES's bytes (a torn last entry is dropped)."""
    return {tid: _cstr(name) for tid, name in _THREAD_NAME.iter_unpack(desc[:len(desc) - len(desc) % _THREAD_NAME.size])
            if _cstr(name)}


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
