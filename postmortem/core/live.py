"""A running process read the way the core reader reads a dead one, stopped for as short a time as possible.

`capture(pid)` seizes every thread with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT: no SIGSTOP is sent, so
the job control state of the process and its parent's waitpid() see nothing), reads each thread's general
registers (PTRACE_GETREGSET NT_PRSTATUS: the same user_regs_struct a core's NT_PRSTATUS holds) and the innermost
HOT_STACK bytes of its stack, reads every thread's Python stack when the process is CPython, and detaches. Only
then, with the process running again, is each thread unwound (the unwinder of postmortem/core, reading the pages
it needs) and its stack copied from its stack pointer up to its outermost frame. The memory reads go through
/proc/PID/mem one page at a time, each page once, within a byte budget (ByteBudget), and keep the pages they
read, so that `core_writer` can write a core holding exactly what the readers looked at: analysing that core
with `read_core` unwinds and reads the same Python stacks again, with the one unwinder, symbolizer and CPython
reader of postmortem/core.

The process's memory is seen through a virtual core whose file offsets are the addresses themselves (a
PT_LOAD per mapping, offset == vaddr), so the modules, the symbols and the interpreter's layout are found by
the same code as in a core (modules.load_module, analysis.read_python_stacks). Device mappings
(/dev/nvidia*, /dev/dri) and [vvar] are left out: reading a GPU's or the driver's memory through /proc/PID/mem
may block in the driver that is hung.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import platform
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import elf, link_map, notes
from .analysis import _ModuleFinder, process_memory, python_version, read_python_stacks, unwind_thread
from .arch import BY_MACHINE, Arch
from .memory import Memory
from .modules import Files, Module, ReadAs
from .python_stack import PythonStackError, PythonThread
from .unwind import Budget

PAGE = os.sysconf("SC_PAGE_SIZE")
PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH, PTRACE_GETREGSET = 0x4206, 0x4207, 17, 0x4204
PTRACE_EVENT_STOP = 128
WALL = 0x40000000
"""waitpid's __WALL: wait for a traced thread that is not our child."""
MACHINES = {"x86_64": elf.EM_X86_64, "aarch64": elf.EM_AARCH64}
"""platform.machine() -> ELF e_machine, for the CPUs core/arch.py knows."""
HOT_STACK = 16 << 10
"""Bytes of each thread's stack, from its stack pointer up, read while it is stopped: its innermost frames, where it
waits, the ones that change as soon as it runs again (a few dozen C frames: a thread blocked in a lock or a read).
The frames above them belong to callers that have not returned: they are read after the process is let go."""
MAX_STACK_COPY = 8 << 20
"""Bytes of one thread's stack copied at the most, from its stack pointer up to its outermost frame: a deep
recursion fills the 8 MiB of a default stack. Threads whose stacks lie in one big mapping (Go's goroutines in
its heap arenas, a fiber pool's) get only their own frames, not the mapping up to its end."""
STACK_SLACK = 4 << 10
"""Bytes copied above a thread's outermost frame: the arguments and saved registers a debugger reads there."""
PROCESS_BYTES = 256 << 20
"""Bytes of one process's memory kept at the most (headers, Python stacks, every thread's stack): the core is
written from them, so this bounds the snapshot's memory and the core's size, whatever the threads look like;
the stacks of a few hundred threads of a real training process take a few MiB of it."""
JOB_BYTES = 1 << 30
"""Bytes kept of all the processes of one snapshot together: the cores of a node's ranks stay within this."""
TRACER_EXIT_WAIT_S = 1.0
"""How long the kernel may take to end the thread that traced a process (it takes microseconds); its end lets go
of any thread it still traces."""
RED_ZONE = 128
"""Bytes below the stack pointer a leaf function may use (System V x86-64 psABI 3.2.2): copied too."""
MAX_READ = 16 << 20
"""The longest single read served: the readers ask for headers, frames and strings, never more."""
COPY_CHUNK = 1 << 20
"""The longest single read of /proc/PID/mem when a stack is copied (memory held twice while it is split in pages)."""
STOP_WAIT_S = 2.0
"""How long the threads may take to report their ptrace stops (they take microseconds; a thread in uninterruptible
sleep stops when it wakes, which may be never): its registers are then not read, the others' are."""
MAX_STOP_ROUNDS = 8
"""Times the thread list is read again for threads started while the others were being stopped."""
SKIPPED_PATHS = ("/dev/", "[vvar]", "[vvar_vclock]")
"""Mappings never read: device memory (GPU BARs, the driver's control pages) and the kernel's vvar pages."""


