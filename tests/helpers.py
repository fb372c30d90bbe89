"""What several source tests share: one source run alone, a database of chosen files."""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from postmortem.model import Event
from postmortem.prefilter import Prefilter
from postmortem.reader import BytesReader
from postmortem.signatures import Database, load
from postmortem.text import TextDoc

SIGNATURES = Path(__file__).parent.parent / "signatures"
GIVEN = Path(__file__).parent / "given"
"""The project's given corpus, spec vocabulary, reference tables and peers' test data, copied in (given/README.md)."""


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


def catalog_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a vendor message catalog under tests/data: tab-separated, a header, `#` lines are comments."""
    import csv

    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t",
                                   quoting=csv.QUOTE_NONE))


PRINTF_CONVERSION = re.compile(
    r"%(?P<flags>[-+ #0]*)(?P<width>\d*)(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L|I64)?(?P<conv>[a-zA-Z%])")
"""One conversion of a C format string (`%s`, `%04x`, `%llu`, `%%`)."""


def printf_filled(template: str, words: Mapping[str, str]) -> str:
    """`template` as the program prints it with plausible values: a conversion `words` names takes that value, a
    number is 0 in the width it asks (so `%04x:%02x:%02x.%x` reads as a PCI address)."""
    def value(m: re.Match) -> str:
        if m["conv"] in words:
            return words[m["conv"]]
        return f"{0:{m['flags'] or ''}{m['width']}{'x' if m['conv'] in 'xX' else 'd'}}"

    return PRINTF_CONVERSION.sub(value, template)


DATA = Path(__file__).parent / "data"


def oom_kill_before_watchdog(tmp_path: Path) -> list[str]:
    """A real multi-rank NCCL watchdog log (Dec 6, 18:44:12, Timeout(ms)=600000) and a real OOM kill whose dmesg -T
    stamp is moved to 9 minutes before it (only the stamp changed): one incident, the kill inside the wait."""
    oom = (DATA / "kernel_log" / "oomkill-python-dmesg-t-03.dmesg.txt").read_text()
    dmesg = tmp_path / "dmesg.txt"
    dmesg.write_text(oom.replace("Sun Mar 30 08:24:00 2025", "Fri Dec  6 18:35:10 2024"))
    return [str(DATA / "nccl_log" / "timeout-llamafactory.log"), str(dmesg)]
