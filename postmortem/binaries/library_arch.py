"""Which libraries a crashed process loaded have no kernel for its GPU (`library-arch` events).

The core-file source lists the device code of every library the core maps and
that is reachable (on this machine or under --sysroot): one `library-arch`
event per library, with its fatbins' images. The GPU is usually named by
another input (the framework's warning, nvidia-smi), so the verdict is set
after the join, once all events are known: `with_library_verdicts` judges each
library for that GPU (native / ptx-jit / missing) and names the missing ones on
the events that report the architecture problem (`missing_libraries`), so the
arch-mismatch finding says which libraries lack the GPU's architecture.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

from ..knowledge import describe_arch
from ..model import Event, Location
from . import fatbin

SKIPPED_KINDS = frozenset({"nvidia-driver", "runtime", "python", "data"})
"""Module kinds that never carry fatbins worth judging (the driver JIT-compiles, it does not ship kernels)."""
ARCH_KINDS = frozenset({"arch-unsupported"})


def library_events(modules: Iterable[Any], path: str, pid: int | None, process: str | None) -> list[Event]:
    """One `library-arch` event per mapped, reachable library with device code (header reads only)."""
    events = []
    for module in modules:
        if module.kind in SKIPPED_KINDS or not module.found_at:
            continue
        try:
            read, size, close = fatbin.file_reader(module.found_at)
        except OSError:
            continue
        try:
            found = fatbin.inventory(read, size, module.found_at)
        finally:
            close()
        images = sorted({" ".join(_image(e) for e in fb.entries if e.kind in ("sass", "ptx"))
                         for fb in found.fatbins if fb.has_kernels is not False} - {""})  # stubs cannot fail a launch
        if not images:
            continue
        fields = {"library": os.path.basename(module.path), "library_path": module.path, "found_at": module.found_at,
                  "fatbins": len(found.fatbins), "fatbin_images": images, "pid": pid, "process": process}
        text = f"{fields['library']}: {len(found.fatbins)} fatbin(s); device code for " + \
            " ".join(sorted({i for line in images for i in line.split()}, key=_order))
        events.append(Event(kind="library-arch", where=Location(path), text=text,
                            fields={k: v for k, v in fields.items() if v is not None}))
    return events


@dataclasses.dataclass(frozen=True)
class NamedLibrary:
    """A shared library a log names (a backtrace frame's module), seen as library_events sees a core's module."""

    path: str
    kind: str
    found_at: str | None


def libraries_in_logs(events: Sequence[Event], sysroot: str | None) -> list[Event]:
    """`library-arch` events for the shared libraries that backtraces in the logs name, when an arch problem
    is reported and the files are reachable (on this machine or under --sysroot); cores report their own."""
    if not any(_arch_problem(e) for e in events):
        return []
    from ..core.gpu import classify

    known = {e.fields.get("library_path") for e in events if e.kind == "library-arch"}
    named: dict[str, Event] = {}
    for event in events:
        for frame in event.fields.get("frames") or ():
            module = frame.get("module") if isinstance(frame, dict) else None
            if isinstance(module, str) and module.startswith("/") and ".so" in module and module not in known:
                named.setdefault(module, event)
    found = []
    for path, event in named.items():
        on_disk = os.path.join(sysroot, path.lstrip("/")) if sysroot else path
        library = NamedLibrary(path, classify(path), on_disk if os.path.isfile(on_disk) else None)
        found.extend(library_events([library], event.where.path, event.fields.get("pid"), event.fields.get("process")))
    return found


def _image(entry: fatbin.Entry) -> str:
    """'sm_90a' for SASS, 'compute_120@9.0' for PTX (with its ISA version)."""
    return f"{entry.arch}@{entry.ptx_isa}" if entry.kind == "ptx" else entry.arch


def _order(image: str) -> tuple[int, str]:
    digits = "".join(c for c in image.split("@")[0] if c.isdigit())
    return int(digits or 0), image


def _parsed(image: str) -> tuple[str, int, str, str | None]:
    """'compute_120@9.0' -> ('ptx', 120, '', '9.0'); 'sm_90a' -> ('sass', 90, 'a', None)."""
    arch, _, isa = image.partition("@")
    kind = "ptx" if arch.startswith("compute_") else "sass"
    body = arch.split("_", 1)[1]
    variant = body[-1] if body[-1] in "af" else ""
    return kind, int(body.rstrip("af")), variant, isa or None


def judge(fatbin_images: Sequence[str], target: int, driver: str | None) -> fatbin.Verdict | None:
    """A library's verdict from its `fatbin_images` field: its worst fatbin."""
    return fatbin.worst(fatbin.verdict([_parsed(i) for i in line.split()], target, driver) for line in fatbin_images)


def with_library_verdicts(events: Sequence[Event]) -> list[Event]:
    """`library-arch` events judged for the GPU the inputs name; the missing libraries named on arch events."""
    libraries = [e for e in events if e.kind == "library-arch"]
    target = _target(events) if libraries else None
    if target is None:
        return list(events)
    sm, model = target
    driver = _sole({str(e.fields["driver_version"]) for e in events if e.fields.get("driver_version")})
    judged: dict[int, dict[str, Any]] = {}
    for event in libraries:
        result = judge(event.fields.get("fatbin_images", ()), sm, driver)
        if result is not None:
            judged[id(event)] = {"sm": f"sm_{sm}", "verdict": result.verdict,
                                 "verdict_summary": fatbin.summary(result, sm),
                                 **({"gpu_name": model} if model else {}),
                                 **describe_arch(model, f"sm_{sm}")}
    missing = sorted({e.fields["library"] for e in libraries if judged.get(id(e), {}).get("verdict") == fatbin.MISSING})
    named = {"missing_libraries": ", ".join(missing)} if missing else {}
    enriched = []
    for event in events:
        added = {**judged.get(id(event), {}), **(named if _arch_problem(event) or id(event) in judged else {})}
        added = {k: v for k, v in added.items() if k not in event.fields}
        enriched.append(dataclasses.replace(event, fields={**event.fields, **added}) if added else event)
    return enriched


def _arch_problem(event: Event) -> bool:
    if event.kind in ARCH_KINDS:
        return True
    from ..knowledge import cuda_error

    record = cuda_error(event.fields["error"]) if event.fields.get("error") else None
    return record is not None and record.cause == "arch-mismatch"


def _target(events: Sequence[Event]) -> tuple[int, str | None] | None:
    """(SM number, GPU name) of the GPU the inputs name: an arch problem's own sm first, else the sole GPU model."""
    from ..knowledge import gpu_arch, sm_number

    for event in events:
        if _arch_problem(event) and (sm := sm_number(event.fields.get("sm"))) is not None:
            return sm, event.fields.get("gpu_name")
    found = {(a.number, str(e.fields["gpu_name"])) for e in events
             if e.kind != "library-arch" and e.fields.get("gpu_name") and (a := gpu_arch(str(e.fields["gpu_name"])))}
    numbers = {number for number, _ in found}
    if len(numbers) != 1:
        return None
    return next(iter(numbers)), sorted(name for _, name in found)[0]


def _sole(values: set[str]) -> str | None:
    return next(iter(values)) if len(values) == 1 else None
