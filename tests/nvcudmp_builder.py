"""Writes CUDA GPU core dumps (.nvcudmp) to the layout NVIDIA publishes in cudacoredump.h.

Independent of postmortem (only struct), so the reader is checked against the
header's layout and not against itself. The dump embeds a real cubin built by
nvcc, "relocated" the way the driver loads it: each function symbol's value
becomes the device address its .text section was placed at.

    python tests/nvcudmp_builder.py OUT.nvcudmp CUBIN   # regenerates the committed fixture
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

SHT_LOUSER = 0x80000000
DEV_TABLE, CTX_TABLE, SM_TABLE, GRID_TABLE, CTA_TABLE, WP_TABLE, LN_TABLE, MOD_TABLE = (
    SHT_LOUSER + 9, SHT_LOUSER + 10, SHT_LOUSER + 11, SHT_LOUSER + 12, SHT_LOUSER + 13, SHT_LOUSER + 14,
    SHT_LOUSER + 15, SHT_LOUSER + 16)
RELF_IMG, META_DATA = SHT_LOUSER + 7, SHT_LOUSER + 22
CODE_BASE = 0x7FFF_C000_0000
KERNEL = "_Z5crashPi"


@dataclass
class Spec:
    """What the dump says; the defaults are a Warp Illegal Address in crash(int*) on an H100."""

    cubin: bytes
    exception: int = 14
    device_name: str = "NVIDIA H100 80GB HBM3"
    sm_major: int = 9
    sm_minor: int = 0
    num_sms: int = 132
    sm_ids: tuple[int, ...] = (16, 17)
    fault_sm_row: int = 1
    block: tuple[int, int, int] = (3, 0, 0)
    warp_id: int = 9
    faulting_lanes: tuple[int, ...] = (5, 6)
    pc_offset: int = 0x40
    grid_dim: tuple[int, int, int] = (4, 1, 1)
    block_dim: tuple[int, int, int] = (128, 1, 1)
    driver: tuple[int, int] = (580, 65)
    cuda: tuple[int, int] = (13, 0)
    lane_row_size: int = 56
    """56 is r575's CudbgThreadTableEntry; 72 mimics a newer driver's longer rows."""
    extra_sections: list[tuple[str, int, bytes]] = field(default_factory=list)
    """(name, sh_type, data) added as is: e.g. an unknown section type."""
    with_metadata: bool = True


def relocate(cubin: bytes, base: int) -> tuple[bytes, dict[str, int]]:
    """The cubin with every STT_FUNC symbol's value set to base + its section's file offset; name -> address."""
    data = bytearray(cubin)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, _shstrndx = struct.unpack_from("<HH", data, 0x3C)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]
    symtab = next(s for s in sections if s[1] == 2)
    strtab = sections[symtab[6]]
    addresses = {}
    for at in range(symtab[4], symtab[4] + symtab[5], 24):
        name_at, info, _other, shndx = struct.unpack_from("<IBBH", data, at)
        if info & 0xF == 2 and shndx:
            address = base + sections[shndx][4]
            struct.pack_into("<Q", data, at + 8, address)
            end = data.index(b"\0", strtab[4] + name_at)
            addresses[data[strtab[4] + name_at:end].decode()] = address
    return bytes(data), addresses


def build(spec: Spec) -> bytes:
    """The dump's bytes."""
    strings = bytearray(b"\0")

    def string(text: str) -> int:
        at = len(strings)
        strings.extend(text.encode() + b"\0")
        return at

    image, addresses = relocate(spec.cubin, CODE_BASE)
    entry = addresses[KERNEL]
    pc = entry + spec.pc_offset
    device = struct.pack("<QQQ16I", string(spec.device_name), string("gh100"),
                         string(f"sm_{spec.sm_major}{spec.sm_minor}"),
                         0, 0x1B, 0x2330, spec.num_sms, 64, 32, 255, 7, spec.sm_major, spec.sm_minor, 16, 0,
                         63, 7, 16, 0)
    context = struct.pack("<QQQQII", 0x5555_0000, 0x7FFF_0000_0000, 0x7FFE_0000_0000, 0, 0, 4242)
    module = struct.pack("<Q", 0x5555_1000)
    grid_id = 0x1234
    grid = struct.pack("<7Q12I4I4I", grid_id, 0x5555_0000, 0x5555_2000, entry, 0x5555_1000, 0, 0x210, 1, 0, 2, 16,
                       *spec.grid_dim, *spec.block_dim, 0, 4242, 1, 1, 1, 0, 0, 0, 0, 0)
    sms = b"".join(struct.pack("<IIIIQIIIIQ", sm_id, 0, spec.exception if i == spec.fault_sm_row else 0,
                               int(i == spec.fault_sm_row), pc if i == spec.fault_sm_row else 0, 0, 0, 0, 0, 0)
                   for i, sm_id in enumerate(spec.sm_ids))
    cta = struct.pack("<QIIII4I4I", grid_id, *spec.block, 0, 0, 0, 0, 0, 1, 1, 1, 0)
    warp = struct.pack("<QIIIIII8IIIQ", pc, spec.warp_id, 0xFFFFFFFF, 0xFFFFFFFF, 0, 1, 0,
                       16, 0, 0, 0, 0, 0, 0, 0,  # numRegs, padding, sharedMemSize, padding, syscall/CBU masks
                       0, 0, 0)  # barrierScope, padding, additionalBarrierInfo
    lanes = b""
    for lane in range(32):
        thread = (spec.warp_id % 4 * 32 + lane, 0, 0)
        exception = spec.exception if lane in spec.faulting_lanes else 0
        row = struct.pack("<QQ8III", pc, spec.pc_offset, lane, *thread, exception, 0, 0, 0, 0, 0)
        lanes += row.ljust(spec.lane_row_size, b"\0")[:spec.lane_row_size]
    metadata = struct.pack("<QIIIIII", string("CUDA Driver"), *spec.driver, *spec.cuda, 0, 1700000000)
    # (name, type, data, link, info, entsize); link = index into this list + 2 (null and .shstrtab come first)
    plan: list[tuple[str, int, bytes, int, int, int]] = [
        (".strtab", 3, b"", 0, 0, 0),
        (".cudbg.devtbl", DEV_TABLE, device, 0, 0, len(device)),
        (".cudbg.ctxtbl.dev0", CTX_TABLE, context, 3, 0, 40),
        (".cudbg.modtbl.dev0.ctx0", MOD_TABLE, module, 4, 0, 8),
        (".cudbg.relfimg.dev0.ctx0", RELF_IMG, image, 5, 0, 0),
        (".cudbg.gridtbl.dev0", GRID_TABLE, grid, 3, 0, len(grid)),
        (".cudbg.smtbl.dev0", SM_TABLE, sms, 3, 0, 48),
        (f".cudbg.ctatbl.dev0.sm{spec.fault_sm_row}", CTA_TABLE, cta, 8, spec.fault_sm_row, len(cta)),
        (f".cudbg.wptbl.dev0.sm{spec.fault_sm_row}.cta0", WP_TABLE, warp, 9, 0, len(warp)),
        (f".cudbg.lntbl.dev0.sm{spec.fault_sm_row}.cta0.wp0", LN_TABLE, lanes, 10, 0, spec.lane_row_size),
    ]
    if spec.with_metadata:
        plan.append((".cudbg.meta", META_DATA, metadata, 0, 0, len(metadata)))
    plan.extend((name, stype, data, 0, 0, 0) for name, stype, data in spec.extra_sections)
    plan[0] = (".strtab", 3, bytes(strings), 0, 0, 0)
    return _elf(plan)


