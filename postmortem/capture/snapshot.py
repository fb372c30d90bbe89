"""`postmortem snapshot PID...`: a hung job captured alive, into a case directory that `analyze` reads.

For each process: a core holding every thread's registers and stack and the pages its Python stacks were read
from (core/live.py, core/core_writer.py: the process is stopped for milliseconds and never killed), and its
state as /proc shows it (process.PID.json: each thread's scheduler state, wchan and kernel stack, the
/dev/nvidia* files it holds, its rank from the launcher's variables). Where PyTorch's debug pipe is armed
(TORCH_NCCL_DEBUG_INFO_PIPE_FILE), the process is asked for a fresh flight-recorder dump. For the node:
nvidia-smi with a short time limit (a hang of nvidia-smi is itself recorded), a few seconds of telemetry and
the kernel log of the last hour, as `collect` gathers them.

Environment variables whose values may be secrets, and the secrets of the command line, are blanked in the core
(same length, so nothing moves: `_blank_secrets`), and the process file's command line is redacted as `collect`
redacts text.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import json
import multiprocessing
import os
import socket
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import regex

from .. import __version__, later
from ..core import core_writer, live
from ..core.modules import ReadAs
from ..knowledge import data_rows
from ..outputs import NO_LINK_FLAGS, OutputError, create_in, make_case_folder
from ..safe_pickle import MAX_INPUT_BYTES
from .collect import Plan, gpu_pieces, save_redacted
from .redact import Redactor, blank_process_strings
from .run import job_kernel_log

FORMAT = "postmortem-snapshot/1"
PROCESS_FORMAT = "postmortem-process/1"
MANIFEST = "snapshot.json"
KERNEL_LOG_WINDOW = timedelta(hours=1)
DUMP_WAIT_S = 5.0
"""How long a process asked through its debug pipe may take to write its flight-recorder dump."""
DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
"""Where ProcessGroupNCCL writes a dump when TORCH_NCCL_DEBUG_INFO_TEMP_FILE is not set (torch >= 2.2)."""
MAX_DUMP = MAX_INPUT_BYTES
"""Largest flight-recorder dump copied into a case: the largest the reader takes (sources/flight_recorder.py)."""
MAX_KERNEL_STACK = 64
GPU_DEVICE = later.compile(r"^/dev/(?:nvidia|dri/|infiniband/)")
"""Device files whose holders use a GPU or an RDMA NIC (the evidence a driver hang needs)."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RankVariable:
    name: str
    meaning: str


@cache
def rank_variables() -> tuple[RankVariable, ...]:
    return tuple(RankVariable(row["name"], row["meaning"]) for row in data_rows("rank-variables.tsv"))


@cache
def launchers() -> tuple[tuple[regex.Pattern, str], ...]:
    return tuple((later.compile(row["pattern"]), row["launcher"]) for row in data_rows("launchers.tsv"))


@dataclass
class ProcessResult:
    """One process's snapshot, as printed and put in the manifest."""

    pid: int
    files: list[str] = field(default_factory=list)
    stopped_ms: float | None = None
    threads: int = 0
    python_threads: int = 0
    rank: dict[str, int] = field(default_factory=dict)
    waits: str | None = None
    """Where its main thread waits, in words (hang.thread_wait)."""
    never_stopped: list[int] = field(default_factory=list)
    """Its threads that were never stopped (state D): their registers and stacks are missing."""
    error: str | None = None


# ---------------------------------------------------------------- /proc

def _read(path: str, limit: int = 1 << 20) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def environment(pid: int) -> dict[str, str]:
    raw = _read(f"/proc/{pid}/environ", 4 << 20) or b""
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {name.decode("utf-8", "replace"): value.decode("utf-8", "replace") for name, value in pairs}


def command_line(pid: int) -> list[str]:
    raw = _read(f"/proc/{pid}/cmdline") or b""
    return [arg.decode("utf-8", "replace") for arg in raw.split(b"\0")[:-1]]


def rank_of(environ: dict[str, str]) -> dict[str, int]:
    """rank, local_rank, world_size, node_rank from the first launcher variable present for each."""
    found: dict[str, int] = {}
    for variable in rank_variables():
        value = environ.get(variable.name, "")
        if variable.meaning not in found and value.strip().isdigit():
            found[variable.meaning] = int(value)
    return found


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = live.stat_fields(name)
            if len(fields) > 1:
                tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def _launcher(pid: int) -> str | None:
    line = " ".join(command_line(pid))
    return next((name for pattern, name in launchers() if pattern.search(line)), None)


