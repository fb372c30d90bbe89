"""The Python-level stack of every thread of a crashed CPython process, read from its memory.

A native backtrace of a CPython process shows `_PyEval_EvalFrameDefault` over and over; the
user needs the *Python* file, function and line each thread was running. Those live in the
interpreter's own structures: `_PyRuntime` -> interpreters -> thread states -> frame chain ->
code objects. CPython 3.13 and 3.14 publish where each field sits (`_Py_DebugOffsets`, found
by the cookie "xdebugpy" at the start of `_PyRuntime`; its fields differ between the two); for
3.10-3.12 this module carries one table per minor version, measured on x86-64 builds with debug
info (`offsetof` in gdb).

Everything read from the core is untrusted: pointers are checked for alignment, objects for
their type, strings and tables for size, chains for length and cycles. Whatever cannot be
read ends the walk there; the only exception that leaves this module is `PythonStackError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

Read = Callable[[int, int], "bytes | None"]
FindSymbol = Callable[[str], "int | None"]

MAX_THREADS = 4096
MAX_INTERPRETERS = 256
"""Interpreters walked (the main one and any subinterpreters), threads or not."""
MAX_FRAMES = 20000  # per thread; sys.setrecursionlimit can go far above the default 1000
MAX_TOTAL_FRAMES = 100_000
"""Frames for all the threads together: 4096 threads may all point into one 20,000-frame chain."""
MAX_LINE_ENTRIES = 5_000_000
"""Location-table entries decoded in one walk (each frame's line is found by a scan of its code's table)."""
MAX_VARINT_BYTES = 6
"""A location-table varint holds at most 32 bits (6 bits a byte); a longer run is no table."""
MAX_STRING_CHARS = 4096
MAX_LINETABLE_BYTES = 1 << 20
ENTRY_FRAME_OWNER = 3
"""3.12+: the owner of the shim frame each eval-loop call pushes under its frames (Python/ceval.c):
FRAME_OWNED_BY_CSTACK in 3.12-3.13, FRAME_OWNED_BY_INTERPRETER in 3.14, both 3. 3.14 adds
FRAME_OWNED_BY_CSTACK = 4 (Include/internal/pycore_interpframe_structs.h), which no Python
function's frame has either: CPython's own _PyFrame_IsIncomplete takes owners from 3 up as no
Python function's."""
STACKREF_TAG_BITS_314 = 3
"""3.14's frame holds its code as a _PyStackRef, a pointer whose low two bits are tags
(Py_TAG_BITS of the default build, Include/internal/pycore_stackref.h)."""

MAX_STACK_SLOTS = 4096
"""Value-stack slots of one frame read for locks (a code object's co_stacksize is rarely above 100)."""
MAX_TOTAL_SLOTS = 1 << 18
"""Value-stack slots read for locks in one walk, all threads together: a bound on what the locks cost."""
LOCK_TYPES = frozenset({"_thread.lock", "_thread.RLock"})
"""The types of threading.Lock and threading.RLock objects (Modules/_threadmodule.c)."""
BOUND_BUILTIN = "builtin_function_or_method"
"""The type of a C method bound to its object (PyCFunctionObject): `with lock:` keeps `lock.__exit__` so."""
CFUNCTION_SELF = 24
"""Offset of m_self in PyCFunctionObject, the same in 3.10-3.14 (gdb `ptype /o`)."""
CODE_EXCEPTIONTABLE = 40
"""Offset of co_exceptiontable in PyCodeObject, after the var-object head, co_consts and co_names (3.11-3.14; gdb
`ptype /o PyCodeObject`)."""
LIVE_REFCOUNT = 1 << 40
"""Above this an object's first word is no reference count: pymalloc keeps the next free block's address
there once the object is freed, so a slot that outlived its object reads as a heap address (or 0)."""

GLIBC_PTHREAD_TID = 720  # offset of `tid` in glibc's struct pthread on x86-64 and aarch64


class PythonStackError(Exception):
    """The interpreter state could not be read; the message says which part and why."""


@dataclass(frozen=True)
class PythonFrame:
    """One Python function activation: the code's file, the function name, the line running."""

    file: str
    function: str
    line: int | None


@dataclass(frozen=True)
class PythonLock:
    """A threading lock a frame's value stack refers to, as the interpreter keeps it there: the bound `__exit__`
    of a `with lock:` block the frame is in (3.11-3.13), or the lock itself beside its method (3.14's
    LOAD_SPECIAL, an `acquire()` call running). Locals are not read: a name bound to a lock holds nothing."""

    address: str
    """The lock object's address, in hex: two threads naming one address name one lock."""
    kind: str
    """Its type: _thread.lock (threading.Lock) or _thread.RLock."""
    frame: int
    """Index in PythonThread.frames of the frame whose stack holds it."""


