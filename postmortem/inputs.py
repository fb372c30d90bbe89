"""Opening inputs: paths, directories, stdin, compressed files and archives.

Everything is chosen by content, never by file name: a gzip stream is gunzipped
whatever it is called, a tarball is walked member by member. Members are read
into memory (or an unnamed temp file), never extracted, so `../` names and
links inside an archive cannot write anywhere. Every step has a size limit; an
input that breaks a limit or cannot be read becomes a diagnostic and the other
inputs go on.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .reader import ByteReader, BytesReader, FileReader, spool, utf16_to_utf8

MAX_MEMBER = 2 * 1024**3
"""Largest decompressed stream or archive member read (an archive bomb stops here)."""
MAX_MEMBERS = 20_000
"""Most members read from one archive."""
MAX_DEPTH = 4
"""Deepest nesting of archives and compressed streams followed."""
MAX_STDIN = 1024**3

ELF_MAGIC = b"\x7fELF"


@dataclass
class Blob:
    """One readable input after unpacking: its display path and bytes.

    `kind` is "text" or "elf"; `diagnostics` says what went wrong on the way.
    """

    path: str
    reader: ByteReader | None
    kind: str = "text"
    diagnostics: list[str] = field(default_factory=list)


class _ReaderStream(io.RawIOBase):
    """A ByteReader seen as a seekable read-only file (for gzip, tarfile, zipfile)."""

    def __init__(self, reader: ByteReader):
        self.reader, self.pos = reader, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.reader.read_at(self.pos, len(buffer))
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.reader.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos


Opener = tuple[Callable[[io.RawIOBase], io.IOBase], tuple[type[Exception], ...]]
"""A function opening a decompressing stream over raw bytes, and the errors its codec raises."""


def _decompressor(head: bytes) -> Opener | None:
    """The opener for this magic, or None; a codec is imported only when its magic is seen."""
    if head.startswith(b"\x1f\x8b"):
        import gzip
        import zlib

        return (lambda raw: gzip.GzipFile(fileobj=raw)), (zlib.error,)
    if head.startswith(b"\xfd7zXZ\x00"):
        import lzma

        return (lambda raw: lzma.LZMAFile(raw)), (lzma.LZMAError,)
    if head.startswith(b"BZh") and head[3:4].isdigit():
        import bz2

        return (lambda raw: bz2.BZ2File(raw)), ()
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        import zstandard

        return (lambda raw: zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)), (
            zstandard.ZstdError,)
    return None


def _is_tar(head: bytes) -> bool:
    return len(head) >= 262 and head[257:262] == b"ustar"


def _is_zip(head: bytes) -> bool:
    return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))


def open_inputs(paths: list[str]) -> Iterator[Blob]:
    """Every readable input under `paths`, unpacked, in a stable order."""
    for path in paths:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_STDIN + 1)
            blob_diags = [f"stdin cut at {MAX_STDIN} bytes"] if len(data) > MAX_STDIN else []
            yield from _expand("<stdin>", BytesReader(data[:MAX_STDIN]), 0, blob_diags)
        elif os.path.isdir(path):
            yield from _walk(Path(path))
        else:
            yield from _open_file(Path(path), str(path))


def _walk(root: Path) -> Iterator[Blob]:
    for folder, dirs, files in os.walk(root, onerror=None, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            full = Path(folder) / name
            yield from _open_file(full, str(full))


def _open_file(path: Path, display: str) -> Iterator[Blob]:
    try:
        if not path.is_file():
            yield Blob(display, None, diagnostics=["not a regular file; skipped"])
            return
        handle = open(path, "rb")  # read-only: inputs are never modified
    except OSError as exc:
        yield Blob(display, None, diagnostics=[f"cannot open: {exc.strerror or exc}"])
        return
    with handle:
        yield from _expand(display, FileReader(handle), 0, [])


def _expand(display: str, reader: ByteReader, depth: int, diagnostics: list[str]) -> Iterator[Blob]:
    """Unpack one byte stream by its content into the blobs it holds."""
    head = reader.read_at(0, 512)
    codec = _decompressor(head)
    if (codec or _is_tar(head) or _is_zip(head)) and depth >= MAX_DEPTH:
        yield Blob(display, None, diagnostics=diagnostics + [f"nested more than {MAX_DEPTH} levels deep; skipped"])
        return
    if codec is not None:
        yield from _decompress(display, reader, codec, depth, diagnostics)
    elif _is_tar(head):
        yield from _tar_members(display, reader, depth)
    elif _is_zip(head):
        yield from _zip_members(display, reader, depth)
    elif head.startswith(ELF_MAGIC):
        yield Blob(display, reader, kind="elf", diagnostics=diagnostics)
    elif head.startswith((b"\xff\xfe", b"\xfe\xff")):
        yield Blob(display, utf16_to_utf8(reader, MAX_MEMBER), diagnostics=diagnostics)
    else:
        yield Blob(display, reader, diagnostics=diagnostics)


def _decompress(display: str, reader: ByteReader, codec: Opener, depth: int, diagnostics: list[str]) -> Iterator[Blob]:
    opener, errors = codec
    try:
        with opener(_ReaderStream(reader)) as stream:
            inner, truncated = spool(stream, MAX_MEMBER)
    except (OSError, EOFError, ValueError, *errors) as exc:
        yield Blob(display, None, diagnostics=diagnostics + [f"cannot decompress: {exc}"])
        return
    if truncated:
        diagnostics = diagnostics + [f"decompressed data cut at {MAX_MEMBER} bytes (archive bomb?)"]
    yield from _expand(display, inner, depth + 1, diagnostics)


def _tar_members(display: str, reader: ByteReader, depth: int) -> Iterator[Blob]:
    import tarfile
    count = 0
    try:
        with tarfile.open(fileobj=_ReaderStream(reader), mode="r|") as archive:
            for member in archive:
                name = f"{display}!/{member.name.lstrip('/')}"
                if member.isdir():
                    continue
                count += 1
                if count > MAX_MEMBERS:
                    yield Blob(display, None, diagnostics=[f"more than {MAX_MEMBERS} members; the rest skipped"])
                    return
                if not member.isfile():
                    yield Blob(name, None, diagnostics=["link or special file in archive; skipped"])
                    continue
                stream = archive.extractfile(member)
                inner, truncated = spool(stream, MAX_MEMBER)
                notes = [f"member cut at {MAX_MEMBER} bytes"] if truncated else []
                yield from _expand(name, inner, depth + 1, notes)
    except (tarfile.TarError, OSError, EOFError) as exc:
        yield Blob(display, None, diagnostics=[f"tar archive broken after {count} members: {exc}"])


def _zip_members(display: str, reader: ByteReader, depth: int) -> Iterator[Blob]:
    import zipfile
    try:
        archive = zipfile.ZipFile(_ReaderStream(reader))
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        yield Blob(display, None, diagnostics=[f"cannot read zip archive: {exc}"])
        return
    for count, info in enumerate(infos):
        if count >= MAX_MEMBERS:
            yield Blob(display, None, diagnostics=[f"more than {MAX_MEMBERS} members; the rest skipped"])
            return
        if info.is_dir():
            continue
        name = f"{display}!/{info.filename.lstrip('/')}"
        try:
            with archive.open(info) as stream:
                inner, truncated = spool(stream, MAX_MEMBER)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as exc:
            yield Blob(name, None, diagnostics=[f"cannot read member: {exc}"])
            continue
        notes = [f"member cut at {MAX_MEMBER} bytes"] if truncated else []
        yield from _expand(name, inner, depth + 1, notes)
