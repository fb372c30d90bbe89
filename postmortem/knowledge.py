"""Fact tables every source shares: CUDA error codes, Linux signals, Windows exception codes.

The CUDA table (data/cuda-errors.tsv) is copied from NVIDIA's headers and
cudaGetErrorString(); each row keeps the sources it was checked against.
Logs name a CUDA error in many ways (`cudaErrorIllegalAddress`,
`CUDA_ERROR_ILLEGAL_ADDRESS`, `error 700`, `error=700`, `CUDA failure 700`, or
only the message "an illegal memory access was encountered"); `cuda_error`
maps any of them to the one record.

Numbers are those of current CUDA. Old toolkits numbered errors differently
(Lua Torch printed "error=59" for device-side asserts), so a message or name
found in the same line wins over a number.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import later

if TYPE_CHECKING:
    import regex


@dataclass(frozen=True)
class CudaError:
    """One CUDA runtime/driver error code."""

    number: int
    runtime_name: str | None
    driver_name: str | None
    message: str | None
    cause: str | None
    sticky: str
    """"yes" when the error corrupts the context (every later call fails too), "no" or "unknown"."""

    @property
    def name(self) -> str:
        """The runtime name, else the driver name (a few codes exist only in the driver API)."""
        return self.runtime_name or self.driver_name or f"cuda error {self.number}"


DATA = Path(__file__).resolve().parent / "data"
"""The package's tables (read from the installed files: importlib.resources cost a twentieth of a short run)."""


def data_text(name: str) -> str:
    """One file of data/, as text."""
    return (DATA / name).read_text(encoding="utf-8")


def dash(value: str) -> str | None:
    return None if value.strip() in ("", "-") else value.strip()


@cache
def cuda_errors() -> tuple[CudaError, ...]:
    """Every row of data/cuda-errors.tsv, loaded once."""
    text = data_text("cuda-errors.tsv")
    rows = csv.DictReader(text.splitlines(), delimiter="\t")
    return tuple(
        CudaError(
            number=int(row["number"]),
            runtime_name=dash(row["runtime_name"]),
            driver_name=dash(row["driver_name"]),
            message=dash(row["message"]),
            cause=dash(row["cause"]),
            sticky=row["sticky"].strip(),
        )
        for row in rows
    )


@cache
def _index() -> dict[str, CudaError]:
    """Lower-cased names, messages and numbers to records."""
    index: dict[str, CudaError] = {}
    for record in cuda_errors():
        for key in (record.runtime_name, record.driver_name, record.message, str(record.number)):
            if key:
                index.setdefault(key.lower(), record)
        if record.message:  # "device side assert triggered": a hyphen typed as a blank (cuda_message_pattern)
            index.setdefault(record.message.lower().replace("-", " "), record)
    for row in data_rows("cuda-errors-legacy.tsv"):  # CUDA 10.0's numbers where today's runtime has none
        index.setdefault(row["number"], replace(index[row["runtime_name"].lower()],
                                                            number=int(row["number"])))
    return index


_NUMBERED = later.compile(
    r"(?i)(?:cuda\s++failure|cuda\s++error|runtime\s++error|error\s++code|error|code)"
    r"\s*+[:=]?+\s*+\(?(\d{1,5})(?!\d)\)?"
    r"|==\s*cudaSuccess\s*\((\d{1,5}) vs\. 0\)"
)
"""A number after words that name it, or glog's CHECK_EQ (Caffe, MXNet): `error == cudaSuccess (46 vs. 0)`. The
blanks around `:`/`=` are taken whole (possessive): the two optional runs once split a long blank run every way."""
_SUCCESS = frozenset({"cudasuccess", "cuda_success"})
_COMPARED = later.compile(r"[=!]=\s*$")
"""A name right after `==` is part of a CHECK's condition (`err == cudaErrorInvalidValue`), not the error."""
_NAME = later.compile(r"\b(cudaError[A-Za-z]+|CUDA_ERROR_[A-Z_]+)\b")


@cache
def cuda_message_pattern() -> regex.Pattern:
    """One alternation of every message, longest first, so the most specific wins; a hyphen of a message matches a
    blank too (`CUDA error: device side assert triggered`, as people and some runtimes write it)."""
    import regex

    messages = sorted({r.message for r in cuda_errors() if r.message and len(r.message) > 8}, key=len, reverse=True)
    return later.compile("|".join(regex.escape(m).replace("\\-", "[- ]") for m in messages), later.IGNORECASE)


