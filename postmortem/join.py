"""Join: one incident from many inputs.

Each source reads one input; the dmesg names a GPU by bus id and a pid, the
training log names a rank, nvidia-smi names a UUID and an index. This stage
builds identity maps over ALL events (GPU: bus id <-> UUID <-> nvidia-smi index;
pid -> process, GPU, rank, host; rank -> pid) and copies onto each event only
what those maps prove, naming the proof in fields["joined"] (field -> why), so a
reader can check every added value. It also puts uptime-only kernel lines on
the wall clock when another input anchors their boot, and compares the NCCL
watchdog reports of several ranks to name the rank that stopped first.

A plain function over events: events are replaced, never changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .model import YEARLESS, Event, Location, dated

NVML_KINDS = frozenset({"gpu-state", "dcgm-health"})
"""Kinds whose gpu_index is nvidia-smi's (NVML, PCI order); elsewhere gpu_index is a CUDA device ordinal."""
PID_REUSE = timedelta(days=1)
"""Two reports of one pid further apart than this may be two processes (pids are recycled)."""
BOOT_SLACK = timedelta(seconds=2)
"""Anchors whose boot times differ by less than this are one boot (wall stamps are cut to seconds)."""


def gpu_key(pci: object) -> str | None:
    """The one spelling of a PCI address, used to join, collect and print GPUs: 0000:3b:00 (NVRM Xid lines),
    0000:3b:00.0 (the kernel), 00000000:3B:00.0 (nvidia-smi), 3b:00.0 (lspci), PCI:3b:00 all become 0000:3b:00.0.
    A driver line without a function names the GPU itself, function 0; None when it is no PCI address."""
    text = str(pci or "").strip().lower().removeprefix("pci:")
    slot, _, function = text.partition(".")
    parts = slot.split(":")
    if len(parts) == 2:
        parts.insert(0, "0000")
    function = function or "0"
    if (len(parts) != 3 or not all(parts) or not all(c in "0123456789abcdef" for c in "".join(parts))
            or len(function) != 1 or function not in "01234567"):
        return None
    return f"{parts[0][-4:].rjust(4, '0')}:{parts[1].rjust(2, '0')}:{parts[2].rjust(2, '0')}.{function}"


DRIVER_KINDS = frozenset({"xid", "sxid", "gpu-off-bus", "gpu-init-failed"})
"""Driver-reported events that get the host's driver version, so that signatures of known driver bugs can
match on it (only when the inputs state one version for that host)."""


def join(events: Sequence[Event]) -> list[Event]:
    """The events enriched with what the identity maps prove, on one clock, plus NCCL suspect events."""
    events = [_spelled(event) for event in events]
    maps = _Maps.build(events)
    joined = [_enrich(event, maps) for event in events]
    joined = _place_uptimes(infer_years(joined))
    return joined + nccl_suspects(joined)


def _spelled(event: Event) -> Event:
    """The event with its GPU's address in the one spelling (gpu_key), so two spellings are one GPU everywhere after."""
    pci = event.fields.get("pci")
    key = gpu_key(pci)
    if key is None or key == pci:
        return event
    return dataclasses.replace(event, fields={**event.fields, "pci": key})


# ------------------------------------------------------------------ identity maps

@dataclasses.dataclass(frozen=True)
class _Proof:
    """A value one event states, with where it says so (the `joined` provenance)."""

    value: Any
    why: str
    host: str | None
    time: datetime | None


class _Claims:
    """Values stated per key (a pid, a rank, an index); a key stated two different ways proves nothing."""

    def __init__(self) -> None:
        self._claims: dict[tuple, _Proof | None] = {}

    def state(self, key: tuple, proof: _Proof) -> None:
        if key not in self._claims:
            self._claims[key] = proof
        elif (held := self._claims[key]) is not None and held.value != proof.value:
            self._claims[key] = None

    def get(self, key: tuple) -> _Proof | None:
        return self._claims.get(key)


