"""A verdict about a job is about that job (postmortem.scope): a snapshot's node context holds other processes'
events and older ones, which stay in the report as context and are never the verdict.

The job is a real snapshot of a deadlocked Python process (tests/data/snapshot/python-deadlock, taken by
`postmortem snapshot`); the kernel lines are real posted ones (tests/data/scope/SOURCES.md), stamped at the time
each test needs."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

from postmortem.pipeline import analyze

DATA = Path(__file__).parent / "data"
SNAPSHOT = DATA / "snapshot" / "python-deadlock"
JOB_PID = 25264
TAKEN = datetime.fromisoformat("2026-12-01T17:36:12+00:00")
"""When the fixture's snapshot was taken (its snapshot.json)."""


def _case(tmp_path: Path, kernel_lines: list[tuple[datetime, str]], started: datetime | None = None) -> Path:
    """The snapshot with a kernel log of `kernel_lines` (journal short-iso stamps, host vm) beside it; `started`:
    the process's start time, as snapshots written since it was recorded hold it."""
    case = tmp_path / "case"
    shutil.copytree(SNAPSHOT, case)
    if started is not None:
        process = case / f"process.{JOB_PID}.json"
        record = json.loads(process.read_text())
        process.write_text(json.dumps({**record, "started": started.isoformat()}, indent=2))
    (case / "system").mkdir()
    (case / "system" / "kernel.log").write_text("".join(
        f"{when.strftime('%Y-%m-%dT%H:%M:%S%z')} vm kernel: {(DATA / 'scope' / name).read_text()}"
        for when, name in kernel_lines))
    return case


def test_another_process_oom_kill_is_context_and_the_hang_leads(tmp_path):
    report = analyze([str(_case(tmp_path, [(TAKEN - timedelta(hours=1), "other-process-oom.txt")]))])
    assert report.verdict is None
    oom = next(f for f in report.context if f.cause == "host-oom")
    assert oom.outside == f"pid 629 (onmt_train) is not a process of the snapshot of pid {JOB_PID}"
    hang = next(e for e in report.events if e.kind == "process-hang")
    assert report.suspects[0] == hang.id
    assert not any(e.kind == "oom-kill" for e in map(report.event, report.suspects) if e)


def test_an_event_from_before_the_job_started_is_context_whatever_its_cause(tmp_path):
    """An Xid 79 reaches every process on its GPU, but one from an hour before the job is not the job's."""
    started = TAKEN - timedelta(minutes=10)
    report = analyze([str(_case(tmp_path, [(TAKEN - timedelta(hours=1), "xid79.txt")], started))])
    assert report.verdict is None
    off_bus = next(f for f in report.context if f.cause == "gpu-off-bus")
    assert off_bus.outside is not None and "before the job started (2026-12-01 17:26:12+00:00)" in off_bus.outside


def test_a_machine_wide_fault_while_the_job_ran_is_its_verdict(tmp_path):
    started = TAKEN - timedelta(minutes=10)
    report = analyze([str(_case(tmp_path, [(TAKEN - timedelta(minutes=2), "xid79.txt")], started))])
    assert report.verdict is not None and report.verdict.cause == "gpu-off-bus"
    assert report.verdict.outside is None


def test_a_kill_of_a_process_named_as_the_jobs_may_be_a_dead_rank_and_stays_in_scope(tmp_path):
    """The killed process is gone before the snapshot: a pid the snapshot lacks, under a name its processes have
    (here the job is `onmt_train` too), may be one of the job's ranks."""
    case = _case(tmp_path, [(TAKEN - timedelta(minutes=3), "other-process-oom.txt")], TAKEN - timedelta(minutes=10))
    process = case / f"process.{JOB_PID}.json"
    record = json.loads(process.read_text())
    process.write_text(json.dumps({**record, "command": ["/usr/bin/onmt_train", *record["command"][1:]]}))
    report = analyze([str(case)])
    assert report.verdict is not None and report.verdict.cause == "host-oom"


