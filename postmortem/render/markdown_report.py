"""Markdown for a GitHub or GitLab issue: the verdict in the first lines, evidence in fences, the rest folded.

Nothing from the inputs may change the structure around it or ping, link or reference anything: evidence sits in
fences longer than any backtick run inside it, and every other piece of input-derived text (titles and explanations
filled from log fields, paths, facts) goes through one rule, `inert_words`: a word that could be a mention, an issue
reference or an autolink on any tracker is shown whole inside code, the rest is HTML-escaped and has its Markdown
punctuation backslash-escaped (`text`). Text inside `<summary>` is raw HTML to the tracker: the same words go inside
<code>, the rest is HTML-escaped (`plain_html`).
"""

from __future__ import annotations

import html

from .. import later
from ..model import Event, Finding, Report
from . import view
from .frames import frame_line
from .i18n import Translator

EVIDENCE_OPEN = 3
"""Evidence events of the verdict shown unfolded; the rest go into <details>."""
EVIDENCE_LINES = 30
"""Lines per evidence block."""
THREAD_FRAMES = 16
"""Lines of native frames per thread (a run of recursion is one line), and of Python frames under each: a
GitHub comment holds at most 65,536 characters and a GitLab note a million; the JSON report has every frame."""
OTHER_THREADS = 8
"""Threads besides the crashing one listed (folded); the rest are counted."""

_PUNCTUATION = later.compile(r"([\\`*_\[\]|~])")
"""Characters that start emphasis, code, links or table cells anywhere in a line."""
_BLOCK_START = later.compile(r"^(\d*)([#+=.)-])")
"""A line starting like a heading, quote, list or setext underline."""
_BACKTICKS = later.compile(r"`+")


_LIVE = later.compile(r"@|[#!]\w|(?i:gh-\d|[a-z]:[^\s\d]|www\.)")
"""What makes a word live somewhere on a tracker: any `@` (GitHub's mentions start after any punctuation, and
e-mail addresses autolink), `#` or `!` before a name or number (#123, owner/repo#1, GitLab's !123), GH-123, a
scheme in any case (HTTPS://, mailto:, xmpp:, javascript:, file:) and www. Deliberately wider than any tracker's
rules: a word that holds one of these is shown whole, inside code, where no tracker links or pings; a pattern of
fixed-length alternatives, linear on any line."""


def inert_words(value: object) -> list[tuple[str, bool]]:
    """The one rule for input-derived text in Markdown and in the raw HTML of a comment: `value` on one line, cut
    into runs of words, each with whether it must be shown as code (a word that could be live, see _LIVE). Words
    are cut at whitespace, which ends every mention, reference and autolink, so a run of plain words, escaped,
    cannot become one."""
    runs: list[tuple[str, bool]] = []
    for word in " ".join(view.safe(str(value)).split()).split(" "):
        live = bool(word and _LIVE.search(word))
        if runs and runs[-1][1] == live:
            runs[-1] = (f"{runs[-1][0]} {word}", live)
        else:
            runs.append((word, live))
    return runs


def text(value: object) -> str:
    """Inline Markdown text that renders as exactly `value`: one line, HTML and Markdown escaped, every word that
    could link, ping or reference (inert_words) inside a code span."""
    out = " ".join(code(run) if live else _escaped(run) for run, live in inert_words(value))
    return _BLOCK_START.sub(r"\1\\\2", out)


def _escaped(flat: str) -> str:
    return _PUNCTUATION.sub(r"\\\1", html.escape(flat, quote=False))


def plain_html(value: object) -> str:
    """Text for raw-HTML spots (<summary>), where Markdown is not read but a tracker still pings and links: escaped,
    one line, the words inert_words marks inside <code>."""
    return " ".join(f"<code>{html.escape(run)}</code>" if live else html.escape(run)
                    for run, live in inert_words(value))


def code(value: object) -> str:
    """An inline code span around `value`, its delimiter longer than any backtick run inside."""
    flat = " ".join(view.safe(str(value)).split()).replace("|", "\\|")
    ticks = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(flat)), default=0))
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def fence(body: str, info: str = "text") -> str:
    """A fenced block whose fence is longer than any backtick run in `body` (at least three)."""
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{info}\n{body}\n{marks}"


