"""GPU architecture knowledge: names as logs print them, and the arch-mismatch finding built from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import GIVEN
from postmortem import knowledge
from postmortem.pipeline import analyze, analyze_text
from postmortem.render.i18n import Translator

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("name", "sm", "family"),
    [
        ("NVIDIA GeForce RTX 5090", "sm_120", "Blackwell (consumer/workstation)"),
        ("Tesla K80", "sm_37", "Kepler"),
        ("NVIDIA A100-SXM4-80GB", "sm_80", "Ampere (datacenter)"),
        ("NVIDIA H100 80GB HBM3", "sm_90", "Hopper"),
        ("RTX 4090", "sm_89", "Ada Lovelace"),
        ("NVIDIA A10", "sm_86", "Ampere (consumer/workstation)"),  # not A100
        ("NVIDIA RTX 6000 Ada Generation", "sm_89", "Ada Lovelace"),  # not Quadro RTX 6000 (Turing)
        ("Quadro RTX 6000", "sm_75", "Turing"),
        ("NVIDIA GeForce GTX 1080 Ti", "sm_61", "Pascal"),
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "sm_86", "Ampere (consumer/workstation)"),  # data/gpu-models.tsv
    ],
)
def test_gpu_names_as_logs_print_them(name, sm, family):
    found = knowledge.gpu_arch(name)
    assert (found.sm, found.family) == (sm, family)


def test_unknown_names_and_capabilities():
    assert knowledge.gpu_arch("Matrox G200eW") is None
    assert knowledge.arch("12.0").sm == knowledge.arch("sm_120a").sm == knowledge.arch("compute_120").sm == "sm_120"
    assert knowledge.arch("sm_99") is None


def test_every_reference_architecture_is_loaded():
    reference = GIVEN / "reference" / "arch.tsv"
    expected = {line.split("\t")[1] for line in reference.read_text().splitlines()[1:] if line.strip()}
    assert {a.sm for a in knowledge.architectures()} == expected


def test_describe_arch_for_a_new_gpu_on_an_old_wheel():
    facts = knowledge.describe_arch("NVIDIA GeForce RTX 5090", "sm_120", ["sm_90", "sm_50", "sm_86", "compute_90"])
    assert facts == {"gpu_model": "RTX 5090", "sm": "sm_120", "family": "Blackwell", "min_cuda": "12.8",
                     "min_torch": "2.7", "shipped_range": "sm_50 ... sm_90", "ptx_targets": "compute_90"}


@pytest.mark.parametrize("log", ["sm120-torch-02.log", "sm120-lora-trainer-05.log"])
def test_sm120_finding_is_built_from_the_log(log):
    report = analyze([str(DATA / "framework_log" / log)])
    verdict = report.verdict
    assert verdict.signature == "arch-mismatch"
    assert verdict.explanation.startswith(
        "RTX 5090 is sm_120 (Blackwell); this build ships sm_50 ... sm_90 and no kernel for sm_120; "
        "install a build for CUDA 12.8 or newer (PyTorch 2.7+). "
    )
    zh = Translator("zh-CN").words(verdict, report).explanation
    assert zh.startswith("RTX 5090 是 sm_120（Blackwell）；此构建只包含 sm_50 ... sm_90，没有 sm_120 的内核；")


def test_bare_no_kernel_error_says_nothing_it_does_not_know():
    report = analyze([str(DATA / "framework_log" / "nokernel-koboldcpp-k80-02.log")])
    assert report.verdict.signature == "arch-mismatch"
    assert report.verdict.explanation.startswith("The program was built without machine code")
    assert "?" not in report.verdict.explanation


def test_old_gpu_named_by_another_input(tmp_path):
    # koboldcpp's bare ggml error (LostRuins/koboldcpp#1409, a K80) beside a real `nvidia-smi -q`
    # (tests/data/gpu_tools/nvsmi-q-a10-rowremap.txt) whose Product Name line is changed to the K80's.
    smi = (DATA / "gpu_tools" / "nvsmi-q-a10-rowremap.txt").read_text().replace(": NVIDIA A10\n", ": Tesla K80\n")
    (tmp_path / "nvidia-smi-q.txt").write_text(smi)
    report = analyze([str(tmp_path / "nvidia-smi-q.txt"),
                      str(DATA / "framework_log" / "nokernel-koboldcpp-k80-02.log")])
    finding = next(f for f in report.findings if f.signature == "arch-mismatch")
    assert finding.explanation.startswith(
        "Tesla K80 is sm_37 (Kepler); sm_37 (Kepler) is not supported from CUDA 12.0 on; "
        "the last PyTorch wheels with it are the cu118 builds. "
    )
    assert report.event(finding.evidence[0]).fields["family"] == "Kepler"


def test_two_gpu_models_do_not_guess():
    # PyTorch's own two warnings (sm_120 too new, K80 too old) and ggml's bare error, one line each.
    text = "\n".join([
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        "Found GPU0 Tesla K80 which is of cuda capability 3.7.PyTorch no longer supports this GPU because it is too"
        " old. The minimum cuda capability supported by this library is 5.0.",
        "CUDA error: no kernel image is available for execution on the device",
    ])
    report = analyze_text(text)
    assert len(report.facts["gpu_name"]) == 2
    bare = next(e for e in report.events if e.kind == "cuda-error")
    assert "gpu_model" not in bare.fields


HELD_OUT_38 = Path(__file__).parent / "heldout" / "rnd38"
CUFFT_ON_4090 = ("PyTorch version: 1.13.0\nCUDA used to build PyTorch: {cuda}\n"
                 "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090\n"
                 "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\n")  # the error line of pytorch/pytorch#88038


@pytest.mark.parametrize("case", ["rnd38e-torch-fft-rtx4090-cufft-01", "rnd38e-notsofar-nemo-stft-cufft-01"])
def test_a_library_failing_on_a_gpu_newer_than_the_builds_cuda_is_the_builds_age(case):
    """The build's CUDA typed as conda's `pytorch-cuda=11.7` or "torch with cuda 11.7", the GPU in the title: cuFFT's
    internal error on an RTX 4090 (sm_89, first in CUDA 11.8) is the build's, as the threads settled."""
    report = analyze([str(HELD_OUT_38 / case / "issue.md")])
    top = report.findings[0]
    assert (top.signature, top.cause) == ("library-failure-build-predates-gpu", "arch-mismatch")
    assert "CUDA 11.7 predates RTX 4090 (sm_89), which CUDA 11.8 first supports" in top.explanation


@pytest.mark.parametrize(("build", "signature"), [
    ("11.7", "library-failure-build-predates-gpu"),
    ("11.8", "library-failure"),  # a build that knows the GPU: the library's own failure
])
def test_the_build_gap_is_judged_from_collect_env(build, signature):
    assert analyze_text(CUFFT_ON_4090.format(cuda=build)).findings[0].signature == signature


def test_a_wheels_cuda_tag_is_the_builds_cuda():
    text = CUFFT_ON_4090.replace("PyTorch version: 1.13.0\nCUDA used to build PyTorch: {cuda}\n",
                                 "PyTorch version: 1.13.0+cu117\nIs CUDA available: True\n")
    assert analyze_text(text).findings[0].signature == "library-failure-build-predates-gpu"
