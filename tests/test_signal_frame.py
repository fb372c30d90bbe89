"""The real fault under a crash handler (issue 14): cores crashed at test time, compared with gdb.

Each program catches a NULL access with a handler that re-raises it or aborts, so the core's own
signal is the handler's. gdb's oracle (tests/data/core/gdb_sigframe.py) gives the handler frame,
the siginfo the kernel passed it (its `info` argument), the registers gdb unwinds under
`<signal handler called>` and the physical frames from there: postmortem's `original_fault` must
say the same, and the verdict and the fleet's stack signature must be about that fault.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from gdb_oracle import GDB, SCRIPT, loading, parse_frames, run_gdb
from postmortem.core import notes, signal_frame
from postmortem.core.analysis import _RawFrame
from postmortem.core.arch import AARCH64, X86_64
from postmortem.debugging import short_name
from postmortem.pipeline import analyze
from postmortem.render import render
from test_core import DATA, PYTHON, SRC, _allow_cores, core_of, glibc_spelling

GDB_SIGFRAME = DATA / "gdb_sigframe.py"
BUILD = ("gcc -g -O0 -fno-omit-frame-pointer -shared -fPIC -o libcrash.so {src}/libcrash.c && "
         "gcc -g -O0 -o reraise {src}/reraise.c -L. -lcrash -Wl,-rpath,'$ORIGIN' && "
         "gcc -g -O0 -o sighandler {src}/sighandler.c -L. -lcrash -Wl,-rpath,'$ORIGIN'")
CASES = {
    # name: (program, arguments, the handler as postmortem names it)
    "reraise": ("reraise", (), "reraise!on_segv"),
    "altstack": ("reraise", ("altstack",), "reraise!on_segv"),
    "abort": ("sighandler", (), "sighandler!on_segv"),
    "faulthandler": (str(PYTHON), ("-X", "faulthandler", str(SRC / "pycrash.py")), "faulthandler"),
}
REGISTERS = "rip rsp rbp rax rbx rcx rdx rsi rdi r8 r9 r10 r11 r12 r13 r14 r15".split()


@pytest.fixture(scope="module")
def cores(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """(executable, core) of every case, each crashed in its own directory."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed: the test programs cannot be built")
    root = tmp_path_factory.mktemp("reraised")
    programs = root / "programs"
    programs.mkdir()
    subprocess.run(BUILD.format(src=SRC), shell=True, cwd=programs, check=True, capture_output=True)
    found = {}
    for name, (program, args, _handler) in CASES.items():
        directory = root / name
        directory.mkdir()
        executable = programs / program if "/" not in program else Path(program)
        subprocess.run([str(executable), *args], cwd=directory, preexec_fn=_allow_cores, capture_output=True,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, check=False, timeout=60)
        if not (directory / "core").exists():
            pytest.skip("no core file was written (core_pattern pipes cores elsewhere)")
        found[name] = (executable, directory / "core")
    return found


def gdb_fault(executable: Path, core: Path) -> dict:
    """gdb's handler, siginfo, registers and frames under the crashed thread's signal frame."""
    out = run_gdb([*loading(executable, core), f"source {GDB_SIGFRAME}", f"source {SCRIPT}"])
    fault: dict = {"registers": {}, "frames": []}
    crashed = None
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word == "CRASHED":
            crashed = int(rest)
        elif word == "HANDLER":
            fault["handler"] = rest
        elif word == "DELIVERED":
            fault["delivered"] = tuple(int(value) for value in rest.split())
        elif word == "SIGINFO":
            signo, code, address = rest.split()
            fault["siginfo"] = (int(signo), int(code), address)
        elif word == "REG":
            name, value = rest.split()
            fault["registers"][name] = value
    frames = parse_frames(out).get(crashed, []) if crashed is not None else []
    kinds = [frame.kind for frame in frames]
    if "sigtramp" in kinds:
        fault["frames"] = [(f.pc, None if f.name is None else glibc_spelling(short_name(f.name)))
                           for f in frames[kinds.index("sigtramp") + 1:] if f.kind == "normal"]
    return fault


