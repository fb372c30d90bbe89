"""`python -m torch.utils.collect_env` output pasted into a report, read as facts about the machine.

collect_env (torch/utils/collect_env.py; vLLM's collect_env.py prints the same keys, newer versions padded as
`key     : value` under `=====` headings) prints one `key: value` line per fact. The keys below become the
event fields postmortem-bundle's torch.txt fills (sources.collect_bundle), so facts read the same whichever
said them; its `[pip3] name==version` library list is read by collect_bundle's package lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import regex

from .. import later
from ..model import Event
from ..text import Line, TextDoc

NAME = "torch-collect-env"

FIELDS = {"PyTorch version": "torch_version", "CUDA used to build PyTorch": "cuda_version",
          "ROCM used to build PyTorch": "rocm_version", "Is CUDA available": "cuda_available",
          "CUDA runtime version": "cuda_runtime_version", "Nvidia driver version": "driver_version",
          "cuDNN version": "cudnn_version", "Python version": "python_version"}
"""collect_env's keys (SystemEnv's env_info_fmt) and the event fields they fill; the first word of each value."""
GPU_KEY = "GPU models and configuration"
ANCHORS = tuple(key.encode() for key in (*FIELDS, GPU_KEY))

MIN_KEYS = 2
"""Distinct keys a paste must show: collect_env prints them all, a log line saying "Python version: 3.10" one."""
GPU_LINES = 64
"""Most `GPU n: NAME` lines read after an empty `GPU models and configuration:` (a node holds 8 or 16)."""
ABSENT = ("N/A", "None", "Could", "No", "")
"""First words of what collect_env prints for a value it has not: "N/A", "Could not collect", "No CUDA"."""

_LINE = later.compile(r"^(?P<key>" + "|".join(regex.escape(key) for key in (*FIELDS, GPU_KEY)) +
                      r") *: ?(?P<value>.*)$")
_GPU = later.compile(r"^GPU (?P<index>\d+): (?P<name>.+?)(?: \(UUID: [^)]*\))?$")


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One software-stack event for the paste's keys (the first of each), one cuda-device event per GPU listed."""
    found: dict[str, tuple[Line, str]] = {}
    for line in lines:
        if (match := _LINE.match(line.text.rstrip())) is not None:
            found.setdefault(match["key"], (line, match["value"].strip()))
    if len(found) < MIN_KEYS:
        return
    fields: dict[str, Any] = {}
    for key, name in FIELDS.items():
        word = found[key][1].split(" ", 1)[0] if key in found else ""
        if word not in ABSENT and not word.endswith(":"):
            fields[name] = word
    if "torch_version" in fields:
        fields["framework"] = "pytorch"
    if "cuda_version" in fields:  # the CUDA PyTorch was built with, which facts.with_build_support weighs
        fields["build_cuda"] = fields["cuda_version"]
    read = sorted((line for line, _ in found.values()), key=lambda l: l.number)
    yield doc.event("software-stack", read[0], fields, last=read[-1], text="\n".join(l.original for l in read))
    if GPU_KEY in found:
        yield from _gpus(doc, *found[GPU_KEY])


def _gpus(doc: TextDoc, line: Line, value: str) -> Iterator[Event]:
    """The GPUs collect_env lists (nvidia-smi -L without UUIDs): on its key's line when one, else one a line
    below it. Named by model alone, as torch.txt's devices are: a "GPU 0" ordinal would keep the GPU apart from
    the same model named without one (torch's arch warning) in facts.collect_gpus."""
    listed = [line] if value else doc.following(line, GPU_LINES)
    for at in listed:
        match = _GPU.match(value if at is line else at.text.strip())
        if match is None:
            break
        name, index = match["name"].strip(), int(match["index"])
        yield doc.event("cuda-device", at, {"gpu_name": name},
                        text=f"collect_env lists GPU {index}: {name}")
