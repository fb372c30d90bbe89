"""One line at the end of a run for every test skipped because ../shared is not here (shared_checkout.py)."""

from __future__ import annotations

import pytest

from shared_checkout import NO_SHARED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """'N tests skipped: <NO_SHARED>' instead of a reason per test (which -rs would print, one per file)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if isinstance(r.longrepr, tuple) and r.longrepr[2].endswith(NO_SHARED)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} tests skipped: {NO_SHARED}")
