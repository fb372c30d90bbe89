"""The GitHub Action (action.yml), run offline: its own `run:` script, in bash, on recorded event payloads
(tests/data/github_events, real issue bodies), with the REST API on a fake server on 127.0.0.1 that records every
request. What is asserted is what a maintainer sees: one comment created, or the earlier one updated, the labels,
and nothing sent on a dry run, a pull request, or a bot's comment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from postmortem.render.triage_comment import MARKER, LabelState, render_markdown
from postmortem.triage import triage
from postmortem.triage.issue import read_issue

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "tests" / "data" / "github_events"
TOKEN = "test-token-not-a-secret"


@dataclass
class FakeApi:
    """GitHub's REST API as far as the step uses it: comments listed from `comments`, the issue's labels from
    `labels`, writes recorded."""

    comments: list[dict] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    requests: list[tuple[str, str, object, dict]] = field(default_factory=list)
    replies: dict[str, tuple[int, str, bytes]] = field(default_factory=dict)
    """Raw answers (status, content type, body) by method, in place of the API's own: a proxy's login page."""

    def writes(self) -> list[tuple[str, str, object]]:
        return [(method, path, body) for method, path, body, _ in self.requests if method != "GET"]


def _serve(api: FakeApi) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> object:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            api.requests.append((self.command, self.path, body, dict(self.headers)))
            return body

        def _reply(self, status: int, data: object = None) -> None:
            payload = b"" if data is None else json.dumps(data).encode()
            kind = "application/json"
            if self.command in api.replies:
                status, kind, payload = api.replies[self.command]
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._record()
            if "/labels" in self.path:
                self._reply(200, [{"name": name} for name in api.labels])
            else:
                self._reply(200, api.comments if "page=1" in self.path else [])

        def do_POST(self) -> None:
            body = self._record()
            if self.path.endswith("/labels"):  # GitHub answers with the issue's labels
                self._reply(200, [{"name": name} for name in [*api.labels, *body["labels"]]])
            else:
                self._reply(201, {"id": 900001, **(body if isinstance(body, dict) else {})})

        def do_PATCH(self) -> None:
            self._reply(200, self._record())

        def do_DELETE(self) -> None:
            self._record()
            self._reply(204)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text())


def _action_step() -> dict:
    """The action's triage step, exactly as action.yml has it."""
    action = _action()
    assert action["runs"]["using"] == "composite"
    return next(s for s in action["runs"]["steps"] if s.get("name") == "Triage the issue")


def _action_script() -> str:
    """The `run:` of the action's triage step."""
    return _action_step()["run"]


def run_action(tmp_path: Path, event: str, api: FakeApi, dry_run: bool = False,
               labels: str = "", store: str = "") -> subprocess.CompletedProcess:
    server = _serve(api)
    try:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        shim = bin_dir / "python"  # the runner's `python` is the one setup-python installed: here, this one
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        shim.chmod(0o755)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               "GITHUB_EVENT_PATH": str(EVENTS / event), "GITHUB_API_URL": f"http://127.0.0.1:{server.server_port}",
               "GITHUB_TOKEN": TOKEN, "DRY_RUN": "true" if dry_run else "false", "LABELS": labels, "STORE": store,
               "LANG_WANTED": "en", "TIMEOUT_SECONDS": _action()["inputs"]["timeout"]["default"],
               "PYTHONPATH": str(ROOT)}
        env.pop("GITHUB_EVENT_NAME", None)
        return subprocess.run(["bash", "-e", "-c", _action_script()], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, check=False)
    finally:
        server.shutdown()
        server.server_close()


def test_an_opened_issue_gets_one_comment_with_the_verdict_and_its_labels(tmp_path):
    api = FakeApi()
    done = run_action(tmp_path, "issues-opened.json", api)
    assert done.returncode == 0, done.stderr
    gets = [path for method, path, _, _ in api.requests if method == "GET"]
    assert gets == ["/repos/vllm-project/vllm/issues/17295/comments?per_page=100&page=1",
                    "/repos/vllm-project/vllm/issues/17295/labels?per_page=100"]
    assert all(headers.get("Authorization") == f"Bearer {TOKEN}" for *_, headers in api.requests)
    writes = api.writes()
    assert [(m, p) for m, p, _ in writes] == [("POST", "/repos/vllm-project/vllm/issues/17295/labels"),
                                             ("POST", "/repos/vllm-project/vllm/issues/17295/comments")]
    comment = writes[1][2]["body"]
    assert comment.startswith(MARKER + "\n")
    assert "`illegal-memory-access`" in comment and "an illegal memory access was encountered" in comment
    assert writes[0][2] == {"labels": ["postmortem: illegal-memory-access", "needs-info"]}
    assert "vllm-project/vllm#17295: illegal-memory-access; created the comment" in done.stdout


