"""The files a core had mapped: where each was loaded, its build-id, and its ELF on disk.

A module is every NT_FILE mapping of one path. Its build-id is read from the
core's own memory (the kernel dumps the first page of each mapped ELF, which
holds the headers and usually the build-id note), else from the file on disk.
Files are looked up under `--sysroot` when one is given, else at the path the
core names, then by base name beside the core (how the committed test cores
find the libraries they were made with); the first candidate whose build-id
matches the core wins, and a file that does not match is still used for its
symbols, with a warning. Separate debug files (by build-id, debuginfod's cache
or `.gnu_debuglink`) only lend their symbol table, DWARF (core/lines.py) and
`.debug_frame`.

The core names its paths, so they are hostile: only regular files are opened,
never anything under /proc, /sys or /dev (judged on the real path), and a file
lends its bytes to the core's memory only when it is the very ELF file the
process mapped (`memory_source`); everything else stays "not in the core".
A live process's snapshot, taken by root, reads each file only as far as the
process's own user could (`ReadAs`, `_open_as`).
"""

from __future__ import annotations

import io
import os
import stat
import struct
import zlib
from dataclasses import dataclass, field
from functools import cached_property

from ..outputs import NO_LINK_FLAGS
from . import elf
from .elf import ElfError, Read
from .gopclntab import GoTable, go_table
from .memory import Memory
from .notes import FileMapping
from .symbols import SymbolTable
from .unwind import MAX_CFI_SECTION, CfiError, CfiTables, EhFrame

DEBUG_ROOT = "/usr/lib/debug"
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
"""Trees of the analysing machine's kernel and devices: never a library, often a secret (/proc/self/environ)."""
MAX_PAGE = 1 << 16
"""The largest page size Linux uses (arm64, ppc64): the last mapping of a file may run this far past its end."""
HEADER_BYTES = 4096
PT_GNU_EH_FRAME = 0x6474E550
"""The program header naming `.eh_frame_hdr` (how libgcc's unwinder finds a module's CFI at run time)."""
EH_PE_PCREL_SDATA4 = 0x1B
"""How every linker encodes `.eh_frame_hdr`'s pointer to `.eh_frame`."""
"""How much of a file's start is compared with the core's copy of it (the ELF and program headers)."""
SHF_COMPRESSED, ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 0x800, 1, 2
CHDR = struct.Struct("<IIQQ")
"""Elf64_Chdr, before a compressed section's data: ch_type, reserved, ch_size (inflated), ch_addralign."""
MAX_DEBUGLINK = 4096
"""Bytes of a `.gnu_debuglink` section read: a file name (NAME_MAX is 255) and a CRC."""
MAX_CRC_BYTES = 4 << 30
"""Largest debug file checksummed when its module has no build-id to match (reading it all is the only check)."""
CRC_CHUNK = 1 << 24
"""Bytes read at a time while checksumming a debug file."""
MAX_LINKS = 40
"""Symbolic links followed while walking one path for a process's user: the kernel's MAXSYMLINKS (a loop ends)."""
OWNER_SHIFT, GROUP_SHIFT, OTHER_SHIFT = 6, 3, 0
"""Where the owner's, the group's and the others' rwx bits lie in st_mode."""


class Image:
    """One ELF image read through `read` (file offsets); parsed on first use, never twice."""

    def __init__(self, read: Read, name: str, size: int | None = None):
        self.read, self.name, self.size = read, name, size
        self.head = elf.header(read)

    @cached_property
    def segments(self) -> list[elf.Segment]:
        return elf.segments(self.read, self.head)

    @cached_property
    def sections(self) -> dict[str, elf.Section]:
        try:
            return elf.sections(self.read, self.head)
        except ElfError:
            return {}

    @cached_property
    def build_id(self) -> str | None:
        return elf.build_id(self.read, self.head, self.segments, lambda seg: (seg.offset, seg.filesz))

    @cached_property
    def symbols(self) -> SymbolTable:
        return SymbolTable(self.read, self.sections, self.head.machine)

    @cached_property
    def go_table(self) -> GoTable | None:
        """`.gopclntab` of a Go binary: the frame sizes its runtime unwinds by, where there is no CFI."""
        return go_table(self.read, self.sections)

    @cached_property
    def cfi(self) -> tuple[EhFrame, ...]:
        """The image's CFI tables, `.eh_frame` first (what the unwinder at run time used), then `.debug_frame`."""
        found = []
        for debug in (False, True):
            try:
                found.append(EhFrame(*_inflated(self.read, self.sections, ".debug_frame" if debug else ".eh_frame"),
                                     debug))
            except CfiError:
                pass
        return tuple(found)


