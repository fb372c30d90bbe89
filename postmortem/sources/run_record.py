"""The record `postmortem run` writes into its case directory (run.json): what ran, how it ended, what run set.

The record is the wrapper's bookkeeping, not evidence of a fault. It becomes one `job-run` event whose fields
are facts (the command, how it ended, when, the variables run set and why: data/run-environment.tsv), and it
names the job's captured streams beside it, so that the pipeline reads a stream with nothing alarming in it
(or nothing at all) as context rather than a problem input, and a core of the job shows the job's own
environment apart from what run added (`job_environment`).
"""

from __future__ import annotations

import dataclasses
import posixpath
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..knowledge import data_rows, signal_name
from ..model import Event, Location, iso_time
from ..text import Line, TextDoc

KERNEL_LOG_NOTE = "kernel log of the job's window: "
"""How a record's `collected` names the kernel log `postmortem run` saved over the job's window: scope.py refutes a
guess about who killed the job (data/guesses.tsv) that this log does not confirm."""
EMPTY_WINDOW = "(read; no line in the window)"
"""The note's file name when the kernel log was read and held no line of the job's window."""

NAME = "run-record"
ANCHORS = (b'"environment_set":',)
"""The key every run record has held since `run` was written (json.dumps with indent puts it on a line of its own)."""
MAX_RECORD = 1 << 20
"""A record is a few hundred bytes; a larger input holding the anchor is read no further than this."""


@dataclass(frozen=True)
class RunSetting:
    """One row of data/run-environment.tsv: a variable `run` sets, when, and the purpose it serves."""

    name: str
    value: str
    when: str
    purpose: str
    source: str


@cache
def run_settings() -> tuple[RunSetting, ...]:
    """The table, loaded once."""
    return tuple(RunSetting(row["name"], row["value"], row["when"], row["purpose"], row["source"])
                 for row in data_rows("run-environment.tsv"))


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One `job-run` event for a run record; any other JSON or text that holds the anchor yields nothing."""
    found = doc.json_object(MAX_RECORD)
    if found is None:
        return
    record, text = found
    if not (isinstance(record.get("command"), list)
            and isinstance(record.get("exit_status"), int) and isinstance(record.get("environment_set"), dict)):
        return
    ended = iso_time(record.get("ended"))
    text = text.rstrip("\n")
    yield Event(kind="job-run", where=Location(doc.path, 1, text.count("\n") + 1), text=text,
                fields=_fields(record, doc.path), time=ended, clock="wall" if ended else None)


def _fields(record: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The record as event fields: facts (job_*, set_by_run) for the report, the rest for the pipeline."""
    signal = record.get("signal_number")
    added = {str(k): str(v) for k, v in record["environment_set"].items()}
    streams = record.get("streams")
    streams = streams if isinstance(streams, dict) else {}
    here = posixpath.dirname(path)
    fields: dict[str, Any] = {
        "job_command": shlex.join(str(word) for word in record["command"]),
        "job_exit": (f"killed by {signal_name(signal) or 'signal'} (signal {signal})" if isinstance(signal, int)
                     else f"exit status {record['exit_status']}"),
        "exit_status": record["exit_status"],
        "pid": record.get("pid") if isinstance(record.get("pid"), int) else None,
        "job_started": record.get("started"),
        "job_ended": record.get("ended"),
        "environment_set": added,
        "set_by_run": set_by_run_words(added),
        "streams": {str(name): posixpath.join(here, str(file)) for name, file in streams.items()},
        "kernel_log": next((_kernel_log(here, note[len(KERNEL_LOG_NOTE):]) for note in record.get("collected") or []
                            if isinstance(note, str) and note.startswith(KERNEL_LOG_NOTE)), None),
    }
    return {key: value for key, value in fields.items() if value not in (None, "", {})}


def _kernel_log(here: str, name: str) -> str:
    return f"the kernel log {name}" if name == EMPTY_WINDOW else posixpath.join(here, name)


def set_by_run_words(added: Mapping[str, str]) -> str:
    """The variables run set, grouped by purpose: `A=1, B=2 (NCCL flight recorder: ...); C=1 (faulthandler: ...)`.

    A variable the table does not know (a record of another version) is listed without a purpose."""
    purposes = {setting.name: setting.purpose for setting in run_settings()}
    groups: dict[str, list[str]] = {}
    for name, value in added.items():
        groups.setdefault(purposes.get(name, ""), []).append(f"{name}={value}")
    return "; ".join(", ".join(names) + (f" ({purpose})" if purpose else "") for purpose, names in groups.items())


def captured_streams(events: Iterable[Event]) -> dict[str, str]:
    """Display path -> stream name ("stdout", "stderr") of every stream a run record says it captured."""
    return {path: name for event in events if event.kind == "job-run"
            for name, path in event.fields.get("streams", {}).items()}


def job_environment(cores: Iterable[Any], events: Iterable[Event]) -> list[Any]:
    """Cores whose environment holds variables a run record set, with those moved from `values` / `names_only`
    (the job's own) to `set_by_run`. A variable shown by value moves only when it still has the value run gave
    it; one shown by name only (its value hidden) moves on its name, which run set only where the user had not."""
    added: dict[str, str] = {}
    for event in events:
        if event.kind == "job-run":
            added.update(event.fields.get("environment_set", {}))
    return [_split(core, added) if added else core for core in cores]


def _split(core: Any, added: Mapping[str, str]) -> Any:
    environment = getattr(core, "environment", None)
    if not environment:
        return core
    values = dict(environment.get("values") or {})
    names = list(environment.get("names_only") or ())
    ours = {name: value for name, value in values.items() if added.get(name) == value}
    ours.update({name: added[name] for name in names if name in added})
    if not ours:
        return core
    split = {**environment, "values": {k: v for k, v in values.items() if k not in ours},
             "names_only": [name for name in names if name not in ours], "set_by_run": ours}
    return dataclasses.replace(core, environment=split)
