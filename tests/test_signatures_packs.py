"""Signature packs a maintainer writes: lint lists every problem at file:line, a positive example that does not
fire says which condition failed, `show` prints the rule, a pack without translations is one warning.

The packs are written here; their examples are real lines of tests/data (an Xid 31 MMU fault of a python process,
an Xid 13 of vLLM, two torch NCCL watchdog timeouts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from postmortem.cli import main
from postmortem.signatures import SignatureError, default_directory, load, load_default

DATA = Path(__file__).parent / "data"
XID31 = DATA / "kernel_log" / "xid31-fault-pde-tinygrad-01.dmesg.txt"
XID13 = DATA / "kernel_log" / "xid13-graphics-exc-vllm-02.dmesg.txt"
ALLTOALL = DATA / "nccl_log" / "timeout-alltoall.log"
REDUCE_SCATTER = DATA / "nccl_log" / "timeout-llamafactory.log"


def first_line(path: Path, needle: str) -> str:
    """The first line of a real log holding `needle`, quoted for YAML."""
    return json.dumps(next(line for line in path.read_text().splitlines() if needle in line))


def entry(ident: str, match: str, positive: str, negative: str, cause: str = "illegal-memory-access") -> str:
    return f"""  - id: {ident}
    title: {ident} happened
    cause: {cause}
    severity: error
    confidence: 0.7
    match: {match}
    explain: Our own rule fired on {{pci}}.
    actions: [Ask the platform team]
    examples:
      positive: [{positive}]
      negative: [{negative}]
