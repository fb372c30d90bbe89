"""aarch64 cores (Grace nodes: GH200, GB200 NVL72), made at test time under qemu-user (issue 14, item 7).

Each program is cross-built with Debian's aarch64-linux-gnu-gcc and run under `qemu-aarch64 -g PORT`;
gdb-multiarch, connected to qemu's gdb stub, lets it run to the fatal signal and lists every thread's
frames there (tests/data/core/gdb_frames.py, past main and the entry point), then lets the signal kill
it, and qemu writes the target's core. postmortem reads that core, which has no NT_FILE and no
NT_SIGINFO note (qemu-user writes neither): its modules come from the dynamic linker's list. Every
frame of every thread must be the function at the pc gdb has, with gdb's file:line and inline frames.
A CPython (Debian's aarch64 package, AARCH64_PYTHON_ROOT) crashing under faulthandler adds the Python
frames, checked against what faulthandler printed.

qemu runs with `-cpu max,sve=off`: gdb 13 cannot read the SVE record of qemu's signal frames
("Invalid vector length in signal frame"). qemu 7.2's gdb stub does not describe the
pointer-authentication registers either, so gdb cannot strip the PAC signature from the return
addresses of a -mbranch-protection=standard build and stops at the first signed one: that build is
compared with gdb's frames of its unsigned twin (the same source and flags), function by function.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gdb_oracle import SCRIPT, Threads, on_the_stack, pairs, parse_frames, run_gdb
from postmortem.core import notes
from postmortem.core.arch import AARCH64
from postmortem.debugging import short_name
from test_core import SRC, glibc_spelling
from test_source_lines import ours as lines_of, rows

QEMU = shutil.which("qemu-aarch64")
CC = shutil.which("aarch64-linux-gnu-gcc")
GDB_MULTIARCH = shutil.which("gdb-multiarch")
POSTMORTEM = Path(sys.executable).parent / "postmortem"

LIB = "{cc} -g {flags} -shared -fPIC -o libcrash.so {src}/libcrash.c"
EXE = "{cc} -g {flags} -o {program} {src}/{source} -L. -lcrash -Wl,-rpath,'$ORIGIN'"


@dataclass(frozen=True)
class Case:
    """One crashing program: how it is built, the gdb commands that bring it where its frames are
    compared (past a handler's first fault to the fatal one, or to a breakpoint), the one that then
    kills it, and whether its return addresses are PAC-signed."""

    source: str
    flags: str
    builds: tuple[str, ...] = (LIB, EXE)
    stop: tuple[str, ...] = ("continue",)
    finish: str = "continue"
    pac: bool = False


CASES = {
    "crash": Case("crash.c", "-O0"),
    "crash_o2": Case("crash.c", "-O2"),
    "mt_abort": Case("mt_abort.c", "-O0 -pthread", ("{cc} -g {flags} -o {program} {src}/{source}",)),
    "null_call": Case("null_call.c", "-O1", ("{cc} -g {flags} -o {program} {src}/{source}",)),
    "static": Case("crash-aarch64.c", "-O0 -static", ("{cc} -g {flags} -o {program} {src}/{source}",)),
    "reraise": Case("reraise.c", "-O0", stop=("continue", "continue")),
    "plt_stop": Case("plt_calls.c", "-O0", ("{cc} -g {flags} -o {program} {src}/{source}",),
                     stop=("break puts@plt", "continue"), finish="signal SIGABRT"),
    "pac": Case("crash.c", "-O0 -mbranch-protection=standard", pac=True),
    "inline_crash": Case("inline_crash.c", "-O2", ("{cc} -g {flags} -o {program} {src}/{source}",)),
}
QEMU_CPU = ("-cpu", "max,sve=off")
"""All of qemu's aarch64 features (pointer authentication included) but SVE, whose signal-frame record
gdb 13 rejects."""
CORE_LIMIT = 512 << 20
"""RLIMIT_CORE of the qemu process: the target's core (a few threads' stacks) fits; qemu's own, written
by the kernel after it, is cut there."""


def _sysroot() -> Path:
    """The cross toolchain's target root (/usr/aarch64-linux-gnu on Debian), where qemu -L finds ld.so."""
    libc = subprocess.run([CC, "-print-file-name=libc.so.6"], capture_output=True, text=True, check=True)
    return Path(os.path.realpath(libc.stdout.strip())).parent.parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def crash_under_gdb(directory: Path, argv: list[str], sysroot: Path, case: Case,
                    env: dict[str, str] | None = None) -> tuple[Threads, Path, str]:
    """gdb-multiarch's frames of every thread where `case` stops, the core qemu wrote when it died
    there, and what the program wrote on stderr."""
    port = _free_port()
    stderr = directory / "stderr.txt"
    with stderr.open("wb") as errors:
        qemu = subprocess.Popen([QEMU, *QEMU_CPU, "-L", str(sysroot), "-g", str(port), *argv], cwd=directory,
                                stdout=subprocess.DEVNULL, stderr=errors, env={**os.environ, **(env or {})})
    try:
        resource.prlimit(qemu.pid, resource.RLIMIT_CORE, (CORE_LIMIT, CORE_LIMIT))  # it waits for gdb first
        out = run_gdb(["set tcp auto-retry on", "set tcp connect-timeout 30", f"set sysroot {sysroot}",
                       f"set solib-search-path {directory}", "set backtrace past-main on",
                       "set backtrace past-entry on", f"file {argv[0]}", f"target remote 127.0.0.1:{port}",
                       *case.stop, f"source {SCRIPT}", case.finish],
                      gdb=GDB_MULTIARCH, cwd=directory, timeout=180, check=False)
        qemu.wait(timeout=60)
    finally:
        qemu.kill()
    (directory / "core").unlink(missing_ok=True)  # qemu's own core, not the target's
    cores = sorted(directory.glob("qemu_*.core"))
    threads = parse_frames(out)
    if not cores or not threads:
        pytest.fail(f"no target core or no frames from gdb:\n{out[-3000:]}")
    return threads, cores[0], stderr.read_text(errors="replace")


