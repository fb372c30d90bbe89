"""Triage of a bug report: an issue's own blocks and attachments through the one pipeline, then what a
maintainer needs besides the verdict -- the evidence still missing, labels, and earlier issues that look the same.

issue (Markdown / GitHub JSON) -> posts -> pieces (issue.py) -> `pipeline.analyze_blobs` with the attachments
-> Report -> requests (evidence.py), labels (labels.py), duplicates (duplicates.py) -> one comment
(render/triage_comment.py). Nothing in the issue is executed, fetched or followed.

The package itself imports nothing: `postmortem analyze` loads the `triage` command's options with the other
commands, and must not pay for the pipeline of triage it never runs (issue 28). `Triage`, `triage` and
`issue_report` come from verdict.py when first asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .verdict import Triage, issue_report, triage

__all__ = ["Triage", "issue_report", "triage"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import verdict

        return getattr(verdict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