def cuda_error(token: str | int) -> CudaError | None:
    """The record a single token names: a runtime or driver name, a number, a message,
    or a numbered phrase such as `error 700`, `error=700`, `CUDA failure 700`."""
    key = str(token).strip().strip("'\"`.").lower()
    if key in _index():
        return _index()[key]
    numbered = _NUMBERED.fullmatch(key)
    return _index().get(numbered.group(1) or numbered.group(2)) if numbered else None


MISSPELT_RATIO = 0.95
"""How like a known CUDA error name a name a person typed must be to be read as it: one letter dropped or doubled in
a name of twenty (`cudaErrorLanchOutOfResources`), not another error's name (the closest two differ far more)."""


def cuda_error_misspelt(name: str) -> CudaError | None:
    """The error a person meant by a CUDA error name no table holds, typed with a letter missing, doubled or swapped:
    the one runtime or driver name of the same prefix that is closer than MISSPELT_RATIO, else None."""
    import difflib  # only for a name no table knows

    key = name.lower()
    prefix = "cudaerror" if key.startswith("cudaerror") else "cuda_error_" if key.startswith("cuda_error_") else None
    if prefix is None or len(key) < 16:
        return None
    close = difflib.get_close_matches(key, _names_starting(prefix), n=2, cutoff=MISSPELT_RATIO)
    return _index()[close[0]] if len(close) == 1 else None


@cache
def _names_starting(prefix: str) -> tuple[str, ...]:
    return tuple(known for known in _index() if known.startswith(prefix))


def cuda_error_variant(name: str) -> CudaError | None:
    """The driver error a binding names by its enum variant: Rust's cust and RustaCUDA, .NET's ManagedCuda spell
    CUDA_ERROR_NO_BINARY_FOR_GPU as NoBinaryForGpu (or ErrorNoBinaryForGPU). A separate map: a one-word variant
    (`Timeout`, `Assert`, `Unknown`) is an everyday word that must not name an error elsewhere."""
    return _variants().get(name.lower().removeprefix("error"))


@cache
def _variants() -> dict[str, CudaError]:
    return {record.driver_name.removeprefix("CUDA_ERROR_").replace("_", "").lower(): record
            for record in cuda_errors() if record.driver_name}


def cuda_error_kind(cause: str | None) -> str:
    """The event kind of a CUDA error by the cause its number means (a driver problem, memory, else an error)."""
    return {"driver-mismatch": "driver-error", "gpu-oom": "gpu-oom"}.get(cause or "", "cuda-error")


def cuda_error_fields(record: CudaError) -> dict[str, Any]:
    """What an event says of the CUDA error it reports."""
    fields: dict[str, Any] = {"error": record.name, "code": record.number, "message": record.message,
                              "sticky": record.sticky}
    if record.driver_name:
        fields["driver_error"] = record.driver_name
    return fields


NEGATION = later.compile(r"(?i)\b(?:no|not|without|zero|never|none)\b[\w\s,/-]{0,24}$")
"""The end of a text that denies what follows it: "Regular log content without Xid errors" and "no XID error"
(gpud's own test data, ../shared/peer-data), "no Xid in dmesg", "No MCE, panic, OOM" (a list after one "no").
Searched up to the start of a hit."""


KILLED_ON_PURPOSE = later.compile(
    r"(?i)\bkill(?:ed|s)?+\b[^.!?\n]{0,30}?\bby\s++(?:the\s++|a\s++|an\s++)?(?:users?|me|us|hand|person|admin\w*+"
    r"|operators?|scheduler|slurm|pbs|lsf|kubernetes|k8s|kubelet|orchestrator|controller|scancel)\b"
    r"|\b(?:manually|I|we|had\s++to)\s++(?:\w++\s++)?kill(?:ed)?+\b")
"""A line that says who killed the job: a person or a scheduler, not a signal out of nowhere ("All 128 training tasks
were killed by the user", marin-community/marin#7344; "I killed it after an hour"). A kill on purpose is how a hang
ends, never a sign of the host running out of memory."""


CONDITIONAL = later.compile(
    r"(?i)\bif\s++(?:you|it|the\s++\w++|this|that|there\s++is)\s++(?:\w++\s++)?"
    r"(?:encounter|get|see|hit|run\s++into|experience|meet|face)(?:s|ed)?\b[^.!?\n]{0,40}+$")
