"""Explanation prose never shows a reader a placeholder: a fact the inputs do not give drops its clause.

Every template of the bundled signatures and of their translations is checked structurally (each
placeholder sits inside a `[[...]]` part) and as rendered with no fields at all; real inputs that lack
a field (a code given to `explain` alone, a panic without an MCE bank line) show the rest of the sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import regex
from click.testing import CliRunner

from helpers import GIVEN
from postmortem.cli import main
from postmortem.render.i18n import LANGUAGES, signature_catalog
from postmortem.signatures import bare_placeholders, load_default, render_explanation

DATA = Path(__file__).parent / "data"
PEERS = GIVEN / "peer-data"

LEFTOVER = regex.compile(r"\?|？|[{}]|<\w+>|(?<!\w)\(\s*\)|（\s*）|\bNone\b| [ ,.;:)]|^\s|\s$")
"""What a dropped or unfilled field would leave behind: `?`, a brace, `<name>`, empty brackets, doubled or dangling
spaces."""

_DATABASE = load_default()
TEMPLATES = [("en", s.id, s.explain) for s in _DATABASE.signatures] + [
    (lang, sid, str(entry["explain"]))
    for lang in LANGUAGES[1:] for sid, entry in signature_catalog(lang)["signatures"].items()
]


@pytest.mark.parametrize(("lang", "signature", "template"), TEMPLATES, ids=[f"{t[0]}:{t[1]}" for t in TEMPLATES])
def test_every_placeholder_is_optional(lang: str, signature: str, template: str) -> None:
    assert bare_placeholders(template) == []


@pytest.mark.parametrize(("lang", "signature", "template"), TEMPLATES, ids=[f"{t[0]}:{t[1]}" for t in TEMPLATES])
def test_explanation_without_fields_reads_clean(lang: str, signature: str, template: str) -> None:
    prose = render_explanation(" ".join(template.split()) if lang == "en" else template, {})
    assert not LEFTOVER.search(prose), prose


def test_optional_parts_keep_what_is_known() -> None:
    template = "stopped[[ ([[bank {bank}, ]]CPU {cpu})]] there"
    assert render_explanation(template, {"bank": 4, "cpu": 3}) == "stopped (bank 4, CPU 3) there"
    assert render_explanation(template, {"cpu": 3}) == "stopped (CPU 3) there"
    assert render_explanation(template, {"bank": 4}) == "stopped there"


@pytest.mark.parametrize("code", ["Xid 79", "Xid 48", "Xid 16", "SXid 12028", "cudaErrorIllegalAddress"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_explain_a_code_alone_shows_no_placeholder(code: str, lang: str) -> None:
    result = CliRunner().invoke(main, ["explain", "--lang", lang, code], catch_exceptions=False)
    assert result.exit_code == 0
    assert "cause " in result.output or "原因" in result.output
    assert not regex.search(r"<\w+>|\?|？|\{\w+\}", result.output), result.output


def test_explain_xid_79_drops_the_address_it_does_not_have() -> None:
    output = CliRunner().invoke(main, ["explain", "Xid 79"], catch_exceptions=False).output
    assert "The GPU stopped answering on PCIe" in " ".join(output.split())


def _explanations(path: Path) -> dict[str, str]:
    result = CliRunner().invoke(main, ["analyze", "--format", "json", str(path)], catch_exceptions=False)
    return {f["signature"]: f["explanation"] for f in json.loads(result.output)["findings"]}


def test_fatal_machine_check_without_bank_keeps_the_cpu(tmp_path: Path) -> None:
    """gpud's kmsg test case: a panic naming the CPU but printing no MCE bank line."""
    cases = json.loads((PEERS / "gpud" / "cases.json").read_text())
    case = next(c for c in cases if c["name"] == "Test Case 8 - Fatal Machine check")
    log = tmp_path / "kmsg.log"
    log.write_text("\n".join(case["lines"]) + "\n")
    explanation = _explanations(log)["mce-fatal"]
    assert "could not recover from (CPU 3) and" in explanation
    assert not LEFTOVER.search(explanation)


def test_panic_with_a_bank_shows_bank_and_cpu() -> None:
    explanation = _explanations(DATA / "kernel_log" / "mce-fatal-kdump-04.vmcore-dmesg.txt")["mce-fatal"]
    assert regex.search(r"\(bank \d+, CPU \d+\)", explanation), explanation


def test_nvidia_smi_ecc_counts_absent_drop_their_clause() -> None:
    explanation = _explanations(PEERS / "azurehpc" / "test" / "data" / "bad_nvsmi8_output.txt")[
        "nvsmi-ecc-uncorrectable"]
    assert "has counted uncorrectable ECC errors in its memory." in explanation
    assert not LEFTOVER.search(explanation)



@pytest.mark.parametrize("token", ["Xid 99999", "cudaErrorNoSuchThing", "no such thing at all"])
def test_explain_exits_1_for_what_it_does_not_know(token: str) -> None:
    result = CliRunner().invoke(main, ["explain", token], catch_exceptions=False)
    assert result.exit_code == 1
    assert "not a documented code" in result.output or "no code or known message recognised" in result.output


def test_explain_exits_1_when_one_pasted_line_is_unknown() -> None:
    lines = (DATA / "inputs" / "offbus-dmesg.txt").read_bytes().splitlines()[0] + b"\nnothing to see here\n"
    result = CliRunner().invoke(main, ["explain", "-"], input=lines, catch_exceptions=False)
    assert result.exit_code == 1 and "cause gpu-off-bus" in result.output


def test_explain_lang_writes_the_findings_in_that_language() -> None:
    result = CliRunner().invoke(main, ["explain", "--lang", "zh-CN", "Xid 79"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "GPU 在 PCIe 上停止了响应" in result.output
    assert CliRunner().invoke(main, ["explain", "--lang", "fr", "Xid 79"]).exit_code == 2
