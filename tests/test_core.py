"""Core files: real crashes made at test time, read by postmortem and compared with gdb.

Programs from tests/data/core/src are built with gcc and crashed with core
dumps enabled (the kernel's core_pattern must write `core` in the working
directory; where it does not, gdb's gcore takes the core instead). gdb's own
frame list (tests/gdb_oracle.py gives each frame with gdb's frame type) is
the oracle: postmortem must list exactly gdb's NORMAL and SIGTRAMP
frames, names and order, per thread. gdb's INLINE frames (same pc as the
frame that holds them) and TAILCALL frames (synthesised from DWARF call-site
info) need .debug_info and are not physical frames, so they are the only gdb
frames left out; gdb stops at main, so our frames past main are cut there.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gdb_oracle import GDB, gdb_threads, labels, on_the_stack
from hostile import core_craft
from postmortem.debugging import short_name
from postmortem.model import Options
from postmortem.pipeline import analyze
from postmortem.render import text_report

DATA = Path(__file__).parent / "data" / "core"
SRC = DATA / "src"
GCC = shutil.which("gcc")

PROGRAMS = {
    # name: (compile commands, run arguments)
    "crash": ("gcc -g -O0 -fno-omit-frame-pointer -shared -fPIC -o libcrash.so {src}/libcrash.c && "
              "gcc -g -O0 -o crash {src}/crash.c -L. -lcrash -Wl,-rpath,'$ORIGIN'", ["./crash"]),
    "crash_o2": ("gcc -g -O2 -fomit-frame-pointer -shared -fPIC -o libcrash_o2.so {src}/libcrash.c && "
                 "gcc -g -O2 -fomit-frame-pointer -o crash_o2 {src}/crash.c -L. -lcrash_o2 -Wl,-rpath,'$ORIGIN'",
                 ["./crash_o2"]),
    "mt_abort": ("gcc -g -O0 -pthread -o mt_abort {src}/mt_abort.c", ["./mt_abort"]),
    "terminate": ("g++ -g -O0 -o terminate {src}/terminate.cc", ["./terminate"]),
    "sighandler": ("gcc -g -O0 -fno-omit-frame-pointer -shared -fPIC -o libcrash.so {src}/libcrash.c && "
                   "gcc -g -O0 -o sighandler {src}/sighandler.c -L. -lcrash -Wl,-rpath,'$ORIGIN'", ["./sighandler"]),
}


def _allow_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def crash(directory: Path, name: str, env: dict[str, str] | None = None, args: tuple[str, ...] = (),
          programs: dict[str, tuple[str, list[str]]] = PROGRAMS) -> Path:
    """Build and crash one program (of `programs`) in its own directory; the path of its core."""
    build, run = programs[name]
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(build.format(src=SRC), shell=True, cwd=directory, check=True, capture_output=True)
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    subprocess.run([*run, *args], cwd=directory, preexec_fn=_allow_cores, env=environment, capture_output=True,
                   check=False)
    core = directory / "core"
    if not core.exists() and GDB:
        subprocess.run([GDB, "-batch", "-ex", "run", "-ex", "gcore core", "--args", *run, *args], cwd=directory,
                       env=environment, capture_output=True, check=False, timeout=60)
    if not core.exists():
        pytest.skip("no core file was written (core_pattern pipes cores elsewhere and gdb is not installed)")
    return core


@pytest.fixture(scope="module")
def cores(tmp_path_factory) -> dict[str, Path]:
    if GCC is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not installed: the test programs cannot be built")
    root = tmp_path_factory.mktemp("cores")
    return {name: crash(root / name, name) for name in PROGRAMS}


def core_of(path: Path, options: Options = Options()) -> dict:
    report = analyze([str(path)], options=options)
    assert len(report.cores) == 1, report.inputs
    return json.loads(json.dumps(_plain(report.cores[0])))


def _plain(value):
    from postmortem.model import to_plain
    return to_plain(value)


def our_frames(core: dict) -> dict[int, list[str]]:
    """Function names per thread, cut after main (gdb does not show frames past main)."""
    found = {}
    for thread in core["threads"]:
        names = [short_name(f["symbol"]) if f["symbol"] else None for f in thread["frames"]]
        if "main" in names:
            names = names[: names.index("main") + 1]
        found[thread["tid"]] = names
    return found


def gdb_frames(exe: Path, core: Path) -> dict[int, list[str | None]]:
    """gdb's physical frames per thread (inline and tail-call frames left out, see the module docstring)."""
    return labels(on_the_stack(gdb_threads(exe, core)), short_name)


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_frames_equal_gdb(cores, name):
    core = cores[name]
    theirs = gdb_frames(core.parent / name, core)
    ours = our_frames(core_of(core))
    assert theirs, "gdb printed no frames"
    assert ours == theirs


