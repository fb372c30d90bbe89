"""framework_log: real training/inference logs in, typed events and the right verdict out."""

from __future__ import annotations

from pathlib import Path

import pytest

from postmortem import knowledge
from postmortem.pipeline import analyze, analyze_text

DATA = Path(__file__).parent / "data" / "framework_log"


def events_of(name: str, kind: str | None = None):
    report = analyze([str(DATA / name)])
    return [e for e in report.events if kind is None or e.kind == kind]


def verdict(name: str) -> str:
    report = analyze([str(DATA / name)])
    return report.findings[0].cause if report.findings else "unknown"


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("cudaErrorIllegalAddress", 700),
        ("CUDA_ERROR_ILLEGAL_ADDRESS", 700),
        ("error 700", 700),
        ("error=700", 700),
        ("CUDA failure 700", 700),
        ("an illegal memory access was encountered", 700),
        (209, 209),
        ("CUDA_ERROR_NO_BINARY_FOR_GPU", 209),
    ],
)
def test_cuda_error_lookup_accepts_every_spelling(token, expected):
    assert knowledge.cuda_error(token).number == expected


def test_cuda_error_message_wins_over_legacy_number():
    record, number = knowledge.find_cuda_error("cuda runtime error (59) : device-side assert triggered at x.cu:83")
    assert (record.runtime_name, number) == ("cudaErrorAssert", 59)


def test_signal_names():
    assert knowledge.signal_name(-11) == "SIGSEGV"
    assert knowledge.signal_name("Bus error") == "SIGBUS"
    assert knowledge.signal_name("Killed") == "SIGKILL"


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("backtrace-segv-libcuda-ethminer-01.log", "native-crash"),
        ("cublas-exec-failed-cntk-02.log", "library-failure"),
        ("cudnn-internal-repro-02.log", "library-failure"),
        ("device-assert-lua-nll-02.log", "device-assert"),
        ("device-assert-spatial-nll-04.log", "device-assert"),
        ("driver-insufficient-luatorch-04.log", "driver-mismatch"),
        ("driver-insufficient-onnxruntime-02.log", "driver-mismatch"),
        ("ecc-uncorrectable-tf-ctxretain-02.log", "gpu-memory-ecc"),
        ("faulthandler-segv-threestudio-02.log", "native-crash"),
        ("ggml-illegal-addr-ollama-02.log", "illegal-memory-access"),
        ("illegal-addr-vllm-02.log", "illegal-memory-access"),
        ("illegal-addr-vllm-windows-04.log", "illegal-memory-access"),
        ("jax-illegal-addr-customcall-02.log", "illegal-memory-access"),
        ("jax-oom-alphafold-02.log", "gpu-oom"),
        ("launch-failure-deepsdf-02.log", "launch-failure"),
        ("nokernel-koboldcpp-k80-02.log", "arch-mismatch"),
        ("oom-torch-legacy-02.log", "gpu-oom"),
        ("oom-framepack-04.log", "gpu-oom"),
        ("pytorch-18853-chained.log", "gpu-oom"),
        ("shm-bus-error-mmf-02.log", "shm-exhausted"),
        ("sm120-lora-trainer-05.log", "arch-mismatch"),
        ("tf-cudnn-handle-quoted-02.log", "library-failure"),
        ("torchrun-sigkill-codellama-04.log", "host-oom"),
        ("torchrun-sigsegv-flagembedding-02.log", "native-crash"),
        ("xla-illegal-addr-ptxla-04.log", "illegal-memory-access"),
        ("cgroup-oomkill-dataloader-01.log", "host-oom"),
    ],
)
def test_verdict(name, cause):
    assert verdict(name) == cause


def test_arch_unsupported_fields():
    (event,) = events_of("sm120-lora-trainer-05.log", "arch-unsupported")
    assert event.fields["sm"] == "sm_120"
    assert event.fields["gpu_name"] == "NVIDIA GeForce RTX 5090"
    assert event.fields["supported_archs"][-1] == "sm_90"
    assert (event.where.line, event.where.end_line) == (1, 3)


def test_ggml_error_reads_function_file_and_op():
    (event,) = events_of("nokernel-koboldcpp-k80-02.log", "cuda-error")
    assert event.fields["error"] == "cudaErrorNoKernelImageForDevice"
    assert event.fields["function"] == "ggml_cuda_compute_forward"
    assert event.fields["file"].endswith("ggml-cuda.cu") and event.fields["file_line"] == 2325
    assert event.fields["op"] == "ADD"
    assert "ADD failed" in event.text