def unpacked(kind: int, packed: bytes, size: int) -> bytes:
    """At most `size` bytes of a compressed section's data: zlib (gcc -gz, Go's linker, Debian's debug files) or
    zstd (gcc -gz=zstd, objcopy --compress-debug-sections=zstd, as Fedora's and Arch's debug files are, which gdb 13
    reads). ValueError for another kind or a stream that does not inflate."""
    if kind == ELFCOMPRESS_ZLIB:
        try:
            return zlib.decompressobj().decompress(packed, size)
        except zlib.error as exc:
            raise ValueError(str(exc)) from None
    if kind != ELFCOMPRESS_ZSTD:
        raise ValueError(f"compression type {kind}")
    import zstandard  # only for a zstd-compressed section

    pieces, got = [], 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(packed)) as reader:
            while got < size and (piece := reader.read(size - got)):
                pieces.append(piece)
                got += len(piece)
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None
    return b"".join(pieces)


def _inflated(read: Read, sections: dict[str, elf.Section], name: str) -> tuple[Read, dict[str, elf.Section]]:
    """The image's reader and sections, with section `name` inflated in memory where it is SHF_COMPRESSED
    (Go links its DWARF, `.debug_frame` included, zlib-compressed); CfiError when it does not inflate."""
    section = sections.get(name)
    if section is None or not section.flags & SHF_COMPRESSED:
        return read, sections
    head = read(section.offset, CHDR.size)
    if len(head) < CHDR.size:
        raise CfiError(f"{name} compression header cut off")
    kind, _reserved, size, _align = CHDR.unpack(head)
    if kind not in (ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD) or size > MAX_CFI_SECTION:
        raise CfiError(f"{name} compressed as type {kind} to {size:,} bytes: not inflated")
    try:
        data = unpacked(kind, read(section.offset + CHDR.size, min(section.size - CHDR.size, MAX_CFI_SECTION)), size)
    except ValueError as exc:
        raise CfiError(f"{name} does not inflate ({exc})") from None
    inflated = elf.Section(name, section.type, section.addr, 0, len(data))
    return (lambda offset, length: data[offset:offset + length]), {**sections, name: inflated}


@dataclass(frozen=True)
class ReadAs:
    """The user of a live process whose snapshot root takes: the files read for that process (its libraries and
    their debug files) are read only as far as this user could read them, so that a job cannot make root's
    snapshot lend the case the symbols, lines and build-id of a file closed to the job (its library's name
    swapped for a link to a root-only build)."""

    uid: int
    gids: frozenset[int]

    def may(self, info: os.stat_result, other_bits: int) -> bool:
        """Whether the mode bits of `info` grant this user `other_bits` (given as the others' S_IROTH, S_IXOTH),
        as the kernel judges them: the owner's bits for the owner, else the group's for a member, else the
        others'. (A POSIX ACL entry naming the user is not consulted: the mode bits stand.)"""
        shift = OWNER_SHIFT if info.st_uid == self.uid else GROUP_SHIFT if info.st_gid in self.gids else OTHER_SHIFT
        return (info.st_mode >> shift) & other_bits == other_bits


class Refused(Exception):
    """A file a process's user could not have read, or reached through a link it could have planted; why, in words."""


