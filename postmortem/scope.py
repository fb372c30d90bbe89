"""Scope: a verdict about a job is about that job.

A snapshot (`postmortem snapshot`, the hang snapshot of `postmortem run`) and a run record name the job the inputs
capture: its processes, its host and its lifetime. The node context saved beside them (the kernel log, telemetry)
is the whole machine's, and it holds other processes' events and older ones: the OOM kill of another user's
notebook an hour before the job started explains nothing about the job's hang. Such a finding is kept, marked
`outside` with the reason, and ranked after every finding of the job; it is never the verdict and never the root
of one (rank.py).

What makes an event another process's or another time's:
- another host than every host of the job;
- a time before the job started (less rank.LEAD for clock skew), whatever the cause;
- a process-reach cause (signatures/causes.yaml `reach`) whose evidence names a pid that is not the job's and a
  process name no process of the job has. A name the job's processes share (`python`) may be a rank that died
  before the snapshot was taken, so it stays in scope.
An event that says nothing of its host, time or process stays in scope: doubt goes to the job. Without a snapshot
or a run record there is no job to scope to, and nothing changes.

A guess about who ended a process (data/guesses.tsv: SIGKILL, "probably the host OOM killer") is refuted when the
run read the kernel log of the job's window and that log holds none of the events that would confirm it: it is kept
as context too, with that reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from .knowledge import data_rows
from .model import Event, Finding, iso_time
from .rank import LEAD, comparable
from .signatures import Cause, moment


@dataclass(frozen=True)
class JobScope:
    """The job the inputs capture: what a finding must share with it to be about it."""

    pids: frozenset[int]
    names: frozenset[str]
    """The job's process names as the kernel writes them (comm) and as they were started (argv[0]'s base name)."""
    hosts: frozenset[str]
    started: datetime | None
    """When the earliest process of the job started (a snapshot's processes, a run record's start)."""
    what: str
    """The job in words, for the reasons ("the snapshot of pids 4100, 4101")."""


def job_scope(events: Sequence[Event]) -> JobScope | None:
    """The job of the snapshots and run records among `events`, or None when there is none."""
    processes = [e for e in events if e.kind == "process-snapshot"]
    runs = [e for e in events if e.kind == "job-run"]
    if not processes and not runs:
        return None
    starts = [t for t in (*(iso_time(e.fields.get("started")) for e in processes),
                          *(iso_time(e.fields.get("job_started")) for e in runs)) if t is not None]
    pids = frozenset(e.fields["pid"] for e in processes if isinstance(e.fields.get("pid"), int))
    names = frozenset(str(e.fields[key]) for e in processes for key in ("comm", "process") if e.fields.get(key))
    hosts = frozenset(str(e.fields["host"]) for e in processes if e.fields.get("host"))
    what = (f"the snapshot of pid{'s' if len(pids) > 1 else ''} {', '.join(map(str, sorted(pids)))}" if pids
            else "the run")
    return JobScope(pids if processes else frozenset(), names, hosts, min(starts, key=moment) if starts else None,
                    what)


def mark_outside(findings: Sequence[Finding], events: Sequence[Event], causes: Mapping[str, Cause]) -> list[Finding]:
    """`findings` with `outside` set on each whose every evidence event is another process's, host's or time's."""
    job = job_scope(events)
    if job is None:
        return list(findings)
    by_id = {e.id: e for e in events}
    marked = []
    for finding in findings:
        evidence = [by_id[i] for i in finding.evidence if i in by_id]
        machine = causes[finding.cause].reach == "machine" if finding.cause in causes else False
        reasons = [_outside(event, job, machine) for event in evidence]
        if evidence and all(reasons):
            finding = dataclasses.replace(finding, outside=reasons[0])
        elif (refuted := _refuted(finding, events, job)) is not None:
            finding = dataclasses.replace(finding, outside=refuted)
        marked.append(finding)
    return marked


@cache
def guesses() -> dict[str, frozenset[str]]:
    """data/guesses.tsv: each guess's signature and the event kinds that would confirm it."""
    return {row["signature"]: frozenset(row["confirmed_by"].split("|")) for row in data_rows("guesses.tsv")}


def _refuted(finding: Finding, events: Sequence[Event], job: JobScope) -> str | None:
    """Why a guess is wrong here: the run read the kernel log of the job's window, and no confirming event stands in
    it after the job started (on the job's hosts)."""
    confirming = guesses().get(finding.signature)
    runs = [e for e in events if e.kind == "job-run" and e.fields.get("kernel_log")]
    if confirming is None or not runs:
        return None
    if any(e.kind in confirming and _outside(e, job, machine=True) is None for e in events):
        return None
    return (f"a guess the job's kernel log refutes: {runs[0].fields['kernel_log']}, read over the job's window, "
            f"holds no {' or '.join(sorted(confirming))} event")


def _outside(event: Event, job: JobScope, machine: bool) -> str | None:
    """Why this event is not the job's, or None when it may be."""
    if event.kind in ("process-snapshot", "job-run", "snapshot-record"):
        return None
    host = event.fields.get("host")
    if host and job.hosts and str(host) not in job.hosts:
        return f"on host {host}, not the job's ({', '.join(sorted(job.hosts))})"
    if event.time is not None and job.started is not None and comparable(event.time, job.started) \
            and moment(event.time) < moment(job.started) - LEAD.total_seconds():
        return (f"at {event.time.isoformat(sep=' ', timespec='seconds')}, before the job started "
                f"({job.started.isoformat(sep=' ', timespec='seconds')})")
    pid, name = event.fields.get("pid"), event.fields.get("process")
    if not machine and job.pids and isinstance(pid, int) and pid not in job.pids and name \
            and str(name) not in job.names:
        return f"pid {pid} ({name}) is not a process of {job.what}"
    return None
