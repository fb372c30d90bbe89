"""What this GPU cannot run: kernels built for another architecture, kernel configs past its limits.

PyTorch's and TensorFlow's checks of the GPU's compute capability, ptxas and nvcc
older than the GPU, PTX for a newer ISA, TensorRT engines built on another GPU,
kernel libraries that refuse the GPU (FlashAttention, bitsandbytes, tiny-cuda-nn),
and Triton's OutOfResources. One detector reads the architecture refusals in a fixed
order, so a line that holds two wordings is read as before.
"""

from __future__ import annotations

from typing import Any

import regex

from ... import later
from ...text import Line
from .traceback import Context, Found, Prefixed, follow

_ARCH_TORCH = later.compile(
    r"(?:^\s*|:\s+)(?P<gpu>[A-Z][\w\- ]*?) with CUDA capability (?P<sm>sm_\d+[a-z]?) is not compatible"
)
_ARCH_SUPPORTED = later.compile(r"supports CUDA capabilities (?P<list>(?:sm_\d+[a-z]?\s*)+)")
_ARCH_WANT = later.compile(r"If you want to use the (?P<gpu>.+?) GPU with PyTorch")
_ARCH_OLD = later.compile(
    r"Found GPU(?P<idx>\d+) (?P<gpu>.{1,100}?) which is of cuda capability (?P<cc>\d+\.\d+)\."  # bounded: no rescan
    r".{0,400}?minimum cuda capability (?:supported by this library|that we support) is (?P<min>\d+\.\d+)"
)
_ARCH_TF = later.compile(
    r"device: (?P<idx>\d+), name: (?P<gpu>[^,]+), pci bus id: (?P<pci>[^,]+), compute capability: (?P<cc>\d+\.\d+)\)"
    r".*?minimum required Cuda capability is (?P<min>\d+\.\d+)"
)
_TOOLCHAIN_ARCH = later.compile(
    r"Value '(?P<sm>(?:compute|sm)_\d+[a-z]?)' is not defined for option '(?:gpu-name|gpu-architecture)'"
    r"|nvcc fatal\s*:\s*Unsupported gpu architecture '(?P<sm>(?:compute|sm)_\d+[a-z]?)'"
)
"""ptxas or nvcc older than the GPU: it cannot build for that architecture (Triton, Inductor, JAX and
extension builds all call them). ptxas names its option `gpu-name`, nvcc `gpu-architecture` (`nvcc fatal   : Value
'sm_86' is not defined for option 'gpu-architecture'`: pycuda, TVM, OpenMM and Blender's kernel builds on a GPU newer
than their CUDA, inducer/pycuda#440, apache/tvm#4061). A value that is no architecture (`'[sm_61]'`, `'arch'`: a
command typed wrong) is not read."""
_PTX_TARGET_ARCH = later.compile(r"SM version specified by \.target is higher than default SM version assumed")
"""ptxas handed PTX whose `.target` is a newer architecture than the one it builds for (the GPU's, when a
program JIT-builds for the GPU it runs on): the PTX was written for newer GPUs than this one."""
_FEATURE_ARCH = later.compile(
    r"(?P<feature>[A-Z][\w\-]{0,64}) only supports "  # a name, bounded: a long capital run is not rescanned per letter
    r"(?P<min_family>Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell) GPUs or newer"
)
"""A library's kernels refusing the GPU's architecture (FlashAttention on Turing and older, or a build without the
GPU's own arch): `FlashAttention only supports Ampere GPUs or newer`."""
_FEATURE_REFUSED = later.compile(r"Your GPU does not support (?P<feature>[A-Z][\w]*(?: [A-Z]?[\w]+)?)!")
"""A library refusing this GPU for one feature without naming the oldest family it needs (bitsandbytes:
`ERROR: Your GPU does not support Int8 Matmul!`)."""
_EXTENSION_ARCH = later.compile(
    r"(?i)(?:could not find|no) compatible (?P<feature>[\w\-]+) (?:extension|kernels?|binar(?:y|ies)|build) for "
    r"compute capability (?P<cc>\d+(?:\.\d)?)"
)
"""An extension that ships one build per architecture and has none for this GPU (tiny-cuda-nn and the like)."""
_PTX_TOO_NEW = later.compile(r"Unsupported \.version (?P<ptx>\d+\.\d+); current version is '(?P<supported>\d+\.\d+)'")
"""PTX written for a newer ISA than the ptxas or driver that must compile it."""
_ENGINE_ARCH = later.compile(r"engine plan file is generated on an incompatible device, expecting compute "
                            r"(?P<built>\d+\.\d+) got compute (?P<here>\d+\.\d+)")