def test_windows_exit_code_is_a_fatal_signal():
    (event,) = events_of("ggml-illegal-addr-ollama-02.log", "fatal-signal")
    assert event.fields["exception_code"] == "0xc0000409"
    assert event.fields["status"] == "STATUS_STACK_BUFFER_OVERRUN"


def test_illegal_address_outranks_the_abort_it_caused():
    report = analyze([str(DATA / "ggml-illegal-addr-ollama-02.log")])
    assert [f.cause for f in report.findings] == ["illegal-memory-access", "native-crash"]
    assert report.findings[1].consequence_of == "illegal-memory-access"


def test_onnxruntime_failure_fields():
    (event,) = events_of("driver-insufficient-onnxruntime-02.log", "driver-error")
    assert event.fields["number"] == 35
    assert event.fields["api"] == "cudaSetDevice"
    assert event.fields["host"] == "DESKTOP-F9GHF2T"
    assert event.fields["file"].endswith("cuda_execution_provider.cc") and event.fields["file_line"] == 236


def test_lua_legacy_number_kept_but_error_named_by_message():
    (event,) = events_of("device-assert-lua-nll-02.log", "cuda-error")
    assert event.fields["error"] == "cudaErrorAssert"
    assert event.fields["number"] == 59


def test_device_asserts_fold_into_one_event():
    (event,) = events_of("device-assert-spatial-nll-04.log", "device-assert")
    assert event.count == 7
    assert (event.where.line, event.where.end_line) == (1, 7)
    assert event.fields["assertion"] == "t >= 0 && t < n_classes"
    assert event.fields["file_line"] == 106


def test_same_error_from_many_threads_is_one_block():
    (event,) = events_of("xla-illegal-addr-ptxla-04.log", "cuda-error")
    assert event.count == 4
    assert "Deallocating stream with pending work" in event.text
    assert "xrt_state_ops.h:350" in event.text


def test_vllm_prefix_and_headless_traceback():
    (event,) = events_of("illegal-addr-vllm-02.log", "cuda-error")
    assert event.fields["processes"] == ["VllmWorker TP1 pid=409"]
    assert event.fields["top_frame"].endswith("activation.py:734 in forward")
    assert event.where.line == 1 and "F.gelu" in event.text


def test_oom_sizes():
    (event,) = events_of("oom-framepack-04.log", "gpu-oom")
    assert event.fields["requested"] == "30.29 GiB"
    assert event.fields["total_capacity"] == "10.74 GiB"
    assert event.fields["gpu_index"] == 0
    (jax,) = events_of("jax-oom-alphafold-02.log", "gpu-oom")
    assert jax.fields["requested_bytes"] == 4770354232
    assert jax.fields["framework"] == "jax"
    assert "14.44GiB" in jax.text


def test_python_traceback_fields():
    events = events_of("launch-failure-deepsdf-02.log", "python-exception")
    (event,) = events
    assert event.fields["exc_type"] == "RuntimeError"
    assert event.fields["message"] == "CUDA error: unspecified launch failure"
    assert event.fields["frames"][0] == {"file": "train_deep_sdf.py", "line": 501, "function": "main_function"}
    assert (event.where.line, event.where.end_line) == (1, 6)


def test_terminate_is_read_with_its_what_line():
    (event,) = events_of("launch-failure-deepsdf-02.log", "fatal-signal")
    assert event.fields["exception_type"] == "c10::Error"
    assert "insert_events" in event.fields["what"]


def test_faulthandler_dump():
    (event,) = events_of("faulthandler-segv-threestudio-02.log", "fatal-signal")
    assert event.fields["signal"] == "SIGSEGV"
    assert event.fields["frames"][0].endswith("threading.py:324 in wait")
    assert event.where.end_line == 11


def test_glibc_backtrace_and_shell_abort():
    events = events_of("backtrace-segv-libcuda-ethminer-01.log", "fatal-signal")
    first, *_, last = events
    assert first.fields["signal"] == "SIGSEGV"
    assert any("cuMemcpyHtoD_v2" in frame for frame in first.fields["frames"])
    assert last.fields["signal"] == "SIGABRT"
    assert last.fields["glibc_message"] == "malloc_consolidate(): invalid chunk size"


