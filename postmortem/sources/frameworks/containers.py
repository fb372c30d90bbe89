"""GPU containers that cannot start: NVIDIA's NGC entrypoint banner, and the NVIDIA container runtime's error.

The banner: a driver older than the container's build needs, a GPU its builds have no kernels
for, or CUDA failing to start with the CUDA error quoted under the banner. The runtime:
nvidia-container-cli's `<stage> error: <detail>`, which the container engine quotes when its hook fails.
"""

from __future__ import annotations

from typing import Any

from ... import later
from ...knowledge import cuda_error, cuda_error_fields, cuda_error_kind, message_starting
from ...text import Line
from ..mentions import phrases
from .traceback import Context, Found, Prefixed, follow

_CONTAINER_DRIVER = later.compile(
    r"This container was built for NVIDIA Driver Release (?P<required>[\d.]+) or later, but\s*version "
    r"(?P<found>[\d.]+) was detected and compatibility mode is UNAVAILABLE"
)
"""The entrypoint banner of NVIDIA's NGC containers (PyTorch, TensorRT, NeMo...), often wrapped after "but"."""
_CONTAINER_INIT_RETURN = later.compile(r"\[\[CUDA Driver UNAVAILABLE \(cuInit\(0\) returned (?P<number>\d{1,4})\)\]\]")
"""The banner's own last line: what cuInit returned (804, forward compatibility refused on this GPU)."""


def container_driver(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    if "This container was built for NVIDIA Driver Release" not in pre.body:
        return []
    last, text = line, pre.body
    if not (match := _CONTAINER_DRIVER.search(text)):
        for nxt, p in follow(ctx, line, 1):
            last, text = nxt, f"{text} {p.body.strip()}"
        if not (match := _CONTAINER_DRIVER.search(text)):
            return []
    fields = {"driver_required": match["required"], "driver_version_found": match["found"],
              "message": f"the container needs driver {match['required']}+, the host has {match['found']}"}
    for nxt, p in follow(ctx, last, 2):
        if returned := _CONTAINER_INIT_RETURN.search(p.body):
            last, fields["init_error"] = nxt, int(returned["number"])
    return [Found("driver-error", line, last, fields, ("driver-error", "container", match["required"]), pre.time)]


_CONTAINER_GPU = later.compile(r"Detected (?P<gpu>\S.{0,80}?) GPU, which is not supported by this container")
_CONTAINER_INIT = "The NVIDIA Driver is present, but CUDA failed to initialize"
_CONTAINER_ERROR = later.compile(r"\[\[ (?P<said>[^\n]{1,400})")
_ERROR_NUMBER = later.compile(r" \(error (?P<number>\d{1,5})\)$")
"""What NVIDIA's NGC containers (PyTorch, Triton, NeMo...) print at start on a GPU they cannot use: a GPU their
builds have no kernels for, or CUDA failing to start, with the CUDA error under it as `[[ Unknown error (error 999) ]]`
(its message capitalised, or cut off where the paste ends)."""


_CONTAINER_CLI = later.compile(
    r"nvidia-container-cli(?:\.real)?: (?P<stage>[a-z]{3,20}) error: (?P<detail>[^\n]{1,400})")
"""libnvidia-container's CLI failing a container (src/cli/configure.c): the stage it stopped at (input, permission,
initialization, container, detection, device, requirement, mount, ldcache) and why. `initialization error` there
names the stage, not CUDA's error of the same words."""
ENGINE_TAILS = (": unknown", "\\n")
"""What the container engine appends to the quoted stderr, besides quotes, dots and blanks: `: unknown` and escaped
newlines."""


def _engine_cut(detail: str) -> str:
    """The CLI's own words, without the tail the engine appended (string cuts: a pattern anchored at the end would be
    tried from every position of a long run of quotes)."""
    while True:
        cut = detail.rstrip(" .\t\\\"'")
        for tail in ENGINE_TAILS:
            cut = cut.removesuffix(tail)
        if cut == detail:
            return detail
        detail = cut


def container_cli(line: Line, pre: Prefixed) -> list[Found]:
    """The runtime's stage error whose detail a phrase of data/cause-phrases.tsv explains (a driver too old for the
    image, NVML not found), read as that phrase; a detail no phrase explains is left to the other detectors."""
    if not (match := _CONTAINER_CLI.search(pre.body)):
        return []
    detail = _engine_cut(match["detail"])
    fields: dict[str, Any] = {"stage": match["stage"], "error": detail, "reporter": "nvidia-container-cli"}
    for phrase in phrases():
        if (hit := phrase.pattern.search(detail)) and phrase.needed_in(detail):
            fields |= phrase.fields(hit)
            return [Found("cause-phrase", line, line, fields, ("cause-phrase", phrase.text), pre.time)]
    return []


def container_banner(ctx: Context, line: Line, pre: Prefixed) -> list[Found]:
    """An NGC container's start-up banner, or the container runtime's stage error (container_cli)."""
    if runtime := container_cli(line, pre):
        return runtime
    if match := _CONTAINER_GPU.search(pre.body):
        fields: dict[str, Any] = {"gpu_name": match["gpu"], "feature": "this container",
                                  "reason": "the container's builds have no kernels for this GPU"}
        return [Found("arch-unsupported", line, line, fields, ("arch-unsupported", "container"), pre.time)]
    if _CONTAINER_INIT not in pre.body:
        return []
    for nxt, p in follow(ctx, line, 2):
        if not (said := _CONTAINER_ERROR.search(p.body)):
            continue
        message = said["said"].strip().removesuffix("]]").strip()
        if number := _ERROR_NUMBER.search(message):
            record = cuda_error(number["number"])
        else:
            record = cuda_error(message) or message_starting(message)
        if record is None:
            return []
        fields = cuda_error_fields(record) | {"reporter": "container entrypoint"}
        kind = cuda_error_kind(record.cause)
        return [Found(kind, line, nxt, fields, (kind, record.name), pre.time)]
    return []