@dataclasses.dataclass
class _Maps:
    hosts: frozenset[str]
    gpus: _Claims  # ("uuid", uuid) / ("smi", host, index) / ("visible", pid) -> pci or visible list
    pids: _Claims  # (pid, field) -> value
    ranks: _Claims  # (rank,) -> pid
    drivers: _Claims  # (host,) -> the driver version the inputs state for it
    same_model: bool  # every nvidia-smi GPU is one model: CUDA's default order is then PCI order

    @classmethod
    def build(cls, events: Sequence[Event]) -> _Maps:
        hosts = frozenset(str(e.fields["host"]) for e in events if e.fields.get("host"))
        maps = cls(hosts, _Claims(), _Claims(), _Claims(), _Claims(), False)
        models = set()
        for event in events:
            maps._learn(event)
            if event.kind == "gpu-state":
                models.add(event.fields.get("gpu_name"))
        maps.same_model = len(models) == 1
        return maps

    def _learn(self, event: Event) -> None:
        f = event.fields
        host = f.get("host") if len(self.hosts) > 1 else None
        pci = f.get("pci") if gpu_key(f.get("pci")) else None

        def proof(value: Any, what: str) -> _Proof:
            return _Proof(value, f"{what} ({_place(event)})", f.get("host"), _comparable(event))

        if f.get("driver_version"):
            self.drivers.state((host,), proof(f["driver_version"], f"driver {f['driver_version']}"))
        if pci and f.get("gpu_uuid"):
            self.gpus.state(("uuid", str(f["gpu_uuid"]).lower()), proof(pci, f"{f['gpu_uuid']} is at {pci}"))
        if pci and event.kind in NVML_KINDS and f.get("gpu_index") is not None:
            self.gpus.state(("smi", host, f["gpu_index"]), proof(pci, f"nvidia-smi GPU {f['gpu_index']} is {pci}"))
        if f.get("cuda_visible_devices") and f.get("pid") is not None:
            self.gpus.state(("visible", f["pid"]), proof(_visible(f["cuda_visible_devices"]),
                                                         f"CUDA_VISIBLE_DEVICES={f['cuda_visible_devices']}"))
        for pid in _pids(event):
            for name in ("process", "rank", "cuda_device") + (("pci",) if event.kind == "xid" else ()):
                value = f.get(name)
                if value is not None and not (name == "pci" and not pci):
                    self.pids.state((host, pid, name), proof(value, f"{event.kind} pid {pid}"))
        if f.get("rank") is not None and f.get("pid") is not None:
            self.ranks.state((f["rank"],), proof(f["pid"], f"rank {f['rank']} is pid {f['pid']}"))


def _visible(value: object) -> list[str]:
    return [part.strip() for part in str(value).split(",") if part.strip()]


def _pids(event: Event) -> list[int]:
    """The pids an event names: its own, and for folded Xids every pid folded in."""
    pids = [event.fields.get("pid"), *event.fields.get("pids", ())]
    return sorted({p for p in pids if isinstance(p, int) and p > 0})


def _place(event: Event) -> str:
    where = event.where
    return f"{where.path}:{where.line}" if where.line is not None else where.path


def _comparable(event: Event) -> datetime | None:
    """The event's time when it is a real date (a placeholder year would compare years apart)."""
    return event.time if event.clock in ("wall", "uptime+boot") else None


# ------------------------------------------------------------------ enrichment

def _enrich(event: Event, maps: _Maps) -> Event:
    f = event.fields
    added: dict[str, Any] = {}
    why: dict[str, str] = {}

    def add(name: str, proof: _Proof | None) -> None:
        if proof is not None and f.get(name) in (None, "") and name not in added and _fits(event, proof):
            added[name], why[name] = proof.value, proof.why

    if len(maps.hosts) == 1 and not f.get("host"):
        add("host", _Proof(next(iter(maps.hosts)), "the only host named in the inputs", None, None))
    host = f.get("host") if len(maps.hosts) > 1 else None
    if f.get("rank") is not None and len(f.get("ranks") or ()) <= 1:  # a report folded from many ranks has no one pid
        add("pid", maps.ranks.get((f["rank"],)))
    pids: list[int | None] = [*_pids(event)] or [added.get("pid")]
    for pid in pids:
        for name in ("process", "rank", "cuda_device", "pci"):
            add(name, maps.pids.get((host, pid, name)))
    if not f.get("pci") and "pci" not in added:
        add("pci", _gpu_of(event, {**f, **added}, maps, host))
    if event.kind in DRIVER_KINDS:
        add("driver_version", maps.drivers.get((host,)))
    if not added:
        return event
    return dataclasses.replace(event, fields={**f, **added, "joined": {**f.get("joined", {}), **why}})


