"""Source lines and inlined frames of pcs, from DWARF (.debug_line, .debug_info) read with pyelftools.

A debug file may be gigabytes (libtorch_cuda.so.debug), so nothing is read
whole: pyelftools reads through windows over the file the module resolved to
(opened read-only by `Files`), the compilation unit holding a pc is found by
`.debug_aranges` or by the CU headers' top DIEs alone, and only that CU's
line program and DIEs are parsed, once per image. Every step spends from one
`LineBudget` per core. Lines are only taken from a file whose build-id is the
core's: a rebuilt library's lines would point at the wrong source.

What a pc was found to be is kept per DWARF file (`Answers`): the cores of one
run share it (the eight ranks of a job wait at the same pcs of one libpython),
and the user cache keeps it between runs, so a second look at the same build
parses no DWARF at all (issue 28: a pyenv libpython's DWARF took 2.8 s a core).
"""

from __future__ import annotations

import bisect
import io
import json
import lzma
import os
import struct
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import IO, TYPE_CHECKING, ClassVar

from .. import user_cache
from .elf import ElfError, Read

if TYPE_CHECKING:
    from .modules import Image, Module
    from .symbols import SymbolTable

MAX_CUS = 512
"""Compilation units whose line program and DIEs are parsed per core (a stack touches a few dozen)."""
MAX_CU_HEADERS = 100_000
"""CU headers read per image to find the CU of a pc when `.debug_aranges` does not say (libtorch has ~10,000)."""
MAX_ARANGES = 4_000_000
"""`.debug_aranges` entries read per image (libc's has about 6,000; libtorch_cuda's a few hundred thousand)."""
MAX_OVERLAP = 64
"""CU ranges starting below a pc weighed for holding it (CUs' ranges rarely interleave)."""
MAX_LINE_ROWS = 4_000_000
"""Line-table rows decoded per core, all CUs together."""
MAX_LINE_PROGRAM = 32 << 20
"""Bytes of one CU's line program; a longer one is not decoded (real ones take a few MiB at most)."""
MAX_DIES = 2_000_000
"""DIEs visited per core while looking for the functions inlined at the pcs."""
MAX_INLINE_DEPTH = 64
"""Nesting of DIEs followed down to a pc (gcc nests inlined calls a dozen deep)."""
MAX_ORIGIN_HOPS = 8
"""DW_AT_abstract_origin / DW_AT_specification links followed to find a function's name."""
MAX_SECTION = 256 << 20
"""Bytes of one compressed (SHF_COMPRESSED) DWARF section inflated in memory, or of `.debug_aranges` read."""
MAX_MINIDEBUGINFO = 64 << 20
"""Bytes of `.gnu_debugdata` read, and of the ELF image it inflates to (Fedora's take a few hundred KiB)."""
BUFFER = 1 << 16
"""Read-ahead of the buffered file window pyelftools parses through."""
INFLATE_CHUNK = 1 << 18
"""Bytes of a compressed DWARF section inflated at a time: a CU's DIEs take a few chunks of a
`.debug_info` that inflates to tens of MiB (Debian's libc6-dbg compresses every section)."""
INFLATED_KEPT = 2
"""Inflated chunks kept per compressed section (pyelftools reads mostly forward through one CU)."""
MAX_KEPT_ANSWERS = 200_000
"""Answers kept per DWARF file between runs (a core's stacks ask a few hundred; a deep recursion a few)."""
MAX_OPEN_ANSWERS = 64
"""DWARF files whose answers one process holds at once (a fleet scan reads cores of many builds): the oldest go
after they are kept."""

_SCOPES = frozenset({"DW_TAG_subprogram", "DW_TAG_lexical_block", "DW_TAG_inlined_subroutine"})
"""DIEs that hold code: followed only when their ranges cover the pc."""
_CONTAINERS = frozenset({"DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_union_type",
                         "DW_TAG_module"})
"""DIEs without ranges that may hold function definitions (C++ namespaces and classes)."""
_SECTIONS = ("debug_info", "debug_aranges", "debug_abbrev", "debug_str", "debug_line", "debug_ranges",
             "debug_addr", "debug_str_offsets", "debug_line_str", "debug_rnglists")


