"""What NVIDIA's management tools print: nvidia-smi, NVML errors, DCGM, Fabric Manager.

`nvidia-smi -q` is the one place a GPU's health counters sit side by side
(ECC, retired pages, row remapping, throttle reasons, temperatures, clocks);
it becomes one `gpu-state` event per GPU whose text keeps the lines that
prove a finding. The default `nvidia-smi` table gives the same event per GPU
row (fewer fields; `ERR!` cells, where NVML could not read a value, listed in
`err_cells`); its version banner becomes facts of those events. When nvidia-smi
cannot even start, its one-line complaint (`nvml-error`) is the evidence. DCGM's
host engine reports health-watch verdicts (`dcgm-health`), and so does `dcgmi health -c`
(one per incident of its report). The Fabric Manager log reports NVSwitch errors (`sxid`,
the same kind and field names the kernel log uses for SXid lines). A health daemon's
verdict on an Xid (gpud's `XID 79(...) detected on PCI:...`) is an `xid` event like the
kernel log's. `dcgmi dmon` columns of data/gpu-health-fields.tsv give, per GPU, an `xid`
event for the code its last-Xid column holds and the -q report's `gpu-state` fields for
its ECC and row-remap counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import regex

from .. import later
from ..join import gpu_key
from ..knowledge import APOSTROPHE, data_rows, nvml_error_fields, nvml_return, nvml_returns, typed, xid
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
    b"could not load NVML library", b"nvml error: ", b"nvml: ",
    b"Unable to determine the device handle",
    b"No devices were found",
    b"in health system",
    b"detected NVSwitch",
    b"failed to configure all the available GPUs or NVSwitches", b"fabric manager instances finished their",
    b"MiB /",  # the memory cell of a table row: a row pasted without its banner is still read
    b"ERR!",
    b"Remapped Rows", b"ECC Errors", b"Retired Pages", b"Clocks Event Reasons", b"Clocks Throttle Reasons",
    b"Fabric",  # nvidia-smi -q's NVLink fabric section, also pasted on its own
    b"NVML: ", b"NVML error", b"NVMLError_", b"NVML_ERROR_", b"[NVML]", b"GPU is lost", b"GpuIsLost", b"GPUIsLost",
    b"GPU requires reset",
    b"GPU Recovery Action",  # nvidia-smi -q's field, also where a person quotes it
    b") detected on PCI:",
    b"#Entity",  # the header of `dcgmi dmon`
    b"Health Monitor Report",  # `dcgmi health -c`
    b"DCGM_FI_DEV_",  # a DCGM field by name (dcgm-exporter's metrics)
)

REPEATS: tuple[bytes, ...] = (
    b"ERR!", b"MiB /", b"Driver Version",
    b"Failed to initialize NVML", b"NVIDIA-SMI has failed", b"NVIDIA-SMI couldn't find", b"could not load NVML library",
    b"nvml error: ", b"nvml: ", b"Unable to determine the device handle", b"No devices were found",
    b"in health system", b"detected NVSwitch",
    b"NVML: ", b"NVML error", b"NVMLError_", b"NVML_ERROR_", b"[NVML]", b"GPU is lost", b"GpuIsLost", b"GPUIsLost",
    b"GPU requires reset", b") detected on PCI:",
)
"""Anchors whose identical lines fold while the input is read (text.TextDoc.scan): one-line errors, and the
rows and banner of `nvidia-smi -l` printing one table for days. A changed row is a different line and is
still read; `nvidia-smi -q` reports start at their NVSMI LOG line, which never folds."""

TABLE_LINES = 2000
"""Most lines read for one nvidia-smi table (16 GPUs take 70)."""

REPORT_LINES = 20000
"""Most lines read for one nvidia-smi -q report (8 GPUs with process lists stay far below)."""

_GPU_HEADER = later.compile(r"^\s*GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = later.compile(r"^(?P<indent>\s*+)(?P<key>[^:\s](?:[^:]*[^:\s])?)\s*:\s?(?P<value>(?:.*\S)?)\s*$")
_SECTION = later.compile(r"^(?P<indent>\s*+)(?P<key>\S(?:.*\S)?)\s*$")
_NUMBER = later.compile(r"^-?\d+")
_TABLE_VERSIONS = later.compile(
    r"NVIDIA-SMI (?P<smi>[\d.]+)\s+Driver Version: (?P<driver>[\d.]+)(?:\s+CUDA Version: (?P<cuda>[\d.]+))?")
"""The table's banner; drivers before 410 print no CUDA Version in it."""
_BUS_ID = later.compile(r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")

_ROW_NAME = later.compile(r"^\s*(?P<index>\d+)\s+(?P<name>\S.*?)\s+(?P<persistence>On|Off|N/A|ERR!|WDDM|TCC)\s*$")
_ROW_BUS = later.compile(r"^\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]|ERR!)\s+"
                         r"(?P<display>\S+)\s*$")
_ROW_ONE = later.compile(r"^\s*(?P<ecc>\S+)\s*$")
_ROW_POWER = later.compile(
    r"^\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<power>\S+?)\s*/\s*(?P<power_cap>\S+)\s*$")
_ROW_MEMORY = later.compile(r"^\s*(?P<memory_used>\S+?)\s*/\s*(?P<memory_total>\S+)\s*$")
_ROW_UTIL = later.compile(r"^\s*(?P<util>\S+)\s+(?P<compute_mode>\S.*?)\s*$")
_ROW_CELLS = ((_ROW_NAME, _ROW_BUS, _ROW_ONE), (_ROW_POWER, _ROW_MEMORY, _ROW_UTIL))
"""The cells of a GPU row's first and second line, the same in every layout (only widths change)."""
_ROW_FIELDS = {"fan": "fan_pct", "temp": "temp_c", "power": "power_w", "power_cap": "power_cap_w",
               "memory_used": "memory_used_mib", "memory_total": "memory_total_mib", "util": "util_pct"}

_NVML_ERRORS = (
    later.compile(r"Failed to initialize NVML: (?P<error>[^`'\"\n]*[^`'\"\s]|\s)"),  # a quote ends it in prose
    later.compile(r"NVIDIA-SMI has failed because it (?P<error>" + typed("couldn't communicate with the NVIDIA driver")
                  + ")"),
    later.compile(r"NVIDIA-SMI (?P<error>" + typed("couldn't find libnvidia-ml.so library") + ")"),
    later.compile(r"(?P<error>could not load NVML library)"),  # the device plugin and other NVML clients
    # nvidia-container-cli ("nvml error: ..."), nvidia-docker 1 and other Go NVML clients ("Error: nvml: ...")
    later.compile(r"\bnvml(?: error)?: (?P<error>[^:\n\\'\"]+?)\s*+(?:[:\\'\"]|$)"),  # a quote or an escape ends it
    later.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*"
                  r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]):\s*(?P<error>.+?)\s*$"),
    later.compile(r"(?P<error>No devices were found)"),
)
_NVML_VERSION = later.compile(r"NVML library version: (?P<version>[\d.]+)")
_NVML_RETURN = later.compile(
    r"\bNVML_ERROR_(?P<name>[A-Z_]+)\b|\bNVMLError_(?P<camel>[A-Za-z]+)\b"
    r"|(?i:\bnvml\b)[^\n]{0,160}?(?:(?i:status|code)[:= ]+(?P<camel>[A-Z][A-Za-z]{2,40})\b"
    r"|(?i:error code|code|error|status|returned)[:= ]*\(?(?P<number>\d{1,3})\)?(?![\d.])|\((?P<number>\d{1,3})\):)"
)
"""An NVML return code as NVML's clients print it: by name (NVML_ERROR_GPU_IS_LOST), as pynvml's exception
(NVMLError_GpuIsLost), in CamelCase after a status (NiceHash: `status: GPUIsLost`), or by number on a line that
names NVML (T-Rex: `NVML: can't get GPU #0, error code 15`; Slurm: `NVML: Failed to get usage(15): GPU is lost`)."""
_NVML_TEXT = later.compile(r"(?i)\b(?P<text>" + "|".join(
    regex.escape(r.message) for r in nvml_returns() if r.cause and r.message and len(r.message) >= 10) + r")\b")
