"""`postmortem collect`: the evidence of one machine in one redacted bundle that `analyze` reads.

Each step asks one tool or file for one thing, under a time limit, and answers
with a `Piece`: the bytes it got, or why it got none (not installed, no
permission, timed out, nothing in the window). No step can stop the others; a
machine without GPU or `nvidia-smi` simply has its GPU pieces marked missing.
Every piece is redacted on the way into the tarball, its name and the
manifest too, except ELF cores (CPU cores and CUDA GPU dumps), which are
process memory: they are stored as they are, but for the secrets of their
process's environment and command line, blanked as `snapshot` blanks them
(`_blanked_core`), and marked so in the manifest. Whatever a piece's name or
source, only its first bytes decide that.
"""

from __future__ import annotations

import bisect
import json
import os
import platform
import re
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO

from .. import __version__
from ..outputs import Output, OutputError, create_in, write_output
from ..programs import find_program
from ..reader import ByteReader, FileReader
from .redact import LOOKBEHIND, UNFINISHED, Redactor, blank_process_strings, environment_listing
from .tools import DEFAULT_TIMEOUT_S, Outcome, run_tool

MANIFEST = "manifest.json"
BUNDLE_FORMAT = "postmortem-bundle/1"
MAX_TEXT = 512 << 20
"""Most bytes of one text file put in a bundle (a longer log is cut, and the manifest says so)."""
CHUNK = 1 << 20
MAX_LINE = 64 << 10
"""Longest unfinished line held back while reading: a longer one (binary data without newlines) is redacted in
pieces cut after a space or NUL byte, so memory stays bounded by CHUNK + MAX_LINE. Every secret pattern looks at
most 4 KiB ahead (data/secret-shapes.tsv), so redaction costs at most the text's length times that bound."""
MAX_OLDER_BOOTS = 5
"""Earlier boots whose NVIDIA kernel lines are kept (the journal may hold hundreds)."""
TORCH_TIMEOUT_S = 90.0
"""`import torch` alone can take tens of seconds on a cold network file system."""
DUMP_TIMEOUT_S = 300.0
"""`coredumpctl dump` of a multi-gigabyte core."""
TELEMETRY_FIELDS = ("timestamp,index,name,pci.bus_id,pstate,temperature.gpu,utilization.gpu,utilization.memory,"
                    "memory.used,memory.total,power.draw,power.limit,clocks.sm,clocks_throttle_reasons.active")
OLDER_BOOT_LINES = re.compile(r"NVRM|nvidia|NVSwitch|nvswitch|Xid|Linux version")
"""What is kept from earlier boots: the NVIDIA driver's lines and each boot's first line."""
BINARY_NOTE = "not redacted: an ELF core (process memory, which may include secrets)"


@dataclass
class Piece:
    """One thing collected, or the reason it could not be."""

    name: str
    """Path inside the bundle."""
    source: str
    """The command or file it came from."""
    status: str
    reader: ByteReader | None = None
    exit_status: int | None = None
    seconds: float | None = None
    binary: bool = False
    """A core or GPU dump: held to --core-limit-mb (whether it is stored unredacted is read from its bytes)."""
    why: str = ""
    """Why nothing (or not everything) was collected, in words."""
    pre_redacted: Counter = field(default_factory=Counter)

    @classmethod
    def of(cls, name: str, outcome: Outcome, why: str = "") -> Piece:
        """A piece from a tool run: its output when it has some, its failure in words otherwise."""
        size = outcome.output.seek(0, os.SEEK_END) if outcome.output is not None else 0
        reader = FileReader(outcome.output) if outcome.output is not None and size else None
        if not why and not outcome.ok:
            why = outcome.errors.splitlines()[-1] if outcome.errors else outcome.status
        elif not why and not size:
            why = "no output"
        return cls(name, outcome.command, outcome.status, reader, outcome.returncode, outcome.seconds, why=why)

    @classmethod
    def text(cls, name: str, source: str, text: str, **extra) -> Piece:
        """A piece made here; empty text is no file, and `why` should say why it is empty."""
        from ..reader import BytesReader

        return cls(name, source, "ok", BytesReader(text.encode("utf-8")) if text else None, **extra)

    @classmethod
    def missing(cls, name: str, source: str, status: str, why: str) -> Piece:
        return cls(name, source, status, why=why)


