"""Python stacks read from real cores of CPython 3.10-3.14, checked against faulthandler.

Each test run crashes a small script (a background thread, and a main thread three
functions deep in `ctypes.string_at(0)`) under every interpreter it finds, with
`-X faulthandler`: what faulthandler printed on stderr at the crash is the ground truth
for the frames read back from the core. The line-table decoders are checked against the
interpreter's own `co_lines()` / `co_positions()` over its standard library.

Interpreters are found by the environment variable PYTHON3<minor> (PYTHON314=/path/python3.14),
else under pyenv, else as python3.<minor> on PATH. With no pyenv 3.14, `tools/python314.sh DIR`
makes one from Debian sid's packages (.ci/run does, and sets PYTHON314).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from postmortem.core import elf, notes
from postmortem.core.analysis import process_memory, read_core
from postmortem.core.modules import Files
from postmortem.core.python_stack import (
    DEBUG_COOKIE,
    MAX_FRAMES,
    MAX_THREADS,
    MAX_TOTAL_FRAMES,
    PythonFrame,
    PythonStackError,
    PythonThread,
    _Memory,
    _ranges_310,
    _ranges_311,
    _Walker,
    python_stacks,
    spread,
)
from postmortem.core.report import Frame
from postmortem.core.symbols import find_symbol_address
from postmortem.pipeline import analyze
from postmortem.render import text_report

PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
VERSIONS = [(3, 10), (3, 11), (3, 12), (3, 13), (3, 14)]

CRASH_SCRIPT = Path(__file__).parent / "data" / "core" / "src" / "pycrash.py"

# Run by the interpreter under test: for code objects of its stdlib, the line of every
# bytecode unit as the interpreter itself reports it.
LINES_DUMP = """\
import json, sys, sysconfig, types
from pathlib import Path

def codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from codes(const)

out = []
for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
    try:
        top = compile(path.read_bytes(), str(path), "exec")
    except (SyntaxError, ValueError, OSError):  # OSError: a dangling link (Debian's sitecustomize.py)
        continue
    for code in codes(top):
        units = len(code.co_code) // 2
        by_lines = [None] * units
        for start, end, line in code.co_lines():
            for unit in range(start // 2, end // 2):
                by_lines[unit] = line
        by_positions = [p[0] for p in code.co_positions()] if hasattr(code, "co_positions") else None
        out.append([code.co_linetable.hex(), code.co_firstlineno, by_lines, by_positions])
json.dump(out, sys.stdout)
"""

FRAME_LINE = re.compile(r'^  File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<function>.*)$')


def interpreter(version: tuple[int, int]) -> Path:
    """CPython `version`: $PYTHON3<minor>, else the newest under pyenv, else python3.<minor> on PATH."""
    name = f"python{version[0]}.{version[1]}"
    given = os.environ.get(f"PYTHON{version[0]}{version[1]}")
    found = [Path(given)] if given else sorted(PYENV.glob(f"{version[0]}.{version[1]}.*/bin/{name}"))
    on_path = shutil.which(name)
    if not found and on_path:
        found = [Path(on_path)]
    if not found:
        pytest.skip(f"no CPython {version[0]}.{version[1]} (set PYTHON{version[0]}{version[1]}, pyenv install it "
                    f"or put {name} on PATH to run this test)")
    return found[-1]


# --- the core through postmortem's own reader ----------------------------------------------------

def _file_reader(path: str) -> Callable[[int, int], bytes]:
    handle = open(path, "rb")  # noqa: SIM115 - lives as long as the test's core

    def read(offset: int, length: int) -> bytes:
        handle.seek(offset)
        return handle.read(length)
    return read


@dataclass
class Core:
    """A crash core: what the core reader made of it, and the memory and symbols python_stacks gets."""

    path: Path
    stderr: str
    read: Callable[[int, int], bytes | None]
    find_symbol: Callable[[str], int | None]
    tids: list[int]


def load_core(path: Path, stderr: str) -> Core:
    """Memory and python/libpython symbols from the core reader's modules, as its Python hook has them."""
    read_core = _file_reader(str(path))
    segments = elf.segments(read_core, elf.header(read_core))
    found = [n for s in segments if s.type == elf.PT_NOTE for n in elf.notes(read_core(s.offset, s.filesz))]
    tids = [status.tid for n in found if n.type == notes.NT_PRSTATUS and (status := notes.thread_status(n.desc, None))]
    mappings = next(notes.file_mappings(n.desc) for n in found if n.type == notes.NT_FILE)
    memory, modules = process_memory(read_core, segments, mappings, Files(None, None, ()), [])
    interpreter = [m for m in modules if re.match(r"(lib)?python3", Path(m.path).name)]

    def find_symbol(name: str) -> int | None:
        for module in interpreter:
            address = find_symbol_address(module.file.read, module.file.sections, name) if module.file else None
            if address is not None:
                return address + module.bias
        return None
    return Core(path, stderr, memory.read, find_symbol, tids)


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"{v[0]}.{v[1]}")
def crash(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple[int, int], Core]:
    """A real core of the crash script under one CPython version, with faulthandler's report."""
    return request.param, crashed_core(request.param, CRASH_SCRIPT, tmp_path_factory)


