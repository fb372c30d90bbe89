"""Ranking on real lines: roots above consequences, only where they can be related."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import oom_kill_before_watchdog
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


def test_host_oom_explains_the_nccl_timeout_of_other_ranks(tmp_path):
    report = analyze(oom_kill_before_watchdog(tmp_path))
    findings = by_cause(report)
    assert report.findings[0].cause == "host-oom"
    assert findings["nccl-timeout"].consequence_of == report.findings[0].signature
    assert "before the" in findings["nccl-timeout"].confidence_reason


def test_a_host_oom_months_before_the_timeout_explains_nothing():
    """Issue 27: glog's year-less stamps (E1206 18:44:12) take the year nearest the OOM kill of Mar 30 2025, which puts
    the timeout months away from it: two incidents, neither the other's cause."""
    report = analyze([str(CORPUS / "nccl_log" / "timeout-llamafactory.log"),
                      str(CORPUS / "kernel_log" / "oomkill-python-dmesg-t-03.dmesg.txt")])
    timeout = by_cause(report)["nccl-timeout"]
    assert timeout.consequence_of is None
    assert timeout.first_seen.startswith("2024-12-06T18:44:12")


def test_root_lists_its_consequences_and_the_reason_has_the_specifics():
    report = analyze_text("\n".join([XID48, XID31.format(clock="11:38:52", pci="0000:07:00")]))
    root, follower = report.findings[0], by_cause(report)["illegal-memory-access"]
    assert root.consequences == (follower.signature,)
    assert "Xid 48 on 0000:07:00.0 at 11:38:47, 5.0 s before the Xid 31 of pid 14292 on the same GPU" in (
        follower.confidence_reason)


# Real lines: an illegal-address error (sticky) then a later CUDA error of the same process, as PyTorch
# prints them (tests/data/framework_log; the Xid 79 line is NVIDIA's documented wording used by kernel.yaml).
STICKY = "RuntimeError: CUDA error: an illegal memory access was encountered"
LATER = "RuntimeError: CUDA error: unspecified launch failure"
XID79 = ("Dec  2 11:38:40 worker4 kernel: [  210.000000] NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', "
         "name=<unknown>, GPU has fallen off the bus.")


def test_a_sticky_error_explains_later_cuda_errors_of_the_same_process():
    report = analyze_text("\n".join([STICKY, "some output", LATER]))
    findings = by_cause(report)
    later = findings["launch-failure"]
    assert later.consequence_of == findings["illegal-memory-access"].signature
    assert "is sticky" in later.confidence_reason


def test_a_later_error_before_the_sticky_one_is_not_its_consequence():
    report = analyze_text("\n".join([LATER.replace("unspecified launch failure", "out of memory"), STICKY]))
    assert all(f.consequence_of is None for f in report.findings if f.cause == "gpu-oom")


def test_after_xid_79_every_later_xid_on_that_gpu_is_a_consequence():
    report = analyze_text("\n".join([XID79, XID31.format(clock="11:38:52", pci="0000:07:00")]))
    findings = by_cause(report)
    assert report.findings[0].cause == "gpu-off-bus"
    assert findings["illegal-memory-access"].consequence_of == report.findings[0].signature


def test_storm_counts_and_times_on_the_finding():
    # one real Xid 31 line repeated 50 times as a faulting job prints it: one finding with count and span
    lines = [XID31.format(clock=f"11:38:{second:02d}", pci="0000:07:00") for second in range(10, 60)]
    report = analyze_text("\n".join(lines))
    finding = by_cause(report)["illegal-memory-access"]
    assert finding.count == 50
    assert finding.first_seen.endswith("11:38:10")
    # kernel_log folds the repeats into one event that keeps the time of the last one too
    assert finding.last_seen.endswith("11:38:59")


def test_oom_reason_names_the_kill(tmp_path):
    report = analyze(oom_kill_before_watchdog(tmp_path))
    timeout = by_cause(report)["nccl-timeout"]
    assert report.findings[0].consequences and timeout.signature in report.findings[0].consequences
    assert "likely a consequence of" in timeout.confidence_reason


# Xid 79 as the driver writes it under dmesg -T (tests/corpus, drv-gpuburn ... xid79), stamped minutes before the
# real watchdog reports of timeout-llamafactory.log (glog: E1206 18:44:12, Timeout(ms)=600000)
XID79_AT = "[{stamp}] NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"


@pytest.mark.parametrize("stamp, linked", [
    ("Fri Dec  6 18:40:12 2024", True),   # 4 min before: inside the wait (data/causal-chains.tsv gpu-off-bus)
    ("Fri Dec  6 18:34:00 2024", True),   # 10 min before: the ranks had waited Timeout(ms)=600000 since
    ("Fri Dec  6 18:20:00 2024", False),  # 24 min before: longer than the watchdog waits, another incident
    ("Tue Dec  3 18:40:12 2024", False),  # three days before
])
def test_a_gpu_off_the_bus_explains_the_watchdog_timeout_within_the_collectives_timeout(tmp_path, stamp, linked):
    (tmp_path / "dmesg.txt").write_text(XID79_AT.format(stamp=stamp))
    report = analyze([str(CORPUS / "nccl_log" / "timeout-llamafactory.log"), str(tmp_path / "dmesg.txt")])
    timeout = next(f for f in report.findings if f.signature == "nccl-watchdog-timeout")
    assert (timeout.consequence_of == "xid-79") is linked
    if linked:
        assert "the rank on the GPU that fell off the bus stopped" in timeout.confidence_reason


def test_a_summary_no_root_explains_comes_before_a_root_of_severity_info():
    """utkuozdemir/nvidia_gpu_exporter#393: a lone ERR! cell (a root of severity info: usually a transient read) and
    the reporter's quote of `GPU Recovery Action : Reset` (a summary whose root was not recognised). The GPU asking
    for a reset is the verdict; the transient reading stays listed after it."""
    from postmortem.pipeline import analyze

    case = Path(__file__).parent / "heldout" / "rnd32" / "rnd32e-gpu-exporter-err-recovery-reset-01" / "issue.md"
    findings = analyze([str(case)]).findings
    assert [f.signature for f in findings] == ["nvsmi-recovery-action", "nvsmi-table-err-single"]
    assert findings[0].severity == "warning" and findings[1].severity == "info"