"""nvmlErrorString's text of a code that points at a cause, printed without a code (PhoenixMiner: `unable to get
fan speed - GPU is lost (15)`)."""

_DCGM = later.compile(
    r"Detected an? (?P<level>\w+) in health system (?P<system>[\w-]+):\s*'?(?P<message>.*?)'?\s*$")
_DCGM_GPU = later.compile(r"\bGPU (\d+)\b")

_DAEMON_XID = later.compile(r"\bXID (?P<xid>[0-9]{1,4}) ?\((?P<name>[^)\n]{0,120})\) detected on PCI:"
                           r"(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)")
"""gpud's verdict on an Xid it read from the kernel or NVML (`XID 79(GPU has fallen off the bus) detected on
PCI:0000:04:00`, in its states' reason and its events' message)."""

_FM_ERROR = later.compile(
    r"detected NVSwitch (?P<severity>non-fatal|fatal) error (?P<sxid>\d+)"
    r"(?: on fid (?P<fid>\d+))?(?: on NVSwitch pci bus id (?P<bus>\S+))?"
    r"(?: physical id (?P<switch>\d+))?(?: port (?P<port>\d+))?")
_FM_SETUP = later.compile(r"failed to configure all the available GPUs or NVSwitches"
                          r"|not all local fabric manager instances finished their configuration")