def _fits(event: Event, proof: _Proof) -> bool:
    """A proof from another event applies unless hosts differ or a recycled pid could be meant."""
    host = event.fields.get("host")
    if proof.host and host and proof.host != host:
        return False
    moment = _comparable(event)
    if moment is None or proof.time is None or (moment.tzinfo is None) != (proof.time.tzinfo is None):
        return True
    return abs(moment - proof.time) <= PID_REUSE


def _gpu_of(event: Event, fields: dict, maps: _Maps, host: str | None) -> _Proof | None:
    """The bus id of the GPU an event names by UUID, nvidia-smi index or CUDA device ordinal."""
    if fields.get("gpu_uuid"):
        return maps.gpus.get(("uuid", str(fields["gpu_uuid"]).lower()))
    if event.kind in NVML_KINDS:
        return maps.gpus.get(("smi", host, fields.get("gpu_index")))
    ordinal = fields.get("gpu_index", fields.get("cuda_device"))
    visible = maps.gpus.get(("visible", fields.get("pid")))
    if ordinal is None and visible is not None and len(visible.value) == 1:
        ordinal = 0  # a process that sees one GPU can only have used that one
    if not isinstance(ordinal, int):
        return None
    if visible is not None:
        if ordinal >= len(visible.value):
            return None
        entry = visible.value[ordinal]
        target = maps.gpus.get(("uuid", entry.lower())) if entry.lower().startswith("gpu-") else (
            maps.gpus.get(("smi", host, int(entry))) if entry.isdigit() else None)
        return _chain(f"CUDA device {ordinal} -> {visible.why}", target)
    if maps.same_model:
        return _chain(f"CUDA device {ordinal} = nvidia-smi GPU {ordinal} (identical GPUs, no CUDA_VISIBLE_DEVICES "
                      "in the inputs)", maps.gpus.get(("smi", host, ordinal)))
    return None


def _chain(step: str, proof: _Proof | None) -> _Proof | None:
    return None if proof is None else dataclasses.replace(proof, why=f"{step}; {proof.why}")


# ------------------------------------------------------------------ one clock

def _place_uptimes(events: list[Event]) -> list[Event]:
    """Uptime-only kernel events placed on the wall clock by a boot another input anchors."""
    anchors = [e for e in events if e.time is not None and e.clock == "wall"
               and isinstance(e.fields.get("uptime"), (int, float))]
    if not anchors:
        return events
    return [_placed(e, anchors) if e.time is None and isinstance(e.fields.get("uptime"), (int, float)) else e
            for e in events]


YEAR_REACH = timedelta(days=183)
"""Farthest a year-less stamp may lie from the dated event that lends it a year: within half a year, only one
year puts them this close."""


def infer_years(events: list[Event]) -> list[Event]:
    """Year-less stamps given the year that puts them nearest a dated event of another input of the incident
    (same host, or one of the two names none), within YEAR_REACH; the rest stay year-less."""
    dated_events = [e for e in events if e.time is not None and e.clock == "wall"]
    if not dated_events:
        return events
    return [_with_year(e, dated_events) if e.clock == YEARLESS and isinstance(e.fields.get("stamp"), str) else e
            for e in events]


def _with_year(event: Event, dated_events: list[Event]) -> Event:
    host = event.fields.get("host")
    best: tuple[timedelta, datetime, Event] | None = None
    for other in dated_events:
        if other.where.path == event.where.path or (host and other.fields.get("host") not in (None, host)):
            continue
        assert other.time is not None  # infer_years lends years only from events with a time
        near = other.time.replace(tzinfo=None)
        for year in (near.year - 1, near.year, near.year + 1):
            moment = dated(event.fields["stamp"], year)
            if moment is not None and (best is None or abs(moment - near) < best[0]):
                best = (abs(moment - near), moment, other)
    if best is None or best[0] > YEAR_REACH:
        return event
    _, moment, source = best
    fields = {k: v for k, v in event.fields.items() if k not in ("stamp", "last_stamp")}
    if (last := dated(str(event.fields.get("last_stamp", "")), moment.year)) is not None:
        fields["last_time"] = last if last >= moment else last.replace(year=moment.year + 1)
    why = f"year {moment.year} from {_place(source)} (the nearest dated event of another input)"
    fields["joined"] = {**event.fields.get("joined", {}), "time": why}
    return dataclasses.replace(event, time=moment, clock="wall", fields=fields)


