"""Random access to an input's bytes without holding them all in memory.

A file on disk is read with `os.pread` (no mapping, so a 10 GB log does not
grow the resident set); decompressed data and archive members are spooled to
memory, or to an unnamed temporary file once they grow large.
"""

from __future__ import annotations

import io
import os
from typing import BinaryIO, Protocol

SPOOL_IN_MEMORY = 64 * 1024 * 1024
"""Decompressed data up to this size stays in memory; beyond, an unnamed temp file."""


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


class LimitExceeded(Exception):
    """A decompressed stream outgrew the limit (an archive bomb, or just too big)."""


def spool(stream: BinaryIO, limit: int) -> tuple[ByteReader, bool]:
    """Copy a stream into a reader; returns (reader, truncated).

    Stops at `limit` bytes so a decompression bomb cannot fill memory or disk.
    """
    buffer: BinaryIO = io.BytesIO()
    copied, truncated = 0, False
    while True:
        block = stream.read(1024 * 1024)
        if not block:
            break
        if copied + len(block) > limit:
            block = block[: limit - copied]
            truncated = True
        if copied + len(block) > SPOOL_IN_MEMORY and isinstance(buffer, io.BytesIO):
            import tempfile  # only for data past SPOOL_IN_MEMORY

            spilled = tempfile.TemporaryFile()  # unnamed: removed by the OS when closed
            spilled.write(buffer.getbuffer())
            buffer = spilled
        buffer.write(block)
        copied += len(block)
        if truncated:
            break
    if isinstance(buffer, io.BytesIO):
        return BytesReader(buffer.getvalue()), truncated
    buffer.flush()
    return FileReader(buffer), truncated


def utf16_to_utf8(reader: ByteReader, limit: int) -> ByteReader:
    """Re-encode a UTF-16 input (BOM first) as UTF-8 so anchors are plain bytes."""
    head = reader.read_at(0, 2)
    codec = "utf-16-le" if head == b"\xff\xfe" else "utf-16-be"
    data = reader.read_at(2, min(reader.size, limit))
    return BytesReader(data.decode(codec, "replace").encode("utf-8"))