class Files:
    """Opens the files a core names (read-only, each real file once) and closes them all at the end."""

    def __init__(self, sysroot: str | None, core_dir: str | None, debug_dirs: tuple[str, ...],
                 read_as: ReadAs | None = None):
        self.sysroot, self.core_dir, self.read_as = sysroot, core_dir, read_as
        self.debug_dirs = (*debug_dirs, DEBUG_ROOT)
        self._fds: list[int] = []
        self.images: dict[str, Image | None] = {}
        """By real path: a file named many ways (a/../b, links) is opened and parsed once. For a process's user,
        by the name walked: its links are judged on each walk."""
        self.refused: dict[str, str] = {}
        """Names (keys of `images`) a process's user could not have read, with why."""

    def candidates(self, path: str) -> list[str]:
        """Where a mapped path may be found on this machine, most trusted first.

        With a sysroot, the plain path is not one: that would be the analysing machine's file
        (nor is a path whose `..` or links lead out of the sysroot). A relative path (a program
        started as `./train`) is the crashed process's, relative to its working directory, where
        the kernel writes cores: it is looked for under the core's directory, never this process's.
        """
        clean = path.removesuffix(" (deleted)")
        if os.path.isabs(clean):
            found = [os.path.join(self.sysroot, clean.lstrip("/")) if self.sysroot else clean]
            found = [candidate for candidate in found if self.inside_sysroot(candidate)]
        else:
            found = [os.path.normpath(os.path.join(self.core_dir, clean))] if self.core_dir else []
            found = [candidate for candidate in found if self.beside_core(candidate)]
        if self.core_dir:
            found.append(os.path.join(self.core_dir, os.path.basename(clean)))
        return list(dict.fromkeys(found))

    def key(self, path: str) -> str:
        """The name `images` and `refused` know `path` by."""
        return os.path.realpath(path) if self.read_as is None else os.path.abspath(path)

    def image(self, path: str) -> Image | None:
        """The ELF image at `path` (parsed once per real file), None when it is no usable ELF file or, for a
        process's user, one it could not read (why in `refused`)."""
        key = self.key(path)
        if key not in self.images:
            self.images[key] = None
            try:
                opened = _open_regular(key) if self.read_as is None else _open_as(key, self.read_as)
            except Refused as exc:
                self.refused[key], opened = str(exc), None
            if opened is not None:
                fd, size = opened
                self._fds.append(fd)
                try:
                    self.images[key] = Image(lambda offset, length: _pread(fd, offset, length), path, size)
                except (ElfError, OSError):
                    pass
        return self.images[key]

    def chosen(self, path: str) -> bool:
        """Whether `path` really is where `candidates` looks: under the sysroot (no link or `..` leading
        out of it), or under the core's directory."""
        return self.inside_sysroot(path) or self.beside_core(path)

    def beside_core(self, path: str) -> bool:
        """Whether `path` really lies under the core's directory."""
        if self.core_dir is None:
            return False
        root = os.path.realpath(self.core_dir)
        return os.path.commonpath([root, os.path.realpath(path)]) == root

    def inside_sysroot(self, path: str) -> bool:
        """True without a sysroot; with one, whether `path` really lies under it."""
        if not self.sysroot:
            return True
        root = os.path.realpath(self.sysroot)
        return os.path.commonpath([root, os.path.realpath(path)]) == root

    def debug_image(self, build_id: str | None, file: Image | None = None, resolved: str | None = None) -> Image | None:
        """The separate debug file of a module, where gdb looks for one: by build-id under each debug
        directory, in debuginfod's cache, then by `file`'s `.gnu_debuglink` beside `resolved`, in its
        `.debug/` and under each debug directory. A candidate is only taken when it is that build
        (same build-id; without one, the CRC32 the link names): another build's symbols would lie.
        """
        found: list[str] = []
        if build_id and len(build_id) >= 4 and all(c in "0123456789abcdef" for c in build_id):
            found += [os.path.join(root, ".build-id", build_id[:2], f"{build_id[2:]}.debug")
                      for root in self.debug_dirs]
            found.append(os.path.join(debuginfod_cache(), build_id, "debuginfo"))
        link = _debuglink(file) if file is not None else None
        if link is not None and resolved is not None:
            here = os.path.dirname(os.path.realpath(resolved))
            found += [os.path.join(here, link[0]), os.path.join(here, ".debug", link[0])]
            found += [os.path.join(root, here.lstrip("/"), link[0]) for root in self.debug_dirs]
        for path in found:
            image = self.image(path)
            if image is None or image is file:
                continue
            if (image.build_id == build_id if build_id else link is not None and _crc32(image) == link[1]):
                return image
        return None

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def debuginfod_cache() -> str:
    """debuginfod's client cache, where `debuginfod-find` (and gdb) put what they fetched."""
    if os.environ.get("DEBUGINFOD_CACHE_PATH"):
        return os.environ["DEBUGINFOD_CACHE_PATH"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "debuginfod_client")


