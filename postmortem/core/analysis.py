"""Reading one core end to end: notes, memory, modules, stacks, symbols, GPU context.

`read_core` never raises for bad input: what cannot be read becomes a line in
`diagnostics` and the rest is still returned (a truncated core still gives its
signal and threads; a core without its libraries still gives partial stacks).
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .. import later
from . import elf, gpu, link_map, notes
from .arch import AARCH64, BY_MACHINE, Arch
from .elf import ElfError, Read
from .lines import Answers, SourceLines
from .memory import Memory
from .modules import Files, Module, ReadAs, group_mappings, load_module, memory_source, vdso_module
from .report import Core, Frame, InlineFrame, ModuleInfo, Signal, Thread
from .symbols import demangle, find_symbol_address
from .unwind import (
    GUESSES,
    MAX_FRAMES,
    SCAN_WORDS,
    Budget,
    BudgetSpent,
    CfiError,
    apply_row,
    strip,
)

if TYPE_CHECKING:
    from .python_stack import PythonThread, Read as PythonRead

SHOWN_ENV = later.plain(r"^(?:CUDA_\w*|NCCL_\w*|TORCH_\w*|PYTORCH_\w*|LD_LIBRARY_PATH|NVIDIA_\w*|OMP_NUM_THREADS|"
                          r"TF_CPP_\w*|TF_GPU_\w*|TF_FORCE_GPU_\w*|XLA_FLAGS|XLA_PYTHON_CLIENT_\w*|CUBLAS_\w*|CUDNN_\w*|"
                          r"RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT)$")
"""Environment variables shown by value: they steer GPU jobs and rarely hold secrets."""
MAX_STRINGS = 1 << 20
"""How far below AT_EXECFN's string the auxv copy on the stack is looked for."""
MAX_ARGS = 100_000
"""argv plus envp entries read; past it the pointer walk stops (a core's stack can be all non-zero words)."""
MAX_ARG_BYTES = 2 << 20
"""Bytes of argv and environment strings kept: what Linux allows them under the default 8 MiB stack limit."""
MAX_STRING = 4096
"""Bytes read for one string; a longer one is cut."""
SIGNAL_FRAME = "<signal handler called>"
MAX_THREAD_NOTES = 20
"""Threads named one by one in the diagnostics when their native or Python stack is cut short; the rest are counted."""
MAX_NOTE_BYTES = 64 << 20
"""Note bytes read from one core, all PT_NOTE segments together. Real notes take a few MiB: about 3 KiB
of registers a thread, 100 bytes an NT_FILE mapping."""
USED_NOTES = frozenset({notes.NT_PRSTATUS, notes.NT_PRPSINFO, notes.NT_SIGINFO, notes.NT_AUXV, notes.NT_FILE,
                        notes.NT_ARM_PAC_MASK, notes.NT_THREAD_NAMES})
"""The notes read; the others (floating-point and xsave registers) are not kept in memory."""
MAX_MODULES = 20_000
"""Mapped files read as modules (headers, build-id, the file on disk): a PyTorch process maps a few thousand."""
MAX_THREADS = 10_000
"""Threads read from one core: a real training process has hundreds."""
STACK_GUARD_REACH = 1 << 20
"""How far below its stack's mapping an overflow faults: the kernel's stack_guard_gap (256 pages) below
the main stack; a thread's guard page (glibc's guardsize) is smaller."""
GO_THREAD_STARTS = frozenset(name + suffix for name in ("runtime.goexit", "runtime.mstart", "runtime.rt0_go",
                                                        "runtime.mcall", "runtime.morestack")
                             for suffix in ("", ".abi0"))
"""The outermost frames of Go's goroutines and threads, as Go's traceback (runtime/traceback.go topofstack) has
them: mcall and morestack switch to the thread's g0 stack. Assembly functions take `.abi0` in the ELF symbol
table of Go 1.17 on, not in `.gopclntab`."""
GO_SIGPANIC = "runtime.sigpanic"
"""Go turns a fault into a call of runtime.sigpanic whose return address is the faulting pc itself (not
the byte after a call): its caller is looked up at that exact pc, as Go's own traceback does."""
GO_INJECTED_SLOT = 16
"""Bytes an arm64 Go signal handler pushes to save x30 before injecting runtime.sigpanic (one word, aligned to 16)."""
BL_MASK, BL = 0xFC000000, 0x94000000
"""aarch64 `bl imm26`: frame 0 without CFI whose link register returns just after a `bl` to its own start
was entered by that call and returns there (a PLT stub, a leaf without CFI), as gdb's prologue analysis has it."""
PF_W, PF_ACCESS = 2, 7
"""Program-header flags: writable; readable, writable or executable (a PROT_NONE guard has none)."""


@dataclass
class CoreRead:
    """What `read_core` found: the Core record (None when not even the notes could be read) and more."""

    format: str
    core: Core | None = None
    crash_module: Module | None = None
    crash_frame: Frame | None = None
    fault_module: Module | None = None
    diagnostics: list[str] = field(default_factory=list)
    note_offset: int | None = None


