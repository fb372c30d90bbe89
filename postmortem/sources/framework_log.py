"""Logs that training and inference jobs write: PyTorch, TensorFlow, JAX/XLA, Lua Torch,
ONNX Runtime, llama.cpp/ggml/ollama, vLLM, ComfyUI, torchrun.

Each framework words the same few failures its own way (a CUDA error, GPU memory
exhausted, a kernel without code for this GPU, a native crash, a dead worker).
Every candidate line goes through a list of detectors, first match wins; a
detector reads the lines that belong to its report (a traceback, an error's
continuation lines, a faulthandler dump) and returns a `_Found`. At the end,
reports of one incident are folded: adjacent same-error lines become one block,
and the same report from many ranks becomes one event with a count and ranks.

Lines may carry launcher prefixes (`[rank3]:`, `[default0]:`, `rank3:`,
`(VllmWorker TP1 pid=409) ERROR 09-14 03:15:31 [file.py:596]`, glog and ISO
timestamps, `> ` quotes); `_split_prefix` takes them off and keeps the rank or
process tag so interleaved ranks do not mix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import regex

from ..knowledge import (
    MESSAGE_MIN,
    WINDOWS_EXCEPTIONS,
    CudaError,
    cuda_error,
    cuda_errors,
    data_rows,
    find_cuda_error,
    library_status,
    library_statuses,
    message_starting,
    signal_name,
)
from ..model import Event
from ..text import Line, TextDoc

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
    b"which is not supported by this container", b"but CUDA failed to initialize",  # NGC containers' entrypoint
    b"on an incompatible device, expecting compute",  # TensorRT engines
    b"with CUDA capability sm_", b"PyTorch no longer supports this GPU", b"The minimum required Cuda capability",
    b"Assertion `", b"] Assertion ",
    b"_STATUS_", b"CUBLAS failure", b"Failed to get convolution algorithm", b"CUFFT_",
    b"cuBLAS API failed", b"CUBLAS error", b"cuBLAS error", b"CUDNN error", b"cuDNN error", b"cuFFT error",
    b"CUFFT error", b"cuSOLVER error", b"CUSOLVER error", b"cuSPARSE error", b"CUSPARSE error", b"CURAND error",
    b"cuRAND error",
    b"Found no NVIDIA driver", b"NVIDIA driver on your system is too old", b"nvidia driver is too old",
    b"required nvenc API version", b"minimum required Nvidia driver", b"CUDA initialization failure",
    b"libcuda.so.1: cannot open", b"libcuda.so: cannot open",
    b"encountered in worker", b"encountered in DataLoader worker", b"is killed by signal: ", b"exited unexpectedly",
    b"failed (exitcode: ", b"ChildFailedError:",
    b"Fatal Python error: ", b"received by PID", b"*** Aborted at", b"SIGSEGV", b"SIGBUS", b"SIGABRT",
    b"SIGILL", b"SIGFPE", b"Segmentation fault", b"Bus error", b"Aborted", b"Illegal instruction",
    b"Floating point exception", b"terminate called",
    b"Exception Code: 0x", b"Exception code: 0x", b"exception code 0x", b"exit status 0xc", b"exit status 0xC",
    b"(0xC0000", b"(0xc0000",
    b"(Triggered internally at", b"This container was built for NVIDIA Driver Release", b"== cudaSuccess (",
    # PyTorch's TORCH_WARN suffix: the warning before it often quotes a CUDA error
    b"version incompatibility", b"but source was compiled with", b"were compiled with different CUDA versions",
    b"Resource exhausted: Out", b"Out of memory allocating", b"Allocator fail", b"out_of_memory",
    b"out of memory to allocate", b"Failed to allocate memory for requested buffer",
    b"GPUs or newer", b"Your GPU does not support ", b"ran into an error", b"for compute capability",
    b"is not defined for option 'gpu-name'",
    b"Unsupported gpu architecture", b"Unsupported .version", b"is higher than default SM version",
    b"unable to write to file </torch", b"unable to open shared memory object </torch",
)
ANCHORS += tuple(sorted({e.message.encode() for e in cuda_errors()
                         if e.message and len(e.message) >= MESSAGE_MIN}))
"""Every CUDA error is found by its message too, whatever wording surrounds it (`Error 804: ...`)."""
_ASSERTIONS = tuple((row["id"], regex.compile(row["pattern"])) for row in data_rows("assertion-failures.tsv"))
"""How programs report a failed assertion of their own before they abort (data/assertion-failures.tsv)."""
ANCHORS += tuple(sorted({row["anchor"].encode() for row in data_rows("assertion-failures.tsv")} - set(ANCHORS)))

FOLLOW_LIMIT = 400
"""Most lines one report (a traceback, a dump) may span."""
BLOCK_GAP = 6
"""Same-error reports at most this many lines apart form one block."""


# ---------------------------------------------------------------- prefixes

_PREFIX_PIECES = regex.compile(
    r"""
    \G(?:                                                   # only where the last piece ended (linear under search)
      \[(?:rank|default)(?P<rank>\d+)\]:\s?
    | rank(?P<rank>\d+):\s
    | \((?P<proc>[A-Za-z][\w.\- ]*?\bpid=\d+)\)\s+
    | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\][ ]?
    | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:
    | >[ ]?
    | (?P<svc>[A-Za-z][\w.\-]*)[ ]+\|[ ]                   # docker compose: "vllm-1  | "
    | From[ ]worker[ ](?P<worker>\d+):\s*                 # Julia Distributed
    | (?P<task>\d{1,4}):[ ]                                 # srun --label: "0: "
    | [ \t]*(?P<iso>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?)(?:Z|[+-]\d\d:?\d\d)?:?[ ]?
    | -\s+[\w.]+\s+-\s+[A-Z]+\s+-\s+
    | \[?[IWEF](?:\d{4}\s+\d\d:\d\d:\d\d\.\d+)?\s+(?:\d+\s+)?[\w/.\-]+:\d+\][ ]?
    )""",
    regex.VERBOSE,
)


@dataclass(frozen=True)
class _Prefixed:
    """A line with its launcher/log prefix taken off."""

    body: str
    tag: str | None
    """The rank or process the line belongs to, when the prefix says."""
    shape: int
    """How many prefix pieces were removed (lines of one report share it)."""
    time: datetime | None


def _split_prefix(text: str) -> _Prefixed:
    pos, tag, pieces, moment = 0, None, 0, None
    while pieces < 8:
        match = _PREFIX_PIECES.match(text, pos)
        if not match or match.end() == pos:
            break
        if match.group("rank"):
            tag = f"rank{match.group('rank')}"
        elif match.group("proc"):
            tag = match.group("proc")
        elif match.group("svc") or match.group("worker") or match.group("task"):
            tag = match.group("svc") or f"worker{match.group('worker') or match.group('task')}"
        elif match.group("iso") and moment is None:
            moment = _iso_time(match.group("iso"))
        pos, pieces = match.end(), pieces + 1
    return _Prefixed(text[pos:], tag, pieces, moment)


def _prefixed(line: Line) -> _Prefixed:
    """The line's prefix facts (rank, process, time: read where it was written) and its body (read
    from the normalised text, so quoting and gutters never hide a report)."""
    written = _split_prefix(line.original)
    if line.raw is None:
        return written
    return dataclasses.replace(written, body=_split_prefix(line.text).body)


def _iso_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace(",", ".").replace("_", " "))
    except ValueError:
        return None


# ---------------------------------------------------------------- found reports

@dataclass
class _Found:
    """One report before folding: its kind, line span and typed fields."""

    kind: str
    first: Line
    last: Line
    fields: dict[str, Any]
    key: tuple
    time: datetime | None = None
    count: int = 1
    tags: set[str] = field(default_factory=set)
    """Rank or process tags of the lines folded into this report."""


@dataclass
class _Context:
    """What the detectors share while one input is parsed."""

    doc: TextDoc
    consumed: dict[str, set[int]] = field(default_factory=dict)
    """Line numbers already part of a report, per kind, so a dump is not reported twice."""

    def taken(self, kind: str, line: Line) -> bool:
        return line.number in self.consumed.get(kind, ())

    def take(self, kind: str, lines: list[Line]) -> None:
        self.consumed.setdefault(kind, set()).update(l.number for l in lines)


def _same_source(head: _Prefixed, other: _Prefixed) -> bool:
    return head.tag == other.tag


def _follow(ctx: _Context, line: Line, limit: int) -> Iterator[tuple[Line, _Prefixed]]:
    """The lines after `line` that come from the same rank or process, read lazily
    in small steps (most reports end within a few lines)."""
    head = _prefixed(line)
    current, left = line, limit
    while left > 0:
        step = ctx.doc.following(current, min(left, 16), 64 * 1024)
        if not step:
            return
        for nxt in step:
            pre = _prefixed(nxt)
            if _same_source(head, pre):
                yield nxt, pre
        current, left = step[-1], left - len(step)


_TAIL = regex.compile(
    r"""^(?:CUDA\ kernel\ errors\ might|For\ debugging\ consider\ passing|Compile\ with\ .TORCH_USE_CUDA_DSA
    |Search\ for\ .cuda|',\ please\ check|You\ can\ try\ to\ repro|BufferAssignment|\S+:\d+:\ CUDA\ error\s*$
    |Exception\ raised\ from|frame\ \#\d+|0\ successful\ operations|\d+\ derived\ errors)""",
    regex.VERBOSE,
)
_REPRO = regex.compile(r"^You can try to repro")
_NEW_RECORD = regex.compile(r"^(?:Traceback|During handling|The above exception|\S+(?:Error|Exception):)")