"""Fabric Manager's words when it could not set up the NVSwitch fabric at start (the GPUs then fail CUDA's start
with 802, "system not yet initialized")."""
@dataclasses.dataclass(frozen=True)
class HealthField:
    """A health reading of a query tool's column (data/gpu-health-fields.tsv) and the event field it fills."""

    tool: str
    field: str
    reading: str
    kind: str
    event_field: str


HEALTH_FIELDS = tuple(HealthField(row["tool"], row["field"], row["reading"], row["kind"], row["event_field"])
                      for row in data_rows("gpu-health-fields.tsv"))
NO_VALUE = frozenset({"", "-", "n/a", "not supported"})
"""Cells that say nothing about health; nvidia-smi's own notes in brackets (`[N/A]`, `[Not Supported]`,
`[Unknown Error]`) are none either."""
HEALTHY_ACTIONS = frozenset({"none", "0"})
"""The recovery action values that ask for nothing (NVML_GPU_RECOVERY_ACTION_NONE by name, in any letter case, and by
number)."""


def health_fields(tool: str) -> dict[str, HealthField]:
    """The health readings of one tool's columns, by column name."""
    return {field.field: field for field in HEALTH_FIELDS if field.tool == tool}


def unhealthy(field: HealthField, cell: str) -> int | bool | str | None:
    """What an unhealthy cell says, as the event carries it (a count or Xid code, True, the action's word); None for
    a healthy cell and for one that says nothing."""
    value = cell.strip()
    if value.lower() in NO_VALUE or value.startswith("["):
        return None
    if field.reading in ("count", "xid"):
        return int(value) if _COUNT.fullmatch(value) and int(value) > 0 else None
    if field.reading == "flag":
        return True if value.lower() in ("yes", "1") else None
    return value if value.lower() not in HEALTHY_ACTIONS else None


_COUNT = later.compile(r"[0-9]{1,18}")
"""A count as the tools print it (ASCII digits; a longer run is no counter of theirs)."""
_DMON_HEADER = later.compile(r"^#Entity\s+\S")
_DMON_ROW = later.compile(r"^GPU (?P<gpu>[0-9]{1,6})\s")
DMON_LINES = 20000
"""Most lines of one `dcgmi dmon` run read after its first header (its header repeats every 14 rows)."""

_TREE_ROW = later.compile(r"^\s*+\|(?P<key>[^|]*+)\|(?P<value>[^|]*+)\|\s*+$")
_TREE_ENTITY = later.compile(r"^-> (?P<id>[0-9]{1,6})$")
_TREE_SYSTEM = later.compile(r"^-> (?![0-9]+$)(?P<system>.+?)(?: system)?$")
HEALTH_REPORT_LINES = 2000
"""Most lines of one `dcgmi health -c` report read (each incident takes a few; DCGM keeps at most 64 per check)."""
INCIDENT_LEVELS = {"Warning": "warning", "Failure": "failure"}
"""dcgmHealthWatchResults_t as dcgmi prints it -> the level of a dcgm-health event (Healthy is no incident)."""

_FM_TIME = later.compile(r"^\[(?P<stamp>[A-Z][a-z]{2} +\d{1,2} \d{4} \d{2}:\d{2}:\d{2})\]")

ACTIVE_IGNORED = frozenset({"Idle", "Applications Clocks Setting", "Display Clock Setting", "Sync Boost"})
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
            said = (("nvsmi_version", match["smi"]), ("driver_version", match["driver"]),
                    ("cuda_version", match["cuda"]))
            versions = {key: value for key, value in said if value}
            events, covered = _table(doc, line, versions)
            yield from events or [doc.event("nvsmi-versions", line, versions)]
        elif (row := _table_row(doc, line)) is not None:
            yield _row_event(doc, row, {}, None)
            covered = row[-1].number
        elif "NVSMI LOG" in text or "Attached GPUs" in text or "Driver Version" in text:
            events, covered = _report(doc, line)
            yield from events
        elif _SECTION_START.match(text):
            events, covered = _excerpt(doc, line)
            yield from events
        elif "Health Monitor Report" in text:
            events, covered = _health_check(doc, line)
            yield from events
        elif _DMON_HEADER.match(text):
            events, covered = _dcgmi_dmon(doc, line)
            for event in events:
                _fold(seen, event)
        else:
            _fold(seen, _one_line(doc, line))
    yield from seen.values()


