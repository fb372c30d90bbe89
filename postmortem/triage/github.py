"""The GitHub Action's step (action.yml): triage the issue of the event that ran it, and answer on the issue.

On `issues` (opened, edited, reopened) and `issue_comment` (created, edited) events it reads the issue and the
comments its reporter added (where logs arrive later), runs `triage`, then, through GitHub's REST API:

- creates ONE comment, or updates the one it wrote before (found by render.triage_comment.MARKER), so edits
  and new comments never stack answers;
- adds the labels the label map gives, and removes the ones it gave before that no longer apply.

Pull requests, comments written by bots and its own comments are left alone. `--dry-run` prints what it would
send and changes nothing (it still reads the thread). The API's address is GITHUB_API_URL (the runner sets it;
tests point it at a fake server on 127.0.0.1); nothing an issue links to is ever fetched.

    python -m postmortem.triage.github --event "$GITHUB_EVENT_PATH" [--dry-run] [--labels FILE] [--store FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..render.triage_comment import MARKER

EVENTS = {"issues": ("opened", "edited", "reopened"), "issue_comment": ("created", "edited")}
"""The events and actions the step answers; any other is skipped with a note."""
MAX_COMMENT_PAGES = 10
"""Pages of 100 comments read from one issue (a thread of a thousand comments is read in part)."""
TIMEOUT_S = 30
"""Seconds one API request may take."""
DEFAULT_API = "https://api.github.com"


class GitHubError(Exception):
    """An API call that failed (the message names the call and the status)."""


@dataclass
class Api:
    """GitHub's REST API at `base`, or, on a dry run, a recorder of what would be sent."""

    base: str
    token: str | None
    dry_run: bool = False
    sent: list[tuple[str, str, Any]] = field(default_factory=list)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        if self.dry_run and method != "GET":
            self.sent.append((method, path, body))
            return None
        request = urllib.request.Request(self.base.rstrip("/") + path, method=method,
                                         data=None if body is None else json.dumps(body).encode())
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", "postmortem-triage")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                data = response.read()
        except urllib.error.HTTPError as exc:
            raise GitHubError(f"{method} {path}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise GitHubError(f"{method} {path}: {exc}") from None
        self.sent.append((method, path, body))
        return json.loads(data) if data.strip() else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m postmortem.triage.github", description=__doc__.split("\n")[0])
    parser.add_argument("--event", default=os.environ.get("GITHUB_EVENT_PATH"), help="the event payload file")
    parser.add_argument("--event-name", default=os.environ.get("GITHUB_EVENT_NAME"),
                        help="issues or issue_comment (default: GITHUB_EVENT_NAME, else read from the payload)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be sent; send nothing")
    parser.add_argument("--labels", default=None, help="label map (YAML); default: the bundled one")
    parser.add_argument("--store", default=None, help="SQLite store of triaged issues, for duplicates")
    parser.add_argument("--lang", default="en", help="language of the comment (en, zh-CN)")
    args = parser.parse_args(argv)
    if not args.event:
        print("postmortem triage action: no event payload (--event or GITHUB_EVENT_PATH)", file=sys.stderr)
        return 2
    try:
        event = json.loads(Path(args.event).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"postmortem triage action: cannot read the event payload: {exc}", file=sys.stderr)
        return 2
    api = Api(os.environ.get("GITHUB_API_URL") or DEFAULT_API, os.environ.get("GITHUB_TOKEN"), args.dry_run)
    try:
        said = answer(event, args.event_name or _event_name(event), api, args.labels, args.store, args.lang)
    except GitHubError as exc:
        print(f"postmortem triage action: {exc}", file=sys.stderr)
        return 1
    print(said)
    for method, path, body in api.sent if args.dry_run else ():
        print(f"would send: {method} {path}")
        if body is not None:
            print(json.dumps(body, indent=2, ensure_ascii=False))
    return 0


def _event_name(event: dict) -> str:
    return "issue_comment" if isinstance(event.get("comment"), dict) else "issues"


def answer(event: dict, name: str, api: Api, labels: str | None = None, store: str | None = None,
           lang: str = "en") -> str:
    """Triage the event's issue and comment or label through `api`; returns one line saying what it did."""
    from ..render.triage_comment import render_markdown
    from . import triage
    from .issue import issue_from_json
    from .labels import load_label_map, possible_labels

    issue = event.get("issue")
    repository = (event.get("repository") or {}).get("full_name")
    if name not in EVENTS or event.get("action") not in EVENTS[name]:
        return f"skipped: {name} {event.get('action')} is not an event this step answers"
    if not isinstance(issue, dict) or not repository or not isinstance(issue.get("number"), int):
        return "skipped: the payload names no issue and repository"
    if issue.get("pull_request"):
        return "skipped: a pull request"
    comment = event.get("comment") if name == "issue_comment" else None
    if isinstance(comment, dict) and (_is_bot(comment) or MARKER in str(comment.get("body") or "")):
        return "skipped: a comment by a bot, or this step's own"
    number = issue["number"]
    base = f"/repos/{urllib.parse.quote(repository)}/issues"
    try:
        comments = _comments(api, f"{base}/{number}/comments")
    except GitHubError as exc:
        if not api.dry_run:
            raise
        print(f"dry run: the thread could not be read ({exc}); answering from the event alone", file=sys.stderr)
        comments = []
    ours = next((c for c in comments if str(c.get("body") or "").startswith(MARKER) and _is_bot(c)), None)
    reporter = (issue.get("user") or {}).get("login")
    theirs = [c for c in comments if (c.get("user") or {}).get("login") == reporter and c is not ours]
    document = {"issue": issue, "repository": {"full_name": repository}, "comments": theirs}
    label_map = load_label_map(labels)
    result = triage(issue_from_json(document, f"{repository}#{number}"), (), label_map, store)
    body = render_markdown(result, lang)
    if ours is not None:
        api.call("PATCH", f"{base}/comments/{ours['id']}", {"body": body})
    else:
        api.call("POST", f"{base}/{number}/comments", {"body": body})
    present = {str(label.get("name")) for label in issue.get("labels") or () if isinstance(label, dict)}
    stale = sorted((present & possible_labels(label_map)) - set(result.labels))
    for label in stale:
        api.call("DELETE", f"{base}/{number}/labels/{urllib.parse.quote(label, safe='')}")
    if missing := [label for label in result.labels if label not in present]:
        api.call("POST", f"{base}/{number}/labels", {"labels": missing})
    verdict = result.report.verdict
    return (f"{repository}#{number}: {verdict.cause if verdict else 'unknown'}; "
            f"{'updated' if ours else 'created'} the comment; labels {', '.join(result.labels) or 'none'}")


def _comments(api: Api, path: str) -> list[dict]:
    found: list[dict] = []
    for page in range(1, MAX_COMMENT_PAGES + 1):
        batch = api.call("GET", f"{path}?per_page=100&page={page}")
        if not isinstance(batch, list):
            break
        found += [c for c in batch if isinstance(c, dict)]
        if len(batch) < 100:
            break
    return found


def _is_bot(comment: dict) -> bool:
    user = comment.get("user") or {}
    return user.get("type") == "Bot" or str(user.get("login") or "").endswith("[bot]")


if __name__ == "__main__":
    sys.exit(main())