def crashed_core(version: tuple[int, int], script: Path, tmp_path_factory: pytest.TempPathFactory) -> Core:
    """The core `script` leaves when run by CPython `version` with faulthandler on."""
    python = interpreter(version)
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern.startswith("|"):
        pytest.skip(f"kernel core_pattern pipes cores to a program ({pattern}), no core file is written")
    directory = tmp_path_factory.mktemp(f"py{version[0]}{version[1]}")
    (directory / "crash.py").write_text(script.read_text())
    done = subprocess.run(
        [str(python), "-X", "faulthandler", str(directory / "crash.py")], cwd=directory, capture_output=True,
        text=True, timeout=60, check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)))
    cores = sorted(directory.glob("core*"))
    if not cores:
        pytest.skip(f"the crash left no core in {directory} (exit {done.returncode}, core_pattern {pattern!r})")
    return load_core(cores[0], done.stderr)


def faulthandler_threads(stderr: str) -> tuple[tuple[PythonFrame, ...], list[tuple[PythonFrame, ...]]]:
    """The crashing thread's frames and the other threads' frames, as faulthandler printed them."""
    current: tuple[PythonFrame, ...] = ()
    others: list[tuple[PythonFrame, ...]] = []
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", stderr)[1:]:
        frames = tuple(PythonFrame(m["file"], m["function"], None if m["line"] == "???" else int(m["line"]))
                       for m in map(FRAME_LINE.match, block.splitlines()) if m)
        if block.startswith("Current thread"):
            current = frames
        else:
            others.append(frames)
    return current, others


# --- tests --------------------------------------------------------------------------------------

def test_stacks_equal_faulthandler_output(crash: tuple[tuple[int, int], Core]) -> None:
    version, core = crash
    current, others = faulthandler_threads(core.stderr)
    assert [f.function for f in current][-4:] == ["level3", "level2", "level1", "<module>"], core.stderr
    threads = python_stacks(core.read, core.find_symbol, version)
    by_tid = {thread.thread_id: thread for thread in threads}
    assert sorted(by_tid) == sorted(core.tids)
    assert all(thread.error is None for thread in threads)
    crashed = core.tids[0]  # the kernel writes the crashing thread's NT_PRSTATUS first
    assert by_tid[crashed].frames == current
    assert [by_tid[tid].frames for tid in core.tids[1:]] == others
    only_runtime = python_stacks(core.read, lambda name: core.find_symbol(name) if name == "_PyRuntime" else None,
                                 version)
    assert only_runtime == threads, "types must also be recognised by tp_name, as in a stripped build"


