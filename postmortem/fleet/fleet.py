"""The operator's view of a store: trends per cause, the bad-node list, card-or-slot, versions against causes.

Plain data computed from the store with SQL and Python (no markup); `report`
draws it. Hardware causes are those of the layers in `analysis.HARDWARE_LAYERS`.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .analysis import HARDWARE_LAYERS
from .buckets import gpu_label

VERSION_FACTS = ("driver_version", "cuda_version", "torch_version", "framework", "kernel_version")
"""Facts whose values are versions worth correlating with causes."""

MIN_CASES_FOR_CORRELATION = 3
"""Fewest cases with a version and a cause before their link is shown."""
MIN_LIFT = 2.0
"""How many times more often a cause must occur with a version than without it to be shown."""


# ---------------------------------------------------------------- counts over time


@dataclass(frozen=True)
class Trend:
    """Cases per cause per period: `counts[i][cause]` for `periods[i]` (ISO date or date-hour)."""

    unit: str
    periods: tuple[str, ...]
    causes: tuple[str, ...]
    counts: tuple[dict[str, int], ...]
    undated: int


def trend(conn: sqlite3.Connection) -> Trend:
    """Cases per cause per day (per hour when all fall within three days, per week beyond 180 days)."""
    rows = [(datetime.fromisoformat(t), cause) for t, cause in
            conn.execute("SELECT time, cause FROM cases WHERE status = 'ok' AND time IS NOT NULL")]
    undated = conn.execute("SELECT COUNT(*) FROM cases WHERE status = 'ok' AND time IS NULL").fetchone()[0]
    if not rows:
        return Trend("day", (), (), (), undated)
    start, end = min(t for t, _ in rows), max(t for t, _ in rows)
    span = end - start
    unit = "hour" if span <= timedelta(days=3) else "week" if span > timedelta(days=180) else "day"
    periods = _periods(start, end, unit)
    index = {p: i for i, p in enumerate(periods)}
    counts: list[Counter] = [Counter() for _ in periods]
    for moment, cause in rows:
        counts[index[_period(moment, unit)]][cause] += 1
    totals = Counter(cause for _, cause in rows)
    causes = tuple(cause for cause, _ in totals.most_common())
    return Trend(unit, tuple(periods), causes, tuple(dict(c) for c in counts), undated)


def _period(moment: datetime, unit: str) -> str:
    if unit == "hour":
        return moment.strftime("%Y-%m-%d %H:00")
    if unit == "week":
        return (moment - timedelta(days=moment.weekday())).strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%d")


def _periods(start: datetime, end: datetime, unit: str) -> list[str]:
    step = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}[unit]
    periods: list[str] = []
    moment = start
    while True:
        label = _period(moment, unit)
        if not periods or periods[-1] != label:
            periods.append(label)
        if moment > end:
            break
        moment += step
    last = _period(end, unit)
    return periods[: periods.index(last) + 1] if last in periods else periods


# ---------------------------------------------------------------- bad nodes


@dataclass
class Node:
    """A machine with hardware findings in more than one case: what an operator drains first.

    One row per machine: its host name, or for cases that name no host, the card (board serial or UUID) they
    name; `gpus` are the GPUs at fault on it, `signatures` the cases per signature."""

    label: str
    kind: str  # "host", or "gpu" where no case names the host
    cases: set[str] = field(default_factory=set)
    signatures: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    gpus: set[str] = field(default_factory=set)
    first_seen: str | None = None
    last_seen: str | None = None

    def signature_counts(self) -> list[tuple[str, int]]:
        """(signature, cases with it), most cases first."""
        return sorted(((sig, len(cases)) for sig, cases in self.signatures.items()), key=lambda p: (-p[1], p[0]))

    def seen(self, case: str, signature: str, gpu: str | None, when: str | None) -> None:
        self.cases.add(case)
        self.signatures[signature].add(case)
        if gpu:
            self.gpus.add(gpu)
        if when:
            self.first_seen = min(self.first_seen or when, when)
            self.last_seen = max(self.last_seen or when, when)


def bad_nodes(conn: sqlite3.Connection, repeated: int = 2) -> list[Node]:
    """Machines with hardware findings in at least `repeated` cases (times: the cases' own, from their evidence).

    A hardware fault on a GPU belongs to its case's host; without a host, to the card's serial or UUID; with
    neither, to no machine (a bare PCI address is on every machine)."""
    nodes: dict[tuple[str, str], Node] = {}
    for case, host, pci, uuid, serial, signature, when in conn.execute("""
            SELECT f.case_id, f.host, f.pci, f.uuid, f.serial, f.signature, c.time
            FROM gpu_faults f JOIN cases c ON c.id = f.case_id"""):
        gpu = gpu_label(case, host, pci, uuid, serial)
        kind, owner = ("host", host) if host else ("gpu", gpu if serial or uuid else None)
        if owner:
            nodes.setdefault((kind, owner), Node(owner, kind)).seen(case, signature, gpu, when)
    marks = ",".join("?" * len(HARDWARE_LAYERS))
    for case, host, signature, when in conn.execute(f"""
            SELECT f.case_id, c.host, f.signature, c.time FROM findings f JOIN cases c ON c.id = f.case_id
            WHERE f.layer IN ({marks}) AND c.host IS NOT NULL""", HARDWARE_LAYERS):
        nodes.setdefault(("host", host), Node(host, "host")).seen(case, signature, None, when)
    found = [n for n in nodes.values() if len(n.cases) >= repeated]
    return sorted(found, key=lambda n: (-len(n.cases), n.kind, n.label))


# ---------------------------------------------------------------- card or slot


@dataclass(frozen=True)
class Placement:
    """One card at one slot: cases that saw it there, cases with hardware faults on it there,
    and hardware faults seen at that slot on other cards."""

    slot: str
    cases: int
    faults: int
    other_cards_faults: int


@dataclass(frozen=True)
class CardOrSlot:
    """A card (serial or UUID) seen in more than one slot, and what its faults say."""

    card: str
    placements: tuple[Placement, ...]
    verdict: str  # "card", "slot", "inconclusive"
    reason: str


def card_or_slot(conn: sqlite3.Connection) -> list[CardOrSlot]:
    """For every card seen at two or more host/PCI slots, whether its faults moved with it (cases that name no
    host place a card in no slot).

    Faults at two or more slots on the same card: the card. Faults at one slot, on
    this card and on another card seated there: the slot (riser, PCIe slot, PSU,
    board). Faults at one slot only, quiet since it moved: the slot is suspect
    but no other card there confirms it.
    """
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for case, host, pci, uuid, serial in conn.execute("SELECT case_id, host, pci, uuid, serial FROM gpus"):
        if (serial or uuid) and host:
            seen[_card(uuid, serial)][_slot(host, pci)].add(case)
    faults: dict[tuple[str, str], set[str]] = defaultdict(set)
    slot_faults: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for case, host, pci, uuid, serial in conn.execute("SELECT case_id, host, pci, uuid, serial FROM gpu_faults"):
        if not host:  # a slot is a host's: without one, neither a move nor a shared slot can be told
            continue
        slot = _slot(host, pci)
        card = _card(uuid, serial) if (serial or uuid) else None
        if card:
            faults[(card, slot)].add(case)
            seen[card][slot].add(case)
        slot_faults[slot][card or "?"].add(case)
    found = []
    for card, slots in sorted(seen.items()):
        if len(slots) < 2 or not any(faults.get((card, slot)) for slot in slots):
            continue
        placements = tuple(Placement(slot, len(cases), len(faults.get((card, slot), ())),
                                     sum(len(c) for other, c in slot_faults[slot].items() if other != card))
                           for slot, cases in sorted(slots.items()))
        found.append(CardOrSlot(card, placements, *_judge(placements)))
    return found


def _judge(placements: tuple[Placement, ...]) -> tuple[str, str]:
    faulty = [p for p in placements if p.faults]
    if len(faulty) >= 2:
        return "card", f"faults on this card in {len(faulty)} different slots: they moved with it (replace the card)"
    slot = faulty[0]
    if slot.other_cards_faults:
        return "slot", (f"faults at {slot.slot} on this card and on another card seated there, none on this card "
                        "elsewhere: they stay with the slot (check riser, PCIe slot, PSU, board)")
    return "inconclusive", (f"faults only at {slot.slot}; quiet since it moved, but no other card there has shown "
                            "faults yet: the slot is suspect")


def _card(uuid: str | None, serial: str | None) -> str:
    return f"serial {serial}" if serial else str(uuid)


def _slot(host: str, pci: str | None) -> str:
    return f"{host} {pci or '?'}"


# ---------------------------------------------------------------- versions


@dataclass(frozen=True)
class VersionLink:
    """A version seen with a cause far more often than other versions are."""

    fact: str
    value: str
    cause: str
    with_cause: int
    cases: int
    rate: float
    rate_elsewhere: float

    @property
    def lift(self) -> float:
        return self.rate / self.rate_elsewhere if self.rate_elsewhere else float("inf")


def version_links(conn: sqlite3.Connection) -> list[VersionLink]:
    """(fact, value, cause) where the cause's rate among cases with that value is MIN_LIFT times its rate
    among cases with another value of the same fact, with at least MIN_CASES_FOR_CORRELATION cases."""
    marks = ",".join("?" * len(VERSION_FACTS))
    rows = conn.execute(f"""
        SELECT DISTINCT f.name, f.value, c.id, c.cause FROM facts f JOIN cases c ON c.id = f.case_id
        WHERE c.status = 'ok' AND f.name IN ({marks})""", VERSION_FACTS).fetchall()
    cases_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    cause_of: dict[str, str] = {}
    for name, value, case, cause in rows:
        cases_of[(name, value)].add(case)
        cause_of[case] = cause
    links = []
    for (name, value), cases in cases_of.items():
        others = set().union(*(c for (n, v), c in cases_of.items() if n == name and v != value)) - cases
        for cause, hits in Counter(cause_of[c] for c in cases).items():
            if cause == "unknown" or hits < MIN_CASES_FOR_CORRELATION or not others:
                continue
            rate = hits / len(cases)
            elsewhere = sum(1 for c in others if cause_of[c] == cause) / len(others)
            link = VersionLink(name, value, cause, hits, len(cases), rate, elsewhere)
            if link.lift >= MIN_LIFT:
                links.append(link)
    return sorted(links, key=lambda l: (-min(l.lift, 1e9), -l.with_cause, l.fact, l.value))
