"""`postmortem run -- CMD`: run a job with the evidence switched on, and explain its death.

The command runs (as the user typed it, found on their PATH) in its own process group with faulthandler, core dumps and
the NCCL flight recorder armed; its output reaches the terminal byte for byte
while a copy goes to the case directory. Signals sent to postmortem are passed
on to the job's group. When the job fails, the kernel log of its window and its
cores join the case directory and `analyze` reads all of it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO

from ..outputs import NO_LINK_FLAGS, OutputError, create_in, make_case_folder
from ..programs import find_program
from ..render.terminal import terminal_text
from ..sources.run_record import EMPTY_WINDOW, KERNEL_LOG_NOTE, run_settings
from .collect import (
    CHUNK,
    TELEMETRY_FIELDS,
    CoreSetup,
    Piece,
    core_setup,
    coredumpctl_pieces,
    kernel_log,
    save_piece,
)
from .tools import run_tool

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WINDOW_MARGIN_S = 5.0
"""The kernel log is read from this long before the start (a driver message can precede the job's first line)."""
COREDUMP_WAIT_S = 3.0
"""systemd-coredump registers a core a moment after the process died."""
SNAPSHOT_TIMEOUT_S = 300.0
"""Most time the hang snapshot may take (a few seconds a process, plus nvidia-smi's own time limit)."""
PUMP_GRACE_S = 10.0
"""How long output is still copied after the job exits (a worker it left behind may hold its pipes open)."""
STREAMS = {"stdout": "stdout.log", "stderr": "stderr.log"}
"""The job's streams as copied into the case directory; the run record names them (sources.run_record)."""
RECORD = "run.json"
TELEMETRY = "telemetry.csv"
CASE_FILES = (*STREAMS.values(), RECORD)
"""The files `run` makes in the case folder before the job starts (a name planted there stops it)."""
SANITIZER_PLACES = ("/usr/local/cuda/bin/compute-sanitizer", "/opt/cuda/bin/compute-sanitizer")


@dataclass
class RunOptions:
    command: list[str]
    out: Path | None = None
    telemetry_s: float = 5.0
    sanitizer: bool = False
    gpu_core: bool = False
    sync: bool = False
    hang_after_s: float = 0.0
    """Take a snapshot (capture/snapshot.py) when neither the job's output nor the GPUs' utilisation changed for
    this long; 0: never."""


class RunError(Exception):
    """The job could not be started as asked (no such command, no compute-sanitizer)."""


def armed_environment(environ: Mapping[str, str], case: Path, options: RunOptions) -> dict[str, str]:
    """The variables postmortem sets (data/run-environment.tsv): defaults the user's own settings override, and
    what the flags ask for. The run record lists them, so that the report tells them from the job's own."""
    asked = {"default": True, "--gpu-core": options.gpu_core, "--sync": options.sync,
             "--hang-after": options.hang_after_s > 0}
    return {setting.name: setting.value.replace("{case}", str(case)) for setting in run_settings()
            if asked[setting.when] and not (setting.when == "default" and setting.name in environ)}


def sanitizer_command(command: list[str]) -> list[str]:
    """The command under compute-sanitizer (memcheck), or RunError when it is not installed."""
    found = find_program("compute-sanitizer") or next((p for p in SANITIZER_PLACES if os.access(p, os.X_OK)), None)
    if found is None:
        raise RunError("--sanitizer: compute-sanitizer is not on PATH nor under /usr/local/cuda/bin "
                       "(it comes with the CUDA toolkit)")
    return [found, "--tool", "memcheck", *command]


def new_case_dir(out: Path | None, now: datetime) -> Path:
    """The case directory, as a real path no other user can put names into (`make_case_folder`): `out`, or
    postmortem-run-<time> in the working directory (never an existing one)."""
    if out is not None:
        return make_case_folder(out)
    base = Path(f"postmortem-run-{now:%Y%m%d-%H%M%S}")
    for n in range(1, 1000):
        case = base if n == 1 else Path(f"{base}-{n}")
        try:
            case.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(f"cannot make the case directory {case}: {exc.strerror or exc}") from None
        return make_case_folder(case)
    raise RunError(f"cannot make a case directory beside {base}")


def _say(message: str) -> None:
    """A progress line on stderr, through the terminal gate: it names the job's own files and functions."""
    print(terminal_text(f"postmortem: {message}"), file=sys.stderr, flush=True)


def run(options: RunOptions, say: Callable[[str], None] = _say) -> int:
    """Run the job; return its exit status (128 + N when killed by signal N)."""
    command = sanitizer_command(options.command) if options.sanitizer else list(options.command)
    started, t0 = datetime.now(), time.time()
    case = new_case_dir(options.out, started)
    armed = armed_environment(os.environ, case, options)
    setup = core_setup()
    say(f"case directory {case}; {_core_words(setup)}")
    files = _new_case_files(case, CASE_FILES)
    logs, record_file = files[:2], files[2]
    try:
        child = _spawn(command, {**os.environ, **armed}, logs)
    except RunError:
        _remove_case_files(case, files, CASE_FILES)
        with contextlib.suppress(OSError):
            case.rmdir()  # only when it is empty: nothing of the user's is removed
        raise
    sampler = _start_telemetry(case, options.telemetry_s, say)
    family = _Family(child.pid)
    watch = _HangWatch(options.hang_after_s, case, family, say)
    with _terminal_to(child.pid), _forwarding(child.pid), family, watch:
        pumps = [threading.Thread(target=_pump, args=(pipe, fd, log, watch.saw_output), daemon=True)
                 for pipe, fd, log in ((child.stdout, 1, logs[0]), (child.stderr, 2, logs[1]))]
        for pump in pumps:
            pump.start()
        returncode = child.wait()
        for pump in pumps:
            pump.join(PUMP_GRACE_S)
    for pump, log in zip(pumps, logs):
        if not pump.is_alive():
            log.close()
    _stop(sampler)
    status = returncode if returncode >= 0 else 128 - returncode
    record = {"command": command, "cwd": os.getcwd(), "pid": child.pid,
              "started": started.astimezone().isoformat(timespec="seconds"),
              "ended": datetime.now().astimezone().isoformat(timespec="seconds"), "exit_status": status,
              "signal_number": -returncode if returncode < 0 else None, "environment_set": armed,
              "streams": STREAMS, "cores": setup.describe(), "telemetry": "sampled" if sampler else "not sampled"}
    if watch.taken:
        record["hang_snapshot"] = watch.taken
    if status != 0:
        record["collected"] = _gather(case, started, t0, child.pid, family.pids, setup, say)
    with record_file:
        record_file.write((json.dumps(record, indent=2) + "\n").encode("utf-8", "backslashreplace"))
    if status != 0 or watch.taken:
        _explain(case, status, returncode, say)
    return status


def _core_words(setup: CoreSetup) -> str:
    limit = resource.getrlimit(resource.RLIMIT_CORE)[1]
    if limit == 0:
        return "core dumps are off (hard limit 0; `ulimit -Hc` must be raised by root)"
    return setup.describe()


def _new_case_files(case: Path, names: Sequence[str]) -> list[BinaryIO]:
    """The named files made new in the case folder (`create_in`), all or none: OutputError names the first that
    cannot be (a name the folder holds already, a planted link included), and the others are removed."""
    made: list[BinaryIO] = []
    try:
        for name in names:
            made.append(create_in(case, name))
    except OutputError:
        _remove_case_files(case, made, names)
        raise
    return made


def _remove_case_files(case: Path, handles: list[BinaryIO], names: Sequence[str]) -> None:
    """The files `_new_case_files` made closed and removed again (a job that never ran leaves nothing)."""
    for handle, name in zip(handles, names):
        handle.close()
        with contextlib.suppress(OSError):
            os.unlink(case / name)


def _spawn(command: list[str], env: dict[str, str], logs: list[BinaryIO]) -> subprocess.Popen:
    """Start the job in its own process group with the core size limit raised to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))  # inherited by the child, restored right after
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                process_group=0)
    except OSError as exc:
        raise RunError(f"cannot run {command[0]}: {exc.strerror or exc}") from exc
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def _pump(pipe: BinaryIO, terminal: int, log: BinaryIO, seen: Callable[[], None]) -> None:
    """Copy the job's stream to our own and to the log, unchanged; a closed terminal does not stop the log."""
    to_terminal = True
    while chunk := os.read(pipe.fileno(), 65536):
        seen()
        if to_terminal:
            try:
                _write_all(terminal, chunk)
            except OSError:
                to_terminal = False
        log.write(chunk)
        log.flush()
    pipe.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@contextlib.contextmanager
def _forwarding(pgid: int) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP sent to postmortem go to the job's process group instead."""
    def forward(signum: int, _frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _terminal_to(pgid: int) -> Iterator[None]:
    """On an interactive terminal, the job's group becomes the foreground: it may read the keyboard, gets Ctrl-C."""
    try:
        ours = os.getpgrp()
        owner = os.tcgetpgrp(0) if os.isatty(0) else None
    except OSError:
        owner = None
    if owner != ours:
        yield
        return
    with _ignoring(signal.SIGTTOU):
        os.tcsetpgrp(0, pgid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGCONT)  # in case it tried to read before it owned the terminal
    try:
        yield
    finally:
        with _ignoring(signal.SIGTTOU), contextlib.suppress(OSError):
            os.tcsetpgrp(0, ours)


@contextlib.contextmanager
def _ignoring(sig: int) -> Iterator[None]:
    previous = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(sig, previous)


def _start_telemetry(case: Path, interval_s: float, say: Callable[[str], None]) -> subprocess.Popen | None:
    """nvidia-smi sampling into telemetry.csv for as long as the job runs, when nvidia-smi is installed."""
    nvidia_smi = find_program("nvidia-smi")
    if interval_s <= 0 or nvidia_smi is None:
        return None
    loop = ["-lms", str(max(1, int(interval_s * 1000)))] if interval_s < 1 else ["-l", str(int(interval_s))]
    try:
        out = create_in(case, TELEMETRY)
    except OutputError as exc:
        say(f"telemetry not sampled: {exc}")
        return None
    with out:
        return subprocess.Popen([nvidia_smi, f"--query-gpu={TELEMETRY_FIELDS}", "--format=csv", *loop],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL, start_new_session=True)


def _stop(sampler: subprocess.Popen | None) -> None:
    if sampler is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(sampler.pid, signal.SIGTERM)
    try:
        sampler.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(sampler.pid, signal.SIGKILL)
        sampler.wait()


def _gather(case: Path, started: datetime, t0: float, pid: int, family: set[int], setup: CoreSetup,
            say) -> list[str]:
    """The kernel log of the run's window and the job's cores, into the case directory; what happened, in words."""
    notes = []
    kernel, dropped = job_kernel_log(started - timedelta(seconds=WINDOW_MARGIN_S), family, 30.0)
    if dropped:
        notes.append(f"kernel log: {dropped} line(s) about other processes' crashes left out")
    saved = save_piece(kernel, case)
    notes.append(f"kernel log: {kernel.source}" if saved else f"kernel log: not collected ({kernel.why})")
    if saved is not None or kernel.exit_status == 0:  # read over the window: saved, or nothing in it
        notes.append(f"{KERNEL_LOG_NOTE}{saved.name if saved is not None else EMPTY_WINDOW}")
    if setup.handler and "systemd-coredump" in setup.handler:
        notes.extend(_systemd_cores(case, started, pid))
    elif setup.handler:
        notes.append(f"cores: piped to {setup.handler}; find the core there")
    else:
        for core in setup.files([Path.cwd()], t0 - 1):
            notes.append(f"core: {core} -> {_link_or_copy(core, case / core.name)}")
    for note in notes:
        say(note)
    return notes


_PROCESS_FAULT = re.compile(r"(?<!\S)\S+\[(\d+)\]:? (?:segfault at|general protection|trap )|traps: \S+\[(\d+)\]")
"""A kernel line about one user process's crash: `name[pid]: segfault at ...`."""


def job_kernel_log(since: datetime, family: set[int], timeout: float) -> tuple[Piece, int]:
    """The kernel log since `since` without other processes' crashes (`job_lines`), and how many lines that left
    out: on a shared node, another program's segfault is not the job's."""
    kernel = kernel_log(since, timeout)
    if kernel.reader is None:
        return kernel, 0
    kept, dropped = job_lines(kernel.reader.read_at(0, kernel.reader.size).decode("utf-8", "replace"), family)
    return Piece.text(kernel.name, kernel.source, kept), dropped


def job_lines(text: str, family: set[int]) -> tuple[str, int]:
    """The kernel log without other processes' crashes (GPU, bus and memory messages all stay); lines dropped."""
    kept, dropped = [], 0
    for line in text.splitlines(keepends=True):
        fault = _PROCESS_FAULT.search(line)
        if fault and int(fault.group(1) or fault.group(2)) not in family:
            dropped += 1
        else:
            kept.append(line)
    return "".join(kept), dropped


class _Family:
    """The job's process and every descendant seen while it runs (polled from /proc), to tell its crashes
    from other processes' in the kernel log."""

    POLL_S = 0.5

    def __init__(self, pid: int):
        self.pids = {pid}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> _Family:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(2 * self.POLL_S)

    def _watch(self) -> None:
        while not self._stop.wait(self.POLL_S):
            parents = {}
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        stat = Path(entry.path, "stat").read_text()
                        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
            grew = True
            while grew:
                grew = False
                for child, parent in parents.items():
                    if parent in self.pids and child not in self.pids:
                        self.pids.add(child)
                        grew = True


class _HangWatch:
    """Takes one snapshot of the job's processes (capture/snapshot.py, into CASE/hang-snapshot) when for
    `after_s` seconds the job wrote nothing and the GPUs' utilisation (telemetry.csv, when nvidia-smi samples it)
    did not change: a job that stopped moving. The job goes on; the snapshot never stops it for more than
    milliseconds.

    A job that used CPU meanwhile may be computing silently, or spinning in a wait (NCCL and CUDA poll while they
    wait): CPU time alone cannot tell. Its snapshot says where each process's main thread is: when every one runs
    code that is no known wait (hang.thread_wait: "running"), the job is moving, the snapshot is set aside and the
    watch goes on (and its snapshot is dropped); otherwise it is the hang's snapshot."""

    def __init__(self, after_s: float, case: Path, family: _Family, say: Callable[[str], None]):
        self.after_s, self.case, self.family, self.say = after_s, case, family, say
        self.last_change = time.monotonic()
        self.cpu_at_change = -1.0
        """The job's CPU seconds at the last change (-1: read it at the next look)."""
        self.busy_checks = 0
        self.taken: str | None = None
        self._utilisation: tuple[str, ...] = ()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def saw_output(self) -> None:
        self.last_change = time.monotonic()
        self.cpu_at_change = -1.0  # read again at the next look: reading /proc on every line would cost the job

    def __enter__(self) -> _HangWatch:
        if self.after_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(min(5.0, max(0.2, self.after_s / 10))):
            utilisation = _latest_utilisation(self.case / TELEMETRY)
            if utilisation != self._utilisation:
                self._utilisation, self.last_change = utilisation, time.monotonic()
                self.cpu_at_change = -1.0
            if self.cpu_at_change < 0:
                self.cpu_at_change = _cpu_seconds(self.family.pids)
            if time.monotonic() - self.last_change >= self.after_s:
                used = _cpu_seconds(self.family.pids) - self.cpu_at_change
                if not _alive(self.family.pids):  # the job ended (before or while its CPU time was read, which a
                    return  # process gone counts as none): a job that ends is no hang
                if used < BUSY_SHARE * self.after_s or self.busy_checks >= MAX_BUSY_CHECKS:
                    self._snapshot("hang-snapshot", f"no output and no change in GPU utilisation for "
                                                    f"{self.after_s:g} s")
                    return
                self.busy_checks += 1
                if self._snapshot(f"busy-check-{self.busy_checks}", f"no output for {self.after_s:g} s, but "
                                  f"the job used {used:.1f} s of CPU: looking where it runs"):
                    return
                self.last_change, self.cpu_at_change = time.monotonic(), -1.0

    def _snapshot(self, name: str, why: str) -> bool:
        """`postmortem snapshot` in a process of its own: the job is this process's child, and a parent waiting
        for its child would be told the child's ptrace stops, which are the snapshot's to see. True when it is the
        hang's (kept as CASE/hang-snapshot); a busy check whose processes all run code is set aside as moving."""
        pids = sorted(pid for pid in self.family.pids if os.path.exists(f"/proc/{pid}"))
        self.say(f"{why}: taking a snapshot of {len(pids)} process(es); the job goes on (Ctrl-C stops it)")
        folder = self.case / name
        if os.path.lexists(folder) or os.path.lexists(self.case / "hang-snapshot"):  # planted: never followed
            self.say(f"no snapshot taken: {folder} exists already")
            return True
        done = run_tool([sys.executable, "-m", "postmortem", "snapshot", *map(str, pids), "-o", str(folder),
                         "--telemetry", "3s"], SNAPSHOT_TIMEOUT_S)
        for line in done.errors.splitlines():
            if "stopped" in line or not done.ok:
                self.say(line.removeprefix("postmortem: "))
        if not (folder / "snapshot.json").exists():
            return True
        if not _alive(self.family.pids):  # it ended while it was looked at: a job that ends was not hung
            self.say("the job ended while its snapshot was taken: no hang")
            shutil.rmtree(folder, ignore_errors=True)
            return True
        if name != "hang-snapshot":
            running = _all_running(folder)
            if running:
                self.say(f"every process runs code, in {running}: the job is moving; the watch goes on")
                shutil.rmtree(folder, ignore_errors=True)  # a moving job's stacks (and cores) are no evidence
                return False
            folder.rename(self.case / "hang-snapshot")
        self.taken = "hang-snapshot"
        return True


BUSY_SHARE = 0.5
"""Share of one core the job's processes must have used over the quiet time for it to be looked at as busy."""
MAX_BUSY_CHECKS = 20
"""Busy checks before a job quiet that long is snapshot as hung whatever it runs (a spin the table does not know)."""


def _alive(pids: Iterable[int]) -> list[int]:
    """The processes that have not ended (neither gone nor a zombie waiting to be reaped)."""
    from ..core.live import stat_fields

    return [pid for pid in list(pids) if (fields := stat_fields(pid)) and fields[0] != "Z"]


def _cpu_seconds(pids: Iterable[int]) -> float:
    """User and system CPU time of the processes, from /proc/PID/stat (a process gone counts nothing)."""
    from ..core.live import stat_fields

    total = 0
    for pid in list(pids):
        with contextlib.suppress(ValueError, IndexError):
            fields = stat_fields(pid)
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _all_running(folder: Path) -> str | None:
    """Where the main threads of a snapshot's processes run, when none of them waits (hang.thread_wait); else None."""
    from ..hang import thread_wait
    from ..sources.process_snapshot import with_kernel_waits

    places = []
    for path in sorted(folder.glob("process.*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            state = json.loads(path.read_text(encoding="utf-8"))
            threads = with_kernel_waits([t for t in state.get("stacks") or [] if isinstance(t, dict)],
                                        [t for t in state.get("threads") or [] if isinstance(t, dict)])
            main = next((t for t in threads if t.get("tid") == state.get("pid")), None)
            if main is None:
                return None
            wait = thread_wait(main)
            if wait.kind != "running":
                return None
            places.append(wait.where)
    return ", ".join(dict.fromkeys(places)) if places else None


def _latest_utilisation(telemetry: Path) -> tuple[str, ...]:
    """The utilization.gpu values of the last sample of every GPU in telemetry.csv (TELEMETRY_FIELDS' order)."""
    column = TELEMETRY_FIELDS.split(",").index("utilization.gpu")
    try:
        with open(os.open(telemetry, os.O_RDONLY | NO_LINK_FLAGS), "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 16384))
            lines = handle.read().decode("utf-8", "replace").splitlines()[1:]
    except OSError:
        return ()
    latest: dict[str, str] = {}
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) > column and cells[1].isdigit():
            latest[cells[1]] = cells[column]
    return tuple(latest[index] for index in sorted(latest))


def _systemd_cores(case: Path, started: datetime, pid: int) -> list[str]:
    deadline = time.monotonic() + COREDUMP_WAIT_S
    while True:
        pieces = coredumpctl_pieces(started - timedelta(seconds=WINDOW_MARGIN_S), 30.0, pid)
        if len(pieces) > 1 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    notes = [f"coredumpctl: {piece.name} {'saved' if save_piece(piece, case) else 'not saved: ' + piece.why}"
             for piece in pieces[1:]]
    return notes or [f"coredumpctl: no core of pid {pid} ({pieces[0].why or pieces[0].status})"]


def _link_or_copy(source: Path, target: Path) -> str:
    """A hard link when the core is on the same file system (no second copy of gigabytes), a copy otherwise; in
    words. The core is opened without following a link and linked or copied from that descriptor, and the case's
    name is always a new file: a link planted at either end is refused."""
    try:
        fd = os.open(source, os.O_RDONLY | NO_LINK_FLAGS)
    except OSError as exc:
        return f"not taken: {exc.strerror or exc}" + (" (a symbolic link)" if exc.errno == errno.ELOOP else "")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not taken: not a regular file"
        if os.path.lexists(target):
            target = target.with_name(f"{target.name}.{int(time.time())}")
        try:
            os.link(f"/proc/self/fd/{fd}", target)  # the opened file, whatever its name now points to
            return str(target)
        except FileExistsError:
            return f"not taken: {target} exists already"
        except OSError:
            pass
        with open(fd, "rb", closefd=False) as core, create_in(target.parent, target.name, 0o600) as copy:
            shutil.copyfileobj(core, copy, CHUNK)
        return str(target)
    except OutputError as exc:
        return f"not taken: {exc}"
    finally:
        os.close(fd)


def _explain(case: Path, status: int, returncode: int, say) -> None:
    """Analyse the case directory and print the verdict on stderr (stdout stays the job's)."""
    from ..pipeline import analyze
    from ..render import FORMATS, default_language

    how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with status {status}"
    say(f"the command {how}; analysing {case}")
    report = analyze([str(case)])
    color = not os.environ.get("NO_COLOR") and sys.stderr.isatty()
    sys.stderr.write(FORMATS["text"](report, lang=default_language(), color=color))
    say(f"evidence kept in {case} (postmortem analyze {case} --format html -o report.html)")
