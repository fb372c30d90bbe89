"""`postmortem gpu-arch`: which GPUs the CUDA libraries under some paths can run on.

Registered on the main group by cli.py; the fatbin reader is imported when the
command runs, so `postmortem --help` does not pay for it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from ..render.terminal import reply
from .fatbin import MISSING, PTX_JIT

if TYPE_CHECKING:
    from .scan import Library

FAIL_ON = {MISSING: (MISSING,), PTX_JIT: (PTX_JIT, MISSING)}
"""--fail-on VALUE -> the library verdicts that make the exit status 1 (that verdict or worse)."""


def target_sm(value: str | None) -> tuple[int | None, str | None]:
    """(SM number, GPU model) for 'sm_120', '120', '12.0', 'compute_120' or a GPU name such as 'RTX 5090'."""
    if not value:
        return None, None
    from ..knowledge import gpu_arch, short_gpu_name, sm_number

    number = sm_number(value)
    if number is not None:
        return number, None
    found = gpu_arch(value)
    if found is None:
        raise click.BadParameter(f"{value!r} is neither an sm (sm_120, 12.0) nor a GPU model the architecture table "
                                 "knows", param_hint="--target")
    return found.number, short_gpu_name(value)


@click.command("gpu-arch")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--target", default=None, help="GPU to judge against: sm_120, 12.0 or a model such as \"RTX 5090\".")
@click.option("--driver", default=None, help="NVIDIA driver version (e.g. 570.124.06): PTX newer than it can JIT "
                                             "does not count; default: a libcuda.so.<version> among the inputs.")
@click.option("--kernels", is_flag=True, help="Also list kernel names (decompresses every entry; implies -v).")
@click.option("-v", "--verbose", is_flag=True, help="Every fatbin and entry of each library, not just its verdict.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None,
              help="Exit 1 when a library cannot run on --target (missing), or runs only via PTX JIT or not at all "
                   "(ptx-jit); for gating CI. Default: exit 0 whatever is found.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def gpu_arch_command(paths: tuple[str, ...], target: str | None, driver: str | None, kernels: bool, verbose: bool,
                     fail_on: str | None, fmt: str) -> None:
    """The CUDA device code in files, directories, a virtualenv's site-packages or wheels.

    Lists every fatbin of every ELF file (SASS / PTX / LTO-IR entries, SM
    architecture, PTX ISA, compression). With --target, the verdict per fatbin
    and per library: native, ptx-jit (first launch slow, needs a new enough
    driver) or missing ("no kernel image is available for execution on the device").
    Fatbins that define no kernels (nvcc's device-link stub) are shown but never
    decide a verdict. A driver older than the target's architecture runs nothing.
    """
    from .scan import judge, scan

    if fail_on and not target:
        raise click.UsageError("--fail-on needs --target: a verdict is always for one GPU")
    sm, model = target_sm(target)
    inventories, empty, notes, seen_driver = scan(list(paths), kernels)
    driver = driver or seen_driver
    libraries = judge(inventories, sm, driver)
    if fmt == "json":
        reply(json.dumps(_json(libraries, sm, model, driver, empty, notes), indent=2), data=True)
    else:
        reply(_text(libraries, sm, model, driver, empty, notes, verbose or kernels), nl=False)
    if fail_on and any(lib.verdict and lib.verdict.verdict in FAIL_ON[fail_on] for lib in libraries):
        raise SystemExit(1)


def _json(libraries: list[Library], sm: int | None, model: str | None, driver: str | None, empty: int,
          notes: list[str]) -> dict:
    from . import fatbin

    def entry(e: fatbin.Entry) -> dict:
        found: dict[str, Any] = {"kind": e.kind, "arch": e.arch, "ptx_isa": e.ptx_isa, "compression": e.compression,
                 "offset": e.offset, "size": e.payload_size, "compressed_size": e.compressed_size or None,
                 "uncompressed_size": e.uncompressed_size or None, "flags": hex(e.flags), "debug": e.debug}
        if e.kernels is not None:
            found["kernels"] = list(e.kernels)
        return found

    def verdict(v: fatbin.Verdict | None) -> dict | None:
        return None if v is None else {k: val for k, val in vars(v).items() if val is not None}

    rows = []
    for lib in libraries:
        fatbins = []
        for i, fb in enumerate(lib.inventory.fatbins):
            judged = lib.fatbin_verdicts[i] if sm is not None else None
            item: dict[str, Any] = {"offset": fb.offset, "size": fb.size, "has_kernels": fb.has_kernels,
                    "entries": [entry(e) for e in fb.entries]}
            if sm is not None:
                item["verdict"] = judged.verdict if judged else None
                item["detail"] = verdict(judged)
            fatbins.append(item)
        row: dict[str, Any] = {"library": lib.inventory.path, "fatbins": fatbins,
                               "diagnostics": list(lib.inventory.diagnostics)}
        if sm is not None:
            row.update(verdict=lib.verdict.verdict if lib.verdict else None,
                       summary=fatbin.summary(lib.verdict, sm))
        rows.append(row)
    target = {"sm": f"sm_{sm}", "gpu": model} if sm is not None else None
    return {"target": target, "driver": driver, "libraries": rows, "elf_files_without_device_code": empty,
            "diagnostics": notes}


def _text(libraries: list[Library], sm: int | None, model: str | None, driver: str | None, empty: int, notes: list[str],
          verbose: bool) -> str:
    """The summary first, one line per library, then (verbose) every fatbin and entry."""
    from . import fatbin

    lines: list[str] = []
    if sm is not None:
        predates = fatbin.driver_predates(sm, driver)
        lines.append(f"target sm_{sm}{f' ({model})' if model else ''}, driver {driver or 'unknown'}"
                     + (f": {predates}" if predates else ""))
    if sm is not None and libraries:
        counts = {v: sum(1 for lib in libraries if lib.verdict and lib.verdict.verdict == v)
                  for v in (fatbin.NATIVE, fatbin.PTX_JIT, fatbin.MISSING)}
        lines.append(f"{len(libraries)} libraries with device code: {counts[fatbin.NATIVE]} native, "
                     f"{counts[fatbin.PTX_JIT]} via PTX JIT, {counts[fatbin.MISSING]} cannot run on sm_{sm}")
    elif libraries:
        lines.append(f"{len(libraries)} libraries with device code")
    for lib in libraries:
        lines.append(f"{lib.inventory.path}: {_library_line(lib, sm)}")
        if verbose:
            lines.extend(_fatbin_lines(lib, sm))
        lines.extend(f"  ! {d}" for d in lib.inventory.diagnostics)
    if not libraries:
        lines.append("no CUDA device code found")
    if empty:
        lines.append(f"{empty} ELF file(s) without device code")
    lines.extend(f"! {n}" for n in notes)
    return "\n".join(lines) + "\n"


def _library_line(lib: Library, sm: int | None) -> str:
    """The verdict (or, without a target, the images), and how many kernel-less fatbins were left out."""
    from . import fatbin

    stubs = sum(1 for fb in lib.inventory.fatbins if fb.has_kernels is False)
    if sm is not None:
        head = fatbin.summary(lib.verdict, sm)
    else:
        images = {e.arch for fb in lib.inventory.fatbins for e in fb.entries if e.kind in ("sass", "ptx", "lto")}
        head = f"{len(lib.inventory.fatbins)} fatbin(s), " + (" ".join(sorted(images, key=_by_sm)) or "no images")
    return head + (f" ({stubs} fatbin(s) without kernels left out)" if stubs and sm is not None else "")


def _by_sm(arch: str) -> tuple[int, str]:
    from ..knowledge import sm_number

    return sm_number(arch.split("_", 1)[-1].rstrip("af")) or 0, arch


def _fatbin_lines(lib: Library, sm: int | None) -> list[str]:
    """Every fatbin of a library with its verdict, and every entry (with kernel names when read)."""
    lines = []
    for i, fb in enumerate(lib.inventory.fatbins):
        judged = lib.fatbin_verdicts[i] if sm is not None else None
        note = f"  -> {judged.verdict}{f' ({judged.image})' if judged.image else ''}" if judged else ""
        stub = ", no kernels" if fb.has_kernels is False and not judged else ""
        lines.append(f"  fatbin {i + 1} at {fb.offset:#x}, {len(fb.entries)} entries{stub}{note}")
        for e in fb.entries:
            size = f"{e.uncompressed_size or e.payload_size} B"
            extra = " ".join(filter(None, [f"PTX ISA {e.ptx_isa}" if e.ptx_isa else "", "debug" if e.debug else ""]))
            lines.append(f"    {e.kind:4} {e.arch:13} {e.compression:5} {size:>10}  {extra}".rstrip())
            if e.kernels:
                lines.append(f"         kernels: {', '.join(e.kernels)}")
    return lines
