"""One issue's verdict: its own blocks and attachments through the one pipeline, then the evidence still missing,
labels and earlier issues that look the same (the package's docstring tells the whole flow)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from ..inputs import Blob, open_inputs
from ..model import Report
from ..pipeline import analyze_blobs
from ..reader import BytesReader
from ..signatures import Database
from .duplicates import Duplicate, find_and_store
from .evidence import Request, requests_for
from .issue import Issue, Piece, pieces, read_issue
from .labels import LabelMap, labels_for


@dataclass(frozen=True)
class Triage:
    """The answer to one issue: the analysis of what it holds, and what a maintainer does with it."""

    issue: Issue
    pieces: tuple[Piece, ...]
    report: Report
    requests: tuple[Request, ...]
    labels: tuple[str, ...]
    duplicates: tuple[Duplicate, ...] = ()


def triage(issue: Issue, attachments: Sequence[str | Path] = (), label_map: LabelMap | None = None,
           store: str | Path | None = None) -> Triage:
    """Analyse the issue's pieces and its attachments as one case; with a `store`, find the earlier issues like
    it there, then keep this one for the next."""
    cut = tuple(pieces(issue))
    # one stream: open_inputs holds each attachment open only while the pipeline reads it
    report = analyze_blobs(chain(_blobs(issue, cut), open_inputs([str(path) for path in attachments])))
    asked = tuple(requests_for(report, frozenset({"issue:images"}) if issue.shows_images else frozenset()))
    found: tuple[Duplicate, ...] = ()
    if store is not None:
        found = find_and_store(str(store), issue, report, "\0".join(piece.text for piece in cut))
    return Triage(issue, cut, report, asked, labels_for(report, asked, label_map, bool(found)), found)


def issue_report(path: str | Path, database: Database | None = None) -> Report:
    """The analysis of the issue in the file at `path` alone (signature examples: the reporter's words are
    evidence only in an issue)."""
    issue = read_issue(Path(path).read_bytes(), Path(path).name)
    return analyze_blobs(_blobs(issue, pieces(issue)), database)


def _blobs(issue: Issue, cut: Iterable[Piece]) -> Iterable[Blob]:
    """Each piece as an input: blocks and log runs are text like any log; the rest is what a person wrote."""
    for piece in cut:
        yield Blob(f"{issue.ref}: {piece.name}", BytesReader(piece.text.encode("utf-8", "replace")),
                   kind="prose" if piece.kind == "text" else "text")