def test_torchrun_child_failure():
    (event,) = events_of("torchrun-sigsegv-flagembedding-02.log", "child-failed")
    assert (event.fields["exitcode"], event.fields["signal"], event.fields["pid"], event.fields["rank"]) == (
        -11, "SIGSEGV", 28773, 0)
    assert event.time is None


def test_cudnn_repro_snippet_belongs_to_the_error():
    (event,) = events_of("cudnn-internal-repro-02.log", "library-error")
    assert event.fields["status"] == "CUDNN_STATUS_INTERNAL_ERROR"
    assert "ConvolutionParams" in event.text and "CUDNN_DATA_FLOAT" in event.text


def test_repeated_cudnn_handle_errors_and_tf_node():
    events = events_of("tf-cudnn-handle-quoted-02.log", "library-error")
    assert events[0].count == 4
    assert events[-1].fields["node"] == "FlowNet2/FlowNetSD/conv0/Conv2D"


def test_cublas_status_call_site():
    (event,) = events_of("cublas-exec-failed-cntk-02.log", "library-error")
    assert event.fields["status"] == "CUBLAS_STATUS_EXECUTION_FAILED"
    assert event.fields["number"] == 13 and event.fields["gpu_index"] == 1
    assert event.fields["api"] == "cublas_gemm"


def test_kernel_oom_line_is_not_a_gpu_oom():
    report = analyze_text(
        "Memory cgroup out of memory: Killed process 629 (onmt_train) total-vm:14119556kB, anon-rss:6538204kB,"
        " file-rss:80652kB, shmem-rss:16kB, UID:0 pgtables:13432kB oom_score_adj:0"
    )
    assert not [e for e in report.events if e.kind in ("gpu-oom", "cuda-error")]


def test_garbage_does_not_raise():
    text = "CUDA error\x00\xff\nTraceback (most recent call last):\n\nfailed (exitcode: x)\nFatal Python error: \n"
    analyze_text(text)


def test_the_same_traceback_from_interleaved_ranks_is_one_event():
    """torchrun prints every rank's traceback with a [rankN]: prefix, lines interleaved."""
    lines = (DATA / "launch-failure-deepsdf-02.log").read_text().splitlines()
    mixed = "\n".join(f"[rank{rank}]: {line}" for line in lines for rank in (0, 1))
    report = analyze_text(mixed)
    [exception] = [e for e in report.events if e.kind == "python-exception"]
    assert exception.count == 2
    assert exception.fields["ranks"] == [0, 1]
    assert exception.fields["exc_type"] == "RuntimeError"
    assert report.findings[0].cause == "launch-failure"


def test_triton_kernel_too_big_for_the_gpu():
    [event] = events_of("triton-out-of-resources.log", "kernel-resources")
    assert event.fields == {"resource": "shared memory", "required": 126978, "limit": 101376, "framework": "triton"}
    assert verdict("triton-out-of-resources.log") == "launch-failure"


def test_tensorflow_allocator_retry_is_only_a_warning():
    found = events_of("tf-bfc-retry.log", "gpu-oom")
    assert [(e.fields["requested"], e.fields["retried"]) for e in found] == [("45.53MiB", True), ("549.62MiB", True)]
    report = analyze([str(DATA / "tf-bfc-retry.log")])
    assert [f.signature for f in report.findings] == ["tf-allocator-retry"]
    assert report.findings[0].severity == "warning"


@pytest.mark.parametrize("text", [
    # https://github.com/Optiminer/OptiminerEquihash/issues/2 (a GTX 950M; the PTX targets sm_61)
    "ptxas fatal   : SM version specified by .target is higher than default SM version assumed",
    # https://github.com/Optiminer/OptiminerEquihash/issues/11
    "[2017-11-20 19:34:42.709] [error] Build Log:\n"
    "ptxas fatal   : SM version specified by .target is higher than default SM version assumed",
    # https://github.com/IBMSparkGPU/GPUEnabler/issues/34
    "[root@localhost resources]# ptxas GpuEnablerExamples.ptx\n\n"
    "ptxas fatal   : SM version specified by .target is higher than default SM version assumed",
])
def test_ptx_for_a_newer_gpu_than_ptxas_builds_for_is_an_arch_mismatch(text):
    report = analyze_text(text + "\n")
    assert report.verdict.cause == "arch-mismatch"
    assert next(e for e in report.events if e.kind == "arch-unsupported").fields["tool"] == "ptxas"


