"""The command line and the JSON contract, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
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
        ("rtx5090-sm120", "arch-mismatch", None),  # its segfault logs share no pid, GPU or rank with the warning
        ("ecc-then-illegal-address", "gpu-memory-ecc", None),  # the worker names no GPU: no path to Xid 48's GPU
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
        capture_output=True, check=False,
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


@pytest.mark.parametrize("token", ["700", "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS",
                                   "an illegal memory access was encountered"])
def test_explain_names_one_cuda_error_however_it_is_spelled(token):
    result = run("explain", "--format", "json", token)
    [answer] = json.loads(result.output)
    assert answer["cuda"]["number"] == 700 and answer["cuda"]["sticky"] == "yes"
    assert [f["cause"] for f in answer["findings"]] == ["illegal-memory-access"]


def test_explain_xid_and_pasted_lines():
    text = run("explain", "Xid", "79").output
    assert "cause gpu-off-bus [xid-79]" in text and "The GPU stopped" in text
    lines = (DATA / "offbus-dmesg.txt").read_bytes().splitlines()[0] + b"\nRuntimeError: CUDA error: out of memory\n"
    answers = json.loads(run("explain", "--format", "json", "-", stdin=lines).output)
    assert [a["findings"][0]["cause"] for a in answers] == ["gpu-off-bus", "gpu-oom"]
    assert "no signature names a cause" in run("explain", "Xid", "14").output


def test_signatures_list_show_and_lint():
    listed = run("signatures", "list", "--cause", "gpu-off-bus").output.splitlines()
    assert any(line.startswith("xid-79 ") for line in listed)
    assert all(" gpu-off-bus " in line for line in listed)
    shown = run("signatures", "show", "xid-79").output
    assert "cause gpu-off-bus" in shown and "positive example:" in shown
    assert CliRunner().invoke(main, ["signatures", "show", "no-such-id"]).exit_code == 2
    linted = CliRunner().invoke(main, ["signatures", "lint"])
    assert linted.exit_code == 0, linted.output
    assert linted.output.rstrip().endswith("0 problem(s)")


PACK = """
signatures:
  - id: site-dataloader-stall
    title: Our data loader stalled
    cause: nccl-timeout
    severity: error
    confidence: 0.9
    match: {kind: nccl-timeout}
    explain: Our own rule.
    actions: [Check the shared file system]
    examples:
      positive: ["[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800095 milliseconds before timing out."]
      negative: ["{negative}"]
