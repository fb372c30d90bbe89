"""nvidia-smi --query-gpu CSV logs and nvidia-smi dmon output: per-GPU series and the events they raise.

Files under data/gpu_telemetry are real captures (SOURCES.md). Leaks, stuck and vanishing GPUs appear in
no public log we found, so those tests start from a real header and real rows and change the values in
the test (said at each one).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from helpers import parse_alone
from postmortem.pipeline import analyze_text
from postmortem.render import json_report
from postmortem.render.json_report import as_dict
from postmortem.sources import gpu_telemetry

DATA = Path(__file__).parent / "data" / "gpu_telemetry"
H200 = (DATA / "query-gpu-h200.csv").read_text()
HEADER = ("timestamp, index, name, pci.bus_id, temperature.gpu, utilization.gpu [%], memory.used [MiB], "
          "memory.total [MiB]")
ROW = "{t}, {i}, NVIDIA A100-SXM4-40GB, 00000000:3B:00.0, 44, {u} %, {m} MiB, 40960 MiB"
"""A real A100 row (query-gpu-a100-nodata.csv) with index, utilisation and memory as placeholders."""


def events(text: str):
    return [e for e in parse_alone(gpu_telemetry, text.encode(), "t.csv") if e.kind != "gpu-series"]


def series(text: str):
    return {e.fields["series"].gpu: e.fields["series"] for e in parse_alone(gpu_telemetry, text.encode(), "t.csv")
            if e.kind == "gpu-series"}


def rows(count: int, minutes: float, util, memory) -> str:
    """A CSV of `count` samples `minutes` apart; util/memory are functions of the sample number."""
    out = [HEADER]
    for n in range(count):
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(1717236000 + n * minutes * 60)) + ".177"
        out.append(ROW.format(t=stamp, i=0, u=util(n), m=memory(n)))
    return "\n".join(out) + "\n"


def test_real_h200_csv_gives_one_series_per_gpu_and_no_event():
    found = series(H200)
    assert set(found) == {"0000:5d:00.0", "0000:9b:00.0"}
    first = found["0000:5d:00.0"]
    assert len(first.frame) == 7 and first.dropped == 0
    assert first.frame["memory_used_mib"].tolist()[:2] == [20747, 20755]
    assert first.frame["util_pct"].tolist()[:3] == [6, 100, 6]
    assert first.frame["time"].iloc[0].isoformat() == "2026-02-12T15:30:35.110000"
    assert (first.source.line, first.source.end_line) == (2, 14)
    assert events(H200) == []


def test_real_dmon_log_ends_with_a_gpu_that_stopped_answering():
    raw = (DATA / "dmon-k80-lost.log").read_bytes()
    found = list(parse_alone(gpu_telemetry, raw, "dmon.log"))
    lost = [e for e in found if e.kind == "gpu-lost"]
    assert len(lost) == 1 and lost[0].fields["gpu"] == "0" and lost[0].where.line == 15
    assert lost[0].fields["last_good_line"] == 11
    assert "0     -     -     -" in lost[0].text
    report = analyze_text(raw.decode(), "dmon.log")
    assert report.verdict.signature == "telemetry-gpu-lost" and report.verdict.cause == "gpu-off-bus"
    assert [s.gpu for s in report.telemetry] == ["0", "1", "2", "3"]


def test_real_h100_dmon_under_load_is_quiet():
    report = analyze_text((DATA / "dmon-h100.log").read_text(), "dmon.log")
    [gpu] = report.telemetry
    assert gpu.frame["power_w"].tolist() == [631, 634, 633, 634, 636]
    assert gpu.frame["memory_temp_c"].tolist() == [57, 58, 58, 59, 59]
    assert report.findings == ()


def test_changed_header_order_units_and_na():
    """Real A100 rows with columns reordered, MB instead of MiB, [N/A] and [Not Supported] cells."""
    text = ("memory.used [MB], pci.bus_id, timestamp, temperature.gpu, power.draw [W]\n"
            "4 MB, 00000000:3B:00.0, 2024/06/01 11:27:05.177, 44, [N/A]\n"
            "1024 MB, 00000000:3B:00.0, 2024/06/01 11:27:06.177, [Not Supported], 61.20 W\n")
    [gpu] = series(text).values()
    assert gpu.frame["memory_used_mib"].tolist() == [4, 1024]
    assert gpu.frame["power_w"].isna().tolist() == [True, False]
    assert gpu.frame["temp_c"].isna().tolist() == [False, True]


def test_truncated_last_line_and_garbage_rows_are_dropped_not_fatal():
    lines = H200.splitlines()
    text = "\n".join([*lines[:5], "\x00\xff garbage, , ,", "not a row", *lines[5:9], lines[9][:30]])
    found = series(text)
    assert sum(s.dropped for s in found.values()) >= 1
    assert sum(len(s.frame) for s in found.values()) == 8
    report = analyze_text(text)
    assert report.inputs[0].format.endswith("gpu-telemetry")


def test_memory_that_only_grows_is_a_leak_with_its_rate():
    """Built: the real A100 row, memory growing 100 MiB a minute for 30 minutes."""
    [leak] = events(rows(31, 1, lambda n: 97, lambda n: 4000 + 100 * n))
    assert leak.kind == "gpu-memory-growth"
    assert leak.fields["slope_mib_per_min"] == 100.0 and leak.fields["growth_mib"] == 3000
    assert leak.fields["duration_s"] == 1800 and leak.fields["ends_full"] is False
    assert (leak.where.line, leak.where.end_line) == (2, 32)
    verdict = analyze_text(rows(31, 1, lambda n: 97, lambda n: 4000 + 100 * n)).verdict
    assert verdict.signature == "telemetry-memory-growth" and verdict.severity == "info"


def test_leak_ending_full_points_at_oom():
    """Built: the same rows growing until 40 800 of 40 960 MiB."""
    [leak] = events(rows(21, 1, lambda n: 97, lambda n: 20800 + 1000 * n))
    assert leak.fields["ends_full"] is True
    assert analyze_text(rows(21, 1, lambda n: 97, lambda n: 20800 + 1000 * n)).verdict.cause == "gpu-oom"


def test_sawtooth_memory_is_not_a_leak():
    """Built: memory rising and freed every 5 minutes (a normal training loop)."""
    assert events(rows(60, 1, lambda n: 97, lambda n: 4000 + 500 * (n % 5))) == []


def test_utilisation_frozen_with_memory_held_is_a_hang():
    """Built: 20 minutes at 0 % with 30 000 MiB held, after 5 busy minutes."""
    found = events(rows(26, 1, lambda n: 97 if n < 5 else 0, lambda n: 30000))
    [stuck] = [e for e in found if e.kind == "gpu-util-stuck"]
    assert stuck.fields["util_pct"] == 0 and stuck.fields["duration_s"] == 1200
    assert stuck.where.line == 7


def test_gpu_that_disappears_from_the_samples():
    """Built: the real H200 log with GPU 9B:00.0's rows removed after its third sample."""
    lines = H200.splitlines()
    kept = [line for n, line in enumerate(lines) if not ("9B:00.0" in line and n > 6)]
    [gone] = events("\n".join(kept) + "\n")
    assert gone.kind == "gpu-lost" and gone.fields["gpu"] == "0000:9b:00.0"
    assert gone.fields["reason"] == "samples stop" and gone.fields["cycles_after"] == 4


