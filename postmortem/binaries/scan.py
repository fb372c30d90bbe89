"""Which files to inventory: files, directories (recursive), a virtualenv's site-packages, wheels (zip).

Every ELF file found is read for fatbins (`fatbin.inventory`); a wheel's members
are read from memory without extracting it. The result says per library its
fatbins and, for a target GPU, its verdict (runs natively / via PTX JIT / not).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import regex

from . import fatbin
from .fatbin import Inventory, Verdict

ZIP_SUFFIXES = (".whl", ".zip", ".egg")
MAX_MEMBER = 4 << 30
_DRIVER_FILE = regex.compile(r"(?:^|/)libcuda\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


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
    for name, opener in _files(paths, notes, seen):
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


def _files(paths: list[str], notes: list[str], seen: set[str]) -> Iterator[tuple[str, object]]:
    """(display name, opener) for every regular file under `paths`, zip members included."""
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                for name in sorted(names):
                    yield from _file(os.path.join(root, name), notes, seen)
        elif os.path.exists(path):
            yield from _file(path, notes, seen)
        else:
            notes.append(f"{path}: no such file or directory")


def _file(path: str, notes: list[str], seen: set[str]) -> Iterator[tuple[str, object]]:
    if os.path.islink(path) and os.path.isdir(path) or not os.path.isfile(path):
        return
    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    if path.endswith(ZIP_SUFFIXES) and zipfile.is_zipfile(path):
        yield from _members(path, notes)
    else:
        yield path, lambda: fatbin.file_reader(path)


def _members(path: str, notes: list[str]) -> Iterator[tuple[str, object]]:
    """The members of a wheel or zip, each read into memory when opened."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        notes.append(f"{path}: unreadable archive ({exc})")
        return
    with archive:
        for info in archive.infolist():
            if info.is_dir() or info.file_size > MAX_MEMBER:
                continue
            with archive.open(info) as member:
                if member.read(4) != b"\x7fELF":
                    continue

            def opener(info: zipfile.ZipInfo = info):
                data = archive.read(info)
                return (lambda offset, length: data[offset:offset + length] if offset >= 0 else b""), len(data), \
                    (lambda: None)

            yield f"{path}!/{info.filename}", opener