def _placed(event: Event, anchors: list[Event]) -> Event:
    uptime = float(event.fields["uptime"])
    host = event.fields.get("host")
    others = [a for a in anchors if a.where.path != event.where.path
              and (not host or not a.fields.get("host") or a.fields["host"] == host)]
    same = [a for a in others if a.fields["uptime"] == uptime]  # the same kernel record: the same boot
    candidates = same or others
    found = {_boot(a) for a in candidates}
    dated = {b for b in found if b is not None}
    if not found or len(dated) < len(found) or len({b.tzinfo is None for b in dated}) > 1:
        return event  # no anchor, a boot no date can hold, or naive and zoned clocks: no one boot is proven
    boots = sorted(dated)
    moment = shifted(boots[0], uptime)
    if boots[-1] - boots[0] > BOOT_SLACK or moment is None:
        return event  # several boots (which one is unknown), or an uptime no date can hold
    anchor = candidates[0]
    reason = "the same record" if same else "the only boot in the inputs"
    why = f"boot {boots[0].isoformat()} from {_place(anchor)} ({reason})"
    fields = {**event.fields, "joined": {**event.fields.get("joined", {}), "time": why}}
    return dataclasses.replace(event, time=moment, clock="uptime+boot", fields=fields)


def _boot(anchor: Event) -> datetime | None:
    assert anchor.time is not None  # _place_uptimes anchors only events with a time
    return shifted(anchor.time, -float(anchor.fields["uptime"]))


def shifted(moment: datetime, seconds: float) -> datetime | None:
    """`moment` moved by `seconds`, or None past the years a datetime holds (an uptime of 3e11 s, a NaN)."""
    try:
        return moment + timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return None


# ------------------------------------------------------------------ NCCL: who stopped first

FAILED_KINDS = frozenset({"python-exception", "cuda-error", "child-failed", "fatal-signal", "gpu-oom", "oom-kill",
                          "segfault", "core-signal", "coredump"})
"""Events that say a rank died or failed on its own (rather than waiting in a collective)."""


def nccl_suspects(events: Sequence[Event]) -> list[Event]:
    """One `nccl-suspect` event when watchdog timeouts of two or more ranks can be compared."""
    reports = _rank_reports(e for e in events if e.kind == "nccl-timeout")
    if len(reports) < 2:
        return []
    failed = _failed_ranks(events, set(reports))
    progress = {rank: _progress(rank, report) for rank, report in reports.items()}
    behind = sorted(rank for rank, done in progress.items() if done == min(progress.values()))
    if len(failed) == 1:
        suspect, rank_event = next(iter(failed.items()))
        reason = (f"rank {suspect} logged no watchdog timeout but failed on its own ({rank_event.kind} at "
                  f"{_place(rank_event)}) while ranks {_names(reports)} waited in a collective")
    elif len(set(progress.values())) > 1 and len(behind) == 1:
        suspect = behind[0]
        ahead = sorted(set(reports) - {suspect})
        reason = (f"rank {suspect} completed fewer collectives (last completed {progress[suspect]}) than ranks "
                  f"{_names(ahead)} (last completed {min(progress[r] for r in ahead)} or later): it stopped first "
                  f"and the others waited for it")
    else:
        suspect = None
        reason = (f"no single suspect: ranks {_names(behind)} stopped at the same point (last completed "
                  f"{progress[behind[0]]}); look for a rank that logged no "
                  "timeout here (it hung or died first) or for a network fault")
    per_rank = [_summary(rank, report) for rank, report in sorted(reports.items())]
    first = reports[suspect] if suspect in reports else min(reports.values(), key=lambda r: r.where.line or 0)
    fields: dict[str, Any] = {
        "suspect_rank": suspect, "reason": reason, "ranks": sorted(reports), "per_rank": per_rank,
        "summary": "; ".join(entry["doing"] for entry in per_rank),
    }
    order = _report_order(per_rank)
    fields.update(order)
    if suspect is None and order and order["first_report"]["rank"] != order["last_report"]["rank"]:
        last = order["last_report"]
        fields["reason"] = reason = (f"{reason}; rank {last['rank']} was the last to report its timeout "
                                     f"({last.get('time') or last.get('stamp')}): it entered the collective last")
    if suspect is not None:
        fields["suspect_doing"] = (per_rank[sorted(reports).index(suspect)]["doing"] if suspect in reports
                                   else f"rank {suspect}: {failed[suspect].kind} at {_place(failed[suspect])}")
    text = f"NCCL ranks compared: {reason}"
    return [Event("nccl-suspect", Location(first.where.path, first.where.line, first.where.end_line), text, fields,
                  first.time, first.clock)]


