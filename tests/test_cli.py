"""The command line and the JSON contract, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from postmortem.cli import main

ROOT = Path(__file__).parent.parent
SAMPLES = ROOT / "samples"
DATA = Path(__file__).parent / "data" / "inputs"


def run(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)


@pytest.mark.parametrize(
    ("sample", "cause", "consequence"),
    [
        ("rtx5090-sm120", "arch-mismatch", "native-crash"),
        ("ecc-then-illegal-address", "gpu-memory-ecc", "illegal-memory-access"),
        ("gpu-off-bus", "gpu-off-bus", None),
    ],
)
def test_samples_give_their_verdict(sample, cause, consequence):
    result = run("analyze", "--format", "json", str(SAMPLES / sample))
    assert result.exit_code == 0
    report = json.loads(result.output)
    assert report["findings"][0]["cause"] == cause
    assert report["verdict"]["cause"] == cause
    if consequence:
        follower = next(f for f in report["findings"] if f["cause"] == consequence)
        assert follower["consequence_of"] == report["findings"][0]["signature"]


def test_json_contract_shape():
    result = run("analyze", "--format", "json", str(SAMPLES / "ecc-then-illegal-address"))
    report = json.loads(result.output)
    assert {"findings", "events", "inputs", "facts", "cores"} <= report.keys()
    ids = {e["id"] for e in report["events"]}
    for finding in report["findings"]:
        assert {"signature", "cause", "severity", "confidence", "title", "evidence"} <= finding.keys()
        assert 0 < finding["confidence"] <= 1
        assert finding["confidence_reason"]
        assert set(finding["evidence"]) <= ids
    confidences = [f["confidence"] for f in report["findings"] if not f["consequence_of"]]
    assert report["findings"][0]["confidence"] == max(confidences)
    for event in report["events"]:
        assert {"id", "kind", "time", "source", "text", "fields"} <= event.keys()
        assert event["source"]["path"].startswith(str(SAMPLES))
        assert event["source"]["line"] >= 1
    for info in report["inputs"]:
        assert {"path", "format", "diagnostics"} <= info.keys()


def test_evidence_points_at_the_proving_line():
    result = run("analyze", "--format", "json", str(SAMPLES / "gpu-off-bus"))
    report = json.loads(result.output)
    top = report["findings"][0]
    events = {e["id"]: e for e in report["events"]}
    first = events[top["evidence"][0]]
    lines = Path(first["source"]["path"]).read_text().splitlines()
    assert "79" in lines[first["source"]["line"] - 1]
    assert first["text"] in lines[first["source"]["line"] - 1]


def test_text_report_starts_with_the_verdict():
    result = run("analyze", str(SAMPLES / "gpu-off-bus"))
    assert result.exit_code == 0
    first = result.output.splitlines()[0]
    assert first.startswith("Verdict: gpu-off-bus")
    assert "dmesg.txt:" in result.output
    assert "What to do:" in result.output


def test_stdin_is_read():
    data = (DATA / "offbus-dmesg.txt").read_bytes()
    result = run("analyze", "--format", "json", "-", stdin=data)
    report = json.loads(result.output)
    assert report["inputs"][0]["path"] == "<stdin>"
    assert report["findings"][0]["cause"] == "gpu-off-bus"


def test_several_inputs_join_in_one_report():
    result = run("analyze", "--format", "json", str(DATA / "offbus-dmesg.txt"), str(DATA / "sm120-train.log"))
    report = json.loads(result.output)
    assert [i["path"] for i in report["inputs"]] == [str(DATA / "offbus-dmesg.txt"), str(DATA / "sm120-train.log")]
    causes = {f["cause"] for f in report["findings"]}
    assert {"gpu-off-bus", "arch-mismatch"} <= causes


def test_fail_on_sets_the_exit_status():
    assert run("analyze", "--fail-on", "critical", str(SAMPLES / "gpu-off-bus")).exit_code == 1
    assert run("analyze", "--fail-on", "critical", str(DATA / "sm120-train.log")).exit_code == 0


@pytest.mark.parametrize(
    "args",
    [["analyze", "/no/such/file"], ["analyze", "--format", "yaml", "x"], ["analyze"], ["frobnicate"]],
)
def test_usage_errors_exit_2(args):
    assert CliRunner().invoke(main, args).exit_code == 2


def test_output_file_and_inputs_are_not_overwritten(tmp_path):
    log = tmp_path / "dmesg.txt"
    log.write_bytes((DATA / "offbus-dmesg.txt").read_bytes())
    before = log.read_bytes()
    out = tmp_path / "verdict.json"
    assert run("analyze", "--format", "json", "-o", str(out), str(log)).exit_code == 0
    assert json.loads(out.read_text())["findings"][0]["cause"] == "gpu-off-bus"
    refused = CliRunner().invoke(main, ["analyze", "-o", str(log), str(log)])
    assert refused.exit_code == 2
    assert log.read_bytes() == before


def test_terminal_control_sequences_in_a_log_are_shown_not_run(tmp_path):
    log = tmp_path / "evil.log"
    line = (DATA / "offbus-dmesg.txt").read_text().splitlines()[0]
    log.write_text(line.replace("NVRM:", "\x1b]0;owned\x07NVRM:") + "\n")
    result = run("analyze", str(log))
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "\\x1b" in result.output


def test_module_entry_point_runs_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "postmortem", "analyze", "--format", "json", str(SAMPLES / "gpu-off-bus")],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["verdict"]["cause"] == "gpu-off-bus"


def test_core_sample_reads_like_a_debugger():
    result = run("analyze", "--format", "json", str(SAMPLES / "native-crash-core"))
    report = json.loads(result.output)
    assert report["verdict"]["cause"] == "native-crash"
    [core] = report["cores"]
    assert core["signal"]["name"] == "SIGSEGV" and core["signal"]["address"] == "0x0"
    frames = [f["symbol"] for f in core["threads"][0]["frames"]]
    assert frames[:4] == ["lib_c", "lib_b", "lib_a", "main"]
