"""nvidia-bug-report.log: its sections, the driver it names, and the PCIe links of the GPUs.

The script writes one file of sections, each opened by a line of 44
underscores and a header line (`*** /proc/driver/nvidia/version`,
`/usr/bin/lspci -nnDvvvxxxx`, `journalctl -b -0`, ...). The other sources
already find Xid lines, `nvidia-smi -q` reports and the rest anywhere in a
text; this module adds what only a bug report holds (the loaded module's
version, `lspci -vvv` link status) and, through `name_sections`, tells the
pipeline which section every event of a bug report came from.

Sections are found from the delimiter lines alone (they are this source's
anchors), so the file is never read whole: one short read per delimiter.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import regex

from .. import later
from ..model import Event
from ..text import Line, TextDoc

NAME = "nvidia-bug-report"
DELIMITER = "_" * 44
ANCHORS = (
    DELIMITER.encode(),
    b"nvidia-bug-report.sh Version:",
    b"NVRM version:",
    b"LnkSta:",
    b"[10de:",
)

HEADER_LINES = 3
"""Lines after a delimiter searched for the section header (the script prints one blank line)."""
DEVICE_LINES = 80
"""Lines above a LnkSta line searched for its device's lspci header."""
SAMPLE = 4096
"""Bytes of each section checked for binary data."""
BINARY_SHARE = 0.1
"""Share of control bytes above which a section is called binary."""
EXPECTED = (
    ("the loaded driver version (/proc/driver/nvidia/version)", ("/proc/driver/nvidia/version",)),
    ("PCIe details (lspci -vvv)", ("lspci -nnDvvv", "lspci -vvv", "lspci -nnvvv")),
    ("the kernel log (dmesg or journalctl -b -0)", ("dmesg", "journalctl -b -0", "/var/log/messages", "kern.log")),
)
"""Sections a complete report has: (what is lost without it, header substrings that provide it)."""

_DEVICE = later.compile(  # an lspci device line, also with a label in front (`Card: 01:00.0 VGA ...`)
    r"^(?:\w+:\s+)?(?P<pci>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (?P<what>[^:]+): (?P<name>.*)$")
_NVIDIA = later.compile(r"\[10de:[0-9a-fA-F]{4}\]|NVIDIA Corporation")
_SECONDARY = later.compile(r"Bus: primary=\w+, secondary=(?P<bus>[0-9a-fA-F]+)")
_LINK = later.compile(r"Speed (?P<speed>[\d.]+)GT/s(?: \((?P<speed_note>\w+)\))?, Width x(?P<width>\d+)"
                      r"(?: \((?P<width_note>\w+)\))?")
_DL_ACTIVE = later.compile(r"\bDLActive(?P<state>[+-])")
_NVRM = later.compile(
    r"NVRM version: NVIDIA UNIX (?P<flavour>Open )?(?:\S+ )?Kernel Module"
    r"(?: for \S+)?\s+(?P<version>\d+\.\d+(?:\.\d+)?)")
_GCC = later.compile(r"^\s*+GCC version:\s*+(?:gcc version )?(?P<gcc>\S(?:.*\S)?)\s*$")
_BANNER = later.compile(r"nvidia-bug-report\.sh Version: (?P<version>\d+)")
_UNAME = later.compile(r"^uname: Linux (?P<host>\S+) (?P<kernel_version>\d+\.\d+\S*)")


@dataclass(frozen=True)
class Section:
    """One section: the header it was printed under and the 1-based line where its delimiter is."""

    name: str
    line: int
    start: int


@dataclass
class _Link:
    """One device's link block in `lspci -vvv` output."""

    header: Line
    cap: Line | None
    sta: Line
    fields: dict[str, Any]
    secondary: str | None = None


# --- events ----------------------------------------------------------------------
def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """The report banner, the driver version and the PCIe link state of GPUs and the ports above them."""
    gpus: dict[str, str] = {}
    links: list[_Link] = []
    for line in lines:
        text = line.text
        if m := _BANNER.search(text):
            yield _banner(doc, line, m)
        elif m := _NVRM.search(text):
            yield _driver(doc, line, m)
        elif "LnkSta:" in text:
            if link := _link(doc, line):
                links.append(link)
        elif (m := _DEVICE.match(text.strip())) and _NVIDIA.search(text):
            gpus.setdefault(_bus(m["pci"]), m["pci"])
    for link in links:
        if event := _link_event(doc, link, gpus):
            yield event


def _banner(doc: TextDoc, line: Line, m: regex.Match) -> Event:
    """`nvidia-bug-report.sh Version: N` with the host and kernel from the `uname:` line under it."""
    fields: dict[str, Any] = {"script_version": m["version"]}
    last = line
    for nxt in doc.following(line, 6):
        if u := _UNAME.match(nxt.text):
            fields.update(host=u["host"], kernel_version=u["kernel_version"])
            last = nxt
            break
    return doc.event("bug-report", line, fields, last=last)


def _driver(doc: TextDoc, line: Line, m: regex.Match) -> Event:
    """/proc/driver/nvidia/version: the module actually loaded, and the compiler that built it."""
    fields: dict[str, Any] = {"driver_version": m["version"],
                              "kernel_module": "open" if m["flavour"] else "proprietary"}
    last = line
    for nxt in doc.following(line, 1):
        if g := _GCC.match(nxt.text):
            fields["gcc_version"] = g["gcc"]
            last = nxt
    return doc.event("environment", line, fields, last=last)


