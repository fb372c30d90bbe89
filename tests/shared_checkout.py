"""../shared (the given corpus, spec and reference) beside this checkout, and the one way to skip without it.

Every test that needs a file of it skips with the reason NO_SHARED, and conftest.py folds those skips into one
line at the end of the run: a checkout without ../shared says so once, not once per test. POSTMORTEM_TEST_SHARED
names another place for it (the test of that line points it at a directory that does not exist).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("POSTMORTEM_TEST_SHARED") or Path(__file__).resolve().parents[2] / "shared")
NO_SHARED = f"{SHARED} (the shared corpus, spec and reference) is not beside this checkout"


def skip_reason(path: Path) -> str:
    """Why a test that needs `path` (under SHARED) cannot run: NO_SHARED unless only that file is missing."""
    return NO_SHARED if not SHARED.is_dir() else f"{path} is missing from {SHARED}"


def needs(path: Path) -> pytest.MarkDecorator:
    """Skip the test when `path` under SHARED is not here."""
    return pytest.mark.skipif(not path.exists(), reason=skip_reason(path))
