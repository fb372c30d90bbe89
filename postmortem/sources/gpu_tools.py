"""What NVIDIA's management tools print: nvidia-smi, NVML errors, DCGM, Fabric Manager.

`nvidia-smi -q` is the one place a GPU's health counters sit side by side
(ECC, retired pages, row remapping, throttle reasons, temperatures, clocks);
it becomes one `gpu-state` event per GPU whose text keeps the lines that
prove a finding. When nvidia-smi cannot even start, its one-line complaint
(`nvml-error`) is the evidence. DCGM's host engine reports health-watch
verdicts (`dcgm-health`), and the Fabric Manager log reports NVSwitch errors
(`sxid`, the same kind and field names the kernel log uses for SXid lines).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime

import regex

from ..model import Event
from ..text import Line, TextDoc

NAME = "gpu-tools"
ANCHORS: tuple[bytes, ...] = (
    b"NVSMI LOG",
    b"Attached GPUs",
    b"Driver Version",
    b"Failed to initialize NVML",
    b"NVIDIA-SMI has failed",
    b"NVIDIA-SMI couldn't find",
    b"Unable to determine the device handle",
    b"No devices were found",
    b"in health system",
    b"detected NVSwitch",
)

REPORT_LINES = 20000
"""Most lines read for one nvidia-smi -q report (8 GPUs with process lists stay far below)."""

_GPU_HEADER = regex.compile(r"^\s*GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = regex.compile(r"^(?P<indent>\s*)(?P<key>[^:\s][^:]*?)\s*:\s?(?P<value>.*?)\s*$")
_SECTION = regex.compile(r"^(?P<indent>\s*)(?P<key>\S.*?)\s*$")
_NUMBER = regex.compile(r"^-?\d+")
_TABLE_VERSIONS = regex.compile(
    r"NVIDIA-SMI (?P<smi>[\d.]+)\s+Driver Version: (?P<driver>[\d.]+)\s+CUDA Version: (?P<cuda>[\d.]+)")
_BUS_ID = regex.compile(r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")

_NVML_ERRORS = (
    regex.compile(r"Failed to initialize NVML: (?P<error>.+?)\s*$"),
    regex.compile(r"NVIDIA-SMI has failed because it (?P<error>couldn't communicate with the NVIDIA driver)"),
    regex.compile(r"NVIDIA-SMI (?P<error>couldn't find libnvidia-ml\.so library)"),
    regex.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*"
                  r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]):\s*(?P<error>.+?)\s*$"),
    regex.compile(r"(?P<error>No devices were found)"),
)
_NVML_VERSION = regex.compile(r"NVML library version: (?P<version>[\d.]+)")

_DCGM = regex.compile(
    r"Detected an? (?P<level>\w+) in health system (?P<system>[\w-]+):\s*'?(?P<message>.*?)'?\s*$")
_DCGM_GPU = regex.compile(r"\bGPU (\d+)\b")

_FM_ERROR = regex.compile(
    r"detected NVSwitch (?P<severity>non-fatal|fatal) error (?P<sxid>\d+)"
    r"(?: on fid (?P<fid>\d+))?(?: on NVSwitch pci bus id (?P<bus>\S+))?"
    r"(?: physical id (?P<switch>\d+))?(?: port (?P<port>\d+))?")
_FM_TIME = regex.compile(r"^\[(?P<stamp>[A-Z][a-z]{2} +\d{1,2} \d{4} \d{2}:\d{2}:\d{2})\]")

_ACTIVE_IGNORED = frozenset({"Idle", "Applications Clocks Setting", "Display Clock Setting", "Sync Boost"})
"""Clock event reasons that are normal operation, not a finding."""


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """Events from nvidia-smi reports and errors, DCGM health lines and Fabric Manager errors."""
    covered = 0
    seen: dict[tuple, Event] = {}
    for line in lines:
        if line.number <= covered:
            continue
        text = line.text
        if match := _TABLE_VERSIONS.search(text):
            yield doc.event("nvsmi-versions", line, {
                "nvsmi_version": match["smi"], "driver_version": match["driver"], "cuda_version": match["cuda"]})
        elif "NVSMI LOG" in text or "Attached GPUs" in text or "Driver Version" in text:
            events, covered = _report(doc, line)
            yield from events
        else:
            _fold(seen, _one_line(doc, line))
    for event in seen.values():
        yield event


def _one_line(doc: TextDoc, line: Line) -> Event | None:
    """An nvml-error, dcgm-health or sxid event from one line, or None."""
    for pattern in _NVML_ERRORS:
        if match := pattern.search(line.text):
            return _nvml_error(doc, line, match)
    if match := _DCGM.search(line.text):
        fields = {"system": match["system"], "level": match["level"].lower(), "message": match["message"]}
        if gpu := _DCGM_GPU.search(match["message"]):
            fields["gpu_index"] = int(gpu[1])
        return doc.event("dcgm-health", line, fields)
    if match := _FM_ERROR.search(line.text):
        return _fabric_error(doc, line, match)
    return None


def _nvml_error(doc: TextDoc, line: Line, match: regex.Match) -> Event:
    fields = {"error": match["error"], "tool": "nvidia-smi"}
    if match.groupdict().get("bus"):
        fields["pci"] = _pci(match["bus"])
    last = line
    for nxt in doc.following(line, 2):
        if version := _NVML_VERSION.search(nxt.text):
            fields["nvml_version"] = version["version"]
            last = nxt
            break
    return doc.event("nvml-error", line, fields, last=last)


def _fabric_error(doc: TextDoc, line: Line, match: regex.Match) -> Event:
    fields: dict = {"sxid": int(match["sxid"]), "fatal": match["severity"] == "fatal",
                    "message": line.text[match.start():].strip(), "origin": "fabric-manager"}
    if match["bus"]:
        fields["pci"] = _pci(match["bus"])
    for name in ("switch", "port"):
        if match[name]:
            fields[name] = int(match[name])
    extra = {}
    if stamp := _FM_TIME.search(line.text):
        try:
            extra = {"time": datetime.strptime(" ".join(stamp["stamp"].split()), "%b %d %Y %H:%M:%S"), "clock": "wall"}
        except ValueError:
            pass
    return doc.event("sxid", line, fields, **extra)


def _fold(seen: dict[tuple, Event], event: Event | None) -> None:
    """Keep the first of identical reports and count the rest."""
    if event is None:
        return
    key = (event.kind, tuple(sorted((k, str(v)) for k, v in event.fields.items())))
    if key in seen:
        first = seen[key]
        seen[key] = dataclasses.replace(first, count=first.count + 1)
    else:
        seen[key] = event


def _pci(bus: str) -> str:
    """A bus id as the kernel prints it: nvidia-smi's 8-digit domain cut to 4 (00000000:07:00.0 -> 0000:07:00.0)."""
    domain, colon, rest = bus.partition(":")
    if not colon:
        return bus.lower()
    return f"{domain[-4:].rjust(4, '0')}:{rest}".lower()


