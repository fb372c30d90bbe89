"""The join stage: pids, GPUs, ranks and clocks joined across inputs (tests/data/join/SOURCES.md)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import pytest

from postmortem.facts import collect_gpus
from postmortem.join import gpu_key, nccl_suspects
from postmortem.pipeline import analyze

DATA = Path(__file__).parent / "data"
JOIN = DATA / "join"


def run(*names: str):
    return analyze([str(JOIN / name) if "/" not in name else str(DATA / name) for name in names])


def kinds(report, kind):
    return [e for e in report.events if e.kind == kind]


def by_signature(report):
    return {f.signature: f for f in report.findings}


@pytest.mark.parametrize("spelling", ["0000:3b:00", "0000:3b:00.0", "00000000:3B:00.0", "3b:00", "PCI:0000:3b:00"])
def test_one_spelling_per_gpu(spelling):
    assert gpu_key(spelling) == "0000:3b:00.0"


@pytest.mark.parametrize("junk", [None, "", "'<unknown>'", "GPU-af4f89ae", "0000:zz:00"])
def test_no_gpu_from_junk(junk):
    assert gpu_key(junk) is None


def test_xid_pid_joins_the_crashed_rank_to_its_gpu():
    report = run("dmesg-ecc-gpu-a-fault-gpu-b.txt", "torchrun-sigsegv-flagembedding.log")
    child = kinds(report, "child-failed")[0]
    assert child.fields["pid"] == 28773 and child.fields["rank"] == 0
    assert child.fields["pci"] == "0000:08:00.0" and child.fields["process"] == "python"
    assert child.fields["joined"]["pci"] == "xid pid 28773 (%s:2)" % (JOIN / "dmesg-ecc-gpu-a-fault-gpu-b.txt")
    xid31 = next(e for e in kinds(report, "xid") if e.fields["xid"] == 31)
    assert xid31.fields["rank"] == 0 and "child-failed pid 28773" in xid31.fields["joined"]["rank"]
    xid48 = next(e for e in kinds(report, "xid") if e.fields["xid"] == 48)
    assert "pid" not in xid48.fields and "joined" not in xid48.fields  # pid='<unknown>' joins nothing


def test_ecc_on_another_gpu_does_not_explain_the_crash_joined_to_gpu_b():
    findings = by_signature(run("dmesg-ecc-gpu-a-fault-gpu-b.txt", "torchrun-sigsegv-flagembedding.log"))
    assert findings["native-crash"].consequence_of == "xid-31"  # the fault on its own GPU, not the ECC on 07:00
    assert "explains" not in findings["xid-48"].confidence_reason


def test_ecc_on_the_same_gpu_explains_the_crash():
    findings = by_signature(run("dmesg-ecc-and-fault-one-gpu.txt", "torchrun-sigsegv-flagembedding.log"))
    assert findings["native-crash"].consequence_of == "xid-48"
    assert findings["xid-31"].consequence_of == "xid-48"


def test_one_host_labels_the_other_inputs():
    report = run("dmesg-ecc-gpu-a-fault-gpu-b.txt", "torchrun-sigsegv-flagembedding.log")
    traceback = kinds(report, "python-exception")[0]
    assert traceback.fields["host"] == "worker4"
    assert traceback.fields["joined"]["host"] == "the only host named in the inputs"


def test_xid109_pid_names_the_pytorch_main_thread(tmp_path):
    """xid13-109-pt-main-thread: only the Xid 109 names a pid; a torchrun line with that pid (pid changed) joins it."""
    torchrun = (DATA / "framework_log" / "torchrun-sigsegv-flagembedding-02.log").read_text()
    torchrun = torchrun.replace("28773", "1797828")
    (tmp_path / "train.log").write_text(torchrun)
    report = analyze([str(DATA / "kernel_log" / "xid13-109-pt-main-thread-05.dmesg.txt"), str(tmp_path / "train.log")])
    child = kinds(report, "child-failed")[0]
    assert (child.fields["process"], child.fields["pci"]) == ("pt_main_thread", "0000:cb:00.0")
    assert all("rank" not in e.fields for e in kinds(report, "xid") if e.fields["xid"] == 13)


def test_a_year_less_anchor_places_no_uptime():
    """A syslog stamp without a year is no date: the same record's uptime is not put on the wall clock by it."""
    report = run("syslog-anchor.txt", "dmesg-same-record.txt")
    dmesg, syslog = sorted(kinds(report, "xid"), key=lambda e: e.where.path)
    assert (syslog.time, syslog.clock, syslog.fields["stamp"]) == (None, "wall-no-year", "Nov 22 14:56:44")
    assert dmesg.time is None and dmesg.fields["uptime"] == 94555.57331


