"""error_words: an error line no table holds, read by its words, on real lines from public threads."""

from __future__ import annotations

import pytest

from postmortem import knowledge
from postmortem.pipeline import analyze_text
from postmortem.prefilter import searched
from postmortem.signatures import load_default
from postmortem.sources import error_words

READ = {
    # ollama/ollama#7146: ggml's allocator names the CUDA device it failed on ("CUDA3"), a word no table holds
    "10月 19 22:21:15 gpu ollama[60399]: ggml_gallocr_reserve_n: failed to allocate CUDA3 buffer of size 8991031296":
        "gpu-oom",
    # the kernel's OOM report opened by a CUDA runtime thread, whose name says "cuda" (tests/heldout/rnd1, dorado)
    "[ 1363.474135] cuda-EvtHandlr invoked oom-killer: gfp_mask=0x6200c0(GFP_USER), order=0, oom_score_adj=0":
        "host-oom",
    # fastai/docker-containers#21: the DataLoader's hint, wrapped so that its first words stand on the line before
    "memory. Please try to raise your shared memory limit.": "shm-exhausted",
    # microsoft/pai#2736: Hadoop AI's node manager taking GPUs out for their ECC counts
    "19/04/29 08:01:21 ERROR util.SysInfoLinux: ignored error: gpu 29 ECC code is 2019, will make this gpu "
    "unavailable": "gpu-memory-ecc",
    # NVIDIA/apex#1051: nvcc's refusal, in Markdown bold with typographic quotes
    "**nvcc fatal: Unsupported gpu architecture \u2018compute_86\u2019**": "arch-mismatch",
    # acidanthera/bugtracker#2237: nvidia-settings at login
    "mar 06 15:12:17 CS3003NS nvidia-settings-autostart.desktop[2777]: ERROR: NVIDIA driver is not loaded":
        "driver-mismatch",
    # meta-pytorch/torchtune#2093: PyTorch's watchdog line, in a wording of its own release
    "[rank4]:[E1129 11:56:57.204156533 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 4] Exception "
    "(either an error or timeout) detected by watchdog at work: 28956, last enqueued NCCL work: 28956, last completed "
    "NCCL work: 28955.": "nccl-timeout",
    # ROCm/legacy-rocm-build#1339: ROCm's own words for a GPU memory fault, after a progress message
    "[aln_core] cuda_inexact_match_caller..Memory access fault by GPU node-4 (Agent handle: 0x10451e0) on address "
    "(nil). Reason: Page not present or supervisor privilege.": "illegal-memory-access",
    # jax-ml/jax#5147: TensorFlow's stream executor failing to make a cuFFT plan
    "2020-12-09 16:54:19.478098: F external/org_tensorflow/tensorflow/stream_executor/cuda/cuda_fft.cc:439] failed to "
    "initialize batched cufft plan with customized allocator: Failed to create cuFFT batched plan.": "library-failure",
    # ipmitool/ipmitool#385: ipmiutil's line of a BMC's memory sensor event (a DIMM's corrected errors)
    "003a 12/14/22 23:09:44 MIN EFI  Memory #88  Correctable ECC, DIMM(49) 6f [a0 02 31]": "host-memory",
}


@pytest.mark.parametrize(("line", "cause"), READ.items())
def test_an_unknown_error_line_is_read_by_its_words(line, cause):
    report = analyze_text(line)
    (event,) = [e for e in report.events if e.kind == "error-words"]
    assert event.fields["cause"] == cause
    assert report.findings[0].cause == cause
    assert report.findings[0].confidence < 0.5  # the weakest evidence: LOOSE


