"""The GitHub Action's step (action.yml): triage the issue of the event that ran it, and answer on the issue.

On `issues` (opened, edited, reopened) and `issue_comment` (created, edited) events it reads the issue and the
comments its reporter added (where logs arrive later), runs `triage`, then, through GitHub's REST API:

- adds the labels the label map gives, and removes the ones it gave before that no longer apply: only ever its
  own, which its comment remembers (render.triage_comment.LabelState), so a label a person added stays and one a
  person took off is not put back;
- creates ONE comment, or updates the one it wrote before (found by render.triage_comment.MARKER), so edits
  and new comments never stack answers.

Reading the thread and the analysis have a budget (--timeout): past it nothing is posted and the step fails in one
line. An answer that is not the API's (a proxy's login page, JSON of another shape) fails it in one line too.

Pull requests, comments written by bots and its own comments are left alone. `--dry-run` prints what it would
send and changes nothing (it still reads the thread). The API's address is GITHUB_API_URL (the runner sets it;
tests point it at a fake server on 127.0.0.1); nothing an issue links to is ever fetched.

    python -m postmortem.triage.github --event "$GITHUB_EVENT_PATH" [--dry-run] [--labels FILE] [--store FILE]
                                      [--timeout SECONDS]
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
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..deadline import Overtime, available, time_limit
from ..render.terminal import terminal_text
from ..render.triage_comment import MARKER, LabelState, label_state, render_markdown
from .commands import TIMEOUT_S as ANALYSIS_TIMEOUT_S
from .issue import issue_from_json
from .labels import LabelMap, LabelMapError, load_label_map

EVENTS = {"issues": ("opened", "edited", "reopened"), "issue_comment": ("created", "edited")}
"""The events and actions the step answers; any other is skipped with a note."""
MAX_COMMENT_PAGES = 10
"""Pages of 100 comments read from one issue (a thread of a thousand comments is read in part)."""
TIMEOUT_S = 30
"""Seconds one API request may take."""
MAX_ANSWER_BYTES = 32 << 20
"""Most bytes of one API answer read (a page of 100 comments of 65,536 characters, JSON-escaped, fits)."""
DEFAULT_API = "https://api.github.com"
_SHAPES: dict[type, str] = {list: "list", dict: "object"}


class StepError(Exception):
    """Why the step failed, in one line."""


class GitHubError(StepError):
    """An API call that failed, or answered what the API never sends (the message names the call and why)."""


@dataclass
class Api:
    """GitHub's REST API at `base`, or, on a dry run, a recorder of what would be sent."""

    base: str
    token: str | None
    dry_run: bool = False
    sent: list[tuple[str, str, Any]] = field(default_factory=list)

    def call(self, method: str, path: str, body: Any = None, expect: type | None = None) -> Any:
        """The JSON answer of one request; `expect` (list, dict) is its shape, anything else a GitHubError."""
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
                data = response.read(MAX_ANSWER_BYTES + 1)
                status, kind = response.status, response.headers.get("Content-Type") or "no content type"
        except urllib.error.HTTPError as exc:
            raise GitHubError(f"{method} {path}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise GitHubError(f"{method} {path}: {exc}") from None
        self.sent.append((method, path, body))
        return _parsed(f"{method} {path}", status, kind, data, expect)


def _parsed(call: str, status: int, kind: str, data: bytes, expect: type | None) -> Any:
    """The API's answer as JSON of the shape `expect`s; a page a proxy or a captive portal answers with (200 and
    HTML), or JSON of another shape, is a GitHubError saying so."""
    if len(data) > MAX_ANSWER_BYTES:
        raise GitHubError(f"{call}: the answer is longer than {MAX_ANSWER_BYTES:,} bytes")
    if not data.strip() and expect is None:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        head = " ".join(data[:60].decode("utf-8", "replace").split())  # repr shows its controls escaped
        raise GitHubError(f"{call}: the answer is not JSON ({status}, {kind}: {head!r})") from None
    if expect is not None and not isinstance(value, expect):
        shape = _SHAPES.get(type(value), type(value).__name__)
        raise GitHubError(f"{call}: the answer is a JSON {shape}, not the {_SHAPES[expect]} GitHub sends")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m postmortem.triage.github", description=__doc__.split("\n")[0])
    parser.add_argument("--event", default=os.environ.get("GITHUB_EVENT_PATH"), help="the event payload file")
    parser.add_argument("--event-name", default=os.environ.get("GITHUB_EVENT_NAME"),
                        help="issues or issue_comment (default: GITHUB_EVENT_NAME, else read from the payload)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be sent; send nothing")
    parser.add_argument("--labels", default=None, help="label map (YAML); default: the bundled one")
    parser.add_argument("--store", default=None, help="SQLite store of triaged issues, for duplicates")
    parser.add_argument("--lang", default="en", help="language of the comment (en, zh-CN)")
    parser.add_argument("--timeout", type=float, default=ANALYSIS_TIMEOUT_S,
                        help="seconds reading the thread and the analysis may take; past them nothing is posted")
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        parser.error("--timeout is a number of seconds above 0")
    if not args.event:
        print("postmortem triage action: no event payload (--event or GITHUB_EVENT_PATH)", file=sys.stderr)
        return 2
    try:
        event = json.loads(Path(args.event).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        print(f"postmortem triage action: cannot read the event payload: {exc}", file=sys.stderr)
        return 2
    if not isinstance(event, dict):
        print("postmortem triage action: the event payload is not a JSON object", file=sys.stderr)
        return 2
    try:
        label_map = load_label_map(args.labels)
    except (LabelMapError, OSError) as exc:
        print(f"postmortem triage action: {exc}", file=sys.stderr)
        return 2
    api = Api(os.environ.get("GITHUB_API_URL") or DEFAULT_API, os.environ.get("GITHUB_TOKEN"), args.dry_run)
    try:
        said = answer(event, args.event_name or _event_name(event), api, label_map, args.store, args.lang,
                      args.timeout)
    except StepError as exc:  # its message may quote the API's answer (an HTTP reason, a page's first bytes)
        print(f"postmortem triage action: {terminal_text(str(exc))}", file=sys.stderr)
        return 1
    print(terminal_text(said))
    for method, path, body in api.sent if args.dry_run else ():
        print(f"would send: {method} {path}")
        if body is not None:
            print(json.dumps(body, indent=2, ensure_ascii=False))
    return 0


def _event_name(event: dict) -> str:
    return "issue_comment" if isinstance(event.get("comment"), dict) else "issues"


def answer(event: dict, name: str, api: Api, label_map: LabelMap | None = None, store: str | None = None,
           lang: str = "en", seconds: float = ANALYSIS_TIMEOUT_S) -> str:
    """Triage the event's issue and comment or label through `api`; returns one line saying what it did."""
    from . import triage  # read at the call: the package's function, which a test may replace
    issue = event.get("issue")
    repository = _object(event, "repository").get("full_name")
    if name not in EVENTS or event.get("action") not in EVENTS[name]:
        return f"skipped: {name} {event.get('action')} is not an event this step answers"
    if not isinstance(issue, dict) or not isinstance(repository, str) or not isinstance(issue.get("number"), int):
        return "skipped: the payload names no issue and repository"
    if issue.get("pull_request"):
        return "skipped: a pull request"
    comment = event.get("comment") if name == "issue_comment" else None
    if isinstance(comment, dict) and (_is_bot(comment) or MARKER in str(comment.get("body") or "")):
        return "skipped: a comment by a bot, or this step's own"
    number = issue["number"]
    base = f"/repos/{urllib.parse.quote(repository)}/issues"
    try:
        with time_limit(seconds) if available() else nullcontext():
            comments, present = _thread(api, f"{base}/{number}", issue)
            ours = next((c for c in comments if _is_ours(c)), None)
            reporter = _object(issue, "user").get("login")
            theirs = [c for c in comments if reporter and _object(c, "user").get("login") == reporter and c is not ours]
            document = {"issue": issue, "repository": {"full_name": repository}, "comments": theirs}
            result = triage(issue_from_json(document, f"{repository}#{number}"), (), label_map, store)
    except Overtime:
        raise StepError(f"{repository}#{number}: the analysis ran past {seconds:.0f} s and was stopped (--timeout); "
                        "nothing was posted") from None
    before = (label_state(ours["body"]) if ours else None) or LabelState()
    add, remove, after = plan_labels(result.labels, present, before)
    for label in remove:
        api.call("DELETE", f"{base}/{number}/labels/{urllib.parse.quote(label, safe='')}")
    if add:
        api.call("POST", f"{base}/{number}/labels", {"labels": add}, expect=list)
    body = render_markdown(result, lang, after)
    if ours is not None:
        api.call("PATCH", f"{base}/comments/{ours['id']}", {"body": body}, expect=dict)
    else:
        api.call("POST", f"{base}/{number}/comments", {"body": body}, expect=dict)
    verdict = result.report.verdict
    return (f"{repository}#{number}: {verdict.cause if verdict else 'unknown'}; "
            f"{'updated' if ours else 'created'} the comment; labels {', '.join(result.labels) or 'none'}")


def plan_labels(wanted: Sequence[str], present: frozenset[str],
                before: LabelState) -> tuple[list[str], list[str], LabelState]:
    """(labels to add, labels to take off, the state the comment keeps): only labels the bot applied are ever
    taken off; one of them no longer on the issue was taken off by a person and is never added again; a wanted
    label already there (a person's) is left to its owner."""
    declined = before.declined | (before.applied - present)
    remove = sorted((before.applied & present) - set(wanted))
    add = [label for label in wanted if label not in present and label not in declined]
    kept = (before.applied & present) - set(remove)
    return add, remove, LabelState(kept | set(add), declined)


def _thread(api: Api, path: str, issue: dict) -> tuple[list[dict], frozenset[str]]:
    """The issue's comments and its labels as they are now (the payload's may be older than another run's
    labels); on a dry run without the API, no comments and the payload's labels."""
    try:
        comments = _comments(api, f"{path}/comments")
        labels = api.call("GET", f"{path}/labels?per_page=100", expect=list)
    except GitHubError as exc:
        if not api.dry_run:
            raise
        print(terminal_text(f"dry run: the thread could not be read ({exc}); answering from the event alone"),
              file=sys.stderr)
        comments, labels = [], issue.get("labels")
    names = (label.get("name") for label in labels if isinstance(label, dict)) if isinstance(labels, list) else ()
    return comments, frozenset(name for name in names if isinstance(name, str))


def _comments(api: Api, path: str) -> list[dict]:
    found: list[dict] = []
    for page in range(1, MAX_COMMENT_PAGES + 1):
        batch = api.call("GET", f"{path}?per_page=100&page={page}", expect=list)
        found += [c for c in batch if isinstance(c, dict)]
        if len(batch) < 100:
            break
    return found


def _object(thing: dict, key: str) -> dict:
    """`thing[key]` where it is an object, else an empty one: a payload or an answer of another shape reads as
    naming nothing."""
    value = thing.get(key)
    return value if isinstance(value, dict) else {}


def _is_ours(comment: dict) -> bool:
    """The comment this step wrote before: a bot's, opening with the marker, with an id to update it by."""
    body = comment.get("body")
    return (isinstance(body, str) and body.startswith(MARKER) and _is_bot(comment)
            and isinstance(comment.get("id"), int))


def _is_bot(comment: dict) -> bool:
    user = _object(comment, "user")
    login = user.get("login")
    return user.get("type") == "Bot" or (isinstance(login, str) and login.endswith("[bot]"))


if __name__ == "__main__":
    sys.exit(main())