@dataclass
class Plan:
    """What to collect: the window, the user's paths, the limits."""

    since: datetime
    paths: tuple[str, ...] = ()
    telemetry_s: float = 5.0
    core_limit: int = 2 << 30
    timeout_s: float = DEFAULT_TIMEOUT_S
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    skip: frozenset[str] = frozenset()
    """Absolute paths never collected (the bundle being written)."""


# ---------------------------------------------------------------- durations

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1, None: 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds in "90s", "5m", "2h", "1d", "500ms" or a bare number of seconds; ValueError otherwise."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (examples: 30s, 15m, 2h, 1d)")
    return float(match[1]) * _UNIT_S[match[2]]


def parse_since(text: str, now: datetime) -> datetime:
    """The window's start from a duration ("2h") or a local date and time ("2025-01-31 14:00")."""
    try:
        return now - timedelta(seconds=parse_duration(text))
    except ValueError:
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"--since {text!r}: give a duration (2h, 30m) or a date and time "
                             "(2025-01-31 14:00)") from None


# ---------------------------------------------------------------- kernel log

_UPTIME_STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")


def kernel_log(since: datetime, timeout: float, name: str = "system/kernel.log") -> Piece:
    """The kernel log of the window: the journal when it has entries, else the ring buffer (dmesg) cut to the window."""
    journal = run_tool(["journalctl", "-k", "--since", since.strftime("%Y-%m-%d %H:%M:%S"), "--no-pager",
                        "-o", "short-iso"], timeout)
    if journal.ok and _journal_has_entries(journal.text(64 * 1024)):
        return Piece.of(name, journal)
    why_not_journal = f"journalctl: {_why(journal, 'no kernel entries in the window (no persistent journal?)')}"
    dmesg = run_tool(["dmesg"], timeout)
    if not dmesg.ok:
        return Piece.missing(name, "journalctl -k, then dmesg", dmesg.status,
                             f"{why_not_journal}; dmesg: {_why(dmesg, dmesg.status)}")
    kept = _dmesg_since(dmesg.text(), _uptime_at(since))
    return Piece.text(name, f"dmesg (lines of the window; {why_not_journal})", kept,
                      exit_status=0, seconds=dmesg.seconds, why="" if kept else "no kernel lines in the window")


def _why(outcome: Outcome, default: str) -> str:
    if outcome.ok:
        return default
    return outcome.errors.splitlines()[-1] if outcome.errors else outcome.status


def _journal_has_entries(head: str) -> bool:
    return any(line and not line.startswith("-- ") for line in head.splitlines())


def _uptime_at(moment: datetime) -> float:
    """Seconds since boot at `moment` (0 when /proc/uptime cannot be read: keep everything)."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return uptime - (datetime.now() - moment).total_seconds()


def _dmesg_since(text: str, cutoff: float) -> str:
    """Lines stamped at or after `cutoff` seconds since boot, with the unstamped lines that follow them."""
    kept, keeping = [], False
    for line in text.splitlines(keepends=True):
        stamp = _UPTIME_STAMP.match(line)
        if stamp is not None:
            keeping = float(stamp[1]) >= cutoff
        if keeping:
            kept.append(line)
    return "".join(kept)


def older_boots(timeout: float) -> Piece:
    """NVIDIA driver lines of earlier boots the journal still holds (an Xid before the last reboot)."""
    name = "system/kernel-older-boots.log"
    listing = run_tool(["journalctl", "--list-boots", "--no-pager"], timeout)
    if not listing.ok:
        return Piece.of(name, listing)
    offsets = sorted((int(m[1]) for m in re.finditer(r"(?m)^\s*(-\d+)\s+\w", listing.text())), reverse=True)
    if not offsets:
        return Piece.missing(name, listing.command, "ok", "the journal keeps no earlier boot")
    blocks, commands = [], []
    for offset in offsets[:MAX_OLDER_BOOTS]:
        boot = run_tool(["journalctl", "-k", "-b", str(offset), "--no-pager", "-o", "short-iso"], timeout)
        commands.append(boot.command)
        lines = [line for line in boot.text().splitlines(keepends=True) if OLDER_BOOT_LINES.search(line)]
        blocks.append(f"-- boot {offset} ({boot.status}) --\n" + "".join(lines))
    return Piece.text(name, "; ".join(commands), "".join(blocks))


# ---------------------------------------------------------------- GPU

def gpu_pieces(plan: Plan) -> tuple[list[Piece], str]:
    """nvidia-smi report, telemetry and topology, the driver's version file, lspci; and the GPU state in words."""
    pieces = [_file_piece("gpu/driver-version.txt", "/proc/driver/nvidia/version",
                          "no NVIDIA kernel module loaded (no /proc/driver/nvidia/version)"),
              Piece.of("system/lspci-nvidia.txt", run_tool(["lspci", "-vvv", "-d", "10de:"], plan.timeout_s))]
    if find_program("nvidia-smi", plan.environ) is None:
        why = "nvidia-smi not installed: no GPU state, telemetry or topology from this machine"
        for name, command in (("gpu/nvidia-smi-q.xml", "nvidia-smi -q -x"),
                              ("gpu/telemetry.csv", "nvidia-smi --query-gpu"),
                              ("gpu/topology.txt", "nvidia-smi topo -m")):
            pieces.append(Piece.missing(name, command, "not installed", why))
        return pieces, why
    sampler: list[Outcome] = []
    thread = threading.Thread(target=lambda: sampler.append(run_tool(
        ["nvidia-smi", f"--query-gpu={TELEMETRY_FIELDS}", "--format=csv", "-l", "1"],
        plan.telemetry_s, sampler=True, env=plan.environ)), daemon=True)
    if plan.telemetry_s > 0:
        thread.start()
    report = run_tool(["nvidia-smi", "-q", "-x"], plan.timeout_s, env=plan.environ)
    pieces.append(Piece.of("gpu/nvidia-smi-q.xml", report))
    pieces.append(Piece.of("gpu/topology.txt",
                           run_tool(["nvidia-smi", "topo", "-m"], plan.timeout_s, env=plan.environ)))
    if plan.telemetry_s > 0:
        thread.join()
        pieces.append(Piece.of("gpu/telemetry.csv", sampler[0]))
    state = "nvidia-smi answered" if report.ok else f"nvidia-smi failed: {pieces[2].why}"
    return pieces, state


