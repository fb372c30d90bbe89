"""`postmortem triage`: answer a bug report with a verdict comment, labels, duplicates and what is missing."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path

import click

from ..deadline import Overtime, available, time_limit
from ..render import LANGUAGES, default_language
from ..render.terminal import reply

TRIAGE_FORMATS = ("markdown", "json")
TIMEOUT_S = 300.0
"""Default budget for one issue: its pieces are bounded in size, attachments (a core, a bundle) are not."""


class TriageRefused(click.ClickException):
    """An input that is not an issue, or a label map that is not one: one sentence, exit 2."""

    exit_code = 2


@click.command("triage")
@click.argument("issue", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--attachments", "attachments", multiple=True, type=click.Path(exists=True),
              help="A file, folder or archive the issue came with (downloaded attachments, a collect bundle); "
                   "repeatable.")
@click.option("--store", type=click.Path(dir_okay=False), default=None,
              help="SQLite store of triaged issues (the `scan` store): earlier issues like this one are named, "
                   "then this one is kept.")
@click.option("--labels", "label_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Label map (YAML: cause, causes, layers, severities, needs_info, duplicate, unknown); "
                   "default: the bundled one.")
@click.option("--format", "fmt", type=click.Choice(TRIAGE_FORMATS), default="markdown", show_default=True)
@click.option("--lang", type=click.Choice(LANGUAGES), default=None,
              help="Language of the comment's own words (quotes stay verbatim); default from LC_ALL / LANG.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write the answer here instead of standard output.")
@click.option("--timeout", "seconds", type=click.FloatRange(min=1), default=TIMEOUT_S, show_default=True,
              help="Seconds the analysis may take; past them the issue is refused with a note (exit 2).")
def triage_command(issue: str, attachments: tuple[str, ...], store: str | None, label_file: str | None, fmt: str,
                   lang: str | None, output: str, seconds: float) -> None:
    """Triage a bug report: ISSUE is a Markdown file or GitHub's JSON of an issue (REST object, with comments,
    or a webhook payload); - reads it from stdin.

    Every fenced block and log-looking run of the issue is read like any input; nothing in it is run, fetched
    or followed. The answer is one comment: the verdict with evidence quoted from the issue, what to do, what
    to attach when the evidence cannot decide, and earlier issues that look the same (with --store).
    """
    from ..cli import checked_output, output_step
    from ..outputs import write_text_output
    from ..render.triage_comment import render_json, render_markdown
    from . import triage
    from .issue import MAX_ISSUE_BYTES, IssueError, read_issue
    from .labels import LabelMapError, load_label_map

    target = None if output == "-" else checked_output(output, [issue, *attachments, *filter(None, [store])])
    try:
        label_map = load_label_map(label_file) if label_file else None
        data = _read_bounded(issue, MAX_ISSUE_BYTES + 1)
        read = read_issue(data, "<stdin>" if issue == "-" else Path(issue).name)
    except (IssueError, LabelMapError, OSError) as exc:
        raise TriageRefused(str(exc)) from None
    try:
        with time_limit(seconds) if available() else nullcontext():
            result = triage(read, attachments, label_map, store)
    except Overtime:
        raise TriageRefused(f"{read.ref}: the analysis ran past {seconds:.0f} s and was stopped (--timeout)") from None
    text = render_json(result) if fmt == "json" else render_markdown(result, lang or default_language())
    if target is None:
        reply(text, data=True, nl=False)
    else:
        output_step(lambda: write_text_output(target, text))


def _read_bounded(path: str, limit: int) -> bytes:
    """At most `limit` bytes of the issue (a longer one is read_issue's to cut, with a note)."""
    if path == "-":
        return sys.stdin.buffer.read(limit)
    with open(path, "rb") as handle:
        return handle.read(limit)
