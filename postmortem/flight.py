"""Flight-recorder dumps of one job, lined up: which rank left the others waiting in which collective.

Every rank numbers the collectives of each process group 1, 2, 3... (`collective_seq_id`), so entry N of a
group on one rank is the same call as entry N on every other rank. Going up the sequence numbers of each group,
the first number at which the ranks part is where the job stopped: a member that never got to N (its dump and
its pg_status end before N) while others entered it, ranks that called another op, or the same op with other
sizes or dtypes, or (on backends whose states move: NCCL) ranks still in a collective the others completed.
The ranks that differ from the most common entry are the suspects. This is what PyTorch's fr_trace looks for; it
needs no pg_config (Gloo leaves it empty): a group's members are the ranks whose dumps name it. A rank whose dump is
empty (its recorder was on, it recorded nothing) never reached a collective: it is a member of the groups every
other rank names (the default group holds every rank), missing from their first collective.

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
    latest_ns: int | None
    """The job's last recorded moment: when the dumps say it stopped."""


def with_collective_mismatches(events: Sequence[Event]) -> list[Event]:
    """`events` with a `collective-mismatch` event per group that parted, the watchdog timeouts of the same
    collective told the suspects, and the dumps' entries dropped (they were read here)."""
    made = [_event(job, m) for job in _jobs(events) for m in mismatches(job)]
    mismatch_of = _by_collective(made)
    kept = []
    for event in events:
        if event.kind == "flight-recorder":
            event = dataclasses.replace(event, fields={k: v for k, v in event.fields.items() if k != "entries"})
        elif event.kind == "nccl-timeout" and (same := _same_collective(event, mismatch_of)):
            event = dataclasses.replace(event, fields={**event.fields, **{
                k: same.fields[k] for k in ("suspect_ranks", "mismatch", "pg", "flight_recorder") if k in same.fields}})
        kept.append(event)
    watchdogs, processes = _watchdogs(events), _processes(events)
    return kept + [_with_process(_with_watchdog(event, watchdogs), processes) for event in made]


def _processes(events: Iterable[Event]) -> dict[object, Event]:
    """Per rank, the first event that names it with a pid (a snapshot's process file, a rank-prefixed log line)."""
    named: dict[object, Event] = {}
    for event in events:
        rank = event.fields.get("rank")
        if rank is not None and event.fields.get("pid") and event.kind != "collective-mismatch":
            named.setdefault(rank, event)
    return named


def _with_process(event: Event, processes: Mapping[object, Event]) -> Event:
    """The suspect rank's host and pid, from another input that names the rank with them: a dump itself holds
    neither."""
    found = processes.get(event.fields.get("rank"))
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
        if event.kind != "flight-recorder" or rank is None:
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
    return [job for job in merged if len(job) > 1 and any(dump.entries for dump in job.values())]


def _fullness(dump: Dump) -> tuple[int, bool]:
    return len(dump.entries), any(e.frames for e in dump.entries)


@dataclass
class Group:
    """One process group of a job, indexed once so that lining its ranks up costs its entries, not ranks x seqs."""

    members: list[int] = dataclasses.field(default_factory=list)
    """The ranks whose dumps name the group (in its pg_status or an entry, p2p included), lowest first."""
    calls: dict[int, dict[int, Entry]] = dataclasses.field(default_factory=dict)
    """Per member, its collectives (not p2p) by sequence number."""
    ranks_at: dict[int, dict[int, Entry]] = dataclasses.field(default_factory=dict)
    """Per sequence number, the entry of each member that recorded it, lowest rank first."""


def _groups(job: Mapping[int, Dump]) -> dict[str, Group]:
    """Every process group a collective or a pg_status of the job names, in one pass over the entries."""
    found: dict[str, Group] = {}
    compared: set[str] = set()  # a group named only by p2p entries has no collectives to line up
    silent = [rank for rank, dump in job.items() if not dump.entries and not dump.groups]
    named = [set(dump.groups) | {e.pg for e in dump.entries} for rank, dump in job.items() if rank not in silent]
    everyones = set.intersection(*named) if named else set()
    for rank in sorted(job):
        dump = job[rank]
        compared.update(dump.groups)
        for pg in everyones if rank in silent else ():  # an empty dump: a member of every rank's groups
            _join(found.setdefault(pg, Group()), rank)
        for pg in dump.groups:
            _join(found.setdefault(pg, Group()), rank)
        for entry in dump.entries:
            group = found.setdefault(entry.pg, Group())
            _join(group, rank)
            if not entry.is_p2p:
                compared.add(entry.pg)
                group.calls[rank][entry.seq] = entry
                group.ranks_at.setdefault(entry.seq, {})[rank] = entry
    return {pg: group for pg, group in found.items() if pg in compared}


def _join(group: Group, rank: int) -> None:
    """Make `rank` a member (ranks come in ascending order, so members stay sorted)."""
    if not group.members or group.members[-1] != rank:
        group.members.append(rank)
        group.calls[rank] = {}