def _elf(plan: list[tuple[str, int, bytes, int, int, int]]) -> bytes:
    names = bytearray(b"\0")
    name_at = []
    for name in [".shstrtab"] + [p[0] for p in plan]:
        name_at.append(len(names))
        names.extend(name.encode() + b"\0")
    body = bytearray()
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    offset = 64
    blobs = [(name_at[0], 3, bytes(names), 0, 0, 0)] + [(name_at[i + 1], t, d, l, n, e) for i, (_, t, d, l, n, e)
                                                         in enumerate(plan)]
    for name, stype, data, link, info, entsize in blobs:
        pad = (-offset) % 8
        body.extend(b"\0" * pad)
        offset += pad
        headers.append(struct.pack("<IIQQQQIIQQ", name, stype, 0, 0, offset, len(data), link, info, 8, entsize))
        body.extend(data)
        offset += len(data)
    pad = (-offset) % 8
    body.extend(b"\0" * pad)
    shoff = offset + pad
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x33, 7]) + b"\0" * 7
    header = ident + struct.pack("<HHIQQQIHHHHHH", 4, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), 1)
    return header + bytes(body) + b"".join(headers)


def lane_tables_sharing_a_region(dump: bytes, region_bytes: int, headers: int) -> bytes:
    """The dump with its lane table repeated to `region_bytes` at the end of the file and `headers` more
    section headers naming that one region (same parent warp), as a hostile dump would."""
    out = bytearray(dump)
    shoff, = struct.unpack_from("<Q", out, 0x28)
    shnum, = struct.unpack_from("<H", out, 0x3C)
    table = [list(struct.unpack_from("<IIQQQQIIQQ", out, shoff + 64 * i)) for i in range(shnum)]
    lane = next(h for h in table if h[1] == LN_TABLE)
    rows = bytes(out[lane[4]:lane[4] + lane[5]])
    region = len(out)
    out += rows * (region_bytes // len(rows))
    table += [[*lane[:4], region, len(out) - region, *lane[6:]]] * headers
    struct.pack_into("<Q", out, 0x28, len(out))
    struct.pack_into("<H", out, 0x3C, len(table))
    out += b"".join(struct.pack("<IIQQQQIIQQ", *h) for h in table)
    return bytes(out)


if __name__ == "__main__":
    out, cubin = sys.argv[1], sys.argv[2]
    Path(out).write_bytes(build(Spec(Path(cubin).read_bytes())))