def test_the_outside_reason_is_shown_in_every_format(tmp_path):
    from postmortem.render import html_report, markdown_report, text_report

    report = analyze([str(_case(tmp_path, [(TAKEN - timedelta(hours=1), "other-process-oom.txt")]))])
    assert text_report.render(report).startswith("Verdict: unknown")
    shown = {"text": text_report.render(report), "markdown": markdown_report.render(report),
             "html": html_report.render(report).replace("&#39;", "'")}
    for form, words in shown.items():
        assert "not this job's: pid 629 (onmt" in words, form
        assert f"is not a process of the snapshot of pid {JOB_PID}" in words, form


def test_json_lists_the_jobs_findings_apart_from_the_context(tmp_path):
    """A program that reads `findings[0]` as the verdict never gets another process's event."""
    from postmortem.render.json_report import as_dict

    document = as_dict(analyze([str(_case(tmp_path, [(TAKEN - timedelta(hours=1), "other-process-oom.txt")]))]))
    assert document["verdict"]["cause"] == "unknown" and document["findings"] == []
    context = [(f["cause"], f["outside"].split(" is ")[0]) for f in document["context"]]
    assert context == [("host-oom", "pid 629 (onmt_train)")]


def test_without_a_snapshot_or_run_record_nothing_is_scoped(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text(f"2026-12-01T16:36:12+0000 vm kernel: {(DATA / 'scope' / 'other-process-oom.txt').read_text()}")
    report = analyze([str(log)])
    assert report.verdict is not None and report.verdict.cause == "host-oom"


RUN_STARTED = datetime.fromisoformat("2026-12-07T00:38:39+00:00")


def _run_case(tmp_path: Path, kernel_lines: list[tuple[datetime, str]]) -> Path:
    """A case as `postmortem run` leaves it after a job whose child was SIGKILLed (Python's own report of it in
    stderr.log), with the kernel log of the job's window it read: `kernel_lines` (real lines, stamped), or none."""
    case = tmp_path / "case"
    case.mkdir()
    kernel = "".join(f"{when.strftime('%Y-%m-%dT%H:%M:%S%z')} vm kernel: {(DATA / 'scope' / name).read_text()}"
                     for when, name in kernel_lines)
    if kernel:
        (case / "kernel.log").write_text(kernel)
    (case / "stderr.log").write_text(
        "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'sigkill.py']' died with <Signals.SIGKILL: 9>.\n")
    (case / "stdout.log").write_text("")
    (case / "run.json").write_text(json.dumps({
        "command": ["python3", "parent.py"], "cwd": str(tmp_path), "pid": 10467,
        "started": RUN_STARTED.isoformat(), "ended": (RUN_STARTED + timedelta(seconds=2)).isoformat(),
        "exit_status": 1, "signal_number": None, "environment_set": {}, "streams": {"stdout": "stdout.log",
                                                                                    "stderr": "stderr.log"},
        "collected": [f"kernel log of the job's window: {'kernel.log' if kernel else '(read; no line in the window)'}"],
    }))
    return case


def test_a_sigkill_guess_the_jobs_kernel_log_does_not_confirm_is_context(tmp_path):
    report = analyze([str(_run_case(tmp_path, []))])
    assert "host-oom" not in [f.cause for f in report.findings]
    (guess,) = [f for f in report.context if f.signature == "sigkill-host-oom-guess"]
    assert guess.outside is not None and "kernel log refutes" in guess.outside


def test_a_sigkill_guess_stands_where_the_jobs_kernel_log_holds_an_oom_kill(tmp_path):
    report = analyze([str(_run_case(tmp_path, [(RUN_STARTED + timedelta(seconds=1), "other-process-oom.txt")]))])
    assert report.findings and report.findings[0].cause == "host-oom"
    assert not [f for f in report.context if f.signature == "sigkill-host-oom-guess"]