class LiveError(Exception):
    """The process cannot be stopped or read (gone, not ours, ptrace refused)."""


@dataclass
class ByteBudget:
    """Bytes of process memory a snapshot may still keep, shared by the processes it takes (JOB_BYTES)."""

    left: int = JOB_BYTES


@dataclass(frozen=True)
class Vma:
    """One line of /proc/PID/maps."""

    start: int
    end: int
    perms: str
    offset: int
    path: str

    @property
    def flags(self) -> int:
        """The PT_LOAD flags a core would give it (PF_R 4, PF_W 2, PF_X 1)."""
        return (4 if "r" in self.perms else 0) | (2 if "w" in self.perms else 0) | (1 if "x" in self.perms else 0)

    @property
    def file_backed(self) -> bool:
        return self.path.startswith("/") and not self.path.startswith(SKIPPED_PATHS)

    @property
    def readable(self) -> bool:
        return "r" in self.perms and not self.path.startswith(SKIPPED_PATHS)


@dataclass
class Stopped:
    """What was taken from one process while it was stopped."""

    pid: int
    arch: Arch
    machine: int
    vmas: list[Vma]
    threads: list[notes.ThreadStatus]
    pages: dict[int, bytes]
    """Page address -> the page's bytes as read while the process was stopped (or, for headers, just before)."""
    python: list[PythonThread] = field(default_factory=list)
    python_version: str | None = None
    stopped_s: float = 0.0
    diagnostics: list[str] = field(default_factory=list)
    auxv: bytes = b""
    never_stopped: list[int] = field(default_factory=list)
    """Threads that never reached the stop (uninterruptible sleep in a driver): the process was not wholly held."""


def maps(pid: int) -> list[Vma]:
    """/proc/PID/maps, parsed."""
    found = []
    with open(f"/proc/{pid}/maps", "rb") as handle:
        for raw in handle:
            parts = raw.decode("utf-8", "surrogateescape").rstrip("\n").split(maxsplit=5)
            if len(parts) < 5:
                continue
            start, _, end = parts[0].partition("-")
            found.append(Vma(int(start, 16), int(end, 16), parts[1], int(parts[2], 16),
                             parts[5] if len(parts) > 5 else ""))
    return found


class PageReader:
    """Reads of /proc/PID/mem a page at a time, each page read once and kept (the core is written from them), `limit`
    bytes of them at the most: past it a page reads as missing and `refused` counts it."""

    def __init__(self, pid: int, vmas: list[Vma], limit: int = PROCESS_BYTES):
        self._fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        self._readable = sorted((v.start, v.end) for v in vmas if v.readable)
        self._starts = [start for start, _ in self._readable]
        self.pages: dict[int, bytes] = {}
        self._missing: set[int] = set()
        self.left = limit
        self.refused = 0
        """Reads refused because `limit` was reached."""

    def close(self) -> None:
        os.close(self._fd)

    def _may_read(self, page: int) -> bool:
        i = bisect.bisect_right(self._starts, page) - 1
        return i >= 0 and page < self._readable[i][1]

    def page(self, page: int) -> bytes | None:
        if page in self.pages:
            return self.pages[page]
        if page in self._missing or not self._may_read(page):
            return None
        if self.left < PAGE:
            self.refused += 1
            return None
        try:
            data = os.pread(self._fd, PAGE, page)
        except OSError:
            data = b""
        if len(data) < PAGE:
            self._missing.add(page)
            return None
        self.pages[page] = data
        self.left -= PAGE
        return data

    def read(self, offset: int, length: int) -> bytes:
        """The core-style read: `offset` is the address (the virtual core's offsets are addresses)."""
        out = bytearray()
        length = min(length, MAX_READ)
        while len(out) < length:
            addr = offset + len(out)
            page = addr - addr % PAGE
            data = self.page(page)
            if data is None:
                break
            out += data[addr - page: addr - page + length - len(out)]
        return bytes(out)

    def copy(self, start: int, end: int) -> None:
        """Read the pages of [start, end) not kept yet (a stack: several threads' may share pages), in runs of
        adjacent pages of at most COPY_CHUNK bytes, kept page by page."""
        page = start - start % PAGE
        while page < end:
            if page in self.pages or page in self._missing or not self._may_read(page):
                page += PAGE
                continue
            run = page
            while run < end and run - page < COPY_CHUNK and run not in self.pages and self._may_read(run):
                run += PAGE
            if run - page > self.left:
                self.refused += 1
                run = page + self.left - self.left % PAGE
                if run == page:
                    return
            try:
                data = os.pread(self._fd, run - page, page)
            except OSError:
                data = b""
            whole = len(data) - len(data) % PAGE
            for at in range(0, whole, PAGE):
                self.pages[page + at] = data[at: at + PAGE]
            self.left -= whole
            if whole < run - page:
                self._missing.add(page + whole)
            page += max(whole, PAGE)