_LIMITS = {"cus": MAX_CUS, "rows": MAX_LINE_ROWS, "dies": MAX_DIES}


class BudgetSpent(Exception):
    """The core's budget of CUs, rows or DIEs is spent: the pcs left get no lines."""


PARSED: dict[str, int] = dict.fromkeys(_LIMITS, 0)
"""DWARF records parsed by this process, all cores together: CUs, line rows, DIEs (the count CI guards)."""


@cache
def parse_errors() -> tuple[type[BaseException], ...]:
    """What pyelftools raises on a hostile file; a file that raises gets no lines (imported on first use:
    importing pyelftools costs about as much as reading a core without it)."""
    from elftools.common.exceptions import DWARFError, ELFError
    from elftools.construct import ConstructError
    return (ELFError, DWARFError, ConstructError, struct.error, zlib.error, ValueError, KeyError, IndexError, TypeError,
            AttributeError, OverflowError, EOFError, UnicodeError, RecursionError)


@dataclass
class LineBudget:
    """What one core may still spend on DWARF; `spent` names the first budget that ran out."""

    cus: int = MAX_CUS
    rows: int = MAX_LINE_ROWS
    dies: int = MAX_DIES
    spent: str | None = None

    def take(self, what: str, count: int = 1) -> None:
        PARSED[what] += count
        left = getattr(self, what) - count
        setattr(self, what, left)
        if left < 0:
            self.spent = self.spent or f"{_LIMITS[what]:,} {what} per core"
            raise BudgetSpent(self.spent)


@dataclass(frozen=True)
class Place:
    """Where a pc is in the source: a function (None when only the line table knows) and file:line."""

    function: str | None
    file: str | None
    line: int | None


@dataclass(frozen=True)
class Location:
    """A pc's own line and, innermost first, the functions inlined there (gdb's INLINE frames)."""

    file: str | None
    line: int | None
    inlined: tuple[Place, ...] = ()


class Answers:
    """What the pcs of one DWARF file were found to be (link-time address -> Location, None where DWARF holds no
    line), for every core of this run and, through the user cache, of later runs. Kept only for a file with a
    build-id, under its build-id, size and path: another build, or a file put in its place, is another entry.
    A kept entry is never trusted: one that is not exactly the shape written is dropped whole and rebuilt."""

    _open: ClassVar[dict[str, Answers]] = {}
    """By identity: the files this process has answered for."""

    def __init__(self, identity: str):
        self.key = user_cache.key("source-lines", identity)
        self.found: dict[int, Location | None] = _stored(user_cache.read("lines", self.key))
        self.new = 0

    @classmethod
    def of(cls, image: Image) -> Answers | None:
        """The answers of the DWARF file `image`, None for a file without a build-id (nothing names its build)."""
        build_id = image.build_id
        if build_id is None or image.size is None:
            return None
        identity = f"{build_id}:{image.size}:{image.name}"
        if identity not in cls._open:
            cls._open[identity] = cls(identity)
        return cls._open[identity]

    @classmethod
    def keep(cls) -> None:
        """Write the answers found since the last keep to the user cache; hold no more than MAX_OPEN_ANSWERS files."""
        for answers in cls._open.values():
            if answers.new and len(answers.found) <= MAX_KEPT_ANSWERS:
                plain = {str(vaddr): _plain_location(where) for vaddr, where in answers.found.items()}
                user_cache.write("lines", answers.key, json.dumps(plain, separators=(",", ":")).encode())
            answers.new = 0
        for identity in list(cls._open)[:max(0, len(cls._open) - MAX_OPEN_ANSWERS)]:
            del cls._open[identity]


def _plain_location(where: Location | None) -> list | None:
    if where is None:
        return None
    return [where.file, where.line, [[p.function, p.file, p.line] for p in where.inlined]]


def _stored(payload: bytes | None) -> dict[int, Location | None]:
    """The answers a cache entry holds, or none when any part of it is not what `Answers.keep` writes."""
    if payload is None:
        return {}
    try:
        stored = json.loads(payload)
        return {int(vaddr): _location(value) for vaddr, value in stored.items()}
    except (ValueError, TypeError, AttributeError, RecursionError):
        return {}