def _debuglink(image: Image) -> tuple[str, int] | None:
    """`.gnu_debuglink`: the debug file's base name and its CRC32; None when absent or naming a path."""
    section = image.sections.get(".gnu_debuglink")
    if section is None or not 5 < section.size <= MAX_DEBUGLINK:
        return None
    data = image.read(section.offset, section.size)
    name, _, _ = data.partition(b"\0")
    crc_at = (len(name) + 4) // 4 * 4
    if len(data) < crc_at + 4 or not name:
        return None
    text = name.decode("utf-8", "replace")
    if text != os.path.basename(text) or text in (".", ".."):
        return None
    return text, int.from_bytes(data[crc_at:crc_at + 4], "little")


def _crc32(image: Image) -> int | None:
    """The CRC32 of a whole file (what `.gnu_debuglink` names), None past MAX_CRC_BYTES."""
    if image.size is None or image.size > MAX_CRC_BYTES:
        return None
    crc = 0
    for offset in range(0, image.size, CRC_CHUNK):
        crc = zlib.crc32(image.read(offset, CRC_CHUNK), crc)
    return crc


def _open_regular(real: str) -> tuple[int, int] | None:
    """Open a resolved path read-only if it is a regular file and no pseudo-file of this machine.

    O_NONBLOCK keeps a FIFO from hanging the open; the type is judged on the open fd (fstat),
    so a file swapped after the check is still judged by what was opened.
    """
    if any(real == root or real.startswith(root + "/") for root in PSEUDO_ROOTS):
        return None
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return fd, info.st_size


def _open_as(path: str, read_as: ReadAs) -> tuple[int, int] | None:
    """An absolute path opened read-only as `read_as`'s user could open it, for a snapshot taken by another
    (root): walked one name at a time from / by descriptors (openat with O_NOFOLLOW, so that nothing is resolved
    behind the walk's back), every folder searchable by that user, a link followed only when that user could not
    have planted it (it is not the link's owner), never into /proc, /sys or /dev, and the file a regular file that
    user may read, judged on the descriptor opened, which is the one read. None, as for a missing file, when a
    folder on the way is closed to the user (it hides the file from the user as from anyone); Refused for a
    planted link or a file the user may not read.

    Why by name and not through /proc/PID/map_files/START-END (the very file the process mapped): opening those
    needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, which containers drop by default, they last only as long as the
    process and its mapping, and the debug files are found by name in any case: one rule by name covers them all.
    """
    todo = [name for name in reversed(path.split("/")) if name]
    """The names still to walk, the next one last."""
    folders: list[tuple[str, int]] = []
    """The folders walked (name, descriptor), / first: ".." steps back along them, as the kernel's walk does."""
    links = 0
    try:
        folders.append(("", os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)))
        while todo:
            name = todo.pop()
            if name in (".", ".."):
                if name == ".." and len(folders) > 1:
                    os.close(folders.pop()[1])
                continue
            walked = "/".join([*(folder for folder, _ in folders), name])
            here = folders[-1][1]
            if not read_as.may(os.fstat(here), stat.S_IXOTH) or walked in PSEUDO_ROOTS:
                return None
            info = os.stat(name, dir_fd=here, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if info.st_uid == read_as.uid:
                    raise Refused(f"a link the process's user could have planted ({walked})")
                if links > MAX_LINKS:
                    return None
                target = os.readlink(name, dir_fd=here)
                if target.startswith("/"):
                    while len(folders) > 1:
                        os.close(folders.pop()[1])
                todo.extend(part for part in reversed(target.split("/")) if part)
            elif todo:
                folders.append((name, os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                              dir_fd=here)))
            else:
                return _open_readable(name, here, read_as)
        return None
    except OSError:
        return None
    finally:
        for _, fd in folders:
            os.close(fd)


def _open_readable(name: str, folder: int, read_as: ReadAs) -> tuple[int, int] | None:
    """`name` in `folder` opened without following a link; kept when it is a regular file `read_as` may read."""
    fd = os.open(name, os.O_RDONLY | NO_LINK_FLAGS, dir_fd=folder)
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if stat.S_ISREG(info.st_mode) and read_as.may(info, stat.S_IROTH):
        return fd, info.st_size
    os.close(fd)
    if stat.S_ISREG(info.st_mode):
        raise Refused("not readable by the process's user")
    return None


