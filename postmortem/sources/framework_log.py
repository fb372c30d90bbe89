"""Logs that training and inference jobs write: PyTorch, TensorFlow, JAX/XLA, Lua Torch,
ONNX Runtime, llama.cpp/ggml/ollama, vLLM, ComfyUI, torchrun.

Each framework words the same few failures its own way (a CUDA error, GPU memory
exhausted, a kernel without code for this GPU, a native crash, a dead worker).
Every candidate line goes through a list of detectors, first match wins; a
detector reads the lines that belong to its report (a traceback, an error's
continuation lines, a faulthandler dump) and returns a `Found`. At the end,
reports of one incident are folded: adjacent same-error lines become one block,
and the same report from many ranks becomes one event with a count and ranks.

The detectors live in `frameworks/`, one module per family of words:
`traceback` (the launcher-prefix splitter and report plumbing every family shares,
and Python/IPython/Lua tracebacks), `cuda_runtime` (CUDA error lines, library
statuses, out-of-memory reports of every framework, device asserts), `arch` (a GPU
the build or toolchain cannot run on), `torch` (DataLoader workers, torchrun),
`containers` (NGC container banners) and `native_crash` (fatal signals, aborts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..knowledge import MESSAGE_MIN, cuda_errors, data_rows, shell_signal_words
from ..model import Event
from ..text import Line, TextDoc
from .frameworks.arch import gpu_arch, kernel_resources
from .frameworks.containers import container_banner, container_driver
from .frameworks.cuda_runtime import (
    allocator_stats,
    cuda_error_report,
    device_assert,
    gpu_oom,
    host_alloc,
    library_error,
    version_mismatch,
)
from .frameworks.native_crash import failed_assertion, fatal_signal
from .frameworks.torch import workers
from .frameworks.traceback import Context, Found, Prefixed, frame_line, lua_traceback, prefixed, python_traceback

NAME = "framework-log"
ANCHORS: tuple[bytes, ...] = (
    b"Traceback (most recent call last)", b"stack traceback:",
    b'", line ', b'",line ', b"File /", b"File ~", b"Cell In[", b"Input In [", b"<ipython-input-",  # headless ones
    b"During handling of the above exception", b"The above exception was the direct cause",
    b"CUDA error", b"CUDA Error", b"cuda error", b"CUDA failure", b"Cuda failure", b"cuda runtime error",
    b"CUDA_ERROR_", b"cudaError", b"THCudaCheck FAIL", b"in CUDA queue", b"Out of memory in cu",
    b"illegal memory access", b"no kernel image is available", b"unspecified launch failure",
    b"device-side assert", b"uncorrectable ECC error", b"too many resources requested",
    b"launch timed out", b"illegal instruction was encountered", b"misaligned address",
    b"driver version is insufficient", b"invalid device function",
    b"out of memory", b"out of resource: ", b"OutOfMemoryError", b"Allocation on device", b"RESOURCE_EXHAUSTED",
    b"OOM when allocating", b": OutOfMemory", b"DefaultCPUAllocator: ", b"for an array with shape",
    b"posix_memalign(",
    b"which is not supported by this container", b"but CUDA failed to initialize",  # NGC containers' entrypoint
    b"on an incompatible device, expecting compute",  # TensorRT engines
    b"with CUDA capability sm_", b"PyTorch no longer supports this GPU", b"The minimum required Cuda capability",
    b"which is of cuda capability",
    b"Assertion `", b"] Assertion ",
    b"_STATUS_", b"NVRTC_ERROR_", b"NV_ENC_ERR_", b"CUBLAS failure", b"Failed to get convolution algorithm",
    b"CUFFT_",
    b"cuBLAS API failed", b"CUBLAS error", b"cuBLAS error", b"CUDNN error", b"cuDNN error", b"cuFFT error",
    b"CUFFT error", b"cuSOLVER error", b"CUSOLVER error", b"cuSPARSE error", b"CUSPARSE error", b"CURAND error",
    b"cuRAND error", b"cuTENSOR error", b"CUTENSOR error", b"NVJPEG Error", b"NVJPEG error", b"nvJPEG error",
    b"NVRTC Error", b"NVRTC error", b"nvrtc error", b"when calling `cublas", b"when calling 'cublas",
    b"cusolverDn", b"cusolverSp", b"cufftExec", b"cufftPlan", b"cublasCreate", b"gemm failed", b"GEMM failed",
    b"curandGenerate", b"cusparseX",  # a library call said to have failed (cuda_runtime._LIB_CALL_FAILED)
    b"Found no NVIDIA driver", b"NVIDIA driver on your system is too old", b"nvidia driver is too old",
    b"required nvenc API version", b"minimum required Nvidia driver", b"CUDA initialization failure",
    b"libcuda.so.1: cannot open", b"libcuda.so: cannot open", b": cannot open shared object file",
    b"encountered in worker", b"encountered in DataLoader worker", b"is killed by signal: ", b"exited unexpectedly",
    b"failed (exitcode: ", b"ChildFailedError:", b" terminated with signal SIG", b" terminated with exit code ",
    b"Fatal Python error: ", b"received by PID", b"*** Aborted at", b"SIGSEGV", b"SIGBUS", b"SIGABRT",
    b"SIGILL", b"SIGFPE", b"Segmentation fault", b"Bus error", b"Aborted", b"Illegal instruction",
    b"Floating point exception", b"terminate called",
    # a shell's signal words in its users' languages (data/shell-signals.tsv)
    *sorted(word.encode() for word in shell_signal_words()),
    b"Exception Code: 0x", b"Exception code: 0x", b"exception code 0x", b"exit status 0xc", b"exit status 0xC",
    b"exception 0xc", b"exception 0xC", b"Exception 0xc", b"Exception 0xC", b"1844674407",  # native_crash._WINDOWS
    b"exit status 0xe", b"exit status 0xE",
    b"(0xC0000", b"(0xc0000", b" 322122", b" -10737",  # a Windows crash status in decimal (native_crash._WINDOWS)
    b"exception: access violation",  # ctypes' OSError for a native call that faulted (native_crash._WINDOWS)
    b"Error in `",  # glibc's report of a corrupt heap (native_crash._HEAP_ERROR), and its bare form since glibc 2.26
    b"double free or corruption", b"corrupted size vs", b"corrupted double-linked", b"(): invalid ",
    b"(): corrupted ", b"(): memory corruption", b"(): unaligned ", b"(): double free", b"(): mismatching",
    b"(): smallbin ",
    b"(Triggered internally at", b"This container was built for NVIDIA Driver Release", b"== cudaSuccess (",
    # PyTorch's TORCH_WARN suffix: the warning before it often quotes a CUDA error
    b"version incompatibility", b"but source was compiled with", b"were compiled with different CUDA versions",
    b"version mismatch: compiled with",
    b"Resource exhausted: Out", b"Out of memory allocating", b"Allocator fail", b"out_of_memory",
    b"out of memory to allocate", b"Failed to allocate memory for requested buffer",
    b"GPUs or newer", b"Your GPU does not support ", b"only supports devices of CUDA Capability",
    b") is not supported on CUDA", b"The GPU architecture in your current machine",
    b"ran into an error", b"for compute capability",
    b"is not defined for option 'gpu-name'", b"is not defined for option 'gpu-architecture'",
    b"Unsupported gpu architecture", b"Unsupported .version", b"is higher than default SM version",
    b"unable to write to file </torch", b"unable to open shared memory object </torch",
    b"LargestFreeBlock:",  # TensorFlow's allocator statistics (cuda_runtime.allocator_stats)
)
ANCHORS += tuple(sorted({e.message.encode() for e in cuda_errors()
                         if e.message and len(e.message) >= MESSAGE_MIN}))
"""Every CUDA error is found by its message too, whatever wording surrounds it (`Error 804: ...`)."""
ANCHORS += tuple(sorted({row["anchor"].encode() for row in data_rows("assertion-failures.tsv")} - set(ANCHORS)))
"""A program's own failed assertion, by the words each wording holds (data/assertion-failures.tsv)."""

