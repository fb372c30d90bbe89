"""Flight-recorder dumps of one job, lined up: which rank left the others waiting in which collective.

Every rank numbers the collectives of each process group 1, 2, 3... (`collective_seq_id`), so entry N of a
group on one rank is the same call as entry N on every other rank. Going up the sequence numbers of each group,
the first number at which the ranks part is where the job stopped: a member that never got to N (its dump and
its pg_status end before N) while others entered it, ranks that called another op, or the same op with other
sizes or dtypes, or (on backends whose states move: NCCL) ranks still in a collective the others completed.
The ranks that differ from the most common entry are the suspects. This is what PyTorch's fr_trace looks for; it
needs no pg_config (Gloo leaves it empty): a group's members are the ranks whose dumps name it.

Dumps are "given together" when they sit in one folder, or in folders of disjoint ranks (one per node): one job. A
rank dumped twice in a folder (the pickle and the JSON of one recorder) counts once, by its fuller dump. The result
is one `collective-mismatch` event per group that parted (signatures/flight_recorder.yaml); a watchdog timeout of
the same sequence number is told the suspects; the dumps' entries, read for this, leave their events.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .model import Event, ranks_text
from .sources.flight_recorder import NO_ENTRY, Entry, moment

COMPARED: tuple[tuple[str, str, Callable[[Entry], object]], ...] = (
    ("op", "op", lambda e: e.op),
    ("sizes", "input sizes", lambda e: e.input_sizes),
    ("sizes", "output sizes", lambda e: e.output_sizes),
    ("dtypes", "input dtypes", lambda e: e.input_dtypes),
    ("dtypes", "output dtypes", lambda e: e.output_dtypes),
)
"""What the ranks of one collective must agree on, in the order fr_trace checks it: (mismatch, label, value)."""
DONE = "completed"


@dataclass(frozen=True)
class Dump:
    """One rank's dump, as the source read it."""

    rank: int
    event: Event
    entries: tuple[Entry, ...]
    groups: Mapping[str, Mapping[str, object]]


@dataclass(frozen=True)
class Mismatch:
    """Where the ranks of one group parted."""

    mismatch: str
    pg: str
    pg_desc: str
    seq: int
    suspects: tuple[int, ...]
    others: tuple[int, ...]
    reference: Entry
    """The entry most ranks recorded (what the suspects should have called)."""
    expected: str
    found: str
    suspect_entry: Entry | None
    waited_s: float | None
    ranks_total: int


def with_collective_mismatches(events: Sequence[Event]) -> list[Event]:
    """`events` with a `collective-mismatch` event per group that parted, the watchdog timeouts of the same
    collective told the suspects, and the dumps' entries dropped (they were read here)."""
    found = [(job, m) for job in _jobs(events) for m in mismatches(job)]
    made = [_event(job, m) for job, m in found]
    kept = []
    for event in events:
        if event.kind == "flight-recorder":
            event = dataclasses.replace(event, fields={k: v for k, v in event.fields.items() if k != "entries"})
        elif event.kind == "nccl-timeout" and (same := _same_collective(event, made)):
            event = dataclasses.replace(event, fields={**event.fields, **{
                k: same.fields[k] for k in ("suspect_ranks", "mismatch", "pg", "flight_recorder")}})
        kept.append(event)
    timeouts = [e for e in events if e.kind == "nccl-timeout"]
    return kept + [_with_process(_with_watchdog(event, timeouts), events) for event in made]


def _with_process(event: Event, events: Sequence[Event]) -> Event:
    """The suspect rank's host and pid, from another input that names the rank with them (a snapshot's process
    file, a rank-prefixed log line): a dump itself holds neither."""
    rank = event.fields.get("rank")
    found = next((e for e in events if rank is not None and e.fields.get("rank") == rank and e.fields.get("pid")
                  and e.kind != "collective-mismatch"), None)
    if found is None:
        return event
    where = {"suspect_pid": found.fields["pid"], "suspect_host": found.fields.get("host")}
    return dataclasses.replace(event, fields={**event.fields, **{k: v for k, v in where.items() if v is not None}})


