"""NCCL's own log lines and PyTorch ProcessGroupNCCL messages, wherever they appear.

A distributed job that dies leaves the same few messages on every rank: the
watchdog's "collective operation timeout", the "taking the entire process
down" abort, NCCL's `NCCL WARN` lines (socket, InfiniBand, proxy), and the
`ncclSystemError`-style result that surfaces in the framework. Ranks
interleave and repeat each other, so identical reports are folded into one
event with the ranks that reported it. NCCL INFO lines are kept only where
they carry a fact (the NCCL version, the result code an error unwound with).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

import regex

from .. import knowledge, later
from ..model import Event
from ..text import Line, TextDoc

NAME = "nccl-log"
ANCHORS: tuple[bytes, ...] = (
    b"collective operation timeout",
    b"Timeout at NCCL work",
    b"WorkNCCL(",
    b"watchdog thread terminat",
    b"communicator was aborted",
    b"To avoid data inconsistency",
    b"Some NCCL operations have failed or timed out",
    b"detected by watchdog at work",
    b"dump debug info",
    b"dump the debug info",
    b"Flight Recorder",
    b"flight recorder",
    b"NCCL WARN",
    b" WARN Connection", b" WARN Call to", b" WARN Net", b" WARN NET", b".cu:",  # NCCL before 2.3: no NCCL tag
    b"NCCL INFO NCCL version",
    b".cc:",  # NCCL INFO unwinding lines ("NCCL INFO misc/socket.cc:47 -> 3"); other INFO lines are noise
    b"NCCL error",
    b"NCCL Error",
    b"NCCL failure",
    b"== ncclSuccess (",
    b"Check failed: nccl",  # glog's CHECK on an NCCL call, with NCCL's message (_CHECK_CALL)
    b"failed: unhandled cuda error", b"failed: unhandled system error", b"failed: internal error",
    b"failed: invalid usage", b"failed: invalid argument", b"failed: remote process exited",  # Horovod (_CALL_FAILED)
    b"ncclUnhandledCudaError",
    b"ncclSystemError",
    b"ncclInternalError",
    b"ncclInvalidUsage",
    b"ncclRemoteError",
    b"/dev/shm/nccl-",
)

RESULTS: dict[str, tuple[int, str]] = {
    status.name: (status.number, (status.message or status.name).split(" (run with")[0].split(" - ")[0])
    for status in knowledge.library_statuses() if status.library == "nccl"
}
"""ncclResult_t names, codes and the start of ncclGetErrorString's text (data/library-status.tsv)."""
_BY_CODE = {code: name for name, (code, _) in RESULTS.items()}

_GLOBAL_RANK = later.compile(r"\[rank(\d+)\]:")
_MSG_RANK = later.compile(r"\[(?:[^\[\]]*\s)?Rank (\d+)\]")
_ISO_TIME = later.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2})?)")
_GLOG_STAMP = later.compile(r"\[[EWIF](\d{3,4}) (\d{2}:\d{2}:\d{2}\.\d+)")
_PG = later.compile(r"\[PG (?:ID )?(\w+)")

_SEQ = later.compile(r"SeqNum=(\d+)")
_OP = later.compile(r"OpType=(\w+)")
_NUMEL_IN = later.compile(r"NumelIn=(\d+)")
_NUMEL_OUT = later.compile(r"NumelOut=(\d+)")
_TIMEOUT = later.compile(r"Timeout\(ms\)=(\d+)")
_RAN = later.compile(r"ran for (\d+) milliseconds")
_TIMEOUT_DONE = later.compile(r"timing out|timed out")
_TIMEOUT_AT = later.compile(r"Timeout at NCCL work: (?P<seq>\d+)")
_PG_PROGRESS = later.compile(
    r"detected by watchdog at work: (\d+), last enqueued NCCL work: (-?\d+), last completed NCCL work: (-?\d+)")
_ABORT_REASON = later.compile(
    r"(?:watchdog thread terminated with exception|Original reason for failure was): (?P<reason>.+)")