def mismatches(job: Mapping[int, Dump]) -> list[Mismatch]:
    """The first collective of each process group at which the job's ranks part."""
    latest = _latest(job)
    found = _groups(job)
    parted = [m for pg in sorted(found) if (m := _first_parting(job, pg, found[pg], latest)) is not None]
    return parted if _progressed(job) else [dataclasses.replace(m, waited_s=None) for m in parted]


def _first_parting(job: Mapping[int, Dump], pg: str, group: Group, latest: int | None) -> Mismatch | None:
    members, calls = group.members, group.calls
    reached = {rank: max([*calls[rank], _enqueued(job[rank], pg)]) for rank in members}
    lowest = min(reached.values())
    for seq in sorted(group.ranks_at):
        present = group.ranks_at[seq]
        if lowest < seq:  # a member never got there (one that recorded seq has reached it)
            absent = tuple(rank for rank in members if reached[rank] < seq)
            reference = _common(present, lambda e: e.op)
            return _mismatch("missing", pg, seq, absent, present, reference, latest, len(members),
                             _described(reference),
                             "; ".join(_last_words(rank, calls[rank], not job[rank].entries) for rank in absent))
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
    """The job's last recorded moment (ns), when the dumps say it stopped."""
    return max((e.latest_ns for d in job.values() for e in d.entries if e.latest_ns), default=None)


def _progressed(job: Mapping[int, Dump]) -> bool:
    """Whether the recorder saw collectives start or complete (NCCL's watchdog stamps them; Gloo records creation
    only): without that, the last record is the last collective created, and the time since the others entered
    theirs says nothing of how long they waited."""
    return any(e.latest_ns and e.latest_ns != e.created_ns for d in job.values() for e in d.entries)


def _enqueued(dump: Dump, pg: str) -> int:
    value = dump.groups.get(pg, {}).get("enqueued", NO_ENTRY)
    return value if isinstance(value, int) else NO_ENTRY


def _common(present: Mapping[int, Entry], value: Callable[[Entry], object]) -> Entry:
    """The entry whose `value` most ranks share; a tie goes to the lowest rank's (fr_trace's reference rank)."""
    counts = Counter(value(entry) for entry in present.values())
    return max(present.values(), key=lambda entry: counts[value(entry)])  # max keeps the first of equals


def _mismatch(mismatch: str, pg: str, seq: int, suspects: tuple[int, ...], present: Mapping[int, Entry],
              reference: Entry, latest: int | None, total: int, expected: str, found: str) -> Mismatch:
    parted = set(suspects)
    others = tuple(rank for rank in present if rank not in parted)
    started = min((t for rank in others if (t := present[rank].created_ns)), default=None)
    waited = round((latest - started) / 1e9, 3) if latest and started else None
    return Mismatch(mismatch, pg, reference.pg_desc, seq, suspects, others, reference, expected, found,
                    present.get(suspects[0]), waited, total, latest)


def _described(entry: Entry) -> str:
    return f"{entry.op} {_shown(entry.input_sizes)} {','.join(entry.input_dtypes)}".rstrip()


def _last_words(rank: int, calls: Mapping[int, Entry], empty: bool = False) -> str:
    if empty:
        return f"rank {rank} recorded no collective at all (its recorder was on: its dump is empty)"
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
    when = moment(m.latest_ns)
    return Event(kind="collective-mismatch", where=where, text=text, fields=fields, time=when,
                 clock="wall" if when else None)


def _by_collective(made: Iterable[Event]) -> dict[tuple[object, object], Event]:
    """The first mismatch of each (seq, group), and of each seq under (seq, None): what a watchdog line that
    names the group, or only the sequence number, refers to."""
    index: dict[tuple[object, object], Event] = {}
    for event in made:
        index.setdefault((event.fields["seq"], event.fields.get("pg")), event)  # no pg: a group named ""
        index.setdefault((event.fields["seq"], None), event)
    return index


def _same_collective(timeout: Event, mismatch_of: Mapping[tuple[object, object], Event]) -> Event | None:
    """The mismatch of the collective a watchdog line names: the same sequence number (and group, when given)."""
    return mismatch_of.get((timeout.fields.get("seq"), timeout.fields.get("pg")))


def _watchdogs(events: Iterable[Event]) -> dict[tuple[object, object], set[int]]:
    """The ranks whose watchdogs timed out, by the (seq, group) their line names; group None when it names none."""
    ranks: dict[tuple[object, object], set[int]] = {}
    for event in events:
        if event.kind == "nccl-timeout":
            named = ranks.setdefault((event.fields.get("seq"), event.fields.get("pg")), set())
            named.update(r for r in (event.fields.get("ranks") or [event.fields.get("rank")]) if r is not None)
    return ranks


def _with_watchdog(event: Event, watchdogs: Mapping[tuple[object, object], set[int]]) -> Event:
    """The mismatch told which ranks' watchdogs timed out on the same collective."""
    seq = event.fields["seq"]
    ranks = sorted(watchdogs.get((seq, None), set()) | watchdogs.get((seq, event.fields.get("pg")), set()))
    return dataclasses.replace(event, fields={**event.fields, "watchdog_ranks": ", ".join(map(str, ranks))}) \
        if ranks else event
