"""Without ../shared, the run says so in one line (conftest.py), however many tests need it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_skips_without_the_shared_checkout_are_one_line(tmp_path: Path) -> None:
    absent = tmp_path / "no-shared-here"
    # tests of two files that need ../shared: the spec and reference checks and the kernel-log corpus cases
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
                          "vocabulary or xid_catalog or documented or corpus_case",
                          str(HERE / "test_signatures.py"), str(HERE / "test_kernel_log.py")],
                         cwd=HERE.parent, env={**os.environ, "POSTMORTEM_TEST_SHARED": str(absent)},
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    said = [line for line in run.stdout.splitlines() if str(absent) in line]
    assert len(said) == 1, run.stdout
    skipped = int(said[0].split()[0])
    assert skipped >= 4 and said[0] == (f"{skipped} tests skipped: {absent} (the shared corpus, spec and reference) "
                                        "is not beside this checkout")