"""TensorRT's refusal of an engine built on a GPU of another compute capability (an engine holds machine code for
the GPU it was built on only)."""

_CAPABILITY_REFUSED = later.compile(
    r"(?i:only supports devices of CUDA Capability >= (?P<min>\d+\.\d+), but your device is of CUDA capability "
    r"(?P<cc>\d+\.\d+))"
    r"|(?P<gpu>[A-Z][\w\-]{0,40}(?: [\w\-]{1,40}){0,4}) GPU \(compute capability (?P<cc2>\d+\.\d+)\) is not supported"
    r"|The GPU architecture in your current machine is (?P<family>[A-Z]\w+), which is not compatible with "
    r"(?P<framework>\w+) installation with arch: (?P<list>\d+(?: \d+)*)"
)
"""A framework's own check of the GPU's compute capability against what its build or its compiler supports:
Triton's (`Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.0`),
CUDA.jl's (`Your Tesla V100-PCIE-32GB GPU (compute capability 7.0) is not supported on CUDA 13+.`), Paddle's
(`The GPU architecture in your current machine is Pascal, which is not compatible with Paddle installation with
arch: 70 75 80 86`)."""


def _capability_refused(match: regex.Match) -> dict[str, Any]:
    if match["family"]:
        return {"family": match["family"], "framework": match["framework"].lower(),
                "supported_archs": [f"sm_{arch}" for arch in match["list"].split()],
                "reason": f"this {match['framework']} build has no kernels for {match['family']} GPUs"}
    capability = match["cc"] or match["cc2"]
    fields: dict[str, Any] = {"sm": _sm(capability), "reason": f"{_sm(capability)} is below what this build supports"}
    if match["min"]:
        fields |= {"min_capability": match["min"], "framework": "triton"}
    if match["gpu"]:
        fields["gpu_name"] = match["gpu"].removeprefix("Your ").strip()
    return fields


def _with_following(ctx: Context, line: Line, pre: Prefixed, lines: int) -> str:
    """The line's text and the next `lines` of the same process, joined: PyTorch prints its warning of a GPU too old
    on three lines (torch/cuda/__init__.py: `Found GPU0 ... which is of cuda capability 3.5.`, `PyTorch no longer
    supports this GPU because it is too old.`, `The minimum cuda capability supported by this library is 3.7.`),
    and one line where a paste ran them together."""
    if "Found GPU" not in pre.body:
        return pre.body
    return " ".join([pre.body, *(p.body for _, p in follow(ctx, line, lines))])


def _sm(capability: str) -> str:
    return "sm_" + capability.replace(".", "")