EXPECTED = {
    # name: (signal, first frame of the crashing thread outside libc/libstdc++, the frames from there on)
    "crash": ("SIGSEGV", ["lib_c", "lib_b", "lib_a", "main"]),
    "crash_o2": ("SIGSEGV", ["lib_c", "main"]),
    "mt_abort": ("SIGABRT", ["aborter"]),
    "terminate": ("SIGABRT", ["job::step(int)"] * 4 + ["main"]),
    "sighandler": ("SIGABRT", ["on_segv", "<signal handler called>", "lib_c", "lib_b", "lib_a", "main"]),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_signal_threads_and_modules(cores, name):
    core = core_of(cores[name])
    signal, expected = EXPECTED[name]
    assert core["signal"]["name"] == signal
    crashed = core["threads"][0]
    assert crashed["crashed"] and not any(t["crashed"] for t in core["threads"][1:])
    program = [f for f in crashed["frames"]
               if not f["module"].startswith(("libc.so", "libstdc++")) or f["symbol"] == "<signal handler called>"]
    assert [f["symbol"] for f in program[: len(expected)]] == expected
    assert crashed["frames"][0]["how"] == "registers"
    assert all(f["how"] in ("cfi", "sigcontext") for f in crashed["frames"][1:])
    assert set(crashed["registers"]) >= {"rip", "rsp", "rbp", "rax"}
    assert core["modules"][0]["build_id"] == core["modules"][0]["build_id_on_disk"]
    assert core["executable"].endswith("/" + name)


def test_segv_fields(cores):
    report = analyze([str(cores["crash"])])
    event = next(e for e in report.events if e.kind == "core-signal")
    assert event.fields["code_meaning"] == "SEGV_MAPERR: address not mapped"
    assert event.fields["address"] == "0x0" and event.fields["crash_symbol"] == "lib_c"
    assert event.fields["crash_module"] == "libcrash.so" and event.fields["crash_module_kind"] == "other"
    assert event.text.startswith("SIGSEGV (SEGV_MAPERR) at 0x0 in libcrash.so!lib_c+0x")
    assert report.verdict.signature == "core-native-crash"
    core = core_of(cores["crash"])
    assert core["signal"]["mapping"] is None


def test_the_text_shows_every_thread_when_asked_as_gdb_thread_apply_all_bt_does(cores):
    """A real 5-thread program that aborts: by default the crashing thread and a count of the others; with
    `--threads all` every thread's frames, the crashing one first, each under its own heading (gdb the oracle)."""
    from click.testing import CliRunner

    from postmortem.cli import main

    core = core_of(cores["mt_abort"])
    crashed = CliRunner().invoke(main, ["analyze", "--no-color", str(cores["mt_abort"])])
    every = CliRunner().invoke(main, ["analyze", "--no-color", "--threads", "all", str(cores["mt_abort"])])
    assert crashed.exit_code == every.exit_code == 0, every.output
    assert "4 other thread(s): --threads all shows them" in crashed.output
    headings = [line.strip() for line in every.output.splitlines() if line.strip().startswith(("Crashing thread",
                                                                                               "Thread "))]
    assert len(headings) == 5 and headings[0].startswith("Crashing thread")
    assert {int(re.search(r"hread (\d+)", h)[1]) for h in headings} == {t["tid"] for t in core["threads"]}
    # the main thread is named by the core (NT_PRPSINFO's comm of the thread group leader); the others are not
    assert sum(h.endswith(" (mt_abort):") for h in headings) == 1
    assert "other thread(s)" not in every.output
    if GDB:  # each thread's innermost frames of our own code, as gdb names them
        for frames in our_frames(core).values():
            assert any(name in every.output for name in frames[:1])


def test_abort_names_sender_and_frame_below_abort(cores):
    core = core_of(cores["mt_abort"])
    assert core["signal"]["code_meaning"] == "SI_TKILL: sent by tkill/abort()"
    assert core["signal"]["sender_pid"] == core["pid"]
    assert len(core["threads"]) == 5
    event = next(e for e in analyze([str(cores["mt_abort"])]).events if e.kind == "core-signal")
    assert event.fields["top_frame"] == "aborter"


def test_signal_frame_is_named(cores):
    frames = core_of(cores["sighandler"])["threads"][0]["frames"]
    names = [f["symbol"] for f in frames]
    at = names.index("<signal handler called>")
    assert names[at - 1] == "on_segv" and names[at + 1] == "lib_c"


def test_notes_agree_with_pyelftools(cores):
    """pyelftools decodes NT_PRPSINFO and NT_FILE itself: our struct decoders must say the same."""
    from elftools.elf.elffile import ELFFile

    from postmortem.core import notes
    with open(cores["mt_abort"], "rb") as handle:
        for segment in ELFFile(handle).iter_segments():
            if segment.header.p_type != "PT_NOTE":
                continue
            for note in segment.iter_notes():
                if note["n_type"] == "NT_PRPSINFO":
                    ours = notes.process_info(bytes(note["n_descdata"]))
                    assert (ours.pid, ours.uid, ours.fname) == (note["n_desc"].pr_pid, note["n_desc"].pr_uid,
                                                                note["n_desc"].pr_fname.split(b"\0")[0].decode())
                if note["n_type"] == "NT_FILE":
                    ours = notes.file_mappings(bytes(note["n_descdata"]))
                    assert [m.path for m in ours] == [n.decode() for n in note["n_desc"].filename]
                    assert [m.start for m in ours] == [e.vm_start for e in note["n_desc"].Elf_Nt_File_Entry]


def test_environment_by_name_unless_show_env(tmp_path):
    if GCC is None:
        pytest.skip("gcc not installed")
    core = crash(tmp_path, "crash", {"SECRET_TOKEN": "abc-secret", "CUDA_VISIBLE_DEVICES": "1"}, ("--flag", "x y"))
    plain = core_of(core)
    assert plain["argv"] == ["./crash", "--flag", "x y"]
    assert plain["environment"]["values"] == {"CUDA_VISIBLE_DEVICES": "1"}
    assert "SECRET_TOKEN" in plain["environment"]["names_only"]
    report = analyze([str(core)])
    from postmortem.render.json_report import render
    assert "abc-secret" not in render(report)
    shown = core_of(core, Options(show_env=True))
    assert shown["environment"]["values"]["SECRET_TOKEN"] == "abc-secret"


def test_truncated_core_keeps_what_it_can(cores, tmp_path):
    data = cores["mt_abort"].read_bytes()
    cut = tmp_path / "core.cut"
    cut.write_bytes(data[: len(data) // 2])
    report = analyze([str(cut)])
    assert report.inputs[0].format == "elf-core"
    assert any("cut off" in d for d in report.inputs[0].diagnostics)
    assert report.cores[0].signal.name == "SIGABRT"


def test_cut_inside_the_notes(cores, tmp_path):
    cut = tmp_path / "core.cut"
    cut.write_bytes(cores["crash"].read_bytes()[:1500])
    report = analyze([str(cut)])
    assert report.inputs[0].format == "elf-core" and report.inputs[0].diagnostics


def test_zero_filled_core_is_not_a_crash(tmp_path):
    zeros = tmp_path / "core.123"
    zeros.write_bytes(b"\0" * 65536)
    report = analyze([str(zeros)])
    assert report.inputs[0].format == "binary" and not report.cores and report.verdict is None


def test_elf_that_is_not_a_core(tmp_path):
    program = tmp_path / "true"
    shutil.copy(shutil.which("true") or "/bin/true", program)
    report = analyze([str(program)])
    assert report.inputs[0].format == "elf"
    assert "not a core" in report.inputs[0].diagnostics[0]


def analyze_without(program_dir: Path, library: str, away: Path, options: Options = Options()):
    """Analyse a copy of the program's core while its library is moved out of reach (and back after)."""
    away.mkdir(exist_ok=True)
    core = away / "core"
    shutil.copy(program_dir / "core", core)
    hidden = away.parent / f"hidden-{library}"
    (program_dir / library).rename(hidden)
    try:
        return analyze([str(core)], options=options)
    finally:
        hidden.rename(program_dir / library)


def test_missing_library_gives_partial_stack_and_says_sysroot(cores, tmp_path):
    source = cores["crash"].parent
    report = analyze_without(source, "libcrash.so", tmp_path / "elsewhere")
    frames = report.cores[0].threads[0].frames
    assert frames[0].module == "libcrash.so" and frames[0].symbol is None
    assert any("--sysroot" in d and "libcrash.so" in d for d in report.inputs[0].diagnostics)
    # no CFI for the missing library: its frames come from its frame pointers, and the unwinder gets back to main
    assert [(f.module, f.symbol, f.how) for f in frames[:4]] == [
        ("libcrash.so", None, "registers"), ("libcrash.so", None, "fp"), ("libcrash.so", None, "fp"),
        ("crash", "main", "fp")]
    assert all(f.how == "cfi" for f in frames[4:])
    sysroot = tmp_path / "root"
    target = sysroot / str(source / "libcrash.so").lstrip("/")
    target.parent.mkdir(parents=True)
    shutil.copy(source / "libcrash.so", target)
    again = analyze_without(source, "libcrash.so", tmp_path / "elsewhere", Options(sysroot=str(sysroot)))
    assert [f.symbol for f in again.cores[0].threads[0].frames[:3]] == ["lib_c", "lib_b", "lib_a"]


def test_stack_scan_when_there_is_neither_cfi_nor_frame_pointer(cores, tmp_path):
    """-O2 -fomit-frame-pointer library missing: only a scan for return addresses finds main."""
    report = analyze_without(cores["crash_o2"].parent, "libcrash_o2.so", tmp_path / "away")
    frames = report.cores[0].threads[0].frames
    assert [(f.module, f.symbol, f.how) for f in frames[:2]] == [
        ("libcrash_o2.so", None, "registers"), ("crash_o2", "main", "scan")]


def test_rebuilt_library_is_flagged(cores, tmp_path):
    source = cores["crash"].parent
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(source / "core", copy / "core")
    lib = source / "libcrash.so"
    saved = lib.read_bytes()
    subprocess.run(f"gcc -g -O1 -shared -fPIC -o {lib} {SRC}/libcrash.c", shell=True, check=True)
    try:
        report = analyze([str(copy / "core")])
    finally:
        lib.write_bytes(saved)
    assert any("is not the file the process had mapped" in d for d in report.inputs[0].diagnostics)


def test_core_in_tar_gz_and_zst(cores, tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(cores["crash"], arcname="bundle/core.4242")
    bundle = tmp_path / "report.tar.gz"
    bundle.write_bytes(buffer.getvalue())
    report = analyze([str(bundle)])
    assert report.cores and report.cores[0].signal.name == "SIGSEGV"
    assert report.inputs[0].path.endswith("!/bundle/core.4242")
    zst = Path(__file__).parent / "data" / "core" / "driver.core.zst"
    event = next(e for e in analyze([str(zst)]).events if e.kind == "core-signal")
    assert event.fields["crash_module_kind"] == "nvidia-driver" and event.fields["driver_version"] == "570.124.06"


def test_gpu_classification():
    from postmortem.core.gpu import classify, stack_facts
    assert classify("/usr/lib/x86_64-linux-gnu/libcuda.so.570.124.06") == "nvidia-driver"
    assert classify("/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.570.124.06") == "nvidia-driver"
    assert classify("/venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.12") == "cuda-library"
    assert classify("/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn_cnn_infer.so.8") == "cuda-library"
    assert classify("/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so") == "framework"
    assert classify("/venv/lib/python3.11/site-packages/torch/_C.cpython-311-x86_64-linux-gnu.so") == "framework"
    assert classify("/venv/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so") == \
        "user-extension"
    assert classify("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0") == "python"
    assert classify("/usr/lib/x86_64-linux-gnu/libc.so.6") == "runtime"
    assert classify("/usr/lib/x86_64-linux-gnu/libz.so.1") == "other"
    facts = stack_facts(["/usr/lib/libcuda.so.570.124.06", "/opt/cuda/lib64/libcudart.so.12.4.127",
                         "/venv/site-packages/torch/lib/libtorch.so", "/usr/bin/python3.11"])
    assert facts == {"driver_version": "570.124.06", "cuda_version": "12.4.127", "framework": "pytorch",
                     "python_version": "3.11"}


def test_corrupt_headers_and_notes_never_raise():
    """Random bytes written over a real core's headers and notes: read_core answers, never raises."""
    import random

    import zstandard

    from postmortem.core.analysis import read_core
    raw = zstandard.ZstdDecompressor().stream_reader(
        (Path(__file__).parent / "data" / "core" / "cudart-abort.core.zst").open("rb")).read()
    rng = random.Random(7)
    for _ in range(150):
        damaged = bytearray(raw)
        for _ in range(20):
            damaged[rng.randrange(8192)] = rng.randrange(256)
        data = bytes(damaged)
        # B023 is fine here: the lambda is called within this iteration, never after it
        read_core(lambda offset, length: data[offset:offset + length], len(data), "damaged.core")  # noqa: B023


PYTHON = Path(sys.executable).resolve()


@pytest.fixture(scope="module")
def python_core(tmp_path_factory) -> Path:
    """A real core of this interpreter crashed through ctypes (NULL read in libc); faulthandler's report of the same
    crash is its job.log beside it."""
    directory = tmp_path_factory.mktemp("pycore")
    done = subprocess.run([str(PYTHON), "-X", "faulthandler", str(SRC / "pycrash.py")], cwd=directory,
                          preexec_fn=_allow_cores, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          capture_output=True, check=False, timeout=60)
    (directory / "job.log").write_bytes(done.stderr)
    core = directory / "core"
    if not core.exists():
        pytest.skip("no core file was written (core_pattern pipes cores elsewhere)")
    return core


def glibc_spelling(name: str | None) -> str | None:
    """One spelling for glibc's aliases of one function (__GI___pthread_cond_timedwait,
    ___pthread_cond_timedwait64): gdb names them from DWARF, we from the symbol table."""
    if name is None:
        return None
    return re.sub(r"(64|_alias_\d+)$", "", re.sub(r"^_*(GI_+)?", "", name))


@pytest.mark.skipif(GDB is None, reason="gdb not installed: no reference backtrace to compare with")
def test_python_interpreter_frames_equal_gdb(python_core):
    theirs = gdb_frames(PYTHON, python_core)
    ours = our_frames(core_of(python_core))
    assert len(theirs) == 2 and all(theirs.values())
    assert {tid: [glibc_spelling(n) for n in names] for tid, names in ours.items()} == \
        {tid: [glibc_spelling(n) for n in names] for tid, names in theirs.items()}


def test_pythons_own_extension_modules_are_not_user_extensions(python_core):
    """_ctypes and _struct come with the interpreter (lib-dynload): not a custom op to rebuild, not a GPU library."""
    report = analyze([str(python_core)])
    [core] = report.cores
    own = [m for m in core.modules if "/lib-dynload/" in m.path]
    assert any("_ctypes" in m.path for m in own) and {m.kind for m in own} == {"python-stdlib"}
    assert report.verdict.signature != "core-crash-in-user-extension"
    listed = text_report.render(report).split("GPU libraries loaded", 1)
    assert len(listed) == 1 or "_ctypes" not in listed[1].split("\n\n", 1)[0]


def _listed(text: str, heading: str) -> list[str]:
    """The module lines under one heading of a text report's core section."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip().startswith(heading)), None)
    if at is None:
        return []
    return [line.strip() for line in itertools.takewhile(lambda line: line.startswith("    "), lines[at + 1:])]


@pytest.mark.parametrize(("core", "module", "heading", "other"), [
    ("extension", "_ops.cpython-311-x86_64-linux-gnu.so", "Compiled extension modules loaded", "GPU libraries loaded"),
    ("torch", "libtorch_cuda.so", "GPU libraries loaded", "Compiled extension modules loaded")])
def test_a_site_packages_extension_is_listed_apart_from_the_gpu_libraries(core, module, heading, other):
    """A compiled extension in site-packages (a custom op, or numpy's) is not a GPU library: each list holds its own."""
    shown = text_report.render(analyze([str(DATA / f"{core}.core.zst")]))
    assert any(module in line for line in _listed(shown, heading))
    assert not any(module in line for line in _listed(shown, other))


def test_one_crash_told_by_its_core_and_by_faulthandler_is_one_finding(python_core):
    """Issue 27: the core and faulthandler's report name the same innermost Python frame of one crash; one finding
    holds both, and its advice does not ask for the report it already has."""
    report = analyze([str(python_core), str(python_core.parent / "job.log")])
    crashes = [f for f in report.findings if f.cause == "native-crash"]
    assert len(crashes) == 1
    kinds = {e.kind for e in report.events if e.id in crashes[0].evidence}
    assert kinds == {"core-signal", "fatal-signal"}
    assert "core-native-crash" in crashes[0].merged or crashes[0].signature == "core-native-crash"
    tops = {e.fields["python_top"] for e in report.events if e.id in crashes[0].evidence}
    assert len(tops) == 1
    assert re.fullmatch(r".*/ctypes/__init__\.py:\d+ in string_at", tops.pop())


def test_python_core_shows_the_python_stack_of_the_crash(python_core):
    core = core_of(python_core)
    crashed = core["threads"][0]
    functions = [frame["function"] for frame in crashed["python_frames"]]
    assert functions[:5] == ["string_at", "level3", "level2", "level1", "<module>"]
    assert crashed["python_frames"][1]["file"].endswith("pycrash.py")
    assert core["python_version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    background = core["threads"][1]
    assert next(frame["function"] for frame in background["python_frames"]) == "background"


def test_an_aarch64_core_without_its_program_is_unwound_by_frame_records():
    """A real aarch64 core (qemu-user, static tests/data/core/src/crash-aarch64.c, no NT_SIGINFO or NT_FILE
    note) whose program is not here: no symbols or CFI, so the x29 frame records give lib_c's callers
    (lib_b, lib_a, main and libc's start), each marked the guess it is. tests/test_aarch64_core.py
    compares such cores, with their programs, with gdb-multiarch."""
    report = analyze([str(DATA / "crash-aarch64.core.zst")])
    [core] = report.cores
    assert core.signal.name == "SIGSEGV"
    assert core.executable.endswith("crash-aarch64")
    [thread] = core.threads
    assert [f.how for f in thread.frames[:5]] == ["registers", "fp", "fp", "fp", "fp"]
    assert thread.guessed_from == 1 and len({f.pc for f in thread.frames}) == len(thread.frames)
    diagnostics = " ".join(report.inputs[0].diagnostics)
    assert "no NT_SIGINFO note" in diagnostics and "is not on this machine" in diagnostics
    assert report.verdict.cause == "native-crash"


# ------------------------------------------------------------------ hostile cores (issue 13)

POSTMORTEM = Path(sys.executable).parent / "postmortem"
PLANTED = "aws_secret_access_key=PLANTED-SECRET-1234 "
ENV_SECRET = "PM_TEST_ENV_SECRET=env-secret-5678"


def _beside(directory: Path) -> None:
    for name in ("crash", "libcrash.so"):
        shutil.copy(DATA / name, directory / name)


def test_paths_a_core_names_never_fill_it_with_the_analysts_data(tmp_path):
    """A real core whose stack strings were cut from the dump and whose NT_FILE names a planted secrets
    file and /proc/self/environ over them: neither the file nor the analysing process's environment
    may become the core's argv, environment or executable name, in json or in text."""
    _beside(tmp_path)
    secrets = tmp_path / "credentials"
    secrets.write_text(PLANTED * 200)
    for name, path in (("core.file", str(secrets)), ("core.proc", "/proc/self/environ")):
        core = core_craft.committed("null-write")
        core_craft.strings_over_file(core, path, path)
        (tmp_path / name).write_bytes(core)
    env = {ENV_SECRET.split("=")[0]: ENV_SECRET.split("=")[1], "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for form in ("json", "text"):
        done = subprocess.run([str(POSTMORTEM), "analyze", "--format", form, "--show-env", "core.file", "core.proc"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert "PLANTED-SECRET" not in done.stdout and "env-secret-5678" not in done.stdout
        assert "lib_c" in done.stdout and "SIGSEGV" in done.stdout
    report = json.loads(subprocess.run([str(POSTMORTEM), "analyze", "--format", "json", "core.proc"], cwd=tmp_path,
                                       env=env, capture_output=True, text=True, timeout=60, check=True).stdout)
    [core] = report["cores"]
    assert core["argv"] == [] and core["environment"] == {}
    assert [f["symbol"] for f in core["threads"][0]["frames"][:3]] == ["lib_c", "lib_b", "lib_a"]
    assert any("argv and environment strings are not in the core" in d for d in report["inputs"][0]["diagnostics"])


def _module_and_source(core_path: Path, name: str, sysroot: str | None = None):
    from postmortem.core import elf, notes
    from postmortem.core.analysis import process_memory
    from postmortem.core.modules import Files

    data = core_path.read_bytes()

    def read(offset: int, length: int) -> bytes:
        return data[offset:offset + length]

    segments = elf.segments(read, elf.header(read))
    found = [n for s in segments if s.type == elf.PT_NOTE for n in elf.notes(read(s.offset, s.filesz))]
    mappings = next(notes.file_mappings(n.desc) for n in found if n.type == notes.NT_FILE)
    files = Files(sysroot, str(core_path.parent), ())
    memory, modules = process_memory(read, segments, mappings, files, [])
    module = next(m for m in modules if m.name == name)
    text = next(m for m in module.mappings if m.file_offset)  # a mapping the core did not dump
    filled = memory.read(text.start, 16)
    files.close()
    return module, filled


def test_only_the_mapped_elf_fills_the_pages_the_core_left_out(tmp_path):
    case = tmp_path / "case"
    case.mkdir()
    (case / "core").write_bytes(bytes(core_craft.committed("null-write")))
    _beside(case)
    module, filled = _module_and_source(case / "core", "libcrash.so")
    assert module.build_id == module.build_id_on_disk and filled is not None  # the very file: its text is there
    shutil.copy(DATA / "libcuda.so.570.124.06", case / "libcrash.so")  # an ELF, but another one
    module, filled = _module_and_source(case / "core", "libcrash.so")
    assert module.file is not None and filled is None
    root = tmp_path / "root"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(DATA / "libcrash.so", elsewhere / "libcrash.so")
    (case / "libcrash.so").unlink()
    (case / "libcrash.so").symlink_to(elsewhere / "libcrash.so")
    module, filled = _module_and_source(case / "core", "libcrash.so", str(root))  # a link out of both places
    assert module.file is not None and filled is None
    (case / "libcrash.so").unlink()
    shutil.copy(DATA / "libcrash.so", case / "libcrash.so")
    module, filled = _module_and_source(case / "core", "libcrash.so", str(root))  # beside the core: looked at
    assert module.resolved == str(case / "libcrash.so") and filled is not None
    inside = root / "tmp" / "postmortem-cores" / "libcrash.so"
    inside.parent.mkdir(parents=True)
    shutil.copy(DATA / "libcrash.so", inside)
    module, filled = _module_and_source(case / "core", "libcrash.so", str(root))
    assert module.resolved == str(inside) and filled is not None
    from postmortem.core.modules import Files
    assert Files(str(root), None, ()).candidates("/../../../../../../etc/passwd") == []
    # a relative path is the crashed process's, looked for under the core's directory and never out of it
    assert Files(None, str(case), ()).candidates("bin/../libcrash.so") == [str(case / "libcrash.so")]
    assert Files(None, str(case), ()).candidates("../elsewhere/libcrash.so") == [str(case / "libcrash.so")]


def _analyzed(directory: Path, core: str = "core") -> dict:
    """`postmortem analyze --format json` of a core, in a child bounded in time (a hostile core once hung it)."""
    done = subprocess.run([str(POSTMORTEM), "analyze", "--format", "json", core], cwd=directory, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("instructions", "said"), [
    (core_craft.SKIP_LOOP, "runs past 1,000 operations"), (core_craft.BRA_LOOP, "runs past 1,000 operations"),
    (core_craft.POP_EMPTY, "pops more values than it pushed"),
    (core_craft.RESTORE_UNDERFLOW, "DW_CFA_restore_state without a remembered state"),
    (core_craft.REMEMBER_BOMB, "DW_CFA_remember_state nested deeper than 64")],
    ids=["skip-loop", "bra-loop", "expression-underflow", "restore-underflow", "remember-bomb"])
def test_cfi_that_loops_or_underflows_costs_one_frame_its_cfi_and_nothing_else(tmp_path, instructions, said):
    """The crashing function's FDE replaced by a hostile program: the core keeps its signal, threads
    and modules, the thread keeps every frame (lib_c's caller found by its frame pointer), one line says why."""
    core_craft.crash_with_cfi(tmp_path, instructions)
    report = _analyzed(tmp_path)
    [core] = report["cores"]
    assert core["signal"]["name"] == "SIGSEGV" and len(core["modules"]) == 5
    frames = core["threads"][0]["frames"]
    assert [f["symbol"] for f in frames[:4]] == ["lib_c", "lib_b", "lib_a", "main"]
    assert frames[1]["how"] == "fp" and frames[3]["how"] == "cfi"
    [line] = [d for d in report["inputs"][0]["diagnostics"] if "unwind table" in d]
    assert line.startswith("thread 23097: ") and said in line and "libcrash.so at 0x7fc490806125" in line


def test_thousands_of_threads_share_one_unwinding_budget(tmp_path):
    core = core_craft.crash_with_cfi(tmp_path, core_craft.SKIP_LOOP)
    data = bytearray(core.read_bytes())
    core_craft.many_threads(data, 10_500)
    core.write_bytes(data)
    report = _analyzed(tmp_path)
    [core] = report["cores"]
    threads = core["threads"]
    assert len(threads) == 10_000 and threads[0]["tid"] == 23097 and threads[0]["crashed"]
    assert [f["symbol"] for f in threads[0]["frames"][:4]] == ["lib_c", "lib_b", "lib_a", "main"]
    assert all(len(t["frames"]) >= 1 for t in threads)  # past the budget a thread keeps its registers' frame
    notes = report["inputs"][0]["diagnostics"]
    assert "the core holds 10501 threads: the first 10000 are read (the kernel writes the crashed thread first)" \
        in notes
    [stopped] = [d for d in notes if d.startswith("unwinding stopped at thread")]
    assert "2,000,000 unwinding steps" in stopped
    assert sum(len(t["frames"]) for t in threads) < 30_000
    assert len([d for d in notes if "unwind table" in d]) == 1  # one line for all the threads with that problem


def test_note_headers_naming_the_same_bytes_are_read_once(tmp_path):
    core_craft.notes_read_many_times(tmp_path / "core", 20, 1 << 20)
    _beside(tmp_path)
    report = analyze([str(tmp_path / "core")])
    [core] = report.cores
    assert [t.tid for t in core.threads] == [23097] and core.signal.name == "SIGSEGV"
    assert [f.symbol for f in core.threads[0].frames[:3]] == ["lib_c", "lib_b", "lib_a"]


def test_a_million_aliases_of_one_address_cost_each_lookup_little():
    """A crafted .symtab giving one function 1,000,000 names: a frame's lookup weighs MAX_ALIASES of them."""
    import struct
    import time

    from postmortem.core.elf import EM_X86_64, Section
    from postmortem.core.symbols import SymbolTable

    strings = b"\0" + b"".join(b"f%d\0" % i for i in range(1_000_000))
    offsets = [1]
    for i in range(999_999):
        offsets.append(offsets[-1] + len(b"f%d\0" % i))
    symtab = b"".join(struct.pack("<IBBHQQ", at, 0x12, 0, 1, 0x1000, 0x100) for at in offsets)
    blob = symtab + strings
    sections = {".symtab": Section(".symtab", 2, 0, 0, len(symtab)),
                ".strtab": Section(".strtab", 3, 0, len(symtab), len(strings))}
    table = SymbolTable(lambda offset, length: blob[offset:offset + length], sections, EM_X86_64)
    started = time.perf_counter()
    names = {table.lookup(0x1000 + pc % 0x100) for pc in range(2000)}
    assert time.perf_counter() - started < 5
    assert names == {("f999999", 0x1000)}  # gdb's choice among the last MAX_ALIASES: the last by name


def test_one_crash_told_by_its_core_and_by_the_shell_is_one_finding(tmp_path):
    """bash's `PID Segmentation fault (core dumped)` names the pid the core holds: one death, one finding."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    done = subprocess.run([bash, "-c", f"{PYTHON} {SRC / 'pycrash.py'}; true"], cwd=tmp_path,
                          preexec_fn=_allow_cores, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          capture_output=True, check=False, timeout=60)
    if not (tmp_path / "core").exists():
        pytest.skip("no core file was written (core_pattern pipes cores elsewhere)")
    told = [line for line in done.stderr.decode().splitlines() if "Segmentation fault" in line]
    assert told, done.stderr
    (tmp_path / "job.log").write_text("\n".join(told) + "\n")
    report = analyze([str(tmp_path / "core"), str(tmp_path / "job.log")])
    crashes = [f for f in report.findings if f.cause == "native-crash"]
    assert len(crashes) == 1
    assert {e.kind for e in report.events if e.id in crashes[0].evidence} >= {"core-signal", "child-failed"}


def _without_file_names(core: bytearray) -> bytearray:
    """The core as qemu-user or a kernel before 3.7 writes it, and with its program's name unreadable: no NT_FILE
    note, and AT_EXECFN pointing nowhere."""
    found = [note for note in core_craft.notes(core) if note.type != core_craft.NT_FILE]
    for note in found:
        if note.type == core_craft.NT_AUXV:
            pairs = [(key, 0 if key == core_craft.AT_EXECFN else value)
                     for key, value in struct.iter_unpack("<QQ", note.desc[: len(note.desc) // 16 * 16])]
            note.desc = b"".join(struct.pack("<QQ", key, value) for key, value in pairs)
    core_craft.replace_notes(core, found)
    return core


def test_exe_names_the_program_of_a_core_that_does_not(tmp_path):
    """A real core with no NT_FILE note and no AT_EXECFN string: nothing names its program, so its frames have no
    symbols and a diagnostic says to pass --exe; with --exe (as eu-stack -e) the program and, through the dynamic
    linker's list in the dump, its library give the frames their names again, from Python and from the CLI. A file
    that is not the program is refused, not trusted."""
    _beside(tmp_path)
    (tmp_path / "core").write_bytes(_without_file_names(core_craft.committed("null-write")))
    alone = analyze([str(tmp_path / "core")])
    assert not any(f.symbol == "lib_c" for f in alone.cores[0].threads[0].frames)
    assert any("pass --exe PATH" in d for d in alone.inputs[0].diagnostics)
    named = analyze([str(tmp_path / "core")], options=Options(exe=str(tmp_path / "crash")))
    assert [f.symbol for f in named.cores[0].threads[0].frames[:3]] == ["lib_c", "lib_b", "lib_a"]
    done = subprocess.run([str(POSTMORTEM), "analyze", "--format", "json", "--exe", "crash", "core"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True)
    assert [f["symbol"] for f in json.loads(done.stdout)["cores"][0]["threads"][0]["frames"][:3]] == [
        "lib_c", "lib_b", "lib_a"]
    wrong = analyze([str(tmp_path / "core")], options=Options(exe=str(tmp_path / "libcrash.so")))
    assert not any(f.symbol == "lib_c" for f in wrong.cores[0].threads[0].frames)
    assert any("is not the program this core ran" in d for d in wrong.inputs[0].diagnostics)