_ABORT_PLAIN = later.compile(r"To avoid data inconsistency|Some NCCL operations have failed or timed out")
_DUMP = later.compile(r"(?i)dump(?:ing)? (?:the )?debug info|flight recorder|nccl_trace_rank_")
_DUMP_PATH = later.compile(r"(?<!\S)[^\s/]*+(/\S*nccl_trace_rank_\S*)")

_PREFIX = r"(?:(?<![^\s:\[\]])(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<device>\d+)\] )?"
_OLD_TAG = r"(?:NCCL |(?<=\d\] [\w./-]{1,200}\.\w{1,4}:\d{1,6} ))"
"""NCCL's tag word before WARN or INFO; NCCL 1.x and the first 2.x releases printed none (`mtk:2521:2528 [0]
include/socket.h:371 WARN Connection closed by remote peer`, horovod/horovod#666), read then only after the prefix
and the source file's line that NCCL puts before it."""
_WARN = later.compile(_PREFIX + r"(?:(?<![\w./-])(?P<src>[\w./-]+\.\w+:\d+) (?:\(\w+\) )?)?"
                               + _OLD_TAG + r"WARN (?P<message>(?:.*\S)?)\s*$")
"""`host:pid:tid [dev] file:line NCCL WARN message`; NCCL 2.30 and later name the function too:
`file:line (function) NCCL WARN`."""
_INFO_VERSION = later.compile(_PREFIX + r"NCCL INFO NCCL version (?P<version>[\d.]+)(?:\+cuda(?P<cuda>[\d.]+))?")
_INFO_TRACE = later.compile(_PREFIX + r"(?:NCCL |(?<=\d\] ))INFO (?P<src>[\w./-]+\.\w+:\d+) -> (?P<code>\d+)")
_REMOTE = later.compile(r"(?:peer|to|from) (?P<remote>\S+?)<(?P<port>\d+)>")
_ERRNO = later.compile(
    r"Connection closed by remote peer|Connection refused|Connection reset by peer|Connection timed out"
    r"|Software caused connection abort|No route to host|Network is unreachable|Broken pipe"
    r"|Address already in use|Cannot assign requested address|Resource temporarily unavailable"
    r"|No such device|No space left on device|Cannot allocate memory|Operation now in progress")
_FOLD_NOISE = later.compile(r"(?<!\S)\S*<\d+>|0x[0-9a-fA-F]+|(?<![0-9a-fA-F])[0-9a-fA-F]*\d[0-9a-fA-F]*")
"""Addresses and numbers a message varies by; each alternative starts where its run starts (linear)."""

_ERROR_IN = later.compile(
    r"NCCL error in: (?P<src>\S+?:\d+), (?P<message>.+?)(?:, NCCL version (?P<version>[\w.+-]+))?\s*$")
_ERROR_CODE = later.compile(r"NCCL Error (?P<code>\d+): (?P<message>.+?)\s*$")
_FAILURE = later.compile(r"NCCL failure (?P<src>\S+:\d+) '(?P<message>[^']+)'")
_CHECK = later.compile(r"(?:(?P<src>[\w.-]+\.\w+:\d+)\] )?Check failed: \w+ == ncclSuccess \((?P<code>\d+) vs\. 0\)\s*"
                    r"(?P<message>[^.*]+?)\.?(?:\s+\*\*\*.*)?\s*$")
"""Caffe's (and NVCaffe's, DIGITS') glog CHECK on an NCCL call: `parallel.cpp:195] Check failed: result ==
ncclSuccess (1 vs. 0)  unhandled cuda error`."""
_CALL_FAILED = later.compile(r"\b(?P<call>nccl[A-Z]\w{2,40}) failed: (?P<message>[a-z][a-z ]{2,60}?)"
                             r"\s*+(?:\(run with|[.,\[]|$)")