"""The end of a text that puts what follows in a condition: a hint of what to do should it happen, not a report that it
did. Real-ESRGAN and the many programs built on it print "If you encounter CUDA out of memory, try to set --tile with
a smaller number." after any error at all (xinntao/Real-ESRGAN's inference_realesrgan.py). Searched up to the start of
a hit, as NEGATION is."""

APOSTROPHE = "['\u2018\u2019\u02bc`\u00b4]"
"""An apostrophe as people type it: editors, chat tools and Chinese input methods turn `'` into `’` or `‘`
(`NVIDIA-SMI has failed because it couldn‘t communicate`), and a wording is the same wording in each."""


def typed(words: str) -> str:
    """A literal wording as a pattern that also matches it typed with another apostrophe."""
    import regex

    return regex.escape(words).replace("\\'", "'").replace("'", APOSTROPHE)


MESSAGE_MIN = 20
"""Shortest cudaGetErrorString() message looked for in free text, and used as a log source's anchor (shorter
ones, "invalid argument", are words anyone writes and lines everywhere hold)."""


def quoted_cuda_message(text: str) -> CudaError | None:
    """The CUDA error whose message a person quotes, in any letter case ("[CUDA ERROR]: Too many resources
    requested for launch"); only messages of MESSAGE_MIN characters or more."""
    for message in cuda_message_pattern().finditer(text):
        if len(message.group(0)) >= MESSAGE_MIN:
            return _index()[message.group(0).lower()]
    return None


def find_cuda_error(text: str) -> tuple[CudaError | None, int | None]:
    """The CUDA error a log line reports, and the number it printed (if any).

    Names are searched first, then messages, then a number after words such as
    `CUDA failure`, `error=`, `error (59)`.
    """
    numbered = _NUMBERED.search(text)
    number = int(numbered.group(1) or numbered.group(2)) if numbered else None
    name = next((m for m in _NAME.finditer(text) if m.group(1).lower() not in _SUCCESS
                 and not _COMPARED.search(text, max(0, m.start() - 4), m.start())), None)
    if name and name.group(1).lower() in _index():
        return _index()[name.group(1).lower()], number
    message = cuda_message_pattern().search(text)
    if message and not CONDITIONAL.search(text, 0, message.start()):  # not a hint of what to do should it happen
        return _index()[message.group(0).lower()], number
    if (short := _SHORT_NAME.search(text)) and (record := _short_names().get(_short_key(short["short"]))):
        return record, number
    if number is None and (cut := _CUT_MESSAGE.search(text)) and (record := message_starting(cut["start"])):
        return record, None
    if number is not None:
        return _index().get(str(number)), number
    return None, None


_CUT_MESSAGE = later.compile(r"(?i)\bCUDA error:\s*+(?P<start>[a-z][a-z' ]{11,80}?)\s*$")
"""A CUDA error whose message the line cuts off: a paste wrapped at the terminal's width ("... illegal memory access
was" / "encountered") or cut where the reporter's copy ended."""


MESSAGE_START_WORDS = 3
"""Fewest words of a message's start that name it (fewer are shared by many: "an illegal", "device-side")."""


def message_starting(start: str) -> CudaError | None:
    """The one error whose message starts with these MESSAGE_START_WORDS or more words, if only one does."""
    words = start.lower().split()
    if len(words) < MESSAGE_START_WORDS:
        return None
    head = " ".join(words)
    found = {r.message.lower() for r in cuda_errors() if r.message and r.message.lower().startswith(head)}
    return _index()[found.pop()] if len(found) == 1 else None


_SHORT_NAME = later.compile(
    r"(?:CUDA error(?: at cu\w+)?:\s*)?\b(?P<short>[A-Z][A-Za-z]*(?:[ _][A-Za-z]+){0,4})"
    r" in (?:CUDA queue\b|cu[A-Z]\w*\()"
    r"|CUDA error at cu\w+: (?P<short>[A-Z][A-Za-z]*(?:[ _][A-Za-z]+){0,4})\s*$"
)
"""The driver error's own name in words, as Blender Cycles (and ZLUDA) print it: `Illegal address in CUDA queue
copy_from_device`, `Out of memory in cuStreamCreate(...)`, `CUDA error at cuCtxCreate: Illegal address`, or the
enum suffix `ILLEGAL_ADDRESS in cuCtxSynchronize()`."""