def read_core(read: Read, size: int, path: str, sysroot: str | None = None, debug_dirs: tuple[str, ...] = (),
              show_env: bool = False, core_dir: str | None = None, read_as: ReadAs | None = None,
              exe: str | None = None) -> CoreRead:
    """Read a core (or say what other ELF file this is). `read_as`: the user of the live process a snapshot's
    core was taken from, whose files are read only as far as that user could (modules.ReadAs); `exe`: the
    program's file where the core does not name it (link_map.mappings)."""
    try:
        head = elf.header(read)
    except ElfError as exc:
        return CoreRead("elf", diagnostics=[f"unreadable ELF file: {exc}"])
    if head.type != elf.ET_CORE:
        kind = {elf.ET_EXEC: "executable", elf.ET_DYN: "shared object or PIE executable"}.get(head.type, "ELF file")
        return CoreRead("elf", diagnostics=[f"{kind} for {head.machine_name}, not a core: only core files are read "
                                            "by this version"])
    result = CoreRead("elf-core")
    files = Files(sysroot, core_dir, debug_dirs, read_as)
    try:
        _read(read, size, path, head, files, show_env, result, exe)
    finally:
        files.close()
    return result


def _read(read: Read, size: int, path: str, head: elf.Header, files: Files, show_env: bool,
          result: CoreRead, exe: str | None = None) -> None:
    try:
        segments = elf.segments(read, head)
    except ElfError as exc:
        result.diagnostics.append(f"core program headers unreadable ({exc}); nothing more can be read")
        return
    found = _notes(read, size, segments, result)
    if not found:
        result.diagnostics.append("no notes in this core (cut off before them?): no threads, signal or modules")
        return
    process = next((notes.process_info(n.desc) for n in found if n.type == notes.NT_PRPSINFO), None)
    signal = next((notes.signal_info(n.desc) for n in found if n.type == notes.NT_SIGINFO), None)
    auxv = next((notes.auxv(n.desc) for n in found if n.type == notes.NT_AUXV), {})
    mappings = next((notes.file_mappings(n.desc) for n in found if n.type == notes.NT_FILE), [])
    arch = BY_MACHINE.get(head.machine)
    pac = next((notes.code_address_bits(n.desc) for n in found if n.type == notes.NT_ARM_PAC_MASK), None)
    if arch is AARCH64 and pac is not None:
        arch = replace(arch, address_bits=pac)  # the kernel's own mask, where it wrote one (PAC in use)
    statuses = [status for n in found
                if n.type == notes.NT_PRSTATUS and (status := notes.thread_status(n.desc, arch))]
    if signal is None and statuses and statuses[0].cursig:
        # no NT_SIGINFO (kernels before 3.7, qemu-user cores): the first thread's pr_cursig still names the signal
        signal = notes.SignalInfo(statuses[0].cursig, notes.CODE_UNKNOWN, None, None, None)
        result.diagnostics.append("no NT_SIGINFO note: the signal comes from the first thread's status; "
                                  "si_code and the faulting address are unknown")
    result.note_offset = next((n.offset for n in found if n.type == notes.NT_SIGINFO),
                              next((n.offset for n in found if n.type == notes.NT_PRSTATUS), None))
    if segments and max(s.offset + s.filesz for s in segments) > size:
        result.diagnostics.append(f"core cut off: it is {size} bytes but its headers describe "
                                  f"{max(s.offset + s.filesz for s in segments)}; memory past the cut is missing, "
                                  "so stacks may end early")
    if not mappings and auxv:
        mappings = link_map.mappings(auxv, Memory(read, segments, []), files, result.diagnostics, exe)
    elif exe is not None:
        result.diagnostics.append(f"--exe {exe} not used: this core names its files (NT_FILE), the program's too")
    memory, modules = process_memory(read, segments, mappings, files, result.diagnostics)
    vdso = vdso_module(auxv[notes.AT_SYSINFO_EHDR], memory) if notes.AT_SYSINFO_EHDR in auxv else None
    finder = _ModuleFinder(modules + ([vdso] if vdso else []))
    if arch is None:
        known = " and ".join(a.name for a in BY_MACHINE.values())
        result.diagnostics.append(f"{head.machine_name} core: process, signal, threads and modules are read; "
                                  f"registers and stacks are decoded for {known} cores only")
    crashed_tid = _crashed_tid(statuses, signal)
    raw_threads, unwound = _unwind_all(statuses, crashed_tid, memory, finder, arch, result.diagnostics)
    symbolized, names = _symbolize(raw_threads, finder)
    plain = demangle(names)
    made: dict[tuple, Frame] = {}
    named = _thread_names(found, process)
    threads = [Thread(tid, crashed, {k: hex(v) for k, v in regs.items()},
                      tuple(_named(frame, plain, made) for frame in frames), name=named.get(tid))
               for tid, crashed, regs, frames in symbolized]
    threads = [_cut_short(thread, done) for thread, done in zip(threads, unwound)]
    argv, environ = _argv_environ(memory, auxv, result.diagnostics)
    _missing(modules, finder, raw_threads, files, result)
    for module in modules:
        result.diagnostics.extend(module.warnings)
    paths = [m.path for m in modules]
    python = python_version(modules, process.fname if process else None)
    threads = _with_python(threads, memory, modules, python, result)
    sig_record = signal_record(signal, finder) if signal is not None else None
    sig_record = _in_stack_guard(sig_record, segments, statuses, crashed_tid, arch) if sig_record and arch else \
        sig_record
    executable = _executable(modules, auxv, memory, process)
    result.core = Core(
        path=path,
        executable=executable,
        command_line=process.psargs if process else None,
        argv=tuple(argv),
        pid=process.pid if process else (statuses[0].tid if statuses else None),
        uid=process.uid if process else None,
        signal=sig_record,
        threads=tuple(threads),
        modules=tuple(_module_info(m) for m in modules + ([vdso] if vdso else [])),
        environment=_environment(environ, show_env),
        python_version=python,
        gpu=gpu.stack_facts(paths),
    )
    _crash_site(result, threads, finder)
    from .signal_frame import add_original_fault  # imported here: signal_frame builds on this module

    if arch is not None:
        add_original_fault(result, raw_threads, memory, finder, arch)


