"""What several source tests share: one source run alone, a database of chosen files."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

from postmortem.model import Event
from postmortem.prefilter import Prefilter
from postmortem.reader import BytesReader
from postmortem.signatures import Database, load
from postmortem.text import TextDoc

SIGNATURES = Path(__file__).parent.parent / "signatures"


def parse_alone(source: ModuleType, raw: bytes, name: str = "<test>", use_hyperscan: bool = True) -> list[Event]:
    """Events of `raw` parsed by `source` on its own prefilter (no other source involved)."""
    doc = TextDoc(BytesReader(raw), name)
    lines = doc.scan(Prefilter({source.NAME: source.ANCHORS}, use_hyperscan=use_hyperscan))
    return list(source.parse(doc, lines))


def database_with(directory: Path, *files: str) -> Database:
    """A database of causes.yaml and the named signature files only."""
    for name in ("causes.yaml", *files):
        shutil.copy(SIGNATURES / name, directory)
    return load(directory)
