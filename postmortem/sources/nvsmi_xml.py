"""`nvidia-smi -q -x`: the XML form of the nvidia-smi report.

Monitoring agents and bug reports attach this form as often as the text one.
Each `<gpu>` element becomes the same `gpu-state` event, with the same field
names, as a GPU section of `nvidia-smi -q` (see gpu_tools), so one set of
signatures reads both. The document is untrusted input: it is read with a
byte cap and parsed with defusedxml (no entity expansion, no external DTD).
"""

from __future__ import annotations

from collections.abc import Iterator
from xml.etree.ElementTree import Element

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from .. import later
from ..model import Event
from ..text import Line, TextDoc
from .gpu_tools import ACTIVE_IGNORED, pci_of

NAME = "nvsmi-xml"
ANCHORS: tuple[bytes, ...] = (b"<nvidia_smi_log", b"<gpu id=")
"""A whole document, or `<gpu>` elements pasted without the document around them."""

MAX_BYTES = 16 << 20
"""Most bytes read for one document (8 GPUs with long process lists stay far below)."""
MAX_LINES = 400_000

_NUMBER = later.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_GPU_OPEN = later.compile(r"<gpu[\s>]")

_REASONS = {
    "gpu_idle": "Idle", "applications_clocks_setting": "Applications Clocks Setting", "sw_power_cap": "SW Power Cap",
    "hw_slowdown": "HW Slowdown", "hw_thermal_slowdown": "HW Thermal Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown", "sync_boost": "Sync Boost",
    "sw_thermal_slowdown": "SW Thermal Slowdown", "display_clocks_setting": "Display Clock Setting",
}
"""Clock event reason element names (after the clocks_event_reason_ / clocks_throttle_reason_ prefix) -> the
names `nvidia-smi -q` prints, which the gpu-state events carry."""

_NUMBERS = {
    "temp_c": ("temperature/gpu_temp",),
    "temp_slowdown_c": ("temperature/gpu_temp_slow_threshold",),
    "temp_shutdown_c": ("temperature/gpu_temp_max_threshold",),
    "memory_temp_c": ("temperature/memory_temp",),
    "clock_graphics_mhz": ("clocks/graphics_clock",),
    "clock_sm_mhz": ("clocks/sm_clock",),
    "clock_max_graphics_mhz": ("max_clocks/graphics_clock",),
    "pcie_replays": ("pci/replay_counter",),
    "fan_pct": ("fan_speed",),
    "power_w": ("gpu_power_readings/power_draw", "gpu_power_readings/instant_power_draw",
                "power_readings/power_draw"),
    "power_cap_w": ("gpu_power_readings/current_power_limit", "power_readings/power_limit"),
    "memory_used_mib": ("fb_memory_usage/used",),
    "memory_total_mib": ("fb_memory_usage/total",),
    "util_pct": ("utilization/gpu_util",),
    "retired_pages_sbe": ("retired_pages/multiple_single_bit_retirement/retired_count",
                          "retired_pages/single_bit_retirement/retired_count"),
    "retired_pages_dbe": ("retired_pages/double_bit_retirement/retired_count",),
    "remapped_rows_correctable": ("remapped_rows/remapped_row_corr",),
    "remapped_rows_uncorrectable": ("remapped_rows/remapped_row_unc",),
}
"""gpu-state field -> the element paths holding it, newest driver's first."""

