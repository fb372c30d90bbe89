"""Consequence links need a causal path, and inputs of several incidents are said to be so (issue 15, item 1).

Every input is real: corpus cases (tests/corpus/*/case.yaml names each source), the cores of
tests/data/core (SOURCES.md), the kernel lines of tests/data/kernel_log and tests/data/join (SOURCES.md).
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from helpers import oom_kill_before_watchdog
from postmortem.pipeline import analyze
from postmortem.render import json_report
from test_schemas import problems

TESTS = Path(__file__).parent
CORPUS = TESTS / "corpus"
DATA = TESTS / "data"
SEGFAULT_OTHER_PROGRAM = DATA / "kernel_log" / "segfault-libnvidia-01.dmesg.txt"  # zed-editor, not the job


def by_signature(report):
    return {f.signature: f for f in report.findings}


@pytest.mark.parametrize("log, core", [
    (CORPUS / "ext-illegal-addr-fa-v100-vllm-worker-01" / "vllm.log", DATA / "core" / "null-write.core.zst"),
    (CORPUS / "inf-illegal-addr-triton-ort-700-01" / "tritonserver.log", DATA / "core" / "torch.core.zst"),
])
def test_an_old_log_a_core_and_another_programs_segfault_are_independent(tmp_path, log, core):
    # as `collect -o b.tar.gz worker.log core` bundles them: one archive, no pid, GPU or rank in common
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        for member in (log, core, SEGFAULT_OTHER_PROGRAM):
            tar.add(member, arcname=member.name)
    report = analyze([str(bundle)])
    causes = {f.cause for f in report.findings}
    assert {"illegal-memory-access", "native-crash"} <= causes
    assert [f.signature for f in report.findings if f.consequence_of or f.consequences] == []
    assert not any("consequence" in f.confidence_reason for f in report.findings)


def test_a_fault_and_the_crash_of_the_same_pid_stay_linked_and_the_reason_names_the_pid():
    join = DATA / "join"
    report = analyze([str(join / "dmesg-ecc-gpu-a-fault-gpu-b.txt"), str(join / "torchrun-sigsegv-flagembedding.log")])
    crash = by_signature(report)["native-crash"]
    assert crash.consequence_of == "xid-31"
    assert "same pid 28773" in crash.confidence_reason


@pytest.mark.parametrize("path, root, gpu", [
    (CORPUS / "inf-nvlink-xid74-vllm-talos-01", "xid-74", "0000:48:00"),
    (DATA / "kernel_log" / "xid79-154-pf-flr-02.dmesg.txt", "xid-79", "0000:01:00"),
])
def test_a_reset_report_on_the_same_gpu_stays_linked_and_the_reason_names_the_gpu(path, root, gpu):
    summary = by_signature(analyze([str(path)]))["xid-154"]
    assert summary.consequence_of == root
    assert f"same GPU {gpu}" in summary.confidence_reason


def test_a_host_oom_kill_explains_other_ranks_timeouts_by_its_documented_chain(tmp_path):
    report = analyze(oom_kill_before_watchdog(tmp_path))
    timeout = by_signature(report)["nccl-watchdog-timeout"]
    assert timeout.consequence_of == "oom-kill"
    assert "a rank killed for host memory leaves the other ranks waiting" in timeout.confidence_reason


CASES = ("drv-xid79-nvsmi-unknown-error-k8s-01", "valm-xid79-titanv-overheat-dmesg-t-01",
         "inf-illegal-addr-triton-ort-700-01", "fw-illegal-addr-alphafold-ts-prefix-01",
         "dist-megatron-swift-ibv-reg-mr-01", "dist-k8s-vllm-dp-nccl-shm-crashloop-01")
"""Unrelated corpus cases: other hosts, other years."""


def test_a_directory_of_unrelated_cases_is_said_to_be_several_incidents(tmp_path):
    for case in CASES:
        shutil.copytree(CORPUS / case, tmp_path / case)
    report = analyze([str(tmp_path)])
    note = report.facts["incidents"][0]
    assert "cannot be one incident" in note and "postmortem scan DIR" in note
    assert sum(note in info.diagnostics for info in report.inputs) == 1
    events = {e.id: e for e in report.events}
    findings = by_signature(report)

    def cases(finding):
        return {Path(events[i].where.path).relative_to(tmp_path).parts[0] for i in finding.evidence}

    for finding in report.findings:
        if finding.consequence_of:  # a link, if any, stays inside one case and names its path
            assert cases(finding) & cases(findings[finding.consequence_of])
            assert "same pid" in finding.confidence_reason or "same GPU" in finding.confidence_reason
    assert all(len(f.consequences) <= 1 for f in report.findings)  # not "explains 4 later findings" across cases
    assert problems("analyze", json.loads(json_report.render(report))) == []


@pytest.mark.parametrize("case", ["drv-gpuburn-k40m-aer-surprise-down-xid79-01", "dist-slurm-oomkill-cgcnn-01"])
def test_the_inputs_of_one_case_are_one_incident(case):
    report = analyze([str(CORPUS / case)])
    assert "incidents" not in report.facts
    assert not any("cannot be one incident" in d for info in report.inputs for d in info.diagnostics)