def test_core_reader_shows_the_same_python_stacks(crash: tuple[tuple[int, int], Core]) -> None:
    version, core = crash
    current, others = faulthandler_threads(core.stderr)
    done = read_core(_file_reader(str(core.path)), core.path.stat().st_size, str(core.path))
    assert done.core is not None and done.core.python_version == f"{version[0]}.{version[1]}"
    assert not [line for line in done.diagnostics if "Python" in line]
    assert [t.python_frames for t in done.core.threads] == [current, *others]


def test_reading_stacks_is_fast(crash: tuple[tuple[int, int], Core]) -> None:
    version, core = crash
    python_stacks(core.read, core.find_symbol, version)  # warm the page cache
    best = min(_timed(lambda: python_stacks(core.read, core.find_symbol, version)) for _ in range(5))
    assert best < 0.05


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: f"{v[0]}.{v[1]}")
def test_line_tables_match_the_interpreter(version: tuple[int, int]) -> None:
    python = interpreter(version)
    dumped = subprocess.run([str(python), "-c", LINES_DUMP], capture_output=True, text=True, timeout=300, check=True)
    decode = _ranges_310 if version == (3, 10) else _ranges_311
    checked = 0
    for table, firstlineno, by_lines, by_positions in json.loads(dumped.stdout):
        decoded: list[int | None] = [None] * len(by_lines)
        for start, end, line in decode(bytes.fromhex(table), firstlineno):
            decoded[start // 2:end // 2] = [line] * (end // 2 - start // 2)
        assert decoded[:len(by_lines)] == by_lines
        if by_positions is not None:
            assert decoded[:len(by_positions)] == by_positions
        checked += len(by_lines)
    assert checked > 100_000


class FakeProcess:
    """A hand-built memory image with 3.11's offsets: runtime, interpreter, thread, frames, code."""

    BASE = 0x7F0000000000
    SYMBOLS: ClassVar[dict[str, int]] = {"_PyRuntime": BASE + 0x100, "PyCode_Type": BASE + 0x200,
                                         "PyUnicode_Type": BASE + 0x300,
               "PyBytes_Type": BASE + 0x400}

    def __init__(self) -> None:
        self.image = bytearray(0x10000)
        self.free = 0x1000

    def read(self, address: int, size: int) -> bytes | None:
        start = address - self.BASE
        return bytes(self.image[start:start + size]) or None if 0 <= start < len(self.image) else None

    def put(self, address: int, data: bytes) -> None:
        self.image[address - self.BASE:address - self.BASE + len(data)] = data

    def word(self, address: int, value: int) -> None:
        self.put(address, value.to_bytes(8, "little"))

    def new(self, kind: str, size: int) -> int:
        """Room for an object of `size` bytes whose type is `kind` (a key of SYMBOLS, or "")."""
        address = self.BASE + self.free
        self.free += (size + 15) // 16 * 16
        if kind:
            self.word(address + 8, self.SYMBOLS[kind])
        return address

    def string(self, text: str) -> int:
        widest = max(map(ord, text))
        width = 4 if widest > 0xFFFF else 2 if widest > 0xFF else 1
        ascii_only = text.isascii()
        data = text.encode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[width])
        obj = self.new("PyUnicode_Type", 72 + len(data))
        self.word(obj + 16, len(text))
        self.put(obj + 32, (width << 2 | 1 << 5 | ascii_only << 6).to_bytes(4, "little"))
        self.put(obj + (48 if ascii_only else 72), data)
        return obj

    def code(self, file: str, name: str, firstlineno: int, linetable: bytes, units: int) -> int:
        table = self.new("PyBytes_Type", 32 + len(linetable))
        self.word(table + 16, len(linetable))
        self.put(table + 32, linetable)
        code = self.new("PyCode_Type", 184 + 2 * units)
        self.word(code + 16, units)
        self.word(code + 112, self.string(file))
        self.word(code + 120, self.string(name))
        self.word(code + 136, table)
        self.put(code + 72, firstlineno.to_bytes(4, "little"))
        return code

    def frame(self, code: int, unit: int) -> int:
        frame = self.new("", 72)
        self.word(frame + 32, code)
        self.word(frame + 56, code + 184 + 2 * unit)
        return frame

    def thread(self, tid: int, innermost: int) -> None:
        runtime, interp = self.SYMBOLS["_PyRuntime"], self.new("", 32)
        tstate, cframe = self.new("", 168), self.new("", 16)
        self.word(runtime + 40, interp)
        self.word(interp + 16, tstate)
        self.word(tstate + 56, cframe)
        self.word(tstate + 160, tid)
        self.word(cframe + 8, innermost)