"""  # noqa: E501 - a real NCCL watchdog line as the example


def test_an_organisation_pack_loads_beside_the_bundled_one(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "site.yaml").write_text(PACK.replace("{negative}", "nothing to see"))
    log = tmp_path / "train.log"
    log.write_text(PACK.split('positive: ["')[1].split('"]')[0] + "\n")
    report = json.loads(run("analyze", "--format", "json", "--signatures", str(pack), str(log)).output)
    [finding] = [f for f in report["findings"] if f["signature"] == "site-dataloader-stall"]
    assert finding["merged"] == ["nccl-watchdog-timeout"]  # the pack's reading of the line, the bundled one named
    linted = CliRunner().invoke(main, ["signatures", "lint", "--signatures", str(pack)])
    assert linted.exit_code == 0 and "no zh-CN words for 1 signature(s) (site-dataloader-stall)" in linted.stderr
    (pack / "dup.yaml").write_text(PACK.replace("{negative}", "x"))
    clash = CliRunner().invoke(main, ["analyze", "--signatures", str(pack), str(log)])
    assert clash.exit_code == 2 and "duplicate id 'site-dataloader-stall'" in clash.output


def test_signature_packs_from_entry_points(tmp_path, monkeypatch):
    """An installed distribution (a real dist-info on sys.path) declares two packs; the broken one is a warning."""
    from postmortem import signatures

    pack = tmp_path / "pack"
    pack.mkdir()
    (tmp_path / "site_pack.py").write_text(f"PACK = {str(pack)!r}\n\ndef broken():\n "
                                           "   raise RuntimeError('no pack here')\n")
    info = tmp_path / "site_pack-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: site-pack\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{signatures.ENTRY_POINT_GROUP}]\ngood = site_pack:PACK\nbad = site_pack:broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found, warnings = signatures.plugin_directories()
    assert found == [pack]
    assert warnings == ["signature pack 'bad' not loaded: RuntimeError: no pack here"]


def test_progress_line_on_a_terminal_names_the_input_being_read(monkeypatch, capsys):
    import time

    from postmortem import cli

    monkeypatch.setattr(cli, "_is_terminal", lambda stream: True)
    monkeypatch.setattr(cli, "SPINNER_DELAY_S", 0.05)

    def slow(progress):
        progress(0, "/data/kern.log")
        time.sleep(0.3)
        progress(1, "/data/core.123")
        time.sleep(0.3)
        progress(2, "bundle.tar!/\x1b]0;pwned\x07\x1b[2J\u202etxt.exe")  # a member name is the input's
        time.sleep(0.3)
        return "report"

    assert cli._with_spinner(slow) == "report"
    shown = capsys.readouterr().err
    assert "reading /data/kern.log" in shown and "1 input(s) done, reading /data/core.123" in shown
    assert "2 input(s) done" in shown and "\\u202etxt.exe" in shown
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert shown.endswith("\r")  # the line is erased before the report is written


# ---------------------------------------------------------------- where -o writes

def _case(folder: Path) -> Path:
    """A case directory holding one kernel log, as a user would pass it."""
    case = folder / "case"
    case.mkdir()
    (case / "dmesg.txt").write_bytes((DATA / "offbus-dmesg.txt").read_bytes())
    return case


@pytest.mark.parametrize("how", ["hard link", "symbolic link", "inside the input directory", "other spelling"])
def test_output_never_replaces_an_input(tmp_path, how):
    case = _case(tmp_path)
    log = case / "dmesg.txt"
    before = log.read_bytes()
    inputs, out = {"hard link": ([str(log)], tmp_path / "report.txt"),
                   "symbolic link": ([str(log)], tmp_path / "report.txt"),
                   "inside the input directory": ([str(case)], log),
                   "other spelling": ([str(case)], case / ".." / "case" / "dmesg.txt")}[how]
    if how == "hard link":
        os.link(log, out)
    elif how == "symbolic link":
        out.symlink_to(log)
    result = CliRunner().invoke(main, ["analyze", *inputs, "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert "inputs are never modified" in result.output
    assert log.read_bytes() == before
    assert sorted(p.name for p in case.iterdir()) == ["dmesg.txt"]  # no temporary file left either


def test_a_report_written_inside_its_input_directory_is_no_input(tmp_path):
    case = _case(tmp_path)
    first = run("analyze", str(case), "--format", "json", "-o", str(case / "report.json"))
    assert first.exit_code == 0
    report = json.loads((case / "report.json").read_text())
    assert [Path(i["path"]).name for i in report["inputs"]] == ["dmesg.txt"]
    again = CliRunner().invoke(main, ["analyze", str(case), "--format", "json", "-o", str(case / "report.json")])
    assert again.exit_code == 2 and "is one of the inputs" in again.output  # the first report is an input now
    assert json.loads((case / "report.json").read_text()) == report


@pytest.mark.parametrize(("output", "words"), [
    ("/dev/full", "No space left on device"),
    ("missing-dir/x.txt", "does not exist"),
    ("case", "is a directory"),
    ("/proc/version", "cannot write /proc/version"),
])
def test_an_output_that_cannot_be_written_is_one_clear_error(tmp_path, monkeypatch, output, words):
    case = _case(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["analyze", str(case), "-o", output])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case"]


def test_a_bad_output_is_refused_before_the_analysis_starts(tmp_path, monkeypatch):
    case = _case(tmp_path)
    monkeypatch.setattr("postmortem.cli.run_analysis", lambda *args: pytest.fail("analysis ran"))
    result = CliRunner().invoke(main, ["analyze", str(case), "-o", str(tmp_path / "missing" / "r.txt")])
    assert result.exit_code == 2 and "the folder" in result.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_an_unwritable_folder_is_refused(tmp_path):
    case = _case(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = CliRunner().invoke(main, ["analyze", str(case), "-o", str(locked / "r.txt")])
    assert result.exit_code == 2 and "not writable" in result.output


def test_fleet_report_and_collect_refuse_their_inputs(tmp_path):
    db = tmp_path / "fleet.sqlite"
    db.write_bytes(b"not yet a store")
    refused = CliRunner().invoke(main, ["report", "--db", str(db), "-o", str(db)])
    assert refused.exit_code == 2 and "inputs are never modified" in refused.output
    case = _case(tmp_path)
    os.link(case / "dmesg.txt", tmp_path / "bundle.tar.gz")
    bundle = subprocess.run([sys.executable, "-m", "postmortem", "collect", "--telemetry", "0", "-o",
                             str(tmp_path / "bundle.tar.gz"), str(case)], capture_output=True, timeout=60, check=False)
    assert bundle.returncode == 2 and b"inputs are never modified" in bundle.stderr
    assert (case / "dmesg.txt").read_bytes() == (DATA / "offbus-dmesg.txt").read_bytes()


def test_scan_export_into_the_scanned_tree_is_refused_before_the_scan(tmp_path, monkeypatch):
    case = _case(tmp_path)
    monkeypatch.setattr("postmortem.fleet.scan.scan", lambda *args, **kwargs: pytest.fail("scan ran"))
    result = CliRunner().invoke(main, ["scan", str(tmp_path), "--db", str(tmp_path / "s.sqlite"), "--export", "csv",
                                       "-o", str(case / "tables")])
    assert result.exit_code == 2 and "which this command reads" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case"]


TERMINAL_DRIVERS = r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\udc80-\udcff]"
"""What may drive a terminal, read back as Python reads a byte stream (surrogateescape): C0 but tab and newline,
DEL, C1 (as characters, U+0080-U+009F, or as raw bytes of a name that is not UTF-8, U+DC80-U+DCFF), bidi marks."""


def _terminal_cases():
    from hostile import cases_terminal

    return cases_terminal.CASES


@pytest.mark.parametrize("case", _terminal_cases(), ids=lambda case: case.name)
def test_no_byte_from_an_input_drives_the_terminal(case, tmp_path):
    """Round 3, item 9: every command run on hostile names and lines (tests/hostile/cases_terminal.py) with
    NO_COLOR: not one control, C1 or raw byte on stdout or stderr, and the evidence still shown (escaped)."""
    import re

    from hostile.harness import run_case

    outcome = run_case(case, tmp_path / case.name)
    assert not outcome.problems, (outcome.problems, outcome.stderr[-2000:])
    for stream in (outcome.stdout, outcome.stderr):
        driving = re.findall(TERMINAL_DRIVERS, stream.decode("utf-8", "surrogateescape"))
        assert not driving, (driving, stream[-2000:])


def _commands_with_lang(group=main, prefix=()):
    import click

    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands_with_lang(command, (*prefix, name))
        elif any("--lang" in getattr(param, "opts", ()) for param in command.params):
            yield (*prefix, name)


@pytest.mark.parametrize("command", sorted(_commands_with_lang()), ids=" ".join)
@pytest.mark.parametrize("lang", ["fr", "ZH-cn", "", "\x1b]0;x\x07", "\udcff"])
def test_a_bad_lang_is_a_usage_error_that_lists_the_languages(command, lang, tmp_path):
    """Round 3, item 15b: every command that takes --lang answers a bad one with click's usage error (exit 2)
    naming the languages there are (render/i18n), before any work."""
    from postmortem.render import LANGUAGES

    (tmp_path / "issue.md").write_text("# nothing\n")
    result = CliRunner().invoke(main, [*command, "--lang", lang, str(tmp_path / "issue.md")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert "Invalid value for '--lang'" in result.output
    assert all(f"'{code}'" in result.output for code in LANGUAGES), result.output
    assert "Traceback" not in result.output


def test_the_terminal_gate_keeps_only_the_tools_own_colours():
    """Round 3, item 9: with colour on, an input's SGR (8 hides text) is shown escaped like any other sequence;
    click.style's codes for the tool's own words stay."""
    import click

    from postmortem.render.terminal import terminal_text

    own = click.style("Verdict", fg="red", bold=True) + " " + click.style("dmesg.txt:5", fg="cyan")
    hostile = "\x1b[8mhidden\x1b[0m \x1b]0;t\x07 \u009b2J \udc9b\t\n"
    assert terminal_text(own + hostile, styled=True) == own + "\\x1b[8mhidden\x1b[0m \\x1b]0;t\\x07 \\x9b2J \\x9b\t\n"
    assert terminal_text(own) == own.replace("\x1b", "\\x1b")


# ------------------------------------------------------------------ the terminal's width, colour and language

SAMPLE_5090 = str(Path(__file__).resolve().parent.parent / "samples" / "rtx5090-sm120")


@pytest.mark.parametrize("columns", [50, 72, 140])
def test_prose_is_wrapped_to_the_terminal_width_and_no_identifier_is_broken(columns):
    wide = CliRunner().invoke(main, ["analyze", SAMPLE_5090], env={"COLUMNS": "300", "NO_COLOR": "1"})
    done = CliRunner().invoke(main, ["analyze", SAMPLE_5090], env={"COLUMNS": str(columns), "NO_COLOR": "1"})
    assert done.exit_code == 0, done.output
    prose = done.output.split("\n\n", 1)[1].split("\n\n", 1)[0].splitlines()  # the verdict's explanation
    limit = max(40, min(columns, 100))
    assert all(len(line) <= limit for line in prose), [line for line in prose if len(line) > limit]
    words = lambda text: text.split()  # noqa: E731  # the same words, only the breaks differ
    assert words(" ".join(prose)) == words(" ".join(wide.output.split("\n\n", 1)[1].split("\n\n", 1)[0].split()))


def test_a_long_identifier_stays_whole_on_a_narrow_terminal():
    from postmortem.render.terminal import wrap

    text = ("the error torch.cuda.OutOfMemoryError_with_a_very_long_name_indeed came from "
            "/opt/conda/lib/libtorch_cuda.so")
    lines = wrap(text, 20)
    assert "torch.cuda.OutOfMemoryError_with_a_very_long_name_indeed" in lines
    assert "/opt/conda/lib/libtorch_cuda.so" in lines


def test_chinese_is_wrapped_without_a_line_that_starts_with_closing_or_ends_with_opening_punctuation():
    from postmortem.render.terminal import NO_LINE_END, NO_LINE_START, wrap

    # the Chinese explanation of xid-79 (signatures/i18n), whose opening bracket before "GSP" fell at a line's end
    text = ("GPU 在 PCIe 上停止了响应，驱动再也无法访问它。其上的所有作业都会终止，之后的错误（GSP 超时、CUDA 错误、"
            "nvidia-smi 卡住）都源于此。典型原因是供电、过热、转接卡或插槽损坏，或 GPU 本身故障。")
    for width in range(24, 90, 3):
        lines = wrap(text, width)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert not any(line[0] in NO_LINE_START for line in lines[1:]), (width, lines)
        assert not any(line[-1] in NO_LINE_END for line in lines), (width, lines)


@pytest.mark.parametrize(("env", "tty", "colour"), [
    ({}, True, True),
    ({}, False, False),
    ({"NO_COLOR": "1"}, True, False),
    ({"TERM": "dumb"}, True, False),
    ({"FORCE_COLOR": "1"}, False, True),
    ({"FORCE_COLOR": "0"}, True, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, False),  # NO_COLOR wins: a user's refusal outranks a request
])
def test_colour_follows_no_color_force_color_and_term(monkeypatch, env, tty, colour):
    from postmortem.render.terminal import wants_color

    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    class Stream:
        def isatty(self) -> bool:
            return tty

    assert wants_color(Stream()) is colour  # type: ignore[arg-type]
    assert wants_color(Stream(), refused=True) is False  # type: ignore[arg-type]


ENGLISH_WORDS = __import__("re").compile(r"(?<![\w.-])[a-z]{3,} [a-z]{3,}(?![\w.-])")
"""Two lowercase English words in a row: the mark of a sentence left untranslated (codes, names and paths are one
token each: gpu-off-bus, reboot-node, nvidia-smi)."""


@pytest.mark.parametrize("token", ["Xid 79", "Xid 48", "Xid 13", "Xid 119", "SXid 12028", "cudaErrorIllegalAddress",
                                   "CUDA_ERROR_OUT_OF_MEMORY", "999"])
def test_explain_in_chinese_has_no_english_sentence_in_it(token):
    done = CliRunner().invoke(main, ["explain", token, "--lang", "zh-CN"], env={"COLUMNS": "100"})
    assert done.exit_code == 0, done.output
    body = "\n".join(done.output.splitlines()[1:])  # the token itself is the reader's
    body = __import__("re").sub(r"“[^”]*”", "", body)  # CUDA's own message, quoted verbatim
    body = __import__("re").sub(r"[（(][ -~]*[）)]", "", body)  # a command in brackets (dcgmi diag -r 3) is typed as is
    assert not ENGLISH_WORDS.search(body), ENGLISH_WORDS.findall(body)


def test_an_input_that_is_not_there_is_a_diagnostic_and_the_others_are_analysed(tmp_path):
    """The README's promise for every input named on the command line, not only for those inside a directory."""
    missing = str(tmp_path / "kern.log.1")
    done = CliRunner().invoke(main, ["analyze", "--format", "json", missing, SAMPLE_5090])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["verdict"]["cause"] == "arch-mismatch"
    assert next(i for i in report["inputs"] if i["path"] == missing)["diagnostics"] == ["no such file; skipped"]
    alone = CliRunner().invoke(main, ["analyze", missing])
    assert alone.exit_code == 2 and "no such file" in alone.output  # nothing at all to read is a usage error


