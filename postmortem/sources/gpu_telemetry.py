"""GPU telemetry: `nvidia-smi --query-gpu=... --format=csv -l N` logs and `nvidia-smi dmon` output.

Both become per-GPU time series (pandas frames, kept in the report's
`telemetry` for plots) and events for what a person looking at the plot would
notice: a GPU over temperature, at its power limit for minutes, throttled by a
hardware slowdown, memory that only grows, utilisation frozen at 100 % or 0 %
while memory is held, and a GPU that stops answering or vanishes from the
samples. The health columns a query may hold (uncorrectable ECC counts, pages
pending retirement, row-remap failures, the recovery action: data/gpu-health-fields.tsv)
give, for each GPU with an unhealthy value, the `gpu-state` event `nvidia-smi -q` gives.

pandas is imported inside `parse` only, once a header has been recognised: a
plain log never pays for it. Rows are split and converted column-wise (no
Python loop over the rows), so a day of 1-second samples stays fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import regex

from .. import later
from ..model import Event, GpuSeries, Location
from ..text import Line, TextDoc
from .gpu_tools import HealthField, health_fields, pci_of, unhealthy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

NAME = "gpu-telemetry"
ANCHORS: tuple[bytes, ...] = (
    b"timestamp, ",
    b"temperature.gpu",
    b"memory.used [",
    b"utilization.gpu [",
    b"power.draw [",
    b"# gpu ",
    b"ecc.errors.uncorrected.", b"retired_pages.", b"remapped_rows.", b"gpu_recovery_action",
)

MAX_BYTES = 128 << 20
"""Most bytes of samples read after one header (a day of 1 s samples for 8 GPUs fits)."""

TEMP_HIGH_C = 85
"""Core temperature treated as too hot: most data-centre GPUs start hardware slowdown between 85 and 95 C
(nvidia-smi -q shows the exact "GPU Slowdown Temp"); the CSV does not carry the limit."""

POWER_AT_LIMIT_RATIO = 0.98
"""Power draw at or above this share of power.limit counts as "at the limit" (draw hovers just under the cap)."""

POWER_SUSTAINED_S = 60.0
"""Seconds at the power limit before it is reported: short peaks at the cap are normal under load."""

LEAK_MIN_SPAN_S = 600.0
"""Memory must grow for at least this long to be called a leak (warm-up allocations settle within minutes)."""

LEAK_MIN_GROWTH_MIB = 1024.0
"""Total growth below this is allocator noise, not a leak."""

LEAK_NOISE_MIB = 16.0
"""A drop smaller than this does not break "only grows" (caching allocators release small blocks)."""

MEMORY_FULL_RATIO = 0.97
"""memory.used at this share of memory.total means the growth ran into the GPU's capacity (an OOM follows)."""

STUCK_MIN_SPAN_S = 900.0
"""Utilisation frozen for this long, with memory held and unchanged, looks like a hang (NCCL's default timeout is
10 min)."""

STUCK_MEMORY_HELD_MIB = 1024.0
"""Memory a process must hold for a frozen GPU to count: an idle GPU at 0 % with nothing allocated is not a hang."""

STUCK_POWER_RATIO = 0.5
"""A GPU "at 100 %" drawing less than this share of its power limit is spinning (a waiting kernel), not computing."""

GONE_MIN_SAMPLES = 3
"""Sampling cycles the other GPUs must go on after a GPU's last sample before it counts as gone."""

DMON_INTERVAL_S = 1.0
"""Seconds between dmon samples when its output carries no time column (the default of `dmon -d`)."""

_FIELD = r"[a-z_][A-Za-z_.0-9]*(?: \[[^\]]+\])?"
_CSV_HEADER = later.compile(rf"^\s*(?:{_FIELD}, )+{_FIELD}\s*$")
_DMON_HEADER = later.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+\w")
_LOST = r"GPU is lost|Unknown Error|GPU requires reset|Unable to determine"