def _rank_reports(timeouts: Iterable[Event]) -> dict[int, Event]:
    """Each rank's earliest-sequence watchdog timeout, among reports of one process group.

    A report whose global rank differs from its group rank comes from a
    sub-group; its sequence numbers count another communicator's work and are
    not compared.
    """
    reports: dict[int, Event] = {}
    for event in timeouts:
        f = event.fields
        for rank in f.get("ranks") or ([f["rank"]] if f.get("rank") is not None else []):
            own = _own(rank, event)
            group_rank = own.get("group_rank", f.get("group_rank") if rank == f.get("rank") else None)
            if group_rank is not None and group_rank != rank:
                continue
            if rank not in reports or f.get("seq", 0) < reports[rank].fields.get("seq", 0):
                reports[rank] = event
    return reports


def _own(rank: int, report: Event) -> dict[str, Any]:
    """What `rank` itself said in a report folded from several ranks (the source's fields["per_rank"])."""
    per_rank = report.fields.get("per_rank") or {}
    return per_rank.get(rank) or per_rank.get(str(rank)) or {}


def _failed_ranks(events: Sequence[Event], waiting: set[int]) -> dict[int, Event]:
    """Ranks that failed on their own (an error, a crash) and logged no timeout: the first report of each."""
    failed: dict[int, Event] = {}
    for event in events:
        rank = event.fields.get("rank")
        if (event.kind in FAILED_KINDS and isinstance(rank, int) and rank not in waiting
                and not event.fields.get("ranks")):
            failed.setdefault(rank, event)
    return failed


def _progress(rank: int, report: Event) -> int:
    """How far a rank got: its own last completed collective, else the one before the one it timed out in."""
    done = _own(rank, report).get("last_completed")
    if done is None and (report.fields.get("rank") == rank or not report.fields.get("per_rank")):
        done = report.fields.get("last_completed")
    return done if isinstance(done, int) else int(report.fields.get("seq", 0)) - 1


def _summary(rank: int, report: Event) -> dict[str, Any]:
    """One rank's line: what it waited in, for how long, how far it got, when it said so."""
    f = report.fields
    own = _own(rank, report) or ({k: f[k] for k in ("ran_ms", "last_enqueued", "last_completed") if k in f}
                                 if f.get("rank") == rank else {})
    doing = f"rank {rank}: waiting in {f.get('op_type', 'a collective')} SeqNum={f.get('seq', '?')}"
    if own.get("ran_ms") is not None:
        doing += f" for {own['ran_ms']} ms"
    if own.get("last_completed") is not None:
        doing += f", last completed {own['last_completed']}"
    entry = {"rank": rank, "doing": doing, "where": _place(report)}
    entry.update({k: f[k] for k in ("op_type", "seq") if k in f})
    entry.update({k: own[k] for k in ("ran_ms", "last_enqueued", "last_completed", "pg", "time", "stamp") if k in own})
    return entry


