"""Random access to an input's bytes without holding them all in memory.

A file on disk is read with `os.pread` (no mapping, so a 10 GB log does not
grow the resident set); decompressed data and archive members are spooled to
memory, or to an unnamed temporary file once they grow large.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

SPOOL_IN_MEMORY = 64 * 1024 * 1024
"""Decompressed data up to this size stays in memory; beyond, an unnamed temp file."""
BLOCK = 1024 * 1024
"""Bytes asked of a decompressing stream at a time: its output per call stays this small."""
DIGEST_SAMPLES = 64
"""Evenly spaced blocks of DIGEST_SAMPLE bytes a core's digest reads besides its first and last BLOCK and its
notes, so that two cores of one size whose notes match but whose memory differs likely differ in a sample."""
DIGEST_SAMPLE = 64 * 1024
"""Size of each sample: 64 of them are 4 MiB, a few milliseconds even for a core on a slow disk."""
MAX_DIGESTED_NOTES = 64 * 1024 * 1024
"""Most PT_NOTE bytes a core's digest reads (real cores carry a few MiB; a crafted one may claim any size)."""


class Readable(Protocol):
    """What `spool` needs of a stream: a file, a decompressing stream, an archive member."""

    def read(self, size: int = ..., /) -> bytes: ...


class ByteReader(Protocol):
    """What a source needs of an input: its size and bytes at an offset."""

    size: int

    def read_at(self, offset: int, length: int) -> bytes: ...


class BytesReader:
    """Bytes already in memory (stdin, small archive members)."""

    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)

    def read_at(self, offset: int, length: int) -> bytes:
        return self.data[offset : offset + length]


class FileReader:
    """A file read by offset; the file is only ever opened read-only."""

    def __init__(self, handle: BinaryIO):
        self.handle = handle
        self.fd = handle.fileno()
        self.size = os.fstat(self.fd).st_size

    def read_at(self, offset: int, length: int) -> bytes:
        if offset >= self.size or length <= 0:
            return b""
        return os.pread(self.fd, min(length, self.size - offset), offset)


class SliceReader:
    """A stretch of another reader (a tar member stored as it is): read in place, nothing copied."""

    def __init__(self, base: ByteReader, offset: int, size: int):
        self.base, self.offset = base, offset
        self.size = max(0, min(size, base.size - offset))

    def read_at(self, offset: int, length: int) -> bytes:
        if offset >= self.size or length <= 0:
            return b""
        return self.base.read_at(self.offset + offset, min(length, self.size - offset))


@dataclass
class Spooled:
    """A stream copied into a reader: `truncated` when it stopped at the limit, `error` when its codec failed
    part way (what came before the damage is kept)."""

    reader: ByteReader
    truncated: bool
    error: str | None = None


def spool(stream: Readable, limit: int, errors: tuple[type[Exception], ...] = ()) -> Spooled:
    """Copy a stream into a reader, at most `limit` bytes, so a decompression bomb cannot fill memory or disk.

    An exception of `errors` raised while reading (corrupt or cut-off compressed data) ends the copy and is
    returned as `error` with the bytes read before it.
    """
    return spool_chunks(iter(lambda: stream.read(BLOCK), b""), limit, errors)


def spool_chunks(chunks: Iterable[bytes], limit: int, errors: tuple[type[Exception], ...] = ()) -> Spooled:
    """`spool` over chunks of bytes; the chunks are pulled only while under `limit`."""
    buffer: BinaryIO = io.BytesIO()
    copied, truncated, error = 0, False, None
    blocks = iter(chunks)
    while not truncated:
        try:
            block = next(blocks, b"")
        except errors as exc:
            error = str(exc) or type(exc).__name__
            break
        if not block:
            break
        if copied + len(block) > limit:
            block = block[: limit - copied]
            truncated = True
        if copied + len(block) > SPOOL_IN_MEMORY and isinstance(buffer, io.BytesIO):
            import tempfile  # only for data past SPOOL_IN_MEMORY

            spilled = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the reader; unnamed: removed by the OS when closed
            spilled.write(buffer.getbuffer())
            buffer = spilled
        buffer.write(block)
        copied += len(block)
    if isinstance(buffer, io.BytesIO):
        return Spooled(BytesReader(buffer.getvalue()), truncated, error)
    buffer.flush()
    return Spooled(FileReader(buffer), truncated, error)


def utf16_to_utf8(reader: ByteReader, limit: int) -> Spooled:
    """Re-encode a UTF-16 input (BOM first) as UTF-8, at most `limit` bytes, so anchors are plain bytes.

    Streamed block by block: a multi-gigabyte UTF-16 log never sits in memory as one string.
    """
    codec = "utf-16-le" if reader.read_at(0, 2) == b"\xff\xfe" else "utf-16-be"
    decoder = codecs.getincrementaldecoder(codec)("replace")

    def chunks() -> Iterator[bytes]:
        for at in range(2, reader.size, BLOCK):
            yield decoder.decode(reader.read_at(at, BLOCK), final=at + BLOCK >= reader.size).encode("utf-8")

    return spool_chunks(chunks(), limit)


def core_digest(reader: ByteReader) -> str:
    """A digest of a core that does not read all of a multi-gigabyte file.

    Size, first and last BLOCK, DIGEST_SAMPLES evenly spaced samples, and every PT_NOTE segment (the
    threads' registers, the signal, the mapped files: what tells two crashes apart) up to MAX_DIGESTED_NOTES.
    """
    from .core import elf

    size = reader.size
    sha = hashlib.sha256(str(size).encode())
    sha.update(reader.read_at(0, BLOCK))
    sha.update(reader.read_at(max(0, size - BLOCK), BLOCK))
    for i in range(1, DIGEST_SAMPLES + 1):
        sha.update(reader.read_at(size * i // (DIGEST_SAMPLES + 1), DIGEST_SAMPLE))
    try:
        segments = elf.segments(reader.read_at, elf.header(reader.read_at))
    except elf.ElfError:
        segments = []
    budget = MAX_DIGESTED_NOTES
    for segment in segments:
        if segment.type != elf.PT_NOTE:
            continue
        end = segment.offset + min(segment.filesz, budget)
        for at in range(segment.offset, end, BLOCK):
            sha.update(reader.read_at(at, min(BLOCK, end - at)))
        budget -= end - segment.offset
    return "sha256-sampled:" + sha.hexdigest()
