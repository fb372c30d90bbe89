"""Ranking: which finding is the root, which are its consequences, how sure we are.

A finding is a consequence of a root only along a causal path: the evidence of both names the same
pid, the same GPU (bus id, or a UUID / index join.py tied to it) or the same rank, or they are read
from one input whose lines name no pid (one writer's account), or a documented chain
(data/causal-chains.tsv: a host OOM kill -> the other ranks' NCCL timeouts) relates their causes.
Where both have times, the follower is inside the root's window; when the inputs hold several
incidents (join.apart: other hosts, other days), both are evidence of one (join.incidents). The
reason names the path ("same pid 16436", "same GPU 0000:3b:00"). Without one the two are
independent: both are shown as causes, each ranked by its own strength. Along a path, one of these
rules relates them:

- deeper layer: a cause ranked well above (bad GPU memory, a GPU off the bus, a
  host OOM kill) explains the application errors that follow it on the same
  host and GPU within a short window (never a build or driver problem);
- sticky CUDA error: after a sticky error (knowledge.cuda_error(...).sticky)
  the context is dead, so every later CUDA error of the same process (same pid,
  or the same input when no pid is known) is a consequence;
- off the bus: after Xid 79 every later CUDA error or Xid on that GPU is;
- summary: a finding whose signature has role `consequence` (Xid 154, "reset required", a failed
  probe) follows any hardware or driver root on the same host and GPU before it (not a root of severity
  info: a transient reading or a corrected error claims no failure to summarise).

A consequence-role finding that no root explains is not presented as the root: its confidence is
lowered and its reason says the root was not recognised; it still comes before a root of severity info (a
transient reading, a corrected error, a cleanup notice), which claims no failure. Findings are listed so that the first
finding of each cause comes before a second finding of a cause already listed: the top three are
three different explanations.

Followers are marked `consequence_of` the root, ranked after every root, and
listed in the root's `consequences`; the root's confidence rises with what it
explains. Each adjustment is written into the confidence reason, with the
specifics (what, where, when, how long before, which rank or pid).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cache
from pathlib import PurePath

from .join import apart, gpu_key, incidents
from .knowledge import cuda_error, data_rows
from .merge import WINDOW, merge_same_fault
from .model import Event, Finding, dated, driver_code, severity_rank
from .signatures import Cause, moment

LEAD = timedelta(minutes=1)
"""How much earlier than the root a consequence may be stamped (clock skew, buffering)."""
SOME_LEAP_YEAR = 2000
"""The year year-less stamps of one input are read in to subtract them (any leap year gives the same gaps)."""
DEEPER = 10
"""Cause-rank difference from which one cause can explain another."""
UNEXPLAINABLE_LAYERS = frozenset({"build", "driver"})
SUMMARISED_LAYERS = frozenset({"hardware", "driver/hw", "driver", "os"})
"""Layers of the roots a summary report (Xid 154, reset required) can stand for."""
UNRECOGNISED_ROOT = 0.6
"""Factor on the confidence of a summary report whose root no signature recognised."""
"""Layers no deeper event can cause: a wheel without kernels for the GPU is not a symptom of bad memory."""


@dataclasses.dataclass(frozen=True)
class _Scope:
    """What a finding's evidence says about where and when it happened."""

    first: Event | None
    """The earliest evidence event (by time, else the first listed)."""
    earliest: datetime | None
    hosts: frozenset[str]
    gpus: frozenset[str]
    pids: frozenset[int]
    ranks: frozenset[int]
    paths: frozenset[str]
    events: tuple[Event, ...]


Rule = Callable[[Finding, _Scope, Finding, _Scope], str | None]
"""A rule says why `root` explains `follower` (words), or None."""


