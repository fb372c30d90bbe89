"""The terminal answer: verdict first, then its proof, then everything else.

Input text is shown with control characters made visible, so a log line
cannot move the cursor, recolour the terminal or hide what follows it: each
field with `safe`, and the whole report once more through `terminal_text`.
Colour (`color=True`, for a terminal) only ever wraps the tool's own words and
the already-made-safe input text; the words come in the reader's language.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from ..model import YEARLESS, Event, Finding, Report
from ..names import safe
from .frames import frame_line
from .i18n import Translator
from .terminal import terminal_text, wrap
from .view import (
    fact_value,
    gpu_summary,
    lane_of,
    link_note,
    merge_note,
    module_groups,
    nothing_known,
    run_words,
    shown_runs,
    stack_notes,
    tallies,
    tally_words,
    thread_label,
    timeline,
    when,
    where as _where,
)

EVIDENCE_SHOWN = 5
"""Evidence lines printed per finding; the rest are counted."""

CORE_FRAMES = 16
"""Frames of the crashing thread printed; the JSON has them all."""
PYTHON_UNDER_NATIVE = "        py "
"""Leads each Python frame listed under the eval-loop frame that runs it (as pystack --native shows them)."""
SEVERITY_COLOURS = {"critical": "red", "error": "red", "warning": "yellow", "info": "blue"}

Style = Callable[..., str]


def render(report: Report, lang: str = "en", color: bool = False, debug: bool = False, width: int = 88,
           all_threads: bool = False) -> str:
    """The whole terminal report as one string; `color` adds ANSI styles for a terminal; `debug` lists each input's
    lines that hold a known code or phrase but were not read, with why."""
    t = Translator(lang)
    style: Style = click.style if color else _plain
    out: list[str] = []
    verdict = report.verdict
    if verdict is None:
        out.append(style(t("verdict_unknown"), bold=True))
        out.extend(_nothing_known(report, t, style))
    else:
        out.extend(_verdict(report, verdict, t, style, width))
        out.extend(_evidence(report, verdict, t, style))
    out.extend(_suspects(report, t, style))
    others = report.others
    if others:
        out.append("")
        out.append(_heading(t("other_findings"), style))
        for finding in others:
            words = t.words(finding, report)
            note = f" ({link})" if (link := link_note(finding, t)) else ""
            out.append(
                f"  - {style(finding.cause, fg=SEVERITY_COLOURS.get(finding.severity))} [{finding.signature}] "
                f"{t('severity_' + finding.severity)}, {t('confidence').lower()} {finding.confidence:.2f}{note}: "
                f"{safe(words.title)}{_counted(tally_words(tallies(report, finding), t))}"
            )
            first = _first_event(report, finding)
            if first is not None:
                out.append(f"      {style(_where(first, t), fg='cyan')}  {_one_line(first.text)}")
    out.extend(_timeline(report, t, style, width))
    for core in report.cores:
        out.extend(_core(core, t, style, all_threads))
    out.extend(_facts(report, t, style))
    out.extend(_inputs(report, t, style, debug))
    return terminal_text("\n".join(out) + "\n", styled=color)  # the gate, whichever field above forgot `safe`


def _plain(text: str, **_: object) -> str:
    return text


def _heading(text: str, style: Style) -> str:
    return style(text + (":" if text.isascii() else "："), bold=True)


def _verdict(report: Report, finding: Finding, t: Translator, style: Style, width: int = 88) -> list[str]:
    words = t.words(finding, report)
    colour = SEVERITY_COLOURS.get(finding.severity)
    counted = tally_words(tallies(report, finding), t)
    lines = [
        style(t("verdict_line", cause=finding.cause, title=safe(words.title)), fg=colour, bold=True),
        "  " + t("signature_line", signature=finding.signature, severity=t("severity_" + finding.severity),
                 confidence=f"{finding.confidence:.2f}", reason=words.reason),
        *([f"  {counted}"] if counted else []),
        *_gpus(report, t, style),
        "",
        *(f"  {line}" for line in wrap(safe(words.explanation), width - 2)),
    ]
    if words.actions:
        lines.append("")
        lines.append(_heading(t("what_to_do"), style))
        lines.extend(f"  {i}. {safe(action)}" for i, action in enumerate(words.actions[:3], 1))
    return lines


def _gpus(report: Report, t: Translator, style: Style) -> list[str]:
    """Under the verdict, one line per sick GPU with its worst finding, when several GPUs are sick."""
    summary = gpu_summary(report)
    if not summary:
        return []
    lines = ["", _heading(t("gpus_sick", count=len(summary)), style)]
    for line in summary:
        finding = line.finding
        more = f" ({t('more_findings', count=line.others)})" if line.others else ""
        lines.append(f"  {style(safe(line.gpu), fg='cyan')}  "
                     f"{style(finding.cause, fg=SEVERITY_COLOURS.get(finding.severity))} [{finding.signature}] "
                     f"{t('severity_' + finding.severity)}: {safe(t.words(finding, report).title)}"
                     f"{_counted(tally_words(line.tallies, t))}{more}")
    return lines


def _counted(words: str) -> str:
    return f" — {words}" if words else ""


def _evidence(report: Report, finding: Finding, t: Translator, style: Style) -> list[str]:
    events = [e for e in (report.event(i) for i in finding.evidence) if e is not None]
    lines = ["", _heading(t("evidence"), style)]
    for event in events[:EVIDENCE_SHOWN]:
        repeat = f" (x{event.count})" if event.count > 1 else ""
        lines.append(f"  {style(_where(event, t), fg='cyan')}{repeat}")
        lines.extend(f"    {safe(text)}" for text in event.text.splitlines()[:6])
    if len(events) > EVIDENCE_SHOWN:
        lines.append("  " + t("more_events", count=len(events) - EVIDENCE_SHOWN))
    return lines


TIMELINE_SHOWN = 12
"""Events listed in the terminal's timeline, earliest first; the HTML report draws them all."""


