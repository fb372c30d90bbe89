"""Which files make one case, and a case's stable id: the digest of its content.

How a case is delimited is the user's choice (`CASE_MODES`); nothing is
guessed from names. A case's id is the digest of its files' relative names and
contents, so the same crash copied or moved elsewhere is the same case, and a
case whose files changed is a new one. Before hashing, a cheap key made of
names, sizes and modification times tells a re-scan which cases cannot have
changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..inputs import is_archive_file
from ..reader import FileReader, core_digest

CASE_MODES = {
    "dir": "each entry directly under PATH is one case: a directory (every file below it), an archive or a lone file",
    "file": "every regular file anywhere under PATH is its own case",
    "archive": "every tar, zip or compressed file anywhere under PATH is its own case; other files are ignored",
}
"""--case-mode values and what each means (shown by `postmortem scan --help`)."""


SAMPLED_ABOVE = 64 * 1024 * 1024
"""ELF files (cores) larger than this are digested by samples and their notes (`reader.core_digest`, as
`pipeline` digests cores); any other file is digested whole, since two logs may differ only in the middle."""


@dataclass(frozen=True)
class Case:
    """One case as found on disk: where it is, its files, and the cheap change key of those files."""

    path: str
    files: tuple[str, ...]
    stat_key: str


def discover(root: str | Path, mode: str = "dir") -> Iterator[Case]:
    """The cases under `root` in a stable order (sorted names); `mode` is a key of CASE_MODES."""
    if mode not in CASE_MODES:
        raise ValueError(f"unknown case mode {mode!r}; one of {', '.join(CASE_MODES)}")
    root = Path(root)
    if root.is_file():
        yield _case(root, [root])
        return
    if mode == "dir":
        for entry in sorted(root.iterdir(), key=lambda p: p.name):
            files = (_files_under(entry) if entry.is_dir() and not entry.is_symlink()
                     else [entry] if entry.is_file() else [])
            if files:
                yield _case(entry, files)
        return
    for path in _files_under(root):
        if mode == "file" or is_archive_file(path):
            yield _case(path, [path])


def _files_under(root: Path) -> list[Path]:
    """Regular files below `root`, sorted, links not followed (a link could leave the case)."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        found.extend(path for path in (Path(folder) / name for name in sorted(files))
                     if not path.is_symlink() and path.is_file())  # no links, FIFOs or devices
    return found


def _case(path: Path, files: list[Path]) -> Case:
    parts = []
    for file in files:
        try:
            info = file.stat()
        except OSError:
            continue
        parts.append(f"{_relative(file, path)}\0{info.st_size}\0{info.st_mtime_ns}")
    key = hashlib.sha1("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()
    return Case(str(path), tuple(str(f) for f in files), key)


def _relative(file: Path, case_path: Path) -> str:
    return file.name if file == case_path else str(file.relative_to(case_path))



def case_digest(case: Case) -> str:
    """sha256 over each file's relative name and content digest: the case's identity wherever it lies."""
    total = hashlib.sha256()
    base = Path(case.path)
    for name in case.files:
        file = Path(name)
        total.update(_relative(file, base).encode("utf-8", "surrogateescape") + b"\0")
        total.update(file_digest(file).encode() + b"\n")
    return total.hexdigest()


def file_digest(path: Path) -> str:
    """A file's sha256; a core above SAMPLED_ABOVE bytes is sampled (`reader.core_digest`, which the prefix says)."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        reader = FileReader(handle)
        if reader.size > SAMPLED_ABOVE and reader.read_at(0, 4) == b"\x7fELF":
            return core_digest(reader)
        while chunk := handle.read(1024 * 1024):
            sha.update(chunk)
    return sha.hexdigest()


def case_id(digest: str) -> str:
    """The short id people see and type: the first 16 hex digits of the case digest."""
    return digest[:16]
