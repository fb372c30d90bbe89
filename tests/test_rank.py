"""Ranking on real lines: roots above consequences, only where they can be related."""

from __future__ import annotations

from pathlib import Path

from postmortem.pipeline import analyze, analyze_text

CORPUS = Path(__file__).parent / "data"

# Real kernel lines (NVIDIA/gpu-operator#1146 and tinygrad's Xid 31 report, see
# tests/data/kernel_log/SOURCES.md); the tests change only the bus id or the clock.
XID48 = (
    "Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, "
    "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 "
    "partition 7, subpartition 1."
)
XID31 = (
    "Dec  2 {clock} worker4 kernel: [22859.081860] NVRM: Xid (PCI:{pci}): 31, pid=14292, name=python, Ch 00000030, "
    "intr 00000000. MMU Fault: ENGINE HOST0 HUBCLIENT_ESC faulted @ 0x10_00200000. Fault is of type FAULT_PDE "
    "ACCESS_TYPE_VIRT_READ"
)


def by_cause(report):
    return {f.cause: f for f in report.findings}


def test_ecc_on_the_same_gpu_explains_the_mmu_fault():
    report = analyze_text("\n".join([XID48, XID31.format(clock="11:38:52", pci="0000:07:00")]))
    findings = by_cause(report)
    assert report.findings[0].cause == "gpu-memory-ecc"
    assert findings["illegal-memory-access"].consequence_of == report.findings[0].signature
    assert "explains 1 later finding" in report.findings[0].confidence_reason
    assert "consequence" in findings["illegal-memory-access"].confidence_reason


def test_ecc_on_another_gpu_explains_nothing():
    report = analyze_text("\n".join([XID48, XID31.format(clock="11:38:52", pci="0000:01:00")]))
    assert by_cause(report)["illegal-memory-access"].consequence_of is None


def test_a_fault_hours_later_is_not_a_consequence():
    report = analyze_text("\n".join([XID48, XID31.format(clock="14:02:00", pci="0000:07:00")]))
    assert by_cause(report)["illegal-memory-access"].consequence_of is None


def test_a_consequence_never_outranks_its_root():
    later_first = "\n".join([XID31.format(clock="11:38:52", pci="0000:07:00"), XID48])
    report = analyze_text(later_first)
    assert [f.cause for f in report.findings][:2] == ["gpu-memory-ecc", "illegal-memory-access"]


def test_host_oom_explains_the_nccl_timeout_of_other_ranks():
    report = analyze(
        [
            str(CORPUS / "nccl_log" / "timeout-llamafactory.log"),
            str(CORPUS / "kernel_log" / "oomkill-python-dmesg-t-03.dmesg.txt"),
        ]
    )
    findings = by_cause(report)
    assert report.findings[0].cause == "host-oom"
    assert findings["nccl-timeout"].consequence_of == report.findings[0].signature
