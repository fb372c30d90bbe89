"""nvidia-smi -q reports, nvidia-smi/NVML errors, DCGM health and Fabric Manager lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import database_with, parse_alone
from postmortem.signatures import match
from postmortem.sources import gpu_tools

DATA = Path(__file__).parent / "data" / "gpu_tools"


def parse_bytes(raw: bytes, name: str = "sample.txt"):
    return parse_alone(gpu_tools, raw, name)


def events(name: str):
    return parse_bytes((DATA / name).read_bytes(), name)


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    return database_with(tmp_path_factory.mktemp("signatures"), "gpu_tools.yaml")


def signatures_for(database, found):
    return {f.signature for f in match(database, found)}


def test_row_remap_report_fields_and_evidence():
    [gpu] = events("nvsmi-q-a10-rowremap.txt")
    assert gpu.kind == "gpu-state"
    assert (gpu.where.line, gpu.where.end_line) == (8, 201)
    f = gpu.fields
    assert f["pci"] == "0000:07:00.0" and f["bus_id"] == "00000000:07:00.0"
    assert (f["gpu_name"], f["driver_version"], f["cuda_version"]) == ("NVIDIA A10", "535.129.03", "12.2")
    assert f["gpu_uuid"] == "GPU-73d12ef7-f589-f867-4259-c7090ab44736"
    assert (f["remapped_rows_uncorrectable"], f["remap_pending"], f["remap_failure"]) == (4, True, False)
    assert f["ecc_volatile_uncorrectable"] == 0 and f["ecc_aggregate_uncorrectable"] == 0
    assert "retired_pages_dbe" not in f  # N/A on this GPU
    assert f["temp_c"] == 33 and f["clock_graphics_mhz"] == 225
    assert "Uncorrectable Error               : 4" in gpu.text
    assert "Pending                           : Yes" in gpu.text
    assert "Remapped Rows" in gpu.text  # the section header keeps the excerpt readable


def test_power_brake_report():
    [gpu] = events("nvsmi-q-h100-powerbrake.txt")
    f = gpu.fields
    assert f["throttle_active"] == ["HW Slowdown", "HW Power Brake Slowdown"]
    assert (f["temp_c"], f["clock_graphics_mhz"], f["clock_sm_mhz"]) == (29, 86, 86)
    assert f["pcie_replays"] == 67
    for line in ("HW Power Brake Slowdown       : Active", "HW Slowdown                       : Active",
                 "GPU Current Temp                  : 29 C", "86 MHz"):
        assert line in gpu.text


def test_report_signatures(database):
    assert signatures_for(database, events("nvsmi-q-a10-rowremap.txt")) == {"nvsmi-row-remap"}
    assert signatures_for(database, events("nvsmi-q-h100-powerbrake.txt")) == {"nvsmi-hw-slowdown"}


def test_older_layout_with_double_bit_totals_and_two_gpus(database):
    """Pre-Ampere drivers nest Single/Double Bit with a Total; two GPUs make two events."""
    report = b"""==============NVSMI LOG==============

Driver Version                      : 410.72
CUDA Version                        : 10.0

Attached GPUs                       : 2
GPU 00000000:01:00.0
    Product Name                    : Tesla V100-SXM2-16GB
    ECC Errors
        Volatile
            Double Bit
                Device Memory       : 2
                Register File       : 0
                Total               : 2
        Aggregate
            Double Bit
                Device Memory       : 3
                Total               : 3
    Retired Pages
        Single Bit ECC              : 0
        Double Bit ECC              : 1
        Pending                     : No
GPU 00000000:02:00.0
    Product Name                    : Tesla V100-SXM2-16GB
    Clocks Throttle Reasons
        Idle                        : Active
        SW Thermal Slowdown         : Active