def rank(findings: Sequence[Finding], events: Sequence[Event], causes: Mapping[str, Cause],
         incident_of: Mapping[str, int] | None = None) -> list[Finding]:
    """Findings best first, with consequences marked and confidences explained.

    `incident_of`: input path -> incident, when the inputs hold several (join.incidents; computed when not
    given); a link is drawn only between evidence of one incident.
    Findings that read one fault are merged first (merge.merge_same_fault).
    """
    findings = merge_same_fault(findings, events)
    by_id = {e.id: e for e in events}
    incident_of = incidents(events, apart(events)) if incident_of is None else incident_of
    scopes = {f.signature: _scope([by_id[i] for i in f.evidence if i in by_id]) for f in findings}

    def cause_rank(finding: Finding) -> int:
        return causes[finding.cause].rank if finding.cause in causes else 0

    def deeper(root: Finding, rs: _Scope, follower: Finding, fs: _Scope) -> str | None:
        if set(root.evidence) & set(follower.evidence):
            return None  # two readings of the same report: the surer one leads, neither explains the other
        layer = causes[follower.cause].layer if follower.cause in causes else ""
        if (cause_rank(root) - cause_rank(follower) >= DEEPER and layer not in UNEXPLAINABLE_LAYERS
                and severity_rank(root.severity) >= severity_rank("error") and _related(rs, fs)
                and (path := _path(rs, fs) or _chain(root, follower))):
            return f"{path}: {_specifics(rs, fs, follower)}"
        return None

    def summary(root: Finding, rs: _Scope, follower: Finding, fs: _Scope) -> str | None:
        layer = causes[root.cause].layer if root.cause in causes else ""
        if (follower.role == "consequence" and root.role != "consequence" and layer in SUMMARISED_LAYERS
                and root.severity != "info" and _related(rs, fs) and _before(rs, fs)
                and (path := _path(rs, fs) or _chain(root, follower))):
            return f"{follower.signature} summarises an earlier failure ({path}); {_specifics(rs, fs, follower)}"
        return None

    rules: tuple[Rule, ...] = (_after_sticky_error, _after_off_bus, _abort_after_error, summary, deeper)
    def why(root: Finding, follower: Finding) -> str | None:
        if root is follower or (root.outside and not follower.outside):
            return None
        # words explain nothing, except the message an abort carries in its own lines (C++ terminate's what())
        weak = _weak_only(root, by_id) and not _weak_only(follower, by_id)
        pairs = _per_incident(scopes[root.signature], scopes[follower.signature], incident_of)
        return next((words for rs, fs in pairs for rule in ((_abort_message,) if weak else rules)
                     if (words := rule(root, rs, follower, fs))), None)

    links = {(root.signature, follower.signature): words
             for follower in findings for root in findings if (words := why(root, follower))}
    ranked: list[Finding] = []
    consequences: dict[str, list[str]] = {}
    for finding in findings:
        roots = [
            other for other in findings
            if (other.signature, finding.signature) in links
            and not ((finding.signature, other.signature) in links and _before(scopes[finding.signature],
                                                                                scopes[other.signature]))
        ]
        if roots:
            root = max(roots, key=lambda r: (cause_rank(r), severity_rank(r.severity), r.confidence))
            consequences.setdefault(root.signature, []).append(finding.signature)
            finding = dataclasses.replace(
                finding,
                consequence_of=root.signature,
                confidence=round(finding.confidence * 0.6, 2),
                confidence_reason="; ".join([finding.confidence_reason, f"likely a consequence of {root.signature}",
                                             links[root.signature, finding.signature]]),
            )
        elif finding.role == "consequence":
            finding = dataclasses.replace(
                finding,
                confidence=round(finding.confidence * UNRECOGNISED_ROOT, 2),
                confidence_reason="; ".join([finding.confidence_reason, "this report summarises an earlier failure "
                                             "whose root was not recognised"]),
            )
        ranked.append(finding)
    ranked = [_credit(f, consequences.get(f.signature, []), by_id) for f in ranked]
    ranked.sort(
        key=lambda f: (
            _weak_only(f, by_id),
            f.consequence_of is not None,
            f.role == "consequence" or f.severity == "info",
            -severity_rank(f.severity),
            -f.confidence,
            -cause_rank(f),
            _sortable(scopes[f.signature].earliest),
        )
    )
    return _distinct_causes_first(ranked)


def _per_incident(root: _Scope, follower: _Scope, incident_of: Mapping[str, int]) -> list[tuple[_Scope, _Scope]]:
    """The two findings' evidence within each incident both have evidence in (all of it, for one incident):
    nothing of one incident explains anything of another."""
    if not incident_of:
        return [(root, follower)]
    shared = sorted({incident_of.get(p, -1) for p in root.paths} & {incident_of.get(p, -1) for p in follower.paths})
    return [(_scope([e for e in root.events if incident_of.get(e.where.path, -1) == n]),
             _scope([e for e in follower.events if incident_of.get(e.where.path, -1) == n])) for n in shared]


WEAK = frozenset({"reported-symptom", "error-words"})
"""Event kinds that are evidence by words alone: a person's account (sources/reporter_words.py) and an error line
no table holds, read by its words (sources/error_words.py). A finding resting on them alone ranks after every
finding a program's own report supports, whatever its severity, and explains none of them (a reporter's "the
desktop froze, reboot-only" is weaker than the kernel's AER line, and no cause of it)."""