def job_processes(pids: Iterable[int]) -> list[int]:
    """The processes of the jobs the pids belong to: everything under the outermost launcher above each pid
    (torchrun, mpirun, srun: data/launchers.tsv), or under the pid itself when no launcher is above it; with
    no pid, the trees of every launcher on this node."""
    tree = _children()
    parent = {child: ppid for ppid, children in tree.items() for child in children}
    roots = []
    for pid in pids:
        root, at = pid, pid
        while at in parent and at > 1:
            at = parent[at]
            if _launcher(at):
                root = at
        roots.append(root)
    if not roots:
        outermost = [pid for pid in parent if _launcher(pid)]
        roots = [pid for pid in outermost if not any(_launcher(up) for up in _ancestors(pid, parent))]
    found: list[int] = []
    for root in roots:
        stack = [root]
        while stack:
            at = stack.pop()
            if at not in found:
                found.append(at)
                stack.extend(sorted(tree.get(at, []), reverse=True))
    return [pid for pid in found if pid != os.getpid()]


def _ancestors(pid: int, parent: dict[int, int]) -> Iterable[int]:
    while pid in parent and pid > 1:
        pid = parent[pid]
        yield pid


def process_state(pid: int, redactor: Redactor, environ: dict[str, str]) -> dict:
    """What /proc says of the process and each thread: the evidence of where a thread waits in the kernel."""
    status = (_read(f"/proc/{pid}/status") or b"").decode("utf-8", "replace")
    state = regex.search(r"(?m)^State:\s*(.+)$", status)
    threads = []
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()):
        fields = live.stat_fields(pid, tid)
        kernel = (_read(f"/proc/{pid}/task/{tid}/stack") or b"").decode("ascii", "replace").splitlines()
        threads.append({
            "tid": tid,
            "name": (_read(f"/proc/{pid}/task/{tid}/comm") or b"").decode("utf-8", "replace").strip(),
            "state": fields[0] if fields else None,
            "wchan": (_read(f"/proc/{pid}/task/{tid}/wchan") or b"").decode("ascii", "replace").strip() or None,
            "kernel_stack": [line.split("] ", 1)[-1] for line in kernel[:MAX_KERNEL_STACK]],
        })
    devices = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if GPU_DEVICE.match(target):
                    devices.add(target)
    except OSError:
        pass
    fields = live.stat_fields(pid)
    return {
        "file_locks": file_locks_awaited(pid, (_read("/proc/locks") or b"").decode("ascii", "replace")),
        "format": PROCESS_FORMAT,
        "pid": pid,
        "ppid": int(fields[1]) if len(fields) > 1 else None,
        "started": _started(fields),
        "host": socket.gethostname(),
        "command": [redactor.field(arg) for arg in command_line(pid)],
        "state": state[1].strip() if state else None,
        "uid": (owner := os.stat(f"/proc/{pid}")).st_uid,
        "gid": owner.st_gid,
        "rank": rank_of(environ),
        "launcher": _launcher(pid),
        "threads": threads,
        "devices": sorted(devices),
    }


_LOCK = later.compile(r"^(?P<id>\d+):\s+(?P<waits>->\s+)?(?P<kind>\S+)\s+\S+\s+(?P<type>\S+)\s+(?P<pid>\d+)\s+"
                      r"(?P<file>[0-9a-f]+:[0-9a-f]+:\d+)")
"""A line of /proc/locks (proc(5)): `1: POSIX  ADVISORY  WRITE 4567 08:01:1311 0 EOF`; a request blocked on it follows
with its own id and `->` (`1: -> POSIX  ADVISORY  WRITE 7890 08:01:1311 0 EOF`)."""


def file_locks_awaited(pid: int, table: str) -> list[dict]:
    """The file locks `pid` waits for, each with the pids that hold it: who a process stuck in fcntl or flock waits
    for."""
    held: dict[str, list[int]] = {}
    awaited: list[tuple[str, str, str, str]] = []
    for line in table.splitlines():
        if not (lock := _LOCK.match(line)):
            continue
        if lock["waits"]:
            if int(lock["pid"]) == pid:
                awaited.append((lock["id"], lock["kind"], lock["type"], lock["file"]))
        else:
            held.setdefault(lock["id"], []).append(int(lock["pid"]))
    return [{"kind": kind, "type": kind_type, "file": file, "holders": held.get(number, [])}
            for number, kind, kind_type, file in awaited]