"""


GOOD = "signatures:\n" + entry(
    "site-python-mmu-fault", "{kind: xid, fields: {xid: 31, process: python}}",
    first_line(XID31, "Xid"), first_line(XID13, "Xid")) + entry(
    "site-alltoall-timeout", "{kind: nccl-timeout, fields: {op_type: {regex: ALLTOALL}}}",
    first_line(ALLTOALL, "ALLTOALL"), first_line(REDUCE_SCATTER, "Watchdog"), cause="nccl-timeout")

SILENT = "signatures:\n" + entry(  # the Xid 31 of the example is a python process's, not pytorch's
    "site-pytorch-mmu-fault", "{kind: xid, fields: {xid: 31, process: pytorch}}",
    first_line(XID31, "Xid"), first_line(XID13, "Xid"))


def pack(tmp_path: Path, name: str, **files: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for file, text in files.items():
        (folder / f"{file}.yaml").write_text(text)
    return folder


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_a_good_pack_lints_clean_with_one_warning_for_its_missing_translations(tmp_path):
    good = pack(tmp_path, "good", site=GOOD)
    result = invoke("signatures", "lint", "--signatures", str(good))
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("0 problem(s)")
    warnings = result.stderr.splitlines()
    assert warnings == [f"postmortem: warning: signature pack {good.resolve()}: no zh-CN words for 2 signature(s) "
                        "(site-python-mmu-fault, site-alltoall-timeout); zh-CN reports show them in English"]


def test_a_pack_finding_in_a_chinese_report_is_english_with_one_warning(tmp_path):
    from postmortem.pipeline import analyze
    from postmortem.render.i18n import Translator
    from postmortem.signatures import match

    good = pack(tmp_path, "good", site=GOOD)
    database = load(default_directory(), good)
    for log, signature in ((XID31, "site-python-mmu-fault"), (ALLTOALL, "site-alltoall-timeout")):
        result = invoke("analyze", "--lang", "zh-CN", "--signatures", str(good), str(log))
        assert result.exit_code == 0, result.output
        assert [line for line in result.stderr.splitlines() if str(good.resolve()) in line] == [
            f"postmortem: warning: signature pack {good.resolve()}: no zh-CN words for 2 signature(s) "
            "(site-python-mmu-fault, site-alltoall-timeout); zh-CN reports show them in English"]
        report = analyze([str(log)], database)
        finding = next(f for f in match(database, report.events) if f.signature == signature)
        assert Translator("zh-CN").words(finding, report).title == f"{signature} happened"
    english = invoke("analyze", "--lang", "en", "--signatures", str(good), str(XID31))
    assert english.exit_code == 0 and "zh-CN" not in english.stderr


BROKEN = f"""signatures:
  - id: site-bad-severity
    title: t
    cause: gpu-hang
    severity: fatal
    confidence: 2
    colour: red
    match: {{kind: xid}}
    explain: x
    actions: [y]
    examples: {{positive: [{first_line(XID13, "Xid")}], negative: [nothing]}}
{entry("site-unknown-cause", "{kind: xid}", first_line(XID13, "Xid"), "nothing", cause="cosmic-rays")}\
{entry("site-bad-regex", "{kind: xid, text: '(unclosed'}", first_line(XID13, "Xid"), "nothing")}\
{entry("site-unknown-operator", "{fields: {xid: {between: 3}}}", first_line(XID13, "Xid"), "nothing")}"""


def test_lint_reports_every_problem_at_once_with_file_and_line(tmp_path):
    broken = pack(tmp_path, "broken", a=BROKEN, b="signatures: [\n", c=SILENT)
    result = invoke("signatures", "lint", "--signatures", str(broken))
    assert result.exit_code == 1
    a, b, c = (broken / f"{name}.yaml" for name in "abc")
    lines = result.stdout.splitlines()
    for expected in (f"{a}:5: site-bad-severity: severity 'fatal' must be one of",
                     f"{a}:6: site-bad-severity: confidence 2 must be a number in (0, 1]",
                     f"{a}:7: site-bad-severity: unknown key 'colour'",
                     f"{a}:12: site-unknown-cause: cause 'cosmic-rays' is not in the cause vocabulary",
                     f"{a}:28: site-bad-regex: bad match:",
                     f"{a}:39: site-unknown-operator: bad match: field xid: unknown operator 'between'",
                     f"{b}:2: not valid YAML",
                     f"{c}:11: site-pytorch-mmu-fault: positive example 1 does not fire"):
        assert sum(line.startswith(expected) for line in lines) == 1, (expected, result.stdout)
    assert lines[-1].endswith("8 problem(s)")
    assert "match:" in a.read_text().splitlines()[27] and "between" in a.read_text().splitlines()[38]
    # the loader says the same, all at once, and stops analyze as a usage error
    with pytest.raises(SignatureError) as error:
        load(default_directory(), broken)
    assert len(error.value.flaws) == 7 and str(error.value).count("\n") == 6
    analysed = invoke("analyze", "--signatures", str(broken), str(XID13))
    assert analysed.exit_code == 2 and "site-bad-regex" in analysed.output and "site-unknown-cause" in analysed.output
    # usage errors, unlike problems found, exit 2
    assert invoke("signatures", "lint", "--signatures", str(tmp_path / "absent")).exit_code == 2
    assert invoke("signatures", "lint", "--no-such-option").exit_code == 2


def test_a_positive_example_that_does_not_fire_says_which_condition_failed(tmp_path):
    silent = pack(tmp_path, "silent", site=SILENT)
    result = invoke("signatures", "lint", "--signatures", str(silent))
    assert result.exit_code == 1
    shown = result.stdout.splitlines()
    at = shown.index(next(line for line in shown if "positive example 1 does not fire" in line))
    assert shown[at + 1].startswith("    closest of 1 event(s): xid at example.log:1: "
                                    "'[22859.081860] NVRM: Xid (PCI:0000:01:00): 31, pid=14292")
    assert shown[at + 2:at + 6] == ["    FAILS: all of",
                                    "      holds: kind is xid (the event's kind is xid)",
                                    "      holds: field xid is 31 (xid = 31)",
                                    "      FAILS: field process is pytorch (process = 'python')"]


def test_explain_match_traces_a_signature_on_real_logs(tmp_path):
    silent = pack(tmp_path, "silent", site=SILENT)
    missed = invoke("signatures", "explain-match", "--signatures", str(silent), "site-pytorch-mmu-fault", str(XID31))
    assert missed.exit_code == 1
    assert "FAILS: field process is pytorch (process = 'python')" in missed.stdout
    other = invoke("signatures", "explain-match", "--signatures", str(silent), "site-pytorch-mmu-fault", str(XID13))
    assert other.exit_code == 1
    assert "FAILS: field xid is 31 (xid = 13)" in other.stdout
    assert "FAILS: field process is pytorch (the event has no field process" in other.stdout
    assert invoke("signatures", "explain-match", "no-such-id", str(XID31)).exit_code == 2
    fired = invoke("signatures", "explain-match", "xid-31", str(XID31))
    assert fired.exit_code == 0 and "the signature fires" in fired.stdout
    regex_rule = invoke("signatures", "explain-match", "--signatures", str(pack(tmp_path, "good", site=GOOD)),
                        "site-alltoall-timeout", str(REDUCE_SCATTER))
    assert regex_rule.exit_code == 1
    assert "FAILS: field op_type matches /ALLTOALL/ (op_type: not in '_REDUCE_SCATTER_BASE')" in regex_rule.stdout


def test_a_trace_uses_the_same_tests_as_matching():
    """Every bundled signature's trace on its own positive example agrees with its condition, part by part."""
    from postmortem.lint import example_report
    from postmortem.signatures import trace

    root = Path(__file__).parent.parent
    for signature in load_default().signatures:
        report = example_report(signature.examples["positive"][0], root)
        for event in report.events if report is not None else ():
            assert trace(signature.rule, event)[0].held == signature.condition(event)


def test_show_prints_the_match_condition_as_written(tmp_path):
    good = pack(tmp_path, "good", site=GOOD)
    for signature_id, extra in (("xid-79", ()), ("site-alltoall-timeout", ("--signatures", str(good)))):
        result = invoke("signatures", "show", *extra, signature_id)
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("  match ("))
        where = lines[at].removeprefix("  match (").removesuffix("):")
        path, line = where.rsplit(":", 1)
        assert Path(path).read_text().splitlines()[int(line) - 1].lstrip().startswith("match:")
        block = [line for line in lines[at + 1:] if line.startswith("    ")]
        signature = next(s for s in load(default_directory(), good).signatures if s.id == signature_id)
        assert yaml.safe_load("\n".join(block)) == signature.match