def _location(value: object) -> Location | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 3 or not isinstance(value[2], list):
        raise ValueError("not a kept location")
    file, line = _place_parts(value[0], value[1])
    inlined = []
    for place in value[2]:
        if not isinstance(place, list) or len(place) != 3 or not isinstance(place[0], str | None):
            raise ValueError("not a kept inlined frame")
        inlined.append(Place(place[0], *_place_parts(place[1], place[2])))
    return Location(file, line, tuple(inlined))


def _place_parts(file: object, line: object) -> tuple[str | None, int | None]:
    if not isinstance(file, str | None) or not (line is None or type(line) is int):
        raise ValueError("not a kept file and line")
    return file, line


class _ReadOnlyFile(io.RawIOBase):
    """A read-only, seekable file of `size` bytes over something else (pyelftools wants a stream);
    subclasses say how `readinto` gets the bytes at the position."""

    def __init__(self, size: int):
        super().__init__()
        self._size, self._pos = size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos


class _Window(_ReadOnlyFile):
    """`read(offset, length)` seen as a read-only file of `size` bytes starting at `start`."""

    def __init__(self, read: Read, start: int, size: int):
        super().__init__(size)
        self._read, self._start = read, start

    def readinto(self, buffer) -> int:
        want = min(len(buffer), self._size - self._pos)
        data = self._read(self._start + self._pos, want) if want > 0 else b""
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


class _Inflated(_ReadOnlyFile):
    """A zlib stream of `packed` bytes at `start` of `read`, seen as a read-only file of its `size`
    inflated bytes, inflated INFLATE_CHUNK bytes at a time: the inflater's state is kept at the start of
    every chunk reached (about 40 KiB each), so a chunk read again is inflated from the one before it,
    and only INFLATED_KEPT chunks are held, not the whole section."""

    def __init__(self, read: Read, start: int, packed: int, size: int):
        super().__init__(size)
        self._read, self._end = read, start + packed
        self._states: list[tuple[zlib._Decompress, int, bytes]] = [(zlib.decompressobj(), start, b"")]
        """Per chunk reached: the inflater before it, the offset of the next packed byte, input left over."""
        self._kept: OrderedDict[int, bytes] = OrderedDict()

    def readinto(self, buffer) -> int:
        index, skip = divmod(self._pos, INFLATE_CHUNK)
        data = self._chunk(index)[skip:skip + min(len(buffer), self._size - self._pos)] if self._pos < self._size \
            else b""
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def _chunk(self, index: int) -> bytes:
        if index in self._kept:
            self._kept.move_to_end(index)
            return self._kept[index]
        while len(self._states) <= index:
            if not self._inflate(len(self._states) - 1):
                return b""
        data = self._inflate(index)
        self._kept[index] = data
        if len(self._kept) > INFLATED_KEPT:
            self._kept.popitem(last=False)
        return data

    def _inflate(self, index: int) -> bytes:
        """Chunk `index` from its saved state; the state after it is saved as the next chunk's."""
        state, at, left = self._states[index]
        inflater, pieces, got = state.copy(), [], 0
        while got < INFLATE_CHUNK and not inflater.eof:
            if not left:
                left = self._read(at, min(BUFFER, self._end - at)) if at < self._end else b""
                at += len(left)
                if not left:
                    break
            piece = inflater.decompress(left, INFLATE_CHUNK - got)
            left = inflater.unconsumed_tail
            pieces.append(piece)
            got += len(piece)
        if index + 1 == len(self._states) and got == INFLATE_CHUNK:
            self._states.append((inflater, at, left))
        return b"".join(pieces)


def stream(read: Read, start: int, size: int) -> io.BufferedReader:
    """A buffered read-only file over `size` bytes of `read` from `start` (what pyelftools parses)."""
    return io.BufferedReader(_Window(read, start, size), BUFFER)


