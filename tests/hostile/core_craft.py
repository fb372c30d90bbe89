"""Rewriting a committed real core into a hostile one: its notes, its program headers, its CFI.

Only `struct`, so the damage is done the way an attacker would do it, not through the
reader under test. A core is ELF64 little-endian: program headers at e_phoff, one PT_NOTE
segment holding (namesz, descsz, type, name, desc) records, each 4-byte aligned.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import zstandard

DATA = Path(__file__).parent.parent / "data" / "core"
PT_LOAD, PT_NOTE = 1, 4
NT_AUXV, NT_FILE = 6, 0x46494C45
AT_ENTRY, AT_RANDOM, AT_EXECFN = 9, 25, 31
PHDR = struct.Struct("<IIQQQQQQ")


@dataclass
class Note:
    name: bytes
    type: int
    desc: bytes


def committed(name: str) -> bytearray:
    """A committed core (tests/data/core/NAME.core.zst), decompressed."""
    with (DATA / f"{name}.core.zst").open("rb") as handle:
        return bytearray(zstandard.ZstdDecompressor().stream_reader(handle).read())


def program_headers(core: bytes) -> list[list[int]]:
    """[type, flags, offset, vaddr, paddr, filesz, memsz, align] of every program header."""
    phoff, = struct.unpack_from("<Q", core, 0x20)
    phnum, = struct.unpack_from("<H", core, 0x38)
    return [list(PHDR.unpack_from(core, phoff + i * PHDR.size)) for i in range(phnum)]


def set_program_header(core: bytearray, index: int, fields: list[int]) -> None:
    phoff, = struct.unpack_from("<Q", core, 0x20)
    PHDR.pack_into(core, phoff + index * PHDR.size, *fields)


def notes(core: bytes) -> list[Note]:
    """The notes of the core's (first) PT_NOTE segment."""
    _t, _f, offset, _v, _p, filesz, _m, _a = next(h for h in program_headers(core) if h[0] == PT_NOTE)
    blob, found, at = core[offset:offset + filesz], [], 0
    while at + 12 <= len(blob):
        namesz, descsz, kind = struct.unpack_from("<III", blob, at)
        name_at = at + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        found.append(Note(bytes(blob[name_at:name_at + namesz]), kind, bytes(blob[desc_at:desc_at + descsz])))
        at = desc_at + (descsz + 3) // 4 * 4
    return found