def _one_line(doc: TextDoc, line: Line) -> Event | None:
    """An nvml-error, dcgm-health or sxid event from one line, or None."""
    for pattern in _NVML_ERRORS:
        if match := pattern.search(line.text):
            return _nvml_error(doc, line, match)
    if ((match := _NVML_RETURN.search(line.text) or _NVML_TEXT.search(line.text))
            and (code := nvml_return(next(g for g in match.groupdict().values() if g))) and code.number):
        return doc.event("nvml-error", line, nvml_error_fields(code, "nvml-client"))
    if match := _DCGM.search(line.text):
        fields = {"system": match["system"], "level": match["level"].lower(), "message": match["message"]}
        if gpu := _DCGM_GPU.search(match["message"]):
            fields["gpu_index"] = int(gpu[1])
        return doc.event("dcgm-health", line, fields)
    if match := _DAEMON_XID.search(line.text):
        return doc.event("xid", line, {"xid": int(match["xid"]), "pci": match["pci"], "message": match["name"].strip(),
                                       "origin": "gpud"} | _xid_name(int(match["xid"])))
    if match := _FM_ERROR.search(line.text):
        return _fabric_error(doc, line, match)
    if match := _DCGM_METRIC.search(line.text):
        return _dcgm_metric(doc, line, match)
    if match := _FM_SETUP.search(line.text):
        return doc.event("fabric-setup-failed", line, {"message": match[0], "origin": "fabric-manager"})
    if (match := _RECOVERY_ACTION.search(line.text)) and (action := _recovery_action(match["action"])):
        return doc.event("gpu-state", line, {"recovery_action": action})
    return None


_RECOVERY_ACTION = later.compile(
    r"\bGPU Recovery Action\b[^A-Za-z0-9\n]{1,40}?(?P<action>(?i:(?:GPU[ _])?Reset(?:[ _]Required)?"
    r"|(?:Node[ _])?Reboot(?:[ _]Required)?|Drain[ _]and[ _]Reset|Drain[ _]P2P|Recover[ _]IMEX[ _]Domain|None))\b")
"""nvidia-smi -q's recovery action on a line of its own or where a person quotes it in prose (`GPU Recovery Action :
Reset` in backticks, "`GPU Recovery Action`은 `Reboot`"): only NVML's action names are read after the field's name,
so a sentence about the field is not read as a value."""


def _recovery_action(value: str) -> str | None:
    """The recovery action a value of nvidia-smi's field asks for, None for none (data/gpu-health-fields.tsv)."""
    action = unhealthy(health_fields("nvidia-smi")["gpu_recovery_action"], value)
    return str(action) if action is not None else None


_DCGM_METRIC = later.compile(
    r"\b(?P<field>DCGM_FI_DEV_[A-Z0-9_]{2,60}+)(?:\{(?P<labels>[^{}\n]{0,800}+)\})?"
    r"(?:[ \t|:=`*]++(?P<value>\d{1,20}+)(?![\w.]))?")
"""A DCGM field by its name, as dcgm-exporter exposes it to Prometheus (`DCGM_FI_DEV_XID_ERRORS{gpu="0",
UUID="GPU-...",err_code="79",err_msg="GPU has fallen off the bus"} 79`) or as a person copies it into a table
(`| DCGM_FI_DEV_ROW_REMAP_FAILURE | 1 |`); the health fields of data/gpu-health-fields.tsv (tool dcgm-exporter)."""
_LABEL = later.compile(r'\b(?P<name>\w{1,40}+)="(?P<value>[^"\n]{0,200}+)"')


def _dcgm_metric(doc: TextDoc, line: Line, match: regex.Match) -> Event | None:
    """The event a health field's unhealthy value gives (an xid event for the last-Xid field, whose code may stand in
    the `err_code` or `xid` label), or None for a healthy value, another field or a query (`err_code=~"4|8"`)."""
    field = health_fields("dcgm-exporter").get(match["field"])
    if field is None:
        return None
    labels = {label["name"]: label["value"] for label in _LABEL.finditer(match["labels"] or "")}
    cell = match["value"] or ""
    if field.reading == "xid":
        cell = labels.get("err_code") or labels.get("xid") or cell
    value = unhealthy(field, cell)
    if value is None:
        return None
    fields: dict[str, Any] = {"origin": "dcgm-exporter"}
    if (gpu := labels.get("gpu", "")).isdigit():
        fields["gpu_index"] = int(gpu)
    if field.reading == "xid":
        code = int(value)
        return doc.event("xid", line, fields | {"xid": code, "message": labels.get("err_msg", "")} | _xid_name(code))
    return doc.event(field.kind, line, fields | {field.event_field: value})