@dataclass(frozen=True)
class PythonThread:
    """A thread's Python stack, innermost frame first.

    `thread_id` is the kernel's thread id (NT_PRSTATUS pr_pid), or 0 when it could not be
    read. `error` says why the frame walk stopped early, when it did.
    """

    thread_id: int
    frames: tuple[PythonFrame, ...]
    error: str | None = None
    locks: tuple[PythonLock, ...] = ()
    """The locks the frames' value stacks refer to, innermost frame first and, in a frame, the top of its stack
    first: for a thread waiting in a lock's acquire, the first (of frame 0) is the lock it waits for and the
    others are `with` blocks it is in, locks it holds."""
    calls: tuple[int, ...] = ()
    """How many of `frames` each eval-loop call runs, innermost call first (they sum to len(frames)).

    Read from the chain itself: in 3.10 every frame is a call of its own, in 3.11 a call's
    outermost frame has `is_entry` set, from 3.12 on a shim frame (owner ENTRY_FRAME_OWNER)
    lies under each call's frames. Frames under the last marker (a cut walk) are one more call.
    """


@dataclass(frozen=True)
class Layout:
    """Byte offsets of the fields the walk reads, for one CPython minor version (LP64).

    `tstate_frame` is the thread state's way to the innermost frame: a PyFrameObject* in
    3.10, a _PyCFrame* (then `cframe_current` inside it) in 3.11-3.12, the frame itself in
    3.13+. 3.10 frames hold an instruction index (`f_lasti`); later ones a pointer into the
    code object's bytecode, which starts at `code_bytecode`.
    """

    runtime_interp_head: int
    interp_next: int
    interp_threads_head: int
    tstate_next: int
    tstate_frame: int
    cframe_current: int | None
    tstate_thread_id: int
    tstate_native_id: int | None
    frame_previous: int
    frame_code: int
    frame_instr: int
    frame_owner: int | None
    frame_is_entry: int | None
    code_filename: int
    code_name: int
    code_linetable: int
    code_firstlineno: int
    code_bytecode: int | None
    str_state: int
    str_length: int
    str_ascii_size: int
    str_compact_size: int
    bytes_size: int
    bytes_data: int
    ob_type: int = 8
    var_size: int = 16
    type_name: int = 24
    frame_code_tag_bits: int = 0
    frame_localsplus: int | None = None
    """Where a frame's locals and then its value stack start (3.11+)."""
    frame_stacktop: int | None = None
    """An int: the value stack's height as an index into localsplus (3.11-3.13), -1 or stale while the frame runs."""
    frame_stackpointer: int | None = None
    """A pointer to the top of the value stack (3.14)."""
    code_stacksize: int | None = None
    code_nlocalsplus: int | None = None


TABLES: dict[tuple[int, int], Layout] = {
    (3, 10): Layout(
        runtime_interp_head=32, interp_next=0, interp_threads_head=8, tstate_next=8,
        tstate_frame=24, cframe_current=None, tstate_thread_id=176, tstate_native_id=None,
        frame_previous=24, frame_code=32, frame_instr=96, frame_owner=None, frame_is_entry=None,
        code_filename=104, code_name=112, code_linetable=120, code_firstlineno=40,
        code_bytecode=None, str_state=32, str_length=16, str_ascii_size=48,
        str_compact_size=72, bytes_size=16, bytes_data=32),
    (3, 11): Layout(
        runtime_interp_head=40, interp_next=0, interp_threads_head=16, tstate_next=8,
        tstate_frame=56, cframe_current=8, tstate_thread_id=152, tstate_native_id=160,
        frame_previous=48, frame_code=32, frame_instr=56, frame_owner=69, frame_is_entry=68,
        code_filename=112, code_name=120, code_linetable=136, code_firstlineno=72,
        code_bytecode=184, str_state=32, str_length=16, str_ascii_size=48,
        str_compact_size=72, bytes_size=16, bytes_data=32,
        frame_localsplus=72, frame_stacktop=64, code_stacksize=68, code_nlocalsplus=76),
    (3, 12): Layout(
        runtime_interp_head=40, interp_next=0, interp_threads_head=72, tstate_next=8,
        tstate_frame=56, cframe_current=0, tstate_thread_id=136, tstate_native_id=144,
        frame_previous=8, frame_code=0, frame_instr=56, frame_owner=70, frame_is_entry=None,
        code_filename=112, code_name=120, code_linetable=136, code_firstlineno=68,
        code_bytecode=192, str_state=32, str_length=16, str_ascii_size=40,
        str_compact_size=56, bytes_size=16, bytes_data=32,
        frame_localsplus=72, frame_stacktop=64, code_stacksize=64, code_nlocalsplus=72),
}