def analyzed(core: Path, sysroot: Path) -> dict:
    """postmortem's JSON report of `core`, from the console script."""
    out = core.parent / "report.json"
    subprocess.run([str(POSTMORTEM), "analyze", "--sysroot", str(sysroot), str(core), "--format", "json",
                    "-o", str(out)], check=True, capture_output=True, timeout=300)
    return json.loads(out.read_text())


def _tools() -> None:
    if None in (QEMU, CC, GDB_MULTIARCH):
        pytest.skip("qemu-user, gcc-aarch64-linux-gnu or gdb-multiarch not installed")


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, tuple[Threads, dict]]:
    """gdb's frames and postmortem's JSON report of each case's core."""
    _tools()
    sysroot = _sysroot()
    found = {}
    for name, case in CASES.items():
        directory = tmp_path_factory.mktemp(name)
        for build in case.builds:
            subprocess.run(build.format(cc=CC, flags=case.flags, src=SRC, program=name, source=case.source),
                           shell=True, cwd=directory, check=True, capture_output=True)
        threads, core, _stderr = crash_under_gdb(directory, [f"./{name}"], sysroot, case)
        found[name] = (threads, analyzed(core, sysroot))
    return found


def _spelled(name: str) -> str | None:
    return glibc_spelling(short_name(name))


def ours(report: dict) -> dict[int, list[tuple[int, str | None]]]:
    [core] = report["cores"]
    return {thread["tid"]: [(int(f["pc"], 16), _spelled(f["symbol"]) if f["symbol"] else None)
                            for f in thread["frames"]] for thread in core["threads"]}


@pytest.mark.parametrize("name", [name for name, case in CASES.items() if not case.pac])
def test_every_frame_of_every_thread_equals_gdb_multiarch(cases, name):
    threads, report = cases[name]
    expected = pairs(on_the_stack(threads), _spelled)
    assert sum(map(len, expected.values())) >= 3
    assert ours(report) == expected


