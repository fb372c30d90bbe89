"""ELF inputs: Linux core files, read like a debugger reads them (postmortem.core).

A core gives one `core-signal` event -- the signal, where it hit, the module
kind of the crashing frame (NVIDIA driver, CUDA library, framework, a user's
extension...) and the GPU-stack facts the mapped files tell -- plus the
`Core` record for the report's `cores` section. Other ELF files are named and
skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from ..core import gpu
from ..core.analysis import CoreRead, read_core
from ..core.report import Signal
from ..debugging import functions_of
from ..model import Event, Location, Options
from ..reader import ByteReader

NAME = "elf-core"


@dataclass(frozen=True)
class CoreResult:
    """What reading one ELF input gave: its format, events, the core's details, diagnostics."""

    format: str
    events: tuple[Event, ...] = ()
    core: Any = None
    diagnostics: tuple[str, ...] = field(default_factory=tuple)


def read(reader: ByteReader, path: str, options: Options) -> CoreResult:
    """Read one ELF input; a core becomes a `core-signal` event and a Core record, a GPU core dump
    (EM_CUDA ET_CORE, .nvcudmp) `gpu-exception` events."""
    if _is_gpu_dump(reader):
        return _gpu_dump(reader, path)
    try:
        found = read_core(reader.read_at, reader.size, path, options.sysroot, tuple(options.debug_dirs),
                          options.show_env, _core_dir(path), exe=options.exe)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not cost the other inputs
        return CoreResult("elf-core", diagnostics=(f"core reader failed ({type(exc).__name__}: {exc})",))
    events: tuple[Event, ...] = ((_signal_event(found, path),)
                                 if found.core is not None and found.core.signal is not None else ())
    if found.core is not None:  # which loaded libraries carry kernels for which GPUs (judged after the join)
        from ..binaries.library_arch import library_events

        process = os.path.basename(found.core.executable) if found.core.executable else None
        events += tuple(library_events(found.core.modules, path, found.core.pid, process))
    return CoreResult(found.format, events, found.core, tuple(found.diagnostics))


def _is_gpu_dump(reader: ByteReader) -> bool:
    head = reader.read_at(0, 20)
    return len(head) == 20 and head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 4 \
        and int.from_bytes(head[18:20], "little") == 190


def _gpu_dump(reader: ByteReader, path: str) -> CoreResult:
    """A CUDA GPU core dump: one `gpu-exception` event per exception (postmortem.binaries.cudadump)."""
    from datetime import datetime

    from ..binaries import cudadump

    try:
        dump = cudadump.read_dump(reader.read_at, reader.size)
        found = cudadump.events_fields(dump, path)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not cost the other inputs
        return CoreResult("nvcudmp", diagnostics=(f"GPU core dump reader failed ({type(exc).__name__}: {exc})",))
    stamp = dump.metadata.get("timestamp")
    when = datetime.fromtimestamp(stamp, UTC) if stamp else None
    events = tuple(Event(kind="gpu-exception", where=Location(path), text=text, fields=fields, time=when,
                         clock="wall" if when else None) for fields, text in found)
    notes = list(dump.diagnostics)
    if not dump.faults:
        notes.append("GPU core dump without a faulting lane or SM exception")
    return CoreResult("nvcudmp", events, diagnostics=tuple(notes))


def _core_dir(path: str) -> str | None:
    """The directory holding the core (or the archive it came in): libraries are also looked for there."""
    outer = path.split("!/", 1)[0]
    directory = os.path.dirname(os.path.abspath(outer))
    return directory if os.path.isdir(directory) else None


def _signal_event(found: CoreRead, path: str) -> Event:
    core = found.core
    assert core is not None and core.signal is not None  # read() makes a signal event only for a core with a signal
    signal = _fault(found)
    crashed = next((t for t in core.threads if t.crashed), None)
    frame = found.crash_frame
    fields: dict[str, Any] = {
        "signal": signal.name, "signal_number": signal.number, "code": signal.code,
        "code_meaning": signal.code_meaning, "address": signal.address, "pid": core.pid,
        "process": os.path.basename(core.executable) if core.executable else None, "executable": core.executable,
    }
    if core.original_fault is not None:  # a handler caught the fault, then re-raised it or aborted
        fields["reraised_by"] = core.original_fault.handler
        fields["delivered_signal"] = core.signal.name
    if signal.in_stack_guard:  # the fault is just below the thread's stack: it overflowed
        fields["stack_overflow"] = True
    if signal.sender_pid is not None:
        fields["sender_pid"] = signal.sender_pid
    if found.fault_module is not None:
        fields["fault_module"] = found.fault_module.name
        fields["fault_module_kind"] = _kind(found.fault_module)
    if frame is not None:
        module = found.crash_module
        fields["crash_module"] = module.name if module else None
        fields["crash_module_kind"] = _kind(module) if module else "unknown"
        fields["crash_symbol"] = frame.symbol
        fields["top_frame"] = frame.symbol or f"?? at {frame.pc}"
        fields["top_module"] = module.name if module else "an unmapped address"
    if crashed is not None:
        fields["functions"] = functions_of({"function": f.symbol} for f in crashed.frames)
        if crashed.python_frames:  # as faulthandler prints it: one crash told by both merges (postmortem.merge)
            top = crashed.python_frames[0]
            fields["python_top"] = f"{top.file}:{top.line} in {top.function}"

    fields.update(core.gpu)
    visible = (core.environment or {}).get("values", {}).get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # the join maps the process's CUDA device ordinals to physical GPUs through it
        fields["cuda_visible_devices"] = visible
    if core.python_version:
        fields["python_version"] = core.python_version
    return Event(kind="core-signal", where=Location(path, offset=found.note_offset), text=_summary(found),
                 fields={k: v for k, v in fields.items() if v is not None})


def _kind(module) -> str:
    return gpu.classify(module.path) if module.is_elf else "data"


def _summary(found: CoreRead) -> str:
    """"SIGSEGV (SEGV_MAPERR) at 0x0 in libcuda.so.570.124.06!cuLaunchKernel+0x1a2"."""
    assert found.core is not None and found.core.signal is not None  # as in _signal_event
    signal = _fault(found)
    text = signal.name
    if signal.code_meaning.split(":")[0] != f"si_code {signal.code}":
        text += f" ({signal.code_meaning.split(':')[0]})"
    if signal.address is not None:
        text += f" at {signal.address}"
    elif signal.sender_pid is not None:
        text += f" from pid {signal.sender_pid}"
    frame = found.crash_frame
    if frame is not None:
        place = (frame.symbol + (f"+{frame.symbol_offset:#x}" if frame.symbol_offset else "")
                 if frame.symbol else frame.pc)
        text += f" in {frame.module or '??'}!{place}"
    if found.core.original_fault is not None:
        text += f"; {found.core.original_fault.handler} re-raised it as {found.core.signal.name}"
    return text


def _fault(found: CoreRead) -> Signal:
    """The signal the verdict is about: the fault under a handler that re-raised it, else the core's own."""
    assert found.core is not None and found.core.signal is not None  # as in _signal_event
    original = found.core.original_fault
    return original.signal if original is not None else found.core.signal