def test_an_edit_updates_the_comment_it_wrote_and_takes_off_a_label_that_no_longer_applies(tmp_path):
    """The stale `postmortem: gpu-oom` of issues-edited.json is one the bot's comment says it applied."""
    applied = LabelState(frozenset({"postmortem: gpu-oom"}))
    said = render_markdown(triage(read_issue(b"old answer", "x.md")), state=applied)
    ours = {"id": 4242, "body": said, "user": {"login": "github-actions[bot]", "type": "Bot"}}
    forged = {"id": 4241, "body": MARKER + "\nnot ours", "user": {"login": "someone", "type": "User"}}
    api = FakeApi(comments=[forged, ours], labels=["bug", "postmortem: gpu-oom"])
    done = run_action(tmp_path, "issues-edited.json", api)
    assert done.returncode == 0, done.stderr
    writes = api.writes()
    assert [(m, p) for m, p, _ in writes] == [
        ("DELETE", "/repos/vllm-project/vllm/issues/17295/labels/postmortem%3A%20gpu-oom"),
        ("POST", "/repos/vllm-project/vllm/issues/17295/labels"),
        ("PATCH", "/repos/vllm-project/vllm/issues/comments/4242")]
    assert writes[2][2]["body"].startswith(MARKER) and "`illegal-memory-access`" in writes[2][2]["body"]
    assert "updated the comment" in done.stdout


def test_a_comment_of_an_earlier_version_takes_off_no_label(tmp_path):
    """A comment without the labels it applied (written before the bot kept them) proves no label is the bot's."""
    ours = {"id": 4242, "body": MARKER + "\nold answer", "user": {"login": "github-actions[bot]", "type": "Bot"}}
    api = FakeApi(comments=[ours], labels=["bug", "postmortem: gpu-oom"])
    done = run_action(tmp_path, "issues-edited.json", api)
    assert done.returncode == 0, done.stderr
    assert [m for m, _, _ in api.writes()] == ["POST", "PATCH"]


def test_labels_a_maintainer_changed_stay_as_the_maintainer_left_them(tmp_path):
    """The bot labels a new issue; a maintainer adds `hardware` (a label the map gives too) and takes off the bot's
    `needs-info`; the reporter edits the issue. The second answer keeps `hardware` and does not put `needs-info`
    back; the labels it applied are in its comment, hidden, for the next round."""
    first = FakeApi()
    assert run_action(tmp_path, "issues-opened.json", first).returncode == 0
    sent = {path.rsplit("/", 1)[1]: body for _, path, body in first.writes()}
    assert sent["labels"] == {"labels": ["postmortem: illegal-memory-access", "needs-info"]}
    ours = {"id": 900001, "body": sent["comments"]["body"], "user": {"login": "github-actions[bot]", "type": "Bot"}}
    now = ["bug", "stale", "postmortem: illegal-memory-access", "hardware"]
    edited = json.loads((EVENTS / "issues-edited.json").read_text())
    edited["issue"]["labels"] = [{"name": name} for name in now]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    second = FakeApi(comments=[ours], labels=now)
    done = run_action(tmp_path, str(path), second)
    assert done.returncode == 0, done.stderr
    writes = second.writes()
    assert [(m, p) for m, p, _ in writes] == [("PATCH", "/repos/vllm-project/vllm/issues/comments/900001")]
    assert "needs-info" not in str([body for m, _, body in writes if m == "POST"])
    # the maintainer's choice is remembered: a third round (a new comment) still neither removes nor re-adds
    third = FakeApi(comments=[{**ours, "body": writes[0][2]["body"]}], labels=now)
    done = run_action(tmp_path, str(path), third)
    assert done.returncode == 0, done.stderr
    assert [m for m, _, _ in third.writes()] == ["PATCH"]