def _to_main(found: list) -> list:
    names = [name for _pc, name, _place in found]
    return found[: names.index("main") + 1] if "main" in names else found


@pytest.mark.parametrize("name", ["crash", "crash_o2", "mt_abort", "reraise", "inline_crash"])
def test_lines_and_inline_frames_equal_gdb_multiarch(cases, name):
    """file:line of every frame and gdb's INLINE frames, up to main (tests/test_source_lines.py's view).

    Stopped at a live process's fault, gdb hides the inline frames that begin at the stop pc (it
    would step into them); on a core it shows them, as postmortem does: those are compared with the
    source (inline_crash.c faults in store, inlined in twice, inlined in outer)."""
    threads, report = cases[name]
    expected = {tid: _to_main(found) for tid, found in rows(threads).items()}
    assert any(place for found in expected.values() for _pc, _name, place in found), "gdb knows no lines"
    mine = lines_of(report["cores"][0])
    if name == "inline_crash":
        [(tid, found)] = mine.items()
        assert [(n, at) for _pc, n, at in found[:2]] == [("store", "inline_crash.c:7"), ("twice", "inline_crash.c:8")]
        mine = {tid: found[2:]}
    assert mine == expected


def test_the_crashing_frames_are_named_with_source_lines(cases):
    """The lib_c <- lib_b <- lib_a <- main chain of crash.c, with file:line from the cross-built DWARF."""
    _threads, report = cases["crash"]
    [core] = report["cores"]
    [thread] = core["threads"]
    frames = thread["frames"]
    assert [f["symbol"] for f in frames[:4]] == ["lib_c", "lib_b", "lib_a", "main"]
    assert frames[0]["file"].endswith("libcrash.c") and frames[0]["line"] == 3
    assert frames[0]["module"] == "libcrash.so" and all(f["how"] == "cfi" for f in frames[1:])
    assert report["verdict"]["cause"] == "native-crash"


def test_pac_signed_return_addresses_are_stripped_and_named(cases):
    """gdb keeps the signature (its pcs past the first signed one are no code addresses, and it stops
    there); postmortem strips it: the frames are those gdb finds in the unsigned twin, where gdb has
    them the same pcs once gdb's are stripped, and all of them code of the program or its libraries."""
    threads, report = cases["pac"]
    twin_threads, _ = cases["crash"]
    signed = [pc for frames in pairs(threads).values() for pc, _ in frames if pc >> AARCH64.address_bits]
    assert signed, "the PAC build signed no return address: the case tests nothing"
    [(tid, mine)] = ours(report).items()
    [twin] = pairs(on_the_stack(twin_threads), _spelled).values()
    assert [name for _pc, name in mine] == [name for _pc, name in twin]
    mask = (1 << AARCH64.address_bits) - 1
    gdb_pcs = [pc & mask for pc, _name in pairs(on_the_stack(threads))[tid]]
    assert [pc for pc, _name in mine[:len(gdb_pcs)]] == gdb_pcs


def test_the_fault_under_an_aarch64_handler(cases):
    """reraise.c's SA_SIGINFO handler re-raises the NULL write of lib_c: the kernel's (here qemu's) frame
    under it holds that fault's siginfo (SIGSEGV SEGV_MAPERR at 0) and registers."""
    threads, report = cases["reraise"]
    [core] = report["cores"]
    fault = core["original_fault"]
    assert fault is not None and fault["handler"] == "reraise!on_segv"
    assert (fault["signal"]["name"], fault["signal"]["code"], fault["signal"]["address"]) == ("SIGSEGV", 1, "0x0")
    gdb_frames = on_the_stack(threads)[core["threads"][0]["tid"]]
    under = [f.pc for f in gdb_frames][[f.kind for f in gdb_frames].index("sigtramp") + 1:]
    assert [int(f["pc"], 16) for f in fault["frames"]] == under
    assert [f["symbol"] for f in fault["frames"][:3]] == ["lib_c", "lib_b", "lib_a"]


