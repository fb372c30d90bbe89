"""A wall-clock budget for one piece of work in this process (SIGALRM: the main thread of a process only).

The fleet scan gives each case one (fleet/scan.py), `triage` gives each issue one: an input that would take
hours ends as a diagnostic, and the rest goes on.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Overtime(BaseException):
    """Raised into work that outran its budget (BaseException: the pipeline's own handlers must not eat it)."""


def available() -> bool:
    """Whether a budget can be set here: signals reach the main thread only."""
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Overtime inside the block once `seconds` have passed; the previous handler comes back after."""
    def overtime(signum: int, frame: object) -> None:
        raise Overtime

    previous = signal.signal(signal.SIGALRM, overtime)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