_FLAGS = {
    "retired_pages_pending": "retired_pages/pending_retirement",
    "remap_pending": "remapped_rows/remapped_row_pending",
    "remap_failure": "remapped_rows/remapped_row_failure",
    "reset_required": "gpu_reset_status/reset_required",
}
_TEXTS = {"gpu_name": "product_name", "gpu_uuid": "uuid", "gpu_serial": "serial", "pstate": "performance_state",
          "compute_mode": "compute_mode", "mig_mode": "mig_mode/current_mig"}


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One gpu-state event per <gpu> of each nvidia-smi XML document."""
    covered = 0
    for line in lines:
        if line.number > covered:
            events, covered = _document(doc, line) if "<nvidia_smi_log" in line.text else _fragment(doc, line)
            yield from events


def _document(doc: TextDoc, start: Line) -> tuple[list[Event], int]:
    """The events of the document opening at `start`, and the last line it spans (or `start` if unreadable)."""
    body = [start, *doc.following(start, MAX_LINES, max_bytes=MAX_BYTES)]
    end = next((i for i, line in enumerate(body) if "</nvidia_smi_log>" in line.text), None)
    if end is None:
        return [], start.number  # cut off before its end: nothing trustworthy to read
    body = body[: end + 1]
    text = "\n".join(line.text for line in body)
    text = text[text.index("<nvidia_smi_log") : text.rindex("</nvidia_smi_log>") + len("</nvidia_smi_log>")]
    try:
        root = ElementTree.fromstring(text)
    except (ElementTree.ParseError, DefusedXmlException, ValueError):
        return [], body[-1].number
    return _gpu_states(doc, root, body), body[-1].number


def _fragment(doc: TextDoc, start: Line) -> tuple[list[Event], int]:
    """`<gpu>` elements without their `<nvidia_smi_log>` root (a paste of one GPU): read as a document of them."""
    body, depth = [], 0
    for line in [start, *doc.following(start, MAX_LINES, max_bytes=MAX_BYTES)]:
        body.append(line)
        depth += len(_GPU_OPEN.findall(line.text)) - line.text.count("</gpu>")
        if depth <= 0:
            break
    if depth > 0:
        return [], start.number  # cut off inside the element
    text = "\n".join(line.text for line in body)
    text = text[text.index("<gpu") : text.rindex("</gpu>") + len("</gpu>")]
    try:
        root = ElementTree.fromstring(f"<nvidia_smi_log>{text}</nvidia_smi_log>")
    except (ElementTree.ParseError, DefusedXmlException, ValueError):
        return [], body[-1].number
    return _gpu_states(doc, root, body), body[-1].number


def _gpu_states(doc: TextDoc, root: Element, body: list[Line]) -> list[Event]:
    """A gpu-state event for each <gpu> of a parsed document, located at its lines."""
    spans = _gpu_spans(body)
    return [_gpu_state(doc, root, gpu, index, spans[index] if index < len(spans) else (body[0], body[-1]))
            for index, gpu in enumerate(root.findall("gpu"))]


def _gpu_spans(body: list[Line]) -> list[tuple[Line, Line]]:
    """The (opening, closing) lines of each <gpu> element, in document order."""
    spans: list[tuple[Line, Line]] = []
    opening = None
    for line in body:
        if _GPU_OPEN.search(line.text):
            opening = line
        if "</gpu>" in line.text and opening is not None:
            spans.append((opening, line))
            opening = None
    return spans


def _gpu_state(doc: TextDoc, root: Element, gpu: Element, index: int, span: tuple[Line, Line]) -> Event:
    bus = gpu.get("id", "")
    fields: dict = {"gpu_index": index}
    if bus:
        fields |= {"pci": pci_of(bus), "bus_id": bus}
    for name in ("driver_version", "cuda_version"):
        if (value := _text(root, name)) is not None:
            fields[name] = value
    for name, path in _TEXTS.items():
        if (value := _text(gpu, path)) is not None:
            fields[name] = value
    for name, paths in _NUMBERS.items():
        number = next((v for v in (_number(gpu, path) for path in paths) if v is not None), None)
        if number is not None:
            fields[name] = number
    for name, path in _FLAGS.items():
        value = (_text(gpu, path) or "").lower()
        if value in ("yes", "no"):
            fields[name] = value == "yes"
    fields |= _ecc(gpu)
    if active := _active_reasons(gpu):
        fields["throttle_active"] = active
    return doc.event("gpu-state", span[0], fields, last=span[1], text=_excerpt(bus, fields))


def _text(element: Element, path: str) -> str | None:
    """An element's stripped text; None when absent, empty or N/A."""
    found = element.find(path)
    value = (found.text or "").strip() if found is not None else ""
    return value if value and value != "N/A" else None


def _number(element: Element, path: str) -> int | float | None:
    """The number an element starts with ("61 C", "30.92 W", "0 %"), as int when whole."""
    match = _NUMBER.match(_text(element, path) or "")
    if not match:
        return None
    value = float(match[1])
    return int(value) if value.is_integer() and "." not in match[1] else value


def _ecc(gpu: Element) -> dict:
    """Volatile and aggregate ECC counts: the newer sram_/dram_ elements, or the older single_bit/double_bit totals."""
    fields = {}
    for scope in ("volatile", "aggregate"):
        counters = gpu.find(f"ecc_errors/{scope}")
        if counters is None:
            continue
        for kind, old in (("uncorrectable", "double_bit"), ("correctable", "single_bit")):
            total = _number(counters, f"{old}/total")
            values = [total] if total is not None else [
                _number(counters, child.tag) for child in counters
                if kind in child.tag and not (kind == "correctable" and "uncorrectable" in child.tag)]
            counted = [value for value in values if value is not None]
            if counted:
                fields[f"ecc_{scope}_{kind}"] = int(sum(counted))
    return fields


def _active_reasons(gpu: Element) -> list[str]:
    """Active clock event (throttle) reasons that are findings; older drivers say clocks_throttle_reasons."""
    active = []
    for section in ("clocks_event_reasons", "clocks_throttle_reasons"):
        reasons = gpu.find(section)
        for child in reasons if reasons is not None else ():
            tag = child.tag.removeprefix("clocks_event_reason_").removeprefix("clocks_throttle_reason_")
            name = _REASONS.get(tag)
            if name and name not in ACTIVE_IGNORED and (child.text or "").strip() == "Active":
                active.append(name)
    return active


_SHOWN = ("gpu_name", "driver_version", "cuda_version", "ecc_volatile_uncorrectable", "ecc_aggregate_uncorrectable",
          "retired_pages_dbe", "retired_pages_pending", "remapped_rows_uncorrectable", "remap_pending",
          "remap_failure", "throttle_active", "temp_c", "power_w", "power_cap_w", "clock_graphics_mhz",
          "reset_required", "pcie_replays")


def _excerpt(bus: str, fields: dict) -> str:
    """What the report quotes: the values a finding rests on, one per line (the XML itself is too long to show)."""
    shown = [f"{name}: {fields[name]}" for name in _SHOWN if name in fields]
    return "\n".join([f'<gpu id="{bus}">', *shown])
