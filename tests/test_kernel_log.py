"""Kernel-log source: prefixes, clocks, every event kind, folding, and the corpus cases of this format.

All inputs are real public text from tests/data/kernel_log (see SOURCES.md).
The source is run alone (its own prefilter), so these tests do not depend on
what other sources make of the same lines.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from helpers import GIVEN, parse_alone
from postmortem import model, pipeline
from postmortem.model import Event, to_plain
from postmortem.sources import card_of, kernel_log

DATA = Path(__file__).parent / "data" / "kernel_log"
CORPUS = GIVEN / "corpus" / "cases"


def parse_text(text: str) -> list[Event]:
    return parse_alone(kernel_log, text.encode("utf-8"), use_hyperscan=False)


def parse_file(name: str) -> list[Event]:
    return parse_text((DATA / name).read_text(encoding="utf-8"))


def only(events: list[Event], kind: str) -> Event:
    matching = [e for e in events if e.kind == kind]
    assert len(matching) == 1, [(e.kind, dict(e.fields)) for e in events]
    return matching[0]


# --- Xid ---------------------------------------------------------------------------------
def test_xid13_dmesg_ctime_with_quote_prefix():
    events = parse_file("xid13-109-pt-main-thread-05.dmesg.txt")
    assert [(e.kind, e.fields["xid"]) for e in events] == [("xid", 13)] * 3 + [("xid", 109)]
    warp = events[0]
    assert warp.where.line == 2
    assert warp.fields["pci"] == "0000:cb:00"
    assert "pid" not in warp.fields and "process" not in warp.fields  # pid='<unknown>', name=<unknown>
    assert (warp.fields["gpc"], warp.fields["tpc"], warp.fields["sm_id"]) == (7, 7, 0)
    assert warp.fields["fault_type"] == "Illegal Instruction Parameter"
    assert warp.time == datetime(2024, 8, 30, 11, 43, 9) and warp.clock == "wall"
    ctx = events[3]
    assert ctx.fields["pid"] == 1797828 and ctx.fields["process"] == "pt_main_thread"
    assert ctx.fields["error_string"] == "CTX SWITCH TIMEOUT"


def test_xid31_mmu_fault_fields_and_repeats_folded():
    events = parse_file("xid31-fault-pde-tinygrad-01.dmesg.txt")
    env = only(events, "environment")
    assert env.fields["gpu_uuid"] == "GPU-af4f89ae-d08b-1b53-9938-c9ed209a3513"
    xid = only(events, "xid")
    assert xid.count == 2 and xid.fields["pids"] == [14292, 14566]
    assert xid.fields["fault_type"] == "FAULT_PDE"
    assert xid.fields["access_type"] == "ACCESS_TYPE_VIRT_READ"
    assert xid.fields["engine"] == "HOST0" and xid.fields["fault_address"] == "0x10_00200000"
    assert xid.fields["uptime"] == pytest.approx(22859.08186)


def test_xid13_esr_lines_fold_into_one_event():
    xid = only(parse_file("xid13-graphics-exc-vllm-02.dmesg.txt"), "xid")
    assert xid.count == 6 and xid.where.line == 1
    assert xid.fields["exception"] == "ESR" and xid.fields["pci"] == "0000:43:00"


def test_old_xid_forms_without_pid():
    events = parse_file("xid32-xid31-laptop-02.dmesg.txt")
    assert [(e.fields["xid"], e.count) for e in events] == [(32, 2), (31, 1)]
    assert events[1].fields["channel"] == "00000003"


def test_nvlink5_link_and_redacted_pci():
    events = [e for e in parse_file("xid145-137-nvlink-nccl-01.dmesg.txt") if e.kind == "xid"]
    assert [(e.fields["xid"], e.fields["link"]) for e in events] == [(145, 11), (137, 11)]
    assert all("pci" not in e.fields for e in events)  # "PCI:..." is not an address


def test_xid154_recovery_action_and_off_bus_forms():
    events = parse_file("xid79-154-pf-flr-02.dmesg.txt")
    assert [e.kind for e in events] == ["environment", "xid", "gpu-off-bus", "driver-message", "xid"]
    assert events[1].fields["xid"] == 79
    assert events[2].fields["pci"] == "0000:01:00.0"
    assert events[3].fields["function"] == "krcRcAndNotifyAllChannels_IMPL"
    assert events[3].fields["subsystem"] == "robust-channel"
    assert events[4].fields["recovery_action"] == "PF FLR"


def test_xid_syslog_without_host_and_new_channel_form():
    events = parse_file("xid109-ctx-switch-02.journal.txt")
    xid = only(events, "xid")
    assert xid.count == 3 and xid.fields["pids"] == [8494, 45252, 238459]
    assert xid.clock == "wall-no-year" and xid.time is None
    assert (xid.fields["stamp"], xid.fields["last_stamp"]) == ("Sep 18 20:07:01", "Sep 21 15:01:42")
    assert "host" not in xid.fields


def test_german_journal_and_gsp_panic():
    events = parse_file("xid120-gsp-panic-02.journal.txt")
    xid = only(events, "xid")
    assert xid.fields["xid"] == 120 and xid.fields["host"] == "ANDROMEDA"
    assert xid.time is None and xid.fields["stamp"] == "Mai 17 13:10:25"
    assert model.dated(xid.fields["stamp"], 2024) == datetime(2024, 5, 17, 13, 10, 25)  # German month names
    assert "GSP task panic" in xid.text


def test_xid63_64_prefixed_alert_lines():
    first, second = parse_file("ecc-xid63-64-training-chronicle-01.dmesg.txt")
    assert first.fields["row_remap"].startswith("New row marked for remapping")
    assert first.fields["host"] == "ip-26-0-146-100" and first.fields["uptime"] == 680111.646286
    assert second.fields["xid"] == 64 and second.fields["pci"] == "0000:90:1c"


def test_xid140_inside_other_text():
    xid = only(parse_file("xid140-ansible.txt"), "xid")
    assert xid.fields["xid"] == 140 and xid.time == datetime(2024, 8, 25, 20, 10, 45)


# --- SXid, init failures ------------------------------------------------------------------
def test_sxid_fatal_and_severity_lines():
    events = parse_file("sxid-xid79-quoted.md.txt")
    sxids = [e for e in events if e.kind == "sxid"]
    assert [(e.fields["switch"], e.fields["link"], e.fields["fatal"])
            for e in sxids[:2]] == [(1, 48, True), (0, 63, True)]
    assert "fatal" not in sxids[2].fields  # "Severity 1 Engine instance ..." says neither
    assert [e.kind for e in events[:3]] == ["environment", "xid", "gpu-off-bus"]


def test_rminit_failed_folded_with_code_and_minor():
    init, adapter = parse_file("rminit-failed-0x24-01.syslog.txt")
    assert (init.kind, init.count, init.fields["code"]) == ("gpu-init-failed", 6, "0x24:0x72:1568")
    assert adapter.fields["minor"] == 5 and adapter.fields["pci"] == "0000:0a:00.0"
    assert init.fields["host"] == "worker4"


def test_old_off_bus_form_folded():
    event = only(parse_file("offbus-bumblebee-02.dmesg.txt"), "gpu-off-bus")
    assert event.count == 2 and event.fields["pci"] == "0000:01:00.0"


# --- host events --------------------------------------------------------------------------
def test_segfault_fields_and_offset():
    events = parse_file("segfault-libnvidia-01.dmesg.txt")
    assert [e.kind for e in events] == ["segfault"] * 5
    first = events[0]
    assert first.where.line == 4
    assert first.fields["process"] == "zed-editor" and first.fields["pid"] == 11804
    assert first.fields["module"] == "libnvidia-glcore.so.575.64.03"
    assert first.fields["address"] == "0x25c" and first.fields["error_code"] == 4
    assert first.fields["module_base"] == "0x75b6d2000000"
    assert first.fields["offset"] == "0xaf2e1a"  # newer kernels print the file offset themselves
    assert first.fields["error_text"] == "user, read, page not present"


def test_oom_kill_cgroup():
    event = only(parse_file("cgroup-oomkill-dataloader-01.dmesg.txt"), "oom-kill")
    assert (event.fields["pid"], event.fields["process"], event.fields["cgroup"]) == (629, "onmt_train", True)
    assert event.fields["rss_kb"] == 6538204 + 80652 + 16


def test_oom_kill_constraint_line_merged_and_comma_numbers():
    event = only(parse_file("oomkill-python-dmesg-t-03.dmesg.txt"), "oom-kill")
    assert (event.where.line, event.where.end_line) == (5, 6)
    assert event.fields["constraint"] == "CONSTRAINT_NONE" and event.fields["pid"] == 7899
    assert event.fields["anon_rss_kb"] == 15370088
    assert "Killed process 7899" in event.text and "oom-kill:constraint" in event.text
    assert event.time == datetime(2025, 3, 30, 8, 24)


def test_hung_task_after_xid45():
    events = parse_file("xid45-hung-task-nvsmi-02.dmesg.txt")
    assert events[0].fields["xid"] == 45 and events[0].count == 6
    hang = only(events, "kernel-hang")
    assert hang.fields == {"hang": "hung-task", "task": "cache_mgr_event", "pid": 620917, "seconds": 120}


def test_wall_broadcast_lockups_take_time_and_host_from_header():
    events = parse_file("soft-hard-lockup-wall-02.console.txt")
    assert len(events) == 9 and {e.kind for e in events} == {"kernel-hang"}
    soft, hard = events[0], events[3]
    assert soft.fields["hang"] == "soft-lockup" and soft.fields["cpu"] == 0 and soft.fields["seconds"] == 27
    assert soft.fields["task"] == "node" and soft.fields["pid"] == 1984
    assert hard.fields["hang"] == "hard-lockup" and hard.fields["cpu"] == 3
    assert soft.fields["host"] == "zyr" and soft.time is None and soft.fields["stamp"] == "Dec 10 05:25:44"
    assert events[7].fields["task"] == "SCTP timer"


def test_aer_corrected_blocks():
    events = parse_file("aer-correctable-gpu-port-01.syslog.txt")
    assert [e.fields["errors"] for e in events] == [["Timeout"], ["BadTLP"], []]
    first = events[0]
    assert (first.where.line, first.where.end_line) == (1, 4)
    assert first.fields["device"] == "0000:00:03.1" and first.fields["severity"] == "corrected"
    assert first.fields["layer"] == "Data Link Layer" and first.fields["host"] == "bubz"


def test_aer_uncorrected_block_stops_at_unrelated_lines():
    event = only(parse_file("aer-uncorrected-thunderbolt.dmesg.txt"), "pcie-aer")
    assert event.fields["severity"] == "uncorrected" and event.fields["fatal"] is False
    assert event.fields["errors"] == ["UnsupReq"] and event.fields["layer"] == "Transaction Layer"
    assert event.where.end_line == 5


def test_fatal_machine_check_block():
    event = only(parse_file("mce-fatal-kdump-04.vmcore-dmesg.txt"), "mce")
    assert (event.where.line, event.where.end_line) == (1, 5)
    assert event.fields["fatal"] is True and event.fields["cpu"] == 7 and event.fields["bank"] == 0
    assert "Fatal machine check" in event.text


def test_edac_corrected_dimm():
    events = parse_file("edac-ce-scrub-syslog-02.syslog.txt")
    assert [e.kind for e in events] == ["mce", "edac"]
    assert events[0].fields["corrected"] is True and events[0].fields["fatal"] is False
    edac = events[1]
    assert edac.fields["dimm"] == "CPU_SrcID#1_Ha#0_Chan#0_DIMM#0" and edac.fields["corrected"] is True
    assert edac.fields["error"] == "memory scrubbing error" and edac.where.line == 8


# --- clocks -------------------------------------------------------------------------------
AER_SYSLOG = ("Sep 19 16:18:02 bubz kernel: [68183.615790] pcieport 0000:00:03.1: AER: Correctable error message "
              "received from 0000:00:00.0")
OFF_BUS = "[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus."
XID119_CTIME = ("[Mon Mar  6 21:34:31 2023] NVRM: Xid (PCI:0000:61:00): 119, pid=977823, name=nvidia-smi, "
                "Timeout waiting for RPC from GSP! Expected function 76 (GSP_RM_CONTROL) (0x2080014b 0x5).")


def test_uptime_only_lines_placed_on_the_wall_clock():
    _xid, off_bus, aer = parse_text(f"{XID119_CTIME}\n{OFF_BUS}\n{AER_SYSLOG}\n")
    assert off_bus.clock == "uptime+boot" and aer.clock == "wall"
    assert (aer.time - off_bus.time).total_seconds() == pytest.approx(68183.615790 - 49.261458)


def test_a_year_less_stamp_stays_year_less():
    """No line of the input has a year: the syslog time is kept as written, off the wall clock, and it places no
    uptime on it either (a guessed year would)."""
    off_bus, aer = parse_text(f"{OFF_BUS}\n{AER_SYSLOG}\n")
    assert (aer.time, aer.clock, aer.fields["stamp"]) == (None, "wall-no-year", "Sep 19 16:18:02")
    assert off_bus.time is None and off_bus.fields["uptime"] == 49.261458


def test_reboot_ends_the_anchor():
    off_bus, _aer = parse_text(f"{OFF_BUS}\n{AER_SYSLOG}\n".replace("[68183.615790]", "[   10.000000]"))
    assert off_bus.time is None and off_bus.fields["uptime"] == 49.261458


def test_syslog_year_taken_from_a_dated_line_of_the_same_input():
    events = parse_text(f"{XID119_CTIME}\n{AER_SYSLOG}\n")
    assert events[1].time == datetime(2023, 9, 19, 16, 18, 2) and events[1].clock == "wall"
    assert events[1].fields["joined"]["time"] == "year 2023 from line 1 (a dated stamp in this input)"
    assert "stamp" not in events[1].fields


def test_journal_json_line():
    # a journalctl -o json record built around a real message (xid119 corpus case)
    record = {"__REALTIME_TIMESTAMP": "1678138471000000", "_SOURCE_MONOTONIC_TIMESTAMP": "5000000",
              "_HOSTNAME": "node7", "MESSAGE": XID119_CTIME.split("] ", 1)[1]}
    event = only(parse_text(json.dumps(record) + "\n"), "xid")
    assert event.fields["xid"] == 119 and event.fields["host"] == "node7" and event.fields["uptime"] == 5.0
    assert event.time == datetime(2023, 3, 6, 21, 34, 31, tzinfo=UTC)


def test_stamp_iso_with_zone_and_host():
    s = kernel_log.stamp("2024-08-30T11:43:09.123+0000 gpu-node kernel: " + OFF_BUS)
    assert s.time == datetime(2024, 8, 30, 11, 43, 9, 123000, tzinfo=UTC)
    assert s.host == "gpu-node" and s.uptime == 49.261458 and s.body.startswith("NVRM: GPU at")


def test_odd_lines_never_raise():
    junk = "NVRM: Xid (PCI:\nKilled process abc\n{\"MESSAGE\": \"NVRM: Xid broken\nAER: \n[Hardware Error]\n"
    assert [e.kind for e in parse_text(junk)] == ["mce"]


# --- corpus cases of this format -------------------------------------------------------
CASES = sorted({p.name.split(".")[0] for p in DATA.glob("*-0[0-9].*.txt")})


@pytest.mark.parametrize("case", CASES)
def test_corpus_case_top1_and_mentions(case, monkeypatch):
    monkeypatch.setattr(pipeline, "source_cards", lambda: (card_of(kernel_log),))
    pipeline.text_prefilter.cache_clear()
    try:
        spec = yaml.safe_load((CORPUS / case / "case.yaml").read_text(encoding="utf-8"))
        files = [str(p) for p in sorted((CORPUS / case).iterdir()) if p.name != "case.yaml"]
        report = pipeline.analyze(files)
    finally:
        pipeline.text_prefilter.cache_clear()
    assert report.findings and report.findings[0].cause in spec["expected_causes"]
    blob = json.dumps(to_plain(report), ensure_ascii=False)
    assert [m for m in spec["must_mention"] if m not in blob] == []


def test_known_driver_bug_needs_the_driver_version_from_another_input():
    """Xid 119 (nvidia-docker#1648, March 2023) with a /proc/driver/nvidia/version file from another input:
    NVIDIA's R525 release notes name GSP timeouts fixed in 525.105.17."""
    xid = str(DATA / "xid119-gsp-timeout-02.dmesg.txt")
    buggy = pipeline.analyze([xid, str(DATA / "driver-525.60.13-version.txt")])
    assert buggy.findings[0].signature == "xid-119-driver-525-gsp-bug"
    xid_event = buggy.event(buggy.findings[0].evidence[0])
    assert xid_event.fields["driver_version"] == "525.60.13"
    assert "driver_version" in xid_event.fields["joined"]
    fixed = pipeline.analyze([xid, str(DATA / "driver-525.105.17-version.txt")])
    assert "xid-119-driver-525-gsp-bug" not in [f.signature for f in fixed.findings]
    alone = pipeline.analyze([xid])
    assert alone.findings[0].signature == "xid-119-120"


def test_board_serial_follows_the_gpu_line():
    """The driver prints the board serial right after "GPU at PCI:..." (tinygrad's dmesg); 0 means none."""
    [env] = [e for e in parse_file("xid31-fault-pde-tinygrad-01.dmesg.txt") if e.kind == "environment"]
    assert (env.fields["pci"], env.fields["gpu_serial"]) == ("0000:01:00", "1710424007242")
    [unset] = [e for e in parse_file("xid79-154-pf-flr-02.dmesg.txt") if e.kind == "environment"]
    assert "gpu_serial" not in unset.fields  # "GPU Board Serial Number: 0"


def test_a_storm_of_repeats_keeps_its_first_and_last_time():
    """The three real Xid 109 lines of xid109-ctx-switch-02 (one GPU, days apart) fold into one event;
    the finding spans the first to the last."""
    report = pipeline.analyze([str(DATA / "xid109-ctx-switch-02.journal.txt")])
    finding = next(f for f in report.findings if f.signature == "xid-109")
    assert finding.count == 3
    assert (finding.first_seen, finding.last_seen) == ("Sep 18 20:07:01", "Sep 21 15:01:42")  # no year: as written


# --- issue 13: storms, absurd times ---------------------------------------------------------

XID13_LINE = ("[{t:12.6f}] NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python, Graphics SM Warp Exception on "
              "(GPC 1, TPC 0, SM 0): Out Of Range Address\n")
XID79_LINE = "[{t:12.6f}] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.\n"


def test_a_storm_longer_than_any_budget_never_hides_the_event_after_it(tmp_path):
    """250,000 Xid 13 lines then one Xid 79: the storm is one counted event with its time span, and the
    verdict is the GPU that fell off the bus (only the first 200,000 candidate lines were parsed before)."""
    path = tmp_path / "dmesg.txt"
    with open(path, "w") as out:
        out.writelines(XID13_LINE.format(t=100 + i / 1000) for i in range(250_000))
        out.write(XID79_LINE.format(t=400.0))
    report = pipeline.analyze([str(path)])
    assert report.findings[0].signature == "xid-79"
    [storm] = [e for e in report.events if e.kind == "xid" and e.fields["xid"] == 13]
    assert storm.count == 250_000 and storm.fields["uptime"] == 100.0
    assert not report.inputs[0].diagnostics


def test_an_absurd_uptime_costs_only_its_own_clock():
    """`[99999999999999.999]` (more than timedelta holds) and 3e11 s next to a wall stamp once failed the whole
    source; now those lines lose their uptime, with a diagnostic, and every event is still read."""
    doc_text = ("2024-05-01T10:00:00+00:00 host kernel: [300000000000.5] NVRM: Xid (PCI:0000:3b:00): 31, pid=1, Ch 8\n"
                "[99999999999999.999] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception: ESR\n"
                "[   12.500000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
    report = pipeline.analyze_text(doc_text)
    assert sorted(e.fields["xid"] for e in report.events if e.kind == "xid") == [13, 31, 79]
    assert all("uptime" not in e.fields for e in report.events if e.fields.get("xid") in (13, 31))
    assert any("uptime of more than 100 years" in d and "line 1" in d for d in report.inputs[0].diagnostics)


@pytest.mark.parametrize("line", [
    "9999-12-31T23:59:59-14:00 host kernel: [ 5.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, x\n",
    "0001-01-01T00:00:00+14:00 host kernel: [ 5.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, x\n",
    "2024-05-01T10:00:00+99:99 host kernel: [ 5.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, x\n",
    "[Fri Dec 31 23:59:59 9999] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, x\n",
])
def test_times_at_the_edge_of_the_calendar_never_fail_the_source(line):
    """Year 9999 and year 1 with extreme offsets, and a zone of +99:99: the Xid is read, and an uptime-only line
    of the same boot is not pushed past the calendar."""
    events = parse_text(line + "[  400.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception: ESR\n")
    assert sorted(e.fields["xid"] for e in events) == [13, 79]


@pytest.mark.parametrize(("line", "task"), [
    ("watchdog: BUG: soft lockup - CPU#98 stuck for 22s!", None),  # hiyouga/LlamaFactory#1355, pasted without its task
    (" kernel:[55716.328117] watchdog: BUG: soft lockup - CPU#0 stuck for 27s! [node:1984]", "node"),
])
def test_a_soft_lockup_with_or_without_its_task(line, task):
    report = pipeline.analyze_text(line + "\n")
    [hang] = [e for e in report.events if e.fields.get("hang") == "soft-lockup"]
    assert hang.fields.get("task") == task and report.findings[0].cause == "kernel-hang"


@pytest.mark.parametrize(("name", "task", "pid", "frames"), [
    ("hung-headless-nv-open-q-968.journal.txt", "nv_open_q", 1014,
     ["os_acquire_rwlock_write [nvidia]", "portSyncRwLockAcquireWrite [nvidia]", "rmapiLockAcquire [nvidia]",
      "kgspInitRm_IMPL [nvidia]", "RmInitAdapter [nvidia]", "rm_init_adapter [nvidia]"]),
    ("hung-headless-uvm-ioctl-returnn.dmesg.txt", "python3.11", 15277,
     ["uvm_page_tree_get_ptes_async [nvidia_uvm]", "uvm_page_table_range_vec_init [nvidia_uvm]",
      "uvm_page_table_range_vec_create [nvidia_uvm]", "mem_map_gpu [nvidia_uvm]",
      "uvm_mem_map_gpu_kernel [nvidia_uvm]", "uvm_api_alloc_semaphore_pool [nvidia_uvm]", "uvm_ioctl [nvidia_uvm]"]),
])
def test_a_hung_task_pasted_without_its_header_is_a_gpu_hang(name, task, pid, frames):
    """A `task:X state:D` line whose call trace goes through the NVIDIA modules is the hung task the header would
    have named; `? ` frames (stale stack words) are not counted."""
    hang = only(parse_file(name), "kernel-hang")
    assert hang.fields["hang"] == "hung-task" and hang.fields["task"] == task and hang.fields["pid"] == pid
    assert hang.fields["gpu_frames"] == frames and hang.fields["header"] is False
    assert hang.where.end_line > hang.where.line  # the trace is part of the evidence
    report = pipeline.analyze_text((DATA / name).read_text())
    assert "hung-task" in {f.signature for f in report.findings}


def test_a_headless_d_state_task_outside_the_gpu_driver_is_no_hang():
    """The jbd2 task waits on block I/O: a D-state line is printed for every such task by sysrq-w too, so
    without the header or a GPU frame it is no finding. Its line alone (no trace) is none either."""
    text = (DATA / "hung-headless-jbd2-io.dmesg.txt").read_text()
    assert parse_text(text) == []
    assert parse_text(text.splitlines()[0] + "\n") == []
    nvidia = (DATA / "hung-headless-nv-open-q-968.journal.txt").read_text().splitlines()
    assert parse_text(nvidia[0] + "\n") == []  # the nvidia task's line without its trace


def test_a_headed_hung_task_stays_one_event():
    """The header's event stays the one event (the `task:` line under it is that report's), whatever its trace."""
    text = ("[Sat Oct 12 18:38:44 2024] INFO: task nv_open_q:1014 blocked for more than 120 seconds.\n"
            "[Sat Oct 12 18:38:44 2024]       Tainted: P           OE     5.15.0-97-generic #107-Ubuntu\n"
            '[Sat Oct 12 18:38:44 2024] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.\n'
            + (DATA / "hung-headless-nv-open-q-968.journal.txt").read_text())
    hang = only(parse_text(text), "kernel-hang")
    assert hang.fields == {"hang": "hung-task", "task": "nv_open_q", "pid": 1014, "seconds": 120}


def test_a_headless_hung_task_whose_trace_lost_its_module_tags():
    """The returnn trace with its `[nvidia_uvm]` tags cut off (as some log shippers write frames): the driver's
    own function names (`uvm_*`) still place it in the GPU driver; `mem_map_gpu` names no driver prefix."""
    text = (DATA / "hung-headless-uvm-ioctl-returnn.dmesg.txt").read_text().replace(" [nvidia_uvm]", "")
    hang = only(parse_text(text), "kernel-hang")
    assert hang.fields["gpu_frames"] == [
        "uvm_page_tree_get_ptes_async", "uvm_page_table_range_vec_init", "uvm_page_table_range_vec_create",
        "uvm_mem_map_gpu_kernel", "uvm_api_alloc_semaphore_pool", "uvm_ioctl"]


def test_an_oom_report_cut_after_its_header_is_a_kill_only_with_its_body():
    """The kernel's OOM report pasted up to its call trace (NVIDIA/DALI#585) tells the kill; the header followed by
    unrelated lines is gpud's own "incomplete OOM sequence" test (components/memory/kmsg_matcher_test.go), no kill."""
    from postmortem.pipeline import analyze_text

    cut = ("[2612362.231458] python invoked oom-killer: gfp_mask=0x14000c0(GFP_KERNEL), nodemask=(null), order=0, "
           "oom_score_adj=829\n[2612362.231467] Call Trace:\n[2612362.231483]  oom_kill_process+0x21c/0x430\n"
           "[2612362.231487]  mem_cgroup_out_of_memory+0x4b/0x80\n")
    [kill] = [e for e in analyze_text(cut).events if e.kind == "oom-kill"]
    assert (kill.fields["process"], kill.fields["cgroup"]) == ("python", True)
    incomplete = ("java invoked oom-killer: gfp_mask=0x280da, order=0, oom_score_adj=0\n"
                  "kernel: [12345.678] Some unrelated message\nanother unrelated log line\n")
    assert not [e for e in analyze_text(incomplete).events if e.kind == "oom-kill"]


HARVESTED = Path(__file__).parent / "corpus"


@pytest.mark.parametrize("case", ["drv-api-mismatch-vgpu-guest-01", "drv-offbus-no-xid-wrapped-01"])
def test_the_driver_banner_gives_the_version_and_its_build_date_is_not_the_lines_time(case):
    """`dmesg` prints the banner with the module's build date at its end (`... 570.148.06  Mon May  5 11:36:21 UTC
    2025`): that date is the message's, not a syslog stamp, so the banner is read whole (issue 27)."""
    report = pipeline.analyze([str(HARVESTED / case / "dmesg.txt")])
    banner = next(e for e in report.events if e.kind == "environment" and "driver_version" in e.fields)
    assert banner.text.lstrip().startswith("[") and "NVRM: loading NVIDIA UNIX" in banner.text
    assert banner.time is None and banner.fields["uptime"] > 0
    assert banner.fields["driver_version"] in banner.text
    assert report.facts["driver_version"] == [banner.fields["driver_version"]]