def signal_record(signal: notes.SignalInfo, finder: _ModuleFinder) -> Signal:
    """The report's Signal for a decoded siginfo, naming the mapping its address falls in."""
    where = finder.at(signal.address) if signal.address is not None else None
    return Signal(signal.number, notes.signal_name(signal.number), signal.code,
                  notes.code_meaning(signal.number, signal.code),
                  hex(signal.address) if signal.address is not None else None,
                  where.path if where else None, signal.sender_pid)


def process_memory(read: Read, segments: list[elf.Segment], mappings: list[notes.FileMapping],
                   files: Files, diagnostics: list[str]) -> tuple[Memory, list[Module]]:
    """The process's memory and its modules: the modules are read from the dumped bytes alone,
    then the files checked to be theirs fill the pages the core left out."""
    dumped = Memory(read, segments, mappings)
    groups = group_mappings(mappings)
    if len(groups) > MAX_MODULES:
        diagnostics.append(f"the core maps {len(groups)} files: the first {MAX_MODULES} (by address) are read as "
                           "modules; frames in the others have no module name or symbols")
    modules = [load_module(p, group, dumped, files) for p, group in groups[:MAX_MODULES]]
    sources = {m.path: source for m in modules if (source := memory_source(m, dumped, files))}
    return Memory(read, segments, mappings, sources), modules


def _thread_names(found: list[elf.Note], process: notes.ProcessInfo | None) -> dict[int, str]:
    """Thread id -> name: every thread's from a snapshot's NT_THREAD_NAMES; else the main thread's alone, from
    NT_PRPSINFO's pr_fname (the kernel fills it with the thread group leader's comm: fs/binfmt_elf.c fill_psinfo)."""
    for note in found:
        if note.type == notes.NT_THREAD_NAMES and note.name == notes.THREAD_NAMES_OWNER:
            return notes.thread_names(note.desc)
    return {process.pid: process.fname} if process is not None and process.fname else {}


def _notes(read: Read, size: int, segments: list[elf.Segment], result: CoreRead) -> list[elf.Note]:
    """The notes this reader uses, each read once: PT_NOTE headers naming the same bytes again add
    nothing, and all of them together are read up to MAX_NOTE_BYTES."""
    found: dict[int, elf.Note] = {}
    ranges: set[tuple[int, int]] = set()
    left, threads = MAX_NOTE_BYTES, 0
    for seg in segments:
        if seg.type != elf.PT_NOTE or (seg.offset, seg.filesz) in ranges:
            continue
        ranges.add((seg.offset, seg.filesz))
        data = read(seg.offset, min(seg.filesz, left)) if left > 0 else b""
        left -= len(data)
        if len(data) < seg.filesz:
            why = "cut off" if seg.offset + seg.filesz > size else f"past the {MAX_NOTE_BYTES >> 20} MiB read of notes"
            result.diagnostics.append(f"note segment at offset {seg.offset:#x}: {len(data)} of its {seg.filesz} "
                                      f"bytes read ({why})")
        for note in elf.notes(data, seg.offset, USED_NOTES):
            if note.offset in found:
                continue
            if note.type == notes.NT_PRSTATUS:
                threads += 1
                if threads > MAX_THREADS:
                    continue
            found[note.offset] = note
    if threads > MAX_THREADS:
        result.diagnostics.append(f"the core holds {threads} threads: the first {MAX_THREADS} are read (the kernel "
                                  "writes the crashed thread first)")
    return list(found.values())


class _ModuleFinder:
    """pc -> module, through every mapping of every module (sorted once)."""

    def __init__(self, modules: list[Module]):
        ranges = sorted(((m.start, m.end, module) for module in modules
                         for m in (module.mappings or [notes.FileMapping(module.start, module.end, 0, module.path)])),
                        key=lambda r: (r[0], r[1]))
        self._starts = [r[0] for r in ranges]
        self._ranges = ranges

    def at(self, addr: int) -> Module | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._ranges[i][1]:
            return self._ranges[i][2]
        return None


@dataclass
class _RawFrame:
    pc: int
    how: str
    lookup: int
    signal_frame: bool = False
    sp: int | None = None


@dataclass
class Unwound:
    """One thread's unwinding: its frames, the first reason a module's CFI could not be used, and
    why it stopped short of the outermost frame (None when it reached it or memory ended)."""

    frames: list[_RawFrame]
    problem: str | None = None
    truncated: str | None = None
    stack_left: int | None = None
    frames_left: int | None = None


Step = tuple[dict[int, int], str]
"""The caller's registers (DWARF numbers, and the arch's pc slot) and how they were found."""


