"""CUDA runtime and driver words every framework prints: error lines, library statuses, out of memory.

CUDA errors by name, number or message (with the API, file:line, GPU and host the
report names, and the `ggml_...: op failed` line llama.cpp/ggml prints above one),
driver phrases (no driver, a driver too old), device-side asserts, cuBLAS/cuDNN/
cuFFT/... statuses, runtime libraries of another version than the build's (PyTorch,
XLA/TensorFlow, torchvision), and memory exhausted: GPU out-of-memory in PyTorch's,
TensorFlow's, JAX/XLA's, TensorRT's, RAPIDS', CuPy's and PhysX's words, and the host
allocations PyTorch and NumPy report.
"""

from __future__ import annotations

from typing import Any

import regex

from ... import later
from ...knowledge import (
    CONDITIONAL,
    LibraryStatus,
    cuda_error_fields,
    cuda_error_kind,
    find_cuda_error,
    library_status,
    library_statuses,
)
from ...text import Line
from .traceback import Context, Found, Prefixed, block_text, continuation, exception_line, frames_before, prefixed

# ---------------------------------------------------------------- CUDA errors (and driver errors)

_CUDA_CONTEXT = later.compile(r"(?i)cuda|cublas|cudnn|\bgpu\b|\bTHC|ggml")
_DRIVER_PHRASES = later.compile(
    r"Found no NVIDIA driver on your system"
    r"|NVIDIA driver on your system is too old(?: \(found version (?P<found>\d+)\))?"
    r"|(?i:your nvidia driver is too old)"  # ollama, llama.cpp loaders
    r"|Driver does not support the required nvenc API version\. Required: (?P<required>[\d.]+) Found: (?P<found>[\d.]+)"
    r"|The minimum required Nvidia driver for nvenc is (?P<required>[\d.]+) or newer"  # FFmpeg's NVENC
    r"|libcuda\.so(?:\.1)?: cannot open shared object file"  # no driver in the machine or container
    # a CUDA runtime library of the version the program was built for is missing (built for CUDA 11, run where
    # CUDA 12's are: qdrant/fastembed#238, milvus-io/milvus#50025, autogluon/autogluon#1112), cuDNN's included
    # (ONNX Runtime's CUDA provider: `libcudnn.so.8: cannot open shared object file`, microsoft/foundry-dev-tools#75);
    # TensorFlow's "Could not load dynamic library ...; dlerror: ..." is its harmless probe when no GPU is wanted
    r"|(?<!dlerror: )lib(?:cudart|cublasLt|cublas|cusolver|cufft|curand|cusparse|nvrtc|nvJitLink|cudnn(?:_\w+)?)"
    r"\.so(?:\.[\d.]+)?: "
    r"cannot open shared object file"
)
_API = later.compile(
    r"expr=(?P<a>[A-Za-z_]\w*)|failed call to (?P<a>[A-Za-z_]\w*)|when calling `(?P<a>[A-Za-z_]\w*)"
    r"|in function (?P<f>[A-Za-z_]\w*)|(?P<a>cu[A-Z]\w+|cuda[A-Z]\w+)\(|\((?P<f>[A-Za-z_]\w*) at \S+:\d+\)"
)
_FILE_LINE = (
    later.compile(r"file=(?P<file>(?:(?!file=).){1,400}?)\s*+;?+\s*+line=(?P<line>\d+)"),  # a path ends by the next
    later.compile(r"(?P<file>(?<![^\s:'\"(\[])(?:[A-Za-z]:)?[^\s:'\"(\[]+\.(?:cu|cuh|cpp|cc|c|h|hpp|py|lua)):"
                  r"(?P<line>\d+)"),
)
_GPU_INDEX = later.compile(r"GPU=(?P<i>\d{1,3})\b|current device: (?P<i>\d+)|device ordinal (?P<i>\d+)")
_HOSTNAME = later.compile(r"hostname=(?P<h>[\w.\-]+)")
_GGML_OP = later.compile(r"^ggml_\w+: (?P<op>\S+) failed\s*$")
_RANK = later.compile(r"\bRank (?P<r>\d+)\]|local_rank: (?P<r>\d+)")


