"""CUDA fatbins in ELF files: what device code a library carries, and whether a GPU can run it.

A fatbin is a 16-byte header (magic 0xBA55ED50, version, header size, size of
the entries) followed by entries, each a 64+ byte header and a payload: SASS
(a cubin for one SM), PTX text or LTO-IR, stored, LZ4-block or ZSTD
compressed. A `.so` holds several back to back (one per translation unit,
plus device-link ones). Listing needs only the headers; payloads are
decompressed for kernel names, and for whether a fatbin defines any kernel
(as few as that takes: `_kernel_presence`). Layout: formats.md Q7 (checked against
nvcc 13 output).

Bad input never raises: a truncated fatbin, sizes past the end of the file or
a corrupt payload becomes a diagnostic on that file and the rest is listed.
"""

from __future__ import annotations

import csv
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cache

from ..core import elf
from ..core.elf import ElfError, Read
from ..knowledge import data_text

MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQ8xQ")
_SYM = struct.Struct("<IBBHQQ")
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
MAX_ENTRY_HEADER = 4096
MAX_PAYLOAD = 256 << 20
MAX_IMAGE = 512 << 20
"""Largest decompressed entry image: real cubins and PTX are kilobytes to tens of MiB; a bigger claim
(1 TiB, 2**63) is refused before any buffer is made for it."""
MAX_KERNEL_UNPACK = 4 << 30
"""Most bytes decompressed for kernel names in one file (--kernels): ZSTD inflates runs of zeros some
30,000-fold, so the file's size does not bound what its entries inflate to."""
SCAN_CHUNK = 8 << 20

KINDS = {1: "ptx", 2: "sass", 8: "lto"}
FLAG_64BIT, FLAG_DEBUG, FLAG_LZ4, FLAG_ZSTD = 0x1, 0x2, 0x2000, 0x8000
FLAG_LTO, FLAG_ARCH_A, FLAG_FAMILY_F = 0x10000, 0x100000, 0x200000
STT_FUNC, STO_CUDA_ENTRY = 2, 0x10


@dataclass(frozen=True)
class Entry:
    """One image in a fatbin: SASS for one SM, PTX for a virtual arch, or LTO-IR."""

    kind: str
    """sass, ptx, lto (or 'kind N' for an unknown number)."""
    arch: str
    """sm_90, sm_90a, sm_120f for SASS; compute_120 for PTX; lto_90 for LTO-IR."""
    sm: int
    variant: str
    """'' , 'a' (arch-specific: runs only on that exact SM) or 'f' (family-specific)."""
    ptx_isa: str | None
    """The PTX ISA version of a PTX entry ('9.0'); None for others."""
    compression: str
    """none, lz4 or zstd."""
    offset: int
    """File offset of the entry header."""
    header_size: int
    payload_size: int
    compressed_size: int
    uncompressed_size: int
    flags: int
    kernels: tuple[str, ...] | None = None

    @property
    def debug(self) -> bool:
        return bool(self.flags & FLAG_DEBUG)

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_size


@dataclass(frozen=True)
class Fatbin:
    """One fatbin container: where it is and its entries."""

    offset: int
    size: int
    entries: tuple[Entry, ...]
    has_kernels: bool | None = None
    """False when no entry defines a kernel (nvcc's device-link fatbin of a `-shared` build): such a fatbin is
    never loaded for a launch, so it cannot cause "no kernel image". None when not known: a payload unreadable,
    or not read because a fatbin with the same images was already found to define kernels."""


@dataclass(frozen=True)
class Inventory:
    """The fatbins of one file, with what could not be read."""

    path: str
    fatbins: tuple[Fatbin, ...]
    diagnostics: tuple[str, ...] = field(default_factory=tuple)


# ------------------------------------------------------------------ finding and parsing


def inventory(read: Read, size: int, path: str, kernels: bool = False) -> Inventory:
    """Every fatbin of one file: in its fatbin sections, else (no section headers) anywhere in it."""
    notes: list[str] = []
    regions = _regions(read, size, notes)
    fatbins = [fb for start, end in regions for fb in _fatbins_in(read, start, min(end, size), size, notes)]
    budget = [MAX_KERNEL_UNPACK]
    if kernels:
        fatbins = [replace(fb, entries=tuple(_with_kernels(read, e, notes, budget) for e in fb.entries))
                   for fb in fatbins]
    return Inventory(path, tuple(_kernel_presence(read, fatbins, budget)), tuple(notes))