# ---- nvidia-smi -q ---------------------------------------------------------------------------


def _report(doc: TextDoc, start: Line) -> tuple[list[Event], int]:
    """One gpu-state event per GPU section of the report starting at `start`; also the last line used."""
    header: dict[str, str] = {}
    header_lines: list[Line] = []
    sections: list[list[Line]] = []
    last = start
    for line in [start, *doc.following(start, REPORT_LINES, max_bytes=4 << 20)]:
        text = line.text
        if line is not start and "NVSMI LOG" in text:
            break
        if _GPU_HEADER.match(text):
            sections.append([line])
        elif sections and (text[:1].isspace() or not text.strip()):
            sections[-1].append(line)
        elif match := _KEY_VALUE.match(text):
            if sections:
                break  # an unindented key after the GPU sections: the report is over
            header[match["key"]] = match["value"]
            header_lines.append(line)
        elif "NVSMI LOG" not in text and text.strip():
            break
        last = line
    events = [_gpu_state(doc, index, section, header, header_lines) for index, section in enumerate(sections)]
    return events, last.number


def _tree(section: list[Line]) -> dict[tuple[str, ...], Line]:
    """Each key-value line of a GPU section by its path of section names (indentation)."""
    stack: list[tuple[int, str]] = []
    tree: dict[tuple[str, ...], Line] = {}
    for line in section[1:]:
        match = _KEY_VALUE.match(line.text) or _SECTION.match(line.text)
        if not match:
            continue
        indent = len(match["indent"].expandtabs(4))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (*(name for _, name in stack), match["key"])
        if match.re is _KEY_VALUE:
            tree.setdefault(path, line)
        else:
            stack.append((indent, match["key"]))
            tree.setdefault(path, line)
    return tree


def _value(line: Line) -> str:
    match = _KEY_VALUE.match(line.text)
    return match["value"] if match else ""


def _int(line: Line) -> int | None:
    match = _NUMBER.match(_value(line))
    return int(match[0]) if match else None


def _flag(line: Line) -> bool | None:
    value = _value(line).lower()
    return True if value == "yes" else False if value == "no" else None


def _gpu_state(doc: TextDoc, index: int, section: list[Line], header: dict, header_lines: list[Line]) -> Event:
    head = section[0]
    bus = _GPU_HEADER.match(head.text)["bus"]
    tree = _tree(section)
    fields: dict = {"pci": _pci(bus), "bus_id": bus, "gpu_index": index}
    for name, key in (("driver_version", "Driver Version"), ("cuda_version", "CUDA Version")):
        if header.get(key, "N/A") != "N/A":
            fields[name] = header[key]
    evidence: list[Line] = [head]
    for name, path in (("gpu_name", ("Product Name",)), ("gpu_uuid", ("GPU UUID",)), ("pstate", ("Performance State",))):
        if path in tree:
            fields[name] = _value(tree[path])
            evidence.append(tree[path])
    for collect in (_ecc, _retired_pages, _remapped_rows, _clock_reasons, _temperatures, _clocks, _misc):
        evidence.extend(collect(tree, fields))
    body = sorted({line.number: line for line in [*header_lines, *evidence, *_ancestors(tree, evidence)]}.values(),
                  key=lambda line: line.number)
    text = "\n".join(line.text.rstrip() for line in body)
    last = next(line for line in reversed(section) if line.text.strip() or line is head)
    return doc.event("gpu-state", head, fields, last=last, text=text)