# The u64 words of _Py_DebugOffsets (Include/internal/pycore_debug_offsets.h), in order, as far
# as the unicode offsets (word 0 is the cookie).
DEBUG_OFFSETS_3_13 = (  # one name per u64, in the header's order
    "cookie version free_threaded "
    "runtime.size runtime.finalizing runtime.interpreters_head "
    "interp.size interp.id interp.next interp.threads_head interp.gc interp.imports_modules "
    "interp.sysdict interp.builtins interp.ceval_gil interp.gil_runtime_state "
    "interp.gil_enabled interp.gil_locked interp.gil_holder "
    "tstate.size tstate.prev tstate.next tstate.interp tstate.current_frame tstate.thread_id "
    "tstate.native_thread_id tstate.datastack_chunk tstate.status "
    "frame.size frame.previous frame.executable frame.instr_ptr frame.localsplus frame.owner "
    "code.size code.filename code.name code.qualname code.linetable code.firstlineno "
    "code.argcount code.localsplusnames code.localspluskinds code.co_code_adaptive "
    "object.size object.ob_type type.size type.tp_name type.tp_repr type.tp_flags "
    "tuple.size tuple.ob_item tuple.ob_size list.size list.ob_item list.ob_size "
    "dict.size dict.ma_keys dict.ma_values float.size float.ob_fval "
    "long.size long.lv_tag long.ob_digit bytes.size bytes.ob_size bytes.ob_sval "
    "unicode.size unicode.state unicode.length unicode.asciiobject_size"
).split()
DEBUG_OFFSETS_3_14 = (  # 3.14.0's header: threads_main, tlbc, stackpointer and the set object are new
    "cookie version free_threaded "
    "runtime.size runtime.finalizing runtime.interpreters_head "
    "interp.size interp.id interp.next interp.threads_head interp.threads_main interp.gc "
    "interp.imports_modules interp.sysdict interp.builtins interp.ceval_gil interp.gil_runtime_state "
    "interp.gil_enabled interp.gil_locked interp.gil_holder interp.code_object_generation "
    "interp.tlbc_generation "
    "tstate.size tstate.prev tstate.next tstate.interp tstate.current_frame tstate.thread_id "
    "tstate.native_thread_id tstate.datastack_chunk tstate.status "
    "frame.size frame.previous frame.executable frame.instr_ptr frame.localsplus frame.owner "
    "frame.stackpointer frame.tlbc_index "
    "code.size code.filename code.name code.qualname code.linetable code.firstlineno "
    "code.argcount code.localsplusnames code.localspluskinds code.co_code_adaptive code.co_tlbc "
    "object.size object.ob_type type.size type.tp_name type.tp_repr type.tp_flags "
    "tuple.size tuple.ob_item tuple.ob_size list.size list.ob_item list.ob_size "
    "set.size set.used set.table set.mask "
    "dict.size dict.ma_keys dict.ma_values float.size float.ob_fval "
    "long.size long.lv_tag long.ob_digit bytes.size bytes.ob_size bytes.ob_sval "
    "unicode.size unicode.state unicode.length unicode.asciiobject_size"
).split()
DEBUG_OFFSETS = {(3, 13): DEBUG_OFFSETS_3_13, (3, 14): DEBUG_OFFSETS_3_14}
DEBUG_COOKIE = b"xdebugpy"
TYPE_SYMBOLS = {"PyCode_Type": "code", "PyFrame_Type": "frame", "PyUnicode_Type": "str", "PyBytes_Type": "bytes"}


def python_stacks(read: Read, find_symbol: FindSymbol, version: tuple[int, int]) -> list[PythonThread]:
    """Every thread of every interpreter, each with its Python frames (innermost first).

    `read(address, size)` gives the process's memory (None where the core lacks it);
    `find_symbol(name)` the absolute address of a defined symbol of python or libpython, or
    None; `version` is (major, minor), e.g. (3, 11). Raises PythonStackError when not even the thread
    list can be read.
    """
    try:
        return _Walker(_Memory(read), find_symbol, _minor_version(version)).threads()
    except (struct.error, ValueError, IndexError, OverflowError, OSError) as error:
        raise PythonStackError(f"malformed interpreter state: {error}") from error


def _minor_version(version: tuple[int, int]) -> tuple[int, int]:
    try:
        return int(version[0]), int(version[1])
    except (IndexError, TypeError, ValueError):
        raise PythonStackError(f"not a Python version: {version!r}") from None


class _Memory:
    """Typed reads of the core that raise PythonStackError instead of returning short data."""

    def __init__(self, read: Read) -> None:
        self._read = read

    def bytes(self, address: int, size: int, what: str) -> bytes:
        if not 0 < address or size < 0 or address + size > 1 << 64:
            raise PythonStackError(f"{what}: address {address:#x} is not a valid pointer")
        data = self._read(address, size) if size else b""
        if data is None or len(data) < size:
            raise PythonStackError(f"{what} at {address:#x} is not in the core")
        return bytes(data[:size])

    def u64(self, address: int, what: str) -> int:
        return int.from_bytes(self.bytes(address, 8, what), "little")

    def pointer(self, address: int, what: str) -> int:
        """A non-null, 8-aligned pointer stored at `address` (objects and frames are aligned)."""
        value = self.u64(address, what)
        if value == 0 or value % 8:
            raise PythonStackError(f"{what} at {address:#x} holds {value:#x}, not an object pointer")
        return value


def _u32(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset:offset + 4], "little")


def _i32(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset:offset + 4], "little", signed=True)


def _u64(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset:offset + 8], "little")