def test_lost_gpu_errors_in_csv_cells():
    """Built: a real H200 row whose values read as nvidia-smi prints them for a lost GPU."""
    text = H200 + ("2026/02/12 15:30:42.600, NVIDIA H200, 00000000:5D:00.0, "
                   "[GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]\n")
    [gone] = events(text)
    assert gone.kind == "gpu-lost" and gone.fields["reason"] == "values unreadable" and gone.where.line == 16


def test_json_telemetry_is_compact_and_bounded():
    report = analyze_text(rows(5000, 1 / 60, lambda n: 50, lambda n: 4000))
    data = json.loads(json.dumps(as_dict(report)))
    [gpu] = data["telemetry"]
    assert gpu["count"] == 5000 and len(gpu["samples"]) <= json_report.MAX_JSON_POINTS
    assert gpu["columns"][0] == "time" and gpu["samples"][0][0] == "2024-06-01T10:00:00.177000"


def test_two_hundred_thousand_rows_stay_fast():
    text = rows(200_000, 1 / 60, lambda n: 50, lambda n: 4000 + (n % 7))
    start = time.perf_counter()
    report = analyze_text(text)
    elapsed = time.perf_counter() - start
    assert len(report.telemetry[0].frame) == 200_000
    assert elapsed < 10, elapsed


