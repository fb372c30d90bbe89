"""CUDA GPU core dumps (.nvcudmp), read without cuda-gdb.

The driver writes one when a kernel faults with CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1.
It is an ELF file (EM_CUDA, ET_CORE) whose `.cudbg.*` sections are tables:
devices -> contexts -> modules (with each module's relocated cubin), devices
-> grids, devices -> SMs -> blocks (CTAs) -> warps -> lanes. NVIDIA publishes
the layout as `cudacoredump.h` (formats.md Q6). Tables are navigated by
section type and sh_link (the parent table) / sh_info (the row in it), never
by name. Rows only grow across driver versions, so each row is read up to its
known prefix and missing fields are zero; a longer row (newer driver) or an
unknown section type is a diagnostic, not a failure.

A dump is hostile input: many section headers may name one region, so each
region is decoded once, and all regions together are read up to MAX_DUMP_BYTES;
of the lane tables only the faulting lanes are kept, MAX_FAULTS of them.

Checked only against dumps written to the published layout (tests/helpers'
builder, with a real nvcc cubin): no real dump was at hand.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

from .. import later
from ..core import elf
from ..core.elf import ElfError, Read
from ..debugging import CUDA_EXCEPTIONS

EM_CUDA = 190
SHT_LOUSER = 0x80000000
(MANAGED_MEM, GLOBAL_MEM, LOCAL_MEM, SHARED_MEM, DEV_REGS, ELF_IMG, RELF_IMG, BT, DEV_TABLE, CTX_TABLE, SM_TABLE,
 GRID_TABLE, CTA_TABLE, WP_TABLE, LN_TABLE, MOD_TABLE, DEV_PRED, PARAM_MEM, DEV_UREGS, DEV_UPRED, CB_TABLE,
 META_DATA, CBU_BAR) = range(SHT_LOUSER + 1, SHT_LOUSER + 24)
_SHDR = struct.Struct("<IIQQQQIIQQ")
_STANDARD_TYPES = frozenset(range(20))
MAX_TABLE = 64 << 20
"""Bytes of one table or string table read."""
MAX_DUMP_BYTES = 256 << 20
"""Table and device-image bytes decoded from one dump, all sections together: every lane of eight
H100s (8 x 132 SMs x 64 warps x 32 lanes, 64-byte rows) is about 140 MiB."""
MAX_FAULTS = 100_000
"""Faulting lanes kept; past it they are counted in a diagnostic only (each is a row of the report's count)."""

# Row layouts: (struct of the fields read, the row size at the newest driver this reader knows).
_ROWS: dict[int, tuple[struct.Struct, int]] = {
    DEV_TABLE: (struct.Struct("<QQQIIIIIIIIIIIIIIII"), 88),
    CTX_TABLE: (struct.Struct("<QQQQII"), 40),
    MOD_TABLE: (struct.Struct("<Q"), 8),
    GRID_TABLE: (struct.Struct("<QQQQQQQIIIIIIIIIIII"), 136),
    SM_TABLE: (struct.Struct("<IIIIQ"), 48),
    CTA_TABLE: (struct.Struct("<QIII"), 56),
    WP_TABLE: (struct.Struct("<QIIIII"), 80),
    LN_TABLE: (struct.Struct("<QQIIIIII"), 64),
    META_DATA: (struct.Struct("<QIIIIII"), 32),
}
_BASE_SIZE = {DEV_TABLE: 72, CTX_TABLE: 40, MOD_TABLE: 8, GRID_TABLE: 104, SM_TABLE: 8, CTA_TABLE: 24,
              WP_TABLE: 32, LN_TABLE: 48, META_DATA: 32}
"""Row sizes of the first driver that wrote each table: a shorter row is not this layout."""
_NAMES = {DEV_TABLE: "device", CTX_TABLE: "context", MOD_TABLE: "module", GRID_TABLE: "grid", SM_TABLE: "SM",
          CTA_TABLE: "block", WP_TABLE: "warp", LN_TABLE: "lane", META_DATA: "metadata"}
_FILE_NAME = later.compile(r"core_(?P<time>\d+)_(?P<host>.{1,255})_(?P<pid>\d+)\.nvcudmp$")  # a host name: 255 at most


@dataclass(frozen=True)
class _Section:
    index: int
    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Fault:
    """One faulting lane (or an SM that recorded an exception after its warps exited)."""

    exception: int
    device: int
    sm_id: int
    warp: int | None
    lane: int | None
    block: tuple[int, int, int] | None
    thread: tuple[int, int, int] | None
    pc: int | None
    grid_id: int | None


@dataclass
class Dump:
    """What a GPU core dump says."""

    devices: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    grids: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    """(device, gridId64) -> grid row fields."""
    functions: list[tuple[int, int, str]] = field(default_factory=list)
    """(start, size, mangled name) of every function in the relocated cubins."""
    diagnostics: list[str] = field(default_factory=list)


def is_gpu_dump(head: elf.Header) -> bool:
    return head.machine == EM_CUDA and head.type == elf.ET_CORE


def read_dump(read: Read, size: int) -> Dump:
    """Every table of the dump; what cannot be read is a diagnostic on the result."""
    dump = Dump()
    try:
        head = elf.header(read)
        sections = _sections(read, head)
    except ElfError as exc:
        dump.diagnostics.append(f"GPU core dump unreadable: {exc}")
        return dump
    strings = _strings(read, head, sections)
    unknown = sorted({s.type for s in sections if s.type not in _STANDARD_TYPES and not SHT_LOUSER < s.type <= CBU_BAR})
    if unknown:
        dump.diagnostics.append("section types this reader does not know (a newer driver?): "
                                + ", ".join(f"{t:#x}" for t in unknown) + "; skipped")
    budget = _Budget()
    rows = {s.index: _rows(read, s, dump.diagnostics, budget) for s in sections if s.type in _ROWS}
    by_index = {s.index: s for s in sections}
    for s in sections:
        if s.type == DEV_TABLE:
            dump.devices.extend(_device(r, strings) for r in rows[s.index])
        elif s.type == META_DATA and rows[s.index]:
            dump.metadata = _metadata(rows[s.index][0], strings)
        elif s.type == GRID_TABLE:
            for r in rows[s.index]:
                dump.grids[(s.info, r[0])] = _grid(r)
        elif s.type == RELF_IMG and (s.offset, s.size) not in budget.images:
            budget.images.add((s.offset, s.size))
            dump.functions.extend(_functions(read, s, dump.diagnostics, budget))
    _faults(sections, by_index, rows, dump, budget.dropped)
    return dump


def _sections(read: Read, head: elf.Header) -> list[_Section]:
    raw = elf.read_exact(read, head.shoff, head.shnum * _SHDR.size, "section headers")
    table = list(_SHDR.iter_unpack(raw))
    names = b""
    if head.shstrndx < len(table):
        names = read(table[head.shstrndx][4], min(table[head.shstrndx][5], MAX_TABLE))
    found = []
    for i, (name_at, stype, _flags, addr, offset, size, link, info, _align, entsize) in enumerate(table):
        end = names.find(b"\0", name_at)
        found.append(_Section(i, names[name_at:end if end >= 0 else None].decode("ascii", "replace"), stype, addr,
                              offset, size, link, info, entsize))
    return found


def _strings(read: Read, head: elf.Header, sections: list[_Section]) -> bytes:
    """The string table the device and metadata rows index: `.strtab`, else the section-name table."""
    table = next((s for s in sections if s.type == 3 and s.name == ".strtab"), None)
    table = table or next((s for s in sections if s.index == head.shstrndx), None)
    return read(table.offset, min(table.size, MAX_TABLE)) if table else b""


def _string(strings: bytes, at: int) -> str | None:
    if not 0 <= at < len(strings):
        return None
    end = strings.find(b"\0", at)
    return strings[at:end if end >= 0 else None].decode("utf-8", "replace") or None


@dataclass
class _Budget:
    """What one dump may still decode, and the regions already decoded (by offset and size)."""

    left: int = MAX_DUMP_BYTES
    lanes: int = MAX_FAULTS
    """Faulting lane rows still kept; past it they are only counted, in `dropped`."""
    dropped: int = 0
    tables: dict[tuple[int, int, int, int], list[tuple]] = field(default_factory=dict)
    images: set[tuple[int, int]] = field(default_factory=set)

    def take(self, size: int, what: str, notes: list[str]) -> int:
        """How many of `size` bytes may be read for `what`; a diagnostic when not all."""
        allowed = max(0, min(size, self.left, MAX_TABLE))
        self.left -= allowed
        if allowed < size:
            notes.append(f"{what}: {allowed} of its {size} bytes read (one table is read up to {MAX_TABLE >> 20} "
                         f"MiB, a whole dump up to {MAX_DUMP_BYTES >> 20} MiB)")
        return allowed


def _rows(read: Read, section: _Section, notes: list[str], budget: _Budget) -> list[tuple]:
    """The rows of one table (faulting rows only, for lanes), each cut or zero-filled to the known fields.

    Sections naming the same bytes share one decoding."""
    key = (section.offset, section.size, section.entsize, section.type)
    if key not in budget.tables:
        budget.tables[key] = _decode(read, section, notes, budget)
    return budget.tables[key]


def _decode(read: Read, section: _Section, notes: list[str], budget: _Budget) -> list[tuple]:
    layout, newest = _ROWS[section.type]
    what = _NAMES[section.type]
    stride = section.entsize or newest
    if stride < _BASE_SIZE[section.type]:
        notes.append(f"{section.name or what + ' table'}: rows of {stride} bytes are shorter than any known "
                     f"layout ({_BASE_SIZE[section.type]}); table skipped")
        return []
    if stride > newest:
        notes.append(f"{section.name or what + ' table'}: rows of {stride} bytes, newer than this reader "
                     f"({newest}); the known fields are read")
    wanted = budget.take(section.size, section.name or what + " table", notes)
    data = read(section.offset, wanted)
    if len(data) < wanted:
        notes.append(f"{section.name or what + ' table'} cut off ({len(data)} of {section.size} bytes)")
    rows = []
    for at in range(0, len(data) - stride + 1, stride):
        row = layout.unpack(data[at:at + stride][:layout.size].ljust(layout.size, b"\0"))
        if section.type != LN_TABLE:
            rows.append(row)
        elif row[6] and budget.lanes > 0:
            budget.lanes -= 1
            rows.append(row)
        elif row[6]:
            budget.dropped += 1
    return rows


def _device(row: tuple, strings: bytes) -> dict[str, Any]:
    name, dev_type, sm_type, _dev_id, _bus, _pci_dev, num_sms, warps, lanes, _regs, _preds, major, minor = row[:13]
    found = {"name": _string(strings, name), "type": _string(strings, dev_type),
             "sm_type": _string(strings, sm_type), "sm_count": num_sms, "warps_per_sm": warps,
             "lanes_per_warp": lanes}
    if major:
        found["sm"] = f"sm_{major}{minor}"
    return found


def _metadata(row: tuple, strings: bytes) -> dict[str, Any]:
    generator, drv_major, drv_minor, cuda_major, cuda_minor, flags, timestamp = row
    found: dict[str, Any] = {"generator": _string(strings, generator), "flags": flags, "timestamp": timestamp}
    if drv_major:
        found["driver_version"] = f"{drv_major}.{drv_minor:02d}"
    if cuda_major:
        found["cuda_version"] = f"{cuda_major}.{cuda_minor}"
    return found


def _grid(row: tuple) -> dict[str, Any]:
    (grid_id, _ctx, _function, entry, module, _parent, _params, _ktype, _origin, _status, regs,
     gx, gy, gz, bx, by, bz, _blocking, host_tid) = row
    return {"grid_id": grid_id, "function_entry": entry, "module": module, "registers": regs,
            "grid_dim": (gx, gy, gz), "block_dim": (bx, by, bz), "host_tid": host_tid}


def _functions(read: Read, section: _Section, notes: list[str], budget: _Budget) -> list[tuple[int, int, str]]:
    """Functions of one relocated cubin: their symbol values are the addresses the device ran them at."""
    from .fatbin import cubin_functions

    wanted = budget.take(section.size, f"relocated device image {section.name}", notes)
    try:
        return [(value, size, name) for name, value, size, _other in cubin_functions(read(section.offset, wanted))]
    except ElfError as exc:
        notes.append(f"relocated device image {section.name} (module {section.info}) unreadable: {exc}")
        return []


def _faults(sections: list[_Section], by_index: dict[int, _Section], rows: dict[int, list[tuple]],
            dump: Dump, dropped: int) -> None:
    """Faulting lanes, found by walking lane -> warp -> block -> SM -> device through sh_link / sh_info.

    `dropped` faulting lanes were not kept when their tables were decoded; past MAX_FAULTS more are not.
    """

    def parent(section: _Section, kind: int) -> tuple[_Section, tuple] | None:
        up = by_index.get(section.link)
        if up is None or up.type != kind or section.info >= len(rows.get(up.index, ())):
            dump.diagnostics.append(f"{section.name}: its link/info name no {_NAMES[kind]} row; skipped")
            return None
        return up, rows[up.index][section.info]

    lane_faults = set()
    tables = set()
    for s in sections:
        if s.type != LN_TABLE or not rows[s.index] or (s.offset, s.size, s.link, s.info) in tables:
            continue  # no faulting lane, or the very table of a section already read
        tables.add((s.offset, s.size, s.link, s.info))
        chain = parent(s, WP_TABLE)
        cta = parent(chain[0], CTA_TABLE) if chain else None
        sm = parent(cta[0], SM_TABLE) if cta else None
        if not chain or not cta or not sm:
            continue
        warp, block, sm_row = chain[1], cta[1], sm[1]
        device = sm[0].info
        lane_faults.add((device, sm_row[0]))
        for lane in rows[s.index]:
            if len(dump.faults) >= MAX_FAULTS:
                dropped += 1
                continue
            pc = warp[0] if warp[5] else lane[0]
            dump.faults.append(Fault(lane[6], device, sm_row[0], warp[1], lane[2], block[1:4], lane[3:6], pc,
                                     block[0]))
    if dropped:
        dump.diagnostics.append(f"more than {MAX_FAULTS} faulting lanes ({dropped} past them): only the first "
                                f"{MAX_FAULTS} are read, so the lane counts are too low")
    for s in sections:  # r555+: an SM keeps its exception after the faulting warps exited
        if s.type == SM_TABLE:
            for sm_id, _pad, exception, pc_valid, pc in rows[s.index]:
                if exception and (s.info, sm_id) not in lane_faults:
                    dump.faults.append(Fault(exception, s.info, sm_id, None, None, None, None,
                                             pc if pc_valid else None, None))


def where(dump: Dump, pc: int | None) -> tuple[str, int] | None:
    """(mangled function, offset) of a device PC in the relocated images."""
    if pc is None:
        return None
    for start, size, name in dump.functions:
        if start <= pc < start + max(size, 1):
            return name, pc - start
    return None


def exception_name(number: int) -> str:
    return CUDA_EXCEPTIONS.get(number, f"CUDA exception {number}")


def _triple(value: tuple[int, int, int] | None) -> str | None:
    return None if value is None else "(" + ",".join(str(v) for v in value) + ")"


def events_fields(dump: Dump, path: str) -> list[tuple[dict[str, Any], str]]:
    """(fields, one-line summary) per distinct exception: the first faulting lane of each, with how many lanes."""
    from ..core.symbols import demangle

    groups: dict[tuple, list[Fault]] = {}
    for fault in dump.faults:
        groups.setdefault((fault.device, fault.exception, fault.grid_id), []).append(fault)
    names = {w[0] for faults in groups.values() if (w := where(dump, faults[0].pc))}
    names |= {name for _, _, name in dump.functions}
    plain = demangle(names)
    found = []
    from_name = _FILE_NAME.search(os.path.basename(path.split("!/")[-1]))
    for (device, exception, grid_id), faults in groups.items():
        first = faults[0]
        fields: dict[str, Any] = {"exception": exception, "exception_name": exception_name(exception),
                                  "device": device, "sm_id": first.sm_id, "warp": first.warp, "lane": first.lane,
                                  "block": _triple(first.block), "thread": _triple(first.thread),
                                  "lanes_faulted": len(faults), "source_format": "nvcudmp"}
        if first.pc is not None:
            fields["pc"] = hex(first.pc)
        site = where(dump, first.pc)
        grid = dump.grids.get((device, grid_id)) if grid_id is not None else None
        if site is None and grid is not None:
            entry = next(((s, n) for s, _z, n in dump.functions if s == grid["function_entry"]), None)
            site = (entry[1], first.pc - entry[0]) if entry and first.pc is not None else None
            fields["kernel"] = plain.get(entry[1], entry[1]) if entry else None
        if site is not None:
            fields["kernel"] = plain.get(site[0], site[0])
            fields["kernel_mangled"] = site[0]
            fields["where"] = f"{fields['kernel']}+{site[1]:#x}"
        if grid is not None:
            fields.update(grid=grid["grid_id"], grid_dim=_triple(grid["grid_dim"]),
                          block_dim=_triple(grid["block_dim"]))
        if device < len(dump.devices):
            dev = dump.devices[device]
            fields.update(gpu_name=dev.get("name"), sm=dev.get("sm") or dev.get("sm_type"),
                          sm_count=dev.get("sm_count"))
        fields.update({k: v for k, v in dump.metadata.items() if k in ("driver_version", "cuda_version")})
        if from_name:
            fields.update(pid=int(from_name.group("pid")), host=from_name.group("host"))
        summary = (f"CUDA Exception: {fields['exception_name']} in "
                   f"{fields.get('where') or fields.get('kernel') or '??'}"
                   f" on device {device}, block {fields['block'] or '?'} thread {fields['thread'] or '?'} "
                   f"(SM {first.sm_id}, warp {first.warp}, lane {first.lane})")
        found.append(({k: v for k, v in fields.items() if v is not None}, summary))
    return found