def _kernel_presence(read: Read, fatbins: list[Fatbin], budget: list[int]) -> Iterator[Fatbin]:
    """The fatbins with `has_kernels` set, decompressing as little as a verdict needs.

    Verdicts depend only on a fatbin's set of images, so each set is settled by its first fatbin that defines
    a kernel; the others of that set are not read. A fatbin is read entry by entry up to its first kernel.
    """
    settled: set[tuple[tuple[str, int, str, str | None], ...]] = set()
    for fb in fatbins:
        key = tuple(sorted(entry_images(e for e in fb.entries if e.kind in ("sass", "ptx"))))
        if not key or key in settled:
            yield fb
            continue
        found = _defines_kernels(read, fb, budget)
        if found:
            settled.add(key)
        yield replace(fb, has_kernels=found)


def _defines_kernels(read: Read, fb: Fatbin, budget: list[int]) -> bool | None:
    """Whether any SASS or PTX entry names a kernel; None when one that could not be read leaves it open."""
    unknown = False
    for entry in fb.entries:
        if entry.kind not in ("sass", "ptx"):
            continue
        named = entry.kernels if entry.kernels is not None else _with_kernels(read, entry, [], budget).kernels
        if named:
            return True
        unknown = unknown or named is None
    return None if unknown else False


def _regions(read: Read, size: int, notes: list[str]) -> list[tuple[int, int]]:
    """Byte ranges to look for fatbins in: the fatbin sections of an ELF file, else the whole file."""
    try:
        head = elf.header(read)
        sections = elf.sections(read, head)
    except ElfError as exc:
        if read(0, 4) == b"\x7fELF":
            notes.append(f"ELF headers unreadable ({exc}); the whole file was scanned for fatbins")
        return [(0, size)]
    if not sections:
        return [(0, size)]
    found = [(s.offset, s.offset + s.size) for name, s in sections.items()
             if name in FATBIN_SECTIONS and s.type != elf.SHT_NOBITS]
    for start, end in found:
        if end > size:
            notes.append(f"fatbin section at {start:#x} runs past the end of the file ({end} > {size} bytes)")
    return found


def _magic_positions(read: Read, start: int, end: int) -> Iterator[int]:
    """Offsets of the fatbin magic in [start, end), read in chunks."""
    needle = struct.pack("<I", MAGIC)
    at = start
    while at < end:
        chunk = read(at, min(SCAN_CHUNK, end - at) + 3)
        if not chunk:
            return
        i = chunk.find(needle)
        while i >= 0 and at + i < end:
            yield at + i
            i = chunk.find(needle, i + 1)
        at += SCAN_CHUNK


def _fatbins_in(read: Read, start: int, end: int, size: int, notes: list[str]) -> list[Fatbin]:
    """Fatbins chained by header_size + fat_size from `start`; a gap or a bad header is skipped by a magic scan."""
    found: list[Fatbin] = []
    positions = _magic_positions(read, start, end)
    after = start
    for at in positions:
        if at < after:
            continue
        raw = read(at, _HEADER.size)
        if len(raw) < _HEADER.size:
            notes.append(f"fatbin header at {at:#x} cut off by the end of the file")
            break
        _magic, version, header_size, fat_size = _HEADER.unpack(raw)
        if header_size < _HEADER.size or header_size > 256:
            notes.append(f"fatbin at {at:#x}: header size {header_size} is not a fatbin header; skipped")
            continue
        body = at + header_size
        if body + fat_size > size:
            notes.append(f"fatbin at {at:#x} is cut off: its entries need {fat_size} bytes, the file has "
                         f"{max(0, size - body)} after its header; the entries that are there are listed")
        entries = _entries(read, body, min(body + fat_size, size), at, notes)
        if version != 1:
            notes.append(f"fatbin at {at:#x} has version {version} (1 expected); read as version 1")
        found.append(Fatbin(at, fat_size, tuple(entries)))
        after = body + fat_size
    return found