def _pread(fd: int, offset: int, length: int) -> bytes:
    """A read that answers b"" for offsets and lengths no file has (a corrupt core asks for them)."""
    if not 0 <= offset < 1 << 62 or length <= 0:
        return b""
    try:
        return os.pread(fd, min(length, 1 << 30), offset)
    except (OSError, OverflowError):
        return b""


@dataclass
class Module:
    """One mapped file of the process, with what could be learnt about it."""

    path: str
    start: int
    end: int
    mappings: list[FileMapping]
    base: int
    bias: int = 0
    is_elf: bool = False
    build_id: str | None = None
    build_id_on_disk: str | None = None
    file: Image | None = None
    debug: Image | None = None
    in_core: tuple[EhFrame, ...] = ()
    """CFI read from the core's own memory (found through the dumped headers' PT_GNU_EH_FRAME): a deleted
    or missing file's last source, when the core holds those pages (coredump_filter bit 2)."""
    resolved: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return os.path.basename(self.path.removesuffix(" (deleted)")) or self.path

    @property
    def symbols(self) -> SymbolTable | None:
        for image in (self.debug, self.file):
            if image is not None and image.symbols:
                if image is self.debug and self.file is not None:
                    image.symbols.take_plt(self.file.symbols)  # the debug file's PLT is NOBITS
                return image.symbols
        return None

    @cached_property
    def cfi(self) -> CfiTables | None:
        """The CFI of the module's file, then of its separate debug file (which may hold the only
        `.debug_frame`); None when neither has any."""
        tables = tuple(table for image in (self.file, self.debug) if image is not None for table in image.cfi)
        tables += self.in_core if self.file is None else ()
        return CfiTables(tables) if tables else None


def group_mappings(files: list[FileMapping]) -> list[tuple[str, list[FileMapping]]]:
    """NT_FILE entries per path, in the order the paths first appear."""
    grouped: dict[str, list[FileMapping]] = {}
    for mapping in files:
        grouped.setdefault(mapping.path, []).append(mapping)
    return list(grouped.items())


def load_module(path: str, mappings: list[FileMapping], memory: Memory, files: Files) -> Module:
    """A module: its load bias from the headers in core memory (or on disk), build-ids, and its file."""
    first = min((m for m in mappings if m.file_offset == 0), default=mappings[0], key=lambda m: m.start)
    module = Module(path, min(m.start for m in mappings), max(m.end for m in mappings), mappings, first.start)
    in_core = _image_in_memory(memory, first.start, path)
    if in_core is not None:
        module.is_elf = True
        module.bias = _bias(in_core, first.start)
        module.build_id = _build_id_in_memory(in_core, memory, module.bias)
    _attach_file(module, files, in_core is None)
    if in_core is not None and module.file is None:
        module.in_core = _cfi_in_memory(in_core, module.bias - first.start)
    if module.file is not None and in_core is None:
        module.is_elf = True
        module.bias = _bias(module.file, first.start)
    if module.is_elf:
        module.debug = files.debug_image(module.build_id or module.build_id_on_disk, module.file, module.resolved)
    return module


def vdso_module(base: int, memory: Memory) -> Module | None:
    """The vdso: not in NT_FILE, but its whole ELF image is in the core at AT_SYSINFO_EHDR."""
    segment = memory.segment(base)
    if segment is None:
        return None
    end = segment.vaddr + segment.memsz
    try:
        image = Image(lambda offset, length: (memory.read(base + offset, min(length, max(0, end - base - offset)))
                                              or b""),
                      "[vdso]")
        _ = image.segments  # parse now, so that a broken image fails here and not mid-unwind
    except ElfError:
        return None
    module = Module("[vdso]", base, end, [], base, base, True, file=image)
    module.build_id = image.build_id
    return module