def _section_stream(read: Read, section, elf) -> IO[bytes] | None:
    """What pyelftools reads a DWARF section through: a window over the file, or for a zlib-compressed
    (SHF_COMPRESSED) section of a little-endian 64-bit file, its chunk-wise inflation, and for a zstd-compressed
    one its first MAX_SECTION bytes inflated (a cut stream reads short, not wrong; None where it does not inflate);
    any other compressed section inflated whole by pyelftools up to MAX_SECTION (None past it)."""
    from .modules import CHDR, ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD, unpacked

    offset, size = section["sh_offset"], section["sh_size"]
    if not section.compressed:
        return stream(read, offset, size)
    if elf.elfclass == 64 and elf.little_endian and size >= CHDR.size:
        kind, _reserved, inflated, _align = CHDR.unpack(read(offset, CHDR.size))
        if kind == ELFCOMPRESS_ZLIB:
            return io.BufferedReader(_Inflated(read, offset + CHDR.size, size - CHDR.size,
                                               min(inflated, MAX_SECTION)), BUFFER)
        if kind == ELFCOMPRESS_ZSTD:
            try:
                return io.BytesIO(unpacked(kind, read(offset + CHDR.size, min(size - CHDR.size, MAX_SECTION)),
                                           min(inflated, MAX_SECTION)))
            except ValueError:
                return None
    return io.BytesIO(section.data()) if section.data_size <= MAX_SECTION else None


class SourceLines:
    """Per core: the DWARF of each module's debug file (opened once per build-id) and the core's budget."""

    def __init__(self) -> None:
        self.budget = LineBudget()
        self._info: dict[str, DebugInfo | None] = {}
        self._mini: dict[int, SymbolTable | None] = {}
        self._located: dict[tuple[int, int], Location | None] = {}
        """Answers by (module, address): a deep recursion asks for the same few return addresses 200,000 times."""

    def symbol(self, module: Module, vaddr: int) -> tuple[str, int] | None:
        """The function holding `vaddr`: the nearest start among the module's symbols and those of its
        MiniDebugInfo (which holds only what `.dynsym` lacks, so neither table alone is right); aliases
        are told apart as gdb's DWARF names them only where DWARF covers `vaddr`."""
        if id(module) not in self._mini:
            mini = minidebuginfo(module.file) if module.file is not None and module.debug is None else None
            self._mini[id(module)] = mini.symbols if mini is not None and mini.symbols else None
        in_dwarf = self.locate(module, vaddr) is not None
        found = [hit for table in (module.symbols, self._mini[id(module)])
                 if table is not None and (hit := table.lookup(vaddr, in_dwarf)) is not None]
        return max(found, key=lambda hit: hit[1], default=None)

    def locate(self, module: Module, vaddr: int) -> Location | None:
        """file:line and inlined functions of link-time address `vaddr` in `module`, None where unknown."""
        key = (id(module), vaddr)
        if key not in self._located:
            self._located[key] = self._locate(module, vaddr)
        return self._located[key]

    def _locate(self, module: Module, vaddr: int) -> Location | None:
        image = dwarf_image(module)
        if image is None or image.size is None:
            return None
        answers = Answers.of(image)
        if answers is not None and vaddr in answers.found:
            return answers.found[vaddr]
        if self.budget.spent:
            return None
        key = module.build_id or module.build_id_on_disk or image.name
        if key not in self._info:
            self._info[key] = None
            try:
                self._info[key] = DebugInfo(image.read, image.size)
            except parse_errors():
                pass
        info = self._info[key]
        try:
            where = info.locate(vaddr, self.budget) if info is not None and info.has_lines else None
        except BudgetSpent:
            return None
        except parse_errors():
            where = None
        if answers is not None:
            answers.found[vaddr] = where
            answers.new += 1
        return where


def minidebuginfo(image: Image) -> Image | None:
    """The ELF image xz-compressed in `.gnu_debugdata` (Fedora and RHEL's MiniDebugInfo: a symbol table
    of the functions `.dynsym` lacks), inflated up to MAX_MINIDEBUGINFO bytes; None without one."""
    from .modules import Image

    section = image.sections.get(".gnu_debugdata")
    if section is None or not 0 < section.size <= MAX_MINIDEBUGINFO:
        return None
    try:
        data = lzma.LZMADecompressor().decompress(image.read(section.offset, section.size),
                                                  max_length=MAX_MINIDEBUGINFO)
        return Image(lambda offset, length: data[offset:offset + length], image.name + " [.gnu_debugdata]",
                     len(data))
    except (lzma.LZMAError, ElfError, EOFError):
        return None