def _entries(read: Read, start: int, end: int, fatbin_at: int, notes: list[str]) -> list[Entry]:
    entries: list[Entry] = []
    at = start
    while at + _ENTRY.size <= end:
        (kind, _version, header_size, padded, compressed, _ext, minor, major, arch, _name_off, _name_len, flags,
         uncompressed) = _ENTRY.unpack(read(at, _ENTRY.size))
        if not _ENTRY.size <= header_size <= MAX_ENTRY_HEADER or padded > MAX_PAYLOAD:
            notes.append(f"fatbin at {fatbin_at:#x}: entry at {at:#x} has an impossible header "
                         f"(header {header_size} bytes, payload {padded}); the rest of this fatbin is skipped")
            break
        if at + header_size + padded > end:
            notes.append(f"fatbin at {fatbin_at:#x}: entry at {at:#x} ({_arch(kind, arch, flags)}) says its payload "
                         f"is {padded} bytes, past the end of the fatbin or file; listed from its header only")
        entries.append(_entry(at, kind, header_size, padded, compressed, minor, major, arch, flags, uncompressed))
        at += header_size + padded
    if 0 < end - at < _ENTRY.size:
        notes.append(f"fatbin at {fatbin_at:#x}: {end - at} trailing bytes too short for an entry header")
    return entries


def _entry(at: int, kind: int, header_size: int, padded: int, compressed: int, minor: int, major: int, arch: int,
           flags: int, uncompressed: int) -> Entry:
    compression = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else "none"
    variant = "a" if flags & FLAG_ARCH_A else "f" if flags & FLAG_FAMILY_F else ""
    name = KINDS.get(kind, f"kind {kind}")
    return Entry(name, _arch(kind, arch, flags), arch, variant, f"{major}.{minor}" if name == "ptx" else None,
                 compression, at, header_size, padded, compressed, uncompressed, flags)


def _arch(kind: int, arch: int, flags: int) -> str:
    variant = "a" if flags & FLAG_ARCH_A else "f" if flags & FLAG_FAMILY_F else ""
    prefix = {1: "compute_", 8: "lto_"}.get(kind, "sm_")
    return f"{prefix}{arch}{variant}"


# ------------------------------------------------------------------ payloads and kernel names


class PayloadError(ValueError):
    """An entry's payload cannot be read or decompressed."""


def payload(read: Read, entry: Entry) -> bytes:
    """The entry's image, decompressed (LZ4 block or ZSTD frame)."""
    if entry.compression == "none":
        data = read(entry.payload_offset, entry.payload_size)
        if len(data) < entry.payload_size:
            raise PayloadError("payload cut off by the end of the file")
        return data
    if entry.uncompressed_size > MAX_IMAGE:
        raise PayloadError(f"it says it inflates to {entry.uncompressed_size} bytes, more than the {MAX_IMAGE} read "
                           "of one image")
    if entry.compressed_size > entry.payload_size:
        raise PayloadError(f"its compressed size ({entry.compressed_size} bytes) is larger than its payload "
                           f"({entry.payload_size} bytes)")
    data = read(entry.payload_offset, entry.compressed_size)
    if len(data) < entry.compressed_size:
        raise PayloadError("compressed payload cut off by the end of the file")
    if entry.compression == "lz4":
        from .lz4block import LZ4Error, decompress

        try:
            return decompress(data, entry.uncompressed_size)
        except LZ4Error as exc:
            raise PayloadError(f"LZ4 payload corrupt: {exc}") from exc
    return _unzstd(data, entry.uncompressed_size)


def _unzstd(data: bytes, size: int) -> bytes:
    """A ZSTD frame inflated, streaming, to at most `size` bytes: the frame's own content size is not trusted
    (a crafted one claims 2**63 bytes, and a one-shot decompress would allocate for it)."""
    import zstandard

    out = bytearray()
    try:
        with zstandard.ZstdDecompressor().stream_reader(data) as stream:
            while len(out) <= size and (block := stream.read(min(1 << 20, size + 1 - len(out)))):
                out += block
    except zstandard.ZstdError as exc:
        raise PayloadError(f"ZSTD payload corrupt: {exc}") from exc
    if len(out) > size:
        raise PayloadError(f"ZSTD payload inflates past the {size} bytes its entry states")
    return bytes(out)


def _with_kernels(read: Read, entry: Entry, notes: list[str], budget: list[int]) -> Entry:
    """The entry with its kernel names, unless reading them would pass what is left of the file's `budget`."""
    if entry.kind not in ("sass", "ptx"):
        return entry
    cost = entry.uncompressed_size if entry.compression != "none" else entry.payload_size
    if cost <= MAX_IMAGE:  # a bigger claim is refused by `payload` before anything is decompressed
        if cost > budget[0]:
            notes.append(f"entry at {entry.offset:#x} ({entry.arch}): kernel names not read: its {cost} bytes would "
                         f"pass the {MAX_KERNEL_UNPACK} bytes decompressed for kernel names in one file")
            return entry
        budget[0] -= cost
    try:
        data = payload(read, entry)
        names = cubin_kernels(data) if entry.kind == "sass" else ptx_kernels(data)
    except (PayloadError, ElfError) as exc:
        notes.append(f"entry at {entry.offset:#x} ({entry.arch}): kernel names not read: {exc}")
        return entry
    return replace(entry, kernels=tuple(names))