def ours(frames: list[dict]) -> list[tuple[int, str | None]]:
    """(pc, function) per frame, cut after main as gdb stops there."""
    found = [(int(f["pc"], 16), glibc_spelling(short_name(f["symbol"])) if f["symbol"] else None) for f in frames]
    names = [name for _pc, name in found]
    return found[: names.index("main") + 1] if "main" in names else found


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference to compare with")
@pytest.mark.parametrize("name", list(CASES))
def test_original_fault_equals_gdb(cores, name):
    executable, core = cores[name]
    theirs = gdb_fault(executable, core)
    read = core_of(core)
    fault = read["original_fault"]
    assert theirs["frames"], "gdb found no signal frame"
    assert fault is not None
    assert ours(fault["frames"]) == theirs["frames"]
    assert {k: v for k, v in fault["registers"].items() if k in REGISTERS} == theirs["registers"]
    signal = fault["signal"]
    assert (signal["name"], signal["code"], signal["address"]) == ("SIGSEGV", 1, "0x0")
    if "siginfo" in theirs:  # an SA_SIGINFO handler: gdb reads the kernel's siginfo through its argument
        assert (signal["number"], signal["code"], signal["address"]) == theirs["siginfo"]
    assert fault["handler"] == CASES[name][2]
    assert short_name(fault["handler_frame"]["symbol"]) == short_name(theirs["handler"])
    delivered = read["signal"]
    assert (delivered["number"], delivered["code"]) == theirs["delivered"] == ((6 if name == "abort" else 11), -6)


@pytest.mark.parametrize("name", list(CASES))
def test_the_verdict_and_stack_signature_are_about_the_fault(cores, name):
    from postmortem.fleet.stack import report_signature

    report = analyze([str(cores[name][1])])
    event = next(e for e in report.events if e.kind == "core-signal")
    assert (event.fields["signal"], event.fields["address"]) == ("SIGSEGV", "0x0")
    assert event.fields["reraised_by"] == CASES[name][2]
    assert event.text.endswith(f"{CASES[name][2]} re-raised it as {report.cores[0].signal.name}")
    if name == "faulthandler":
        assert event.fields["crash_symbol"] == "string_at"
        assert report_signature(report.cores, report.events).startswith("_ctypes")
    else:
        assert report.verdict.signature == "core-native-crash"
        assert event.fields["crash_symbol"] == "lib_c"
        assert report_signature(report.cores, report.events) == \
            "libcrash.so!lib_c | libcrash.so!lib_b | libcrash.so!lib_a"
    for form in ("text", "markdown", "html"):
        assert f"{CASES[name][2]} re-raised it" in render(form, report).replace("\\_", "_")


def test_a_core_without_a_handler_has_no_original_fault():
    report = analyze([str(DATA / "null-write.core.zst")])
    assert report.cores[0].original_fault is None
    assert "reraised_by" not in next(e for e in report.events if e.kind == "core-signal").fields


class _Stack:
    """Memory that is one block of stack bytes at `base`."""

    def __init__(self, base: int, data: bytes):
        self.base, self.data = base, data

    def read(self, addr: int, length: int) -> bytes | None:
        at = addr - self.base
        return self.data[at:at + length] or None if 0 <= at < len(self.data) else None


TRAMPOLINE, FAULT_PC, BASE = 0x7F0000001000, 0x7F0000002000, 0x7FFF00000000


def _x86_64_context(rip: int, siginfo: bytes, trapno: int = 0, err: int = 0, cr2: int = 0) -> bytes:
    """The bytes at __restore_rt's stack pointer: struct ucontext, then the siginfo."""
    registers = [0] * 16 + [rip, 0x202]
    # uc_flags, uc_link, uc_stack; sigcontext: 18 registers, csgsfs err trapno oldmask cr2, fpstate and
    # reserved1[8]; uc_sigmask
    context = struct.pack("<40x18Q5Q72x8x", *registers, 0x33, err, trapno, 0, cr2)
    assert len(context) == X86_64.sigframe_info
    return context + siginfo.ljust(signal_frame.SIGINFO_SIZE, b"\0")


