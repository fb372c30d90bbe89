"""The operator's view of a store: trends per cause, the bad-node list, card-or-slot, versions against causes.

Plain data computed from the store with SQL and Python (no markup); `report`
draws it. Hardware causes are those of the layers in `analysis.HARDWARE_LAYERS`.
"""

from __future__ import annotations

import math
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


STRAY_SHARE = 0.01
"""The share of dated cases that may lie before the default window: a few old files (a 2017 log in a 2026 archive)
must not stretch the chart over years of nothing."""
MIN_CASES_TO_TRIM = 10
"""Fewer dated cases than this are all drawn, however far apart."""


@dataclass(frozen=True)
class Trend:
    """Cases per cause per period: `counts[i][cause]` for `periods[i]` (ISO date or date-hour), over the window
    `start`..`end`; `outside` dated cases fall outside it (before a default start that left strays out, or beyond a
    --since / --until), `undated` have no date."""

    unit: str
    periods: tuple[str, ...]
    causes: tuple[str, ...]
    counts: tuple[dict[str, int], ...]
    undated: int
    start: str | None = None
    end: str | None = None
    outside: int = 0
    chosen: bool = False  # the window was asked for (--since / --until), not found


def trend(conn: sqlite3.Connection, since: str | None = None, until: str | None = None) -> Trend:
    """Cases per cause per day (per hour when all fall within three days, per week beyond 180 days): SQLite counts
    them per hour (a case's time is a naive UTC `YYYY-MM-DDTHH:MM:SS`), a few thousand rows are summed into periods
    here; causes most frequent first, ties in the order the store first holds them.

    The window is `since`..`until` (ISO dates or times) where given; else from the first case, or, where the oldest
    STRAY_SHARE of the cases lie more than a window's length before the rest, from the first case after them."""
    dated = "status = 'ok' AND time IS NOT NULL"
    undated = conn.execute("SELECT COUNT(*) FROM cases WHERE status = 'ok' AND time IS NULL").fetchone()[0]
    total = conn.execute(f"SELECT COUNT(*) FROM cases WHERE {dated}").fetchone()[0]
    low = since or _default_start(conn, total)
    high = (until + "\uffff") if until and len(until) <= 10 else until  # a date includes its whole day
    bounds, values = _bounds(low, high)
    first, last, inside = conn.execute(
        f"SELECT MIN(time), MAX(time), COUNT(*) FROM cases WHERE {dated}{bounds}", values).fetchone()
    if first is None:
        return Trend("day", (), (), (), undated, outside=total, chosen=bool(since or until))
    start, end = datetime.fromisoformat(first), datetime.fromisoformat(last)
    span = end - start
    unit = "hour" if span <= timedelta(days=3) else "week" if span > timedelta(days=180) else "day"
    periods = _periods(start, end, unit)
    index = {p: i for i, p in enumerate(periods)}
    counts: list[Counter] = [Counter() for _ in periods]
    totals: Counter = Counter()
    for hour, cause, count in conn.execute(
            f"SELECT substr(time, 1, 13), cause, COUNT(*) FROM cases WHERE {dated}{bounds} "
            "GROUP BY 1, 2 ORDER BY MIN(rowid)", values):
        counts[index[_period(datetime.fromisoformat(hour), unit)]][cause] += count
        totals[cause] += count
    causes = tuple(sorted(totals, key=lambda cause: -totals[cause]))
    return Trend(unit, tuple(periods), causes, tuple(dict(c) for c in counts), undated, first, last,
                 total - inside, bool(since or until))


def _bounds(low: str | None, high: str | None) -> tuple[str, tuple[str, ...]]:
    """The SQL condition and its values for a window with either end open."""
    said = [(clause, value) for clause, value in ((" AND time >= ?", low), (" AND time <= ?", high)) if value]
    return "".join(clause for clause, _ in said), tuple(value for _, value in said)


def _default_start(conn: sqlite3.Connection, total: int) -> str | None:
    """The first time after the oldest STRAY_SHARE of the dated cases, when those strays lie further before it than
    the rest of the window is long; else None (from the first case)."""
    if total < MIN_CASES_TO_TRIM:
        return None
    rows = conn.execute("SELECT MIN(time), MAX(time) FROM cases WHERE status = 'ok' AND time IS NOT NULL").fetchone()
    cut = conn.execute(  # the hour of the first case kept, read in order from the store's index of hours
        "SELECT substr(time, 1, 13) FROM cases WHERE status = 'ok' AND time IS NOT NULL ORDER BY substr(time, 1, 13) "
        "LIMIT 1 OFFSET ?", (max(1, int(total * STRAY_SHARE)),)).fetchone()[0]
    first, last, kept = (datetime.fromisoformat(t) for t in (*rows, cut))
    return cut if kept - first > last - kept else None


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

