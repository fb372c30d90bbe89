"""Opening inputs: paths, directories, stdin, compressed files and archives.

Everything is chosen by content, never by file name: a gzip stream is gunzipped
whatever it is called, a tarball is walked member by member. Members are read
in place, into memory or into an unnamed temp file, never extracted, so `../`
names and links inside an archive cannot write anywhere. What may be unpacked
is bounded per stream, per input and per run (bytes and archive entries); an
input or member that breaks a bound or cannot be read becomes a diagnostic and
the other members and inputs go on.
"""

from __future__ import annotations

import copy
import io
import os
import struct
import sys
import zlib
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .reader import (
    ByteReader,
    BytesReader,
    FileReader,
    Readable,
    SliceReader,
    Spooled,
    spool,
    utf16_to_utf8,
)

GiB, MiB = 1024**3, 1024**2
MAX_MEMBER = 2 * GiB
"""Largest decompressed stream or archive member read: a bigger core is read up to here (its notes and first
mappings come first), a bomb stops here."""
INPUT_BUDGET = 4 * GiB
"""Most bytes one named input may unpack over all its members and nested streams: two members at MAX_MEMBER
(a bundle with two cores). A zip listing one 2 GiB entry 20,000 times stops here, not at 40 TB."""
RUN_BUDGET = 16 * GiB
"""Most bytes one run may unpack over all its inputs: a few minutes of inflating on a slow machine."""
RESERVE = 512 * MiB
"""The last part of each budget, kept for the members after a bomb (the logs in the same archive). A member
whose size is known before reading may take it whole if it fits; a stream of unknown size (gzip, xz, bzip2,
zstd) at most half of what is left, so a run of bombs leaves ever less, but never nothing, to what follows."""
MAX_MEMBERS = 100_000
"""Most archive entries (directories, skipped members and nested archives' entries included) walked for one
input: a bundle of a whole /var/log holds a few thousand; each entry costs tens of microseconds."""
MAX_MEMBERS_RUN = 1_000_000
"""Most archive entries walked in one run."""
MAX_ZIP_DIRECTORY = 32 * MiB
"""Largest zip central directory read: zipfile parses all of it into objects (about 0.5 KiB per entry), so
32 MiB, some 400,000 entries, is about 200 MiB of memory."""
MAX_DEPTH = 4
"""Deepest nesting of archives and compressed streams followed."""
MAX_STDIN = 1024**3
"""Most bytes read from stdin (it is held in memory)."""

ELF_MAGIC = b"\x7fELF"
TAR_BLOCK = 512
MAX_TAR_READ = 16 * MiB
"""Most bytes tarfile may read at once: a PAX or GNU long-name header's data is kilobytes; a crafted one
claims terabytes, which tarfile would read into memory in one go (member data is read a block at a time)."""
RESYNC_CHUNK = 8 * MiB
"""Bytes read at a time when looking for the next valid tar header after a damaged one."""
_EOCD = struct.Struct("<4sHHHHIIH")
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_ZIP64_EOCD = struct.Struct("<4sQHHIIQQQQ")
_ZIP_LOCAL_HEADER = 30


@dataclass
class Blob:
    """One readable input after unpacking: its display path and bytes.

    `kind` is "text", "elf", or "prose" (what a person wrote: an issue's text, read by the sources of people's
    words too); `diagnostics` says what went wrong on the way.
    """

    path: str
    reader: ByteReader | None
    kind: str = "text"
    diagnostics: list[str] = field(default_factory=list)


@dataclass
class Budget:
    """What one scope (the run, or one named input) may unpack, bytes and archive entries, and what is left."""

    scope: str
    bytes: int
    entries: int
    bytes_left: int = field(init=False)
    entries_left: int = field(init=False)

    def __post_init__(self) -> None:
        self.bytes_left, self.entries_left = self.bytes, self.entries