def _weak_only(finding: Finding, by_id: Mapping[str, Event]) -> bool:
    kinds = {by_id[i].kind for i in finding.evidence if i in by_id}
    return bool(kinds) and kinds <= WEAK


def _distinct_causes_first(ranked: list[Finding]) -> list[Finding]:
    """The best finding of each cause, in order, then the others: alternatives, not repeats, lead."""
    seen: set[str] = set()
    leaders: list[Finding] = []
    rest: list[Finding] = []
    for finding in ranked:
        (rest if finding.cause in seen or finding.consequence_of is not None else leaders).append(finding)
        seen.add(finding.cause)
    return leaders + rest


def _after_sticky_error(root: Finding, rs: _Scope, follower: Finding, fs: _Scope) -> str | None:
    """A sticky CUDA error kills the context: later CUDA errors of that process follow from it."""
    sticky = next((e for e in rs.events if e.kind == "cuda-error" and _is_sticky(e)), None)
    errors = [e for e in fs.events if e.kind == "cuda-error"]
    if sticky is None or not errors or not _before(rs, fs, strict=True):
        return None
    pid = sticky.fields.get("pid")
    same = [e for e in errors if e.fields.get("pid") == pid] if pid is not None else \
        [e for e in errors if e.fields.get("pid") is None and e.where.path == sticky.where.path]
    if not same:
        return None
    who = f"pid {pid}" if pid is not None else "the same process"
    return (f"{sticky.fields.get('error')} is sticky: every later CUDA call of {who} fails; "
            f"{_specifics(rs, _scope(same), follower)}")


ABORT_REACH = 30
"""Most lines an error may stand before the abort that ends its process (a C++ stack trace or a CHECK's message
between them)."""


def _abort_message(root: Finding, rs: _Scope, follower: Finding, fs: _Scope) -> str | None:
    """The abort's own message (the exception's `what():` under `terminate called after throwing ...`) says why the
    process ended, even where only its words were read (ginkgo-project/ginkgo#1794: `what(): ... cuda: failed to
    allocate memory block of 91587203607B`)."""
    return _abort_after_error(root, rs, follower, fs, inside_only=True)


LOAD_FAILURE_CRASHES = ("SIGSEGV", "SIGBUS")
"""Crashes that end a process which said it could not load its input (a root of cause `unknown`: a model file it
could not parse, data of the wrong shape) and went on: it dereferences what it never loaded ("Parse onnx failed."
then a segfault, NVIDIA-AI-IOT/Lidar_AI_Solution#62), so the crash is the failed load's last step, as an abort is."""


def _abort_after_error(root: Finding, rs: _Scope, follower: Finding, fs: _Scope,
                       inside_only: bool = False) -> str | None:
    """A process that reports an error and then aborts (a failed CHECK on the error, an uncaught exception, a
    fatal-error handler) died of the error: the abort is its last step (and so is a crash after a failed load of its
    input, LOAD_FAILURE_CRASHES). Both in one input, the error at most
    ABORT_REACH lines before the abort or inside the abort's own lines (`terminate called after throwing ...` and the
    exception's `what():` under it; only there when `inside_only`), and no pid that tells them apart."""
    ends = ("SIGABRT", *LOAD_FAILURE_CRASHES) if root.cause == "unknown" else ("SIGABRT",)
    aborts = [e for e in fs.events
              if e.kind in ("fatal-signal", "child-failed") and e.fields.get("signal") in ends]
    if not aborts or len(aborts) != len(fs.events) or root.role == "consequence" or root.cause == follower.cause:
        return None
    for abort in aborts:
        for error in rs.events:
            if (error.where.path == abort.where.path and error.where.line is not None and abort.where.line is not None
                    and ((not inside_only
                          and 0 <= abort.where.line - (error.where.end_line or error.where.line) <= ABORT_REACH)
                         or abort.where.line <= error.where.line <= (abort.where.end_line or abort.where.line))
                    and error.fields.get("pid") in (None, abort.fields.get("pid"))):
                return (f"the abort at line {abort.where.line} of {abort.where.path} ends the process that reported "
                        f"{root.signature} at line {error.where.line}")
    return None