BLOCK_GAP = 6
"""Same-error reports at most this many lines apart form one block."""


# ---------------------------------------------------------------- dispatch and folding

_DETECTORS: tuple[Callable[[Context, Line, Prefixed], list[Found]], ...] = (
    python_traceback, lua_traceback, gpu_arch, device_assert, kernel_resources, library_error, version_mismatch,
    host_alloc, gpu_oom, allocator_stats, workers, container_driver, container_banner, cuda_error_report, fatal_signal,
)
"""Tried in order on each candidate line; the first that recognises it wins."""


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """Events from the candidate lines of one input (see the module docstring)."""
    ctx = Context(doc)
    found: list[Found] = []
    for line in lines:
        pre = prefixed(line)
        if ctx.taken("python-exception", line) and frame_line(pre.body):
            continue  # a frame of a traceback already read (frames are anchors only to start headless ones)
        for detector in _DETECTORS:
            try:
                hits = detector(ctx, line, pre)
            except (ValueError, IndexError, KeyError, OverflowError):
                hits = []
            if hits:
                if detector is not fatal_signal and (asserted := failed_assertion(ctx, line, pre)) is not None:
                    hits = [*hits, asserted]  # an assertion that names the error it checked: the abort's place too
                for hit in hits:
                    if pre.tag:
                        hit.tags.add(pre.tag)
                found.extend(hits)
                break
    for item in _fold(found):
        yield _event(doc, item)


def _fold(found: list[Found]) -> list[Found]:
    """One block per burst of the same report; one event per report repeated elsewhere."""
    kept: list[Found] = []
    by_key: dict[tuple, Found] = {}
    for item in sorted(found, key=lambda f: f.first.number):
        earlier = by_key.get(item.key) if item.key else None
        if earlier is None:
            by_key[item.key] = item
            kept.append(item)
            continue
        earlier.count += 1
        earlier.tags |= item.tags
        if item.first.number - earlier.last.number <= BLOCK_GAP and item.last.number > earlier.last.number:
            earlier.last = item.last
        for name, value in item.fields.items():
            earlier.fields.setdefault(name, value)
    return kept


def _event(doc: TextDoc, item: Found) -> Event:
    fields = dict(item.fields)
    ranks = sorted(int(tag[4:]) for tag in item.tags if tag.startswith("rank") and tag[4:].isdigit())
    processes = sorted(tag for tag in item.tags if not tag.startswith("rank"))
    if ranks:
        fields["ranks"] = ranks
        if len(ranks) == 1:
            fields.setdefault("rank", ranks[0])
    if processes:
        fields["processes"] = processes
    fields = {k: v for k, v in fields.items() if v is not None}
    clock = "wall" if item.time else None
    return doc.event(item.kind, item.first, fields, last=item.last if item.last.number > item.first.number else None,
                     time=item.time, clock=clock, count=item.count)
