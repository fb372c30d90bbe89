"""The environment, merged from every event: GPUs, driver, CUDA, framework, hosts.

Sources put what they learn about the machine into event fields with the
names below; this stage gathers each name's distinct values across inputs, in
the order first seen, so a report can say "RTX 5090, sm_120, driver 570.124"
whichever file said it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .join import NVML_KINDS, gpu_key
from .model import Event

FACT_FIELDS = (
    "host",
    "gpu_name",
    "sm",
    "pci",
    "gpu_uuid",
    "driver_version",
    "cuda_version",
    "torch_version",
    "framework",
    "supported_archs",
    "kernel_version",
    "python_version",
)
"""Event fields that describe the environment rather than one incident."""


def collect_facts(events: Iterable[Event]) -> Mapping[str, Any]:
    """Each fact name mapped to its distinct values in order of appearance, and `gpus`: one entry per GPU."""
    events = list(events)
    facts: dict[str, list] = {}
    for event in events:
        for name in FACT_FIELDS:
            value = event.fields.get(name)
            if value in (None, "", [], ()):
                continue
            values = facts.setdefault(name, [])
            if value not in values:
                values.append(value)
    gpus = collect_gpus(events)
    if gpus:
        facts["gpus"] = gpus
    return facts


GPU_KEYS = (("index", "gpu_index"), ("pci", "pci"), ("uuid", "gpu_uuid"), ("name", "gpu_name"), ("sm", "sm"))
"""A GPU entry's keys and the event fields they come from."""


def collect_gpus(events: Iterable[Event]) -> list[dict[str, Any]]:
    """One entry per GPU, merged on bus id or UUID (nvidia-smi, Xid and NVRM lines, arch warnings).

    `index` is nvidia-smi's. A framework's "GPU 0" is a CUDA ordinal: it joins the
    nvidia-smi GPU of that index only when both name the same model.
    """
    gpus: list[dict[str, Any]] = []
    for event in events:
        if "sxid" in event.fields:
            continue  # an NVSwitch, not a GPU
        entry = {key: event.fields[name] for key, name in GPU_KEYS if event.fields.get(name) not in (None, "")}
        if "pci" in entry:
            entry["pci"] = gpu_key(entry["pci"]) or entry["pci"]
        ordinal = entry.pop("index", None) if event.kind not in NVML_KINDS else None
        if not {"pci", "uuid", "name"} & entry.keys():
            continue
        same = next((gpu for gpu in gpus if _same_gpu(gpu, entry, ordinal)), None)
        if same is None:
            gpus.append(entry)
        else:
            for key, value in entry.items():
                same.setdefault(key, value)
    return gpus


def _same_gpu(known: Mapping[str, Any], new: Mapping[str, Any], ordinal: int | None) -> bool:
    for key in ("pci", "uuid"):
        if key in known and key in new:
            return str(known[key]).lower() == str(new[key]).lower()
    if {"pci", "uuid"} & new.keys():
        return False
    same_model = _model(known.get("name")) == _model(new.get("name"))
    return same_model and (ordinal is None or known.get("index") == ordinal)


def _model(name: object) -> str:
    return str(name).lower().removeprefix("nvidia ").strip()