def test_dmesg_uptime_placed_once_another_input_gives_the_year():
    """A dmesg -T log of the incident (Oct 2024) lends the year-less syslog its year; the syslog then anchors the
    dmesg's boot, and both say from where."""
    report = run("syslog-anchor.txt", "dmesg-same-record.txt", "kernel_log/xid45-hung-task-nvsmi-02.dmesg.txt")
    syslog = next(e for e in kinds(report, "xid") if e.where.path.endswith("syslog-anchor.txt"))
    dmesg = next(e for e in kinds(report, "xid") if e.where.path.endswith("dmesg-same-record.txt"))
    assert (syslog.time, syslog.clock) == (datetime(2024, 11, 22, 14, 56, 44), "wall")
    assert syslog.fields["joined"]["time"].startswith("year 2024 from ") and "xid45-hung-task" in \
        syslog.fields["joined"]["time"] and "stamp" not in syslog.fields
    assert dmesg.clock == "uptime+boot" and dmesg.time.replace(microsecond=0) == syslog.time
    assert "syslog-anchor.txt:1 (the same record)" in dmesg.fields["joined"]["time"]


def test_the_nearest_year_across_new_year():
    """A Sep 19 syslog beside a dated log of Mar 6 2023 is of Sep 2022 (168 days before), not of Sep 2023; a real
    AER report of another day."""
    report = run("kernel_log/aer-correctable-gpu-port-01.syslog.txt", "kernel_log/xid119-gsp-timeout-02.dmesg.txt")
    aer = kinds(report, "pcie-aer")[0]
    assert aer.time == datetime(2022, 9, 19, 16, 18, 2) and "xid119-gsp-timeout" in aer.fields["joined"]["time"]


def test_uptimes_alone_stay_off_the_wall_clock():
    report = run("dmesg-same-record.txt", "kernel_log/xid31-fault-pde-tinygrad-01.dmesg.txt")
    assert all(e.time is None for e in report.events)


def test_cuda_ordinal_joins_nvidia_smi_gpu_of_identical_gpus():
    report = run("nvsmi-q-two-a10.txt", "tf-ecc-device-ordinal-0.log")
    error = kinds(report, "cuda-error")[0]
    assert error.fields["pci"] == "0000:07:00.0"
    assert "identical GPUs, no CUDA_VISIBLE_DEVICES" in error.fields["joined"]["pci"]


def test_facts_list_each_gpu_once_with_its_identities():
    report = run("nvsmi-q-two-a10.txt", "dmesg-ecc-gpu-a-fault-gpu-b.txt")
    gpus = report.facts["gpus"]
    assert [(g["pci"], g.get("index"), g.get("uuid", "")[-3:]) for g in gpus] == [
        ("0000:07:00.0", 0, "736"), ("0000:08:00.0", 1, "737")]
    assert gpus[0]["name"] == "NVIDIA A10"
    assert report.facts["pci"][:2] == ["0000:07:00.0", "0000:08:00.0"]  # the old keys stay


def test_facts_gpu_from_nvrm_line_and_arch_warning():
    report = analyze([str(DATA / "kernel_log" / "xid31-fault-pde-tinygrad-01.dmesg.txt"),
                      str(DATA / "framework_log" / "sm120-lora-trainer-05.log")])
    gpus = collect_gpus(report.events)
    assert gpus[0] == {"pci": "0000:01:00.0", "uuid": "GPU-af4f89ae-d08b-1b53-9938-c9ed209a3513",
                       "serial": "1710424007242"}
    assert any(g.get("sm") == "sm_120" for g in gpus[1:])


def test_nccl_suspect_is_the_rank_behind():
    report = run("nccl-one-rank-behind.log")
    suspect = kinds(report, "nccl-suspect")[0]
    assert suspect.fields["suspect_rank"] == 4
    assert [r["rank"] for r in suspect.fields["per_rank"]] == [0, 3, 4]
    assert suspect.fields["suspect_doing"] == (
        "rank 4: waiting in _REDUCE_SCATTER_BASE SeqNum=7752 for 600099 ms, last completed 7751")
    finding = report.findings[0]
    assert finding.signature == "nccl-suspect-rank" and finding.cause == "nccl-timeout"
    assert "one rank stopped before the others: rank 4 (" in finding.explanation


def test_symmetric_ranks_have_no_single_suspect():
    report = run("nccl_log/timeout-llamafactory.log")
    suspect = kinds(report, "nccl-suspect")[0]
    assert suspect.fields["suspect_rank"] is None
    assert suspect.fields["ranks"] == [0, 3, 4]
    assert suspect.fields["reason"].startswith("no single suspect: ranks 0, 3, 4 stopped at the same point")
    assert "nccl-suspect-rank" not in by_signature(report)


def test_sub_group_sequence_numbers_are_not_compared():
    report = run("nccl_log/timeout-alltoall.log")
    assert not kinds(report, "nccl-suspect")


