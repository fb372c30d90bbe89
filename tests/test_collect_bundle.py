"""`analyze` of a `postmortem collect` bundle: its manifest, stack, package list, torch facts and environment are
read as facts, not flagged as inputs with no known error pattern, and torch's arch list is judged for the GPU.

The bundles are made here by the real `postmortem collect`, around real logs of tests/corpus, on this machine
with `nvidia-smi` and the kernel log answering nothing (so this machine's own GPU and kernel lines stay out)
and a `torch` on the job's PYTHONPATH that reports what the real wheels report: torch 2.5.1+cu124 lists
sm_50..sm_90, the cu128 builds add sm_100 and sm_120 (data/arch.tsv, sources of rows 5.0 and 12.0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from postmortem.capture.redact import environment_listing
from postmortem.sources import collect_bundle
from tests.helpers import parse_alone

CORPUS = Path(__file__).parent / "corpus"
CONSOLE = str(Path(sys.executable).parent / "postmortem")
CU124 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
CU128 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
BOOKKEEPING = ("manifest.json", "software/stack.txt", "software/packages.txt", "software/torch.txt",
               "software/environment.txt")

TORCH = """
__version__ = {version!r}
class version: cuda = {cuda!r}
class backends:
    class cudnn:
        version = staticmethod(lambda: 90100)
class cuda:
    get_arch_list = staticmethod(lambda: {archs!r})
    is_available = staticmethod(lambda: True)
    device_count = staticmethod(lambda: 1)
    get_device_name = staticmethod(lambda i: {gpu!r})
    get_device_capability = staticmethod(lambda i: {capability!r})
    class nccl:
        version = staticmethod(lambda: (2, 21, 5))