def _jobs(events: Iterable[Event]) -> list[dict[int, Dump]]:
    """The dumps grouped by folder, one per rank (the one with the most entries, then with stack frames); folders
    whose ranks do not overlap are the nodes of one job (each node writes the dumps of its own ranks)."""
    jobs: dict[str, dict[int, Dump]] = {}
    for event in events:
        entries = event.fields.get("entries") or ()
        rank = event.fields.get("rank")
        if event.kind != "flight-recorder" or rank is None or not entries:
            continue
        dump = Dump(rank, event, tuple(entries), event.fields.get("groups") or {})
        job = jobs.setdefault(posixpath.dirname(event.where.path), {})
        if rank not in job or _fullness(dump) > _fullness(job[rank]):
            job[rank] = dump
    merged: list[dict[int, Dump]] = []
    for job in jobs.values():
        node_of = next((other for other in merged if not other.keys() & job.keys()), None)
        if node_of is None:
            merged.append(dict(job))
        else:
            node_of.update(job)
    return [job for job in merged if len(job) > 1]


def _fullness(dump: Dump) -> tuple[int, bool]:
    return len(dump.entries), any(e.frames for e in dump.entries)


def mismatches(job: Mapping[int, Dump]) -> list[Mismatch]:
    """The first collective of each process group at which the job's ranks part."""
    groups = sorted({e.pg for d in job.values() for e in d.entries if not e.is_p2p}
                    | {pg for d in job.values() for pg in d.groups})
    return [m for pg in groups if (m := _first_parting(job, pg)) is not None]


def _first_parting(job: Mapping[int, Dump], pg: str) -> Mismatch | None:
    members = sorted(rank for rank, d in job.items() if pg in d.groups or any(e.pg == pg for e in d.entries))
    calls = {rank: {e.seq: e for e in job[rank].entries if e.pg == pg and not e.is_p2p} for rank in members}
    reached = {rank: max([*calls[rank], _enqueued(job[rank], pg)]) for rank in members}
    latest = _latest(job)
    for seq in sorted({seq for seen in calls.values() for seq in seen}):
        present = {rank: calls[rank][seq] for rank in members if seq in calls[rank]}
        absent = tuple(rank for rank in members if rank not in present and reached[rank] < seq)  # never got there
        if absent:
            reference = _common(present, lambda e: e.op)
            return _mismatch("missing", pg, seq, absent, present, reference, latest, len(members),
                             _described(reference), "; ".join(_last_words(rank, calls[rank]) for rank in absent))
        for mismatch, label, value in COMPARED:
            reference = _common(present, value)
            suspects = tuple(rank for rank, entry in present.items() if value(entry) != value(reference))
            if suspects:
                named = "" if mismatch == "op" else f"{label} "
                found = named + ", ".join(sorted({_shown(value(present[rank])) for rank in suspects}))
                return _mismatch(mismatch, pg, seq, suspects, present, reference, latest, len(members),
                                 named + _shown(value(reference)), found)
        states = {rank: entry.state for rank, entry in present.items()}
        if DONE in states.values() and (stuck := tuple(rank for rank, state in states.items() if state != DONE)):
            return _mismatch("stuck", pg, seq, stuck, present, present[stuck[0]], latest, len(members),
                             DONE, ", ".join(sorted({states[rank] for rank in stuck})))
    return None


def _latest(job: Mapping[int, Dump]) -> int | None:
    """The job's last recorded moment (ns): how long the others had waited is measured up to it."""
    return max((e.latest_ns for d in job.values() for e in d.entries if e.latest_ns), default=None)


def _enqueued(dump: Dump, pg: str) -> int:
    value = dump.groups.get(pg, {}).get("enqueued", NO_ENTRY)
    return value if isinstance(value, int) else NO_ENTRY


def _common(present: Mapping[int, Entry], value: Callable[[Entry], object]) -> Entry:
    """The entry whose `value` most ranks share; a tie goes to the lowest rank's (fr_trace's reference rank)."""
    counts = Counter(value(entry) for entry in present.values())
    return max(present.values(), key=lambda entry: counts[value(entry)])  # max keeps the first of equals


