"""The environment, merged from every event: GPUs, driver, CUDA, framework, hosts.

Sources put what they learn about the machine into event fields with the
names below; this stage gathers each name's distinct values across inputs, in
the order first seen, so a report can say "RTX 5090, sm_120, driver 570.124"
whichever file said it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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
    """Each fact name mapped to its distinct values in order of appearance."""
    facts: dict[str, list] = {}
    for event in events:
        for name in FACT_FIELDS:
            value = event.fields.get(name)
            if value in (None, "", [], ()):
                continue
            values = facts.setdefault(name, [])
            if value not in values:
                values.append(value)
    return facts