STAT_STARTTIME = 19
"""Index of `starttime` (field 22 of proc(5)'s /proc/PID/stat: clock ticks after boot) in live.stat_fields."""


def _started(fields: list[str]) -> str | None:
    """When the process started (ISO, with the zone): the scope of its job (postmortem.scope) begins there, so an
    event of the node older than the job is not the job's."""
    boot = regex.search(rb"(?m)^btime (\d+)$", _read("/proc/stat") or b"")
    if boot is None or len(fields) <= STAT_STARTTIME or not fields[STAT_STARTTIME].isdigit():
        return None
    seconds = int(boot[1]) + int(fields[STAT_STARTTIME]) / os.sysconf("SC_CLK_TCK")
    return datetime.fromtimestamp(seconds).astimezone().isoformat(timespec="milliseconds")


# ---------------------------------------------------------------- one process

def _blank_secrets(taken: live.Stopped, pid: int) -> tuple[int, int]:
    """Blanks, in the kept pages, the secrets of the process's environment and argument blocks (same length, so
    nothing moves: redact.blank_process_strings); returns how many of each.

    The blocks lie at [arg_start, arg_end) and [env_start, env_end) of /proc/PID/stat (fields 48 to 51, Linux 3.5
    on); what of them the core does not hold is not in it."""
    fields = live.stat_fields(pid)
    if len(fields) < 49:
        return 0, 0
    arg_start, arg_end, env_start, env_end = (int(value) for value in fields[45:49])
    arguments, environment, hidden, in_arguments = blank_process_strings(
        _bytes_at(taken, arg_start, arg_end - arg_start), _bytes_at(taken, env_start, env_end - env_start))
    _write_at(taken, arg_start, arguments)
    _write_at(taken, env_start, environment)
    return hidden, in_arguments


def _bytes_at(taken: live.Stopped, addr: int, length: int) -> bytes:
    out = bytearray()
    while len(out) < length:
        page = (addr + len(out)) - (addr + len(out)) % live.PAGE
        data = taken.pages.get(page)
        if data is None:
            break
        out += data[addr + len(out) - page: addr + len(out) - page + length - len(out)]
    return bytes(out)


def _write_at(taken: live.Stopped, addr: int, data: bytes) -> None:
    while data:
        page = addr - addr % live.PAGE
        old = taken.pages.get(page)
        if old is None:
            return
        cut = min(len(data), live.PAGE - (addr - page))
        taken.pages[page] = old[: addr - page] + data[:cut] + old[addr - page + cut:]
        addr, data = addr + cut, data[cut:]


@dataclass
class _Taken:
    """A process stopped, copied and let go: what is left to do is to read its core's stacks and write its file."""

    result: ProcessResult
    state: dict
    core: Path | None = None
    read_as: ReadAs | None = None
    never_stopped: tuple[int, ...] = ()


def snapshot_process(pid: int, folder: Path, redactor: Redactor, budget: live.ByteBudget | None = None
                     ) -> ProcessResult:
    """The process's core and state in `folder`; a process that cannot be read is an error line, not an end.
    `budget`: the bytes of process memory the snapshot may still keep (the job's, shared by its processes)."""
    taken = _take_process(pid, folder, redactor, budget)
    return _finish_process(taken, folder, read_stacks(taken.core, taken.read_as) if taken.core else None)


STAT_EXIT_CODE = 49
"""Index in live.stat_fields of proc(5)'s field 52, exit_code: the status a dead process ended with, as waitpid(2)
reports it."""


def dead_process(pid: int) -> dict | None:
    """A process of the job that has ended but that its parent has not reaped (state Z): how it ended, from
    /proc/PID/stat (its memory, environment and command line are gone). None for a live process."""
    fields = live.stat_fields(pid)
    if not fields or fields[0] != "Z":
        return None
    status = int(fields[STAT_EXIT_CODE]) if len(fields) > STAT_EXIT_CODE and fields[STAT_EXIT_CODE].isdigit() else None
    ended = None
    if status is not None:
        ended = (f"killed by signal {status & 0x7F}" + (" (core dumped)" if status & 0x80 else "")
                 if status & 0x7F else f"exit status {status >> 8}")
    return {"format": PROCESS_FORMAT, "pid": pid, "ppid": int(fields[1]) if len(fields) > 1 else None,
            "started": _started(fields), "host": socket.gethostname(), "state": "Z (zombie)", "ended": ended,
            "rank": {}, "threads": [], "devices": []}


