"""PyTorch flight-recorder dumps: the last collectives each rank enqueued, one dump per rank.

ProcessGroupNCCL (on a watchdog timeout, TORCH_NCCL_DUMP_ON_TIMEOUT) and, since 2.8, Gloo write the recorder's
ring buffer per rank, to `TORCH_FR_DUMP_TEMP_FILE` + rank (`nccl_trace_rank_3`): a pickle, or JSON from the JSON
dump API. A dump is a whole document, read like run_record: a pickle reaches this source because the pipeline
scans every input that is not an ELF file or an archive for anchors, bytes included, and a pickle holds its
dict keys verbatim (BINUNICODE), so `collective_seq_id` (written once, memoized) marks it as it marks the JSON.

A pickle from a bug report is code: it is decoded by `safe_pickle`, which builds plain data only and refuses
anything else; the refusal becomes the input's diagnostic. Each readable dump becomes one `flight-recorder`
event (rank, version, per process group the last enqueued / started / completed sequence number, the last
entry); its `entries` are for `postmortem.flight`, which lines the ranks up and takes them off the event.
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from .. import later, safe_pickle
from ..knowledge import data_rows
from ..model import Event, Location
from ..text import Line, TextDoc

NAME = "flight-recorder"
ANCHORS = (b"pg_config", b"collective_seq_id", b"profiling_name")
"""Keys of a dump: the group table, written before the entries (a pickle cut short after some 40 bytes is still
named as a cut dump), and keys every entry has, the sequence number (from version 2.0) and the op's name."""
MAX_DUMP = safe_pickle.MAX_INPUT_BYTES
"""Largest dump read; the default 2,000 entries per rank are a few MB."""
PICKLE_START = b"\x80"
"""PROTO, the first opcode of every pickle of protocol 2 or later (the recorder writes protocol 2)."""
RANK_IN_NAME = later.compile(r"_rank_([0-9]+)(?:\.json)?$")
"""The rank PyTorch appends to the dump's file name (`nccl_trace_rank_3`, `fr_json_rank_3.json`)."""
MAX_RANK_DIGITS = 9
"""A rank of more digits belongs to no job (the largest have some 10**5 ranks); an archive member's name may
carry thousands, which int() refuses past 4,300."""
VERSION = later.compile(r"([0-9]{1,9})\.([0-9]{1,9})")
"""A dump's version as the recorder writes it: "2.10". ASCII digits only: "2.\u00b2" is digits to str.isdigit."""
WHOLE = range(-(2**63), 2**64)
"""The numbers the recorder writes: int64 times, sizes and counters, size_t sequence numbers. Past them a value
is no recorder's (a 20,000-bit sequence number), and str() of one of over 4,300 digits raises."""
WHOLE_DIGITS = 20
"""Digits of the longest number in WHOLE (2**64 - 1)."""
WHOLE_TEXT = later.compile(rf"-?[0-9]{{1,{WHOLE_DIGITS}}}")
"""A whole number as JSON dumps quote it (pg_status counters)."""
SHOWN = 40
"""Characters of a dump's value shown in a diagnostic or a field before it is cut."""
TORCH_FRAME = later.compile(r"(?:^|/)torch/")
"""Frames in torch's own code: the user's call is the innermost frame outside them."""
NO_ENTRY = -1
"""What pg_status says before a group's first collective."""


@dataclass(frozen=True)
class Entry:
    """One recorded collective of one rank, in the names every version is read into."""

    pg: str
    pg_desc: str
    seq: int
    op: str
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    state: str
    created_ns: int | None
    latest_ns: int | None
    """The latest time the recorder noted for it (created, started or completed)."""
    caller: str | None
    """The user's frame that called it: `function (file:line)`."""
    frames: tuple[str, ...]
    is_p2p: bool
    timeout_ms: int | None


@dataclass(frozen=True)
class KeyName:
    """One row of data/flight-recorder-fields.tsv: the key a field has in dumps of versions [since, until)."""

    field: str
    key: str
    since: tuple[int, int]
    until: tuple[int, int]