def _short_key(words: str) -> str:
    return words.strip().lower().replace("_", " ")


@cache
def _short_names() -> dict[str, CudaError]:
    """Driver names without their CUDA_ERROR_ prefix, in words: "illegal address" -> CUDA_ERROR_ILLEGAL_ADDRESS."""
    return {_short_key(r.driver_name[len("CUDA_ERROR_"):]): r for r in cuda_errors()
            if r.driver_name and r.driver_name.startswith("CUDA_ERROR_")}


@dataclass(frozen=True)
class CatalogCode:
    """One documented Xid or SXid: its name, where it comes from, how bad it is, what to do."""

    number: int
    name: str
    origin: str
    severity: str
    action: str
    cause: str | None


@cache
def _catalog(table: str) -> dict[int, CatalogCode]:
    text = data_text(f"{table}.tsv")
    rows = csv.DictReader(text.splitlines(), delimiter="\t")
    key = table  # the first column is named after the table: xid or sxid
    return {
        int(row[key]): CatalogCode(int(row[key]), row["name"], row["origin"], row["severity"], row["action"],
                                   dash(row["cause"]))
        for row in rows
    }


def xid(number: int) -> CatalogCode | None:
    """The documented Xid `number` (data/xid.tsv, with its sources), or None."""
    return _catalog("xid").get(number)


def sxid(number: int) -> CatalogCode | None:
    """The documented NVSwitch SXid `number` (data/sxid.tsv, with its sources), or None."""
    return _catalog("sxid").get(number)


def code_fields(number: int, switch: bool = False) -> dict[str, Any] | None:
    """An Xid's (or, `switch`, an SXid's) event fields as the kernel log's events carry them, `xid` and `xid_name`;
    None for a number the catalog does not document (read where no format says it is one)."""
    documented = sxid(number) if switch else xid(number)
    kind = "sxid" if switch else "xid"
    return {kind: number, f"{kind}_name": documented.name} if documented is not None else None


SIGNALS: dict[int, str] = {
    1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
    8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
    14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP",
    20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
    26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}
"""Linux signal numbers (x86-64 and arm64 agree on these)."""

SIGNAL_DESCRIPTIONS: dict[str, str] = {
    "segmentation fault": "SIGSEGV",
    "bus error": "SIGBUS",
    "aborted": "SIGABRT",
    "abort": "SIGABRT",
    "floating point exception": "SIGFPE",
    "floating-point exception": "SIGFPE",
    "illegal instruction": "SIGILL",
    "illegal hardware instruction": "SIGILL",
    "killed": "SIGKILL",
    "terminated": "SIGTERM",
    "trace/breakpoint trap": "SIGTRAP",
}
"""strsignal() wording, as shells, faulthandler and PyTorch's DataLoader print it."""


def signal_name(value: int | str | None) -> str | None:
    """SIGSEGV from 11, -11 (a negative exit code), "SIGSEGV" or "Segmentation fault"."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return SIGNALS.get(abs(int(text)))
    if text.upper().startswith("SIG"):
        return text.upper()
    key = text.lower().rstrip(". ")
    return SIGNAL_DESCRIPTIONS.get(key) or _localized_signals().get(key)


@cache
def _localized_signals() -> dict[str, str]:
    """A shell's signal words in its users' languages (data/shell-signals.tsv), lower-cased, to the signal."""
    return {row["words"].lower(): row["means"] for row in data_rows("shell-signals.tsv")
            if row["means"] != "core dumped"}


@cache
def shell_signal_words() -> tuple[str, ...]:
    """A shell's signal words in its users' languages as written (`段错误`, `Annullato`): what the shell readers
    (job_log, native_crash) look for beside the English ones, and their anchors."""
    return tuple(row["words"] for row in data_rows("shell-signals.tsv") if row["means"] != "core dumped")


@cache
def core_dumped_words() -> tuple[str, ...]:
    """The shell's "core dumped" in every language the table holds, English first."""
    return ("core dumped", *(row["words"] for row in data_rows("shell-signals.tsv") if row["means"] == "core dumped"))