def unwind_thread(registers: dict[str, int], memory: Memory, finder: _ModuleFinder, budget: Budget,
                  arch: Arch) -> Unwound:
    """The frames of one thread: a signal trampoline by its code, else CFI where a module has it, else
    frame pointers, else a stack scan.

    Frame 0 may be at pc 0 or an unmapped pc (a call through a NULL or wild function pointer): its
    caller is the return address the call left (at the stack pointer, or in the link register), as gdb
    finds it. A caller's stack pointer may equal its callee's (an aarch64 leaf keeps its return address
    in x30), but not at a pc already seen there. A thread cut at MAX_FRAMES or by the core's `budget`
    keeps the frames found so far and says so in `truncated`.
    """
    regs = {i: registers[name] for i, name in enumerate(arch.dwarf_registers) if name in registers}
    regs[arch.pc_reg] = registers.get(arch.pc, 0)
    done = Unwound([])
    frames = done.frames
    problems: list[str] = []
    names: dict[int, str | None] = {}
    trampolines: dict[int, bool] = {}
    seen_at_sp: set[int] = set()
    how, exact, injected = "registers", True, False
    try:
        while True:
            pc = regs.get(arch.pc_reg)
            if pc is None or (not pc and frames):
                break
            if len(frames) >= MAX_FRAMES:
                done.truncated = f"the {MAX_FRAMES:,} frames read per thread are found"
                break
            if frames:
                budget.frame()
            frame = _RawFrame(pc, how, pc if exact else pc - 1, sp=regs.get(arch.sp_reg))
            frames.append(frame)
            step = _sigreturn_step(frame, regs, memory, arch, trampolines) or \
                _cfi_step(frame, regs, memory, finder, budget, problems, arch)
            if step is None:
                if (not memory.executable(pc) and len(frames) > 1) or \
                        _name_of(frame.lookup, finder, names) in GO_THREAD_STARTS:
                    break
                step = _go_step(frame, regs, memory, finder, arch, injected) or \
                    _fallback_step(regs, memory, len(frames) == 1, budget, arch, finder)
            if step is None:
                break
            caller, how = step
            sp, caller_sp = regs.get(arch.sp_reg, 0), caller.get(arch.sp_reg, 0)
            if not frame.signal_frame:
                if caller_sp < sp or (caller_sp == sp and caller.get(arch.pc_reg) in seen_at_sp | {pc}):
                    break
                seen_at_sp = seen_at_sp | {pc} if caller_sp == sp else set()
            injected = _go_module(frame.lookup, finder) is not None and \
                _name_of(frame.lookup, finder, names) == GO_SIGPANIC
            exact = frame.signal_frame or injected
            regs = caller
    except BudgetSpent as spent:
        done.truncated = str(spent)
    done.problem = problems[0] if problems else None
    if done.truncated:
        _rest_of_stack(done, registers.get(arch.sp, 0), regs.get(arch.sp_reg, 0), memory)
    return done


def _go_module(addr: int, finder: _ModuleFinder) -> Module | None:
    """The Go binary (one with `.gopclntab`) that holds `addr`, or None. Only there can runtime.sigpanic be:
    other frames need no name to be unwound, and their modules' symbol tables are not loaded for it."""
    module = finder.at(addr)
    return module if module is not None and module.file is not None and module.file.go_table is not None else None


def _symbol_at(addr: int, finder: _ModuleFinder) -> tuple[str, int] | None:
    """The (mangled) name of the function holding `addr` and its start address (a PLT stub's included)."""
    module = finder.at(addr)
    symbols = module.symbols if module is not None else None
    found = symbols.lookup(addr - module.bias) if symbols is not None and module is not None else None
    return (found[0], found[1] + module.bias) if found is not None and module is not None else None


def _name_of(addr: int, finder: _ModuleFinder, names: dict[int, str | None]) -> str | None:
    """The name of `_symbol_at`, once per pc of a thread (a deep recursion repeats a few pcs)."""
    if addr not in names:
        names[addr] = found[0] if (found := _symbol_at(addr, finder)) is not None else None
    return names[addr]


def _sigreturn_step(frame: _RawFrame, regs: dict[int, int], memory: Memory, arch: Arch,
                    trampolines: dict[int, bool]) -> Step | None:
    """At a signal trampoline (known by its code: glibc's __restore_rt, Go's runtime.sigreturn, the
    aarch64 vDSO's __kernel_rt_sigreturn, qemu-user's), the interrupted registers from the kernel's
    sigcontext at its stack pointer, as gdb's sigtramp unwinders read them. Checked before CFI: the
    aarch64 vDSO's CFI describes only its frame record (the interrupted lr, not the pc). The code is
    read once per pc of a thread (`trampolines`): a deep recursion repeats a few pcs."""
    if frame.pc not in trampolines:
        code = memory.read(frame.pc, max(len(c) for c in arch.sigreturn_code))
        trampolines[frame.pc] = code is not None and any(code.startswith(c) for c in arch.sigreturn_code)
    if not trampolines[frame.pc]:
        return None
    names = arch.sigcontext_registers
    raw = memory.read(regs.get(arch.sp_reg, 0) + arch.sigframe_registers, 8 * len(names))
    if raw is None or len(raw) < 8 * len(names):
        return None
    saved = dict(zip(names, struct.unpack(f"<{len(names)}Q", raw), strict=True))
    frame.signal_frame = True
    caller = {i: saved[name] for i, name in enumerate(arch.dwarf_registers) if name in saved}
    return caller | {arch.pc_reg: saved[arch.pc]}, "sigcontext"