def _dcgmi_dmon(doc: TextDoc, header: Line) -> tuple[list[Event], int]:
    """The health columns of one `dcgmi dmon` run: per GPU, an xid event for each Xid code its XIDER column holds
    (DCGM keeps the last code, so every later sample repeats it) and one gpu-state event with the worst value of
    each count or flag. Cells are cut at the header's column starts (values are left-aligned under their name)."""
    watched = health_fields("dcgmi-dmon")
    names = [(match.start(), match[0]) for match in regex.finditer(r"\S+", header.text)][1:]
    ends = [start for start, _ in names[1:]] + [None]
    columns = [(start, end, watched[name]) for (start, name), end in zip(names, ends) if name in watched]
    if not columns:
        return [], header.number
    xids: dict[tuple[int, int], Line] = {}
    states: dict[int, tuple[dict[str, Any], Line, Line]] = {}
    last = header
    for line in doc.following(header, DMON_LINES, max_bytes=4 << 20):
        if line.text == header.text or line.text.startswith("ID"):
            last = line
            continue
        if not (row := _DMON_ROW.match(line.text)):
            break
        last = line
        gpu = int(row["gpu"])
        for start, end, field in columns:
            if (value := unhealthy(field, line.text[start:end])) is None:
                continue
            if field.kind == "xid":
                xids.setdefault((gpu, int(value)), line)
                continue
            found, first, _ = states.get(gpu, ({}, line, line))
            found[field.event_field] = max(found.get(field.event_field, value), value)
            states[gpu] = (found, first, line)
    shown = header.original.rstrip()
    events = [doc.event("xid", line, {"xid": code, "gpu_index": gpu, "origin": "dcgm", **_xid_name(code)},
                        text=f"{shown}\n{line.original.rstrip()}") for (gpu, code), line in xids.items()]
    events += [doc.event("gpu-state", first, {"gpu_index": gpu, "view": "dcgmi-dmon", **found},
                         text="\n".join(dict.fromkeys([shown, first.original.rstrip(), end.original.rstrip()])))
               for gpu, (found, first, end) in states.items()]
    return events, last.number


def _health_check(doc: TextDoc, title: Line) -> tuple[list[Event], int]:
    """A `dcgmi health -c` report (DCGM's Health.cpp tree: entity group, `-> id`, `-> <system>` with its health,
    the incident's message wrapped on the rows under it): a dcgm-health event per Warning or Failure incident, with
    the host engine's field names."""
    incidents: list[tuple[dict[str, Any], Line, Line]] = []
    group, gpu, last = "", None, title
    for line in doc.following(title, HEALTH_REPORT_LINES):
        if line.text.strip().startswith("+"):
            last = line
            continue
        if not (row := _TREE_ROW.match(line.text)):
            break
        last = line
        key, value = row["key"].strip(), row["value"].strip()
        if not key and value and incidents and incidents[-1][2].number == line.number - 1:
            fields, first, _ = incidents[-1]
            fields["message"] = f"{fields['message']} {value}".strip()
            incidents[-1] = (fields, first, line)
        elif key and not key.startswith("->"):
            group, gpu = key, None
        elif entity := _TREE_ENTITY.match(key):
            gpu = int(entity["id"]) if group == "GPU" else None
        elif (system := _TREE_SYSTEM.match(key)) and value in INCIDENT_LEVELS:
            fields = {"system": system["system"], "level": INCIDENT_LEVELS[value], "message": ""}
            incidents.append(({**fields, "gpu_index": gpu} if gpu is not None else fields, line, line))
    return [doc.event("dcgm-health", first, fields, last=end) for fields, first, end in incidents], last.number


def _xid_name(number: int) -> dict[str, str]:
    """The documented name of an Xid, as the kernel log's xid events carry it."""
    documented = xid(number)
    return {"xid_name": documented.name} if documented else {}


def _nvml_error(doc: TextDoc, line: Line, match: regex.Match) -> Event:
    fields: dict[str, Any] = {"error": regex.sub(APOSTROPHE, "'", match["error"]), "tool": "nvidia-smi"}
    if (code := nvml_return(fields["error"])) and code.number:
        fields |= {"nvml_return": code.name, "nvml_code": code.number}
        if code.cause:
            fields["status_cause"] = code.cause
    if match.groupdict().get("bus"):
        fields["pci"] = pci_of(match["bus"])
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
        fields["pci"] = pci_of(match["bus"])
    for name in ("switch", "port"):
        if match[name]:
            fields[name] = int(match[name])
    extra: dict[str, Any] = {}
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
        seen[key] = dataclasses.replace(first, count=first.count + event.count)
    else:
        seen[key] = event


def pci_of(bus: str) -> str:
    """A bus id in the one spelling (join.gpu_key: 00000000:07:00.0 -> 0000:07:00.0), else as written."""
    return gpu_key(bus) or bus.lower()


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


