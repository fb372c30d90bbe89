"""`postmortem gpu-arch`: which GPUs the CUDA libraries under some paths can run on.

Registered on the main group by cli.py; the fatbin reader is imported when the
command runs, so `postmortem --help` does not pay for it.
"""

from __future__ import annotations

import json
from typing import Any

import click


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
@click.option("--kernels", is_flag=True, help="Also list kernel names (decompresses every entry).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def gpu_arch_command(paths: tuple[str, ...], target: str | None, driver: str | None, kernels: bool, fmt: str) -> None:
    """The CUDA device code in files, directories, a virtualenv's site-packages or wheels.

    Lists every fatbin of every ELF file (SASS / PTX / LTO-IR entries, SM
    architecture, PTX ISA, compression). With --target, the verdict per fatbin
    and per library: native, ptx-jit (first launch slow, needs a new enough
    driver) or missing ("no kernel image is available for execution on the device").
    """
    from .scan import judge, scan

    sm, model = target_sm(target)
    inventories, empty, notes, seen_driver = scan(list(paths), kernels)
    driver = driver or seen_driver
    libraries = judge(inventories, sm, driver)
    if fmt == "json":
        click.echo(json.dumps(_json(libraries, sm, model, driver, empty, notes), indent=2))
    else:
        click.echo(_text(libraries, sm, model, driver, empty, notes), nl=False)


def _json(libraries, sm: int | None, model: str | None, driver: str | None, empty: int, notes: list[str]) -> dict:
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
            item = {"offset": fb.offset, "size": fb.size, "entries": [entry(e) for e in fb.entries]}
            if sm is not None:
                item["verdict"] = lib.fatbin_verdicts[i].verdict if lib.fatbin_verdicts[i] else None
                item["detail"] = verdict(lib.fatbin_verdicts[i])
            fatbins.append(item)
        row = {"library": lib.inventory.path, "fatbins": fatbins, "diagnostics": list(lib.inventory.diagnostics)}
        if sm is not None:
            row.update(verdict=lib.verdict.verdict if lib.verdict else None,
                       summary=fatbin.summary(lib.verdict, sm))
        rows.append(row)
    target = {"sm": f"sm_{sm}", "gpu": model} if sm is not None else None
    return {"target": target, "driver": driver, "libraries": rows, "elf_files_without_device_code": empty,
            "diagnostics": notes}


def _text(libraries, sm: int | None, model: str | None, driver: str | None, empty: int, notes: list[str]) -> str:
    from . import fatbin

    lines: list[str] = []
    if sm is not None:
        lines.append(f"target sm_{sm}{f' ({model})' if model else ''}, driver {driver or 'unknown'}")
    for lib in libraries:
        head = lib.inventory.path
        if sm is not None:
            head += f": {fatbin.summary(lib.verdict, sm)}"
        lines.append(head)
        for i, fb in enumerate(lib.inventory.fatbins):
            judged = lib.fatbin_verdicts[i] if sm is not None else None
            note = f"  -> {judged.verdict}{f' ({judged.image})' if judged.image else ''}" if judged else ""
            lines.append(f"  fatbin {i + 1} at {fb.offset:#x}, {len(fb.entries)} entries{note}")
            for e in fb.entries:
                size = f"{e.uncompressed_size or e.payload_size} B"
                extra = " ".join(filter(None,
                                        [f"PTX ISA {e.ptx_isa}" if e.ptx_isa else "", "debug" if e.debug else ""]))
                lines.append(f"    {e.kind:4} {e.arch:13} {e.compression:5} {size:>10}  {extra}".rstrip())
                if e.kernels:
                    lines.append(f"         kernels: {', '.join(e.kernels)}")
        lines.extend(f"  ! {d}" for d in lib.inventory.diagnostics)
    if sm is not None and libraries:
        counts = {v: sum(1 for lib in libraries if lib.verdict and lib.verdict.verdict == v)
                  for v in (fatbin.NATIVE, fatbin.PTX_JIT, fatbin.MISSING)}
        lines.append(f"{len(libraries)} libraries with device code: {counts[fatbin.NATIVE]} native, "
                     f"{counts[fatbin.PTX_JIT]} via PTX JIT, {counts[fatbin.MISSING]} cannot run on sm_{sm}")
    if not libraries:
        lines.append("no CUDA device code found")
    if empty:
        lines.append(f"{empty} ELF file(s) without device code")
    lines.extend(f"! {n}" for n in notes)
    return "\n".join(lines) + "\n"