@pytest.mark.parametrize("text", [
    # https://github.com/NVIDIA/flownet2-pytorch/issues/43 (fixed with --ipc=host)
    "Error : RuntimeError: unable to write to file </torch_18693_1954506624> at "
    "/pytorch/torch/lib/TH/THAllocator.c:271",
    # https://github.com/idiap/ESLAM/issues/20 (fixed with --shm-size=32g)
    "RuntimeError: unable to write to file </torch_31911_952036340_6686>: No space left on device (28)",
    # https://github.com/MIC-DKFZ/nnUNet/issues/294
    "    fd, size = storage._share_fd_()\nRuntimeError: unable to write to file </torch_15769_1517813162>",
])
def test_torch_failing_on_its_shared_memory_files_is_a_full_dev_shm(text):
    assert analyze_text(text + "\n").verdict.cause == "shm-exhausted"


@pytest.mark.parametrize("text, cause", [
    # https://github.com/bitsandbytes-foundation/bitsandbytes/issues/239 (an A100 build without the kernels)
    ("=============================================\nERROR: Your GPU does not support Int8 Matmul!\n"
     "=============================================", "arch-mismatch"),
    # https://github.com/bitsandbytes-foundation/bitsandbytes/issues/100 (a Tesla M40), quoted in a reply
    ("> ERROR: Your GPU does not support Int8 Matmul!", "arch-mismatch"),
    # https://github.com/bitsandbytes-foundation/bitsandbytes/issues/538 (8-bit on an H100)
    ("[Bug] Exception: cublasLt ran into an error! during fine-tuning LLM in 8bit mode", "library-failure"),
    # https://github.com/oobabooga/textgen/issues/379 (8-bit on an older GPU)
    ('"cublasLt ran into an error" with older GPU in 8-bit mode', "library-failure"),
])
def test_bitsandbytes_refusing_the_gpu_or_failing_in_cublaslt(text, cause):
    assert analyze_text(text + "\n").verdict.cause == cause


# Host assertions, as each program words them (data/assertion-failures.tsv), in real posts: (text, kind, file, line,
# condition). Sources: puttsk/cuda-tutorial#12, tensorpack/tensorpack#157, BachiLi/redner#3, ggml-org/llama.cpp#9478,
# ikawrakow/ik_llama.cpp (an iqk GEMM assert on Windows), facebookresearch/faiss#280, torrvision/siamfc-tf#21,
# tensorflow/tensorflow#24784.
HOST_ASSERTS = [
    ("[heyliu@controller tutorial01]$ ./vector_add\nvector_add: vector_add.cu:48: int main(): Assertion `fabs(output[i]"
     " - a[i] - b[i]) < 1e-6' failed.\nAborted (core dumped)\n",
     "glibc-assert", "vector_add.cu", 48, "fabs(output[i] - a[i] - b[i]) < 1e-6"),
    ("I tensorflow/compiler/xla/service/service.cc:187]   StreamExecutor device (1): GeForce GTX 1080, Compute "
     "Capability 6.1\npython: external/eigen_archive/unsupported/Eigen/CXX11/src/Tensor/TensorDeviceCuda.h:218: void "
     "Eigen::GpuDevice::memcpy(void*, const void*, size_t) const: Assertion `err == cudaSuccess' failed.\n"
     "Aborted (core dumped)\n",
     "glibc-assert", "external/eigen_archive/unsupported/Eigen/CXX11/src/Tensor/TensorDeviceCuda.h", 218,
     "err == cudaSuccess"),
    ("$ python3 test_shadow_light.py\npython3: /home/jay/redner/scene.cpp:79: Scene::Scene(const Camera&, const "
     "std::vector<const Shape*>&, const std::vector<const Material*>&, const std::vector<const Light*>&, bool): "
     "Assertion `false' failed.\n[1]    9201 abort (core dumped)  python3 test_shadow_light.py\n",
     "glibc-assert", "/home/jay/redner/scene.cpp", 79, "false"),
    ("Whenever I go to execute llama-baby-llama, I get \u201cggml/src/ggml.c:6793: GGML_ASSERT(false && "
     "\u2018backwards pass not implemented\u2019) failed \u201c error.\n",
     "ggml-assert", "ggml/src/ggml.c", 6793, "false && \u2018backwards pass not implemented\u2019"),
    ("**Error: `ik_llama.cpp\\ggml\\src\\iqk\\iqk_gemm_legacy_quants.cpp:1774: GGML_ASSERT(nrc_x%8 == 0) failed`.**\n",
     "ggml-assert", "ik_llama.cpp\\ggml\\src\\iqk\\iqk_gemm_legacy_quants.cpp", 1774, "nrc_x%8 == 0"),
    ("  IndexIVFPQ size 0 -> GpuIndexIVFPQ indicesOptions=0 usePrecomputed=1 useFloat16=1 reserveVecs=1000000\nFaiss "
     "assertion 'err__ == cudaSuccess' failed in faiss::gpu::DeviceTensor<T, Dim, Contig, IndexT, PtrTraits>::"
     "~DeviceTensor() [with T = float; int Dim = 3; bool Contig = true; IndexT = int; PtrTraits = faiss::gpu::traits::"
     "DefaultPtrTraits] at impl/../utils/DeviceTensor-inl.cuh:61; details: CUDA error 77\nAborted (core dumped)\n",
     "faiss-assert", "impl/../utils/DeviceTensor-inl.cuh", 61, "err__ == cudaSuccess"),
    ("F tensorflow/core/kernels/conv_ops.cc:659] Check failed: stream->parent()->GetConvolveAlgorithms(&algorithms) \n"
     "Aborted (core dumped)\n",
     "glog-check", "tensorflow/core/kernels/conv_ops.cc", 659, "stream->parent()->GetConvolveAlgorithms(&algorithms)"),
    ("_./tensorflow/core/util/cuda_launch_config.h:127] Check failed: work_element_count > 0 (-608567296 vs. 0)\n"
     "Aborted (core dumped)_\n",
     "glog-check", "./tensorflow/core/util/cuda_launch_config.h", 127, "work_element_count > 0 (-608567296 vs. 0)"),
]