@cache
def key_names() -> tuple[KeyName, ...]:
    return tuple(KeyName(row["field"], row["key"], _version(row["since"]) or (0, 0), _version(row["until"]) or (0, 0))
                 for row in data_rows("flight-recorder-fields.tsv"))


def key_for(field: str, version: tuple[int, int]) -> str | None:
    """The key `field` has in a dump of `version`; None when the table does not know that version."""
    return next((row.key for row in key_names() if row.field == field and row.since <= version < row.until), None)


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One `flight-recorder` event per dump; what stops a dump from being read is the input's diagnostic."""
    raw = doc.reader.read_at(0, MAX_DUMP + 1)
    dump = _load(doc, raw)
    if dump is None:
        return
    version_text = _text(dump.get("version"))
    version, written = _version(version_text), _cut(version_text)
    seq_key = key_for("seq", version) if version else None
    digits = _rank_digits(doc.path)
    rank = int(digits) if digits and len(digits) <= MAX_RANK_DIGITS else None
    who = f"rank {rank}" if rank is not None else "an unknown rank"
    if seq_key is None:
        rows = [row for row in key_names() if row.field == "seq"]
        since, until = min(row.since for row in rows), max(row.until for row in rows)
        doc.diagnostics.append(f"flight-recorder dump of {who} has version {_shown(dump.get('version'))}, which this "
                               f"reader does not know (it reads {since[0]}.{since[1]} up to {until[0]}.{until[1]}); "
                               "its entries were not compared")
    entries = _entries(doc, dump.get("entries"), seq_key, who) if seq_key else ()
    if seq_key and not dump.get("entries"):
        doc.diagnostics.append(f"flight-recorder dump of {who} holds no entries: the rank reached no collective "
                               "(where other ranks' dumps hold entries, it is the one they waited for), or the "
                               "recorder was off (TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE unset)")
    if rank is None:
        named = f"a rank of {len(digits):,} digits, which no job has," if digits else "no rank"
        doc.diagnostics.append(f"flight-recorder dump with {named} in its file name (..._rank_N): "
                               "it is not lined up with the other ranks")
    fields = _fields(dump, written, rank, entries)
    when = moment(max((e.latest_ns for e in entries if e.latest_ns), default=None))
    text = _summary(who, written, fields)
    where = Location(doc.path, offset=0) if raw.startswith(PICKLE_START) else Location(doc.path, 1)
    yield Event(kind="flight-recorder", where=where, text=text, fields=fields, time=when,
                clock="wall" if when else None)


def moment(ns: int | None) -> datetime | None:
    """An epoch-nanosecond stamp as a time; None when there is none or it is beyond any calendar."""
    try:
        return datetime.fromtimestamp(ns / 1e9, UTC) if ns else None
    except (OverflowError, OSError, ValueError):
        return None


def _load(doc: TextDoc, raw: bytes) -> dict[str, Any] | None:
    """The dump as plain data, or None (with a diagnostic when it is a dump that cannot be read).

    Input that is neither a pickle nor a JSON object (a log that mentions a key) is no dump and says nothing."""
    is_pickle = raw.startswith(PICKLE_START)
    if not is_pickle and raw.lstrip()[:1] != b"{":
        return None
    kind = "pickle" if is_pickle else "JSON"
    if len(raw) > MAX_DUMP:
        doc.diagnostics.append(f"flight-recorder dump ({kind}) larger than {MAX_DUMP} bytes: not read")
        return None
    try:
        dump = safe_pickle.loads(raw) if is_pickle else json.loads(doc.decode(raw), parse_int=_json_int)
    except safe_pickle.PickleRefused as exc:
        doc.diagnostics.append(f"flight-recorder dump (pickle) not read: {exc}; nothing in it was run")
        return None
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested deeper than any dump is
        doc.diagnostics.append(f"flight-recorder dump (JSON) not read, truncated or malformed: {exc}")
        return None
    # the JSON dumper leaves `entries` out of a dump that holds none; pg_status is in every dump
    return dump if isinstance(dump, dict) and ("entries" in dump or "pg_status" in dump) else None