@dataclass
class Unpacking:
    """The two budgets every read of one input draws on: its own and the run's."""

    budgets: tuple[Budget, ...]

    def tightest(self) -> Budget:
        return min(self.budgets, key=lambda budget: budget.bytes_left)

    def allowed(self, claim: int | None) -> int:
        """Bytes the next stream may unpack; 0: skip it unread.

        `claim` is its size when known before reading (an archive member's header): it is read (up to
        MAX_MEMBER) when it fits in what is left, else not at all. A stream of unknown size gets all but the
        RESERVE, or half of what is left once that is less.
        """
        left = max(0, self.tightest().bytes_left)
        if claim is not None:
            return min(claim, MAX_MEMBER) if claim <= left else 0
        return min(MAX_MEMBER, max(left - RESERVE, left // 2))

    def spend(self, size: int) -> None:
        for budget in self.budgets:
            budget.bytes_left -= size

    def take_entry(self) -> Budget | None:
        """Count one archive entry; the budget that has none left, if any (the entry is then not walked)."""
        spent = next((budget for budget in self.budgets if budget.entries_left <= 0), None)
        if spent is None:
            for budget in self.budgets:
                budget.entries_left -= 1
        return spent

    def left(self) -> str:
        """What is left of the tightest budget, as words for a diagnostic."""
        budget = self.tightest()
        return f"{_size(max(0, budget.bytes_left))} left of the {_size(budget.bytes)} {budget.scope} may unpack"

    def why_cut(self, limit: int) -> str:
        """Why a stream stopped at `limit` bytes (told before its bytes are spent)."""
        if limit >= MAX_MEMBER:
            return f"{_size(MAX_MEMBER)} is the most read of one member or stream"
        return f"{_size(limit)} was its share of the {self.left()} (the rest is kept for what follows)"


@dataclass
class _Walk:
    """One archive's walk: members met so far, and those passed over unread, told as one diagnostic per
    reason (not one row per member)."""

    members: int = 0
    skipped: dict[str, list] = field(default_factory=dict)

    def skip(self, reason: str, first: str) -> None:
        self.skipped.setdefault(reason, [0, first])[0] += 1

    def blobs(self, display: str) -> Iterator[Blob]:
        for reason, (count, first) in self.skipped.items():
            yield Blob(display, None, diagnostics=[f"{count} member(s) skipped unread: {reason} (the first: {first})"])


def _too_many(display: str, spent: Budget, rest: int, counted_all: bool = True) -> Blob:
    """The one diagnostic of an archive cut at its entry budget, naming how many entries were not walked."""
    many = f"{rest:,}" if counted_all else f"at least {rest:,}"
    why = f"more than {spent.entries:,} archive entries in {spent.scope}; the other {many} skipped unread"
    return Blob(display, None, diagnostics=[why])


def _size(n: int) -> str:
    for unit, scale in (("TiB", 1024**4), ("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


class _ReaderStream(io.RawIOBase):
    """A ByteReader seen as a seekable read-only file (for gzip, tarfile, zipfile).

    A read asks only for the bytes that are there (no buffer of the asked size is made first), and one of
    more than `max_read` bytes is refused: tarfile reads a PAX or long-name header's data in one read of
    the size the header claims.
    """

    def __init__(self, reader: ByteReader, max_read: int | None = None):
        self.reader, self.pos, self.max_read = reader, 0, max_read

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        want = self.reader.size - self.pos if size is None or size < 0 else size
        if self.max_read is not None and want > self.max_read:
            raise OSError(f"a read of {want} bytes at offset {self.pos}, more than the {self.max_read} allowed "
                          "(a header claiming a huge extension?)")
        data = self.reader.read_at(self.pos, want)
        self.pos += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.reader.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos


CODEC_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, ValueError, zlib.error, struct.error, OverflowError)
"""What any codec or archive reader may raise on junk besides its own error class (ValueError covers
UnicodeDecodeError on names; OSError covers tarfile's and zipfile's own errors only in part, so those are
added where the module is imported)."""

Opener = tuple[Callable[[io.RawIOBase], AbstractContextManager[Readable]], tuple[type[Exception], ...]]
"""A function opening a decompressing stream over raw bytes, and the errors its codec raises."""


def _decompressor(head: bytes) -> Opener | None:
    """The opener for this magic, or None; a codec is imported only when its magic is seen."""
    if head.startswith(b"\x1f\x8b"):
        import gzip

        return (lambda raw: gzip.GzipFile(fileobj=raw)), (gzip.BadGzipFile,)
    if head.startswith(b"\xfd7zXZ\x00"):
        import lzma

        return (lambda raw: lzma.LZMAFile(raw)), (lzma.LZMAError,)  # noqa: PLW0108 - the opener's type
    if head.startswith(b"BZh") and head[3:4].isdigit():
        import bz2

        return (lambda raw: bz2.BZ2File(raw)), ()  # noqa: PLW0108 - the opener's type
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        import zstandard

        return (lambda raw: zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)), (
            zstandard.ZstdError,)
    return None


COMPRESSED_MAGIC = (b"\x1f\x8b", b"\xfd7zXZ\x00", b"BZh", b"\x28\xb5\x2f\xfd")
"""Leading bytes of gzip, xz, bzip2 and zstd (`_decompressor` opens each)."""


def is_archive_file(path: str | Path) -> bool:
    """Whether the file starts as a compressed stream, a tar or a zip does: what `open_inputs` unpacks (by content,
    whatever its name), and what a fleet's `--case-mode archive` takes as a case."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(262)
    except OSError:
        return False
    return head.startswith(COMPRESSED_MAGIC) or _is_tar(head) or _is_zip(head)


def _is_tar(head: bytes) -> bool:
    return len(head) >= 262 and head[257:262] == b"ustar"


def _is_zip(head: bytes) -> bool:
    return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))


SEPARATE_CASES = 64
"""A directory with more entries than this that are each a folder or an archive holds separate cases (a fleet's crash
archive: one folder or tarball per case), not one incident, and `analyze` names `fleet scan` instead (issue 30: an
archive of 2,400 cases read as one took 46 s and 766 MB to say "GPUs with findings (488)"). A job's own outputs
(a log per rank or node) are files, which this does not count."""


def separate_cases(path: str, limit: int = SEPARATE_CASES) -> int:
    """How many entries directly under the directory `path` are folders or archives, counted up to `limit` + 1."""
    found = 0
    try:
        entries = os.scandir(path)
    except OSError:
        return 0
    with entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    found += 1
                elif entry.is_file(follow_symlinks=False):
                    found += is_archive_file(entry.path)
            except OSError:
                continue
            if found > limit:
                break
    return found


def open_inputs(paths: list[str]) -> Iterator[Blob]:
    """Every readable input under `paths`, unpacked, in a stable order."""
    run = Budget("this run", RUN_BUDGET, MAX_MEMBERS_RUN)

    def unpacking() -> Unpacking:
        return Unpacking((Budget("this input", INPUT_BUDGET, MAX_MEMBERS), run))

    for path in paths:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_STDIN + 1)
            blob_diags = [f"stdin cut at {MAX_STDIN} bytes"] if len(data) > MAX_STDIN else []
            yield from _expand("<stdin>", BytesReader(data[:MAX_STDIN]), 0, blob_diags, unpacking())
        elif os.path.isdir(path):
            for full in _walk(Path(path)):
                yield from _open_file(full, str(full), unpacking())
        else:
            yield from _open_file(Path(path), str(path), unpacking())


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root, onerror=None, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            yield Path(folder) / name


def _open_file(path: Path, display: str, unpack: Unpacking) -> Iterator[Blob]:
    try:
        if not path.is_file():
            why = "not a regular file" if os.path.lexists(path) else "no such file"
            yield Blob(display, None, diagnostics=[f"{why}; skipped"])
            return
        handle = open(path, "rb")  # noqa: SIM115 - owned by the Blob; read-only: inputs are never modified
    except OSError as exc:
        yield Blob(display, None, diagnostics=[f"cannot open: {exc.strerror or exc}"])
        return
    with handle:
        yield from _expand(display, FileReader(handle), 0, [], unpack)


def _expand(display: str, reader: ByteReader, depth: int, diagnostics: list[str],
            unpack: Unpacking) -> Iterator[Blob]:
    """Unpack one byte stream by its content into the blobs it holds."""
    head = reader.read_at(0, 512)
    codec = _decompressor(head)
    if (codec or _is_tar(head) or _is_zip(head)) and depth >= MAX_DEPTH:
        yield Blob(display, None, diagnostics=diagnostics + [f"nested more than {MAX_DEPTH} levels deep; skipped"])
        return
    if codec is not None:
        yield from _decompress(display, reader, codec, depth, diagnostics, unpack)
    elif _is_tar(head):
        yield from _tar_members(display, reader, depth, unpack)
    elif _is_zip(head):
        yield from _zip_members(display, reader, depth, unpack)
    elif head.startswith(ELF_MAGIC):
        yield Blob(display, reader, kind="elf", diagnostics=diagnostics)
    elif head.startswith(UTF16_BOMS) and b"\0" in head[2:]:
        limit = unpack.allowed(None)
        if not limit:
            yield Blob(display, None, diagnostics=diagnostics + [
                f"UTF-16 text not re-encoded: only {unpack.left()}"])
            return
        spooled = utf16_to_utf8(reader, limit)
        yield Blob(display, spooled.reader, diagnostics=diagnostics + _take(spooled, limit, "re-encoded text", unpack))
    else:
        yield Blob(display, reader, kind="prose" if display.lower().endswith(PROSE_SUFFIXES) else "text",
                   diagnostics=diagnostics)


PROSE_SUFFIXES = (".md", ".markdown")
"""A Markdown file is what a person wrote (an issue, a report, notes): the sources of people's words read it too, as
triage reads an issue's text; the log sources read it as they read any text."""


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
"""A UTF-16 byte-order mark is trusted only with a NUL after it in the head: text in UTF-16 holds one in every
space, digit or newline, while junk or a Latin-1 file may start with the same two bytes."""


def _take(spooled: Spooled, limit: int, what: str, unpack: Unpacking) -> list[str]:
    """Spend what a stream unpacked; sentences for one that stopped early (at its `limit`, or at damage)."""
    notes = []
    if spooled.truncated:
        notes.append(f"{what} cut at {_size(spooled.reader.size)}: {unpack.why_cut(limit)}")
    if spooled.error:
        notes.append(f"{what} is damaged after {spooled.reader.size} bytes ({spooled.error}); "
                     "what came before was read")
    unpack.spend(spooled.reader.size)
    return notes


def _decompress(display: str, reader: ByteReader, codec: Opener, depth: int, diagnostics: list[str],
                unpack: Unpacking) -> Iterator[Blob]:
    opener, errors = codec
    limit = unpack.allowed(None)
    if not limit:
        yield Blob(display, None, diagnostics=diagnostics + [f"not decompressed: only {unpack.left()}"])
        return
    try:
        with opener(_ReaderStream(reader)) as stream:
            spooled = spool(stream, limit, (*CODEC_ERRORS, *errors))
    except (*CODEC_ERRORS, *errors) as exc:
        yield Blob(display, None, diagnostics=diagnostics + [f"cannot decompress: {exc}"])
        return
    if spooled.error and not spooled.reader.size:
        yield Blob(display, None, diagnostics=diagnostics + [f"cannot decompress: {spooled.error}"])
        return
    notes = _take(spooled, limit, "decompressed data", unpack)
    yield from _expand(display, spooled.reader, depth + 1, diagnostics + notes, unpack)


def _member_name(display: str, raw: str, number: int) -> tuple[str, list[str]]:
    """A member's display path, and a note when its own name is unusable (empty, only slashes or dots).

    Names are made printable UTF-8 (a tar name's undecodable bytes become U+FFFD) so no later write fails.
    """
    name = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace").lstrip("/")
    if name.strip("/."):
        return f"{display}!/{name}", []
    return f"{display}!/#{number}", [f"member {number} has no usable name ({raw!r}); shown as #{number}"]


# ------------------------------------------------------------------ tar


def _tar_members(display: str, reader: ByteReader, depth: int, unpack: Unpacking) -> Iterator[Blob]:
    """Every member of a tar, read in place; past a damaged header, walking resumes at the next valid one."""
    walk = _Walk()
    start: int | None = 0
    while start is not None:
        start = yield from _tar_run(display, reader, start, depth, unpack, walk)
    yield from walk.blobs(display)


def _tar_run(display: str, reader: ByteReader, start: int, depth: int, unpack: Unpacking,
             walk: _Walk) -> Generator[Blob, None, int | None]:
    """Members from the header at `start` up to the end or a damaged block; returns where to go on, or None."""
    import tarfile

    errors: tuple[type[Exception], ...] = (*CODEC_ERRORS, tarfile.TarError)
    stream = _ReaderStream(reader, MAX_TAR_READ)
    stream.seek(start)
    try:
        archive = tarfile.TarFile(fileobj=stream, mode="r")
    except errors as exc:
        return (yield from _tar_resync(display, reader, start, f"{exc}", walk.members))
    while True:
        at = archive.offset
        try:
            member = archive.next()
            # tarfile keeps every header it parsed; one at a time is all this walk needs
            archive.members.clear()  # type: ignore[attr-defined]  # a real attribute, missing from typeshed
        except errors as exc:
            return (yield from _tar_resync(display, reader, at, f"{exc}", walk.members))
        if member is None:
            return (yield from _tar_resync(display, reader, archive.offset, "not a valid tar header", walk.members))
        spent = unpack.take_entry()
        if spent is not None:
            yield _too_many(display, spent, *_tar_entries_from(reader, at))
            return None
        if member.isdir():
            continue
        walk.members += 1
        name, notes = _member_name(display, member.name, walk.members)
        if not member.isfile():
            yield Blob(name, None, diagnostics=notes + ["link or special file in archive; skipped"])
            continue
        if not member.issparse():
            inner = SliceReader(reader, member.offset_data, member.size)
            if inner.size < member.size:
                notes.append(f"member says it holds {member.size} bytes, the archive ends after {inner.size} of "
                             "them; those were read")
            yield from _expand(name, inner, depth + 1, notes, unpack)
            continue
        limit = unpack.allowed(member.size)  # a sparse member's holes are made up as zeros: that costs
        if not limit:
            walk.skip(f"sparse members claiming more than the {unpack.left()}",
                        f"{name}, {_size(member.size)}")
            continue
        extracted = archive.extractfile(member)
        assert extracted is not None  # None only for a member that is not a regular file, skipped above
        spooled = spool(extracted, limit, errors)
        yield from _expand(name, spooled.reader, depth + 1, notes + _take(spooled, limit, "member", unpack), unpack)


TAR_META_TYPES = frozenset(b"xgLK")
"""Header types that describe the next member (PAX, GNU long name and link) rather than being one."""
MAX_COUNTED = 1_000_000
"""Most tar headers counted past an entry budget, to say how many were skipped: a hop of a few microseconds each,
not a walk (no member is read)."""


def _tar_entries_from(reader: ByteReader, at: int) -> tuple[int, bool]:
    """How many members the tar holds from the header at `at` on, hopping header to header by their size fields;
    and whether that is all of them (False: MAX_COUNTED headers hopped, members or not). A damaged header ends the
    count."""
    import tarfile

    count = 0
    for _ in range(MAX_COUNTED):
        block = reader.read_at(at, TAR_BLOCK)
        if len(block) < TAR_BLOCK or not block.strip(b"\0"):
            return count, True
        try:
            size = tarfile.nti(block[124:136])  # type: ignore[attr-defined]  # in tarfile, not in typeshed
        except (tarfile.HeaderError, ValueError):
            return count, True
        if size < 0:
            return count, True
        count += block[156] not in TAR_META_TYPES
        at += TAR_BLOCK + size + (-size % TAR_BLOCK)
    return count, False


def _tar_resync(display: str, reader: ByteReader, at: int, why: str, count: int) -> Generator[Blob, None, int | None]:
    """Where walking goes on after the block at `at` stopped it: the next valid header (as GNU tar
    --ignore-zeros finds it), told as a diagnostic unless only end-of-archive zeros were passed over."""
    block = reader.read_at(at, TAR_BLOCK)
    found = _next_tar_header(reader, at + TAR_BLOCK)
    if block.count(0) == len(block):  # end of archive (or of a tar concatenated to the next)
        return found
    if found is None:
        yield Blob(display, None, diagnostics=[
            f"tar archive damaged at offset {at} ({why}) after {count} members; no valid header follows"])
    else:
        yield Blob(display, None, diagnostics=[
            f"tar archive damaged at offset {at} ({why}); {found - at} bytes skipped to the next valid header"])
    return found


def _next_tar_header(reader: ByteReader, start: int) -> int | None:
    """Offset of the first block at or after `start` that is a ustar header with a right checksum."""
    import tarfile

    errors: tuple[type[Exception], ...] = (tarfile.HeaderError, *CODEC_ERRORS)
    start += -start % TAR_BLOCK
    for chunk_at in range(start, reader.size, RESYNC_CHUNK):
        chunk = reader.read_at(chunk_at, RESYNC_CHUNK)
        for i in range(0, len(chunk) - TAR_BLOCK + 1, TAR_BLOCK):
            if chunk[i + 257:i + 262] == b"ustar":
                try:
                    tarfile.TarInfo.frombuf(chunk[i:i + TAR_BLOCK], "utf-8", "surrogateescape")
                except errors:
                    continue
                return chunk_at + i
    return None


# ------------------------------------------------------------------ zip


def zip_directory_size(reader: ByteReader) -> int:
    """Bytes of the central directory the end record (or its zip64 form) announces; 0 when none is found."""
    tail_at = max(0, reader.size - 65536 - _EOCD.size)
    tail = reader.read_at(tail_at, reader.size - tail_at)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        return 0
    *_, entries, size, _offset, _comment = _EOCD.unpack_from(tail, at)
    if (entries != 0xFFFF and size != 0xFFFFFFFF) or at < _ZIP64_LOCATOR.size:
        return size
    magic, _disk, record_at, _disks = _ZIP64_LOCATOR.unpack_from(tail, at - _ZIP64_LOCATOR.size)
    record = reader.read_at(record_at, _ZIP64_EOCD.size)
    if magic != b"PK\x06\x07" or len(record) < _ZIP64_EOCD.size or record[:4] != b"PK\x06\x06":
        return size
    return _ZIP64_EOCD.unpack(record)[8]


def overlapping_entries(infos: list) -> set[int]:
    """Indexes of zip entries whose bytes overlap another entry's: the same local header listed again, or one
    inside another's data (the layouts of zip bombs). No zip tool writes them, so none of them is read."""
    found: set[int] = set()
    owner, end = -1, -1
    for index in sorted(range(len(infos)), key=lambda i: (infos[i].header_offset, i)):
        info = infos[index]
        reach = info.header_offset + _ZIP_LOCAL_HEADER + info.compress_size
        if info.header_offset < end:
            found.update((owner, index))
            end = max(end, reach)
        else:
            owner, end = index, reach
    return found


@contextmanager
def open_member(archive, info) -> Iterator[Readable]:
    """A zip member as a stream that inflates a block at a time.

    zipfile inflates a bzip2 or LZMA member one whole compressed read at a time (a megabyte of it can hold
    gigabytes, past any memory limit), so those are opened as stored bytes and inflated here instead.
    """
    import zipfile

    if info.compress_type not in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        with archive.open(info) as stream:
            yield stream
        return
    stored = copy.copy(info)
    stored.compress_type, stored.file_size, stored.CRC = zipfile.ZIP_STORED, info.compress_size, None
    with archive.open(stored) as raw:
        if info.compress_type == zipfile.ZIP_BZIP2:
            import bz2

            with bz2.BZ2File(raw) as stream:
                yield stream
            return
        import lzma

        _version, length = struct.unpack("<HH", raw.read(4).ljust(4, b"\0"))
        props = raw.read(length)
        if length != 5 or len(props) != 5:
            raise lzma.LZMAError("the member's LZMA properties are not 5 bytes")
        pb, rest = divmod(props[0], 45)
        lp, lc = divmod(rest, 9)
        lzma1 = {"id": lzma.FILTER_LZMA1, "dict_size": int.from_bytes(props[1:], "little"), "lc": lc, "lp": lp,
                 "pb": pb}
        with lzma.LZMAFile(raw, format=lzma.FORMAT_RAW, filters=[lzma1]) as stream:
            yield stream


def _zip_members(display: str, reader: ByteReader, depth: int, unpack: Unpacking) -> Iterator[Blob]:
    import lzma  # zipfile imports it (and bz2, which raises OSError) itself
    import zipfile

    errors: tuple[type[Exception], ...] = (*CODEC_ERRORS, zipfile.BadZipFile, zipfile.LargeZipFile,
                                           NotImplementedError, RuntimeError, lzma.LZMAError)
    directory = min(zip_directory_size(reader), reader.size)
    if directory > MAX_ZIP_DIRECTORY:
        why = f"its list of members is {_size(directory)}, more than the {_size(MAX_ZIP_DIRECTORY)} read"
        yield Blob(display, None, diagnostics=[f"zip archive not read: {why}"])
        return
    try:
        archive = zipfile.ZipFile(_ReaderStream(reader, MAX_ZIP_DIRECTORY))  # no read is larger than the directory
        infos = archive.infolist()
    except errors as exc:
        yield Blob(display, None, diagnostics=[f"cannot read zip archive: {exc}"])
        return
    overlapping = overlapping_entries(infos)
    walk = _Walk()
    for index, info in enumerate(infos):
        if index in overlapping:
            walk.skip("their bytes overlap another member's, which only a crafted zip (a zip bomb) does",
                      info.filename)
            continue
        spent = unpack.take_entry()
        if spent is not None:
            yield _too_many(display, spent, len(infos) - index)
            break
        if info.filename.endswith("/") and not info.file_size:  # ZipInfo.is_dir fails on an empty name
            continue
        walk.members += 1
        name, notes = _member_name(display, info.filename, walk.members)
        limit = unpack.allowed(info.file_size)
        if not limit:
            walk.skip(f"members larger than the {unpack.left()}", f"{name}, {_size(info.file_size)}")
            continue
        try:
            with open_member(archive, info) as stream:
                spooled = spool(stream, limit, errors)
        except errors as exc:
            yield Blob(name, None, diagnostics=notes + [f"cannot read member: {exc}"])
            continue
        if spooled.error and not spooled.reader.size:
            yield Blob(name, None, diagnostics=notes + [f"cannot read member: {spooled.error}"])
            continue
        notes += _take(spooled, limit, "member", unpack)
        yield from _expand(name, spooled.reader, depth + 1, notes, unpack)
    yield from walk.blobs(display)