def dwarf_image(module: Module) -> Image | None:
    """The module's separate debug file, else its own file, when it has a line table and is the
    very build the core mapped (a debug file is only found by matching build-id, see modules.py)."""
    if module.debug is not None and ".debug_line" in module.debug.sections:
        return module.debug
    image = module.file
    if image is None or ".debug_line" not in image.sections:
        return None
    return image if module.build_id is None or image.build_id == module.build_id else None


@dataclass
class _Unit:
    """One parsed CU: its line rows as sorted intervals, and its DWARF objects for the DIE walk."""

    cu: object
    starts: list[int] = field(default_factory=list)
    rows: list[tuple[int, int, int]] = field(default_factory=list)
    """(end, file index, line) of the interval starting at the same index of `starts`."""
    files: Callable[[int], str | None] = lambda index: None


class DebugInfo:
    """The DWARF of one ELF file, opened lazily through pyelftools; `None`-safe on any parse error."""

    def __init__(self, read: Read, size: int):
        from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo
        from elftools.elf.elffile import ELFFile

        elf = ELFFile(stream(read, 0, size))
        found: dict[str, DebugSectionDescriptor | None] = {}
        for name in _SECTIONS:
            section = elf.get_section_by_name("." + name)
            if section is None or section["sh_type"] == "SHT_NOBITS":
                found[name] = None
                continue
            body = _section_stream(read, section, elf)
            found[name] = (DebugSectionDescriptor(body, section.name, section["sh_offset"], section.data_size,
                                                  section["sh_addr"]) if body is not None else None)
        self.has_lines = found["debug_info"] is not None and found["debug_line"] is not None
        aranges = found["debug_aranges"]
        if aranges is not None and aranges.size > MAX_SECTION:
            found["debug_aranges"] = None
        self._endian = "<" if elf.little_endian else ">"
        self.dwarf = DWARFInfo(
            config=DwarfConfig(little_endian=elf.little_endian, default_address_size=elf.elfclass // 8,
                               machine_arch=elf.get_machine_arch()),
            debug_info_sec=found["debug_info"], debug_aranges_sec=found["debug_aranges"],
            debug_abbrev_sec=found["debug_abbrev"], debug_frame_sec=None, eh_frame_sec=None,
            debug_str_sec=found["debug_str"], debug_loc_sec=None, debug_ranges_sec=found["debug_ranges"],
            debug_line_sec=found["debug_line"], debug_pubtypes_sec=None, debug_pubnames_sec=None,
            debug_addr_sec=found["debug_addr"], debug_str_offsets_sec=found["debug_str_offsets"],
            debug_line_str_sec=found["debug_line_str"], debug_loclists_sec=None,
            debug_rnglists_sec=found["debug_rnglists"], debug_sup_sec=None, gnu_debugaltlink_sec=None,
            debug_types_sec=None)
        self._units: dict[int, _Unit | None] = {}

    def locate(self, vaddr: int, budget: LineBudget) -> Location | None:
        """file:line of link-time address `vaddr` and the functions inlined there, or None."""
        offset = self._cu_offset(vaddr)
        if offset is None:
            return None
        unit = self._unit(offset, budget)
        if unit is None:
            return None
        i = bisect.bisect_right(unit.starts, vaddr) - 1
        if i < 0 or vaddr >= unit.rows[i][0]:
            return None
        _end, file_index, line = unit.rows[i]
        chain = self._inline_chain(unit, vaddr, budget)
        here = Place(None, unit.files(file_index), line)
        inlined: list[Place] = []
        for die in reversed(chain):
            inlined.append(Place(_name(die), here.file, here.line))
            call_file, call_line = die.attributes.get("DW_AT_call_file"), die.attributes.get("DW_AT_call_line")
            here = Place(None, unit.files(call_file.value) if call_file else None,
                         call_line.value if call_line else None)
        return Location(here.file, here.line, tuple(inlined))

    def _cu_offset(self, vaddr: int) -> int | None:
        """The offset of the CU covering `vaddr`: `.debug_aranges` first, then the CUs' own ranges."""
        offset = _covering(self._aranges, vaddr)
        return offset if offset is not None else _covering(self._cu_ranges, vaddr)

    @cached_property
    def _aranges(self) -> list[tuple[int, int, int]]:
        """`.debug_aranges` as sorted (low, high, CU offset), parsed once by `aranges` (pyelftools' own
        parser takes ~20 ms on libc's 100 KiB, which every core with a libc frame reads)."""
        section = self.dwarf.debug_aranges_sec
        if section is None:
            return []
        section.stream.seek(0)
        return aranges(section.stream.read(section.size), self._endian)

    @cached_property
    def _cu_ranges(self) -> list[tuple[int, int, int]]:
        """Every CU's (low, high, CU offset), sorted: read only for a pc `.debug_aranges` does not cover."""
        return sorted(self._scan_cu_ranges())

    def _scan_cu_ranges(self) -> Iterator[tuple[int, int, int]]:
        """(low, high, CU offset) of every CU, from the CU header's top DIE alone."""
        for count, cu in enumerate(self.dwarf.iter_CUs()):
            if count >= MAX_CU_HEADERS:
                return
            for low, high in _ranges(self.dwarf, cu, cu.get_top_DIE()):
                yield low, high, cu.cu_offset

    def _unit(self, offset: int, budget: LineBudget) -> _Unit | None:
        if offset not in self._units:
            self._units[offset] = None
            budget.take("cus")
            cu = self.dwarf.get_CU_at(offset)
            program = self.dwarf.line_program_for_CU(cu)
            if program is None or program.program_end_offset - program.program_start_offset > MAX_LINE_PROGRAM:
                return None
            self._units[offset] = _line_unit(cu, program, budget)
        return self._units[offset]

    def _inline_chain(self, unit: _Unit, vaddr: int, budget: LineBudget) -> list:
        """The DW_TAG_inlined_subroutine DIEs covering `vaddr`, outermost first."""
        chain = []
        parent = unit.cu.get_top_DIE()  # type: ignore[attr-defined]
        for _depth in range(MAX_INLINE_DEPTH):
            inside = None
            for child in parent.iter_children():
                budget.take("dies")
                if child.tag in _CONTAINERS and child.has_children and _holds(self.dwarf, unit, child, vaddr):
                    inside = child
                    break
                if child.tag in _SCOPES and any(low <= vaddr < high
                                                for low, high in _ranges(self.dwarf, unit.cu, child)):
                    inside = child
                    break
            if inside is None:
                break
            if inside.tag == "DW_TAG_inlined_subroutine":
                chain.append(inside)
            parent = inside
        return chain