def render(report: Report, lang: str = "en", color: bool = False) -> str:
    """The whole report as Markdown (`color` is for terminals and ignored here)."""
    t = Translator(lang)
    out: list[str] = []
    verdict = report.verdict
    if verdict is None:
        known = view.nothing_known(report, t)
        out += [f"### {text(t('verdict_unknown'))}", "", text(known.said)]
        if known.formats:
            out += ["", f"**{text(t('formats_heading'))}**", "",
                    *(f"- {text(reads)}: {text(get)}" for reads, get in known.formats)]
    else:
        out += _verdict(report, verdict, t)
    out += _suspects(report, t)
    out += _other_findings(report, t)
    for core in report.cores:
        out += _core(core, t)
    out += _facts(report, t)
    out += _inputs(report, t)
    tool = report.tool
    line = t("tool_line", version=tool.get("version", "?"), signatures=tool.get("signatures", "?"))
    out += ["", f"<sub>{plain_html(line)}</sub>"]
    return "\n".join(out) + "\n"


def _verdict(report: Report, finding: Finding, t: Translator) -> list[str]:
    words = t.words(finding, report)
    out = [
        f"### {text(t('verdict'))}: `{finding.cause}`: {text(words.title)}",
        "",
        f"**{text(t('signature'))}** `{finding.signature}` · **{text(t('severity'))}** "
        f"{text(t('severity_' + finding.severity))} · **{text(t('confidence'))}** {finding.confidence:.2f} "
        f"({text(words.reason)})",
    ]
    counted = view.tally_words(view.tallies(report, finding), t)
    out += ["", text(counted)] if counted else []
    out += _gpus(report, t)
    out += ["", text(words.explanation)]
    if words.actions:
        out += ["", f"**{text(t('what_to_do'))}**", ""]
        out += [f"{i}. {text(action)}" for i, action in enumerate(words.actions, 1)]
    events = view.evidence_of(report, finding)
    if events:
        out += ["", f"**{text(t('evidence'))}**", ""]
        out += [block for event in events[:EVIDENCE_OPEN] for block in evidence_block(event, t)]
        if len(events) > EVIDENCE_OPEN:
            out += _folded(t("more_events", count=len(events) - EVIDENCE_OPEN),
                           [block for event in events[EVIDENCE_OPEN:] for block in evidence_block(event, t)])
    return out


def _gpus(report: Report, t: Translator) -> list[str]:
    """Under the verdict, one line per sick GPU with its worst finding, when several are sick (view.gpu_summary)."""
    summary = view.gpu_summary(report)
    if not summary:
        return []
    out = ["", f"**{text(t('gpus_sick', count=len(summary)))}**", ""]
    for line in summary:
        finding = line.finding
        counted = view.tally_words(line.tallies, t)
        more = f" ({text(t('more_findings', count=line.others))})" if line.others else ""
        out.append(f"- {code(line.gpu)} `{finding.cause}` [{code(finding.signature)}] "
                   f"{text(t('severity_' + finding.severity))}: {text(t.words(finding, report).title)}"
                   + (f"; {text(counted)}" if counted else "") + more)
    return out


def evidence_block(event: Event, t: Translator) -> list[str]:
    """One event: its place, then its lines (repeats folded with a count) in a fence."""
    lines = view.evidence_lines(event, EVIDENCE_LINES)
    width = max((len(str(line.number)) for line in lines if line.number is not None), default=0)
    body = "\n".join(
        (f"{line.number:>{width}} {':' if line.context else '|'} " if line.number is not None else "")
        + line.text
        + (f"   [{t('repeated_line', count=line.repeats)}]" if line.repeats > 1 else "")
        for line in lines
    )
    repeat = f" ({text(t('reported_times', count=event.count))})" if event.count > 1 else ""
    return [f"{code(view.where(event, t))} {code(event.kind)}{repeat}", "", fence(body), ""]


def _folded(summary: str, body: list[str]) -> list[str]:
    """A <details> block; blank lines around the body so the tracker reads it as Markdown."""
    return ["", f"<details><summary>{plain_html(summary)}</summary>", "", *body, "", "</details>"]


def _suspects(report: Report, t: Translator) -> list[str]:
    """The unexplained lines most likely to be the root, when no finding names it."""
    events = [e for e in (report.event(i) for i in report.suspects) if e is not None]
    if not events:
        return []
    return ["", f"**{text(t('suspects'))}**", ""] + [block for event in events for block in evidence_block(event, t)]


def _other_findings(report: Report, t: Translator) -> list[str]:
    others = report.others
    if not others:
        return []
    rows = [
        f"| {text(t('cause'))} | {text(t('signature'))} | {text(t('severity'))} | {text(t('confidence'))} | |",
        "|---|---|---|---|---|",
    ]
    body: list[str] = []
    for finding in others:
        words = t.words(finding, report)
        note = text(view.link_note(finding, t))
        counted = view.tally_words(view.tallies(report, finding), t)
        rows.append(f"| `{finding.cause}` {text(words.title)}{' (' + text(counted) + ')' if counted else ''} | "
                    f"`{finding.signature}` | {text(t('severity_' + finding.severity))} | {finding.confidence:.2f} | "
                    f"{note} |")
        body += [f"**{text(words.title)}** (`{finding.signature}`): {text(words.explanation)}", ""]
        shown = view.evidence_of(report, finding)[:EVIDENCE_OPEN]
        body += [block for event in shown for block in evidence_block(event, t)]
    return ["", f"**{text(t('other_findings'))}**", "", *rows] + _folded(t("evidence"), body)


