"""What the mapped files of a process say about its GPU stack.

Each module gets a kind (the NVIDIA driver, a CUDA library, the framework, a
user's extension, Python, Python's own extension modules, the C runtime, other), and versions are read from the
paths where packaging puts them: libcuda.so.<driver>, libcudart.so.<runtime>,
torch-<version>.dist-info, libpython3.11.so.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import later
from ..debugging import RUNTIME_MODULES
from .link_map import MAX_PATH

KINDS = ("nvidia-driver", "cuda-library", "framework", "user-extension", "python", "python-stdlib", "runtime", "other",
         "data")

_DRIVER = later.plain(r"(?:^|/)(?:libcuda\.so|libnvidia-[\w.-]+\.so|libnvcuvid\.so|libcudadebugger\.so)[\w.]*$")
_CUDA = later.plain(
    r"(?:^|/)lib(?:cudart|cublas(?:Lt)?|cudnn\w*|nccl|cufft\w*|cusparse(?:Lt)?|cusolver\w*|curand|nvrtc[\w-]*|"
    r"nvJitLink|nvToolsExt|nvtx\w*|cupti|cufile\w*|nvjpeg|npp\w*|cudla|cutensor\w*|nvshmem\w*)[\w.-]*\.so[\w.]*$")
_FRAMEWORK = later.plain(
    r"(?:^|/)(?:libtorch[\w-]*\.so|libc10[\w-]*\.so|libshm\.so|_C(?:_flatbuffer)?\.cpython[\w.-]*\.so|"
    r"libtensorflow[\w-]*\.so|_pywrap_tensorflow[\w-]*\.so|libjax\w*\.so|xla_extension\.so|jaxlib/[\w/.-]+\.so|"
    r"libtriton\.so|libonnxruntime[\w-]*\.so)[\w.]*$|/(?:torch"
    r"|tensorflow|jaxlib|jax_cuda\w*|triton)/[\w/.-]*\.so[\w.]*$")
_PYTHON = later.plain(r"(?:^|/)(?:libpython(\d+)\.(\d+)\w*\.so[\w.]*|python(\d+)\.(\d+)\w*)$")
_STDLIB_EXTENSION = later.plain(r"/lib-dynload/[^/]+\.so[\w.]*$")
"""The interpreter's own extension modules (_ctypes, _struct, _ssl): CPython installs them in lib/pythonX.Y/lib-dynload
(Debian, conda, pyenv and python.org builds alike), apart from what pip puts in site-packages."""
_EXTENSION = later.plain(r"/(?:site-packages|dist-packages)/[^ ]+\.so[\w.]*$|\.cpython-\d++[\w-]*+\.so$")
"""A module pip installed. Like the patterns above it looks back from a path's end, so `classify` gives it no path
longer than the kernel writes for a mapped file (link_map.MAX_PATH): a longer one is crafted and names no module."""

_DRIVER_VERSION = later.plain(r"(?:^|/)libcuda\.so\.(\d{3}\.\d+(?:\.\d+)?)$"
                                r"|(?:^|/)libnvidia-[\w-]+\.so\.(\d{3}\.\d+(?:\.\d+)?)$")
_CUDART_VERSION = later.plain(r"(?:^|/)libcudart\.so\.(\d+\.\d+(?:\.\d+)?)$")
_CUDA_DIR_VERSION = later.plain(r"/cuda-(\d+\.\d+)/")
_TORCH_VERSION = later.plain(r"/torch-(\d+\.\d+(?:\.\d+)?(?:[+.\w]*)?)\.dist-info/|/torch/version\.py")


def classify(path: str, working_directory: str | None = None) -> str:
    """The kind of one mapped file (see KINDS); non-ELF data files are classified by the caller."""
    if len(path) > MAX_PATH:
        return "other"
    if _DRIVER.search(path):
        return "nvidia-driver"
    if _CUDA.search(path):
        return "cuda-library"
    if _FRAMEWORK.search(path):
        return "framework"
    if _PYTHON.search(path):
        return "python"
    if _STDLIB_EXTENSION.search(path):
        return "python-stdlib"
    if RUNTIME_MODULES.search(path):
        return "runtime"
    if _EXTENSION.search(path) or (working_directory and path.startswith(working_directory.rstrip("/") + "/")
                                   and ".so" in path.rsplit("/", 1)[-1]):
        return "user-extension"
    return "other"


def python_version(paths: Iterable[str]) -> str | None:
    """"3.11" from libpython3.11.so.1.0 or /usr/bin/python3.11."""
    for path in paths:
        found = _PYTHON.search(path)
        if found:
            major, minor = (found.group(1), found.group(2)) if found.group(1) else (found.group(3), found.group(4))
            return f"{major}.{minor}"
    return None


def module_version(path: str) -> str | None:
    """The version a path carries, for the driver and the CUDA runtime."""
    found = _DRIVER_VERSION.search(path) or _CUDART_VERSION.search(path)
    if found:
        return next(group for group in found.groups() if group)
    return None


def stack_facts(paths: list[str]) -> dict[str, str]:
    """driver_version, cuda_version, torch_version, framework and python_version, where the paths tell them."""
    facts: dict[str, str] = {}
    for path in paths:
        if (found := _DRIVER_VERSION.search(path)) and "driver_version" not in facts:
            facts["driver_version"] = next(group for group in found.groups() if group)
        if (found := _CUDART_VERSION.search(path)) and "cuda_version" not in facts:
            facts["cuda_version"] = found.group(1)
        if (found := _TORCH_VERSION.search(path)) and found.group(1) and "torch_version" not in facts:
            facts["torch_version"] = found.group(1)
    if "cuda_version" not in facts:
        dirs = [found.group(1) for path in paths if _CUDA.search(path) and (found := _CUDA_DIR_VERSION.search(path))]
        if dirs:
            facts["cuda_version"] = dirs[0]
    frameworks = [name for name, marker in (("pytorch", "/torch/"), ("tensorflow", "/tensorflow/"), ("jax", "/jaxlib/"))
                  if any(marker in path or (name == "pytorch" and "libtorch" in path) for path in paths)]
    if frameworks:
        facts["framework"] = frameworks[0]
    version = python_version(paths)
    if version:
        facts["python_version"] = version
    return facts