"""Horovod's report of an NCCL call that returned an error, with ncclGetErrorString's text (horovod/common/ops/
nccl_operations.cc): `ncclCommInitRank failed: unhandled cuda error` (horovod/horovod#108, #785), `ncclAllReduce
failed: unhandled cuda error` (horovod/horovod#3618), `ncclCommInitRank failed: unhandled system error` (#1651)."""
_CHECK_CALL = later.compile(r"Check failed: (?P<call>nccl\w++)\([^()\n]{0,300}+\)"
                         r"\s*+:\s*+(?P<message>[a-z][a-z ]{2,60}?)\s*+\((?P<code>\d{1,2})\)")
"""OneFlow's glog CHECK on an NCCL call, with NCCL's message and result number: `eager_nccl_comm_manager.cpp:75] Check
failed: ncclCommInitRank(comm, device_vec.size(), nccl_unique_id, rank) : unhandled system error (2)`
(Oneflow-Inc/libai#415)."""
_ERROR_NAME = later.compile(r"\b(nccl(?:UnhandledCuda|System|Internal|InvalidArgument|InvalidUsage|Remote)Error)\b")

WRAP_WIDTH = 80
"""A line at least this long that stops mid-message may have been hard-wrapped by the pasting terminal."""


@dataclass
class _Fold:
    """Identical reports (from many ranks, or repeated) gathered into one event."""

    kind: str
    first: Line
    last: Line
    fields: dict
    text: str | None
    time: datetime | None
    ranks: set[int] = field(default_factory=set)
    reports: int = 1
    per_rank: dict[int, dict] = field(default_factory=dict)


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """Events from NCCL/ProcessGroupNCCL candidate lines, repeats folded."""
    folds: dict[tuple, _Fold] = {}
    progress: dict[tuple[int | None, int], dict] = {}
    consumed = 0
    for line in lines:
        if line.number <= consumed:
            continue
        try:
            consumed = _read(doc, line, folds, progress)
        except (ValueError, IndexError):
            continue  # an odd line is skipped, never fatal
    for fold in folds.values():
        yield _event(doc, fold, progress)


def _read(doc: TextDoc, line: Line, folds: dict, progress: dict) -> int:
    """Add what `line` says to the folds; return the last line number it used."""
    text = line.text
    if match := _PG_PROGRESS.search(text):
        global_rank, group_rank = _ranks(line.original)
        rank = global_rank if global_rank is not None else group_rank
        seen: dict[str, Any] = {"last_enqueued": int(match[2]), "last_completed": int(match[3])}
        if pg := _PG.search(text):
            seen["pg"] = pg[1]
        progress.setdefault((rank, int(match[1])), seen)
        if "operation timeout" not in text:  # a line may carry the timeout too (pasted lines run together)
            return line.number
    if "NCCL WARN" in text or (" WARN " in text and _WARN.search(text)):
        return _warn(line, folds)
    if "NCCL INFO" in text or ("] INFO " in text and _INFO_TRACE.search(text)):
        return _info(line, folds)
    if any(marker in text for marker in ("WorkNCCL(", "operation timeout", "watchdog thread terminat",
                                         "communicator was aborted", "Timeout at NCCL work")):
        joined, last = _unwrap(doc, line)
        if ((_TIMEOUT_DONE.search(joined) and ("WorkNCCL(" in joined or "operation timeout" in joined))
                or "caught collective operation timeout" in joined):  # the watchdog's words, even cut short
            _timeout(line, last, joined, folds)
            return last.number
        if match := _TIMEOUT_AT.search(joined):  # the process group's own report of the work that timed out
            _timeout(line, last, joined, folds, seq=int(match["seq"]))
            return last.number
        if reason := _ABORT_REASON.search(joined):
            _abort(line, last, joined, reason["reason"].strip(), folds)
            return last.number
    if _ABORT_PLAIN.search(text):
        _abort(line, line, text, None, folds)
        return line.number
    if _DUMP.search(text):
        _add(folds, ("dump",), "nccl-flight-recorder", line, line, text, _dump_fields(text))
        return line.number
    if match := _SHM_SEGMENT.search(text):
        _warning(folds, line, match["message"], None, {"via": "quoted"})
        return line.number
    return _error(doc, line, folds)