_QUERY_NAMES = {
    "timestamp": "time", "index": "gpu_index", "name": "gpu_name", "gpu_name": "gpu_name",
    "pci.bus_id": "pci", "gpu_bus_id": "pci", "uuid": "gpu_uuid", "gpu_uuid": "gpu_uuid",
    "temperature.gpu": "temp_c", "temperature.memory": "memory_temp_c",
    "power.draw": "power_w", "power.draw.instant": "power_w", "power.draw.average": "power_w",
    "power.limit": "power_cap_w", "enforced.power.limit": "power_cap_w",
    "memory.used": "memory_used_mib", "memory.total": "memory_total_mib",
    "utilization.gpu": "util_pct", "utilization.memory": "mem_util_pct",
    "clocks.sm": "sm_clock_mhz", "clocks.current.sm": "sm_clock_mhz",
    "clocks_throttle_reasons.active": "throttle_mask", "clocks_event_reasons.active": "throttle_mask",
    "clocks_throttle_reasons.hw_slowdown": "hw_slowdown", "clocks_event_reasons.hw_slowdown": "hw_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown": "hw_thermal_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown": "hw_thermal_slowdown",
    "clocks_throttle_reasons.hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "pstate": "pstate",
}
"""--query-gpu field -> canonical column (the first of several aliases present wins)."""

_DMON_NAMES = {"gpu": "gpu_index", "pwr": "power_w", "gtemp": "temp_c", "temp": "temp_c", "mtemp": "memory_temp_c",
               "sm": "util_pct", "mem": "mem_util_pct", "pclk": "sm_clock_mhz", "fb": "memory_used_mib"}
"""dmon column -> canonical column (dmon's fb is MB as nvidia-smi prints MiB elsewhere)."""

_SCALE = {"": 1.0, "mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0, "kib": 1 / 1024, "kb": 1 / 1024,
          "w": 1.0, "mw": 0.001, "%": 1.0, "c": 1.0, "mhz": 1.0}
"""Unit -> factor to the canonical unit. nvidia-smi's older "MB" is the same quantity it now prints as MiB."""