def _take_process(pid: int, folder: Path, redactor: Redactor, budget: live.ByteBudget | None) -> _Taken:
    """Stop the process, copy it, let it go, write its core (and ask it for a flight-recorder dump): the part a
    process waits for, done for every process of a job before any stack is read. A process that has already ended
    (a rank its launcher has not reaped yet) is written as how it ended."""
    result = ProcessResult(pid)
    if (dead := dead_process(pid)) is not None:
        result.waits = f"ended ({dead['ended'] or 'how is unknown'}); its parent has not reaped it"
        return _Taken(result, dead)
    try:
        environ = environment(pid)
        state = process_state(pid, redactor, environ)
        uid, groups = _ids(pid)
    except OSError as exc:
        result.error = f"process {pid}: {exc.strerror or exc}"
        return _Taken(result, {})
    result.rank = state["rank"]
    taken = _Taken(result, state, read_as=None if uid == os.geteuid() else ReadAs(uid, groups))
    try:
        copied = live.capture(pid, budget, taken.read_as)
    except live.LiveError as exc:
        result.error = str(exc)
        state["diagnostics"] = [str(exc)]
    else:
        result.stopped_ms = round(copied.stopped_s * 1000, 2)
        result.threads, result.python_threads = len(copied.threads), len(copied.python)
        result.never_stopped = copied.never_stopped
        blanked, in_arguments = _blank_secrets(copied, pid)
        command = state["command"]
        note = core_writer.ProcessNote(pid, state["ppid"] or 0, state["uid"], state["gid"],
                                       (command[0] if command else "?")[-15:], " ".join(command),
                                       {t["tid"]: t["name"] for t in state.get("threads") or [] if t.get("name")})
        core = folder / f"core.{pid}"
        try:
            handle = create_in(folder, core.name, 0o600)  # never over an earlier snapshot's
        except OutputError as exc:
            result.error = f"process {pid}: {exc}"
            taken.state = {}
            return taken
        with handle:
            core_writer.write(handle, copied, note)
        result.files.append(core.name)
        taken.core, taken.never_stopped = core, tuple(copied.never_stopped)
        state.update(stopped_ms=result.stopped_ms, core=core.name, environment_blanked=blanked,
                     arguments_blanked=in_arguments, diagnostics=list(copied.diagnostics))
    dump, refusal = _flight_recorder_dump(environ, folder, uid)
    if dump:
        result.files.append(dump)
        state["flight_recorder_dump"] = dump
    if refusal:
        state.setdefault("diagnostics", []).append(refusal)
    return taken


def _finish_process(taken: _Taken, folder: Path, stacks_read: tuple[list[dict], list[str]] | None
                    ) -> ProcessResult:
    """The process file: its state with the stacks read from its core, and where its main thread waits."""
    result, state = taken.result, taken.state
    if not state:
        return result
    if stacks_read is not None:
        stacks, notes = stacks_read
        pid = result.pid
        main = next((s for s in stacks if s["tid"] == pid),
                    stacks[0] if stacks and pid not in taken.never_stopped else None)  # a main thread gone: another
        if main is not None:
            from ..hang import thread_wait

            wait = thread_wait(main)
            result.waits = f"{wait.where}: {wait.meaning}"
        state["diagnostics"] = state.get("diagnostics", []) + notes
        state["stacks"] = stacks
    name = f"process.{result.pid}.json"
    try:
        _write_json(folder, name, state)
    except OutputError as exc:
        result.error = f"process {result.pid}: {exc}"
        return result
    result.files.append(name)
    return result