MIN_NODE_CASES = 2
"""Fewest cases with hardware findings before a machine can be called bad (one fault is an event, not a pattern)."""
MIN_NODE_LIFT = 2.0
"""How many times the rest of the fleet's rate of hardware cases a machine's rate must be to be called bad: a fleet
where every machine has two hardware cases has no bad machine, only a hardware rate."""
NODE_CHANCE = 0.01
"""Largest chance, over all the machines compared (Bonferroni), that a machine at the rest's rate would show as many
hardware cases: with hundreds of machines some are above twice the rate by luck alone."""


@dataclass
class Node:
    """A machine whose cases have hardware findings far more often than the rest of the fleet's: what an operator
    drains first.

    One row per machine: its host name, or for cases that name no host, the card (board serial or UUID) they
    name. `cases` of its `all_cases` have hardware findings; `fleet_rate` is that share over the other machines of
    its kind (None where there is no other); `gpus` are the GPUs at fault on it with their cases, `signatures` the
    cases per signature."""

    label: str
    kind: str  # "host", or "gpu" where no case names the host
    cases: int = 0
    all_cases: int = 0
    fleet_rate: float | None = None
    signatures: dict[str, int] = field(default_factory=dict)
    gpus: dict[str, int] = field(default_factory=dict)
    first_seen: str | None = None
    last_seen: str | None = None

    @property
    def rate(self) -> float:
        """The share of its cases with hardware findings."""
        return self.cases / self.all_cases if self.all_cases else 1.0

    @property
    def lift(self) -> float | None:
        """Its rate over the rest of the fleet's (inf where the rest has none; None where there is no rest)."""
        if self.fleet_rate is None:
            return None
        return self.rate / self.fleet_rate if self.fleet_rate else float("inf")

    def signature_counts(self) -> list[tuple[str, int]]:
        """(signature, cases with it), most cases first."""
        return sorted(self.signatures.items(), key=lambda p: (-p[1], p[0]))

    def gpu_counts(self) -> list[tuple[str, int, float]]:
        """(GPU, cases with a fault on it, its share of the machine's hardware cases), most cases first: one bad
        card stands out from the bystanders beside it."""
        return [(gpu, count, count / self.cases if self.cases else 0.0)
                for gpu, count in sorted(self.gpus.items(), key=lambda p: (-p[1], p[0]))]