_SECTION_START = later.compile(
    r"^(?P<indent>\s*)(?:Remapped Rows|ECC Errors|Retired Pages|Clocks Event Reasons|Clocks Throttle Reasons|Fabric)"
    r"\s*$")
"""A health section of `nvidia-smi -q` that people paste on its own, without the report around it."""
EXCERPT_LINES = 120


def _excerpt(doc: TextDoc, start: Line) -> tuple[list[Event], int]:
    """A `gpu-state` event from health sections pasted without their report (no GPU header, no bus id).

    The section runs while lines are indented deeper than its title; a sibling health section at the
    same indentation continues the excerpt.
    """
    title = _SECTION_START.match(start.text)
    assert title is not None  # the caller matched it
    indent = len(title["indent"].expandtabs(4))
    lines, last = [start], start
    for line in doc.following(start, EXCERPT_LINES):
        text = line.text.expandtabs(4)
        depth = len(text) - len(text.lstrip())
        if text.strip() and depth <= indent and not _SECTION_START.match(line.text):
            break
        lines.append(line)
        if text.strip():
            last = line
    tree = _tree([start, *lines])
    fields: dict = {"excerpt": True}
    evidence = _health(tree, fields)
    if len(fields) == 1:
        return [], last.number
    return [doc.event("gpu-state", start, fields, last=last, text=_shown(tree, [start], evidence))], last.number


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
        if match.re.pattern == _KEY_VALUE.pattern:
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


def _float(line: Line) -> float | None:
    match = regex.match(r"-?\d+(?:\.\d+)?", _value(line))
    return float(match[0]) if match else None


def _flag(line: Line) -> bool | None:
    value = _value(line).lower()
    return True if value == "yes" else False if value == "no" else None


def _gpu_state(doc: TextDoc, index: int, section: list[Line], header: dict, header_lines: list[Line]) -> Event:
    head = section[0]
    gpu_header = _GPU_HEADER.match(head.text)
    assert gpu_header is not None  # _report starts a section only at a GPU header
    bus = gpu_header["bus"]
    tree = _tree(section)
    fields: dict = {"pci": pci_of(bus), "bus_id": bus, "gpu_index": index}
    for name, key in (("driver_version", "Driver Version"), ("cuda_version", "CUDA Version")):
        if header.get(key, "N/A") != "N/A":
            fields[name] = header[key]
    evidence: list[Line] = [head]
    for name, path in (("gpu_name", ("Product Name",)), ("gpu_uuid", ("GPU UUID",)), ("gpu_serial", ("Serial Number",)),
                       ("pstate", ("Performance State",))):
        if path in tree:
            fields[name] = _value(tree[path])
            evidence.append(tree[path])
    evidence.extend(_health(tree, fields))
    last = next(line for line in reversed(section) if line.text.strip() or line is head)
    return doc.event("gpu-state", head, fields, last=last, text=_shown(tree, header_lines, evidence))


def _health(tree: dict, fields: dict) -> list[Line]:
    """Every health reading of a -q section (ECC, retired pages, values, clock reasons, resets) into `fields`;
    the lines that show something wrong."""
    collectors = (_ecc, _retired_pages, _values, _clock_reasons, _fabric, _misc)
    return [line for collect in collectors for line in collect(tree, fields)]


def _shown(tree: dict, heading: list[Line], evidence: list[Line]) -> str:
    """The evidence lines with the section titles above them, in report order, as written."""
    body = sorted({line.number: line for line in [*heading, *evidence, *_ancestors(tree, evidence)]}.values(),
                  key=lambda line: line.number)
    return "\n".join(line.original.rstrip() for line in body)


def _ancestors(tree: dict[tuple[str, ...], Line], evidence: list[Line]) -> list[Line]:
    """The section header lines above each evidence line, so the excerpt reads as nvidia-smi printed it."""
    wanted = {line.number for line in evidence}
    out: list[Line] = []
    for path, line in tree.items():
        if line.number in wanted:
            out.extend(tree[path[:i]] for i in range(1, len(path)) if path[:i] in tree)
    return out


def _ecc(tree: dict, fields: dict) -> list[Line]:
    """Uncorrectable (double-bit) and correctable ECC counts, volatile and aggregate, from any driver's layout."""
    evidence: list[Line] = []
    for scope in ("Volatile", "Aggregate"):
        for kind, markers in (("uncorrectable", ("Uncorrectable", "Double Bit")),
                              ("correctable", ("Correctable", "Single Bit"))):
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


def _clock_reasons(tree: dict, fields: dict) -> list[Line]:
    """Active clock event (throttle) reasons; older drivers call the section Clocks Throttle Reasons."""
    active = [(path[-1], line) for path, line in tree.items()
              if path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons") and len(path) > 1
              and _value(line) == "Active" and path[-1] not in ACTIVE_IGNORED]
    if active:
        fields["throttle_active"] = [name for name, _ in active]
    return [line for _, line in active]