def _continuation(ctx: _Context, line: Line, limit: int = 40) -> Line:
    """The last line of an error message that spans several lines.

    Indented lines and the fixed hint lines frameworks append belong to the
    message; PyTorch's cuDNN repro snippet (blank lines included) does too.
    """
    last, repro, blanks = line, False, 0
    for nxt, pre in _follow(ctx, line, limit):
        body = pre.body
        if not body.strip():
            blanks += 1
            if not repro or blanks > 1:
                break
            continue
        blanks = 0
        if repro and not _NEW_RECORD.match(body):
            last = nxt
        elif (body[:1].isspace() and not body.lstrip().startswith('File "')) or _TAIL.match(body):
            repro = repro or bool(_REPRO.match(body))
            last = nxt
        else:
            break
    return last


def _block_text(ctx: _Context, first: Line, last: Line) -> list[str]:
    """The bodies (prefixes off) of the lines first..last, for reading fields."""
    count = last.number - first.number
    lines = [first] + ctx.doc.following(first, count, min(1 << 20, (count + 1) * 8192))
    return [_prefixed(l).body for l in lines]


# ---------------------------------------------------------------- python tracebacks

_TB_HEADER = regex.compile(r"Traceback \(most recent call last\)")  # IPython prints it without the colon
_PY_FRAME = regex.compile(r'^\s*File "(?P<file>[^"]+)",\s?line (?P<line>\d+)(?:,?\s?in (?P<func>\S.*))?$')
"""A traceback's frame line; indented by Python, flush left where a paste outside a code block lost the indent (and
without the blanks where it was retyped: `File "x.py",line 3439,in barrier`)."""
_IPY_FRAME = regex.compile(
    r"^(?:(?P<file>Cell In\[\d+\]), line (?P<line>\d+)(?:, in (?P<func>.+))?"
    r"|File (?P<file>\S.*?):(?P<line>\d+), in (?P<func>.+)"
    r"|(?P<file>Input In \[\d+\]), in (?P<func>.+)"
    r"|(?P<file><ipython-input-[\w-]+>|\S+\.pyx?) in (?P<func>[\w.<>]+)\(.*)$")
"""A frame of IPython's (Jupyter's, Colab's) traceback: `Cell In[14], line 28`, `File ~/x.py:129, in f(a, b)`,
`Input In [3], in <cell line: 1>()`, and IPython 7's `<ipython-input-5-..> in <module>` / `/x.py in f(a)`."""
_IPY_SOURCE = regex.compile(r"^\s*(?:-*> ?)?\d+\s")
"""The numbered source lines IPython prints under each frame (`---> 28 importer2 = ...`)."""
_EXC_LINE = regex.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_CHAIN = regex.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")