def _mismatch(mismatch: str, pg: str, seq: int, suspects: tuple[int, ...], present: Mapping[int, Entry],
              reference: Entry, latest: int | None, total: int, expected: str, found: str) -> Mismatch:
    others = tuple(rank for rank in present if rank not in suspects)
    started = min((t for rank in others if (t := present[rank].created_ns)), default=None)
    waited = round((latest - started) / 1e9, 3) if latest and started else None
    return Mismatch(mismatch, pg, reference.pg_desc, seq, suspects, others, reference, expected, found,
                    present.get(suspects[0]), waited, total)


def _described(entry: Entry) -> str:
    return f"{entry.op} {_shown(entry.input_sizes)} {','.join(entry.input_dtypes)}".rstrip()


def _last_words(rank: int, calls: Mapping[int, Entry]) -> str:
    if not calls:
        return f"rank {rank} recorded nothing in this group"
    last = calls[max(calls)]
    return f"rank {rank} last entered seq {last.seq} ({last.op}{' from ' + last.caller if last.caller else ''})"


def _shown(value: object) -> str:
    """Sizes as fr_trace prints them (`[[8]]`), dtypes as a list, names as they are."""
    if isinstance(value, tuple):
        return str([list(v) if isinstance(v, tuple) else v for v in value])
    return str(value)


def _event(job: Mapping[int, Dump], m: Mismatch) -> Event:
    where = job[m.suspects[0]].event.where  # the suspect's dump: every member has one
    group = f"{m.pg} {m.pg_desc}".strip()
    fields = {
        "suspect_ranks": ", ".join(map(str, m.suspects)), "suspects": ranks_text(m.suspects),
        "other_ranks": ranks_text(m.others), "mismatch": m.mismatch, "seq": m.seq, "pg": m.pg, "pg_desc": m.pg_desc,
        "group": group, "op": m.reference.op, "expected": m.expected, "found": m.found,
        "input_sizes": _shown(m.reference.input_sizes), "dtypes": ",".join(m.reference.input_dtypes),
        "caller": (m.suspect_entry or m.reference).caller, "others_caller": m.reference.caller,
        "suspect_op": m.suspect_entry.op if m.suspect_entry else None,
        "waited_s": m.waited_s, "timeout_ms": m.reference.timeout_ms, "ranks_total": m.ranks_total,
    }
    if len(m.suspects) == 1:  # the rank it concerns, for the timeline's lanes
        fields["rank"] = m.suspects[0]
    fields = {k: v for k, v in fields.items() if v not in (None, "")}
    text = (f"flight recorder, group {group} seq {m.seq}: {ranks_text(m.suspects)} parted from {ranks_text(m.others)} "
            f"({m.mismatch}: expected {m.expected}, found {m.found})"
            + (f"; the others had waited {m.waited_s} s by the last record" if m.waited_s is not None else ""))
    fields["flight_recorder"] = text
    when = moment(_latest(job))
    return Event(kind="collective-mismatch", where=where, text=text, fields=fields, time=when,
                 clock="wall" if when else None)


def _same_collective(timeout: Event, made: Sequence[Event]) -> Event | None:
    """The mismatch of the collective a watchdog line names: the same sequence number (and group, when given)."""
    seq, pg = timeout.fields.get("seq"), timeout.fields.get("pg")
    return next((m for m in made if m.fields["seq"] == seq and pg in (None, m.fields["pg"])), None)


def _with_watchdog(event: Event, timeouts: Sequence[Event]) -> Event:
    """The mismatch told which ranks' watchdogs timed out on the same collective."""
    ranks = sorted({r for t in timeouts if _same_collective(t, [event])
                    for r in (t.fields.get("ranks") or [t.fields.get("rank")]) if r is not None})
    return dataclasses.replace(event, fields={**event.fields, "watchdog_ranks": ", ".join(map(str, ranks))}) \
        if ranks else event