def _file_piece(name: str, path: str, why_missing: str) -> Piece:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return Piece.missing(name, path, "absent", why_missing)
    except OSError as exc:
        return Piece.missing(name, path, "unreadable", exc.strerror or str(exc))
    from ..reader import BytesReader

    return Piece(name, path, "ok", BytesReader(data), why="" if data else "empty")


# ---------------------------------------------------------------- software stack

RELEVANT_PACKAGES = re.compile(
    r"^(torch.*|jax.*|tensorflow.*|tf-.*|keras|nvidia-.*|triton.*|vllm.*|xformers|flash[-_]attn.*|deepspeed|"
    r"accelerate|transformers|cupy.*|numpy|apex|bitsandbytes|onnxruntime.*|tensorrt.*|paddlepaddle.*|mxnet.*|"
    r"megatron.*|sglang|nccl.*|cuda-python|pynvml|nvidia_.*)$", re.IGNORECASE)

TORCH_PROBE = """
import json, torch
info = {"torch": torch.__version__, "torch.version.cuda": torch.version.cuda}
for key, get in (("cudnn", lambda: torch.backends.cudnn.version()), ("arch_list", torch.cuda.get_arch_list),
                 ("cuda_available", torch.cuda.is_available), ("nccl", lambda: torch.cuda.nccl.version())):
    try:
        info[key] = get()
    except Exception as exc:
        info[key] = "error: %s" % exc
if info.get("cuda_available") is True:
    info["devices"] = ["%s sm_%d%d" % ((torch.cuda.get_device_name(i),) + torch.cuda.get_device_capability(i))
                       for i in range(torch.cuda.device_count())]
print(json.dumps(info))
"""


ISOLATED = ("-I",)
"""Probes first run the interpreter isolated: no script directory or working directory on sys.path, no PYTHON*
variables, no user site. (run_tool already starts them in an empty directory.)"""


