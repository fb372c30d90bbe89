"""What is installed, as people paste it: `pip list`, `conda list`, and `nvcc --version`.

Pasted lists are often indented (a quote, a list item): rows are read whatever their indentation.

- `pip list`: a `Package  Version` header (newer pips add `Editable project location`), a rule of dashes, then
  one `name  version` row per package. (`pip freeze`'s `name==version` lines are read by collect_bundle.)
- `conda list`: `# packages in environment at PATH:`, a `# Name  Version  Build  Channel` header, then rows
  of those columns; `cudatoolkit` / `pytorch-cuda` name the CUDA version, and a `pytorch` build string says
  which CUDA it was built for (`py3.8_cuda10.1.243_cudnn7.6.3_0`).
- `nvcc --version`: `Cuda compilation tools, release 12.5, V12.5.82`: the toolkit that builds extensions and
  JIT kernels here.

A list becomes one `python-packages` event with every package and the versions facts use (torch, the
framework, CUDA), the shape collect_bundle gives `pip freeze`; nvcc's banner a `software-stack` event.
"""

from __future__ import annotations

from collections.abc import Iterator

import regex

from .. import later
from ..model import Event
from ..text import Line, TextDoc
from .collect_bundle import TORCH_PACKAGES, normalised_names, package_fields

NAME = "installed-software"
PIP_MARK = "Package "
CONDA_MARKS = ("# packages in environment at ", "# Name ")
NVCC_MARK = "Cuda compilation tools, release "
ANCHORS = (PIP_MARK.encode(), *(mark.encode() for mark in CONDA_MARKS), NVCC_MARK.encode())

MAX_ROWS = 5000
"""Most package rows read from one list (an environment of thousands of packages is read in part)."""
CUDA_PACKAGES = ("pytorch-cuda", "cudatoolkit", "cuda-toolkit", "cuda-version")
"""conda packages whose version is the environment's CUDA, most telling first."""

_PIP_HEADER = later.compile(r"^\s*Package\s+Version(?:\s+(?:Editable project location|Location|Installer))*\s*$")
_RULE = later.compile(r"^\s*-{3,}(?:\s+-{3,})+\s*$")
_PIP_ROW = later.compile(r"^\s*(?P<name>[A-Za-z0-9][\w.-]*)\s+(?P<version>\d[\w.+!-]*)(?:\s+\S.*)?$")
_CONDA_HEADER = later.compile(r"^\s*#\s*Name\s+Version\s+Build(?:\s+Channel)?\s*$")
_CONDA_ROW = later.compile(
    r"^\s*(?P<name>[A-Za-z0-9_][\w.-]*)\s+(?P<version>[\w.+!-]+)\s+(?P<build>\S+)(?:\s+\S+){0,2}\s*$")
"""name, version, build, then the channel, and before it an old conda's track feature (`[vc14]`)."""
_COMMENT = later.compile(r"^\s*#")
_BUILD_CUDA = later.compile(r"(?:^|_)cuda(?P<cuda>\d+\.\d+(?:\.\d+)?)(?:_|$)")
_NVCC = later.compile(r"Cuda compilation tools, release (?P<release>\d+\.\d+), V(?P<version>\d+\.\d+\.\d+)")


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """One event per list and per nvcc banner."""
    taken: set[int] = set()
    for line in lines:
        text = line.text.rstrip()
        if line.number in taken:
            continue
        if _PIP_HEADER.match(text):
            rows = _rows(doc, line, _PIP_ROW, skip=_RULE)
        elif text.lstrip().startswith(CONDA_MARKS[0]) or _CONDA_HEADER.match(text):
            rows = _rows(doc, line, _CONDA_ROW, skip=_COMMENT)
        elif (nvcc := _NVCC.search(text)) is not None:
            fields = {"cuda_version": nvcc["release"], "nvcc_version": nvcc["version"], "tool": "nvcc"}
            yield doc.event("software-stack", line, fields)
            continue
        else:
            continue
        if rows:
            taken.update(row.number for row, _ in rows)
            yield _packages(doc, line, rows)


def _rows(doc: TextDoc, header: Line, row: regex.Pattern, skip: regex.Pattern) -> list[tuple[Line, regex.Match]]:
    """The table's rows under its header: lines of `skip`'s shape are passed over, the first other line that is
    not a row ends it."""
    found: list[tuple[Line, regex.Match]] = []
    for line in doc.following(header, MAX_ROWS):
        text = line.text.rstrip()
        if skip.match(text):
            continue
        match = row.match(text)
        if match is None:
            break
        found.append((line, match))
    return found


def _packages(doc: TextDoc, header: Line, rows: list[tuple[Line, regex.Match]]) -> Event:
    packages = {match["name"]: match["version"] for _, match in rows}
    versions = normalised_names(packages)
    fields = package_fields(packages)
    cuda = next((versions[name] for name in CUDA_PACKAGES if name in versions), None)
    builds = [match["build"] for _, match in rows if match.groupdict().get("build") and
              match["name"].lower() in TORCH_PACKAGES]
    built = next((found["cuda"] for build in builds if (found := _BUILD_CUDA.search(build))), None)
    if cuda or built:
        fields["cuda_version"] = fields["build_cuda"] = built or cuda
    text = f"{len(packages)} packages: " + ", ".join(f"{name} {version}" for name, version in packages.items())
    return doc.event("python-packages", header, fields, last=rows[-1][0], text=text)