def test_a_frame_in_a_plt_stub_is_named_name_at_plt(cases):
    _threads, report = cases["plt_stop"]
    frames = report["cores"][0]["threads"][0]["frames"]
    assert [f["symbol"] for f in frames[:2]] == ["puts@plt", "main"]


@pytest.mark.parametrize(("insn_mask", "bits"), [(0xFF7F000000000000, 48), (0xFF70000000000000, 52)])
def test_the_kernels_pac_mask_says_where_a_code_address_ends(insn_mask, bits):
    """NT_ARM_PAC_MASK of a 48-bit and a 52-bit VA kernel (arch/arm64/include/asm/pointer_auth.h: the
    signature takes bits 54..VA and, without tagging of code addresses, 63..56)."""
    assert notes.code_address_bits(struct.pack("<QQ", insn_mask, insn_mask)) == bits
    assert notes.code_address_bits(bytes(16)) is None and notes.code_address_bits(b"short") is None


def test_null_call_continues_from_the_link_register(cases):
    """bl through a NULL pointer: pc 0, and the caller is the return address the call left in x30."""
    _threads, report = cases["null_call"]
    frames = report["cores"][0]["threads"][0]["frames"]
    assert frames[0]["pc"] == "0x0" and [f["symbol"] for f in frames[1:4]] == ["dispatch", "run_loop", "main"]


PYTHON_ROOT = os.environ.get("AARCH64_PYTHON_ROOT")
"""Debian's aarch64 CPython unpacked into a root (`tools/unpack-debs.sh bookworm arm64 DIR python3.11-minimal
libpython3.11-minimal libpython3.11-stdlib libc6 libexpat1 zlib1g libffi8`; .ci/run does it)."""


@pytest.fixture(scope="module")
def faulthandler_case(tmp_path_factory) -> tuple[Threads, dict, str]:
    """tests/data/core/src/pycrash.py under the aarch64 CPython with -X faulthandler: gdb stops at the fault
    and again at faulthandler's re-raise, where its frames are taken."""
    _tools()
    if not PYTHON_ROOT:
        pytest.skip("no aarch64 CPython: set AARCH64_PYTHON_ROOT (see its docstring)")
    root = Path(PYTHON_ROOT)
    directory = tmp_path_factory.mktemp("faulthandler")
    interpreter = next(root.glob("usr/bin/python3.*"))
    shutil.copy(interpreter, directory / interpreter.name)  # started as ./python3, a link, found beside the core
    (directory / "python3").symlink_to(interpreter.name)
    case = Case("", "", stop=("continue", "continue"))
    # PYTHONHOME: the interpreter's own paths are then the crashed machine's (/usr/lib/python3.11), which
    # qemu -L maps into the root, as --sysroot does for postmortem
    threads, core, stderr = crash_under_gdb(directory, ["./python3", "-X", "faulthandler", str(SRC / "pycrash.py")],
                                            root, case, {"PYTHONHOME": "/usr"})
    return threads, analyzed(core, root), stderr


def _data_objects(root: Path) -> set[str]:
    """The interpreter's data symbols (STT_OBJECT): no return address lies in one."""
    from elftools.elf.elffile import ELFFile

    names: set[str] = set()
    with open(next(root.glob("usr/bin/python3.*")), "rb") as f:
        for section in ELFFile(f).iter_sections():
            if section.header.sh_type in ("SHT_SYMTAB", "SHT_DYNSYM"):
                names.update(sym.name for sym in section.iter_symbols() if sym["st_info"]["type"] == "STT_OBJECT")
    return names