def memory_source(module: Module, memory: Memory, files: Files) -> Read | None:
    """The file that may stand in for the pages of `module` the core did not dump, or None.

    Only the ELF file the process mapped, found where `Files.candidates` looks, qualifies: its
    build-id is the one in the core or, the core holding none, it is long enough for every
    mapping and starts with the header bytes the core holds (`memory` reads the core alone).
    Any other file the core names -- a secret, a file of this machine's /proc -- could put the
    analyst's own data into the report.
    """
    image, real = module.file, module.resolved
    if image is None or real is None or image.size is None or not files.chosen(real):
        return None
    if module.build_id is not None:
        return image.read if image.build_id == module.build_id else None
    needed = max(m.file_offset + m.end - m.start for m in module.mappings)
    if needed > -(-image.size // MAX_PAGE) * MAX_PAGE:
        return None
    first = next((m for m in module.mappings if m.file_offset == 0), None)
    held = memory.read(first.start, HEADER_BYTES) if first is not None else None
    if held is not None and image.read(0, len(held)) != held:
        return None
    return image.read


def _image_in_memory(memory: Memory, base: int, name: str) -> Image | None:
    head = memory.read(base, 4)
    if head != b"\x7fELF":
        return None
    try:
        image = Image(lambda offset, length: memory.read(base + offset, length) or b"", name)
        _ = image.segments  # parse now, so that a broken image fails here and not mid-unwind
        return image
    except ElfError:
        return None


def _cfi_in_memory(image: Image, shift: int) -> tuple[EhFrame, ...]:
    """`.eh_frame` as the process's own unwinder found it: PT_GNU_EH_FRAME names `.eh_frame_hdr`, whose
    first pointer is `.eh_frame`; `shift` turns a link-time address into an offset of `image`.
    Nothing when the core did not dump those pages."""
    hdr = next((s for s in image.segments if s.type == PT_GNU_EH_FRAME), None)
    head = image.read(hdr.vaddr + shift, 8) if hdr is not None else b""
    if hdr is None or len(head) < 8 or head[0] != 1 or head[1] != EH_PE_PCREL_SDATA4:
        return ()
    frame_at = (hdr.vaddr + 4 + int.from_bytes(head[4:8], "little", signed=True)) & ((1 << 64) - 1)
    load = next((s for s in image.segments if s.type == elf.PT_LOAD and s.vaddr <= frame_at < s.vaddr + s.memsz),
                None)
    if load is None:
        return ()
    sections = {".eh_frame_hdr": elf.Section(".eh_frame_hdr", 1, hdr.vaddr, hdr.vaddr + shift, hdr.memsz),
                ".eh_frame": elf.Section(".eh_frame", 1, frame_at, frame_at + shift,
                                         load.vaddr + load.memsz - frame_at)}
    try:
        return (EhFrame(image.read, sections),)
    except CfiError:
        return ()


def _bias(image: Image, base: int) -> int:
    """Load bias: where the segment holding file offset 0 landed, minus its link-time address."""
    loads = [s for s in image.segments if s.type == elf.PT_LOAD]
    if not loads:
        return base
    first = min(loads, key=lambda s: s.offset)
    return base - ((first.vaddr - first.offset) & ~0xFFF)


def _build_id_in_memory(image: Image, memory: Memory, bias: int) -> str | None:
    try:
        return elf.build_id(lambda addr, size: memory.read(addr, size) or b"", image.head, image.segments,
                            lambda seg: (bias + seg.vaddr, seg.filesz))
    except ElfError:
        return None


def _attach_file(module: Module, files: Files, need_any: bool) -> None:
    """Pick the on-disk file: the first candidate whose build-id matches the core's."""
    found: list[tuple[str, Image]] = []
    for real in files.candidates(module.path):
        image = files.image(real)
        if image is None:
            if (why := files.refused.get(files.key(real))) is not None:
                module.warnings.append(f"library {real} not read: {why}")
            continue
        found.append((real, image))
        if module.build_id is None or image.build_id == module.build_id:
            break
    if not found:
        return
    match = next(((real, image) for real, image in found if module.build_id in (None, image.build_id)), None)
    real, image = match or found[0]
    module.file, module.resolved, module.build_id_on_disk = image, real, image.build_id
    if match is None:
        module.warnings.append(
            f"{real} is not the file the process had mapped (build-id {image.build_id or 'none'} on disk, "
            f"{module.build_id} in the core): its symbols and unwind tables may be wrong; pass --sysroot with "
            "the crashed machine's files")