class _Walker:
    """One walk over a core's interpreter state, with the caches that keep it cheap."""

    def __init__(self, memory: _Memory, find_symbol: FindSymbol, version: tuple[int, int]) -> None:
        self.memory = memory
        self.find_symbol = find_symbol
        self.version = version
        runtime = find_symbol("_PyRuntime")
        if runtime is None:
            raise PythonStackError("symbol _PyRuntime not found in the python executable or libpython")
        self.runtime: int = runtime
        self.layout = self._layout()
        self.type_addresses = {name: address for name, address in (
            (name, find_symbol(symbol)) for symbol, name in TYPE_SYMBOLS.items()) if address is not None}
        self.type_names: dict[int, str | None] = {}
        self.frames: dict[tuple[int, int], PythonFrame] = {}
        self.codes: dict[int, tuple[str, str, int, bytes, int]] = {}
        self.frames_left = MAX_TOTAL_FRAMES
        self.entries_left = MAX_LINE_ENTRIES
        self.slots_left = MAX_TOTAL_SLOTS
        self.stack_counts: dict[int, tuple[int, int]] = {}
        self.handlers: dict[int, tuple[tuple[int, int, int], ...]] = {}

    def _layout(self) -> Layout:
        if self.version in TABLES:
            return TABLES[self.version]
        if self.version in DEBUG_OFFSETS:
            return self._debug_offsets_layout(DEBUG_OFFSETS[self.version])
        raise PythonStackError(f"CPython {self.version[0]}.{self.version[1]} is not supported (3.10 to 3.14 are)")

    def _debug_offsets_layout(self, names: list[str]) -> Layout:
        """Build the layout from the _Py_DebugOffsets that 3.13+ keeps at the start of _PyRuntime."""
        raw = self.memory.bytes(self.runtime, 8 * len(names), "_Py_DebugOffsets")
        if raw[:8] != DEBUG_COOKIE:
            raise PythonStackError(f"_PyRuntime at {self.runtime:#x} does not start with the {DEBUG_COOKIE!r} cookie")
        words = dict(zip(names, struct.unpack_from(f"<{len(names)}Q", raw)))
        if words["version"] >> 16 != self.version[0] << 8 | self.version[1]:
            raise PythonStackError(f"_Py_DebugOffsets says version {words['version']:#x}, not {self.version}")
        if words["free_threaded"] and self.version >= (3, 14):
            raise PythonStackError("free-threaded 3.14 builds are not supported: their frames run per-thread "
                                   "copies of the bytecode, so lines cannot be read from co_code_adaptive")
        if any(value > 1 << 20 for name, value in words.items() if name not in ("cookie", "version")):
            raise PythonStackError("_Py_DebugOffsets holds an implausible offset")
        ascii_size = words["unicode.asciiobject_size"]
        localsplus = words["frame.localsplus"]
        # the ints around co_firstlineno, as measured on 3.12 and 3.13 (gdb `ptype /o PyCodeObject`): co_stacksize
        # before it, co_nlocalsplus after it, then four ints and a uint32 up to co_localsplusnames
        counts_known = words["code.localsplusnames"] == words["code.firstlineno"] + 28
        return Layout(
            runtime_interp_head=words["runtime.interpreters_head"], interp_next=words["interp.next"],
            interp_threads_head=words["interp.threads_head"], tstate_next=words["tstate.next"],
            tstate_frame=words["tstate.current_frame"], cframe_current=None,
            tstate_thread_id=words["tstate.thread_id"], tstate_native_id=words["tstate.native_thread_id"],
            frame_previous=words["frame.previous"], frame_code=words["frame.executable"],
            frame_instr=words["frame.instr_ptr"], frame_owner=words["frame.owner"],
            frame_is_entry=None,
            code_filename=words["code.filename"], code_name=words["code.name"],
            code_linetable=words["code.linetable"], code_firstlineno=words["code.firstlineno"],
            code_bytecode=words["code.co_code_adaptive"], str_state=words["unicode.state"],
            str_length=words["unicode.length"], str_ascii_size=ascii_size,
            str_compact_size=ascii_size + 16, bytes_size=words["bytes.ob_size"],
            bytes_data=words["bytes.ob_sval"], ob_type=words["object.ob_type"],
            var_size=words["tuple.ob_size"], type_name=words["type.tp_name"],
            frame_code_tag_bits=STACKREF_TAG_BITS_314 if self.version >= (3, 14) else 0,
            frame_localsplus=localsplus,
            # 3.13's int stacktop sits just before localsplus (measured on 3.13.0); 3.14 publishes a pointer
            frame_stacktop=localsplus - 8 if "frame.stackpointer" not in words else None,
            frame_stackpointer=words.get("frame.stackpointer"),
            code_stacksize=words["code.firstlineno"] - 4 if counts_known else None,
            code_nlocalsplus=words["code.firstlineno"] + 4 if counts_known else None)

    # --- threads ---------------------------------------------------------------------------

    def threads(self) -> list[PythonThread]:
        """All thread states of all interpreters; partial when a later link is unreadable."""
        lay = self.layout
        result: list[PythonThread] = []
        seen: set[int] = set()
        interp = self.memory.pointer(self.runtime + lay.runtime_interp_head, "_PyRuntime.interpreters.head")
        interpreters = 0
        while interp and len(result) < MAX_THREADS and interp not in seen and interpreters < MAX_INTERPRETERS:
            seen.add(interp)
            interpreters += 1
            tstate = self._link(interp + lay.interp_threads_head, "PyInterpreterState.threads.head", not result)
            while tstate and len(result) < MAX_THREADS and tstate not in seen:
                seen.add(tstate)
                result.append(self._thread(tstate))
                tstate = self._link(tstate + lay.tstate_next, "PyThreadState.next", False)
            interp = self._link(interp + lay.interp_next, "PyInterpreterState.next", False)
        return result

    def _link(self, address: int, what: str, required: bool) -> int:
        """The next element of a chain, 0 at its end or (unless `required`) where it is unreadable."""
        try:
            value = self.memory.u64(address, what)
        except PythonStackError:
            if required:
                raise
            return 0
        if value % 8:
            if required:
                raise PythonStackError(f"{what} at {address:#x} holds {value:#x}, not a pointer")
            return 0
        return value

    def _thread(self, tstate: int) -> PythonThread:
        frames: list[PythonFrame] = []
        locks: list[PythonLock] = []
        calls: list[int] = []
        running = 0  # frames of the innermost call not yet closed by its entry marker
        error = None
        try:
            for address, frame, ends_call, code, offset in self._frame_chain(tstate):
                if frame is not None:
                    locks.extend(self._locks(address, len(frames), code, offset))
                    frames.append(frame)
                    running += 1
                if ends_call:
                    calls.append(running)
                    running = 0
        except PythonStackError as problem:
            error = str(problem)
        if running:
            calls.append(running)
        return PythonThread(self._native_id(tstate), tuple(frames), error, tuple(locks), tuple(calls))

    def _native_id(self, tstate: int) -> int:
        """The kernel thread id: a field from 3.11 on, else read from glibc's struct pthread."""
        lay = self.layout
        try:
            if lay.tstate_native_id is not None:
                tid = self.memory.u64(tstate + lay.tstate_native_id, "PyThreadState.native_thread_id")
            else:
                pthread = self.memory.u64(tstate + lay.tstate_thread_id, "PyThreadState.thread_id")
                tid = _u32(self.memory.bytes(pthread + self._pthread_tid_offset, 4, "struct pthread tid"), 0)
        except PythonStackError:
            return 0
        return tid if 0 < tid <= 1 << 22 else 0

    @cached_property
    def _pthread_tid_offset(self) -> int:
        """Where glibc keeps `tid`: its libthread_db descriptor says (bits, count, offset)."""
        descriptor = self.find_symbol("_thread_db_pthread_tid")
        if descriptor is not None:
            try:
                bits, count, offset = struct.unpack("<3I", self.memory.bytes(descriptor, 12, "_thread_db_pthread_tid"))
                if bits == 32 and count == 1 and offset < 4096:
                    return offset
            except PythonStackError:
                pass
        return GLIBC_PTHREAD_TID

    # --- frames ----------------------------------------------------------------------------

    def _frame_chain(self, tstate: int) -> Iterator[tuple[int, PythonFrame | None, bool, int, int]]:
        """Each frame of a thread, innermost first: its address, what it runs (None for frames that are not
        shown), whether it ends an eval-loop call (see PythonThread.calls), its code object and the bytecode
        offset it stopped at (0, 0 for frames not shown)."""
        lay = self.layout
        frame = self.memory.u64(tstate + lay.tstate_frame, "PyThreadState frame pointer")
        if frame and lay.cframe_current is not None:
            frame = self.memory.u64(frame + lay.cframe_current, "_PyCFrame.current_frame")
        seen: set[int] = set()
        while frame:
            if frame % 8 or frame in seen or len(seen) >= MAX_FRAMES:
                raise PythonStackError(f"frame chain broken at {frame:#x} (misaligned, looping or too long)")
            seen.add(frame)
            self.frames_left -= 1
            if self.frames_left < 0:
                raise PythonStackError(f"{MAX_TOTAL_FRAMES:,} Python frames already read from this core, the most "
                                       "read from one: the rest of this stack is left out")
            yield frame, *self._frame(frame)
            frame = self.memory.u64(frame + lay.frame_previous, "frame.previous")

    def _locks(self, frame: int, index: int, code: int, offset: int) -> list[PythonLock]:
        """The locks the value stack of the frame at `frame` (PythonThread.frames[index], running code object `code`
        at bytecode byte `offset`) refers to, top first.

        Only slots in use are read: a slot above the top still names whatever was last there, often a lock. A frame
        that called another saved its height; the innermost frame, running, saved none (3.11-3.13), and its slots
        in use are those below the depth its exception handler restores (co_exceptiontable: the `with` blocks it is
        in keep their `__exit__` there) and, above it, those of the instruction running, up to its first lock: the
        one an acquire waits for. An unreadable frame or object has no locks; nothing here ends the walk."""
        lay = self.layout
        if lay.frame_localsplus is None or lay.code_stacksize is None or lay.code_nlocalsplus is None:
            return []
        try:
            size, local = self._stack_counts(code)
            if not (0 <= local <= MAX_STACK_SLOTS and 0 < size <= MAX_STACK_SLOTS):
                return []
            base = frame + lay.frame_localsplus + 8 * local
            height = self._stack_height(frame, base, local, size)
            self.slots_left -= size
            if self.slots_left < 0:
                return []
            slots = struct.unpack(f"<{size}Q", self.memory.bytes(base, 8 * size, "value stack"))
            depth = self._handler_depth(code, offset) if height is None else height
        except PythonStackError:
            return []
        found: list[PythonLock] = []

        def add(slot: int) -> bool:
            lock = self._lock_in(slot & ~lay.frame_code_tag_bits)
            if lock is not None and all(f.address != f"{lock[0]:#x}" for f in found):
                found.append(PythonLock(f"{lock[0]:#x}", lock[1], index))
            return lock is not None

        if height is None:  # the running instruction's own slots: up to the first lock, the one it waits for
            next((slot for slot in slots[depth:] if add(slot)), None)
        for slot in reversed(slots[:depth]):
            add(slot)
        return found

    def _stack_counts(self, code: int) -> tuple[int, int]:
        """A code object's co_stacksize and co_nlocalsplus (read once per code: threads share their functions)."""
        if code not in self.stack_counts:
            lay = self.layout
            assert lay.code_stacksize is not None and lay.code_nlocalsplus is not None  # _locks checked
            first = min(lay.code_stacksize, lay.code_nlocalsplus)
            counts = self.memory.bytes(code + first, 12, "code counts")
            self.stack_counts[code] = (_i32(counts, lay.code_stacksize - first),
                                       _i32(counts, lay.code_nlocalsplus - first))
        return self.stack_counts[code]

    def _stack_height(self, frame: int, base: int, local: int, size: int) -> int | None:
        """The slots of the frame's value stack in use where the frame saved its height; None where it did not."""
        lay = self.layout
        if lay.frame_stackpointer is not None:
            top = self.memory.u64(frame + lay.frame_stackpointer, "frame stackpointer")
            height = (top - base) // 8 if top % 8 == 0 else -1
        elif lay.frame_stacktop is not None:
            height = _i32(self.memory.bytes(frame + lay.frame_stacktop, 4, "frame stacktop"), 0) - local
        else:
            height = -1
        return height if 0 <= height <= size else None

    def _handler_depth(self, code: int, offset: int) -> int:
        """The stack depth the exception handler of the instruction at bytecode byte `offset` restores (0 with none):
        every slot below it is in use (Objects/exception_handling_notes.txt: entries of start, length, target and
        depth, in code units, as varints of 6 bits, most significant first, 0x40 to continue, 0x80 at an entry's
        start)."""
        instruction = offset // 2
        return next((depth for start, end, depth in self._handlers(code) if start <= instruction < end), 0)

    def _handlers(self, code: int) -> tuple[tuple[int, int, int], ...]:
        """A code object's exception table as (start, end, depth) in code units, read and decoded once per code."""
        if code not in self.handlers:
            table = self._bytes(self.memory.u64(code + CODE_EXCEPTIONTABLE, "co_exceptiontable"), "co_exceptiontable")
            entries = []
            position = 0
            while position < len(table):
                fields = []
                for _ in range(4):
                    value, position = _big_varint(table, position)
                    fields.append(value)
                start, length, _, depth_lasti = fields
                entries.append((start, start + length, depth_lasti >> 1))
            self.handlers[code] = tuple(entries)
        return self.handlers[code]

    def _lock_in(self, obj: int) -> tuple[int, str] | None:
        """The lock a stack slot's object is, or is a bound method of (`lock.__exit__`), with its type name."""
        for _ in range(2):
            kind = self._live_type(obj)
            if kind in LOCK_TYPES:
                return obj, kind
            if kind != BOUND_BUILTIN:
                return None
            try:
                obj = self.memory.u64(obj + CFUNCTION_SELF, "m_self")
            except PythonStackError:
                return None
        return None

    def _live_type(self, obj: int) -> str | None:
        """The type name of a live object at `obj`; None for no object, a freed one or an unreadable one."""
        if obj == 0 or obj % 8:
            return None
        try:
            head = self.memory.bytes(obj, 16, "object header")
        except PythonStackError:
            return None
        if not 0 < _u64(head, 0) < LIVE_REFCOUNT:
            return None
        kind = _u64(head, self.layout.ob_type)
        if kind not in self.type_names:
            self.type_names[kind] = self._tp_name(kind)
        return self.type_names[kind]

    def _frame(self, frame: int) -> tuple[PythonFrame | None, bool, int, int]:
        lay = self.layout
        header = self.memory.bytes(frame, max(lay.frame_code, lay.frame_instr, lay.frame_owner or 0) + 8, "frame")
        if lay.frame_owner is not None and header[lay.frame_owner] >= ENTRY_FRAME_OWNER and self.version >= (3, 12):
            return None, True, 0, 0
        ends_call = lay.frame_owner is None or (lay.frame_is_entry is not None and header[lay.frame_is_entry] != 0)
        code = _u64(header, lay.frame_code) & ~lay.frame_code_tag_bits
        if lay.code_bytecode is None:
            if not self._is_type(frame, "frame"):
                raise PythonStackError(f"object at {frame:#x} is not a frame")
            offset = _i32(header, lay.frame_instr) * 2
        else:
            offset = _u64(header, lay.frame_instr) - (code + lay.code_bytecode)
        key = (code, offset)
        if key not in self.frames:
            self.frames[key] = self._located(code, offset)
        return self.frames[key], ends_call, code, offset

    def _located(self, code: int, offset: int) -> PythonFrame:
        """The frame of code object `code` stopped at bytecode byte `offset`."""
        filename, name, firstlineno, linetable, size = self._code(code)
        if offset < 0:
            line: int | None = firstlineno
        elif size and offset >= size:
            line = None
        else:
            ranges = _ranges_310 if self.version == (3, 10) else _ranges_311
            line = _line_at(self._counted(ranges(linetable, firstlineno)), offset)
        return PythonFrame(filename, name, line)

    def _counted(self, ranges: Iterator[LineRange]) -> Iterator[LineRange]:
        """The entries of a location table, within what is left of the walk's MAX_LINE_ENTRIES."""
        for entry in ranges:
            self.entries_left -= 1
            if self.entries_left < 0:
                raise PythonStackError(f"{MAX_LINE_ENTRIES:,} location-table entries already decoded for this "
                                       "core, the most decoded for one: the rest of this stack is left out")
            yield entry

    def _code(self, code: int) -> tuple[str, str, int, bytes, int]:
        """File, name, first line, line table and bytecode size in bytes (0: unknown) of a code object."""
        if code not in self.codes:
            lay = self.layout
            if code == 0 or code % 8 or not self._is_type(code, "code"):
                raise PythonStackError(f"frame's code pointer {code:#x} is not a code object")
            fields = (lay.code_filename, lay.code_name, lay.code_linetable, lay.code_firstlineno, lay.var_size)
            header = self.memory.bytes(code, max(fields) + 8, "code object")
            size = _u64(header, lay.var_size) * 2 if lay.code_bytecode is not None else 0
            self.codes[code] = (
                self._string(_u64(header, lay.code_filename), "co_filename"),
                self._string(_u64(header, lay.code_name), "co_name"),
                _i32(header, lay.code_firstlineno),
                self._bytes(_u64(header, lay.code_linetable), "co_linetable"),
                size if size < 1 << 28 else 0)
        return self.codes[code]

    # --- objects ---------------------------------------------------------------------------

    def _is_type(self, obj: int, name: str) -> bool:
        """Whether `obj`'s type is the interpreter's type `name`.

        The type's address is compared with the symbol (PyCode_Type...) where that is known,
        then the type's tp_name is read: a stripped build lacks the symbol, and an executable
        with a copy relocation of it holds the type at another address than libpython's.
        """
        kind = self.memory.u64(obj + self.layout.ob_type, "ob_type")
        if kind == self.type_addresses.get(name):
            return True
        if kind not in self.type_names:
            self.type_names[kind] = self._tp_name(kind)
        return self.type_names[kind] == name

    def _tp_name(self, kind: int) -> str | None:
        if kind == 0 or kind % 8:
            return None
        try:
            name = self.memory.u64(kind + self.layout.type_name, "tp_name")
        except PythonStackError:
            return None
        for size in (32, 8):  # the longest name asked for, "builtin_function_or_method", and "code", "frame"...
            try:
                return self.memory.bytes(name, size, "tp_name").split(b"\0", 1)[0].decode("latin-1")
            except PythonStackError:  # a name near the end of its mapping
                continue
        return None

    def _string(self, obj: int, what: str) -> str:
        """A compact str object's text (the only kind code objects hold)."""
        lay = self.layout
        if obj == 0 or obj % 8 or not self._is_type(obj, "str"):
            raise PythonStackError(f"{what} at {obj:#x} is not a str")
        header = self.memory.bytes(obj, lay.str_ascii_size, what)
        length, state = _u64(header, lay.str_length), _u32(header, lay.str_state)
        kind, compact, ascii = state >> 2 & 7, state >> 5 & 1, state >> 6 & 1
        if not compact or kind not in (1, 2, 4) or length > MAX_STRING_CHARS:
            raise PythonStackError(f"{what} at {obj:#x} is not a compact str of sane length")
        start = obj + (lay.str_ascii_size if ascii else lay.str_compact_size)
        data = self.memory.bytes(start, length * kind, what)
        return data.decode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind], errors="replace")

    def _bytes(self, obj: int, what: str) -> bytes:
        lay = self.layout
        if obj == 0 or obj % 8 or not self._is_type(obj, "bytes"):
            raise PythonStackError(f"{what} at {obj:#x} is not a bytes object")
        size = self.memory.u64(obj + lay.bytes_size, what)
        if size > MAX_LINETABLE_BYTES:
            raise PythonStackError(f"{what} at {obj:#x} claims {size} bytes")
        return self.memory.bytes(obj + lay.bytes_data, size, what)