def test_a_fleets_crash_archive_is_refused_with_the_command_that_reads_it(tmp_path):
    """analyze of a directory of many case folders and archives names `fleet scan`; --one-incident reads it anyway;
    a directory of many logs (one per rank) is one job's and is read (issue 30)."""
    archive = tmp_path / "archive"
    line = "[  5.000000] NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.\n"
    for n in range(40):
        (archive / f"case{n}").mkdir(parents=True)
        (archive / f"case{n}" / "dmesg.txt").write_text(line)
    for n in range(25):  # tarballs count as cases too, whatever their names
        with tarfile.open(archive / f"bundle{n}.bin", "w:gz") as tar:
            tar.add(archive / "case0" / "dmesg.txt", arcname="dmesg.txt")
    refused = CliRunner().invoke(main, ["analyze", str(archive)])
    assert refused.exit_code == 2
    assert f"postmortem fleet scan {archive} --db cases.sqlite" in " ".join(refused.output.split())
    (archive / "bundle0.bin").unlink()  # 64 left: at the threshold, one incident
    assert CliRunner().invoke(main, ["analyze", str(archive)]).exit_code == 0
    (archive / "bundle0.bin").write_bytes((archive / "bundle1.bin").read_bytes())
    merged = CliRunner().invoke(main, ["analyze", "--one-incident", "--format", "json", str(archive)])
    assert merged.exit_code == 0 and json.loads(merged.output)["findings"][0]["cause"] == "gpu-off-bus"
    ranks = tmp_path / "job"
    ranks.mkdir()
    for n in range(100):
        (ranks / f"rank{n}.log").write_text(line)
    assert CliRunner().invoke(main, ["analyze", str(ranks)]).exit_code == 0


@pytest.mark.parametrize(("lang", "said"), [("en", "core.zst, byte "), ("zh-CN", "core.zst，第 ")])
def test_a_cores_evidence_is_placed_by_its_byte_in_words_not_at_signs(lang, said):
    """The text and Markdown reports name a binary input's evidence as a path and a byte offset in the report's
    language, not `core.zst@2220` (issue 30: jargon a newcomer could not read)."""
    for fmt in ("text", "markdown"):
        done = run("analyze", "--lang", lang, "--format", fmt, str(SAMPLES / "native-crash-core"))
        assert said in done.output and "core.zst@" not in done.output, done.output