@pytest.mark.parametrize(("text", "kind", "file", "line", "cond"), HOST_ASSERTS)
def test_a_failed_host_assertion_is_an_abort_with_its_place(text, kind, file, line, cond):
    report = analyze_text(text)
    found = [e for e in report.events if e.kind == "fatal-signal" and e.fields.get("source") == "assertion"]
    assert len(found) == 1
    fields = found[0].fields
    assert (fields["assertion_kind"], fields["file"], fields["file_line"], fields["assertion"]) == (kind, file, line,
                                                                                                   cond)
    assert fields["signal"] == "SIGABRT"


def test_the_abort_verdict_names_the_failed_assertion():
    report = analyze_text(HOST_ASSERTS[0][0])
    assert report.findings[0].signature == "native-abort"
    assert "the assertion `fabs(output[i] - a[i] - b[i]) < 1e-6` failed at vector_add.cu:48" in " ".join(
        report.findings[0].explanation.split())


def test_a_device_side_assert_is_not_read_as_a_host_assertion():
    text = ("/pytorch/aten/src/THCUNN/SpatialClassNLLCriterion.cu:106: "
            "cunn_SpatialClassNLLCriterion_updateOutput_kernel: block: [4,0,0], thread: [614,0,0] "
            "Assertion `t >= 0 && t < n_classes` failed.\n")
    report = analyze_text(text)
    assert report.findings[0].cause == "device-assert"
    assert not [e for e in report.events if e.fields.get("source") == "assertion"]


def test_every_assertion_wording_reads_its_own_example():
    for row in knowledge.data_rows("assertion-failures.tsv"):
        report = analyze_text(row["example"] + "\n")
        kinds = [e.fields.get("assertion_kind") for e in report.events if e.kind == "fatal-signal"]
        assert kinds == [row["id"]], row["id"]
        assert row["anchor"] in row["example"] and row["source"].startswith("https://")


# A CUDA error message cut at the end of its line: the stored copy of Purfview/whisper-standalone-win#411 ends
# mid-message, and notes in public repositories wrap "... was" / "encountered" at their width.
CUT_MESSAGES = [
    ('File "pyannote\\audio\\pipelines\\speaker_verification.py", line 707, in __call__\n'
     "RuntimeError: CUDA error: the launch timed out and was", "cuda-error", "launch-failure"),
    ("- **`torch.AcceleratorError: CUDA error: an illegal memory access was\n  encountered` during `Capturing CUDA "
     "graphs (PIECEWISE)`.** Hit", "cuda-error", "illegal-memory-access"),
]