# --- native and Python frames merged -----------------------------------------------------------

EVAL_LOOP = "_PyEval_EvalFrameDefault"
"""The interpreter's eval loop: each native frame of it runs one call of PythonThread.calls."""


def is_eval_loop(symbol: str | None) -> bool:
    """Whether a native frame's symbol is the eval loop (or a compiler-split part of it, `.cold`)."""
    return symbol is not None and (symbol == EVAL_LOOP or symbol.startswith(EVAL_LOOP + "."))


def call_marker(version: tuple[int, int]) -> str:
    """How the frame chain of CPython `version` says where each eval-loop call starts."""
    if version <= (3, 10):
        return "3.10 runs each Python frame in an eval-loop call of its own"
    if version == (3, 11):
        return "3.11 marks each call's outermost frame is_entry"
    owner = "FRAME_OWNED_BY_CSTACK" if version < (3, 14) else "FRAME_OWNED_BY_INTERPRETER"
    return f"{version[0]}.{version[1]} puts a shim frame (owner {owner}) under each call's frames"


def spread(thread: PythonThread, eval_frames: int, version: tuple[int, int]) -> tuple[list[tuple[int, int]], str]:
    """Which Python frames each of `eval_frames` native eval-loop frames runs, and how sure that is.

    The answer is one (start, end) slice of `thread.frames` per eval-loop frame, innermost
    first. Calls and eval-loop frames are paired from the innermost: both walks start there,
    and either may be cut short at the outer end. The pairing is certain when the counts
    agree; when they do not, the note says so and how many Python frames are on none.
    """
    calls = thread.calls[:eval_frames]
    bounds = [sum(calls[:index]) for index in range(len(calls) + 1)]
    slices = [(bounds[index], bounds[index + 1]) for index in range(len(calls))]
    slices += [(bounds[-1], bounds[-1])] * (eval_frames - len(calls))
    marker = call_marker(version)
    if len(thread.calls) == eval_frames:
        return slices, (f"{eval_frames} eval-loop frames, {eval_frames} Python calls ({marker}): "
                        "each eval-loop frame runs the call at its depth")
    left = len(thread.frames) - bounds[-1]
    return slices, (f"{eval_frames} eval-loop frames but {len(thread.calls)} Python calls ({marker}): "
                    f"paired from the innermost, a guess; {left} Python frames are on no eval-loop frame")