def test_plain_log_does_not_import_pandas():
    """A log with no telemetry header never loads pandas (0.3 s at start-up)."""
    import subprocess
    code = ("import sys; from postmortem.pipeline import analyze_text; "
            "analyze_text('RuntimeError: CUDA error: out of memory\\nthe temperature.gpu, foo\\n'); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


HEALTH = """\
timestamp, index, pci.bus_id, ecc.errors.uncorrected.volatile.total, retired_pages.pending, remapped_rows.failure, \
gpu_recovery_action
2024/06/01 11:27:05.177, 0, 00000000:3B:00.0, 0, No, No, None
2024/06/01 11:27:05.188, 1, 00000000:8B:00.0, 0, No, No, None
2024/06/01 11:27:06.177, 0, 00000000:3B:00.0, [N/A], [N/A], [N/A], [N/A]
2024/06/01 11:27:06.188, 1, 00000000:8B:00.0, 2, Yes, No, Reset
2024/06/01 11:27:07.177, 0, 00000000:3B:00.0, 0, No, No, 0
2024/06/01 11:27:07.188, 1, 00000000:8B:00.0, 1, Yes, No, Drain and Reset
"""
"""`nvidia-smi --query-gpu=timestamp,index,pci.bus_id,<health fields> --format=csv -l 1`. No public capture shows
an unhealthy health column, so the header is built from the field names of `nvidia-smi --help-query-gpu`, the
timestamps and bus ids from the real A100 capture (query-gpu-a100-nodata.csv), and the values from the documented
value sets (counts, Yes/No, NVML's recovery actions None/Reset/Drain and Reset, `[N/A]` where unsupported)."""


def test_health_columns_of_a_query_csv_are_the_q_reports_gpu_state(tmp_path):
    """The unhealthy values of one GPU become one gpu-state event with the field names `nvidia-smi -q` gives (the
    worst count, the last recovery action), so the -q signatures fire; the healthy GPU gives none."""
    from helpers import database_with
    from postmortem.signatures import match

    [state] = [e for e in events(HEALTH) if e.kind == "gpu-state"]
    assert state.fields["pci"] == "0000:8b:00.0" and state.fields["gpu_index"] == 1
    assert state.fields["ecc_volatile_uncorrectable"] == 2 and state.fields["retired_pages_pending"] is True
    assert state.fields["recovery_action"] == "Drain and Reset" and "remap_failure" not in state.fields
    assert (state.where.line, state.where.end_line) == (5, 7) and state.text.startswith("timestamp, index")
    assert state.time.isoformat() == "2024-06-01T11:27:06.188000"
    database = database_with(tmp_path, "gpu_tools.yaml")
    assert {f.signature for f in match(database, [state])} == {"nvsmi-ecc-uncorrectable", "nvsmi-recovery-action"}


def test_a_recovery_action_alone_is_a_gpu_that_needs_a_reset_and_follows_the_fault_that_asked_for_it():
    """NVML's recovery action (issue 26: `gpu_recovery_action` `Reset` in a --query-gpu CSV) is the state Xid 154
    logs: a summary of an earlier failure, merged into it where the same reading holds the failure too."""
    alone = HEALTH.replace(", 2, Yes, No, Reset", ", 0, No, No, Reset").replace(", 1, Yes, No, Drain",
                                                                             ", 0, No, No, Drain")
    report = analyze_text(alone)
    assert [(f.signature, f.cause) for f in report.findings] == [("nvsmi-recovery-action", "gpu-hang")]
    [both] = analyze_text(HEALTH).findings  # one GPU's one reading: the fault leads, the action is merged into it
    assert (both.signature, both.merged) == ("nvsmi-ecc-uncorrectable", ("nvsmi-recovery-action",))


def test_a_query_of_health_fields_alone_is_read():
    """`--query-gpu=index,remapped_rows.failure`: one plotted field is too few for a series, not for health."""
    text = "index, remapped_rows.failure\n0, No\n1, Yes\n"
    [state] = events(text)
    assert state.kind == "gpu-state" and state.fields == {"gpu_index": 1, "remap_failure": True, "view": "query-csv"}


def test_healthy_health_columns_give_nothing():
    """Zero counts, No, None, 0 and [N/A] cells, and the header row itself, are no finding."""
    healthy = "\n".join(line for line in HEALTH.splitlines() if ", 00000000:8B:00.0, " not in line) + "\n"
    assert [e for e in events(healthy) if e.kind == "gpu-state"] == []
    assert events(HEALTH.splitlines()[0] + "\n") == []