def _aarch64_context(pc: int, siginfo: bytes, fault_address: int) -> bytes:
    """The bytes at the trampoline's stack pointer: siginfo, struct ucontext (its sigcontext at 176)."""
    sigcontext = struct.pack("<Q31QQQQ", fault_address, *range(100, 131), BASE + 0x1000, pc, 0x60000000)
    return siginfo.ljust(signal_frame.SIGINFO_SIZE, b"\0") + bytes(176) + sigcontext + bytes(512)


SEGV_MAPERR_AT_0X10 = struct.pack("<iii4xQ", 11, 0, 1, 0x10)


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda arch: arch.name)
def test_the_frame_must_resume_where_the_unwinder_went(arch):
    """The kernel's frame at the trampoline's stack pointer is the fault's only when its saved pc is
    where the unwinder went on from the trampoline."""
    make = (lambda pc: _x86_64_context(pc, SEGV_MAPERR_AT_0X10)) if arch is X86_64 else \
        (lambda pc: _aarch64_context(pc, SEGV_MAPERR_AT_0X10, 0x10))
    frames = [_RawFrame(1, "registers", 1), _RawFrame(TRAMPOLINE, "cfi", TRAMPOLINE, True, BASE),
              _RawFrame(FAULT_PC, "sigcontext", FAULT_PC, False, BASE + 0x1000)]
    assert signal_frame.find_frame(frames, _Stack(BASE, make(0x1234)), arch, 6) is None
    address, info, registers = signal_frame.find_frame(frames, _Stack(BASE, make(FAULT_PC)), arch, 6)
    assert address == BASE + arch.sigframe_start and registers[arch.pc] == FAULT_PC
    assert (info.number, info.code, info.address) == (11, 1, 0x10)


def test_aarch64_registers_come_from_the_sigcontext_after_fault_address():
    _info, registers = signal_frame.decode(_aarch64_context(FAULT_PC, SEGV_MAPERR_AT_0X10, 0), AARCH64, 11)
    assert [registers[f"x{i}"] for i in range(31)] == list(range(100, 131))
    assert (registers["sp"], registers["pc"]) == (BASE + 0x1000, FAULT_PC)


@pytest.mark.parametrize(("reraised", "told"), [(11, (11, notes.CODE_UNKNOWN, 0x20)), (6, None)])
def test_without_sa_siginfo_aarch64_tells_the_fault_address(reraised, told):
    """No siginfo was written (stale bytes there): the sigcontext's fault_address, under the signal the
    handler re-raised when that is a fault's; a re-raised SIGABRT says nothing of a fault."""
    decoded = signal_frame.decode(_aarch64_context(FAULT_PC, b"\xe0\x89\xd2\xcd" * 8, 0x20), AARCH64, reraised)
    assert (decoded and (decoded[0].number, decoded[0].code, decoded[0].address)) == told


@pytest.mark.parametrize(("trapno", "err", "cr2", "told"), [
    (14, 6, 0x10, (11, 1, 0x10)), (14, 7, 0x10, (11, 2, 0x10)), (13, 0, 0, (11, 0x80, None)),
    (6, 0, 0, (4, 2, None)), (14, 2, 0x10, None), (0, 0, 0, None)])
def test_without_sa_siginfo_the_fault_is_told_by_the_cpu_exception(trapno, err, cr2, told):
    """The kernel leaves `info` unwritten for a plain handler: stale bytes there give way to trapno/err/cr2."""
    decoded = signal_frame.decode(_x86_64_context(FAULT_PC, b"\xe0\x89\xd2\xcd" * 8, trapno, err, cr2), X86_64, 11)
    assert (decoded and (decoded[0].number, decoded[0].code, decoded[0].address)) == (told if told else None)