# --- line tables ------------------------------------------------------------------------------

LineRange = tuple[int, int, "int | None"]


def _line_at(ranges: Iterator[LineRange], offset: int) -> int | None:
    """The line of the bytecode byte at `offset`, None where the table gives none."""
    for start, end, line in ranges:
        if start <= offset < end:
            return line
    return None


def _ranges_310(table: bytes, firstlineno: int) -> Iterator[LineRange]:
    """Bytecode byte ranges and their lines from a 3.10 co_linetable.

    The table is pairs (bytes covered: unsigned, line change: signed); a line change of -128
    means the range has no line, and the running line stays where it was.
    """
    line = firstlineno
    start = 0
    for index in range(0, len(table) - 1, 2):
        end = start + table[index]
        change = table[index + 1] - 256 if table[index + 1] > 127 else table[index + 1]
        current: int | None = None
        if change != -128:
            line += change
            current = line
        if end > start:
            yield start, end, current
        start = end


def _ranges_311(table: bytes, firstlineno: int) -> Iterator[LineRange]:
    """Bytecode byte ranges and their lines from a 3.11+ location table.

    Each entry starts with a byte 1cccclll: it covers lll+1 code units (2 bytes each) and its
    form cccc says how the line moves: 0-9 not at all (one byte of columns follows), 10-12
    by cccc-10 (two column bytes), 13 by a signed varint, 14 by a signed varint followed by
    three varints (end line, columns), 15 the range has no line at all.
    """
    line = firstlineno
    start = position = 0
    while position < len(table):
        head = table[position]
        if not head & 0x80:
            return
        form = head >> 3 & 15
        end = start + ((head & 7) + 1) * 2
        position += 1
        current: int | None = line
        if form == 15:
            current = None
        elif form in (13, 14):
            change, position = _signed_varint(table, position)
            line += change
            current = line
            if form == 14:
                for _ in range(3):
                    _, position = _varint(table, position)
        elif form >= 10:
            line += form - 10
            current = line
            position += 2
        else:
            position += 1
        yield start, end, current
        start = end


def _varint(table: bytes, position: int) -> tuple[int, int]:
    """A location-table varint: 6 bits per byte, least significant first, 0x40 = more follow."""
    value = 0
    for shift in range(0, 6 * MAX_VARINT_BYTES, 6):
        if position >= len(table):
            return value, position
        byte = table[position]
        position += 1
        value |= (byte & 63) << shift
        if not byte & 64:
            return value, position
    raise PythonStackError(f"location-table varint longer than {MAX_VARINT_BYTES} bytes")


def _big_varint(table: bytes, position: int) -> tuple[int, int]:
    """An exception-table varint: 6 bits per byte, most significant first, 0x40 = more follow."""
    value = 0
    for _ in range(MAX_VARINT_BYTES):
        if position >= len(table):
            raise PythonStackError("exception table ends inside an entry")
        byte = table[position]
        position += 1
        value = value << 6 | byte & 63
        if not byte & 64:
            return value, position
    raise PythonStackError(f"exception-table varint longer than {MAX_VARINT_BYTES} bytes")


def _signed_varint(table: bytes, position: int) -> tuple[int, int]:
    value, position = _varint(table, position)
    return (-(value >> 1) if value & 1 else value >> 1), position
