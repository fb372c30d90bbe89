"""nvidia-smi -q -x documents: the same gpu-state events as the text report (tests/data/gpu_tools/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import database_with, parse_alone
from postmortem.pipeline import analyze_text
from postmortem.signatures import match
from postmortem.sources import gpu_tools, nvsmi_xml

DATA = Path(__file__).parent / "data" / "gpu_tools"
A5000 = (DATA / "nvsmi-q-x-a5000-575.xml").read_text()


def parse(text: str):
    return parse_alone(nvsmi_xml, text.encode(), "nvidia-smi.xml")


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    return database_with(tmp_path_factory.mktemp("signatures"), "gpu_tools.yaml")


def test_real_575_document():
    [gpu] = parse(A5000)
    assert gpu.kind == "gpu-state"
    assert (gpu.where.line, gpu.where.end_line) == (8, 571)  # <gpu id=...> .. </gpu>
    f = gpu.fields
    assert (f["pci"], f["bus_id"], f["gpu_index"]) == ("0000:01:00.0", "00000000:01:00.0", 0)
    assert (f["gpu_name"], f["driver_version"],
            f["cuda_version"]) == ("NVIDIA RTX A5000 Laptop GPU", "575.57.08", "12.9")
    assert f["gpu_uuid"] == "GPU-0946ec38-a612-7b0e-8df3-0e64fe5b111e"
    assert (f["temp_c"], f["temp_slowdown_c"], f["temp_shutdown_c"]) == (61, 95, 98)
    assert (f["power_w"], f["power_cap_w"], f["clock_graphics_mhz"],
            f["clock_max_graphics_mhz"]) == (30.92, 90.0, 1455, 1635)
    assert (f["memory_used_mib"], f["memory_total_mib"], f["util_pct"], f["pstate"]) == (51, 16384, 0, "P0")
    assert "throttle_active" not in f  # only Idle is Active, which is no finding
    for absent in ("ecc_volatile_uncorrectable", "retired_pages_dbe", "remap_pending", "reset_required", "fan_pct"):
        assert absent not in f  # N/A, "Requested functionality has been deprecated", or remapped_rows N/A
    assert 'gpu id="00000000:01:00.0"' in gpu.text and "temp_c: 61" in gpu.text


def test_field_names_match_the_text_report():
    [xml] = parse(A5000)
    [text] = parse_alone(gpu_tools, (DATA / "nvsmi-q-a10-rowremap.txt").read_bytes(), "q.txt")
    shared = {"pci", "bus_id", "gpu_index", "gpu_name", "gpu_uuid", "pstate", "driver_version", "cuda_version",
              "temp_c", "temp_slowdown_c", "temp_shutdown_c", "clock_graphics_mhz", "clock_sm_mhz",
              "clock_max_graphics_mhz", "pcie_replays"}
    assert shared <= set(xml.fields) and shared <= set(text.fields)


def test_signatures_fire_on_xml(database):
    """The real document edited to hold what the text-report signatures look for."""
    edited = (A5000
              .replace("<dram_uncorrectable>N/A</dram_uncorrectable>", "<dram_uncorrectable>4</dram_uncorrectable>", 1)
              .replace("<remapped_rows>N/A</remapped_rows>",
                       "<remapped_rows>\n\t\t\t<remapped_row_corr>0</remapped_row_corr>\n\t\t\t<remapped_row_unc>4"
                       "</remapped_row_unc>\n\t\t\t<remapped_row_pending>Yes</remapped_row_pending>\n\t\t\t"
                       "<remapped_row_failure>No</remapped_row_failure>\n\t\t</remapped_rows>")
              .replace("<clocks_event_reason_hw_power_brake_slowdown>Not Active",
                       "<clocks_event_reason_hw_power_brake_slowdown>Active"))
    [gpu] = parse(edited)
    f = gpu.fields
    assert (f["ecc_volatile_uncorrectable"], f["remapped_rows_uncorrectable"], f["remap_pending"]) == (4, 4, True)
    assert f["throttle_active"] == ["HW Power Brake Slowdown"]
    fired = {found.signature for found in match(database, [gpu])}
    assert fired == {"nvsmi-ecc-uncorrectable", "nvsmi-row-remap", "nvsmi-hw-slowdown"}


def test_older_layout_totals_throttle_reasons_and_two_gpus(database):
    """Pre-Ampere element names (single_bit/double_bit totals, clocks_throttle_reasons), as 4xx drivers write."""
    document = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v10.dtd">
<nvidia_smi_log>
\t<driver_version>418.87.01</driver_version>
\t<cuda_version>10.1</cuda_version>
\t<gpu id="00000000:3B:00.0">
\t\t<product_name>Tesla V100-SXM2-32GB</product_name>
\t\t<clocks_throttle_reasons>
\t\t\t<clocks_throttle_reason_gpu_idle>Not Active</clocks_throttle_reason_gpu_idle>
\t\t\t<clocks_throttle_reason_hw_slowdown>Active</clocks_throttle_reason_hw_slowdown>
\t\t</clocks_throttle_reasons>
\t\t<ecc_errors>
\t\t\t<volatile>
\t\t\t\t<single_bit><device_memory>3</device_memory><total>3</total></single_bit>
\t\t\t\t<double_bit><device_memory>1</device_memory><total>1</total></double_bit>
\t\t\t</volatile>
\t\t</ecc_errors>
\t\t<retired_pages>
\t\t\t<multiple_single_bit_retirement><retired_count>0</retired_count></multiple_single_bit_retirement>
\t\t\t<double_bit_retirement><retired_count>2</retired_count></double_bit_retirement>
\t\t\t<pending_retirement>No</pending_retirement>
\t\t</retired_pages>
\t</gpu>
\t<gpu id="00000000:5E:00.0">
\t\t<product_name>Tesla V100-SXM2-32GB</product_name>
\t</gpu>
</nvidia_smi_log>
"""
    first, second = parse(document)
    assert (first.fields["ecc_volatile_uncorrectable"], first.fields["ecc_volatile_correctable"]) == (1, 3)
    assert (first.fields["retired_pages_dbe"], first.fields["retired_pages_pending"]) == (2, False)
    assert first.fields["throttle_active"] == ["HW Slowdown"]
    assert (second.fields["gpu_index"], second.fields["pci"], second.where.line) == (1, "0000:5e:00.0", 24)
    assert {found.signature for found in match(database, [first])} == {"nvsmi-ecc-uncorrectable", "nvsmi-hw-slowdown"}


def test_document_after_a_shell_prompt_in_a_pasted_log():
    pasted = "$ nvidia-smi -q -x\n" + A5000
    [gpu] = parse(pasted)
    assert gpu.where.line == 9


@pytest.mark.parametrize("broken", [
    A5000[: len(A5000) // 2],  # cut off: no closing tag
    A5000.replace("</fan_speed>", "</fan_sped>"),  # not well-formed
    '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>\n'
    "<nvidia_smi_log><gpu id=\"0:1:0\"><product_name>&b;</product_name></gpu></nvidia_smi_log>\n",
])
def test_bad_documents_give_no_event_and_no_error(broken):
    assert parse(broken) == []


def test_whole_pipeline_reads_the_document_once():
    report = analyze_text(A5000, "nvidia-smi.xml")
    states = [e for e in report.events if e.kind == "gpu-state"]
    assert len(states) == 1 and states[0].fields["gpu_name"] == "NVIDIA RTX A5000 Laptop GPU"