def software_pieces(plan: Plan) -> list[Piece]:
    """OS, kernel and Python, the GPU-relevant packages and what torch says about its CUDA build."""
    python = find_program("python3", plan.environ) or sys.executable
    stack = [f"os: {_os_release()}", f"kernel: {platform.release()} ({platform.version()})",
             f"machine: {platform.machine()}", f"python (probed): {python}",
             f"postmortem python: {sys.version.split()[0]} ({sys.executable})"]
    torch, flags, how = _torch_probe(python, plan)
    stack.append(f"python probes: {how}")
    pieces = [Piece.text("software/stack.txt", "platform, /etc/os-release", "".join(line + "\n" for line in stack))]
    packages = run_tool([python, *flags, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                        plan.timeout_s, env=plan.environ)
    if packages.ok:
        try:
            found = [f"{p['name']}=={p['version']}\n" for p in json.loads(packages.text())
                     if RELEVANT_PACKAGES.match(p.get("name", ""))]
            pieces.append(Piece.text("software/packages.txt", packages.command, "".join(found), exit_status=0,
                                     seconds=packages.seconds, why="" if found else "no GPU-related package installed"))
        except (ValueError, TypeError, KeyError):
            pieces.append(Piece.missing("software/packages.txt", packages.command, "unreadable", "pip printed no JSON"))
    else:
        pieces.append(Piece.of("software/packages.txt", packages))
    source = f"{python} {' '.join(flags)} -c 'import torch; ...'".replace("  ", " ")
    if torch.ok:
        pieces.append(Piece.text("software/torch.txt", source, _torch_lines(torch.text()), exit_status=0,
                                 seconds=torch.seconds, why="" if flags else how))
    else:
        why = "torch does not import here" if "No module named 'torch'" in torch.errors else _why(torch, torch.status)
        pieces.append(Piece.missing("software/torch.txt", source, torch.status, why))
    listing, hidden = environment_listing(plan.environ)
    pieces.append(Piece.text("software/environment.txt", "environment of `postmortem collect`", listing,
                             pre_redacted=Counter({"env-value": hidden} if hidden else {})))
    return pieces


def _torch_probe(python: str, plan: Plan) -> tuple[Outcome, tuple[str, ...], str]:
    """The torch probe isolated; when torch imports only with the job's PYTHONPATH or user site, again with them.

    Both runs start in an empty directory, so the working directory's files are
    never imported either way. Returns the outcome, the flags the other probes
    should use, and in words how the interpreter was run."""
    isolated = run_tool([python, *ISOLATED, "-c", TORCH_PROBE], TORCH_TIMEOUT_S, env=plan.environ)
    if isolated.ok or "No module named 'torch'" not in isolated.errors:
        return isolated, ISOLATED, "isolated (python3 -I, in an empty directory)"
    with_environment = run_tool([python, "-c", TORCH_PROBE], TORCH_TIMEOUT_S, env=plan.environ)
    if not with_environment.ok:
        return isolated, ISOLATED, "isolated (python3 -I, in an empty directory)"
    return with_environment, (), ("with the job's PYTHONPATH and user site, in an empty directory: torch does not "
                                  "import with python3 -I")


def _torch_lines(output: str) -> str:
    try:
        info = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return output
    return "".join(f"{key}: {' '.join(map(str, value)) if isinstance(value, list) else value}\n"
                   for key, value in info.items())


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


# ---------------------------------------------------------------- crash files

@dataclass(frozen=True)
class CoreSetup:
    """Where the kernel puts cores: /proc/sys/kernel/core_pattern in words and as a file pattern."""

    pattern: str
    handler: str | None
    """The program cores are piped to (systemd-coredump, apport, ...), None when they are written as files."""
    name_glob: str
    directory: str | None
    """Absolute directory of core files; None when relative to the crashing process's working directory."""

    def describe(self) -> str:
        if self.handler:
            via = " (read them with coredumpctl)" if "systemd-coredump" in self.handler else ""
            return f"core_pattern pipes cores to {self.handler}{via}"
        where = self.directory or "the crashing process's working directory"
        return f"cores are written as {self.name_glob} in {where}"

    def files(self, directories: Iterable[Path], since: float) -> list[Path]:
        """ELF core files named by the pattern, changed after `since` (a time stamp)."""
        folders = [Path(self.directory)] if self.directory else list(directories)
        found = [p for folder in dict.fromkeys(folders) for p in _glob(folder, self.name_glob)]
        return sorted(p for p in dict.fromkeys(found) if _is_core(p) and p.stat().st_mtime >= since)


def core_setup() -> CoreSetup:
    """Read the kernel's core pattern (a missing file reads as the kernel default, `core`)."""
    try:
        pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip() or "core"
    except OSError:
        pattern = "core"
    if pattern.startswith("|"):
        return CoreSetup(pattern, os.path.basename(pattern[1:].split()[0]) if pattern[1:].split() else "?", "", None)
    try:
        uses_pid = Path("/proc/sys/kernel/core_uses_pid").read_text().strip() == "1"
    except OSError:
        uses_pid = False
    name_glob = re.sub(r"%.", lambda m: "%" if m[0] == "%%" else "*", os.path.basename(pattern))
    if uses_pid and "%p" not in pattern:
        name_glob += "*"
    directory = os.path.dirname(pattern) if pattern.startswith("/") else None
    return CoreSetup(pattern, None, name_glob, directory)


def _glob(folder: Path, pattern: str) -> list[Path]:
    try:
        return [p for p in folder.glob(pattern) if p.is_file()]
    except OSError:
        return []


def _is_core(path: Path) -> bool:
    """An ELF file of type ET_CORE (a binary named `core` or a core-like name is not collected by mistake)."""
    try:
        with open(path, "rb") as handle:
            return is_elf_core(handle.read(18))
    except OSError:
        return False


def is_elf_core(head: bytes) -> bool:
    """The first 18 bytes are an ELF header of type ET_CORE (a CPU core, or a CUDA GPU dump, EM_CUDA)."""
    return (len(head) >= 18 and head[:4] == b"\x7fELF"
            and int.from_bytes(head[16:18], "little" if head[5] == 1 else "big") == 4)


_COREDUMP_ROW = re.compile(r"^\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+\s+"
                           r"(?P<pid>\d+)\s+\d+\s+\d+\s+\S+\s+(?P<core>\S+)",
                           re.MULTILINE)


def coredumpctl_pieces(since: datetime, timeout: float, pid: int | None = None) -> list[Piece]:
    """systemd-coredump's list of the window, `info` of the newest entry (or `pid`) and its core where allowed."""
    listing = run_tool(["coredumpctl", "list", "--no-pager", "--since", since.strftime("%Y-%m-%d %H:%M:%S")], timeout)
    pieces = [Piece.of("crash/coredumpctl-list.txt", listing,
                       "no core dumps in the window" if "No coredumps found" in listing.errors else "")]
    rows = list(_COREDUMP_ROW.finditer(listing.text()))
    chosen = next((r for r in reversed(rows) if pid is None or int(r["pid"]) == pid), None)
    if chosen is None:
        return pieces
    pieces.append(Piece.of(f"crash/coredumpctl-info.{chosen['pid']}.txt",
                           run_tool(["coredumpctl", "info", "--no-pager", chosen["pid"]], timeout)))
    if chosen["core"] != "present":
        pieces.append(Piece.missing(f"crash/core.{chosen['pid']}", "coredumpctl dump", chosen["core"],
                                    f"systemd-coredump lists the core as {chosen['core']}"))
        return pieces
    dump = Piece.of(f"crash/core.{chosen['pid']}", run_tool(["coredumpctl", "dump", "--no-pager", chosen["pid"]],
                                                             DUMP_TIMEOUT_S))
    dump.binary = True
    return [*pieces, dump]


def crash_file_pieces(plan: Plan, setup: CoreSetup) -> list[Piece]:
    """Core files the pattern names and CUDA GPU dumps (*.nvcudmp), found where they would land."""
    folders = [Path.cwd(), *(Path(p) if os.path.isdir(p) else Path(p).parent for p in plan.paths)]
    gpu_dump = plan.environ.get("CUDA_COREDUMP_FILE", "")
    if os.path.isabs(gpu_dump):
        folders.append(Path(gpu_dump).parent)
    since = plan.since.timestamp()
    cores = [] if setup.handler else setup.files(folders, since)
    dumps = sorted({p for f in dict.fromkeys(folders) for p in _glob(f, "*.nvcudmp") if p.stat().st_mtime >= since})
    pieces = [_big_file(f"crash/cores/{p.name}", p, plan) for p in cores if str(p.resolve()) not in plan.skip]
    pieces += [_big_file(f"crash/gpu/{p.name}", p, plan) for p in dumps]
    return pieces


def _within_limit(piece: Piece, plan: Plan) -> Piece:
    """A core from coredumpctl larger than the limit is named, not stored."""
    if piece.binary and piece.reader is not None and piece.reader.size > plan.core_limit:
        return Piece.missing(piece.name, piece.source, "too large", _too_large(piece.reader.size, plan))
    return piece


def _too_large(size: int, plan: Plan) -> str:
    return f"{size >> 20} MiB is over the limit of {plan.core_limit >> 20} MiB (--core-limit-mb)"


def _big_file(name: str, path: Path, plan: Plan) -> Piece:
    """A core or GPU dump stored as it is, unless larger than the limit."""
    try:
        size = path.stat().st_size
        if size > plan.core_limit:
            return Piece.missing(name, str(path), "too large", _too_large(size, plan))
        return Piece(name, str(path), "ok", FileReader(open(path, "rb")), binary=True)
    except OSError as exc:
        return Piece.missing(name, str(path), "unreadable", exc.strerror or str(exc))


def user_pieces(plan: Plan) -> list[Piece]:
    """The files the user named: unpacked by content like `analyze` does (so compressed logs are redacted too)."""
    from ..inputs import open_inputs

    pieces = []
    for blob in open_inputs(list(plan.paths)):
        if os.path.abspath(blob.path.split("!/")[0]) in plan.skip:
            continue
        name = "files/" + "/".join(part for part in blob.path.replace("!/", "/").split("/")
                                   if part not in ("", ".", ".."))
        if blob.reader is None:
            pieces.append(Piece.missing(name, blob.path, "unreadable", "; ".join(blob.diagnostics)))
        else:
            pieces.append(Piece(name, blob.path, "ok", _spooled(blob.reader), why="; ".join(blob.diagnostics)))
    return pieces


def _spooled(reader: ByteReader) -> ByteReader:
    """A copy in an unnamed temporary file: `open_inputs` closes each file once the next one is opened."""
    copy = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the caller, who closes it
    for offset in range(0, reader.size, CHUNK):
        copy.write(reader.read_at(offset, CHUNK))
    copy.flush()
    return FileReader(copy)


def save_redacted(piece: Piece, folder: Path, redactor: Redactor) -> tuple[Path | None, dict[str, int]]:
    """Write a piece under `folder` as the bundle holds it: text redacted (`_redacted`), ELF cores as they are;
    returns the file and what was redacted in it."""
    if piece.reader is None or is_elf_core(piece.reader.read_at(0, 18)):
        return save_piece(piece, folder), {}
    data, _size, counts, _cut = _redacted(piece.reader, redactor)
    return _save(piece, data, folder), dict(counts)


def save_piece(piece: Piece, folder: Path) -> Path | None:
    """Write a piece's bytes, unredacted, under `folder` (a case directory stays on the machine)."""
    return None if piece.reader is None else _save(piece, piece.reader, folder)


def _save(piece: Piece, data: ByteReader, folder: Path) -> Path | None:
    """`data` as the piece's file in the case folder, always a new file (`create_in`): a name the folder holds
    already, a planted link included, is not written and the piece's `why` says so."""
    name = piece.name.rsplit("/", 1)[-1]
    try:
        with create_in(folder, name) as handle:
            handle.writelines(data.read_at(offset, CHUNK) for offset in range(0, data.size, CHUNK))
    except OutputError as exc:
        piece.why = "; ".join(filter(None, [piece.why, str(exc)]))
        return None
    return folder / name


# ---------------------------------------------------------------- the bundle

Progress = Callable[[str], None]


def collect(output: Output, plan: Plan, anonymize: bool = False, progress: Progress = lambda message: None) -> dict:
    """Gather everything the plan asks for and write the bundle at `output` (checked by the command before);
    returns the manifest. The bundle is written last, so no piece of it is collected as an input."""
    setup = core_setup()
    progress("GPU state and telemetry")
    pieces, gpu_state = gpu_pieces(plan)
    steps: list[tuple[str, Callable[[], list[Piece]]]] = [
        ("kernel log", lambda: [kernel_log(plan.since, plan.timeout_s), older_boots(plan.timeout_s)]),
        ("software stack", lambda: software_pieces(plan)),
        ("crash files", lambda: [*(_within_limit(p, plan) for p in coredumpctl_pieces(plan.since, plan.timeout_s)),
                                 *crash_file_pieces(plan, setup)]),
        ("your files", lambda: user_pieces(plan)),
    ]
    for title, step in steps:
        progress(title)
        pieces.extend(step())
    redactor = Redactor(plan.environ, anonymize)
    manifest = {
        "format": BUNDLE_FORMAT,
        "tool": {"name": "postmortem", "version": __version__},
        "created": datetime.now().astimezone().isoformat(timespec="seconds"),
        "window": {"since": plan.since.astimezone().isoformat(timespec="seconds")},
        "gpu": gpu_state,
        "cores": {"core_pattern": setup.pattern, "where": setup.describe()},
        "redaction": {
            "secrets": "token families of data/secret-shapes.tsv, password/secret/token assignments and flags, "
                       "Authorization and Cookie headers, URL credentials, private-key blocks, values of "
                       "secret-named environment variables; in every file but ELF cores (whose process's "
                       "environment values and command-line secrets are blanked), in names and here",
            "environment": "values shown only for CUDA_*, NCCL_*, TORCH_*, PYTORCH_* and similar GPU-job variables",
            "anonymized": anonymize,
        },
    }
    written: list[dict] = []
    write_output(output, lambda handle: written.append(_write_tar(handle, pieces, manifest, redactor)), mode=0o600,
                 also=[piece.source for piece in pieces if piece.reader is not None])
    return written[0]


def _write_tar(handle: BinaryIO, pieces: list[Piece], manifest: dict, redactor: Redactor) -> dict:
    """Redact every piece that is not an ELF core into a temporary file, then write the manifest first and the
    pieces after it.

    Member names and the manifest's strings (sources, tool messages, the core
    pattern) are scrubbed one by one: the manifest's own words and redaction
    counts never go through the secret patterns, which would take them for secrets."""
    files, missing, staged = [], [], []
    names: Counter[str] = Counter()
    for piece in pieces:
        entry = _scrubbed_entry(redactor, {"path": piece.name, "source": piece.source, "status": piece.status,
                                           "exit_status": piece.exit_status, "seconds": piece.seconds})
        if piece.reader is None:
            missing.append({**entry, "why": redactor.field(piece.why)})
            continue
        name = _unique(entry["path"], names)
        redacted: str | dict[str, int]
        if is_elf_core(piece.reader.read_at(0, 18)):
            data, redacted = _blanked_core(piece.reader)
            size = data.size
        else:
            data, size, counts, cut = _redacted(piece.reader, redactor)
            counts.update(piece.pre_redacted)
            redacted = dict(sorted(counts.items()))
            piece.why = "; ".join(filter(None, [piece.why, f"cut at {MAX_TEXT} bytes" if cut else ""]))
        note = {"note": redactor.field(piece.why)} if piece.why else {}
        files.append({**entry, "path": name, "size": size, "redacted": redacted, **note})
        staged.append((name, data, size))
    scrubbed = {key: _scrubbed_entry(redactor, manifest[key]) if isinstance(manifest[key], dict)
                else redactor.field(manifest[key]) for key in ("gpu", "cores")}
    total: Counter[str] = Counter(redactor.field_counts)
    for entry in files:
        total.update(entry["redacted"] if isinstance(entry["redacted"], dict) else {})
    redaction = {**manifest["redaction"], "total": dict(sorted(total.items())),
                 "in_names_and_manifest": dict(sorted(redactor.field_counts.items()))}
    manifest = {**manifest, **scrubbed, "redaction": redaction, "files": files, "not_collected": missing}
    text = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")
    from ..reader import BytesReader

    with tarfile.open(fileobj=handle, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for name, data, size in [(MANIFEST, BytesReader(text), len(text)), *staged]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = size, int(time.time()), 0o644
            archive.addfile(info, _Stream(data, size))
    return manifest


def _blanked_core(core: ByteReader) -> tuple[ByteReader, str]:
    """The core as the bundle holds it: its process's argument and environment strings with their secrets
    overwritten by `*`, as `snapshot` blanks them in the cores it writes (redact.blank_process_strings, on the
    blocks core_writer.process_strings finds), the core itself never written; and the manifest's words for it."""
    from ..core import core_writer  # the core reader: only a bundle that holds a core pays for importing it
    from ..core.elf import ElfError

    try:
        found = core_writer.process_strings(core.read_at)
    except ElfError:
        found = None
    if found is None:
        return core, f"{BINARY_NOTE}; no command line or environment found in it to blank"
    arguments, environment, hidden, in_arguments = blank_process_strings(found.arguments.data,
                                                                         found.environment.data)
    patches = [(offset, blanked[at: at + count])
               for block, blanked in ((found.arguments, arguments), (found.environment, environment))
               for offset, at, count in core_writer.file_extents(found.segments, block.address, len(blanked))]
    if found.psargs_offset is not None:
        patches.append((found.psargs_offset, found.blanked_psargs(arguments)))
    return _Patched(core, patches), (f"{BINARY_NOTE}, but for the {hidden} environment value(s) and {in_arguments} "
                                     "secret(s) of its command line blanked")


class _Patched:
    """A ByteReader whose bytes are another's with a few ranges replaced (a core's blanked strings)."""

    def __init__(self, reader: ByteReader, patches: list[tuple[int, bytes]]):
        self.reader, self.size, self.patches = reader, reader.size, patches

    def read_at(self, offset: int, length: int) -> bytes:
        data = self.reader.read_at(offset, length)
        out = None
        for at, patch in self.patches:
            low, high = max(at, offset), min(at + len(patch), offset + len(data))
            if low < high:
                out = out if out is not None else bytearray(data)
                out[low - offset: high - offset] = patch[low - at: high - at]
        return data if out is None else bytes(out)


def _scrubbed_entry(redactor: Redactor, entry: dict) -> dict:
    """Every string of one manifest entry with its secrets (and, when asked, identities) replaced."""
    return {key: redactor.field(value) if isinstance(value, str) else value for key, value in entry.items()}


def _redacted(reader: ByteReader, redactor: Redactor) -> tuple[ByteReader, int, Counter, bool]:
    """The text scrubbed block by block into an unnamed temporary file; the counts of this file only."""
    before = Counter(redactor.counts)
    out = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the caller, who closes it
    redactor.reset()
    pending = b""
    limit = min(reader.size, MAX_TEXT)
    for offset in range(0, limit, CHUNK):
        pending += reader.read_at(offset, min(CHUNK, limit - offset))
        ready, pending = _whole_lines(pending, redactor)
        out.write(_scrubbed(redactor, ready))
    out.write(_scrubbed(redactor, pending))
    out.flush()
    size = out.tell()
    return FileReader(out), size, redactor.counts - before, reader.size > MAX_TEXT


SEPARATORS = (b" ", b"\t", b"\0")
"""Bytes an over-long line is cut after: no token holds one."""


def _whole_lines(data: bytes, redactor: Redactor) -> tuple[bytes, bytes]:
    """The data up to its last newline, and the unfinished line after it.

    An unfinished line of MAX_LINE bytes or more (a binary blob without
    newlines) is cut after its last space, tab or NUL byte that lies in no
    secret (`Authorization: Basic` in one block and its token in the next
    would leave the token as it is; a secret at the end may go on past it:
    redact.UNFINISHED), else just before such a secret, or where it stands
    when it has no separator within MAX_LINE bytes of its end."""
    start = data.rfind(b"\n") + 1
    if len(data) - start < MAX_LINE:
        return data[:start], data[start:]
    floor = len(data) - MAX_LINE
    separator = max(data.rfind(byte, start) for byte in SEPARATORS) + 1
    if separator <= floor:
        return data, b""
    low = max(start, floor - LOOKBEHIND)
    spans = _byte_spans(data[low:], redactor)
    cut = separator
    while cut > floor:
        inside = bisect.bisect_left(spans, (cut - low, 0)) - 1  # the last secret that starts before the cut
        if inside < 0 or spans[inside][1] <= cut - low:
            return data[:cut], data[cut:]
        secret = low + spans[inside][0]
        before = max(data.rfind(byte, floor, secret) for byte in SEPARATORS)  # the last separator before it
        cut = before + 1 if before >= 0 else secret
    return data[:separator], data[separator:]  # secrets back to back for MAX_LINE bytes: cut as it stood


def _byte_spans(data: bytes, redactor: Redactor) -> list[tuple[int, int]]:
    """`Redactor.secret_spans` of the bytes (read as going on past their end: redact.UNFINISHED), in bytes."""
    text = data.decode("utf-8", "surrogateescape")
    spans = redactor.secret_spans(text + UNFINISHED)
    if len(text) == len(data):  # ASCII: characters are bytes
        return spans
    offsets, at, done = {}, 0, 0
    for index in sorted({i for span in spans for i in span}):
        at += len(text[done:index].encode("utf-8", "surrogateescape"))
        offsets[index], done = at, index
    return [(offsets[start], offsets[end]) for start, end in spans]


def _scrubbed(redactor: Redactor, block: bytes) -> bytes:
    return redactor.text(block.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def _unique(name: str, seen: Counter[str]) -> str:
    """Two files of one name (cores called `core` in two folders) both kept: the second gets a suffix."""
    seen[name] += 1
    return name if seen[name] == 1 else f"{name}.{seen[name]}"


class _Stream:
    """A ByteReader as the file object tarfile reads exactly `size` bytes from."""

    def __init__(self, reader: ByteReader, size: int):
        self.reader, self.pos, self.size = reader, 0, size

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.pos if n is None or n < 0 else min(n, self.size - self.pos)
        data = self.reader.read_at(self.pos, n)
        if len(data) < n:
            data += b"\0" * (n - len(data))  # a file that shrank while being read: the member keeps its size
        self.pos += n
        return data
