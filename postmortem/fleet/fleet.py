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
"""Facts whose values are versions worth correlating with causes (the store counts these: a new one needs a
migration that counts it too, store._version_summaries)."""

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
    """Cases per cause per day (per hour when all fall within three days, per week beyond 180 days): SQLite counts
    them per hour (a case's time is a naive UTC `YYYY-MM-DDTHH:MM:SS`), a few thousand rows are summed into periods
    here; causes most frequent first, ties in the order the store first holds them."""
    first = conn.execute("SELECT MIN(time) FROM cases WHERE status = 'ok' AND time IS NOT NULL").fetchone()[0]
    last = conn.execute("SELECT MAX(time) FROM cases WHERE status = 'ok' AND time IS NOT NULL").fetchone()[0]
    undated = conn.execute("SELECT COUNT(*) FROM cases WHERE status = 'ok' AND time IS NULL").fetchone()[0]
    if first is None:
        return Trend("day", (), (), (), undated)
    start, end = datetime.fromisoformat(first), datetime.fromisoformat(last)
    span = end - start
    unit = "hour" if span <= timedelta(days=3) else "week" if span > timedelta(days=180) else "day"
    periods = _periods(start, end, unit)
    index = {p: i for i, p in enumerate(periods)}
    counts: list[Counter] = [Counter() for _ in periods]
    totals: Counter = Counter()
    for hour, cause, count in conn.execute(
            "SELECT substr(time, 1, 13), cause, COUNT(*) FROM cases WHERE status = 'ok' AND time IS NOT NULL "
            "GROUP BY 1, 2 ORDER BY MIN(rowid)"):
        counts[index[_period(datetime.fromisoformat(hour), unit)]][cause] += count
        totals[cause] += count
    causes = tuple(sorted(totals, key=lambda cause: -totals[cause]))
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
    cases: int = 0
    signatures: dict[str, int] = field(default_factory=dict)
    gpus: set[str] = field(default_factory=set)
    first_seen: str | None = None
    last_seen: str | None = None

    def signature_counts(self) -> list[tuple[str, int]]:
        """(signature, cases with it), most cases first."""
        return sorted(self.signatures.items(), key=lambda p: (-p[1], p[0]))


def bad_nodes(conn: sqlite3.Connection, repeated: int = 2) -> list[Node]:
    """Machines with hardware findings in at least `repeated` cases (times: the cases' own, from their evidence).

    A hardware fault on a GPU belongs to its case's host; without a host, to the card's serial or UUID; with
    neither, to no machine (a bare PCI address is on every machine). SQLite gathers the hardware faults once and
    counts the cases per machine and per signature in one statement."""
    marks = ",".join("?" * len(HARDWARE_LAYERS))
    faults = f"""
        SELECT CASE WHEN f.host IS NOT NULL AND f.host != '' THEN 'host' ELSE 'gpu' END AS kind,
               CASE WHEN f.host IS NOT NULL AND f.host != '' THEN f.host
                    WHEN (f.serial IS NOT NULL AND f.serial != '') OR (f.uuid IS NOT NULL AND f.uuid != '')
                    THEN {gpu_label('f')} END AS owner,
               f.case_id AS case_id, f.signature AS signature, {gpu_label('f')} AS gpu, c.time AS time
        FROM gpu_faults f JOIN cases c ON c.id = f.case_id
        UNION ALL
        SELECT 'host', c.host, f.case_id, f.signature, NULL, c.time FROM findings f JOIN cases c ON c.id = f.case_id
        WHERE f.layer IN ({marks}) AND c.host IS NOT NULL"""
    nodes: dict[tuple[str, str], Node] = {}
    signatures: list[tuple[str, str, str, int]] = []
    gpus: list[tuple[str, str, str]] = []
    for row, kind, owner, what, count, first, last in conn.execute(f"""
            WITH hw AS MATERIALIZED ({faults})
            SELECT 'node', kind, owner, NULL, COUNT(DISTINCT case_id), MIN(NULLIF(time, '')), MAX(NULLIF(time, ''))
            FROM hw WHERE owner IS NOT NULL GROUP BY kind, owner HAVING COUNT(DISTINCT case_id) >= ?
            UNION ALL
            SELECT 'signature', kind, owner, signature, COUNT(DISTINCT case_id), NULL, NULL FROM hw
            WHERE owner IS NOT NULL GROUP BY kind, owner, signature
            UNION ALL
            SELECT DISTINCT 'gpu', kind, owner, gpu, NULL, NULL, NULL FROM hw
            WHERE owner IS NOT NULL AND gpu IS NOT NULL
            """, (*HARDWARE_LAYERS, repeated)):
        if row == "node":
            nodes[(kind, owner)] = Node(owner, kind, count, first_seen=first, last_seen=last)
        elif row == "signature":
            signatures.append((kind, owner, what, count))
        else:
            gpus.append((kind, owner, what))
    for kind, owner, signature, count in signatures:
        if (node := nodes.get((kind, owner))) is not None:
            node.signatures[signature] = count
    for kind, owner, gpu in gpus:
        if (node := nodes.get((kind, owner))) is not None:
            node.gpus.add(gpu)
    return sorted(nodes.values(), key=lambda n: (-n.cases, n.kind, n.label))


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
    among cases with another value of the same fact, with at least MIN_CASES_FOR_CORRELATION cases.

    Counted, not listed, from the store's summaries (store.MIGRATIONS 2): the cases with another value and not this
    one are those with the fact less those with this value (a case with both is among the latter), and so for each
    cause."""
    marks = ",".join("?" * len(VERSION_FACTS))
    counted = conn.execute(f"SELECT name, value, cause, cases FROM fact_counts WHERE name IN ({marks})",
                           VERSION_FACTS).fetchall()
    per_fact_cause = {(name, cause): cases for name, cause, cases in conn.execute(
        f"SELECT name, cause, cases FROM fact_cases WHERE name IN ({marks})", VERSION_FACTS)}
    per_value: Counter = Counter()
    for name, value, _, cases in counted:
        per_value[(name, value)] += cases
    per_fact: Counter = Counter()
    for (name, _), cases in per_fact_cause.items():
        per_fact[name] += cases
    links = []
    for name, value, cause, hits in counted:
        cases = per_value[(name, value)]
        others = per_fact[name] - cases
        if cause == "unknown" or hits < MIN_CASES_FOR_CORRELATION or not others:
            continue
        elsewhere = (per_fact_cause[(name, cause)] - hits) / others
        link = VersionLink(name, value, cause, hits, cases, hits / cases, elsewhere)
        if link.lift >= MIN_LIFT:
            links.append(link)
    return sorted(links, key=lambda l: (-min(l.lift, 1e9), -l.with_cause, l.fact, l.value))