def _unwrap(doc: TextDoc, line: Line) -> tuple[str, Line]:
    """The message of `line` joined with the lines a terminal hard-wrapped it into."""
    joined, last, piece = line.text, line, line.text
    for nxt in doc.following(line, 4):
        complete = _TIMEOUT_DONE.search(joined) or (
            "terminat" not in joined[-12:] and "WorkNCCL(" not in joined and "operation timeout" not in joined)
        if complete or len(piece) < WRAP_WIDTH or not nxt.text.strip():
            break
        joined, last, piece = joined + nxt.text, nxt, nxt.text
    return joined, last


def _ranks(text: str) -> tuple[int | None, int | None]:
    """The global rank (`[rank3]:` prefix) and the process-group rank (`[Rank 1]`) of a message."""
    global_rank = _GLOBAL_RANK.search(text)
    group_rank = _MSG_RANK.search(text)
    return (int(global_rank[1]) if global_rank else None, int(group_rank[1]) if group_rank else None)


def _timeout(first: Line, last: Line, text: str, folds: dict, seq: int | None = None) -> None:
    fields: dict = {} if seq is None else {"seq": seq}
    for name, pattern in (("seq", _SEQ), ("numel_in", _NUMEL_IN), ("numel_out", _NUMEL_OUT),
                          ("timeout_ms", _TIMEOUT), ("ran_ms", _RAN)):
        if (match := pattern.search(text)) and name not in fields:
            fields[name] = int(match[1])
    if match := _OP.search(text):
        fields["op_type"] = match[1]
    key = ("timeout", *(fields.get(k) for k in ("seq", "op_type", "numel_in", "numel_out", "timeout_ms")))
    _add(folds, key, "nccl-timeout", first, last, text, fields)


def _abort(first: Line, last: Line, text: str, reason: str | None, folds: dict) -> None:
    fields: dict = {}
    if reason:
        fields["reason"] = reason
        if "nccl" in reason.lower() and (result := _result_of(None, reason)):
            fields["result"] = result
    _add(folds, ("abort", reason), "nccl-abort", first, last, text, fields)


def _dump_fields(text: str) -> dict:
    match = _DUMP_PATH.search(text)
    return {"path": match[1]} if match else {}


def _warn(line: Line, folds: dict) -> int:
    match = _WARN.search(line.text)
    if not match:
        return line.number
    _warning(folds, line, match["message"], match["src"], _prefix_fields(match))
    return line.number


def _warning(folds: dict, line: Line, message: str, src: str | None, fields: dict) -> None:
    """One NCCL warning's event, whether its line said `NCCL WARN` or the text came without it."""
    fields["message"] = message
    if src:
        fields["src"] = src
    if remote := _REMOTE.search(message):
        fields["remote"] = remote["remote"]
        fields["remote_port"] = int(remote["port"])
    if errno := _ERRNO.search(message):
        fields["errno_text"] = errno[0]
    key = ("warn", src, _FOLD_NOISE.sub("#", message))
    if key not in folds:  # a repeat only counts: its wording was classified with the first report
        wording = classify(message, src or "")
        fields["category"] = wording.category if wording else "other"
        if wording and wording.cause:
            fields["cause"] = wording.cause
    _add(folds, key, "nccl-warn", line, line, line.original, fields)


_SHM_SEGMENT = later.compile(r"(?P<message>(?:\b\w[\w ]{0,60}?)?shared memory segment /dev/shm/nccl-\S+.*?)\s*$")
"""NCCL's message about its own /dev/shm segment (named nccl-XXXXXX), quoted without the `NCCL WARN` that heads it,
or wrapped so that its line starts inside the message (`> while creating shared memory segment /dev/shm/nccl-...`,
an XLA error quoting it with `Error` on the line before)."""


@dataclass(frozen=True)
class Wording:
    """One row of data/nccl-warnings.tsv: which NCCL WARN wordings report what."""

    category: str
    cause: str | None
    src: regex.Pattern | None
    message: regex.Pattern | None