def _call_site(block: str) -> dict[str, Any]:
    """API, function, file:line, GPU and host a CUDA or library error report names."""
    fields: dict[str, Any] = {}
    for match in _API.finditer(block):
        if match["a"] and "api" not in fields:
            fields["api"] = match["a"]
        if match["f"] and "function" not in fields:
            fields["function"] = match["f"]
    if where := next(filter(None, (pattern.search(block) for pattern in _FILE_LINE)), None):
        fields["file"], fields["file_line"] = where["file"].strip(), int(where["line"])
    if gpu := _GPU_INDEX.search(block):
        fields["gpu_index"] = int(gpu["i"])
    if host := _HOSTNAME.search(block):
        fields["host"] = host["h"]
    if rank := _RANK.search(block):
        fields["rank"] = int(rank["r"])
    return fields


def cuda_error_report(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    body = pre.body
    record, number = find_cuda_error(body)
    phrase = _DRIVER_PHRASES.search(body)
    if record is None and phrase is None:
        return []
    if (record is not None and not _CUDA_CONTEXT.search(body)
            and (record.cause is None or len(record.message or "") < 20)):
        return []
    last, first = continuation(ctx, line), line
    fields: dict[str, Any] = _call_site("\n".join(block_text(ctx, line, last)))
    before = ctx.doc.preceding(line, 1)
    if before and (op := _GGML_OP.match(prefixed(before[0]).body)):
        first, fields["op"] = before[0], op["op"]
    elif exception_line(body):
        first, fields["top_frame"] = frames_before(ctx, line)
    if record is not None:
        fields.update(cuda_error_fields(record))
        if number is not None:
            fields["number"] = number
    if phrase is not None:
        fields["message"] = phrase.group(0)
        if phrase["found"]:
            fields["driver_version_found"] = phrase["found"]
        if phrase["required"]:
            fields["driver_required"] = phrase["required"]
    kind = cuda_error_kind(record.cause if record is not None else "driver-mismatch")
    key = (kind, fields.get("error") or fields.get("message"))
    return [Found(kind, first, last, fields, key, pre.time)]


# ---------------------------------------------------------------- device asserts

_ASSERT = later.compile(
    r"(?P<file>(?<![^\s:])[^\s:]+\.cuh?):(?P<line>\d+): (?P<func>.*?):?\s*block: \["
    r"(?P<block>[\d, ]+)\],\s*thread: \[(?P<thread>[\d, ]+)\]"
    r"\s*Assertion `?(?P<cond>.*?)`? failed"
    r"|(?P<file>(?<![^\s:])[^\s:]+\.cuh?):(?P<line>\d+):? Assertion `(?P<cond>.*?)` failed"
)
"""A device-side assert as CUDA prints it (with block and thread), or as a framework's kernel macro prints it from a
.cu file (Paddle's PADDLE_ENFORCE in kernels); pasted into Markdown the backticks are often lost."""
_BLOCK_ASSERT = later.compile(r"block: \[(?P<block>[\d, ]++)\],\s*+thread: \[(?P<thread>[\d, ]++)\]"
                              r"\s*+Assertion `?(?P<cond>.{0,500}?)`? failed")
"""The same with the file and line before the kernel's name cut off (an issue title, a paste): read from its block
coordinates, which no other line holds, at the one place they stand; the kernel's name is the words before them."""
ASSERT_GROUPS = ("file", "line", "func", "block", "thread", "cond")


def device_assert(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    groups = _assert_groups(pre.body)
    if groups is None:
        return []
    fields = {
        "file": groups["file"], "file_line": int(groups["line"]) if groups["line"] else None,
        "function": (groups["func"] or "").strip()[:300] or None,
        "block": groups["block"], "thread": groups["thread"], "assertion": groups["cond"],
    }
    fields = {k: v for k, v in fields.items() if v is not None}
    key = ("device-assert", groups["file"], groups["line"], groups["cond"])
    return [Found("device-assert", line, line, fields, key, pre.time)]


def _assert_groups(body: str) -> dict[str, str | None] | None:
    if match := _ASSERT.search(body):
        return {name: match[name] for name in ASSERT_GROUPS}
    at = body.find("block: [")
    if at < 0 or not (match := _BLOCK_ASSERT.match(body, at)):
        return None
    kernel = body[:at].rstrip(" :").rsplit(": ", 1)[-1].strip()
    return {"file": None, "line": None, "func": kernel or None, "block": match["block"], "thread": match["thread"],
            "cond": match["cond"]}


# ---------------------------------------------------------------- cuBLAS / cuDNN

LIBRARY_STATUS = later.compile(
    r"\b(?P<status>(?P<lib>CUBLAS|CUDNN|CUFFT|CUSOLVER|CUSPARSE|CURAND|CUTENSOR|NVJPEG)_STATUS_[A-Z0-9_]+)"
    r"|\b(?P<status>(?P<lib>NVRTC)_ERROR_[A-Z0-9_]+)|\b(?P<status>(?P<lib>NV_ENC)_ERR_[A-Z0-9_]+)"
    r"|\b(?P<status>(?P<lib>CUFFT)_(?:" + "|".join(sorted(
        {s.name[len("CUFFT_"):] for s in library_statuses() if s.library == "cufft"}, key=len, reverse=True)) + r"))\b"
)
"""A status by name: every library's `<LIB>_STATUS_*` (cuFFT names its results `CUFFT_*`, NVRTC `NVRTC_ERROR_*`,
NVENC `NV_ENC_ERR_*`)."""
_STATUS_SUFFIX = later.compile(
    r"\b(?P<suffix>[A-Z][A-Z_]{3,40}+) when calling [`'\u2018\u2019\"]?(?P<lib>cublas|cusolver|cusparse|cufft|curand)")
r"""A status named without its library's prefix before the call that returned it: PyTorch prints
`CUBLAS_STATUS_NOT_SUPPORTED when calling \`cublasLtMatmul...\``, and a translated or retyped paste keeps only
`NOT_SUPPORTED when calling 'cublasLtMatmulAlgoGetHeuristic'` (Comfy-Org/ComfyUI#4556): the call's prefix names the
library (cuFFT names its results `CUFFT_*`)."""
_LIB_NUMBER = later.compile(
    r"(?i)\b(?P<lib>cublas(?:Lt)?|cudnn|cufft|cusolver|cusparse|curand|cutensor|nvjpeg|nvrtc)\b[\w ]{0,30}?"
    r"(?:status|error|failure|failed|result|code)\s*(?:[:=]\s*|with status\s*|code\s*)?\(?(?P<num>\d{1,4})\b"
    r"|\b(?P<lib>CUBLAS|CUDNN|CUFFT|CUSOLVER|CUSPARSE|CURAND)_STATUS_SUCCESS\s*\((?P<num>\d{1,4}) vs\. 0\)"
)
"""A status by number, as libraries and their callers print it: `CUBLAS failure 13`, `cuBLAS API failed with
status 15`, `cuDNN error 4`, `CURAND error 201`, `NVJPEG Error (6)`."""
_CUDNN_INIT = later.compile(r"Failed to get convolution algorithm\. This "
                            r"is probably because cuDNN failed to initialize")
_LIB_GAVE_UP = later.compile(r"\b(?P<lib>cublasLt|cuBLASLt|cublas|cuBLAS) ran into an error")
"""bitsandbytes' words for a cuBLASLt call that failed without a status it prints (`Exception: cublasLt ran into
an error!`): its int8 matmul on a GPU or build its kernels do not support."""
_LIB_CALL_FAILED = later.compile(
    r"(?<![\w.])(?P<call>(?P<lib>cublas(?:Lt)?|cusolver|cufft|curand|cusparse|cutensor)(?:Dn|Sp|Rf|Mg|Xt)?[A-Z]\w{1,40}+)"
    r"(?:\(\))? (?:failed|FAILED)\b")
"""A library call named and said to have failed, with no status printed (Fortran and C codes' own checks:
QE-GPU's `zhegvdx_gpu error: cusolverDnZpotrf failed!`, Yambo's `[SERIAL_lin_system_gpu]cusolverDnCgetrs failed`):
the entry point's prefix names the library (CUDA's library APIs: cusolverDn*, cublas*, cufft*, ...)."""
_NODE = later.compile(r"\{\{node (?P<node>[^}]+)\}\}")


def library_name(written: str) -> str:
    """The library's name in data/library-status.tsv: cuBLASLt reports in cuBLAS's numbering; NVENC's statuses
    are `NV_ENC_ERR_*`."""
    written = written.lower()
    return "cublas" if written.startswith("cublas") else written.replace("_", "")


def _bare_status(body: str) -> LibraryStatus | None:
    """The status a line names without its library's prefix, before the call that returned it."""
    if (bare := _STATUS_SUFFIX.search(body)) is None:
        return None
    prefix = "CUFFT_" if bare["lib"] == "cufft" else f"{bare['lib'].upper()}_STATUS_"
    return library_status(library_name(bare["lib"]), prefix + bare["suffix"])


def library_error(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    body = pre.body
    status = next((m for m in LIBRARY_STATUS.finditer(body) if not m["status"].endswith("_SUCCESS")), None)
    number = _LIB_NUMBER.search(body)
    if status:
        fields: dict[str, Any] = {"library": library_name(status["lib"]), "status": status["status"]}
    elif known := _bare_status(body) or (number and library_status(library_name(number["lib"]), number["num"])):
        fields = {"library": known.library, "status": known.name}
    elif _CUDNN_INIT.search(body):
        fields = {"library": "cudnn", "status": None, "reason": "cuDNN failed to initialize"}
    elif gave_up := _LIB_GAVE_UP.search(body):
        fields = {"library": library_name(gave_up["lib"]), "status": None, "reason": f"{gave_up['lib']} failed"}
    elif call := _LIB_CALL_FAILED.search(body):
        fields = {"library": library_name(call["lib"]), "status": None, "reason": f"{call['call']} failed"}
    else:
        return []
    if number:
        fields["number"] = int(number["num"])
    if fields.get("status") and (known := library_status(fields["library"], fields["status"])):
        fields.update(status_cause=known.cause, status_message=known.message)
    last = continuation(ctx, line)
    block = "\n".join(block_text(ctx, line, last))
    fields.update(_call_site(block))
    if node := _NODE.search(block):
        fields["node"] = node["node"]
    key = ("library-error", fields["library"], fields["status"])
    return [Found("library-error", line, last, fields, key, pre.time)]


# ---------------------------------------------------------------- runtime libraries of another version

_VERSION_MISMATCH = (
    # PyTorch: "cuDNN version incompatibility: PyTorch was compiled against (8, 7, 0) but found runtime version
    # (8, 5, 0)"
    later.compile(r"(?P<library>cuDNN|NCCL|cuBLAS) version incompatibility: (?P<framework>\w+) was compiled\s+against "
                  r"\((?P<built>[\d, ]+)\) but found runtime version \((?P<found>[\d, ]+)\)"),
    # XLA / TensorFlow stream executor: "Loaded runtime CuDNN library: 8.5.0 but source was compiled with: 8.6.0"
    later.compile(r"Loaded runtime (?P<library>CuDNN|cuDNN|cuBLAS|CUDA) library: (?P<found>[\d.]+) but source was "
                  r"compiled with: (?P<built>[\d.]+)"),
    # torchvision: "PyTorch and torchvision were compiled with different CUDA versions. PyTorch has CUDA Version=11.7
    # and torchvision has CUDA Version=11.8"
    later.compile(r"(?P<framework>PyTorch) and (?P<library>torchvision|torchaudio) were compiled with different CUDA "
                  r"versions\. PyTorch has CUDA Version=(?P<built>[\d.]+) and \w+ has CUDA Version=(?P<found>[\d.]+)"),
    # MegEngine: "cudnn version mismatch: compiled with 8101; detected 8204 at runtime" (the libraries' own version
    # numbers: 8101 is 8.1.1; Qsingle/MegEngine_CU11#2)
    later.compile(r"(?P<library>cudnn|cublas|nccl|cuda) version mismatch: compiled with (?P<built>\d+); detected "
                  r"(?P<found>\d+) at runtime"),
)
"""A framework saying a runtime library is not the version it was built with."""


def version_mismatch(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    for pattern in _VERSION_MISMATCH:
        if match := pattern.search(pre.body):
            fields = {k: v.replace(" ", "").replace(",", ".") if k in ("built", "found") else v
                      for k, v in match.groupdict().items() if v}
            fields["library"] = fields["library"].lower()
            key = ("library-version-mismatch", fields["library"], fields.get("built"), fields.get("found"))
            return [Found("library-version-mismatch", line, line, fields, key, pre.time)]
    return []


# ---------------------------------------------------------------- GPU out of memory

_OOM = later.compile(
    r"(?:CUDA|GPU|cuda)\s++out of memory|(?<!ray\.exceptions\.)(?<!cv::)(?<!in function ')OutOfMemoryError"
    r"|Allocation on device"
    r"|RESOURCE_EXHAUSTED:.{0,200}?(?:[Oo]ut of memory|allocat)|OOM when allocating"
    r"|\(GPU_\d+_bfc\) ran out of memory trying to allocate|MPS backend out of memory"
    r"|Resource exhausted: Out\b|Out of memory allocating [\d,]+ bytes|Failed to allocate memory for requested buffer"
    r"|(?<=(?:Cuda|Gpu|GPU|Device)\w{0,64})Allocator fail(?:ed)? to allocate memory"  # PhysX (Isaac Gym/Sim)
    r"|bad_alloc: out_of_memory|rmm::out_of_memory"  # RAPIDS memory manager (cuDF, cuML, XGBoost)
    r"|out of memory to allocate \d+ bytes \(total \d+ bytes\)"  # CuPy's memory pool before v8
    r"|Non-OK-status: Gpu\w++.{0,400}?status: \w++: out of memory"  # TensorFlow kernel launches
    r"|Error Code \d+: OutOfMemory\b"  # TensorRT's logger: "[E] 2: [executionContext.cpp::...] Error Code 2: ..."
)
"""The gaps inside a wording are bounded (200-400 characters, a kernel's name and arguments): unbounded, a line holding
its first words many times was scanned to its end from each copy. Ray's `ray.exceptions.OutOfMemoryError` is its
memory monitor's kill for host memory (sources/job_log.py), not the GPU's; OpenCV's `cv::OutOfMemoryError` is its
host allocator's (data/cause-phrases.tsv)."""
_SIZE = r"(?<!\d)(\d++(?:\.\d++)?+\s*+(?:[KMGTP]i?B|bytes|B))"
"""A size as allocators print it; read from the first digit only (so a long digit run costs one attempt)."""
_OOM_FIELDS: tuple[tuple[str, regex.Pattern], ...] = tuple(
    (name, later.compile(pattern))
    for name, pattern in (
        ("requested", r"[Tt]ried to allocate " + _SIZE),
        ("requested", r"trying to allocate " + _SIZE),
        ("gpu_index", r"\(GPU (\d+);|GPU (\d+) has a total"),
        ("total_capacity", _SIZE + r" total capacity|total capac(?:i)?ty of " + _SIZE),
        ("free", _SIZE + r" free\b|of which " + _SIZE + r" is free"),
        ("allocated", _SIZE + r" already allocated|" + _SIZE + r" is allocated by PyTorch"),
        ("reserved", _SIZE + r" reserved in total|" + _SIZE + r" is reserved by PyTorch"),
        ("process_in_use", r"this process has " + _SIZE + r" memory in use"),
        ("total_allocation", r"total allocation:\s*" + _SIZE),
        ("shape", r"tensor with shape\s*\[([^\]]*)\]"),
        ("device", r" on (/job:\S+|/device:\S+)"),
    )
)


_HOST_ALLOC = later.compile(
    r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory):\s*+you tried to allocate (?P<bytes>\d+) bytes"
    r"|Unable to allocate (?P<size>\d+(?:\.\d+)? [KMGTP]?i?B) for an array with shape"
    r"|posix_memalign\(&data, gAlignment, nbytes\) == 0\. 12 vs 0")
"""A host (CPU) allocation that failed: PyTorch's CPU allocator (`DefaultCPUAllocator: can't allocate memory: you
tried to allocate N bytes`, `not enough memory` on Windows; older releases wrote no blank after the colon,
stanford-futuredata/ColBERT#64; before them CPUAllocator.cpp's `posix_memalign(&data, gAlignment, nbytes) == 0. 12
vs 0`, 12 being ENOMEM: pyg-team/pytorch_geometric#604) and NumPy's `_ArrayMemoryError`."""


def host_alloc(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    if not (match := _HOST_ALLOC.search(pre.body)):
        return []
    requested = (int(match["bytes"]) if match["bytes"] else _bytes(match["size"].replace(" ", "")) if match["size"]
                 else None)
    fields = {"requested_bytes": requested, "message": match[0]}
    return [Found("host-alloc-failed", line, line, fields, ("host-alloc-failed", requested), pre.time)]


def gpu_oom(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    if not (said := _OOM.search(pre.body)) or CONDITIONAL.search(pre.body, 0, said.start()):
        return []  # none, or a hint of what to do should it happen
    last = continuation(ctx, line)
    block = "\n".join(block_text(ctx, line, last))
    fields: dict[str, Any] = {}
    for name, pattern in _OOM_FIELDS:
        if name not in fields and (match := pattern.search(block)):
            value = next(g for g in match.groups() if g is not None)
            fields[name] = int(value) if name == "gpu_index" else value.strip()
    if "requested" in fields:
        fields["requested_bytes"] = _bytes(fields["requested"])
    fields["framework"] = _framework(block)
    if "this is not a failure" in block:
        fields["retried"] = True  # TensorFlow's allocator warning: it fell back, nothing failed yet
    key = ("gpu-oom", fields.get("requested"), fields.get("gpu_index"), fields.get("retried"))
    return [Found("gpu-oom", line, last, fields, key, pre.time)]


_POOL_STAT = later.compile(r"^\s*+(?P<name>Limit|InUse|LargestFreeBlock):\s++(?P<bytes>\d++)\s*+$")
POOL_FULL = 0.95
"""Share of its limit from which an allocator's pool is full: TensorFlow's BFC allocator prints its statistics when an
allocation fails (BFCAllocator's DumpMemoryLog: `Limit:`, `InUse:`, ... `LargestFreeBlock:`), and a pasted report may
hold that table alone; a pool in use to its limit is the failure it reports (a memory_limit set on a virtual device
fills long before the GPU does)."""


def allocator_stats(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    """TensorFlow's allocator statistics, read at their last row, with a pool used to its limit: a GPU OOM."""
    if not (last := _POOL_STAT.match(pre.body)) or last["name"] != "LargestFreeBlock":
        return []
    table = [line, *ctx.doc.preceding(line, 8)]
    stats = {m["name"]: int(m["bytes"]) for each in table if (m := _POOL_STAT.match(each.text))}
    limit, in_use = stats.get("Limit", 0), stats.get("InUse", 0)
    if not limit or in_use < POOL_FULL * limit:
        return []
    first = next(each for each in reversed(table) if (m := _POOL_STAT.match(each.text)) and m["name"] == "Limit")
    fields = {"framework": "tensorflow", "limit_bytes": limit, "in_use_bytes": in_use,
              "largest_free_bytes": stats.get("LargestFreeBlock")}
    return [Found("gpu-oom", first, line, fields, ("gpu-oom", "allocator-stats", limit, in_use), pre.time)]


def _bytes(size: str) -> int | None:
    match = regex.match(r"(\d+(?:\.\d+)?)\s*([KMGTP]?)(i?)B?", size.replace("bytes", "B"))
    if not match:
        return None
    power = " KMGTP".index(match[2] or " ")
    return int(float(match[1]) * (1024 if match[3] or power else 1000) ** power)


def _framework(text: str) -> str | None:
    for name, marker in (("jax", "XlaRuntimeError"), ("jax", "jaxlib"), ("tensorflow", "tensorflow"),
                         ("tensorflow", "OOM when allocating"), ("pytorch", "PyTorch"), ("pytorch", "torch")):
        if marker in text:
            return name
    return None