def _json_int(digits: str) -> int | str:
    """A JSON number as an int, or, past the digits of any int64, as its digits: int() refuses over 4,300 digits
    (failing the whole document) and takes quadratic time before that."""
    return int(digits) if len(digits.lstrip("-")) <= WHOLE_DIGITS else digits


def _version(text: str) -> tuple[int, int] | None:
    """"2.10" -> (2, 10): versions compare as numbers, not strings."""
    match = VERSION.fullmatch(text)
    return (int(match[1]), int(match[2])) if match else None


def _rank_digits(path: str) -> str | None:
    match = RANK_IN_NAME.search(posixpath.basename(path))
    return match[1] if match else None


def _whole(value: object) -> int | None:
    """A time, size or counter as the recorder writes it (an int, or its digits in JSON); None for anything
    else: a float, inf, a 20,000-bit number, digits that are not ASCII."""
    if isinstance(value, str) and WHOLE_TEXT.fullmatch(value):
        value = int(value)
    return value if type(value) is int and value in WHOLE else None


def _text(value: object) -> str:
    """str(value), which raises for a number of over 4,300 digits (or a list holding one): then what it is."""
    try:
        return str(value)
    except ValueError:
        return f"<{type(value).__name__} holding a number too long to write out>"


def _cut(text: str, quoted: bool = False) -> str:
    head = repr(text[:SHOWN]) if quoted else text[:SHOWN]
    return head if len(text) <= SHOWN else f"{head}... ({len(text):,} characters)"


