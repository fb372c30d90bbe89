"""Items 6, 9, 10: archive and decompression bombs, damaged members, budgets that hold while the real
evidence after the bomb (a dmesg.txt with an Xid 79 line) is still read.

The bombs are built as their makers build them, quickly and small on disk: a deflate stream of zeros is one
compressed MiB repeated (after a full flush deflate forgets its history, so every MiB compresses to the same
bytes), zip records are written with `struct` to the published layout, GNU sparse tar headers with tarfile's
own number encoding, fatbin entries by patching real nvcc output.
"""

from __future__ import annotations

import io
import struct
import tarfile
import zlib
from pathlib import Path

import zstandard

from .harness import GiB, Hostile, Run

MiB = 1024**2
XID = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
FATBIN = Path(__file__).parent.parent / "data" / "fatbin"
EVIDENCE = ("Xid", "79")


def deflated_zeros(size: int, head: bytes = b"") -> tuple[bytes, int]:
    """A raw deflate stream of `head` then zeros up to `size` bytes (a whole number of MiB), and its CRC-32."""
    block = bytes(MiB)
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = squeeze.compress(head + block[len(head):]) + squeeze.flush(zlib.Z_FULL_FLUSH)
    again = squeeze.compress(block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(head + block[len(head):])
    for _ in range(size // MiB - 1):
        crc = zlib.crc32(block, crc)
    return first + again * (size // MiB - 1) + squeeze.flush(), crc


def _local(name: bytes, method: int, crc: int, packed: int, size: int) -> bytes:
    return struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, packed, size, len(name), 0) + name


def _central(name: bytes, method: int, crc: int, packed: int, size: int, offset: int) -> bytes:
    return struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, packed, size,
                       len(name), 0, 0, 0, 0, 0, offset) + name


def write_zip_bomb(path: Path, copies: int, size: int, tail: dict[str, bytes], head: bytes = b"",
                   name: bytes = b"bomb.bin") -> None:
    """A zip whose central directory lists one deflated `size`-byte entry `copies` times (the same local
    header), then the `tail` members stored; zip64 end records when more than 65,535 entries are listed."""
    data, crc = deflated_zeros(size, head)
    with open(path, "wb") as out:
        out.write(_local(name, 8, crc, len(data), size))
        out.write(data)
        listed = [_central(name, 8, crc, len(data), size, 0)] * copies
        for member, body in tail.items():
            at = out.tell()
            raw = member.encode()
            out.write(_local(raw, 0, zlib.crc32(body), len(body), len(body)) + body)
            listed.append(_central(raw, 0, zlib.crc32(body), len(body), len(body), at))
        directory_at = out.tell()
        out.writelines(listed)
        directory = out.tell() - directory_at
        count = len(listed)
        if count > 0xFFFF:
            record_at = out.tell()
            out.write(struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, directory,
                                  directory_at))
            out.write(struct.pack("<4sIQI", b"PK\x06\x07", 0, record_at, 1))
            count = 0xFFFF
        out.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, directory, directory_at, 0))


def sparse_header(name: str, claimed: int) -> bytes:
    """An old-GNU sparse tar header ('S') for a file of `claimed` bytes that is one hole: no data blocks."""
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mtime = tarfile.GNUTYPE_SPARSE, 0, 1_700_000_000
    block = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    block[386:398] = tarfile.itn(claimed, 12, tarfile.GNU_FORMAT)  # one map entry: the data at the very end ...
    block[398:410] = tarfile.itn(0, 12, tarfile.GNU_FORMAT)  # ... is 0 bytes long
    block[483:495] = tarfile.itn(claimed, 12, tarfile.GNU_FORMAT)  # realsize
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % tarfile.calc_chksums(bytes(block))[0]
    return bytes(block)