FABRIC_FAULTS = {"Bandwidth": "Degraded", "Route Recovery in progress": "True", "Route Unhealthy": "True",
                 "Access Timeout Recovery": "True"}
"""The `Fabric` -> `Health` rows of `nvidia-smi -q` (driver 560+; NVML's nvmlGpuFabricInfo_v3 health mask) and the
value each shows for a fault; `Summary` sums them up as Healthy, Unhealthy or Limited Capacity
(NVIDIA/k8s-test-infra#677, a GB300 tray's report; kubernetes-sigs/dra-driver-nvidia-gpu#626)."""
_NOT_SAID = ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]")


def _fabric(tree: dict, fields: dict) -> list[Line]:
    """The GPU's NVLink fabric: registration that completed without success (`Status : Insufficient Resources`,
    Azure/azhpc-images#506) and a health summary or health row that shows a fault."""
    evidence = []
    state, status = tree.get(("Fabric", "State")), tree.get(("Fabric", "Status"))
    if state is not None and status is not None and _value(state) == "Completed" and \
            _value(status) not in (*_NOT_SAID, "Success"):
        fields["fabric_status"] = _value(status)
        evidence += [state, status]
    summary = tree.get(("Fabric", "Health", "Summary"))
    if summary is not None and _value(summary) not in (*_NOT_SAID, "Healthy"):
        fields["fabric_health"] = _value(summary)
        evidence.append(summary)
    faults = [(key, line) for key, shown in FABRIC_FAULTS.items()
              if (line := tree.get(("Fabric", "Health", key))) is not None and _value(line) == shown]
    if faults:
        fields["fabric_faults"] = [key for key, _ in faults]
        evidence += [line for _, line in faults]
    return evidence


REPORT_VALUES: dict[tuple[str, str], tuple[str, Callable[[Line], Any]]] = {
    ("Remapped Rows", "Correctable Error"): ("remapped_rows_correctable", _int),
    ("Remapped Rows", "Uncorrectable Error"): ("remapped_rows_uncorrectable", _int),
    ("Remapped Rows", "Pending"): ("remap_pending", _flag),
    ("Remapped Rows", "Remapping Failure Occurred"): ("remap_failure", _flag),
    ("Temperature", "GPU Current Temp"): ("temp_c", _int),
    ("Temperature", "GPU Slowdown Temp"): ("temp_slowdown_c", _int),
    ("Temperature", "GPU Shutdown Temp"): ("temp_shutdown_c", _int),
    ("Temperature", "Memory Current Temp"): ("memory_temp_c", _int),
    ("Temperature", "GPU Max Operating Temp"): ("temp_max_operating_c", _int),
    ("GPU Power Readings", "Power Draw"): ("power_w", _float),
    ("GPU Power Readings", "Current Power Limit"): ("power_cap_w", _float),
    ("Power Readings", "Power Draw"): ("power_w", _float),
    ("Power Readings", "Power Limit"): ("power_cap_w", _float),
    ("Clocks", "Graphics"): ("clock_graphics_mhz", _int),
    ("Clocks", "SM"): ("clock_sm_mhz", _int),
    ("Max Clocks", "Graphics"): ("clock_max_graphics_mhz", _int),
}
"""`nvidia-smi -q` (section, key) -> the event field it fills and how its value is read."""


def _values(tree: dict, fields: dict) -> list[Line]:
    """The plain values of REPORT_VALUES that the report holds, each with the line that shows it."""
    evidence = []
    for path, (name, convert) in REPORT_VALUES.items():
        line = tree.get(path)
        if line is not None and convert(line) is not None:
            fields[name] = convert(line)
            evidence.append(line)
    return evidence


TEMP_LIMITS = ("temp_max_operating_c", "temp_slowdown_c", "temp_shutdown_c")
"""The limits nvidia-smi -q prints; the lowest one the GPU reports is where its clocks start to drop."""


def _misc(tree: dict, fields: dict) -> list[Line]:
    """Reset requests, the recovery action asked for, PCIe replays and the distance to the lowest temperature
    limit."""
    limits = [fields[name] for name in TEMP_LIMITS if isinstance(fields.get(name), int) and fields[name] > 0]
    if limits and isinstance(fields.get("temp_c"), int):
        fields["temp_headroom_c"] = min(limits) - fields["temp_c"]
    evidence = []
    line = tree.get(("GPU Reset Status", "Reset Required"))
    if line is not None and _flag(line) is not None:
        fields["reset_required"] = _flag(line)
        if fields["reset_required"]:
            evidence.append(line)
    line = tree.get(("GPU Recovery Action",))
    if line is not None and (action := _recovery_action(_value(line))):
        fields["recovery_action"] = action
        evidence.append(line)
    line = tree.get(("PCI", "Replays Since Reset"))
    if line is not None and _int(line) is not None:
        fields["pcie_replays"] = _int(line)
        if fields["pcie_replays"]:
            evidence.append(line)
    return evidence


