"""The terminal answer: verdict first, then its proof, then everything else.

Input text is shown with control characters made visible, so a log line
cannot move the cursor, recolour the terminal or hide what follows it.
"""

from __future__ import annotations

import textwrap

import regex

from ..model import Event, Finding, Report

EVIDENCE_SHOWN = 5
"""Evidence lines printed per finding; the rest are counted."""

CORE_FRAMES = 16
"""Frames of the crashing thread printed; the JSON has them all."""
GPU_KINDS = ("nvidia-driver", "cuda-library", "framework", "user-extension")
"""Module kinds listed under a core: what tells where in the GPU stack it crashed."""

_CONTROL = regex.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: str) -> str:
    """Make control characters visible (\\x1b shows as '\\x1b')."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render(report: Report) -> str:
    """The whole terminal report as one string."""
    out: list[str] = []
    verdict = report.verdict
    if verdict is None:
        out.append("Verdict: unknown: no known cause matched.")
        out.append(f"  {len(report.events)} event(s) found; see them with --format json.")
    else:
        out.extend(_verdict(verdict))
        out.extend(_evidence(report, verdict))
    others = report.findings[1:]
    if others:
        out.append("")
        out.append("Other findings:")
        for finding in others:
            note = f" (consequence of {finding.consequence_of})" if finding.consequence_of else ""
            out.append(
                f"  - {finding.cause} [{finding.signature}] {finding.severity}, "
                f"confidence {finding.confidence:.2f}{note}: {finding.title}"
            )
            first = _first_event(report, finding)
            if first is not None:
                out.append(f"      {_where(first)}  {_one_line(first.text)}")
    for core in report.cores:
        out.extend(_core(core))
    out.extend(_facts(report))
    out.extend(_inputs(report))
    return "\n".join(out) + "\n"


def _verdict(finding: Finding) -> list[str]:
    lines = [
        f"Verdict: {finding.cause}: {safe(finding.title)}",
        f"  signature {finding.signature}, severity {finding.severity}, "
        f"confidence {finding.confidence:.2f} ({finding.confidence_reason})",
        "",
        *(f"  {line}" for line in textwrap.wrap(safe(finding.explanation), 88)),
    ]
    if finding.actions:
        lines.append("")
        lines.append("What to do:")
        lines.extend(f"  {i}. {action}" for i, action in enumerate(finding.actions[:3], 1))
    return lines


def _evidence(report: Report, finding: Finding) -> list[str]:
    events = [e for e in (report.event(i) for i in finding.evidence) if e is not None]
    lines = ["", "Evidence:"]
    for event in events[:EVIDENCE_SHOWN]:
        repeat = f" (x{event.count})" if event.count > 1 else ""
        lines.append(f"  {_where(event)}{repeat}")
        lines.extend(f"    {safe(text)}" for text in event.text.splitlines()[:6])
    if len(events) > EVIDENCE_SHOWN:
        lines.append(f"  ... and {len(events) - EVIDENCE_SHOWN} more")
    return lines


def _core(core) -> list[str]:
    """A core file as a debugger user reads it: process, signal, the crashing stack, GPU libraries."""
    lines = ["", f"Core file {safe(core.path)}:"]
    lines.append(f"  process {core.pid}: {safe(core.executable or '?')}"
                 + (f"  ({safe(core.command_line)})" if core.command_line else ""))
    if core.signal is not None:
        sig = core.signal
        place = f" at {sig.address} ({safe(sig.mapping) if sig.mapping else 'no mapping'})" if sig.address else ""
        sender = f", sent by pid {sig.sender_pid}" if sig.sender_pid else ""
        lines.append(f"  signal {sig.name} ({sig.code_meaning}){place}{sender}")
    for thread in core.threads:
        if not thread.crashed:
            continue
        lines.append(f"  crashing thread {thread.tid}:")
        lines.extend(f"    #{i:<2} {_frame(frame)}" for i, frame in enumerate(thread.frames[:CORE_FRAMES]))
        if len(thread.frames) > CORE_FRAMES:
            lines.append(f"    ... {len(thread.frames) - CORE_FRAMES} more frames")
        if thread.python_frames:
            lines.append("    Python stack (innermost first):")
            lines.extend(f"      {safe(f.file)}:{f.line} in {safe(f.function)}" for f in thread.python_frames[:CORE_FRAMES])
    others = [t for t in core.threads if not t.crashed]
    if others:
        lines.append(f"  {len(others)} other thread(s); all frames with --format json")
    gpu_modules = [m for m in core.modules if m.kind in GPU_KINDS]
    if gpu_modules:
        lines.append("  GPU libraries loaded:")
        lines.extend(f"    {safe(m.path)} ({m.kind}{', ' + m.version if m.version else ''})" for m in gpu_modules)
    values = core.environment.get("values") or {}
    if values:
        lines.append("  environment: " + ", ".join(f"{safe(k)}={safe(str(v))}" for k, v in values.items()))
    return lines


def _frame(frame) -> str:
    where = f"{safe(frame.module or '?')}!{safe(frame.symbol or '??')}"
    if frame.symbol_offset:
        where += f"+{frame.symbol_offset:#x}"
    return f"{frame.pc} {where}" + ("" if frame.how in ("registers", "cfi") else f"  [{frame.how}: a guess]")


def _facts(report: Report) -> list[str]:
    if not report.facts:
        return []
    lines = ["", "Environment:"]
    for name, values in report.facts.items():
        shown = ", ".join(safe(str(v)) for v in list(values)[:6])
        lines.append(f"  {name}: {shown}")
    return lines


def _inputs(report: Report) -> list[str]:
    lines = ["", f"Inputs ({len(report.inputs)}):"]
    for info in report.inputs:
        lines.append(f"  {safe(info.path)}: {info.format}, {info.size} bytes")
        lines.extend(f"    ! {safe(d)}" for d in info.diagnostics)
    return lines


def _first_event(report: Report, finding: Finding) -> Event | None:
    return report.event(finding.evidence[0]) if finding.evidence else None


def _where(event: Event) -> str:
    where = event.where
    if where.line is None:
        return safe(where.path) + (f"@{where.offset}" if where.offset is not None else "")
    span = f"-{where.end_line}" if where.end_line and where.end_line != where.line else ""
    return f"{safe(where.path)}:{where.line}{span}"


def _one_line(text: str, width: int = 160) -> str:
    first = safe(text.splitlines()[0] if text else "")
    return first if len(first) <= width else first[: width - 3] + "..."

