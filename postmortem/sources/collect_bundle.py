"""The bookkeeping files of a `postmortem collect` bundle, read as facts about the machine.

collect writes, beside the logs it gathers (postmortem/capture/collect.py):
`manifest.json` (what was collected and what could not be), `software/stack.txt`
(OS, kernel), `software/packages.txt` (`name==version` lines, pip's list),
`software/torch.txt` (`key: value` lines of what torch says about its CUDA
build) and `software/environment.txt` (`NAME=value` lines, values outside the
allow-list replaced by `<redacted:env>`). Each is recognised by its content, as
every input is, so the same text pasted or found elsewhere reads the same way.

What they say becomes event fields the rest of the pipeline already uses:
torch's CUDA arch list is a `library-arch` event whose images are judged for
the GPU the inputs name (binaries.library_arch), so a build without the GPU's
sm is an arch-mismatch with no error text at all; versions become facts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .. import later
from ..capture.redact import env_value_allowed
from ..model import Event
from ..text import Line, TextDoc

NAME = "postmortem-bundle"

MANIFEST_MARK = '"format": "postmortem-bundle/'
STACK_MARK = "postmortem python: "
TORCH_MARK = "torch.version.cuda: "
HIDDEN_MARK = "=<redacted:env>"
PACKAGE_MARKS = tuple(f"=={digit}".encode() for digit in range(10))
"""`==` then a version's first digit: a package line, not a `=====` rule or Python's `a == b`."""
ANCHORS = (MANIFEST_MARK.encode(), STACK_MARK.encode(), TORCH_MARK.encode(), HIDDEN_MARK.encode(), *PACKAGE_MARKS)

MAX_MANIFEST = 4 << 20
"""Most bytes of a manifest read (collect's are a few KiB)."""
STACK_LINES = 4
"""Lines of stack.txt above its anchor: os, kernel, machine, python (probed)."""
TORCH_LINES = 8
"""Lines of torch.txt read after its anchor, `torch.version.cuda:` (the probe's keys: cudnn, arch_list, ...)."""
ENV_LINES = 2000
"""Most lines of an environment listing read around its redacted lines."""

TORCH_FIELDS = {"torch": "torch_version", "torch.version.cuda": "cuda_version", "cudnn": "cudnn_version",
                "nccl": "nccl_version", "cuda_available": "cuda_available"}
"""torch.txt keys (collect.TORCH_PROBE) and the event fields they fill; arch_list and devices are read apart."""
FRAMEWORK_PACKAGES = {"torch": "pytorch", "pytorch": "pytorch", "tensorflow": "tensorflow", "jax": "jax"}
"""Packages whose presence names the framework (the `framework` fact, as framework logs name it); conda calls
torch `pytorch`."""
TORCH_PACKAGES = ("torch", "pytorch")

_FORMAT = later.compile(r'"format": "(postmortem-bundle/[^"]*)')
_KEY_VALUE = later.compile(r"^(?P<key>[\w.() -]+?): ?(?P<value>.*)$")
_PACKAGE = later.compile(r"^(?:\[(?:pip3?|conda)\] +)?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\d[\w.+!-]*)$")
"""A pip list line; torch.utils.collect_env prefixes it with the tool that listed it (`[pip3] torch==2.5.1`)."""
_VARIABLE = later.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")
_DEVICE_SM = later.compile(r" (sm_\d+[af]?)(?: |$)")
"""What ends each device of torch.txt's `devices:` line ("NAME sm_XY", joined by spaces)."""
_ABSENT = ("", "None", "[]")


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One event per manifest, stack and torch file; one for all package lines; one per environment listing."""
    packages = [line for line in lines if _PACKAGE.match(line.text)]
    hidden = [line for line in lines if HIDDEN_MARK in line.text and _VARIABLE.match(line.text)]
    for line in lines:
        if (found := _FORMAT.search(line.text)) is not None:
            yield _manifest(doc, line, found[1])
        elif line.text.startswith(STACK_MARK):
            yield _stack(doc, line)
        elif line.text.startswith(TORCH_MARK):
            yield from _torch(doc, line)
    if packages:
        yield _packages(doc, packages)
    if hidden:
        yield _environment(doc, hidden)


def _manifest(doc: TextDoc, line: Line, bundle_format: str) -> Event:
    """What collect gathered: its version, the GPU state in words, and every piece it could not collect, with why."""
    fields: dict[str, Any] = {"bundle_format": bundle_format}
    try:
        manifest = json.loads(doc.reader.read_at(0, MAX_MANIFEST).decode("utf-8", "replace"))
    except ValueError:
        manifest = None
    if isinstance(manifest, dict):
        fields.update({"created": manifest.get("created"), "gpu_state": manifest.get("gpu"),
                       "collected_by": (manifest.get("tool") or {}).get("version"),
                       "collected": [entry.get("path") for entry in manifest.get("files") or () if
                                     isinstance(entry, dict)],
                       "not_collected": [f"{entry.get('path')}: {entry.get('why')}"
                                         for entry in manifest.get("not_collected") or () if isinstance(entry, dict)]})
    fields = {key: value for key, value in fields.items() if value not in (None, "", [])}
    text = f"postmortem collect bundle ({fields['bundle_format']}" + \
        (f", created {fields['created']})" if "created" in fields else ")")
    return doc.event("bundle-manifest", line, fields, text=text)


def _stack(doc: TextDoc, line: Line) -> Event:
    """OS, kernel and machine of the collecting host (the lines above collect's `postmortem python:` line)."""
    block = [*doc.preceding(line, STACK_LINES), line]
    values = _key_values(block)
    fields = {"os": values.get("os"), "kernel_version": (values.get("kernel") or "").split(" ", 1)[0],
              "machine": values.get("machine")}
    return doc.event("software-stack", block[0], {k: v for k, v in fields.items() if v}, last=line)


def _torch(doc: TextDoc, line: Line) -> Iterator[Event]:
    """torch's own account of its build: versions, and its CUDA arch list as a library's device code (judged
    for the GPU later, like a library's fatbins); each CUDA device it saw as a GPU with its sm."""
    block = [*doc.preceding(line, 1), line, *doc.following(line, TORCH_LINES)]
    values = _key_values(block)
    fields: dict[str, Any] = {name: values[key] for key, name in TORCH_FIELDS.items()
                              if values.get(key, "") not in _ABSENT and not values[key].startswith("error:")}
    fields["framework"] = "pytorch"
    if "cuda_version" in fields:  # torch.version.cuda: the CUDA this torch was built with
        fields["build_cuda"] = fields["cuda_version"]
    archs = values.get("arch_list", "").split()
    if archs and not values["arch_list"].startswith("error:"):
        version = fields.get("torch_version")
        fields.update({"library": f"torch {version}" if version else "torch", "supported_archs": archs,
                       "fatbin_images": [" ".join(archs)]})
    first = next((l for l in block if l.text.startswith("torch: ")), line)
    last = max(block, key=lambda l: l.number)
    yield doc.event("library-arch" if archs else "software-stack", first, fields, last=last)
    devices = next((l for l in block if l.text.startswith("devices: ")), None)
    if devices is not None:
        pieces = _DEVICE_SM.split(values["devices"])
        for name, sm in zip(pieces[::2], pieces[1::2], strict=False):
            yield doc.event("cuda-device", devices, {"gpu_name": name, "sm": sm}, text=f"torch sees {name} ({sm})")


def _packages(doc: TextDoc, lines: list[Line]) -> Event:
    """A package list (`name==version` lines, as pip writes them): every package, and the framework's version."""
    found = {m["name"]: m["version"] for m in (_PACKAGE.match(line.text) for line in lines) if m}
    text = f"{len(found)} packages: " + ", ".join(f"{name}=={version}" for name, version in found.items())
    return doc.event("python-packages", lines[0], package_fields(found), last=lines[-1], text=text)


def package_fields(packages: dict[str, str]) -> dict[str, Any]:
    """A package list's event fields: every package, the framework it names and torch's version (pip freeze
    here, pip list and conda list in sources.installed)."""
    versions = normalised_names(packages)
    fields: dict[str, Any] = {"packages": packages}
    framework = next((name for name in FRAMEWORK_PACKAGES if name in versions), None)
    if framework is not None:
        fields["framework"] = FRAMEWORK_PACKAGES[framework]
    torch = next((versions[name] for name in TORCH_PACKAGES if name in versions), None)
    if torch is not None:
        fields["torch_version"] = torch
    return fields


def normalised_names(packages: dict[str, str]) -> dict[str, str]:
    """name -> version with names as pip compares them (lower case, `_` as `-`)."""
    return {name.lower().replace("_", "-"): version for name, version in packages.items()}


def _environment(doc: TextDoc, hidden: list[Line]) -> Event:
    """An environment listing (`NAME=value` lines, some values redacted): the values shown, read from the whole
    run of such lines around the redacted ones."""
    before = doc.preceding(hidden[0], ENV_LINES)
    run = _contiguous([*before, hidden[0], *doc.following(hidden[0], ENV_LINES)], len(before))
    shown = {m["name"]: m["value"] for m in (_VARIABLE.match(line.text) for line in run)
             if m and m["value"] != "<redacted:env>" and env_value_allowed(m["name"])}
    fields = {"environment": shown, "variables": len(run)}
    text = f"environment of {len(run)} variables" + (": " + ", ".join(f"{k}={v}" for k, v in shown.items())
                                                     if shown else "")
    return doc.event("environment-variables", run[0], fields, last=run[-1], text=text)


def _contiguous(block: list[Line], start: int) -> list[Line]:
    """The `NAME=value` lines next to block[start], both ways, up to the first line of another shape."""
    low = start
    while low > 0 and _VARIABLE.match(block[low - 1].text):
        low -= 1
    high = start
    while high + 1 < len(block) and _VARIABLE.match(block[high + 1].text):
        high += 1
    return block[low:high + 1]


def _key_values(block: list[Line]) -> dict[str, str]:
    return {m["key"]: m["value"].strip() for m in (_KEY_VALUE.match(line.text) for line in block) if m}
