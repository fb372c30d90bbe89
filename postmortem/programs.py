"""Which programs postmortem starts: only those found on the absolute directories of PATH.

An empty or relative PATH entry (`PATH=.:/usr/bin`, `PATH=:/usr/bin`) names the
working directory, where the files of strangers being analysed or collected
lie; a `c++filt` or `nvidia-smi` planted there must never run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping


def trusted_path(path: str | None) -> str:
    """PATH without its empty and relative entries."""
    return os.pathsep.join(entry for entry in (path or os.defpath).split(os.pathsep) if os.path.isabs(entry))


def find_program(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The absolute path of `name` on the trusted part of PATH (of `environ`, else ours), or None."""
    return shutil.which(name, path=trusted_path((environ if environ is not None else os.environ).get("PATH")))