def test_faulthandler_on_aarch64_native_frames_equal_gdb_multiarch(faulthandler_case):
    """Every thread's frames equal gdb-multiarch's. Where gdb's unwind of a waiting thread under qemu lands in a
    data object (a second frame named PyRuntime: it took a stale link register in a leaf), gdb's stack ends
    there, and ours must equal it up to that point."""
    threads, report, _stderr = faulthandler_case
    expected, got = pairs(on_the_stack(threads), _spelled), ours(report)
    data = {_spelled(name) for name in _data_objects(Path(PYTHON_ROOT or ""))}
    lost = {tid: next((i for i, (_, name) in enumerate(frames) if i and name in data), None)
            for tid, frames in expected.items()}
    assert set(got) == set(expected) and list(lost.values()).count(None) >= 1
    for tid, frames in expected.items():
        assert got[tid][:lost[tid]] == frames[:lost[tid]], tid
    fault = report["cores"][0]["original_fault"]
    assert fault["handler"] == "faulthandler" and fault["signal"]["name"] == "SIGSEGV"
    own = {m["kind"] for m in report["cores"][0]["modules"] if "/lib-dynload/_ctypes" in m["path"]}
    assert own == {"python-stdlib"}  # the interpreter's own, not a custom op


def test_faulthandler_on_aarch64_python_frames_equal_faulthandlers(faulthandler_case):
    """Each thread's Python frames as faulthandler printed them at the crash; the crashed thread's under
    the eval-loop frame that runs them."""
    _threads, report, stderr = faulthandler_case
    printed = [block for block in stderr.split("\n\n") if "(most recent call first)" in block]
    told = [[(line.split('"')[1], int(line.rsplit(" line ", 1)[1].split()[0]), line.rsplit(" in ", 1)[1])
             for line in block.splitlines()[1:] if line.strip().startswith("File ")] for block in printed]
    [core] = report["cores"]
    read = [[(f["file"], f["line"], f["function"]) for f in thread["python_frames"]] for thread in core["threads"]]
    assert sorted(read) == sorted(told) and len(told) == 2
    crashed = core["threads"][0]
    [loop] = [f for f in crashed["frames"] if f["python_frames"]]
    assert [f["function"] for f in loop["python_frames"]] == ["string_at", "level3", "level2", "level1", "<module>"]


GO = shutil.which("go")


@pytest.mark.skipif(GO is None or QEMU is None, reason="go or qemu-user not installed")
def test_a_stripped_arm64_go_binary_unwinds_as_gos_own_traceback(tmp_path):
    """go_crash.go for arm64, stripped (-ldflags="-s -w": no symbols, no DWARF), crashed under qemu with
    GOTRACEBACK=crash. gdb-multiarch 13 dies on it ("internal error"), so the oracle is the runtime's own
    traceback of the crashed goroutine on stderr: from .gopclntab alone, ours names the same functions in
    the same order, through the sigpanic that arm64's handler injects into the frameless main.leaf."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "GOCACHE": str(tmp_path / ".c"),
           "GO111MODULE": "off", "GOARCH": "arm64"}
    subprocess.run([GO, "build", "-ldflags=-s -w", "-o", "go_crash", str(SRC / "go_crash.go")], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=300)
    qemu = subprocess.Popen([QEMU, *QEMU_CPU, "./go_crash"], cwd=tmp_path, env={"GOTRACEBACK": "crash"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    resource.prlimit(qemu.pid, resource.RLIMIT_CORE, (CORE_LIMIT, CORE_LIMIT))
    _out, stderr = qemu.communicate(timeout=120)
    (tmp_path / "core").unlink(missing_ok=True)
    [core] = sorted(tmp_path.glob("qemu_*.core"))
    printed = stderr.decode(errors="replace").split("goroutine 1 [running]:\n", 1)[1].split("\n\n", 1)[0]
    told = [line.split("(", 1)[0] for line in printed.splitlines() if not line.startswith("\t")]
    [thread, *_] = analyzed(core, _sysroot())["cores"][0]["threads"]
    names = [f["symbol"] for f in thread["frames"]]
    start = names.index(told[1])  # after `panic`, the runtime's spelling of runtime.gopanic
    assert names[start - 1] == "runtime.gopanic" and names[start:] == told[1:]
    assert {f["how"] for f in thread["frames"][1:]} <= {"pclntab", "sigcontext"}