def test_the_reporters_comments_are_read_with_the_issue_and_nobody_elses(tmp_path):
    """llama.cpp#8117: the reporter's first comment holds the CUDA error's log; another user's comment about
    something else must not change the answer."""
    listed = json.loads((EVENTS / "llama.cpp-8117-comments.json").read_text())
    other = {"id": 1, "body": "```\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n```",
             "user": {"login": "someone-else", "type": "User"}}
    api = FakeApi(comments=[*listed, other])
    done = run_action(tmp_path, "issue-comment-created.json", api)
    assert done.returncode == 0, done.stderr
    body = next(body for method, path, body in api.writes()
                if (method, path) == ("POST", "/repos/ggml-org/llama.cpp/issues/8117/comments"))
    assert "`launch-failure`" in body["body"]
    assert "ggml-org/llama.cpp#8117: comment 1, block 1" in body["body"]  # evidence quoted from the comment
    assert "out of memory" not in body["body"].lower()


def test_a_dry_run_reads_the_thread_and_changes_nothing(tmp_path):
    api = FakeApi()
    done = run_action(tmp_path, "issues-opened.json", api, dry_run=True)
    assert done.returncode == 0, done.stderr
    assert api.writes() == []
    assert "would send: POST /repos/vllm-project/vllm/issues/17295/comments" in done.stdout
    assert MARKER in done.stdout


@pytest.mark.parametrize("change, said", [
    (lambda e: e["issue"].update(pull_request={"url": "x"}), "skipped: a pull request"),
    (lambda e: e.update(action="closed"), "skipped: issues closed"),
])
def test_pull_requests_and_other_actions_are_left_alone(tmp_path, change, said):
    event = json.loads((EVENTS / "issues-opened.json").read_text())
    change(event)
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    api = FakeApi()
    done = run_action(tmp_path, str(path), api)
    assert done.returncode == 0, done.stderr
    assert api.requests == []
    assert said in done.stdout


def test_its_own_comment_does_not_start_another_round(tmp_path):
    event = json.loads((EVENTS / "issue-comment-created.json").read_text())
    event["comment"] = {"id": 1, "body": MARKER + "\n...", "user": {"login": "github-actions[bot]", "type": "Bot"}}
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    api = FakeApi()
    done = run_action(tmp_path, str(path), api)
    assert done.returncode == 0 and api.requests == []
    assert "skipped: a comment by a bot" in done.stdout


def test_an_api_failure_is_one_line_and_a_failed_step(tmp_path):
    api = FakeApi()
    server = _serve(api)
    port = server.server_port
    server.shutdown()
    server.server_close()  # nothing listens there now
    env = {**os.environ, "GITHUB_API_URL": f"http://127.0.0.1:{port}", "GITHUB_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "postmortem.triage.github", "--event",
                           str(EVENTS / "issues-opened.json")], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("postmortem triage action: GET /repos/vllm-project/vllm/issues/17295/comments")


