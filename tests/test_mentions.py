"""The reader of last resort (sources/mentions.py): known codes and phrases in layouts no format reader reads.

Every text here is real: a Kubernetes device plugin's health line (tests/corpus), TensorFlow's driver diagnostics
and nvidia-installer's Secure Boot prompt (tests/heldout/rnd1, from their public threads), gpud's own test data for
the negative wordings (../shared/peer-data/gpud/cases.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from postmortem.cli import main
from postmortem.model import LOOSE
from postmortem.pipeline import analyze, analyze_text
from postmortem.sources import mentions
from shared_checkout import SHARED

HERE = Path(__file__).parent
DEVICE_PLUGIN = HERE / "corpus" / "vale-xid94-contained-sm-akash-k8s-01" / "nvdp-device-plugin.log"
RND1 = HERE / "heldout" / "rnd1"


def test_an_xid_in_a_device_plugins_health_line_is_an_xid_event_read_loosely():
    """`XidCriticalError: Xid=94 on Device=GPU-...` (k8s-device-plugin's health.go): no format reader knows the
    layout; the code is the catalog's, so it is the Xid 94 event kernel_log would make, marked loose, and the
    finding it proves says so and is trusted less than the same Xid from the kernel log."""
    report = analyze([str(DEVICE_PLUGIN)])
    loose = [e for e in report.events if e.kind == "xid" and e.fields.get("read") == LOOSE]
    assert {e.fields["xid"] for e in loose} == {94}
    finding = next(f for f in report.findings if f.signature == "xid-94")
    assert "read loosely" in finding.confidence_reason
    kernel = analyze_text("[ 7.1] NVRM: Xid (PCI:0000:3b:00): 94, pid=12, name=python, Contained: SM (0x1).\n")
    same = next(f for f in kernel.findings if f.signature == "xid-94")
    assert finding.confidence < same.confidence
    assert not any(e.fields.get("read") == LOOSE for e in kernel.events)  # the format reader's line is its own


def test_negated_and_codeless_mentions_are_kept_as_unread_with_their_reason():
    """gpud's negative test wordings: "Regular log content without Xid errors", "no XID error"."""
    texts = ["Regular log content without Xid errors", "no XID error"]
    peer = SHARED / "peer-data" / "gpud" / "cases.json"
    if peer.is_file():  # where the shared checkout is here, the wordings are gpud's own
        assert all(t in peer.read_text(encoding="utf-8") for t in texts)
    report = analyze_text("\n".join(texts) + "\n")
    assert not report.findings
    assert not [e for e in report.events if e.kind == "xid"]
    [info] = report.inputs
    assert [u.line for u in info.unread] == [1, 2]
    assert {u.reason for u in info.unread} <= {mentions.NEGATED, mentions.NO_CODE}


def test_a_number_the_catalog_does_not_know_is_no_event():
    report = analyze_text("health check: Xid 999 on GPU 0\nCUDNN_STATUS_SUCCESS returned\n")
    assert not [e for e in report.events if e.kind in ("xid", "library-error")]
    assert [u.reason for u in report.inputs[0].unread] == [mentions.UNKNOWN_CODE, mentions.HEALTHY]


def test_a_table_phrase_is_found_across_the_lines_a_paste_wrapped_it_on():
    """TensorFlow's diagnostics line (tensorflow/tensorflow#4768) cut in two where a terminal wrapped it, and the
    same words behind a quote marker: one driver-mismatch finding, on the lines of the phrase."""
    line = next(m for m in (RND1 / "rnd1drv-tf-kernel-dso-mismatch-01" / "train.log").read_text().splitlines()
                if "does not match DSO version" in m)
    cut = line.index("does not match")
    for text in (line[:cut] + "\n" + line[cut:] + "\n", "> " + line + "\n"):
        report = analyze_text(text)
        assert report.findings[0].signature == "phrase-driver-mismatch"
        [event] = [e for e in report.events if e.kind == "cause-phrase"]
        assert event.fields["cause"] == "driver-mismatch" and event.fields["read"] == LOOSE


def test_a_phrase_with_a_gap_reads_the_installers_secure_boot_prompt():
    """nvidia-installer's log: Secure Boot is on and the answer was to install without signing."""
    report = analyze([str(RND1 / "rnd1drv-gpuop-secureboot-unsigned-01")])
    phrases = {e.fields["phrase"].split()[0] for e in report.events if e.kind == "cause-phrase"}
    assert report.findings[0].cause == "driver-mismatch"
    assert {"Secure", "Kernel"} <= phrases


def test_unread_lines_are_in_json_and_behind_debug_in_text(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("Regular log content without Xid errors\n")
    runner = CliRunner()
    data = json.loads(runner.invoke(main, ["analyze", "--format", "json", str(path)]).output)
    assert data["inputs"][0]["unread"] == [{"line": 1, "text": "Regular log content without Xid errors",
                                            "reason": mentions.NO_CODE}]
    plain = runner.invoke(main, ["analyze", str(path)]).output
    debug = runner.invoke(main, ["analyze", "--debug", str(path)]).output
    assert "not read" not in plain
    assert f"line 1 not read ({mentions.NO_CODE}): Regular log content without Xid errors" in debug


def test_every_phrase_row_has_an_anchor_it_holds_and_a_signature_for_its_cause():
    from postmortem.signatures import load_default

    causes = {s.cause for s in load_default().signatures if s.id.startswith("phrase-")}
    for phrase in mentions.phrases():
        assert phrase.anchor.lower() in phrase.text.lower(), phrase.text
        assert phrase.cause in causes, phrase.text