def _traceback(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    if ctx.taken("python-exception", line):
        return []
    chain: list[dict[str, Any]] = []
    frames: list[dict[str, Any]] = []
    state = "frames"
    if _CHAIN.match(pre.body.strip()):  # a chain whose first traceback was cut above its exception line
        if not (cut := _cut_exception(ctx, line)):
            return []
        chain.append(cut)
        state = "chain"
    elif not _TB_HEADER.search(pre.body):
        if not (first := _headless_start(ctx, line, pre)):
            return []
        frames.append(first)
    last, headers, read = line, [line], [line]
    after_frame = bool(frames)
    for nxt, p in _follow(ctx, line, FOLLOW_LIMIT):
        body = p.body
        read.append(nxt)
        if state == "frames":
            frame = _PY_FRAME.match(body) or _IPY_FRAME.match(body)
            if frame:
                frames.append(_frame_fields(frame))
                last, after_frame = nxt, True
            elif body[:1].isspace() or not body.strip() or _IPY_SOURCE.match(body):
                continue
            elif exc := _exception_line(body):
                chain.append({"exc_type": exc["type"], "message": (exc["msg"] or "").strip(), "frames": frames})
                frames, last, state = [], nxt, "after"
            elif after_frame:  # a frame's source line that lost its indent
                after_frame = False
            else:
                break
        elif state == "after":
            if _CHAIN.match(body):
                state, last = "chain", nxt
            elif _TB_HEADER.search(body) and chain:
                headers.append(nxt)
                state, last = "frames", nxt
            elif ((body[:1].isspace() or _TAIL.match(body)) and len(chain[-1]["message"]) < 2000
                  and nxt.number - last.number == 1):
                chain[-1]["message"] += "\n" + body.strip()
                last = nxt
            elif body.strip():
                break
        elif state == "chain":
            if _TB_HEADER.search(body):
                headers.append(nxt)
                state, last = "frames", nxt
            elif body.strip():
                break
    if not chain:
        return []
    ctx.take("python-exception", headers + [l for l in read if l.number <= last.number])
    final = chain[-1]
    top = [f"{f['file']}:{f['line']} in {f['function']}" for f in final["frames"][-5:]]
    fields = {
        "exc_type": final["exc_type"],
        "message": final["message"][:1000],
        "frames": final["frames"][-5:][::-1],
        "top_frame": top[-1] if top else None,
    }
    if len(chain) > 1:
        fields["chain"] = [{"exc_type": c["exc_type"], "message": c["message"][:300]} for c in chain]
    key = ("python-exception", final["exc_type"], _digits_off(final["message"][:200]), tuple(top))
    return [_Found("python-exception", line, last, fields, key, pre.time)]


def _headless_start(ctx: _Context, line: Line, pre: _Prefixed) -> dict[str, Any] | None:
    """The first frame of a traceback pasted without its `Traceback (most recent call last):` line: a frame line
    with no frame, source line or header in the two lines before it."""
    frame = _PY_FRAME.match(pre.body) or _IPY_FRAME.match(pre.body)
    if not frame or any(_PY_FRAME.match(b := _prefixed(l).body) or _IPY_FRAME.match(b) or _TB_HEADER.search(b)
                        for l in ctx.doc.preceding(line, 2)):
        return None
    return _frame_fields(frame)


def _cut_exception(ctx: _Context, line: Line) -> dict[str, Any] | None:
    """The `Type: message` line just above a "During handling of the above exception" line, when nothing above it
    was read as its traceback (a paste that starts at the first exception)."""
    before = [l for l in ctx.doc.preceding(line, 3) if _prefixed(l).body.strip()]
    if not before or ctx.taken("python-exception", before[-1]):
        return None
    if not (exc := _exception_line(_prefixed(before[-1]).body)):
        return None
    return {"exc_type": exc["type"], "message": (exc["msg"] or "").strip(), "frames": []}


def _frame_fields(frame: regex.Match) -> dict[str, Any]:
    return {"file": frame["file"], "line": int(frame["line"]) if frame["line"] else None,
            "function": frame["func"] or ""}


def _exception_line(body: str) -> regex.Match | None:
    """The `Type: message` line that ends a traceback (dotted names or the usual suffixes)."""
    match = _EXC_LINE.match(body.strip())
    if match and ("." in match["type"] or _EXCEPTION_NAME.search(match["type"])):
        return match
    return None


_EXCEPTION_NAME = regex.compile(r"(?:Error|Exception|Exit|Interrupt|Failure|Fault|Warning)$")


def _digits_off(text: str) -> str:
    return regex.sub(r"\d+", "#", text)


_LUA_FRAME = regex.compile(r"^\t(?P<frame>\S.*)$")


def _lua_traceback(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    """Lua (Torch7) errors: the message line, then `stack traceback:` and tab-indented frames."""
    if pre.body.strip() != "stack traceback:":
        return []
    before = ctx.doc.preceding(line, 1)
    if not before:
        return []
    message = _prefixed(before[0]).body.strip()
    frames, last = [], line
    for nxt, p in _follow(ctx, line, 60):
        if not (frame := _LUA_FRAME.match(p.body)):
            break
        frames.append(frame["frame"])
        last = nxt
    fields = {"message": message[:1000], "frames": frames[:5], "top_frame": frames[0] if frames else None}
    return [_Found("lua-error", before[0], last, fields, ("lua-error", _digits_off(message[:200])), pre.time)]


def _frames_before(ctx: _Context, line: Line) -> tuple[Line, str | None]:
    """Where a traceback whose header was cut off begins, and its innermost frame.

    Logs quoted in issues and shipped by launchers often start mid-traceback; the
    frames just above an error line still say where it was raised.
    """
    head = _prefixed(line)
    first, top = line, None
    for earlier in reversed(ctx.doc.preceding(line, 8)):
        pre = _prefixed(earlier)
        if pre.tag != head.tag or not pre.body[:1].isspace():
            break
        first = earlier
        if top is None and (frame := _PY_FRAME.match(pre.body)):
            top = f"{frame['file']}:{frame['line']} in {frame['func'] or ''}"
    return (first, top) if top else (line, None)


# ---------------------------------------------------------------- GPU architecture

_ARCH_TORCH = regex.compile(
    r"(?:^\s*|:\s+)(?P<gpu>[A-Z][\w\- ]*?) with CUDA capability (?P<sm>sm_\d+[a-z]?) is not compatible"
)
_ARCH_SUPPORTED = regex.compile(r"supports CUDA capabilities (?P<list>(?:sm_\d+[a-z]?\s*)+)")
_ARCH_WANT = regex.compile(r"If you want to use the (?P<gpu>.+?) GPU with PyTorch")
_ARCH_OLD = regex.compile(
    r"Found GPU(?P<idx>\d+) (?P<gpu>.{1,100}?) which is of cuda capability (?P<cc>\d+\.\d+)\."  # bounded: no rescan
    r".{0,400}?minimum cuda capability (?:supported by this library|that we support) is (?P<min>\d+\.\d+)"
)
_ARCH_TF = regex.compile(
    r"device: (?P<idx>\d+), name: (?P<gpu>[^,]+), pci bus id: (?P<pci>[^,]+), compute capability: (?P<cc>\d+\.\d+)\)"
    r".*?minimum required Cuda capability is (?P<min>\d+\.\d+)"
)


_TOOLCHAIN_ARCH = regex.compile(
    r"Value '(?P<sm>sm_\d+[a-z]?)' is not defined for option 'gpu-name'"
    r"|nvcc fatal\s*:\s*Unsupported gpu architecture '(?P<sm>(?:compute|sm)_\d+[a-z]?)'"
)
"""ptxas or nvcc older than the GPU: it cannot build for that architecture (Triton, Inductor, JAX and
extension builds all call them)."""
_PTX_TARGET_ARCH = regex.compile(r"SM version specified by \.target is higher than default SM version assumed")
"""ptxas handed PTX whose `.target` is a newer architecture than the one it builds for (the GPU's, when a
program JIT-builds for the GPU it runs on): the PTX was written for newer GPUs than this one."""
_FEATURE_ARCH = regex.compile(
    r"(?P<feature>[A-Z][\w\-]{0,64}) only supports "  # a name, bounded: a long capital run is not rescanned per letter
    r"(?P<min_family>Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell) GPUs or newer"
)
_FEATURE_REFUSED = regex.compile(r"Your GPU does not support (?P<feature>[A-Z][\w]*(?: [A-Z]?[\w]+)?)!")
"""A library refusing this GPU for one feature without naming the oldest family it needs (bitsandbytes:
`ERROR: Your GPU does not support Int8 Matmul!`)."""
"""A library's kernels refusing the GPU's architecture (FlashAttention on Turing and older, or a build without the
GPU's own arch): `FlashAttention only supports Ampere GPUs or newer`."""
_EXTENSION_ARCH = regex.compile(
    r"(?i)(?:could not find|no) compatible (?P<feature>[\w\-]+) (?:extension|kernels?|binar(?:y|ies)|build) for "
    r"compute capability (?P<cc>\d+(?:\.\d)?)"
)
"""An extension that ships one build per architecture and has none for this GPU (tiny-cuda-nn and the like)."""
_PTX_TOO_NEW = regex.compile(r"Unsupported \.version (?P<ptx>\d+\.\d+); current version is '(?P<supported>\d+\.\d+)'")
"""PTX written for a newer ISA than the ptxas or driver that must compile it."""


_ENGINE_ARCH = regex.compile(r"engine plan file is generated on an incompatible device, expecting compute "
                            r"(?P<built>\d+\.\d+) got compute (?P<here>\d+\.\d+)")
"""TensorRT's refusal of an engine built on a GPU of another compute capability (an engine holds machine code for
the GPU it was built on only)."""


def _sm(capability: str) -> str:
    return "sm_" + capability.replace(".", "")


def _arch(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    body = pre.body
    if match := _ARCH_TORCH.search(body):
        fields: dict[str, Any] = {"gpu_name": match["gpu"].strip(), "sm": match["sm"], "framework": "pytorch"}
        last = line
        for nxt, p in _follow(ctx, line, 4):
            if supported := _ARCH_SUPPORTED.search(p.body):
                fields["supported_archs"] = supported["list"].split()
                last = nxt
            elif want := _ARCH_WANT.search(p.body):
                fields["gpu_name"] = want["gpu"].strip()
                last = nxt
    elif match := _TOOLCHAIN_ARCH.search(body):
        tool = "nvcc" if "nvcc" in body else "ptxas"
        fields = {"sm": match["sm"].replace("compute_", "sm_"), "tool": tool, "reason": f"{tool} cannot build for it"}
        last = line
    elif _PTX_TARGET_ARCH.search(body):
        fields = {"tool": "ptxas", "reason": "its PTX targets a newer GPU architecture than the one ptxas builds for"}
        return [_Found("arch-unsupported", line, line, fields, ("arch-unsupported", "ptx-target"), pre.time)]
    elif match := _EXTENSION_ARCH.search(body):
        cc = match["cc"] if "." in match["cc"] else f"{match['cc'][:-1]}.{match['cc'][-1]}"
        fields = {"feature": match["feature"], "sm": _sm(cc), "reason": f"no {match['feature']} build for {_sm(cc)}"}
        return [_Found("arch-unsupported", line, line, fields, ("arch-unsupported", match["feature"]), pre.time)]
    elif match := _FEATURE_REFUSED.search(body):
        fields = {"feature": match["feature"], "reason": f"{match['feature']} has no kernels for this GPU"}
        return [_Found("arch-unsupported", line, line, fields, ("arch-unsupported", match["feature"]), pre.time)]
    elif match := _FEATURE_ARCH.search(body):
        fields = {"feature": match["feature"], "min_family": match["min_family"],
                  "reason": f"{match['feature']} has no kernels for GPUs older than {match['min_family']}"}
        return [_Found("arch-unsupported", line, line, fields, ("arch-unsupported", match["feature"]), pre.time)]
    elif match := _ENGINE_ARCH.search(body):
        fields = {"sm": _sm(match["here"]), "built_for": _sm(match["built"]), "framework": "tensorrt",
                  "reason": f"a TensorRT engine built for {_sm(match['built'])} runs on that architecture only"}
        return [_Found("arch-unsupported", line, line, fields, ("arch-unsupported", "engine", match["built"]),
                       pre.time)]
    elif match := _PTX_TOO_NEW.search(body):
        fields = {"ptx_version": match["ptx"], "supported_ptx": match["supported"],
                  "message": f"PTX ISA {match['ptx']} is newer than the "
                             f"{match['supported']} the compiler or driver supports"}
        return [_Found("driver-error", line, line, fields, ("driver-error", "ptx", match["ptx"]), pre.time)]
    elif match := _ARCH_OLD.search(body) or _ARCH_TF.search(body):
        fields = {"gpu_name": match["gpu"].strip(), "sm": _sm(match["cc"]), "gpu_index": int(match["idx"]),
                  "min_capability": match["min"], "framework": "pytorch" if "PyTorch" in body else "tensorflow"}
        last = line
    else:
        return []
    return [_Found("arch-unsupported", line, last, fields, ("arch-unsupported", fields["sm"]), pre.time)]


# ---------------------------------------------------------------- device asserts

_ASSERT = regex.compile(
    r"(?P<file>(?<![^\s:])[^\s:]+\.cuh?):(?P<line>\d+): (?P<func>.*?):?\s*block: \["
    r"(?P<block>[\d, ]+)\],\s*thread: \[(?P<thread>[\d, ]+)\]"
    r"\s*Assertion `?(?P<cond>.*?)`? failed"
    r"|(?P<file>(?<![^\s:])[^\s:]+\.cuh?):(?P<line>\d+):? Assertion `(?P<cond>.*?)` failed"
)
"""A device-side assert as CUDA prints it (with block and thread), or as a framework's kernel macro prints it from a
.cu file (Paddle's PADDLE_ENFORCE in kernels); pasted into Markdown the backticks are often lost."""


def _device_assert(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    match = _ASSERT.search(pre.body)
    if not match:
        return []
    fields = {
        "file": match["file"], "file_line": int(match["line"]), "function": (match["func"] or "").strip()[:300] or None,
        "block": match["block"], "thread": match["thread"], "assertion": match["cond"],
    }
    fields = {k: v for k, v in fields.items() if v is not None}
    key = ("device-assert", match["file"], match["line"], match["cond"])
    return [_Found("device-assert", line, line, fields, key, pre.time)]


# ---------------------------------------------------------------- kernels too big for the GPU

_RESOURCES = regex.compile(
    r"out of resource: (?P<resource>[ ]*+\w+(?:[ ]++\w+)*?)[ ]*+,?\s*+Required: "
    r"(?P<required>\d+),?\s*Hardware limit(?:ation)?: (?P<limit>\d+)")
"""Triton's OutOfResources; old releases ran the parts together ("shared memoryRequired: 65536Hardware limit")."""


def _kernel_resources(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    """Triton's OutOfResources: a kernel config needs more shared memory or registers than this GPU has."""
    match = _RESOURCES.search(pre.body)
    if not match:
        return []
    fields = {"resource": match["resource"], "required": int(match["required"]), "limit": int(match["limit"]),
              "framework": "triton"}
    return [_Found("kernel-resources", line, line, fields, ("kernel-resources", match["resource"]), pre.time)]


# ---------------------------------------------------------------- cuBLAS / cuDNN

_STATUS = regex.compile(
    r"\b(?P<status>(?P<lib>CUBLAS|CUDNN|CUFFT|CUSOLVER|CUSPARSE|CURAND|CUTENSOR|NVRTC)_STATUS_[A-Z0-9_]+)"
    r"|\b(?P<status>(?P<lib>CUFFT)_(?:" + "|".join(sorted(
        {s.name[len("CUFFT_"):] for s in library_statuses() if s.library == "cufft"}, key=len, reverse=True)) + r"))\b"
)
"""A status by name: every library's `<LIB>_STATUS_*` (cuFFT names its results `CUFFT_*`)."""
_LIB_NUMBER = regex.compile(
    r"(?i)\b(?P<lib>cublas(?:Lt)?|cudnn|cufft|cusolver|cusparse|curand)\b[\w ]{0,30}?"
    r"(?:status|error|failure|failed|result|code)\s*(?:[:=]\s*|with status\s*|code\s*)?\(?(?P<num>\d{1,4})\b"
    r"|\b(?P<lib>CUBLAS|CUDNN|CUFFT|CUSOLVER|CUSPARSE|CURAND)_STATUS_SUCCESS\s*\((?P<num>\d{1,4}) vs\. 0\)"
)
"""A status by number, as libraries and their callers print it: `CUBLAS failure 13`, `cuBLAS API failed with
status 15`, `cuDNN error 4`, `CURAND error 201`."""
_CUDNN_INIT = regex.compile(r"Failed to get convolution algorithm\. This "
                            r"is probably because cuDNN failed to initialize")
_LIB_GAVE_UP = regex.compile(r"\b(?P<lib>cublasLt|cuBLASLt|cublas|cuBLAS) ran into an error")
"""bitsandbytes' words for a cuBLASLt call that failed without a status it prints (`Exception: cublasLt ran into
an error!`): its int8 matmul on a GPU or build its kernels do not support."""
_NODE = regex.compile(r"\{\{node (?P<node>[^}]+)\}\}")


def _library_name(written: str) -> str:
    """cuBLASLt reports in cuBLAS's numbering."""
    return "cublas" if written.lower().startswith("cublas") else written.lower()


def _library(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    body = pre.body
    status = next((m for m in _STATUS.finditer(body) if not m["status"].endswith("_SUCCESS")), None)
    number = _LIB_NUMBER.search(body)
    if status:
        fields: dict[str, Any] = {"library": status["lib"].lower(), "status": status["status"]}
    elif number and (known := library_status(_library_name(number["lib"]), number["num"])):
        fields = {"library": known.library, "status": known.name}
    elif _CUDNN_INIT.search(body):
        fields = {"library": "cudnn", "status": None, "reason": "cuDNN failed to initialize"}
    elif gave_up := _LIB_GAVE_UP.search(body):
        fields = {"library": _library_name(gave_up["lib"]), "status": None, "reason": f"{gave_up['lib']} failed"}
    else:
        return []
    if number:
        fields["number"] = int(number["num"])
    if fields.get("status") and (known := library_status(fields["library"], fields["status"])):
        fields.update(status_cause=known.cause, status_message=known.message)
    last = _continuation(ctx, line)
    block = "\n".join(_block_text(ctx, line, last))
    fields.update(_call_site(block))
    if node := _NODE.search(block):
        fields["node"] = node["node"]
    key = ("library-error", fields["library"], fields["status"])
    return [_Found("library-error", line, last, fields, key, pre.time)]


# ---------------------------------------------------------------- runtime libraries of another version

_VERSION_MISMATCH = (
    # PyTorch: "cuDNN version incompatibility: PyTorch was compiled against (8, 7, 0) but found runtime version
    # (8, 5, 0)"
    regex.compile(r"(?P<library>cuDNN|NCCL|cuBLAS) version incompatibility: (?P<framework>\w+) was compiled\s+against "
                  r"\((?P<built>[\d, ]+)\) but found runtime version \((?P<found>[\d, ]+)\)"),
    # XLA / TensorFlow stream executor: "Loaded runtime CuDNN library: 8.5.0 but source was compiled with: 8.6.0"
    regex.compile(r"Loaded runtime (?P<library>CuDNN|cuDNN|cuBLAS|CUDA) library: (?P<found>[\d.]+) but source was "
                  r"compiled with: (?P<built>[\d.]+)"),
    # torchvision: "PyTorch and torchvision were compiled with different CUDA versions. PyTorch has CUDA Version=11.7
    # and torchvision has CUDA Version=11.8"
    regex.compile(r"(?P<framework>PyTorch) and (?P<library>torchvision|torchaudio) were compiled with different CUDA "
                  r"versions\. PyTorch has CUDA Version=(?P<built>[\d.]+) and \w+ has CUDA Version=(?P<found>[\d.]+)"),
)
"""A framework saying a runtime library is not the version it was built with."""


def _version_mismatch(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    for pattern in _VERSION_MISMATCH:
        if match := pattern.search(pre.body):
            fields = {k: v.replace(" ", "").replace(",", ".") if k in ("built", "found") else v
                      for k, v in match.groupdict().items() if v}
            fields["library"] = fields["library"].lower()
            key = ("library-version-mismatch", fields["library"], fields.get("built"), fields.get("found"))
            return [_Found("library-version-mismatch", line, line, fields, key, pre.time)]
    return []


# ---------------------------------------------------------------- GPU out of memory

_OOM = regex.compile(
    r"(?:CUDA|GPU|cuda)\s++out of memory|OutOfMemoryError|Allocation on device"
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
its first words many times was scanned to its end from each copy."""
_SIZE = r"(?<!\d)(\d++(?:\.\d++)?+\s*+(?:[KMGTP]i?B|bytes|B))"
"""A size as allocators print it; read from the first digit only (so a long digit run costs one attempt)."""
_OOM_FIELDS: tuple[tuple[str, regex.Pattern], ...] = tuple(
    (name, regex.compile(pattern))
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


_HOST_ALLOC = regex.compile(
    r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate (?P<bytes>\d+) bytes"
    r"|Unable to allocate (?P<size>\d+(?:\.\d+)? [KMGTP]?i?B) for an array with shape")
"""A host (CPU) allocation that failed: PyTorch's CPU allocator (`DefaultCPUAllocator: can't allocate memory: you
tried to allocate N bytes`, `not enough memory` on Windows) and NumPy's `_ArrayMemoryError`."""


def _host_alloc(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    if not (match := _HOST_ALLOC.search(pre.body)):
        return []
    requested = int(match["bytes"]) if match["bytes"] else _bytes(match["size"].replace(" ", ""))
    fields = {"requested_bytes": requested, "message": match[0]}
    return [_Found("host-alloc-failed", line, line, fields, ("host-alloc-failed", requested), pre.time)]


def _oom(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    if not _OOM.search(pre.body):
        return []
    last = _continuation(ctx, line)
    block = "\n".join(_block_text(ctx, line, last))
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
    return [_Found("gpu-oom", line, last, fields, key, pre.time)]


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


# ---------------------------------------------------------------- CUDA errors (and driver errors)

_CUDA_CONTEXT = regex.compile(r"(?i)cuda|cublas|cudnn|\bgpu\b|\bTHC|ggml")
_DRIVER_PHRASES = regex.compile(
    r"Found no NVIDIA driver on your system"
    r"|NVIDIA driver on your system is too old(?: \(found version (?P<found>\d+)\))?"
    r"|(?i:your nvidia driver is too old)"  # ollama, llama.cpp loaders
    r"|Driver does not support the required nvenc API version\. Required: (?P<required>[\d.]+) Found: (?P<found>[\d.]+)"
    r"|The minimum required Nvidia driver for nvenc is (?P<required>[\d.]+) or newer"  # FFmpeg's NVENC
    r"|libcuda\.so(?:\.1)?: cannot open shared object file"  # no driver in the machine or container
)
_CONTAINER_DRIVER = regex.compile(
    r"This container was built for NVIDIA Driver Release (?P<required>[\d.]+) or later, but\s*version "
    r"(?P<found>[\d.]+) was detected and compatibility mode is UNAVAILABLE"
)
"""The entrypoint banner of NVIDIA's NGC containers (PyTorch, TensorRT, NeMo...), often wrapped after "but"."""


def _container_driver(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    if "This container was built for NVIDIA Driver Release" not in pre.body:
        return []
    last, text = line, pre.body
    if not (match := _CONTAINER_DRIVER.search(text)):
        for nxt, p in _follow(ctx, line, 1):
            last, text = nxt, f"{text} {p.body.strip()}"
        if not (match := _CONTAINER_DRIVER.search(text)):
            return []
    fields = {"driver_required": match["required"], "driver_version_found": match["found"],
              "message": f"the container needs driver {match['required']}+, the host has {match['found']}"}
    return [_Found("driver-error", line, last, fields, ("driver-error", "container", match["required"]), pre.time)]
_CONTAINER_GPU = regex.compile(r"Detected (?P<gpu>\S.{0,80}?) GPU, which is not supported by this container")
_CONTAINER_INIT = "The NVIDIA Driver is present, but CUDA failed to initialize"
_CONTAINER_ERROR = regex.compile(r"\[\[ (?P<said>[^\n]{1,400})")
_ERROR_NUMBER = regex.compile(r" \(error (?P<number>\d{1,5})\)$")
"""What NVIDIA's NGC containers (PyTorch, Triton, NeMo...) print at start on a GPU they cannot use: a GPU their
builds have no kernels for, or CUDA failing to start, with the CUDA error under it as `[[ Unknown error (error 999) ]]`
(its message capitalised, or cut off where the paste ends)."""


def _container_banner(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    if match := _CONTAINER_GPU.search(pre.body):
        fields: dict[str, Any] = {"gpu_name": match["gpu"], "feature": "this container",
                                  "reason": "the container's builds have no kernels for this GPU"}
        return [_Found("arch-unsupported", line, line, fields, ("arch-unsupported", "container"), pre.time)]
    if _CONTAINER_INIT not in pre.body:
        return []
    for nxt, p in _follow(ctx, line, 2):
        if not (said := _CONTAINER_ERROR.search(p.body)):
            continue
        message = said["said"].strip().removesuffix("]]").strip()
        if number := _ERROR_NUMBER.search(message):
            record = cuda_error(number["number"])
        else:
            record = cuda_error(message) or message_starting(message)
        if record is None:
            return []
        fields = _error_fields(record) | {"reporter": "container entrypoint"}
        kind = _kind_of(record.cause)
        return [_Found(kind, line, nxt, fields, (kind, record.name), pre.time)]
    return []


_API = regex.compile(
    r"expr=(?P<a>[A-Za-z_]\w*)|failed call to (?P<a>[A-Za-z_]\w*)|when calling `(?P<a>[A-Za-z_]\w*)"
    r"|in function (?P<f>[A-Za-z_]\w*)|(?P<a>cu[A-Z]\w+|cuda[A-Z]\w+)\(|\((?P<f>[A-Za-z_]\w*) at \S+:\d+\)"
)
_FILE_LINE = (
    regex.compile(r"file=(?P<file>(?:(?!file=).){1,400}?)\s*+;?+\s*+line=(?P<line>\d+)"),  # a path ends by the next
    regex.compile(r"(?P<file>(?<![^\s:'\"(\[])(?:[A-Za-z]:)?[^\s:'\"(\[]+\.(?:cu|cuh|cpp|cc|c|h|hpp|py|lua)):"
                  r"(?P<line>\d+)"),
)
_GPU_INDEX = regex.compile(r"GPU=(?P<i>\d{1,3})\b|current device: (?P<i>\d+)|device ordinal (?P<i>\d+)")
_HOSTNAME = regex.compile(r"hostname=(?P<h>[\w.\-]+)")
_GGML_OP = regex.compile(r"^ggml_\w+: (?P<op>\S+) failed\s*$")
_RANK = regex.compile(r"\bRank (?P<r>\d+)\]|local_rank: (?P<r>\d+)")


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


def _cuda(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    body = pre.body
    record, number = find_cuda_error(body)
    phrase = _DRIVER_PHRASES.search(body)
    if record is None and phrase is None:
        return []
    if (record is not None and not _CUDA_CONTEXT.search(body)
            and (record.cause is None or len(record.message or "") < 20)):
        return []
    last, first = _continuation(ctx, line), line
    fields: dict[str, Any] = _call_site("\n".join(_block_text(ctx, line, last)))
    before = ctx.doc.preceding(line, 1)
    if before and (op := _GGML_OP.match(_prefixed(before[0]).body)):
        first, fields["op"] = before[0], op["op"]
    elif _exception_line(body):
        first, fields["top_frame"] = _frames_before(ctx, line)
    if record is not None:
        fields.update(_error_fields(record))
        if number is not None:
            fields["number"] = number
    if phrase is not None:
        fields["message"] = phrase.group(0)
        if phrase["found"]:
            fields["driver_version_found"] = phrase["found"]
        if phrase["required"]:
            fields["driver_required"] = phrase["required"]
    kind = _kind_of(record.cause if record is not None else "driver-mismatch")
    key = (kind, fields.get("error") or fields.get("message"))
    return [_Found(kind, first, last, fields, key, pre.time)]


def _error_fields(record: CudaError) -> dict[str, Any]:
    """What an event says of the CUDA error it reports."""
    fields: dict[str, Any] = {"error": record.name, "code": record.number, "message": record.message,
                              "sticky": record.sticky}
    if record.driver_name:
        fields["driver_error"] = record.driver_name
    return fields


def _kind_of(cause: str | None) -> str:
    """The event kind of a CUDA error by the cause its number means (a driver problem, memory, else an error)."""
    return {"driver-mismatch": "driver-error", "gpu-oom": "gpu-oom"}.get(cause or "", "cuda-error")


# ---------------------------------------------------------------- workers and children

_SHM = regex.compile(r"(?i)Unexpected bus error encountered in (?:DataLoader )?worker"
                     r"|insufficient shared memory \(shm\)"
                     r"|unable to (?:write to file|open shared memory object) </torch")
"""PyTorch's and Paddle's DataLoader words for a worker killed by SIGBUS on a full /dev/shm, and torch's
shared-memory allocator failing on its `/dev/shm/torch_PID_N` files (`unable to write to file </torch_18692_1954>:
No space left on device (28)`): tensors that DataLoader workers hand over live there."""
_WORKER_SIGNAL = regex.compile(r"DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal: (?P<sig>[^.]+)")
_WORKER_FAULT = regex.compile(r"Unexpected (?P<what>segmentation fault|floating point exception"
                              r"|illegal instruction) encountered in worker")
_WORKER_EXIT = regex.compile(r"DataLoader worker \(pid\(s\) (?P<pids>[\d, ]+)\) exited unexpectedly")
_ELASTIC = regex.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: "
    r"(?P<rank>\d+) \(pid: (?P<pid>\d+)\)(?: of binary: (?P<binary>\S+))?"
)
_CHILD_FAILED = regex.compile(r"ChildFailedError:")
_ROOT_FIELDS = regex.compile(
    r"^\s*(?:time\s*:\s*(?P<time>\S+)|host\s*:\s*(?P<host>\S+)"
    r"|rank\s*:\s*(?P<rank>\d+)(?: \(local_rank: (?P<local>\d+)\))?"
    r"|exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?|traceback\s*:\s*(?P<tb>.*))"
)


def _workers(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    body = pre.body
    if _SHM.search(body):
        fields: dict[str, Any] = {"process": "DataLoader worker", "signal": "SIGBUS", "shm": True}
        return [_Found("bus-error", line, line, fields, ("bus-error",), pre.time)]
    if match := _WORKER_SIGNAL.search(body):
        words, last = match["sig"].strip(), line
        if signal_name(words) is None and match.end() == len(body.rstrip()):
            # the message hard-wrapped inside the signal's name ("... by signal: Bus" / "error. It is ...")
            for nxt, p in _follow(ctx, line, 1):
                if signal_name(joined := f"{words} {p.body.split('.')[0].strip()}"):
                    words, last = joined, nxt
        signal = signal_name(words) or words
        fields = {"process": "DataLoader worker", "pid": int(match["pid"]), "signal": signal}
        kind = "bus-error" if signal == "SIGBUS" else "child-failed"
        return [_Found(kind, line, last, fields, (kind, signal), pre.time)]
    if match := _WORKER_FAULT.search(body):
        fields = {"process": "DataLoader worker", "signal": signal_name(match["what"])}
        return [_Found("fatal-signal", line, line, fields, ("fatal-signal", fields["signal"], "worker"), pre.time)]
    if match := _WORKER_EXIT.search(body):
        fields = {"process": "DataLoader worker", "pids": [int(p) for p in regex.findall(r"\d+", match["pids"])]}
        return [_Found("child-failed", line, line, fields, ("child-failed", "worker-exit"), pre.time)]
    if match := _ELASTIC.search(body):
        fields = _child_fields(match["code"], match["pid"], match["rank"])
        fields["binary"] = match["binary"]
        return [_Found("child-failed", line, line, fields, _child_key(fields), pre.time)]
    if _CHILD_FAILED.search(body):
        return _child_failed_block(ctx, line, pre)
    return []


def _child_fields(code: str, pid: str | None, rank: str | None) -> dict[str, Any]:
    exitcode = int(code)
    fields: dict[str, Any] = {"exitcode": exitcode, "pid": int(pid) if pid else None}
    if rank is not None:
        fields["rank"] = int(rank)
    fields["signal"] = signal_name(exitcode) if exitcode < 0 else None
    return fields


def _child_key(fields: dict[str, Any]) -> tuple:
    return ("child-failed", fields.get("exitcode"), fields.get("pid"))


def _child_failed_block(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    """The summary table torchrun prints: one entry per failed rank under `[N]:`."""
    found: list[_Found] = []
    entry: dict[str, Any] | None = None
    rules, last = 0, line
    for nxt, p in _follow(ctx, line, 120):
        body = p.body
        if body.startswith("====="):
            rules += 1
            last = nxt
            if rules == 2:
                break
            continue
        if regex.match(r"^\s*\[\d+\]:", body):
            entry = {}
            found.append(_Found("child-failed", nxt, nxt, entry, (), pre.time))
        elif entry is not None and (match := _ROOT_FIELDS.match(body)):
            for name, value in match.groupdict().items():
                if value is not None:
                    entry[name] = value
            found[-1].last = nxt
        last = nxt
    ctx.take("fatal-signal", [l for l, _ in _follow(ctx, line, last.number - line.number)])
    events = []
    for item in found:
        raw = item.fields
        if "code" not in raw:
            continue
        fields = _child_fields(raw["code"], raw.get("pid"), raw.get("rank"))
        fields.update({k: raw[k] for k in ("host", "tb") if k in raw})
        if "tb" in fields:
            fields["traceback"] = fields.pop("tb")
        if "local" in raw:
            fields["local_rank"] = int(raw["local"])
        events.append(_Found("child-failed", line, last, fields, _child_key(fields), pre.time))
    return events


# ---------------------------------------------------------------- fatal signals and native crashes

_FAULTHANDLER = regex.compile(r"Fatal Python error: (?P<what>[^:]*[^:\s])\s*$")
_FH_LINE = regex.compile(
    r'^(?:\s*$|(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):|Stack \(most recent call first\):'
    r'|\s+File ".*", line \d+ in |\s+<no Python frame>'
    r'|\s+Garbage-collecting|Extension modules:|<Cannot show all threads)'
)
_FH_FRAME = regex.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<func>.+)$')
_JULIA_HEAD = regex.compile(r"^(?:\[\d+\] )?signal \(?(?P<num>\d{1,2})(?:\.\d+)?\)?(?: \(\d+\))?: "
                            r"(?P<what>[A-Z][\w ]{2,40})$")
"""Julia's signal handler: `signal (11): Segmentation fault`, `[219060] signal 11 (1): Segmentation fault`."""
_JULIA_LINE = regex.compile(r"^(?:in expression starting at |unknown function \(ip: 0x|Allocations: "
                            r"|\S.{0,300}? at \S)")
_JULIA_FRAME = regex.compile(r"^(?:in expression starting at (?P<expression>.*)|unknown function \(ip: 0x[0-9a-f]+\)"
                             r"|(?P<frame>\S.{0,300}? at \S.*))$")
_NATIVE_HEAD = regex.compile(
    r"\*\*\* (?:Aborted at .*\*\*\*|(?P<sig>SIG[A-Z]+)\b.*?received by PID (?P<pid>\d+))"
    r"|(?P<sig>SIG(?:SEGV|BUS|ABRT|ILL|FPE))\s+(?:encountered|caught|received)"
    r"|[Cc]aught signal (?P<num>\d+)|received signal (?P<sig>SIG[A-Z]+)"
)
_NATIVE_FRAME = regex.compile(
    r"^\s*(?:@\s+0x[0-9a-f]+|PC: @|\*\*\* SIG|#\d+\s+0x[0-9a-f]+|frame #\d+:|\S+\([^)]*\)\s*\[0x[0-9a-f]+\]"
    r"|\[0x[0-9a-f]+\]|backtrace\(\) returned|stack trace:|Stack trace|\[bt\])",
    regex.IGNORECASE,
)
_SHELL = regex.compile(
    r"\G(?:\S+: line \d+:\s+\d+\s+)?"
    r"(?P<what>Segmentation fault|Bus error|Aborted|Illegal instruction|Floating point exception)"
    r"(?P<core>\s+\(core dumped\))?(?:\s+.*)?"
)
_GLIBC = regex.compile(r"^(?:malloc|free|realloc|double free|corrupted|munmap_chunk|malloc_consolidate)\S*.*")
_WINDOWS = regex.compile(r"(?i)(?:exit status|exception code|exit code)[:\s]+(?:-?\d+\s+\()?(?P<code>0xc[0-9a-f]{7})\b")
_TERMINATE = regex.compile(r"terminate called (?:after throwing an instance of '(?P<type>[^']+)'"
                           r"|without an active exception|recursively)")
_WHAT = regex.compile(r"^\s*what\(\):\s*(?P<what>.*)")


def _fatal(ctx: _Context, line: Line, pre: _Prefixed) -> list[_Found]:
    if ctx.taken("fatal-signal", line):
        return []
    for detector in (_faulthandler, _julia_signal, _native_backtrace, _windows_exit, _terminate, _assertion,
                     _shell_signal):
        found = detector(ctx, line, pre)
        if found:
            ctx.take("fatal-signal", [l for l, _ in _follow(ctx, line, found.last.number - line.number)])
            return [found]
    return []


def _faulthandler(ctx: _Context, line: Line, pre: _Prefixed) -> _Found | None:
    match = _FAULTHANDLER.search(pre.body)
    if not match or not signal_name(match["what"]):
        return None
    last = line
    threads: list[tuple[bool, list[str]]] = []
    for nxt, p in _follow(ctx, line, FOLLOW_LIMIT):
        if not _FH_LINE.match(p.body):
            break
        if p.body.strip():
            last = nxt
        if p.body.startswith(("Current thread", "Thread", "Stack")):
            threads.append((not p.body.startswith("Thread"), []))
        elif (frame := _FH_FRAME.match(p.body)) and threads:
            threads[-1][1].append(f"{frame['file']}:{frame['line']} in {frame['func']}")
    stacks = [frames for current, frames in threads if current and frames] + [frames for _, frames in threads if frames]
    fields = {"signal": signal_name(match["what"]), "reason": match["what"], "source": "faulthandler",
              "frames": stacks[0][:8] if stacks else []}
    return _Found("fatal-signal", line, last, fields, ("fatal-signal", fields["signal"], "faulthandler"), pre.time)


def _julia_signal(ctx: _Context, line: Line, pre: _Prefixed) -> _Found | None:
    """Julia's report of a fatal signal: the signal, the expression it ran, then native and Julia frames."""
    match = _JULIA_HEAD.match(pre.body.strip())
    if not match or not (signal := signal_name(match["num"])):
        return None
    last, expression = line, None
    frames: list[str] = []
    for nxt, p in _follow(ctx, line, FOLLOW_LIMIT):
        body = p.body.strip()
        if not _JULIA_LINE.match(body):
            break
        last = nxt
        frame = _JULIA_FRAME.match(body)
        if frame and frame["expression"]:
            expression = frame["expression"]
        elif frame and frame["frame"] and len(frames) < 12:
            frames.append(frame["frame"])
    fields = {"signal": signal, "reason": match["what"], "source": "julia", "frames": frames, "expression": expression}
    return _Found("fatal-signal", line, last, fields, ("fatal-signal", signal, "julia", tuple(frames[:3])), pre.time)


def _native_backtrace(ctx: _Context, line: Line, pre: _Prefixed) -> _Found | None:
    match = _NATIVE_HEAD.search(pre.body)
    if not match:
        return None
    signal = signal_name(match["sig"] or match["num"])
    last = line
    frames: list[str] = []
    for nxt, p in _follow(ctx, line, FOLLOW_LIMIT):
        if not _NATIVE_FRAME.match(p.body):
            break
        last = nxt
        if signal is None and (inner := regex.search(r"\*\*\* (SIG[A-Z]+)", p.body)):
            signal = inner.group(1)
        if len(frames) < 12 and not regex.match(r"\G\s*+(?:stack trace|backtrace\(\)|Stack trace)", p.body, regex.I):
            frames.append(p.body.strip())
    fields = {"signal": signal, "pid": int(match["pid"]) if match["pid"] else None, "frames": frames,
              "source": "native-backtrace"}
    return _Found("fatal-signal", line, last, fields, ("fatal-signal", signal, "native", tuple(frames[:3])), pre.time)


def _windows_exit(ctx: _Context, line: Line, pre: _Prefixed) -> _Found | None:
    match = _WINDOWS.search(pre.body)
    if not match:
        return None
    code = int(match["code"], 16)
    status, signal = WINDOWS_EXCEPTIONS.get(code, (None, None))
    fields = {"exception_code": f"0x{code:08x}", "status": status, "signal": signal, "platform": "windows"}
    return _Found("fatal-signal", line, line, fields, ("fatal-signal", code), pre.time)


def _terminate(ctx: _Context, line: Line, pre: _Prefixed) -> _Found | None:
    match = _TERMINATE.search(pre.body)
    if not match:
        return None
    fields: dict[str, Any] = {"signal": "SIGABRT", "source": "c++ terminate", "exception_type": match["type"]}
    last = line
    following = list(_follow(ctx, line, 1))
    if following and (what := _WHAT.match(following[0][1].body)):
        fields["what"] = what["what"][:500]
        last = following[0][0]
    return _Found("fatal-signal", line, last, fields, ("fatal-signal", "terminate", match["type"]), pre.time)


def _assertion(ctx: _Context, line: Line, pre: _Prefixed) -> _Found | None:
    """A host program's own assertion failed (glibc's assert, GGML_ASSERT, glog's CHECK, ...): it aborts next. The
    line is searched as written, since a glog prefix (taken off the body) holds the place of a CHECK."""
    for wording, pattern in _ASSERTIONS:
        if match := pattern.search(line.text):
            groups = match.groupdict()
            fields: dict[str, Any] = {
                "signal": "SIGABRT", "source": "assertion", "assertion_kind": wording,
                "assertion": groups["cond"].strip()[:500], "file": groups["file"], "file_line": int(groups["line"]),
            }
            if function := (groups.get("function") or "").strip():
                fields["function"] = function[:300]
            return _Found("fatal-signal", line, line, fields,
                          ("fatal-signal", "assertion", match["file"], match["line"]), pre.time)
    return None


def _shell_signal(ctx: _Context, line: Line, pre: _Prefixed) -> _Found | None:
    body = pre.body.strip().lstrip("^C")
    match = _SHELL.fullmatch(body)
    if not match or (not match["core"] and body not in (match["what"], match["what"] + ".") and ": line " not in body):
        return None
    first = line
    before = ctx.doc.preceding(line, 1)
    fields: dict[str, Any] = {"signal": signal_name(match["what"]), "source": "shell",
                              "core_dumped": bool(match["core"])}
    if before and _GLIBC.match(_prefixed(before[0]).body):
        first = before[0]
        fields["glibc_message"] = _prefixed(before[0]).body.strip()
    return _Found("fatal-signal", first, line, fields, ("fatal-signal", fields["signal"], "shell"), pre.time)


# ---------------------------------------------------------------- dispatch and folding

_DETECTORS: tuple[Callable[[_Context, Line, _Prefixed], list[_Found]], ...] = (
    _traceback, _lua_traceback, _arch, _device_assert, _kernel_resources, _library, _version_mismatch, _host_alloc,
    _oom,
    _workers, _container_driver, _container_banner, _cuda, _fatal,
)
"""Tried in order on each candidate line; the first that recognises it wins."""


def parse(doc: TextDoc, lines: list[Line]) -> Iterator[Event]:
    """Events from the candidate lines of one input (see the module docstring)."""
    ctx = _Context(doc)
    found: list[_Found] = []
    for line in lines:
        pre = _prefixed(line)
        if ctx.taken("python-exception", line) and (_PY_FRAME.match(pre.body) or _IPY_FRAME.match(pre.body)):
            continue  # a frame of a traceback already read (frames are anchors only to start headless ones)
        for detector in _DETECTORS:
            try:
                hits = detector(ctx, line, pre)
            except (ValueError, IndexError, KeyError, OverflowError):
                hits = []
            if hits:
                for hit in hits:
                    if pre.tag:
                        hit.tags.add(pre.tag)
                found.extend(hits)
                break
    for item in _fold(found):
        yield _event(doc, item)


def _fold(found: list[_Found]) -> list[_Found]:
    """One block per burst of the same report; one event per report repeated elsewhere."""
    kept: list[_Found] = []
    by_key: dict[tuple, _Found] = {}
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


def _event(doc: TextDoc, item: _Found) -> Event:
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