def _timeline(report: Report, t: Translator, style: Style, width: int = 88) -> list[str]:
    """The timeline as the HTML report draws it (same axis and notes), as a list: time, lane, kind, place; then the
    year-less events left off the axis, in input order, with their stamps as written."""
    line = timeline(report)
    notes = [t(line.zone)] if line.marks else []
    notes += [t("yearless", count=line.yearless)] if line.yearless else []
    if not notes:
        return []
    lines = ["", _heading(t("timeline"), style), *(f"  {part}" for part in wrap(" ".join(notes), width - 2))]
    placed = {m.event.id for m in line.marks}
    rows = [(m.label, line.lanes[m.lane], m.event) for m in line.marks]
    rows += [(str(when(e)), lane_of(e), e) for e in report.events if e.id not in placed and e.clock == YEARLESS]
    width = max((len(label) for label, _, _ in rows[:TIMELINE_SHOWN]), default=0)
    lines.extend(f"  {label:>{width}}  {safe(lane)}  {e.kind}  {style(_where(e, t), fg='cyan')}"
                 for label, lane, e in rows[:TIMELINE_SHOWN])
    if len(rows) > TIMELINE_SHOWN:
        lines.append("  " + t("more_timeline", count=len(rows) - TIMELINE_SHOWN))
    return lines


def _core(core, t: Translator, style: Style, all_threads: bool = False) -> list[str]:
    """A core file as a debugger user reads it: process, signal, the crashing stack (every thread's with
    `all_threads`, as `thread apply all bt` and pystack show them), GPU libraries."""
    lines = ["", _heading(t("core_file", path=safe(core.path)), style)]
    lines.append(f"  {t('process')} {core.pid}: {safe(core.executable or '?')}"
                 + (f"  ({safe(core.command_line)})" if core.command_line else ""))
    if core.signal is not None:
        sig = core.signal
        mapping = safe(sig.mapping) if sig.mapping else t("no_mapping")
        place = f" @ {sig.address} ({mapping})" if sig.address else ""
        sender = ", " + t("sent_by", pid=sig.sender_pid) if sig.sender_pid else ""
        lines.append(f"  {t('signal')} {style(sig.name, fg='red', bold=True)} ({sig.code_meaning}){place}{sender}")
    if core.original_fault is not None:
        fault = core.original_fault
        lines.append(f"  {t('original_fault')} {style(fault.signal.name, fg='red', bold=True)} "
                     f"({fault.signal.code_meaning}){f' @ {fault.signal.address}' if fault.signal.address else ''}: "
                     + t("reraised_by", handler=safe(fault.handler)))
    live = core.signal is None or all_threads  # a snapshot of a live process: every thread is shown, none crashed
    for thread in sorted(core.threads, key=lambda th: not th.crashed):  # the crashing thread first
        if not (thread.crashed or live):
            continue
        lines.append(f"  {t('crashing_thread' if thread.crashed else 'thread', tid=thread_label(thread))}:")
        stack = _stack(thread, t)
        lines.extend(stack)
        if note := merge_note(thread):
            lines.append(f"    [{safe(note)}]")
        if thread.python_frames and sum(line.startswith(PYTHON_UNDER_NATIVE) for line in stack) < len(
                thread.python_frames):  # some Python frames sit on no shown eval-loop frame: list them all
            lines.append(f"    {t('python_stack')}:")
            lines.extend(f"      {_python_frame(f)}" for f in thread.python_frames[:CORE_FRAMES])
    others = [th for th in core.threads if not (th.crashed or live)]
    if others:
        lines.append("  " + t("other_threads_hint", count=len(others)))
    for heading, modules in module_groups(core.modules):
        lines.append(f"  {t(heading)}:")
        lines.extend(f"    {safe(m.path)} ({m.kind}{', ' + safe(m.version) if m.version else ''})" for m in modules)
    values = core.environment.get("values") or {}
    if values:
        lines.append(f"  {t('environment_variables')}: "
                     + ", ".join(f"{safe(k)}={safe(str(v))}" for k, v in values.items()))
    return lines


