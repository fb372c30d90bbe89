"""tools/capture_gpu.sh, the one script of issue 18's GPU capture, run here where no GPU is.

A device run is short and rare, so the script must not lose its other steps to one that fails: these tests run it
whole on this machine, where nvidia-smi, compute-sanitizer and cuda-gdb are missing (and nvcc may be), and check that
every step ran and was recorded, that the pack was written, and that the CUDA sources build where nvcc exists.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "tools" / "capture_gpu.sh"

# The steps every capture records, whatever the machine (one of each family; the loops add more).
FAMILIES = ("probe-", "build-", "plain-", "sanitizer-memcheck-", "sanitizer-racecheck-", "sanitizer-initcheck-",
            "sanitizer-synccheck-", "cuda-gdb-", "coredump", "arch-libarch_", "arch-libk_", "nvsmi-", "dmesg-nvrm",
            "torch-")


def _capture(out: Path, budget: int) -> list[list[str]]:
    result = subprocess.run(["bash", str(SCRIPT), str(out), str(budget)],
                            check=False, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert not (out / "work").exists(), "the work folder is packed and removed"
    with tarfile.open(out / "gpu-real.tar.xz") as pack:
        names = pack.getnames()
        steps = pack.extractfile("work/steps.tsv")
        assert steps is not None
        rows = [line.split("\t") for line in steps.read().decode().splitlines()[1:]]
    assert not any(name.startswith("work/bin") for name in names), "binaries stay out of the pack"
    assert all(len(row) == 4 for row in rows), "one line a step"
    for name, status, *_ in rows:
        if status != "skipped":
            assert f"work/{name}.out" in names and f"work/{name}.err" in names, name
    return rows


def test_every_step_runs_and_is_recorded_without_a_gpu(tmp_path: Path) -> None:
    rows = _capture(tmp_path, 600)
    names = [row[0] for row in rows]
    for family in FAMILIES:
        assert any(name.startswith(family) for name in names), family
    assert len(names) == len(set(names)), "step names are unique"
    assert all(row[1].isdigit() for row in rows), "nothing skipped inside the budget"
    assert all(row[1] != "0" for row in rows if row[0].startswith("plain-")), "no GPU: each program reports an error"
    if shutil.which("nvcc"):
        builds = {row[0]: row[1] for row in rows if row[0].startswith("build-")}
        assert builds and set(builds.values()) == {"0"}, builds


def test_steps_past_the_budget_are_skipped_and_the_pack_still_written(tmp_path: Path) -> None:
    rows = _capture(tmp_path, -1)
    assert rows and {row[1] for row in rows} == {"skipped"}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_arch_probe_reads_both_kinds_of_library(tmp_path: Path) -> None:
    """arch_probe runs arch_k.cu's run_scale() and k.cu's launch(); without a driver both report the runtime's error."""
    here = SCRIPT.parent / "gpu"
    probe, lib = tmp_path / "arch_probe", tmp_path / "libarch.so"
    subprocess.run(["nvcc", "-o", str(probe), str(here / "arch_probe.cu")], check=True, timeout=300)
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o", str(lib),
                    str(here / "arch_k.cu")], check=True, timeout=300)
    fixture = Path(__file__).parent / "data" / "fatbin" / "libk_multi.so"
    result = subprocess.run([str(probe), str(lib), str(fixture), "/nonexistent.so"], check=False,
                            capture_output=True, text=True,
                            timeout=60)
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    assert [line[0] for line in lines] == [str(lib), str(fixture), "/nonexistent.so"]
    assert lines[2][1] == "dlopen"
    assert all(line[1].startswith("cudaError") for line in lines[:2]), lines
    assert result.returncode == 1