def _after_off_bus(root: Finding, rs: _Scope, follower: Finding, fs: _Scope) -> str | None:
    """After Xid 79 the GPU is gone until reset: every later CUDA error or Xid on it is a consequence."""
    if not any(e.kind == "xid" and e.fields.get("xid") == 79 for e in rs.events):
        return None
    if not any(e.kind == "cuda-error" or (e.kind == "xid" and e.fields.get("xid") != 79) for e in fs.events):
        return None
    if (rs.hosts and fs.hosts and not rs.hosts & fs.hosts) or (rs.gpus and fs.gpus and not rs.gpus & fs.gpus):
        return None
    if rs.earliest is not None and fs.earliest is not None and comparable(rs.earliest, fs.earliest) \
            and moment(fs.earliest) < moment(rs.earliest):
        return None
    path = _path(rs, fs)
    return f"the GPU fell off the bus first ({path}); {_specifics(rs, fs, follower)}" if path else None


def happened_before(first: Event, second: Event) -> bool:
    """Did `first` come no later than `second` (by time when both have one, else by line in one input)?"""
    return _before(_scope([first]), _scope([second]))


def _is_sticky(event: Event) -> bool:
    if event.fields.get("sticky") in ("yes", "no"):
        return event.fields["sticky"] == "yes"
    record = cuda_error(event.fields["error"]) if event.fields.get("error") else None
    return record is not None and record.sticky == "yes"


def _before(first: _Scope, second: _Scope, strict: bool = False) -> bool:
    """Did `first` begin before `second`? By time when both have one, else by line in the same input."""
    if first.earliest is not None and second.earliest is not None and comparable(first.earliest, second.earliest):
        a, b = moment(first.earliest), moment(second.earliest)
        return a < b if strict else a <= b
    if first.first is None or second.first is None or first.first.where.path != second.first.where.path:
        return False
    a, b = first.first.where.line or 0, second.first.where.line or 0
    return a < b if strict else a <= b


def _specifics(root: _Scope, follower: _Scope, finding: Finding) -> str:
    """'Xid 48 on 0000:3b:00.0 at 10:02:11, 1.2 s before the cudaErrorIllegalAddress error of rank 3 on the
    same GPU': the parts the evidence gives, in that order."""
    cause, effect = root.first, follower.first
    if cause is None or effect is None:
        return f"before {finding.signature}"
    words = [_label(cause)]
    if cause.fields.get("pci"):
        words.append(f"on {cause.fields['pci']}")
    elif cause.fields.get("host"):
        words.append(f"on {cause.fields['host']}")
    if cause.time is not None:
        words.append(f"at {cause.time.strftime('%H:%M:%S')}")
    elif cause.fields.get("stamp"):
        words.append(f"at {str(cause.fields['stamp']).split()[-1]}")
    gap = _gap(cause.time, effect.time) or _span(_seconds_in_input(cause, effect))
    sentence = " ".join(words) + (f", {gap} before" if gap else ", before") + f" the {_label(effect, finding)}"
    if who := _who(effect):
        sentence += f" of {who}"
    if root.gpus and root.gpus & follower.gpus:
        sentence += " on the same GPU"
    elif root.hosts and root.hosts & follower.hosts:
        sentence += " on the same host"
    return sentence


def _label(event: Event, finding: Finding | None = None) -> str:
    """What an event is, in a few words: 'Xid 48', 'cudaErrorIllegalAddress error', else the signature."""
    if code := driver_code(event):
        return code
    if event.fields.get("error"):
        return f"{event.fields['error']} error"
    return f"{finding.signature} report" if finding else event.kind


def _who(event: Event) -> str | None:
    rank, pid = event.fields.get("rank"), event.fields.get("pid")
    if rank is not None:
        return f"rank {rank}" + (f" (pid {pid})" if pid is not None else "")
    return f"pid {pid}" if pid is not None else None


def _path(root: _Scope, follower: _Scope) -> str | None:
    """The identity both findings' evidence names, in words: one process, one GPU or one rank of one input ties
    them; else one input in which neither names a pid (one writer's account: a process's own log, the driver's
    lines of one GPU). An input whose lines name pids (a kernel log) holds many processes: it ties nothing by
    itself."""
    # a rank names a process only within one job's log: another input's rank 3 may be another job's
    ranks = root.ranks & follower.ranks if root.paths & follower.paths else set()
    for name, shared in (("pid", root.pids & follower.pids), ("GPU", root.gpus & follower.gpus), ("rank", ranks)):
        if shared:
            return f"same {name} {min(shared)}"
    for path in sorted(root.paths & follower.paths):
        if not any(isinstance(e.fields.get("pid"), int) for e in (*root.events, *follower.events)
                   if e.where.path == path):
            return f"same input {PurePath(path).name}"
    return None


@cache
def _chains() -> dict[tuple[str, str], str]:
    """(root cause, follower cause) -> the documented path between them (data/causal-chains.tsv)."""
    return {(row["root"], row["follower"]): row["path"] for row in data_rows("causal-chains.tsv")}