@cache
def wordings() -> tuple[Wording, ...]:
    """The table, loaded once, in its order (the first matching row wins)."""
    def compiled(pattern: str) -> regex.Pattern | None:
        return None if pattern == "-" else later.compile(pattern, regex.IGNORECASE)
    return tuple(Wording(row["category"], knowledge.dash(row["cause"]), compiled(row["src"]), compiled(row["regex"]))
                 for row in knowledge.data_rows("nccl-warnings.tsv"))


def classify(message: str, src: str) -> Wording | None:
    """The table's row for one warning: by its words, then by the file NCCL printed it from."""
    return next((row for row in wordings()
                 if (row.src is None or row.src.search(src)) and (row.message is None or row.message.search(message))),
                None)


def _prefix_fields(match: regex.Match) -> dict:
    if not match["host"]:
        return {}
    return {"host": match["host"], "pid": int(match["pid"]), "tid": int(match["tid"]),
            "cuda_device": int(match["device"])}


def _info(line: Line, folds: dict) -> int:
    """INFO lines with a fact: the NCCL version, and the result code an error unwound with."""
    if match := _INFO_VERSION.search(line.text):
        fields = _prefix_fields(match) | {"nccl_version": match["version"]}
        if match["cuda"]:
            fields["nccl_cuda"] = match["cuda"]
        _add(folds, ("version", match["version"]), "nccl-version", line, line, line.original, fields)
    elif (match := _INFO_TRACE.search(line.text)) and int(match["code"]) in _BY_CODE:
        code = int(match["code"])
        fields = _prefix_fields(match) | {"code": code, "result": _BY_CODE[code], "src": match["src"], "via": "trace"}
        _add(folds, ("trace", code), "nccl-error", line, line, line.original, fields)
    return line.number


def _error(doc: TextDoc, line: Line, folds: dict) -> int:
    """`NCCL error in: ...`, `NCCL failure ...`, Caffe's `Check failed: ... == ncclSuccess (N vs. 0)`, Horovod's
    `ncclAllReduce failed: ...` and `ncclSystemError: ...`, with the lines that belong to them."""
    text = line.text
    match = (_ERROR_IN.search(text) or _FAILURE.search(text) or _ERROR_CODE.search(text) or _CHECK.search(text)
             or _CHECK_CALL.search(text) or _CALL_FAILED.search(text))
    fields: dict = {}
    if match:
        groups = match.groupdict()
        fields["message"] = groups["message"].strip()
        if groups.get("src"):
            fields["src"] = groups["src"]
        if groups.get("version"):
            fields["nccl_version"] = groups["version"]
        if groups.get("code"):
            fields["code"] = int(groups["code"])
    name = _ERROR_NAME.search(text)
    result = name[1] if name else _result_of(fields.get("code"), fields.get("message") or text)
    last = line
    if match:  # PyTorch prints the result name and NCCL's "Last error:" right after
        for nxt in doc.following(line, 4):
            stripped = nxt.text.strip()
            named = _ERROR_NAME.match(stripped)
            if named:
                result = named[1]
            elif stripped == "Last error:":
                pass
            elif last.text.strip() == "Last error:" and stripped:
                fields["last_error"] = stripped
            else:
                break
            last = nxt
    if not result and not match:
        return line.number
    if result:
        fields["result"] = result
        fields.setdefault("code", RESULTS[result][0])
    key = ("error", result, fields.get("src"), fields.get("message"))
    _add(folds, key, "nccl-error", line, last, None, fields)
    if "last_error" in fields:  # NCCL's own warning, which PyTorch copies: every NCCL WARN rule reads it
        _warning(folds, last, fields["last_error"], None, {"via": "last-error"})
    return last.number