def test_synthetic_stack_with_wide_strings_and_a_cycle() -> None:
    fake = FakeProcess()
    # 4 units on line 10+5 (form 13: signed varint 5 -> 10), then 2 units with no line (form 15)
    table = bytes([0x80 | 13 << 3 | 3, 10, 0x80 | 15 << 3 | 1])
    inner = fake.frame(fake.code("/srv/проект/train.py", "step_\U0001F680", 10, table, 6), 2)
    outer = fake.frame(fake.code("/srv/café.py", "main", 40, table, 6), 5)
    fake.word(inner + 48, outer)
    fake.word(outer + 48, inner)
    fake.thread(4242, inner)
    [thread] = python_stacks(fake.read, FakeProcess.SYMBOLS.get, (3, 11))
    assert thread.thread_id == 4242
    assert thread.frames == (PythonFrame("/srv/проект/train.py", "step_\U0001F680", 15),
                             PythonFrame("/srv/café.py", "main", None))
    assert thread.error and "looping" in thread.error


def test_threads_sharing_one_long_chain_share_one_frame_budget() -> None:
    """4,096 thread states whose frames are all one 20,000-frame chain (80 million frames to walk):
    the walk stops at MAX_TOTAL_FRAMES in all, the threads read first keep their whole stack."""
    fake = FakeProcess()
    fake.image = bytearray(8 << 20)
    code = fake.code("/srv/train.py", "step", 10, bytes([0x80 | 13 << 3 | 3, 10]), 4)
    previous = 0
    for _ in range(MAX_FRAMES - 1):
        frame = fake.frame(code, 1)
        fake.word(frame + 48, previous)
        previous = frame
    runtime, interp = FakeProcess.SYMBOLS["_PyRuntime"], fake.new("", 32)
    fake.word(runtime + 40, interp)
    link = interp + 16
    for tid in range(1, MAX_THREADS + 1):
        tstate, cframe = fake.new("", 168), fake.new("", 16)
        fake.word(link, tstate)
        fake.word(tstate + 56, cframe)
        fake.word(tstate + 160, tid)
        fake.word(cframe + 8, previous)
        link = tstate + 8
    started = time.perf_counter()
    threads = python_stacks(fake.read, FakeProcess.SYMBOLS.get, (3, 11))
    assert time.perf_counter() - started < 30
    assert len(threads) == MAX_THREADS and sum(len(t.frames) for t in threads) == MAX_TOTAL_FRAMES
    assert threads[0].frames == (PythonFrame("/srv/train.py", "step", 15),) * (MAX_FRAMES - 1)
    assert threads[0].error is None
    assert all("Python frames already read from this core" in t.error for t in threads[MAX_TOTAL_FRAMES // MAX_FRAMES:])


def test_a_location_table_varint_without_end_is_an_error_not_a_huge_number() -> None:
    table = bytes([0x80 | 13 << 3 | 3]) + b"\x7f" * 200_000  # form 13: a signed varint that never ends
    with pytest.raises(PythonStackError, match="varint longer than"):
        list(_ranges_311(table, 1))


def test_missing_memory_and_symbols_raise_the_documented_error() -> None:
    with pytest.raises(PythonStackError, match="_PyRuntime"):
        python_stacks(lambda a, n: None, lambda name: None, (3, 11))
    with pytest.raises(PythonStackError, match="not in the core"):
        python_stacks(lambda a, n: None, lambda name: 0x7F0000001000, (3, 11))
    with pytest.raises(PythonStackError, match="cookie"):
        python_stacks(lambda a, n: bytes(n), lambda name: 0x7F0000001000, (3, 13))
    for version in ((3, 9), (3, 15)):
        with pytest.raises(PythonStackError, match="not supported"):
            python_stacks(lambda a, n: bytes(n), lambda name: 0x7F0000001000, version)


@pytest.mark.parametrize("seed", range(40))
def test_junk_memory_gives_the_error_or_a_partial_result(seed: int) -> None:
    rng = random.Random(seed)
    version = VERSIONS[seed % len(VERSIONS)]
    pointers = [0x7F0000001000 + 8 * rng.randrange(64) for _ in range(4)]

    def junk(address: int, size: int) -> bytes | None:
        """Random bytes, often shaped like pointers into the same small region."""
        choice = rng.random()
        if choice < 0.1:
            return None
        if choice < 0.5:
            return b"".join(rng.choice(pointers).to_bytes(8, "little") for _ in range(size // 8 + 1))[:size]
        if version >= (3, 13) and choice < 0.6:
            return (b"xdebugpy" + rng.randbytes(size))[:size]
        return rng.randbytes(rng.randrange(size + 1))
    _expect_error_or_threads(junk, lambda name: rng.choice([None, *pointers]), version)


def test_damaged_real_core_gives_the_error_or_a_partial_result(crash: tuple[tuple[int, int], Core]) -> None:
    version, core = crash
    rng = random.Random(version[1])
    for _ in range(60):
        def damaged(address: int, size: int, damage: float = rng.random()) -> bytes | None:
            data = core.read(address, size)
            if data is None or rng.random() > damage / 4:
                return data
            if rng.random() < 0.5:
                return data[:rng.randrange(len(data) + 1)] or None
            mutable = bytearray(data)
            mutable[rng.randrange(len(mutable))] = rng.randrange(256)
            return bytes(mutable)
        _expect_error_or_threads(damaged, core.find_symbol, version)


def _expect_error_or_threads(read: Callable[[int, int], bytes | None], find_symbol: Callable[[str], int | None],
                             version: tuple[int, int]) -> None:
    try:
        threads = python_stacks(read, find_symbol, version)
    except PythonStackError as error:
        assert str(error)
        return
    assert all(isinstance(thread, PythonThread) for thread in threads)
    assert all(isinstance(frame.file, str) for thread in threads for frame in thread.frames)


# --- native and Python frames merged, checked against pystack --native --------------------------

CALLBACK_SCRIPT = Path(__file__).parent / "data" / "core" / "src" / "pycallback.py"
PYSTACK = shutil.which("pystack", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
PYSTACK_C = re.compile(r'^\s+\(C\) File ".*", line \d+, in (?P<function>\S+)(?: \(inlined\))? \((?P<module>.*)\)$')
PYSTACK_PY = re.compile(r'^\s+\(Python\) File "(?P<file>.*)", line (?P<line>\d+), in (?P<function>.*)$')
INTERPRETER = re.compile(r"(lib)?python3")

Run = tuple["str | None", tuple[PythonFrame, ...]]
"""A run of Python frames, outermost first, with the last native function outside the interpreter that
ran before it since the previous run (None for the first run: what starts the interpreter is not compared)."""


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"{v[0]}.{v[1]}")
def callback_crash(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                   ) -> tuple[tuple[int, int], Core]:
    """A real core of Python called back from C (qsort) that crashes: two eval-loop calls on one stack."""
    return request.param, crashed_core(request.param, CALLBACK_SCRIPT, tmp_path_factory)


def pystack_runs(output: str) -> list[Run]:
    """`pystack core --native`'s crashing stack as runs of Python frames, outermost first."""
    runs: list[Run] = []
    caller: str | None = None
    in_run = False
    for line in output.splitlines():
        if native := PYSTACK_C.match(line):
            function = None if native["function"] == "???" else native["function"]  # no symbol, as ours: None
            caller = caller if INTERPRETER.match(native["module"]) else function
            in_run = False
        elif python := PYSTACK_PY.match(line):
            frame = PythonFrame(python["file"], python["function"], int(python["line"]))
            runs[-1:] = [(runs[-1][0], (*runs[-1][1], frame))] if in_run else [*runs[-1:], (caller if runs else None,
                                                                                             (frame,))]
            caller, in_run = None, True
    return runs


def merged_runs(frames: tuple[Frame, ...]) -> list[Run]:
    """The same runs from postmortem's native frames and the Python frames each eval-loop frame carries.

    Eval-loop frames with only interpreter frames between them are one run, as pystack shows them
    (3.10 has an eval-loop frame per Python frame)."""
    runs: list[Run] = []
    caller: str | None = None
    in_run = False
    for frame in reversed(frames):
        if frame.python_frames:
            run = tuple(reversed(frame.python_frames))
            runs[-1:] = [(runs[-1][0], runs[-1][1] + run)] if in_run else [*runs[-1:], (caller if runs else None, run)]
            caller, in_run = None, True
        elif not INTERPRETER.match(Path(frame.module or "?").name):
            caller = frame.inlined[0].function if frame.inlined else frame.symbol
            in_run = False
    return runs


@pytest.mark.skipif(PYSTACK is None, reason="pystack not installed (pip install pystack): no merged stack to compare")
def test_eval_loop_frames_carry_the_python_frames_pystack_shows(callback_crash: tuple[tuple[int, int], Core]) -> None:
    version, core = callback_crash
    done = read_core(_file_reader(str(core.path)), core.path.stat().st_size, str(core.path))
    assert done.core is not None
    crashed = done.core.threads[0]
    assert crashed.python_frames is not None
    loops = [frame for frame in crashed.frames if frame.python_frames]
    expected_calls = [1] * 5 if version == (3, 10) else [3, 2]  # string_at, inner, compare | outer, <module>
    assert [len(frame.python_frames) for frame in loops] == expected_calls
    assert sum((frame.python_frames for frame in loops), ()) == crashed.python_frames
    assert crashed.python_merge and "each eval-loop frame runs the call at its depth" in crashed.python_merge
    oracle = subprocess.run([str(PYSTACK), "core", "--native", "--no-color", str(core.path), str(interpreter(version))],
                            capture_output=True, text=True, timeout=300, check=True).stdout
    theirs = pystack_runs(oracle)
    assert [[f.function for f in run] for _, run in theirs] == [["<module>", "outer"],
                                                                ["compare", "inner", "string_at"]]
    assert merged_runs(crashed.frames) == theirs


def test_text_report_lists_python_frames_under_their_eval_loop_frame(callback_crash: tuple[tuple[int, int], Core]
                                                                    ) -> None:
    version, core = callback_crash
    text = text_report.render(analyze([str(core.path)]))
    under = [line.split(" in ")[-1] for line in text.splitlines() if line.startswith(text_report.PYTHON_UNDER_NATIVE)]
    innermost = ["string_at", "inner", "compare"]
    # 3.10's eval-loop frames alternate with _PyEval_Vector and fold as recursion; in 3.11+ the outer
    # eval-loop frame is past the frames shown: then the whole Python stack follows the note.
    assert under == ([] if version == (3, 10) else innermost)
    assert "eval-loop frames" not in text  # a certain pairing goes unsaid in the text (the JSON keeps the note)
    full = text[text.index("Python stack (innermost first):"):]
    assert [line.split(" in ")[-1] for line in full.splitlines()[1:6]] == [*innermost, "outer", "<module>"]


def test_entry_frames_of_3_11_split_the_chain_into_calls() -> None:
    fake = FakeProcess()
    table = bytes([0x80 | 13 << 3 | 3, 10])
    code = fake.code("/srv/train.py", "step", 10, table, 4)
    frames = [fake.frame(code, 1) for _ in range(4)]
    for inner, outer in itertools.pairwise(frames):
        fake.word(inner + 48, outer)
    fake.put(frames[1] + 68, b"\x01")  # is_entry: the innermost call runs frames 0 and 1
    fake.put(frames[3] + 68, b"\x01")
    fake.thread(7, frames[0])
    [thread] = python_stacks(fake.read, FakeProcess.SYMBOLS.get, (3, 11))
    assert thread.calls == (2, 2)
    assert spread(thread, 2, (3, 11)) == ([(0, 2), (2, 4)], (
        "2 eval-loop frames, 2 Python calls (3.11 marks each call's outermost frame is_entry): "
        "each eval-loop frame runs the call at its depth"))
    slices, how = spread(thread, 1, (3, 11))
    assert slices == [(0, 2)] and "a guess; 2 Python frames are on no eval-loop frame" in how
    slices, how = spread(thread, 3, (3, 11))
    assert slices == [(0, 2), (2, 4), (4, 4)] and "3 eval-loop frames but 2 Python calls" in how


# --- every thread's Python frames, checked against plain `pystack core` --------------------------

PYSTACK_THREAD = re.compile(r"^Traceback for thread (?P<tid>\d+)")


def pystack_threads(output: str) -> dict[int, tuple[PythonFrame, ...]]:
    """`pystack core`'s Python frames of each thread, innermost first as python_stacks gives them."""
    threads: dict[int, list[PythonFrame]] = {}
    frames: list[PythonFrame] = []
    for line in output.splitlines():
        if thread := PYSTACK_THREAD.match(line):
            frames = threads.setdefault(int(thread["tid"]), [])
        elif python := PYSTACK_PY.match(line):
            frames.insert(0, PythonFrame(python["file"], python["function"], int(python["line"])))
    return {tid: tuple(frames) for tid, frames in threads.items()}


@pytest.mark.skipif(PYSTACK is None, reason="pystack not installed (pip install pystack): no stacks to compare")
def test_every_thread_equals_pystack(crash: tuple[tuple[int, int], Core]) -> None:
    version, core = crash
    oracle = subprocess.run([str(PYSTACK), "core", "--no-color", str(core.path), str(interpreter(version))],
                            capture_output=True, text=True, timeout=300, check=True).stdout
    theirs = pystack_threads(oracle)
    assert sorted(theirs) == sorted(core.tids) and all(theirs.values()), oracle
    ours = {thread.thread_id: thread.frames for thread in python_stacks(core.read, core.find_symbol, version)}
    assert ours == theirs


def test_3_14_code_references_carry_stackref_tags(crash: tuple[tuple[int, int], Core]) -> None:
    """A 3.14 frame's f_executable is a _PyStackRef: a deferred reference has its low bit set."""
    version, core = crash
    if version < (3, 14):
        pytest.skip("frames hold their code as a tagged _PyStackRef from 3.14 on")
    memory = _Memory(core.read)
    walker = _Walker(memory, core.find_symbol, version)
    layout = walker.layout
    interp = memory.u64(walker.runtime + layout.runtime_interp_head, "interpreter")
    frame = memory.u64(memory.u64(interp + layout.interp_threads_head, "tstate") + layout.tstate_frame, "frame")
    frames: set[int] = set()
    while frame and len(frames) < MAX_FRAMES:
        frames.add(frame)
        frame = memory.u64(frame + layout.frame_previous, "previous")

    def tagged(address: int, size: int) -> bytes | None:
        data = core.read(address, size)
        if data is None or address not in frames or len(data) < 8:
            return data
        return (int.from_bytes(data[:8], "little") | 1).to_bytes(8, "little") + data[8:]
    assert len(frames) > 2
    assert python_stacks(tagged, core.find_symbol, version) == python_stacks(core.read, core.find_symbol, version)


def test_free_threaded_3_14_is_refused_not_misread() -> None:
    runtime = 0x7F0000001000
    offsets = DEBUG_COOKIE + (0x030E00F0).to_bytes(8, "little") + (1).to_bytes(8, "little")

    def read(address: int, size: int) -> bytes | None:
        return (offsets + bytes(size))[:size] if address == runtime else None
    with pytest.raises(PythonStackError, match=r"free-threaded 3\.14 builds are not supported"):
        python_stacks(read, lambda name: runtime if name == "_PyRuntime" else None, (3, 14))
