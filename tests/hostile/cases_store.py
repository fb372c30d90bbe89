"""Round 3, items 10 and 14: what `--db` / `--store` may point at, and case folders whose names are not UTF-8.

A store is opened only when it is a postmortem store (or empty, or new): another application's SQLite file is
refused unchanged, a damaged one (pages overwritten, or random bytes) is a one-line error; every command that
opens a store answers so, exit 2. Measured on a shared 2-core VM: each refusal 0.2-0.7 s, under 50 MiB; the scan
of the folders with a non-UTF-8 name 0.6 s. Bounds: 10-15 s (the machine's load varies), 1 GiB of address space.
"""

from __future__ import annotations

import os
import random
import sqlite3
from functools import partial
from pathlib import Path

from .harness import GiB, Hostile, Run

XID = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
PAGE = 4096


def _cases(directory: Path, count: int = 3) -> Path:
    """A folder of `count` cases, each an Xid 79 log of its own (different content: different cases)."""
    root = directory / "fleet"
    for i in range(count):
        (root / f"node{i}").mkdir(parents=True)
        (root / f"node{i}" / "dmesg.txt").write_text(f"[ {i}.000001] booted node{i}\n" + XID)
    return root


def other_application(path: Path) -> None:
    """A real SQLite database of another program: its own tables and rows, no postmortem marker."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)")  # as Rails names its own
        conn.executemany("INSERT INTO users (name) VALUES (?)", [(f"user{i}",) for i in range(500)])
        conn.execute("INSERT INTO schema_migrations VALUES ('20240101000000')")
    conn.close()


def damaged_store(directory: Path, path: Path) -> None:
    """A real store of 300 scanned cases whose middle third of pages is overwritten with junk."""
    from postmortem.fleet.scan import scan

    scan(_cases(directory / "built", 300), path, jobs=1)
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE
    junk = random.Random(14).randbytes((pages // 3) * PAGE)
    data[(pages // 3) * PAGE:(pages // 3) * PAGE + len(junk)] = junk
    path.write_bytes(bytes(data))


def random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(14).randbytes(64 * 1024))


STORES = {"another-apps-sqlite": other_application, "random-bytes": random_bytes}


def _command(name: str, directory: Path, db: Path) -> Run:
    if name == "scan":
        return Run(["scan", str(_cases(directory).relative_to(directory)), "--db", db.name, "-j", "1"],
                   exit_codes=(2,))
    if name == "triage":
        (directory / "issue.md").write_text(f"# GPU lost\n\n```\n{XID}```\n")
        return Run(["triage", "issue.md", "--store", db.name], exit_codes=(2,))
    read_only = (f"{db.name}-wal", f"{db.name}-shm")  # what SQLite leaves beside a WAL store opened read-only
    if name == "report":
        return Run(["report", "--db", db.name, "-o", "fleet.html"], exit_codes=(2,), outputs=read_only)
    return Run(["buckets", "--db", db.name], exit_codes=(2,), outputs=read_only)


def _refused(kind: str, command: str, directory: Path) -> Run:
    db = directory / "store.sqlite"
    if kind == "damaged-pages":
        damaged_store(directory, db)
    else:
        STORES[kind](db)
    return _command(command, directory, db)


def _non_utf8_folder(directory: Path) -> Run:
    root = _cases(directory, 2)
    odd = root / os.fsdecode(b"\xff\xfe-node")
    odd.mkdir()
    (odd / "dmesg.txt").write_text("[ 9.5] other boot\n" + XID)
    return Run(["scan", "fleet", "--db", "s.sqlite", "-j", "1"], evidence=("fleet/\\xff\\xfe-node", "gpu-off-bus"),
               outputs=("s.sqlite",))


COMMANDS = ("scan", "buckets", "report", "triage")
CASES = [
    *(Hostile(14, f"{kind}-as-store-{command}", partial(_refused, kind, command), wall_s=10, address_space=GiB)
      for kind in ("another-apps-sqlite", "random-bytes", "damaged-pages") for command in COMMANDS),
    Hostile(10, "case-folder-named-ff-fe-scanned", _non_utf8_folder, wall_s=15, address_space=GiB),
]