def _stack(thread, t: Translator) -> list[str]:
    """The thread's frames with runs of recursion folded (CORE_FRAMES lines at most), then why the
    stack stops short of its outermost frame and from which frame on it is a guess."""
    runs, rest = shown_runs(thread.frames, CORE_FRAMES)
    lines = []
    for run in runs:
        if run.repeats > 1:
            lines.append("    " + run_words(run, t))
            continue
        lines.append(f"    #{run.first:<2} {frame_line(run.cycle[0], t)}")
        lines.extend(PYTHON_UNDER_NATIVE + _python_frame(f) for f in run.cycle[0].python_frames[:CORE_FRAMES])
    if rest:
        lines.append("    " + t("more_frames", count=f"{rest:,}"))
    return lines + ["    " + note for note in stack_notes(thread, t)]


def _python_frame(frame) -> str:
    return f"{safe(frame.file)}:{frame.line} in {safe(frame.function)}"


def _facts(report: Report, t: Translator, style: Style) -> list[str]:
    if not report.facts:
        return []
    lines = ["", _heading(t("environment"), style)]
    for name, values in report.facts.items():
        shown = "; ".join(fact_value(v) for v in list(values)[:6])
        lines.append(f"  {name}: {shown}")
    return lines


def _inputs(report: Report, t: Translator, style: Style, debug: bool = False) -> list[str]:
    lines = ["", _heading(t("inputs", count=len(report.inputs)), style)]
    for info in report.inputs:
        lines.append(f"  {style(safe(info.path), fg='cyan')}: {info.format}, {t('bytes', size=info.size)}")
        lines.extend(f"    ! {style(safe(t.sentence(d)), fg='yellow')}" for d in info.diagnostics)
        if debug:
            lines.extend(f"    ? {t('unread_line', line=u.line, reason=t.sentence(u.reason), text=safe(u.text))}"
                         for u in info.unread)
    return lines


def _nothing_known(report: Report, t: Translator, style: Style) -> list[str]:
    """Why there is no verdict, and what to try (view.nothing_known)."""
    known = nothing_known(report, t)
    if not known.formats:
        return [f"  {known.said}"]
    return [f"  {known.said}", "", _heading(t("formats_heading"), style),
            *(f"  - {reads}: {get}" for reads, get in known.formats)]


def _suspects(report: Report, t: Translator, style: Style) -> list[str]:
    """The unexplained lines most likely to be the root, when no finding names it."""
    events = [e for e in (report.event(i) for i in report.suspects) if e is not None]
    if not events:
        return []
    lines = ["", _heading(t("suspects"), style)]
    for event in events:
        lines.append(f"  {style(_where(event, t), fg='cyan')}  {event.kind}: {_one_line(event.text)}")
    return lines


def _first_event(report: Report, finding: Finding) -> Event | None:
    return report.event(finding.evidence[0]) if finding.evidence else None


def _one_line(text: str, width: int = 160) -> str:
    first = safe(text.splitlines()[0] if text else "")
    return first if len(first) <= width else first[: width - 3] + "..."
