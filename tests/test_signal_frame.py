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

from postmortem.core import signal_frame
from postmortem.core.analysis import _RawFrame
from postmortem.debugging import short_name
from postmortem.pipeline import analyze
from postmortem.render import render
from test_core import DATA, GDB, PYTHON, SRC, _allow_cores, core_of, glibc_spelling

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
    out = subprocess.run([GDB, "-q", "-batch", "-nx", "-ex", "set debuginfod enabled off", "-x", str(GDB_SIGFRAME),
                          str(executable), str(core)], capture_output=True, check=False, text=True, timeout=60).stdout
    fault: dict = {"registers": {}, "frames": []}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word == "HANDLER":
            fault["handler"] = rest
        elif word == "DELIVERED":
            fault["delivered"] = tuple(int(value) for value in rest.split())
        elif word == "SIGINFO":
            signo, code, address = rest.split()
            fault["siginfo"] = (int(signo), int(code), address)
        elif word == "REG":
            name, value = rest.split()
            fault["registers"][name] = value
        elif word == "FRAME":
            pc, name = rest.split(" ", 1)
            fault["frames"].append((pc, None if name == "None" else glibc_spelling(short_name(name))))
    return fault


def ours(frames: list[dict]) -> list[tuple[str, str | None]]:
    """(pc, function) per frame, cut after main as gdb stops there."""
    found = [(f["pc"], glibc_spelling(short_name(f["symbol"])) if f["symbol"] else None) for f in frames]
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


def _frame(rip: int, siginfo: bytes, trapno: int = 0, err: int = 0, cr2: int = 0) -> bytes:
    registers = [0] * 16 + [rip, 0x202]
    # uc_flags, uc_link, uc_stack; sigcontext: 18 registers, csgsfs err trapno oldmask cr2, fpstate and
    # reserved1[8]; uc_sigmask
    context = struct.pack("<40x18Q5Q72x8x", *registers, 0x33, err, trapno, 0, cr2)
    assert len(context) == signal_frame.UCONTEXT_SIZE
    return struct.pack("<Q", TRAMPOLINE) + context + siginfo.ljust(signal_frame.SIGINFO_SIZE, b"\0")


def test_the_frame_must_resume_where_the_unwinder_went():
    frames = [_RawFrame(1, "registers", 1), _RawFrame(TRAMPOLINE, "cfi", TRAMPOLINE, True),
              _RawFrame(FAULT_PC, "cfi", FAULT_PC, True)]
    siginfo = struct.pack("<iii4xQ", 11, 0, 1, 0x10)
    decoy = _frame(0x1234, siginfo)  # the trampoline's address in a frame that resumes elsewhere
    stack = _Stack(BASE, bytes(64) + decoy + _frame(FAULT_PC, siginfo))
    address, info, registers = signal_frame.find_frame({"rsp": BASE}, frames, stack)
    assert address == BASE + 64 + len(decoy) and registers["rip"] == FAULT_PC
    assert (info.number, info.code, info.address) == (11, 1, 0x10)


def test_a_stack_full_of_the_trampoline_address_costs_max_candidates_checks():
    frames = [_RawFrame(1, "registers", 1), _RawFrame(TRAMPOLINE, "cfi", TRAMPOLINE, True)]
    stack = _Stack(BASE, struct.pack("<Q", TRAMPOLINE) * (signal_frame.MAX_SCAN // 8))
    assert signal_frame.find_frame({"rsp": BASE}, frames, stack) is None


@pytest.mark.parametrize(("trapno", "err", "cr2", "told"), [
    (14, 6, 0x10, (11, 1, 0x10)), (14, 7, 0x10, (11, 2, 0x10)), (13, 0, 0, (11, 0x80, None)),
    (6, 0, 0, (4, 2, None)), (14, 2, 0x10, None), (0, 0, 0, None)])
def test_without_sa_siginfo_the_fault_is_told_by_the_cpu_exception(trapno, err, cr2, told):
    """The kernel leaves `info` unwritten for a plain handler: stale bytes there give way to trapno/err/cr2."""
    decoded = signal_frame.decode(_frame(FAULT_PC, b"\xe0\x89\xd2\xcd" * 8, trapno, err, cr2))
    assert (decoded and (decoded[0].number, decoded[0].code, decoded[0].address)) == (told if told else None)