# ---- the default nvidia-smi table -------------------------------------------------------------


def _cells(line: Line) -> list[str] | None:
    """The three cells of a table line ("| a | b | c |"), or None."""
    text = line.text.strip()
    if not (text.startswith("|") and text.endswith("|")):
        return None
    cells = text[1:-1].split("|")
    return cells if len(cells) == 3 else None


def _row_match(line: Line, which: int) -> dict | None:
    """The named cells of a GPU row's first (0) or second (1) line, or None when it is not one."""
    cells = _cells(line)
    if cells is None:
        return None
    matches = [pattern.match(cell) for pattern, cell in zip(_ROW_CELLS[which], cells)]
    found = [match for match in matches if match is not None]
    if len(found) < len(matches):
        return None
    return {name: value for match in found for name, value in match.groupdict().items()}


def _table_row(doc: TextDoc, line: Line) -> list[Line] | None:
    """The lines of the GPU row that candidate `line` belongs to (first, second and an optional MIG line)."""
    if _row_match(line, 1) is not None:
        before = doc.preceding(line, 1)
        first = before[0] if before and _row_match(before[0], 0) is not None else None
        return _with_mig(doc, [first, line]) if first else None
    if _row_match(line, 0) is not None:
        after = doc.following(line, 1)
        return _with_mig(doc, [line, after[0]]) if after and _row_match(after[0], 1) is not None else None
    return None


def _with_mig(doc: TextDoc, row: list[Line]) -> list[Line]:
    after = doc.following(row[-1], 1)
    return [*row, after[0]] if after and _is_mig(after[0]) else row


def _is_mig(line: Line) -> bool:
    """The third line of a row in 450+ layouts: empty cells but the last (MIG mode)."""
    cells = _cells(line)
    return cells is not None and not cells[0].strip() and not cells[1].strip() and bool(cells[2].strip())


def _table(doc: TextDoc, banner: Line, versions: dict) -> tuple[list[Event], int]:
    """One gpu-state event per GPU row of the table under `banner`; also the last line read."""
    lines = doc.following(banner, TABLE_LINES, max_bytes=1 << 20)
    events: list[Event] = []
    last = banner.number
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.text.strip()
        if not stripped or "Processes:" in stripped or stripped[0] not in "|+":
            break
        if i + 1 < len(lines) and _row_match(line, 0) is not None and _row_match(lines[i + 1], 1) is not None:
            row = lines[i : i + 3] if i + 2 < len(lines) and _is_mig(lines[i + 2]) else lines[i : i + 2]
            events.append(_row_event(doc, row, versions, banner))
            i += len(row)
        else:
            i += 1
        last = lines[i - 1].number
    return events, last


def _row_event(doc: TextDoc, row: list[Line], versions: dict, banner: Line | None) -> Event:
    """A gpu-state event from one table row: the values shown, `ERR!` cells named in err_cells."""
    first, second = _row_match(row[0], 0), _row_match(row[1], 1)
    assert first is not None and second is not None  # the callers matched both lines of the row
    cells = first | second
    if len(row) > 2:
        mig = _cells(row[2])
        assert mig is not None  # the callers checked it with _is_mig
        cells["mig_mode"] = mig[2].strip()
    errors = [name for name, value in cells.items() if value == "ERR!"]
    fields: dict = {"gpu_index": int(cells["index"]), **versions, "view": "table"}
    if cells["bus"] != "ERR!":
        fields |= {"pci": pci_of(cells["bus"]), "bus_id": cells["bus"]}
    for name, field_name in (("name", "gpu_name"), ("perf", "pstate"), ("compute_mode", "compute_mode"),
                             ("mig_mode", "mig_mode")):
        if cells.get(name) not in (None, "ERR!", "N/A"):
            fields[field_name] = cells[name]
    for name, field_name in _ROW_FIELDS.items():
        if match := _NUMBER.match(cells[name]):
            fields[field_name] = int(match[0])
    if cells["ecc"].isdigit():
        fields["ecc_volatile_uncorrectable"] = int(cells["ecc"])
    if errors:
        fields |= {"err_cells": errors, "err_count": len(errors)}
    text = "\n".join(line.text.rstrip() for line in ([banner] if banner else []) + row)
    return doc.event("gpu-state", row[0], fields, last=row[-1], text=text)