def _virtual_segments(vmas: list[Vma]) -> list[elf.Segment]:
    """The virtual core's PT_LOADs: each readable mapping at file offset == its address."""
    return [elf.Segment(elf.PT_LOAD, v.flags, v.start, v.start, v.end - v.start, v.end - v.start)
            for v in vmas if v.readable]


def file_mappings(vmas: list[Vma]) -> list[notes.FileMapping]:
    """NT_FILE's entries for the file-backed mappings, as the kernel writes them."""
    return [notes.FileMapping(v.start, v.end, v.offset, v.path) for v in vmas if v.file_backed]


class _Ptrace:
    """ptrace(2) through libc."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._call = libc.ptrace
        self._call.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        self._call.restype = ctypes.c_long

    def __call__(self, request: int, tid: int, addr: int | None = None, data: object = None) -> None:
        if self._call(request, tid, addr, data) == -1:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))

    def registers(self, tid: int, arch: Arch) -> dict[str, int]:
        size = 8 * len(arch.prstatus_registers)
        buffer = ctypes.create_string_buffer(size)

        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]

        vec = IoVec(ctypes.cast(buffer, ctypes.c_void_p), size)
        self(PTRACE_GETREGSET, tid, notes.NT_PRSTATUS, ctypes.byref(vec))
        values = struct.unpack_from(f"<{len(arch.prstatus_registers)}Q", buffer.raw)
        return dict(zip(arch.prstatus_registers, values, strict=True))


def _tids(pid: int) -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(f"/proc/{pid}/task") if name.isdigit())
    except OSError as exc:
        raise LiveError(f"process {pid}: {exc.strerror}") from None


def _wait_stop(tid: int, deadline: float) -> int:
    """Waits for the thread's ptrace stop; returns the signal to hand back at detach (0: none was taken).

    Raises TimeoutError when no stop is reported by `deadline` (time.monotonic): a thread in uninterruptible
    sleep stops only when it wakes, and another thread of this process may have reaped the stop (a parent's
    waitpid on its own child sees a tracee's stops too); no snapshot may hang."""
    while True:
        found, status = os.waitpid(tid, WALL | os.WNOHANG)
        if found == 0:
            if time.monotonic() > deadline:
                raise TimeoutError(tid)
            time.sleep(0.0002)
            continue
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            raise ProcessLookupError(tid)
        if os.WIFSTOPPED(status):
            if status >> 16 == PTRACE_EVENT_STOP:
                return 0
            return os.WSTOPSIG(status)  # a signal was being delivered: it is handed back at detach


def capture(pid: int, budget: ByteBudget | None = None, read_as: ReadAs | None = None) -> Stopped:
    """Stops the process, takes registers, the innermost stack pages and Python stacks, lets it go, then copies the
    rest of each thread's stack; keeps PROCESS_BYTES at the most, and no more than `budget` has left (which is
    charged with what was kept); raises LiveError. `read_as`: the process's user, as whom the files it mapped are
    read (a path it names may be a link it planted to a file closed to it); None reads them as this process."""
    machine = MACHINES.get(platform.machine())
    arch = BY_MACHINE.get(machine) if machine else None
    if arch is None or machine is None:
        raise LiveError(f"live snapshots are taken on {' and '.join(MACHINES)} only, not {platform.machine()}")
    try:
        vmas = maps(pid)
        reader = PageReader(pid, vmas, min(PROCESS_BYTES, budget.left) if budget else PROCESS_BYTES)
        auxv = Path(f"/proc/{pid}/auxv").read_bytes()
    except OSError as exc:
        raise LiveError(f"process {pid}: {exc.strerror or exc}") from None
    try:
        return _capture(pid, arch, machine, vmas, reader, auxv, Files(None, None, (), read_as))
    finally:
        reader.close()
        if budget is not None:
            budget.left -= PAGE * len(reader.pages)


def _capture(pid: int, arch: Arch, machine: int, vmas: list[Vma], reader: PageReader, auxv: bytes,
             files: Files) -> Stopped:
    result = Stopped(pid, arch, machine, vmas, [], reader.pages, auxv=auxv)
    try:
        # before the stop: modules and the interpreter's symbols (files on disk, headers that do not change)
        memory, modules = process_memory(reader.read, _virtual_segments(vmas), file_mappings(vmas), files,
                                         result.diagnostics)
        # the dynamic linker's list of loaded objects, read once so that its pages are in the core: gdb finds a
        # core's libraries through it (r_debug, link_map), not through NT_FILE
        link_map.mappings(notes.auxv(auxv), memory, files, [])
        result.python_version = python_version(modules, _comm(pid))
        _take(pid, arch, vmas, reader, memory, modules, result)
        # the process runs again: argv and the environment (the core reader's command line), then the stacks
        initial = _stack_start(pid)
        if initial and (vma := _holding(initial, vmas)) is not None:
            reader.copy(initial, min(vma.end, initial + MAX_STACK_COPY))
        _copy_stacks(result, vmas, reader, memory, modules)
    finally:
        files.close()
    vdso = notes.auxv(auxv).get(notes.AT_SYSINFO_EHDR)
    for vma in vmas:
        if vma.start == vdso:
            reader.copy(vma.start, vma.end)
    return result


def _take(pid: int, arch: Arch, vmas: list[Vma], reader: PageReader, memory: Memory, modules: list[Module],
          result: Stopped) -> None:
    """Stops every thread, takes what must be taken while they are stopped, lets them go.

    The tracer is a thread of its own (`_traced`), ended before this returns: a thread that never stopped (in
    uninterruptible sleep, as in a driver that does not return) cannot be detached, PTRACE_DETACH needs a stopped
    tracee, and the pending PTRACE_INTERRUPT would stop it as soon as it woke, held until postmortem exited. The
    end of its tracer lets go of it at once, the interrupt cancelled (kernel/ptrace.c, __ptrace_unlink)."""
    from concurrent.futures import ThreadPoolExecutor  # here: `collect` imports this module for core_writer

    with ThreadPoolExecutor(1, thread_name_prefix=f"ptrace-{pid}") as tracer:
        tracer_tid = tracer.submit(_traced, pid, arch, vmas, reader, memory, modules, result).result()
    deadline = time.monotonic() + TRACER_EXIT_WAIT_S
    while os.path.exists(f"/proc/self/task/{tracer_tid}") and time.monotonic() < deadline:
        time.sleep(0.001)
    if not result.threads:
        raise LiveError(f"process {pid}: no thread could be stopped"
                        + (f" ({'; '.join(result.diagnostics)})" if result.diagnostics else ""))


NOT_STOPPED = -2
"""`_traced`'s mark of a seized thread whose stop never came."""


def _traced(pid: int, arch: Arch, vmas: list[Vma], reader: PageReader, memory: Memory, modules: list[Module],
            result: Stopped) -> int:
    """`_take`'s tracer: registers, each thread's HOT_STACK and the Python stacks while the process is stopped;
    returns the tracer's thread id."""
    ptrace = _Ptrace()
    held: dict[int, int] = {}
    """Seized thread -> the signal to hand back when it is let go."""
    started = time.perf_counter()
    try:
        for _ in range(MAX_STOP_ROUNDS):
            new = [tid for tid in _tids(pid) if tid not in held]
            if not new:
                break
            for tid in new:
                try:
                    ptrace(PTRACE_SEIZE, tid, 0, 0)
                    ptrace(PTRACE_INTERRUPT, tid, 0, 0)
                    held[tid] = -1
                except OSError as exc:
                    if exc.errno == 3:  # ESRCH: the thread ended meanwhile
                        continue
                    raise LiveError(f"cannot stop thread {tid} of process {pid}: {exc.strerror} "
                                    "(ptrace needs the same user and kernel.yama.ptrace_scope 0, or "
                                    "CAP_SYS_PTRACE)") from None
            deadline = time.monotonic() + STOP_WAIT_S  # one wait for the whole round, however many threads
            for tid in new:
                if held.get(tid) == -1:
                    try:
                        held[tid] = _wait_stop(tid, deadline)
                    except (ProcessLookupError, ChildProcessError):
                        del held[tid]
                    except TimeoutError:
                        result.diagnostics.append(f"thread {tid} was never stopped: {_why_not_stopped(pid, tid)} "
                                                  f"through the {STOP_WAIT_S:g} s waited; its registers and stack "
                                                  "are not read")
                        held[tid] = NOT_STOPPED
                        result.never_stopped.append(tid)
        for tid in sorted(t for t, how in held.items() if how >= 0):
            try:
                registers = ptrace.registers(tid, arch)
            except OSError as exc:
                result.diagnostics.append(f"thread {tid}: registers not read ({exc.strerror})")
                continue
            result.threads.append(notes.ThreadStatus(tid, 0, registers))
            sp = registers[arch.sp]
            if (vma := _holding(sp, vmas)) is not None:
                reader.copy(max(vma.start, sp - RED_ZONE), min(vma.end, sp + HOT_STACK))
        if result.python_version:
            try:
                result.python = read_python_stacks(memory.read, modules, result.python_version)
            except (PythonStackError, ValueError) as exc:
                result.diagnostics.append(f"Python stacks not read: {exc}")
    finally:
        for tid, signal in held.items():
            if signal == NOT_STOPPED:  # one last look: a thread woken meanwhile has stopped and can be let go
                try:
                    signal = _wait_stop(tid, time.monotonic())
                except (TimeoutError, ProcessLookupError, ChildProcessError):
                    continue  # let go of when this thread ends
            try:
                ptrace(PTRACE_DETACH, tid, 0, max(signal, 0))
            except OSError:
                pass
        result.stopped_s = time.perf_counter() - started
    return threading.get_native_id()


def stat_fields(pid: int | str, tid: int | str | None = None) -> list[str]:
    """/proc/PID[/task/TID]/stat after the command name (whose parentheses may hold anything): field 3 on; [] when
    it cannot be read (the process or thread is gone)."""
    try:
        raw = Path(f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return []
    return raw[raw.rfind(b")") + 2:].decode("ascii", "replace").split()


def _why_not_stopped(pid: int, tid: int) -> str:
    """A thread's scheduler state, in words, from /proc/PID/task/TID/stat."""
    fields = stat_fields(pid, tid)
    if not fields:
        return "gone"
    state = fields[0]
    return "in uninterruptible sleep (state D: waiting in the kernel)" if state == "D" else f"in state {state}"


def _holding(addr: int, vmas: list[Vma]) -> Vma | None:
    """The readable mapping that holds `addr`."""
    vma = next((v for v in vmas if v.start <= addr < v.end), None)
    return vma if vma is not None and vma.readable else None


def _stack_start(pid: int) -> int | None:
    """Where the kernel put argc, argv, the environment and the auxiliary vector, below their strings at the top of
    the main stack (/proc/PID/stat field 28, startstack)."""
    fields = stat_fields(pid)
    return int(fields[25]) if len(fields) > 25 else None


def _copy_stacks(result: Stopped, vmas: list[Vma], reader: PageReader, memory: Memory, modules: list[Module]) -> None:
    """Each stopped thread's stack, read now that the process runs again: unwound by the core reader's unwinder,
    which reads (and so keeps) the pages its frames need, then copied whole from just below its stack pointer to
    just above its outermost frame, MAX_STACK_COPY at the most. A stack the byte budget cuts is a line of the case."""
    finder, budget, cut = _ModuleFinder(modules), Budget(), []
    for status in result.threads:
        refused = reader.refused
        sp = status.registers[result.arch.sp]
        vma = _holding(sp, vmas)
        if vma is None:
            continue
        done = unwind_thread(status.registers, memory, finder, budget, result.arch)
        outermost = max((f.sp for f in done.frames if f.sp is not None and vma.start <= f.sp < vma.end), default=sp)
        start = max(vma.start, sp - RED_ZONE)
        reader.copy(start, min(vma.end, outermost + STACK_SLACK, start + MAX_STACK_COPY))
        if reader.refused > refused:
            cut.append(status.tid)
    if cut:
        result.diagnostics.append(
            f"the stacks of {len(cut)} thread(s) are cut (thread {cut[0]} first): the bytes a snapshot may keep "
            f"({PROCESS_BYTES >> 20} MiB of a process, {JOB_BYTES >> 20} MiB of all it takes) are spent, and their "
            "outer frames are not in the core")


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return None


def page_runs(pages: dict[int, bytes]) -> Iterator[tuple[int, bytes]]:
    """The kept pages as runs of adjacent pages: (address, bytes)."""
    run_start, chunks = None, []
    for page in sorted(pages):
        if run_start is not None and page == run_start + PAGE * len(chunks):
            chunks.append(pages[page])
            continue
        if run_start is not None:
            yield run_start, b"".join(chunks)
        run_start, chunks = page, [pages[page]]
    if run_start is not None:
        yield run_start, b"".join(chunks)