def _shown(value: object) -> str:
    """A dump's value in a one-line diagnostic: a huge number by its size, text quoted and cut short."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length():,}-bit number"
    return _cut(value, quoted=True) if isinstance(value, str) else _cut(_text(value))


class BadEntry(ValueError):
    """An entry holding a value no recorder writes; the message says which, for the diagnostic."""


def _entries(doc: TextDoc, raw: object, seq_key: str, who: str) -> tuple[Entry, ...]:
    """The entries in the version's names; one that is not an entry, or holds an absurd value, is dropped and
    counted in a diagnostic with why, and the others are read."""
    items = raw if isinstance(raw, list) else []
    entries = []
    dropped: Counter[str] = Counter()
    for item in items:
        try:
            entries.append(_entry(item, seq_key))
        except BadEntry as exc:
            dropped[str(exc)] += 1
        except (KeyError, TypeError, ValueError, AttributeError):
            dropped["without the fields of an entry"] += 1
    if dropped:
        count = sum(dropped.values())
        why = "; ".join(f"{n} {reason}" for reason, n in dropped.most_common(3))
        doc.diagnostics.append(f"{count} flight-recorder entr{'y' if count == 1 else 'ies'} of {who} dropped, "
                               f"the other {len(entries)} read: {why}")
    return tuple(entries)


def _entry(item: Mapping[str, Any], seq_key: str) -> Entry:
    group = item.get("process_group") or (str(item["pg_id"]), "")
    recorded = [f for f in item.get("frames") or () if isinstance(f, Mapping)]  # innermost first
    frames = tuple(f"{f['name']} ({posixpath.basename(str(f['filename']))}:{f['line']})" for f in recorded)
    caller = next((frame for frame, f in zip(frames, recorded, strict=True)
                   if not TORCH_FRAME.search(str(f["filename"]))), None)
    times = [t for k in ("time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns")
             if (t := _whole(item.get(k)) or 0) > 0]
    created = _whole(item.get("time_created_ns")) or 0
    seq = _whole(item[seq_key])
    if seq is None:
        raise BadEntry(f"with a sequence number that is no whole number of 64 bits ({_shown(item[seq_key])})")
    return Entry(pg=str(group[0]), pg_desc=str(group[1]) if len(group) > 1 else "", seq=seq,
                 op=str(item["profiling_name"]).rpartition(":")[2], input_sizes=_sizes(item.get("input_sizes")),
                 output_sizes=_sizes(item.get("output_sizes")), input_dtypes=_words(item.get("input_dtypes")),
                 output_dtypes=_words(item.get("output_dtypes")), state=str(item.get("state", "")),
                 created_ns=created if created > 0 else None, latest_ns=max(times, default=None), caller=caller,
                 frames=frames, is_p2p=bool(item.get("is_p2p")), timeout_ms=_whole(item.get("timeout_ms")))


def _sizes(value: object) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(map(_size, shape)) for shape in value) if isinstance(value, list | tuple) else ()


def _size(value: object) -> int:
    if (size := _whole(value)) is None:
        raise BadEntry(f"with a tensor size that is no whole number of 64 bits ({_shown(value)})")
    return size


def _words(value: object) -> tuple[str, ...]:
    return tuple(str(word) for word in value) if isinstance(value, list | tuple) else ()


def _fields(dump: Mapping[str, Any], version: str, rank: int | None, entries: Sequence[Entry]) -> dict[str, Any]:
    """The dump as event fields: per group its progress, and the last entry as the rank left it."""
    groups: dict[str, dict[str, Any]] = {}
    status = dump.get("pg_status")
    for pg, progress in (status if isinstance(status, dict) else {}).items():
        if isinstance(progress, dict):
            groups[_text(pg)] = {name: _int(progress.get(f"last_{name}_collective"))
                                 for name in ("enqueued", "started", "completed")}
    for entry in entries:
        groups.setdefault(entry.pg, {})["desc"] = entry.pg_desc
    fields: dict[str, Any] = {"rank": rank, "version": version, "groups": groups, "entries": tuple(entries),
                              "entry_count": len(entries)}
    backends = {name.partition(":")[0] for e in dump.get("entries") or ()
                if isinstance(e, Mapping) and isinstance(name := e.get("profiling_name"), str) and ":" in name}
    if backends:
        fields["backend"] = ",".join(sorted(backends))
    if dump.get("comm_lib_version"):
        fields["comm_lib_version"] = _cut(_text(dump["comm_lib_version"]))
    if entries:
        last = entries[-1]
        fields.update(last_op=last.op, last_pg=last.pg, last_seq=last.seq, last_input_sizes=_lists(last.input_sizes),
                      last_output_sizes=_lists(last.output_sizes), last_dtypes=list(last.input_dtypes),
                      last_state=last.state, last_frames=list(last.frames), last_caller=last.caller)
    return {key: value for key, value in fields.items() if value not in (None, "", [])}


def _int(value: object) -> int:
    """pg_status counters: ints in a pickle, strings in JSON."""
    counter = _whole(value)
    return NO_ENTRY if counter is None else counter


def _lists(sizes: tuple[tuple[int, ...], ...]) -> list[list[int]]:
    return [list(shape) for shape in sizes]


def _summary(who: str, version: str, fields: Mapping[str, Any]) -> str:
    """One line a person reads: whose dump, how far each group got, and the last collective."""
    groups = "; ".join(f"group {pg}{' ' + g['desc'] if g.get('desc') else ''}: last enqueued {g.get('enqueued')}, "
                       f"started {g.get('started')}, completed {g.get('completed')}"
                       for pg, g in fields["groups"].items())
    # a barrier's entry has no sizes or dtypes, and an empty value is not kept (_fields): each is read with .get
    last = (f"; last entry: {fields['last_op']} {fields.get('last_input_sizes', [])} "
            f"{','.join(fields.get('last_dtypes', []))} {fields.get('last_state', '?')} "
            f"(group {fields.get('last_pg', '?')}, seq {fields.get('last_seq', '?')})"
            + (f" from {fields['last_caller']}" if fields.get("last_caller") else "")) if "last_op" in fields else ""
    return (f"flight-recorder dump of {who} (version {version}, {fields['entry_count']} entries"
            f"{', ' + fields['backend'] if 'backend' in fields else ''}){': ' + groups if groups else ''}{last}")