def _link(doc: TextDoc, sta: Line) -> _Link | None:
    """The LnkSta line with its LnkCap line and its device's header line, read upwards."""
    now = _LINK.search(sta.text)
    if now is None:
        return None
    header = cap = None
    secondary = None
    link_reporting = False
    for above in reversed(doc.preceding(sta, DEVICE_LINES)):
        text = above.text
        if cap is None and "LnkCap:" in text:
            cap = above
        elif "LLActRep+" in text and cap is None:
            link_reporting = True
        if m := _SECONDARY.search(text):
            secondary = m["bus"].lower()
        if _DEVICE.match(text):
            header = above
            break
    if header is None:
        return None
    fields = _link_fields(cap, now, sta)
    status = " ".join(l.text for l in [sta, *doc.following(sta, 1)])
    if link_reporting and (active := _DL_ACTIVE.search(status)):
        fields["link_active"] = active["state"] == "+"  # only meaningful where the port reports it (LLActRep+)
    return _Link(header, cap, sta, fields, secondary)


def _link_fields(cap: Line | None, now: regex.Match, sta: Line) -> dict[str, Any]:
    """Capable vs current speed and width; downgraded when lspci says so or the numbers show it."""
    fields: dict[str, Any] = {"sta_speed": float(now["speed"]), "sta_width": int(now["width"])}
    was = _LINK.search(cap.text) if cap else None
    if was:
        fields.update(cap_speed=float(was["speed"]), cap_width=int(was["width"]))
    fields["speed_downgraded"] = (now["speed_note"] == "downgraded"
                                  or bool(was and fields["sta_speed"] < fields["cap_speed"]))
    fields["width_downgraded"] = (now["width_note"] == "downgraded"
                                  or bool(was and fields["sta_width"] < fields["cap_width"]))
    fields["downgraded"] = fields["speed_downgraded"] or fields["width_downgraded"]
    return fields


def _link_event(doc: TextDoc, link: _Link, gpus: dict[str, str]) -> Event | None:
    """A pcie-link event for a GPU's own link, or for the port whose secondary bus holds a GPU."""
    device = _DEVICE.match(link.header.text)
    assert device is not None  # _link picks as header a line that matches _DEVICE
    fields = dict(link.fields)
    if _NVIDIA.search(link.header.text):
        fields.update(role="gpu", pci=device["pci"])
    elif link.secondary and link.secondary in gpus:
        fields.update(role="upstream-port", port=device["pci"], pci=gpus[link.secondary])
    else:
        return None
    fields["device"] = device["name"].strip()
    text = "\n".join(l.text for l in (link.header, link.cap, link.sta) if l is not None)
    return doc.event("pcie-link", link.header, fields, last=link.sta, text=text)


def _bus(pci: str) -> str:
    """The bus number of a PCI address, with or without its domain: `0000:31:00.0` -> `31`."""
    return pci.split(":")[-2].lower()


# --- sections ----------------------------------------------------------------------
def sections(doc: TextDoc, lines: list[Line]) -> list[Section]:
    """Every section of a bug report, in order, from its delimiter lines."""
    found: list[Section] = []
    for line in lines:
        if line.text.strip() != DELIMITER:
            continue
        header = next((l.text.strip() for l in doc.following(line, HEADER_LINES) if l.text.strip()), "")
        found.append(Section(_section_name(header), line.number, line.start))
    return found


def _section_name(header: str) -> str:
    if header.startswith("Start of NVIDIA bug report"):
        return "report header"
    if header.startswith("*** "):
        header = header[4:]
    return header[:200] or "(no header)"


def name_sections(doc: TextDoc, lines: list[Line], events: list[Event]) -> tuple[list[Event], list[str]]:
    """Events located in their section when `doc` is a bug report, and what the report lacks.

    `lines` are this source's candidate lines. Anything else comes back unchanged.
    """
    found = sections(doc, lines)
    if not _is_bug_report(found, lines):
        return events, []
    starts = [s.line for s in found]

    def place(event: Event) -> Event:
        at = bisect.bisect_right(starts, event.where.line or 0) - 1
        if event.where.path != doc.path or at < 0:
            return event
        return dataclasses.replace(event, where=dataclasses.replace(event.where, section=found[at].name))

    return [place(e) for e in events], _diagnostics(doc, found, lines)


def _is_bug_report(found: list[Section], lines: list[Line]) -> bool:
    """The script's banner, or at least two sections under headers the script writes."""
    if any(_BANNER.search(line.text) for line in lines):
        return True
    return sum(1 for s in found if s.name.startswith(("/", "journalctl", "dmesg"))) >= 2


def _diagnostics(doc: TextDoc, found: list[Section], lines: list[Line]) -> list[str]:
    """Sections a full report should have but this one lacks, and sections holding binary data."""
    notes: list[str] = []
    if any(_BANNER.search(line.text) for line in lines):
        for what, headers in EXPECTED:
            if not any(h in s.name and not _partial(s.name) for s in found for h in headers):
                notes.append(f"bug report has no section with {what}; findings that need it cannot be made")
    for section in found:
        share = _control_share(doc.reader.read_at(section.start, SAMPLE))
        if share > BINARY_SHARE:
            notes.append(f"bug report section '{section.name}' (line "
                         f"{section.line}) holds binary data; its text was skipped")
    return notes


def _partial(name: str) -> bool:
    """A section that does not provide what its file or command name promises (absent, one program's journal)."""
    return "does not exist" in name or "_COMM=" in name


def _control_share(raw: bytes) -> float:
    controls = sum(1 for b in raw if b < 9 or 13 < b < 32 or b == 127)
    return controls / max(1, len(raw))