def _rest_of_stack(done: Unwound, first_sp: int, last_sp: int, memory: Memory) -> None:
    """How much stack a truncated thread has past its last frame: bytes up to the end of the stack
    pointer's mapping, and about how many frames that is at the mean size of the frames found."""
    segment = memory.segment(last_sp)
    if segment is None:
        return
    done.stack_left = max(0, segment.vaddr + segment.memsz - last_sp)
    used = last_sp - first_sp
    if used > 0:
        done.frames_left = done.stack_left * len(done.frames) // used


def _cfi_step(frame: _RawFrame, regs: dict[int, int], memory: Memory, finder: _ModuleFinder, budget: Budget,
              problems: list[str], arch: Arch) -> Step | None:
    """The caller's registers by CFI; `{}` means CFI says this is the outermost frame.

    None when the module has no CFI for this pc, or when its CFI is unusable (why goes to `problems`).
    """
    module = finder.at(frame.lookup)
    table = module.cfi if module is not None else None
    if module is None or table is None:
        return None
    try:
        row = table.row(frame.lookup - module.bias, budget)
        if row is None:
            return None
        frame.signal_frame = row.signal_frame
        if row.rules.get(arch.ra_column, ("",))[0] == "undefined":
            return {}, "cfi"
        return apply_row(row, regs, memory.word, arch, budget), "cfi"
    except CfiError as exc:
        problems.append(f"the unwind table (CFI) of {module.name} at {frame.pc:#x} is unusable ({exc}); the frames "
                        "past it come from frame pointers or a stack scan")
        return None


def _go_step(frame: _RawFrame, regs: dict[int, int], memory: Memory, finder: _ModuleFinder, arch: Arch,
             injected: bool) -> Step | None:
    """No CFI in a Go binary (stripped of its DWARF): the caller as Go's own traceback finds it, from the
    frame size `.gopclntab` gives at the pc. On x86-64 the call pushed the return address just above the
    frame; on arm64 it is in x30 until the prologue stores it at the new stack pointer. Under an injected
    call (`injected`: runtime.sigpanic, which an arm64 signal handler makes the faulting function "call"
    after pushing its x30 in a 16-byte slot), that slot is skipped, and a frameless faulting function
    returns to the x30 it held (runtime/traceback.go)."""
    module = _go_module(frame.lookup, finder)
    if module is None or module.file is None or module.file.go_table is None:
        return None
    table, vaddr = module.file.go_table, frame.lookup - module.bias
    function = table.function(vaddr)
    size = table.frame_size(function, vaddr) if function is not None else None
    if size is None or size < 0:
        return None
    sp, link = regs.get(arch.sp_reg, 0), arch.link_reg
    if link is not None:
        held = regs.get(link, 0)
        if injected:
            held, sp = memory.word(sp) or 0, sp + GO_INJECTED_SLOT
        ret = held if size == 0 else memory.word(sp)
        caller_sp = sp + size
    else:
        ret, caller_sp = memory.word(sp + size), sp + size + 8
    if not ret:
        return None
    return {**regs, arch.sp_reg: caller_sp, arch.pc_reg: strip(ret, arch)}, "pclntab"