def cubin_kernels(data: bytes) -> list[str]:
    """Kernel (entry-point) names of a cubin: STT_FUNC symbols marked STO_CUDA_ENTRY in .symtab.

    A cubin without .symtab (stripped) raises: its kernels are unknown, not absent."""
    read = _bytes_reader(data)
    if ".symtab" not in elf.sections(read, elf.header(read)):
        raise ElfError("the cubin has no symbol table")
    return [name for name, _value, _size, other in cubin_functions(data) if other & STO_CUDA_ENTRY]


def cubin_functions(data: bytes) -> list[tuple[str, int, int, int]]:
    """(name, value, size, st_other) of every defined STT_FUNC symbol in a cubin's .symtab."""
    read = _bytes_reader(data)
    sections = elf.sections(read, elf.header(read))
    symtab, strtab = sections.get(".symtab"), sections.get(".strtab")
    if symtab is None or strtab is None:
        return []
    strings = read(strtab.offset, strtab.size)
    raw = read(symtab.offset, symtab.size)
    found = []
    for st_name, info, other, shndx, value, size in _SYM.iter_unpack(raw[: len(raw) // _SYM.size * _SYM.size]):
        if info & 0xF == STT_FUNC and shndx:
            end = strings.find(b"\0", st_name)
            found.append((strings[st_name:end if end >= 0 else None].decode("utf-8", "replace"), value, size, other))
    return found


def ptx_kernels(data: bytes) -> list[str]:
    """Names after `.entry` in PTX text."""
    import re

    text = data.split(b"\0", 1)[0].decode("utf-8", "replace")
    return re.findall(r"\.entry\s+([\w$.]+)", text)


def _bytes_reader(data: bytes) -> Read:
    return lambda offset, length: data[offset:offset + length] if offset >= 0 else b""


# ------------------------------------------------------------------ verdicts


NATIVE, PTX_JIT, MISSING, NO_KERNELS = "native", "ptx-jit", "missing", "no-kernels"
_ORDER = {NATIVE: 0, PTX_JIT: 1, MISSING: 2}


@dataclass(frozen=True)
class Verdict:
    """Whether one fatbin (or a library: its worst fatbin) can run on a target SM, and through which image."""

    verdict: str
    image: str | None = None
    """The arch used: 'sm_120' for SASS, 'compute_120' for PTX."""
    needs_driver: str | None = None
    """For PTX: the oldest Linux driver that JIT-compiles its ISA version."""
    reason: str | None = None


KERNEL_LESS = Verdict(NO_KERNELS, reason="defines no kernels (a device-link stub); left out of the verdict")


@cache
def first_branches() -> dict[int, int]:
    """SM number -> the first Linux driver branch that runs that architecture, from data/arch-drivers.tsv."""
    from ..knowledge import data_rows, sm_number

    return {sm_number(row["sm"]) or 0: int(row["first_branch"]) for row in data_rows("arch-drivers.tsv")}


def driver_predates(target: int, driver: str | None) -> str | None:
    """Why `driver` runs nothing on sm_`target` (its branch is older than the architecture), else None."""
    branch, first = (version_numbers(driver) or (None,))[0], first_branches().get(target)
    if branch is None or first is None or branch >= first:
        return None
    return f"driver {driver} predates sm_{target} (first supported by R{first}): nothing runs"


@cache
def ptx_drivers() -> dict[str, tuple[str, str]]:
    """PTX ISA version -> (CUDA release, oldest Linux driver) from data/ptx-isa.tsv."""
    text = data_text("ptx-isa.tsv")
    rows = csv.DictReader([line for line in text.splitlines() if not line.startswith("#")], delimiter="\t")
    return {row["ptx_isa"]: (row["cuda"], row["min_linux_driver"]) for row in rows}


def version_numbers(text: str | None) -> tuple[int, ...]:
    """The leading dotted numbers of a version (`570.124.06` -> (570, 124, 6), `11.7` -> (11, 7)); () for none."""
    parts = []
    for part in str(text or "").split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def sass_usable(sm: int, variant: str, target: int) -> bool:
    """SASS for `sm` runs on `target`: same major and not newer; `a` only on that exact SM; `f` within the family."""
    if sm // 10 != target // 10 or sm > target:
        return False
    return sm == target if variant == "a" else True


def ptx_usable(sm: int, variant: str, target: int) -> bool:
    """PTX for compute_`sm` JIT-compiles for `target` when not newer (`a`: exact SM, `f`: same major)."""
    if sm > target:
        return False
    if variant == "a":
        return sm == target
    return sm // 10 == target // 10 if variant == "f" else True


def verdict(images: Iterable[tuple[str, int, str, str | None]], target: int,
            driver: str | None = None) -> Verdict | None:
    """The verdict for one fatbin's images, each (kind, sm, variant, ptx_isa); None when it has no loadable image.

    A driver older than the architecture runs nothing; else SASS first; else the newest usable PTX whose ISA
    the driver (when known) can JIT; else missing.
    """
    images = [i for i in images if i[0] in ("sass", "ptx")]
    if not images:
        return None
    if predates := driver_predates(target, driver):
        return Verdict(MISSING, reason=predates)
    sass = sorted((sm, variant) for kind, sm, variant, _ in images
                  if kind == "sass" and sass_usable(sm, variant, target))
    if sass:
        sm, variant = sass[-1]
        return Verdict(NATIVE, f"sm_{sm}{variant}")
    ptx = sorted(((sm, variant, isa) for kind, sm, variant, isa in images
                  if kind == "ptx" and ptx_usable(sm, variant, target)), key=lambda p: (version_numbers(p[2]), p[0]))
    too_new: list[str] = []
    for sm, variant, isa in reversed(ptx):
        needs = ptx_drivers().get(isa or "", (None, None))[1]
        if driver and needs and version_numbers(driver) < version_numbers(needs):
            too_new.append(f"compute_{sm}{variant} is PTX ISA {isa}, which needs driver >= {needs}")
            continue
        return Verdict(PTX_JIT, f"compute_{sm}{variant}", needs)
    if too_new:
        return Verdict(MISSING, reason=f"no SASS for sm_{target}; driver {driver} too old for its PTX ("
                                       + "; ".join(too_new) + ")")
    return Verdict(MISSING, reason=f"no SASS for sm_{target} and no PTX it can JIT")


def entry_images(entries: Iterable[Entry]) -> list[tuple[str, int, str, str | None]]:
    return [(e.kind, e.sm, e.variant, e.ptx_isa) for e in entries]


def worst(verdicts: Iterable[Verdict | None]) -> Verdict | None:
    """A library's verdict: its worst fatbin (one translation unit without an image fails its launches);
    fatbins without kernels do not count."""
    known = [v for v in verdicts if v is not None and v.verdict in _ORDER]
    return max(known, key=lambda v: _ORDER[v.verdict]) if known else None


def library_verdict(found: Inventory, target: int,
                    driver: str | None = None) -> tuple[Verdict | None, list[Verdict | None]]:
    """(the library's verdict, one per fatbin; a fatbin without kernels is KERNEL_LESS and does not count)."""
    per = [KERNEL_LESS if fb.has_kernels is False else verdict(entry_images(fb.entries), target, driver)
           for fb in found.fatbins]
    return worst(per) or (KERNEL_LESS if KERNEL_LESS in per else None), per


def summary(result: Verdict | None, target: int) -> str:
    """The verdict as a sentence for people."""
    if result is None:
        return "no loadable device code"
    if result.verdict == NO_KERNELS:
        return "its fatbins define no kernels, so no launch of them can lack an image"
    if result.verdict == NATIVE:
        return "runs natively"
    if result.verdict == PTX_JIT:
        needs = f", needs driver >= {result.needs_driver}" if result.needs_driver else ""
        return f"runs via PTX JIT from {result.image} (first launch slow{needs})"
    return f"cannot run: {result.reason or f'no sm_{target} SASS and no PTX'}"


def file_reader(path: str) -> tuple[Callable[[int, int], bytes], int, Callable[[], None]]:
    """A pread-based Read over a file, its size, and a close function."""
    import os

    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size

    def read(offset: int, length: int) -> bytes:
        return os.pread(fd, max(0, length), offset) if offset >= 0 and length > 0 else b""

    return read, size, lambda: os.close(fd)
