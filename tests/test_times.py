"""Times that do not lie (issue 15): a year-less syslog time stays year-less in every output, and an
uptime-stamped dmesg still gets a timeline, on a relative axis.

All inputs are real logs from the corpus, run through `postmortem analyze` as a user runs it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from postmortem.cli import main

CORPUS = Path(__file__).parent / "corpus"
YEARLESS = [
    # (input, a stamp as the file writes it)
    (CORPUS / "drv-xid62-pmu-halted-gsp-01" / "journal.txt", "Mar 11 10:37:00"),
    (CORPUS / "drv-edac-ce-dimm-syslog-01" / "syslog", "May  7 06:45:12"),
]
UPTIME_ONLY = [
    (CORPUS / "drv-gpuburn-k40m-aer-surprise-down-xid79-01" / "dmesg.txt", "74785.660"),
    (Path(__file__).parent / "data" / "kernel_log" / "xid31-fault-pde-tinygrad-01.dmesg.txt", "22859.082"),
]


def analyze(path: Path, fmt: str) -> str:
    result = CliRunner().invoke(main, ["analyze", "--format", fmt, str(path)], catch_exceptions=False)
    assert result.exit_code == 0
    return result.output


@pytest.mark.parametrize(("path", "stamp"), YEARLESS, ids=lambda v: getattr(v, "parent", Path(str(v))).name)
def test_a_year_less_time_is_shown_as_written_never_with_a_made_up_year(path, stamp):
    report = json.loads(analyze(path, "json"))
    kernel = [e for e in report["events"] if e["clock"] == "wall-no-year"]
    assert kernel and all(e["time"] is None for e in kernel)
    assert stamp in {e["fields"]["stamp"] for e in kernel}
    assert any(f["first_seen"] == stamp for f in report["findings"])
    text, html = analyze(path, "text"), analyze(path, "html")
    note = f"{len(kernel)} event(s) have times without a year: shown as written, not placed on the wall clock."
    assert note in " ".join(text.split()) and note in html
    assert stamp in text.split("Timeline:\n", 1)[1] and f'<td class="nowrap">{stamp}</td>' in html
    for output in (json.dumps(report), text, html):
        assert not re.search(r"\b1[89]\d\d-\d\d-\d\d", output)  # no placeholder year, in any spelling


@pytest.mark.parametrize(("path", "first"), UPTIME_ONLY, ids=lambda v: getattr(v, "parent", Path(str(v))).name)
def test_uptime_only_dmesg_gets_a_timeline_in_seconds_since_boot(path, first):
    text, html = analyze(path, "text"), analyze(path, "html")
    axis = "Times in seconds since boot: the kernel log gives no wall-clock time"
    timeline = text.split("Timeline:\n", 1)[1]
    assert axis in " ".join(timeline.split()) and f"  {first} s  " in timeline
    assert axis in html and '<svg class="timeline"' in html and f">{first} s</text>" in html
    assert "No event carries a time" not in html


def test_glog_and_vllm_stamps_put_every_input_on_the_timeline(tmp_path):
    """Issue 27: a training log's events have times too. glog's `E1206 18:44:12.715298746` and vLLM's
    `ERROR 09-14 03:15:31` carry no year; they are year-less until a dated input lends one (join.infer_years)."""
    data = Path(__file__).parent / "data"
    alone = json.loads(analyze(data / "nccl_log" / "timeout-llamafactory.log", "json"))
    stamped = [e for e in alone["events"] if e["kind"] == "nccl-timeout"]
    assert stamped and all(e.get("time") is None and e["fields"]["stamp"].startswith("Dec 06 18:44:1")
                           for e in stamped)
    vllm = json.loads(analyze(data / "framework_log" / "illegal-addr-vllm-02.log", "json"))
    assert any(e["fields"].get("stamp") == "Sep 14 03:15:31" for e in vllm["events"])
    dmesg = tmp_path / "dmesg.txt"
    dmesg.write_text("[Fri Dec  6 18:40:12 2024] NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, "
                     "GPU has fallen off the bus.\n")
    result = CliRunner().invoke(main, ["analyze", str(data / "nccl_log" / "timeout-llamafactory.log"), str(dmesg)])
    timeline = result.output[result.output.index("Timeline:"):]
    assert re.search(r"2024-12-06 18:40:12 .* xid", timeline)
    assert re.search(r"2024-12-06 18:44:12 .* nccl-timeout .*timeout-llamafactory.log:1\b", timeline)