def _report_order(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """Which rank's watchdog reported first and last, when every rank's report carries a comparable stamp.

    The first to report entered the collective first (it waited longest); the last entered it last.
    """
    for key in ("time", "stamp"):
        stamped = [entry for entry in per_rank if entry.get(key)]
        if len(stamped) == len(per_rank) > 1:
            ordered = sorted(stamped, key=lambda entry: entry[key])
            return {"first_report": {"rank": ordered[0]["rank"], key: ordered[0][key]},
                    "last_report": {"rank": ordered[-1]["rank"], key: ordered[-1][key]}}
    return {}


def _names(ranks: Iterable[int]) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


# ------------------------------------------------------------------ one incident?

@dataclasses.dataclass(frozen=True)
class _Input:
    """What one input's events say about where and when it happened."""

    path: str
    hosts: frozenset[str]
    pids: frozenset[int]
    gpus: frozenset[str]
    spans: dict[bool, tuple[datetime, datetime]]
    """Earliest and latest real date, for zoned (True) and naive (False) stamps apart: they do not compare."""


def apart(events: Sequence[Event]) -> dict[tuple[str, str], str]:
    """Pairs of inputs (in input order) that cannot be one incident, with the proof in words.

    Only proofs count, never missing identity: both name hosts and share none; both carry real dates more
    than PID_REUSE apart; or both name pids and GPUs, share neither, and name no common host (on one
    host, two processes on two GPUs may be two ranks of one job).
    """
    inputs = _inputs(events)
    return {(a.path, b.path): why for i, a in enumerate(inputs) for b in inputs[i + 1:] if (why := _apart(a, b))}


def _inputs(events: Sequence[Event]) -> list[_Input]:
    paths = list(dict.fromkeys(e.where.path for e in events))
    mine: dict[str, list[Event]] = {path: [] for path in paths}
    for event in events:
        mine[event.where.path].append(event)
    return [_input(path, mine[path]) for path in paths]


def _input(path: str, events: list[Event]) -> _Input:
    moments = [m for e in events if (m := _comparable(e)) is not None]
    spans = {aware: (min(group), max(group))
             for aware in (False, True) if (group := [m for m in moments if (m.tzinfo is not None) == aware])}
    return _Input(path, frozenset(str(e.fields["host"]) for e in events if e.fields.get("host")),
                  frozenset(pid for e in events for pid in _pids(e)),
                  frozenset(key for e in events if (key := gpu_key(e.fields.get("pci")))), spans)


def _apart(a: _Input, b: _Input) -> str | None:
    if a.hosts and b.hosts and not a.hosts & b.hosts:
        return f"different hosts ({', '.join(sorted(a.hosts))} / {', '.join(sorted(b.hosts))})"
    for aware in set(a.spans) & set(b.spans):
        (a_first, a_last), (b_first, b_last) = a.spans[aware], b.spans[aware]
        gap = max(a_first, b_first) - min(a_last, b_last)
        if gap > PID_REUSE:
            end, start = (a_last, b_first) if a_last < b_first else (b_last, a_first)
            return f"different days ({end.date().isoformat()} / {start.date().isoformat()}, {gap.days} days apart)"
    if a.pids and b.pids and a.gpus and b.gpus and not (a.pids & b.pids or a.gpus & b.gpus or a.hosts & b.hosts):
        return (f"different processes on different GPUs (pid {_names(a.pids)} on {', '.join(sorted(a.gpus))} / "
                f"pid {_names(b.pids)} on {', '.join(sorted(b.gpus))})")
    return None


def incidents(events: Sequence[Event], separate: Mapping[tuple[str, str], str]) -> dict[str, int]:
    """Input path -> incident number, when `separate` (apart) proves the inputs hold several incidents; else {}.

    Inputs join one incident only on a tie: a host name both name, or a pid both name (within PID_REUSE where both
    are dated), never across a proof that they are apart. An input tied to none is an incident of its own.
    """
    if not separate:
        return {}
    inputs = _inputs(events)
    parent = {a.path: a.path for a in inputs}

    def find(path: str) -> str:
        while parent[path] != path:
            path = parent[path]
        return path

    for i, a in enumerate(inputs):
        for b in inputs[i + 1:]:
            if (a.path, b.path) not in separate and (a.hosts & b.hosts or a.pids & b.pids):
                parent[find(b.path)] = find(a.path)
    numbers = {path: n for n, path in enumerate(dict.fromkeys(find(a.path) for a in inputs))}
    return {a.path: numbers[find(a.path)] for a in inputs}


def incidents_note(separate: Mapping[tuple[str, str], str], inputs: int) -> str | None:
    """One sentence for the report when the inputs hold several incidents, with what to use instead."""
    if not separate:
        return None
    paths = {path for pair in separate for path in pair}
    (first, second), why = next(iter(separate.items()))
    return (f"{len(paths)} of {inputs} inputs cannot be one incident ({first} and {second}: {why}); no consequence "
            "is drawn between them; for an archive of cases run `postmortem scan DIR`")
