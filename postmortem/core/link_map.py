"""The mapped files of a core without an NT_FILE note, from the auxiliary vector and the dynamic linker.

qemu-user's cores and those of kernels before 3.7 name no mapped file. The
process still says what it loaded, as gdb's solib-svr4 reads it: AT_EXECFN
names the program and AT_ENTRY locates it (its load bias is AT_ENTRY minus its
e_entry); its PT_DYNAMIC's DT_DEBUG entry points at the dynamic linker's
`struct r_debug`, whose r_map heads the list of `struct link_map` (l_addr the
load bias, l_name the path, l_ld where the object's .dynamic landed, l_next).
Each object's PT_LOAD segments, from its file on this machine (`Files`, so
--sysroot applies), give the mappings NT_FILE would have listed. Every read is
of the dumped memory and bounded; a file whose .dynamic is not at l_ld is not
the object the process loaded, and is left out with a diagnostic.
"""

from __future__ import annotations

import struct

from . import elf
from .elf import ElfError
from .memory import Memory
from .modules import Files, Image
from .notes import AT_EXECFN, FileMapping

AT_BASE, AT_ENTRY = 7, 9
PT_DYNAMIC, PT_INTERP = 2, 3
DT_NULL, DT_DEBUG = 0, 21
PAGE = 4096
"""Mappings are page-aligned; the smallest page (x86-64, most aarch64 kernels) is the safe alignment."""
MAX_DYNAMIC = 4096
"""Entries of one .dynamic read (real ones have 30 to 60)."""
MAX_OBJECTS = 20_000
"""link_map entries followed: a PyTorch process loads a few hundred; a crafted list may loop."""
MAX_PATH = 4096
"""Bytes of one l_name read (PATH_MAX)."""


def mappings(auxv: dict[int, int], memory: Memory, files: Files, diagnostics: list[str],
             exe: str | None = None) -> list[FileMapping]:
    """What NT_FILE would have said, for the program and each object on the dynamic linker's list. The program
    is `exe` where the user names it (--exe), else the file AT_EXECFN names."""
    entry, execfn = auxv.get(AT_ENTRY), auxv.get(AT_EXECFN)
    named = _string(memory, execfn) if execfn else None
    if not entry:
        return []
    if exe is not None:
        image, program = files.image(exe), exe
    elif named:
        image, program = _image(named, files)[0], named
    else:
        diagnostics.append("the core names no mapped files (no NT_FILE note) and its program's name cannot be read "
                           "(no AT_EXECFN string in the dump): no modules, symbols or CFI; pass --exe PATH")
        return []
    if image is None:
        diagnostics.append(f"the core names no mapped files (no NT_FILE note) and its program {program} is not on "
                           "this machine (or no ELF file): no modules, symbols or CFI; pass --sysroot DIR with the "
                           "crashed machine's files, or --exe PATH")
        return []
    bias = (entry - image.head.entry) & ((1 << 64) - 1)
    if bias % PAGE:
        diagnostics.append(f"{program} is not the program this core ran: its entry point puts it at a load address "
                           f"{bias:#x} off a page boundary; no modules, symbols or CFI")
        return []
    found = _loads(program, image, bias)
    missing: list[str] = []
    for named, l_addr, l_ld in _objects(memory, _debug_pointer(memory, image, bias)):
        # the dynamic linker's own l_name points at the program's PT_INTERP string, in text a core may not hold
        name = named or (_interpreter(image) if l_addr == auxv.get(AT_BASE) else None)
        if name is None:
            continue
        library, _ = _image(name, files)
        dynamic = _dynamic(library) if library is not None else None
        if library is None or dynamic is None or (dynamic.vaddr + l_addr) & ((1 << 64) - 1) != l_ld:
            missing.append(name)
            continue
        found += _loads(name, library, l_addr)
    diagnostics.append("the core names no mapped files (no NT_FILE note): the modules come from the program "
                       f"and the dynamic linker's list ({len({m.path for m in found})} found)")
    if missing:
        diagnostics.append(f"{len(missing)} loaded object(s) not found as the process loaded them on this machine "
                           f"({', '.join(missing[:5])}): pass --sysroot DIR with the crashed machine's files")
    return found


def _image(path: str, files: Files) -> tuple[Image | None, str | None]:
    for candidate in files.candidates(path):
        image = files.image(candidate)
        if image is not None:
            return image, candidate
    return None, None


def _loads(path: str, image: Image, bias: int) -> list[FileMapping]:
    """The file-backed part of each PT_LOAD, page-aligned as the kernel maps it."""
    found = []
    for seg in image.segments:
        if seg.type != elf.PT_LOAD or not seg.filesz:
            continue
        start = (seg.vaddr + bias) & ~(PAGE - 1)
        end = -(-(seg.vaddr + bias + seg.filesz) // PAGE) * PAGE
        found.append(FileMapping(start, end, seg.offset & ~(PAGE - 1), path))
    return found


def _dynamic(image: Image) -> elf.Segment | None:
    try:
        return next((seg for seg in image.segments if seg.type == PT_DYNAMIC), None)
    except ElfError:
        return None


def _interpreter(image: Image) -> str | None:
    """The program's PT_INTERP: the dynamic linker's path."""
    seg = next((seg for seg in image.segments if seg.type == PT_INTERP), None)
    raw = image.read(seg.offset, min(seg.filesz, MAX_PATH)) if seg is not None else b""
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape") or None


def _debug_pointer(memory: Memory, image: Image, bias: int) -> int | None:
    """DT_DEBUG's value in the program's .dynamic as the process had it: the dynamic linker's r_debug."""
    dynamic = _dynamic(image)
    if dynamic is None:
        return None
    raw = memory.read(dynamic.vaddr + bias, min(dynamic.memsz, 16 * MAX_DYNAMIC)) or b""
    for tag, value in struct.iter_unpack("<qQ", raw[: len(raw) // 16 * 16]):
        if tag == DT_NULL:
            break
        if tag == DT_DEBUG:
            return value or None
    return None


def _objects(memory: Memory, r_debug: int | None) -> list[tuple[str | None, int, int]]:
    """(l_name, l_addr, l_ld) of the objects on the list after the program (the first entry); l_name is
    None where the core does not hold it. A bare soname (the vDSO's) names no file and is left out."""
    first = memory.word(r_debug + 8) if r_debug else None
    first = memory.word(first + 24) if first else None
    found: list[tuple[str | None, int, int]] = []
    seen: set[int] = set()
    at = first
    while at and at not in seen and len(seen) < MAX_OBJECTS:
        seen.add(at)
        raw = memory.read(at, 32)
        if raw is None or len(raw) < 32:
            break
        l_addr, l_name, l_ld, l_next = struct.unpack("<4Q", raw)
        name = _string(memory, l_name) if l_name else None
        if name is None or "/" in name:
            found.append((name, l_addr, l_ld))
        at = l_next
    return found


def _string(memory: Memory, addr: int) -> str | None:
    data = memory.cstring(addr, MAX_PATH)
    return None if data is None else data.decode("utf-8", "surrogateescape") or None