WINDOWS_EXCEPTIONS: dict[int, tuple[str, str | None]] = {
    0xC0000005: ("STATUS_ACCESS_VIOLATION", "SIGSEGV"),
    0xC000001D: ("STATUS_ILLEGAL_INSTRUCTION", "SIGILL"),
    0xC0000094: ("STATUS_INTEGER_DIVIDE_BY_ZERO", "SIGFPE"),
    0xC00000FD: ("STATUS_STACK_OVERFLOW", "SIGSEGV"),
    0xC0000374: ("STATUS_HEAP_CORRUPTION", "SIGABRT"),
    0xC0000409: ("STATUS_STACK_BUFFER_OVERRUN", "SIGABRT"),
    0xE06D7363: ("MSVC C++ exception", "SIGABRT"),
}
"""NTSTATUS codes a crashed Windows process exits with, and the nearest POSIX signal.
0xC0000409 is also how the MSVC runtime reports abort() and fail-fast exits; 0xE06D7363 ("msc" in its low bytes) is
the code of a C++ exception no handler caught (Microsoft's "How a C++ exception is raised")."""


@dataclass(frozen=True)
class Arch:
    """One GPU architecture (data/arch.tsv): what it is called and which builds carry kernels for it.

    Version fields are None where the reference does not establish them.
    """

    capability: str
    sm: str
    family: str
    models: tuple[str, ...]
    min_cuda: str | None
    min_torch: str | None
    cuda_removed: str | None
    """The first CUDA toolkit that cannot build for it."""
    last_torch_wheels: str | None
    """The last official PyTorch wheel flavour (e.g. cu118) that ships its kernels."""

    @property
    def number(self) -> int:
        """sm_120 -> 120: architectures compare by this number."""
        return sm_number(self.sm) or 0


def data_rows(name: str) -> list[dict[str, str]]:
    """A data/ table; `#` lines above the header say where it comes from (sources with tables of their own read
    them with this too)."""
    text = data_text(name)
    return list(csv.DictReader([line for line in text.splitlines() if not line.startswith("#")], delimiter="\t"))


def _models(examples: str) -> list[str]:
    """'RTX 4090/4080/4070' -> ['RTX 4090', 'RTX 4080', 'RTX 4070']: a slash swaps the first name's model number
    and what follows it ('GTX 1080 Ti/1080' -> 'GTX 1080'), or its last word when it has no number
    ('GTX TITAN/780' -> 'GTX 780')."""
    names: list[str] = []
    for entry in examples.split(","):
        first, *others = [part.strip() for part in entry.split("/")]
        if not first or first == "-":
            continue
        names.append(first)
        words = first.split(" ")
        numbered = next((i for i, word in enumerate(words) if any(c.isdigit() for c in word)), None)
        stem = words[:numbered] if numbered is not None else words[:-1]
        names.extend(" ".join([*stem, other]) for other in others if other)
    return names


@cache
def architectures() -> tuple[Arch, ...]:
    """Every row of data/arch.tsv, loaded once."""
    return tuple(
        Arch(row["compute_capability"], row["sm"], row["family"], tuple(_models(row["example_gpus"])),
             dash(row["min_cuda"]), dash(row["min_torch"]), dash(row["cuda_removed"]),
             dash(row["last_torch_wheels"]))
        for row in data_rows("arch.tsv")
    )


_SM = later.compile(r"(?i)^(?:sm_?|compute_)?(\d+)([a-z]?)$")
_DECIMAL = later.compile(r"(?<!\d)\d+\.\d")


def sm_number(value: object) -> int | None:
    """120 from 'sm_120', 'sm_120a', 'compute_120', '12.0' or 120; None when it is none of these."""
    text = str(value).strip()
    if _DECIMAL.fullmatch(text):
        major, minor = text.split(".")
        return int(major) * 10 + int(minor)
    found = _SM.match(text)
    return int(found.group(1)) if found else None


def arch(value: object) -> Arch | None:
    """The architecture an sm ('sm_120'), compute target ('compute_90') or capability ('12.0') names."""
    number = sm_number(value)
    return next((a for a in architectures() if a.number == number), None) if number is not None else None


_NAME_NOISE = later.compile(r"(?i)\b(?:nvidia|geforce|tesla)\b|[-_(),]")


def _tokens(name: str) -> tuple[str, ...]:
    return tuple(_NAME_NOISE.sub(" ", name).lower().split())


