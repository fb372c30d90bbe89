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
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from postmortem.render.triage_comment import MARKER

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "tests" / "data" / "github_events"
TOKEN = "test-token-not-a-secret"


@dataclass
class FakeApi:
    """GitHub's REST API as far as the step uses it: comments listed from `comments`, writes recorded."""

    comments: list[dict] = field(default_factory=list)
    requests: list[tuple[str, str, object, dict]] = field(default_factory=list)

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
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._record()
            page = 1 if "page=1" in self.path else 2
            self._reply(200, api.comments if page == 1 and "/comments" in self.path else [])

        def do_POST(self) -> None:
            body = self._record()
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


def _action_script() -> str:
    """The `run:` of the action's triage step, exactly as action.yml has it."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    step = next(s for s in action["runs"]["steps"] if s.get("name") == "Triage the issue")
    return step["run"]


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
               "LANG_WANTED": "en", "PYTHONPATH": str(ROOT)}
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
    assert gets == ["/repos/vllm-project/vllm/issues/17295/comments?per_page=100&page=1"]
    assert all(headers.get("Authorization") == f"Bearer {TOKEN}" for *_, headers in api.requests)
    writes = api.writes()
    assert [(m, p) for m, p, _ in writes] == [("POST", "/repos/vllm-project/vllm/issues/17295/comments"),
                                             ("POST", "/repos/vllm-project/vllm/issues/17295/labels")]
    comment = writes[0][2]["body"]
    assert comment.startswith(MARKER + "\n")
    assert "`illegal-memory-access`" in comment and "an illegal memory access was encountered" in comment
    assert writes[1][2] == {"labels": ["postmortem: illegal-memory-access", "needs-info"]}
    assert "vllm-project/vllm#17295: illegal-memory-access; created the comment" in done.stdout


def test_an_edit_updates_the_comment_it_wrote_and_takes_off_a_label_that_no_longer_applies(tmp_path):
    ours = {"id": 4242, "body": MARKER + "\nold answer", "user": {"login": "github-actions[bot]", "type": "Bot"}}
    forged = {"id": 4241, "body": MARKER + "\nnot ours", "user": {"login": "someone", "type": "User"}}
    api = FakeApi(comments=[forged, ours])
    done = run_action(tmp_path, "issues-edited.json", api)
    assert done.returncode == 0, done.stderr
    writes = api.writes()
    assert [(m, p) for m, p, _ in writes] == [
        ("PATCH", "/repos/vllm-project/vllm/issues/comments/4242"),
        ("DELETE", "/repos/vllm-project/vllm/issues/17295/labels/postmortem%3A%20gpu-oom"),
        ("POST", "/repos/vllm-project/vllm/issues/17295/labels")]
    assert writes[0][2]["body"].startswith(MARKER) and "`illegal-memory-access`" in writes[0][2]["body"]
    assert "updated the comment" in done.stdout


def test_the_reporters_comments_are_read_with_the_issue_and_nobody_elses(tmp_path):
    """llama.cpp#8117: the reporter's first comment holds the CUDA error's log; another user's comment about
    something else must not change the answer."""
    listed = json.loads((EVENTS / "llama.cpp-8117-comments.json").read_text())
    other = {"id": 1, "body": "```\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n```",
             "user": {"login": "someone-else", "type": "User"}}
    api = FakeApi(comments=[*listed, other])
    done = run_action(tmp_path, "issue-comment-created.json", api)
    assert done.returncode == 0, done.stderr
    (method, path, body), *_ = api.writes()
    assert (method, path) == ("POST", "/repos/ggml-org/llama.cpp/issues/8117/comments")
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


def test_the_readme_shows_the_workflow_that_uses_the_action():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```yaml\n# .github/workflows/triage.yml")
    workflow = yaml.safe_load(readme[start + len("```yaml\n"): readme.index("```", start + 7)])
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as true
    assert set(triggers) == {"issues", "issue_comment"}
    assert workflow["permissions"] == {"issues": "write"}
    steps = workflow["jobs"]["triage"]["steps"]
    assert any(str(step.get("uses", "")).endswith("postmortem@main") for step in steps)


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
