"""The environment, merged from every event: GPUs, driver, CUDA, framework, hosts.

Sources put what they learn about the machine into event fields with the
names below; this stage gathers each name's distinct values across inputs, in
the order first seen, so a report can say "RTX 5090, sm_120, driver 570.124"
whichever file said it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import later
from .join import NVML_KINDS, gpu_key
from .knowledge import cuda_error, describe_arch, gpu_arch, sm_number
from .model import Event

FACT_FIELDS = (
    "host",
    "gpu_name",
    "sm",
    "pci",
    "gpu_uuid",
    "gpu_serial",
    "driver_version",
    "cuda_version",
    "build_cuda",
    "torch_version",
    "framework",
    "supported_archs",
    "kernel_version",
    "python_version",
    "job_command",  # the job of a `postmortem run` record (sources.run_record): what ran, how it ended, when
    "job_exit",
    "job_started",
    "job_ended",
    "set_by_run",  # the variables run set for the job, by purpose: not the job's own settings
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


GPU_KEYS = (("index", "gpu_index"), ("pci", "pci"), ("uuid", "gpu_uuid"), ("serial", "gpu_serial"),
            ("name", "gpu_name"),
            ("sm", "sm"))
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


ARCH_KNOWLEDGE = ("gpu_model", "sm", "family", "min_cuda", "min_torch", "cuda_removed", "last_torch_wheels",
                  "shipped_range", "ptx_targets")
"""Fields `with_arch_knowledge` adds to an event that reports an architecture problem."""


def with_arch_knowledge(events: Sequence[Event]) -> list[Event]:
    """Events that report an architecture problem (a GPU without kernels in the build), with what the
    architecture table says about their GPU: family, the CUDA / PyTorch releases that have its kernels,
    the range of sm the build ships (knowledge.describe_arch).

    The GPU is the event's own (gpu_name / sm); an event that names none (ggml's bare "no kernel image")
    takes the GPU model the other inputs name, when they name exactly one.
    """
    sole = _sole_gpu(events)
    enriched: list[Event] = []
    for event in events:
        if _reports_arch_problem(event):
            own = event.fields.get("gpu_name") or event.fields.get("sm")
            name, sm = (event.fields.get("gpu_name"), event.fields.get("sm")) if own else sole
            known = describe_arch(name, sm, event.fields.get("supported_archs"))
            added = {key: value for key, value in known.items() if key not in event.fields}
            if added:
                event = dataclasses.replace(event, fields={**event.fields, **added})
        enriched.append(event)
    return enriched


def _reports_arch_problem(event: Event) -> bool:
    if event.kind == "arch-unsupported":
        return True
    record = cuda_error(event.fields["error"]) if event.fields.get("error") else None
    return record is not None and record.cause == "arch-mismatch"


def _sole_gpu(events: Iterable[Event]) -> tuple[str | None, str | None]:
    """(gpu_name, sm) when every GPU the inputs name is of one model, else (None, None)."""
    named = {(str(e.fields["gpu_name"]), e.fields.get("sm")) for e in events if e.fields.get("gpu_name")}
    models = {_model(name) for name, _ in named}
    if len(models) != 1:
        return None, None
    name = next(iter(named))[0]
    return name, next((sm for _, sm in named if sm), None)


BUILD_FAILURE_KINDS = ("library-error",)
"""Failures a build older than the GPU explains: a CUDA library's internal or execution error on an architecture
its toolkit predates (cuFFT gave CUFFT_INTERNAL_ERROR on an RTX 4090 under CUDA 11.7, pytorch/pytorch#88038)."""
_WHEEL_CUDA = later.compile(r"\+cu(?P<major>\d{2,3}?)(?P<minor>\d)(?!\d)")
"""A wheel's local version tag (`2.0.1+cu117`): the CUDA it was built with."""


def with_build_support(events: Sequence[Event]) -> list[Event]:
    """The library failures, with why the build cannot know the GPU when the CUDA it was built with (`build_cuda`,
    a torch version's `+cuNNN`) predates that GPU's architecture (data/arch.tsv's min_cuda): its libraries carry
    neither code nor tuning for it. Judged only when the inputs name one GPU model and one build CUDA."""
    if not any(e.kind in BUILD_FAILURE_KINDS for e in events):
        return list(events)
    builds = {str(e.fields["build_cuda"]) for e in events if e.fields.get("build_cuda")}
    builds |= {f"{m['major']}.{m['minor']}" for e in events if "+cu" in str(e.fields.get("torch_version") or "")
               and (m := _WHEEL_CUDA.search(str(e.fields["torch_version"])))}
    if len(builds) != 1:
        return list(events)
    from .binaries.fatbin import version_numbers  # the version reader of the driver tables: only past the checks

    name, sm = _sole_gpu(events)
    known = describe_arch(name, sm)
    build = next(iter(builds))
    newer = version_numbers(known.get("min_cuda"))
    if not newer or (version_numbers(build) or newer) >= newer:
        return list(events)
    added = {**known, "build_cuda": build,
             "build_predates": f"CUDA {build} predates {known.get('gpu_model') or known['sm']} ({known['sm']}), "
                               f"which CUDA {known['min_cuda']} first supports"}
    return [dataclasses.replace(e, fields={**e.fields, **{k: v for k, v in added.items() if k not in e.fields}})
            if e.kind in BUILD_FAILURE_KINDS else e for e in events]


def with_driver_support(events: Sequence[Event]) -> list[Event]:
    """The events that name the driver, with why it runs nothing on the GPU the inputs name when its branch is
    older than that GPU's architecture (data/arch-drivers.tsv): such a driver does not know the GPU at all, so
    no build, however complete, runs there. Judged only when the inputs name one GPU model and one driver."""
    drivers = {str(e.fields["driver_version"]) for e in events if e.fields.get("driver_version")}
    if len(drivers) != 1:
        return list(events)
    name, sm = _sole_gpu(events)
    number = sm_number(sm) if sm is not None else getattr(gpu_arch(name), "number", None)
    if number is None:
        return list(events)
    from .binaries.fatbin import driver_predates, first_branches  # the driver tables: only when one GPU and driver

    if (why := driver_predates(number, next(iter(drivers)))) is None:
        return list(events)
    known = {"driver_predates": why, "first_branch": first_branches()[number], "gpu_name": name,
             **describe_arch(name, f"sm_{number}")}
    return [dataclasses.replace(e, fields={**e.fields, **{k: v for k, v in known.items() if k not in e.fields}})
            if e.fields.get("driver_version") else e for e in events]