def test_a_rank_that_failed_instead_of_waiting_is_the_suspect():
    """Llamafactory's timeouts (ranks 0, 3, 4) with a torchrun child failure of rank 1 (rank changed from 0)."""
    report = run("nccl_log/timeout-llamafactory.log", "torchrun-sigsegv-flagembedding.log")
    events = [e for e in report.events if e.kind != "nccl-suspect"]
    failed = [e for e in events if e.kind == "child-failed"]
    relabelled = [dataclasses.replace(e, fields={**e.fields, "rank": 1}) if e in failed else e for e in events]
    suspect = nccl_suspects(relabelled)[0]
    assert suspect.fields["suspect_rank"] == 1
    assert "logged no watchdog timeout but failed on its own (child-failed" in suspect.fields["reason"]


def test_symmetric_ranks_name_who_reported_first_and_last():
    suspect = kinds(run("nccl_log/timeout-llamafactory.log"), "nccl-suspect")[0]
    assert suspect.fields["first_report"] == {"rank": 0, "stamp": "1206 18:44:12.715298"}
    assert suspect.fields["last_report"] == {"rank": 3, "stamp": "1206 18:44:13.275158"}
    assert "rank 3 was the last to report its timeout (1206 18:44:13.275158)" in suspect.fields["reason"]
    assert [r["ran_ms"] for r in suspect.fields["per_rank"]] == [600061, 600089, 600099]  # each rank its own


def test_rank_behind_within_one_folded_timeout(tmp_path):
    """Same SeqNum on every rank, but rank 4's watchdog line says it completed less (edited from the real log).

    Before per-rank details the fold kept one rank's progress for all, so no rank could stand out."""
    text = (DATA / "nccl_log" / "timeout-llamafactory.log").read_text().replace(
        "[PG 1 Rank 4] Exception (either an error or timeout) detected by watchdog at work: 7753, "
        "last enqueued NCCL work: 7755, last completed NCCL work: 7752.",
        "[PG 1 Rank 4] Exception (either an error or timeout) detected by watchdog at work: 7753, "
        "last enqueued NCCL work: 7753, last completed NCCL work: 7751.")
    (tmp_path / "train.log").write_text(text)
    suspect = kinds(analyze([str(tmp_path / "train.log")]), "nccl-suspect")[0]
    assert suspect.fields["suspect_rank"] == 4
    assert suspect.fields["suspect_doing"] == (
        "rank 4: waiting in _REDUCE_SCATTER_BASE SeqNum=7753 for 600099 ms, last completed 7751")


@pytest.mark.parametrize("visible", ["1", "GPU-73d12ef7-f589-f867-4259-c7090ab44737"])
def test_core_cuda_visible_devices_names_its_gpu(tmp_path, visible):
    """A real core made with CUDA_VISIBLE_DEVICES naming the second A10 (by index or UUID) joins that GPU."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed: the crashing program cannot be built")
    from test_core import crash

    core = crash(tmp_path / "job", "crash", env={"CUDA_VISIBLE_DEVICES": visible})
    report = analyze([str(core), str(JOIN / "nvsmi-q-two-a10.txt")])
    [signal] = kinds(report, "core-signal")
    assert signal.fields["cuda_visible_devices"] == visible
    assert signal.fields["pci"] == "0000:08:00.0"
    assert signal.fields["joined"]["pci"].startswith(f"CUDA device 0 -> CUDA_VISIBLE_DEVICES={visible}")


# ------------------------------------------------------------------ issue 13: clocks at the calendar's edge

def test_an_absurd_uptime_joined_to_a_boot_stays_off_the_clock(tmp_path):
    """A dmesg line of 3e11 s uptime and a syslog anchor of that boot: boot + 3e11 s is past year 9999,
    so the line keeps no time instead of failing the analysis."""
    (tmp_path / "syslog").write_text(
        "Sep 18 20:07:01 node1 kernel: [   10.000000] NVRM: Xid "
        "(PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
    (tmp_path / "dmesg").write_text("[300000000000.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception\n")
    report = analyze([str(tmp_path / "syslog"), str(tmp_path / "dmesg")])
    [late] = [e for e in kinds(report, "xid") if e.fields["xid"] == 13]
    assert late.time is None and late.clock is None


def test_zoned_and_naive_anchors_prove_no_boot(tmp_path):
    """One input stamps in UTC, another without a zone: their boots cannot be compared, so nothing is placed."""
    (tmp_path / "journal").write_text(
        "2024-09-18T20:07:01+00:00 node1 kernel: [   10.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, x.\n")
    (tmp_path / "syslog").write_text(
        "2024-09-18 20:07:05 node1 kernel: [   14.000000] NVRM: Xid (PCI:0000:3b:00): 31, pid=1, Ch 8.\n")
    (tmp_path / "dmesg").write_text("[   20.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception\n")
    report = analyze([str(tmp_path / name) for name in ("journal", "syslog", "dmesg")])
    [dmesg] = [e for e in kinds(report, "xid") if e.fields["xid"] == 13]
    assert dmesg.time is None
