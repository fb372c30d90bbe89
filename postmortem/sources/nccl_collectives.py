"""NCCL's line per collective call (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=COLL): ranks that called different
collectives at one step.

With COLL debugging on, every rank prints each call it makes on a communicator, numbered by the communicator's
opCount:

    host:32615:32615 [0] NCCL INFO Broadcast: opCount 0 sendbuff 0x... recvbuff 0x... count 25503912 datatype 6
        op 0 root 0 comm 0x7f88e005a260 [nranks=8] stream 0x...

The calls with one opCount on one communicator must agree on every rank (the collective, its count, datatype,
operation and root; where a group launches several at one opCount, the same several on every rank). Point-to-point
sends and receives differ between ranks by design and are not compared. Where the calls differ, the ranks wait in
calls that can never complete together: the job hangs (or reads garbage) at that step, and the cause is the code
path or the data that differed between the ranks, not the network (NVIDIA/nccl#147: rank 0 broadcast 25,503,912
halves while ranks 1-7 broadcast 53 int64s).

A communicator is told apart by the hash newer NCCL prints (`commHash`); where it is absent, by its size, and only
where every process shows one communicator of that size (the pointers differ between processes, so two
communicators of one size could not be told apart and are not compared).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from .. import later
from ..model import Event
from ..text import Line, TextDoc

NAME = "nccl-collectives"
ANCHORS = (b": opCount ",)
READS = ("text",)

_CALL = later.compile(
    r"(?<![^\s:\[\]])(?P<host>[^\s:\[\]]{1,200}+):(?P<pid>\d{1,10}+):\d{1,10}+ \[\d{1,4}+\] NCCL INFO "
    r"(?P<collective>[A-Za-z]{2,40}+): opCount (?P<op_count>[0-9a-fA-F]{1,16}+) sendbuff \S{1,40}+ "
    r"recvbuff \S{1,40}+ (?:acc \S{1,40}+ )?count (?P<count>\d{1,20}+) datatype (?P<datatype>\d{1,3}+) "
    r"op (?P<op>\d{1,3}+) root (?P<root>-?\d{1,10}+) comm (?P<comm>0x[0-9a-fA-F]{1,16}+)"
    r"(?: commHash (?P<hash>-?\d{1,24}+))? "
    r"\[nranks=(?P<nranks>\d{1,7}+)\]")

DATATYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
             "float8e4m3", "float8e5m2")
"""ncclDataType_t by number (nccl.h: ncclInt8 = 0 ... ncclBfloat16 = 9, ncclFloat8e4m3 = 10, ncclFloat8e5m2 = 11)."""


POINT_TO_POINT = frozenset({"Send", "Recv"})
"""Calls whose pairs differ by design (one rank sends, its peer receives)."""


@dataclass(frozen=True)
class Call:
    """One rank's call at one step of one communicator, as its COLL line tells it."""

    process: tuple[str, int]
    communicator: str
    """The same on every process: `hash N` where NCCL prints one, else `nranks N`."""
    pointer: str
    """The communicator's address in this process (two of one size in one process cannot be told apart)."""
    op_count: int
    what: tuple[str, int, int, int, int]
    """The collective, count, datatype, operation and root: what every rank's call at this step must share."""
    line: Line

    def told(self) -> str:
        collective, count, datatype, op, root = self.what
        kind = DATATYPES[datatype] if datatype < len(DATATYPES) else f"datatype {datatype}"
        return f"{collective} of {count:,} {kind} (op {op}, root {root})"


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One event for the first step of each communicator whose ranks' calls differ."""
    steps: dict[tuple[str, int], dict[tuple[str, int], list[Call]]] = defaultdict(lambda: defaultdict(list))
    for call in _comparable(list(_calls(lines))):
        steps[(call.communicator, call.op_count)][call.process].append(call)
    reported: set[str] = set()
    for (communicator, op_count), by_process in sorted(steps.items(), key=lambda item: item[0][1]):
        if communicator in reported or len({frozenset(c.what for c in calls) for calls in by_process.values()}) < 2:
            continue
        reported.add(communicator)
        yield _event(doc, op_count, by_process)


def _calls(lines: list[Line]) -> Iterator[Call]:
    for line in lines:
        if (match := _CALL.search(line.text)) is None or match["collective"] in POINT_TO_POINT:
            continue
        communicator = f"hash {match['hash']}" if match["hash"] else f"nranks {match['nranks']}"
        yield Call((match["host"], int(match["pid"])), communicator, match["comm"], int(match["op_count"], 16),
                   (match["collective"], int(match["count"]), int(match["datatype"]), int(match["op"]),
                    int(match["root"])), line)


def _comparable(calls: list[Call]) -> Iterator[Call]:
    """The calls whose communicator is the same one on every process: by its hash, or by its size where each process
    has one communicator of that size."""
    pointers: dict[tuple[tuple[str, int], str], set[str]] = defaultdict(set)
    for call in calls:
        pointers[(call.process, call.communicator)].add(call.pointer)
    return (call for call in calls
            if call.communicator.startswith("hash ") or len(pointers[(call.process, call.communicator)]) == 1)


def _event(doc: TextDoc, op_count: int, by_process: dict[tuple[str, int], list[Call]]) -> Event:
    """The step's processes grouped by the calls they made; the fewest processes' calls are named first (the odd
    ones out)."""
    groups: dict[frozenset, list[list[Call]]] = defaultdict(list)
    for calls in by_process.values():
        groups[frozenset(c.what for c in calls)].append(calls)
    ordered = sorted(groups.values(), key=lambda group: (len(group), group[0][0].line.number))

    def told(group: list[list[Call]]) -> str:
        return " + ".join(sorted(call.told() for call in group[0]))

    made = [{"call": told(group), "processes": len(group), "first": "{}:{}".format(*group[0][0].process)}
            for group in ordered]
    fields = {"op_count": op_count, "communicator": ordered[0][0][0].communicator, "calls": made,
              "differs": f"{told(ordered[0])} on {len(ordered[0])} process(es) against {told(ordered[-1])} on "
                         f"{len(ordered[-1])}"}
    shown = sorted((group[0][0].line for group in ordered), key=lambda line: line.number)
    return doc.event("nccl-collective-mismatch", shown[0], fields, last=shown[-1] if len(shown) > 1 else None,
                     text="\n".join(line.original for line in shown))
