"""Installing the package: on a Python older than 3.11 the build stops with the reason (hatch_build.py), not with
pip 23's "No matching distribution found for demangle" (issue 30: what a 3.10 user saw)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))

import hatch_build  # noqa: E402 - the build hook at the repository's root


def _python_310() -> str | None:
    """A Python 3.10 that runs (pyenv's builds first: its shim on PATH runs only where a version is selected)."""
    for candidate in [*map(str, sorted(Path.home().glob(".pyenv/versions/3.10*/bin/python3.10"))),
                      shutil.which("python3.10")]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True, check=False,
                                        timeout=60).returncode == 0:
            return candidate
    return None


PYTHON_310 = _python_310()


def test_the_hook_refuses_an_older_python_with_the_reason(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    with pytest.raises(SystemExit, match=r"postmortem needs Python 3\.11 or newer; this pip runs Python 3\.10\.13"):
        hatch_build.CustomMetadataHook(str(ROOT), {}).update({})


def test_the_hook_lets_this_python_build():
    metadata: dict = {}
    hatch_build.CustomMetadataHook(str(ROOT), {}).update(metadata)
    assert metadata == {}


@pytest.mark.skipif(PYTHON_310 is None, reason="no Python 3.10 here (pyenv's or python3.10 on PATH)")
def test_pip_on_python_310_says_which_python_it_needs(tmp_path):
    """The README's install command as a 3.10 user runs it, with that interpreter's own pip."""
    subprocess.run([PYTHON_310, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=120)
    done = subprocess.run([str(tmp_path / "venv" / "bin" / "pip"), "install", "--no-cache-dir", str(ROOT)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode != 0
    assert "postmortem needs Python 3.11 or newer" in done.stdout + done.stderr
    assert "No matching distribution found" not in done.stdout + done.stderr