def note_blob(found: list[Note]) -> bytes:
    out = bytearray()
    for note in found:
        out += struct.pack("<III", len(note.name), len(note.desc), note.type)
        out += note.name.ljust((len(note.name) + 3) // 4 * 4, b"\0")
        out += note.desc.ljust((len(note.desc) + 3) // 4 * 4, b"\0")
    return bytes(out)


def replace_notes(core: bytearray, found: list[Note]) -> None:
    """Write the notes at the end of the file and point the PT_NOTE header at them."""
    index, header = next((i, h) for i, h in enumerate(program_headers(core)) if h[0] == PT_NOTE)
    core.extend(b"\0" * (-len(core) % 8))
    header[2], header[5] = len(core), len(note_blob(found))
    core.extend(note_blob(found))
    set_program_header(core, index, header)


def auxv(found: list[Note]) -> dict[int, int]:
    desc = next(n.desc for n in found if n.type == NT_AUXV)
    return dict(struct.iter_unpack("<QQ", desc[: len(desc) // 16 * 16]))


def file_entries(found: list[Note]) -> list[tuple[int, int, int, str]]:
    """NT_FILE as (start, end, page offset, path)."""
    desc = next(n.desc for n in found if n.type == NT_FILE)
    count, _page = struct.unpack_from("<QQ", desc)
    names = desc[16 + 24 * count:].split(b"\0")
    return [(*struct.unpack_from("<QQQ", desc, 16 + 24 * i), names[i].decode()) for i in range(count)]


def file_note(entries: list[tuple[int, int, int, str]], page: int = 4096) -> Note:
    desc = struct.pack("<QQ", len(entries), page)
    desc += b"".join(struct.pack("<QQQ", s, e, o) for s, e, o, _ in entries)
    desc += b"".join(p.encode() + b"\0" for _s, _e, _o, p in entries)
    return Note(b"CORE\0", NT_FILE, desc)


def strings_over_file(core: bytearray, path: str, execfn_path: str | None = None) -> None:
    """Cut the stack's dump where the strings above the auxv start (AT_RANDOM's bytes, argv, envp,
    AT_EXECFN) and name `path` over the rest, from file offset 0; with `execfn_path`, that file
    from offset 0 at AT_EXECFN's string. The executable's own mappings are removed from NT_FILE,
    so that the program's name can only come from AT_EXECFN's string."""
    found = notes(core)
    vector = auxv(found)
    index, stack = next((i, h) for i, h in enumerate(program_headers(core))
                        if h[0] == PT_LOAD and h[3] <= vector[AT_EXECFN] < h[3] + h[6])
    cut = vector[AT_RANDOM] & ~7
    stack[5] = cut - stack[3]
    set_program_header(core, index, stack)
    entries = file_entries(found)
    program = {p for s, e, _o, p in entries if s <= vector[AT_ENTRY] < e}
    end = stack[3] + stack[6]
    over = [(cut, end, 0, path)] if execfn_path is None else [
        (cut, vector[AT_EXECFN], 0, path), (vector[AT_EXECFN], vector[AT_EXECFN] + 0x1000, 0, execfn_path)]
    entries = sorted([e for e in entries if e[3] not in program] + over)
    replace_notes(core, [file_note(entries) if n.type == NT_FILE else n for n in found])


SHDR = struct.Struct("<IIQQQQIIQQ")
SYM = struct.Struct("<IBBHQQ")


def sections(elf: bytes) -> dict[str, list[int]]:
    """[name, type, flags, addr, offset, size, link, info, align, entsize] by name, with their header's offset."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", elf, 0x3C)
    rows = [list(SHDR.unpack_from(elf, shoff + i * SHDR.size)) + [shoff + i * SHDR.size] for i in range(shnum)]
    names = rows[shstrndx]
    found = {}
    for row in rows:
        at = names[4] + row[0]
        found[elf[at:elf.index(b"\0", at)].decode()] = row
    return found


def function(elf: bytes, name: str) -> tuple[int, int]:
    """(address, size) of a function in the ELF's .symtab."""
    table = sections(elf)
    symtab, strtab = table[".symtab"], table[".strtab"]
    for at in range(symtab[4], symtab[4] + symtab[5], SYM.size):
        name_at, _info, _other, _shndx, value, size = SYM.unpack_from(elf, at)
        start = strtab[4] + name_at
        if elf[start:elf.index(b"\0", start)] == name.encode():
            return value, size
    raise KeyError(name)


def with_cfi(library: bytes, name: str, instructions: bytes) -> bytes:
    """The library with the unwind rows of function `name` replaced by `instructions` (CFA opcodes).

    A new FDE (using the first CIE of .eh_frame, pc-relative sdata4 addresses as gcc writes
    them) goes after a copy of .eh_frame at the end of the file; the section header and the
    function's entry in the .eh_frame_hdr search table are pointed at it. The build-id stays,
    so the reader takes the file for the one the core's process mapped.
    """
    elf = bytearray(library)
    table = sections(elf)
    frame, hdr = table[".eh_frame"], table[".eh_frame_hdr"]
    start, size = function(elf, name)
    body = bytearray(elf[frame[4]:frame[4] + frame[5]]).rstrip(b"\0")  # the zero terminator goes after the FDE
    body.extend(b"\0" * (-len(body) % 4))
    fde_at = len(body)
    fields = bytearray(struct.pack("<I", fde_at + 4))  # CIE pointer: back to the CIE at offset 0
    fields += struct.pack("<ii", start - (frame[3] + fde_at + 8), size) + b"\0" + instructions
    fields.extend(b"\0" * (-(len(fields) + 4) % 4))  # DW_CFA_nop padding
    body += struct.pack("<I", len(fields)) + fields + b"\0" * 4
    elf.extend(b"\0" * (-len(elf) % 16))
    frame[4], frame[5] = len(elf), len(body)
    elf.extend(body)
    SHDR.pack_into(elf, frame[10], *frame[:10])
    count, = struct.unpack_from("<I", elf, hdr[4] + 8)
    for at in range(hdr[4] + 12, hdr[4] + 12 + 8 * count, 8):
        initial, _fde = struct.unpack_from("<ii", elf, at)
        if initial + hdr[3] == start:
            struct.pack_into("<ii", elf, at, initial, frame[3] + fde_at - hdr[3])
    return bytes(elf)


def uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def cfa_expression(ops: bytes) -> bytes:
    """DW_CFA_def_cfa_expression with these DWARF operations."""
    return b"\x0f" + uleb(len(ops)) + ops


SKIP_LOOP = cfa_expression(b"\x2f" + struct.pack("<h", -3))
"""DW_OP_skip -3: jumps back onto itself for ever."""
BRA_LOOP = cfa_expression(b"\x31\x28" + struct.pack("<h", -4))
"""DW_OP_lit1; DW_OP_bra -4: pushes 1, branches back to the push while it is true."""
POP_EMPTY = cfa_expression(b"\x13")
"""DW_OP_drop on an empty stack."""
RESTORE_UNDERFLOW = b"\x0b"
"""DW_CFA_restore_state with nothing remembered."""
REMEMBER_BOMB = b"\x0a" * ((1 << 20) - 64)
"""DW_CFA_remember_state a million times (each copies the row), within the 1 MiB an FDE may have."""


def crash_with_cfi(directory: Path, instructions: bytes) -> Path:
    """The null-write core beside `crash` and a libcrash.so whose lib_c (the crashing frame) has this CFI."""
    (directory / "core").write_bytes(bytes(committed("null-write")))
    (directory / "crash").write_bytes((DATA / "crash").read_bytes())
    (directory / "libcrash.so").write_bytes(with_cfi((DATA / "libcrash.so").read_bytes(), "lib_c", instructions))
    return directory / "core"


NT_X86_XSTATE = 0x202


def notes_read_many_times(path: Path, headers: int, filler: int) -> None:
    """Write the null-write core with its notes (plus one xsave note of `filler` zero bytes, left
    sparse on disk) at the end, and `headers` PT_NOTE program headers all naming those same bytes."""
    core = committed("null-write")
    found = notes(core)
    core.extend(b"\0" * (-len(core) % 8))
    at = len(core)
    core += note_blob(found) + struct.pack("<III", 8, filler, NT_X86_XSTATE) + b"LINUX\0\0\0"
    size = len(core) - at + filler
    heads = [h for h in program_headers(core) if h[0] != PT_NOTE]
    heads += [[PT_NOTE, 0, at, 0, 0, size, 0, 4]] * headers
    table = len(core) + filler
    struct.pack_into("<Q", core, 0x20, table)
    struct.pack_into("<H", core, 0x38, len(heads))
    with path.open("wb") as handle:
        handle.write(core)
        handle.seek(table)
        handle.write(b"".join(PHDR.pack(*h) for h in heads))


NT_PRSTATUS = 1
PR_PID, PR_RBP = 32, 112 + 4 * 8
"""Offsets in NT_PRSTATUS: the thread id, and rbp in pr_reg (r15 r14 r13 r12 rbp ...)."""


def many_threads(core: bytearray, count: int) -> None:
    """Give the core `count` more threads, copies of the crashed one without a frame pointer (rbp 0),
    so that a frame without CFI is only unwound by a stack scan."""
    found = notes(core)
    crashed = next(n for n in found if n.type == NT_PRSTATUS)
    copies = []
    for i in range(count):
        desc = bytearray(crashed.desc)
        struct.pack_into("<i", desc, PR_PID, 100_000 + i)
        struct.pack_into("<Q", desc, PR_RBP, 0)
        copies.append(Note(crashed.name, NT_PRSTATUS, bytes(desc)))
    replace_notes(core, found + copies)
