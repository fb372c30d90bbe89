"""DWARF CFI for native stack unwinding (x86-64 and aarch64: core/arch.py holds what differs).

CFI comes from `.eh_frame`: the FDE for a pc is found by binary search in
`.eh_frame_hdr` (or, in a static binary that has none, in an index made by one
pass over `.eh_frame`), else from `.debug_frame` (Go binaries, -fno-asynchronous-
unwind-tables), of the file, its separate debug file, or the core's own memory
(modules.Module.cfi); only that FDE (and its CIE) is parsed, then its
instructions are run up to the pc to get the row (CFA rule and register
rules). A frame marked a signal frame (CIE augmentation "S") is followed by
one looked up at its exact pc, every other caller at pc-1 (the call
instruction, not the one after it).

The walk itself (core/analysis.py `unwind_thread`) reads signal trampolines
by their code, then CFI, then frame pointers and a stack scan. Every frame
records how it was found (HOWS): "registers" (frame 0), "cfi", "sigcontext",
"pclntab", "fp", "scan" or "lr" (the last three, GUESSES).

The CFI and the stacks come from the core and the files it names, so every loop
here is bounded: LEB128 numbers by their length, a CFI program by its
instruction count and its remember_state depth, a DWARF expression (whose
DW_OP_skip and DW_OP_bra can loop) by its operation count, and all the
unwinding of one core by a shared `Budget`. Past a per-row or per-expression
bound the frame's CFI is unusable (CfiError) and the unwinder falls back to
frame pointers; past the core's budget the threads keep the frames found so far.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from .arch import Arch
from .elf import Read, Section

MAX_REGISTER = 63
"""Rules are kept for DWARF registers 0..63 (x86-64's general registers and return address are 0-16,
aarch64's x0-x30 and sp 0-31): the row stays small whatever the CFI says."""
HOWS = ("registers", "cfi", "sigcontext", "pclntab", "fp", "scan", "lr")
"""Every way a frame is found: frame 0's registers, CFI, the kernel's signal frame, Go's `.gopclntab`, and the
guesses below."""
GUESSES = ("fp", "scan", "lr")
"""How frames found without CFI are marked (frame pointers, a stack scan, aarch64's link register taken
for frame 0's return address): from here on a thread's stack may be wrong."""
MAX_FRAMES = 1 << 18
"""Frames per thread: a runaway recursion fills the default 8 MiB stack with as few as 32 bytes a frame.
Past it the thread is marked truncated (never cut silently); 200,000 frames unwind in about 2 s."""
SCAN_WORDS = 2048
"""Stack words searched for a return address when a frame has neither CFI nor a frame pointer (16 KiB)."""
MAX_LEB128_BYTES = 10
"""A 64-bit number needs ten 7-bit groups; a longer run is no CFI (and would build ever larger ints)."""
MAX_CFI_INSTRUCTIONS = 20_000
"""Instructions run of one CFI program (a CIE's initial ones, an FDE's); libLLVM's largest FDE has about 1,150."""
MAX_REMEMBERED_ROWS = 64
"""DW_CFA_remember_state depth; compilers nest it once or twice (each level copies the row)."""
MAX_EXPRESSION_STEPS = 1_000
"""DWARF operations per expression: glibc's and compilers' CFA expressions take a dozen; DW_OP_skip can loop."""
MAX_CORE_STEPS = 2_000_000
"""CFI instructions, DWARF operations and scanned stack words for all the threads of one core (about 3 s).
Rows are cached by pc, so the threads of a real process, which share their pcs, take a fraction of it."""
MAX_CORE_FRAMES = 4 * MAX_FRAMES
"""Frames for all the threads of one core: four threads that overflowed their stacks, or thousands of real ones."""

MAX_CFI_SECTION = 64 << 20
"""Bytes of an .eh_frame or .debug_frame indexed by one pass (no .eh_frame_hdr): libLLVM's .eh_frame is ~10 MiB."""
MAX_INDEXED_FDES = 1_000_000
"""FDEs indexed by that pass; a real section has one per function (a static binary a few thousand)."""
SHT_NOBITS = 8
"""A section with no bytes in the file (a separate debug file's copy of .eh_frame)."""

MASK = (1 << 64) - 1


class CfiError(Exception):
    """The CFI bytes do not parse or an expression cannot be evaluated."""


class BudgetSpent(Exception):
    """The unwinding budget of the whole core is spent: the threads keep the frames found so far."""


@dataclass
class Budget:
    """The unwinding work one core may still do, shared by all its threads (hostile CFI or stacks
    cannot make the read run for ever)."""

    steps: int = MAX_CORE_STEPS
    frames: int = MAX_CORE_FRAMES

    @property
    def spent(self) -> str | None:
        """What ran out, in words; None while both counts last."""
        if self.steps < 0:
            return (f"the {MAX_CORE_STEPS:,} unwinding steps (CFI instructions, DWARF operations, scanned stack "
                    "words) allowed for one core are spent")
        if self.frames < 0:
            return f"the {MAX_CORE_FRAMES:,} frames allowed for all the threads of one core are found"
        return None

    def step(self, count: int = 1) -> None:
        self.steps -= count
        if self.steps < 0:
            raise BudgetSpent(self.spent)

    def frame(self) -> None:
        self.frames -= 1
        if self.frames < 0:
            raise BudgetSpent(self.spent)


@dataclass
class Row:
    """The CFI row for one pc: how to find the CFA and each saved register."""

    cfa_reg: int | None = None
    cfa_offset: int = 0
    cfa_expr: bytes | None = None
    rules: dict[int, tuple[str, object]] = field(default_factory=dict)
    signal_frame: bool = False


@dataclass(frozen=True)
class _Cie:
    code_align: int
    data_align: int
    ra_reg: int
    fde_encoding: int
    signal_frame: bool
    initial: bytes
    augmented: bool


class _Cursor:
    """Little-endian reads from bytes with LEB128 and DWARF pointer encodings."""

    def __init__(self, data: bytes, pos: int = 0, base_vaddr: int = 0):
        self.data, self.pos, self.base_vaddr = data, pos, base_vaddr

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise CfiError("CFI data cut off")
        value, = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def uleb(self) -> int:
        result = 0
        for shift in range(0, 7 * MAX_LEB128_BYTES, 7):
            if self.pos >= len(self.data):
                raise CfiError("LEB128 cut off")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
        raise CfiError(f"LEB128 number longer than {MAX_LEB128_BYTES} bytes")

    def sleb(self) -> int:
        start = self.pos
        value = self.uleb()
        bits = 7 * (self.pos - start)
        return value - (1 << bits) if value & (1 << (bits - 1)) else value

    def cstr(self) -> bytes:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise CfiError("string cut off")
        text, self.pos = self.data[self.pos:end], end + 1
        return text

    def pointer(self, encoding: int, datarel: int = 0) -> int:
        """A pointer in DW_EH_PE encoding; pc-relative is relative to this field's address."""
        if encoding == 0xFF:
            return 0
        field_vaddr = self.base_vaddr + self.pos
        fmt = encoding & 0x0F
        if fmt == 0x01:
            value = self.uleb()
        elif fmt == 0x09:
            value = self.sleb()
        else:
            code = {0x00: "<Q", 0x02: "<H", 0x03: "<I", 0x04: "<Q", 0x0A: "<h", 0x0B: "<i", 0x0C: "<q"}.get(fmt)
            if code is None:
                raise CfiError(f"pointer encoding {encoding:#x} not supported")
            value = self.take(code)
        application = encoding & 0x70
        if application == 0x10:
            value += field_vaddr
        elif application == 0x30:
            value += datarel
        elif application not in (0x00,):
            raise CfiError(f"pointer application {application:#x} not supported")
        return value & MASK


class EhFrame:
    """The CFI of one ELF section: `.eh_frame`, searched through `.eh_frame_hdr` when the image has one,
    else through an index made by one pass over its entries (static binaries have no header), or
    `.debug_frame` (`debug=True`: all that Go binaries and gcc -fno-asynchronous-unwind-tables -g
    carry). The two differ in how an FDE names its CIE and in the CIE's id."""

    def __init__(self, read: Read, sections: dict[str, Section], debug: bool = False):
        self._read, self._debug = read, debug
        name = ".debug_frame" if debug else ".eh_frame"
        frame = sections.get(name)
        hdr = None if debug else sections.get(".eh_frame_hdr")
        if frame is None or frame.type == SHT_NOBITS or not frame.size:
            raise CfiError(f"no {name} in this file")
        self._frame = frame
        self._hdr = hdr if hdr is not None and hdr.type != SHT_NOBITS else None
        self._count = 0
        if self._hdr is not None:
            self._table_at = self._header(self._hdr)
        self._index: tuple[list[int], list[int]] | None = None
        """FDE start addresses and offsets, sorted: the pass over a section without a header, made once."""
        self._cies: dict[int, _Cie] = {}
        self._rows: dict[int, Row | str | None] = {}
        """Rows by address; a string is why that address's CFI is unusable (asked again, it stays so)."""

    def _header(self, hdr: Section) -> int:
        """Check `.eh_frame_hdr`, note its FDE count; the file offset of its search table."""
        head = self._read(hdr.offset, 12)
        if len(head) < 12 or head[0] != 1:
            raise CfiError("unsupported .eh_frame_hdr")
        if head[3] != 0x3B:
            raise CfiError(f".eh_frame_hdr table encoding {head[3]:#x} not supported")
        cursor = _Cursor(head, 4, hdr.addr)
        cursor.pointer(head[1])
        self._count = cursor.pointer(head[2], hdr.addr) if head[2] != 0xFF else 0
        return hdr.offset + cursor.pos

    def row(self, vaddr: int, budget: Budget | None = None) -> Row | None:
        """The CFI row for a link-time address, or None when no FDE covers it; CfiError when its CFI is unusable.

        `budget` is the core's, shared by all its lookups (a lone lookup gets one of its own)."""
        budget = Budget() if budget is None else budget
        if vaddr not in self._rows:
            try:
                self._rows[vaddr] = self._find_row(vaddr, budget)
            except CfiError as exc:
                self._rows[vaddr] = str(exc)
        found = self._rows[vaddr]
        if isinstance(found, str):
            raise CfiError(found)
        return found

    def _find_row(self, vaddr: int, budget: Budget) -> Row | None:
        if self._hdr is None:
            starts, offsets = self._indexed(budget)
            at = bisect.bisect_right(starts, vaddr)
            return self._fde_row(offsets[at - 1], vaddr, budget) if at else None
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            start = self._entry(mid)[0]
            if start <= vaddr:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return None
        fde_vaddr = self._entry(lo - 1)[1]
        return self._fde_row(fde_vaddr - self._frame.addr, vaddr, budget)

    def _entry(self, index: int) -> tuple[int, int]:
        raw = self._read(self._table_at + index * 8, 8)
        if len(raw) < 8 or self._hdr is None:
            raise CfiError(".eh_frame_hdr table cut off")
        start, fde = struct.unpack("<ii", raw)
        return (start + self._hdr.addr) & MASK, (fde + self._hdr.addr) & MASK

    def _indexed(self, budget: Budget) -> tuple[list[int], list[int]]:
        """Every FDE's start address, by one pass over the section (MAX_INDEXED_FDES of them at most).

        An FDE whose CIE does not parse is left out; an entry length that leaves the section ends the pass."""
        if self._index is None:
            if self._frame.size > MAX_CFI_SECTION:
                raise CfiError(f"CFI section of {self._frame.size:,} bytes without an index: past "
                               f"{MAX_CFI_SECTION >> 20} MiB it is not read")
            found: list[tuple[int, int]] = []
            offset = 0
            while offset < self._frame.size and len(found) < MAX_INDEXED_FDES:
                budget.step()
                cursor, end, wide = self._entry_bytes(offset)
                if end == 4:
                    break  # the zero terminator of .eh_frame
                ident = cursor.take("<Q" if wide else "<I")
                if not self._is_cie(ident, wide):
                    try:
                        cie = self._cie(self._cie_offset(offset, cursor.pos - (8 if wide else 4), ident), budget)
                        found.append((cursor.pointer(cie.fde_encoding), offset))
                    except CfiError:
                        pass
                offset += end
            found.sort()
            self._index = [start for start, _ in found], [at for _, at in found]
        return self._index

    def _is_cie(self, ident: int, wide: bool) -> bool:
        if not self._debug:
            return ident == 0
        return ident == (MASK if wide else 0xFFFFFFFF)

    def _cie_offset(self, offset: int, pointer_at: int, ident: int) -> int:
        """Where an FDE's CIE is: .debug_frame names its section offset, .eh_frame its distance back."""
        return ident if self._debug else offset + pointer_at - ident

    def _entry_bytes(self, offset: int) -> tuple[_Cursor, int, bool]:
        """A cursor over one CIE/FDE (after its length field), its end position, and whether it is 64-bit DWARF."""
        if not 0 <= offset < self._frame.size:
            raise CfiError("FDE offset outside .eh_frame")
        head = self._read(self._frame.offset + offset, 12)
        if len(head) < 4:
            raise CfiError(".eh_frame cut off")
        length, = struct.unpack_from("<I", head)
        skip = 4
        if length == 0xFFFFFFFF:
            if len(head) < 12:
                raise CfiError(".eh_frame cut off")
            length, skip = struct.unpack_from("<Q", head, 4)[0], 12
        if length > 1 << 20:
            raise CfiError("implausible CFI entry length")
        data = self._read(self._frame.offset + offset, skip + length)
        return _Cursor(data, skip, self._frame.addr + offset), skip + length, skip == 12

    def _cie(self, offset: int, budget: Budget) -> _Cie:
        if offset not in self._cies:
            cursor, end, wide = self._entry_bytes(offset)
            if not self._is_cie(cursor.take("<Q" if wide else "<I"), wide):
                raise CfiError("CIE pointer does not lead to a CIE")
            version = cursor.take("<B")
            augmentation = cursor.cstr().decode("ascii", "replace")
            if "eh" in augmentation:
                cursor.take("<Q")
            if version >= 4:
                cursor.take("<H")  # address size, segment selector size (.debug_frame version 4)
            code_align, data_align = cursor.uleb(), cursor.sleb()
            ra_reg = cursor.take("<B") if version == 1 else cursor.uleb()
            fde_encoding, augmented = 0, augmentation.startswith("z")
            if augmented:
                budget.step(len(augmentation))
                aug_end = cursor.uleb() + cursor.pos
                for char in augmentation[1:]:
                    if char == "R":
                        fde_encoding = cursor.take("<B")
                    elif char == "P":
                        cursor.pointer(cursor.take("<B") & 0x7F)
                    elif char == "L":
                        cursor.take("<B")
                cursor.pos = aug_end
            self._cies[offset] = _Cie(code_align, data_align, ra_reg, fde_encoding, "S" in augmentation,
                                      cursor.data[cursor.pos:end], augmented)
        return self._cies[offset]

    def _fde_row(self, offset: int, vaddr: int, budget: Budget) -> Row | None:
        cursor, end, wide = self._entry_bytes(offset)
        pointer_at = cursor.pos
        ident = cursor.take("<Q" if wide else "<I")
        if self._is_cie(ident, wide):
            return None
        cie = self._cie(self._cie_offset(offset, pointer_at, ident), budget)
        start = cursor.pointer(cie.fde_encoding)
        span = cursor.pointer(cie.fde_encoding & 0x0F)
        if not start <= vaddr < start + span:
            return None
        if cie.augmented:
            cursor.pos += cursor.uleb()
        initial = Row(signal_frame=cie.signal_frame)
        _run(cie.initial, cie, initial, None, start, None, budget)
        row = Row(initial.cfa_reg, initial.cfa_offset, initial.cfa_expr, dict(initial.rules), cie.signal_frame)
        _run(cursor.data[cursor.pos:end], cie, row, initial, start, vaddr, budget)
        return row


@dataclass(frozen=True)
class CfiTables:
    """Every CFI table of one module, asked in turn: a pc one lacks (a binary built with
    -fno-asynchronous-unwind-tables -g has crt code in .eh_frame, its own in .debug_frame) may be in the next."""

    tables: tuple[EhFrame, ...]

    def row(self, vaddr: int, budget: Budget | None = None) -> Row | None:
        """The first table's row for `vaddr`; CfiError from a table whose CFI for it is unusable."""
        for table in self.tables:
            found = table.row(vaddr, budget)
            if found is not None:
                return found
        return None


def _run(program: bytes, cie: _Cie, row: Row, initial: Row | None, loc: int, target: int | None,
         budget: Budget) -> None:
    """Execute CFA instructions, stopping once the location passes `target`."""
    cursor = _Cursor(program)
    saved: list[tuple] = []
    for _ in range(MAX_CFI_INSTRUCTIONS):
        if cursor.pos >= len(program):
            return
        budget.step()
        op = cursor.take("<B")
        high, low = op & 0xC0, op & 0x3F
        if high == 0x40:
            loc += low * cie.code_align
        elif high == 0x80:
            _set_rule(row, low, ("offset", cursor.uleb() * cie.data_align))
            continue
        elif high == 0xC0:
            _restore(row, initial, low)
            continue
        elif op in (0x02, 0x03, 0x04):
            loc += cursor.take({0x02: "<B", 0x03: "<H", 0x04: "<I"}[op]) * cie.code_align
        elif op == 0x01:
            loc = cursor.pointer(cie.fde_encoding)
        else:
            _apply(op, cursor, cie, row, initial, saved)
            continue
        if target is not None and loc > target:
            return
    if cursor.pos < len(program):
        raise CfiError(f"CFI program longer than {MAX_CFI_INSTRUCTIONS:,} instructions")


def _apply(op: int, cursor: _Cursor, cie: _Cie, row: Row, initial: Row | None, saved: list[tuple]) -> None:
    """One non-advancing CFA instruction."""
    if op in (0x00, 0x2D, 0x2E):
        # 0x2D is aarch64's DW_CFA_AARCH64_negate_ra_state (pointer authentication signs the return address
        # from here on): every aarch64 return address is stripped of its signature anyway (`apply_row`)
        if op == 0x2E:
            cursor.uleb()
    elif op in (0x05, 0x11, 0x2F):
        reg = cursor.uleb()
        offset = cursor.uleb() if op == 0x05 else cursor.sleb() if op == 0x11 else -cursor.uleb()
        _set_rule(row, reg, ("offset", offset * cie.data_align))
    elif op in (0x14, 0x15):
        reg = cursor.uleb()
        _set_rule(row, reg, ("val_offset", (cursor.uleb() if op == 0x14 else cursor.sleb()) * cie.data_align))
    elif op == 0x06:
        _restore(row, initial, cursor.uleb())
    elif op == 0x07:
        _set_rule(row, cursor.uleb(), ("undefined", None))
    elif op == 0x08:
        row.rules.pop(cursor.uleb(), None)
    elif op == 0x09:
        reg = cursor.uleb()
        _set_rule(row, reg, ("register", cursor.uleb()))
    elif op == 0x0A:
        if len(saved) >= MAX_REMEMBERED_ROWS:
            raise CfiError(f"DW_CFA_remember_state nested deeper than {MAX_REMEMBERED_ROWS}")
        saved.append((row.cfa_reg, row.cfa_offset, row.cfa_expr, dict(row.rules)))
    elif op == 0x0B:
        if not saved:
            raise CfiError("DW_CFA_restore_state without a remembered state")
        row.cfa_reg, row.cfa_offset, row.cfa_expr, row.rules = saved.pop()
    elif op in (0x0C, 0x12):
        row.cfa_reg = cursor.uleb()
        row.cfa_offset = cursor.uleb() if op == 0x0C else cursor.sleb() * cie.data_align
        row.cfa_expr = None
    elif op == 0x0D:
        row.cfa_reg, row.cfa_expr = cursor.uleb(), None
    elif op in (0x0E, 0x13):
        row.cfa_offset = cursor.uleb() if op == 0x0E else cursor.sleb() * cie.data_align
    elif op == 0x0F:
        row.cfa_expr = _block(cursor)
    elif op in (0x10, 0x16):
        reg = cursor.uleb()
        _set_rule(row, reg, ("expression" if op == 0x10 else "val_expression", _block(cursor)))
    else:
        raise CfiError(f"CFA instruction {op:#x} not supported")


def _set_rule(row: Row, reg: int, rule: tuple[str, object]) -> None:
    """Keep a rule only for a register number up to MAX_REGISTER."""
    if reg <= MAX_REGISTER:
        row.rules[reg] = rule


def _restore(row: Row, initial: Row | None, reg: int) -> None:
    if initial is not None and reg in initial.rules:
        row.rules[reg] = initial.rules[reg]
    else:
        row.rules.pop(reg, None)


def _block(cursor: _Cursor) -> bytes:
    size = cursor.uleb()
    data = cursor.data[cursor.pos:cursor.pos + size]
    cursor.pos += size
    return data


Word = Callable[[int], "int | None"]


def evaluate(expr: bytes, regs: dict[int, int], word: Word, initial: int | None = None,
             budget: Budget | None = None) -> int:
    """A DWARF expression as CFI uses it (register arithmetic, constants, dereferences)."""
    budget = Budget() if budget is None else budget
    stack: list[int] = [] if initial is None else [initial]
    cursor = _Cursor(expr)
    try:
        _operations(cursor, stack, regs, word, budget)
    except IndexError:
        raise CfiError("DWARF expression pops more values than it pushed") from None
    if not stack:
        raise CfiError("empty expression")
    return stack[-1]


def _operations(cursor: _Cursor, stack: list[int], regs: dict[int, int], word: Word, budget: Budget) -> None:
    """Run the operations of one expression on `stack`, MAX_EXPRESSION_STEPS at most."""
    expr = cursor.data
    for _ in range(MAX_EXPRESSION_STEPS):
        if cursor.pos >= len(expr):
            return
        budget.step()
        op = cursor.take("<B")
        if 0x30 <= op <= 0x4F:
            stack.append(op - 0x30)
        elif 0x70 <= op <= 0x8F or op == 0x92:
            reg = op - 0x70 if op != 0x92 else cursor.uleb()
            if reg not in regs:
                raise CfiError(f"register {reg} unknown in this frame")
            stack.append((regs[reg] + cursor.sleb()) & MASK)
        elif 0x50 <= op <= 0x6F:
            if op - 0x50 not in regs:
                raise CfiError(f"register {op - 0x50} unknown in this frame")
            stack.append(regs[op - 0x50])
        elif op in _CONSTANTS:
            stack.append(cursor.take(_CONSTANTS[op]) & MASK)
        elif op == 0x10:
            stack.append(cursor.uleb())
        elif op == 0x11:
            stack.append(cursor.sleb() & MASK)
        elif op == 0x23:
            stack[-1] = (stack[-1] + cursor.uleb()) & MASK
        elif op in (0x06, 0x94):
            size = 8 if op == 0x06 else cursor.take("<B")
            value = word(stack.pop())
            if value is None:
                raise CfiError("expression reads memory that is not in the core")
            stack.append(value & ((1 << (8 * size)) - 1))
        elif op == 0x12:
            stack.append(stack[-1])
        elif op == 0x13:
            stack.pop()
        elif op == 0x14:
            stack.append(stack[-2])
        elif op == 0x16:
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif op in _BINARY:
            right, left = stack.pop(), stack.pop()
            stack.append(_BINARY[op](left, right) & MASK)
        elif op in (0x2F, 0x28):
            skip = cursor.take("<h")
            if op == 0x2F or stack.pop():
                cursor.pos += skip
                if not 0 <= cursor.pos <= len(expr):
                    raise CfiError("DW_OP_skip/DW_OP_bra jumps outside its expression")
        elif op != 0x96:
            raise CfiError(f"DWARF operation {op:#x} not supported")
    if cursor.pos < len(expr):
        raise CfiError(f"DWARF expression runs past {MAX_EXPRESSION_STEPS:,} operations (a DW_OP_skip/bra loop?)")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


_CONSTANTS = {0x03: "<Q", 0x08: "<B", 0x09: "<b", 0x0A: "<H", 0x0B: "<h", 0x0C: "<I", 0x0D: "<i", 0x0E: "<Q",
              0x0F: "<q"}
_BINARY: dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b, 0x1C: lambda a, b: a - b, 0x1E: lambda a, b: a * b, 0x21: lambda a, b: a | b,
    0x22: lambda a, b: a + b, 0x24: lambda a, b: a << (b & 63), 0x25: lambda a, b: a >> (b & 63),
    0x26: lambda a, b: _signed(a) >> (b & 63), 0x27: lambda a, b: a ^ b,
    0x29: lambda a, b: int(a == b), 0x2E: lambda a, b: int(a != b),
    0x2A: lambda a, b: int(_signed(a) >= _signed(b)), 0x2B: lambda a, b: int(_signed(a) > _signed(b)),
    0x2C: lambda a, b: int(_signed(a) <= _signed(b)), 0x2D: lambda a, b: int(_signed(a) < _signed(b)),
}


