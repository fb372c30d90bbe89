"""`python -m torch.utils.collect_env` pasted into a report (real pastes, tests/data/torch_env/README.md): its
keys are read as the facts a collect bundle's torch.txt gives, its GPU list as GPUs, its library list as packages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from postmortem.cli import main
from postmortem.sources import torch_env
from tests.helpers import parse_alone

DATA = Path(__file__).parent / "data" / "torch_env"
H100 = "NVIDIA H100 80GB HBM3"


def analyze_json(path: Path) -> dict:
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0
    return json.loads(result.output)


@pytest.mark.parametrize(("name", "torch", "cuda", "driver", "python", "gpus"), [
    ("pytorch-150733-rtx5090d-2.6.0.txt", "2.6.0+cu126", "12.6", "570.124.04", "3.12.9",
     ["NVIDIA GeForce RTX 5090 D"]),
    ("pytorch-46973-t4-1.7.0.txt", "1.7.0+cu101", "10.1", "418.67", "3.6", ["Tesla T4"]),
    ("vllm-11959-8xh100-2.5.1.txt", "2.5.1+cu124", "12.4", "550.127.05", "3.10.12", [H100]),
    ("vllm-35404-padded-h100.txt", None, None, "580.105.08", "3.12.3", [H100]),
])
def test_each_paste_gives_its_versions_and_gpus(name: str, torch: str | None, cuda: str | None, driver: str,
                                                python: str, gpus: list[str]) -> None:
    report = analyze_json(DATA / name)
    facts = report["facts"]
    assert facts.get("torch_version") == ([torch] if torch else None)
    assert facts.get("cuda_version") == ([cuda] if cuda else None)
    assert facts["driver_version"] == [driver] and facts["python_version"] == [python]
    assert [gpu["name"] for gpu in facts["gpus"]] == gpus
    assert torch_env.NAME in report["inputs"][0]["format"].split("+")


def test_a_rocm_build_names_no_cuda_and_its_library_list_is_read() -> None:
    report = analyze_json(DATA / "pytorch-44106-rocm-1.7.0a0.txt")
    facts = report["facts"]
    packages = next(e for e in report["events"] if e["kind"] == "python-packages")["fields"]["packages"]
    assert packages == {"numpy": "1.18.5", "torch": "1.7.0a0+a9603c7", "torchvision": "0.8.0a0+a4736ea"}
    assert sorted(facts["torch_version"]) == ["1.7.0a0+9ddd3df", "1.7.0a0+a9603c7"]  # collect_env's and pip's
    assert "cuda_version" not in facts and "driver_version" not in facts and "gpus" not in facts
    events = parse_alone(torch_env, (DATA / "pytorch-44106-rocm-1.7.0a0.txt").read_bytes())
    assert [e.kind for e in events] == ["software-stack"]
    assert events[0].fields["rocm_version"] == "3.7.20315-077bcfa0" and events[0].fields["cuda_available"] == "True"


def test_the_cuda_build_and_runtime_are_kept_apart_and_unknown_values_dropped() -> None:
    events = parse_alone(torch_env, (DATA / "pytorch-46973-t4-1.7.0.txt").read_bytes())
    stack = events[0].fields
    assert stack["cuda_version"] == "10.1" and stack["cuda_runtime_version"] == "10.1.243"
    assert "rocm_version" not in stack and "cudnn_version" not in stack
    assert [(e.kind, e.fields) for e in events[1:]] == [("cuda-device", {"gpu_name": "Tesla T4"})]


def test_one_key_alone_is_not_a_paste() -> None:
    assert parse_alone(torch_env, b"INFO starting\nPython version: 3.10.12\nPyTorch version: 2.5.1\n")
    assert parse_alone(torch_env, b"INFO starting\nPython version: 3.10.12\nthen a traceback\n") == []


def test_the_gpu_list_stops_at_its_end() -> None:
    raw = (DATA / "vllm-11959-8xh100-2.5.1.txt").read_bytes()
    devices = [e for e in parse_alone(torch_env, raw) if e.kind == "cuda-device"]
    assert [e.text for e in devices] == [f"collect_env lists GPU {i}: {H100}" for i in range(8)]
    assert devices[-1].where.line == raw.decode().splitlines().index("GPU 7: NVIDIA H100 80GB HBM3") + 1
