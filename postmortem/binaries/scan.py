"""Which files to inventory: files, directories (recursive), a virtualenv's site-packages, wheels (zip).

Every ELF file found is read for fatbins (`fatbin.inventory`); a wheel's members
are read from memory without extracting it. The result says per library its
fatbins and, for a target GPU, its verdict (runs natively / via PTX JIT / not).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from .. import later
from ..inputs import (
    CODEC_ERRORS,
    MAX_MEMBERS,
    MAX_MEMBERS_RUN,
    MAX_ZIP_DIRECTORY,
    Budget,
    Unpacking,
    open_member,
    overlapping_entries,
    zip_directory_size,
)
from ..reader import FileReader, spool
from . import fatbin
from .fatbin import Inventory, Verdict

ZIP_SUFFIXES = (".whl", ".zip", ".egg")
MAX_MEMBER = 2 << 30
"""Largest wheel member inflated: the biggest CUDA libraries wheels ship (libtorch_cuda, cuBLASLt) are under
1.5 GiB. A bigger one is named and skipped, not cut: a library's fatbin sections may lie anywhere in it."""
ARCHIVE_BUDGET = 8 << 30
"""Most bytes inflated from one wheel or zip: a CUDA wheel holds a few GiB of libraries."""
RUN_BUDGET = 32 << 30
"""Most bytes inflated from all the archives of one `gpu-arch` run (a virtualenv's worth of wheels)."""
_DRIVER_FILE = later.compile(r"(?:^|/)libcuda\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class Library:
    """One file with device code, its inventory and (with a target) its verdicts."""

    inventory: Inventory
    verdict: Verdict | None = None
    fatbin_verdicts: tuple[Verdict | None, ...] = ()


def scan(paths: list[str], kernels: bool = False) -> tuple[list[Inventory], int, list[str], str | None]:
    """Inventories of every ELF file under `paths` that holds fatbins (plus the count of those that hold none)."""
    found: list[Inventory] = []
    empty = 0
    notes: list[str] = []
    driver = None
    seen: set[str] = set()
    run = Budget("this run", RUN_BUDGET, MAX_MEMBERS_RUN)
    for name, opener in _files(paths, notes, seen, run):
        if (m := _DRIVER_FILE.search(name)) and driver is None:
            driver = m.group(1)
        try:
            read, size, close = opener()
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            notes.append(f"{name}: unreadable ({exc})")
            continue
        try:
            if read(0, 4) != b"\x7fELF" and not name.endswith((".fatbin", ".cubin")):
                continue
            result = fatbin.inventory(read, size, name, kernels)
        finally:
            close()
        if result.fatbins or result.diagnostics:
            found.append(result)
        else:
            empty += 1
    return found, empty, notes, driver


def judge(inventories: list[Inventory], target: int | None, driver: str | None) -> list[Library]:
    """Each inventory with its library and per-fatbin verdicts for `target` (none without a target)."""
    if target is None:
        return [Library(inv) for inv in inventories]
    libraries = []
    for inv in inventories:
        overall, per = fatbin.library_verdict(inv, target, driver)
        libraries.append(Library(inv, overall, tuple(per)))
    return libraries


_Opener = Callable[[], tuple[Callable[[int, int], bytes], int, Callable[[], None]]]
"""Opens one file or member: its Read, its size and a close function (fatbin.file_reader's shape)."""


def _files(paths: list[str], notes: list[str], seen: set[str], run: Budget) -> Iterator[tuple[str, _Opener]]:
    """(display name, opener) for every regular file under `paths`, zip members included."""
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                for name in sorted(names):
                    yield from _file(os.path.join(root, name), notes, seen, run)
        elif os.path.exists(path):
            yield from _file(path, notes, seen, run)
        else:
            notes.append(f"{path}: no such file or directory")


def _file(path: str, notes: list[str], seen: set[str], run: Budget) -> Iterator[tuple[str, _Opener]]:
    if (os.path.islink(path) and os.path.isdir(path)) or not os.path.isfile(path):
        return
    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    if path.endswith(ZIP_SUFFIXES) and zipfile.is_zipfile(path):
        yield from _members(path, notes, run)
    else:
        yield path, lambda: fatbin.file_reader(path)


def _members(path: str, notes: list[str], run: Budget) -> Iterator[tuple[str, _Opener]]:
    """The ELF members of a wheel or zip, each inflated (into memory, or an unnamed temp file) when opened.

    Bounded as `analyze` bounds archives: the central directory's size, overlapping entries refused, each
    member's size, and the bytes and members per archive and per run.
    """
    import lzma

    errors: tuple[type[Exception], ...] = (*CODEC_ERRORS, zipfile.BadZipFile, zipfile.LargeZipFile,
                                           NotImplementedError, RuntimeError, lzma.LZMAError)
    try:
        with open(path, "rb") as handle:
            directory = zip_directory_size(FileReader(handle))
        if directory > MAX_ZIP_DIRECTORY:
            notes.append(f"{path}: not read, its list of members is {directory} bytes, more than the "
                         f"{MAX_ZIP_DIRECTORY} read")
            return
        archive = zipfile.ZipFile(path)
        infos = archive.infolist()
    except errors as exc:
        notes.append(f"{path}: unreadable archive ({exc})")
        return
    unpack = Unpacking((Budget("this archive", ARCHIVE_BUDGET, MAX_MEMBERS), run))
    overlapping = overlapping_entries(infos)
    if overlapping:
        notes.append(f"{path}: {len(overlapping)} members skipped unread, their bytes overlap another member's "
                     "(which only a crafted zip does)")
    with archive:
        for index, info in enumerate(infos):
            name = f"{path}!/{info.filename}"
            if index in overlapping or info.filename.endswith("/"):  # not is_dir(): it fails on an empty name
                continue
            spent = unpack.take_entry()
            if spent is not None:
                notes.append(f"{path}: more than {spent.entries} members in {spent.scope}; the rest skipped")
                return
            if info.file_size > MAX_MEMBER:
                notes.append(f"{name}: {info.file_size} bytes unpacked, more than the {MAX_MEMBER} read of one "
                             "member; skipped")
                continue
            try:
                with open_member(archive, info) as member:
                    if member.read(4) != b"\x7fELF":
                        continue
            except errors as exc:
                notes.append(f"{name}: unreadable member ({exc})")
                continue
            if info.file_size > unpack.tightest().bytes_left:
                notes.append(f"{name}: skipped, its {info.file_size} bytes are more than the {unpack.left()}")
                continue
            unpack.spend(info.file_size)
            yield name, partial(_inflated, archive, info, errors)


def _inflated(archive: zipfile.ZipFile, info: zipfile.ZipInfo,
              errors: tuple[type[Exception], ...]) -> tuple[Callable[[int, int], bytes], int, Callable[[], None]]:
    """A Read over one member inflated up to its listed size, its size, and a close function."""
    try:
        with open_member(archive, info) as member:
            spooled = spool(member, info.file_size, errors)
    except errors as exc:
        raise ValueError(f"damaged ({exc})") from exc
    if spooled.error:
        raise ValueError(f"damaged after {spooled.reader.size} bytes ({spooled.error})")
    reader = spooled.reader
    close = reader.handle.close if isinstance(reader, FileReader) else (lambda: None)
    return reader.read_at, reader.size, close