def _stacks_of(taken: list[_Taken]) -> dict[Path, tuple[list[dict], list[str]]]:
    """Every core's stacks, read in parallel once every process runs again (each core takes a second or so of DWARF
    reading; a job's processes share nothing while it is read); one at a time where a pool cannot start."""
    jobs = [(t.core, t.read_as) for t in taken if t.core is not None]
    if len(jobs) > 1:
        from ..core import analysis  # noqa: F401 - imported once here, inherited by every worker the pool forks

        try:
            workers = min(len(jobs), os.cpu_count() or 1)
            context = multiprocessing.get_context("fork")
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
                return dict(zip([core for core, _ in jobs], pool.map(_read_stacks_of, jobs), strict=True))
        except (OSError, concurrent.futures.process.BrokenProcessPool):
            pass
    return {core: read_stacks(core, read_as) for core, read_as in jobs}


def _read_stacks_of(job: tuple[Path, ReadAs | None]) -> tuple[list[dict], list[str]]:
    return read_stacks(*job)


def read_stacks(core: Path, read_as: ReadAs | None) -> tuple[list[dict], list[str]]:
    """Every thread's native and Python frames, read from the snapshot's core here, where the process's
    libraries are: the process file carries them to a machine that has none of those files. `read_as`: the
    process's user, as whom its libraries are read (`_ids`)."""
    from ..core.analysis import read_core
    from ..reader import FileReader

    with open(core, "rb") as handle:
        reader = FileReader(handle)
        found = read_core(reader.read_at, reader.size, str(core), core_dir=str(core.parent), read_as=read_as)
    if found.core is None:
        return [], found.diagnostics
    return [{"tid": thread.tid,
             "frames": [{"pc": f.pc, "module": f.module, "symbol": f.symbol, "file": f.file, "line": f.line}
                        for f in thread.frames],
             "python": [{"function": f.function, "file": f.file, "line": f.line} for f in thread.python_frames or ()],
             "python_locks": [{"address": lock.address, "kind": lock.kind, "frame": lock.frame}
                              for lock in thread.python_locks]}
            for thread in found.core.threads], found.diagnostics


def _ids(pid: int) -> tuple[int, frozenset[int]]:
    """The process's real user and its real and supplementary groups (/proc/PID/status): whose files it may name,
    and as whom its libraries are read, for the paths it names may be links it planted to files closed to it. Not
    the owner of /proc/PID, which is root for a process that made itself undumpable. OSError when it is gone."""
    status = Path(f"/proc/{pid}/status").read_text("ascii", "replace")
    found = {key: value.split() for key, _, value in (line.partition(":") for line in status.splitlines())}
    return int(found["Uid"][0]), frozenset(map(int, found["Gid"][:1] + found["Groups"]))


def _flight_recorder_dump(environ: dict[str, str], folder: Path, uid: int) -> tuple[str | None, str | None]:
    """Asks the process for a flight-recorder dump through the named pipe ProcessGroupNCCL watches
    (TORCH_NCCL_DEBUG_INFO_PIPE_FILE + rank + ".pipe"; the dump lands at TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank)
    and copies the dump into the case directory when one appears in time; a dump that lands in the directory
    above it (the case of `postmortem run --hang-after`, which points the dumps there) is named, not copied.

    The paths are the process's to choose, and the snapshot may run as root: the pipe and the dump are opened
    without following a link and judged on the open descriptor (`_open_owned`), so that no file of another user
    is written or copied. Returns the file (or None) and the refusal in words (or None)."""
    stem, rank = environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"), rank_of(environ).get("rank")
    if not stem or rank is None:
        return None, None
    pipe = f"{stem}{rank}.pipe"
    target = environ.get("TORCH_FR_DUMP_TEMP_FILE") or environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") \
        or DEFAULT_DUMP_PREFIX
    dump = f"{target}{rank}"
    before = _identity(dump)
    try:
        if not stat.S_ISFIFO(os.lstat(pipe).st_mode):  # nothing else is even opened (a device acts on open)
            return None, f"debug pipe {pipe}: refused: not a FIFO"
        fd, _ = _open_owned(pipe, os.O_WRONLY, uid, stat.S_ISFIFO, "a FIFO")  # ENXIO when nothing reads it
        try:
            os.write(fd, b"1\n")
        finally:
            os.close(fd)
    except _Refused as exc:
        return None, f"debug pipe {pipe}: refused: {exc}"
    except OSError:
        return None, None
    deadline = time.monotonic() + DUMP_WAIT_S
    while time.monotonic() < deadline:
        now = _identity(dump)
        if now is not None and now != before and now[2]:
            time.sleep(0.2)  # let the writer finish
            try:
                return _take_dump(dump, folder, uid), None
            except (_Refused, OutputError) as exc:
                return None, f"flight-recorder dump {dump}: refused: {exc}"
            except OSError as exc:
                return None, f"flight-recorder dump {dump}: not read: {exc.strerror or exc}"
        time.sleep(0.05)
    return None, None