def _readme_workflow() -> dict:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```yaml\n# .github/workflows/triage.yml")
    return yaml.safe_load(readme[start + len("```yaml\n"): readme.index("```", start + 7)])


def test_the_readme_shows_the_workflow_that_uses_the_action():
    workflow = _readme_workflow()
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as true
    assert set(triggers) == {"issues", "issue_comment"}
    assert workflow["permissions"] == {"issues": "write"}
    steps = workflow["jobs"]["triage"]["steps"]
    assert any(str(step.get("uses", "")).endswith("postmortem@main") and step.get("timeout-minutes")
               for step in steps)
    header = "\n".join(line.removeprefix("# ") for line in (ROOT / "action.yml").read_text().splitlines()
                       if line.startswith("#   "))
    assert yaml.safe_load(header) == workflow  # action.yml's own comment shows the same workflow


def test_a_dry_run_without_the_api_answers_from_the_event_alone(tmp_path):
    api = FakeApi()
    server = _serve(api)
    port = server.server_port
    server.shutdown()
    server.server_close()
    env = {**os.environ, "GITHUB_API_URL": f"http://127.0.0.1:{port}", "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_TOKEN", None)
    done = subprocess.run([sys.executable, "-m", "postmortem.triage.github", "--dry-run", "--event",
                           str(EVENTS / "issues-opened.json")], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "the thread could not be read" in done.stderr
    assert "would send: POST /repos/vllm-project/vllm/issues/17295/comments" in done.stdout


HTML_PAGE = (200, "text/html; charset=utf-8", b"<html><head><title>Sign in</title></head><body>Wi-Fi</body></html>")


@pytest.mark.parametrize("replies, said", [
    ({"GET": HTML_PAGE}, "GET /repos/vllm-project/vllm/issues/17295/comments?per_page=100&page=1: the answer is "
                         "not JSON (200, text/html"),
    ({"GET": (200, "application/json", b'{"message": "Moved"}')},
     "GET /repos/vllm-project/vllm/issues/17295/comments?per_page=100&page=1: the answer is a JSON object, not the "
     "list GitHub sends"),
    ({"POST": HTML_PAGE}, "POST /repos/vllm-project/vllm/issues/17295/labels: the answer is not JSON (200, text/html"),
    ({"POST": (201, "application/json", b"[]")},
     "POST /repos/vllm-project/vllm/issues/17295/comments: the answer is a JSON list, not the object GitHub sends"),
])
def test_an_answer_that_is_not_the_apis_is_one_line_and_a_failed_step(tmp_path, replies, said):
    """A proxy's or captive portal's page answering 200, or JSON of the wrong shape: the step fails in one line,
    and nothing past the first wrong answer is sent."""
    api = FakeApi(replies=replies)
    done = run_action(tmp_path, "issues-opened.json", api)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"postmortem triage action: {said}")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    method, path, *_ = api.requests[-1]
    assert said.startswith(f"{method} {path}:")  # nothing was sent after the wrong answer


def test_comments_of_odd_shapes_are_not_the_steps_and_never_traceback(tmp_path):
    """Comment objects the API should never send (a user that is a string, an id that is not a number, a body that is
    a list) are read as someone else's comments."""
    odd = [{"id": "x", "body": MARKER, "user": "github-actions[bot]"}, {"id": 5, "body": ["x"], "user": None}, 7,
           {"id": 6, "body": MARKER, "user": {"login": ["x"], "type": ["Bot"]}}]
    api = FakeApi(comments=odd)
    done = run_action(tmp_path, "issues-opened.json", api)
    assert done.returncode == 0, done.stderr
    assert [m for m, _, _ in api.writes()] == ["POST", "POST"]


def test_a_triage_past_its_budget_posts_nothing_and_says_so(tmp_path, monkeypatch, capsys):
    """The step's own budget (`timeout`, --timeout): a slow analysis ends with one line and no comment, rather than
    the job being killed mid-post by the workflow's timeout-minutes."""
    import postmortem.triage as triage_module
    from postmortem.triage import github

    def slow(*args, **kwargs):  # a hostile issue's analysis, made slow on purpose: the budget is under test
        time.sleep(30)

    monkeypatch.setattr(triage_module, "triage", slow)
    api = FakeApi()
    server = _serve(api)
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    started = time.monotonic()
    try:
        status = github.main(["--event", str(EVENTS / "issues-opened.json"), "--timeout", "1"])
    finally:
        server.shutdown()
        server.server_close()
    assert time.monotonic() - started < 10
    assert status == 1
    assert api.writes() == []
    err = capsys.readouterr().err
    assert err == ("postmortem triage action: vllm-project/vllm#17295: the analysis ran past 1 s and was stopped "
                   "(--timeout); nothing was posted\n")


def test_the_action_gives_the_step_a_budget():
    """A composite action's steps cannot carry timeout-minutes (the runner's action.yml schema has no such key):
    the budget is the `timeout` input, passed to the step's own deadline."""
    step = _action_step()
    assert "timeout-minutes" not in step
    assert step["env"]["TIMEOUT_SECONDS"] == "${{ inputs.timeout }}"
    assert '--timeout "$TIMEOUT_SECONDS"' in step["run"]
    assert float(_action()["inputs"]["timeout"]["default"]) * 2 <= 60 * _readme_workflow()["jobs"]["triage"][
        "steps"][0]["timeout-minutes"]