def gpu_arch(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    body = pre.body
    if match := _ARCH_TORCH.search(body):
        fields: dict[str, Any] = {"gpu_name": match["gpu"].strip(), "sm": match["sm"], "framework": "pytorch"}
        last = line
        for nxt, p in follow(ctx, line, 4):
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
        return [Found("arch-unsupported", line, line, fields, ("arch-unsupported", "ptx-target"), pre.time)]
    elif match := _EXTENSION_ARCH.search(body):
        cc = match["cc"] if "." in match["cc"] else f"{match['cc'][:-1]}.{match['cc'][-1]}"
        fields = {"feature": match["feature"], "sm": _sm(cc), "reason": f"no {match['feature']} build for {_sm(cc)}"}
        return [Found("arch-unsupported", line, line, fields, ("arch-unsupported", match["feature"]), pre.time)]
    elif match := _FEATURE_REFUSED.search(body):
        fields = {"feature": match["feature"], "reason": f"{match['feature']} has no kernels for this GPU"}
        return [Found("arch-unsupported", line, line, fields, ("arch-unsupported", match["feature"]), pre.time)]
    elif match := _FEATURE_ARCH.search(body):
        fields = {"feature": match["feature"], "min_family": match["min_family"],
                  "reason": f"{match['feature']} has no kernels for GPUs older than {match['min_family']}"}
        return [Found("arch-unsupported", line, line, fields, ("arch-unsupported", match["feature"]), pre.time)]
    elif match := _ENGINE_ARCH.search(body):
        fields = {"sm": _sm(match["here"]), "built_for": _sm(match["built"]), "framework": "tensorrt",
                  "reason": f"a TensorRT engine built for {_sm(match['built'])} runs on that architecture only"}
        return [Found("arch-unsupported", line, line, fields, ("arch-unsupported", "engine", match["built"]),
                       pre.time)]
    elif match := _PTX_TOO_NEW.search(body):
        fields = {"ptx_version": match["ptx"], "supported_ptx": match["supported"],
                  "message": f"PTX ISA {match['ptx']} is newer than the "
                             f"{match['supported']} the compiler or driver supports"}
        return [Found("driver-error", line, line, fields, ("driver-error", "ptx", match["ptx"]), pre.time)]
    elif match := _CAPABILITY_REFUSED.search(body):
        fields = _capability_refused(match)
        key = ("arch-unsupported", fields.get("sm") or fields["family"])
        return [Found("arch-unsupported", line, line, fields, key, pre.time)]
    elif match := _ARCH_OLD.search(_with_following(ctx, line, pre, 2)) or _ARCH_TF.search(body):
        fields = {"gpu_name": match["gpu"].strip(), "sm": _sm(match["cc"]), "gpu_index": int(match["idx"]),
                  "min_capability": match["min"], "framework": "tensorflow" if "Cuda capability" in body else "pytorch"}
        last = line
    else:
        return []
    return [Found("arch-unsupported", line, last, fields, ("arch-unsupported", fields["sm"]), pre.time)]


# ---------------------------------------------------------------- kernels too big for the GPU

_RESOURCES = later.compile(
    r"out of resource: (?P<resource>[ ]*+\w+(?:[ ]++\w+)*?)[ ]*+,?\s*+Required: "
    r"(?P<required>\d+),?\s*Hardware limit(?:ation)?:\s*+(?P<limit>\d+)")
"""Triton's OutOfResources; old releases ran the parts together ("shared memoryRequired: 65536Hardware limit"), and
Inductor names the kernel instead of the resource, with the figures on the next line (`OutOfMemoryError: out of
resource: triton_per_fused_..._7` / `Required: 327768 Hardware limit:232448`: pytorch/pytorch#175250)."""


def kernel_resources(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    """Triton's OutOfResources: a kernel config needs more shared memory or registers than this GPU has (a limit
    of one kernel's launch, not the GPU's memory, though Inductor raises it as an OutOfMemoryError)."""
    match = _RESOURCES.search(pre.body)
    if not match and "out of resource:" in pre.body:
        following = [each.text for each in ctx.doc.following(line, 1)]
        match = _RESOURCES.search(" ".join([pre.body, *following]))
    if not match:
        return []
    fields = {"resource": match["resource"], "required": int(match["required"]), "limit": int(match["limit"]),
              "framework": "triton"}
    return [Found("kernel-resources", line, line, fields, ("kernel-resources", match["resource"]), pre.time)]
