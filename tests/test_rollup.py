"""Issue 15: counts and per-GPU rollups in the text and HTML reports, one finding per fault, one spelling of a PCI
address — each on real logs of tests/corpus and tests/given/corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import GIVEN
from postmortem.join import gpu_key
from postmortem.pipeline import analyze
from postmortem.render import html_report, markdown_report, text_report
from postmortem.render.view import gpu_summary

CORPUS = Path(__file__).parent / "corpus"
CASES = GIVEN / "corpus" / "cases"

OFF_BUS = [  # NVRM prints `Xid (PCI:0000:01:00): 79` and then `GPU 0000:01:00.0: GPU has fallen off the bus`
    pytest.param(CORPUS / "valm-xid79-titanv-overheat-dmesg-t-01", "0000:02:00.0", id="titanv-dmesg-t"),
    pytest.param(CORPUS / "valg-offbus-dying-1050ti-proton-journal-01", "0000:01:00.0", id="1050ti-journal"),
    pytest.param(CORPUS / "drv-xid79-nvsmi-unknown-error-k8s-01", "0000:a1:00.0", id="k8s-nvidia-smi"),
    pytest.param(CASES / "xid79-154-pf-flr-02", "0000:01:00.0", id="pf-flr"),
]

TWO_GPUS = [  # several GPUs, each with its own fault
    pytest.param(CASES / "ecc-xid63-64-training-chronicle-01",
                 {"ip-26-0-147-135 0000:90:1c.0": "xid-64", "ip-26-0-146-100 0000:10:1c.0": "xid-63"},
                 id="ecc-two-hosts"),
    pytest.param(CORPUS / "vale-xid94-contained-sm-akash-k8s-01",
                 {"0000:00:08.0": "xid-94", "0000:00:07.0": "xid-31", "0000:00:05.0": "xid-43"}, id="xid94-k8s"),
    pytest.param(CORPUS / "drv-xid119-gsp-rpc-525-01",
                 {"0000:61:00.0": "xid-119-120", "0000:0b:00.0": "xid-154"}, id="gsp-two-gpus"),
]


@pytest.mark.parametrize("spelling", ["0000:3b:00", "0000:3b:00.0", "00000000:3B:00.0", "3b:00.0", "PCI:0000:3b:00"])
def test_every_spelling_of_a_pci_address_is_one(spelling):
    assert gpu_key(spelling) == "0000:3b:00.0"


def test_another_pci_function_stays_another_device():
    assert gpu_key("0000:3b:00.1") == "0000:3b:00.1"
    assert gpu_key("0000:3b:00.12") is None


@pytest.mark.parametrize(("case", "pci"), OFF_BUS)
def test_one_gpu_is_named_one_way_in_facts_explanations_and_reports(case, pci):
    report = analyze([str(case)])
    assert report.facts["pci"] == [pci]
    assert [gpu["pci"] for gpu in report.facts["gpus"]] == [pci]
    assert report.verdict is not None and pci in report.verdict.explanation
    prose = [line for line in text_report.render(report).splitlines() if not line.startswith("    ")]  # evidence
    assert pci in "\n".join(prose)  # is indented by 4: it is shown verbatim, the rest is the tool's words
    short = pci.removesuffix(".0")
    assert not [line for line in prose if short in line.replace(pci, "")]


@pytest.mark.parametrize(("case", "pci"), OFF_BUS)
def test_xid_79_and_its_fallen_off_the_bus_line_are_one_finding(case, pci):
    report = analyze([str(case)])
    off_bus = [f for f in report.findings if f.cause == "gpu-off-bus"]
    assert [f.signature for f in off_bus] == ["xid-79"]
    assert "gpu-off-bus" in off_bus[0].merged
    kinds = {e.kind for e in report.events if e.id in off_bus[0].evidence}
    assert {"xid", "gpu-off-bus"} <= kinds
    assert "the same fault also reported as" in off_bus[0].confidence_reason


@pytest.mark.parametrize("case", [
    pytest.param(CORPUS / "drv-nvls-multicast-fabricmanager-h100-01", id="nvls"),
    pytest.param(CORPUS / "drv-xid149-145-nvlink-xid45-01", id="xid45-after-nvlink"),
    pytest.param(CASES / "nvlink-fabricmanager-12028-03", id="fabric-manager"),
])
def test_two_readings_of_the_same_events_are_one_finding(case):
    report = analyze([str(case)])
    evidence = [frozenset(f.evidence) for f in report.findings]
    assert len(evidence) == len(set(evidence))
    assert any(f.merged for f in report.findings)


def test_summary_reports_of_one_gpu_stay_apart():
    """Xid 45 (channels torn down) and Xid 154 (recovery needed) on one GPU are two facts, not two wordings."""
    report = analyze([str(CORPUS / "inf-nvlink-xid74-vllm-talos-01")])
    assert {"xid-45", "xid-154"} <= {f.signature for f in report.findings}


@pytest.mark.parametrize(("case", "worst"), TWO_GPUS)
def test_each_sick_gpu_has_its_line_under_the_verdict(case, worst):
    report = analyze([str(case)])
    assert {line.gpu: line.finding.signature for line in gpu_summary(report)} == worst
    text = text_report.render(report)
    block = text.split("GPUs with findings")[1].split("\n\n")[0]
    assert text.index("GPUs with findings") < text.index("What to do") < text.index("Other findings")
    for gpu, signature in worst.items():
        assert any(gpu in line and f"[{signature}]" in line for line in block.splitlines())
    page = html_report.render(report)
    assert page.index('id="gpus"') < page.index('id="findings"')
    assert all(gpu in page.split('id="gpus"')[1].split("</section>")[0] for gpu in worst)
    issue = markdown_report.render(report)  # the comment a maintainer reads in the bug report
    listed = issue.split("**GPUs with findings")[1].split("\n\n", 2)[1]
    for gpu, signature in worst.items():
        assert any(gpu in line and f"[`{signature}`]" in line for line in listed.splitlines())


@pytest.mark.parametrize(("case", "pci"), OFF_BUS)
def test_one_sick_gpu_needs_no_gpu_block(case, pci):
    report = analyze([str(case)])
    assert gpu_summary(report) == []
    assert "GPUs with findings" not in text_report.render(report)


@pytest.mark.parametrize(("case", "words"), [
    pytest.param(CORPUS / "drv-xid119-gsp-rpc-525-01", "Xid 119 x 7 on 0000:61:00.0", id="xid119"),
    pytest.param(CASES / "xid13-graphics-exc-vllm-02", "Xid 13 x 6 on 0000:43:00.0", id="xid13"),
    pytest.param(CORPUS / "inf-nvlink-xid74-vllm-talos-01", "Xid 45 x 2 on 0000:48:00.0", id="xid45-other"),
])
def test_counts_per_gpu_are_in_the_text_html_and_markdown_reports(case, words):
    report = analyze([str(case)])
    assert words in text_report.render(report)
    assert words in html_report.render(report)
    assert words in markdown_report.render(report)