def _chain(root: Finding, follower: Finding) -> str | None:
    return _chains().get((root.cause, follower.cause))


def _gap(earlier: datetime | None, later: datetime | None) -> str | None:
    if earlier is None or later is None or not comparable(earlier, later):
        return None
    return _span(moment(later) - moment(earlier))


def _span(seconds: float | None) -> str | None:
    if seconds is None or seconds < 0:
        return None
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def comparable(a: datetime, b: datetime) -> bool:
    """Two times that can be subtracted: both with a zone or both without (a log's local clock)."""
    return (a.tzinfo is None) == (b.tzinfo is None)


def _credit(finding: Finding, explains: Sequence[str], by_id: Mapping[str, Event]) -> Finding:
    """Raise a root's confidence for corroboration: several inputs, or followers it explains."""
    inputs = len({by_id[i].where.path for i in finding.evidence if i in by_id})
    bonus, notes = 0.0, []
    if explains:
        bonus += 0.05 * min(len(explains), 2)
        notes.append(f"explains {len(explains)} later finding{'s' * (len(explains) != 1)}")
    if inputs > 1:
        bonus += 0.03
        notes.append("seen in several inputs")
    if not notes:
        return finding
    return dataclasses.replace(
        finding,
        consequences=tuple(explains),
        confidence=round(min(0.99, finding.confidence + bonus), 2),
        confidence_reason="; ".join([finding.confidence_reason, *notes]),
    )


def _scope(evidence: Sequence[Event]) -> _Scope:
    """Times, hosts, GPUs, pids and inputs of the evidence; a pci the join stage proved counts too."""
    timed = sorted(((e.time, e) for e in evidence if e.time is not None), key=lambda pair: moment(pair[0]))
    first = timed[0][1] if timed else (evidence[0] if evidence else None)
    hosts = frozenset(str(e.fields["host"]) for e in evidence if e.fields.get("host"))
    gpus = frozenset(key for e in evidence if (key := gpu_key(e.fields.get("pci"))))
    pids = frozenset(e.fields["pid"] for e in evidence if isinstance(e.fields.get("pid"), int))
    ranks = frozenset(r for e in evidence for r in (e.fields.get("rank"), *(e.fields.get("ranks") or ()))
                      if isinstance(r, int))
    paths = frozenset(e.where.path for e in evidence)
    return _Scope(first, timed[0][0] if timed else None, hosts, gpus, pids, ranks, paths, tuple(evidence))


def _related(root: _Scope, follower: _Scope) -> bool:
    """Could the root have caused the follower? Unknowns count as 'could'."""
    if root.hosts and follower.hosts and not root.hosts & follower.hosts:
        return False
    if root.gpus and follower.gpus and not root.gpus & follower.gpus:
        return False
    window = _window(follower)
    if root.earliest is None or follower.earliest is None or not comparable(root.earliest, follower.earliest):
        seconds = _seconds_in_input(root.first, follower.first)
        return seconds is None or -LEAD.total_seconds() <= seconds <= window.total_seconds()
    return root.earliest - LEAD <= follower.earliest <= root.earliest + window


def _window(follower: _Scope) -> timedelta:
    """How long after its root a follower may appear: WINDOW, or the longest timeout the follower reports (a
    collective's watchdog fires Timeout(ms) after the wait began, whatever stopped the peer) plus LEAD."""
    timeouts = [e.fields["timeout_ms"] for e in follower.events if isinstance(e.fields.get("timeout_ms"), int)]
    return max(WINDOW, timedelta(milliseconds=max(timeouts)) + LEAD) if timeouts else WINDOW


def _seconds_in_input(root: Event | None, follower: Event | None) -> float | None:
    """Seconds from root to follower on a clock of their one input, when there is no date to compare: the
    year-less stamps as written (read in one leap year, so Feb 29 exists), else the kernel's uptime. A year-less
    or uptime-only log still has a window."""
    if root is None or follower is None or root.where.path != follower.where.path:
        return None
    start, end = (dated(str(e.fields.get("stamp") or ""), SOME_LEAP_YEAR) for e in (root, follower))
    if start is not None and end is not None:
        return (end - start).total_seconds()
    since, until = root.fields.get("uptime"), follower.fields.get("uptime")
    if not isinstance(since, (int, float)) or not isinstance(until, (int, float)):
        return None
    return float(until) - float(since)


def _sortable(moment_: datetime | None) -> float:
    return float("inf") if moment_ is None else moment(moment_)