@cache
def _model_index() -> tuple[tuple[tuple[str, ...], Arch], ...]:
    """Model names as word tuples with their architecture, longest first (so 'rtx 6000 ada' beats 'rtx 6000')."""
    pairs: list[tuple[tuple[str, ...], Arch | None]] = [(_tokens(model), a) for a in architectures()
                                                        for model in a.models]
    pairs += [(_tokens(row["model"]), arch(row["compute_capability"])) for row in data_rows("gpu-models.tsv")]
    known = [(tokens, a) for tokens, a in pairs if tokens and a is not None]
    return tuple(sorted(known, key=lambda pair: -len(pair[0])))


def gpu_arch(name: str | None) -> Arch | None:
    """The architecture of a GPU named as logs print it: 'NVIDIA GeForce RTX 5090', 'Tesla K80',
    'NVIDIA A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3', 'RTX 4090'. A known model's words must appear
    together in the name, so 'A10' does not match 'A100'."""
    words = _tokens(name or "")
    if not words:  # no name: the model table is not built for nothing
        return None
    for model, found in _model_index():
        if any(words[i:i + len(model)] == model for i in range(len(words) - len(model) + 1)):
            return found
    return None


_VENDOR_WORDS = later.compile(r"(?i)^\s*(?:nvidia\s+)?(?:geforce\s+)?")


def short_gpu_name(name: str) -> str:
    """'NVIDIA GeForce RTX 5090' -> 'RTX 5090': the model as people say it."""
    return _VENDOR_WORDS.sub("", name).strip() or name


def describe_arch(gpu_name: str | None = None, sm: str | None = None, shipped: list[str] | None = None) -> dict:
    """Facts about a GPU and a build, as event fields for explanation templates (only those known).

    gpu_model, sm, family, min_cuda, min_torch, cuda_removed, last_torch_wheels come from the tables;
    shipped_range ('sm_50 ... sm_90') and ptx_targets from the build's arch list, when the input gives one.
    """
    found = arch(sm) if sm else None
    found = found or gpu_arch(gpu_name)
    facts: dict[str, str] = {}
    if gpu_name:
        facts["gpu_model"] = short_gpu_name(gpu_name)
    if found is not None:
        facts.update(sm=sm or found.sm, family=found.family.split(" (")[0])
        for key in ("min_cuda", "min_torch", "cuda_removed", "last_torch_wheels"):
            if getattr(found, key):
                facts[key] = getattr(found, key)
    targets = sorted((t for t in shipped or () if sm_number(t) is not None), key=lambda t: sm_number(t) or 0)
    cubins = [t for t in targets if not t.startswith("compute_")]
    if cubins:
        facts["shipped_range"] = cubins[0] if len(cubins) == 1 else f"{cubins[0]} ... {cubins[-1]}"
    if any(t.startswith("compute_") for t in targets):
        facts["ptx_targets"] = " ".join(t for t in targets if t.startswith("compute_"))
    return facts


@dataclass(frozen=True)
class NvStatus:
    """One NV_STATUS code of the NVIDIA resource manager (data/nv-status.tsv)."""

    name: str
    value: int
    message: str
    cause: str | None


@cache
def nv_statuses() -> tuple[NvStatus, ...]:
    """Every row of data/nv-status.tsv, loaded once."""
    return tuple(NvStatus(row["name"], int(row["value"], 16), row["message"], dash(row["cause"]))
                 for row in data_rows("nv-status.tsv"))


def nv_status(token: str | int) -> NvStatus | None:
    """The status a driver line names: `NV_ERR_TIMEOUT`, `0x65`, 101, or its message ("Call timed out")."""
    text = str(token).strip().strip("[]()").strip()
    for status in nv_statuses():
        if text == status.name or text.lower() == status.message.lower():
            return status
    try:
        value = int(text, 0)
    except ValueError:
        return None
    return next((s for s in nv_statuses() if s.value == value), None)


@dataclass(frozen=True)
class DriverSubsystem:
    """The part of the resource manager an `NVRM: <function>:` line comes from (data/nvrm-subsystems.tsv)."""

    prefix: str
    name: str
    cause: str | None


@cache
def _subsystems() -> tuple[DriverSubsystem, ...]:
    rows = [DriverSubsystem(row["prefix"], row["subsystem"], dash(row["cause"]))
            for row in data_rows("nvrm-subsystems.tsv")]
    return tuple(sorted(rows, key=lambda s: -len(s.prefix)))