@pytest.mark.parametrize("text", ["RuntimeError: CUDA error: an illegal\n", "CUDA error: invalid device\n",
                                  "CUDA error: the launch timed out and was terminated yesterday, then\n"])
def test_a_cut_message_must_name_one_error(text):
    """Two words are not enough, a start shared by two messages names neither, and whole messages match as usual."""
    errors = [e.fields.get("error") for e in analyze_text(text).events if e.kind == "cuda-error"]
    assert errors in ([], ["cudaErrorLaunchTimeout"])
    assert (errors == ["cudaErrorLaunchTimeout"]) == ("terminated" in text)


# Julia's own report of a fatal signal, in the shapes its versions print (JuliaPackaging/Yggdrasil#6526, a
# JuliaPy/PythonCall.jl reproducer, an Enzyme.jl report, a Julia-HPC-examples note on LUMI):
# (text, signal, first frame).
JULIA_SIGNALS = [
    ("julia> CUDA.cuLinkCreate_v2(0, C_NULL, C_NULL, handle_ref)\nsignal (11): Segmentation fault\nin expression "
     "starting at REPL[4]:1\n__cuda_CallJitEntryPoint at /lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1 (unknown "
     "line)\nunknown function (ip: 0x7f67468c6317)\nmacro expansion at /home/tbesard/CUDA.jl/lib/utils/call.jl:107 "
     "[inlined]\n",
     "SIGSEGV", "__cuda_CallJitEntryPoint at /lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1 (unknown line)"),
    ("[219060] signal 11 (1): Segmentation fault\nin expression starting at $REPO/reproducer.jl:28\nlookup_tp_mro at "
     "/usr/local/src/conda/python-3.12.5/Objects/typeobject.c:336 [inlined]\n",
     "SIGSEGV", "lookup_tp_mro at /usr/local/src/conda/python-3.12.5/Objects/typeobject.c:336 [inlined]"),
    ("[1433292] signal (11.1): Segmentation fault\nin expression starting at /home/zack/src/mvp_missing_physics_zygote/"
     "missing_physics_larger.jl:89\ngc_mark_loop at /cache/build/default-amdci4-0/julialang/julia-release-1-dot-9/src/"
     "gc.c:2819\n",
     "SIGSEGV", "gc_mark_loop at /cache/build/default-amdci4-0/julialang/julia-release-1-dot-9/src/gc.c:2819"),
    ("[123441] signal 11 (1): Segmentation fault\nin expression starting at /users/barthale/src/Julia-HPC-examples/MPI/"
     "script.jl:2\nMPICH ERROR [Rank 0] [job id 14833080.5] [Fri Nov 21 09:21:34 2025] [nid007972] - Abort(-1) (rank 0 "
     "in comm 0): MPIDI_CRAY_init: GPU_SUPPORT_ENABLED is requested, but GTL library is not linked\n",
     "SIGSEGV", None),
]


@pytest.mark.parametrize(("text", "signal", "frame"), JULIA_SIGNALS)
def test_julias_signal_report_is_a_fatal_signal_with_its_frames(text, signal, frame):
    report = analyze_text(text)
    [event] = [e for e in report.events if e.kind == "fatal-signal"]
    assert (event.fields["signal"], event.fields["source"]) == (signal, "julia")
    assert (event.fields["frames"][:1] or [None])[0] == frame
    assert report.findings[0].cause == "native-crash"


# Tracebacks pasted without their "Traceback (most recent call last):" line and with their indent lost, as issues
# outside a code block show them (open-mmlab/mmpose#922; zai-org/CogVLM#394, retyped without the blanks).
HEADLESS = [
    ("corpus/dist-neg-mmpose-eval-keyerror-01/train.log", "KeyError", "'/0000115_img.png'",
     "/home/yukti/mmpose/mmpose/mmpose/datasets/datasets/top_down/topdown_coco_dataset.py"),
    ("corpus/valj-nccl-shm-cogvlm-finetune-01/stderr.log", "torch.distributed.DistBackendError", "NCCL error in",
     "/root/anaconda3/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"),
]


