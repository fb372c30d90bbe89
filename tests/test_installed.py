"""Pasted `pip list`, `conda list`, `nvcc --version` and `nvidia-smi` output read into facts (sources/installed.py,
sources/gpu_tools.py), on real pastes of several tool versions (tests/data/pastes: each file's source and what
its own text says are in SOURCES.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from postmortem.pipeline import analyze

PASTES = Path(__file__).parent / "data" / "pastes"
ENTRIES = yaml.safe_load((PASTES / "SOURCES.yaml").read_text())


def test_every_kind_is_there_in_several_versions():
    kinds = [entry["file"].split("-")[0] for entry in ENTRIES]
    assert {kind: kinds.count(kind) for kind in set(kinds)} == {"nvcc": 7, "nvidia": 8, "conda": 5, "pip": 7}
    releases = {entry["expect"]["cuda"] for entry in ENTRIES if entry["file"].startswith("nvcc")}
    assert {release.split(".")[0] for release in releases} >= {"7", "9", "10", "11", "12", "13"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["file"] for entry in ENTRIES])
def test_a_paste_gives_the_facts_its_text_says(entry):
    report = analyze([str(PASTES / entry["file"])])
    facts, expect = report.facts, entry.get("expect") or {}
    for key, fact in (("torch", "torch_version"), ("cuda", "cuda_version"), ("driver", "driver_version")):
        if key in expect:
            assert str(expect[key]) in facts.get(fact, []), (fact, facts.get(fact))
    for gpu in expect.get("gpus", ()):
        assert any(gpu in name or name in gpu for name in facts.get("gpu_name", [])), (gpu, facts.get("gpu_name"))
    if "packages" in expect:
        listed = next(e for e in report.events if e.kind == "python-packages")
        assert len(listed.fields["packages"]) == expect["packages"]
        assert listed.where.line == 1 + next(i for i, line in enumerate(
            (PASTES / entry["file"]).read_text().splitlines()) if line.startswith(("Package", "# packages", "# Name")))


def test_a_conda_pytorch_build_string_names_the_cuda_it_was_built_for():
    """No cudatoolkit row: the pytorch build string (as conda printed it in pytorch#32369's environment) says
    the CUDA torch was built for."""
    from postmortem.pipeline import analyze_text

    lines = (PASTES / "conda-list-pytorch-32369.txt").read_text().splitlines()[:3]
    row = "pytorch                   1.4.0           py3.7_cuda10.1.243_cudnn7.6.3_0    pytorch"
    report = analyze_text("\n".join([*lines, row]) + "\n")
    assert report.facts["torch_version"] == ["1.4.0"]
    assert report.facts["cuda_version"] == ["10.1.243"]


def test_a_package_table_in_a_log_is_not_a_list_without_its_header():
    from postmortem.pipeline import analyze_text

    report = analyze_text("torch                      2.7.1+cu128\nnumpy                      2.1.2\n")
    assert not [e for e in report.events if e.kind == "python-packages"]