"""


def collect_bundle_of(tmp_path: Path, log: Path, gpu: str, capability: tuple[int, int], archs: list[str],
                      version: str = "2.5.1+cu124", cuda: str = "12.4") -> Path:
    """`postmortem collect LOG` with a torch reporting `gpu` and `archs`; nvidia-smi, journalctl and dmesg print
    nothing, so the bundle holds only the log and collect's own files."""
    site, tools = tmp_path / "job-site", tmp_path / "bin"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(TORCH.format(version=version, cuda=cuda, archs=archs, gpu=gpu,
                                                             capability=capability))
    tools.mkdir()
    for name in ("nvidia-smi", "journalctl", "dmesg"):
        (tools / name).write_text("#!/bin/sh\nexit 0\n" if name != "nvidia-smi" else "#!/bin/sh\nexit 9\n")
        (tools / name).chmod(0o755)
    # the job's python3 is the base interpreter, without the packages of the test's environment (a real torch there
    # would answer the isolated probe): its torch is the one on the job's PYTHONPATH
    (tools / "python3").write_text(f"#!/bin/sh\nexec {sys._base_executable} \"$@\"\n")
    (tools / "python3").chmod(0o755)
    (tmp_path / log.name).write_bytes(log.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(site), "CUDA_VISIBLE_DEVICES": "0",
           "PATH": os.pathsep.join([str(tools), str(Path(sys.executable).parent), os.environ["PATH"]])}
    done = subprocess.run([CONSOLE, "collect", "-o", "b.tar.gz", "--since", "1d", "--telemetry", "0", log.name],
                          cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return tmp_path / "b.tar.gz"


def analyze_json(bundle: Path) -> dict:
    done = subprocess.run([CONSOLE, "analyze", bundle.name, "--format", "json"], cwd=bundle.parent,
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}  # type: ignore[union-attr]


@pytest.mark.parametrize("log, gpu, capability, archs, sm", [
    (CORPUS / "dist-neg-mmpose-eval-keyerror-01" / "train.log", "NVIDIA GeForce RTX 5090", (12, 0), CU124, "sm_120"),
    (CORPUS / "drv-neg-empty-dataset-nccl-warning-01" / "train.log", "Tesla K80", (3, 7), CU124, "sm_37"),
])
def test_torch_built_without_the_gpus_sm_is_an_arch_mismatch_with_no_error_text(
        tmp_path: Path, log: Path, gpu: str, capability: tuple[int, int], archs: list[str], sm: str) -> None:
    bundle = collect_bundle_of(tmp_path, log, gpu, capability, archs)
    assert f"arch_list: {' '.join(archs)}\n" in members(bundle)["software/torch.txt"].decode()
    report = analyze_json(bundle)
    assert "sm_120" not in log.read_text() and "no kernel image" not in log.read_text()
    found = next(f for f in report["findings"] if f["cause"] == "arch-mismatch")
    events = {e["id"]: e for e in report["events"]}
    evidence = [events[i] for i in found["evidence"]]
    assert [e["source"]["path"] for e in evidence] == ["b.tar.gz!/software/torch.txt"]
    assert evidence[0]["fields"]["verdict"] == "missing" and evidence[0]["fields"]["sm"] == sm
    assert "torch 2.5.1+cu124" in found["explanation"]


@pytest.mark.parametrize("gpu, capability, archs, version, cuda", [
    ("NVIDIA GeForce RTX 5090", (12, 0), CU128, "2.7.0+cu128", "12.8"),  # the build that ships sm_120
    ("NVIDIA GeForce RTX 4090", (8, 9), CU124, "2.5.1+cu124", "12.4"),  # sm_89 runs the sm_86 SASS
])
def test_torch_built_for_the_gpu_is_no_finding(tmp_path: Path, gpu: str, capability: tuple[int, int],
                                               archs: list[str], version: str, cuda: str) -> None:
    bundle = collect_bundle_of(tmp_path, CORPUS / "dist-neg-mmpose-eval-keyerror-01" / "train.log", gpu,
                               capability, archs, version, cuda)
    report = analyze_json(bundle)
    assert report["findings"] == []
    paths = {e["id"]: e["source"]["path"] for e in report["events"]}
    suspects = [paths[s] for s in report["suspects"]]  # the log's own KeyError, never the bundle's files
    assert suspects and all(path.endswith("train.log") for path in suspects), suspects
    torch = next(e for e in report["events"] if e["source"]["path"].endswith("software/torch.txt"))
    assert torch["fields"]["verdict"] == "native"


def test_the_bundles_own_files_are_read_as_facts_not_as_problem_inputs(tmp_path: Path) -> None:
    bundle = collect_bundle_of(tmp_path, CORPUS / "dist-ecc-kohya-2xh100-01" / "train.log",
                               "NVIDIA GeForce RTX 5090", (12, 0), CU124)
    report = analyze_json(bundle)
    inputs = {i["path"].split("!/")[1]: i for i in report["inputs"]}
    for name in BOOKKEEPING:
        assert inputs[name]["format"] == "postmortem-bundle" and inputs[name]["diagnostics"] == [], name
    facts = report["facts"]
    assert facts["torch_version"] == ["2.5.1+cu124"] and facts["cuda_version"] == ["12.4"]
    assert facts["framework"][0] == "pytorch" and facts["supported_archs"] == [CU124]
    assert facts["kernel_version"] == [os.uname().release]
    assert facts["gpus"] == [{"name": "NVIDIA GeForce RTX 5090", "sm": "sm_120"}]
    by_kind = {e["kind"]: e for e in report["events"] if e["source"]["path"].split("!/")[1] in BOOKKEEPING}
    assert by_kind["environment-variables"]["fields"]["environment"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert "gpu/nvidia-smi-q.xml: exit 9" in by_kind["bundle-manifest"]["fields"]["not_collected"]
    assert by_kind["bundle-manifest"]["fields"]["collected"][-1] == "files/train.log"
    assert report["findings"][0]["cause"] == "gpu-memory-ecc"  # the log's own error stays the verdict
    used = {i for f in report["findings"] for i in f["evidence"]} | set(report["suspects"])
    assert not used & {e["id"] for e in by_kind.values() if e["kind"] != "library-arch"}


def test_an_environment_listing_and_a_package_list_read_anywhere() -> None:
    """The same formats outside a bundle: collect's listing of a real environment, and pip's own list."""
    listing, hidden = environment_listing({"NCCL_DEBUG": "INFO", "HF_TOKEN": "hf_" + "x" * 34, "PWD": "/job"})
    [event] = parse_alone(collect_bundle, listing.encode())
    assert hidden == 2 and event.kind == "environment-variables"
    assert event.fields == {"environment": {"NCCL_DEBUG": "INFO"}, "variables": 3}
    pip = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, check=True,
                         timeout=120).stdout
    [packages] = parse_alone(collect_bundle, pip)
    assert packages.kind == "python-packages" and packages.fields["packages"]["pip"]
    assert parse_alone(collect_bundle, b"============================== 3 passed ==============================\n"
                                       b"    if rank == 0:\n") == []


NVRM_VERSION = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  Tue Jun  6 22:20:39 UTC 2023\n" \
               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
"""/proc/driver/nvidia/version as the driver writes it (collect stores it as gpu/driver-version.txt)."""


def written_bundle(tmp_path: Path, log: Path, driver: str) -> Path:
    """A bundle of a machine whose loaded driver is `driver`, written by collect's own writer: the driver's
    version file, torch that cannot use the GPU (cuda_available False, as with a driver that does not know
    it), and a real log of the job."""
    from postmortem.capture.collect import MANIFEST, Piece, _write_tar
    from postmortem.capture.redact import Redactor

    pieces = [Piece.text("gpu/driver-version.txt", "/proc/driver/nvidia/version", NVRM_VERSION.format(driver=driver)),
              Piece.text("software/torch.txt", "python3 -c 'import torch; ...'",
                         "torch: 2.7.0+cu128\ntorch.version.cuda: 12.8\ncudnn: 90701\narch_list: \n"
                         "cuda_available: False\nnccl: 2 26 2\n"),
              Piece.text(f"files/{log.name}", log.name, log.read_text())]
    manifest = {"format": "postmortem-bundle/1", "tool": {"name": "postmortem", "version": "0.1.0"},
                "created": "2025-10-04T12:00:00+00:00", "window": {"since": "2025-10-03T12:00:00+00:00"},
                "gpu": "nvidia-smi failed: No devices were found", "cores": {"core_pattern": "core", "where": "-"},
                "redaction": {"anonymized": False}}
    bundle = tmp_path / "b.tar.gz"
    with open(bundle, "wb") as handle:
        assert _write_tar(handle, pieces, manifest, Redactor({}))["files"]
    assert next(iter(members(bundle))) == MANIFEST
    return bundle


@pytest.mark.parametrize("log, old, sm", [
    (CORPUS / "ext-arch-sm120-forge-journald-01" / "journal.txt", "535.54.03", "sm_120"),
    (CORPUS / "ext-arch-sm120-comfyui-portable-5070ti-01" / "console.txt", "560.35.03", "sm_120"),
])
def test_a_driver_older_than_the_gpus_architecture_is_a_driver_mismatch(tmp_path: Path, log: Path, old: str,
                                                                         sm: str) -> None:
    report = analyze_json(written_bundle(tmp_path, log, old))
    verdict = report["findings"][0]
    assert (verdict["signature"], verdict["cause"]) == ("driver-predates-gpu", "driver-mismatch")
    evidence = next(e for e in report["events"] if e["id"] == verdict["evidence"][0])
    assert evidence["source"]["path"] == "b.tar.gz!/gpu/driver-version.txt" and evidence["fields"]["sm"] == sm
    current = analyze_json(written_bundle(tmp_path, log, "580.65.06"))
    assert "driver-predates-gpu" not in {f["signature"] for f in current["findings"]}