class _Refused(Exception):
    """A file a process names that is not what it should be, or not its own; the sentence says why."""


def _identity(path: str) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of the name itself, a link not followed; None when absent."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _open_owned(path: str, flags: int, uid: int, kind: Callable[[int], bool], what: str) -> tuple[int, os.stat_result]:
    """`path` opened on behalf of a process of user `uid`: never through a link (O_NOFOLLOW), never blocking
    (a FIFO), and judged on the open descriptor, with no second open by name: it must be `what` and owned by
    `uid`. _Refused otherwise; OSError when it cannot be opened."""
    try:
        fd = os.open(path, flags | NO_LINK_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Refused("it is a symbolic link (never followed for a process)") from None
        raise
    st = os.fstat(fd)
    why = (f"not {what}" if not kind(st.st_mode)
           else f"owned by uid {st.st_uid}, not by the process's user (uid {uid})" if st.st_uid != uid else None)
    if why is not None:
        os.close(fd)
        raise _Refused(why)
    return fd, st


def _take_dump(dump: str, folder: Path, uid: int) -> str:
    """The dump, a regular file of the process's user of at most MAX_DUMP bytes, copied from the descriptor
    it was judged on (or named, when it lies beside the case folder); its name in the case."""
    fd, st = _open_owned(dump, os.O_RDONLY, uid, stat.S_ISREG, "a regular file")
    try:
        if st.st_size > MAX_DUMP:
            raise _Refused(f"{st.st_size} bytes, over the limit of {MAX_DUMP} bytes")
        if Path(os.path.realpath(os.path.dirname(os.path.abspath(dump)))) == folder.resolve().parent:
            return f"../{os.path.basename(dump)}"
        name = f"flight-recorder.{os.path.basename(dump)}"
        with create_in(folder, name) as handle:
            left = st.st_size
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                handle.write(chunk)
                left -= len(chunk)
        return name
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the case

def snapshot(folder: Path, pids: list[int], plan: Plan, progress: Progress = lambda message: None) -> dict:
    """Snapshots of the processes, then of the node; writes and returns the manifest. A folder that holds a
    snapshot already is refused (OutputError): one snapshot never writes over another."""
    if os.path.lexists(folder / MANIFEST):
        raise OutputError(f"{folder} already holds a snapshot ({MANIFEST}): choose another folder")
    folder = make_case_folder(folder)
    redactor = Redactor(plan.environ)
    budget = live.ByteBudget()
    taken = []
    for pid in pids:
        progress(f"process {pid}")
        taken.append(_take_process(pid, folder, redactor, budget))
    progress(f"the stacks of {sum(t.core is not None for t in taken)} process(es)")
    stacks = _stacks_of(taken)
    results = [_finish_process(t, folder, stacks.get(t.core) if t.core else None) for t in taken]
    progress("GPU state, telemetry and kernel log")
    pieces, gpu_state = gpu_pieces(plan)
    kernel, dropped = job_kernel_log(datetime.now() - KERNEL_LOG_WINDOW, set(pids), plan.timeout_s)
    if dropped:
        kernel.why = f"{dropped} line(s) about other processes' crashes left out"
    pieces.append(kernel)
    node = []
    for piece in pieces:
        saved, redacted = save_redacted(piece, folder, redactor)
        node.append({"path": saved.name if saved else None, "source": piece.source, "status": piece.status,
                     "seconds": piece.seconds, "redacted": redacted,
                     **({"why": redactor.field(piece.why)} if piece.why else {})})
    manifest = {
        "format": FORMAT,
        "tool": {"name": "postmortem", "version": __version__},
        "host": socket.gethostname(),
        "taken": datetime.now().astimezone().isoformat(timespec="seconds"),
        "gpu": redactor.field(gpu_state),
        "processes": [vars(result) for result in results],
        "node": node,
    }
    _write_json(folder, MANIFEST, manifest)
    return manifest


def _write_json(folder: Path, name: str, document: dict) -> None:
    """A new case file `name` holding `document` (create_in: nothing is written over; OutputError)."""
    with create_in(folder, name) as handle:
        handle.write((json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace"))