def _ancestors(tree: dict[tuple[str, ...], Line], evidence: list[Line]) -> list[Line]:
    """The section header lines above each evidence line, so the excerpt reads as nvidia-smi printed it."""
    wanted = {line.number for line in evidence}
    out = []
    for path, line in tree.items():
        if line.number in wanted:
            out.extend(tree[path[:i]] for i in range(1, len(path)) if path[:i] in tree)
    return out


def _ecc(tree: dict, fields: dict) -> list[Line]:
    """Uncorrectable (double-bit) and correctable ECC counts, volatile and aggregate, from any driver's layout."""
    evidence = []
    for scope in ("Volatile", "Aggregate"):
        for kind, markers in (("uncorrectable", ("Uncorrectable", "Double Bit")), ("correctable", ("Correctable", "Single Bit"))):
            hits = [(path, line) for path, line in tree.items()
                    if path[:2] == ("ECC Errors", scope) and _int(line) is not None
                    and any(marker in part and not (kind == "correctable" and "Uncorrectable" in part)
                            for part in path[2:] for marker in markers)]
            totals = [(p, l) for p, l in hits if p[-1] == "Total"]
            counted = totals or hits
            if counted:
                fields[f"ecc_{scope.lower()}_{kind}"] = sum(_int(line) for _, line in counted)
                if kind == "uncorrectable":
                    evidence.extend(line for _, line in counted if _int(line))
    return evidence


def _retired_pages(tree: dict, fields: dict) -> list[Line]:
    evidence = []
    for path, line in tree.items():
        if path[:1] != ("Retired Pages",) or len(path) != 2:
            continue
        if path[1].startswith("Double Bit") and _int(line) is not None:
            fields["retired_pages_dbe"] = _int(line)
        elif path[1].startswith("Single Bit") and _int(line) is not None:
            fields["retired_pages_sbe"] = _int(line)
        elif path[1].startswith("Pending") and _flag(line) is not None:
            fields["retired_pages_pending"] = _flag(line)
        else:
            continue
        evidence.append(line)
    return evidence


def _remapped_rows(tree: dict, fields: dict) -> list[Line]:
    names = {"Correctable Error": ("remapped_rows_correctable", _int),
             "Uncorrectable Error": ("remapped_rows_uncorrectable", _int),
             "Pending": ("remap_pending", _flag),
             "Remapping Failure Occurred": ("remap_failure", _flag)}
    evidence = []
    for key, (name, convert) in names.items():
        line = tree.get(("Remapped Rows", key))
        if line is not None and convert(line) is not None:
            fields[name] = convert(line)
            evidence.append(line)
    return evidence


def _clock_reasons(tree: dict, fields: dict) -> list[Line]:
    """Active clock event (throttle) reasons; older drivers call the section Clocks Throttle Reasons."""
    active = [(path[-1], line) for path, line in tree.items()
              if path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons") and len(path) > 1
              and _value(line) == "Active" and path[-1] not in _ACTIVE_IGNORED]
    if active:
        fields["throttle_active"] = [name for name, _ in active]
    return [line for _, line in active]


def _temperatures(tree: dict, fields: dict) -> list[Line]:
    names = {"GPU Current Temp": "temp_c", "GPU Slowdown Temp": "temp_slowdown_c",
             "GPU Shutdown Temp": "temp_shutdown_c", "Memory Current Temp": "memory_temp_c"}
    evidence = []
    for key, name in names.items():
        line = tree.get(("Temperature", key))
        if line is not None and _int(line) is not None:
            fields[name] = _int(line)
            evidence.append(line)
    return evidence


def _clocks(tree: dict, fields: dict) -> list[Line]:
    names = {("Clocks", "Graphics"): "clock_graphics_mhz", ("Clocks", "SM"): "clock_sm_mhz",
             ("Max Clocks", "Graphics"): "clock_max_graphics_mhz"}
    evidence = []
    for path, name in names.items():
        line = tree.get(path)
        if line is not None and _int(line) is not None:
            fields[name] = _int(line)
            evidence.append(line)
    return evidence


def _misc(tree: dict, fields: dict) -> list[Line]:
    """Reset requests and PCIe replays: shown when they say something is wrong."""
    evidence = []
    line = tree.get(("GPU Reset Status", "Reset Required"))
    if line is not None and _flag(line) is not None:
        fields["reset_required"] = _flag(line)
        if fields["reset_required"]:
            evidence.append(line)
    line = tree.get(("PCI", "Replays Since Reset"))
    if line is not None and _int(line) is not None:
        fields["pcie_replays"] = _int(line)
        if fields["pcie_replays"]:
            evidence.append(line)
    return evidence