"""
    first, second = parse_bytes(report)
    assert (first.fields["ecc_volatile_uncorrectable"], first.fields["ecc_aggregate_uncorrectable"]) == (2, 3)
    assert (first.fields["retired_pages_dbe"], first.fields["retired_pages_pending"]) == (1, False)
    assert second.fields["gpu_index"] == 1 and second.fields["throttle_active"] == ["SW Thermal Slowdown"]
    assert signatures_for(database, [first]) == {"nvsmi-ecc-uncorrectable"}
    assert signatures_for(database, [second]) == set()  # software thermal throttling alone is normal


@pytest.mark.parametrize(("name", "error", "signature"), [
    ("nvml-version-mismatch.txt", "Driver/library version mismatch", "nvsmi-driver-mismatch"),
    ("nvsmi-cant-communicate.txt", "couldn't communicate with the NVIDIA driver", "nvsmi-no-driver"),
    ("nvsmi-unknown-error.txt", "Unknown Error", "nvsmi-device-handle-lost"),
])
def test_nvidia_smi_errors(database, name, error, signature):
    [event] = events(name)
    assert event.kind == "nvml-error" and event.fields["error"] == error
    assert signatures_for(database, [event]) == {signature}


def test_nvml_version_and_bus_id():
    [mismatch] = events("nvml-version-mismatch.txt")
    assert mismatch.fields["nvml_version"] == "570.124"
    assert (mismatch.where.line, mismatch.where.end_line) == (2, 3)
    [lost] = events("nvsmi-unknown-error.txt")
    assert lost.fields["pci"] == "0000:07:00.0"


def test_dcgm_health(database):
    [health] = events("nv-hostengine-thermal.log")
    assert health.kind == "dcgm-health"
    assert (health.fields["system"], health.fields["level"], health.fields["gpu_index"]) == ("Thermal", "warning", 2)
    assert signatures_for(database, [health]) == {"dcgm-thermal-violation"}


def test_fabric_manager_errors(database):
    [nonfatal] = events("fabricmanager-12028.log")
    assert nonfatal.kind == "sxid" and nonfatal.where.line == 9
    assert nonfatal.fields["sxid"] == 12028 and nonfatal.fields["fatal"] is False
    assert (nonfatal.fields["pci"], nonfatal.fields["switch"], nonfatal.fields["port"]) == ("0000:86:00.0", 3, 61)
    assert nonfatal.time.year == 2025 and nonfatal.time.hour == 15
    [fatal] = events("fabricmanager-fatal.log")
    assert fatal.fields["sxid"] == 20034 and fatal.fields["fatal"] is True
    assert signatures_for(database, [nonfatal]) == {"fm-nvswitch-nonfatal"}
    assert signatures_for(database, [fatal]) == {"fm-nvswitch-fatal"}


def test_table_header_gives_versions_and_junk_is_skipped():
    raw = (b"| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   CUDA Version: 12.2     |\n"
           b"Driver Version : \xff\xfe\nAttached GPUs : x\nGPU zz:07\n")
    found = parse_bytes(raw)
    [versions] = [e for e in found if e.kind == "nvsmi-versions"]
    assert versions.fields["driver_version"] == "535.129.03" and versions.fields["cuda_version"] == "12.2"
    assert not [e for e in found if e.kind == "gpu-state"]


def test_repeated_error_lines_fold():
    [event] = parse_bytes(b"No devices were found\nNo devices were found\n")
    assert event.count == 2


# ---- the default nvidia-smi table ------------------------------------------------------------


def test_table_new_layout_one_event_per_gpu_row():
    rows = events("nvsmi-table-a6000x9-550.txt")
    assert [e.kind for e in rows] == ["gpu-state"] * 9  # the banner's versions live on the rows
    assert [e.fields["gpu_index"] for e in rows] == list(range(9))
    assert [(e.where.line, e.where.end_line) for e in rows[:2]] == [(8, 10), (12, 14)]
    first = rows[0].fields
    assert (first["nvsmi_version"], first["driver_version"],
            first["cuda_version"]) == ("550.127.05", "550.127.05", "12.4")
    assert (first["pci"], first["gpu_name"], first["pstate"]) == ("0000:4f:00.0", "NVIDIA RTX A6000", "P8")
    assert (first["fan_pct"], first["temp_c"], first["power_w"], first["power_cap_w"]) == (30, 28, 24, 300)
    assert (first["memory_used_mib"], first["memory_total_mib"], first["util_pct"]) == (1, 46068, 0)
    assert (first["ecc_volatile_uncorrectable"], first["compute_mode"], first["view"]) == (0, "Default", "table")
    assert "mig_mode" not in first and "err_cells" not in first  # MIG N/A; no ERR!
    assert rows[8].fields["pci"] == "0000:d6:00.0"
    assert "| NVIDIA-SMI 550.127.05" in rows[0].text and "|   0  NVIDIA RTX A6000" in rows[0].text


def test_table_old_and_530_layouts_each_with_their_banner():
    titan, rtx = events("nvsmi-table-515-and-530.txt")
    assert (titan.fields["driver_version"], titan.fields["gpu_name"], titan.fields["power_cap_w"]) == (
        "515.65.01", "NVIDIA TITAN V", 250)
    assert "ecc_volatile_uncorrectable" not in titan.fields  # the cell says N/A
    assert (rtx.fields["nvsmi_version"], rtx.fields["driver_version"]) == ("530.47", "531.68")
    assert (rtx.fields["memory_used_mib"], rtx.fields["util_pct"], rtx.fields["power_w"]) == (1029, 18, 16)
    assert rtx.where.line == 28


def test_table_err_cells(database):
    [lone] = events("nvsmi-table-err-power.txt")
    assert lone.fields["err_cells"] == ["power"] and lone.fields["err_count"] == 1
    assert lone.fields["power_cap_w"] == 250 and "power_w" not in lone.fields
    assert lone.fields["pci"] == "8ed0:00:00.0"  # Azure's Hyper-V PCI domain
    assert signatures_for(database, [lone]) == {"nvsmi-table-err-single"}
    healthy, lost = events("nvsmi-table-err-gsp.txt")
    assert "err_cells" not in healthy.fields and healthy.fields["mig_mode"] == "Disabled"
    assert lost.fields["err_cells"] == ["name", "ecc", "fan", "temp", "perf", "power", "power_cap", "util", "mig_mode"]
    assert (lost.fields["pci"], lost.fields["gpu_index"], lost.fields["memory_total_mib"]) == ("0000:91:00.0", 5, 81920)
    assert "gpu_name" not in lost.fields
    assert signatures_for(database, [healthy, lost]) == {"nvsmi-table-err-cells"}


def test_table_ecc_count_fires_the_ecc_signature(database):
    text = (DATA / "nvsmi-table-a6000x9-550.txt").read_bytes().replace(
        b"Off |                    0 |\n| 30%   29C    P8             18W",
        b"Off |                    2 |\n| 30%   29C    P8             18W")
    second = parse_bytes(text)[1]
    assert second.fields["ecc_volatile_uncorrectable"] == 2
    assert signatures_for(database, [second]) == {"nvsmi-ecc-uncorrectable"}


# ---- issue 13: nvidia-smi printing the same table for days --------------------------------------

def test_nvidia_smi_loop_of_err_rows_folds_as_it_is_read(tmp_path):
    """`nvidia-smi -l` repeating a table with a lost GPU (ERR! cells) 20,000 times: the rows fold while the
    log is read, the lost GPU is still reported, and a repeated one-line error keeps its full count."""
    from postmortem import pipeline

    table = (DATA / "nvsmi-table-err-gsp.txt").read_text()
    path = tmp_path / "smi-loop.log"
    with open(path, "w") as out:
        for i in range(20_000):
            out.write(f"Tue Dec  1 11:{i // 60 % 60:02d}:{i % 60:02d} 2026\n{table}")
            out.write("Failed to initialize NVML: Driver/library version mismatch\n")
    report = pipeline.analyze([str(path)])
    lost = [e for e in report.events if e.kind == "gpu-state" and e.fields.get("err_cells")]
    assert lost and all(e.fields["pci"] == "0000:91:00.0" for e in lost)
    [nvml] = [e for e in report.events if e.kind == "nvml-error"]
    assert nvml.count == 20_000
    assert len(report.events) < 20


# NVML's return codes in every wording its clients print (data/nvml-returns.tsv), from real posts: T-Rex
# (trexminer/T-Rex#230, also PhoenixMiner's line quoted there), Slurm (LSSI-ETH/plmfit#40), pynvml (rossumai/nvgpu#6),
# NiceHash (nicehash/NiceHashMiner#1695), T-Rex's code 1 (trexminer/T-Rex#108).
NVML_RETURNS = [
    ("WARN: NVML: can't get GPU #0, error code 15", "NVML_ERROR_GPU_IS_LOST", "gpu-off-bus"),
    ("2021.09.24:22:57:10.022: hwmc GPU2: unable to get fan speed - GPU is lost (15)", "NVML_ERROR_GPU_IS_LOST",
     "gpu-off-bus"),
    ("slurmstepd: error: NVML: Failed to get usage(15): GPU is lost", "NVML_ERROR_GPU_IS_LOST", "gpu-off-bus"),
    ("NVMLError_GpuIsLost: GPU is lost", "NVML_ERROR_GPU_IS_LOST", "gpu-off-bus"),
    ("[2019-07-25 07:05:13] [ERROR] [NVML] System.Exception: NVML power get failed with status: GPUIsLost",
     "NVML_ERROR_GPU_IS_LOST", "gpu-off-bus"),
    ("20201211 21:00:17 WARN: NVML error, code 1", "NVML_ERROR_UNINITIALIZED", "unknown"),
]


@pytest.mark.parametrize(("line", "name", "cause"), NVML_RETURNS)
def test_an_nvml_return_code_in_each_clients_wording(line, name, cause):
    from postmortem.pipeline import analyze_text

    report = analyze_text(line + "\n")
    [error] = [e for e in report.events if e.kind == "nvml-error"]
    assert error.fields["nvml_return"] == name
    assert (report.findings[0].cause if report.findings else "unknown") == cause


def test_nvml_return_codes_read_by_number_name_camelcase_and_text():
    from postmortem.knowledge import nvml_return, nvml_returns

    for row in nvml_returns():
        assert nvml_return(row.number) == row and nvml_return(row.name) == row
        camel = "".join(part.capitalize() for part in row.name.removeprefix("NVML_ERROR_").split("_"))
        assert nvml_return(camel) == row or row.number == 0, camel
    assert nvml_return("GPU requires reset").cause == "gpu-hang"
    assert nvml_return("a GPU") is None


@pytest.mark.parametrize("text", [
    # pytorch/ci-infra#552 (EKS H100/B200 nodes) and a public note on a p5 node
    "[ERROR] not all local fabric manager instances finished their configuration\n[ERROR] fabric manager error "
    "handler is called for unhandled config error type 8\n[ERROR] failed to configure all the available GPUs or "
    "NVSwitches\n",
    "- **Bad GPU hardware passes every readiness check.** On one p5, `nvidia-fabricmanager`\n  failed (`failed to "
    "configure all the available GPUs or NVSwitches`; `nvidia-smi -q`\n",
])
def test_fabric_manager_that_could_not_set_up_the_fabric(text):
    from postmortem.pipeline import analyze_text

    report = analyze_text(text)
    assert (report.findings[0].signature, report.findings[0].cause) == ("fm-setup-failed", "gpu-nvlink")


def test_gpud_xid_verdicts_are_xid_events(tmp_path):
    """gpud's Xid component states what it read (`XID 79(GPU has fallen off the bus) detected on PCI:...`): the
    same xid event, with the kernel's field names, so the Xid signatures fire; its state and its event of one Xid
    fold into one."""
    found = events("gpud-xid-states-events.json.txt")
    assert [(e.kind, e.fields["xid"], e.fields["pci"], e.count) for e in found] == [
        ("xid", 74, "0000:04:00", 2), ("xid", 79, "0000:04:00", 1)]
    assert found[1].fields["message"] == "GPU has fallen off the bus" and found[1].fields["origin"] == "gpud"
    kernel = database_with(tmp_path, "kernel.yaml")
    assert signatures_for(kernel, found[1:]) == {"xid-79"} and signatures_for(kernel, found[:1]) == {"xid-74"}


DMON_XID = """\
#Entity   XIDER        EDVTL        POWER
ID                                  W
GPU 0     0            0            61.102
GPU 1     79           0            N/A
GPU 0     0            0            60.877
GPU 1     79           0            N/A
#Entity   XIDER        EDVTL        POWER
ID                                  W
GPU 0     0            2            60.902
GPU 1     79           0            N/A
"""
"""`dcgmi dmon -e 230,311,155`: no public capture shows a non-zero XIDER column, so this is the layout of the real
capture dcgmi-dmon-rtx2080ti.txt (DCGM's DeviceMonitor.cpp: `#Entity`, each field's short name from
dcgm_fields.cpp at its column, an `ID` unit line, `GPU N` rows, the header again every few rows) with XIDER (230) in
place of its utilisation columns: GPU 1 holds Xid 79, GPU 0 gains two uncorrectable ECC errors."""


def test_dcgmi_dmon_xid_and_ecc_columns(tmp_path):
    """A non-zero XIDER cell is an xid event of that GPU (the kernel's kind and fields, so xid-79 fires), once per
    code however many samples repeat it; a non-zero EDVTL is the -q report's uncorrectable ECC count."""
    found = parse_bytes(DMON_XID.encode(), "dmon.txt")
    [xid_event] = [e for e in found if e.kind == "xid"]
    assert (xid_event.fields["xid"], xid_event.fields["gpu_index"], xid_event.fields["origin"]) == (79, 1, "dcgm")
    assert xid_event.where.line == 4 and "XIDER" in xid_event.text
    [state] = [e for e in found if e.kind == "gpu-state"]
    assert state.fields["gpu_index"] == 0 and state.fields["ecc_volatile_uncorrectable"] == 2
    assert state.where.line == 9
    kernel = database_with(tmp_path, "kernel.yaml", "gpu_tools.yaml")
    assert signatures_for(kernel, [xid_event]) == {"xid-79"}
    assert signatures_for(kernel, [state]) == {"nvsmi-ecc-uncorrectable"}


def test_dcgmi_dmon_zero_counts_are_healthy():
    """The real capture: ECC counts (ESVTL, EDVTL) of 0 on every sample give no event; a header and unit line
    alone give none either."""
    assert events("dcgmi-dmon-rtx2080ti.txt") == []
    assert parse_bytes(b"#Entity   XIDER        EDVTL\nID\n", "dmon.txt") == []


HEALTH_CHECK = """\
+---------------------------+------------------------------------------------+
| Health Monitor Report                                                      |
+===========================+================================================+
| Overall Health            | Warning                                        |
| GPU                       |                                                |
| -> 0                      | Warning                                        |
|    -> Errors              |                                                |
|       -> PCIe system      | Warning                                        |
|                           | Detected more than 8 PCIe replays per minute   |
|                           | for GPU 0 : 13                                 |
| -> 1                      | Healthy                                        |
+---------------------------+------------------------------------------------+
"""
"""`dcgmi health -c`: no public paste of it was found (only screenshots), so this is the tree DCGM's own unit test
of the command checks line by line (dcgmi/tests/HealthTests.cpp, `Health::GenerateOutputFromResponse`: the
`Overall Health` row, `-> N` per entity, `-> <system>` per incident, the message wrapped under it) with the
PCIe replay message DCGM writes (DCGM_FR_PCI_REPLAY_RATE, data/dcgm-fr.tsv) in place of the test's filler text."""


def test_dcgmi_health_check_report():
    """Each incident under a GPU is a dcgm-health event like the host engine's, its wrapped message joined; the
    healthy GPU and the overall verdict give none."""
    [incident] = parse_bytes(HEALTH_CHECK.encode(), "health.txt")
    assert incident.kind == "dcgm-health"
    assert (incident.fields["system"], incident.fields["level"], incident.fields["gpu_index"]) == ("PCIe", "warning", 0)
    assert incident.fields["message"] == "Detected more than 8 PCIe replays per minute for GPU 0 : 13"
    assert (incident.where.line, incident.where.end_line) == (8, 10)
    healthy = HEALTH_CHECK.replace("| Warning      ", "| Healthy      ").splitlines()
    assert parse_bytes(("\n".join(healthy[:6] + healthy[10:]) + "\n").encode(), "health.txt") == []


def test_a_dcgm_field_by_name_is_its_health_reading_and_a_query_of_it_is_none():
    """dcgm-exporter's metric as a reporter quoted it (NVIDIA/DCGM#235: the last Xid in the `err_code` label), and
    a Prometheus query over the same metric (NVIDIA/dcgm-exporter#309), which names codes but reports none."""
    from postmortem.pipeline import analyze_text

    quoted = ('DCGM_FI_DEV_XID_ERRORS{err_code="45", err_msg="Preemptive cleanup, due to previous errors -- Most '
              'likely to see when running multiple cuda", job="dcgm-exporter"}\n')
    [event] = [e for e in analyze_text(quoted).events if e.kind == "xid"]
    assert (event.fields["xid"], event.fields["origin"]) == (45, "dcgm-exporter")
    assert event.fields["message"].startswith("Preemptive cleanup")
    query = ('max(DCGM_FI_DEV_XID_ERRORS{err_code=~"4|8|9|12|13|24|30|31|37|38|43|48|54|74|119|140|143"}) by '
             '(Hostname, DCGM_FI_DRIVER_VERSION, device, gpu, modelName, err_msg)\n')
    help_line = "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
    for text in (query, help_line, "| `DCGM_FI_DEV_ROW_REMAP_FAILURE` | 0 |\n"):
        assert not analyze_text(text).events, text
    [state] = analyze_text("| `DCGM_FI_DEV_ROW_REMAP_FAILURE` | 1 |\n").events
    assert (state.kind, state.fields["remap_failure"]) == ("gpu-state", True)


def test_the_recovery_action_of_a_q_report_and_of_its_line_alone(database):
    """A real -q report (driver 566.36) says None: no reading. The same report as the faulted GPU of
    utkuozdemir/nvidia_gpu_exporter#393 printed it (its diff with a healthy GPU was this one field, `Reset`) asks for a
    reset, and so does the field's line pasted alone or in NVML's enum spelling; the signature fires on each."""
    healthy = (DATA / "nvsmi-q-rtx4070-laptop-566.txt").read_text(encoding="utf-8")
    [gpu] = parse_bytes(healthy.encode())
    assert "recovery_action" not in gpu.fields and gpu.fields["gpu_name"] == "NVIDIA GeForce RTX 4070 Laptop GPU"
    assert "nvsmi-recovery-action" not in signatures_for(database, [gpu])
    field = "GPU Recovery Action                   : "
    faulted = healthy.replace(field + "None", field + "Reset")
    assert faulted != healthy
    [gpu] = parse_bytes(faulted.encode())
    assert gpu.fields["recovery_action"] == "Reset" and "GPU Recovery Action                   : Reset" in gpu.text
    assert "nvsmi-recovery-action" in signatures_for(database, [gpu])
    for line, action in (("    GPU Recovery Action                   : Reset", "Reset"),
                         ("    GPU Recovery Action                   : GPU_RESET", "GPU_RESET"),
                         ("    GPU Recovery Action                   : NONE", None)):
        found = parse_bytes((line + "\n").encode())
        assert [e.fields.get("recovery_action") for e in found] == ([action] if action else []), line


FABRIC_HEALTHY = ("    Fabric\n        State                             : Completed\n"
                  "        Status                            : Success\n        CliqueId                          : 2\n"
                  "        Health\n            Summary                       : Healthy\n"
                  "            Bandwidth                     : Full\n")


@pytest.mark.parametrize(("text", "fields"), [
    # kubernetes-sigs/dra-driver-nvidia-gpu#626: a GB200 node whose fabric registered but reports itself unhealthy
    (FABRIC_HEALTHY.replace(": Healthy", ": Unhealthy"), {"fabric_health": "Unhealthy"}),
    # Azure/azhpc-images#506: registration completed without success (no clique, no cluster)
    ("Fabric\n    State                             : Completed\n    Status                            : Insufficient "
     "Resources\n    CliqueId                          : 0\n    ClusterUUID                       : "
     "00000000-0000-0000-0000-000000000000\n", {"fabric_status": "Insufficient Resources"}),
    # the health rows of a GB300 tray's report (NVIDIA/k8s-test-infra#677) with one fault shown
    (FABRIC_HEALTHY.replace(": Full", ": Degraded"), {"fabric_faults": ["Bandwidth"]}),
])
def test_an_nvlink_fabric_unhealthy_or_not_registered_is_read_from_its_section(database, text, fields):
    found = parse_bytes(text.encode())
    assert [(e.kind, {k: e.fields[k] for k in fields}) for e in found] == [("gpu-state", fields)]
    assert signatures_for(database, found) == {"nvsmi-fabric-unhealthy"}


def test_a_healthy_or_unsupported_fabric_says_nothing():
    assert parse_bytes(FABRIC_HEALTHY.encode()) == []
    # gpud's table of an H100's fabric (leptonai/gpud#1108): every value "Not Supported"
    assert parse_bytes(b"    Fabric\n        State : Not Supported\n        Status : Success\n        Health\n"
                       b"            Summary : Not Supported\n            Bandwidth : Not Supported\n") == []