@pytest.mark.parametrize(("name", "exc_type", "message", "top_file"), HEADLESS)
def test_a_traceback_pasted_without_its_header_is_read(name, exc_type, message, top_file):
    [exc] = [e for e in analyze([str(Path(__file__).parent / name)]).events if e.kind == "python-exception"]
    assert exc.fields["exc_type"] == exc_type and exc.fields["message"].startswith(message)
    assert exc.fields["frames"][0]["file"] == top_file


def test_the_frames_of_a_headed_traceback_start_no_second_one():
    text = ('Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n    main()\n'
            '  File "a.py", line 2, in main\n    raise KeyError("x")\nKeyError: \'x\'\n')
    assert len([e for e in analyze_text(text).events if e.kind == "python-exception"]) == 1


# IPython's (Jupyter's, Colab's) tracebacks: Cell and File frames with numbered source lines, from public texts (a
# Google TTS session, a notebook-extraction tutorial) and the diffusers notebook of the corpus (headless).
IPYTHON = [
    ('In [3]: text_to_mp3("en-US-Studio-O", "shoemaker s-h-o-e-m-a-k-e-r shoemaker")\n' + "-" * 75 + "\n"
     "DefaultCredentialsError                   Traceback (most recent call last)\nCell In[4], line 1\n"
     '----> 1 text_to_mp3("en-US-Studio-O", "shoemaker s-h-o-e-m-a-k-e-r shoemaker")\n\n'
     "Cell In[3], line 8, in text_to_mp3(voice_name, text)\n      4 voice_params = tts.VoiceSelectionParams(\n"
     "      7 audio_config = tts.AudioConfig(audio_encoding=tts.AudioEncoding.MP3)\n"
     "----> 8 client = tts.TextToSpeechClient()\n\nDefaultCredentialsError: Your default credentials were not found.\n",
     "DefaultCredentialsError", "Your default credentials were not found.", ("Cell In[3]", 8)),
    ("-" * 75 + "\nNameError                                 Traceback (most recent call last)\nCell In[9], line 3\n"
     "      1 from myfunc2 import myfunc2\n      2 x = 1\n----> 3 myfunc2()\n\n"
     "File ~/Dropbox/code/coding_for_science/src/codingforscience/jupyter/myfunc2.py:2, in myfunc2()\n"
     "      1 def myfunc2():\n----> 2     print(x)\n\nNameError: name 'x' is not defined\n",
     "NameError", "name 'x' is not defined",
     ("~/Dropbox/code/coding_for_science/src/codingforscience/jupyter/myfunc2.py", 2)),
    ((Path(__file__).parent / "corpus/ext-neg-diffusers-disk-full-tempfile-01/notebook.txt").read_text(),
     "OSError", "[Errno 28] No space left on device", ("/usr/lib/python3.10/tempfile.py", 622)),
]


@pytest.mark.parametrize(("text", "exc_type", "message", "top"), IPYTHON)
def test_an_ipython_traceback_is_read(text, exc_type, message, top):
    [exc] = [e for e in analyze_text(text).events if e.kind == "python-exception"]
    assert (exc.fields["exc_type"], exc.fields["message"]) == (exc_type, message)
    assert (exc.fields["frames"][0]["file"], exc.fields["frames"][0]["line"]) == top


@pytest.mark.parametrize(("name", "chain"), [
    ("corpus/ext-neg-kohya-no-xformers-importerror-01/stderr.log", ["ModuleNotFoundError", "ImportError"]),
    ("corpus/vall-cupy-nvrtc-undefined-ident-negative-01/notebook.txt", ["NVRTCError", "CompileException"]),
])
def test_a_chain_pasted_from_its_first_exception_line_keeps_that_exception(name, chain):
    """A paste that starts at the first exception's own line, then 'During handling of the above exception' (a
    kohya_ss run; a CuPy notebook, whose IPython header has no colon): the chain keeps both exceptions."""
    [exc] = [e for e in analyze([str(Path(__file__).parent / name)]).events if e.kind == "python-exception"]
    assert [c["exc_type"] for c in exc.fields["chain"]] == chain and exc.fields["exc_type"] == chain[-1]