NOT_READ = [
    # the drm driver failing to make its device object (tests/corpus/drv-open-module-datacenter-only-rminit-01):
    # "failed to allocate" an object, no memory, no size
    "[    3.828704] [drm:nv_drm_load [nvidia_drm]] *ERROR* [nvidia-drm] [GPU ID 0x00000400] Failed to allocate "
    "NvKmsKapiDevice",
    # a command someone typed, on a host named for its GPUs (tests/corpus/dist-pai-container-cgroup-oom-01)
    "> core@paigcr-a-gpu-1013:~ $ dmesg  -T | grep oom -C 100",
    # the host's memory controller, not the GPU's (tests/corpus/drv-mce-dram-ecc-syslogd-broadcast-01)
    " kernel:[Hardware Error]: MC4 Error (node 3): DRAM ECC error detected on the NB.",
    # PyTorch's start-up settings name a timeout and NCCL's error handling: nothing failed
    "[I ProcessGroupNCCL.cpp:835] [Rank 0] ProcessGroupNCCL initialization options:NCCL_ASYNC_ERROR_HANDLING: 1, "
    "NCCL_DESYNC_DEBUG: 0, NCCL_ENABLE_TIMING: 0, NCCL_BLOCKING_WAIT: 0, TIMEOUT(ms): 1800000",
    # Triton's shared memory is the GPU's per-block memory, not /dev/shm (tests/corpus, Triton OutOfResources)
    "triton.runtime.autotuner.OutOfResources: out of resource: shared memory, Required: 133136, Hardware limit: "
    "101376. Reducing block sizes or `num_stages` may help.",
    # an image named "driver" that the registry does not have (tests/corpus/vale-neg-driver-image-manifest-...)
    "Failed to pull image \"nvcr.io/nvidia/driver:460.32.03-amzn2\": rpc error: code = Unknown desc = Error response "
    "from daemon: manifest for nvcr.io/nvidia/driver:460.32.03-amzn2 not found",
    # a denial
    "no out of memory errors on the GPU this time",
    # a memory inventory at boot: DIMMs named, nothing failed
    "Memory controller initialized, 8 DIMMs found",
    # Ray's list of what may have ended a worker (vllm-project/vllm#586): a guess among several
    "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
    "(1) The process is killed by SIGKILL by OOM killer due to high memory usage.",
]


@pytest.mark.parametrize("line", NOT_READ)
def test_words_that_do_not_say_a_fault_are_not_read(line):
    assert not [e for e in analyze_text(line).events if e.kind == "error-words"]


def test_a_line_another_source_read_is_not_read_again():
    """The kernel's own Xid line is kernel_log's: the words of the same line add nothing."""
    line = "[   49.261472] NVRM: GPU at 0000:01:00.0 has fallen off the bus."
    kinds = [e.kind for e in analyze_text(line).events]
    assert "error-words" not in kinds and kinds


def test_a_program_report_outranks_words():
    """Words are the answer only where nothing else is: PyTorch's OOM report leads over a words-only line."""
    text = ("ggml_gallocr_reserve_n: failed to allocate CUDA3 buffer of size 8991031296\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    report = analyze_text(text)
    assert report.findings[0].cause == "illegal-memory-access"
    assert [f.cause for f in report.findings].index("gpu-oom") > 0


def test_every_row_reads_its_example_and_has_a_signature():
    causes = {s.cause for s in load_default().signatures if s.id.startswith("words-")}
    for row, data in zip(error_words.rows(), knowledge.data_rows(error_words.TABLE), strict=True):
        assert row.reads(data["example"]) is not None, data["example"]
        assert row.cause in causes
        assert data["source"].startswith("https://")


def test_every_wording_of_a_first_group_has_an_anchor():
    """The prefilter hands a line over only if it holds an anchor: each row's first group must be found by one."""
    anchors = {searched(a)[0].decode() for a in error_words.ANCHORS}
    for data in knowledge.data_rows(error_words.TABLE):
        for wording in data["words"].split(" + ")[0].split("|"):
            assert any(a in wording.lower() for a in anchors), wording


def test_a_markdown_texts_fenced_log_is_read_and_its_prose_is_not(tmp_path):
    """ArcInstitute/evo2#9 as its reporter wrote it: the TransformerEngine assertion pasted between fences is an error
    line read by its words; the same words in the sentence around a fence, or in a text with no fence, are a person's
    prose, which only the reporter's-words source reads."""
    from postmortem.pipeline import analyze

    fenced = ("Thanks for developing Evo 2!\n\nWhen running the test on an A100 GPU I get:\n```\n"
              "AssertionError: Device compute capability 8.9 or higher required for FP8 execution.\n```\n\n"
              "Do you expect to be able to run Evo 2 on A100s?\n")
    (tmp_path / "issue.md").write_text(fenced, encoding="utf-8")
    [finding] = [f for f in analyze([str(tmp_path / "issue.md")]).findings if f.signature == "words-arch-mismatch"]
    assert finding.cause == "arch-mismatch"
    prose = fenced.replace("```\n", "")
    (tmp_path / "prose.md").write_text(prose, encoding="utf-8")
    assert not [f for f in analyze([str(tmp_path / "prose.md")]).findings if f.signature.startswith("words-")]
    (tmp_path / "log.txt").write_text(prose, encoding="utf-8")  # a log is read whole, fences or none
    assert [f.cause for f in analyze([str(tmp_path / "log.txt")]).findings][:1] == ["arch-mismatch"]