def _result_of(code: int | None, message: str) -> str | None:
    """The ncclResult_t name from a numeric code or from ncclGetErrorString's text."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    lowered = message.lower()
    by_name = next((name for name in RESULTS if name.lower() in lowered), None)
    by_text = next((name for name, (_, text) in RESULTS.items() if text.lower() in lowered), None)
    return by_name or by_text or _retyped(lowered)


RETYPED_RATIO = 0.9
"""How close (difflib's ratio) a message must be to a result's text to be read as that text retyped with a slip."""


def _retyped(message: str) -> str | None:
    """The result whose text the message's last clause is, but for a slip of the keys ("unhanled system error",
    retyped from a screenshot)."""
    import difflib

    clause = message.rsplit(",", 1)[-1].strip(" .")
    best: tuple[float, str | None] = (0.0, None)
    for name, (_, text) in RESULTS.items():
        matcher = difflib.SequenceMatcher(None, text.lower(), clause)
        # the quick ratios bound the ratio from above: most clauses are too long or too unlike to be looked at closer
        if matcher.real_quick_ratio() >= RETYPED_RATIO and matcher.quick_ratio() >= RETYPED_RATIO:
            best = max(best, (matcher.ratio(), name))
    return best[1] if best[0] >= RETYPED_RATIO else None


def _add(folds: dict, key: tuple, kind: str, first: Line, last: Line, text: str | None, fields: dict) -> None:
    """Start a fold for `key`, or count one more report of it."""
    global_rank, group_rank = _ranks(first.original if text is None else text)
    rank = global_rank if global_rank is not None else group_rank
    fold = folds.get(key)
    if fold is None:
        fields = dict(fields)
        if rank is not None:
            fields["rank"] = rank
        if global_rank is not None and group_rank is not None:
            fields["group_rank"] = group_rank
        fold = folds[key] = _Fold(kind, first, last, fields, text, _time(first.text), reports=0)
    fold.reports += 1
    if rank is not None:
        fold.ranks.add(rank)
        fold.per_rank.setdefault(rank, _rank_detail(first.original if text is None else text, fields, rank, group_rank))


def _rank_detail(text: str, fields: dict, rank: int, group_rank: int | None) -> dict:
    """What one rank's own report of a folded message says: its duration, group rank, process group and stamp.

    The stamp is glog's (month, day and time, no year: "1206 18:44:12.715298"), comparable within one log;
    a full date on the line gives "time" instead.
    """
    detail = {name: fields[name] for name in ("ran_ms",) if name in fields}
    if group_rank is not None and group_rank != rank:
        detail["group_rank"] = group_rank
    if pg := _PG.search(text):
        detail["pg"] = pg[1]
    if when := _time(text):
        detail["time"] = when.isoformat()
    if stamp := _GLOG_STAMP.search(text):
        detail["stamp"] = f"{stamp[1].rjust(4, '0')} {stamp[2][:15]}"
    return detail


def _time(text: str) -> datetime | None:
    """A full date on the line (launchers and log collectors add one); glog's year-less stamp is not enough."""
    match = _ISO_TIME.search(text)
    if not match:
        return None
    try:
        return datetime.fromisoformat(f"{match[1]} {match[2]}")
    except ValueError:
        return None


def _event(doc: TextDoc, fold: _Fold, progress: dict) -> Event:
    fields = dict(fold.fields)
    if len(fold.ranks) > 1:
        fields["ranks"] = sorted(fold.ranks)
    if fold.kind == "nccl-timeout":
        per_rank = {rank: fold.per_rank[rank] | progress.get((rank, fields.get("seq")), {})
                    for rank in sorted(fold.per_rank)}
        mine = progress.get((fields.get("rank"), fields.get("seq"))) or progress.get((None, fields.get("seq")))
        if mine:
            fields.update({k: mine[k] for k in ("last_enqueued", "last_completed")})
        if per_rank:
            fields["per_rank"] = per_rank
    count = len(fold.ranks) if len(fold.ranks) > 1 else fold.reports
    extra = {"time": fold.time, "clock": "wall"} if fold.time else {}
    text = fold.text if fold.text is not None and fold.last is fold.first else None
    return doc.event(fold.kind, fold.first, fields, last=fold.last, text=text, count=count, **extra)