# What real runs of runtimes and containers print, each wording from two or more posts: TensorRT's out of memory
# (BEVDet#132 and two public notes), TensorRT engines built on another GPU (NVIDIA/TensorRT#564, a Ray cluster note, a
# deployment guide), PyTorch's and NumPy's failed host allocations (easydiffusion#289, a public traceback), NGC
# containers refusing a GPU (NVIDIA/caffe#525, a Triton 24.05 note) and their CUDA start failure (NeMo-Aligner#336,
# cut; an NGC PyTorch 25.02 log).
RUNTIME_WORDINGS = [
    ("[E] 2: [virtualMemoryBuffer.cpp::nvinfer1::StdVirtualMemoryBufferImpl::resizePhysical::140] Error Code 2: "
     "OutOfMemory (no further information)", "gpu-oom", "gpu-oom"),
    ("2: [executionContext.cpp::ExecutionContext::470] Error Code 2: OutOfMemory (no further information)\n"
     "Segmentation fault", "gpu-oom", "gpu-oom"),
    ("[10/26/2022-07:25:57] [E] [TRT] INVALID_CONFIG: The engine plan file is generated on an incompatible device, "
     "expecting compute 8.0 got compute 8.6, please rebuild.", "arch-unsupported", "arch-mismatch"),
    ("(SDXLCore pid=59182) [E] 6: The engine plan file is generated on an incompatible device, expecting compute 7.0 "
     "got compute 8.0, please rebuild. [repeated 3x across cluster]", "arch-unsupported", "arch-mismatch"),
    ("Extend: RuntimeError: [enforce fail at C:\\cb\\pytorch_1000000000000\\work\\c10\\core\\impl\\alloc_cpu.cpp:81] "
     "data. DefaultCPUAllocator: not enough memory: you tried to allocate 151781376 bytes.", "host-alloc-failed",
     "host-oom"),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't allocate memory: you "
     "tried to allocate 2359296 bytes. Error code 12 (Cannot allocate memory)", "host-alloc-failed", "host-oom"),
    ("ERROR: Detected NVIDIA Tesla K80 GPU, which is not supported by this container\nERROR: No NVIDIA supported "
     "GPU(s) detected to run this container", "arch-unsupported", "arch-mismatch"),
    ("ERROR: Detected Quadro M1200 GPU, which is not supported by this container\nERROR: No supported GPU(s) "
     "detected to run this container", "arch-unsupported", "arch-mismatch"),
    ("ERROR: The NVIDIA Driver is present, but CUDA failed to initialize.  GPU functionality will not be available.\n"
     "   [[ System has unsupported display driver", "driver-error", "driver-mismatch"),
    ("ERROR: The NVIDIA Driver is present, but CUDA failed to initialize.  GPU functionality will not be available.\n"
     "   [[ Unknown error (error 999) ]]", "cuda-error", "driver-mismatch"),
]


@pytest.mark.parametrize(("text", "kind", "cause"), RUNTIME_WORDINGS + CUT_MESSAGES)
def test_real_wordings_give_their_event_and_cause(text, kind, cause):
    report = analyze_text(text + "\n")
    assert kind in [e.kind for e in report.events]
    assert report.findings[0].cause == cause


def test_a_tensorrt_engine_for_another_gpu_names_both_architectures():
    [event] = analyze_text(RUNTIME_WORDINGS[2][0] + "\n").events
    assert (event.fields["built_for"], event.fields["sm"]) == ("sm_80", "sm_86")


FACEFUSION_STATS = (Path(__file__).parent / "heldout" / "rnd11"
                    / "rnd11d-sdwebui-facefusion-tf-virtual-device-512mb-limit-01" / "bfc-allocator.txt")
"""TensorFlow's allocator statistics alone, as diffus-me/sd-webui-facefusion#10 posted them: a 512 MB virtual device
used to its limit."""


def test_allocator_statistics_at_their_limit_are_a_gpu_oom():
    (event,) = [e for e in analyze([str(FACEFUSION_STATS)]).events if e.kind == "gpu-oom"]
    assert (event.fields["limit_bytes"], event.fields["in_use_bytes"]) == (536870912, 536786944)
    assert event.where.line == 1 and event.where.end_line == 8


def test_allocator_statistics_with_room_left_are_not():
    table = FACEFUSION_STATS.read_text().replace("InUse:                       536786944",
                                                 "InUse:                       268435456")
    assert not [e for e in analyze_text(table).events if e.kind == "gpu-oom"]