def _core(core, t: Translator) -> list[str]:
    body: list[str] = [f"- {text(t('process'))}: {core.pid} {code(core.executable or '?')}"]
    if core.command_line:
        body.append(f"- {text(t('command_line'))}: {code(core.command_line)}")
    if core.signal is not None:
        sig = core.signal
        body.append(f"- {text(t('signal'))}: `{sig.name}` ({text(sig.code_meaning)})"
                    + (f", {text(t('fault_address'))} `{sig.address}`" if sig.address else ""))
    if core.original_fault is not None:
        fault = core.original_fault
        body.append(f"- {text(t('original_fault'))}: `{fault.signal.name}` ({text(fault.signal.code_meaning)})"
                    + (f" `{fault.signal.address}`" if fault.signal.address else "")
                    + f": {text(t('reraised_by', handler=fault.handler))}")
    crashed = [thread for thread in core.threads if thread.crashed]
    others = [thread for thread in core.threads if not thread.crashed]
    for thread in crashed:
        body += _thread(thread, t, t("crashing_thread", tid=view.thread_label(thread)))
    for thread in others[:OTHER_THREADS]:
        title = t("thread", tid=view.thread_label(thread))
        body += _folded(title, _thread(thread, t, title))
    if len(others) > OTHER_THREADS:
        body += ["", text(t("more_threads", count=len(others) - OTHER_THREADS))]
    for heading, modules in view.module_groups(core.modules):
        body += ["", f"{text(t(heading))}:", ""]
        body += [f"- {code(m.path)} {text(m.kind)} {text(m.version or '')} {code(m.build_id or '')}"
                 for m in modules]
    return _folded(t("core_file", path=core.path), body)


def _thread(thread, t: Translator, title: str) -> list[str]:
    """A thread's stack in a fence, runs of recursion folded (THREAD_FRAMES lines, Python frames under
    their eval-loop frames aside), then why it stops short and from which frame on it is a guess."""
    runs, rest = view.shown_runs(thread.frames, THREAD_FRAMES)
    lines: list[str] = []
    for run in runs:
        if run.repeats > 1:
            lines.append(view.run_words(run, t))
            continue
        lines.append(f"#{run.first:<2} {frame_line(run.cycle[0], t)}")
        lines += [f"      py {_python_frame(f)}" for f in run.cycle[0].python_frames[:THREAD_FRAMES]]
    if rest:
        lines.append(t("more_frames", count=f"{rest:,}"))
    if note := view.merge_note(thread):
        lines += ["", f"[{view.safe(note)}]"]
    if thread.python_frames and sum(len(frame.python_frames) for frame in thread.frames) < len(
            thread.python_frames):  # some Python frames sit on no eval-loop frame: list them all
        lines += ["", f"{t('python_stack')}:"]
        lines += [f"  {_python_frame(f)}" for f in thread.python_frames[:THREAD_FRAMES]]
        if len(thread.python_frames) > THREAD_FRAMES:
            lines.append(t("more_frames", count=f"{len(thread.python_frames) - THREAD_FRAMES:,}"))
    notes = [f"- {text(note)}" for note in view.stack_notes(thread, t)]
    return ["", f"{text(title)}:", "", fence("\n".join(lines))] + (["", *notes] if notes else [])


def _python_frame(frame) -> str:
    return f"{view.safe(frame.file)}:{frame.line} in {view.safe(frame.function)}"


def _facts(report: Report, t: Translator) -> list[str]:
    if not report.facts:
        return []
    rows = [f"| {text(t('fact'))} | {text(t('value'))} |", "|---|---|"]
    for name, values in report.facts.items():
        shown = "; ".join(view.fact_value(v) for v in (values if isinstance(values, (list, tuple)) else [values]))
        rows.append(f"| {text(name)} | {text(shown)} |")
    return _folded(t("environment"), rows)


def _inputs(report: Report, t: Translator) -> list[str]:
    rows = [f"| {text(t('path'))} | {text(t('format'))} | {text(t('size'))} | {text(t('diagnostics'))} |",
            "|---|---|---|---|"]
    for info in report.inputs:
        notes = "; ".join(t.sentence(d) for d in info.diagnostics)
        rows.append(f"| {text(info.path)} | {text(info.format)} | {info.size} | {text(notes)} |")
    return _folded(t("inputs", count=len(report.inputs)), rows)
