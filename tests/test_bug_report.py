"""nvidia-bug-report.log: sections named in event locations, driver version, PCIe links, bad input."""

from __future__ import annotations

from pathlib import Path

from postmortem.pipeline import analyze, analyze_text
from postmortem.render.json_report import as_dict

DATA = Path(__file__).parent / "data" / "bug_report"
REPORT = (DATA / "a100-offbus-excerpt.log").read_text()
DELIMITER = "_" * 44
DRIVER_SECTION = (
    f"{DELIMITER}\n\n*** /proc/driver/nvidia/version\n"
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
    "565.77  Release Build  (nixbld@)  Sun Feb  9 11:08:26 UTC 2025\n"
    "GCC version:  gcc version 13.3.0 (GCC)\n\n")


def kinds(report, kind):
    return [e for e in report.events if e.kind == kind]


def test_events_name_their_section_and_json_keeps_it():
    report = analyze([str(DATA / "a100-offbus-excerpt.log")])
    link = kinds(report, "pcie-link")[0]
    assert link.where.section == "/usr/bin/lspci -nnDvvvxxxx"
    assert kinds(report, "bug-report")[0].where.section == "report header"
    assert as_dict(report)["events"][1]["source"]["section"] == "/usr/bin/lspci -nnDvvvxxxx"
    assert report.inputs[0].format == "nvidia-bug-report"


def test_root_port_of_fallen_off_a100_reports_link_down():
    report = analyze([str(DATA / "a100-offbus-excerpt.log")])
    (link,) = kinds(report, "pcie-link")
    assert link.fields["role"] == "upstream-port"
    assert (link.fields["port"], link.fields["pci"]) == ("0000:30:02.0", "0000:31:00.0")
    assert (link.fields["cap_speed"], link.fields["sta_speed"], link.fields["sta_width"]) == (16.0, 2.5, 16)
    assert link.fields["speed_downgraded"] and not link.fields["width_downgraded"]
    assert link.fields["link_active"] is False
    assert (link.where.line, link.where.end_line) == (48, 74)
    assert report.verdict.signature == "pcie-link-down-gpu-port"
    assert report.facts["host"] == ["ubuntu-Super-Server"]
    assert report.facts["kernel_version"] == ["6.8.0-40-generic"]


def test_driver_version_section_gives_the_driver_fact():
    report = analyze_text(REPORT.replace(f"{DELIMITER}\n\n*** /etc/issue",
                                         DRIVER_SECTION + f"{DELIMITER}\n\n*** /etc/issue"))
    (env,) = [e for e in kinds(report, "environment") if "gcc_version" in e.fields]
    assert (env.fields["driver_version"], env.fields["kernel_module"]) == ("565.77", "open")
    assert env.fields["gcc_version"] == "13.3.0 (GCC)"
    assert env.where.section == "/proc/driver/nvidia/version"
    assert report.facts["driver_version"] == ["565.77"]
    assert not any("driver version" in d for d in report.inputs[0].diagnostics)


def test_proprietary_module_line():
    report = analyze_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  510.54  Wed Apr  1 20:04:33 UTC 2020\n"
                          "GCC version:  gcc version 9.3.0 (Arch Linux 9.3.0-1)\n")
    (env,) = kinds(report, "environment")
    assert env.fields["driver_version"] == "510.54" and env.fields["kernel_module"] == "proprietary"


def test_missing_sections_are_diagnostics():
    report = analyze_text(REPORT)
    notes = report.inputs[0].diagnostics
    assert any("/proc/driver/nvidia/version" in n for n in notes)
    assert any("kernel log" in n for n in notes)  # `journalctl -b -0 _COMM=Xorg` is not the kernel log
    assert not any("lspci" in n for n in notes)


def test_section_cut_off_mid_block_gives_no_traceback():
    cut = REPORT[: REPORT.index("\t\tLnkSta:")]
    report = analyze_text(cut)
    assert kinds(report, "pcie-link") == []
    assert kinds(report, "bug-report")[0].where.section == "report header"


def test_binary_garbage_inside_a_section_is_a_diagnostic(tmp_path):
    raw = REPORT.encode().replace(b"Ubuntu 22.04.4 LTS", bytes(range(32)) * 200)
    (tmp_path / "nvidia-bug-report.log").write_bytes(raw)
    report = analyze([str(tmp_path / "nvidia-bug-report.log")])
    assert any("'/etc/issue'" in n and "binary" in n for n in report.inputs[0].diagnostics)
    assert kinds(report, "pcie-link")[0].where.section == "/usr/bin/lspci -nnDvvvxxxx"


def test_underscore_lines_in_other_logs_do_not_make_a_bug_report():
    report = analyze_text(f"{DELIMITER}\nhello\n{DELIMITER}\nworld\n")
    assert report.inputs[0].diagnostics == ("no known error pattern in this text",)
    assert report.events == ()
