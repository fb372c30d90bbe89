"""Every NVRM wording the NVIDIA kernel module prints is classified by cause, not left to the generic row.

tests/data/nvrm-catalog.tsv lists the driver's own print calls (tools/gen_nvrm_catalog.py reads them from
github.com/NVIDIA/open-gpu-kernel-modules). Each error or warning format is rendered with plausible values
as the kernel log line a user would paste and read by the kernel-log source: it must become an event of its
own family (or a dedicated kind: off the bus, init failed), or be a wording data/nvrm-messages.tsv names
as info. The real-line tests run the whole pipeline on lines users posted and check the finding's cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import catalog_rows, parse_alone, printf_filled
from postmortem import knowledge, pipeline
from postmortem.model import Event
from postmortem.sources import kernel_log

CATALOG = Path(__file__).parent / "data" / "nvrm-catalog.tsv"
REPORTED_LEVELS = ("error", "warning")
"""Levels a release driver prints (nv_printf's default threshold is NV_DBG_WARNINGS)."""
DEDICATED_KINDS = ("gpu-off-bus", "gpu-init-failed", "xid")
"""Kinds the kernel-log source gives a wording before the NVRM family table is consulted."""
GENERIC_FAMILY = "error"
"""The table's catch-all error row: a wording that lands there has a cause only where its function's subsystem
(data/nvrm-subsystems.tsv: `RmInitAdapter` -> init -> gpu-off-bus) names one."""

_VALUES = {"s": "sample", "p": "00000000deadbeef", "%": "%", "c": "x"}


@dataclass(frozen=True)
class Wording:
    format: str
    file: str
    level: str


def catalog() -> list[Wording]:
    return [Wording(row["format"], row["file"], row["level"]) for row in catalog_rows(CATALOG)]


def render(wording: Wording, uptime: int) -> list[str]:
    """The kernel log lines one print of the wording makes (a `\\n` inside the format starts a new line)."""
    text = printf_filled(wording.format, _VALUES).replace('\\"', '"').replace("\\t", " ").replace("\\\\", "\\")
    return [f"[{uptime:5d}.123456] {part}" for part in text.split("\\n") if part.strip()]


def classification(wording: Wording) -> str:
    """What the reader makes of the wording: its event kind and family, or the table row that calls it info."""
    lines = render(wording, 123)
    events: list[Event] = parse_alone(kernel_log, "\n".join(lines).encode(), use_hyperscan=False)
    first = [e for e in events if e.where.line == 1]
    if first and first[0].kind == "driver-message":
        family, cause = first[0].fields["family"], first[0].fields.get("driver_cause")
        return f"driver-message:{family}" if family != GENERIC_FAMILY or cause is None else f"driver-message:{cause}"
    if first:
        return first[0].kind if first[0].kind in DEDICATED_KINDS else "unclassified"
    said = kernel_log._NVRM.match("NVRM: " + " ".join(line.split("NVRM: ", 1)[-1] for line in lines))
    rows = knowledge.driver_messages()  # `message`: the words after `GPU <pci>: ` and `<function>: `, lines joined
    found = knowledge.driver_message(said["message"]) if said else None
    return "info" if found is not None and found.family == "info" and found is not rows[-1] else "unclassified"


def _unclassified() -> list[str]:
    missed = []
    for wording in catalog():
        if wording.level not in REPORTED_LEVELS:
            continue
        got = classification(wording)
        if got == "unclassified" or got == f"driver-message:{GENERIC_FAMILY}":
            missed.append(f"{wording.file}: {wording.format} -> {got}")
    return missed


def test_catalog_is_the_driver_whole():
    wordings = catalog()
    reported = [w for w in wordings if w.level in REPORTED_LEVELS]
    assert len(reported) > 400, len(reported)
    assert all(w.format.startswith("NVRM") for w in wordings)
    assert any("RmInitAdapter failed!" in w.format for w in reported)
    assert any("fallen off the bus" in w.format for w in reported)


def test_every_reported_wording_is_classified():
    missed = _unclassified()
    assert not missed, f"{len(missed)} wordings unclassified:\n" + "\n".join(missed)


def test_render_makes_the_lines_a_user_pastes():
    wording = Wording(r"NVRM: GPU %04x:%02x:%02x.%x: RmInitAdapter failed! (0x%x:0x%x:%d)\n", "x.c:1", "error")
    assert render(wording, 7) == ["[    7.123456] NVRM: GPU 0000:00:00.0: RmInitAdapter failed! (0x0:0x0:0)"]


# --- lines users posted: the finding names the cause ------------------------------------------------------
POSTED = [
    # (lines as posted, signature and cause of the top finding, where they were posted)
    ("[ 1428.836717] NVRM: Can't find an IRQ for your NVIDIA card!\n"
     "[ 1428.836718] NVRM: Please check your BIOS settings.\n"
     "[ 1428.836718] NVRM: [Plug & Play OS] should be set to NO\n"
     "[ 1428.836719] NVRM: [Assign IRQ to VGA] should be set to YES \n"
     "[ 1428.836721] nvidia: probe of 0000:01:00.0 failed with error -1\n",
     "nvrm-irq-unavailable", "pcie-bus", "https://github.com/Bumblebee-Project/Bumblebee/issues/638"),
    ("[ 9687.215135] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n"
     "[ 9687.215145] NVRM: This can occur when a driver such as nouveau, rivafb,\n"
     "[ 9687.215149] NVRM: nvidiafb, or rivatv was loaded and obtained ownership of\n"
     "[ 9687.215153] NVRM: the NVIDIA device(s).\n"
     "[ 9687.215161] NVRM: Try unloading the conflicting kernel module (and/or\n"
     "[ 9687.215165] NVRM: reconfigure your kernel without the conflicting\n"
     "[ 9687.215168] NVRM: driver(s)), then try loading the NVIDIA kernel module\n"
     "[ 9687.215172] NVRM: again.\n"
     "[ 9687.215178] NVRM: No NVIDIA graphics adapter probed!\n",
     "nvrm-conflicting-driver", "driver-mismatch", "https://github.com/MrMEEE/ironhide/issues/41"),
    ("[  139.881407] NVRM: failed to copy vbios to system memory.\n"
     "[  139.885299] NVRM: RmInitAdapter failed! (0x30:0xffffffff:858)\n"
     "[  139.885306] NVRM: rm_init_adapter(0) failed\n",
     "nvrm-init-step-failed", "gpu-off-bus", "https://github.com/Bumblebee-Project/Bumblebee/issues/204"),
    ("[   21.238204] NVRM: osInitNvMapping: *** Cannot attach gpu\n"
     "[   21.238209] NVRM: RmInitAdapter: osInitNvMapping failed, bailing out of RmInitAdapter\n"
     "[   21.238218] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)\n"
     "[   21.238720] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0\n",
     "nvrm-error-init", "gpu-off-bus", "https://github.com/Cyridd/cmpunlocker/issues/4"),
]


@pytest.mark.parametrize(("text", "signature", "cause", "source"), POSTED, ids=[p[1] for p in POSTED])
def test_posted_lines_finding_cause(text: str, signature: str, cause: str, source: str):
    findings = pipeline.analyze_text(text, name="kern.log").findings
    assert findings and findings[0].cause == cause, (findings, source)
    assert signature in [f.signature for f in findings if f.cause == cause], (findings, source)


def test_posted_advice_line_is_no_finding():
    """The driver's deprecation notice reports no fault (posted in fgci-org/ansible-role-cuda#22)."""
    line = ("[  612.118000] NVRM: Persistence mode is deprecated and will be removed in a future release. "
            "Please use nvidia-persistenced instead.\n")
    assert not pipeline.analyze_text(line, name="kern.log").findings
