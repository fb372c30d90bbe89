"""The one step every table generator ends with: write the table, or with --check say whether the checked-in one is
what the generator makes now (a changed source or generator shows as exit status 1)."""

from __future__ import annotations

from pathlib import Path


def write_or_check(out: Path, text: str, check: bool) -> int:
    if check:
        return 0 if out.read_text(encoding="utf-8") == text else 1
    out.write_text(text, encoding="utf-8")
    return 0