def aranges(data: bytes, endian: str) -> list[tuple[int, int, int]]:
    """The (low, high, CU offset) entries of a `.debug_aranges` section, sorted, up to MAX_ARANGES: each
    set is a header (unit length, 32- or 64-bit DWARF; version; CU offset; address and segment selector
    sizes) padded to a multiple of the tuple size, then (address, length) tuples up to a (0, 0) one.
    A set with segment selectors or an odd address size is skipped."""
    found: list[tuple[int, int, int]] = []
    pos = 0
    while pos + 16 <= len(data) and len(found) < MAX_ARANGES:
        start = pos
        (length,) = struct.unpack_from(endian + "I", data, start)
        wide = length == 0xFFFFFFFF
        head = start + 12 if wide else start + 4
        if wide:
            (length,) = struct.unpack_from(endian + "Q", data, start + 4)
        end = min(head + length, len(data))
        at = head + 2 + (8 if wide else 4)
        if at + 2 > end:
            break
        (offset,) = struct.unpack_from(endian + ("Q" if wide else "I"), data, head + 2)
        address_size, segment_size = data[at], data[at + 1]
        pos = end
        if segment_size or address_size not in (4, 8):
            continue
        tuple_size = 2 * address_size
        body = data[at + 2 + (-(at + 2 - start) % tuple_size):end]
        for low, size in struct.iter_unpack(endian + ("QQ" if address_size == 8 else "II"),
                                            body[: len(body) // tuple_size * tuple_size]):
            if (low, size) == (0, 0) or len(found) >= MAX_ARANGES:
                break
            found.append((low, low + size, offset))
    found.sort()
    return found


def _covering(ranges: list[tuple[int, int, int]], vaddr: int) -> int | None:
    """The CU offset of the sorted (low, high, offset) range holding `vaddr`, among the MAX_OVERLAP
    starting nearest below it; None when none does."""
    i = bisect.bisect_right(ranges, (vaddr, 1 << 64))
    for low, high, offset in reversed(ranges[max(0, i - MAX_OVERLAP):i]):
        if low <= vaddr < high:
            return offset
    return None


def _holds(dwarf, unit: _Unit, container, vaddr: int) -> bool:
    """Whether a namespace or class holds, among its direct children, a scope covering `vaddr`."""
    return any(child.tag in _SCOPES and any(low <= vaddr < high for low, high in _ranges(dwarf, unit.cu, child))
               for child in container.iter_children())


def _line_unit(cu, program, budget: LineBudget) -> _Unit:
    """The CU's line rows as [address, next address) intervals, sorted; rows within one sequence only."""
    entries = program.get_entries()
    budget.take("rows", len(entries))
    intervals: list[tuple[int, int, int, int]] = []
    previous = None
    for entry in entries:
        state = entry.state
        if state is None:
            continue
        if previous is not None and state.address > previous.address:
            intervals.append((previous.address, state.address, previous.file, previous.line))
        previous = None if state.end_sequence else state
    intervals.sort(key=lambda row: (row[0], -row[1]))
    header = program.header
    version = header["version"]
    names, dirs = header["file_entry"], header["include_directory"]

    def file_name(index: int) -> str | None:
        at = index if version >= 5 else index - 1
        if not 0 <= at < len(names):
            return None
        entry = names[at]
        name = os.fsdecode(entry.name)
        directory = entry.dir_index if version >= 5 else entry.dir_index - 1
        if not os.path.isabs(name) and 0 <= directory < len(dirs):
            name = os.path.join(os.fsdecode(dirs[directory]), name)
        return name

    return _Unit(cu, [row[0] for row in intervals], [row[1:] for row in intervals], file_name)


def _ranges(dwarf, cu, die) -> list[tuple[int, int]]:
    """The [low, high) address ranges of a DIE: DW_AT_low_pc/high_pc, or its DW_AT_ranges list."""
    attrs = die.attributes
    if "DW_AT_ranges" in attrs:
        lists = dwarf.range_lists()
        if lists is None:
            return []
        base = attrs["DW_AT_low_pc"].value if "DW_AT_low_pc" in attrs else _cu_base(cu)
        found = []
        for entry in lists.get_range_list_at_offset(attrs["DW_AT_ranges"].value, cu=cu):
            if hasattr(entry, "base_address"):
                base = entry.base_address
            elif entry.is_absolute:
                found.append((entry.begin_offset, entry.end_offset))
            else:
                found.append((base + entry.begin_offset, base + entry.end_offset))
        return found
    if "DW_AT_low_pc" in attrs and "DW_AT_high_pc" in attrs:
        low, high = attrs["DW_AT_low_pc"].value, attrs["DW_AT_high_pc"]
        return [(low, high.value if high.form == "DW_FORM_addr" else low + high.value)]
    return []


def _cu_base(cu) -> int:
    top = cu.get_top_DIE()
    return top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0


def _name(die) -> str | None:
    """The (linkage, else plain) name of an inlined function, through its abstract origin."""
    for _hop in range(MAX_ORIGIN_HOPS):
        attrs = die.attributes
        for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name", "DW_AT_name"):
            if key in attrs:
                return os.fsdecode(attrs[key].value)
        link = next((key for key in ("DW_AT_abstract_origin", "DW_AT_specification") if key in attrs), None)
        if link is None:
            return None
        die = die.get_DIE_from_attribute(link)
    return None