def driver_subsystem(function: str) -> DriverSubsystem | None:
    """The subsystem of a resource-manager function (`_kgspRpcRecvPoll` -> gsp), longest prefix first."""
    name = function.lstrip("_")
    return next((s for s in _subsystems() if name.startswith(s.prefix)), None)


@dataclass(frozen=True)
class DriverMessage:
    """A family of `NVRM:` wordings (data/nvrm-messages.tsv): what the driver's own words report."""

    family: str
    pattern: regex.Pattern
    cause: str | None


@cache
def driver_messages() -> tuple[DriverMessage, ...]:
    """The families in table order (the first that matches a message names it)."""
    return tuple(DriverMessage(row["family"], later.compile(row["regex"], later.IGNORECASE), dash(row["cause"]))
                 for row in data_rows("nvrm-messages.tsv"))


def driver_message(text: str) -> DriverMessage | None:
    """The family of an NVRM message; the table's last row ("info") takes what no error row does."""
    return next((m for m in driver_messages() if m.pattern.search(text)), None)


@dataclass(frozen=True)
class LibraryStatus:
    """One status code of a CUDA library (data/library-status.tsv, made by tools/gen_library_status.py)."""

    library: str
    number: int
    name: str
    version: str | None
    """The library major version the number belongs to, where numberings changed (cuDNN 8 and 9)."""
    message: str | None
    cause: str | None


@cache
def library_statuses() -> tuple[LibraryStatus, ...]:
    """Every row of data/library-status.tsv, loaded once."""
    return tuple(LibraryStatus(row["library"], int(row["number"]), row["name"], dash(row["version"]),
                               dash(row["message"]), dash(row["cause"])) for row in data_rows("library-status.tsv"))


@dataclass(frozen=True)
class NvmlReturn:
    """One of NVML's return codes (data/nvml-returns.tsv)."""

    number: int
    name: str
    message: str | None
    cause: str | None


@cache
def nvml_returns() -> tuple[NvmlReturn, ...]:
    """Every row of data/nvml-returns.tsv, loaded once."""
    return tuple(NvmlReturn(int(row["number"]), row["name"], dash(row["message"]), dash(row["cause"]))
                 for row in data_rows("nvml-returns.tsv"))


def nvml_return(token: str | int) -> NvmlReturn | None:
    """The return code an NVML client names: by number (15), name (NVML_ERROR_GPU_IS_LOST, GPU_IS_LOST), CamelCase
    (GpuIsLost, GPUIsLost), or nvmlErrorString's text (GPU is lost)."""
    return _nvml_index().get(_nvml_key(str(token)))


def nvml_error_fields(code: NvmlReturn, tool: str) -> dict[str, Any]:
    """What an event says of the NVML return a client (`tool`) reports: its name, number and text, and the cause
    it points at."""
    fields: dict[str, Any] = {"error": code.message or code.name, "nvml_return": code.name, "nvml_code": code.number,
                              "tool": tool}
    if code.cause:
        fields["status_cause"] = code.cause
    return fields


def _nvml_key(text: str) -> str:
    return text.strip().lower().replace("_", "").replace(" ", "")


@cache
def _nvml_index() -> dict[str, NvmlReturn]:
    """Every spelling of every code -> its row (numbers, names with and without NVML_ERROR_, texts)."""
    index: dict[str, NvmlReturn] = {}
    for row in reversed(nvml_returns()):  # a spelling two rows share goes to the first
        name = _nvml_key(row.name)
        for key in (str(row.number), name, name.removeprefix("nvmlerror"), _nvml_key(row.message or "")):
            if key:
                index[key] = row
    return index


def library_status(library: str, token: str | int) -> LibraryStatus | None:
    """The status a library reports by name (`CUBLAS_STATUS_NOT_SUPPORTED`) or number (cuBLAS 15).

    A cuDNN number is read in cuDNN 9's numbering when it has four digits, else in cuDNN 8's.
    """
    library = library.lower()
    text = str(token).strip()
    rows = [s for s in library_statuses() if s.library == library]
    if not text.lstrip("-").isdigit():
        return next((s for s in rows if s.name == text), None)
    number = int(text)
    found = [s for s in rows if s.number == number]
    if library == "cudnn" and len(found) > 1:
        found = [s for s in found if s.version == ("9" if number >= 1000 else "8")] or found
    return found[0] if found else None