def _member(name: str, data: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 1_700_000_000
    return info.tobuf(tarfile.GNU_FORMAT) + data + bytes(-len(data) % 512)


def _zip_same_entry_20000(directory: Path) -> Run:
    write_zip_bomb(directory / "bomb.zip", 20_000, 2 * GiB, {"logs/dmesg.txt": XID.encode()})
    return Run(["analyze", "bomb.zip", "--no-color"], evidence=(*EVIDENCE, "overlap another member"))


def _zip64_same_entry_70000(directory: Path) -> Run:
    write_zip_bomb(directory / "bomb64.zip", 70_000, 2 * GiB, {"logs/dmesg.txt": XID.encode()})
    return Run(["analyze", "bomb64.zip", "--no-color"], evidence=(*EVIDENCE, "overlap another member"))


def _sparse_tar_20000_tib(directory: Path) -> Run:
    with open(directory / "sparse.tar", "wb") as out:
        out.writelines(sparse_header(f"core.{i}", 1 << 40) for i in range(20_000))
        out.write(_member("var/log/dmesg.txt", XID.encode()))
        out.write(bytes(1024))
    return Run(["analyze", "sparse.tar", "--no-color"], evidence=(*EVIDENCE, "skipped unread"))


ELF_HEAD = (FATBIN / "libk_multi.so").read_bytes()[:64]


def _wheel_with_4gb_library(directory: Path) -> Run:
    real = (FATBIN / "libk_multi.so").read_bytes()
    write_zip_bomb(directory / "torch-0-py3-none-any.whl", 1, 3900 * MiB, {"torch/lib/libk_multi.so": real},
                   head=ELF_HEAD, name=b"torch/lib/libhuge.so")
    return Run(["gpu-arch", "torch-0-py3-none-any.whl", "--target", "sm_120"],
               evidence=("libk_multi.so", "sm_120", "libhuge.so", "skipped"))


def _patched_entry(source: str, compression: str, claim: int, strip_size: bool) -> bytes:
    """A real nvcc object whose first `compression` entry says it inflates to `claim` bytes (and, for ZSTD,
    whose frame no longer states its own size, so only the entry's claim bounds it)."""
    from postmortem.binaries import fatbin

    data = bytearray((FATBIN / source).read_bytes())

    def read(offset: int, length: int) -> bytes:
        return bytes(data[offset:offset + length])

    found = fatbin.inventory(read, len(data), source)
    entry = next(e for fb in found.fatbins for e in fb.entries if e.compression == compression)
    if strip_size:
        image = fatbin.payload(read, entry)
        packed = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(image)
        assert len(packed) <= entry.payload_size
        data[entry.payload_offset:entry.payload_offset + entry.payload_size] = packed.ljust(entry.payload_size, b"\0")
        struct.pack_into("<I", data, entry.offset + 16, len(packed))
    struct.pack_into("<Q", data, entry.offset + 56, claim)
    return bytes(data)


def _fatbin_claims(directory: Path) -> Run:
    (directory / "zstd_tib.o").write_bytes(_patched_entry("k_size.o", "zstd", 1 << 40, True))
    (directory / "zstd_2p63.o").write_bytes(_patched_entry("k_size.o", "zstd", 1 << 63, True))
    (directory / "lz4_tib.o").write_bytes(_patched_entry("k_speed.o", "lz4", 1 << 40, False))
    (directory / "k_none.o").write_bytes((FATBIN / "k_none.o").read_bytes())
    return Run(["gpu-arch", "--kernels", "zstd_tib.o", "zstd_2p63.o", "lz4_tib.o", "k_none.o"],
               evidence=("kernels:", "more than the 536870912 read of one image"))


def _damaged_members(directory: Path) -> Run:
    """Item 9: a zip with a corrupt deflate member, an empty name, a name of only `/` and `../..`."""
    buffer = io.BytesIO()
    import zipfile

    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("corrupt.log", b"noise line\n" * 5000)
        for name in ("", "/", "../.."):
            info = zipfile.ZipInfo("x")
            info.filename = name  # as a hand-made archive carries it; ZipInfo() itself would tidy it
            archive.writestr(info, b"kernel: nothing here\n")
        archive.writestr("dmesg.txt", XID)
    data = bytearray(buffer.getvalue())
    at = data.index(b"corrupt.log") + len(b"corrupt.log") + 8
    data[at:at + 16] = b"\xff" * 16
    (directory / "damaged.zip").write_bytes(bytes(data))
    return Run(["analyze", "damaged.zip", "--no-color"], evidence=(*EVIDENCE, "cannot read member", "no usable name"))


def _tar_with_garbage_block(directory: Path) -> Run:
    """Item 10: a garbage block where a header was; the members after it are read (GNU tar -i lists them)."""
    first, lost = _member("first.log", b"nothing\n" * 100), _member("lost.log", b"gone\n")
    body = first + b"\xa5" * 512 + lost[512:] + _member("var/log/dmesg.txt", XID.encode()) + bytes(1024)
    (directory / "damaged.tar").write_bytes(body)
    return Run(["analyze", "damaged.tar", "--no-color"], evidence=(*EVIDENCE, "damaged at offset"))


def _pax_header_claiming_1tib(directory: Path) -> Run:
    """A PAX extended header whose size field (base-256, as GNU tar writes big numbers) claims 1 TiB:
    tarfile reads a PAX header's data in one read of that size."""
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type, pax.size = tarfile.XHDTYPE, 1 << 40
    body = pax.tobuf(tarfile.GNU_FORMAT) + b"20 path=evil.txt\n".ljust(512, b"\0")
    (directory / "pax.tar").write_bytes(body + _member("var/log/dmesg.txt", XID.encode()) + bytes(1024))
    return Run(["analyze", "pax.tar", "--no-color"], evidence=(*EVIDENCE, "more than the 16777216 allowed"))


def _tar_of_100000_tiny_members(directory: Path) -> Run:
    """Round 3, item 16a: the evidence in the last of MAX_MEMBERS members; each one costs a constant, small time."""
    with open(directory / "many.tar", "wb") as out:
        out.writelines(_member(f"logs/{i}.log", b"ok %d\n" % i) for i in range(99_999))
        out.write(_member("var/log/dmesg.txt", XID.encode()))
        out.write(bytes(1024))
    return Run(["analyze", "many.tar", "--no-color"], evidence=(*EVIDENCE, "many.tar!/var/log/dmesg.txt"))


# Bounds: 2-3x the wall time and the smallest RLIMIT_AS each case passed under on a 2-core VM (min 5 s):
# zip 0.9 s / 96 MiB, zip64 1.3 s / 128 MiB, sparse tar 1.7-2.2 s / 96 MiB, the others 0.4-0.9 s / 96 MiB.
# The tar of 100,000 members: 5.3 s / 116 MiB peak RSS (before round 3: 15 s unloaded, past 20 s under load).
CASES = [
    Hostile(6, "zip-one-2gib-entry-listed-20000-times", _zip_same_entry_20000, wall_s=5, address_space=256 << 20),
    Hostile(6, "zip64-one-2gib-entry-listed-70000-times", _zip64_same_entry_70000, wall_s=5,
            address_space=384 << 20),
    Hostile(6, "sparse-tar-20000-members-of-1tib", _sparse_tar_20000_tib, wall_s=7, address_space=256 << 20),
    Hostile(6, "tar-pax-header-claiming-1tib", _pax_header_claiming_1tib, wall_s=5, address_space=256 << 20),
    Hostile(6, "wheel-with-a-3.9gib-library", _wheel_with_4gb_library, wall_s=5, address_space=256 << 20),
    Hostile(6, "fatbin-entries-claiming-1tib-and-2p63", _fatbin_claims, wall_s=5, address_space=256 << 20),
    Hostile(9, "zip-corrupt-deflate-and-unusable-names", _damaged_members, wall_s=5, address_space=256 << 20),
    Hostile(10, "tar-garbage-block-in-the-middle", _tar_with_garbage_block, wall_s=5, address_space=256 << 20),
    Hostile(16, "tar-of-100000-tiny-members-evidence-last", _tar_of_100000_tiny_members, wall_s=20,
            address_space=GiB),
]