def _fallback_step(regs: dict[int, int], memory: Memory, first: bool, budget: Budget, arch: Arch,
                   finder: _ModuleFinder) -> Step | None:
    """No CFI: a call through a bad pointer (frame 0 outside code), frame 0 entered by the call the
    link register returns to, the frame-pointer chain (x86-64's rbp and aarch64's x29 frame records
    alike hold the caller's frame pointer, then the return address), or a stack scan for a return
    address (just after a call instruction in executable memory)."""
    sp, fp, pc = regs.get(arch.sp_reg, 0), regs.get(arch.fp_reg, 0), arch.pc_reg
    if first and not memory.executable(regs.get(pc, 0)):
        linked = arch.link_reg is not None
        left = regs.get(arch.link_reg, 0) if arch.link_reg is not None else memory.word(sp)
        if left and memory.executable(strip(left, arch)):
            return {**regs, arch.sp_reg: sp if linked else sp + 8, pc: strip(left, arch)}, "lr" if linked else "scan"
    if first and arch.link_reg is not None:
        returns_to = strip(regs.get(arch.link_reg, 0), arch)
        called, symbol = _calls(memory, returns_to, arch), _symbol_at(regs.get(pc, 0), finder)
        if called is not None and symbol is not None and called == symbol[1]:
            return {**regs, pc: returns_to}, "lr"
    if sp <= fp < sp + (1 << 24):
        ret, saved = memory.word(fp + 8), memory.word(fp)
        if ret and saved is not None and memory.executable(strip(ret, arch)):
            return {**regs, arch.sp_reg: fp + 16, arch.fp_reg: saved, pc: strip(ret, arch)}, "fp"
    budget.step(SCAN_WORDS)
    block = memory.read(sp, SCAN_WORDS * 8) or b""
    for i, (word,) in enumerate(struct.iter_unpack("<Q", block[: len(block) // 8 * 8])):
        value = strip(word, arch)
        if value > 0x1000 and memory.executable(value) and \
                arch.is_return(memory.read(value - arch.return_window, arch.return_window) or b""):
            return {**regs, arch.sp_reg: sp + 8 * i + 8, pc: value}, "scan"
    return None


def _calls(memory: Memory, returns_to: int, arch: Arch) -> int | None:
    """The target of the direct call (aarch64 `bl`) just before `returns_to`, or None."""
    code = memory.read(returns_to - arch.return_window, arch.return_window)
    word = int.from_bytes(code, "little") if code is not None and len(code) == 4 else 0
    if word & BL_MASK != BL:
        return None
    offset = word & 0x3FFFFFF
    return returns_to - 4 + 4 * (offset - (1 << 26) if offset >> 25 else offset)


def _symbolize(raw_threads, finder: _ModuleFinder):
    """Module, offset, (still mangled) symbol and source line of every frame; the set of names to demangle.

    Each distinct (pc, signal frame or not) is looked up once: a deep recursion repeats a few pcs
    200,000 times, and its frames then share their answers."""
    names: set[str] = set()
    done = []
    sources = SourceLines()
    known: dict[tuple[int, bool], tuple] = {}
    for tid, crashed, regs, frames in raw_threads:
        rows = []
        for frame in frames:
            key = (frame.lookup, frame.signal_frame)
            if key not in known:
                known[key] = _lookup(frame, finder, sources, names)
            rows.append((frame, *known[key]))
        done.append((tid, crashed, regs, rows))
    Answers.keep()
    return done, names


def _lookup(frame: _RawFrame, finder: _ModuleFinder, sources: SourceLines, names: set[str]) -> tuple:
    """(module, symbol, location) of one frame's pc; the names it holds go to `names`."""
    module = finder.at(frame.lookup)
    symbol = None
    if module is not None:
        symbol = sources.symbol(module, frame.lookup - module.bias)
    if frame.signal_frame:
        symbol = (SIGNAL_FRAME, frame.lookup - (module.bias if module else 0))
    if symbol:
        names.add(symbol[0])
    where = sources.locate(module, frame.lookup - module.bias) if module and not frame.signal_frame else None
    names.update(place.function for place in (where.inlined if where else ()) if place.function)
    return module, symbol, where


def _named(row, plain: dict[str, str], made: dict[tuple, Frame] | None = None) -> Frame:
    """The Frame of one row of `_symbolize`; with `made`, one shared (frozen) Frame per distinct pc, how
    and lookup of the rows of one `_symbolize` (a deep recursion's frames are a few distinct ones)."""
    frame, module, symbol, where = row
    key = (frame.pc, frame.how, frame.lookup, frame.signal_frame)
    if made is not None and key in made:
        return made[key]
    name = plain.get(symbol[0], symbol[0]) if symbol else None
    inlined = tuple(InlineFrame(plain.get(p.function, p.function) if p.function else None, p.file, p.line)
                    for p in (where.inlined if where else ()))
    named = Frame(pc=hex(frame.pc), module=module.name if module else None,
                  offset=hex(frame.pc - module.start) if module else None, symbol=name,
                  symbol_offset=(frame.pc - module.bias - symbol[1]) if symbol and module else None, how=frame.how,
                  file=where.file if where else None, line=where.line if where else None, inlined=inlined)
    if made is not None:
        made[key] = named
    return named


def _unwind_all(statuses: list[notes.ThreadStatus], crashed_tid: int | None, memory: Memory, finder: _ModuleFinder,
                arch: Arch | None, diagnostics: list[str]) -> tuple[list[tuple], list[Unwound]]:
    """(tid, crashed, registers, frames) of every thread, the crashed one first (it gets the budget first),
    and each one's `Unwound` (in the same order) for what cut it short.

    A thread whose CFI failed keeps its frames and gets one line; past the core's budget, the
    threads left keep what was found and one line says how many they are.
    """
    ordered = sorted(statuses, key=lambda s: s.tid != crashed_tid)
    budget = Budget()
    found, cut, unwound = [], [], []
    problems: dict[str, list[int]] = {}
    for status in ordered:
        done = unwind_thread(status.registers, memory, finder, budget, arch) if arch else Unwound([])
        found.append((status.tid, status.tid == crashed_tid, status.registers, done.frames))
        unwound.append(done)
        if done.problem:
            problems.setdefault(done.problem, []).append(status.tid)
        if budget.spent:
            cut.append(status.tid)
    for problem, tids in list(problems.items())[:MAX_THREAD_NOTES]:
        more = f" (and {len(tids) - 1} more threads)" if len(tids) > 1 else ""
        diagnostics.append(f"thread {tids[0]}{more}: {problem}")
    if len(problems) > MAX_THREAD_NOTES:
        diagnostics.append(f"{len(problems) - MAX_THREAD_NOTES} more unusable unwind tables")
    if cut:
        diagnostics.append(f"unwinding stopped at thread {cut[0]}: {budget.spent}; it and {len(cut) - 1} thread(s) "
                           "after it keep only the frames found so far")
    deep = [(status.tid, done) for status, done in zip(ordered, unwound)
            if done.truncated and not budget.spent]
    for tid, done in deep[:MAX_THREAD_NOTES]:
        rest = f" (about {done.frames_left:,} more frames in the {done.stack_left:,} bytes of stack left)" \
            if done.frames_left is not None and done.stack_left is not None else ""
        diagnostics.append(f"thread {tid}: unwinding stopped at frame {len(done.frames):,}: {done.truncated}{rest}")
    return found, unwound


def _in_stack_guard(record: Signal, segments: list[elf.Segment], statuses: list[notes.ThreadStatus],
                    crashed_tid: int | None, arch: Arch) -> Signal:
    """The signal, marked when its address lies in the guard gap just below the crashed thread's stack.

    The gap is what the core's PT_LOADs leave unmapped (or map with no access: a thread's guard
    page) below a writable mapping, with the stack pointer in that mapping or in the gap: a stack overflow.
    """
    status = next((s for s in statuses if s.tid == crashed_tid), None)
    if record.address is None or status is None or arch.sp not in status.registers:
        return record
    address, sp = int(record.address, 16), status.registers[arch.sp]
    usable = [s for s in segments if s.type == elf.PT_LOAD and s.memsz and s.flags & PF_ACCESS]
    if any(s.vaddr <= address < s.vaddr + s.memsz for s in usable):
        return record
    above = min((s for s in usable if s.vaddr > address), key=lambda s: s.vaddr, default=None)
    if above is None or not above.flags & PF_W or above.vaddr - address > STACK_GUARD_REACH:
        return record
    return replace(record, in_stack_guard=address - STACK_GUARD_REACH <= sp < above.vaddr + above.memsz)


def _cut_short(thread: Thread, done: Unwound) -> Thread:
    """The thread with what cut its unwinding short, and where its frames became guesses."""
    guessed = next((i for i, frame in enumerate(done.frames) if frame.how in GUESSES), None)
    if done.truncated is None and guessed is None:
        return thread
    return replace(thread, truncated=done.truncated, stack_left=done.stack_left, frames_left=done.frames_left,
                   guessed_from=guessed)


def _crashed_tid(statuses: list[notes.ThreadStatus], signal: notes.SignalInfo | None) -> int | None:
    """The thread that took the signal: the kernel writes it first; gcore marks it by pr_cursig. A core of a
    live process (gcore's, `postmortem snapshot`'s) has no signal and no crashed thread."""
    if not statuses or signal is None:
        return None
    if signal is not None:
        marked = [s for s in statuses if s.cursig == signal.number]
        if marked:
            return marked[0].tid
    return statuses[0].tid


def _argv_environ(memory: Memory, auxv: dict[int, int], diagnostics: list[str]) -> tuple[list[str], list[str]]:
    """argv and envp, found where the kernel put them (`argv_environ_pointers`), as strings."""
    argv, environ = argv_environ_pointers(memory, auxv)
    if not argv:
        return [], []
    texts = _strings(memory, [*argv, *environ])
    missing = texts.count(None)
    if missing:
        diagnostics.append(f"{missing} of the {len(texts)} argv and environment strings are not in the core "
                           f"(or past the {MAX_ARG_BYTES >> 20} MiB kept of them): left out")
    return ([text for text in texts[:len(argv)] if text is not None],
            [text for text in texts[len(argv):] if text is not None])


def argv_environ_pointers(memory: Memory, auxv: dict[int, int]) -> tuple[list[int], list[int]]:
    """The addresses of the argv and envp strings, in order, found where the kernel put their pointers: just
    below the auxiliary vector on the stack ([], [] where the core does not hold them).

    The auxv copy on the stack is located by searching below AT_EXECFN's
    string for the auxv's own bytes, then the pointer arrays are walked back.
    """
    execfn = auxv.get(notes.AT_EXECFN)
    if not execfn or not auxv:
        return [], []
    needle = b"".join(struct.pack("<QQ", k, v) for k, v in list(auxv.items())[:4])
    low = max(execfn - MAX_STRINGS, 0)
    seg = memory.segment(execfn)
    if seg is not None:
        low = max(low, seg.vaddr)
    window = memory.read(low, execfn - low) or b""
    at = window.rfind(needle)
    if at < 0 or at % 8:
        return [], []
    environ: list[int] = []
    argv: list[int] | None = None
    slot = low + at - 16
    while len(environ) + len(argv or ()) < MAX_ARGS:
        value = memory.word(slot)
        if value is None:
            return [], []
        if argv is None:
            if value:
                environ.append(value)
            else:
                argv = []
        elif value == len(argv):
            break
        else:
            argv.append(value)
        slot -= 8
    if not argv:
        return [], []
    return list(reversed(argv)), list(reversed(environ))


def _strings(memory: Memory, pointers: list[int]) -> list[str | None]:
    """The C strings at `pointers`, MAX_ARG_BYTES of them in all; None for one unknown or past that."""
    found: list[str | None] = []
    left = MAX_ARG_BYTES
    for pointer in pointers:
        text = _string(memory, pointer) if left > 0 else None
        left -= len(text) + 1 if text is not None else 0
        found.append(text)
    return found


def _string(memory: Memory, addr: int) -> str | None:
    """The C string at `addr` (MAX_STRING bytes at most), None where the core does not hold it."""
    data = memory.cstring(addr, MAX_STRING)
    return None if data is None else data.decode("utf-8", "replace")


def _environment(environ: list[str], show_env: bool) -> dict[str, object]:
    """GPU-relevant variables by value; the rest by name only (a core's environment holds secrets)."""
    values: dict[str, str] = {}
    hidden: list[str] = []
    for entry in environ:
        name, _, value = entry.partition("=")
        if show_env or SHOWN_ENV.match(name):
            values[name] = value
        else:
            hidden.append(name)
    return {"values": values, "names_only": sorted(set(hidden))} if environ else {}


def _executable(modules: list[Module], auxv: dict[int, int], memory: Memory, process) -> str | None:
    """The program file: AT_EXECFN's string, else the module mapped at the entry point, else psinfo's name."""
    entry = auxv.get(9)
    if entry:
        for module in modules:
            if any(m.start <= entry < m.end for m in module.mappings):
                return module.path
    if notes.AT_EXECFN in auxv:
        name = _string(memory, auxv[notes.AT_EXECFN])
        if name:
            return name
    return process.fname if process else None


def _module_info(module: Module) -> ModuleInfo:
    kind = gpu.classify(module.path) if module.is_elf else "data"
    return ModuleInfo(module.path, hex(module.start), hex(module.end), module.build_id, module.build_id_on_disk,
                      kind, gpu.module_version(module.path), module.resolved)


def _missing(modules: list[Module], finder: _ModuleFinder, raw_threads, files: Files, result: CoreRead) -> None:
    """Name the modules on the stacks whose files could not be found (their frames have no CFI or symbols)."""
    on_stack = {id(m): m for _t, _c, _r, frames in raw_threads for f in frames if (m := finder.at(f.lookup))}
    absent = [m for m in on_stack.values() if m.file is None]
    if absent:
        guessed = ("the stack past them is guessed (frame pointers or a scan)" if any(not m.in_core for m in absent)
                   else "their CFI was read from the core's memory")
        result.diagnostics.append(
            f"{len(absent)} module(s) on the stacks not found on this machine "
            f"({', '.join(sorted(m.path for m in absent)[:5])}): their frames have no symbols and {guessed}; "
            "pass --sysroot DIR with a copy of the crashed machine's files")


def python_version(modules: list[Module], command: str | None) -> str | None:
    """The CPython version of a process, from its interpreter's file names and its command name."""
    # the real files too: a program started by a link (/usr/bin/python3) is named so by AT_EXECFN
    names = [m.path for m in modules] + [os.path.realpath(m.resolved) for m in modules if m.resolved]
    return gpu.python_version([name for name in names if gpu.classify(name) == "python"]
                              + ([command] if command else []))


def read_python_stacks(read: PythonRead, modules: list[Module], version: str) -> list[PythonThread]:
    """Every thread's Python stack (postmortem.core.python_stack), symbols looked up in the interpreter's
    modules (libpython or the python executable). Raises PythonStackError or ValueError."""
    from . import python_stack  # only a CPython process needs the interpreter's layouts

    interpreter = [m for m in modules if gpu.classify(m.path) == "python" or m.path.endswith(("/python", "/python3"))]

    def find_symbol(name: str) -> int | None:
        for module in interpreter:
            for image in (module.file, module.debug):
                address = find_symbol_address(image.read, image.sections, name) if image else None
                if address is not None:
                    return address + module.bias
        return None

    major, _, minor = version.partition(".")
    return python_stack.python_stacks(read, find_symbol, (int(major), int(minor)))


def _with_python(threads: list[Thread], memory: Memory, modules: list[Module], version: str | None,
                 result: CoreRead) -> list[Thread]:
    """Each thread's Python stack when the process is CPython; a failure is a diagnostic, never the end of
    the analysis."""
    if version is None:
        return threads
    from . import python_stack

    try:
        stacks = read_python_stacks(memory.read, modules, version)
    except (python_stack.PythonStackError, ValueError) as exc:
        result.diagnostics.append(f"Python stacks not read: {exc}")
        return threads
    cut = [f"Python stack of thread {stack.thread_id or '?'} cut short: {stack.error}"
           for stack in stacks if stack.error]
    result.diagnostics.extend(cut[:MAX_THREAD_NOTES])
    if len(cut) > MAX_THREAD_NOTES:
        result.diagnostics.append(f"{len(cut) - MAX_THREAD_NOTES} more Python stacks cut short")
    major, _, minor = version.partition(".")
    by_tid = {stack.thread_id: stack for stack in stacks}
    return [_merged(t, by_tid[t.tid], (int(major), int(minor))) if t.tid in by_tid else t for t in threads]


def _merged(thread: Thread, stack: PythonThread, version: tuple[int, int]) -> Thread:
    """The thread with its Python frames, each eval-loop frame carrying those it runs (pystack --native)."""
    from . import python_stack

    frames = list(thread.frames)
    loops = [index for index, frame in enumerate(frames) if python_stack.is_eval_loop(frame.symbol)]
    slices, how = python_stack.spread(stack, len(loops), version)
    for index, (start, end) in zip(loops, slices, strict=True):
        frames[index] = replace(frames[index], python_frames=stack.frames[start:end])
    return replace(thread, frames=tuple(frames), python_frames=stack.frames,
                   python_merge=how if loops or stack.frames else None, python_locks=stack.locks)


def _crash_site(result: CoreRead, threads: list[Thread], finder: _ModuleFinder) -> None:
    """The first frame of the crashing thread outside the C runtime and signal plumbing."""
    crashed = next((t for t in threads if t.crashed), None)
    if crashed is None or not crashed.frames:
        return
    result.fault_module = finder.at(int(crashed.frames[0].pc, 16))
    from ..debugging import is_runtime_frame  # shared rule, imported where used
    for frame in crashed.frames:
        if not is_runtime_frame({"module": frame.module, "function": frame.symbol}) and frame.symbol != SIGNAL_FRAME:
            result.crash_frame = frame
            result.crash_module = finder.at(int(frame.pc, 16))
            return
    result.crash_frame = crashed.frames[0]
    result.crash_module = result.fault_module