def apply_row(row: Row, regs: dict[int, int], word: Word, arch: Arch, budget: Budget | None = None) -> dict[int, int]:
    """The caller's registers from this frame's registers and its CFI row; its pc is the return-address
    column's value, stripped of any pointer-authentication signature.

    Registers without a rule keep their value (gdb's "same value" default).
    """
    budget = Budget() if budget is None else budget
    if row.cfa_expr is not None:
        cfa = evaluate(row.cfa_expr, regs, word, budget=budget)
    elif row.cfa_reg in regs:
        cfa = (regs[row.cfa_reg] + row.cfa_offset) & MASK
    else:
        raise CfiError("CFA register unknown in this frame")
    caller = dict(regs)
    caller[arch.sp_reg] = cfa
    for reg, (kind, arg) in row.rules.items():
        if kind == "undefined":
            caller.pop(reg, None)
            continue
        value = _rule_value(kind, arg, cfa, regs, word, budget)
        if value is None:
            caller.pop(reg, None)
        else:
            caller[reg] = value
    if arch.ra_column in caller:
        caller[arch.pc_reg] = strip(caller[arch.ra_column], arch)
    else:
        caller.pop(arch.pc_reg, None)
    return caller


def strip(address: int, arch: Arch) -> int:
    """A code address without the pointer-authentication signature aarch64 puts above its address bits."""
    return address & ((1 << arch.address_bits) - 1)


def _rule_value(kind: str, arg, cfa: int, regs: dict[int, int], word: Word, budget: Budget) -> int | None:
    if kind == "offset":
        return word((cfa + arg) & MASK)
    if kind == "val_offset":
        return (cfa + arg) & MASK
    if kind == "register":
        return regs.get(arg)
    if kind == "expression":
        return word(evaluate(arg, regs, word, cfa, budget))
    return evaluate(arg, regs, word, cfa, budget)