_THROTTLE_BITS = {"hw_slowdown": 0x8, "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80}
"""NVML clocks event reason bits (nvml.h nvmlClocksEventReason*) for the hardware slowdowns."""

_REASON_NAMES = {"hw_slowdown": "HW Slowdown", "hw_thermal_slowdown": "HW Thermal Slowdown",
                 "hw_power_brake_slowdown": "HW Power Brake Slowdown"}
"""Canonical column -> the reason's name as `nvidia-smi -q` prints it (the gpu-tools events use these)."""


_GPU_NAMES = ("pci", "gpu_index", "gpu_uuid")
"""The columns that name a row's GPU, the one a health finding is filed under first."""

HEALTH_COLUMNS = health_fields("nvidia-smi")
"""--query-gpu health field -> what its unhealthy values say (data/gpu-health-fields.tsv)."""


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One `gpu-series` event per GPU and sampled block (carrying the frame), then the findings of each series;
    a gpu-state event per GPU with unhealthy health columns."""
    covered = 0
    for line in lines:
        if line.number <= covered:
            continue
        if _DMON_HEADER.match(line.text):
            block = _read_dmon(doc, line)
        elif _CSV_HEADER.match(line.text) and (_query_columns(line.text) or _health_columns(line.text)):
            yield from _health_states(doc, line)
            block = _read_csv(doc, line) if _query_columns(line.text) else None
        else:
            continue
        if block is None:
            continue
        frame, header, raw, dropped, covered = block
        for gpu, series in _per_gpu(frame):
            where = _span(doc, header, series)
            yield Event("gpu-series", where, header.text, {"series": GpuSeries(
                gpu, where, tuple(c for c in series.columns if c not in ("line", "sample")), series, dropped)})
            yield from _detect(doc, header, raw, gpu, series)


# ---- reading -------------------------------------------------------------------------------


def _header_fields(header: str) -> list[str]:
    """Each header cell's query field, without its unit."""
    return [cell.strip().split(" [")[0] for cell in header.split(",")]


def _query_columns(header: str) -> list[str | None]:
    """Canonical name of each header cell, None for fields this module does not use; [] if no known field."""
    names = [_QUERY_NAMES.get(field) for field in _header_fields(header)]
    return names if sum(name is not None for name in names) >= 2 else []


def _health_columns(header: str) -> dict[int, HealthField]:
    """The health fields of a header, by cell position."""
    return {position: HEALTH_COLUMNS[field] for position, field in enumerate(_header_fields(header))
            if field in HEALTH_COLUMNS}


def _region(doc: TextDoc, header: Line) -> list[str]:
    """The lines after `header`, bounded in bytes; a cut last line is dropped."""
    raw = doc.reader.read_at(header.end + 1, MAX_BYTES)
    text = raw.decode(doc.encoding, "replace")
    rows = text.split("\n")
    if header.end + 1 + len(raw) < doc.reader.size:
        rows.pop()
    return [row.rstrip("\r") for row in rows]


def _read_csv(doc: TextDoc, header: Line):
    """Rows of one --query-gpu CSV block: (frame, header, raw rows, dropped, last line number)."""
    import pandas as pd

    names = _query_columns(header.text)
    units = [_header_unit(cell) for cell in header.text.split(",")]
    raw = pd.Series(_region(doc, header), dtype="string")
    end = _first(raw.str.strip().eq("") | raw.str.match(_CSV_HEADER.pattern))
    raw = raw.iloc[:end]
    cells = raw.str.split(",", n=len(names), expand=True)
    if cells.shape[1] < len(names):
        return None
    well_formed = cells[len(names) - 1].notna() & (cells[len(names)].isna() if cells.shape[1] > len(names) else True)
    frame = pd.DataFrame(index=raw.index)
    for position, name in enumerate(names):
        if name is None or name in frame:
            continue
        frame[name] = _column(cells[position].str.strip(), name, units[position])
    frame["lost"] = _lost(raw, cells.iloc[:, : len(names)])
    if "time" in frame:
        well_formed &= frame["time"].notna()
    dropped = int((~well_formed).sum())
    frame = frame[well_formed]
    if frame.empty:
        return None
    frame.insert(0, "line", frame.index + header.number + 1)
    return frame, header, raw, dropped, header.number + end


def _read_dmon(doc: TextDoc, header: Line):
    """Rows of one dmon block (its header repeats every screenful): (frame, header, raw, dropped, last line)."""
    import pandas as pd

    tokens = header.text.lstrip("#").split()
    raw = pd.Series(_region(doc, header), dtype="string")
    stripped = raw.str.strip()
    is_row = stripped.str.match(r"^(?:\d{8}\s+)?(?:\d\d:\d\d:\d\d\s+)?\d+(?:\s+\S+)*$")
    is_comment = stripped.str.startswith("#")
    end = _first(~(is_row | is_comment) & stripped.ne(""))
    rows = stripped.iloc[:end][is_row.iloc[:end]]
    if rows.empty:
        return None
    cells = rows.str.split(r"\s+", n=len(tokens) - 1, expand=True, regex=True)
    frame = pd.DataFrame(index=rows.index)
    for position, token in enumerate(tokens[: cells.shape[1]]):
        name = _DMON_NAMES.get(token.lower())
        if name and name not in frame:
            frame[name] = pd.to_numeric(cells[position].where(cells[position] != "-"),
                                        errors="coerce").astype("float64")
    if "Date" in tokens[:1] and "Time" in tokens[:2]:
        frame.insert(0, "time", pd.to_datetime(cells[0] + " " + cells[1], format="%Y%m%d %H:%M:%S", errors="coerce"))
    frame = frame.dropna(subset=["gpu_index"])
    measured = [c for c in frame.columns if c not in ("time", "gpu_index")]
    frame["lost"] = frame[measured].isna().all(axis=1)
    frame.insert(0, "line", frame.index + header.number + 1)
    return frame, header, raw, 0, header.number + end


def _health_states(doc: TextDoc, header: Line) -> Iterator[Event]:
    """One gpu-state event per GPU whose health columns hold an unhealthy value, with the -q report's field names:
    the largest count, the last flag or action. Each column's distinct values are judged once and the rows are
    grouped per GPU by pandas, so a day of samples costs a few vectorised passes, not a loop over its rows."""
    import pandas as pd

    names = [_QUERY_NAMES.get(field) for field in _header_fields(header.text)]
    raw = pd.Series(_region(doc, header), dtype="string")
    raw = raw.iloc[: _first(raw.str.strip().eq("") | raw.str.match(_CSV_HEADER.pattern))]
    if raw.empty:
        return
    cells = raw.str.split(",", n=len(names), expand=True)
    keys = next((cells[names.index(name)].fillna("").str.strip().str.lower() for name in _GPU_NAMES
                 if name in names and names.index(name) < cells.shape[1]), pd.Series("gpu", index=cells.index))
    found: dict[str, tuple[dict[str, Any], list[int]]] = {}
    for position, field in _health_columns(header.text).items():
        if position >= cells.shape[1]:
            continue
        values = cells[position].fillna("").str.strip()
        verdicts = {value: unhealthy(field, value) for value in values.unique()}
        bad = values.isin([value for value, verdict in verdicts.items() if verdict is not None])
        groups: list[tuple[Any, pd.Series]] = list(values[bad].groupby(keys[bad], sort=False))
        for key, group in groups:
            fields, rows = found.setdefault(str(key), (_row_gpu(cells.loc[group.index[0]], names), []))
            fields[field.event_field] = (max(int(str(verdicts[value])) for value in group.unique())
                                         if field.reading == "count" else verdicts[group.iloc[-1]])
            rows += [int(group.index[0]), int(group.index[-1])]
    for fields, rows in found.values():
        first, last = min(rows), max(rows)
        stamp = _stamp(cells.loc[first].get(names.index("time"))) if "time" in names else None
        yield Event("gpu-state", Location(doc.path, header.number + 1 + first, header.number + 1 + last),
                    "\n".join(dict.fromkeys([header.text, raw[first], raw[last]])), fields | {"view": "query-csv"},
                    time=stamp, clock="wall" if stamp else None)


def _row_gpu(row: pd.Series, names: list[str | None]) -> dict[str, Any]:
    """The fields naming the GPU a CSV row is about: PCI address, index, UUID (those the query holds)."""
    cell = {name: str(row.get(names.index(name), "")).strip() for name in _GPU_NAMES if name in names}
    identity: dict[str, Any] = {}
    if "pci" in cell:
        identity["pci"] = pci_of(cell["pci"])
    if regex.fullmatch(r"[0-9]{1,6}", cell.get("gpu_index", "")):
        identity["gpu_index"] = int(cell["gpu_index"])
    if "gpu_uuid" in cell:
        identity["gpu_uuid"] = cell["gpu_uuid"]
    return identity


def _stamp(cell: Any) -> datetime | None:
    """A --query-gpu timestamp cell as a time, None when it is none."""
    try:
        return datetime.strptime(str(cell).strip(), "%Y/%m/%d %H:%M:%S.%f")
    except ValueError:
        return None


def _first(mask: pd.Series) -> int:
    """Position of the first True in `mask`, or its length."""
    hits = mask.to_numpy().nonzero()[0]
    return int(hits[0]) if len(hits) else len(mask)


def _header_unit(cell: str) -> str:
    match = regex.search(r"\[([^\]]{1,64})\]", cell)
    return match[1].strip().lower() if match else ""


def _column(cells: pd.Series, name: str, header_unit: str) -> pd.Series:
    """One CSV column converted: numbers scaled to the canonical unit, [N/A] and friends as missing."""
    import pandas as pd

    if name == "time":
        return pd.to_datetime(cells, format="%Y/%m/%d %H:%M:%S.%f", errors="coerce")
    if name in ("gpu_name", "gpu_uuid", "pstate"):
        return cells.where(~cells.str.startswith("[", na=False))
    if name == "pci":
        return cells.str.lower().str.replace(r"^[0-9a-f]*([0-9a-f]{4}:)", r"\1", regex=True)
    if name == "throttle_mask":
        return cells.str.extract(r"0x([0-9A-Fa-f]+)", expand=False).str[-2:].map(_HEX_BYTE)
    if name in _THROTTLE_BITS:
        return cells.str.strip().eq("Active").where(cells.str.contains("ctive", na=False))
    number, unit = _split_unit(cells)
    unit = unit.where(unit != "", header_unit)
    return (number * unit.map(_SCALE)).astype("float64")


def _split_unit(cells: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Each cell's number and lower-case unit ("250.00 W" -> 250.0, "w"), vectorised: a per-cell regex
    costs seconds on a day of samples. Only the rare cells without a space ("35%") take the regex."""
    import pandas as pd

    head, _, tail = (part for _, part in cells.str.partition(" ").items())
    number = pd.to_numeric(head, errors="coerce")
    unit = tail.fillna("").str.lstrip().str.lower()
    glued = number.isna() & head.str.match(r"-?\d", na=False)
    if glued.any():
        parts = head[glued].str.extract(r"^(-?\d+(?:\.\d+)?)([A-Za-z%]*)$")
        number = number.mask(glued, pd.to_numeric(parts[0], errors="coerce"))
        unit = unit.mask(glued, parts[1].fillna("").str.lower())
    unit = unit.where(unit.str.fullmatch(r"[a-z%]*"), "?")  # "12 MiB extra" is no number, as before
    return number, unit


_HEX_BYTE = {f"{value:02x}": value for value in range(256)} | {f"{value:02X}": value for value in range(256)}
"""Last two hex digits of a reason bitmask -> their value (the hardware slowdown bits all sit in that byte)."""


def _lost(raw: pd.Series, cells: pd.DataFrame) -> pd.Series:
    """Rows where nvidia-smi printed a lost-GPU error in place of most values (cells are read only in rows
    that name such an error at all)."""
    lost = raw.str.contains(_LOST, na=False)
    if lost.any():
        suspect = cells[lost]
        hits = sum(suspect[column].str.contains(_LOST, na=False).astype(int) for column in suspect.columns)
        lost[lost] = hits * 2 >= cells.shape[1]
    return lost.astype(bool)


def _per_gpu(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each GPU's rows, named by its PCI address, else its index."""
    frame = frame.assign(sample=range(len(frame)))
    if "time" in frame and frame["time"].notna().any():
        frame = frame.assign(elapsed_s=(frame["time"] - frame["time"].min()).dt.total_seconds())
    else:
        cycle = frame.groupby("gpu_index").cumcount() if "gpu_index" in frame else frame["sample"]
        frame = frame.assign(elapsed_s=cycle * DMON_INTERVAL_S)
    key = "pci" if "pci" in frame and frame["pci"].notna().any() else "gpu_index" if "gpu_index" in frame else None
    if key is None:
        yield "gpu", frame
        return
    groups: list[tuple[Any, pd.DataFrame]] = list(frame.groupby(key, sort=False))  # keys: pandas scalars
    for gpu, rows in groups:
        last = rows["line"].iloc[-1]
        rows.attrs["cycles_after"] = max((int((other["line"] > last).sum()) for _, other in groups), default=0)
        yield (str(int(gpu)) if key == "gpu_index" else pci_of(str(gpu))), rows


def _span(doc: TextDoc, header: Line, rows: pd.DataFrame) -> Location:
    return Location(doc.path, int(rows["line"].iloc[0]), int(rows["line"].iloc[-1]))


# ---- findings ------------------------------------------------------------------------------


def _detect(doc: TextDoc, header: Line, raw: pd.Series, gpu: str, rows: pd.DataFrame) -> Iterator[Event]:
    """The events a look at this GPU's series would raise."""
    base: dict[str, Any] = {"gpu": gpu}
    for name in ("gpu_index", "gpu_name", "pci"):
        if name in rows and rows[name].notna().any():
            value = rows[name].dropna().iloc[0]
            base[name] = int(value) if name == "gpu_index" else str(value)
    for kind, span, fields in (*_temperature(rows), *_power(rows), *_throttle(rows), *_growth(rows),
                               *_stuck(rows), *_gone(rows)):
        yield _event(doc, header, raw, kind, span, base | fields)


def _event(doc: TextDoc, header: Line, raw: pd.Series, kind: str, span: pd.DataFrame, fields: dict) -> Event:
    first, last = int(span["line"].iloc[0]), int(span["line"].iloc[-1])
    shown = [header.text, raw.iloc[first - header.number - 1]]
    if last != first:
        shown.append(raw.iloc[last - header.number - 1])
    extra = {}
    if "time" in span and span["time"].notna().any():
        start, end = span["time"].iloc[0], span["time"].iloc[-1]
        fields |= {"start": start.isoformat(), "end": end.isoformat()}
        extra = {"time": start.to_pydatetime(), "clock": "wall"}
    fields["duration_s"] = round(float(span["elapsed_s"].iloc[-1] - span["elapsed_s"].iloc[0]), 1)
    return Event(kind, Location(doc.path, first, last), "\n".join(shown), fields, **extra)


def _run_bounds(mask: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Start and end positions (inclusive) of each run of True in `mask`."""
    import numpy as np

    values = mask.fillna(False).astype(bool).to_numpy()
    edges = (values[1:] != values[:-1]).nonzero()[0] + 1
    bounds = np.concatenate(([0], edges, [len(values)]))
    starts, ends = bounds[:-1], bounds[1:] - 1
    keep = values[starts] if len(values) else np.zeros(0, dtype=bool)
    return starts[keep], ends[keep]


def _longest(rows: pd.DataFrame, mask: pd.Series, min_s: float) -> pd.DataFrame | None:
    """The longest run where `mask` holds, if it lasts at least `min_s` seconds (the first of equal ones)."""
    starts, ends = _run_bounds(mask)
    if not len(starts):
        return None
    elapsed = rows["elapsed_s"].to_numpy()
    lengths = elapsed[ends] - elapsed[starts]
    best = int(lengths.argmax())
    if not lengths[best] >= min_s:
        return None
    return rows.iloc[starts[best] : ends[best] + 1]


def _temperature(rows):
    if "temp_c" not in rows:
        return
    hot = rows[rows["temp_c"] >= TEMP_HIGH_C]
    if not hot.empty:
        yield "gpu-temp-high", hot, {"temp_max_c": float(hot["temp_c"].max()), "threshold_c": TEMP_HIGH_C,
                                     "samples": len(hot)}


def _power(rows):
    if "power_w" not in rows or "power_cap_w" not in rows:
        return
    span = _longest(rows, rows["power_w"] >= rows["power_cap_w"] * POWER_AT_LIMIT_RATIO, POWER_SUSTAINED_S)
    if span is not None:
        yield "gpu-power-limit", span, {"power_max_w": float(span["power_w"].max()),
                                        "power_cap_w": float(span["power_cap_w"].max())}


def _throttle(rows):
    active = {}
    for name, bit in _THROTTLE_BITS.items():
        flags = rows.get(name)
        if "throttle_mask" in rows:
            from_mask = (rows["throttle_mask"].fillna(0).astype(int) & bit) > 0
            flags = from_mask if flags is None else flags.fillna(False).astype(bool) | from_mask
        if flags is not None and flags.fillna(False).astype(bool).any():
            active[name] = flags.fillna(False).astype(bool)
    if active:
        mask = sum(flag.astype(int) for flag in active.values()) > 0
        span = rows[mask]
        yield "gpu-throttle", span, {"throttle_active": [_REASON_NAMES[name] for name in active],
                                     "samples": len(span)}


def _growth(rows):
    """Memory that only grows: a span with no real drop, enough growth, for long enough; its slope in MiB/min."""
    if "memory_used_mib" not in rows:
        return
    used = rows["memory_used_mib"]
    import numpy as np

    known = used.notna()
    if not known.any():  # no memory sample survived: nothing can grow
        return
    segment = (used.diff() < -LEAK_NOISE_MIB).cumsum()[known].to_numpy()  # a new segment after each real drop
    spans = rows[known]
    starts = np.concatenate(([0], (segment[1:] != segment[:-1]).nonzero()[0] + 1)) if len(segment) else segment
    ends = np.concatenate((starts[1:], [len(segment)])) - 1
    values, elapsed = spans["memory_used_mib"].to_numpy(), spans["elapsed_s"].to_numpy()
    grown = ((values[ends] - values[starts] >= LEAK_MIN_GROWTH_MIB)
             & (elapsed[ends] - elapsed[starts] >= LEAK_MIN_SPAN_S))
    for lo, hi in zip(starts[grown], ends[grown]):
        span = spans.iloc[lo : hi + 1]
        growth = span["memory_used_mib"].iloc[-1] - span["memory_used_mib"].iloc[0]
        slope = float(np.polyfit(span["elapsed_s"] / 60.0, span["memory_used_mib"], 1)[0])
        fields = {"slope_mib_per_min": round(slope, 1), "growth_mib": float(growth),
                  "memory_used_mib": float(span["memory_used_mib"].iloc[-1])}
        if "memory_total_mib" in span and span["memory_total_mib"].notna().any():
            total = float(span["memory_total_mib"].max())
            fields |= {"memory_total_mib": total, "ends_full": fields["memory_used_mib"] >= total * MEMORY_FULL_RATIO}
        else:
            fields["ends_full"] = False
        yield "gpu-memory-growth", span, fields


def _stuck(rows):
    """Utilisation frozen at 100 % (spinning: low power) or 0 % while memory is held and unchanged."""
    if "util_pct" not in rows or "memory_used_mib" not in rows:
        return
    held = rows["memory_used_mib"] >= STUCK_MEMORY_HELD_MIB
    flat = rows["memory_used_mib"].diff().abs().fillna(0) <= LEAK_NOISE_MIB
    spinning = rows["util_pct"] >= 99
    if "power_w" in rows and "power_cap_w" in rows:
        spinning &= rows["power_w"] < rows["power_cap_w"] * STUCK_POWER_RATIO
    for level, mask in ((100, spinning), (0, rows["util_pct"] == 0)):
        span = _longest(rows, mask & held & flat, STUCK_MIN_SPAN_S)
        if span is not None:
            yield "gpu-util-stuck", span, {"util_pct": level, "memory_used_mib": float(span["memory_used_mib"].max())}


def _gone(rows):
    """A GPU whose values turned into lost-GPU errors or dashes, or whose samples stop while the log goes on."""
    lost = rows[rows["lost"].fillna(False).astype(bool)]
    if not lost.empty:
        yield "gpu-lost", lost, {"reason": "values unreadable", "last_good_line": _last_good(rows, lost)}
        return
    after = rows.attrs.get("cycles_after", 0)
    if after >= GONE_MIN_SAMPLES:
        yield "gpu-lost", rows.iloc[[-1]], {"reason": "samples stop", "cycles_after": after}


def _last_good(rows, lost) -> int | None:
    good = rows[~rows["lost"].fillna(False).astype(bool)]
    return int(good["line"].iloc[-1]) if not good.empty else None