def bad_nodes(conn: sqlite3.Connection) -> list[Node]:
    """Machines with hardware findings in at least MIN_NODE_CASES cases, at MIN_NODE_LIFT times the rest of the
    fleet's rate and beyond NODE_CHANCE (a lone machine, with no rest to compare, on its count alone); highest lift
    first.

    A hardware fault on a GPU belongs to its case's host; without a host, to the card's serial or UUID; with
    neither, to no machine (a bare PCI address is on every machine). A host's cases are the store's cases naming
    it; a card's, the cases naming that card and no host. SQLite gathers the hardware faults once and counts the
    cases per machine, per signature and per GPU in one statement."""
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
        WHERE f.layer IN ({marks}) AND c.host IS NOT NULL AND c.host != ''"""
    nodes: dict[tuple[str, str], Node] = {}
    details: list[tuple[str, str, str, str, int]] = []
    for row, kind, owner, what, count, first, last in conn.execute(f"""
            WITH hw AS MATERIALIZED ({faults})
            SELECT 'node', kind, owner, NULL, COUNT(DISTINCT case_id), MIN(NULLIF(time, '')), MAX(NULLIF(time, ''))
            FROM hw WHERE owner IS NOT NULL GROUP BY kind, owner
            UNION ALL
            SELECT 'signature', kind, owner, signature, COUNT(DISTINCT case_id), NULL, NULL FROM hw
            WHERE owner IS NOT NULL GROUP BY kind, owner, signature
            UNION ALL
            SELECT 'gpu', kind, owner, gpu, COUNT(DISTINCT case_id), NULL, NULL FROM hw
            WHERE owner IS NOT NULL AND gpu IS NOT NULL GROUP BY kind, owner, gpu
            """, HARDWARE_LAYERS):
        if row == "node":
            nodes[(kind, owner)] = Node(owner, kind, count, first_seen=first, last_seen=last)
        else:
            details.append((row, kind, owner, what, count))
    for row, kind, owner, what, count in details:
        node = nodes[(kind, owner)]
        (node.signatures if row == "signature" else node.gpus)[what] = count
    compared = max(_place_in_fleet(conn, nodes), 1)
    bad = [n for n in nodes.values() if n.cases >= MIN_NODE_CASES and (n.fleet_rate is None or (
        n.lift is not None and n.lift >= MIN_NODE_LIFT
        and _chance(n.cases, n.all_cases, n.fleet_rate) * compared <= NODE_CHANCE))]
    return sorted(bad, key=lambda n: (-min(n.lift or 0.0, 1e9), -n.cases, n.kind, n.label))


def _chance(hits: int, trials: int, rate: float) -> float:
    """P(X >= hits) for X ~ Binomial(trials, rate), summed from `hits` up until the terms stop counting."""
    if hits <= 0:
        return 1.0
    if rate <= 0.0:
        return 0.0
    if rate >= 1.0:
        return 1.0
    term = math.exp(math.lgamma(trials + 1) - math.lgamma(hits + 1) - math.lgamma(trials - hits + 1)
                    + hits * math.log(rate) + (trials - hits) * math.log1p(-rate))
    total = 0.0
    for i in range(hits, trials + 1):
        total += term
        if term < total * 1e-12:
            break
        term *= (trials - i) / (i + 1) * rate / (1 - rate)
    return min(total, 1.0)


def _place_in_fleet(conn: sqlite3.Connection, nodes: dict[tuple[str, str], Node]) -> int:
    """Each node's count of all its cases and the rest of its kind's rate of hardware cases: hosts against the
    cases naming a host, cards against the cases naming a card and no host. Returns how many machines there are."""
    totals = {("host", host): count for host, count in conn.execute(
        "SELECT host, COUNT(*) FROM cases WHERE status = 'ok' AND host IS NOT NULL AND host != '' GROUP BY host")}
    totals.update((("gpu", card), count) for card, count in conn.execute(f"""
        SELECT {gpu_label('g')}, COUNT(DISTINCT g.case_id) FROM gpus g
        WHERE (g.host IS NULL OR g.host = '') AND ((g.serial IS NOT NULL AND g.serial != '')
               OR (g.uuid IS NOT NULL AND g.uuid != '')) GROUP BY 1"""))
    for (kind, owner), node in nodes.items():
        node.all_cases = max(totals.get((kind, owner), 0), node.cases)
    for kind in ("host", "gpu"):
        fleet_cases = sum(count for (k, _), count in totals.items() if k == kind)
        fleet_faulty = sum(n.cases for (k, _), n in nodes.items() if k == kind)
        for (k, _), node in nodes.items():
            if k == kind and (rest := fleet_cases - node.all_cases) > 0:
                node.fleet_rate = max(fleet_faulty - node.cases, 0) / rest
    return len(totals)


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
    """A version seen with a cause far more often than other versions of the same fact are: `with_cause` of its
    `cases` against `others_with_cause` of the `others` cases with another value."""

    fact: str
    value: str
    cause: str
    with_cause: int
    cases: int
    others_with_cause: int
    others: int

    @property
    def rate(self) -> float:
        return self.with_cause / self.cases

    @property
    def rate_elsewhere(self) -> float:
        return self.others_with_cause / self.others

    @property
    def lift(self) -> float:
        return self.rate / self.rate_elsewhere if self.rate_elsewhere else float("inf")


@dataclass(frozen=True)
class Versions:
    """The version links, and the facts with no contrast: one value on every case that has the fact, which can go
    with nothing (a driver on 2,511 of 2,511 cases), as (fact, value, cases)."""

    links: tuple[VersionLink, ...]
    uniform: tuple[tuple[str, str, int], ...]


def version_links(conn: sqlite3.Connection) -> Versions:
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
        if cause == "unknown" or hits < MIN_CASES_FOR_CORRELATION or others <= 0:
            continue
        link = VersionLink(name, value, cause, hits, cases, per_fact_cause[(name, cause)] - hits, others)
        if link.lift >= MIN_LIFT:
            links.append(link)
    values = Counter(name for name, _ in per_value)
    uniform = sorted((name, value, cases) for (name, value), cases in per_value.items()
                     if values[name] == 1 and cases >= per_fact[name])
    return Versions(tuple(sorted(links, key=lambda l: (-min(l.lift, 1e9), -l.with_cause, l.fact, l.value))),
                    tuple(uniform))
