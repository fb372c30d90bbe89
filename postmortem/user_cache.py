"""What start-up would otherwise rebuild on every run, kept between runs in the user's cache directory.

A one-line log used to cost a third of a second, most of it spent rebuilding the same things: parsing the YAML
signature database and compiling the prefilter's Hyperscan database (issue 28). Both depend only on files that do
not change between runs, so each is kept under a key made of what it was built from (the signature files' bytes,
the anchors, the package's version): a changed input is a new key, never a stale entry.

Where: `$POSTMORTEM_CACHE` (a directory, or `off` to keep nothing), else `$XDG_CACHE_HOME/postmortem`, else
`~/.cache/postmortem`; the command line's `--cache` sets the same variable.

The cache is never trusted. An entry is read only from a directory and a file that belong to the user running
postmortem and that nobody else may write; its payload must match the SHA-256 stored beside it; its consumer still
checks what it reads (JSON parsed and validated, a Hyperscan database loaded by Hyperscan's own checks). Anything
wrong is an entry not found: rebuilt and written again. Writing is atomic (a temporary file renamed) and a failure
to write (a read-only home, a full disk) only costs the next run the rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from . import __version__

ENV = "POSTMORTEM_CACHE"
OFF = "off"
MAGIC = b"postmortem-cache-1\n"
MAX_ENTRY = 64 * 1024 * 1024
"""An entry larger than this is not read: none of ours comes near it, a planted one may."""


def directory() -> Path | None:
    """The cache directory in force, or None when caching is off."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "postmortem"


def key(*parts: bytes | str) -> str:
    """A cache key over everything an entry is built from, and the package's version (a new release rebuilds)."""
    digest = hashlib.sha256(__version__.encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:40]


def read(kind: str, entry_key: str) -> bytes | None:
    """The payload stored under (kind, key), or None: absent, off, not ours, or not what was written."""
    path = _path(kind, entry_key)
    if path is None or not _private(path.parent):
        return None
    try:  # not following a link, not waiting on a FIFO planted in its place
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or not _private_stat(info) or info.st_size > MAX_ENTRY:
            return None
        data = handle.read(MAX_ENTRY + 1)
    head = len(MAGIC) + 32
    if not data.startswith(MAGIC) or len(data) < head:
        return None
    payload = data[head:]
    return payload if hashlib.sha256(payload).digest() == data[len(MAGIC):head] else None


def write(kind: str, entry_key: str, payload: bytes) -> None:
    """Store `payload` under (kind, key); any failure leaves the cache as it was."""
    path = _path(kind, entry_key)
    if path is None or len(payload) > MAX_ENTRY:
        return
    import tempfile  # only a run that writes pays for it (random, shutil): most runs only read

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(path.parent):
            return
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{kind}-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(temporary, path)
        except OSError:
            os.unlink(temporary)
    except OSError:
        return


def read_json(kind: str, entry_key: str) -> Any:
    """The JSON value stored under (kind, key), or None (an entry that does not parse is none)."""
    stored = read(kind, entry_key)
    try:
        return json.loads(stored) if stored is not None else None
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser follows
        return None


def write_json(kind: str, entry_key: str, value: Any) -> None:
    """Keep `value` when JSON holds it exactly (parsed YAML may hold what JSON cannot: a date, a number as a key)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return
    if json.loads(text) == value:
        write(kind, entry_key, text.encode())


def parsed_yaml(path: Path) -> Any:
    """A YAML file of the package's own (the interface's words, the causes: each a mapping) as parsed, from the cache
    when an earlier run parsed the same bytes: importing and running the YAML parser costs more than the whole rest
    of a short report. A kept entry that is not a mapping is not one of these, and the file is parsed again."""
    content = path.read_bytes()
    entry = key(path.name, content)
    if isinstance(kept := read_json("yaml", entry), dict):
        return kept
    document = _load_yaml(content)
    write_json("yaml", entry, document)
    return document


def _load_yaml(content: bytes) -> Any:
    import yaml

    return yaml.load(content.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _path(kind: str, entry_key: str) -> Path | None:
    where = directory()
    return None if where is None else where / f"{kind}-{entry_key}"


def _private(folder: Path) -> bool:
    """A directory that is the user's own and that no one else may write (nor swap for a link)."""
    try:
        return stat.S_ISDIR(os.lstat(folder).st_mode) and _private_stat(os.lstat(folder))
    except OSError:
        return False


def _private_stat(info: os.stat_result) -> bool:
    """Owned by this user, writable by no one else (where there are no user ids, nothing is trusted)."""
    uid = getattr(os, "getuid", None)
    return uid is not None and info.st_uid == uid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
