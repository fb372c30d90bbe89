"""Item 6: `postmortem triage` on issues whose posts are built to make its own patterns slow.

GitHub caps a post at 65,536 characters, so each issue here is five posts (the body and four comments) of one
65,000-character line, or of 16,000 table rows, made of the literals of the patterns that cut a post into pieces
(triage/issue.py: `<pre`, the tags it unwraps, table rules and rows). Every line is cut to text.MAX_LINE before any
pattern runs, and a table's rows are found in one pass: before that these took 4 s to over 400 s, now about 1 s
each (wall_s: 3x that). The real error in the body must still be the verdict.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from .harness import Hostile, Run

POST_CHARS = 65_000
"""A post as long as GitHub lets one be (65,536), in round figures."""
CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
LINES = {
    "pre-tags": "<pre" * (POST_CHARS // 4),
    "details-tags": "<details " * (POST_CHARS // 9),
    "table-rule": "| a | b |\n|---" + " " * POST_CHARS + "x",
    "table-row-pipes": ("| " * (POST_CHARS // 2)) + "x",
    "table-of-rows-without-a-rule": "|x|\n" * (POST_CHARS // 4),
}


def _issue_of(post: str, directory: Path) -> Run:
    posts = [f"```\n{CUDA_ERROR}\n```\n{post}", *([post] * 4)]
    issue = {"number": 1, "title": "CUDA error", "html_url": "https://github.com/o/r/issues/1", "body": posts[0],
             "comments": [{"body": body, "user": {"login": "reporter"}} for body in posts[1:]]}
    (directory / "issue.json").write_text(json.dumps(issue))
    return Run(["triage", "issue.json", "--format", "json"], evidence=('"cause": "illegal-memory-access"',))


CASES = [Hostile(6, f"triage-five-posts-of-{name}", partial(_issue_of, line), wall_s=4, address_space=512 << 20)
         for name, line in LINES.items()]
